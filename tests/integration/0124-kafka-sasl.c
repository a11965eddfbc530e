/*
 * 0124-kafka-sasl: the relay to a Kafka listener that takes only TLS with a
 * SASL login (tests/env/up's SASL_SSL listener: a CA of its own, PLAIN and
 * SCRAM-SHA-256 for one user).
 *
 *   - PLAIN over TLS, the CA from kafka.ssl.ca.location: the relay streams,
 *     Kafka holds every event, the password is in no log line;
 *   - a wrong password: exit 3 with the broker's refusal and the keys to fix;
 *   - a CA that did not sign the broker's certificate: exit 3 naming the
 *     certificate and kafka.ssl.ca.location;
 *   - SCRAM-SHA-256: with a librdkafka before 2.6.1 (Debian 12 ships 2.0.2)
 *     Kafka 4 refuses the login (librdkafka's client-final nonce; the same
 *     credentials log in from Kafka's Java client), so the relay must say so
 *     at start and exit 3 naming the way out; with 2.6.1 or later it streams.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "harness.h"

#define EVENTS 20

static char g_set_servers[256], g_set_ca[512], g_set_user[128], g_set_pw[256];
static char g_tmp[64];
static const char *g_password;

/* One relay over SASL_SSL that must stream every event. */
static void case_streams(const char *what, const char *mechanism)
{
        char *db = h_pg_create_db("sasl");
        PGconn *c = h_pg_connect(db);
        h_pg_create_outbox(c, "outbox");
        char *ci = h_pg_conninfo(db);
        char *topic = h_unique_name("sasl_topic");
        char *slot = h_unique_name("sasl");
        char set_conn[600], set_topic[256], set_mech[128], set_slot[128];
        snprintf(set_slot, sizeof(set_slot), "slot.name=%s", slot);
        snprintf(set_conn, sizeof(set_conn), "postgres.conninfo=%s", ci);
        snprintf(set_topic, sizeof(set_topic), "topic.template=%s", topic);
        snprintf(set_mech, sizeof(set_mech), "kafka.sasl.mechanisms=%s", mechanism);
        const char *sets[] = {set_conn,  g_set_servers, "kafka.security.protocol=SASL_SSL",
                              set_mech,  g_set_ca,      g_set_user,
                              g_set_pw,  set_topic,     set_slot,
                              NULL};
        h_relay_t *r = h_relay_start(sets);
        bool streaming = h_relay_wait_log(r, "streaming from replication slot", 30000);
        ok(streaming, "%s: the relay streams over SASL_SSL", what);
        for (int i = 0; i < EVENTS; i++)
                h_pg_exec(c,
                          "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                          "VALUES (gen_random_uuid(), 'order', 'o%d', 'Placed', '{\"n\": %d}')",
                          i % 5, i);
        char *lsn = h_pg_value(c, "SELECT pg_current_wal_lsn()");
        ok(h_pg_wait_confirmed(c, slot, lsn, 60000) >= 0,
           "%s: the slot is confirmed past the events", what);
        free(lsn);

        h_msg_t *m;
        size_t n = h_kafka_consume_all(topic, &m); /* over the plaintext listener */
        size_t got = 0;
        for (size_t i = 0; i < n; i++)
                got += m[i].value && strstr(m[i].value, "\"n\"") != NULL;
        h_msgs_free(m, n);
        is_int((long)got, EVENTS, "%s: Kafka holds the %d events", what, EVENTS);

        h_relay_signal(r, SIGTERM);
        is_int(h_relay_wait(r, 30000), 0, "%s: clean stop", what);
        char *log = h_relay_log(r);
        ok(!strstr(log, g_password), "%s: the password is in no log line", what);
        if (!streaming)
                h_relay_diag_log(r);
        free(log);
        h_relay_free(r);
        PQfinish(c);
        h_pg_drop_db(db);
        free(slot);
        free(topic);
        free(ci);
        free(db);
}

/* A relay that must not start: exit 3 and a log holding every needle. */
static void case_refused(const char *what, const char *const *sets_extra, const char *secret,
                         const char *const *needles)
{
        char *db = h_pg_create_db("saslbad");
        PGconn *c = h_pg_connect(db);
        h_pg_create_outbox(c, "outbox");
        PQfinish(c);
        char *ci = h_pg_conninfo(db);
        char set_conn[600];
        snprintf(set_conn, sizeof(set_conn), "postgres.conninfo=%s", ci);
        const char *sets[16] = {set_conn, g_set_servers, "kafka.security.protocol=SASL_SSL",
                                g_set_user};
        size_t n = 4;
        for (const char *const *e = sets_extra; *e && n < 15; e++)
                sets[n++] = *e;
        sets[n] = NULL;
        h_relay_t *r = h_relay_start(sets);
        is_int(h_relay_wait(r, 40000), 3, "%s: exit 3 (setup)", what);
        char *log = h_relay_log(r);
        bool all = true;
        for (const char *const *nd = needles; *nd; nd++)
                if (!strstr(log, *nd)) {
                        all = false;
                        tap_diag("missing from the log: \"%s\"", *nd);
                }
        ok(all, "%s: the message names the cause and the fix", what);
        ok(!strstr(log, secret), "%s: the password is in no log line", what);
        if (!all)
                h_relay_diag_log(r);
        free(log);
        h_relay_free(r);
        h_pg_drop_db(db);
        free(ci);
        free(db);
}

int main(void)
{
        const char *ca = h_env("RELAY_TEST_KAFKA_CA");
        g_password = h_env("RELAY_TEST_KAFKA_SASL_PASSWORD");
        snprintf(g_set_servers, sizeof(g_set_servers), "kafka.bootstrap.servers=%s",
                 h_env("RELAY_TEST_KAFKA_SASL"));
        snprintf(g_set_ca, sizeof(g_set_ca), "kafka.ssl.ca.location=%s", ca);
        snprintf(g_set_user, sizeof(g_set_user), "kafka.sasl.username=%s",
                 h_env("RELAY_TEST_KAFKA_SASL_USER"));
        snprintf(g_set_pw, sizeof(g_set_pw), "kafka.sasl.password=%s", g_password);

        case_streams("PLAIN", "PLAIN");

        const char *wrong_pw[] = {"kafka.sasl.mechanisms=PLAIN", g_set_ca,
                                  "kafka.sasl.password=not-the-password", NULL};
        const char *pw_needles[] = {"SASL authentication", "kafka.sasl.password", NULL};
        case_refused("a wrong password", wrong_pw, "not-the-password", pw_needles);

        /* A CA of our own that signed nothing the broker holds. */
        snprintf(g_tmp, sizeof(g_tmp), "/tmp/relay_sasl_XXXXXX");
        if (!mkdtemp(g_tmp))
                tap_bail("mkdtemp failed");
        char cmd[512], set_other_ca[256];
        snprintf(cmd, sizeof(cmd),
                 "cd %s && openssl req -x509 -days 2 -nodes -newkey rsa:2048 -keyout o.key "
                 "-out other-ca.crt -subj /CN=another-ca >/dev/null 2>&1",
                 g_tmp);
        if (system(cmd) != 0)
                tap_bail("openssl could not make a CA in %s", g_tmp);
        snprintf(set_other_ca, sizeof(set_other_ca), "kafka.ssl.ca.location=%s/other-ca.crt", g_tmp);
        const char *wrong_ca[] = {"kafka.sasl.mechanisms=PLAIN", set_other_ca, g_set_pw, NULL};
        const char *ca_needles[] = {"certificate verify failed", "kafka.ssl.ca.location", NULL};
        case_refused("a CA that did not sign the broker's certificate", wrong_ca, g_password,
                     ca_needles);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", g_tmp);
        if (system(cmd) != 0)
                tap_diag("could not remove %s", g_tmp);

        if (rd_kafka_version() < 0x020601ff) {
                const char *scram[] = {"kafka.sasl.mechanisms=SCRAM-SHA-256", g_set_ca, g_set_pw,
                                       NULL};
                const char *scram_needles[] = {"cannot log in with SCRAM-SHA-256 to Kafka 4",
                                               "2.6.1", "kafka.sasl.mechanisms=PLAIN",
                                               "SASL authentication", NULL};
                tap_diag("librdkafka %s: SCRAM logins to Kafka 4 are expected to fail",
                         rd_kafka_version_str());
                case_refused("SCRAM-SHA-256 with this librdkafka", scram, g_password,
                             scram_needles);
        } else {
                case_streams("SCRAM-SHA-256", "SCRAM-SHA-256");
        }
        return done_testing();
}
