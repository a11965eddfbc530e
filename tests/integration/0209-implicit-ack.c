/*
 * 0209-implicit-ack.c - librdkafka 2.0.2's implicit acknowledgement,
 * reproduced without the relay: an idempotent producer reports messages
 * delivered (err 0, offset -1) that are not in the partition.
 *
 * How (rdkafka_request.c, v2.0.2): when a ProduceRequest fails retriably,
 * its messages go back to the partition queue and the partition is drained
 * (no new request until the ones in flight are answered). When a later
 * request of the same partition, already on the wire, then succeeds,
 * rd_kafka_handle_idempotent_Produce_success() sees acked_msgid <
 * first_msgid - 1 and calls rd_kafka_dr_implicit_ack(), which hands every
 * earlier message still in the transmit or partition queue to the delivery
 * report with err 0, status PERSISTED and offset RD_KAFKA_OFFSET_INVALID (-1)
 * ("implicitly acked by subsequent batch success"). They are never sent
 * again. The assumption behind it - a later batch can only be stored if the
 * earlier ones were, because the broker checks sequence numbers - does not
 * hold when the broker keeps no sequence state for the producer id on that
 * partition: a real broker accepts any first sequence from a producer it
 * does not know there (a new producer id, a new partition, expired producer
 * state), and librdkafka's mock cluster never checks sequences for a producer
 * without a transactional.id (rd_kafka_mock_validate_records() returns at
 * once when the request's TransactionalId is empty; with one, it checks the
 * BaseSequence against the last five batches of that producer id on the
 * partition). The mock is therefore a deterministic stage for the hole, not
 * its cause: the loss is librdkafka's.
 *
 * The injection: rd_kafka_mock_broker_push_request_error_rtts() gives the
 * first ProduceRequest the broker sees a retriable error, answered only
 * after RTT_MS. The mock handles the requests behind it on the same
 * connection meanwhile (their batches are appended; their answers queue
 * behind the delayed one, in order, as Kafka's protocol requires).
 *
 * Batches of 2 messages (batch.num.messages=2): librdkafka 2.0.2 lets a
 * partition of an idempotent producer send another request only while
 * fewer than 5 of its *messages* are in flight (rd_kafka_toppar_producer_
 * serve() caps requests at RD_KAFKA_IDEMP_MAX_INFLIGHT minus
 * rktp_msgs_inflight, a message count), so one partition pipelines only
 * small batches: requests of 2, 2 and 2 messages here. A request of 5
 * messages or more is alone on the wire for its partition whatever
 * max.in.flight says - the hole needs small batches, which is what a relay
 * sends when events trickle in, e.g. the first events of a new topic, and
 * what a retry of a small failed request is, with newer events right
 * behind it (both seen losing events on the real broker in 0211).
 *
 * One mock cluster (one broker); each run a topic of one partition of its
 * own and a fresh producer (a new producer id) of MSGS messages, then the
 * partition read back from the beginning to its high watermark. For each
 * retriable error kind:
 *   - max.in.flight=5: every message is reported delivered (err 0), some
 *     with offset -1, and exactly those are not in the partition;
 *   - max.in.flight=5 with enable.gapless.guarantee=true: the same (the
 *     gapless guarantee only concerns permanent errors);
 *   - max.in.flight=1, same injection: every message in the partition once,
 *     in produce order, no report with offset -1.
 * The injected error is checked to have been served in every run
 * (rd_kafka_mock_broker_error_stack_cnt() back to 0), so the runs at one in
 * flight are not vacuous.
 *
 * Short variant (CI): 3 runs per error kind and setting; long
 * (RELAY_FAULTS_LONG=1): 25. Needs no PostgreSQL and no broker.
 * RELAY_TEST_RDKAFKA_DEBUG=FILE writes the producers' msg,eos,protocol debug
 * log to FILE (the "implicitly acked by subsequent batch success" lines).
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"

#define MSGS 40
#define BATCH "2"
#define RTT_MS 200
#define PRODUCE_API 0 /* ApiKey of Produce */

typedef struct {
        int reports;            /* delivery reports received */
        int err[MSGS];          /* per message: its report's error */
        int64_t offset[MSGS];   /* per message: its report's offset */
        int status[MSGS];       /* per message: rd_kafka_msg_status_t */
        int seen[MSGS];         /* times found in the partition */
        int64_t at[MSGS];       /* offset found at (first) */
} run_t;

typedef struct {
        int reported_ok;     /* reports with err 0 */
        int reported_err;    /* reports with an error */
        int no_offset;       /* err 0 and offset < 0 */
        int no_offset_persisted; /* of those, status RD_KAFKA_MSG_STATUS_PERSISTED */
        int missing;         /* not in the partition */
        int no_offset_missing; /* err 0, offset < 0 and not in the partition */
        int missing_with_offset; /* err 0, offset >= 0, yet not in the partition */
        int duplicates;      /* found more than once */
        int misplaced;       /* found at an offset other than the one reported */
        int out_of_order;    /* partition order differs from produce order */
        int first_missing, last_missing;
        size_t errors_left;  /* injected errors not served */
} result_t;

static FILE *g_dbg; /* RELAY_TEST_RDKAFKA_DEBUG=FILE: the producers' msg,eos,protocol debug log */

static void quiet_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
        (void)rk;
        (void)level;
        if (g_dbg)
                fprintf(g_dbg, "%lld %s %s\n", (long long)h_now_ms(), fac, buf);
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
        run_t *r = opaque;
        (void)rk;
        intptr_t i = (intptr_t)m->_private;
        if (i < 0 || i >= MSGS)
                tap_bail("delivery report for an unknown message");
        r->reports++;
        r->err[i] = m->err;
        r->offset[i] = m->offset;
        r->status[i] = rd_kafka_message_status(m);
}

static void set(rd_kafka_conf_t *conf, const char *k, const char *v)
{
        char errstr[512];
        if (rd_kafka_conf_set(conf, k, v, errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK)
                tap_bail("%s=%s: %s", k, v, errstr);
}

/* Read topic [0] from the beginning to the high watermark into r->seen / r->at. */
static void read_back(const char *bootstraps, const char *topic, run_t *r, int *out_of_order)
{
        char errstr[512];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        rd_kafka_conf_set_log_cb(conf, quiet_log);
        set(conf, "bootstrap.servers", bootstraps);
        set(conf, "group.id", "implicit-ack-reader");
        set(conf, "enable.auto.commit", "false");
        set(conf, "enable.partition.eof", "true");
        set(conf, "fetch.wait.max.ms", "10");
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
        if (!rk)
                tap_bail("consumer: %s", errstr);
        int64_t lo = 0, hi = 0;
        rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(rk, topic, 0, &lo, &hi, 10000);
        if (e)
                tap_bail("watermarks of %s [0]: %s", topic, rd_kafka_err2str(e));
        if (lo != 0)
                tap_bail("%s [0] starts at offset %lld, not 0", topic, (long long)lo);
        rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(parts, topic, 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
        if ((e = rd_kafka_assign(rk, parts)))
                tap_bail("assign: %s", rd_kafka_err2str(e));
        rd_kafka_topic_partition_list_destroy(parts);
        int64_t next = 0, deadline = h_now_ms() + 30000;
        int last = -1;
        *out_of_order = 0;
        while (next < hi) {
                if (h_now_ms() > deadline)
                        tap_bail("timed out reading %s [0] (at %lld of %lld)", topic,
                                 (long long)next, (long long)hi);
                rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 200);
                if (!m)
                        continue;
                if (!m->err && m->offset < hi) {
                        int i = -1;
                        if (m->len > 2 && m->len < 16) {
                                char v[16];
                                memcpy(v, m->payload, m->len);
                                v[m->len] = '\0';
                                i = atoi(v + 2);
                        }
                        if (i < 0 || i >= MSGS)
                                tap_bail("unexpected message at offset %lld", (long long)m->offset);
                        if (r->seen[i]++ == 0)
                                r->at[i] = m->offset;
                        if (i <= last)
                                (*out_of_order)++;
                        last = i;
                        next = m->offset + 1;
                } else if (m->err && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                        tap_diag("consumer: %s", rd_kafka_message_errstr(m));
                }
                rd_kafka_message_destroy(m);
        }
        rd_kafka_consumer_close(rk);
        rd_kafka_destroy(rk);
}

/* One run: fresh mock cluster, injection, MSGS messages, read back. */
static void run_once(rd_kafka_mock_cluster_t *mc, const char *bootstraps,
                     rd_kafka_resp_err_t inject, int inflight, bool gapless, result_t *res)
{
        char errstr[512];
        static run_t r;
        memset(&r, 0, sizeof(r));
        memset(res, 0, sizeof(*res));
        res->first_missing = res->last_missing = -1;

        static int seq;
        char topic[64];
        snprintf(topic, sizeof(topic), "implicit-ack-%d", ++seq);
        if (rd_kafka_mock_topic_create(mc, topic, 1, 1))
                tap_bail("mock topic %s", topic);

        char n[16];
        snprintf(n, sizeof(n), "%d", inflight);
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        rd_kafka_conf_set_log_cb(conf, quiet_log);
        set(conf, "bootstrap.servers", bootstraps);
        set(conf, "enable.idempotence", "true");
        set(conf, "max.in.flight.requests.per.connection", n);
        set(conf, "enable.gapless.guarantee", gapless ? "true" : "false");
        set(conf, "batch.num.messages", BATCH);
        set(conf, "linger.ms", "50");
        set(conf, "message.timeout.ms", "30000");
        if (g_dbg)
                set(conf, "debug", "msg,eos,protocol");
        rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
        rd_kafka_conf_set_opaque(conf, &r);
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
        if (!rk)
                tap_bail("producer: %s", errstr);

        /* The first ProduceRequest broker 1 sees fails, answered RTT_MS later. */
        if (rd_kafka_mock_broker_push_request_error_rtts(mc, 1, PRODUCE_API, 1, inject, RTT_MS))
                tap_bail("could not push the error");

        for (intptr_t i = 0; i < MSGS; i++) {
                char v[16];
                snprintf(v, sizeof(v), "m-%03d", (int)i);
                rd_kafka_resp_err_t e = rd_kafka_producev(
                        rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(0),
                        RD_KAFKA_V_VALUE(v, strlen(v)), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                        RD_KAFKA_V_OPAQUE((void *)i), RD_KAFKA_V_END);
                if (e)
                        tap_bail("produce: %s", rd_kafka_err2str(e));
        }
        rd_kafka_flush(rk, 60000);
        if (r.reports != MSGS)
                tap_bail("%d delivery reports of %d after flush", r.reports, MSGS);
        rd_kafka_destroy(rk);

        if (rd_kafka_mock_broker_error_stack_cnt(mc, 1, PRODUCE_API, &res->errors_left))
                tap_bail("error stack");
        read_back(bootstraps, topic, &r, &res->out_of_order);

        for (int i = 0; i < MSGS; i++) {
                if (r.err[i]) {
                        res->reported_err++;
                } else {
                        res->reported_ok++;
                        if (r.offset[i] < 0) {
                                res->no_offset++;
                                res->no_offset_persisted +=
                                        r.status[i] == RD_KAFKA_MSG_STATUS_PERSISTED;
                        }
                }
                if (!r.seen[i]) {
                        res->missing++;
                        if (!r.err[i] && r.offset[i] < 0)
                                res->no_offset_missing++;
                        if (!r.err[i] && r.offset[i] >= 0)
                                res->missing_with_offset++;
                        if (res->first_missing < 0)
                                res->first_missing = i;
                        res->last_missing = i;
                } else {
                        if (r.seen[i] > 1)
                                res->duplicates += r.seen[i] - 1;
                        if (!r.err[i] && r.offset[i] >= 0 && r.offset[i] != r.at[i])
                                res->misplaced++;
                }
        }
}

int main(void)
{
        const int runs = fx_long() ? 25 : 3;
        static const rd_kafka_resp_err_t kinds[] = {
                RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS,
                RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
                RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART,
                RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT,
        };
        static const struct {
                int inflight;
                bool gapless;
        } settings[] = {{5, false}, {5, true}, {1, false}};
        const int nkinds = (int)(sizeof(kinds) / sizeof(kinds[0]));
        char errstr[512];
        if (getenv("RELAY_TEST_RDKAFKA_DEBUG")) {
                g_dbg = fopen(getenv("RELAY_TEST_RDKAFKA_DEBUG"), "w");
                if (!g_dbg)
                        tap_bail("could not open RELAY_TEST_RDKAFKA_DEBUG");
                setvbuf(g_dbg, NULL, _IOLBF, 0);
        }

        /* One mock cluster (one broker), a topic of one partition per run. */
        rd_kafka_conf_t *mconf = rd_kafka_conf_new();
        rd_kafka_conf_set_log_cb(mconf, quiet_log);
        rd_kafka_t *mrk = rd_kafka_new(RD_KAFKA_PRODUCER, mconf, errstr, sizeof(errstr));
        if (!mrk)
                tap_bail("mock handle: %s", errstr);
        rd_kafka_mock_cluster_t *mc = rd_kafka_mock_cluster_new(mrk, 1);
        if (!mc)
                tap_bail("could not create a mock cluster");
        const char *bootstraps = rd_kafka_mock_cluster_bootstraps(mc);

        tap_diag("librdkafka %s; %d run(s) per error kind and setting; %d messages, batches of "
                 "%s, first ProduceRequest failed after %d ms",
                 rd_kafka_version_str(), runs, MSGS, BATCH, RTT_MS);

        for (int s = 0; s < 3; s++) {
                const int inflight = settings[s].inflight;
                const bool gapless = settings[s].gapless;
                int runs_losing = 0, lost_total = 0, lost_min = MSGS, lost_max = 0;
                int no_offset_total = 0, persisted_total = 0, dup_total = 0;
                for (int k = 0; k < nkinds; k++) {
                        const char *kind = rd_kafka_err2name(kinds[k]);
                        int bad_served = 0, bad_err = 0, bad_match = 0, bad_dup = 0;
                        int bad_place = 0, bad_order = 0, bad_loss = 0;
                        int kind_losing = 0, kind_lost = 0, kind_first = -1, kind_last = -1;
                        for (int i = 0; i < runs; i++) {
                                result_t res;
                                run_once(mc, bootstraps, kinds[k], inflight, gapless, &res);
                                bad_served += res.errors_left != 0;
                                bad_err += res.reported_err != 0;
                                bad_dup += res.duplicates != 0;
                                bad_place += res.misplaced != 0;
                                bad_order += res.out_of_order != 0;
                                /* Every message missing from the partition is one
                                 * reported delivered without an offset, and the
                                 * reverse. */
                                bad_match += res.missing != res.no_offset ||
                                             res.no_offset_missing != res.missing ||
                                             res.missing_with_offset != 0;
                                if (inflight > 1)
                                        bad_loss += res.missing == 0;
                                else
                                        bad_loss += res.missing != 0 || res.no_offset != 0;
                                if (res.missing) {
                                        runs_losing++;
                                        kind_losing++;
                                        kind_lost += res.missing;
                                }
                                lost_total += res.missing;
                                no_offset_total += res.no_offset;
                                persisted_total += res.no_offset_persisted;
                                dup_total += res.duplicates;
                                if (res.missing < lost_min)
                                        lost_min = res.missing;
                                if (res.missing > lost_max)
                                        lost_max = res.missing;
                                if (res.missing) {
                                        if (kind_first < 0 || res.first_missing < kind_first)
                                                kind_first = res.first_missing;
                                        if (res.last_missing > kind_last)
                                                kind_last = res.last_missing;
                                }
                        }
                        if (kind_losing)
                                tap_diag("in flight %d%s, %s: %d of %d runs lost %d message(s) "
                                         "reported delivered with offset -1 (message numbers "
                                         "%d..%d)",
                                         inflight, gapless ? ", gapless" : "", kind, kind_losing,
                                         runs, kind_lost, kind_first, kind_last);
                        const char *cfg = inflight > 1 ? (gapless ? "in flight 5, gapless"
                                                                  : "in flight 5")
                                                       : "in flight 1";
                        is_int(bad_served, 0, "%s, %s: the injected error was served in every run",
                               cfg, kind);
                        is_int(bad_err, 0, "%s, %s: every message reported delivered (err 0)", cfg,
                               kind);
                        if (inflight > 1)
                                is_int(bad_loss, 0,
                                       "%s, %s: messages reported delivered are missing from the "
                                       "partition in every run (%d of %d runs, %d lost)",
                                       cfg, kind, kind_losing, runs, kind_lost);
                        else
                                is_int(bad_loss, 0,
                                       "%s, %s: every message in the partition, no report with "
                                       "offset -1 (%d runs)",
                                       cfg, kind, runs);
                        is_int(bad_match, 0,
                               "%s, %s: the missing messages are exactly those reported with "
                               "offset -1",
                               cfg, kind);
                        is_int(bad_dup + bad_place + bad_order, 0,
                               "%s, %s: no duplicate, every stored message at its reported offset, "
                               "in produce order",
                               cfg, kind);
                }
                tap_diag("FIGURES implicit-ack: in_flight=%d gapless=%s runs=%d runs_losing=%d "
                         "lost=%d lost_per_run=%d..%d reported_offset_minus_1=%d "
                         "of_which_status_persisted=%d duplicates=%d",
                         inflight, gapless ? "true" : "false", runs * nkinds, runs_losing,
                         lost_total, runs_losing ? lost_min : 0, lost_max, no_offset_total,
                         persisted_total, dup_total);
        }
        rd_kafka_mock_cluster_destroy(mc);
        rd_kafka_destroy(mrk);
        return done_testing();
}
