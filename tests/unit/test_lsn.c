/*
 * test_lsn.c - LSN text parsing and formatting: round trips at the edges and
 * every malformed spelling the parser must refuse.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/lsn.h"
#include "tap.h"

static void round_trip(const char *in, relay_lsn_t want, const char *canon)
{
        relay_lsn_t got = 0;
        char buf[RELAY_LSN_BUFSZ];

        is_int(relay_lsn_parse(in, &got), 0, "parse \"%s\"", in);
        ok(got == want, "\"%s\" is 0x%016llx", in, (unsigned long long)want);
        is_str(relay_lsn_format(got, buf), canon, "\"%s\" formats as \"%s\"", in, canon);
}

static void rejects(const char *in)
{
        relay_lsn_t got = 0x1234;
        char label[64];
        size_t n = 0;

        /* A raw newline in a test name would break the TAP line. */
        for (const char *p = in; *p != '\0' && n + 3 < sizeof(label); p++) {
                if (*p == '\n') {
                        label[n++] = '\\';
                        label[n++] = 'n';
                } else {
                        label[n++] = *p;
                }
        }
        label[n] = '\0';
        is_int(relay_lsn_parse(in, &got), RELAY_EINVAL, "rejects \"%s\"", label);
        ok(got == 0x1234, "\"%s\" leaves the output untouched", label);
}

int main(void)
{
        static const char *const bad[] = {
                "",  "/",    "1/",  "/1",  "1/2/3", "123456789/0", "0/123456789", " 1/2",
                "1/2 ", "-1/2", "g/1", "1/g", "0x1/2", "+1/2", "1//2", "1\\2", "1/2\n",
        };
        char buf[RELAY_LSN_BUFSZ];
        relay_lsn_t got;

        round_trip("0/0", 0, "0/0");
        round_trip("FFFFFFFF/FFFFFFFF", UINT64_MAX, "FFFFFFFF/FFFFFFFF");
        round_trip("16/B374D848", UINT64_C(0x16B374D848), "16/B374D848");
        round_trip("16/b374d848", UINT64_C(0x16B374D848), "16/B374D848");
        round_trip("00000001/00000002", UINT64_C(0x100000002), "1/2");
        round_trip("0/1", 1, "0/1");
        round_trip("1/0", UINT64_C(0x100000000), "1/0");

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                rejects(bad[i]);
        is_int(relay_lsn_parse(NULL, &got), RELAY_EINVAL, "rejects NULL");

        /* Every formatted value parses back to itself. */
        for (uint64_t v = 1; v != 0; v <<= 1) {
                relay_lsn_t back = 0;
                if (relay_lsn_parse(relay_lsn_format(v | (v >> 3), buf), &back) != 0 ||
                    back != (v | (v >> 3))) {
                        ok(0, "round trip of 0x%016llx", (unsigned long long)v);
                        return done_testing();
                }
        }
        ok(1, "64 formatted values parse back to themselves");
        is_int(strlen(relay_lsn_format(UINT64_MAX, buf)) + 1, RELAY_LSN_BUFSZ,
               "RELAY_LSN_BUFSZ fits the longest LSN exactly");

        return done_testing();
}
