/*
 * 0213-missing-topic.c - a topic that does not exist is not poison (issue
 * 10 item 3), on librdkafka's mock cluster, whose metadata can be made to
 * say "unknown topic" for as long as the test wants (a real broker with
 * auto-creation on would create it).
 *
 * The relay streams events of four aggregates into a topic the cluster says
 * does not exist. librdkafka fails them with "Local: Unknown topic" once
 * topic.metadata.propagation.max.ms has passed (lowered to 1 s here to keep
 * the test short). The relay used to treat that as a rejection: it
 * dead-lettered the events and delivered the aggregates' later ones before
 * them. Now it must keep them in PostgreSQL: a repeated warning that names
 * the topic and the fix, nothing confirmed past them, nothing in the
 * dead-letter topic; once the topic exists, every event arrives with each
 * aggregate's first occurrences in commit order.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"

#define AGGS 4
#define VERSIONS 10

static rd_kafka_mock_cluster_t *g_mock;

static void insert_event(PGconn *c, const char *agtype, int a, int v)
{
        h_pg_exec(c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES "
                  "('00000000-0000-4000-8000-%04d%08d', '%s', 'agg-%d', 'T', "
                  "jsonb_build_object('v', %d))",
                  a, v, agtype, a, v);
}

int main(void)
{
        const char *bootstraps = fx_mock_start(1, &g_mock);

        char *db = h_pg_create_db("missing");
        char *slot = h_unique_name("slot");
        char *agtype = h_unique_name("mt");
        char topic[200], dlq[200], set_conn[512], set_kafka[256], set_slot[128], set_dlq[256];
        PGconn *c = h_pg_connect(db);
        char *ci = h_pg_conninfo(db);
        h_pg_create_outbox(c, "outbox");
        snprintf(topic, sizeof(topic), "outbox.event.%s", agtype);
        snprintf(dlq, sizeof(dlq), "dlq_%s", agtype);
        snprintf(set_conn, sizeof(set_conn), "postgres.conninfo=%s", ci);
        snprintf(set_kafka, sizeof(set_kafka), "kafka.bootstrap.servers=%s", bootstraps);
        snprintf(set_slot, sizeof(set_slot), "slot.name=%s", slot);
        snprintf(set_dlq, sizeof(set_dlq), "errors.dlq.topic=%s", dlq);
        if (rd_kafka_mock_topic_create(g_mock, dlq, 1, 1))
                tap_bail("could not create the dead-letter topic");
        rd_kafka_mock_topic_set_error(g_mock, topic, RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART);

        const char *sets[] = {set_conn, set_kafka, set_slot, set_dlq,
                              "kafka.topic.metadata.propagation.max.ms=1000",
                              "reconnect.backoff.ms=200", "reconnect.backoff.max.ms=1000",
                              "status.interval.ms=1000", NULL};
        h_relay_t *r = h_relay_start(sets);
        ok(h_relay_wait_log(r, "streaming from replication slot", 60000), "relay streams");
        insert_event(c, agtype, 0, 1);
        char *first_end = h_pg_value(c, "SELECT pg_current_wal_lsn()");
        for (int v = 1; v <= VERSIONS / 2; v++)
                for (int a = 0; a < AGGS; a++)
                        if (a || v > 1)
                                insert_event(c, agtype, a, v);

        /* The warning comes again with every new session, and names the topic. */
        char needle[300];
        snprintf(needle, sizeof(needle), "Unknown topic or partition (topic \"%s\"): create the topic", topic);
        int64_t t0 = h_now_ms();
        int seen = 0;
        while (h_now_ms() - t0 < 60000 && seen < 3) {
                char *log = h_relay_log(r);
                seen = 0;
                for (const char *p = log; (p = strstr(p, needle)) != NULL; p++)
                        seen++;
                free(log);
                h_sleep_ms(200);
        }
        ok(seen >= 3, "a repeated warning names the missing topic and the fix (%d times)", seen);
        is_int(h_relay_wait(r, 0), -1, "the relay keeps running");
        is_int(h_kafka_count(dlq), 0, "nothing in the dead-letter topic");
        char *conf = h_pg_confirmed_lsn(c, slot);
        ok(conf && !h_pg_lsn_ge(c, conf, first_end),
           "nothing confirmed past the first waiting event (%s < %s)", conf ? conf : "?",
           first_end);
        free(conf);

        /* The topic appears: everything arrives, in order. */
        rd_kafka_mock_topic_set_error(g_mock, topic, RD_KAFKA_RESP_ERR_NO_ERROR);
        if (rd_kafka_mock_topic_create(g_mock, topic, 1, 1))
                tap_diag("topic already known to the mock cluster");
        for (int v = VERSIONS / 2 + 1; v <= VERSIONS; v++)
                for (int a = 0; a < AGGS; a++)
                        insert_event(c, agtype, a, v);
        char *after = h_pg_value(c, "SELECT pg_current_wal_lsn()");
        ok(h_kafka_wait_count(topic, AGGS * VERSIONS, 60000) >= AGGS * VERSIONS,
           "every event arrives once the topic exists");
        ok(h_pg_wait_confirmed(c, slot, after, 30000) >= 0, "the slot moves past them");

        h_msg_t *m;
        size_t n = h_kafka_consume_all(topic, &m);
        int next[AGGS] = {0}, bad = 0, dups = 0;
        for (int a = 0; a < AGGS; a++)
                next[a] = 1;
        for (size_t i = 0; i < n; i++) {
                size_t hl;
                const char *id = h_msg_header(&m[i], "id", &hl);
                char part[5];
                if (!id || hl != 36) {
                        bad++;
                        continue;
                }
                memcpy(part, id + 24, 4);
                part[4] = '\0';
                int a = atoi(part), v = atoi(id + 28);
                if (a < 0 || a >= AGGS) {
                        bad++;
                        continue;
                }
                if (v < next[a])
                        dups++;
                else if (v != next[a])
                        bad++;
                else
                        next[a]++;
        }
        h_msgs_free(m, n);
        int missing = 0;
        for (int a = 0; a < AGGS; a++)
                missing += VERSIONS + 1 - next[a];
        is_int(missing, 0, "no event missing");
        is_int(bad, 0, "each aggregate's first occurrences in commit order");
        is_int(h_kafka_count(dlq), 0, "still nothing in the dead-letter topic");
        tap_diag("FIGURES missing-topic: events=%d duplicates=%d warnings=%d", AGGS * VERSIONS, dups,
                 seen);

        h_relay_signal(r, SIGTERM);
        is_int(h_relay_wait(r, 30000), 0, "clean stop");
        char *log = h_relay_log(r);
        ok(strstr(log, "written to dead-letter topic") == NULL && strstr(log, "(0 dead-lettered"),
           "the relay dead-lettered nothing");
        free(log);
        h_relay_free(r);
        free(first_end);
        free(after);
        PQfinish(c);
        h_pg_drop_db(db);
        free(db);
        free(slot);
        free(agtype);
        free(ci);
        return done_testing();
}
