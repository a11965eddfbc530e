/*
 * 0103-idle-advance.c - the slot's confirmed position follows the WAL while
 * only unpublished tables are written, and never passes an event that Kafka
 * has not acknowledged.
 *
 * 1. With status.interval.ms=1000, some outbox events are relayed; then only
 *    an unrelated table is written (200 small transactions over ~3 s). The
 *    slot's confirmed_flush_lsn must reach the WAL position taken after
 *    those writes (polled for up to 10 s: a bound, not a speed test), so an
 *    idle outbox does not make PostgreSQL keep WAL forever.
 * 2. A relay whose producer holds messages back (kafka.linger.ms=120000)
 *    reads an event that Kafka therefore does not acknowledge for minutes,
 *    while unrelated writes go on: the confirmed position must stay before
 *    that event's transaction, also after a clean stop (whose drain gives
 *    up after shutdown.timeout.ms), and the slot must still hold the event.
 * 3. The next relay (default linger) sends it once and moves past it.
 *
 * (A topic with min.insync.replicas=2 on the one-broker cluster does not
 * hold messages back: Kafka 4.3 accepts them, so linger.ms it is.)
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <librdkafka/rdkafka.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define STATUS_INTERVAL_MS 1000
#define FIRST_EVENTS       10
#define NOISE_TXNS         200

/* Unrelated writes: n one-row transactions over about n * gap_ms. */
static void write_noise(PGconn *c, int n, int gap_ms)
{
        for (int i = 0; i < n; i++) {
                h_pg_exec(c, "INSERT INTO noise (v) VALUES (md5(random()::text))");
                h_sleep_ms(gap_ms);
        }
}

static char *insert_event(PGconn *c, const char *aggtype, int i)
{
        return h_pg_value(c,
                          "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                          "VALUES (gen_random_uuid(), '%s', 'agg-%d', 'Tick', "
                          "jsonb_build_object('i', %d)) RETURNING id",
                          aggtype, i, i);
}

int main(void)
{
        h_case_t k;
        h_case_open(&k, "idle", "slot_idle", "idle", 1, 0);
        PGconn *c = k.c;
        const char *slot = k.slot, *good_type = k.aggtype, *good_topic = k.topic;
        char set_status[64];

        h_pg_exec(c, "CREATE TABLE noise (id bigserial PRIMARY KEY, v text)");
        snprintf(set_status, sizeof(set_status), "status.interval.ms=%d", STATUS_INTERVAL_MS);
        const char *sets[] = {k.set_conn, k.set_kafka, k.set_slot, set_status,
                              "shutdown.timeout.ms=2000", NULL};
        h_relay_t *relay = h_relay_start(sets);
        ok(h_relay_streams(relay, 60000), "relay streams");

        /* --- 1. idle advance ------------------------------------------- */
        for (int i = 0; i < FIRST_EVENTS; i++)
                free(insert_event(c, good_type, i));
        int64_t got = h_kafka_wait_count(good_topic, FIRST_EVENTS, 60000);
        is_int(got, FIRST_EVENTS, "the %d outbox events are in Kafka", FIRST_EVENTS);
        char *lsn_events = h_pg_wal_lsn(c);

        int64_t t_noise = h_now_ms();
        write_noise(c, NOISE_TXNS, 15);
        char *wal_after = h_pg_wal_lsn(c);
        tap_diag("%d unrelated transactions in %.1f s, WAL %s -> %s", NOISE_TXNS,
                 (h_now_ms() - t_noise) / 1000.0, lsn_events, wal_after);
        int64_t took = h_pg_wait_confirmed(c, slot, wal_after, 10000);
        char *conf1 = h_pg_confirmed_lsn(c, slot);
        ok(took >= 0, "confirmed_flush_lsn %s reached %s, taken after the unrelated writes",
           conf1 ? conf1 : "(null)", wal_after);
        if (took >= 0)
                tap_diag("idle advance: reached %.2f s after the last write (status.interval.ms "
                         "= %d)",
                         took / 1000.0, STATUS_INTERVAL_MS);
        else
                h_relay_diag_log(relay);

        is_int(h_relay_stop(relay, 60000), 0, "first relay: SIGTERM, exit 0");
        h_relay_free(relay);

        /* --- 2. an unacknowledged event holds the position back --------- */
        /* A relay whose producer holds messages for two minutes before
         * sending them (linger.ms, below message.timeout.ms): an event it
         * read stays unacknowledged meanwhile. */
        const char *slow_sets[] = {k.set_conn,
                                   k.set_kafka,
                                   k.set_slot,
                                   set_status,
                                   "shutdown.timeout.ms=2000",
                                   "kafka.linger.ms=120000",
                                   NULL};
        relay = h_relay_start(slow_sets);
        ok(h_relay_streams(relay, 60000), "relay with kafka.linger.ms=120000 streams");
        char *lsn_before = h_pg_wal_lsn(c);
        char *held_id = insert_event(c, good_type, FIRST_EVENTS);
        char *lsn_held = h_pg_wal_lsn(c);
        write_noise(c, NOISE_TXNS, 15);
        char *lsn_noise = h_pg_wal_lsn(c);
        /* First the positive: the relay received the WAL past the event
         * and the unrelated writes (its status updates' write position,
         * pg_stat_replication.write_lsn); then the negative: give it
         * several status intervals to get the confirmation wrong. */
        bool received = false;
        for (int64_t end = h_now_ms() + 30000; !received && h_now_ms() < end; h_sleep_ms(100)) {
                char *w = h_pg_value(c,
                                     "SELECT coalesce(r.write_lsn >= '%s', false) FROM "
                                     "pg_stat_replication r JOIN pg_replication_slots s ON "
                                     "s.active_pid = r.pid WHERE s.slot_name = '%s'",
                                     lsn_noise, slot);
                received = w && strcmp(w, "t") == 0;
                free(w);
        }
        ok(received, "the relay received the WAL past the event and the unrelated writes (%s)",
           lsn_noise);
        h_sleep_ms(4 * STATUS_INTERVAL_MS);
        is_int(h_kafka_count(good_topic), FIRST_EVENTS,
               "the new event is not in Kafka yet (held by linger.ms)");
        char *conf2 = h_pg_confirmed_lsn(c, slot);
        tap_diag("unacknowledged event %s committed between %s and %s; unrelated writes up to "
                 "%s; confirmed_flush_lsn %s",
                 held_id, lsn_before, lsn_held, lsn_noise, conf2 ? conf2 : "(null)");
        ok(conf2 && !h_pg_lsn_ge(c, conf2, lsn_held),
           "while Kafka has not acknowledged it, the slot stays before the event's transaction "
           "although later WAL was read (%s < %s)",
           conf2 ? conf2 : "(null)", lsn_held);

        is_int(h_relay_stop(relay, 60000), 0,
               "SIGTERM with the event unacknowledged: exit 0 after shutdown.timeout.ms");
        ok(h_relay_wait_log(relay, "not acknowledged by Kafka within shutdown.timeout.ms", 0),
           "the relay says the unacknowledged event will be sent again");
        h_relay_free(relay);
        is_int(h_kafka_count(good_topic), FIRST_EVENTS, "the stopped relay did not send it");
        char *conf3 = h_pg_confirmed_lsn(c, slot);
        ok(conf3 && !h_pg_lsn_ge(c, conf3, lsn_held),
           "after the stop the slot is still confirmed only before it (%s < %s)",
           conf3 ? conf3 : "(null)", lsn_held);
        is_int(h_pg_pending_inserts_with(c, slot, held_id), 1,
               "the slot still holds the unacknowledged event for the next relay");

        /* --- 3. the next relay sends it and moves on -------------------- */
        relay = h_relay_start(sets);
        ok(h_relay_streams(relay, 60000), "a relay with the default linger streams");
        got = h_kafka_wait_count(good_topic, FIRST_EVENTS + 1, 60000);
        ok(got >= FIRST_EVENTS + 1, "the held event is delivered by the next relay");
        took = h_pg_wait_confirmed(c, slot, lsn_noise, 10000);
        ok(took >= 0, "and the slot is confirmed past the unrelated writes after it (%s)",
           lsn_noise);
        is_int(h_kafka_count(good_topic), FIRST_EVENTS + 1, "Kafka holds every event once");
        is_int(h_relay_stop(relay, 60000), 0, "SIGTERM, exit 0");
        h_relay_free(relay);

        /* --- 4. the status interval against the server's timeout -------- */
        /* SHOW prints a timeout in the largest unit that divides it, so 24h
         * reads "1d"; 20s reads "20s" and halves a 40 s interval. */
        static const struct {
                const char *wst, *shown;
                bool lowered;
        } wst_cases[] = {{"24h", "1d", false}, {"20s", "20s", true}};
        for (size_t i = 0; i < sizeof(wst_cases) / sizeof(wst_cases[0]); i++) {
                char set_wst[640];
                snprintf(set_wst, sizeof(set_wst),
                         "postgres.conninfo=%s options='-c wal_sender_timeout=%s'", k.conninfo,
                         wst_cases[i].wst);
                const char *wsets[] = {set_wst, k.set_kafka, k.set_slot, "status.interval.ms=40000",
                                       NULL};
                relay = h_relay_start(wsets);
                ok(h_relay_streams(relay, 60000),
                   "wal_sender_timeout %s (shown \"%s\"): the relay streams", wst_cases[i].wst,
                   wst_cases[i].shown);
                bool said = h_relay_wait_log(relay, "status.interval.ms lowered", 0);
                if (!ok(said == wst_cases[i].lowered, "  status.interval.ms 40000 %s",
                        wst_cases[i].lowered ? "lowered to 10000, half of it"
                                             : "kept: not more than half of it"))
                        h_relay_diag_log(relay);
                if (wst_cases[i].lowered)
                        ok(h_relay_wait_log(relay, "lowered from 40000 to 10000", 0),
                           "  by exactly half of 20 s");
                is_int(h_relay_stop(relay, 60000), 0, "  SIGTERM, exit 0");
                h_relay_free(relay);
        }

        free(lsn_events);
        free(wal_after);
        free(conf1);
        free(conf2);
        free(conf3);
        free(lsn_before);
        free(lsn_held);
        free(lsn_noise);
        free(held_id);
        h_case_close(&k);
        return done_testing();
}
