/*
 * test_limits.c - record sizes as Kafka and librdkafka count them, and the
 * per-topic limit cache. (0210-oversize checks the sizes against the real
 * broker: an event at a topic's limit is taken, one byte more is not; the
 * local size is checked here against librdkafka's own check.)
 */
#include "relay/limits.h"

#include <stdio.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#include "tap.h"

static void test_sizes(void)
{
        relay_event_t ev = {.topic = "t", .key = "k", .key_len = 1, .value = "v", .value_len = 1};
        /* body: attributes 1, timestamp delta 1, offset delta 1, key length 1 +
         * key 1, value length 1 + value 1, header count 1 = 8; length 1. */
        is_int(relay_limits_sizes(&ev).record, 61 + 1 + 8, "one-byte key and value: 70 bytes");
        ev.value = NULL;
        is_int(relay_limits_sizes(&ev).record, 61 + 1 + 7, "NULL value: length -1, no bytes");
        ev.key = NULL;
        is_int(relay_limits_sizes(&ev).record, 61 + 1 + 6, "NULL key too");

        static char big[300];
        memset(big, 'x', sizeof(big));
        ev.key = "k";
        ev.value = big;
        ev.value_len = 50; /* zig-zag 100: one byte; body 57: one byte */
        is_int(relay_limits_sizes(&ev).record, 61 + 1 + 3 + 2 + 1 + 50 + 1, "50-byte value: 119 bytes");
        ev.value_len = 63; /* value length one byte, but body 70: zig-zag 140, two */
        is_int(relay_limits_sizes(&ev).record, 61 + 2 + 3 + 2 + 1 + 63 + 1,
               "body of 64 bytes or more: its length takes two bytes");
        ev.value_len = 64; /* zig-zag 128: the value's length takes two bytes too */
        is_int(relay_limits_sizes(&ev).record, 61 + 2 + 3 + 2 + 2 + 64 + 1, "64-byte value: 2-byte length");

        relay_header_t h[2] = {{"id", "abc", 3}, {"n", NULL, 0}};
        ev.value_len = 1;
        ev.headers = h;
        ev.nheaders = 2;
        /* headers: (1 + 2 + 1 + 3) + (1 + 1 + 1 + 0) = 10 */
        is_int(relay_limits_sizes(&ev).record, 61 + 1 + 3 + 2 + 2 + 1 + 10, "two headers");
        is_int(relay_limits_sizes(&ev).local, 36 + 1 + 1 + 10,
               "librdkafka's check: widest varints plus key, value, headers");
}

/* What librdkafka's rd_kafka_producev() says of ev under message.max.bytes
 * = max (no broker needed: the check is made before queueing). */
static rd_kafka_resp_err_t librdkafka_verdict(const relay_event_t *ev, size_t max)
{
        char errstr[512], num[32];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        snprintf(num, sizeof(num), "%zu", max);
        if (rd_kafka_conf_set(conf, "message.max.bytes", num, errstr, sizeof(errstr)) ||
            rd_kafka_conf_set(conf, "log_level", "0", errstr, sizeof(errstr)))
                tap_bail("%s", errstr);
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
        if (!rk)
                tap_bail("%s", errstr);
        rd_kafka_headers_t *hdrs = rd_kafka_headers_new(ev->nheaders);
        for (size_t i = 0; i < ev->nheaders; i++)
                rd_kafka_header_add(hdrs, ev->headers[i].name, -1, ev->headers[i].value,
                                    (ssize_t)ev->headers[i].len);
        rd_kafka_resp_err_t e = rd_kafka_producev(
                rk, RD_KAFKA_V_TOPIC("t"), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                RD_KAFKA_V_KEY(ev->key, ev->key_len),
                RD_KAFKA_V_VALUE((void *)(uintptr_t)ev->value, ev->value_len),
                RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_END);
        if (e)
                rd_kafka_headers_destroy(hdrs);
        rd_kafka_purge(rk, RD_KAFKA_PURGE_F_QUEUE);
        rd_kafka_destroy(rk);
        return e;
}

/*
 * The local size against librdkafka itself, not our reading of it: it
 * takes the event at message.max.bytes = local and refuses it one byte
 * below. Header lengths of 64 to 127 (two bytes as zig-zag varints, one
 * as unsigned ones) pin down how it counts them.
 */
static void test_local_as_librdkafka(void)
{
        static char value[900], hname[100], hval[100];
        memset(value, 'v', sizeof(value));
        memset(hname, 'n', sizeof(hname) - 1);
        memset(hval, 'h', sizeof(hval));
        relay_header_t h[1] = {{hname, hval, sizeof(hval)}};
        relay_event_t ev = {.topic = "t", .key = "k", .key_len = 1, .value = value,
                            .value_len = sizeof(value), .headers = h, .nheaders = 1};
        size_t local = relay_limits_sizes(&ev).local;
        /* 36 + key 1 + value 900 + header (2 + 99 name, 2 + 100 value) */
        is_int(local, 36 + 1 + 900 + 2 + 99 + 2 + 100, "header lengths 99 and 100: two bytes each");
        /* body: 3 + key 1 + 1, value 2 + 900, count 1, header 203 = 1111 */
        is_int(relay_limits_sizes(&ev).record, 61 + 2 + 1111, "its record batch: 1174 bytes");
        is_int(librdkafka_verdict(&ev, local), RD_KAFKA_RESP_ERR_NO_ERROR,
               "librdkafka takes the event at message.max.bytes = local");
        is_int(librdkafka_verdict(&ev, local - 1), RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE,
               "and refuses it at one byte less");
}

static void test_cache(void)
{
        relay_limits_t *l = relay_limits_new();
        int64_t b = 0;
        is_int(relay_limits_get(l, "a", 0, &b), RELAY_LIMIT_MISSING, "unknown topic: missing");
        is_int(relay_limits_put(l, "a", 100000, 0, 1000), 0, "put a");
        is_int(relay_limits_get(l, "a", 999, &b), RELAY_LIMIT_KNOWN, "a known before it expires");
        is_int(b, 100000, "a's limit");
        is_int(relay_limits_get(l, "a", 1000, &b), RELAY_LIMIT_MISSING, "a expired: ask again");
        is_int(relay_limits_put(l, "b", 0, 0, 1000), 0, "put b unknown");
        is_int(relay_limits_get(l, "b", 10, &b), RELAY_LIMIT_UNKNOWN, "b: Kafka could not tell");
        is_int(relay_limits_put(l, "a", 3000, 0, 1000), 0, "a again, lower");
        relay_limits_forget(l, "a");
        is_int(relay_limits_get(l, "a", 1, &b), RELAY_LIMIT_MISSING, "a forgotten");
        relay_limits_forget(l, "nope");
        /* Expired early (an event exceeds it): ask again, or while asking
         * is paused keep the old limit. */
        is_int(relay_limits_put(l, "c", 3000, 0, 1000), 0, "put c");
        relay_limits_expire(l, "c", 10);
        is_int(relay_limits_get(l, "c", 10, &b), RELAY_LIMIT_MISSING, "c expired early: ask again");
        relay_limits_timed_out(l, 10, 500, 5000);
        is_int(relay_limits_get(l, "c", 11, &b), RELAY_LIMIT_KNOWN, "c while asking is paused");
        is_int(b, 3000, "c's old limit");
        is_int(relay_limits_put(l, "c", 3000, 20, 1000), 0, "c read again");
        relay_limits_expire(l, "nope", 30);

        /* Many topics: the table grows and finds each. */
        char name[32];
        int found = 0;
        for (int i = 0; i < 5000; i++) {
                snprintf(name, sizeof(name), "topic-%d", i);
                if (relay_limits_put(l, name, 1000 + i, 0, 1000) != 0)
                        tap_bail("put failed");
        }
        for (int i = 0; i < 5000; i++) {
                snprintf(name, sizeof(name), "topic-%d", i);
                found += relay_limits_get(l, name, 1, &b) == RELAY_LIMIT_KNOWN && b == 1000 + i;
        }
        is_int(found, 5000, "5 000 topics, each found with its limit");
        relay_limits_free(l);
        relay_limits_free(NULL);
}

/* A timeout pauses every topic's ask, doubling while it goes on; an answer
 * starts it over. */
static void test_timeout_pause(void)
{
        relay_limits_t *l = relay_limits_new();
        int64_t b = 0;
        is_int(relay_limits_put(l, "known", 5000, 0, 100000), 0, "put known");
        is_int(relay_limits_timed_out(l, 1000, 10000, 300000), 10000, "first timeout: 10 s");
        is_int(relay_limits_get(l, "a", 1000, &b), RELAY_LIMIT_UNKNOWN, "no ask while paused");
        is_int(relay_limits_get(l, "known", 1000, &b), RELAY_LIMIT_KNOWN,
               "a known limit stays known");
        is_int(relay_limits_timed_out(l, 100000, 10000, 300000), 20000, "a timeout at 100 s");
        b = 0;
        is_int(relay_limits_get(l, "known", 110000, &b), RELAY_LIMIT_KNOWN,
               "expired while paused: the last limit read still holds");
        is_int(b, 5000, "its value");
        is_int(relay_limits_get(l, "known", 120000, &b), RELAY_LIMIT_MISSING,
               "after the pause: ask again");
        is_int(relay_limits_put(l, "known", 5000, 0, 100000), 0, "answered: starts over");
        is_int(relay_limits_timed_out(l, 1000, 10000, 300000), 10000, "first timeout again");
        is_int(relay_limits_get(l, "a", 11000, &b), RELAY_LIMIT_MISSING, "ask after the pause");
        is_int(relay_limits_timed_out(l, 14000, 10000, 300000), 20000, "second in a row: 20 s");
        int64_t p = 0;
        for (int i = 0; i < 70; i++)
                p = relay_limits_timed_out(l, 0, 10000, 300000);
        is_int(p, 300000, "capped at 5 minutes, however many (no overflow)");
        is_int(relay_limits_put(l, "a", 0, 0, 1000), 0, "an answer (unknown)");
        is_int(relay_limits_timed_out(l, 0, 10000, 300000), 10000, "starts the pause over");
        relay_limits_free(l);
}

int main(void)
{
        test_sizes();
        test_local_as_librdkafka();
        test_cache();
        test_timeout_pause();
        return done_testing();
}
