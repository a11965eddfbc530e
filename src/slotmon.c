/*
 * slotmon.c - owns the side connection to PostgreSQL that reads the slot's
 * row of pg_replication_slots and the server's WAL end.
 *
 * Why asynchronous libpq stepped from the loop rather than a short
 * synchronous query at a low rate: a synchronous query blocks the loop for
 * a round trip every time, and for as long as the server takes when it is
 * slow or a network path hangs (connect_timeout is often unset); a stall of
 * the replication loop is exactly what a monitoring query must not cause.
 * Stepping costs a zero-timeout poll() of one socket while a query is out,
 * and nothing otherwise. Host names are still resolved synchronously by
 * PQconnectStartParams(), once per connection.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/slotmon.h"

#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <libpq-fe.h>

#include "relay/log.h"
#include "relay/lsn.h"

/* A connection attempt or a query that takes longer than this is abandoned,
 * counting only the time the loop steps it (see STEP_GAP_MS). */
#define DEADLINE_MS 10000

/* The loop steps the monitor at least this often while a session runs. A
 * longer gap between two steps is time in which nobody looked (the
 * supervisor's wait between two sessions, the next session's start): the
 * server may have answered meanwhile, so it does not count against the
 * deadline beyond this much. */
#define STEP_GAP_MS 1000

typedef enum { IDLE, CONNECTING, READY, BUSY } phase_t;

struct relay_slotmon {
        char *conninfo;
        char *slot;
        char *publication;
        char *tables; /* JSON [[schema, name], ...] of the outbox tables */
        PGconn *conn;
        phase_t phase;
        PostgresPollingStatusType polling;
        int64_t next_ms;     /* the next query (or connection attempt) */
        int64_t deadline_ms; /* of the connection attempt or query under way */
        int64_t stepped_ms;  /* the last step */
        relay_slot_info_t info;
        bool got_row;
        char query_err[RELAY_ERRBUF]; /* the query's error, reported once its results are read */
};

/* Drop the side connection, if there is one. */
static void disconnect(relay_slotmon_t *sm)
{
        if (sm->conn != NULL)
                PQfinish(sm->conn);
        sm->conn = NULL;
}

/* The outbox tables as a JSON array of [schema, name]; NULL when out of memory. */
static char *tables_json(const relay_table_name_t *tables, size_t ntables)
{
        json_t *a = json_array();
        for (size_t i = 0; a && i < ntables; i++)
                if (json_array_append_new(a, json_pack("[ss]", tables[i].schema,
                                                       tables[i].name)) != 0) {
                        json_decref(a);
                        a = NULL;
                }
        char *s = a ? json_dumps(a, JSON_COMPACT) : NULL;
        json_decref(a);
        return s;
}

relay_slotmon_t *relay_slotmon_new(const char *conninfo, const char *slot,
                                   const char *publication, const relay_table_name_t *tables,
                                   size_t ntables)
{
        relay_slotmon_t *sm = calloc(1, sizeof(*sm));
        if (sm == NULL)
                return NULL;
        sm->publication = strdup(publication ? publication : "");
        sm->tables = tables_json(tables, ntables);
        if (sm->publication == NULL || sm->tables == NULL) {
                relay_slotmon_free(sm);
                return NULL;
        }
        sm->conninfo = strdup(conninfo ? conninfo : "");
        sm->slot = strdup(slot);
        if (sm->conninfo == NULL || sm->slot == NULL) {
                relay_slotmon_free(sm);
                return NULL;
        }
        return sm;
}

void relay_slotmon_free(relay_slotmon_t *sm)
{
        if (sm == NULL)
                return;
        disconnect(sm);
        RELAY_FREE_ALL(sm->conninfo, sm->slot, sm->publication, sm->tables, sm);
}

/* Drop the connection and say why: "what: why", libpq's message when why
 * is NULL. After a timeout libpq's message is only what it began to say
 * ("connection to server at ... failed:"), or nothing: the caller says why. */
static int fail(relay_slotmon_t *sm, int64_t now_ms, const char *what, const char *why, char *err,
                size_t errlen)
{
        const char *msg = why ? why : sm->conn ? PQerrorMessage(sm->conn) : "out of memory";
        size_t n = strlen(msg);
        while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
                n--;
        relay_err_set(err, errlen, "%s: %.*s", what, (int)n, msg);
        disconnect(sm);
        sm->phase = IDLE;
        sm->next_ms = now_ms + RELAY_SLOTMON_INTERVAL_MS;
        return RELAY_EIO;
}

/* The reason of a timeout: the server did not do what within DEADLINE_MS. */
#define TIMEOUT_WHY(what) "the server did not " what " within 10 s"
_Static_assert(DEADLINE_MS == 10000, "TIMEOUT_WHY's text says 10 s");

/* Is the connection's socket ready for events, right now? */
static bool ready_for(PGconn *c, short events)
{
        struct pollfd p = {.fd = PQsocket(c), .events = events};
        return p.fd >= 0 && poll(&p, 1, 0) > 0;
}

/* The answer's one row: wal_status, safe_wal_size, active, the server's WAL end. */
static void take_row(relay_slotmon_t *sm, PGresult *res)
{
        relay_slot_info_t *si = &sm->info;
        memset(si, 0, sizeof(*si));
        si->known = true;
        if (PQntuples(res) != 1 || PQnfields(res) != 5)
                return;
        if (!PQgetisnull(res, 0, 4))
                relay_err_set(si->unpublished, sizeof(si->unpublished), "%s",
                              PQgetvalue(res, 0, 4));
        if (!PQgetisnull(res, 0, 0))
                relay_err_set(si->wal_status, sizeof(si->wal_status), "%s", PQgetvalue(res, 0, 0));
        if (!PQgetisnull(res, 0, 1)) {
                si->safe_wal_size_known = true;
                si->safe_wal_size = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
        }
        si->active = !PQgetisnull(res, 0, 2) && PQgetvalue(res, 0, 2)[0] == 't';
        relay_lsn_t end;
        if (!PQgetisnull(res, 0, 3) && relay_lsn_parse(PQgetvalue(res, 0, 3), &end) == 0)
                si->server_end = end;
        sm->got_row = true;
}

int relay_slotmon_step(relay_slotmon_t *sm, int64_t now_ms, relay_slot_info_t *out, char *err,
                       size_t errlen)
{
        /* pg_current_wal_lsn() fails during recovery (logical decoding on a
         * standby, PostgreSQL 16+): the replay position is that server's end. */
        static const char *const sql =
                "SELECT s.wal_status, s.safe_wal_size, s.active, "
                "(CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.pg_last_wal_replay_lsn() "
                "ELSE pg_catalog.pg_current_wal_lsn() END)::text, "
                /* The first outbox table whose inserts the publication
                 * does not send under its name (dropped, removed from it,
                 * renamed, publish without insert, a partitioned one
                 * without publish_via_partition_root): changed while the
                 * relay runs, and rows written to it now never reach it. */
                "(SELECT (t->>0) || '.' || (t->>1) FROM pg_catalog.jsonb_array_elements($3::"
                "pg_catalog.jsonb) AS t WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_publication "
                "p JOIN pg_catalog.pg_publication_tables pt ON pt.pubname = p.pubname WHERE "
                "p.pubname = $2 AND p.pubinsert AND pt.schemaname = t->>0 AND pt.tablename = "
                "t->>1) LIMIT 1) "
                "FROM (SELECT 1) AS one LEFT JOIN pg_catalog.pg_replication_slots AS s "
                "ON s.slot_name = $1";

        if ((sm->phase == CONNECTING || sm->phase == BUSY) &&
            now_ms - sm->stepped_ms > STEP_GAP_MS)
                sm->deadline_ms += now_ms - sm->stepped_ms - STEP_GAP_MS;
        sm->stepped_ms = now_ms;

        switch (sm->phase) {
        case IDLE: {
                if (now_ms < sm->next_ms)
                        return 0;
                const char *keys[] = {"dbname", "application_name", NULL};
                const char *vals[] = {sm->conninfo[0] ? sm->conninfo : NULL,
                                      "outbox-relay metrics", NULL};
                sm->conn = vals[0] ? PQconnectStartParams(keys, vals, 1)
                                   : PQconnectStartParams(keys + 1, vals + 1, 0);
                if (sm->conn)
                        PQsetNoticeProcessor(sm->conn, relay_log_server_notice, NULL);
                if (sm->conn == NULL || PQstatus(sm->conn) == CONNECTION_BAD)
                        return fail(sm, now_ms, "could not connect to read the slot", NULL, err,
                                    errlen);
                sm->phase = CONNECTING;
                sm->polling = PGRES_POLLING_WRITING;
                sm->deadline_ms = now_ms + DEADLINE_MS;
                return 0;
        }
        case CONNECTING:
                /* What the server did meanwhile first: an answer that came
                 * before the deadline is no timeout, however late this
                 * step looks at it. */
                if (!ready_for(sm->conn, sm->polling == PGRES_POLLING_READING ? POLLIN : POLLOUT)) {
                        if (now_ms > sm->deadline_ms)
                                return fail(sm, now_ms, "could not connect to read the slot",
                                            TIMEOUT_WHY("complete the connection"), err, errlen);
                        return 0;
                }
                sm->polling = PQconnectPoll(sm->conn);
                if (sm->polling == PGRES_POLLING_FAILED)
                        return fail(sm, now_ms, "could not connect to read the slot", NULL, err,
                                    errlen);
                if (sm->polling != PGRES_POLLING_OK)
                        return 0;
                if (PQsetnonblocking(sm->conn, 1) != 0)
                        return fail(sm, now_ms, "could not connect to read the slot", NULL, err,
                                    errlen);
                sm->phase = READY;
                sm->next_ms = now_ms;
                return 0;
        case READY: {
                if (now_ms < sm->next_ms)
                        return 0;
                const char *params[] = {sm->slot, sm->publication, sm->tables};
                if (!PQsendQueryParams(sm->conn, sql, 3, NULL, params, NULL, NULL, 0))
                        return fail(sm, now_ms, "could not read the slot", NULL, err, errlen);
                sm->phase = BUSY;
                sm->got_row = false;
                sm->query_err[0] = '\0';
                sm->deadline_ms = now_ms + DEADLINE_MS;
                /* fall through: the answer may be there already */
        }
                /* FALLTHROUGH */
        case BUSY:
                if (PQflush(sm->conn) < 0)
                        return fail(sm, now_ms, "could not read the slot", NULL, err, errlen);
                if (ready_for(sm->conn, POLLIN) && !PQconsumeInput(sm->conn))
                        return fail(sm, now_ms, "could not read the slot", NULL, err, errlen);
                while (!PQisBusy(sm->conn)) {
                        PGresult *res = PQgetResult(sm->conn);
                        if (res == NULL) {
                                sm->phase = READY;
                                sm->next_ms = now_ms + RELAY_SLOTMON_INTERVAL_MS;
                                if (sm->query_err[0]) {
                                        relay_err_set(err, errlen, "could not read the slot: %s",
                                                      sm->query_err);
                                        return RELAY_EIO;
                                }
                                if (!sm->got_row)
                                        return 0;
                                *out = sm->info;
                                return 1;
                        }
                        if (PQresultStatus(res) == PGRES_TUPLES_OK)
                                take_row(sm, res);
                        else
                                relay_err_set(sm->query_err, sizeof(sm->query_err), "%s",
                                              PQresultErrorMessage(res));
                        PQclear(res);
                }
                if (now_ms > sm->deadline_ms)
                        return fail(sm, now_ms, "could not read the slot",
                                    TIMEOUT_WHY("answer the query"), err, errlen);
                return 0;
        }
        return 0;
}
