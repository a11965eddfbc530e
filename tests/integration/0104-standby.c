/*
 * 0104-standby.c - relays sharing one slot: one streams, the others stand by
 * and take over when it goes away.
 *
 * Two relays start together on one slot: exactly one streams, the other
 * stands by, and the slot is held by the streaming relay's walsender.
 * Events arrive once. SIGTERM the active relay (exit 0): the standby takes
 * over and streams the events written next. Then that relay is killed with
 * SIGKILL right after a batch of events (some still in flight) while a third
 * relay stands by: it must take over, also relaying what was written while
 * no relay streamed. A standby stops cleanly on SIGTERM. Every committed
 * event must be in Kafka (none lost); duplicates are reported, not failed
 * (at-least-once: kill -9 may repeat what was sent but not yet confirmed).
 * A relay whose slot another kind of client holds (test_decoding) stands by
 * too, and refuses the slot once it is free.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <dirent.h>
#include <librdkafka/rdkafka.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define BATCH 200 /* events per phase, in transactions of 10 */

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}


static bool log_has(h_relay_t *r, const char *needle)
{
        return h_relay_wait_log(r, needle, 0);
}

/*
 * Whether process pid has an open TCP socket whose local port is port: the
 * walsender's client_port identifies the relay at the other end.
 */
static bool pid_owns_local_port(pid_t pid, int port)
{
        char path[64], line[512];
        unsigned long inodes[16];
        int ninodes = 0;

        snprintf(path, sizeof(path), "/proc/%ld/net/tcp", (long)pid);
        FILE *f = fopen(path, "r");
        if (!f)
                return false;
        while (fgets(line, sizeof(line), f) && ninodes < 16) {
                unsigned local_port, d_uid;
                unsigned long inode;
                char local_addr[64];
                if (sscanf(line, " %*d: %63[0-9A-Fa-f]:%x %*s %*x %*s %*s %*s %u %*d %lu",
                           local_addr, &local_port, &d_uid, &inode) == 4 &&
                    (int)local_port == port && inode != 0)
                        inodes[ninodes++] = inode;
        }
        fclose(f);
        if (ninodes == 0)
                return false;

        snprintf(path, sizeof(path), "/proc/%ld/fd", (long)pid);
        DIR *d = opendir(path);
        if (!d)
                return false;
        bool found = false;
        struct dirent *de;
        while (!found && (de = readdir(d)) != NULL) {
                char link[320], target[128];
                snprintf(link, sizeof(link), "%s/%s", path, de->d_name);
                ssize_t n = readlink(link, target, sizeof(target) - 1);
                if (n <= 0)
                        continue;
                target[n] = '\0';
                unsigned long ino;
                if (sscanf(target, "socket:[%lu]", &ino) != 1)
                        continue;
                for (int i = 0; i < ninodes; i++)
                        if (inodes[i] == ino)
                                found = true;
        }
        closedir(d);
        return found;
}

/* The slot is active and its walsender's client is relay r. */
static bool slot_held_by(PGconn *c, const char *slot, h_relay_t *r, char *desc, size_t desclen)
{
        int64_t deadline = h_now_ms() + 10000;
        for (;;) {
                char *v = h_pg_value(c,
                                     "SELECT format('%%s %%s %%s', s.active, s.active_pid, "
                                     "a.client_port) FROM pg_replication_slots s LEFT JOIN "
                                     "pg_stat_activity a ON a.pid = s.active_pid "
                                     "WHERE s.slot_name = '%s'",
                                     slot);
                char active[8] = "";
                long wpid = 0;
                int port = 0;
                if (v)
                        sscanf(v, "%7s %ld %d", active, &wpid, &port);
                snprintf(desc, desclen,
                         "active=%s walsender pid %ld, client port %d, relay pid %ld", active, wpid,
                         port, (long)h_relay_pid(r));
                free(v);
                if (strcmp(active, "t") == 0 && port > 0 &&
                    pid_owns_local_port(h_relay_pid(r), port))
                        return true;
                if (h_now_ms() > deadline)
                        return false;
                h_sleep_ms(100);
        }
}

/* n events in transactions of 10, each aggregate's version bumped. */
static void insert_events(PGconn *c, const char *aggtype, int phase, int n)
{
        for (int i = 0; i < n; i += 10) {
                h_pg_exec(c,
                          "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                          "SELECT gen_random_uuid(), '%s', 'agg-' || (g %% 10), 'Ping', "
                          "jsonb_build_object('phase', %d, 'i', g) "
                          "FROM generate_series(%d, %d) g",
                          aggtype, phase, i, (i + 10 < n ? i + 10 : n) - 1);
        }
}


/* Wait for the events so far: in Kafka and confirmed. */
static void settle(PGconn *c, const char *slot, const char *topic, int total, h_relay_t *r,
                   const char *what)
{
        char *lsn = h_pg_value(c, "SELECT pg_current_wal_lsn()");
        int64_t got = h_kafka_wait_count(topic, total, 60000);
        bool conf = h_pg_wait_confirmed(c, slot, lsn, 60000) >= 0;
        if (!ok(got >= total && conf, "%s: Kafka holds %lld >= %d, slot confirmed past %s", what,
                (long long)got, total, lsn))
                h_relay_diag_log(r);
        free(lsn);
}

/* Wait until r logs needle; ms it took, -1 on timeout. */
static int64_t time_log(h_relay_t *r, const char *needle, int timeout_ms)
{
        int64_t t0 = h_now_ms();
        if (!h_relay_wait_log(r, needle, timeout_ms))
                return -1;
        return h_now_ms() - t0;
}

int main(void)
{
        h_case_t k;
        h_case_open(&k, "standby", "slot_sb", "sb", 2, 0);
        PGconn *c = k.c;
        const char *slot = k.slot, *aggtype = k.aggtype, *topic = k.topic, *conninfo = k.conninfo;
        char desc[256];
        const char *sets[] = {k.set_conn,
                              k.set_kafka,
                              k.set_slot,
                              "status.interval.ms=1000",
                              "reconnect.backoff.ms=100",
                              "reconnect.backoff.max.ms=2000",
                              NULL};

        /* --- two relays, one slot ---------------------------------------- */
        h_relay_t *r1 = h_relay_start(sets);
        h_relay_t *r2 = h_relay_start(sets);
        h_relay_t *active = NULL, *standby = NULL;
        int64_t deadline = h_now_ms() + 60000;
        while (h_now_ms() < deadline) {
                bool s1 = log_has(r1, "streaming from replication slot");
                bool s2 = log_has(r2, "streaming from replication slot");
                bool b1 = log_has(r1, "standing by"), b2 = log_has(r2, "standing by");
                if (s1 && b2 && !s2) {
                        active = r1;
                        standby = r2;
                        break;
                }
                if (s2 && b1 && !s1) {
                        active = r2;
                        standby = r1;
                        break;
                }
                if (s1 && s2)
                        break;
                h_sleep_ms(50);
        }
        if (!ok(active != NULL, "of two relays started together, one streams and the other "
                                "stands by")) {
                h_relay_diag_log(r1);
                h_relay_diag_log(r2);
                tap_bail("no active/standby pair");
        }
        tap_diag("active relay pid %ld, standby pid %ld", (long)h_relay_pid(active),
                 (long)h_relay_pid(standby));
        ok(slot_held_by(c, slot, active, desc, sizeof(desc)),
           "the slot is active and held by the streaming relay's walsender (%s)", desc);

        insert_events(c, aggtype, 1, BATCH);
        settle(c, slot, topic, BATCH, active, "phase 1");
        is_int(h_kafka_count(topic), BATCH, "phase 1: each event once");
        ok(!log_has(standby, "streaming from replication slot"), "the standby never streamed");
        is_int(h_relay_wait(standby, 0), -1, "the standby is still running");

        /* --- SIGTERM the active one: the standby takes over ---------------- */
        h_relay_signal(active, SIGTERM);
        int rc = h_relay_wait(active, 60000);
        is_int(rc, 0, "active relay: SIGTERM, exit 0");
        if (rc != 0)
                h_relay_diag_log(active);
        int64_t took = time_log(standby, "taking over", 30000);
        if (!ok(took >= 0, "the standby logs \"taking over\""))
                h_relay_diag_log(standby);
        else
                tap_diag("takeover after SIGTERM: %.2f s after the active relay exited",
                         took / 1000.0);
        ok(h_relay_wait_log(standby, "streaming from replication slot", 30000),
           "the former standby streams");
        h_relay_free(active);
        active = standby;
        standby = NULL;
        ok(slot_held_by(c, slot, active, desc, sizeof(desc)),
           "the slot is held by the new active relay's walsender (%s)", desc);
        insert_events(c, aggtype, 2, BATCH);
        settle(c, slot, topic, 2 * BATCH, active, "phase 2");

        /* --- SIGKILL it while events are written; a new relay takes over --- */
        h_relay_t *r3 = h_relay_start(sets);
        ok(h_relay_wait_log(r3, "standing by", 30000), "a third relay stands by");
        /* Half of the events just before the kill (some in flight, not
         * confirmed), half while no relay streams. */
        insert_events(c, aggtype, 3, BATCH / 2);
        h_relay_signal(active, SIGKILL);
        is_int(h_relay_wait(active, 30000), 128 + SIGKILL, "active relay killed with SIGKILL");
        int64_t t_kill = h_now_ms();
        tap_diag("killed with %lld of %d events in Kafka", (long long)h_kafka_count(topic),
                 2 * BATCH + BATCH / 2);
        insert_events(c, aggtype, 4, BATCH - BATCH / 2);
        took = time_log(r3, "streaming from replication slot", 60000);
        if (!ok(took >= 0, "the third relay takes over after kill -9"))
                h_relay_diag_log(r3);
        else
                tap_diag("takeover after kill -9: %.2f s", (h_now_ms() - t_kill) / 1000.0);
        ok(log_has(r3, "taking over"), "and says it is taking over");
        h_relay_free(active);
        active = r3;
        ok(slot_held_by(c, slot, active, desc, sizeof(desc)),
           "the slot is held by the third relay's walsender (%s)", desc);
        settle(c, slot, topic, 3 * BATCH, active, "phase 3");

        /* --- what Kafka holds ------------------------------------------------ */
        h_sleep_ms(2000);
        PGresult *res = PQexec(c, "SELECT id::text FROM outbox ORDER BY 1");
        if (PQresultStatus(res) != PGRES_TUPLES_OK)
                tap_bail("SELECT ids: %s", PQerrorMessage(c));
        int nids = PQntuples(res);
        char **ids = calloc((size_t)nids + 1, sizeof(char *));
        int *seen = calloc((size_t)nids + 1, sizeof(int));
        for (int i = 0; i < nids; i++)
                ids[i] = strdup(PQgetvalue(res, i, 0));
        PQclear(res);
        is_int(nids, 3 * BATCH, "PostgreSQL committed %d events", 3 * BATCH);

        h_msg_t *msgs;
        size_t n = h_kafka_consume_all(topic, &msgs);
        int unknown = 0, missing = 0, distinct = 0;
        for (size_t i = 0; i < n; i++) {
                const char *hid = h_msg_header(&msgs[i], "id", NULL);
                char **hit = hid ? bsearch(&hid, ids, (size_t)nids, sizeof(char *), cmp_str) : NULL;
                if (hit)
                        seen[hit - ids]++;
                else
                        unknown++;
        }
        for (int i = 0; i < nids; i++) {
                if (seen[i] == 0)
                        missing++;
                else
                        distinct++;
        }
        tap_diag("Kafka: %zu messages, %d distinct events, %zu duplicates", n, distinct,
                 n - (size_t)distinct);
        is_int(missing, 0, "no committed event is missing");
        is_int(unknown, 0, "every message is a committed event");

        /* A standby stops cleanly too, without ever having streamed. */
        h_relay_t *r4 = h_relay_start(sets);
        ok(h_relay_wait_log(r4, "standing by", 30000), "a fourth relay stands by");
        h_relay_signal(r4, SIGTERM);
        rc = h_relay_wait(r4, 30000);
        is_int(rc, 0, "the standby: SIGTERM, exit 0");
        ok(!log_has(r4, "streaming from replication slot"), "and it never streamed");
        if (rc != 0)
                h_relay_diag_log(r4);
        h_relay_free(r4);

        /* --- a slot of another kind that its own client holds --------------- */
        /* Whoever holds the slot, the relay stands by before it judges what
         * the slot is (a slot being created by another relay shows no plugin
         * yet); once the slot is free it looks, and refuses this one. */
        char *other = h_unique_name("slot_td");
        h_pg_exec(c, "SELECT pg_create_logical_replication_slot('%s', 'test_decoding')", other);
        char holder_ci[768], start_sql[256];
        snprintf(holder_ci, sizeof(holder_ci), "%s replication=database", conninfo);
        snprintf(start_sql, sizeof(start_sql), "START_REPLICATION SLOT %s LOGICAL 0/0", other);
        PGconn *holder = PQconnectdb(holder_ci);
        PGresult *hres = PQexec(holder, start_sql);
        if (!ok(PQresultStatus(hres) == PGRES_COPY_BOTH, "a test_decoding client holds slot %s",
                other))
                tap_bail("START_REPLICATION: %s", PQerrorMessage(holder));
        PQclear(hres);
        char set_other[128];
        snprintf(set_other, sizeof(set_other), "slot.name=%s", other);
        const char *other_sets[] = {k.set_conn, k.set_kafka, set_other, NULL};
        h_relay_t *r5 = h_relay_start(other_sets);
        ok(h_relay_wait_log(r5, "standing by", 30000),
           "a relay stands by while another kind of client holds its slot");
        ok(!log_has(r5, "not a pgoutput slot"), "and does not judge the slot meanwhile");
        PQfinish(holder);
        rc = h_relay_wait(r5, 30000);
        is_int(rc, 3, "once the slot is free, the relay refuses it (exit 3, setup)");
        if (!ok(log_has(r5, "exists but is not a pgoutput slot"), "saying it is not a pgoutput slot"))
                h_relay_diag_log(r5);
        h_relay_free(r5);
        h_pg_exec(c, "SELECT pg_drop_replication_slot('%s')", other);
        free(other);

        is_int(h_relay_stop(active, 60000), 0, "last relay: SIGTERM, exit 0");

        h_msgs_free(msgs, n);
        for (int i = 0; i < nids; i++)
                free(ids[i]);
        free(ids);
        free(seen);
        h_relay_free(active);
        h_case_close(&k);
        return done_testing();
}
