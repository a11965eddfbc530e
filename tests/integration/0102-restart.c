/*
 * 0102-restart.c - stopping the relay mid-stream loses nothing.
 *
 * (a) SIGTERM while a writer is committing 20 000 events, then a new relay
 *     with the same settings: a clean stop confirms exactly what Kafka
 *     acknowledged, so Kafka ends up with every committed event exactly
 *     once, each aggregate's versions 1..N in partition order.
 * (b) The same with SIGKILL twice (at ~5 000 and ~12 000 events in Kafka):
 *     at-least-once, so every committed event is present (no version
 *     missing for any aggregate) and the first occurrences of each
 *     aggregate's versions are in commit order; duplicates are allowed and
 *     reported. The last relay starts only after the writer finished, so it
 *     also shows how fast a backlog is caught up.
 *
 * The writer is one thread with its own connection inserting in
 * transactions of 1 to 20 rows; every event bumps its aggregate's version
 * under the row lock in the same transaction (locks taken in id order, as in
 * 0101), so committed versions of one aggregate are 1..N in commit order.
 *
 * Asserts on what Kafka and PostgreSQL hold, never on timing.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <errno.h>
#include <jansson.h>
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#define AGGREGATES 100
#define EVENTS     20000
#define MAX_TXN    20
#define PARTITIONS 4

typedef struct {
        const char *db;
        const char *aggtype;
        atomic_int committed;
        atomic_int done;
        int failed;
        char err[512];
} writer_t;

static unsigned next_rand(unsigned *s)
{
        *s = *s * 1103515245u + 12345u;
        return (*s >> 8) & 0xffffff;
}

static int cmp_int(const void *a, const void *b)
{
        return *(const int *)a - *(const int *)b;
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static int exec_ok(PGconn *c, const char *sql, char *err, size_t errlen)
{
        PGresult *r = PQexec(c, sql);
        int good = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
        if (!good)
                snprintf(err, errlen, "%.200s: %s", sql, PQerrorMessage(c));
        PQclear(r);
        return good;
}

static void *writer_main(void *arg)
{
        writer_t *w = arg;
        PGconn *c = h_pg_connect(w->db);
        unsigned seed = 104729u;
        char sql[1024];

        while (atomic_load(&w->committed) < EVENTS) {
                int left = EVENTS - atomic_load(&w->committed);
                int n = 1 + (int)(next_rand(&seed) % MAX_TXN);
                int aggs[MAX_TXN];
                if (n > left)
                        n = left;
                for (int i = 0; i < n; i++)
                        aggs[i] = (int)(next_rand(&seed) % AGGREGATES);
                qsort(aggs, (size_t)n, sizeof(int), cmp_int);
                if (!exec_ok(c, "BEGIN", w->err, sizeof(w->err)))
                        goto fail;
                for (int i = 0; i < n; i++) {
                        snprintf(
                            sql, sizeof(sql),
                            "WITH v AS (UPDATE aggregates SET version = version + 1 "
                            "WHERE id = %d RETURNING version) "
                            "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                            "SELECT gen_random_uuid(), '%s', 'agg-%d', 'Bumped', "
                            "jsonb_build_object('agg', %d, 'v', v.version) FROM v",
                            aggs[i], w->aggtype, aggs[i], aggs[i]);
                        if (!exec_ok(c, sql, w->err, sizeof(w->err)))
                                goto fail;
                }
                if (!exec_ok(c, "COMMIT", w->err, sizeof(w->err)))
                        goto fail;
                atomic_fetch_add(&w->committed, n);
                /* A little pacing keeps the writer busy across the restarts. */
                h_sleep_ms(1);
        }
        PQfinish(c);
        atomic_store(&w->done, 1);
        return NULL;
fail:
        w->failed = 1;
        PQfinish(c);
        atomic_store(&w->done, 1);
        return NULL;
}



static h_relay_t *start_relay(const char *const *sets, const char *what)
{
        h_relay_t *r = h_relay_start(sets);
        ok(h_relay_streams(r, 60000), "%s streams", what);
        return r;
}

/* Wait until Kafka holds at least n messages of topic; false on timeout. */
static bool wait_kafka(const char *topic, int64_t n, int timeout_ms, int64_t *got)
{
        *got = h_kafka_wait_count(topic, n, timeout_ms);
        return *got >= n;
}

static char g_logdir[512];

/* Every relay of this test logs into a folder of its own, kept until the
 * test passes (the harness deletes a relay's log when it is freed). */
static void logdir_setup(void)
{
        const char *base = getenv("RELAY_TEST_LOGDIR");
        snprintf(g_logdir, sizeof(g_logdir), "%s/0102-%ld", base && *base ? base : "/tmp",
                 (long)getpid());
        if (mkdir(g_logdir, 0755) != 0 && errno != EEXIST)
                tap_bail("could not create %s: %s", g_logdir, strerror(errno));
        setenv("RELAY_TEST_LOGDIR", g_logdir, 1);
        setenv("RELAY_TEST_KEEP_RELAY_LOGS", "1", 1);
}

/* The lines of the relays' logs that can explain a lost event. */
static void show_relay_logs(const char *label)
{
        char cmd[1024];
        snprintf(cmd, sizeof(cmd),
                 "grep -h -E 'WARNING|ERROR|FATAL|librdkafka [0-5] |IDEMPSTATE|ERRSEQ|DUPSEQ|"
                 "desynchron|NOT_LEADER|UNKNOWN_TOPIC|OUT_OF_ORDER|DUPLICATE_SEQ|failed|retrying' "
                 "%s/*.log | head -n 300",
                 g_logdir);
        FILE *f = popen(cmd, "r");
        char line[1024];
        tap_diag("(%s) relay log lines that may explain it (all logs in %s):", label, g_logdir);
        while (f && fgets(line, sizeof(line), f)) {
                line[strcspn(line, "\n")] = '\0';
                tap_diag("  %s", line);
        }
        if (f)
                pclose(f);
}

static void run(bool kill9)
{
        const char *label = kill9 ? "SIGKILL" : "SIGTERM";
        h_case_t cs;
        h_case_open(&cs, kill9 ? "rst_kill" : "rst_term", "slot_rst", kill9 ? "rstk" : "rstt",
                    PARTITIONS, 0);
        PGconn *c = cs.c;
        const char *db = cs.db, *slot = cs.slot, *aggtype = cs.aggtype, *topic = cs.topic;

        tap_diag("--- (%s) database %s, slot %s ---", label, db, slot);
        h_pg_exec(c,
                  "CREATE TABLE aggregates (id int PRIMARY KEY, version int NOT NULL DEFAULT 0)");
        h_pg_exec(c, "INSERT INTO aggregates (id) SELECT g FROM generate_series(0, %d) g",
                  AGGREGATES - 1);

        const char *sets[] = {cs.set_conn,
                              cs.set_kafka,
                              cs.set_slot,
                              "status.interval.ms=1000",
                              "reconnect.backoff.ms=100",
                              "reconnect.backoff.max.ms=2000",
                              /* Kept, and shown if an event goes missing:
                               * librdkafka's idempotence and metadata story. */
                              "log.level=debug",
                              "kafka.debug=eos,topic",
                              NULL};

        h_relay_t *relay = start_relay(sets, "first relay");

        writer_t w;
        memset(&w, 0, sizeof(w));
        w.db = db;
        w.aggtype = aggtype;
        atomic_init(&w.committed, 0);
        atomic_init(&w.done, 0);
        pthread_t th;
        int64_t t0 = h_now_ms();
        pthread_create(&th, NULL, writer_main, &w);

        /* Stop points: ~5 000 events in Kafka (and ~12 000 for the second
         * SIGKILL). */
        int64_t stops[2] = {5000, 12000};
        int nstops = kill9 ? 2 : 1;
        int64_t got, t_written = 0, t_restart = 0, backlog = 0;
        bool joined = false;
        for (int k = 0; k < nstops; k++) {
                bool reached = wait_kafka(topic, stops[k], 180000, &got);
                ok(reached, "(%s) Kafka holds %" PRId64 " >= %" PRId64 " events before stop %d",
                   label, got, stops[k], k + 1);
                if (!reached)
                        h_relay_diag_log(relay);
                int written = atomic_load(&w.committed);
                if (kill9) {
                        h_relay_signal(relay, SIGKILL);
                        is_int(h_relay_wait(relay, 30000), 128 + SIGKILL,
                               "(%s) relay killed by SIGKILL at %" PRId64 " events in Kafka, "
                               "%d committed",
                               label, got, written);
                } else {
                        h_relay_signal(relay, SIGTERM);
                        int rc = h_relay_wait(relay, 60000);
                        is_int(rc, 0,
                               "(%s) SIGTERM at %" PRId64 " events in Kafka, %d committed: "
                               "clean exit 0",
                               label, got, written);
                        if (rc != 0)
                                h_relay_diag_log(relay);
                        ok(h_relay_wait_log(relay, "confirmed up to", 0),
                           "(%s) the stopping relay logs the position it confirmed", label);
                }
                int64_t in_kafka = h_kafka_count(topic);
                tap_diag("(%s) stop %d: %" PRId64 " in Kafka after the stop, writer at %d", label,
                         k + 1, in_kafka, atomic_load(&w.committed));
                h_relay_free(relay);
                if (kill9 && k == nstops - 1) {
                        /* The last restart catches up a backlog: the writer
                         * finishes while no relay runs. */
                        pthread_join(th, NULL);
                        joined = true;
                        t_written = h_now_ms();
                        backlog = EVENTS - in_kafka;
                }
                int64_t t_stop = h_now_ms();
                relay = start_relay(sets, kill9 ? "relay after SIGKILL" : "relay after SIGTERM");
                t_restart = h_now_ms();
                tap_diag("(%s) the new relay streamed %.2f s after the old one was gone", label,
                         (t_restart - t_stop) / 1000.0);
        }

        if (!joined) {
                pthread_join(th, NULL);
                t_written = h_now_ms();
        }
        if (w.failed)
                tap_diag("writer: %s", w.err);
        is_int(w.failed, 0, "(%s) the writer finished", label);
        is_int(atomic_load(&w.committed), EVENTS, "(%s) the writer committed %d events", label,
               EVENTS);
        char *wal_after = h_pg_value(c, "SELECT pg_current_wal_lsn()");

        bool all = wait_kafka(topic, EVENTS, 300000, &got);
        ok(all, "(%s) Kafka holds %" PRId64 " >= %d messages", label, got, EVENTS);
        int64_t t_kafka = h_now_ms();
        bool confirmed = h_pg_wait_confirmed(c, slot, wal_after, 120000) >= 0;
        ok(confirmed, "(%s) slot confirmed past the writer's last commit (%s)", label, wal_after);
        int64_t t_confirmed = h_now_ms();
        if (!all || !confirmed)
                h_relay_diag_log(relay);
        tap_diag("(%s) %d events written in %.1f s (%.0f/s); all in Kafka after %.1f s, "
                 "confirmed after %.1f s (%.0f events/s end to end, restarts included)",
                 label, EVENTS, (t_written - t0) / 1000.0,
                 EVENTS * 1000.0 / (double)(t_written - t0 > 0 ? t_written - t0 : 1),
                 (t_kafka - t0) / 1000.0, (t_confirmed - t0) / 1000.0,
                 EVENTS * 1000.0 / (double)(t_confirmed - t0 > 0 ? t_confirmed - t0 : 1));
        if (backlog > 0)
                tap_diag("(%s) catch-up: about %" PRId64 " events relayed and confirmed in %.1f s "
                         "(%.0f events/s)",
                         label, backlog, (t_confirmed - t_restart) / 1000.0,
                         backlog * 1000.0 /
                             (double)(t_confirmed - t_restart > 0 ? t_confirmed - t_restart : 1));
        /* Late duplicates would show up here. */
        h_sleep_ms(3000);

        /* What PostgreSQL committed: every event id, every aggregate's version. */
        PGresult *res = PQexec(c, "SELECT id::text FROM outbox ORDER BY 1");
        if (PQresultStatus(res) != PGRES_TUPLES_OK)
                tap_bail("SELECT ids: %s", PQerrorMessage(c));
        int nids = PQntuples(res);
        is_int(nids, EVENTS, "(%s) the outbox table holds %d rows", label, EVENTS);
        char **ids = calloc((size_t)nids + 1, sizeof(char *));
        int *seen_count = calloc((size_t)nids + 1, sizeof(int));
        for (int i = 0; i < nids; i++)
                ids[i] = strdup(PQgetvalue(res, i, 0));
        PQclear(res);
        qsort(ids, (size_t)nids, sizeof(char *), cmp_str);
        int db_version[AGGREGATES];
        res = PQexec(c, "SELECT id, version FROM aggregates");
        if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != AGGREGATES)
                tap_bail("SELECT aggregates: %s", PQerrorMessage(c));
        for (int i = 0; i < AGGREGATES; i++)
                db_version[atoi(PQgetvalue(res, i, 0))] = atoi(PQgetvalue(res, i, 1));
        PQclear(res);

        /* What Kafka holds. */
        h_msg_t *msgs;
        size_t n = h_kafka_consume_all(topic, &msgs);
        int max_v[AGGREGATES], partition_of[AGGREGATES];
        int strict_bad = 0, first_bad = 0, key_bad = 0, part_bad = 0, json_bad = 0;
        int unknown = 0, no_id = 0;
        for (int a = 0; a < AGGREGATES; a++) {
                max_v[a] = 0;
                partition_of[a] = -1;
        }
        for (size_t i = 0; i < n; i++) {
                h_msg_t *m = &msgs[i];
                size_t hl;
                const char *hid = h_msg_header(m, "id", &hl);
                if (!hid) {
                        no_id++;
                } else {
                        const char *key = hid;
                        char **hit = bsearch(&key, ids, (size_t)nids, sizeof(char *), cmp_str);
                        if (hit)
                                seen_count[hit - ids]++;
                        else
                                unknown++;
                }
                json_error_t je;
                json_t *j = m->value ? json_loadb(m->value, m->value_len, 0, &je) : NULL;
                int agg = -1, v = -1;
                if (!j || json_unpack(j, "{s:i, s:i}", "agg", &agg, "v", &v) != 0 || agg < 0 ||
                    agg >= AGGREGATES) {
                        json_bad++;
                        json_decref(j);
                        continue;
                }
                json_decref(j);
                char want_key[32];
                snprintf(want_key, sizeof(want_key), "agg-%d", agg);
                if (!m->key || strcmp(m->key, want_key) != 0)
                        key_bad++;
                if (partition_of[agg] < 0)
                        partition_of[agg] = m->partition;
                else if (partition_of[agg] != m->partition)
                        part_bad++;
                /* Strict: 1, 2, 3, ... each once. */
                if (v != max_v[agg] + 1)
                        strict_bad++;
                /* At-least-once: a version already seen is a duplicate; one
                 * beyond the next would mean a first occurrence out of order
                 * or a version missing. */
                if (v > max_v[agg] + 1) {
                        if (first_bad < 5)
                                tap_diag("(%s) aggregate %d: version %d first seen after %d "
                                         "(partition %d offset %" PRId64 ")",
                                         label, agg, v, max_v[agg], m->partition, m->offset);
                        first_bad++;
                }
                if (v > max_v[agg])
                        max_v[agg] = v;
        }
        int missing = 0, dup_ids = 0, distinct = 0, version_short = 0;
        for (int i = 0; i < nids; i++) {
                if (seen_count[i] == 0) {
                        if (missing < 5)
                                tap_diag("(%s) event %s is not in Kafka", label, ids[i]);
                        missing++;
                } else {
                        distinct++;
                        dup_ids += seen_count[i] - 1;
                }
        }
        for (int a = 0; a < AGGREGATES; a++)
                if (max_v[a] != db_version[a]) {
                        if (version_short < 5)
                                tap_diag("(%s) aggregate %d: highest version in Kafka %d, in "
                                         "PostgreSQL %d",
                                         label, a, max_v[a], db_version[a]);
                        version_short++;
                }

        tap_diag("(%s) Kafka: %zu messages, %d distinct committed events, %d duplicates "
                 "(messages minus distinct ids: %zu)",
                 label, n, distinct, dup_ids, n - (size_t)distinct);
        is_int(no_id, 0, "(%s) every message has an id header", label);
        is_int(unknown, 0, "(%s) every message is a committed event", label);
        is_int(json_bad, 0, "(%s) every value is the stored JSON payload", label);
        if (!ok(missing == 0, "(%s) no committed event is missing (%d missing)", label, missing))
                show_relay_logs(label);
        is_int(version_short, 0, "(%s) every aggregate's versions 1..N are all in Kafka", label);
        is_int(first_bad, 0,
               "(%s) each aggregate's first occurrences arrive in commit order, without gaps",
               label);
        is_int(key_bad, 0, "(%s) key is the aggregate id", label);
        is_int(part_bad, 0, "(%s) each aggregate stays in one partition", label);
        if (!kill9) {
                is_int(n, EVENTS, "(%s) exactly %d messages: no loss, no duplicates", label,
                       EVENTS);
                is_int(dup_ids, 0, "(%s) no event id twice", label);
                is_int(strict_bad, 0,
                       "(%s) every aggregate's versions are 1, 2, 3, ... in "
                       "partition order, each once",
                       label);
        } else {
                ok(n >= (size_t)EVENTS, "(%s) at least %d messages (%zu)", label, EVENTS, n);
                tap_diag("(%s) duplicates after 2 x kill -9: %zu", label, n - (size_t)distinct);
        }

        is_int(h_relay_stop(relay, 60000), 0, "(%s) last relay: SIGTERM, clean exit 0", label);

        h_msgs_free(msgs, n);
        for (int i = 0; i < nids; i++)
                free(ids[i]);
        free(ids);
        free(seen_count);
        h_relay_free(relay);
        free(wal_after);
        h_case_close(&cs);
}

int main(void)
{
        logdir_setup();
        run(false);
        run(true);
        int rc = done_testing();
        if (rc == 0) {
                char cmd[600];
                snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_logdir);
                if (system(cmd) != 0)
                        tap_diag("could not remove %s", g_logdir);
        }
        return rc;
}
