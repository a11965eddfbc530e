/*
 * 0168-cancel-ignored.c - a stop while a start step waits on a server that
 * does not act on the cancel: the loop stays alive, and the stop ends.
 *
 * A start step that waits on the server (here the backfill's first FETCH,
 * held by a lock, as in 0161) runs with the session's tick; a stop cancels
 * it (PQcancel) and the wait goes on until the server ends the statement.
 * Before, the tick was not called again after the cancel: a server that
 * does not act on it (a backend stopped or stuck, a cancel lost on the way)
 * stopped the watchdog and /healthz said stalled, and the stop waited for
 * as long as the server did. The backend here is frozen with SIGSTOP (the
 * tests run as PostgreSQL's user, as 0106 does to a walsender), so the
 * cancel's SIGINT waits with it:
 *
 *   - the backfill waits, /healthz answers 200 (fx_waits_alive());
 *   - its backend frozen, SIGTERM: /healthz still 200 after 3 s
 *     (http.liveness.timeout.ms = 1000), and the relay ends with exit 0
 *     while the backend is still frozen (the wait gives the cancel 5 s);
 *   - no slot is left behind.
 *
 * Port: RELAY_TEST_HTTP_PORT + 71.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <errno.h>
#include <signal.h>
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
        h_relay_t *r = fx_backfill_held(&fc, "cancelign", "ci", 71, 4343, topic, sizeof(topic), &holder);

        char *v = h_pg_value(fc.c,
                             "SELECT pid FROM pg_stat_activity WHERE datname = '%s' AND "
                             "application_name = 'outbox-relay backfill'",
                             fc.db);
        long pid = v ? atol(v) : 0;
        free(v);
        if (pid <= 0)
                tap_bail("no backfill backend in %s", fc.db);
        fx_restore_add("kill -CONT %ld", pid);
        if (kill((pid_t)pid, SIGSTOP) != 0)
                tap_bail("could not stop backend %ld: %s", pid, strerror(errno));

        h_relay_signal(r, SIGTERM);
        fx_alive_after(h_http_port(71), 3000, "waiting for a cancel the frozen backend does not act on");
        int rc = h_relay_wait(r, 30000);
        if (!ok(rc == 0, "the relay ends with exit 0 while the backend is still frozen (got %d)",
                rc))
                h_relay_diag_log(r);
        kill((pid_t)pid, SIGCONT);
        if (rc == -1) { /* no second signal: that would exit 1 at once */
                rc = h_relay_wait(r, 60000);
                tap_diag("once the backend runs again, the relay ends: exit %d", rc);
        }
        h_relay_free(r);

        h_pg_exec(holder, "SELECT pg_advisory_unlock(4343)");
        PQfinish(holder);
        /* The slot is dropped by its walsender, which did not wait. */
        is_int(fx_slot_count(fc.c, fc.slot), 0, "no slot is left behind");
        fx_case_close(&fc, NULL);
        return done_testing();
}
