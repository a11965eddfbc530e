/*
 * test_expand.c - table.expand.json.payload: what Debezium's router
 * (JsonSchemaData) and Kafka Connect's converters make of a JSON object
 * payload. Every expected string below is what Debezium 3.6.1's
 * JsonSchemaData with Kafka Connect's StringConverter (Struct.toString())
 * and JsonConverter (schemas.enable false and true) produced for the same
 * document (tests/unit/fixtures/java/ExpandCases.java on tests/bench/debezium's
 * libraries, Java 17; but for the field order of merged structs, below), and the refused
 * documents are those it throws on; 0130-debezium-diff compares jsonb
 * payloads against the running Debezium as well.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <stdlib.h>
#include <string.h>

#include "relay/expand.h"

#include "tap.h"

static const char *run(relay_fmtbuf_t *b, relay_format_enc_t enc, const char *doc, int *rc)
{
        *rc = relay_expand_payload(b, enc, "payload", doc, strlen(doc));
        if (*rc != 1)
                return "";
        if (relay_format_put(b, "", 1) != 0)
                tap_bail("out of memory");
        return b->p;
}

int main(void)
{
        relay_fmtbuf_t b = {0};
        int rc;
        const char *doc = "{\"a\": 1, \"b\": \"x\\\"y\", \"n\": null, \"e\": [], \"big\": 12345678901, "
                          "\"f\": [2.50, -0.001, 0.0001, 12345678.9, 15000000000.0, -0.0], "
                          "\"o\": {\"p\": {}, \"t\": [\"u\", null], \"ok\": false}}";

        is_str(run(&b, RELAY_ENC_RAW, doc, &rc),
               "Struct{a=1,b=x\"y,big=12345678901,f=[2.5, -0.001, 1.0E-4, 1.23456789E7, 1.5E10, -0.0],"
               "o=Struct{p=Struct{},t=[u, null],ok=false}}",
               "StringConverter: Struct.toString(), null and empty-array members left out");
        is_int(rc, 1, "expanded");
        is_str(run(&b, RELAY_ENC_JSON, doc, &rc),
               "{\"a\":1,\"b\":\"x\\\"y\",\"big\":12345678901,\"f\":[2.5,-0.001,1.0E-4,1.23456789E7,"
               "1.5E10,-0.0],\"o\":{\"p\":{},\"t\":[\"u\",null],\"ok\":false}}",
               "JsonConverter: the struct's fields, doubles as Java prints them");
        is_str(run(&b, RELAY_ENC_ENVELOPE, "{\"a\": 1, \"big\": 12345678901, \"o\": {\"t\": [true]}}", &rc),
               "{\"schema\":{\"type\":\"struct\",\"fields\":[{\"type\":\"int32\",\"optional\":true,"
               "\"field\":\"a\"},{\"type\":\"int64\",\"optional\":true,\"field\":\"big\"},"
               "{\"type\":\"struct\",\"fields\":[{\"type\":\"array\",\"items\":{\"type\":\"boolean\","
               "\"optional\":true},\"optional\":true,\"field\":\"t\"}],\"optional\":true,"
               "\"name\":\"payload.o\",\"field\":\"o\"}],\"optional\":true,\"name\":\"payload\"},"
               "\"payload\":{\"a\":1,\"big\":12345678901,\"o\":{\"t\":[true]}}}",
               "JsonConverter with schemas: the inferred schema, structs named by their path");
        is_str(run(&b, RELAY_ENC_ENVELOPE, "{\"f\": [2.5], \"l\": [{\"a\": 1}, {\"a\": 2}]}", &rc),
               "{\"schema\":{\"type\":\"struct\",\"fields\":[{\"type\":\"array\",\"items\":"
               "{\"type\":\"double\",\"optional\":true},\"optional\":true,\"field\":\"f\"},"
               "{\"type\":\"array\",\"items\":{\"type\":\"struct\",\"fields\":[{\"type\":"
               "\"int32\",\"optional\":true,\"field\":\"a\"}],\"optional\":true,\"name\":"
               "\"payload.l\"},\"optional\":true,\"field\":\"l\"}],\"optional\":true,\"name\":"
               "\"payload\"},\"payload\":{\"f\":[2.5],\"l\":[{\"a\":1},{\"a\":2}]}}",
               "float64 is \"double\"; an array of alike objects: their struct, named by the path");
        /* Objects with different members merge into one struct that is not
         * optional, absent fields null. Java merges a HashSet of the member
         * schemas, so its field order changed between two runs of
         * ExpandCases.java (b, a, then a, b); the relay's is the array's
         * (README). These two cases pin the relay's order. */
        is_str(run(&b, RELAY_ENC_JSON, "{\"l\": [{\"b\": \"x\", \"a\": 2}, {\"a\": 1}, {\"b\": \"y\"}]}", &rc),
               "{\"l\":[{\"b\":\"x\",\"a\":2},{\"b\":null,\"a\":1},{\"b\":\"y\",\"a\":null}]}",
               "an array of objects with different members: one merged struct, absent fields null");
        is_str(run(&b, RELAY_ENC_ENVELOPE, "{\"l\": [{\"b\": \"x\", \"a\": 2}, {\"a\": 1}, {\"b\": \"y\"}]}", &rc),
               "{\"schema\":{\"type\":\"struct\",\"fields\":[{\"type\":\"array\",\"items\":{\"type\":"
               "\"struct\",\"fields\":[{\"type\":\"string\",\"optional\":true,\"field\":\"b\"},"
               "{\"type\":\"int32\",\"optional\":true,\"field\":\"a\"}],\"optional\":false,\"name\":"
               "\"payload.l\"},\"optional\":true,\"field\":\"l\"}],\"optional\":true,\"name\":"
               "\"payload\"},\"payload\":{\"l\":[{\"b\":\"x\",\"a\":2},{\"b\":null,\"a\":1},"
               "{\"b\":\"y\",\"a\":null}]}}",
               "... and its struct schema is not optional");

        /* Values that do fit: a null among alike objects (optional struct), an
         * empty array and a null for an array member. */
        is_str(run(&b, RELAY_ENC_RAW, "{\"l\": [{\"a\": 1}, null, {\"a\": 2}]}", &rc),
               "Struct{l=[Struct{a=1}, null, Struct{a=2}]}", "a null among alike objects");
        is_str(run(&b, RELAY_ENC_JSON, "{\"l\": [{\"a\": [1]}, {\"a\": []}, {\"a\": null}]}",
                   &rc),
               "{\"l\":[{\"a\":[1]},{\"a\":[]},{\"a\":null}]}",
               "an empty array and a null where the merged struct has an array");

        /* What the router leaves a string: its catch of JsonSchemaData's exceptions. */
        static const char *const kept[] = {
                "{\"m\": [1, \"x\"]}",   /* not a homogenous array */
                "{\"m\": [1, 2.5]}",     /* int32 and float64 */
                "{\"m\": [null, null]}", /* no member schema */
                "{\"m\": [[]]}",         /* an empty array as the member */
                "[{\"a\": 1}]",          /* a top-level array (see README) */
                " {\"a\": 1}",           /* does not start with { */
                "{\"a\": ",              /* not JSON */
                "\"text\"",
                /* JsonSchemaData.toConnectData() throws: a value that does not
                 * fit the schema inferred from another element (fits()) */
                "{\"items\": [{\"price\": 10}, {\"price\": 9.99}]}",
                "{\"items\": [{\"n\": 1}, {\"n\": 10000000000}]}",
                "{\"l\": [{\"a\": 1, \"b\": \"x\"}, null, {\"a\": 2}]}",
                "{\"m\": [[1], [2.5]]}",
                "{\"l\": [{\"o\": {\"p\": 1}}, {\"o\": \"s\"}]}",
        };
        for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++) {
                rc = relay_expand_payload(&b, RELAY_ENC_JSON, "payload", kept[i], strlen(kept[i]));
                is_int(rc, 0, "left a string: %s", kept[i]);
        }
        /* Jackson refuses a document nested deeper than 1000 (its
         * StreamReadConstraints: "Document nesting depth (1001) exceeds the
         * maximum allowed (1000)"), jansson reads it. */
        for (int depth = 1000; depth <= 1001; depth++) {
                char *deep = malloc((size_t)depth * 6 + 2);
                size_t n = 0;
                if (!deep)
                        tap_bail("out of memory");
                for (int i = 0; i < depth; i++, n += 5)
                        memcpy(deep + n, "{\"a\":", 5);
                deep[n++] = '1';
                memset(deep + n, '}', (size_t)depth);
                n += (size_t)depth;
                rc = relay_expand_payload(&b, RELAY_ENC_JSON, "payload", deep, n);
                is_int(rc, depth <= 1000 ? 1 : 0, "nested %d deep: %s", depth,
                       depth <= 1000 ? "expanded" : "left a string, as Jackson refuses it");
                free(deep);
        }
        relay_fmtbuf_free(&b);
        return done_testing();
}
