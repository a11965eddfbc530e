/*
 * 0110-partitioned.c - a partitioned outbox table (range partitions, the
 * retention pattern of dropping old partitions instead of deleting rows).
 *
 * 1. A publication that sends the partitions' rows under their own names
 *    (publish_via_partition_root = false, PostgreSQL's default): the relay
 *    refuses to start (exit 3) with a message naming the fix, rather than
 *    ignore every event.
 * 2. No publication: the relay creates it with
 *    publish_via_partition_root = true.
 * 3. Streaming while partitions come and go: events go to partition 1;
 *    partition 2 is created and written; partition 1 is dropped; partition
 *    3 is created and written; a transaction spans partitions 2 and 3.
 *    Kafka holds every committed event once, each aggregate's versions in
 *    commit order, on the topic of the root table's mapping.
 * 4. publish_via_partition_root turned off while the relay runs (rows
 *    written then would come under the partitions' names and be lost): the
 *    relay warns, naming the table, and says when it is back on.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define AGGS 4

static int g_version[AGGS];

/* n events into bucket (the partition key), round-robin over aggregates, in
 * one transaction. */
static void write_events(PGconn *c, const char *aggtype, int bucket, int n)
{
        h_pg_exec(c, "BEGIN");
        for (int i = 0; i < n; i++) {
                int a = i % AGGS;
                h_pg_exec(c,
                          "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload, bucket) "
                          "VALUES (gen_random_uuid(), '%s', 'agg-%d', 'Ev', '{\"a\": %d, \"v\": %d}', %d)",
                          aggtype, a, a, ++g_version[a], bucket);
        }
        h_pg_exec(c, "COMMIT");
}

static const char **sets_for(const char *db, const char *slot)
{
        static char b[3][512];
        static const char *s[5];
        char *ci = h_pg_conninfo(db);
        snprintf(b[0], sizeof(b[0]), "postgres.conninfo=%s", ci);
        snprintf(b[1], sizeof(b[1]), "kafka.bootstrap.servers=%s", h_kafka_bootstrap());
        snprintf(b[2], sizeof(b[2]), "slot.name=%s", slot);
        s[0] = b[0];
        s[1] = b[1];
        s[2] = b[2];
        s[3] = "status.interval.ms=1000";
        s[4] = NULL;
        free(ci);
        return s;
}

static void create_partitioned(PGconn *c)
{
        /* sql/001_outbox.sql's columns plus the partition key, which the
         * primary key must include. */
        h_pg_exec(c, "CREATE TABLE outbox ("
                     " id uuid NOT NULL,"
                     " aggregatetype varchar(255) NOT NULL,"
                     " aggregateid varchar(255) NOT NULL,"
                     " type varchar(255) NOT NULL,"
                     " payload jsonb,"
                     " created_at timestamptz NOT NULL DEFAULT clock_timestamp(),"
                     " bucket int NOT NULL,"
                     " PRIMARY KEY (id, bucket)) PARTITION BY RANGE (bucket)");
        h_pg_exec(c, "CREATE TABLE outbox_b1 PARTITION OF outbox FOR VALUES FROM (1) TO (2)");
}

int main(void)
{
        /* 1. the default publication: refused */
        char *db = h_pg_create_db("part");
        PGconn *c = h_pg_connect(db);
        char *slot = h_unique_name("slot");
        create_partitioned(c);
        h_pg_exec(c, "CREATE PUBLICATION outbox_pub FOR TABLE outbox WITH (publish = 'insert')");
        h_relay_t *relay = h_relay_start(sets_for(db, slot));
        is_int(h_relay_wait(relay, 60000), 3,
               "a publication without publish_via_partition_root: exit 3");
        ok(h_relay_wait_log(relay, "is partitioned", 0) &&
           h_relay_wait_log(relay, "SET (publish_via_partition_root = true)", 0),
           "the message names the partitioned table and the fix");
        h_relay_free(relay);
        char *v = h_pg_value(c, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '%s'", slot);
        is_str(v, "0", "no slot was created");
        free(v);
        h_pg_exec(c, "DROP PUBLICATION outbox_pub");

        /* 2. the relay creates the publication */
        char *aggtype = h_unique_name("part");
        char topic[256];
        snprintf(topic, sizeof(topic), "outbox.event.%s", aggtype);
        h_kafka_create_topic(topic, 3);
        relay = h_relay_start(sets_for(db, slot));
        ok(h_relay_wait_log(relay, "streaming from replication slot", 60000), "relay streams");
        v = h_pg_value(c, "SELECT pubviaroot FROM pg_publication WHERE pubname = 'outbox_pub'");
        is_str(v, "t", "the relay created outbox_pub with publish_via_partition_root = true");
        free(v);

        /* 3. partitions created and dropped while the relay runs */
        for (int i = 0; i < 10; i++)
                write_events(c, aggtype, 1, 20);
        h_pg_exec(c, "CREATE TABLE outbox_b2 PARTITION OF outbox FOR VALUES FROM (2) TO (3)");
        for (int i = 0; i < 10; i++)
                write_events(c, aggtype, 2, 20);
        int64_t got = h_kafka_wait_count(topic, 400, 60000);
        is_int(got, 400, "the events of partitions 1 and 2 reached Kafka");
        h_pg_exec(c, "DROP TABLE outbox_b1");
        h_pg_exec(c, "CREATE TABLE outbox_b3 PARTITION OF outbox FOR VALUES FROM (3) TO (4)");
        for (int i = 0; i < 10; i++)
                write_events(c, aggtype, 3, 20);
        /* One transaction over two partitions, interleaved. */
        h_pg_exec(c, "BEGIN");
        for (int i = 0; i < 20; i++) {
                int a = i % AGGS;
                h_pg_exec(c,
                          "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload, bucket) "
                          "VALUES (gen_random_uuid(), '%s', 'agg-%d', 'Ev', '{\"a\": %d, \"v\": %d}', %d)",
                          aggtype, a, a, ++g_version[a], 2 + i % 2);
        }
        h_pg_exec(c, "COMMIT");
        int total = 0;
        for (int a = 0; a < AGGS; a++)
                total += g_version[a];
        char *wal_after = h_pg_value(c, "SELECT pg_current_wal_lsn()");
        is_int(h_kafka_wait_count(topic, total, 60000), total, "all %d events reached Kafka", total);
        ok(h_pg_wait_confirmed(c, slot, wal_after, 30000) >= 0, "slot confirmed past the last write");

        /* 4. publish_via_partition_root turned off while the relay runs:
         * the rows would now come under the partitions' names, which
         * nothing in the stream tells from another table's; the relay
         * warns (its side connection reads the publication), and says so
         * again when it is turned back on. No event is written meanwhile. */
        ok(!h_relay_wait_log(relay, "no longer sends", 0),
           "no such warning while the publication sends the root's rows");
        h_pg_exec(c, "ALTER PUBLICATION outbox_pub SET (publish_via_partition_root = false)");
        ok(h_relay_wait_log(relay,
                            "no longer sends the inserts of outbox table \"public.outbox\"",
                            30000),
           "publish_via_partition_root turned off: the relay warns, naming the table");
        h_pg_exec(c, "ALTER PUBLICATION outbox_pub SET (publish_via_partition_root = true)");
        ok(h_relay_wait_log(relay, "sends the inserts of every outbox table again", 30000),
           "turned back on: the relay says the table is sent again");
        h_relay_signal(relay, SIGTERM);
        is_int(h_relay_wait(relay, 30000), 0, "SIGTERM: clean exit 0");
        h_relay_free(relay);

        h_msg_t *msgs;
        size_t n = h_kafka_consume_all(topic, &msgs);
        int maxv = 0;
        for (int a = 0; a < AGGS; a++)
                maxv = g_version[a] > maxv ? g_version[a] : maxv;
        int *seen = calloc((size_t)(AGGS * (maxv + 1)), sizeof(int));
        int last[AGGS] = {0};
        long dups = 0, order = 0, bad = 0, missing = 0;
        for (size_t i = 0; i < n; i++) {
                int a, ver;
                char key[32];
                if (!msgs[i].value || sscanf(msgs[i].value, "{\"a\": %d, \"v\": %d}", &a, &ver) != 2 ||
                    a < 0 || a >= AGGS || ver < 1 || ver > g_version[a]) {
                        bad++;
                        continue;
                }
                snprintf(key, sizeof(key), "agg-%d", a);
                if (!msgs[i].key || strcmp(msgs[i].key, key) != 0)
                        bad++;
                if (seen[a * (maxv + 1) + ver]++) {
                        dups++;
                        continue;
                }
                if (ver < last[a])
                        order++;
                last[a] = ver;
        }
        for (int a = 0; a < AGGS; a++)
                for (int ver = 1; ver <= g_version[a]; ver++)
                        if (!seen[a * (maxv + 1) + ver])
                                missing++;
        is_int((long)n, total, "Kafka holds exactly %d messages", total);
        is_int(missing, 0, "no event lost");
        is_int(dups, 0, "no duplicates");
        is_int(order, 0, "each aggregate's versions in commit order, across partitions");
        is_int(bad, 0, "every key and value as inserted");
        free(seen);
        h_msgs_free(msgs, n);

        h_kafka_delete_topic(topic);
        PQfinish(c);
        h_pg_drop_db(db);
        free(wal_after);
        free(aggtype);
        free(slot);
        free(db);
        return done_testing();
}
