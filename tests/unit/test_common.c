/*
 * test_common.c - the helpers every module shares: return-code
 * descriptions, hex digits, byte copies, comma-separated lists, the
 * PostgreSQL epoch clock and the stop signals' handlers.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <time.h>

#include "relay/common.h"
#include "tap.h"

static void test_strerror(void)
{
        /* Every code of the enum, so a new code without a description fails here. */
        for (int code = RELAY_OK; code >= RELAY_ESTOPPED; code--)
                ok(strcmp(relay_strerror(code), "unknown return code") != 0, "code %d: \"%s\"",
                   code, relay_strerror(code));
        is_str(relay_strerror(RELAY_ESTOPPED - 1), "unknown return code", "below the last code");
        is_str(relay_strerror(1), "unknown return code", "positive");
        is_str(relay_strerror(RELAY_EIO), "connection lost or refused", "RELAY_EIO");
}

static void test_hex_and_dup(void)
{
        const char *digits = "0123456789abcdefABCDEF";
        int bad = 0;
        char *d;

        for (int i = 0; digits[i] != '\0'; i++)
                if (relay_hexval(digits[i]) != (i < 16 ? i : i - 6))
                        bad++;
        is_int(bad, 0, "every hex digit has its value");
        ok(relay_hexval('g') == -1 && relay_hexval('/') == -1 && relay_hexval(':') == -1 &&
               relay_hexval('@') == -1 && relay_hexval('`') == -1 && relay_hexval('\0') == -1,
           "neighbours of the digit ranges are -1");

        d = relay_dupn("abcdef", 3);
        is_str(d, "abc", "relay_dupn copies n bytes and terminates");
        free(d);
        d = relay_dupn(NULL, 0);
        is_str(d, "", "relay_dupn(NULL, 0) is \"\"");
        free(d);
}

/* The items of list joined with '|', each in brackets. */
static void items(const char *list, char *buf, size_t len)
{
        const char *p = list, *item;
        size_t n, used = 0;

        buf[0] = '\0';
        while (relay_list_next(&p, &item, &n) && used < len)
                used += (size_t)snprintf(buf + used, len - used, "[%.*s]", (int)n, item);
}

static void test_list(void)
{
        char buf[256];

        items("a,b", buf, sizeof(buf));
        is_str(buf, "[a][b]", "two items");
        items(" a ,\tb\t", buf, sizeof(buf));
        is_str(buf, "[a][b]", "blanks around items trimmed");
        items("a,,b,", buf, sizeof(buf));
        is_str(buf, "[a][][b][]", "empty items are reported, a trailing comma included");
        items("", buf, sizeof(buf));
        is_str(buf, "[]", "\"\" is one empty item");
        items("a b", buf, sizeof(buf));
        is_str(buf, "[a b]", "inner blanks kept");
}

static void test_strbuf(void)
{
        relay_strbuf_t b = {0};
        char *s = relay_strbuf_finish(&b);
        is_str(s, "", "a growable builder with nothing appended gives \"\"");
        free(s);

        b = (relay_strbuf_t){0};
        for (int i = 0; i < 100; i++)
                relay_strbuf_adds(&b, "abc");
        relay_strbuf_addc(&b, '!');
        relay_strbuf_addn(&b, "xyz", 2);
        s = relay_strbuf_finish(&b);
        ok(s && strlen(s) == 303 && strncmp(s, "abcabc", 6) == 0 &&
                   strcmp(s + 300, "!xy") == 0,
           "a growable builder grows past its first 64 bytes");
        free(s);

        char buf[6];
        relay_strbuf_fixed(&b, buf, sizeof(buf));
        is_str(buf, "", "a bounded builder empties the caller's buffer");
        relay_strbuf_adds(&b, "abc");
        relay_strbuf_addc(&b, 'd');
        ok(!b.failed, "5 bytes fit in 6");
        relay_strbuf_adds(&b, "ef");
        ok(b.failed, "past the end: failed");
        relay_strbuf_addc(&b, 'g');
        is_str(buf, "abcd", "what was built stays terminated, later appends ignored");
        relay_strbuf_fixed(&b, buf, 0);
        ok(b.failed, "a bounded builder of 0 bytes has failed already");
}

static void test_pairs(void)
{
        relay_pairs_t p = {0};
        ok(relay_pairs_get(&p, "a") == NULL, "no pairs: no value");
        for (int i = 0; i < 40; i++) {
                char k[16], v[16];
                int kl = snprintf(k, sizeof(k), "k%d", i % 20);
                int vl = snprintf(v, sizeof(v), "v%d", i);
                if (relay_pairs_add(&p, k, (size_t)kl, v, (size_t)vl))
                        break;
        }
        is_int((int)p.n, 40, "40 pairs added (the arrays grew past their first 16)");
        is_str(relay_pairs_get(&p, "k3"), "v23", "a key added twice: the last value");
        ok(relay_pairs_add(&p, "xyz", 1, "uvw", 2) == 0 && strcmp(p.k[40], "x") == 0 &&
                   strcmp(p.v[40], "uv") == 0,
           "add copies kl and vl bytes");
        ok(relay_pairs_set(&p, "x", "new") == 0 && p.n == 41, "set of a key it has: no new pair");
        is_str(relay_pairs_get(&p, "x"), "new", "set replaces the value");
        ok(relay_pairs_set(&p, "y", "1") == 0 && p.n == 42, "set of a new key appends it");
        relay_pairs_free(&p);
        ok(p.n == 0 && p.k == NULL && p.v == NULL, "free leaves {0}");
}

static void test_now(void)
{
        /* 2020-01-01 00:00:00 UTC in the PostgreSQL epoch. */
        const int64_t y2020 = (INT64_C(1577836800) - RELAY_PG_EPOCH_OFFSET_S) * 1000000;
        const int64_t y2100 = (INT64_C(4102444800) - RELAY_PG_EPOCH_OFFSET_S) * 1000000;
        int64_t a = relay_pg_now_us();
        time_t t = time(NULL);
        int64_t b = relay_pg_now_us();
        int64_t unix_s = a / 1000000 + RELAY_PG_EPOCH_OFFSET_S;

        ok(a > y2020 && a < y2100, "now (%lld) is between 2020 and 2100 in the PG epoch",
           (long long)a);
        ok(b >= a, "now does not go backwards between two calls");
        ok(unix_s >= (int64_t)t - 2 && unix_s <= (int64_t)t + 2, "now agrees with time() to 2 s");
}

static void test_pg_to_unix_ms(void)
{
        is_int(relay_pg_to_unix_ms(0), INT64_C(946684800000), "2000-01-01 in Unix ms");
        /* 2026-12-02 10:00:00.123456 UTC: the microseconds are dropped. */
        is_int(relay_pg_to_unix_ms(INT64_C(849520800123456)), INT64_C(1796205600123),
               "2026-12-02T10:00:00.123456Z -> ...123 ms");
        /* Before 2000 the milliseconds round down too, not toward 2000. */
        is_int(relay_pg_to_unix_ms(-1), INT64_C(946684799999), "1999-12-31T23:59:59.999999Z -> ...999 ms");
        is_int(relay_pg_to_unix_ms(-1000), INT64_C(946684799999), "exactly 1 ms before 2000");
        is_int(relay_pg_to_unix_ms(-1001), INT64_C(946684799998), "1.001 ms before 2000");
}

static volatile sig_atomic_t got_signal;

static void on_stop(int sig)
{
        got_signal = sig;
}

/* What the relay, tail and the inbox rely on: the handler for both stop
 * signals, no SA_RESTART (a poll() must wake up), SIGPIPE ignored only
 * when asked. (Its failure branch needs sigaction() to fail, which it
 * does not for these signals.) */
static void test_stop_signals(void)
{
        char err[RELAY_ERRBUF] = "";
        struct sigaction sa;
        signal(SIGPIPE, SIG_DFL);
        is_int(relay_stop_signals(on_stop, false, err, sizeof(err)), 0, "installed: %s", err);
        for (int i = 0; i < 2; i++) {
                int sig = i ? SIGINT : SIGTERM;
                sigaction(sig, NULL, &sa);
                ok(sa.sa_handler == on_stop && !(sa.sa_flags & SA_RESTART),
                   "signal %d: the handler, without SA_RESTART", sig);
        }
        sigaction(SIGPIPE, NULL, &sa);
        ok(sa.sa_handler == SIG_DFL, "SIGPIPE left alone unless asked");
        is_int(relay_stop_signals(on_stop, true, err, sizeof(err)), 0, "installed again: %s", err);
        sigaction(SIGPIPE, NULL, &sa);
        ok(sa.sa_handler == SIG_IGN, "SIGPIPE ignored when asked");
        raise(SIGTERM);
        is_int(got_signal, SIGTERM, "a SIGTERM reaches the handler");
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
}

/* SIGHUP is counted, once per signal, with SA_RESTART, and does not end
 * the process (its default action would end this test). */
static void test_hangup_signal(void)
{
        char err[RELAY_ERRBUF] = "";
        const volatile sig_atomic_t *received = NULL;
        struct sigaction sa;
        is_int(relay_hangup_signal(&received, err, sizeof(err)), 0, "installed: %s", err);
        sigaction(SIGHUP, NULL, &sa);
        ok(sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN && (sa.sa_flags & SA_RESTART),
           "SIGHUP: a handler, with SA_RESTART");
        ok(received != NULL && *received == 0, "nothing counted yet");
        raise(SIGHUP);
        raise(SIGHUP);
        is_int(received ? *received : -1, 2, "two SIGHUPs counted, and the process goes on");
        signal(SIGHUP, SIG_DFL);
}

int main(void)
{
        test_pairs();
        test_strerror();
        test_hex_and_dup();
        test_list();
        test_strbuf();
        test_now();
        test_pg_to_unix_ms();
        test_stop_signals();
        test_hangup_signal();
        return done_testing();
}
