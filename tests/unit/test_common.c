/*
 * test_common.c - the helpers every module shares: return-code
 * descriptions, hex digits, byte copies and comma-separated lists.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/common.h"
#include "tap.h"

static void test_strerror(void)
{
        /* Every code of the enum, so a new code without a description fails here. */
        for (int code = RELAY_OK; code >= RELAY_EFENCED; code--)
                ok(strcmp(relay_strerror(code), "unknown return code") != 0, "code %d: \"%s\"",
                   code, relay_strerror(code));
        is_str(relay_strerror(RELAY_EFENCED - 1), "unknown return code", "below the last code");
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

int main(void)
{
        test_pairs();
        test_strerror();
        test_hex_and_dup();
        test_list();
        test_strbuf();
        return done_testing();
}
