/*
 * test_format.c - the profiles' encodings, byte for byte: what Kafka
 * Connect's StringConverter, SimpleHeaderConverter and JsonConverter
 * (Jackson) write for the Connect values Debezium gives outbox columns.
 * The expected strings are the converters' output as the differential test
 * (tests/debezium) observed it from Debezium 3.6.1; this test pins them
 * without a JVM.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relay/format.h"

#include "tap.h"

/* Encode (data, len) and compare with want (NULL: a Kafka null). */
static void enc(relay_format_enc_t e, relay_format_kind_t k, bool opt, const char *data,
                size_t len, const char *want, const char *what)
{
        relay_fmtbuf_t b = {0};
        bool null;
        int rc = relay_format_append(&b, e, k, opt, data, len, &null);
        if (rc) {
                ok(0, "%s: rc %d", what, rc);
        } else if (!want) {
                ok(null && b.len == 0, "%s: a Kafka null", what);
        } else {
                char *got = malloc(b.len + 1);
                if (!got)
                        tap_bail("out of memory");
                memcpy(got, b.p ? b.p : "", b.len);
                got[b.len] = '\0';
                ok(!null, "%s: not a Kafka null", what);
                is_str(got, want, "%s", what);
                free(got);
        }
        relay_fmtbuf_free(&b);
}

#define S(s) s, sizeof(s) - 1

int main(void)
{
        /* Kinds from PostgreSQL type OIDs (Debezium's PostgreSQL connector). */
        is_int(relay_format_kind(25), RELAY_KIND_STRING, "text is a string");
        is_int(relay_format_kind(1043), RELAY_KIND_STRING, "varchar is a string");
        is_int(relay_format_kind(2950), RELAY_KIND_UUID, "uuid is io.debezium.data.Uuid");
        is_int(relay_format_kind(114), RELAY_KIND_JSON, "json is io.debezium.data.Json");
        is_int(relay_format_kind(3802), RELAY_KIND_JSON, "jsonb is io.debezium.data.Json");
        is_int(relay_format_kind(17), RELAY_KIND_BYTES, "bytea is bytes");
        is_int(relay_format_kind(23), RELAY_KIND_INT32, "integer is int32");
        is_int(relay_format_kind(1184), RELAY_KIND_UNSUPPORTED, "timestamptz is not supported");

        /* StringConverter / ByteArrayConverter. */
        enc(RELAY_ENC_RAW, RELAY_KIND_STRING, false, S("order-ü"), "order-ü", "raw string");
        enc(RELAY_ENC_RAW, RELAY_KIND_BYTES, true, S("\x7f\x01"), "\x7f\x01", "raw bytes as is");
        enc(RELAY_ENC_RAW, RELAY_KIND_JSON, true, NULL, 0, NULL, "raw NULL is a Kafka null");
        enc(RELAY_ENC_RAW, RELAY_KIND_STRING, true, S(""), "", "raw empty is empty, not null");
        enc(RELAY_ENC_RAW, RELAY_KIND_BOOLEAN, false, S("t"), "true", "raw boolean: Boolean.toString");

        /* SimpleHeaderConverter. */
        enc(RELAY_ENC_SIMPLE, RELAY_KIND_UUID, false, S("8d5c5c6e-0000-4000-8000-000000000001"),
            "8d5c5c6e-0000-4000-8000-000000000001", "simple uuid header");
        enc(RELAY_ENC_SIMPLE, RELAY_KIND_BYTES, true, S("\x01\x02\x03\xff"), "AQID/w==",
            "simple bytes: base64");
        enc(RELAY_ENC_SIMPLE, RELAY_KIND_STRING, true, NULL, 0, NULL, "simple NULL: null header");

        /* JsonConverter, schemas.enable=false (Jackson's escaping). */
        enc(RELAY_ENC_JSON, RELAY_KIND_STRING, false, S("a\"b\\c/d\te\x01ü€"),
            "\"a\\\"b\\\\c/d\\te\\u0001ü€\"", "json string escapes");
        enc(RELAY_ENC_JSON, RELAY_KIND_STRING, false, S("ü😀€\xf0\x90\x80\x80"),
            "\"ü\\uD83D\\uDE00€\\uD800\\uDC00\"",
            "json: outside the BMP as an escaped surrogate pair, the rest of UTF-8 as is");
        enc(RELAY_ENC_RAW, RELAY_KIND_STRING, false, S("😀"), "😀", "raw: emoji as is");
        enc(RELAY_ENC_JSON, RELAY_KIND_STRING, false, S("\b\f\n\r\x1f\x7f"),
            "\"\\b\\f\\n\\r\\u001F\x7f\"", "json control characters");
        enc(RELAY_ENC_JSON, RELAY_KIND_JSON, true, S("{\"a\": 1}"), "\"{\\\"a\\\": 1}\"",
            "json payload stays a string");
        enc(RELAY_ENC_JSON, RELAY_KIND_JSON, true, NULL, 0, "null", "json NULL is null");
        enc(RELAY_ENC_JSON, RELAY_KIND_BYTES, true, S("ab"), "\"YWI=\"", "json bytes: base64");
        enc(RELAY_ENC_JSON, RELAY_KIND_BYTES, true, S(""), "\"\"", "json empty bytes");
        enc(RELAY_ENC_JSON, RELAY_KIND_INT32, false, S("-42"), "-42", "json int32");
        enc(RELAY_ENC_JSON, RELAY_KIND_BOOLEAN, false, S("f"), "false", "json boolean");

        /* JsonConverter, schemas.enable=true. */
        enc(RELAY_ENC_ENVELOPE, RELAY_KIND_STRING, false, S("order-42"),
            "{\"schema\":{\"type\":\"string\",\"optional\":false},\"payload\":\"order-42\"}",
            "envelope string");
        enc(RELAY_ENC_ENVELOPE, RELAY_KIND_UUID, false, S("8d5c5c6e-0000-4000-8000-000000000001"),
            "{\"schema\":{\"type\":\"string\",\"optional\":false,\"name\":\"io.debezium.data.Uuid\","
            "\"version\":1},\"payload\":\"8d5c5c6e-0000-4000-8000-000000000001\"}",
            "envelope uuid");
        enc(RELAY_ENC_ENVELOPE, RELAY_KIND_JSON, true, NULL, 0,
            "{\"schema\":{\"type\":\"string\",\"optional\":true,\"name\":\"io.debezium.data.Json\","
            "\"version\":1},\"payload\":null}",
            "envelope NULL json");
        enc(RELAY_ENC_ENVELOPE, RELAY_KIND_BYTES, true, S("abc"),
            "{\"schema\":{\"type\":\"bytes\",\"optional\":true},\"payload\":\"YWJj\"}",
            "envelope bytes");
        enc(RELAY_ENC_ENVELOPE, RELAY_KIND_INT64, true, S("9007199254740993"),
            "{\"schema\":{\"type\":\"int64\",\"optional\":true},\"payload\":9007199254740993}",
            "envelope int64");

        relay_format_enc_t k, v, h;
        relay_format_encodings(RELAY_PROFILE_DEBEZIUM_SERVER, &k, &v, &h);
        ok(k == RELAY_ENC_ENVELOPE && v == RELAY_ENC_ENVELOPE && h == RELAY_ENC_ENVELOPE,
           "debezium-server: JSON with schemas for key, value and headers");
        relay_format_encodings(RELAY_PROFILE_CONNECT_JSON, &k, &v, &h);
        ok(k == RELAY_ENC_JSON && v == RELAY_ENC_JSON && h == RELAY_ENC_SIMPLE,
           "connect-json: JsonConverter key and value, SimpleHeaderConverter headers");
        /* A failed delivery names the event by its id header's text, also
         * under debezium-server's JSON headers. */
        {
                static const char env[] = "{\"schema\":{\"type\":\"string\",\"optional\":false,"
                                          "\"name\":\"io.debezium.data.Uuid\",\"version\":1},"
                                          "\"payload\":\"8d5c5c6e-0000-4000-8000-000000000001\"}";
                const char *t;
                char buf[64];
                size_t tl;
                relay_format_header_text(env, sizeof(env) - 1, buf, sizeof(buf), &t, &tl);
                ok(tl == 36 && memcmp(t, "8d5c5c6e-0000-4000-8000-000000000001", 36) == 0,
                   "the id inside a JSON header");
                relay_format_header_text("order-1", 7, buf, sizeof(buf), &t, &tl);
                ok(tl == 7 && memcmp(t, "order-1", 7) == 0, "a plain header as it is");
                static const char nul[] = "{\"schema\":{\"type\":\"string\",\"optional\":true},\"payload\":null}";
                relay_format_header_text(nul, sizeof(nul) - 1, buf, sizeof(buf), &t, &tl);
                ok(t == nul && tl == sizeof(nul) - 1, "a null payload: left as it is");
                static const char i64[] = "{\"schema\":{\"type\":\"int64\",\"optional\":false},"
                                          "\"payload\":42}";
                relay_format_header_text(i64, sizeof(i64) - 1, buf, sizeof(buf), &t, &tl);
                ok(tl == 2 && memcmp(t, "42", 2) == 0, "an integer id inside a JSON header: its text");
                static const char esc[] = "{\"schema\":{\"type\":\"string\",\"optional\":false},"
                                          "\"payload\":\"a},\\\"payload\\\":1\"}";
                relay_format_header_text(esc, sizeof(esc) - 1, buf, sizeof(buf), &t, &tl);
                ok(tl == 14 && memcmp(t, "a},\"payload\":1", 14) == 0,
                   "a string holding an escaped \"payload\": the whole string, unescaped (%.*s)",
                   (int)tl, t);
                /* As the row held it: Jackson's escapes undone (a quote, a
                 * backslash, a tab, a control character, a surrogate pair). */
                static const char q[] = "{\"schema\":{\"type\":\"string\",\"optional\":false},"
                                        "\"payload\":\"say \\\"hi\\\" \\\\ \\t\\u0001 \\uD83D\\uDE00\"}";
                static const char want[] = "say \"hi\" \\ \t\001 \xF0\x9F\x98\x80";
                relay_format_header_text(q, sizeof(q) - 1, buf, sizeof(buf), &t, &tl);
                ok(tl == sizeof(want) - 1 && memcmp(t, want, tl) == 0,
                   "a string id with JSON escapes: its text as written (%.*s)", (int)tl, t);
                relay_format_header_text(q, sizeof(q) - 1, buf, 3, &t, &tl);
                ok(tl == 3 && memcmp(t, "say", 3) == 0, "cut to the buffer's size");
                static const char bad[] = "{\"schema\":{\"type\":\"string\"},\"payload\":\"x}";
                relay_format_header_text(bad, sizeof(bad) - 1, buf, sizeof(buf), &t, &tl);
                ok(t == bad && tl == sizeof(bad) - 1, "an unterminated string: left as it is");
        }
        return done_testing();
}
