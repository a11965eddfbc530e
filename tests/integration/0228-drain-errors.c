/*
 * 0228-drain-errors.c - what fails in the final drain is said once and is
 * no clean stop (relay.c's stop rules; 0147 for a delivery refused in the
 * drain after SIGTERM).
 *
 * On librdkafka's mock cluster with kafka.linger.ms=8000, so that an event
 * the relay read waits in the producer, and the drain with it, long enough
 * for the fault to land inside the drain:
 *
 * 1. SIGTERM, the relay drains (its /metrics says "stopping"), and its
 *    walsender is terminated (pg_terminate_backend): the final status
 *    update cannot be confirmed. The relay used to log a warning, then
 *    "confirmed up to ..." and exit 0. Now: exit 1, one FATAL line saying
 *    what Kafka acknowledged may not be confirmed and that the events are
 *    sent again on the next start; no "confirmed up to" line; the slot
 *    still holds the event, and the next relay reads it again (sent
 *    again) and, stopped with nothing failing, exits 0 past it.
 * 2. errors.policy = stop: an event lingers, the next one cannot be mapped
 *    (NULL aggregate id): exit 4; in the drain that follows the lingering
 *    event is refused for good (INVALID_RECORD). The refusal used to go
 *    unsaid after the exit-4 message. Now it is logged, once, after it,
 *    saying that the next start sends the event again (not "resuming from
 *    the slot", which no session does after a drain).
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
#define HTTP_OFFSET 30

static rd_kafka_mock_cluster_t *g_mock;

int main(void)
{
        fx_case_t fc;
        int port = fx_mock_linger_case(&fc, "drainerr", "de", 8000, HTTP_OFFSET, &g_mock);
        fx_sets_add(&fc.sets, "%s", "errors.policy=stop");

        /* --- 1. PostgreSQL lost in the drain ---------------------------- */
        char *id, *lsn_event;
        h_relay_t *r = fx_relay_reads_event(&fc, port, "'agg-1'", &id, &lsn_event);
        h_relay_signal(r, SIGTERM);
        if (!ok(h_metrics_wait(port, "outbox_relay_state{state=\"stopping\"}", 1, 30000),
                "SIGTERM: the relay drains (state stopping)"))
                h_relay_diag_log(r);
        char *killed = h_pg_value(fc.c,
                                  "SELECT pg_terminate_backend(active_pid) FROM "
                                  "pg_replication_slots WHERE slot_name = '%s'",
                                  fc.slot);
        ok(killed && strcmp(killed, "t") == 0, "its walsender is terminated while it drains");
        int rc = h_relay_wait(r, 60000);
        if (!ok(rc == 1, "PostgreSQL lost in the drain: exit 1, not a clean stop (got %d)", rc))
                h_relay_diag_log(r);
        const char *says = "could not confirm what Kafka acknowledged to replication slot";
        bool said = fx_log_count(r, says) == 1 && fx_log_count(r, "FATAL") == 1 &&
                    h_relay_wait_log(r, "while stopping; the events after its confirmed_flush_lsn "
                                        "are sent again on the next start", 0);
        if (!ok(said, "said once, as the FATAL error, naming what happens next"))
                h_relay_diag_log(r);
        ok(!h_relay_wait_log(r, "confirmed up to", 0), "no \"confirmed up to\" line");
        h_relay_free(r);
        fx_check_held(&fc, id, lsn_event);
        fx_check_resent(&fc, port, lsn_event);

        /* --- 2. a drain failure after an unmappable event ---------------- */
        h_pg_exec(fc.c, "ALTER TABLE outbox ALTER COLUMN aggregateid DROP NOT NULL");
        char *id2, *lsn2;
        r = fx_relay_reads_event(&fc, port, "'agg-2'", &id2, &lsn2);
        /* Refused for good: librdkafka does not retry it. */
        rd_kafka_mock_push_request_errors(g_mock, PRODUCE_API, 1, RD_KAFKA_RESP_ERR_INVALID_RECORD);
        char *id3 = fx_insert_event(&fc, "NULL", NULL);
        rc = h_relay_wait(r, 60000);
        if (!ok(rc == 4, "an event that cannot be mapped: exit 4 (got %d)", rc))
                h_relay_diag_log(r);
        ok(h_relay_wait_log(r, "NULL aggregate id", 0), "the unmappable event is named");
        if (!ok(fx_log_count(r, "rejected event") == 1,
                "the refusal in the drain that followed is logged, once"))
                h_relay_diag_log(r);
        ok(h_relay_wait_log(r, "the relay stops: the next start sends it again", 0) &&
                   !h_relay_wait_log(r, "resuming from the slot", 0),
           "saying what happens to the event: no session resumes, the next start sends it");
        h_relay_free(r);
        /* And it does: the refused event is not confirmed. */
        fx_check_held(&fc, id2, lsn2);

        free(id3);
        free(lsn2);
        free(id2);
        free(killed);
        free(lsn_event);
        free(id);
        fx_case_close(&fc, NULL);
        return done_testing();
}
