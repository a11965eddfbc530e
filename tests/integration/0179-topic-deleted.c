/*
 * 0179-topic-deleted.c - the outbox topic deleted while the relay streams,
 * on the real broker with auto.create.topics.enable on (tests/env): the
 * broker creates it again at the relay's next metadata request, with
 * num.partitions (1) instead of the 4 it had.
 *
 * 20 aggregates, one transaction per round with one event each. Rounds 1
 * to 20 are delivered to the 4-partition topic (and deleted with it: the
 * operator's doing); the topic is deleted; rounds 21 to 60 follow. Checked
 * from Kafka and PostgreSQL: every event of rounds 21 to 60 in the new
 * topic, each aggregate's first occurrences there in commit order, nothing
 * dead-lettered, the slot confirmed past the end; and no message telling
 * the operator to create the topic, which exists all along.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define AGGS 20
#define ROUNDS 60
#define DELETE_AFTER 20

int main(void)
{
        h_case_t k;
        h_case_open(&k, "tdel", "slot", "td", 4, H_CASE_PUBLICATION);
        const char *sets[] = {k.set_conn, k.set_kafka, k.set_slot, NULL};
        h_relay_t *r = h_relay_start(sets);
        ok(h_relay_streams(r, 60000), "relay streams");
        for (int v = 1; v <= DELETE_AFTER; v++)
                h_insert_round(k.c, k.aggtype, AGGS, v);
        is_int(h_kafka_wait_count(k.topic, AGGS * DELETE_AFTER, 60000), AGGS * DELETE_AFTER,
               "rounds 1-%d delivered", DELETE_AFTER);
        h_kafka_delete_topic(k.topic);
        for (int v = DELETE_AFTER + 1; v <= ROUNDS; v++) {
                h_insert_round(k.c, k.aggtype, AGGS, v);
                h_sleep_ms(100);
        }
        char *wal = h_pg_value(k.c, "SELECT pg_current_wal_lsn()");
        ok(h_pg_wait_confirmed(k.c, k.slot, wal, 180000) >= 0, "slot confirmed past every event");

        h_msg_t *m;
        size_t n = h_kafka_consume_all(k.topic, &m);
        int want[AGGS];
        for (int a = 0; a < AGGS; a++)
                want[a] = ROUNDS - DELETE_AFTER;
        h_versions_t t;
        h_versions_init(&t, AGGS, want);
        int stray = 0, old = 0;
        for (size_t i = 0; i < n; i++) {
                int a, v;
                if (!h_msg_agg_version(&m[i], &a, &v)) {
                        stray++;
                        continue;
                }
                if (a < 0 || a >= AGGS || v < 1 || v > ROUNDS) {
                        stray++;
                        continue;
                }
                if (v <= DELETE_AFTER) {
                        old++;
                        continue;
                }
                h_versions_add(&t, a, v - DELETE_AFTER);
        }
        h_msgs_free(m, n);
        h_versions_finish(&t, want);
        is_int(t.missing, 0, "every event committed after the deletion in Kafka");
        is_int(t.out_of_order, 0, "each aggregate's first occurrences in commit order");
        is_int(stray, 0, "nothing but the events");
        tap_diag("FIGURES topic-deleted: after=%d duplicates=%ld resent_from_before=%d",
                 AGGS * (ROUNDS - DELETE_AFTER), t.duplicates, old);
        h_relay_signal(r, SIGTERM);
        is_int(h_relay_wait(r, 60000), 0, "clean stop");
        char *log = h_relay_log(r);
        ok(!strstr(log, "written to dead-letter"), "nothing dead-lettered");
        /* The topic exists all along (auto-created again at once): the
         * relay's messages must not tell the operator to create it. It used
         * to, when events chosen for partitions 1-3 of the old topic failed
         * as "Local: Unknown partition". */
        ok(!strstr(log, "create the topic"), "no message tells to create the topic, which exists");
        /* Nor blame a partition column: the partitioner chose the partition. */
        ok(!strstr(log, "which the event names"),
           "no message says the event names its partition, which it does not");
        if (strstr(log, "Unknown partition") || strstr(log, "no longer has partition"))
                ok(strstr(log, "no longer has partition") != NULL,
                   "an event whose partition is gone: the message says the topic lost partitions");
        if (strstr(log, "create the topic"))
                h_relay_diag_log(r);
        free(log);
        h_relay_free(r);
        free(wal);
        h_case_close(&k);
        return done_testing();
}
