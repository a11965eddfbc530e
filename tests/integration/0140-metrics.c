/*
 * 0140-metrics.c - the HTTP endpoint seen by Prometheus' own tools, under a
 * live workload against the real PostgreSQL and Kafka:
 *
 *   - `promtool check metrics` accepts a live /metrics page, which carries
 *     the families the README lists;
 *   - a real Prometheus server (Debian's, on loopback, scraping every
 *     second, storage in a temporary directory) sees
 *     sum(outbox_relay_events_total) rise through its HTTP API while
 *     writers commit events;
 *   - once the writers stop, outbox_relay_events_total of the workload's
 *     topics equals what Kafka holds for them (no session restarted, so
 *     every acknowledged event is there once), and the confirmed LSN on
 *     /metrics reaches the slot's confirmed_flush_lsn;
 *   - /healthz and /readyz answer 200 with JSON, an unknown path 404, a
 *     POST 405.
 *
 * Ports: RELAY_TEST_HTTP_PORT (default 19140) for the relay, +10 for
 * Prometheus.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "faults/faults.h"
#include "harness.h"
#include "workload.h"

/* sum(outbox_relay_events_total) as Prometheus answers it; -1 when it has none yet. */
static double prom_query_events(int pport)
{
        char *body = NULL;
        double v = -1;
        int st = h_http_request(pport, "GET", "/api/v1/query?query=sum%28outbox_relay_events_total%29",
                                5000, &body);
        if (st == 200) {
                json_t *root = json_loads(body, 0, NULL);
                json_t *res = json_object_get(json_object_get(root, "data"), "result");
                json_t *val = json_array_get(json_object_get(json_array_get(res, 0), "value"), 1);
                if (json_is_string(val))
                        v = strtod(json_string_value(val), NULL);
                json_decref(root);
        }
        free(body);
        return v;
}

static pid_t start_prometheus(const char *dir, int pport, int target)
{
        char *cfg = fx_fmt("%s/prometheus.yml", dir);
        h_write_file(cfg,
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                "scrape_configs:\n  - job_name: outbox-relay\n"
                "    static_configs:\n      - targets: ['127.0.0.1:%d']\n",
                target);
        char *log = fx_fmt("%s/prometheus.log", dir);
        char *flag_cfg = fx_fmt("--config.file=%s", cfg);
        char *flag_db = fx_fmt("--storage.tsdb.path=%s/data", dir);
        char *flag_listen = fx_fmt("--web.listen-address=127.0.0.1:%d", pport);
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0)
                tap_bail("fork failed");
        if (pid == 0) {
                FILE *lf = freopen(log, "w", stdout);
                (void)lf;
                dup2(STDOUT_FILENO, STDERR_FILENO);
                execlp("prometheus", "prometheus", flag_cfg, flag_db, flag_listen,
                       "--log.level=warn", (char *)NULL);
                _exit(127);
        }
        free(cfg), free(log), free(flag_cfg), free(flag_db), free(flag_listen);
        return pid;
}

int main(void)
{
        int port = h_http_port(0), pport = h_http_port(10);
        char dir[] = "/tmp/relay-prom-XXXXXX";
        if (!mkdtemp(dir))
                tap_bail("mkdtemp failed");

        fx_case_t fc;
        h_workload_conf_t wc;
        fx_steady_case_open(&fc, "metrics", "mx", 10, &wc);
        fx_sets_add(&fc.sets, "http.listen=127.0.0.1:%d", port);
        fx_sets_add(&fc.sets, "kafka.statistics.interval.ms=1000");
        h_relay_t *r = fx_case_relay(&fc, "relay streams with http.listen on");

        pid_t prom = start_prometheus(dir, pport, port);
        fx_writers_t *ws = fx_writers_start(&wc);
        ok(h_workload_wait_count(&wc, 1, 30000) > 0, "events flow");

        /* promtool on a live page, once it carries the families that appear
         * with the first answers of the slot monitor (every 5 s) and of
         * librdkafka's statistics (every second here). */
        char *page = NULL;
        int status = -1;
        int64_t full_by = h_now_ms() + 15000;
        for (;;) {
                free(page);
                page = NULL;
                status = h_http_request(port, "GET", "/metrics", 5000, &page);
                if ((strstr(page, "# TYPE outbox_relay_slot_wal_status ") &&
                     strstr(page, "# TYPE outbox_relay_kafka_brokers_up ")) ||
                    h_now_ms() > full_by)
                        break;
                h_sleep_ms(500);
        }
        is_int(status, 200, "GET /metrics: 200");
        char *path = fx_fmt("%s/metrics.txt", dir);
        h_write_file(path, "%s", page);
        char *cmd = fx_fmt("promtool check metrics < %s >%s/promtool.out 2>&1", path, dir);
        int rc = system(cmd);
        int pt = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
        if (!ok(pt == 0, "promtool check metrics accepts it (exit %d)", pt)) {
                char *out = fx_fmt("cat %s/promtool.out >&2", dir);
                if (system(out) != 0)
                        tap_diag("could not show promtool's output");
                free(out);
        }
        static const char *const families[] = {
                "outbox_relay_events_total", "outbox_relay_event_bytes_total",
                "outbox_relay_transactions_total", "outbox_relay_delivery_errors_total",
                "outbox_relay_retries_total", "outbox_relay_dead_lettered_total",
                "outbox_relay_skipped_total", "outbox_relay_held_back",
                "outbox_relay_inflight_events", "outbox_relay_inflight_transactions",
                "outbox_relay_received_lsn", "outbox_relay_confirmed_lsn", "outbox_relay_server_lsn",
                "outbox_relay_lag_bytes", "outbox_relay_unconfirmed_commit_age_seconds",
                "outbox_relay_commit_to_ack_seconds", "outbox_relay_session_ends_total",
                "outbox_relay_state", "outbox_relay_slot_wal_status", "outbox_relay_catching_up",
                "outbox_relay_kafka_brokers_up", "outbox_relay_kafka_broker_rtt_avg_seconds",
                "outbox_relay_kafka_partitions_stalled", "process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds",
                "process_start_time_seconds",
        };
        int missing = 0;
        for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++) {
                char *t = fx_fmt("# TYPE %s ", families[i]);
                if (!strstr(page, t)) {
                        tap_diag("missing family %s", families[i]);
                        missing++;
                }
                free(t);
        }
        is_int(missing, 0, "every family the README lists is on the page (slot and Kafka ones "
                           "once their first answer came)");
        ok(h_metrics_sample(page, "outbox_relay_state{state=\"streaming\"}") == 1,
           "state: streaming");
        ok(h_metrics_sample(page, "outbox_relay_kafka_partitions_stalled") == 0,
           "no partition stalled");

        /* A real Prometheus sees the counter rise. */
        double v1 = -1, v2 = -1;
        int64_t deadline = h_now_ms() + 20000;
        while ((v1 = prom_query_events(pport)) <= 0 && h_now_ms() < deadline)
                h_sleep_ms(500);
        deadline = h_now_ms() + 20000;
        while ((v2 = prom_query_events(pport)) <= v1 && h_now_ms() < deadline)
                h_sleep_ms(500);
        ok(v1 > 0 && v2 > v1,
           "Prometheus scraped sum(outbox_relay_events_total) rising: %.0f, then %.0f", v1, v2);

        /* When the writers stop: the counter equals what Kafka holds. */
        fx_writer_stats_t st;
        fx_writers_stop(ws, false, &st);
        long long expected = 0;
        long long held = fx_wait_all_in_kafka(&fc, &wc, 60000, &expected);
        is_int(held, expected, "Kafka holds the %lld committed events", expected);
        double counted = -1, confirmed = -1;
        fx_slot_t slot = {0};
        deadline = h_now_ms() + 10000;
        for (;;) {
                counted = 0;
                for (int i = 0; i < H_WORKLOAD_TYPES; i++) {
                        char topic[256];
                        h_workload_topic(&wc, i, topic, sizeof(topic));
                        char *series = fx_fmt("outbox_relay_events_total{topic=\"%s\"}", topic);
                        double v = h_metrics_sample(page, series);
                        counted += v > 0 ? v : 0;
                        free(series);
                }
                slot = fx_slot(fc.c, fc.slot);
                confirmed = h_metrics_sample(page, "outbox_relay_confirmed_lsn");
                if ((counted == (double)held && confirmed == (double)slot.confirmed) ||
                    h_now_ms() > deadline)
                        break;
                h_sleep_ms(500);
                free(page);
                page = NULL;
                h_http_request(port, "GET", "/metrics", 5000, &page);
        }
        ok(counted == (double)held,
           "outbox_relay_events_total of the workload's topics is what Kafka holds (%.0f, %lld)",
           counted, held);
        ok(confirmed == (double)slot.confirmed,
           "outbox_relay_confirmed_lsn is the slot's confirmed_flush_lsn (%.0f)", confirmed);
        ok(h_metrics_sample(page, "outbox_relay_transactions_total") > 0, "transactions counted");
        ok(h_metrics_sample(page, "outbox_relay_commit_to_ack_seconds_count") > 0,
           "commit-to-ack latencies observed");

        /* The other paths. */
        char *body = NULL;
        is_int(h_http_request(port, "GET", "/healthz", 5000, &body), 200, "/healthz: 200");
        ok(strstr(body, "\"status\":\"alive\"") != NULL, "/healthz body: %s", body);
        free(body);
        is_int(h_http_request(port, "GET", "/readyz", 5000, &body), 200, "/readyz: 200");
        ok(strstr(body, "\"status\":\"ready\"") != NULL, "/readyz body: %s", body);
        free(body);
        is_int(h_http_request(port, "GET", "/nothing", 5000, NULL), 404, "unknown path: 404");
        is_int(h_http_request(port, "POST", "/metrics", 5000, NULL), 405, "POST: 405");
        is_int(h_http_request(port, "HEAD", "/metrics", 5000, NULL), 200, "HEAD /metrics: 200");

        /* A second relay on the same http.listen: a setup error that says
         * what to change, before it touches the slot. */
        char *out2 = NULL, *log2 = NULL;
        int rc2 = h_relay_run_cmd(NULL, NULL, fc.sets.v, 60000, &out2, &log2);
        char *want = fx_fmt("could not listen on \"127.0.0.1:%d\" (http.listen): Address already "
                            "in use; choose a free local address and port, or set http.listen = off",
                            port);
        if (!ok(rc2 == 3 && strstr(log2, want) && !strstr(log2, "streaming from"),
                "a second relay on the busy port exits 3 naming http.listen (exit %d)", rc2))
                tap_diag("its log: %s", log2);
        free(out2), free(log2), free(want);
        is_int(h_http_request(port, "GET", "/healthz", 5000, NULL), 200,
               "the first relay still serves its port");

        kill(prom, SIGTERM);
        waitpid(prom, NULL, 0);
        h_relay_signal(r, SIGTERM);
        is_int(h_relay_wait(r, 30000), 0, "relay stops cleanly");
        h_relay_free(r);
        free(page), free(path), free(cmd);
        char *rm = fx_fmt("rm -rf %s", dir);
        if (system(rm) != 0)
                tap_diag("could not remove %s", dir);
        free(rm);
        fx_case_close(&fc, &wc);
        return done_testing();
}
