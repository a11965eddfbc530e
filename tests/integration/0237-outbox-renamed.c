/*
 * 0237-outbox-renamed.c - the outbox table renamed while the relay streams.
 *
 * The publication names the table by its relid, so a renamed outbox table
 * stays in it; outbox.table names it by name, as a relay started after the
 * rename sees it. One relay streams throughout:
 *
 * 1. An event into public.outbox reaches Kafka.
 * 2. In one transaction the table is renamed to outbox_old, loses a column
 *    before the mapped ones (aggregatetype) and gets a row whose columns
 *    would map, read at the old positions, to the test's own topic (its
 *    aggregateid is the aggregate type) with key "stale". Another row goes
 *    into outbox_old after that transaction.
 *    The relay warns that the publication no longer sends the inserts of
 *    public.outbox (nothing in the stream says so: rows written to a new
 *    public.outbox before it is in the publication would be lost).
 * 3. A new public.outbox (its columns in another order) is created and
 *    added to the publication (the relay says it is sent again); an event
 *    goes into it.
 *
 * Once the slot is confirmed past all of it, Kafka holds exactly the two
 * events of public.outbox, each with its key and payload as stored, and
 * none of outbox_old's rows (which the old relay published mapped from the
 * wrong columns: the created_at text as the value); the relay warned that
 * the relation is now public.outbox_old.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <string.h>

#include "faults/faults.h"
#include "harness.h"

int main(void)
{
        h_case_t k;
        h_case_open(&k, "renamed", "slot", "ren", 1, H_CASE_PUBLICATION);
        PGconn *c = k.c;
        const char *sets[] = {k.set_conn, k.set_kafka, k.set_slot, "status.interval.ms=500", NULL};
        h_relay_t *relay = h_relay_start(sets);
        ok(h_relay_streams(relay, 60000), "relay streams");

        /* 1. */
        h_outbox_insert_n(c, "outbox", k.aggtype, "k1", 1);
        is_int(h_kafka_wait_count(k.topic, 1, 60000), 1, "the first event reached Kafka");

        /* 2. */
        h_pg_exec(c, "BEGIN");
        h_pg_exec(c, "ALTER TABLE outbox RENAME TO outbox_old");
        h_pg_exec(c, "ALTER TABLE outbox_old DROP COLUMN aggregatetype");
        h_pg_exec(c, "INSERT INTO outbox_old (id, aggregateid, type, payload) VALUES "
                     "(gen_random_uuid(), '%s', 'stale', '{\"n\": 2}')",
                  k.aggtype);
        h_pg_exec(c, "COMMIT");
        h_pg_exec(c, "INSERT INTO outbox_old (id, aggregateid, type, payload) VALUES "
                     "(gen_random_uuid(), '%s', 'stale', '{\"n\": 3}')",
                  k.aggtype);

        /* The rename took the outbox table out of the publication by
         * name: the relay says so (its side connection reads the
         * publication every few seconds), and keeps streaming. */
        ok(h_relay_wait_log(relay, "no longer sends the inserts of outbox table \"public.outbox\"",
                            30000),
           "the relay warned that the publication no longer sends public.outbox's inserts");

        /* 3. */
        h_pg_exec(c, "CREATE TABLE outbox (payload jsonb, id uuid PRIMARY KEY, aggregateid "
                     "varchar(255) NOT NULL, type varchar(255) NOT NULL, aggregatetype "
                     "varchar(255) NOT NULL)");
        h_pg_exec(c, "ALTER PUBLICATION outbox_pub ADD TABLE outbox");
        h_outbox_insert_n(c, "outbox", k.aggtype, "k4", 4);

        bool confirmed;
        h_msg_t *msgs;
        size_t n = h_relayed_consume(c, k.slot, k.topic, 2, 60000, &confirmed, &msgs);
        ok(confirmed, "the slot is confirmed past every write");
        int stale = 0;
        for (size_t i = 0; i < n; i++)
                if (msgs[i].key && strcmp(msgs[i].key, "stale") == 0)
                        stale++;
        is_int((long long)n, 2, "Kafka holds exactly the two events of public.outbox");
        is_int(stale, 0, "none of outbox_old's rows was published");
        ok(n >= 1 && h_msg_is(&msgs[0], "k1", "{\"n\": 1}"), "the first is k1 with its payload");
        ok(n >= 2 && h_msg_is(&msgs[n - 1], "k4", "{\"n\": 4}"),
           "the last is the new table's k4 with its payload");
        if (n != 2)
                for (size_t i = 0; i < n; i++)
                        tap_diag("message %zu: key %s value %s", i,
                                 msgs[i].key ? msgs[i].key : "(null)", msgs[i].value);
        h_msgs_free(msgs, n);

        ok(h_relay_wait_log(relay, "sends the inserts of every outbox table again", 30000),
           "and that it sends them again once the new table is in it");
        ok(h_relay_wait_log(relay, "is now \"public.outbox_old\"", 0),
           "the relay warned that the outbox relation is now public.outbox_old");

        /* Publish without insert: the table in the publication, its inserts not sent. */
        h_pg_exec(c, "ALTER PUBLICATION outbox_pub SET (publish = 'update, delete')");
        ok(fx_wait_log_n(relay, "no longer sends the inserts of outbox table \"public.outbox\"", 2,
                         30000),
           "publish = 'update, delete': the relay warns again, naming the table");
        h_pg_exec(c, "ALTER PUBLICATION outbox_pub SET (publish = 'insert, update, delete')");
        ok(fx_wait_log_n(relay, "sends the inserts of every outbox table again", 2, 30000),
           "publish with insert again: the relay says so");
        is_int(h_relay_stop(relay, 30000), 0, "SIGTERM: clean exit 0");
        h_relay_free(relay);
        h_case_close(&k);
        return done_testing();
}
