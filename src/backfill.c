/*
 * backfill.c - owns the backfill's connection, its snapshot transaction and
 * cursor: the rows outbox.table held when the slot was created, as Inserts.
 *
 * The snapshot is the one CREATE_REPLICATION_SLOT exported: exactly the
 * transactions committed before the slot's consistent point, whose changes
 * the slot will never send. Rows come oldest transaction first (age(xmin),
 * then cmin, then ctid), which is commit order for transactions that wrote
 * the same aggregate one after another; a frozen row (xmin 2) is the oldest
 * of all. Within a transaction cmin (its command counter) is the order of
 * the INSERT statements: ctid alone is not, since a row goes wherever the
 * free space map finds room, an earlier page included.
 * Values are fetched as text with the replication connection's session
 * settings (repl.h), so they read as pgoutput's text values do.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/backfill.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "relay/log.h"
#include "relay/repl.h"

/* Rows per FETCH: few round trips, bounded memory. */
#define FETCH_ROWS 2000

struct relay_backfill {
        PGconn *conn;
        const relay_settings_t *set; /* borrowed */
        size_t table;               /* outbox.table's table being read */
        relay_pgo_relation_t *rel;  /* of that table */
        PGresult *batch;            /* the current FETCH, row next_row next */
        int next_row;
        bool done;
        relay_pgo_value_t *values;  /* rel's ncols, views into batch */
        uint64_t rows;
        relay_tick_fn *tick;        /* while a statement waits; NULL: none */
        void *tick_ctx;
};

/*
 * Every statement may wait long (a lock on the table, the first FETCH's
 * sort, a slow filter): the caller's tick keeps its loop alive meanwhile
 * and can cancel it (relay_pg_exec_waiting()). nparams < 0: the simple
 * query protocol; else the extended one, which takes one statement only.
 */
static PGresult *exec(relay_backfill_t *b, const char *sql, int nparams, const char *const *params)
{
        return relay_pg_exec_waiting(b->conn, sql, nparams, params, b->tick, b->tick_ctx);
}

/* The server's message without its trailing newline. */
static void pg_message(char *err, size_t errlen, const char *what, const char *msg)
{
        size_t n = strlen(msg);
        while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
                n--;
        relay_err_set(err, errlen, "%s: %.*s", what, (int)n, msg);
}

/* RELAY_EIO when the connection is gone (retry), else RELAY_ESETUP. */
static int failure_code(const relay_backfill_t *b)
{
        return PQstatus(b->conn) == CONNECTION_BAD ? RELAY_EIO : RELAY_ESETUP;
}

static bool sqlstate_is(const PGresult *res, const char *code)
{
        const char *s = PQresultErrorField(res, PG_DIAG_SQLSTATE);
        return s && strcmp(s, code) == 0;
}

static int command(relay_backfill_t *b, const char *sql, const char *what, char *err,
                   size_t errlen)
{
        PGresult *res = exec(b, sql, -1, NULL);
        int rc = 0;
        if (PQresultStatus(res) != PGRES_COMMAND_OK) {
                pg_message(err, errlen, what,
                           res ? PQresultErrorMessage(res) : PQerrorMessage(b->conn));
                rc = res ? failure_code(b) : RELAY_ENOMEM;
                /* The exporting connection moved on, or the server restarted:
                 * the next session creates the slot and its snapshot again. */
                if (res && sqlstate_is(res, "22023"))
                        rc = RELAY_EIO;
        }
        PQclear(res);
        return rc;
}

/* The message for a query on the table that failed, with the fix. */
static int table_error(relay_backfill_t *b, const PGresult *res, bool filtered, char *err,
                       size_t errlen)
{
        const relay_settings_t *set = b->set;
        const relay_table_name_t *t = &set->outbox_tables[b->table];
        const char *msg = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
        char what[512];

        if (!res)
                return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
        if (PQstatus(b->conn) == CONNECTION_BAD) {
                pg_message(err, errlen, "could not read the outbox table for the backfill",
                           PQerrorMessage(b->conn));
                return RELAY_EIO;
        }
        if (!msg)
                msg = PQresultErrorMessage(res);
        if (sqlstate_is(res, "42501")) {
                /* Quoted, so that the GRANT works for a role or table "Named" so. */
                const char *user = PQuser(b->conn) ? PQuser(b->conn) : "";
                char *qs = PQescapeIdentifier(b->conn, t->schema, strlen(t->schema));
                char *qt = PQescapeIdentifier(b->conn, t->name, strlen(t->name));
                char *qu = PQescapeIdentifier(b->conn, user, strlen(user));
                int rc = RELAY_ESETUP;
                if (qs && qt && qu)
                        relay_err_set(err, errlen,
                                      "could not read table \"%s.%s\" for the backfill: %s; grant "
                                      "it with GRANT SELECT ON %s.%s TO %s (snapshot.mode = "
                                      "initial reads the table once)",
                                      t->schema, t->name, msg, qs, qt, qu);
                else
                        rc = relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
                PQfreemem(qs);
                PQfreemem(qt);
                PQfreemem(qu);
                return rc;
        }
        if (filtered) {
                relay_err_set(err, errlen,
                              "snapshot.filter \"%s\" does not work on table \"%s.%s\": %s; set "
                              "snapshot.filter to a condition on the table's columns, as in a "
                              "WHERE clause (e.g. sent_at IS NULL), or empty for every row",
                              set->snapshot_filter, t->schema,
                              t->name, msg);
                return RELAY_ESETUP;
        }
        snprintf(what, sizeof(what), "could not read table \"%s.%s\" for the backfill",
                 t->schema, t->name);
        pg_message(err, errlen, what, msg);
        return RELAY_ESETUP;
}

/* The relation from an empty result of SELECT * on the table, and its oid. */
static int describe(relay_backfill_t *b, const char *qtable, char *err, size_t errlen)
{
        const relay_settings_t *set = b->set;
        char *sql = NULL;
        size_t n = strlen(qtable) * 2 + 128;
        PGresult *res = NULL;
        int rc = RELAY_ENOMEM;

        relay_pgo_relation_free(b->rel);
        b->rel = NULL;
        free(b->values);
        b->values = NULL;
        if (!(sql = malloc(n)))
                goto nomem;
        snprintf(sql, n, "SELECT * FROM %s LIMIT 0", qtable);
        res = exec(b, sql, -1, NULL);
        if (PQresultStatus(res) != PGRES_TUPLES_OK) {
                rc = table_error(b, res, false, err, errlen);
                goto out;
        }
        int ncols = PQnfields(res);
        const char **names = calloc((size_t)ncols + 1, sizeof(*names));
        uint32_t *types = calloc((size_t)ncols + 1, sizeof(*types));
        int32_t *typmods = calloc((size_t)ncols + 1, sizeof(*typmods));
        b->values = calloc((size_t)ncols + 1, sizeof(*b->values));
        if (names && types && typmods && b->values) {
                for (int i = 0; i < ncols; i++) {
                        names[i] = PQfname(res, i);
                        types[i] = (uint32_t)PQftype(res, i);
                        typmods[i] = PQfmod(res, i);
                }
                const relay_table_name_t *t = &set->outbox_tables[b->table];
                b->rel = relay_pgo_relation_new((uint32_t)PQftable(res, 0), t->schema, t->name,
                                                ncols, names, types, typmods);
        }
        free(names);
        free(types);
        free(typmods);
        if (!b->rel)
                goto nomem;
        rc = 0;
        goto out;
nomem:
        relay_err_set(err, errlen, "out of memory");
out:
        PQclear(res);
        free(sql);
        return rc;
}

/*
 * The slot streams every row, whatever policies the table has; the backfill
 * is a SELECT, which a row-level security policy the relay's role is subject
 * to would filter without a word, and the rows it hides, committed before
 * the slot, would never be sent. Refused instead (row_security_active():
 * policies on, and the role neither superuser, BYPASSRLS nor an owner who
 * is exempt).
 */
static int rls_check(relay_backfill_t *b, const char *qtable, char *err, size_t errlen)
{
        const relay_table_name_t *t = &b->set->outbox_tables[b->table];
        const char *params[3] = {qtable, t->schema, t->name};
        /* quote_ident: the fix must name "Relay" so, or it alters role relay
         * (and a schema "order" so, or it is a syntax error). */
        PGresult *res = exec(b,
                             "SELECT pg_catalog.row_security_active($1::pg_catalog.regclass), "
                             "pg_catalog.quote_ident(current_user), "
                             "pg_catalog.quote_ident($2) || '.' || pg_catalog.quote_ident($3)",
                             3, params);
        int rc = 0;
        if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
                rc = table_error(b, res, false, err, errlen);
        else if (strcmp(PQgetvalue(res, 0, 0), "t") == 0) {
                relay_err_set(err, errlen, RELAY_BACKFILL_RLS_PROBLEM "; " RELAY_BACKFILL_RLS_FIX
                              ", then start again",
                              t->schema, t->name, PQgetvalue(res, 0, 1), PQgetvalue(res, 0, 1),
                              PQgetvalue(res, 0, 2));
                rc = RELAY_ESETUP;
        }
        PQclear(res);
        return rc;
}

/* DECLARE the cursor; the extended protocol takes one statement only, so
 * the filter cannot smuggle in a second one. */
static int declare(relay_backfill_t *b, const char *qtable, char *err, size_t errlen)
{
        const char *filter = b->set->snapshot_filter;
        size_t n = strlen(qtable) + strlen(filter) + 256;
        char *sql = malloc(n);
        if (!sql)
                return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
        if (b->table > 0) {
                PGresult *res = exec(b, "CLOSE relay_backfill", -1, NULL);
                int rc = PQresultStatus(res) == PGRES_COMMAND_OK ? 0 : table_error(b, res, false,
                                                                                   err, errlen);
                PQclear(res);
                if (rc) {
                        free(sql);
                        return rc;
                }
        }
        snprintf(sql, n,
                 "DECLARE relay_backfill NO SCROLL CURSOR FOR SELECT * FROM %s%s%s%s "
                 "ORDER BY pg_catalog.age(xmin) DESC, "
                 "cmin::pg_catalog.text::pg_catalog.int8, ctid", /* cid has no ordering */
                 qtable, *filter ? " WHERE (" : "", filter, *filter ? "\n)" : "");
        PGresult *res = exec(b, sql, 0, NULL);
        free(sql);
        int rc = 0;
        if (PQresultStatus(res) != PGRES_COMMAND_OK)
                rc = table_error(b, res, *filter != '\0', err, errlen);
        PQclear(res);
        return rc;
}

/* Start reading table i of outbox.table: its relation and cursor. */
static int open_table(relay_backfill_t *b, size_t i, char *err, size_t errlen)
{
        const relay_table_name_t *t = &b->set->outbox_tables[i];
        char *qs = PQescapeIdentifier(b->conn, t->schema, strlen(t->schema));
        char *qt = PQescapeIdentifier(b->conn, t->name, strlen(t->name));
        char *qtable = qs && qt ? malloc(strlen(qs) + strlen(qt) + 2) : NULL;
        int rc;

        b->table = i;
        b->done = false;
        if (!qtable) {
                relay_err_set(err, errlen, "out of memory");
                rc = RELAY_ENOMEM;
        } else {
                sprintf(qtable, "%s.%s", qs, qt);
                if ((rc = describe(b, qtable, err, errlen)) == 0 &&
                    (rc = rls_check(b, qtable, err, errlen)) == 0)
                        rc = declare(b, qtable, err, errlen);
        }
        PQfreemem(qs);
        PQfreemem(qt);
        free(qtable);
        return rc;
}

/*
 * The user's statement_timeout and lock_timeout (and transaction_timeout,
 * below) do not apply to the backfill, as pg_dump turns them off: its
 * statements take as long as the table (the first FETCH sorts all of it),
 * and a cancelled one stopped the relay, blaming snapshot.filter (0234).
 * After the user's options, so they win.
 */
#define NO_TIMEOUTS "-c statement_timeout=0 -c lock_timeout=0"

int relay_backfill_open(relay_backfill_t **out, const relay_settings_t *set, const char *snapshot,
                        relay_tick_fn *tick, void *ctx, char *err, size_t errlen)
{
        const char *keys[] = {"dbname", "client_encoding", "options", "application_name", NULL};
        char *options = relay_repl_session_options(set->postgres_conninfo, NO_TIMEOUTS);
        const char *vals[] = {set->postgres_conninfo[0] != '\0' ? set->postgres_conninfo : NULL,
                              "UTF8", options, "outbox-relay backfill", NULL};
        relay_backfill_t *b = calloc(1, sizeof(*b));
        char *lsnap = NULL, sql[256];
        int rc = RELAY_ENOMEM;

        *out = NULL;
        if (!b || !options)
                goto nomem;
        b->set = set;
        b->tick = tick;
        b->tick_ctx = ctx;
        b->conn = vals[0] ? PQconnectdbParams(keys, vals, 1)
                          : PQconnectdbParams(keys + 1, vals + 1, 0);
        free(options);
        options = NULL;
        if (!b->conn)
                goto nomem;
        /* What the server says on it (a filter's RAISE, "terminating
         * connection" at a restart) goes to the log, as the other
         * connections' does, not to stderr raw between its lines (0236). */
        PQsetNoticeProcessor(b->conn, relay_log_server_notice, NULL);
        if (PQstatus(b->conn) != CONNECTION_OK) {
                pg_message(err, errlen, "could not connect to PostgreSQL for the backfill",
                           PQerrorMessage(b->conn));
                rc = RELAY_EIO;
                goto fail;
        }
        if (!(lsnap = PQescapeLiteral(b->conn, snapshot, strlen(snapshot))))
                goto nomem;
        if ((rc = relay_pg_transaction_timeout_off(b->conn, err, errlen)))
                goto fail;
        if ((rc = command(b, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
                          "could not begin the backfill transaction", err, errlen)))
                goto fail;
        /* Every table in the one snapshot: one transaction, a cursor each. */
        snprintf(sql, sizeof(sql), "SET TRANSACTION SNAPSHOT %s", lsnap);
        if ((rc = command(b, sql, "could not import the slot's snapshot for the backfill", err,
                          errlen)) ||
            (rc = open_table(b, 0, err, errlen)))
                goto fail;
        PQfreemem(lsnap);
        *out = b;
        return 0;
nomem:
        relay_err_set(err, errlen, "out of memory");
        rc = RELAY_ENOMEM;
fail:
        free(options);
        PQfreemem(lsnap);
        relay_backfill_free(b);
        return rc;
}

const relay_pgo_relation_t *relay_backfill_relation(const relay_backfill_t *b)
{
        return b->rel;
}

int relay_backfill_next(relay_backfill_t *b, relay_pgo_insert_t *row, char *err, size_t errlen)
{
        if (b->batch && b->next_row >= PQntuples(b->batch)) {
                PQclear(b->batch);
                b->batch = NULL;
        }
        while (!b->batch && b->done && b->table + 1 < b->set->n_outbox_tables) {
                int rc = open_table(b, b->table + 1, err, errlen);
                if (rc)
                        return rc;
        }
        if (!b->batch) {
                char sql[64];
                if (b->done)
                        return 0;
                snprintf(sql, sizeof(sql), "FETCH %d FROM relay_backfill", FETCH_ROWS);
                b->batch = exec(b, sql, -1, NULL);
                b->next_row = 0;
                if (PQresultStatus(b->batch) != PGRES_TUPLES_OK) {
                        int rc = table_error(b, b->batch, *b->set->snapshot_filter != '\0', err,
                                             errlen);
                        PQclear(b->batch);
                        b->batch = NULL;
                        return rc;
                }
                if (PQntuples(b->batch) < FETCH_ROWS)
                        b->done = true;
                if (PQntuples(b->batch) == 0) {
                        PQclear(b->batch);
                        b->batch = NULL;
                        return relay_backfill_next(b, row, err, errlen); /* the next table */
                }
                if (PQnfields(b->batch) != relay_pgo_relation_ncols(b->rel)) {
                        relay_err_set(err, errlen,
                                      "the backfill's rows have %d columns, the table %d",
                                      PQnfields(b->batch), relay_pgo_relation_ncols(b->rel));
                        return RELAY_EPROTO;
                }
        }
        int ncols = relay_pgo_relation_ncols(b->rel), r = b->next_row++;
        for (int i = 0; i < ncols; i++) {
                relay_pgo_value_t *v = &b->values[i];
                if (PQgetisnull(b->batch, r, i)) {
                        *v = (relay_pgo_value_t){.kind = 'n'};
                } else {
                        v->kind = 't';
                        v->len = (uint32_t)PQgetlength(b->batch, r, i);
                        v->data = PQgetvalue(b->batch, r, i);
                }
        }
        row->relid = relay_pgo_relation_id(b->rel);
        row->relation = b->rel;
        row->newtuple.ncols = ncols;
        row->newtuple.values = b->values;
        b->rows++;
        return 1;
}

uint64_t relay_backfill_rows(const relay_backfill_t *b)
{
        return b->rows;
}

void relay_backfill_free(relay_backfill_t *b)
{
        if (!b)
                return;
        PQclear(b->batch);
        if (b->conn)
                PQfinish(b->conn); /* ends the read-only transaction */
        relay_pgo_relation_free(b->rel);
        free(b->values);
        free(b);
}
