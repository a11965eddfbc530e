/*
 * pgconn.c - a PostgreSQL connection whose refusal is told apart by its
 * SQLSTATE, not by the server's words (see pgconn.h). No logging.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/pgconn.h"

#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

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

/* The value of keyword in conn's options (the conninfo's, a PG* variable's
 * or libpq's default: what it connects with) into buf, "" when none. */
static void conninfo_value(PGconn *conn, const char *keyword, char *buf, size_t len)
{
        PQconninfoOption *opts = PQconninfo(conn);
        buf[0] = '\0';
        for (PQconninfoOption *o = opts; o && o->keyword; o++)
                if (strcmp(o->keyword, keyword) == 0 && o->val)
                        snprintf(buf, len, "%s", o->val);
        PQconninfoFree(opts);
}

/* libpq's connect_timeout in ms (0: none; at least 2 s, as libpq reads it). */
static int connect_timeout_ms(PGconn *conn)
{
        char v[32];
        conninfo_value(conn, "connect_timeout", v, sizeof(v));
        int t = atoi(v);
        return t <= 0 ? 0 : t < 2 ? 2000 : t > INT_MAX / 1000 ? INT_MAX : t * 1000;
}

/*
 * Whether libpq has another address to go on to after one it gave up on:
 * several hosts (host or hostaddr a list), or a host name with several
 * addresses (libpq tries each that getaddrinfo() gives). A numeric
 * address or a Unix-domain socket (a path, or no host: the default) is
 * one.
 */
static bool another_address(PGconn *conn)
{
        char host[1024], hostaddr[1024];
        conninfo_value(conn, "host", host, sizeof(host));
        conninfo_value(conn, "hostaddr", hostaddr, sizeof(hostaddr));
        if (strchr(host, ',') || strchr(hostaddr, ','))
                return true;
        if (hostaddr[0] || !host[0] || host[0] == '/' || host[0] == '@')
                return false;
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
        struct addrinfo *ai = NULL;
        if (getaddrinfo(host, NULL, &hints, &ai) != 0)
                return false;
        bool several = ai && ai->ai_next;
        freeaddrinfo(ai);
        return several;
}

/*
 * Which address conn is trying: host, port and address. libpq's own
 * connect_timeout is per address (connectDBComplete(): its host and
 * address index), so a retry of the same address without SSL or GSS
 * (sslmode=prefer) keeps the deadline, as there; a socket number does not
 * tell (a new socket may have the old one's). The one difference: a host
 * given twice in a row is one address here.
 */
#define ADDRESS_KEY 1200

static void address_key(PGconn *conn, char *key, size_t len)
{
        const char *h = PQhost(conn), *p = PQport(conn), *a = PQhostaddr(conn);
        snprintf(key, len, "%s\n%s\n%s", h ? h : "", p ? p : "", a ? a : "");
}

/* The longest poll() between two looks at the stop flag: a signal between
 * the look and poll() does not wake it up. */
#define STOP_SLICE_MS 200

/*
 * PQconnectdbParams() with the verbose error message connect_sqlstate()
 * reads (relay_pgconn_failure()): the verbosity is the connection's, so it
 * is set once PQconnectStartParams() made it, and this drives the
 * connection as connectDBComplete() does: PQconnectPoll() goes on to the
 * next address or host when one fails, and an address gets
 * connect_timeout. Only libpq can give up on an address for the next one,
 * so at connect_timeout:
 *   - with no other address to try (one host, one address: the usual
 *     case), the attempt ends there, unfinished: relay_pgconn_failure()
 *     says "timeout expired" as libpq would;
 *   - else PQreset() takes over (libpq's own blocking connect from the
 *     first host, still verbose, deaf to *stop): the address that timed
 *     out is tried once more before the others.
 * The stop flag is looked at between polls (at least every STOP_SLICE_MS).
 * The default verbosity again afterwards, for the messages of the session.
 */
int relay_pgconn_connect(PGconn **out, const char *const *keys, const char *const *vals,
                         int expand, const volatile sig_atomic_t *stop)
{
        PGconn *conn = PQconnectStartParams(keys, vals, expand);
        *out = conn;
        if (!conn)
                return RELAY_ENOMEM;
        if (PQstatus(conn) == CONNECTION_BAD)
                return 0;
        PQsetErrorVerbosity(conn, PQERRORS_VERBOSE);
        int timeout = connect_timeout_ms(conn);
        int64_t deadline = 0;
        char at[ADDRESS_KEY] = "", now_at[ADDRESS_KEY];
        PostgresPollingStatusType st = PGRES_POLLING_WRITING;
        while (st == PGRES_POLLING_READING || st == PGRES_POLLING_WRITING) {
                if (stop && *stop) {
                        PQfinish(conn);
                        *out = NULL;
                        return RELAY_ESTOPPED;
                }
                address_key(conn, now_at, sizeof(now_at));
                if (strcmp(now_at, at) != 0) {
                        memcpy(at, now_at, sizeof(at));
                        deadline = relay_now_ms() + timeout;
                }
                int wait = -1;
                if (timeout) {
                        int64_t left = deadline - relay_now_ms();
                        if (left <= 0) {
                                if (another_address(conn))
                                        PQreset(conn);
                                break;
                        }
                        wait = (int)left;
                }
                if (stop && (wait < 0 || wait > STOP_SLICE_MS))
                        wait = STOP_SLICE_MS;
                struct pollfd p = {.fd = PQsocket(conn),
                                   .events = st == PGRES_POLLING_READING ? POLLIN : POLLOUT};
                int n = poll(&p, 1, wait);
                if (n > 0 || (n < 0 && errno != EINTR))
                        st = PQconnectPoll(conn);
        }
        PQsetErrorVerbosity(conn, PQERRORS_DEFAULT);
        return 0;
}

relay_pgconn_failure_t relay_pgconn_failure(PGconn *conn, char *msg, size_t msglen)
{
        const char *code = connect_sqlstate(PQerrorMessage(conn), msg, msglen);
        size_t n = strlen(msg);
        /* Given up at connect_timeout (relay_pgconn_connect()): the message
         * ends with the address's "connection to server at ... failed: "
         * (libpq writes it as it starts each), libpq's pqWaitTimed() would
         * add this. */
        if (PQstatus(conn) != CONNECTION_BAD && PQstatus(conn) != CONNECTION_OK) {
                snprintf(msg + n, msglen - n, "timeout expired");
                n = strlen(msg);
        }
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
