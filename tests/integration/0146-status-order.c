/*
 * 0146-status-order.c - the standby status updates the relay sends keep
 * write >= flush, as PostgreSQL expects (write >= flush >= apply), and never
 * confirm more than was received.
 *
 * A keepalive whose WAL end is past the last commit (unrelated writes) that
 * arrives while an event is still unacknowledged (kafka.linger.ms=3000
 * holds it) used to raise only the idle position: once Kafka acknowledged
 * the event, the slot was confirmed up to that keepalive's WAL end while
 * the write position stayed at the event's commit, so pg_stat_replication
 * showed flush_lsn above write_lsn for as long as no newer keepalive came.
 *
 * 1. Relay with status.interval.ms=1000 and kafka.linger.ms=3000 streams.
 * 2. One event, then 30 unrelated transactions; the event reaches Kafka and
 *    the slot is confirmed past the unrelated writes.
 * 3. The walsender's row in pg_stat_replication, read three times one
 *    status interval apart: write_lsn >= flush_lsn >= replay_lsn each time.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"

#define STATUS_INTERVAL_MS 1000

int main(void)
{
        fx_case_t fc;
        fx_case_open(&fc, "order", "order");
        PGconn *c = fc.c;
        char topic[256];

        h_pg_create_outbox(c, "outbox");
        h_pg_exec(c, "CREATE TABLE noise (id bigserial PRIMARY KEY, v text)");
        snprintf(topic, sizeof(topic), "outbox.event.%s", fc.suffix);
        h_kafka_create_topic(topic, 1);
        /* fx_sets_init: status.interval.ms=1000 (STATUS_INTERVAL_MS). */
        fx_sets_init(&fc.sets, fc.db, fc.slot, NULL);
        fx_sets_add(&fc.sets, "%s", "kafka.linger.ms=3000");
        h_relay_t *relay = fx_case_relay(&fc, "relay streams");

        h_pg_exec(c, "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                     "VALUES (gen_random_uuid(), '%s', 'agg-1', 'Tick', '{}')",
                     fc.suffix);
        char *lsn_event = h_pg_value(c, "SELECT pg_current_wal_lsn()");
        /* Unrelated writes while the event lingers: the walsender decodes
         * them and sends keepalives with a WAL end past the event's commit. */
        for (int i = 0; i < 30; i++) {
                h_pg_exec(c, "INSERT INTO noise (v) VALUES (md5(random()::text))");
                h_sleep_ms(10);
        }
        char *lsn_noise = h_pg_value(c, "SELECT pg_current_wal_lsn()");
        is_int(h_kafka_wait_count(topic, 1, 60000), 1, "the event is in Kafka");
        ok(h_pg_wait_confirmed(c, fc.slot, lsn_noise, 30000) >= 0,
           "the slot is confirmed past the unrelated writes (%s; the event committed before %s)",
           lsn_noise, lsn_event);

        for (int i = 0; i < 3; i++) {
                char *row = h_pg_value(c,
                                       "SELECT r.write_lsn || ' ' || r.flush_lsn || ' ' || "
                                       "r.replay_lsn || ' ' || (r.write_lsn >= r.flush_lsn "
                                       "AND r.flush_lsn >= r.replay_lsn) "
                                       "FROM pg_replication_slots s JOIN pg_stat_replication r "
                                       "ON r.pid = s.active_pid WHERE s.slot_name = '%s'",
                                       fc.slot);
                char *conf = h_pg_confirmed_lsn(c, fc.slot);
                ok(row && strstr(row, " true") != NULL,
                   "status %d: write >= flush >= apply (write flush apply: %s; slot confirmed %s)",
                   i + 1, row ? row : "(no walsender)", conf ? conf : "(null)");
                free(row);
                free(conf);
                h_sleep_ms(STATUS_INTERVAL_MS);
        }

        h_relay_signal(relay, SIGTERM);
        is_int(h_relay_wait(relay, 60000), 0, "SIGTERM, exit 0");
        h_relay_free(relay);
        is_int(h_kafka_count(topic), 1, "Kafka holds the event once");

        h_kafka_delete_topic(topic);
        free(lsn_event);
        free(lsn_noise);
        fx_case_close(&fc, NULL);
        return done_testing();
}
