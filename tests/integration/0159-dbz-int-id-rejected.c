/*
 * 0159-dbz-int-id-rejected.c - an event Kafka refuses, under
 * format.profile=debezium-server with an integer event id, against the
 * real broker.
 *
 * Debezium Server writes each header as a JSON envelope; the id header of
 * a bigint id is {"schema":{"type":"int64",...},"payload":42}. A delivery
 * report names its event by that header, and the error policy remembers a
 * refused event by it until the stream brings the event again. Only a
 * string payload was taken out of the envelope, so a numeric id stayed the
 * whole envelope: the log named the event by it, and the next session
 * looked for "42", did not find the refusal, produced the event with the
 * stream again and was refused again, without end; the event was never
 * dead-lettered and nothing after it was relayed. A string id with a
 * quote did the same: the header holds it JSON-escaped. Now an event is
 * found again by its headers as produced, not by an id text made from
 * them: refused, resent alone, dead-lettered (errors.retries = 0), the
 * next event delivered, the slot confirmed past both, and the log names
 * the integer id's event "42". The log names the string id's event as
 * the row holds it, say "hi": it once showed the header's text with its
 * JSON escapes, say \"hi\".
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* One case: an outbox table whose id column is idtype, the refused event's
 * id bad (SQL literal), the next one's next; named: the log line that must
 * name the refused event (NULL: not checked). */
static void run(const char *idtype, const char *bad, const char *next, const char *named)
{
        h_case_t k;
        h_case_open(&k, "dbzid", "slot", "di", 0, 0);
        h_pg_exec(k.c, "ALTER TABLE outbox DROP COLUMN id");
        h_pg_exec(k.c, "ALTER TABLE outbox ADD COLUMN id %s PRIMARY KEY", idtype);
        char dlq[200], set_dlq[256];
        h_kafka_refusing_topics(k.topic, dlq, sizeof(dlq), set_dlq, sizeof(set_dlq));
        const char *extra[] = {"format.profile=debezium-server", "errors.retries=0",
                               "status.interval.ms=500", NULL};
        h_relay_t *r = h_kafka_refusing_relay(&k, set_dlq, extra);
        ok(h_relay_streams(r, 60000), "%s: relay streams", idtype);
        h_pg_exec(k.c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload, created_at) "
                  "VALUES (%s, '%s', 'a-1', 'Old', '{}', '2001-02-03 04:05:06+00')",
                  bad, k.aggtype);
        h_pg_exec(k.c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                  "VALUES (%s, '%s', 'a-1', 'Next', '{}')",
                  next, k.aggtype);
        char *wal_after = h_pg_wal_lsn(k.c);

        is_int(h_kafka_wait_count(dlq, 1, 90000), 1, "%s: the refused event is dead-lettered",
               idtype);
        is_int(h_kafka_wait_count(k.topic, 1, 60000), 1, "%s: the next event is delivered", idtype);
        ok(h_pg_wait_confirmed(k.c, k.slot, wal_after, 30000) >= 0,
           "%s: the slot is confirmed past both events", idtype);
        h_relay_signal(r, SIGTERM);
        is_int(h_relay_wait(r, 30000), 0, "%s: clean stop", idtype);
        char *log = h_relay_log(r);
        if (named) {
                ok(log && strstr(log, named) && !strstr(log, "\"{\\\"schema"),
                   "%s: the log names the event by its id, not by its header's envelope", idtype);
                if (!log || !strstr(log, named))
                        h_relay_diag_log(r);
        }
        free(log);
        free(wal_after);
        h_kafka_refusing_close(&k, r, dlq);
}

int main(void)
{
        run("bigint", "42", "43", "Kafka rejected event \"42\"");
        run("text", "'say \"hi\"'", "'next'", "Kafka rejected event \"say \"hi\"\"");
        return done_testing();
}
