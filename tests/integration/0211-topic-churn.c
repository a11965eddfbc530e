/*
 * 0211-topic-churn.c - hundreds of brand-new topics on the real broker
 * while other events flow: the real-broker half of issue 10's
 * reproduction.
 *
 * A partition the broker has just created (or is still creating) is where
 * librdkafka's implicit acknowledgement (0209) bites on a real broker: the
 * broker holds no producer state for the relay's producer id there, so it
 * accepts any first sequence; the first requests to the partition can fail
 * retriably (KRaft publishes a new topic's metadata before the broker has
 * created the partition, which answers NOT_LEADER_OR_FOLLOWER meanwhile);
 * and the first events of a topic trickle in as small requests that
 * librdkafka 2.0.2 pipelines (fewer than 5 messages in flight per
 * partition). Three ways in, a third of the topics each:
 *   - auto-created by their first event (topic template
 *     outbox.event.${aggregatetype}, one aggregate type per topic; the
 *     broker's auto.create.topics.enable is on in tests/env), 1 partition;
 *   - created through the admin API (6 partitions) and written at once: the
 *     event commits a few milliseconds after CreateTopics answered;
 *   - the same, written once the topic's metadata shows a leader for every
 *     partition (as 0102 did when it lost an event): the relay then knows
 *     the leaders at once, so its first request carries only the first
 *     events, while the broker may still be loading the partition.
 * Each new topic then gets EVENTS_PER_TOPIC single-event transactions over
 * AGGS_PER_TOPIC aggregates, TRICKLE_MS apart (about the relay's linger.ms),
 * so that the relay's requests to the new partitions are small (1 to 4
 * events per partition in most first requests, from librdkafka's debug
 * log). 4 churn writers work on different topics at once
 * while the versioned-aggregate workload (2 more writers, pre-created
 * topics) commits all along.
 *
 * Checked, from what Kafka and PostgreSQL hold: every committed event of
 * every topic is in Kafka (0 lost), each aggregate in one partition with its
 * versions' first occurrences in commit order, key, topic and payload as
 * written, nothing dead-lettered (the case's own dead-letter topic stays
 * empty: an unknown topic or partition is not poison), the slot confirmed to
 * the end of the WAL. Duplicates are counted and reported on the FIGURES
 * line, with the relay's session restarts, the Kafka warnings it logged,
 * the "acknowledged without an offset" errors (the relay's detection of the
 * hole, issue 10) and, from librdkafka's debug log (kafka.debug=eos,msg),
 * the retriable produce errors and the implicit acknowledgements it made.
 * RELAY_TEST_CHURN_LOG=FILE keeps a copy of the relay's log.
 *
 * The topics are deleted at the end in DeleteTopics requests of 100; the
 * FIGURES line has how long creating and deleting them took.
 *
 * Short variant (CI): 200 topics; long (RELAY_FAULTS_LONG=1): 600.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <jansson.h>
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"
#include "workload.h"

#define CHURN_WRITERS 4
#define AGGS_PER_TOPIC 6
#define EVENTS_PER_TOPIC 24
#define TRICKLE_MS 5 /* between a new topic's events: about the relay's linger.ms */
#define PRECREATED_PARTITIONS 6
#define HOLE_LOG "acknowledged without an offset"

typedef struct {
        const char *db;
        const char *suffix;
        int topics;
        rd_kafka_t *admin; /* shared; admin calls are thread-safe */
        atomic_int next;   /* next topic index to take */
        atomic_int created, auto_created, waited, failed;
        atomic_llong create_ms; /* total time in CreateTopics */
} churn_t;

static void topic_name(const churn_t *ch, int i, char *buf, size_t len)
{
        snprintf(buf, len, "outbox.event.churn_%s_%d", ch->suffix, i);
}

static void set(rd_kafka_conf_t *conf, const char *k, const char *v)
{
        char errstr[512];
        if (rd_kafka_conf_set(conf, k, v, errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK)
                tap_bail("%s=%s: %s", k, v, errstr);
}

static rd_kafka_t *client(rd_kafka_type_t type)
{
        char errstr[512];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        set(conf, "bootstrap.servers", h_kafka_bootstrap());
        set(conf, "log.connection.close", "false");
        if (type == RD_KAFKA_CONSUMER) {
                char *g = h_unique_name("churn_reader");
                set(conf, "group.id", g);
                free(g);
                set(conf, "enable.auto.commit", "false");
                set(conf, "enable.partition.eof", "true");
                set(conf, "auto.offset.reset", "earliest");
        }
        rd_kafka_t *rk = rd_kafka_new(type, conf, errstr, sizeof(errstr));
        if (!rk)
                tap_bail("Kafka client: %s", errstr);
        return rk;
}

/* CreateTopics for one topic, waiting for the answer only (not for the
 * partitions to be ready: that is the point). NULL or an error (caller frees). */
static char *create_topic(rd_kafka_t *rk, const char *topic, int partitions)
{
        char errstr[512];
        rd_kafka_NewTopic_t *nt =
                rd_kafka_NewTopic_new(topic, partitions, 1, errstr, sizeof(errstr));
        if (!nt)
                return fx_fmt("%s", errstr);
        rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
        rd_kafka_CreateTopics(rk, &nt, 1, NULL, q);
        rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 60000);
        char *msg = NULL;
        if (!ev) {
                msg = fx_fmt("no answer");
        } else if (rd_kafka_event_error(ev)) {
                msg = fx_fmt("%s", rd_kafka_event_error_string(ev));
        } else {
                size_t cnt = 0;
                const rd_kafka_topic_result_t **trs = rd_kafka_CreateTopics_result_topics(
                        rd_kafka_event_CreateTopics_result(ev), &cnt);
                for (size_t i = 0; i < cnt && !msg; i++)
                        if (rd_kafka_topic_result_error(trs[i]))
                                msg = fx_fmt("%s", rd_kafka_err2str(
                                                           rd_kafka_topic_result_error(trs[i])));
        }
        if (ev)
                rd_kafka_event_destroy(ev);
        rd_kafka_queue_destroy(q);
        rd_kafka_NewTopic_destroy(nt);
        return msg;
}

/* Poll the topic's metadata until every partition has a leader (what a
 * careful application does before writing to a new topic); false after
 * 30 s. */
static bool wait_leaders(rd_kafka_t *rk, const char *topic)
{
        rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
        int64_t deadline = h_now_ms() + 30000;
        bool ready = false;
        while (!ready && h_now_ms() < deadline) {
                const struct rd_kafka_metadata *md = NULL;
                if (rd_kafka_metadata(rk, 0, rkt, &md, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR &&
                    md->topic_cnt == 1 && !md->topics[0].err &&
                    md->topics[0].partition_cnt == PRECREATED_PARTITIONS) {
                        ready = true;
                        for (int p = 0; p < md->topics[0].partition_cnt; p++)
                                if (md->topics[0].partitions[p].err ||
                                    md->topics[0].partitions[p].leader < 0)
                                        ready = false;
                }
                if (md)
                        rd_kafka_metadata_destroy(md);
                if (!ready)
                        h_sleep_ms(5);
        }
        rd_kafka_topic_destroy(rkt);
        return ready;
}

static const char *const modes[] = {"auto-created", "created first",
                                    "created, leaders waited for"};

static bool exec_ok(PGconn *c, const char *sql)
{
        PGresult *r = PQexec(c, sql);
        bool good = PQresultStatus(r) == PGRES_COMMAND_OK && atoi(PQcmdTuples(r)) == 1;
        if (!good)
                tap_diag("churn writer: %s", PQerrorMessage(c));
        PQclear(r);
        return good;
}

static void *churn_writer(void *arg)
{
        churn_t *ch = arg;
        PGconn *c = h_pg_connect(ch->db);
        char topic[256], sql[1024];
        int i;
        while ((i = atomic_fetch_add(&ch->next, 1)) < ch->topics) {
                if (i % 3 != 0) {
                        topic_name(ch, i, topic, sizeof(topic));
                        int64_t t0 = h_now_ms();
                        char *err = create_topic(ch->admin, topic, PRECREATED_PARTITIONS);
                        atomic_fetch_add(&ch->create_ms, h_now_ms() - t0);
                        if (err) {
                                tap_diag("could not create topic %s: %s", topic, err);
                                atomic_fetch_add(&ch->failed, 1);
                                free(err);
                                continue;
                        }
                        atomic_fetch_add(&ch->created, 1);
                        if (i % 3 == 2) {
                                if (!wait_leaders(ch->admin, topic)) {
                                        tap_diag("topic %s: no leader for every partition in "
                                                 "30 s",
                                                 topic);
                                        atomic_fetch_add(&ch->failed, 1);
                                }
                                atomic_fetch_add(&ch->waited, 1);
                        }
                } else {
                        atomic_fetch_add(&ch->auto_created, 1);
                }
                for (int e = 0; e < EVENTS_PER_TOPIC; e++) {
                        int k = e % AGGS_PER_TOPIC;
                        snprintf(sql, sizeof(sql),
                                 "WITH v AS (UPDATE churn_aggs SET version = version + 1 "
                                 "WHERE id = 'c%d-%d' RETURNING version) "
                                 "INSERT INTO outbox (id, aggregatetype, aggregateid, type, "
                                 "payload) SELECT gen_random_uuid(), 'churn_%s_%d', 'c%d-%d', "
                                 "'ChurnEvent', jsonb_build_object('t', %d, 'k', %d, 'v', "
                                 "v.version) FROM v",
                                 i, k, ch->suffix, i, i, k, i, k);
                        if (!exec_ok(c, sql))
                                atomic_fetch_add(&ch->failed, 1);
                        h_sleep_ms(TRICKLE_MS);
                }
        }
        PQfinish(c);
        return NULL;
}

typedef struct {
        int want;
        int maxv;
        int partition;
        char *seen;
} agg_t;

typedef struct {
        size_t messages, expected, duplicates, missing, out_of_order, bad, split;
} churn_verify_t;

/* Read every partition of every churn topic from the beginning to its high
 * watermark with one consumer and compare with churn_aggs. */
static void churn_verify(PGconn *c, const churn_t *ch, churn_verify_t *out)
{
        memset(out, 0, sizeof(*out));
        const int na = ch->topics * AGGS_PER_TOPIC;
        agg_t *aggs = calloc((size_t)na, sizeof(agg_t));
        if (!aggs)
                tap_bail("out of memory");
        PGresult *r = PQexec(c, "SELECT id, version FROM churn_aggs");
        if (PQresultStatus(r) != PGRES_TUPLES_OK)
                tap_bail("could not read churn_aggs: %s", PQerrorMessage(c));
        for (int j = 0; j < PQntuples(r); j++) {
                int t, k;
                if (sscanf(PQgetvalue(r, j, 0), "c%d-%d", &t, &k) != 2 || t < 0 ||
                    t >= ch->topics || k < 0 || k >= AGGS_PER_TOPIC)
                        tap_bail("unexpected churn aggregate %s", PQgetvalue(r, j, 0));
                agg_t *a = &aggs[t * AGGS_PER_TOPIC + k];
                a->want = atoi(PQgetvalue(r, j, 1));
                a->partition = -1;
                a->seen = calloc((size_t)a->want + 1, 1);
                if (!a->seen)
                        tap_bail("out of memory");
                out->expected += (size_t)a->want;
        }
        PQclear(r);

        rd_kafka_t *rk = client(RD_KAFKA_CONSUMER);
        const struct rd_kafka_metadata *md = NULL;
        rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 1, NULL, &md, 30000);
        if (e)
                tap_bail("metadata: %s", rd_kafka_err2str(e));
        rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(ch->topics);
        char prefix[256];
        snprintf(prefix, sizeof(prefix), "outbox.event.churn_%s_", ch->suffix);
        int remaining = 0, topics_seen = 0;
        for (int t = 0; t < md->topic_cnt; t++) {
                const struct rd_kafka_metadata_topic *mt = &md->topics[t];
                if (strncmp(mt->topic, prefix, strlen(prefix)) != 0)
                        continue;
                topics_seen++;
                for (int p = 0; p < mt->partition_cnt; p++) {
                        int64_t lo = 0, hi = 0;
                        e = rd_kafka_query_watermark_offsets(rk, mt->topic, p, &lo, &hi, 30000);
                        if (e)
                                tap_bail("watermarks of %s [%d]: %s", mt->topic, p,
                                         rd_kafka_err2str(e));
                        if (hi > lo) {
                                rd_kafka_topic_partition_t *tp = rd_kafka_topic_partition_list_add(
                                        parts, mt->topic, p);
                                tp->offset = RD_KAFKA_OFFSET_BEGINNING;
                                /* the high watermark to read up to, in the opaque */
                                tp->opaque = (void *)(intptr_t)hi;
                                remaining++;
                        }
                }
        }
        rd_kafka_metadata_destroy(md);
        tap_diag("churn topics in the broker's metadata: %d of %d; partitions to read: %d",
                 topics_seen, ch->topics, remaining);

        rd_kafka_topic_partition_list_t *todo = rd_kafka_topic_partition_list_copy(parts);
        rd_kafka_poll_set_consumer(rk);
        if ((e = rd_kafka_assign(rk, parts)))
                tap_bail("assign: %s", rd_kafka_err2str(e));
        rd_kafka_topic_partition_list_destroy(parts);
        int64_t deadline = h_now_ms() + 120000;
        while (remaining > 0) {
                if (h_now_ms() > deadline)
                        tap_bail("timed out reading the churn topics (%d partitions left)",
                                 remaining);
                rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 200);
                if (!m)
                        continue;
                const char *tn = m->rkt ? rd_kafka_topic_name(m->rkt) : "";
                rd_kafka_topic_partition_t *tp = rd_kafka_topic_partition_list_find(
                        todo, tn, m->partition);
                int64_t hi = tp ? (int64_t)(intptr_t)tp->opaque : 0;
                if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                        if (tp && tp->err == 0 && m->offset >= hi) {
                                tp->err = RD_KAFKA_RESP_ERR__PARTITION_EOF; /* done */
                                remaining--;
                        }
                } else if (m->err) {
                        tap_diag("consumer: %s", rd_kafka_message_errstr(m));
                } else if (tp && m->offset < hi) {
                        out->messages++;
                        int ti = -1, t = -1, k = -1, v = -1;
                        const char *us = strrchr(tn, '_');
                        if (us)
                                ti = atoi(us + 1);
                        json_error_t je;
                        json_t *j = json_loadb(m->payload ? m->payload : "", m->len, 0, &je);
                        char want_key[64] = "";
                        if (j && json_unpack(j, "{s:i, s:i, s:i}", "t", &t, "k", &k, "v", &v) == 0)
                                snprintf(want_key, sizeof(want_key), "c%d-%d", t, k);
                        json_decref(j);
                        if (t < 0 || t >= ch->topics || k < 0 || k >= AGGS_PER_TOPIC ||
                            t != ti || !m->key || m->key_len != strlen(want_key) ||
                            memcmp(m->key, want_key, m->key_len) != 0) {
                                out->bad++;
                        } else {
                                agg_t *a = &aggs[t * AGGS_PER_TOPIC + k];
                                if (a->partition < 0)
                                        a->partition = m->partition;
                                else if (a->partition != m->partition)
                                        out->split++;
                                if (v < 1 || v > a->want) {
                                        out->bad++;
                                } else if (a->seen[v]) {
                                        out->duplicates++;
                                } else {
                                        a->seen[v] = 1;
                                        if (v < a->maxv) {
                                                tap_diag("%s: %s version %d after %d", tn,
                                                         want_key, v, a->maxv);
                                                out->out_of_order++;
                                        } else {
                                                a->maxv = v;
                                        }
                                }
                        }
                        if (tp->err == 0 && m->offset >= hi - 1) {
                                tp->err = RD_KAFKA_RESP_ERR__PARTITION_EOF;
                                remaining--;
                        }
                }
                rd_kafka_message_destroy(m);
        }
        rd_kafka_topic_partition_list_destroy(todo);
        rd_kafka_consumer_close(rk);
        rd_kafka_destroy(rk);

        for (int i = 0; i < na; i++) {
                for (int v = 1; v <= aggs[i].want; v++) {
                        if (!aggs[i].seen[v]) {
                                if (out->missing < 20) {
                                        char tn[256];
                                        topic_name(ch, i / AGGS_PER_TOPIC, tn, sizeof(tn));
                                        tap_diag("missing: %s key c%d-%d version %d of %d (%s)",
                                                 tn, i / AGGS_PER_TOPIC, i % AGGS_PER_TOPIC, v,
                                                 aggs[i].want, modes[(i / AGGS_PER_TOPIC) % 3]);
                                }
                                out->missing++;
                        }
                }
                free(aggs[i].seen);
        }
        free(aggs);
}

/* The relay's log lines that contain one of needles (at most 200). */
static void diag_log_lines(const h_relay_t *r, const char *const *needles)
{
        char *log = h_relay_log(r);
        int shown = 0;
        for (char *line = strtok(log, "\n"); line && shown < 200; line = strtok(NULL, "\n")) {
                for (int i = 0; needles[i]; i++) {
                        if (strstr(line, needles[i])) {
                                tap_diag("relay| %s", line);
                                shown++;
                                break;
                        }
                }
        }
        free(log);
}

/* Delete the churn topics in requests of 100; returns the milliseconds it took. */
static int64_t delete_topics(rd_kafka_t *rk, const churn_t *ch, int *failed)
{
        int64_t t0 = h_now_ms();
        *failed = 0;
        for (int from = 0; from < ch->topics; from += 100) {
                int n = ch->topics - from < 100 ? ch->topics - from : 100;
                rd_kafka_DeleteTopic_t *dts[100];
                char tn[256];
                for (int i = 0; i < n; i++) {
                        topic_name(ch, from + i, tn, sizeof(tn));
                        dts[i] = rd_kafka_DeleteTopic_new(tn);
                }
                rd_kafka_AdminOptions_t *opts =
                        rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_DELETETOPICS);
                char errstr[512];
                if (rd_kafka_AdminOptions_set_operation_timeout(opts, 60000, errstr,
                                                                sizeof(errstr)) ||
                    rd_kafka_AdminOptions_set_request_timeout(opts, 90000, errstr,
                                                              sizeof(errstr)))
                        tap_bail("admin options: %s", errstr);
                rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
                rd_kafka_DeleteTopics(rk, dts, (size_t)n, opts, q);
                rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 120000);
                if (!ev || rd_kafka_event_error(ev)) {
                        tap_diag("DeleteTopics: %s",
                                 ev ? rd_kafka_event_error_string(ev) : "no answer");
                        *failed += n;
                } else {
                        size_t cnt = 0;
                        const rd_kafka_topic_result_t **trs = rd_kafka_DeleteTopics_result_topics(
                                rd_kafka_event_DeleteTopics_result(ev), &cnt);
                        for (size_t i = 0; i < cnt; i++)
                                if (rd_kafka_topic_result_error(trs[i]))
                                        (*failed)++;
                }
                if (ev)
                        rd_kafka_event_destroy(ev);
                rd_kafka_queue_destroy(q);
                rd_kafka_AdminOptions_destroy(opts);
                for (int i = 0; i < n; i++)
                        rd_kafka_DeleteTopic_destroy(dts[i]);
        }
        return h_now_ms() - t0;
}

int main(void)
{
        const int topics = fx_long() ? 600 : 200;
        tap_diag("variant: %s, %d new topics (a third each %s, %s, %s), %d events each",
                 fx_long() ? "long" : "short", topics, modes[0], modes[1], modes[2],
                 EVENTS_PER_TOPIC);

        fx_case_t fc;
        h_workload_conf_t wc;
        fx_steady_case_open(&fc, "topicchurn", "tc", 20, &wc);
        h_pg_exec(fc.c, "CREATE TABLE churn_aggs (id text PRIMARY KEY, "
                        "version int NOT NULL DEFAULT 0)");
        h_pg_exec(fc.c, "INSERT INTO churn_aggs (id) SELECT 'c' || t || '-' || k "
                        "FROM generate_series(0, %d) t, generate_series(0, %d) k",
                  topics - 1, AGGS_PER_TOPIC - 1);

        char *dlq = fx_fmt("dlq_%s", fc.suffix);
        fx_sets_add(&fc.sets, "errors.dlq.topic=%s", dlq);
        /* librdkafka's idempotence and batch log: counted (retriable produce
         * errors, "implicitly acked by subsequent batch success") and shown
         * if an event goes missing. */
        fx_sets_add(&fc.sets, "%s", "log.level=debug");
        fx_sets_add(&fc.sets, "%s", "kafka.debug=eos,msg");
        h_relay_t *r = fx_case_relay(&fc, "relay streams");

        fx_writers_t *ws = fx_writers_start(&wc);
        long long n0 = h_workload_wait_count(&wc, 50, 60000);
        ok(n0 >= 50, "workload events flow before the churn (%lld)", n0);

        churn_t ch;
        memset(&ch, 0, sizeof(ch));
        ch.db = fc.db;
        ch.suffix = fc.suffix;
        ch.topics = topics;
        ch.admin = client(RD_KAFKA_PRODUCER);
        pthread_t th[CHURN_WRITERS];
        int64_t t0 = h_now_ms();
        for (int i = 0; i < CHURN_WRITERS; i++)
                if (pthread_create(&th[i], NULL, churn_writer, &ch))
                        tap_bail("could not start a churn writer");
        for (int i = 0; i < CHURN_WRITERS; i++)
                pthread_join(th[i], NULL);
        int64_t churn_ms = h_now_ms() - t0;
        is_int(atomic_load(&ch.failed), 0, "every churn topic created and every event committed");
        tap_diag("churn written in %.1f s: %d topics created first (%d of them written once "
                 "their leaders were in the metadata; CreateTopics %.0f ms on average), %d "
                 "auto-created",
                 churn_ms / 1000.0, atomic_load(&ch.created), atomic_load(&ch.waited),
                 atomic_load(&ch.created) ? (double)atomic_load(&ch.create_ms) /
                                                    atomic_load(&ch.created)
                                          : 0.0,
                 atomic_load(&ch.auto_created));

        fx_writer_stats_t st;
        fx_writers_stop(ws, false, &st);
        char *end = h_pg_value(fc.c, "SELECT pg_current_wal_lsn()");
        int64_t wait_ms = h_pg_wait_confirmed(fc.c, fc.slot, end, 180000);
        ok(wait_ms >= 0, "the relay confirms the slot up to the end of the WAL (%s) within 180 s",
           end);
        free(end);
        int64_t drained_ms = h_now_ms() - t0;
        is_int(h_relay_wait(r, 0), -1, "the relay is still running");
        int holes = fx_log_count(r, HOLE_LOG);
        int restarts = fx_log_count(r, "retrying in");
        int kwarn = fx_log_count(r, "Kafka: ");
        int dead = fx_log_count(r, "dead-letter");
        int produce_errors = fx_log_count(r, "encountered error");
        int implicit = fx_log_count(r, "implicitly acked");
        if (getenv("RELAY_TEST_CHURN_LOG")) {
                FILE *f = fopen(getenv("RELAY_TEST_CHURN_LOG"), "w");
                char *log = h_relay_log(r);
                if (f) {
                        fputs(log, f);
                        fclose(f);
                }
                free(log);
        }
        fx_stop_relay(r, "SIGTERM: exit 0");

        churn_verify_t cv;
        churn_verify(fc.c, &ch, &cv);
        tap_diag("churn topics: committed %zu, in Kafka %zu, duplicates %zu, missing %zu, out of "
                 "order %zu, bad %zu, split %zu",
                 cv.expected, cv.messages, cv.duplicates, cv.missing, cv.out_of_order, cv.bad,
                 cv.split);
        is_int(cv.expected, (size_t)topics * EVENTS_PER_TOPIC,
               "churn: the aggregates' versions add up to the committed events");
        is_int(cv.missing, 0, "churn: no committed event is missing");
        is_int(cv.out_of_order, 0, "churn: each aggregate's first occurrences are in commit order");
        is_int(cv.bad + cv.split, 0,
               "churn: keys, topics and payloads as written, each aggregate in one partition");
        int64_t in_dlq = h_kafka_count(dlq);
        is_int(in_dlq, 0, "nothing dead-lettered (%s)", dlq);

        h_verify_t v;
        h_workload_verify(fc.c, &wc, &v);
        fx_check_delivered("workload", &v);

        int del_failed = 0;
        int64_t del_ms = delete_topics(ch.admin, &ch, &del_failed);
        is_int(del_failed, 0, "the %d churn topics deleted", topics);
        tap_diag("FIGURES topic-churn: topics=%d auto_created=%d created_first=%d "
                 "of_which_leaders_waited=%d churn_events=%zu "
                 "workload_events=%zu missing=%zu out_of_order=%zu duplicates=%zu "
                 "dead_lettered=%lld holes_logged=%d session_restarts=%d kafka_warnings_logged=%d "
                 "dead_letter_lines=%d retriable_produce_errors=%d implicit_acks=%d churn_s=%.1f "
                 "drained_s=%.1f create_topic_avg_ms=%.0f delete_topics_s=%.1f",
                 topics, atomic_load(&ch.auto_created), atomic_load(&ch.created),
                 atomic_load(&ch.waited), cv.expected,
                 v.expected, cv.missing + v.missing, cv.out_of_order + v.out_of_order,
                 cv.duplicates + v.duplicates, (long long)in_dlq, holes, restarts, kwarn, dead,
                 produce_errors, implicit,
                 churn_ms / 1000.0, drained_ms / 1000.0,
                 atomic_load(&ch.created)
                         ? (double)atomic_load(&ch.create_ms) / atomic_load(&ch.created)
                         : 0.0,
                 del_ms / 1000.0);
        if (cv.missing || v.missing || cv.out_of_order || v.out_of_order)
                diag_log_lines(r, (const char *const[]){"implicitly acked", HOLE_LOG, "ERROR",
                                                        "WARNING", "retrying in", NULL});

        rd_kafka_destroy(ch.admin);
        h_relay_free(r);
        free(dlq);
        fx_case_close(&fc, &wc);
        return done_testing();
}
