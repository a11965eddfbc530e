/*
 * 0226-eos-checkpoint-leader-down.c - exactly-once, the checkpoint read
 * cannot reach the end of the checkpoint topic in time because the
 * partition's leader is down: the error must name that (the partition, its
 * leader, check the broker), not "an open transaction of another producer"
 * (the only other cause, 0218/0220), which sends an operator looking for a
 * transaction that does not exist.
 *
 * librdkafka's mock cluster, two brokers: the transaction coordinator and
 * the event topic on broker 1, the checkpoint topic's one partition led by
 * broker 2, which is down. The relay's session fails after its 30 s read
 * and is retried; the first failure's message is checked.
 *
 * The relay used to say "could not read checkpoint topic ... to its end
 * within 30000 ms (an open transaction of another producer holds it back
 * until it ends)".
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"

int main(void)
{
        rd_kafka_mock_cluster_t *mock;
        fx_case_t fc;
        fx_mock_case_open(&fc, "eosleader", "el", 2, &mock);
        /* The checkpoint topic led by broker 2, the transactions by broker 1. */
        fx_mock_eos(&fc, mock, 2, 1);
        rd_kafka_mock_broker_set_down(mock, 2);

        h_relay_t *r = h_relay_start(fc.sets.v);
        bool failed = h_relay_wait_log(r, "could not read checkpoint topic", 90000);
        ok(failed, "the checkpoint read fails while the partition's leader is down");
        char *log = h_relay_log(r);
        const char *line = strstr(log, "could not read checkpoint topic");
        if (line)
                tap_diag("%.*s", (int)strcspn(line, "\n"), line);
        ok(line && strstr(line, "partition 0 never answered (its leader, broker 2, is down or "
                                "unreachable)"),
           "naming the partition and its leader");
        ok(line && !strstr(line, "open transaction"), "not an open transaction");
        free(log);
        if (!failed)
                h_relay_diag_log(r);
        h_relay_signal(r, SIGKILL);
        h_relay_wait(r, 10000);
        h_relay_free(r);
        fx_case_close(&fc, NULL);
        return done_testing();
}
