/*
 * check.c - the preflight of `outbox-relay check`: owns one ordinary
 * (non-replication) libpq connection, one throwaway librdkafka client and
 * the list of verdicts they lead to.
 *
 * Everything here only reads: catalog queries, pg_replication_slots,
 * Kafka metadata for named topics with allow.auto.create.topics=false (a
 * metadata request may otherwise create the topic it names) and the
 * brokers' configuration. The relay's own start-up creates the publication
 * and the slot when they are missing; here their absence is reported with
 * what that creation will need.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/check.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>

#include "relay/backfill.h"
#include "relay/kadmin.h"
#include "relay/route.h"
#include "relay/log.h"

/* The outbox table is read (for the topics a ${column} template names)
 * only when it is at most this large on disk; a statement timeout bounds
 * the read anyway. */
#define CHEAP_TABLE_BYTES (64LL * 1024 * 1024)
#define MAX_TOPICS 50

typedef struct {
        char *name;
        relay_check_status_t status;
        char *message;
        char *fix;
} item_t;

struct relay_check {
        item_t *items;
        size_t n, cap;
        bool oom;
};

typedef struct {
        relay_check_t *res;
        const relay_config_t *cfg;
        const relay_settings_t *set;
        PGconn *conn;
        int kafka_timeout_ms;
        bool table_exists;  /* the table being checked (tbl), later: all of them */
        unsigned table_oid; /* tbl's, later: the first table's */
        const relay_table_name_t *tbl; /* the outbox table being checked */
        char oids[512];     /* every existing outbox table's oid: "{1,2}" */
        /* Topics the template names today (owned), for the Kafka checks. */
        char **topics;
        size_t ntopics;
        char topics_note[2 * RELAY_ERRBUF]; /* why they could not be listed, or "" */
        relay_pairs_t quoted; /* name -> quote_ident(name), for the fixes (sql_name()) */
        bool quoted_asked;
} ctx_t;

static char *vformat(const char *fmt, va_list ap) RELAY_PRINTF(1, 0);
static char *vformat(const char *fmt, va_list ap)
{
        va_list ap2;
        va_copy(ap2, ap);
        int n = vsnprintf(NULL, 0, fmt, ap2);
        va_end(ap2);
        char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
        if (s)
                vsnprintf(s, (size_t)n + 1, fmt, ap);
        return s;
}

/* Record a verdict; fix may be NULL. The message is a printf format. */
static void add(ctx_t *x, const char *name, relay_check_status_t st, const char *fix,
                const char *fmt, ...) RELAY_PRINTF(5, 6);
static void add(ctx_t *x, const char *name, relay_check_status_t st, const char *fix,
                const char *fmt, ...)
{
        relay_check_t *r = x->res;
        va_list ap;
        if (r->n == r->cap) {
                size_t cap = r->cap ? r->cap * 2 : 32;
                item_t *it = realloc(r->items, cap * sizeof(*it));
                if (!it) {
                        r->oom = true;
                        return;
                }
                r->items = it;
                r->cap = cap;
        }
        item_t *it = &r->items[r->n];
        va_start(ap, fmt);
        char *raw = vformat(fmt, ap);
        va_end(ap);
        /* Valid UTF-8 for --json: a value quoted with "%.80s" may end inside a character. */
        it->message = raw ? relay_utf8_sanitize(raw) : NULL;
        free(raw);
        it->name = strdup(name);
        it->fix = relay_utf8_sanitize(fix ? fix : "");
        it->status = st;
        if (!it->message || !it->name || !it->fix) {
                free(it->message);
                free(it->name);
                free(it->fix);
                r->oom = true;
                return;
        }
        r->n++;
}

/* Same, with the fix built by printf too. */
static void addf(ctx_t *x, const char *name, relay_check_status_t st, const char *msg,
                 const char *fixfmt, ...) RELAY_PRINTF(5, 6);
static void addf(ctx_t *x, const char *name, relay_check_status_t st, const char *msg,
                 const char *fixfmt, ...)
{
        va_list ap;
        va_start(ap, fixfmt);
        char *fix = vformat(fixfmt, ap);
        va_end(ap);
        if (!fix) {
                x->res->oom = true;
                return;
        }
        add(x, name, st, fix, "%s", msg);
        free(fix);
}

/* PostgreSQL's messages end with a newline; keep ours one line. */
static const char *one_line(const char *msg, char *buf, size_t len)
{
        size_t n = strlen(msg);
        while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
                n--;
        snprintf(buf, len, "%.*s", (int)n, msg);
        for (char *p = buf; *p; p++)
                if (*p == '\n')
                        *p = ' ';
        return buf;
}

#define Q_MAX_PARAMS 4

#if defined(__GNUC__)
#define Q_SENTINEL __attribute__((sentinel))
#else
#define Q_SENTINEL
#endif

/*
 * Run one of the catalog queries of the PostgreSQL section with the text
 * parameters that follow sql ($1, $2, ...; at most Q_MAX_PARAMS), ended by
 * NULL. On failure NULL and, when name is not NULL, a failed verdict under
 * name; with name NULL the caller says what the failure means. Caller
 * clears the result.
 */
static PGresult *q(ctx_t *x, const char *name, const char *sql, ...) Q_SENTINEL;
static PGresult *q(ctx_t *x, const char *name, const char *sql, ...)
{
        const char *params[Q_MAX_PARAMS];
        int n = 0;
        const char *p;
        va_list ap;
        va_start(ap, sql);
        while ((p = va_arg(ap, const char *)) != NULL) {
                if (n == Q_MAX_PARAMS)
                        abort(); /* a query of ours with more: raise Q_MAX_PARAMS */
                params[n++] = p;
        }
        va_end(ap);
        PGresult *res = PQexecParams(x->conn, sql, n, NULL, params, NULL, NULL, 0);
        if (PQresultStatus(res) == PGRES_TUPLES_OK || PQresultStatus(res) == PGRES_COMMAND_OK)
                return res;
        if (!name) {
                PQclear(res);
                return NULL;
        }
        char buf[RELAY_ERRBUF];
        add(x, name, RELAY_CHECK_FAIL, "make sure the role may read the system catalogs",
            "could not query the server: %s",
            one_line(res ? PQresultErrorMessage(res) : PQerrorMessage(x->conn), buf, sizeof(buf)));
        PQclear(res);
        return NULL;
}

/* q() with the outbox table's oid as $1, its only parameter. */
static PGresult *q_table(ctx_t *x, const char *name, const char *sql)
{
        char oid[16];
        snprintf(oid, sizeof(oid), "%u", x->table_oid);
        return q(x, name, sql, oid, NULL);
}

static bool is_true(const PGresult *res, int row, int col)
{
        return !PQgetisnull(res, row, col) && strcmp(PQgetvalue(res, row, col), "t") == 0;
}

/* --- PostgreSQL ------------------------------------------------------------ */

/*
 * Every catalog query the check runs, in the order it runs them (the
 * publication's depend on outbox.source): each must stay valid on every
 * PostgreSQL the relay supports, 14 to 18. $n are the text parameters q()
 * takes after the query. The other statements are built from names in the
 * configuration: the snapshot filter's EXPLAIN and the topics' SELECT.
 */

static const char sql_settings[] =
        "SELECT current_setting('wal_level'), current_setting('max_slot_wal_keep_size'), "
        "current_setting('max_replication_slots')::int, current_setting('max_wal_senders')::int, "
        "pg_is_in_recovery()";

/* quote_ident: the name as the fixes' SQL must spell it ("App-Relay", "user") */
static const char sql_role[] =
        "SELECT rolname, rolreplication, rolcanlogin, rolsuper, quote_ident(rolname) "
        "FROM pg_catalog.pg_roles WHERE rolname = current_user";

/* $1 every name a fix may spell, a text[]; at the first such fix
 * (quote_names()) */
static const char sql_quote[] =
        "SELECT n, pg_catalog.quote_ident(n) FROM pg_catalog.unnest($1::text[]) AS u(n)";

/* $1 schema, $2 table name */
static const char sql_table[] =
        "SELECT c.oid, c.relkind FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON "
        "n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2";

/* $1 table oid */
static const char sql_columns[] =
        "SELECT attname, format_type(atttypid, atttypmod), attnotnull, atttypid::regtype::text, "
        "attgenerated FROM pg_catalog.pg_attribute WHERE attrelid = $1 AND attnum > 0 AND NOT "
        "attisdropped";

/* $1 table oid; snapshot.mode = initial reads the table */
static const char sql_may_select[] =
        "SELECT has_table_privilege($1::oid, 'SELECT'), quote_ident(current_user), "
        "row_security_active($1::oid)";

/* $1 publication */
static const char sql_publication[] =
        "SELECT pubinsert, pubupdate, pubdelete, pubtruncate, puballtables, pubviaroot "
        "FROM pg_catalog.pg_publication WHERE pubname = $1";

/* $1 every outbox table's oid, "{1,2}": creating a publication FOR TABLE
 * needs CREATE on the database and owning the tables */
static const char sql_may_create_publication[] =
        "SELECT has_database_privilege(current_database(), 'CREATE'), "
        "bool_and(pg_has_role(current_user, c.relowner, 'USAGE')) "
        "FROM pg_catalog.pg_class c WHERE c.oid = ANY ($1::oid[])";

/* $1 publication, $2 schema, $3 table name (which exists): is it partitioned,
 * and is it in pg_publication_tables, as the relay asks at its start (without
 * publish_via_partition_root that view lists a partitioned table's partitions
 * instead) */
static const char sql_publication_has_table[] =
        "SELECT c.relkind = 'p', EXISTS (SELECT 1 FROM pg_catalog.pg_publication_tables t "
        "WHERE t.pubname = $1 AND t.schemaname = $2 AND t.tablename = $3), "
        /* the first of its leaves (itself, or its partitions) without a
         * replica identity, which an UPDATE needs once updates are published;
         * NULL when none */
        "(SELECT format('%I.%I', ln.nspname, l.relname) "
        "FROM (SELECT relid, isleaf FROM pg_catalog.pg_partition_tree(c.oid) "
        "UNION SELECT c.oid, true WHERE c.relkind <> 'p') p " /* the tree has no plain table */
        "JOIN pg_catalog.pg_class l ON l.oid = p.relid "
        "JOIN pg_catalog.pg_namespace ln ON ln.oid = l.relnamespace WHERE p.isleaf AND NOT "
        "(l.relreplident = 'f' OR EXISTS (SELECT 1 FROM pg_catalog.pg_index i "
        "WHERE i.indrelid = l.oid AND CASE l.relreplident WHEN 'd' THEN i.indisprimary "
        "WHEN 'i' THEN i.indisreplident ELSE false END)) ORDER BY 1 LIMIT 1) "
        "FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = $2 AND c.relname = $3";

/* $1 publication; outbox.source = messages */
static const char sql_message_publication[] =
        "SELECT puballtables, (SELECT count(*) FROM pg_catalog.pg_publication_tables t "
        "WHERE t.pubname = p.pubname) FROM pg_catalog.pg_publication p WHERE pubname = $1";

/* $1 publication, $2 schema, $3 table name; PostgreSQL 15+: the columns the
 * publication sends of the table (all of them without a column list) */
static const char sql_publication_columns[] =
        "SELECT a.attname, a.attname = ANY (p.attnames), a.attgenerated "
        "FROM pg_catalog.pg_publication_tables p JOIN pg_catalog.pg_namespace n "
        "ON n.nspname = p.schemaname JOIN pg_catalog.pg_class c ON "
        "c.relnamespace = n.oid AND c.relname = p.tablename JOIN "
        "pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND "
        "NOT a.attisdropped WHERE p.pubname = $1 AND p.schemaname = $2 AND p.tablename = $3";

/* a publication of no tables needs CREATE on the database only */
static const char sql_may_create[] =
        "SELECT has_database_privilege(current_database(), 'CREATE')";

/* $1 slot name; one row whether the slot exists or not. The failover and
 * synced columns came in PostgreSQL 17: before it, both are false. */
#define SQL_SLOT(failover_synced)                                                                  \
        "SELECT plugin, database, current_database(), active_pid, wal_status, safe_wal_size, "     \
        "confirmed_flush_lsn, slot_type, temporary, "                                              \
        "(SELECT count(*) FROM pg_catalog.pg_replication_slots), "                                 \
        "current_setting('max_replication_slots')::int, " failover_synced ", two_phase "          \
        "FROM (SELECT 1) one LEFT JOIN pg_catalog.pg_replication_slots s ON s.slot_name = $1"
static const char sql_slot[] = SQL_SLOT("failover, synced");
static const char sql_slot_before_17[] = SQL_SLOT("false, false");
#undef SQL_SLOT

/* PostgreSQL 17+, with a failover slot */
static const char sql_synchronized_standby_slots[] =
        "SELECT current_setting('synchronized_standby_slots')";

/* $1 table oid; whether the rows can be read for the topics they name */
static const char sql_table_readable[] =
        "SELECT has_table_privilege($1::oid, 'SELECT'), pg_relation_size($1::oid)";

/* A text[] literal of the n names: each element in double quotes, '"' and
 * '\\' escaped with a backslash (array_in's rules). NULL when out of memory. */
static char *text_array(const char *const *names, size_t n)
{
        relay_strbuf_t b = {0};
        relay_strbuf_addc(&b, '{');
        for (size_t i = 0; i < n; i++) {
                relay_strbuf_adds(&b, i ? ",\"" : "\"");
                for (const char *c = names[i]; *c; c++) {
                        if (*c == '"' || *c == '\\')
                                relay_strbuf_addc(&b, '\\');
                        relay_strbuf_addc(&b, *c);
                }
                relay_strbuf_addc(&b, '"');
        }
        relay_strbuf_addc(&b, '}');
        return relay_strbuf_finish(&b);
}

/*
 * Every name a fix may spell, as the server's quote_ident() spells it, into
 * x->quoted, in one query: the publication, each outbox table's schema and
 * name, each column the mapping reads. Nothing when the server does not
 * answer (sql_name() quotes each part then).
 */
static void quote_names(ctx_t *x)
{
        const relay_settings_t *s = x->set;
        size_t nmapped = relay_settings_n_mapped(s), n = 0;
        const char **names = calloc(2 + 2 * s->n_outbox_tables + nmapped, sizeof(*names));
        x->quoted_asked = true;
        if (!names) {
                x->res->oom = true;
                return;
        }
        names[n++] = s->publication_name;
        names[n++] = s->outbox_column.id;
        for (size_t i = 0; i < s->n_outbox_tables; i++) {
                names[n++] = s->outbox_tables[i].schema;
                names[n++] = s->outbox_tables[i].name;
        }
        for (size_t w = 0; w < nmapped; w++) {
                bool optional;
                const char *key, *col = relay_settings_mapped_column(s, w, &key, &optional);
                if (col)
                        names[n++] = col;
        }
        char *arr = text_array(names, n);
        free(names);
        PGresult *res = arr ? q(x, NULL, sql_quote, arr, NULL) : NULL;
        x->res->oom |= !arr;
        free(arr);
        for (int i = 0; res && i < PQntuples(res); i++) {
                const char *k = PQgetvalue(res, i, 0), *v = PQgetvalue(res, i, 1);
                if (relay_pairs_add(&x->quoted, k, strlen(k), v, strlen(v)))
                        x->res->oom = true;
        }
        PQclear(res);
}

/*
 * A name as the SQL of a fix must spell it: as PostgreSQL's quote_ident()
 * does, asked of the server, which knows its keywords (quote_names(), at
 * the first fix): bare when it may be ("public.outbox"), quoted when it
 * must be ("Relay", "order"."outbox", "Aggregate Id"). "schema.name", or
 * name alone when schema is NULL. Into buf; when the server did not answer,
 * each part in quotes (PQescapeIdentifier), which is valid SQL too.
 */
static const char *sql_name(ctx_t *x, const char *schema, const char *name, char *buf, size_t len)
{
        if (!x->quoted_asked)
                quote_names(x);
        const char *as = schema ? relay_pairs_get(&x->quoted, schema) : NULL;
        const char *an = relay_pairs_get(&x->quoted, name);
        if (an && (as || !schema)) {
                snprintf(buf, len, "%s%s%s", as ? as : "", as ? "." : "", an);
                return buf;
        }
        char *qs = schema ? PQescapeIdentifier(x->conn, schema, strlen(schema)) : NULL;
        char *qn = PQescapeIdentifier(x->conn, name, strlen(name));
        if (qn && (qs || !schema))
                snprintf(buf, len, "%s%s%s", qs ? qs : "", qs ? "." : "", qn);
        else {
                x->res->oom = true;
                snprintf(buf, len, "%s%s%s", schema ? schema : "", schema ? "." : "", name);
        }
        PQfreemem(qs);
        PQfreemem(qn);
        return buf;
}

static bool pg_connect(ctx_t *x)
{
        /* UTF8 as the relay's own connection: names and values reach JSON output. */
        const char *keys[] = {"dbname", "application_name", "client_encoding", NULL};
        const char *conninfo = x->set->postgres_conninfo;
        const char *vals[] = {conninfo[0] ? conninfo : NULL, "outbox-relay check", "UTF8", NULL};
        char buf[RELAY_ERRBUF];

        x->conn = vals[0] ? PQconnectdbParams(keys, vals, 1) : PQconnectdbParams(keys + 1, vals + 1, 0);
        if (x->conn)
                PQsetNoticeProcessor(x->conn, relay_log_server_notice, NULL);
        if (!x->conn) {
                x->res->oom = true;
                return false;
        }
        if (PQstatus(x->conn) != CONNECTION_OK) {
                add(x, "postgres.connection", RELAY_CHECK_FAIL,
                    "check postgres.conninfo (or the PG* variables), that the server runs and "
                    "that pg_hba.conf admits the role; the other PostgreSQL checks need a connection",
                    "could not connect to PostgreSQL: %s",
                    one_line(PQerrorMessage(x->conn), buf, sizeof(buf)));
                return false;
        }
        /* Bound every read of ours, in particular the outbox table's. */
        PGresult *res = PQexec(x->conn, "SET statement_timeout = '5s'");
        PQclear(res);
        add(x, "postgres.connection", RELAY_CHECK_OK, NULL,
            "connected to database \"%s\" on \"%s\" port %s as role \"%s\"", PQdb(x->conn),
            PQhost(x->conn), PQport(x->conn), PQuser(x->conn));
        return true;
}

static void pg_server(ctx_t *x)
{
        int v = PQserverVersion(x->conn);
        const char *sv = PQparameterStatus(x->conn, "server_version");
        if (v < 140000)
                add(x, "postgres.version", RELAY_CHECK_FAIL,
                    "upgrade PostgreSQL to 14 or later",
                    "PostgreSQL %s is not supported: outbox-relay needs PostgreSQL 14 to 18",
                    sv ? sv : "?");
        else if (v >= 190000)
                add(x, "postgres.version", RELAY_CHECK_WARNING, NULL,
                    "PostgreSQL %s is newer than the versions outbox-relay was tested with (14 to "
                    "18)",
                    sv ? sv : "?");
        else
                add(x, "postgres.version", RELAY_CHECK_OK, NULL,
                    "PostgreSQL %s (14 to 18 supported)", sv ? sv : "?");

        PGresult *res = q(x, "postgres.settings", sql_settings, NULL);
        if (!res)
                return;
        const char *wal_level = PQgetvalue(res, 0, 0);
        if (strcmp(wal_level, "logical") == 0)
                add(x, "postgres.wal_level", RELAY_CHECK_OK, NULL, "wal_level is \"logical\"");
        else
                add(x, "postgres.wal_level", RELAY_CHECK_FAIL,
                    "set wal_level = logical in postgresql.conf and restart PostgreSQL",
                    "wal_level is \"%s\" but logical decoding needs \"logical\"", wal_level);
        const char *keep = PQgetvalue(res, 0, 1);
        if (strcmp(keep, "-1") == 0)
                add(x, "postgres.max_slot_wal_keep_size", RELAY_CHECK_WARNING,
                    "set max_slot_wal_keep_size (e.g. '50GB', below the free space of pg_wal) and "
                    "reload; the relay stops with exit 5 if its slot is invalidated",
                    "max_slot_wal_keep_size is -1: a slot nobody reads (a relay stopped for good) "
                    "keeps WAL without limit and can fill the disk");
        else
                add(x, "postgres.max_slot_wal_keep_size", RELAY_CHECK_OK, NULL,
                    "max_slot_wal_keep_size is %s: a slot is invalidated before it holds more WAL",
                    keep);
        if (atoi(PQgetvalue(res, 0, 3)) < 1)
                add(x, "postgres.max_wal_senders", RELAY_CHECK_FAIL,
                    "set max_wal_senders = 10 in postgresql.conf and restart PostgreSQL",
                    "max_wal_senders is 0: no replication connection is possible");
        if (is_true(res, 0, 4))
                add(x, "postgres.recovery", RELAY_CHECK_WARNING,
                    "point postgres.conninfo at the primary",
                    "the server is a standby (in recovery): logical slots on a standby need "
                    "PostgreSQL 16 and hot_standby_feedback");
        PQclear(res);
}

static void pg_role(ctx_t *x)
{
        PGresult *res = q(x, "postgres.role", sql_role, NULL);
        if (!res)
                return;
        if (PQntuples(res) != 1) {
                add(x, "postgres.role", RELAY_CHECK_FAIL, NULL, "current role not found in pg_roles");
                PQclear(res);
                return;
        }
        const char *role = PQgetvalue(res, 0, 0), *qrole = PQgetvalue(res, 0, 4);
        bool repl = is_true(res, 0, 1), login = is_true(res, 0, 2), super = is_true(res, 0, 3);
        if (!repl && !super)
                addf(x, "postgres.role", RELAY_CHECK_FAIL,
                     "role is not allowed to stream logical replication (no REPLICATION)",
                     "ALTER ROLE %s REPLICATION (see sql/003_role.sql)", qrole);
        else if (!login)
                addf(x, "postgres.role", RELAY_CHECK_FAIL, "role cannot log in (NOLOGIN)",
                     "ALTER ROLE %s LOGIN", qrole);
        else if (super)
                add(x, "postgres.role", RELAY_CHECK_WARNING,
                    "use a role with LOGIN REPLICATION only (see sql/003_role.sql)",
                    "role \"%s\" is a superuser; the relay needs only LOGIN and REPLICATION (no "
                    "SELECT on the outbox table either)",
                    role);
        else
                add(x, "postgres.role", RELAY_CHECK_OK, NULL,
                    "role \"%s\" has LOGIN and REPLICATION, all the relay needs once the "
                    "publication exists (it needs no SELECT on the outbox table)",
                    role);
        PQclear(res);
}

static bool schema_optional(ctx_t *x, PGresult *res, const char *table);

/* $1 the outbox table's oid: its inheritance children (a partitioned
 * table's partitions are publish_via_partition_root's business). */
static const char sql_children[] =
        "SELECT n.nspname, c.relname FROM pg_catalog.pg_inherits i JOIN pg_catalog.pg_class c ON "
        "c.oid = i.inhrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE "
        "i.inhparent = $1::pg_catalog.oid ORDER BY 1, 2";

/* An inheritance child that is not itself in outbox.table: the relay
 * refuses to start (repl.c, inheritance_children()). */
static void pg_inheritance(ctx_t *x, const char *table)
{
        PGresult *res = q_table(x, "outbox.table", sql_children);
        if (!res)
                return;
        for (int i = 0; i < PQntuples(res); i++) {
                const char *cs = PQgetvalue(res, i, 0), *cn = PQgetvalue(res, i, 1);
                bool listed = false;
                for (size_t t = 0; t < x->set->n_outbox_tables; t++)
                        listed |= strcmp(x->set->outbox_tables[t].schema, cs) == 0 &&
                                  strcmp(x->set->outbox_tables[t].name, cn) == 0;
                if (listed)
                        continue;
                char fix[320];
                snprintf(fix, sizeof(fix),
                         "add %s.%s to outbox.table (and to the publication), or make the outbox "
                         "table a partitioned one",
                         cs, cn);
                add(x, "outbox.table", RELAY_CHECK_FAIL, fix,
                    "outbox table \"%s\" has an inheritance child, \"%s.%s\", whose rows logical "
                    "replication sends, if at all, under the child's name, so the relay would "
                    "ignore them",
                    table, cs, cn);
                break;
        }
        PQclear(res);
}

static void pg_table(ctx_t *x)
{
        const relay_settings_t *s = x->set;
        char table[160];
        snprintf(table, sizeof(table), "%s.%s", x->tbl->schema, x->tbl->name);
        PGresult *res = q(x, "outbox.table", sql_table, x->tbl->schema, x->tbl->name, NULL);
        if (!res)
                return;
        if (PQntuples(res) == 0) {
                add(x, "outbox.table", RELAY_CHECK_FAIL,
                    "create it (see sql/001_outbox.sql) or set outbox.table",
                    "outbox table \"%s\" does not exist in database \"%s\"", table, PQdb(x->conn));
                PQclear(res);
                return;
        }
        char kind[8];
        snprintf(kind, sizeof(kind), "%s", PQgetvalue(res, 0, 1));
        x->table_oid = (unsigned)strtoul(PQgetvalue(res, 0, 0), NULL, 10);
        size_t ol = strlen(x->oids);
        snprintf(x->oids + ol, sizeof(x->oids) - ol, "%s%u", ol ? "," : "", x->table_oid);
        PQclear(res);
        if (strcmp(kind, "r") != 0 && strcmp(kind, "p") != 0) {
                add(x, "outbox.table", RELAY_CHECK_FAIL, "set outbox.table to an ordinary table",
                    "\"%s\" is not a table (relkind '%s'): only tables can be published", table,
                    kind);
                return;
        }
        x->table_exists = true;
        add(x, "outbox.table", RELAY_CHECK_OK, NULL, "outbox table \"%s\" exists", table);
        if (strcmp(kind, "r") == 0)
                pg_inheritance(x, table);

        /* Every column the mapping reads: its role, its key, nullability. */
        res = q_table(x, "outbox.columns", sql_columns);
        if (!res)
                return;
        size_t nwant = relay_settings_n_mapped(s);
        bool problems = false;
        char summary[1024] = "";
        size_t sl = 0;
        size_t template_end = 5 + s->n_outbox_headers + s->topic_template.nparts;
        for (size_t w = 0; w < nwant; w++) {
                bool optional;
                const char *key, *col = relay_settings_mapped_column(s, w, &key, &optional);
                char keybuf[64];
                if (!col)
                        continue;
                snprintf(keybuf, sizeof(keybuf), "%s", key);
                int row = -1;
                for (int i = 0; i < PQntuples(res); i++)
                        if (strcmp(PQgetvalue(res, i, 0), col) == 0)
                                row = i;
                if (row < 0 && optional)
                        continue;
                if (row < 0) {
                        char fix[256];
                        problems = true;
                        snprintf(fix, sizeof(fix), "add the column, or set %s to the column that holds it",
                                 keybuf);
                        add(x, "outbox.columns", RELAY_CHECK_FAIL, fix,
                            "outbox table \"%s\" has no column \"%s\" (%s)", table, col, keybuf);
                        continue;
                }
                const char *type = PQgetvalue(res, row, 1);
                const char *base = PQgetvalue(res, row, 3);
                bool notnull = is_true(res, row, 2);
                char gen = PQgetvalue(res, row, 4)[0];
                /* pgoutput sends no generated column before 18 and never a
                 * virtual one (repl.c, generated_columns()); a stored one on
                 * 18 is the publication's choice, postgres.publication. */
                if (gen == 'v' || (gen == 's' && PQserverVersion(x->conn) < 180000)) {
                        problems = true;
                        add(x, "outbox.columns", RELAY_CHECK_FAIL,
                            "make it a plain column the application fills",
                            "column \"%s\" (%s) is a %s generated column, which logical "
                            "replication %s: every row would arrive without it",
                            col, keybuf, gen == 'v' ? "virtual" : "stored",
                            gen == 'v' ? "never sends" : "does not send before PostgreSQL 18");
                        continue;
                }
                if (w == 4 && strcmp(base, "json") != 0 && strcmp(base, "jsonb") != 0 &&
                    strcmp(base, "text") != 0 && strcmp(base, "character varying") != 0 &&
                    strcmp(base, "bytea") != 0) {
                        problems = true;
                        add(x, "outbox.columns", RELAY_CHECK_WARNING,
                            "use json, jsonb, text or bytea for the payload column",
                            "payload column \"%s\" is of type %s: Kafka gets its text output", col,
                            type);
                }
                /* id, aggregate id and template columns: NULL makes the row poison. */
                if (!notnull &&
                    (w == 0 || w == 2 || (w >= 5 + s->n_outbox_headers && w < template_end))) {
                        problems = true;
                        char fix[512], qtable[160], qcol[160];
                        snprintf(fix, sizeof(fix), "ALTER TABLE %s ALTER COLUMN %s SET NOT NULL",
                                 sql_name(x, x->tbl->schema, x->tbl->name, qtable, sizeof(qtable)),
                                 sql_name(x, NULL, col, qcol, sizeof(qcol)));
                        add(x, "outbox.columns", RELAY_CHECK_WARNING, fix,
                            "column \"%s\" (%s) may be NULL: a row with NULL there cannot become "
                            "an event and goes to the error policy",
                            col, keybuf);
                }
                if (w < 5 && sl < sizeof(summary))
                        sl += (size_t)snprintf(summary + sl, sizeof(summary) - sl, "%s%s %s",
                                               sl ? ", " : "", col, type);
        }
        if (s->format_profile == RELAY_PROFILE_CONNECT_JSON_SCHEMA ||
            s->format_profile == RELAY_PROFILE_DEBEZIUM_SERVER)
                problems |= schema_optional(x, res, table);
        PQclear(res);
        if (!problems)
                add(x, "outbox.columns", RELAY_CHECK_OK, NULL,
                    "the mapping's columns exist: %s", summary);
}

/*
 * With a JSON-schema profile, each encoded column's "optional" comes from
 * format.not_null_columns, where Debezium reads the catalog: a column
 * listed but nullable (or NOT NULL but not listed) changes the bytes.
 */
static bool schema_optional(ctx_t *x, PGresult *res, const char *table)
{
        const relay_settings_t *s = x->set;
        char want[1024] = "", wrong[512] = "";
        size_t wl = 0, rl = 0;
        for (int i = 0; i < PQntuples(res); i++) {
                const char *col = PQgetvalue(res, i, 0);
                bool notnull = is_true(res, i, 2), listed = false;
                if (notnull && wl < sizeof(want))
                        wl += (size_t)snprintf(want + wl, sizeof(want) - wl, "%s%s", wl ? "," : "",
                                               col);
                for (size_t j = 0; j < s->n_format_not_null; j++)
                        if (strcmp(s->format_not_null[j], col) == 0)
                                listed = true;
                bool used = strcmp(col, s->outbox_column.id) == 0 ||
                            strcmp(col, s->outbox_column.aggregate_id) == 0 ||
                            strcmp(col, s->outbox_column.payload) == 0;
                for (size_t j = 0; !used && j < s->n_outbox_headers; j++)
                        used = strcmp(s->outbox_headers[j], col) == 0;
                for (size_t j = 0; !used && j < s->n_additional; j++)
                        used = strcmp(s->additional[j].column, col) == 0 &&
                               s->additional[j].placement != RELAY_PLACE_PARTITION;
                if (used && listed != notnull && rl < sizeof(wrong))
                        rl += (size_t)snprintf(wrong + rl, sizeof(wrong) - rl, "%s%s (%s)",
                                               rl ? ", " : "", col,
                                               notnull ? "NOT NULL, not listed" : "listed, nullable");
        }
        if (!wrong[0])
                return false;
        char fix[1200];
        snprintf(fix, sizeof(fix), "set format.not_null_columns = %s", want[0] ? want : "\"\"");
        add(x, "outbox.columns", RELAY_CHECK_FAIL, fix,
            "format.not_null_columns disagrees with table \"%s\" for %s: the JSON schemas' "
            "\"optional\" would differ from Debezium's",
            table, wrong);
        return true;
}

/*
 * outbox.source = messages: pgoutput needs a publication to start, any
 * publication; the relay creates an empty one when it is missing. Tables in
 * it only cost decoding that the relay throws away.
 */
static void pg_message_publication(ctx_t *x)
{
        const char *pub = x->set->publication_name;
        char qpub[160];
        PGresult *res = q(x, "postgres.publication", sql_message_publication, pub, NULL);
        if (!res)
                return;
        if (PQntuples(res) == 1) {
                bool all = is_true(res, 0, 0);
                long tables = strtol(PQgetvalue(res, 0, 1), NULL, 10);
                PQclear(res);
                if (all || tables > 0)
                        add(x, "postgres.publication", RELAY_CHECK_WARNING,
                            "use a publication of no tables for outbox.source = messages (CREATE "
                            "PUBLICATION name, without FOR)",
                            "publication \"%s\" publishes %s: the walsender decodes and sends "
                            "their changes, which the relay discards (it reads messages only)",
                            pub, all ? "all tables" : "tables");
                else
                        add(x, "postgres.publication", RELAY_CHECK_OK, NULL,
                            "publication \"%s\" exists (no tables: messages need none)", pub);
                return;
        }
        PQclear(res);
        res = q(x, "postgres.publication", sql_may_create, NULL);
        if (!res)
                return;
        bool can_create = PQntuples(res) == 1 && is_true(res, 0, 0);
        PQclear(res);
        if (can_create)
                add(x, "postgres.publication", RELAY_CHECK_WARNING,
                    "create it beforehand (CREATE PUBLICATION name, without FOR) to keep the "
                    "relay's role unprivileged",
                    "publication \"%s\" does not exist; the relay creates it empty at its first "
                    "start, as this role may create in the database",
                    pub);
        else
                addf(x, "postgres.publication", RELAY_CHECK_FAIL,
                     "publication does not exist and this role cannot create it (creating needs "
                     "CREATE on the database)",
                     "CREATE PUBLICATION %s (no tables: outbox.source = messages needs none)",
                     sql_name(x, NULL, pub, qpub, sizeof(qpub)));
}

/* What the message source needs beyond the server checks: nothing to read,
 * but say where events come from, as the table checks do for the table. */
static void pg_messages(ctx_t *x)
{
        const relay_settings_t *s = x->set;
        add(x, "outbox.source", RELAY_CHECK_OK, NULL,
            "events %sfrom transactional logical decoding messages with prefix \"%s\" "
            "(pg_logical_emit_message(true, '%s', body), or outbox_emit() of "
            "sql/005_outbox_emit.sql)",
            s->outbox_source == RELAY_SOURCE_BOTH ? "from the outbox table and " : "",
            s->outbox_message_prefix, s->outbox_message_prefix);
}

/* snapshot.mode = initial: the backfill reads the table with the filter. */
static void pg_snapshot(ctx_t *x)
{
        const relay_settings_t *s = x->set;
        if (!x->table_exists)
                return; /* outbox.table says why */
        PGresult *res = q_table(x, "snapshot.mode", sql_may_select);
        if (!res)
                return;
        bool may = PQntuples(res) == 1 && is_true(res, 0, 0);
        char qtable[160];
        sql_name(x, x->tbl->schema, x->tbl->name, qtable, sizeof(qtable));
        if (!may)
                addf(x, "snapshot.mode", RELAY_CHECK_FAIL,
                     "snapshot.mode = initial reads the outbox table once, and this role may not",
                     "GRANT SELECT ON %s TO %s, or set snapshot.mode = never", qtable,
                     PQntuples(res) == 1 ? PQgetvalue(res, 0, 1) : "CURRENT_USER");
        /* The stream is not filtered by policies; the backfill's SELECT is. */
        bool rls = may && is_true(res, 0, 2);
        if (rls) {
                char fix[512];
                snprintf(fix, sizeof(fix), RELAY_BACKFILL_RLS_FIX, PQgetvalue(res, 0, 1), qtable);
                add(x, "snapshot.mode", RELAY_CHECK_FAIL, fix, RELAY_BACKFILL_RLS_PROBLEM,
                    x->tbl->schema, x->tbl->name, PQgetvalue(res, 0, 1));
        }
        PQclear(res);
        if (!may || rls)
                return;
        if (!*s->snapshot_filter) {
                add(x, "snapshot.mode", RELAY_CHECK_OK, NULL,
                    "snapshot.mode = initial: the rows of \"%s.%s\" are backfilled when the "
                    "relay creates the slot",
                    x->tbl->schema, x->tbl->name);
                return;
        }
        /* Planned, not run; the extended protocol takes one statement only. */
        char *qs = PQescapeIdentifier(x->conn, x->tbl->schema,
                                      strlen(x->tbl->schema));
        char *qt = PQescapeIdentifier(x->conn, x->tbl->name, strlen(x->tbl->name));
        size_t n = strlen(s->snapshot_filter) + 512;
        char *sql = malloc(n);
        if (!qs || !qt || !sql) {
                PQfreemem(qs);
                PQfreemem(qt);
                free(sql);
                x->res->oom = true;
                return;
        }
        snprintf(sql, n, "EXPLAIN SELECT 1 FROM %s.%s WHERE (%s\n)", qs, qt, s->snapshot_filter);
        PQfreemem(qs);
        PQfreemem(qt);
        res = PQexecParams(x->conn, sql, 0, NULL, NULL, NULL, NULL, 0);
        free(sql);
        if (PQresultStatus(res) != PGRES_TUPLES_OK) {
                char buf[256];
                const char *primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
                add(x, "snapshot.filter", RELAY_CHECK_FAIL,
                    "set snapshot.filter to a condition on the table's columns, as in a WHERE "
                    "clause (e.g. sent_at IS NULL), or empty for every row",
                    "snapshot.filter \"%s\" does not work on table \"%s.%s\": %s",
                    s->snapshot_filter, x->tbl->schema, x->tbl->name,
                    primary ? primary : one_line(PQresultErrorMessage(res), buf, sizeof(buf)));
        } else {
                add(x, "snapshot.filter", RELAY_CHECK_OK, NULL,
                    "snapshot.mode = initial: the rows of \"%s.%s\" where (%s) are backfilled "
                    "when the relay creates the slot",
                    x->tbl->schema, x->tbl->name, s->snapshot_filter);
        }
        PQclear(res);
}

/*
 * PostgreSQL 15+: a column list that leaves out a column the mapping reads
 * turns every row into an error ("no column"); the fix drops the lists by
 * setting the tables anew, in one statement so that no insert goes
 * unpublished in between. true when it does.
 */
static bool publication_columns(ctx_t *x, const relay_table_name_t *t, const char *list)
{
        const relay_settings_t *s = x->set;
        const char *pub = s->publication_name;
        char qpub[160];
        PGresult *res = q(x, "postgres.publication", sql_publication_columns, pub, t->schema,
                          t->name, NULL);
        if (!res)
                return true;
        char missing[512] = "";
        size_t ml = 0, nwant = relay_settings_n_mapped(s);
        bool generated = false; /* 18: a stored generated one it leaves out */
        for (size_t w = 0; w < nwant; w++) {
                bool optional;
                const char *key, *col = relay_settings_mapped_column(s, w, &key, &optional);
                /* One the table lacks is outbox.columns' failure (or,
                 * optional, none). */
                bool sent = false, skip = true;
                for (int i = 0; col && i < PQntuples(res) && !sent; i++) {
                        if (strcmp(PQgetvalue(res, i, 0), col) != 0)
                                continue;
                        sent = is_true(res, i, 1);
                        char gen = PQgetvalue(res, i, 2)[0];
                        /* One no publication sends is outbox.columns' failure. */
                        skip = gen == 'v' || (gen == 's' && PQserverVersion(x->conn) < 180000);
                        generated = generated || (!sent && gen == 's');
                }
                if (col && !sent && !skip && ml < sizeof(missing))
                        ml += (size_t)snprintf(missing + ml, sizeof(missing) - ml, "%s\"%s\" (%s)",
                                               ml ? ", " : "", col, key);
        }
        PQclear(res);
        if (!missing[0])
                return false;
        char fix[1024];
        if (generated) {
                snprintf(fix, sizeof(fix),
                         "ALTER PUBLICATION %s SET (publish_generated_columns = stored)",
                         sql_name(x, NULL, pub, qpub, sizeof(qpub)));
                add(x, "postgres.publication", RELAY_CHECK_FAIL, fix,
                    "publication \"%s\" does not publish generated columns of table \"%s.%s\", "
                    "among them %s: every row would arrive without it and go to the error policy",
                    pub, t->schema, t->name, missing);
                return true;
        }
        snprintf(fix, sizeof(fix),
                 "ALTER PUBLICATION %s SET TABLE %s (which drops the column lists)",
                 sql_name(x, NULL, pub, qpub, sizeof(qpub)), list);
        add(x, "postgres.publication", RELAY_CHECK_FAIL, fix,
            "publication \"%s\" has a column list for table \"%s.%s\" without %s: every row "
            "would arrive without it and go to the error policy",
            pub, t->schema, t->name, missing);
        return true;
}

static void pg_publication(ctx_t *x)
{
        const relay_settings_t *s = x->set;
        const char *pub = s->publication_name;
        char tables[512], list[512], qt[160], qpub[160];
        relay_settings_tables(s, tables, sizeof(tables));
        if (s->outbox_source == RELAY_SOURCE_MESSAGES) {
                pg_message_publication(x);
                return;
        }
        sql_name(x, NULL, pub, qpub, sizeof(qpub)); /* for the fixes; messages quote pub */
        size_t ll = 0;
        list[0] = '\0';
        for (size_t i = 0; i < s->n_outbox_tables && ll < sizeof(list); i++)
                ll += (size_t)snprintf(list + ll, sizeof(list) - ll, "%s%s", i ? ", " : "",
                                       sql_name(x, s->outbox_tables[i].schema,
                                                s->outbox_tables[i].name, qt, sizeof(qt)));
        PGresult *res = q(x, "postgres.publication", sql_publication, pub, NULL);
        if (!res)
                return;
        if (PQntuples(res) == 0) {
                PQclear(res);
                if (!x->table_exists) {
                        add(x, "postgres.publication", RELAY_CHECK_FAIL,
                            "create the outbox table first, then the publication (sql/002_publication.sql)",
                            "publication \"%s\" does not exist", pub);
                        return;
                }
                /* The relay creates it: CREATE on the database, and owning the tables. */
                char oids[sizeof(x->oids) + 2];
                snprintf(oids, sizeof(oids), "{%s}", x->oids);
                res = q(x, "postgres.publication", sql_may_create_publication, oids, NULL);
                if (!res)
                        return;
                bool can_create = PQntuples(res) == 1 && is_true(res, 0, 0) && is_true(res, 0, 1);
                PQclear(res);
                if (can_create)
                        add(x, "postgres.publication", RELAY_CHECK_WARNING,
                            "create it beforehand (sql/002_publication.sql) to keep the relay's "
                            "role unprivileged",
                            "publication \"%s\" does not exist; the relay creates it at its first "
                            "start (inserts%s of %s only), as this role owns the table%s and "
                            "may create in the database",
                            pub, s->invalid_op != RELAY_INVALID_OP_WARN ? " and updates" : "",
                            tables, s->n_outbox_tables > 1 ? "s" : "");
                else
                        addf(x, "postgres.publication", RELAY_CHECK_FAIL,
                             "publication does not exist and this role cannot create it "
                             "(creating needs CREATE on the database and ownership of the table)",
                             "CREATE PUBLICATION %s FOR TABLE %s WITH (publish = 'insert%s') as "
                             "the tables' owner (sql/002_publication.sql)",
                             qpub, list, s->invalid_op != RELAY_INVALID_OP_WARN ? ", update" : "");
                return;
        }
        bool ins = is_true(res, 0, 0), upd = is_true(res, 0, 1), del = is_true(res, 0, 2),
             trunc = is_true(res, 0, 3), all = is_true(res, 0, 4), viaroot = is_true(res, 0, 5);
        PQclear(res);
        bool bad = false;
        if (!ins) {
                bad = true;
                addf(x, "postgres.publication", RELAY_CHECK_FAIL,
                     "publication does not publish inserts, so the relay would receive no event",
                     "ALTER PUBLICATION %s SET (publish = 'insert')", qpub);
        }
        /* table.op.invalid.behavior = error or fatal must see updates. */
        bool want_upd = s->invalid_op != RELAY_INVALID_OP_WARN;
        if (want_upd && !upd) {
                bad = true;
                addf(x, "postgres.publication", RELAY_CHECK_FAIL,
                     "publication does not publish updates, which table.op.invalid.behavior = "
                     "error or fatal needs to see",
                     "ALTER PUBLICATION %s SET (publish = 'insert, update')", qpub);
        }
        if (want_upd)
                upd = false;
        if (upd || del || trunc) {
                char what[64] = "";
                snprintf(what, sizeof(what), "%s%s%s%s%s", upd ? "update" : "",
                         upd && (del || trunc) ? ", " : "", del ? "delete" : "",
                         del && trunc ? ", " : "", trunc ? "truncate" : "");
                char fix[256];
                snprintf(fix, sizeof(fix), "ALTER PUBLICATION %s SET (publish = 'insert%s')", qpub,
                         want_upd ? ", update" : "");
                bad = true;
                add(x, "postgres.publication", RELAY_CHECK_FAIL, fix,
                    "publication \"%s\" publishes %s: the relay would receive and discard every "
                    "such change, and UPDATE or DELETE on a published table without a replica "
                    "identity fails",
                    pub, what);
        }
        if (all) {
                bad = true;
                add(x, "postgres.publication", RELAY_CHECK_WARNING,
                    "publish the outbox table alone (sql/002_publication.sql)",
                    "publication \"%s\" is FOR ALL TABLES: the walsender decodes and sends every "
                    "table's changes, which the relay discards",
                    pub);
        }
        for (size_t i = 0; x->table_exists && i < s->n_outbox_tables; i++) {
                const relay_table_name_t *t = &s->outbox_tables[i];
                res = q(x, "postgres.publication", sql_publication_has_table, pub, t->schema,
                        t->name, NULL);
                if (!res)
                        return;
                /* The relay refuses a partitioned table without
                 * publish_via_partition_root before it looks for the table. */
                char fix[512];
                if (PQntuples(res) == 1 && is_true(res, 0, 0) && !viaroot) {
                        bad = true;
                        snprintf(fix, sizeof(fix),
                                 "ALTER PUBLICATION %s SET (publish_via_partition_root = true) "
                                 "before events are written (see sql/002_publication.sql)",
                                 qpub);
                        add(x, "postgres.publication", RELAY_CHECK_FAIL, fix,
                            "outbox table \"%s.%s\" is partitioned but publication \"%s\" sends "
                            "its rows under each partition's name, which the relay would not "
                            "recognise",
                            t->schema, t->name, pub);
                } else if (PQntuples(res) != 1 || !is_true(res, 0, 1)) {
                        bad = true;
                        snprintf(fix, sizeof(fix), "ALTER PUBLICATION %s ADD TABLE %s", qpub,
                                 sql_name(x, t->schema, t->name, qt, sizeof(qt)));
                        add(x, "postgres.publication", RELAY_CHECK_FAIL, fix,
                            "publication \"%s\" does not include table \"%s.%s\"", pub,
                            t->schema, t->name);
                } else {
                        if (PQserverVersion(x->conn) >= 150000)
                                bad |= publication_columns(x, t, list);
                        /* Updates are published for table.op.invalid.behavior. */
                        if (want_upd && !PQgetisnull(res, 0, 2)) {
                                const char *leaf = PQgetvalue(res, 0, 2);
                                bool parted = is_true(res, 0, 0);
                                char qid[160];
                                sql_name(x, NULL, s->outbox_column.id, qid, sizeof(qid));
                                bad = true;
                                if (parted)
                                        snprintf(fix, sizeof(fix),
                                                 "ALTER TABLE %s REPLICA IDENTITY FULL, and the "
                                                 "same for every partition without a primary key "
                                                 "(those attached later too)",
                                                 leaf);
                                else
                                        snprintf(fix, sizeof(fix),
                                                 "ALTER TABLE %s ADD PRIMARY KEY (%s), or ALTER "
                                                 "TABLE %s REPLICA IDENTITY FULL",
                                                 leaf, qid, leaf);
                                add(x, "postgres.publication", RELAY_CHECK_WARNING, fix,
                                    "%s \"%s\" has no replica identity (no primary key) and "
                                    "publication \"%s\" publishes its updates: an UPDATE of it "
                                    "fails in the application (\"cannot update table\") instead "
                                    "of reaching the relay",
                                    parted ? "partition" : "table", leaf, pub);
                        }
                }
                PQclear(res);
        }
        if (!bad)
                add(x, "postgres.publication", RELAY_CHECK_OK, NULL,
                    "publication \"%s\" publishes inserts%s of %s only", pub,
                    want_upd ? " and updates" : "", tables);
}

/*
 * The slot's failover flag (PostgreSQL 17+), when it matters: slot.failover
 * is set, or the slot has the flag anyway. exists: the slot exists, flag its
 * failover column (unused otherwise).
 */
static void pg_slot_failover(ctx_t *x, bool exists, bool flag, bool synced)
{
        const char *slot = x->set->slot_name;
        bool want = x->set->slot_failover;
        int v = PQserverVersion(x->conn);
        if (v < 170000) {
                if (want)
                        add(x, "postgres.slot.failover", RELAY_CHECK_FAIL,
                            "set slot.failover = false, or upgrade PostgreSQL to 17 or later",
                            "slot.failover = true needs PostgreSQL 17 or later (failover slots), "
                            "but the server is PostgreSQL %d.%d",
                            v / 10000, v % 10000);
                return;
        }
        if (!want && !(exists && flag))
                return;
        if (!exists)
                add(x, "postgres.slot.failover", RELAY_CHECK_OK, NULL,
                    "the relay creates replication slot \"%s\" with failover enabled", slot);
        else if (!flag)
                add(x, "postgres.slot.failover", RELAY_CHECK_OK, NULL,
                    "replication slot \"%s\" has failover disabled; the relay enables it at its "
                    "start (slot.failover = true)",
                    slot);
        else
                add(x, "postgres.slot.failover", RELAY_CHECK_OK, NULL,
                    "replication slot \"%s\" has failover enabled%s", slot,
                    synced ? " (synced: a copy made by a standby's slot sync worker)" : "");
        /* Without synchronized_standby_slots the relay may get transactions
         * no standby has: a promotion loses them from the database though
         * Kafka has their events, and the relay's confirmed position may
         * then lie past the new primary's branch point, so its new
         * transactions there would be skipped. */
        PGresult *res = q(x, "postgres.slot.failover", sql_synchronized_standby_slots, NULL);
        if (!res)
                return;
        if (PQgetvalue(res, 0, 0)[0] == '\0')
                add(x, "postgres.synchronized_standby_slots", RELAY_CHECK_WARNING,
                    "set synchronized_standby_slots to the physical slots of the standbys that "
                    "may be promoted and reload",
                    "synchronized_standby_slots is empty: the relay may receive transactions no "
                    "standby has yet, which a promotion loses from the database after their "
                    "events reached Kafka, and the relay's position may then lie past the new "
                    "primary's start, so that it skips the first transactions written there");
        else
                add(x, "postgres.synchronized_standby_slots", RELAY_CHECK_OK, NULL,
                    "synchronized_standby_slots is \"%s\": the relay receives a transaction "
                    "only once those standbys have it",
                    PQgetvalue(res, 0, 0));
        PQclear(res);
}

static void pg_slot(ctx_t *x)
{
        const char *slot = x->set->slot_name;
        bool v17 = PQserverVersion(x->conn) >= 170000;
        PGresult *res = q(x, "postgres.slot", v17 ? sql_slot : sql_slot_before_17, slot, NULL);
        if (!res)
                return;
        if (PQgetisnull(res, 0, 7)) {
                long used = strtol(PQgetvalue(res, 0, 9), NULL, 10);
                long max = strtol(PQgetvalue(res, 0, 10), NULL, 10);
                /* The backfill's temporary slot and the copy exist together
                 * for a moment. */
                long need = x->set->snapshot_initial ? 2 : 1;
                if (used + need > max)
                        add(x, "postgres.slot", RELAY_CHECK_FAIL,
                            "raise max_replication_slots and restart PostgreSQL, or drop an unused slot",
                            "replication slot \"%s\" does not exist and cannot be created: %ld of "
                            "%ld slots (max_replication_slots) are in use, and creating it needs "
                            "%ld free%s",
                            slot, used, max, need,
                            need > 1 ? " (snapshot.mode = initial: a temporary slot and its copy)"
                                     : "");
                else
                        add(x, "postgres.slot", RELAY_CHECK_OK, NULL,
                            "replication slot \"%s\" does not exist yet; the relay creates it "
                            "(pgoutput) at its first start and relays events committed from then on"
                            "%s (%ld of %ld slots in use)",
                            slot,
                            x->set->snapshot_initial ? ", after the rows already in the table" : "",
                            used, max);
                PQclear(res);
                pg_slot_failover(x, false, false, false);
                return;
        }
        const char *plugin = PQgetvalue(res, 0, 0), *db = PQgetvalue(res, 0, 1),
                   *cur = PQgetvalue(res, 0, 2);
        if (strcmp(PQgetvalue(res, 0, 7), "logical") != 0 || strcmp(plugin, "pgoutput") != 0 ||
            strcmp(db, cur) != 0) {
                add(x, "postgres.slot", RELAY_CHECK_FAIL, "set slot.name to a slot of its own",
                    "replication slot \"%s\" exists but is not a pgoutput slot of database \"%s\" "
                    "(type %s, plugin \"%s\", database \"%s\")",
                    slot, cur, PQgetvalue(res, 0, 7), plugin, db);
                PQclear(res);
                return;
        }
        const char *wal_status = PQgetvalue(res, 0, 4);
        const char *safe = PQgetisnull(res, 0, 5) ? NULL : PQgetvalue(res, 0, 5);
        char safe_text[64];
        if (safe)
                snprintf(safe_text, sizeof(safe_text), "%s bytes", safe);
        else
                snprintf(safe_text, sizeof(safe_text), "unlimited");
        if (!PQgetisnull(res, 0, 3))
                add(x, "postgres.slot", RELAY_CHECK_WARNING,
                    "if that is not a relay of yours, find it in pg_stat_replication; a second "
                    "relay on this slot stands by until it is released",
                    "replication slot \"%s\" is in use (walsender pid %s: another relay?), "
                    "confirmed up to %s",
                    slot, PQgetvalue(res, 0, 3), PQgetvalue(res, 0, 6));
        else
                add(x, "postgres.slot", RELAY_CHECK_OK, NULL,
                    "replication slot \"%s\" exists (pgoutput), not in use, confirmed up to %s",
                    slot, PQgetvalue(res, 0, 6));
        if (strcmp(wal_status, "reserved") == 0)
                add(x, "postgres.slot.wal", RELAY_CHECK_OK, NULL,
                    "wal_status is \"reserved\"; safe_wal_size %s", safe_text);
        else if (strcmp(wal_status, "lost") == 0)
                add(x, "postgres.slot.wal", RELAY_CHECK_FAIL,
                    "check the outbox for events written since the last one in Kafka, then drop "
                    "the slot or set slot.recreate = true",
                    "replication slot \"%s\" is invalidated (wal_status = lost): the WAL it needed "
                    "was removed, so events may be missing",
                    slot);
        else
                add(x, "postgres.slot.wal", RELAY_CHECK_WARNING,
                    "start the relay (or let it catch up) before the slot is invalidated; raise "
                    "max_slot_wal_keep_size if needed",
                    "wal_status is \"%s\": the slot holds more WAL than max_wal_size; safe_wal_size "
                    "%s before it is invalidated",
                    wal_status, safe_text);
        /* repl.c, two_phase_off(): the relay turns it off on 18, refuses it before. */
        if (is_true(res, 0, 13)) {
                if (PQserverVersion(x->conn) >= 180000)
                        add(x, "postgres.slot.two_phase", RELAY_CHECK_OK, NULL,
                            "replication slot \"%s\" was created with two_phase; the relay "
                            "turns it off at its start, so that prepared transactions arrive at "
                            "COMMIT PREPARED",
                            slot);
                else
                        add(x, "postgres.slot.two_phase", RELAY_CHECK_FAIL,
                            "set slot.name to a slot without two_phase (the relay creates it "
                            "when it does not exist, then reads what is written from then on)",
                            "replication slot \"%s\" was created with two_phase, so the server "
                            "would send a prepared transaction at PREPARE TRANSACTION, which the "
                            "relay does not read",
                            slot);
        }
        bool failover = is_true(res, 0, 11), synced = is_true(res, 0, 12);
        PQclear(res);
        pg_slot_failover(x, true, failover, synced);
}

/* The topics a ${column} template names today: distinct values in the table. */
static void pg_topics(ctx_t *x)
{
        const relay_topic_template_t *tpl = &x->set->topic_template;
        size_t ncols = 0;
        for (size_t i = 0; i < tpl->nparts; i++)
                ncols += tpl->parts[i].is_column;
        x->topics = calloc(MAX_TOPICS, sizeof(*x->topics));
        if (!x->topics) {
                x->res->oom = true;
                return;
        }
        if (ncols == 0) {
                size_t n = 0;
                for (size_t i = 0; i < tpl->nparts; i++)
                        n += tpl->parts[i].len;
                char *t = malloc(n + 1);
                if (!t) {
                        x->res->oom = true;
                        return;
                }
                n = 0;
                for (size_t i = 0; i < tpl->nparts; i++) {
                        memcpy(t + n, tpl->parts[i].text, tpl->parts[i].len);
                        n += tpl->parts[i].len;
                }
                t[n] = '\0';
                x->topics[x->ntopics++] = t;
                return;
        }
        if (x->set->outbox_source == RELAY_SOURCE_MESSAGES) {
                snprintf(x->topics_note, sizeof(x->topics_note),
                         "topic.template names topics by the messages' fields, which cannot be "
                         "listed before the messages are written");
                return;
        }
        if (!x->conn || PQstatus(x->conn) != CONNECTION_OK || !x->table_exists) {
                snprintf(x->topics_note, sizeof(x->topics_note),
                         "topic.template names topics by column values, and the outbox table "
                         "could not be read");
                return;
        }
        PGresult *res = q_table(x, NULL, sql_table_readable);
        if (!res || PQntuples(res) != 1) {
                PQclear(res);
                snprintf(x->topics_note, sizeof(x->topics_note),
                         "topic.template names topics by column values; could not look at the "
                         "outbox table");
                return;
        }
        bool may = is_true(res, 0, 0);
        long long size = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
        PQclear(res);
        if (!may) {
                snprintf(x->topics_note, sizeof(x->topics_note),
                         "topic.template names topics by column values, and role \"%s\" may not "
                         "read the outbox table to list them (the relay needs no SELECT)",
                         PQuser(x->conn));
                return;
        }
        if (size > CHEAP_TABLE_BYTES) {
                snprintf(x->topics_note, sizeof(x->topics_note),
                         "topic.template names topics by column values, and the outbox table "
                         "(%lld MB) is too large to read for them",
                         size / (1024 * 1024));
                return;
        }
        char sql[2048];
        size_t l = (size_t)snprintf(sql, sizeof(sql), "SELECT DISTINCT ");
        bool first = true;
        for (size_t i = 0; i < tpl->nparts; i++) {
                if (!tpl->parts[i].is_column)
                        continue;
                char *qc = PQescapeIdentifier(x->conn, tpl->parts[i].text, tpl->parts[i].len);
                if (!qc) {
                        x->res->oom = true;
                        return;
                }
                l += (size_t)snprintf(sql + l, sizeof(sql) - l, "%s%s::text", first ? "" : ", ", qc);
                PQfreemem(qc);
                first = false;
        }
        char *qs = PQescapeIdentifier(x->conn, x->tbl->schema, strlen(x->tbl->schema));
        char *qt = PQescapeIdentifier(x->conn, x->tbl->name, strlen(x->tbl->name));
        if (qs && qt)
                snprintf(sql + l, sizeof(sql) - l, " FROM %s.%s LIMIT %d", qs, qt, MAX_TOPICS + 1);
        PQfreemem(qs);
        PQfreemem(qt);
        if (!qs || !qt) {
                x->res->oom = true;
                return;
        }
        res = PQexec(x->conn, sql);
        if (PQresultStatus(res) != PGRES_TUPLES_OK) {
                char buf[256];
                snprintf(x->topics_note, sizeof(x->topics_note),
                         "topic.template names topics by column values, and reading them failed: %s",
                         one_line(PQresultErrorMessage(res), buf, sizeof(buf)));
                PQclear(res);
                return;
        }
        int rows = PQntuples(res);
        if (rows == 0)
                snprintf(x->topics_note, sizeof(x->topics_note),
                         "topic.template names topics by column values, and the outbox table has "
                         "no rows to take them from");
        else if (rows > MAX_TOPICS)
                snprintf(x->topics_note, sizeof(x->topics_note),
                         "the outbox table names more than %d topics; the first %d are checked",
                         MAX_TOPICS, MAX_TOPICS);
        /* route.topic.regex: the template names the routing value, which the
         * regex and replacement turn into the topic, as the mapping does. */
        relay_route_t *route = NULL;
        char why[RELAY_ERRBUF];
        if (x->set->route_regex &&
            relay_route_new(&route, x->set->route_regex, x->set->route_replacement, why,
                            sizeof(why)) != 0) {
                x->res->oom = true; /* settings compiled it already: only memory can fail */
                PQclear(res);
                return;
        }
        for (int r = 0; r < rows && r < MAX_TOPICS; r++) {
                char topic[RELAY_TOPIC_MAX + 2];
                size_t n = 0;
                int c = 0;
                bool null = false;
                for (size_t i = 0; i < tpl->nparts; i++) {
                        const char *s = tpl->parts[i].text;
                        size_t len = tpl->parts[i].len;
                        if (tpl->parts[i].is_column) {
                                null |= PQgetisnull(res, r, c);
                                s = PQgetvalue(res, r, c);
                                len = strlen(s);
                                c++;
                        }
                        if (n + len > RELAY_TOPIC_MAX)
                                len = RELAY_TOPIC_MAX + 1 - n; /* too long: flagged below */
                        memcpy(topic + n, s, len);
                        n += len;
                }
                topic[n] = '\0';
                if (null)
                        continue;
                if (route) {
                        char routed[RELAY_TOPIC_MAX + 2];
                        if (relay_route_apply(route, topic, n, routed, sizeof(routed), &n) ==
                            RELAY_ENOMEM) {
                                x->res->oom = true;
                                break;
                        }
                        memcpy(topic, routed, n + 1); /* too long: cut, flagged below */
                }
                if (!relay_names_is_topic(topic, n)) {
                        add(x, "kafka.topic", RELAY_CHECK_FAIL,
                            "fix the rows' values or topic.template; such events go to the error policy",
                            "invalid Kafka topic name \"%.80s\" from topic.template and a row of "
                            "the outbox table: topic names are %s",
                            topic, RELAY_NAMES_TOPIC_RULE);
                        continue;
                }
                if (!(x->topics[x->ntopics] = strdup(topic))) {
                        x->res->oom = true;
                        break;
                }
                x->ntopics++;
        }
        relay_route_free(route);
        PQclear(res);
}

/* --- Kafka ------------------------------------------------------------------ */

static void quiet_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
        (void)rk;
        (void)level;
        (void)fac;
        (void)buf;
}

/* 1 exists (partitions in *parts), 0 does not, -1 unknown (reason in err). */
static int topic_exists(rd_kafka_t *rk, const char *topic, int timeout_ms, int *parts, char *err,
                        size_t errlen)
{
        rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
        const struct rd_kafka_metadata *md = NULL;
        int rc = -1;
        if (!rkt) {
                relay_err_set(err, errlen, "%s", rd_kafka_err2str(rd_kafka_last_error()));
                return -1;
        }
        rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, rkt, &md, timeout_ms);
        if (e) {
                relay_err_set(err, errlen, "%s", rd_kafka_err2str(e));
        } else if (md->topic_cnt < 1) {
                relay_err_set(err, errlen, "the metadata has no entry for the topic");
        } else if (md->topics[0].err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) {
                rc = 0;
        } else if (md->topics[0].err) {
                relay_err_set(err, errlen, "%s", rd_kafka_err2str(md->topics[0].err));
        } else {
                *parts = md->topics[0].partition_cnt;
                rc = 1;
        }
        if (md)
                rd_kafka_metadata_destroy(md);
        rd_kafka_topic_destroy(rkt);
        return rc;
}

static void kafka_topic(ctx_t *x, rd_kafka_t *rk, const char *name, const char *topic,
                        const char *role, int autocreate)
{
        char err[RELAY_ERRBUF];
        int parts = 0;
        int e = topic_exists(rk, topic, x->kafka_timeout_ms, &parts, err, sizeof(err));
        if (e == 1)
                add(x, name, RELAY_CHECK_OK, NULL, "%s \"%s\" exists (%d partition%s)", role, topic,
                    parts, parts == 1 ? "" : "s");
        else if (e == 0 && autocreate == 1)
                add(x, name, RELAY_CHECK_WARNING,
                    "create it with the partitions and replication you want",
                    "%s \"%s\" does not exist; the brokers create it at the first event "
                    "(auto.create.topics.enable = true) with their defaults",
                    role, topic);
        else if (e == 0) {
                char fix[512];
                snprintf(fix, sizeof(fix),
                         "create topic \"%s\" (kafka-topics.sh --create --topic %s), or set "
                         "auto.create.topics.enable = true on the brokers",
                         topic, topic);
                add(x, name, RELAY_CHECK_FAIL, fix,
                    "%s \"%s\" does not exist%s: its events would wait in PostgreSQL", role, topic,
                    autocreate == 0 ? " and the brokers do not create topics" : "");
        } else
                add(x, name, RELAY_CHECK_WARNING, "grant Describe on the topic to the relay's principal",
                    "could not tell whether %s \"%s\" exists: %s", role, topic, err);
}

/*
 * The kafka.* settings as the relay's producer takes them, which is with
 * idempotence on (check's own client has it off, to ask for no producer id):
 * librdkafka refuses some combinations only then (acks other than all, say).
 * The client made here has no bootstrap servers, so it connects nowhere.
 * false, with a verdict, when they are refused.
 */
static bool kafka_producer_settings(ctx_t *x)
{
        char err[RELAY_ERRBUF];
        const relay_config_t *cfg = x->cfg;
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        if (!conf) {
                x->res->oom = true;
                return false;
        }
        rd_kafka_conf_set_log_cb(conf, quiet_log);
        for (size_t i = 0; i < relay_config_kafka_count(cfg); i++) {
                const char *name, *value;
                relay_config_kafka_at(cfg, i, &name, &value);
                if (strcmp(name, "bootstrap.servers") != 0)
                        rd_kafka_conf_set(conf, name, value, err, sizeof(err));
        }
        rd_kafka_t *rk = NULL;
        if (rd_kafka_conf_set(conf, "enable.idempotence", "true", err, sizeof(err)) ==
                    RD_KAFKA_CONF_OK &&
            (rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err))) != NULL) {
                rd_kafka_destroy(rk);
                return true;
        }
        rd_kafka_conf_destroy(conf);
        add(x, "kafka.settings", RELAY_CHECK_FAIL,
            "fix or remove the kafka.* setting it names",
            "the relay's producer (idempotent) would refuse the kafka.* settings: %s", err);
        return false;
}

static void kafka_checks(ctx_t *x)
{
        char err[RELAY_ERRBUF];
        const relay_config_t *cfg = x->cfg;
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        rd_kafka_t *rk = NULL;
        const struct rd_kafka_metadata *md = NULL;

        if (!conf) {
                x->res->oom = true;
                return;
        }
        for (size_t i = 0; i < relay_config_kafka_count(cfg); i++) {
                const char *name, *value;
                relay_config_kafka_at(cfg, i, &name, &value);
                if (rd_kafka_conf_set(conf, name, value, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
                        add(x, "kafka.connection", RELAY_CHECK_FAIL, "fix or remove the setting",
                            "invalid Kafka setting \"kafka.%s\": %s", name, err);
                        rd_kafka_conf_destroy(conf);
                        return;
                }
        }
        if (!kafka_producer_settings(x)) {
                rd_kafka_conf_destroy(conf);
                return;
        }
        /* A read-only client: no topic created by our metadata requests, no
         * producer id; its log would only repeat what the verdicts say. */
        rd_kafka_conf_set(conf, "allow.auto.create.topics", "false", err, sizeof(err));
        rd_kafka_conf_set(conf, "enable.idempotence", "false", err, sizeof(err));
        rd_kafka_conf_set(conf, "client.id", "outbox-relay-check", err, sizeof(err));
        rd_kafka_conf_set_log_cb(conf, quiet_log);
        if (!(rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err)))) {
                rd_kafka_conf_destroy(conf);
                add(x, "kafka.connection", RELAY_CHECK_FAIL, "fix the kafka.* settings",
                    "could not create a Kafka client: %s", err);
                return;
        }
        rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, NULL, &md, x->kafka_timeout_ms);
        if (e || md->broker_cnt < 1) {
                add(x, "kafka.connection", RELAY_CHECK_FAIL,
                    "check kafka.bootstrap.servers and that the brokers are up",
                    "could not reach Kafka at \"%s\" within %d ms: %s",
                    x->set->kafka_bootstrap_servers, x->kafka_timeout_ms,
                    e ? rd_kafka_err2str(e) : "the cluster reported no brokers");
                if (md)
                        rd_kafka_metadata_destroy(md);
                rd_kafka_destroy(rk);
                return;
        }
        int32_t broker = md->brokers[0].id;
        add(x, "kafka.connection", RELAY_CHECK_OK, NULL, "Kafka at \"%s\" answered: %d broker%s",
            x->set->kafka_bootstrap_servers, md->broker_cnt, md->broker_cnt == 1 ? "" : "s");
        rd_kafka_metadata_destroy(md);

        int autocreate = -1;
        char id[16], *v = NULL;
        snprintf(id, sizeof(id), "%d", (int)broker);
        rd_kafka_resp_err_t ce = relay_kadmin_config(rk, RD_KAFKA_RESOURCE_BROKER, id,
                                                     "auto.create.topics.enable",
                                                     x->kafka_timeout_ms, &v, err, sizeof(err));
        if (ce == RD_KAFKA_RESP_ERR_NO_ERROR) {
                autocreate = strcmp(v, "true") == 0;
                add(x, "kafka.auto_create_topics", RELAY_CHECK_OK, NULL,
                    autocreate ? "auto.create.topics.enable is true on broker %d: a missing topic "
                                 "is created at its first event"
                               : "auto.create.topics.enable is false on broker %d: every topic "
                                 "must exist before its first event",
                    (int)broker);
                free(v);
        } else if (relay_kadmin_timed_out(ce)) {
                /* No answer is not a refusal: granting would not help. */
                add(x, "kafka.auto_create_topics", RELAY_CHECK_WARNING,
                    "check that the broker is up and reachable from here",
                    "could not read auto.create.topics.enable from broker %d: no answer within "
                    "%d ms (%s)",
                    (int)broker, x->kafka_timeout_ms, err);
        } else if (ce == RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED ||
                   ce == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED) {
                add(x, "kafka.auto_create_topics", RELAY_CHECK_WARNING,
                    "grant DescribeConfigs on the cluster to see it",
                    "could not read auto.create.topics.enable from broker %d: %s", (int)broker, err);
        } else {
                add(x, "kafka.auto_create_topics", RELAY_CHECK_WARNING,
                    "look up auto.create.topics.enable in the brokers' configuration",
                    "could not read auto.create.topics.enable from broker %d: %s", (int)broker, err);
        }

        for (size_t i = 0; i < x->ntopics; i++)
                kafka_topic(x, rk, "kafka.topic", x->topics[i], "topic", autocreate);
        if (x->topics_note[0]) {
                if (autocreate == 1 || x->ntopics > 0)
                        add(x, "kafka.topics", RELAY_CHECK_OK, NULL, "%s%s", x->topics_note,
                            autocreate == 1 ? "; the brokers create missing topics" : "");
                else
                        add(x, "kafka.topics", RELAY_CHECK_WARNING,
                            "make sure a topic exists for every value the template can take, or "
                            "set auto.create.topics.enable = true on the brokers",
                            "%s", x->topics_note);
        }

        if (x->set->errors_policy == RELAY_ERRORS_DLQ)
                kafka_topic(x, rk, "kafka.dlq_topic", x->set->errors_dlq_topic,
                            "dead-letter topic", autocreate);
        else
                add(x, "kafka.dlq_topic", RELAY_CHECK_OK, NULL,
                    "no dead-letter topic is used (errors.policy = stop)");
        rd_kafka_destroy(rk);
}

/* --- the list ------------------------------------------------------------------ */

int relay_check_run(relay_check_t **out, const relay_config_t *cfg, const relay_settings_t *set,
                    int kafka_timeout_ms, char *err, size_t errlen)
{
        ctx_t x = {.cfg = cfg, .set = set, .kafka_timeout_ms = kafka_timeout_ms,
                   .tbl = &set->outbox_table};
        if (!(x.res = calloc(1, sizeof(*x.res))))
                return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
        if (pg_connect(&x)) {
                pg_server(&x);
                pg_role(&x);
                /* Each outbox table, then the publication over all of them;
                 * the topics come from the first table's rows. */
                bool all = true, first = false;
                unsigned first_oid = 0;
                for (size_t i = 0; set->outbox_source != RELAY_SOURCE_MESSAGES &&
                                   i < set->n_outbox_tables;
                     i++) {
                        x.tbl = &set->outbox_tables[i];
                        x.table_exists = false;
                        pg_table(&x);
                        if (set->snapshot_initial)
                                pg_snapshot(&x);
                        all &= x.table_exists;
                        if (i == 0) {
                                first = x.table_exists;
                                first_oid = x.table_oid;
                        }
                }
                if (set->outbox_source != RELAY_SOURCE_TABLE)
                        pg_messages(&x);
                x.table_exists = all;
                pg_publication(&x);
                x.tbl = &set->outbox_tables[0];
                x.table_exists = first;
                x.table_oid = first_oid;
                pg_slot(&x);
        }
        pg_topics(&x);
        if (x.conn)
                PQfinish(x.conn);
        kafka_checks(&x);
        for (size_t i = 0; i < x.ntopics; i++)
                free(x.topics[i]);
        free(x.topics);
        relay_pairs_free(&x.quoted);
        if (x.res->oom) {
                relay_check_free(x.res);
                return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
        }
        *out = x.res;
        return 0;
}

void relay_check_free(relay_check_t *c)
{
        if (!c)
                return;
        for (size_t i = 0; i < c->n; i++) {
                free(c->items[i].name);
                free(c->items[i].message);
                free(c->items[i].fix);
        }
        free(c->items);
        free(c);
}

size_t relay_check_count(const relay_check_t *c)
{
        return c->n;
}

void relay_check_at(const relay_check_t *c, size_t i, relay_check_item_t *out)
{
        const item_t *it = &c->items[i];
        *out = (relay_check_item_t){it->name, it->status, it->message, it->fix};
}

bool relay_check_failed(const relay_check_t *c)
{
        for (size_t i = 0; i < c->n; i++)
                if (c->items[i].status == RELAY_CHECK_FAIL)
                        return true;
        return false;
}

const char *relay_check_status_name(relay_check_status_t s)
{
        static const char *const names[] = {RELAY_CHECK_STATUSES(RELAY_NAME_ENTRY)};
        return RELAY_NAME_OF(names, s, "?");
}

int relay_check_print(const relay_check_t *c, FILE *out, bool json)
{
        if (!json) {
                for (size_t i = 0; i < c->n; i++) {
                        const item_t *it = &c->items[i];
                        fprintf(out, "%-8s %-32s %s%s%s\n", relay_check_status_name(it->status),
                                it->name, it->message, it->fix[0] ? "; " : "", it->fix);
                }
                return ferror(out) ? -1 : 0;
        }
        json_t *doc = json_object(), *arr = json_array();
        int rc = -1;
        if (!doc || !arr)
                goto done;
        for (size_t i = 0; i < c->n; i++) {
                const item_t *it = &c->items[i];
                /* json_pack's "s" copies; the object holds the only reference. */
                json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "name", it->name, "status",
                                      relay_check_status_name(it->status), "message", it->message,
                                      "fix", it->fix);
                if (!o || json_array_append_new(arr, o) != 0)
                        goto done;
        }
        /* _new: the document takes the array's reference. */
        if (json_object_set_new(doc, "checks", arr) != 0) {
                arr = NULL;
                goto done;
        }
        arr = NULL;
        if (json_object_set_new(doc, "failed", json_boolean(relay_check_failed(c))) != 0)
                goto done;
        if (json_dumpf(doc, out, JSON_INDENT(2)) == 0 && fputc('\n', out) != EOF)
                rc = 0;
done:
        json_decref(arr);
        json_decref(doc);
        return rc;
}
