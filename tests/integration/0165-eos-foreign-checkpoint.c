/*
 * 0165-eos-foreign-checkpoint.c - exactly-once, a checkpoint in the topic
 * for our key that lies below the server's WAL end but is the end of no
 * transaction the slot streams: written for a WAL history this server does
 * not have (the database restored from a backup, or a standby promoted
 * before it received that transaction, and written past that position
 * since; the system identifier, and so the key, are the same). 0225 covers
 * such a checkpoint beyond the WAL end; once the server's WAL has passed
 * it, the relay took it as its own, skipped every transaction of this
 * history committed below it and confirmed the slot past them: Kafka never
 * got their events, and not even a tombstone could bring them back.
 *
 * Our checkpoint is the end LSN of a transaction we relayed, so streaming
 * from the slot reaches a commit that ends exactly there before any
 * transaction beyond it. The relay must stop (exit 3) when the stream
 * passes the checkpoint without one, with nothing confirmed past the
 * skipped transactions; after the tombstone its message names, Kafka must
 * hold every event.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"

#define EVENTS 5

static void insert_event(fx_case_t *fc, int i)
{
        h_pg_exec(fc->c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                  "VALUES (gen_random_uuid(), 'fc_%s', 'a-%d', 'E', '{}')",
                  fc->suffix, i);
}

int main(void)
{
        fx_case_t fc;
        char *key;
        char *ck_topic = fx_eos_case_open(&fc, "eosforeign", "fc", &key);
        char *topic = fx_fmt("outbox.event.fc_%s", fc.suffix);

        /* The slot first, then the events (one transaction each): they wait in it. */
        h_pg_exec(fc.c, "SELECT pg_create_logical_replication_slot('%s', 'pgoutput')", fc.slot);
        char *start = h_pg_value(fc.c, "SELECT pg_current_wal_lsn()");
        insert_event(&fc, 0);
        insert_event(&fc, 1);
        /* 8 bytes past the WAL's end after two transactions: no record ends
         * there (a record header alone is 24 bytes), so no commit does. */
        char *foreign = h_pg_value(fc.c, "SELECT pg_current_wal_lsn() + 8");
        for (int i = 2; i < EVENTS; i++)
                insert_event(&fc, i);
        h_kafka_produce(ck_topic, key, foreign);
        tap_diag("slot from %s, foreign checkpoint %s", start, foreign);

        h_relay_t *r = h_relay_start(fc.sets.v);
        int rc = h_relay_wait(r, 30000);
        is_int(rc, 3, "the relay stops (exit 3) at a checkpoint that is no end of a transaction "
                      "of this server's");
        char *log = h_relay_log(r);
        char *needle = fx_fmt("checkpoint %s", foreign);
        ok(strstr(log, needle) && strstr(log, "WAL history this server does not have") &&
                   strstr(log, "write a tombstone"),
           "naming the checkpoint, why and the fix");
        free(needle);
        free(log);
        if (rc != 3)
                h_relay_diag_log(r);
        if (rc < 0) {
                h_relay_signal(r, SIGTERM);
                h_relay_wait(r, 30000);
        }
        h_relay_free(r);
        fx_slot_t sl = fx_slot(fc.c, fc.slot);
        ok(sl.confirmed < fx_lsn(foreign),
           "the slot is not confirmed past the transactions below the checkpoint");

        /* The fix the message names: a tombstone for the key. */
        h_kafka_produce(ck_topic, key, NULL);
        r = h_relay_start(fc.sets.v);
        ok(h_relay_wait_log(r, "streaming from replication slot", 30000),
           "after a tombstone for the key the relay streams");
        /* The high watermark counts the transaction markers too. */
        h_kafka_wait_count(topic, EVENTS, 30000);
        fx_stop_relay(r, "SIGTERM: exit 0");
        h_msg_t *m;
        size_t n = h_kafka_consume_all(topic, &m);
        size_t first = 0;
        for (size_t i = 0; i < n; i++)
                if (m[i].key && (strcmp(m[i].key, "a-0") == 0 || strcmp(m[i].key, "a-1") == 0))
                        first++;
        h_msgs_free(m, n);
        is_int((long)first, 2, "Kafka holds the events of the two transactions below it");
        is_int((long)n, EVENTS, "and all %d events, once each", EVENTS);
        if (n != EVENTS)
                h_relay_diag_log(r);
        h_relay_free(r);

        h_kafka_delete_topic(ck_topic);
        free(ck_topic), free(key), free(topic), free(start), free(foreign);
        fx_case_close(&fc, NULL);
        return done_testing();
}
