/*
 * 0212-implicit-ack-relay.c - the implicit-ack hole of 0209, through the
 * relay: the real PostgreSQL feeds the relay, the relay produces to
 * librdkafka's mock cluster, and the first ProduceRequest after each
 * injection fails retriably while later small requests of the same
 * partition are already on the wire.
 *
 * Stage: a mock cluster of two brokers, the workload's two topics with one
 * partition each, topic 0 led by broker 1 and topic 1 by broker 2, so every
 * request on a connection is for one partition. Writers commit one event
 * per transaction every ~10 ms, so the relay sends requests of one or two
 * events (linger.ms=5): small enough for librdkafka 2.0.2 to pipeline
 * several requests of one partition (see 0209 on its limit of 5 messages in
 * flight per partition). Each round pushes, on both brokers, one Produce
 * error answered RTT_MS late (rd_kafka_mock_broker_push_request_error_rtts):
 * NOT_ENOUGH_REPLICAS, NOT_LEADER_FOR_PARTITION, UNKNOWN_TOPIC_OR_PART and
 * REQUEST_TIMED_OUT in turn. The mock cluster checks no sequence numbers
 * for a producer without a transactional.id, so the requests behind the
 * delayed one are stored, and librdkafka implicitly acknowledges the failed
 * one (err 0, offset -1) at max.in.flight.requests.per.connection > 1.
 *
 * Two relays, one after the other, each on a database, slot and topics of
 * its own:
 *   - the relay's defaults (one request in flight per connection): no
 *     report without an offset can happen, nothing is lost;
 *   - delivery.unsafe.allow.pipelining=true with
 *     kafka.max.in.flight.requests.per.connection=5: the hole opens; the
 *     relay must see it (an error containing "acknowledged without an
 *     offset", at least once), end the session without confirming past it
 *     and resend from the slot: nothing lost, duplicates allowed and
 *     reported. Order is reported, not asserted: the requests stored behind
 *     the failed one stay in the log before the failed events come again
 *     from the slot, so an aggregate can be out of order - what makes
 *     pipelining unsafe even with the detection.
 * Before both, a relay given kafka.max.in.flight.requests.per.connection=5
 * or kafka.enable.gapless.guarantee=false without the unsafe switch must
 * refuse to start (exit 2).
 * Both: every committed event in Kafka, every injected error served, the
 * slot confirmed up to the end of the WAL once the writers stop (the relay
 * thinks it delivered everything, and Kafka holds it); at the defaults also
 * each aggregate's first occurrences in commit order.
 *
 * Before the relay refused pipelining by default and checked offsets
 * (issue 10), the first case lost the events of each failed request, and
 * the second could not start (unknown key).
 *
 * Short variant (CI): 4 rounds per relay (each error kind once); long
 * (RELAY_FAULTS_LONG=1): 20.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"
#include "workload.h"

#define BROKERS 2
#define PRODUCE_API 0 /* ApiKey of Produce */
#define RTT_MS 1000
#define HOLE_LOG "acknowledged without an offset"

static rd_kafka_mock_cluster_t *g_mock;

/* Injected Produce errors broker b has not served yet. */
static size_t errors_left(int b)
{
        size_t n = 0;
        if (rd_kafka_mock_broker_error_stack_cnt(g_mock, b, PRODUCE_API, &n))
                tap_bail("error stack of broker %d", b);
        return n;
}

/* A setting that reopens the hole is refused at start-up (exit 2) unless
 * delivery.unsafe.allow.pipelining=true says otherwise. */
static void check_refused(const char *bootstraps, const char *setting)
{
        fx_case_t fc;
        fx_case_open(&fc, "implicitack", "ia");
        h_pg_create_outbox(fc.c, "outbox"); /* a relay that accepts it streams */
        fx_sets_init(&fc.sets, fc.db, fc.slot, bootstraps);
        fx_sets_add(&fc.sets, "%s", setting);
        h_relay_t *r = h_relay_start(fc.sets.v);
        int rc = h_relay_wait(r, 15000);
        is_int(rc, 2, "%s without delivery.unsafe.allow.pipelining: refused at start (exit 2)",
               setting);
        if (rc != 2)
                h_relay_diag_log(r);
        h_relay_free(r);
        fx_case_close(&fc, NULL);
}

typedef struct {
        long long events, duplicates, missing, out_of_order;
        int rounds, unserved, holes_logged, restarts;
        bool confirmed_all;
} case_result_t;

static void run_case(const char *name, const char *bootstraps, int rounds, bool pipelining,
                     case_result_t *res)
{
        static const rd_kafka_resp_err_t kinds[] = {
                RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS,
                RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
                RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART,
                RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT,
        };
        memset(res, 0, sizeof(*res));

        fx_case_t fc;
        fx_case_open(&fc, "implicitack", "ia");
        h_workload_conf_t wc;
        fx_mock_workload(g_mock, &fc, true, &wc);

        fx_sets_init(&fc.sets, fc.db, fc.slot, bootstraps);
        if (pipelining) {
                fx_sets_add(&fc.sets, "%s", "delivery.unsafe.allow.pipelining=true");
                fx_sets_add(&fc.sets, "%s", "kafka.max.in.flight.requests.per.connection=5");
        }
        char *what = fx_fmt("%s: relay streams", name);
        h_relay_t *r = fx_case_relay(&fc, what);
        free(what);
        if (h_relay_wait(r, 0) >= 0) {
                /* It exited (a refused setting?): its log was shown. */
                res->unserved = -1;
                h_relay_free(r);
                fx_case_close(&fc, NULL);
                return;
        }

        fx_writers_t *ws = fx_writers_start(&wc);
        long long n = h_workload_wait_count(&wc, 100, 60000);
        ok(n >= 100, "%s: events arrive before any injection (%lld)", name, n);

        for (int i = 0; i < rounds && h_relay_wait(r, 0) < 0; i++) {
                rd_kafka_resp_err_t e = kinds[i % 4];
                for (int b = 1; b <= BROKERS; b++)
                        if (rd_kafka_mock_broker_push_request_error_rtts(g_mock, b, PRODUCE_API,
                                                                         1, e, RTT_MS))
                                tap_bail("could not push an error on broker %d", b);
                /* Served once each broker got its next Produce request; then
                 * let the relay get well past the failed ones. */
                int64_t deadline = h_now_ms() + 30000;
                while ((errors_left(1) || errors_left(2)) && h_now_ms() < deadline)
                        h_sleep_ms(50);
                if (errors_left(1) || errors_left(2))
                        res->unserved++;
                h_sleep_ms(RTT_MS + 500);
                res->rounds++;
        }

        fx_writer_stats_t st;
        fx_writers_stop(ws, false, &st);
        /* Everything the relay will ever confirm: the end of the WAL now. */
        char *end = h_pg_value(fc.c, "SELECT pg_current_wal_lsn()");
        res->confirmed_all = h_pg_wait_confirmed(fc.c, fc.slot, end, 120000) >= 0;
        free(end);
        ok(res->confirmed_all, "%s: the relay confirms the slot up to the end of the WAL", name);
        is_int(h_relay_wait(r, 0), -1, "%s: the relay is still running", name);
        res->holes_logged = fx_log_count(r, HOLE_LOG);
        res->restarts = fx_log_count(r, "retrying in");
        char *stop = fx_fmt("%s: SIGTERM: exit 0", name);
        fx_stop_relay(r, stop);
        free(stop);

        h_verify_t v;
        h_workload_verify(fc.c, &wc, &v);
        if (!pipelining) {
                fx_check_delivered(name, &v);
        } else {
                /* The batches stored behind the failed one stay where they
                 * are; the failed one's events come again from the slot after
                 * them: nothing lost, but an aggregate can be out of order.
                 * That is why pipelining is unsafe; it is reported, not
                 * asserted. */
                fx_diag_verify(name, &v);
                is_int(v.missing, 0, "%s: no committed event is missing", name);
                is_int(v.bad_key + v.bad_partition + v.bad_headers + v.bad_value, 0,
                       "%s: keys, partitions, headers and values as written", name);
        }
        res->events = (long long)v.expected;
        res->duplicates = (long long)v.duplicates;
        res->missing = (long long)v.missing;
        res->out_of_order = (long long)v.out_of_order;
        if (v.missing || (pipelining && res->holes_logged == 0) || !res->confirmed_all)
                h_relay_diag_log(r);
        is_int(res->unserved, 0, "%s: every injected error was served (%d rounds)", name,
               res->rounds);
        h_relay_free(r);
        fx_case_close(&fc, NULL);
}

int main(void)
{
        const int rounds = fx_long() ? 20 : 4;
        const char *bootstraps = fx_mock_start(BROKERS, &g_mock);
        tap_diag("variant: %s, %d round(s) per relay; mock cluster at %s",
                 fx_long() ? "long" : "short", rounds, bootstraps);

        check_refused(bootstraps, "kafka.max.in.flight.requests.per.connection=5");
        check_refused(bootstraps, "kafka.enable.gapless.guarantee=false");

        case_result_t d, p;
        run_case("defaults", bootstraps, rounds, false, &d);
        is_int(d.holes_logged, 0,
               "defaults: no delivery report without an offset (one request in flight)");
        tap_diag("FIGURES implicit-ack-relay: relay=defaults rounds=%d events=%lld missing=%lld "
                 "out_of_order=%lld duplicates=%lld holes_logged=%d session_restarts=%d",
                 d.rounds, d.events, d.missing, d.out_of_order, d.duplicates, d.holes_logged,
                 d.restarts);

        run_case("pipelining", bootstraps, rounds, true, &p);
        ok(p.holes_logged >= 1, "pipelining: the relay logged \"" HOLE_LOG "\" (%d times)",
           p.holes_logged);
        tap_diag("FIGURES implicit-ack-relay: relay=pipelining(5 in flight) rounds=%d "
                 "events=%lld missing=%lld out_of_order=%lld duplicates=%lld holes_logged=%d "
                 "session_restarts=%d",
                 p.rounds, p.events, p.missing, p.out_of_order, p.duplicates, p.holes_logged,
                 p.restarts);
        return done_testing();
}
