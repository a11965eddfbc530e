/*
 * 0250-connect-lc-messages.c - a server whose messages are not in English
 * refuses the relay's connection: the relay tells a refusal that no retry
 * can cure from a server that is away by the error's SQLSTATE, not by the
 * message text.
 *
 * A PostgreSQL of the test's own (port offset 23) runs with lc_messages =
 * de_DE.UTF-8 (h_cluster_up_german(), as 0149: the locale compiled by
 * localedef, Debian's PostgreSQL 15 has postgres-15.mo for de). Authentication and the checks of the
 * database and the walsender's role run before a startup packet's options
 * apply, so these messages are in postgresql.conf's language whatever the
 * client asks. pg_hba.conf: scram-sha-256 for one role, trust for the
 * others, no line for one. Each case is one relay start that must stop
 * with exit 3 (setup) and a message with the server's German words and
 * the fix; before, it matched English text ("password authentication
 * failed", "does not exist", "must be superuser or replication role", "no
 * pg_hba.conf entry"), so in German each was taken for a server away and
 * retried forever (exit 1 only with a stop):
 *   - a wrong password (28P01);
 *   - a database that does not exist (3D000);
 *   - a role without REPLICATION (42501);
 *   - no pg_hba.conf entry (28000).
 * The messages keep the default verbosity's form: no SQLSTATE, no LOCATION
 * line. Then, the server stopped: no SQLSTATE, still retried, and a stop
 * during the retries ends the relay with exit 0.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"

#define OFFSET 23
#define EXIT_BOUND_MS 60000

static h_cluster_t *g_cl;

/* One relay start with conninfo ci + extra: exit 3 and a log that has every
 * needle and neither the verbose form's SQLSTATE nor its LOCATION line. */
static void refused(const char *what, const char *extra, const char *const *needles,
                    const char *code)
{
        char set_conn[400], set_kafka[256];
        snprintf(set_conn, sizeof(set_conn),
                 "postgres.conninfo=host=127.0.0.1 port=%d connect_timeout=10 %s",
                 h_cluster_port(g_cl), extra);
        snprintf(set_kafka, sizeof(set_kafka), "kafka.bootstrap.servers=%s", h_kafka_bootstrap());
        const char *sets[] = {set_conn, set_kafka, "slot.name=lcc_slot", NULL};
        fx_check_refused(h_relay_start(sets), what, needles, code, EXIT_BOUND_MS);
}

int main(void)
{
        /* Logical replication connections match the database name ("all"). */
        g_cl = h_cluster_up_german(OFFSET,
                                   "local all all trust\n"
                                   "host all postgres 127.0.0.1/32 trust\n"
                                   "host all lcc_pw 127.0.0.1/32 scram-sha-256\n"
                                   "host all lcc_norepl 127.0.0.1/32 trust\n",
                                   "-c wal_level=logical");
        PGconn *c = h_cluster_connect(g_cl);
        h_pg_exec(c, "CREATE ROLE lcc_pw LOGIN REPLICATION PASSWORD 'right-password'");
        h_pg_exec(c, "CREATE ROLE lcc_norepl LOGIN NOREPLICATION");
        h_pg_exec(c, "CREATE ROLE lcc_nohba LOGIN REPLICATION");

        const char *n_pw[] = {"Passwort-Authentifizierung", "lcc_pw", "check the role's password",
                              NULL};
        refused("a wrong password", "dbname=postgres user=lcc_pw password=wrong-password", n_pw,
                "28P01");
        const char *n_db[] = {"lcc_nodb", "existiert nicht", NULL};
        refused("no such database", "dbname=lcc_nodb user=postgres", n_db, "3D000");
        const char *n_repl[] = {"lcc_norepl", "ALTER ROLE \"lcc_norepl\" REPLICATION", "Replikation",
                                NULL};
        refused("a role without REPLICATION", "dbname=postgres user=lcc_norepl", n_repl, "42501");
        const char *n_hba[] = {"pg_hba.conf", "lcc_nohba", NULL};
        refused("no pg_hba.conf entry", "dbname=postgres user=lcc_nohba", n_hba, "28000");

        /* A server away says no SQLSTATE: retried, and a stop in the
         * retries is a clean one. */
        PQfinish(c);
        int port = h_cluster_port(g_cl);
        h_cluster_free(g_cl);
        char set_conn[300], set_kafka[256];
        snprintf(set_conn, sizeof(set_conn),
                 "postgres.conninfo=host=127.0.0.1 port=%d dbname=postgres user=postgres", port);
        snprintf(set_kafka, sizeof(set_kafka), "kafka.bootstrap.servers=%s", h_kafka_bootstrap());
        const char *sets[] = {set_conn, set_kafka, "slot.name=lcc_slot", NULL};
        h_relay_t *r = h_relay_start(sets);
        ok(h_relay_wait_log(r, "retrying in", EXIT_BOUND_MS), "the server stopped: retried");
        is_int(h_relay_stop(r, EXIT_BOUND_MS), 0, "the server stopped: a stop ends it, exit 0");
        h_relay_free(r);

        return done_testing();
}
