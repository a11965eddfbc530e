/*
 * benchtool - small helpers for tests/bench (built by tests/bench/lib.sh):
 *
 *   benchtool topics BROKERS MAX_MESSAGE_BYTES TOPIC...
 *       create topics with message.timestamp.type=LogAppendTime (already
 *       existing ones are fine): one partition and one replica, or
 *       $BENCH_TOPIC_PARTITIONS and $BENCH_TOPIC_RF
 *   benchtool wait BROKERS TOPIC COUNT TIMEOUT_S [PID]
 *       poll the end offsets of TOPIC (summed over its partitions) every
 *       millisecond until they reach COUNT; print "<end offset> <epoch ms
 *       when seen> <epoch ms when the first message was seen>"; exit 1 on
 *       the deadline, 2 when PID (the relay under test) has died meanwhile
 *   benchtool consume BROKERS TOPIC COUNT TIMEOUT_S ISOLATION [PID [LATFILE]]
 *       a consumer (ISOLATION: read_committed or read_uncommitted) reads
 *       TOPIC's partition 0 from the beginning until it has COUNT messages;
 *       prints "<count> <epoch ms when the COUNT-th was seen> <epoch ms when
 *       the first was seen> <its own CPU seconds>". What a read_committed
 *       consumer sees is what exactly-once makes visible (end offsets count
 *       aborted messages and transaction markers too, so wait cannot tell).
 *       With LATFILE, one line per message: its arrival minus the payload's
 *       "t0", in ms. With $BENCH_CONSUME_TRACE naming a file, "<epoch ms>
 *       <count>" there every 10 000 messages (how fast it reads, and when).
 *       Exit codes as wait's.
 *   benchtool confirmed CONNINFO SLOT LSN TIMEOUT_S
 *       poll the slot every 5 ms until its confirmed_flush_lsn reaches LSN;
 *       print "<epoch ms when seen> <epoch ms when its walsender had sent up
 *       to LSN> <the walsender's pid>". The first is the moment PostgreSQL
 *       holds the relay's confirmation of everything up to LSN, which either
 *       delivery mode gives only after Kafka has acknowledged (at-least-once)
 *       or committed (exactly-once) it. Exit 1 on the deadline.
 *   benchtool load CONNINFO AGGREGATETYPE RATE SECONDS
 *       insert RATE outbox events per second for SECONDS, one multi-row INSERT
 *       (one transaction) per 10 ms tick on an absolute schedule; a late tick
 *       inserts what is owed. Each payload carries "t0", clock_timestamp() of the
 *       insert in epoch microseconds. Prints "<rows> <seconds> <late ticks>".
 *   benchtool produce BROKERS TOPIC RATE SECONDS
 *       the Kafka leg alone: a bare librdkafka producer with the relay's
 *       settings (acks=all, idempotent, linger.ms=5, no compression) sends the
 *       same events on the same 10 ms schedule, "t0" being the produce() call;
 *       no database and no decoding. Prints what load prints.
 *   benchtool rtt BROKERS TOPIC COUNT
 *       the round trip as a producer sees it: COUNT messages one at a time
 *       (linger.ms=0, acks=all, idempotent), each waiting for its delivery
 *       report; prints "<median ms> <p90 ms> <librdkafka's rtt avg ms>" (the
 *       last from its statistics: the broker's request round trip)
 *   benchtool spread BROKERS TOPIC EVENTS PRODUCERS [MAX_IN_FLIGHT]
 *       the design alternative of issue 18: EVENTS events of the bench's shape
 *       keyed like the relay's (murmur2), each produced by the one of
 *       PRODUCERS idempotent producers that owns its partition (partition
 *       modulo PRODUCERS), each with max.in.flight.requests.per.connection=1
 *       (or MAX_IN_FLIGHT), linger.ms=5, queue.buffering.max.messages=10000
 *       divided among them; prints "<ms from first produce to last ack>"
 *   benchtool mock RTT_MS PARTITIONS TOPIC...
 *       librdkafka's mock cluster (one broker that answers every request
 *       RTT_MS late, rd_kafka_mock_broker_set_rtt) with the topics created;
 *       prints its bootstrap address and runs until SIGTERM
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <math.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(clockid_t clk)
{
        struct timespec ts;
        clock_gettime(clk, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Set before kafka_client() to get librdkafka's statistics. */
static int (*client_stats)(rd_kafka_t *, char *, size_t, void *);

/* A client of brokers with settings (NULL-terminated name/value pairs, may
 * be NULL) and a delivery report callback (producers, may be NULL); exits 3
 * when librdkafka refuses. */
static rd_kafka_t *kafka_client(const char *brokers, rd_kafka_type_t type,
                                const char *const *settings,
                                void (*dr)(rd_kafka_t *, const rd_kafka_message_t *, void *))
{
        char err[512];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        if (rd_kafka_conf_set(conf, "bootstrap.servers", brokers, err, sizeof(err)) != RD_KAFKA_CONF_OK ||
            rd_kafka_conf_set(conf, "log_level", "3", err, sizeof(err)) != RD_KAFKA_CONF_OK) {
                fprintf(stderr, "benchtool: %s\n", err);
                exit(3);
        }
        for (size_t i = 0; settings && settings[i]; i += 2)
                if (rd_kafka_conf_set(conf, settings[i], settings[i + 1], err, sizeof(err)) !=
                    RD_KAFKA_CONF_OK) {
                        fprintf(stderr, "benchtool: %s\n", err);
                        exit(3);
                }
        if (dr)
                rd_kafka_conf_set_dr_msg_cb(conf, dr);
        if (client_stats)
                rd_kafka_conf_set_stats_cb(conf, client_stats);
        rd_kafka_t *rk = rd_kafka_new(type, conf, err, sizeof(err));
        if (rk == NULL) {
                fprintf(stderr, "benchtool: rd_kafka_new: %s\n", err);
                exit(3);
        }
        return rk;
}

static int cmd_topics(int argc, char **argv)
{
        if (argc < 4) {
                fprintf(stderr, "usage: benchtool topics BROKERS MAX_MESSAGE_BYTES TOPIC...\n");
                return 3;
        }
        rd_kafka_t *rk = kafka_client(argv[1], RD_KAFKA_PRODUCER, NULL, NULL);
        int n = argc - 3, rc = 0;
        rd_kafka_NewTopic_t **nt = calloc((size_t)n, sizeof(*nt));
        char err[512];
        const char *np = getenv("BENCH_TOPIC_PARTITIONS"), *rf = getenv("BENCH_TOPIC_RF");
        for (int i = 0; i < n; i++) {
                nt[i] = rd_kafka_NewTopic_new(argv[3 + i], np && *np ? atoi(np) : 1, rf && *rf ? atoi(rf) : 1,
                                              err, sizeof(err));
                if (nt[i] == NULL) {
                        fprintf(stderr, "benchtool: %s: %s\n", argv[3 + i], err);
                        return 3;
                }
                rd_kafka_NewTopic_set_config(nt[i], "message.timestamp.type", "LogAppendTime");
                rd_kafka_NewTopic_set_config(nt[i], "max.message.bytes", argv[2]);
        }
        rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
        rd_kafka_AdminOptions_t *opt = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
        rd_kafka_AdminOptions_set_operation_timeout(opt, 30000, err, sizeof(err));
        rd_kafka_AdminOptions_set_request_timeout(opt, 30000, err, sizeof(err));
        rd_kafka_CreateTopics(rk, nt, (size_t)n, opt, q);
        rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 60000);
        if (ev == NULL) {
                fprintf(stderr, "benchtool: CreateTopics timed out\n");
                return 1;
        }
        if (rd_kafka_event_error(ev)) {
                fprintf(stderr, "benchtool: CreateTopics: %s\n", rd_kafka_event_error_string(ev));
                return 1;
        }
        size_t cnt = 0;
        const rd_kafka_topic_result_t **res =
                rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &cnt);
        for (size_t i = 0; i < cnt; i++) {
                rd_kafka_resp_err_t e = rd_kafka_topic_result_error(res[i]);
                if (e && e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
                        fprintf(stderr, "benchtool: topic %s: %s\n", rd_kafka_topic_result_name(res[i]),
                                rd_kafka_topic_result_error_string(res[i]));
                        rc = 1;
                }
        }
        rd_kafka_event_destroy(ev);
        rd_kafka_AdminOptions_destroy(opt);
        rd_kafka_NewTopic_destroy_array(nt, (size_t)n);
        free(nt);
        rd_kafka_queue_destroy(q);
        rd_kafka_destroy(rk);
        return rc;
}

/* The number of partitions of topic, 0 while it is unknown. */
static int partition_count(rd_kafka_t *rk, const char *topic)
{
        const struct rd_kafka_metadata *md = NULL;
        rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
        int n = 0;
        if (rd_kafka_metadata(rk, 0, rkt, &md, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
                if (md->topic_cnt == 1 && md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR)
                        n = md->topics[0].partition_cnt;
                rd_kafka_metadata_destroy(md);
        }
        rd_kafka_topic_destroy(rkt);
        return n;
}

/*
 * Whether a wait for topic has to end, with its exit code: past the
 * deadline (1), or the process pid it waits on has exited (2, looked at
 * every 100 polls); where it got to (where, and n printed as "N 0") is
 * said first. 0: wait on.
 */
static int wait_over(const char *topic, double deadline, pid_t pid, unsigned long *polls,
                     int64_t n, const char *where, const char *why)
{
        if (now_s(CLOCK_MONOTONIC) > deadline) {
                fprintf(stderr, "benchtool: %s: %s at the deadline%s\n", topic, where, why);
                printf("%" PRId64 " 0\n", n);
                return 1;
        }
        if (pid > 0 && (++*polls % 100) == 0 && kill(pid, 0) != 0 && errno == ESRCH) {
                fprintf(stderr, "benchtool: %s: process %ld exited at %s\n", topic, (long)pid, where);
                printf("%" PRId64 " 0\n", n);
                return 2;
        }
        return 0;
}

static int cmd_wait(int argc, char **argv)
{
        if (argc < 5) {
                fprintf(stderr, "usage: benchtool wait BROKERS TOPIC COUNT TIMEOUT_S [PID]\n");
                return 3;
        }
        int64_t want = strtoll(argv[3], NULL, 10);
        double deadline = now_s(CLOCK_MONOTONIC) + atof(argv[4]);
        pid_t pid = argc > 5 ? (pid_t)atol(argv[5]) : 0;
        rd_kafka_t *rk = kafka_client(argv[1], RD_KAFKA_CONSUMER, NULL, NULL);
        int64_t hi = -1;
        double first_ms = 0;
        int parts = 0;
        unsigned long polls = 0;
        for (;;) {
                rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION;
                if (parts == 0)
                        parts = partition_count(rk, argv[2]);
                if (parts > 0) {
                        int64_t sum = 0, lo, h;
                        e = RD_KAFKA_RESP_ERR_NO_ERROR;
                        for (int p = 0; p < parts && !e; p++) {
                                e = rd_kafka_query_watermark_offsets(rk, argv[2], p, &lo, &h, 5000);
                                sum += h;
                        }
                        if (!e)
                                hi = sum;
                        if (!e && sum > 0 && first_ms == 0)
                                first_ms = now_s(CLOCK_REALTIME) * 1000.0;
                }
                if (e == RD_KAFKA_RESP_ERR_NO_ERROR && hi >= want)
                        break;
                char where[96], why[96];
                snprintf(where, sizeof(where), "end offset %" PRId64 " of %" PRId64, hi, want);
                snprintf(why, sizeof(why), " (%s)", e ? rd_kafka_err2str(e) : "ok");
                int over = wait_over(argv[2], deadline, pid, &polls, hi, where, why);
                if (over)
                        return over;
                usleep(e ? 50000 : 1000);
        }
        printf("%" PRId64 " %.0f %.0f\n", hi, now_s(CLOCK_REALTIME) * 1000.0, first_ms);
        rd_kafka_destroy(rk);
        return 0;
}

/* Arrival time (epoch us) minus the payload's "t0" (epoch us), in ms; NAN
 * without one. */
static double arrival_latency_ms(const rd_kafka_message_t *m, double now_us)
{
        const char *v = m->payload, *t;
        if (v == NULL || m->len < 8)
                return NAN;
        char buf[64];
        size_t n = m->len < sizeof(buf) - 1 ? m->len : sizeof(buf) - 1;
        memcpy(buf, v, n);
        buf[n] = '\0';
        if ((t = strstr(buf, "\"t0\":")) == NULL)
                return NAN;
        return (now_us - atof(t + 5)) / 1000.0;
}

static int cmd_consume(int argc, char **argv)
{
        if (argc < 6) {
                fprintf(stderr, "usage: benchtool consume BROKERS TOPIC COUNT TIMEOUT_S ISOLATION [PID [LATFILE]]\n");
                return 3;
        }
        int64_t want = strtoll(argv[3], NULL, 10), got = 0;
        double deadline = now_s(CLOCK_MONOTONIC) + atof(argv[4]);
        pid_t pid = argc > 6 ? (pid_t)atol(argv[6]) : 0;
        FILE *lat = NULL;
        if (argc > 7 && (lat = fopen(argv[7], "w")) == NULL) {
                fprintf(stderr, "benchtool: %s: %s\n", argv[7], strerror(errno));
                return 3;
        }
        /* Fetches return as soon as anything is visible (fetch.wait.max.ms
         * only bounds an empty fetch): a short one keeps the clock honest
         * should the broker not wake a waiting read_committed fetch when
         * the stable offset moves. */
        const char *settings[] = {
                "group.id", "benchtool", "isolation.level", argv[5], "enable.auto.commit", "false",
                "fetch.wait.max.ms", "5", "enable.partition.eof", "false", NULL,
        };
        rd_kafka_t *rk = kafka_client(argv[1], RD_KAFKA_CONSUMER, settings, NULL);
        rd_kafka_topic_partition_list_t *tp = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(tp, argv[2], 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
        rd_kafka_resp_err_t e = rd_kafka_assign(rk, tp);
        rd_kafka_topic_partition_list_destroy(tp);
        if (e) {
                fprintf(stderr, "benchtool: assign %s: %s\n", argv[2], rd_kafka_err2str(e));
                return 3;
        }
        double first_ms = 0, last_ms = 0;
        unsigned long polls = 0;
        const char *trace_path = getenv("BENCH_CONSUME_TRACE");
        FILE *trace = trace_path && *trace_path ? fopen(trace_path, "w") : NULL;
        while (got < want) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 10);
                if (m) {
                        if (!m->err) {
                                double t = now_s(CLOCK_REALTIME);
                                last_ms = t * 1000.0;
                                if (got++ == 0)
                                        first_ms = last_ms;
                                if (trace && (got % 10000 == 0 || got == want))
                                        fprintf(trace, "%.0f %" PRId64 "\n", last_ms, got);
                                if (lat) {
                                        double l = arrival_latency_ms(m, t * 1e6);
                                        if (!isnan(l))
                                                fprintf(lat, "%.3f\n", l);
                                }
                        } else if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF &&
                                   m->err != RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) {
                                fprintf(stderr, "benchtool: consume %s: %s\n", argv[2], rd_kafka_message_errstr(m));
                        }
                        rd_kafka_message_destroy(m);
                }
                char where[96];
                snprintf(where, sizeof(where), "%" PRId64 " of %" PRId64 " messages", got, want);
                int over = wait_over(argv[2], deadline, pid, &polls, got, where, "");
                if (over)
                        return over;
        }
        if (lat)
                fclose(lat);
        if (trace)
                fclose(trace);
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        printf("%" PRId64 " %.0f %.0f %.2f\n", got, last_ms, first_ms,
               (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
        rd_kafka_consumer_close(rk);
        rd_kafka_destroy(rk);
        return 0;
}

static int cmd_confirmed(int argc, char **argv)
{
        if (argc < 5) {
                fprintf(stderr, "usage: benchtool confirmed CONNINFO SLOT LSN TIMEOUT_S\n");
                return 3;
        }
        PGconn *c = PQconnectdb(argv[1]);
        if (PQstatus(c) != CONNECTION_OK) {
                fprintf(stderr, "benchtool: %s", PQerrorMessage(c));
                return 3;
        }
        const char *params[] = {argv[2], argv[3]};
        double deadline = now_s(CLOCK_MONOTONIC) + atof(argv[4]), sent_ms = 0;
        char pid[32] = "0";
        for (;;) {
                PGresult *r = PQexecParams(c,
                                           "SELECT s.confirmed_flush_lsn >= $2::pg_lsn, "
                                           "coalesce(r.sent_lsn >= $2::pg_lsn, false), "
                                           "coalesce(s.active_pid, 0) FROM pg_replication_slots s "
                                           "LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid "
                                           "WHERE s.slot_name = $1",
                                           2, NULL, params, NULL, NULL, 0);
                double t = now_s(CLOCK_REALTIME) * 1000.0;
                if (PQresultStatus(r) != PGRES_TUPLES_OK) {
                        fprintf(stderr, "benchtool: %s", PQerrorMessage(c));
                        return 3;
                }
                if (PQntuples(r) == 1) {
                        if (strcmp(PQgetvalue(r, 0, 2), "0") != 0)
                                snprintf(pid, sizeof(pid), "%s", PQgetvalue(r, 0, 2));
                        if (sent_ms == 0 && strcmp(PQgetvalue(r, 0, 1), "t") == 0)
                                sent_ms = t;
                        if (strcmp(PQgetvalue(r, 0, 0), "t") == 0) {
                                printf("%.0f %.0f %s\n", t, sent_ms ? sent_ms : t, pid);
                                PQclear(r);
                                PQfinish(c);
                                return 0;
                        }
                }
                PQclear(r);
                if (now_s(CLOCK_MONOTONIC) > deadline) {
                        fprintf(stderr, "benchtool: slot %s did not confirm %s in time\n", argv[2], argv[3]);
                        PQfinish(c);
                        return 1;
                }
                usleep(5000);
        }
}

/* The 10 ms tick schedule of load and produce: *due is how many events are
 * owed by the end of the coming tick; sleep until the tick after it. */
typedef struct {
        double rate;
        int64_t total;
        struct timespec start, next;
        unsigned long late;
} sched_t;

static void sched_init(sched_t *s, double rate, double secs)
{
        s->rate = rate;
        s->total = (int64_t)(rate * secs + 0.5);
        s->late = 0;
        clock_gettime(CLOCK_MONOTONIC, &s->start);
        s->next = s->start;
}

static int64_t sched_due(const sched_t *s)
{
        double el = (double)(s->next.tv_sec - s->start.tv_sec) + (double)(s->next.tv_nsec - s->start.tv_nsec) / 1e9;
        int64_t due = (int64_t)(s->rate * (el + 0.010));
        return due > s->total ? s->total : due;
}

static void sched_sleep(sched_t *s)
{
        s->next.tv_nsec += 10 * 1000 * 1000;
        if (s->next.tv_nsec >= 1000000000L) {
                s->next.tv_nsec -= 1000000000L;
                s->next.tv_sec++;
        }
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > s->next.tv_sec || (now.tv_sec == s->next.tv_sec && now.tv_nsec > s->next.tv_nsec))
                s->late++;
        else
                clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &s->next, NULL);
}

static void sched_report(const sched_t *s, int64_t sent)
{
        struct timespec end;
        clock_gettime(CLOCK_MONOTONIC, &end);
        printf("%" PRId64 " %.3f %lu\n", sent,
               (double)(end.tv_sec - s->start.tv_sec) + (double)(end.tv_nsec - s->start.tv_nsec) / 1e9, s->late);
}

static volatile sig_atomic_t stop_load;
static void on_signal(int sig) { (void)sig; stop_load = 1; }

static int cmd_load(int argc, char **argv)
{
        if (argc < 5) {
                fprintf(stderr, "usage: benchtool load CONNINFO AGGREGATETYPE RATE SECONDS\n");
                return 3;
        }
        double rate = atof(argv[3]), secs = atof(argv[4]);
        PGconn *c = PQconnectdb(argv[1]);
        if (PQstatus(c) != CONNECTION_OK) {
                fprintf(stderr, "benchtool: %s", PQerrorMessage(c));
                return 3;
        }
        /* The same ~250-byte event as tests/bench/sql (bench_payload). */
        PGresult *r = PQprepare(c, "ins",
                                "INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload) "
                                "SELECT gen_random_uuid(), $1, 'order-' || g, 'OrderPlaced', bench_payload(g) "
                                "FROM generate_series($2::bigint, $3::bigint) g",
                                3, NULL);
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
                fprintf(stderr, "benchtool: prepare: %s", PQerrorMessage(c));
                return 3;
        }
        PQclear(r);
        signal(SIGTERM, on_signal);
        signal(SIGINT, on_signal);

        sched_t s;
        int64_t sent = 0;
        sched_init(&s, rate, secs);
        while (sent < s.total && !stop_load) {
                int64_t due = sched_due(&s);
                if (due > sent) {
                        char a[24], b[24];
                        snprintf(a, sizeof(a), "%" PRId64, sent + 1);
                        snprintf(b, sizeof(b), "%" PRId64, due);
                        const char *vals[3] = {argv[2], a, b};
                        r = PQexecPrepared(c, "ins", 3, vals, NULL, NULL, 0);
                        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
                                fprintf(stderr, "benchtool: insert: %s", PQerrorMessage(c));
                                return 1;
                        }
                        PQclear(r);
                        sent = due;
                }
                sched_sleep(&s);
        }
        sched_report(&s, sent);
        PQfinish(c);
        return stop_load ? 1 : 0;
}

static int delivery_failed;
static void produce_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
        (void)rk;
        (void)opaque;
        if (m->err && !delivery_failed) {
                fprintf(stderr, "benchtool: delivery failed: %s\n", rd_kafka_err2str(m->err));
                delivery_failed = 1;
        }
}

static FILE *stats_out;
static int stats_to_file(rd_kafka_t *rk, char *json, size_t len, void *opaque)
{
        (void)rk;
        (void)opaque;
        fwrite(json, 1, len, stats_out);
        fputc('\n', stats_out);
        fflush(stats_out);
        return 0;
}

static int cmd_produce(int argc, char **argv)
{
        if (argc < 5) {
                fprintf(stderr, "usage: benchtool produce BROKERS TOPIC RATE SECONDS\n");
                return 3;
        }
        /* The relay's producer settings. */
        static const char *const base[] = {
                "acks", "all", "enable.idempotence", "true", "linger.ms", "5",
                "compression.type", "none", "partitioner", "murmur2_random",
        };
        /* BENCH_PRODUCE_CONF: more "name=value" pairs, blank-separated, after
         * (so over) those; BENCH_STATS_FILE: librdkafka's statistics, one
         * JSON object a line, at statistics.interval.ms. */
        const char *settings[64];
        size_t ns = 0;
        for (; ns < sizeof(base) / sizeof(base[0]); ns++)
                settings[ns] = base[ns];
        static char extra[1024];
        const char *ev = getenv("BENCH_PRODUCE_CONF");
        snprintf(extra, sizeof(extra), "%s", ev ? ev : "");
        for (char *sv = NULL, *tok = strtok_r(extra, " ", &sv); tok && ns + 3 < 64; tok = strtok_r(NULL, " ", &sv)) {
                char *eq = strchr(tok, '=');
                if (!eq) {
                        fprintf(stderr, "benchtool: BENCH_PRODUCE_CONF: %s is not name=value\n", tok);
                        return 3;
                }
                *eq = '\0';
                settings[ns++] = tok;
                settings[ns++] = eq + 1;
        }
        settings[ns] = NULL;
        const char *sf = getenv("BENCH_STATS_FILE");
        if (sf && *sf) {
                stats_out = fopen(sf, "w");
                if (!stats_out) {
                        fprintf(stderr, "benchtool: %s: %s\n", sf, strerror(errno));
                        return 3;
                }
                client_stats = stats_to_file;
        }
        rd_kafka_t *rk = kafka_client(argv[1], RD_KAFKA_PRODUCER, settings, produce_dr);
        signal(SIGTERM, on_signal);
        signal(SIGINT, on_signal);

        sched_t s;
        int64_t sent = 0;
        sched_init(&s, atof(argv[3]), atof(argv[4]));
        while (sent < s.total && !stop_load && !delivery_failed) {
                int64_t due = sched_due(&s);
                for (; sent < due; sent++) {
                        /* bench_payload's shape and size, and the relay's
                         * key (aggregate id) and headers (id, type). */
                        int64_t g = sent + 1;
                        char key[32], id[48], val[512];
                        struct timespec rt;
                        clock_gettime(CLOCK_REALTIME, &rt);
                        long long t0 = (long long)rt.tv_sec * 1000000LL + rt.tv_nsec / 1000;
                        int kl = snprintf(key, sizeof(key), "order-%" PRId64, g);
                        snprintf(id, sizeof(id), "00000000-0000-4000-8000-%012" PRId64, g);
                        int vl = snprintf(val, sizeof(val),
                                          "{\"t0\": %lld, \"seq\": %" PRId64 ", \"note\": \"outbox-relay bench\", "
                                          "\"order\": {\"id\": \"ord-%010" PRId64 "\", \"lines\": [{\"qty\": %d, "
                                          "\"sku\": \"SKU-%" PRId64 "\", \"price\": 19.99}, {\"qty\": 1, \"sku\": "
                                          "\"SKU-%" PRId64 "\", \"price\": 4.5}], \"total\": %" PRId64 ".%02d, "
                                          "\"currency\": \"EUR\", \"customer\": \"cust-%06" PRId64 "\"}}",
                                          t0, g, g, (int)(1 + g % 5), g % 9973, g % 7919, g % 1000,
                                          (int)(g % 100), g % 100000);
                        rd_kafka_resp_err_t e = rd_kafka_producev(
                                rk, RD_KAFKA_V_TOPIC(argv[2]), RD_KAFKA_V_KEY(key, (size_t)kl),
                                RD_KAFKA_V_VALUE(val, (size_t)vl), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                RD_KAFKA_V_HEADER("id", id, -1), RD_KAFKA_V_HEADER("type", "OrderPlaced", -1),
                                RD_KAFKA_V_END);
                        if (e) {
                                fprintf(stderr, "benchtool: produce: %s\n", rd_kafka_err2str(e));
                                return 1;
                        }
                }
                rd_kafka_poll(rk, 0);
                sched_sleep(&s);
        }
        rd_kafka_flush(rk, 60000);
        int left = rd_kafka_outq_len(rk);
        rd_kafka_destroy(rk);
        if (left || delivery_failed) {
                fprintf(stderr, "benchtool: %d events not delivered\n", left);
                return 1;
        }
        sched_report(&s, sent);
        return stop_load ? 1 : 0;
}

static int rtt_done;
static double rtt_stats_ms = -1;
static void rtt_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
        (void)rk;
        (void)opaque;
        if (m->err) {
                fprintf(stderr, "benchtool: delivery failed: %s\n", rd_kafka_err2str(m->err));
                delivery_failed = 1;
        }
        rtt_done = 1;
}

/* The first broker's "rtt": {... "avg": N ...} (microseconds), crudely: the
 * statistics are one JSON object and this is the only field read. */
static int rtt_stats(rd_kafka_t *rk, char *json, size_t len, void *opaque)
{
        (void)rk;
        (void)len;
        (void)opaque;
        const char *b = strstr(json, "\"brokers\"");
        const char *r = b ? strstr(b, "\"rtt\"") : NULL;
        const char *a = r ? strstr(r, "\"avg\":") : NULL;
        if (a && atof(a + 6) > 0)
                rtt_stats_ms = atof(a + 6) / 1000.0;
        return 0;
}

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

static int cmd_rtt(int argc, char **argv)
{
        if (argc < 4) {
                fprintf(stderr, "usage: benchtool rtt BROKERS TOPIC COUNT\n");
                return 3;
        }
        static const char *const settings[] = {
                "acks", "all", "enable.idempotence", "true", "linger.ms", "0",
                "statistics.interval.ms", "100", NULL,
        };
        int n = atoi(argv[3]);
        if (n < 1)
                n = 1;
        client_stats = rtt_stats;
        rd_kafka_t *rk = kafka_client(argv[1], RD_KAFKA_PRODUCER, settings, rtt_dr);
        double *t = calloc((size_t)n, sizeof(*t));
        for (int i = 0; i <= n && !delivery_failed; i++) {
                double t0 = now_s(CLOCK_MONOTONIC);
                rtt_done = 0;
                if (rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(argv[2]), RD_KAFKA_V_VALUE("rtt", 3),
                                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END)) {
                        fprintf(stderr, "benchtool: produce failed\n");
                        return 1;
                }
                while (!rtt_done)
                        rd_kafka_poll(rk, 1);
                /* The first one also connects and fetches metadata: not counted. */
                if (i > 0)
                        t[i - 1] = (now_s(CLOCK_MONOTONIC) - t0) * 1000.0;
        }
        /* Wait for one statistics round after the messages. */
        for (int i = 0; i < 3; i++)
                rd_kafka_poll(rk, 100);
        rd_kafka_destroy(rk);
        if (delivery_failed)
                return 1;
        qsort(t, (size_t)n, sizeof(*t), cmp_double);
        printf("%.2f %.2f %.2f\n", t[n / 2], t[(n * 9) / 10], rtt_stats_ms);
        free(t);
        return 0;
}

static int cmd_mock(int argc, char **argv)
{
        if (argc < 4) {
                fprintf(stderr, "usage: benchtool mock RTT_MS PARTITIONS TOPIC...\n");
                return 3;
        }
        rd_kafka_t *rk = kafka_client("", RD_KAFKA_PRODUCER, NULL, NULL);
        rd_kafka_mock_cluster_t *mc = rd_kafka_mock_cluster_new(rk, 1);
        if (mc == NULL) {
                fprintf(stderr, "benchtool: could not create the mock cluster\n");
                return 3;
        }
        for (int i = 3; i < argc; i++)
                if (rd_kafka_mock_topic_create(mc, argv[i], atoi(argv[2]), 1)) {
                        fprintf(stderr, "benchtool: could not create mock topic %s\n", argv[i]);
                        return 3;
                }
        rd_kafka_mock_broker_set_rtt(mc, 1, atoi(argv[1]));
        printf("%s\n", rd_kafka_mock_cluster_bootstraps(mc));
        fflush(stdout);
        signal(SIGTERM, on_signal);
        signal(SIGINT, on_signal);
        while (!stop_load)
                usleep(100000);
        rd_kafka_mock_cluster_destroy(mc);
        rd_kafka_destroy(rk);
        return 0;
}

static int cmd_spread(int argc, char **argv)
{
        if (argc < 5) {
                fprintf(stderr, "usage: benchtool spread BROKERS TOPIC EVENTS PRODUCERS [MAX_IN_FLIGHT]\n");
                return 3;
        }
        int64_t n = strtoll(argv[3], NULL, 10);
        int np = atoi(argv[4]);
        if (np < 1 || np > 64)
                np = 1;
        char qmax[16];
        snprintf(qmax, sizeof(qmax), "%d", 10000 / np);
        const char *settings[] = {
                "acks", "all", "enable.idempotence", "true", "linger.ms", "5",
                "max.in.flight.requests.per.connection", argc > 5 ? argv[5] : "1",
                "queue.buffering.max.messages", qmax, "partitioner", "murmur2_random", NULL,
        };
        rd_kafka_t *rk[64];
        rd_kafka_topic_t *rkt[64];
        for (int i = 0; i < np; i++) {
                rk[i] = kafka_client(argv[1], RD_KAFKA_PRODUCER, settings, produce_dr);
                rkt[i] = rd_kafka_topic_new(rk[i], argv[2], NULL);
        }
        int parts = partition_count(rk[0], argv[2]);
        if (parts < 1) {
                fprintf(stderr, "benchtool: topic %s has no partitions\n", argv[2]);
                return 1;
        }
        double t0 = now_s(CLOCK_MONOTONIC);
        for (int64_t g = 1; g <= n && !delivery_failed; g++) {
                char key[32], val[512];
                int kl = snprintf(key, sizeof(key), "order-%" PRId64, g);
                int vl = snprintf(val, sizeof(val),
                                  "{\"t0\": 0, \"seq\": %" PRId64 ", \"note\": \"outbox-relay bench\", "
                                  "\"order\": {\"id\": \"ord-%010" PRId64 "\", \"lines\": [{\"qty\": %d, "
                                  "\"sku\": \"SKU-%" PRId64 "\", \"price\": 19.99}, {\"qty\": 1, \"sku\": "
                                  "\"SKU-%" PRId64 "\", \"price\": 4.5}], \"total\": %" PRId64 ".%02d, "
                                  "\"currency\": \"EUR\", \"customer\": \"cust-%06" PRId64 "\"}}",
                                  g, g, (int)(1 + g % 5), g % 9973, g % 7919, g % 1000, (int)(g % 100), g % 100000);
                int32_t p = rd_kafka_msg_partitioner_murmur2_random(rkt[0], key, (size_t)kl, parts, NULL, NULL);
                int i = p % np;
                for (;;) {
                        rd_kafka_resp_err_t e = rd_kafka_producev(
                                rk[i], RD_KAFKA_V_TOPIC(argv[2]), RD_KAFKA_V_PARTITION(p),
                                RD_KAFKA_V_KEY(key, (size_t)kl), RD_KAFKA_V_VALUE(val, (size_t)vl),
                                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADER("id", "x", -1),
                                RD_KAFKA_V_HEADER("type", "OrderPlaced", -1), RD_KAFKA_V_END);
                        if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                                rd_kafka_poll(rk[i], 1);
                                continue;
                        }
                        if (e) {
                                fprintf(stderr, "benchtool: produce: %s\n", rd_kafka_err2str(e));
                                return 1;
                        }
                        break;
                }
                if ((g & 255) == 0)
                        for (int j = 0; j < np; j++)
                                rd_kafka_poll(rk[j], 0);
        }
        for (int i = 0; i < np; i++)
                rd_kafka_flush(rk[i], 120000);
        double ms = (now_s(CLOCK_MONOTONIC) - t0) * 1000.0;
        int left = 0;
        for (int i = 0; i < np; i++) {
                left += rd_kafka_outq_len(rk[i]);
                rd_kafka_topic_destroy(rkt[i]);
                rd_kafka_destroy(rk[i]);
        }
        if (left || delivery_failed) {
                fprintf(stderr, "benchtool: %d events not delivered\n", left);
                return 1;
        }
        printf("%.0f\n", ms);
        return 0;
}

int main(int argc, char **argv)
{
        if (argc >= 2 && strcmp(argv[1], "spread") == 0)
                return cmd_spread(argc - 1, argv + 1);
        if (argc >= 2 && strcmp(argv[1], "rtt") == 0)
                return cmd_rtt(argc - 1, argv + 1);
        if (argc >= 2 && strcmp(argv[1], "mock") == 0)
                return cmd_mock(argc - 1, argv + 1);
        if (argc >= 2 && strcmp(argv[1], "topics") == 0)
                return cmd_topics(argc - 1, argv + 1);
        if (argc >= 2 && strcmp(argv[1], "wait") == 0)
                return cmd_wait(argc - 1, argv + 1);
        if (argc >= 2 && strcmp(argv[1], "consume") == 0)
                return cmd_consume(argc - 1, argv + 1);
        if (argc >= 2 && strcmp(argv[1], "confirmed") == 0)
                return cmd_confirmed(argc - 1, argv + 1);
        if (argc >= 2 && strcmp(argv[1], "load") == 0)
                return cmd_load(argc - 1, argv + 1);
        if (argc >= 2 && strcmp(argv[1], "produce") == 0)
                return cmd_produce(argc - 1, argv + 1);
        fprintf(stderr, "usage: benchtool topics|wait|consume|confirmed|load|produce ... (see the comment at the top of benchtool.c)\n");
        return 3;
}
