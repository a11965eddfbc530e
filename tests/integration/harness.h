/*
 * harness.h - helpers shared by the integration tests: the environment that
 * tests/env/up started (PostgreSQL 15, or the version it was asked for, and
 * Kafka on loopback; tests/env/pg can point them at another version), SQL, Kafka
 * topics and consumption, and the outbox-relay process under test.
 *
 * Every helper that cannot do its job bails out of the test (TAP "Bail out!")
 * with the reason: an integration test never skips because the environment
 * is missing.
 *
 * Environment read: RELAY_TEST_PGHOST, RELAY_TEST_PGPORT, RELAY_TEST_PGUSER,
 * RELAY_TEST_KAFKA (bootstrap servers), RELAY_TEST_DATADIR (the PostgreSQL
 * data directory, for pg_ctl), RELAY_TEST_PGBIN (PostgreSQL's bin directory),
 * RELAY_BIN (the relay binary), RELAY_SQL_DIR.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_TEST_HARNESS_H
#define RELAY_TEST_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <libpq-fe.h>

#include "tap.h"

/* --- environment ------------------------------------------------------ */

/** Required variable, or bail out naming it and tests/env/up. Borrowed. */
const char *h_env(const char *name);

/** Kafka bootstrap servers (RELAY_TEST_KAFKA). Borrowed. */
const char *h_kafka_bootstrap(void);

/** A name unique to this process and call: prefix_<pid>_<n>, lower case. Caller frees. */
char *h_unique_name(const char *prefix);

/** Write path anew with what fmt makes; bails when it cannot. */
void h_write_file(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* --- PostgreSQL -------------------------------------------------------- */

/** conninfo ("host=... port=... user=... dbname=...") for dbname on the test cluster. Caller frees. */
char *h_pg_conninfo(const char *dbname);

/** Create a fresh database; returns its name (caller frees). */
char *h_pg_create_db(const char *prefix);

/** Drop a database and every replication slot in it (terminating walsenders). */
void h_pg_drop_db(const char *dbname);

/** Drop a role a test made, if it exists (from the postgres database). */
void h_pg_drop_role(const char *role);

/** Connect or bail. Caller PQfinish()es. */
PGconn *h_pg_connect(const char *dbname);

/* --- throwaway PostgreSQL clusters -------------------------------------- */

/*
 * A cluster of the test's own (initdb and pg_ctl of RELAY_TEST_PGBIN, run as
 * the postgres OS user when root) on port RELAY_TEST_PGPORT + port_offset:
 * each test that makes one picks an offset no other test uses. Stopped
 * (immediate) and removed at exit, also on SIGTERM, SIGINT and SIGHUP.
 */
typedef struct h_cluster h_cluster_t;

/** initdb into a new temporary directory with initdb_opts (may be NULL)
 *  appended to "-U postgres -A trust -E UTF8 --no-sync"; NULL (with a
 *  diagnostic) when that failed. */
h_cluster_t *h_cluster_init(int port_offset, const char *initdb_opts);

/** The cluster's directory (the data directory is its "data" subdirectory,
 *  the server log its "postgresql.log"); write files there before starting. */
const char *h_cluster_dir(const h_cluster_t *c);

/** The cluster's port. */
int h_cluster_port(const h_cluster_t *c);

/** pg_ctl start (waiting up to 60 s) with server_opts (may be NULL, e.g.
 *  "-c wal_level=replica") after loopback-only defaults; 0, or -1 with a
 *  diagnostic naming the log. */
int h_cluster_start(h_cluster_t *c, const char *server_opts);

/** Stop (immediate) and remove the cluster now; accepts NULL. */
void h_cluster_free(h_cluster_t *c);

/** A cluster made (h_cluster_init(), no initdb options) and started with
 *  server_opts; NULL (with a diagnostic) when either failed. */
h_cluster_t *h_cluster_up(int port_offset, const char *server_opts);

/** A cluster (as h_cluster_up()) whose server speaks German: lc_messages =
 *  de_DE.UTF-8, the locale compiled by localedef (package locales) into the
 *  cluster's directory and found through LOCPATH, the catalog Debian's
 *  PostgreSQL 15 ships (postgres-15.mo). hba (may be NULL) replaces
 *  pg_hba.conf; server_opts (may be NULL) are added. Bails when anything of
 *  it fails, or when the server does not speak German (SELECT 1/0). */
h_cluster_t *h_cluster_up_german(int port_offset, const char *hba, const char *server_opts);

/** "postgres.conninfo=..." reaching database postgres of c as postgres, for --set. */
void h_cluster_conninfo_set(const h_cluster_t *c, char *buf, size_t len);

/** A connection to database postgres of c as postgres over TCP (caller
 *  PQfinish()es it); bails when it cannot connect. */
PGconn *h_cluster_connect(const h_cluster_t *c);

/** A loopback TCP port that listens and is never accepted from while a
 *  program connects: the kernel completes the handshake, nothing answers
 *  (a PostgreSQL host gone silent). Its number in *port; the listening
 *  socket (non-blocking) returned; bails when it cannot listen. */
int h_silent_listener(int *port);

/** The connections made to a h_silent_listener() so far: accepted (and
 *  closed) now, so each is counted once. */
int h_silent_connections(int fd);

/** Run a shell command (no single quotes in it) as the postgres OS user
 *  when root; system()'s status. */
int h_run_as_postgres(const char *cmd);

/** Run SQL (printf-style) that must succeed, or bail with the server's message. */
void h_pg_exec(PGconn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** Run SQL; return 0 or -1 (error text into err). Never bails. */
int h_pg_try(PGconn *c, char *err, size_t errlen, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

/** First column of the first row as a malloc'd string, NULL for SQL NULL or no row; bails on error. */
char *h_pg_value(PGconn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** sql's first column of the first row as an integer (a count, a sum), -1
 *  for SQL NULL or no row; bails on error. sql is no format: '%' is itself. */
long long h_pg_number(PGconn *c, const char *sql);

/** column of slot's row in pg_replication_slots as text (caller frees; NULL
 *  for SQL NULL or when the slot does not exist). */
char *h_pg_slot_column(PGconn *c, const char *slot, const char *column);

/** slot's confirmed_flush_lsn (caller frees; NULL when the slot does not exist). */
char *h_pg_confirmed_lsn(PGconn *c, const char *slot);

/** a >= b, both LSN strings, compared by the server. */
bool h_pg_lsn_ge(PGconn *c, const char *a, const char *b);

/**
 * Poll until slot's confirmed_flush_lsn >= lsn, up to timeout_ms.
 * Returns the milliseconds it took, or -1 on timeout.
 */
int64_t h_pg_wait_confirmed(PGconn *c, const char *slot, const char *lsn, int timeout_ms);

/**
 * While keepalives flow: rounds times, run noise_sql on c (an unrelated
 * write, so the server has WAL past lsn to send keepalives for), wait
 * 500 ms and read slot's confirmed_flush_lsn. True when it stayed below
 * lsn every time; *last (caller frees; may be NULL) gets the last value.
 */
bool h_pg_confirmed_stays_below(PGconn *c, const char *slot, const char *lsn, int rounds,
                                const char *noise_sql, char **last);

/**
 * Inserts still pending in slot (not confirmed: a peek, publication
 * outbox_pub) whose message bytes contain needle. Waits up to 30 s for the
 * slot to be released by its last walsender first (bails otherwise).
 */
long h_pg_pending_inserts_with(PGconn *c, const char *slot, const char *needle);

/** Run every statement of a file under RELAY_SQL_DIR (psql-free: simple query protocol). */
void h_pg_exec_file(PGconn *c, const char *sql_file_name);

/** Create the Debezium-compatible outbox table (sql/001_outbox.sql) as table_name. */
void h_pg_create_outbox(PGconn *c, const char *table_name);

/**
 * Run on c the command that text names (a message's or a check's fix): from
 * the first `from` up to the next `upto` (included when with; NULL: to the
 * end). True when PostgreSQL ran it; what ran and its answer go to
 * tap_diag either way.
 */
bool h_pg_run_named(PGconn *c, const char *text, const char *from, const char *upto, bool with);

/** Whether a walsender of database db waits on a lock in CREATE_REPLICATION_SLOT
 *  (for the transactions open when it began to end). */
bool h_pg_slot_creation_waits(PGconn *c, const char *db);

/** Whether a walsender of database db waits on a lock in CREATE PUBLICATION
 *  (for a lock on an outbox table another session holds). */
bool h_pg_publication_creation_waits(PGconn *c, const char *db);

/** Whether the relay's backfill connection to database db waits on a lock
 *  (a table lock, an advisory lock its snapshot.filter takes). */
bool h_pg_backfill_waits(PGconn *c, const char *db);

/** Whether the relay's slot monitor (its connection "outbox-relay metrics")
 *  to database db waits on a lock. */
bool h_pg_slotmon_waits(PGconn *c, const char *db);

/* --- Kafka -------------------------------------------------------------- */

/** Create a topic (partitions, the broker's default replication factor: 1 on
 *  tests/env/up's broker, 3 on tests/env/cluster) and wait until its
 *  metadata shows it; bails on failure. */
void h_kafka_create_topic(const char *topic, int partitions);

/** The same with topic configs: a NULL-terminated list of name, value, name, value... */
void h_kafka_create_topic_config(const char *topic, int partitions, const char *const *config);

typedef struct {
        char *topic;
        int32_t partition;
        int64_t offset;
        char *key;    /* NULL for a NULL key; NUL-terminated copy */
        size_t key_len;
        char *value;  /* NUL-terminated copy */
        size_t value_len;
        int64_t timestamp; /* ms */
        int timestamp_type; /* rd_kafka_timestamp_type_t */
        size_t nheaders;
        char **header_names;
        char **header_values; /* NUL-terminated copies */
        size_t *header_lens;
} h_msg_t;

/*
 * Versions 1..want[a] per aggregate a (0 <= a < aggs), as Kafka delivered
 * them: duplicates, versions that came after a higher one, and, at the
 * end, versions never seen.
 */
typedef struct {
        int aggs, maxv;
        int *seen, *last;
        long duplicates, out_of_order, missing;
} h_versions_t;

/** Start counting for aggs aggregates of up to want[a] versions each. */
void h_versions_init(h_versions_t *t, int aggs, const int *want);

/** Version v of aggregate a arrived (in range: the caller checked); false
 *  for a duplicate, which does not count towards order. */
bool h_versions_add(h_versions_t *t, int a, int v);

/** Count the versions 1..want[a] never seen into t->missing; frees t's memory. */
void h_versions_finish(h_versions_t *t, const int *want);

/** One outbox event of aggregate type aggtype, key "k<k>", payload {"v": v}. */
void h_insert_keyed(PGconn *c, const char *aggtype, int k, int v);

/**
 * Read topic whole and count, per key "k<k>" (0 <= k < keys), the versions
 * 1..wants[k] of h_insert_keyed()'s events as Kafka holds them (t counted
 * and finished); the number of messages read.
 */
size_t h_topic_key_versions(const char *topic, int keys, const int *wants, h_versions_t *t);

/**
 * A topic whose broker refuses a record timestamped more than an hour ago
 * (message.timestamp.before.max.ms: INVALID_TIMESTAMP, a refusal for good of
 * one event), made with one partition; and a dead-letter topic of the
 * test's own, dlq_<unique> in dlq (dlqlen bytes), made too (retention.ms
 * -1: it keeps copies timestamped long ago), with the setting that names it
 * in set_dlq ("errors.dlq.topic=...").
 */
void h_kafka_refusing_topics(const char *topic, char *dlq, size_t dlqlen, char *set_dlq,
                             size_t setlen);

/** Delete a topic, best effort: the broker outlives the test and the suite
 *  runs twice against it. */
void h_kafka_delete_topic(const char *topic);

/** Give topic total partitions (CreatePartitions); bails out when Kafka refuses. */
void h_kafka_add_partitions(const char *topic, int total);

struct rd_kafka_s;
/** Another producer: transactional.id tid on the environment's Kafka, its
 *  first transaction begun (rd_kafka_destroy() when done). Bails on failure. */
struct rd_kafka_s *h_kafka_txn_producer(const char *tid);
/** Produce key=value to topic in rk's open transaction, flushed. Bails on failure. */
void h_kafka_txn_produce(struct rd_kafka_s *rk, const char *topic, const char *key,
                         const char *value);

/** Sum of high watermarks over every partition of topic (0 when it does not exist). */
int64_t h_kafka_count(const char *topic);

/** Wait until h_kafka_count(topic) >= n or timeout_ms passed; returns the last count. */
int64_t h_kafka_wait_count(const char *topic, int64_t n, int timeout_ms);

/**
 * Read every message of every partition of topic from the beginning up to
 * the high watermark seen at call time, partition by partition in offset
 * order. Returns the count; *out is caller-freed with h_msgs_free().
 */
size_t h_kafka_consume_all(const char *topic, h_msg_t **out);

void h_msgs_free(h_msg_t *msgs, size_t n);

/** Value of header name in m (first match) or NULL; *len set when found. Borrowed. */
const char *h_msg_header(const h_msg_t *m, const char *name, size_t *len);

/** The aggregate and version encoded in m's id header as
 *  00000000-0000-4000-8000-AAAAVVVVVVVV (4 and 8 decimal digits); false
 *  without such an id. */
bool h_msg_agg_version(const h_msg_t *m, int *a, int *v);

/** Produce one message synchronously (acks=all) or bail. */
void h_kafka_produce(const char *topic, const char *key, const char *value);

/**
 * As h_kafka_produce(), with headers: a NULL-terminated list of name, value
 * pairs ({"id", "42", "type", "OrderPlaced", NULL}); NULL for none.
 */
void h_kafka_produce_hdrs(const char *topic, const char *key, const char *value,
                          const char *const *headers);

/** As h_kafka_produce_hdrs(), with a value of value_len bytes (NUL bytes and all). */
void h_kafka_produce_bytes(const char *topic, const char *key, const char *value,
                           size_t value_len, const char *const *headers);

/**
 * As h_kafka_produce_bytes(), but a refused message is not a bail: returns
 * its delivery report's error, an rd_kafka_resp_err_t (0 once Kafka holds
 * it), to find out what the broker accepts. Bails only when no delivery report comes.
 */
int h_kafka_try_produce_bytes(const char *topic, const char *key, const char *value,
                              size_t value_len, const char *const *headers);

/*
 * Produce a record of bytes bytes (key "probe") to topic every 200 ms until
 * the broker refuses one, at most 300 times: a topic's lowered
 * max.message.bytes takes effect on the broker a moment after the request
 * that set it was answered. Returns the refusal (0: none); *taken counts
 * the probes the broker took, which stay in the topic.
 */
int h_kafka_wait_refused(const char *topic, size_t bytes, int *taken);

/*
 * The other way round, for a raised max.message.bytes: probe until the
 * broker takes a record of bytes bytes, at most 300 times. Returns the last
 * refusal (0: taken; the probe stays in the topic); *refused counts them.
 */
int h_kafka_wait_taken(const char *topic, size_t bytes, int *refused);

/** Number of brokers in the cluster's metadata; bails when Kafka does not answer. */
int h_kafka_broker_count(void);

/* --- the relay process --------------------------------------------------- */

typedef struct h_relay h_relay_t;

/**
 * Start RELAY_BIN with "--set http.listen=off" (no HTTP endpoint unless a set
 * turns it on), then "--set k=v" for each of sets (NULL-terminated), and
 * stdout+stderr appended to a log file of its own. Bails if fork/exec fails.
 */
h_relay_t *h_relay_start(const char *const *sets);

/** h_relay_start() with the settings of sets, then those of more (both
 *  NULL-terminated; more may be NULL). */
h_relay_t *h_relay_start_more(const char *const *sets, const char *const *more);

/**
 * Start RELAY_BIN as "RELAY_BIN cmd opts... --set k=v..." (cmd NULL: the
 * relay itself, as h_relay_start()); a command's standard output goes to a
 * file of its own (h_relay_stdout()), its standard error to the log.
 */
h_relay_t *h_relay_start_cmd(const char *cmd, const char *const *opts, const char *const *sets);
/**
 * As h_relay_start_cmd() for another program of the project (bin: its path,
 * e.g. RELAY_INBOX_BIN for outbox-inbox); the h_relay_* calls apply to it.
 */
h_relay_t *h_proc_start(const char *bin, const char *cmd, const char *const *opts,
                        const char *const *sets);
/**
 * As h_proc_start() with the program's standard output on the descriptor
 * out (borrowed: the caller closes it; -1: as h_proc_start()).
 */
h_relay_t *h_proc_start_out(const char *bin, const char *cmd, const char *const *opts,
                            const char *const *sets, int out);
/** A command's standard output so far (caller frees; "" for the relay itself). */
char *h_relay_stdout(const h_relay_t *r);
/**
 * Run a command to its end: h_relay_start_cmd(), wait up to timeout_ms
 * (killed after that), *out = its standard output, *log = its standard
 * error (both caller-freed). Returns the exit code, -1 on timeout.
 */
int h_relay_run_cmd(const char *cmd, const char *const *opts, const char *const *sets,
                    int timeout_ms, char **out, char **log);
/** Send a signal. */
void h_relay_signal(h_relay_t *r, int sig);

/** pid of the process. */
pid_t h_relay_pid(const h_relay_t *r);

/**
 * Wait up to timeout_ms for exit; returns the exit code (128+signal when
 * killed by a signal) or -1 on timeout (process left running).
 */
int h_relay_wait(h_relay_t *r, int timeout_ms);

/** Wait up to timeout_ms until the log contains needle; true when it did. */
bool h_relay_wait_log(h_relay_t *r, const char *needle, int timeout_ms);

/** Whole log so far (caller frees). */
char *h_relay_log(const h_relay_t *r);

/** The log file's path (borrowed; removed by h_relay_free() unless
 *  RELAY_TEST_KEEP_RELAY_LOGS is set). */
const char *h_relay_log_path(const h_relay_t *r);

/** Print the log as TAP diagnostics (for failures). */
void h_relay_diag_log(const h_relay_t *r);

/** SIGKILL if still running, reap, remove the log; accepts NULL. */
void h_relay_free(h_relay_t *r);

/** SIGTERM, then wait up to timeout_ms: the exit code (as h_relay_wait()),
 *  the log shown as diagnostics unless it is 0. Does not free r. */
int h_relay_stop(h_relay_t *r, int timeout_ms);

/** Wait up to timeout_ms until r says it streams from its slot; false, with
 *  its log shown as diagnostics, when it did not (exited, or the time ran out). */
bool h_relay_streams(h_relay_t *r, int timeout_ms);

/* --- one test's outbox ----------------------------------------------------- */

/*
 * What most integration tests begin with, each name unique to the process
 * and call, so that tests running side by side share none: a database of
 * the test's own with the outbox table (and the publication of
 * sql/002_publication.sql when asked), a slot name, an aggregate type, its
 * topic outbox.event.<aggtype> (made on Kafka when asked), and the relay's
 * settings for them. Bails when any of it cannot be made.
 */
typedef struct {
        char *db;       /* NULL for a case on a server of the test's own (h_case_names()) */
        char *slot;
        char *aggtype;
        char *conninfo; /* of db, NULL without one */
        PGconn *c;      /* connected to db; NULL without one (the test may set it) */
        char topic[256]; /* outbox.event.<aggtype> */
        int partitions;  /* the topic's, 0 when the case did not make it (nor deletes it) */
        char set_conn[640]; /* "postgres.conninfo=<conninfo>"; "" without db */
        char set_kafka[256];
        char set_slot[192];
} h_case_t;

enum {
        H_CASE_PUBLICATION = 1 << 0, /* run sql/002_publication.sql in db */
        H_CASE_BARE = 1 << 1,        /* no outbox table (the workload makes its tables) */
};

/**
 * Names only: slot (prefix slot_prefix), aggregate type (agg_prefix) and
 * topic; the topic made with `partitions` partitions (0: not made); no
 * database (k->db, k->c NULL, set_conn empty).
 */
void h_case_names(h_case_t *k, const char *slot_prefix, const char *agg_prefix, int partitions);

/** h_case_names(), and a database of prefix db_prefix with the outbox table
 *  (flags: H_CASE_PUBLICATION), connected, and its conninfo. */
void h_case_open(h_case_t *k, const char *db_prefix, const char *slot_prefix,
                 const char *agg_prefix, int partitions, unsigned flags);

/** Close k->c, drop the database (and its slots), delete the topic when the
 *  case made it, and free the names; accepts a case h_case_names() alone made. */
void h_case_close(h_case_t *k);

/**
 * The relay of a case on Kafka's refusals, started (not yet known to
 * stream): k's connection, Kafka and slot, set_dlq (the dead-letter
 * topic's "errors.dlq.topic=..."), the event timestamp from created_at (the
 * column a test sets long ago to have an event refused),
 * reconnect.backoff.ms 100 and reconnect.backoff.max.ms 500 (a refusal can
 * end a session), then extra's settings (NULL-terminated, NULL for none).
 * Caller frees it (h_relay_free() or h_kafka_refusing_close()).
 */
h_relay_t *h_kafka_refusing_relay(const h_case_t *k, const char *set_dlq,
                                  const char *const *extra);

/**
 * The opening of a case on Kafka's refusals: h_case_open(k, db_prefix,
 * "slot", agg_prefix, 0, 0), its topic and a dead-letter topic (named in
 * dlq, dlqlen bytes) made by h_kafka_refusing_topics(), and
 * h_kafka_refusing_relay() on them with extra. End it with
 * h_kafka_refusing_close().
 */
h_relay_t *h_kafka_refusing_open(h_case_t *k, const char *db_prefix, const char *agg_prefix,
                                 char *dlq, size_t dlqlen, const char *const *extra);

/** The end of a case whose topic, and dead-letter topic dlq, were made by
 *  h_kafka_refusing_topics(): free the relay r (h_relay_free(), NULL
 *  accepted), delete both topics and close the case (h_case_close()). */
void h_kafka_refusing_close(h_case_t *k, h_relay_t *r, const char *dlq);

/** Insert one outbox event of the test's aggregate type: aggregate id
 *  aggregateid (the message key), type "T", payload {}. */
void h_outbox_insert(PGconn *c, const char *aggtype, const char *aggregateid);

/** One statement: one event per aggregate "agg-0" to "agg-<aggs - 1>" of
 *  aggtype, each of version v, its id made of both (h_msg_agg_version()
 *  reads them back) and payload {"v": v}. */
void h_insert_round(PGconn *c, const char *aggtype, int aggs, int v);

/** Insert one event into table (an outbox table by another name, say):
 *  aggregate id aggregateid, type "T", payload {"n": n}. */
void h_outbox_insert_n(PGconn *c, const char *table, const char *aggtype,
                       const char *aggregateid, int n);

/** The server's pg_current_wal_lsn() (caller frees). */
char *h_pg_wal_lsn(PGconn *c);

/** What a relay has done with events written before `lsn`: Kafka's count
 *  in the topic and whether the slot got confirmed past lsn. */
typedef struct {
        char *lsn;        /* the WAL end when the wait began (owned; h_relayed_free()) */
        int64_t in_kafka; /* the last h_kafka_count() of the topic */
        bool confirmed;   /* the slot's confirmed_flush_lsn reached lsn */
} h_relayed_t;

/**
 * After a test's writes: take the server's WAL end, wait up to timeout_ms
 * until Kafka holds n messages in topic, then up to timeout_ms until slot
 * is confirmed past that WAL end. Both outcomes are for the test to assert.
 */
void h_wait_relayed(PGconn *c, const char *slot, const char *topic, int64_t n, int timeout_ms,
                    h_relayed_t *out);

void h_relayed_free(h_relayed_t *r);

/** h_wait_relayed() for n messages, then *out = every message of topic
 *  (h_kafka_consume_all()); *confirmed: the slot got past the writes. */
size_t h_relayed_consume(PGconn *c, const char *slot, const char *topic, int64_t n,
                         int timeout_ms, bool *confirmed, h_msg_t **out);

/** m has key (not NULL) and value. */
bool h_msg_is(const h_msg_t *m, const char *key, const char *value);

/** How many messages of topic (read from the start) have one of keys
 *  (NULL-terminated) as their key. */
size_t h_kafka_count_keys(const char *topic, const char *const *keys);

/** Wait up to timeout_ms until pg_replication_slots says slot is active
 *  (a walsender streams from it) or, with active false, that it is not;
 *  whether it did. */
bool h_pg_wait_slot_active(PGconn *c, const char *slot, bool active, int timeout_ms);

/* --- the Debezium side (tests/bench/debezium) ---------------------------- */

/** Build tests/bench/debezium with Maven (its classes and jars under
 *  tests/bench/work/debezium) when its jar is missing or older than a file
 *  of the project; bails when it does not build. */
void h_debezium_build(void);

/**
 * Start "java ... -cp <the Debezium side> main_class args..." (args
 * NULL-terminated, at most 10) as h_proc_start() does: its standard output
 * and error go to its log, and the h_relay_* calls apply to it.
 */
h_relay_t *h_debezium_start(const char *main_class, const char *const *args);

/* --- HTTP (the relay's endpoint) ----------------------------------------- */

/**
 * A loopback port for the tests' HTTP endpoints and servers:
 * RELAY_TEST_HTTP_PORT (default 19140) + offset.
 */
int h_http_port(int offset);

/**
 * GET (or another method) path from 127.0.0.1:port over HTTP/1.0, up to
 * timeout_ms. Returns the status code, or -1 when the connection failed,
 * closed without a status line, or timed out. *body (may be NULL) gets the
 * body (caller frees; "" when none).
 */
int h_http_request(int port, const char *method, const char *path, int timeout_ms, char **body);

/** The value of the sample `series` (name with its labels, exactly as
 *  rendered) in a Prometheus exposition page; -1 when absent. */
double h_metrics_sample(const char *page, const char *series);

/** Wait up to timeout_ms until the relay's /metrics on port shows sample
 *  `series` (as h_metrics_sample() names it) at least at_least; false then. */
bool h_metrics_wait(int port, const char *series, double at_least, int timeout_ms);

/** Send raw bytes to 127.0.0.1:port and return the status code of the answer
 *  (-1 when the server closed without one or timed out). */
int h_http_raw(int port, const char *bytes, size_t len, int timeout_ms);

/* --- misc ------------------------------------------------------------- */

/** Monotonic milliseconds. */
int64_t h_now_ms(void);

/** Sleep ms milliseconds. */
void h_sleep_ms(int ms);

#endif
