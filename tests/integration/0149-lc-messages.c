/*
 * 0149-lc-messages.c - a server whose messages are not in English: what
 * the relay makes of an error follows its SQLSTATE and what it can ask the
 * server, not the message text.
 *
 * A PostgreSQL of the test's own (port offset 19) runs with lc_messages =
 * de_DE.UTF-8 (h_cluster_up_german(): the Debian package ships
 * postgres-15.mo for de, and the locale is compiled with localedef). The
 * test first checks the server speaks German (SELECT 1/0: "Division durch
 * Null"), and stops if not: the builds tests/env/pg starts for the other
 * versions have no NLS, so it runs on Debian's 15 only.
 *
 * The publication dropped under a streaming relay: the walsender fails with
 * 42704 and "Publikation »outbox_pub« existiert nicht". The relay matched
 * "publication" in that text to tell it from a dropped slot, so in German
 * it called the slot lost (exit 5, "drop the slot or set slot.recreate =
 * true"). Now: exit 3 and the fix for the slot (pg_replication_slot_advance),
 * as 0127 has it in English; the slot is still there.
 *
 * (START_REPLICATION's 42704 for a slot dropped between the relay's own
 * check of the slot and the command is a race no test can time; test_repl
 * gives it the German ErrorResponse.)
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define OFFSET 19

static void insert_event(PGconn *c, const char *aggtype, const char *aggid)
{
        h_pg_exec(c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES "
                  "(gen_random_uuid(), '%s', '%s', 'T', '{}')",
                  aggtype, aggid);
}

int main(void)
{
        h_cluster_t *cl = h_cluster_up_german(OFFSET, NULL, "-c wal_level=logical");
        char ci[256], set_conn[300], set_kafka[256];
        snprintf(ci, sizeof(ci), "host=127.0.0.1 port=%d user=postgres dbname=postgres",
                 h_cluster_port(cl));
        PGconn *c = PQconnectdb(ci);
        if (PQstatus(c) != CONNECTION_OK)
                tap_bail("connect to the test's PostgreSQL: %s", PQerrorMessage(c));

        char *aggtype = h_unique_name("lcm");
        h_pg_create_outbox(c, "outbox");
        h_pg_exec_file(c, "002_publication.sql");
        snprintf(set_conn, sizeof(set_conn), "postgres.conninfo=%s", ci);
        snprintf(set_kafka, sizeof(set_kafka), "kafka.bootstrap.servers=%s", h_kafka_bootstrap());
        const char *sets[] = {set_conn, set_kafka, "slot.name=lcm_slot", NULL};

        h_relay_t *r = h_relay_start(sets);
        if (!ok(h_relay_wait_log(r, "streaming from replication slot", 60000), "the relay streams"))
                h_relay_diag_log(r);
        /* The first change after the DROP fails the walsender. */
        h_pg_exec(c, "DROP PUBLICATION outbox_pub");
        insert_event(c, aggtype, "gap-1");
        int rc = h_relay_wait(r, 60000);
        is_int(rc, 3, "publication dropped: exit 3 (setup), not 5 (slot lost)");
        char *log = h_relay_log(r);
        ok(log && strstr(log, "existiert nicht; it was dropped while the slot had changes"),
           "the server's German words, then what happened");
        ok(log && strstr(log, "pg_replication_slot_advance('lcm_slot'"),
           "and how to move the slot on");
        ok(log && !strstr(log, "slot.recreate"), "not the fix for a lost slot");
        if (rc != 3)
                h_relay_diag_log(r);
        free(log);
        h_relay_free(r);
        char *slots =
                h_pg_value(c, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'lcm_slot'");
        is_str(slots, "1", "the slot is there: stuck, not lost");

        free(slots);
        PQfinish(c);
        h_cluster_free(cl);
        free(aggtype);
        return done_testing();
}
