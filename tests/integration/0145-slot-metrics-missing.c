/*
 * 0145-slot-metrics-missing.c - README ("The side connection"): a server
 * that does not answer the slot monitor costs nothing but missing slot
 * metrics, and the warning says "slot metrics are missing until it works".
 * Missing, not stale: /metrics must stop showing the slot's wal_status and
 * safe_wal_size while the side connection fails (the last answer, say
 * "reserved", shown on for a slot that may since have been lost misleads
 * an alert on outbox_relay_slot_wal_status{wal_status="lost"}), and show
 * them again once it works.
 *
 * The side connection is made to fail for good while the replication
 * stream goes on: the database stops taking connections (ALLOW_CONNECTIONS
 * false, which binds superusers too; the walsender already connected stays)
 * and the monitor's backend is terminated, so each reconnection fails.
 *
 * The relay used to keep the last answer on /metrics. Then the side
 * connection works, and fails again: the relay says it works again, and
 * warns again (it used to warn once per process, so a later failure went
 * unsaid).
 *
 * Ports: RELAY_TEST_HTTP_PORT (default 19140) for the relay.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"

#define FAMILY "# TYPE outbox_relay_slot_wal_status "

/* Does /metrics show the slot's wal_status (want), within 30 s? */
static bool wait_family(int port, bool want)
{
        int64_t until = h_now_ms() + 30000;
        for (;;) {
                char *page = NULL;
                int st = h_http_request(port, "GET", "/metrics", 5000, &page);
                bool has = st == 200 && page && strstr(page, FAMILY);
                free(page);
                if (st == 200 && has == want)
                        return true;
                if (h_now_ms() > until)
                        return false;
                h_sleep_ms(200);
        }
}

int main(void)
{
        int port = h_http_port(6);
        fx_case_t fc;
        fx_case_open(&fc, "slotmetrics", "sm");
        h_pg_create_outbox(fc.c, "outbox");
        h_pg_exec_file(fc.c, "002_publication.sql");
        fx_sets_init(&fc.sets, fc.db, fc.slot, NULL);
        fx_sets_add(&fc.sets, "http.listen=127.0.0.1:%d", port);
        h_relay_t *r = fx_case_relay(&fc, "relay streams with http.listen on");

        ok(wait_family(port, true), "/metrics shows the slot's wal_status (side connection up)");

        /* From another database: PostgreSQL refuses it for the current one. */
        PGconn *admin = h_pg_connect("postgres");
        h_pg_exec(admin, "ALTER DATABASE %s ALLOW_CONNECTIONS false", fc.db);
        h_pg_exec(admin,
                  "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                  "WHERE application_name = 'outbox-relay metrics' AND datname = '%s'",
                  fc.db);
        ok(h_relay_wait_log(r, "slot metrics are missing until it works", 30000),
           "the relay warns that the side connection fails");
        bool gone = wait_family(port, false);
        ok(gone, "/metrics no longer shows the slot's wal_status: missing, not stale");

        h_pg_exec(admin, "ALTER DATABASE %s ALLOW_CONNECTIONS true", fc.db);
        ok(wait_family(port, true), "shown again once the side connection works");
        if (!gone)
                h_relay_diag_log(r);
        ok(h_relay_wait_log(r, "slot metrics are back", 30000),
           "the relay says the side connection works again");

        /* A second failure is warned about as the first was: it used to go
         * unsaid, the warning given once per process. */
        h_pg_exec(admin, "ALTER DATABASE %s ALLOW_CONNECTIONS false", fc.db);
        h_pg_exec(admin,
                  "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                  "WHERE application_name = 'outbox-relay metrics' AND datname = '%s'",
                  fc.db);
        ok(fx_wait_log_n(r, "slot metrics are missing until it works", 2, 30000),
           "the relay warns again when the side connection fails again");
        ok(wait_family(port, false), "/metrics no longer shows the slot's wal_status again");
        h_pg_exec(admin, "ALTER DATABASE %s ALLOW_CONNECTIONS true", fc.db);
        PQfinish(admin);

        fx_stop_relay(r, "SIGTERM: exit 0");
        h_relay_free(r);
        fx_case_close(&fc, NULL);
        return done_testing();
}
