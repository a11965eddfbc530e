/*
 * backfill.h - the backfill reader: the rows the outbox table already held
 * when the slot was created, read in the snapshot the slot exported, so a
 * row is either in the backfill or in the stream, never both, never
 * neither (snapshot.mode = initial).
 *
 * One ordinary connection (not replication) of its own, in one REPEATABLE
 * READ READ ONLY transaction that imports the snapshot, and a cursor over
 * the table with snapshot.filter, oldest transaction first. Rows come out as
 * pgoutput Inserts of a relation built from the result's columns, so the
 * outbox mapping treats them exactly as streamed rows. It does not log
 * (the caller counts rows and reports progress), except what the server
 * says on its connection, which goes to the log as on the others.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_BACKFILL_H
#define RELAY_BACKFILL_H

#include <stdint.h>

#include "relay/common.h"
#include "relay/pgoutput.h"
#include "relay/settings.h"

typedef struct relay_backfill relay_backfill_t;

/*
 * Row-level security that applies to the relay's role, which the backfill
 * refuses and outbox-relay check fails, in the same words: the problem
 * (arguments: schema, table, the role as quote_ident() spells it) and the
 * fix (the role and "schema.table", both as quote_ident() spells them).
 */
#define RELAY_BACKFILL_RLS_PROBLEM                                                                 \
        "table \"%s.%s\" has row-level security that applies to role %s: the backfill "          \
        "(snapshot.mode = initial) would miss the rows its policies hide, which the slot never "  \
        "sends"
#define RELAY_BACKFILL_RLS_FIX "ALTER ROLE %s BYPASSRLS, or ALTER TABLE %s DISABLE ROW LEVEL SECURITY"

/**
 * @brief Connect, import snapshot (the name CREATE_REPLICATION_SLOT
 *        returned; the replication connection that exported it must not
 *        run another command before this returns) and open the cursor over
 *        outbox.table with snapshot.filter. set is borrowed and must
 *        outlive the reader. While any of its statements waits on the
 *        server (here or in relay_backfill_next()), tick (ctx borrowed;
 *        NULL: none, they block) is called about every 100 ms; a tick that
 *        returns non-zero cancels the statement, which then fails with the
 *        server's cancellation (the tick's caller knows why).
 * @returns 0 and *out (caller frees with relay_backfill_free()); RELAY_EIO
 *          when the server cannot be reached or the connection broke;
 *          RELAY_ESETUP for a filter the server refuses (the message names
 *          snapshot.filter), a missing table or privilege, with the fix;
 *          RELAY_ENOMEM.
 */
int relay_backfill_open(relay_backfill_t **out, const relay_settings_t *set, const char *snapshot,
                        relay_tick_fn *tick, void *ctx, char *err,
                        size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief The relation the rows belong to: outbox.table with the columns of
 *        the result, in table order. Borrowed until relay_backfill_free().
 */
const relay_pgo_relation_t *relay_backfill_relation(const relay_backfill_t *b);

/**
 * @brief The next row, as an Insert whose values borrow from the reader
 *        until the next call.
 * @returns 1 and *row; 0 when every row was read; RELAY_EIO when the
 *          connection broke; RELAY_ESETUP when the server failed the fetch
 *          (e.g. the filter fails at run time), with the server's message;
 *          RELAY_ENOMEM.
 */
int relay_backfill_next(relay_backfill_t *b, relay_pgo_insert_t *row, char *err,
                        size_t errlen) RELAY_MUST_CHECK;

/** @brief Rows returned so far. */
uint64_t relay_backfill_rows(const relay_backfill_t *b);

/** @brief End the transaction, close the connection and free; accepts NULL. */
void relay_backfill_free(relay_backfill_t *b);

#endif
