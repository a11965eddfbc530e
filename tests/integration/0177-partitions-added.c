/*
 * 0177-partitions-added.c - partitions added to the outbox topic while
 * the relay streams (kafka-topics --alter --partitions), on the real broker.
 *
 * The default partitioner (murmur2_random, as Java producers and Debezium)
 * maps a key to hash % partitions: once the producer learns the new count,
 * an aggregate's later events go to another partition than its earlier
 * ones. Kafka's semantics, the same for Debezium; what must hold is what
 * the relay can hold: every committed event in Kafka, each partition
 * holding an aggregate's first occurrences in commit order, and no
 * aggregate's event in its old partition after one in its new partition.
 * And the relay must say so: consumers of the two partitions may now see
 * an aggregate's events out of order. It used to say nothing.
 *
 * 20 aggregates, one transaction per round with one event each, 60 rounds;
 * the topic goes from 1 to 4 partitions after round 20.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define AGGS 20
#define ROUNDS 60
#define ADD_AFTER 20
#define PARTS 4

int main(void)
{
        h_case_t k;
        h_case_open(&k, "padd", "slot", "pa", 1, H_CASE_PUBLICATION);
        /* The producer learns a topic's partition count from its periodic
         * metadata refresh (5 minutes by default). */
        const char *sets[] = {k.set_conn, k.set_kafka, k.set_slot,
                              "kafka.topic.metadata.refresh.interval.ms=1000", "log.level=debug",
                              NULL};
        h_relay_t *r = h_relay_start(sets);
        ok(h_relay_streams(r, 60000), "relay streams");
        for (int v = 1; v <= ROUNDS; v++) {
                h_insert_round(k.c, k.aggtype, AGGS, v);
                if (v == ADD_AFTER) {
                        /* The relay's producer has the topic in a statistics
                         * report (logged at debug level) before the change. */
                        char seen_topic[300];
                        snprintf(seen_topic, sizeof(seen_topic), "\"topic\":\"%s\"", k.topic);
                        ok(h_relay_wait_log(r, seen_topic, 60000),
                           "the producer's statistics have the topic");
                        h_kafka_add_partitions(k.topic, PARTS);
                }
                h_sleep_ms(100);
        }
        char *wal = h_pg_value(k.c, "SELECT pg_current_wal_lsn()");
        ok(h_pg_wait_confirmed(k.c, k.slot, wal, 120000) >= 0, "slot confirmed past every event");

        h_msg_t *m;
        size_t n = h_kafka_consume_all(k.topic, &m);
        /* Per aggregate and partition: the last version seen (order), and
         * per aggregate the versions seen and the highest in partition 0. */
        int last[AGGS][PARTS], seen[AGGS][ROUNDS + 1], max_old[AGGS], min_new[AGGS];
        memset(last, 0, sizeof(last));
        memset(seen, 0, sizeof(seen));
        int bad_order = 0, dups = 0, split = 0, crossed = 0, missing = 0, stray = 0;
        for (int a = 0; a < AGGS; a++) {
                max_old[a] = 0;
                min_new[a] = ROUNDS + 1;
        }
        for (size_t i = 0; i < n; i++) {
                int a, v, p = m[i].partition;
                if (!h_msg_agg_version(&m[i], &a, &v) || p < 0 || p >= PARTS) {
                        stray++;
                        continue;
                }
                if (a < 0 || a >= AGGS || v < 1 || v > ROUNDS) {
                        stray++;
                        continue;
                }
                if (seen[a][v]++) {
                        dups++;
                        continue;
                }
                if (v < last[a][p])
                        bad_order++;
                last[a][p] = v;
                if (p == 0 && v > max_old[a])
                        max_old[a] = v;
                if (p != 0 && v < min_new[a])
                        min_new[a] = v;
        }
        h_msgs_free(m, n);
        for (int a = 0; a < AGGS; a++) {
                for (int v = 1; v <= ROUNDS; v++)
                        missing += !seen[a][v];
                if (min_new[a] <= ROUNDS) {
                        split++;
                        crossed += max_old[a] > min_new[a];
                }
        }
        is_int(missing, 0, "every committed event in Kafka");
        is_int(stray, 0, "nothing but the events");
        is_int(bad_order, 0, "each partition: an aggregate's first occurrences in commit order");
        is_int(crossed, 0, "no aggregate's event in its old partition after one in its new");
        ok(split > 0, "some aggregates moved to a new partition (%d of %d)", split, AGGS);
        tap_diag("FIGURES partitions-added: events=%d duplicates=%d moved=%d", AGGS * ROUNDS, dups,
                 split);
        char said[512];
        snprintf(said, sizeof(said), "topic \"%s\" now has %d partitions, not 1: keys map",
                 k.topic, PARTS);
        ok(h_relay_wait_log(r, said, 60000),
           "the relay warns that the topic's partitions grew and what it means");
        /* Growth only: the topic's first sight (no count before) is none. */
        char *log = h_relay_log(r);
        int warned = 0;
        for (const char *p = log; (p = strstr(p, " partitions, not ")) != NULL; p++)
                warned++;
        free(log);
        is_int(warned, 1, "the one partition warning is the growth's, none at the topic's first "
                          "sight");
        h_relay_signal(r, SIGTERM);
        is_int(h_relay_wait(r, 30000), 0, "clean stop");
        h_relay_free(r);
        free(wal);
        h_case_close(&k);
        return done_testing();
}
