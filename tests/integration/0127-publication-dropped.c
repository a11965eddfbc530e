/*
 * 0127-publication-dropped.c - the publication dropped under a streaming
 * relay, then created again: what the relay says, and that what it says
 * works.
 *
 * PostgreSQL 14-17 look the publication up as of each change they decode:
 * the walsender fails at the first change after the DROP ("publication
 * does not exist", 42704) on every restart, even once the publication
 * exists again. The slot is not lost (slot.recreate cannot move it), so
 * the relay stops with exit status 3 and names the fix: create the
 * publication, pg_replication_slot_advance() the slot past those changes
 * (or drop it), check the outbox. Done as it says, a relay started again
 * relays what is written afterwards.
 *
 * Before, the relay called the slot dropped or invalidated (exit 5) and
 * said to drop it "or set slot.recreate = true"; with slot.recreate = true
 * it retried for ever, logging "recreating it", and recreated nothing.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static void insert_event(PGconn *c, const char *aggtype, const char *id)
{
        h_pg_exec(c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES "
                  "(gen_random_uuid(), '%s', '%s', 'T', '{}')",
                  aggtype, id);
}

int main(void)
{
        char *db = h_pg_create_db("pubdrop");
        char *slot = h_unique_name("slot_pubdrop");
        char *aggtype = h_unique_name("pd");
        char *ci = h_pg_conninfo(db);
        char topic[256], set_conn[512], set_slot[128], set_kafka[256];
        PGconn *c = h_pg_connect(db);

        h_pg_create_outbox(c, "outbox");
        h_pg_exec_file(c, "002_publication.sql");
        snprintf(topic, sizeof(topic), "outbox.event.%s", aggtype);
        h_kafka_create_topic(topic, 1);
        snprintf(set_conn, sizeof(set_conn), "postgres.conninfo=%s", ci);
        snprintf(set_slot, sizeof(set_slot), "slot.name=%s", slot);
        snprintf(set_kafka, sizeof(set_kafka), "kafka.bootstrap.servers=%s", h_kafka_bootstrap());
        /* slot.recreate = true: before, it made the relay retry for ever. */
        const char *sets[] = {set_conn, set_kafka, set_slot, "slot.recreate=true",
                              "reconnect.backoff.ms=100", "reconnect.backoff.max.ms=500", NULL};

        h_relay_t *r = h_relay_start(sets);
        if (!ok(h_relay_wait_log(r, "streaming from replication slot", 60000), "the relay streams"))
                h_relay_diag_log(r);
        insert_event(c, aggtype, "a-1");
        is_int(h_kafka_wait_count(topic, 1, 30000), 1, "Kafka holds a-1");

        /* Dropped, a change, created again. */
        h_pg_exec(c, "DROP PUBLICATION outbox_pub");
        insert_event(c, aggtype, "gap-1");
        h_pg_exec_file(c, "002_publication.sql");
        insert_event(c, aggtype, "b-1");
        int rc = h_relay_wait(r, 60000);
        is_int(rc, 3, "the relay stops with exit status 3 (setup), not 5 (slot lost) or never");
        char *log = h_relay_log(r);
        ok(log && strstr(log, "publication \"outbox_pub\" does not exist; it was dropped while the "
                              "slot had changes to send"),
           "the relay says what happened");
        ok(log && strstr(log, "pg_replication_slot_advance"), "and how to move the slot on");
        ok(log && !strstr(log, "recreating it"), "no retries that claim to recreate the slot");
        if (rc != 3)
                h_relay_diag_log(r);
        free(log);
        h_relay_free(r);

        /* The fix as the message gives it; then the relay goes on. */
        h_pg_exec(c, "SELECT pg_replication_slot_advance('%s', pg_current_wal_lsn())", slot);
        r = h_relay_start(sets);
        if (!ok(h_relay_wait_log(r, "streaming from replication slot", 60000),
                "after pg_replication_slot_advance the relay streams again"))
                h_relay_diag_log(r);
        insert_event(c, aggtype, "c-1");
        h_kafka_wait_count(topic, 2, 30000);
        h_msg_t *msgs = NULL;
        size_t n = h_kafka_consume_all(topic, &msgs);
        bool c1 = false;
        for (size_t i = 0; i < n; i++)
                c1 = c1 || (msgs[i].key && strcmp(msgs[i].key, "c-1") == 0);
        h_msgs_free(msgs, n);
        ok(c1, "and relays c-1, written afterwards");
        h_relay_signal(r, SIGTERM);
        is_int(h_relay_wait(r, 30000), 0, "the relay stops cleanly");
        h_relay_free(r);

        PQfinish(c);
        h_pg_drop_db(db);
        free(ci);
        free(db);
        free(slot);
        free(aggtype);
        return done_testing();
}
