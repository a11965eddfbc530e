/*
 * 0163-eos-open-idle.c - exactly-once: an event Kafka acknowledged inside a
 * Kafka transaction that is not committed yet is not confirmed, however
 * many keepalives the idle outbox brings meanwhile.
 *
 * delivery.mode = exactly-once with eos.commit.interval.ms = 30000 and
 * status.interval.ms = 1000, against the real broker:
 *   1. a first event is committed at once (no commit before it) and the
 *      slot is confirmed past it;
 *   2. a second event is produced into a new Kafka transaction, due 30 s
 *      after the first commit; Kafka acknowledges it, so the relay's
 *      tracker is drained, and only unrelated tables are written for 4 s:
 *      the keepalives' WAL ends pass the event, but the slot must stay
 *      below its commit (what the open Kafka transaction holds is not in
 *      Kafka for a read_committed consumer, and an abort would lose it);
 *   3. once the Kafka transaction is committed the slot moves past
 *      everything written.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

int main(void)
{
        h_case_t k;
        h_case_open(&k, "eosidle", "slot_eosidle", "eosi", 1, 0);
        char *ck = h_unique_name("ckpt_eosi");
        h_kafka_create_topic(ck, 1);
        h_pg_exec(k.c, "CREATE TABLE noise (id bigserial PRIMARY KEY, v text)");
        char set_ck[200];
        snprintf(set_ck, sizeof(set_ck), "eos.checkpoint.topic=%s", ck);
        const char *sets[] = {k.set_conn,
                              k.set_kafka,
                              k.set_slot,
                              "delivery.mode=exactly-once",
                              set_ck,
                              "eos.commit.interval.ms=30000",
                              "status.interval.ms=1000",
                              NULL};
        h_relay_t *r = h_relay_start(sets);
        ok(h_relay_streams(r, 60000), "an exactly-once relay streams");

        h_outbox_insert(k.c, k.aggtype, "agg-1");
        char *first = h_pg_wal_lsn(k.c);
        ok(h_pg_wait_confirmed(k.c, k.slot, first, 30000) >= 0,
           "the first event is committed at once and confirmed (%s)", first);

        h_outbox_insert(k.c, k.aggtype, "agg-1");
        char *second = h_pg_value(k.c, "SELECT pg_current_wal_insert_lsn()");
        /* Kafka acknowledges it within milliseconds (linger.ms 5); its
         * commit is due 30 s after the first one. The harness reads Kafka
         * read_committed, so it cannot see the event before that: a relay
         * without the open-transaction guard of relay_session_status()
         * confirms the keepalives here (not ok 3). */
        h_sleep_ms(1000);
        char *conf;
        bool held = h_pg_confirmed_stays_below(
                k.c, k.slot, second, 8, "INSERT INTO noise (v) VALUES (md5(random()::text))", &conf);
        if (!ok(held, "while its Kafka transaction is open the slot stays below its commit "
                      "(confirmed %s, commit ends at or before %s)",
                conf ? conf : "(null)", second))
                h_relay_diag_log(r);
        free(conf);

        char *end = h_pg_wal_lsn(k.c);
        ok(h_pg_wait_confirmed(k.c, k.slot, end, 60000) >= 0,
           "after the Kafka commit the slot moves past everything written (%s)", end);
        is_int(h_kafka_count(k.topic), 4, "Kafka holds both events, committed (and two markers)");
        is_int(h_relay_stop(r, 60000), 0, "the relay stops cleanly");
        h_relay_free(r);

        free(end);
        free(second);
        free(first);
        h_kafka_delete_topic(ck);
        free(ck);
        h_case_close(&k);
        return done_testing();
}
