/*
 * 0246-dlq-no-linger.c - a dead-letter copy does not wait out linger.ms,
 * against the real broker.
 *
 * A dead-letter copy goes alone, once what is in flight is answered (0156).
 * Waiting for that, and then for the copy, served librdkafka without
 * telling it that nothing more would come: each of the two waits lasted
 * linger.ms before the batch even left (7.3-8.7 ms per copy at the
 * default 5 ms when normal and dead-lettered events alternate on loopback;
 * 2.4-3.0 ms with the queue flushed: tests/bench/dlq-alternate). With kafka.linger.ms=120000, as 0103
 * sets it, every copy held the stream four minutes. Both waits now flush what is queued: the same
 * order (every earlier event acknowledged before the copy is produced,
 * the copy acknowledged before anything after it), without the linger.
 *
 * One transaction: a normal event, one too large for its topic, a normal
 * event, another too large. Nothing in this test waits more than 60 s, half
 * of one linger.ms.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

int main(void)
{
        h_case_t k;
        h_case_open(&k, "dlqlinger", "slot", "dln", 1, H_CASE_PUBLICATION);
        char big[256], dlq[256], set_dlq[300];
        static const char *const small_limit[] = {"max.message.bytes", "2000", NULL};
        snprintf(big, sizeof(big), "outbox.event.big_%s", k.aggtype);
        snprintf(dlq, sizeof(dlq), "dlq_%s", k.aggtype);
        snprintf(set_dlq, sizeof(set_dlq), "errors.dlq.topic=%s", dlq);
        h_kafka_create_topic_config(big, 1, small_limit);
        h_kafka_create_topic(dlq, 1);

        const char *sets[] = {k.set_conn, k.set_kafka, k.set_slot, set_dlq,
                              "kafka.linger.ms=120000", NULL};
        h_relay_t *r = h_relay_start(sets);
        ok(h_relay_streams(r, 60000), "relay streams");

        h_pg_exec(k.c,
                  "BEGIN;"
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES "
                  "('02460000-0000-4000-8000-000000000001', '%s', 'a', 'T', '{\"n\": 1}'),"
                  "('02460000-0000-4000-8000-000000000002', 'big_%s', 'a', 'T', "
                  "jsonb_build_object('pad', repeat('y', 5000))),"
                  "('02460000-0000-4000-8000-000000000003', '%s', 'a', 'T', '{\"n\": 3}'),"
                  "('02460000-0000-4000-8000-000000000004', 'big_%s', 'a', 'T', "
                  "jsonb_build_object('pad', repeat('y', 5000)));"
                  "COMMIT",
                  k.aggtype, k.aggtype, k.aggtype, k.aggtype);
        char *wal = h_pg_wal_lsn(k.c);

        ok(h_kafka_wait_count(dlq, 2, 60000) == 2, "both copies in the dead-letter topic");
        is_int(h_kafka_count(k.topic), 2, "both normal events in their topic");
        is_int(h_kafka_count(big), 0, "neither large event in its topic");
        ok(h_pg_wait_confirmed(k.c, k.slot, wal, 60000) >= 0,
           "the slot is confirmed past the transaction");

        h_msg_t *m;
        size_t n = h_kafka_consume_all(dlq, &m);
        int order_ok = n == 2;
        for (size_t i = 0; order_ok && i < n; i++) {
                size_t hl;
                const char *id = h_msg_header(&m[i], "id", &hl);
                char want[40];
                snprintf(want, sizeof(want), "02460000-0000-4000-8000-00000000000%zu", 2 * i + 2);
                order_ok = id && hl == strlen(want) && memcmp(id, want, hl) == 0;
        }
        h_msgs_free(m, n);
        ok(order_ok, "the copies in the dead-letter topic in commit order");

        h_relay_signal(r, SIGTERM);
        int code = h_relay_wait(r, 30000);
        is_int(code, 0, "clean stop");
        if (code < 0)
                h_relay_stop(r, 30000);
        h_relay_free(r);
        free(wal);
        h_kafka_delete_topic(big);
        h_kafka_delete_topic(dlq);
        h_case_close(&k);
        return done_testing();
}
