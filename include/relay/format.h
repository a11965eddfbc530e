/*
 * format.h - wire-compatibility profiles: the bytes Debezium's Outbox Event
 * Router plus a Kafka Connect converter would put in a message's key, value
 * and headers, written by the relay without the JVM (format.profile).
 *
 * A profile chooses one encoding for keys, values and headers; a column's
 * PostgreSQL type chooses the Connect schema Debezium's PostgreSQL connector
 * gives it (string, io.debezium.data.Uuid, io.debezium.data.Json, bytes,
 * int16/32/64, boolean). The JSON is written the way Kafka's JsonConverter
 * (Jackson) writes it: no blanks, fields in JsonConverter's order, non-ASCII
 * as UTF-8, control characters escaped, bytes as padded base64.
 *
 * No state: the caller owns every buffer (relay_fmtbuf_t).
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_FORMAT_H
#define RELAY_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "relay/common.h"

/** @brief format.profile, in the order of its choices in src/config_keys.dat. */
typedef enum {
        RELAY_PROFILE_RAW = 0,             /* the relay's own: bytes as stored, id+type headers */
        RELAY_PROFILE_CONNECT_STRING,      /* Connect, StringConverter/ByteArrayConverter */
        RELAY_PROFILE_CONNECT_JSON,        /* Connect, JsonConverter schemas.enable=false */
        RELAY_PROFILE_CONNECT_JSON_SCHEMA, /* Connect, JsonConverter schemas.enable=true */
        RELAY_PROFILE_DEBEZIUM_SERVER,     /* Debezium Server: JSON key, value and headers */
} relay_format_profile_t;

/** @brief How one part of a message is encoded. */
typedef enum {
        RELAY_ENC_RAW = 0, /* the value's bytes (StringConverter, ByteArrayConverter) */
        RELAY_ENC_SIMPLE,  /* SimpleHeaderConverter: a value's string form */
        RELAY_ENC_JSON,    /* JsonConverter, schemas.enable=false */
        RELAY_ENC_ENVELOPE /* JsonConverter, schemas.enable=true: {"schema":..,"payload":..} */
} relay_format_enc_t;

/**
 * @brief The Connect schema Debezium's PostgreSQL connector gives a column.
 *        X(kind, name relay_format_kind_name() gives): one list, so that a
 *        kind cannot lack its name.
 */
#define RELAY_FORMAT_KINDS(X)                                                                   \
        X(RELAY_KIND_UNSUPPORTED, "unsupported")                                                \
        /* text, varchar, bpchar */                                                             \
        X(RELAY_KIND_STRING, "string")                                                          \
        /* uuid: string, io.debezium.data.Uuid v1 */                                            \
        X(RELAY_KIND_UUID, "io.debezium.data.Uuid")                                             \
        /* json, jsonb: string, io.debezium.data.Json v1 */                                     \
        X(RELAY_KIND_JSON, "io.debezium.data.Json")                                             \
        /* bytea (binary.handling.mode=bytes) */                                                \
        X(RELAY_KIND_BYTES, "bytes")                                                            \
        /* smallint */                                                                          \
        X(RELAY_KIND_INT16, "int16")                                                            \
        /* integer */                                                                           \
        X(RELAY_KIND_INT32, "int32")                                                            \
        /* bigint */                                                                            \
        X(RELAY_KIND_INT64, "int64")                                                            \
        /* boolean */                                                                           \
        X(RELAY_KIND_BOOLEAN, "boolean")

typedef enum {
#define RELAY_FORMAT_KIND_ENUM(kind, name) kind,
        RELAY_FORMAT_KINDS(RELAY_FORMAT_KIND_ENUM)
#undef RELAY_FORMAT_KIND_ENUM
} relay_format_kind_t;

/** @brief A growable byte buffer; zero-initialise, free with relay_fmtbuf_free(). */
typedef struct {
        char *p;
        size_t len, cap;
} relay_fmtbuf_t;

void relay_fmtbuf_free(relay_fmtbuf_t *b);

/** @brief The key, value and header encodings of a profile. */
void relay_format_encodings(relay_format_profile_t p, relay_format_enc_t *key,
                            relay_format_enc_t *value, relay_format_enc_t *header);

/** @brief The kind for a column type OID (RELAY_KIND_UNSUPPORTED if none). */
relay_format_kind_t relay_format_kind(uint32_t typoid);

/** @brief The kind's name for messages ("string", "io.debezium.data.Json", ...). */
const char *relay_format_kind_name(relay_format_kind_t k);

/**
 * @brief Append one value, encoded, to b. data/len are the column's text as
 *        pgoutput sends it (for RELAY_KIND_BYTES: the decoded bytes);
 *        data NULL is SQL NULL. optional is whether the column may be NULL
 *        (the schema's "optional"). *is_null is set when the encoding of a
 *        NULL is no bytes at all (a Kafka null), nothing is appended then.
 * @returns 0; RELAY_EINVAL when the text is not a value of the kind (a bool
 *          other than t/f); RELAY_ENOMEM.
 */
int relay_format_append(relay_fmtbuf_t *b, relay_format_enc_t enc, relay_format_kind_t kind,
                        bool optional, const char *data, size_t len,
                        bool *is_null) RELAY_MUST_CHECK;

/* The pieces of a struct value (an envelope placement), for the caller to assemble. */

/** @brief Append raw bytes. @returns 0; RELAY_ENOMEM. */
int relay_format_put(relay_fmtbuf_t *b, const char *s, size_t n) RELAY_MUST_CHECK;

/** @brief Append s as a JSON string (Jackson's escaping). @returns 0; RELAY_ENOMEM. */
int relay_format_string(relay_fmtbuf_t *b, const char *s, size_t n) RELAY_MUST_CHECK;

/** @brief Append a value's JSON form (data NULL: null). @returns 0; RELAY_EINVAL; RELAY_ENOMEM. */
int relay_format_json(relay_fmtbuf_t *b, relay_format_kind_t kind, const char *data,
                      size_t len) RELAY_MUST_CHECK;

/**
 * @brief The payload inside a header value this module wrote with a
 *        schema envelope ({"schema":{...},"payload":"<s>"} or
 *        {"schema":{...},"payload":<number>}, Debezium Server's headers):
 *        *s and *len point at <s>'s text without its JSON escapes, as the
 *        row held it, copied into buf (its first buflen bytes at most; not
 *        NUL-terminated), or into v at the number's text. Anything else
 *        (a null payload, no envelope) is v itself.
 */
void relay_format_header_text(const char *v, size_t n, char *buf, size_t buflen, const char **s,
                              size_t *len);

/**
 * @brief Append a kind's JSON schema as JsonConverter writes it; field
 *        non-NULL adds "field":"<field>" last (a struct's field schema).
 * @returns 0; RELAY_ENOMEM.
 */
int relay_format_schema(relay_fmtbuf_t *b, relay_format_kind_t kind, bool optional,
                        const char *field) RELAY_MUST_CHECK;

#endif
