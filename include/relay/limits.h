/*
 * limits.h - what Kafka will accept: the exact size of an event as a record,
 * and each topic's record-batch limit (max.message.bytes), cached.
 *
 * Kafka applies a topic's max.message.bytes to a whole record batch and
 * librdkafka never splits a refused batch, so one oversized event used to
 * take its neighbours down with it. Knowing the limit before producing lets
 * the relay treat exactly the event that cannot fit as poison, and keep
 * batches (the producer's batch.size) under the smallest limit in use.
 *
 * The cache lives for the whole process (sessions come and go); it learns
 * limits from the caller, who asks Kafka (relay_producer_topic_limit()).
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_LIMITS_H
#define RELAY_LIMITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "relay/common.h"
#include "relay/event.h"

typedef struct relay_limits relay_limits_t;

/** @brief An event's sizes as Kafka and librdkafka count them. */
typedef struct {
        /* Bytes of a Kafka record batch (magic v2, uncompressed) holding the
         * event alone: the 61-byte batch header plus the record with its
         * varints. The broker compares this with the topic's
         * max.message.bytes; with compression the real batch is smaller, so
         * the check is conservative. */
        size_t record;
        /* What librdkafka compares with its own message.max.bytes when the
         * message is produced (its worst-case record overhead plus key,
         * value and serialized headers): larger fails at once with
         * MSG_SIZE_TOO_LARGE. */
        size_t local;
} relay_limits_sizes_t;

/** @brief Both sizes of ev, its headers measured once. */
relay_limits_sizes_t relay_limits_sizes(const relay_event_t *ev);

/** @brief New, empty cache; NULL when out of memory. Caller frees. */
relay_limits_t *relay_limits_new(void);

/** @brief Free; accepts NULL. */
void relay_limits_free(relay_limits_t *l);

typedef enum {
        RELAY_LIMIT_MISSING, /* never asked, or expired: ask Kafka */
        RELAY_LIMIT_KNOWN,   /* *bytes holds the limit */
        RELAY_LIMIT_UNKNOWN, /* Kafka could not tell (no permission, old broker),
                              * or asking is paused after a timeout
                              * (relay_limits_timed_out()): do not check */
} relay_limit_state_t;

/**
 * @brief The cached limit of topic (borrowed) at time now_ms. While asking
 *        is paused, an expired limit is still RELAY_LIMIT_KNOWN and a
 *        missing one RELAY_LIMIT_UNKNOWN.
 */
relay_limit_state_t relay_limits_get(const relay_limits_t *l, const char *topic, int64_t now_ms,
                                     int64_t *bytes);

/**
 * @brief Remember topic's limit (bytes > 0) or that it is unknown (bytes
 *        <= 0) until now_ms + ttl_ms: Kafka answered. The topic name is
 *        copied.
 * @returns 0 or RELAY_ENOMEM.
 */
int relay_limits_put(relay_limits_t *l, const char *topic, int64_t bytes, int64_t now_ms,
                     int64_t ttl_ms) RELAY_MUST_CHECK;

/**
 * @brief Kafka did not answer a request for a limit in time: ask for no
 *        topic's limit until now_ms + a backoff of first_ms after an
 *        answered request, doubling with each timeout in a row up to max_ms
 *        (an answer, relay_limits_put(), starts it over). Paused for every
 *        topic, as the cluster (or its controller) is what is slow: asking
 *        for each topic in turn would make the caller wait once per topic.
 * @returns the backoff (ms).
 */
int64_t relay_limits_timed_out(relay_limits_t *l, int64_t now_ms, int64_t first_ms,
                               int64_t max_ms);

/** @brief Forget topic's limit (Kafka refused a batch as too large: ask again). */
void relay_limits_forget(relay_limits_t *l, const char *topic);

/**
 * @brief Let topic's limit expire at now_ms: the next relay_limits_get()
 *        says RELAY_LIMIT_MISSING (ask Kafka again), or, while asking is
 *        paused, still RELAY_LIMIT_KNOWN with the old limit. For a limit
 *        read earlier that an event exceeds: it may have been raised since.
 */
void relay_limits_expire(relay_limits_t *l, const char *topic, int64_t now_ms);

#endif
