/*
 * 0161-backfill-waits-alive.c - the loop stays alive, and a stop is heard,
 * while a backfill's statement waits on the server.
 *
 * snapshot.mode = initial reads the outbox through its own connection
 * (src/backfill.c): BEGIN, SET TRANSACTION SNAPSHOT, a SELECT ... LIMIT 0
 * and a DECLARE per table, then FETCHes. Each can take long: a lock the
 * table waits for (an ALTER TABLE queued ahead), the first FETCH's sort of
 * a large table, a slow snapshot.filter. Meanwhile the relay must feed
 * the systemd watchdog and /healthz, and end on SIGTERM, as it does while
 * creating the slot waits (0143-slot-wait). Before, each ran in a blocking
 * PQexec(): /healthz said stalled and SIGTERM waited for the statement.
 *
 * The wait here: a snapshot.filter that takes a shared advisory lock
 * another session holds, so the first FETCH waits as long as the test
 * wants (a statement that takes long, whatever the cause). With
 * http.liveness.timeout.ms = 1000, /healthz must answer 200 after 3 s of
 * that wait, and SIGTERM end the relay with exit 0 while the lock is still
 * held, leaving no slot. With the lock given up, a relay backfills the row.
 *
 * Port: RELAY_TEST_HTTP_PORT (default 19140) + 40.
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
        PGconn *holder;
        h_relay_t *r = fx_backfill_held(&fc, "bfwait", "bw", 40, 4242, topic, sizeof(topic), &holder);

        fx_stop_waiting(r, &fc);

        h_pg_exec(holder, "SELECT pg_advisory_unlock(4242)");
        PQfinish(holder);
        r = fx_case_relay(&fc, "with the lock given up, the relay backfills and streams");
        is_int(h_kafka_wait_count(topic, 1, 60000), 1, "Kafka holds the backfilled row");
        fx_stop_relay(r, "relay stops cleanly");
        h_relay_free(r);
        fx_case_close(&fc, NULL);
        return done_testing();
}
