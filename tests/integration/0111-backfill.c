/*
 * 0111-backfill.c - snapshot.mode = initial: the rows the outbox table held
 * when the slot was created, relayed from the slot's exported snapshot,
 * against real PostgreSQL and Kafka. Every check counts what Kafka holds:
 * lost events, duplicates, and versions out of commit order per aggregate.
 *
 * A. The boundary: 20 000 rows committed before the relay starts (200
 *    transactions of 100 rows over 50 aggregates), and 1 000 rows already
 *    "sent" (sent_at set) that snapshot.filter = "sent_at IS NULL" leaves
 *    out; a writer inserts the same aggregates' next versions without
 *    pause from before the relay starts (at least 200 rows in first)
 *    through the slot's creation and the backfill until at least 200 rows
 *    after the backfill ended; 1 000 rows after that. Kafka must hold each
 *    event exactly once, every aggregate's versions in commit order, none
 *    of the filtered rows. A restart then finds the slot and does not
 *    backfill again (still exactly once, with 100 more rows).
 * B. A crash in the middle of the backfill: 20 000 rows, the relay slowed
 *    down by its Kafka settings (kafka.linger.ms, kafka.queue.buffering.max.messages)
 *    and killed with SIGKILL at its first progress line (after 10 s). No slot may be
 *    left behind (the temporary slot died with the relay), so the restart
 *    backfills again: none lost, in order, duplicates counted and no more
 *    than what Kafka held at the kill.
 * D. A partitioned outbox table (two partitions, transactions alternating
 *    between them): 2 000 rows backfilled, 500 streamed, exactly once, in
 *    commit order across the partitions.
 * E. Two outbox tables in one publication (outbox.table = outbox,
 *    app.events; another schema, another column order): 3 000 and 2 000
 *    rows backfilled (filtered rows left out), 200 and 300 streamed, then
 *    one transaction writing the two tables by turns; each table's events
 *    exactly once, in order.
 * F. One transaction's rows whose physical order (ctid) is not their
 *    insertion order (the free space map sent version 2 to page 0): in
 *    insertion order all the same.
 * C. Bad settings: a filter the server refuses stops the relay at start
 *    (exit 3) naming snapshot.filter and leaving no slot; snapshot.mode =
 *    initial with outbox.source = messages is refused (exit 2).
 *
 * RELAY_FAULTS_LONG=1: 200 000 rows before the start in A, 100 000 in B.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define AGGS 50
#define SENT_ROWS 1000
#define TXN_ROWS 100

typedef struct {
        long messages, duplicates, missing, out_of_order, bad, filtered;
} check_t;

/* Kafka's view of topic: values {"a": A, "v": V}, key agg-A, versions
 * 1..want[A] per aggregate; {"sent": N} values are rows the filter must
 * have left out. */
static void check_topic(const char *topic, const int *want, check_t *k)
{
        h_msg_t *msgs;
        size_t n = h_kafka_consume_all(topic, &msgs);
        h_versions_t vt;
        h_versions_init(&vt, AGGS, want);
        memset(k, 0, sizeof(*k));
        for (size_t i = 0; i < n; i++) {
                const h_msg_t *m = &msgs[i];
                int a, v;
                char key[32];
                if (m->value && strncmp(m->value, "{\"sent\"", 7) == 0) {
                        k->filtered++;
                        continue;
                }
                k->messages++;
                if (!m->value || sscanf(m->value, "{\"a\": %d, \"v\": %d}", &a, &v) != 2 || a < 0 ||
                    a >= AGGS || v < 1 || v > want[a]) {
                        k->bad++;
                        continue;
                }
                snprintf(key, sizeof(key), "agg-%d", a);
                size_t hl;
                if (!m->key || strcmp(m->key, key) != 0 || !h_msg_header(m, "id", &hl)) {
                        k->bad++;
                        continue;
                }
                h_versions_add(&vt, a, v);
        }
        h_versions_finish(&vt, want);
        k->duplicates = vt.duplicates;
        k->out_of_order = vt.out_of_order;
        k->missing = vt.missing;
        h_msgs_free(msgs, n);
}

static long total_of(const int *want)
{
        long t = 0;
        for (int a = 0; a < AGGS; a++)
                t += want[a];
        return t;
}

/* The table insert_rows() writes to. */
static const char *g_table = "outbox";

/* rows rows in transactions of TXN_ROWS, round-robin over the aggregates,
 * each aggregate's versions counted on in want. Row i of a transaction is
 * aggregate (start + i) % AGGS, version base + i / AGGS + 1. */
static void insert_rows(PGconn *c, int *want, int rows)
{
        char base[AGGS * 12];
        for (int done = 0; done < rows; done += TXN_ROWS) {
                int n = rows - done < TXN_ROWS ? rows - done : TXN_ROWS;
                int start = done % AGGS, o = 0;
                for (int a = 0; a < AGGS; a++)
                        o += snprintf(base + o, sizeof(base) - (size_t)o, "%s%d", a ? "," : "",
                                      want[a]);
                h_pg_exec(c,
                          "INSERT INTO %s (id, aggregatetype, aggregateid, type, payload) "
                          "SELECT md5(current_setting('test.aggtype') || '-' || a || '-' || v)::uuid, "
                          "current_setting('test.aggtype'), 'agg-' || a, 'Ev', "
                          "format('{\"a\": %%s, \"v\": %%s}', a, v)::jsonb FROM ("
                          "SELECT i, (%d + i) %% %d AS a, "
                          "('{%s}'::int[])[(%d + i) %% %d + 1] + i / %d + 1 AS v "
                          "FROM generate_series(0, %d) i) s ORDER BY i",
                          g_table, start, AGGS, base, start, AGGS, AGGS, n - 1);
                for (int i = 0; i < n; i++)
                        want[(start + i) % AGGS]++;
        }
}

static void insert_sent(PGconn *c, int from, int rows)
{
        h_pg_exec(c,
                  "INSERT INTO %s (id, aggregatetype, aggregateid, type, payload, sent_at) "
                  "SELECT md5(current_setting('test.aggtype') || '-sent-' || i)::uuid, "
                  "current_setting('test.aggtype'), 'sent-' || i, 'Ev', "
                  "format('{\"sent\": %%s}', i)::jsonb, now() FROM generate_series(%d, %d) i",
                  g_table, from, from + rows - 1);
}

static PGconn *setup_db(const char *db, const char *aggtype)
{
        PGconn *c = h_pg_connect(db);
        h_pg_create_outbox(c, "outbox");
        h_pg_exec(c, "ALTER TABLE outbox ADD COLUMN sent_at timestamptz");
        h_pg_exec(c, "SET test.aggtype = '%s'", aggtype);
        return c;
}

static const char **relay_sets(const char *db, const char *slot, const char *extra1,
                               const char *extra2)
{
        static char b[4][640];
        static const char *s[8];
        char *ci = h_pg_conninfo(db);
        int n = 0;
        snprintf(b[0], sizeof(b[0]), "postgres.conninfo=%s", ci);
        snprintf(b[1], sizeof(b[1]), "kafka.bootstrap.servers=%s", h_kafka_bootstrap());
        snprintf(b[2], sizeof(b[2]), "slot.name=%s", slot);
        s[n++] = b[0];
        s[n++] = b[1];
        s[n++] = b[2];
        s[n++] = "snapshot.mode=initial";
        s[n++] = "snapshot.filter=sent_at IS NULL";
        if (extra1)
                s[n++] = extra1;
        if (extra2)
                s[n++] = extra2;
        s[n] = NULL;
        free(ci);
        return s;
}

static bool slot_exists(PGconn *c, const char *slot)
{
        char *v = h_pg_value(c, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '%s'",
                             slot);
        bool yes = v && strcmp(v, "0") != 0;
        free(v);
        return yes;
}

/* --- the writer of A: the same aggregates' next versions, one to ten rows
 * per transaction, until told to stop. */
typedef struct {
        const char *db;
        const char *aggtype;
        int *want; /* shared with main only after the join */
        atomic_int committed;
        atomic_bool stop;
} writer_t;

static void *writer_main(void *arg)
{
        writer_t *w = arg;
        PGconn *c = h_pg_connect(w->db);
        unsigned seed = 4242;
        int next = 0;
        h_pg_exec(c, "SET test.aggtype = '%s'", w->aggtype);
        while (!atomic_load(&w->stop)) {
                int n = 1 + (int)((seed = seed * 1103515245u + 12345u) >> 16) % 10;
                h_pg_exec(c, "BEGIN");
                for (int i = 0; i < n; i++) {
                        int a = next++ % AGGS;
                        int v = ++w->want[a];
                        h_pg_exec(c,
                                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, "
                                  "payload) VALUES (md5('%s-%d-%d')::uuid, '%s', 'agg-%d', 'Ev', "
                                  "'{\"a\": %d, \"v\": %d}')",
                                  w->aggtype, a, v, w->aggtype, a, a, v);
                }
                h_pg_exec(c, "COMMIT");
                atomic_fetch_add(&w->committed, n);
        }
        PQfinish(c);
        return NULL;
}

static void report(const char *what, const check_t *k, long total)
{
        /* (The filtered rows are counted whatever their number.) */
        is_int(k->messages, total, "%s: Kafka holds exactly the %ld events", what, total);
        is_int(k->missing, 0, "%s: no event lost", what);
        is_int(k->duplicates, 0, "%s: no duplicates", what);
        is_int(k->out_of_order, 0, "%s: each aggregate's versions in commit order", what);
        is_int(k->bad, 0, "%s: every message has its key, id and value as written", what);
        is_int(k->filtered, 0, "%s: none of the rows the filter excludes", what);
}

int main(void)
{
        bool longrun = getenv("RELAY_FAULTS_LONG") && strcmp(getenv("RELAY_FAULTS_LONG"), "1") == 0;
        int pre_a = longrun ? 200000 : 20000, pre_b = longrun ? 100000 : 20000;
        char topic[256];
        check_t k;

        /* --- A. the boundary ------------------------------------------------- */
        char *db = h_pg_create_db("bf");
        char *aggtype = h_unique_name("bf");
        char *slot = h_unique_name("slot");
        PGconn *c = setup_db(db, aggtype);
        int want[AGGS] = {0};
        snprintf(topic, sizeof(topic), "outbox.event.%s", aggtype);
        h_kafka_create_topic(topic, 3);
        insert_sent(c, 1, SENT_ROWS / 2);
        insert_rows(c, want, pre_a);
        insert_sent(c, SENT_ROWS / 2 + 1, SENT_ROWS / 2);

        writer_t w = {.db = db, .aggtype = aggtype, .want = want};
        pthread_t th;
        pthread_create(&th, NULL, writer_main, &w);
        while (atomic_load(&w.committed) < 200)
                h_sleep_ms(10);
        int64_t t0 = h_now_ms();
        h_relay_t *relay = h_relay_start(relay_sets(db, slot, NULL, NULL));
        ok(h_relay_wait_log(relay, "backfilling table", 120000), "A: the relay starts a backfill");
        int at_slot = atomic_load(&w.committed);
        bool done = h_relay_wait_log(relay, "backfill done", 300000);
        int at_done = atomic_load(&w.committed);
        int64_t backfill_ms = h_now_ms() - t0;
        ok(done, "A: the backfill ends");
        if (!done)
                h_relay_diag_log(relay);
        while (done && atomic_load(&w.committed) < at_done + 200)
                h_sleep_ms(10);
        atomic_store(&w.stop, true);
        pthread_join(th, NULL);
        tap_diag("A: writer rows: %d before the backfill's start line, %d more until it ended, "
                 "%d in all; backfill of %d rows ended %lld ms after the relay's start",
                 at_slot, at_done - at_slot, atomic_load(&w.committed), pre_a,
                 (long long)backfill_ms);
        insert_rows(c, want, 1000);
        char *wal_after = h_pg_value(c, "SELECT pg_current_wal_lsn()");
        long total = total_of(want);
        ok(h_kafka_wait_count(topic, total, 120000) >= total, "A: %ld events reached Kafka", total);
        ok(h_pg_wait_confirmed(c, slot, wal_after, 60000) >= 0,
           "A: slot confirmed past the last write");
        h_relay_signal(relay, SIGTERM);
        is_int(h_relay_wait(relay, 30000), 0, "A: SIGTERM: clean exit 0");
        char *log = h_relay_log(relay);
        ok(log && strstr(log, "where (sent_at IS NULL)") && strstr(log, "backfill done: "),
           "A: the log names the filter and the backfill's end");
        char *line = log ? strstr(log, "backfill done: ") : NULL;
        if (line)
                tap_diag("A: %.*s", (int)strcspn(line, "\n"), line);
        free(log);
        h_relay_free(relay);
        check_topic(topic, want, &k);
        report("A", &k, total);
        char *temp = h_pg_value(c, "SELECT count(*) FROM pg_replication_slots WHERE slot_name "
                                   "LIKE '%s_backfill_%%'", slot);
        is_str(temp, "0", "A: no temporary backfill slot is left");
        free(temp);

        /* A restart finds the slot: no second backfill. */
        relay = h_relay_start(relay_sets(db, slot, NULL, NULL));
        ok(h_relay_wait_log(relay, "streaming from replication slot", 60000),
           "A: restarted relay streams");
        insert_rows(c, want, 100);
        free(wal_after);
        wal_after = h_pg_value(c, "SELECT pg_current_wal_lsn()");
        total = total_of(want);
        ok(h_kafka_wait_count(topic, total, 60000) >= total, "A: restart: %ld events in Kafka",
           total);
        ok(h_pg_wait_confirmed(c, slot, wal_after, 60000) >= 0, "A: restart: slot confirmed");
        h_relay_signal(relay, SIGTERM);
        is_int(h_relay_wait(relay, 30000), 0, "A: restart: clean exit 0");
        ok(!h_relay_wait_log(relay, "backfilling", 0), "A: restart: no second backfill");
        h_relay_free(relay);
        check_topic(topic, want, &k);
        report("A after the restart", &k, total);
        free(wal_after);
        PQfinish(c);
        h_pg_drop_db(db);
        free(db);
        free(slot);
        free(aggtype);

        /* --- B. SIGKILL in the middle of the backfill -------------------------- */
        db = h_pg_create_db("bfkill");
        aggtype = h_unique_name("bfk");
        slot = h_unique_name("slot");
        c = setup_db(db, aggtype);
        memset(want, 0, sizeof(want));
        snprintf(topic, sizeof(topic), "outbox.event.%s", aggtype);
        h_kafka_create_topic(topic, 3);
        insert_sent(c, 1, SENT_ROWS);
        insert_rows(c, want, pre_b);
        /* At most 50 events in flight, sent every 200 ms (linger): about 250
         * a second, so the backfill takes over a minute and its first
         * progress line (after 10 s) comes long before its end. */
        relay = h_relay_start(
                relay_sets(db, slot, "kafka.linger.ms=200", "kafka.queue.buffering.max.messages=50"));
        ok(h_relay_wait_log(relay, "rows read, ", 120000), "B: the backfill logs its progress");
        int64_t in_kafka = h_kafka_count(topic);
        h_relay_signal(relay, SIGKILL);
        is_int(h_relay_wait(relay, 30000), 128 + SIGKILL, "B: relay killed at %lld events in Kafka",
               (long long)in_kafka);
        ok(!h_relay_wait_log(relay, "backfill done", 0), "B: the kill came before the backfill's end");
        h_relay_free(relay);
        /* The walsender may outlive its client by a moment. */
        bool left = true;
        for (int i = 0; i < 100 && (left = slot_exists(c, slot)); i++)
                h_sleep_ms(100);
        ok(!left, "B: no slot is left after the crash (the backfill must be redone)");
        int64_t at_kill = h_kafka_count(topic);
        relay = h_relay_start(relay_sets(db, slot, NULL, NULL));
        ok(h_relay_wait_log(relay, "backfill done", 120000), "B: the restart backfills again");
        insert_rows(c, want, 1000);
        wal_after = h_pg_value(c, "SELECT pg_current_wal_lsn()");
        total = total_of(want);
        ok(h_kafka_wait_count(topic, total + at_kill, 120000) >= total + at_kill,
           "B: %ld events and the %lld duplicates reached Kafka", total, (long long)at_kill);
        ok(h_pg_wait_confirmed(c, slot, wal_after, 60000) >= 0, "B: slot confirmed");
        h_relay_signal(relay, SIGTERM);
        is_int(h_relay_wait(relay, 30000), 0, "B: SIGTERM: clean exit 0");
        h_relay_free(relay);
        check_topic(topic, want, &k);
        tap_diag("B: %ld messages for %ld events: %ld duplicates, Kafka held %lld at the kill",
                 k.messages, total, k.duplicates, (long long)at_kill);
        is_int(k.messages, total + k.duplicates, "B: every message is an event or a duplicate");
        is_int(k.missing, 0, "B: no event lost");
        ok(k.duplicates <= at_kill, "B: duplicates (%ld) only of what Kafka held at the kill (%lld)",
           k.duplicates, (long long)at_kill);
        is_int(k.out_of_order, 0, "B: each aggregate's versions in commit order");
        is_int(k.bad, 0, "B: every message has its key, id and value as written");
        is_int(k.filtered, 0, "B: none of the filtered rows");
        free(wal_after);

        /* --- D. a partitioned outbox table ----------------------------------------- */
        {
                char *pdb = h_pg_create_db("bfpart");
                char *pagg = h_unique_name("bfp");
                char *pslot = h_unique_name("slot");
                PGconn *pc = h_pg_connect(pdb);
                int pwant[AGGS] = {0};
                h_pg_exec(pc, "CREATE TABLE outbox (id uuid NOT NULL, aggregatetype varchar(255) "
                              "NOT NULL, aggregateid varchar(255) NOT NULL, type varchar(255) NOT "
                              "NULL, payload jsonb, sent_at timestamptz, bucket int NOT NULL "
                              "DEFAULT 1, PRIMARY KEY (id, bucket)) PARTITION BY RANGE (bucket)");
                h_pg_exec(pc, "CREATE TABLE outbox_b1 PARTITION OF outbox FOR VALUES FROM (1) TO (2)");
                h_pg_exec(pc, "CREATE TABLE outbox_b2 PARTITION OF outbox FOR VALUES FROM (2) TO (3)");
                h_pg_exec(pc, "SET test.aggtype = '%s'", pagg);
                snprintf(topic, sizeof(topic), "outbox.event.%s", pagg);
                h_kafka_create_topic(topic, 3);
                /* Transactions alternate between the partitions, so the
                 * partitions' physical order is not commit order. */
                for (int i = 0; i < 20; i++) {
                        h_pg_exec(pc, "ALTER TABLE outbox ALTER COLUMN bucket SET DEFAULT %d",
                                  2 - i % 2);
                        insert_rows(pc, pwant, TXN_ROWS);
                }
                insert_sent(pc, 1, 100);
                relay = h_relay_start(relay_sets(pdb, pslot, NULL, NULL));
                ok(h_relay_wait_log(relay, "backfill done: 2000 rows", 60000),
                   "D: partitioned: the backfill reads both partitions' 2 000 rows");
                insert_rows(pc, pwant, 500);
                char *pwal = h_pg_value(pc, "SELECT pg_current_wal_lsn()");
                long ptotal = total_of(pwant);
                ok(h_kafka_wait_count(topic, ptotal, 60000) >= ptotal,
                   "D: partitioned: %ld events reached Kafka", ptotal);
                ok(h_pg_wait_confirmed(pc, pslot, pwal, 60000) >= 0, "D: partitioned: slot confirmed");
                h_relay_signal(relay, SIGTERM);
                is_int(h_relay_wait(relay, 30000), 0, "D: partitioned: clean exit 0");
                h_relay_free(relay);
                check_topic(topic, pwant, &k);
                is_int(k.messages, ptotal, "D: partitioned: Kafka holds exactly the %ld events", ptotal);
                is_int(k.missing + k.duplicates + k.bad + k.filtered, 0,
                       "D: partitioned: none lost, doubled, garbled or filtered out");
                is_int(k.out_of_order, 0, "D: partitioned: versions in commit order across partitions");
                free(pwal);
                PQfinish(pc);
                h_pg_drop_db(pdb);
                free(pdb);
                free(pagg);
                free(pslot);
        }

        /* --- E. two outbox tables ----------------------------------------------- */
        {
                char *edb = h_pg_create_db("bftwo");
                char *agg1 = h_unique_name("bfe");
                char *agg2 = h_unique_name("bfe");
                char *eslot = h_unique_name("slot");
                char topic2[256], set_tables[] = "outbox.table=outbox, app.events";
                PGconn *ec = setup_db(edb, agg1);
                int want1[AGGS] = {0}, want2[AGGS] = {0};
                /* Another schema, another column order: mapped by name. */
                h_pg_exec(ec, "CREATE SCHEMA app");
                h_pg_exec(ec, "CREATE TABLE app.events (payload jsonb, sent_at timestamptz, "
                              "type varchar(255) NOT NULL, aggregateid varchar(255) NOT NULL, "
                              "aggregatetype varchar(255) NOT NULL, id uuid PRIMARY KEY)");
                snprintf(topic, sizeof(topic), "outbox.event.%s", agg1);
                snprintf(topic2, sizeof(topic2), "outbox.event.%s", agg2);
                h_kafka_create_topic(topic, 3);
                h_kafka_create_topic(topic2, 3);
                insert_sent(ec, 1, 100);
                insert_rows(ec, want1, 3000);
                g_table = "app.events";
                h_pg_exec(ec, "SET test.aggtype = '%s'", agg2);
                insert_sent(ec, 1, 100);
                insert_rows(ec, want2, 2000);
                relay = h_relay_start(relay_sets(edb, eslot, set_tables, NULL));
                ok(h_relay_wait_log(relay, "backfill done: 5000 rows", 60000),
                   "E: two tables: the backfill reads both tables' 5 000 rows");
                ok(h_relay_wait_log(relay, "for tables \"public.outbox\", \"app.events\"", 0),
                   "E: two tables: the publication is created for both");
                insert_rows(ec, want2, 300);
                g_table = "outbox";
                h_pg_exec(ec, "SET test.aggtype = '%s'", agg1);
                insert_rows(ec, want1, 200);
                /* One transaction writing both tables by turns: the mapping
                 * switches tables at every row. */
                h_pg_exec(ec, "BEGIN");
                for (int i = 0; i < 40; i++) {
                        g_table = i % 2 ? "app.events" : "outbox";
                        h_pg_exec(ec, "SET LOCAL test.aggtype = '%s'", i % 2 ? agg2 : agg1);
                        insert_rows(ec, i % 2 ? want2 : want1, 1);
                }
                h_pg_exec(ec, "COMMIT");
                g_table = "outbox";
                char *ewal = h_pg_value(ec, "SELECT pg_current_wal_lsn()");
                long t1 = total_of(want1), t2 = total_of(want2);
                ok(h_kafka_wait_count(topic, t1, 60000) >= t1 &&
                           h_kafka_wait_count(topic2, t2, 60000) >= t2,
                   "E: two tables: %ld and %ld events reached Kafka", t1, t2);
                ok(h_pg_wait_confirmed(ec, eslot, ewal, 60000) >= 0, "E: two tables: slot confirmed");
                h_relay_signal(relay, SIGTERM);
                is_int(h_relay_wait(relay, 30000), 0, "E: two tables: clean exit 0");
                h_relay_free(relay);
                check_topic(topic, want1, &k);
                report("E: public.outbox", &k, t1);
                check_topic(topic2, want2, &k);
                report("E: app.events", &k, t2);
                free(ewal);
                PQfinish(ec);
                h_pg_drop_db(edb);
                free(edb);
                free(agg1);
                free(agg2);
                free(eslot);
        }

        /* --- F. one transaction's rows out of physical order -------------------- */
        {
                char *fdb = h_pg_create_db("bfphys");
                char *fagg = h_unique_name("bff");
                char *fslot = h_unique_name("slot");
                PGconn *fc = setup_db(fdb, fagg);
                int fwant[AGGS] = {0};
                fwant[0] = 2;
                /* Free room in page 0 (VACUUM records it in the free space
                 * map), then one transaction: a large filtered row extends
                 * the table, version 1 fits after it on the new last page,
                 * version 2 does not and goes to page 0. */
                h_pg_exec(fc, "ALTER TABLE outbox ADD COLUMN pad text");
                h_pg_exec(fc, "ALTER TABLE outbox ALTER COLUMN pad SET STORAGE PLAIN");
                h_pg_exec(fc, "ALTER TABLE outbox SET (autovacuum_enabled = false)");
                h_pg_exec(fc,
                          "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload, "
                          "sent_at, pad) SELECT md5('%s-fill-' || i)::uuid, '%s', 'fill', 'Ev', "
                          "'{\"sent\": 1}', now(), repeat('p', 1000) FROM generate_series(1, 70) i",
                          fagg, fagg);
                h_pg_exec(fc, "DELETE FROM outbox WHERE ctid IN ('(0,1)', '(0,2)', '(0,3)')");
                h_pg_exec(fc, "VACUUM outbox");
                h_pg_exec(fc, "BEGIN");
                h_pg_exec(fc,
                          "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload, "
                          "sent_at, pad) VALUES (md5('%s-big')::uuid, '%s', 'fill', 'Ev', "
                          "'{\"sent\": 2}', now(), repeat('q', 7000))",
                          fagg, fagg);
                for (int v = 1; v <= 2; v++)
                        h_pg_exec(fc,
                                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, "
                                  "payload, pad) VALUES (md5('%s-0-%d')::uuid, '%s', 'agg-0', "
                                  "'Ev', '{\"a\": 0, \"v\": %d}', repeat('q', %d))",
                                  fagg, v, fagg, v, v == 1 ? 10 : 2000);
                h_pg_exec(fc, "COMMIT");
                char *swapped = h_pg_value(fc,
                                           "SELECT (SELECT ctid FROM outbox WHERE payload->>'v' = '2') "
                                           "< (SELECT ctid FROM outbox WHERE payload->>'v' = '1')");
                ok(swapped && strcmp(swapped, "t") == 0,
                   "F: version 2 lies before version 1 in the table (ctid)");
                free(swapped);
                snprintf(topic, sizeof(topic), "outbox.event.%s", fagg);
                h_kafka_create_topic(topic, 3);
                relay = h_relay_start(relay_sets(fdb, fslot, NULL, NULL));
                ok(h_relay_wait_log(relay, "backfill done: 2 rows", 60000),
                   "F: the backfill reads the 2 rows");
                ok(h_kafka_wait_count(topic, 2, 60000) >= 2, "F: 2 events reached Kafka");
                h_relay_signal(relay, SIGTERM);
                is_int(h_relay_wait(relay, 30000), 0, "F: clean exit 0");
                h_relay_free(relay);
                check_topic(topic, fwant, &k);
                report("F: physical order", &k, 2);
                PQfinish(fc);
                h_pg_drop_db(fdb);
                free(fdb);
                free(fagg);
                free(fslot);
        }

        /* --- C. bad settings ------------------------------------------------------ */
        char *slot_c = h_unique_name("slot");
        relay = h_relay_start(relay_sets(db, slot_c, "snapshot.filter=sent_at IS NULL AND nope > 1",
                                         NULL));
        is_int(h_relay_wait(relay, 60000), 3, "C: a filter the server refuses: exit 3");
        ok(h_relay_wait_log(relay, "snapshot.filter \"sent_at IS NULL AND nope > 1\" does not work", 0) &&
           h_relay_wait_log(relay, "nope", 0),
           "C: the message names snapshot.filter and the server's complaint");
        h_relay_free(relay);
        left = true;
        for (int i = 0; i < 100 && (left = slot_exists(c, slot_c)); i++)
                h_sleep_ms(100);
        ok(!left, "C: no slot is left by the refused backfill");
        relay = h_relay_start(relay_sets(db, slot_c, "outbox.source=messages", NULL));
        is_int(h_relay_wait(relay, 30000), 2, "C: snapshot.mode = initial with messages only: exit 2");
        ok(h_relay_wait_log(relay, "no outbox table to backfill from", 0),
           "C: the message says why");
        h_relay_free(relay);
        free(slot_c);

        PQfinish(c);
        h_pg_drop_db(db);
        free(db);
        free(slot);
        free(aggtype);
        return done_testing();
}
