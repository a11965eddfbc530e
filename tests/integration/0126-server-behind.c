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

int main(void)
{
        h_case_t k;
        h_case_names(&k, "slot_behind", "bh", 1);
        h_cluster_t *cl = h_cluster_up(OFFSET, SERVER_OPTS);
        if (!cl)
                tap_bail("could not start a cluster");
        PGconn *c = connect_port(h_cluster_port(cl));
        h_pg_create_outbox(c, "outbox");
        h_pg_exec_file(c, "002_publication.sql");
        h_cluster_conninfo_set(cl, k.set_conn, sizeof(k.set_conn));
        const char *sets[] = {k.set_conn,
                              k.set_kafka,
                              k.set_slot,
                              "status.interval.ms=500",
                              "reconnect.backoff.ms=100",
                              "reconnect.backoff.max.ms=1000",
                              NULL};
        h_relay_t *r = h_relay_start(sets);
        ok(h_relay_streams(r, 60000), "the relay streams");

        /* The copy: the cluster as it is now, its slot included. */
        c = cluster_cycle(cl, c, "copy the data directory", "cp -a $D/data $D/copy");
        ok(h_pg_wait_slot_active(c, k.slot, true, 60000),
           "the relay streams again after the restart");

        /* WAL the copy does not have; the relay confirms past it. */
        h_outbox_insert(c, k.aggtype, "a-1");
        h_pg_exec(c, "CREATE TABLE filler AS SELECT g, repeat('x', 100) AS pad FROM "
                     "generate_series(1, 100000) g");
        h_relayed_t high;
        h_wait_relayed(c, k.slot, k.topic, 1, 60000, &high);
        ok(high.confirmed, "the slot is confirmed past %s", high.lsn);
        is_int(high.in_kafka, 1, "Kafka holds a-1");

        /* The copy put back: the server's WAL ends below the relay's position. */
        c = cluster_cycle(cl, c, "put the copy back", "rm -rf $D/data && mv $D/copy $D/data");
        char *end = h_pg_wal_lsn(c);
        ok(end && !h_pg_lsn_ge(c, end, high.lsn), "the restored server's WAL ends at %s, below %s",
           end, high.lsn);
        ok(h_pg_wait_slot_active(c, k.slot, true, 60000),
           "the relay streams from the restored server");

        h_outbox_insert(c, k.aggtype, "b-1");
        h_outbox_insert(c, k.aggtype, "b-2");
        char *after = h_pg_wal_lsn(c);
        ok(h_pg_wait_confirmed(c, k.slot, after, 60000) >= 0,
           "the slot is confirmed past b-1 and b-2 (%s)", after);

        /* Confirmed means acknowledged by Kafka: both are there now. */
        static const char *const b[] = {"b-1", "b-2", NULL};
        is_int(h_kafka_count_keys(k.topic, b), 2,
               "Kafka holds b-1 and b-2, written after the restore");
        ok(h_relay_wait_log(r, "past the server's WAL end", 0),
           "the relay says why it did not start at its own position");

        is_int(h_relay_stop(r, 30000), 0, "the relay stops cleanly");
        h_relay_free(r);
        PQfinish(c);
        h_relayed_free(&high);
        free(end);
        free(after);
        h_case_close(&k);
        h_cluster_free(cl);
        return done_testing();
}
