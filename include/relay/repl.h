/*
 * repl.h - the replication client: one libpq connection in
 * replication=database mode, the server checks and setup (publication,
 * slot), START_REPLICATION and the CopyBoth stream.
 *
 * The connection is non-blocking once streaming: relay_repl_read() returns 0
 * when no complete message is buffered, and the caller polls
 * relay_repl_socket() before relay_repl_consume().
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_REPL_H
#define RELAY_REPL_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "relay/common.h"
#include "relay/settings.h"
#include "relay/walproto.h"

typedef struct relay_repl relay_repl_t;

/**
 * @brief Connect and check the server: PostgreSQL >= 14, wal_level=logical,
 *        a role allowed to replicate. Reads postgres.conninfo, slot.name,
 *        publication.name and outbox.table from set (borrowed; it must
 *        outlive the connection). stop (borrowed, may be NULL): set by a
 *        signal handler, it ends the connect (relay_pgconn_connect()).
 * @returns 0 and *out (caller frees with relay_repl_free()); RELAY_ESTOPPED
 *          when *stop was set during the connect; RELAY_EIO when
 *          the server cannot be reached (retry); RELAY_ESETUP when it is
 *          reachable but not usable, or when libpq cannot resolve the
 *          parameters (a service not found), with the fix in err; RELAY_EPROTO when
 *          IDENTIFY_SYSTEM's answer has no valid WAL position.
 */
int relay_repl_connect(relay_repl_t **out, const relay_settings_t *set,
                       const volatile sig_atomic_t *stop, char *err,
                       size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief The server options ("options" connection parameter) for a
 *        connection whose values the relay reads as text: the user's own
 *        (as libpq resolves them: conninfo's options, else its service's
 *        from the service file, else PGOPTIONS), then the relay's date,
 *        time zone, float and bytea formats and
 *        idle_in_transaction_session_timeout off, which win.
 * @remark Resolves the service with a libpq connection object that fails
 *         before it connects: no server is contacted.
 *        extra (borrowed, may be NULL): more "-c name=value" options, last.
 * @returns a string the caller frees, or NULL when out of memory.
 */
char *relay_repl_session_options(const char *conninfo, const char *extra);

/** @brief Close and free; accepts NULL. */
void relay_repl_free(relay_repl_t *r);

/**
 * @brief PQexec() (nparams < 0: the simple query protocol) or PQexecParams()
 *        (text parameters, text results) on conn for a statement that may
 *        wait on the server for long: with a tick (ctx borrowed), it is sent
 *        asynchronously and tick called about every 100 ms until the answer
 *        is in; a tick that returns non-zero cancels the statement, which
 *        then fails with the server's cancellation. The ticks go on until
 *        then, for up to 5 s: a server that has not ended the statement by
 *        then gets a failed result (PGRES_FATAL_ERROR), and conn, with the
 *        statement still in progress, is only fit to be closed (PQexec()
 *        on it would wait for the server). NULL tick: it blocks.
 * @returns the last result (caller clears), never NULL but out of memory.
 */
struct pg_conn;   /* libpq's PGconn */
struct pg_result; /* libpq's PGresult */
struct pg_result *relay_pg_exec_waiting(struct pg_conn *conn, const char *sql, int nparams,
                                        const char *const *params, relay_tick_fn *tick,
                                        void *ctx);

/**
 * @brief Turn PostgreSQL 17's transaction_timeout off on conn (borrowed) for
 *        a backfill (nothing before 17: such servers refuse its name, so it
 *        cannot be a connect option), as idle_in_transaction_session_timeout
 *        is in the session options: it would end the snapshot's transaction.
 * @returns 0; RELAY_EIO (connection lost), RELAY_ESETUP (refused) or
 *          RELAY_ENOMEM with err filled.
 */
int relay_pg_transaction_timeout_off(struct pg_conn *conn, char *err, size_t errlen);

/**
 * @brief Install tick (ctx borrowed; NULL: none, such commands just block):
 *        called while a command waits on other sessions (creating a slot
 *        waits for every transaction running then to end, however long).
 *        A tick that returns non-zero cancels the command, which then fails
 *        with the server's cancellation (the tick's err is not used: the
 *        caller that ended the wait knows why).
 */
void relay_repl_set_tick(relay_repl_t *r, relay_tick_fn *tick, void *ctx);

/** @brief The server's version number (e.g. 150020). */
int relay_repl_server_version(const relay_repl_t *r);

/** @brief The pgoutput protocol version START_REPLICATION asks for (2, 3 or 4). */
int relay_repl_proto_version(const relay_repl_t *r);

/** @brief Whether relay_repl_ensure_slot() turned failover on for an existing
 *         slot (slot.failover = true, the slot made without it). */
bool relay_repl_failover_altered(const relay_repl_t *r);

/** @brief slot.failover = true on a server whose synchronized_standby_slots
 *         is empty (known after relay_repl_ensure_slot()): nothing keeps the
 *         slot from running ahead of the standbys. */
bool relay_repl_failover_unguarded(const relay_repl_t *r);

/** @brief The server's wal_sender_timeout in ms (0 = disabled). */
int64_t relay_repl_wal_sender_timeout_ms(const relay_repl_t *r);

/** @brief The database cluster's system identifier (IDENTIFY_SYSTEM), as text. Borrowed. */
const char *relay_repl_system_id(const relay_repl_t *r);

/** @brief The server's WAL flush position when the connection was made
 *         (IDENTIFY_SYSTEM's xlogpos): no position this server ever sent
 *         lies beyond it. */
relay_lsn_t relay_repl_wal_end(const relay_repl_t *r);

/**
 * @brief Make sure every outbox table (outbox.table lists one or more)
 *        exists and the publication publishes their inserts, creating the
 *        publication (inserts of all of them; inserts and updates when
 *        table.op.invalid.behavior is error or fatal, which also refuse an
 *        existing one that does not publish updates) when missing.
 *        With outbox.source = messages there is no table: the publication
 *        only has to exist (created empty when missing).
 * @returns 0 (*created set when it created it); RELAY_ESETUP with the fix;
 *          RELAY_EIO.
 */
int relay_repl_ensure_publication(relay_repl_t *r, bool *created, char *err,
                                  size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief The same checks as relay_repl_ensure_publication(), read-only: a
 *        missing publication is RELAY_ESETUP with the fix, never created.
 * @returns 0; RELAY_ESETUP; RELAY_EIO; RELAY_ENOMEM.
 */
int relay_repl_check_publication(relay_repl_t *r, char *err, size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief Create a temporary logical slot (pgoutput) under the slot name of
 *        the settings; the server drops it when this connection ends. It
 *        starts at the server's current position, returned in *start.
 * @returns 0; RELAY_ESETUP (e.g. the name is taken, no free slot) with the
 *          server's message; RELAY_EIO; RELAY_ENOMEM.
 */
int relay_repl_create_temporary_slot(relay_repl_t *r, relay_lsn_t *start, char *err,
                                     size_t errlen) RELAY_MUST_CHECK;

typedef enum {
        RELAY_SLOT_EXISTED = 0,
        RELAY_SLOT_CREATED,   /* there was none */
        RELAY_SLOT_RECREATED, /* it was lost (wal_status = lost): dropped and created */
} relay_slot_outcome_t;

/**
 * @brief Make sure the slot exists (pgoutput, this database), creating it
 *        when missing and may_create or recreate is set. With recreate set, a
 *        slot whose WAL was removed (wal_status = lost) is dropped and
 *        created anew. With slot.failover = true the slot is created with
 *        FAILOVER, and an existing slot without it is altered to have it.
 *        With defer_create set, a slot that would be created is not (a lost
 *        one is dropped): *outcome says CREATED or RECREATED and the caller
 *        creates it with relay_repl_create_snapshot_slot() and
 *        relay_repl_persist_slot() around a backfill.
 * @returns 0 and *outcome; RELAY_ESLOTLOST when it is missing and may not be
 *          created, or lost and may not be recreated; RELAY_ESETUP when it
 *          belongs to another plugin or database, or slot.failover = true on
 *          a server before PostgreSQL 17; RELAY_EBUSY when the slot must be
 *          altered while another walsender holds it; RELAY_EIO.
 */
int relay_repl_ensure_slot(relay_repl_t *r, bool may_create, bool recreate, bool defer_create,
                           relay_slot_outcome_t *outcome, char *err, size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief Before a backfill: a session advisory lock of the database, keyed
 *        on the slot's name, held until the connection ends, so that relays
 *        of one slot that start together backfill the table once between
 *        them, not once each.
 * @returns 0; RELAY_EBUSY when another connection holds it (a relay of the
 *          slot backfilling, or streaming after its backfill: stand by);
 *          RELAY_EIO; RELAY_ESETUP; RELAY_ENOMEM.
 */
int relay_repl_lock_backfill(relay_repl_t *r, char *err, size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief The first step of creating the slot with a backfill: a TEMPORARY
 *        slot (named after the slot, "_backfill_" and the backend's pid)
 *        that exports its snapshot. The snapshot (its name in snapshot,
 *        snaplen >= 64) holds exactly the transactions committed before
 *        *consistent, where the slot's stream begins. It is valid only until
 *        this connection's next command: import it first. Should the relay
 *        die before relay_repl_persist_slot(), the temporary slot vanishes
 *        with the connection and no slot is left: the next start backfills
 *        again (nothing lost, rows sent twice).
 * @returns 0; RELAY_ESETUP (e.g. no free slot) with the server's message;
 *          RELAY_EIO; RELAY_EPROTO; RELAY_ENOMEM.
 */
int relay_repl_create_snapshot_slot(relay_repl_t *r, char *snapshot, size_t snaplen,
                                    relay_lsn_t *consistent, char *err,
                                    size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief Whether the connection, idle (no command under way), still
 *        stands: reads what the server sent without waiting. A backfill
 *        asks while it reads, so that it stops at once when the server
 *        ended the connection (a terminated walsender, a slot invalidated
 *        by max_slot_wal_keep_size), which dropped its temporary slot,
 *        rather than send every row for nothing and then again.
 * @returns 0; RELAY_EIO when the connection is lost (err says why).
 */
int relay_repl_idle_alive(relay_repl_t *r, char *err, size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief After the backfill was acknowledged: copy the temporary slot to
 *        the permanent slot of the settings (pg_copy_logical_replication_slot
 *        keeps its confirmed position), then drop the temporary one. When
 *        the slot exists already (another process created it meanwhile),
 *        *outcome becomes RELAY_SLOT_EXISTED and that slot is used (the
 *        server dropped the temporary one with the copy's error).
 * @returns 0; RELAY_ESETUP; RELAY_EIO; RELAY_ENOMEM.
 */
int relay_repl_persist_slot(relay_repl_t *r, relay_slot_outcome_t *outcome, char *err,
                            size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief START_REPLICATION at the later of start (0 for none) and the slot's
 *        confirmed position. Passing what this process last confirmed
 *        matters after a server restart: PostgreSQL 15 and 16 do not save a
 *        slot's confirmed position at shutdown, so the slot alone would send
 *        again everything since its last checkpointed position.
 * @returns 0; RELAY_EBUSY when another process streams from the slot
 *          (SQLSTATE 55006); RELAY_ESLOTLOST; RELAY_ESETUP; RELAY_EIO.
 */
int relay_repl_start(relay_repl_t *r, relay_lsn_t start, char *err, size_t errlen) RELAY_MUST_CHECK;

/** @brief The socket to poll. */
int relay_repl_socket(const relay_repl_t *r);

/**
 * @brief Read what the socket has (after poll reported it readable).
 * @returns 0 or RELAY_EIO.
 */
int relay_repl_consume(relay_repl_t *r, char *err, size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief Next buffered message. msg->data borrows until the next call.
 * @returns 1 and *msg; 0 when nothing complete is buffered; RELAY_EIO when
 *          the stream ended or the connection broke; RELAY_ESLOTLOST when
 *          the server ended it because the slot is gone; RELAY_ESETUP, with
 *          the fix, when it cannot decode on because the publication was
 *          dropped meanwhile; RELAY_EPROTO for malformed framing.
 */
int relay_repl_read(relay_repl_t *r, relay_walmsg_t *msg, char *err, size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief Queue and try to send a standby status update (write = received,
 *        flush = apply = confirmed, lowered to received if above it).
 * @returns 0 or RELAY_EIO.
 */
int relay_repl_send_status(relay_repl_t *r, relay_lsn_t received, relay_lsn_t confirmed,
                           bool reply_requested, char *err, size_t errlen) RELAY_MUST_CHECK;

/** @brief True when output is still waiting for the socket (poll for POLLOUT). */
bool relay_repl_wants_write(relay_repl_t *r);

/** @brief Try to send buffered output; 0 or RELAY_EIO. */
int relay_repl_flush(relay_repl_t *r, char *err, size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief End the stream cleanly: send CopyDone and wait, at most timeout_ms
 *        in all (0: do not wait), for the server's CopyDone and the end of
 *        START_REPLICATION. Whatever the server still streams is discarded.
 *        *sent (may be NULL) says whether everything written on the
 *        connection (a status update before, then the CopyDone) reached the
 *        server's socket while the connection stood: then the server reads
 *        it, in order, even if it answers late.
 * @returns 0 (*sent true); RELAY_EIO when the connection failed or the
 *          server did not answer in time (err says which; *sent true only
 *          for a server that took everything and did not answer in time).
 *          The connection stays open either way; free it with
 *          relay_repl_free().
 */
int relay_repl_stop(relay_repl_t *r, int timeout_ms, bool *sent, char *err,
                    size_t errlen) RELAY_MUST_CHECK;

#endif
