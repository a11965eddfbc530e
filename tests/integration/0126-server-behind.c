/*
 * 0126-server-behind.c - a relay that keeps running while its server goes
 * back in time (a file-level backup restored; a standby promoted before it
 * received what the relay confirmed) relays what the server commits
 * afterwards, instead of skipping it.
 *
 * The relay passes START_REPLICATION the highest position it confirmed, so
 * that PostgreSQL 15 and 16, which do not save a slot's confirmed position
 * at shutdown, do not send everything again. The server starts at that
 * position and skips every transaction committed below it. On a server
 * whose WAL ends below it, that is every transaction committed until its
 * WAL passes the position again: they were never relayed, yet the relay
 * confirms past them.
 *
 * A throwaway cluster (port offset 17): the relay streams; a copy of the
 * stopped cluster is taken (its slot included); event a-1 and 15 MB of
 * other WAL are written and the slot is confirmed past them; the cluster
 * is stopped and the copy put back, below the relay's position; events
 * b-1 and b-2 are written in two transactions. Once the slot is confirmed
 * past them (the relay's ack of everything below), Kafka must hold both
 * (before: neither, the slot confirmed past them anyway), and the relay
 * says why it did not start at its own position.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define OFFSET 17
#define SERVER_OPTS "-c wal_level=logical -c max_wal_senders=10 -c max_replication_slots=10"

static PGconn *connect_port(int port)
{
        char ci[256];
        snprintf(ci, sizeof(ci),
                 "host=127.0.0.1 port=%d user=postgres dbname=postgres connect_timeout=10", port);
        PGconn *c = PQconnectdb(ci);
        if (PQstatus(c) != CONNECTION_OK)
                tap_bail("could not connect to port %d: %s", port, PQerrorMessage(c));
        return c;
}

/* Stop the cluster (c, connected to it, closed first), run script with $D
 * the cluster's directory as the postgres OS user, start it again; a new
 * connection. */
static PGconn *cluster_cycle(h_cluster_t *cl, PGconn *c, const char *what, const char *script)
{
        char cmd[2048];

        PQfinish(c);
        snprintf(cmd, sizeof(cmd),
                 "D=%s; %s/pg_ctl stop -D $D/data -m fast -w -t 60 >/dev/null 2>&1 && %s",
                 h_cluster_dir(cl), h_env("RELAY_TEST_PGBIN"), script);
        if (h_run_as_postgres(cmd) != 0 || h_cluster_start(cl, SERVER_OPTS) != 0)
                tap_bail("could not stop the cluster, %s and start it again: %s", what, cmd);
        return connect_port(h_cluster_port(cl));
}

static void insert_event(PGconn *c, const char *aggtype, const char *id)
{
        h_pg_exec(c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES "
                  "(gen_random_uuid(), '%s', '%s', 'T', '{}')",
                  aggtype, id);
}

/* Wait until a walsender streams from the slot again (the relay reconnected). */
static bool slot_active(PGconn *c, const char *slot, int timeout_ms)
{
        for (int64_t end = h_now_ms() + timeout_ms; h_now_ms() < end; h_sleep_ms(100)) {
                char *a = h_pg_value(c, "SELECT active FROM pg_replication_slots WHERE slot_name = "
                                        "'%s'",
                                     slot);
                bool on = a && strcmp(a, "t") == 0;
                free(a);
                if (on)
                        return true;
        }
        return false;
}

int main(void)
{
        char *slot = h_unique_name("slot_behind");
        char *aggtype = h_unique_name("bh");
        char topic[256], set_conn[256], set_slot[128], set_kafka[256];

        snprintf(topic, sizeof(topic), "outbox.event.%s", aggtype);
        h_kafka_create_topic(topic, 1);
        h_cluster_t *cl = h_cluster_up(OFFSET, SERVER_OPTS);
        if (!cl)
                tap_bail("could not start a cluster");
        PGconn *c = connect_port(h_cluster_port(cl));
        h_pg_create_outbox(c, "outbox");
        h_pg_exec_file(c, "002_publication.sql");
        h_cluster_conninfo_set(cl, set_conn, sizeof(set_conn));
        snprintf(set_slot, sizeof(set_slot), "slot.name=%s", slot);
        snprintf(set_kafka, sizeof(set_kafka), "kafka.bootstrap.servers=%s", h_kafka_bootstrap());
        const char *sets[] = {set_conn,
                              set_kafka,
                              set_slot,
                              "status.interval.ms=500",
                              "reconnect.backoff.ms=100",
                              "reconnect.backoff.max.ms=1000",
                              NULL};
        h_relay_t *r = h_relay_start(sets);
        if (!ok(h_relay_wait_log(r, "streaming from replication slot", 60000), "the relay streams"))
                h_relay_diag_log(r);

        /* The copy: the cluster as it is now, its slot included. */
        c = cluster_cycle(cl, c, "copy the data directory", "cp -a $D/data $D/copy");
        ok(slot_active(c, slot, 60000), "the relay streams again after the restart");

        /* WAL the copy does not have; the relay confirms past it. */
        insert_event(c, aggtype, "a-1");
        h_pg_exec(c, "CREATE TABLE filler AS SELECT g, repeat('x', 100) AS pad FROM "
                     "generate_series(1, 100000) g");
        char *high = h_pg_value(c, "SELECT pg_current_wal_lsn()");
        ok(h_pg_wait_confirmed(c, slot, high, 60000) >= 0, "the slot is confirmed past %s", high);
        is_int(h_kafka_wait_count(topic, 1, 30000), 1, "Kafka holds a-1");

        /* The copy put back: the server's WAL ends below the relay's position. */
        c = cluster_cycle(cl, c, "put the copy back", "rm -rf $D/data && mv $D/copy $D/data");
        char *end = h_pg_value(c, "SELECT pg_current_wal_lsn()");
        ok(end && !h_pg_lsn_ge(c, end, high), "the restored server's WAL ends at %s, below %s",
           end, high);
        ok(slot_active(c, slot, 60000), "the relay streams from the restored server");

        insert_event(c, aggtype, "b-1");
        insert_event(c, aggtype, "b-2");
        char *after = h_pg_value(c, "SELECT pg_current_wal_lsn()");
        ok(h_pg_wait_confirmed(c, slot, after, 60000) >= 0,
           "the slot is confirmed past b-1 and b-2 (%s)", after);

        /* Confirmed means acknowledged by Kafka: both are there now. */
        h_msg_t *msgs = NULL;
        size_t n = h_kafka_consume_all(topic, &msgs);
        int b = 0;
        for (size_t i = 0; i < n; i++)
                if (msgs[i].key && (strcmp(msgs[i].key, "b-1") == 0 || strcmp(msgs[i].key, "b-2") == 0))
                        b++;
        h_msgs_free(msgs, n);
        is_int(b, 2, "Kafka holds b-1 and b-2, written after the restore");
        ok(h_relay_wait_log(r, "past the server's WAL end", 0),
           "the relay says why it did not start at its own position");

        h_relay_signal(r, SIGTERM);
        is_int(h_relay_wait(r, 30000), 0, "the relay stops cleanly");
        h_relay_free(r);
        PQfinish(c);
        free(high);
        free(end);
        free(after);
        free(slot);
        free(aggtype);
        h_cluster_free(cl);
        return done_testing();
}
