/*
 * conffile.c - the --config file format shared by outbox-relay and
 * outbox-inbox (grammar in conffile.h): reading lines, quoting and
 * comments, and where each value came from; what a key means is the
 * caller's.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/conffile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

static char *skip_blank(char *s)
{
        while (*s == ' ' || *s == '\t')
                s++;
        return s;
}

static void trim_end(char *s)
{
        size_t n = strlen(s);
        while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
                s[--n] = '\0';
}

/*
 * Decode a double-quoted value in place: s points at the opening quote.
 * Returns 0 and *end just past the closing quote, or an error message.
 */
static const char *unquote(char *s, char **end)
{
        char *r = s + 1, *w = s;

        for (;;) {
                if (*r == '\0')
                        return "has no closing double quote";
                if (*r == '"')
                        break;
                if (*r == '\\') {
                        r++;
                        switch (*r) {
                        case '"':
                        case '\\':
                                *w++ = *r++;
                                continue;
                        case 'n':
                                *w++ = '\n';
                                r++;
                                continue;
                        case 't':
                                *w++ = '\t';
                                r++;
                                continue;
                        case 'r':
                                *w++ = '\r';
                                r++;
                                continue;
                        default:
                                return "has an invalid escape; inside double quotes use \\\", "
                                       "\\\\, \\n, \\t or \\r";
                        }
                }
                *w++ = *r++;
        }
        *w = '\0';
        *end = r + 1;
        return NULL;
}

/* The keys a file has set so far, with their lines. */
typedef struct {
        struct {
                char *key;
                unsigned line;
        } *v;
        size_t n, cap;
} seen_t;

static void seen_free(seen_t *s)
{
        for (size_t i = 0; i < s->n; i++)
                free(s->v[i].key);
        free(s->v);
}

/*
 * Note that key was set on line; refuse it when an earlier line of the file
 * set it: that line would do nothing, in silence (a key uncommented in the
 * example file and appended again at its end). The layers above the file
 * (environment, --set) still override it.
 */
static int seen_add(seen_t *s, const char *key, unsigned line, const char *origin, char *err,
                    size_t errlen)
{
        char kb[RELAY_ABBREV_BUF];

        for (size_t i = 0; i < s->n; i++)
                if (strcmp(s->v[i].key, key) == 0)
                        return relay_err(err, errlen, RELAY_EINVAL,
                                         "configuration key \"%s\" (at %s) is already set on "
                                         "line %u of this file; remove one of the two lines",
                                         relay_abbrev(key, kb, sizeof(kb)), origin, s->v[i].line);
        if (s->n == s->cap) {
                size_t cap = s->cap ? s->cap * 2 : 32;
                void *v = realloc(s->v, cap * sizeof(*s->v));
                if (v == NULL)
                        return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
                s->v = v;
                s->cap = cap;
        }
        if ((s->v[s->n].key = strdup(key)) == NULL)
                return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
        s->v[s->n++].line = line;
        return 0;
}

static int load_line(relay_conffile_set_fn *set, void *ctx, seen_t *seen, unsigned lineno,
                     char *line, const char *origin, char *err, size_t errlen)
{
        int rc;
        char *p = skip_blank(line), *eq, *val;
        char kb[RELAY_ABBREV_BUF];
        const char *problem;

        if (*p == '\0' || *p == '#')
                return 0;
        eq = strchr(p, '=');
        if (eq == NULL) {
                relay_err_set(err, errlen,
                              "syntax error (at %s): expected \"key = value\" or a \"#\" comment",
                              origin);
                return RELAY_EINVAL;
        }
        *eq = '\0';
        trim_end(p);
        if (*p == '\0') {
                relay_err_set(err, errlen, "syntax error (at %s): missing key before \"=\"",
                              origin);
                return RELAY_EINVAL;
        }
        val = skip_blank(eq + 1);
        if (*val == '"') {
                char *rest;
                problem = unquote(val, &rest);
                if (problem != NULL) {
                        relay_err_set(err, errlen, "syntax error (at %s): the value of \"%s\" %s",
                                      origin, relay_abbrev(p, kb, sizeof(kb)), problem);
                        return RELAY_EINVAL;
                }
                rest = skip_blank(rest);
                if (*rest != '\0' && *rest != '#') {
                        relay_err_set(err, errlen,
                                      "syntax error (at %s): unexpected text after the closing "
                                      "quote of the value of \"%s\"",
                                      origin, relay_abbrev(p, kb, sizeof(kb)));
                        return RELAY_EINVAL;
                }
        } else {
                /* A '#' after a blank starts a comment; "a#b" stays a value (passwords). */
                for (char *q = val; *q != '\0'; q++) {
                        if (*q == '#' && (q == val || q[-1] == ' ' || q[-1] == '\t')) {
                                *q = '\0';
                                break;
                        }
                }
                trim_end(val);
        }
        if ((rc = set(ctx, p, val, origin, err, errlen)) != 0)
                return rc;
        return seen_add(seen, p, lineno, origin, err, errlen);
}

int relay_conffile_load(const char *path, relay_conffile_set_fn *set, void *ctx, char *err,
                        size_t errlen)
{
        FILE *f = fopen(path, "r");
        char *line = NULL, *origin;
        seen_t seen = {0};
        size_t cap = 0, originlen = strlen(path) + 16;
        unsigned lineno = 0;
        ssize_t n;
        int rc = 0;

        if (f == NULL) {
                relay_err_set(err, errlen, "could not open configuration file \"%s\": %s", path,
                              strerror(errno));
                return RELAY_EINVAL;
        }
        if ((origin = malloc(originlen)) == NULL) {
                fclose(f);
                return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
        }
        errno = 0;
        while ((n = getline(&line, &cap, f)) >= 0) {
                char *text = line;
                lineno++;
                snprintf(origin, originlen, "%s:%u", path, lineno);
                if ((size_t)n != strlen(line)) {
                        relay_err_set(err, errlen,
                                      "syntax error (at %s): the line contains a NUL byte; is "
                                      "\"%s\" a text file?",
                                      origin, path);
                        rc = RELAY_EINVAL;
                        break;
                }
                while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
                        line[--n] = '\0';
                /* A carriage return left inside is a file with classic Mac
                 * line ends (CR only), read as one line: its first value or
                 * comment would swallow the lines after it, in silence. A
                 * value gets a CR by the \r escape inside double quotes. */
                if (memchr(line, '\r', (size_t)n) != NULL) {
                        relay_err_set(err, errlen,
                                      "syntax error (at %s): a carriage return (CR) inside the "
                                      "line; does \"%s\" end its lines with CR alone? save it "
                                      "with LF (or CRLF) line ends; in a value, write \\r inside "
                                      "double quotes",
                                      origin, path);
                        rc = RELAY_EINVAL;
                        break;
                }
                /* Editors on some systems start UTF-8 files with a byte order mark. */
                if (lineno == 1 && strncmp(text, "\xef\xbb\xbf", 3) == 0)
                        text += 3;
                rc = load_line(set, ctx, &seen, lineno, text, origin, err, errlen);
                if (rc < 0)
                        break;
                errno = 0;
        }
        if (rc == 0 && ferror(f)) {
                relay_err_set(err, errlen, "could not read configuration file \"%s\": %s", path,
                              strerror(errno ? errno : EIO));
                rc = RELAY_EINVAL;
        }
        seen_free(&seen);
        free(origin);
        free(line);
        fclose(f);
        return rc;
}
