/*
 * inbox.c - outbox-inbox's loop (see inbox.h): owns the consumer, the
 * dead-letter producer (created on first use) and the PostgreSQL
 * connection with its two prepared statements.
 *
 * One message at a time, on the thread that polls the consumer: the
 * rebalance callback runs inside rd_kafka_consumer_poll(), so when it runs
 * no message is half done; the offsets it commits are exactly those of
 * messages whose PostgreSQL transaction committed.
 *
 * Offsets: stored after each COMMIT and sent to the group coordinator
 * asynchronously at most every COMMIT_INTERVAL_MS and whenever the consumer
 * goes idle, synchronously on revoke and at stop. Committing each message
 * synchronously would add a broker round trip to every message and buy
 * nothing: an offset commit lost in a crash only brings back messages the
 * inbox already holds, which inbox_accept() refuses.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/inbox.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>

#include "relay/inbox_map.h"
#include "relay/log.h"
#include "relay/pgconn.h"

#define COMMIT_INTERVAL_MS 200
#define POLL_MS 100
#define DLQ_TIMEOUT_MS 30000

/* PostgreSQL type OIDs of the parameters (pg_type.dat; stable across versions). */
#define OID_TEXT 25
#define OID_JSONB 3802
#define OID_BYTEA 17
#define OID_INT4 23
#define OID_INT8 20

typedef struct {
        const relay_inbox_config_t *cfg;
        volatile sig_atomic_t *stop;
        const volatile sig_atomic_t *hangups; /* SIGHUPs received */
        sig_atomic_t hangups_logged;
        rd_kafka_t *consumer;
        rd_kafka_t *dlq;
        PGconn *pg;
        int64_t last_commit_ms;
        bool stored_since_commit;
        unsigned long long applied, duplicates, dead_lettered;
        /* Set by on_rebalance(), which runs inside rd_kafka_consumer_poll():
         * the partitions could not be given up; the loop stops on it. */
        char rebalance_err[RELAY_ERRBUF];
} inbox_t;

/* Outcome of one attempt at a message's transaction. */
typedef enum {
        TX_DONE = 0,     /* committed (applied, or refused as a duplicate) */
        TX_HANDLER,      /* the server refused: rolled back, counts as a failed attempt */
        TX_CONNECTION,   /* the connection is gone: reconnect, then try again */
        TX_SERVER,       /* the server takes no writes now: reconnect, then try again */
} tx_result_t;

/* A turn of the loop or of one of its waits: each SIGHUP is warned of. */
static void turn(inbox_t *ib)
{
        relay_log_hangups("outbox-inbox", ib->hangups, &ib->hangups_logged);
}

static void sleep_ms(int64_t ms, inbox_t *ib)
{
        while (ms > 0 && !*ib->stop) {
                turn(ib);
                int64_t step = ms < 100 ? ms : 100;
                struct timespec ts = {(time_t)(step / 1000), (long)(step % 1000) * 1000000L};
                nanosleep(&ts, NULL);
                ms -= step;
        }
}

static void chomp(char *s)
{
        size_t n = strlen(s);
        while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' '))
                s[--n] = '\0';
}

/* librdkafka's own lines are for debugging; errors reach us through error_cb. */
static void on_kafka_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
        relay_log_debug("librdkafka %s: %s", fac, buf);
}

static void on_kafka_error(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
        if (err == RD_KAFKA_RESP_ERR__FATAL)
                return; /* read and reported by the loop */
        relay_log_warning("Kafka client error: %s", reason);
}

static void on_commit(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                      rd_kafka_topic_partition_list_t *offsets, void *opaque)
{
        if (err && err != RD_KAFKA_RESP_ERR__NO_OFFSET)
                relay_log_warning("could not commit offsets to Kafka: %s, retrying later "
                                  "(a message applied since the last commit is refused by the "
                                  "inbox when it comes again)",
                                  rd_kafka_err2str(err));
}

static void describe_parts(const rd_kafka_topic_partition_list_t *parts, char *buf, size_t len)
{
        size_t at = 0;
        buf[0] = '\0';
        for (int i = 0; i < parts->cnt && at + 1 < len; i++) {
                int n = snprintf(buf + at, len - at, "%s%s[%d]", i ? ", " : "",
                                 parts->elems[i].topic, (int)parts->elems[i].partition);
                if (n < 0)
                        break;
                at += (size_t)n;
        }
        if (parts->cnt == 0)
                snprintf(buf, len, "none");
}

/*
 * A revoke arrives between two messages (this callback runs inside
 * rd_kafka_consumer_poll()), so every stored offset belongs to a committed
 * PostgreSQL transaction: commit them before giving the partitions up, so
 * the next owner starts after them. If that commit fails, the next owner
 * reads those messages again and the inbox refuses them.
 */
static void on_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque)
{
        inbox_t *ib = opaque;
        bool coop = strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE") == 0;
        char desc[1024];

        describe_parts(parts, desc, sizeof(desc));
        if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
                relay_log_info("assigned partitions: %s", desc);
                if (coop) {
                        rd_kafka_error_t *e = rd_kafka_incremental_assign(rk, parts);
                        if (e) {
                                relay_log_warning("could not assign partitions: %s",
                                                  rd_kafka_error_string(e));
                                rd_kafka_error_destroy(e);
                        }
                } else {
                        rd_kafka_resp_err_t e = rd_kafka_assign(rk, parts);
                        if (e)
                                relay_log_warning("could not assign partitions: %s",
                                                  rd_kafka_err2str(e));
                }
                return;
        }
        rd_kafka_resp_err_t ce = rd_kafka_commit(rk, NULL, 0);
        if (ce && ce != RD_KAFKA_RESP_ERR__NO_OFFSET)
                relay_log_warning("could not commit offsets before giving up partitions %s: %s "
                                  "(their next owner reads some messages again; the inbox "
                                  "refuses them)",
                                  desc, rd_kafka_err2str(ce));
        ib->stored_since_commit = false;
        relay_log_info("revoked partitions: %s", desc);
        const char *fail = NULL;
        rd_kafka_error_t *ie = NULL;
        rd_kafka_resp_err_t ae = RD_KAFKA_RESP_ERR_NO_ERROR;
        if (coop) {
                if ((ie = rd_kafka_incremental_unassign(rk, parts)))
                        fail = rd_kafka_error_string(ie);
        } else if ((ae = rd_kafka_assign(rk, NULL))) {
                fail = rd_kafka_err2str(ae);
        }
        /* Still assigned, the consumer could go on fetching partitions the
         * group has given to another member: the loop stops instead. */
        if (fail && !ib->rebalance_err[0])
                relay_err_set(ib->rebalance_err, sizeof(ib->rebalance_err),
                              "could not give up revoked partitions %s: %s; stopping so that "
                              "their new owner alone consumes them (start the inbox again: it "
                              "resumes from the committed offsets)",
                              desc, fail);
        if (ie)
                rd_kafka_error_destroy(ie);
}

static void on_dlq_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
        rd_kafka_resp_err_t *res = m->_private;
        if (res)
                *res = m->err;
}

static int kafka_conf(const relay_inbox_config_t *cfg, bool producer, rd_kafka_conf_t **out,
                      char *err, size_t errlen)
{
        /* Consumer properties a producer would warn about; everything else is shared
         * (brokers, security, client.id, timeouts). */
        static const char *const consumer_only[] = {
                "group.id", "group.instance.id", "auto.offset.reset", "isolation.level",
                "enable.auto.commit", "enable.auto.offset.store", "session.timeout.ms",
                "heartbeat.interval.ms", "max.poll.interval.ms", "partition.assignment.strategy",
                "auto.commit.interval.ms", "fetch.min.bytes", "fetch.max.bytes",
                "fetch.wait.max.ms", "max.partition.fetch.bytes", "enable.partition.eof",
                "check.crcs", "group.protocol.type", "queued.min.messages",
                "queued.max.messages.kbytes", "fetch.message.max.bytes"};
        rd_kafka_conf_t *kc = rd_kafka_conf_new();
        char kerr[256];

        if (!kc)
                return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
        for (size_t i = 0; i < cfg->kafka.n; i++) {
                bool skip = false;
                for (size_t j = 0; producer && j < sizeof(consumer_only) / sizeof(char *); j++)
                        skip = skip || strcmp(cfg->kafka.k[i], consumer_only[j]) == 0;
                if (skip)
                        continue;
                if (rd_kafka_conf_set(kc, cfg->kafka.k[i], cfg->kafka.v[i], kerr,
                                      sizeof(kerr)) != RD_KAFKA_CONF_OK) {
                        relay_err_set(err, errlen, "invalid Kafka setting \"kafka.%s\": %s",
                                      cfg->kafka.k[i], kerr);
                        rd_kafka_conf_destroy(kc);
                        return RELAY_EINVAL;
                }
        }
        if (producer &&
            (rd_kafka_conf_set(kc, "enable.idempotence", "true", kerr, sizeof(kerr)) ||
             rd_kafka_conf_set(kc, "acks", "all", kerr, sizeof(kerr)))) {
                relay_err_set(err, errlen, "could not configure the dead-letter producer: %s", kerr);
                rd_kafka_conf_destroy(kc);
                return RELAY_EINVAL;
        }
        rd_kafka_conf_set_log_cb(kc, on_kafka_log);
        rd_kafka_conf_set_error_cb(kc, on_kafka_error);
        *out = kc;
        return 0;
}

/* --- PostgreSQL ------------------------------------------------------------ */

/*
 * "what: message (SQLSTATE xxxxx)" on one line: the server's primary message
 * without its CONTEXT lines, which a PL/pgSQL handler adds to every error.
 * Returns whether the error is the server's own state rather than the
 * statement's (relay_inbox_server_unable()).
 */
static bool pg_error(char *err, size_t errlen, const char *what, const PGresult *r, PGconn *pg)
{
        const char *primary = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
        const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
        if (primary) {
                relay_err_set(err, errlen, "%s: %s (SQLSTATE %s)", what, primary,
                              state ? state : "unknown");
        } else {
                relay_err_set(err, errlen, "%s: %s", what, PQerrorMessage(pg));
                chomp(err);
        }
        return relay_inbox_server_unable(state);
}

/*
 * Prepares one statement. A refusal while the connection is up is the
 * setup's fault (hint: how to fix it); a lost connection is worth a retry.
 */
static int prepare(inbox_t *ib, const char *name, const char *sql, int nparams,
                   const Oid *types, const char *what, const char *hint, char *err,
                   size_t errlen)
{
        PGresult *r = PQprepare(ib->pg, name, sql, nparams, types);
        if (PQresultStatus(r) == PGRES_COMMAND_OK) {
                PQclear(r);
                return 0;
        }
        bool gone = PQstatus(ib->pg) != CONNECTION_OK;
        char pe[RELAY_ERRBUF];
        pg_error(pe, sizeof(pe), what, r, ib->pg);
        relay_err_set(err, errlen, "%s%s%s", pe, gone ? "" : "; ", gone ? "" : hint);
        PQclear(r);
        return gone ? RELAY_EIO : RELAY_ESETUP;
}

static const char *accept_sql = "SELECT inbox_accept($1, $2, $3, $4)";

/*
 * Connect and prepare both statements. RELAY_EIO: the server is away (try
 * again); RELAY_ESETUP: it refuses the connection for good (password,
 * pg_hba.conf, no such role or database, no CONNECT) or a statement (the
 * inbox table or the handler is wrong): no retry can fix that.
 */
static int pg_open(inbox_t *ib, char *err, size_t errlen)
{
        const relay_inbox_config_t *cfg = ib->cfg;
        Oid accept_types[4] = {OID_TEXT, OID_TEXT, OID_INT4, OID_INT8};
        Oid handler_types[7] = {OID_TEXT, OID_JSONB, OID_JSONB, OID_TEXT, OID_INT4, OID_INT8,
                                OID_TEXT};
        int rc;

        handler_types[2] = cfg->payload == RELAY_INBOX_PAYLOAD_JSONB  ? OID_JSONB
                           : cfg->payload == RELAY_INBOX_PAYLOAD_TEXT ? OID_TEXT
                                                                      : OID_BYTEA;
        PQfinish(ib->pg);
        /* libpq skips a NULL value: an empty conninfo leaves all to PG* variables. */
        const char *keys[] = {"dbname", NULL};
        const char *vals[] = {cfg->postgres_conninfo[0] ? cfg->postgres_conninfo : NULL, NULL};
        rc = relay_pgconn_connect(&ib->pg, keys, vals, 1, ib->stop);
        if (rc == RELAY_ESTOPPED) {
                relay_err_set(err, errlen, "stopped while connecting to PostgreSQL");
                return rc;
        }
        if (rc) {
                relay_err_set(err, errlen, "could not connect to PostgreSQL: out of memory");
                return RELAY_EIO;
        }
        PQsetNoticeProcessor(ib->pg, relay_log_server_notice, NULL);
        if (PQstatus(ib->pg) != CONNECTION_OK) {
                /* A refusal the next try meets alike (by SQLSTATE, in any
                 * lc_messages language) is the setup's; a server away is
                 * retried. */
                char m[RELAY_ERRBUF];
                relay_pgconn_failure_t f = relay_pgconn_failure(ib->pg, m, sizeof(m));
                const char *fix = f == RELAY_PGCONN_PRIVILEGE
                                          ? "grant the role CONNECT on the database"
                                          : relay_pgconn_fix(f);
                relay_err_set(err, errlen, "could not connect to PostgreSQL: %s%s%s", m,
                              fix ? "; " : "", fix ? fix : "");
                return f == RELAY_PGCONN_AWAY ? RELAY_EIO : RELAY_ESETUP;
        }
        /* Keys, headers and JSON payloads are UTF-8 (params_build() checks
         * them so): the server converts them to the database's encoding,
         * where the default (the database's own) would take their bytes as
         * that encoding, "caf\xc3\xa9" as five characters in a LATIN1 database. */
        if (PQsetClientEncoding(ib->pg, "UTF8") != 0) {
                bool gone = PQstatus(ib->pg) != CONNECTION_OK;
                relay_err_set(err, errlen, "could not set client_encoding to UTF8: %s",
                              PQerrorMessage(ib->pg));
                chomp(err);
                return gone ? RELAY_EIO : RELAY_ESETUP;
        }
        char what[RELAY_ERRBUF];
        snprintf(what, sizeof(what), "could not prepare \"%s\"", accept_sql);
        if ((rc = prepare(ib, "inbox_accept", accept_sql, 4, accept_types, what,
                          "run sql/006_inbox.sql in the consumer's database, or put the schema "
                          "holding inbox_accept() in its search_path",
                          err, errlen)))
                return rc;
        snprintf(what, sizeof(what), "could not prepare \"inbox.handler\" (%.300s)", cfg->handler);
        return prepare(ib, "inbox_handler", cfg->handler, 7, handler_types, what,
                       "it may use $1 key text, $2 headers jsonb, $3 payload, $4 topic text, $5 "
                       "partition integer, $6 offset bigint, $7 message id text",
                       err, errlen);
}

/* Connect until it works, the setup is refused or we are told to stop. */
static int pg_ensure(inbox_t *ib, char *err, size_t errlen)
{
        int64_t backoff = ib->cfg->reconnect_backoff_ms;
        bool warned = false;

        if (ib->pg && PQstatus(ib->pg) == CONNECTION_OK)
                return 0;
        while (!*ib->stop) {
                int rc = pg_open(ib, err, errlen);
                if (rc != RELAY_EIO) {
                        if (rc == 0 && warned)
                                relay_log_info("connected to PostgreSQL again");
                        return rc;
                }
                relay_log_warning("%s, retrying in %lld ms", err, (long long)backoff);
                warned = true;
                sleep_ms(backoff, ib);
                backoff = backoff * 2 > ib->cfg->reconnect_backoff_max_ms
                                  ? ib->cfg->reconnect_backoff_max_ms
                                  : backoff * 2;
        }
        relay_err_set(err, errlen, "stopped while connecting to PostgreSQL");
        return RELAY_EIO;
}

/* Run a statement without result rows of interest; false with err filled on
 * failure, and *unable (when not NULL) set as pg_error() says. */
static bool pg_cmd(PGconn *pg, const char *sql, bool *unable, char *err, size_t errlen)
{
        PGresult *r = PQexec(pg, sql);
        bool good = PQresultStatus(r) == PGRES_COMMAND_OK;
        if (!good) {
                bool u = pg_error(err, errlen, sql, r, pg);
                if (unable)
                        *unable = u;
        }
        PQclear(r);
        return good;
}

/* The message's parameters, built once per message. */
typedef struct {
        char *id;
        char *key;     /* NULL for a NULL key */
        char *headers; /* JSON text */
        const char *payload;
        int payload_len;
        bool payload_null;
        char partition[16];
        char offset[24];
} params_t;

static void params_free(params_t *p)
{
        free(p->id);
        free(p->key);
        free(p->headers);
}

/*
 * Everything the handler will get, checked before any transaction: a
 * message that PostgreSQL cannot even receive (no id, a key or header that
 * is not UTF-8 text, a payload that is not UTF-8 text for a text handler
 * or not jsonb's JSON for a jsonb one) would fail every attempt the same
 * way, so it is dead-lettered at once.
 */
static int params_build(const relay_inbox_config_t *cfg, rd_kafka_message_t *m, params_t *p,
                        char *err, size_t errlen)
{
        rd_kafka_headers_t *hdrs = NULL;
        int rc;

        memset(p, 0, sizeof(*p));
        if (rd_kafka_message_headers(m, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR)
                hdrs = NULL;
        if ((rc = relay_inbox_message_id(hdrs, cfg->id_header, &p->id, err, errlen)) != 0)
                return rc;
        if ((rc = relay_inbox_headers_json(hdrs, &p->headers, err, errlen)) != 0)
                return rc;
        if (m->key) {
                if (!relay_inbox_utf8_ok(m->key, m->key_len)) {
                        relay_err_set(err, errlen, "the message key is not UTF-8 text");
                        return RELAY_EMAP;
                }
                if (!(p->key = relay_dupn(m->key, m->key_len)))
                        return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
        }
        p->payload_null = m->payload == NULL;
        p->payload = m->payload ? m->payload : "";
        p->payload_len = (int)m->len;
        /* Text goes as a C string, which a NUL byte would cut short unseen,
         * and as UTF-8 (the connection's client_encoding). */
        if (!p->payload_null && cfg->payload == RELAY_INBOX_PAYLOAD_TEXT) {
                const char *bad = memchr(m->payload, '\0', m->len) ? "holds a NUL byte"
                                  : !relay_inbox_utf8_ok(m->payload, m->len) ? "is not UTF-8 text"
                                                                              : NULL;
                if (bad) {
                        relay_err_set(err, errlen,
                                      "the message payload %s (inbox.payload is text; bytea "
                                      "takes any bytes)",
                                      bad);
                        return RELAY_EMAP;
                }
        }
        if (!p->payload_null && cfg->payload == RELAY_INBOX_PAYLOAD_JSONB) {
                json_error_t je;
                json_t *j = NULL;
                const char *bad = NULL, *hint = "";
                /* Without JSON_ALLOW_NUL jansson refuses \u0000 as jsonb does.
                 * Its numbers are C's: one past long long or double is an
                 * overflow to it but JSON, which jsonb holds as numeric; and
                 * it stops at 2048 levels of nesting (JSON_PARSER_MAX_DEPTH),
                 * where jsonb goes as deep as max_stack_depth allows. The
                 * server judges such payloads. */
                if (!relay_inbox_utf8_ok(m->payload, m->len))
                        bad = "is not JSON";
                else if (!(j = json_loadb(m->payload, m->len, JSON_DECODE_ANY, &je)) &&
                         json_error_code(&je) == json_error_null_character) {
                        bad = "holds \\u0000, which jsonb cannot store";
                        hint = "; text or bytea takes it";
                } else if (!j && json_error_code(&je) != json_error_numeric_overflow &&
                           json_error_code(&je) != json_error_stack_overflow)
                        bad = "is not JSON";
                if (bad) {
                        relay_err_set(err, errlen,
                                      "the message payload %s (inbox.payload is jsonb%s)", bad,
                                      hint);
                        return RELAY_EMAP;
                }
                json_decref(j);
        }
        snprintf(p->partition, sizeof(p->partition), "%d", (int)m->partition);
        snprintf(p->offset, sizeof(p->offset), "%lld", (long long)m->offset);
        return 0;
}

/* One attempt: BEGIN, inbox_accept, the handler if new, COMMIT. */
static tx_result_t apply_once(inbox_t *ib, rd_kafka_message_t *m, const params_t *p,
                              bool *was_new, char *err, size_t errlen)
{
        const char *topic = rd_kafka_topic_name(m->rkt);
        bool unable = false; /* the server's state failed it, not the message */
        PGresult *r;

        if (!pg_cmd(ib->pg, "BEGIN", &unable, err, errlen))
                goto failed;
        {
                const char *v[4] = {p->id, topic, p->partition, p->offset};
                r = PQexecPrepared(ib->pg, "inbox_accept", 4, v, NULL, NULL, 0);
                if (PQresultStatus(r) != PGRES_TUPLES_OK) {
                        unable = pg_error(err, errlen, "inbox_accept() failed", r, ib->pg);
                        PQclear(r);
                        goto failed;
                }
                /* The server ran it, so there is no server error to quote: say
                 * what came back. A NULL read as "not new" would skip the
                 * message for good. */
                if (PQntuples(r) != 1 || PQnfields(r) != 1 || PQgetisnull(r, 0, 0)) {
                        relay_err_set(err, errlen,
                                      "inbox_accept() returned %s instead of one true or false; "
                                      "install it from sql/006_inbox.sql (or make yours return "
                                      "boolean, true for a new message)",
                                      PQntuples(r) == 1 && PQnfields(r) == 1 ? "NULL"
                                      : PQntuples(r) != 1 ? (PQntuples(r) == 0 ? "no row"
                                                                               : "several rows")
                                                           : "several columns");
                        PQclear(r);
                        goto failed;
                }
                *was_new = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
                PQclear(r);
        }
        if (*was_new) {
                const char *v[7] = {p->key,       p->headers, p->payload_null ? NULL : p->payload,
                                    topic,        p->partition, p->offset, p->id};
                int lens[7] = {0, 0, p->payload_len, 0, 0, 0, 0};
                int fmts[7] = {0, 0, ib->cfg->payload == RELAY_INBOX_PAYLOAD_BYTEA ? 1 : 0,
                               0, 0, 0, 0};
                char *payload_copy = NULL;
                /* Text and jsonb go in text format, which needs a NUL-terminated string. */
                if (!fmts[2] && v[2]) {
                        if (!(payload_copy = relay_dupn(p->payload, (size_t)p->payload_len))) {
                                relay_err_set(err, errlen, "out of memory");
                                goto failed;
                        }
                        v[2] = payload_copy;
                }
                r = PQexecPrepared(ib->pg, "inbox_handler", 7, v, lens, fmts, 0);
                free(payload_copy);
                ExecStatusType st = PQresultStatus(r);
                if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
                        unable = pg_error(err, errlen, "handler failed", r, ib->pg);
                        PQclear(r);
                        goto failed;
                }
                PQclear(r);
        }
        if (!pg_cmd(ib->pg, "COMMIT", &unable, err, errlen))
                goto failed;
        return TX_DONE;
failed:
        if (PQstatus(ib->pg) != CONNECTION_OK)
                return TX_CONNECTION;
        /* A failed COMMIT (a deferred constraint) has ended the transaction
         * already: a ROLLBACK would only draw the server's warning "there is
         * no transaction in progress". */
        if (PQtransactionStatus(ib->pg) != PQTRANS_IDLE) {
                char rb[RELAY_ERRBUF];
                if (!pg_cmd(ib->pg, "ROLLBACK", NULL, rb, sizeof(rb)) &&
                    PQstatus(ib->pg) != CONNECTION_OK)
                        return TX_CONNECTION;
        }
        return unable ? TX_SERVER : TX_HANDLER;
}

/* --- Kafka offsets and the dead-letter topic ------------------------------- */

static void store_offset(inbox_t *ib, rd_kafka_message_t *m)
{
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(l, rd_kafka_topic_name(m->rkt), m->partition)->offset =
                m->offset + 1;
        rd_kafka_resp_err_t e = rd_kafka_offsets_store(ib->consumer, l);
        /* _STATE: the partition was revoked meanwhile; its next owner finds the
         * message in the inbox. */
        if (e && e != RD_KAFKA_RESP_ERR__STATE)
                relay_log_warning("could not store offset %lld of \"%s\" [%d]: %s",
                                  (long long)m->offset + 1, rd_kafka_topic_name(m->rkt),
                                  (int)m->partition, rd_kafka_err2str(e));
        rd_kafka_topic_partition_list_destroy(l);
        ib->stored_since_commit = true;
}

static void commit_async(inbox_t *ib, bool force)
{
        int64_t now = relay_now_ms();
        if (!ib->stored_since_commit || (!force && now - ib->last_commit_ms < COMMIT_INTERVAL_MS))
                return;
        rd_kafka_resp_err_t e = rd_kafka_commit(ib->consumer, NULL, 1);
        if (e && e != RD_KAFKA_RESP_ERR__NO_OFFSET)
                relay_log_warning("could not commit offsets to Kafka: %s, retrying later",
                                  rd_kafka_err2str(e));
        ib->last_commit_ms = now;
        ib->stored_since_commit = false;
}

/* Write the dead-letter copy and wait for Kafka's acknowledgement. */
static int dead_letter(inbox_t *ib, rd_kafka_message_t *m, const char *why, int attempts,
                       char *err, size_t errlen)
{
        const relay_inbox_config_t *cfg = ib->cfg;
        rd_kafka_resp_err_t res = RD_KAFKA_RESP_ERR__IN_PROGRESS;
        rd_kafka_headers_t *src = NULL, *h;
        char kerr[512], num[32];

        if (!ib->dlq) {
                rd_kafka_conf_t *kc;
                int rc = kafka_conf(cfg, true, &kc, err, errlen);
                if (rc != 0)
                        return rc;
                rd_kafka_conf_set_dr_msg_cb(kc, on_dlq_delivery);
                if (!(ib->dlq = rd_kafka_new(RD_KAFKA_PRODUCER, kc, kerr, sizeof(kerr)))) {
                        rd_kafka_conf_destroy(kc);
                        relay_err_set(err, errlen, "could not create the dead-letter producer: %s",
                                      kerr);
                        return RELAY_EKAFKA;
                }
        }
        if (rd_kafka_message_headers(m, &src) == RD_KAFKA_RESP_ERR_NO_ERROR && src)
                h = rd_kafka_headers_copy(src);
        else
                h = rd_kafka_headers_new(8);
        rd_kafka_header_add(h, "outbox.inbox.error.message", -1, why, -1);
        rd_kafka_header_add(h, "outbox.inbox.error.topic", -1, rd_kafka_topic_name(m->rkt), -1);
        snprintf(num, sizeof(num), "%d", (int)m->partition);
        rd_kafka_header_add(h, "outbox.inbox.error.partition", -1, num, -1);
        snprintf(num, sizeof(num), "%lld", (long long)m->offset);
        rd_kafka_header_add(h, "outbox.inbox.error.offset", -1, num, -1);
        snprintf(num, sizeof(num), "%d", attempts);
        rd_kafka_header_add(h, "outbox.inbox.error.attempts", -1, num, -1);
        /* On success rd_kafka_producev takes the headers; on failure they stay ours. */
        rd_kafka_resp_err_t e = rd_kafka_producev(
                ib->dlq, RD_KAFKA_V_TOPIC(cfg->errors_dlq_topic),
                RD_KAFKA_V_KEY(m->key, m->key_len), RD_KAFKA_V_VALUE(m->payload, m->len),
                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(h),
                RD_KAFKA_V_OPAQUE(&res), RD_KAFKA_V_END);
        if (e == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE) {
                /* librdkafka's own limit (its error text says "Broker"): default
                 * 1000000, below what a broker takes by default. */
                size_t ll = sizeof(num);
                if (rd_kafka_conf_get(rd_kafka_conf(ib->dlq), "message.max.bytes", num, &ll) !=
                    RD_KAFKA_CONF_OK)
                        snprintf(num, sizeof(num), "?");
                rd_kafka_headers_destroy(h);
                relay_err_set(err, errlen,
                              "could not write to dead-letter topic \"%s\": the copy (a value of "
                              "%zu bytes, with key and headers) is above the dead-letter "
                              "producer's kafka.message.max.bytes (%s); raise "
                              "kafka.message.max.bytes, and the topic's max.message.bytes if need "
                              "be",
                              cfg->errors_dlq_topic, m->len, num);
                return RELAY_EKAFKA;
        }
        if (e) {
                rd_kafka_headers_destroy(h);
                relay_err_set(err, errlen, "could not write to dead-letter topic \"%s\": %s",
                              cfg->errors_dlq_topic, rd_kafka_err2str(e));
                return RELAY_EKAFKA;
        }
        int64_t deadline = relay_now_ms() + DLQ_TIMEOUT_MS;
        while (res == RD_KAFKA_RESP_ERR__IN_PROGRESS && relay_now_ms() < deadline)
                rd_kafka_poll(ib->dlq, 100);
        if (res == RD_KAFKA_RESP_ERR__IN_PROGRESS) {
                /* The message may still be delivered: wait for its report before
                 * &res goes out of scope. */
                rd_kafka_flush(ib->dlq, -1);
        }
        if (res) {
                relay_err_set(err, errlen, "could not write to dead-letter topic \"%s\": %s",
                              cfg->errors_dlq_topic, rd_kafka_err2str(res));
                return RELAY_EKAFKA;
        }
        return 0;
}

/*
 * One message to its end: applied (or refused as a duplicate), dead-lettered
 * or, under errors.policy=stop, refused. Returns 0 to go on, else an exit
 * code.
 */
static int handle(inbox_t *ib, rd_kafka_message_t *m)
{
        const relay_inbox_config_t *cfg = ib->cfg;
        const char *topic = rd_kafka_topic_name(m->rkt);
        char err[RELAY_ERRBUF], why[RELAY_ERRBUF];
        params_t p;
        int attempts = 0;
        int64_t backoff = cfg->errors_backoff_ms, reconnect = cfg->reconnect_backoff_ms;

        int rc = params_build(cfg, m, &p, why, sizeof(why));
        if (rc == RELAY_ENOMEM) {
                relay_log_fatal("%s", why);
                params_free(&p);
                return RELAY_INBOX_EXIT_FATAL;
        }
        while (rc == 0) {
                bool was_new = false;
                if ((rc = pg_ensure(ib, err, sizeof(err))) != 0) {
                        params_free(&p);
                        if (rc == RELAY_ESETUP) {
                                relay_log_fatal("%s", err);
                                return RELAY_INBOX_EXIT_SETUP;
                        }
                        return RELAY_INBOX_EXIT_OK; /* told to stop while reconnecting */
                }
                tx_result_t t = apply_once(ib, m, &p, &was_new, why, sizeof(why));
                if (t == TX_DONE) {
                        if (was_new)
                                ib->applied++;
                        else
                                ib->duplicates++;
                        relay_log_debug("%s message \"%s\" of \"%s\" [%d] at offset %lld",
                                        was_new ? "applied" : "skipped already applied", p.id,
                                        topic, (int)m->partition, (long long)m->offset);
                        params_free(&p);
                        store_offset(ib, m);
                        return 0;
                }
                if (t == TX_CONNECTION || t == TX_SERVER) {
                        /* Not the handler's fault: no attempt counted. But wait as after
                         * a failed connect: the server may be going down, or the handler
                         * may end its session each time, and reconnecting at once would
                         * retry it hundreds of times a second. A server that takes no
                         * writes (a demoted primary, a full disk) fails every message
                         * alike: counted, each would be dead-lettered, its effect never
                         * applied. A new connection may find the new primary
                         * (target_session_attrs) or the setting changed. */
                        if (t == TX_SERVER) {
                                PQfinish(ib->pg);
                                ib->pg = NULL;
                        }
                        relay_log_warning("%s during message at offset %lld of \"%s\" [%d]: "
                                          "%s, reconnecting in %lld ms",
                                          t == TX_SERVER ? "PostgreSQL cannot take writes now"
                                                         : "lost the PostgreSQL connection",
                                          (long long)m->offset, topic, (int)m->partition, why,
                                          (long long)reconnect);
                        sleep_ms(reconnect, ib);
                        reconnect = reconnect * 2 > cfg->reconnect_backoff_max_ms
                                            ? cfg->reconnect_backoff_max_ms
                                            : reconnect * 2;
                        continue;
                }
                attempts++;
                if (attempts > cfg->errors_retries) {
                        rc = RELAY_EREJECTED;
                        break;
                }
                relay_log_warning("message \"%s\" at offset %lld of \"%s\" [%d]: %s, retrying "
                                  "in %lld ms (attempt %d of %lld)",
                                  p.id, (long long)m->offset, topic, (int)m->partition, why,
                                  (long long)backoff, attempts + 1,
                                  (long long)cfg->errors_retries + 1);
                sleep_ms(backoff, ib);
                if (*ib->stop) {
                        params_free(&p);
                        return RELAY_INBOX_EXIT_OK; /* not applied, offset not stored */
                }
                backoff = backoff * 2 > cfg->errors_backoff_max_ms ? cfg->errors_backoff_max_ms
                                                                   : backoff * 2;
        }
        params_free(&p);
        if (cfg->errors_policy == RELAY_INBOX_ERRORS_STOP) {
                relay_log_fatal("stopping before the message at offset %lld of \"%s\" [%d]: %s "
                                "(errors.policy is stop; fix the cause and restart)",
                                (long long)m->offset, topic, (int)m->partition, why);
                return RELAY_INBOX_EXIT_STOPPED;
        }
        if (dead_letter(ib, m, why, attempts, err, sizeof(err)) != 0) {
                relay_log_fatal("stopping before the message at offset %lld of \"%s\" [%d]: %s; "
                                "it was not applied because %s",
                                (long long)m->offset, topic, (int)m->partition, err, why);
                return RELAY_INBOX_EXIT_STOPPED;
        }
        ib->dead_lettered++;
        relay_log_warning("message at offset %lld of \"%s\" [%d] written to dead-letter topic "
                          "\"%s\" after %d attempt(s): %s",
                          (long long)m->offset, topic, (int)m->partition, cfg->errors_dlq_topic,
                          attempts, why);
        store_offset(ib, m);
        return 0;
}

int relay_inbox_run(const relay_inbox_config_t *cfg, volatile sig_atomic_t *stop,
                    const volatile sig_atomic_t *hangups)
{
        inbox_t ib = {.cfg = cfg, .stop = stop, .hangups = hangups};
        char err[RELAY_ERRBUF], kerr[512];
        rd_kafka_conf_t *kc = NULL;
        rd_kafka_topic_partition_list_t *subs = NULL;
        int exit_code = RELAY_INBOX_EXIT_OK;
        const char *group = relay_pairs_get(&cfg->kafka, "group.id");

        if (!group)
                group = "outbox-inbox";

        int rc = pg_ensure(&ib, err, sizeof(err));
        if (rc != 0) {
                PQfinish(ib.pg);
                if (rc == RELAY_ESETUP) {
                        relay_log_fatal("%s", err);
                        return RELAY_INBOX_EXIT_SETUP;
                }
                relay_log_info("%s", err); /* stopped while connecting */
                return RELAY_INBOX_EXIT_OK;
        }
        if (kafka_conf(cfg, false, &kc, err, sizeof(err)) != 0) {
                relay_log_fatal("%s", err);
                PQfinish(ib.pg);
                return RELAY_INBOX_EXIT_CONFIG;
        }
        rd_kafka_conf_set_opaque(kc, &ib);
        rd_kafka_conf_set_rebalance_cb(kc, on_rebalance);
        rd_kafka_conf_set_offset_commit_cb(kc, on_commit);
        if (!(ib.consumer = rd_kafka_new(RD_KAFKA_CONSUMER, kc, kerr, sizeof(kerr)))) {
                rd_kafka_conf_destroy(kc);
                relay_log_fatal("could not create the Kafka consumer: %s", kerr);
                PQfinish(ib.pg);
                return RELAY_INBOX_EXIT_CONFIG;
        }
        rd_kafka_poll_set_consumer(ib.consumer);
        subs = rd_kafka_topic_partition_list_new((int)cfg->n_topics);
        for (size_t i = 0; i < cfg->n_topics; i++)
                rd_kafka_topic_partition_list_add(subs, cfg->topics[i], RD_KAFKA_PARTITION_UA);
        rd_kafka_resp_err_t se = rd_kafka_subscribe(ib.consumer, subs);
        rd_kafka_topic_partition_list_destroy(subs);
        if (se) {
                relay_log_fatal("could not subscribe to the topics: %s", rd_kafka_err2str(se));
                exit_code = RELAY_INBOX_EXIT_CONFIG;
                goto out;
        }
        relay_log_info("consuming %zu topic(s) as group \"%s\" (read_committed)", cfg->n_topics,
                       group);
        ib.last_commit_ms = relay_now_ms();

        while (!*stop) {
                turn(&ib);
                rd_kafka_message_t *m = rd_kafka_consumer_poll(ib.consumer, POLL_MS);
                if (ib.rebalance_err[0]) {
                        relay_log_fatal("%s", ib.rebalance_err);
                        if (m)
                                rd_kafka_message_destroy(m);
                        exit_code = RELAY_INBOX_EXIT_FATAL;
                        break;
                }
                if (!m) {
                        commit_async(&ib, true); /* idle: send what is stored */
                        continue;
                }
                if (m->err) {
                        if (m->err == RD_KAFKA_RESP_ERR__FATAL) {
                                char fr[512];
                                rd_kafka_fatal_error(ib.consumer, fr, sizeof(fr));
                                relay_log_fatal("Kafka consumer fatal error: %s", fr);
                                rd_kafka_message_destroy(m);
                                exit_code = RELAY_INBOX_EXIT_FATAL;
                                break;
                        }
                        if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                                relay_log_warning("Kafka consumer: %s, continuing",
                                                  rd_kafka_message_errstr(m));
                        rd_kafka_message_destroy(m);
                        continue;
                }
                exit_code = handle(&ib, m);
                rd_kafka_message_destroy(m);
                if (exit_code != 0)
                        break;
                commit_async(&ib, false);
        }
out:
        /* Everything stored belongs to a committed PostgreSQL transaction. */
        {
                rd_kafka_resp_err_t ce = rd_kafka_commit(ib.consumer, NULL, 0);
                if (ce && ce != RD_KAFKA_RESP_ERR__NO_OFFSET)
                        relay_log_warning("could not commit offsets at stop: %s (the next start "
                                          "reads some messages again; the inbox refuses them)",
                                          rd_kafka_err2str(ce));
        }
        rd_kafka_consumer_close(ib.consumer);
        rd_kafka_destroy(ib.consumer);
        if (ib.dlq) {
                rd_kafka_flush(ib.dlq, 5000);
                rd_kafka_destroy(ib.dlq);
        }
        PQfinish(ib.pg);
        relay_log_info("stopped: %llu message(s) applied, %llu already-applied duplicate(s) "
                       "skipped, %llu dead-lettered",
                       ib.applied, ib.duplicates, ib.dead_lettered);
        return exit_code;
}
