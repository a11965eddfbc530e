/*
 * 0162-open-txn-idle.c - the idle advance (a keepalive's WAL end confirmed
 * while nothing is in flight) confirms past the first changes of an outbox
 * transaction that is still open on the server; that transaction must
 * still reach Kafka whole and in order when it commits, also after the
 * relay that confirmed past its start was killed or stopped.
 *
 * For each of kill -9 and SIGTERM:
 *   1. a relay streams; a transaction X opens on its own connection and
 *      writes outbox events for two aggregate types (two topics of three
 *      partitions), five keys each, versions 1..3 per key;
 *   2. other connections commit unrelated writes: the relay, idle on the
 *      outbox, confirms the keepalives' WAL ends, past X's changes
 *      (asserted: the point of the test is that the hazard is there);
 *   3. the relay is killed (or stopped), X writes version 4 of each key
 *      and commits, and one more transaction writes version 5;
 *   4. a new relay starts: Kafka holds every version of every key in
 *      commit order (duplicates allowed), and the slot is confirmed past
 *      the end.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define KEYS 5
#define TYPES 2
#define VERSIONS 5

static void check_topic(const char *topic, const char *what)
{
        int wants[KEYS];
        for (int k = 0; k < KEYS; k++)
                wants[k] = VERSIONS;
        h_versions_t t;
        size_t n = h_topic_key_versions(topic, KEYS, wants, &t);
        ok(t.missing == 0 && t.out_of_order == 0,
           "%s: every version of every key, in commit order (%zu messages, %ld missing, %ld out "
           "of order, %ld duplicates)",
           what, n, t.missing, t.out_of_order, t.duplicates);
}

static void run_case(int sig)
{
        const char *how = sig == SIGKILL ? "kill -9" : "SIGTERM";
        h_case_t k;
        h_case_open(&k, "opentxn", "slot_opentxn", "otx", 3, 0);
        char agg[TYPES][128], topic[TYPES][160];
        for (int t = 0; t < TYPES; t++) {
                snprintf(agg[t], sizeof(agg[t]), "%.100s_%d", k.aggtype, t);
                snprintf(topic[t], sizeof(topic[t]), "outbox.event.%.120s", agg[t]);
                h_kafka_create_topic(topic[t], 3);
        }
        h_pg_exec(k.c, "CREATE TABLE noise (id bigserial PRIMARY KEY, v text)");
        const char *sets[] = {k.set_conn, k.set_kafka, k.set_slot, "status.interval.ms=1000",
                              NULL};
        h_relay_t *r = h_relay_start(sets);
        ok(h_relay_streams(r, 60000), "%s: a relay streams", how);

        PGconn *x = h_pg_connect(k.db);
        h_pg_exec(x, "BEGIN");
        for (int v = 1; v <= 3; v++)
                for (int t = 0; t < TYPES; t++)
                        for (int a = 0; a < KEYS; a++)
                                h_insert_keyed(x, agg[t], a, v);
        char *x_written = h_pg_value(k.c, "SELECT pg_current_wal_insert_lsn()");
        for (int i = 0; i < 20; i++)
                h_pg_exec(k.c, "INSERT INTO noise (v) VALUES (md5(random()::text))");
        char *noise_end = h_pg_wal_lsn(k.c);
        int64_t took = h_pg_wait_confirmed(k.c, k.slot, noise_end, 20000);
        ok(took >= 0, "%s: idle on the outbox, the relay confirms past X's open changes (%s)", how,
           x_written);
        char *restart = h_pg_slot_column(k.c, k.slot, "restart_lsn");
        ok(restart && !h_pg_lsn_ge(k.c, restart, x_written),
           "%s: the slot's restart_lsn %s stays before X's changes", how,
           restart ? restart : "(null)");

        if (sig == SIGKILL) {
                h_relay_signal(r, SIGKILL);
                h_relay_wait(r, 10000);
        } else {
                ok(h_relay_stop(r, 60000) == 0, "%s: the relay stops cleanly", how);
        }
        h_relay_free(r);
        for (int t = 0; t < TYPES; t++)
                for (int a = 0; a < KEYS; a++)
                        h_insert_keyed(x, agg[t], a, 4);
        h_pg_exec(x, "COMMIT");
        PQfinish(x);
        h_pg_exec(k.c, "BEGIN");
        for (int t = 0; t < TYPES; t++)
                for (int a = 0; a < KEYS; a++)
                        h_insert_keyed(k.c, agg[t], a, 5);
        h_pg_exec(k.c, "COMMIT");

        r = h_relay_start(sets);
        ok(h_relay_streams(r, 60000), "%s: the next relay streams", how);
        for (int t = 0; t < TYPES; t++)
                h_kafka_wait_count(topic[t], KEYS * VERSIONS, 30000);
        char *end = h_pg_wal_lsn(k.c);
        ok(h_pg_wait_confirmed(k.c, k.slot, end, 30000) >= 0, "%s: the slot is confirmed past %s",
           how, end);
        for (int t = 0; t < TYPES; t++) {
                char what[64];
                snprintf(what, sizeof(what), "%s: topic %d", how, t);
                check_topic(topic[t], what);
        }
        h_relay_stop(r, 60000);
        h_relay_free(r);
        for (int t = 0; t < TYPES; t++)
                h_kafka_delete_topic(topic[t]);
        free(end);
        free(restart);
        free(noise_end);
        free(x_written);
        h_case_close(&k);
}

int main(void)
{
        run_case(SIGKILL);
        run_case(SIGTERM);
        return done_testing();
}
