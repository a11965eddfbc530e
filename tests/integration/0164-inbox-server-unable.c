/*
 * 0164-inbox-server-unable.c - outbox-inbox against a PostgreSQL that
 * cannot take any write for a while (real PostgreSQL and Kafka, no relay).
 *
 * The consumer's database is read-only (default_transaction_read_only, as
 * a primary demoted to a standby, or a server connected before a failover,
 * answers every write: SQLSTATE 25006) when two messages arrive. That is
 * no fault of the messages: inbox_accept() itself fails, whatever the
 * handler. They must wait, with no attempt counted, and be applied once
 * the database takes writes again (on a new connection: the setting, like
 * a failover, reaches new sessions), not be dead-lettered after
 * errors.retries as a handler that fails would be. Before, both were
 * dead-lettered within a second and never applied.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"

int main(void)
{
        char *suffix = h_unique_name("su");
        char *cdb = h_pg_create_db("inboxro");
        char *ci = h_pg_conninfo(cdb);
        char *topic = fx_fmt("inbox.ro_%s", suffix);
        char *dlq = fx_fmt("inbox.ro.dlq_%s", suffix);
        PGconn *cc = h_pg_connect(cdb);
        fx_sets_t s;

        h_pg_exec_file(cc, "006_inbox.sql");
        h_pg_exec(cc, "CREATE TABLE applied (id text PRIMARY KEY)");
        h_pg_exec(cc, "ALTER DATABASE %s SET default_transaction_read_only = on", cdb);
        h_kafka_create_topic(topic, 1);
        h_kafka_create_topic(dlq, 1);
        h_kafka_produce_bytes(topic, "k", "{\"n\": 1}", 8, (const char *const[]){"id", "ro-1", NULL});
        h_kafka_produce_bytes(topic, "k", "{\"n\": 2}", 8, (const char *const[]){"id", "ro-2", NULL});

        memset(&s, 0, sizeof(s));
        fx_sets_add(&s, "postgres.conninfo=%s", ci);
        fx_sets_add(&s, "kafka.bootstrap.servers=%s", h_kafka_bootstrap());
        fx_sets_add(&s, "inbox.topics=%s", topic);
        fx_sets_add(&s, "inbox.handler=INSERT INTO applied VALUES ($7)");
        fx_sets_add(&s, "kafka.group.id=inbox-ro-%s", suffix);
        fx_sets_add(&s, "errors.dlq.topic=%s", dlq);
        fx_sets_add(&s, "errors.retries=1");
        fx_sets_add(&s, "errors.backoff.ms=100");
        fx_sets_add(&s, "errors.backoff.max.ms=200");
        fx_sets_add(&s, "reconnect.backoff.ms=200");
        fx_sets_add(&s, "reconnect.backoff.max.ms=800");
        h_relay_t *ib = h_proc_start(h_env("RELAY_INBOX_BIN"), NULL, NULL, s.v);

        /* Read-only until the inbox has met it (its log says so) and a
         * handler that fails would have been dead-lettered long since:
         * 1 + 1 attempts 100 ms apart. */
        int64_t deadline = h_now_ms() + 60000;
        while (fx_log_count(ib, "read-only transaction") < 3 && h_kafka_count(dlq) == 0 &&
               h_relay_wait(ib, 0) < 0 && h_now_ms() < deadline)
                h_sleep_ms(200);
        h_sleep_ms(2000);
        ok(fx_log_count(ib, "read-only transaction") >= 1,
           "the inbox met the read-only database (its log names it)");
        is_int((int)h_kafka_count(dlq), 0,
               "a database that takes no writes dead-letters nothing: no fault of the messages");
        is_int((int)h_pg_number(cc, "SELECT count(*) FROM applied"), 0, "nothing applied meanwhile");

        h_pg_exec(cc, "ALTER DATABASE %s RESET default_transaction_read_only", cdb);
        deadline = h_now_ms() + 60000;
        while (h_pg_number(cc, "SELECT count(*) FROM applied") < 2 && h_relay_wait(ib, 0) < 0 &&
               h_now_ms() < deadline)
                h_sleep_ms(200);
        is_int((int)h_pg_number(cc, "SELECT count(*) FROM applied"), 2,
               "both messages are applied once the database takes writes again");
        is_int((int)h_pg_number(cc, "SELECT count(*) FROM inbox WHERE message_id IN ('ro-1', 'ro-2')"),
               2, "both are in the inbox");
        h_relay_signal(ib, SIGTERM);
        int rc = h_relay_wait(ib, 60000);
        is_int(rc, 0, "outbox-inbox stops cleanly on SIGTERM");
        is_int((int)h_kafka_count(dlq), 0, "nothing was dead-lettered");
        if (rc != 0 || h_kafka_count(dlq) != 0)
                h_relay_diag_log(ib);

        h_relay_free(ib);
        fx_sets_free(&s);
        h_kafka_delete_topic(topic);
        h_kafka_delete_topic(dlq);
        PQfinish(cc);
        h_pg_drop_db(cdb);
        free(cdb);
        free(ci);
        free(topic);
        free(dlq);
        free(suffix);
        return done_testing();
}
