/*
 * 0219-eos-metrics.c - under delivery.mode = exactly-once, /metrics counts
 * events, not the checkpoint records that close each Kafka transaction:
 * once the writers stop and Kafka holds every committed event, in one
 * session (no resend, nothing dead-lettered or skipped),
 * outbox_relay_events_produced_total is what Kafka holds and what
 * outbox_relay_events_total acknowledged, however many Kafka transactions
 * were committed. (relay_session_send() counted the checkpoint records as
 * produced events: one more per Kafka commit, also in the catch-up report's
 * events/s.)
 *
 * Port: RELAY_TEST_HTTP_PORT (default 19140) + 20.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"
#include "workload.h"

/* sum(outbox_relay_events_total) over the workload's topics. */
static double acked(const char *page, const h_workload_conf_t *wc)
{
        double sum = 0;
        for (int i = 0; i < H_WORKLOAD_TYPES; i++) {
                char topic[256];
                h_workload_topic(wc, i, topic, sizeof(topic));
                char *series = fx_fmt("outbox_relay_events_total{topic=\"%s\"}", topic);
                double v = h_metrics_sample(page, series);
                sum += v > 0 ? v : 0;
                free(series);
        }
        return sum;
}

int main(void)
{
        int port = h_http_port(20);
        fx_case_t fc;
        h_workload_conf_t wc;
        fx_steady_case_open(&fc, "eosmetrics", "em", 10, &wc);
        char *ck_topic = fx_fmt("outbox.relay.checkpoints_%s", fc.suffix);
        fx_sets_add(&fc.sets, "delivery.mode=exactly-once");
        fx_sets_add(&fc.sets, "eos.checkpoint.topic=%s", ck_topic);
        fx_sets_add(&fc.sets, "eos.commit.interval.ms=100");
        fx_sets_add(&fc.sets, "http.listen=127.0.0.1:%d", port);
        h_relay_t *r = fx_case_relay(&fc, "exactly-once relay streams with http.listen on");

        fx_writers_t *ws = fx_writers_start(&wc);
        ok(h_workload_wait_count(&wc, 1, 30000) > 0, "events flow");
        h_sleep_ms(3000);
        fx_writer_stats_t st;
        fx_writers_stop(ws, false, &st);
        /* Kafka's end offsets count transaction markers too: wait for the
         * slot to be confirmed past the writers' last commit, which
         * exactly-once does once Kafka committed it, then read the topics. */
        char *end = h_pg_value(fc.c, "SELECT pg_current_wal_lsn()");
        ok(h_pg_wait_confirmed(fc.c, fc.slot, end, 60000) >= 0,
           "the slot is confirmed past the writers' last commit (%s)", end);
        free(end);
        h_verify_t v;
        h_workload_verify(fc.c, &wc, &v);
        long long held = (long long)v.messages;
        ok(v.expected > 0 && v.messages == v.expected && v.duplicates == 0 && v.missing == 0,
           "Kafka holds the %zu committed events once each (%zu messages)", v.expected,
           v.messages);

        /* The counters settle once the last Kafka transaction is committed. */
        char *page = NULL;
        double produced = -1, counted = -1;
        int64_t deadline = h_now_ms() + 10000;
        for (;;) {
                free(page);
                page = NULL;
                h_http_request(port, "GET", "/metrics", 5000, &page);
                produced = h_metrics_sample(page, "outbox_relay_events_produced_total");
                counted = acked(page, &wc);
                if ((produced == (double)held && counted == (double)held) ||
                    h_now_ms() > deadline)
                        break;
                h_sleep_ms(500);
        }
        char *log = h_relay_log(r);
        ok(strstr(log, "retrying") == NULL, "one session: nothing was sent twice");
        ok(counted == (double)held,
           "outbox_relay_events_total of the workload's topics is what Kafka holds (%.0f, %lld)",
           counted, held);
        ok(produced == (double)held,
           "outbox_relay_events_produced_total is what Kafka holds (%.0f, %lld), not counting the "
           "checkpoint records",
           produced, held);
        free(log);
        free(page);

        fx_stop_relay(r, "relay stops cleanly");
        h_relay_free(r);
        h_kafka_delete_topic(ck_topic);
        free(ck_topic);
        fx_case_close(&fc, &wc);
        return done_testing();
}
