/*
 * 0207-takeover.c - two relays on one slot, writers committing all along:
 * kill -9 of the active relay, the standby (which retries
 * START_REPLICATION every second) takes over, and nothing is lost.
 *
 * Each round kills the relay that streams at a random moment, measures the
 * time from the kill to the standby's "taking over" log line, and starts a
 * fresh relay as the next standby. Short variant (CI): 3 takeovers; long
 * variant (RELAY_FAULTS_LONG=1): 20.
 *
 * Asserts: every kill is followed by a takeover (within a generous 60 s;
 * issue 4's 5 s target is reported, not asserted: it measures the server
 * noticing the dead client plus the standby's retry interval on a shared
 * machine), the new standby stands by, and Kafka ends up with every
 * committed event, each aggregate's first occurrences in commit order.
 * Duplicates (events in flight at the kill, sent again from the slot) are
 * allowed and reported.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"
#include "workload.h"

#define TAKEOVER_BOUND_MS 60000
#define TARGET_MS 5000

static int cmp_ll(const void *a, const void *b)
{
        long long x = *(const long long *)a, y = *(const long long *)b;
        return x < y ? -1 : x > y;
}

int main(void)
{
        const bool lng = fx_long();
        const int rounds = lng ? 20 : 3;
        fx_case_t fc;
        fx_case_open(&fc, "takeover", "to");
        h_workload_conf_t wc = {
                .db = fc.db, .suffix = fc.suffix, .writers = 4, .aggregates = 100, .events = 0,
                .max_txn = 10, .pause_ms = 10, .partitions = 4,
        };
        unsigned seed = (unsigned)h_now_ms();

        tap_diag("variant: %s, %d takeovers", lng ? "long" : "short", rounds);
        h_workload_setup(fc.c, &wc);
        fx_sets_init(&fc.sets, fc.db, fc.slot, NULL);

        h_relay_t *r[2];
        r[0] = h_relay_start(fc.sets.v);
        if (!ok(h_relay_wait_log(r[0], "streaming from replication slot", 60000),
                "the first relay streams"))
                h_relay_diag_log(r[0]);
        r[1] = h_relay_start(fc.sets.v);
        if (!ok(h_relay_wait_log(r[1], "standing by", 60000), "the second relay stands by"))
                h_relay_diag_log(r[1]);

        fx_writers_t *ws = fx_writers_start(&wc);
        long long *took = calloc((size_t)rounds, sizeof(long long));
        int taken = 0, within_target = 0, active = 0;
        for (int i = 0; i < rounds; i++) {
                h_sleep_ms(fx_rand(&seed, 1000, 3000));
                h_relay_t *victim = r[active], *standby = r[1 - active];
                int before = fx_log_count(standby, "taking over");
                long long in_kafka = h_workload_count(&wc);
                h_relay_signal(victim, SIGKILL);
                int64_t t_kill = h_now_ms();
                int rc = h_relay_wait(victim, 30000);
                bool got = fx_wait_log_n(standby, "taking over", before + 1, TAKEOVER_BOUND_MS);
                int64_t dt = h_now_ms() - t_kill;
                if (!ok(rc == 128 + SIGKILL && got,
                        "takeover %d: kill -9 of the active relay (exit %d), the standby takes "
                        "over",
                        i + 1, rc)) {
                        h_relay_diag_log(standby);
                        continue;
                }
                took[taken++] = dt;
                within_target += dt <= TARGET_MS;
                tap_diag("takeover %d: standby streaming %.2f s after the kill (%lld events in "
                         "Kafka at the kill, %d committed so far)",
                         i + 1, dt / 1000.0, in_kafka, fx_writers_committed(ws));
                h_relay_free(victim);
                r[active] = h_relay_start(fc.sets.v);
                if (!ok(h_relay_wait_log(r[active], "standing by", 60000),
                        "takeover %d: a fresh relay stands by", i + 1))
                        h_relay_diag_log(r[active]);
                active = 1 - active;
        }
        h_sleep_ms(1000);
        fx_writer_stats_t st;
        fx_writers_stop(ws, false, &st);

        long long expected = 0;
        long long got = fx_wait_all_in_kafka(&fc, &wc, 180000, &expected);
        if (!ok(got >= expected, "Kafka holds at least the %lld committed events (%lld)", expected,
                got))
                h_relay_diag_log(r[active]);

        h_relay_signal(r[active], SIGTERM);
        is_int(h_relay_wait(r[active], 60000), 0, "the active relay stops cleanly on SIGTERM");
        is_int(h_relay_wait(r[1 - active], 0), -1, "the standby is still standing by");

        h_verify_t v;
        h_workload_verify(fc.c, &wc, &v);
        fx_check_delivered("takeover", &v);
        ok(v.messages >= v.expected, "Kafka holds %zu messages for %zu committed events",
           v.messages, v.expected);

        qsort(took, (size_t)taken, sizeof(long long), cmp_ll);
        if (taken > 0)
                tap_diag("FIGURES takeover: rounds=%d takeovers=%d within_5s=%d min=%.2fs "
                         "median=%.2fs max=%.2fs events=%zu duplicates=%zu missing=%zu "
                         "writer_commits=%d",
                         rounds, taken, within_target, took[0] / 1000.0,
                         took[taken / 2] / 1000.0, took[taken - 1] / 1000.0, v.expected,
                         v.duplicates, v.missing, st.committed);
        is_int(taken, rounds, "every kill was followed by a takeover");

        free(took);
        h_relay_free(r[0]);
        h_relay_free(r[1]);
        fx_case_close(&fc, &wc);
        return done_testing();
}
