/*
 * 0217-linger-far.c - the round-trip linger against a broker 25 ms away
 * (librdkafka's mock cluster, rd_kafka_mock_broker_set_rtt): the relay
 * measures the round trip, and once it follows the writers it replaces its
 * producer with linger.ms = the round trip while events keep coming. What
 * Kafka holds must not notice: every committed event, each aggregate in
 * commit order, the slot confirmed to the end of the WAL.
 *
 * One broker, the workload's topics with one partition each; writers
 * commit one event per transaction every ~10 ms throughout, so the
 * producer always has something in flight when the relay replaces it (it
 * drains it first). A relay with kafka.linger.ms set keeps it (no
 * measurement, no replacement), checked in the same way.
 *
 * Exactly-once (delivery.mode=exactly-once, a commit every 200 ms): the
 * replacement may only come between two Kafka transactions, and the new
 * producer registers the same transactional.id again (fencing the closed
 * one). A read_committed consumer must then see every event once. The
 * mock cluster does not hide aborted transactions from such a consumer,
 * so the case also asserts that nothing was aborted (by the relay, or by
 * a session started again): what it reads is what the commits made
 * visible, and a duplicate would show.
 *
 * A broker that moves away after the start: the relay measures it near
 * (linger.ms 5), then the mock answers 30 ms late; the relay must notice
 * the new round trip in librdkafka's statistics (three 5 s windows in a
 * row) and replace its producer as at the start, in both delivery modes.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "faults/faults.h"
#include "harness.h"
#include "workload.h"

#define RTT_MS 25
#define MOVED_MS 30
#define NOTICED "Kafka round trip now"
#define REPLACED "replacing the Kafka producer for linger.ms"

static rd_kafka_mock_cluster_t *g_mock;
static const char *g_bootstraps;

typedef struct {
        const char *setting; /* one more relay setting, or NULL */
        bool replace;        /* the producer must be replaced (else must not) */
        bool eos;            /* delivery.mode=exactly-once */
        bool moves;          /* the broker starts near and moves MOVED_MS away */
} case_t;

/* Kafka's timestamps are wall-clock. */
static int64_t wall_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The line of log holding needle, printed as a diagnostic; the int after
 * "linger.ms " in it, or 0. */
static int linger_in_line(const char *name, const char *log, const char *needle)
{
        const char *line = log ? strstr(log, needle) : NULL;
        int linger = 0;
        if (!line)
                return 0;
        const char *eol = strchr(line, '\n');
        tap_diag("%s: %.*s", name, eol ? (int)(eol - line) : 200, line);
        const char *l = strstr(line, "linger.ms ");
        if (!l || (eol && l > eol) || sscanf(l, "linger.ms %d", &linger) != 1)
                return 0;
        return linger;
}

/* After the replacement: what the exactly-once case adds to the checks. */
static void check_eos(const char *name, const char *ck_topic, const h_verify_t *v,
                      int64_t replaced_at)
{
        is_int(v->duplicates, 0, "%s: a read_committed consumer sees no event twice", name);
        /* The new producer committed: checkpoint records (one per Kafka
         * transaction, none aborted) stamped after the test saw the
         * replacement; the stop's commit is one, so at least one more came
         * from the commit interval. */
        h_msg_t *cks;
        size_t ncks = h_kafka_consume_all(ck_topic, &cks), later = 0;
        for (size_t i = 0; i < ncks; i++)
                later += cks[i].timestamp > replaced_at;
        h_msgs_free(cks, ncks);
        ok(later >= 2, "%s: %zu of %zu Kafka transactions committed after the replacement", name,
           later, ncks);
}

static void run_case(const char *name, const case_t *k)
{
        fx_case_t fc;
        fx_case_open(&fc, "lingerfar", "lf");
        char *ck_topic = NULL;
        h_workload_conf_t wc;
        if (rd_kafka_mock_broker_set_rtt(g_mock, 1, k->moves ? 0 : RTT_MS))
                tap_bail("could not set the mock broker's round trip");
        fx_mock_workload(g_mock, &fc, false, &wc);
        fx_sets_init(&fc.sets, fc.db, fc.slot, g_bootstraps);
        if (k->setting)
                fx_sets_add(&fc.sets, "%s", k->setting);
        if (k->eos) {
                ck_topic = fx_fmt("outbox.relay.checkpoints_%s", fc.suffix);
                if (rd_kafka_mock_topic_create(g_mock, ck_topic, 1, 1))
                        tap_bail("mock topic %s", ck_topic);
                fx_sets_add(&fc.sets, "delivery.mode=exactly-once");
                fx_sets_add(&fc.sets, "eos.checkpoint.topic=%s", ck_topic);
                fx_sets_add(&fc.sets, "eos.commit.interval.ms=200");
        }
        char *what = fx_fmt("%s: relay streams", name);
        h_relay_t *r = fx_case_relay(&fc, what);
        free(what);
        if (h_relay_wait(r, 0) >= 0) {
                h_relay_free(r);
                fx_case_close(&fc, NULL);
                free(ck_topic);
                return;
        }
        fx_writers_t *ws = fx_writers_start(&wc);
        long long n = h_workload_wait_count(&wc, 100, 60000);
        ok(n >= 100, "%s: events arrive (%lld)", name, n);
        if (k->moves) {
                char *log = h_relay_log(r);
                ok(linger_in_line(name, log, "Kafka round trip") == 5 && !strstr(log, REPLACED),
                   "%s: measured near at the start: linger.ms 5, producer kept", name);
                free(log);
                if (rd_kafka_mock_broker_set_rtt(g_mock, 1, MOVED_MS))
                        tap_bail("could not move the mock broker away");
                tap_diag("%s: the mock broker now answers %d ms late", name, MOVED_MS);
                /* Three statistics windows of 5 s, the first maybe partly near. */
                ok(h_relay_wait_log(r, NOTICED, 40000), "%s: the relay notices the new round trip",
                   name);
        }
        bool replaced = h_relay_wait_log(r, REPLACED, k->replace ? 30000 : 8000);
        int64_t replaced_at = wall_ms();
        ok(replaced == k->replace, "%s: the producer was %sreplaced for the round trip's linger.ms",
           name, k->replace ? "" : "not ");
        /* Events keep coming after the replacement (or the wait). */
        long long after = h_workload_count(&wc);
        n = h_workload_wait_count(&wc, after + 200, 60000);
        ok(n >= after + 200, "%s: events arrive after it (%lld more)", name, n - after);
        fx_writer_stats_t st;
        fx_writers_stop(ws, false, &st);
        char *end = h_pg_value(fc.c, "SELECT pg_current_wal_lsn()");
        ok(h_pg_wait_confirmed(fc.c, fc.slot, end, 120000) >= 0,
           "%s: the relay confirms the slot up to the end of the WAL", name);
        free(end);
        char *log = h_relay_log(r);
        /* With kafka.linger.ms set the relay leaves it alone: no measurement. */
        ok(log && (strstr(log, "Kafka round trip") != NULL) == k->replace,
           "%s: the round trip was %smeasured", name, k->replace ? "" : "not ");
        if (k->moves) {
                int linger = linger_in_line(name, log, NOTICED);
                ok(linger >= MOVED_MS - 2 && linger <= MOVED_MS + 10,
                   "%s: the new linger.ms is the new round trip (%d)", name, linger);
        }
        /* The mock cluster shows aborted events to read_committed consumers:
         * nothing may have been aborted, by the relay or by a session that
         * started again (a replacement inside a transaction does that). */
        if (k->eos)
                ok(log && strstr(log, "exactly-once: transactional.id") && !strstr(log, "aborted") &&
                           !strstr(log, "retrying in"),
                   "%s: exactly-once, one session, no Kafka transaction aborted", name);
        free(log);
        char *stop = fx_fmt("%s: SIGTERM: exit 0", name);
        fx_stop_relay(r, stop);
        free(stop);
        h_verify_t v;
        h_workload_verify(fc.c, &wc, &v);
        fx_check_delivered(name, &v);
        if (k->eos)
                check_eos(name, ck_topic, &v, replaced_at);
        else /* nothing failed: the idempotent producer sent nothing twice */
                is_int(v.duplicates, 0, "%s: no event twice", name);
        if (v.missing || v.duplicates || replaced != k->replace)
                h_relay_diag_log(r);
        h_relay_free(r);
        fx_case_close(&fc, NULL);
        free(ck_topic);
}

int main(void)
{
        g_bootstraps = fx_mock_start(1, &g_mock);
        tap_diag("mock cluster at %s, answering %d ms late unless moving", g_bootstraps, RTT_MS);
        run_case("round-trip linger", &(case_t){.replace = true});
        run_case("kafka.linger.ms=5 set", &(case_t){.setting = "kafka.linger.ms=5"});
        run_case("exactly-once", &(case_t){.replace = true, .eos = true});
        run_case("moving away", &(case_t){.replace = true, .moves = true});
        run_case("moving away, exactly-once", &(case_t){.replace = true, .eos = true, .moves = true});
        return done_testing();
}
