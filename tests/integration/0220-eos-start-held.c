/*
 * 0220-eos-start-held.c - under delivery.mode = exactly-once a session
 * starts its replication stream, then registers its transactional.id and
 * reads its checkpoint back; that read waits while another producer's
 * transaction is open on the checkpoint topic (0218), up to 30 s. The
 * stream must stay alive meanwhile: without status updates the server ends
 * it after wal_sender_timeout ("terminating walsender process due to
 * replication timeout"), and every new session waited and lost its stream
 * again until that transaction ended.
 *
 * Here wal_sender_timeout is 3 s (the relay's own connection only, through
 * its conninfo's options) and the other transaction stays open for 9 s
 * after the relay started. The relay must stream in its first session, and
 * the writers' events reach Kafka once each.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"
#include "workload.h"

#define HELD_MS 9000

int main(void)
{
        fx_case_t fc;
        fx_case_open(&fc, "eosheld", "eh");
        h_workload_conf_t wc = {
                .db = fc.db, .suffix = fc.suffix, .writers = 1, .aggregates = 20, .events = 300,
                .max_txn = 3, .pause_ms = 5, .partitions = 1,
        };
        h_workload_setup(fc.c, &wc);
        fx_held_checkpoint_t held;
        fx_held_checkpoint_open(&held, &fc);

        char *ci = h_pg_conninfo(fc.db);
        fx_sets_init(&fc.sets, fc.db, fc.slot, NULL);
        fx_sets_add(&fc.sets, "postgres.conninfo=%s options='-c wal_sender_timeout=3000'", ci);
        fx_sets_add(&fc.sets, "delivery.mode=exactly-once");
        fx_sets_add(&fc.sets, "eos.checkpoint.topic=%s", held.topic);
        free(ci);
        h_relay_t *r = h_relay_start(fc.sets.v);
        int64_t t0 = h_now_ms();
        /* The relay's stream starts, then it waits in its checkpoint read. */
        bool active;
        while (!(active = fx_slot(fc.c, fc.slot).active_pid != 0) && h_now_ms() - t0 < 30000)
                h_sleep_ms(100);
        ok(active, "the relay starts its stream");
        int64_t left = HELD_MS - (h_now_ms() - t0);
        if (left > 0)
                h_sleep_ms((int)left);
        char *log = h_relay_log(r);
        ok(strstr(log, "exactly-once: transactional.id") == NULL,
           "its checkpoint read still waits for the other transaction after %d ms", HELD_MS);
        free(log);
        fx_held_checkpoint_release(&held);

        if (!ok(h_relay_wait_log(r, "streaming from replication slot", 40000),
                "then it streams"))
                h_relay_diag_log(r);
        fx_writers_t *ws = fx_writers_start(&wc);
        fx_writer_stats_t st;
        fx_writers_stop(ws, true, &st);
        char *end = h_pg_value(fc.c, "SELECT pg_current_wal_lsn()");
        ok(h_pg_wait_confirmed(fc.c, fc.slot, end, 60000) >= 0,
           "the slot is confirmed past the writers' last commit (%s)", end);
        free(end);
        log = h_relay_log(r);
        int sessions = 0;
        for (const char *p = log; (p = strstr(p, "streaming from replication slot")); p++)
                sessions++;
        if (!ok(sessions == 1 && !strstr(log, "retrying in"),
                "one session: the stream outlived the wait (%d sessions)", sessions))
                h_relay_diag_log(r);
        free(log);
        fx_stop_relay(r, "relay stops cleanly");
        h_verify_t v;
        h_workload_verify(fc.c, &wc, &v);
        ok(v.expected == 300 && v.messages == v.expected && v.missing == 0 && v.duplicates == 0,
           "Kafka holds the %zu committed events once each (%zu messages)", v.expected,
           v.messages);
        h_relay_free(r);
        fx_held_checkpoint_close(&held);
        fx_case_close(&fc, &wc);
        return done_testing();
}
