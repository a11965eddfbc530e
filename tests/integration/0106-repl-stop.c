/*
 * 0106-repl-stop.c - relay_repl_stop() ends the stream within its timeout.
 *
 * The replication client alone, against the test PostgreSQL (no relay
 * process, no Kafka): connect with settings loaded from a configuration,
 * create the publication and slot, START_REPLICATION, then
 * (a) a server that answers: stop returns 0, the connection stays open and
 *     the slot is released (the walsender is out of streaming mode);
 * (b) the walsender frozen with SIGSTOP: stop gives up after its timeout
 *     with RELAY_EIO and a message saying so, instead of waiting for an
 *     answer that cannot come (before, it ignored the timeout and blocked:
 *     this test then hangs until meson's timeout fails it). The walsender is
 *     continued afterwards, at exit too, and the slot is released once the
 *     connection is closed.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"
#include "relay/config.h"
#include "relay/repl.h"
#include "relay/settings.h"

static relay_settings_t *settings_for(const char *db, const char *slot)
{
        relay_config_t *cfg = NULL;
        relay_settings_t *set = NULL;
        char err[RELAY_ERRBUF];
        char *ci = h_pg_conninfo(db);

        if (relay_config_new(&cfg) != 0 ||
            relay_config_set(cfg, "postgres.conninfo", ci, "test", err, sizeof(err)) != 0 ||
            relay_config_set(cfg, "slot.name", slot, "test", err, sizeof(err)) != 0 ||
            relay_settings_load(&set, cfg, err, sizeof(err)) != 0)
                tap_bail("settings: %s", err);
        relay_config_free(cfg);
        free(ci);
        return set;
}

/* Connected, publication and slot in place, streaming from the slot. */
static relay_repl_t *streaming(const relay_settings_t *set, const char *what)
{
        relay_repl_t *r = NULL;
        relay_slot_outcome_t outcome;
        char err[RELAY_ERRBUF];
        bool created;

        if (relay_repl_connect(&r, set, NULL, err, sizeof(err)) != 0 ||
            relay_repl_ensure_publication(r, &created, err, sizeof(err)) != 0 ||
            relay_repl_ensure_slot(r, true, false, false, &outcome, err, sizeof(err)) != 0 ||
            relay_repl_start(r, 0, err, sizeof(err)) != 0)
                tap_bail("%s: %s", what, err);
        return r;
}

/* The pid of the walsender holding slot, waiting up to 30 s; 0 when none. */
static long active_pid(PGconn *c, const char *slot, bool want_active)
{
        int64_t deadline = h_now_ms() + 30000;
        long pid = 0;

        for (;;) {
                char *v = h_pg_value(c,
                                     "SELECT coalesce(active_pid, 0) FROM pg_replication_slots "
                                     "WHERE slot_name = '%s'",
                                     slot);
                pid = v ? atol(v) : 0;
                free(v);
                if ((pid != 0) == want_active || h_now_ms() >= deadline)
                        return pid;
                h_sleep_ms(50);
        }
}

int main(void)
{
        char *db = h_pg_create_db("replstop");
        char *slot = h_unique_name("slot_rs");
        PGconn *c = h_pg_connect(db);
        relay_settings_t *set;
        relay_repl_t *r;
        char err[RELAY_ERRBUF];
        long pid;
        int rc;

        h_pg_create_outbox(c, "outbox");
        set = settings_for(db, slot);

        /* --- (a) the server answers ------------------------------------------------ */
        r = streaming(set, "(a) start streaming");
        ok(active_pid(c, slot, true) != 0, "(a) the slot is active while streaming");
        err[0] = '\0';
        rc = relay_repl_stop(r, 5000, NULL, err, sizeof(err));
        is_int(rc, 0, "(a) relay_repl_stop returns 0");
        if (rc != 0)
                tap_diag("(a) %s", err);
        is_int(active_pid(c, slot, false), 0,
               "(a) the slot is released while the connection stays open");
        relay_repl_free(r);

        /* --- (b) the walsender does not answer ---------------------------------- */
        r = streaming(set, "(b) start streaming");
        pid = active_pid(c, slot, true);
        if (pid <= 0)
                tap_bail("(b) no walsender holds slot %s", slot);
        fx_restore_add("kill -CONT %ld", pid);
        if (kill((pid_t)pid, SIGSTOP) != 0)
                tap_bail("(b) could not stop walsender %ld: %s", pid, strerror(errno));
        err[0] = '\0';
        rc = relay_repl_stop(r, 1000, NULL, err, sizeof(err));
        kill((pid_t)pid, SIGCONT);
        is_int(rc, RELAY_EIO, "(b) relay_repl_stop gives up with RELAY_EIO");
        ok(strstr(err, "did not confirm the end within 1000 ms") != NULL,
           "(b) and says the server did not answer in time: %s", err);
        relay_repl_free(r);
        is_int(active_pid(c, slot, false), 0,
               "(b) the slot is released once the connection is closed");

        h_pg_exec(c, "SELECT pg_drop_replication_slot('%s')", slot);
        h_pg_exec(c, "DROP PUBLICATION IF EXISTS outbox_pub");
        PQfinish(c);
        h_pg_drop_db(db);
        relay_settings_free(set);
        free(slot);
        free(db);
        return done_testing();
}
