/*
 * 0142-readiness.c - /readyz follows Kafka, /healthz follows the loop.
 *
 * With writers committing all along and librdkafka's statistics every
 * second: the broker is stopped ($RELAY_TEST_KAFKA_CMD stop) until /readyz
 * answers 503 (no Kafka broker up), then started again until /readyz
 * answers 200. Every /healthz asked meanwhile (every 250 ms) answers 200:
 * the loop keeps turning while Kafka is away. Afterwards every committed
 * event is in Kafka, in order. The broker is started again however the test
 * ends (faults.h restore).
 *
 * Port: RELAY_TEST_HTTP_PORT (default 19140) + 2.
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

typedef struct {
        int asked, healthy;
} health_t;

/* Ask /readyz (and /healthz alongside) every 250 ms until it answers want or
 * timeout_ms passes; the last /readyz body into *body. */
static int wait_ready(int port, int want, int timeout_ms, health_t *h, char **body)
{
        int st = -1;
        int64_t deadline = h_now_ms() + timeout_ms;
        for (;;) {
                free(*body);
                *body = NULL;
                st = h_http_request(port, "GET", "/readyz", 2000, body);
                int hs = h_http_request(port, "GET", "/healthz", 2000, NULL);
                h->asked++;
                if (hs == 200)
                        h->healthy++;
                else
                        tap_diag("/healthz answered %d", hs);
                if (st == want || h_now_ms() > deadline)
                        return st;
                h_sleep_ms(250);
        }
}

int main(void)
{
        int port = h_http_port(2);
        fx_restore_kafka_running();

        fx_case_t fc;
        h_workload_conf_t wc;
        fx_steady_case_open(&fc, "ready", "rd", 20, &wc);
        fx_sets_add(&fc.sets, "http.listen=127.0.0.1:%d", port);
        fx_sets_add(&fc.sets, "kafka.statistics.interval.ms=1000");
        h_relay_t *r = fx_case_relay(&fc, "relay streams with http.listen on");
        fx_writers_t *ws = fx_writers_start(&wc);
        ok(h_workload_wait_count(&wc, 1, 30000) > 0, "events flow");

        health_t h = {0};
        char *body = NULL;
        is_int(wait_ready(port, 200, 10000, &h, &body), 200, "/readyz: 200 while streaming");

        if (fx_kafka_ctl("stop") != 0)
                tap_bail("could not stop the broker");
        int64_t t_down = h_now_ms();
        int st = wait_ready(port, 503, 30000, &h, &body);
        is_int(st, 503, "/readyz: 503 once the broker is stopped (after %.1f s)",
               (h_now_ms() - t_down) / 1000.0);
        ok(body && strstr(body, "no Kafka broker is up"), "/readyz says why: %s", body);
        /* A few more seconds down: still unready, still alive. */
        int64_t until = h_now_ms() + 3000;
        int unready = 0, samples = 0;
        while (h_now_ms() < until) {
                h_sleep_ms(250);
                samples++;
                if (wait_ready(port, 503, 0, &h, &body) == 503)
                        unready++;
        }
        is_int(unready, samples, "/readyz stays 503 while the broker is down (%d samples)", samples);

        if (fx_kafka_ctl("start") != 0)
                tap_bail("could not start the broker again");
        int64_t t_up = h_now_ms();
        st = wait_ready(port, 200, 60000, &h, &body);
        is_int(st, 200, "/readyz: 200 again once the broker is back (after %.1f s)",
               (h_now_ms() - t_up) / 1000.0);
        is_int(h.healthy, h.asked, "/healthz answered 200 every time (%d)", h.asked);
        free(body);

        fx_writer_stats_t wst;
        fx_writers_stop(ws, false, &wst);
        long long expected = 0;
        long long held = fx_wait_all_in_kafka(&fc, &wc, 120000, &expected);
        is_int(held, expected, "Kafka holds the %lld committed events", expected);
        h_verify_t v;
        h_workload_verify(fc.c, &wc, &v);
        fx_check_delivered("readiness", &v);

        h_relay_signal(r, SIGTERM);
        is_int(h_relay_wait(r, 30000), 0, "relay stops cleanly");
        h_relay_free(r);
        fx_case_close(&fc, &wc);
        return done_testing();
}
