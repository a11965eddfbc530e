/*
 * source.h - the outbox events of one replication connection: the first
 * three stages of the data flow (repl -> pgoutput -> outbox) as one
 * object, shared by the relay's session and `outbox-relay tail`, so both
 * see the same events by the same rules.
 *
 * A source owns its replication connection, its decoder and its outbox
 * mapping. relay_source_step() takes one message of the stream and
 * returns the one step its consumer acts on: a keepalive, a transaction's
 * Begin or Commit, an event (an Insert into an outbox table, or a
 * transactional message that outbox.source makes an event) or an Update
 * of an outbox table. Everything else (Relations, which it binds, other
 * tables' rows, Deletes, Truncates, Types, Origins, messages that are not
 * ours) ends here. It also holds the stream to the transaction order:
 * Begin inside a transaction, Commit outside one, or an event outside one
 * is a protocol error.
 *
 * The caller sets the slot up and starts the stream on the connection
 * (relay_source_repl(): borrowed, it stays the source's), reads messages
 * from it and sends status updates; a source does no I/O of its own.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_SOURCE_H
#define RELAY_SOURCE_H

#include <stdbool.h>
#include <stdint.h>

#include "relay/common.h"
#include "relay/event.h"
#include "relay/outbox.h"
#include "relay/pgoutput.h"
#include "relay/repl.h"
#include "relay/settings.h"
#include "relay/walproto.h"

typedef struct relay_source relay_source_t;

typedef enum {
        RELAY_STEP_NOTHING,   /* nothing for the consumer (see above) */
        RELAY_STEP_KEEPALIVE, /* the walmsg's wal_end and reply_requested */
        RELAY_STEP_BEGIN,     /* msg.begin */
        RELAY_STEP_COMMIT,    /* msg.commit */
        RELAY_STEP_ROW,       /* an Insert into an outbox table: msg.insert */
        RELAY_STEP_MESSAGE,   /* a transactional message that is an event: msg.message */
        RELAY_STEP_UPDATE,    /* an Update of an outbox row: msg.update, what */
} relay_source_step_kind_t;

typedef struct {
        relay_source_step_kind_t kind;
        relay_lsn_t lsn;     /* the message's WAL start (0 for a keepalive) */
        bool bound;          /* NOTHING: a Relation that named an outbox table */
        bool unbound;        /* NOTHING: a Relation of one under another name now */
        relay_pgo_msg_t msg; /* borrows from the decoder and the walmsg until the next step */
        char what[300];      /* UPDATE: the row, for the consumer's message */
} relay_source_step_t;

/**
 * @brief Create the outbox mapping, connect (the relay's server checks:
 *        version, wal_level, REPLICATION) and create the decoder for the
 *        protocol version the server speaks. set is borrowed and must
 *        outlive the source; stop (borrowed, may be NULL) as
 *        relay_repl_connect()'s.
 * @returns 0 and *out (caller frees with relay_source_free()); the codes
 *          of relay_outbox_new() and relay_repl_connect(); RELAY_ENOMEM.
 */
int relay_source_open(relay_source_t **out, const relay_settings_t *set,
                      const volatile sig_atomic_t *stop, char *err,
                      size_t errlen) RELAY_MUST_CHECK;

/** @brief The replication connection. Borrowed: the source owns it. */
relay_repl_t *relay_source_repl(relay_source_t *src);

/** @brief The outbox mapping (a backfill binds and maps through it). Borrowed. */
relay_outbox_t *relay_source_outbox(relay_source_t *src);

/**
 * @brief The Begin of the transaction the stream is in (its commit LSN,
 *        commit time and xid); NULL between transactions. Borrowed: valid
 *        until the next relay_source_step().
 */
const relay_pgo_begin_t *relay_source_txn(const relay_source_t *src);

/**
 * @brief Turn one message of the stream into a step. w is borrowed, and
 *        so is what *step points into, until the next call.
 * @returns 0 and *step; RELAY_EPROTO (a message the decoder refuses, or
 *          out of transaction order); RELAY_ENOMEM.
 */
int relay_source_step(relay_source_t *src, const relay_walmsg_t *w, relay_source_step_t *step,
                      char *err, size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief Map a ROW or MESSAGE step to its event, as relay_outbox_map() and
 *        relay_outbox_map_message() do, stamped with its transaction's
 *        commit time.
 * @returns their codes: 0, RELAY_EMAP with the event's known fields set,
 *          RELAY_ENOMEM.
 */
int relay_source_map(relay_source_t *src, const relay_source_step_t *step, relay_event_t *ev,
                     char *err, size_t errlen) RELAY_MUST_CHECK;

/** @brief Close the connection and free; accepts NULL. */
void relay_source_free(relay_source_t *src);

#endif
