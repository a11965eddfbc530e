/*
 * 0001-environment.c - proves the test environment is real before any relay
 * test relies on it: PostgreSQL 15 with wal_level=logical whose pgoutput
 * decodes an outbox insert through a publication, the sql/ files, and a
 * one-broker Kafka that creates topics and round-trips keyed messages with
 * headers through the harness.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "harness.h"

#include <string.h>

/* Columns of a table as "name type nullable default;..." for comparison. */
static char *columns_of(PGconn *c, const char *table)
{
        return h_pg_value(c,
                          "SELECT string_agg(format('%%s %%s %%s %%s', a.attname,"
                          " format_type(a.atttypid, a.atttypmod), a.attnotnull,"
                          " pg_get_expr(d.adbin, d.adrelid)), '; ' ORDER BY a.attnum)"
                          " FROM pg_attribute a LEFT JOIN pg_attrdef d"
                          " ON d.adrelid = a.attrelid AND d.adnum = a.attnum"
                          " WHERE a.attrelid = '%s'::regclass AND a.attnum > 0"
                          " AND NOT a.attisdropped",
                          table);
}

/* pgoutput messages of one type ('I', 'D', ...) pending in a slot. */
static long peek_count(PGconn *c, const char *slot, const char *pub, char type)
{
        char *v = h_pg_value(c,
                             "SELECT count(*) FROM pg_logical_slot_peek_binary_changes('%s',"
                             " NULL, NULL, 'proto_version', '1', 'publication_names', '%s')"
                             " WHERE get_byte(data, 0) = %d",
                             slot, pub, (int)type);
        long n = v ? strtol(v, NULL, 10) : -1;
        free(v);
        return n;
}

static void test_postgres(void)
{
        PGconn *c = h_pg_connect("postgres");
        char *v, *db, *slot;
        PGconn *d;

        /* The version tests/env/up was asked for (RELAY_TEST_PGVERSION, 15 by default). */
        const char *want = getenv("RELAY_TEST_PGVERSION");
        if (!want || !*want)
                want = "15";
        v = h_pg_value(c, "SHOW server_version_num");
        ok(v && strlen(v) == 6 && strncmp(v, want, 2) == 0, "server_version_num %s is %sxxxx",
           v ? v : "(null)", want);
        free(v);
        v = h_pg_value(c, "SHOW wal_level");
        is_str(v, "logical", "wal_level is logical");
        free(v);
        PQfinish(c);

        /* Outbox table, insert-only publication, pgoutput slot. */
        db = h_pg_create_db("env");
        d = h_pg_connect(db);
        h_pg_create_outbox(d, "outbox");
        h_pg_exec(d, "CREATE PUBLICATION pub FOR TABLE outbox WITH (publish = 'insert')");
        slot = h_unique_name("env_slot");
        v = h_pg_value(d, "SELECT lsn FROM pg_create_logical_replication_slot('%s', 'pgoutput')",
                       slot);
        ok(v != NULL, "logical slot %s created at %s", slot, v ? v : "(null)");
        free(v);
        h_pg_exec(d, "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload)"
                     " VALUES (gen_random_uuid(), 'order', '42', 'OrderPlaced',"
                     " '{\"orderId\": 42}')");
        v = h_pg_value(d,
                       "SELECT count(*) FROM pg_logical_slot_peek_binary_changes('%s', NULL,"
                       " NULL, 'proto_version', '1', 'publication_names', 'pub')",
                       slot);
        ok(v && strtol(v, NULL, 10) > 0, "pgoutput has %s messages for the insert",
           v ? v : "(null)");
        free(v);
        is_int(peek_count(d, slot, "pub", 'I'), 1, "one Insert message");
        h_pg_exec(d, "DELETE FROM outbox");
        is_int(peek_count(d, slot, "pub", 'D'), 0, "the DELETE is not published");
        h_pg_exec(d, "SELECT pg_drop_replication_slot('%s')", slot);
        v = h_pg_value(d, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '%s'",
                       slot);
        is_str(v, "0", "slot dropped");
        free(v);
        free(slot);
        PQfinish(d);
        h_pg_drop_db(db);
        c = h_pg_connect("postgres");
        v = h_pg_value(c, "SELECT count(*) FROM pg_database WHERE datname = '%s'", db);
        is_str(v, "0", "database %s dropped", db);
        free(v);
        PQfinish(c);
        free(db);
}

static void test_sql_files(void)
{
        char *db = h_pg_create_db("env_sql");
        PGconn *d = h_pg_connect(db);
        char *file_cols, *harness_cols, *v, *slot;

        h_pg_exec_file(d, "001_outbox.sql");
        h_pg_create_outbox(d, "outbox_harness");
        file_cols = columns_of(d, "outbox");
        harness_cols = columns_of(d, "outbox_harness");
        is_str(harness_cols, file_cols, "h_pg_create_outbox matches sql/001_outbox.sql");
        tap_diag("outbox: %s", file_cols ? file_cols : "(null)");
        free(file_cols);
        free(harness_cols);

        h_pg_exec_file(d, "002_publication.sql");
        v = h_pg_value(d, "SELECT format('%%s %%s %%s', pubinsert, pubupdate, pubdelete)"
                          " FROM pg_publication WHERE pubname = 'outbox_pub'");
        is_str(v, "t f f", "outbox_pub publishes inserts only");
        free(v);
        v = h_pg_value(d, "SELECT string_agg(schemaname || '.' || tablename, ',')"
                          " FROM pg_publication_tables WHERE pubname = 'outbox_pub'");
        is_str(v, "public.outbox", "outbox_pub holds public.outbox");
        free(v);

        h_pg_exec_file(d, "003_role.sql");
        h_pg_exec_file(d, "003_role.sql"); /* idempotent */
        v = h_pg_value(d, "SELECT format('%%s %%s %%s', rolcanlogin, rolreplication, rolsuper)"
                          " FROM pg_roles WHERE rolname = 'outbox_relay'");
        is_str(v, "t t f", "outbox_relay: LOGIN REPLICATION, not superuser");
        free(v);

        slot = h_unique_name("env_sql_slot");
        h_pg_exec(d, "SELECT pg_create_logical_replication_slot('%s', 'pgoutput')", slot);
        h_pg_exec_file(d, "004_delete_in_same_tx.sql");
        v = h_pg_value(d, "SELECT count(*) FROM outbox");
        is_str(v, "0", "004: the outbox table stays empty");
        free(v);
        is_int(peek_count(d, slot, "outbox_pub", 'I'), 1, "004: the insert is in the WAL");
        is_int(peek_count(d, slot, "outbox_pub", 'D'), 0, "004: the delete is not published");
        free(slot);
        PQfinish(d);
        h_pg_drop_db(db); /* drops the slot too */
        free(db);
}

static void test_kafka(void)
{
        char *topic = h_unique_name("env_topic");
        static const char *const keys[3] = {"order-1", "order-2", "order-3"};
        static const char *const values[3] = {"{\"n\": 1}", "{\"n\": 2}", "{\"n\": 3}"};
        static const char *const types[3] = {"OrderPlaced", "OrderPaid", "OrderShipped"};
        int seen[3] = {0, 0, 0};
        h_msg_t *msgs = NULL;
        size_t n;

        is_int(h_kafka_broker_count(), 1, "Kafka metadata shows one broker");
        h_kafka_create_topic(topic, 3);
        is_int(h_kafka_count(topic), 0, "topic %s created with 3 partitions, empty", topic);
        for (int i = 0; i < 3; i++) {
                char id[16];
                const char *hdrs[5];
                snprintf(id, sizeof(id), "%d", i + 1);
                hdrs[0] = "id";
                hdrs[1] = id;
                hdrs[2] = "type";
                hdrs[3] = types[i];
                hdrs[4] = NULL;
                h_kafka_produce_hdrs(topic, keys[i], values[i], hdrs);
        }
        is_int(h_kafka_wait_count(topic, 3, 10000), 3, "3 messages produced");

        n = h_kafka_consume_all(topic, &msgs);
        is_int(n, 3, "3 messages consumed");
        for (size_t i = 0; i < n; i++) {
                const h_msg_t *m = &msgs[i];
                int k = -1;
                for (int j = 0; j < 3; j++)
                        if (m->key && strcmp(m->key, keys[j]) == 0)
                                k = j;
                if (!ok(k >= 0, "message %zu has a known key (%s)", i, m->key ? m->key : "NULL"))
                        continue;
                seen[k]++;
                is_str(m->value, values[k], "value of %s", keys[k]);
                is_int(m->key_len, strlen(keys[k]), "key length of %s", keys[k]);
                is_str(h_msg_header(m, "type", NULL), types[k], "type header of %s", keys[k]);
                {
                        char id[16];
                        size_t len = 0;
                        const char *got = h_msg_header(m, "id", &len);
                        snprintf(id, sizeof(id), "%d", k + 1);
                        is_str(got, id, "id header of %s", keys[k]);
                        is_int(len, strlen(id), "id header length of %s", keys[k]);
                }
                ok(m->partition >= 0 && m->partition < 3, "%s in partition %d", keys[k],
                   (int)m->partition);
                ok(m->timestamp > 0, "%s has a timestamp", keys[k]);
                if (i > 0)
                        ok(msgs[i - 1].partition < m->partition ||
                                   (msgs[i - 1].partition == m->partition &&
                                    msgs[i - 1].offset < m->offset),
                           "ordered by partition and offset");
        }
        ok(seen[0] == 1 && seen[1] == 1 && seen[2] == 1, "each key exactly once");
        h_msgs_free(msgs, n);

        /* Same key, same partition, produce order. */
        h_kafka_produce(topic, "order-1", "{\"n\": 4}");
        n = h_kafka_consume_all(topic, &msgs);
        is_int(n, 4, "4 messages after a fourth");
        {
                const h_msg_t *a = NULL, *b = NULL;
                for (size_t i = 0; i < n; i++) {
                        if (msgs[i].key && strcmp(msgs[i].key, "order-1") == 0) {
                                if (!a)
                                        a = &msgs[i];
                                else
                                        b = &msgs[i];
                        }
                }
                ok(a && b && a->partition == b->partition && a->offset < b->offset &&
                           strcmp(b->value, "{\"n\": 4}") == 0 && b->nheaders == 0,
                   "same key: same partition, in order, no headers");
        }
        h_msgs_free(msgs, n);
        free(topic);

        topic = h_unique_name("env_missing");
        is_int(h_kafka_count(topic), 0, "a topic that does not exist counts 0");
        free(topic);
}

int main(void)
{
        tap_diag("PostgreSQL %s:%s, Kafka %s", h_env("RELAY_TEST_PGHOST"),
                 h_env("RELAY_TEST_PGPORT"), h_kafka_bootstrap());
        test_postgres();
        test_sql_files();
        test_kafka();
        return done_testing();
}
