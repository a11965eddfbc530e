/*
 * status.c - `outbox-relay status`: owns one ordinary libpq connection for
 * one query over pg_replication_slots and pg_stat_replication, and the
 * status it fills. Read-only.
 *
 * Lag in time: the relay's slot does not record when the transactions it
 * has not confirmed were committed, and reading them would mean decoding
 * the slot. What the server does measure is pg_stat_replication.flush_lag:
 * the time between WAL being flushed locally and the relay confirming it,
 * sampled by the walsender while the relay streams (NULL once it has been
 * idle a while, and when nobody streams). That figure is reported as is,
 * with the age of the relay's last status message; lag in bytes is exact,
 * and when it is 0 the lag in time is 0 too (nothing is unconfirmed).
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/status.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <libpq-fe.h>

#include "relay/log.h"
#include "relay/lsn.h"

void relay_status_free(relay_status_t *s)
{
        if (!s)
                return;
        RELAY_FREE_ALL(s->slot_name, s->plugin, s->database, s->wal_status, s->client_addr,
                       s->application_name, s->state, s);
}

static char *dup_value(const PGresult *res, int col, bool *oom)
{
        char *v = strdup(PQgetisnull(res, 0, col) ? "" : PQgetvalue(res, 0, col));
        if (!v)
                *oom = true;
        return v;
}

static relay_lsn_t lsn_value(const PGresult *res, int col)
{
        relay_lsn_t l = 0;
        if (!PQgetisnull(res, 0, col) && relay_lsn_parse(PQgetvalue(res, 0, col), &l) != 0)
                l = 0;
        return l;
}

int relay_status_read(relay_status_t **out, const relay_settings_t *set, char *err, size_t errlen)
{
        const char *keys[] = {"dbname", "application_name", "client_encoding", NULL};
        const char *conninfo = set->postgres_conninfo;
        const char *vals[] = {conninfo[0] ? conninfo : NULL, "outbox-relay status", "UTF8", NULL};
        const char *params[] = {set->slot_name};
        relay_status_t *s = calloc(1, sizeof(*s));
        PGconn *conn = NULL;
        PGresult *res = NULL;
        bool oom = false;
        int rc = 0;

        if (!s)
                goto nomem;
        conn = vals[0] ? PQconnectdbParams(keys, vals, 1) : PQconnectdbParams(keys + 1, vals + 1, 0);
        if (conn)
                PQsetNoticeProcessor(conn, relay_log_server_notice, NULL);
        if (!conn)
                goto nomem;
        if (PQstatus(conn) != CONNECTION_OK) {
                const char *m = PQerrorMessage(conn);
                size_t n = strlen(m);
                while (n && (m[n - 1] == '\n' || m[n - 1] == ' '))
                        n--;
                relay_err_set(err, errlen,
                              "could not connect to PostgreSQL: %.*s; check postgres.conninfo", (int)n,
                              m);
                rc = RELAY_EIO;
                goto out;
        }
        /* One row whether or not the slot exists; the walsender found by its pid. */
        res = PQexecParams(
            conn,
            "SELECT s.slot_name IS NOT NULL, s.plugin, s.database, s.confirmed_flush_lsn, "
            "s.restart_lsn, w.lsn, pg_wal_lsn_diff(w.lsn, s.confirmed_flush_lsn)::bigint, "
            "pg_wal_lsn_diff(w.lsn, s.restart_lsn)::bigint, s.wal_status, s.safe_wal_size, "
            "s.active, s.active_pid, host(r.client_addr), r.client_port, r.application_name, "
            "r.state, extract(epoch FROM r.flush_lag), extract(epoch FROM now() - r.reply_time), "
            "w.rec "
            "FROM (SELECT rec, CASE WHEN rec THEN pg_last_wal_replay_lsn() "
            "ELSE pg_current_wal_lsn() END AS lsn FROM (SELECT pg_is_in_recovery() AS rec) q) w "
            "LEFT JOIN pg_catalog.pg_replication_slots s ON s.slot_name = $1 "
            "LEFT JOIN pg_catalog.pg_stat_replication r ON r.pid = s.active_pid",
            1, NULL, params, NULL, NULL, 0);
        if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
                const char *m = PQresultErrorMessage(res);
                size_t n = strlen(m);
                while (n && (m[n - 1] == '\n' || m[n - 1] == ' '))
                        n--;
                relay_err_set(err, errlen, "could not read the status of replication slot \"%s\": %.*s",
                              set->slot_name, (int)n, m);
                rc = RELAY_EIO;
                goto out;
        }
        s->slot_name = strdup(set->slot_name);
        oom |= !s->slot_name;
        s->exists = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
        s->plugin = dup_value(res, 1, &oom);
        s->database = dup_value(res, 2, &oom);
        s->confirmed_flush_lsn = lsn_value(res, 3);
        s->restart_lsn = lsn_value(res, 4);
        s->restart_lsn_known = !PQgetisnull(res, 0, 4);
        s->server_lsn = lsn_value(res, 5);
        s->in_recovery = strcmp(PQgetvalue(res, 0, 18), "t") == 0;
        s->lag_bytes = PQgetisnull(res, 0, 6) ? 0 : strtoll(PQgetvalue(res, 0, 6), NULL, 10);
        s->retained_bytes = PQgetisnull(res, 0, 7) ? 0 : strtoll(PQgetvalue(res, 0, 7), NULL, 10);
        s->wal_status = dup_value(res, 8, &oom);
        s->safe_wal_size_known = !PQgetisnull(res, 0, 9);
        s->safe_wal_size = s->safe_wal_size_known ? strtoll(PQgetvalue(res, 0, 9), NULL, 10) : 0;
        s->active = !PQgetisnull(res, 0, 10) && strcmp(PQgetvalue(res, 0, 10), "t") == 0;
        s->active_pid = PQgetisnull(res, 0, 11) ? 0 : atoi(PQgetvalue(res, 0, 11));
        s->client_addr = dup_value(res, 12, &oom);
        /* -1 for a Unix socket: unknown, as a NULL is. */
        s->client_port = PQgetisnull(res, 0, 13) ? 0 : atoi(PQgetvalue(res, 0, 13));
        if (s->client_port < 0)
                s->client_port = 0;
        s->application_name = dup_value(res, 14, &oom);
        s->state = dup_value(res, 15, &oom);
        s->flush_lag_known = !PQgetisnull(res, 0, 16);
        s->flush_lag_s = s->flush_lag_known ? strtod(PQgetvalue(res, 0, 16), NULL) : 0;
        s->reply_age_known = !PQgetisnull(res, 0, 17);
        s->reply_age_s = s->reply_age_known ? strtod(PQgetvalue(res, 0, 17), NULL) : 0;
        if (oom)
                goto nomem;
        *out = s;
        s = NULL;
        goto out;
nomem:
        relay_err_set(err, errlen, "out of memory");
        rc = RELAY_ENOMEM;
out:
        PQclear(res);
        if (conn)
                PQfinish(conn);
        relay_status_free(s);
        return rc;
}

static const char *wal_end_source(const relay_status_t *s)
{
        return s->in_recovery ? "pg_last_wal_replay_lsn, a standby" : "pg_current_wal_lsn";
}

static void print_text(const relay_status_t *s, FILE *out)
{
        char a[RELAY_LSN_BUFSZ], b[RELAY_LSN_BUFSZ];

        if (!s->exists) {
                fprintf(out, "replication slot \"%s\" does not exist\n", s->slot_name);
                fprintf(out, "  %-20s %s (%s)\n", "server WAL end",
                        relay_lsn_format(s->server_lsn, a), wal_end_source(s));
                return;
        }
        fprintf(out, "replication slot \"%s\" (plugin %s, database \"%s\")\n", s->slot_name,
                s->plugin, s->database);
        fprintf(out, "  %-20s %s\n", "confirmed_flush_lsn", relay_lsn_format(s->confirmed_flush_lsn, a));
        if (s->restart_lsn_known)
                fprintf(out, "  %-20s %s\n", "restart_lsn", relay_lsn_format(s->restart_lsn, a));
        else
                fprintf(out, "  %-20s none (the slot keeps no WAL)\n", "restart_lsn");
        fprintf(out, "  %-20s %s (%s)\n", "server WAL end", relay_lsn_format(s->server_lsn, b),
                wal_end_source(s));
        fprintf(out, "  %-20s %lld bytes (server WAL end - confirmed_flush_lsn)\n", "lag",
                (long long)s->lag_bytes);
        if (s->lag_bytes <= 0)
                fprintf(out, "  %-20s 0 s (nothing unconfirmed)\n", "lag in time");
        else if (s->flush_lag_known)
                fprintf(out, "  %-20s %.3f s (pg_stat_replication.flush_lag)\n", "lag in time",
                        s->flush_lag_s);
        else
                fprintf(out, "  %-20s unknown (the server measures it only while a relay "
                             "streams and WAL moves)\n",
                        "lag in time");
        if (s->restart_lsn_known)
                fprintf(out, "  %-20s %lld bytes since restart_lsn\n", "WAL retained",
                        (long long)s->retained_bytes);
        /* safe_wal_size is NULL for a lost slot too, not only without a limit. */
        if (strcmp(s->wal_status, "lost") == 0)
                fprintf(out, "  %-20s lost: the WAL the slot needed was removed, events may be "
                             "missing; the relay stops with exit 5 (see slot.recreate)\n",
                        "wal_status");
        else if (s->safe_wal_size_known)
                fprintf(out, "  %-20s %s, safe_wal_size %lld bytes\n", "wal_status", s->wal_status,
                        (long long)s->safe_wal_size);
        else
                fprintf(out, "  %-20s %s, safe_wal_size unlimited (max_slot_wal_keep_size = -1)\n",
                        "wal_status", s->wal_status);
        if (!s->active) {
                fprintf(out, "  %-20s no (no relay streams from this slot)\n", "active");
                return;
        }
        fprintf(out, "  %-20s walsender pid %d", "active", s->active_pid);
        if (s->client_addr[0])
                fprintf(out, ", client %s:%d", s->client_addr, s->client_port);
        else if (s->state[0])
                fprintf(out, ", client on a Unix socket");
        if (s->application_name[0])
                fprintf(out, ", application \"%s\"", s->application_name);
        if (s->state[0])
                fprintf(out, ", state %s", s->state);
        if (s->reply_age_known)
                fprintf(out, ", last status %.1f s ago", s->reply_age_s);
        fputc('\n', out);
}

/* Builds the JSON object; NULL when out of memory. */
static json_t *to_json(const relay_status_t *s)
{
        char a[RELAY_LSN_BUFSZ], b[RELAY_LSN_BUFSZ], c[RELAY_LSN_BUFSZ];
        json_t *o;

        if (!s->exists)
                return json_pack("{s:s, s:b, s:s, s:b}", "slot_name", s->slot_name, "exists", 0,
                                 "server_lsn", relay_lsn_format(s->server_lsn, a),
                                 "server_in_recovery", s->in_recovery);
        /* "o" steals the reference of the value built for it. */
        o = json_pack("{s:s, s:b, s:s, s:s, s:s, s:o, s:s, s:I, s:o, s:s, s:o, s:b, s:o, s:o, "
                      "s:o, s:o, s:o, s:o, s:o, s:o, s:b}",
                      "slot_name", s->slot_name, "exists", 1, "plugin", s->plugin, "database",
                      s->database, "confirmed_flush_lsn", relay_lsn_format(s->confirmed_flush_lsn, a),
                      "restart_lsn",
                      s->restart_lsn_known ? json_string(relay_lsn_format(s->restart_lsn, b))
                                           : json_null(),
                      "server_lsn", relay_lsn_format(s->server_lsn, c), "lag_bytes",
                      (json_int_t)s->lag_bytes, "retained_bytes",
                      s->restart_lsn_known ? json_integer(s->retained_bytes) : json_null(),
                      "wal_status", s->wal_status,
                      "safe_wal_size",
                      s->safe_wal_size_known ? json_integer(s->safe_wal_size) : json_null(),
                      "active", s->active, "active_pid",
                      s->active ? json_integer(s->active_pid) : json_null(), "client_addr",
                      s->client_addr[0] ? json_string(s->client_addr) : json_null(), "client_port",
                      s->client_port ? json_integer(s->client_port) : json_null(),
                      "application_name",
                      s->application_name[0] ? json_string(s->application_name) : json_null(),
                      "state", s->state[0] ? json_string(s->state) : json_null(), "lag_seconds",
                      s->lag_bytes <= 0  ? json_real(0)
                      : s->flush_lag_known ? json_real(s->flush_lag_s)
                                           : json_null(),
                      "flush_lag_seconds",
                      s->flush_lag_known ? json_real(s->flush_lag_s) : json_null(),
                      "last_status_age_seconds",
                      s->reply_age_known ? json_real(s->reply_age_s) : json_null(),
                      "server_in_recovery", s->in_recovery);
        return o;
}

int relay_status_print(const relay_status_t *s, FILE *out, bool json)
{
        if (!json) {
                print_text(s, out);
                return ferror(out) ? -1 : 0;
        }
        json_t *o = to_json(s);
        int rc = o && json_dumpf(o, out, JSON_INDENT(2) | JSON_REAL_PRECISION(6)) == 0 && fputc('\n', out) != EOF ? 0 : -1;
        json_decref(o);
        return rc;
}
