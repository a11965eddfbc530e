/*
 * 0225-eos-stale-checkpoint.c - exactly-once, a checkpoint in the topic
 * for our key that lies beyond the server's WAL end: written for a WAL
 * history this server does not have (the database restored from a backup,
 * or a standby promoted before it received that transaction; the system
 * identifier, and so the key, are the same). Skipping the transactions
 * below it, as for a checkpoint of ours, drops this history's
 * transactions there: the relay must stop instead (exit 3), naming the
 * checkpoint, the WAL end and the fix, with nothing confirmed past the
 * events; and the fix it names must work: a tombstone (null value) for the
 * key, after which the relay starts from the slot and delivers them.
 *
 * The relay used to take the checkpoint, skip every event below it and
 * confirm the slot past them: Kafka held none of them (silent loss); a
 * tombstone stopped it with "holds "" for "..." which is not an LSN".
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <librdkafka/rdkafka.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"

#define EVENTS 5

int main(void)
{
        fx_case_t fc;
        char *key;
        char *ck_topic = fx_eos_case_open(&fc, "eosstale", "st", &key);
        /* Far beyond this server's WAL. */
        h_kafka_produce(ck_topic, key, "FF/0");
        char *topic = fx_fmt("outbox.event.st_%s", fc.suffix);

        /* The slot first, then the events: they wait in it. */
        h_pg_exec(fc.c, "SELECT pg_create_logical_replication_slot('%s', 'pgoutput')", fc.slot);
        for (int i = 0; i < EVENTS; i++)
                h_pg_exec(fc.c,
                          "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                          "VALUES (gen_random_uuid(), 'st_%s', 'a-%d', 'E', '{}')",
                          fc.suffix, i);
        char *end = h_pg_value(fc.c, "SELECT pg_current_wal_lsn()");

        h_relay_t *r = h_relay_start(fc.sets.v);
        int rc = h_relay_wait(r, 30000);
        is_int(rc, 3, "the relay stops (exit 3) at a checkpoint beyond the server's WAL");
        char *log = h_relay_log(r);
        ok(strstr(log, "checkpoint FF/0") && strstr(log, "is beyond the server's WAL end") &&
                   strstr(log, "write a tombstone"),
           "naming the checkpoint, the WAL end and the fix");
        free(log);
        if (rc != 3)
                h_relay_diag_log(r);
        if (rc < 0) {
                h_relay_signal(r, SIGKILL);
                h_relay_wait(r, 10000);
        }
        h_relay_free(r);
        fx_slot_t sl = fx_slot(fc.c, fc.slot);
        ok(sl.confirmed < fx_lsn(end), "the slot is not confirmed past the events (before %s)",
           end);

        /* The fix: a tombstone for the key. */
        h_kafka_produce(ck_topic, key, NULL);
        r = h_relay_start(fc.sets.v);
        ok(h_relay_wait_log(r, "streaming from replication slot", 30000),
           "after a tombstone for the key the relay streams");
        /* The high watermark counts the transaction markers too. */
        h_kafka_wait_count(topic, EVENTS, 30000);
        h_msg_t *m;
        size_t n = h_kafka_consume_all(topic, &m);
        h_msgs_free(m, n);
        is_int((long)n, EVENTS, "and Kafka holds the %d events", EVENTS);
        if (n != EVENTS)
                h_relay_diag_log(r);
        fx_stop_relay(r, "SIGTERM: exit 0");
        h_relay_free(r);

        h_kafka_delete_topic(ck_topic);
        free(ck_topic), free(key), free(topic), free(end);
        fx_case_close(&fc, NULL);
        return done_testing();
}
