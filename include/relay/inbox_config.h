/*
 * inbox_config.h - the configuration of outbox-inbox, the consumer-side
 * inbox program: its own small key table (the relay's keys mean nothing to
 * a consumer), layered as defaults < file (--config) < --set, converted
 * once into typed settings.
 *
 * Keys under "kafka." go verbatim to librdkafka (the consumer, and the
 * dead-letter producer where they apply); the program fixes the few that
 * its guarantee depends on and refuses values that would break it.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_INBOX_CONFIG_H
#define RELAY_INBOX_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "relay/common.h"
#include "relay/log.h"

/** @brief inbox.payload: the SQL type the handler receives the value as. */
typedef enum {
        RELAY_INBOX_PAYLOAD_JSONB = 0, /* a value that is not JSON is dead-lettered at once */
        RELAY_INBOX_PAYLOAD_TEXT,      /* UTF-8 without NUL bytes, else dead-lettered at once */
        RELAY_INBOX_PAYLOAD_BYTEA,     /* the bytes as they are */
} relay_inbox_payload_t;

/** @brief errors.policy of the inbox. */
typedef enum {
        RELAY_INBOX_ERRORS_DLQ = 0, /* retries, then the dead-letter topic */
        RELAY_INBOX_ERRORS_STOP,    /* retries, then stop before the message */
} relay_inbox_policy_t;

/**
 * @brief The typed configuration. Every string and array is owned by the
 *        struct (relay_inbox_config_free()); readers treat it as read-only.
 */
typedef struct {
        char *postgres_conninfo;
        char **topics;        /* inbox.topics, in order */
        size_t n_topics;
        char *handler;        /* inbox.handler: SQL with parameters $1..$7 */
        relay_inbox_payload_t payload;
        char *id_header;      /* inbox.id.header */
        relay_inbox_policy_t errors_policy;
        int64_t errors_retries;
        int64_t errors_backoff_ms;
        int64_t errors_backoff_max_ms;
        char *errors_dlq_topic;
        int64_t reconnect_backoff_ms;
        int64_t reconnect_backoff_max_ms;
        relay_log_level_t log_level;
        /* kafka.* pairs as set (names without "kafka."), after the program's own defaults */
        relay_pairs_t kafka;
} relay_inbox_config_t;

/** @brief A configuration holding every default; RELAY_ENOMEM otherwise. */
int relay_inbox_config_new(relay_inbox_config_t **out) RELAY_MUST_CHECK;

/** @brief Free; accepts NULL. */
void relay_inbox_config_free(relay_inbox_config_t *c);

/**
 * @brief Set key to value (both copied); origin ("--set", "file:12") is
 *        quoted in the message. RELAY_EINVAL for an unknown key, a value
 *        that does not parse, or a kafka.* property the inbox fixes.
 */
int relay_inbox_config_set(relay_inbox_config_t *c, const char *key, const char *value,
                           const char *origin, char *err, size_t errlen) RELAY_MUST_CHECK;

/** @brief "KEY=VALUE" as given to --set. */
int relay_inbox_config_set_arg(relay_inbox_config_t *c, const char *arg, char *err,
                               size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief Read a file of "key = value" lines ('#' comment lines, blank lines
 *        ignored, blanks around key and value trimmed). Errors name
 *        "path:line".
 */
int relay_inbox_config_load_file(relay_inbox_config_t *c, const char *path, char *err,
                                 size_t errlen) RELAY_MUST_CHECK;

/** @brief Required keys and cross-key rules, once every layer is applied. */
int relay_inbox_config_validate(const relay_inbox_config_t *c, char *err,
                                size_t errlen) RELAY_MUST_CHECK;

/** @brief The keys, their defaults and meaning, for --help. */
void relay_inbox_config_print_help(FILE *out);

/** One key for the documentation; strings borrowed from static tables. */
typedef struct {
        const char *name;
        const char *def; /* "" for none */
        const char *desc;
} relay_inbox_keydoc_t;

/** @brief The i-th key in alphabetical order; false past the last. */
bool relay_inbox_config_keydoc(size_t i, relay_inbox_keydoc_t *out);

/**
 * @brief The i-th kafka.* property the inbox fixes (name without "kafka.",
 *        its value, why); false past the last. Strings borrowed.
 */
bool relay_inbox_config_fixed(size_t i, const char **name, const char **value, const char **why);

#endif
