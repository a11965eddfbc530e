/*
 * 0208-cluster-faults.c - broker faults on a real 3-node Kafka cluster
 * (tests/env/cluster: KRaft, every node broker and controller, topics with 3
 * replicas, min.insync.replicas=2) while the relay streams from the test
 * PostgreSQL and four writers commit all along:
 *   - kill -9 of the leader of a partition, then a restart of that node;
 *   - a controlled shutdown (SIGTERM) of the leader of a partition: the
 *     controller moves its leaderships away before it stops; then a restart;
 *   - the leader of a partition frozen (SIGSTOP) for longer than the
 *     broker session timeout (9 s: the controller fences it and elects new
 *     leaders while it cannot notice; its connections stay open, so what
 *     was in flight to it waits for the request timeout), events checked
 *     to flow while it is still frozen, then continued;
 *   - the log directory of the leader of a partition removed under it (the
 *     broker halts on its own), then the node formatted and started again
 *     (it re-replicates everything from the others).
 * After each restart the controller's preferred leader election (every 5 s
 * in this cluster) moves leadership back to the restarted node: a second,
 * controlled, leader change under load.
 *
 * After each fault, and again once the node is back: the relay confirms
 * past the WAL position of that moment and Kafka holds the events committed
 * by then (events keep arriving; see check_flow). At the end, what Kafka holds is checked
 * against the committed versions (h_workload_verify): 0 missing, 0 out of
 * order, keys/partitions/headers/values as written; duplicates (a session
 * restarted and resent from the slot) are reported on the FIGURES line.
 *
 * The relay runs with its own producer defaults (no in-flight or
 * idempotence override here), at log.level=debug with kafka.debug=eos,topic:
 * its logs are kept in a folder of their own (always with
 * RELAY_TEST_KEEP_RELAY_LOGS set), and the nodes' logs moved to the
 * environment's log directory, unless the test passes; a missing event
 * prints the relay log lines that may explain it.
 *
 * Short variant (CI): each fault once, a 12 s freeze. Long
 * (RELAY_FAULTS_LONG=1): three rounds of every fault, each round with a 5 s
 * freeze (shorter than the session timeout: the leader stalls but keeps its
 * partitions) as well as a 15 s one, on varying partitions.
 *
 * The test starts the cluster (RELAY_TEST_CLUSTER_CMD, tests/env/cluster)
 * and stops it however it ends (faults.h restore command).
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "faults/faults.h"
#include "harness.h"
#include "workload.h"

#define PARTITIONS 4
/* broker.session.timeout.ms of the cluster (Kafka's default): a node
 * silent for longer is fenced and its partitions get new leaders. */
#define SESSION_TIMEOUT_MS 9000

typedef enum { F_KILL, F_STOP, F_FREEZE, F_RMDIR } fault_kind_t;

static const char *const fault_names[] = {"kill -9", "controlled shutdown", "freeze",
                                          "log directory removed"};

static const char *g_cluster; /* tests/env/cluster */
static char g_logdir[512];    /* this test's relay logs */
static bool g_passed;
static bool g_keep_relay_logs; /* RELAY_TEST_KEEP_RELAY_LOGS was set by the caller */

/*
 * Run "tests/env/cluster ARGS"; its exit status (-1 when it could not run).
 * With out, the first line of its standard output (caller frees); its
 * standard error goes to the test's, which meson keeps in the test log.
 */
static int cluster(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int cluster(char **out, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        char *args = fx_vfmt(fmt, ap);
        va_end(ap);
        char *cmd = fx_fmt("bash '%s' %s </dev/null", g_cluster, args);
        fflush(stdout);
        FILE *f = popen(cmd, "r");
        char line[1024] = "";
        char *first = NULL;
        if (f) {
                while (fgets(line, sizeof(line), f))
                        if (!first) {
                                line[strcspn(line, "\n")] = '\0';
                                first = strdup(line);
                        }
        }
        int st = f ? pclose(f) : -1;
        int rc = st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        if (rc != 0)
                tap_diag("tests/env/cluster %s: exit status %d (its messages are on stderr)", args,
                         rc);
        if (out)
                *out = first;
        else
                free(first);
        free(cmd);
        free(args);
        return rc;
}

/* Node leading partition p of topic; 0 when unknown. */
static int leader(const char *topic, int p)
{
        char *s = NULL;
        int n = cluster(&s, "leader '%s' %d", topic, p) == 0 && s ? atoi(s) : 0;
        free(s);
        return n;
}

/* At exit, unless the test passed: the nodes' logs are moved into the
 * environment's log directory before the restore command removes the
 * cluster, and the relay logs stay. */
static void keep_logs_unless_passed(void)
{
        if (g_passed) {
                if (!g_keep_relay_logs)
                        fx_sh("rm -rf '%s'", g_logdir);
                return;
        }
        tap_diag("keeping the logs: relays in %s, nodes in $RELAY_TEST_ENV_DIR/logs/cluster-*",
                 g_logdir);
        cluster(NULL, "down --keep-logs");
}

/* Every relay of this test logs into a folder of its own (as in 0102). */
static void logdir_setup(void)
{
        const char *keep = getenv("RELAY_TEST_KEEP_RELAY_LOGS");
        g_keep_relay_logs = keep && *keep;
        const char *base = getenv("RELAY_TEST_LOGDIR");
        snprintf(g_logdir, sizeof(g_logdir), "%s/0208-%ld", base && *base ? base : "/tmp",
                 (long)getpid());
        if (mkdir(g_logdir, 0755) != 0 && errno != EEXIST)
                tap_bail("could not create %s: %s", g_logdir, strerror(errno));
        setenv("RELAY_TEST_LOGDIR", g_logdir, 1);
        setenv("RELAY_TEST_KEEP_RELAY_LOGS", "1", 1);
}

/* The lines of the relay's logs that can explain a lost or reordered event. */
static void show_relay_logs(void)
{
        char *cmd = fx_fmt("grep -h -E 'WARNING|ERROR|FATAL|librdkafka [0-5] |IDEMPSTATE|ERRSEQ|"
                           "DUPSEQ|desynchron|NOT_LEADER|UNKNOWN_TOPIC|OUT_OF_ORDER|"
                           "DUPLICATE_SEQ|implicit|failed|retrying' '%s'/*.log | head -n 400",
                           g_logdir);
        fflush(stdout);
        FILE *f = popen(cmd, "r");
        char line[1024];
        tap_diag("relay log lines that may explain it (all logs in %s):", g_logdir);
        while (f && fgets(line, sizeof(line), f)) {
                line[strcspn(line, "\n")] = '\0';
                tap_diag("  %s", line);
        }
        if (f)
                pclose(f);
        free(cmd);
}

typedef struct {
        fx_case_t *fc;
        const h_workload_conf_t *wc;
        char topic[2][256];
        int checks;
        double flow_max_s; /* longest wait for a check point's events */
} run_t;

/*
 * Events keep arriving: after a moment of load (2 s), the relay confirms
 * past the WAL position of that moment (Kafka acknowledged, with acks=all,
 * every event committed before it) and, unless a node is frozen, Kafka
 * holds at least as many messages as events were committed by then. One or
 * two test points.
 *
 * Not while a node is frozen: the harness's own librdkafka 2.0.2 client
 * sends its metadata requests to the broker it used last, which may be the
 * frozen one (its connection looks alive), and would time out there until
 * the harness gives up; the final check after the thaw reads everything.
 */
static void check_flow(run_t *rn, const char *what, bool frozen)
{
        h_sleep_ms(2000);
        long long want = fx_committed(rn->fc->c);
        char *lsn = h_pg_value(rn->fc->c, "SELECT pg_current_wal_lsn()");
        int64_t t = h_now_ms();
        int64_t conf_ms = h_pg_wait_confirmed(rn->fc->c, rn->fc->slot, lsn, 180000);
        ok(conf_ms >= 0, "%s: the relay confirms past %s, %lld events committed (%.1f s)", what,
           lsn, want, conf_ms >= 0 ? conf_ms / 1000.0 : -1.0);
        if (!frozen) {
                long long got = h_workload_wait_count(rn->wc, want, 180000);
                ok(got >= want, "%s: Kafka holds at least the %lld events committed by then",
                   what, want);
        }
        double took = (h_now_ms() - t) / 1000.0;
        if (took > rn->flow_max_s)
                rn->flow_max_s = took;
        rn->checks++;
        free(lsn);
}

/* Wait up to 60 s until partition p of topic is led by a node other than n. */
static int wait_leader_moved(const char *topic, int p, int n)
{
        int64_t deadline = h_now_ms() + 60000;
        int l;
        while ((l = leader(topic, p)) == n || l <= 0) {
                if (h_now_ms() > deadline)
                        return l;
                h_sleep_ms(500);
        }
        return l;
}

/* One fault on the leader of partition p of the first topic, and recovery. */
static void fault(run_t *rn, fault_kind_t kind, int p, int freeze_ms)
{
        const char *topic = rn->topic[0];
        int n = leader(topic, p);
        if (n <= 0)
                tap_bail("no leader for %s [%d]", topic, p);
        char *what = kind == F_FREEZE
                             ? fx_fmt("%s %.0f s of node %d (leader of partition %d)",
                                      fault_names[kind], freeze_ms / 1000.0, n, p)
                             : fx_fmt("%s of node %d (leader of partition %d)", fault_names[kind],
                                      n, p);
        tap_diag("--- %s, %d events committed so far ---", what, (int)fx_committed(rn->fc->c));
        int64_t t0 = h_now_ms();
        switch (kind) {
        case F_KILL:
                is_int(cluster(NULL, "kill %d", n), 0, "%s: done", what);
                break;
        case F_STOP:
                is_int(cluster(NULL, "stop %d", n), 0, "%s: it stopped", what);
                break;
        case F_RMDIR:
                is_int(cluster(NULL, "remove-logdir %d", n), 0, "%s: the broker halted by itself",
                       what);
                break;
        case F_FREEZE:
                is_int(cluster(NULL, "freeze %d", n), 0, "%s: SIGSTOP", what);
                h_sleep_ms(freeze_ms);
                if (freeze_ms > SESSION_TIMEOUT_MS) {
                        /* Its connections stay open and silent: what was in
                         * flight to it waits for the request timeout. */
                        char *frozen = fx_fmt("%s, while it is frozen", what);
                        int l = wait_leader_moved(topic, p, n);
                        ok(l > 0 && l != n, "%s: the controller fenced it, partition %d is led by node %d",
                           frozen, p, l);
                        check_flow(rn, frozen, true);
                        free(frozen);
                } else {
                        tap_diag("%s: partition %d still led by node %d (within the session timeout)",
                                 what, p, leader(topic, p));
                }
                is_int(cluster(NULL, "thaw %d", n), 0, "%s: SIGCONT", what);
                break;
        }
        tap_diag("%s: took %.1f s", what, (h_now_ms() - t0) / 1000.0);
        if (kind != F_FREEZE) {
                char *down = fx_fmt("%s, while it is down", what);
                int l = wait_leader_moved(topic, p, n);
                ok(l > 0 && l != n, "%s: partition %d is led by node %d", down, p, l);
                check_flow(rn, down, false);
                free(down);
                int64_t t1 = h_now_ms();
                int rc = cluster(NULL, "start %d", n);
                is_int(rc, 0, "%s: node %d started again", what, n);
                tap_diag("node %d back in %.1f s", n, (h_now_ms() - t1) / 1000.0);
        }
        char *back = fx_fmt("%s, once it is back", what);
        check_flow(rn, back, false);
        int64_t t2 = h_now_ms();
        is_int(cluster(NULL, "wait-preferred 180 '%s' '%s'", rn->topic[0], rn->topic[1]), 0,
               "%s: every partition has 3 in-sync replicas and its preferred leader again "
               "(controlled election)",
               what);
        tap_diag("preferred leaders again after %.1f s", (h_now_ms() - t2) / 1000.0);
        char *after = fx_fmt("%s, after the preferred leader election", what);
        check_flow(rn, after, false);
        free(after);
        free(back);
        free(what);
}

int main(void)
{
        const bool lng = fx_long();
        const int rounds = lng ? 3 : 1;
        int64_t t_start = h_now_ms();

        g_cluster = h_env("RELAY_TEST_CLUSTER_CMD");
        logdir_setup();
        fx_restore_add("bash '%s' down", g_cluster);
        atexit(keep_logs_unless_passed); /* runs before the restore command */

        char *boot = NULL;
        if (cluster(&boot, "up") != 0 || !boot || !*boot)
                tap_bail("could not start the 3-node Kafka cluster (see the messages above)");
        double up_s = (h_now_ms() - t_start) / 1000.0;
        setenv("RELAY_TEST_KAFKA", boot, 1); /* before any harness Kafka call */
        tap_diag("variant: %s, %d round(s); cluster %s up in %.1f s", lng ? "long" : "short",
                 rounds, boot, up_s);
        is_int(h_kafka_broker_count(), 3, "the cluster has 3 brokers");

        fx_case_t fc;
        fx_case_open(&fc, "clusterfaults", "cf");
        h_workload_conf_t wc = {
                .db = fc.db, .suffix = fc.suffix, .writers = 4, .aggregates = 100, .events = 0,
                .max_txn = 10, .pause_ms = 50, .partitions = PARTITIONS,
        };
        h_workload_setup(fc.c, &wc);
        run_t rn = {.fc = &fc, .wc = &wc};
        for (int t = 0; t < H_WORKLOAD_TYPES; t++)
                h_workload_topic(&wc, t, rn.topic[t], sizeof(rn.topic[t]));
        is_int(cluster(NULL, "wait-isr 60 '%s' '%s'", rn.topic[0], rn.topic[1]), 0,
               "the workload's topics have 3 replicas, all in sync, in each of their %d partitions",
               PARTITIONS);

        fx_sets_init(&fc.sets, fc.db, fc.slot, NULL);
        fx_sets_add(&fc.sets, "%s", "log.level=debug");
        fx_sets_add(&fc.sets, "%s", "kafka.debug=eos,topic");
        h_relay_t *r = fx_case_relay(&fc, "relay streams into the 3-node cluster");

        fx_writers_t *ws = fx_writers_start(&wc);
        check_flow(&rn, "before the faults", false);

        int faults = 0;
        unsigned seed = (unsigned)h_now_ms() ^ (unsigned)getpid();
        for (int round = 0; round < rounds; round++) {
                /* Round 0 takes partitions 0..3 in turn; later rounds random ones. */
                int p0 = round == 0 ? 0 : fx_rand(&seed, 0, PARTITIONS - 1);
                fault(&rn, F_KILL, p0 % PARTITIONS, 0);
                fault(&rn, F_STOP, (p0 + 1) % PARTITIONS, 0);
                if (lng) {
                        fault(&rn, F_FREEZE, (p0 + 2) % PARTITIONS, 5000);
                        faults++;
                }
                fault(&rn, F_FREEZE, (p0 + 2) % PARTITIONS, lng ? 15000 : 12000);
                fault(&rn, F_RMDIR, (p0 + 3) % PARTITIONS, 0);
                faults += 4;
        }

        fx_writer_stats_t st;
        fx_writers_stop(ws, false, &st);
        is_int(st.failed_txns, 0, "writers never failed (the database was never affected)");
        long long expected = 0;
        long long got = fx_wait_all_in_kafka(&fc, &wc, 300000, &expected);
        if (!ok(got >= expected, "Kafka holds at least the %lld committed events (%lld)", expected,
                got))
                h_relay_diag_log(r);
        fx_stop_relay(r, "the relay stops cleanly on SIGTERM");
        char *rlog = h_relay_log(r);
        int restarts = fx_count(rlog, "retrying in");
        free(rlog);

        h_verify_t v;
        h_workload_verify(fc.c, &wc, &v);
        fx_check_delivered("cluster faults", &v);
        if (v.missing || v.out_of_order)
                show_relay_logs();
        double total_s = (h_now_ms() - t_start) / 1000.0;
        tap_diag("FIGURES cluster-faults: events=%zu faults=%d duplicates=%zu (%.2f%%) "
                 "missing=%zu out_of_order=%zu session_restarts=%d flow_checks=%d "
                 "longest_flow_wait=%.1fs cluster_up=%.1fs test=%.1fs",
                 v.expected, faults, v.duplicates,
                 v.expected ? 100.0 * (double)v.duplicates / (double)v.expected : 0.0, v.missing,
                 v.out_of_order, restarts, rn.checks, rn.flow_max_s, up_s, total_s);

        h_relay_free(r);
        /* The topics go with the cluster. */
        fx_case_close(&fc, NULL);
        free(boot);
        g_passed = tap_failed == 0;
        if (g_passed)
                cluster(NULL, "down");
        return done_testing();
}
