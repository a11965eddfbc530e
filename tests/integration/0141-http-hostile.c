/*
 * 0141-http-hostile.c - a slow or hostile HTTP client cannot stall the
 * relay. While writers commit events:
 *
 *   - malformed requests get libmicrohttpd's answers (400 for a request
 *     line without a version or with an extra token and for a header
 *     without a colon, 505 for an unknown HTTP version, 414 for a 100 kB
 *     URL, 431 for a 100 kB header) or a closed connection (a one-token
 *     request line, an empty method), never a crash;
 *   - 220 slowloris connections (a request never finished, some with
 *     binary junk) and a burst of 1 000 concurrent requests, which the
 *     connection limits refuse in part (figures in the diagnostics);
 *   - meanwhile Kafka keeps receiving events, afterwards /metrics answers
 *     again, a burst of 1 000 alone is served in part (the rest refused by
 *     the limits, none left hanging), the relay never restarted its session (duplicates = 0), and
 *     every committed event is in Kafka, in order.
 *   - --health-check against an endpoint that trickles its answer gives up
 *     after its timeout in all (see trickling_endpoint()); with an
 *     http.listen it cannot read it says unhealthy with exit 1, not 2.
 *
 * Port: RELAY_TEST_HTTP_PORT (default 19140) + 1, and + 3 for that endpoint.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "faults/faults.h"
#include "harness.h"
#include "workload.h"

#define SLOW 220
#define BURST 1000

static int open_nb(int port)
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -1;
        if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 && errno != EINPROGRESS) {
                close(fd);
                return -1;
        }
        return fd;
}

/* Count of 200 answers, refused / closed ones into *refused. */
static int burst(int port, int n, int timeout_ms, int *refused, int *unanswered)
{
        struct pollfd *p = calloc((size_t)n, sizeof(*p));
        char **buf = calloc((size_t)n, sizeof(*buf));
        size_t *got = calloc((size_t)n, sizeof(*got));
        bool *sent = calloc((size_t)n, sizeof(*sent));
        static const char req[] = "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n";
        int ok200 = 0, open = 0;

        *refused = *unanswered = 0;
        for (int i = 0; i < n; i++) {
                p[i].fd = open_nb(port);
                p[i].events = POLLOUT;
                buf[i] = malloc(64);
                if (p[i].fd < 0)
                        (*refused)++;
                else
                        open++;
        }
        int64_t deadline = h_now_ms() + timeout_ms;
        while (open > 0 && h_now_ms() < deadline) {
                if (poll(p, (nfds_t)n, 200) < 0)
                        break;
                for (int i = 0; i < n; i++) {
                        if (p[i].fd < 0 || !p[i].revents)
                                continue;
                        if (!sent[i] && (p[i].revents & POLLOUT)) {
                                if (send(p[i].fd, req, sizeof(req) - 1, MSG_NOSIGNAL) < 0)
                                        goto closed;
                                sent[i] = true;
                                p[i].events = POLLIN;
                                continue;
                        }
                        char tmp[65536];
                        ssize_t r = recv(p[i].fd, tmp, sizeof(tmp), 0);
                        if (r > 0) {
                                if (got[i] < 63) {
                                        size_t k = (size_t)r < 63 - got[i] ? (size_t)r : 63 - got[i];
                                        memcpy(buf[i] + got[i], tmp, k);
                                        got[i] += k;
                                }
                                continue;
                        }
                closed:
                        buf[i][got[i]] = '\0';
                        if (strncmp(buf[i], "HTTP/1.1 200", 12) == 0 ||
                            strncmp(buf[i], "HTTP/1.0 200", 12) == 0)
                                ok200++;
                        else
                                (*refused)++;
                        close(p[i].fd);
                        p[i].fd = -1;
                        open--;
                }
        }
        for (int i = 0; i < n; i++) {
                if (p[i].fd >= 0) {
                        (*unanswered)++;
                        close(p[i].fd);
                }
                free(buf[i]);
        }
        free(p), free(buf), free(got), free(sent);
        return ok200;
}

/* Run "RELAY_BIN --health-check args" (2>&1); its exit status, its output in out. */
static int health_check(const char *args, char *out, size_t outlen)
{
        char cmd[512];
        snprintf(cmd, sizeof(cmd), "'%s' --health-check %s 2>&1", h_env("RELAY_BIN"), args);
        FILE *p = popen(cmd, "r");
        if (!p)
                tap_bail("popen %s: %s", cmd, strerror(errno));
        size_t n = fread(out, 1, outlen - 1, p);
        out[n] = '\0';
        int st = pclose(p);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/*
 * --health-check against an endpoint that reads the request, then answers
 * a valid "200 OK" one byte every 200 ms (a stalled or hostile listener on
 * http.listen's port), about 12 s in all: the check must give up after its
 * 3 s in all, not per byte, and say unhealthy. A client that only bounds
 * each read waits for all of it and calls the relay healthy.
 */
static void trickling_endpoint(int port)
{
        int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(ls, 4) != 0)
                tap_bail("trickling endpoint on port %d: %s", port, strerror(errno));
        pid_t pid = fork();
        if (pid < 0)
                tap_bail("fork: %s", strerror(errno));
        if (pid == 0) {
                static const char answer[] = "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n"
                                             "ok\n";
                char req[2048];
                size_t got = 0;
                int c = accept(ls, NULL, NULL);
                while (c >= 0 && got < sizeof(req) - 1) {
                        ssize_t r = recv(c, req + got, sizeof(req) - 1 - got, 0);
                        if (r <= 0)
                                break;
                        got += (size_t)r;
                        req[got] = '\0';
                        if (strstr(req, "\r\n\r\n"))
                                break;
                }
                for (size_t i = 0; c >= 0 && i < sizeof(answer) - 1; i++) {
                        if (send(c, answer + i, 1, MSG_NOSIGNAL) != 1)
                                break;
                        h_sleep_ms(200);
                }
                if (c >= 0)
                        close(c);
                _exit(0);
        }
        close(ls);
        char args[64], out[512];
        snprintf(args, sizeof(args), "--set http.listen=127.0.0.1:%d", port);
        int rc = health_check(args, out, sizeof(out));
        is_int(rc, 1, "--health-check against an endpoint answering a byte every 200 ms: exit 1");
        ok(strstr(out, "unhealthy") && strstr(out, "timed out"),
           "  unhealthy, timed out after its 3 s in all: %s", out);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
}

/* --health-check answers 0 or 1 (the manual; Docker reserves a
 * HEALTHCHECK's 2), also when it cannot read its configuration. */
static void health_check_bad_config(void)
{
        char out[512];
        int rc = health_check("--set http.listen=nowhere", out, sizeof(out));
        is_int(rc, 1, "--health-check with an http.listen it cannot read: exit 1");
        ok(strstr(out, "unhealthy") && strstr(out, "http.listen"), "  unhealthy, naming it: %s",
           out);
}

/*
 * --health-check of a healthy relay whose standard output cannot be written
 * (a full disk, a closed pipe): the verdict is still 0, never the 2 of a
 * write error, which Docker reserves. Over HTTP and, with http.listen = off,
 * by /proc (this relay is a live outbox-relay process).
 */
static void health_check_unwritable(int port)
{
        char args[128], out[512];
        snprintf(args, sizeof(args), "--set http.listen=127.0.0.1:%d", port);
        is_int(health_check(args, out, sizeof(out)), 0, "--health-check of the streaming relay: 0");
        snprintf(args, sizeof(args), "--set http.listen=127.0.0.1:%d >/dev/full", port);
        is_int(health_check(args, out, sizeof(out)), 0,
               "  also with standard output unwritable (/dev/full), never 2");
        is_int(health_check("--set http.listen=off >/dev/full", out, sizeof(out)), 0,
               "--health-check by /proc with standard output unwritable: 0, never 2");
}

int main(void)
{
        int port = h_http_port(1);
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < SLOW + BURST + 64) {
                rl.rlim_cur = rl.rlim_max < SLOW + BURST + 64 ? rl.rlim_max : SLOW + BURST + 64;
                setrlimit(RLIMIT_NOFILE, &rl);
        }

        fx_case_t fc;
        h_workload_conf_t wc;
        fx_steady_case_open(&fc, "hostile", "hh", 10, &wc);
        fx_sets_add(&fc.sets, "http.listen=127.0.0.1:%d", port);
        h_relay_t *r = fx_case_relay(&fc, "relay streams with http.listen on");
        fx_writers_t *ws = fx_writers_start(&wc);
        ok(h_workload_wait_count(&wc, 1, 30000) > 0, "events flow");
        health_check_unwritable(port);

        /* Malformed requests, one connection each. */
        static const struct {
                const char *what, *bytes;
                int want; /* -1: closed without an answer */
        } bad[] = {
                {"request line without a version", "GET /metrics\r\n\r\n", 400},
                {"request line with an extra token", "GET /metrics HTTP/1.1 x\r\nHost: x\r\n\r\n", 400},
                {"header without a colon", "GET /metrics HTTP/1.1\r\nHost: x\r\nBad\r\n\r\n", 400},
                {"unknown HTTP version", "GET /metrics HTTP/9.9\r\nHost: x\r\n\r\n", 505},
                {"one-token request line", "GARBAGE\r\n\r\n", -1},
                {"empty method", " /metrics HTTP/1.1\r\nHost: x\r\n\r\n", -1},
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                is_int(h_http_raw(port, bad[i].bytes, strlen(bad[i].bytes), 5000), bad[i].want,
                       "%s: %s", bad[i].what, bad[i].want < 0 ? "closed" : "refused");
        size_t big = 100000;
        char *longreq = malloc(big + 64);
        if (!longreq)
                tap_bail("out of memory");
        int n = sprintf(longreq, "GET /");
        memset(longreq + n, 'a', big);
        sprintf(longreq + n + big, " HTTP/1.1\r\nHost: x\r\n\r\n");
        is_int(h_http_raw(port, longreq, strlen(longreq), 5000), 414, "100 kB URL: 414");
        n = sprintf(longreq, "GET /metrics HTTP/1.1\r\nHost: x\r\nX: ");
        memset(longreq + n, 'b', big);
        sprintf(longreq + n + big, "\r\n\r\n");
        is_int(h_http_raw(port, longreq, strlen(longreq), 5000), 431, "100 kB header: 431");
        free(longreq);

        /* Slowloris, then a burst while it holds on. */
        long long before = h_workload_count(&wc);
        int slow[SLOW], slow_open = 0;
        for (int i = 0; i < SLOW; i++) {
                slow[i] = open_nb(port);
                if (slow[i] < 0)
                        continue;
                slow_open++;
                h_sleep_ms(1);
                static const char part[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
                static const char junk[] = "\x01\x02\x00\xff GET";
                if (i % 4 == 0)
                        (void)!send(slow[i], junk, sizeof(junk) - 1, MSG_NOSIGNAL);
                else
                        (void)!send(slow[i], part, sizeof(part) - 1, MSG_NOSIGNAL);
        }
        int refused, unanswered;
        int64_t t0 = h_now_ms();
        int got200 = burst(port, BURST, 15000, &refused, &unanswered);
        tap_diag("FIGURES http-hostile: slowloris_connections=%d burst=%d answered_200=%d "
                 "refused_or_closed=%d unanswered=%d burst_seconds=%.1f",
                 slow_open, BURST, got200, refused, unanswered, (h_now_ms() - t0) / 1000.0);
        long long during = h_workload_count(&wc);
        ok(during > before, "Kafka kept receiving events during the attack (%lld, then %lld)",
           before, during);
        for (int i = 0; i < SLOW; i++)
                if (slow[i] >= 0)
                        close(slow[i]);

        /* Afterwards: the endpoint answers, the relay still streams. */
        char *page = NULL;
        int status = -1;
        int64_t deadline = h_now_ms() + 15000; /* the server notices closed sockets */
        while ((status = h_http_request(port, "GET", "/metrics", 2000, &page)) != 200 &&
               h_now_ms() < deadline) {
                free(page);
                page = NULL;
                h_sleep_ms(250);
        }
        is_int(status, 200, "GET /metrics answers after the attack");
        ok(page && strstr(page, "outbox_relay_state{state=\"streaming\"} 1"),
           "the relay reports itself streaming");
        free(page);
        /* A burst alone: the limits refuse what is over them, the rest is served. */
        got200 = burst(port, BURST, 15000, &refused, &unanswered);
        tap_diag("FIGURES http-burst-alone: burst=%d answered_200=%d refused_or_closed=%d "
                 "unanswered=%d",
                 BURST, got200, refused, unanswered);
        ok(got200 > 0 && unanswered == 0,
           "a burst without slowloris: %d of %d answered, none left hanging", got200, BURST);
        h_sleep_ms(2000);
        long long after = h_workload_count(&wc);
        ok(after > during, "events still flow after the attack (%lld, then %lld)", during, after);

        fx_writer_stats_t st;
        fx_writers_stop(ws, false, &st);
        long long expected = 0;
        long long held = fx_wait_all_in_kafka(&fc, &wc, 60000, &expected);
        is_int(held, expected, "Kafka holds the %lld committed events", expected);
        h_verify_t v;
        h_workload_verify(fc.c, &wc, &v);
        fx_check_delivered("http hostile", &v);
        is_int(v.duplicates, 0, "no duplicates: the session never restarted");

        h_relay_signal(r, SIGTERM);
        is_int(h_relay_wait(r, 30000), 0, "relay stops cleanly");
        h_relay_free(r);
        fx_case_close(&fc, &wc);
        trickling_endpoint(h_http_port(3));
        health_check_bad_config();
        return done_testing();
}
