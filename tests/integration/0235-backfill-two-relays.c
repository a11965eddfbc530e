/*
 * 0235-backfill-two-relays.c - two relays of one slot that start together
 * with snapshot.mode = initial backfill the table once between them.
 *
 * README, "Several replicas": one streams, the others stand by. Before
 * the slot exists, each relay created a temporary slot of its own and
 * backfilled the whole table from its snapshot; the one that finished
 * second found the slot made by the other (pg_copy_logical_replication_slot
 * refused) and stood by only then, so Kafka held every backfilled row once
 * per relay. A deployment of two replicas doubled the whole table.
 *
 * Worse, the second stopped with exit 3: "could not drop temporary
 * replication slot ...: does not exist" (the server drops a backend's
 * temporary slots at any error, the failed copy's included).
 *
 * A. Made to happen every time: 50 rows, and a snapshot.filter that takes
 *    a shared advisory lock another session holds (as 0161), given up once
 *    both relays' backfills wait on it, or one waits and the other stands
 *    by. Then one relay must stream and the other stand by, and Kafka hold
 *    each backfilled row, and a row inserted afterwards, once.
 * B. The slot made by another process (by hand) while one relay's backfill
 *    waits the same way: the relay must stream from it once the backfill
 *    is done (it used to stop with exit 3), Kafka hold the backfilled row
 *    and a row inserted afterwards once.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"

#define ROWS 50
#define LOCK 4235

/* The relays' backfill connections that wait on a lock. */
static long backfills_waiting(PGconn *c)
{
        return (long)h_pg_number(c, "SELECT count(*) FROM pg_catalog.pg_stat_activity "
                                    "WHERE datname = pg_catalog.current_database() "
                                    "AND application_name = 'outbox-relay backfill' "
                                    "AND state = 'active' AND wait_event_type = 'Lock'");
}

/* A case whose ROWS rows (keys backfilled-N) wait to be backfilled until
 * *holder gives up the lock. */
static void case_open(fx_case_t *fc, char *topic, size_t topiclen, PGconn **holder)
{
        fx_outbox_case_open(fc, "bftwo", "b2", topic, topiclen);
        h_pg_exec(fc->c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                  "SELECT gen_random_uuid(), '%s', 'backfilled-' || i, 'Backfilled', '{}' "
                  "FROM generate_series(1, %d) AS i",
                  fc->suffix, ROWS);
        *holder = fx_backfill_hold(fc, LOCK);
}

/* A row inserted after the backfill, then: Kafka holds each row once. */
static void check_once(fx_case_t *fc, const char *topic, const char *what)
{
        const char *streamed[] = {"streamed", NULL};
        h_outbox_insert(fc->c, fc->suffix, "streamed");
        int64_t deadline = h_now_ms() + 60000;
        while (h_kafka_count_keys(topic, streamed) == 0 && h_now_ms() < deadline)
                h_sleep_ms(200);
        is_int((int)h_kafka_count_keys(topic, streamed), 1, "%s: Kafka holds the streamed row once",
               what);
        is_int((int)h_kafka_count(topic), ROWS + 1,
               "%s: Kafka holds the %d backfilled rows and the streamed one, each once", what,
               ROWS);
}

static void slot_made_meanwhile(void)
{
        fx_case_t fc;
        char topic[300];
        PGconn *holder;
        case_open(&fc, topic, sizeof(topic), &holder);
        h_relay_t *r = h_relay_start(fc.sets.v);
        int64_t deadline = h_now_ms() + 60000;
        while (h_now_ms() < deadline && backfills_waiting(fc.c) < 1)
                h_sleep_ms(100);
        ok(backfills_waiting(fc.c) == 1, "B: the relay's backfill waits for the lock");
        h_pg_exec(fc.c, "SELECT pg_create_logical_replication_slot('%s', 'pgoutput')", fc.slot);
        h_pg_exec(holder, "SELECT pg_advisory_unlock(%d)", LOCK);
        PQfinish(holder);
        ok(h_relay_streams(r, 60000), "B: the relay streams from the slot made meanwhile");
        check_once(&fc, topic, "B");
        fx_stop_relay(r, "B: relay stops cleanly");
        h_relay_free(r);
        fx_case_close(&fc, NULL);
}

static void two_relays(void)
{
        fx_case_t fc;
        char topic[300];
        PGconn *holder;
        case_open(&fc, topic, sizeof(topic), &holder);

        h_relay_t *r[2] = {h_relay_start(fc.sets.v), h_relay_start(fc.sets.v)};
        int64_t deadline = h_now_ms() + 60000;
        long waiting = 0;
        bool held = false;
        while (h_now_ms() < deadline && !held) {
                waiting = backfills_waiting(fc.c);
                held = waiting == 2 ||
                       (waiting == 1 && (fx_log_count(r[0], "standing by") > 0 ||
                                         fx_log_count(r[1], "standing by") > 0));
                if (!held)
                        h_sleep_ms(100);
        }
        ok(held, "A: one relay's backfill waits for the lock, the other's too or it stands by "
                 "(%ld waiting)", waiting);
        tap_diag("backfills waiting at once: %ld", waiting);
        h_pg_exec(holder, "SELECT pg_advisory_unlock(%d)", LOCK);
        PQfinish(holder);

        /* One streams, the other stands by (after its backfill, if it ran one). */
        deadline = h_now_ms() + 90000;
        int streaming = -1;
        while (h_now_ms() < deadline && streaming < 0) {
                for (int i = 0; i < 2; i++)
                        if (fx_log_count(r[i], "streaming from replication slot") > 0 &&
                            fx_log_count(r[1 - i], "standing by") > 0)
                                streaming = i;
                h_sleep_ms(100);
        }
        if (!ok(streaming >= 0, "A: one relay streams and the other stands by")) {
                h_relay_diag_log(r[0]);
                h_relay_diag_log(r[1]);
        }
        check_once(&fc, topic, "A");
        for (int i = 0; i < 2; i++) {
                fx_stop_relay(r[i], "A: relay stops cleanly");
                h_relay_free(r[i]);
        }
        fx_case_close(&fc, NULL);
}

int main(void)
{
        two_relays();
        slot_made_meanwhile();
        return done_testing();
}
