/*
 * 0166-sighup.c - SIGHUP neither stops nor restarts the relay, whatever it
 * is doing when the signal comes.
 *
 * PostgreSQL and PgBouncer reload their configuration on SIGHUP, so an
 * operator may well send it; the relay has no reload, and SIGHUP's default
 * action ended it at once (status 129, no drain: what was in flight was sent
 * again on the next start, and systemd counted a failure). Now it logs that a
 * restart applies a changed configuration and goes on. The handler only
 * counts (the process has one thread that logs): the loop's turns log, so
 * each place that waits must turn. Three places:
 *
 *   1. streaming (the loop in poll()): the warning, still running; events
 *      committed before and after it all reach Kafka, once each, and are
 *      confirmed;
 *   2. a backfill statement waiting on the server (a libpq wait with the
 *      session's tick: the snapshot.filter waits for an advisory lock, as in
 *      0161): the warning while the statement still waits, then the row is
 *      backfilled once the lock is given up;
 *   3. the supervisor's wait of a relay standing by for the slot of relay 1
 *      (its nap between attempts): two SIGHUPs, one warning each; it takes
 *      over when relay 1 stops, and relays what comes next.
 *
 * SIGTERM afterwards is the usual clean stop, exit 0; each relay has logged
 * the warning exactly as often as it got the signal.
 *
 * Port: RELAY_TEST_HTTP_PORT (default 19140) + 115.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>

#include "faults/faults.h"
#include "harness.h"

#define EVENTS 5
#define WARNING                                                                          \
        "SIGHUP received, but outbox-relay does not reload its configuration: restart it " \
        "(SIGTERM stops it cleanly) to apply a changed one; ignoring"

/* Send SIGHUP to r and wait for its n-th warning; r must still run. Two
 * test points. */
static void hangup(h_relay_t *r, int n, const char *when)
{
        h_relay_signal(r, SIGHUP);
        if (!ok(fx_wait_log_n(r, WARNING, n, 30000),
                "SIGHUP %s: the relay says that it does not reload, and that a restart applies "
                "a changed configuration",
                when))
                h_relay_diag_log(r);
        int early = h_relay_wait(r, 0);
        if (!ok(early == -1, "the relay is still running after SIGHUP %s (exit status %d)", when,
                early))
                h_relay_diag_log(r);
}

static void insert(PGconn *c, const char *aggtype, char prefix)
{
        char id[16];
        for (int i = 0; i < EVENTS; i++) {
                snprintf(id, sizeof(id), "%c-%d", prefix, i);
                h_outbox_insert(c, aggtype, id);
        }
}

/* 1 and 3: a streaming relay, and one standing by for its slot. */
static void streaming_and_standby(void)
{
        h_case_t k;
        h_case_open(&k, "hup", "slot_hup", "hup", 1, 0);
        const char *sets[] = {k.set_conn, k.set_kafka, k.set_slot, "http.listen=off",
                              "shutdown.timeout.ms=5000", NULL};
        h_relay_t *r = h_relay_start(sets);
        if (!ok(h_relay_streams(r, 60000), "the relay streams"))
                h_relay_diag_log(r);

        insert(k.c, k.aggtype, 'a');
        is_int(h_kafka_wait_count(k.topic, EVENTS, 60000), EVENTS,
               "the first %d events are in Kafka", EVENTS);

        hangup(r, 1, "while streaming");
        insert(k.c, k.aggtype, 'b');
        h_relayed_t rel;
        h_wait_relayed(k.c, k.slot, k.topic, 2 * EVENTS, 60000, &rel);
        is_int(rel.in_kafka, 2 * EVENTS, "the %d events committed after SIGHUP are in Kafka too",
               EVENTS);
        ok(rel.confirmed, "and confirmed to PostgreSQL");
        h_relayed_free(&rel);

        h_relay_t *sb = h_relay_start(sets);
        if (!ok(h_relay_wait_log(sb, "is active in another process; standing by", 60000),
                "a second relay on the same slot stands by"))
                h_relay_diag_log(sb);
        hangup(sb, 1, "while standing by");
        hangup(sb, 2, "again while standing by");

        is_int(h_relay_stop(r, 60000), 0, "SIGTERM to the streaming relay: clean stop, exit 0");
        if (!ok(h_relay_wait_log(sb, "is free; taking over", 60000),
                "the relay that stood by takes over"))
                h_relay_diag_log(sb);
        ok(h_relay_streams(sb, 60000), "and streams");
        insert(k.c, k.aggtype, 'c');
        h_wait_relayed(k.c, k.slot, k.topic, 3 * EVENTS, 60000, &rel);
        is_int(rel.in_kafka, 3 * EVENTS, "the %d events committed after the takeover are in "
                                         "Kafka too",
               EVENTS);
        ok(rel.confirmed, "and confirmed to PostgreSQL");
        h_relayed_free(&rel);
        is_int(h_relay_stop(sb, 60000), 0, "SIGTERM to it: clean stop, exit 0");

        ok(!h_relay_wait_log(r, "FATAL", 0) && !h_relay_wait_log(sb, "FATAL", 0), "no FATAL line");
        is_int(fx_log_count(r, WARNING), 1, "the streaming relay warned once, for its one SIGHUP");
        is_int(fx_log_count(sb, WARNING), 2, "the relay that stood by warned twice, once per SIGHUP");
        is_int(h_kafka_count(k.topic), 3 * EVENTS, "each event is in Kafka once");
        h_relay_free(r);
        h_relay_free(sb);
        h_case_close(&k);
}

/* 2: a backfill statement waiting on the server. */
static void backfill_wait(void)
{
        fx_case_t fc;
        char topic[300];
        PGconn *holder;
        h_relay_t *r =
                fx_backfill_held(&fc, "hupwait", "hw", 115, 4245, topic, sizeof(topic), &holder);
        hangup(r, 1, "while the backfill waits");
        ok(h_pg_backfill_waits(fc.c, fc.db), "the backfill's FETCH still waits: the warning "
                                             "came during the wait");

        h_pg_exec(holder, "SELECT pg_advisory_unlock(4245)");
        PQfinish(holder);
        if (!ok(h_relay_streams(r, 60000), "with the lock given up, the relay backfills and "
                                           "streams"))
                h_relay_diag_log(r);
        is_int(h_kafka_wait_count(topic, 1, 60000), 1, "Kafka holds the backfilled row");
        is_int(h_relay_stop(r, 60000), 0, "SIGTERM: clean stop, exit 0");
        is_int(fx_log_count(r, WARNING), 1, "it warned once, for its one SIGHUP");
        h_relay_free(r);
        fx_case_close(&fc, NULL);
}

int main(void)
{
        streaming_and_standby();
        backfill_wait();
        return done_testing();
}
