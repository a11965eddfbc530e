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
#include "relay/log.h"
#include "relay/lsn.h"
#include "relay/notify.h"
#include "relay/outbox.h"
#include "relay/pgoutput.h"
#include "relay/producer.h"
#include "relay/repl.h"

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

typedef struct {
        const relay_config_t *cfg;
        relay_repl_t *repl;
        relay_pgoutput_t *dec;
        relay_outbox_t *outbox;
        relay_producer_t *prod;
        relay_acktrack_t *ack;

        bool dr_failed;
        char dr_err[RELAY_ERRBUF];
        bool ack_bug;

        relay_lsn_t received;     /* highest commit end or keepalive WAL end received */
        relay_lsn_t keepalive_end;
        relay_lsn_t sent_flush;   /* flush LSN in the last status update */
        int64_t last_status_ms;
        int64_t status_interval_ms;
        bool reply_pending;

        int64_t commit_ts; /* of the open transaction, PostgreSQL epoch us */
        uint64_t events, txns, skipped, dead_lettered;
        bool streaming;

        /* Error policy (errors.*): events Kafka rejected or that could not
         * be mapped, waiting for a resend or a dead-letter write. Each holds
         * one pending message of its transaction until it is resolved. */
        struct poison *poisons;
        bool policy_stop;
        int64_t retries, backoff_ms, backoff_max_ms;
        const char *dlq_topic;
        char **skip_ids;
        size_t nskip;
        bool halt; /* stop before an event (policy stop, or the dead-letter write failed) */
        char halt_err[RELAY_ERRBUF];
} session_t;

typedef enum { POISON_RETRY, POISON_DLQ } poison_state_t;

typedef struct poison {
        struct poison *next;
        uint64_t seq;         /* the transaction it belongs to */
        poison_state_t state;
        bool in_flight;
        int attempts;         /* deliveries Kafka rejected so far */
        int64_t due_ms;
        relay_lsn_t lsn;      /* the change (mapping) or its transaction's commit (rejection) */
        char *topic;          /* "" when the mapping failed before a topic existed */
        char *key, *value, *id;
        size_t key_len, value_len, id_len;
        relay_header_t *headers; /* names and values owned */
        size_t nheaders;
        int64_t timestamp_ms;
        char cause[RELAY_ERRBUF];
} poison_t;

/* Messages carry their transaction's sequence shifted left (even), or a
 * poison record's address with the low bit set (odd; malloc aligns). */
#define OPAQUE_SEQ(seq) ((void *)(uintptr_t)((seq) << 1))
#define OPAQUE_POISON(p) ((void *)((uintptr_t)(p) | 1u))

static int64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static char *dup_bytes(const char *b, size_t n)
{
        char *d = malloc(n + 1);
        if (d) {
                if (n)
                        memcpy(d, b, n);
                d[n] = '\0';
        }
        return d;
}

static void poison_free(poison_t *p)
{
        if (!p)
                return;
        for (size_t i = 0; i < p->nheaders; i++) {
                free((char *)(uintptr_t)p->headers[i].name);
                free((char *)(uintptr_t)p->headers[i].value);
        }
        free(p->headers);
        free(p->topic);
        free(p->key);
        free(p->value);
        free(p->id);
        free(p);
}

/* Copy an event (as produced, or as far as the mapping got) into a record
 * the session owns, so it outlives the Kafka message and the WAL buffer. */
static poison_t *poison_new(session_t *s, uint64_t seq, const relay_event_t *ev, relay_lsn_t lsn,
                            const char *cause)
{
        poison_t *p = calloc(1, sizeof(*p));
        if (!p)
                return NULL;
        p->seq = seq;
        p->lsn = lsn;
        p->timestamp_ms = ev->timestamp_ms;
        relay_err_set(p->cause, sizeof(p->cause), "%s", cause);
        p->topic = dup_bytes(ev->topic ? ev->topic : "", ev->topic ? strlen(ev->topic) : 0);
        if (ev->key) {
                p->key = dup_bytes(ev->key, ev->key_len);
                p->key_len = ev->key_len;
        }
        if (ev->value) {
                p->value = dup_bytes(ev->value, ev->value_len);
                p->value_len = ev->value_len;
        }
        if (ev->id) {
                p->id = dup_bytes(ev->id, ev->id_len);
                p->id_len = ev->id_len;
        }
        p->headers = calloc(ev->nheaders + 1, sizeof(relay_header_t));
        bool oom = !p->topic || (ev->key && !p->key) || (ev->value && !p->value) ||
                   (ev->id && !p->id) || !p->headers;
        for (size_t i = 0; !oom && i < ev->nheaders; i++) {
                relay_header_t *h = &p->headers[p->nheaders++];
                h->name = dup_bytes(ev->headers[i].name, strlen(ev->headers[i].name));
                if (ev->headers[i].value) {
                        h->value = dup_bytes(ev->headers[i].value, ev->headers[i].len);
                        h->len = ev->headers[i].len;
                        oom = !h->value;
                }
                oom = oom || !h->name;
        }
        if (oom) {
                poison_free(p);
                return NULL;
        }
        p->next = s->poisons;
        s->poisons = p;
        return p;
}

static void poison_unlink(session_t *s, poison_t *p)
{
        for (poison_t **pp = &s->poisons; *pp; pp = &(*pp)->next) {
                if (*pp == p) {
                        *pp = p->next;
                        return;
                }
        }
}

static int64_t poison_backoff(const session_t *s, int attempts)
{
        int64_t d = s->backoff_ms;
        for (int i = 1; i < attempts && d < s->backoff_max_ms; i++)
                d *= 2;
        return d < s->backoff_max_ms ? d : s->backoff_max_ms;
}

static void session_halt(session_t *s, const char *fmt, ...) RELAY_PRINTF(2, 3);
static void session_halt(session_t *s, const char *fmt, ...)
{
        va_list ap;
        if (s->halt)
                return;
        s->halt = true;
        va_start(ap, fmt);
        vsnprintf(s->halt_err, sizeof(s->halt_err), fmt, ap);
        va_end(ap);
}

/* An id for messages: at most 64 bytes of it, or "<unknown>". */
#define ID_ARGS(id, len) (int)((id) ? ((len) > 64 ? 64 : (len)) : 9), ((id) ? (id) : "<unknown>")

/* Kafka rejected p once more (or for the first time): schedule a resend,
 * or hand it to the dead-letter topic once the retries are spent. */
static void poison_rejected(session_t *s, poison_t *p, const char *cause)
{
        p->attempts++;
        relay_err_set(p->cause, sizeof(p->cause), "%s", cause);
        if (p->attempts > s->retries) {
                p->state = POISON_DLQ;
                p->due_ms = now_ms();
        } else {
                p->due_ms = now_ms() + poison_backoff(s, p->attempts);
                relay_log_warning("Kafka rejected event \"%.*s\" at " RELAY_LSN_FMT
                                  ": %s; resending in %lld ms (attempt %d of %lld)",
                                  (int)(p->id_len > 64 ? 64 : p->id_len), p->id ? p->id : "?",
                                  RELAY_LSN_ARGS(p->lsn), cause,
                                  (long long)poison_backoff(s, p->attempts), p->attempts + 1,
                                  (long long)s->retries + 1);
        }
}

static void on_poison_delivery(session_t *s, poison_t *p, const relay_delivery_t *d)
{
        int idl = (int)(p->id_len > 64 ? 64 : p->id_len);
        const char *id = p->id ? p->id : "<unknown>";
        p->in_flight = false;
        if (!d->err) {
                if (relay_acktrack_ack(s->ack, p->seq) != 0)
                        s->ack_bug = true;
                if (p->state == POISON_RETRY) {
                        relay_log_info("event \"%.*s\" delivered to \"%s\" after %d attempts", idl,
                                       id, p->topic, p->attempts + 1);
                } else {
                        s->dead_lettered++;
                        relay_log_warning("event \"%.*s\" at " RELAY_LSN_FMT
                                          " written to dead-letter topic \"%s\": %s",
                                          idl, id, RELAY_LSN_ARGS(p->lsn), s->dlq_topic, p->cause);
                }
                poison_unlink(s, p);
                poison_free(p);
                return;
        }
        if (p->state == POISON_RETRY && d->err == RELAY_EREJECTED) {
                poison_rejected(s, p, d->errstr);
                return;
        }
        if (p->state == POISON_DLQ && d->err == RELAY_EREJECTED) {
                session_halt(s,
                             "could not write event \"%.*s\" at " RELAY_LSN_FMT
                             " to the dead-letter topic: %s; stopping before it (fix the topic "
                             "or its permissions, or list the id in errors.skip.ids)",
                             ID_ARGS(p->id, p->id_len), RELAY_LSN_ARGS(p->lsn), d->errstr);
                return;
        }
        if (!s->dr_failed)
                relay_err_set(s->dr_err, sizeof(s->dr_err), "%s", d->errstr);
        s->dr_failed = true;
}

static void on_delivery(void *ctx, void *opaque, const relay_delivery_t *d)
{
        session_t *s = ctx;
        uintptr_t op = (uintptr_t)opaque;
        if (op & 1u) {
                on_poison_delivery(s, (poison_t *)(op & ~(uintptr_t)1u), d);
                return;
        }
        uint64_t seq = (uint64_t)(op >> 1);
        if (!d->err) {
                if (relay_acktrack_ack(s->ack, seq) != 0)
                        s->ack_bug = true;
                return;
        }
        if (d->err == RELAY_EREJECTED) {
                relay_lsn_t lsn = relay_acktrack_commit_lsn(s->ack, seq);
                const relay_event_t *ev = d->event;
                if (s->policy_stop) {
                        session_halt(s,
                                     "Kafka rejected event \"%.*s\" at " RELAY_LSN_FMT
                                     "): %s; stopping before it (errors.policy = stop): fix the "
                                     "cause and restart, or list the id in errors.skip.ids",
                                     ID_ARGS(ev->id, ev->id_len), RELAY_LSN_ARGS(lsn), d->errstr);
                        return;
                }
                poison_t *p = poison_new(s, seq, ev, lsn, d->errstr);
                if (!p) {
                        session_halt(s, "out of memory keeping rejected event \"%.*s\" at " RELAY_LSN_FMT,
                                     ID_ARGS(ev->id, ev->id_len), RELAY_LSN_ARGS(lsn));
                        return;
                }
                poison_rejected(s, p, d->errstr);
                return;
        }
        if (!s->dr_failed)
                relay_err_set(s->dr_err, sizeof(s->dr_err), "%s", d->errstr);
        s->dr_failed = true;
}

static void session_free(session_t *s)
{
        /* The producer first: purging it serves delivery reports into the tracker. */
        relay_producer_free(s->prod);
        relay_repl_free(s->repl);
        relay_pgoutput_free(s->dec);
        relay_outbox_free(s->outbox);
        relay_acktrack_free(s->ack);
        while (s->poisons) {
                poison_t *p = s->poisons;
                s->poisons = p->next;
                poison_free(p);
        }
        for (size_t i = 0; i < s->nskip; i++)
                free(s->skip_ids[i]);
        free(s->skip_ids);
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
        if (s->halt) {
                relay_err_set(err, errlen, "%s", s->halt_err);
                return RELAY_EMAP;
        }
        if (s->dr_failed) {
                relay_err_set(err, errlen, "could not deliver event to Kafka: %s", s->dr_err);
                return RELAY_EKAFKA;
        }
        return relay_producer_check(s->prod, err, errlen);
}

/* Send a standby status update when one is due, asked for, or worth it. */
static int session_status(session_t *s, bool force, char *err, size_t errlen)
{
        relay_lsn_t confirmed = relay_acktrack_confirmable(s->ack);
        if (relay_acktrack_drained(s->ack) && s->keepalive_end > confirmed) {
                relay_acktrack_advance_idle(s->ack, s->keepalive_end);
                confirmed = relay_acktrack_confirmable(s->ack);
        }
        int64_t now = now_ms();
        int64_t since = now - s->last_status_ms;
        if (!force && !s->reply_pending && since < s->status_interval_ms &&
            !(confirmed > s->sent_flush && since >= CONFIRM_MIN_GAP_MS))
                return 0;
        int rc = relay_repl_send_status(s->repl, s->received, confirmed, false, err, errlen);
        if (rc)
                return rc;
        if (confirmed != s->sent_flush)
                relay_log_debug("confirmed " RELAY_LSN_FMT, RELAY_LSN_ARGS(confirmed));
        s->sent_flush = confirmed;
        s->last_status_ms = now;
        s->reply_pending = false;
        return 0;
}

/* Offer one event to the producer, waiting out a full queue while keeping
 * status updates flowing so wal_sender_timeout cannot fire. */
static int session_send(session_t *s, const relay_event_t *ev, void *opaque, char *err, size_t errlen)
{
        for (;;) {
                int rc = relay_producer_send(s->prod, ev, opaque, err, errlen);
                if (rc != RELAY_EAGAIN)
                        return rc;
                relay_producer_poll(s->prod, 10);
                if ((rc = session_kafka_check(s, err, errlen)) || (rc = session_status(s, false, err, errlen)))
                        return rc;
        }
}

static bool skip_listed(const session_t *s, const char *id, size_t len)
{
        for (size_t i = 0; id && i < s->nskip; i++)
                if (strlen(s->skip_ids[i]) == len && memcmp(s->skip_ids[i], id, len) == 0)
                        return true;
        return false;
}

/* Produce a poison record that is due: a resend to its own topic, or the
 * dead-letter copy with headers that say what went wrong and where. */
static int poison_send(session_t *s, poison_t *p, char *err, size_t errlen)
{
        relay_header_t hdrs[64 + 5];
        char lsn[RELAY_LSN_BUFSZ], ts[32], attempts[16];
        relay_event_t ev = {
                .topic = p->topic, .key = p->key, .key_len = p->key_len, .value = p->value,
                .value_len = p->value_len, .id = p->id, .id_len = p->id_len,
                .headers = p->headers, .nheaders = p->nheaders, .timestamp_ms = p->timestamp_ms,
        };
        if (p->state == POISON_DLQ) {
                size_t n = p->nheaders > 64 ? 64 : p->nheaders;
                memcpy(hdrs, p->headers, n * sizeof(hdrs[0]));
                relay_lsn_format(p->lsn, lsn);
                snprintf(ts, sizeof(ts), "%lld", (long long)p->timestamp_ms);
                snprintf(attempts, sizeof(attempts), "%d", p->attempts);
                hdrs[n++] = (relay_header_t){"outbox.error.message", p->cause, strlen(p->cause)};
                hdrs[n++] = (relay_header_t){"outbox.error.topic", p->topic, strlen(p->topic)};
                hdrs[n++] = (relay_header_t){"outbox.error.lsn", lsn, strlen(lsn)};
                hdrs[n++] = (relay_header_t){"outbox.error.commit.time", ts, strlen(ts)};
                hdrs[n++] = (relay_header_t){"outbox.error.attempts", attempts, strlen(attempts)};
                ev.topic = s->dlq_topic;
                ev.headers = hdrs;
                ev.nheaders = n;
        }
        int rc = session_send(s, &ev, OPAQUE_POISON(p), err, errlen);
        if (rc == 0) {
                p->in_flight = true;
                return 0;
        }
        if (rc != RELAY_EREJECTED)
                return rc;
        if (p->state == POISON_RETRY) {
                poison_rejected(s, p, err);
                return 0;
        }
        session_halt(s,
                     "could not write event \"%.*s\" at " RELAY_LSN_FMT " to the dead-letter "
                     "topic \"%s\": %s; stopping before it",
                     ID_ARGS(p->id, p->id_len), RELAY_LSN_ARGS(p->lsn), s->dlq_topic, err);
        return 0;
}

static int session_poison_work(session_t *s, char *err, size_t errlen)
{
        int64_t now = now_ms();
        /* From the head after every send: a full queue makes poison_send
         * serve delivery reports, which may free any record of the list.
         * Each pass sends one (in flight) or reschedules it, so this ends. */
        while (!s->halt) {
                poison_t *p = s->poisons;
                while (p && (p->in_flight || p->due_ms > now))
                        p = p->next;
                if (!p)
                        break;
                int rc = poison_send(s, p, err, errlen);
                if (rc)
                        return rc;
        }
        return session_kafka_check(s, err, errlen);
}

/* An event the policy must handle before it ever reached Kafka (it could
 * not be mapped, or the producer refused it outright). */
static int session_poison(session_t *s, const relay_event_t *ev, relay_lsn_t lsn, bool mapped,
                          char *err, size_t errlen)
{
        uint64_t seq = relay_acktrack_add(s->ack);
        poison_t *p = poison_new(s, seq, ev, lsn, err);
        if (!p) {
                relay_err_set(err, errlen, "out of memory");
                return RELAY_ENOMEM;
        }
        if (mapped) {
                poison_rejected(s, p, err);
        } else {
                /* A row that cannot be mapped now never can: no resends. */
                p->state = POISON_DLQ;
                p->due_ms = now_ms();
        }
        return 0;
}

static int session_message(session_t *s, const relay_walmsg_t *w, char *err, size_t errlen)
{
        relay_pgo_msg_t m;
        relay_event_t ev;
        int rc;

        if (w->type == 'k') {
                if (w->wal_end > s->keepalive_end)
                        s->keepalive_end = w->wal_end;
                if (w->wal_end > s->received && relay_acktrack_drained(s->ack))
                        s->received = w->wal_end;
                if (w->reply_requested)
                        s->reply_pending = true;
                return 0;
        }
        rc = relay_pgoutput_decode(s->dec, w->data, w->len, &m, err, errlen);
        if (rc)
                return rc;
        switch (m.kind) {
        case RELAY_PGO_BEGIN:
                if (relay_acktrack_begin(s->ack, m.lsn) != 0) {
                        relay_err_set(err, errlen, "Begin at " RELAY_LSN_FMT " inside a transaction",
                                      RELAY_LSN_ARGS(w->wal_start));
                        return RELAY_EPROTO;
                }
                s->commit_ts = m.timestamp;
                return 0;
        case RELAY_PGO_COMMIT:
                if (relay_acktrack_commit(s->ack, m.end_lsn) != 0) {
                        relay_err_set(err, errlen,
                                      "Commit with end LSN " RELAY_LSN_FMT " outside a transaction "
                                      "or not after the previous one",
                                      RELAY_LSN_ARGS(m.end_lsn));
                        return RELAY_EPROTO;
                }
                if (m.end_lsn > s->received)
                        s->received = m.end_lsn;
                s->txns++;
                return 0;
        case RELAY_PGO_RELATION:
                rc = relay_outbox_bind(s->outbox, m.relation);
                if (rc < 0) {
                        relay_err_set(err, errlen, "out of memory");
                        return rc;
                }
                if (rc == 1)
                        relay_log_debug("outbox table is relation %u", (unsigned)m.relid);
                return 0;
        case RELAY_PGO_INSERT:
                if (!relay_outbox_is_outbox(s->outbox, m.relid))
                        return 0;
                if (!relay_acktrack_in_txn(s->ack)) {
                        relay_err_set(err, errlen, "Insert at " RELAY_LSN_FMT " outside a transaction",
                                      RELAY_LSN_ARGS(w->wal_start));
                        return RELAY_EPROTO;
                }
                rc = relay_outbox_map(s->outbox, &m, s->commit_ts, &ev, err, errlen);
                if (s->nskip && skip_listed(s, ev.id, ev.id_len)) {
                        s->skipped++;
                        relay_log_warning("skipping event \"%.*s\" at " RELAY_LSN_FMT
                                          " as errors.skip.ids says",
                                          ID_ARGS(ev.id, ev.id_len), RELAY_LSN_ARGS(w->wal_start));
                        return 0;
                }
                if (rc == RELAY_EMAP && !s->policy_stop)
                        return session_poison(s, &ev, w->wal_start, false, err, errlen);
                if (rc) {
                        char detail[RELAY_ERRBUF];
                        relay_err_set(detail, sizeof(detail), "%s", err);
                        relay_err_set(err, errlen,
                                      "could not turn outbox row (id \"%.*s\") at " RELAY_LSN_FMT
                                      " into an event: %s",
                                      ID_ARGS(ev.id, ev.id_len), RELAY_LSN_ARGS(w->wal_start),
                                      detail);
                        return rc;
                }
                rc = session_send(s, &ev, OPAQUE_SEQ(relay_acktrack_add(s->ack)), err, errlen);
                if (rc == 0) {
                        s->events++;
                        return 0;
                }
                relay_acktrack_unadd(s->ack);
                if (rc == RELAY_EREJECTED) {
                        if (s->policy_stop) {
                                char detail[RELAY_ERRBUF];
                                relay_err_set(detail, sizeof(detail), "%s", err);
                                relay_err_set(err, errlen,
                                              "Kafka rejected event \"%.*s\" at " RELAY_LSN_FMT
                                              ": %s; stopping before it (errors.policy = stop)",
                                              ID_ARGS(ev.id, ev.id_len),
                                              RELAY_LSN_ARGS(w->wal_start), detail);
                                return RELAY_EMAP;
                        }
                        return session_poison(s, &ev, w->wal_start, true, err, errlen);
                }
                return rc;
        case RELAY_PGO_UPDATE:
        case RELAY_PGO_DELETE:
        case RELAY_PGO_TRUNCATE:
        case RELAY_PGO_TYPE:
        case RELAY_PGO_ORIGIN:
        case RELAY_PGO_MESSAGE:
                return 0;
        default:
                relay_err_set(err, errlen,
                              "unexpected pgoutput message '%c' at " RELAY_LSN_FMT
                              ": streaming and two-phase decoding were not requested",
                              (char)m.kind, RELAY_LSN_ARGS(w->wal_start));
                return RELAY_EPROTO;
        }
}

/* Wait for Kafka to acknowledge what is in flight (up to the shutdown
 * timeout), confirm it, and end the stream. */
static void session_drain(session_t *s)
{
        char err[RELAY_ERRBUF];
        int64_t deadline = now_ms() + relay_config_get_int(s->cfg, "shutdown.timeout.ms");
        while (relay_producer_outq_len(s->prod) > 0 && now_ms() < deadline) {
                relay_notify_watchdog();
                relay_producer_poll(s->prod, 50);
                /* A halt still lets what is in flight finish; a failed
                 * delivery or a fatal producer ends the wait. */
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
                       RELAY_LSN_ARGS(s->sent_flush), relay_config_get(s->cfg, "slot.name"));
}

static int session_stream(session_t *s, char *err, size_t errlen)
{
        int64_t last_progress = now_ms(), last_trim = last_progress;
        uint64_t last_events = 0;
        int rc;

        for (;;) {
                relay_notify_watchdog();
                /* Stop between transactions, so a clean stop never leaves a
                 * half-sent transaction to be sent again. */
                bool stopping = stop_requested && !relay_acktrack_in_txn(s->ack);
                if (stopping)
                        return 0;
                /* A full batch may leave complete messages in libpq's buffer,
                 * which poll() cannot see: then do not wait below. */
                bool buffered = true;
                for (int i = 0; i < READ_BATCH; i++) {
                        relay_walmsg_t w;
                        rc = relay_repl_read(s->repl, &w, err, errlen);
                        if (rc == 0) {
                                buffered = false;
                                break;
                        }
                        if (rc < 0)
                                return rc;
                        if ((rc = session_message(s, &w, err, errlen)))
                                return rc;
                        if (stop_requested && !relay_acktrack_in_txn(s->ack))
                                break;
                }
                relay_producer_poll(s->prod, 0);
                if ((rc = session_kafka_check(s, err, errlen)))
                        return rc;
                if (s->poisons && (rc = session_poison_work(s, err, errlen)))
                        return rc;
                if ((rc = session_status(s, false, err, errlen)))
                        return rc;
                if (stop_requested && !relay_acktrack_in_txn(s->ack))
                        continue;

                int64_t now = now_ms();
                if (now - last_progress >= PROGRESS_LOG_MS) {
                        if (s->events != last_events)
                                relay_log_info("relayed %llu events in %llu transactions; confirmed "
                                               "up to " RELAY_LSN_FMT,
                                               (unsigned long long)s->events,
                                               (unsigned long long)s->txns,
                                               RELAY_LSN_ARGS(s->sent_flush));
                        last_events = s->events;
                        last_progress = now;
                }
#ifdef __GLIBC__
                /* glibc keeps what a burst freed (in-flight events, the
                 * librdkafka thread's arena) resident until it is trimmed:
                 * RSS after 30-60 s at 20 000 events/s was 14.6-17.0 MB in
                 * four runs without this, 13.1 MB with it, same CPU. */
                if (now - last_trim >= TRIM_MS) {
                        malloc_trim(0);
                        last_trim = now;
                }
#endif

                struct pollfd fds[2] = {
                        {.fd = relay_repl_socket(s->repl), .events = POLLIN},
                        {.fd = relay_producer_fd(s->prod), .events = POLLIN},
                };
                if (relay_repl_wants_write(s->repl))
                        fds[0].events |= POLLOUT;
                int64_t wait = s->status_interval_ms - (now - s->last_status_ms);
                if (relay_acktrack_confirmable(s->ack) > s->sent_flush)
                        wait = CONFIRM_MIN_GAP_MS - (now - s->last_status_ms);
                for (const poison_t *p = s->poisons; p; p = p->next)
                        if (!p->in_flight && p->due_ms - now < wait)
                                wait = p->due_ms - now;
                if (wait < 0 || buffered)
                        wait = 0;
                if (wait > 1000)
                        wait = 1000;
                if (poll(fds, 2, (int)wait) < 0 && errno != EINTR) {
                        relay_err_set(err, errlen, "poll failed: %s", strerror(errno));
                        return RELAY_EIO;
                }
                if (fds[0].revents & (POLLIN | POLLERR | POLLHUP)) {
                        if ((rc = relay_repl_consume(s->repl, err, errlen)))
                                return rc;
                }
                if ((fds[0].revents & POLLOUT) && (rc = relay_repl_flush(s->repl, err, errlen)))
                        return rc;
        }
}

static int parse_skip_ids(session_t *s, const char *list, char *err, size_t errlen)
{
        for (const char *p = list; *p;) {
                size_t n = strcspn(p, ",");
                const char *b = p;
                size_t m = n;
                while (m && (*b == ' ' || *b == '\t')) {
                        b++;
                        m--;
                }
                while (m && (b[m - 1] == ' ' || b[m - 1] == '\t'))
                        m--;
                if (m) {
                        char **ids = realloc(s->skip_ids, (s->nskip + 1) * sizeof(*ids));
                        if (!ids || !(ids[s->nskip] = dup_bytes(b, m))) {
                                if (ids)
                                        s->skip_ids = ids;
                                relay_err_set(err, errlen, "out of memory");
                                return RELAY_ENOMEM;
                        }
                        s->skip_ids = ids;
                        s->nskip++;
                }
                p += n;
                if (*p == ',')
                        p++;
        }
        return 0;
}

static int session_open(session_t *s, const relay_config_t *cfg, bool first, bool may_create_slot,
                        bool recreate_slot, relay_lsn_t *resume, char *err, size_t errlen)
{
        int rc;
        const char *slot = relay_config_get(cfg, "slot.name");
        relay_repl_conf_t rconf = {
                .conninfo = relay_config_get(cfg, "postgres.conninfo"),
                .slot = slot,
                .publication = relay_config_get(cfg, "publication.name"),
                .table = relay_config_get(cfg, "outbox.table"),
        };
        relay_outbox_conf_t oconf = {
                .table = rconf.table,
                .col_id = relay_config_get(cfg, "outbox.column.id"),
                .col_aggregate_type = relay_config_get(cfg, "outbox.column.aggregate_type"),
                .col_aggregate_id = relay_config_get(cfg, "outbox.column.aggregate_id"),
                .col_type = relay_config_get(cfg, "outbox.column.type"),
                .col_payload = relay_config_get(cfg, "outbox.column.payload"),
                .headers = relay_config_get(cfg, "outbox.headers"),
                .topic_template = relay_config_get(cfg, "topic.template"),
        };
        bool created;

        memset(s, 0, sizeof(*s));
        s->cfg = cfg;
        s->policy_stop = strcmp(relay_config_get(cfg, "errors.policy"), "stop") == 0;
        s->retries = relay_config_get_int(cfg, "errors.retries");
        s->backoff_ms = relay_config_get_int(cfg, "errors.backoff.ms");
        s->backoff_max_ms = relay_config_get_int(cfg, "errors.backoff.max.ms");
        s->dlq_topic = relay_config_get(cfg, "errors.dlq.topic");
        if ((rc = parse_skip_ids(s, relay_config_get(cfg, "errors.skip.ids"), err, errlen)))
                return rc;
        if ((rc = relay_outbox_new(&s->outbox, &oconf, err, errlen)))
                return rc;
        if (!(s->ack = relay_acktrack_new())) {
                relay_err_set(err, errlen, "out of memory");
                return RELAY_ENOMEM;
        }
        if ((rc = relay_producer_new(&s->prod, cfg, on_delivery, s, err, errlen)))
                return rc;
        if (first) {
                char kerr[RELAY_ERRBUF];
                const char *servers = relay_config_get(cfg, "kafka.bootstrap.servers");
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
        if ((rc = relay_repl_connect(&s->repl, &rconf, err, errlen)))
                return rc;
        int v = relay_repl_server_version(s->repl);
        if (first)
                relay_log_info("connected to PostgreSQL %d.%d, pgoutput protocol version %d", v / 10000,
                               v % 10000, relay_repl_proto_version(s->repl));

        s->status_interval_ms = relay_config_get_int(cfg, "status.interval.ms");
        int64_t wst = relay_repl_wal_sender_timeout_ms(s->repl);
        if (wst > 0 && s->status_interval_ms > wst / 2) {
                if (first)
                        relay_log_info("status.interval.ms lowered from %lld to %lld, half of the "
                                       "server's wal_sender_timeout",
                                       (long long)s->status_interval_ms, (long long)(wst / 2));
                s->status_interval_ms = wst / 2;
        }

        if ((rc = relay_repl_ensure_publication(s->repl, &created, err, errlen)))
                return rc;
        if (created)
                relay_log_info("created publication \"%s\" for table \"%s\" (inserts only)",
                               rconf.publication, rconf.table);
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
        s->last_status_ms = now_ms();
        s->streaming = true;
        return 0;
}

/* Sleep ms, waking early for a stop signal. */
static void nap(int64_t ms)
{
        int64_t end = now_ms() + ms;
        while (!stop_requested) {
                relay_notify_watchdog();
                int64_t left = end - now_ms();
                if (left <= 0)
                        break;
                poll(NULL, 0, (int)(left > 100 ? 100 : left));
        }
}

static int64_t backoff_ms(const relay_config_t *cfg, int attempt)
{
        int64_t base = relay_config_get_int(cfg, "reconnect.backoff.ms");
        int64_t max = relay_config_get_int(cfg, "reconnect.backoff.max.ms");
        int64_t d = base;
        for (int i = 0; i < attempt && d < max; i++)
                d *= 2;
        if (d > max)
                d = max;
        /* Full jitter on the upper half: replicas that failed together do
         * not come back together. */
        return d / 2 + (int64_t)((double)rand() / RAND_MAX * (double)(d / 2));
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

int relay_run(const relay_config_t *cfg)
{
        srand((unsigned)time(NULL) ^ (unsigned)getpid());

        const char *slot = relay_config_get(cfg, "slot.name");
        char err[RELAY_ERRBUF];
        bool first = true, ever_streamed = false, standby_logged = false;
        bool recreate = strcmp(relay_config_get(cfg, "slot.recreate"), "true") == 0;
        relay_lsn_t resume = 0; /* highest LSN this process confirmed, across sessions */
        int attempt = 0;

        relay_log_info("starting outbox-relay: slot \"%s\", publication \"%s\", table \"%s\"", slot,
                       relay_config_get(cfg, "publication.name"),
                       relay_config_get(cfg, "outbox.table"));
        while (!stop_requested) {
                session_t s;
                err[0] = '\0';
                int rc = session_open(&s, cfg, first, !ever_streamed, recreate, &resume, err,
                                      sizeof(err));
                if (rc == 0) {
                        if (standby_logged)
                                relay_log_info("replication slot \"%s\" is free; taking over", slot);
                        relay_log_info("streaming from replication slot \"%s\"", slot);
                        relay_notify_ready("streaming");
                        standby_logged = false;
                        ever_streamed = true;
                        rc = session_stream(&s, err, sizeof(err));
                        if (rc == 0 || rc == RELAY_EMAP) {
                                relay_notify_stopping();
                                if (rc == RELAY_EMAP)
                                        relay_log_error("%s", err);
                                session_drain(&s);
                                relay_log_info("stopped after relaying %llu events in %llu "
                                               "transactions (%llu dead-lettered, %llu skipped)",
                                               (unsigned long long)s.events,
                                               (unsigned long long)s.txns,
                                               (unsigned long long)s.dead_lettered,
                                               (unsigned long long)s.skipped);
                                session_free(&s);
                                return rc ? RELAY_EXIT_EVENT : RELAY_EXIT_OK;
                        }
                        if (s.sent_flush > resume)
                                resume = s.sent_flush;
                        if (s.sent_flush > 0)
                                attempt = 0;
                }
                session_free(&s);
                first = false;
                if (stop_requested)
                        break;
                switch (rc) {
                case RELAY_EBUSY:
                        if (!standby_logged)
                                relay_log_info("replication slot \"%s\" is active in another "
                                               "process; standing by",
                                               slot);
                        standby_logged = true;
                        relay_notify_ready("standing by: the slot is active in another process");
                        nap(STANDBY_RETRY_MS);
                        continue;
                case RELAY_ESLOTLOST:
                        if (!recreate) {
                                relay_log_fatal("%s", err);
                                return RELAY_EXIT_SLOTLOST;
                        }
                        relay_log_warning("%s; recreating it (slot.recreate = true)", err);
                        nap(backoff_ms(cfg, attempt++));
                        continue;
                case RELAY_EIO:
                case RELAY_EKAFKA:
                case RELAY_ENOMEM: {
                        int64_t d = backoff_ms(cfg, attempt++);
                        relay_log_warning("%s; retrying in %lld ms", err, (long long)d);
                        nap(d);
                        continue;
                }
                default:
                        relay_log_fatal("%s", err);
                        return exit_code_for(rc);
                }
        }
        relay_notify_stopping();
        relay_log_info("stopped");
        return RELAY_EXIT_OK;
}
