/*
 * 0217-linger-far.c - the round-trip linger against a broker 25 ms away
 * (librdkafka's mock cluster, rd_kafka_mock_broker_set_rtt): the relay
 * measures the round trip, and once it follows the writers it replaces its
 * producer with linger.ms = the round trip while events keep coming. What
 * Kafka holds must not notice: every committed event, each aggregate in
 * commit order, the slot confirmed to the end of the WAL.
 *
 * One broker, the workload's topics with one partition each; writers
 * commit one event per transaction every ~10 ms throughout, so the
 * producer always has something in flight when the relay replaces it (it
 * drains it first). A relay with kafka.linger.ms set keeps it (no
 * measurement, no replacement), checked in the same way.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"
#include "workload.h"

#define RTT_MS 25
#define REPLACED "replacing the Kafka producer for linger.ms"

static rd_kafka_mock_cluster_t *g_mock;

static void run_case(const char *name, const char *bootstraps, const char *setting, bool replace)
{
        fx_case_t fc;
        fx_case_open(&fc, "lingerfar", "lf");
        h_workload_conf_t wc;
        fx_mock_workload(g_mock, &fc, false, &wc);
        fx_sets_init(&fc.sets, fc.db, fc.slot, bootstraps);
        if (setting)
                fx_sets_add(&fc.sets, "%s", setting);
        char *what = fx_fmt("%s: relay streams", name);
        h_relay_t *r = fx_case_relay(&fc, what);
        free(what);
        if (h_relay_wait(r, 0) >= 0) {
                h_relay_free(r);
                fx_case_close(&fc, NULL);
                return;
        }
        fx_writers_t *ws = fx_writers_start(&wc);
        long long n = h_workload_wait_count(&wc, 100, 60000);
        ok(n >= 100, "%s: events arrive (%lld)", name, n);
        bool replaced = h_relay_wait_log(r, REPLACED, replace ? 30000 : 8000);
        ok(replaced == replace, "%s: the producer was %sreplaced for the round trip's linger.ms",
           name, replace ? "" : "not ");
        /* Events keep coming after the replacement (or the wait). */
        long long after = h_workload_count(&wc);
        n = h_workload_wait_count(&wc, after + 200, 60000);
        ok(n >= after + 200, "%s: events arrive after it (%lld more)", name, n - after);
        fx_writer_stats_t st;
        fx_writers_stop(ws, false, &st);
        char *end = h_pg_value(fc.c, "SELECT pg_current_wal_lsn()");
        ok(h_pg_wait_confirmed(fc.c, fc.slot, end, 120000) >= 0,
           "%s: the relay confirms the slot up to the end of the WAL", name);
        free(end);
        char *log = h_relay_log(r);
        /* With kafka.linger.ms set the relay leaves it alone: no measurement. */
        ok(log && (strstr(log, "Kafka round trip") != NULL) == replace,
           "%s: the round trip was %smeasured", name, replace ? "" : "not ");
        free(log);
        char *stop = fx_fmt("%s: SIGTERM: exit 0", name);
        fx_stop_relay(r, stop);
        free(stop);
        h_verify_t v;
        h_workload_verify(fc.c, &wc, &v);
        fx_check_delivered(name, &v);
        if (v.missing || replaced != replace)
                h_relay_diag_log(r);
        h_relay_free(r);
        fx_case_close(&fc, NULL);
}

int main(void)
{
        const char *bootstraps = fx_mock_start(1, &g_mock);
        if (rd_kafka_mock_broker_set_rtt(g_mock, 1, RTT_MS))
                tap_bail("could not set the mock broker's round trip");
        tap_diag("mock cluster at %s, answering %d ms late", bootstraps, RTT_MS);
        run_case("round-trip linger", bootstraps, NULL, true);
        run_case("kafka.linger.ms=5 set", bootstraps, "kafka.linger.ms=5", false);
        return done_testing();
}
