/*
 * 0143-slot-wait.c - the loop stays alive while creating the slot waits.
 *
 * CREATE_REPLICATION_SLOT waits until every transaction running when it
 * began has ended, however long that is. A session holds a transaction
 * (with an xid) open in the relay's database; a relay with a new slot and
 * http.liveness.timeout.ms = 1000 starts, and its walsender is seen waiting
 * on that transaction's lock. Three liveness timeouts later /healthz must
 * still answer 200 (the loop turns: the same turns feed the systemd
 * watchdog), the creation still waiting. SIGTERM then ends the relay with
 * exit 0 although the transaction is still open, and no slot is left. With
 * the transaction ended, a relay creates the slot and relays an event.
 *
 * Port: RELAY_TEST_HTTP_PORT (default 19140) + 4.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"

int main(void)
{
        fx_case_t fc;
        char topic[300];
        int port = fx_alive_case_open(&fc, "slotwait", "sw", 4, topic, sizeof(topic));

        PGconn *holder = h_pg_connect(fc.db);
        h_pg_exec(holder, "BEGIN");
        h_pg_exec(holder, "SELECT pg_current_xact_id()");

        h_relay_t *r = h_relay_start(fc.sets.v);
        fx_waits_alive(r, fc.c, fc.db, h_pg_slot_creation_waits, port,
                       "creating the slot (for the open transaction)");

        fx_stop_relay(r, "SIGTERM ends the relay (exit 0) while the transaction is still open");
        h_relay_free(r);
        is_int(fx_slot_count(fc.c, fc.slot), 0, "no slot is left behind");

        h_pg_exec(holder, "COMMIT");
        PQfinish(holder);
        r = fx_case_relay(&fc, "with the transaction ended, the relay creates the slot and streams");
        h_pg_exec(fc.c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES "
                  "(gen_random_uuid(), '%s', 'a1', 'Waited', '{}')",
                  fc.suffix);
        is_int(h_kafka_wait_count(topic, 1, 60000), 1, "Kafka holds the event");
        fx_stop_relay(r, "relay stops cleanly");
        h_relay_free(r);
        fx_case_close(&fc, NULL);
        return done_testing();
}
