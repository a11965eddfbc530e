/*
 * walproto.h - the streaming replication sub-protocol carried in CopyData:
 * parsing the server's XLogData ('w') and primary keepalive ('k') messages
 * and encoding the client's standby status update ('r').
 *
 * Pure functions over byte buffers, no connection: the replication client
 * (repl.h) feeds them, the unit tests and the fuzzer call them directly.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_WALPROTO_H
#define RELAY_WALPROTO_H

#include <stdbool.h>
#include <stdint.h>

#include "relay/common.h"

/** @brief Size of an encoded standby status update. */
#define RELAY_WALPROTO_STATUS_LEN 34

typedef struct {
        char type;              /* 'w' XLogData or 'k' keepalive */
        relay_lsn_t wal_start;  /* 'w': start of the data in WAL */
        relay_lsn_t wal_end;    /* 'w' and 'k': the server's current end of WAL */
        int64_t send_time;      /* server clock, microseconds since 2000-01-01 UTC */
        bool reply_requested;   /* 'k': the server wants a status update now */
        const char *data;       /* 'w': the pgoutput message, borrowed from buf */
        size_t len;             /* 'w': its length */
} relay_walmsg_t;

/**
 * @brief Parse one CopyData payload from the server.
 * @returns 0 and *out filled (data borrows from buf); RELAY_EPROTO for an
 *          unknown type byte or a length that does not match the layout.
 */
int relay_walproto_parse(const char *buf, size_t len, relay_walmsg_t *out, char *err,
                         size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief Encode a standby status update into buf (RELAY_WALPROTO_STATUS_LEN
 *        bytes). now is microseconds since 2000-01-01 UTC.
 * @remark write >= flush >= apply on the wire: a flush above write is sent
 *         as write, an apply above flush as flush (never confirm what was
 *         not received).
 * @returns the number of bytes written (always RELAY_WALPROTO_STATUS_LEN).
 */
size_t relay_walproto_status(char *buf, relay_lsn_t write, relay_lsn_t flush, relay_lsn_t apply,
                             int64_t now, bool reply_requested);

#endif
