/*
 * 0227-eos-read-alive.c - the loop stays alive, and a stop is heard, while
 * the exactly-once checkpoint read waits.
 *
 * Under delivery.mode = exactly-once a session starts its stream, then
 * reads its checkpoint back; that read waits while another producer's
 * transaction is open on the checkpoint topic, up to 30 s (0218, 0220).
 * Meanwhile the relay must feed the systemd watchdog (WatchdogSec= kills a
 * service that stops sending WATCHDOG=1) and must end on SIGTERM, as it
 * does while creating the slot waits (0143-slot-wait). Before, the read
 * only sent status updates: no WATCHDOG=1 for as long as it waited, and a
 * SIGTERM waited for the read's 30 s to run out.
 *
 * Here the relay gets a NOTIFY_SOCKET and WATCHDOG_USEC = 400 ms (a
 * WATCHDOG=1 at least every 100 ms while alive); the test reads the socket
 * as systemd does. While the read waits (the stream active, no
 * "exactly-once: transactional.id" logged), 3 s must bring WATCHDOG=1, and
 * SIGTERM must end the relay with exit 0 within 15 s, half the read's
 * 30 s, the other transaction still open. With that transaction ended a
 * relay streams and relays an event.
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
        fx_case_open(&fc, "eosalive", "ea");
        snprintf(topic, sizeof(topic), "outbox.event.%s", fc.suffix);
        h_pg_create_outbox(fc.c, "outbox");
        fx_held_checkpoint_t held;
        fx_held_checkpoint_open(&held, &fc);

        fx_sets_init(&fc.sets, fc.db, fc.slot, NULL);
        fx_sets_add(&fc.sets, "delivery.mode=exactly-once");
        fx_sets_add(&fc.sets, "eos.checkpoint.topic=%s", held.topic);
        fx_notify_t ns;
        fx_notify_open(&ns, "400000");
        h_relay_t *r = h_relay_start(fc.sets.v);
        fx_notify_env_end();

        if (!ok(fx_notify_wait_active(&ns, &fc, 60000), "the relay starts its stream"))
                h_relay_diag_log(r);
        fx_notify_count(&ns, "", 500); /* what came before the read */
        int pings = fx_notify_count(&ns, "WATCHDOG=1", 3000);
        char *log = h_relay_log(r);
        bool waiting = strstr(log, "exactly-once: transactional.id") == NULL;
        free(log);
        ok(waiting, "its checkpoint read waits for the other transaction");
        if (!ok(pings > 0, "the relay sends WATCHDOG=1 while the read waits (%d in 3 s)", pings))
                h_relay_diag_log(r);

        int rc = fx_notify_stop(&ns, r, 15000);
        if (!ok(rc == 0, "SIGTERM ends the relay (exit 0) within 15 s while the read waits "
                         "(exit code %d, -1: still running)", rc))
                h_relay_diag_log(r);
        h_relay_free(r);
        fx_notify_close(&ns);

        fx_held_checkpoint_release(&held);
        r = fx_case_relay(&fc, "with the other transaction ended, a relay streams");
        h_pg_exec(fc.c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES "
                  "(gen_random_uuid(), '%s', 'a1', 'Alive', '{}')",
                  fc.suffix);
        /* The high watermark counts the transaction's marker too. */
        h_kafka_wait_count(topic, 2, 60000);
        h_msg_t *m;
        size_t n = h_kafka_consume_all(topic, &m);
        h_msgs_free(m, n);
        is_int((long)n, 1, "Kafka holds the event");
        fx_stop_relay(r, "relay stops cleanly");
        h_relay_free(r);
        fx_held_checkpoint_close(&held);
        fx_case_close(&fc, NULL);
        return done_testing();
}
