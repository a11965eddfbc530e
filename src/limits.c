/*
 * limits.c - record sizes as Kafka counts them, and the per-topic cache of
 * max.message.bytes.
 *
 * Owns a small chained hash table keyed by topic name: every event looks its
 * topic up, so the lookup must cost a hash and a compare, not a scan.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/limits.h"

#include <stdlib.h>
#include <string.h>

/* Kafka's v2 record batch header: baseOffset 8, batchLength 4,
 * partitionLeaderEpoch 4, magic 1, crc 4, attributes 2, lastOffsetDelta 4,
 * firstTimestamp 8, maxTimestamp 8, producerId 8, producerEpoch 2,
 * baseSequence 4, recordCount 4. */
#define BATCH_HEADER 61
/* librdkafka's RD_KAFKAP_MESSAGE_V2_MAX_OVERHEAD: varints at their widest
 * (length 5, attributes 1, timestamp delta 10, offset delta 5, key length 5,
 * value length 5, header count 5). */
#define LOCAL_OVERHEAD 36

/* Bytes of a zig-zag varint, as Kafka writes record fields. */
static size_t varint_size(int64_t v)
{
        uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
        size_t n = 1;
        while (z >= 0x80) {
                z >>= 7;
                n++;
        }
        return n;
}

static size_t headers_size(const relay_event_t *ev)
{
        size_t n = 0;
        for (size_t i = 0; i < ev->nheaders; i++) {
                size_t nl = strlen(ev->headers[i].name);
                size_t vl = ev->headers[i].value ? ev->headers[i].len : 0;
                n += varint_size((int64_t)nl) + nl + varint_size((int64_t)vl) + vl;
        }
        return n;
}

/*
 * Record (magic v2), alone in its batch so both deltas are 0:
 *   length varint | attributes int8 | timestampDelta varlong (0) |
 *   offsetDelta varint (0) | keyLength varint (-1: null) | key |
 *   valueLength varint (-1: null) | value | headerCount varint |
 *   headers (keyLength varint | key | valueLength varint | value)*
 */
relay_limits_sizes_t relay_limits_sizes(const relay_event_t *ev)
{
        size_t hdrs = headers_size(ev);
        size_t kv = (ev->key ? ev->key_len : 0) + (ev->value ? ev->value_len : 0);
        size_t body = 1 + 1 + 1 + kv;
        body += ev->key ? varint_size((int64_t)ev->key_len) : 1;
        body += ev->value ? varint_size((int64_t)ev->value_len) : 1;
        body += varint_size((int64_t)ev->nheaders) + hdrs;
        relay_limits_sizes_t z = {
                .record = BATCH_HEADER + varint_size((int64_t)body) + body,
                .local = LOCAL_OVERHEAD + kv + hdrs,
        };
        return z;
}

typedef struct entry {
        struct entry *next;
        uint32_t hash;
        int64_t bytes; /* <= 0: unknown */
        int64_t expires_ms;
        char topic[]; /* NUL-terminated */
} entry_t;

struct relay_limits {
        entry_t **buckets;
        size_t nbuckets; /* a power of two */
        size_t count;
        /* After a request for a limit timed out: none is asked for before
         * paused_until_ms; backoff_ms is the last pause (0: the last request
         * was answered). */
        int64_t paused_until_ms;
        int64_t backoff_ms;
};

static uint32_t hash_str(const char *s)
{
        uint32_t h = 2166136261u; /* FNV-1a */
        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 16777619u;
        return h;
}

relay_limits_t *relay_limits_new(void)
{
        relay_limits_t *l = calloc(1, sizeof(*l));
        if (!l)
                return NULL;
        l->nbuckets = 64;
        l->buckets = calloc(l->nbuckets, sizeof(*l->buckets));
        if (!l->buckets) {
                free(l);
                return NULL;
        }
        return l;
}

void relay_limits_free(relay_limits_t *l)
{
        if (!l)
                return;
        for (size_t i = 0; i < l->nbuckets; i++) {
                entry_t *e = l->buckets[i];
                while (e) {
                        entry_t *next = e->next;
                        free(e);
                        e = next;
                }
        }
        free(l->buckets);
        free(l);
}

static entry_t **find(const relay_limits_t *l, const char *topic, uint32_t h)
{
        entry_t **pp = &l->buckets[h & (l->nbuckets - 1)];
        for (; *pp; pp = &(*pp)->next)
                if ((*pp)->hash == h && strcmp((*pp)->topic, topic) == 0)
                        return pp;
        return pp;
}

relay_limit_state_t relay_limits_get(const relay_limits_t *l, const char *topic, int64_t now_ms,
                                     int64_t *bytes)
{
        entry_t *e = *find(l, topic, hash_str(topic));
        /* While asking is paused, an expired limit is still the best
         * guess: a topic's limit seldom changes. */
        if ((!e || now_ms >= e->expires_ms) && now_ms >= l->paused_until_ms)
                return RELAY_LIMIT_MISSING;
        if (!e || e->bytes <= 0)
                return RELAY_LIMIT_UNKNOWN;
        *bytes = e->bytes;
        return RELAY_LIMIT_KNOWN;
}

static void grow(relay_limits_t *l)
{
        size_t n = l->nbuckets * 2;
        entry_t **b = calloc(n, sizeof(*b));
        if (!b)
                return; /* a longer chain, not an error */
        for (size_t i = 0; i < l->nbuckets; i++) {
                entry_t *e = l->buckets[i];
                while (e) {
                        entry_t *next = e->next;
                        e->next = b[e->hash & (n - 1)];
                        b[e->hash & (n - 1)] = e;
                        e = next;
                }
        }
        free(l->buckets);
        l->buckets = b;
        l->nbuckets = n;
}

int relay_limits_put(relay_limits_t *l, const char *topic, int64_t bytes, int64_t now_ms,
                     int64_t ttl_ms)
{
        uint32_t h = hash_str(topic);
        entry_t **pp = find(l, topic, h);
        if (!*pp) {
                size_t len = strlen(topic);
                entry_t *e = calloc(1, sizeof(*e) + len + 1);
                if (!e)
                        return RELAY_ENOMEM;
                memcpy(e->topic, topic, len + 1);
                e->hash = h;
                *pp = e;
                if (++l->count > l->nbuckets)
                        grow(l);
                pp = find(l, topic, h);
        }
        (*pp)->bytes = bytes;
        (*pp)->expires_ms = now_ms + ttl_ms;
        l->backoff_ms = 0;
        l->paused_until_ms = 0;
        return 0;
}

int64_t relay_limits_timed_out(relay_limits_t *l, int64_t now_ms, int64_t first_ms,
                               int64_t max_ms)
{
        int64_t b = l->backoff_ms > 0 ? l->backoff_ms * 2 : first_ms;
        if (b > max_ms || b < l->backoff_ms)
                b = max_ms;
        l->backoff_ms = b;
        l->paused_until_ms = now_ms + b;
        return b;
}

void relay_limits_forget(relay_limits_t *l, const char *topic)
{
        entry_t **pp = find(l, topic, hash_str(topic));
        entry_t *e = *pp;
        if (!e)
                return;
        *pp = e->next;
        free(e);
        l->count--;
}

void relay_limits_expire(relay_limits_t *l, const char *topic, int64_t now_ms)
{
        entry_t *e = *find(l, topic, hash_str(topic));
        if (e && e->expires_ms > now_ms)
                e->expires_ms = now_ms;
}
