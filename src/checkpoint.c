/*
 * checkpoint.c - reading the exactly-once checkpoint back (see
 * checkpoint.h); writing it is one more message of the session's Kafka
 * transaction. Owns a short-lived consumer for the read.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/checkpoint.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

#include "relay/kadmin.h"
#include "relay/log.h"
#include "relay/lsn.h"

static void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
        (void)rk;
        relay_log_debug("librdkafka (checkpoint) %d %s: %s", level, fac, buf);
}

/* The reader's own settings, whatever kafka.* says (relay_config_validate()
 * refuses them there: relay_checkpoint_own_setting()). */
static const char *const reader_own[][2] = {
        {"group.id", "outbox-relay-checkpoint-reader"}, /* never joined: assign() */
        {"enable.auto.commit", "false"},
        {"enable.partition.eof", "true"},
        {"isolation.level", "read_committed"},
        {"auto.offset.reset", "earliest"},
        {"allow.auto.create.topics", "false"},
        /* The end of a partition shows as an empty fetch, which the
         * broker holds this long: librdkafka's 500 ms default was
         * half a second of every exactly-once start (the data came
         * in the first 10 ms). */
        {"fetch.wait.max.ms", "10"},
};

const char *relay_checkpoint_own_setting(const char *prop)
{
        for (size_t i = 0; i < sizeof(reader_own) / sizeof(reader_own[0]); i++)
                if (strcmp(prop, reader_own[i][0]) == 0)
                        return reader_own[i][1];
        return NULL;
}

static rd_kafka_t *consumer(const relay_config_t *cfg, char *err, size_t errlen)
{
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        char kerr[RELAY_ERRBUF];
        rd_kafka_t *rk;

        if (!conf) {
                relay_err_set(err, errlen, "out of memory");
                return NULL;
        }
        /* The relay's kafka.* pairs are producer settings; a consumer ignores
         * the producer-only ones (with a debug line). */
        for (size_t i = 0; i < relay_config_kafka_count(cfg); i++) {
                const char *name, *value;
                relay_config_kafka_at(cfg, i, &name, &value);
                rd_kafka_conf_set(conf, name, value, kerr, sizeof(kerr));
        }
        for (size_t i = 0; i < sizeof(reader_own) / sizeof(reader_own[0]); i++) {
                if (rd_kafka_conf_set(conf, reader_own[i][0], reader_own[i][1], kerr, sizeof(kerr))) {
                        relay_err_set(err, errlen, "could not configure the checkpoint reader: %s",
                                      kerr);
                        rd_kafka_conf_destroy(conf);
                        return NULL;
                }
        }
        rd_kafka_conf_set_log_cb(conf, log_cb);
        if (!(rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, kerr, sizeof(kerr)))) {
                rd_kafka_conf_destroy(conf);
                relay_err_set(err, errlen, "could not create the checkpoint reader: %s", kerr);
                return NULL;
        }
        rd_kafka_poll_set_consumer(rk);
        return rk;
}

/* How often the waits below call the tick (as the read's poll does). */
#define TICK_MS 100

/* The tick, when there is one: 0, or its code with err filled. */
static int call_tick(relay_tick_fn *tick, void *ctx, char *err, size_t errlen)
{
        return tick ? tick(ctx, err, errlen) : 0;
}

/*
 * rd_kafka_metadata() for one topic, which blocks for as long as the
 * brokers take (up to timeout_ms) and has no asynchronous form in
 * librdkafka 2.0: it runs on a thread of its own while the caller's thread
 * calls the tick every TICK_MS (the watchdog, /healthz, the stream's status
 * updates). A request cut into shorter calls would fail a broker slower
 * than one slice, each call waiting for its own answer. A tick that asks to
 * stop cannot cut the request short (the consumer is freed only after it):
 * the ticks go on until it returns, the tick's code is returned then.
 */
typedef struct {
        rd_kafka_t *rk;
        rd_kafka_topic_t *rkt;
        int timeout_ms;
        const struct rd_kafka_metadata *md; /* the answer: caller destroys */
        rd_kafka_resp_err_t e;
        atomic_bool done;
} metadata_call_t;

static void *metadata_thread(void *arg)
{
        metadata_call_t *mc = arg;
        mc->e = rd_kafka_metadata(mc->rk, 0, mc->rkt, &mc->md, mc->timeout_ms);
        atomic_store(&mc->done, true);
        return NULL;
}

static rd_kafka_resp_err_t metadata_ticking(rd_kafka_t *rk, rd_kafka_topic_t *rkt, int timeout_ms,
                                            relay_tick_fn *tick, void *ctx,
                                            const struct rd_kafka_metadata **md, int *trc,
                                            char *err, size_t errlen)
{
        metadata_call_t mc = {.rk = rk, .rkt = rkt, .timeout_ms = timeout_ms};
        pthread_t t;

        atomic_init(&mc.done, false);
        *trc = 0;
        if (tick == NULL || pthread_create(&t, NULL, metadata_thread, &mc) != 0)
                return rd_kafka_metadata(rk, 0, rkt, md, timeout_ms); /* no thread: it blocks */
        while (!atomic_load(&mc.done)) {
                char later[RELAY_ERRBUF]; /* the first failing tick's message is kept */
                int rc = *trc ? tick(ctx, later, sizeof(later)) : tick(ctx, err, errlen);
                if (*trc == 0)
                        *trc = rc;
                struct timespec ts = {.tv_nsec = TICK_MS * 1000000L};
                nanosleep(&ts, NULL);
        }
        pthread_join(t, NULL);
        *md = mc.md;
        return mc.e;
}

/* CreateTopics: one partition (one key lives in one partition anyway),
 * compacted. *existed: the broker answered that the topic exists (created
 * by someone else since its metadata said it did not). */
static int create_topic(rd_kafka_t *rk, const char *topic, int timeout_ms, relay_tick_fn *tick,
                        void *ctx, bool *existed, char *err, size_t errlen)
{
        char kerr[RELAY_ERRBUF];
        rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(topic, 1, -1, kerr, sizeof(kerr));
        relay_kadmin_req_t req;
        bool begun = relay_kadmin_begin(&req, rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
        int rc = RELAY_EKAFKA;

        *existed = false;
        if (!nt || !begun) {
                relay_err_set(err, errlen, "could not create checkpoint topic \"%s\": %s", topic,
                              nt ? "out of memory" : kerr);
                goto out;
        }
        rd_kafka_NewTopic_set_config(nt, "cleanup.policy", "compact");
        rd_kafka_AdminOptions_set_operation_timeout(req.opt, timeout_ms, kerr, sizeof(kerr));
        rd_kafka_CreateTopics(rk, &nt, 1, req.opt, req.q);
        /* Asynchronous: the tick goes on while the controller answers. */
        int64_t deadline = relay_now_ms() + timeout_ms + 1000;
        rd_kafka_event_t *ev;
        while (!(ev = relay_kadmin_wait(&req, TICK_MS)) && relay_now_ms() < deadline)
                if ((rc = call_tick(tick, ctx, err, errlen)))
                        goto out;
        rc = RELAY_EKAFKA;
        if (!ev) {
                relay_err_set(err, errlen, "could not create checkpoint topic \"%s\": timed out",
                              topic);
                goto out;
        }
        const rd_kafka_CreateTopics_result_t *res = rd_kafka_event_CreateTopics_result(ev);
        size_t n = 0;
        const rd_kafka_topic_result_t **tr = res ? rd_kafka_CreateTopics_result_topics(res, &n) : NULL;
        rd_kafka_resp_err_t e = rd_kafka_event_error(ev);
        const char *why = rd_kafka_event_error_string(ev);
        if (!e && n == 1) {
                e = rd_kafka_topic_result_error(tr[0]);
                why = rd_kafka_topic_result_error_string(tr[0]);
        }
        if (e && e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
                relay_err_set(err, errlen, "could not create checkpoint topic \"%s\": %s", topic,
                              why ? why : rd_kafka_err2str(e));
        else
                rc = 0;
        *existed = e == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS;
out:
        relay_kadmin_end(&req);
        if (nt)
                rd_kafka_NewTopic_destroy(nt);
        return rc;
}

/*
 * Why the read did not reach the end of every partition in time, for the
 * first one it did not: a partition from which nothing came (no record, no
 * end of fetch) was never fetched, its leader down or unreachable; one that
 * answered but stays below its high watermark is held back by another
 * producer's open transaction.
 */
static void timed_out(const struct rd_kafka_metadata *md, const int64_t *end, const bool *done,
                      int timeout_ms, char *err, size_t errlen)
{
        const rd_kafka_metadata_topic_t *t = &md->topics[0];
        int i = 0;
        while (i < t->partition_cnt - 1 && done[i])
                i++;
        if (end[i] < 0)
                relay_err_set(err, errlen,
                              "could not read checkpoint topic \"%s\" within %d ms: partition %d "
                              "never answered (its leader, broker %d, is down or unreachable); "
                              "check the broker",
                              t->topic, timeout_ms, (int)t->partitions[i].id,
                              (int)t->partitions[i].leader);
        else
                relay_err_set(err, errlen,
                              "could not read checkpoint topic \"%s\" to its end within %d ms "
                              "(an open transaction of another producer holds partition %d back "
                              "until it ends)",
                              t->topic, timeout_ms, (int)t->partitions[i].id);
}

int relay_checkpoint_read(const relay_config_t *cfg, const char *topic, const char *key,
                          int timeout_ms, relay_tick_fn *tick, void *ctx,
                          relay_lsn_t *out, bool *found, char *err, size_t errlen)
{
        rd_kafka_t *rk = consumer(cfg, err, errlen);
        rd_kafka_topic_t *rkt = NULL;
        const struct rd_kafka_metadata *md = NULL;
        rd_kafka_topic_partition_list_t *parts = NULL;
        int64_t *end = NULL;
        bool *done = NULL;
        size_t keylen = strlen(key);
        int rc = RELAY_EKAFKA;

        *out = 0;
        *found = false;
        if (!rk)
                return RELAY_EKAFKA;
        int64_t deadline = relay_now_ms() + timeout_ms;
        rkt = rd_kafka_topic_new(rk, topic, NULL);
        int trc = 0;
        rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR_NO_ERROR;
        bool existed = false;
        /*
         * A topic that does not exist is created, and one of our making
         * holds no checkpoint. One created by someone else between the
         * metadata and our CreateTopics (another relay sharing it, an
         * operator) may hold ours: it is read like any other, once its
         * metadata shows it.
         */
        for (;;) {
                int left_ms = (int)(deadline - relay_now_ms());
                if (existed && left_ms <= 0) {
                        relay_err_set(err, errlen,
                                      "could not read checkpoint topic \"%s\": it exists, but "
                                      "its metadata did not show it within %d ms",
                                      topic, timeout_ms);
                        goto out;
                }
                e = rkt ? metadata_ticking(rk, rkt, existed ? left_ms : timeout_ms, tick, ctx, &md,
                                           &trc, err, errlen)
                        : rd_kafka_last_error();
                if (trc) {
                        rc = trc;
                        goto out;
                }
                if (e) {
                        relay_err_set(err, errlen, "could not read checkpoint topic \"%s\": %s",
                                      topic, rd_kafka_err2str(e));
                        goto out;
                }
                if (md->topic_cnt == 1 &&
                    md->topics[0].err != RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART &&
                    md->topics[0].partition_cnt > 0)
                        break;
                rd_kafka_metadata_destroy(md);
                md = NULL;
                if (existed) {
                        /* Not yet in the metadata of the broker we ask. */
                        struct timespec ts = {.tv_nsec = TICK_MS * 1000000L};
                        nanosleep(&ts, NULL);
                        if ((trc = call_tick(tick, ctx, err, errlen))) {
                                rc = trc;
                                goto out;
                        }
                } else if ((rc = create_topic(rk, topic, timeout_ms, tick, ctx, &existed, err,
                                              errlen)) != 0 ||
                           !existed) {
                        goto out; /* ours, new: no checkpoint */
                }
                rc = RELAY_EKAFKA;
        }
        if (md->topics[0].err) {
                relay_err_set(err, errlen, "could not read checkpoint topic \"%s\": %s", topic,
                              rd_kafka_err2str(md->topics[0].err));
                goto out;
        }
        /*
         * Read each partition to its high watermark as its first fetch after
         * our producer's init saw it: every record we ever wrote lies below
         * it. Not merely to its end as read_committed sees it (the stable
         * offset, also what ListOffsets answers such a consumer): another
         * relay's transaction still open there (its own checkpoint, written
         * at its commit) holds that below records of ours committed after
         * it, whose checkpoint would then be missed.
         */
        int np = md->topics[0].partition_cnt, left = np;
        end = malloc((size_t)np * sizeof(*end));
        done = calloc((size_t)np, sizeof(*done));
        parts = rd_kafka_topic_partition_list_new(np);
        if (!end || !done || !parts) {
                relay_err_set(err, errlen, "out of memory");
                goto out;
        }
        for (int i = 0; i < np; i++) {
                end[i] = -1; /* not fetched yet */
                rd_kafka_topic_partition_list_add(parts, topic, md->topics[0].partitions[i].id)
                        ->offset = RD_KAFKA_OFFSET_BEGINNING;
        }
        if ((e = rd_kafka_assign(rk, parts))) {
                relay_err_set(err, errlen, "could not read checkpoint topic \"%s\": %s", topic,
                              rd_kafka_err2str(e));
                goto out;
        }
        while (left > 0) {
                if (relay_now_ms() > deadline) {
                        timed_out(md, end, done, timeout_ms, err, errlen);
                        goto out;
                }
                if ((trc = call_tick(tick, ctx, err, errlen))) {
                        rc = trc;
                        goto out;
                }
                rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
                if (!m)
                        continue;
                if (m->err && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                        relay_err_set(err, errlen, "could not read checkpoint topic \"%s\": %s",
                                      topic, rd_kafka_message_errstr(m));
                        rd_kafka_message_destroy(m);
                        goto out;
                }
                /* The last record is usually a transaction marker, which no
                 * message shows: the end of the fetch (EOF, at the next
                 * offset to read) does. */
                int64_t next = m->err ? m->offset : m->offset + 1, lo;
                for (int i = 0; i < np; i++) {
                        if (done[i] || md->topics[0].partitions[i].id != m->partition)
                                continue;
                        if (end[i] < 0 &&
                            rd_kafka_get_watermark_offsets(rk, topic, m->partition, &lo,
                                                           &end[i]) != RD_KAFKA_RESP_ERR_NO_ERROR)
                                end[i] = -1;
                        if (end[i] >= 0 && next >= end[i]) {
                                done[i] = true;
                                left--;
                        }
                }
                bool ours = !m->err && m->key_len == keylen && memcmp(m->key, key, keylen) == 0;
                if (ours && !m->payload) {
                        /* A tombstone deletes the key, as compaction will:
                         * what came before it no longer counts. */
                        *found = false;
                        *out = 0;
                } else if (ours) {
                        char v[64];
                        relay_lsn_t lsn;
                        snprintf(v, sizeof(v), "%.*s", (int)(m->len < 63 ? m->len : 63),
                                 (const char *)m->payload);
                        if (relay_lsn_parse(v, &lsn) != 0) {
                                relay_err_set(err, errlen,
                                              "checkpoint topic \"%s\" holds \"%s\" for \"%s\" at "
                                              "offset %lld, which is not an LSN",
                                              topic, v, key, (long long)m->offset);
                                rd_kafka_message_destroy(m);
                                rc = RELAY_EPROTO;
                                goto out;
                        }
                        if (!*found || lsn > *out)
                                *out = lsn;
                        *found = true;
                }
                rd_kafka_message_destroy(m);
        }
        rc = 0;
out:
        free(end);
        free(done);
        if (parts)
                rd_kafka_topic_partition_list_destroy(parts);
        if (md)
                rd_kafka_metadata_destroy(md);
        if (rkt)
                rd_kafka_topic_destroy(rkt);
        rd_kafka_consumer_close(rk);
        rd_kafka_destroy(rk);
        return rc;
}
