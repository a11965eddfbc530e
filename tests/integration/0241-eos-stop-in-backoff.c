/*
 * 0241-eos-stop-in-backoff.c - exactly-once: a stop signal while an event
 * Kafka refused waits for its resend (errors.backoff.ms) aborts the open
 * Kafka transaction, confirms nothing of it, and a restart sends every event
 * once (0169 is the same stop under at-least-once).
 *
 * "First" is committed at once (its own Kafka transaction). One PostgreSQL
 * transaction then holds "Good" and "Old", Old timestamped 2001 into a topic
 * with message.timestamp.before.max.ms of an hour (refused for good). The
 * refusal spoils the open Kafka transaction: the session fails and resumes
 * from the checkpoint; the second session sends Good again into a new Kafka
 * transaction and waits errors.backoff.ms (10 minutes) before resending Old.
 * SIGTERM comes during that wait.
 *
 * Asserted on what Kafka (read_committed) and PostgreSQL hold: the relay
 * exits 0; Good's copies in the aborted transactions are not visible;
 * the slot's confirmed_flush_lsn stays below Good's and Old's transaction
 * (at or past First's); restarted without the event timestamp column (Old
 * takes its commit time, which the topic accepts), First, Good and Old are
 * each in the topic exactly once, and the slot moves past everything.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define FIRST "0241aaaa-0000-4000-8000-000000000001"
#define GOOD "0241aaaa-0000-4000-8000-000000000002"
#define OLD "0241aaaa-0000-4000-8000-000000000003"

/* How many times each type is in topic, read_committed. */
static void count_types(const char *topic, int *first, int *good, int *old)
{
        h_msg_t *m = NULL;
        size_t n = h_kafka_consume_all(topic, &m);
        *first = *good = *old = 0;
        for (size_t i = 0; i < n; i++) {
                size_t hl;
                const char *t = h_msg_header(&m[i], "type", &hl);
                *first += t && hl == 5 && memcmp(t, "First", 5) == 0;
                *good += t && hl == 4 && memcmp(t, "Good", 4) == 0;
                *old += t && hl == 3 && memcmp(t, "Old", 3) == 0;
        }
        h_msgs_free(m, n);
}

int main(void)
{
        h_case_t k;
        h_case_open(&k, "eosstopbackoff", "slot", "esb", 0, 0);
        char dlq[200], set_dlq[256], set_ck[200];
        h_kafka_refusing_topics(k.topic, dlq, sizeof(dlq), set_dlq, sizeof(set_dlq));
        char *ck = h_unique_name("ckpt_esb");
        h_kafka_create_topic(ck, 1);
        snprintf(set_ck, sizeof(set_ck), "eos.checkpoint.topic=%s", ck);

        const char *sets[] = {k.set_conn, k.set_kafka, k.set_slot, set_dlq, set_ck,
                              "delivery.mode=exactly-once", "eos.commit.interval.ms=60000",
                              "table.field.event.timestamp=created_at", "errors.retries=3",
                              "errors.backoff.ms=600000", "errors.backoff.max.ms=600000",
                              "status.interval.ms=1000", "reconnect.backoff.ms=100",
                              "reconnect.backoff.max.ms=500", NULL};
        h_relay_t *r = h_relay_start(sets);
        ok(h_relay_streams(r, 60000), "an exactly-once relay streams");

        h_pg_exec(k.c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                  "VALUES ('" FIRST "', '%s', 'a-1', 'First', '{\"n\": 0}')",
                  k.aggtype);
        char *first_end = h_pg_wal_lsn(k.c);
        ok(h_pg_wait_confirmed(k.c, k.slot, first_end, 60000) >= 0,
           "First is committed at once and confirmed (%s)", first_end);

        h_pg_exec(k.c,
                  "BEGIN; "
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                  "VALUES ('" GOOD "', '%s', 'a-1', 'Good', '{\"n\": 1}'); "
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload, created_at) "
                  "VALUES ('" OLD "', '%s', 'a-1', 'Old', '{\"n\": 2}', "
                  "'2001-02-03 04:05:06+00'); COMMIT",
                  k.aggtype, k.aggtype);
        char *end = h_pg_wal_lsn(k.c);

        bool waiting = h_relay_wait_log(r, "resending in 600000 ms", 90000);
        ok(waiting, "the relay waits errors.backoff.ms to resend the refused event");
        if (!waiting)
                h_relay_diag_log(r);
        h_relay_signal(r, SIGTERM);
        is_int(h_relay_wait(r, 60000), 0, "a stop during the wait exits 0");
        char *log = h_relay_log(r);
        bool aborted = log && strstr(log, "aborted the open Kafka transaction") != NULL;
        ok(aborted, "the open Kafka transaction is aborted");
        if (!aborted)
                h_relay_diag_log(r);
        free(log);
        h_relay_free(r);

        /* What the stopped relay left: PostgreSQL and Kafka, read_committed. */
        char *conf = h_pg_confirmed_lsn(k.c, k.slot);
        ok(conf && h_pg_lsn_ge(k.c, conf, first_end),
           "the slot is confirmed at or past First (%s >= %s)", conf ? conf : "(null)", first_end);
        is_int(h_pg_pending_inserts_with(k.c, k.slot, GOOD), 1,
               "Good's transaction is not confirmed (confirmed_flush_lsn %s)",
               conf ? conf : "(null)");
        is_int(h_pg_pending_inserts_with(k.c, k.slot, OLD), 1, "Old's (the same) is not either");
        free(conf);
        int first, good, old;
        count_types(k.topic, &first, &good, &old);
        is_int(first, 1, "Kafka holds First once");
        is_int(good, 0, "Good, produced only in aborted transactions, is not visible");
        is_int(old, 0, "Old is not in the topic");
        tap_diag("the topic holds %lld records (aborted copies and markers included)",
                 (long long)h_kafka_count(k.topic));
        /* A record another producer writes now is there for a read_committed
         * consumer: the stopped relay left no Kafka transaction open, which
         * would hold the partition's last stable offset (and every
         * read_committed consumer) before Good until the broker's
         * transaction timeout. */
        h_kafka_produce(k.topic, "probe", "{}");
        h_msg_t *m = NULL;
        size_t n = h_kafka_consume_all(k.topic, &m);
        is_int((long)n, 2, "read_committed, the partition reads to its end: First and a "
                           "record written after the stop");
        h_msgs_free(m, n);

        /* Restarted without the timestamp column: Old is stamped with its
         * commit time, which the topic accepts. */
        const char *resets[] = {k.set_conn, k.set_kafka, k.set_slot, set_dlq, set_ck,
                                "delivery.mode=exactly-once", "eos.commit.interval.ms=1000",
                                "status.interval.ms=1000", NULL};
        r = h_relay_start(resets);
        ok(h_relay_streams(r, 60000), "restarted, the relay streams");
        bool moved = h_pg_wait_confirmed(k.c, k.slot, end, 60000) >= 0;
        ok(moved, "the slot moves past Good's and Old's transaction (%s)", end);
        if (!moved)
                h_relay_diag_log(r);
        is_int(h_relay_stop(r, 60000), 0, "the restarted relay stops cleanly");
        count_types(k.topic, &first, &good, &old);
        is_int(first, 1, "Kafka holds First once");
        is_int(good, 1, "Good once");
        is_int(old, 1, "Old once");
        is_int(h_kafka_count(dlq), 0, "nothing dead-lettered");

        free(end);
        free(first_end);
        h_kafka_delete_topic(ck);
        free(ck);
        h_kafka_refusing_close(&k, r, dlq);
        return done_testing();
}
