/*
 * http.c - owns the HTTP server (libmicrohttpd, one internal polling
 * thread), its listening socket, and the tiny client of --health-check.
 *
 * The server answers GET and HEAD of /metrics, /healthz and /readyz from
 * the metrics snapshot only, so nothing a client does reaches the
 * replication loop: malformed request lines get libmicrohttpd's 400,
 * unknown paths 404, other methods 405; connections are capped in total
 * and per client address and closed after RELAY_HTTP_TIMEOUT_S idle, so a
 * slow client holds a slot for at most that long and can never hold the
 * loop at all. Idle clients from enough addresses (4 x 16) still fill the
 * slots, and refresh them as they close: the loopback address
 * --health-check asks from has slots of its own (http.h).
 *
 * The listening socket is bound here rather than by libmicrohttpd, so a
 * failure (address in use, not a local address) is reported with its cause.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifdef RELAY_HAVE_LIBMICROHTTPD
#include <microhttpd.h>
#endif

/* Parse addr into *ss; 0 or RELAY_EINVAL with why. */
static int parse_listen(const char *v, struct sockaddr_storage *ss, socklen_t *sslen, char *why,
                        size_t whylen)
{
        char host[64];
        const char *colon, *port_s;
        size_t hlen;

        memset(ss, 0, sizeof(*ss));
        if (v[0] == '[') {
                const char *close = strchr(v, ']');
                if (close == NULL || close[1] != ':')
                        goto bad;
                hlen = (size_t)(close - v - 1);
                if (hlen == 0 || hlen >= sizeof(host))
                        goto bad;
                memcpy(host, v + 1, hlen);
                host[hlen] = '\0';
                port_s = close + 2;
        } else {
                colon = strrchr(v, ':');
                if (colon == NULL || strchr(v, ':') != colon)
                        goto bad;
                hlen = (size_t)(colon - v);
                if (hlen >= sizeof(host))
                        goto bad;
                memcpy(host, v, hlen);
                host[hlen] = '\0';
                port_s = colon + 1;
        }
        char *end;
        errno = 0;
        long port = strtol(port_s, &end, 10);
        if (port_s[0] < '0' || port_s[0] > '9' || *end != '\0' || errno || port < 1 || port > 65535)
                goto bad;
        if (v[0] == '[') {
                struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
                if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1)
                        goto bad;
                a->sin6_family = AF_INET6;
                a->sin6_port = htons((uint16_t)port);
                *sslen = sizeof(*a);
                return 0;
        }
        struct sockaddr_in *a = (struct sockaddr_in *)ss;
        if (host[0] == '\0')
                a->sin_addr.s_addr = htonl(INADDR_ANY);
        else if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
                goto bad;
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)port);
        *sslen = sizeof(*a);
        return 0;
bad:
        relay_err_set(why, whylen,
                      "must be off, HOST:PORT with a numeric IPv4 address (127.0.0.1:10187), "
                      "[IPV6]:PORT ([::1]:10187) or :PORT for every interface");
        return RELAY_EINVAL;
}

int relay_http_check_listen(const char *addr, char *why, size_t whylen)
{
        struct sockaddr_storage ss;
        socklen_t len;
        if (strcmp(addr, "off") == 0)
                return 0;
        return parse_listen(addr, &ss, &len, why, whylen);
}

#ifdef RELAY_HAVE_LIBMICROHTTPD

struct relay_http {
        struct MHD_Daemon *d;
        relay_metrics_t *m;
        int64_t stall_ms;
        int fd;
        /* Open connections from other addresses than the host's own
         * loopback one. Read and written by libmicrohttpd's one thread only
         * (its callbacks), so no lock. */
        unsigned shared;
};

bool relay_http_available(void)
{
        return true;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
                             char *body, size_t len, enum MHD_ResponseMemoryMode mode)
{
        struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
        if (r == NULL) {
                if (mode == MHD_RESPMEM_MUST_FREE)
                        free(body);
                return MHD_NO;
        }
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
        if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
                MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
        enum MHD_Result ret = MHD_queue_response(c, status, r);
        MHD_destroy_response(r);
        return ret;
}

static enum MHD_Result text(struct MHD_Connection *c, unsigned status, const char *msg)
{
        return reply(c, status, "text/plain; charset=utf-8", (char *)(uintptr_t)msg, strlen(msg),
                     MHD_RESPMEM_PERSISTENT);
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *upload,
                               size_t *upload_size, void **state)
{
        relay_http_t *h = cls;
        (void)version, (void)upload, (void)upload_size, (void)state;

        if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
                return text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed: use GET\n");
        if (strcmp(url, "/metrics") == 0) {
                size_t len;
                char *body = relay_metrics_render(h->m, &len);
                if (body == NULL)
                        return text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
                return reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", body, len,
                             MHD_RESPMEM_MUST_FREE);
        }
        bool ready = strcmp(url, "/readyz") == 0;
        if (ready || strcmp(url, "/healthz") == 0) {
                char body[512];
                bool ok = relay_metrics_health(h->m, ready, h->stall_ms, body, sizeof(body));
                return reply(c, ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE,
                             "application/json", body, strlen(body), MHD_RESPMEM_MUST_COPY);
        }
        return text(c, MHD_HTTP_NOT_FOUND, "not found: try /metrics, /healthz or /readyz\n");
}

/* Is the client the host's own loopback address, 127.0.0.1 or ::1 (also
 * as ::ffff:127.0.0.1 on a dual-stack socket), which --health-check asks
 * from? Other 127.x addresses are clients like any other. */
static bool from_local(const struct sockaddr *a)
{
        if (a == NULL)
                return false;
        if (a->sa_family == AF_INET)
                return ((const struct sockaddr_in *)a)->sin_addr.s_addr == htonl(INADDR_LOOPBACK);
        if (a->sa_family != AF_INET6)
                return false;
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)a)->sin6_addr;
        static const unsigned char mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
        return IN6_IS_ADDR_LOOPBACK(a6) || memcmp(a6->s6_addr, mapped, sizeof(mapped)) == 0;
}

/* Admit a connection: the shared slots are for other addresses; the local
 * one is capped by libmicrohttpd's total (shared + its per-address limit). */
static enum MHD_Result admit(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
        relay_http_t *h = cls;
        (void)addrlen;
        return from_local(addr) || h->shared < RELAY_HTTP_MAX_CONNECTIONS ? MHD_YES : MHD_NO;
}

/* Count the shared slots: called once when an admitted connection starts,
 * once when it closes. */
static void count_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                             enum MHD_ConnectionNotificationCode toe)
{
        relay_http_t *h = cls;
        const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        (void)socket_context;
        if (ci != NULL && from_local(ci->client_addr))
                return;
        if (toe == MHD_CONNECTION_NOTIFY_STARTED)
                h->shared++;
        else if (h->shared > 0)
                h->shared--;
}

/* libmicrohttpd's own messages: the module does not log (and they name
 * nothing an operator can act on that the status codes do not show). */
static void quiet(void *cls, const char *fmt, va_list ap)
{
        (void)cls, (void)fmt, (void)ap;
}

int relay_http_start(relay_http_t **out, const char *addr, int64_t stall_ms, relay_metrics_t *m,
                     char *err, size_t errlen)
{
        struct sockaddr_storage ss;
        socklen_t sslen;
        char why[RELAY_ERRBUF];
        int one = 1;

        if (parse_listen(addr, &ss, &sslen, why, sizeof(why))) {
                relay_err_set(err, errlen, "invalid value \"%s\" for \"http.listen\": %s", addr, why);
                return RELAY_EINVAL;
        }
        relay_http_t *h = calloc(1, sizeof(*h));
        if (h == NULL)
                return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
        h->m = m;
        h->stall_ms = stall_ms;
        h->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        /* The kernel's full accept queue (SOMAXCONN, as libmicrohttpd's own
         * listen sockets): with a queue of 64, a burst of 1 000 connections
         * overflowed it (TcpExtListenOverflows rose by 126-1 437 per burst),
         * the kernel dropped the clients' final ACKs, and their handshakes
         * completed only on SYN-ACK retransmission 1, 3, 7, 15, 31 s later:
         * clients hung instead of being answered or refused at once. */
        if (h->fd < 0 || setsockopt(h->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
            bind(h->fd, (struct sockaddr *)&ss, sslen) != 0 || listen(h->fd, SOMAXCONN) != 0) {
                relay_err_set(err, errlen,
                              "could not listen on \"%s\" (http.listen): %s; choose a free local "
                              "address and port, or set http.listen = off",
                              addr, strerror(errno));
                relay_http_stop(h);
                return RELAY_ESETUP;
        }
        h->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO |
                                        (ss.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0),
                                0, admit, h, handler, h,
                                MHD_OPTION_LISTEN_SOCKET, (MHD_socket)h->fd,
                                MHD_OPTION_NOTIFY_CONNECTION, count_connection, h,
                                MHD_OPTION_CONNECTION_LIMIT,
                                (unsigned)(RELAY_HTTP_MAX_CONNECTIONS + RELAY_HTTP_MAX_PER_IP),
                                MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)RELAY_HTTP_MAX_PER_IP,
                                MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)RELAY_HTTP_TIMEOUT_S,
                                MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)32768,
                                MHD_OPTION_EXTERNAL_LOGGER, quiet, NULL, MHD_OPTION_END);
        if (h->d == NULL) {
                relay_http_stop(h);
                return relay_err(err, errlen, RELAY_ESETUP,
                                 "could not start the HTTP server on \"%s\"", addr);
        }
        *out = h;
        return 0;
}

void relay_http_stop(relay_http_t *h)
{
        if (h == NULL)
                return;
        if (h->d != NULL)
                MHD_stop_daemon(h->d); /* closes the listening socket it was given */
        else if (h->fd >= 0)
                close(h->fd); /* relay_http_start() failed before the daemon took it */
        free(h);
}

#else /* without libmicrohttpd */

bool relay_http_available(void)
{
        return false;
}

int relay_http_start(relay_http_t **out, const char *addr, int64_t stall_ms, relay_metrics_t *m,
                     char *err, size_t errlen)
{
        (void)out, (void)addr, (void)stall_ms, (void)m;
        relay_err_set(err, errlen, "this build has no HTTP endpoint (built without "
                                   "libmicrohttpd): set http.listen = off");
        return RELAY_ESETUP;
}

void relay_http_stop(relay_http_t *h)
{
        (void)h;
}

#endif

int relay_http_get(const char *addr, const char *path, int timeout_ms, char *body,
                   size_t bodylen, char *err, size_t errlen)
{
        struct sockaddr_storage ss;
        socklen_t sslen;
        char why[RELAY_ERRBUF], buf[2048];
        size_t got = 0;
        int fd = -1, status;

        body[0] = '\0';
        if (parse_listen(addr, &ss, &sslen, why, sizeof(why))) {
                relay_err_set(err, errlen, "invalid value \"%s\" for \"http.listen\": %s", addr, why);
                return RELAY_EIO;
        }
        /* Listening on every interface: ask on loopback. */
        if (ss.ss_family == AF_INET &&
            ((struct sockaddr_in *)&ss)->sin_addr.s_addr == htonl(INADDR_ANY))
                ((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (ss.ss_family == AF_INET6 &&
            IN6_IS_ADDR_UNSPECIFIED(&((struct sockaddr_in6 *)&ss)->sin6_addr))
                ((struct sockaddr_in6 *)&ss)->sin6_addr = in6addr_loopback;

        fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                goto fail;
        if (connect(fd, (struct sockaddr *)&ss, sslen) != 0 && errno != EINPROGRESS)
                goto fail;
        /* timeout_ms in all: a listener that answers a byte at a time must
         * not keep a health check waiting for every byte. */
        int64_t deadline = relay_now_ms() + timeout_ms;
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        if (poll(&p, 1, timeout_ms) != 1) {
                errno = ETIMEDOUT;
                goto fail;
        }
        int soerr = 0;
        socklen_t sl = sizeof(soerr);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
        if (soerr) {
                errno = soerr;
                goto fail;
        }
        int n = snprintf(buf, sizeof(buf), "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n", path);
        if (send(fd, buf, (size_t)n, MSG_NOSIGNAL) != n)
                goto fail;
        for (;;) {
                int64_t left = deadline - relay_now_ms();
                p.events = POLLIN;
                if (left <= 0 || poll(&p, 1, (int)left) != 1) {
                        errno = ETIMEDOUT;
                        goto fail;
                }
                ssize_t r = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
                if (r < 0)
                        goto fail;
                got += (size_t)r;
                if (r == 0 || got == sizeof(buf) - 1)
                        break;
        }
        close(fd);
        buf[got] = '\0';
        if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1) {
                relay_err_set(err, errlen, "not an HTTP answer from %s", addr);
                return RELAY_EIO;
        }
        const char *b = strstr(buf, "\r\n\r\n");
        relay_err_set(body, bodylen, "%s", b ? b + 4 : "");
        return status;
fail:
        relay_err_set(err, errlen, "could not ask %s for %s: %s", addr, path, strerror(errno));
        if (fd >= 0)
                close(fd);
        return RELAY_EIO;
}
