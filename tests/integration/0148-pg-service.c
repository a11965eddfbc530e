/*
 * 0148-pg-service.c - server options given in a connection service file
 * (pg_service.conf, PGSERVICEFILE) reach the server.
 *
 * The relay connects with an "options" parameter of its own (date, time
 * zone, float and bytea formats) after the user's. It used to find the
 * user's in the conninfo or PGOPTIONS only: a service's options= were
 * dropped, since libpq applies a service only to a connection and the
 * relay's explicit "options" then replaced them.
 *
 * 1. A service file whose service names the test database and has
 *    options=-c wal_sender_timeout=20s; postgres.conninfo = service=...,
 *    status.interval.ms=40000: the walsender's wal_sender_timeout, as the
 *    server answers SHOW on the replication connection, is 20 s, so the
 *    relay lowers the interval to half of it, 10000 (with the option
 *    dropped the server's 60 s default lowered it to 30000).
 * 2. The same service, the service named by PGSERVICE instead of the
 *    conninfo (postgres.conninfo = dbname=<db>): the same.
 * 3. A service the file does not have (service= in the conninfo, then
 *    PGSERVICE): libpq cannot resolve the parameters, which no retry
 *    changes. The relay used to retry forever ("could not connect to
 *    PostgreSQL: definition of service ... not found; retrying in ...");
 *    now exit 3, the message naming what to check.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"

/* A relay of the case's slot with conninfo and one more setting (sets,
 * the caller's to free). */
static h_relay_t *relay_with(fx_case_t *fc, fx_sets_t *sets, const char *conninfo,
                             const char *more)
{
        memset(sets, 0, sizeof(*sets));
        fx_sets_add(sets, "postgres.conninfo=%s", conninfo);
        fx_sets_add(sets, "kafka.bootstrap.servers=%s", h_kafka_bootstrap());
        fx_sets_add(sets, "slot.name=%s", fc->slot);
        fx_sets_add(sets, "%s", more);
        return h_relay_start(sets->v);
}

/* Start a relay with conninfo and status.interval.ms=40000; one test point
 * for the interval it lowered to; stopped with SIGTERM. */
static void check_lowered(fx_case_t *fc, const char *conninfo, const char *what)
{
        fx_sets_t sets;
        h_relay_t *r = relay_with(fc, &sets, conninfo, "status.interval.ms=40000");
        if (!ok(h_relay_wait_log(r, "streaming from replication slot", 60000), "%s: streams", what))
                h_relay_diag_log(r);
        if (!ok(h_relay_wait_log(r, "lowered from 40000 to 10000", 0),
                "%s: the server's wal_sender_timeout is the service's 20 s (interval lowered "
                "from 40000 to 10000)",
                what))
                h_relay_diag_log(r);
        h_relay_signal(r, SIGTERM);
        is_int(h_relay_wait(r, 60000), 0, "%s: SIGTERM, exit 0", what);
        h_relay_free(r);
        fx_sets_free(&sets);
}

/* A relay with conninfo whose service is missing: exit 3 (setup), and the
 * message says what to check; one that keeps retrying is stopped. */
static void check_missing(fx_case_t *fc, const char *conninfo, const char *what)
{
        fx_sets_t sets;
        h_relay_t *r = relay_with(fc, &sets, conninfo, "http.listen=off");
        int rc = h_relay_wait(r, 30000);
        if (!ok(rc == 3, "%s: a missing service is a setup error, exit 3 (got %d%s)", what, rc,
                rc == -1 ? ": still running after 30 s" : ""))
                h_relay_diag_log(r);
        if (!ok(h_relay_wait_log(r, "check postgres.conninfo, PGSERVICE and the service file", 0),
                "%s: the message names what to check", what))
                h_relay_diag_log(r);
        if (rc == -1)
                h_relay_stop(r, 30000);
        h_relay_free(r);
        fx_sets_free(&sets);
}

int main(void)
{
        fx_case_t fc;
        fx_case_open(&fc, "pgservice", "svc");
        h_pg_create_outbox(fc.c, "outbox");

        char *file = fx_fmt("%s/pg_service_%s.conf", h_env("RELAY_TEST_ENV_DIR"), fc.suffix);
        h_write_file(file,
                "# 0148-pg-service\n[relay_%s]\nhost=%s\nport=%s\nuser=%s\ndbname=%s\n"
                "options=-c wal_sender_timeout=20s\n",
                fc.suffix, h_env("RELAY_TEST_PGHOST"), h_env("RELAY_TEST_PGPORT"),
                h_env("RELAY_TEST_PGUSER"), fc.db);
        setenv("PGSERVICEFILE", file, 1); /* the relays inherit it */

        char *svc = fx_fmt("service=relay_%s", fc.suffix);
        check_lowered(&fc, svc, "service= in postgres.conninfo");

        char *svcname = fx_fmt("relay_%s", fc.suffix);
        setenv("PGSERVICE", svcname, 1);
        char *dbonly = fx_fmt("dbname=%s", fc.db);
        check_lowered(&fc, dbonly, "PGSERVICE");

        char *missing = fx_fmt("relay_%s_missing", fc.suffix);
        char *svcmissing = fx_fmt("service=%s", missing);
        check_missing(&fc, svcmissing, "service= naming a missing service");
        setenv("PGSERVICE", missing, 1);
        check_missing(&fc, dbonly, "PGSERVICE naming a missing service");
        unsetenv("PGSERVICE");
        free(svcmissing);
        free(missing);
        unsetenv("PGSERVICEFILE");

        unlink(file);
        free(dbonly);
        free(svcname);
        free(svc);
        free(file);
        fx_case_close(&fc, NULL);
        return done_testing();
}
