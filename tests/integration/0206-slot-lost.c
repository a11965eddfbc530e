/*
 * 0206-slot-lost.c - the replication slot disappears or is invalidated.
 *
 * (a) Dropped while the relay runs (its walsender terminated, the slot
 *     dropped before the relay reconnects; reconnect.backoff.ms is raised
 *     so the test wins that race): the relay exits with code 5 and a
 *     message naming the consequence ("events may be missing") and the
 *     remedy, and never creates the slot again by itself.
 * (b) The same with slot.recreate = true: the relay creates the slot anew,
 *     says so in a warning, and relays what is written afterwards.
 * (c) wal_status = lost (max_slot_wal_keep_size = 1MB, WAL switched and a
 *     checkpoint while the relay is stopped): a relay started on it exits
 *     with code 5 and "wal_status = lost", leaving the slot alone; with
 *     slot.recreate = true it drops and recreates it and streams; status
 *     exits 5 and says the slot is lost (not that its WAL is unlimited).
 *
 * max_slot_wal_keep_size is reset (ALTER SYSTEM RESET + reload) however the
 * test ends.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"

static long long g_inserted;

static void insert_events(PGconn *c, const char *aggtype, int n)
{
        h_pg_exec(c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                  "SELECT gen_random_uuid(), '%s', 'agg-' || (g %% 10), 'Ping', "
                  "jsonb_build_object('i', g) FROM generate_series(1, %d) g",
                  aggtype, n);
        g_inserted += n;
}

static bool slot_exists(PGconn *c, const char *slot)
{
        char *v = h_pg_value(c, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '%s'",
                             slot);
        bool e = v && strcmp(v, "1") == 0;
        free(v);
        return e;
}

/* Terminate the slot's walsender and drop the slot before the relay gets
 * it back; true when dropped. */
static bool kill_and_drop(PGconn *c, const char *slot, int *attempts)
{
        int64_t deadline = h_now_ms() + 30000;
        char err[512];
        *attempts = 0;
        while (h_now_ms() < deadline) {
                (*attempts)++;
                h_pg_try(c, err, sizeof(err),
                         "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots "
                         "WHERE slot_name = '%s' AND active_pid IS NOT NULL",
                         slot);
                if (h_pg_try(c, err, sizeof(err), "SELECT pg_drop_replication_slot('%s')",
                             slot) == 0)
                        return true;
                h_sleep_ms(20);
        }
        tap_diag("could not drop slot %s: %s", slot, err);
        return false;
}

static void start_sets(fx_sets_t *s, const char *db, const char *slot, bool recreate)
{
        fx_sets_init(s, db, slot, NULL);
        fx_sets_add(s, "%s", "reconnect.backoff.ms=3000");
        fx_sets_add(s, "%s", "reconnect.backoff.max.ms=6000");
        if (recreate)
                fx_sets_add(s, "%s", "slot.recreate=true");
}

int main(void)
{
        char *db = h_pg_create_db("slotlost");
        char *aggtype = h_unique_name("sl");
        char *topic = fx_fmt("outbox.event.%s", aggtype);
        PGconn *c = h_pg_connect(db);
        fx_sets_t sets;
        int attempts;

        h_pg_create_outbox(c, "outbox");
        h_kafka_create_topic(topic, 1);

        /* --- (a) dropped while running ------------------------------------------ */
        char *slot_a = h_unique_name("slot_la");
        start_sets(&sets, db, slot_a, false);
        h_relay_t *r = h_relay_start(sets.v);
        ok(h_relay_wait_log(r, "streaming from replication slot", 60000), "(a) relay streams");
        insert_events(c, aggtype, 200);
        is_int(h_kafka_wait_count(topic, g_inserted, 60000), g_inserted, "(a) 200 events relayed");
        bool dropped = kill_and_drop(c, slot_a, &attempts);
        ok(dropped, "(a) walsender terminated and slot dropped (%d tries)", attempts);
        insert_events(c, aggtype, 50); /* written while no slot exists: lost to the relay */
        int rc = h_relay_wait(r, 60000);
        is_int(rc, 5, "(a) the relay exits with code 5 (slot lost)");
        char *log = h_relay_log(r);
        ok(strstr(log, "events may be missing") != NULL, "(a) the message names the consequence");
        ok(strstr(log, "check the outbox") != NULL && strstr(log, "restart the relay") != NULL,
           "(a) and the remedy");
        is_int(fx_count(log, "created replication slot"), 1,
               "(a) the slot was created once, at the first start, never again");
        if (rc != 5 || !strstr(log, "events may be missing"))
                h_relay_diag_log(r);
        else
                for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n"))
                        if (strstr(line, "may be missing"))
                                tap_diag("(a) relay said: %s", line);
        free(log);
        ok(!slot_exists(c, slot_a), "(a) the slot does not exist after the relay exited");
        h_relay_free(r);
        fx_sets_free(&sets);

        /* --- (b) dropped while running, slot.recreate = true ------------------- */
        char *slot_b = h_unique_name("slot_lb");
        start_sets(&sets, db, slot_b, true);
        r = h_relay_start(sets.v);
        ok(h_relay_wait_log(r, "streaming from replication slot", 60000), "(b) relay streams");
        long long base = h_kafka_count(topic);
        insert_events(c, aggtype, 100);
        is_int(h_kafka_wait_count(topic, base + 100, 60000), base + 100, "(b) 100 events relayed");
        int anew_before = fx_log_count(r, "anew");
        dropped = kill_and_drop(c, slot_b, &attempts);
        ok(dropped, "(b) walsender terminated and slot dropped (%d tries)", attempts);
        ok(fx_wait_log_n(r, "streaming from replication slot", 2, 60000),
           "(b) the relay streams again");
        is_int(fx_log_count(r, "anew") - anew_before, 1,
               "(b) it logged that it created the slot anew");
        char *wline = h_relay_log(r);
        for (char *line = strtok(wline, "\n"); line; line = strtok(NULL, "\n"))
                if (strstr(line, "anew"))
                        tap_diag("(b) relay said: %s", line);
        free(wline);
        if (anew_before > 0)
                tap_diag("(b) note: the first creation with slot.recreate = true was also logged "
                         "as created \"anew\" (%d line(s)) although no slot existed before",
                         anew_before);
        ok(slot_exists(c, slot_b), "(b) the slot exists again");
        is_int(h_relay_wait(r, 0), -1, "(b) the relay keeps running");
        base = h_kafka_count(topic);
        insert_events(c, aggtype, 100);
        is_int(h_kafka_wait_count(topic, base + 100, 60000), base + 100,
               "(b) events written after the recreation are relayed");
        h_relay_signal(r, SIGTERM);
        is_int(h_relay_wait(r, 60000), 0, "(b) SIGTERM: exit 0");
        h_relay_free(r);
        fx_sets_free(&sets);

        /* --- (c) wal_status = lost ------------------------------------------------- */
        char *slot_c = h_unique_name("slot_lc");
        start_sets(&sets, db, slot_c, false);
        r = h_relay_start(sets.v);
        ok(h_relay_wait_log(r, "streaming from replication slot", 60000), "(c) relay streams");
        base = h_kafka_count(topic);
        insert_events(c, aggtype, 100);
        is_int(h_kafka_wait_count(topic, base + 100, 60000), base + 100, "(c) 100 events relayed");
        h_relay_signal(r, SIGTERM);
        is_int(h_relay_wait(r, 60000), 0, "(c) relay stopped");
        h_relay_free(r);

        fx_pg_set("max_slot_wal_keep_size", "1MB");
        fx_slot_t s = fx_slot(c, slot_c);
        int switches = 0;
        for (int i = 0; i < 20 && strcmp(s.wal_status, "lost") != 0; i++) {
                for (int k = 0; k < 3; k++) {
                        insert_events(c, aggtype, 10);
                        h_pg_exec(c, "SELECT pg_switch_wal()");
                        switches++;
                }
                h_pg_exec(c, "CHECKPOINT");
                s = fx_slot(c, slot_c);
        }
        /* status while max_slot_wal_keep_size is still 1MB: the slot is lost, not
         * unlimited (safe_wal_size is NULL for both). */
        char *st_out = NULL, *st_log = NULL;
        const char *st_opts[] = {"--json", NULL};
        char *st_json = NULL;
        rc = h_relay_run_cmd("status", st_opts, sets.v, 30000, &st_json, &st_log);
        is_int(rc, 5, "(c) status --json exits 5 on the lost slot");
        free(st_log);
        rc = h_relay_run_cmd("status", NULL, sets.v, 30000, &st_out, &st_log);
        fx_pg_reset("max_slot_wal_keep_size");
        is_str(s.wal_status, "lost", "(c) the slot is invalidated after %d WAL switches", switches);
        is_int(rc, 5, "(c) status exits 5 on the lost slot");
        ok(strstr(st_out, "wal_status           lost: ") != NULL && !strstr(st_out, "unlimited") &&
               strstr(st_out, "restart_lsn          none") != NULL,
           "(c) status says lost, not \"safe_wal_size unlimited\", and no restart_lsn (NULL)");
        if (!strstr(st_out, "lost: ") || strstr(st_out, "0/0"))
                tap_diag("status stdout: %s; stderr: %s", st_out, st_log);
        free(st_out);
        free(st_log);
        char *no_restart = h_pg_value(c, "SELECT restart_lsn IS NULL FROM pg_replication_slots "
                                         "WHERE slot_name = '%s'", slot_c);
        ok(no_restart && strcmp(no_restart, "t") == 0,
           "(c) pg_replication_slots holds no restart_lsn for it");
        free(no_restart);
        const char *st_wal = NULL;
        json_t *st_doc = json_loads(st_json, 0, NULL);
        if (st_doc)
                st_wal = json_string_value(json_object_get(st_doc, "wal_status"));
        ok(st_doc && json_is_null(json_object_get(st_doc, "restart_lsn")) &&
               json_is_null(json_object_get(st_doc, "retained_bytes")) &&
               json_is_null(json_object_get(st_doc, "safe_wal_size")) && st_wal &&
               strcmp(st_wal, "lost") == 0,
           "(c) status --json: wal_status lost, restart_lsn, retained_bytes and safe_wal_size null");
        if (!st_doc || !json_is_null(json_object_get(st_doc, "restart_lsn")))
                tap_diag("status --json: %s", st_json);
        json_decref(st_doc);
        free(st_json);

        r = h_relay_start(sets.v);
        rc = h_relay_wait(r, 60000);
        is_int(rc, 5, "(c) a relay started on it exits with code 5");
        log = h_relay_log(r);
        ok(strstr(log, "wal_status = lost") != NULL && strstr(log, "events may be missing") != NULL,
           "(c) the message says wal_status = lost and that events may be missing");
        if (rc != 5)
                h_relay_diag_log(r);
        free(log);
        s = fx_slot(c, slot_c);
        ok(s.exists && strcmp(s.wal_status, "lost") == 0, "(c) the invalidated slot is left alone");
        h_relay_free(r);
        fx_sets_free(&sets);

        start_sets(&sets, db, slot_c, true);
        r = h_relay_start(sets.v);
        ok(h_relay_wait_log(r, "streaming from replication slot", 60000),
           "(c) with slot.recreate = true the relay streams");
        ok(fx_log_count(r, "anew") >= 1, "(c) and warns that it created the slot anew");
        s = fx_slot(c, slot_c);
        ok(s.exists && strcmp(s.wal_status, "lost") != 0, "(c) the slot is usable again (%s)",
           s.wal_status);
        base = h_kafka_count(topic);
        insert_events(c, aggtype, 100);
        is_int(h_kafka_wait_count(topic, base + 100, 60000), base + 100,
               "(c) events written after the recreation are relayed");
        h_relay_signal(r, SIGTERM);
        is_int(h_relay_wait(r, 60000), 0, "(c) SIGTERM: exit 0");
        h_relay_free(r);
        fx_sets_free(&sets);

        tap_diag("FIGURES slot-lost: events_written=%lld kafka=%lld (events written while no slot "
                 "existed are not relayed: the documented consequence)",
                 g_inserted, (long long)h_kafka_count(topic));

        PQfinish(c);
        h_pg_drop_db(db);
        h_kafka_delete_topic(topic);
        free(slot_a);
        free(slot_b);
        free(slot_c);
        free(topic);
        free(aggtype);
        free(db);
        return done_testing();
}
