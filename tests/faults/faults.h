/*
 * faults.h - helpers shared by the fault tests (tests/integration/0202..0207)
 * on top of harness.h and workload.h: service control (pg_ctl, the Kafka
 * control script, SIGSTOP/SIGCONT), a restore command that puts the shared
 * services back as they were when a test ends however it ends, relay
 * settings, queries that survive a database restart, and writers that
 * reconnect and retry.
 *
 * Declarations here, code in faults.c, linked into the harness library like
 * harness.c. The three helpers that emit test points (fx_case_relay,
 * fx_stop_relay, fx_check_delivered) stay here as static functions:
 * tap.h's counters are per translation unit, so a test point must be
 * emitted from the test program's own. tests/meson.build puts tests/ on the
 * include path, hence #include "faults/faults.h".
 *
 * Variant: RELAY_FAULTS_LONG=1 in the environment selects the long variant
 * of each scenario (issue 4's figures); the default is the short variant CI
 * runs. See tests/faults/RELIABILITY.md.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_TEST_FAULTS_H
#define RELAY_TEST_FAULTS_H

/* What the header-only version included, so the tests that relied on it still compile. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "harness.h"
#include "workload.h"

/* --- small utilities ---------------------------------------------------- */

/** The long variant was asked for (RELAY_FAULTS_LONG set, not "0"). */
bool fx_long(void);

/** vprintf into a new string (caller frees); bails on OOM. */
char *fx_vfmt(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

/** printf into a new string (caller frees); bails on OOM. */
char *fx_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/** Run a shell command (printf-style); its exit status, or -1. Output goes
 *  to /dev/null unless the command redirects it itself. */
int fx_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/** Occurrences of needle in hay. */
int fx_count(const char *hay, const char *needle);

/** Occurrences of needle in relay r's log so far. */
int fx_log_count(const h_relay_t *r, const char *needle);

/** Wait until relay r's log holds needle at least n times; false on timeout
 *  or when the relay exited without it. */
bool fx_wait_log_n(h_relay_t *r, const char *needle, int n, int timeout_ms);

/** Random integer in [lo, hi] (xorshift32; a zero seed is replaced). */
int fx_rand(unsigned *seed, int lo, int hi);

/** "X/Y" -> 64-bit LSN; 0 for NULL or garbage. */
uint64_t fx_lsn(const char *s);

/* --- restoring the shared services -------------------------------------- */

/*
 * One shell command that puts back what a test changes, run at exit and,
 * detached, when the test is killed (see faults.c). The fx_restore_* and
 * fx_pg_set helpers add to it.
 */

/** Append a shell command to the restore command (and install it once).
 *  The parts run in the order added: add quick ones before slow ones
 *  (starting a broker takes half a minute). */
void fx_restore_add(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* --- PostgreSQL server control -------------------------------------------- */

/** Shell prefix running a PostgreSQL binary as the cluster's owner. */
const char *fx_pg_runas(void);

/** The command line of "pg_ctl ACTION" for the test cluster, started the way
 *  tests/env/up starts it (same data directory and log file: without -l the
 *  server would write to, and hold open, the test's own stdout). Caller frees. */
char *fx_pg_ctl_cmd(const char *action);

/** Run pg_ctl ACTION ("restart -m fast", "status", ...); its exit status. */
int fx_pg_ctl(const char *action);

/** Restore: start PostgreSQL if it is not running. */
void fx_restore_pg_running(void);

/** Restore: ALTER SYSTEM RESET name and reload (psql, on the postgres database). */
void fx_restore_pg_setting(const char *name);

/** ALTER SYSTEM SET name = 'value' and reload; registers the reset. */
void fx_pg_set(const char *name, const char *value);

/** ALTER SYSTEM RESET name and reload, now. */
void fx_pg_reset(const char *name);

/* --- queries that survive a server restart ------------------------------------ */

/** Connect without bailing; NULL when the server does not answer. */
PGconn *fx_pg_try_connect(const char *db);

/**
 * First value of a query on *cp (connecting to db when needed), retried
 * with a new connection for up to timeout_ms while the server is away.
 * Returns a malloc'd string, NULL for SQL NULL or no row; *ok false when it
 * never got an answer.
 */
char *fx_pg_value_retry(PGconn **cp, const char *db, int timeout_ms, bool *okp,
                        const char *fmt, ...) __attribute__((format(printf, 5, 6)));

typedef struct {
        bool exists;
        long active_pid;  /* 0 when inactive */
        uint64_t confirmed; /* confirmed_flush_lsn */
        uint64_t current;   /* pg_current_wal_lsn() at the same moment */
        char wal_status[16];
} fx_slot_t;

/** The slot as pg_replication_slots shows it (bails when the query fails). */
fx_slot_t fx_slot(PGconn *c, const char *slot);

/** Committed events of the workload's aggregates (sum of versions). */
long long fx_committed(PGconn *c);

/* --- Kafka -------------------------------------------------------------------- */

/** pid of the broker from RELAY_TEST_KAFKA_PIDFILE; 0 when unknown. */
pid_t fx_kafka_pid(void);

/** Restore: a frozen broker continued, a stopped one started. */
void fx_restore_kafka_running(void);

/** $RELAY_TEST_KAFKA_CMD action (stop, start, restart); its exit status. */
int fx_kafka_ctl(const char *action);

/** Delete both topics of a workload (best effort: the broker outlives the
 *  test and the suite runs twice against it). */
void fx_delete_workload_topics(const h_workload_conf_t *wc);

/* --- relay settings --------------------------------------------------------- */

typedef struct {
        char *owned[32];
        const char *v[33];
        int n;
} fx_sets_t;

void fx_sets_add(fx_sets_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** conninfo of db, Kafka (NULL: RELAY_TEST_KAFKA), slot; status updates every second. */
void fx_sets_init(fx_sets_t *s, const char *db, const char *slot, const char *kafka);

void fx_sets_free(fx_sets_t *s);

/* --- one fault case: its database, names, connection and relay settings ------- */

typedef struct {
        char *db;     /* a database of its own */
        char *suffix; /* unique: the workload's topic and aggregate-type suffix */
        char *slot;   /* unique slot name */
        PGconn *c;    /* connected to db; a test may replace it (reconnects) */
        fx_sets_t sets; /* filled by the test (fx_sets_init) */
} fx_case_t;

/** Create database name, a suffix and a slot name from tag, and connect. */
void fx_case_open(fx_case_t *k, const char *name, const char *tag);

/** Start a relay with the case's settings; one test point: it streams. */
static __attribute__((unused)) h_relay_t *fx_case_relay(const fx_case_t *k, const char *what)
{
        h_relay_t *r = h_relay_start(k->sets.v);
        ok(h_relay_streams(r, 60000), "%s", what);
        return r;
}

/**
 * A connection the server refuses for good (0250, 0243): r (a relay or
 * outbox-inbox, freed here) must end within timeout_ms with exit 3 (setup,
 * not retried), its log holding every needle (NULL-terminated) and neither
 * code (the refusal's SQLSTATE) nor a LOCATION line (libpq's verbose
 * form). Test points named by what; the log as a diagnostic when one fails.
 */
static __attribute__((unused)) void fx_check_refused(h_relay_t *r, const char *what,
                                                     const char *const *needles,
                                                     const char *code, int timeout_ms)
{
        int rc = h_relay_wait(r, timeout_ms);
        char *log = h_relay_log(r);
        bool good = ok(rc == 3, "%s: exit 3 (setup), not retried (got %d)", what, rc);
        for (const char *const *n = needles; *n; n++)
                good &= ok(log && strstr(log, *n), "%s: the log says \"%s\"", what, *n);
        good &= ok(log && !strstr(log, code) && !strstr(log, "LOCATION:"),
                   "%s: the message has neither the SQLSTATE %s nor a LOCATION line", what, code);
        if (!good)
                h_relay_diag_log(r);
        free(log);
        h_relay_free(r);
}

/**
 * After ms more of what ("waiting"), /healthz on port answers 200
 * (http.liveness.timeout.ms = 1000: the loop turns meanwhile). One test point.
 */
static __attribute__((unused)) void fx_alive_after(int port, int ms, const char *what)
{
        h_sleep_ms(ms);
        char *body = NULL;
        int st = h_http_request(port, "GET", "/healthz", 2000, &body);
        is_int(st, 200, "/healthz: 200 after %.0f s of %s, liveness timeout 1 s: %s", ms / 1000.0,
               what, body ? body : "");
        free(body);
}

/**
 * A relay's start that waits on the server (what: "creating the slot", ...):
 * waits(c, db) must come true within 60 s, then /healthz on port answer 200
 * after 3 s more (http.liveness.timeout.ms = 1000: the loop turns while it
 * waits), waits(c, db) still true. Three test points.
 */
static __attribute__((unused)) void fx_waits_alive(h_relay_t *r, PGconn *c, const char *db,
                                                   bool (*waits)(PGconn *, const char *), int port,
                                                   const char *what)
{
        int64_t deadline = h_now_ms() + 60000;
        bool w;
        while (!(w = waits(c, db)) && h_now_ms() < deadline)
                h_sleep_ms(100);
        if (!ok(w, "%s waits", what))
                h_relay_diag_log(r);
        fx_alive_after(port, 3000, "waiting");
        ok(waits(c, db), "%s still waits meanwhile", what);
}

/** Stop relay r with SIGTERM; one test point (what): exit 0 within 60 s,
 *  its log shown otherwise. Returns the exit code. */
static __attribute__((unused)) int fx_stop_relay(h_relay_t *r, const char *what)
{
        int rc = h_relay_stop(r, 60000);
        is_int(rc, 0, "%s", what);
        return rc;
}

/**
 * A case with a steady workload in *wc, as the HTTP, EOS and topic tests
 * stream it: fx_case_open(k, name, tag), two writers over 50 aggregates in
 * transactions of up to 5 events every pause_ms until stopped, two
 * partitions a topic; its tables and topics made, and k->sets initialised
 * for the environment's Kafka. Bails on failure.
 */
void fx_steady_case_open(fx_case_t *k, const char *name, const char *tag, int pause_ms,
                         h_workload_conf_t *wc);

/**
 * A case of one outbox table: fx_case_open(k, name, tag), a table "outbox"
 * whose events for aggregatetype k->suffix go to topic (topiclen bytes;
 * not made on Kafka), k->sets initialised for the environment's Kafka.
 * Bails on failure.
 */
void fx_outbox_case_open(fx_case_t *k, const char *name, const char *tag, char *topic,
                         size_t topiclen);

/**
 * A case for a start that waits (fx_waits_alive()): fx_outbox_case_open(k,
 * name, tag, topic, topiclen), k->sets with /healthz on
 * h_http_port(port_offset) and http.liveness.timeout.ms = 1000. Returns
 * that port; bails on failure.
 */
int fx_alive_case_open(fx_case_t *k, const char *name, const char *tag, int port_offset,
                       char *topic, size_t topiclen);

/**
 * Hold case k's backfill: snapshot.mode = initial and a snapshot.filter
 * that takes advisory lock `lock` shared added to k->sets, and a new
 * connection to k->db that holds that lock returned (a session lock, no
 * transaction: creating the slot does not wait for it; caller PQfinish()es),
 * so the backfill's first FETCH waits until it is given up. Bails on
 * failure.
 */
PGconn *fx_backfill_hold(fx_case_t *k, int lock);

/**
 * An exactly-once case on the environment's Kafka: fx_case_open(k, name,
 * tag), a table "outbox" with the publication, k->sets initialised for
 * delivery.mode = exactly-once with a compacted checkpoint topic of its own.
 * Returns that topic; *key gets the slot's checkpoint key (system
 * identifier/slot). The caller frees both.
 */
char *fx_eos_case_open(fx_case_t *k, const char *name, const char *tag, char **key);

/**
 * fx_alive_case_open(k, name, tag, port_offset, topic, topiclen), with one
 * outbox row for the backfill, held by *holder (fx_backfill_hold(k, lock);
 * caller PQfinish()es). Starts the relay and returns it once
 * fx_waits_alive() saw the FETCH wait (in this header: its test points
 * count in the test's TAP).
 */
static __attribute__((unused)) h_relay_t *
fx_backfill_held(fx_case_t *k, const char *name, const char *tag, int port_offset, int lock,
                 char *topic, size_t topiclen, PGconn **holder)
{
        int port = fx_alive_case_open(k, name, tag, port_offset, topic, topiclen);
        h_pg_exec(k->c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES "
                  "(gen_random_uuid(), '%s', 'a1', 'Backfilled', '{}')",
                  k->suffix);
        *holder = fx_backfill_hold(k, lock);
        h_relay_t *r = h_relay_start(k->sets.v);
        fx_waits_alive(r, k->c, k->db, h_pg_backfill_waits, port,
                       "the backfill's FETCH (for the lock)");
        return r;
}

/** How many replication slots named slot the server has (0 or 1). */
long fx_slot_count(PGconn *c, const char *slot);

/**
 * Stop relay r, whose start waits (fx_waits_alive()), with SIGTERM and free
 * it: exit 0 within 60 s (its log shown otherwise), and no slot named
 * k->slot left. Two test points.
 */
static __attribute__((unused)) void fx_stop_waiting(h_relay_t *r, const fx_case_t *k)
{
        int rc = h_relay_stop(r, 60000);
        is_int(rc, 0, "SIGTERM ends the relay (exit 0) while the holder still holds");
        if (rc != 0)
                h_relay_diag_log(r);
        h_relay_free(r);
        is_int(fx_slot_count(k->c, k->slot), 0, "no slot is left behind");
}

/** Undo fx_case_open and free the settings; with wc, delete its topics too. */
void fx_case_close(fx_case_t *k, const h_workload_conf_t *wc);

/*
 * The case's own compacted checkpoint topic (eos.checkpoint.topic) with
 * another producer's transaction left open on it, as another relay of the
 * slot may leave it: an exactly-once relay's checkpoint read waits for it.
 */
typedef struct {
        char *topic;                 /* outbox.relay.checkpoints_<suffix> */
        char *tid;                   /* the other producer's transactional.id */
        struct rd_kafka_s *producer; /* its transaction open until released */
} fx_held_checkpoint_t;

/** Create the topic and open the other transaction (bails on failure). */
void fx_held_checkpoint_open(fx_held_checkpoint_t *h, const fx_case_t *k);

/** Commit the other transaction (bails on failure). */
void fx_held_checkpoint_release(fx_held_checkpoint_t *h);

/** Destroy the producer, delete the topic, free. */
void fx_held_checkpoint_close(fx_held_checkpoint_t *h);

/* --- a systemd notify socket ------------------------------------------------- */

/*
 * A datagram socket at a path of the test's own, read as systemd reads
 * NOTIFY_SOCKET: read it often, or a relay blocks in sd_notify() once 10
 * datagrams wait (net.unix.max_dgram_qlen).
 */
typedef struct {
        int fd;
        char path[108];
} fx_notify_t;

/** Bind the socket (bails on failure) and start a relay with the case's
 *  settings, NOTIFY_SOCKET and WATCHDOG_USEC (NULL: none) in its environment. */
h_relay_t *fx_notify_relay(fx_notify_t *n, const fx_case_t *k, const char *watchdog_usec);

/** Read for ms (0: what waits now); returns how many datagrams held needle. */
int fx_notify_count(fx_notify_t *n, const char *needle, int ms);

/** Wait up to ms until the case's slot is active (a relay's stream
 *  started), reading n meanwhile, then half a second more for what was
 *  sent about then; true when it is. */
bool fx_notify_wait_active(fx_notify_t *n, const fx_case_t *k, int ms);

/** SIGTERM to r, then wait up to ms for its exit, reading n meanwhile:
 *  the exit code, -1 while it still runs. */
int fx_notify_stop(fx_notify_t *n, h_relay_t *r, int ms);

/** Close and remove the socket. */
void fx_notify_close(fx_notify_t *n);

/* --- writers that survive a database restart ---------------------------------- */

/*
 * The rows workload.c writes (same tables, topics, keys, headers and
 * payload, so h_workload_verify checks them), from writers that reconnect
 * and carry on when the server goes away, until told to stop or a target is
 * reached. A COMMIT whose answer was lost may or may not have committed:
 * the verifier trusts the aggregates' versions in the database, never these
 * counters.
 */
typedef struct {
        const h_workload_conf_t *conf;
        int id;
        int target; /* events to commit, 0: until stopped */
        atomic_int *stop;
        atomic_int committed;
        atomic_int failed_txns;
        atomic_int reconnects;
        pthread_t th;
} fx_writer_t;

typedef struct {
        int n;
        atomic_int stop;
        fx_writer_t *w;
} fx_writers_t;

/** Start conf->writers tolerant writers; conf->events > 0 bounds the total. */
fx_writers_t *fx_writers_start(const h_workload_conf_t *conf);

/** Events committed so far (as far as the writers know). */
int fx_writers_committed(fx_writers_t *ws);

typedef struct {
        int committed, failed_txns, reconnects;
} fx_writer_stats_t;

/** Stop (or wait for the target), join and free; totals into *st. */
void fx_writers_stop(fx_writers_t *ws, bool wait_for_target, fx_writer_stats_t *st);

/* --- checks ---------------------------------------------------------------------- */

/**
 * Wait, up to timeout_ms each, until the relay has confirmed the end of the
 * WAL on k's slot (one test point: it confirms only what Kafka
 * acknowledged), then until Kafka holds as many messages as the workload
 * committed events. Not the count alone: duplicates (a session restarted
 * resends from the slot) count too, and a relay still catching up would
 * be stopped early and its events seem lost. Returns what Kafka holds;
 * *expected gets the committed count.
 */
/** The count half of fx_wait_all_in_kafka(): Kafka holds as many messages as
 *  the workload committed events (duplicates count too). */
long long fx_wait_count_in_kafka(PGconn *c, const h_workload_conf_t *wc, int timeout_ms,
                                 long long *expected);

static __attribute__((unused)) long long fx_wait_all_in_kafka(const fx_case_t *k,
                                                               const h_workload_conf_t *wc,
                                                               int timeout_ms, long long *expected)
{
        /* Here, not in faults.c: tap.h's counter is per compiled file. */
        char *end = h_pg_value(k->c, "SELECT pg_current_wal_lsn()");
        ok(h_pg_wait_confirmed(k->c, k->slot, end, timeout_ms) >= 0,
           "the relay confirmed the end of the WAL (%s)", end ? end : "?");
        free(end);
        return fx_wait_count_in_kafka(k->c, wc, timeout_ms, expected);
}

/** Print what an h_verify_t holds, one figure per line. */
void fx_diag_verify(const char *what, const h_verify_t *v);

/*
 * The promise every fault scenario checks, whatever it did to the relay:
 * no committed event missing, each aggregate's first occurrences in commit
 * order, and every message as written. Duplicates are the scenario's call.
 */
static __attribute__((unused)) void fx_check_delivered(const char *what, const h_verify_t *v)
{
        fx_diag_verify(what, v);
        is_int(v->missing, 0, "%s: no committed event is missing", what);
        is_int(v->out_of_order, 0, "%s: each aggregate's first occurrences are in commit order", what);
        is_int(v->bad_key + v->bad_partition + v->bad_headers + v->bad_value, 0,
               "%s: keys, partitions, headers and values as written", what);
}

/* --- kill -9 loops ---------------------------------------------------------- */

typedef struct {
        int killed;      /* died of the SIGKILL */
        int during_load; /* of those, while the writers were still committing */
        int in_startup;  /* of those, before the relay said it streams */
        int not_killed;  /* had already exited on its own: a failure */
} fx_kills_t;

/**
 * Wait for a random point of the k-th of n equal slices of `events`
 * committed by wl (2 minutes at most), then until r streams, then a random
 * 50 to max_pause_ms.
 */
void fx_wait_slice(h_workload_t *wl, h_relay_t *r, int k, int n, int events, unsigned *seed,
                   int max_pause_ms);

/**
 * kill -9 p and reap it. False, with a diagnostic naming what and kill k
 * and p's log, when p had already exited on its own.
 */
bool fx_kill9(h_relay_t *p, const char *what, int k);

/**
 * Issue 4's crash loop (0205, 0215): `kills` times, kill -9 relay r and
 * start a new one with sets. Kill k lands at a random point of the k-th
 * slice of the load while the relay streams; one kill in four instead hits
 * the relay the previous kill left starting, 0 to 80 ms after the exec.
 * Counts into *out. Returns the relay left running (the caller frees it).
 */
h_relay_t *fx_crash_loop(h_relay_t *r, const char *const *sets, h_workload_t *wl, int kills,
                         int events, unsigned *seed, fx_kills_t *out);

/** The FIGURES line of a crash loop (name: its label in the figures). */
void fx_crash_figures(const char *name, const h_verify_t *v, const fx_kills_t *k,
                      int rolled_back, double written_s, double all_in_kafka_s);

/* --- librdkafka's mock cluster ------------------------------------------ */

struct rd_kafka_mock_cluster_s;

/**
 * Start a mock cluster of `brokers` brokers in this process (librdkafka's
 * rdkafka_mock.h) and point RELAY_TEST_KAFKA at it, so the harness's Kafka
 * helpers read it. RELAY_TEST_MOCK_DEBUG=FILE writes its debug log there.
 * Destroyed at exit, after the harness's client (registered first). Returns
 * its bootstrap servers (borrowed); *out (may be NULL) gets the cluster.
 * Bails on failure.
 */
const char *fx_mock_start(int brokers, struct rd_kafka_mock_cluster_s **out);

/**
 * A case on a mock cluster of `brokers` brokers (fx_mock_start(), *out gets
 * it): fx_case_open(k, name, tag), the outbox table and the publication in
 * its database, and k->sets initialised for the mock. Bails on failure.
 */
void fx_mock_case_open(fx_case_t *k, const char *name, const char *tag, int brokers,
                       struct rd_kafka_mock_cluster_s **out);

/**
 * A case on a one-broker mock cluster (fx_mock_case_open()) whose relay
 * holds what it reads in the producer for a while, for the tests of what a
 * stop does with events in flight (0147, 0228): the case's topic made,
 * kafka.linger.ms = linger_ms, shutdown.timeout.ms = 30000, and /metrics
 * on HTTP port offset http_offset, whose port it returns. Bails on failure.
 */
int fx_mock_linger_case(fx_case_t *k, const char *name, const char *tag, int linger_ms,
                        int http_offset, struct rd_kafka_mock_cluster_s **out);

/** Insert one event of k's aggregate type, aggregate id the SQL expression
 *  aggid ("'agg-1'", "NULL"); its id (caller frees). *lsn (may be NULL)
 *  gets pg_current_wal_lsn() after it (caller frees). */
char *fx_insert_event(const fx_case_t *k, const char *aggid, char **lsn);

/** Start a relay of k (fx_case_relay()) and let it read one event
 *  (fx_insert_event(k, aggid, id... lsn)), seen in flight on the /metrics
 *  of port. Two test points. Returns the relay; *id gets the event's id. */
static __attribute__((unused)) h_relay_t *fx_relay_reads_event(const fx_case_t *k, int port,
                                                               const char *aggid, char **id,
                                                               char **lsn)
{
        h_relay_t *r = fx_case_relay(k, "a relay streams into the mock cluster");
        *id = fx_insert_event(k, aggid, lsn);
        if (!ok(h_metrics_wait(port, "outbox_relay_inflight_events", 1, 30000),
                "it read the event (in flight, lingering)"))
                h_relay_diag_log(r);
        return r;
}

/** After a stop that was not clean: the slot confirmed nothing past the
 *  event (id, committed before lsn_event) and still holds it for the next
 *  start. Two test points. */
static __attribute__((unused)) void fx_check_held(const fx_case_t *k, const char *id,
                                                  const char *lsn_event)
{
        char *conf = h_pg_confirmed_lsn(k->c, k->slot);
        ok(conf && !h_pg_lsn_ge(k->c, conf, lsn_event),
           "nothing confirmed past the event (slot at %s, event before %s)",
           conf ? conf : "(null)", lsn_event);
        is_int(h_pg_pending_inserts_with(k->c, k->slot, id), 1,
               "the slot still holds the event for the next start");
        free(conf);
}

/** Then: the next relay of k reads the event again (in flight on the
 *  /metrics of port) and, stopped with nothing failing, exits 0 with the
 *  slot confirmed past lsn_event. Four test points. */
static __attribute__((unused)) void fx_check_resent(const fx_case_t *k, int port,
                                                    const char *lsn_event)
{
        h_relay_t *r = fx_case_relay(k, "the next relay streams");
        if (!ok(h_metrics_wait(port, "outbox_relay_inflight_events", 1, 30000),
                "it reads the event again"))
                h_relay_diag_log(r);
        h_relay_signal(r, SIGTERM);
        int rc = h_relay_wait(r, 60000);
        if (!ok(rc == 0, "SIGTERM with nothing failing: exit 0 (got %d)", rc))
                h_relay_diag_log(r);
        h_relay_free(r);
        char *after = h_pg_confirmed_lsn(k->c, k->slot);
        ok(after && h_pg_lsn_ge(k->c, after, lsn_event),
           "the final flush delivered it and the slot is confirmed past it (%s)",
           after ? after : "(null)");
        free(after);
}

/*
 * Exactly-once on the mock cluster: a checkpoint topic of the case's own
 * (one partition, led by broker ckpt_leader) and a transactional.id whose
 * coordinator is broker coordinator, both in the case's settings. Bails
 * when the mock cluster refuses.
 */
void fx_mock_eos(fx_case_t *k, struct rd_kafka_mock_cluster_s *mock, int ckpt_leader,
                 int coordinator);

/**
 * The mock has no CreateTopics: create the topic the format names on it, one
 * partition, replication factor 1, led by broker `leader` (0: the mock's
 * choice). Returns the name (caller frees). Bails on failure.
 */
char *fx_mock_topic(struct rd_kafka_mock_cluster_s *mock, int leader, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/**
 * The mock has no CreateTopics: create the workload's topics on it (one
 * partition, replication factor 1); with spread, topic t's leader is broker
 * t + 1. Bails on failure.
 */
void fx_mock_workload_topics(struct rd_kafka_mock_cluster_s *mock, const h_workload_conf_t *wc,
                             bool spread);

/**
 * The steady workload the mock-cluster cases stream in *wc: two writers,
 * 50 aggregates, one event per transaction every 10 ms until stopped, one
 * partition per topic; its tables made in case k's database and its topics
 * on mock (fx_mock_workload_topics(), spread as there). Bails on failure.
 */
void fx_mock_workload(struct rd_kafka_mock_cluster_s *mock, const fx_case_t *k, bool spread,
                      h_workload_conf_t *wc);

struct rd_kafka_s;
/** A librdkafka log callback that keeps the test's output clean (the mock
 *  debug file gets the lines when RELAY_TEST_MOCK_DEBUG is set). */
void fx_quiet_log(const struct rd_kafka_s *rk, int level, const char *fac, const char *buf);

#endif
