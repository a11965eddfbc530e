/*
 * checkpoint.h - exactly-once's memory in Kafka: the end LSN of the last
 * PostgreSQL transaction whose events a committed Kafka transaction holds,
 * written as a record (key: the slot's identity, value: the LSN as %X/%X)
 * to a compacted topic inside that same Kafka transaction, and read back
 * read_committed when a session starts.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_CHECKPOINT_H
#define RELAY_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>

#include "relay/common.h"
#include "relay/config.h"

/**
 * @brief The highest checkpoint recorded under key in topic, read with a
 *        group-less read_committed consumer (the kafka.* pairs of cfg,
 *        borrowed, for brokers and security) up to every partition's high
 *        watermark as it is when called, so past every record a previous
 *        owner of our transactional.id committed, even while another
 *        producer's open transaction holds the partition's stable end below
 *        them (then it waits for that transaction to end, up to timeout_ms).
 *        A tombstone (null value) for key deletes what came before it,
 *        as compaction would. A topic that does not exist is created
 *        (compacted, one partition, the brokers' replication factor) and
 *        holds none; one that CreateTopics finds already there (created by
 *        someone else since its metadata said otherwise) is read as above,
 *        once its metadata shows it.
 *        Call it after the transactional producer's init, which aborts any
 *        transaction a previous owner left open (it would hold back the
 *        read_committed end of the partition).
 *        While it waits, tick (NULL: none) is called with ctx about every
 *        100 ms (also while the topic's metadata and its creation are
 *        awaited), so that the caller can keep its own connections alive
 *        (the relay's replication stream: wal_sender_timeout); a tick that
 *        fails (non-zero, err filled) ends the read with its code and
 *        message: at once, or while the metadata is awaited (on a thread
 *        of its own, which cannot be cut short) once it is in, up to
 *        timeout_ms, the ticks going on meanwhile.
 * @returns 0 with *found and *out (0 when none); RELAY_EKAFKA when the
 *          topic could not be read or created within timeout_ms (err says
 *          why); RELAY_EPROTO when our key holds a value that is not an LSN;
 *          a tick's code.
 */
int relay_checkpoint_read(const relay_config_t *cfg, const char *topic, const char *key,
                          int timeout_ms, relay_tick_fn *tick, void *ctx,
                          relay_lsn_t *out, bool *found, char *err,
                          size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief The value the checkpoint reader gives the librdkafka property prop
 *        whatever the configuration's kafka.* pairs say (borrowed, static),
 *        or NULL when it takes theirs.
 */
const char *relay_checkpoint_own_setting(const char *prop);

#endif
