/*
 * repl.c - owns the replication connection: the server checks, the
 * publication and slot setup, START_REPLICATION and the CopyBoth stream.
 *
 * The connection runs in replication=database mode, where both replication
 * commands and plain SQL (simple query protocol) work, so the catalog
 * checks need no second connection. Every PGresult is cleared before the
 * function that got it returns; the CopyData buffer of the previous read is
 * freed at the start of the next one.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/repl.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>

#include "relay/log.h"
#include "relay/lsn.h"
#include "relay/pgconn.h"

struct relay_repl {
        PGconn *conn;
        /* Borrowed from the settings. */
        const char *slot;
        const char *publication;
        const relay_table_name_t *tables; /* outbox.table's */
        size_t ntables;
        relay_outbox_source_t source;
        bool failover; /* slot.failover: the slot is created or altered with FAILOVER */
        bool failover_altered; /* ensure_slot turned failover on for an existing slot */
        bool failover_unguarded; /* failover, but synchronized_standby_slots is empty */
        bool need_updates; /* table.op.invalid.behavior = error or fatal */
        const relay_settings_t *set; /* borrowed: the columns the mapping reads */
        int server_version;
        int proto_version;
        int64_t wal_sender_timeout_ms;
        char system_id[32]; /* IDENTIFY_SYSTEM's systemid: names the database cluster */
        relay_lsn_t wal_end; /* IDENTIFY_SYSTEM's xlogpos: the server's WAL end at connecting */
        char *copybuf; /* PQgetCopyData's buffer of the previous read */
        char backfill_slot[64]; /* the temporary slot of a backfill, "" when none */
        relay_tick_fn *tick; /* NULL: none */
        void *tick_ctx;
        bool pub_skipped; /* the walsender warned it skipped our publication (notice_receiver) */
};

/* How often a command that waits on other sessions ticks (exec_waiting()). */
#define TICK_MS 100

/* After a cancel, how long the server has to end the command before the
 * wait gives it up (as relay_repl_stop() gives up the stream's end). */
#define CANCEL_WAIT_MS 5000

/* PostgreSQL's messages end with a newline; keep ours one line. */
/* "what: msg; fix" (fix may be NULL), msg's trailing newline dropped. */
static void set_pg_error_fix(char *err, size_t errlen, const char *what, const char *msg,
                             const char *fix)
{
        size_t n = strlen(msg);
        while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
                n--;
        relay_err_set(err, errlen, "%s: %.*s%s%s", what, (int)n, msg, fix ? "; " : "",
                      fix ? fix : "");
}

static void set_pg_error(char *err, size_t errlen, const char *what, const char *msg)
{
        set_pg_error_fix(err, errlen, what, msg, NULL);
}

static void result_error(char *err, size_t errlen, const char *what, const PGresult *res,
                         const PGconn *conn)
{
        const char *m = res ? PQresultErrorMessage(res) : PQerrorMessage(conn);
        if (!m || !*m)
                m = PQerrorMessage(conn);
        set_pg_error(err, errlen, what, m);
}

/* The server's words for a dropped or invalidated slot ("can no longer get
 * changes", "does not exist") do not say what it means for us: add it, as
 * relay_repl_ensure_slot's own messages do. */
static int slot_lost(char *err, size_t errlen)
{
        char server[RELAY_ERRBUF];
        relay_err_set(server, sizeof(server), "%s", err);
        return relay_err(err, errlen, RELAY_ESLOTLOST,
                         "%s; events may be missing: check the outbox for events written since the "
                         "last one in Kafka, then drop the slot or set slot.recreate = true",
                         server);
}

/*
 * The walsender's "publication does not exist" (42704) mid-stream: the
 * publication was dropped (and maybe created again) while the slot had
 * changes to send. PostgreSQL 14 to 17 look it up as of each change they
 * decode, so every restart fails at the same change, even once it exists
 * again: the slot is stuck, not lost, and slot.recreate (a lost slot's
 * remedy) does not move it: retrying "to recreate it" would fail the same
 * way for ever. Only skipping those changes does: a setup error.
 */
static int publication_gone(const relay_repl_t *r, const PGresult *res, char *err, size_t errlen)
{
        /* The primary message alone: the fix reads as following the problem,
         * not the CONTEXT line (which change failed) after it. */
        const char *m = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
        return relay_err(err, errlen, RELAY_ESETUP,
                         "replication stream ended: %s; it was dropped while the slot had changes "
                         "to send, and PostgreSQL "
                         "before 18 cannot decode past them even once it exists again: create it "
                         "if it is missing, move the slot past them with SELECT "
                         "pg_replication_slot_advance('%s', pg_current_wal_lsn()) or drop the "
                         "slot, and check the outbox for events written since the last one in "
                         "Kafka",
                         m ? m : "publication does not exist", r->slot);
}

/*
 * PostgreSQL 18's pgoutput no longer fails at a change its publication
 * does not cover for being missing (dropped, not yet made): it warns
 * "skipped loading publication" (55000) and decodes on without it, so
 * the outbox rows written meanwhile are never sent, and confirming what
 * follows would lose them in silence. The same stop as before 18, with
 * what happened there.
 */
static int publication_skipped(const relay_repl_t *r, char *err, size_t errlen)
{
        return relay_err(err, errlen, RELAY_ESETUP,
                         "replication stream: publication \"%s\" does not exist; it was dropped "
                         "while the slot had changes to send, which PostgreSQL 18 skips with a "
                         "warning (their events never reach the relay): create it if it is "
                         "missing, move the slot past them with SELECT "
                         "pg_replication_slot_advance('%s', pg_current_wal_lsn()) or drop the "
                         "slot, and check the outbox for events written since the last one in "
                         "Kafka",
                         r->publication, r->slot);
}

static bool sqlstate_is(const PGresult *res, const char *code)
{
        const char *s = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
        return s && strcmp(s, code) == 0;
}

/*
 * The server's notices are logged as every connection's are; one from the
 * walsender saying it skipped our publication (publication_skipped()) is
 * also remembered for relay_repl_read(). Known by SQLSTATE, the untranslated
 * severity and the publication's name, which no lc_messages translates.
 */
static void notice_receiver(void *arg, const PGresult *res)
{
        relay_repl_t *r = arg;
        const char *sev = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
        const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
        if (sqlstate_is(res, "55000") && sev && strcmp(sev, "WARNING") == 0 && msg &&
            strstr(msg, r->publication))
                r->pub_skipped = true;
        relay_log_server_notice(NULL, PQresultErrorMessage(res));
}

/* A failed query on a connection that is gone is a lost connection, not a setup problem. */
static int failed_query_code(const relay_repl_t *r)
{
        return PQstatus(r->conn) == CONNECTION_BAD ? RELAY_EIO : RELAY_ESETUP;
}

/*
 * A command failed with res: err says what failed ("could not ...", from
 * fmt) and the server's message. Returns failed_query_code(); the caller
 * clears res, and may judge by its SQLSTATE instead.
 */
static int command_failed(const relay_repl_t *r, const PGresult *res, char *err, size_t errlen,
                          const char *fmt, ...) RELAY_PRINTF(5, 6);
static int command_failed(const relay_repl_t *r, const PGresult *res, char *err, size_t errlen,
                          const char *fmt, ...)
{
        char what[RELAY_ERRBUF];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(what, sizeof(what), fmt, ap);
        va_end(ap);
        result_error(err, errlen, what, res, r->conn);
        return failed_query_code(r);
}

/* s quoted as an SQL literal ('L') or identifier ('I') for this connection. */
static void add_quoted(relay_strbuf_t *b, const relay_repl_t *r, char how, const char *s)
{
        char *q = how == 'L' ? PQescapeLiteral(r->conn, s, strlen(s))
                             : PQescapeIdentifier(r->conn, s, strlen(s));
        if (q == NULL)
                b->failed = true;
        else
                relay_strbuf_adds(b, q);
        PQfreemem(q);
}

/*
 * PQexec() for a command that may wait on other sessions for as long as they
 * take: CREATE_REPLICATION_SLOT waits until every transaction that was
 * running when it began has ended. Blocking in PQexec() there stopped the
 * main loop for that long (/healthz said "stalled", no WATCHDOG=1, a stop
 * signal waited too), so the command is sent asynchronously and r->tick
 * runs every TICK_MS while the answer is awaited; a tick that asks to stop
 * cancels the command, which then fails with the server's cancellation.
 * The ticks go on until then: a server that does not act on the cancel (a
 * backend stopped or stuck, a cancel lost on the way) kept the loop from
 * feeding the watchdog and /healthz for as long, and the stop waited with
 * it; after CANCEL_WAIT_MS the wait gives up, and the connection, with the
 * command still in progress, is of no more use but to be closed.
 * NULL only when out of memory.
 */
static PGresult *exec_waiting(relay_repl_t *r, const char *sql)
{
        return relay_pg_exec_waiting(r->conn, sql, -1, NULL, r->tick, r->tick_ctx);
}

PGresult *relay_pg_exec_waiting(PGconn *conn, const char *sql, int nparams,
                                const char *const *params, relay_tick_fn *tick, void *ctx)
{
        PGresult *res, *last = NULL;
        int64_t cancel_deadline = 0; /* 0: not cancelled */

        if (tick == NULL)
                return nparams < 0 ? PQexec(conn, sql)
                                   : PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0);
        if (!(nparams < 0 ? PQsendQuery(conn, sql)
                          : PQsendQueryParams(conn, sql, nparams, NULL, params, NULL, NULL, 0)))
                return PQmakeEmptyPGresult(conn, PGRES_FATAL_ERROR);
        while (PQisBusy(conn)) {
                struct pollfd p = {.fd = PQsocket(conn), .events = POLLIN};
                if (poll(&p, 1, TICK_MS) < 0 && errno != EINTR)
                        break;
                /* A lost connection: PQgetResult() below says so. */
                if (!PQconsumeInput(conn))
                        break;
                char why[RELAY_ERRBUF];
                int trc = tick(ctx, why, sizeof(why)); /* after a cancel: for the loop only */
                if (cancel_deadline != 0 && PQisBusy(conn) && relay_now_ms() >= cancel_deadline)
                        return PQmakeEmptyPGresult(conn, PGRES_FATAL_ERROR);
                if (cancel_deadline == 0 && trc != 0) {
                        PGcancel *c = PQgetCancel(conn);
                        if (c != NULL)
                                PQcancel(c, why, sizeof(why));
                        PQfreeCancel(c);
                        cancel_deadline = relay_now_ms() + CANCEL_WAIT_MS;
                }
        }
        /* As PQexec(): the last result is the answer. */
        while ((res = PQgetResult(conn)) != NULL) {
                PQclear(last);
                last = res;
        }
        return last != NULL ? last : PQmakeEmptyPGresult(conn, PGRES_FATAL_ERROR);
}

void relay_repl_set_tick(relay_repl_t *r, relay_tick_fn *tick, void *ctx)
{
        r->tick = tick;
        r->tick_ctx = ctx;
}

/*
 * The commands that wait on other sessions, before the stream starts (a
 * tick sends status updates on a started one): CREATE_REPLICATION_SLOT for
 * the transactions running when it began, CREATE PUBLICATION ... FOR TABLE
 * for a lock on a table that conflicts with its SHARE UPDATE EXCLUSIVE (a
 * CREATE INDEX CONCURRENTLY, a migration's open ALTER TABLE).
 */
static bool may_wait(const char *sql)
{
        return strncmp(sql, "CREATE_REPLICATION_SLOT ", 24) == 0 ||
               strncmp(sql, "CREATE PUBLICATION ", 19) == 0;
}

/*
 * Run an SQL command built the way PostgreSQL's format() builds one: %L
 * inserts a string argument quoted as a literal, %I as an identifier, %s as
 * it is (the relay's own fragments), %% a percent sign; nothing else is
 * converted. One place quotes every name, and no fixed buffer bounds a
 * command. CREATE_REPLICATION_SLOT waits for every transaction running when
 * it began (its snapshot needs them ended), so it runs in exec_waiting(),
 * as does every command may_wait() names. NULL (err set) when out of memory.
 */
static PGresult *vexecf(relay_repl_t *r, char *err, size_t errlen, const char *fmt, va_list ap)
{
        relay_strbuf_t b = {0};
        PGresult *res = NULL;

        for (const char *p = fmt; *p != '\0'; p++) {
                if (*p != '%') {
                        relay_strbuf_addc(&b, *p);
                } else if (*++p == '%') {
                        relay_strbuf_addc(&b, '%');
                } else {
                        assert(*p == 'L' || *p == 'I' || *p == 's');
                        const char *arg = va_arg(ap, const char *);
                        if (*p == 's')
                                relay_strbuf_adds(&b, arg);
                        else
                                add_quoted(&b, r, *p, arg);
                }
        }
        char *sql = relay_strbuf_finish(&b);
        if (sql != NULL)
                res = may_wait(sql) ? exec_waiting(r, sql) : PQexec(r->conn, sql);
        free(sql);
        if (res == NULL)
                relay_err_set(err, errlen, "out of memory");
        return res;
}

static PGresult *execf(relay_repl_t *r, char *err, size_t errlen, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        PGresult *res = vexecf(r, err, errlen, fmt, ap);
        va_end(ap);
        return res;
}

/* execf() for a query that must succeed; *res set on success (caller clears). */
static int queryf(relay_repl_t *r, PGresult **res, char *err, size_t errlen, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        *res = vexecf(r, err, errlen, fmt, ap);
        va_end(ap);
        if (*res == NULL)
                return RELAY_ENOMEM;
        if (PQresultStatus(*res) == PGRES_TUPLES_OK || PQresultStatus(*res) == PGRES_COMMAND_OK)
                return 0;
        result_error(err, errlen, "could not query the server", *res, r->conn);
        PQclear(*res);
        *res = NULL;
        return failed_query_code(r);
}

void relay_repl_free(relay_repl_t *r)
{
        if (!r)
                return;
        if (r->copybuf)
                PQfreemem(r->copybuf);
        if (r->conn)
                PQfinish(r->conn);
        free(r);
}

/* The first row's first value of a query (caller frees); NULL with *rc 0
 * when it has none. */
static char *single_value(relay_repl_t *r, const char *sql, char *err, size_t errlen, int *rc)
{
        PGresult *res;
        char *v = NULL;

        if ((*rc = queryf(r, &res, err, errlen, "%s", sql)) != 0)
                return NULL;
        if (PQntuples(res) > 0 && !PQgetisnull(res, 0, 0)) {
                v = strdup(PQgetvalue(res, 0, 0));
                *rc = v ? 0 : RELAY_ENOMEM;
        }
        PQclear(res);
        return v;
}

/* SHOW's form of a time in ms ("10s", "60000ms", "1min", "0", and "1d" for
 * 24h: the largest unit that divides it) -> ms */
static int64_t parse_pg_duration_ms(const char *s)
{
        char *end;
        long long v = strtoll(s, &end, 10);
        if (strcmp(end, "ms") == 0 || *end == '\0')
                return v;
        if (strcmp(end, "s") == 0)
                return v * 1000;
        if (strcmp(end, "min") == 0)
                return v * 60000;
        if (strcmp(end, "h") == 0)
                return v * 3600000;
        if (strcmp(end, "d") == 0)
                return v * 86400000;
        return 60000;
}

/*
 * The formats values are read in, then idle_in_transaction_session_timeout
 * off: a backfill holds two transactions idle for as long as the table
 * takes, the replication connection's (the snapshot it exported lives in
 * it until the slot is made permanent) and the backfill's own between
 * FETCHes while Kafka takes the rows. A database or role that set it ended
 * the walsender, dropping the temporary slot, and every row was backfilled
 * again (0234).
 */
#define RELAY_SESSION_OPTIONS                                                                      \
        "-c datestyle=ISO -c intervalstyle=postgres -c extra_float_digits=3 -c TimeZone=UTC "      \
        "-c bytea_output=hex -c idle_in_transaction_session_timeout=0"

/*
 * The server options to connect with: the user's own, then the relay's,
 * which come last and so win for the settings the relay depends on.
 * Passing only the relay's would silently drop the user's (e.g. -c
 * logical_decoding_work_mem=...).
 *
 * The user's are what libpq would send: the conninfo's "options", else
 * those of its service (service= or PGSERVICE, from the service file),
 * else PGOPTIONS. PQconninfoParse() reads the conninfo string alone and
 * PQconndefaults() sees no service= in it: libpq resolves all of it only
 * for a connection object, whose parameters PQconninfo() returns. So a
 * connection object is made with an sslmode libpq refuses, which fails
 * it after the parameters are resolved and before anything is connected
 * (no server sees it, as it would with the user's sslmode). A conninfo or
 * service libpq refuses gives no options here, and libpq's message in
 * perr (NULL: not wanted): the parameters were never resolved, which no
 * retry changes. Caller frees; NULL when out of memory.
 */
#define PROBE_SSLMODE "resolve-only"

static char *session_options(const char *conninfo, const char *extra, char *perr,
                             size_t perrlen)
{
        /* After the expanded conninfo, so its sslmode does not count. */
        const char *keys[] = {"dbname", "sslmode", NULL};
        const char *vals[] = {conninfo, PROBE_SSLMODE, NULL};
        const char *user = NULL;
        bool resolved = false;
        PQconninfoOption *eff = NULL;
        char *out = NULL;

        /* As relay_repl_connect(): an empty conninfo leaves all to PG* variables. */
        PGconn *probe = conninfo && *conninfo ? PQconnectStartParams(keys, vals, 1)
                                              : PQconnectStartParams(keys + 1, vals + 1, 0);
        if (!probe)
                return NULL;
        if (!(eff = PQconninfo(probe))) {
                PQfinish(probe);
                return NULL;
        }
        /* libpq sets the parameters (our sslmode among them) only once the
         * conninfo, its service and the PG* variables are resolved: a
         * service not found, a service file or conninfo it cannot read,
         * leaves them unset (whatever language libpq's message is in). */
        for (PQconninfoOption *o = eff; o->keyword; o++)
                if (strcmp(o->keyword, "options") == 0 && o->val && *o->val)
                        user = o->val;
                else if (strcmp(o->keyword, "sslmode") == 0 && o->val &&
                         strcmp(o->val, PROBE_SSLMODE) == 0)
                        resolved = true;
        if (!resolved && perr)
                set_pg_error_fix(perr, perrlen, "could not resolve the connection parameters",
                                 PQerrorMessage(probe),
                                 "check postgres.conninfo, PGSERVICE and the service file "
                                 "(PGSERVICEFILE, else ~/.pg_service.conf, else pg_service.conf "
                                 "in PGSYSCONFDIR)");
        size_t n = (user ? strlen(user) + 1 : 0) + sizeof(RELAY_SESSION_OPTIONS) +
                   (extra ? strlen(extra) + 1 : 0);
        if ((out = malloc(n)))
                snprintf(out, n, "%s%s%s%s%s", user ? user : "", user ? " " : "",
                         RELAY_SESSION_OPTIONS, extra ? " " : "", extra ? extra : "");
        PQconninfoFree(eff);
        PQfinish(probe);
        return out;
}

char *relay_repl_session_options(const char *conninfo, const char *extra)
{
        return session_options(conninfo, extra, NULL, 0);
}

/* IDENTIFY_SYSTEM: one row of systemid, timeline, xlogpos (the server's
 * WAL flush position, X/X) and dbname, all as text. */
static int identify_system(relay_repl_t *r, char *err, size_t errlen)
{
        PGresult *res;
        int rc;

        if ((rc = queryf(r, &res, err, errlen, "IDENTIFY_SYSTEM")))
                return rc;
        if (PQntuples(res) != 1 || PQnfields(res) < 3 || PQgetisnull(res, 0, 2) ||
            relay_lsn_parse(PQgetvalue(res, 0, 2), &r->wal_end) != 0) {
                rc = relay_err(err, errlen, RELAY_EPROTO,
                               "IDENTIFY_SYSTEM returned no valid WAL position (%d rows, %d "
                               "columns)",
                               PQntuples(res), PQnfields(res));
        } else {
                snprintf(r->system_id, sizeof(r->system_id), "%s", PQgetvalue(res, 0, 0));
        }
        PQclear(res);
        return rc;
}

int relay_repl_connect(relay_repl_t **out, const relay_settings_t *set,
                       const volatile sig_atomic_t *stop, char *err, size_t errlen)
{
        /* The first dbname entry is expanded as the user's conninfo (expand_dbname);
         * the entries after it override: replication mode, and the session
         * settings PostgreSQL's own subscriber uses so values arrive in one
         * predictable text format (after the user's own options). The name
         * is only a fallback, as the subscriber's: an application_name the
         * user gave (conninfo, PGAPPNAME) is what synchronous_standby_names
         * and pg_stat_replication know this walsender by. */
        const char *keys[] = {"dbname", "replication", "client_encoding", "options",
                              "fallback_application_name", NULL};
        char perr[RELAY_ERRBUF] = "";
        char *options = session_options(set->postgres_conninfo, NULL, perr, sizeof(perr));
        const char *vals[] = {set->postgres_conninfo[0] != '\0' ? set->postgres_conninfo : NULL,
                              "database", "UTF8", options, "outbox-relay", NULL};
        relay_repl_t *r = calloc(1, sizeof(*r));
        int rc = RELAY_ENOMEM;
        if (!r || !options)
                goto fail;
        /* Not retried: the next try reads the same configuration. */
        if (perr[0]) {
                rc = relay_err(err, errlen, RELAY_ESETUP, "%s", perr);
                goto fail;
        }
        r->slot = set->slot_name;
        r->publication = set->publication_name;
        r->tables = set->outbox_tables;
        r->ntables = set->n_outbox_tables;
        r->source = set->outbox_source;
        r->failover = set->slot_failover;
        r->need_updates = set->invalid_op != RELAY_INVALID_OP_WARN;
        r->set = set;

        /* libpq skips a NULL value, so an empty conninfo leaves dbname to PG* variables. */
        rc = vals[0] ? relay_pgconn_connect(&r->conn, keys, vals, 1, stop)
                     : relay_pgconn_connect(&r->conn, keys + 1, vals + 1, 0, stop);
        if (r->conn)
                PQsetNoticeReceiver(r->conn, notice_receiver, r);
        free(options);
        options = NULL;
        if (rc == RELAY_ESTOPPED)
                relay_err_set(err, errlen, "stopped while connecting to PostgreSQL");
        if (rc)
                goto fail;
        if (PQstatus(r->conn) != CONNECTION_OK) {
                char m[RELAY_ERRBUF];
                relay_pgconn_failure_t f = relay_pgconn_failure(r->conn, m, sizeof(m));
                if (f == RELAY_PGCONN_PRIVILEGE) {
                        /* insufficient_privilege: no REPLICATION (the
                         * walsender's check, first), or no CONNECT on the
                         * database. */
                        const char *user = PQuser(r->conn);
                        /* Quoted, so that the fix works for a role "Relay"
                         * (no server to ask quote_ident() of: always). */
                        char *quser = user ? PQescapeIdentifier(r->conn, user, strlen(user))
                                           : NULL;
                        char what[RELAY_ERRBUF / 2];
                        char fix[RELAY_ERRBUF / 2];
                        snprintf(what, sizeof(what),
                                 "role \"%s\" is not allowed to stream logical replication",
                                 user ? user : "?");
                        snprintf(fix, sizeof(fix),
                                 "grant it with ALTER ROLE %s REPLICATION (see "
                                 "sql/003_role.sql), and CONNECT on the database if revoked",
                                 quser ? quser : "...");
                        set_pg_error_fix(err, errlen, what, m, fix);
                        PQfreemem(quser);
                } else {
                        set_pg_error_fix(err, errlen, "could not connect to PostgreSQL", m,
                                         relay_pgconn_fix(f));
                }
                rc = f == RELAY_PGCONN_AWAY ? RELAY_EIO : RELAY_ESETUP;
                goto fail;
        }

        r->server_version = PQserverVersion(r->conn);
        if (r->server_version < 140000) {
                rc = relay_err(err, errlen, RELAY_ESETUP,
                               "PostgreSQL %d.%d is not supported: outbox-relay needs "
                               "PostgreSQL 14 or later",
                               /* 13.15 is 130015; before 10, 9.6.24 was 90624 */
                               r->server_version / 10000,
                               r->server_version >= 100000 ? r->server_version % 10000
                                                           : r->server_version / 100 % 100);
                goto fail;
        }
        /* Highest pgoutput protocol each server speaks (14: 2, 15: 3, 16+: 4). */
        r->proto_version = r->server_version >= 160000 ? 4 : r->server_version >= 150000 ? 3 : 2;

        char *wal_level = single_value(r, "SHOW wal_level", err, errlen, &rc);
        if (rc)
                goto fail;
        if (!wal_level || strcmp(wal_level, "logical") != 0) {
                relay_err_set(err, errlen,
                              "wal_level is \"%s\" but logical decoding needs \"logical\"; set "
                              "wal_level = logical in postgresql.conf and restart PostgreSQL",
                              wal_level ? wal_level : "?");
                free(wal_level);
                rc = RELAY_ESETUP;
                goto fail;
        }
        free(wal_level);

        if ((rc = identify_system(r, err, errlen)))
                goto fail;

        char *timeout = single_value(r, "SHOW wal_sender_timeout", err, errlen, &rc);
        if (rc)
                goto fail;
        r->wal_sender_timeout_ms = timeout ? parse_pg_duration_ms(timeout) : 60000;
        free(timeout);

        *out = r;
        return 0;
fail:
        free(options);
        if (rc == RELAY_ENOMEM)
                relay_err_set(err, errlen, "out of memory");
        relay_repl_free(r);
        return rc;
}

int relay_repl_server_version(const relay_repl_t *r)
{
        return r->server_version;
}

bool relay_repl_failover_altered(const relay_repl_t *r)
{
        return r->failover_altered;
}

bool relay_repl_failover_unguarded(const relay_repl_t *r)
{
        return r->failover_unguarded;
}

int relay_repl_proto_version(const relay_repl_t *r)
{
        return r->proto_version;
}

int64_t relay_repl_wal_sender_timeout_ms(const relay_repl_t *r)
{
        return r->wal_sender_timeout_ms;
}

const char *relay_repl_system_id(const relay_repl_t *r)
{
        return r->system_id;
}

relay_lsn_t relay_repl_wal_end(const relay_repl_t *r)
{
        return r->wal_end;
}

/*
 * outbox.source = messages: no table. pgoutput still needs a publication
 * (it refuses to start without one), so an empty one is created when
 * missing (if may_create); one that exists is used as it is (tables it
 * publishes cost decoding but are ignored).
 */
static int message_publication(relay_repl_t *r, bool may_create, bool *created, char *err,
                               size_t errlen)
{
        PGresult *res;
        int rc;

        if ((rc = queryf(r, &res, err, errlen,
                         "SELECT 1 FROM pg_catalog.pg_publication WHERE pubname = %L",
                         r->publication)))
                return rc;
        bool exists = PQntuples(res) > 0;
        PQclear(res);
        if (exists)
                return 0;
        if (!may_create)
                return relay_err(err, errlen, RELAY_ESETUP,
                                 "publication \"%s\" does not exist; CREATE PUBLICATION %s, or "
                                 "start the relay once to create it",
                                 r->publication, r->publication);
        res = execf(r, err, errlen, "CREATE PUBLICATION %I WITH (publish = 'insert')",
                    r->publication);
        if (!res)
                return RELAY_ENOMEM;
        if (PQresultStatus(res) == PGRES_COMMAND_OK) {
                *created = true;
        } else if (!sqlstate_is(res, "42710") && !sqlstate_is(res, "23505")) {
                rc = command_failed(r, res, err, errlen,
                                    "could not create publication \"%.64s\" (create it with "
                                    "CREATE PUBLICATION %.64s, or grant CREATE on the database)",
                                    r->publication, r->publication);
        }
        PQclear(res);
        return rc;
}

/* Table i of outbox.table exists and is a table: its relkind in *kind. */
static int table_kind(relay_repl_t *r, const relay_table_name_t *t, char *kind, char *err,
                      size_t errlen)
{
        PGresult *res;
        int rc;

        if ((rc = queryf(r, &res, err, errlen,
                         "SELECT c.relkind FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace "
                         "n ON n.oid = c.relnamespace WHERE n.nspname = %L AND c.relname = %L",
                         t->schema, t->name)))
                return rc;
        if (PQntuples(res) == 0) {
                relay_err_set(err, errlen,
                              "outbox table \"%s.%s\" does not exist in database \"%s\"; create it "
                              "(see sql/001_outbox.sql) or set outbox.table",
                              t->schema, t->name, PQdb(r->conn));
                PQclear(res);
                return RELAY_ESETUP;
        }
        *kind = PQgetvalue(res, 0, 0)[0];
        PQclear(res);
        if (*kind != 'r' && *kind != 'p')
                return relay_err(err, errlen, RELAY_ESETUP,
                                 "outbox table \"%s.%s\" is not a table (relkind '%c'); set "
                                 "outbox.table to a table or a partitioned table",
                                 t->schema, t->name, *kind);
        return 0;
}

/* Whether schema.name is one of outbox.table's tables. */
static bool is_outbox_table(const relay_repl_t *r, const char *schema, const char *name)
{
        for (size_t i = 0; i < r->ntables; i++)
                if (strcmp(r->tables[i].schema, schema) == 0 && strcmp(r->tables[i].name, name) == 0)
                        return true;
        return false;
}

/*
 * An outbox table with inheritance children (CREATE TABLE ... INHERITS):
 * a row inserted into a child is a row of the outbox table to every query,
 * but logical replication sends it under the child's name (a publication
 * of the parent includes the children it has when the table is added,
 * unless it says ONLY) or, for a child created later, not at all: the
 * relay would miss it without a word. Refused
 * unless every child is itself one of outbox.table's tables. Partitions
 * (of a partitioned table) are publish_via_partition_root's business.
 */
static int inheritance_children(relay_repl_t *r, const relay_table_name_t *t, char *err,
                                size_t errlen)
{
        PGresult *res;
        int rc;

        if ((rc = queryf(r, &res, err, errlen,
                         "SELECT n.nspname, c.relname FROM pg_catalog.pg_inherits i JOIN "
                         "pg_catalog.pg_class c ON c.oid = i.inhrelid JOIN pg_catalog.pg_namespace "
                         "n ON n.oid = c.relnamespace WHERE i.inhparent = (SELECT p.oid FROM "
                         "pg_catalog.pg_class p JOIN pg_catalog.pg_namespace pn ON pn.oid = "
                         "p.relnamespace WHERE pn.nspname = %L AND p.relname = %L) ORDER BY 1, 2",
                         t->schema, t->name)))
                return rc;
        for (int i = 0; rc == 0 && i < PQntuples(res); i++) {
                const char *cs = PQgetvalue(res, i, 0), *cn = PQgetvalue(res, i, 1);
                if (!is_outbox_table(r, cs, cn))
                        rc = relay_err(err, errlen, RELAY_ESETUP,
                                       "outbox table \"%s.%s\" has an inheritance child, "
                                       "\"%s.%s\", whose rows logical replication sends, if "
                                       "at all, under the child's name, so the relay would "
                                       "ignore them; add %s.%s to outbox.table (and to the "
                                       "publication), or make the outbox table a partitioned "
                                       "one",
                                       t->schema, t->name, cs, cn, cs, cn);
        }
        PQclear(res);
        return rc;
}

/*
 * A generated column the mapping reads: pgoutput leaves generated columns
 * out of the Relation and of every row before PostgreSQL 18, and virtual
 * ones always (logicalrep_should_publish_column()); from 18 on a stored one
 * only when the publication says publish_generated_columns = stored or
 * names it in a column list. Yet pg_publication_tables.attnames lists them
 * on 15, so column_list() would pass them and every row would go to the
 * error policy as "has no column". *stored: one is stored and 18 would
 * send it (the publication's choice, checked by column_list()).
 */
static int generated_columns(relay_repl_t *r, const relay_table_name_t *t, bool *stored,
                             char *err, size_t errlen)
{
        PGresult *res;
        int rc;

        if ((rc = queryf(r, &res, err, errlen,
                         "SELECT a.attname, a.attgenerated FROM pg_catalog.pg_attribute a "
                         "JOIN pg_catalog.pg_class c ON c.oid = a.attrelid JOIN "
                         "pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = "
                         "%L AND c.relname = %L AND a.attnum > 0 AND NOT a.attisdropped AND "
                         "a.attgenerated <> ''",
                         t->schema, t->name)))
                return rc;
        for (int i = 0; rc == 0 && i < PQntuples(res); i++) {
                const char *name = PQgetvalue(res, i, 0), *key = NULL;
                bool virtual = PQgetvalue(res, i, 1)[0] == 'v';
                for (size_t w = 0; !key && w < relay_settings_n_mapped(r->set); w++) {
                        bool optional; /* present, so read all the same */
                        const char *k, *col = relay_settings_mapped_column(r->set, w, &k, &optional);
                        if (col && strcmp(col, name) == 0)
                                key = k;
                }
                if (!key)
                        continue;
                if (!virtual && r->server_version >= 180000)
                        *stored = true;
                else
                        rc = relay_err(err, errlen, RELAY_ESETUP,
                                       "column \"%s\" (%s) of outbox table \"%s.%s\" is a %s "
                                       "generated column, which logical replication %s, so every "
                                       "row would arrive without it; make it a plain column the "
                                       "application fills%s",
                                       name, key, t->schema, t->name, virtual ? "virtual" : "stored",
                                       virtual ? "never sends"
                                               : "does not send before PostgreSQL 18",
                                       virtual ? " (or, on PostgreSQL 18, a stored one the "
                                                 "publication publishes)"
                                               : "");
        }
        PQclear(res);
        return rc;
}

/* The outbox tables as SQL names, comma-separated (caller frees); NULL
 * when out of memory. */
static char *table_list(const relay_repl_t *r)
{
        relay_strbuf_t tables = {0};
        for (size_t i = 0; i < r->ntables; i++) {
                if (i > 0)
                        relay_strbuf_adds(&tables, ", ");
                add_quoted(&tables, r, 'I', r->tables[i].schema);
                relay_strbuf_addc(&tables, '.');
                add_quoted(&tables, r, 'I', r->tables[i].name);
        }
        return relay_strbuf_finish(&tables);
}

/* CREATE PUBLICATION for every outbox table, inserts only. */
static PGresult *create_publication(relay_repl_t *r, bool viaroot, bool gencols, char *err,
                                    size_t errlen)
{
        char *list = table_list(r);
        PGresult *res = NULL;

        /* Updates only when table.op.invalid.behavior must see them: deletes
         * never (the outbox is emptied by them, and without a replica
         * identity a published DELETE fails). */
        if (list != NULL)
                res = execf(r, err, errlen,
                            "CREATE PUBLICATION %I FOR TABLE %s WITH (publish = 'insert%s'%s%s)",
                            r->publication, list, r->need_updates ? ", update" : "",
                            viaroot ? ", publish_via_partition_root = true" : "",
                            gencols ? ", publish_generated_columns = stored" : "");
        else
                relay_err_set(err, errlen, "out of memory");
        free(list);
        return res;
}

/*
 * PostgreSQL 15+: a column list of the publication that leaves out a
 * column the mapping reads makes every row of the table an error, which
 * the error policy would then stop at or dead-letter, row after row:
 * refuse to start instead, with the fix (one statement, so that no insert
 * goes unpublished in between).
 */
static int column_list(relay_repl_t *r, const relay_table_name_t *t, char *err, size_t errlen)
{
        relay_strbuf_t missing = {0};
        PGresult *res;
        int rc;
        bool generated = false; /* 18: a stored generated one it leaves out */
        const char *absent = NULL, *absent_key = NULL; /* no list's fault either */

        if (r->server_version < 150000)
                return 0;
        /* Every column of the table: whether the publication sends it, and
         * whether it is generated (a stored one reaches here on 18 only,
         * generated_columns()). */
        if ((rc = queryf(r, &res, err, errlen,
                         "SELECT a.attname, a.attname = ANY (p.attnames), a.attgenerated <> '' "
                         "FROM pg_catalog.pg_publication_tables p JOIN pg_catalog.pg_namespace n "
                         "ON n.nspname = p.schemaname JOIN pg_catalog.pg_class c ON "
                         "c.relnamespace = n.oid AND c.relname = p.tablename JOIN "
                         "pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND "
                         "NOT a.attisdropped WHERE p.pubname = %L AND p.schemaname = %L AND "
                         "p.tablename = %L",
                         r->publication, t->schema, t->name)))
                return rc;
        for (size_t w = 0; w < relay_settings_n_mapped(r->set); w++) {
                bool optional, found = false;
                const char *key, *col = relay_settings_mapped_column(r->set, w, &key, &optional);
                bool sent = col == NULL;
                for (int i = 0; !sent && i < PQntuples(res); i++) {
                        if (strcmp(PQgetvalue(res, i, 0), col) != 0)
                                continue;
                        found = true;
                        sent = PQgetvalue(res, i, 1)[0] == 't';
                        generated = generated || (!sent && PQgetvalue(res, i, 2)[0] == 't');
                }
                /* One the table lacks and the relay does without (tracing,
                 * table.field.additional.missing = ignore) is no list's fault. */
                if (sent || (!found && optional))
                        continue;
                if (!found) {
                        absent = absent ? absent : col;
                        absent_key = absent_key ? absent_key : key;
                        continue;
                }
                relay_strbuf_adds(&missing, missing.len ? ", \"" : "\"");
                relay_strbuf_adds(&missing, col);
                relay_strbuf_adds(&missing, "\" (");
                relay_strbuf_adds(&missing, key);
                relay_strbuf_addc(&missing, ')');
        }
        PQclear(res);
        char *m = relay_strbuf_finish(&missing), *list = table_list(r);
        if (!m || !list)
                rc = relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
        else if (absent)
                rc = relay_err(err, errlen, RELAY_ESETUP,
                               "outbox table \"%s.%s\" has no column \"%s\" (%s), so every row "
                               "would go to the error policy; add the column, or set %s to the "
                               "column that holds it",
                               t->schema, t->name, absent, absent_key, absent_key);
        else if (*m && generated)
                rc = relay_err(err, errlen, RELAY_ESETUP,
                               "publication \"%s\" does not publish generated columns of table "
                               "\"%s.%s\", among them %s, so every row would arrive without "
                               "it; ALTER PUBLICATION %s SET (publish_generated_columns = stored)",
                               r->publication, t->schema, t->name, m, r->publication);
        else if (*m)
                rc = relay_err(err, errlen, RELAY_ESETUP,
                               "publication \"%s\" has a column list for table \"%s.%s\" "
                               "without %s, so every row would arrive without it; ALTER "
                               "PUBLICATION %s SET TABLE %s (which drops the column lists)",
                               r->publication, t->schema, t->name, m, r->publication, list);
        RELAY_FREE_ALL(m, list);
        return rc;
}

/* The publication checks; creates it when missing only if may_create. */
static int publication(relay_repl_t *r, bool may_create, bool *created, char *err, size_t errlen)
{
        PGresult *res;
        int rc;
        const relay_table_name_t *parted = NULL; /* a partitioned one, for the message */
        bool gencols = false; /* 18: a mapped column is a stored generated one */

        *created = false;
        if (r->source == RELAY_SOURCE_MESSAGES)
                return message_publication(r, may_create, created, err, errlen);
        /* A partitioned outbox ('p') works only when the publication sends
         * its partitions' rows as the root's (publish_via_partition_root):
         * otherwise they arrive under each partition's name, which is not
         * outbox.table, and would be ignored. */
        for (size_t i = 0; i < r->ntables; i++) {
                char kind = 0;
                if ((rc = table_kind(r, &r->tables[i], &kind, err, errlen)))
                        return rc;
                if (kind == 'p' && !parted)
                        parted = &r->tables[i];
                if (kind == 'r' && (rc = inheritance_children(r, &r->tables[i], err, errlen)))
                        return rc;
                if ((rc = generated_columns(r, &r->tables[i], &gencols, err, errlen)))
                        return rc;
        }
        if ((rc = queryf(r, &res, err, errlen,
                         "SELECT pubinsert, pubviaroot, pubupdate FROM pg_catalog.pg_publication "
                         "WHERE pubname = %L",
                         r->publication)))
                return rc;
        if (PQntuples(res) == 0 && !may_create) {
                relay_err_set(err, errlen,
                              "publication \"%s\" does not exist; create it as in "
                              "sql/002_publication.sql, or start the relay once to create it",
                              r->publication);
                PQclear(res);
                return RELAY_ESETUP;
        }
        if (PQntuples(res) == 0) {
                PQclear(res);
                if (!(res = create_publication(r, parted != NULL, gencols, err, errlen)))
                        return RELAY_ENOMEM;
                /* Another relay created it between our look and our CREATE:
                 * check the one that won as if it had been there (42710, or
                 * 23505 when both inserts raced into the catalog). */
                if (sqlstate_is(res, "42710") || sqlstate_is(res, "23505")) {
                        PQclear(res);
                        return publication(r, may_create, created, err, errlen);
                }
                if (PQresultStatus(res) != PGRES_COMMAND_OK) {
                        rc = command_failed(r, res, err, errlen,
                                            "could not create publication \"%.64s\" (create it "
                                            "as in sql/002_publication.sql, or grant CREATE on "
                                            "the database)",
                                            r->publication);
                        PQclear(res);
                        return rc;
                }
                *created = true;
                PQclear(res);
                return 0;
        }
        bool pubinsert = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
        bool pubviaroot = strcmp(PQgetvalue(res, 0, 1), "t") == 0;
        bool pubupdate = strcmp(PQgetvalue(res, 0, 2), "t") == 0;
        PQclear(res);
        if (parted && !pubviaroot)
                return relay_err(err, errlen, RELAY_ESETUP,
                                 "outbox table \"%s.%s\" is partitioned but publication \"%s\" "
                                 "sends its rows under each partition's name, which the relay "
                                 "would not recognise; ALTER PUBLICATION %s SET "
                                 "(publish_via_partition_root = true) before events are written "
                                 "(see sql/002_publication.sql)",
                                 parted->schema, parted->name, r->publication, r->publication);
        if (!pubinsert)
                return relay_err(err, errlen, RELAY_ESETUP,
                                 "publication \"%s\" does not publish inserts; ALTER PUBLICATION "
                                 "%s SET (publish = 'insert')",
                                 r->publication, r->publication);
        if (r->need_updates && !pubupdate)
                return relay_err(err, errlen, RELAY_ESETUP,
                                 "publication \"%s\" does not publish updates, so the relay cannot "
                                 "see an UPDATE of an outbox row as table.op.invalid.behavior = "
                                 "error or fatal asks; ALTER PUBLICATION %s SET (publish = "
                                 "'insert, update'), or set table.op.invalid.behavior = warn",
                                 r->publication, r->publication);
        for (size_t i = 0; i < r->ntables && rc == 0; i++) {
                const relay_table_name_t *t = &r->tables[i];
                if ((rc = queryf(r, &res, err, errlen,
                                 "SELECT 1 FROM pg_catalog.pg_publication_tables WHERE pubname = "
                                 "%L AND schemaname = %L AND tablename = %L",
                                 r->publication, t->schema, t->name)))
                        break;
                if (PQntuples(res) == 0) {
                        rc = relay_err(err, errlen, RELAY_ESETUP,
                                       "publication \"%s\" does not include table \"%s.%s\"; ALTER "
                                       "PUBLICATION %s ADD TABLE %s.%s",
                                       r->publication, t->schema, t->name, r->publication,
                                       t->schema, t->name);
                }
                PQclear(res);
                if (rc == 0)
                        rc = column_list(r, t, err, errlen);
        }
        return rc;
}

int relay_repl_ensure_publication(relay_repl_t *r, bool *created, char *err, size_t errlen)
{
        return publication(r, true, created, err, errlen);
}

int relay_repl_check_publication(relay_repl_t *r, char *err, size_t errlen)
{
        bool created;
        return publication(r, false, &created, err, errlen);
}

/* ALTER_REPLICATION_SLOT slot (option); what: "enable failover on" for
 * the message. The server refuses while another walsender holds the slot
 * (55006): RELAY_EBUSY, to stand by and try again. */
static int alter_slot(relay_repl_t *r, const char *option, const char *what, char *err,
                      size_t errlen)
{
        PGresult *res = execf(r, err, errlen, "ALTER_REPLICATION_SLOT %I (%s)", r->slot, option);
        int rc = 0;
        if (!res)
                return RELAY_ENOMEM;
        if (PQresultStatus(res) != PGRES_COMMAND_OK) {
                rc = command_failed(r, res, err, errlen, "could not %s replication slot \"%.64s\"",
                                    what, r->slot);
                if (sqlstate_is(res, "55006"))
                        rc = RELAY_EBUSY;
        }
        PQclear(res);
        return rc;
}

/*
 * slot.failover = true on a slot made without it (by an older relay, or by
 * hand): alter it rather than refuse. The operator asked for failover, the
 * change keeps the slot's position (nothing is sent again or skipped), and
 * the only alternative, dropping and creating it, would lose the events in
 * between. A slot made with failover is left so when slot.failover = false:
 * that key asks for failover, it does not forbid it. The server refuses
 * while another walsender holds the slot (55006): another relay streams
 * from it, so this one stands by and tries again.
 */
static int alter_failover(relay_repl_t *r, char *err, size_t errlen)
{
        int rc = alter_slot(r, "FAILOVER true", "enable failover on", err, errlen);
        if (rc == 0)
                r->failover_altered = true;
        return rc;
}

/*
 * A slot made with two_phase (by hand, or for a subscription with
 * two_phase = true): the walsender then decodes a prepared transaction at
 * PREPARE TRANSACTION and sends it as Begin Prepare ... Prepare, whatever
 * START_REPLICATION asks (logical.c: two_phase on the slot or in the
 * options), which the relay does not read: it would stop at the first
 * PREPARE TRANSACTION that touches the outbox, at every restart. Without
 * two_phase the server sends such a transaction at its COMMIT PREPARED, as
 * any other. PostgreSQL 18 can turn it off in place (keeping the
 * position); before 18 only a slot made anew can be without it.
 */
static int two_phase_off(relay_repl_t *r, char *err, size_t errlen)
{
        if (r->server_version < 180000)
                return relay_err(err, errlen, RELAY_ESETUP,
                                 "replication slot \"%s\" was created with two_phase, so the "
                                 "server would send a prepared transaction at PREPARE "
                                 "TRANSACTION, which the relay does not read; set slot.name to a "
                                 "slot without two_phase (the relay creates it when it does not "
                                 "exist, then reads what is written from then on)",
                                 r->slot);
        return alter_slot(r, "TWO_PHASE false", "turn two_phase off on", err, errlen);
}

int relay_repl_ensure_slot(relay_repl_t *r, bool may_create, bool recreate, bool defer_create,
                           relay_slot_outcome_t *outcome, char *err, size_t errlen)
{
        bool was_lost = false;
        PGresult *res;
        int rc;

        *outcome = RELAY_SLOT_EXISTED;
        /* Failover slots came with PostgreSQL 17: before it there is nothing
         * the standby could keep, so asking for one is a setup error, not
         * something to ignore (the operator counts on it at a promotion). */
        if (r->failover && r->server_version < 170000) {
                relay_err_set(err, errlen,
                              "slot.failover = true needs PostgreSQL 17 or later (failover slots), "
                              "but the server is PostgreSQL %d.%d; set slot.failover = false or "
                              "upgrade the server",
                              r->server_version / 10000, r->server_version % 10000);
                return RELAY_ESETUP;
        }
        if (r->failover) {
                char *guard = single_value(r, "SHOW synchronized_standby_slots", err, errlen, &rc);
                if (rc)
                        return rc;
                r->failover_unguarded = !guard || !*guard;
                free(guard);
        }
        /* The last column: the process holding the slot, NULL when none
         * holds it or this walsender does. */
        if ((rc = queryf(r, &res, err, errlen,
                         "SELECT plugin, database, wal_status, current_database(), %s, "
                         "NULLIF(active_pid, pg_catalog.pg_backend_pid()), two_phase "
                         "FROM pg_catalog.pg_replication_slots WHERE slot_name = %L",
                         r->server_version >= 170000 ? "failover" : "false", r->slot)))
                return rc;
        if (PQntuples(res) == 1) {
                const char *plugin = PQgetvalue(res, 0, 0);
                const char *db = PQgetvalue(res, 0, 1);
                const char *wal_status = PQgetvalue(res, 0, 2);
                const char *cur = PQgetvalue(res, 0, 3);
                /* A slot another process holds is not ours to judge yet:
                 * another relay streams from it (or is still creating it: a
                 * logical slot shows no plugin until CREATE_REPLICATION_SLOT
                 * has set it, as when two relays start together, 0104), or
                 * a client of another kind reads it. Stand by; what the slot
                 * is gets checked once it is free. */
                if (!PQgetisnull(res, 0, 5)) {
                        rc = relay_err(err, errlen, RELAY_EBUSY,
                                       "replication slot \"%s\" is active in another process "
                                       "(PID %s)",
                                       r->slot, PQgetvalue(res, 0, 5));
                } else if (PQgetisnull(res, 0, 0) || strcmp(plugin, "pgoutput") != 0 ||
                           strcmp(db, cur) != 0) {
                        rc = relay_err(err, errlen, RELAY_ESETUP,
                                       "replication slot \"%s\" exists but is not a pgoutput slot "
                                       "of database \"%s\" (plugin \"%s\", database \"%s\"); set "
                                       "slot.name to a slot of its own",
                                       r->slot, cur, plugin, db);
                } else if (strcmp(wal_status, "lost") == 0 && !recreate) {
                        rc = relay_err(err, errlen, RELAY_ESLOTLOST,
                                       "replication slot \"%s\" is invalidated (wal_status = "
                                       "lost): the WAL it needed was removed, so events may be "
                                       "missing; "
                                       "check the outbox for them, then drop the slot or set "
                                       "slot.recreate = true",
                                       r->slot);
                } else if (strcmp(wal_status, "lost") == 0) {
                        PQclear(res);
                        if (!(res = execf(r, err, errlen, "DROP_REPLICATION_SLOT %I", r->slot)))
                                return RELAY_ENOMEM;
                        if (PQresultStatus(res) != PGRES_COMMAND_OK) {
                                rc = command_failed(r, res, err, errlen,
                                                    "could not drop invalidated replication "
                                                    "slot \"%.64s\"",
                                                    r->slot);
                                PQclear(res);
                                return rc;
                        }
                        PQclear(res);
                        was_lost = true;
                        goto create;
                } else if (strcmp(PQgetvalue(res, 0, 6), "t") == 0) {
                        bool failover = r->failover && strcmp(PQgetvalue(res, 0, 4), "t") != 0;
                        PQclear(res);
                        if ((rc = two_phase_off(r, err, errlen)) == 0 && failover)
                                rc = alter_failover(r, err, errlen);
                        return rc;
                } else if (r->failover && strcmp(PQgetvalue(res, 0, 4), "t") != 0) {
                        PQclear(res);
                        return alter_failover(r, err, errlen);
                }
                PQclear(res);
                return rc;
        }
        PQclear(res);
        if (!may_create && recreate)
                may_create = true;
        if (!may_create)
                return relay_err(err, errlen, RELAY_ESLOTLOST,
                                 "replication slot \"%s\" does not exist any more: it was dropped "
                                 "while the relay used it, so events may be missing; restart the "
                                 "relay to create a new slot and check the outbox for events "
                                 "written in between",
                                 r->slot);
create:
        if (defer_create) {
                *outcome = was_lost ? RELAY_SLOT_RECREATED : RELAY_SLOT_CREATED;
                return 0;
        }
        /* The legacy syntax is accepted by 14 to 18; no snapshot is exported
         * because rows from before the slot are not ours to send (backfill is
         * a separate feature). FAILOVER exists only in the option list (15+
         * syntax), which 17 and later take, as checked above. */
        res = execf(r, err, errlen, "CREATE_REPLICATION_SLOT %I%s", r->slot,
                    r->failover ? " LOGICAL pgoutput (SNAPSHOT 'nothing', FAILOVER true)"
                                : " LOGICAL pgoutput NOEXPORT_SNAPSHOT");
        if (!res)
                return RELAY_ENOMEM;
        if (PQresultStatus(res) == PGRES_TUPLES_OK) {
                *outcome = was_lost ? RELAY_SLOT_RECREATED : RELAY_SLOT_CREATED;
                rc = 0;
        } else if (sqlstate_is(res, "42710")) {
                rc = 0; /* another replica created it first */
        } else {
                rc = command_failed(r, res, err, errlen,
                                    "could not create replication slot \"%.64s\"", r->slot);
        }
        PQclear(res);
        return rc;
}

/*
 * CREATE_REPLICATION_SLOT's answer for temporary slot name: one row of
 * slot_name, consistent_point (parsed into *lsn) and, when a snapshot was
 * exported, snapshot_name (not NULL).
 */
static int temporary_slot_created(relay_repl_t *r, const PGresult *res, const char *name,
                                  bool snapshot, relay_lsn_t *lsn, char *err, size_t errlen)
{
        if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 ||
            PQnfields(res) < (snapshot ? 3 : 2) || (snapshot && PQgetisnull(res, 0, 2))) {
                return command_failed(r, res, err, errlen,
                                      "could not create temporary replication slot \"%.64s\"",
                                      name);
        }
        if (relay_lsn_parse(PQgetvalue(res, 0, 1), lsn) != 0)
                return relay_err(err, errlen, RELAY_EPROTO,
                                 "CREATE_REPLICATION_SLOT returned an invalid LSN \"%s\"",
                                 PQgetvalue(res, 0, 1));
        return 0;
}

int relay_repl_create_temporary_slot(relay_repl_t *r, relay_lsn_t *start, char *err, size_t errlen)
{
        /* Legacy syntax, accepted by 14 to 18 like the relay's own slot's. */
        PGresult *res = execf(r, err, errlen,
                              "CREATE_REPLICATION_SLOT %I TEMPORARY LOGICAL pgoutput "
                              "NOEXPORT_SNAPSHOT",
                              r->slot);
        if (!res)
                return RELAY_ENOMEM;
        int rc = temporary_slot_created(r, res, r->slot, false, start, err, errlen);
        PQclear(res);
        return rc;
}

int relay_repl_idle_alive(relay_repl_t *r, char *err, size_t errlen)
{
        struct pollfd p = {.fd = PQsocket(r->conn), .events = POLLIN};
        /* A message on an idle connection is the server's last words (its
         * ErrorResponse goes to the notice receiver), then the end. */
        if (p.fd >= 0 && poll(&p, 1, 0) > 0)
                (void)PQconsumeInput(r->conn);
        if (PQstatus(r->conn) != CONNECTION_BAD)
                return 0;
        set_pg_error(err, errlen,
                     "lost the replication connection, and with it the backfill's temporary slot",
                     PQerrorMessage(r->conn));
        return RELAY_EIO;
}

int relay_repl_lock_backfill(relay_repl_t *r, char *err, size_t errlen)
{
        PGresult *res;
        int rc;
        /* Keyed on the slot's name: slot names are the server's, the lock
         * is the database's, and a slot is of one database. */
        if ((rc = queryf(r, &res, err, errlen,
                         "SELECT pg_catalog.pg_try_advisory_lock("
                         "pg_catalog.hashtext('outbox-relay backfill'), pg_catalog.hashtext(%L))",
                         r->slot)))
                return rc;
        bool got = PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
        PQclear(res);
        if (!got)
                return relay_err(err, errlen, RELAY_EBUSY,
                                 "replication slot \"%s\" is being created, with a backfill, by "
                                 "another process",
                                 r->slot);
        return 0;
}

int relay_pg_transaction_timeout_off(PGconn *conn, char *err, size_t errlen)
{
        if (PQserverVersion(conn) < 170000)
                return 0;
        PGresult *res = PQexec(conn, "SET transaction_timeout = 0");
        int rc = 0;
        if (PQresultStatus(res) != PGRES_COMMAND_OK) {
                result_error(err, errlen, "could not turn off transaction_timeout for the backfill",
                             res, conn);
                rc = !res                                 ? RELAY_ENOMEM
                     : PQstatus(conn) == CONNECTION_BAD ? RELAY_EIO
                                                          : RELAY_ESETUP;
        }
        PQclear(res);
        return rc;
}

int relay_repl_create_snapshot_slot(relay_repl_t *r, char *snapshot, size_t snaplen,
                                    relay_lsn_t *consistent, char *err, size_t errlen)
{
        PGresult *res;
        int rc = 0;

        /* The exported snapshot's transaction lives until the slot is made
         * permanent: every row was backfilled again when it ended (0234). */
        if ((rc = relay_pg_transaction_timeout_off(r->conn, err, errlen)))
                return rc;
        /* Slot names are [a-z0-9_]{1,63}: room for the suffix and a pid. */
        snprintf(r->backfill_slot, sizeof(r->backfill_slot), "%.40s_backfill_%d", r->slot,
                 PQbackendPID(r->conn));
        /* The legacy syntax is accepted by 14 to 18. The snapshot lives until
         * this connection's next command. */
        res = execf(r, err, errlen,
                    "CREATE_REPLICATION_SLOT %I TEMPORARY LOGICAL pgoutput EXPORT_SNAPSHOT",
                    r->backfill_slot);
        if (!res) {
                r->backfill_slot[0] = '\0';
                return RELAY_ENOMEM;
        }
        rc = temporary_slot_created(r, res, r->backfill_slot, true, consistent, err, errlen);
        if (rc == 0)
                snprintf(snapshot, snaplen, "%s", PQgetvalue(res, 0, 2));
        PQclear(res);
        if (rc)
                r->backfill_slot[0] = '\0';
        return rc;
}

int relay_repl_persist_slot(relay_repl_t *r, relay_slot_outcome_t *outcome, char *err,
                            size_t errlen)
{
        PGresult *res;
        int rc = 0;

        /* The copy keeps the temporary slot's restart and confirmed
         * positions: the stream starts exactly where the snapshot ends.
         * "false" makes it permanent (by default it would be temporary like
         * its source). */
        res = execf(r, err, errlen,
                    "SELECT pg_catalog.pg_copy_logical_replication_slot(%L, %L, false)",
                    r->backfill_slot, r->slot);
        if (!res)
                return RELAY_ENOMEM;
        if (PQresultStatus(res) == PGRES_TUPLES_OK) {
                rc = 0;
        } else if (sqlstate_is(res, "42710")) {
                /* Created meanwhile by another process (not a relay backfilling,
                 * relay_repl_lock_backfill()): it streams from its own
                 * position; our backfill only doubled rows, it lost none. */
                *outcome = RELAY_SLOT_EXISTED;
        } else {
                rc = command_failed(r, res, err, errlen,
                                    "could not create replication slot \"%.64s\" from \"%.64s\"",
                                    r->slot, r->backfill_slot);
                goto out;
        }
        PQclear(res);
        /* Dropped with the connection anyway; dropped now so it holds no WAL. */
        if (!(res = execf(r, err, errlen, "DROP_REPLICATION_SLOT %I", r->backfill_slot)))
                return RELAY_ENOMEM;
        /* Gone already after the copy's error: the server drops a backend's
         * temporary slots at any error (15), and the failed drop stopped the
         * relay (exit 3, 0235). */
        if (PQresultStatus(res) != PGRES_COMMAND_OK && !sqlstate_is(res, "42704")) {
                rc = command_failed(r, res, err, errlen,
                                    "could not drop temporary replication slot \"%.64s\"",
                                    r->backfill_slot);
        } else {
                r->backfill_slot[0] = '\0';
        }
        /* The copy does not keep failover (PostgreSQL 17 sets it false, and a
         * temporary slot cannot have it): turn it on as for an existing slot. */
        if (rc == 0 && r->failover && *outcome != RELAY_SLOT_EXISTED) {
                PQclear(res);
                res = NULL;
                rc = alter_failover(r, err, errlen);
        }
out:
        PQclear(res);
        return rc;
}

/*
 * The slot as pg_replication_slots has it, asked on the replication
 * connection once a command failed. An undefined object (42704) from the
 * walsender is the slot or the publication, and the server's message that
 * names which is in its lc_messages language; 55000 (object not in
 * prerequisite state) is an invalidated slot (its WAL removed; 16+: in
 * conflict with recovery; 17+: any invalidation) or a reason of the
 * server's setup, which its message names (17+ on a standby: a slot
 * synchronized from the primary) and which dropping or recreating the slot
 * does not mend.
 */
typedef enum {
        SLOT_UNKNOWN,     /* the question failed */
        SLOT_GONE,        /* no such slot */
        SLOT_INVALIDATED, /* or its state cannot be told (no wal_status) */
        SLOT_USABLE,
} slot_state_t;

static slot_state_t slot_state(relay_repl_t *r)
{
        char qerr[RELAY_ERRBUF];
        PGresult *res;
        slot_state_t st = SLOT_UNKNOWN;

        if (queryf(r, &res, qerr, sizeof(qerr),
                   "SELECT coalesce(wal_status = 'lost'%s, true) FROM "
                   "pg_catalog.pg_replication_slots WHERE slot_name = %L",
                   r->server_version >= 170000   ? " OR invalidation_reason IS NOT NULL"
                   : r->server_version >= 160000 ? " OR coalesce(conflicting, false)"
                                                 : "",
                   r->slot) != 0)
                return SLOT_UNKNOWN;
        if (PQntuples(res) == 0)
                st = SLOT_GONE;
        else if (PQntuples(res) == 1)
                st = strcmp(PQgetvalue(res, 0, 0), "t") == 0 ? SLOT_INVALIDATED : SLOT_USABLE;
        PQclear(res);
        return st;
}

int relay_repl_start(relay_repl_t *r, relay_lsn_t start, char *err, size_t errlen)
{
        char lsn[RELAY_LSN_BUFSZ], proto[16];
        PGresult *res = NULL;
        int rc = 0;
        /* publication_names is a literal holding a list of identifiers. */
        char *qpub = PQescapeIdentifier(r->conn, r->publication, strlen(r->publication));

        snprintf(proto, sizeof(proto), "%d", r->proto_version);
        /* The server starts at max(start, confirmed_flush_lsn) and skips
         * transactions that committed before it. Streaming stays off so
         * transactions arrive whole, in commit order. Logical decoding
         * messages (pgoutput sends them from 14 on) only when they are a
         * source of events: otherwise every extension's messages would
         * cross the wire for nothing. */
        if (qpub != NULL)
                res = execf(r, err, errlen,
                            "START_REPLICATION SLOT %I LOGICAL %s (proto_version '%s', "
                            "publication_names %L%s)",
                            r->slot, relay_lsn_format(start, lsn), proto, qpub,
                            r->source == RELAY_SOURCE_TABLE ? "" : ", messages 'true'");
        PQfreemem(qpub);
        if (!res)
                return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
        if (PQresultStatus(res) != PGRES_COPY_BOTH) {
                rc = command_failed(r, res, err, errlen,
                                    "could not start replication on slot \"%.64s\"", r->slot);
                bool invalid = sqlstate_is(res, "55000"), undefined = sqlstate_is(res, "42704");
                slot_state_t st = invalid || undefined ? slot_state(r) : SLOT_USABLE;
                if (sqlstate_is(res, "55006"))
                        rc = RELAY_EBUSY;
                /* Undefined: START looks up the slot only (pgoutput reads the
                 * publication at the first change), unless the slot is there,
                 * as when the answer was lost with the connection. */
                else if ((invalid && st != SLOT_USABLE) ||
                         (undefined && (st == SLOT_GONE || st == SLOT_UNKNOWN)))
                        rc = slot_lost(err, errlen);
                PQclear(res);
                return rc;
        }
        PQclear(res);
        if (PQsetnonblocking(r->conn, 1) != 0) {
                set_pg_error(err, errlen, "could not make the replication connection non-blocking",
                             PQerrorMessage(r->conn));
                return RELAY_EIO;
        }
        return 0;
}

int relay_repl_socket(const relay_repl_t *r)
{
        return PQsocket(r->conn);
}

int relay_repl_consume(relay_repl_t *r, char *err, size_t errlen)
{
        if (!PQconsumeInput(r->conn)) {
                set_pg_error(err, errlen, "could not receive data from the replication stream",
                             PQerrorMessage(r->conn));
                return RELAY_EIO;
        }
        return 0;
}

/* A COPY state: what PQgetResult() reports while a COPY is still open. */
static bool copy_result(const PGresult *res)
{
        ExecStatusType st = PQresultStatus(res);
        return st == PGRES_COPY_IN || st == PGRES_COPY_OUT || st == PGRES_COPY_BOTH;
}

int relay_repl_read(relay_repl_t *r, relay_walmsg_t *msg, char *err, size_t errlen)
{
        if (r->copybuf) {
                PQfreemem(r->copybuf);
                r->copybuf = NULL;
        }
        int n = PQgetCopyData(r->conn, &r->copybuf, 1);
        /* Before the message after the warning: nothing past the skipped
         * changes is decoded, so nothing past them is confirmed. */
        if (r->pub_skipped)
                return publication_skipped(r, err, errlen);
        if (n > 0) {
                int rc = relay_walproto_parse(r->copybuf, (size_t)n, msg, err, errlen);
                return rc ? rc : 1;
        }
        if (n == 0)
                return 0;
        if (n == -2) {
                set_pg_error(err, errlen, "could not read from the replication stream",
                             PQerrorMessage(r->conn));
                return RELAY_EIO;
        }
        /* -1: the server ended the COPY; its result says why. */
        int rc = RELAY_EIO;
        bool undefined = false;
        PGresult *res = PQgetResult(r->conn);
        if (res && PQresultStatus(res) == PGRES_FATAL_ERROR) {
                result_error(err, errlen, "replication stream ended", res, r->conn);
                /* Mid-stream the undefined object is the publication,
                 * which pgoutput looks up as of each change, unless the
                 * slot itself is gone. The query waits for the command's
                 * end: slot_state() follows the drain below. */
                if ((undefined = sqlstate_is(res, "42704")))
                        rc = publication_gone(r, res, err, errlen);
                else if (sqlstate_is(res, "55000"))
                        rc = slot_lost(err, errlen);
        } else {
                relay_err_set(err, errlen, "replication stream ended by the server");
        }
        /* The command's remaining results. A server that ended only its own
         * half of the COPY (CopyDone) leaves libpq in COPY_IN, whose result
         * PQgetResult() makes anew on every call and never follows with
         * NULL: draining to NULL would spin forever. */
        while (res && !copy_result(res)) {
                PQclear(res);
                res = PQgetResult(r->conn);
        }
        PQclear(res);
        if (undefined && !res && slot_state(r) == SLOT_GONE) {
                relay_err_set(err, errlen, "replication stream ended: replication slot \"%.64s\" "
                              "does not exist", r->slot);
                rc = slot_lost(err, errlen);
        }
        return rc;
}

int relay_repl_send_status(relay_repl_t *r, relay_lsn_t received, relay_lsn_t confirmed,
                           bool reply_requested, char *err, size_t errlen)
{
        char buf[RELAY_WALPROTO_STATUS_LEN];
        size_t n = relay_walproto_status(buf, received, confirmed, confirmed, relay_pg_now_us(),
                                         reply_requested);
        if (PQputCopyData(r->conn, buf, (int)n) != 1) {
                set_pg_error(err, errlen, "could not send standby status", PQerrorMessage(r->conn));
                return RELAY_EIO;
        }
        return relay_repl_flush(r, err, errlen);
}

bool relay_repl_wants_write(relay_repl_t *r)
{
        return PQflush(r->conn) == 1;
}

int relay_repl_flush(relay_repl_t *r, char *err, size_t errlen)
{
        if (PQflush(r->conn) < 0) {
                set_pg_error(err, errlen, "could not send to the server", PQerrorMessage(r->conn));
                return RELAY_EIO;
        }
        return 0;
}

static int64_t mono_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait until the socket is readable (or writable); false once the deadline passed. */
static bool wait_socket(const relay_repl_t *r, bool for_write, int64_t deadline)
{
        struct pollfd pfd = {.fd = PQsocket(r->conn), .events = for_write ? POLLOUT : POLLIN};
        int64_t left = deadline - mono_ms();

        if (left <= 0)
                return false;
        /* EINTR (a signal) just means look again. */
        (void)poll(&pfd, 1, left > INT_MAX ? INT_MAX : (int)left);
        return true;
}

/*
 * Non-blocking throughout, so that a server that does not answer cannot hold
 * the relay past timeout_ms: CopyDone, then the server's remaining CopyData
 * and its CopyDone, then the command's results.
 */
int relay_repl_stop(relay_repl_t *r, int timeout_ms, bool *sent, char *err, size_t errlen)
{
        int64_t deadline = mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
        const char *what = "could not end the replication stream";
        PGresult *res;
        char *buf;
        int n, rc = 0;
        bool flushed = false; /* all we wrote is in the kernel, on its way to the server */

        if (sent)
                *sent = false;

        if (r->copybuf) {
                PQfreemem(r->copybuf);
                r->copybuf = NULL;
        }
        while ((n = PQputCopyEnd(r->conn, NULL)) == 0)
                if (!wait_socket(r, true, deadline))
                        goto timeout;
        if (n < 0) {
                set_pg_error(err, errlen, what, PQerrorMessage(r->conn));
                return RELAY_EIO;
        }
        while ((n = PQflush(r->conn)) == 1)
                if (!wait_socket(r, true, deadline))
                        goto timeout;
        if (n < 0) {
                set_pg_error(err, errlen, what, PQerrorMessage(r->conn));
                return RELAY_EIO;
        }
        flushed = true;
        /* What the server sent before it saw our CopyDone is not wanted any more. */
        while ((n = PQgetCopyData(r->conn, &buf, 1)) != -1) {
                if (n > 0) {
                        PQfreemem(buf);
                        continue;
                }
                if (n == 0 && !wait_socket(r, false, deadline))
                        goto timeout;
                if (n == -2 || !PQconsumeInput(r->conn)) {
                        set_pg_error(err, errlen, what, PQerrorMessage(r->conn));
                        return RELAY_EIO;
                }
        }
        for (;;) {
                while (PQisBusy(r->conn)) {
                        if (!wait_socket(r, false, deadline))
                                goto timeout;
                        if (!PQconsumeInput(r->conn)) {
                                set_pg_error(err, errlen, what, PQerrorMessage(r->conn));
                                return RELAY_EIO;
                        }
                }
                if ((res = PQgetResult(r->conn)) == NULL)
                        break;
                if (PQresultStatus(res) == PGRES_FATAL_ERROR) {
                        result_error(err, errlen, what, res, r->conn);
                        rc = RELAY_EIO;
                }
                PQclear(res);
        }
        if (sent)
                *sent = rc == 0;
        return rc;

timeout:
        /* A server that took everything but did not answer yet still reads
         * it, in order, whatever we do next; one that did not take it may
         * never see it. */
        if (!flushed)
                return relay_err(err, errlen, RELAY_EIO,
                                 "%s: the server did not take what was sent within %d ms", what,
                                 timeout_ms);
        if (sent)
                *sent = true;
        return relay_err(err, errlen, RELAY_EIO,
                         "%s: the server did not confirm the end within %d ms; what was sent "
                         "before reaches it all the same",
                         what, timeout_ms);
}
