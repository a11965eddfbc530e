/*
 * 0205-crash-loop.c - issue 4's crash loop: kill -9 of the relay at random
 * moments while 8 writers commit events over 100 aggregates (transactions
 * of 1 to 10 events, some rolled back, some to a savepoint, some deleting
 * their outbox row, an unrelated table written in between), a new relay
 * started after each kill.
 *
 * Short variant (CI): 8 kills during 10 000 events. Long variant
 * (RELAY_FAULTS_LONG=1): 30 kills during 50 000 events.
 *
 * The kill moments follow the load: kill k lands at a random point of the
 * k-th slice of the committed events, while the relay streams (a random
 * 50 ms to 1.5 s after it said so); one kill in four instead hits the relay
 * the previous kill left starting, 0 to 80 ms after the exec (connecting,
 * checking the slot, starting replication).
 *
 * Asserts on what Kafka holds: zero committed events lost, each aggregate's
 * first occurrences in commit order (versions 1, 2, 3, ...), keys, headers
 * and partitions as written. Duplicates (events Kafka had acknowledged but
 * the slot had not been told) are the price of at-least-once: reported.
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
        const int kills = lng ? 30 : 8;
        const int events = lng ? 50000 : 10000;
        fx_case_t fc;
        fx_case_open(&fc, "crashloop", "cl");
        h_workload_conf_t wc = {
                .db = fc.db, .suffix = fc.suffix, .writers = 8, .aggregates = 100, .events = events,
                .max_txn = 10, .rollbacks = true, .deletes = true, .noise = true,
                .pause_ms = 50, .partitions = 4,
        };
        unsigned seed = (unsigned)h_now_ms() ^ (unsigned)getpid();

        tap_diag("variant: %s, %d kills during %d events (seed %u)", lng ? "long" : "short", kills,
                 events, seed);
        h_workload_setup(fc.c, &wc);
        fx_sets_init(&fc.sets, fc.db, fc.slot, NULL);

        h_relay_t *r = fx_case_relay(&fc, "relay streams");

        int64_t t0 = h_now_ms();
        h_workload_t *wl = h_workload_start(&wc);
        fx_kills_t kl;
        r = fx_crash_loop(r, fc.sets.v, wl, kills, events, &seed, &kl);
        int committed = 0, rolled_back = 0;
        int failed = h_workload_wait(wl, &committed, &rolled_back);
        int64_t t_written = h_now_ms();
        is_int(failed, 0, "all writers finished");
        is_int(committed, events, "writers committed %d events", events);
        is_int(kl.not_killed, 0, "every relay was alive when killed");
        is_int(kl.killed, kills,
               "%d kill -9 (%d while events were being written, %d during start-up)", kills,
               kl.during_load, kl.in_startup);

        long long expected = 0;
        long long got = fx_wait_all_in_kafka(&fc, &wc, 300000, &expected);
        if (!ok(got >= expected, "Kafka holds at least the %lld committed events (%lld)", expected,
                got))
                h_relay_diag_log(r);
        int64_t t_done = h_now_ms();
        /* Stop it once it streams: a stop during start-up says nothing about draining. */
        h_relay_wait_log(r, "streaming from replication slot", 60000);
        fx_stop_relay(r, "the last relay stops cleanly on SIGTERM");

        h_verify_t v;
        h_workload_verify(fc.c, &wc, &v);
        fx_check_delivered("crash loop", &v);
        is_int(v.expected, events, "aggregate versions add up to the committed events");
        fx_crash_figures("crash-loop", &v, &kl, rolled_back, (t_written - t0) / 1000.0,
                         (t_done - t0) / 1000.0);

        h_relay_free(r);
        fx_case_close(&fc, &wc);
        return done_testing();
}
