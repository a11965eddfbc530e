/*
 * tap.h - a tiny Test Anything Protocol emitter for the C test programs.
 *
 * Each test program prints "ok N - name" / "not ok N - name" lines and a plan
 * at the end (done_testing), and exits non-zero if anything failed, so meson's
 * TAP parser and a human reading the log agree.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_TAP_H
#define RELAY_TAP_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_n;
static int tap_failed;

/* Prints the formatted text and a newline; a line break inside it starts
 * a comment line ("# "), so that text quoted from a program (a server's
 * HINT, a command's output) never reads as a TAP line meson does not know. */
static void tap_vputs(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0), unused));
static void tap_vputs(const char *fmt, va_list ap)
{
        va_list aq;
        va_copy(aq, ap);
        int n = vsnprintf(NULL, 0, fmt, aq);
        va_end(aq);
        char *buf = n < 0 ? NULL : malloc((size_t)n + 1);
        if (!buf) {
                fputs("(could not format the message)\n", stdout);
                return;
        }
        vsnprintf(buf, (size_t)n + 1, fmt, ap);
        while (n > 0 && buf[n - 1] == '\n')
                buf[--n] = '\0';
        for (const char *p = buf; *p; p++) {
                putchar(*p);
                if (*p == '\n')
                        fputs("# ", stdout);
        }
        putchar('\n');
        free(buf);
}

static void tap_diag(const char *fmt, ...) __attribute__((format(printf, 1, 2), unused));
static void tap_diag(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        fputs("# ", stdout);
        tap_vputs(fmt, ap);
        fflush(stdout);
        va_end(ap);
}

static int tap_ok(int cond, const char *file, int line, const char *fmt, ...)
        __attribute__((format(printf, 4, 5), unused));
static int tap_ok(int cond, const char *file, int line, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        printf("%sok %d - ", cond ? "" : "not ", ++tap_n);
        tap_vputs(fmt, ap);
        va_end(ap);
        if (!cond) {
                tap_failed++;
                printf("#   failed at %s:%d\n", file, line);
        }
        fflush(stdout);
        return cond;
}

#define ok(cond, ...) tap_ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)

#define is_int(got, want, ...)                                                                     \
        do {                                                                                       \
                long long got_ = (long long)(got), want_ = (long long)(want);                      \
                if (!tap_ok(got_ == want_, __FILE__, __LINE__, __VA_ARGS__))                       \
                        tap_diag("  got %lld, want %lld", got_, want_);                            \
        } while (0)

#define is_str(got, want, ...)                                                                     \
        do {                                                                                       \
                const char *got_ = (got), *want_ = (want);                                         \
                int eq_ = got_ && want_ ? strcmp(got_, want_) == 0 : got_ == want_;                \
                if (!tap_ok(eq_, __FILE__, __LINE__, __VA_ARGS__))                                 \
                        tap_diag("  got \"%s\", want \"%s\"", got_ ? got_ : "(null)",              \
                                 want_ ? want_ : "(null)");                                        \
        } while (0)

/* A failed precondition: report it and end the program (the rest cannot run). */
#define tap_bail(...)                                                                              \
        do {                                                                                       \
                printf("Bail out! ");                                                              \
                printf(__VA_ARGS__);                                                               \
                putchar('\n');                                                                     \
                fflush(stdout);                                                                    \
                exit(1);                                                                           \
        } while (0)

static int done_testing(void) __attribute__((unused));
static int done_testing(void)
{
        printf("1..%d\n", tap_n);
        fflush(stdout);
        return tap_failed || tap_n == 0 ? 1 : 0;
}

#endif
