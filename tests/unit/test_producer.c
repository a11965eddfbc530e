/*
 * test_producer.c - the producer's linger.ms: the rule from the broker's
 * round trip, and that a kafka.linger.ms (or its alias) of the
 * configuration wins over it. No broker: rd_kafka_new() does not connect
 * before it is used.
 */
#include "relay/config.h"
#include "relay/producer.h"

#include <math.h>
#include <stdio.h>

#include "tap.h"

static void dr(void *ctx, uint64_t tag, const relay_delivery_t *d)
{
        (void)ctx;
        (void)tag;
        (void)d;
}

static void test_rule(void)
{
        is_int(relay_producer_linger_for_rtt(0.4), 5, "loopback: 5 ms");
        is_int(relay_producer_linger_for_rtt(7.0), 5, "7 ms: 5 (not worth a new producer)");
        is_int(relay_producer_linger_for_rtt(9.99), 5, "just under 10 ms: 5");
        is_int(relay_producer_linger_for_rtt(10.0), 10, "10 ms: 10");
        is_int(relay_producer_linger_for_rtt(23.7), 24, "23.7 ms: 24");
        is_int(relay_producer_linger_for_rtt(250), 100, "250 ms: at most 100");
        is_int(relay_producer_linger_for_rtt(NAN), 5, "no measurement: 5");
}

/* linger.ms of a producer made from --set args (NULL-terminated) and linger_ms. */
static void check(const char *arg, int linger_ms, int want, bool want_auto, const char *what)
{
        char err[512];
        relay_config_t *c = NULL;
        relay_producer_t *p = NULL;
        if (relay_config_new(&c) || (arg && relay_config_set_arg(c, arg, err, sizeof(err))) ||
            relay_producer_new(&p, c, 0, linger_ms, NULL, dr, NULL, err, sizeof(err))) {
                ok(0, "%s: could not create the producer: %s", what, err);
                relay_config_free(c);
                return;
        }
        is_int(relay_producer_linger_ms(p), want, "%s: linger.ms", what);
        ok(relay_producer_linger_auto(p) == want_auto, "%s: left to the relay: %s", what,
           want_auto ? "yes" : "no");
        ok(relay_producer_may_relinger(p, want + 10, 0) == want_auto,
           "%s: another linger.ms may replace it: %s", what, want_auto ? "yes" : "no");
        ok(!relay_producer_may_relinger(p, want, 0), "%s: its own linger.ms does not", what);
        ok(!relay_producer_may_relinger(p, 0, 0), "%s: no measured linger.ms does not", what);
        relay_producer_free(p);
        relay_config_free(c);
}

int main(void)
{
        test_rule();
        check(NULL, 0, 5, true, "defaults");
        check(NULL, 24, 24, true, "from a 24 ms round trip");
        check("kafka.linger.ms=2", 24, 2, false, "kafka.linger.ms=2");
        check("kafka.queue.buffering.max.ms=40", 24, 40, false, "kafka.queue.buffering.max.ms=40");
        return done_testing();
}
