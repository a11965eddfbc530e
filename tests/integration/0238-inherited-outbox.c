/*
 * 0238-inherited-outbox.c - an outbox table with an inheritance child
 * (CREATE TABLE ... INHERITS, the partitioning of old).
 *
 * A row inserted into the child is a row of the outbox table to every
 * query, but logical replication sends it under the child's name, or not
 * at all when the child came after the publication. The relay used to
 * start and miss such rows without a word.
 *
 * 1. outbox.table = public.outbox: the relay refuses to start (exit 3),
 *    naming the child and the fix, and makes no slot; check fails the
 *    same.
 * 2. outbox.table = public.outbox, <child>, the child added to the
 *    publication (created after it, the child was not in it, so its rows
 *    were not even sent): the relay streams, and an
 *    event into the parent and one into the child both reach Kafka with
 *    their payloads.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

int main(void)
{
        h_case_t k;
        h_case_open(&k, "inherit", "slot", "inh", 1, H_CASE_PUBLICATION);
        PGconn *c = k.c;
        h_pg_exec(c, "CREATE TABLE outbox_2026 () INHERITS (outbox)");

        /* 1. */
        const char *sets[] = {k.set_conn, k.set_kafka, k.set_slot, NULL};
        h_relay_t *relay = h_relay_start(sets);
        is_int(h_relay_wait(relay, 30000), 3, "an outbox table with an inheritance child: exit 3");
        ok(h_relay_wait_log(relay, "has an inheritance child, \"public.outbox_2026\"", 0) &&
                   h_relay_wait_log(relay, "add public.outbox_2026 to outbox.table", 0),
           "the message names the child and the fix");
        h_relay_free(relay);
        char *v = h_pg_value(c, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '%s'",
                             k.slot);
        is_str(v, "0", "no slot was created");
        free(v);
        char *out = NULL, *clog = NULL;
        int crc = h_relay_run_cmd("check", NULL, sets, 120000, &out, &clog);
        ok(crc != 0 && out &&
                   strstr(out, "has an inheritance child, \"public.outbox_2026\"") != NULL,
           "check fails the same (exit %d)", crc);
        free(out);
        free(clog);

        /* 2. */
        h_pg_exec(c, "ALTER PUBLICATION outbox_pub ADD TABLE outbox_2026");
        const char *sets2[] = {k.set_conn, k.set_kafka, k.set_slot, "status.interval.ms=500",
                               "outbox.table=public.outbox,public.outbox_2026", NULL};
        crc = h_relay_run_cmd("check", NULL, sets2, 120000, &out, &clog);
        /* Exit 0: every check of the server's version passes (the
         * publication's columns from 15 on, the slot's failover from 17),
         * not only the inheritance one. */
        if (!ok(crc == 0 && out && !strstr(out, "inheritance child"),
                "check passes the child then (exit %d)", crc))
                tap_diag("check said:\n%s", out ? out : "(nothing)");
        free(out);
        free(clog);
        relay = h_relay_start(sets2);
        ok(h_relay_streams(relay, 60000), "with the child in outbox.table the relay streams");
        h_outbox_insert_n(c, "outbox", k.aggtype, "parent", 1);
        h_outbox_insert_n(c, "outbox_2026", k.aggtype, "child", 2);
        bool confirmed;
        h_msg_t *msgs;
        size_t n = h_relayed_consume(c, k.slot, k.topic, 2, 60000, &confirmed, &msgs);
        ok(confirmed, "the slot is confirmed past both inserts");
        is_int((long long)n, 2, "Kafka holds both events");
        ok(n == 2 && h_msg_is(&msgs[0], "parent", "{\"n\": 1}") &&
                   h_msg_is(&msgs[1], "child", "{\"n\": 2}"),
           "the parent's event, then the child's, each with its payload");
        h_msgs_free(msgs, n);
        is_int(h_relay_stop(relay, 30000), 0, "SIGTERM: clean exit 0");
        h_relay_free(relay);
        h_case_close(&k);
        return done_testing();
}
