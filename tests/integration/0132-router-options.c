/*
 * 0132-router-options.c - the Outbox Event Router options the differential
 * test (0130) cannot cover, asserted on what Kafka and PostgreSQL hold:
 *
 * (a) route.topic.regex: a value the regex matches goes to the topic its
 *     named groups build, one it does not match to the value itself
 *     (Kafka Connect's RegexRouter).
 * (b) tracing.span.context.field: the writer's traceparent and tracestate
 *     arrive as headers before id, byte for byte; a row without a context
 *     has none.
 * (c) table.op.invalid.behavior: a row inserted and deleted in one
 *     transaction is an event like any other and the DELETE says nothing;
 *     with fatal the relay creates a publication with updates (no
 *     deletes), stops before an UPDATE of an outbox row with exit 4 naming
 *     the row, and what follows the update is not in Kafka; restarted with
 *     warn it logs the update as a warning and goes on. With error, a
 *     publication that does not publish updates is refused at start
 *     (exit 3) and by outbox-relay check.
 * (d) format.profile=debezium-server, whose id header is a JSON envelope:
 *     an event Kafka refuses (a timestamp from 2001 into a topic with
 *     message.timestamp.before.max.ms of an hour) is named by its id in
 *     the log, not "<unknown>".
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define TP "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
#define TS "rojo=00f067aa0ba902b7"
#define E1 "8d5c5c6e-0000-4000-8000-000000000001"
#define E2 "8d5c5c6e-0000-4000-8000-000000000002"
#define E3 "8d5c5c6e-0000-4000-8000-000000000003"
#define E4 "8d5c5c6e-0000-4000-8000-000000000004"
#define E5 "8d5c5c6e-0000-4000-8000-000000000005"

static bool header_is(const h_msg_t *m, size_t i, const char *name, const char *value)
{
        return i < m->nheaders && strcmp(m->header_names[i], name) == 0 &&
               m->header_lens[i] == strlen(value) && memcmp(m->header_values[i], value, strlen(value)) == 0;
}

static const h_msg_t *by_id(const h_msg_t *msgs, size_t n, const char *id)
{
        for (size_t i = 0; i < n; i++) {
                size_t l;
                const char *v = h_msg_header(&msgs[i], "id", &l);
                if (v && l == strlen(id) && memcmp(v, id, l) == 0)
                        return &msgs[i];
        }
        return NULL;
}

int main(void)
{
        /* Its topics are named by the router, not outbox.event.<aggtype>. */
        h_case_t k;
        h_case_open(&k, "router", "slot", "r", 0, 0);
        PGconn *c = k.c;
        const char *agg = k.aggtype;
        char topic_a[256];

        h_pg_exec(c, "ALTER TABLE outbox ADD COLUMN tracingspancontext text");
        snprintf(topic_a, sizeof(topic_a), "%s-events.v2", agg);
        const char *sets[] = {k.set_conn,
                              k.set_kafka,
                              k.set_slot,
                              "status.interval.ms=1000",
                              "format.profile=connect-string",
                              "route.by.field=aggregatetype",
                              "route.topic.regex=(?<agg>[a-z0-9_]+)\\.(?<ver>v[0-9]+)",
                              "route.topic.replacement=${agg}-events.${ver}",
                              "tracing.span.context.field=tracingspancontext",
                              "table.op.invalid.behavior=fatal",
                              NULL};
        h_relay_t *relay = h_relay_start(sets);
        ok(h_relay_streams(relay, 60000), "relay streams");
        char *pub = h_pg_value(c, "SELECT pubinsert::text || pubupdate::text || pubdelete::text FROM "
                                  "pg_publication WHERE pubname = 'outbox_pub'");
        is_str(pub, "truetruefalse", "fatal: the relay's publication publishes inserts and updates, "
                                     "not deletes");
        free(pub);

        h_pg_exec(c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload, "
                  "tracingspancontext) VALUES "
                  "('" E1 "', '%s.v2', 'order-1', 'Created', '{\"n\": 1}', "
                  "E'#Wed Dec 02 06:00:00 UTC 2026\\ntracestate=rojo\\\\=00f067aa0ba902b7\\n"
                  "traceparent=" TP "\\n'), "
                  "('" E2 "', '%s', 'order-2', 'Created', '{\"n\": 2}', NULL)",
                  agg, agg);
        h_pg_exec(c,
                  "BEGIN; INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES "
                  "('" E3 "', '%s.v2', 'order-3', 'Created', '{\"n\": 3}'); "
                  "DELETE FROM outbox WHERE id = '" E3 "'; COMMIT",
                  agg);
        is_int(h_kafka_wait_count(topic_a, 2, 60000), 2, "regex-routed topic %s holds 2 events", topic_a);
        is_int(h_kafka_wait_count(agg, 1, 60000), 1, "the unmatched value %s is the topic of the other", agg);

        h_msg_t *msgs;
        size_t n = h_kafka_consume_all(topic_a, &msgs);
        const h_msg_t *m1 = by_id(msgs, n, E1), *m3 = by_id(msgs, n, E3);
        ok(m1 && m1->nheaders == 3 && header_is(m1, 0, "traceparent", TP) &&
               header_is(m1, 1, "tracestate", TS) && header_is(m1, 2, "id", E1),
           "traced row: traceparent, tracestate, then id, byte for byte");
        ok(m1 && m1->key_len == 7 && memcmp(m1->key, "order-1", 7) == 0, "key is the aggregate id");
        ok(m3 && m3->nheaders == 1 && header_is(m3, 0, "id", E3),
           "a row inserted and deleted in one transaction is an event, without trace headers");
        h_msgs_free(msgs, n);

        /* An UPDATE of an outbox row, then an event after it. */
        h_pg_exec(c, "UPDATE outbox SET type = 'Changed' WHERE id = '" E1 "'");
        h_pg_exec(c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES "
                  "('" E4 "', '%s.v2', 'order-4', 'Created', '{\"n\": 4}')",
                  agg);
        int rc = h_relay_wait(relay, 60000);
        is_int(rc, 4, "fatal: the relay stops with exit 4");
        char *log = h_relay_log(relay);
        ok(log && strstr(log, "UPDATE of the outbox row with id \"" E1 "\"") &&
               strstr(log, "table.op.invalid.behavior = fatal"),
           "the log names the updated row and the setting");
        ok(log && !strstr(log, "DELETE"), "the DELETE was not reported");
        if (rc != 4)
                h_relay_diag_log(relay);
        free(log);
        h_relay_free(relay);
        is_int(h_kafka_count(topic_a), 2, "the event after the update is not in Kafka");

        /* The same slot with warn: the update is a warning, the event follows. */
        sets[9] = "table.op.invalid.behavior=warn";
        relay = h_relay_start(sets);
        ok(h_relay_wait_log(relay, "(table.op.invalid.behavior = warn)", 60000),
           "warn: the update is logged as a warning");
        is_int(h_kafka_wait_count(topic_a, 3, 60000), 3, "and the next event is delivered");
        n = h_kafka_consume_all(topic_a, &msgs);
        ok(by_id(msgs, n, E4) != NULL, "event " E4 " is in %s", topic_a);
        h_msgs_free(msgs, n);
        log = h_relay_log(relay);
        ok(log && strstr(log, "WARNING") && strstr(log, "UPDATE of the outbox row with id \"" E1 "\""),
           "the warning names the row");
        free(log);
        is_int(h_relay_stop(relay, 30000), 0, "SIGTERM: clean exit");
        h_relay_free(relay);

        /* error with a publication that does not publish updates. */
        h_pg_exec(c, "CREATE PUBLICATION pub_ins FOR TABLE outbox WITH (publish = 'insert')");
        char *slot2 = h_unique_name("slot");
        char set_slot2[128];
        snprintf(set_slot2, sizeof(set_slot2), "slot.name=%s", slot2);
        const char *sets2[] = {k.set_conn, k.set_kafka, set_slot2, "publication.name=pub_ins",
                               "table.op.invalid.behavior=error", NULL};
        char *out = NULL;
        rc = h_relay_run_cmd(NULL, NULL, sets2, 60000, &out, &log);
        is_int(rc, 3, "error on an insert-only publication: exit 3");
        ok(log && strstr(log, "does not publish updates") &&
               strstr(log, "ALTER PUBLICATION pub_ins SET (publish = 'insert, update')"),
           "the message names the publication and the fix");
        free(out);
        free(log);
        rc = h_relay_run_cmd("check", NULL, sets2, 60000, &out, &log);
        ok(rc != 0 && out && strstr(out, "publication does not publish updates"),
           "outbox-relay check fails it too (exit %d)", rc);
        free(out);
        free(log);

        /* (d) a delivery Kafka refuses, under debezium-server. */
        char *slot3 = h_unique_name("slot"), *agg3 = h_unique_name("ts");
        char set_slot3[128], topic_ts[256];
        snprintf(set_slot3, sizeof(set_slot3), "slot.name=%s", slot3);
        snprintf(topic_ts, sizeof(topic_ts), "outbox.event.%s", agg3);
        static const char *const hour[] = {"message.timestamp.before.max.ms", "3600000", NULL};
        h_kafka_create_topic_config(topic_ts, 1, hour);
        const char *sets3[] = {k.set_conn, k.set_kafka, set_slot3, "format.profile=debezium-server",
                               "table.field.event.timestamp=created_at", "errors.policy=stop", NULL};
        relay = h_relay_start(sets3);
        ok(h_relay_streams(relay, 60000), "(d) relay streams");
        h_pg_exec(c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload, created_at) "
                  "VALUES ('" E5 "', '%s', 'order-5', 'Created', '{}', '2001-02-03 04:05:06+00')",
                  agg3);
        rc = h_relay_wait(relay, 60000);
        is_int(rc, 4, "(d) errors.policy=stop: exit 4 at the refused event");
        log = h_relay_log(relay);
        ok(log && strstr(log, "Kafka rejected event \"" E5 "\"") && !strstr(log, "<unknown>"),
           "(d) the delivery report names the event's id, not <unknown>");
        if (!log || !strstr(log, "Kafka rejected event \"" E5 "\"") || strstr(log, "<unknown>"))
                h_relay_diag_log(relay);
        free(log);
        h_relay_free(relay);
        is_int(h_kafka_count(topic_ts), 0, "(d) nothing reached the topic");

        /* h_case_close() drops the three slots with the database. */
        h_kafka_delete_topic(topic_ts);
        h_kafka_delete_topic(topic_a);
        h_kafka_delete_topic(agg);
        free(slot3);
        free(agg3);
        free(slot2);
        h_case_close(&k);
        return done_testing();
}
