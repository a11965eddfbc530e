/*
 * 0147-stop-errors.c - an error after a stop was asked for is still an
 * error: the relay's exit status and log say so; only the stop itself ends
 * the relay with exit 0.
 *
 * On librdkafka's mock cluster (Produce errors on demand), with
 * kafka.linger.ms=4000 so that an event the relay read waits in the
 * producer long enough to be stopped with:
 *
 * 1. The relay reads an event (its /metrics shows it in flight), the next
 *    Produce request is refused for good (INVALID_RECORD), and SIGTERM
 *    arrives: the final flush fails. The relay used to exit 0 ("stopped")
 *    without a word of the refusal. Now: exit 1, the refusal logged as the
 *    fatal error; nothing confirmed past the event, which the slot still
 *    holds for the next start.
 * 2. A relay stopped with nothing failing (the same event delivered in the
 *    final flush): exit 0, the event in Kafka once.
 * 3. A second signal: the relay reads an event, the broker then answers
 *    30 s late (rd_kafka_mock_broker_set_rtt), SIGTERM: the relay says it
 *    is stopping and waits (still running); SIGTERM again: exit 1 at once,
 *    with a line saying that a second stop signal ended it. Before, the
 *    drain's start was not logged and the exit 1 came without a word (the
 *    log ended with whatever was logged last). Under log.format = json
 *    (this case's) the line is a JSON record at level fatal, like the
 *    others: it was a text line, the one line a JSON consumer could not
 *    parse. Nothing confirmed past the event; the next relay sends it and
 *    stops cleanly.
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

#define PRODUCE_API 0 /* ApiKey of Produce */
#define HTTP_OFFSET 7
#define LATE_MS 30000 /* case 3: the broker's answers come this late */

static rd_kafka_mock_cluster_t *g_mock;

int main(void)
{
        fx_case_t fc;
        int port = fx_mock_linger_case(&fc, "stoperr", "se", 4000, HTTP_OFFSET, &g_mock);

        /* --- 1. the final flush fails ---------------------------------- */
        char *id, *lsn_event;
        h_relay_t *r = fx_relay_reads_event(&fc, port, "'agg-1'", &id, &lsn_event);
        /* Refused for good: librdkafka does not retry it. */
        rd_kafka_mock_push_request_errors(g_mock, PRODUCE_API, 1, RD_KAFKA_RESP_ERR_INVALID_RECORD);
        h_relay_signal(r, SIGTERM);
        int rc = h_relay_wait(r, 60000);
        if (!ok(rc == 1, "SIGTERM, then the final flush fails: exit 1, not a clean stop (got %d)", rc))
                h_relay_diag_log(r);
        bool said = h_relay_wait_log(r, "FATAL", 0) && h_relay_wait_log(r, "rejected event", 0);
        if (!ok(said, "the refusal is logged as the fatal error"))
                h_relay_diag_log(r);
        h_relay_free(r);
        fx_check_held(&fc, id, lsn_event);

        /* --- 2. a clean stop ------------------------------------------- */
        fx_check_resent(&fc, port, lsn_event);
        free(lsn_event);
        free(id);

        /* --- 3. a second signal ---------------------------------------- */
        fx_sets_add(&fc.sets, "%s", "log.format=json");
        r = fx_relay_reads_event(&fc, port, "'agg-3'", &id, &lsn_event);
        /* While the event lingers in the producer (4 s), the broker starts
         * answering LATE_MS late, so the request that carries it is. */
        if (rd_kafka_mock_broker_set_rtt(g_mock, 1, LATE_MS))
                tap_bail("could not slow the mock broker down");
        h_relay_signal(r, SIGTERM);
        if (!ok(h_relay_wait_log(r, "SIGTERM received: stopping", 20000),
                "SIGTERM with an event in flight: the relay says it is stopping and waiting for "
                "Kafka"))
                h_relay_diag_log(r);
        int early = h_relay_wait(r, 0);
        if (!ok(early == -1, "it waits for Kafka's acknowledgement (still running; got %d)", early))
                h_relay_diag_log(r);
        h_relay_signal(r, SIGTERM);
        rc = h_relay_wait(r, 10000);
        if (!ok(rc == 1, "a second SIGTERM: exit 1 at once (got %d)", rc))
                h_relay_diag_log(r);
        if (!ok(h_relay_wait_log(r, "second stop signal: exiting at once with status 1", 0),
                "the log says that a second stop signal ended it"))
                h_relay_diag_log(r);
        /* Under log.format = json that line is a record like the others. */
        char *log = h_relay_log(r);
        char *second = log ? strstr(log, "second stop signal") : NULL;
        while (second && second > log && second[-1] != '\n')
                second--;
        if (!ok(second && strncmp(second, "{\"ts\":\"", 7) == 0 &&
                        strstr(second, "\"level\":\"fatal\"") != NULL &&
                        strstr(second, "status 1; what was not confirmed is sent again on the "
                                       "next start\"}\n") != NULL,
                "log.format = json: that line is a JSON record at level fatal"))
                h_relay_diag_log(r);
        free(log);
        h_relay_free(r);
        if (rd_kafka_mock_broker_set_rtt(g_mock, 1, 0))
                tap_bail("could not make the mock broker answer at once again");
        fx_check_held(&fc, id, lsn_event);
        fx_check_resent(&fc, port, lsn_event);
        free(lsn_event);
        free(id);
        fx_case_close(&fc, NULL);
        return done_testing();
}
