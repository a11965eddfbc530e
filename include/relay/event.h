/*
 * event.h - the unit the relay delivers: one Kafka message built from one
 * outbox row (topic, key, value, headers, timestamp).
 *
 * Its own header so the Kafka side (producer, error policy) works with
 * events without including the replication decoder: the outbox mapping
 * (outbox.h) makes them, the producer sends them.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_EVENT_H
#define RELAY_EVENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Most headers one event may carry: id, type (or Debezium's four context
 * headers), the outbox.headers columns and header placements together. The mapping refuses a row that would need more (RELAY_EMAP), so
 * whoever copies an event's headers can size a fixed array by this.
 */
#define RELAY_EVENT_MAX_HEADERS 64

/* Most headers a message on the wire carries: an event's own plus the five
 * a dead-letter copy adds (policy.h). */
#define RELAY_EVENT_DLQ_HEADERS 5
#define RELAY_EVENT_MAX_WIRE_HEADERS (RELAY_EVENT_MAX_HEADERS + RELAY_EVENT_DLQ_HEADERS)

/** @brief One Kafka header. */
typedef struct {
        const char *name;  /* NUL-terminated */
        const char *value; /* not NUL-terminated; NULL for SQL NULL */
        size_t len;
} relay_header_t;

/**
 * @brief One event, ready to produce. Who fills it says how long its
 *        pointers live (relay_outbox_map(): until the next mapping or until
 *        the message buffer is released).
 */
typedef struct {
        const char *topic; /* NUL-terminated */
        const char *key;
        size_t key_len;
        const char *value; /* NULL when the payload is SQL NULL */
        size_t value_len;
        const char *id; /* the event id, for messages and the id header */
        size_t id_len;
        const relay_header_t *headers; /* at most RELAY_EVENT_MAX_HEADERS */
        size_t nheaders;
        int64_t timestamp_ms; /* commit time, ms since the Unix epoch */
        bool has_partition;   /* a partition column chose it (Debezium's partition placement) */
        int32_t partition;    /* when has_partition; else the partitioner hashes the key */
} relay_event_t;

/** @brief printf arguments for "%.*s": an event id (at most 64 bytes of it),
 *         or "<unknown>" when it has none. */
#define RELAY_ID_ARGS(id, len) \
        (int)((id) ? ((len) > 64 ? 64 : (len)) : 9), ((id) ? (const char *)(id) : "<unknown>")

#endif
