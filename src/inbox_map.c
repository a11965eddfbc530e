/*
 * inbox_map.c - message id and headers of a Kafka message as the inbox
 * hands them to PostgreSQL (see inbox_map.h). Owns nothing.
 *
 * PostgreSQL's text and jsonb refuse NUL bytes and invalid UTF-8 (in a
 * UTF8 database), so such a message could never be applied: it is refused
 * here, before any transaction, and dead-lettered at once instead of being
 * retried.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/inbox_map.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

int relay_inbox_utf8_ok(const char *s, size_t len)
{
        const unsigned char *p = (const unsigned char *)s, *end = p + len;

        while (p < end) {
                unsigned c = *p;
                size_t n;
                unsigned min;
                if (c == 0)
                        return 0;
                if (c < 0x80) {
                        p++;
                        continue;
                } else if ((c & 0xe0) == 0xc0) {
                        n = 1, min = 0x80, c &= 0x1f;
                } else if ((c & 0xf0) == 0xe0) {
                        n = 2, min = 0x800, c &= 0x0f;
                } else if ((c & 0xf8) == 0xf0) {
                        n = 3, min = 0x10000, c &= 0x07;
                } else {
                        return 0;
                }
                if ((size_t)(end - p) < n + 1)
                        return 0;
                for (size_t i = 1; i <= n; i++) {
                        if ((p[i] & 0xc0) != 0x80)
                                return 0;
                        c = (c << 6) | (p[i] & 0x3f);
                }
                /* overlong forms, surrogates and values past Unicode */
                if (c < min || (c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff)
                        return 0;
                p += n + 1;
        }
        return 1;
}

bool relay_inbox_server_unable(const char *state)
{
        if (!state || strlen(state) != 5)
                return false;
        /* Not all of class 58: 58P01 and 58P02 (a file missing or there
         * already) are what a handler's COPY or pg_read_file() asked for. */
        return strncmp(state, "08", 2) == 0 || strncmp(state, "57P", 3) == 0 ||
               strcmp(state, "58000") == 0 || strcmp(state, "58030") == 0 ||
               strcmp(state, "25006") == 0 || strcmp(state, "53100") == 0;
}

int relay_inbox_message_id(const rd_kafka_headers_t *hdrs, const char *name, char **out,
                           char *err, size_t errlen)
{
        const void *v;
        size_t len;

        if (!hdrs || rd_kafka_header_get_last(hdrs, name, &v, &len) != RD_KAFKA_RESP_ERR_NO_ERROR) {
                relay_err_set(err, errlen, "message has no \"%s\" header", name);
                return RELAY_EMAP;
        }
        if (!v || len == 0) {
                relay_err_set(err, errlen, "header \"%s\" of the message is %s", name,
                              v ? "empty" : "null");
                return RELAY_EMAP;
        }
        if (!relay_inbox_utf8_ok(v, len)) {
                relay_err_set(err, errlen, "header \"%s\" of the message is not UTF-8 text", name);
                return RELAY_EMAP;
        }
        if (!(*out = relay_dupn(v, len)))
                return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
        return 0;
}

int relay_inbox_headers_json(const rd_kafka_headers_t *hdrs, char **out, char *err, size_t errlen)
{
        json_t *o = json_object();
        const char *name;
        const void *v;
        size_t len;

        if (!o)
                goto oom;
        for (size_t i = 0; hdrs && rd_kafka_header_get_all(hdrs, i, &name, &v, &len) ==
                                           RD_KAFKA_RESP_ERR_NO_ERROR;
             i++) {
                json_t *jv;
                if (!relay_inbox_utf8_ok(name, strlen(name))) {
                        relay_err_set(err, errlen, "a header name of the message is not UTF-8");
                        json_decref(o);
                        return RELAY_EMAP;
                }
                if (!v) {
                        jv = json_null();
                } else if (!relay_inbox_utf8_ok(v, len)) {
                        relay_err_set(err, errlen, "header \"%s\" of the message is not UTF-8 text",
                                      name);
                        json_decref(o);
                        return RELAY_EMAP;
                } else if (!(jv = json_stringn(v, len))) {
                        goto oom;
                }
                /* json_object_set_new steals jv; a repeated name replaces the earlier value. */
                if (json_object_set_new(o, name, jv) != 0)
                        goto oom;
        }
        if (!(*out = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER)))
                goto oom;
        json_decref(o);
        return 0;
oom:
        json_decref(o);
        return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
}
