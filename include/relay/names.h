/*
 * names.h - the syntax of the names the relay reads from its configuration
 * and builds at run time: lower-case SQL identifiers, "schema.table",
 * column names, Kafka topic names and the topic template
 * ("outbox.event.${aggregatetype}").
 *
 * The one place these rules live: the configuration checks values with them
 * as they are set (so an error names its file line), the settings keep the
 * parsed forms, and the outbox mapping checks each topic it builds.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_NAMES_H
#define RELAY_NAMES_H

#include <stdbool.h>
#include <stddef.h>

#include "relay/common.h"

/** @brief PostgreSQL's NAMEDATALEN: names are at most 63 bytes. */
#define RELAY_NAMEDATALEN 64

/** @brief Kafka's limit on topic names (Topic.MAX_NAME_LENGTH). */
#define RELAY_TOPIC_MAX 249

/* The rules, phrased to follow "must be", for messages about a bad value. */
#define RELAY_NAMES_IDENT_RULE                                                                     \
        "a lower-case identifier: a letter or \"_\", then letters, digits, \"_\" or \"$\", at "    \
        "most 63 characters (quoted identifiers are not supported)"
#define RELAY_NAMES_COLUMN_RULE "a column name: 1 to 63 bytes, no control characters"
#define RELAY_NAMES_SLOT_RULE                                                                      \
        "a replication slot name: 1 to 63 lower-case letters, digits and \"_\""
#define RELAY_NAMES_TOPIC_RULE                                                                     \
        "1 to 249 letters, digits, \".\", \"_\" and \"-\", not \".\" or \"..\""

/** @brief A table name split into its parts; both strings owned. */
typedef struct {
        char *schema;
        char *name;
} relay_table_name_t;

/** @brief One part of a topic template: literal text, or a ${column} reference. */
typedef struct {
        char *text; /* owned; the literal, or the column name */
        size_t len;
        bool is_column;
} relay_topic_part_t;

/** @brief A parsed topic template: at least one part. */
typedef struct {
        relay_topic_part_t *parts; /* owned */
        size_t nparts;
} relay_topic_template_t;

/**
 * @brief Is s[0..n) what PostgreSQL accepts as an unquoted identifier, already
 *        case-folded: [a-z_][a-z0-9_$]*, at most 63 bytes?
 */
bool relay_names_is_ident(const char *s, size_t n);

/**
 * @brief Is s[0..n) a valid replication slot name: [a-z0-9_], 1 to 63
 *        bytes (PostgreSQL's ReplicationSlotValidateName())?
 */
bool relay_names_is_slot(const char *s, size_t n);

/** @brief Is s[0..n) a usable column name: 1 to 63 bytes, no control characters? */
bool relay_names_is_column(const char *s, size_t n);

/**
 * @brief Is t[0..n) a valid Kafka topic name: 1 to 249 of a-z, A-Z, 0-9, '.',
 *        '_' and '-', and not "." or ".."?
 */
bool relay_names_is_topic(const char *t, size_t n);

/**
 * @brief Parse "schema.table" or "table" (meaning public.table), each part a
 *        relay_names_is_ident() identifier.
 * @returns 0 and *out (when out is not NULL; free with
 *          relay_names_table_free()); RELAY_EINVAL with the rule the text
 *          broke in why, phrased "must be ..."; RELAY_ENOMEM.
 */
int relay_names_parse_table(const char *text, relay_table_name_t *out, char *why,
                            size_t whylen) RELAY_MUST_CHECK;

/** @brief Free the parts of t (not t itself); accepts NULL and parts already freed. */
void relay_names_table_free(relay_table_name_t *t);

/**
 * @brief Parse a topic template: Kafka topic characters, with ${column}
 *        references (relay_names_is_column() names). Literal text is checked
 *        here; the length and the values substituted for the columns are
 *        checked on each topic built (relay_names_is_topic()).
 * @returns 0 and *out (when out is not NULL; free with
 *          relay_names_template_free()); RELAY_EINVAL with the rule broken
 *          in why, phrased "must ..."; RELAY_ENOMEM.
 */
int relay_names_parse_template(const char *text, relay_topic_template_t *out, char *why,
                               size_t whylen) RELAY_MUST_CHECK;

/** @brief Free the parts of t (not t itself); accepts NULL. */
void relay_names_template_free(relay_topic_template_t *t);

#endif
