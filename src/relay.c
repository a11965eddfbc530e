/*
 * relay.c - the main loop and the only place (with main.c) that logs.
 *
 * Owns the session: one replication connection, one decoder, one outbox
 * mapping, one producer and one ack tracker, all created together and torn
 * down together. Any delivery error, fatal producer error or lost
 * connection ends the session without confirming anything more; the next
 * session resumes from the slot, so an event is never lost, only possibly
 * sent again (at-least-once).
 *
 * One thread: poll() waits on the replication socket and the producer's
 * wake-up pipe; delivery reports run inside relay_producer_poll() here, so
 * the ack tracker needs no locks. Only the signal flags are global.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/relay.h"

#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "relay/acktrack.h"
#include "relay/http.h"
#include "relay/metrics.h"
#include "relay/slotmon.h"
#include "relay/log.h"
#include "relay/limits.h"
#include "relay/lsn.h"
#include "relay/notify.h"
#include "relay/policy.h"
#include "relay/outbox.h"
#include "relay/pgoutput.h"
#include "relay/producer.h"
#include "relay/repl.h"
#include "relay/settings.h"

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
        if (stop_requested)
                _exit(RELAY_EXIT_FATAL); /* second signal: leave now, confirm nothing more */
        stop_requested = sig;
}

/* Standby relays retry START_REPLICATION this often, so a takeover after
 * the active relay dies takes about this long plus the server noticing. */
#define STANDBY_RETRY_MS 1000
/* Confirm progress at most this often while events flow (status updates
 * cost the walsender a spinlock and possibly a slot write each). */
#define CONFIRM_MIN_GAP_MS 100
/* Messages decoded per pass before Kafka's reports are served again. */
#define READ_BATCH 4096
#define PROGRESS_LOG_MS 60000
/* Hand memory freed after a burst back to the system this often. */
#define TRIM_MS 5000
/* How long the first start waits for Kafka to answer before calling the
 * setup wrong (exit 3) rather than retrying. */
#define KAFKA_PING_MS 10000

/* How long a topic's max.message.bytes is trusted before it is read again,
 * and how long for a topic that does not exist yet (it will soon). */
#define LIMIT_TTL_MS 300000
#define LIMIT_MISSING_TTL_MS 10000
#define LIMIT_ASK_MS 3000

/* State that outlives sessions: what the error policy must remember and
 * what was learnt about Kafka's limits. */
typedef struct {
        relay_policy_t *pol;
        relay_limits_t *lim;
        int64_t max_batch; /* batch.size for new producers (0: librdkafka's) */
        uint64_t implicit_acks;
        relay_metrics_t *metrics; /* read by the HTTP thread through its snapshot only */
        relay_slotmon_t *slotmon;
        bool slotmon_warned;
} process_t;

/* Where the stream stands: what was received, what was confirmed, when. */
typedef struct {
        relay_lsn_t received;      /* highest commit end or keepalive WAL end received */
        relay_lsn_t keepalive_end; /* the server's WAL end from its last keepalive */
        relay_lsn_t sent_flush;    /* flush LSN of the last status update */
        int64_t last_status_ms;
        int64_t status_interval_ms;
        bool reply_pending;        /* the server asked for a reply */
} progress_t;

/* One message produced in place (a resend or a dead-letter copy), whose
 * outcome the loop waits for before producing anything after it. */
typedef struct {
        bool pending;
        int err;
        relay_dr_class_t cls;
        char why[RELAY_ERRBUF];
} inplace_t;

typedef struct {
        const relay_config_t *cfg; /* for the producer's kafka.* pairs */
        const relay_settings_t *set;
        process_t *proc;
        relay_repl_t *repl;
        relay_pgoutput_t *dec;
        relay_outbox_t *outbox;
        relay_producer_t *prod;
        relay_acktrack_t *ack;
        progress_t prog;
        inplace_t inplace;

        bool dr_failed;
        char dr_err[RELAY_ERRBUF];
        bool ack_bug;

        relay_lsn_t txn_lsn; /* the open transaction's commit LSN (from Begin): names it */
        int64_t commit_ts;   /* of the open transaction, PostgreSQL epoch us */
        uint64_t events, txns, skipped, dead_lettered;
        bool streaming;
} session_t;

/* Messages carry their transaction's sequence shifted left (even); the one
 * message produced in place carries 1. */
#define OPAQUE_SEQ(seq) ((void *)(uintptr_t)((seq) << 1))
#define OPAQUE_INPLACE ((void *)(uintptr_t)1u)

static int64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}


static void session_fail(session_t *s, const char *fmt, ...) RELAY_PRINTF(2, 3);
static void session_fail(session_t *s, const char *fmt, ...)
{
        va_list ap;
        if (s->dr_failed)
                return; /* the first failure is the one to report */
        s->dr_failed = true;
        va_start(ap, fmt);
        vsnprintf(s->dr_err, sizeof(s->dr_err), fmt, ap);
        va_end(ap);
}

static void on_delivery(void *ctx, void *opaque, const relay_delivery_t *d)
{
        session_t *s = ctx;
        if (d->err) /* metrics */
                relay_metrics_delivery_error(s->proc->metrics, d->cls);
        else
                relay_metrics_acked(s->proc->metrics, d->topic, d->bytes);
        if (opaque == OPAQUE_INPLACE) {
                s->inplace.pending = false;
                s->inplace.err = d->err;
                s->inplace.cls = d->cls;
                relay_err_set(s->inplace.why, sizeof(s->inplace.why), "%s",
                              d->errstr ? d->errstr : "");
                return;
        }
        uint64_t seq = (uint64_t)((uintptr_t)opaque >> 1);
        if (!d->err) {
                if (relay_acktrack_ack(s->ack, seq) != 0)
                        s->ack_bug = true;
                return;
        }
        if (d->err != RELAY_EREJECTED) {
                if (d->cls == RELAY_DR_IMPLICIT_ACK)
                        s->proc->implicit_acks++;
                session_fail(s, "could not deliver event to Kafka: %s", d->errstr);
                return;
        }
        /* Refused for good, maybe because of a neighbour in its batch. The
         * producer has stopped (gapless), so nothing after it was sent: the
         * next session settles it in place, alone. */
        const relay_event_t *ev = d->event;
        relay_lsn_t txn = relay_acktrack_commit_lsn(s->ack, seq);
        if (d->cls == RELAY_DR_TOO_LARGE)
                relay_limits_forget(s->proc->lim, ev->topic);
        if (relay_policy_rejected(s->proc->pol, txn, ev->id, ev->id_len, d->errstr) < 0) {
                session_fail(s, "out of memory remembering rejected event \"%.*s\"",
                             RELAY_ID_ARGS(ev->id, ev->id_len));
                return;
        }
        session_fail(s,
                     "Kafka rejected event \"%.*s\" of the transaction at " RELAY_LSN_FMT
                     ": %s; resuming from the slot to send it again on its own",
                     RELAY_ID_ARGS(ev->id, ev->id_len), RELAY_LSN_ARGS(txn), d->errstr);
}

static void session_free(session_t *s)
{
        /* The producer first: purging it serves delivery reports into the tracker. */
        relay_producer_free(s->prod);
        relay_repl_free(s->repl);
        relay_pgoutput_free(s->dec);
        relay_outbox_free(s->outbox);
        relay_acktrack_free(s->ack);
        memset(s, 0, sizeof(*s));
}

static int session_kafka_check(session_t *s, char *err, size_t errlen)
{
        char warn[RELAY_ERRBUF];
        if (relay_producer_take_warning(s->prod, warn, sizeof(warn)))
                relay_log_warning("Kafka: %s", warn);
        if (s->ack_bug) {
                relay_err_set(err, errlen, "delivery report for a message that is not in flight");
                return RELAY_EKAFKA;
        }
        if (s->dr_failed) {
                relay_err_set(err, errlen, "%s", s->dr_err);
                return RELAY_EKAFKA;
        }
        int rc = relay_producer_check(s->prod, err, errlen);
        if (rc) {
                /* A refused batch stops the producer (gapless) just before
                 * its reports are queued: serve them (up to 200 ms), so the
                 * refusal is what is reported and remembered. */
                for (int i = 0; i < 10 && !s->dr_failed; i++)
                        relay_producer_poll(s->prod, 20);
                if (s->dr_failed)
                        relay_err_set(err, errlen, "%s", s->dr_err);
        }
        return rc;
}

/*
 * Metrics (metrics.h): every turn tells the metrics the loop is alive and
 * what is confirmable; at most every RELAY_METRICS_PUBLISH_MS the gauges are
 * sampled and published for the HTTP thread, the slot monitor is stepped
 * (never blocking) and the catch-up report is logged when due.
 */
static void session_metrics(session_t *s, relay_lsn_t confirmable, int64_t now)
{
        process_t *pr = s->proc;
        relay_kafka_stats_t ks;
        relay_slot_info_t si;
        relay_catchup_t cu;
        char err[RELAY_ERRBUF];

        if (!relay_metrics_turn(pr->metrics, now, confirmable))
                return;
        if (relay_producer_stats(s->prod, &ks))
                relay_metrics_kafka(pr->metrics, &ks);
        int rc = relay_slotmon_step(pr->slotmon, now, &si, err, sizeof(err));
        if (rc == 1)
                relay_metrics_slot(pr->metrics, &si);
        else if (rc < 0 && !pr->slotmon_warned) {
                relay_log_warning("%s; slot metrics are missing until it works, retrying", err);
                pr->slotmon_warned = true;
        }
        relay_metrics_sample_t sm = {
                .received = s->prog.received,
                .confirmed = s->prog.sent_flush,
                .keepalive_end = s->prog.keepalive_end,
                .inflight_events = relay_acktrack_pending(s->ack),
                .held_back = s->inplace.pending,
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
static int session_status(session_t *s, bool force, char *err, size_t errlen)
{
        progress_t *pg = &s->prog;
        relay_lsn_t confirmed = relay_acktrack_confirmable(s->ack);
        if (relay_acktrack_drained(s->ack) && pg->keepalive_end > confirmed) {
                relay_acktrack_advance_idle(s->ack, pg->keepalive_end);
                confirmed = relay_acktrack_confirmable(s->ack);
        }
        int64_t now = now_ms();
        session_metrics(s, confirmed, now);
        int64_t since = now - pg->last_status_ms;
        if (!force && !pg->reply_pending && since < pg->status_interval_ms &&
            !(confirmed > pg->sent_flush && since >= CONFIRM_MIN_GAP_MS))
                return 0;
        int rc = relay_repl_send_status(s->repl, pg->received, confirmed, false, err, errlen);
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
static int session_serve(session_t *s, int ms, char *err, size_t errlen)
{
        int rc;
        relay_notify_watchdog(); /* the stream is held, not stuck */
        relay_producer_poll(s->prod, ms);
        if ((rc = session_kafka_check(s, err, errlen)))
                return rc;
        return session_status(s, false, err, errlen);
}

/* Offer one event to the producer, waiting out a full queue. */
static int session_send(session_t *s, const relay_event_t *ev, void *opaque, char *err, size_t errlen)
{
        for (;;) {
                int rc = relay_producer_send(s->prod, ev, opaque, err, errlen);
                if (rc == 0) /* metrics */
                        relay_metrics_produced(s->proc->metrics);
                /* A dead producer refuses everything: say why it died. */
                if (rc == RELAY_EKAFKA && session_kafka_check(s, err, errlen))
                        return RELAY_EKAFKA;
                if (rc != RELAY_EAGAIN)
                        return rc;
                if ((rc = session_serve(s, 10, err, errlen)))
                        return rc;
        }
}

/* Wait until Kafka has answered for everything produced so far. */
static int session_wait_drained(session_t *s, char *err, size_t errlen)
{
        int rc;
        while (relay_producer_outq_len(s->prod) > 0)
                if ((rc = session_serve(s, 10, err, errlen)))
                        return rc;
        return 0;
}

/* A new producer with the batch size the process has settled on. The old
 * one must have nothing in flight (or be dead: gapless stops it at the
 * first refusal). */
static int session_new_producer(session_t *s, char *err, size_t errlen)
{
        relay_producer_free(s->prod);
        s->prod = NULL;
        return relay_producer_new(&s->prod, s->cfg, s->proc->max_batch, on_delivery, s, err, errlen);
}

/*
 * topic's max.message.bytes, 0 when unknown. Learnt once per topic (and
 * again after LIMIT_TTL_MS, or after Kafka refused a batch as too large).
 * A limit below the producer's batch.size means batches of small events
 * could be refused as a whole: the producer is replaced by one whose
 * batches fit, once what is in flight is acknowledged.
 */
static int session_topic_limit(session_t *s, const char *topic, int64_t *limit, char *err,
                               size_t errlen)
{
        process_t *pr = s->proc;
        int64_t now = now_ms(), b = 0;
        char kerr[RELAY_ERRBUF];
        int rc;

        *limit = 0;
        switch (relay_limits_get(pr->lim, topic, now, &b)) {
        case RELAY_LIMIT_KNOWN:
                *limit = b;
                break;
        case RELAY_LIMIT_UNKNOWN:
                return 0;
        case RELAY_LIMIT_MISSING:
                rc = relay_producer_topic_limit(s->prod, topic, LIMIT_ASK_MS, &b, kerr, sizeof(kerr));
                if (rc == RELAY_EKAFKA) {
                        relay_log_warning("could not read max.message.bytes of topic \"%s\": %s; "
                                          "an event too large for it is found only when Kafka "
                                          "refuses it (grant DescribeConfigs on the topic)",
                                          topic, kerr);
                        b = 0;
                }
                if (relay_limits_put(pr->lim, topic, b, now,
                                     rc == 0 ? LIMIT_TTL_MS
                                             : rc == RELAY_EAGAIN ? LIMIT_MISSING_TTL_MS
                                                                  : LIMIT_TTL_MS)) {
                        relay_err_set(err, errlen, "out of memory");
                        return RELAY_ENOMEM;
                }
                if (b > 0)
                        relay_log_debug("topic \"%s\": max.message.bytes %lld%s", topic,
                                        (long long)b, rc == RELAY_EAGAIN ? " (not created yet)" : "");
                *limit = b;
                break;
        }
        if (*limit > 0 && *limit < relay_producer_batch_size(s->prod)) {
                relay_log_info("topic \"%s\" takes record batches of at most %lld bytes: lowering "
                               "the producer's batch.size from %lld",
                               topic, (long long)*limit,
                               (long long)relay_producer_batch_size(s->prod));
                pr->max_batch = *limit;
                if ((rc = session_wait_drained(s, err, errlen)) ||
                    (rc = session_new_producer(s, err, errlen)))
                        return rc;
        }
        return 0;
}

/* Does ev fit what Kafka and librdkafka accept? 0: yes; 1: no, with the
 * reason in why; < 0: error. */
static int session_fits(session_t *s, const relay_event_t *ev, char *why, size_t whylen, char *err,
                        size_t errlen)
{
        int64_t limit;
        size_t local = relay_limits_local_size(ev);
        if ((int64_t)local > relay_producer_max_message(s->prod)) {
                relay_err_set(why, whylen,
                              "event too large for the producer: %zu bytes, "
                              "kafka.message.max.bytes is %lld",
                              local, (long long)relay_producer_max_message(s->prod));
                return 1;
        }
        int rc = session_topic_limit(s, ev->topic, &limit, err, errlen);
        if (rc)
                return rc;
        size_t size = relay_limits_record_size(ev);
        if (limit > 0 && (int64_t)size > limit) {
                relay_err_set(why, whylen,
                              "event too large for topic \"%s\": %zu bytes as a Kafka record "
                              "batch, max.message.bytes is %lld",
                              ev->topic, size, (long long)limit);
                return 1;
        }
        return 0;
}

/*
 * Produce ev alone and wait for Kafka's answer before anything else is
 * produced. It counts as a message of the open transaction until it is
 * acknowledged. Returns 0 (acknowledged), RELAY_EREJECTED (refused for
 * good: why, *cls), or a session failure.
 */
static int session_send_in_place(session_t *s, const relay_event_t *ev, relay_dr_class_t *cls,
                                 char *why, size_t whylen, char *err, size_t errlen)
{
        uint64_t seq = relay_acktrack_add(s->ack);
        s->inplace.pending = true;
        int rc = session_send(s, ev, OPAQUE_INPLACE, err, errlen);
        if (rc) {
                s->inplace.pending = false;
                relay_acktrack_unadd(s->ack);
                if (rc == RELAY_EREJECTED) {
                        *cls = RELAY_DR_TOO_LARGE;
                        relay_err_set(why, whylen, "%s", err);
                }
                return rc;
        }
        while (s->inplace.pending) {
                /* Not session_serve(): after a refusal the producer reports
                 * itself dead (gapless) before the refused report is served. */
                relay_notify_watchdog();
                relay_producer_poll(s->prod, 10);
                if (s->ack_bug || s->dr_failed)
                        return session_kafka_check(s, err, errlen);
                if ((rc = session_status(s, false, err, errlen)))
                        return rc;
        }
        if (s->inplace.err == 0) {
                if (relay_acktrack_ack(s->ack, seq) != 0) {
                        relay_err_set(err, errlen, "acknowledgement for an event not in flight");
                        return RELAY_EKAFKA;
                }
                return 0;
        }
        relay_acktrack_unadd(s->ack);
        if (s->inplace.err == RELAY_EREJECTED) {
                *cls = s->inplace.cls;
                relay_err_set(why, whylen, "%s", s->inplace.why);
                return RELAY_EREJECTED;
        }
        if (s->inplace.cls == RELAY_DR_IMPLICIT_ACK)
                s->proc->implicit_acks++;
        relay_err_set(err, errlen, "could not deliver event to Kafka: %s", s->inplace.why);
        return RELAY_EKAFKA;
}

/*
 * ev cannot be delivered (it cannot be mapped, does not fit, or Kafka kept
 * refusing it): write its dead-letter copy and wait for it, or stop before
 * it. Nothing after it is produced until then, so no later event of its
 * aggregate can overtake it. RELAY_EMAP means stop (exit 4), err says why.
 */
static int session_dead_letter(session_t *s, const relay_event_t *ev, relay_lsn_t lsn,
                               const char *cause, int attempts, char *err, size_t errlen)
{
        relay_policy_t *pol = s->proc->pol;
        relay_policy_dlq_t scratch;
        relay_event_t dlq;
        relay_dr_class_t cls;
        char why[RELAY_ERRBUF];
        int rc;

        if (relay_policy_stops(pol)) {
                relay_err_set(err, errlen,
                              "could not deliver event \"%.*s\" at " RELAY_LSN_FMT
                              ": %s; stopping before it (errors.policy = stop): fix the cause and "
                              "restart, or list the id in errors.skip.ids",
                              RELAY_ID_ARGS(ev->id, ev->id_len), RELAY_LSN_ARGS(lsn), cause);
                return RELAY_EMAP;
        }
        if (relay_policy_dead_letter(pol, ev, lsn, cause, attempts, &scratch, &dlq, why,
                                     sizeof(why)) == 0 &&
            (rc = session_fits(s, &dlq, why, sizeof(why), err, errlen)) <= 0) {
                if (rc < 0)
                        return rc;
                rc = session_send_in_place(s, &dlq, &cls, why, sizeof(why), err, errlen);
                if (rc == 0) {
                        s->dead_lettered++;
                        relay_metrics_dead_lettered(s->proc->metrics);
                        relay_policy_forget(pol, s->txn_lsn, ev->id, ev->id_len);
                        relay_log_warning("event \"%.*s\" at " RELAY_LSN_FMT
                                          " written to dead-letter topic \"%s\": %s",
                                          RELAY_ID_ARGS(ev->id, ev->id_len), RELAY_LSN_ARGS(lsn),
                                          relay_policy_dlq_topic(pol), cause);
                        return 0;
                }
                if (rc != RELAY_EREJECTED)
                        return rc;
        }
        relay_err_set(err, errlen,
                      "could not write event \"%.*s\" at " RELAY_LSN_FMT
                      " to the dead-letter topic \"%s\": %s; stopping before it (fix the topic, "
                      "its max.message.bytes or its permissions, or list the id in "
                      "errors.skip.ids); it was refused because: %s",
                      RELAY_ID_ARGS(ev->id, ev->id_len), RELAY_LSN_ARGS(lsn),
                      relay_policy_dlq_topic(pol), why, cause);
        return RELAY_EMAP;
}

/* Sleep ms while serving Kafka and the server; false when a stop was asked. */
static int session_backoff(session_t *s, int64_t ms, char *err, size_t errlen)
{
        int64_t end = now_ms() + ms;
        int rc;
        while (!stop_requested && now_ms() < end)
                if ((rc = session_serve(s, 50, err, errlen)))
                        return rc;
        if (stop_requested) {
                relay_err_set(err, errlen, "stopped while waiting to resend an event");
                return RELAY_EIO;
        }
        return 0;
}

/*
 * ev was refused `attempts` times (the last time, perhaps, with neighbours
 * of its batch): settle it in place. Once what is in flight is answered,
 * send it alone; again after a backoff while Kafka keeps refusing it; then
 * dead-letter it or stop, as errors.* says.
 */
static int session_resend(session_t *s, const relay_event_t *ev, relay_lsn_t lsn, int attempts,
                          const char *last_cause, char *err, size_t errlen)
{
        relay_policy_t *pol = s->proc->pol;
        char cause[RELAY_ERRBUF], why[RELAY_ERRBUF];
        relay_dr_class_t cls;
        int64_t wait;
        int rc;

        relay_err_set(cause, sizeof(cause), "%s", last_cause);
        if ((rc = session_wait_drained(s, err, errlen)))
                return rc;
        for (;;) {
                switch (relay_policy_next(pol, attempts, &wait)) {
                case RELAY_POLICY_STOP:
                        relay_err_set(err, errlen,
                                      "Kafka rejected event \"%.*s\" at " RELAY_LSN_FMT
                                      " again when sent alone: %s; stopping before it "
                                      "(errors.policy = stop): fix the cause and restart, or list "
                                      "the id in errors.skip.ids",
                                      RELAY_ID_ARGS(ev->id, ev->id_len), RELAY_LSN_ARGS(lsn), cause);
                        return RELAY_EMAP;
                case RELAY_POLICY_DEAD_LETTER:
                        return session_dead_letter(s, ev, lsn, cause, attempts, err, errlen);
                case RELAY_POLICY_RESEND:
                        break;
                }
                if (wait > 0) {
                        relay_log_warning("Kafka rejected event \"%.*s\" at " RELAY_LSN_FMT
                                          ": %s; resending in %lld ms (attempt %d)",
                                          RELAY_ID_ARGS(ev->id, ev->id_len), RELAY_LSN_ARGS(lsn), cause,
                                          (long long)wait, attempts + 1);
                        if ((rc = session_backoff(s, wait, err, errlen)))
                                return rc;
                }
                relay_metrics_retry(s->proc->metrics);
                rc = session_send_in_place(s, ev, &cls, why, sizeof(why), err, errlen);
                if (rc == 0) {
                        relay_policy_forget(pol, s->txn_lsn, ev->id, ev->id_len);
                        relay_log_info("event \"%.*s\" delivered to \"%s\" on attempt %d",
                                       RELAY_ID_ARGS(ev->id, ev->id_len), ev->topic, attempts + 1);
                        return 0;
                }
                if (rc != RELAY_EREJECTED)
                        return rc;
                /* The producer stopped at the refusal (gapless): nothing
                 * else was in flight, so a new one loses nothing. */
                if ((rc = session_new_producer(s, err, errlen)))
                        return rc;
                relay_err_set(cause, sizeof(cause), "%s", why);
                if ((attempts = relay_policy_rejected(pol, s->txn_lsn, ev->id, ev->id_len, why)) < 0) {
                        relay_err_set(err, errlen, "out of memory");
                        return RELAY_ENOMEM;
                }
                if (cls == RELAY_DR_TOO_LARGE) {
                        relay_limits_forget(s->proc->lim, ev->topic);
                        if ((rc = session_fits(s, ev, why, sizeof(why), err, errlen)) < 0)
                                return rc;
                        if (rc == 1)
                                return session_dead_letter(s, ev, lsn, why, attempts, err, errlen);
                }
        }
}

/* One outbox row: skip it, settle it in place as poison, or produce it. */
static int session_event(session_t *s, const relay_pgo_insert_t *m, relay_lsn_t lsn, char *err,
                         size_t errlen)
{
        relay_policy_t *pol = s->proc->pol;
        relay_event_t ev;
        char why[RELAY_ERRBUF];
        const char *cause = NULL;
        int rc = relay_outbox_map(s->outbox, m, s->commit_ts, &ev, err, errlen);

        if (rc && rc != RELAY_EMAP)
                return rc;
        if (relay_policy_skip(pol, ev.id, ev.id_len)) {
                s->skipped++;
                relay_metrics_skipped(s->proc->metrics);
                relay_log_warning("skipping event \"%.*s\" at " RELAY_LSN_FMT
                                  " as errors.skip.ids says",
                                  RELAY_ID_ARGS(ev.id, ev.id_len), RELAY_LSN_ARGS(lsn));
                return 0;
        }
        if (rc == RELAY_EMAP) {
                /* A row that cannot be mapped now never can: no resends. */
                char detail[RELAY_ERRBUF];
                relay_err_set(detail, sizeof(detail), "%s", err);
                if (relay_policy_stops(pol)) {
                        relay_err_set(err, errlen,
                                      "could not turn outbox row (id \"%.*s\") at " RELAY_LSN_FMT
                                      " into an event: %s",
                                      RELAY_ID_ARGS(ev.id, ev.id_len), RELAY_LSN_ARGS(lsn), detail);
                        return RELAY_EMAP;
                }
                return session_dead_letter(s, &ev, lsn, detail, 0, err, errlen);
        }
        if ((rc = session_fits(s, &ev, why, sizeof(why), err, errlen)) < 0)
                return rc;
        if (rc == 1) /* resending the same bytes cannot fix it */
                return session_dead_letter(s, &ev, lsn, why, 0, err, errlen);
        int attempts = relay_policy_attempts(pol, s->txn_lsn, ev.id, ev.id_len, &cause);
        if (attempts > 0) {
                relay_err_set(why, sizeof(why), "%s", cause);
                rc = session_resend(s, &ev, lsn, attempts, why, err, errlen);
                if (rc == 0)
                        s->events++;
                return rc;
        }
        rc = session_send(s, &ev, OPAQUE_SEQ(relay_acktrack_add(s->ack)), err, errlen);
        if (rc == 0) {
                s->events++;
                return 0;
        }
        relay_acktrack_unadd(s->ack);
        if (rc != RELAY_EREJECTED)
                return rc;
        /* librdkafka refused it at once (its own size check disagreed with
         * ours): nothing was produced, settle it here. */
        relay_err_set(why, sizeof(why), "%s", err);
        return session_dead_letter(s, &ev, lsn, why, 0, err, errlen);
}

static int session_message(session_t *s, const relay_walmsg_t *w, char *err, size_t errlen)
{
        relay_pgo_msg_t m;
        progress_t *pg = &s->prog;
        int rc;

        if (w->type == 'k') {
                if (w->wal_end > pg->keepalive_end)
                        pg->keepalive_end = w->wal_end;
                if (w->wal_end > pg->received && relay_acktrack_drained(s->ack))
                        pg->received = w->wal_end;
                if (w->reply_requested)
                        pg->reply_pending = true;
                return 0;
        }
        rc = relay_pgoutput_decode(s->dec, w->data, w->len, &m, err, errlen);
        if (rc)
                return rc;
        switch (m.kind) {
        case RELAY_PGO_BEGIN:
                if (relay_acktrack_begin(s->ack, m.begin.final_lsn) != 0) {
                        relay_err_set(err, errlen, "Begin at " RELAY_LSN_FMT " inside a transaction",
                                      RELAY_LSN_ARGS(w->wal_start));
                        return RELAY_EPROTO;
                }
                s->txn_lsn = m.begin.final_lsn;
                s->commit_ts = m.begin.commit_time;
                return 0;
        case RELAY_PGO_COMMIT:
                if (relay_acktrack_commit(s->ack, m.commit.end_lsn) != 0) {
                        relay_err_set(err, errlen,
                                      "Commit with end LSN " RELAY_LSN_FMT " outside a transaction "
                                      "or not after the previous one",
                                      RELAY_LSN_ARGS(m.commit.end_lsn));
                        return RELAY_EPROTO;
                }
                if (m.commit.end_lsn > pg->received)
                        pg->received = m.commit.end_lsn;
                s->txns++;
                relay_metrics_commit(s->proc->metrics, m.commit.end_lsn, s->commit_ts);
                return 0;
        case RELAY_PGO_RELATION:
                rc = relay_outbox_bind(s->outbox, m.relation.relation);
                if (rc < 0) {
                        relay_err_set(err, errlen, "out of memory");
                        return rc;
                }
                if (rc == 1)
                        relay_log_debug("outbox table is relation %u", (unsigned)m.relation.relid);
                return 0;
        case RELAY_PGO_INSERT:
                if (!relay_outbox_is_outbox(s->outbox, m.insert.relid))
                        return 0;
                if (!relay_acktrack_in_txn(s->ack)) {
                        relay_err_set(err, errlen, "Insert at " RELAY_LSN_FMT " outside a transaction",
                                      RELAY_LSN_ARGS(w->wal_start));
                        return RELAY_EPROTO;
                }
                return session_event(s, &m.insert, w->wal_start, err, errlen);
        case RELAY_PGO_UPDATE:
        case RELAY_PGO_DELETE:
        case RELAY_PGO_TRUNCATE:
        case RELAY_PGO_TYPE:
        case RELAY_PGO_ORIGIN:
        case RELAY_PGO_MESSAGE:
                return 0;
        }
        /* The decoder refuses every other kind at its type byte. */
        relay_err_set(err, errlen, "unexpected pgoutput message kind %d at " RELAY_LSN_FMT,
                      (int)m.kind, RELAY_LSN_ARGS(w->wal_start));
        return RELAY_EPROTO;
}

/* Wait for Kafka to acknowledge what is in flight (up to the shutdown
 * timeout), confirm it, and end the stream. */
static void session_drain(session_t *s)
{
        char err[RELAY_ERRBUF];
        int64_t deadline = now_ms() + s->set->shutdown_timeout_ms;
        while (relay_producer_outq_len(s->prod) > 0 && now_ms() < deadline) {
                relay_notify_watchdog();
                relay_producer_poll(s->prod, 50);
                /* A failed delivery or a dead producer ends the wait. */
                if (s->dr_failed || s->ack_bug || relay_producer_check(s->prod, err, sizeof(err)) != 0)
                        break;
                if (session_status(s, false, err, sizeof(err)) != 0)
                        break;
        }
        size_t left = relay_producer_outq_len(s->prod);
        if (left > 0)
                relay_log_warning("%zu events not acknowledged by Kafka within shutdown.timeout.ms; "
                                  "they will be sent again on restart",
                                  left);
        if (session_status(s, true, err, sizeof(err)) != 0 ||
            relay_repl_stop(s->repl, 5000, err, sizeof(err)) != 0)
                relay_log_warning("%s", err);
        relay_log_info("confirmed up to " RELAY_LSN_FMT " on slot \"%s\"",
                       RELAY_LSN_ARGS(s->prog.sent_flush), s->set->slot_name);
}

/* Stop between transactions, so a clean stop never leaves a half-sent
 * transaction to be sent again. */
static bool session_may_stop(const session_t *s)
{
        return stop_requested && !relay_acktrack_in_txn(s->ack);
}

/* Decode and hand on up to READ_BATCH messages that libpq already holds.
 * *buffered: the batch was full, so more may be waiting in libpq's buffer,
 * where poll() cannot see them. */
static int session_read_batch(session_t *s, bool *buffered, char *err, size_t errlen)
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
static int session_wait(session_t *s, bool buffered, char *err, size_t errlen)
{
        const progress_t *pg = &s->prog;
        int64_t now = now_ms();
        struct pollfd fds[2] = {
                {.fd = relay_repl_socket(s->repl), .events = POLLIN},
                {.fd = relay_producer_fd(s->prod), .events = POLLIN},
        };
        int rc;

        if (relay_repl_wants_write(s->repl))
                fds[0].events |= POLLOUT;
        int64_t wait = pg->status_interval_ms - (now - pg->last_status_ms);
        if (relay_acktrack_confirmable(s->ack) > pg->sent_flush)
                wait = CONFIRM_MIN_GAP_MS - (now - pg->last_status_ms);
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
static void session_tick(session_t *s, int64_t *last_progress, int64_t *last_trim,
                         uint64_t *last_events)
{
        int64_t now = now_ms();
        if (now - *last_progress >= PROGRESS_LOG_MS) {
                if (s->events != *last_events)
                        relay_log_info("relayed %llu events in %llu transactions; confirmed "
                                       "up to " RELAY_LSN_FMT,
                                       (unsigned long long)s->events, (unsigned long long)s->txns,
                                       RELAY_LSN_ARGS(s->prog.sent_flush));
                *last_events = s->events;
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

static int session_stream(session_t *s, char *err, size_t errlen)
{
        int64_t last_progress = now_ms(), last_trim = last_progress;
        uint64_t last_events = 0;
        bool buffered;
        int rc;

        for (;;) {
                relay_notify_watchdog();
                if (session_may_stop(s))
                        return 0;
                if ((rc = session_read_batch(s, &buffered, err, errlen)) ||
                    (rc = session_serve(s, 0, err, errlen)))
                        return rc;
                if (session_may_stop(s))
                        continue;
                session_tick(s, &last_progress, &last_trim, &last_events);
                if ((rc = session_wait(s, buffered, err, errlen)))
                        return rc;
        }
}

static int session_open(session_t *s, const relay_config_t *cfg, const relay_settings_t *set,
                        process_t *proc, bool first, bool may_create_slot, bool recreate_slot,
                        relay_lsn_t *resume, char *err, size_t errlen)
{
        int rc;
        const char *slot = set->slot_name;
        bool created;

        memset(s, 0, sizeof(*s));
        s->cfg = cfg;
        s->set = set;
        s->proc = proc;
        if ((rc = relay_outbox_new(&s->outbox, set, err, errlen)))
                return rc;
        if (!(s->ack = relay_acktrack_new())) {
                relay_err_set(err, errlen, "out of memory");
                return RELAY_ENOMEM;
        }
        if ((rc = relay_producer_new(&s->prod, cfg, proc->max_batch, on_delivery, s, err, errlen)))
                return rc;
        if (first) {
                char kerr[RELAY_ERRBUF];
                const char *servers = set->kafka_bootstrap_servers;
                /* In short slices, so a stop signal is not kept waiting. */
                int64_t deadline = now_ms() + KAFKA_PING_MS;
                do
                        rc = relay_producer_ping(s->prod, 200, kerr, sizeof(kerr));
                while (rc == RELAY_EAGAIN && !stop_requested && now_ms() < deadline);
                if (rc && stop_requested) {
                        relay_err_set(err, errlen, "stopped while waiting for Kafka");
                        return RELAY_EIO;
                }
                if (rc) {
                        relay_err_set(err, errlen,
                                      "could not reach Kafka at \"%s\": %s; check "
                                      "kafka.bootstrap.servers and that the brokers are up",
                                      servers, kerr);
                        return RELAY_ESETUP;
                }
        }
        if ((rc = relay_repl_connect(&s->repl, set, err, errlen)))
                return rc;
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
        if (created)
                relay_log_info("created publication \"%s\" for table \"%s.%s\" (inserts only)",
                               set->publication_name, set->outbox_table.schema,
                               set->outbox_table.name);
        relay_slot_outcome_t outcome;
        if ((rc = relay_repl_ensure_slot(s->repl, may_create_slot, recreate_slot, &outcome, err,
                                         errlen)))
                return rc;
        /* Created after this process streamed from an earlier slot of that
         * name, or after finding it lost: events may be missing. */
        if (outcome == RELAY_SLOT_RECREATED || (outcome == RELAY_SLOT_CREATED && !may_create_slot))
                relay_log_warning("created replication slot \"%s\" anew as slot.recreate = true "
                                  "says: events written while it was gone are not relayed",
                                  slot);
        else if (outcome == RELAY_SLOT_CREATED)
                relay_log_info("created replication slot \"%s\"", slot);
        if (outcome != RELAY_SLOT_EXISTED)
                *resume = 0; /* a new slot: our old position means nothing to it */
        if ((rc = relay_repl_start(s->repl, *resume, err, errlen)))
                return rc;
        if (!(s->dec = relay_pgoutput_new(relay_repl_proto_version(s->repl)))) {
                relay_err_set(err, errlen, "out of memory");
                return RELAY_ENOMEM;
        }
        s->prog.last_status_ms = now_ms();
        s->streaming = true;
        return 0;
}

/* Sleep ms, waking early for a stop signal. */
static void nap(process_t *pr, int64_t ms)
{
        int64_t end = now_ms() + ms;
        while (!stop_requested) {
                relay_notify_watchdog();
                relay_metrics_alive(pr->metrics, now_ms());
                int64_t left = end - now_ms();
                if (left <= 0)
                        break;
                poll(NULL, 0, (int)(left > 100 ? 100 : left));
        }
}

static int64_t backoff_ms(const relay_settings_t *set, int attempt)
{
        int64_t base = set->reconnect_backoff_ms;
        int64_t max = set->reconnect_backoff_max_ms;
        int64_t d = base;
        for (int i = 0; i < attempt && d < max; i++)
                d *= 2;
        if (d > max)
                d = max;
        /* Full jitter on the upper half: replicas that failed together do
         * not come back together. */
        return d / 2 + (int64_t)((double)rand() / RAND_MAX * (double)(d / 2));
}

/* What the supervisor does after a session ended with rc. */
typedef enum {
        OUTCOME_RETRY,   /* transient: back off, resume from the slot */
        OUTCOME_STANDBY, /* another relay streams from the slot: retry soon */
        OUTCOME_SLOTLOST,/* fatal unless slot.recreate */
        OUTCOME_FATAL,   /* stop with exit_code_for(rc) */
} outcome_t;

static outcome_t classify(int rc)
{
        switch (rc) {
        case RELAY_EBUSY:
                return OUTCOME_STANDBY;
        case RELAY_ESLOTLOST:
                return OUTCOME_SLOTLOST;
        case RELAY_EIO:
        case RELAY_EKAFKA:
        case RELAY_ENOMEM:
                return OUTCOME_RETRY;
        default:
                return OUTCOME_FATAL;
        }
}

static int exit_code_for(int rc)
{
        switch (rc) {
        case RELAY_EINVAL:
                return RELAY_EXIT_CONFIG;
        case RELAY_ESETUP:
                return RELAY_EXIT_SETUP;
        case RELAY_EMAP:
                return RELAY_EXIT_EVENT;
        case RELAY_ESLOTLOST:
                return RELAY_EXIT_SLOTLOST;
        default:
                return RELAY_EXIT_FATAL;
        }
}

void relay_install_signals(void)
{
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_signal; /* no SA_RESTART: poll() must wake up */
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        signal(SIGPIPE, SIG_IGN);
}

static void process_free(process_t *pr)
{
        relay_policy_free(pr->pol);
        relay_limits_free(pr->lim);
        relay_slotmon_free(pr->slotmon);
        relay_metrics_free(pr->metrics);
}

static int process_init(process_t *pr, const relay_settings_t *set, char *err, size_t errlen)
{
        relay_policy_conf_t pc = {
                .stop = set->errors_policy == RELAY_ERRORS_STOP,
                .retries = set->errors_retries,
                .backoff_ms = set->errors_backoff_ms,
                .backoff_max_ms = set->errors_backoff_max_ms,
                .dlq_topic = set->errors_dlq_topic,
                .skip_ids = (const char *const *)set->errors_skip_ids,
                .nskip = set->n_errors_skip_ids,
        };
        memset(pr, 0, sizeof(*pr));
        if (relay_policy_new(&pr->pol, &pc, err, errlen))
                return RELAY_ENOMEM;
        if (!(pr->lim = relay_limits_new()) || !(pr->metrics = relay_metrics_new()) ||
            !(pr->slotmon = relay_slotmon_new(set->postgres_conninfo, set->slot_name))) {
                relay_err_set(err, errlen, "out of memory");
                return RELAY_ENOMEM;
        }
        return 0;
}

int relay_run(const relay_config_t *cfg, const relay_settings_t *set)
{
        srand((unsigned)time(NULL) ^ (unsigned)getpid());

        const char *slot = set->slot_name;
        char err[RELAY_ERRBUF];
        bool first = true, ever_streamed = false, standby_logged = false;
        bool recreate = set->slot_recreate;
        relay_lsn_t resume = 0; /* highest LSN this process confirmed, across sessions */
        int attempt = 0;
        process_t proc;
        relay_http_t *http = NULL;

        if (process_init(&proc, set, err, sizeof(err))) {
                relay_log_fatal("%s", err);
                process_free(&proc);
                return RELAY_EXIT_FATAL;
        }
        /* metrics: the HTTP endpoint, on its own thread */
        if (strcmp(set->http_listen, "off") != 0 && !relay_http_available()) {
                relay_log_warning("this build has no HTTP endpoint (built without libmicrohttpd): "
                                  "http.listen = %s is ignored", set->http_listen);
        } else if (strcmp(set->http_listen, "off") != 0) {
                int hrc = relay_http_start(&http, set->http_listen, set->http_liveness_timeout_ms,
                                           proc.metrics, err, sizeof(err));
                if (hrc) {
                        relay_log_fatal("%s", err);
                        process_free(&proc);
                        return hrc == RELAY_ESETUP ? RELAY_EXIT_SETUP : RELAY_EXIT_FATAL;
                }
                relay_log_info("serving /metrics, /healthz and /readyz on http://%s",
                               set->http_listen);
        }
        if (set->unsafe_allow_pipelining)
                relay_log_warning("delivery.unsafe.allow.pipelining = true: with more than one "
                                  "request in flight librdkafka can report an event delivered "
                                  "that Kafka never stored; the relay resends such events, but "
                                  "an aggregate's events may be reordered");
        relay_log_info("starting outbox-relay: slot \"%s\", publication \"%s\", table \"%s.%s\"",
                       slot, set->publication_name, set->outbox_table.schema,
                       set->outbox_table.name);
        int exit_code = RELAY_EXIT_OK;
        bool drained = false;
        while (!stop_requested) {
                session_t s;
                err[0] = '\0';
                int rc = session_open(&s, cfg, set, &proc, first, !ever_streamed, recreate, &resume, err,
                                      sizeof(err));
                if (rc == 0) {
                        if (standby_logged)
                                relay_log_info("replication slot \"%s\" is free; taking over", slot);
                        relay_log_info("streaming from replication slot \"%s\"", slot);
                        relay_notify_ready("streaming");
                        relay_metrics_state(proc.metrics, RELAY_STATE_STREAMING);
                        standby_logged = false;
                        ever_streamed = true;
                        rc = session_stream(&s, err, sizeof(err));
                        if (rc == 0 || rc == RELAY_EMAP) {
                                relay_notify_stopping();
                                relay_metrics_state(proc.metrics, RELAY_STATE_STOPPING);
                                if (rc == RELAY_EMAP)
                                        relay_log_error("%s", err);
                                session_drain(&s);
                                relay_log_info("stopped after relaying %llu events in %llu "
                                               "transactions (%llu dead-lettered, %llu skipped)",
                                               (unsigned long long)s.events,
                                               (unsigned long long)s.txns,
                                               (unsigned long long)s.dead_lettered,
                                               (unsigned long long)s.skipped);
                                if (proc.implicit_acks)
                                        relay_log_warning("%llu delivery reports came without an "
                                                          "offset and were sent again from the slot",
                                                          (unsigned long long)proc.implicit_acks);
                                session_free(&s);
                                exit_code = rc ? RELAY_EXIT_EVENT : RELAY_EXIT_OK;
                                drained = true;
                                break;
                        }
                        /* Only a session that got something confirmed resets the
                         * backoff: one that fails at the same event again (a
                         * missing topic) waits longer each time. */
                        if (s.prog.sent_flush > resume) {
                                resume = s.prog.sent_flush;
                                attempt = 0;
                        }
                }
                session_free(&s);
                first = false;
                relay_metrics_session_end(proc.metrics, rc);
                if (stop_requested)
                        break;
                relay_metrics_state(proc.metrics, classify(rc) == OUTCOME_STANDBY
                                                          ? RELAY_STATE_STANDBY
                                                          : RELAY_STATE_BACKOFF);
                switch (classify(rc)) {
                case OUTCOME_STANDBY:
                        if (!standby_logged)
                                relay_log_info("replication slot \"%s\" is active in another "
                                               "process; standing by",
                                               slot);
                        standby_logged = true;
                        relay_notify_ready("standing by: the slot is active in another process");
                        nap(&proc, STANDBY_RETRY_MS);
                        continue;
                case OUTCOME_SLOTLOST:
                        if (!recreate) {
                                relay_log_fatal("%s", err);
                                exit_code = RELAY_EXIT_SLOTLOST;
                                break;
                        }
                        relay_log_warning("%s; recreating it (slot.recreate = true)", err);
                        nap(&proc, backoff_ms(set, attempt++));
                        continue;
                case OUTCOME_RETRY: {
                        int64_t d = backoff_ms(set, attempt++);
                        relay_log_warning("%s; retrying in %lld ms", err, (long long)d);
                        nap(&proc, d);
                        continue;
                }
                case OUTCOME_FATAL:
                        relay_log_fatal("%s", err);
                        exit_code = exit_code_for(rc);
                        break;
                }
                break;
        }
        if (exit_code == RELAY_EXIT_OK && !drained) {
                relay_notify_stopping();
                relay_log_info("stopped");
        }
        relay_http_stop(http);
        process_free(&proc);
        return exit_code;
}
