/*
 * config.h - the relay's configuration: a declarative key table with
 * defaults (src/config_keys.dat), layered as defaults < file < environment <
 * command line.
 *
 * Keys are dotted names (postgres.conninfo, outbox.column.id, ...). Every key
 * under "kafka." is passed verbatim (without the prefix) to librdkafka. Its
 * name and value are checked against a scratch librdkafka configuration when
 * set, so a typo fails with its origin (file:line) rather than at producer
 * start; the producer still applies them for real. Environment variables
 * OUTBOX_RELAY_<KEY> map to keys by upper-casing and replacing '.' with '_'
 * (see relay_config_load_env()).
 *
 * Values are checked when set (type, range, syntax, with the name rules of
 * names.h); rules spanning several keys are checked by
 * relay_config_validate(). outbox.table is stored as "schema.table" (a bare
 * name gets "public.").
 *
 * Modules do not read keys by name: relay_settings_load() (settings.h)
 * converts the validated configuration into typed settings once, and the
 * producer reads the kafka.* pairs with relay_config_kafka_at().
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_CONFIG_H
#define RELAY_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "relay/common.h"

typedef struct relay_config relay_config_t;

/**
 * @brief A configuration holding every default.
 * @returns 0 and *out (caller frees with relay_config_free()), or RELAY_ENOMEM.
 */
int relay_config_new(relay_config_t **out) RELAY_MUST_CHECK;

/** @brief Free; accepts NULL. */
void relay_config_free(relay_config_t *c);

/**
 * @brief Set key to value. origin names where it came from ("--set",
 *        "/etc/relay.conf:12", "OUTBOX_RELAY_SLOT_NAME") and is quoted in
 *        errors and in relay_config_print(). Both strings are copied.
 *        Layers: calls of this function in a row are one layer, as are
 *        relay_config_set_arg()'s, and each relay_config_load_file() and
 *        relay_config_load_env() is one; two librdkafka names of one
 *        property (kafka.linger.ms and kafka.queue.buffering.max.ms) in one
 *        layer are refused, since their order there would decide, and so is
 *        one kafka.* name set by two variables of the environment.
 * @returns 0; RELAY_EINVAL for an unknown key or a value that does not parse
 *          as the key's type, or for another name of a kafka.* property this
 *          layer set (the message names origin, key and the fix).
 */
int relay_config_set(relay_config_t *c, const char *key, const char *value, const char *origin,
                     char *err, size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief Apply "KEY=VALUE" (as given to --set).
 */
int relay_config_set_arg(relay_config_t *c, const char *arg, char *err, size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief Read a "key = value" file: '#' starts a comment line, blank lines
 *        are ignored, whitespace around key and value is trimmed, a value may
 *        be double-quoted (inside, a backslash escapes a double quote or a
 *        backslash, and backslash-n/t/r are newline, tab, CR). After an
 *        unquoted value, a '#' preceded by a blank starts a trailing comment
 *        (so "password=a#b" stays whole). Errors name "path:line"; a file
 *        that cannot be opened is "could not open configuration file ...".
 *        relay_config_print() output loads back unchanged (secrets aside).
 */
int relay_config_load_file(relay_config_t *c, const char *path, char *err, size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief Apply every OUTBOX_RELAY_* variable of envp (NULL-terminated, e.g.
 *        environ). OUTBOX_RELAY_KAFKA_BOOTSTRAP_SERVERS -> kafka.bootstrap.servers:
 *        for known keys the mapping is exact (each key's variable name is
 *        computed and compared); for kafka.* the rest after KAFKA_ is
 *        lower-cased and every '_' becomes '.'. That is right for every
 *        librdkafka property settable as a string except log_level and
 *        enabled_events, which are mapped by name (the other librdkafka names
 *        containing '_' are callbacks and pointers, not settable as strings).
 *        OUTBOX_RELAY_CONFIG is ignored here (main uses it as the file name);
 *        any other unknown OUTBOX_RELAY_* variable is an error naming it.
 */
int relay_config_load_env(relay_config_t *c, char *const *envp, char *err, size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief Check cross-key rules once all layers are applied (required keys,
 *        status.interval.ms range, column names distinct, ...).
 */
int relay_config_validate(const relay_config_t *c, char *err, size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief Value of a known key (never NULL for a known key; "" when unset).
 *        "kafka.<property>" gives the pass-through value in effect under
 *        any of the property's librdkafka names (kafka.metadata.broker.list
 *        for kafka.bootstrap.servers), "" when unset.
 *        NULL for an unknown key. Borrowed.
 */
const char *relay_config_get(const relay_config_t *c, const char *key);

/**
 * @brief Where a known key's value came from ("--set", "file:line", ...);
 *        NULL while it is the default, and for an unknown key. Borrowed.
 */
const char *relay_config_origin(const relay_config_t *c, const char *key);

/**
 * @brief Integer value of a known integer key (ms values etc.); any other key
 *        is a bug in the caller (asserts).
 */
int64_t relay_config_get_int(const relay_config_t *c, const char *key);

/**
 * @brief Position of a known enum or boolean key's value among its choices
 *        (false = 0, true = 1; the others in config_keys.dat's order, which
 *        is the order of the enum the settings map it to); any other key is a
 *        bug in the caller (asserts).
 */
int relay_config_get_choice(const relay_config_t *c, const char *key);

/** @brief Number of kafka.* pairs set, and the i-th one (names without "kafka."), in the
 *         order they were set (a name set again is last): applied in this order,
 *         the layer that set one of two aliases last wins. Borrowed. */
size_t relay_config_kafka_count(const relay_config_t *c);
void relay_config_kafka_at(const relay_config_t *c, size_t i, const char **name, const char **value);

/**
 * @brief Print every effective key = value with its origin, secrets masked
 *        (password in postgres.conninfo, any kafka.*password*, *secret*,
 *        ssl.key.pem, sasl.oauthbearer.config) - the output of --print-config.
 *        Lines are "key = value  # origin", each preceded by a "# description"
 *        comment line; values are quoted where needed so the output loads back
 *        with relay_config_load_file().
 */
void relay_config_print(const relay_config_t *c, FILE *out);

/**
 * @brief Describe every key (default, description, bounds, environment
 *        variable) for --help, generated from the key table.
 */
void relay_config_print_help(FILE *out);

/** @brief What the manual says about one key of the table (see relay_config_keydoc()). */
typedef struct {
        const char *name;    /* borrowed from the table */
        const char *def;     /* default, "" when none */
        const char *desc;    /* one sentence, no final period */
        char env[128];       /* its environment variable, OUTBOX_RELAY_... */
        char values[160];    /* accepted values ("10 to 3600000 milliseconds", "dlq or stop"), or "" */
} relay_config_keydoc_t;

/**
 * @brief Describe the i-th key of the table (alphabetical order): the one
 *        source of --help, the manual page and the example file.
 * @returns false when i is past the last key (out untouched).
 */
bool relay_config_keydoc(size_t i, relay_config_keydoc_t *out);

/**
 * @brief Copy of a conninfo string with any password replaced by "********",
 *        for logs. Caller frees with free(); NULL when out of memory.
 */
char *relay_config_mask_conninfo(const char *conninfo);

#endif
