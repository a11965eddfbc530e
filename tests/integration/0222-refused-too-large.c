/*
 * 0222-refused-too-large.c - an event Kafka refuses as too large when sent
 * alone, while the relay cannot read the topic's max.message.bytes (as
 * without DescribeConfigs permission): README's "Poison events" says such
 * an event is found when Kafka refuses its batch, sent again alone, and,
 * being too large, written to the dead-letter topic at once (resending the
 * same bytes cannot help).
 *
 * librdkafka's mock cluster (one broker) stands in for a broker whose limit
 * the relay cannot read: it answers no DescribeConfigs the relay can use,
 * and two Produce requests are refused with MSG_SIZE_TOO_LARGE, the event's
 * batch and then the event alone. The relay must dead-letter it then,
 * after two attempts, and must not send it to its topic a third time (it
 * used to resend it errors.retries times with backoff, asking for the limit
 * and warning each time; here the third send, which the mock takes,
 * delivered it to its topic and nothing was dead-lettered). The stop's
 * summary counts it once, as dead-lettered (it was also counted relayed).
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

#define PRODUCE_API 0 /* ApiKey of Produce */

int main(void)
{
        rd_kafka_mock_cluster_t *mock;
        fx_case_t fc;
        fx_mock_case_open(&fc, "toolarge", "tl", 1, &mock);
        char *topic = fx_mock_topic(mock, 0, "outbox.event.tl_%s", fc.suffix);
        char *dlq = fx_mock_topic(mock, 0, "dlq_%s", fc.suffix);

        fx_sets_add(&fc.sets, "errors.dlq.topic=%s", dlq);
        fx_sets_add(&fc.sets, "%s", "errors.retries=3");
        fx_sets_add(&fc.sets, "%s", "errors.backoff.ms=100");
        h_relay_t *r = fx_case_relay(&fc, "relay streams");

        rd_kafka_mock_push_request_errors(mock, PRODUCE_API, 2,
                                          RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE,
                                          RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE);
        h_pg_exec(fc.c, "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                        "VALUES ('00000000-0000-4000-8000-00000000071a', 'tl_%s', 'a-1', 'Big', "
                        "'{}')",
                  fc.suffix);

        int64_t nd = h_kafka_wait_count(dlq, 1, 30000);
        is_int(nd, 1, "the event refused alone as too large is in the dead-letter topic");
        h_sleep_ms(1000); /* time for a resend, had there been one */
        is_int(h_kafka_count(topic), 0, "and not in its topic: no resend after Kafka's verdict");
        h_msg_t *m;
        size_t n = h_kafka_consume_all(dlq, &m);
        size_t hl;
        const char *id = n ? h_msg_header(&m[0], "id", &hl) : NULL;
        const char *attempts = n ? h_msg_header(&m[0], "outbox.error.attempts", &hl) : NULL;
        is_str(id, "00000000-0000-4000-8000-00000000071a", "the copy is the event's, by id");
        is_str(attempts, "2", "after two refusals: in its batch, then alone");
        h_msgs_free(m, n);
        ok(fx_log_count(r, "could not read max.message.bytes") >= 1,
           "the relay could not read the topic's limit (the case under test)");
        if (nd != 1)
                h_relay_diag_log(r);

        fx_stop_relay(r, "SIGTERM: exit 0");
        /* Its own topic has none: relayed 0, dead-lettered 1 (the resend
         * path counted it both ways). */
        if (!ok(fx_log_count(r, "stopped after relaying 0 events in 1 transactions (1 "
                                "dead-lettered, 0 skipped)") == 1,
                "the summary counts it dead-lettered, not relayed too"))
                h_relay_diag_log(r);
        h_relay_free(r);
        free(topic);
        free(dlq);
        fx_case_close(&fc, NULL);
        return done_testing();
}
