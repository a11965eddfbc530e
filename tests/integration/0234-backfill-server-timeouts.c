/*
 * 0234-backfill-server-timeouts.c - a backfill that takes longer than the
 * server's session timeouts is not cut short by them.
 *
 * snapshot.mode = initial keeps two connections for as long as the table
 * takes to read (src/session.c session_backfill()): the replication
 * connection, idle, holding the temporary slot that becomes the permanent
 * one once Kafka acknowledged every row, and the backfill's own, in one
 * transaction whose statements (the first FETCH sorts the whole table) may
 * each run long. A database or role with idle_session_timeout,
 * statement_timeout or lock_timeout set, as many production servers have,
 * ended them (pg_dump turns these off for the same reason):
 *   - idle_session_timeout ended the idle walsender, which dropped the
 *     temporary slot; the backfill went on to the end, then making the
 *     slot permanent failed and the next session backfilled every row
 *     again (a duplicate of each, and on a table that takes longer than
 *     the timeout each time, never an end);
 *   - statement_timeout or lock_timeout cancelled the FETCH: the relay
 *     stopped (exit 3) blaming snapshot.filter.
 * And the walsender ended by the server mid-backfill (walsender_ended()):
 * the relay read and sent every row for nothing, then again.
 * The long statement here: a snapshot.filter that takes a shared advisory
 * lock another session holds (as 0161), held until the server shows the
 * FETCH waiting 3 s, three times the timeout, or the relay has exited. The
 * relay must then stream, Kafka hold the backfilled row once and a row
 * inserted afterwards once, and the relay not have retried.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"

/* The backfill's FETCH has waited 3 s by the server's clock. */
static bool fetch_waited(PGconn *c)
{
        char *v = h_pg_value(c, "SELECT count(*) FROM pg_catalog.pg_stat_activity "
                                "WHERE datname = pg_catalog.current_database() "
                                "AND application_name = 'outbox-relay backfill' "
                                "AND state = 'active' AND wait_event_type = 'Lock' "
                                "AND now() - query_start > interval '3 s'");
        bool w = v && strcmp(v, "0") != 0;
        free(v);
        return w;
}

/* A case with one row to backfill, whose FETCH waits for advisory lock
 * `lock`, which the connection returned holds. */
static PGconn *case_open(fx_case_t *fc, char *topic, size_t topiclen, int lock)
{
        fx_outbox_case_open(fc, "bftimeout", "bt", topic, topiclen);
        h_pg_exec(fc->c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES "
                  "(gen_random_uuid(), '%s', 'backfilled', 'Backfilled', '{}')",
                  fc->suffix);
        return fx_backfill_hold(fc, lock);
}

static void one_case(const char *guc, int lock)
{
        fx_case_t fc;
        char topic[300];
        /* Connected before the setting, which applies to later connections. */
        PGconn *holder = case_open(&fc, topic, sizeof(topic), lock);
        h_pg_exec(fc.c, "ALTER DATABASE %s SET %s = '1s'", fc.db, guc);

        h_relay_t *r = h_relay_start(fc.sets.v);
        int64_t deadline = h_now_ms() + 60000;
        bool waited = false;
        while (h_now_ms() < deadline && h_relay_wait(r, 0) == -1 && !(waited = fetch_waited(fc.c)))
                h_sleep_ms(100);
        h_pg_exec(holder, "SELECT pg_advisory_unlock(%d)", lock);
        PQfinish(holder);
        if (!ok(waited, "%s: the backfill's FETCH waits 3 s for the lock", guc))
                h_relay_diag_log(r);

        ok(h_relay_streams(r, 60000), "%s = 1s: the relay backfills and streams", guc);
        h_outbox_insert(fc.c, fc.suffix, "streamed");
        h_kafka_wait_count(topic, 2, 60000);
        const char *backfilled[] = {"backfilled", NULL}, *streamed[] = {"streamed", NULL};
        is_int((int)h_kafka_count_keys(topic, backfilled), 1,
               "%s: Kafka holds the backfilled row once", guc);
        is_int((int)h_kafka_count_keys(topic, streamed), 1,
               "%s: Kafka holds the row inserted afterwards once", guc);
        is_int(fx_log_count(r, "retrying"), 0, "%s: no session was retried", guc);
        fx_stop_relay(r, "relay stops cleanly");
        h_relay_free(r);
        fx_case_close(&fc, NULL);
}

/* Whether relay r retried, or the backfill's FETCH has waited 3 s. */
static bool retried_or_waited(h_relay_t *r, PGconn *c)
{
        return fx_log_count(r, "retrying in") > 0 || fetch_waited(c);
}

/*
 * The walsender ended by the server while the FETCH waits (here
 * pg_terminate_backend(); max_slot_wal_keep_size invalidating the
 * temporary slot does the same): its temporary slot is gone, so the
 * backfill cannot end in a slot. The relay must notice at once and begin
 * again, not read and send every row first (they were sent again by the
 * next session: the row twice).
 */
static void walsender_ended(int lock)
{
        fx_case_t fc;
        char topic[300];
        PGconn *holder = case_open(&fc, topic, sizeof(topic), lock);
        h_relay_t *r = h_relay_start(fc.sets.v);
        int64_t deadline = h_now_ms() + 60000;
        while (h_now_ms() < deadline && !h_pg_backfill_waits(fc.c, fc.db))
                h_sleep_ms(100);
        ok(h_pg_backfill_waits(fc.c, fc.db), "walsender ended: the backfill's FETCH waits");
        is_int((int)h_pg_number(fc.c, "SELECT count(pg_catalog.pg_terminate_backend(active_pid)) "
                                      "FROM pg_catalog.pg_replication_slots "
                                      "WHERE temporary AND active_pid IS NOT NULL AND "
                                      "database = pg_catalog.current_database()"),
               1, "walsender ended: the walsender holding the temporary slot is terminated");
        deadline = h_now_ms() + 60000;
        while (h_now_ms() < deadline && !retried_or_waited(r, fc.c))
                h_sleep_ms(100);
        h_pg_exec(holder, "SELECT pg_advisory_unlock(%d)", lock);
        PQfinish(holder);
        ok(h_relay_streams(r, 60000), "walsender ended: the relay backfills again and streams");
        const char *backfilled[] = {"backfilled", NULL}, *streamed[] = {"streamed", NULL};
        h_outbox_insert(fc.c, fc.suffix, "streamed");
        deadline = h_now_ms() + 60000;
        while (h_kafka_count_keys(topic, streamed) == 0 && h_now_ms() < deadline)
                h_sleep_ms(200);
        is_int((int)h_kafka_count_keys(topic, backfilled), 1,
               "walsender ended: Kafka holds the backfilled row once");
        is_int((int)h_kafka_count_keys(topic, streamed), 1,
               "walsender ended: Kafka holds the row inserted afterwards once");
        ok(fx_log_count(r, "lost the replication connection, and with it the backfill's "
                           "temporary slot") > 0,
           "walsender ended: the relay says why it begins again");
        fx_stop_relay(r, "relay stops cleanly");
        h_relay_free(r);
        fx_case_close(&fc, NULL);
}

int main(void)
{
        one_case("idle_in_transaction_session_timeout", 4234);
        one_case("statement_timeout", 4235);
        one_case("lock_timeout", 4236);
        walsender_ended(4238);
        /* PostgreSQL 17 and later (tests/run runs this test on them too). */
        PGconn *c = h_pg_connect("postgres");
        if (h_pg_number(c, "SELECT current_setting('server_version_num')::int") >= 170000)
                one_case("transaction_timeout", 4237);
        PQfinish(c);
        return done_testing();
}
