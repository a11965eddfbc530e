/*
 * format.c - the wire-compatibility encodings of format.h: what Kafka
 * Connect's StringConverter, SimpleHeaderConverter and JsonConverter make of
 * the Connect values Debezium's PostgreSQL connector and Outbox Event Router
 * produce, byte for byte.
 *
 * JsonConverter serialises through Jackson's UTF-8 generator: no blanks,
 * '"' and '\\' escaped, \b \t \n \f \r by name and the other control
 * characters as \u00XX (upper-case hex), code points outside the BMP as an
 * escaped surrogate pair (\uD83D\uDE00), everything else (the rest of
 * non-ASCII included) as is; byte arrays as base64 with padding and no line
 * breaks.
 * An envelope's schema lists type, optional, then name and version, in
 * JsonConverter.asJsonSchema()'s order. The writer is our own because
 * jansson escapes '/' and non-ASCII differently and reorders nothing we
 * could rely on. The differential test (tests/debezium) checks these bytes
 * against Debezium 3.6.1 itself.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/format.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#define BOOLOID 16
#define BYTEAOID 17
#define INT8OID 20
#define INT2OID 21
#define INT4OID 23
#define TEXTOID 25
#define JSONOID 114
#define BPCHAROID 1042
#define VARCHAROID 1043
#define UUIDOID 2950
#define JSONBOID 3802

static int jackson_string(relay_fmtbuf_t *b, const char *s, size_t n);

void relay_fmtbuf_free(relay_fmtbuf_t *b)
{
        if (!b)
                return;
        free(b->p);
        b->p = NULL;
        b->len = b->cap = 0;
}

static int reserve(relay_fmtbuf_t *b, size_t more)
{
        if (b->len + more <= b->cap)
                return 0;
        size_t n = b->cap ? b->cap : 256;
        while (n < b->len + more)
                n *= 2;
        char *p = realloc(b->p, n);
        if (!p)
                return RELAY_ENOMEM;
        b->p = p;
        b->cap = n;
        return 0;
}

static int put(relay_fmtbuf_t *b, const char *s, size_t n)
{
        if (reserve(b, n))
                return RELAY_ENOMEM;
        if (n)
                memcpy(b->p + b->len, s, n);
        b->len += n;
        return 0;
}

static int puts_(relay_fmtbuf_t *b, const char *s)
{
        return put(b, s, strlen(s));
}

void relay_format_encodings(relay_format_profile_t p, relay_format_enc_t *key,
                            relay_format_enc_t *value, relay_format_enc_t *header)
{
        switch (p) {
        case RELAY_PROFILE_CONNECT_JSON:
                *key = *value = RELAY_ENC_JSON;
                *header = RELAY_ENC_SIMPLE;
                break;
        case RELAY_PROFILE_CONNECT_JSON_SCHEMA:
                *key = *value = RELAY_ENC_ENVELOPE;
                *header = RELAY_ENC_SIMPLE;
                break;
        case RELAY_PROFILE_DEBEZIUM_SERVER:
                *key = *value = *header = RELAY_ENC_ENVELOPE;
                break;
        case RELAY_PROFILE_CONNECT_STRING:
                *key = *value = RELAY_ENC_RAW;
                *header = RELAY_ENC_SIMPLE;
                break;
        case RELAY_PROFILE_RAW:
        default:
                *key = *value = *header = RELAY_ENC_RAW;
                break;
        }
}

relay_format_kind_t relay_format_kind(uint32_t typoid)
{
        switch (typoid) {
        case TEXTOID:
        case VARCHAROID:
        case BPCHAROID:
                return RELAY_KIND_STRING;
        case UUIDOID:
                return RELAY_KIND_UUID;
        case JSONOID:
        case JSONBOID:
                return RELAY_KIND_JSON;
        case BYTEAOID:
                return RELAY_KIND_BYTES;
        case INT2OID:
                return RELAY_KIND_INT16;
        case INT4OID:
                return RELAY_KIND_INT32;
        case INT8OID:
                return RELAY_KIND_INT64;
        case BOOLOID:
                return RELAY_KIND_BOOLEAN;
        default:
                return RELAY_KIND_UNSUPPORTED;
        }
}

const char *relay_format_kind_name(relay_format_kind_t k)
{
        static const char *const names[] = {RELAY_FORMAT_KINDS(RELAY_NAME_ENTRY)};
        return RELAY_NAME_OF(names, k, "unsupported");
}

/* JsonConverter.asJsonSchema() for the kinds above: type, optional, name, version
 * (and "field" last for a struct's field: asJsonSchema's copy gets it put after). */
static int schema_json(relay_fmtbuf_t *b, relay_format_kind_t k, bool optional, const char *field);

int relay_format_schema(relay_fmtbuf_t *b, relay_format_kind_t kind, bool optional,
                        const char *field)
{
        return schema_json(b, kind, optional, field);
}

static int schema_json(relay_fmtbuf_t *b, relay_format_kind_t k, bool optional, const char *field)
{
        const char *type = "string", *name = NULL;
        switch (k) {
        case RELAY_KIND_UUID:
                name = "io.debezium.data.Uuid";
                break;
        case RELAY_KIND_JSON:
                name = "io.debezium.data.Json";
                break;
        case RELAY_KIND_BYTES:
                type = "bytes";
                break;
        case RELAY_KIND_INT16:
                type = "int16";
                break;
        case RELAY_KIND_INT32:
                type = "int32";
                break;
        case RELAY_KIND_INT64:
                type = "int64";
                break;
        case RELAY_KIND_BOOLEAN:
                type = "boolean";
                break;
        default:
                break;
        }
        /* Sequenced: '|' would leave the calls' order to the compiler. */
        if (puts_(b, "{\"type\":\"") || puts_(b, type) || puts_(b, "\",\"optional\":") ||
            puts_(b, optional ? "true" : "false"))
                return RELAY_ENOMEM;
        if (name && (puts_(b, ",\"name\":\"") || puts_(b, name) || puts_(b, "\",\"version\":1")))
                return RELAY_ENOMEM;
        if (field && (puts_(b, ",\"field\":") || jackson_string(b, field, strlen(field))))
                return RELAY_ENOMEM;
        return puts_(b, "}");
}

/*
 * A 4-byte UTF-8 sequence at s (n bytes left) as "\uD8xx\uDCxx", upper-case
 * hex, the way JsonConverter writes a code point outside the Basic
 * Multilingual Plane (observed against Kafka 4.x's Jackson: "\uD83D\uDE00"
 * for U+1F600). False when s is not a well-formed sequence (copied as is).
 */
static bool utf8_supplementary(const char *s, size_t n, char out[12])
{
        static const char hex[] = "0123456789ABCDEF";
        const unsigned char *u = (const unsigned char *)s;
        if (n < 4 || (u[1] & 0xc0) != 0x80 || (u[2] & 0xc0) != 0x80 || (u[3] & 0xc0) != 0x80)
                return false;
        uint32_t cp = (uint32_t)(u[0] & 0x07) << 18 | (uint32_t)(u[1] & 0x3f) << 12 |
                      (uint32_t)(u[2] & 0x3f) << 6 | (uint32_t)(u[3] & 0x3f);
        if (cp < 0x10000 || cp > 0x10ffff)
                return false;
        cp -= 0x10000;
        uint32_t half[2] = {0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff)};
        for (int h = 0; h < 2; h++) {
                char *o = out + 6 * h;
                o[0] = '\\';
                o[1] = 'u';
                o[2] = hex[half[h] >> 12];
                o[3] = hex[(half[h] >> 8) & 15];
                o[4] = hex[(half[h] >> 4) & 15];
                o[5] = hex[half[h] & 15];
        }
        return true;
}

/* Jackson's string escaping (UTF8JsonGenerator, default features). */
static int jackson_string(relay_fmtbuf_t *b, const char *s, size_t n)
{
        static const char hex[] = "0123456789ABCDEF";
        if (reserve(b, n + 2))
                return RELAY_ENOMEM;
        b->p[b->len++] = '"';
        size_t run = 0; /* start of the bytes not yet copied */
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)s[i];
                char esc[6], esc12[12];
                size_t el = 0;
                if (c >= 0xf0 && c <= 0xf4 && utf8_supplementary(s + i, n - i, esc12)) {
                        /* Outside the BMP: Java holds a surrogate pair, and
                         * Jackson writes both halves escaped. */
                        if (put(b, s + run, i - run) || put(b, esc12, 12))
                                return RELAY_ENOMEM;
                        i += 3;
                        run = i + 1;
                        continue;
                }
                if (c == '"' || c == '\\') {
                        esc[0] = '\\';
                        esc[1] = (char)c;
                        el = 2;
                } else if (c < 0x20) {
                        esc[0] = '\\';
                        el = 2;
                        switch (c) {
                        case '\b': esc[1] = 'b'; break;
                        case '\t': esc[1] = 't'; break;
                        case '\n': esc[1] = 'n'; break;
                        case '\f': esc[1] = 'f'; break;
                        case '\r': esc[1] = 'r'; break;
                        default:
                                memcpy(esc, "\\u00", 4);
                                esc[4] = hex[c >> 4];
                                esc[5] = hex[c & 15];
                                el = 6;
                        }
                }
                if (!el)
                        continue;
                if (put(b, s + run, i - run) || put(b, esc, el))
                        return RELAY_ENOMEM;
                run = i + 1;
        }
        if (put(b, s + run, n - run) || put(b, "\"", 1))
                return RELAY_ENOMEM;
        return 0;
}

/* java.util.Base64's basic encoder (and Jackson's MIME_NO_LINEFEEDS): padded. */
static int base64(relay_fmtbuf_t *b, const unsigned char *s, size_t n)
{
        static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        if (reserve(b, (n + 2) / 3 * 4))
                return RELAY_ENOMEM;
        char *o = b->p + b->len;
        size_t i = 0;
        for (; i + 3 <= n; i += 3) {
                uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
                *o++ = a[v >> 18];
                *o++ = a[(v >> 12) & 63];
                *o++ = a[(v >> 6) & 63];
                *o++ = a[v & 63];
        }
        if (i < n) {
                uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0);
                *o++ = a[v >> 18];
                *o++ = a[(v >> 12) & 63];
                *o++ = i + 1 < n ? a[(v >> 6) & 63] : '=';
                *o++ = '=';
        }
        b->len = (size_t)(o - b->p);
        return 0;
}

/* The value's Java string form (String.valueOf, Values.convertToString). */
static int string_form(relay_fmtbuf_t *b, relay_format_kind_t k, const char *d, size_t n)
{
        if (k == RELAY_KIND_BOOLEAN) {
                if (n == 1 && (d[0] == 't' || d[0] == 'f'))
                        return puts_(b, d[0] == 't' ? "true" : "false");
                return RELAY_EINVAL;
        }
        return put(b, d, n);
}

/* The JSON form of a non-NULL value. */
static int json_value(relay_fmtbuf_t *b, relay_format_kind_t k, const char *d, size_t n)
{
        switch (k) {
        case RELAY_KIND_BYTES:
                if (put(b, "\"", 1) || base64(b, (const unsigned char *)d, n) || put(b, "\"", 1))
                        return RELAY_ENOMEM;
                return 0;
        case RELAY_KIND_INT16:
        case RELAY_KIND_INT32:
        case RELAY_KIND_INT64:
        case RELAY_KIND_BOOLEAN:
                /* PostgreSQL's integer output is Jackson's: optional '-', digits. */
                return string_form(b, k, d, n);
        default:
                return jackson_string(b, d, n);
        }
}

int relay_format_append(relay_fmtbuf_t *b, relay_format_enc_t enc, relay_format_kind_t kind,
                        bool optional, const char *data, size_t len, bool *is_null)
{
        *is_null = false;
        switch (enc) {
        case RELAY_ENC_RAW:
                if (!data) {
                        *is_null = true;
                        return 0;
                }
                return kind == RELAY_KIND_BYTES ? put(b, data, len) : string_form(b, kind, data, len);
        case RELAY_ENC_SIMPLE:
                if (!data) {
                        *is_null = true;
                        return 0;
                }
                if (kind == RELAY_KIND_BYTES)
                        return base64(b, (const unsigned char *)data, len);
                return string_form(b, kind, data, len);
        case RELAY_ENC_JSON:
                /* An optional schema's NULL is JSON null, not a Kafka null. */
                if (!data)
                        return puts_(b, "null");
                return json_value(b, kind, data, len);
        case RELAY_ENC_ENVELOPE: {
                int rc = puts_(b, "{\"schema\":");
                if (!rc)
                        rc = schema_json(b, kind, optional, NULL);
                if (!rc)
                        rc = puts_(b, ",\"payload\":");
                if (!rc)
                        rc = data ? json_value(b, kind, data, len) : puts_(b, "null");
                if (!rc)
                        rc = puts_(b, "}");
                return rc;
        }
        }
        return RELAY_EINVAL;
}

int relay_format_put(relay_fmtbuf_t *b, const char *s, size_t n)
{
        return put(b, s, n);
}

int relay_format_string(relay_fmtbuf_t *b, const char *s, size_t n)
{
        return jackson_string(b, s, n);
}

int relay_format_json(relay_fmtbuf_t *b, relay_format_kind_t kind, const char *data, size_t len)
{
        return data ? json_value(b, kind, data, len) : puts_(b, "null");
}

void relay_format_header_text(const char *v, size_t n, char *buf, size_t buflen, const char **s,
                              size_t *len)
{
        static const char head[] = "{\"schema\":{", mid[] = "},\"payload\":";
        *s = v;
        *len = n;
        if (!v || n < sizeof(head) + sizeof(mid) || memcmp(v, head, sizeof(head) - 1) != 0 ||
            v[n - 1] != '}')
                return;
        /* The schema holds no payload, and a string payload's quotes are
         * escaped: the last "},"payload": is ours. A number (an integer
         * id: int64) is its text as PostgreSQL wrote it, which the error
         * policy must find again (0159); a string's quotes are dropped. */
        for (size_t i = n - 1; i-- > sizeof(head) - 1;)
                if (i + sizeof(mid) - 1 < n - 1 && memcmp(v + i, mid, sizeof(mid) - 1) == 0) {
                        const char *p = v + i + sizeof(mid) - 1;
                        size_t l = (size_t)(v + n - 1 - p);
                        if (l == 4 && memcmp(p, "null", 4) == 0)
                                return; /* no text to name: the header as it is */
                        if (p[0] == '"') {
                                /* The text as it was before Jackson's
                                 * escapes (a quote, a backslash, a control
                                 * character, a surrogate pair). */
                                json_t *j = json_loadb(p, l, JSON_DECODE_ANY | JSON_ALLOW_NUL,
                                                       NULL);
                                if (!json_is_string(j) || buflen == 0) {
                                        json_decref(j);
                                        return;
                                }
                                l = json_string_length(j);
                                if (l > buflen)
                                        l = buflen;
                                memcpy(buf, json_string_value(j), l);
                                json_decref(j);
                                p = buf;
                        }
                        *s = p;
                        *len = l;
                        return;
                }
}
