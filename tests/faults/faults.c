/*
 * faults.c - the fault tests' helpers declared in faults.h: service control,
 * the restore command, queries and writers that survive a database restart.
 * Linked into the harness library; like harness.c it emits no test points
 * (tap.h's counters are per translation unit), only diagnostics and bail-outs.
 *
 * Owns the restore command (one per test process) and its installation.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "faults/faults.h"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/* --- small utilities ---------------------------------------------------- */

bool fx_long(void)
{
        const char *v = getenv("RELAY_FAULTS_LONG");
        return v && *v && strcmp(v, "0") != 0;
}

char *fx_vfmt(const char *fmt, va_list ap)
{
        va_list ap2;
        va_copy(ap2, ap);
        int n = vsnprintf(NULL, 0, fmt, ap2);
        va_end(ap2);
        if (n < 0)
                tap_bail("bad format \"%s\"", fmt);
        char *s = malloc((size_t)n + 1);
        if (!s)
                tap_bail("out of memory");
        vsnprintf(s, (size_t)n + 1, fmt, ap);
        return s;
}

static int fx_notify_seq; /* one socket path per fx_notify_open() */

char *fx_fmt(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        char *s = fx_vfmt(fmt, ap);
        va_end(ap);
        return s;
}

int fx_sh(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        char *cmd = fx_vfmt(fmt, ap);
        va_end(ap);
        char *full = fx_fmt("(%s) </dev/null >/dev/null 2>&1", cmd);
        fflush(stdout);
        int st = system(full);
        free(full);
        free(cmd);
        if (st == -1 || !WIFEXITED(st))
                return -1;
        return WEXITSTATUS(st);
}

int fx_count(const char *hay, const char *needle)
{
        int n = 0;
        size_t l = strlen(needle);
        for (const char *p = hay; l && (p = strstr(p, needle)) != NULL; p += l)
                n++;
        return n;
}

int fx_log_count(const h_relay_t *r, const char *needle)
{
        char *log = h_relay_log(r);
        int n = fx_count(log, needle);
        free(log);
        return n;
}

bool fx_wait_log_n(h_relay_t *r, const char *needle, int n, int timeout_ms)
{
        int64_t deadline = h_now_ms() + timeout_ms;
        for (;;) {
                bool exited = h_relay_wait(r, 0) >= 0;
                if (fx_log_count(r, needle) >= n)
                        return true;
                if (exited || h_now_ms() >= deadline)
                        return false;
                h_sleep_ms(50);
        }
}

int fx_rand(unsigned *seed, int lo, int hi)
{
        uint32_t x = *seed ? (uint32_t)*seed : 2463534242u;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *seed = x;
        return hi > lo ? lo + (int)((x >> 4) % (uint32_t)(hi - lo + 1)) : lo;
}

uint64_t fx_lsn(const char *s)
{
        unsigned hi, lo;
        if (!s || sscanf(s, "%X/%X", &hi, &lo) != 2)
                return 0;
        return ((uint64_t)hi << 32) | lo;
}

/* --- restoring the shared services -------------------------------------- */

/*
 * One shell command that puts back what the test changes (ALTER SYSTEM
 * RESET + reload, a stopped or frozen broker, a stopped PostgreSQL). It runs
 * at exit (tap_bail included) and, detached in a session of its own, when
 * the test is killed by SIGTERM/SIGINT/SIGHUP: meson sends SIGTERM on a
 * timeout and SIGKILL half a second later, too soon to wait for a broker to
 * start. Every part is idempotent and cheap when there is nothing to do.
 */
static char fx_restore_cmd[8192];
static bool fx_restore_installed;

static void fx_restore_run(void)
{
        if (!fx_restore_cmd[0])
                return;
        char *full = fx_fmt("(%s) </dev/null >/dev/null 2>&1", fx_restore_cmd);
        fflush(stdout);
        if (system(full) == -1)
                fprintf(stdout, "# could not run the restore command\n");
        free(full);
}

static void fx_restore_on_signal(int sig)
{
        /* Only async-signal-safe calls: fork a detached shell that outlives
         * the process group meson is about to SIGKILL. */
        if (fx_restore_cmd[0]) {
                pid_t p = fork();
                if (p == 0) {
                        setsid();
                        int fd = open("/dev/null", O_RDWR);
                        if (fd >= 0) {
                                dup2(fd, 0);
                                dup2(fd, 1);
                                dup2(fd, 2);
                        }
                        execl("/bin/sh", "sh", "-c", fx_restore_cmd, (char *)NULL);
                        _exit(127);
                }
        }
        signal(sig, SIG_DFL);
        raise(sig);
}

void fx_restore_add(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        char *cmd = fx_vfmt(fmt, ap);
        va_end(ap);
        size_t have = strlen(fx_restore_cmd);
        if (have + strlen(cmd) + 4 >= sizeof(fx_restore_cmd))
                tap_bail("restore command too long");
        snprintf(fx_restore_cmd + have, sizeof(fx_restore_cmd) - have, "%s%s", have ? "; " : "",
                 cmd);
        free(cmd);
        if (!fx_restore_installed) {
                fx_restore_installed = true;
                atexit(fx_restore_run);
                struct sigaction sa;
                memset(&sa, 0, sizeof(sa));
                sa.sa_handler = fx_restore_on_signal;
                sigemptyset(&sa.sa_mask);
                sigaction(SIGTERM, &sa, NULL);
                sigaction(SIGINT, &sa, NULL);
                sigaction(SIGHUP, &sa, NULL);
        }
}

/* --- PostgreSQL server control -------------------------------------------- */

const char *fx_pg_runas(void)
{
        return geteuid() == 0 ? "cd / && runuser -u postgres --" : "cd / &&";
}

char *fx_pg_ctl_cmd(const char *action)
{
        return fx_fmt("%s '%s/pg_ctl' -D '%s' -l '%s/postgresql.log' -w -t 120 %s", fx_pg_runas(),
                      h_env("RELAY_TEST_PGBIN"), h_env("RELAY_TEST_DATADIR"),
                      h_env("RELAY_TEST_LOGDIR"), action);
}

int fx_pg_ctl(const char *action)
{
        char *cmd = fx_pg_ctl_cmd(action);
        int rc = fx_sh("%s", cmd);
        free(cmd);
        return rc;
}

void fx_restore_pg_running(void)
{
        char *status = fx_pg_ctl_cmd("status");
        char *start = fx_pg_ctl_cmd("start");
        fx_restore_add("%s || %s", status, start);
        free(status);
        free(start);
}

void fx_restore_pg_setting(const char *name)
{
        fx_restore_add("psql -X -q -h '%s' -p '%s' -U '%s' -d postgres -c 'ALTER SYSTEM RESET %s' "
                       "-c 'SELECT pg_reload_conf()'",
                       h_env("RELAY_TEST_PGHOST"), h_env("RELAY_TEST_PGPORT"),
                       h_env("RELAY_TEST_PGUSER"), name);
}

void fx_pg_set(const char *name, const char *value)
{
        fx_restore_pg_setting(name);
        PGconn *c = h_pg_connect("postgres");
        h_pg_exec(c, "ALTER SYSTEM SET %s = '%s'", name, value);
        h_pg_exec(c, "SELECT pg_reload_conf()");
        PQfinish(c);
}

void fx_pg_reset(const char *name)
{
        PGconn *c = h_pg_connect("postgres");
        h_pg_exec(c, "ALTER SYSTEM RESET %s", name);
        h_pg_exec(c, "SELECT pg_reload_conf()");
        PQfinish(c);
}

/* --- queries that survive a server restart ------------------------------------ */

PGconn *fx_pg_try_connect(const char *db)
{
        char *ci = h_pg_conninfo(db);
        char *full = fx_fmt("%s connect_timeout=5 application_name='relay_test_faults'", ci);
        PGconn *c = PQconnectdb(full);
        free(full);
        free(ci);
        if (c && PQstatus(c) == CONNECTION_OK)
                return c;
        PQfinish(c);
        return NULL;
}

char *fx_pg_value_retry(PGconn **cp, const char *db, int timeout_ms, bool *okp,
                        const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        char *sql = fx_vfmt(fmt, ap);
        va_end(ap);
        int64_t deadline = h_now_ms() + timeout_ms;
        char *val = NULL;
        bool good = false;
        for (;;) {
                if (!*cp || PQstatus(*cp) != CONNECTION_OK) {
                        PQfinish(*cp);
                        *cp = fx_pg_try_connect(db);
                }
                if (*cp) {
                        PGresult *r = PQexec(*cp, sql);
                        if (PQresultStatus(r) == PGRES_TUPLES_OK) {
                                good = true;
                                if (PQntuples(r) > 0 && !PQgetisnull(r, 0, 0))
                                        val = strdup(PQgetvalue(r, 0, 0));
                                PQclear(r);
                                break;
                        }
                        PQclear(r);
                        if (PQstatus(*cp) == CONNECTION_OK) {
                                /* An SQL error on a good connection will not go away. */
                                tap_diag("query failed: %s: %s", sql, PQerrorMessage(*cp));
                                break;
                        }
                }
                if (h_now_ms() >= deadline)
                        break;
                h_sleep_ms(200);
        }
        free(sql);
        if (okp)
                *okp = good;
        return val;
}

fx_slot_t fx_slot(PGconn *c, const char *slot)
{
        fx_slot_t s;
        memset(&s, 0, sizeof(s));
        char *v = h_pg_value(c,
                             "SELECT format('%%s %%s %%s %%s', coalesce(active_pid, 0), "
                             "coalesce(confirmed_flush_lsn, '0/0'), pg_current_wal_lsn(), "
                             "coalesce(wal_status, '-')) FROM pg_replication_slots "
                             "WHERE slot_name = '%s'",
                             slot);
        if (v) {
                char conf[32], cur[32];
                if (sscanf(v, "%ld %31s %31s %15s", &s.active_pid, conf, cur, s.wal_status) == 4) {
                        s.exists = true;
                        s.confirmed = fx_lsn(conf);
                        s.current = fx_lsn(cur);
                }
                free(v);
        }
        return s;
}

long long fx_committed(PGconn *c)
{
        char *v = h_pg_value(c, "SELECT coalesce(sum(version), 0) FROM aggregates");
        long long n = v ? atoll(v) : 0;
        free(v);
        return n;
}

/* --- Kafka -------------------------------------------------------------------- */

pid_t fx_kafka_pid(void)
{
        FILE *f = fopen(h_env("RELAY_TEST_KAFKA_PIDFILE"), "r");
        long pid = 0;
        if (f) {
                if (fscanf(f, "%ld", &pid) != 1)
                        pid = 0;
                fclose(f);
        }
        return (pid_t)pid;
}

void fx_restore_kafka_running(void)
{
        const char *pidfile = h_env("RELAY_TEST_KAFKA_PIDFILE");
        fx_restore_add("p=$(cat '%s' 2>/dev/null); [ -z \"$p\" ] || kill -CONT \"$p\"; '%s' start",
                       pidfile, h_env("RELAY_TEST_KAFKA_CMD"));
}

int fx_kafka_ctl(const char *action)
{
        return fx_sh("'%s' %s", h_env("RELAY_TEST_KAFKA_CMD"), action);
}

void fx_delete_workload_topics(const h_workload_conf_t *wc)
{
        char topic[256];
        for (int t = 0; t < H_WORKLOAD_TYPES; t++)
                h_kafka_delete_topic(h_workload_topic(wc, t, topic, sizeof(topic)));
}

/* --- relay settings --------------------------------------------------------- */

void fx_sets_add(fx_sets_t *s, const char *fmt, ...)
{
        if (s->n >= 32)
                tap_bail("too many relay settings");
        va_list ap;
        va_start(ap, fmt);
        s->owned[s->n] = fx_vfmt(fmt, ap);
        va_end(ap);
        s->v[s->n] = s->owned[s->n];
        s->n++;
        s->v[s->n] = NULL;
}

void fx_sets_init(fx_sets_t *s, const char *db, const char *slot, const char *kafka)
{
        memset(s, 0, sizeof(*s));
        char *ci = h_pg_conninfo(db);
        fx_sets_add(s, "postgres.conninfo=%s", ci);
        free(ci);
        fx_sets_add(s, "kafka.bootstrap.servers=%s", kafka ? kafka : h_kafka_bootstrap());
        fx_sets_add(s, "slot.name=%s", slot);
        fx_sets_add(s, "%s", "status.interval.ms=1000");
}

void fx_sets_free(fx_sets_t *s)
{
        for (int i = 0; i < s->n; i++)
                free(s->owned[i]);
        memset(s, 0, sizeof(*s));
}

/* --- one fault case: its database, names, connection and relay settings ------- */

void fx_case_open(fx_case_t *k, const char *name, const char *tag)
{
        memset(k, 0, sizeof(*k));
        k->db = h_pg_create_db(name);
        k->suffix = h_unique_name(tag);
        char *prefix = fx_fmt("slot_%s", tag);
        k->slot = h_unique_name(prefix);
        free(prefix);
        k->c = h_pg_connect(k->db);
}

void fx_outbox_case_open(fx_case_t *k, const char *name, const char *tag, char *topic,
                         size_t topiclen)
{
        fx_case_open(k, name, tag);
        snprintf(topic, topiclen, "outbox.event.%s", k->suffix);
        h_pg_create_outbox(k->c, "outbox");
        fx_sets_init(&k->sets, k->db, k->slot, NULL);
}

int fx_alive_case_open(fx_case_t *k, const char *name, const char *tag, int port_offset,
                       char *topic, size_t topiclen)
{
        int port = h_http_port(port_offset);
        fx_outbox_case_open(k, name, tag, topic, topiclen);
        fx_sets_add(&k->sets, "http.listen=127.0.0.1:%d", port);
        fx_sets_add(&k->sets, "%s", "http.liveness.timeout.ms=1000");
        return port;
}

PGconn *fx_backfill_hold(fx_case_t *k, int lock)
{
        fx_sets_add(&k->sets, "%s", "snapshot.mode=initial");
        fx_sets_add(&k->sets,
                    "snapshot.filter=pg_catalog.pg_advisory_xact_lock_shared(%d)::text = ''",
                    lock);
        PGconn *holder = h_pg_connect(k->db);
        h_pg_exec(holder, "SELECT pg_advisory_lock(%d)", lock);
        return holder;
}

char *fx_eos_case_open(fx_case_t *k, const char *name, const char *tag, char **key)
{
        fx_case_open(k, name, tag);
        h_pg_create_outbox(k->c, "outbox");
        h_pg_exec_file(k->c, "002_publication.sql");
        char *ck_topic = fx_fmt("outbox.relay.checkpoints_%s", k->suffix);
        const char *compact[] = {"cleanup.policy", "compact", NULL};
        h_kafka_create_topic_config(ck_topic, 1, compact);
        char *sysid = h_pg_value(k->c, "SELECT system_identifier::text FROM pg_control_system()");
        *key = fx_fmt("%s/%s", sysid, k->slot);
        free(sysid);
        fx_sets_init(&k->sets, k->db, k->slot, NULL);
        fx_sets_add(&k->sets, "%s", "delivery.mode=exactly-once");
        fx_sets_add(&k->sets, "eos.checkpoint.topic=%s", ck_topic);
        return ck_topic;
}

long fx_slot_count(PGconn *c, const char *slot)
{
        char *v = h_pg_value(c, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '%s'",
                             slot);
        long n = strtol(v, NULL, 10);
        free(v);
        return n;
}

void fx_steady_case_open(fx_case_t *k, const char *name, const char *tag, int pause_ms,
                         h_workload_conf_t *wc)
{
        fx_case_open(k, name, tag);
        *wc = (h_workload_conf_t){
                .db = k->db, .suffix = k->suffix, .writers = 2, .aggregates = 50, .events = 0,
                .max_txn = 5, .pause_ms = pause_ms, .partitions = 2,
        };
        h_workload_setup(k->c, wc);
        fx_sets_init(&k->sets, k->db, k->slot, NULL);
}

void fx_case_close(fx_case_t *k, const h_workload_conf_t *wc)
{
        PQfinish(k->c);
        h_pg_drop_db(k->db);
        if (wc)
                fx_delete_workload_topics(wc);
        fx_sets_free(&k->sets);
        free(k->db);
        free(k->suffix);
        free(k->slot);
        memset(k, 0, sizeof(*k));
}

void fx_held_checkpoint_open(fx_held_checkpoint_t *h, const fx_case_t *k)
{
        const char *compact[] = {"cleanup.policy", "compact", NULL};
        h->topic = fx_fmt("outbox.relay.checkpoints_%s", k->suffix);
        h_kafka_create_topic_config(h->topic, 1, compact);
        h->tid = fx_fmt("%s-other", k->suffix);
        h->producer = h_kafka_txn_producer(h->tid);
        h_kafka_txn_produce(h->producer, h->topic, "other", "0/1");
}

void fx_held_checkpoint_release(fx_held_checkpoint_t *h)
{
        rd_kafka_error_t *e = rd_kafka_commit_transaction(h->producer, 30000);
        if (e)
                tap_bail("commit of %s: %s", h->tid, rd_kafka_error_string(e));
}

void fx_held_checkpoint_close(fx_held_checkpoint_t *h)
{
        rd_kafka_destroy(h->producer);
        h_kafka_delete_topic(h->topic);
        free(h->topic);
        free(h->tid);
        memset(h, 0, sizeof(*h));
}

h_relay_t *fx_notify_relay(fx_notify_t *n, const fx_case_t *k, const char *watchdog_usec)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(n->path, sizeof(n->path), "/tmp/orelay-notify-%ld-%d.sock", (long)getpid(),
                 fx_notify_seq++);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", n->path);
        unlink(n->path);
        n->fd = socket(AF_UNIX, SOCK_DGRAM, 0);
        if (n->fd < 0 || bind(n->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
                tap_bail("notify socket %s: %s", n->path, strerror(errno));
        setenv("NOTIFY_SOCKET", n->path, 1);
        if (watchdog_usec)
                setenv("WATCHDOG_USEC", watchdog_usec, 1);
        h_relay_t *r = h_relay_start(k->sets.v);
        unsetenv("NOTIFY_SOCKET");
        unsetenv("WATCHDOG_USEC");
        return r;
}

int fx_notify_count(fx_notify_t *n, const char *needle, int ms)
{
        char buf[4096];
        int found = 0;
        int64_t end = h_now_ms() + ms;
        do {
                ssize_t len;
                while ((len = recv(n->fd, buf, sizeof(buf) - 1, MSG_DONTWAIT)) > 0) {
                        buf[len] = '\0';
                        if (strstr(buf, needle))
                                found++;
                }
                if (ms > 0)
                        h_sleep_ms(20);
        } while (h_now_ms() < end);
        return found;
}

bool fx_notify_wait_active(fx_notify_t *n, const fx_case_t *k, int ms)
{
        int64_t deadline = h_now_ms() + ms;
        bool active;
        while (!(active = fx_slot(k->c, k->slot).active_pid != 0) && h_now_ms() < deadline)
                fx_notify_count(n, "", 100);
        fx_notify_count(n, "", 500);
        return active;
}

int fx_notify_stop(fx_notify_t *n, h_relay_t *r, int ms)
{
        int rc = -1;
        h_relay_signal(r, SIGTERM);
        for (int64_t end = h_now_ms() + ms; rc == -1 && h_now_ms() < end;) {
                fx_notify_count(n, "", 0);
                rc = h_relay_wait(r, 100);
        }
        return rc;
}

void fx_notify_close(fx_notify_t *n)
{
        if (n->fd >= 0)
                close(n->fd);
        unlink(n->path);
        n->fd = -1;
}

/* --- writers that survive a database restart ---------------------------------- */

static int fx_cmp_int(const void *a, const void *b)
{
        return *(const int *)a - *(const int *)b;
}

static bool fx_writer_exec(PGconn *c, const char *sql, bool tuples)
{
        PGresult *r = PQexec(c, sql);
        bool good = PQresultStatus(r) == (tuples ? PGRES_TUPLES_OK : PGRES_COMMAND_OK) &&
                    (!tuples || PQntuples(r) == 1);
        PQclear(r);
        return good;
}

static void *fx_writer_main(void *arg)
{
        fx_writer_t *w = arg;
        const h_workload_conf_t *conf = w->conf;
        unsigned seed = 15485863u * (unsigned)(w->id + 1) ^ (unsigned)h_now_ms();
        int max_txn = conf->max_txn > 0 ? conf->max_txn : 1;
        PGconn *c = NULL;
        char sql[1024];

        while (!atomic_load(w->stop) &&
               (w->target == 0 || atomic_load(&w->committed) < w->target)) {
                if (!c || PQstatus(c) != CONNECTION_OK) {
                        if (c)
                                atomic_fetch_add(&w->reconnects, 1);
                        PQfinish(c);
                        c = fx_pg_try_connect(conf->db);
                        if (!c) {
                                h_sleep_ms(100);
                                continue;
                        }
                }
                int n = fx_rand(&seed, 1, max_txn);
                if (w->target > 0 && n > w->target - atomic_load(&w->committed))
                        n = w->target - atomic_load(&w->committed);
                int aggs[256];
                if (n > 256)
                        n = 256;
                for (int i = 0; i < n; i++)
                        aggs[i] = fx_rand(&seed, 0, conf->aggregates - 1);
                qsort(aggs, (size_t)n, sizeof(int), fx_cmp_int); /* lock order: no deadlocks */
                bool good = fx_writer_exec(c, "BEGIN", false);
                for (int i = 0; good && i < n; i++) {
                        h_workload_event_sql(sql, sizeof(sql), conf->suffix, aggs[i], w->id);
                        good = fx_writer_exec(c, sql, true);
                }
                if (good)
                        good = fx_writer_exec(c, "COMMIT", false);
                if (good) {
                        atomic_fetch_add(&w->committed, n);
                } else {
                        atomic_fetch_add(&w->failed_txns, 1);
                        if (PQstatus(c) == CONNECTION_OK) {
                                PQclear(PQexec(c, "ROLLBACK"));
                        } else {
                                h_sleep_ms(100);
                                continue;
                        }
                }
                if (conf->pause_ms > 0)
                        h_sleep_ms(conf->pause_ms);
        }
        PQfinish(c);
        return NULL;
}

fx_writers_t *fx_writers_start(const h_workload_conf_t *conf)
{
        fx_writers_t *ws = calloc(1, sizeof(*ws));
        if (!ws)
                tap_bail("out of memory");
        ws->n = conf->writers;
        ws->w = calloc((size_t)ws->n, sizeof(fx_writer_t));
        if (!ws->w)
                tap_bail("out of memory");
        atomic_init(&ws->stop, 0);
        for (int i = 0; i < ws->n; i++) {
                fx_writer_t *w = &ws->w[i];
                w->conf = conf;
                w->id = i;
                w->stop = &ws->stop;
                w->target = conf->events > 0
                                    ? conf->events / ws->n + (i < conf->events % ws->n ? 1 : 0)
                                    : 0;
                atomic_init(&w->committed, 0);
                atomic_init(&w->failed_txns, 0);
                atomic_init(&w->reconnects, 0);
                if (pthread_create(&w->th, NULL, fx_writer_main, w) != 0)
                        tap_bail("could not start a writer thread");
        }
        return ws;
}

int fx_writers_committed(fx_writers_t *ws)
{
        int n = 0;
        for (int i = 0; i < ws->n; i++)
                n += atomic_load(&ws->w[i].committed);
        return n;
}

void fx_writers_stop(fx_writers_t *ws, bool wait_for_target, fx_writer_stats_t *st)
{
        if (!wait_for_target)
                atomic_store(&ws->stop, 1);
        memset(st, 0, sizeof(*st));
        for (int i = 0; i < ws->n; i++) {
                pthread_join(ws->w[i].th, NULL);
                st->committed += atomic_load(&ws->w[i].committed);
                st->failed_txns += atomic_load(&ws->w[i].failed_txns);
                st->reconnects += atomic_load(&ws->w[i].reconnects);
        }
        free(ws->w);
        free(ws);
}

/* --- checks ---------------------------------------------------------------------- */

long long fx_wait_count_in_kafka(PGconn *c, const h_workload_conf_t *wc, int timeout_ms,
                                 long long *expected)
{
        long long want = fx_committed(c);
        if (expected)
                *expected = want;
        return h_workload_wait_count(wc, want, timeout_ms);
}

void fx_diag_verify(const char *what, const h_verify_t *v)
{
        tap_diag("%s: committed %zu, in Kafka %zu, duplicates %zu, missing %zu, out of order %zu",
                 what, v->expected, v->messages, v->duplicates, v->missing, v->out_of_order);
        h_workload_diag(v);
}

/* --- librdkafka's mock cluster ------------------------------------------ */

static rd_kafka_t *g_mock_rk;
static rd_kafka_mock_cluster_t *g_mock;
static FILE *g_mock_dbg;

void fx_quiet_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
        (void)rk;
        (void)level;
        if (g_mock_dbg)
                fprintf(g_mock_dbg, "%lld %s %s\n", (long long)h_now_ms(), fac, buf);
}

static void mock_destroy(void)
{
        if (g_mock)
                rd_kafka_mock_cluster_destroy(g_mock);
        if (g_mock_rk)
                rd_kafka_destroy(g_mock_rk);
        if (g_mock_dbg)
                fclose(g_mock_dbg);
        g_mock = NULL;
        g_mock_rk = NULL;
        g_mock_dbg = NULL;
}

const char *fx_mock_start(int brokers, rd_kafka_mock_cluster_t **out)
{
        char errstr[512];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        rd_kafka_conf_set_log_cb(conf, fx_quiet_log);
        const char *dbg = getenv("RELAY_TEST_MOCK_DEBUG");
        if (dbg && *dbg && (g_mock_dbg = fopen(dbg, "w")) != NULL) {
                setvbuf(g_mock_dbg, NULL, _IOLBF, 0);
                rd_kafka_conf_set(conf, "debug", "mock", errstr, sizeof(errstr));
        }
        g_mock_rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
        if (!g_mock_rk)
                tap_bail("could not create the mock cluster's handle: %s", errstr);
        g_mock = rd_kafka_mock_cluster_new(g_mock_rk, brokers);
        if (!g_mock)
                tap_bail("could not create a mock cluster");
        /* Before any harness Kafka call, so atexit runs this after the
         * harness has destroyed its client. */
        atexit(mock_destroy);
        const char *bootstraps = rd_kafka_mock_cluster_bootstraps(g_mock);
        setenv("RELAY_TEST_KAFKA", bootstraps, 1);
        if (out)
                *out = g_mock;
        return bootstraps;
}

void fx_mock_case_open(fx_case_t *k, const char *name, const char *tag, int brokers,
                       rd_kafka_mock_cluster_t **out)
{
        const char *bootstraps = fx_mock_start(brokers, out);
        fx_case_open(k, name, tag);
        h_pg_create_outbox(k->c, "outbox");
        h_pg_exec_file(k->c, "002_publication.sql");
        fx_sets_init(&k->sets, k->db, k->slot, bootstraps);
}

int fx_mock_linger_case(fx_case_t *k, const char *name, const char *tag, int linger_ms,
                        int http_offset, rd_kafka_mock_cluster_t **out)
{
        fx_mock_case_open(k, name, tag, 1, out);
        char *topic = fx_fmt("outbox.event.%s", k->suffix);
        rd_kafka_resp_err_t e = rd_kafka_mock_topic_create(*out, topic, 1, 1);
        if (e)
                tap_bail("mock topic %s: %s", topic, rd_kafka_err2str(e));
        free(topic);
        int port = h_http_port(http_offset);
        fx_sets_add(&k->sets, "http.listen=127.0.0.1:%d", port);
        fx_sets_add(&k->sets, "kafka.linger.ms=%d", linger_ms);
        fx_sets_add(&k->sets, "%s", "shutdown.timeout.ms=30000");
        return port;
}

char *fx_insert_event(const fx_case_t *k, const char *aggid, char **lsn)
{
        char *id = h_pg_value(k->c,
                              "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                              "VALUES (gen_random_uuid(), '%s', %s, 'T', '{}') RETURNING id",
                              k->suffix, aggid);
        if (lsn)
                *lsn = h_pg_value(k->c, "SELECT pg_current_wal_lsn()");
        return id;
}

void fx_mock_eos(fx_case_t *k, rd_kafka_mock_cluster_t *mock, int ckpt_leader, int coordinator)
{
        char *topic = fx_mock_topic(mock, ckpt_leader, "ckpt_%s", k->suffix);
        char *tid = fx_fmt("tid_%s", k->suffix);
        if (rd_kafka_mock_coordinator_set(mock, "transaction", tid, coordinator))
                tap_bail("could not make broker %d the transaction coordinator", coordinator);
        fx_sets_add(&k->sets, "delivery.mode=exactly-once");
        fx_sets_add(&k->sets, "eos.checkpoint.topic=%s", topic);
        fx_sets_add(&k->sets, "eos.transactional.id=%s", tid);
        free(topic);
        free(tid);
}

/* --- kill -9 loops ---------------------------------------------------------- */

void fx_wait_slice(h_workload_t *wl, h_relay_t *r, int k, int n, int events, unsigned *seed,
                   int max_pause_ms)
{
        int target = (int)((long long)events * k / n) + fx_rand(seed, 0, events / n - 1);
        int64_t deadline = h_now_ms() + 120000;
        while (h_workload_committed(wl) < target && h_now_ms() < deadline)
                h_sleep_ms(10);
        if (!h_relay_wait_log(r, "streaming from replication slot", 60000))
                h_relay_diag_log(r);
        h_sleep_ms(fx_rand(seed, 50, max_pause_ms));
}

bool fx_kill9(h_relay_t *p, const char *what, int k)
{
        h_relay_signal(p, SIGKILL);
        int rc = h_relay_wait(p, 30000);
        if (rc == 128 + SIGKILL)
                return true;
        tap_diag("%s kill %d: it had already exited with %d", what, k + 1, rc);
        h_relay_diag_log(p);
        return false;
}

h_relay_t *fx_crash_loop(h_relay_t *r, const char *const *sets, h_workload_t *wl, int kills,
                         int events, unsigned *seed, fx_kills_t *out)
{
        memset(out, 0, sizeof(*out));
        for (int k = 0; k < kills; k++) {
                bool startup = k > 0 && fx_rand(seed, 0, 3) == 0;
                if (startup)
                        h_sleep_ms(fx_rand(seed, 0, 80));
                else
                        fx_wait_slice(wl, r, k, kills, events, seed, 1500);
                bool streaming = fx_log_count(r, "streaming from replication slot") > 0;
                int committed = h_workload_committed(wl);
                if (fx_kill9(r, "relay", k)) {
                        out->killed++;
                        out->during_load += committed < events;
                        out->in_startup += !streaming;
                } else {
                        out->not_killed++;
                }
                tap_diag("kill %d: %s, %d of %d events committed", k + 1,
                         streaming ? "while streaming" : "during start-up", committed, events);
                h_relay_free(r);
                r = h_relay_start(sets);
        }
        return r;
}

void fx_crash_figures(const char *name, const h_verify_t *v, const fx_kills_t *k,
                      int rolled_back, double written_s, double all_in_kafka_s)
{
        tap_diag("FIGURES %s: events=%zu kills=%d kills_during_load=%d kills_in_startup=%d "
                 "duplicates=%zu (%.1f%%) missing=%zu out_of_order=%zu rolled_back=%d "
                 "written_in=%.1fs all_in_kafka_after=%.1fs",
                 name, v->expected, k->killed, k->during_load, k->in_startup, v->duplicates,
                 v->expected ? 100.0 * (double)v->duplicates / (double)v->expected : 0.0,
                 v->missing, v->out_of_order, rolled_back, written_s, all_in_kafka_s);
}

void fx_mock_workload(struct rd_kafka_mock_cluster_s *mock, const fx_case_t *k, bool spread,
                      h_workload_conf_t *wc)
{
        *wc = (h_workload_conf_t){
                .db = k->db, .suffix = k->suffix, .writers = 2, .aggregates = 50, .events = 0,
                .max_txn = 1, .pause_ms = 10, .partitions = 1,
        };
        h_workload_setup_tables(k->c, wc);
        fx_mock_workload_topics(mock, wc, spread);
}

char *fx_mock_topic(struct rd_kafka_mock_cluster_s *mock, int leader, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        char *topic = fx_vfmt(fmt, ap);
        va_end(ap);
        rd_kafka_resp_err_t e = rd_kafka_mock_topic_create(mock, topic, 1, 1);
        if (!e && leader > 0)
                e = rd_kafka_mock_partition_set_leader(mock, topic, 0, leader);
        if (e)
                tap_bail("mock topic %s: %s", topic, rd_kafka_err2str(e));
        return topic;
}

void fx_mock_workload_topics(struct rd_kafka_mock_cluster_s *mock, const h_workload_conf_t *wc,
                             bool spread)
{
        for (int t = 0; t < H_WORKLOAD_TYPES; t++) {
                char topic[256];
                h_workload_topic(wc, t, topic, sizeof(topic));
                free(fx_mock_topic(mock, spread ? t + 1 : 0, "%s", topic));
        }
}
