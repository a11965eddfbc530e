/*
 * 0176-compressed-size.c - a topic's max.message.bytes with compression on,
 * against the real broker.
 *
 * With kafka.compression.type set, Kafka applies a topic's
 * max.message.bytes to the compressed record batch. The relay used to
 * compare the limit with the event's uncompressed batch before producing,
 * so an event the broker takes (40 kB of compressible JSON into a topic
 * with max.message.bytes=20000) never reached its topic: it was
 * dead-lettered, or stopped the relay, by the relay's own check.
 *
 * In a topic with max.message.bytes=20000, one aggregate commits a small
 * event, 40 kB of compressible JSON, 40 kB of random base64 (which no codec
 * brings under 20 000 bytes) and a small event, each in a transaction of
 * its own:
 *   1. dlq (gzip): the topic holds the small events and the compressible
 *      one, the latter with exactly the bytes of its row, in commit order;
 *      the dead-letter topic holds exactly the random one (the broker's
 *      refusal now), its error headers naming the topic and its limit; the
 *      slot is confirmed past every event.
 *   2. stop (lz4, errors.policy = stop): the relay stops (exit 4) at the
 *      random event, naming it, having delivered the small event and the
 *      compressible one and confirmed them, and nothing after.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#include "faults/faults.h"
#include "harness.h"

#define ID "00000000-0000-4000-8000-00000001760" /* and the version */

typedef struct {
        fx_case_t k;
        char topic[160], dlq[160];
        int probes; /* records of the probe the broker took: in the topic */
} fixture_t;

/* A topic with max.message.bytes=20000 and a dead-letter topic, the relay's
 * settings with compression codec and errors.policy = policy. */
static void fixture_init(fixture_t *f, const char *name, const char *codec, const char *policy)
{
        const char *tconf[] = {"max.message.bytes", "20000", NULL};
        fx_case_open(&f->k, name, "c");
        h_pg_create_outbox(f->k.c, "outbox");
        snprintf(f->topic, sizeof(f->topic), "compressed_%s", f->k.suffix);
        snprintf(f->dlq, sizeof(f->dlq), "compressed_dlq_%s", f->k.suffix);
        h_kafka_create_topic_config(f->topic, 1, tconf);
        h_kafka_create_topic_config(f->dlq, 1, NULL);
        fx_sets_init(&f->k.sets, f->k.db, f->k.slot, NULL);
        fx_sets_add(&f->k.sets, "errors.dlq.topic=%s", f->dlq);
        fx_sets_add(&f->k.sets, "topic.template=%s", f->topic);
        fx_sets_add(&f->k.sets, "kafka.compression.type=%s", codec);
        fx_sets_add(&f->k.sets, "errors.policy=%s", policy);
        /* The broker may apply a topic's limit a moment after it answers
         * (0210's lowered case): the events go in only once it refuses an
         * uncompressed record of 30 kB itself. */
        is_int(h_kafka_wait_refused(f->topic, 30000, &f->probes),
               RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE,
               "%s: the broker refuses an uncompressed record of 30 kB", name);
}

static void fixture_free(fixture_t *f)
{
        h_kafka_delete_topic(f->topic);
        h_kafka_delete_topic(f->dlq);
        fx_case_close(&f->k, NULL);
}

/* Versions 1..4 of one aggregate, a transaction each: small, 40 kB of 'x',
 * 40 534 characters of random base64, small. */
static void insert_events(fixture_t *f)
{
        const char *pad[] = {
                "'small'",
                "repeat('x', 40000)",
                "translate(encode(decode((SELECT string_agg(md5(random()::text), '') FROM "
                "generate_series(1, 1900)), 'hex'), 'base64'), E'\\n', '')",
                "'small'",
        };
        for (int v = 1; v <= 4; v++)
                h_pg_exec(f->k.c,
                          "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                          "VALUES ('" ID "%d', 'compressed', 'agg', 'E', "
                          "jsonb_build_object('v', %d, 'pad', %s))",
                          v, v, pad[v - 1]);
}

/* The event of id in msgs (the first), or NULL. */
static const h_msg_t *find_id(const h_msg_t *m, size_t n, const char *id)
{
        for (size_t i = 0; i < n; i++) {
                size_t hl;
                const char *h = h_msg_header(&m[i], "id", &hl);
                if (h && hl == strlen(id) && memcmp(h, id, hl) == 0)
                        return &m[i];
        }
        return NULL;
}

static void test_dlq(void)
{
        fixture_t f;
        fixture_init(&f, "cmpdlq", "gzip", "dlq");
        h_relay_t *r = fx_case_relay(&f.k, "dlq: relay streams");
        insert_events(&f);
        char *wal_after = h_pg_value(f.k.c, "SELECT pg_current_wal_lsn()");
        char *want = h_pg_value(f.k.c, "SELECT payload::text FROM outbox WHERE id = '" ID "2'");

        is_int(h_kafka_wait_count(f.dlq, 1, 120000), 1, "dlq: one event dead-lettered");
        ok(h_kafka_wait_count(f.topic, f.probes + 3, 60000) >= f.probes + 3,
           "dlq: three events in the topic");
        ok(h_pg_wait_confirmed(f.k.c, f.k.slot, wal_after, 30000) >= 0,
           "dlq: slot confirmed past every event");

        h_msg_t *m;
        size_t n = h_kafka_consume_all(f.topic, &m);
        const h_msg_t *big = find_id(m, n, ID "2");
        ok(big != NULL, "dlq: the 40 kB compressible event is in its topic");
        ok(big && big->value_len == strlen(want) && memcmp(big->value, want, big->value_len) == 0,
           "dlq: ... with the bytes of its row (%zu of %zu)", big ? big->value_len : 0,
           strlen(want));
        ok(!find_id(m, n, ID "3"), "dlq: the random event is not in its topic");
        /* First occurrences in commit order (a resume may repeat some). */
        int next = 1, bad = 0;
        for (size_t i = 0; i < n; i++) {
                size_t hl;
                const char *id = h_msg_header(&m[i], "id", &hl);
                if (!id || hl != 36)
                        continue; /* a probe */
                int v = atoi(id + 35);
                if (v < next)
                        continue;
                if (v != next)
                        bad++;
                next = v == 2 ? 4 : v + 1;
        }
        is_int(bad, 0, "dlq: versions 1, 2, 4 in commit order");
        is_int(next, 5, "dlq: none missing");
        h_msgs_free(m, n);

        n = h_kafka_consume_all(f.dlq, &m);
        size_t hl;
        const char *id = n == 1 ? h_msg_header(&m[0], "id", &hl) : NULL;
        const char *msg = n == 1 ? h_msg_header(&m[0], "outbox.error.message", &hl) : NULL;
        const char *etopic = n == 1 ? h_msg_header(&m[0], "outbox.error.topic", &hl) : NULL;
        is_str(id, ID "3", "dlq: the dead-letter copy is the random event's");
        ok(msg && strstr(msg, "too large for topic") && strstr(msg, "20000") &&
                   strstr(msg, "compress"),
           "dlq: it says too large for the topic, its limit, and compression (%s)",
           msg ? msg : "none");
        const char *attempts = n == 1 ? h_msg_header(&m[0], "outbox.error.attempts", &hl) : NULL;
        is_str(etopic, f.topic, "dlq: outbox.error.topic names its topic");
        is_str(attempts, "2", "dlq: after two refusals by Kafka: in its batch, then alone");
        h_msgs_free(m, n);

        h_relay_signal(r, SIGTERM);
        is_int(h_relay_wait(r, 30000), 0, "dlq: clean stop");
        char *log = h_relay_log(r);
        ok(strstr(log, "1 dead-lettered") != NULL, "dlq: the relay counts 1 dead-lettered");
        ok(strstr(log, "Kafka rejected event \"" ID "3\""),
           "dlq: the broker refused the random event (not the relay's own check)");
        free(log);
        if (!big || n != 1)
                h_relay_diag_log(r);
        h_relay_free(r);
        free(want);
        free(wal_after);
        fixture_free(&f);
}

static void test_stop(void)
{
        fixture_t f;
        fixture_init(&f, "cmpstop", "lz4", "stop");
        h_relay_t *r = fx_case_relay(&f.k, "stop: relay streams");
        insert_events(&f);
        is_int(h_relay_wait(r, 120000), 4, "stop: exit 4");
        char *log = h_relay_log(r);
        ok(strstr(log, "event \"" ID "3\"") && strstr(log, "too large") &&
                   strstr(log, "errors.policy = stop"),
           "stop: at the random event, naming it, why, and the policy");
        ok(strstr(log, "Kafka rejected event \"" ID "3\""),
           "stop: the broker refused it (not the relay's own check)");
        if (!strstr(log, "event \"" ID "3\""))
                h_relay_diag_log(r);
        free(log);
        h_msg_t *m;
        size_t n = h_kafka_consume_all(f.topic, &m);
        ok(find_id(m, n, ID "1") && find_id(m, n, ID "2"),
           "stop: the small event and the compressible one delivered");
        ok(!find_id(m, n, ID "3") && !find_id(m, n, ID "4"), "stop: nothing from it on");
        h_msgs_free(m, n);
        is_int(h_kafka_count(f.dlq), 0, "stop: nothing dead-lettered");
        is_int(h_pg_pending_inserts_with(f.k.c, f.k.slot, ID "2"), 0,
               "stop: confirmed the compressible event (not left in the slot)");
        is_int(h_pg_pending_inserts_with(f.k.c, f.k.slot, ID "3"), 1,
               "stop: and not the random one (still in the slot)");
        h_relay_free(r);
        fixture_free(&f);
}

int main(void)
{
        test_dlq();
        test_stop();
        return done_testing();
}
