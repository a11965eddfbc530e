/*
 * 0154-inbox-sighup.c - SIGHUP neither stops nor restarts outbox-inbox.
 *
 * As for the relay (0166): PostgreSQL and PgBouncer reload their
 * configuration on SIGHUP, so an operator may send it to the inbox too; it
 * has no reload, and SIGHUP's default action ended it at once (status 129),
 * without committing the offsets of what it had applied or leaving its group.
 * Now it warns that a restart applies a changed configuration, and goes on:
 *
 *   1. idle in its consumer poll: SIGHUP, the warning, still running; the
 *      messages produced after it are applied (rows in PostgreSQL);
 *   2. in a blocking libpq wait (the handler waits for an advisory lock the
 *      test holds): SIGHUP, then the lock given up; the message is applied,
 *      the warning logged (after the statement: the wait has no turns), and
 *      the inbox is still running;
 *   3. SIGTERM: exit 0; one warning per SIGHUP; PostgreSQL holds one
 *      applied row and one inbox row per message.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"

#define LOCK 4154
#define WARNING                                                                          \
        "SIGHUP received, but outbox-inbox does not reload its configuration: restart it " \
        "(SIGTERM stops it cleanly) to apply a changed one; ignoring"

static long long count(PGconn *c, const char *table)
{
        char *sql = fx_fmt("SELECT count(*) FROM %s", table);
        long long n = h_pg_number(c, sql);
        free(sql);
        return n;
}

/* Wait up to 60 s until table holds n rows; how many it holds. */
static long long wait_rows(PGconn *c, const char *table, long long n)
{
        int64_t deadline = h_now_ms() + 60000;
        long long got;
        while ((got = count(c, table)) < n && h_now_ms() < deadline)
                h_sleep_ms(100);
        return got;
}

static void produce(const char *topic, int from, int to, const char *payload)
{
        for (int i = from; i <= to; i++) {
                char id[32];
                snprintf(id, sizeof(id), "m-%d", i);
                h_kafka_produce_hdrs(topic, id, payload, (const char *const[]){"id", id, NULL});
        }
}

/* The inbox is still running after SIGHUP when; one test point. Gone,
 * nothing after can pass: the test ends there. */
static void still_running(h_relay_t *ib, const char *when)
{
        int early = h_relay_wait(ib, 0);
        if (!ok(early == -1, "outbox-inbox is still running after SIGHUP %s (exit status %d)",
                when, early)) {
                h_relay_diag_log(ib);
                tap_bail("outbox-inbox ended on SIGHUP");
        }
}

int main(void)
{
        char *suffix = h_unique_name("ihup");
        char *cdb = h_pg_create_db("inboxhup");
        PGconn *cc = h_pg_connect(cdb);
        h_pg_exec_file(cc, "006_inbox.sql");
        h_pg_exec(cc, "CREATE TABLE applied (id text, payload jsonb);"
                      "CREATE FUNCTION on_msg(p_payload jsonb, p_id text) RETURNS void "
                      "LANGUAGE plpgsql AS $$ BEGIN "
                      "  IF p_payload ? 'wait' THEN PERFORM pg_advisory_xact_lock_shared(%d); "
                      "  END IF; "
                      "  INSERT INTO applied VALUES (p_id, p_payload); "
                      "END $$;",
                  LOCK);
        char *topic = fx_fmt("inbox.hup_%s", suffix);
        char *dlq = fx_fmt("inbox.hup.dlq_%s", suffix);
        h_kafka_create_topic(topic, 1);
        h_kafka_create_topic(dlq, 1);

        char *ci = h_pg_conninfo(cdb);
        fx_sets_t s;
        memset(&s, 0, sizeof(s));
        fx_sets_add(&s, "postgres.conninfo=%s", ci);
        fx_sets_add(&s, "kafka.bootstrap.servers=%s", h_kafka_bootstrap());
        fx_sets_add(&s, "inbox.topics=%s", topic);
        fx_sets_add(&s, "inbox.handler=%s", "SELECT on_msg($3, $7)");
        fx_sets_add(&s, "kafka.group.id=inbox-hup-%s", suffix);
        fx_sets_add(&s, "errors.dlq.topic=%s", dlq);

        produce(topic, 1, 3, "{\"n\": 1}");
        h_relay_t *ib = h_proc_start(h_env("RELAY_INBOX_BIN"), NULL, NULL, s.v);
        is_int(wait_rows(cc, "applied", 3), 3, "outbox-inbox applies the first 3 messages");

        /* 1. Idle in its consumer poll. */
        h_relay_signal(ib, SIGHUP);
        if (!ok(fx_wait_log_n(ib, WARNING, 1, 30000),
                "SIGHUP: outbox-inbox says that it does not reload, and that a restart applies "
                "a changed configuration"))
                h_relay_diag_log(ib);
        still_running(ib, "while idle");
        produce(topic, 4, 6, "{\"n\": 2}");
        is_int(wait_rows(cc, "applied", 6), 6, "the 3 messages produced after SIGHUP are applied");

        /* 2. In a blocking libpq wait: the handler waits for the lock. */
        PGconn *holder = h_pg_connect(cdb);
        h_pg_exec(holder, "SELECT pg_advisory_lock(%d)", LOCK);
        produce(topic, 7, 7, "{\"wait\": 1}");
        char *waits = NULL;
        int64_t deadline = h_now_ms() + 60000;
        while (h_now_ms() < deadline &&
               !(waits = h_pg_value(cc, "SELECT pid FROM pg_locks WHERE locktype = 'advisory' "
                                        "AND objid = %d AND NOT granted AND database = (SELECT oid "
                                    "FROM pg_database WHERE datname = current_database())",
                                    LOCK)))
                h_sleep_ms(100);
        ok(waits != NULL, "the handler of message m-7 waits for the lock");
        free(waits);
        h_relay_signal(ib, SIGHUP);
        h_pg_exec(holder, "SELECT pg_advisory_unlock(%d)", LOCK);
        PQfinish(holder);
        is_int(wait_rows(cc, "applied", 7), 7, "with the lock given up, m-7 is applied");
        if (!ok(fx_wait_log_n(ib, WARNING, 2, 30000), "and the second SIGHUP is warned of"))
                h_relay_diag_log(ib);
        still_running(ib, "while the handler waited");

        /* 3. A clean stop. */
        h_relay_signal(ib, SIGTERM);
        int rc = h_relay_wait(ib, 60000);
        if (!ok(rc == 0, "SIGTERM: clean stop, exit 0 (got %d)", rc))
                h_relay_diag_log(ib);
        ok(fx_log_count(ib, "stopped: 7 message(s) applied") == 1,
           "it applied the 7 messages, each once");
        is_int(fx_log_count(ib, WARNING), 2, "one warning per SIGHUP");
        is_int(count(cc, "applied"), 7, "PostgreSQL holds 7 applied rows");
        is_int(count(cc, "inbox"), 7, "and 7 inbox rows");
        char *dup = h_pg_value(cc, "SELECT count(*) FROM (SELECT id FROM applied GROUP BY id "
                                   "HAVING count(*) > 1) d");
        ok(dup && atoll(dup) == 0, "no message applied twice");
        free(dup);

        h_relay_free(ib);
        fx_sets_free(&s);
        PQfinish(cc);
        h_pg_drop_db(cdb);
        h_kafka_delete_topic(topic);
        h_kafka_delete_topic(dlq);
        free(suffix);
        free(cdb);
        free(topic);
        free(dlq);
        free(ci);
        return done_testing();
}
