/*
 * 0227-eos-waits-alive.c - the loop stays alive, and a stop is heard, while
 * an exactly-once session start waits on Kafka.
 *
 * Under delivery.mode = exactly-once a session starts its stream, then
 * registers its transactional.id (rd_kafka_init_transactions(), which
 * waits while the transaction coordinator is unreachable, up to 30 s) and
 * reads its checkpoint back (which waits while another producer's
 * transaction is open on the checkpoint topic, up to 30 s: 0218, 0220).
 * Meanwhile the relay must feed the systemd watchdog (WatchdogSec= kills a
 * service that stops sending WATCHDOG=1) and must end on SIGTERM, as it
 * does while creating the slot waits (0143-slot-wait). Before, both waits
 * only sent status updates: no WATCHDOG=1 while the read waited, or for
 * 10 s at a time (the status interval) while the registration did, and a
 * SIGTERM waited for the 30 s to run out.
 *
 * Each relay gets a NOTIFY_SOCKET and WATCHDOG_USEC = 400 ms (a WATCHDOG=1
 * at least every 100 ms while alive); the test reads the socket as systemd
 * does. While the relay waits (its stream active, neither "exactly-once:
 * transactional.id" nor "streaming from" logged), 3 s must bring
 * WATCHDOG=1, and SIGTERM must end it with exit 0 within 15 s, half the
 * wait's 30 s. Then the cause goes away and a relay streams.
 *
 * 1. The checkpoint read, against the real broker: another producer's
 *    transaction held open on the case's checkpoint topic.
 * 2. The registration, on librdkafka's mock cluster (a real broker cannot
 *    be told where a coordinator goes): the relay's transaction
 *    coordinator on broker 2, which is down.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"

/* A relay of the case's settings waits in its session start (what): the
 * test points of the header comment. */
static void waits_alive(const fx_case_t *fc, const char *what)
{
        fx_notify_t ns;
        h_relay_t *r = fx_notify_relay(&ns, fc, "400000");
        if (!ok(fx_notify_wait_active(&ns, fc, 60000), "%s: the relay starts its stream", what))
                h_relay_diag_log(r);
        int pings = fx_notify_count(&ns, "WATCHDOG=1", 3000);
        char *log = h_relay_log(r);
        ok(strstr(log, "exactly-once: transactional.id") == NULL &&
                   strstr(log, "streaming from replication slot") == NULL,
           "%s: it waits", what);
        free(log);
        if (!ok(pings > 0, "%s: the relay sends WATCHDOG=1 while it waits (%d in 3 s)", what,
                pings))
                h_relay_diag_log(r);
        int rc = fx_notify_stop(&ns, r, 15000);
        if (!ok(rc == 0,
                "%s: SIGTERM ends the relay (exit 0) within 15 s (exit code %d, -1: still running)",
                what, rc))
                h_relay_diag_log(r);
        h_relay_free(r);
        fx_notify_close(&ns);
}

static void checkpoint_read(void)
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

        waits_alive(&fc, "checkpoint read");

        fx_held_checkpoint_release(&held);
        h_relay_t *r = fx_case_relay(&fc, "with the other transaction ended, a relay streams");
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
}

static void registration(void)
{
        rd_kafka_mock_cluster_t *mock;
        fx_case_t fc;
        fx_mock_case_open(&fc, "eosinit", "ei", 2, &mock);
        fx_mock_eos(&fc, mock, 1, 2);
        rd_kafka_mock_broker_set_down(mock, 2);

        waits_alive(&fc, "registration");

        rd_kafka_mock_broker_set_up(mock, 2);
        h_relay_t *r = fx_case_relay(&fc, "with the coordinator's broker up, a relay streams");
        fx_stop_relay(r, "relay stops cleanly");
        h_relay_free(r);
        fx_case_close(&fc, NULL);
}

int main(void)
{
        checkpoint_read();
        registration();
        return done_testing();
}
