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
 * PostgreSQL 18 decodes on instead, warning "skipped loading publication"
 * (55000) for each change it leaves out: their events never reach the
 * relay, and confirming what follows would lose them in silence. The
 * relay stops there the same way (before, it went on: gap-1 was never
 * sent, b-1 was, and nothing said so but a logged warning).
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

int main(void)
{
        h_case_t k;
        h_case_open(&k, "pubdrop", "slot_pubdrop", "pd", 1, H_CASE_PUBLICATION);
        /* slot.recreate = true: before, it made the relay retry for ever. */
        const char *sets[] = {k.set_conn, k.set_kafka, k.set_slot, "slot.recreate=true",
                              "reconnect.backoff.ms=100", "reconnect.backoff.max.ms=500", NULL};

        h_relay_t *r = h_relay_start(sets);
        ok(h_relay_streams(r, 60000), "the relay streams");
        h_outbox_insert(k.c, k.aggtype, "a-1");
        is_int(h_kafka_wait_count(k.topic, 1, 30000), 1, "Kafka holds a-1");

        /* Dropped, a change, created again. */
        h_pg_exec(k.c, "DROP PUBLICATION outbox_pub");
        h_outbox_insert(k.c, k.aggtype, "gap-1");
        h_pg_exec_file(k.c, "002_publication.sql");
        h_outbox_insert(k.c, k.aggtype, "b-1");
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
        h_pg_exec(k.c, "SELECT pg_replication_slot_advance('%s', pg_current_wal_lsn())", k.slot);
        r = h_relay_start(sets);
        ok(h_relay_streams(r, 60000), "after pg_replication_slot_advance the relay streams again");
        h_outbox_insert(k.c, k.aggtype, "c-1");
        h_kafka_wait_count(k.topic, 2, 30000);
        static const char *const c1[] = {"c-1", NULL};
        ok(h_kafka_count_keys(k.topic, c1) > 0, "and relays c-1, written afterwards");
        is_int(h_relay_stop(r, 30000), 0, "the relay stops cleanly");
        h_relay_free(r);

        h_case_close(&k);
        return done_testing();
}
