/*
 * 0216-eos-fencing.c - issue 14: exactly-once relays fence each other
 * through their Kafka transactional.id, so a relay that lost its slot can
 * never make anything visible.
 *
 * (1) Takeover of a frozen relay: relay A streams (exactly-once, a Kafka
 * commit every second) while writers commit events; relay B stands by. A
 * is frozen with SIGSTOP in the middle of a Kafka transaction; once the
 * server drops A's walsender (wal_sender_timeout = 5s here), B takes the
 * slot, and its init of the transactional.id fences A and aborts A's open
 * transaction. Then A is continued: it must stop (fenced, exit 6) or stand
 * by (it noticed the lost replication connection first), never commit.
 *
 * (2) Fencing as an exit: a relay D on another database and slot, but
 * configured with the same eos.transactional.id, registers it while B
 * streams: B's next commit is fenced and B stops with exit 6 and a message
 * that says so. A relay E on the original slot resumes from B's
 * checkpoint.
 *
 * Asserts on what a read_committed consumer reads at the end: every
 * committed event, none twice (A's and B's open transactions were never
 * committed; E skipped what B's checkpoint covers), each aggregate's
 * versions in commit order.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"
#include "workload.h"

static void eos_sets(fx_sets_t *s, const char *db, const char *slot, const char *tid,
                     const char *ck_topic)
{
        fx_sets_init(s, db, slot, NULL);
        fx_sets_add(s, "delivery.mode=exactly-once");
        fx_sets_add(s, "eos.transactional.id=%s", tid);
        fx_sets_add(s, "eos.checkpoint.topic=%s", ck_topic);
        fx_sets_add(s, "eos.commit.interval.ms=1000");
}

int main(void)
{
        fx_case_t fc, other;
        fx_case_open(&fc, "eosfence", "ef");
        fx_case_open(&other, "eosfence2", "eg");
        h_workload_conf_t wc = {
                .db = fc.db, .suffix = fc.suffix, .writers = 4, .aggregates = 100, .events = 0,
                .max_txn = 5, .pause_ms = 20, .partitions = 4,
        };
        unsigned seed = (unsigned)h_now_ms() ^ (unsigned)getpid();
        char *tid = fx_fmt("fence-test-%s", fc.suffix);
        char *ck_topic = fx_fmt("outbox.relay.checkpoints_%s", fc.suffix);

        h_workload_setup(fc.c, &wc);
        h_pg_create_outbox(other.c, "outbox");
        fx_pg_set("wal_sender_timeout", "5s");
        eos_sets(&fc.sets, fc.db, fc.slot, tid, ck_topic);
        eos_sets(&other.sets, other.db, other.slot, tid, ck_topic);

        /* (1) A streams, B stands by; A frozen mid-transaction. */
        h_relay_t *a = fx_case_relay(&fc, "relay A streams");
        h_relay_t *b = h_relay_start(fc.sets.v);
        if (!ok(h_relay_wait_log(b, "standing by", 60000), "relay B stands by"))
                h_relay_diag_log(b);
        fx_writers_t *ws = fx_writers_start(&wc);
        h_sleep_ms(3000 + fx_rand(&seed, 0, 999));
        int before = fx_writers_committed(ws);
        kill(h_relay_pid(a), SIGSTOP);
        tap_diag("relay A frozen after %d events were committed", before);
        bool took = h_relay_wait_log(b, "streaming from replication slot", 60000);
        if (!ok(took, "relay B takes the slot over from the frozen relay A"))
                h_relay_diag_log(b);
        h_sleep_ms(2000);
        kill(h_relay_pid(a), SIGCONT);
        int rc_a = -1;
        int64_t deadline = h_now_ms() + 30000;
        while (h_now_ms() < deadline) {
                rc_a = h_relay_wait(a, 200);
                if (rc_a >= 0 || fx_log_count(a, "standing by") > 0)
                        break;
        }
        char *log_a = h_relay_log(a);
        bool fenced_a = rc_a == 6 && strstr(log_a, "another producer took over transactional.id");
        bool standby_a = rc_a < 0 && strstr(log_a, "standing by");
        if (!ok(fenced_a || standby_a,
                "continued, relay A stops as fenced (exit 6) or stands by; it %s",
                fenced_a ? "was fenced" : standby_a ? "stands by" : "did neither"))
                h_relay_diag_log(a);
        free(log_a);
        h_relay_signal(a, SIGTERM);
        h_relay_wait(a, 30000);

        /* (2) D registers the same transactional.id: B is fenced at its next commit. */
        h_relay_t *d = fx_case_relay(&other, "relay D (another slot, the same transactional.id) "
                                             "streams");
        int rc_b = h_relay_wait(b, 60000);
        char *log_b = h_relay_log(b);
        is_int(rc_b, 6, "relay B stops with exit 6 once fenced");
        bool says = strstr(log_b, "another producer took over transactional.id") != NULL;
        ok(says, "and says another producer took over its transactional.id");
        /* Fencing is final: a session that met it (whether at a send or at
         * a commit) ends the relay; the supervisor never retries it. */
        bool retried = false;
        for (const char *l = log_b; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
                const char *end = strchr(l, '\n');
                size_t n = end ? (size_t)(end - l) : strlen(l);
                char *line = strndup(l, n);
                retried |= strstr(line, "took over transactional.id") &&
                           strstr(line, "retrying in");
                free(line);
        }
        ok(!retried, "relay B did not retry after the fencing");
        if (rc_b != 6 || !says || retried)
                h_relay_diag_log(b);
        free(log_b);
        fx_stop_relay(d, "relay D stops cleanly");

        h_relay_t *e = fx_case_relay(&fc, "relay E resumes the slot");
        h_sleep_ms(1500);
        fx_writer_stats_t st;
        fx_writers_stop(ws, false, &st);
        long long expected = 0;
        long long got = fx_wait_all_in_kafka(&fc, &wc, 120000, &expected);
        ok(got >= expected, "Kafka holds at least the %lld committed events", expected);
        fx_stop_relay(e, "relay E stops cleanly");

        h_verify_t v;
        h_workload_verify(fc.c, &wc, &v);
        fx_check_delivered("fencing", &v);
        is_int(v.duplicates, 0,
               "a read_committed consumer sees no event twice: nothing of A's or B's open "
               "transactions became visible");
        tap_diag("FIGURES eos-fencing: events=%zu duplicates=%zu missing=%zu relay_a=%s",
                 v.expected, v.duplicates, v.missing,
                 fenced_a ? "fenced (exit 6)" : standby_a ? "standing by" : "neither");

        h_relay_free(a);
        h_relay_free(b);
        h_relay_free(d);
        h_relay_free(e);
        h_kafka_delete_topic(ck_topic);
        free(ck_topic);
        free(tid);
        fx_pg_reset("wal_sender_timeout");
        fx_case_close(&other, NULL);
        fx_case_close(&fc, &wc);
        return done_testing();
}
