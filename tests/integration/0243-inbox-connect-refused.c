/*
 * 0243-inbox-connect-refused.c - outbox-inbox tells a PostgreSQL refusal
 * that no retry can cure from a server that is away, by the error's
 * SQLSTATE, in any lc_messages language (as the relay does, 0250: both
 * use src/pgconn.c).
 *
 * A PostgreSQL of the test's own (port offset 24) with lc_messages =
 * de_DE.UTF-8 (h_cluster_up_german()); pg_hba.conf: scram-sha-256 for one
 * role, trust for the others, no line for one. Each case is one start of
 * outbox-inbox that must stop with exit 3 (setup; the inbox's status for a
 * setup no retry can fix), saying the server's German words and the fix,
 * without the verbose form's SQLSTATE or LOCATION line. Before, it retried
 * every failed connection for ever ("retrying in N ms"), whatever the
 * cause and the language:
 *   - a wrong password (28P01);
 *   - a database that does not exist (3D000);
 *   - a database whose CONNECT privilege the role lacks (42501);
 *   - no pg_hba.conf entry (28000).
 * Then, the server stopped: no SQLSTATE, still retried, and a stop during
 * the retries ends it with exit 0.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"

#define OFFSET 24
#define EXIT_BOUND_MS 60000

static h_cluster_t *g_cl;

static h_relay_t *inbox_start(const char *conninfo)
{
        fx_sets_t s;
        memset(&s, 0, sizeof(s));
        fx_sets_add(&s, "postgres.conninfo=%s", conninfo);
        fx_sets_add(&s, "kafka.bootstrap.servers=%s", h_kafka_bootstrap());
        fx_sets_add(&s, "inbox.topics=inbox.refused");
        fx_sets_add(&s, "inbox.handler=SELECT 1");
        fx_sets_add(&s, "kafka.group.id=inbox-refused");
        h_relay_t *ib = h_proc_start(h_env("RELAY_INBOX_BIN"), NULL, NULL, s.v);
        fx_sets_free(&s);
        return ib;
}

/* One start with conninfo extra: exit 3 and a log that has every needle
 * and neither the SQLSTATE code nor a LOCATION line. */
static void refused(const char *what, const char *extra, const char *const *needles,
                    const char *code)
{
        char ci[400];
        snprintf(ci, sizeof(ci), "host=127.0.0.1 port=%d connect_timeout=10 %s",
                 h_cluster_port(g_cl), extra);
        fx_check_refused(inbox_start(ci), what, needles, code, EXIT_BOUND_MS);
}

int main(void)
{
        g_cl = h_cluster_up_german(OFFSET,
                                   "local all all trust\n"
                                   "host all postgres 127.0.0.1/32 trust\n"
                                   "host all ibr_pw 127.0.0.1/32 scram-sha-256\n"
                                   "host all ibr_noconn 127.0.0.1/32 trust\n",
                                   NULL);
        PGconn *c = h_cluster_connect(g_cl);
        h_pg_exec(c, "CREATE ROLE ibr_pw LOGIN PASSWORD 'right-password'");
        h_pg_exec(c, "CREATE ROLE ibr_noconn LOGIN");
        h_pg_exec(c, "CREATE ROLE ibr_nohba LOGIN");
        h_pg_exec(c, "CREATE DATABASE ibr_closed");
        h_pg_exec(c, "REVOKE CONNECT ON DATABASE ibr_closed FROM PUBLIC");

        const char *n_pw[] = {"Passwort-Authentifizierung", "ibr_pw", "check the role's password",
                              NULL};
        refused("a wrong password", "dbname=postgres user=ibr_pw password=wrong-password", n_pw,
                "28P01");
        const char *n_db[] = {"ibr_nodb", "existiert nicht", NULL};
        refused("no such database", "dbname=ibr_nodb user=postgres", n_db, "3D000");
        const char *n_conn[] = {"ibr_closed", "grant the role CONNECT on the database", NULL};
        refused("no CONNECT on the database", "dbname=ibr_closed user=ibr_noconn", n_conn,
                "42501");
        const char *n_hba[] = {"pg_hba.conf", "ibr_nohba", NULL};
        refused("no pg_hba.conf entry", "dbname=postgres user=ibr_nohba", n_hba, "28000");

        /* A server away says no SQLSTATE: retried, and a stop in the
         * retries is a clean one. */
        PQfinish(c);
        int port = h_cluster_port(g_cl);
        h_cluster_free(g_cl);
        char ci[256];
        snprintf(ci, sizeof(ci), "host=127.0.0.1 port=%d dbname=postgres user=postgres", port);
        h_relay_t *ib = inbox_start(ci);
        ok(h_relay_wait_log(ib, "retrying in", EXIT_BOUND_MS), "the server stopped: retried");
        is_int(h_relay_stop(ib, EXIT_BOUND_MS), 0, "the server stopped: a stop ends it, exit 0");
        h_relay_free(ib);

        return done_testing();
}
