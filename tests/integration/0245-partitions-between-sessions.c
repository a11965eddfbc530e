/*
 * 0245-partitions-between-sessions.c - partitions added to the outbox
 * topic between two sessions, on the real broker.
 *
 * 0177 covers growth that one producer sees. A session that ends (here its
 * walsender terminated: the supervisor retries) takes its producer with it,
 * and the next session's producer learns the topic's partition count for
 * the first time: the counts it compared with were its own, so growth that
 * happened in between went unsaid, while an aggregate's later events went
 * to other partitions than its earlier ones all the same. The counts now
 * outlive sessions (the process state).
 *
 * 20 aggregates: one round of events to the topic with 1 partition, the
 * topic grown to 4, the session ended, 5 more rounds in the next one.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"

#define AGGS 20
#define ROUNDS 6
#define PARTS 4

int main(void)
{
        h_case_t k;
        h_relayed_t rel;
        h_case_open(&k, "pbs", "slot", "pbs", 1, H_CASE_PUBLICATION);
        /* Debug level: the statistics reports are logged, so the test knows
         * when the first producer has seen the topic's partition. */
        const char *sets[] = {k.set_conn, k.set_kafka, k.set_slot, "log.level=debug", NULL};
        h_relay_t *r = h_relay_start(sets);
        ok(h_relay_streams(r, 60000), "relay streams");

        h_insert_round(k.c, k.aggtype, AGGS, 1);
        h_wait_relayed(k.c, k.slot, k.topic, AGGS, 60000, &rel);
        ok(rel.in_kafka == AGGS && rel.confirmed, "the first round is in Kafka and confirmed");
        h_relayed_free(&rel);
        /* A statistics report made after the deliveries, so with the
         * partition the first producer sent them to. */
        char seen_topic[300];
        snprintf(seen_topic, sizeof(seen_topic), "\"topic\":\"%s\"", k.topic);
        int reports = fx_log_count(r, seen_topic);
        ok(fx_wait_log_n(r, seen_topic, reports + 1, 60000),
           "the first producer's statistics have the topic after the deliveries");

        h_kafka_add_partitions(k.topic, PARTS);
        h_pg_exec(k.c,
                  "SELECT pg_catalog.pg_terminate_backend(pid) FROM pg_catalog.pg_stat_activity "
                  "WHERE backend_type = 'walsender' AND datname = current_database()");
        ok(h_relay_wait_log(r, "retrying in", 60000),
           "walsender terminated: the session ends, the relay retries");
        ok(fx_wait_log_n(r, "streaming from replication slot", 2, 60000),
           "the next session streams");
        for (int v = 2; v <= ROUNDS; v++)
                h_insert_round(k.c, k.aggtype, AGGS, v);
        h_wait_relayed(k.c, k.slot, k.topic, AGGS * ROUNDS, 60000, &rel);
        ok(rel.in_kafka == AGGS * ROUNDS && rel.confirmed,
           "every round is in Kafka and confirmed (%lld)", (long long)rel.in_kafka);
        h_relayed_free(&rel);

        h_msg_t *m;
        size_t n = h_kafka_consume_all(k.topic, &m);
        int seen[AGGS][ROUNDS + 1];
        memset(seen, 0, sizeof(seen));
        int first_elsewhere = 0, later_elsewhere = 0, stray = 0, missing = 0;
        for (size_t i = 0; i < n; i++) {
                int a, v;
                if (!h_msg_agg_version(&m[i], &a, &v) || a < 0 || a >= AGGS || v < 1 ||
                    v > ROUNDS) {
                        stray++;
                        continue;
                }
                seen[a][v]++;
                if (m[i].partition != 0 && v == 1)
                        first_elsewhere++;
                if (m[i].partition != 0 && v > 1)
                        later_elsewhere++;
        }
        h_msgs_free(m, n);
        for (int a = 0; a < AGGS; a++)
                for (int v = 1; v <= ROUNDS; v++)
                        missing += !seen[a][v];
        is_int(missing, 0, "every committed event in Kafka");
        is_int(stray, 0, "nothing but the events");
        is_int(first_elsewhere, 0, "the first round all in partition 0 (the topic had one)");
        ok(later_elsewhere > 0,
           "the next session's producer sent later events to the new partitions (%d)",
           later_elsewhere);

        char said[512];
        snprintf(said, sizeof(said), "topic \"%s\" now has %d partitions, not 1: keys map",
                 k.topic, PARTS);
        ok(h_relay_wait_log(r, said, 60000),
           "the relay warns that the topic's partitions grew between its sessions");
        is_int(fx_log_count(r, said), 1, "  once");
        h_relay_signal(r, SIGTERM);
        is_int(h_relay_wait(r, 30000), 0, "clean stop");
        h_relay_free(r);
        h_case_close(&k);
        return done_testing();
}
