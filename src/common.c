/*
 * common.c - the error-buffer helper, return-code descriptions and the small
 * string helpers every module shares. Kept tiny and libc-only so any module
 * (and any test, and the fuzzer) can link it alone.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "relay/common.h"

/* Callers that do not care about the detail pass NULL/0. vsnprintf
 * truncates and always terminates when errlen > 0. */
static void err_vset(char *err, size_t errlen, const char *fmt, va_list ap)
{
        if (err != NULL && errlen > 0 && vsnprintf(err, errlen, fmt, ap) < 0)
                err[0] = '\0';
}

void relay_err_set(char *err, size_t errlen, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        err_vset(err, errlen, fmt, ap);
        va_end(ap);
}

int relay_err(char *err, size_t errlen, int code, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        err_vset(err, errlen, fmt, ap);
        va_end(ap);
        return code;
}

const char *relay_strerror(int code)
{
        /* Indexed by -code: the codes run from 0 down without a gap. */
        static const char *const what[] = {
#define WHAT(name, value, text) [-(value)] = text,
                RELAY_RETURN_CODES(WHAT)
#undef WHAT
        };
        return RELAY_NAME_OF(what, -(long)code, "unknown return code");
}

const char *relay_name_of(const char *const *names, size_t n, long v, const char *unknown)
{
        return v >= 0 && (unsigned long)v < n && names[v] != NULL ? names[v] : unknown;
}

int relay_hexval(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

const char *relay_abbrev(const char *s, char *buf, size_t buflen)
{
        size_t n;

        if (strlen(s) < buflen || buflen < 4)
                return s;
        n = buflen - 4;
        /* Back to the first byte of a character: not a continuation byte. */
        while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
                n--;
        memcpy(buf, s, n);
        memcpy(buf + n, "...", 4);
        return buf;
}

char *relay_utf8_sanitize(const char *s)
{
        size_t len = strlen(s);
        char *out = malloc(len + 1);
        size_t i = 0;

        if (out == NULL)
                return NULL;
        while (i < len) {
                unsigned char c = (unsigned char)s[i];
                size_t n = 0;
                uint32_t cp = 0, min = 0;
                bool valid;

                if (c < 0x80) {
                        out[i++] = (char)c;
                        continue;
                }
                if (c >= 0xc2 && c <= 0xdf) {
                        n = 1, cp = c & 0x1f, min = 0x80;
                } else if (c >= 0xe0 && c <= 0xef) {
                        n = 2, cp = c & 0x0f, min = 0x800;
                } else if (c >= 0xf0 && c <= 0xf4) {
                        n = 3, cp = c & 0x07, min = 0x10000;
                }
                /* A NUL terminator is not a continuation byte, so this stops at the end. */
                valid = n > 0;
                for (size_t k = 1; valid && k <= n; k++) {
                        unsigned char cc = (unsigned char)s[i + k];
                        if ((cc & 0xc0) != 0x80)
                                valid = false;
                        else
                                cp = (cp << 6) | (cc & 0x3f);
                }
                if (valid && (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)))
                        valid = false;
                if (!valid) {
                        out[i++] = '?';
                        continue;
                }
                memcpy(out + i, s + i, n + 1);
                i += n + 1;
        }
        out[len] = '\0';
        return out;
}

char *relay_dupn(const char *s, size_t n)
{
        char *d = malloc(n + 1);

        if (d != NULL) {
                if (n > 0)
                        memcpy(d, s, n);
                d[n] = '\0';
        }
        return d;
}

void relay_strbuf_fixed(relay_strbuf_t *b, char *buf, size_t size)
{
        *b = (relay_strbuf_t){.p = buf, .cap = size, .fixed = true, .failed = size == 0};
        if (size > 0)
                buf[0] = '\0';
}

void relay_strbuf_addn(relay_strbuf_t *b, const char *s, size_t n)
{
        if (b->failed)
                return;
        if (b->len + n + 1 > b->cap) {
                size_t cap = b->cap ? b->cap : 64;
                char *p;
                if (b->fixed) {
                        b->failed = true;
                        return;
                }
                while (cap < b->len + n + 1)
                        cap *= 2;
                if (!(p = realloc(b->p, cap))) {
                        b->failed = true;
                        return;
                }
                b->p = p;
                b->cap = cap;
        }
        if (n > 0)
                memcpy(b->p + b->len, s, n);
        b->len += n;
        b->p[b->len] = '\0';
}

void relay_strbuf_adds(relay_strbuf_t *b, const char *s)
{
        relay_strbuf_addn(b, s, strlen(s));
}

void relay_strbuf_addc(relay_strbuf_t *b, char c)
{
        relay_strbuf_addn(b, &c, 1);
}

char *relay_strbuf_finish(relay_strbuf_t *b)
{
        if (b->failed) {
                free(b->p);
                return NULL;
        }
        return b->p ? b->p : strdup("");
}

void relay_free_all(void *const *ptrs, size_t n)
{
        for (size_t i = 0; i < n; i++)
                free(ptrs[i]);
}

void relay_free_list(char **items, size_t n)
{
        for (size_t i = 0; i < n; i++)
                free(items[i]);
        free(items);
}

int relay_pairs_add(relay_pairs_t *p, const char *k, size_t kl, const char *v, size_t vl)
{
        if (p->n == p->cap) {
                size_t cap = p->cap ? p->cap * 2 : 16;
                char **nk = realloc(p->k, cap * sizeof(*nk));
                if (!nk)
                        return RELAY_ENOMEM;
                p->k = nk;
                char **nv = realloc(p->v, cap * sizeof(*nv));
                if (!nv)
                        return RELAY_ENOMEM;
                p->v = nv;
                p->cap = cap;
        }
        p->k[p->n] = relay_dupn(k, kl);
        p->v[p->n] = relay_dupn(v, vl);
        if (!p->k[p->n] || !p->v[p->n]) {
                RELAY_FREE_ALL(p->k[p->n], p->v[p->n]);
                return RELAY_ENOMEM;
        }
        p->n++;
        return 0;
}

int relay_pairs_set(relay_pairs_t *p, const char *k, const char *v)
{
        for (size_t i = 0; i < p->n; i++) {
                if (strcmp(p->k[i], k) == 0) {
                        char *nv = strdup(v);
                        if (!nv)
                                return RELAY_ENOMEM;
                        free(p->v[i]);
                        p->v[i] = nv;
                        return 0;
                }
        }
        return relay_pairs_add(p, k, strlen(k), v, strlen(v));
}

const char *relay_pairs_get(const relay_pairs_t *p, const char *k)
{
        for (size_t i = p->n; i-- > 0;)
                if (strcmp(p->k[i], k) == 0)
                        return p->v[i];
        return NULL;
}

void relay_pairs_free(relay_pairs_t *p)
{
        relay_free_list(p->k, p->n);
        relay_free_list(p->v, p->n);
        *p = (relay_pairs_t){0};
}

bool relay_list_next(const char **p, const char **item, size_t *len)
{
        const char *s = *p, *e;

        if (s == NULL)
                return false;
        e = s + strcspn(s, ",");
        *p = *e == ',' ? e + 1 : NULL;
        while (s < e && (*s == ' ' || *s == '\t'))
                s++;
        while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
                e--;
        *item = s;
        *len = (size_t)(e - s);
        return true;
}

void relay_fput_escaped(FILE *out, const char *s, size_t n, const char *const esc[256])
{
        for (size_t i = 0; i < n; i++) {
                const char *e = esc[(unsigned char)s[i]];
                if (e != NULL)
                        fputs(e, out);
                else
                        fputc(s[i], out);
        }
}

int relay_stdout_finish(char *err, size_t errlen)
{
        if (fflush(stdout) == 0 && !ferror(stdout))
                return 0;
        if (errno == EPIPE)
                return 0;
        return relay_err(err, errlen, RELAY_EIO, "could not write to standard output: %s",
                         strerror(errno));
}

int64_t relay_now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int signal_failed(char *err, size_t errlen)
{
        return relay_err(err, errlen, RELAY_ESETUP,
                         "could not install the signal handlers: %s; this is a fault of "
                         "the system or of a library preloaded into the program",
                         strerror(errno));
}

static int install(int sig, void (*handler)(int), int flags)
{
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = handler;
        sa.sa_flags = flags;
        sigemptyset(&sa.sa_mask);
        return sigaction(sig, &sa, NULL);
}

int relay_stop_signals(void (*handler)(int), bool ignore_sigpipe, char *err, size_t errlen)
{
        /* No SA_RESTART: poll() must wake up. */
        if (install(SIGTERM, handler, 0) != 0 || install(SIGINT, handler, 0) != 0 ||
            (ignore_sigpipe && signal(SIGPIPE, SIG_IGN) == SIG_ERR))
                return signal_failed(err, errlen);
        return 0;
}

static volatile sig_atomic_t hangups;

static void on_hangup(int sig)
{
        (void)sig;
        if (hangups < SIG_ATOMIC_MAX)
                hangups++;
}

/*
 * SA_RESTART: a hangup asks nothing to end, so it must not make any call
 * fail. poll() and nanosleep() return EINTR whatever the flag (signal(7)),
 * so the loop's waits still wake, and they are short anyway (a second at
 * most) for a handler run on another thread (librdkafka's, libmicrohttpd's:
 * the kernel picks any thread that does not block the signal). libpq
 * retries its poll() on EINTR and its socket never blocks. What the flag
 * changes is every other call the signal interrupts: a write of a log line
 * to a full stderr pipe, the blocking calls of those libraries' threads;
 * they are resumed rather than failing with EINTR.
 */
int relay_hangup_signal(const volatile sig_atomic_t **received, char *err, size_t errlen)
{
        if (install(SIGHUP, on_hangup, SA_RESTART) != 0)
                return signal_failed(err, errlen);
        *received = &hangups;
        return 0;
}

int64_t relay_pg_now_us(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return ((int64_t)ts.tv_sec - RELAY_PG_EPOCH_OFFSET_S) * 1000000 + ts.tv_nsec / 1000;
}

int64_t relay_pg_to_unix_ms(int64_t pg_us)
{
        /* Floor, so that a time before 2000 does not round toward it. */
        int64_t ms = pg_us / 1000 - (pg_us % 1000 < 0);

        return ms + RELAY_PG_EPOCH_OFFSET_S * 1000;
}
