/*
 * 0112-several-tables.c - issue 15: outbox.table as a list. Two outbox
 * tables in different schemas, with their columns in different orders (and
 * one extra column), written in the same transactions, interleaved row by
 * row; one relay streams both through one publication it creates itself.
 *
 * Asserts on what Kafka and PostgreSQL hold: every committed event exactly
 * once, on the topic of its aggregate type, keyed by its aggregate id, with
 * its id header and payload as written (so each table's own column
 * positions were used), each aggregate's events in commit order and on one
 * partition; the publication publishes inserts of both tables; `check`
 * passes both; and a list naming a table that does not exist is refused at
 * start with exit 3 and the table's name.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tap.h"

#define TXNS 200
#define PER_TABLE 5 /* rows per table per transaction */
#define AGGS 20     /* aggregates per table */

int main(void)
{
        char *db = h_pg_create_db("several");
        char *suffix = h_unique_name("st");
        char *slot = h_unique_name("slot");
        PGconn *c = h_pg_connect(db);

        /* public.outbox as sql/001_outbox.sql; billing.outbox with the columns
         * in another order and one more, so positions differ. */
        h_pg_create_outbox(c, "outbox");
        h_pg_exec(c, "CREATE SCHEMA billing");
        h_pg_exec(c, "CREATE TABLE billing.outbox (note text, payload jsonb, type varchar(255) NOT "
                     "NULL, aggregateid varchar(255) NOT NULL, aggregatetype varchar(255) NOT NULL, "
                     "id uuid PRIMARY KEY)");

        char set_conn[512], set_kafka[256], set_slot[128], set_pub[128];
        char *conninfo = h_pg_conninfo(db);
        snprintf(set_conn, sizeof(set_conn), "postgres.conninfo=%s", conninfo);
        snprintf(set_kafka, sizeof(set_kafka), "kafka.bootstrap.servers=%s", h_kafka_bootstrap());
        snprintf(set_slot, sizeof(set_slot), "slot.name=%s", slot);
        snprintf(set_pub, sizeof(set_pub), "publication.name=pub_%s", suffix);

        /* A list with a table that does not exist: refused at start. */
        {
                const char *sets[] = {set_conn, set_kafka, set_slot, set_pub,
                                      "outbox.table=public.outbox,billing.nothere", NULL};
                h_relay_t *r = h_relay_start(sets);
                int rc = h_relay_wait(r, 60000);
                char *log = h_relay_log(r);
                is_int(rc, 3, "a list naming a missing table: exit 3");
                ok(strstr(log, "outbox table \"billing.nothere\" does not exist") != NULL,
                   "and the message names that table");
                if (rc != 3)
                        h_relay_diag_log(r);
                free(log);
                h_relay_free(r);
        }

        const char *sets[] = {set_conn, set_kafka, set_slot, set_pub,
                              "outbox.table=public.outbox, billing.outbox", NULL};
        h_relay_t *relay = h_relay_start(sets);
        if (!ok(h_relay_wait_log(relay, "streaming from replication slot", 60000),
                "relay streams from both tables"))
                h_relay_diag_log(relay);
        char *log = h_relay_log(relay);
        ok(strstr(log, "tables \"public.outbox\", \"billing.outbox\"") != NULL,
           "its start line names both tables");
        free(log);
        char *pubtables = h_pg_value(c,
                                     "SELECT string_agg(schemaname || '.' || tablename, ',' ORDER "
                                     "BY schemaname) FROM pg_publication_tables WHERE pubname = "
                                     "'pub_%s'",
                                     suffix);
        is_str(pubtables, "billing.outbox,public.outbox",
               "the publication it created holds both tables");
        free(pubtables);

        /* Each transaction: rows alternating between the tables; each
         * aggregate's sequence number grows with commit order. */
        int seq = 0;
        for (int t = 0; t < TXNS; t++) {
                h_pg_exec(c, "BEGIN");
                for (int k = 0; k < PER_TABLE; k++) {
                        seq++;
                        h_pg_exec(c,
                                  "INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, "
                                  "payload) VALUES (gen_random_uuid(), 'order_%s', 'o-%d', "
                                  "'OrderPlaced', jsonb_build_object('seq', %d, 'agg', 'o-%d'))",
                                  suffix, seq % AGGS, seq, seq % AGGS);
                        h_pg_exec(c,
                                  "INSERT INTO billing.outbox (id, aggregatetype, aggregateid, type, "
                                  "payload, note) VALUES (gen_random_uuid(), 'invoice_%s', 'b-%d', "
                                  "'InvoiceIssued', jsonb_build_object('seq', %d, 'agg', 'b-%d'), "
                                  "'n')",
                                  suffix, seq % AGGS, seq, seq % AGGS);
                }
                h_pg_exec(c, "COMMIT");
        }
        const int expected = 2 * TXNS * PER_TABLE;

        char topic_o[256], topic_b[256];
        snprintf(topic_o, sizeof(topic_o), "outbox.event.order_%s", suffix);
        snprintf(topic_b, sizeof(topic_b), "outbox.event.invoice_%s", suffix);
        int64_t got = h_kafka_wait_count(topic_o, expected / 2, 120000) +
                      h_kafka_wait_count(topic_b, expected / 2, 120000);
        is_int(got, expected, "Kafka holds the %d events of both tables", expected);

        /* Against the rows: id -> (aggregate, seq), per table. */
        int bad_id = 0, bad_key = 0, dups = 0, disorder = 0, split = 0, total = 0;
        for (int tb = 0; tb < 2; tb++) {
                const char *topic = tb == 0 ? topic_o : topic_b;
                const char *table = tb == 0 ? "public.outbox" : "billing.outbox";
                h_msg_t *msgs;
                size_t n = h_kafka_consume_all(topic, &msgs);
                int last_seq[AGGS], part[AGGS];
                for (int a = 0; a < AGGS; a++)
                        last_seq[a] = 0, part[a] = -1;
                for (size_t i = 0; i < n; i++) {
                        size_t hl;
                        const char *id = h_msg_header(&msgs[i], "id", &hl);
                        total++;
                        char *row = id ? h_pg_value(c,
                                                    "SELECT aggregateid || ' ' || (payload->>'seq') "
                                                    "FROM %s WHERE id = '%s'",
                                                    table, id)
                                       : NULL;
                        if (!row) {
                                bad_id++;
                                continue;
                        }
                        char agg[64];
                        int s = 0;
                        if (sscanf(row, "%63s %d", agg, &s) != 2 || !msgs[i].key ||
                            strcmp(msgs[i].key, agg) != 0 || !strstr(msgs[i].value, agg))
                                bad_key++;
                        free(row);
                        int a = atoi(agg + 2) % AGGS;
                        if (s == last_seq[a])
                                dups++;
                        else if (s < last_seq[a])
                                disorder++;
                        else
                                last_seq[a] = s;
                        if (part[a] >= 0 && part[a] != msgs[i].partition)
                                split++;
                        part[a] = msgs[i].partition;
                }
                h_msgs_free(msgs, n);
        }
        is_int(total, expected, "consumed %d messages", expected);
        is_int(bad_id, 0, "every message's id header is a row of its own table");
        is_int(bad_key, 0, "keys and payloads as written in each table (its own column positions)");
        is_int(dups, 0, "no event twice");
        is_int(disorder, 0, "each aggregate's events in commit order");
        is_int(split, 0, "each aggregate on one partition");
        tap_diag("FIGURES several-tables: events=%d tables=2 transactions=%d", total, TXNS);

        /* check: both tables and the publication pass. */
        char *out = NULL, *clog = NULL;
        int crc = h_relay_run_cmd("check", NULL, sets, 120000, &out, &clog);
        ok(out && strstr(out, "outbox table \"public.outbox\" exists") &&
                   strstr(out, "outbox table \"billing.outbox\" exists"),
           "check finds both tables");
        ok(out && strstr(out, "publishes inserts of \"public.outbox\", \"billing.outbox\" only"),
           "check finds the publication publishing both");
        if (!out || !strstr(out, "billing.outbox"))
                tap_diag("check said (exit %d): %s %s", crc, out ? out : "", clog ? clog : "");
        free(out);
        free(clog);

        h_relay_signal(relay, SIGTERM);
        is_int(h_relay_wait(relay, 30000), 0, "SIGTERM: exit 0");
        h_relay_free(relay);
        h_kafka_delete_topic(topic_o);
        h_kafka_delete_topic(topic_b);
        PQfinish(c);
        h_pg_drop_db(db);
        free(conninfo);
        free(db);
        free(suffix);
        free(slot);
        return done_testing();
}
