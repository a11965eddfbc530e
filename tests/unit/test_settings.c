/*
 * test_settings.c - the configuration as typed settings: every default,
 * every key converted from what was set, the parsed table name, column lists
 * and topic template; and the name rules of names.c that the configuration
 * and the settings share (tables, templates, topic names).
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "relay/config.h"
#include "relay/event.h"
#include "relay/names.h"
#include "relay/settings.h"
#include "tap.h"

static char err[RELAY_ERRBUF];

static relay_config_t *config(void)
{
        relay_config_t *c = NULL;

        if (relay_config_new(&c) != 0)
                tap_bail("relay_config_new failed");
        return c;
}

static void set(relay_config_t *c, const char *arg)
{
        if (relay_config_set_arg(c, arg, err, sizeof(err)) != 0)
                tap_bail("--set %s: %s", arg, err);
}

static relay_settings_t *load(const relay_config_t *c)
{
        relay_settings_t *s = NULL;

        if (relay_settings_load(&s, c, err, sizeof(err)) != 0)
                tap_bail("relay_settings_load: %s", err);
        return s;
}

/* The literal or column parts of a template, "lit|$col|lit", for comparison. */
static void template_str(const relay_topic_template_t *t, char *buf, size_t len)
{
        size_t n = 0;

        buf[0] = '\0';
        for (size_t i = 0; i < t->nparts && n < len; i++)
                n += (size_t)snprintf(buf + n, len - n, "%s%s%.*s", i ? "|" : "",
                                      t->parts[i].is_column ? "$" : "", (int)t->parts[i].len,
                                      t->parts[i].text);
}

static void test_defaults(void)
{
        relay_config_t *c = config();
        relay_settings_t *s = load(c);
        char tpl[256];

        is_str(s->postgres_conninfo, "", "postgres.conninfo empty");
        is_str(s->kafka_bootstrap_servers, "", "kafka.bootstrap.servers unset reads \"\"");
        is_str(s->slot_name, "outbox_relay", "slot.name");
        ok(!s->slot_recreate, "slot.recreate false");
        ok(!s->slot_failover, "slot.failover false");
        is_str(s->publication_name, "outbox_pub", "publication.name");
        is_str(s->outbox_table.schema, "public", "outbox.table schema");
        is_str(s->outbox_table.name, "outbox", "outbox.table name");
        is_str(s->outbox_column.id, "id", "outbox.column.id");
        is_str(s->outbox_column.aggregate_type, "aggregatetype", "outbox.column.aggregate_type");
        is_str(s->outbox_column.aggregate_id, "aggregateid", "outbox.column.aggregate_id");
        is_str(s->outbox_column.type, "type", "outbox.column.type");
        is_str(s->outbox_column.payload, "payload", "outbox.column.payload");
        is_int(s->n_outbox_headers, 0, "no outbox.headers");
        template_str(&s->topic_template, tpl, sizeof(tpl));
        is_str(tpl, "outbox.event.|$aggregatetype", "topic.template parsed");
        is_int(s->errors_policy, RELAY_ERRORS_DLQ, "errors.policy dlq");
        is_int(s->errors_retries, 3, "errors.retries");
        is_int(s->errors_backoff_ms, 1000, "errors.backoff.ms");
        is_int(s->errors_backoff_max_ms, 30000, "errors.backoff.max.ms");
        is_str(s->errors_dlq_topic, "outbox.dlq", "errors.dlq.topic");
        is_int(s->n_errors_skip_ids, 0, "no errors.skip.ids");
        ok(!s->unsafe_allow_pipelining, "delivery.unsafe.allow.pipelining false");
        ok(!s->exactly_once, "delivery.mode at-least-once");
        is_str(s->eos_transactional_id, "", "eos.transactional.id empty (derived)");
        is_int(s->eos_commit_interval_ms, 100, "eos.commit.interval.ms");
        is_int(s->eos_commit_catchup_interval_ms, 1000, "eos.commit.catchup.interval.ms");
        is_int(s->eos_commit_max_events, 100000, "eos.commit.max.events");
        is_str(s->eos_checkpoint_topic, "outbox.relay.checkpoints", "eos.checkpoint.topic");
        ok(!s->snapshot_initial, "snapshot.mode never");
        is_str(s->snapshot_filter, "", "snapshot.filter empty");
        is_int(s->status_interval_ms, 10000, "status.interval.ms");
        is_int(s->shutdown_timeout_ms, 30000, "shutdown.timeout.ms");
        is_int(s->reconnect_backoff_ms, 500, "reconnect.backoff.ms");
        is_int(s->reconnect_backoff_max_ms, 30000, "reconnect.backoff.max.ms");
        is_int(s->log_level, RELAY_LOG_INFO, "log.level info");
        is_int(s->log_format, RELAY_LOG_TEXT, "log.format text");
        relay_settings_free(s);
        relay_settings_free(NULL);
        relay_config_free(c);
}

static void test_converted(void)
{
        static const char *const sets[] = {
                "postgres.conninfo=host=db dbname=app",
                "kafka.bootstrap.servers=k1:9092,k2:9092",
                "slot.name=s1",
                "slot.recreate=TRUE",
                "slot.failover=true",
                "publication.name=p1",
                "outbox.table=app.events",
                "outbox.column.id=event_id",
                "outbox.column.aggregate_type=agg_type",
                "outbox.column.aggregate_id=agg_id",
                "outbox.column.type=event_type",
                "outbox.column.payload=body",
                "outbox.headers= trace_id , tenant ",
                "topic.template=${agg_type}.v1-${event_type}",
                "errors.policy=Stop",
                "errors.retries=0",
                "errors.backoff.ms=20",
                "errors.backoff.max.ms=40",
                "errors.dlq.topic=dead.letters",
                "errors.skip.ids= a-1 ,, b-2,",
                "delivery.unsafe.allow.pipelining=true",
                "status.interval.ms=2000",
                "shutdown.timeout.ms=0",
                "reconnect.backoff.ms=100",
                "reconnect.backoff.max.ms=200",
                "log.level=debug",
                "log.format=json",
                "delivery.mode=exactly-once",
                "eos.transactional.id=relay-a",
                "eos.commit.interval.ms=250",
                "eos.commit.catchup.interval.ms=0",
                "eos.commit.max.events=500",
                "eos.checkpoint.topic=ck",
        };
        relay_config_t *c = config();
        relay_settings_t *s;
        char tpl[256];

        for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++)
                set(c, sets[i]);
        s = load(c);
        is_str(s->postgres_conninfo, "host=db dbname=app", "postgres.conninfo");
        is_str(s->kafka_bootstrap_servers, "k1:9092,k2:9092", "kafka.bootstrap.servers");
        is_str(s->slot_name, "s1", "slot.name");
        ok(s->slot_recreate, "slot.recreate TRUE is true");
        ok(s->slot_failover, "slot.failover true");
        is_str(s->publication_name, "p1", "publication.name");
        is_str(s->outbox_table.schema, "app", "outbox.table schema");
        is_str(s->outbox_table.name, "events", "outbox.table name");
        is_str(s->outbox_column.id, "event_id", "outbox.column.id");
        is_str(s->outbox_column.aggregate_type, "agg_type", "outbox.column.aggregate_type");
        is_str(s->outbox_column.aggregate_id, "agg_id", "outbox.column.aggregate_id");
        is_str(s->outbox_column.type, "event_type", "outbox.column.type");
        is_str(s->outbox_column.payload, "body", "outbox.column.payload");
        is_int(s->n_outbox_headers, 2, "two outbox.headers");
        if (s->n_outbox_headers == 2) {
                is_str(s->outbox_headers[0], "trace_id", "first, trimmed");
                is_str(s->outbox_headers[1], "tenant", "second, trimmed");
        }
        template_str(&s->topic_template, tpl, sizeof(tpl));
        is_str(tpl, "$agg_type|.v1-|$event_type", "topic.template: column, literal, column");
        is_int(s->errors_policy, RELAY_ERRORS_STOP, "errors.policy Stop is stop");
        is_int(s->errors_retries, 0, "errors.retries");
        is_int(s->errors_backoff_ms, 20, "errors.backoff.ms");
        is_int(s->errors_backoff_max_ms, 40, "errors.backoff.max.ms");
        is_str(s->errors_dlq_topic, "dead.letters", "errors.dlq.topic");
        is_int(s->n_errors_skip_ids, 2, "two skip ids, empty items dropped");
        if (s->n_errors_skip_ids == 2) {
                is_str(s->errors_skip_ids[0], "a-1", "first skip id, trimmed");
                is_str(s->errors_skip_ids[1], "b-2", "second skip id");
        }
        ok(s->unsafe_allow_pipelining, "delivery.unsafe.allow.pipelining true");
        ok(s->exactly_once, "delivery.mode exactly-once");
        is_str(s->eos_transactional_id, "relay-a", "eos.transactional.id");
        is_int(s->eos_commit_interval_ms, 250, "eos.commit.interval.ms");
        is_int(s->eos_commit_catchup_interval_ms, 0, "eos.commit.catchup.interval.ms 0 (off)");
        is_int(s->eos_commit_max_events, 500, "eos.commit.max.events");
        is_str(s->eos_checkpoint_topic, "ck", "eos.checkpoint.topic");
        is_int(s->status_interval_ms, 2000, "status.interval.ms");
        is_int(s->shutdown_timeout_ms, 0, "shutdown.timeout.ms 0");
        is_int(s->reconnect_backoff_ms, 100, "reconnect.backoff.ms");
        is_int(s->reconnect_backoff_max_ms, 200, "reconnect.backoff.max.ms");
        is_int(s->log_level, RELAY_LOG_DEBUG, "log.level debug");
        is_int(s->log_format, RELAY_LOG_JSON, "log.format json");
        relay_settings_free(s);

        /* A bare table name means public; a template of one literal is one part. */
        set(c, "outbox.table=events");
        set(c, "topic.template=all-events");
        set(c, "log.level=warning");
        set(c, "errors.skip.ids=");
        s = load(c);
        is_str(s->outbox_table.schema, "public", "bare table name: schema public");
        is_str(s->outbox_table.name, "events", "bare table name");
        template_str(&s->topic_template, tpl, sizeof(tpl));
        is_str(tpl, "all-events", "literal template is one part");
        is_int(s->log_level, RELAY_LOG_WARNING, "log.level warning");
        is_int(s->n_errors_skip_ids, 0, "empty errors.skip.ids");
        relay_settings_free(s);
        relay_config_free(c);
}

/* What the configuration refuses through the shared rules, and the header cap. */
static void test_refused(void)
{
        relay_config_t *c = config();
        char list[1024];
        size_t n = 0;

        is_int(relay_config_set_arg(c, "errors.dlq.topic=dlq.${aggregatetype}", err, sizeof(err)),
               RELAY_EINVAL, "errors.dlq.topic with a ${column} refused");
        ok(strstr(err, "must be one Kafka topic name (no ${column})") != NULL, "  says why: %s",
           err);
        is_int(relay_config_set_arg(c, "errors.dlq.topic=..", err, sizeof(err)), RELAY_EINVAL,
               "errors.dlq.topic \"..\" refused");
        is_int(relay_config_set_arg(c, "delivery.unsafe.allow.pipelining=yes", err, sizeof(err)),
               RELAY_EINVAL, "delivery.unsafe.allow.pipelining=yes refused");

        /* id and type plus 62 columns is the most an event may carry. */
        for (int i = 0; i < RELAY_EVENT_MAX_HEADERS - 2; i++)
                n += (size_t)snprintf(list + n, sizeof(list) - n, "%sh%d", i ? "," : "", i);
        set(c, "kafka.bootstrap.servers=k:9092");
        if (relay_config_set(c, "outbox.headers", list, "--set", err, sizeof(err)) != 0)
                tap_bail("outbox.headers: %s", err);
        is_int(relay_config_validate(c, err, sizeof(err)), 0, "%d outbox.headers columns pass",
               RELAY_EVENT_MAX_HEADERS - 2);
        snprintf(list + n, sizeof(list) - n, ",h%d", RELAY_EVENT_MAX_HEADERS - 2);
        if (relay_config_set(c, "outbox.headers", list, "--set", err, sizeof(err)) != 0)
                tap_bail("outbox.headers: %s", err);
        is_int(relay_config_validate(c, err, sizeof(err)), RELAY_EINVAL,
               "%d outbox.headers columns refused at start", RELAY_EVENT_MAX_HEADERS - 1);
        ok(strstr(err, "outbox.headers (at --set) lists 63 columns: with id and type an event "
                       "would carry 65 headers, more than the 64 allowed; list at most 62") != NULL,
           "  names the count and the cap: %s", err);
        relay_config_free(c);

        /* 62 columns pass alone, not with what else every event carries:
         * each row was refused as poison (dead-lettered, every one). */
        relay_settings_t *hs = NULL;
        list[n] = '\0';
        c = config();
        set(c, "kafka.bootstrap.servers=k:9092");
        if (relay_config_set(c, "outbox.headers", list, "--set", err, sizeof(err)) != 0)
                tap_bail("outbox.headers: %s", err);
        set(c, "table.fields.additional.placement=tenant:header");
        is_int(relay_settings_load(&hs, c, err, sizeof(err)), RELAY_EINVAL,
               "62 outbox.headers columns and a header placement refused at start");
        ok(strstr(err, "\"table.fields.additional.placement\": with id and type, 62 "
                       "outbox.headers columns and 1 header placements an event would carry 65 "
                       "headers, more than the 64 allowed") &&
                   strstr(err, "list 1 fewer"),
           "  names the count, the cap and the fix: %s", err);
        relay_settings_free(hs);
        relay_config_free(c);
        hs = NULL;
        c = config();
        set(c, "kafka.bootstrap.servers=k:9092");
        if (relay_config_set(c, "outbox.headers", list, "--set", err, sizeof(err)) != 0)
                tap_bail("outbox.headers: %s", err);
        set(c, "format.profile=connect-json");
        is_int(relay_settings_load(&hs, c, err, sizeof(err)), 0,
               "62 columns under a profile without context headers: 63 headers pass");
        relay_settings_free(hs);
        hs = NULL;
        set(c, "format.debezium.topic_prefix=dbz");
        is_int(relay_settings_load(&hs, c, err, sizeof(err)), RELAY_EINVAL,
               "62 columns with Debezium's four context headers refused at start");
        ok(strstr(err, "\"format.debezium.topic_prefix\": with id, Debezium's four context "
                       "headers") && strstr(err, "67 headers"),
           "  names the context headers: %s", err);
        relay_settings_free(hs);
        relay_config_free(c);

        /* A Debezium profile types outbox columns; a message has none. */
        relay_settings_t *s = NULL;
        c = config();
        set(c, "kafka.bootstrap.servers=k:9092");
        set(c, "outbox.source=both");
        set(c, "format.profile=connect-json");
        is_int(relay_settings_load(&s, c, err, sizeof(err)), RELAY_EINVAL,
               "format.profile connect-json with outbox.source both refused");
        ok(strstr(err, "format.profile = raw") != NULL, "  names the fix: %s", err);
        relay_settings_free(s);
        relay_config_free(c);
        /* Transactions only through delivery.mode: a bare transactional.id
         * would leave the producer without init_transactions. */
        c = config();
        set(c, "kafka.bootstrap.servers=k:9092");
        set(c, "kafka.transactional.id=x");
        is_int(relay_config_validate(c, err, sizeof(err)), RELAY_EINVAL,
               "kafka.transactional.id refused");
        ok(strstr(err, "delivery.mode = exactly-once") != NULL, "  names the key to use: %s", err);
        relay_config_free(c);
        c = config();
        is_int(relay_config_set(c, "delivery.mode", "exactly-twice", "--set", err, sizeof(err)),
               RELAY_EINVAL, "an unknown delivery.mode refused");
        is_int(relay_config_set(c, "snapshot.mode", "always", "--set", err, sizeof(err)),
               RELAY_EINVAL, "an unknown snapshot.mode refused");
        relay_config_free(c);

        /* The backfill: taken with a table, refused without one. */
        c = config();
        set(c, "kafka.bootstrap.servers=k:9092");
        set(c, "snapshot.mode=initial");
        set(c, "snapshot.filter=sent_at IS NULL");
        set(c, "outbox.source=both");
        s = NULL;
        is_int(relay_settings_load(&s, c, err, sizeof(err)), 0, "snapshot.mode initial, source both");
        ok(s && s->snapshot_initial, "  snapshot.mode initial");
        is_str(s ? s->snapshot_filter : NULL, "sent_at IS NULL", "  snapshot.filter as written");
        relay_settings_free(s);
        s = NULL;
        set(c, "outbox.source=messages");
        is_int(relay_settings_load(&s, c, err, sizeof(err)), RELAY_EINVAL,
               "snapshot.mode initial with outbox.source messages refused");
        ok(strstr(err, "\"snapshot.mode\"") && strstr(err, "no outbox table to backfill from"),
           "  names the key and why: %s", err);
        relay_settings_free(s);
        s = NULL;
        set(c, "snapshot.mode=never");
        is_int(relay_settings_load(&s, c, err, sizeof(err)), RELAY_EINVAL,
               "snapshot.filter with outbox.source messages refused");
        ok(strstr(err, "\"snapshot.filter\"") != NULL, "  names the key: %s", err);
        relay_settings_free(s);
        relay_config_free(c);
        c = config();
        set(c, "kafka.bootstrap.servers=k:9092");
        set(c, "snapshot.mode=initial");
        set(c, "delivery.mode=exactly-once");
        s = NULL;
        is_int(relay_settings_load(&s, c, err, sizeof(err)), RELAY_EINVAL,
               "snapshot.mode initial with exactly-once refused");
        ok(strstr(err, "delivery.mode = at-least-once") != NULL, "  says what to do: %s", err);
        relay_settings_free(s);
        relay_config_free(c);
}

static void test_names(void)
{
        relay_table_name_t t = {NULL, NULL};
        relay_topic_template_t tpl = {NULL, 0};
        char why[RELAY_ERRBUF], parts[256];

        is_int(relay_names_parse_table("app.events", &t, why, sizeof(why)), 0, "app.events");
        ok(t.schema && t.name && strcmp(t.schema, "app") == 0 && strcmp(t.name, "events") == 0,
           "  split at the dot");
        relay_names_table_free(&t);
        relay_names_table_free(&t);
        ok(t.schema == NULL && t.name == NULL, "table_free clears, so freeing twice is safe");
        is_int(relay_names_parse_table("a.b.c", NULL, why, sizeof(why)), RELAY_EINVAL,
               "a.b.c refused");
        ok(strstr(why, "must be \"schema.table\" or \"table\"") != NULL, "  says why: %s", why);
        is_int(relay_names_parse_table("Outbox", NULL, why, sizeof(why)), RELAY_EINVAL,
               "upper case refused (would need quoting)");

        is_int(relay_names_parse_template("${a}${b}", &tpl, why, sizeof(why)), 0,
               "two adjacent columns");
        template_str(&tpl, parts, sizeof(parts));
        is_str(parts, "$a|$b", "  two column parts, no empty literal between");
        relay_names_template_free(&tpl);
        is_int(relay_names_parse_template("x.${a}.y", &tpl, why, sizeof(why)), 0, "x.${a}.y");
        template_str(&tpl, parts, sizeof(parts));
        is_str(parts, "x.|$a|.y", "  literal, column, literal");
        relay_names_template_free(&tpl);
        is_int(relay_names_parse_template("x.${a", &tpl, why, sizeof(why)), RELAY_EINVAL,
               "unclosed ${ refused");
        ok(tpl.parts == NULL && tpl.nparts == 0, "  and *out untouched");
        is_int(relay_names_parse_template("a b", NULL, why, sizeof(why)), RELAY_EINVAL,
               "blank refused");
        ok(strstr(why, "must not contain \" \"") != NULL, "  says why: %s", why);

        ok(relay_names_is_topic("a.b_c-D9", 8), "a.b_c-D9 is a topic name");
        ok(!relay_names_is_topic(".", 1) && !relay_names_is_topic("..", 2), ". and .. are not");
        ok(!relay_names_is_topic("a/b", 3) && !relay_names_is_topic("", 0), "a/b and \"\" are not");
        {
                char longname[RELAY_TOPIC_MAX + 1];
                memset(longname, 'x', sizeof(longname));
                ok(relay_names_is_topic(longname, RELAY_TOPIC_MAX), "%d characters are allowed",
                   RELAY_TOPIC_MAX);
                ok(!relay_names_is_topic(longname, RELAY_TOPIC_MAX + 1), "%d are not",
                   RELAY_TOPIC_MAX + 1);
        }
}

/* Every choice of every enum key becomes its own enum value: the choices'
 * order in config_keys.dat is the enums' order, and nothing else holds the
 * two together. */
static void test_choices(void)
{
        static const struct {
                const char *set;
                int off;  /* offsetof the field in relay_settings_t */
                int size; /* its size: an enum or a bool */
                int want;
        } cases[] = {
#define F(field) (int)offsetof(relay_settings_t, field), (int)sizeof(((relay_settings_t *)0)->field)
                {"errors.policy=dlq", F(errors_policy), RELAY_ERRORS_DLQ},
                {"errors.policy=stop", F(errors_policy), RELAY_ERRORS_STOP},
                {"outbox.source=table", F(outbox_source), RELAY_SOURCE_TABLE},
                {"outbox.source=messages", F(outbox_source), RELAY_SOURCE_MESSAGES},
                {"outbox.source=both", F(outbox_source), RELAY_SOURCE_BOTH},
                {"format.profile=raw", F(format_profile), RELAY_PROFILE_RAW},
                {"format.profile=connect-string", F(format_profile), RELAY_PROFILE_CONNECT_STRING},
                {"format.profile=connect-json", F(format_profile), RELAY_PROFILE_CONNECT_JSON},
                {"format.profile=connect-json-schema", F(format_profile),
                 RELAY_PROFILE_CONNECT_JSON_SCHEMA},
                {"format.profile=debezium-server", F(format_profile), RELAY_PROFILE_DEBEZIUM_SERVER},
                {"table.op.invalid.behavior=warn", F(invalid_op), RELAY_INVALID_OP_WARN},
                {"table.op.invalid.behavior=error", F(invalid_op), RELAY_INVALID_OP_ERROR},
                {"table.op.invalid.behavior=fatal", F(invalid_op), RELAY_INVALID_OP_FATAL},
                {"table.field.additional.missing=error", F(additional_missing_ignore), false},
                {"table.field.additional.missing=ignore", F(additional_missing_ignore), true},
                {"snapshot.mode=never", F(snapshot_initial), false},
                {"snapshot.mode=initial", F(snapshot_initial), true},
                {"delivery.mode=at-least-once", F(exactly_once), false},
                {"delivery.mode=exactly-once", F(exactly_once), true},
                {"log.level=debug", F(log_level), RELAY_LOG_DEBUG},
                {"log.level=info", F(log_level), RELAY_LOG_INFO},
                {"log.level=warning", F(log_level), RELAY_LOG_WARNING},
                {"log.level=error", F(log_level), RELAY_LOG_ERROR},
                {"log.format=text", F(log_format), RELAY_LOG_TEXT},
                {"log.format=json", F(log_format), RELAY_LOG_JSON},
#undef F
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                relay_config_t *c = config();
                set(c, cases[i].set);
                relay_settings_t *s = load(c);
                const char *p = (const char *)s + cases[i].off;
                int got;
                if (cases[i].size == (int)sizeof(bool)) {
                        got = *(const bool *)p;
                } else {
                        int v;
                        if (cases[i].size != (int)sizeof(v))
                                tap_bail("%s: an enum of %d bytes", cases[i].set, cases[i].size);
                        memcpy(&v, p, sizeof(v));
                        got = v;
                }
                is_int(got, cases[i].want, "%s maps to its enum value", cases[i].set);
                relay_settings_free(s);
                relay_config_free(c);
        }
}

/* table.fields.additional.placement: an alias is kept whole (a header name
 * Kafka takes at any length), never cut. */
static void test_placement_alias(void)
{
        char arg[512], alias[201];
        memset(alias, 'h', 200);
        alias[200] = '\0';
        snprintf(arg, sizeof(arg), "table.fields.additional.placement=tenant:header:%s", alias);
        relay_config_t *c = config();
        set(c, arg);
        relay_settings_t *s = NULL;
        int rc = relay_settings_load(&s, c, err, sizeof(err));
        ok(rc == 0 && s->n_additional == 1 && strcmp(s->additional[0].alias, alias) == 0,
           "a 200-character alias is kept whole (rc %d, alias of %zu characters)", rc,
           rc == 0 && s->n_additional ? strlen(s->additional[0].alias) : 0);
        relay_settings_free(s);
        relay_config_free(c);

        /* A fourth part is no alias of anything: Debezium would drop the
         * alias, the relay kept the third part; refused, by name. */
        c = config();
        set(c, "table.fields.additional.placement=tenant:header:t:x");
        s = NULL;
        rc = relay_settings_load(&s, c, err, sizeof(err));
        is_int(rc, RELAY_EINVAL, "an item of four parts is refused (%s)",
               rc == 0 && s->n_additional ? s->additional[0].alias : err);
        ok(strstr(err, "column:placement or column:placement:alias") != NULL, "  says the forms: %s",
           err);
        relay_settings_free(s);
        relay_config_free(c);
}

int main(void)
{
        test_placement_alias();
        test_defaults();
        test_choices();
        test_converted();
        test_refused();
        test_names();
        return done_testing();
}
