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
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"

/* Start a relay with conninfo and status.interval.ms=40000; one test point
 * for the interval it lowered to; stopped with SIGTERM. */
static void check_lowered(fx_case_t *fc, const char *conninfo, const char *what)
{
        fx_sets_t sets;
        memset(&sets, 0, sizeof(sets));
        fx_sets_add(&sets, "postgres.conninfo=%s", conninfo);
        fx_sets_add(&sets, "kafka.bootstrap.servers=%s", h_kafka_bootstrap());
        fx_sets_add(&sets, "slot.name=%s", fc->slot);
        fx_sets_add(&sets, "%s", "status.interval.ms=40000");
        h_relay_t *r = h_relay_start(sets.v);
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
        unsetenv("PGSERVICE");
        unsetenv("PGSERVICEFILE");

        unlink(file);
        free(dbonly);
        free(svcname);
        free(svc);
        free(file);
        fx_case_close(&fc, NULL);
        return done_testing();
}
