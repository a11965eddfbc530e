/*
 * producer.h - the Kafka side: one idempotent librdkafka producer, its
 * delivery reports, its fatal-error latch and the topic limits it can ask
 * the cluster for.
 *
 * Delivery reports are served inside relay_producer_poll() on the caller's
 * thread and handed to the callback given at creation, with the opaque given
 * to relay_producer_send(). Any delivery error means the relay must not
 * confirm past that message: the caller tears the session down and restarts
 * from the slot, or (a rejection) settles the event in place.
 *
 * The producer never has two requests outstanding on one broker connection
 * and stops at the first batch a broker refuses for good
 * (max.in.flight.requests.per.connection=1, enable.gapless.guarantee=true):
 * librdkafka's idempotent producer otherwise reports a failed batch as
 * delivered when a later one succeeds (its "implicit ack"), and keeps
 * sending an aggregate's later events after a refused one. A report that
 * says delivered without an offset is that hole and is a failure here.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_PRODUCER_H
#define RELAY_PRODUCER_H

#include <stddef.h>
#include <stdint.h>

#include "relay/common.h"
#include "relay/config.h"
#include "relay/event.h"

typedef struct relay_producer relay_producer_t;

/**
 * @brief Each topic's partition count as producers saw it, and the
 *        partitions said stalled whose end was not said yet, kept by the
 *        caller across producers (a session's replacement, the next
 *        session's), so growth between two producers is reported as growth
 *        within one is, and a stall said by a producer that a failed
 *        session freed is said to end by the next one. NULL when out of
 *        memory. Free with relay_producer_parts_free(), which accepts NULL.
 */
typedef struct relay_producer_parts relay_producer_parts_t;
relay_producer_parts_t *relay_producer_parts_new(void);
void relay_producer_parts_free(relay_producer_parts_t *pp);

/**
 * @brief What a failed delivery means. X(class, label): the label is its
 *        name in /metrics (relay_delivery_errors_total{class=...}), kept
 *        in the same list so that a new class cannot go without one.
 */
#define RELAY_DR_CLASSES(X)                                                                    \
        X(RELAY_DR_OK, "ok")                                                                   \
        /* Kafka refuses this event for good (authorization, policy, invalid record or         \
         * timestamp) */                                                                       \
        X(RELAY_DR_REJECTED, "rejected")                                                       \
        /* refused as too large: the event, or its batch */                                    \
        X(RELAY_DR_TOO_LARGE, "too_large")                                                     \
        /* "delivered" without an offset: never stored */                                      \
        X(RELAY_DR_IMPLICIT_ACK, "implicit_ack")                                               \
        /* the topic does not exist (yet) */                                                   \
        X(RELAY_DR_UNKNOWN_TOPIC, "unknown_topic")                                             \
        /* never sent: purged from the queue when the producer stopped (librdkafka purges     \
         * it at a fatal error, e.g. after a refused batch) or was closed; a consequence of    \
         * another failure, never its cause */                                                 \
        X(RELAY_DR_PURGED, "purged")                                                           \
        /* anything else: broker down, timeouts */                                             \
        X(RELAY_DR_TRANSIENT, "transient")

typedef enum {
#define RELAY_DR_CLASS_ENUM(cls, label) cls,
        RELAY_DR_CLASSES(RELAY_DR_CLASS_ENUM)
#undef RELAY_DR_CLASS_ENUM
} relay_dr_class_t;

/** @brief One delivery report. Everything is borrowed for the callback only. */
typedef struct {
        int err;            /* 0: acknowledged; RELAY_EREJECTED: Kafka refuses this
                             * event for good (cls says why); RELAY_EKAFKA: any
                             * other failure (retry the session from the slot) */
        relay_dr_class_t cls;
        const char *errstr; /* on error: the broker's or client's reason */
        const relay_event_t *event; /* on error: the message as it was produced
                                     * (topic, key, value, headers, timestamp,
                                     * and its id when the id travelled as
                                     * one of its headers); NULL on success */
        const char *topic;  /* on success: the topic (for the metrics) */
        size_t bytes;       /* on success: key + value bytes */
} relay_delivery_t;
/** @brief Brokers kept from one statistics report (the first ones listed). */
#define RELAY_KAFKA_STATS_BROKERS 16

/**
 * @brief librdkafka's statistics (statistics.interval.ms, 5000 unless
 *        kafka.statistics.interval.ms says otherwise; 0 turns them off)
 *        reduced to what /metrics shows. Times in seconds.
 */
typedef struct {
        bool known;           /* false until the first report */
        int64_t msg_cnt;      /* messages in the producer's queues */
        int64_t msg_size;     /* their bytes */
        size_t nbrokers;
        int brokers_up;       /* brokers (not bootstrap entries) in state UP */
        int64_t partitions_stalled; /* partitions said stalled (relay_producer_take_note())
                                     * and not acknowledging again */
        struct {
                char name[128];   /* "host:port/id" as librdkafka names it */
                bool up;
                double rtt_avg, rtt_p99; /* request round-trip time */
                double rtt_min;       /* the shortest request round trip */
                int64_t rtt_cnt;      /* requests answered (rtt_* are 0 without any) */
                int64_t outbuf_cnt;   /* requests waiting to be sent */
                int64_t waitresp_cnt; /* requests sent, waiting for a response */
        } broker[RELAY_KAFKA_STATS_BROKERS];
} relay_kafka_stats_t;

/*
 * tag: the caller's number for the message (below RELAY_PRODUCER_TAG_MAX),
 * given to relay_producer_send() and handed back with its report.
 */
typedef void relay_producer_dr_fn(void *ctx, uint64_t tag, const relay_delivery_t *d);

#define RELAY_PRODUCER_TAG_MAX (UINT64_C(1) << 56)


/**
 * @brief Create the producer: our defaults (enable.idempotence=true,
 *        max.in.flight.requests.per.connection=1,
 *        enable.gapless.guarantee=true, partitioner=murmur2_random,
 *        linger.ms=5, or linger_ms when > 0 (relay_producer_linger_for_rtt()),
 *        queue.buffering.max.messages=10000,
 *        client.id=outbox-relay), then every kafka.* key of cfg (borrowed)
 *        on top. With kafka.statistics.interval.ms set, librdkafka's
 *        statistics are logged at debug level. max_batch > 0 lowers batch.size to at most that many bytes
 *        (the smallest topic limit in use). parts (borrowed, must outlive
 *        the producer; NULL: no watch) holds the topics' partition counts
 *        that the partition-growth note (relay_producer_take_note()) compares
 *        with and updates.
 * @returns 0 and *out (caller frees with relay_producer_free()); RELAY_EINVAL
 *          when librdkafka rejects a property or enable.idempotence is
 *          turned off (the message names the key and the fix); RELAY_ENOMEM;
 *          RELAY_EIO when the wake-up pipe cannot be made.
 */
int relay_producer_new(relay_producer_t **out, const relay_config_t *cfg, int64_t max_batch,
                       int linger_ms, const char *transactional_id,
                       relay_producer_parts_t *parts, relay_producer_dr_fn *dr, void *ctx,
                       char *err, size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief The broker's round trip: the shortest of tries Metadata requests
 *        (ask once relay_producer_ping() succeeded, so the connection is
 *        up and not counted), in ms.
 * @returns 0 and *rtt_ms; RELAY_EAGAIN when a request timed out;
 *          RELAY_EKAFKA on any other failure.
 */
int relay_producer_rtt(relay_producer_t *p, int tries, int timeout_ms, double *rtt_ms, char *err,
                       size_t errlen) RELAY_MUST_CHECK;

/** @brief linger.ms for a broker rtt_ms away: the round trip (at most 100)
 *         from 10 ms on, 5 below. */
int relay_producer_linger_for_rtt(double rtt_ms);

/*
 * The round trip as it goes on, from the statistics reports: the broker
 * may move (a failover to another zone, a new route) after the start's
 * measurement. Each report covers one statistics.interval.ms window. Its
 * round trip is the shortest request round trip (rtt.min) of the brokers
 * that answered any, the least over them. librdkafka times a request from
 * its last byte written to its response read, so the wait behind the
 * request in flight is not in it, but the broker's own time is (an
 * acks=all Produce of 1 MB took it 20-40 ms on a loaded machine): the
 * average follows what was sent, the minimum the link. A window counts
 * only when the caller calls it steady (following, not catching up: then
 * every request is a full batch and even the minimum is the broker's
 * time).
 */
typedef struct relay_producer_rtt_watch relay_producer_rtt_watch_t;

/** @brief Windows in a row that must ask for the same change. */
#define RELAY_PRODUCER_RTT_WINDOWS 3

/** @brief A watch with no window seen; NULL when out of memory. Free with
 *         relay_producer_rtt_watch_free(), which accepts NULL. */
relay_producer_rtt_watch_t *relay_producer_rtt_watch_new(void);
void relay_producer_rtt_watch_free(relay_producer_rtt_watch_t *w);

/**
 * @brief One statistics report (st, borrowed) against the linger.ms in
 *        force (linger_ms).
 * @returns the linger.ms for the round trip now (relay_producer_linger_for_rtt()
 *          of the middle of the last RELAY_PRODUCER_RTT_WINDOWS windows' round
 *          trips) once that many steady windows in a row each asked for one
 *          clearly on the same side of linger_ms (twice or half, and 10 ms
 *          apart), with that round trip in *rtt_ms; then the watch starts
 *          over. 0 otherwise: a window without requests is passed over, one
 *          not steady or not asking for that change starts the count again.
 */
int relay_producer_rtt_watch_report(relay_producer_rtt_watch_t *w, const relay_kafka_stats_t *st,
                                    bool steady, int linger_ms, double *rtt_ms);

/** @brief linger.ms as this producer was configured. */
int relay_producer_linger_ms(const relay_producer_t *p);

/** @brief True when the configuration left linger.ms to the relay (neither
 *         kafka.linger.ms nor kafka.queue.buffering.max.ms was set). */
bool relay_producer_linger_auto(const relay_producer_t *p);

/**
 * @brief Whether a producer with linger_ms (relay_producer_linger_for_rtt())
 *        may replace this one now: linger_ms > 0, the configuration left
 *        linger.ms to the relay, this producer's differs, and at most
 *        max_queued messages wait in librdkafka's queue (a catch-up at a
 *        distance keeps it full; while following it runs low).
 */
bool relay_producer_may_relinger(relay_producer_t *p, int linger_ms, size_t max_queued);

/*
 * Transactions (delivery.mode = exactly-once: a producer created with a
 * transactional_id). Each returns 0; RELAY_EAGAIN when the call timed out
 * and may be made again (commit, init); RELAY_EKAFKA when the transaction
 * must be aborted (or the producer died); RELAY_EFENCED when a newer
 * producer with the same transactional.id took over (fatal: stop).
 */
/** @brief Register the transactional.id with its coordinator, fencing any
 *         older producer of that id and aborting its open transaction. */
int relay_producer_txn_init(relay_producer_t *p, int timeout_ms, char *err,
                            size_t errlen) RELAY_MUST_CHECK;
int relay_producer_txn_begin(relay_producer_t *p, char *err, size_t errlen) RELAY_MUST_CHECK;
/** @brief Flush (serving delivery reports) and commit, waiting up to timeout_ms. */
int relay_producer_txn_commit(relay_producer_t *p, int timeout_ms, char *err,
                              size_t errlen) RELAY_MUST_CHECK;
int relay_producer_txn_abort(relay_producer_t *p, int timeout_ms, char *err,
                             size_t errlen) RELAY_MUST_CHECK;

/** @brief What the producer's settings in force say about sizes. */
typedef struct {
        int64_t batch_size;  /* batch.size (bytes) */
        int64_t max_message; /* librdkafka's message.max.bytes: larger messages fail at once */
        /* Record batches are compressed (kafka.compression.type or
         * kafka.compression.codec other than none): Kafka then applies a
         * topic's max.message.bytes to the compressed batch; librdkafka
         * still applies message.max.bytes to the uncompressed message. */
        bool compresses;
} relay_producer_sizes_t;

relay_producer_sizes_t relay_producer_sizes(const relay_producer_t *p);

/**
 * @brief Ask the cluster for topic's max.message.bytes (a DescribeConfigs
 *        request, waiting up to timeout_ms).
 * @returns 0 and *bytes; RELAY_EAGAIN when the topic does not exist yet
 *          (*bytes is then the brokers' message.max.bytes, which a topic
 *          created on first use gets, or 0 if that is unknown too);
 *          RELAY_EIO when no answer came within timeout_ms (the cluster or
 *          its controller slow or unreachable: transient, ask again later);
 *          RELAY_EKAFKA when the cluster answered that it cannot tell (no
 *          DescribeConfigs permission, an old broker, a value that is not a
 *          size). The reason is in err for both.
 */
int relay_producer_topic_limit(relay_producer_t *p, const char *topic, int timeout_ms,
                               int64_t *bytes, char *err, size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief Purge whatever is still queued or in flight (their delivery reports
 *        are served with an error, so nothing is confirmed for them) and
 *        destroy. Accepts NULL.
 */
void relay_producer_free(relay_producer_t *p);

/**
 * @brief Ask the cluster for metadata: proves the brokers are reachable.
 * @returns 0; RELAY_ESETUP when the brokers refused the login (SASL) or the
 *          TLS handshake (certificate), with the cause and the fix in err;
 *          RELAY_EAGAIN when no broker was reachable or answered within
 *          timeout_ms (ask again, or give up); RELAY_EKAFKA on any other
 *          failure.
 */
int relay_producer_ping(relay_producer_t *p, int timeout_ms, char *err, size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief Enqueue one event (key, value and headers are copied); tag comes
 *        back with its delivery report. When ev->id points into one of its
 *        headers' values, which header travels with the message, so a
 *        failed report names the id without searching headers by name.
 * @returns 0; RELAY_EAGAIN when the local queue is full (poll, then offer it
 *          again); RELAY_EREJECTED when this event can never be produced
 *          (e.g. larger than message.max.bytes); RELAY_EKAFKA for any other
 *          refusal.
 */
int relay_producer_send(relay_producer_t *p, const relay_event_t *ev, uint64_t tag, char *err,
                        size_t errlen) RELAY_MUST_CHECK;

/** @brief Serve delivery reports and errors, waiting up to timeout_ms. */
void relay_producer_poll(relay_producer_t *p, int timeout_ms);

/**
 * @brief relay_producer_poll() that sends what is queued at once: librdkafka
 *        ignores linger.ms while it runs (rd_kafka_flush()), and returns as
 *        soon as nothing is queued or in flight. For waits on everything
 *        produced so far, where lingering for more events only delays.
 */
void relay_producer_flush(relay_producer_t *p, int timeout_ms);

/**
 * @brief The producer's health after polling.
 * @returns 0; RELAY_EKAFKA once librdkafka raised a fatal error (the
 *          message is in err; the producer must be destroyed);
 *          RELAY_EFENCED when that error is a transactional producer fenced
 *          by a newer one.
 */
int relay_producer_check(relay_producer_t *p, char *err, size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief What this librdkafka is known not to do with the settings given
 *        (e.g. SCRAM logins to Kafka 4 before librdkafka 2.6.1), as a
 *        sentence naming the way out; NULL when nothing. Owned by p.
 */
const char *relay_producer_caveat(const relay_producer_t *p);

/**
 * @brief The most recent non-fatal client error (e.g. all brokers down),
 *        once: returns true and fills buf when a new one was seen since the
 *        last call.
 */
bool relay_producer_take_warning(relay_producer_t *p, char *buf, size_t len);

/**
 * @brief A descriptor that becomes readable when delivery reports or errors
 *        are waiting: poll it with the replication socket, then call
 *        relay_producer_poll(p, 0). Owned by the producer.
 */
int relay_producer_fd(const relay_producer_t *p);

/**
 * @brief The latest statistics report into *out, when one arrived since the
 *        last call (true); false and *out untouched otherwise. Reports are
 *        parsed inside relay_producer_poll(), on the caller's thread.
 */
bool relay_producer_stats(relay_producer_t *p, relay_kafka_stats_t *out);

/**
 * @brief What the statistics reports showed, once each, oldest first: call
 *        it until false (one report may show several). buf (len bytes) gets
 *        the message, *warning whether it is a warning:
 *        - a topic's partition count grew (against the count in the
 *          producer's parts, which an earlier producer may have put there),
 *          and what it means for an aggregate's order (a warning);
 *        - a partition whose events librdkafka keeps sending without an
 *          acknowledgement (a retriable refusal such as NOT_ENOUGH_REPLICAS,
 *          resent silently until message.timeout.ms), seen in two reports
 *          10 s or more apart, naming the topic, partition and leader (a
 *          warning), and once more when acknowledgements come back (not),
 *          by this producer or, when an earlier one said the stall and was
 *          freed before its end (a failed session), by this one at its
 *          first acknowledgement there (in the producer's parts).
 */
bool relay_producer_take_note(relay_producer_t *p, char *buf, size_t len, bool *warning);

/**
 * @brief Call with nothing queued or in flight and no delivery failed, before
 *        the producer is replaced: every event of a partition said stalled
 *        was acknowledged, which its next statistics report would have
 *        said, and no report of this producer comes any more. Notes
 *        "acknowledges events again" for each such partition.
 */
void relay_producer_end_stalls(relay_producer_t *p);

/**
 * @brief Read one librdkafka statistics report (json, len bytes, borrowed):
 *        what the producer's statistics callback does with each, inside
 *        rd_kafka_poll(). Keeps the gauges of relay_producer_stats() and
 *        the notes of relay_producer_take_note(); a document that is not a JSON object
 *        is ignored.
 */
void relay_producer_read_stats(relay_producer_t *p, const char *json, size_t len);

/** @brief Messages queued or in flight. */
size_t relay_producer_outq_len(relay_producer_t *p);

#endif
