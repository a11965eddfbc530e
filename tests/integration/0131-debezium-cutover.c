/*
 * 0131-debezium-cutover.c - the cutover from Debezium to the relay without a
 * gap (README, "Coming from Debezium", cutover): Debezium 3.6.1 streams an
 * outbox table into Kafka as a Kafka Connect worker would (tests/bench/
 * debezium's OutboxCutover: the connector JSON's converters, Kafka's default
 * partitioner, file offsets flushed every CUT_FLUSH_MS) while a writer
 * commits events for NAGG aggregates; `outbox-relay check` on the same
 * connector JSON sees Debezium's slot in use (a warning); Debezium is
 * stopped gracefully (SIGTERM) with the writer still going; check then
 * fails Debezium's publication (it publishes updates, deletes and
 * truncates) and names the ALTER PUBLICATION that fixes it, and once that
 * ran passes, showing the slot free at Debezium's confirmed position; the
 * relay starts with --debezium-config on that JSON (Debezium's slot and
 * publication, the matching format.profile) and takes over; the writer goes
 * on, then stops, and the relay catches up.
 *
 * What Kafka holds is then checked against what was committed:
 *  - no event id missing across the switch;
 *  - the duplicates are exactly the events Debezium sent after the position
 *    it had confirmed to the slot: Debezium confirms the end of the last
 *    transaction in its committed offsets (lsn_commit), which with one
 *    writer (transactions do not interleave) is where the next
 *    transaction's first change begins, and PostgreSQL sends the relay
 *    every transaction committed from there. So every event whose change
 *    LSN (Debezium's source offset) is at or past the slot's
 *    confirmed_flush_lsn at the switch comes twice, once from each, byte
 *    for byte the same (but the documented __debezium.context.runId); no
 *    other event comes twice (a confirmed position inside a transaction
 *    would show as events resent below it);
 *  - every aggregate stays on one partition, before and after the switch,
 *    and its events keep their commit order (first copies);
 *  - the relay created no slot and no publication: it used Debezium's.
 *
 * The first run then rolls back (README): a checkpoint while the relay ran
 * has moved the slot's restart_lsn past Debezium's stored offsets (checked),
 * as any longer relay run does; Debezium started again with its offsets
 * unchanged and "offset.mismatch.strategy": "trust_slot" added to its
 * configuration resumes from the slot, i.e. after the relay: none of the
 * events before is sent again, every event after once. (Without the option
 * Debezium 3.6.1 refuses to start: its offsets are "no longer available on
 * the server".)
 *
 * Three runs: connect-string and connect-json with the graceful stop (the
 * engine commits its offsets as it closes, so mostly only the transaction
 * in flight comes twice), and connect-string with Debezium killed (SIGKILL: a
 * crash; what it sent since its last periodic offset commit, up to
 * offset.flush.interval.ms of events, comes twice). The same checks hold
 * for all three. RELAY_TEST_CUTOVER_PROFILES=connect-json runs the runs of
 * the profiles it names, by hand. Needs java and mvn (h_debezium_build).
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "relay/lsn.h"

#define NAGG 200       /* aggregates; 31 * g mod NAGG visits each once every NAGG events */
#define PARTS 6        /* partitions of the topic */
#define CUT_FLUSH_MS 2000 /* Debezium's offset.flush.interval.ms (Connect's default: 60000) */
#define BEFORE 4000    /* events Debezium sends before it is stopped (at least) */
#define AFTER 3000     /* events the relay sends after the switch (at least) */

static const struct {
        const char *profile;
        bool kill9;    /* Debezium killed rather than stopped */
        bool rollback; /* then back to Debezium */
} runs[] = {{"connect-string", false, true}, {"connect-json", false, false},
            {"connect-string", true, false}};

/* --- the writer: one connection, so commits (and their changes) follow each other in the WAL */

struct writer {
        const char *db;
        const char *table;
        const char *type;
        atomic_bool stop;
        atomic_long committed; /* events 1..committed are committed */
        pthread_t thread;
};

static void *write_loop(void *arg)
{
        struct writer *w = arg;
        PGconn *c = h_pg_connect(w->db);
        long n = atomic_load(&w->committed);
        for (unsigned tx = 0; !atomic_load(&w->stop); tx++) {
                long k = 1 + tx % 8;
                /* The id ends in the event number: the check maps ids back to it. */
                h_pg_exec(c,
                          "INSERT INTO %s (id, aggregatetype, aggregateid, type, payload) SELECT "
                          "('00000000-0000-4000-8000-' || lpad(g::text, 12, '0'))::uuid, '%s', "
                          "'agg-' || (g * 31 %% %d), 'Ev', jsonb_build_object('n', g) "
                          "FROM generate_series(%ld, %ld) g",
                          w->table, w->type, NAGG, n + 1, n + k);
                n += k;
                atomic_store(&w->committed, n);
                h_sleep_ms(2);
        }
        PQfinish(c);
        return NULL;
}

/* --- what Kafka holds -------------------------------------------------- */

/* The event number in an id header ("...-8000-000000001234", quoted or not); 0 if none. */
static long event_number(const h_msg_t *m)
{
        size_t len;
        const char *id = h_msg_header(m, "id", &len);
        if (!id || len < 12)
                return 0;
        const char *p = id + len - 12;
        if (id[len - 1] == '"')
                p--;
        char digits[13];
        memcpy(digits, p, 12);
        digits[12] = '\0';
        return strtol(digits, NULL, 10);
}

static bool same_bytes(const char *a, size_t al, const char *b, size_t bl)
{
        if (!a || !b)
                return a == b;
        return al == bl && memcmp(a, b, al) == 0;
}

/* Two copies of one event: same partition, key, value, header names and bytes (not the runId). */
static bool same_message(const h_msg_t *a, const h_msg_t *b)
{
        if (a->partition != b->partition || !same_bytes(a->key, a->key_len, b->key, b->key_len) ||
            !same_bytes(a->value, a->value_len, b->value, b->value_len) ||
            a->nheaders != b->nheaders)
                return false;
        for (size_t h = 0; h < a->nheaders; h++) {
                if (strcmp(a->header_names[h], b->header_names[h]) != 0)
                        return false;
                if (strcmp(a->header_names[h], "__debezium.context.runId") != 0 &&
                    !same_bytes(a->header_values[h], a->header_lens[h], b->header_values[h],
                                b->header_lens[h]))
                        return false;
        }
        return true;
}

/* The slots of this test's database: other tests run beside it with theirs. */
#define SLOTS_HERE "SELECT count(*) FROM pg_replication_slots WHERE database = current_database()"

static long count_rows(PGconn *c, const char *sql)
{
        char *v = h_pg_value(c, "%s", sql);
        long n = v ? strtol(v, NULL, 10) : -1;
        free(v);
        return n;
}

/* The Connect worker's properties: Kafka, the offsets file and its flush
 * interval, and the file the cutover program writes what it sent to. */
static void write_worker(const char *worker, const char *offsets, const char *events)
{
        h_write_file(worker,
                "bootstrap.servers=%s\noffset.storage.file.filename=%s\n"
                "offset.flush.interval.ms=%d\ncutover.events=%s\n",
                h_kafka_bootstrap(), offsets, CUT_FLUSH_MS, events);
}

/* The connector JSON for the rollback (README): conf with
 * "offset.mismatch.strategy": "trust_slot" added, Debezium 3.4's option that
 * moves stored offsets older than the slot up to the slot. Without it
 * Debezium refuses offsets behind the slot's restart_lsn ("... is no longer
 * available on the server"), which a relay run moves past them. */
static void write_rollback_conf(const char *conf, const char *conf2)
{
        FILE *in = fopen(conf, "r");
        FILE *out = fopen(conf2, "w");
        char line[512];
        if (!in || !out)
                tap_bail("could not copy %s to %s", conf, conf2);
        while (fgets(line, sizeof(line), in)) {
                fputs(line, out);
                if (strstr(line, "\"config\": {"))
                        fputs("  \"offset.mismatch.strategy\": \"trust_slot\",\n", out);
        }
        fclose(in);
        if (fclose(out) != 0)
                tap_bail("could not write %s", conf2);
}

/* Debezium (the cutover program) started and streaming within 90 s, or bail
 * saying what did not happen. */
static h_relay_t *debezium_streaming(const char *const *jargs, const char *profile,
                                     const char *what)
{
        h_relay_t *dbz = h_debezium_start("dev.outboxrelay.cutover.OutboxCutover", jargs);
        if (!h_relay_wait_log(dbz, "CUTOVER streaming", 90000)) {
                h_relay_diag_log(dbz);
                tap_bail("%s: Debezium did not %s within 90 s", profile, what);
        }
        return dbz;
}

static void run(PGconn *c, const char *db, const char *profile_name, bool kill9, bool rollback)
{
        char profile[64]; /* the label of every line */
        snprintf(profile, sizeof(profile), "%s, %s", profile_name, kill9 ? "killed" : "graceful stop");
        char *sfx = h_unique_name("c");
        char table[64], type[64], topic[128], slot[64], pub[64];
        snprintf(table, sizeof(table), "outbox_%s", sfx);
        snprintf(type, sizeof(type), "cut_%s", sfx);
        snprintf(topic, sizeof(topic), "outbox.event.%s", type);
        snprintf(slot, sizeof(slot), "dbz_%s", sfx);
        snprintf(pub, sizeof(pub), "dbz_pub_%s", sfx);
        h_pg_create_outbox(c, table);
        h_kafka_create_topic(topic, PARTS);

        /* The connector JSON both read: Debezium's documented outbox setup,
         * its publication created by Debezium (filtered), converters by profile. */
        bool json = strcmp(profile_name, "connect-json") == 0;
        char conf[256], worker[256], events[256], offsets[256];
        snprintf(conf, sizeof(conf), "/tmp/relay-dbzcut-%s.json", sfx);
        snprintf(worker, sizeof(worker), "/tmp/relay-dbzcut-%s.properties", sfx);
        snprintf(events, sizeof(events), "/tmp/relay-dbzcut-%s.events", sfx);
        snprintf(offsets, sizeof(offsets), "/tmp/relay-dbzcut-%s.offsets", sfx);
        const char *conv = json ? "org.apache.kafka.connect.json.JsonConverter"
                                : "org.apache.kafka.connect.storage.StringConverter";
        h_write_file(conf,
                "{\"name\": \"outbox-%s\", \"config\": {\n"
                "  \"connector.class\": \"io.debezium.connector.postgresql.PostgresConnector\",\n"
                "  \"tasks.max\": \"1\",\n"
                "  \"plugin.name\": \"pgoutput\",\n"
                "  \"slot.name\": \"%s\",\n"
                "  \"publication.name\": \"%s\",\n"
                "  \"publication.autocreate.mode\": \"filtered\",\n"
                "  \"database.hostname\": \"%s\", \"database.port\": \"%s\",\n"
                "  \"database.user\": \"%s\", \"database.password\": \"\",\n"
                "  \"database.dbname\": \"%s\",\n"
                "  \"topic.prefix\": \"cut\",\n"
                "  \"table.include.list\": \"public.%s\",\n"
                "  \"snapshot.mode\": \"no_data\",\n"
                "  \"tombstones.on.delete\": \"false\",\n"
                "  \"poll.interval.ms\": \"50\",\n"
                "  \"transforms\": \"outbox\",\n"
                "  \"transforms.outbox.type\": \"io.debezium.transforms.outbox.EventRouter\",\n"
                "  \"key.converter\": \"%s\",\n"
                "  \"value.converter\": \"%s\"%s\n"
                "}}\n",
                sfx, slot, pub, h_env("RELAY_TEST_PGHOST"), h_env("RELAY_TEST_PGPORT"),
                h_env("RELAY_TEST_PGUSER"), db, table, conv, conv,
                json ? ",\n  \"key.converter.schemas.enable\": \"false\",\n"
                       "  \"value.converter.schemas.enable\": \"false\""
                     : "");
        write_worker(worker, offsets, events);

        /* 1. Debezium streams under load. */
        const char *jargs[] = {conf, worker, NULL};
        h_relay_t *dbz = debezium_streaming(jargs, profile, "start streaming");
        long slots0 = count_rows(c, SLOTS_HERE);
        long pubs0 = count_rows(c, "SELECT count(*) FROM pg_publication");
        struct writer w = {.db = db, .table = table, .type = type};
        atomic_init(&w.stop, false);
        atomic_init(&w.committed, 0);
        if (pthread_create(&w.thread, NULL, write_loop, &w) != 0)
                tap_bail("could not start the writer");
        int64_t got = h_kafka_wait_count(topic, BEFORE, 90000);
        ok(got >= BEFORE, "%s: Debezium streams under load (%lld events in Kafka)", profile,
           (long long)got);

        /* The preflight while Debezium streams (its events arrive): its slot
         * in use is a warning. */
        char set_kafka[256];
        snprintf(set_kafka, sizeof(set_kafka), "kafka.bootstrap.servers=%s", h_kafka_bootstrap());
        const char *opts[] = {"--debezium-config", conf, NULL};
        const char *sets[] = {set_kafka, NULL};
        char *out = NULL, *log = NULL;
        int rc = h_relay_run_cmd("check", opts, sets, 60000, &out, &log);
        char inuse[160];
        snprintf(inuse, sizeof(inuse), "replication slot \"%s\" is in use", slot);
        bool warned = strstr(out, "warning  postgres.slot") && strstr(out, inuse);
        ok(warned, "%s: check while Debezium runs: its slot is in use (a warning; exit %d)", profile,
           rc);
        if (!warned)
                tap_diag("check said:\n%s\n%s", out, log);
        free(out);
        free(log);

        /* 2. Stop Debezium (SIGTERM as the procedure says, or SIGKILL: a
         *    crash), the writer still going. */
        h_relay_signal(dbz, kill9 ? SIGKILL : SIGTERM);
        rc = h_relay_wait(dbz, 60000);
        char *dlog = h_relay_log(dbz);
        bool stopped = strstr(dlog, "CUTOVER stopped") != NULL;
        free(dlog);
        if (kill9) {
                is_int(rc, 128 + SIGKILL, "%s: Debezium killed", profile);
        } else {
                ok(rc >= 0 && stopped,
                   "%s: Debezium stopped gracefully on SIGTERM (engine closed, exit %d)", profile, rc);
                if (!stopped)
                        h_relay_diag_log(dbz);
        }
        long at_stop = atomic_load(&w.committed);

        /* Its slot is free; what it confirmed is where the relay starts. */
        int64_t deadline = h_now_ms() + 30000;
        char *active = NULL;
        while (h_now_ms() < deadline) {
                free(active);
                active = h_pg_value(c, "SELECT active FROM pg_replication_slots WHERE slot_name = '%s'",
                                    slot);
                if (active && strcmp(active, "f") == 0)
                        break;
                h_sleep_ms(100);
        }
        ok(active && strcmp(active, "f") == 0, "%s: Debezium's slot \"%s\" is inactive after the stop",
           profile, slot);
        free(active);
        char *confirmed = h_pg_confirmed_lsn(c, slot);
        relay_lsn_t cut = 0;
        if (!confirmed || relay_lsn_parse(confirmed, &cut) != 0)
                tap_bail("%s: slot %s has no confirmed_flush_lsn", profile, slot);

        /* Per partition, where Debezium's messages end. */
        int64_t boundary[PARTS] = {0};
        h_msg_t *msgs;
        size_t nbefore = h_kafka_consume_all(topic, &msgs);
        for (size_t i = 0; i < nbefore; i++)
                if (msgs[i].partition < PARTS && msgs[i].offset + 1 > boundary[msgs[i].partition])
                        boundary[msgs[i].partition] = msgs[i].offset + 1;
        h_msgs_free(msgs, nbefore);

        /* 3. The documented procedure: check, then start the relay on Debezium's slot. */
        /* Debezium's publication publishes every operation; the relay wants inserts only. */
        rc = h_relay_run_cmd("check", opts, sets, 60000, &out, &log);
        char alter[160];
        snprintf(alter, sizeof(alter), "ALTER PUBLICATION %s SET (publish = 'insert')", pub);
        bool says = strstr(out, "fail     postgres.publication") && strstr(out, alter);
        ok(rc == 3 && says,
           "%s: outbox-relay check on Debezium's setup fails its publication and names the fix "
           "(exit %d)", profile, rc);
        if (rc != 3 || !says)
                tap_diag("check said:\n%s\n%s", out, log);
        free(out);
        free(log);
        h_pg_exec(c, "%s", alter);
        rc = h_relay_run_cmd("check", opts, sets, 60000, &out, &log);
        char free_at[160];
        snprintf(free_at, sizeof(free_at), "not in use, confirmed up to %s", confirmed);
        ok(rc == 0 && strstr(out, free_at),
           "%s: after it, check passes and shows the slot free at Debezium's position %s (exit %d)",
           profile, confirmed, rc);
        if (rc != 0 || !strstr(out, free_at))
                tap_diag("check said:\n%s\n%s", out, log);
        free(out);
        free(log);
        h_relay_t *relay = h_relay_start_cmd(NULL, opts, sets);
        char needle[128];
        snprintf(needle, sizeof(needle), "streaming from replication slot \"%s\"", slot);
        bool streaming = h_relay_wait_log(relay, needle, 60000);
        ok(streaming, "%s: the relay streams from Debezium's slot", profile);
        if (!streaming)
                h_relay_diag_log(relay);
        rc = h_relay_run_cmd("status", opts, sets, 60000, &out, &log);
        ok(rc == 0 && strstr(out, slot) != NULL, "%s: outbox-relay status shows slot %s (exit %d)",
           profile, slot, rc);
        free(out);
        free(log);

        /* 4. The writer goes on, then stops; the relay catches up. A
         *    checkpoint logs the running transactions, so the relay's
         *    confirmations move the slot's restart_lsn past everything
         *    Debezium read, as any relay run longer than a checkpoint or
         *    15 s of writes does (the rollback below depends on it). */
        if (rollback)
                h_pg_exec(c, "CHECKPOINT");
        got = h_kafka_wait_count(topic, (int64_t)nbefore + AFTER, 90000);
        atomic_store(&w.stop, true);
        pthread_join(w.thread, NULL);
        long total = atomic_load(&w.committed);
        char *wal = h_pg_value(c, "SELECT pg_current_wal_lsn()");
        bool caught_up = h_pg_wait_confirmed(c, slot, wal, 90000) >= 0;
        ok(caught_up, "%s: the relay confirmed every event on the slot (%ld committed, %ld of them "
           "after Debezium's stop)", profile, total, total - at_stop);
        h_relay_signal(relay, SIGTERM);
        is_int(h_relay_wait(relay, 30000), 0, "%s: the relay stops with exit 0", profile);
        char *rlog = h_relay_log(relay);
        ok(!strstr(rlog, "created replication slot") && !strstr(rlog, "created publication") &&
                   count_rows(c, SLOTS_HERE) == slots0 &&
                   count_rows(c, "SELECT count(*) FROM pg_publication") == pubs0,
           "%s: the relay created no slot and no publication (%ld slots, %ld publications)",
           profile, slots0, pubs0);
        free(rlog);

        /* 5. What Kafka holds. Debezium's acknowledged events and their LSNs: */
        relay_lsn_t *dbz_lsn = calloc((size_t)total + 1, sizeof(*dbz_lsn));
        long dbz_sent = 0, expect_dups = 0;
        FILE *ev = fopen(events, "r");
        char line[256];
        while (ev && dbz_lsn && fgets(line, sizeof(line), ev)) {
                char id[128];
                unsigned long long lsn;
                if (sscanf(line, "%127s %llu", id, &lsn) != 2 || strlen(id) < 12)
                        continue;
                long n = strtol(id + strlen(id) - 12, NULL, 10);
                if (n >= 1 && n <= total) {
                        dbz_lsn[n] = (relay_lsn_t)lsn;
                        dbz_sent++;
                }
        }
        if (ev)
                fclose(ev);

        size_t nmsg = h_kafka_consume_all(topic, &msgs);
        int *seen_dbz = calloc((size_t)total + 1, sizeof(int));
        int *seen_relay = calloc((size_t)total + 1, sizeof(int));
        long *first = calloc((size_t)total + 1, sizeof(long)); /* message index + 1 */
        int agg_part[NAGG], agg_seg[NAGG];
        long agg_max[NAGG];
        long bad_key = 0, bad_id = 0, not_acked = 0, twice_same_side = 0, resent_confirmed = 0,
             unconfirmed_not_resent = 0, differ = 0, split = 0, out_of_order = 0, missing = 0,
             dups = 0;
        if (!dbz_lsn || !seen_dbz || !seen_relay || !first)
                tap_bail("out of memory");
        for (int a = 0; a < NAGG; a++) {
                agg_part[a] = -1;
                agg_seg[a] = 0;
                agg_max[a] = 0;
        }
        for (size_t i = 0; i < nmsg; i++) {
                const h_msg_t *m = &msgs[i];
                long n = event_number(m);
                if (n < 1 || n > total) {
                        bad_id++;
                        continue;
                }
                char key[32];
                snprintf(key, sizeof(key), json ? "\"agg-%ld\"" : "agg-%ld", n * 31 % NAGG);
                if (!same_bytes(m->key, m->key_len, key, strlen(key))) {
                        bad_key++;
                        continue;
                }
                int a = (int)(n * 31 % NAGG);
                bool before = m->partition < PARTS && m->offset < boundary[m->partition];
                agg_seg[a] |= before ? 1 : 2;
                if (agg_part[a] < 0)
                        agg_part[a] = m->partition;
                else if (agg_part[a] != m->partition)
                        split++;
                if (before) {
                        if (seen_dbz[n]++)
                                twice_same_side++;
                        if (!dbz_lsn[n])
                                not_acked++;
                } else if (seen_relay[n]++) {
                        twice_same_side++;
                }
                if (first[n]) {
                        dups++;
                        if (!same_message(&msgs[first[n] - 1], m))
                                differ++;
                        continue;
                }
                first[n] = (long)i + 1;
                /* Partition order is offset order: first copies in commit order. */
                if (n <= agg_max[a])
                        out_of_order++;
                agg_max[a] = n;
        }
        long both = 0;
        long dbz_msgs = 0;
        for (long n = 1; n <= total; n++) {
                if (!first[n])
                        missing++;
                if (!seen_dbz[n])
                        continue;
                dbz_msgs++;
                if (dbz_lsn[n] >= cut)
                        expect_dups++;
                if (dbz_lsn[n] < cut && seen_relay[n])
                        resent_confirmed++;
                if (dbz_lsn[n] >= cut && !seen_relay[n])
                        unconfirmed_not_resent++;
        }
        for (int a = 0; a < NAGG; a++)
                if (agg_seg[a] == 3)
                        both++;
        char last[RELAY_LSN_BUFSZ] = "-";
        relay_lsn_t top = 0;
        for (long n = 1; n <= total; n++)
                if (seen_dbz[n] && dbz_lsn[n] > top)
                        top = dbz_lsn[n];
        if (top)
                relay_lsn_format(top, last);

        is_int(bad_id + bad_key, 0, "%s: every message has an event id and its aggregate's key", profile);
        is_int(missing, 0, "%s: 0 of %ld committed events missing across the switch (%zu messages)",
               profile, total, nmsg);
        is_int(not_acked, 0, "%s: each of Debezium's %ld messages has its change LSN (%ld logged)",
               profile, dbz_msgs, dbz_sent);
        tap_diag("%s: Debezium sent %ld events up to LSN %s and had confirmed %s to the slot; "
                 "%ld of its events lie at or past that",
                 profile, dbz_msgs, last, confirmed, expect_dups);
        is_int(dups, expect_dups,
               "%s: %ld duplicates, exactly Debezium's events at or past its confirmed LSN %s", profile,
               dups, confirmed);
        is_int(resent_confirmed + unconfirmed_not_resent + twice_same_side, 0,
               "%s: the relay resent every unconfirmed event and nothing Debezium had confirmed",
               profile);
        is_int(differ, 0, "%s: each duplicate is byte for byte Debezium's copy (partition, key, value, "
               "headers)", profile);
        is_int(split, 0, "%s: every aggregate on one partition before and after the switch", profile);
        is_int(both, NAGG, "%s: all %d aggregates have events on both sides of the switch", profile,
               NAGG);
        is_int(out_of_order, 0, "%s: each aggregate's events in commit order", profile);

        /* 6. Rolling back: Debezium again, offsets unchanged, told to trust
         *    the slot, resumes from it, i.e. after the relay. */
        if (rollback) {
                char *restart = h_pg_value(c, "SELECT restart_lsn FROM pg_replication_slots "
                                              "WHERE slot_name = '%s'", slot);
                relay_lsn_t rl = 0;
                ok(restart && relay_lsn_parse(restart, &rl) == 0 && rl > top,
                   "%s: rollback: the slot's restart_lsn %s is past Debezium's stored offsets "
                   "(its last event at %s)", profile, restart ? restart : "(none)", last);
                free(restart);
                int64_t end[PARTS] = {0};
                for (size_t i = 0; i < nmsg; i++)
                        if (msgs[i].partition < PARTS && msgs[i].offset + 1 > end[msgs[i].partition])
                                end[msgs[i].partition] = msgs[i].offset + 1;
                char events2[sizeof(events) + 2];
                snprintf(events2, sizeof(events2), "%s.2", events);
                write_worker(worker, offsets, events2);
                char conf2[sizeof(conf) + 2];
                snprintf(conf2, sizeof(conf2), "%s.2", conf);
                write_rollback_conf(conf, conf2);
                const char *jargs2[] = {conf2, worker, NULL};
                h_relay_t *back = debezium_streaming(jargs2, profile, "stream again");
                atomic_store(&w.stop, false);
                if (pthread_create(&w.thread, NULL, write_loop, &w) != 0)
                        tap_bail("could not start the writer");
                h_kafka_wait_count(topic, (int64_t)nmsg + 1000, 60000);
                atomic_store(&w.stop, true);
                pthread_join(w.thread, NULL);
                long total2 = atomic_load(&w.committed);
                int64_t got2 = h_kafka_wait_count(topic, (int64_t)nmsg + (total2 - total), 60000);
                h_relay_signal(back, SIGTERM);
                h_relay_wait(back, 60000);
                h_msg_t *m2;
                size_t n2 = h_kafka_consume_all(topic, &m2);
                int *seen2 = calloc((size_t)total2 + 1, sizeof(int));
                long old_again = 0, bad2 = 0, twice2 = 0, missing2 = 0, split2 = 0, after2 = 0;
                for (size_t i = 0; seen2 && i < n2; i++) {
                        if (m2[i].partition >= PARTS || m2[i].offset < end[m2[i].partition])
                                continue;
                        long n = event_number(&m2[i]);
                        after2++;
                        if (n < 1 || n > total2) {
                                bad2++;
                        } else if (n <= total) {
                                old_again++;
                        } else {
                                if (seen2[n]++)
                                        twice2++;
                                int a = (int)(n * 31 % NAGG);
                                if (agg_part[a] >= 0 && agg_part[a] != m2[i].partition)
                                        split2++;
                        }
                }
                for (long n = total + 1; seen2 && n <= total2; n++)
                        if (!seen2[n])
                                missing2++;
                char *pubops = h_pg_value(c,
                                          "SELECT concat_ws(',', CASE WHEN pubinsert THEN 'insert' END, "
                                          "CASE WHEN pubupdate THEN 'update' END, CASE WHEN pubdelete "
                                          "THEN 'delete' END, CASE WHEN pubtruncate THEN 'truncate' END) "
                                          "FROM pg_publication WHERE pubname = '%s'", pub);
                tap_diag("%s: rollback: Debezium sent %ld messages for %ld new events (%lld in Kafka); "
                         "its publication now publishes %s", profile, after2, total2 - total,
                         (long long)got2, pubops ? pubops : "(none)");
                free(pubops);
                is_int(old_again + bad2 + twice2 + missing2 + split2, 0,
                       "%s: rolled back, Debezium resumes after the relay: none of the %ld events "
                       "before sent again, all %ld after sent once, on their partitions",
                       profile, total, total2 - total);
                h_msgs_free(m2, n2);
                free(seen2);
                if (!tap_failed)
                        h_relay_free(back);
                char ev2[300];
                snprintf(ev2, sizeof(ev2), "%s.2", events);
                unlink(ev2);
                unlink(conf2);
        }

        if (!tap_failed) {
                h_relay_free(dbz);
                unlink(events);
        } else {
                tap_diag("Debezium's log: %s, its events: %s", h_relay_log_path(dbz), events);
        }
        h_relay_free(relay);
        h_msgs_free(msgs, nmsg);
        free(dbz_lsn);
        free(seen_dbz);
        free(seen_relay);
        free(first);
        free(wal);
        free(confirmed);
        unlink(conf);
        unlink(worker);
        unlink(offsets);
        h_pg_exec(c, "SELECT pg_drop_replication_slot('%s')", slot);
        h_kafka_delete_topic(topic);
        free(sfx);
}

int main(void)
{
        h_debezium_build();
        char *db = h_pg_create_db("dbzcut");
        PGconn *c = h_pg_connect(db);
        const char *only = getenv("RELAY_TEST_CUTOVER_PROFILES");
        for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++)
                if (!only || strstr(only, runs[i].profile))
                        run(c, db, runs[i].profile, runs[i].kill9, runs[i].rollback);
        PQfinish(c);
        h_pg_drop_db(db);
        free(db);
        return done_testing();
}
