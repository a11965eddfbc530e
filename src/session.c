/*
 * session.c - one streaming session, the main loop's body: replication
 * connection -> pgoutput decoder -> outbox mapping -> producer -> ack
 * tracker -> confirmed LSN, all created together and torn down together.
 * Any delivery error, fatal producer error or lost connection ends the
 * session without confirming anything more; the next one resumes from the
 * slot, so an event is never lost, only possibly sent again.
 *
 * One thread: poll() waits on the replication socket and the producer's
 * wake-up pipe; delivery reports run inside relay_producer_poll() here, so
 * the ack tracker needs no locks. Events that cannot simply be produced are
 * settled in place by settle.c.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "relay/backfill.h"
#include "relay/checkpoint.h"
#include "relay/log.h"
#include "relay/lsn.h"
#include "relay/notify.h"
#include "session_int.h"

/* Confirm progress at most this often while events flow (status updates
 * cost the walsender a spinlock and possibly a slot write each). */
#define CONFIRM_MIN_GAP_MS 100
/* Messages decoded per pass before Kafka's reports are served again. */
#define READ_BATCH 4096
#define PROGRESS_LOG_MS 60000
/* The backfill reports its progress more often: it is the start's wait. */
#define BACKFILL_LOG_MS 10000
/* Backfilled rows produced between two turns serving Kafka's reports. */
#define BACKFILL_SERVE_ROWS 256
/* Hand memory freed after a burst back to the system this often. */
#define TRIM_MS 5000
/* How long the first start waits for Kafka to answer before calling the
 * setup wrong (exit 3) rather than retrying. */
#define KAFKA_PING_MS 10000
/* Exactly-once: slices of a Kafka commit (status updates flow between
 * them), and the limits for registering the transactional.id and reading
 * the checkpoint back at session start. */
#define EOS_COMMIT_SLICE_MS 200
#define EOS_COMMIT_TIMEOUT_MS 60000
#define EOS_INIT_MS 30000
/* How often a wait beyond the loop ticks (relay_tick_fn). */
#define WAIT_TICK_MS 100
#define EOS_CHECKPOINT_READ_MS 30000

/*
 * The first failure is the one to report, unless it is a purge: a refused
 * batch stops an idempotent producer (gapless), and librdkafka then purges
 * its queue from another thread, so the purged events' reports ("Purged in
 * queue") may be served before the refused ones'. The refusal is the cause.
 */
static void session_fail(relay_session_t *s, bool purged, const char *fmt, ...)
        RELAY_PRINTF(3, 4);
static void session_fail(relay_session_t *s, bool purged, const char *fmt, ...)
{
        va_list ap;
        if (s->dr_failed && (purged || !s->dr_purged))
                return;
        s->dr_failed = true;
        s->dr_purged = purged;
        va_start(ap, fmt);
        vsnprintf(s->dr_err, sizeof(s->dr_err), fmt, ap);
        va_end(ap);
}

static void on_delivery(void *ctx, uint64_t tag, const relay_delivery_t *d)
{
        relay_session_t *s = ctx;
        if (tag == TAG_CHECKPOINT) {
                if (d->err)
                        session_fail(s, d->cls == RELAY_DR_PURGED,
                                     "could not write the checkpoint record: %s", d->errstr);
                return;
        }
        if (d->err)
                relay_metrics_delivery_error(s->proc->metrics, d->cls);
        else
                relay_metrics_acked(s->proc->metrics, d->topic, d->bytes);
        if (tag == TAG_INPLACE) {
                s->inplace.pending = false;
                s->inplace.err = d->err;
                s->inplace.cls = d->cls;
                relay_err_set(s->inplace.why, sizeof(s->inplace.why), "%s",
                              d->errstr ? d->errstr : "");
                return;
        }
        uint64_t seq = tag >> 1;
        if (!d->err) {
                if (relay_acktrack_ack(s->ack, seq) != 0)
                        s->ack_bug = true;
                return;
        }
        if (d->err != RELAY_EREJECTED) {
                if (d->cls == RELAY_DR_IMPLICIT_ACK)
                        s->proc->implicit_acks++;
                session_fail(s, d->cls == RELAY_DR_PURGED, "could not deliver event to Kafka: %s",
                             d->errstr);
                return;
        }
        /* Refused for good, maybe because of a neighbour in its batch. The
         * producer has stopped (gapless), so nothing after it was sent: the
         * next session settles it in place, alone. */
        const relay_event_t *ev = d->event;
        relay_lsn_t txn = relay_acktrack_commit_lsn(s->ack, seq);
        if (d->cls == RELAY_DR_TOO_LARGE)
                relay_limits_forget(s->proc->lim, ev->topic);
        if (relay_policy_rejected(s->proc->pol, txn, ev, d->errstr) < 0) {
                session_fail(s, false, "out of memory remembering rejected event \"%.*s\"",
                             RELAY_ID_ARGS(ev->id, ev->id_len));
                return;
        }
        session_fail(s, false,
                     "Kafka rejected event \"%.*s\" of the transaction at " RELAY_LSN_FMT
                     ": %s; %s",
                     RELAY_ID_ARGS(ev->id, ev->id_len), RELAY_LSN_ARGS(txn), d->errstr,
                     s->draining ? "the relay stops: the next start sends it again"
                                 : "resuming from the slot to send it again on its own");
}

void relay_session_free(relay_session_t *s)
{
        if (!s)
                return;
        /* The producer first: purging it serves delivery reports into the tracker. */
        relay_producer_free(s->prod);
        relay_source_free(s->src);
        relay_acktrack_free(s->ack);
        free(s);
}

int relay_session_kafka_check(relay_session_t *s, char *err, size_t errlen)
{
        char warn[RELAY_ERRBUF];
        if (relay_producer_take_warning(s->prod, warn, sizeof(warn)))
                relay_log_warning("Kafka: %s", warn);
        if (s->ack_bug) {
                relay_err_set(err, errlen, "delivery report for a message that is not in flight");
                return RELAY_EKAFKA;
        }
        /* A fenced producer's messages fail too ("old epoch"): that is no
         * transient delivery error but the end of this relay. */
        if (s->eos.on && s->dr_failed &&
            relay_producer_check(s->prod, err, errlen) == RELAY_EFENCED)
                return RELAY_EFENCED;
        if (s->dr_failed && !s->dr_purged) {
                relay_err_set(err, errlen, "%s", s->dr_err);
                return RELAY_EKAFKA;
        }
        int rc = relay_producer_check(s->prod, err, errlen);
        if (rc) {
                /* A refused batch stops the producer (gapless) just before
                 * its reports are queued, and librdkafka purges its queue:
                 * serve them (up to 200 ms), so the refusal, not the purge,
                 * is what is reported and remembered. */
                for (int i = 0; i < 10 && (!s->dr_failed || s->dr_purged); i++)
                        relay_producer_poll(s->prod, 20);
                /* Purged messages ("Purged in queue") are a consequence:
                 * then the producer's fatal error says more. Not for a
                 * fenced producer either: 0216 once logged a purge instead
                 * of the fencing. */
                if (s->dr_failed && !s->dr_purged && rc != RELAY_EFENCED)
                        relay_err_set(err, errlen, "%s", s->dr_err);
                return rc;
        }
        if (s->dr_failed) { /* purged while the producer runs: closed under us */
                relay_err_set(err, errlen, "%s", s->dr_err);
                return RELAY_EKAFKA;
        }
        return 0;
}

#define RELINGER_MAX_QUEUED 2500
#define RELINGER_SETTLE_MS 5000
#define RELINGER_GAP_MS 300000

/* The round trip while following (relay_producer_rtt_watch_report()): a broker that
 * moved farther or nearer since the start's measurement asks for another
 * linger.ms, which session_relinger() applies as it did the first, at
 * most once per RELINGER_GAP_MS (a link that flaps between two distances
 * would otherwise cost a new connection every few windows). A window whose
 * report found librdkafka's queue long was a catch-up: not steady. */
/* What the producer's statistics showed: partition growth, stalls. */
static void session_say_notes(relay_session_t *s)
{
        char msg[RELAY_ERRBUF];
        bool warning;
        while (relay_producer_take_note(s->prod, msg, sizeof(msg), &warning)) {
                if (warning)
                        relay_log_warning("%s", msg);
                else
                        relay_log_info("%s", msg);
        }
}

static void session_rewatch(relay_session_t *s, const relay_kafka_stats_t *ks, int64_t now)
{
        relay_process_t *pr = s->proc;
        if (!relay_producer_linger_auto(s->prod))
                return;
        int cur = pr->linger_ms > 0 ? pr->linger_ms : relay_producer_linger_ms(s->prod);
        double rtt;
        bool steady = ks->msg_cnt <= RELINGER_MAX_QUEUED;
        int linger = relay_producer_rtt_watch_report(pr->rttw, ks, steady, cur, &rtt);
        if (linger <= 0 || linger == cur ||
            (pr->relingered_ms > 0 && now - pr->relingered_ms < RELINGER_GAP_MS))
                return;
        relay_log_info("Kafka round trip now %.1f ms (shortest requests of %d statistics "
                       "windows in a row, the middle one): linger.ms %d once following (from %d)",
                       rtt, RELAY_PRODUCER_RTT_WINDOWS, linger, cur);
        pr->linger_ms = linger;
        pr->relinger_after_ms = now;
}

/*
 * The publication no longer sends an outbox table's inserts under its name
 * (slotmon.c): what is written to it from then on never reaches the
 * relay, and nothing in the stream says so. Warned once per table while it
 * lasts; the relay keeps streaming (a migration may be between two steps).
 */
static void session_unpublished(relay_session_t *s, const char *table)
{
        relay_process_t *pr = s->proc;
        if (strcmp(pr->unpublished, table) == 0)
                return;
        if (table[0])
                relay_log_warning("publication \"%s\" no longer sends the inserts of outbox table "
                                  "\"%s\" (changed while the relay runs: the table dropped, "
                                  "renamed or removed from it, publish without insert, or a "
                                  "partitioned one without publish_via_partition_root): events "
                                  "written to it now are lost; see outbox-relay check for the fix",
                                  s->set->publication_name, table);
        else
                relay_log_info("publication \"%s\" sends the inserts of every outbox table again",
                               s->set->publication_name);
        relay_err_set(pr->unpublished, sizeof(pr->unpublished), "%s", table);
}

/*
 * Metrics (metrics.h): every turn tells the metrics the loop is alive and
 * what is confirmable; at most every RELAY_METRICS_PUBLISH_MS the gauges are
 * sampled and published for the HTTP thread, the slot monitor is stepped
 * (never blocking) and the catch-up report is logged when due.
 */
static void session_metrics(relay_session_t *s, relay_lsn_t confirmable, int64_t now)
{
        relay_process_t *pr = s->proc;
        relay_kafka_stats_t ks;
        relay_slot_info_t si;
        relay_catchup_t cu;
        char err[RELAY_ERRBUF];

        if (!relay_metrics_turn(pr->metrics, now, confirmable))
                return;
        if (relay_producer_stats(s->prod, &ks)) {
                relay_metrics_kafka(pr->metrics, &ks);
                session_rewatch(s, &ks, now);
        }
        session_say_notes(s);
        int rc = relay_slotmon_step(pr->slotmon, now, &si, err, sizeof(err));
        if (rc == 1) {
                relay_metrics_slot(pr->metrics, &si);
                session_unpublished(s, si.unpublished);
                /* Said once per failure, not once per process: a later one
                 * went unsaid (0145). */
                if (pr->slotmon_warned)
                        relay_log_info("the connection that reads the slot works again: slot "
                                       "metrics are back");
                pr->slotmon_warned = false;
        } else if (rc < 0) {
                /* Missing, not the last answer: a wal_status of "reserved"
                 * shown on while the slot may since have been lost would
                 * mislead whoever alerts on it. */
                relay_metrics_slot(pr->metrics, &(relay_slot_info_t){.known = false});
                if (!pr->slotmon_warned)
                        relay_log_warning("%s; slot metrics are missing until it works, retrying",
                                          err);
                pr->slotmon_warned = true;
        }
        relay_metrics_sample_t sm = {
                .received = s->prog.received,
                .confirmed = s->prog.sent_flush,
                .keepalive_end = s->prog.keepalive_end,
                .inflight_events = relay_acktrack_pending(s->ack),
                /* Between resends too: a wait of errors.backoff.ms holds
                 * back as much as the send. */
                .held_back = s->inplace.pending || s->inplace.settling,
        };
        relay_metrics_publish(pr->metrics, &sm);
        if (relay_metrics_catchup(pr->metrics, now, &cu)) {
                char eta[64];
                if (cu.eta_s >= 0)
                        snprintf(eta, sizeof(eta), "%.0f s", cu.eta_s);
                else
                        snprintf(eta, sizeof(eta), "unknown (the lag is not shrinking)");
                if (cu.done)
                        relay_log_info("caught up: %.0f events/s, %lld bytes behind the server",
                                       cu.events_per_s, (long long)cu.lag_bytes);
                else
                        relay_log_info("catching up: %.0f events/s, %.1f MB/s of WAL, %.1f MB "
                                       "behind the server, done in about %s",
                                       cu.events_per_s, cu.wal_bytes_per_s / 1e6,
                                       (double)cu.lag_bytes / 1e6, eta);
        }
}

/* Send a standby status update when one is due, asked for, or worth it. */
int relay_session_status(relay_session_t *s, bool force, char *err, size_t errlen)
{
        progress_t *pg = &s->prog;
        relay_lsn_t confirmed = relay_acktrack_confirmable(s->ack);
        if (relay_acktrack_drained(s->ack) && pg->keepalive_end > confirmed && !s->eos.open) {
                relay_acktrack_advance_idle(s->ack, pg->keepalive_end);
                confirmed = relay_acktrack_confirmable(s->ack);
                /* Nothing produced is uncommitted: the idle WAL may go too. */
                if (s->eos.on && !s->eos.spoilt && !s->eos.unproven &&
                    confirmed > s->eos.committed)
                        s->eos.committed = confirmed;
        }
        if (s->eos.on && confirmed > s->eos.committed)
                confirmed = s->eos.committed; /* acknowledged is not yet committed */
        int64_t now = relay_now_ms();
        session_metrics(s, confirmed, now);
        if (!s->streaming)
                return 0; /* backfilling: no stream to send status on yet */
        int64_t since = now - pg->last_status_ms;
        if (!force && !pg->reply_pending && since < pg->status_interval_ms &&
            !(confirmed > pg->sent_flush && since >= CONFIRM_MIN_GAP_MS))
                return 0;
        /* Write is everything the server sent: a keepalive that came while
         * events were in flight did not raise received, yet its WAL end is
         * what the idle advance above confirms, and flush must not pass
         * write. Never confirm past it (the encoder lowers it the same way;
         * here so that sent_flush says what was sent). */
        relay_lsn_t write = pg->received > pg->keepalive_end ? pg->received : pg->keepalive_end;
        if (confirmed > write)
                confirmed = write;
        int rc = relay_repl_send_status(s->repl, write, confirmed, false, err, errlen);
        if (rc)
                return rc;
        if (confirmed != pg->sent_flush)
                relay_log_debug("confirmed " RELAY_LSN_FMT, RELAY_LSN_ARGS(confirmed));
        pg->sent_flush = confirmed;
        pg->last_status_ms = now;
        pg->reply_pending = false;
        return 0;
}

/* Serve Kafka for up to ms while keeping status updates flowing, so
 * wal_sender_timeout cannot fire while the stream is held. */
int relay_session_serve(relay_session_t *s, int ms, char *err, size_t errlen)
{
        int rc;
        relay_process_turn(s->proc); /* the stream is held, not stuck */
        relay_producer_poll(s->prod, ms);
        if ((rc = relay_session_kafka_check(s, err, errlen)))
                return rc;
        return relay_session_status(s, false, err, errlen);
}

/* Offer one event to the producer, waiting out a full queue. */
int relay_session_send(relay_session_t *s, const relay_event_t *ev, uint64_t tag, char *err,
                       size_t errlen)
{
        if (s->eos.on && !s->eos.open) {
                int rc = relay_producer_txn_begin(s->prod, err, errlen);
                if (rc)
                        return rc == RELAY_EAGAIN ? RELAY_EKAFKA : rc;
                s->eos.open = true;
                s->eos.opened_ms = relay_now_ms();
                s->eos.txn_events = 0;
        }
        for (;;) {
                int rc = relay_producer_send(s->prod, ev, tag, err, errlen);
                /* A checkpoint record is no event (0219: the produced count
                 * ran one ahead per Kafka commit, so did catch-up's events/s). */
                if (rc == 0 && tag != TAG_CHECKPOINT) {
                        relay_metrics_produced(s->proc->metrics);
                        s->eos.txn_events++;
                }
                /* A dead producer refuses everything: say why it died, and
                 * keep a fenced one's code (exit 6): returning RELAY_EKAFKA
                 * made a relay fenced at a produce retry, register the
                 * transactional.id again and fence the newer relay back
                 * (0216, 2 of ~10 runs). */
                if (rc == RELAY_EKAFKA) {
                        int krc = relay_session_kafka_check(s, err, errlen);
                        if (krc)
                                return krc;
                }
                if (rc != RELAY_EAGAIN)
                        return rc;
                if ((rc = relay_session_serve(s, 10, err, errlen)))
                        return rc;
        }
}

/* Wait until Kafka has answered for everything produced so far. */
int relay_session_wait_drained(relay_session_t *s, char *err, size_t errlen)
{
        int rc;
        /* Nothing is produced meanwhile, so lingering for more events only
         * held each dead-letter copy or resend back by linger.ms (7.3-8.7 ms
         * per copy, normal and dead-lettered events alternating; 2.4-3.0
         * flushed: tests/bench/dlq-alternate): what is queued goes at once
         * (0246). */
        while (relay_producer_outq_len(s->prod) > 0) {
                relay_producer_flush(s->prod, 10);
                if ((rc = relay_session_serve(s, 0, err, errlen)))
                        return rc;
        }
        return 0;
}

/*
 * A start step waits beyond the loop: creating the slot waits for the
 * transactions then running to end, the exactly-once registration for its
 * coordinator and the checkpoint read for another producer's transaction
 * (up to 30 s each). The loop is alive meanwhile (the
 * watchdog, /healthz), a started stream gets its status updates (without
 * them a shorter wal_sender_timeout ended it under the read, every session
 * again until that transaction ended: 0220), and a stop ends the wait.
 */
static int session_waiting(void *ctx, char *err, size_t errlen)
{
        relay_session_t *s = ctx;
        relay_process_turn(s->proc);
        relay_metrics_alive(s->proc->metrics, relay_now_ms());
        if (*s->stop) {
                /* A command the stop cancels fails with the server's
                 * "canceling statement": relay_session_open() knows why. */
                s->stop_cancelled = true;
                return relay_err(err, errlen, RELAY_ESTOPPED, "stopped while waiting");
        }
        return s->streaming ? relay_session_status(s, false, err, errlen) : 0;
}

/* A backfill statement waits on the server (the first FETCH sorts the whole
 * table): the loop's duties go on, and the start, which is making
 * progress, is extended past the unit's start timeout. */
static int backfill_waiting(void *ctx, char *err, size_t errlen);

/* The replication connection, idle during a backfill, holds its temporary
 * slot: once the server ended it, every row read is for nothing (the slot
 * cannot be made permanent) and would be sent again by the next session.
 * Remembered, so that a statement this cancels fails with the reason and
 * RELAY_EIO, not as a refused snapshot.filter. */
static int backfill_slot_held(relay_session_t *s, char *err, size_t errlen)
{
        if (!s->backfill_lost[0] &&
            relay_repl_idle_alive(s->repl, s->backfill_lost, sizeof(s->backfill_lost)) == 0)
                return 0;
        return relay_err(err, errlen, RELAY_EIO, "%s", s->backfill_lost);
}

static int backfill_waiting(void *ctx, char *err, size_t errlen)
{
        relay_session_t *s = ctx;
        relay_notify_extend_start();
        int rc = backfill_slot_held(s, err, errlen);
        return rc ? rc : session_waiting(ctx, err, errlen);
}

/* Register the transactional.id (up to EOS_INIT_MS); the stream is started. */
static int eos_init(relay_session_t *s, char *err, size_t errlen)
{
        int64_t deadline = relay_now_ms() + EOS_INIT_MS;
        int rc;
        /* In short calls (librdkafka resumes one that timed out), so the
         * wait is kept as session_waiting() keeps it. */
        while ((rc = relay_producer_txn_init(s->prod, WAIT_TICK_MS, err, errlen)) == RELAY_EAGAIN &&
               relay_now_ms() < deadline)
                if ((rc = session_waiting(s, err, errlen)))
                        return rc;
        return rc == RELAY_EAGAIN ? RELAY_EKAFKA : rc;
}

/* A new producer with the batch size the process has settled on. The old
 * one must have nothing in flight (or be dead: gapless stops it at the
 * first refusal). */
int relay_session_new_producer(relay_session_t *s, char *err, size_t errlen)
{
        if (s->eos.on && s->eos.open) {
                /* A new producer of our transactional.id would abort the open
                 * transaction under us: resume from the checkpoint instead
                 * (the process keeps what it learnt, e.g. the batch size). */
                relay_err_set(err, errlen, "the Kafka producer must be replaced; resuming from "
                                           "the last committed checkpoint");
                return RELAY_EKAFKA;
        }
        /* Drained: a stalled partition's events were all acknowledged, and
         * the old producer's next report, which would have said so, never
         * comes. */
        if (s->prod && relay_producer_outq_len(s->prod) == 0 && !s->dr_failed &&
            relay_producer_check(s->prod, err, errlen) == 0) {
                relay_producer_end_stalls(s->prod);
                session_say_notes(s);
        }
        relay_producer_free(s->prod);
        s->prod = NULL;
        int rc = relay_producer_new(&s->prod, s->cfg, s->proc->max_batch, s->proc->linger_ms,
                                    s->eos.on ? s->eos.tid : NULL, s->proc->parts, on_delivery,
                                    s, err, errlen);
        if (rc == 0 && s->eos.on)
                rc = eos_init(s, err, errlen);
        return rc;
}

/* The time from one commit's start to the next one's: eos.commit.interval.ms,
 * or eos.commit.catchup.interval.ms while the relay is behind. Each commit
 * holds the stream while librdkafka flushes what is queued (measured: 10-80
 * ms in a catch-up, the EndTxn round trip after it 1-5 ms), so a catch-up
 * goes faster with fewer of them; events already that old lose little by
 * waiting that much longer. Timed from the previous commit rather than from
 * the transaction's first event, so an event waits at most about one
 * interval and a lone event after a quiet spell none. While following, a
 * commit begins as much before the interval is up as recent commits took
 * (at most half of it), so it ends about one interval after the previous
 * one began: an event that came just after that one is visible about one
 * interval later, not one interval plus the commit (issue 14: p99 within
 * the interval + 10 ms). */
static int64_t eos_interval(const relay_session_t *s)
{
        int64_t i = s->set->eos_commit_interval_ms, c = s->set->eos_commit_catchup_interval_ms;
        if (s->eos.behind && c > i)
                return c;
        return i - (s->eos.commit_ms < i / 2 ? s->eos.commit_ms : i / 2);
}

/* At a PostgreSQL transaction boundary: is the open Kafka transaction due? */
static bool eos_commit_due(const relay_session_t *s, int64_t now)
{
        const eos_t *e = &s->eos;
        uint64_t max = (uint64_t)s->set->eos_commit_max_events;
        return e->open && ((max > 0 && e->txn_events >= max) ||
                           now - e->last_commit_ms >= eos_interval(s));
}

/*
 * Close the open Kafka transaction: its checkpoint record (the end LSN of
 * its last PostgreSQL transaction), then the commit, in slices so status
 * updates keep flowing. Committed, everything up to that LSN may be
 * confirmed. A commit that fails is aborted and the session fails: the
 * next one resumes from the slot and skips what the checkpoint covers.
 */
static int eos_commit(relay_session_t *s, char *err, size_t errlen)
{
        eos_t *e = &s->eos;
        char val[RELAY_LSN_BUFSZ];
        int rc;

        if (!e->open)
                return 0;
        relay_lsn_format(e->open_end, val);
        relay_event_t ck = {
                .topic = s->set->eos_checkpoint_topic,
                .key = e->key,
                .key_len = strlen(e->key),
                .value = val,
                .value_len = strlen(val),
        };
        if ((rc = relay_session_send(s, &ck, TAG_CHECKPOINT, err, errlen)))
                return rc;
        int64_t t0 = relay_now_ms(), deadline = t0 + EOS_COMMIT_TIMEOUT_MS;
        e->last_commit_ms = t0;
        for (;;) {
                relay_process_turn(s->proc);
                rc = relay_producer_txn_commit(s->prod, EOS_COMMIT_SLICE_MS, err, errlen);
                if (rc != RELAY_EAGAIN || relay_now_ms() > deadline)
                        break;
                if ((rc = relay_session_status(s, false, err, errlen)))
                        return rc;
        }
        /* Delivery reports were served by the commit's flush. */
        if (rc == 0 && (rc = relay_session_kafka_check(s, err, errlen)) == 0) {
                int64_t t1 = relay_now_ms();
                relay_log_debug("committed a Kafka transaction of %llu events up to " RELAY_LSN_FMT
                                " after %lld ms open: the commit (flush and EndTxn) took %lld ms",
                                (unsigned long long)e->txn_events, RELAY_LSN_ARGS(e->open_end),
                                (long long)(t0 - e->opened_ms), (long long)(t1 - t0));
                e->held_ms += t1 - t0;
                if (!e->behind)
                        e->commit_ms = e->commit_ms ? (3 * e->commit_ms + (t1 - t0)) / 4 : t1 - t0;
                if (t1 - t0 > e->max_held_ms)
                        e->max_held_ms = t1 - t0;
                e->open = false;
                e->committed = e->open_end;
                e->commits++;
                return 0;
        }
        if (rc == RELAY_EAGAIN)
                rc = RELAY_EKAFKA;
        e->spoilt = true;
        if (rc == RELAY_EKAFKA) {
                char aerr[RELAY_ERRBUF];
                if (relay_producer_txn_abort(s->prod, 5000, aerr, sizeof(aerr)) == 0)
                        e->open = false;
        }
        return rc;
}

/*
 * The checkpoint read back belongs to a WAL history this server does not
 * have (how we know: why, at lsn). Skipping below it would drop this
 * history's transactions there, silently: stop instead, nothing confirmed
 * past them.
 */
static int eos_foreign(relay_session_t *s, const char *why, relay_lsn_t lsn, char *err,
                       size_t errlen)
{
        char ck[RELAY_LSN_BUFSZ], at[RELAY_LSN_BUFSZ];
        return relay_err(err, errlen, RELAY_ESETUP,
                         "checkpoint %s of \"%s\" in topic \"%s\" is not ours (%s %s): it was "
                         "written for a WAL history this server does not have (restored from "
                         "a backup, or a standby promoted before it received that "
                         "transaction), and skipping the transactions below it would lose "
                         "them; write a tombstone (a null value) for key \"%s\" to the topic "
                         "to start from the slot (events Kafka holds already may be sent "
                         "again), then restart",
                         relay_lsn_format(s->eos.checkpoint, ck), s->eos.key,
                         s->set->eos_checkpoint_topic, why, relay_lsn_format(lsn, at),
                         s->eos.key);
}

static int session_message(relay_session_t *s, const relay_walmsg_t *w, char *err, size_t errlen)
{
        relay_source_step_t st;
        relay_event_t ev;
        progress_t *pg = &s->prog;
        int rc;

        if ((rc = relay_source_step(s->src, w, &st, err, errlen)))
                return rc;
        switch (st.kind) {
        case RELAY_STEP_NOTHING:
                if (st.bound)
                        relay_log_debug("outbox table is relation %u",
                                        (unsigned)st.msg.relation.relid);
                if (st.unbound)
                        relay_log_warning(
                                "outbox table relation %u is now \"%s.%s\" (at " RELAY_LSN_FMT
                                "): its rows are no longer events; add it to outbox.table to "
                                "relay them",
                                (unsigned)st.msg.relation.relid,
                                relay_pgo_relation_namespace(st.msg.relation.relation),
                                relay_pgo_relation_name(st.msg.relation.relation),
                                RELAY_LSN_ARGS(st.lsn));
                return 0;
        case RELAY_STEP_KEEPALIVE:
                /* The walsender sends a keepalive unasked when it has caught
                 * up with the WAL and waits for more: no longer behind, so
                 * what is open is committed at the next interval, not up to
                 * a catch-up interval later. */
                s->eos.behind = false;
                if (w->wal_end > pg->keepalive_end)
                        pg->keepalive_end = w->wal_end;
                if (w->wal_end > pg->received && relay_acktrack_drained(s->ack))
                        pg->received = w->wal_end;
                if (w->reply_requested)
                        pg->reply_pending = true;
                return 0;
        case RELAY_STEP_BEGIN: {
                const relay_pgo_begin_t *b = &st.msg.begin;
                /* The source refused a Begin inside a transaction; the
                 * tracker can still run out of memory. */
                if ((rc = relay_acktrack_begin(s->ack, b->final_lsn)))
                        return relay_err(err, errlen, rc,
                                         "could not track the transaction at " RELAY_LSN_FMT ": %s",
                                         RELAY_LSN_ARGS(b->final_lsn), relay_strerror(rc));
                s->txn_lsn = b->final_lsn;
                s->commit_ts = b->commit_time;
                /* Its commit record starts below the checkpoint (the end of
                 * a committed transaction): Kafka has its events already. */
                s->eos.skipping = s->eos.on && b->final_lsn < s->eos.checkpoint;
                if (!s->eos.skipping && s->eos.unproven)
                        return eos_foreign(s, "the stream passed it at", b->final_lsn, err,
                                           errlen);
                /* Behind: this transaction committed longer ago than the
                 * catch-up interval (the server's clock against ours). */
                s->eos.behind = s->eos.on && s->set->eos_commit_catchup_interval_ms > 0 &&
                                relay_pg_now_us() - b->commit_time >
                                        s->set->eos_commit_catchup_interval_ms * 1000;
                return 0;
        }
        case RELAY_STEP_COMMIT: {
                relay_lsn_t end = st.msg.commit.end_lsn;
                if (relay_acktrack_commit(s->ack, end) != 0) {
                        relay_err_set(err, errlen,
                                      "Commit with end LSN " RELAY_LSN_FMT " outside a transaction "
                                      "or not after the previous one",
                                      RELAY_LSN_ARGS(end));
                        return RELAY_EPROTO;
                }
                if (end > pg->received)
                        pg->received = end;
                /* Its events are settled or produced: a refusal reported
                 * from now on remembers its event anew. */
                relay_policy_forget_txn(s->proc->pol, s->txn_lsn);
                s->n.txns++;
                relay_metrics_commit(s->proc->metrics, end, s->commit_ts);
                if (!s->eos.on)
                        return 0;
                if (s->eos.skipping) {
                        s->eos.skipped_txns++;
                        /* Ours ends a transaction of this history: until one ends
                         * exactly there, what was skipped may not be ours. */
                        if (end > s->eos.checkpoint)
                                return eos_foreign(s, "a transaction spans it, ending at", end,
                                                   err, errlen);
                        s->eos.unproven = end < s->eos.checkpoint;
                }
                s->eos.skipping = false;
                if (!s->eos.open) {
                        /* Nothing of it is in an open Kafka transaction. */
                        if (!s->eos.spoilt && !s->eos.unproven)
                                s->eos.committed = end;
                        return 0;
                }
                s->eos.open_end = end;
                if (eos_commit_due(s, relay_now_ms()))
                        return eos_commit(s, err, errlen);
                return 0;
        }
        case RELAY_STEP_ROW:
        case RELAY_STEP_MESSAGE:
                if (s->eos.skipping) /* exactly-once: covered by the checkpoint */
                        return 0;
                rc = relay_source_map(s->src, &st, &ev, err, errlen);
                return relay_settle_event(
                        s, ev, rc, st.kind == RELAY_STEP_ROW ? "outbox row" : "outbox message",
                        st.lsn, err, errlen);
        case RELAY_STEP_UPDATE:
                /* table.op.invalid.behavior */
                if (s->eos.skipping)
                        return 0;
                s->n.invalid_ops++;
                switch (s->set->invalid_op) {
                case RELAY_INVALID_OP_WARN:
                        relay_log_warning("%s at " RELAY_LSN_FMT " ignored: an outbox row is "
                                          "never updated (table.op.invalid.behavior = warn)",
                                          st.what, RELAY_LSN_ARGS(st.lsn));
                        return 0;
                case RELAY_INVALID_OP_ERROR:
                        relay_log_error("%s at " RELAY_LSN_FMT " ignored: an outbox row is "
                                        "never updated (table.op.invalid.behavior = error)",
                                        st.what, RELAY_LSN_ARGS(st.lsn));
                        return 0;
                case RELAY_INVALID_OP_FATAL:
                        break;
                }
                relay_err_set(err, errlen,
                              "%s at " RELAY_LSN_FMT ": an outbox row is never updated, and "
                              "table.op.invalid.behavior = fatal stops the relay before it; find "
                              "what updates the table, then restart with "
                              "table.op.invalid.behavior = warn or error to pass it",
                              st.what, RELAY_LSN_ARGS(st.lsn));
                return RELAY_EMAP;
        }
        relay_err_set(err, errlen, "unexpected source step %d at " RELAY_LSN_FMT, (int)st.kind,
                      RELAY_LSN_ARGS(st.lsn));
        return RELAY_EPROTO;
}

/* Wait for Kafka to acknowledge what is in flight (up to the shutdown
 * timeout), confirm it, and end the stream. A delivery that failed, a
 * producer that died, a Kafka transaction that did not commit or a
 * confirmation the server did not take meanwhile is returned, not logged:
 * the stop was not clean, whatever asked for it. */
int relay_session_drain(relay_session_t *s, char *ferr, size_t ferrlen)
{
        char err[RELAY_ERRBUF];
        int64_t deadline = relay_now_ms() + s->set->shutdown_timeout_ms;
        int frc = 0;
        s->draining = true;
        if (s->eos.open) {
                /* Between transactions (a stop): commit what is open. Inside
                 * one (stopped before an event): never commit half of it. */
                int rc = relay_acktrack_in_txn(s->ack) || s->dr_failed
                                 ? relay_err(err, sizeof(err), RELAY_EKAFKA, "%s",
                                             s->dr_failed ? s->dr_err
                                                          : "stopped inside a transaction")
                                 : eos_commit(s, err, sizeof(err));
                if (rc) {
                        char aerr[RELAY_ERRBUF];
                        s->eos.spoilt = true;
                        /* Inside a transaction it is the event that stopped
                         * the session (the caller's error), no failure of its own. */
                        if (rc != RELAY_EKAFKA || !relay_acktrack_in_txn(s->ack)) {
                                relay_err_set(ferr, ferrlen, "%s", err);
                                frc = rc;
                        }
                        if (s->eos.open &&
                            relay_producer_txn_abort(s->prod, 5000, aerr, sizeof(aerr)) != 0)
                                relay_log_warning("%s", aerr);
                        relay_log_info("aborted the open Kafka transaction: its events are sent "
                                       "again on restart");
                }
        }
        /* PostgreSQL's side: a status update that failed while waiting ends
         * the wait too, as nothing more can be confirmed on this stream. */
        char perr[RELAY_ERRBUF];
        int prc = 0;
        while (relay_producer_outq_len(s->prod) > 0 && relay_now_ms() < deadline) {
                relay_process_turn(s->proc);
                relay_producer_poll(s->prod, 50);
                /* A failed delivery or a dead producer ends the wait. */
                if (s->dr_failed || s->ack_bug || relay_producer_check(s->prod, err, sizeof(err)) != 0)
                        break;
                if ((prc = relay_session_status(s, false, perr, sizeof(perr))) != 0)
                        break;
        }
        /* The first failure is the one to report. */
        int krc = relay_session_kafka_check(s, err, sizeof(err));
        if (krc && frc == 0) {
                relay_err_set(ferr, ferrlen, "%s", err);
                frc = krc;
        }
        size_t left = relay_producer_outq_len(s->prod);
        if (left > 0 && prc == 0)
                relay_log_warning("%zu events not acknowledged by Kafka within shutdown.timeout.ms; "
                                  "they will be sent again on restart",
                                  left);
        /* The final status update, then the end of the stream. The server
         * reads what it is sent in order: once the update reached its
         * socket while the connection stood, it is confirmed, even if the
         * end is answered late (a warning). A connection that failed
         * before may have lost it: what Kafka acknowledged may not be
         * confirmed, and that is no clean stop. */
        bool sent = false;
        if (prc == 0)
                prc = relay_session_status(s, true, perr, sizeof(perr));
        if (prc == 0 && (prc = relay_repl_stop(s->repl, 5000, &sent, perr, sizeof(perr))) != 0 &&
            sent) {
                relay_log_warning("%s", perr);
                prc = 0;
        }
        if (prc == 0) {
                relay_log_info("confirmed up to " RELAY_LSN_FMT " on slot \"%s\"",
                               RELAY_LSN_ARGS(s->prog.sent_flush), s->set->slot_name);
        } else {
                /* The cause last: libpq's can take several lines. */
                relay_err_set(err, sizeof(err),
                              "could not confirm what Kafka acknowledged to replication slot "
                              "\"%s\" while stopping; the events after its confirmed_flush_lsn "
                              "are sent again on the next start: %s",
                              s->set->slot_name, perr);
                if (frc == 0) {
                        relay_err_set(ferr, ferrlen, "%s", err);
                        frc = prc;
                } else {
                        relay_log_warning("%s", err); /* after the failure reported */
                }
        }
        if (s->eos.on && s->eos.commits > 0)
                relay_log_info("exactly-once: %llu Kafka transactions committed, holding the "
                               "stream %lld ms in all (at most %lld ms for one)",
                               (unsigned long long)s->eos.commits, (long long)s->eos.held_ms,
                               (long long)s->eos.max_held_ms);
        return frc;
}

/* Stop between transactions, so a clean stop never leaves a half-sent
 * transaction to be sent again. */
static bool session_may_stop(const relay_session_t *s)
{
        return *s->stop && !relay_acktrack_in_txn(s->ack);
}

/* Decode and hand on up to READ_BATCH messages that libpq already holds.
 * *buffered: the batch was full, so more may be waiting in libpq's buffer,
 * where poll() cannot see them. */
static int session_read_batch(relay_session_t *s, bool *buffered, char *err, size_t errlen)
{
        int rc;
        *buffered = true;
        for (int i = 0; i < READ_BATCH; i++) {
                relay_walmsg_t w;
                rc = relay_repl_read(s->repl, &w, err, errlen);
                if (rc == 0) {
                        *buffered = false;
                        return 0;
                }
                if (rc < 0)
                        return rc;
                if ((rc = session_message(s, &w, err, errlen)))
                        return rc;
                if (session_may_stop(s))
                        return 0;
        }
        return 0;
}

/* Wait for the server's socket, Kafka's reports or the next status update. */
static int session_wait(relay_session_t *s, bool buffered, char *err, size_t errlen)
{
        const progress_t *pg = &s->prog;
        int64_t now = relay_now_ms();
        struct pollfd fds[2] = {
                {.fd = relay_repl_socket(s->repl), .events = POLLIN},
                {.fd = relay_producer_fd(s->prod), .events = POLLIN},
        };
        int rc;

        if (relay_repl_wants_write(s->repl))
                fds[0].events |= POLLOUT;
        int64_t wait = pg->status_interval_ms - (now - pg->last_status_ms);
        relay_lsn_t confirmable = relay_acktrack_confirmable(s->ack);
        /* Exactly-once: acknowledged is not confirmable before its commit
         * (else this would spin until the commit is due). */
        if (s->eos.on && confirmable > s->eos.committed)
                confirmable = s->eos.committed;
        if (confirmable > pg->sent_flush)
                wait = CONFIRM_MIN_GAP_MS - (now - pg->last_status_ms);
        if (s->eos.open && !relay_acktrack_in_txn(s->ack)) {
                int64_t due = s->eos.last_commit_ms + eos_interval(s) - now;
                if (due < wait)
                        wait = due;
        }
        if (wait < 0 || buffered)
                wait = 0;
        if (wait > 1000)
                wait = 1000;
        if (poll(fds, 2, (int)wait) < 0 && errno != EINTR) {
                relay_err_set(err, errlen, "poll failed: %s", strerror(errno));
                return RELAY_EIO;
        }
        if ((fds[0].revents & (POLLIN | POLLERR | POLLHUP)) &&
            (rc = relay_repl_consume(s->repl, err, errlen)))
                return rc;
        if ((fds[0].revents & POLLOUT) && (rc = relay_repl_flush(s->repl, err, errlen)))
                return rc;
        return 0;
}

/* Housekeeping on a timer: the progress line and returning memory. */
static void session_tick(relay_session_t *s, int64_t *last_progress, int64_t *last_trim,
                         uint64_t *last_events)
{
        int64_t now = relay_now_ms();
        if (now - *last_progress >= PROGRESS_LOG_MS) {
                if (s->n.events != *last_events)
                        relay_log_info("relayed %llu events in %llu transactions; confirmed "
                                       "up to " RELAY_LSN_FMT,
                                       (unsigned long long)s->n.events, (unsigned long long)s->n.txns,
                                       RELAY_LSN_ARGS(s->prog.sent_flush));
                *last_events = s->n.events;
                *last_progress = now;
        }
#ifdef __GLIBC__
        /* glibc keeps what a burst freed (in-flight events, the librdkafka
         * thread's arena) resident until it is trimmed: RSS after 30-60 s at
         * 20 000 events/s was 14.6-17.0 MB in four runs without this,
         * 13.1 MB with it, same CPU. */
        if (now - *last_trim >= TRIM_MS) {
                malloc_trim(0);
                *last_trim = now;
        }
#else
        (void)last_trim;
#endif
}

/* Exactly-once and idle between transactions: commit what is open once it
 * is due, so its events become visible. */
static int eos_commit_if_due(relay_session_t *s, char *err, size_t errlen)
{
        if (relay_acktrack_in_txn(s->ack) || !eos_commit_due(s, relay_now_ms()))
                return 0;
        return eos_commit(s, err, errlen);
}

/* Whether session_relinger() may replace the producer now: the round trip
 * asked for another linger.ms that the producer may take (the
 * configuration left it to the relay), the stream follows rather than
 * catches up (nothing more buffered, something relayed, 5 s after the
 * round trip was measured, librdkafka's queue low), and nothing is held
 * that a new producer could not carry on: no Kafka transaction, no event
 * settled in place. */
static bool session_relinger_due(relay_session_t *s, bool buffered)
{
        return !buffered && !s->inplace.pending && !s->eos.open && s->n.events > 0 &&
               relay_now_ms() >= s->proc->relinger_after_ms &&
               relay_producer_may_relinger(s->prod, s->proc->linger_ms, RELINGER_MAX_QUEUED);
}

/* The producer with the linger.ms of the round trip (session_linger(),
 * later session_rewatch()), once session_relinger_due(): what is in flight
 * is waited for (a steady rate may never leave the producer empty by
 * itself; the next events wait meanwhile), then the producer is replaced.
 * Under exactly-once the new one registers the same transactional.id,
 * which fences the closed one and aborts nothing (0217). Not drained
 * within a second: again in 10 s. */
static int session_relinger(relay_session_t *s, char *err, size_t errlen)
{
        int rc;
        /* At most a second at a time, so a slow broker never holds the
         * loop (stop signals, status updates, the watchdog): try again at
         * the next quiet moment. */
        int64_t deadline = relay_now_ms() + 1000;
        while (relay_producer_outq_len(s->prod) > 0) {
                if (relay_now_ms() >= deadline || session_may_stop(s)) {
                        s->proc->relinger_after_ms = relay_now_ms() + 10000;
                        return 0;
                }
                if ((rc = relay_session_serve(s, 10, err, errlen)))
                        return rc;
        }
        relay_log_info("replacing the Kafka producer for linger.ms %d (from %d)", s->proc->linger_ms,
                       relay_producer_linger_ms(s->prod));
        s->proc->relingered_ms = relay_now_ms();
        return relay_session_new_producer(s, err, errlen);
}

int relay_session_stream(relay_session_t *s, char *err, size_t errlen)
{
        int64_t last_progress = relay_now_ms(), last_trim = last_progress;
        uint64_t last_events = 0;
        bool buffered;
        int rc;

        for (;;) {
                relay_process_turn(s->proc);
                if (session_may_stop(s))
                        return 0;
                if ((rc = session_read_batch(s, &buffered, err, errlen)) ||
                    (rc = relay_session_serve(s, 0, err, errlen)) ||
                    (rc = eos_commit_if_due(s, err, errlen)))
                        return rc;
                if (session_may_stop(s))
                        continue;
                if (session_relinger_due(s, buffered) && (rc = session_relinger(s, err, errlen)))
                        return rc;
                session_tick(s, &last_progress, &last_trim, &last_events);
                if ((rc = session_wait(s, buffered, err, errlen)))
                        return rc;
        }
}

static int session_producer(relay_session_t *s, bool first, char *err, size_t errlen);
static int session_linger(relay_session_t *s, char *err, size_t errlen);
static int session_start_stream(relay_session_t *s, const relay_session_opts_t *o,
                                relay_lsn_t *resume, char *err, size_t errlen);

static int session_start(relay_session_t *s, const relay_session_opts_t *o, relay_lsn_t *resume,
                         char *err, size_t errlen)
{
        const relay_settings_t *set = s->set;
        const char *slot = set->slot_name;
        bool first = o->first;
        int rc;

        if (!(s->ack = relay_acktrack_new()))
                return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
        /* Exactly-once names its producer after the database cluster: the
         * producer comes after the connection. */
        if (!set->exactly_once && (rc = session_producer(s, first, err, errlen)))
                return rc;
        if ((rc = relay_source_open(&s->src, set, s->stop, err, errlen)))
                return rc;
        s->repl = relay_source_repl(s->src);
        relay_repl_set_tick(s->repl, session_waiting, s);
        if (set->exactly_once) {
                eos_t *e = &s->eos;
                const char *sysid = relay_repl_system_id(s->repl);
                e->on = true;
                snprintf(e->key, sizeof(e->key), "%s/%s", sysid, slot);
                if (*set->eos_transactional_id)
                        snprintf(e->tid, sizeof(e->tid), "%s", set->eos_transactional_id);
                else
                        snprintf(e->tid, sizeof(e->tid), "outbox-relay-%s-%s", sysid, slot);
                if ((rc = session_producer(s, first, err, errlen)))
                        return rc;
        }
        return session_start_stream(s, o, resume, err, errlen);
}

/* The producer (transactional under exactly-once); the first session also
 * waits for Kafka to answer. */
static int session_producer(relay_session_t *s, bool first, char *err, size_t errlen)
{
        const relay_settings_t *set = s->set;
        int rc;
        if ((rc = relay_producer_new(&s->prod, s->cfg, s->proc->max_batch, s->proc->linger_ms,
                                     s->eos.on ? s->eos.tid : NULL, s->proc->parts, on_delivery,
                                     s, err, errlen)))
                return rc;
        if (first) {
                char kerr[RELAY_ERRBUF];
                if (relay_producer_caveat(s->prod))
                        relay_log_warning("%s", relay_producer_caveat(s->prod));
                const char *servers = set->kafka_bootstrap_servers;
                /* In short slices, so a stop signal is not kept waiting. */
                int64_t deadline = relay_now_ms() + KAFKA_PING_MS;
                do {
                        relay_process_turn(s->proc);
                        rc = relay_producer_ping(s->prod, 200, kerr, sizeof(kerr));
                } while (rc == RELAY_EAGAIN && !*s->stop && relay_now_ms() < deadline);
                if (rc && *s->stop) {
                        relay_err_set(err, errlen, "stopped while waiting for Kafka");
                        return RELAY_ESTOPPED;
                }
                if (rc == RELAY_ESETUP) {
                        relay_err_set(err, errlen, "could not connect to Kafka at \"%s\": %s",
                                      servers, kerr);
                        return RELAY_ESETUP;
                }
                if (rc) {
                        relay_err_set(err, errlen,
                                      "could not reach Kafka at \"%s\": %s; check "
                                      "kafka.bootstrap.servers and that the brokers are up",
                                      servers, kerr);
                        return RELAY_ESETUP;
                }
                if (relay_producer_linger_auto(s->prod) && s->proc->linger_ms == 0)
                        return session_linger(s, err, errlen);
        }
        return 0;
}

/* linger.ms from the broker's round trip, measured once per process (then
 * watched in the statistics: session_rewatch()). librdkafka cannot change
 * it on a live producer, and replacing it now would cost a catch-up a new
 * connection (four round trips): the stream loop replaces it once
 * following (session_relinger()). */
static int session_linger(relay_session_t *s, char *err, size_t errlen)
{
        (void)err;
        (void)errlen;
        char kerr[RELAY_ERRBUF];
        double rtt;
        if (relay_producer_rtt(s->prod, 2, 1000, &rtt, kerr, sizeof(kerr))) {
                relay_log_debug("could not measure the Kafka round trip (%s): linger.ms stays %d",
                                kerr, relay_producer_linger_ms(s->prod));
                return 0;
        }
        s->proc->linger_ms = relay_producer_linger_for_rtt(rtt);
        /* A catch-up's first seconds can look like following (nothing
         * buffered yet, the queue still filling): not before this. */
        s->proc->relinger_after_ms = relay_now_ms() + RELINGER_SETTLE_MS;
        if (s->proc->linger_ms == relay_producer_linger_ms(s->prod))
                relay_log_info("Kafka round trip %.1f ms: linger.ms %d", rtt, s->proc->linger_ms);
        else
                relay_log_info("Kafka round trip %.1f ms: linger.ms %d once following",
                               rtt, s->proc->linger_ms);
        return 0;
}

/*
 * Exactly-once, once the slot is ours (START_REPLICATION succeeded, so no
 * other relay streams from it): register the transactional.id, which
 * fences an older relay of the slot and aborts its open transaction, then
 * read the checkpoint back.
 */
static int eos_start(relay_session_t *s, bool first, char *err, size_t errlen)
{
        eos_t *e = &s->eos;
        char lsn[RELAY_LSN_BUFSZ];
        bool found;
        int rc = eos_init(s, err, errlen);
        if (rc)
                return rc;
        rc = relay_checkpoint_read(s->cfg, s->set->eos_checkpoint_topic, e->key,
                                   EOS_CHECKPOINT_READ_MS, session_waiting, s, &e->checkpoint,
                                   &found, err, errlen);
        if (rc)
                return rc;
        /* Our checkpoints are ends of transactions this server flushed, so
         * one beyond its flush position belongs to a WAL history it does not
         * have (restored from a backup, a standby promoted before it received
         * that transaction). Skipping below it would drop this history's
         * transactions there: lost, silently. */
        relay_lsn_t end = relay_repl_wal_end(s->repl);
        if (found && end != 0 && e->checkpoint > end)
                return eos_foreign(s, "it is beyond the server's WAL end", end, err, errlen);
        if (first || found)
                relay_log_info("exactly-once: transactional.id \"%s\", checkpoint %s in topic "
                               "\"%s\"",
                               e->tid, found ? relay_lsn_format(e->checkpoint, lsn) : "none yet",
                               s->set->eos_checkpoint_topic);
        return 0;
}

/*
 * snapshot.mode = initial, the slot being created: a temporary slot exports
 * its snapshot, the rows the table held then are produced as one
 * pseudo-transaction and acknowledged, and only then does the temporary
 * slot become the permanent one, positioned where the snapshot ends. A
 * failure or crash before that leaves no slot, so the next start backfills
 * again: rows may be sent twice, never lost. Rejected rows follow the error
 * policy as streamed ones, remembered under transaction 0.
 */
static int session_backfill(relay_session_t *s, relay_slot_outcome_t *outcome, char *err,
                            size_t errlen)
{
        const relay_settings_t *set = s->set;
        char snapshot[128];
        relay_lsn_t consistent;
        relay_backfill_t *b = NULL;
        relay_outbox_t *out = relay_source_outbox(s->src);
        relay_pgo_insert_t row;
        relay_event_t ev;
        int rc;

        /* One backfill among the relays of the slot: the others stand by. */
        if ((rc = relay_repl_lock_backfill(s->repl, err, errlen)) ||
            (rc = relay_repl_create_snapshot_slot(s->repl, snapshot, sizeof(snapshot), &consistent,
                                                  err, errlen)))
                return rc;
        if ((rc = relay_backfill_open(&b, set, snapshot, backfill_waiting, s, err, errlen)))
                return s->backfill_lost[0] && !*s->stop
                               ? relay_err(err, errlen, RELAY_EIO, "%s", s->backfill_lost)
                               : rc;
        if ((rc = relay_outbox_bind(out, relay_backfill_relation(b))) < 0) {
                relay_backfill_free(b);
                relay_err_set(err, errlen, "out of memory");
                return rc;
        }
        int64_t started = relay_now_ms(), last_log = started;
        char tables[512];
        relay_log_info("backfilling table%s %s%s%s%s: the rows committed before " RELAY_LSN_FMT
                       ", where the new slot's stream begins",
                       set->n_outbox_tables > 1 ? "s" : "",
                       relay_settings_tables(set, tables, sizeof(tables)),
                       *set->snapshot_filter ? " where (" : "",
                       set->snapshot_filter, *set->snapshot_filter ? ")" : "",
                       RELAY_LSN_ARGS(consistent));
        /* It runs before READY=1, for as long as the table takes: the
         * unit's start timeout must not end it (it would start over). */
        relay_notify_status("backfilling: relaying the rows the outbox table holds");
        relay_notify_extend_start();
        s->txn_lsn = 0;
        s->commit_ts = relay_pg_now_us();
        if ((rc = relay_acktrack_begin(s->ack, 0))) {
                relay_backfill_free(b);
                return relay_err(err, errlen, rc, "could not track the backfill: %s",
                                 relay_strerror(rc));
        }
        for (;;) {
                if (*s->stop) {
                        relay_err_set(err, errlen, "stopped during the backfill; the next start "
                                                   "backfills again");
                        rc = RELAY_ESTOPPED;
                        break;
                }
                relay_notify_extend_start();
                if ((rc = relay_backfill_next(b, &row, err, errlen)) <= 0)
                        break;
                rc = relay_outbox_map(out, &row, s->commit_ts, &ev, err, errlen);
                if ((rc = relay_settle_event(s, ev, rc, "backfilled outbox row", consistent, err,
                                             errlen)))
                        break;
                if (relay_backfill_rows(b) % BACKFILL_SERVE_ROWS == 0 &&
                    ((rc = backfill_slot_held(s, err, errlen)) ||
                     (rc = relay_session_serve(s, 0, err, errlen))))
                        break;
                int64_t now = relay_now_ms();
                if (now - last_log >= BACKFILL_LOG_MS) {
                        relay_log_info("backfill: %llu rows read, %llu acknowledged by Kafka, "
                                       "%.0f rows/s",
                                       (unsigned long long)relay_backfill_rows(b),
                                       (unsigned long long)(s->n.events -
                                                            relay_acktrack_pending(s->ack)),
                                       (double)relay_backfill_rows(b) * 1000.0 /
                                               (double)(now - started));
                        last_log = now;
                }
        }
        uint64_t rows = relay_backfill_rows(b);
        relay_backfill_free(b);
        if (rc && s->backfill_lost[0] && !*s->stop)
                return relay_err(err, errlen, RELAY_EIO, "%s", s->backfill_lost);
        if (rc)
                return rc;
        if ((rc = relay_acktrack_commit(s->ack, consistent))) {
                relay_err_set(err, errlen, "backfill ended at an invalid position " RELAY_LSN_FMT,
                              RELAY_LSN_ARGS(consistent));
                return rc;
        }
        relay_policy_forget_txn(s->proc->pol, s->txn_lsn);
        while (!relay_acktrack_drained(s->ack) || relay_producer_outq_len(s->prod) > 0) {
                relay_notify_extend_start();
                if (*s->stop) {
                        relay_err_set(err, errlen, "stopped during the backfill; the next start "
                                                   "backfills again");
                        return RELAY_ESTOPPED;
                }
                if ((rc = backfill_slot_held(s, err, errlen)) ||
                    (rc = relay_session_serve(s, 10, err, errlen)))
                        return rc;
        }
        if ((rc = relay_session_kafka_check(s, err, errlen)) ||
            (rc = relay_repl_persist_slot(s->repl, outcome, err, errlen)))
                return rc;
        relay_log_info("backfill done: %llu rows in %.1f s (%llu events, %llu dead-lettered, "
                       "%llu skipped), all acknowledged by Kafka",
                       (unsigned long long)rows, (double)(relay_now_ms() - started) / 1000.0,
                       (unsigned long long)s->n.events, (unsigned long long)s->n.dead_lettered,
                       (unsigned long long)s->n.skipped);
        return 0;
}

static int session_start_stream(relay_session_t *s, const relay_session_opts_t *o,
                                relay_lsn_t *resume, char *err, size_t errlen)
{
        const relay_settings_t *set = s->set;
        const char *slot = set->slot_name;
        bool first = o->first, may_create_slot = o->may_create_slot;
        bool created;
        int rc;
        int v = relay_repl_server_version(s->repl);
        if (first)
                relay_log_info("connected to PostgreSQL %d.%d, pgoutput protocol version %d", v / 10000,
                               v % 10000, relay_repl_proto_version(s->repl));

        s->prog.status_interval_ms = set->status_interval_ms;
        int64_t wst = relay_repl_wal_sender_timeout_ms(s->repl);
        if (wst > 0 && s->prog.status_interval_ms > wst / 2) {
                if (first)
                        relay_log_info("status.interval.ms lowered from %lld to %lld, half of the "
                                       "server's wal_sender_timeout",
                                       (long long)s->prog.status_interval_ms, (long long)(wst / 2));
                s->prog.status_interval_ms = wst / 2;
        }

        if ((rc = relay_repl_ensure_publication(s->repl, &created, err, errlen)))
                return rc;
        if (created) {
                char tables[512];
                relay_log_info("created publication \"%s\" for table%s %s (inserts only)",
                               set->publication_name, set->n_outbox_tables > 1 ? "s" : "",
                               relay_settings_tables(set, tables, sizeof(tables)));
        }
        relay_slot_outcome_t outcome;
        if ((rc = relay_repl_ensure_slot(s->repl, may_create_slot, o->recreate_slot,
                                         set->snapshot_initial, &outcome, err, errlen)))
                return rc;
        bool backfilled = set->snapshot_initial && outcome != RELAY_SLOT_EXISTED;
        if (backfilled && (rc = session_backfill(s, &outcome, err, errlen)))
                return rc;
        /* Created after this process streamed from an earlier slot of that
         * name, or after finding it lost: events may be missing. */
        if (outcome == RELAY_SLOT_RECREATED || (outcome == RELAY_SLOT_CREATED && !may_create_slot))
                relay_log_warning("created replication slot \"%s\" anew as slot.recreate = true "
                                  "says: events written while it was gone are not relayed%s",
                                  slot,
                                  backfilled ? " unless their rows were still in the table "
                                               "(backfilled)"
                                             : "");
        else if (outcome == RELAY_SLOT_CREATED)
                relay_log_info("created replication slot \"%s\"%s", slot,
                               set->slot_failover ? " with failover enabled" : "");
        if (relay_repl_failover_altered(s->repl))
                relay_log_info("enabled failover on replication slot \"%s\" (slot.failover = true)",
                               slot);
        /* Without it the relay may relay transactions no standby has: a
         * promotion then loses them after their events reached Kafka, and
         * the relay's position may lie past the new primary's start, so it
         * would skip the first transactions written there. */
        if (first && relay_repl_failover_unguarded(s->repl))
                relay_log_warning("slot.failover = true but the server's synchronized_standby_slots "
                                  "is empty: after a promotion events may be missing or belong to "
                                  "lost transactions; set synchronized_standby_slots to the "
                                  "physical slots of the standbys that may be promoted");
        if (outcome != RELAY_SLOT_EXISTED)
                *resume = 0; /* a new slot: our old position means nothing to it */
        /* Past the server's WAL end, what this process confirmed was
         * confirmed to another history (a promoted standby that had not
         * received it, a restored backup): the server would skip every
         * transaction that commits below it, as if it had been relayed. */
        relay_lsn_t wal_end = relay_repl_wal_end(s->repl);
        if (*resume > wal_end) {
                relay_log_warning("this process confirmed up to " RELAY_LSN_FMT " on slot \"%s\", "
                                  "past the server's WAL end " RELAY_LSN_FMT ": the server does "
                                  "not have what was confirmed (a standby promoted before it "
                                  "received it, or a restored backup); streaming from the "
                                  "slot's own position instead, so that what the server commits "
                                  "now is not skipped",
                                  RELAY_LSN_ARGS(*resume), slot, RELAY_LSN_ARGS(wal_end));
                *resume = 0;
        }
        if ((rc = relay_repl_start(s->repl, *resume, err, errlen)))
                return rc;
        s->streaming = true;
        if (s->eos.on && (rc = eos_start(s, first, err, errlen)))
                return rc;
        s->prog.last_status_ms = relay_now_ms();
        return 0;
}

int relay_session_open(relay_session_t **out, const relay_config_t *cfg,
                       const relay_settings_t *set, relay_process_t *proc,
                       const relay_session_opts_t *opts, relay_lsn_t *resume, char *err,
                       size_t errlen)
{
        relay_session_t *s = calloc(1, sizeof(*s));
        *out = NULL;
        if (!s)
                return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
        s->cfg = cfg;
        s->set = set;
        s->proc = proc;
        s->stop = opts->stop;
        int rc = session_start(s, opts, resume, err, errlen);
        /* The server's "canceling statement due to user request" answers
         * our own cancel: the stop that was asked for, no failure. */
        if (rc && s->stop_cancelled) {
                relay_err_set(err, errlen, "stopped while waiting for the server");
                rc = RELAY_ESTOPPED;
        }
        if (rc) {
                relay_session_free(s);
                return rc;
        }
        *out = s;
        return 0;
}

relay_lsn_t relay_session_confirmed(const relay_session_t *s)
{
        return s->prog.sent_flush;
}

relay_session_counts_t relay_session_counts(const relay_session_t *s)
{
        return s->n;
}

void relay_process_free(relay_process_t *pr)
{
        if (!pr)
                return;
        relay_policy_free(pr->pol);
        relay_limits_free(pr->lim);
        relay_slotmon_free(pr->slotmon);
        relay_metrics_free(pr->metrics);
        relay_producer_rtt_watch_free(pr->rttw);
        relay_producer_parts_free(pr->parts);
        free(pr);
}

struct relay_metrics *relay_process_metrics(relay_process_t *pr)
{
        return pr->metrics;
}

uint64_t relay_process_implicit_acks(const relay_process_t *pr)
{
        return pr->implicit_acks;
}

void relay_process_turn(relay_process_t *pr)
{
        relay_notify_watchdog();
        relay_log_hangups("outbox-relay", pr->hangups, &pr->hangups_logged);
}

int relay_process_new(relay_process_t **out, const relay_settings_t *set,
                      const volatile sig_atomic_t *hangups, char *err, size_t errlen)
{
        relay_process_t *pr;
        relay_policy_conf_t pc = {
                .stop = set->errors_policy == RELAY_ERRORS_STOP,
                .retries = set->errors_retries,
                .backoff_ms = set->errors_backoff_ms,
                .backoff_max_ms = set->errors_backoff_max_ms,
                .dlq_topic = set->errors_dlq_topic,
                .skip_ids = (const char *const *)set->errors_skip_ids,
                .nskip = set->n_errors_skip_ids,
        };
        *out = NULL;
        if (!(pr = calloc(1, sizeof(*pr))) || !(pr->lim = relay_limits_new()) ||
            !(pr->metrics = relay_metrics_new()) || !(pr->rttw = relay_producer_rtt_watch_new()) ||
            !(pr->parts = relay_producer_parts_new()) ||
            !(pr->slotmon = relay_slotmon_new(
                      set->postgres_conninfo, set->slot_name, set->publication_name,
                      set->outbox_tables,
                      set->outbox_source == RELAY_SOURCE_MESSAGES ? 0 : set->n_outbox_tables))) {
                relay_process_free(pr);
                return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
        }
        if (relay_policy_new(&pr->pol, &pc, err, errlen)) {
                relay_process_free(pr);
                return RELAY_ENOMEM;
        }
        pr->hangups = hangups;
        *out = pr;
        return 0;
}
