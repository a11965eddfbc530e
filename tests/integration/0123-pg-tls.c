/*
 * 0123-pg-tls: the relay against a PostgreSQL that takes only TLS with
 * SCRAM-SHA-256 passwords, as production servers do.
 *
 * A throwaway cluster of the test's own: a CA and a server certificate
 * (subjectAltName IP:127.0.0.1) made here with openssl, ssl = on, host
 * connections by scram-sha-256 only, and a pg_hba.conf that refuses any
 * connection not made over TLS (hostssl). Then:
 *   - sslmode=verify-full against the test CA, the password from a passfile:
 *     the relay streams; Kafka holds every event; pg_stat_ssl shows the
 *     walsender's connection encrypted; the password is in no log line;
 *   - the same with the password from PGPASSWORD;
 *   - a CA that did not sign the server's certificate: exit 3, a message
 *     naming the certificate failure and sslrootcert;
 *   - a wrong password: exit 3, a message naming the password and where it
 *     comes from.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#define PASSWORD "s3cret-Pa55-for-tls-test"
#define EVENTS 20

static h_cluster_t *g_cl;
static char g_dir[256];
static char g_set_kafka[256];

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
        char cmd[4096];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(cmd, sizeof(cmd), fmt, ap);
        va_end(ap);
        fflush(stdout);
        int rc = system(cmd);
        if (rc != 0)
                tap_diag("command failed (%d): %s", rc, cmd);
        return rc;
}

/* A CA, a server certificate it signed for 127.0.0.1, and a second CA that
 * signed nothing here; the server's files readable by postgres only. */
static int make_certs(void)
{
        const char *d = g_dir;
        const char *q = "-days 2 -nodes -newkey rsa:2048 2>/dev/null";
        if (sh("cd %s && openssl req -x509 %s -keyout ca.key -out ca.crt -subj /CN=relay-test-ca", d, q) ||
            sh("cd %s && openssl req -x509 %s -keyout other.key -out other-ca.crt "
               "-subj /CN=another-ca", d, q) ||
            sh("cd %s && openssl req %s -keyout server.key -out server.csr -subj /CN=localhost", d, q) ||
            sh("cd %s && printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > san.ext && "
               "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
               "-out server.crt -days 2 -extfile san.ext 2>/dev/null", d) ||
            sh("cd %s && chmod 600 server.key && chmod 644 ca.crt other-ca.crt server.crt", d))
                return -1;
        if (geteuid() == 0 && sh("chown postgres:postgres %s/server.key %s/server.crt", d, d))
                return -1;
        return 0;
}

static char *conninfo(const char *rootcert, const char *extra)
{
        char buf[1024];
        snprintf(buf, sizeof(buf),
                 "host=127.0.0.1 port=%d user=postgres dbname=postgres sslmode=verify-full "
                 "sslrootcert=%s/%s %s",
                 h_cluster_port(g_cl), g_dir, rootcert, extra ? extra : "");
        return strdup(buf);
}

static int setup(void)
{
        char pwfile[300], opts[1024];
        snprintf(g_dir, sizeof(g_dir), "%s/tls", h_cluster_dir(g_cl));
        if (sh("mkdir -p %s && chmod 755 %s", g_dir, g_dir) || make_certs())
                return -1;
        snprintf(pwfile, sizeof(pwfile), "%s/data/pg_hba.conf", h_cluster_dir(g_cl));
        /* Only TLS with SCRAM from the network; the test's own socket stays trusted. */
        FILE *f = fopen(pwfile, "w");
        if (!f)
                return -1;
        fprintf(f, "local all all trust\n"
                   "hostssl all all 127.0.0.1/32 scram-sha-256\n"
                   "hostssl replication all 127.0.0.1/32 scram-sha-256\n");
        fclose(f);
        snprintf(opts, sizeof(opts),
                 "-c wal_level=logical -c ssl=on -c ssl_cert_file=%s/server.crt "
                 "-c ssl_key_file=%s/server.key -c password_encryption=scram-sha-256",
                 g_dir, g_dir);
        if (h_cluster_start(g_cl, opts))
                return -1;
        /* Over the socket (trusted): the password, the table, the publication. */
        char ci[512];
        snprintf(ci, sizeof(ci), "host=%s port=%d user=postgres dbname=postgres",
                 h_cluster_dir(g_cl), h_cluster_port(g_cl));
        PGconn *c = PQconnectdb(ci);
        if (PQstatus(c) != CONNECTION_OK) {
                tap_diag("socket connection: %s", PQerrorMessage(c));
                PQfinish(c);
                return -1;
        }
        h_pg_exec(c, "ALTER ROLE postgres PASSWORD '%s'", PASSWORD);
        h_pg_create_outbox(c, "outbox");
        PQfinish(c);
        /* A passfile as libpq wants it: mode 0600, the caller's own. */
        snprintf(pwfile, sizeof(pwfile), "%s/pgpass", g_dir);
        if (!(f = fopen(pwfile, "w")))
                return -1;
        fprintf(f, "127.0.0.1:%d:*:postgres:%s\n", h_cluster_port(g_cl), PASSWORD);
        fclose(f);
        chmod(pwfile, 0600);
        return 0;
}

static PGconn *tls_connect(void)
{
        char *ci = conninfo("ca.crt", "password=" PASSWORD);
        PGconn *c = PQconnectdb(ci);
        free(ci);
        if (PQstatus(c) != CONNECTION_OK)
                tap_bail("TLS connection to the test cluster: %s", PQerrorMessage(c));
        return c;
}

/* One relay over TLS: events in, events out, the connection encrypted. */
static void case_streams(const char *what, const char *extra_conninfo)
{
        char *slot = h_unique_name("tls");
        char *topic = h_unique_name("tls_topic");
        char *ci = conninfo("ca.crt", extra_conninfo);
        char set_conn[1200], set_slot[128], set_topic[256];
        snprintf(set_conn, sizeof(set_conn), "postgres.conninfo=%s", ci);
        snprintf(set_slot, sizeof(set_slot), "slot.name=%s", slot);
        snprintf(set_topic, sizeof(set_topic), "topic.template=%s", topic);
        const char *sets[] = {set_conn, g_set_kafka, set_slot, set_topic, NULL};
        h_relay_t *r = h_relay_start(sets);
        bool streaming = h_relay_wait_log(r, "streaming from replication slot", 30000);
        ok(streaming, "%s: the relay streams over TLS", what);

        PGconn *c = tls_connect();
        for (int i = 0; i < EVENTS; i++)
                h_pg_exec(c,
                          "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                          "VALUES (gen_random_uuid(), 'order', 'o%d', 'Placed', '{\"n\": %d}')",
                          i % 5, i);
        char *ssl = h_pg_value(c,
                               "SELECT coalesce(bool_and(s.ssl), false) FROM pg_stat_replication r "
                               "JOIN pg_stat_ssl s USING (pid) WHERE r.application_name = "
                               "'outbox-relay'");
        is_str(ssl, "t", "%s: the walsender's connection is encrypted (pg_stat_ssl)", what);
        free(ssl);
        char *lsn = h_pg_value(c, "SELECT pg_current_wal_lsn()");
        ok(h_pg_wait_confirmed(c, slot, lsn, 60000) >= 0, "%s: the slot is confirmed past the events",
           what);
        free(lsn);
        PQfinish(c);

        h_msg_t *m;
        size_t n = h_kafka_consume_all(topic, &m);
        size_t with_payload = 0;
        for (size_t i = 0; i < n; i++)
                with_payload += m[i].value && strstr(m[i].value, "\"n\"") != NULL;
        h_msgs_free(m, n);
        is_int((long)with_payload, EVENTS, "%s: Kafka holds the %d events", what, EVENTS);

        h_relay_signal(r, SIGTERM);
        is_int(h_relay_wait(r, 30000), 0, "%s: clean stop", what);
        char *log = h_relay_log(r);
        ok(!strstr(log, PASSWORD), "%s: the password is in no log line", what);
        if (!streaming || strstr(log, PASSWORD))
                h_relay_diag_log(r);
        free(log);
        h_relay_free(r);
        free(ci);
        free(topic);
        free(slot);
}

/* A relay that must not start: exit 3, a log naming every needle. */
static void case_refused(const char *what, const char *rootcert, const char *extra,
                         const char *secret, const char *const *needles)
{
        char *ci = conninfo(rootcert, extra);
        char set_conn[1200];
        snprintf(set_conn, sizeof(set_conn), "postgres.conninfo=%s", ci);
        const char *sets[] = {set_conn, g_set_kafka, "slot.name=never_created", NULL};
        h_relay_t *r = h_relay_start(sets);
        is_int(h_relay_wait(r, 30000), 3, "%s: exit 3 (setup), not a retry loop", what);
        char *log = h_relay_log(r);
        bool all = true;
        for (const char *const *n = needles; *n; n++)
                if (!strstr(log, *n)) {
                        all = false;
                        tap_diag("missing from the log: \"%s\"", *n);
                }
        ok(all, "%s: the message names the problem and the fix", what);
        ok(!strstr(log, secret), "%s: the password is in no log line", what);
        if (!all)
                h_relay_diag_log(r);
        free(log);
        h_relay_free(r);
        free(ci);
}

int main(void)
{
        snprintf(g_set_kafka, sizeof(g_set_kafka), "kafka.bootstrap.servers=%s", h_kafka_bootstrap());
        g_cl = h_cluster_init(11, "--auth-host=scram-sha-256");
        if (!g_cl || setup() != 0)
                tap_bail("could not set up the TLS cluster (see above)");

        char passfile[300];
        snprintf(passfile, sizeof(passfile), "passfile=%s/pgpass", g_dir);
        case_streams("passfile", passfile);

        setenv("PGPASSWORD", PASSWORD, 1);
        case_streams("PGPASSWORD", NULL);

        const char *cert_needles[] = {"certificate verify failed", "sslrootcert", NULL};
        case_refused("a CA that did not sign the server's certificate", "other-ca.crt", NULL,
                     PASSWORD, cert_needles);

        setenv("PGPASSWORD", "wrong-password", 1);
        const char *pw_needles[] = {"password authentication failed", "PGPASSWORD", NULL};
        case_refused("a wrong password", "ca.crt", NULL, "wrong-password", pw_needles);
        unsetenv("PGPASSWORD");
        case_refused("a wrong password in the conninfo", "ca.crt", "password=wrong-in-conninfo",
                     "wrong-in-conninfo", pw_needles);

        h_cluster_free(g_cl);
        return done_testing();
}
