/*
 * pgconn.c - a PostgreSQL connection whose refusal is told apart by its
 * SQLSTATE, not by the server's words (see pgconn.h). No logging.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/pgconn.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "relay/common.h"

/*
 * A failed connection's SQLSTATE. libpq keeps the server's ErrorResponse of
 * a failed connection attempt to itself (PQgetResult() gives a result of its
 * own, without the fields), and the server writes an authentication
 * failure, a missing database or role, a refused walsender in the language
 * of its lc_messages (postgresql.conf's: a startup packet's options apply
 * only after these checks, and lc_messages is for superusers to set). Only
 * the verbose message has the code. Its layout (libpq's
 * pqBuildErrorMessage3), one per host libpq tried:
 *
 *   connection to server at "h" (a), port p failed: SEVERITY:  SQLSTATE: primary\n
 *   [DETAIL:  ...\n] [HINT:  ...\n] LOCATION:  function, file:line\n
 *
 * SEVERITY is in the server's language, SQLSTATE five of [0-9A-Z]; a host
 * libpq could not reach has libpq's own message and no code. Copies msg
 * into out (outlen > 0) as the default verbosity writes it: without the
 * codes and the LOCATION lines. Returns the first code (a pointer into
 * msg, 5 characters), or NULL when no server answered with one.
 */
#define SQLSTATE_CHARS "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"

static const char *connect_sqlstate(const char *msg, char *out, size_t outlen)
{
        const char *code = NULL;
        size_t n = 0;
        bool line_start = true;

        for (const char *p = msg; *p;) {
                if (line_start && strncmp(p, "LOCATION:  ", 11) == 0) {
                        const char *nl = strchr(p, '\n');
                        p = nl ? nl + 1 : p + strlen(p);
                        continue;
                }
                if (strncmp(p, ":  ", 3) == 0 && strspn(p + 3, SQLSTATE_CHARS) >= 5 &&
                    strncmp(p + 8, ": ", 2) == 0) {
                        if (!code)
                                code = p + 3;
                        if (n + 3 < outlen) {
                                memcpy(out + n, p, 3);
                                n += 3;
                        }
                        p += 10;
                        line_start = false;
                        continue;
                }
                line_start = *p == '\n';
                if (n + 1 < outlen)
                        out[n++] = *p;
                p++;
        }
        out[n] = '\0';
        return code;
}

static bool code_is(const char *code, const char *sqlstate)
{
        return code && strncmp(code, sqlstate, 5) == 0;
}

/* libpq's connect_timeout in ms (0: none; at least 2 s, as libpq reads it). */
static int connect_timeout_ms(PGconn *conn)
{
        int t = 0;
        PQconninfoOption *opts = PQconninfo(conn);
        for (PQconninfoOption *o = opts; o && o->keyword; o++)
                if (strcmp(o->keyword, "connect_timeout") == 0 && o->val)
                        t = atoi(o->val);
        PQconninfoFree(opts);
        return t <= 0 ? 0 : t < 2 ? 2000 : t > INT_MAX / 1000 ? INT_MAX : t * 1000;
}

/*
 * PQconnectdbParams() with the verbose error message connect_sqlstate()
 * reads (relay_pgconn_failure()): the verbosity is the connection's, so it is set once
 * PQconnectStartParams() made it, and this drives the connection as
 * PQconnectdbParams() does (PQconnectPoll() moves on to the next address or
 * host when one fails). Except at connect_timeout: only libpq can give up
 * on one address for the next, so there PQreset() takes over (libpq's own
 * blocking connect, from the first host, still verbose): a host that does
 * not answer costs twice connect_timeout. The default
 * verbosity again afterwards, for the messages of the session. NULL when
 * out of memory.
 */
PGconn *relay_pgconn_connect(const char *const *keys, const char *const *vals, int expand)
{
        PGconn *conn = PQconnectStartParams(keys, vals, expand);
        if (!conn || PQstatus(conn) == CONNECTION_BAD)
                return conn;
        PQsetErrorVerbosity(conn, PQERRORS_VERBOSE);
        int timeout = connect_timeout_ms(conn), sock = -1;
        int64_t deadline = 0;
        PostgresPollingStatusType st = PGRES_POLLING_WRITING;
        while (st == PGRES_POLLING_READING || st == PGRES_POLLING_WRITING) {
                /* As libpq: each address (a new socket) gets the timeout; a
                 * new socket of the old number keeps the old deadline, and at
                 * worst the PQreset() below tries that host again. */
                if (PQsocket(conn) != sock) {
                        sock = PQsocket(conn);
                        deadline = relay_now_ms() + timeout;
                }
                int64_t left = deadline - relay_now_ms();
                struct pollfd p = {.fd = sock,
                                   .events = st == PGRES_POLLING_READING ? POLLIN : POLLOUT};
                int n = poll(&p, 1, timeout == 0 ? -1 : left > 0 ? (int)left : 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n == 0) {
                        PQreset(conn);
                        break;
                }
                st = PQconnectPoll(conn);
        }
        PQsetErrorVerbosity(conn, PQERRORS_DEFAULT);
        return conn;
}

relay_pgconn_failure_t relay_pgconn_failure(PGconn *conn, char *msg, size_t msglen)
{
        const char *code = connect_sqlstate(PQerrorMessage(conn), msg, msglen);
        size_t n = strlen(msg);
        while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
                msg[--n] = '\0';
        if (code_is(code, "42501"))
                return RELAY_PGCONN_PRIVILEGE;
        if (code_is(code, "28P01") || PQconnectionNeedsPassword(conn) ||
            strstr(msg, "password is required") || strstr(msg, "no password supplied"))
                return RELAY_PGCONN_PASSWORD;
        /* Not transient: the next try meets the same certificate. */
        if (strstr(msg, "certificate verify failed") || strstr(msg, "does not match host name") ||
            strstr(msg, "root certificate file") || strstr(msg, "certificate file") ||
            strstr(msg, "server does not support SSL"))
                return RELAY_PGCONN_TLS;
        /* invalid_authorization_specification (no pg_hba.conf entry, an
         * unknown role, a role without LOGIN, peer or certificate
         * authentication failed), invalid_catalog_name (no such database):
         * the next try meets the same. */
        if (code_is(code, "28000") || code_is(code, "3D000"))
                return RELAY_PGCONN_REFUSED;
        /* No code (libpq's own: refused, timeout, DNS) or another one
         * (57P03 starting up, 53300 too many connections). */
        return RELAY_PGCONN_AWAY;
}

const char *relay_pgconn_fix(relay_pgconn_failure_t f)
{
        switch (f) {
        case RELAY_PGCONN_PASSWORD:
                return "check the role's password (a passfile, PGPASSWORD, or password= in "
                       "postgres.conninfo)";
        case RELAY_PGCONN_TLS:
                return "check sslmode and sslrootcert in postgres.conninfo (the CA that signed "
                       "the server's certificate) and that the certificate names the host "
                       "connected to";
        default:
                return NULL;
        }
}
