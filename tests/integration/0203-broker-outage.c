/*
 * 0203-broker-outage.c - the broker goes away mid-load, twice: stopped
 * ($RELAY_TEST_KAFKA_CMD stop, then start) and frozen (SIGSTOP, then
 * SIGCONT), with wal_sender_timeout = 10s and writers committing all along.
 *
 * For each outage:
 *   - the replication connection stays up: the slot's walsender pid is the
 *     same before, during and after, and the server log has no
 *     "terminating walsender process due to replication timeout" (the relay
 *     keeps answering the server while Kafka cannot take anything);
 *   - nothing is confirmed past unacknowledged events: the slot's
 *     confirmed_flush_lsn, sampled every second once the broker is gone,
 *     does not move while the server's WAL grows with events nobody could
 *     acknowledge;
 *   - the relay confirms again, then follows the WAL (confirms past the
 *     server's position of that moment) before the next step;
 *   - everything arrives after recovery, each once (the session never
 *     restarted, so nothing is sent again), each aggregate in commit order.
 *
 * Short variant (CI): 15 s each; long (RELAY_FAULTS_LONG=1): 30 s each.
 * wal_sender_timeout is reset and the broker continued/started however the
 * test ends (faults.h restore command).
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "faults/faults.h"
#include "harness.h"
#include "workload.h"

#define TIMEOUT_MSG "terminating walsender process due to replication timeout"

typedef struct {
        const char *what;
        double outage_s;
        int samples, moved;
        long pid_before, pid_after;
        int pid_changes;
        uint64_t frozen_at, wal_end;
        int committed_during;
        double recovery_s; /* resume -> first confirmation past frozen_at */
        double catchup_s;  /* resume -> Kafka holds everything committed by then */
} outage_t;

static long file_size(const char *path)
{
        struct stat st;
        return stat(path, &st) == 0 ? (long)st.st_size : 0;
}

/* Text of path from offset on (caller frees). */
static char *file_tail(const char *path, long offset)
{
        FILE *f = fopen(path, "rb");
        if (!f)
                return strdup("");
        fseek(f, 0, SEEK_END);
        long end = ftell(f);
        if (offset > end)
                offset = 0; /* rotated or truncated: read it all */
        fseek(f, offset, SEEK_SET);
        char *buf = malloc((size_t)(end - offset) + 1);
        size_t n = buf ? fread(buf, 1, (size_t)(end - offset), f) : 0;
        fclose(f);
        if (!buf)
                tap_bail("out of memory");
        buf[n] = '\0';
        return buf;
}

static void outage(PGconn *c, const char *slot, const h_workload_conf_t *wc, fx_writers_t *ws,
                   bool freeze, int outage_ms, outage_t *o)
{
        memset(o, 0, sizeof(*o));
        o->what = freeze ? "freeze" : "stop";
        fx_slot_t s0 = fx_slot(c, slot);
        o->pid_before = s0.active_pid;
        pid_t kpid = fx_kafka_pid();
        int64_t t0 = h_now_ms();
        if (freeze) {
                if (kpid <= 0 || kill(kpid, SIGSTOP) != 0)
                        tap_bail("could not SIGSTOP the broker (pid %ld)", (long)kpid);
        } else if (fx_kafka_ctl("stop") != 0) {
                tap_bail("could not stop the broker");
        }
        int64_t t_down = h_now_ms();
        tap_diag("%s: broker down %.1f s after the command", o->what, (t_down - t0) / 1000.0);
        /* Acknowledgements received before the broker went away may still be
         * confirmed: take the reference once the relay had time for that. */
        h_sleep_ms(2000);
        fx_slot_t ref = fx_slot(c, slot);
        int committed0 = fx_writers_committed(ws);
        o->frozen_at = ref.confirmed;
        while (h_now_ms() - t_down < outage_ms) {
                h_sleep_ms(1000);
                fx_slot_t s = fx_slot(c, slot);
                o->samples++;
                if (s.confirmed != ref.confirmed) {
                        o->moved++;
                        tap_diag("%s: confirmed_flush_lsn moved from %X/%X to %X/%X during the "
                                 "outage",
                                 o->what, (unsigned)(ref.confirmed >> 32), (unsigned)ref.confirmed,
                                 (unsigned)(s.confirmed >> 32), (unsigned)s.confirmed);
                }
                if (s.active_pid != o->pid_before)
                        o->pid_changes++;
                o->wal_end = s.current;
        }
        o->committed_during = fx_writers_committed(ws) - committed0;
        int64_t t_resume_cmd = h_now_ms();
        o->outage_s = (t_resume_cmd - t_down) / 1000.0;
        if (freeze) {
                if (kill(kpid, SIGCONT) != 0)
                        tap_bail("could not SIGCONT the broker (pid %ld)", (long)kpid);
        } else if (fx_kafka_ctl("start") != 0) {
                tap_bail("could not start the broker again");
        }
        int64_t t_up = h_now_ms();
        tap_diag("%s: broker back %.1f s after the command", o->what,
                 (t_up - t_resume_cmd) / 1000.0);

        /* Recovery: the first confirmation past the frozen position, then
         * Kafka holding everything committed by the time the broker was back. */
        long long want = fx_committed(c);
        int64_t deadline = t_up + 180000;
        for (;;) {
                fx_slot_t s = fx_slot(c, slot);
                if (s.confirmed > o->frozen_at) {
                        o->recovery_s = (h_now_ms() - t_up) / 1000.0;
                        break;
                }
                if (h_now_ms() > deadline) {
                        o->recovery_s = -1;
                        break;
                }
                h_sleep_ms(100);
        }
        long long got = h_workload_wait_count(wc, want, 180000);
        o->catchup_s = got >= want ? (h_now_ms() - t_up) / 1000.0 : -1;
        o->pid_after = fx_slot(c, slot).active_pid;
}

/* After an outage, and before the next step: the relay follows the WAL
 * again (it confirms past the position the server had just written), so
 * the next outage starts from a relay streaming under load, as the first
 * did. */
static void follows_again(PGconn *c, const char *slot, const char *what)
{
        char *lsn = h_pg_wal_lsn(c);
        int64_t ms = h_pg_wait_confirmed(c, slot, lsn, 120000);
        ok(ms >= 0, "%s: then the relay follows the WAL again (confirmed past %s after %.1f s)",
           what, lsn, ms >= 0 ? ms / 1000.0 : -1.0);
        free(lsn);
}

static void report(const outage_t *o)
{
        ok(o->samples > 0 && o->moved == 0,
           "%s: confirmed_flush_lsn stayed at %X/%X in all %d samples while the broker was away",
           o->what, (unsigned)(o->frozen_at >> 32), (unsigned)o->frozen_at, o->samples);
        ok(o->wal_end > o->frozen_at && o->committed_during > 0,
           "%s: meanwhile writers committed %d events and the WAL grew to %X/%X", o->what,
           o->committed_during, (unsigned)(o->wal_end >> 32), (unsigned)o->wal_end);
        ok(o->pid_before > 0 && o->pid_changes == 0 && o->pid_after == o->pid_before,
           "%s: the relay's walsender (pid %ld) stayed connected (after: %ld)", o->what,
           o->pid_before, o->pid_after);
        ok(o->recovery_s >= 0, "%s: the relay confirms again after the broker is back", o->what);
        ok(o->catchup_s >= 0, "%s: Kafka catches up with what was committed", o->what);
        tap_diag("FIGURES broker-%s: outage=%.1fs committed_during_outage=%d "
                 "first_confirm_after=%.1fs caught_up_after=%.1fs walsender_pid=%ld->%ld",
                 o->what, o->outage_s, o->committed_during, o->recovery_s, o->catchup_s,
                 o->pid_before, o->pid_after);
}

int main(void)
{
        const bool lng = fx_long();
        const int outage_ms = lng ? 30000 : 15000;
        char *pglog = fx_fmt("%s/postgresql.log", h_env("RELAY_TEST_LOGDIR"));
        long pglog_start = file_size(pglog);

        /* Quick restore steps first: the broker may take half a minute to start. */
        fx_pg_set("wal_sender_timeout", "10s");
        fx_restore_kafka_running();

        fx_case_t fc;
        fx_case_open(&fc, "outage", "bo");
        h_workload_conf_t wc = {
                .db = fc.db, .suffix = fc.suffix, .writers = 4, .aggregates = 100, .events = 0,
                .max_txn = 10, .pause_ms = 20, .partitions = 4,
        };
        tap_diag("variant: %s, outages of %d s", lng ? "long" : "short", outage_ms / 1000);
        h_workload_setup(fc.c, &wc);
        char *wst = h_pg_value(fc.c, "SHOW wal_sender_timeout");
        is_str(wst, "10s", "wal_sender_timeout is 10s for this test");
        free(wst);

        fx_sets_init(&fc.sets, fc.db, fc.slot, NULL);
        h_relay_t *r = fx_case_relay(&fc, "relay streams");

        fx_writers_t *ws = fx_writers_start(&wc);
        ok(h_workload_wait_count(&wc, 1, 60000) > 0, "events flow before the outages");

        outage_t o_stop, o_freeze;
        outage(fc.c, fc.slot, &wc, ws, false, outage_ms, &o_stop);
        report(&o_stop);
        follows_again(fc.c, fc.slot, o_stop.what);
        outage(fc.c, fc.slot, &wc, ws, true, outage_ms, &o_freeze);
        report(&o_freeze);
        follows_again(fc.c, fc.slot, o_freeze.what);

        fx_writer_stats_t st;
        fx_writers_stop(ws, false, &st);
        is_int(st.failed_txns, 0, "writers never failed (the database was never affected)");
        long long expected = 0;
        long long got = fx_wait_all_in_kafka(&fc, &wc, 180000, &expected);
        is_int(got, expected, "Kafka holds the %lld committed events", expected);

        int rc = fx_stop_relay(r, "SIGTERM: exit 0");
        char *rlog = h_relay_log(r);
        int restarts = fx_count(rlog, "retrying in");
        int kwarn = fx_count(rlog, "Kafka: ");
        is_int(restarts, 0, "the relay never restarted its session");
        if (rc == 0 && restarts != 0)
                h_relay_diag_log(r);
        free(rlog);

        char *pgtail = file_tail(pglog, pglog_start);
        int timeouts = fx_count(pgtail, TIMEOUT_MSG);
        is_int(timeouts, 0, "the server log has no \"" TIMEOUT_MSG "\"");
        free(pgtail);

        h_verify_t v;
        h_workload_verify(fc.c, &wc, &v);
        fx_check_delivered("broker outage", &v);
        is_int(v.duplicates, 0, "no duplicates: the session never restarted, nothing was resent");
        tap_diag("FIGURES broker-outage: events=%zu duplicates=%zu missing=%zu "
                 "session_restarts=%d kafka_warnings_logged=%d walsender_timeouts=%d",
                 v.expected, v.duplicates, v.missing, restarts, kwarn, timeouts);

        fx_pg_reset("wal_sender_timeout");
        h_relay_free(r);
        free(pglog);
        fx_case_close(&fc, &wc);
        return done_testing();
}
