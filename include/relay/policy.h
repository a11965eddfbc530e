/*
 * policy.h - the error policy (errors.*): what happens to an event Kafka
 * refuses for good or that cannot become an event, decided in one place.
 *
 * Poison is handled in place: the main loop stops producing at the poison
 * event until it is settled (delivered after resends, written to the
 * dead-letter topic, or the relay stops before it), so no later event of
 * the same aggregate can reach Kafka first. This module owns the decisions
 * and what must outlive a session: the events Kafka rejected, remembered by
 * their transaction and content so the next session (which resumes from the
 * slot) finds them again; the skip list; the dead-letter copy's headers. It does
 * no I/O.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_POLICY_H
#define RELAY_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "relay/common.h"
#include "relay/event.h"

typedef struct relay_policy relay_policy_t;

/** @brief Settings; strings are borrowed only during relay_policy_new(). */
typedef struct {
        bool stop;            /* errors.policy = stop (else dlq) */
        int64_t retries;      /* errors.retries */
        int64_t backoff_ms;   /* errors.backoff.ms */
        int64_t backoff_max_ms; /* errors.backoff.max.ms */
        const char *dlq_topic;  /* errors.dlq.topic */
        const char *const *skip_ids; /* errors.skip.ids (copied) */
        size_t nskip;
} relay_policy_conf_t;

/** @brief What to do next with a poison event. */
typedef enum {
        RELAY_POLICY_RESEND,      /* produce it again, alone, after *wait_ms */
        RELAY_POLICY_DEAD_LETTER, /* write its dead-letter copy now */
        RELAY_POLICY_STOP,        /* stop before it (exit 4) */
} relay_policy_action_t;


/** @brief Scratch space for a dead-letter copy; lives as long as the copy. */
typedef struct {
        relay_header_t headers[RELAY_EVENT_MAX_WIRE_HEADERS];
        char lsn[32], commit_time[32], attempts[16];
        char cause[RELAY_ERRBUF];
} relay_policy_dlq_t;

/**
 * @brief Create the policy.
 * @returns 0 and *out (caller frees with relay_policy_free()); RELAY_ENOMEM.
 */
int relay_policy_new(relay_policy_t **out, const relay_policy_conf_t *conf, char *err,
                     size_t errlen) RELAY_MUST_CHECK;

/** @brief Free; accepts NULL. */
void relay_policy_free(relay_policy_t *p);

/** @brief errors.policy = stop. */
bool relay_policy_stops(const relay_policy_t *p);

/** @brief The dead-letter topic (owned by the policy). */
const char *relay_policy_dlq_topic(const relay_policy_t *p);

/** @brief True when id (len bytes, may be NULL) is listed in errors.skip.ids. */
bool relay_policy_skip(const relay_policy_t *p, const char *id, size_t len);

/**
 * @brief Kafka rejected ev (borrowed for the call) of the transaction whose
 *        commit record is at txn (the Begin's final LSN): remember it so it
 *        is handled in place when the stream brings it again. A second
 *        rejection of a remembered event counts one more attempt. An event
 *        is known by its transaction and a fingerprint of its topic, key,
 *        value and headers (its id among them) as produced, which a
 *        delivery report rebuilds byte for byte: events of one transaction
 *        that share an id (inserted, deleted and inserted again; several
 *        outbox tables) are told apart, and an id a profile encoded in its
 *        header needs no decoding to be found again.
 * @returns the number of rejections so far (>= 1); RELAY_ENOMEM.
 */
int relay_policy_rejected(relay_policy_t *p, relay_lsn_t txn, const relay_event_t *ev,
                          const char *cause) RELAY_MUST_CHECK;

/**
 * @brief Rejections remembered for ev of txn, 0 when none; *cause (may be
 *        NULL) gets the last reason, borrowed until the next call.
 */
int relay_policy_attempts(const relay_policy_t *p, relay_lsn_t txn, const relay_event_t *ev,
                          const char **cause);

/**
 * @brief Transaction txn was received up to its Commit with every event of
 *        it settled or produced: forget its events. Not each event as it is
 *        settled: events that are alike but for their timestamp share an
 *        entry, and forgetting it at the first one's delivery made a later
 *        one's refusal count as a first one again, in every session.
 */
void relay_policy_forget_txn(relay_policy_t *p, relay_lsn_t txn);

/** @brief Events remembered (rejected and not settled yet). */
size_t relay_policy_pending(const relay_policy_t *p);

/**
 * @brief The next step for an event Kafka has rejected `attempts` times
 *        (>= 1). The first rejection may have come from a neighbour in the
 *        same batch, so the first resend, alone, is immediate and not
 *        counted; then errors.retries resends with doubling backoff; then
 *        the policy (dead-letter or stop). Under errors.policy = stop only
 *        that first resend is made.
 */
relay_policy_action_t relay_policy_next(const relay_policy_t *p, int attempts, int64_t *wait_ms);

/**
 * @brief Fill *out with the dead-letter copy of ev (borrowed; its strings
 *        must outlive *out, as must *scratch): same key, value, headers and
 *        timestamp plus outbox.error.message (cause), outbox.error.topic
 *        (ev's topic, "" when it had none), outbox.error.lsn (lsn),
 *        outbox.error.commit.time (commit_ms, the transaction's commit time
 *        in ms since the Unix epoch: not ev's timestamp, which
 *        table.field.event.timestamp may take from a column) and
 *        outbox.error.attempts.
 * @returns 0; RELAY_EINVAL when ev has too many headers to add those five.
 */
int relay_policy_dead_letter(const relay_policy_t *p, const relay_event_t *ev, relay_lsn_t lsn,
                             int64_t commit_ms, const char *cause, int attempts,
                             relay_policy_dlq_t *scratch, relay_event_t *out, char *err,
                             size_t errlen) RELAY_MUST_CHECK;

#endif
