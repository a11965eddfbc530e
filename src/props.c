/*
 * props.c - java.util.Properties text (grammar in props.h), read once for
 * the two places that meet it: Debezium Server's application.properties
 * and the span context in an outbox row's tracing column.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/props.h"

#include "relay/common.h"

static bool blank(char c)
{
        return c == ' ' || c == '\t' || c == '\f';
}

bool relay_props_next(const char *s, size_t n, size_t *pos, char *line, relay_props_line_t *out)
{
        size_t i = *pos, ln = 0;

        for (;;) {
                while (i < n && blank(s[i]))
                        i++;
                if (i >= n) {
                        *pos = i;
                        return false;
                }
                if (s[i] == '\n' || s[i] == '\r') {
                        i++;
                        continue;
                }
                if (s[i] != '#' && s[i] != '!')
                        break;
                while (i < n && s[i] != '\n' && s[i] != '\r')
                        i++;
        }
        for (;;) {
                size_t st = i, bs = 0;
                while (i < n && s[i] != '\n' && s[i] != '\r')
                        i++;
                for (size_t k = i; k > st && s[k - 1] == '\\'; k--)
                        bs++;
                size_t take = i - st - bs % 2;
                for (size_t k = 0; k < take; k++)
                        line[ln + k] = s[st + k];
                ln += take;
                if (i < n && s[i] == '\r' && i + 1 < n && s[i + 1] == '\n')
                        i++;
                if (i < n)
                        i++;
                if (bs % 2 == 0 || i >= n)
                        break;
                while (i < n && blank(s[i]))
                        i++;
        }
        size_t k = 0;
        while (k < ln && line[k] != '=' && line[k] != ':' && !blank(line[k]))
                k += line[k] == '\\' && k + 1 < ln ? 2 : 1;
        size_t v = k;
        while (v < ln && blank(line[v]))
                v++;
        if (v < ln && (line[v] == '=' || line[v] == ':'))
                v++;
        while (v < ln && blank(line[v]))
                v++;
        *out = (relay_props_line_t){.len = ln, .klen = k, .vstart = v};
        *pos = i;
        return true;
}

/* The hex digits of a \uXXXX escape at s (4 of them): the UTF-16 unit, or -1. */
static long utf16_unit(const char *s, const char *end)
{
        long u = 0;
        if (end - s < 4)
                return -1;
        for (int i = 0; i < 4; i++) {
                int d = relay_hexval(s[i]);
                if (d < 0)
                        return -1;
                u = u * 16 + d;
        }
        return u;
}

long relay_props_unescape(const char *s, size_t n, char *out)
{
        const char *end = s + n;
        char *w = out;
        while (s < end) {
                if (*s != '\\' || s + 1 == end) {
                        *w++ = *s++;
                        continue;
                }
                s++;
                if (*s != 'u') {
                        *w++ = *s == 't' ? '\t' : *s == 'n' ? '\n' : *s == 'r' ? '\r'
                               : *s == 'f' ? '\f' : *s;
                        s++;
                        continue;
                }
                long c = utf16_unit(s + 1, end);
                s += 5;
                if (c >= 0xD800 && c < 0xDC00) {
                        long lo = end - s >= 6 && s[0] == '\\' && s[1] == 'u' ? utf16_unit(s + 2, end)
                                                                             : -1;
                        if (lo < 0xDC00 || lo > 0xDFFF)
                                return -1;
                        c = 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00);
                        s += 6;
                } else if (c < 0 || (c >= 0xDC00 && c <= 0xDFFF)) {
                        return -1;
                }
                if (c < 0x80) {
                        *w++ = (char)c;
                } else if (c < 0x800) {
                        *w++ = (char)(0xC0 | (c >> 6));
                        *w++ = (char)(0x80 | (c & 0x3F));
                } else if (c < 0x10000) {
                        *w++ = (char)(0xE0 | (c >> 12));
                        *w++ = (char)(0x80 | ((c >> 6) & 0x3F));
                        *w++ = (char)(0x80 | (c & 0x3F));
                } else {
                        *w++ = (char)(0xF0 | (c >> 18));
                        *w++ = (char)(0x80 | ((c >> 12) & 0x3F));
                        *w++ = (char)(0x80 | ((c >> 6) & 0x3F));
                        *w++ = (char)(0x80 | (c & 0x3F));
                }
        }
        *w = '\0';
        return (long)(w - out);
}
