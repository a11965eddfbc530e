/*
 * 0125-failover-slot.c - slot.failover: a promotion under load, the relay
 * resuming from the slot the standby synchronized (PostgreSQL 17 and later).
 *
 * On PostgreSQL 17+ (RELAY_TEST_PGVERSION; tests/run runs it on 17 and 18):
 * a primary and a physical standby of the test's own on loopback, the
 * standby made with the low-level backup API (the server bundles of
 * tests/env have no pg_basebackup), streaming through a physical slot with
 * hot_standby_feedback and sync_replication_slots = on; the primary names
 * that slot in synchronized_standby_slots. The relay's slot exists before it
 * starts, made without failover: the relay must turn failover on. Its
 * conninfo names both servers with target_session_attrs=read-write. A
 * writer bumps aggregate versions (1-3 per transaction) through the same
 * kind of conninfo; once the standby has a synchronized copy of the slot,
 * the primary is killed (immediate stop: a crash) and the standby promoted
 * while the writer keeps writing. Twice: first the relay keeps running and
 * must come back on its own; then it is killed with the primary and a new
 * one started after the promotion (it resumes from the copy's position).
 * Either way it must resume from the synchronized slot (no slot created),
 * and Kafka must then hold every event the new primary's outbox holds (none
 * lost), no event it does not hold (an event of a transaction the promotion
 * lost), and each aggregate's versions in order; duplicates are counted and
 * reported (at-least-once). The writer's commits that the crash lost with
 * the asynchronous standby are not failed, as they are the database's loss;
 * their events must not be in Kafka. Before that, on the environment's own
 * server (no synchronized_standby_slots): a relay creates its slot with
 * failover and warns that nothing keeps it behind the standbys.
 *
 * On older servers: slot.failover = true is refused at start (exit 3, the
 * message naming PostgreSQL 17), the slot is not created, and check reports
 * it; the promotion is skipped with the reason.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#define AGGS 40
#define PRIMARY_OFFSET 13
#define STANDBY_OFFSET 14
#define BEFORE_SYNC 300    /* events in Kafka before the standby's copy is awaited */
#define AFTER_PROMOTION 400 /* events the writer commits on the new primary */

static void skip(const char *reason)
{
        printf("ok %d # SKIP %s\n", ++tap_n, reason);
        fflush(stdout);
}

/* The line of check's text output ("status name message; fix") naming name,
 * as a copy (caller frees), or NULL. */
static char *check_line(const char *out, const char *name)
{
        const char *at = out ? strstr(out, name) : NULL;
        if (!at)
                return NULL;
        const char *start = at;
        while (start > out && start[-1] != '\n')
                start--;
        const char *end = strchr(at, '\n');
        size_t n = end ? (size_t)(end - start) : strlen(start);
        char *line = malloc(n + 1);
        if (!line)
                tap_bail("out of memory");
        memcpy(line, start, n);
        line[n] = '\0';
        return line;
}

/* A database with an outbox table, a slot name and the relay's settings
 * with slot.failover = true. */
typedef struct {
        char *db, *slot, *ci;
        PGconn *c;
        char set_conn[512], set_kafka[256], set_slot[128];
        const char *sets[5];
} fo_case_t;

static void fo_open(fo_case_t *k, const char *prefix)
{
        k->db = h_pg_create_db(prefix);
        k->slot = h_unique_name("slot_fo");
        k->c = h_pg_connect(k->db);
        h_pg_create_outbox(k->c, "outbox");
        k->ci = h_pg_conninfo(k->db);
        snprintf(k->set_conn, sizeof(k->set_conn), "postgres.conninfo=%s", k->ci);
        snprintf(k->set_kafka, sizeof(k->set_kafka), "kafka.bootstrap.servers=%s",
                 h_kafka_bootstrap());
        snprintf(k->set_slot, sizeof(k->set_slot), "slot.name=%s", k->slot);
        const char *sets[] = {k->set_conn, k->set_kafka, k->set_slot, "slot.failover=true", NULL};
        memcpy(k->sets, sets, sizeof(sets));
}

static void fo_close(fo_case_t *k)
{
        free(k->ci);
        PQfinish(k->c);
        h_pg_drop_db(k->db);
        free(k->slot);
        free(k->db);
}

/* --- older servers: refused ----------------------------------------------------------- */

static void refused(int version)
{
        fo_case_t k;
        fo_open(&k, "failover_old");
        PGconn *c = k.c;
        const char *slot = k.slot;
        const char *const *sets = k.sets;

        h_relay_t *r = h_relay_start(sets);
        int rc = h_relay_wait(r, 60000);
        char *log = h_relay_log(r);
        bool named = strstr(log, "slot.failover = true needs PostgreSQL 17 or later") != NULL;
        if (!ok(rc == 3 && named,
                "PostgreSQL %d: slot.failover = true stops the relay with exit 3 (got %d) and a "
                "message naming PostgreSQL 17",
                version, rc))
                h_relay_diag_log(r);
        else
                tap_diag("%s", strstr(log, "slot.failover = true needs"));
        free(log);
        h_relay_free(r);
        char *n = h_pg_value(c, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '%s'",
                             slot);
        is_str(n, "0", "the slot was not created");
        free(n);

        char *out = NULL, *err = NULL;
        rc = h_relay_run_cmd("check", NULL, sets, 30000, &out, &err);
        char *line = check_line(out, "postgres.slot.failover");
        if (!ok(rc == 3 && line && strncmp(line, "fail ", 5) == 0 &&
                    strstr(line, "needs PostgreSQL 17 or later"),
                "check exits 3 (got %d) with a failed postgres.slot.failover verdict naming "
                "PostgreSQL 17",
                rc))
                tap_diag("check said:\n%s\n%s", out ? out : "", err ? err : "");
        else
                tap_diag("%s", line);
        free(line);
        free(out);
        free(err);
        fo_close(&k);
}

/* --- 17+, the environment's server: created with failover, and a warning ---------- */

/* The environment's server has no synchronized_standby_slots: the relay
 * creates its slot with failover and warns that nothing guards it. */
static void unguarded(void)
{
        fo_case_t k;
        fo_open(&k, "failover_new");
        PGconn *c = k.c;
        const char *slot = k.slot;
        const char *const *sets = k.sets;
        h_relay_t *r = h_relay_start(sets);
        bool created = h_relay_wait_log(r, "with failover enabled", 60000) &&
                       h_relay_wait_log(r, "streaming from replication slot", 60000);
        char *fo = h_pg_value(c, "SELECT failover FROM pg_replication_slots WHERE slot_name = '%s'",
                              slot);
        if (!ok(created && fo && strcmp(fo, "t") == 0,
                "a new slot is created with failover enabled (failover = %s)", fo ? fo : "none"))
                h_relay_diag_log(r);
        free(fo);
        if (!ok(h_relay_wait_log(r, "synchronized_standby_slots is empty", 0),
                "the relay warns that synchronized_standby_slots is empty"))
                h_relay_diag_log(r);
        h_relay_signal(r, SIGTERM);
        is_int(h_relay_wait(r, 30000), 0, "that relay stops cleanly");
        h_relay_free(r);
        fo_close(&k);
}

/* --- the writer ----------------------------------------------------------------------- */

typedef struct {
        const char *conninfo;
        const char *aggtype;
        atomic_bool stop;
        atomic_int committed; /* events of transactions whose COMMIT succeeded */
        atomic_int failures;  /* statements that failed (connection lost, read-only, ...) */
} writer_t;

static void *writer_main(void *arg)
{
        writer_t *w = arg;
        PGconn *c = NULL;
        unsigned seq = 0;
        while (!atomic_load(&w->stop)) {
                if (!c || PQstatus(c) != CONNECTION_OK) {
                        PQfinish(c);
                        c = PQconnectdb(w->conninfo);
                        if (PQstatus(c) != CONNECTION_OK) {
                                atomic_fetch_add(&w->failures, 1);
                                h_sleep_ms(50);
                                continue;
                        }
                }
                /* 1 to 3 aggregates per transaction, each bumped once. */
                int n = 1 + (int)(seq % 3);
                int a = (int)(seq * 7 % AGGS);
                seq++;
                char sql[1024];
                snprintf(sql, sizeof(sql),
                         "WITH v AS (UPDATE fo_agg SET version = version + 1 WHERE id IN (%d, %d, %d) "
                         "RETURNING id, version) INSERT INTO outbox (id, aggregatetype, aggregateid, "
                         "type, payload) SELECT gen_random_uuid(), '%s', 'agg-' || id, 'Bumped', "
                         "jsonb_build_object('v', version) FROM v ORDER BY id",
                         a, n > 1 ? (a + 1) % AGGS : a, n > 2 ? (a + 2) % AGGS : a, w->aggtype);
                PGresult *res = PQexec(c, sql);
                if (PQresultStatus(res) == PGRES_COMMAND_OK) {
                        atomic_fetch_add(&w->committed, atoi(PQcmdTuples(res)));
                } else {
                        atomic_fetch_add(&w->failures, 1);
                        PQfinish(c);
                        c = NULL;
                        h_sleep_ms(50);
                }
                PQclear(res);
                h_sleep_ms(2);
        }
        PQfinish(c);
        return NULL;
}

/* --- verification --------------------------------------------------------------------- */

typedef struct {
        char id[40];
        int agg;
        int v;
        int seen;
} row_t;

static int cmp_row(const void *a, const void *b)
{
        return strcmp(((const row_t *)a)->id, ((const row_t *)b)->id);
}

/* --- throwaway servers ---------------------------------------------------------------- */

static PGconn *connect_port(int port, const char *db)
{
        char ci[256];
        snprintf(ci, sizeof(ci), "host=127.0.0.1 port=%d user=postgres dbname=%s connect_timeout=10",
                 port, db);
        PGconn *c = PQconnectdb(ci);
        if (PQstatus(c) != CONNECTION_OK)
                tap_bail("could not connect to port %d: %s", port, PQerrorMessage(c));
        return c;
}

/* Write text to path (as the postgres OS user when root: the data directory is theirs). */
static void write_file_as_postgres(const char *path, const char *text, bool append)
{
        char tmp[] = "/tmp/relay_fo_XXXXXX", cmd[1024];
        int fd = mkstemp(tmp);
        FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (!f || fputs(text, f) < 0 || fclose(f) != 0)
                tap_bail("could not write %s", tmp);
        chmod(tmp, 0644);
        snprintf(cmd, sizeof(cmd), "cat %s %s %s", tmp, append ? ">>" : ">", path);
        if (h_run_as_postgres(cmd) != 0)
                tap_bail("%s failed", cmd);
        unlink(tmp);
}

/* Poll sql (one boolean) on c until true or timeout_ms; ms it took, -1 on timeout. */
static int64_t wait_true(PGconn *c, int timeout_ms, const char *sql)
{
        int64_t t0 = h_now_ms();
        for (;;) {
                char *v = h_pg_value(c, "%s", sql);
                bool yes = v && strcmp(v, "t") == 0;
                free(v);
                if (yes)
                        return h_now_ms() - t0;
                if (h_now_ms() - t0 > timeout_ms)
                        return -1;
                h_sleep_ms(100);
        }
}

static int count_log(h_relay_t *r, const char *needle)
{
        char *log = h_relay_log(r);
        int n = 0;
        for (const char *p = log; (p = strstr(p, needle)); p++)
                n++;
        free(log);
        return n;
}

/*
 * One failover. restart: the relay is killed (SIGKILL) with the primary and
 * a new one started after the promotion, so it resumes from the position
 * of the standby's copy; otherwise the relay keeps running and finds the
 * new primary by itself, resuming from the position it confirmed last.
 */
static void promotion(bool restart)
{
        const char *db = "fo";
        const char *m = restart ? "relay restarted" : "relay kept running";
        tap_diag("--- a promotion, %s ---", m);
        char *slot = h_unique_name("slot_fo");
        char *aggtype = h_unique_name("fo");
        char topic[256], cmd[2048], sql[512];
        snprintf(topic, sizeof(topic), "outbox.event.%s", aggtype);

        /* --- the primary: its standby's physical slot first, so that the
         * logical walsender never runs ahead of the standby ------------------- */
        h_cluster_t *pc = h_cluster_init(PRIMARY_OFFSET, NULL);
        if (!pc || h_cluster_start(pc, "-c wal_level=logical -c max_wal_senders=10 "
                                       "-c max_replication_slots=10 -c wal_sender_timeout=10s "
                                       "-c synchronized_standby_slots=fo_standby") != 0)
                tap_bail("could not start the primary");
        int pport = h_cluster_port(pc);
        PGconn *p = connect_port(pport, "postgres");
        h_pg_exec(p, "SELECT pg_create_physical_replication_slot('fo_standby', true)");
        h_pg_exec(p, "CREATE DATABASE %s", db);
        PQfinish(p);
        p = connect_port(pport, db);
        h_pg_create_outbox(p, "outbox");
        h_pg_exec(p, "CREATE TABLE fo_agg (id int PRIMARY KEY, version int NOT NULL DEFAULT 0)");
        h_pg_exec(p, "INSERT INTO fo_agg (id) SELECT generate_series(0, %d)", AGGS - 1);

        /* --- the standby: a copy between pg_backup_start and pg_backup_stop -- */
        h_cluster_t *sc = h_cluster_init(STANDBY_OFFSET, NULL);
        if (!sc)
                tap_bail("could not make the standby's directory");
        h_pg_exec(p, "SELECT pg_backup_start('fo', true)");
        snprintf(cmd, sizeof(cmd),
                 "rm -rf %s/data && cp -a %s/data %s/data && rm -f %s/data/postmaster.pid "
                 "%s/data/postmaster.opts && find %s/data/pg_wal -maxdepth 1 -type f -delete && "
                 "rm -rf %s/data/pg_replslot/*",
                 h_cluster_dir(sc), h_cluster_dir(pc), h_cluster_dir(sc), h_cluster_dir(sc),
                 h_cluster_dir(sc), h_cluster_dir(sc), h_cluster_dir(sc));
        if (h_run_as_postgres(cmd) != 0)
                tap_bail("copying the primary's data directory failed");
        char *label = h_pg_value(p, "SELECT labelfile FROM pg_backup_stop(true)");
        if (!label)
                tap_bail("pg_backup_stop returned no backup label");
        char path[512], conf[1024];
        snprintf(path, sizeof(path), "%s/data/backup_label", h_cluster_dir(sc));
        write_file_as_postgres(path, label, false);
        free(label);
        snprintf(path, sizeof(path), "%s/data/standby.signal", h_cluster_dir(sc));
        write_file_as_postgres(path, "", false);
        snprintf(path, sizeof(path), "%s/data/postgresql.auto.conf", h_cluster_dir(sc));
        snprintf(conf, sizeof(conf),
                 "primary_conninfo = 'host=127.0.0.1 port=%d user=postgres dbname=%s "
                 "application_name=fo_standby'\n"
                 "primary_slot_name = 'fo_standby'\n"
                 "hot_standby_feedback = on\n"
                 "sync_replication_slots = on\n",
                 pport, db);
        write_file_as_postgres(path, conf, true);
        if (h_cluster_start(sc, "-c wal_level=logical -c max_wal_senders=10 "
                                "-c max_replication_slots=10") != 0)
                tap_bail("could not start the standby");
        int sport = h_cluster_port(sc);
        if (!ok(wait_true(p, 60000,
                          "SELECT count(*) > 0 FROM pg_stat_replication WHERE application_name = "
                          "'fo_standby' AND state = 'streaming'") >= 0,
                "the standby streams from the primary"))
                tap_bail("no standby");

        /* The relay's slot exists already, without failover (an older relay's). */
        h_pg_exec(p, "SELECT pg_create_logical_replication_slot('%s', 'pgoutput')", slot);
        h_kafka_create_topic(topic, 3);

        char relay_ci[512], set_conn[600], set_kafka[256], set_slot[128];
        snprintf(relay_ci, sizeof(relay_ci),
                 "host=127.0.0.1,127.0.0.1 port=%d,%d user=postgres dbname=%s "
                 "target_session_attrs=read-write connect_timeout=5",
                 pport, sport, db);
        snprintf(set_conn, sizeof(set_conn), "postgres.conninfo=%s", relay_ci);
        snprintf(set_kafka, sizeof(set_kafka), "kafka.bootstrap.servers=%s", h_kafka_bootstrap());
        snprintf(set_slot, sizeof(set_slot), "slot.name=%s", slot);
        const char *sets[] = {set_conn,
                              set_kafka,
                              set_slot,
                              "slot.failover=true",
                              "status.interval.ms=500",
                              "reconnect.backoff.ms=100",
                              "reconnect.backoff.max.ms=1000",
                              NULL};
        h_relay_t *r = h_relay_start(sets);
        bool streaming = h_relay_wait_log(r, "streaming from replication slot", 60000);
        if (!ok(streaming && h_relay_wait_log(r, "enabled failover on replication slot", 0),
                "the relay streams and enabled failover on the slot it found without it"))
                h_relay_diag_log(r);
        ok(!h_relay_wait_log(r, "synchronized_standby_slots is empty", 0),
           "no warning about synchronized_standby_slots (the primary names the standby's slot)");
        snprintf(sql, sizeof(sql),
                 "SELECT failover FROM pg_replication_slots WHERE slot_name = '%s'", slot);
        char *fo = h_pg_value(p, "%s", sql);
        is_str(fo, "t", "the primary's slot has failover = true");
        free(fo);
        /* The standby's slot sync worker doubles its nap (up to 30 s) while
         * the primary has no failover slot; a reload wakes it now instead of
         * at the end of that nap (setup time only, nothing is skipped). */
        PGconn *s = connect_port(sport, db);
        h_pg_exec(s, "SELECT pg_reload_conf()");

        /* check reports the flag and synchronized_standby_slots. */
        char *out = NULL, *err = NULL;
        if (!restart)
                (void)h_relay_run_cmd("check", NULL, sets, 30000, &out, &err);
        char *l1 = check_line(out, "postgres.slot.failover");
        char *l2 = check_line(out, "postgres.synchronized_standby_slots");
        if (!restart) { /* once is enough */
                if (!ok(l1 && strncmp(l1, "ok ", 3) == 0 && strstr(l1, "has failover enabled") &&
                            l2 && strncmp(l2, "ok ", 3) == 0,
                        "check reports the slot's failover flag and synchronized_standby_slots"))
                        tap_diag("check said:\n%s\n%s", out ? out : "", err ? err : "");
                else
                        tap_diag("%s\n# %s", l1, l2);
        }
        free(l1);
        free(l2);
        free(out);
        free(err);

        /* --- load, then the standby's copy of the slot ------------------------ */
        char writer_ci[512];
        snprintf(writer_ci, sizeof(writer_ci),
                 "host=127.0.0.1,127.0.0.1 port=%d,%d user=postgres dbname=%s "
                 "target_session_attrs=read-write connect_timeout=2 application_name=fo_writer",
                 pport, sport, db);
        writer_t w = {.conninfo = writer_ci, .aggtype = aggtype};
        pthread_t wt;
        if (pthread_create(&wt, NULL, writer_main, &w) != 0)
                tap_bail("pthread_create failed");
        int64_t got = h_kafka_wait_count(topic, BEFORE_SYNC, 60000);
        ok(got >= BEFORE_SYNC, "Kafka holds %lld events written to the primary", (long long)got);
        snprintf(sql, sizeof(sql),
                 "SELECT count(*) = 1 FROM pg_replication_slots WHERE slot_name = '%s' AND synced "
                 "AND NOT temporary AND confirmed_flush_lsn IS NOT NULL",
                 slot);
        /* The standby keeps its copy temporary until the primary's slot has
         * a restart_lsn at or past where the copy could reserve WAL, and
         * restart_lsn moves only at a running-transactions record (the
         * background writer logs one every 15 s): log one each second
         * instead (setup time only). */
        int64_t t_sync = h_now_ms(), sync_ms = -1;
        while (sync_ms < 0 && h_now_ms() - t_sync < 60000) {
                h_pg_exec(p, "SELECT pg_log_standby_snapshot()");
                if (wait_true(s, 1000, sql) >= 0)
                        sync_ms = h_now_ms() - t_sync;
        }
        if (!ok(sync_ms >= 0, "the standby holds a synchronized copy of the slot (after %lld ms)",
                (long long)sync_ms)) {
                snprintf(cmd, sizeof(cmd), "tail -n 30 %s/postgresql.log | sed \"s/^/# /\"",
                         h_cluster_dir(sc));
                fflush(stdout);
                if (system(cmd) != 0)
                        tap_diag("could not read the standby's log");
        }
        char *synced_at = h_pg_value(s,
                                     "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE "
                                     "slot_name = '%s'",
                                     slot);
        PQfinish(s);
        char *primary_at = h_pg_confirmed_lsn(p, slot);
        PQfinish(p);
        p = NULL;

        /* --- the primary crashes, the standby is promoted, under load -------- */
        if (restart) {
                h_relay_signal(r, SIGKILL);
                h_relay_wait(r, 10000);
        }
        int before = atomic_load(&w.committed);
        snprintf(cmd, sizeof(cmd), "%s/pg_ctl stop -D %s/data -m immediate -w >/dev/null 2>&1",
                 h_env("RELAY_TEST_PGBIN"), h_cluster_dir(pc));
        if (h_run_as_postgres(cmd) != 0)
                tap_bail("could not stop the primary");
        int64_t t_crash = h_now_ms();
        snprintf(cmd, sizeof(cmd), "%s/pg_ctl promote -D %s/data -w -t 60 >/dev/null 2>&1",
                 h_env("RELAY_TEST_PGBIN"), h_cluster_dir(sc));
        ok(h_run_as_postgres(cmd) == 0, "the standby is promoted");
        int64_t t_promoted = h_now_ms();
        tap_diag("%d events committed before the crash; slot confirmed at %s on the primary, the "
                 "standby's copy at %s; promoted %lld ms after the crash",
                 before, primary_at ? primary_at : "?", synced_at ? synced_at : "?",
                 (long long)(t_promoted - t_crash));
        free(primary_at);
        free(synced_at);

        PGconn *np = connect_port(sport, db);
        if (restart) {
                h_relay_free(r);
                r = h_relay_start(sets);
        }
        snprintf(sql, sizeof(sql),
                 "SELECT count(*) = 1 FROM pg_replication_slots WHERE slot_name = '%s' AND active",
                 slot);
        int64_t resume_ms = wait_true(np, 60000, sql);
        if (!ok(resume_ms >= 0,
                "%s: the relay streams from the new primary's slot %lld ms after the "
                "promotion ended, %lld ms after the crash",
                m, (long long)resume_ms, (long long)(h_now_ms() - t_crash)))
                h_relay_diag_log(r);
        int64_t deadline = h_now_ms() + 30000;
        while (atomic_load(&w.committed) < before + AFTER_PROMOTION && h_now_ms() < deadline)
                h_sleep_ms(50);
        atomic_store(&w.stop, true);
        pthread_join(wt, NULL);
        int committed = atomic_load(&w.committed);
        ok(committed >= before + AFTER_PROMOTION,
           "the writer committed %d events on the new primary (%d failed statements around the "
           "promotion)",
           committed - before, atomic_load(&w.failures));

        /* --- what Kafka holds against what the new primary holds ------------- */
        snprintf(sql, sizeof(sql),
                 "SELECT synced::text || ' ' || failover::text FROM pg_replication_slots WHERE "
                 "slot_name = '%s'",
                 slot);
        char *flags = h_pg_value(np, "%s", sql);
        is_str(flags, "true true", "the new primary's slot is the synchronized one (synced, failover)");
        free(flags);
        ok(count_log(r, "created replication slot") == 0 &&
                   count_log(r, "enabled failover") == (restart ? 0 : 1),
           "%s: the relay created no slot (it resumed from the synchronized one)", m);
        char *end = h_pg_value(np, "SELECT pg_current_wal_lsn()");
        bool confirmed = h_pg_wait_confirmed(np, slot, end, 60000) >= 0;
        ok(confirmed, "the slot is confirmed past the last event (%s)", end);
        free(end);

        PGresult *res = PQexec(np, "SELECT id::text, substr(aggregateid, 5)::int, "
                                   "(payload->>'v')::int FROM outbox");
        if (PQresultStatus(res) != PGRES_TUPLES_OK)
                tap_bail("reading the outbox: %s", PQerrorMessage(np));
        size_t nrows = (size_t)PQntuples(res);
        row_t *rows = calloc(nrows + 1, sizeof(*rows));
        for (size_t i = 0; i < nrows; i++) {
                snprintf(rows[i].id, sizeof(rows[i].id), "%s", PQgetvalue(res, (int)i, 0));
                rows[i].agg = atoi(PQgetvalue(res, (int)i, 1));
                rows[i].v = atoi(PQgetvalue(res, (int)i, 2));
        }
        PQclear(res);
        qsort(rows, nrows, sizeof(*rows), cmp_row);
        h_kafka_wait_count(topic, (int64_t)nrows, 60000);

        h_msg_t *msgs = NULL;
        size_t nmsg = h_kafka_consume_all(topic, &msgs);
        size_t dups = 0, phantoms = 0, out_of_order = 0, lost = 0, bad = 0;
        int last_v[AGGS];
        for (int i = 0; i < AGGS; i++)
                last_v[i] = 0;
        for (size_t i = 0; i < nmsg; i++) {
                size_t len;
                const char *id = h_msg_header(&msgs[i], "id", &len);
                row_t key;
                memset(&key, 0, sizeof(key));
                if (!id || len >= sizeof(key.id)) {
                        bad++;
                        continue;
                }
                memcpy(key.id, id, len);
                row_t *row = bsearch(&key, rows, nrows, sizeof(*rows), cmp_row);
                if (!row) {
                        phantoms++;
                        if (phantoms <= 5)
                                tap_diag("in Kafka, not in the new primary's outbox: %s key %s "
                                         "value %s",
                                         key.id, msgs[i].key ? msgs[i].key : "(null)",
                                         msgs[i].value);
                        continue;
                }
                if (row->seen++) {
                        dups++;
                        continue;
                }
                if (row->v <= last_v[row->agg])
                        out_of_order++;
                else
                        last_v[row->agg] = row->v;
        }
        for (size_t i = 0; i < nrows; i++)
                if (!rows[i].seen)
                        lost++;
        /* The writer's count differs from the outbox by the commits around
         * the crash: committed on the old primary but not yet on the
         * asynchronous standby (fewer rows), or committed with the answer
         * lost in the crash (more rows). */
        tap_diag("%s: the new primary's outbox holds %zu events (the writer saw %d commits succeed); "
                 "Kafka holds %zu messages: %zu duplicates, %zu lost, %zu not in the outbox, %zu "
                 "out of order",
                 m, nrows, committed, nmsg, dups, lost, phantoms, out_of_order);
        is_int((long long)lost, 0LL,
               "%s: no event lost: every row of the new primary's outbox is in Kafka", m);
        is_int((long long)phantoms, 0LL,
               "%s: Kafka holds no event of a transaction the promotion lost", m);
        is_int((long long)out_of_order, 0LL, "%s: each aggregate's versions arrive in commit order",
               m);
        is_int((long long)bad, 0LL, "%s: every message has its id header", m);
        tap_diag("%s: duplicates: %zu of %zu events (%.2f %%)", m, dups, nrows,
                 nrows ? 100.0 * (double)dups / (double)nrows : 0.0);

        h_relay_signal(r, SIGTERM);
        is_int(h_relay_wait(r, 30000), 0, "the relay stops cleanly");
        if (tap_failed)
                h_relay_diag_log(r);
        h_relay_free(r);
        h_msgs_free(msgs, nmsg);
        free(rows);
        PQfinish(np);
        h_kafka_delete_topic(topic);
        h_cluster_free(sc);
        h_cluster_free(pc);
        free(slot);
        free(aggtype);
}

int main(void)
{
        const char *v = getenv("RELAY_TEST_PGVERSION");
        int version = v && *v ? atoi(v) : 15;
        if (version < 17) {
                refused(version);
                skip("the promotion needs PostgreSQL 17 or later (failover slots); this server is "
                     "older (RELAY_TEST_PGVERSION), tests/run runs it on 17 and 18");
        } else {
                unguarded();
                promotion(false);
                promotion(true);
        }
        return done_testing();
}
