/*
 * session.h - one streaming session: a replication connection, a decoder,
 * an outbox mapping, a producer and an ack tracker, created together and
 * torn down together, and the loop that moves events through them; plus
 * the process state that outlives sessions (the error policy's memory and
 * Kafka's limits). relay.c's supervisor opens sessions and decides what
 * each ending means.
 *
 * Sessions log (they are the main loop's body); nothing below them does.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_SESSION_H
#define RELAY_SESSION_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "relay/common.h"
#include "relay/config.h"
#include "relay/settings.h"

typedef struct relay_process relay_process_t;
typedef struct relay_session relay_session_t;

/** @brief What a session has done. */
typedef struct {
        uint64_t events, txns, skipped, dead_lettered;
        uint64_t invalid_ops; /* UPDATEs of outbox rows (table.op.invalid.behavior) */
} relay_session_counts_t;

/** @brief How to open a session. */
typedef struct {
        bool first;           /* the process's first: wait for Kafka, log the server */
        bool may_create_slot; /* create the slot when missing (no session streamed yet) */
        bool recreate_slot;   /* slot.recreate: create it anew when lost */
        const volatile sig_atomic_t *stop; /* set by a signal: stop (borrowed) */
} relay_session_opts_t;

/**
 * @brief Process state for set's error policy (set borrowed) and the
 *        SIGHUPs counted in *hangups (relay_hangup_signal(); borrowed).
 * @returns 0 and *out (caller frees with relay_process_free()); RELAY_ENOMEM.
 */
int relay_process_new(relay_process_t **out, const relay_settings_t *set,
                      const volatile sig_atomic_t *hangups, char *err,
                      size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief A turn of the loop or of one of its waits (the supervisor's
 *        backoff, a session's ticks, drains and resends): feeds systemd's
 *        watchdog and logs the SIGHUP warning once for each SIGHUP counted
 *        since the last turn. Whatever waits calls it at least every second.
 */
void relay_process_turn(relay_process_t *pr);

/** @brief Free; accepts NULL. */
void relay_process_free(relay_process_t *pr);

/** @brief The process's metrics (owned by it; metrics.h says who may call what). */
struct relay_metrics *relay_process_metrics(relay_process_t *pr);

/** @brief Delivery reports that came without an offset (resent from the slot). */
uint64_t relay_process_implicit_acks(const relay_process_t *pr);

/**
 * @brief Connect, check the setup, ensure publication and slot, and start
 *        streaming from *resume (0: the slot's position; set to 0 when the
 *        slot is new). cfg, set, proc and opts->stop are borrowed for the
 *        session's life.
 * @returns 0 and *out (caller frees with relay_session_free()); on failure a
 *          RELAY_E* code, err filled and *out NULL: RELAY_ESETUP (the setup
 *          is wrong), RELAY_EBUSY (slot active elsewhere), RELAY_ESLOTLOST,
 *          RELAY_EIO and others as the supervisor classifies them.
 */
int relay_session_open(relay_session_t **out, const relay_config_t *cfg,
                       const relay_settings_t *set, relay_process_t *proc,
                       const relay_session_opts_t *opts, relay_lsn_t *resume, char *err,
                       size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief Stream until a stop is asked for (0, between transactions), an
 *        event stops it (RELAY_EMAP: errors.policy or a failed dead-letter
 *        write, err says which), or anything fails (other codes).
 */
int relay_session_stream(relay_session_t *s, char *err, size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief Wait up to shutdown.timeout.ms for Kafka to acknowledge what is in
 *        flight, confirm it and end the stream (logs what was left).
 * @returns 0, also when the timeout left events unacknowledged (nothing is
 *          confirmed past them: they are sent again); else the error that
 *          ended the drain, in err: a failed delivery, a dead producer, a
 *          Kafka transaction that could not commit (each RELAY_EKAFKA), or
 *          RELAY_EIO when the final status update or the end of the stream
 *          failed (the connection lost, the server not answering), so that
 *          what Kafka acknowledged may not be confirmed.
 */
int relay_session_drain(relay_session_t *s, char *err, size_t errlen);

/** @brief The flush LSN last confirmed to the server. */
relay_lsn_t relay_session_confirmed(const relay_session_t *s);

/** @brief What the session has done so far. */
relay_session_counts_t relay_session_counts(const relay_session_t *s);

/** @brief Purge the producer (nothing more is confirmed), close, free. Accepts NULL. */
void relay_session_free(relay_session_t *s);

#endif
