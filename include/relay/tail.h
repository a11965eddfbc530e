/*
 * tail.h - `outbox-relay tail`: the events the relay would publish, decoded
 * from a temporary replication slot and written as JSON lines, without
 * Kafka and without touching the relay's slot.
 *
 * The replication client, pgoutput decoder and outbox mapping are the
 * relay's own, through the same source (source.h), so a line shows exactly
 * the events the relay would produce (outbox rows, and with outbox.source
 * = messages or both its logical decoding messages) with their topic, key,
 * headers and payload. A temporary
 * slot starts at the server's current position: tail shows events
 * committed after it started. The server drops the slot when the
 * connection ends, however tail ends.
 *
 * One line per event:
 *   {"lsn": "0/16B3748", "commit_lsn": "0/16B3790", "commit_time":
 *    "2026-12-02T10:00:00.123456Z", "xid": 745, "topic": "...", "key": "...",
 *    "headers": [{"name": "id", "value": "..."}, ...], "payload": "..."}
 * A byte string that is not valid UTF-8 (a bytea payload) is written
 * base64-encoded under the name with "_base64" appended ("payload_base64",
 * "key_base64", "value_base64" in a header) instead of the plain name;
 * SQL NULL is null. An event the mapping refuses carries "error" with the
 * relay's message (bytes of it that are not UTF-8 as '?') and whatever
 * fields it does have.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_TAIL_H
#define RELAY_TAIL_H

#include <signal.h>
#include <stdio.h>

#include "relay/common.h"
#include "relay/settings.h"

typedef struct relay_tail relay_tail_t;

/**
 * @brief Connect (the relay's checks: version, wal_level, REPLICATION),
 *        check the publication read-only, create the temporary slot
 *        "outbox_relay_tail_<pid>" and start streaming from it. set is
 *        borrowed and must outlive the tail; stop (borrowed, for the tail's
 *        life) set nonzero by a signal handler cancels creating the slot,
 *        which waits for the transactions then open to end.
 * @returns 0 and *out (caller frees with relay_tail_free()); RELAY_ESETUP
 *          (server or publication not usable, with the fix); RELAY_EIO;
 *          RELAY_ENOMEM.
 */
int relay_tail_open(relay_tail_t **out, const relay_settings_t *set,
                    const volatile sig_atomic_t *stop, char *err, size_t errlen) RELAY_MUST_CHECK;

/** @brief The temporary slot's name. Borrowed. */
const char *relay_tail_slot(const relay_tail_t *t);

/** @brief Where the temporary slot starts. */
relay_lsn_t relay_tail_start_lsn(const relay_tail_t *t);

/**
 * @brief Write one JSON line per event to out (flushed at each
 *        commit) until *stop becomes non-zero or out's reader goes away
 *        (EPIPE: `tail | head`), then end the stream.
 * @returns 0 after either; RELAY_EIO when the connection broke or out
 *          could not be written (err says which); RELAY_EPROTO; RELAY_ENOMEM.
 */
int relay_tail_run(relay_tail_t *t, FILE *out, const volatile sig_atomic_t *stop, char *err,
                   size_t errlen) RELAY_MUST_CHECK;

/** @brief Close the connection (the server drops the slot) and free; accepts NULL. */
void relay_tail_free(relay_tail_t *t);

#endif
