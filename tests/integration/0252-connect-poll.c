/*
 * 0252-connect-poll.c - relay_repl_connect() drives the connection itself
 * (PQconnectStartParams(), PQconnectPoll()), to get the SQLSTATE of a
 * refusal (0250); it must keep what PQconnectdbParams() did.
 *
 * A port that listens and never answers (the test's own socket, never
 * accepted from: the kernel completes the TCP handshake, nothing replies):
 *   - first of two hosts (named localhost: its addresses are looked up
 *     again) with connect_timeout=2: connected through the second, after
 *     one connection to the first (only libpq can give up
 *     on a host for the next: a connection to the hosts after it takes
 *     over; it was PQreset(), libpq's own connect from the first host
 *     again, a second connection to the silent one);
 *   - two silent hosts: RELAY_EIO, each said to have timed out, one
 *     connection to each;
 *   - alone: RELAY_EIO (retried), libpq's "timeout expired";
 *   - alone without connect_timeout, the stop flag set (by SIGALRM) during
 *     the connect: RELAY_ESTOPPED, "stopped while connecting" (0256 has
 *     the same for the programs, against the code before).
 * And once connected, the session's messages have the default verbosity
 * again: a server error (START_REPLICATION of a slot that does not exist)
 * says neither its SQLSTATE nor a LOCATION line.
 * (Against the code before: all pass, as libpq did all of it.)
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "faults/faults.h"
#include "harness.h"
#include "relay/config.h"
#include "relay/repl.h"
#include "relay/settings.h"

static relay_settings_t *settings_for(const char *conninfo, const char *slot)
{
        relay_config_t *cfg = NULL;
        relay_settings_t *set = NULL;
        char err[RELAY_ERRBUF];

        if (relay_config_new(&cfg) != 0 ||
            relay_config_set(cfg, "postgres.conninfo", conninfo, "test", err, sizeof(err)) != 0 ||
            relay_config_set(cfg, "slot.name", slot, "test", err, sizeof(err)) != 0 ||
            relay_settings_load(&set, cfg, err, sizeof(err)) != 0)
                tap_bail("settings: %s", err);
        relay_config_free(cfg);
        return set;
}

static volatile sig_atomic_t stop;

static void on_alarm(int sig)
{
        stop = sig;
}

int main(void)
{
        int silent_port;
        int silent = h_silent_listener(&silent_port);
        char *slot = h_unique_name("cpoll");
        char ci[512];
        char err[RELAY_ERRBUF];
        relay_repl_t *r = NULL;

        snprintf(ci, sizeof(ci),
                 "host=localhost,%s port=%d,%s user=%s dbname=postgres connect_timeout=2",
                 h_env("RELAY_TEST_PGHOST"), silent_port, h_env("RELAY_TEST_PGPORT"),
                 h_env("RELAY_TEST_PGUSER"));
        relay_settings_t *set = settings_for(ci, slot);
        int rc = relay_repl_connect(&r, set, NULL, err, sizeof(err));
        if (!ok(rc == 0, "first host silent, connect_timeout=2: connected through the second"))
                tap_diag("rc %d: %s", rc, err);
        if (rc == 0) {
                ok(relay_repl_server_version(r) >= 140000, "and it is a PostgreSQL 14+");
                err[0] = '\0';
                rc = relay_repl_start(r, 0, err, sizeof(err));
                ok(rc != 0 && strstr(err, slot), "START_REPLICATION of a missing slot fails: %s",
                   err);
                ok(!strstr(err, "LOCATION:") && !strstr(err, "42704"),
                   "its message has the default verbosity (no SQLSTATE, no LOCATION)");
        }
        relay_repl_free(r);
        relay_settings_free(set);
        is_int(h_silent_connections(silent), 1,
               "one connection to the silent host: its timeout went on to the second host");

        /* Two silent hosts: each timed out once, both said. */
        int port2;
        int silent2 = h_silent_listener(&port2);
        snprintf(ci, sizeof(ci),
                 "host=127.0.0.1,127.0.0.1 port=%d,%d user=%s dbname=postgres connect_timeout=2",
                 silent_port, port2, h_env("RELAY_TEST_PGUSER"));
        set = settings_for(ci, slot);
        r = NULL;
        rc = relay_repl_connect(&r, set, NULL, err, sizeof(err));
        ok(rc == RELAY_EIO, "two silent hosts: RELAY_EIO, retried (got %d)", rc);
        char p1[64], p2[64];
        snprintf(p1, sizeof(p1), "port %d failed: timeout expired", silent_port);
        snprintf(p2, sizeof(p2), "port %d failed: timeout expired", port2);
        ok(strstr(err, p1) && strstr(err, p2), "libpq's timeout message for each: %s", err);
        relay_repl_free(r);
        relay_settings_free(set);
        is_int(h_silent_connections(silent), 1, "one connection to the first");
        is_int(h_silent_connections(silent2), 1, "one connection to the second");
        close(silent2);

        snprintf(ci, sizeof(ci), "host=127.0.0.1 port=%d user=%s dbname=postgres connect_timeout=2",
                 silent_port, h_env("RELAY_TEST_PGUSER"));
        set = settings_for(ci, slot);
        r = NULL;
        rc = relay_repl_connect(&r, set, NULL, err, sizeof(err));
        ok(rc == RELAY_EIO, "a silent host alone: RELAY_EIO, retried (got %d)", rc);
        ok(strstr(err, "timeout expired") != NULL, "libpq's timeout message: %s", err);
        relay_repl_free(r);
        relay_settings_free(set);

        snprintf(ci, sizeof(ci), "host=127.0.0.1 port=%d user=%s dbname=postgres", silent_port,
                 h_env("RELAY_TEST_PGUSER"));
        set = settings_for(ci, slot);
        r = NULL;
        struct sigaction sa = {.sa_handler = on_alarm};
        sigaction(SIGALRM, &sa, NULL);
        alarm(1);
        rc = relay_repl_connect(&r, set, &stop, err, sizeof(err));
        is_int(rc, RELAY_ESTOPPED, "no connect_timeout, stopped during the connect: RELAY_ESTOPPED");
        ok(strstr(err, "stopped while connecting") != NULL, "saying so: %s", err);
        ok(r == NULL, "and no connection");
        relay_repl_free(r);
        relay_settings_free(set);

        close(silent);
        free(slot);
        return done_testing();
}
