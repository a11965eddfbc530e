/*
 * 0171-eos-shared-tid.c - two exactly-once relays of different slots
 * configured with the same eos.transactional.id, restarted as systemd
 * restarts exit 6 (Restart=on-failure; RestartPreventExitStatus=2 4 5).
 *
 * Relay A streams its slot; relay B, on a slot of its own, registers the
 * same transactional.id and fences A at A's next event: exit 6. A
 * restarted registers the id again and fences B at B's next event: exit 6
 * again, and so on at every restart (a scratch loop of 30 s with 1 s
 * restarts counted 13 exits 6 of each). The restart is kept for exit 6,
 * since the usual fence is another relay taking over the slot, and the
 * fenced relay restarted stands by without registering the id; so the
 * message of exit 6 must name the other cause and its fix, which it did
 * not ("a newer relay owns the replication slot" only, false here).
 *
 * Asserts both exits, the message, that a relay of A's slot started while
 * A streams stands by without registering the id (so it fences nothing),
 * and that a read_committed consumer of A's topic reads each of A's events
 * once.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static void insert(h_case_t *k, int n)
{
        h_pg_exec(k->c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                  "VALUES (gen_random_uuid(), '%s', 'a-1', 'E', '{\"n\": %d}')",
                  k->aggtype, n);
}

/* Insert into k every 200 ms until r exits (up to 60 s): its exit code. */
static int fenced_while_writing(h_case_t *k, h_relay_t *r, int *n)
{
        int64_t deadline = h_now_ms() + 60000;
        int rc = -1;
        while (rc < 0 && h_now_ms() < deadline) {
                insert(k, (*n)++);
                rc = h_relay_wait(r, 200);
        }
        return rc;
}

static void check_fenced(h_relay_t *r, int rc, const char *who)
{
        char *log = h_relay_log(r);
        is_int(rc, 6, "%s exits 6, fenced", who);
        bool names = log && strstr(log, "took over transactional.id") &&
                     strstr(log, "give each slot its own eos.transactional.id");
        ok(names, "%s's message names a shared eos.transactional.id as a cause, and the fix", who);
        if (rc != 6 || !names)
                h_relay_diag_log(r);
        free(log);
}

int main(void)
{
        h_case_t a, b;
        h_case_open(&a, "tida", "slot", "tida", 1, 0);
        h_case_open(&b, "tidb", "slot", "tidb", 1, 0);
        char *tid = h_unique_name("sharedtid"), *ck = h_unique_name("ck");
        char set_tid[200], set_ck[200];
        snprintf(set_tid, sizeof(set_tid), "eos.transactional.id=%s", tid);
        snprintf(set_ck, sizeof(set_ck), "eos.checkpoint.topic=%s", ck);
        const char *sets_a[] = {a.set_conn, a.set_kafka, a.set_slot, "delivery.mode=exactly-once",
                                set_tid, set_ck, "eos.commit.interval.ms=200", NULL};
        const char *sets_b[] = {b.set_conn, b.set_kafka, b.set_slot, "delivery.mode=exactly-once",
                                set_tid, set_ck, "eos.commit.interval.ms=200", NULL};
        int na = 0, nb = 0;

        h_relay_t *ra = h_relay_start(sets_a);
        ok(h_relay_streams(ra, 60000), "relay A streams");
        insert(&a, na++);
        h_relay_t *rb = h_relay_start(sets_b);
        ok(h_relay_streams(rb, 60000), "relay B (another slot, the same transactional.id) streams");
        check_fenced(ra, fenced_while_writing(&a, ra, &na), "relay A");

        /* What systemd does with exit 6: start A again. */
        h_relay_free(ra);
        ra = h_relay_start(sets_a);
        ok(h_relay_streams(ra, 60000), "relay A restarted streams");
        check_fenced(rb, fenced_while_writing(&b, rb, &nb), "relay B");

        /* The usual fence, and why exit 6 is restarted: a relay fenced
         * because another took its slot over, started again, finds the
         * slot busy and stands by; it registers the id only once the slot
         * is its own, so it never fences the relay of the slot back. */
        h_relay_t *rc = h_relay_start(sets_a);
        bool standby = h_relay_wait_log(rc, "standing by", 60000);
        ok(standby, "a relay C of A's slot, the same transactional.id, stands by");
        if (!standby)
                h_relay_diag_log(rc);
        for (int i = 0; i < 5; i++) {
                insert(&a, na++);
                h_sleep_ms(200);
        }
        char *wal = h_pg_wal_lsn(a.c);
        ok(h_pg_wait_confirmed(a.c, a.slot, wal, 60000) >= 0, "relay A confirms its slot");
        is_int(h_relay_wait(ra, 0), -1, "relay A is not fenced by the standby");
        char *log_c = h_relay_log(rc);
        ok(log_c && !strstr(log_c, "exactly-once: transactional.id"),
           "the standby never registered the transactional.id");
        free(log_c);
        is_int(h_relay_stop(rc, 30000), 0, "relay C stops cleanly");
        h_relay_free(rc);
        is_int(h_relay_stop(ra, 30000), 0, "relay A stops cleanly");
        h_msg_t *m = NULL;
        size_t nm = h_kafka_consume_all(a.topic, &m);
        char *seen = calloc((size_t)na, 1);
        int distinct = 0, twice = 0;
        for (size_t i = 0; i < nm; i++) {
                const char *p = strstr(m[i].value, "\"n\": ");
                int v = p ? atoi(p + 5) : -1;
                if (v < 0 || v >= na)
                        continue;
                if (seen[v]++)
                        twice++;
                else
                        distinct++;
        }
        is_int(distinct, na, "a read_committed consumer reads all %d of A's events", na);
        is_int(twice, 0, "none of them twice");
        free(seen);
        h_msgs_free(m, nm);
        free(wal);

        h_relay_free(ra);
        h_relay_free(rb);
        h_kafka_delete_topic(ck);
        free(ck);
        free(tid);
        h_case_close(&a);
        h_case_close(&b);
        return done_testing();
}
