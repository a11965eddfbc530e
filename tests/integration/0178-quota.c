/*
 * 0178-quota.c - a producer quota on the relay's client id while it streams
 * (kafka-configs --alter --add-config producer_byte_rate=... --entity-type
 * clients), on the real broker: throttling must slow the relay, never lose,
 * reorder or misreport.
 *
 * 20 aggregates x 10 versions of about 300 bytes under a quota of 2 kB/s
 * (the broker delays its answers); a clean stop (SIGTERM) in the middle of
 * the throttled stream, which must confirm only what Kafka acknowledged;
 * a second relay finishes. Checked from Kafka and PostgreSQL: every event
 * present, each aggregate's first occurrences in commit order, the slot
 * confirmed past the end, no dead-lettered or refused event.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define AGGS 20
#define VERSIONS 10

static void quota(const char *client, const char *op)
{
        char cmd[1024];
        const char *sql = getenv("RELAY_SQL_DIR"); /* <source>/sql */
        snprintf(cmd, sizeof(cmd),
                 "java -cp '%s/../tests/env/kafka/libs/*' kafka.admin.ConfigCommand "
                 "--bootstrap-server %s --alter %s --entity-type clients --entity-name %s >&2",
                 sql ? sql : "..", h_kafka_bootstrap(), op, client);
        if (system(cmd) != 0)
                tap_bail("could not run: %s", cmd);
}

int main(void)
{
        h_case_t k;
        h_case_open(&k, "quota", "slot", "qu", 4, H_CASE_PUBLICATION);
        char *client = h_unique_name("quota");
        char set_client[200];
        snprintf(set_client, sizeof(set_client), "kafka.client.id=%s", client);
        quota(client, "--add-config producer_byte_rate=2048");
        const char *sets[] = {k.set_conn, k.set_kafka, k.set_slot, set_client, NULL};
        h_relay_t *r = h_relay_start(sets);
        ok(h_relay_streams(r, 60000), "relay streams");
        for (int v = 1; v <= VERSIONS; v++)
                h_pg_exec(k.c,
                          "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                          "SELECT ('00000000-0000-4000-8000-' || lpad(a::text, 4, '0') || "
                          "lpad('%d', 8, '0'))::uuid, '%s', 'agg-' || a, 'T', "
                          "jsonb_build_object('v', %d, 'pad', repeat('q', 200)) "
                          "FROM generate_series(0, %d) a",
                          v, k.aggtype, v, AGGS - 1);
        char *wal = h_pg_value(k.c, "SELECT pg_current_wal_lsn()");
        int64_t part = h_kafka_wait_count(k.topic, AGGS * VERSIONS / 4, 120000);
        tap_diag("stopping with %lld of %d events in Kafka", (long long)part, AGGS * VERSIONS);
        h_relay_signal(r, SIGTERM);
        int rc = h_relay_wait(r, 120000);
        is_int(rc, 0, "clean stop while throttled");
        if (rc != 0)
                h_relay_diag_log(r);
        int64_t at_stop = h_kafka_count(k.topic);
        int64_t pending = h_pg_pending_inserts_with(k.c, k.slot, "00000000-0000-4000-8000-");
        tap_diag("at the stop: %lld in Kafka, %lld left in the slot", (long long)at_stop,
                 (long long)pending);
        ok(at_stop + pending >= AGGS * VERSIONS,
           "nothing confirmed that Kafka does not hold (Kafka + slot cover every event)");
        h_relay_free(r);

        r = h_relay_start(sets);
        ok(h_relay_streams(r, 60000), "second relay streams");
        ok(h_pg_wait_confirmed(k.c, k.slot, wal, 300000) >= 0, "slot confirmed past every event");
        quota(client, "--delete-config producer_byte_rate");

        h_msg_t *m;
        size_t n = h_kafka_consume_all(k.topic, &m);
        int want[AGGS];
        for (int a = 0; a < AGGS; a++)
                want[a] = VERSIONS;
        h_versions_t t;
        h_versions_init(&t, AGGS, want);
        int stray = 0;
        for (size_t i = 0; i < n; i++) {
                int a, v;
                if (!h_msg_agg_version(&m[i], &a, &v)) {
                        stray++;
                        continue;
                }
                if (a < 0 || a >= AGGS || v < 1 || v > VERSIONS) {
                        stray++;
                        continue;
                }
                h_versions_add(&t, a, v);
        }
        h_msgs_free(m, n);
        h_versions_finish(&t, want);
        is_int(t.missing, 0, "every committed event in Kafka");
        is_int(t.out_of_order, 0, "each aggregate's first occurrences in commit order");
        is_int(stray, 0, "nothing but the events");
        tap_diag("FIGURES quota: events=%d duplicates=%ld", AGGS * VERSIONS, t.duplicates);
        h_relay_signal(r, SIGTERM);
        is_int(h_relay_wait(r, 60000), 0, "clean stop");
        char *log = h_relay_log(r);
        ok(!strstr(log, "written to dead-letter") && !strstr(log, "Kafka rejected"), "nothing refused or dead-lettered");
        free(log);
        h_relay_free(r);
        free(wal);
        free(client);
        h_case_close(&k);
        return done_testing();
}
