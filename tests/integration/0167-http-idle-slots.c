/*
 * 0167-http-idle-slots.c - clients that hold the HTTP endpoint's slots
 * cannot fail the relay's own health check.
 *
 * The endpoint caps connections (64 in all, 16 per client address) and
 * closes idle ones after 10 s. 16 idle connections from each of 4
 * addresses (127.0.0.2-5: every 127.x address is loopback on Linux) held
 * all 64: a GET /healthz from anywhere else was refused, so did
 * --health-check (Docker's HEALTHCHECK, a Kubernetes exec probe), and a
 * healthy relay was restarted; clients that reconnect as theirs are
 * closed hold the slots for good. The host's loopback address (127.0.0.1,
 * what --health-check asks from) now has slots of its own:
 *
 *   - with the 64 idle connections held, a GET /healthz from 127.0.0.1
 *     and --health-check are answered 200, but a client from a fifth
 *     address is still refused (the shared cap stands: an httpGet probe
 *     from outside can still be held off, see README);
 *   - once the idle connections close, the fifth address is answered too;
 *   - the relay relayed meanwhile (its events are in Kafka).
 *
 * Port: RELAY_TEST_HTTP_PORT + 70.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

#define ADDRS 4
#define PER_ADDR 16

/* A connection to 127.0.0.1:port from the loopback address from (blocking
 * connect: the kernel completes it whether or not the server accepts). */
static int connect_from(const char *from, int port)
{
        struct sockaddr_in src = {.sin_family = AF_INET}, dst = {.sin_family = AF_INET};
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        inet_pton(AF_INET, from, &src.sin_addr);
        dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        dst.sin_port = htons((uint16_t)port);
        if (fd < 0 || bind(fd, (struct sockaddr *)&src, sizeof(src)) != 0 ||
            connect(fd, (struct sockaddr *)&dst, sizeof(dst)) != 0)
                tap_bail("connect from %s to port %d: %s", from, port, strerror(errno));
        return fd;
}

/* GET /healthz from address from: the status code, -1 when closed or
 * refused without one within timeout_ms. */
static int healthz_from(const char *from, int port, int timeout_ms)
{
        static const char req[] = "GET /healthz HTTP/1.0\r\nHost: x\r\n\r\n";
        int fd = connect_from(from, port), status = -1;
        char buf[512];
        size_t got = 0;
        struct pollfd p = {.fd = fd, .events = POLLIN};

        if (send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) == (ssize_t)(sizeof(req) - 1)) {
                while (got < sizeof(buf) - 1 && poll(&p, 1, timeout_ms) == 1) {
                        ssize_t r = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
                        if (r <= 0)
                                break;
                        got += (size_t)r;
                }
        }
        buf[got] = '\0';
        if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
                status = -1;
        close(fd);
        return status;
}

int main(void)
{
        int port = h_http_port(70);
        char listen[64], health_set[80];
        h_case_t k;

        h_case_open(&k, "idleslots", "slot_is", "is", 1, 0);
        snprintf(listen, sizeof(listen), "http.listen=127.0.0.1:%d", port);
        const char *sets[] = {k.set_conn, k.set_kafka, k.set_slot, listen, NULL};
        h_relay_t *r = h_relay_start(sets);
        if (!ok(h_relay_streams(r, 60000), "the relay streams"))
                h_relay_diag_log(r);
        is_int(h_http_request(port, "GET", "/healthz", 5000, NULL), 200,
               "/healthz answers 200 before");

        int idle[ADDRS * PER_ADDR];
        for (int a = 0; a < ADDRS; a++) {
                char from[32];
                snprintf(from, sizeof(from), "127.0.0.%d", a + 2);
                for (int i = 0; i < PER_ADDR; i++)
                        idle[a * PER_ADDR + i] = connect_from(from, port);
        }
        /* All this well within the 10 s after which the idle ones are closed.
         * Accepted in order: by the time this one is, the 64 before it are. */
        is_int(healthz_from("127.0.0.1", port, 3000), 200,
               "GET /healthz from 127.0.0.1 meanwhile: 200");
        snprintf(health_set, sizeof(health_set), "http.listen=127.0.0.1:%d", port);
        const char *hc_opts[] = {"--health-check", NULL}, *hc_sets[] = {health_set, NULL};
        char *out = NULL, *log = NULL;
        int rc = h_relay_run_cmd(NULL, hc_opts, hc_sets, 30000, &out, &log);
        if (!ok(rc == 0, "--health-check meanwhile: exit 0 (got %d)", rc))
                tap_diag("output: %s %s", out, log);
        free(out);
        free(log);
        is_int(healthz_from("127.0.0.6", port, 2000), -1,
               "with 64 idle connections from 4 addresses, a fifth address is refused (the "
               "shared cap)");

        for (int i = 0; i < ADDRS * PER_ADDR; i++)
                close(idle[i]);
        /* The server sees them close on its next turn: ask until it has. */
        int st = -1;
        for (int64_t end = h_now_ms() + 15000; st != 200 && h_now_ms() < end; h_sleep_ms(100))
                st = healthz_from("127.0.0.6", port, 5000);
        is_int(st, 200, "once they are closed, the fifth address is answered");

        h_outbox_insert(k.c, k.aggtype, "after");
        is_int(h_kafka_wait_count(k.topic, 1, 60000), 1, "the relay relayed meanwhile");
        is_int(h_relay_stop(r, 60000), 0, "SIGTERM: exit 0");
        h_relay_free(r);
        h_case_close(&k);
        return done_testing();
}
