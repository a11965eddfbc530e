/*
 * 0229-partial-txn.c - a transaction Kafka acknowledged only in part is
 * never confirmed, however much acknowledged work comes after it.
 *
 * On librdkafka's mock cluster (one broker) with two topics, A and B (one
 * aggregate type each), status.interval.ms = 1000:
 *
 * 1. B's only partition is made leaderless: librdkafka holds B's events
 *    (retrying) while A's go through. One transaction T1 writes events to
 *    A and to B (two keys on each); five more transactions after it write
 *    to A only, the same keys. Kafka then holds every A event (T1's and
 *    the later ones'): the relay's tracker has later transactions fully
 *    acknowledged behind a partly acknowledged one, and the server keeps
 *    sending keepalives (unrelated writes). Over several status intervals
 *    the slot's confirmed_flush_lsn must stay below T1's commit.
 * 2. SIGTERM: the drain gives up on B after shutdown.timeout.ms, and its
 *    final status update must not confirm T1 either: the slot still holds
 *    T1's B events.
 * 3. B gets its leader back; the next relay sends T1 again: Kafka holds
 *    every event of both topics, each key's versions in commit order
 *    (duplicates allowed: T1's A events and the later A events are sent
 *    again).
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"

#define LATER_TXNS 5
#define KEYS 2

static rd_kafka_mock_cluster_t *g_mock;

/* Per key k: versions 1..wants[k] in order (first occurrences), none missing. */
static void check_topic(const char *topic, const int *wants, const char *what)
{
        h_versions_t t;
        size_t n = h_topic_key_versions(topic, KEYS, wants, &t);
        ok(t.missing == 0 && t.out_of_order == 0,
           "%s: every version of every key, in commit order (%zu messages, %ld missing, %ld out "
           "of order, %ld duplicates)",
           what, n, t.missing, t.out_of_order, t.duplicates);
}

int main(void)
{
        fx_case_t fc;
        fx_mock_case_open(&fc, "partialtxn", "ptx", 1, &g_mock);
        char *agg_a = fx_fmt("%sa", fc.suffix), *agg_b = fx_fmt("%sb", fc.suffix);
        char *topic_a = fx_mock_topic(g_mock, 0, "outbox.event.%s", agg_a);
        char *topic_b = fx_mock_topic(g_mock, 0, "outbox.event.%s", agg_b);
        fx_sets_add(&fc.sets, "%s", "shutdown.timeout.ms=3000");
        h_pg_exec(fc.c, "CREATE TABLE noise (id bigserial PRIMARY KEY, v text)");

        h_relay_t *r = fx_case_relay(&fc, "a relay streams into the mock cluster");
        /* Both topics known to the relay's producer before B loses its leader. */
        h_insert_keyed(fc.c, agg_a, 0, 1);
        h_insert_keyed(fc.c, agg_b, 0, 1);
        ok(h_kafka_wait_count(topic_a, 1, 30000) == 1 && h_kafka_wait_count(topic_b, 1, 30000) == 1,
           "the first events reach both topics");

        /* --- 1. T1 half acknowledged, later transactions fully ---------- */
        rd_kafka_resp_err_t e = rd_kafka_mock_partition_set_leader(g_mock, topic_b, 0, -1);
        ok(e == 0, "topic B's partition is leaderless (%s)", rd_kafka_err2str(e));
        h_pg_exec(fc.c, "BEGIN");
        for (int k = 0; k < KEYS; k++) {
                h_insert_keyed(fc.c, agg_a, k, k == 0 ? 2 : 1);
                h_insert_keyed(fc.c, agg_b, k, k == 0 ? 2 : 1);
        }
        char *before_t1 = h_pg_value(fc.c, "SELECT pg_current_wal_insert_lsn()");
        h_pg_exec(fc.c, "COMMIT");
        char *b_id = h_pg_value(fc.c, "SELECT id FROM outbox WHERE aggregatetype = '%s' AND "
                                      "aggregateid = 'k1'", agg_b);
        for (int t = 0; t < LATER_TXNS; t++)
                for (int k = 0; k < KEYS; k++)
                        h_insert_keyed(fc.c, agg_a, k, (k == 0 ? 3 : 2) + t);
        int64_t want_a = 1 + KEYS + LATER_TXNS * KEYS;
        int64_t got_a = h_kafka_wait_count(topic_a, want_a, 30000);
        ok(got_a == want_a, "Kafka holds every A event, T1's and the later ones' (%lld of %lld)",
           (long long)got_a, (long long)want_a);
        /* Keepalives with WAL ends past T1 while the tracker waits for B. */
        /* T1's commit record starts at or after before_t1, and nothing
         * else is written there but the later A transactions and the
         * noise: a confirmed position at or past it confirms T1. */
        char *conf;
        bool held = h_pg_confirmed_stays_below(fc.c, fc.slot, before_t1, 8,
                                               "INSERT INTO noise (v) VALUES ('x')", &conf);
        ok(held, "over 4 s of status updates the slot stays below T1 (confirmed %s, T1's commit "
                 "at or after %s)",
           conf ? conf : "(null)", before_t1);
        free(conf);

        /* --- 2. the drain gives up on B and confirms nothing of T1 -------- */
        h_relay_signal(r, SIGTERM);
        int rc = h_relay_wait(r, 60000);
        ok(rc == 0, "SIGTERM: the relay stops after shutdown.timeout.ms (exit %d)", rc);
        ok(h_relay_wait_log(r, "not acknowledged by Kafka within shutdown.timeout.ms", 0),
           "saying that events were not acknowledged");
        h_relay_free(r);
        conf = h_pg_confirmed_lsn(fc.c, fc.slot);
        ok(conf && !h_pg_lsn_ge(fc.c, conf, before_t1),
           "the final status update did not confirm T1 (confirmed %s, T1 at or after %s)",
           conf ? conf : "(null)", before_t1);
        free(conf);
        is_int(h_pg_pending_inserts_with(fc.c, fc.slot, b_id), 1,
               "the slot still holds T1's B event for the next start");

        /* --- 3. B back: the next relay sends T1 again -------------------- */
        e = rd_kafka_mock_partition_set_leader(g_mock, topic_b, 0, 1);
        ok(e == 0, "topic B's partition has its leader again");
        r = fx_case_relay(&fc, "the next relay streams");
        h_kafka_wait_count(topic_b, 1 + KEYS, 30000);
        char *end = h_pg_wal_lsn(fc.c);
        ok(h_pg_wait_confirmed(fc.c, fc.slot, end, 30000) >= 0,
           "the slot is confirmed past everything once B takes events");
        /* Key k0 had a version before T1 on each topic; k1 begins in T1. */
        check_topic(topic_b, (const int[KEYS]){2, 1}, "topic B");
        check_topic(topic_a, (const int[KEYS]){2 + LATER_TXNS, 1 + LATER_TXNS}, "topic A");
        h_relay_stop(r, 60000);
        h_relay_free(r);

        free(end);
        free(b_id);
        free(before_t1);
        free(topic_b);
        free(topic_a);
        free(agg_b);
        free(agg_a);
        fx_case_close(&fc, NULL);
        return done_testing();
}
