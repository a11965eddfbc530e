/*
 * 0202-mock-faults.c - Kafka-side faults the real single broker cannot
 * produce, injected with librdkafka's mock cluster (3 brokers, topics of 4
 * partitions with replication factor 3) while the relay streams from the
 * real PostgreSQL and writers commit all along:
 *   - Produce requests failing with NOT_LEADER_FOR_PARTITION,
 *     REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS and a dropped connection
 *     (__TRANSPORT);
 *   - a broker down, then up again;
 *   - partition leaders moved to other brokers (a leader change), also
 *     away from a broker that is down;
 *   - a batch refused for good (INVALID_RECORD): the idempotent producer
 *     stops (gapless) and librdkafka purges its queue from another thread,
 *     so the purged events' reports ("Purged in queue") can be served
 *     before the refused batch's. The relay must report and remember the
 *     refusal, the cause, each time, and never the purge; the events are
 *     settled in place (resent alone) and nothing is lost.
 * Each fault must be ridden out (retried by the idempotent producer or, if
 * the session fails, resent from the slot) and Kafka must end up with every
 * committed event, each aggregate's first occurrences in commit order.
 * Duplicates are allowed (a failed session resends from the slot) and
 * reported, as are the relay's session restarts.
 *
 * The mock cluster lives in this process (rd_kafka_mock_cluster_new on a
 * dummy producer handle); the relay, a separate process, connects to its
 * loopback listeners. RELAY_TEST_KAFKA is pointed at it before any harness
 * Kafka call, so h_workload_count() and h_workload_verify() (metadata,
 * watermarks, a group-less consumer from the beginning to the high
 * watermark) read the mock cluster.
 *
 * Mock limits (librdkafka 2.0.2, see /work/shared/notes/protocol.md C.4): no
 * CreateTopics admin API (topics are created with rd_kafka_mock_topic_create
 * and the tables by hand, not h_workload_setup), a broker set down keeps its
 * partition leaderships (hence the explicit leader moves), no count of the
 * cluster-wide injected errors actually served
 * (rd_kafka_mock_broker_error_stack_cnt() covers per-broker stacks only), no
 * transaction markers (not used by the relay), a partition log capped at 5 MB (oldest
 * batches dropped; the variants stay far below), and no sequence checks for
 * a producer without a transactional.id (rd_kafka_mock_validate_records()
 * skips them): a batch pipelined behind one that got an injected error is
 * stored. A real broker does the same whenever it holds no state for the
 * producer id on that partition (each relay session is a new producer id; a
 * new partition; expired producer state). What then lost events here at
 * max.in.flight.requests.per.connection=5 was librdkafka's implicit
 * acknowledgement of the failed batch (err 0, offset -1, never resent; see
 * 0209 and 0212), not a defect of the mock. The relay runs at its defaults
 * (one request in flight per connection, which closes the hole).
 *
 * RELAY_TEST_MOCK_DEBUG=FILE writes the mock cluster's debug log to FILE.
 *
 * Short variant (CI): one round of every fault; long (RELAY_FAULTS_LONG=1):
 * four rounds with more events in between. The writers are paced (about
 * 200 events/s) so that even the long variant stays far below the mock's
 * 5 MB per partition; a test that checks the low watermarks says so if it
 * does not.
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

#define BROKERS 3
#define PARTITIONS 4
#define PRODUCE_API 0 /* ApiKey of Produce */

static rd_kafka_mock_cluster_t *g_mock;

/*
 * Messages in the workload's topics (sum of high watermarks), through a
 * client of its own made for the call, with short timeouts; -1 when the
 * cluster does not answer. Not the harness's long-lived client: a
 * connection it opened to a mock broker while that broker was down can hang
 * until socket.timeout.ms (60 s), so the harness's Kafka helpers are used
 * only once every broker is up for good (verification).
 */
static int64_t g_max_low; /* highest low watermark seen: > 0 when the mock dropped messages */

static long long mock_count(const h_workload_conf_t *wc, const char *bootstraps)
{
        char errstr[512], topic[256];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        rd_kafka_conf_set_log_cb(conf, fx_quiet_log);
        if (rd_kafka_conf_set(conf, "bootstrap.servers", bootstraps, errstr, sizeof(errstr)) ||
            rd_kafka_conf_set(conf, "socket.timeout.ms", "5000", errstr, sizeof(errstr)))
                tap_bail("counting client: %s", errstr);
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
        if (!rk)
                tap_bail("counting client: %s", errstr);
        long long sum = 0;
        for (int t = 0; t < H_WORKLOAD_TYPES && sum >= 0; t++) {
                h_workload_topic(wc, t, topic, sizeof(topic));
                for (int p = 0; p < PARTITIONS && sum >= 0; p++) {
                        int64_t lo, hi;
                        if (rd_kafka_query_watermark_offsets(rk, topic, p, &lo, &hi, 5000)) {
                                sum = -1;
                        } else {
                                sum += hi;
                                if (lo > g_max_low)
                                        g_max_low = lo;
                        }
                }
        }
        rd_kafka_destroy(rk);
        return sum;
}

/* Wait until the cluster holds at least `more` messages beyond `from`: the
 * relay got through whatever was injected. Returns the new count. */
static long long progress(const h_workload_conf_t *wc, const char *bootstraps, long long from,
                          long long more, const char *what)
{
        int64_t t0 = h_now_ms();
        long long got = -1;
        while (h_now_ms() - t0 < 120000) {
                got = mock_count(wc, bootstraps);
                if (got >= from + more)
                        break;
                h_sleep_ms(200);
        }
        if (!ok(got >= from + more, "%s: events keep arriving (%lld -> %lld in %.1f s)", what, from,
                got, (h_now_ms() - t0) / 1000.0))
                tap_diag("stuck after %s", what);
        return got >= from ? got : from;
}

static void move_leaders(const h_workload_conf_t *wc, int shift, int avoid)
{
        char topic[256];
        for (int t = 0; t < H_WORKLOAD_TYPES; t++) {
                h_workload_topic(wc, t, topic, sizeof(topic));
                for (int p = 0; p < PARTITIONS; p++) {
                        int b = (p + shift) % BROKERS + 1;
                        if (b == avoid)
                                b = b % BROKERS + 1;
                        rd_kafka_resp_err_t e =
                                rd_kafka_mock_partition_set_leader(g_mock, topic, p, b);
                        if (e)
                                tap_bail("set_leader %s [%d] -> %d: %s", topic, p, b,
                                         rd_kafka_err2str(e));
                }
        }
}

int main(void)
{
        const bool lng = fx_long();
        const int rounds = lng ? 4 : 1;
        const long long step = lng ? 600 : 300; /* events between faults */
        const int down_ms = lng ? 5000 : 3000;

        const char *bootstraps = fx_mock_start(BROKERS, &g_mock);
        tap_diag("variant: %s, %d round(s); mock cluster at %s", lng ? "long" : "short", rounds,
                 bootstraps);

        fx_case_t fc;
        fx_case_open(&fc, "mockfaults", "mf");
        h_workload_conf_t wc = {
                .db = fc.db, .suffix = fc.suffix, .writers = 4, .aggregates = 100, .events = 0,
                .max_txn = 10, .pause_ms = 100, .partitions = PARTITIONS,
        };
        /* The mock has no CreateTopics: its topics are made below. */
        char topic[256];
        h_workload_setup_tables(fc.c, &wc);
        for (int t = 0; t < H_WORKLOAD_TYPES; t++) {
                h_workload_topic(&wc, t, topic, sizeof(topic));
                rd_kafka_resp_err_t e =
                        rd_kafka_mock_topic_create(g_mock, topic, PARTITIONS, BROKERS);
                if (e)
                        tap_bail("mock topic %s: %s", topic, rd_kafka_err2str(e));
        }

        fx_sets_init(&fc.sets, fc.db, fc.slot, bootstraps);
        h_relay_t *r = fx_case_relay(&fc, "relay streams");

        fx_writers_t *ws = fx_writers_start(&wc);
        long long n = progress(&wc, bootstraps, 0, step, "before any fault");

        static const rd_kafka_resp_err_t kinds[] = {
                RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
                RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT,
                RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS,
                RD_KAFKA_RESP_ERR__TRANSPORT,
        };
        int injected = 0, downs = 0, leader_moves = 0, refusals = 0;
        for (int round = 0; round < rounds; round++) {
                char what[128];

                /* 1. Produce errors, each kind five times, interleaved. */
                rd_kafka_resp_err_t errs[20];
                for (int i = 0; i < 20; i++)
                        errs[i] = kinds[i % 4];
                rd_kafka_mock_push_request_errors_array(g_mock, PRODUCE_API, 20, errs);
                injected += 20;
                snprintf(what, sizeof(what), "round %d: 20 Produce errors", round + 1);
                n = progress(&wc, bootstraps, n, step, what);

                /* 2. Each kind in a burst of its own. */
                for (int k = 0; k < 4; k++) {
                        rd_kafka_resp_err_t burst[5] = {kinds[k], kinds[k], kinds[k], kinds[k],
                                                        kinds[k]};
                        rd_kafka_mock_push_request_errors_array(g_mock, PRODUCE_API, 5, burst);
                        injected += 5;
                        snprintf(what, sizeof(what), "round %d: 5 x %s", round + 1,
                                 rd_kafka_err2name(kinds[k]));
                        n = progress(&wc, bootstraps, n, step / 2, what);
                }

                /* 3. A broker down, then up (its partitions wait for it). */
                int b = round % BROKERS + 1;
                rd_kafka_mock_broker_set_down(g_mock, b);
                h_sleep_ms(down_ms);
                rd_kafka_mock_broker_set_up(g_mock, b);
                downs++;
                snprintf(what, sizeof(what), "round %d: broker %d down for %d ms", round + 1, b,
                         down_ms);
                n = progress(&wc, bootstraps, n, step, what);

                /* 4. Leader change of every partition. */
                move_leaders(&wc, round + 1, 0);
                leader_moves++;
                snprintf(what, sizeof(what), "round %d: every partition's leader moved", round + 1);
                n = progress(&wc, bootstraps, n, step, what);

                /* 5. A broker down and its leaderships moved away meanwhile. */
                b = (round + 1) % BROKERS + 1;
                rd_kafka_mock_broker_set_down(g_mock, b);
                h_sleep_ms(500);
                move_leaders(&wc, round + 2, b);
                leader_moves++;
                h_sleep_ms(down_ms / 2);
                rd_kafka_mock_broker_set_up(g_mock, b);
                downs++;
                snprintf(what, sizeof(what), "round %d: broker %d down, leaders moved off it",
                         round + 1, b);
                n = progress(&wc, bootstraps, n, step, what);

                /* 6. Batches refused for good, one at a time (the purge
                 * came first in about 1 of 9 refusals here before the fix). */
                for (int k = 0; k < 6; k++) {
                        rd_kafka_mock_push_request_errors(g_mock, PRODUCE_API, 1,
                                                          RD_KAFKA_RESP_ERR_INVALID_RECORD);
                        refusals++;
                        snprintf(what, sizeof(what), "round %d: refused batch %d", round + 1,
                                 k + 1);
                        n = progress(&wc, bootstraps, n, step / 2, what);
                }
        }

        fx_writer_stats_t st;
        fx_writers_stop(ws, false, &st);
        long long expected = 0;
        long long got = fx_wait_all_in_kafka(&fc, &wc, 180000, &expected);
        if (!ok(got >= expected, "the mock cluster holds at least the %lld committed events (%lld)",
                expected, got))
                h_relay_diag_log(r);
        is_int(h_relay_wait(r, 0), -1, "the relay is still running");
        mock_count(&wc, bootstraps);
        is_int(g_max_low, 0, "the mock kept every message (low watermarks 0: under its 5 MB per "
                             "partition, else lower the load)");

        fx_stop_relay(r, "SIGTERM: exit 0");
        int restarts = fx_log_count(r, "retrying in");
        int kwarn = fx_log_count(r, "Kafka: ");
        int named = fx_log_count(r, "Kafka rejected event \"");
        int purged = fx_log_count(r, "Purged in queue");
        if (!ok(named >= refusals && purged == 0,
                "each refused batch is reported as Kafka's refusal (%d of %d), never as the "
                "purge that follows it (%d)",
                named, refusals, purged))
                h_relay_diag_log(r);

        h_verify_t v;
        h_workload_verify(fc.c, &wc, &v);
        fx_check_delivered("mock faults", &v);
        tap_diag("FIGURES mock-faults: events=%zu produce_errors_injected=%d broker_downs=%d "
                 "leader_moves=%d duplicates=%zu missing=%zu out_of_order=%zu "
                 "session_restarts=%d kafka_warnings_logged=%d refusals=%d "
                 "refusals_reported=%d purges_reported=%d",
                 v.expected, injected, downs, leader_moves, v.duplicates, v.missing,
                 v.out_of_order, restarts, kwarn, refusals, named, purged);

        h_relay_free(r);
        fx_case_close(&fc, NULL);
        return done_testing();
}
