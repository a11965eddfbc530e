/*
 * settings.h - the configuration as typed values: every key the relay itself
 * reads (all but the kafka.* pass-through), validated and converted once at
 * start-up, so no module looks a setting up by name at run time.
 *
 * relay_config_t (config.h) is the layered key = value store with origins,
 * for loading, --print-config and messages; relay_settings_t is what the
 * modules read. Names, lists and the topic template arrive parsed, with the
 * grammar of names.h.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_SETTINGS_H
#define RELAY_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "relay/common.h"
#include "relay/config.h"
#include "relay/format.h"
#include "relay/log.h"
#include "relay/names.h"

/*
 * The enums of enum keys (here, in log.h and format.h) list their values in
 * the order of the key's choices in src/config_keys.dat: settings.c takes
 * relay_config_get_choice()'s position as the value.
 */

/** @brief errors.policy */
typedef enum {
        RELAY_ERRORS_DLQ = 0, /* retry, then the dead-letter topic */
        RELAY_ERRORS_STOP,    /* stop before the event */
} relay_errors_policy_t;

/** @brief outbox.source */
typedef enum {
        RELAY_SOURCE_TABLE = 0, /* inserts into outbox.table */
        RELAY_SOURCE_MESSAGES,  /* transactional logical decoding messages */
        RELAY_SOURCE_BOTH,
} relay_outbox_source_t;
/** @brief Where table.fields.additional.placement puts a column (Debezium's names). */
typedef enum {
        RELAY_PLACE_HEADER = 0,
        RELAY_PLACE_ENVELOPE, /* a field of the value, next to "payload" */
        RELAY_PLACE_PARTITION /* the Kafka partition (an integer column) */
} relay_placement_t;

/** @brief table.op.invalid.behavior: what an UPDATE of an outbox row does (Debezium's names). */
typedef enum {
        RELAY_INVALID_OP_WARN = 0, /* skipped, a warning */
        RELAY_INVALID_OP_ERROR,    /* skipped, an error in the log */
        RELAY_INVALID_OP_FATAL,    /* the relay stops before it */
} relay_invalid_op_t;
typedef struct {
        char *column;
        relay_placement_t placement;
        char *alias; /* the header or envelope field name; the column's by default */
} relay_additional_field_t;

/**
 * @brief Every non-kafka key, typed. Durations are milliseconds. All strings
 *        and arrays are owned by the struct (freed by relay_settings_free());
 *        readers treat it as read-only.
 */
typedef struct {
        char *postgres_conninfo; /* "" = PG* variables and libpq defaults */
        char *kafka_bootstrap_servers; /* for messages only: the producer takes every
                                        * kafka.* pair from the configuration */
        char *slot_name;
        bool slot_failover; /* create (or alter) the slot with FAILOVER: PostgreSQL 17+ */
        bool slot_recreate;
        char *publication_name;

        bool snapshot_initial; /* snapshot.mode = initial: backfill when creating the slot */
        char *snapshot_filter; /* "" = every row */

        relay_outbox_source_t outbox_source;
        char *outbox_message_prefix; /* non-empty */
        relay_table_name_t outbox_table; /* the first of outbox_tables */
        relay_table_name_t *outbox_tables; /* outbox.table: one or more, in order, each once */
        size_t n_outbox_tables;
        struct {
                char *id;
                char *aggregate_type;
                char *aggregate_id;
                char *type;
                char *payload;
        } outbox_column;
        char **outbox_headers; /* extra columns sent as headers, in order, each once */
        size_t n_outbox_headers;
        relay_topic_template_t topic_template; /* or from route.by.field / route.topic.* */

        relay_format_profile_t format_profile;
        bool route_tombstone_on_empty_payload;
        char *route_by_field; /* route.by.field, else outbox.column.aggregate_type */
        char *route_regex;       /* NULL: the template is the topic; else the template gives
                                  * the routing value, and route.h makes it the topic */
        char *route_replacement; /* with route_regex */
        relay_additional_field_t *additional; /* table.fields.additional.placement, in order */
        size_t n_additional;
        bool additional_missing_ignore; /* table.field.additional.missing = ignore */
        relay_invalid_op_t invalid_op; /* table.op.invalid.behavior */
        bool expand_json_payload;      /* table.expand.json.payload */
        char *tracing_context_column; /* tracing.span.context.field; "" = no tracing */
        char *event_timestamp_column; /* table.field.event.timestamp; "" = the commit time */
        char *schema_version_column;  /* table.field.event.schema.version; "" = none */
        char *format_debezium_topic_prefix; /* "" = no __debezium.context.* headers */
        char **format_not_null; /* format.not_null_columns */
        size_t n_format_not_null;

        relay_errors_policy_t errors_policy;
        int64_t errors_retries;
        int64_t errors_backoff_ms;
        int64_t errors_backoff_max_ms;
        char *errors_dlq_topic;
        char **errors_skip_ids; /* in the order listed; blanks trimmed, empty items dropped */
        size_t n_errors_skip_ids;

        bool unsafe_allow_pipelining; /* delivery.unsafe.allow.pipelining */
        bool exactly_once;            /* delivery.mode = exactly-once */
        char *eos_transactional_id;   /* "" = derived from the system identifier and slot */
        int64_t eos_commit_interval_ms;
        int64_t eos_commit_catchup_interval_ms; /* 0: the interval applies while behind too */
        int64_t eos_commit_max_events;          /* 0: no limit */
        char *eos_checkpoint_topic;

        int64_t status_interval_ms;
        int64_t shutdown_timeout_ms;
        int64_t reconnect_backoff_ms;
        int64_t reconnect_backoff_max_ms;

        char *http_listen; /* "off" or an address (http.h) */
        int64_t http_liveness_timeout_ms;

        relay_log_level_t log_level;
        relay_log_format_t log_format;
} relay_settings_t;

/**
 * @brief Convert cfg (borrowed, best already through relay_config_validate())
 *        into typed settings.
 * @returns 0 and *out (caller frees with relay_settings_free()); RELAY_EINVAL
 *          when a value does not convert (the message names the key and the
 *          value; a configuration that was set through relay_config_set()
 *          always converts); RELAY_ENOMEM.
 */
int relay_settings_load(relay_settings_t **out, const relay_config_t *cfg, char *err,
                        size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief outbox.table's tables for messages: "s.t" quoted, comma-separated,
 *        into buf (truncated to len). Returns buf.
 */
const char *relay_settings_tables(const relay_settings_t *s, char *buf, size_t len);

/** @brief How many places relay_settings_mapped_column() has: the five
 *         outbox columns, outbox.headers, the topic template's parts,
 *         table.field.event.timestamp, table.field.event.schema.version,
 *         tracing.span.context.field, table.fields.additional.placement. */
size_t relay_settings_n_mapped(const relay_settings_t *s);

/**
 * @brief The w-th column the mapping reads (w < relay_settings_n_mapped()),
 *        and in *key the key that names it; NULL for a template's literal
 *        or a key left empty. *optional: the relay does without the column
 *        when the table lacks it (tracing, placements with
 *        table.field.additional.missing = ignore); one the table has is
 *        read all the same. Both strings borrowed from s or static. The one
 *        list of the columns each row is read for: the start and
 *        outbox-relay check test these against the table and publication.
 */
const char *relay_settings_mapped_column(const relay_settings_t *s, size_t w, const char **key,
                                         bool *optional);

/** @brief Free the settings and everything they own; accepts NULL. */
void relay_settings_free(relay_settings_t *s);

#endif
