/*
 * 0173-two-phase-slot.c - slot.name names a slot created with two_phase
 * (pg_create_logical_replication_slot(..., two_phase => true), or a
 * subscription's with two_phase = true).
 *
 * The walsender decodes a prepared transaction at PREPARE TRANSACTION on
 * such a slot, whatever START_REPLICATION asks, and sends Begin Prepare,
 * which the relay does not read: it started, then stopped at the first
 * PREPARE TRANSACTION that touched the outbox ("unexpected pgoutput Begin
 * Prepare message"), and again at every restart.
 *
 * Before PostgreSQL 18: the relay refuses the slot at start (exit 3, one
 * error line naming two_phase and the fix) and outbox-relay check fails on
 * it. On 18: the relay turns two_phase off (ALTER_REPLICATION_SLOT) and
 * streams; with max_prepared_transactions > 0, an event written by a
 * prepared transaction reaches Kafka at COMMIT PREPARED and the relay goes
 * on.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define EXIT_BOUND_MS 60000

static int value_int(PGconn *c, const char *sql)
{
        char *v = h_pg_value(c, "%s", sql);
        int n = atoi(v);
        free(v);
        return n;
}

int main(void)
{
        h_case_t k;
        h_case_open(&k, "twophase", "slot_2pc", "twophase", 1, H_CASE_PUBLICATION);
        int version = value_int(k.c, "SHOW server_version_num");
        tap_diag("PostgreSQL %d", version);
        h_pg_exec(k.c, "SELECT pg_create_logical_replication_slot('%s', 'pgoutput', false, true)",
                  k.slot);
        const char *sets[] = {k.set_conn, k.set_kafka, k.set_slot, NULL};

        if (version < 180000) {
                h_relay_t *r = h_relay_start(sets);
                int rc = h_relay_wait(r, EXIT_BOUND_MS);
                char *log = h_relay_log(r);
                ok(rc == 3, "the relay refuses a two_phase slot: exit 3 (got %d)", rc);
                ok(strstr(log, "FATAL:  replication slot") && strstr(log, "two_phase") &&
                           strstr(log, "set slot.name"),
                   "the error names the slot's two_phase and the fix");
                if (rc != 3)
                        h_relay_diag_log(r);
                free(log);
                h_relay_free(r);

                char *out = NULL, *clog = NULL;
                rc = h_relay_run_cmd("check", NULL, sets, EXIT_BOUND_MS, &out, &clog);
                ok(rc != 0, "check fails (exit %d)", rc);
                ok(out && strstr(out, "postgres.slot.two_phase") && strstr(out, "two_phase"),
                   "check names the two_phase slot");
                if (!(out && strstr(out, "postgres.slot.two_phase")))
                        tap_diag("check said:\n%s", out ? out : "(nothing)");
                free(out);
                free(clog);
        } else {
                h_relay_t *r = h_relay_start(sets);
                if (h_relay_streams(r, 120000)) {
                        char *tp = h_pg_slot_column(k.c, k.slot, "two_phase");
                        is_str(tp, "f", "the relay turned the slot's two_phase off");
                        free(tp);
                        int64_t want = 1;
                        h_outbox_insert(k.c, k.aggtype, "plain");
                        if (value_int(k.c, "SHOW max_prepared_transactions") > 0) {
                                h_pg_exec(k.c,
                                          "BEGIN; INSERT INTO outbox (id, aggregatetype, "
                                          "aggregateid, type, payload) VALUES "
                                          "(gen_random_uuid(), '%s', 'prepared', 'T', '{}'); "
                                          "PREPARE TRANSACTION 'relay_0173'",
                                          k.aggtype);
                                h_pg_exec(k.c, "COMMIT PREPARED 'relay_0173'");
                                want = 2;
                        } else {
                                tap_diag("max_prepared_transactions = 0: no prepared transaction");
                        }
                        h_relayed_t w;
                        h_wait_relayed(k.c, k.slot, k.topic, want, 120000, &w);
                        is_int(w.in_kafka, want, "every event reached Kafka");
                        ok(w.confirmed, "the slot is confirmed past them");
                        h_relayed_free(&w);
                } else {
                        ok(false, "the relay streams from a slot made with two_phase");
                }
                is_int(h_relay_stop(r, 60000), 0, "the relay was still running and stops cleanly");
                h_relay_free(r);
        }
        h_case_close(&k);
        return done_testing();
}
