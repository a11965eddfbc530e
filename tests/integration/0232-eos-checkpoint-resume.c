/*
 * 0232-eos-checkpoint-resume.c - exactly-once: the checkpoint a Kafka
 * transaction carries is the end of the last PostgreSQL transaction it
 * holds, and a relay whose slot is behind its last Kafka commit (the
 * confirmation never reached the server: a crash between the two) sends
 * none of the committed events again.
 *
 * The slot is copied right after its creation (before any event); after a
 * first run has delivered A and then B, each in a Kafka transaction of its
 * own, the slot is replaced by that copy: the server holds A and B again,
 * as after a crash that lost both confirmations. Asserted on what Kafka
 * holds: the last checkpoint record for the slot's key is at or past the
 * end of B's transaction; after the restart a read_committed consumer
 * reads A, B and C (written after the restart: the relay streamed) once
 * each.
 *
 * 0215 (the crash loop) only counted the checkpoint records, and needs a
 * kill between a Kafka commit and the slot's confirmation to notice a
 * checkpoint one Kafka transaction behind.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"

/* Insert one event with the given id; returns the WAL position after its commit. */
static char *insert_event(fx_case_t *fc, const char *id)
{
        h_pg_exec(fc->c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                  "VALUES ('%s', 'rs_%s', 'a-1', 'E', '{}')",
                  id, fc->suffix);
        return h_pg_wal_lsn(fc->c);
}

/* How many messages of msgs carry header id = id. */
static int count_id(const h_msg_t *msgs, size_t n, const char *id)
{
        int found = 0;
        for (size_t i = 0; i < n; i++) {
                size_t l;
                const char *v = h_msg_header(&msgs[i], "id", &l);
                found += v && l == strlen(id) && memcmp(v, id, l) == 0;
        }
        return found;
}

#define ID_A "a5a5a5a5-0000-4000-8000-00000000000a"
#define ID_B "a5a5a5a5-0000-4000-8000-00000000000b"
#define ID_C "a5a5a5a5-0000-4000-8000-00000000000c"

int main(void)
{
        fx_case_t fc;
        char *key;
        char *ck_topic = fx_eos_case_open(&fc, "eosresume", "rs", &key);
        char *copy = fx_fmt("%s_copy", fc.slot);
        char *topic = fx_fmt("outbox.event.rs_%s", fc.suffix);

        h_pg_exec(fc.c, "SELECT pg_create_logical_replication_slot('%s', 'pgoutput')", fc.slot);
        h_pg_exec(fc.c, "SELECT pg_copy_logical_replication_slot('%s', '%s')", fc.slot, copy);

        /* First run: A, then B in a later Kafka transaction (exactly-once
         * confirms only what Kafka committed). */
        h_relay_t *r = fx_case_relay(&fc, "first run: the relay streams");
        char *after_a = insert_event(&fc, ID_A);
        ok(h_pg_wait_confirmed(fc.c, fc.slot, after_a, 60000) >= 0,
           "A committed in Kafka: the slot is confirmed past it (%s)", after_a);
        char *before_b = h_pg_wal_lsn(fc.c);
        char *after_b = insert_event(&fc, ID_B);
        ok(h_pg_wait_confirmed(fc.c, fc.slot, after_b, 60000) >= 0,
           "B committed in Kafka: the slot is confirmed past it (%s)", after_b);
        fx_stop_relay(r, "first run: SIGTERM, exit 0");
        h_relay_free(r);

        /* The checkpoint the last Kafka transaction carried. */
        h_msg_t *cks;
        size_t ncks = h_kafka_consume_all(ck_topic, &cks);
        char *last = NULL;
        for (size_t i = 0; i < ncks; i++)
                if (cks[i].key && strcmp(cks[i].key, key) == 0 && cks[i].value) {
                        free(last);
                        last = fx_fmt("%.*s", (int)cks[i].value_len, cks[i].value);
                }
        h_msgs_free(cks, ncks);
        ok(last && fx_lsn(last) > fx_lsn(before_b) && fx_lsn(last) <= fx_lsn(after_b),
           "the last checkpoint for %s (%s) is the end of B's transaction (in (%s, %s])", key,
           last ? last : "none", before_b, after_b);

        /* The slot's confirmations lost: the copy from before A replaces it. */
        h_pg_exec(fc.c, "SELECT pg_drop_replication_slot('%s')", fc.slot);
        h_pg_exec(fc.c, "SELECT pg_copy_logical_replication_slot('%s', '%s')", copy, fc.slot);
        h_pg_exec(fc.c, "SELECT pg_drop_replication_slot('%s')", copy);
        fx_slot_t sl = fx_slot(fc.c, fc.slot);
        ok(sl.confirmed < fx_lsn(before_b) && sl.confirmed < fx_lsn(after_a),
           "the slot is behind A and B again (confirmed_flush_lsn %X/%X)",
           (unsigned)(sl.confirmed >> 32), (unsigned)sl.confirmed);

        r = fx_case_relay(&fc, "second run: the relay streams");
        char *after_c = insert_event(&fc, ID_C);
        ok(h_pg_wait_confirmed(fc.c, fc.slot, after_c, 60000) >= 0,
           "C committed in Kafka: the slot is confirmed past it (%s)", after_c);
        fx_stop_relay(r, "second run: SIGTERM, exit 0");

        h_msg_t *m;
        size_t n = h_kafka_consume_all(topic, &m);
        int a = count_id(m, n, ID_A), b = count_id(m, n, ID_B), c = count_id(m, n, ID_C);
        h_msgs_free(m, n);
        ok(a == 1 && b == 1 && c == 1 && n == 3,
           "a read_committed consumer reads A, B and C once each (A %d, B %d, C %d, %zu messages)",
           a, b, c, n);
        if (tap_failed)
                h_relay_diag_log(r);
        h_relay_free(r);

        h_kafka_delete_topic(ck_topic);
        h_kafka_delete_topic(topic);
        free(ck_topic), free(key), free(copy), free(topic), free(last);
        free(after_a), free(before_b), free(after_b), free(after_c);
        fx_case_close(&fc, NULL);
        return done_testing();
}
