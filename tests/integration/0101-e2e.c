/*
 * 0101-e2e.c - the core promise, end to end against real PostgreSQL and
 * Kafka: 8 concurrent writers, 100 aggregates, 20 000 committed events in
 * transactions of 1 to 50 rows, some rolled back, some rolled back to a
 * savepoint, some deleting the outbox row in the same transaction, with an
 * unrelated table written in between. Kafka must hold exactly the committed
 * events, each once, each aggregate's events in commit order in one
 * partition, with key, topic, headers and timestamp as configured.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "workload.h"

#define EVENTS 20000

int main(void)
{
        h_case_t k;
        h_case_open(&k, "e2e", "slot", "t", 0, H_CASE_BARE);
        PGconn *c = k.c;
        char topic[256];
        /* The workload's topics are outbox.event.<type>_<suffix>. */
        h_workload_conf_t wc = {
                .db = k.db, .suffix = k.aggtype, .writers = 8, .aggregates = 100, .events = EVENTS,
                .max_txn = 50, .rollbacks = true, .deletes = true, .noise = true, .partitions = 4,
        };

        h_workload_setup(c, &wc);
        const char *sets[] = {k.set_conn, k.set_kafka, k.set_slot, "status.interval.ms=1000",
                              "outbox.headers=aggregatetype,created_at", NULL};
        h_relay_t *relay = h_relay_start(sets);
        ok(h_relay_streams(relay, 60000), "relay streams");

        int64_t t0 = h_now_ms();
        int committed = 0, rolled_back = 0;
        int failed = h_workload_wait(h_workload_start(&wc), &committed, &rolled_back);
        int64_t t_written = h_now_ms();
        is_int(failed, 0, "all writers finished");
        is_int(committed, EVENTS, "writers committed 20000 events");
        ok(rolled_back > 0, "writers rolled back %d events (transactions and savepoints)", rolled_back);
        char *wal_after = h_pg_wal_lsn(c);
        char *left = h_pg_value(c, "SELECT count(*) FROM outbox");
        ok(atoi(left) < EVENTS, "some outbox rows were deleted in their own transaction (%s left)", left);

        long long total = h_workload_wait_count(&wc, EVENTS, 300000);
        int64_t t_done = h_now_ms();
        is_int(total, EVENTS, "Kafka holds 20000 messages");
        tap_diag("throughput: %d events written in %.1f s, all in Kafka %.1f s after the first write "
                 "(%.0f events/s end to end, bounded by the writers)",
                 EVENTS, (double)(t_written - t0) / 1000.0, (double)(t_done - t0) / 1000.0,
                 EVENTS * 1000.0 / (double)(t_done - t0 > 0 ? t_done - t0 : 1));

        /* Every transaction acknowledged, then the idle keepalive position. */
        ok(h_pg_wait_confirmed(c, k.slot, wal_after, 15000) >= 0, "slot confirmed past the last commit (%s)",
           wal_after);

        is_int(h_relay_stop(relay, 30000), 0, "SIGTERM: clean exit 0");

        h_verify_t v;
        h_workload_verify(c, &wc, &v);
        h_workload_diag(&v);
        is_int(v.messages, EVENTS, "consumed exactly 20000 messages");
        is_int(v.expected, EVENTS, "aggregate versions add up to the committed events");
        is_int(v.duplicates, 0, "no duplicates");
        is_int(v.missing, 0, "no event lost");
        is_int(v.out_of_order, 0, "every aggregate's versions arrive 1, 2, 3, ... (commit order)");
        is_int(v.bad_value, 0, "every value is the JSON payload as stored");
        is_int(v.bad_key, 0, "key is the aggregate id and topic is outbox.event.<aggregatetype>");
        is_int(v.bad_partition, 0, "each aggregate stays in one partition");
        is_int(v.bad_headers, 0, "headers id and type as stored");

        /* Extra headers and the timestamp, against the rows still in the table. */
        h_msg_t *msgs;
        size_t n = h_kafka_consume_all(h_workload_topic(&wc, 0, topic, sizeof(topic)), &msgs);
        int hdr_bad = 0, ts_bad = 0, checked = 0;
        for (size_t i = 0; i < n; i++) {
                size_t hl;
                const char *id = h_msg_header(&msgs[i], "id", &hl);
                const char *aggtype = h_msg_header(&msgs[i], "aggregatetype", &hl);
                const char *created = h_msg_header(&msgs[i], "created_at", &hl);
                if (!aggtype || strncmp(aggtype, "order_", 6) != 0 || !created)
                        hdr_bad++;
                if (!id || checked >= 200)
                        continue;
                /* CreateTime is the commit time, to the millisecond, as
                 * PostgreSQL recorded it for the row's transaction
                 * (track_commit_timestamp is on in tests/env). */
                char *ms = h_pg_value(c,
                                      "SELECT floor(extract(epoch FROM pg_xact_commit_timestamp(xmin)) "
                                      "* 1000)::bigint FROM outbox WHERE id = '%s'",
                                      id);
                if (!ms)
                        continue; /* deleted in its own transaction */
                long long commit_ms = atoll(ms);
                free(ms);
                checked++;
                if (msgs[i].timestamp_type != 1 || msgs[i].timestamp != commit_ms) {
                        if (ts_bad++ < 3)
                                tap_diag("event %s: timestamp %lld, committed at %lld", id,
                                         (long long)msgs[i].timestamp, commit_ms);
                }
        }
        h_msgs_free(msgs, n);
        is_int(hdr_bad, 0, "outbox.headers columns arrive as headers");
        ok(checked > 0, "compared %d message timestamps with their rows", checked);
        is_int(ts_bad, 0, "message timestamp is the commit time (CreateTime, pg_xact_commit_timestamp)");

        h_relay_free(relay);
        free(wal_after);
        free(left);
        h_case_close(&k);
        return done_testing();
}
