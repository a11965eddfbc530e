/*
 * 0113-backfill-rls.c - snapshot.mode = initial on an outbox table with
 * row-level security, read by a role that does not bypass it (real
 * PostgreSQL and Kafka).
 *
 * PostgreSQL sends the stream through the slot unfiltered, so every row
 * committed after the slot's creation reaches Kafka. The backfill is an
 * ordinary SELECT: a policy the relay's role is subject to would hide rows
 * from it, and those rows, committed before the slot, would never be sent
 * while the backfill reported itself done. So the relay must not start the
 * backfill then: it stops at start (exit 3, as for other setups the server
 * refuses), names row-level security, the role and the fixes, and leaves
 * no slot, so that a start after the fix backfills every row; outbox-relay
 * check fails it beforehand. Then, with the role given BYPASSRLS, every row
 * reaches Kafka once.
 *
 * The role is named in mixed case ("Rls_..."), and the test runs the very
 * commands the messages name (GRANT ... TO, ALTER ROLE ... BYPASSRLS): an
 * unquoted name would fold to lower case and name a role that does not
 * exist.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define ROWS_A 3 /* rows the policy shows the relay's role */
#define ROWS_B 4 /* rows it hides */

int main(void)
{
        char *db = h_pg_create_db("rls");
        char *role = h_unique_name("rls");
        role[0] = 'R'; /* mixed case: SQL must quote it */
        char *slot = h_unique_name("slot");
        char *aggtype = h_unique_name("rls");
        char topic[256], conninfo[1024], slotset[256], kafkaset[512];
        PGconn *c = h_pg_connect(db);

        snprintf(topic, sizeof(topic), "outbox.event.%s", aggtype);
        h_kafka_create_topic(topic, 1);
        h_pg_create_outbox(c, "outbox");
        h_pg_exec(c, "CREATE PUBLICATION outbox_pub FOR TABLE outbox WITH (publish = 'insert')");
        h_pg_exec(c, "CREATE ROLE \"%s\" LOGIN REPLICATION", role);
        h_pg_exec(c, "ALTER TABLE outbox ENABLE ROW LEVEL SECURITY");
        h_pg_exec(c, "CREATE POLICY only_a ON outbox FOR SELECT USING (aggregateid = 'agg-a')");
        h_pg_exec(c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                  "SELECT gen_random_uuid(), '%s', CASE WHEN i <= %d THEN 'agg-a' ELSE 'agg-b' "
                  "END, 'Ev', jsonb_build_object('i', i) FROM generate_series(1, %d) i",
                  aggtype, ROWS_A, ROWS_A + ROWS_B);

        char *ci = h_pg_conninfo(db);
        snprintf(conninfo, sizeof(conninfo), "postgres.conninfo=%s user=%s", ci, role);
        free(ci);
        snprintf(slotset, sizeof(slotset), "slot.name=%s", slot);
        snprintf(kafkaset, sizeof(kafkaset), "kafka.bootstrap.servers=%s", h_kafka_bootstrap());
        const char *sets[] = {conninfo, kafkaset, slotset, "snapshot.mode=initial", NULL};

        /* Without SELECT the relay stops, naming the GRANT; it must work as named. */
        h_relay_t *relay = h_relay_start(sets);
        is_int(h_relay_wait(relay, 30000), 3, "without SELECT the relay stops at start: exit 3");
        char *rlog = h_relay_log(relay);
        bool granted = h_pg_run_named(c, rlog, "GRANT SELECT ON ", " (snapshot.mode", false);
        ok(granted, "the GRANT the message names runs and grants the mixed-case role");
        if (!granted) /* already failed; the RLS steps below still say their own */
                h_pg_exec(c, "GRANT SELECT ON outbox TO \"%s\"", role);
        free(rlog);
        h_relay_free(relay);

        /* outbox-relay check says so before any start. */
        char *out = NULL, *log = NULL;
        int crc = h_relay_run_cmd("check", NULL, sets, 60000, &out, &log);
        tap_diag("check exit %d:\n%s", crc, out ? out : "");
        char quoted[128];
        snprintf(quoted, sizeof(quoted), "ALTER ROLE \"%s\" BYPASSRLS", role);
        ok(crc != 0 && out && strstr(out, "row-level security") && strstr(out, quoted),
           "check fails the backfill through row-level security and names %s", quoted);
        free(out);
        free(log);

        relay = h_relay_start(sets);
        int rc = h_relay_wait(relay, 20000);
        if (rc < 0) {
                /* Still running: it backfilled what the policy showed. */
                h_kafka_wait_count(topic, ROWS_A, 20000);
                h_relay_signal(relay, SIGTERM);
                h_relay_wait(relay, 30000);
        }
        is_int(rc, 3, "a backfill through row-level security stops the relay at start: exit 3");
        ok(h_relay_wait_log(relay, "row-level security", 0) && h_relay_wait_log(relay, role, 0) &&
           h_relay_wait_log(relay, "BYPASSRLS", 0),
           "the message names row-level security, the role and BYPASSRLS");
        char *fixlog = h_relay_log(relay);
        h_relay_free(relay);
        /* The backfill's temporary slot goes with its session. */
        char slots[256];
        snprintf(slots, sizeof(slots),
                 "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE '%s%%'", slot);
        bool left = true;
        for (int i = 0; i < 100 && (left = h_pg_number(c, slots) > 0); i++)
                h_sleep_ms(100);
        ok(!left, "no slot is left: a start after the fix backfills again");
        is_int((int)h_kafka_count(topic), 0, "nothing reached Kafka");

        /* The fix the message names, as named: the role bypasses the policy. */
        ok(h_pg_run_named(c, fixlog, "ALTER ROLE ", " BYPASSRLS", true),
           "the ALTER ROLE ... BYPASSRLS the message names runs");
        free(fixlog);
        relay = h_relay_start(sets);
        ok(h_relay_wait_log(relay, "backfill done", 30000), "with BYPASSRLS the backfill runs");
        h_pg_exec(c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES "
                  "(gen_random_uuid(), '%s', 'agg-b', 'Ev', '{\"i\": 0}')",
                  aggtype);
        int64_t n = h_kafka_wait_count(topic, ROWS_A + ROWS_B + 1, 30000);
        h_relay_signal(relay, SIGTERM);
        is_int(h_relay_wait(relay, 30000), 0, "clean exit 0");
        h_relay_free(relay);
        is_int((int)n, ROWS_A + ROWS_B + 1,
               "every row reaches Kafka once: the %d backfilled and the streamed one",
               ROWS_A + ROWS_B);

        PQfinish(c);
        h_pg_drop_db(db);
        PGconn *pc = h_pg_connect("postgres");
        h_pg_exec(pc, "DROP ROLE \"%s\"", role);
        PQfinish(pc);
        h_kafka_delete_topic(topic);
        free(db);
        free(role);
        free(slot);
        free(aggtype);
        return done_testing();
}
