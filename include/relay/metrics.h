/*
 * metrics.h - the relay's figures for /metrics, /healthz and /readyz, and the
 * catch-up progress report.
 *
 * Two sides. The main loop owns the live figures and is the only writer:
 * every relay_metrics_* call below except relay_metrics_render() and
 * relay_metrics_health() belongs to the main loop's thread and takes no
 * lock. At most every RELAY_METRICS_PUBLISH_MS (relay_metrics_publish())
 * the loop copies them into a snapshot under a mutex; the HTTP thread only
 * ever reads that snapshot (and /proc), so a slow scrape never touches
 * libpq, librdkafka or the loop's state.
 *
 * Topic labels are bounded: the first RELAY_METRICS_MAX_TOPICS topics get
 * their own label, every later one is counted as topic="other".
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_METRICS_H
#define RELAY_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "relay/common.h"
#include "relay/producer.h"

typedef struct relay_metrics relay_metrics_t;

#define RELAY_METRICS_MAX_TOPICS 100
#define RELAY_METRICS_PUBLISH_MS 250
/* The catch-up report: how often, and how far behind counts as catching up. */
#define RELAY_METRICS_CATCHUP_LOG_MS 10000
#define RELAY_METRICS_CATCHUP_BYTES (16 * 1024 * 1024)

/** @brief What the relay is doing, one gauge per state. */
typedef enum {
        RELAY_STATE_STARTING = 0,
        RELAY_STATE_STREAMING,
        RELAY_STATE_STANDBY,  /* the slot is active in another process */
        RELAY_STATE_BACKOFF,  /* waiting to retry after an error */
        RELAY_STATE_STOPPING,
        RELAY_STATE_COUNT
} relay_state_t;

/** @brief Gauges the loop samples when a publication is due (relay_metrics_due()). */
typedef struct {
        relay_lsn_t received;      /* highest commit end or keepalive WAL end received */
        relay_lsn_t confirmed;     /* flush LSN of the last status update */
        relay_lsn_t keepalive_end; /* the walsender's position from its keepalives */
        uint64_t inflight_events;  /* produced, not yet acknowledged */
        uint64_t inflight_txns;    /* received whole, not yet confirmed (filled in by
                                    * relay_metrics_publish() itself) */
        bool held_back;            /* an event is being settled in place: nothing after it
                                    * is produced meanwhile */
} relay_metrics_sample_t;

/** @brief The slot as pg_replication_slots shows it (slotmon.h). */
typedef struct {
        bool known;                /* false until the first answer */
        char wal_status[16];       /* reserved, extended, unreserved, lost; "" when NULL */
        bool safe_wal_size_known;  /* false when NULL (max_slot_wal_keep_size = -1) */
        int64_t safe_wal_size;     /* bytes */
        relay_lsn_t server_end;    /* pg_current_wal_lsn() (replay LSN on a standby) */
        bool active;
        char unpublished[160];     /* "schema.table": the first outbox table whose inserts the
                                    * publication does not send under its name; "" when none */
} relay_slot_info_t;

/** @brief One catch-up report (relay_metrics_catchup()). */
typedef struct {
        double events_per_s;
        double wal_bytes_per_s; /* WAL received per second */
        int64_t lag_bytes;      /* server WAL end minus received */
        double eta_s;           /* < 0 when the lag is not shrinking */
        bool done;              /* this report ends a catch-up */
} relay_catchup_t;

/**
 * @brief New metrics (caller frees with relay_metrics_free()); NULL when out
 *        of memory. Records the process start time.
 */
relay_metrics_t *relay_metrics_new(void);

/** @brief Free; accepts NULL. The HTTP server using m must be stopped first. */
void relay_metrics_free(relay_metrics_t *m);

/* --- main loop side: counters ------------------------------------------ */

/** @brief Kafka acknowledged one event of topic (borrowed) of bytes (key + value). */
void relay_metrics_acked(relay_metrics_t *m, const char *topic, size_t bytes);

/** @brief A delivery report with an error, by the producer's class. */
void relay_metrics_delivery_error(relay_metrics_t *m, relay_dr_class_t cls);

/** @brief A transaction was received whole: its end LSN and commit time
 *         (PostgreSQL epoch microseconds), for the lag and the latency histogram. */
void relay_metrics_commit(relay_metrics_t *m, relay_lsn_t end_lsn, int64_t commit_ts);

/** @brief An event was produced to Kafka (for the events/s of the catch-up report). */
void relay_metrics_produced(relay_metrics_t *m);

/** @brief A rejected event is sent again alone. */
void relay_metrics_retry(relay_metrics_t *m);

/** @brief An event was written to the dead-letter topic. */
void relay_metrics_dead_lettered(relay_metrics_t *m);

/** @brief An event was skipped (errors.skip.ids). */
void relay_metrics_skipped(relay_metrics_t *m);

/** @brief A session ended with rc (a RELAY_E* code): counted by cause; a
 *         stop (0 or RELAY_ESTOPPED) is no error and is not counted. */
void relay_metrics_session_end(relay_metrics_t *m, int rc);

/** @brief The relay's state changed. */
void relay_metrics_state(relay_metrics_t *m, relay_state_t st);

/** @brief The latest librdkafka statistics (producer.h), copied. */
void relay_metrics_kafka(relay_metrics_t *m, const relay_kafka_stats_t *ks);

/** @brief The latest answer about the slot, copied. */
void relay_metrics_slot(relay_metrics_t *m, const relay_slot_info_t *si);

/* --- main loop side: the turn ------------------------------------------ */

/**
 * @brief The loop turned at now_ms (monotonic) and confirmed up to
 *        confirmable: feeds /healthz and the commit-to-ack histogram. Cheap:
 *        call it on every turn. Returns true when a publication is due:
 *        then sample the gauges and call relay_metrics_publish().
 */
bool relay_metrics_turn(relay_metrics_t *m, int64_t now_ms, relay_lsn_t confirmable);

/** @brief The loop is alive but not streaming (waiting to retry, standing by):
 *         feeds /healthz, publishing when due. */
void relay_metrics_alive(relay_metrics_t *m, int64_t now_ms);

/** @brief Copy the live figures and sample into the snapshot (takes the mutex). */
void relay_metrics_publish(relay_metrics_t *m, const relay_metrics_sample_t *sample);

/**
 * @brief Is a catch-up report due at now_ms (monotonic)? True (and *out
 *        filled) every RELAY_METRICS_CATCHUP_LOG_MS while the server's WAL
 *        end is more than RELAY_METRICS_CATCHUP_BYTES ahead of what was
 *        received, and once more when that ends (out->done). The same
 *        figures are published as gauges.
 */
bool relay_metrics_catchup(relay_metrics_t *m, int64_t now_ms, relay_catchup_t *out);

/* --- HTTP thread side ---------------------------------------------------- */

/**
 * @brief The Prometheus text exposition (version 0.0.4) of the latest
 *        snapshot and of /proc/self. Returns a malloc'd NUL-terminated
 *        string (caller frees) and its length in *len; NULL when out of memory.
 *        Thread-safe.
 */
char *relay_metrics_render(relay_metrics_t *m, size_t *len);

/**
 * @brief Liveness (ready = false) or readiness (ready = true), with a short
 *        JSON object saying why written into body. Liveness: the loop turned
 *        within stall_ms. Readiness: alive, and streaming with a Kafka broker
 *        up (per the latest statistics), or standing by. Thread-safe.
 */
bool relay_metrics_health(relay_metrics_t *m, bool ready, int64_t stall_ms, char *body,
                          size_t bodylen);

#endif
