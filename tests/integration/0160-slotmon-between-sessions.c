/*
 * 0160-slotmon-between-sessions.c - the slot monitor (slotmon.c) is stepped
 * only inside a session, so the supervisor's wait between two sessions is
 * time in which it is not looked at; that time must not count against its
 * 10 s deadline, and an answer that came meanwhile is an answer, not a
 * timeout. A timeout that is real says so in a whole sentence.
 *
 * (a) The monitor's query is held on a lock (pg_publication, which the
 *     query reads, taken ACCESS EXCLUSIVE in the test's database: not
 *     pg_replication_slots, a view whose lock reaches the shared
 *     pg_database and so every new connection), the relay's walsender is
 *     terminated, and the lock is given up as soon as
 *     the relay backs off (reconnect.backoff.ms = 20000: at least 10 s).
 *     PostgreSQL answers the query at once, during the wait; the next
 *     session must take that answer: no "could not read the slot" warning,
 *     and the side connection kept (its backend sends the next query).
 * (b) The lock held while the relay streams: the query does not end, and
 *     after 10 s the warning says why in full.
 *
 * The relay used to log, after (a), "could not read the slot (timeout): ;
 * slot metrics are missing until it works" (a reviewer saw the connecting
 * variant, libpq's partial text "connection to server at ..., port N
 * failed:" ending the message), and the same truncated line for (b).
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"

#define MONITOR "application_name = 'outbox-relay metrics' AND datname = '%s'"

/* The monitor's backend pid once its query waits for a lock (within 30 s); NULL otherwise. */
static char *monitor_waits(PGconn *c, const char *db)
{
        int64_t until = h_now_ms() + 30000;
        for (;;) {
                char *pid = h_pg_value(c,
                                       "SELECT pid::text FROM pg_catalog.pg_stat_activity "
                                       "WHERE " MONITOR " AND wait_event_type = 'Lock'",
                                       db);
                if (pid || h_now_ms() > until)
                        return pid;
                h_sleep_ms(100);
        }
}

/* Whether the monitor has connected and had its first answer (within 60
 * s). Before the lock: a backend that starts while the database has no
 * relcache init file (pg_internal.init, removed by any invalidation of a
 * catalog's entry, an autovacuum's statistics among them) rebuilds it and
 * waits for pg_publication's lock too, so a monitor still connecting
 * would wait in its connect, not in its query (CI's ASan run: "did not
 * complete the connection within 10 s"). */
static bool monitor_answered(PGconn *c, const char *db)
{
        int64_t until = h_now_ms() + 60000;
        for (;;) {
                char *pid = h_pg_value(c,
                                       "SELECT pid::text FROM pg_catalog.pg_stat_activity "
                                       "WHERE " MONITOR " AND state = 'idle' AND query_start "
                                       "IS NOT NULL",
                                       db);
                bool found = pid != NULL;
                free(pid);
                if (found || h_now_ms() > until)
                        return found;
                h_sleep_ms(100);
        }
}

/* The monitor's backend pid once it has sent a query after since (a
 * server timestamp), within 60 s; NULL otherwise. A monitor that took its
 * answer sends the next one RELAY_SLOTMON_INTERVAL_MS later on the same
 * connection; one that gave up reconnects after as long, another backend. */
static char *monitor_queried_after(PGconn *c, const char *db, const char *since)
{
        int64_t until = h_now_ms() + 60000;
        for (;;) {
                char *pid = h_pg_value(c,
                                       "SELECT pid::text FROM pg_catalog.pg_stat_activity "
                                       "WHERE " MONITOR " AND query_start > '%s'",
                                       db, since);
                if (pid || h_now_ms() > until)
                        return pid;
                h_sleep_ms(200);
        }
}

/* The log's line with needle (caller frees), "" when none. */
static char *log_line(const h_relay_t *r, const char *needle)
{
        char *log = h_relay_log(r);
        const char *p = strstr(log, needle);
        char *line;
        if (p == NULL) {
                line = strdup("");
        } else {
                while (p > log && p[-1] != '\n')
                        p--;
                line = strndup(p, strcspn(p, "\n"));
        }
        free(log);
        return line;
}

int main(void)
{
        fx_case_t fc;
        fx_case_open(&fc, "slotmongap", "sg");
        h_pg_create_outbox(fc.c, "outbox");
        h_pg_exec_file(fc.c, "002_publication.sql");
        fx_sets_init(&fc.sets, fc.db, fc.slot, NULL);
        fx_sets_add(&fc.sets, "%s", "reconnect.backoff.ms=20000");
        fx_sets_add(&fc.sets, "%s", "reconnect.backoff.max.ms=20000");
        h_relay_t *r = fx_case_relay(&fc, "relay streams");

        /* (a) */
        ok(monitor_answered(fc.c, fc.db), "the monitor is connected and has had an answer");
        PGconn *holder = h_pg_connect(fc.db);
        h_pg_exec(holder, "BEGIN");
        h_pg_exec(holder, "LOCK TABLE pg_catalog.pg_publication IN ACCESS EXCLUSIVE MODE");
        char *pid = monitor_waits(fc.c, fc.db);
        ok(pid != NULL, "the monitor's query waits for the lock");
        h_pg_exec(holder,
                  "SELECT pg_catalog.pg_terminate_backend(pid) FROM pg_catalog.pg_stat_activity "
                  "WHERE backend_type = 'walsender' AND datname = '%s'",
                  fc.db);
        ok(h_relay_wait_log(r, "retrying in", 30000),
           "walsender terminated: the session ends, the relay backs off");
        h_pg_exec(holder, "COMMIT");
        ok(fx_wait_log_n(r, "streaming from replication slot", 2, 60000),
           "the relay streams again after its wait of at least 10 s");
        /* Not the time of the COMMIT: the held query's Bind and Execute
         * come after it, and they set its query_start. */
        char *again = h_pg_value(fc.c, "SELECT pg_catalog.clock_timestamp()::text");
        char *next = monitor_queried_after(fc.c, fc.db, again);
        ok(next != NULL, "the monitor sends its next query in the new session");
        char *line = log_line(r, "read the slot");
        is_str(line, "", "no warning: PostgreSQL answered the query during the wait");
        is_str(next, pid, "the side connection is kept (the same backend)");
        free(line);
        free(next);
        free(again);
        free(pid);

        /* (b) */
        h_pg_exec(holder, "BEGIN");
        h_pg_exec(holder, "LOCK TABLE pg_catalog.pg_publication IN ACCESS EXCLUSIVE MODE");
        ok(h_relay_wait_log(r, "slot metrics are missing until it works", 60000),
           "a query held for more than 10 s while streaming: the relay warns");
        line = log_line(r, "slot metrics are missing until it works");
        ok(strstr(line, "could not read the slot: the server did not answer the query within 10 "
                        "s; slot metrics are missing until it works") != NULL,
           "the warning says why in a whole sentence: %s", line);
        free(line);
        h_pg_exec(holder, "COMMIT");
        PQfinish(holder);

        fx_stop_relay(r, "SIGTERM: exit 0");
        h_relay_free(r);
        fx_case_close(&fc, NULL);
        return done_testing();
}
