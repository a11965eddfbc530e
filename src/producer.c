/*
 * producer.c - owns the librdkafka producer handle, the fatal-error latch and
 * the last client warning.
 *
 * Idempotence is not optional here: it is what keeps an aggregate's events
 * in commit order across retries (max 5 in flight, sequence numbers per
 * partition) and stops retries from writing duplicates. The partitioner is
 * murmur2_random so a key lands where Java producers (and Debezium) put it.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/producer.h"

#include "relay/log.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fcntl.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

struct relay_producer {
        rd_kafka_t *rk;
        relay_producer_dr_fn *dr;
        void *ctx;
        bool fatal;
        char fatal_msg[RELAY_ERRBUF];
        bool warned;
        char warning[RELAY_ERRBUF];
        int wakeup[2]; /* librdkafka writes to [1] when its main queue fills */
};

/*
 * Errors that concern one event and will not go away by resending the same
 * bytes to the same topic: the error policy (retry, dead-letter, stop)
 * decides. Every other error (timeouts, brokers down, fencing) fails the
 * session, which restarts from the slot.
 */
static bool is_rejection(rd_kafka_resp_err_t e)
{
        switch (e) {
        case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
        case RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE:
        case RD_KAFKA_RESP_ERR_INVALID_RECORD:
        case RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION:
        case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
        case RD_KAFKA_RESP_ERR_POLICY_VIOLATION:
        case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
        case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
        case RD_KAFKA_RESP_ERR__INVALID_ARG:
                return true;
        default:
                return false;
        }
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
        relay_producer_t *p = opaque;
        (void)rk;
        if (!m->err) {
                relay_delivery_t ok = {0, NULL, NULL};
                p->dr(p->ctx, m->_private, &ok);
                return;
        }
        /* Failures are rare: rebuild the event so the policy can resend it. */
        char buf[RELAY_ERRBUF];
        relay_header_t hdrs[64];
        relay_event_t ev;
        rd_kafka_headers_t *kh = NULL;
        rd_kafka_timestamp_type_t tstype;
        const char *topic = m->rkt ? rd_kafka_topic_name(m->rkt) : "";

        relay_err_set(buf, sizeof(buf), "%s (topic \"%s\", partition %d)", rd_kafka_err2str(m->err),
                      topic, (int)m->partition);
        memset(&ev, 0, sizeof(ev));
        ev.topic = topic;
        ev.key = m->key;
        ev.key_len = m->key_len;
        ev.value = m->payload;
        ev.value_len = m->len;
        ev.timestamp_ms = rd_kafka_message_timestamp(m, &tstype);
        if (rd_kafka_message_headers(m, &kh) == RD_KAFKA_RESP_ERR_NO_ERROR) {
                const char *name;
                const void *val;
                size_t len;
                for (size_t i = 0; ev.nheaders < 64 &&
                                   rd_kafka_header_get_all(kh, i, &name, &val, &len) == 0;
                     i++) {
                        hdrs[ev.nheaders].name = name;
                        hdrs[ev.nheaders].value = val;
                        hdrs[ev.nheaders].len = len;
                        if (strcmp(name, "id") == 0 && val) {
                                ev.id = val;
                                ev.id_len = len;
                        }
                        ev.nheaders++;
                }
        }
        ev.headers = hdrs;
        relay_delivery_t d = {is_rejection(m->err) ? RELAY_EREJECTED : RELAY_EKAFKA, buf, &ev};
        p->dr(p->ctx, m->_private, &d);
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
        relay_err_set(p->warning, sizeof(p->warning), "%s: %s", rd_kafka_err2name((rd_kafka_resp_err_t)err),
                 reason);
        p->warned = true;
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

int relay_producer_new(relay_producer_t **out, const relay_config_t *cfg, relay_producer_dr_fn *dr,
                       void *ctx, char *err, size_t errlen)
{
        static const char *const defaults[][2] = {
                {"enable.idempotence", "true"},
                {"partitioner", "murmur2_random"},
                {"linger.ms", "5"},
                /* librdkafka's 100 000 holds ~50 MB of events during a
                 * catch-up and buys no speed: the WAL is the buffer. */
                {"queue.buffering.max.messages", "10000"},
                {"client.id", "outbox-relay"},
        };
        relay_producer_t *p = calloc(1, sizeof(*p));
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        char kerr[RELAY_ERRBUF];

        if (!p || !conf) {
                relay_err_set(err, errlen, "out of memory");
                goto fail;
        }
        p->dr = dr;
        p->ctx = ctx;
        p->wakeup[0] = p->wakeup[1] = -1;
        if (pipe(p->wakeup) != 0 || fcntl(p->wakeup[0], F_SETFL, O_NONBLOCK) != 0 ||
            fcntl(p->wakeup[1], F_SETFL, O_NONBLOCK) != 0 ||
            fcntl(p->wakeup[0], F_SETFD, FD_CLOEXEC) != 0 ||
            fcntl(p->wakeup[1], F_SETFD, FD_CLOEXEC) != 0) {
                relay_err_set(err, errlen, "could not create a pipe: %s", strerror(errno));
                goto fail;
        }
        for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++)
                if (conf_set(conf, defaults[i][0], defaults[i][1], err, errlen))
                        goto fail;
        for (size_t i = 0; i < relay_config_kafka_count(cfg); i++) {
                const char *name, *value;
                relay_config_kafka_at(cfg, i, &name, &value);
                if (strcmp(name, "enable.idempotence") == 0 && strcmp(value, "true") != 0) {
                        relay_err_set(err, errlen,
                                      "kafka.enable.idempotence=%s is not allowed: without "
                                      "idempotence a retry can reorder or duplicate an "
                                      "aggregate's events; remove the setting",
                                      value);
                        goto fail;
                }
                if (conf_set(conf, name, value, err, errlen))
                        goto fail;
        }
        rd_kafka_conf_set_opaque(conf, p);
        rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
        rd_kafka_conf_set_error_cb(conf, error_cb);
        rd_kafka_conf_set_log_cb(conf, log_cb);

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
        }
        free(p);
        return RELAY_EINVAL;
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
        free(p);
}

int relay_producer_ping(relay_producer_t *p, int timeout_ms, char *err, size_t errlen)
{
        const struct rd_kafka_metadata *md = NULL;
        rd_kafka_resp_err_t e = rd_kafka_metadata(p->rk, 0, NULL, &md, timeout_ms);
        if (e) {
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

int relay_producer_send(relay_producer_t *p, const relay_event_t *ev, void *msg_opaque, char *err,
                        size_t errlen)
{
        rd_kafka_headers_t *hdrs = rd_kafka_headers_new(ev->nheaders);
        for (size_t i = 0; i < ev->nheaders; i++)
                rd_kafka_header_add(hdrs, ev->headers[i].name, -1, ev->headers[i].value,
                                    ev->headers[i].value ? (ssize_t)ev->headers[i].len : 0);
        rd_kafka_resp_err_t e = rd_kafka_producev(
                p->rk, RD_KAFKA_V_TOPIC(ev->topic), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                RD_KAFKA_V_KEY(ev->key, ev->key_len),
                RD_KAFKA_V_VALUE((void *)(uintptr_t)ev->value, ev->value ? ev->value_len : 0),
                RD_KAFKA_V_TIMESTAMP(ev->timestamp_ms), RD_KAFKA_V_HEADERS(hdrs),
                RD_KAFKA_V_OPAQUE(msg_opaque), RD_KAFKA_V_END);
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
                return 0; /* headers now belong to the message */
        rd_kafka_headers_destroy(hdrs);
        if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL)
                return RELAY_EAGAIN;
        relay_err_set(err, errlen, "could not enqueue message for topic \"%s\": %s", ev->topic,
                      rd_kafka_err2str(e));
        return is_rejection(e) ? RELAY_EREJECTED : RELAY_EKAFKA;
}

void relay_producer_poll(relay_producer_t *p, int timeout_ms)
{
        char buf[64];
        while (read(p->wakeup[0], buf, sizeof(buf)) > 0)
                ;
        rd_kafka_poll(p->rk, timeout_ms);
}

int relay_producer_fd(const relay_producer_t *p)
{
        return p->wakeup[0];
}

int relay_producer_check(relay_producer_t *p, char *err, size_t errlen)
{
        if (!p->fatal)
                return 0;
        relay_err_set(err, errlen, "%s", p->fatal_msg);
        return RELAY_EKAFKA;
}

bool relay_producer_take_warning(relay_producer_t *p, char *buf, size_t len)
{
        if (!p->warned)
                return false;
        p->warned = false;
        relay_err_set(buf, len, "%s", p->warning);
        return true;
}

size_t relay_producer_outq_len(relay_producer_t *p)
{
        return (size_t)rd_kafka_outq_len(p->rk);
}
