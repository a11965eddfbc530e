/*
 * 0109-messages.c - the logical-message outbox (outbox.source = messages or
 * both), against real PostgreSQL and Kafka.
 *
 * A. messages only, in a database with no outbox table at all: the relay
 *    creates an empty publication, streams, and relays the events that
 *    outbox_emit() (sql/005_outbox_emit.sql, outbox.emit = 'message') writes
 *    in 30 transactions, with and without headers. Ignored, so absent from
 *    Kafka: a rolled-back transaction's message, a transactional message
 *    with a foreign prefix, a non-transactional message with the outbox
 *    prefix. Two bad bodies (not JSON; no aggregateid) go to the dead-letter
 *    topic with the reason, and the events after them are delivered.
 *    Kafka must hold exactly the 100 committed events, once each, each
 *    aggregate's versions in commit order, with key, value (the payload as
 *    jsonb prints it, as the table path sends it) and headers as written.
 *    Then errors.policy = stop on a bad body: exit 4 naming it.
 * B. both: in one database, each transaction writes its aggregate's events
 *    alternately to the table and as messages; Kafka holds all 80 once, in
 *    commit order per aggregate across the two sources.
 * C. restart in the middle: a writer thread emits 6 000 messages while the
 *    relay is killed with SIGKILL at ~2 000 in Kafka and started again:
 *    none lost, versions in order, duplicates counted and reported.
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

#define AGGS 5

typedef struct {
        long messages, duplicates, missing, out_of_order, bad_value, bad_key, bad_headers, foreign;
} check_t;

/* Kafka's view of topic: every value {"a": A, "v": V} with key "agg-A",
 * versions 1..want[A] per aggregate; traced: header trace "t<A>-<V>" when
 * V is a multiple of 3 (the writers' rule). */
static void check_topic(const char *topic, const int *want, bool traced, check_t *k)
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
                if (!m->value || sscanf(m->value, "{\"a\": %d, \"v\": %d}", &a, &v) != 2 || a < 0 ||
                    a >= AGGS) {
                        k->foreign++;
                        continue;
                }
                k->messages++;
                if (v < 1 || v > want[a]) {
                        k->bad_value++;
                        continue;
                }
                snprintf(key, sizeof(key), "agg-%d", a);
                if (!m->key || strcmp(m->key, key) != 0)
                        k->bad_key++;
                size_t hl;
                const char *id = h_msg_header(m, "id", &hl);
                const char *type = h_msg_header(m, "type", &hl);
                const char *trace = h_msg_header(m, "trace", &hl);
                char want_trace[32];
                snprintf(want_trace, sizeof(want_trace), "t%d-%d", a, v);
                if (!id || hl == 0 || !type || strcmp(type, "Ev") != 0 ||
                    (traced && v % 3 == 0 && (!trace || strcmp(trace, want_trace) != 0)) ||
                    ((!traced || v % 3 != 0) && trace))
                        k->bad_headers++;
                h_versions_add(&vt, a, v);
        }
        h_versions_finish(&vt, want);
        k->duplicates = vt.duplicates;
        k->out_of_order = vt.out_of_order;
        k->missing = vt.missing;
        h_msgs_free(msgs, n);
}

static void report(const char *what, const check_t *k, long total, bool dups_allowed)
{
        if (dups_allowed)
                ok(k->messages >= total, "%s: Kafka holds %ld messages for %ld events", what,
                   k->messages, total);
        else
                is_int(k->messages, total, "%s: Kafka holds exactly %ld events", what, total);
        is_int(k->missing, 0, "%s: no event lost", what);
        if (dups_allowed)
                tap_diag("%s: %ld duplicates (at-least-once after SIGKILL)", what, k->duplicates);
        else
                is_int(k->duplicates, 0, "%s: no duplicates", what);
        is_int(k->out_of_order, 0, "%s: each aggregate's versions in commit order", what);
        is_int(k->bad_key, 0, "%s: key is the aggregate id", what);
        is_int(k->bad_value + k->foreign, 0, "%s: every value is a payload as written", what);
        is_int(k->bad_headers, 0, "%s: headers id, type and the message's own as written", what);
}

/* One event of aggregate a, version v: by outbox_emit() in the current mode. */
static void emit(PGconn *c, int a, int v, bool traced)
{
        if (traced && v % 3 == 0)
                h_pg_exec(c,
                          "SELECT outbox_emit(current_setting('test.aggtype'), 'agg-%d', 'Ev', "
                          "'{\"a\": %d, \"v\": %d}', '{\"trace\": \"t%d-%d\"}')",
                          a, a, v, a, v);
        else
                h_pg_exec(c,
                          "SELECT outbox_emit(current_setting('test.aggtype'), 'agg-%d', 'Ev', "
                          "'{\"a\": %d, \"v\": %d}')",
                          a, a, v);
}

static const char **relay_sets(const char *db, const char *slot, const char *source,
                               const char *dlq, const char *policy)
{
        static char b[8][640];
        static const char *s[9];
        char *ci = h_pg_conninfo(db);
        int n = 0;
        snprintf(b[n], sizeof(b[n]), "postgres.conninfo=%s", ci);
        s[n] = b[n];
        n++;
        snprintf(b[n], sizeof(b[n]), "kafka.bootstrap.servers=%s", h_kafka_bootstrap());
        s[n] = b[n];
        n++;
        snprintf(b[n], sizeof(b[n]), "slot.name=%s", slot);
        s[n] = b[n];
        n++;
        snprintf(b[n], sizeof(b[n]), "outbox.source=%s", source);
        s[n] = b[n];
        n++;
        snprintf(b[n], sizeof(b[n]), "errors.dlq.topic=%s", dlq);
        s[n] = b[n];
        n++;
        snprintf(b[n], sizeof(b[n]), "errors.policy=%s", policy);
        s[n] = b[n];
        n++;
        snprintf(b[n], sizeof(b[n]), "status.interval.ms=1000");
        s[n] = b[n];
        n++;
        snprintf(b[n], sizeof(b[n]), "outbox.headers=aggregatetype");
        s[n] = b[n];
        n++;
        s[n] = NULL;
        free(ci);
        return s;
}

/* --- C: the writer thread ----------------------------------------------- */

#define C_EVENTS 6000

typedef struct {
        const char *db;
        const char *aggtype;
        int versions[AGGS];
        atomic_int committed;
} writer_t;

static void *writer_main(void *arg)
{
        writer_t *w = arg;
        PGconn *c = h_pg_connect(w->db);
        unsigned seed = 12345;
        h_pg_exec(c, "SET outbox.emit = 'message'");
        h_pg_exec(c, "SET test.aggtype = '%s'", w->aggtype);
        int done = 0;
        while (done < C_EVENTS) {
                int n = 1 + (int)((seed = seed * 1103515245u + 12345u) >> 16) % 10;
                if (n > C_EVENTS - done)
                        n = C_EVENTS - done;
                h_pg_exec(c, "BEGIN");
                for (int i = 0; i < n; i++) {
                        int a = (done + i) % AGGS;
                        emit(c, a, ++w->versions[a], false);
                }
                h_pg_exec(c, "COMMIT");
                done += n;
                atomic_store(&w->committed, done);
        }
        PQfinish(c);
        return NULL;
}

int main(void)
{
        char topic[256], dlq[128];

        /* --- A. messages only, no table ------------------------------------ */
        char *db = h_pg_create_db("msg");
        PGconn *c = h_pg_connect(db);
        char *aggtype = h_unique_name("msg");
        char *slot = h_unique_name("slot");
        char *dlqname = h_unique_name("dlq");
        snprintf(topic, sizeof(topic), "outbox.event.%s", aggtype);
        snprintf(dlq, sizeof(dlq), "outbox.%s", dlqname);
        h_kafka_create_topic(topic, 3);
        h_kafka_create_topic(dlq, 1);
        h_pg_exec_file(c, "005_outbox_emit.sql");
        h_pg_exec(c, "SET outbox.emit = 'message'");
        h_pg_exec(c, "SET test.aggtype = '%s'", aggtype);

        h_relay_t *relay = h_relay_start(relay_sets(db, slot, "messages", dlq, "dlq"));
        ok(h_relay_wait_log(relay, "streaming from replication slot", 60000),
           "A: relay streams with outbox.source = messages and no outbox table");
        char *v = h_pg_value(c, "SELECT to_regclass('outbox') IS NULL AND EXISTS (SELECT 1 FROM "
                                "pg_publication WHERE pubname = 'outbox_pub')");
        is_str(v, "t", "A: no outbox table; the relay created the publication outbox_pub");
        free(v);

        int want[AGGS] = {0};
        for (int t = 0; t < 30; t++) {
                int a = t % AGGS;
                h_pg_exec(c, "BEGIN");
                for (int i = 0; i < 3; i++)
                        emit(c, a, ++want[a], true);
                h_pg_exec(c, "COMMIT");
                if (t == 10) { /* rolled back: never an event */
                        h_pg_exec(c, "BEGIN");
                        h_pg_exec(c, "SELECT outbox_emit(current_setting('test.aggtype'), "
                                     "'agg-rolledback', 'Ev', '{\"a\": 0, \"v\": 999}')");
                        h_pg_exec(c, "ROLLBACK");
                }
        }
        /* A foreign prefix and a non-transactional message: not the relay's. */
        h_pg_exec(c,
                  "SELECT pg_logical_emit_message(true, 'other', jsonb_build_object('id', "
                  "'foreign', 'aggregatetype', '%s', 'aggregateid', 'agg-foreign', 'type', 'Ev', "
                  "'payload', '{\"a\": 0, \"v\": 998}'::jsonb)::text)",
                  aggtype);
        h_pg_exec(c,
                  "SELECT pg_logical_emit_message(false, 'outbox', jsonb_build_object('id', "
                  "'nontx', 'aggregatetype', '%s', 'aggregateid', 'agg-nontx', 'type', 'Ev', "
                  "'payload', '{\"a\": 0, \"v\": 997}'::jsonb)::text)",
                  aggtype);
        /* Two bad bodies, then more events. */
        h_pg_exec(c, "SELECT pg_logical_emit_message(true, 'outbox', 'not json at all')");
        h_pg_exec(c,
                  "SELECT pg_logical_emit_message(true, 'outbox', '{\"id\": \"bad-2\", "
                  "\"aggregatetype\": \"%s\", \"type\": \"Ev\", \"payload\": 1}')",
                  aggtype);
        for (int t = 0; t < 10; t++)
                emit(c, t % AGGS, ++want[t % AGGS], true);
        char *wal_after = h_pg_value(c, "SELECT pg_current_wal_lsn()");
        int total = 0;
        for (int a = 0; a < AGGS; a++)
                total += want[a];

        ok(h_kafka_wait_count(topic, total, 120000) >= total, "A: %d events reached Kafka", total);
        ok(h_kafka_wait_count(dlq, 2, 60000) >= 2, "A: two bad bodies reached the dead-letter topic");
        ok(h_pg_wait_confirmed(c, slot, wal_after, 30000) >= 0, "A: slot confirmed past the last write");
        h_relay_signal(relay, SIGTERM);
        is_int(h_relay_wait(relay, 30000), 0, "A: SIGTERM: clean exit 0");
        char *log = h_relay_log(relay);
        ok(log && strstr(log, "not valid JSON") && strstr(log, "has no \"aggregateid\""),
           "A: the relay's warnings name both problems");
        ok(log && strstr(log, "publication \"outbox_pub\", messages with prefix \"outbox\""),
           "A: the start line names the source");
        free(log);
        h_relay_free(relay);

        check_t k;
        check_topic(topic, want, true, &k);
        report("A", &k, total, false);
        h_msg_t *msgs;
        size_t n = h_kafka_consume_all(topic, &msgs);
        int agg_hdr_bad = 0, strays = 0;
        for (size_t i = 0; i < n; i++) {
                size_t hl;
                const char *at = h_msg_header(&msgs[i], "aggregatetype", &hl);
                if (!at || strcmp(at, aggtype) != 0)
                        agg_hdr_bad++;
                if (msgs[i].key && (strstr(msgs[i].key, "rolledback") || strstr(msgs[i].key, "foreign") ||
                                    strstr(msgs[i].key, "nontx")))
                        strays++;
        }
        h_msgs_free(msgs, n);
        is_int(agg_hdr_bad, 0, "A: outbox.headers takes the body's top-level aggregatetype");
        is_int(strays, 0, "A: rolled-back, foreign-prefix and non-transactional messages are not in Kafka");
        n = h_kafka_consume_all(dlq, &msgs);
        int dlq_json = 0, dlq_agg = 0;
        for (size_t i = 0; i < n; i++) {
                size_t hl;
                const char *why = h_msg_header(&msgs[i], "outbox.error.message", &hl);
                if (why && strstr(why, "not valid JSON") && msgs[i].value &&
                    strcmp(msgs[i].value, "not json at all") == 0)
                        dlq_json++;
                if (why && strstr(why, "has no \"aggregateid\"") && msgs[i].value &&
                    strcmp(msgs[i].value, "1") == 0)
                        dlq_agg++;
        }
        h_msgs_free(msgs, n);
        is_int((long)n, 2, "A: the dead-letter topic holds exactly the 2 bad bodies");
        ok(dlq_json == 1 && dlq_agg == 1,
           "A: each dead-letter copy has its body (or payload) and the reason");

        /* errors.policy = stop: exit 4 before a bad body, naming it. */
        h_pg_exec(c, "SELECT pg_logical_emit_message(true, 'outbox', '[1, 2]')");
        relay = h_relay_start(relay_sets(db, slot, "messages", dlq, "stop"));
        is_int(h_relay_wait(relay, 60000), 4, "A: errors.policy = stop: exit 4 at a bad body");
        ok(h_relay_wait_log(relay, "could not turn outbox message", 0) &&
           h_relay_wait_log(relay, "JSON but not an object", 0),
           "A: the stop names the outbox message and the problem");
        h_relay_free(relay);
        PQfinish(c);
        h_pg_drop_db(db);
        free(db);
        free(slot);

        /* --- B. both ---------------------------------------------------------- */
        db = h_pg_create_db("msgboth");
        c = h_pg_connect(db);
        slot = h_unique_name("slot");
        h_pg_create_outbox(c, "outbox");
        h_pg_exec_file(c, "002_publication.sql");
        h_pg_exec_file(c, "005_outbox_emit.sql");
        h_pg_exec(c, "SET test.aggtype = '%s'", aggtype);
        char *topic_b_type = h_unique_name("both");
        h_pg_exec(c, "SET test.aggtype = '%s'", topic_b_type);
        char topic_b[256];
        snprintf(topic_b, sizeof(topic_b), "outbox.event.%s", topic_b_type);
        h_kafka_create_topic(topic_b, 3);
        relay = h_relay_start(relay_sets(db, slot, "both", dlq, "dlq"));
        ok(h_relay_wait_log(relay, "streaming from replication slot", 60000),
           "B: relay streams with outbox.source = both");
        int want_b[AGGS] = {0};
        for (int t = 0; t < 20; t++) {
                int a = t % AGGS;
                h_pg_exec(c, "BEGIN");
                for (int i = 0; i < 4; i++) {
                        h_pg_exec(c, "SET LOCAL outbox.emit = '%s'", i % 2 ? "message" : "table");
                        emit(c, a, ++want_b[a], false);
                }
                h_pg_exec(c, "COMMIT");
        }
        v = h_pg_value(c, "SELECT count(*) FROM outbox");
        is_str(v, "40", "B: half of the events went through the table");
        free(v);
        free(wal_after);
        wal_after = h_pg_value(c, "SELECT pg_current_wal_lsn()");
        ok(h_kafka_wait_count(topic_b, 80, 120000) >= 80, "B: 80 events reached Kafka");
        ok(h_pg_wait_confirmed(c, slot, wal_after, 30000) >= 0, "B: slot confirmed past the last write");
        h_relay_signal(relay, SIGTERM);
        is_int(h_relay_wait(relay, 30000), 0, "B: SIGTERM: clean exit 0");
        h_relay_free(relay);
        check_topic(topic_b, want_b, false, &k);
        report("B", &k, 80, false);
        PQfinish(c);
        h_pg_drop_db(db);
        free(db);
        free(slot);

        /* --- C. SIGKILL in the middle ---------------------------------------- */
        db = h_pg_create_db("msgkill");
        c = h_pg_connect(db);
        slot = h_unique_name("slot");
        h_pg_exec_file(c, "005_outbox_emit.sql");
        char *topic_c_type = h_unique_name("kill");
        char topic_c[256];
        snprintf(topic_c, sizeof(topic_c), "outbox.event.%s", topic_c_type);
        h_kafka_create_topic(topic_c, 3);
        relay = h_relay_start(relay_sets(db, slot, "messages", dlq, "dlq"));
        ok(h_relay_wait_log(relay, "streaming from replication slot", 60000), "C: relay streams");
        writer_t w = {.db = db, .aggtype = topic_c_type};
        atomic_init(&w.committed, 0);
        pthread_t th;
        pthread_create(&th, NULL, writer_main, &w);
        int64_t got = h_kafka_wait_count(topic_c, 2000, 120000);
        h_relay_signal(relay, SIGKILL);
        is_int(h_relay_wait(relay, 30000), 128 + SIGKILL, "C: relay killed at %lld events in Kafka, %d committed",
               (long long)got, atomic_load(&w.committed));
        h_relay_free(relay);
        relay = h_relay_start(relay_sets(db, slot, "messages", dlq, "dlq"));
        pthread_join(th, NULL);
        free(wal_after);
        wal_after = h_pg_value(c, "SELECT pg_current_wal_lsn()");
        ok(h_pg_wait_confirmed(c, slot, wal_after, 120000) >= 0,
           "C: the restarted relay confirmed past the last of %d events", C_EVENTS);
        h_relay_signal(relay, SIGTERM);
        is_int(h_relay_wait(relay, 30000), 0, "C: SIGTERM: clean exit 0");
        h_relay_free(relay);
        check_topic(topic_c, w.versions, false, &k);
        report("C", &k, C_EVENTS, true);

        PQfinish(c);
        h_pg_drop_db(db);
        h_kafka_delete_topic(topic);
        h_kafka_delete_topic(topic_b);
        h_kafka_delete_topic(topic_c);
        h_kafka_delete_topic(dlq);
        free(wal_after);
        free(topic_b_type);
        free(topic_c_type);
        free(dlqname);
        free(aggtype);
        free(db);
        free(slot);
        return done_testing();
}
