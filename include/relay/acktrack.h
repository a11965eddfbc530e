/*
 * acktrack.h - which PostgreSQL transactions Kafka has fully acknowledged.
 *
 * A ring of the transactions received but not yet confirmable, in commit
 * order, each with its count of messages still waiting for a delivery report.
 * Delivery reports arrive in order per partition only, so a transaction can
 * be acknowledged before an earlier one: the confirmable position is the
 * Commit end_lsn of the longest fully acknowledged PREFIX of committed
 * transactions, never more, never backwards.
 *
 * Messages carry their transaction's sequence number as the librdkafka
 * opaque, so a delivery report finds its transaction in O(1).
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_ACKTRACK_H
#define RELAY_ACKTRACK_H

#include <stdbool.h>
#include <stdint.h>

#include "relay/common.h"

typedef struct relay_acktrack relay_acktrack_t;

/** @brief New, empty tracker (caller frees with relay_acktrack_free()); NULL when out of memory. */
relay_acktrack_t *relay_acktrack_new(void);

/** @brief Free; accepts NULL. */
void relay_acktrack_free(relay_acktrack_t *t);

/**
 * @brief Open the next transaction (a Begin arrived, with the LSN of its
 *        commit record, kept to name the transaction in messages). A
 *        transaction still open is RELAY_EPROTO (Begin without Commit).
 * @returns 0, RELAY_EPROTO or RELAY_ENOMEM.
 */
int relay_acktrack_begin(relay_acktrack_t *t, relay_lsn_t commit_lsn) RELAY_MUST_CHECK;

/** @brief The commit LSN given to begin for transaction seq (0 if not tracked). */
relay_lsn_t relay_acktrack_commit_lsn(const relay_acktrack_t *t, uint64_t seq);

/**
 * @brief Count one more in-flight message for the open transaction.
 * @returns the transaction's sequence number, to hand back to
 *          relay_acktrack_ack() from the delivery report.
 */
uint64_t relay_acktrack_add(relay_acktrack_t *t);

/**
 * @brief Undo relay_acktrack_add() for a message the producer refused
 *        synchronously (it will be offered again).
 */
void relay_acktrack_unadd(relay_acktrack_t *t);

/**
 * @brief Close the open transaction with its Commit end_lsn.
 * @returns 0; RELAY_EPROTO when no transaction is open or end_lsn is not
 *          above the previous transaction's.
 */
int relay_acktrack_commit(relay_acktrack_t *t, relay_lsn_t end_lsn) RELAY_MUST_CHECK;

/**
 * @brief One message of transaction seq was acknowledged by Kafka.
 * @returns 0; RELAY_EINVAL for a sequence that is not in flight or has no
 *          pending message (a bug or a stale report from a torn-down session).
 */
int relay_acktrack_ack(relay_acktrack_t *t, uint64_t seq) RELAY_MUST_CHECK;

/**
 * @brief Advance over fully acknowledged committed transactions and return
 *        the highest confirmable end_lsn (0 when none yet). Never decreases.
 */
relay_lsn_t relay_acktrack_confirmable(relay_acktrack_t *t);

/** @brief True when no transaction is open and no message is in flight. */
bool relay_acktrack_drained(const relay_acktrack_t *t);

/** @brief True between begin and commit. */
bool relay_acktrack_in_txn(const relay_acktrack_t *t);

/** @brief Messages in flight (added, not yet acknowledged). */
uint64_t relay_acktrack_pending(const relay_acktrack_t *t);

/**
 * @brief Raise the confirmable position to lsn when drained (a keepalive's
 *        WAL end while nothing is in flight). Ignored when not drained or
 *        when lsn is lower.
 */
void relay_acktrack_advance_idle(relay_acktrack_t *t, relay_lsn_t lsn);

#endif
