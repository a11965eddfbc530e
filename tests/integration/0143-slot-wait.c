/*
 * 0143-slot-wait.c - the loop stays alive while a session's start waits on
 * other sessions: creating the slot, creating the publication.
 *
 * CREATE_REPLICATION_SLOT waits until every transaction running when it
 * began has ended, however long that is. CREATE PUBLICATION ... FOR TABLE
 * takes a SHARE UPDATE EXCLUSIVE lock on each table, so it waits for any
 * session holding one that conflicts (a CREATE INDEX CONCURRENTLY or VACUUM
 * of the table, a migration's ALTER TABLE in an open transaction).
 *
 * Each case: a session holds what the relay's command waits for (a
 * transaction with an xid; LOCK TABLE outbox IN SHARE UPDATE EXCLUSIVE
 * MODE, no xid) in a database of its own; a relay with a new slot, no
 * publication yet and http.liveness.timeout.ms = 1000 starts, and its
 * walsender is seen waiting on a lock in that command. Three liveness
 * timeouts later /healthz must still answer 200 (the loop turns: the same
 * turns feed the systemd watchdog), the command still waiting. SIGTERM
 * then ends the relay with exit 0 although the holder still holds, and no
 * slot is left. With the holder done, a relay starts and relays an event.
 * Before, CREATE PUBLICATION ran in a blocking PQexec(): /healthz 503
 * "stalled", SIGTERM unheard.
 *
 * Ports: RELAY_TEST_HTTP_PORT (default 19140) + 4, + 41.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"

static const struct {
        const char *name, *tag, *hold, *what;
        bool (*waits)(PGconn *, const char *);
        int port_offset;
} cases[] = {
        {"slotwait", "sw", "SELECT pg_current_xact_id()",
         "creating the slot (for the open transaction)", h_pg_slot_creation_waits, 4},
        {"pubwait", "pw", "LOCK TABLE outbox IN SHARE UPDATE EXCLUSIVE MODE",
         "creating the publication (for the table's lock)", h_pg_publication_creation_waits, 41},
};

int main(void)
{
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                fx_case_t fc;
                char topic[300];
                int port = fx_alive_case_open(&fc, cases[i].name, cases[i].tag,
                                              cases[i].port_offset, topic, sizeof(topic));
                PGconn *holder = h_pg_connect(fc.db);
                h_pg_exec(holder, "BEGIN");
                h_pg_exec(holder, "%s", cases[i].hold);

                h_relay_t *r = h_relay_start(fc.sets.v);
                fx_waits_alive(r, fc.c, fc.db, cases[i].waits, port, cases[i].what);
                fx_stop_waiting(r, &fc);

                h_pg_exec(holder, "COMMIT");
                PQfinish(holder);
                r = fx_case_relay(&fc, "with the holder done, the relay starts and streams");
                h_pg_exec(fc.c,
                          "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                          "VALUES (gen_random_uuid(), '%s', 'a1', 'Waited', '{}')",
                          fc.suffix);
                is_int(h_kafka_wait_count(topic, 1, 60000), 1, "Kafka holds the event");
                fx_stop_relay(r, "relay stops cleanly");
                h_relay_free(r);
                fx_case_close(&fc, NULL);
        }
        return done_testing();
}
