/*
 * inbox_map.h - what outbox-inbox hands a handler from a Kafka message: the
 * message id (the header inbox_accept() records) and the headers as one
 * JSON object. Pure functions over librdkafka's header lists, so they are
 * tested without a broker.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_INBOX_MAP_H
#define RELAY_INBOX_MAP_H

#include <stdbool.h>
#include <stddef.h>

#include <librdkafka/rdkafka.h>

#include "relay/common.h"

/**
 * @brief The value of the last header called name (Kafka's lastHeader(), as
 *        a Java consumer reads it) in hdrs (borrowed; NULL: no headers).
 * @returns 0 and *out (caller frees); RELAY_EMAP when the header is missing,
 *          NULL, empty, not UTF-8 or holds a NUL byte (the message names
 *          which); RELAY_ENOMEM.
 */
int relay_inbox_message_id(const rd_kafka_headers_t *hdrs, const char *name, char **out,
                           char *err, size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief The headers as a JSON object text {"name": "value", ...}: a NULL
 *        value is null, a repeated name keeps its last value, no headers
 *        give {}. Values must be UTF-8 text (jsonb holds nothing else).
 * @returns 0 and *out (caller frees); RELAY_EMAP naming the header that is
 *          not UTF-8; RELAY_ENOMEM.
 */
int relay_inbox_headers_json(const rd_kafka_headers_t *hdrs, char **out, char *err,
                             size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief Whether an error with SQLSTATE state (NULL: none, e.g. a lost
 *        connection) is the server's state rather than the statement's: it
 *        takes no writes now (read-only, 25006: a standby, a demoted
 *        primary), is going down (57P*), has lost its connection (08*),
 *        its disk is full (53100) or it failed itself (58000, 58030 I/O). Any message
 *        would fail alike, so none is counted as failing.
 */
bool relay_inbox_server_unable(const char *state);

/** @brief len bytes at s are valid UTF-8 without NUL bytes (what text and jsonb accept). */
int relay_inbox_utf8_ok(const char *s, size_t len);

#endif
