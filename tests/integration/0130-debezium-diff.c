/*
 * 0130-debezium-diff.c - the wire-compatibility profiles against the real
 * Debezium 3.6.1: the same WAL is read by Debezium (embedded engine,
 * PostgreSQL connector on pgoutput, Outbox EventRouter with
 * table.fields.additional.placement=tenant:header; tests/bench/debezium's
 * OutboxDiff converts each routed record as Kafka Connect or Debezium
 * Server would) and by the relay with format.profile set to the same
 * profile, and every message is compared field by field: topic (up to the
 * prefix), partition (Kafka's murmur2 partitioner on the key bytes against
 * librdkafka's murmur2_random), key bytes, value bytes, header names and
 * bytes, in order.
 *
 * The workload: four outbox tables whose payload is json, jsonb, text and
 * bytea; a NULL payload, an empty one, unicode aggregate ids, escapes and
 * control characters in payloads and a NULL, an empty and a unicode extra
 * header column.
 *
 * A fifth table, outbox_jexp (jsonb), has a router of its own with
 * table.expand.json.payload=true on both sides: objects with nested
 * objects, arrays of strings, of doubles and of alike objects, int32 and
 * int64 numbers, null members, an empty object, unicode and control
 * characters become structs (Struct{...}, JSON objects, with the inferred
 * schema).
 *
 * The text and bytea tables also go through envelope and partition
 * placements (table.fields.additional.placement=type:envelope:eventType,
 * tenant:envelope, part:partition, the same string on both sides, and
 * table.field.event.schema.version=ver with versions NULL, 1 and 2; a
 * predicate gives them their own router on the Debezium side).
 *
 * Both sides take the message timestamp from a timestamp column
 * (table.field.event.timestamp; rows from 2001 to now), compared for the
 * Connect profiles. The relay routes with Debezium's key names
 * (route.by.field, route.topic.replacement) rather than topic.template.
 *
 * Documented differences (README, "Coming from Debezium"), not compared:
 * the timestamp under Debezium Server (its Kafka sink leaves it to the
 * producer: the send time) and the value of the __debezium.context.runId
 * header (a random UUID per connector run on both sides; its length is
 * compared).
 *
 * Needs java and mvn: the Debezium side is built with Maven from
 * tests/bench/debezium (its classes under tests/bench/work/debezium), once
 * (h_debezium_build).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define NPROF 4
#define NKIND 5
#define NBULK 20

static const char *const profiles[NPROF] = {"connect-string", "connect-json",
                                            "connect-json-schema", "debezium-server"};
static const char *const dpfx[NPROF] = {"dcs", "dcj", "dcjs", "dds"};
static const char *const rpfx[NPROF] = {"rcs", "rcj", "rcjs", "rds"};
static const char *const kinds[NKIND] = {"json", "jsonb", "text", "bytea", "jexp"};
/* The column type of each kind's payload; jexp: jsonb with table.expand.json.payload=true. */
static const char *const types[NKIND] = {"json", "jsonb", "text", "bytea", "jsonb"};

/* Payload SQL per kind: normal, unicode and escapes, empty, control characters. */
static const char *const pay_normal[NKIND] = {
        "'{\"total\": 12, \"items\": [1, 2.50, {\"sku\": \"a/b\"}]}'",
        "'{\"total\": 12, \"items\": [1, 2.50, {\"sku\": \"a/b\"}]}'", "'hello'",
        "'\\x00010203ff'::bytea",
        "'{\"total\": 12, \"items\": [{\"sku\": \"a/b\", \"qty\": 2}, {\"sku\": \"c\", \"qty\": 3}], "
        "\"tags\": [\"x\", null], \"ok\": true, \"n\": null, \"big\": 12345678901, \"e\": [], "
        "\"o\": {\"p\": {}, \"x\": [2.50, -0.001, 0.0001, 12345678.9, 15000000000.5, -0.0]}}'"};
static const char *const pay_unicode[NKIND] = {
        "'{\"name\": \"Zoë \\\"q\\\" \\\\ / \\u00e9 😀\", \"€\": true}'",
        "'{\"name\": \"Zoë \\\"q\\\" \\\\ / \\u00e9 😀\", \"€\": true}'",
        "'Zoë \"q\" \\ / 😀 €'", "convert_to('Zoë 😀', 'UTF8')",
        "'{\"name\": \"Zoë \\\"q\\\" \\\\ / \\u00e9 😀\", \"€\": true}'"};
static const char *const pay_empty[NKIND] = {"'{}'", "'[]'", "''", "'\\x'::bytea", "'{}'"};
static const char *const pay_ctl[NKIND] = {
        "E'{\\n  \"t\": \"a\\\\tb\\\\n\",\\t\"u\": null\\r\\n}'",
        "E'{\\n  \"t\": \"a\\\\tb\\\\n\\\\u0001\",\\t\"u\": null\\r\\n}'",
        "E'line1\\nline2\\t\\x01\\x1f\\x7f end\\b\\f'", "'\\x0a0d00'::bytea",
        "E'{\\n  \"t\": \"a\\\\tb\\\\n\\\\u0001\",\\t\"u\": null\\r\\n}'"};

#define ROWS (4 + NBULK)
#define PLACEMENT "tenant:header,type:envelope:eventType,tenant:envelope,part:partition"

/* Kafka Connect's StringConverter writes a struct as Struct{...}: the relay
 * refuses an envelope placement under connect-string, so that pair is not run. */
static bool unsupported_pair(int k, int p)
{
        return (k == 2 || k == 3) && p == 0;
}

/* Bytes for a diagnostic line: printable ASCII as is, the rest as \xNN. */
static void show(char *out, size_t cap, const char *p, size_t n)
{
        size_t o = 0;
        if (!p) {
                snprintf(out, cap, "(null)");
                return;
        }
        for (size_t i = 0; i < n && o + 5 < cap; i++) {
                unsigned char c = (unsigned char)p[i];
                if (c >= 0x20 && c < 0x7f)
                        out[o++] = (char)c;
                else
                        o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
        }
        out[o] = '\0';
}

static bool same(const char *a, size_t al, const char *b, size_t bl)
{
        if (!a || !b)
                return a == b;
        return al == bl && memcmp(a, b, al) == 0;
}

/* At most three diagnostics per field and profile prefix, so every kind of difference shows. */
static struct {
        char what[96];
        int n;
} shown[64];

static bool show_more(const char *what, const char *topic)
{
        char key[96];
        snprintf(key, sizeof(key), "%.40s %.8s", what, topic);
        for (size_t i = 0; i < sizeof(shown) / sizeof(shown[0]); i++) {
                if (shown[i].what[0] == '\0')
                        snprintf(shown[i].what, sizeof(shown[i].what), "%s", key);
                if (strcmp(shown[i].what, key) == 0)
                        return shown[i].n++ < 3;
        }
        return false;
}

static void diff_diag(const char *what, const char *topic, long long off, const char *a, size_t al,
                      const char *b, size_t bl)
{
        char x[600], y[600];
        if (!show_more(what, topic))
                return;
        show(x, sizeof(x), a, al);
        show(y, sizeof(y), b, bl);
        tap_diag("%s differs at %s offset %lld:\n#   debezium: %s\n#   relay:    %s", what, topic, off, x,
                 y);
}

/* Compare one topic pair message by message; returns the number of differences. */
static int compare(const char *dtopic, const char *rtopic, bool timestamps, size_t *count,
                   int *partitions)
{
        h_msg_t *d, *r;
        size_t nd = h_kafka_consume_all(dtopic, &d);
        size_t nr = h_kafka_consume_all(rtopic, &r);
        int diffs = 0;
        unsigned seen = 0;

        if (nd != nr) {
                tap_diag("%s holds %zu messages, %s %zu", dtopic, nd, rtopic, nr);
                diffs++;
        }
        for (size_t i = 0; i < nd && i < nr; i++) {
                const h_msg_t *a = &d[i], *b = &r[i];
                char pa[16], pb[16];
                if (a->partition != b->partition) {
                        snprintf(pa, sizeof(pa), "%d", (int)a->partition);
                        snprintf(pb, sizeof(pb), "%d", (int)b->partition);
                        diff_diag("partition", dtopic, (long long)a->offset, pa, strlen(pa), pb,
                                  strlen(pb));
                        diffs++;
                }
                seen |= 1u << (a->partition & 31);
                if (timestamps && (a->timestamp != b->timestamp ||
                                   a->timestamp_type != b->timestamp_type)) {
                        snprintf(pa, sizeof(pa), "%lld", (long long)a->timestamp);
                        snprintf(pb, sizeof(pb), "%lld", (long long)b->timestamp);
                        diff_diag("timestamp", dtopic, (long long)a->offset, pa, strlen(pa), pb,
                                  strlen(pb));
                        diffs++;
                }
                if (!same(a->key, a->key_len, b->key, b->key_len)) {
                        diff_diag("key", dtopic, (long long)a->offset, a->key, a->key_len, b->key,
                                  b->key_len);
                        diffs++;
                }
                if (!same(a->value, a->value_len, b->value, b->value_len)) {
                        diff_diag("value", dtopic, (long long)a->offset, a->value, a->value_len,
                                  b->value, b->value_len);
                        diffs++;
                }
                if (a->nheaders != b->nheaders) {
                        snprintf(pa, sizeof(pa), "%zu", a->nheaders);
                        snprintf(pb, sizeof(pb), "%zu", b->nheaders);
                        diff_diag("header count", dtopic, (long long)a->offset, pa, strlen(pa), pb,
                                  strlen(pb));
                        diffs++;
                }
                for (size_t h = 0; h < a->nheaders && h < b->nheaders; h++) {
                        if (strcmp(a->header_names[h], b->header_names[h]) != 0) {
                                diff_diag("header name", dtopic, (long long)a->offset,
                                          a->header_names[h], strlen(a->header_names[h]),
                                          b->header_names[h], strlen(b->header_names[h]));
                                diffs++;
                        }
                        /* Documented: a random UUID per connector run on both sides. */
                        if (strcmp(a->header_names[h], "__debezium.context.runId") == 0) {
                                if (a->header_lens[h] != b->header_lens[h]) {
                                        diff_diag("runId length", dtopic, (long long)a->offset,
                                                  a->header_values[h], a->header_lens[h],
                                                  b->header_values[h], b->header_lens[h]);
                                        diffs++;
                                }
                                continue;
                        }
                        if (!same(a->header_values[h], a->header_lens[h], b->header_values[h],
                                  b->header_lens[h])) {
                                diff_diag(a->header_names[h], dtopic, (long long)a->offset,
                                          a->header_values[h], a->header_lens[h],
                                          b->header_values[h], b->header_lens[h]);
                                diffs++;
                        }
                }
        }
        *count = nd;
        *partitions = __builtin_popcount(seen);
        h_msgs_free(d, nd);
        h_msgs_free(r, nr);
        return diffs;
}

int main(void)
{
        h_debezium_build();

        char *db = h_pg_create_db("dbzdiff");
        char *sfx = h_unique_name("x");
        PGconn *c = h_pg_connect(db);
        char topic[256], props[512];

        for (int k = 0; k < NKIND; k++)
                h_pg_exec(c,
                          "CREATE TABLE outbox_%s (id uuid PRIMARY KEY, aggregatetype varchar(255) "
                          "NOT NULL, aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, "
                          "payload %s, tenant text, created timestamp NOT NULL DEFAULT clock_timestamp(), "
                          "part integer, ver integer)",
                          kinds[k], types[k]);
        h_pg_exec(c, "CREATE PUBLICATION diff_pub FOR TABLE outbox_json, outbox_jsonb, outbox_text, "
                     "outbox_bytea, outbox_jexp");
        char *base = h_unique_name("rbase");
        h_pg_exec(c, "SELECT pg_create_logical_replication_slot('%s', 'pgoutput')", base);
        /* The messages carry timestamps from 2001 on (table.field.event.timestamp):
         * without retention.ms=-1 the broker deletes them within minutes. */
        static const char *const keep[] = {"retention.ms", "-1", NULL};
        for (int k = 0; k < NKIND; k++)
                for (int p = 0; p < NPROF; p++) {
                        snprintf(topic, sizeof(topic), "%s.outbox.event.%s_%s", dpfx[p], kinds[k], sfx);
                        h_kafka_create_topic_config(topic, 3, keep);
                        snprintf(topic, sizeof(topic), "%s.outbox.event.%s_%s", rpfx[p], kinds[k], sfx);
                        h_kafka_create_topic_config(topic, 3, keep);
                }

        /* Debezium: streaming before the first row, from a slot of its own. */
        snprintf(props, sizeof(props), "/tmp/relay-dbzdiff-%s.properties", sfx);
        h_write_file(props,
                "engine.name=diff-%s\n"
                "engine.connector.class=io.debezium.connector.postgresql.PostgresConnector\n"
                "engine.plugin.name=pgoutput\n"
                "engine.slot.name=dbz_%s\n"
                "engine.slot.drop.on.stop=false\n"
                "engine.publication.name=diff_pub\n"
                "engine.publication.autocreate.mode=disabled\n"
                "engine.database.hostname=%s\nengine.database.port=%s\nengine.database.user=%s\n"
                "engine.database.password=\nengine.database.dbname=%s\n"
                "engine.topic.prefix=diff\n"
                "engine.table.include.list=public.outbox_json,public.outbox_jsonb,public.outbox_text,"
                "public.outbox_bytea,public.outbox_jexp\n"
                "engine.snapshot.mode=no_data\n"
                "engine.tombstones.on.delete=false\n"
                "engine.poll.interval.ms=50\n"
                "engine.offset.storage=org.apache.kafka.connect.storage.MemoryOffsetBackingStore\n"
                "engine.offset.flush.interval.ms=0\n"
                /* json tables: a header placement; text and bytea tables: envelope
                 * and partition placements too (a predicate picks the router). */
                /* Each router's predicate matches only its tables' change topics: a
                 * router also drops records another router already made (a NULL
                 * payload looks like a tombstone to it). */
                "engine.predicates=isjson,isenv,isexp\n"
                "engine.predicates.isjson.type=org.apache.kafka.connect.transforms.predicates."
                "TopicNameMatches\n"
                "engine.predicates.isjson.pattern=diff\\\\.public\\\\.outbox_jsonb?\n"
                "engine.predicates.isenv.type=org.apache.kafka.connect.transforms.predicates."
                "TopicNameMatches\n"
                "engine.predicates.isenv.pattern=diff\\\\.public\\\\.outbox_(text|bytea)\n"
                "engine.predicates.isexp.type=org.apache.kafka.connect.transforms.predicates."
                "TopicNameMatches\n"
                "engine.predicates.isexp.pattern=diff\\\\.public\\\\.outbox_jexp\n"
                "engine.transforms=outbox,outboxenv,outboxexp\n"
                "engine.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter\n"
                "engine.transforms.outbox.predicate=isjson\n"
                "engine.transforms.outbox.table.fields.additional.placement=tenant:header\n"
                "engine.transforms.outbox.table.field.event.timestamp=created\n"
                "engine.transforms.outboxenv.type=io.debezium.transforms.outbox.EventRouter\n"
                "engine.transforms.outboxenv.predicate=isenv\n"
                "engine.transforms.outboxenv.table.fields.additional.placement=" PLACEMENT "\n"
                "engine.transforms.outboxenv.table.field.event.timestamp=created\n"
                "engine.transforms.outboxenv.table.field.event.schema.version=ver\n"
                "engine.transforms.outboxexp.type=io.debezium.transforms.outbox.EventRouter\n"
                "engine.transforms.outboxexp.predicate=isexp\n"
                "engine.transforms.outboxexp.table.fields.additional.placement=tenant:header\n"
                "engine.transforms.outboxexp.table.field.event.timestamp=created\n"
                "engine.transforms.outboxexp.table.expand.json.payload=true\n"
                "producer.bootstrap.servers=%s\n"
                "producer.linger.ms=5\n"
                "diff.profiles=connect-string=dcs,connect-json=dcj,connect-json-schema=dcjs,"
                "debezium-server=dds\n",
                sfx, sfx, h_env("RELAY_TEST_PGHOST"), h_env("RELAY_TEST_PGPORT"),
                h_env("RELAY_TEST_PGUSER"), db, h_kafka_bootstrap());
        const char *jargs[] = {props, NULL};
        h_relay_t *java = h_debezium_start("dev.outboxrelay.diff.OutboxDiff", jargs);
        bool streaming = h_relay_wait_log(java, "DIFF streaming", 90000);
        if (!streaming) {
                h_relay_diag_log(java);
                tap_bail("Debezium did not start streaming within 90 s");
        }
        ok(streaming, "Debezium 3.6.1 streams");

        for (int k = 0; k < NKIND; k++) {
                const char *pays[4] = {pay_normal[k], pay_unicode[k], "NULL", pay_empty[k]};
                const char *aggs[4] = {"order-1", "клиент-ü-😀", "order-2", "order-3"};
                const char *tenants[4] = {"'acme'", "'ßtenant ✓'", "NULL", "''"};
                const char *parts[4] = {"2", "0", "NULL", "NULL"};
                /* Debezium caches the versioned schema by version alone: the
                 * text and bytea tables (one router) must not share a version,
                 * NULL included, or the bytea rows meet the text schema. */
                const char *vers[2][4] = {{"1", "2", "NULL", "1"}, {"3", "4", "3", "3"}};
                for (int i = 0; i < 4; i++)
                        h_pg_exec(c,
                                  "INSERT INTO outbox_%s VALUES (gen_random_uuid(), '%s_%s', '%s', "
                                  "'Type%d', %s, %s, clock_timestamp() - interval '%d days', %s, %s)",
                                  kinds[k], kinds[k], sfx, aggs[i], i, pays[i], tenants[i], 400 * i,
                                  parts[i], vers[k == 3][i]);
                h_pg_exec(c,
                          "BEGIN; INSERT INTO outbox_%s (id, aggregatetype, aggregateid, type, payload, "
                          "tenant, part, ver) SELECT gen_random_uuid(), '%s_%s', 'agg-' || g, "
                          "'Bulk', %s, 'acme', CASE WHEN g %% 4 = 0 THEN g %% 3 END, "
                          "CASE WHEN g %% 2 = 0 THEN %d ELSE %s END "
                          "FROM generate_series(1, %d) g; "
                          "INSERT INTO outbox_%s VALUES (gen_random_uuid(), '%s_%s', 'order-4', 'Ctl', %s, "
                          "'a\"b', '2001-02-03 04:05:06.789999', NULL, %s); COMMIT",
                          kinds[k], kinds[k], sfx, pay_normal[k], k == 3 ? 4 : 2,
                          k == 3 ? "3" : "NULL", NBULK - 1, kinds[k], kinds[k], sfx, pay_ctl[k],
                          k == 3 ? "4" : "NULL");
        }
        /* An update and a delete of outbox rows: the router drops both. */
        h_pg_exec(c, "UPDATE outbox_text SET tenant = 'changed' WHERE aggregateid = 'order-1'");
        h_pg_exec(c, "DELETE FROM outbox_text WHERE aggregateid = 'order-2'");

        int dbz_short = 0;
        int64_t deadline = h_now_ms() + 60000;
        for (int k = 0; k < NKIND; k++)
                for (int p = 0; p < NPROF; p++) {
                        snprintf(topic, sizeof(topic), "%s.outbox.event.%s_%s", dpfx[p], kinds[k], sfx);
                        int64_t left = deadline - h_now_ms();
                        int64_t got = h_kafka_wait_count(topic, ROWS, left > 0 ? (int)left : 0);
                        if (got != ROWS) {
                                tap_diag("%s holds %lld messages", topic, (long long)got);
                                dbz_short++;
                        }
                }
        is_int(dbz_short, 0, "Debezium wrote %d events to each of its %d topics", ROWS,
               NKIND * NPROF);
        h_relay_signal(java, SIGTERM);
        if (h_relay_wait(java, 60000) < 0)
                tap_diag("Debezium did not stop within 60 s of SIGTERM");

        /* The relay: one run per table and profile, each from a copy of a slot
         * made before the first row, four at a time. */
        char *conninfo = h_pg_conninfo(db);
        char set_conn[512], set_kafka[256];
        snprintf(set_conn, sizeof(set_conn), "postgres.conninfo=%s", conninfo);
        snprintf(set_kafka, sizeof(set_kafka), "kafka.bootstrap.servers=%s", h_kafka_bootstrap());
        int relay_short = 0, relay_bad_exit = 0, relay_refused_bad = 0;
        for (int k = 0; k < NKIND; k++) {
                h_relay_t *rl[NPROF];
                char set_slot[NPROF][128], set_table[128], set_prof[NPROF][64], set_tpl[NPROF][128];
                snprintf(set_table, sizeof(set_table), "outbox.table=public.outbox_%s", kinds[k]);
                for (int p = 0; p < NPROF; p++) {
                        char slot[64];
                        snprintf(slot, sizeof(slot), "r%d%d_%s", k, p, sfx);
                        h_pg_exec(c, "SELECT pg_copy_logical_replication_slot('%s', '%s')", base, slot);
                        snprintf(set_slot[p], sizeof(set_slot[p]), "slot.name=%s", slot);
                        snprintf(set_prof[p], sizeof(set_prof[p]), "format.profile=%s", profiles[p]);
                        /* Debezium's routing keys rather than topic.template. */
                        snprintf(set_tpl[p], sizeof(set_tpl[p]),
                                 "route.topic.replacement=%s.outbox.event.${routedByValue}",
                                 rpfx[p]);
                        bool hdr = k < 2 || k == 4;
                        const char *sets[] = {set_conn, set_kafka, set_slot[p],
                                              "publication.name=diff_pub", set_table,
                                              hdr ? "outbox.headers=tenant"
                                                    : "table.fields.additional.placement=" PLACEMENT,
                                              hdr ? "table.field.event.schema.version="
                                                    : "table.field.event.schema.version=ver",
                                              set_prof[p], set_tpl[p],
                                              "format.debezium.topic_prefix=diff",
                                              "route.by.field=aggregatetype",
                                              "table.field.event.timestamp=created",
                                              k == 4 ? "table.expand.json.payload=true"
                                                     : "table.expand.json.payload=false",
                                              NULL};
                        rl[p] = h_relay_start(sets);
                }
                for (int p = 0; p < NPROF; p++) {
                        if (unsupported_pair(k, p)) {
                                int rc = h_relay_wait(rl[p], 30000);
                                char *lg = h_relay_log(rl[p]);
                                if (rc != 2 || !strstr(lg, "envelope placement"))
                                        relay_refused_bad++;
                                free(lg);
                                continue;
                        }
                        snprintf(topic, sizeof(topic), "%s.outbox.event.%s_%s", rpfx[p], kinds[k], sfx);
                        if (h_kafka_wait_count(topic, ROWS, 60000) != ROWS) {
                                relay_short++;
                                h_relay_diag_log(rl[p]);
                        }
                        h_relay_signal(rl[p], SIGTERM);
                }
                for (int p = 0; p < NPROF; p++) {
                        if (!unsupported_pair(k, p) && h_relay_wait(rl[p], 30000) != 0)
                                relay_bad_exit++;
                        h_relay_free(rl[p]);
                        /* Slots are few (max_replication_slots): one copy per run at a time. */
                        h_pg_exec(c, "SELECT pg_drop_replication_slot('r%d%d_%s')", k, p, sfx);
                }
        }
        is_int(relay_short, 0, "the relay wrote %d events to each of its %d topics", ROWS,
               NKIND * NPROF - 2);
        is_int(relay_bad_exit, 0, "every relay run ended with exit 0 on SIGTERM");
        is_int(relay_refused_bad, 0,
               "connect-string with an envelope placement is refused at start (exit 2, says why)");

        for (int p = 0; p < NPROF; p++) {
                int diffs = 0, spread = 3;
                size_t total = 0;
                for (int k = 0; k < NKIND; k++) {
                        char dt[256], rt[256];
                        size_t n;
                        int parts;
                        if (unsupported_pair(k, p))
                                continue;
                        snprintf(dt, sizeof(dt), "%s.outbox.event.%s_%s", dpfx[p], kinds[k], sfx);
                        snprintf(rt, sizeof(rt), "%s.outbox.event.%s_%s", rpfx[p], kinds[k], sfx);
                        /* Debezium Server's sink leaves the timestamp to its producer (send time). */
                        diffs += compare(dt, rt, p != 3, &n, &parts);
                        total += n;
                        if (parts < spread)
                                spread = parts;
                }
                is_int(diffs, 0, "%s: %zu messages, 0 differences from Debezium (partition, key, value, headers%s)",
                       profiles[p], total, p != 3 ? ", timestamp" : "");
                ok(spread > 1, "%s: every topic's events spread over several partitions (at least %d)",
                   profiles[p], spread);
        }

        unlink(props);
        if (!tap_failed)
                h_relay_free(java); /* and its log */
        else
                tap_diag("Debezium's log: %s", h_relay_log_path(java));
        PQfinish(c);
        h_pg_drop_db(db);
        free(conninfo);
        free(base);
        free(sfx);
        free(db);
        return done_testing();
}
