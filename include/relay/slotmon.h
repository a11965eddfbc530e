/*
 * slotmon.h - the side connection that reads the slot's wal_status and
 * safe_wal_size from pg_replication_slots, and the server's WAL end, every
 * few seconds, for /metrics and the catch-up report; and whether the
 * publication still sends every outbox table's inserts under its name,
 * which nothing in the stream says once it stops.
 *
 * It never blocks: the connection is made and the query run with libpq's
 * asynchronous calls, stepped by relay_slotmon_step() on each turn of the
 * main loop (which turns at least once a second), so a slow or unreachable
 * server costs the loop nothing. A connection attempt or query is given up
 * after 10 s of steps: a gap of more than a second between two steps (the
 * supervisor's wait between sessions) does not count, and what the server
 * answered meanwhile is read before the deadline is looked at.
 * Single-threaded: the main loop's only.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_SLOTMON_H
#define RELAY_SLOTMON_H

#include <stddef.h>
#include <stdint.h>

#include "relay/common.h"
#include "relay/metrics.h"
#include "relay/settings.h"

typedef struct relay_slotmon relay_slotmon_t;

/** @brief How often the slot is read. */
#define RELAY_SLOTMON_INTERVAL_MS 5000

/**
 * @brief New monitor for slot (copied) through conninfo (copied; "" means
 *        libpq's PG* variables). Connects lazily. With publication (copied)
 *        and tables (ntables outbox tables, read at each step: borrowed),
 *        each answer also says whether the publication still sends the
 *        inserts of every table under its name (relay_slot_info_t's
 *        unpublished). NULL when out of memory; caller frees with
 *        relay_slotmon_free().
 */
relay_slotmon_t *relay_slotmon_new(const char *conninfo, const char *slot,
                                   const char *publication, const relay_table_name_t *tables,
                                   size_t ntables);

/** @brief Close the connection and free; accepts NULL. */
void relay_slotmon_free(relay_slotmon_t *sm);

/**
 * @brief Advance the connection or the query without waiting.
 * @returns 1 with *out filled when an answer arrived; 0 when nothing new;
 *          RELAY_EIO when the connection or the query failed (err says why;
 *          it is tried again after RELAY_SLOTMON_INTERVAL_MS).
 */
int relay_slotmon_step(relay_slotmon_t *sm, int64_t now_ms, relay_slot_info_t *out, char *err,
                       size_t errlen);

#endif
