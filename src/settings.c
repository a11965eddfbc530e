/*
 * settings.c - turns the layered configuration into typed settings, once.
 *
 * The only code besides config.c that reads keys by name: each key is read
 * here and converted (enums, booleans, milliseconds, the table name, the
 * column lists, the topic template), so a renamed key is one edit and a
 * typo in a key name fails every test at the first load, not some day in
 * the field. Values arrive already checked by config.c; a conversion that
 * still fails means the configuration was built some other way, and is
 * reported as the bad value it is.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/settings.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "relay/event.h"
#include "relay/route.h"

/* Reading state: the first failure wins, later reads become no-ops. */
typedef struct {
        const relay_config_t *cfg;
        int rc;
        char *err;
        size_t errlen;
} reader_t;

static void fail(reader_t *r, int rc, const char *key, const char *value, const char *why)
{
        if (r->rc != 0)
                return;
        r->rc = rc;
        if (rc == RELAY_ENOMEM)
                relay_err_set(r->err, r->errlen, "out of memory");
        else
                relay_err_set(r->err, r->errlen, "invalid value \"%s\" for \"%s\": %s", value, key,
                              why);
}

/* The value of a key the table must have; NULL (and the failure recorded) otherwise. */
static const char *get(reader_t *r, const char *key)
{
        const char *v = relay_config_get(r->cfg, key);

        if (v == NULL && r->rc == 0) {
                r->rc = RELAY_EINVAL;
                relay_err_set(r->err, r->errlen,
                              "internal error: configuration key \"%s\" is not in the key table",
                              key);
        }
        return v;
}

static char *str(reader_t *r, const char *key)
{
        const char *v = get(r, key);
        char *d;

        if (v == NULL)
                return NULL;
        if ((d = strdup(v)) == NULL)
                fail(r, RELAY_ENOMEM, key, v, NULL);
        return d;
}

static bool boolean(const reader_t *r, const char *key)
{
        return relay_config_get_choice(r->cfg, key) == 1;
}

/*
 * A comma-separated list as an array of strings, blanks trimmed and empty
 * items dropped ("a, ,b" is a and b).
 */
static char **list(reader_t *r, const char *key, size_t *count)
{
        const char *v = get(r, key), *p, *item;
        char **items = NULL;
        size_t n = 0, len;

        *count = 0;
        if (v == NULL)
                return NULL;
        p = v;
        while (relay_list_next(&p, &item, &len)) {
                char **grown;
                if (len == 0)
                        continue;
                grown = realloc(items, (n + 1) * sizeof(*items));
                if (grown == NULL || (grown[n] = relay_dupn(item, len)) == NULL) {
                        items = grown != NULL ? grown : items;
                        while (n > 0)
                                free(items[--n]);
                        free(items);
                        fail(r, RELAY_ENOMEM, key, v, NULL);
                        return NULL;
                }
                items = grown;
                n++;
        }
        *count = n;
        return items;
}

static void table_one(reader_t *r, const char *v, relay_table_name_t *out)
{
        char why[RELAY_ERRBUF];
        int rc;

        if (r->rc == 0 && (rc = relay_names_parse_table(v, out, why, sizeof(why))) != 0)
                fail(r, rc, "outbox.table", v, why);
}

/* outbox.table: one table or a comma-separated list; outbox_table is the first. */
static void tables(reader_t *r, relay_settings_t *s)
{
        const char *v = get(r, "outbox.table"), *p = v, *item;
        size_t n, count = 0;

        if (v == NULL || r->rc != 0)
                return;
        while (relay_list_next(&p, &item, &n))
                count++;
        if (!(s->outbox_tables = calloc(count ? count : 1, sizeof(*s->outbox_tables)))) {
                fail(r, RELAY_ENOMEM, "outbox.table", v, NULL);
                return;
        }
        p = v;
        while (r->rc == 0 && relay_list_next(&p, &item, &n)) {
                char *one = relay_dupn(item, n);
                if (!one) {
                        fail(r, RELAY_ENOMEM, "outbox.table", v, NULL);
                        return;
                }
                table_one(r, one, &s->outbox_tables[s->n_outbox_tables]);
                free(one);
                if (r->rc == 0)
                        s->n_outbox_tables++;
        }
        if (r->rc == 0 && s->n_outbox_tables == 0)
                fail(r, RELAY_EINVAL, "outbox.table", v, "must name a table");
        if (r->rc == 0 && (!(s->outbox_table.schema = strdup(s->outbox_tables[0].schema)) ||
                           !(s->outbox_table.name = strdup(s->outbox_tables[0].name))))
                fail(r, RELAY_ENOMEM, "outbox.table", v, NULL);
}

static void template(reader_t *r, const char *key, relay_topic_template_t *out)
{
        const char *v = get(r, key);
        char why[RELAY_ERRBUF];
        int rc;

        if (v != NULL && r->rc == 0 &&
            (rc = relay_names_parse_template(v, out, why, sizeof(why))) != 0)
                fail(r, rc, key, v, why);
}

/*
 * Debezium's routing keys as a topic template: route.topic.replacement with
 * ${routedByValue} written as ${<route.by.field>}. Java's RegexRouter runs
 * route.topic.regex over the routing value first; only its default, which
 * captures the whole value, is accepted.
 */
static void route(reader_t *r, relay_settings_t *s)
{
        static const char def_regex[] = "(?<routedByValue>.*)";
        static const char var[] = "${routedByValue}";
        const char *by = get(r, "route.by.field"), *rep = get(r, "route.topic.replacement");
        const char *re = get(r, "route.topic.regex"), *tpl = get(r, "topic.template");
        char text[1024], why[RELAY_ERRBUF];
        size_t n = 0;

        if (!by || !rep || !re || !tpl || (!*by && !*rep && !*re))
                return;
        if (strcmp(tpl, "outbox.event.${aggregatetype}") != 0) {
                fail(r, RELAY_EINVAL, "topic.template", tpl,
                     "route.by.field, route.topic.regex and route.topic.replacement (Debezium's "
                     "names) also set the topic: keep either topic.template or the route.* keys");
                return;
        }
        if (!*by)
                by = s->outbox_column.aggregate_type;
        if (!relay_names_is_column(by, strlen(by))) {
                fail(r, RELAY_EINVAL, "route.by.field", by, "not a column name");
                return;
        }
        if (!*rep)
                rep = "outbox.event.${routedByValue}";
        if (!*re)
                re = def_regex;
        /* Anything but the default regex with ${routedByValue} references
         * goes through route.c: the routing value alone is the template,
         * and the mapping applies the regex to it. */
        bool simple = strcmp(re, def_regex) == 0;
        for (const char *p = rep; simple && *p; p++)
                if ((*p == '$' && strncmp(p, var, sizeof(var) - 1) != 0) || *p == '\\')
                        simple = false;
        if (!simple) {
                relay_route_t *rt = NULL;
                int rc = relay_route_new(&rt, re, rep, why, sizeof(why));
                relay_route_free(rt);
                if (rc) {
                        fail(r, rc, strcmp(re, def_regex) ? "route.topic.regex" : "route.topic.replacement",
                             strcmp(re, def_regex) ? re : rep, why);
                        return;
                }
                s->route_regex = strdup(re);
                s->route_replacement = strdup(rep);
                if (!s->route_regex || !s->route_replacement) {
                        fail(r, RELAY_ENOMEM, "route.topic.regex", re, NULL);
                        return;
                }
                snprintf(text, sizeof(text), "${%s}", by);
                relay_topic_template_t t = {0};
                if ((rc = relay_names_parse_template(text, &t, why, sizeof(why)))) {
                        fail(r, rc, "route.by.field", by, why);
                        return;
                }
                relay_names_template_free(&s->topic_template);
                s->topic_template = t;
                return;
        }
        for (const char *p = rep; *p;) {
                const char *piece = p;
                size_t len = 1;
                if (strncmp(p, var, sizeof(var) - 1) == 0) {
                        len = sizeof(var) - 1;
                        n += (size_t)snprintf(text + n, n < sizeof(text) ? sizeof(text) - n : 0,
                                              "${%s}", by);
                } else if (*p == '$' || *p == '\\') {
                        fail(r, RELAY_EINVAL, "route.topic.replacement", rep,
                             "only ${routedByValue} can be substituted (Java's $1 and other group "
                             "references are not supported)");
                        return;
                } else if (n + 1 < sizeof(text)) {
                        text[n++] = *piece;
                }
                p += len;
                if (n >= sizeof(text) - 1) {
                        fail(r, RELAY_EINVAL, "route.topic.replacement", rep, "too long");
                        return;
                }
        }
        text[n] = '\0';
        relay_topic_template_t t = {0};
        int rc = relay_names_parse_template(text, &t, why, sizeof(why));
        if (rc) {
                fail(r, rc, "route.topic.replacement", rep, why);
                return;
        }
        relay_names_template_free(&s->topic_template);
        s->topic_template = t;
}

/*
 * table.fields.additional.placement as Debezium parses it: comma-separated
 * column:placement[:alias], blanks trimmed; placement header, envelope or
 * partition. An envelope field makes the value a struct, which only
 * JsonConverter writes as JSON, so it needs a JSON profile (and the
 * connector's topic.prefix for the struct's schema name).
 */
static void additional(reader_t *r, relay_settings_t *s)
{
        static const char key[] = "table.fields.additional.placement";
        static const char *const places[] = {"header", "envelope", "partition", NULL};
        const char *v = get(r, key), *p, *item;
        size_t len;

        if (!v || !*v)
                return;
        p = v;
        while (relay_list_next(&p, &item, &len)) {
                /* The parts, trimmed, as spans of item: no copy to cut them. */
                const char *part[3];
                size_t plen[3], np = 0, pl = 0;
                if (len == 0)
                        continue;
                for (size_t i = 0; i <= len && np < 3; i++) {
                        if (i == len || item[i] == ':') {
                                /* trim */
                                size_t a = 0, b = pl;
                                const char *src = item + i - pl;
                                while (a < b && (src[a] == ' ' || src[a] == '\t'))
                                        a++;
                                while (b > a && (src[b - 1] == ' ' || src[b - 1] == '\t'))
                                        b--;
                                part[np] = src + a;
                                plen[np++] = b - a;
                                pl = 0;
                        } else {
                                pl++;
                        }
                }
                int place = -1;
                for (int k = 0; np >= 2 && places[k]; k++)
                        if (plen[1] == strlen(places[k]) &&
                            strncasecmp(part[1], places[k], plen[1]) == 0)
                                place = k;
                /* A fourth part would be dropped (Debezium drops the alias then). */
                bool extra = np == 3 && part[2] + plen[2] < item + len &&
                             memchr(part[2] + plen[2], ':', (size_t)(item + len - (part[2] + plen[2])));
                if (np < 2 || place < 0 || !relay_names_is_column(part[0], plen[0]) ||
                    (np == 3 && plen[2] == 0) || extra) {
                        fail(r, RELAY_EINVAL, key, v,
                             "each item is column:placement or column:placement:alias, placement "
                             "header, envelope or partition");
                        return;
                }
                if (place == RELAY_PLACE_ENVELOPE &&
                    s->format_profile != RELAY_PROFILE_CONNECT_JSON &&
                    s->format_profile != RELAY_PROFILE_CONNECT_JSON_SCHEMA &&
                    s->format_profile != RELAY_PROFILE_DEBEZIUM_SERVER) {
                        fail(r, RELAY_EINVAL, key, v,
                             "an envelope placement makes the value a struct, which needs "
                             "format.profile connect-json, connect-json-schema or debezium-server");
                        return;
                }
                if (place == RELAY_PLACE_ENVELOPE && !s->format_debezium_topic_prefix[0] &&
                    s->format_profile != RELAY_PROFILE_CONNECT_JSON) {
                        fail(r, RELAY_EINVAL, key, v,
                             "an envelope placement's schema is named after Debezium's "
                             "topic.prefix: set format.debezium.topic_prefix");
                        return;
                }
                relay_additional_field_t *g =
                        realloc(s->additional, (s->n_additional + 1) * sizeof(*g));
                if (!g) {
                        fail(r, RELAY_ENOMEM, key, v, NULL);
                        return;
                }
                s->additional = g;
                g = &s->additional[s->n_additional];
                g->placement = (relay_placement_t)place;
                g->column = strndup(part[0], plen[0]);
                g->alias = np == 3 ? strndup(part[2], plen[2]) : strndup(part[0], plen[0]);
                s->n_additional++;
                if (!g->column || !g->alias) {
                        fail(r, RELAY_ENOMEM, key, v, NULL);
                        return;
                }
        }
}

/*
 * The headers every event carries: id, type (raw) or Debezium's four
 * context headers (a profile with format.debezium.topic_prefix), the
 * outbox.headers columns and the header placements. Over
 * RELAY_EVENT_MAX_HEADERS every row would be refused as poison, so the
 * configuration is refused at start; config.c counts outbox.headers alone,
 * before the placements are parsed. A row's tracing context adds up to
 * three more, which only that row can tell (the mapping refuses it then).
 */
static void header_count(reader_t *r, const relay_settings_t *s)
{
        bool encode = s->format_profile != RELAY_PROFILE_RAW;
        size_t ctx = encode && s->format_debezium_topic_prefix[0] ? 4 : 0, placed = 0;
        for (size_t i = 0; i < s->n_additional; i++)
                placed += s->additional[i].placement == RELAY_PLACE_HEADER;
        size_t n = 1 + (encode ? 0 : 1) + ctx + s->n_outbox_headers + placed;
        if (n <= RELAY_EVENT_MAX_HEADERS)
                return;
        const char *key = placed ? "table.fields.additional.placement"
                          : ctx  ? "format.debezium.topic_prefix"
                                 : "outbox.headers";
        const char *v = relay_config_get(r->cfg, key);
        char why[RELAY_ERRBUF];
        snprintf(why, sizeof(why),
                 "with id%s, %zu outbox.headers columns and %zu header placements an event "
                 "would carry %zu headers, more than the %d allowed (every row would be refused); "
                 "list %zu fewer columns in outbox.headers or header placements",
                 ctx ? ", Debezium's four context headers (format.debezium.topic_prefix)"
                     : encode ? "" : " and type",
                 s->n_outbox_headers, placed, n, RELAY_EVENT_MAX_HEADERS,
                 n - RELAY_EVENT_MAX_HEADERS);
        fail(r, RELAY_EINVAL, key, v ? v : "", why);
}

void relay_settings_free(relay_settings_t *s)
{
        if (s == NULL)
                return;
        relay_names_table_free(&s->outbox_table);
        for (size_t i = 0; i < s->n_outbox_tables; i++)
                relay_names_table_free(&s->outbox_tables[i]);
        relay_names_template_free(&s->topic_template);
        relay_free_list(s->outbox_headers, s->n_outbox_headers);
        relay_free_list(s->format_not_null, s->n_format_not_null);
        relay_free_list(s->errors_skip_ids, s->n_errors_skip_ids);
        for (size_t i = 0; i < s->n_additional; i++)
                RELAY_FREE_ALL(s->additional[i].column, s->additional[i].alias);
        RELAY_FREE_ALL(s->postgres_conninfo, s->kafka_bootstrap_servers, s->slot_name,
                       s->publication_name, s->outbox_message_prefix, s->outbox_tables,
                       s->outbox_column.id, s->outbox_column.aggregate_type,
                       s->outbox_column.aggregate_id, s->outbox_column.type,
                       s->outbox_column.payload, s->format_debezium_topic_prefix,
                       s->event_timestamp_column, s->tracing_context_column,
                       s->schema_version_column, s->route_by_field, s->route_regex,
                       s->route_replacement, s->additional, s->errors_dlq_topic, s->http_listen,
                       s->eos_transactional_id, s->eos_checkpoint_topic, s->snapshot_filter, s);
}

int relay_settings_load(relay_settings_t **out, const relay_config_t *cfg, char *err,
                        size_t errlen)
{
        reader_t r = {cfg, 0, err, errlen};
        relay_settings_t *s = calloc(1, sizeof(*s));

        if (s == NULL)
                return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
        s->postgres_conninfo = str(&r, "postgres.conninfo");
        s->kafka_bootstrap_servers = str(&r, "kafka.bootstrap.servers");
        s->slot_name = str(&r, "slot.name");
        s->slot_failover = boolean(&r, "slot.failover");
        s->slot_recreate = boolean(&r, "slot.recreate");
        s->publication_name = str(&r, "publication.name");

        s->outbox_source = (relay_outbox_source_t)relay_config_get_choice(cfg, "outbox.source");
        s->outbox_message_prefix = str(&r, "outbox.message.prefix");
        if (r.rc == 0 && s->outbox_message_prefix && s->outbox_message_prefix[0] == '\0')
                fail(&r, RELAY_EINVAL, "outbox.message.prefix", "",
                     "the prefix must not be empty: every message of every extension would "
                     "match; use the prefix your application passes to "
                     "pg_logical_emit_message(), e.g. outbox");
        tables(&r, s);
        s->outbox_column.id = str(&r, "outbox.column.id");
        s->outbox_column.aggregate_type = str(&r, "outbox.column.aggregate_type");
        s->outbox_column.aggregate_id = str(&r, "outbox.column.aggregate_id");
        s->outbox_column.type = str(&r, "outbox.column.type");
        s->outbox_column.payload = str(&r, "outbox.column.payload");
        s->outbox_headers = list(&r, "outbox.headers", &s->n_outbox_headers);
        template(&r, "topic.template", &s->topic_template);
        s->format_profile =
                (relay_format_profile_t)relay_config_get_choice(cfg, "format.profile");
        s->format_not_null = list(&r, "format.not_null_columns", &s->n_format_not_null);
        s->format_debezium_topic_prefix = str(&r, "format.debezium.topic_prefix");
        s->route_tombstone_on_empty_payload = boolean(&r, "route.tombstone.on.empty.payload");
        s->event_timestamp_column = str(&r, "table.field.event.timestamp");
        s->expand_json_payload = boolean(&r, "table.expand.json.payload");
        s->tracing_context_column = str(&r, "tracing.span.context.field");
        if (r.rc == 0 && s->tracing_context_column[0] &&
            !relay_names_is_column(s->tracing_context_column, strlen(s->tracing_context_column)))
                fail(&r, RELAY_EINVAL, "tracing.span.context.field", s->tracing_context_column,
                     "not a column name");
        s->schema_version_column = str(&r, "table.field.event.schema.version");
        s->additional_missing_ignore =
                relay_config_get_choice(cfg, "table.field.additional.missing") == 1;
        s->invalid_op =
                (relay_invalid_op_t)relay_config_get_choice(cfg, "table.op.invalid.behavior");
        if (r.rc == 0 && s->schema_version_column[0] &&
            !relay_names_is_column(s->schema_version_column, strlen(s->schema_version_column)))
                fail(&r, RELAY_EINVAL, "table.field.event.schema.version", s->schema_version_column,
                     "not a column name");
        if (r.rc == 0 && s->event_timestamp_column[0] &&
            !relay_names_is_column(s->event_timestamp_column, strlen(s->event_timestamp_column)))
                fail(&r, RELAY_EINVAL, "table.field.event.timestamp", s->event_timestamp_column,
                     "not a column name");
        if (r.rc == 0)
                route(&r, s);
        if (r.rc == 0) {
                const char *by = get(&r, "route.by.field");
                s->route_by_field = strdup(by && *by ? by : s->outbox_column.aggregate_type);
                if (!s->route_by_field)
                        fail(&r, RELAY_ENOMEM, "route.by.field", "", NULL);
        }
        if (r.rc == 0)
                additional(&r, s);
        if (r.rc == 0)
                header_count(&r, s);
        if (r.rc == 0 && s->expand_json_payload && s->format_profile == RELAY_PROFILE_RAW)
                fail(&r, RELAY_EINVAL, "table.expand.json.payload", "true",
                     "the expanded struct is what a Debezium profile's converter writes: set "
                     "format.profile (raw sends the payload as stored)");
        for (size_t i = 0; r.rc == 0 && s->expand_json_payload && i < s->n_additional; i++)
                if (s->additional[i].placement == RELAY_PLACE_ENVELOPE)
                        fail(&r, RELAY_EINVAL, "table.expand.json.payload", "true",
                             "not supported together with envelope placements "
                             "(table.fields.additional.placement ...:envelope)");
        /* The profiles encode outbox columns as Debezium's connector types
         * them; a logical message has no columns to type. */
        if (r.rc == 0 && s->format_profile != RELAY_PROFILE_RAW &&
            s->outbox_source != RELAY_SOURCE_TABLE)
                fail(&r, RELAY_EINVAL, "format.profile", get(&r, "format.profile"),
                     "the Debezium profiles apply to outbox table rows only; with "
                     "outbox.source = messages or both set format.profile = raw (or "
                     "outbox.source = table)");

        s->snapshot_initial = relay_config_get_choice(cfg, "snapshot.mode") == 1;
        s->snapshot_filter = str(&r, "snapshot.filter");
        /* A logical message is gone once decoded: there is no table to read. */
        if (r.rc == 0 && s->outbox_source == RELAY_SOURCE_MESSAGES && s->snapshot_initial)
                fail(&r, RELAY_EINVAL, "snapshot.mode", "initial",
                     "with outbox.source = messages there is no outbox table to backfill from; "
                     "set snapshot.mode = never, or outbox.source = table or both");
        if (r.rc == 0 && s->outbox_source == RELAY_SOURCE_MESSAGES && s->snapshot_filter[0])
                fail(&r, RELAY_EINVAL, "snapshot.filter", s->snapshot_filter,
                     "with outbox.source = messages there is no outbox table to filter; leave "
                     "snapshot.filter empty");

        s->errors_policy = (relay_errors_policy_t)relay_config_get_choice(cfg, "errors.policy");
        s->errors_retries = relay_config_get_int(cfg, "errors.retries");
        s->errors_backoff_ms = relay_config_get_int(cfg, "errors.backoff.ms");
        s->errors_backoff_max_ms = relay_config_get_int(cfg, "errors.backoff.max.ms");
        s->errors_dlq_topic = str(&r, "errors.dlq.topic");
        s->errors_skip_ids = list(&r, "errors.skip.ids", &s->n_errors_skip_ids);

        s->unsafe_allow_pipelining = boolean(&r, "delivery.unsafe.allow.pipelining");
        s->exactly_once = relay_config_get_choice(cfg, "delivery.mode") == 1;
        s->eos_transactional_id = str(&r, "eos.transactional.id");
        s->eos_commit_interval_ms = relay_config_get_int(cfg, "eos.commit.interval.ms");
        s->eos_commit_catchup_interval_ms =
                relay_config_get_int(cfg, "eos.commit.catchup.interval.ms");
        s->eos_commit_max_events = relay_config_get_int(cfg, "eos.commit.max.events");
        s->eos_checkpoint_topic = str(&r, "eos.checkpoint.topic");

        /* The backfill's events are produced before the stream starts, outside
         * any Kafka transaction and with no checkpoint to cover them. */
        if (r.rc == 0 && s->exactly_once && s->snapshot_initial)
                fail(&r, RELAY_EINVAL, "snapshot.mode", "initial",
                     "the backfill is not supported with delivery.mode = exactly-once yet; run "
                     "the backfill once with delivery.mode = at-least-once, then switch");

        s->status_interval_ms = relay_config_get_int(cfg, "status.interval.ms");
        s->shutdown_timeout_ms = relay_config_get_int(cfg, "shutdown.timeout.ms");
        s->reconnect_backoff_ms = relay_config_get_int(cfg, "reconnect.backoff.ms");
        s->reconnect_backoff_max_ms = relay_config_get_int(cfg, "reconnect.backoff.max.ms");

        s->http_listen = str(&r, "http.listen");
        s->http_liveness_timeout_ms = relay_config_get_int(cfg, "http.liveness.timeout.ms");

        s->log_level = (relay_log_level_t)relay_config_get_choice(cfg, "log.level");
        s->log_format = (relay_log_format_t)relay_config_get_choice(cfg, "log.format");

        if (r.rc != 0) {
                relay_settings_free(s);
                return r.rc;
        }
        *out = s;
        return 0;
}

const char *relay_settings_tables(const relay_settings_t *s, char *buf, size_t len)
{
        size_t l = 0;
        buf[0] = '\0';
        for (size_t i = 0; i < s->n_outbox_tables && l < len; i++)
                l += (size_t)snprintf(buf + l, len - l, "%s\"%s.%s\"", i ? ", " : "",
                                      s->outbox_tables[i].schema, s->outbox_tables[i].name);
        return buf;
}

static bool envelope_version_read(const relay_settings_t *s)
{
        bool envelope = false;
        for (size_t i = 0; i < s->n_additional; i++)
                envelope = envelope || s->additional[i].placement == RELAY_PLACE_ENVELOPE;
        return envelope && s->format_profile != RELAY_PROFILE_RAW &&
               s->format_profile != RELAY_PROFILE_CONNECT_JSON;
}

/* The places after the topic template's parts, in this order. */
enum { MAPPED_TIMESTAMP, MAPPED_VERSION, MAPPED_TRACING, MAPPED_FIXED };

size_t relay_settings_n_mapped(const relay_settings_t *s)
{
        return 5 + s->n_outbox_headers + s->topic_template.nparts + MAPPED_FIXED +
               s->n_additional;
}

const char *relay_settings_mapped_column(const relay_settings_t *s, size_t w, const char **key,
                                         bool *optional)
{
        static const char *const keys[] = {"outbox.column.id", "outbox.column.aggregate_type",
                                           "outbox.column.aggregate_id", "outbox.column.type",
                                           "outbox.column.payload"};
        const char *names[] = {s->outbox_column.id, s->outbox_column.aggregate_type,
                               s->outbox_column.aggregate_id, s->outbox_column.type,
                               s->outbox_column.payload};
        *optional = false;
        if (w < 5) {
                *key = keys[w];
                return names[w];
        }
        w -= 5;
        *key = "outbox.headers";
        if (w < s->n_outbox_headers)
                return s->outbox_headers[w];
        w -= s->n_outbox_headers;
        *key = "topic.template";
        if (w < s->topic_template.nparts) {
                const relay_topic_part_t *tp = &s->topic_template.parts[w];
                return tp->is_column ? tp->text : NULL;
        }
        w -= s->topic_template.nparts;
        /* Each row fails without these (outbox.c): a timestamp or a schema
         * version named but absent, a placement unless missing = ignore;
         * a tracing column absent only means no tracing headers. */
        const char *col;
        switch (w) {
        case MAPPED_TIMESTAMP:
                *key = "table.field.event.timestamp";
                col = s->event_timestamp_column;
                break;
        case MAPPED_VERSION:
                /* Read for the envelope schema's name only: with an envelope
                 * placement, in a profile that gives the value a schema or
                 * none (outbox.c, envelope()). */
                *key = "table.field.event.schema.version";
                col = s->schema_version_column;
                if (!envelope_version_read(s))
                        col = "";
                break;
        case MAPPED_TRACING:
                *key = "tracing.span.context.field";
                col = s->tracing_context_column;
                *optional = true;
                break;
        default:
                *key = "table.fields.additional.placement";
                *optional = s->additional_missing_ignore;
                return s->additional[w - MAPPED_FIXED].column;
        }
        return col[0] ? col : NULL;
}
