/*
 * settle.c - settling an event in place: the step of the session that
 * turns one outbox row into a Kafka message, and the slow path for the
 * rows that cannot simply be produced (unmappable, too large for their
 * topic, or refused by Kafka in an earlier session). Such an event is sent
 * alone and waited for before anything after it is produced, resent after
 * a backoff while Kafka keeps refusing it, then dead-lettered or stopped
 * before, as errors.* says (the decisions are policy.c's; carrying them out
 * needs the session's producer and tracker, hence this file beside
 * session.c).
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "relay/log.h"
#include "relay/notify.h"
#include "session_int.h"

/* How long a topic's max.message.bytes is trusted before it is read again,
 * and how long for a topic that does not exist yet (it will soon). */
#define LIMIT_TTL_MS 300000
#define LIMIT_MISSING_TTL_MS 10000
#define LIMIT_ASK_MS 3000
/* After Kafka did not answer within LIMIT_ASK_MS: no limit is asked for
 * (each ask holds the loop up to LIMIT_ASK_MS) for this long, doubling
 * while it keeps timing out, up to LIMIT_TTL_MS. A timeout is transient,
 * unlike a refusal, so it is not trusted for LIMIT_TTL_MS at once. */
#define LIMIT_TIMEOUT_PAUSE_MS 10000

/*
 * topic's max.message.bytes, 0 when unknown. Learnt once per topic (and
 * again after LIMIT_TTL_MS, after Kafka refused a batch as too large, or
 * when an event exceeds it: see fits()); *asked: Kafka was asked just now.
 * A limit below the producer's batch.size means batches of small events
 * could be refused as a whole: the producer is replaced by one whose
 * batches fit, once what is in flight is acknowledged.
 */
static int topic_limit(relay_session_t *s, const char *topic, int64_t *limit, bool *asked,
                       char *err, size_t errlen)
{
        relay_process_t *pr = s->proc;
        int64_t now = relay_now_ms(), b = 0;
        char kerr[RELAY_ERRBUF];
        int rc;

        *limit = 0;
        *asked = false;
        switch (relay_limits_get(pr->lim, topic, now, &b)) {
        case RELAY_LIMIT_KNOWN:
                *limit = b;
                break;
        case RELAY_LIMIT_UNKNOWN:
                return 0;
        case RELAY_LIMIT_MISSING:
                *asked = true;
                rc = relay_producer_topic_limit(s->prod, topic, LIMIT_ASK_MS, &b, kerr, sizeof(kerr));
                if (rc == RELAY_EIO) {
                        int64_t pause = relay_limits_timed_out(pr->lim, now, LIMIT_TIMEOUT_PAUSE_MS,
                                                               LIMIT_TTL_MS);
                        relay_log_warning("could not read max.message.bytes of topic \"%s\": Kafka "
                                          "did not answer the DescribeConfigs request within %d ms "
                                          "(%s); an event too large for a topic whose limit is not "
                                          "known is found only when Kafka refuses it; asking again "
                                          "in %lld s (check that the brokers and their controller "
                                          "are up and reachable from the relay)",
                                          topic, LIMIT_ASK_MS, kerr, (long long)(pause / 1000));
                        /* An expired limit still holds while paused. */
                        if (relay_limits_get(pr->lim, topic, now, &b) == RELAY_LIMIT_KNOWN)
                                *limit = b;
                        break;
                }
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
                        return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
                }
                if (b > 0)
                        relay_log_debug("topic \"%s\": max.message.bytes %lld%s", topic,
                                        (long long)b, rc == RELAY_EAGAIN ? " (not created yet)" : "");
                *limit = b;
                break;
        }
        int64_t batch = relay_producer_sizes(s->prod).batch_size;
        if (*limit > 0 && *limit < batch) {
                relay_log_info("topic \"%s\" takes record batches of at most %lld bytes: lowering "
                               "the producer's batch.size from %lld",
                               topic, (long long)*limit, (long long)batch);
                pr->max_batch = *limit;
                if ((rc = relay_session_wait_drained(s, err, errlen)) ||
                    (rc = relay_session_new_producer(s, err, errlen)))
                        return rc;
        }
        return 0;
}

/*
 * Does ev fit what Kafka and librdkafka accept? 0: yes; 1: no, with the
 * reason in why; < 0: error. refused: Kafka refused ev alone as too large.
 *
 * With compression Kafka applies the topic's max.message.bytes to the
 * compressed batch, which has no bound below the uncompressed one worth
 * checking against (40 kB of JSON may compress to 1 kB): only Kafka can say
 * such an event does not fit, and its refusal takes the resend path. After
 * it the limit still makes the reason. librdkafka's message.max.bytes
 * counts the uncompressed message (rd_kafka_msg_new0), so that check stays.
 */
static int fits(relay_session_t *s, const relay_event_t *ev, bool refused, char *why,
                size_t whylen, char *err, size_t errlen)
{
        int64_t limit;
        relay_limits_sizes_t z = relay_limits_sizes(ev);
        relay_producer_sizes_t ps = relay_producer_sizes(s->prod);
        if ((int64_t)z.local > ps.max_message) {
                relay_err_set(why, whylen,
                              "event too large for the producer: %zu bytes, "
                              "kafka.message.max.bytes is %lld",
                              z.local, (long long)ps.max_message);
                return 1;
        }
        bool asked;
        int rc = topic_limit(s, ev->topic, &limit, &asked, err, errlen);
        if (rc)
                return rc;
        bool compresses = ps.compresses;
        /* A limit read earlier may have been raised since (what an operator
         * does on seeing an event dead-lettered as too large): read it again
         * before judging, rather than dead-letter events the topic takes
         * until the cached limit expires. */
        if (limit > 0 && (int64_t)z.record > limit && (refused || !compresses) && !asked) {
                relay_limits_expire(s->proc->lim, ev->topic, relay_now_ms());
                if ((rc = topic_limit(s, ev->topic, &limit, &asked, err, errlen)))
                        return rc;
        }
        if (limit > 0 && (int64_t)z.record > limit && (refused || !compresses)) {
                relay_err_set(why, whylen,
                              "event too large for topic \"%s\": %zu bytes as a Kafka record "
                              "batch%s, max.message.bytes is %lld",
                              ev->topic, z.record,
                              compresses ? " before compression (Kafka refused it compressed)"
                                         : "",
                              (long long)limit);
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
static int send_in_place(relay_session_t *s, const relay_event_t *ev, relay_dr_class_t *cls,
                         char *why, size_t whylen, char *err, size_t errlen)
{
        uint64_t seq = relay_acktrack_add(s->ack);
        s->inplace.pending = true;
        int rc = relay_session_send(s, ev, TAG_INPLACE, err, errlen);
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
                /* Not relay_session_serve(): after a refusal the producer reports
                 * itself dead (gapless) before the refused report is served.
                 * Flushed: it is alone, and nothing comes after it to linger for. */
                relay_process_turn(s->proc);
                relay_producer_flush(s->prod, 10);
                if (s->ack_bug || s->dr_failed)
                        return relay_session_kafka_check(s, err, errlen);
                if ((rc = relay_session_status(s, false, err, errlen)))
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
 * aggregate can overtake it. The copy goes alone, once what is in flight is
 * answered: Kafka refusing it stops the producer (gapless), and librdkafka
 * would purge the events still queued, whose reports ("Purged in queue")
 * could end the session on the producer's fatal error before the copy's
 * refusal stops it (0156). RELAY_EMAP means stop (exit 4), err says why.
 */
static int dead_letter(relay_session_t *s, const relay_event_t *ev, relay_lsn_t lsn,
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
        /* The commit's time, not ev's timestamp (table.field.event.timestamp
         * may take that from a column). */
        int64_t commit_ms = relay_pg_to_unix_ms(s->commit_ts);
        if (relay_policy_dead_letter(pol, ev, lsn, commit_ms, cause, attempts, &scratch, &dlq, why,
                                     sizeof(why)) == 0 &&
            (rc = fits(s, &dlq, false, why, sizeof(why), err, errlen)) <= 0) {
                if (rc < 0 || (rc = relay_session_wait_drained(s, err, errlen)))
                        return rc;
                rc = send_in_place(s, &dlq, &cls, why, sizeof(why), err, errlen);
                if (rc == 0) {
                        s->n.dead_lettered++;
                        relay_metrics_dead_lettered(s->proc->metrics);
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
static int backoff(relay_session_t *s, int64_t ms, char *err, size_t errlen)
{
        int64_t end = relay_now_ms() + ms;
        int rc;
        while (!*s->stop && relay_now_ms() < end)
                if ((rc = relay_session_serve(s, 50, err, errlen)))
                        return rc;
        if (*s->stop) {
                relay_err_set(err, errlen, "stopped while waiting to resend an event");
                return RELAY_ESTOPPED;
        }
        return 0;
}

/*
 * ev was refused `attempts` times (the last time, perhaps, with neighbours
 * of its batch): settle it in place. Once what is in flight is answered,
 * send it alone; again after a backoff while Kafka keeps refusing it; then
 * dead-letter it or stop, as errors.* says.
 */
static int resend(relay_session_t *s, const relay_event_t *ev, relay_lsn_t lsn, int attempts,
                  const char *last_cause, char *err, size_t errlen)
{
        relay_policy_t *pol = s->proc->pol;
        char cause[RELAY_ERRBUF], why[RELAY_ERRBUF];
        relay_dr_class_t cls;
        int64_t wait;
        int rc;

        relay_err_set(cause, sizeof(cause), "%s", last_cause);
        if ((rc = relay_session_wait_drained(s, err, errlen)))
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
                        return dead_letter(s, ev, lsn, cause, attempts, err, errlen);
                case RELAY_POLICY_RESEND:
                        break;
                }
                if (wait > 0) {
                        relay_log_warning("Kafka rejected event \"%.*s\" at " RELAY_LSN_FMT
                                          ": %s; resending in %lld ms (attempt %d)",
                                          RELAY_ID_ARGS(ev->id, ev->id_len), RELAY_LSN_ARGS(lsn), cause,
                                          (long long)wait, attempts + 1);
                        if ((rc = backoff(s, wait, err, errlen)))
                                return rc;
                }
                relay_metrics_retry(s->proc->metrics);
                rc = send_in_place(s, ev, &cls, why, sizeof(why), err, errlen);
                if (rc == 0) {
                        s->n.events++; /* relayed; a dead-letter copy counts as that */
                        relay_log_info("event \"%.*s\" delivered to \"%s\" on attempt %d",
                                       RELAY_ID_ARGS(ev->id, ev->id_len), ev->topic, attempts + 1);
                        return 0;
                }
                if (rc != RELAY_EREJECTED)
                        return rc;
                relay_err_set(cause, sizeof(cause), "%s", why);
                if ((attempts = relay_policy_rejected(pol, s->txn_lsn, ev, why)) < 0)
                        return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
                /* The producer stopped at the refusal (gapless): nothing
                 * else was in flight, so a new one loses nothing. Under
                 * exactly-once the refusal spoilt the open Kafka transaction:
                 * this fails the session, which resumes from the checkpoint
                 * with the attempt counted. */
                if ((rc = relay_session_new_producer(s, err, errlen)))
                        return rc;
                /* Refused as too large when alone: Kafka's verdict on this
                 * event, whatever limit the relay can read (none without
                 * DescribeConfigs permission, when it used to resend it
                 * errors.retries times, asking and warning each time).
                 * Read the limit again for the next events, and for a
                 * reason that names it when it can be read. */
                if (cls == RELAY_DR_TOO_LARGE) {
                        relay_limits_forget(s->proc->lim, ev->topic);
                        if ((rc = fits(s, ev, true, why, sizeof(why), err, errlen)) < 0)
                                return rc;
                        return dead_letter(s, ev, lsn, rc == 1 ? why : cause, attempts, err,
                                           errlen);
                }
        }
}

/* One event mapped from an outbox row or message ("what"), rc the mapping's
 * result: skip it, settle it in place as poison, or produce it. */
int relay_settle_event(relay_session_t *s, relay_event_t ev, int rc, const char *what,
                       relay_lsn_t lsn, char *err, size_t errlen)
{
        relay_policy_t *pol = s->proc->pol;
        char why[RELAY_ERRBUF];
        const char *cause = NULL;

        if (rc && rc != RELAY_EMAP)
                return rc;
        if (relay_policy_skip(pol, ev.id, ev.id_len)) {
                s->n.skipped++;
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
                /* The row is in the WAL as it is: fixing the table helps the
                 * next rows, and only the policy or the skip list gets past
                 * this one (a restart would stop at it again). */
                if (relay_policy_stops(pol)) {
                        relay_err_set(err, errlen,
                                      "could not turn %s (id \"%.*s\") at " RELAY_LSN_FMT
                                      " into an event: %s; stopping before it (errors.policy = "
                                      "stop): %s",
                                      what, RELAY_ID_ARGS(ev.id, ev.id_len), RELAY_LSN_ARGS(lsn),
                                      detail,
                                      ev.id ? "list the id in errors.skip.ids, or set "
                                              "errors.policy = dlq to write it to the "
                                              "dead-letter topic"
                                            : "it has no id to list in errors.skip.ids; set "
                                              "errors.policy = dlq to write it to the "
                                              "dead-letter topic");
                        return RELAY_EMAP;
                }
                return dead_letter(s, &ev, lsn, detail, 0, err, errlen);
        }
        if ((rc = fits(s, &ev, false, why, sizeof(why), err, errlen)) < 0)
                return rc;
        if (rc == 1) /* resending the same bytes cannot fix it */
                return dead_letter(s, &ev, lsn, why, 0, err, errlen);
        int attempts = relay_policy_attempts(pol, s->txn_lsn, &ev, &cause);
        if (attempts > 0) {
                relay_err_set(why, sizeof(why), "%s", cause);
                s->inplace.settling = true;
                rc = resend(s, &ev, lsn, attempts, why, err, errlen);
                s->inplace.settling = false;
                return rc;
        }
        rc = relay_session_send(s, &ev, TAG_SEQ(relay_acktrack_add(s->ack)), err, errlen);
        if (rc == 0) {
                s->n.events++;
                return 0;
        }
        relay_acktrack_unadd(s->ack);
        if (rc != RELAY_EREJECTED)
                return rc;
        /* librdkafka refused it at once (its own size check disagreed with
         * ours): nothing was produced, settle it here. */
        relay_err_set(why, sizeof(why), "%s", err);
        return dead_letter(s, &ev, lsn, why, 0, err, errlen);
}
