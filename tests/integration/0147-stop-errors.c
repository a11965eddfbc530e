/*
 * 0147-stop-errors.c - an error after a stop was asked for is still an
 * error: the relay's exit status and log say so; only the stop itself ends
 * the relay with exit 0.
 *
 * On librdkafka's mock cluster (Produce errors on demand), with
 * kafka.linger.ms=4000 so that an event the relay read waits in the
 * producer long enough to be stopped with:
 *
 * 1. The relay reads an event (its /metrics shows it in flight), the next
 *    Produce request is refused for good (INVALID_RECORD), and SIGTERM
 *    arrives: the final flush fails. The relay used to exit 0 ("stopped")
 *    without a word of the refusal. Now: exit 1, the refusal logged as the
 *    fatal error; nothing confirmed past the event, which the slot still
 *    holds for the next start.
 * 2. A relay stopped with nothing failing (the same event delivered in the
 *    final flush): exit 0, the event in Kafka once.
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
#define HTTP_OFFSET 7

static rd_kafka_mock_cluster_t *g_mock;

/* Wait until the relay's /metrics shows an event in flight (read, not yet
 * acknowledged); false after timeout_ms. */
static bool wait_inflight(int port, int timeout_ms)
{
        int64_t deadline = h_now_ms() + timeout_ms;
        while (h_now_ms() < deadline) {
                char *page = NULL;
                if (h_http_request(port, "GET", "/metrics", 2000, &page) == 200 &&
                    h_metrics_sample(page, "outbox_relay_inflight_events") >= 1) {
                        free(page);
                        return true;
                }
                free(page);
                h_sleep_ms(50);
        }
        return false;
}

int main(void)
{
        fx_case_t fc;
        fx_mock_case_open(&fc, "stoperr", "se", 1, &g_mock);
        char topic[256];
        snprintf(topic, sizeof(topic), "outbox.event.%s", fc.suffix);
        rd_kafka_resp_err_t e = rd_kafka_mock_topic_create(g_mock, topic, 1, 1);
        if (e)
                tap_bail("mock topic %s: %s", topic, rd_kafka_err2str(e));
        int port = h_http_port(HTTP_OFFSET);
        fx_sets_add(&fc.sets, "http.listen=127.0.0.1:%d", port);
        fx_sets_add(&fc.sets, "%s", "kafka.linger.ms=4000");
        fx_sets_add(&fc.sets, "%s", "shutdown.timeout.ms=30000");

        /* --- 1. the final flush fails ---------------------------------- */
        h_relay_t *r = fx_case_relay(&fc, "relay streams into the mock cluster");
        char *lsn_before = h_pg_value(fc.c, "SELECT pg_current_wal_lsn()");
        char *id = h_pg_value(fc.c,
                              "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                              "VALUES (gen_random_uuid(), '%s', 'agg-1', 'T', '{}') RETURNING id",
                              fc.suffix);
        char *lsn_event = h_pg_value(fc.c, "SELECT pg_current_wal_lsn()");
        if (!ok(wait_inflight(port, 30000), "the relay read the event (in flight, lingering)"))
                h_relay_diag_log(r);
        /* Refused for good: librdkafka does not retry it. */
        rd_kafka_mock_push_request_errors(g_mock, PRODUCE_API, 1, RD_KAFKA_RESP_ERR_INVALID_RECORD);
        h_relay_signal(r, SIGTERM);
        int rc = h_relay_wait(r, 60000);
        if (!ok(rc == 1, "SIGTERM, then the final flush fails: exit 1, not a clean stop (got %d)", rc))
                h_relay_diag_log(r);
        bool said = h_relay_wait_log(r, "FATAL", 0) && h_relay_wait_log(r, "rejected event", 0);
        if (!ok(said, "the refusal is logged as the fatal error"))
                h_relay_diag_log(r);
        h_relay_free(r);
        char *conf = h_pg_confirmed_lsn(fc.c, fc.slot);
        ok(conf && !h_pg_lsn_ge(fc.c, conf, lsn_event),
           "nothing confirmed past the refused event (slot %s, event between %s and %s)",
           conf ? conf : "(null)", lsn_before, lsn_event);
        is_int(h_pg_pending_inserts_with(fc.c, fc.slot, id), 1,
               "the slot still holds the event for the next start");

        /* --- 2. a clean stop ------------------------------------------- */
        r = fx_case_relay(&fc, "the next relay streams");
        if (!ok(wait_inflight(port, 30000), "it read the event again"))
                h_relay_diag_log(r);
        h_relay_signal(r, SIGTERM);
        rc = h_relay_wait(r, 60000);
        if (!ok(rc == 0, "SIGTERM with nothing failing: exit 0 (got %d)", rc))
                h_relay_diag_log(r);
        h_relay_free(r);
        char *after = h_pg_confirmed_lsn(fc.c, fc.slot);
        ok(after && h_pg_lsn_ge(fc.c, after, lsn_event),
           "the final flush delivered it and the slot is confirmed past it (%s)",
           after ? after : "(null)");

        free(after);
        free(conf);
        free(lsn_before);
        free(lsn_event);
        free(id);
        fx_case_close(&fc, NULL);
        return done_testing();
}
