/*
 * walproto.c - the CopyData sub-protocol of streaming replication: parse the
 * server's XLogData ('w') and primary keepalive ('k') messages, encode the
 * standby status update ('r').
 *
 * Kept free of libpq and of any connection state so that the replication
 * client, the unit tests and the fuzzer share exactly one parser.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <string.h>

#include "relay/walproto.h"

#define XLOGDATA_HDR  25
#define KEEPALIVE_LEN 18

static uint64_t get_u64(const unsigned char *p)
{
        return (uint64_t)p[0] << 56 | (uint64_t)p[1] << 48 | (uint64_t)p[2] << 40 |
               (uint64_t)p[3] << 32 | (uint64_t)p[4] << 24 | (uint64_t)p[5] << 16 |
               (uint64_t)p[6] << 8 | (uint64_t)p[7];
}

static void put_u64(unsigned char *p, uint64_t v)
{
        for (int i = 7; i >= 0; i--) {
                p[i] = (unsigned char)(v & 0xff);
                v >>= 8;
        }
}

static int bad_length(char *err, size_t errlen, const char *what, int need, size_t have)
{
        relay_err_set(err, errlen, "%s message: need %d bytes, have %zu", what, need, have);
        return RELAY_EPROTO;
}

/*
 * XLogData:  Byte1 'w', Int64 dataStart, Int64 walEnd, Int64 sendTime,
 *            Byte(n) pgoutput message                        (25 + n bytes)
 * Keepalive: Byte1 'k', Int64 walEnd, Int64 sendTime, Byte1 replyRequested
 *                                                            (exactly 18 bytes)
 */
int relay_walproto_parse(const char *buf, size_t len, relay_walmsg_t *out, char *err, size_t errlen)
{
        const unsigned char *p = (const unsigned char *)buf;

        if (len == 0) {
                relay_err_set(err, errlen, "invalid replication message: empty CopyData");
                return RELAY_EPROTO;
        }
        switch (p[0]) {
        case 'w':
                if (len < XLOGDATA_HDR)
                        return bad_length(err, errlen, "truncated XLogData", XLOGDATA_HDR, len);
                memset(out, 0, sizeof(*out));
                out->type = 'w';
                out->wal_start = get_u64(p + 1);
                out->wal_end = get_u64(p + 9);
                out->send_time = (int64_t)get_u64(p + 17);
                out->data = buf + XLOGDATA_HDR;
                out->len = len - XLOGDATA_HDR;
                return RELAY_OK;
        case 'k':
                /* Exact length: a longer keepalive is a layout we do not know. */
                if (len != KEEPALIVE_LEN)
                        return bad_length(err, errlen, "invalid keepalive", KEEPALIVE_LEN, len);
                memset(out, 0, sizeof(*out));
                out->type = 'k';
                out->wal_end = get_u64(p + 1);
                out->send_time = (int64_t)get_u64(p + 9);
                out->reply_requested = p[17] != 0;
                return RELAY_OK;
        default:
                relay_err_set(err, errlen, "invalid replication message: unknown type byte 0x%02x",
                              p[0]);
                return RELAY_EPROTO;
        }
}

/*
 * Standby status update: Byte1 'r', Int64 write, Int64 flush, Int64 apply,
 *                        Int64 clock, Byte1 replyRequested     (34 bytes)
 *
 * PostgreSQL expects write >= flush >= apply, and stores a flush as the
 * slot's confirmed_flush_lsn without checking it against what it sent: a
 * flush above write would confirm WAL the client never received. So flush
 * is lowered to write and apply to flush here, the one place every status
 * update is built.
 */
size_t relay_walproto_status(char *buf, relay_lsn_t write, relay_lsn_t flush, relay_lsn_t apply,
                             int64_t now, bool reply_requested)
{
        unsigned char *p = (unsigned char *)buf;

        if (flush > write)
                flush = write;
        if (apply > flush)
                apply = flush;
        p[0] = 'r';
        put_u64(p + 1, write);
        put_u64(p + 9, flush);
        put_u64(p + 17, apply);
        put_u64(p + 25, (uint64_t)now);
        p[33] = reply_requested ? 1 : 0;
        return RELAY_WALPROTO_STATUS_LEN;
}
