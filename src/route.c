/*
 * route.c - Debezium's route.topic.regex / route.topic.replacement (Kafka
 * Connect's RegexRouter with Java's regex and replacement syntax) on POSIX
 * regcomp(3). Owns the translated pattern, the Java-to-POSIX group numbers
 * and the parsed replacement. Why POSIX and not PCRE2: the common patterns
 * (named groups, classes, quantifiers, alternation) translate one to one,
 * the rest is refused by name at start, and the relay keeps its three
 * libraries.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/route.h"

#include <ctype.h>
#include <regex.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_GROUPS 64
#define MAX_PIECES 64

typedef struct {
        const char *text; /* a literal (into the replacement copy), or NULL for a group */
        size_t len;
        int group; /* POSIX group number when text is NULL */
} piece_t;

struct relay_route {
        regex_t re;
        bool compiled;
        size_t nsub;
        char *rep; /* the replacement with escapes resolved, pieces point into it */
        piece_t pieces[MAX_PIECES];
        size_t npieces;
};

typedef struct {
        relay_strbuf_t out;           /* the POSIX pattern, bounded by the caller's buffer */
        int java_groups;              /* capturing groups so far, Java's numbering */
        int posix_of[MAX_GROUPS + 1]; /* Java group -> POSIX group (0 -> 1: the wrapper) */
        char names[MAX_GROUPS + 1][33];
        int posix_groups;             /* groups opened so far, the wrapper included */
        bool icase;
} tr_t;

static void put(tr_t *t, const char *s, size_t n)
{
        relay_strbuf_addn(&t->out, s, n);
}

static void puts_(tr_t *t, const char *s)
{
        relay_strbuf_adds(&t->out, s);
}

/* A literal character outside a bracket expression. */
static void literal(tr_t *t, char c)
{
        if (strchr(".[]\\()*+?{}|^$", c)) {
                char b[2] = {'\\', c};
                put(t, b, 2);
        } else {
                put(t, &c, 1);
        }
}

static int refuse(char *err, size_t errlen, const char *what)
{
        relay_err_set(err, errlen,
                      "%s is not supported by the relay's regular expressions (POSIX); rewrite "
                      "the pattern without it (README, Coming from Debezium)",
                      what);
        return RELAY_EINVAL;
}

/* \t \n \r \f as their byte; 0 for anything else. */
static char control_escape(char c)
{
        switch (c) {
        case 't':
                return '\t';
        case 'n':
                return '\n';
        case 'r':
                return '\r';
        case 'f':
                return '\f';
        default:
                return 0;
        }
}

static int escape_refusal(char c, char *err, size_t errlen)
{
        char what[80];
        if (c >= '1' && c <= '9')
                return refuse(err, errlen, "a back reference (\\1 to \\9)");
        switch (c) {
        case 'b':
        case 'B':
                return refuse(err, errlen, "\\b and \\B (word boundaries)");
        case 'A':
        case 'z':
        case 'Z':
        case 'G':
                return refuse(err, errlen, "\\A, \\z, \\Z and \\G (use ^ and $)");
        case 'p':
        case 'P':
                return refuse(err, errlen, "\\p{...} and \\P{...} (character properties)");
        case 'k':
                return refuse(err, errlen, "\\k<name> (a named back reference)");
        default:
                snprintf(what, sizeof(what), "the escape \\%c", c);
                return refuse(err, errlen, what);
        }
}

/* A bracket expression, p after its '['; *end after its ']'. */
static int bracket(tr_t *t, const char *p, const char **end, char *err, size_t errlen)
{
        bool neg = false, rbracket = false, dash = false, caret = false, lbracket = false;
        char body[512];
        size_t bn = 0;
        if (*p == '^') {
                neg = true;
                p++;
        }
        bool first = true;
        for (;;) {
                char c = *p;
                char lit = 0;
                if (c == '\0')
                        return refuse(err, errlen, "an unclosed [ (character class)");
                if (c == ']' && !first) {
                        p++;
                        break;
                }
                first = false;
                if (c == '[')
                        return refuse(err, errlen, "a nested character class or union ([a[b]])");
                if (c == '&' && p[1] == '&')
                        return refuse(err, errlen, "a character class intersection (&&)");
                if (c == '\\') {
                        char e = p[1];
                        p += 2;
                        const char *set = e == 'd' ? "0-9" : e == 'w' ? "A-Za-z0-9_"
                                                           : e == 's' ? "[:space:]" : NULL;
                        if (set) {
                                size_t sl = strlen(set);
                                if (bn + sl >= sizeof(body))
                                        return refuse(err, errlen, "a character class this long");
                                memcpy(body + bn, set, sl);
                                bn += sl;
                                continue;
                        }
                        if (e == 'D' || e == 'W' || e == 'S')
                                return refuse(err, errlen,
                                              "\\D, \\W or \\S inside a character class");
                        if (e == '\0')
                                return refuse(err, errlen, "a trailing \\");
                        lit = control_escape(e);
                        if (!lit && isalnum((unsigned char)e))
                                return escape_refusal(e, err, errlen);
                        if (!lit)
                                lit = e;
                } else {
                        lit = c;
                        p++;
                }
                /* A range a-z between two plain characters. */
                if (*p == '-' && p[1] && p[1] != ']') {
                        char hi = p[1];
                        const char *after = p + 2;
                        if (hi == '\\') {
                                char e = p[2];
                                hi = control_escape(e);
                                if (!hi && e && !isalnum((unsigned char)e))
                                        hi = e;
                                if (!hi)
                                        return refuse(err, errlen,
                                                      "a range ending in a class escape");
                                after = p + 3;
                        }
                        if (strchr("]^-[", lit) || strchr("]^-[", hi))
                                return refuse(err, errlen, "a range starting or ending with ] ^ - or [");
                        if (bn + 3 >= sizeof(body))
                                return refuse(err, errlen, "a character class this long");
                        body[bn++] = lit;
                        body[bn++] = '-';
                        body[bn++] = hi;
                        p = after;
                        continue;
                }
                if (lit == ']')
                        rbracket = true;
                else if (lit == '-')
                        dash = true;
                else if (lit == '^')
                        caret = true;
                else if (lit == '[')
                        lbracket = true;
                else if (bn + 1 < sizeof(body))
                        body[bn++] = lit;
                else
                        return refuse(err, errlen, "a character class this long");
        }
        *end = p;
        if (!neg && !rbracket && !dash && !lbracket && bn == 0 && caret) {
                puts_(t, "\\^");
                return 0;
        }
        /* POSIX: ']' first, '-' last, '^' anywhere but first, '[' before the end. */
        puts_(t, neg ? "[^" : "[");
        if (rbracket)
                puts_(t, "]");
        put(t, body, bn);
        if (lbracket)
                puts_(t, "[");
        if (caret && (rbracket || bn || lbracket))
                puts_(t, "^");
        if (dash)
                puts_(t, "-");
        if (caret && !(rbracket || bn || lbracket))
                puts_(t, "^"); /* after the '-': "[-^]" */
        puts_(t, "]");
        return 0;
}

/* After a quantifier: Java's lazy (?) and possessive (+) forms. */
static int quantifier_suffix(const char *p, char *err, size_t errlen)
{
        if (*p == '?')
                return refuse(err, errlen, "a lazy quantifier (*?, +?, ??, {n,m}?)");
        if (*p == '+')
                return refuse(err, errlen, "a possessive quantifier (*+, ++, ?+, {n,m}+)");
        return 0;
}

/*
 * A quantifier right after another: Java refuses a** and a?* and ignores
 * the second of a{2}{3} (which matches "aa"), where POSIX repeats the first
 * ((a{2}){3}, six). Refused for all, with the grouping that says which.
 */
static int stacked_quantifier(char *err, size_t errlen)
{
        relay_err_set(err, errlen,
                      "a quantifier right after another (a{2}{3}, a**) is not supported: Java "
                      "refuses some and ignores the second of a{n}{m}, where POSIX would repeat "
                      "the first; group what repeats, as in (a{2}){3}, or drop one");
        return RELAY_EINVAL;
}

static int translate(tr_t *t, const char *re, char *err, size_t errlen)
{
        const char *p = re;
        int rc;
        if (strncmp(p, "(?i)", 4) == 0) {
                t->icase = true;
                p += 4;
        }
        /* matches(): the whole value, as group 0 of Java = POSIX group 1. */
        puts_(t, "^(");
        t->posix_groups = 1;
        t->posix_of[0] = 1;
        bool quant = false; /* the token before was a quantifier */
        while (*p) {
                char c = *p;
                bool after_quant = quant;
                quant = false;
                switch (c) {
                case '\\': {
                        char e = p[1];
                        if (e == '\0')
                                return refuse(err, errlen, "a trailing \\");
                        p += 2;
                        if (e == 'Q') {
                                const char *q = strstr(p, "\\E");
                                const char *stop = q ? q : p + strlen(p);
                                for (; p < stop; p++)
                                        literal(t, *p);
                                if (q)
                                        p += 2;
                                continue;
                        }
                        const char *cls = e == 'd'   ? "[0-9]"
                                          : e == 'D' ? "[^0-9]"
                                          : e == 'w' ? "[A-Za-z0-9_]"
                                          : e == 'W' ? "[^A-Za-z0-9_]"
                                          : e == 's' ? "[[:space:]]"
                                          : e == 'S' ? "[^[:space:]]"
                                                     : NULL;
                        if (cls) {
                                puts_(t, cls);
                                continue;
                        }
                        char ctl = control_escape(e);
                        if (ctl) {
                                put(t, &ctl, 1);
                                continue;
                        }
                        if (isalnum((unsigned char)e))
                                return escape_refusal(e, err, errlen);
                        literal(t, e);
                        continue;
                }
                case '[':
                        if ((rc = bracket(t, p + 1, &p, err, errlen)))
                                return rc;
                        continue;
                case '(':
                        if (t->posix_groups >= MAX_GROUPS)
                                return refuse(err, errlen, "more than 63 groups");
                        if (p[1] != '?') {
                                t->java_groups++;
                                t->posix_of[t->java_groups] = ++t->posix_groups;
                                puts_(t, "(");
                                p++;
                                continue;
                        }
                        if (p[2] == ':') {
                                t->posix_groups++; /* POSIX has none: a group Java does not count */
                                puts_(t, "(");
                                p += 3;
                                continue;
                        }
                        if (p[2] == '<' && isalpha((unsigned char)p[3])) {
                                const char *n = p + 3;
                                size_t nl = 0;
                                while (isalnum((unsigned char)n[nl]))
                                        nl++;
                                if (n[nl] != '>')
                                        return refuse(err, errlen, "a group name other than letters and digits");
                                if (nl >= sizeof(t->names[0]))
                                        return refuse(err, errlen, "a group name over 32 characters");
                                for (int g = 1; g <= t->java_groups; g++)
                                        if (strlen(t->names[g]) == nl && strncmp(t->names[g], n, nl) == 0) {
                                                relay_err_set(err, errlen,
                                                              "the group name \"%.*s\" appears twice "
                                                              "(Java refuses that too)",
                                                              (int)nl, n);
                                                return RELAY_EINVAL;
                                        }
                                t->java_groups++;
                                t->posix_of[t->java_groups] = ++t->posix_groups;
                                memcpy(t->names[t->java_groups], n, nl);
                                t->names[t->java_groups][nl] = '\0';
                                puts_(t, "(");
                                p = n + nl + 1;
                                continue;
                        }
                        if (p[2] == '=' || p[2] == '!' || (p[2] == '<' && (p[3] == '=' || p[3] == '!')))
                                return refuse(err, errlen, "lookahead and lookbehind ((?=, (?!, (?<=, (?<!)");
                        if (p[2] == '>')
                                return refuse(err, errlen, "an atomic group ((?>...))");
                        return refuse(err, errlen,
                                      "an inline flag or group option ((?i) is accepted only at "
                                      "the start)");
                case ')':
                        puts_(t, ")");
                        p++;
                        continue;
                case '*':
                case '+':
                case '?':
                        if (after_quant)
                                return stacked_quantifier(err, errlen);
                        quant = true;
                        put(t, &c, 1);
                        p++;
                        if ((rc = quantifier_suffix(p, err, errlen)))
                                return rc;
                        continue;
                case '{': {
                        const char *q = p + 1;
                        size_t d1 = 0, d2 = 0;
                        while (isdigit((unsigned char)q[d1]))
                                d1++;
                        q += d1;
                        if (*q == ',') {
                                q++;
                                while (isdigit((unsigned char)q[d2]))
                                        d2++;
                                q += d2;
                        }
                        if (d1 == 0 || *q != '}')
                                return refuse(err, errlen, "a { that is not a quantifier {n}, {n,} or {n,m} (escape it as \\{)");
                        if (after_quant)
                                return stacked_quantifier(err, errlen);
                        quant = true;
                        put(t, p, (size_t)(q + 1 - p));
                        p = q + 1;
                        if ((rc = quantifier_suffix(p, err, errlen)))
                                return rc;
                        continue;
                }
                default:
                        /* Java's '.' takes no line terminator (without (?s));
                         * POSIX's takes any byte. \u0085, \u2028 and \u2029
                         * are several bytes here, where '.' is one (route.h). */
                        if (c == '.')
                                puts_(t, "[^\n\r]");
                        else if (c == '^' || c == '$' || c == '|')
                                put(t, &c, 1);
                        else
                                literal(t, c);
                        p++;
                        continue;
                }
        }
        puts_(t, ")$");
        if (t->out.failed)
                return refuse(err, errlen, "a pattern this long");
        return 0;
}

int relay_route_translate(const char *regex, char *out, size_t outlen, char *err, size_t errlen)
{
        tr_t t;
        memset(&t, 0, sizeof(t));
        relay_strbuf_fixed(&t.out, out, outlen);
        return translate(&t, regex, err, errlen);
}

static int rep_error(char *err, size_t errlen, const char *rep, const char *why)
{
        relay_err_set(err, errlen, "route.topic.replacement \"%s\": %s", rep, why);
        return RELAY_EINVAL;
}

/* Java's Matcher.appendReplacement() grammar, resolved against the groups. */
static int parse_replacement(relay_route_t *r, const tr_t *t, const char *rep, char *err,
                             size_t errlen)
{
        char *o = r->rep; /* as long as rep at most */
        char *lit = o;
        const char *p = rep;
        char why[160];
#define FLUSH()                                                                                    \
        do {                                                                                       \
                if (o > lit) {                                                                     \
                        if (r->npieces >= MAX_PIECES)                                              \
                                return rep_error(err, errlen, rep, "too many pieces");             \
                        r->pieces[r->npieces++] = (piece_t){lit, (size_t)(o - lit), 0};            \
                }                                                                                  \
                lit = o;                                                                           \
        } while (0)
        while (*p) {
                if (*p == '\\') {
                        if (!p[1])
                                return rep_error(err, errlen, rep,
                                                 "character to be escaped is missing (a trailing \\)");
                        *o++ = p[1];
                        p += 2;
                        continue;
                }
                if (*p != '$') {
                        *o++ = *p++;
                        continue;
                }
                int g;
                p++;
                if (*p == '{') {
                        const char *n = ++p;
                        size_t nl = 0;
                        if (!isalpha((unsigned char)*n))
                                return rep_error(err, errlen, rep,
                                                 "a named group reference must start with a letter");
                        while (isalnum((unsigned char)n[nl]))
                                nl++;
                        if (n[nl] != '}')
                                return rep_error(err, errlen, rep,
                                                 "named capturing group is missing trailing '}'");
                        g = -1;
                        for (int i = 1; i <= t->java_groups; i++)
                                if (strlen(t->names[i]) == nl && strncmp(t->names[i], n, nl) == 0)
                                        g = i;
                        if (g < 0) {
                                snprintf(why, sizeof(why),
                                         "route.topic.regex has no group named \"%.*s\"", (int)nl, n);
                                return rep_error(err, errlen, rep, why);
                        }
                        p = n + nl + 1;
                } else if (isdigit((unsigned char)*p)) {
                        g = *p++ - '0';
                        if (g > t->java_groups) {
                                snprintf(why, sizeof(why),
                                         "route.topic.regex has no group %d (it has %d)", g,
                                         t->java_groups);
                                return rep_error(err, errlen, rep, why);
                        }
                        /* Java takes more digits while the number stays a group. */
                        while (isdigit((unsigned char)*p) && g * 10 + (*p - '0') <= t->java_groups)
                                g = g * 10 + (*p++ - '0');
                } else {
                        return rep_error(err, errlen, rep,
                                         "illegal group reference: $ must be followed by a group "
                                         "number or {name} (write \\$ for a dollar sign)");
                }
                FLUSH();
                if (r->npieces >= MAX_PIECES)
                        return rep_error(err, errlen, rep, "too many pieces");
                r->pieces[r->npieces++] = (piece_t){NULL, 0, t->posix_of[g]};
        }
        FLUSH();
#undef FLUSH
        return 0;
}

int relay_route_new(relay_route_t **out, const char *regex, const char *replacement, char *err,
                    size_t errlen)
{
        char pat[2048];
        tr_t t;
        relay_route_t *r = calloc(1, sizeof(*r));
        *out = NULL;
        if (!r || !(r->rep = malloc(strlen(replacement) + 1))) {
                free(r);
                return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
        }
        memset(&t, 0, sizeof(t));
        relay_strbuf_fixed(&t.out, pat, sizeof(pat));
        int rc = translate(&t, regex, err, errlen);
        if (rc == 0)
                rc = parse_replacement(r, &t, replacement, err, errlen);
        if (rc == 0) {
                int e = regcomp(&r->re, pat, REG_EXTENDED | (t.icase ? REG_ICASE : 0));
                if (e) {
                        char m[256];
                        regerror(e, &r->re, m, sizeof(m));
                        relay_err_set(err, errlen, "route.topic.regex \"%s\" (as POSIX \"%s\"): %s",
                                      regex, pat, m);
                        rc = RELAY_EINVAL;
                } else {
                        r->compiled = true;
                        r->nsub = r->re.re_nsub;
                }
        }
        if (rc) {
                relay_route_free(r);
                return rc;
        }
        *out = r;
        return 0;
}

void relay_route_free(relay_route_t *r)
{
        if (!r)
                return;
        if (r->compiled)
                regfree(&r->re);
        free(r->rep);
        free(r);
}

/* Append l bytes at out + *n, as many as fit with the NUL: RELAY_EINVAL
 * when they did not all fit, and what fits is kept for the caller's
 * message, which quotes the refused topic. */
static int put_cut(char *out, size_t outlen, size_t *n, const char *src, size_t l)
{
        size_t room = outlen > *n ? outlen - *n - 1 : 0;
        memcpy(out + *n, src, l < room ? l : room);
        *n += l < room ? l : room;
        return l > room ? RELAY_EINVAL : 0;
}

int relay_route_apply(const relay_route_t *r, const char *value, size_t len, char *out,
                      size_t outlen, size_t *outn)
{
        regmatch_t m[MAX_GROUPS + 1];
        char stack[512], *s = stack;
        size_t n = 0;
        if (len + 1 > sizeof(stack) && !(s = malloc(len + 1)))
                return RELAY_ENOMEM;
        memcpy(s, value, len);
        s[len] = '\0';
        bool matched = regexec(&r->re, s, r->nsub + 1, m, 0) == 0 && m[0].rm_so == 0 &&
                       (size_t)m[0].rm_eo == len;
        int rc = 0;
        if (!matched) {
                /* RegexRouter leaves a record it does not match as it is. */
                rc = put_cut(out, outlen, &n, s, len);
                goto out;
        }
        for (size_t i = 0; i < r->npieces && rc == 0; i++) {
                const char *src = r->pieces[i].text;
                size_t l = r->pieces[i].len;
                if (!src) {
                        const regmatch_t *g = &m[r->pieces[i].group];
                        if (g->rm_so < 0) /* the group took no part: nothing, as Java */
                                continue;
                        src = s + g->rm_so;
                        l = (size_t)(g->rm_eo - g->rm_so);
                }
                rc = put_cut(out, outlen, &n, src, l);
        }
out:
        if (outlen > 0)
                out[n] = '\0';
        if (s != stack)
                free(s);
        *outn = n;
        return rc;
}
