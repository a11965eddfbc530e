/*
 * 0158-missing-partition.c - an event whose partition column names a
 * partition its topic does not have, against the real broker.
 *
 * table.fields.additional.placement=part:partition sends the row to the
 * partition its column says. The topic has one partition; a row names
 * partition 5. librdkafka refuses it at once when it knows the topic's
 * partitions (the first session, after an event to partition 0), and in
 * the delivery report when it learns them after the produce (each session
 * after, with a new producer). Either way the relay retries (partitions
 * may be added) and confirms nothing past the event; its message names the
 * topic, the partition and the fixes. It used to tell the operator to
 * create the topic or enable auto.create.topics.enable, which exists.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define BAD "0158bbbb-0000-4000-8000-000000000005"

int main(void)
{
        h_case_t k;
        h_case_open(&k, "mpart", "slot", "mp", 1, H_CASE_PUBLICATION);
        h_pg_exec(k.c, "ALTER TABLE outbox ADD COLUMN part integer");
        const char *sets[] = {k.set_conn, k.set_kafka, k.set_slot,
                              "table.fields.additional.placement=part:partition",
                              "reconnect.backoff.ms=200", NULL};
        h_relay_t *r = h_relay_start(sets);
        ok(h_relay_streams(r, 60000), "relay streams");
        h_pg_exec(k.c, "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload, part) "
                       "VALUES (gen_random_uuid(), '%s', 'a-1', 'T', '{}', 0)",
                  k.aggtype);
        is_int(h_kafka_wait_count(k.topic, 1, 60000), 1, "the event for partition 0 delivered");
        h_pg_exec(k.c, "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload, part) "
                       "VALUES ('" BAD "', '%s', 'a-1', 'T', '{}', 5)",
                  k.aggtype);

        char at_once[512], reported[512];
        snprintf(at_once, sizeof(at_once), "topic \"%s\" has no partition 5, which the event names",
                 k.topic);
        snprintf(reported, sizeof(reported),
                 "could not deliver event to Kafka: topic \"%s\" has no partition 5", k.topic);
        ok(h_relay_wait_log(r, at_once, 60000),
           "refused at once: the message names the topic and the partition");
        ok(h_relay_wait_log(r, reported, 60000),
           "refused in a delivery report: the message names the topic and the partition");
        h_relay_signal(r, SIGTERM);
        is_int(h_relay_wait(r, 30000), 0, "clean stop");
        char *log = h_relay_log(r);
        ok(log && strstr(log, "add partitions to the topic or correct the column") &&
                   !strstr(log, "create the topic"),
           "the message says how to get past it, and not to create the topic");
        if (!log || strstr(log, "create the topic") || !strstr(log, reported))
                h_relay_diag_log(r);
        free(log);
        h_relay_free(r);
        is_int(h_pg_pending_inserts_with(k.c, k.slot, BAD), 1,
               "nothing confirmed past the event: the slot still holds it");
        h_case_close(&k);
        return done_testing();
}
