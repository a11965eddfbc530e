/*
 * test_route.c - route.topic.regex / route.topic.replacement as Kafka
 * Connect's RegexRouter applies them (whole-value match, Java replacement
 * syntax). Every expected topic below was produced by Java itself
 * (Pattern.compile(regex).matcher(value), matches() ? replaceFirst(rep) :
 * value, OpenJDK 17: tests/unit/fixtures/java/RegexRouterCases.java), and
 * the refusals name their construct.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <stdio.h>
#include <string.h>

#include "relay/route.h"

#include "tap.h"

static const struct {
        const char *regex, *rep, *value, *want;
} cases[] = {
        /* Debezium's default and the usual rewrites. */
        {"(?<routedByValue>.*)", "outbox.event.${routedByValue}", "order", "outbox.event.order"},
        {"(?<routedByValue>.*)", "$1.events", "Order", "Order.events"},
        {"(?<routedByValue>.*)", "$0", "x", "x"},
        {"(.*)Aggregate", "$1.events", "OrderAggregate", "Order.events"},
        {"(.*)Aggregate", "$1.events", "Customer", "Customer"}, /* no match: the value */
        {"(?<ctx>[a-z]+)\\.(?<agg>\\w+)", "${ctx}-events.${agg}", "sales.Order_1",
         "sales-events.Order_1"},
        {"(?:shop|store)_(\\d{2,3})", "t$1", "shop_042", "t042"},
        {"(?:shop|store)_(\\d{2,3})", "t$1", "shop_0424", "shop_0424"},
        {"(a)|(b)", "[$1][$2]", "b", "[][b]"},       /* a group that took no part: nothing */
        {"(x)", "$11", "x", "x1"},                   /* $1 then the digit 1: no group 11 */
        {"([^.]+)\\.v[0-9]+", "\\$$1", "orders.v2", "$orders"},
        {"(?i)ORDER(s?)", "order$1", "Orders", "orders"},
        {"[\\w-]+\\.(?<kind>[a-z]+)", "${kind}", "my-app.created", "created"},
        {"\\Q.*\\E(.+)", "$1", ".*abc", "abc"},
        {"[]a]+", "ok", "]a]", "ok"},
        {"[a-c^-]+", "ok", "^-ab", "ok"},
        {"a\\s+b", "ok", "a \t b", "ok"},
        /* Java's '.' stops at a line terminator: such a value is not matched. */
        {"(?<v>.*)", "fixed", "a\nb", "a\nb"},
        {".+", "ok", "a\rb", "a\rb"},
        {"[^x]+", "ok", "a\nb", "ok"}, /* a negated class takes it, as in Java */
        {"(.*)", "${routedByValue}", "x", NULL}, /* refused: no such group */
};

static const struct {
        const char *regex, *rep, *needle;
} refused[] = {
        {"(.*?)x", "$1", "lazy quantifier"},
        {"(.*+)x", "$1", "possessive quantifier"},
        {"(?=a)(.*)", "$1", "lookahead"},
        {"(?<!a)(.*)", "$1", "lookahead and lookbehind"},
        {"(a)\\1", "$1", "back reference"},
        {"\\bword", "x", "word boundaries"},
        {"\\p{Lu}.*", "x", "character properties"},
        {"a(?i)b", "x", "inline flag"},
        {"[a[b]]", "x", "nested character class"},
        {"(.*)", "$2", "no group 2"},
        {"(.*)", "${nope}", "no group named \"nope\""},
        {"(.*)", "a$", "illegal group reference"},
        {"(.*)", "a\\", "trailing"},
        {"a{x}", "x", "not a quantifier"},
        /* A quantifier after a quantifier: Java ignores the second of
         * a{2}{3} (it matches "aa", routed to y) and [ab]+{2} (it matches
         * "a"), where POSIX repeats the first (no match: the topic would be
         * the value); Java refuses a** and a?* (RegexRouterCases.java). */
        {"a{2}{3}", "y", "quantifier right after another"},
        {"(a){2}{3}", "$1", "quantifier right after another"},
        {"a**", "y", "quantifier right after another"},
        {"a?*", "y", "quantifier right after another"},
        {"a{1,2}+{2}", "y", "possessive"},
        {"[ab]+{2}", "y", "quantifier right after another"},
};

int main(void)
{
        char err[RELAY_ERRBUF], out[256], pat[512];
        size_t n;

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                relay_route_t *r = NULL;
                int rc = relay_route_new(&r, cases[i].regex, cases[i].rep, err, sizeof(err));
                if (!cases[i].want) {
                        ok(rc == RELAY_EINVAL && r == NULL, "%s / %s refused: %s", cases[i].regex,
                           cases[i].rep, err);
                        continue;
                }
                if (!ok(rc == 0, "%s / %s compiles", cases[i].regex, cases[i].rep)) {
                        tap_diag("%s", err);
                        continue;
                }
                rc = relay_route_apply(r, cases[i].value, strlen(cases[i].value), out, sizeof(out), &n);
                is_int(rc, 0, "applies to \"%s\"", cases[i].value);
                is_str(out, cases[i].want, "%s / %s on \"%s\"", cases[i].regex, cases[i].rep,
                       cases[i].value);
                is_int((long long)n, (long long)strlen(cases[i].want), "length");
                relay_route_free(r);
        }
        for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
                relay_route_t *r = NULL;
                int rc = relay_route_new(&r, refused[i].regex, refused[i].rep, err, sizeof(err));
                ok(rc == RELAY_EINVAL && r == NULL && strstr(err, refused[i].needle),
                   "%s / %s refused naming \"%s\": %s", refused[i].regex, refused[i].rep,
                   refused[i].needle, err);
        }

        /* The translation itself, for the README's examples. */
        is_int(relay_route_translate("(?<a>\\d+)(?:x|y)[\\w.-]", pat, sizeof(pat), err, sizeof(err)), 0,
               "translates");
        is_str(pat, "^(([0-9]+)(x|y)[A-Za-z0-9_.-])$", "named and non-capturing groups, classes");

        /* Too long for the caller's buffer: an error, never a cut topic. */
        relay_route_t *r = NULL;
        if (relay_route_new(&r, "(.*)", "$1$1$1$1", err, sizeof(err)) != 0)
                tap_bail("%s", err);
        ok(relay_route_apply(r, "abcdef", 6, out, 10, &n) == RELAY_EINVAL, "overflow refused");
        /* What is refused is still shown: the caller quotes out in its message. */
        memset(out, 'Z', sizeof(out));
        ok(relay_route_apply(r, "abcdef", 6, out, 10, &n) == RELAY_EINVAL && n == 9 &&
               strcmp(out, "abcdefabc") == 0,
           "  out holds the expansion cut to fit, NUL-terminated: \"%.10s\" (%zu)", out, n);
        relay_route_free(r);
        if (relay_route_new(&r, "(.*)_v1", "$1", err, sizeof(err)) != 0)
                tap_bail("%s", err);
        memset(out, 'Z', sizeof(out));
        ok(relay_route_apply(r, "abcdefghijkl", 12, out, 10, &n) == RELAY_EINVAL && n == 9 &&
               strcmp(out, "abcdefghi") == 0,
           "  an unmatched value too long: out holds the value cut to fit: \"%.10s\" (%zu)", out, n);
        relay_route_free(r);
        relay_route_free(NULL);
        return done_testing();
}
