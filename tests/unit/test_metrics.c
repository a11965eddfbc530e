/*
 * test_metrics.c - the metrics module without a server: the bounded topic
 * labels, the commit-to-ack histogram and lag ages, the session-end causes,
 * health and readiness answers, the catch-up report's arithmetic, and that
 * nothing reaches the page before it is published.
 */
#include "relay/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tap.h"

#define PG_EPOCH_UNIX INT64_C(946684800)

static double sample(const char *page, const char *series)
{
        size_t n = strlen(series);
        for (const char *p = page; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
                if (strncmp(p, series, n) == 0 && p[n] == ' ')
                        return strtod(p + n + 1, NULL);
        return -1;
}

static char *page_of(relay_metrics_t *m)
{
        size_t len;
        char *p = relay_metrics_render(m, &len);
        if (!p)
                tap_bail("render failed");
        return p;
}

/* Publish s, then render: the page as a scrape sees it (caller frees). */
static char *published_page(relay_metrics_t *m, const relay_metrics_sample_t *s)
{
        relay_metrics_publish(m, s);
        return page_of(m);
}

/* How many times needle stands on the page. */
static int occurrences(const char *page, const char *needle)
{
        int n = 0;
        for (const char *q = page; (q = strstr(q, needle)) != NULL; q++)
                n++;
        return n;
}

/* Kafka acknowledged events of 10 bytes to topics t000 .. t<n-1>: i % cycle + 1
 * events to topic i. */
static void ack_numbered_topics(relay_metrics_t *m, int n, int cycle)
{
        char topic[64];
        for (int i = 0; i < n; i++) {
                snprintf(topic, sizeof(topic), "t%03d", i);
                for (int k = 0; k <= i % cycle; k++)
                        relay_metrics_acked(m, topic, 10);
        }
}

static int64_t pg_now_us(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return ((int64_t)ts.tv_sec - PG_EPOCH_UNIX) * 1000000 + ts.tv_nsec / 1000;
}

static int64_t mono_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void test_topics(void)
{
        relay_metrics_t *m = relay_metrics_new();
        relay_metrics_sample_t s = {0};
        ack_numbered_topics(m, 120, 3);
        char *p = page_of(m);
        ok(sample(p, "outbox_relay_events_total{topic=\"t000\"}") == -1,
           "nothing on the page before a publication");
        free(p);
        p = published_page(m, &s);
        is_int(sample(p, "outbox_relay_events_total{topic=\"t000\"}"), 1, "t000: 1 event");
        is_int(sample(p, "outbox_relay_events_total{topic=\"t002\"}"), 3, "t002: 3 events");
        is_int(sample(p, "outbox_relay_event_bytes_total{topic=\"t002\"}"), 30, "t002: 30 bytes");
        is_int(sample(p, "outbox_relay_events_total{topic=\"t099\"}"), 1, "the 100th topic has a label");
        is_int(sample(p, "outbox_relay_events_total{topic=\"t100\"}"), -1, "the 101st has none");
        /* t100..t119: (i % 3) + 1 events each */
        int other = 0;
        for (int i = 100; i < 120; i++)
                other += i % 3 + 1;
        is_int(sample(p, "outbox_relay_events_total{topic=\"other\"}"), other,
               "topics past the 100th count as other (%d)", other);
        is_int(occurrences(p, "outbox_relay_events_total{"), 101,
               "101 label values: 100 topics and other");
        free(p);
        relay_metrics_free(m);
}

static void test_latency_and_lag(void)
{
        relay_metrics_t *m = relay_metrics_new();
        relay_metrics_sample_t s = {0};
        int64_t now = pg_now_us();
        relay_metrics_commit(m, 100, now - 2000000); /* committed 2 s ago */
        relay_metrics_commit(m, 200, now - 1000);
        relay_metrics_turn(m, mono_ms(), 150);
        char *p = published_page(m, &s);
        is_int(sample(p, "outbox_relay_commit_to_ack_seconds_count"), 1, "one transaction confirmed");
        is_int(sample(p, "outbox_relay_commit_to_ack_seconds_bucket{le=\"1\"}"), 0,
               "not within 1 s");
        is_int(sample(p, "outbox_relay_commit_to_ack_seconds_bucket{le=\"2.5\"}"), 1,
               "within 2.5 s");
        is_int(sample(p, "outbox_relay_inflight_transactions"), 1, "one transaction unconfirmed");
        double age = sample(p, "outbox_relay_confirmed_commit_age_seconds");
        ok(age >= 1.9 && age < 60, "confirmed commit age about 2 s (%.3f)", age);
        age = sample(p, "outbox_relay_unconfirmed_commit_age_seconds");
        ok(age >= 0 && age < 60, "oldest unconfirmed is the newer one (%.3f)", age);
        free(p);

        relay_metrics_session_end(m, RELAY_EKAFKA);
        relay_metrics_session_end(m, RELAY_EBUSY);
        p = published_page(m, &s);
        is_int(sample(p, "outbox_relay_session_ends_total{cause=\"kafka\"}"), 1, "kafka cause");
        is_int(sample(p, "outbox_relay_session_ends_total{cause=\"standby\"}"), 1, "standby cause");
        is_int(sample(p, "outbox_relay_inflight_transactions"), 0,
               "a session end forgets what the next session receives again");
        is_int(sample(p, "outbox_relay_unconfirmed_commit_age_seconds"), 0, "nothing unconfirmed");
        free(p);

        /* A stop is no error: neither a clean one (0) nor one that came
         * while waiting (RELAY_ESTOPPED) counts, as cause "fatal" or any
         * other; an event that stops the relay does. */
        relay_metrics_session_end(m, 0);
        relay_metrics_session_end(m, RELAY_ESTOPPED);
        p = published_page(m, &s);
        is_int(sample(p, "outbox_relay_session_ends_total{cause=\"fatal\"}"), 0,
               "a stop is not counted as a fatal end");
        double ends = 0;
        static const char *const causes[] = {"postgres", "kafka", "standby",
                                             "slot_lost", "memory", "fatal"};
        for (size_t i = 0; i < sizeof(causes) / sizeof(causes[0]); i++) {
                char name[80];
                snprintf(name, sizeof(name), "outbox_relay_session_ends_total{cause=\"%s\"}",
                         causes[i]);
                ends += sample(p, name);
        }
        is_int(ends, 2, "nor under any other cause: still the two error ends");
        free(p);
        relay_metrics_session_end(m, RELAY_EMAP);
        p = published_page(m, &s);
        is_int(sample(p, "outbox_relay_session_ends_total{cause=\"fatal\"}"), 1,
               "an unmappable event is a fatal end");
        free(p);
        relay_metrics_free(m);
}

static void test_health(void)
{
        relay_metrics_t *m = relay_metrics_new();
        char body[512];
        ok(relay_metrics_health(m, false, 30000, body, sizeof(body)), "alive at start");
        ok(!relay_metrics_health(m, true, 30000, body, sizeof(body)), "not ready while starting");
        relay_metrics_state(m, RELAY_STATE_STREAMING);
        ok(relay_metrics_health(m, true, 30000, body, sizeof(body)), "ready while streaming: %s", body);
        relay_kafka_stats_t ks = {.known = true, .nbrokers = 1, .brokers_up = 0};
        relay_metrics_kafka(m, &ks);
        relay_metrics_alive(m, mono_ms() + 1000);
        ok(!relay_metrics_health(m, true, 30000, body, sizeof(body)) &&
                   strstr(body, "no Kafka broker is up"),
           "unready with no broker up: %s", body);
        relay_metrics_state(m, RELAY_STATE_STANDBY);
        ok(relay_metrics_health(m, true, 30000, body, sizeof(body)), "ready standing by: %s", body);
        relay_metrics_state(m, RELAY_STATE_BACKOFF);
        ok(!relay_metrics_health(m, true, 30000, body, sizeof(body)), "unready backing off: %s", body);
        relay_metrics_alive(m, mono_ms() - 40000);
        relay_metrics_state(m, RELAY_STATE_BACKOFF); /* publishes at once */
        ok(!relay_metrics_health(m, false, 30000, body, sizeof(body)) && strstr(body, "stalled"),
           "not alive when the loop has not turned for 40 s: %s", body);
        relay_metrics_free(m);
}

static void test_catchup(void)
{
        relay_metrics_t *m = relay_metrics_new();
        relay_metrics_sample_t s = {0};
        relay_slot_info_t si = {.known = true, .server_end = 100000000};
        relay_catchup_t c;
        relay_metrics_slot(m, &si);
        relay_metrics_publish(m, &s);
        ok(!relay_metrics_catchup(m, 1000, &c), "the first call only starts the clock");
        s.received = 20000000;
        for (int i = 0; i < 50000; i++)
                relay_metrics_produced(m);
        relay_metrics_publish(m, &s);
        ok(!relay_metrics_catchup(m, 5000, &c), "nothing before the interval");
        ok(relay_metrics_catchup(m, 11000, &c), "a report after 10 s, 80 MB behind");
        ok(c.events_per_s == 5000 && c.wal_bytes_per_s == 2000000 && c.lag_bytes == 80000000 &&
                   c.eta_s == 40 && !c.done,
           "5000 events/s, 2 MB/s, 80 MB behind, 40 s to go (%.0f, %.0f, %lld, %.0f)",
           c.events_per_s, c.wal_bytes_per_s, (long long)c.lag_bytes, c.eta_s);
        /* The server wrote 10 MB meanwhile, the relay read 50 MB: lag 80 -> 40 MB. */
        si.server_end = 110000000;
        relay_metrics_slot(m, &si);
        s.received = 70000000;
        relay_metrics_publish(m, &s);
        ok(relay_metrics_catchup(m, 21000, &c) && c.lag_bytes == 40000000 && c.eta_s == 10,
           "the estimate follows the lag's own shrinking: 40 MB at 4 MB/s, 10 s (%.0f)", c.eta_s);
        s.received = 110000000;
        relay_metrics_publish(m, &s);
        ok(relay_metrics_catchup(m, 31000, &c) && c.done && c.lag_bytes == 0, "then caught up");
        ok(!relay_metrics_catchup(m, 41000, &c), "and quiet after that");
        relay_metrics_free(m);
}

/* A topic named "other" among more than 100: one series with that label,
 * not two (Prometheus refuses a scrape with a duplicate series). */
static void test_topic_named_other(void)
{
        relay_metrics_t *m = relay_metrics_new();
        relay_metrics_sample_t s = {0};
        relay_metrics_acked(m, "other", 10);
        ack_numbered_topics(m, 110, 1);
        char *p = published_page(m, &s);
        is_int(occurrences(p, "outbox_relay_events_total{topic=\"other\"}"), 1,
               "one outbox_relay_events_total{topic=\"other\"} series");
        is_int(sample(p, "outbox_relay_events_total{topic=\"other\"}"), 11,
               "it counts the topic named other and the 10 past the 100th");
        free(p);
        relay_metrics_free(m);
}

/* What a session held (events in flight, one settled in place) ends with it:
 * its producer is gone, and the next session reads those events again. */
static void test_session_end_gauges(void)
{
        relay_metrics_t *m = relay_metrics_new();
        relay_metrics_sample_t s = {.received = 500, .confirmed = 400, .inflight_events = 7,
                                    .held_back = true};
        char *p = published_page(m, &s);
        is_int(sample(p, "outbox_relay_inflight_events"), 7, "7 events in flight while streaming");
        is_int(sample(p, "outbox_relay_held_back"), 1, "one held back");
        free(p);
        relay_metrics_session_end(m, RELAY_EKAFKA);
        relay_metrics_state(m, RELAY_STATE_BACKOFF); /* publishes, as relay.c does */
        p = page_of(m);
        is_int(sample(p, "outbox_relay_inflight_events"), 0,
               "none in flight once the session ended (backing off)");
        is_int(sample(p, "outbox_relay_held_back"), 0, "none held back once the session ended");
        is_int(sample(p, "outbox_relay_confirmed_lsn"), 400, "the confirmed position stays");
        free(p);
        relay_metrics_free(m);
}

/* More transactions in flight than the histogram remembers (a catch-up of
 * small transactions): the gauge still counts those received and not yet
 * confirmed, however often the ring fills and drains. */
static void test_many_in_flight(void)
{
        relay_metrics_t *m = relay_metrics_new();
        relay_metrics_sample_t s = {0};
        int64_t now = pg_now_us();
        relay_lsn_t lsn = 0, confirmed = 0;
        int64_t t = mono_ms();
        bool right = true;
        char *p;
        /* Rounds of 20 000 received, then all but the last 1 000 confirmed. */
        for (int round = 0; round < 5; round++) {
                for (int i = 0; i < 20000; i++)
                        relay_metrics_commit(m, lsn += 100, now);
                confirmed = lsn - 1000 * 100;
                relay_metrics_turn(m, t++, confirmed);
                p = published_page(m, &s);
                double n = sample(p, "outbox_relay_inflight_transactions");
                free(p);
                if (n != 1000) {
                        tap_diag("round %d: %.0f transactions in flight, not 1000", round, n);
                        right = false;
                }
        }
        ok(right, "1000 transactions in flight after each round of 20 000 received");
        relay_metrics_turn(m, t++, lsn);
        p = published_page(m, &s);
        is_int(sample(p, "outbox_relay_inflight_transactions"), 0, "none once all are confirmed");
        is_int(sample(p, "outbox_relay_commit_to_ack_seconds_count"), 100000,
               "each of the 100 000 confirmed transactions observed (%.0f)",
               sample(p, "outbox_relay_commit_to_ack_seconds_count"));
        free(p);
        relay_metrics_free(m);
}

int main(void)
{
        test_topics();
        test_latency_and_lag();
        test_health();
        test_catchup();
        test_session_end_gauges();
        test_topic_named_other();
        test_many_in_flight();
        return done_testing();
}
