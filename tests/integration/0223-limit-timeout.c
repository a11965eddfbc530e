/*
 * 0223-limit-timeout.c - the topic's max.message.bytes cannot be read
 * because Kafka does not answer the DescribeConfigs request in time (a
 * timeout, not a refusal). README's "Poison events": the relay says so,
 * naming the timeout and what to check, not a missing permission; it asks
 * for no other topic's limit while the cluster does not answer (each ask
 * holds the loop up to 3 s), and asks again after a short pause that
 * doubles while the timeouts go on, not only after the 5 minutes a
 * refusal is trusted for. Nothing is lost meanwhile.
 *
 * librdkafka's mock cluster (2.0.2) is that cluster: it names no
 * controller, and a topic's DescribeConfigs goes to the controller, so
 * every such request ends with librdkafka's own timeout ("Failed while
 * waiting for controller: Local: Timed out") before it reaches a broker
 * (request errors or round trips pushed for ApiKey 32 are never served).
 *
 * The relay used to warn "grant DescribeConfigs on the topic" for it, once
 * per topic (three asks of 3 s for the first transaction's three topics),
 * and to trust the unknown limit for 5 minutes (no second ask in a minute).
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

#define NTOPICS 3
#define WARNING "could not read max.message.bytes"
#define TIMEOUT "did not answer the DescribeConfigs request within 3000 ms"

/* One event of aggregate type t<i>_<suffix>, id ...<n>, committed alone or
 * as part of the caller's transaction. */
static void insert(fx_case_t *fc, int i, int n)
{
        h_pg_exec(fc->c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                  "VALUES ('00000000-0000-4000-8000-%012d', 't%d_%s', 'a-%d', 'E', '{}')",
                  n, i, fc->suffix, n);
}

int main(void)
{
        rd_kafka_mock_cluster_t *mock;
        char *topics[NTOPICS];

        fx_case_t fc;
        fx_mock_case_open(&fc, "limittimeout", "lt", 1, &mock);
        for (int i = 0; i < NTOPICS; i++)
                topics[i] = fx_mock_topic(mock, 0, "outbox.event.t%d_%s", i, fc.suffix);
        h_relay_t *r = fx_case_relay(&fc, "relay streams");

        /* One transaction, one event to each topic. */
        h_pg_exec(fc.c, "BEGIN");
        for (int i = 0; i < NTOPICS; i++)
                insert(&fc, i, i + 1);
        h_pg_exec(fc.c, "COMMIT");
        int64_t got = 0;
        for (int i = 0; i < NTOPICS; i++)
                got += h_kafka_wait_count(topics[i], 1, 60000);
        is_int(got, NTOPICS, "each topic holds its event, its limit unread");
        ok(fx_log_count(r, TIMEOUT) >= 1, "the warning names the timeout");
        is_int(fx_log_count(r, "grant DescribeConfigs"), 0,
               "and does not blame a missing permission");
        is_int(fx_log_count(r, WARNING), 1,
               "one ask for the transaction's %d topics: none while Kafka does not answer",
               NTOPICS);
        ok(fx_log_count(r, "asking again in 10 s") == 1, "the first pause is 10 s");

        /* Keep events flowing to the first topic: after the pause its limit
         * is asked for again, and the pause doubles. */
        char *asked0 = fx_fmt("max.message.bytes of topic \"%s\"", topics[0]);
        int n = NTOPICS;
        bool again = false;
        for (int k = 0; k < 60 && !again; k++) {
                insert(&fc, 0, ++n);
                again = fx_wait_log_n(r, asked0, 2, 1000);
        }
        free(asked0);
        ok(again, "asked again within a minute of the timeout, not after 5 minutes");
        ok(fx_log_count(r, "asking again in 20 s") == 1, "the second pause is 20 s");
        int64_t first = h_kafka_wait_count(topics[0], n - NTOPICS + 1, 60000);
        is_int(first, n - NTOPICS + 1, "the first topic holds every event sent to it");
        if (!again || got != NTOPICS)
                h_relay_diag_log(r);

        fx_stop_relay(r, "SIGTERM: exit 0");
        h_relay_free(r);
        for (int i = 0; i < NTOPICS; i++)
                free(topics[i]);
        fx_case_close(&fc, NULL);
        return done_testing();
}
