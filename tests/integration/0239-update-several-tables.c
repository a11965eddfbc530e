/*
 * 0239-update-several-tables.c - table.op.invalid.behavior = error names
 * the updated row by its own table's id column when there are several
 * outbox tables.
 *
 * outbox.table = public.outbox, public.outbox2, the second with its
 * columns in another order (payload first, id last). A row goes into
 * outbox2, then one into outbox (the mapping is now bound to outbox), then
 * outbox2's row is updated: the relay's error names outbox2's row by its
 * id. It used to read the column at outbox's id position, and named the
 * row by its payload.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "harness.h"

#define ID2 "22222222-2222-4222-8222-222222222222"

int main(void)
{
        h_case_t k;
        h_case_open(&k, "updtables", "slot", "upd", 1, 0);
        PGconn *c = k.c;
        h_pg_exec(c, "CREATE TABLE outbox2 (payload jsonb, aggregatetype varchar(255) NOT NULL, "
                     "aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, id uuid "
                     "PRIMARY KEY)");
        const char *sets[] = {k.set_conn, k.set_kafka, k.set_slot,
                              "outbox.table=public.outbox,public.outbox2",
                              "table.op.invalid.behavior=error", NULL};
        h_relay_t *relay = h_relay_start(sets);
        ok(h_relay_streams(relay, 60000), "relay streams");

        h_pg_exec(c, "INSERT INTO outbox2 (id, aggregatetype, aggregateid, type, payload) VALUES "
                     "('" ID2 "', '%s', 'b1', 'T', '{\"n\": 1}')",
                  k.aggtype);
        h_outbox_insert_n(c, "outbox", k.aggtype, "a1", 2);
        is_int(h_kafka_wait_count(k.topic, 2, 60000), 2, "both events reached Kafka");
        h_pg_exec(c, "UPDATE outbox2 SET type = 'T2'");
        ok(h_relay_wait_log(relay, "UPDATE of the outbox row with id \"" ID2 "\"", 30000),
           "the error names outbox2's row by its id");
        if (!h_relay_wait_log(relay, ID2, 0))
                h_relay_diag_log(relay);
        is_int(h_relay_stop(relay, 30000), 0, "SIGTERM: clean exit 0");
        h_relay_free(relay);
        h_case_close(&k);
        return done_testing();
}
