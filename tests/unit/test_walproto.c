/*
 * test_walproto.c - the CopyData sub-protocol: XLogData and keepalive parsing,
 * standby status encoding, the PostgreSQL-epoch clock.
 *
 * The byte strings are built by hand from the layouts in protocol.md A.3; the
 * XLogData payload is the Begin message of fixture v1-basic/0001-Begin.bin.
 *
 * SPDX-License-Identifier: Apache-2.0
 */

#include "relay/walproto.h"
#include "tap.h"

/* One row per wire field. */
/* clang-format off */

/* 'w', dataStart 0/154D9A8, walEnd 0/154D9A8, sendTime, then a 21-byte Begin. */
static const unsigned char xlogdata[] = {
    'w',  0x00, 0x00, 0x00, 0x00, 0x01, 0x54, 0xd9, 0xa8, 0x00, 0x00, 0x00, 0x00, 0x01, 0x54, 0xd9,
    0xa8, 0x00, 0x03, 0x04, 0x7a, 0x11, 0x22, 0x33, 0x44, 'B',  0x00, 0x00, 0x00, 0x00, 0x01, 0x54,
    0xdb, 0x48, 0x00, 0x03, 0x04, 0x6f, 0x30, 0x4d, 0x6c, 0x8c, 0x00, 0x00, 0x02, 0xdd,
};

/* 'k', walEnd 16/B374D848, sendTime, replyRequested = 1. */
static const unsigned char keepalive[] = {
    'k',  0x00, 0x00, 0x00, 0x16, 0xb3, 0x74, 0xd8, 0x48,
    0x00, 0x03, 0x04, 0x7a, 0x11, 0x22, 0x33, 0x44, 0x01,
};

/* clang-format on */

static int parse(const void *buf, size_t len, relay_walmsg_t *m, char *err)
{
        err[0] = '\0';
        return relay_walproto_parse(buf, len, m, err, RELAY_ERRBUF);
}

static void test_xlogdata(void)
{
        relay_walmsg_t m;
        char err[RELAY_ERRBUF];

        is_int(parse(xlogdata, sizeof(xlogdata), &m, err), RELAY_OK, "XLogData parses");
        is_int(m.type, 'w', "XLogData type");
        is_int(m.wal_start, 0x154d9a8, "XLogData dataStart");
        is_int(m.wal_end, 0x154d9a8, "XLogData walEnd");
        is_int(m.send_time, 0x0003047a11223344, "XLogData sendTime");
        ok(m.data == (const char *)xlogdata + 25, "XLogData payload borrows from the buffer at 25");
        is_int(m.len, 21, "XLogData payload length");
        is_int(m.data[0], 'B', "XLogData payload starts with the pgoutput type byte");
        ok(!m.reply_requested, "XLogData has no reply flag");

        is_int(parse(xlogdata, 25, &m, err), RELAY_OK, "XLogData with an empty payload parses");
        is_int(m.len, 0, "empty payload has length 0");

        is_int(parse(xlogdata, 24, &m, err), RELAY_EPROTO, "24-byte XLogData is rejected");
        is_str(err, "truncated XLogData message: need 25 bytes, have 24", "its message");
        is_int(parse(xlogdata, 1, &m, err), RELAY_EPROTO, "bare 'w' is rejected");
        ok(err[0] != '\0', "with a message");
}

static void test_keepalive(void)
{
        unsigned char buf[sizeof(keepalive) + 1];
        relay_walmsg_t m;
        char err[RELAY_ERRBUF];

        is_int(parse(keepalive, sizeof(keepalive), &m, err), RELAY_OK, "keepalive parses");
        is_int(m.type, 'k', "keepalive type");
        is_int(m.wal_end, 0x16b374d848, "keepalive walEnd");
        is_int(m.send_time, 0x0003047a11223344, "keepalive sendTime");
        ok(m.reply_requested, "keepalive reply requested");
        ok(m.data == NULL && m.len == 0, "keepalive has no payload");

        memcpy(buf, keepalive, sizeof(keepalive));
        buf[17] = 0;
        is_int(parse(buf, sizeof(keepalive), &m, err), RELAY_OK, "keepalive without reply parses");
        ok(!m.reply_requested, "reply not requested");

        is_int(parse(keepalive, 17, &m, err), RELAY_EPROTO, "17-byte keepalive is rejected");
        is_str(err, "invalid keepalive message: need 18 bytes, have 17", "its message");
        buf[18] = 0;
        is_int(parse(buf, 19, &m, err), RELAY_EPROTO, "19-byte keepalive is rejected");
        is_str(err, "invalid keepalive message: need 18 bytes, have 19", "its message");
        is_int(parse(keepalive, 1, &m, err), RELAY_EPROTO, "bare 'k' is rejected");
}

static void test_bad_type(void)
{
        static const unsigned char unknown[18] = {'x'};
        static const unsigned char status[34] = {'r'};
        relay_walmsg_t m;
        char err[RELAY_ERRBUF];

        is_int(parse(unknown, sizeof(unknown), &m, err), RELAY_EPROTO, "unknown type is rejected");
        is_str(err, "invalid replication message: unknown type byte 0x78", "its message");
        is_int(parse(status, sizeof(status), &m, err), RELAY_EPROTO,
               "a client-only 'r' from the server is rejected");
        is_int(parse(unknown, 0, &m, err), RELAY_EPROTO, "empty CopyData is rejected");
        ok(err[0] != '\0', "with a message");
}

static void test_status(void)
{
        /* One row per wire field. */
        /* clang-format off */
        static const unsigned char want[RELAY_WALPROTO_STATUS_LEN] = {
            'r',  0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x00, 0x00, 0x00,
            0x16, 0xb3, 0x74, 0xd8, 0x48, 0x00, 0x00, 0x00, 0x16, 0xb3, 0x74, 0xd8,
            0x47, 0x00, 0x03, 0x04, 0x7a, 0x11, 0x22, 0x33, 0x44, 0x01,
        };
        /* clang-format on */
        unsigned char buf[RELAY_WALPROTO_STATUS_LEN + 1];
        size_t n;

        memset(buf, 0xaa, sizeof(buf));
        n = relay_walproto_status((char *)buf, UINT64_C(0x0102030405060708), UINT64_C(0x16b374d848),
                                  UINT64_C(0x16b374d847), INT64_C(0x0003047a11223344), true);
        is_int(n, 34, "status update is 34 bytes");
        for (size_t i = 0; i < sizeof(want); i++)
                if (!ok(buf[i] == want[i], "status byte %zu is 0x%02x", i, want[i]))
                        tap_diag("  got 0x%02x", buf[i]);
        is_int(buf[34], 0xaa, "nothing written past byte 33");

        relay_walproto_status((char *)buf, 0, 0, 0, -1, false);
        is_int(buf[0], 'r', "status type byte");
        for (int i = 1; i < 25; i++)
                if (buf[i] != 0)
                        ok(0, "zero LSN byte %d", i);
        for (int i = 25; i < 33; i++)
                if (buf[i] != 0xff)
                        ok(0, "clock -1 byte %d", i);
        is_int(buf[33], 0, "reply flag 0");
        ok(1, "zero LSNs and negative clock encode as expected");
}

static relay_lsn_t get_lsn(const unsigned char *p)
{
        relay_lsn_t v = 0;
        for (int i = 0; i < 8; i++)
                v = v << 8 | p[i];
        return v;
}

/* write >= flush >= apply on the wire, whatever the caller asks for: the
 * server stores flush as confirmed_flush_lsn unchecked. */
static void test_status_order(void)
{
        static const struct {
                relay_lsn_t write, flush, apply, want_flush, want_apply;
        } cases[] = {
            {0x1978AC0, 0x197A400, 0x197A400, 0x1978AC0, 0x1978AC0}, /* flush above write */
            {0x300, 0x200, 0x250, 0x200, 0x200},                     /* apply above flush */
            {0x300, 0x200, 0x100, 0x200, 0x100},                     /* in order: as given */
            {0, 0x200, 0x200, 0, 0},                                 /* nothing received */
        };
        unsigned char buf[RELAY_WALPROTO_STATUS_LEN];

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                relay_walproto_status((char *)buf, cases[i].write, cases[i].flush, cases[i].apply,
                                      0, false);
                relay_lsn_t w = get_lsn(buf + 1), f = get_lsn(buf + 9), a = get_lsn(buf + 17);
                ok(w == cases[i].write && f == cases[i].want_flush && a == cases[i].want_apply,
                   "asked write " RELAY_LSN_FMT " flush " RELAY_LSN_FMT " apply " RELAY_LSN_FMT
                   ": sent " RELAY_LSN_FMT " " RELAY_LSN_FMT " " RELAY_LSN_FMT,
                   RELAY_LSN_ARGS(cases[i].write), RELAY_LSN_ARGS(cases[i].flush),
                   RELAY_LSN_ARGS(cases[i].apply), RELAY_LSN_ARGS(w), RELAY_LSN_ARGS(f),
                   RELAY_LSN_ARGS(a));
        }
}

int main(void)
{
        test_xlogdata();
        test_keepalive();
        test_bad_type();
        test_status();
        test_status_order();
        return done_testing();
}
