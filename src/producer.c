/*
 * producer.c - owns the librdkafka producer handle, the fatal-error latch,
 * the last client warning and the topic-limit requests.
 *
 * Idempotence is not optional here: it is what keeps an aggregate's events
 * in commit order across retries (sequence numbers per partition) and stops
 * retries from writing duplicates. One request in flight per connection and
 * the gapless guarantee close librdkafka's implicit-ack hole (see
 * producer.h); the configuration refuses to reopen it unless
 * delivery.unsafe.allow.pipelining says so. The partitioner is
 * murmur2_random so a key lands where Java producers (and Debezium) put it.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/producer.h"

#include "relay/format.h"
#include "relay/kadmin.h"
#include "relay/log.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <librdkafka/rdkafka.h>

/* A message said once: set by a callback, taken by the loop; the last one
 * wins when several come between two takes. */
struct latch {
        bool set;
        char msg[RELAY_ERRBUF];
};

static bool latch_take(struct latch *l, char *buf, size_t len)
{
        if (!l->set)
                return false;
        l->set = false;
        relay_err_set(buf, len, "%s", l->msg);
        return true;
}

struct relay_producer {
        rd_kafka_t *rk;
        relay_producer_dr_fn *dr;
        void *ctx;
        bool fatal;
        char fatal_msg[RELAY_ERRBUF];
        struct latch warning; /* the client's last non-fatal error */
        int wakeup[2]; /* librdkafka writes to [1] when its main queue fills */
        relay_producer_sizes_t sizes;
        int linger_ms;     /* linger.ms as configured */
        bool linger_auto;  /* neither kafka.linger.ms nor its alias was set */
        char caveat[RELAY_ERRBUF]; /* what this librdkafka cannot do with these settings */
        bool stats_new;
        relay_kafka_stats_t stats; /* the latest statistics report, parsed */
        char *transactional_id; /* NULL: not transactional */
        relay_producer_parts_t *parts; /* the counts it compares with; borrowed, NULL: none */
        /* topic -> partition -> [txmsgs, acked_msgid, since (ts), warned,
         * stalling, txmsgs at since], from the statistics; owned */
        json_t *acks;
        /* What the statistics showed, to be said, oldest first: each
         * topic's partition growth, each partition's stall and news that it
         * ended, as [warning (bool), message]; owned, NULL until the first */
        json_t *notes;
};

/*
 * Errors that concern one event and that resending the same bytes to the
 * same topic cannot fix: the error policy (resend alone, dead-letter, stop)
 * decides. Everything else - unknown topic or partition (normal while a
 * topic is being created), leader changes, timeouts, brokers down - is
 * transient: the session fails and resumes from the slot, never reordering
 * an aggregate or dead-lettering an event that was not poison.
 */
static relay_dr_class_t classify(rd_kafka_resp_err_t e)
{
        switch (e) {
        case RD_KAFKA_RESP_ERR_NO_ERROR:
                return RELAY_DR_OK;
        case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
        case RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE:
                return RELAY_DR_TOO_LARGE;
        case RD_KAFKA_RESP_ERR_INVALID_RECORD:
        case RD_KAFKA_RESP_ERR_INVALID_TIMESTAMP:
        case RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION:
        case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
        case RD_KAFKA_RESP_ERR_POLICY_VIOLATION:
                return RELAY_DR_REJECTED;
        case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
        case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
        case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
                return RELAY_DR_UNKNOWN_TOPIC;
        case RD_KAFKA_RESP_ERR__PURGE_QUEUE:
        case RD_KAFKA_RESP_ERR__PURGE_INFLIGHT:
                return RELAY_DR_PURGED;
        default:
                return RELAY_DR_TRANSIENT;
        }
}

/*
 * The row named a partition the topic does not have (Debezium's partition
 * placement): no topic is missing, so the unknown-topic advice is wrong.
 * Transient like a missing topic: a new producer reads the partition count
 * again, and the events wait in PostgreSQL until partitions are added.
 */
static void unknown_partition(char *buf, size_t len, const char *topic, int32_t partition)
{
        relay_err_set(buf, len,
                      "topic \"%s\" has no partition %d, which the event names (its "
                      "partition column, table.fields.additional.placement): add partitions "
                      "to the topic or correct the column; the events wait in PostgreSQL "
                      "meanwhile",
                      topic, (int)partition);
}

/*
 * A message's opaque: the caller's tag shifted left by 8, and in the low
 * byte 1 + the index of the header that carries the event id (0: none).
 */
#define OPAQUE(tag, idh, part)                                                                     \
        ((void *)(uintptr_t)(((tag) << 8) | (uint64_t)(idh) | ((part) ? 0x80u : 0u)))
#define OPAQUE_TAG(o) ((uint64_t)(uintptr_t)(o) >> 8)
#define OPAQUE_IDH(o) ((size_t)((uintptr_t)(o) & 0x7fu))
#define OPAQUE_PART(o) (((uintptr_t)(o) & 0x80u) != 0) /* the event named its partition */

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
        relay_producer_t *p = opaque;
        (void)rk;
        relay_dr_class_t cls = classify(m->err);
        uint64_t tag = OPAQUE_TAG(m->_private);
        size_t idh = OPAQUE_IDH(m->_private);
        /* Idempotence means acks=all: a stored message always has an offset.
         * Without one, librdkafka acknowledged it implicitly because a later
         * request of its partition succeeded: it may never have been stored. */
        if (cls == RELAY_DR_OK && m->offset >= 0) {
                relay_delivery_t ok = {0, RELAY_DR_OK, NULL, NULL,
                                       m->rkt ? rd_kafka_topic_name(m->rkt) : "",
                                       m->key_len + m->len};
                p->dr(p->ctx, tag, &ok);
                return;
        }
        if (cls == RELAY_DR_OK)
                cls = RELAY_DR_IMPLICIT_ACK;
        /* Failures are rare: rebuild the event so the policy can resend it. */
        char buf[RELAY_ERRBUF], idtext[256]; /* RELAY_ID_ARGS shows 64 bytes */
        relay_header_t hdrs[RELAY_EVENT_MAX_WIRE_HEADERS];
        relay_event_t ev;
        rd_kafka_headers_t *kh = NULL;
        rd_kafka_timestamp_type_t tstype;
        const char *topic = m->rkt ? rd_kafka_topic_name(m->rkt) : "";

        memset(&ev, 0, sizeof(ev));
        ev.topic = topic;
        ev.key = m->key;
        ev.key_len = m->key_len;
        ev.value = m->payload;
        ev.value_len = m->len;
        ev.timestamp_ms = rd_kafka_message_timestamp(m, &tstype);
        /* A resend goes where the row said, not where the partitioner would. */
        ev.has_partition = OPAQUE_PART(m->_private);
        ev.partition = m->partition;
        if (rd_kafka_message_headers(m, &kh) == RD_KAFKA_RESP_ERR_NO_ERROR) {
                const char *name;
                const void *val;
                size_t len;
                for (size_t i = 0; ev.nheaders < RELAY_EVENT_MAX_WIRE_HEADERS &&
                                   rd_kafka_header_get_all(kh, i, &name, &val, &len) == 0;
                     i++) {
                        hdrs[ev.nheaders].name = name;
                        hdrs[ev.nheaders].value = val;
                        hdrs[ev.nheaders].len = len;
                        if (i + 1 == idh) /* its text under debezium-server's JSON */
                                relay_format_header_text(val, len, idtext, sizeof(idtext),
                                                         &ev.id, &ev.id_len);
                        ev.nheaders++;
                }
        }
        ev.headers = hdrs;
        switch (cls) {
        case RELAY_DR_IMPLICIT_ACK:
                relay_err_set(buf, sizeof(buf),
                              "event \"%.*s\" (topic \"%s\", partition %d) acknowledged "
                              "without an offset: librdkafka counted it as delivered because a "
                              "later request succeeded, so it may never have been stored",
                              RELAY_ID_ARGS(ev.id, ev.id_len), topic,
                              (int)m->partition);
                break;
        case RELAY_DR_UNKNOWN_TOPIC:
                if (m->err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION && ev.has_partition) {
                        unknown_partition(buf, sizeof(buf), topic, m->partition);
                        break;
                }
                /* The partitioner chose the partition, so the topic had it:
                 * it has fewer now (deleted and created again, often by
                 * auto-creation with num.partitions). It exists: telling
                 * the operator to create it misleads (0179). */
                if (m->err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION) {
                        relay_err_set(buf, sizeof(buf),
                                      "topic \"%s\" no longer has partition %d: it has fewer "
                                      "partitions than when the event was sent to it (deleted and "
                                      "created again?); the events wait in PostgreSQL and are sent "
                                      "again with the topic's partitions as they are now",
                                      topic, (int)m->partition);
                        break;
                }
                relay_err_set(buf, sizeof(buf),
                              "%s (topic \"%s\"): create the topic, or enable "
                              "auto.create.topics.enable on the brokers; the events wait in "
                              "PostgreSQL meanwhile",
                              rd_kafka_err2str(m->err), topic);
                break;
        default:
                relay_err_set(buf, sizeof(buf), "%s (topic \"%s\", partition %d)",
                              rd_kafka_err2str(m->err), topic, (int)m->partition);
                break;
        }
        bool rejected = cls == RELAY_DR_REJECTED || cls == RELAY_DR_TOO_LARGE;
        relay_delivery_t d = {rejected ? RELAY_EREJECTED : RELAY_EKAFKA, cls, buf, &ev, NULL, 0};
        p->dr(p->ctx, tag, &d);
}

static void error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
        relay_producer_t *p = opaque;
        if (err == RD_KAFKA_RESP_ERR__FATAL) {
                char buf[RELAY_ERRBUF];
                rd_kafka_resp_err_t orig = rd_kafka_fatal_error(rk, buf, sizeof(buf));
                p->fatal = true;
                relay_err_set(p->fatal_msg, sizeof(p->fatal_msg), "fatal producer error: %s: %s",
                         rd_kafka_err2name(orig), buf);
                return;
        }
        relay_err_set(p->warning.msg, sizeof(p->warning.msg), "%s: %s",
                      rd_kafka_err2name((rd_kafka_resp_err_t)err), reason);
        p->warning.set = true;
}

static int64_t json_int(json_t *o, const char *key)
{
        return (int64_t)json_integer_value(json_object_get(o, key));
}

struct relay_producer_parts {
        json_t *n; /* topic name -> partitions */
        /* "topic partition" (a topic name has no space) -> true: said
         * stalled, its end not said yet, by this producer or an earlier one */
        json_t *stalled;
};

relay_producer_parts_t *relay_producer_parts_new(void)
{
        relay_producer_parts_t *pp = calloc(1, sizeof(*pp));
        if (pp && (!(pp->n = json_object()) || !(pp->stalled = json_object()))) {
                relay_producer_parts_free(pp);
                return NULL;
        }
        return pp;
}

void relay_producer_parts_free(relay_producer_parts_t *pp)
{
        if (!pp)
                return;
        json_decref(pp->n);
        json_decref(pp->stalled);
        free(pp);
}

/*
 * A topic's partition count from the statistics' "topics" object (each
 * topic's "partitions" has one entry per partition and "-1" for messages
 * not partitioned yet), against the count seen before, by this producer
 * or an earlier one (the counts outlive producers: sessions replace them). Keys
 * map to hash % partitions: once librdkafka knows more partitions (its
 * metadata refresh), an aggregate's later events may go to another
 * partition than its earlier ones, which consumers see in no common order.
 * Kafka allows it and no event is lost, but the operator should know.
 */
/* Queue a note for relay_producer_take_note() (dropped when out of memory,
 * as the report itself would be). */
static void note(relay_producer_t *p, bool warning, const char *msg)
{
        if (!p->notes && !(p->notes = json_array()))
                return;
        json_array_append_new(p->notes, json_pack("[b, s]", warning, msg));
}

static void watch_partitions(relay_producer_t *p, json_t *topics)
{
        const char *name, *pname;
        json_t *t, *v;
        if (!p->parts)
                return;
        json_object_foreach(topics, name, t) {
                json_int_t n = 0;
                json_object_foreach(json_object_get(t, "partitions"), pname, v) {
                        if (strcmp(pname, "-1") != 0)
                                n++;
                }
                json_int_t was = json_integer_value(json_object_get(p->parts->n, name));
                if (n > was && was > 0) {
                        char msg[RELAY_ERRBUF];
                        relay_err_set(msg, sizeof(msg),
                                      "topic \"%s\" now has %lld partitions, not %lld: keys map "
                                      "to partitions by their count, so an aggregate's later events "
                                      "may go to another partition than its earlier ones, and "
                                      "consumers of both partitions can see them out of order "
                                      "(events already in Kafka stay where they are; nothing is "
                                      "lost)",
                                      name, (long long)n, (long long)was);
                        note(p, true, msg);
                }
                if (n > 0 && n != was)
                        json_object_set_new(p->parts->n, name, json_integer(n));
        }
}

/* Wait this long without an acknowledgement while sending before a stall is said. */
#define STALL_US (10 * 1000000LL)

/*
 * A partition whose events librdkafka sends and the broker does not
 * acknowledge: a retriable refusal (NOT_ENOUGH_REPLICAS while its in-sync
 * replicas are fewer than min.insync.replicas, NOT_LEADER_OR_FOLLOWER, a
 * request that times out) is resent by librdkafka, without a word, until
 * message.timeout.ms. From two statistics reports of each partition:
 * txmsgs (sent, resends counted) grew and acked_msgid did not, while
 * messages wait (msg_cnt) -> stalled since the report before; said once
 * after STALL_US, and again when acknowledgements come back. ts is the
 * report's (librdkafka's monotonic clock, microseconds). Per report, not
 * per event.
 */

/* A partition said stalled, in the parts the producers share: on (the
 * warning), off (its end said), or only asked (on < 0). A producer
 * replaced after a failed session (a delivery timed out, say) never says
 * the end of its stall: the next one does, at its first acknowledgement
 * there. */
static bool said_stalled(relay_producer_t *p, const char *topic, const char *partition, int on)
{
        char key[RELAY_ERRBUF];
        if (!p->parts || !p->parts->stalled)
                return false;
        snprintf(key, sizeof(key), "%s %s", topic, partition);
        if (on > 0)
                json_object_set_new(p->parts->stalled, key, json_true());
        else if (on == 0)
                json_object_del(p->parts->stalled, key);
        return json_object_get(p->parts->stalled, key) != NULL;
}

static void note_again(relay_producer_t *p, const char *topic, const char *partition)
{
        char msg[RELAY_ERRBUF];
        relay_err_set(msg, sizeof(msg), "topic \"%s\" partition %s: Kafka acknowledges events again",
                      topic, partition);
        note(p, false, msg);
        said_stalled(p, topic, partition, 0);
}

void relay_producer_end_stalls(relay_producer_t *p)
{
        const char *name, *pname;
        json_t *seen, *was;
        json_object_foreach(p->acks, name, seen) {
                json_object_foreach(seen, pname, was) {
                        if (json_integer_value(json_array_get(was, 3))) {
                                note_again(p, name, pname);
                                json_array_set_new(was, 3, json_integer(0));
                        }
                }
        }
        p->stats.partitions_stalled = 0;
}

static void watch_acks(relay_producer_t *p, json_t *topics, int64_t ts, int64_t waiting)
{
        const char *name, *pname;
        json_t *t, *v;
        char msg[RELAY_ERRBUF];
        p->stats.partitions_stalled = 0;
        if (!p->acks && !(p->acks = json_object()))
                return;
        json_object_foreach(topics, name, t) {
                json_t *seen = json_object_get(p->acks, name);
                if (!seen) {
                        if (json_object_set_new(p->acks, name, json_object()) != 0)
                                return;
                        seen = json_object_get(p->acks, name);
                }
                json_object_foreach(json_object_get(t, "partitions"), pname, v) {
                        if (strcmp(pname, "-1") == 0)
                                continue;
                        int64_t tx = json_int(v, "txmsgs"), acked = json_int(v, "acked_msgid");
                        json_t *was = json_object_get(seen, pname);
#define WAS(i) json_integer_value(json_array_get(was, i))
                        int64_t since = ts, warned = 0, stalling = 0, tx0 = tx;
                        /* Begun by a send, it goes on while nothing is acknowledged. */
                        if (was && WAS(1) == acked && waiting > 0 && (tx > WAS(0) || WAS(4))) {
                                since = WAS(2);
                                warned = WAS(3);
                                stalling = 1;
                                tx0 = WAS(5);
                        } else if ((was ? acked != WAS(1) : acked > 0) &&
                                   ((was && WAS(3)) || said_stalled(p, name, pname, -1))) {
                                /* Acknowledged since the last report (the
                                 * first: since this producer began). */
                                note_again(p, name, pname);
                        }
                        if (!warned && ts - since >= STALL_US) {
                                relay_err_set(
                                    msg, sizeof(msg),
                                    "topic \"%s\" partition %s: Kafka has acknowledged no event "
                                    "for %lld s, of %lld sends to its leader (broker %lld) "
                                    "meanwhile: the broker refuses them with an error that "
                                    "is retried (NOT_ENOUGH_REPLICAS when fewer replicas are in "
                                    "sync than the topic's min.insync.replicas, a leader "
                                    "change, a timeout; kafka.debug=msg logs its answer). They "
                                    "are resent until kafka.message.timeout.ms, and nothing "
                                    "from them on is confirmed to PostgreSQL meanwhile",
                                    name, pname, (long long)((ts - since) / 1000000),
                                    (long long)(tx - tx0), (long long)json_int(v, "leader"));
                                note(p, true, msg);
                                said_stalled(p, name, pname, 1);
                                warned = 1;
                        }
                        /* Said by an earlier producer too: while this
                         * one sends there, until an acknowledgement says
                         * it ended (one that never sends there again
                         * does not hold the gauge up). */
                        p->stats.partitions_stalled +=
                            warned || (tx > 0 && said_stalled(p, name, pname, -1));
#undef WAS
                        json_object_set_new(seen, pname,
                                            json_pack("[I, I, I, I, I, I]", (json_int_t)tx,
                                                      (json_int_t)acked, (json_int_t)since,
                                                      (json_int_t)warned, (json_int_t)stalling,
                                                      (json_int_t)tx0));
                }
        }
}

bool relay_producer_take_note(relay_producer_t *p, char *buf, size_t len, bool *warning)
{
        json_t *n = json_array_get(p->notes, 0);
        if (!n)
                return false;
        *warning = json_is_true(json_array_get(n, 0));
        relay_err_set(buf, len, "%s", json_string_value(json_array_get(n, 1)));
        json_array_remove(p->notes, 0);
        return true;
}

/*
 * statistics.interval.ms: librdkafka queues the report as a JSON document
 * and hands it over inside rd_kafka_poll(), so this runs on the main loop's
 * thread. Only a few gauges are kept (see relay_kafka_stats_t); bootstrap
 * and internal broker entries (nodeid < 0) are left out.
 */
void relay_producer_read_stats(relay_producer_t *p, const char *json, size_t len)
{
        relay_kafka_stats_t *st = &p->stats;
        json_t *root = json_loadb(json, len, 0, NULL), *brokers, *b;
        const char *name;

        /* The whole report at debug level (batch sizes, requests, round
         * trips per broker and partition): how a slow far broker is
         * diagnosed. */
        relay_log_debug("librdkafka statistics: %.*s", (int)len, json);
        if (!json_is_object(root)) {
                json_decref(root);
                return;
        }
        memset(st, 0, sizeof(*st));
        st->known = true;
        st->msg_cnt = json_int(root, "msg_cnt");
        st->msg_size = json_int(root, "msg_size");
        brokers = json_object_get(root, "brokers");
        json_object_foreach(brokers, name, b) {
                json_t *rtt = json_object_get(b, "rtt");
                const char *state = json_string_value(json_object_get(b, "state"));
                if (json_int(b, "nodeid") < 0 || st->nbrokers >= RELAY_KAFKA_STATS_BROKERS)
                        continue;
                size_t i = st->nbrokers++;
                relay_err_set(st->broker[i].name, sizeof(st->broker[i].name), "%s", name);
                st->broker[i].up = state != NULL && strcmp(state, "UP") == 0;
                if (st->broker[i].up)
                        st->brokers_up++;
                st->broker[i].rtt_avg = (double)json_int(rtt, "avg") / 1e6;
                st->broker[i].rtt_p99 = (double)json_int(rtt, "p99") / 1e6;
                st->broker[i].rtt_min = (double)json_int(rtt, "min") / 1e6;
                st->broker[i].rtt_cnt = json_int(rtt, "cnt");
                st->broker[i].outbuf_cnt = json_int(b, "outbuf_cnt");
                st->broker[i].waitresp_cnt = json_int(b, "waitresp_cnt");
        }
        watch_partitions(p, json_object_get(root, "topics"));
        watch_acks(p, json_object_get(root, "topics"), json_int(root, "ts"), st->msg_cnt);
        json_decref(root);
        p->stats_new = true;
}

static int stats_cb(rd_kafka_t *rk, char *json, size_t len, void *opaque)
{
        (void)rk;
        relay_producer_read_stats(opaque, json, len);
        return 0; /* librdkafka frees json */
}

bool relay_producer_stats(relay_producer_t *p, relay_kafka_stats_t *out)
{
        if (!p->stats_new)
                return false;
        *out = p->stats;
        p->stats_new = false;
        return true;
}

/* librdkafka logs to stderr by default; our loop reports errors once
 * through error_cb instead, so its lines are debug output here: with
 * log.level=debug (and kafka.debug=... for more of them) they show what the
 * client did, which a delivery or idempotence problem needs. Called from
 * librdkafka's threads: relay_log writes each line with one fwrite(). */
static void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
        (void)rk;
        relay_log_debug("librdkafka %d %s: %s", level, fac, buf);
}

static int conf_set(rd_kafka_conf_t *conf, const char *name, const char *value, char *err,
                    size_t errlen)
{
        char kerr[RELAY_ERRBUF];
        if (rd_kafka_conf_set(conf, name, value, kerr, sizeof(kerr)) != RD_KAFKA_CONF_OK) {
                relay_err_set(err, errlen, "invalid Kafka setting \"kafka.%s\": %s", name, kerr);
                return RELAY_EINVAL;
        }
        return 0;
}

int relay_producer_new(relay_producer_t **out, const relay_config_t *cfg, int64_t max_batch,
                       int linger_ms, const char *transactional_id,
                       relay_producer_parts_t *parts, relay_producer_dr_fn *dr, void *ctx,
                       char *err, size_t errlen)
{
        static const char *const defaults[][2] = {
                {"enable.idempotence", "true"},
                /* The implicit-ack hole: see producer.h. */
                {"max.in.flight.requests.per.connection", "1"},
                {"enable.gapless.guarantee", "true"},
                {"partitioner", "murmur2_random"},
                {"linger.ms", "5"},
                /* librdkafka's 100 000 holds ~50 MB of events during a
                 * catch-up and buys no speed: the WAL is the buffer. */
                {"queue.buffering.max.messages", "10000"},
                {"client.id", "outbox-relay"},
                /* For /metrics: a report every 5 s costs librdkafka one JSON
                 * document and us one parse on the main thread. */
                {"statistics.interval.ms", "5000"},
        };
        relay_producer_t *p = calloc(1, sizeof(*p));
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        char kerr[RELAY_ERRBUF];

        int rc = RELAY_EINVAL;
        if (!p || !conf) {
                relay_err_set(err, errlen, "out of memory");
                rc = RELAY_ENOMEM;
                goto fail;
        }
        p->dr = dr;
        p->ctx = ctx;
        p->parts = parts;
        p->wakeup[0] = p->wakeup[1] = -1;
        if (pipe(p->wakeup) != 0 || fcntl(p->wakeup[0], F_SETFL, O_NONBLOCK) != 0 ||
            fcntl(p->wakeup[1], F_SETFL, O_NONBLOCK) != 0 ||
            fcntl(p->wakeup[0], F_SETFD, FD_CLOEXEC) != 0 ||
            fcntl(p->wakeup[1], F_SETFD, FD_CLOEXEC) != 0) {
                relay_err_set(err, errlen, "could not create a pipe: %s", strerror(errno));
                rc = RELAY_EIO;
                goto fail;
        }
        for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++)
                if (conf_set(conf, defaults[i][0], defaults[i][1], err, errlen))
                        goto fail;
        char val[64];
        size_t vlen = sizeof(val);
        if (linger_ms > 0) {
                snprintf(val, sizeof(val), "%d", linger_ms);
                if (conf_set(conf, "linger.ms", val, err, errlen))
                        goto fail;
        }
        p->linger_auto = true;
        for (size_t i = 0; i < relay_config_kafka_count(cfg); i++) {
                const char *name, *value;
                relay_config_kafka_at(cfg, i, &name, &value);
                if (strcmp(name, "linger.ms") == 0 || strcmp(name, "queue.buffering.max.ms") == 0)
                        p->linger_auto = false;
                if (conf_set(conf, name, value, err, errlen))
                        goto fail;
                if (strcmp(name, "enable.idempotence") == 0 &&
                    !relay_kadmin_conf_true(conf, name)) {
                        relay_err_set(err, errlen,
                                      "kafka.enable.idempotence=%s is not allowed: without "
                                      "idempotence a retry can reorder or duplicate an "
                                      "aggregate's events; remove the setting",
                                      value);
                        goto fail;
                }
        }
        if (transactional_id) {
                if (!(p->transactional_id = strdup(transactional_id))) {
                        relay_err_set(err, errlen, "out of memory");
                        rc = RELAY_ENOMEM;
                        goto fail;
                }
                if (conf_set(conf, "transactional.id", transactional_id, err, errlen))
                        goto fail;
        }
        vlen = sizeof(val);
        p->linger_ms = 5;
        if (rd_kafka_conf_get(conf, "linger.ms", val, &vlen) == RD_KAFKA_CONF_OK)
                p->linger_ms = (int)strtol(val, NULL, 10);
        vlen = sizeof(val);
        /* librdkafka before 2.6.1 sends the server's nonce with its own
         * appended twice in SCRAM's client-final message; Kafka 4 checks
         * the nonce strictly (RFC 5802) and refuses every login (librdkafka
         * PR 4895). Java clients log in with the same credentials. */
        if (rd_kafka_version() < 0x020601ff &&
            rd_kafka_conf_get(conf, "sasl.mechanisms", val, &vlen) == RD_KAFKA_CONF_OK &&
            strstr(val, "SCRAM"))
                relay_err_set(p->caveat, sizeof(p->caveat),
                              "librdkafka %s cannot log in with %s to Kafka 4 brokers (they refuse "
                              "its SCRAM nonce; fixed in librdkafka 2.6.1): use "
                              "kafka.sasl.mechanisms=PLAIN with kafka.security.protocol=SASL_SSL, "
                              "or a librdkafka of 2.6.1 or later",
                              rd_kafka_version_str(), val);
        vlen = sizeof(val);
        p->sizes.batch_size = 1000000;
        if (rd_kafka_conf_get(conf, "batch.size", val, &vlen) == RD_KAFKA_CONF_OK)
                p->sizes.batch_size = strtoll(val, NULL, 10);
        if (max_batch > 0 && max_batch < p->sizes.batch_size) {
                snprintf(val, sizeof(val), "%lld", (long long)max_batch);
                if (conf_set(conf, "batch.size", val, err, errlen))
                        goto fail;
                p->sizes.batch_size = max_batch;
        }
        vlen = sizeof(val);
        p->sizes.max_message = 1000000;
        if (rd_kafka_conf_get(conf, "message.max.bytes", val, &vlen) == RD_KAFKA_CONF_OK)
                p->sizes.max_message = strtoll(val, NULL, 10);
        vlen = sizeof(val);
        p->sizes.compresses =
                rd_kafka_conf_get(conf, "compression.codec", val, &vlen) == RD_KAFKA_CONF_OK &&
                strcmp(val, "none") != 0;
        rd_kafka_conf_set_opaque(conf, p);
        rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
        rd_kafka_conf_set_error_cb(conf, error_cb);
        rd_kafka_conf_set_log_cb(conf, log_cb);
        rd_kafka_conf_set_stats_cb(conf, stats_cb);

        p->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, kerr, sizeof(kerr));
        if (!p->rk) {
                relay_err_set(err, errlen, "could not create Kafka producer: %s", kerr);
                goto fail;
        }
        /* Delivery reports land on the main queue; have it wake our poll(). */
        rd_kafka_queue_t *q = rd_kafka_queue_get_main(p->rk);
        rd_kafka_queue_io_event_enable(q, p->wakeup[1], "1", 1);
        rd_kafka_queue_destroy(q);
        *out = p;
        return 0;
fail:
        if (conf)
                rd_kafka_conf_destroy(conf);
        if (p) {
                if (p->wakeup[0] >= 0)
                        close(p->wakeup[0]);
                if (p->wakeup[1] >= 0)
                        close(p->wakeup[1]);
                free(p->transactional_id);
        }
        free(p);
        return rc;
}

void relay_producer_free(relay_producer_t *p)
{
        if (!p)
                return;
        rd_kafka_purge(p->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        /* Serve the purge reports now, while the caller's tracker still exists. */
        rd_kafka_poll(p->rk, 0);
        rd_kafka_flush(p->rk, 100);
        rd_kafka_destroy(p->rk);
        close(p->wakeup[0]);
        close(p->wakeup[1]);
        free(p->transactional_id);
        json_decref(p->acks);
        json_decref(p->notes);
        free(p);
}

/*
 * The client's last error when it says why no broker could be used for
 * good: a refused login or certificate. 1 with err filled (the error and
 * its fix), 0 when there is none.
 */
static int login_failure(relay_producer_t *p, char *err, size_t errlen)
{
        rd_kafka_poll(p->rk, 0); /* error_cb runs from the main queue */
        if (!p->warning.set)
                return 0;
        const char *fix = NULL;
        if (strstr(p->warning.msg, "SASL authentication") || strstr(p->warning.msg, "SASL handshake"))
                fix = p->caveat[0] ? p->caveat
                                   : "check kafka.sasl.mechanisms, kafka.sasl.username and "
                                     "kafka.sasl.password";
        else if (strstr(p->warning.msg, "certificate verify failed") ||
                 strstr(p->warning.msg, "SSL handshake failed"))
                fix = "check kafka.ssl.ca.location (the CA that signed the brokers' certificates) "
                      "and that the certificates name the hosts in kafka.bootstrap.servers";
        if (!fix)
                return 0;
        p->warning.set = false;
        relay_err_set(err, errlen, "%s; %s", p->warning.msg, fix);
        return 1;
}

int relay_producer_ping(relay_producer_t *p, int timeout_ms, char *err, size_t errlen)
{
        const struct rd_kafka_metadata *md = NULL;
        rd_kafka_resp_err_t e = rd_kafka_metadata(p->rk, 0, NULL, &md, timeout_ms);
        if (e) {
                if (login_failure(p, err, errlen))
                        return RELAY_ESETUP;
                relay_err_set(err, errlen, "%s", rd_kafka_err2str(e));
                /* _TRANSPORT here means no broker became usable in time. */
                return e == RD_KAFKA_RESP_ERR__TIMED_OUT || e == RD_KAFKA_RESP_ERR__TRANSPORT
                               ? RELAY_EAGAIN
                               : RELAY_EKAFKA;
        }
        int nbrokers = md->broker_cnt;
        rd_kafka_metadata_destroy(md);
        if (nbrokers < 1) {
                relay_err_set(err, errlen, "the cluster reported no brokers");
                return RELAY_EKAFKA;
        }
        return 0;
}

int relay_producer_rtt(relay_producer_t *p, int tries, int timeout_ms, double *rtt_ms, char *err,
                       size_t errlen)
{
        double best = -1;
        for (int i = 0; i < tries; i++) {
                const struct rd_kafka_metadata *md = NULL;
                struct timespec a, b;
                clock_gettime(CLOCK_MONOTONIC, &a);
                rd_kafka_resp_err_t e = rd_kafka_metadata(p->rk, 0, NULL, &md, timeout_ms);
                clock_gettime(CLOCK_MONOTONIC, &b);
                if (e) {
                        relay_err_set(err, errlen, "%s", rd_kafka_err2str(e));
                        return e == RD_KAFKA_RESP_ERR__TIMED_OUT ? RELAY_EAGAIN : RELAY_EKAFKA;
                }
                rd_kafka_metadata_destroy(md);
                double ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
                if (best < 0 || ms < best)
                        best = ms;
        }
        if (best < 0) {
                relay_err_set(err, errlen, "no round trip measured");
                return RELAY_EINVAL;
        }
        *rtt_ms = best;
        return 0;
}

/*
 * With one request in flight, an event that arrives while a request is out
 * waits for its response anyway, so a linger up to the round trip costs it
 * nothing; a shorter one makes the batch ready early and librdkafka's
 * broker thread then spins until the response comes (rd_kafka_msgq_allow_
 * wakeup_at sets its wake-up to now while the idempotence check declines
 * to send): a third of a core at 20 ms, 6 % at 5 ms. Below 10 ms the
 * default 5 stays (what the relay gains there does not pay for replacing
 * the producer: a new connection, four round trips); at most 100 ms, so
 * one lone event is not held long when the broker is very far.
 */
int relay_producer_linger_for_rtt(double rtt_ms)
{
        if (!(rtt_ms >= 10)) /* also NaN */
                return 5;
        if (rtt_ms > 100)
                return 100;
        return (int)(rtt_ms + 0.5);
}

struct relay_producer_rtt_watch {
        double rtt[RELAY_PRODUCER_RTT_WINDOWS]; /* ms, the run's windows */
        int n;                               /* windows in the run */
        int side;                            /* +1 farther, -1 nearer */
};

relay_producer_rtt_watch_t *relay_producer_rtt_watch_new(void)
{
        return calloc(1, sizeof(relay_producer_rtt_watch_t));
}

void relay_producer_rtt_watch_free(relay_producer_rtt_watch_t *w)
{
        free(w);
}

/* +1 or -1 when linger b is clearly longer or shorter than a, else 0: both
 * twice (or half) and 10 ms apart, so the noise of a loaded machine or a
 * few ms of broker time never replaces the producer. */
static int linger_side(int a, int b)
{
        int lo = a < b ? a : b, hi = a < b ? b : a;
        if (hi < 2 * lo || hi - lo < 10)
                return 0;
        return b > a ? 1 : -1;
}

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return (x > y) - (x < y);
}

int relay_producer_rtt_watch_report(relay_producer_rtt_watch_t *w, const relay_kafka_stats_t *st,
                                    bool steady, int linger_ms, double *rtt_ms)
{
        double least = -1;
        for (size_t i = 0; i < st->nbrokers; i++)
                if (st->broker[i].rtt_cnt > 0 && (least < 0 || st->broker[i].rtt_min * 1e3 < least))
                        least = st->broker[i].rtt_min * 1e3;
        if (least < 0)
                return 0; /* nothing asked of any broker: tells nothing */
        int side = steady ? linger_side(linger_ms, relay_producer_linger_for_rtt(least)) : 0;
        if (side == 0 || (w->n > 0 && side != w->side)) {
                w->n = 0;
                if (side == 0)
                        return 0;
        }
        w->side = side;
        w->rtt[w->n++] = least;
        if (w->n < RELAY_PRODUCER_RTT_WINDOWS)
                return 0;
        double sorted[RELAY_PRODUCER_RTT_WINDOWS];
        memcpy(sorted, w->rtt, sizeof(sorted));
        qsort(sorted, RELAY_PRODUCER_RTT_WINDOWS, sizeof(double), cmp_double);
        w->n = 0;
        *rtt_ms = sorted[RELAY_PRODUCER_RTT_WINDOWS / 2];
        return relay_producer_linger_for_rtt(*rtt_ms);
}

int relay_producer_linger_ms(const relay_producer_t *p)
{
        return p->linger_ms;
}

bool relay_producer_linger_auto(const relay_producer_t *p)
{
        return p->linger_auto;
}

bool relay_producer_may_relinger(relay_producer_t *p, int linger_ms, size_t max_queued)
{
        return linger_ms > 0 && p->linger_auto && linger_ms != p->linger_ms &&
               relay_producer_outq_len(p) <= max_queued;
}

int relay_producer_send(relay_producer_t *p, const relay_event_t *ev, uint64_t tag, char *err,
                        size_t errlen)
{
        size_t idh = 0;
        rd_kafka_headers_t *hdrs = rd_kafka_headers_new(ev->nheaders);
        for (size_t i = 0; i < ev->nheaders; i++) {
                const relay_header_t *h = &ev->headers[i];
                /* The id header: the row's bytes, or re-encoded by a
                 * profile (debezium-server's JSON) under its name. */
                if (!idh && ev->id && i < 127 &&
                    ((h->value == ev->id && h->len == ev->id_len) || strcmp(h->name, "id") == 0))
                        idh = i + 1;
                rd_kafka_header_add(hdrs, h->name, -1, h->value, h->value ? (ssize_t)h->len : 0);
        }
        rd_kafka_resp_err_t e = rd_kafka_producev(
                p->rk, RD_KAFKA_V_TOPIC(ev->topic), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                RD_KAFKA_V_KEY(ev->key, ev->key_len),
                RD_KAFKA_V_VALUE((void *)(uintptr_t)ev->value, ev->value ? ev->value_len : 0),
                RD_KAFKA_V_PARTITION(ev->has_partition ? ev->partition : RD_KAFKA_PARTITION_UA),
                RD_KAFKA_V_TIMESTAMP(ev->timestamp_ms), RD_KAFKA_V_HEADERS(hdrs),
                RD_KAFKA_V_OPAQUE(OPAQUE(tag, idh, ev->has_partition)), RD_KAFKA_V_END);
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
                return 0; /* headers now belong to the message */
        rd_kafka_headers_destroy(hdrs);
        if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL)
                return RELAY_EAGAIN;
        if (e == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION && ev->has_partition) {
                unknown_partition(err, errlen, ev->topic, ev->partition);
                return RELAY_EKAFKA;
        }
        relay_err_set(err, errlen, "could not enqueue message for topic \"%s\": %s", ev->topic,
                      rd_kafka_err2str(e));
        return e == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE ? RELAY_EREJECTED : RELAY_EKAFKA;
}

void relay_producer_poll(relay_producer_t *p, int timeout_ms)
{
        char buf[64];
        while (read(p->wakeup[0], buf, sizeof(buf)) > 0)
                ;
        rd_kafka_poll(p->rk, timeout_ms);
}

void relay_producer_flush(relay_producer_t *p, int timeout_ms)
{
        char buf[64];
        while (read(p->wakeup[0], buf, sizeof(buf)) > 0)
                ;
        rd_kafka_flush(p->rk, timeout_ms);
}

int relay_producer_fd(const relay_producer_t *p)
{
        return p->wakeup[0];
}

static bool fenced_code(rd_kafka_resp_err_t e)
{
        return e == RD_KAFKA_RESP_ERR__FENCED || e == RD_KAFKA_RESP_ERR_PRODUCER_FENCED ||
               e == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH;
}

/* The message of a fenced producer: what happened and what it means. */
static void fenced_message(relay_producer_t *p, const char *detail)
{
        relay_err_set(p->fatal_msg, sizeof(p->fatal_msg),
                      "another producer took over transactional.id \"%s\" (%s): a newer relay "
                      "owns the replication slot, so this one stops without committing anything "
                      "more; had this relay not lost its slot, a relay of another slot or server "
                      "uses the same transactional.id, and the two fence each other at every "
                      "restart: give each slot its own eos.transactional.id (empty derives one)",
                      p->transactional_id ? p->transactional_id : "", detail);
}

int relay_producer_check(relay_producer_t *p, char *err, size_t errlen)
{
        /* Ask librdkafka itself: its fatal state is set before error_cb
         * is served, and produce calls fail from that moment. */
        char buf[RELAY_ERRBUF];
        rd_kafka_resp_err_t e = rd_kafka_fatal_error(p->rk, buf, sizeof(buf));
        if (!p->fatal) {
                if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
                        return 0;
                p->fatal = true;
                relay_err_set(p->fatal_msg, sizeof(p->fatal_msg), "fatal producer error: %s: %s",
                              rd_kafka_err2name(e), buf);
        }
        if (p->transactional_id && fenced_code(e)) {
                fenced_message(p, rd_kafka_err2name(e));
                relay_err_set(err, errlen, "%s", p->fatal_msg);
                return RELAY_EFENCED;
        }
        relay_err_set(err, errlen, "%s", p->fatal_msg);
        return RELAY_EKAFKA;
}

const char *relay_producer_caveat(const relay_producer_t *p)
{
        return p->caveat[0] ? p->caveat : NULL;
}

/* One transactional call's error as a return code (the error is consumed). */
static int txn_error(relay_producer_t *p, rd_kafka_error_t *e, const char *what, char *err,
                     size_t errlen)
{
        int rc;
        if (rd_kafka_error_is_fatal(e)) {
                p->fatal = true;
                if (fenced_code(rd_kafka_error_code(e))) {
                        fenced_message(p, rd_kafka_error_name(e));
                        rc = RELAY_EFENCED;
                } else {
                        relay_err_set(p->fatal_msg, sizeof(p->fatal_msg),
                                      "fatal producer error: %s: %s", rd_kafka_error_name(e),
                                      rd_kafka_error_string(e));
                        rc = RELAY_EKAFKA;
                }
                relay_err_set(err, errlen, "%s", p->fatal_msg);
        } else {
                rc = rd_kafka_error_txn_requires_abort(e) ? RELAY_EKAFKA
                     : rd_kafka_error_is_retriable(e)     ? RELAY_EAGAIN
                                                          : RELAY_EKAFKA;
                relay_err_set(err, errlen, "could not %s the Kafka transaction: %s", what,
                              rd_kafka_error_string(e));
        }
        rd_kafka_error_destroy(e);
        return rc;
}

int relay_producer_txn_init(relay_producer_t *p, int timeout_ms, char *err, size_t errlen)
{
        rd_kafka_error_t *e = rd_kafka_init_transactions(p->rk, timeout_ms);
        return e ? txn_error(p, e, "initialize", err, errlen) : 0;
}

int relay_producer_txn_begin(relay_producer_t *p, char *err, size_t errlen)
{
        rd_kafka_error_t *e = rd_kafka_begin_transaction(p->rk);
        return e ? txn_error(p, e, "begin", err, errlen) : 0;
}

int relay_producer_txn_commit(relay_producer_t *p, int timeout_ms, char *err, size_t errlen)
{
        rd_kafka_error_t *e = rd_kafka_commit_transaction(p->rk, timeout_ms);
        return e ? txn_error(p, e, "commit", err, errlen) : 0;
}

int relay_producer_txn_abort(relay_producer_t *p, int timeout_ms, char *err, size_t errlen)
{
        rd_kafka_error_t *e = rd_kafka_abort_transaction(p->rk, timeout_ms);
        return e ? txn_error(p, e, "abort", err, errlen) : 0;
}

bool relay_producer_take_warning(relay_producer_t *p, char *buf, size_t len)
{
        return latch_take(&p->warning, buf, len);
}

size_t relay_producer_outq_len(relay_producer_t *p)
{
        return (size_t)rd_kafka_outq_len(p->rk);
}

relay_producer_sizes_t relay_producer_sizes(const relay_producer_t *p)
{
        return p->sizes;
}

int relay_producer_topic_limit(relay_producer_t *p, const char *topic, int timeout_ms,
                               int64_t *bytes, char *err, size_t errlen)
{
        char *v = NULL;
        *bytes = 0;
        rd_kafka_resp_err_t e = relay_kadmin_config(p->rk, RD_KAFKA_RESOURCE_TOPIC, topic,
                                                     "max.message.bytes", timeout_ms, &v, err,
                                                     errlen);
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR) {
                *bytes = strtoll(v, NULL, 10);
                int rc = *bytes > 0 ? 0
                                    : relay_err(err, errlen, RELAY_EKAFKA,
                                                "the cluster says max.message.bytes = \"%s\"", v);
                free(v);
                return rc;
        }
        if (relay_kadmin_timed_out(e))
                return RELAY_EIO;
        if (e != RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
                return RELAY_EKAFKA;
        /* Not created yet: it will get the brokers' default. */
        const struct rd_kafka_metadata *md = NULL;
        char id[16], berr[RELAY_ERRBUF];
        if (rd_kafka_metadata(p->rk, 0, NULL, &md, timeout_ms) == RD_KAFKA_RESP_ERR_NO_ERROR &&
            md->broker_cnt > 0) {
                snprintf(id, sizeof(id), "%d", (int)md->brokers[0].id);
                if (relay_kadmin_config(p->rk, RD_KAFKA_RESOURCE_BROKER, id, "message.max.bytes",
                                        timeout_ms, &v, berr,
                                        sizeof(berr)) == RD_KAFKA_RESP_ERR_NO_ERROR) {
                        *bytes = strtoll(v, NULL, 10);
                        free(v);
                }
        }
        if (md)
                rd_kafka_metadata_destroy(md);
        return RELAY_EAGAIN;
}
