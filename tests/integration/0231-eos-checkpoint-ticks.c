/*
 * 0231-eos-checkpoint-ticks.c - the exactly-once checkpoint read calls the
 * session's tick while the brokers are slow to answer its metadata request
 * and its CreateTopics, and a slow broker still gets its answer in.
 *
 * relay_checkpoint_read() first asks for the checkpoint topic's metadata
 * (rd_kafka_metadata(), which blocks: up to the read's 30 s), and creates
 * the topic when it does not exist or has no partitions (CreateTopics,
 * waited for in one block of up to 31 s). Only its fetch loop called the tick, so while the brokers
 * did not answer those two, the session's tick (the systemd watchdog,
 * /healthz, the replication stream's status updates, a stop) was not
 * called at all.
 *
 * librdkafka's mock cluster, one broker, called directly (as 0218 does
 * against the real broker), with a tick that counts its calls:
 *
 *   1. every answer 10 s late, a read of 3 s and a tick that asks to stop
 *      on its 5th call: the metadata request gets no answer in time; the
 *      tick is called meanwhile and the read ends with its code (before:
 *      RELAY_EKAFKA after 3 s, the tick never called);
 *   2. a topic of no partitions, which the read then creates; the mock
 *      cluster does not answer this CreateTopics (as a controller that
 *      stopped answering), and a tick that asks to stop on its 20th call
 *      (past the metadata's): the tick is called while the CreateTopics is
 *      awaited and the read ends with its code (before: "could not create
 *      checkpoint topic ...: timed out" after 4 s, the tick never called);
 *   3. every answer of the broker 2 s late (rd_kafka_mock_broker_set_rtt)
 *      and a tick that never stops: the read still succeeds, and the
 *      tick was called; the topic is there afterwards.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdio.h>
#include <stdlib.h>

#include "faults/faults.h"
#include "harness.h"
#include "relay/checkpoint.h"
#include "relay/config.h"

typedef struct {
        int calls;
        int stop_at; /* 0: never */
} ticks_t;

static int tick(void *ctx, char *err, size_t errlen)
{
        ticks_t *t = ctx;
        if (++t->calls == t->stop_at)
                return relay_err(err, errlen, RELAY_ESTOPPED, "stopped by the test's tick");
        return 0;
}

/* One read of a missing topic with the tick t: its return code. */
static int read_missing(const relay_config_t *cfg, const char *topic, int timeout_ms, ticks_t *t,
                        bool *found, char *err, size_t errlen)
{
        relay_lsn_t lsn;
        err[0] = '\0';
        return relay_checkpoint_read(cfg, topic, "sysid/slot", timeout_ms, tick, t, &lsn, found,
                                     err, errlen);
}

/* A read of 3 s whose tick asks to stop on its stop_at-th call, while the
 * broker does not answer what (one test point): it ends with the tick's code. */
static void stopped_waiting(const relay_config_t *cfg, const char *topic, int stop_at,
                            const char *what)
{
        char err[RELAY_ERRBUF];
        bool found;
        ticks_t t = {.stop_at = stop_at};
        int rc = read_missing(cfg, topic, 3000, &t, &found, err, sizeof(err));
        is_int(rc, RELAY_ESTOPPED,
               "%s unanswered: the tick is called while it is awaited, and its stop ends the "
               "read (ticks %d: %s)",
               what, t.calls, err);
}

int main(void)
{
        rd_kafka_mock_cluster_t *mock;
        const char *bootstraps = fx_mock_start(1, &mock);
        relay_config_t *cfg = NULL;
        char err[RELAY_ERRBUF];
        bool found;
        int rc;

        if (relay_config_new(&cfg) != 0 ||
            relay_config_set(cfg, "kafka.bootstrap.servers", bootstraps, "test", err,
                             sizeof(err)) != 0)
                tap_bail("config: %s", err);

        /* 1. No metadata answer within the read's 3 s. */
        rd_kafka_mock_broker_set_rtt(mock, 1, 10000);
        stopped_waiting(cfg, "ckpt_ticks_1", 5, "metadata (10 s late)");
        rd_kafka_mock_broker_set_rtt(mock, 1, 0);

        /* 2. A topic of no partitions (the mock cluster would create a
         * missing one itself when asked for its metadata): the read creates
         * it; this CreateTopics gets no answer from the mock. */
        if (rd_kafka_mock_topic_create(mock, "ckpt_ticks_2", 0, 1) != RD_KAFKA_RESP_ERR_NO_ERROR)
                tap_bail("could not make a mock topic of no partitions");
        stopped_waiting(cfg, "ckpt_ticks_2", 20, "CreateTopics");

        /* 3. A slow broker still answers in time. */
        rd_kafka_mock_broker_set_rtt(mock, 1, 2000);
        ticks_t t3 = {0};
        rc = read_missing(cfg, "ckpt_ticks_3", 30000, &t3, &found, err, sizeof(err));
        ok(rc == 0 && !found, "broker 2 s late, no stop: the read succeeds, no checkpoint (rc %d: %s)",
           rc, err);
        ok(t3.calls > 0, "and the tick was called meanwhile (%d times)", t3.calls);
        rd_kafka_mock_broker_set_rtt(mock, 1, 0);
        ticks_t t4 = {0};
        rc = read_missing(cfg, "ckpt_ticks_3", 30000, &t4, &found, err, sizeof(err));
        ok(rc == 0 && !found, "the topic it created is there: read again, rc %d (%s)", rc, err);

        relay_config_free(cfg);
        return done_testing();
}
