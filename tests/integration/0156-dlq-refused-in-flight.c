/*
 * 0156-dlq-refused-in-flight.c - a dead-letter copy Kafka refuses while
 * earlier events of the stream are still in librdkafka's queue, against
 * the real broker.
 *
 * An event that does not fit its topic (max.message.bytes known) goes to
 * the dead-letter topic at once, without waiting for what came before it.
 * When Kafka refuses the copy too (here: the dead-letter topic takes no
 * record timestamped more than an hour ago, and the copy keeps the event's
 * timestamp, a column from 2001), README's "Poison events" says the relay
 * stops before the event with exit 4 ("event refused"), the operator's cue.
 * The refusal stops the producer (gapless), and librdkafka purges what is
 * still queued. The copy was sent with earlier events still queued: half
 * of them were purged each time, and when their reports ("Purged in
 * queue") were served with the copy's refusal, the session ended on them
 * with "fatal producer error" and began again from the slot, sending the
 * same transaction again into the same refusal (1 run in 5 here: 2
 * sessions, 20664 events in the topic); exit 4 came only when the
 * refusal's report was served alone. The copy now goes once what is in
 * flight is answered: every earlier event is delivered, the stop exit 4,
 * in the first session.
 *
 * One transaction holds 20000 events of about 1 kB (queued in librdkafka,
 * up to its 10000, faster than Kafka takes them in 16 kB batches, one
 * request at a time) and, last, the event too large for its topic.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define EVENTS 20000

int main(void)
{
        h_case_t k;
        h_case_open(&k, "dlqinfl", "slot", "dif", 1, 0);
        char big[256], dlq[256], set_dlq[300];
        static const char *const small_limit[] = {"max.message.bytes", "2000", NULL};
        static const char *const hour[] = {"message.timestamp.before.max.ms", "3600000", NULL};
        /* Both routed by the default template (outbox.event.<aggregatetype>),
         * so that one event of each, sent first, has the relay learn both
         * limits before the transaction under test. */
        snprintf(big, sizeof(big), "outbox.event.big_%s", k.aggtype);
        snprintf(dlq, sizeof(dlq), "outbox.event.dlq_%s", k.aggtype);
        snprintf(set_dlq, sizeof(set_dlq), "errors.dlq.topic=%s", dlq);
        h_kafka_create_topic_config(big, 1, small_limit);
        h_kafka_create_topic_config(dlq, 1, hour);

        const char *batch[] = {"kafka.batch.size=16384", NULL};
        h_relay_t *r = h_kafka_refusing_relay(&k, set_dlq, batch);
        ok(h_relay_streams(r, 60000), "relay streams");

        h_pg_exec(k.c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES "
                  "(gen_random_uuid(), 'big_%s', 'w', 'Warm', '{}'),"
                  "(gen_random_uuid(), 'dlq_%s', 'w', 'Warm', '{}')",
                  k.aggtype, k.aggtype);
        ok(h_kafka_wait_count(big, 1, 30000) == 1 && h_kafka_wait_count(dlq, 1, 30000) == 1,
           "one small event reached each of the two topics");

        h_pg_exec(k.c,
                  "BEGIN;"
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                  "SELECT gen_random_uuid(), '%s', 'a-' || i %% 10, 'Early', "
                  "jsonb_build_object('pad', repeat(md5(i::text), 30)) "
                  "FROM generate_series(1, %d) i;"
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload, created_at) "
                  "VALUES ('01560000-0000-4000-8000-000000000001', 'big_%s', 'b', 'Big', "
                  "jsonb_build_object('pad', repeat('y', 5000)), '2001-02-03 04:05:06+00');"
                  "COMMIT",
                  k.aggtype, EVENTS, k.aggtype);

        int code = h_relay_wait(r, 120000);
        char *log = h_relay_log(r);
        if (!ok(code == 4, "the relay stops with exit 4, event refused (exit %d)", code))
                h_relay_diag_log(r);
        ok(log && strstr(log, "could not write event \"01560000-0000-4000-8000-000000000001\"") &&
                   strstr(log, "to the dead-letter topic"),
           "the log says which event the dead-letter topic refused");
        int sessions = 0;
        for (const char *p = log; p && (p = strstr(p, "streaming from replication slot")); p++)
                sessions++;
        if (!ok(sessions == 1, "in its first session (%d sessions)", sessions))
                h_relay_diag_log(r);
        int64_t early = h_kafka_count(k.topic);
        ok(early >= EVENTS,
           "the earlier events all reached their topic before the copy was sent (%lld of %d)",
           (long long)early, EVENTS);
        free(log);
        is_int(h_kafka_count(big), 1, "the large event is not in its topic");
        is_int(h_kafka_count(dlq), 1, "nor in the dead-letter topic");

        if (code < 0)
                h_relay_stop(r, 30000);
        h_relay_free(r);
        h_kafka_delete_topic(big);
        h_kafka_delete_topic(dlq);
        h_case_close(&k);
        return done_testing();
}
