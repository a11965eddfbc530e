/*
 * 0170-commit-timestamp.c - each message's timestamp is its transaction's
 * commit time (README: "timestamp = the transaction's commit time"),
 * CreateTime, to the millisecond: compared with what PostgreSQL recorded
 * for the row's transaction (pg_xact_commit_timestamp(xmin);
 * tests/env turns track_commit_timestamp on), for transactions committed
 * a second apart before the relay started (read back from the slot) and
 * one committed while it streams.
 *
 * 0101 only bounded the timestamp by the row's created_at and a minute
 * after it: the time the relay read or sent the event passed as well.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define TXNS 3
#define PER_TXN 2

static void insert_txn(PGconn *c, const char *aggtype, int t)
{
        h_pg_exec(c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                  "SELECT gen_random_uuid(), '%s', 'agg-' || g, 'T', '{}' FROM generate_series(%d, %d) g",
                  aggtype, t * PER_TXN, t * PER_TXN + PER_TXN - 1);
}

int main(void)
{
        h_case_t k;
        h_case_open(&k, "committs", "slot", "ct", 1, H_CASE_PUBLICATION);
        PGconn *c = k.c;
        /* The slot first: the transactions below wait in it for the relay. */
        h_pg_exec(c, "SELECT pg_create_logical_replication_slot('%s', 'pgoutput')", k.slot);
        for (int t = 0; t < TXNS; t++) {
                if (t > 0)
                        h_sleep_ms(1100);
                insert_txn(c, k.aggtype, t);
        }
        h_sleep_ms(1100);

        const char *sets[] = {k.set_conn, k.set_kafka, k.set_slot, NULL};
        h_relay_t *relay = h_relay_start(sets);
        ok(h_relay_streams(relay, 60000), "relay streams");
        insert_txn(c, k.aggtype, TXNS);
        const int total = (TXNS + 1) * PER_TXN;
        h_relayed_t rl;
        h_wait_relayed(c, k.slot, k.topic, total, 60000, &rl);
        ok(rl.in_kafka == total && rl.confirmed, "%d events relayed (%lld in Kafka)", total,
           (long long)rl.in_kafka);
        h_relayed_free(&rl);
        is_int(h_relay_stop(relay, 30000), 0, "SIGTERM: exit 0");
        h_relay_free(relay);

        PGresult *res = PQexec(c, "SELECT id::text, floor(extract(epoch FROM "
                                  "pg_xact_commit_timestamp(xmin)) * 1000)::bigint FROM outbox");
        if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != total ||
            PQgetisnull(res, 0, 1))
                tap_bail("commit timestamps of the outbox rows: %s (track_commit_timestamp is "
                         "on in tests/env)",
                         PQerrorMessage(c));
        h_msg_t *m;
        size_t n = h_kafka_consume_all(k.topic, &m);
        int matched = 0, bad = 0, create_time = 0;
        long long distinct[TXNS + 1];
        int ndistinct = 0;
        for (size_t i = 0; i < n; i++) {
                size_t l;
                const char *id = h_msg_header(&m[i], "id", &l);
                for (int r = 0; id && r < PQntuples(res); r++) {
                        if (strlen(PQgetvalue(res, r, 0)) != l || memcmp(PQgetvalue(res, r, 0), id, l))
                                continue;
                        long long want = atoll(PQgetvalue(res, r, 1));
                        matched++;
                        create_time += m[i].timestamp_type == 1;
                        if (m[i].timestamp != want) {
                                if (bad++ < 5)
                                        tap_diag("event %.*s: timestamp %lld, committed at %lld "
                                                 "(%+lld ms)",
                                                 (int)l, id, (long long)m[i].timestamp, want,
                                                 (long long)m[i].timestamp - want);
                        }
                        int d = 0;
                        while (d < ndistinct && distinct[d] != want)
                                d++;
                        if (d == ndistinct && ndistinct <= TXNS)
                                distinct[ndistinct++] = want;
                }
        }
        h_msgs_free(m, n);
        PQclear(res);
        ok(n == (size_t)total && matched == total,
           "every message is one of the %d committed events (%zu messages, %d matched)", total, n,
           matched);
        is_int(ndistinct, TXNS + 1, "the %d transactions have %d commit times", TXNS + 1, TXNS + 1);
        is_int(create_time, total, "every timestamp is a CreateTime");
        is_int(bad, 0, "every message's timestamp is its transaction's commit time, in ms");

        h_case_close(&k);
        return done_testing();
}
