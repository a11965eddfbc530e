/*
 * test_producer.c - the producer's linger.ms: the rule from the broker's
 * round trip, the watch that follows the round trip in the statistics
 * reports, and that a kafka.linger.ms (or its alias) of the configuration
 * wins over it; the stalled-partition watch, fed statistics reports as
 * librdkafka writes them. No broker: rd_kafka_new() does not connect
 * before it is used.
 */
#include "relay/config.h"
#include "relay/producer.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

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

/* A statistics report: broker i answered cnt[i] requests, the shortest
 * in min_ms[i]; one more broker never answered. */
static relay_kafka_stats_t stats(int n, const double *min_ms, const int *cnt)
{
        relay_kafka_stats_t st = {.known = true, .nbrokers = (size_t)n + 1};
        for (int i = 0; i < n; i++) {
                st.broker[i].up = true;
                st.broker[i].rtt_min = min_ms[i] / 1e3;
                st.broker[i].rtt_avg = min_ms[i] / 1e3 * 3; /* never used */
                st.broker[i].rtt_cnt = cnt[i];
        }
        return st;
}

/* Feed one broker's window minimum; what the watch answers. */
static int feed(relay_producer_rtt_watch_t *w, double min_ms, bool steady, int linger, double *rtt)
{
        int cnt = 40;
        relay_kafka_stats_t st = stats(1, &min_ms, &cnt);
        return relay_producer_rtt_watch_report(w, &st, steady, linger, rtt);
}

static void test_watch(void)
{
        relay_producer_rtt_watch_t *w = relay_producer_rtt_watch_new();
        double rtt = -1;
        if (!w)
                tap_bail("out of memory");
        /* Near (linger 5), the broker moves 30 ms away: three windows. */
        is_int(feed(w, 0.4, true, 5, &rtt), 0, "near and near: nothing");
        is_int(feed(w, 30.2, true, 5, &rtt), 0, "farther, window 1: not yet");
        is_int(feed(w, 31.0, true, 5, &rtt), 0, "farther, window 2: not yet");
        is_int(feed(w, 29.6, true, 5, &rtt), 30, "farther, window 3: linger 30");
        ok(rtt > 30.1 && rtt < 30.3, "the middle window's round trip (%.1f)", rtt);
        /* Starts over after answering. */
        is_int(feed(w, 30.2, true, 5, &rtt), 0, "after an answer the count starts again");
        relay_producer_rtt_watch_free(w);

        w = relay_producer_rtt_watch_new();
        /* Unsteady (catch-up) windows, or one back to normal, break the run. */
        feed(w, 30, true, 5, &rtt);
        feed(w, 30, true, 5, &rtt);
        is_int(feed(w, 30, false, 5, &rtt), 0, "a catch-up window breaks the run");
        feed(w, 30, true, 5, &rtt);
        feed(w, 30, true, 5, &rtt);
        is_int(feed(w, 2, true, 5, &rtt), 0, "a near window breaks the run");
        feed(w, 30, true, 5, &rtt);
        feed(w, 30, true, 5, &rtt);
        int none = 0;
        relay_kafka_stats_t idle = stats(1, (double[]){0}, &none);
        is_int(relay_producer_rtt_watch_report(w, &idle, true, 5, &rtt), 0,
               "a window without requests tells nothing...");
        is_int(feed(w, 30, true, 5, &rtt), 30, "...and does not break the run");

        /* Not a clear change: twice and 10 ms apart, both. */
        for (int i = 0; i < 5; i++)
                feed(w, 19, true, 10, &rtt);
        is_int(feed(w, 19, true, 10, &rtt), 0, "10 -> 19 ms: not twice, kept");
        for (int i = 0; i < 5; i++)
                feed(w, 55, true, 40, &rtt);
        is_int(feed(w, 55, true, 40, &rtt), 0, "40 -> 55 ms: not twice, kept");
        for (int i = 0; i < 5; i++)
                feed(w, 8, true, 12, &rtt);
        is_int(feed(w, 8, true, 12, &rtt), 0, "12 -> 8 ms (linger 5): not 10 ms apart, kept");

        /* Nearer: from 26 back to loopback. */
        feed(w, 0.5, true, 26, &rtt);
        feed(w, 0.3, true, 26, &rtt);
        is_int(feed(w, 0.6, true, 26, &rtt), 5, "26 -> loopback: linger 5");
        /* Alternating sides never completes a run. */
        int got = 0;
        for (int i = 0; i < 6; i++)
                got |= feed(w, i % 2 ? 60 : 0.5, true, 26, &rtt);
        is_int(got, 0, "alternating farther and nearer: nothing");

        relay_producer_rtt_watch_free(w);

        /* Several brokers: the nearest one that answered counts. */
        w = relay_producer_rtt_watch_new();
        double mins[2] = {40, 20};
        int cnts[2] = {10, 3};
        relay_kafka_stats_t two = stats(2, mins, cnts);
        for (int i = 0; i < 2; i++)
                relay_producer_rtt_watch_report(w, &two, true, 5, &rtt);
        is_int(relay_producer_rtt_watch_report(w, &two, true, 5, &rtt), 20,
               "two brokers: the nearer one's");
        cnts[1] = 0;
        two = stats(2, mins, cnts);
        for (int i = 0; i < 2; i++)
                relay_producer_rtt_watch_report(w, &two, true, 5, &rtt);
        is_int(relay_producer_rtt_watch_report(w, &two, true, 5, &rtt), 40,
               "the nearer one idle: the other's");
        relay_kafka_stats_t none_up = {.known = true, .nbrokers = 0};
        is_int(relay_producer_rtt_watch_report(w, &none_up, true, 5, &rtt), 0,
               "no brokers: nothing");
        relay_producer_rtt_watch_free(w);
        relay_producer_rtt_watch_free(NULL);
}

/* linger.ms of a producer made from --set args (NULL-terminated) and linger_ms. */
static void check(const char *arg, int linger_ms, int want, bool want_auto, const char *what)
{
        char err[512];
        relay_config_t *c = NULL;
        relay_producer_t *p = NULL;
        if (relay_config_new(&c) || (arg && relay_config_set_arg(c, arg, err, sizeof(err))) ||
            relay_producer_new(&p, c, 0, linger_ms, NULL, NULL, dr, NULL, err, sizeof(err))) {
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

/* A producer made from --set arg is refused, naming the setting. */
static void refused(const char *arg)
{
        char err[512] = "";
        relay_config_t *c = NULL;
        relay_producer_t *p = NULL;
        if (relay_config_new(&c) || relay_config_set_arg(c, arg, err, sizeof(err))) {
                ok(0, "%s: could not set: %s", arg, err);
                relay_config_free(c);
                return;
        }
        is_int(relay_producer_new(&p, c, 0, 0, NULL, NULL, dr, NULL, err, sizeof(err)), RELAY_EINVAL,
               "%s: refused", arg);
        ok(strstr(err, "kafka.enable.idempotence") != NULL, "  naming it: %s", err);
        relay_producer_free(p);
        relay_config_free(c);
}

/* One statistics report at ts_s seconds: topic "t", partition i sent
 * tx[i] (resends counted) and had acked[i] acknowledged; waiting messages
 * wait. */
static void report_waiting(relay_producer_t *p, int ts_s, const int tx[3], const int acked[3],
                           int waiting)
{
        char json[1024];
        int n = snprintf(json, sizeof(json),
                         "{\"ts\": %lld, \"msg_cnt\": %d, \"msg_size\": 3000, \"brokers\": {}, "
                         "\"topics\": {\"t\": {\"partitions\": {",
                         (long long)ts_s * 1000000, waiting);
        for (int i = 0; i < 3; i++)
                n += snprintf(json + n, sizeof(json) - (size_t)n,
                              "%s\"%d\": {\"txmsgs\": %d, \"acked_msgid\": %d, \"leader\": 2, "
                              "\"msg_cnt\": 10}",
                              i ? ", " : "", i, tx[i], acked[i]);
        snprintf(json + n, sizeof(json) - (size_t)n,
                 ", \"-1\": {\"txmsgs\": 0, \"acked_msgid\": 0}}}}}");
        relay_producer_read_stats(p, json, strlen(json));
}

/* The same with 30 messages waiting. */
static void report(relay_producer_t *p, int ts_s, const int tx[3], const int acked[3])
{
        report_waiting(p, ts_s, tx, acked, 30);
}

/* Take every stall note: as many warnings and news of acknowledgements as
 * wanted, and each line of named among them ("W: " a warning, "I: " news). */
static void take_all(relay_producer_t *p, const char *what, int warnings, int agains,
                     const char *const *named)
{
        char msg[1024], all[4096] = "";
        bool warning;
        int w = 0, a = 0;
        while (relay_producer_take_note(p, msg, sizeof(msg), &warning) && w + a < 10) {
                w += warning;
                a += !warning;
                snprintf(all + strlen(all), sizeof(all) - strlen(all), "%s: %.80s\n",
                         warning ? "W" : "I", msg);
        }
        bool good = ok(w == warnings, "%s: %d stall warning(s) (got %d)", what, warnings, w);
        good &= ok(a == agains, "%s: %d acknowledging-again line(s) (got %d)", what, agains, a);
        for (const char *const *n = named; *n; n++)
                good &= ok(strstr(all, *n) != NULL, "%s: said: %s", what, *n);
        if (!good)
                tap_diag("%s", all);
}

/* A producer of the defaults, no partition counts; NULL (said) when it
 * cannot be made. *c: its configuration, which the caller frees. */
static relay_producer_t *plain_producer(relay_config_t **c, const char *what)
{
        char err[512] = "";
        relay_producer_t *p = NULL;
        if (relay_config_new(c) ||
            relay_producer_new(&p, *c, 0, 0, NULL, NULL, dr, NULL, err, sizeof(err))) {
                ok(0, "%s: could not create the producer: %s", what, err);
                relay_config_free(*c);
                *c = NULL;
                return NULL;
        }
        return p;
}

/* The same, lent partition counts and stalls kept across producers (*parts,
 * which the caller frees too). */
static relay_producer_t *parts_producer(relay_config_t **c, relay_producer_parts_t **parts,
                                        const char *what)
{
        char err[512] = "";
        relay_producer_t *p = NULL;
        *c = NULL;
        if (!(*parts = relay_producer_parts_new()) || relay_config_new(c) ||
            relay_producer_new(&p, *c, 0, 0, NULL, *parts, dr, NULL, err, sizeof(err))) {
                ok(0, "%s: could not create the producer: %s", what, err);
                relay_config_free(*c);
                relay_producer_parts_free(*parts);
                *c = NULL;
                *parts = NULL;
                return NULL;
        }
        return p;
}

static int stalled_now(relay_producer_t *p)
{
        relay_kafka_stats_t st;
        return relay_producer_stats(p, &st) ? (int)st.partitions_stalled : -1;
}

/*
 * Two partitions stall in one report, then one recovers in the report in
 * which a third one's stall is said: every partition's change is said
 * (before, one latch kept the last of a report), and the gauge of
 * /metrics counts the partitions stalled.
 */
static void test_stall(void)
{
        relay_config_t *c = NULL;
        relay_producer_t *p = plain_producer(&c, "stall");
        if (!p)
                return;
        /* 0 and 1 send without acknowledgements from 0 s; 2 from 10 s. */
        report(p, 0, (int[]){10, 10, 10}, (int[]){5, 5, 10});
        report(p, 5, (int[]){20, 20, 10}, (int[]){5, 5, 10});
        take_all(p, "5 s", 0, 0, (const char *const[]){NULL});
        is_int(stalled_now(p), 0, "5 s: the gauge says 0 partitions stalled");
        report(p, 10, (int[]){30, 30, 20}, (int[]){5, 5, 10});
        take_all(p, "10 s, partitions 0 and 1 stalled", 2, 0,
                 (const char *const[]){"W: topic \"t\" partition 0: Kafka has acknowledged no",
                                       "W: topic \"t\" partition 1: Kafka has acknowledged no",
                                       NULL});
        is_int(stalled_now(p), 2, "10 s: the gauge says 2 partitions stalled");
        report(p, 15, (int[]){40, 40, 30}, (int[]){40, 5, 10});
        take_all(p, "15 s, partition 0 acknowledged, partition 2 stalled", 1, 1,
                 (const char *const[]){"I: topic \"t\" partition 0: Kafka acknowledges events again",
                                       "W: topic \"t\" partition 2: Kafka has acknowledged no",
                                       NULL});
        is_int(stalled_now(p), 2, "15 s: the gauge says 2 partitions stalled (1 and 2)");
        report(p, 20, (int[]){40, 50, 40}, (int[]){40, 50, 40});
        take_all(p, "20 s, all acknowledged", 0, 2,
                 (const char *const[]){"I: topic \"t\" partition 1: Kafka acknowledges events again",
                                       "I: topic \"t\" partition 2: Kafka acknowledges events again",
                                       NULL});
        is_int(stalled_now(p), 0, "20 s: the gauge says 0 partitions stalled");
        relay_producer_free(p);
        relay_config_free(c);
}

/* Topics "a" and "b" with na and nb partitions, in one statistics report. */
static void report_topics(relay_producer_t *p, int ts_s, int na, int nb)
{
        char json[1024];
        int n = snprintf(json, sizeof(json),
                         "{\"ts\": %lld, \"msg_cnt\": 0, \"msg_size\": 0, \"brokers\": {}, "
                         "\"topics\": {",
                         (long long)ts_s * 1000000);
        for (int t = 0; t < 2; t++) {
                n += snprintf(json + n, sizeof(json) - (size_t)n, "%s\"%c\": {\"partitions\": {",
                              t ? ", " : "", "ab"[t]);
                for (int i = 0; i < (t ? nb : na); i++)
                        n += snprintf(json + n, sizeof(json) - (size_t)n,
                                      "\"%d\": {\"txmsgs\": 0, \"acked_msgid\": 0}, ", i);
                n += snprintf(json + n, sizeof(json) - (size_t)n,
                              "\"-1\": {\"txmsgs\": 0, \"acked_msgid\": 0}}}");
        }
        snprintf(json + n, sizeof(json) - (size_t)n, "}}");
        relay_producer_read_stats(p, json, strlen(json));
}

/*
 * Two topics grow in one report: both are said (one latch kept only the
 * last), as warnings, and a later producer lent the same counts says
 * growth it did not see itself.
 */
static void test_growth(void)
{
        char err[512], msg[1024];
        bool warning = false;
        relay_config_t *c = NULL;
        relay_producer_parts_t *parts = NULL;
        relay_producer_t *p = parts_producer(&c, &parts, "growth");
        if (!p)
                return;
        report_topics(p, 0, 1, 2);
        ok(!relay_producer_take_note(p, msg, sizeof(msg), &warning),
           "growth: a topic's first sight is no growth");
        report_topics(p, 5, 3, 4);
        ok(relay_producer_take_note(p, msg, sizeof(msg), &warning) && warning &&
               strstr(msg, "topic \"a\" now has 3 partitions, not 1") != NULL,
           "growth: topic a's growth said, a warning (%s)", msg);
        ok(relay_producer_take_note(p, msg, sizeof(msg), &warning) && warning &&
               strstr(msg, "topic \"b\" now has 4 partitions, not 2") != NULL,
           "growth: and topic b's, in the same report (%s)", msg);
        ok(!relay_producer_take_note(p, msg, sizeof(msg), &warning), "growth: nothing more");
        relay_producer_free(p);
        p = NULL;
        if (relay_producer_new(&p, c, 0, 0, NULL, parts, dr, NULL, err, sizeof(err)) == 0) {
                report_topics(p, 0, 5, 4);
                ok(relay_producer_take_note(p, msg, sizeof(msg), &warning) &&
                       strstr(msg, "topic \"a\" now has 5 partitions, not 3") != NULL,
                   "growth: the next producer compares with the counts it was lent (%s)", msg);
                ok(!relay_producer_take_note(p, msg, sizeof(msg), &warning),
                   "growth: topic b, unchanged, is not said");
        } else {
                ok(0, "growth: could not create the second producer: %s", err);
        }
        relay_producer_free(p);
        relay_config_free(c);
        relay_producer_parts_free(parts);
}

/* Partition 0 sends without an acknowledgement from 0 s to 10 s: said. */
static void stall_said(relay_producer_t *p, const char *what)
{
        char label[128];
        snprintf(label, sizeof(label), "%s: 10 s, partition 0 stalled", what);
        report(p, 0, (int[]){10, 10, 10}, (int[]){5, 10, 10});
        report(p, 5, (int[]){20, 10, 10}, (int[]){5, 10, 10});
        report(p, 10, (int[]){30, 10, 10}, (int[]){5, 10, 10});
        take_all(p, label, 1, 0,
                 (const char *const[]){"W: topic \"t\" partition 0: Kafka has acknowledged no",
                                       NULL});
}

/*
 * A producer replaced (linger.ms) once drained, after a stall was said:
 * its next report, which would say the partition acknowledges again,
 * never comes, so the replacement says it.
 */
static void test_stall_replaced(void)
{
        relay_config_t *c = NULL;
        relay_producer_t *p = plain_producer(&c, "replaced");
        if (!p)
                return;
        stall_said(p, "replaced");
        relay_producer_end_stalls(p);
        take_all(p, "replaced: drained, then replaced", 0, 1,
                 (const char *const[]){"I: topic \"t\" partition 0: Kafka acknowledges events again",
                                       NULL});
        is_int(stalled_now(p), 0, "replaced: the gauge says 0 partitions stalled");
        relay_producer_end_stalls(p);
        take_all(p, "replaced: said once", 0, 0, (const char *const[]){NULL});
        relay_producer_free(p);
        relay_config_free(c);
}

/*
 * A producer freed after a stall was said, without relay_producer_end_stalls()
 * (its session failed: the stuck event timed out): the next producer, lent
 * the same parts, says the end at its first acknowledgement there, and
 * the gauge counts the partition until then (before, neither: 0242's
 * second stall, which outlasts kafka.message.timeout.ms, ended not ok 22).
 * Nor does a stall that ended in a timeout count as acknowledged: only an
 * acknowledgement after it does.
 */
static void test_stall_failed(void)
{
        char err[512] = "";
        relay_config_t *c = NULL;
        relay_producer_parts_t *parts = NULL;
        relay_producer_t *p = parts_producer(&c, &parts, "failed");
        if (!p)
                return;
        stall_said(p, "failed");
        /* Timed out: nothing waits, nothing more acknowledged. */
        report_waiting(p, 15, (int[]){30, 10, 10}, (int[]){5, 10, 10}, 0);
        take_all(p, "failed: timed out", 0, 0, (const char *const[]){NULL});
        relay_producer_free(p);
        p = NULL;
        if (relay_producer_new(&p, c, 0, 0, NULL, parts, dr, NULL, err, sizeof(err))) {
                ok(0, "failed: could not create the next producer: %s", err);
        } else {
                report(p, 0, (int[]){3, 0, 0}, (int[]){0, 0, 0});
                take_all(p, "failed: the next producer, nothing acknowledged yet", 0, 0,
                         (const char *const[]){NULL});
                is_int(stalled_now(p), 1, "failed: the gauge still says 1 partition stalled");
                report(p, 5, (int[]){4, 1, 0}, (int[]){1, 1, 0});
                take_all(
                    p, "failed: the next producer's first acknowledgement there", 0, 1,
                    (const char *const[]){"I: topic \"t\" partition 0: Kafka acknowledges events again",
                                          NULL});
                is_int(stalled_now(p), 0, "failed: then 0");
                report(p, 10, (int[]){5, 2, 0}, (int[]){2, 2, 0});
                take_all(p, "failed: said once", 0, 0, (const char *const[]){NULL});
        }
        relay_producer_free(p);
        relay_config_free(c);
        relay_producer_parts_free(parts);
}

int main(void)
{
        test_rule();
        test_watch();
        test_stall();
        test_growth();
        test_stall_replaced();
        test_stall_failed();
        check(NULL, 0, 5, true, "defaults");
        check(NULL, 24, 24, true, "from a 24 ms round trip");
        check("kafka.linger.ms=2", 24, 2, false, "kafka.linger.ms=2");
        check("kafka.queue.buffering.max.ms=40", 24, 40, false, "kafka.queue.buffering.max.ms=40");
        /* librdkafka reads TRUE, t and 1 as true: the producer must not refuse them. */
        check("kafka.enable.idempotence=TRUE", 0, 5, true, "kafka.enable.idempotence=TRUE");
        check("kafka.enable.idempotence=1", 0, 5, true, "kafka.enable.idempotence=1");
        refused("kafka.enable.idempotence=False");
        refused("kafka.enable.idempotence=0");
        return done_testing();
}
