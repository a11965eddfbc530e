/*
 * pgconn.c - a PostgreSQL connection whose refusal is told apart by its
 * SQLSTATE, not by the server's words (see pgconn.h). No logging.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/pgconn.h"

#include <errno.h>
#include <libpq-events.h>
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

/* Splits s in place at its commas into v (at most max); the count. An empty
 * s is no entry (libpq's lists: "a,,b" has an empty second one). */
static int split_list(char *s, char **v, int max)
{
        int n = 0;
        if (!s[0])
                return 0;
        for (char *p = s; n < max; p++) {
                v[n++] = p;
                if (!(p = strchr(p, ',')))
                        break;
                *p = '\0';
        }
        return n;
}

/* Appends item to the comma list l (len bytes); false when it does not fit. */
static bool list_add(char *l, size_t len, bool first, const char *item)
{
        size_t n = strlen(l);
        return (size_t)snprintf(l + n, len - n, "%s%s", first ? "" : ",", item) < len - n;
}

#define MAX_HOSTS 64
#define LIST_CHARS 2048

/* The addresses libpq would go on to after the one conn is at, as the
 * host, hostaddr and port lists of a connection that starts there. */
typedef struct {
        char host[LIST_CHARS], hostaddr[LIST_CHARS], port[LIST_CHARS];
        int n;
} rest_t;

static bool rest_add(rest_t *r, const char *host, const char *hostaddr, const char *port)
{
        bool first = r->n++ == 0;
        return list_add(r->host, sizeof(r->host), first, host) &&
               list_add(r->hostaddr, sizeof(r->hostaddr), first, hostaddr) &&
               list_add(r->port, sizeof(r->port), first, port);
}

/* Whether tried ("\n" "address port" "\n" each) has addr at port. */
static bool was_tried(const char *tried, const char *addr, const char *port)
{
        char item[NI_MAXHOST + 40];
        snprintf(item, sizeof(item), "\n%s %s\n", addr, port);
        return strstr(tried, item) != NULL;
}

/* Adds conn's address (after a "\n") to tried (len bytes); one that does
 * not fit is left out (tried again, at worst). */
static void add_tried(char *tried, size_t len, PGconn *conn)
{
        size_t n = strlen(tried);
        const char *a = PQhostaddr(conn), *p = PQport(conn);
        size_t need = strlen(a ? a : "") + strlen(p ? p : "") + 3;
        if (n + need < len)
                snprintf(tried + n, len - n, "%s%s %s\n", n ? "" : "\n", a ? a : "",
                         p ? p : "");
}

/* The addresses of host name (port: NULL or "" for none) not in tried, in
 * getaddrinfo()'s order as libpq tries them (not "after the one given
 * up": a DNS server that rotates its answers may give another order than
 * libpq's call had); false when they do not fit. */
static bool rest_of_name(rest_t *r, const char *name, const char *port, const char *tried)
{
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
        struct addrinfo *ai = NULL;
        bool fits = true;
        if (getaddrinfo(name, port && port[0] ? port : NULL, &hints, &ai) != 0)
                return true; /* libpq's own call said so: nothing more of it */
        for (struct addrinfo *a = ai; a && fits; a = a->ai_next) {
                char text[NI_MAXHOST];
                if (getnameinfo(a->ai_addr, a->ai_addrlen, text, sizeof(text), NULL, 0,
                                NI_NUMERICHOST) == 0 &&
                    !was_tried(tried, text, port ? port : ""))
                        fits = rest_add(r, name, text, port ? port : "");
        }
        freeaddrinfo(ai);
        return fits;
}

/*
 * What libpq would try after the address conn gave up on at
 * connect_timeout (connectDBComplete(): try_next_addr), into *r: the
 * name's addresses not in tried (those the loop saw), then the hosts
 * after it. 1: some, 0: none (the attempt ends), -1: cannot tell,
 * PQreset() does it: the address not found once in the lists (a host
 * given twice), target_session_attrs = prefer-standby (libpq's second
 * round goes back to the first host) or load_balance_hosts (libpq's own
 * order).
 */
static int rest_of(PGconn *conn, const char *tried, rest_t *r)
{
        char host[LIST_CHARS], hostaddr[LIST_CHARS], port[LIST_CHARS], tsa[32], lb[32];
        char *hv[MAX_HOSTS] = {0}, *av[MAX_HOSTS] = {0}, *pv[MAX_HOSTS] = {0};
        conninfo_value(conn, "host", host, sizeof(host));
        conninfo_value(conn, "hostaddr", hostaddr, sizeof(hostaddr));
        conninfo_value(conn, "port", port, sizeof(port));
        conninfo_value(conn, "target_session_attrs", tsa, sizeof(tsa));
        conninfo_value(conn, "load_balance_hosts", lb, sizeof(lb));
        if (strcmp(tsa, "prefer-standby") == 0 || (lb[0] && strcmp(lb, "disable") != 0))
                return -1;
        int nh = split_list(host, hv, MAX_HOSTS), na = split_list(hostaddr, av, MAX_HOSTS);
        int np = split_list(port, pv, MAX_HOSTS), n = na ? na : nh;
        const char *ch = PQhost(conn), *ca = PQhostaddr(conn), *cp = PQport(conn);
        int at = -1;
        memset(r, 0, sizeof(*r));
        for (int j = 0; j < n; j++) {
                const char *h = j < nh ? hv[j] : "", *a = j < na ? av[j] : "";
                const char *p = np == 1 ? pv[0] : j < np ? pv[j] : "";
                if (strcmp(h[0] ? h : a, ch ? ch : "") == 0 && (!p[0] || strcmp(p, cp) == 0) &&
                    (!a[0] || strcmp(a, ca) == 0)) {
                        if (at >= 0)
                                return -1;
                        at = j;
                }
        }
        if (n == 0)
                return 0; /* no host: the default Unix-domain socket */
        if (at < 0)
                return -1;
        const char *h = at < nh ? hv[at] : "", *a = at < na ? av[at] : "";
        const char *p = np == 1 ? pv[0] : at < np ? pv[at] : "";
        if (!a[0] && h[0] && h[0] != '/' && h[0] != '@' &&
            !rest_of_name(r, h, p[0] ? p : cp, tried))
                return -1;
        for (int j = at + 1; j < n; j++)
                if (!rest_add(r, j < nh ? hv[j] : "", j < na ? av[j] : "",
                              np == 1 ? pv[0] : j < np ? pv[j] : ""))
                        return -1;
        /* libpq ignores an empty value: the old list would stay. */
        if ((nh && !r->host[0]) || (na && !r->hostaddr[0]) || (np && !r->port[0]))
                return r->n ? -1 : 0;
        return r->n > 0;
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

/*
 * What was said of the addresses tried before a connection started at the
 * rest of the list (its own message starts afresh): kept with it as libpq
 * event instance data, freed with it.
 */
static int said_before_event(PGEventId id, void *info, void *pass)
{
        (void)pass;
        if (id == PGEVT_CONNDESTROY)
                free(PQinstanceData(((PGEventConnDestroy *)info)->conn, said_before_event));
        return 1;
}

static const char *said_before(const PGconn *conn)
{
        const char *s = PQinstanceData(conn, said_before_event);
        return s ? s : "";
}

/* A connection to the addresses of r, with the other parameters of keys
 * and vals (later keys override, expanded dbname included), carrying what
 * was said of old and before it, and old's timeout. NULL when out of
 * memory. */
static PGconn *start_rest(const char *const *keys, const char *const *vals, int expand,
                          const rest_t *r, PGconn *old)
{
        size_t n = 0;
        while (keys[n])
                n++;
        const char **k = calloc(n + 4, sizeof(*k)), **v = calloc(n + 4, sizeof(*v));
        PGconn *conn = NULL;
        if (k && v) {
                memcpy(k, keys, n * sizeof(*k));
                memcpy(v, vals, n * sizeof(*v));
                k[n] = "host";
                v[n] = r->host;
                k[n + 1] = "hostaddr";
                v[n + 1] = r->hostaddr;
                k[n + 2] = "port";
                v[n + 2] = r->port;
                conn = PQconnectStartParams(k, v, expand);
        }
        free(k);
        free(v);
        if (!conn)
                return NULL;
        const char *prev = said_before(old), *msg = PQerrorMessage(old);
        size_t len = strlen(prev) + strlen(msg) + sizeof("timeout expired\n");
        char *said = malloc(len);
        if (!said || !PQregisterEventProc(conn, said_before_event, "relay_pgconn", NULL) ||
            !PQsetInstanceData(conn, said_before_event, said)) {
                free(said);
                PQfinish(conn);
                return NULL;
        }
        snprintf(said, len, "%s%stimeout expired\n", prev, msg);
        return conn;
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
 * connect_timeout. Only libpq can give up on an address for the next one
 * (its internal try_next_addr), so at connect_timeout:
 *   - with no other address to try (one host, one address: the usual
 *     case; or the last), the attempt ends there, unfinished:
 *     relay_pgconn_failure() says "timeout expired" as libpq would;
 *   - else a new connection starts at the next address (rest_of(): the
 *     name's addresses not tried yet, then the hosts after it), carrying what
 *     was said of those before;
 *   - when rest_of() cannot tell, PQreset() takes over (libpq's own
 *     blocking connect from the first host, still verbose, deaf to
 *     *stop): the address that timed out is tried once more.
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
        char at[ADDRESS_KEY] = "", now_at[ADDRESS_KEY], tried[LIST_CHARS] = "";
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
                        add_tried(tried, sizeof(tried), conn);
                        deadline = relay_now_ms() + timeout;
                }
                int wait = -1;
                if (timeout) {
                        int64_t left = deadline - relay_now_ms();
                        if (left <= 0) {
                                rest_t r;
                                int more = rest_of(conn, tried, &r);
                                if (more < 0)
                                        PQreset(conn);
                                if (more <= 0)
                                        break;
                                PGconn *next = start_rest(keys, vals, expand, &r, conn);
                                PQfinish(conn);
                                *out = conn = next;
                                if (!conn)
                                        return RELAY_ENOMEM;
                                PQsetErrorVerbosity(conn, PQERRORS_VERBOSE);
                                if (PQstatus(conn) == CONNECTION_BAD)
                                        break;
                                st = PGRES_POLLING_WRITING;
                                at[0] = '\0';
                                continue;
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
        /* What was said of the addresses before conn's (start_rest()), then
         * conn's own, as libpq's one message would have it. */
        const char *before = said_before(conn), *own = PQerrorMessage(conn);
        size_t all_len = strlen(before) + strlen(own) + 1;
        char *all = malloc(all_len);
        if (all)
                snprintf(all, all_len, "%s%s", before, own);
        const char *first = connect_sqlstate(all ? all : own, msg, msglen);
        char code[6] = "";
        if (first)
                memcpy(code, first, 5);
        free(all);
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
