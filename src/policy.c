/*
 * policy.c - the error policy's decisions and the rejected events it must
 * remember across sessions.
 *
 * Owns the skip list, the list of rejected events (few: each costs the
 * stream a pause while it is settled, so a linear list is right) and the
 * dead-letter headers. The loop does the producing and the waiting.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/policy.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relay/lsn.h"

typedef struct rejected {
        struct rejected *next;
        relay_lsn_t txn;
        uint64_t fp; /* fingerprint() */
        int attempts;
        char cause[RELAY_ERRBUF];
} rejected_t;

struct relay_policy {
        bool stop;
        int64_t retries, backoff_ms, backoff_max_ms;
        char *dlq_topic;
        char **skip;
        size_t nskip;
        rejected_t *rejected;
        size_t nrejected;
};

int relay_policy_new(relay_policy_t **out, const relay_policy_conf_t *conf, char *err,
                     size_t errlen)
{
        relay_policy_t *p = calloc(1, sizeof(*p));
        const char *dlq = conf->dlq_topic ? conf->dlq_topic : "";
        bool oom = !p || !(p->dlq_topic = relay_dupn(dlq, strlen(dlq))) ||
                   (conf->nskip && !(p->skip = calloc(conf->nskip, sizeof(*p->skip))));
        for (size_t i = 0; !oom && i < conf->nskip; i++) {
                oom = !(p->skip[i] = relay_dupn(conf->skip_ids[i], strlen(conf->skip_ids[i])));
                p->nskip += !oom;
        }
        if (oom) {
                relay_policy_free(p);
                return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
        }
        p->stop = conf->stop;
        p->retries = conf->retries;
        p->backoff_ms = conf->backoff_ms;
        p->backoff_max_ms = conf->backoff_max_ms;
        *out = p;
        return 0;
}

void relay_policy_free(relay_policy_t *p)
{
        if (!p)
                return;
        for (size_t i = 0; i < p->nskip; i++)
                free(p->skip[i]);
        free(p->skip);
        while (p->rejected) {
                rejected_t *r = p->rejected;
                p->rejected = r->next;
                free(r);
        }
        free(p->dlq_topic);
        free(p);
}

bool relay_policy_stops(const relay_policy_t *p)
{
        return p->stop;
}

const char *relay_policy_dlq_topic(const relay_policy_t *p)
{
        return p->dlq_topic;
}

bool relay_policy_skip(const relay_policy_t *p, const char *id, size_t len)
{
        for (size_t i = 0; id && i < p->nskip; i++)
                if (strlen(p->skip[i]) == len && memcmp(p->skip[i], id, len) == 0)
                        return true;
        return false;
}

/* FNV-1a over len bytes, continuing from h. */
static uint64_t fnv(uint64_t h, const void *data, size_t len)
{
        const unsigned char *b = data;
        for (size_t i = 0; i < len; i++)
                h = (h ^ b[i]) * UINT64_C(1099511628211);
        return h;
}

/* Bytes, prefixed by their length: "ab" + "c" differs from "a" + "bc". */
static uint64_t fnv_field(uint64_t h, const void *data, size_t len)
{
        uint64_t n = data ? len : 0;
        h = fnv(h, &n, sizeof(n));
        return data ? fnv(h, data, len) : h;
}

/*
 * What tells a refused event apart from the others of its transaction:
 * its topic, key, value and headers (the id among them) as they were
 * produced, which a delivery report hands back byte for byte, whatever a
 * profile made of them. Not the id alone: events of one transaction may
 * share one (0157), and a report finds the id only inside its header,
 * which a profile may have encoded (0159). Not the timestamp (librdkafka
 * puts its own clock in place of 0) nor the partition. NULL and empty are
 * one here: a collision only makes two events share their attempts.
 */
static uint64_t fingerprint(const relay_event_t *ev)
{
        uint64_t h = UINT64_C(14695981039346656037);
        const char *topic = ev->topic ? ev->topic : "";
        h = fnv_field(h, topic, strlen(topic));
        h = fnv_field(h, ev->key, ev->key_len);
        h = fnv_field(h, ev->value, ev->value_len);
        for (size_t i = 0; i < ev->nheaders; i++) {
                const relay_header_t *hd = &ev->headers[i];
                h = fnv_field(h, hd->name, hd->name ? strlen(hd->name) : 0);
                h = fnv_field(h, hd->value, hd->len);
        }
        return h;
}

/* From the list link pp, the link that points at ev's entry of txn, or at
 * the list's NULL end. The fingerprint is computed only when an entry of
 * txn exists, so the common case (no refusal in the transaction) costs a
 * compare per entry. */
static rejected_t **find(rejected_t **pp, relay_lsn_t txn, const relay_event_t *ev)
{
        bool have_fp = false;
        uint64_t fp = 0;
        for (; *pp; pp = &(*pp)->next) {
                if ((*pp)->txn != txn)
                        continue;
                if (!have_fp) {
                        fp = fingerprint(ev);
                        have_fp = true;
                }
                if ((*pp)->fp == fp)
                        break;
        }
        return pp;
}

int relay_policy_rejected(relay_policy_t *p, relay_lsn_t txn, const relay_event_t *ev,
                          const char *cause)
{
        rejected_t **pp = find(&p->rejected, txn, ev);
        rejected_t *r = *pp;
        if (!r) {
                if (!(r = calloc(1, sizeof(*r))))
                        return RELAY_ENOMEM;
                r->txn = txn;
                r->fp = fingerprint(ev);
                *pp = r;
                p->nrejected++;
        }
        r->attempts++;
        relay_err_set(r->cause, sizeof(r->cause), "%s", cause ? cause : "");
        return r->attempts;
}

int relay_policy_attempts(const relay_policy_t *p, relay_lsn_t txn, const relay_event_t *ev,
                          const char **cause)
{
        rejected_t *head = p->rejected;
        const rejected_t *r = *find(&head, txn, ev);
        if (!r)
                return 0;
        if (cause)
                *cause = r->cause;
        return r->attempts;
}

void relay_policy_forget_txn(relay_policy_t *p, relay_lsn_t txn)
{
        rejected_t **pp = &p->rejected;
        while (*pp) {
                rejected_t *r = *pp;
                if (r->txn != txn) {
                        pp = &r->next;
                        continue;
                }
                *pp = r->next;
                free(r);
                p->nrejected--;
        }
}

size_t relay_policy_pending(const relay_policy_t *p)
{
        return p->nrejected;
}

relay_policy_action_t relay_policy_next(const relay_policy_t *p, int attempts, int64_t *wait_ms)
{
        *wait_ms = 0;
        if (attempts <= 1)
                return RELAY_POLICY_RESEND; /* alone, at once: was it this event? */
        if (p->stop)
                return RELAY_POLICY_STOP;
        int64_t counted = attempts - 1; /* rejections of the event alone */
        if (counted > p->retries)
                return RELAY_POLICY_DEAD_LETTER;
        int64_t d = p->backoff_ms;
        for (int64_t i = 1; i < counted && d < p->backoff_max_ms; i++)
                d *= 2;
        *wait_ms = d < p->backoff_max_ms ? d : p->backoff_max_ms;
        return RELAY_POLICY_RESEND;
}

int relay_policy_dead_letter(const relay_policy_t *p, const relay_event_t *ev, relay_lsn_t lsn,
                             int64_t commit_ms, const char *cause, int attempts,
                             relay_policy_dlq_t *s, relay_event_t *out, char *err, size_t errlen)
{
        if (ev->nheaders + RELAY_EVENT_DLQ_HEADERS > RELAY_EVENT_MAX_WIRE_HEADERS) {
                relay_err_set(err, errlen,
                              "event has %zu headers; a dead-letter copy can hold at most %d "
                              "besides its five error headers",
                              ev->nheaders, RELAY_EVENT_MAX_HEADERS);
                return RELAY_EINVAL;
        }
        size_t n = ev->nheaders;
        if (n)
                memcpy(s->headers, ev->headers, n * sizeof(s->headers[0]));
        relay_lsn_format(lsn, s->lsn);
        snprintf(s->commit_time, sizeof(s->commit_time), "%lld", (long long)commit_ms);
        snprintf(s->attempts, sizeof(s->attempts), "%d", attempts);
        relay_err_set(s->cause, sizeof(s->cause), "%s", cause ? cause : "");
        const char *topic = ev->topic ? ev->topic : "";
        s->headers[n++] = (relay_header_t){"outbox.error.message", s->cause, strlen(s->cause)};
        s->headers[n++] = (relay_header_t){"outbox.error.topic", topic, strlen(topic)};
        s->headers[n++] = (relay_header_t){"outbox.error.lsn", s->lsn, strlen(s->lsn)};
        s->headers[n++] =
                (relay_header_t){"outbox.error.commit.time", s->commit_time, strlen(s->commit_time)};
        s->headers[n++] = (relay_header_t){"outbox.error.attempts", s->attempts, strlen(s->attempts)};
        *out = *ev;
        out->topic = p->dlq_topic;
        out->has_partition = false; /* the dead-letter topic has partitions of its own */
        out->headers = s->headers;
        out->nheaders = n;
        return 0;
}
