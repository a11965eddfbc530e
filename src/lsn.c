/*
 * lsn.c - the one place WAL positions are turned into text and back, so the
 * "%X/%X" spelling PostgreSQL uses is parsed strictly and printed identically
 * everywhere (logs, SQL, status output).
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <stdio.h>

#include "relay/lsn.h"

/*
 * Read 1 to 8 hex digits from *p into *half and advance *p past them.
 * Hand-rolled rather than strtoul because strtoul accepts a sign, leading
 * blanks and "0x", none of which is an LSN.
 */
static int parse_half(const char **p, uint32_t *half)
{
        const char *s = *p;
        uint32_t v = 0;
        int n = 0;
        int d;

        while ((d = relay_hexval(s[n])) >= 0) {
                if (n == 8)
                        return -1;
                v = (v << 4) | (uint32_t)d;
                n++;
        }
        if (n == 0)
                return -1;
        *half = v;
        *p = s + n;
        return 0;
}

int relay_lsn_parse(const char *s, relay_lsn_t *out)
{
        uint32_t hi, lo;

        if (s == NULL)
                return RELAY_EINVAL;
        if (parse_half(&s, &hi) < 0 || *s++ != '/' || parse_half(&s, &lo) < 0 || *s != '\0')
                return RELAY_EINVAL;
        *out = ((relay_lsn_t)hi << 32) | lo;
        return 0;
}

char *relay_lsn_format(relay_lsn_t lsn, char *buf)
{
        snprintf(buf, RELAY_LSN_BUFSZ, RELAY_LSN_FMT, RELAY_LSN_ARGS(lsn));
        return buf;
}
