/*
 * 0144-held-back.c - outbox_relay_held_back is 1 for the whole of an
 * event's settling in place, its waits between resends included.
 *
 * On librdkafka's mock cluster (one broker), whose Produce requests can be
 * made to fail: the next two fail with INVALID_RECORD, and one event is
 * inserted. Its batch is refused (the session resumes from the slot), then
 * the event alone is refused again, and the relay waits errors.backoff.ms
 * (10 s) before resending it; nothing after it is produced meanwhile. In
 * that wait /metrics must say outbox_relay_held_back 1; once the event is
 * delivered, 0. The event is in its topic once.
 *
 * Port: RELAY_TEST_HTTP_PORT (default 19140) + 5.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"
#include "tap.h"

#define PRODUCE_API 0 /* ApiKey of Produce */

static double held_back(int port)
{
        char *page = NULL;
        double v = -1;
        if (h_http_request(port, "GET", "/metrics", 5000, &page) == 200)
                v = h_metrics_sample(page, "outbox_relay_held_back");
        free(page);
        return v;
}

int main(void)
{
        rd_kafka_mock_cluster_t *mock;
        int port = h_http_port(5);
        const char *bootstraps = fx_mock_start(1, &mock);
        fx_case_t fc;
        fx_case_open(&fc, "heldback", "hb");
        char *topic = fx_mock_topic(mock, 0, "outbox.event.%s", fc.suffix);
        free(fx_mock_topic(mock, 0, "outbox.dlq"));
        h_pg_create_outbox(fc.c, "outbox");
        fx_sets_init(&fc.sets, fc.db, fc.slot, bootstraps);
        fx_sets_add(&fc.sets, "http.listen=127.0.0.1:%d", port);
        fx_sets_add(&fc.sets, "%s", "errors.backoff.ms=10000");

        h_relay_t *r = fx_case_relay(&fc, "relay streams");
        rd_kafka_mock_push_request_errors(mock, PRODUCE_API, 2, RD_KAFKA_RESP_ERR_INVALID_RECORD,
                                          RD_KAFKA_RESP_ERR_INVALID_RECORD);
        h_pg_exec(fc.c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES "
                  "(gen_random_uuid(), '%s', 'a1', 'Held', '{}')",
                  fc.suffix);
        if (!ok(h_relay_wait_log(r, "resending in 10000 ms", 60000),
                "refused twice, the event waits 10 s to be resent"))
                h_relay_diag_log(r);
        /* 1.5 s into the 10 s wait: the loop turns every 50 ms meanwhile
         * and publishes every 250 ms, so the page shows the wait, not the
         * send before it. */
        h_sleep_ms(1500);
        is_int(held_back(port), 1, "outbox_relay_held_back is 1 while it waits to be resent");
        ok(h_relay_wait_log(r, "delivered to", 60000), "then it is delivered");
        /* Once following, the loop may wait up to a second between turns. */
        double v;
        int64_t deadline = h_now_ms() + 10000;
        while ((v = held_back(port)) != 0 && h_now_ms() < deadline)
                h_sleep_ms(200);
        is_int(v, 0, "outbox_relay_held_back is 0 once it is delivered");
        is_int(h_kafka_wait_count(topic, 1, 30000), 1, "its topic holds it once");

        fx_stop_relay(r, "relay stops cleanly");
        h_relay_free(r);
        free(topic);
        fx_case_close(&fc, NULL);
        return done_testing();
}
