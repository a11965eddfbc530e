/*
 * test_limits.c - record sizes as Kafka and librdkafka count them, and the
 * per-topic limit cache. (0210-oversize checks the sizes against the real
 * broker: an event at a topic's limit is taken, one byte more is not.)
 */
#include "relay/limits.h"

#include <stdio.h>
#include <string.h>

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

int main(void)
{
        test_sizes();
        test_cache();
        return done_testing();
}
