/*
 * 0101-e2e.c - the core promise, end to end against real PostgreSQL and
 * Kafka: 8 concurrent writers, 100 aggregates, 20 000 committed events in
 * transactions of 1 to 50 rows, some rolled back, some rolled back to a
 * savepoint, some deleting the outbox row in the same transaction, with an
 * unrelated table written in between. Kafka must hold exactly the committed
 * events, each once, each aggregate's events in commit order in one
 * partition, with key, topic, headers and timestamp as configured.
 *
 * Commit order per aggregate is made observable the way applications do it:
 * every event bumps its aggregate's version under the row lock, so committed
 * versions of one aggregate are 1..N in commit order, and rolled-back work
 * leaves no gap.
 */
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

#define WRITERS 8
#define AGGREGATES 100
#define EVENTS 20000
#define TYPES 2

static const char *const aggtypes[TYPES] = {"order", "customer"};

typedef struct {
        int id;
        const char *db;
        const char *suffix;
        int committed; /* events committed by this writer */
        int rolled_back;
        char err[512];
} writer_t;

static int target_per_writer = EVENTS / WRITERS;

static unsigned next_rand(unsigned *s)
{
        *s = *s * 1103515245u + 12345u;
        return (*s >> 8) & 0xffffff;
}

static int exec_ok(PGconn *c, const char *sql, char *err, size_t errlen)
{
        PGresult *r = PQexec(c, sql);
        int ok_ = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
        if (!ok_)
                snprintf(err, errlen, "%s: %s", sql, PQerrorMessage(c));
        PQclear(r);
        return ok_;
}

/* One event: bump the aggregate's version under its row lock and insert
 * the outbox row carrying it. */
static int add_event(PGconn *c, writer_t *w, int agg, int del, char *err, size_t errlen)
{
        char sql[1024];
        int t = agg % TYPES;
        snprintf(sql, sizeof(sql),
                 "WITH v AS (UPDATE aggregates SET version = version + 1 WHERE id = %d RETURNING version) "
                 "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                 "SELECT gen_random_uuid(), '%s_%s', 'agg-%d', '%sEvent', "
                 "jsonb_build_object('agg', %d, 'v', v.version, 'w', %d, 'pad', repeat('x', 150)) FROM v "
                 "RETURNING id",
                 agg, aggtypes[t], w->suffix, agg, aggtypes[t], agg, w->id);
        PGresult *r = PQexec(c, sql);
        if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
                snprintf(err, errlen, "insert: %s", PQerrorMessage(c));
                PQclear(r);
                return 0;
        }
        if (del) {
                snprintf(sql, sizeof(sql), "DELETE FROM outbox WHERE id = '%s'", PQgetvalue(r, 0, 0));
                PQclear(r);
                return exec_ok(c, sql, err, errlen);
        }
        PQclear(r);
        return 1;
}

static int cmp_int(const void *a, const void *b)
{
        return *(const int *)a - *(const int *)b;
}

static void *writer_main(void *arg)
{
        writer_t *w = arg;
        PGconn *c = h_pg_connect(w->db);
        unsigned seed = 7919u * (unsigned)(w->id + 1);
        char *err = w->err;
        size_t errlen = sizeof(w->err);

        while (w->committed < target_per_writer) {
                int left = target_per_writer - w->committed;
                int n = 1 + (int)(next_rand(&seed) % 50);
                if (n > left)
                        n = left;
                int fate = (int)(next_rand(&seed) % 10); /* 0: rollback, 1: savepoint, else commit */
                int aggs[50];
                for (int i = 0; i < n; i++)
                        aggs[i] = (int)(next_rand(&seed) % AGGREGATES);
                /* Lock order by aggregate id: no deadlocks between writers. */
                qsort(aggs, (size_t)n, sizeof(int), cmp_int);

                if (!exec_ok(c, "BEGIN", err, errlen))
                        goto fail;
                if (next_rand(&seed) % 3 == 0 &&
                    !exec_ok(c, "INSERT INTO noise (v) SELECT md5(random()::text) FROM generate_series(1, 5)",
                             err, errlen))
                        goto fail;
                int kept = 0;
                int sp_at = fate == 1 ? n / 2 : -1;
                for (int i = 0; i < n; i++) {
                        if (i == sp_at && !exec_ok(c, "SAVEPOINT sp", err, errlen))
                                goto fail;
                        int del = next_rand(&seed) % 5 == 0;
                        if (!add_event(c, w, aggs[i], del, err, errlen))
                                goto fail;
                        if (sp_at < 0 || i < sp_at)
                                kept++;
                }
                if (sp_at >= 0 && !exec_ok(c, "ROLLBACK TO SAVEPOINT sp", err, errlen))
                        goto fail;
                if (fate == 0) {
                        if (!exec_ok(c, "ROLLBACK", err, errlen))
                                goto fail;
                        w->rolled_back += n;
                        continue;
                }
                if (!exec_ok(c, "COMMIT", err, errlen))
                        goto fail;
                w->committed += kept;
                w->rolled_back += n - kept;
                /* Unrelated writes between outbox transactions. */
                if (next_rand(&seed) % 4 == 0 &&
                    !exec_ok(c, "INSERT INTO noise (v) VALUES ('between')", err, errlen))
                        goto fail;
        }
        PQfinish(c);
        return NULL;
fail:
        PQfinish(c);
        return w;
}

int main(void)
{
        char *db = h_pg_create_db("e2e");
        char *suffix = h_unique_name("t");
        char *slot = h_unique_name("slot");
        PGconn *c = h_pg_connect(db);
        char topics[TYPES][128];
        char set_conn[512], set_kafka[256], set_slot[128];

        h_pg_create_outbox(c, "outbox");
        h_pg_exec(c, "CREATE TABLE aggregates (id int PRIMARY KEY, version int NOT NULL DEFAULT 0)");
        h_pg_exec(c, "INSERT INTO aggregates (id) SELECT g FROM generate_series(0, %d) g", AGGREGATES - 1);
        h_pg_exec(c, "CREATE TABLE noise (id bigserial PRIMARY KEY, v text)");
        for (int t = 0; t < TYPES; t++) {
                snprintf(topics[t], sizeof(topics[t]), "outbox.event.%s_%s", aggtypes[t], suffix);
                h_kafka_create_topic(topics[t], 4);
        }

        char *conninfo = h_pg_conninfo(db);
        snprintf(set_conn, sizeof(set_conn), "postgres.conninfo=%s", conninfo);
        snprintf(set_kafka, sizeof(set_kafka), "kafka.bootstrap.servers=%s", h_kafka_bootstrap());
        snprintf(set_slot, sizeof(set_slot), "slot.name=%s", slot);
        const char *sets[] = {set_conn, set_kafka, set_slot, "status.interval.ms=1000",
                              "outbox.headers=aggregatetype", NULL};
        h_relay_t *relay = h_relay_start(sets);
        ok(h_relay_wait_log(relay, "streaming from replication slot", 60000), "relay streams");

        int64_t t0 = h_now_ms();
        pthread_t th[WRITERS];
        writer_t w[WRITERS];
        for (int i = 0; i < WRITERS; i++) {
                memset(&w[i], 0, sizeof(w[i]));
                w[i].id = i;
                w[i].db = db;
                w[i].suffix = suffix;
                pthread_create(&th[i], NULL, writer_main, &w[i]);
        }
        int committed = 0, rolled_back = 0, failed = 0;
        for (int i = 0; i < WRITERS; i++) {
                void *rv;
                pthread_join(th[i], &rv);
                if (rv) {
                        failed++;
                        tap_diag("writer %d: %s", i, w[i].err);
                }
                committed += w[i].committed;
                rolled_back += w[i].rolled_back;
        }
        int64_t t_written = h_now_ms();
        is_int(failed, 0, "all writers finished");
        is_int(committed, EVENTS, "writers committed 20000 events");
        ok(rolled_back > 0, "writers rolled back %d events (transactions and savepoints)", rolled_back);
        char *wal_after = h_pg_value(c, "SELECT pg_current_wal_lsn()");
        char *versions = h_pg_value(c, "SELECT sum(version) FROM aggregates");
        is_int(atoi(versions), EVENTS, "aggregate versions add up to the committed events");
        char *left = h_pg_value(c, "SELECT count(*) FROM outbox");
        ok(atoi(left) < EVENTS, "some outbox rows were deleted in their own transaction (%s left)", left);

        int64_t total = 0;
        int64_t deadline = h_now_ms() + 300000;
        while (h_now_ms() < deadline) {
                total = h_kafka_count(topics[0]) + h_kafka_count(topics[1]);
                if (total >= EVENTS)
                        break;
                h_sleep_ms(200);
        }
        int64_t t_done = h_now_ms();
        is_int(total, EVENTS, "Kafka holds 20000 messages");
        tap_diag("throughput: %d events written in %.1f s, all in Kafka %.1f s after the first write "
                 "(%.0f events/s end to end)",
                 EVENTS, (t_written - t0) / 1000.0, (t_done - t0) / 1000.0,
                 EVENTS * 1000.0 / (double)(t_done - t0 > 0 ? t_done - t0 : 1));

        /* The slot must reach the WAL position after the last commit: every
         * transaction acknowledged, and the idle keepalive position too. */
        char *advanced = NULL;
        deadline = h_now_ms() + 15000;
        while (h_now_ms() < deadline) {
                free(advanced);
                advanced = h_pg_value(c,
                                      "SELECT confirmed_flush_lsn >= '%s'::pg_lsn FROM pg_replication_slots "
                                      "WHERE slot_name = '%s'",
                                      wal_after, slot);
                if (advanced && strcmp(advanced, "t") == 0)
                        break;
                h_sleep_ms(200);
        }
        is_str(advanced, "t", "slot confirmed past the last commit (%s)", wal_after);

        h_relay_signal(relay, SIGTERM);
        is_int(h_relay_wait(relay, 30000), 0, "SIGTERM: clean exit 0");

        /* What Kafka holds. */
        int seen_versions[AGGREGATES];
        int partition_of[AGGREGATES];
        int order_bad = 0, key_bad = 0, hdr_bad = 0, ts_bad = 0, part_bad = 0, json_bad = 0;
        size_t nmsgs = 0;
        for (int a = 0; a < AGGREGATES; a++) {
                seen_versions[a] = 0;
                partition_of[a] = -1;
        }
        int64_t now_wall = (int64_t)time(NULL) * 1000;
        for (int t = 0; t < TYPES; t++) {
                h_msg_t *msgs;
                size_t n = h_kafka_consume_all(topics[t], &msgs);
                nmsgs += n;
                for (size_t i = 0; i < n; i++) {
                        h_msg_t *m = &msgs[i];
                        json_error_t je;
                        json_t *j = json_loadb(m->value, m->value_len, 0, &je);
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
                        if (!m->key || strcmp(m->key, want_key) != 0 || agg % TYPES != t)
                                key_bad++;
                        if (partition_of[agg] < 0)
                                partition_of[agg] = m->partition;
                        else if (partition_of[agg] != m->partition)
                                part_bad++;
                        /* Versions of one aggregate, in partition order: 1, 2, 3, ... */
                        if (v != seen_versions[agg] + 1) {
                                if (order_bad < 5)
                                        tap_diag("aggregate %d: version %d after %d", agg, v, seen_versions[agg]);
                                order_bad++;
                        }
                        if (v > seen_versions[agg])
                                seen_versions[agg] = v;
                        size_t hl;
                        const char *hid = h_msg_header(m, "id", &hl);
                        const char *htype = h_msg_header(m, "type", &hl);
                        const char *hagg = h_msg_header(m, "aggregatetype", &hl);
                        char want_type[64], want_aggtype[64];
                        snprintf(want_type, sizeof(want_type), "%sEvent", aggtypes[t]);
                        snprintf(want_aggtype, sizeof(want_aggtype), "%s_%s", aggtypes[t], suffix);
                        if (!hid || strlen(hid) != 36 || !htype || strcmp(htype, want_type) != 0 || !hagg ||
                            strcmp(hagg, want_aggtype) != 0)
                                hdr_bad++;
                        /* CreateTime = commit time: within the run, never in the future. */
                        if (m->timestamp_type != 1 || m->timestamp > now_wall + 1000 ||
                            m->timestamp < now_wall - 3600 * 1000)
                                ts_bad++;
                }
                h_msgs_free(msgs, n);
        }
        int64_t sum_versions = 0;
        for (int a = 0; a < AGGREGATES; a++)
                sum_versions += seen_versions[a];
        is_int(nmsgs, EVENTS, "consumed exactly 20000 messages: no loss, no duplicates");
        is_int(json_bad, 0, "every value is the JSON payload as stored");
        is_int(order_bad, 0, "every aggregate's versions arrive 1, 2, 3, ... (commit order, each once)");
        is_int(sum_versions, EVENTS, "the highest versions seen add up to the committed events");
        is_int(key_bad, 0, "key is the aggregate id and topic is outbox.event.<aggregatetype>");
        is_int(part_bad, 0, "each aggregate stays in one partition");
        is_int(hdr_bad, 0, "headers id, type and aggregatetype (outbox.headers) as stored");
        is_int(ts_bad, 0, "message timestamps are create times from the commit");

        /* The commit timestamp matches PostgreSQL's clock: compare one event. */
        h_relay_free(relay);
        PQfinish(c);
        h_pg_drop_db(db);
        free(wal_after);
        free(versions);
        free(left);
        free(advanced);
        free(conninfo);
        free(db);
        free(suffix);
        free(slot);
        return done_testing();
}
