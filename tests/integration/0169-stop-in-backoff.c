/*
 * 0169-stop-in-backoff.c - a stop signal while an event Kafka refused waits
 * for its resend (errors.backoff.ms), against the real broker.
 *
 * One transaction holds "Good", a second one "Old", with a timestamp from
 * 2001 into a topic with message.timestamp.before.max.ms of an hour (Kafka
 * refuses it for good). The relay resumes from the slot to settle "Old" in
 * place and waits errors.backoff.ms (10 minutes here) before resending it;
 * SIGTERM comes during that wait.
 *
 * A stop there is a stop as at any other point: the relay drains, confirms
 * what Kafka acknowledged ("Good"'s transaction) and never "Old"'s, says
 * so, prints its summary line and exits 0. It used to return "stopped while
 * waiting to resend an event" from the session at once: no drain, no final
 * confirmation, no summary line (the supervisor took it for a stop before
 * any session had streamed).
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define GOOD "0169aaaa-0000-4000-8000-000000000001"
#define OLD "0169aaaa-0000-4000-8000-000000000002"

int main(void)
{
        h_case_t k;
        char dlq[200];
        const char *extra[] = {"errors.retries=3", "errors.backoff.ms=600000",
                               "errors.backoff.max.ms=600000", NULL};
        h_relay_t *r = h_kafka_refusing_open(&k, "stopbackoff", "sbo", dlq, sizeof(dlq), extra);
        ok(h_relay_streams(r, 60000), "relay streams");

        h_pg_exec(k.c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                  "VALUES ('" GOOD "', '%s', 'a-1', 'Good', '{\"n\": 1}')",
                  k.aggtype);
        h_pg_exec(k.c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload, created_at) "
                  "VALUES ('" OLD "', '%s', 'a-1', 'Old', '{\"n\": 2}', "
                  "'2001-02-03 04:05:06+00')",
                  k.aggtype);

        bool waiting = h_relay_wait_log(r, "resending in 600000 ms", 90000);
        ok(waiting, "the relay waits errors.backoff.ms to resend the refused event");
        if (!waiting)
                h_relay_diag_log(r);
        h_relay_signal(r, SIGTERM);
        is_int(h_relay_wait(r, 30000), 0, "a stop during the wait exits 0, as any stop");

        char *log = h_relay_log(r);
        bool summary = log && strstr(log, "stopped after relaying") != NULL;
        bool confirmed = log && strstr(log, "confirmed up to") != NULL;
        ok(summary, "the stop's summary line is logged");
        ok(confirmed, "the final confirmation is logged");
        if (!summary || !confirmed)
                h_relay_diag_log(r);
        free(log);

        /* What the slot still holds, read once the relay released it. */
        is_int(h_pg_pending_inserts_with(k.c, k.slot, GOOD), 0,
               "the transaction Kafka acknowledged is confirmed");
        is_int(h_pg_pending_inserts_with(k.c, k.slot, OLD), 1,
               "the refused event's transaction is not confirmed");

        int good = 0, old = 0;
        h_msg_t *m = NULL;
        size_t n = h_kafka_consume_all(k.topic, &m);
        for (size_t i = 0; i < n; i++) {
                size_t hl;
                const char *t = h_msg_header(&m[i], "type", &hl);
                good += t && strcmp(t, "Good") == 0;
                old += t && strcmp(t, "Old") == 0;
        }
        h_msgs_free(m, n);
        ok(good >= 1, "Good is in the topic (%d times)", good);
        is_int(old, 0, "the refused event is not in the topic");
        is_int(h_kafka_count(dlq), 0, "nothing dead-lettered");

        h_kafka_refusing_close(&k, r, dlq);
        return done_testing();
}
