/*
 * 0228-eos-init-alive.c - the loop stays alive, and a stop is heard, while
 * registering the exactly-once transactional.id waits for its coordinator.
 *
 * Under delivery.mode = exactly-once a session starts its stream, then
 * registers its transactional.id (rd_kafka_init_transactions()), which
 * waits, up to 30 s, while the transaction coordinator is unreachable.
 * Meanwhile the relay must keep its stream (status updates), feed the
 * systemd watchdog and end on SIGTERM. Before, the wait went in slices of
 * the status interval (10 s) with only status updates between them: no
 * WATCHDOG=1 for 10 s at a time, and a SIGTERM waited for the 30 s to run
 * out.
 *
 * librdkafka's mock cluster, two brokers: the event topic on broker 1, the
 * transaction coordinator of the relay's transactional.id on broker 2,
 * which is down; a real broker cannot be told where a coordinator goes.
 * WATCHDOG_USEC = 400 ms (a WATCHDOG=1 at least every 100 ms while alive);
 * the test reads the notify socket as systemd does. While the relay waits
 * (stream active, no "exactly-once: transactional.id" logged), 3 s must
 * bring WATCHDOG=1, and SIGTERM must end it with exit 0 within 15 s, half
 * the wait's 30 s. With broker 2 up, a relay streams.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"

int main(void)
{
        rd_kafka_mock_cluster_t *mock;
        fx_case_t fc;
        fx_mock_case_open(&fc, "eosinit", "ei", 2, &mock);
        char *tid = fx_fmt("tid_%s", fc.suffix);
        char *ck_topic = fx_fmt("ckpt_%s", fc.suffix);
        if (rd_kafka_mock_topic_create(mock, ck_topic, 1, 1) ||
            rd_kafka_mock_partition_set_leader(mock, ck_topic, 0, 1) ||
            rd_kafka_mock_coordinator_set(mock, "transaction", tid, 2))
                tap_bail("could not set up the mock cluster");
        rd_kafka_mock_broker_set_down(mock, 2);
        fx_sets_add(&fc.sets, "delivery.mode=exactly-once");
        fx_sets_add(&fc.sets, "eos.checkpoint.topic=%s", ck_topic);
        fx_sets_add(&fc.sets, "eos.transactional.id=%s", tid);

        fx_notify_t ns;
        fx_notify_open(&ns, "400000");
        h_relay_t *r = h_relay_start(fc.sets.v);
        fx_notify_env_end();
        if (!ok(fx_notify_wait_active(&ns, &fc, 60000), "the relay starts its stream"))
                h_relay_diag_log(r);
        fx_notify_count(&ns, "", 500); /* what came before the wait */
        int pings = fx_notify_count(&ns, "WATCHDOG=1", 3000);
        char *log = h_relay_log(r);
        ok(strstr(log, "exactly-once: transactional.id") == NULL &&
                   strstr(log, "streaming from replication slot") == NULL,
           "it waits to register its transactional.id");
        free(log);
        if (!ok(pings > 0, "the relay sends WATCHDOG=1 while it waits (%d in 3 s)", pings))
                h_relay_diag_log(r);
        int rc = fx_notify_stop(&ns, r, 15000);
        if (!ok(rc == 0, "SIGTERM ends the relay (exit 0) within 15 s while it waits "
                         "(exit code %d, -1: still running)",
                rc))
                h_relay_diag_log(r);
        h_relay_free(r);
        fx_notify_close(&ns);

        rd_kafka_mock_broker_set_up(mock, 2);
        r = fx_case_relay(&fc, "with the coordinator's broker up, a relay streams");
        fx_stop_relay(r, "relay stops cleanly");
        h_relay_free(r);
        free(ck_topic), free(tid);
        fx_case_close(&fc, NULL);
        return done_testing();
}
