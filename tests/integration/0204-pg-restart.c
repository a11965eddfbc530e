/*
 * 0204-pg-restart.c - PostgreSQL restarts mid-load: pg_ctl restart -m fast,
 * then -m immediate (a crash: the slot's position goes back to what the
 * last checkpoint saved). Writers reconnect and carry on; the relay loses
 * its replication connection, retries with backoff ("retrying in" in its
 * log) and streams again from the slot.
 *
 * Asserts: after each restart the relay retried and streams again, and
 * Kafka ends up with every committed event, each aggregate's first
 * occurrences in commit order. Duplicates (events in flight or not yet
 * confirmed when the connection went, and after the crash whatever the
 * slot had not yet saved) are allowed and reported.
 *
 * Short variant (CI): fast then immediate; long (RELAY_FAULTS_LONG=1): three
 * rounds of both. PostgreSQL is restarted as tests/env/up started it (same
 * data directory and log file) and started again however the test ends.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"
#include "workload.h"

int main(void)
{
        const bool lng = fx_long();
        const int rounds = lng ? 3 : 1;
        fx_restore_pg_running();

        fx_case_t fc;
        fx_case_open(&fc, "pgrestart", "pr");
        h_workload_conf_t wc = {
                .db = fc.db, .suffix = fc.suffix, .writers = 4, .aggregates = 100, .events = 0,
                .max_txn = 10, .pause_ms = 10, .partitions = 4,
        };
        tap_diag("variant: %s, %d round(s) of restart -m fast and -m immediate",
                 lng ? "long" : "short", rounds);
        h_workload_setup(fc.c, &wc);

        fx_sets_init(&fc.sets, fc.db, fc.slot, NULL);
        /* What the server says on an open connection must come through the
         * log sink, not as a raw line on stderr. A setting the server cannot
         * apply makes it say something on every connection ("WARNING:
         * invalid value for parameter ..."); the side connection (slotmon)
         * starts non-blocking with the sink in place, so it hears that
         * one. (The replication connection's handshake, made by the blocking
         * PQconnectdbParams(), still goes to libpq's default: see README.) */
        fx_sets_add(&fc.sets, "log.format=json");
        h_pg_exec(fc.c, "ALTER DATABASE %s SET default_text_search_config = 'pg_catalog.bogus'",
                  fc.db);
        h_relay_t *r = fx_case_relay(&fc, "relay streams");

        fx_writers_t *ws = fx_writers_start(&wc);
        h_sleep_ms(3000);
        ok(h_workload_wait_count(&wc, 1, 60000) > 0, "events flow before the restarts");

        int restarts = 0, recovered = 0;
        double rec_max = 0, rec_sum = 0;
        for (int round = 0; round < rounds; round++) {
                for (int m = 0; m < 2; m++) {
                        const char *mode = m == 0 ? "fast" : "immediate";
                        int streams = fx_log_count(r, "streaming from replication slot");
                        int retries = fx_log_count(r, "retrying in");
                        int committed0 = fx_writers_committed(ws);
                        char action[64];
                        snprintf(action, sizeof(action), "restart -m %s", mode);
                        int64_t t0 = h_now_ms();
                        int rc = fx_pg_ctl(action);
                        int64_t t_up = h_now_ms();
                        restarts++;
                        if (rc != 0)
                                tap_bail("pg_ctl %s failed with status %d", action, rc);
                        bool back = fx_wait_log_n(r, "streaming from replication slot", streams + 1,
                                                  120000);
                        int64_t t_stream = h_now_ms();
                        bool retried = fx_log_count(r, "retrying in") > retries;
                        if (!ok(back && retried,
                                "restart -m %s (round %d): the relay retried with backoff and "
                                "streams again",
                                mode, round + 1))
                                h_relay_diag_log(r);
                        if (back) {
                                recovered++;
                                double rec = (t_stream - t_up) / 1000.0;
                                rec_sum += rec;
                                if (rec > rec_max)
                                        rec_max = rec;
                                tap_diag("restart -m %s: pg_ctl took %.1f s; relay streaming "
                                         "%.1f s after the server was back",
                                         mode, (t_up - t0) / 1000.0, rec);
                        }
                        /* Our own session did not survive the restart either. */
                        PQfinish(fc.c);
                        fc.c = h_pg_connect(fc.db);
                        /* Let the writers reconnect and the load flow again. */
                        int64_t deadline = h_now_ms() + 60000;
                        while (fx_writers_committed(ws) < committed0 + 500 && h_now_ms() < deadline)
                                h_sleep_ms(100);
                        h_sleep_ms(2000);
                }
        }

        fx_writer_stats_t st;
        fx_writers_stop(ws, false, &st);
        tap_diag("writers: %d events committed, %d transactions failed, %d reconnects",
                 st.committed, st.failed_txns, st.reconnects);
        ok(st.reconnects > 0, "the writers had to reconnect (%d times)", st.reconnects);

        long long expected = 0;
        long long got = fx_wait_all_in_kafka(&fc, &wc, 180000, &expected);
        ok(got >= expected, "Kafka holds at least the %lld committed events (%lld)", expected, got);

        fx_stop_relay(r, "SIGTERM: exit 0");
        int retries_total = fx_log_count(r, "retrying in");

        int notices =
                fx_log_count(r, "\"msg\":\"PostgreSQL server: invalid value for parameter");
        ok(notices > 0, "the server's warnings came through the log sink as JSON lines (%d)",
           notices);

        h_verify_t v;
        h_workload_verify(fc.c, &wc, &v);
        fx_check_delivered("pg restart", &v);
        tap_diag("FIGURES pg-restart: restarts=%d recovered=%d recovery_avg=%.1fs "
                 "recovery_max=%.1fs relay_retries=%d events=%zu duplicates=%zu missing=%zu "
                 "writer_reconnects=%d",
                 restarts, recovered, recovered ? rec_sum / recovered : 0.0, rec_max,
                 retries_total, v.expected, v.duplicates, v.missing, st.reconnects);
        is_int(recovered, restarts, "the relay came back after every restart");

        h_relay_free(r);
        fx_case_close(&fc, &wc);
        return done_testing();
}
