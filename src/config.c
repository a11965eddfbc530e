/*
 * config.c - the relay's configuration: one declarative table of keys (type,
 * default, bounds, description, flags; written in config_keys.dat, made C by
 * gen_config_keys.py at build time), and the layers applied on top of it
 * (file, environment, --set), each value remembering where it came from.
 *
 * The table is the single source of truth: parsing, validation, --help,
 * --print-config and the environment mapping are all driven from it, so a new
 * key is one entry of config_keys.dat. Values are checked when they are set, while the
 * origin is still known, so every error names the file line, variable or
 * --set that caused it; only rules spanning several keys wait for
 * relay_config_validate().
 *
 * kafka.* keys are not in the table: they are librdkafka properties, checked
 * against a scratch librdkafka configuration as they are set (so a typo fails
 * with its file line instead of at producer start) and kept in set order.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>

#include "relay/checkpoint.h"
#include "relay/conffile.h"
#include "relay/config.h"
#include "relay/kadmin.h"
#include "relay/event.h"
#include "relay/http.h"
#include "relay/names.h"

#define KAFKA_PREFIX "kafka."
#define ENV_PREFIX "OUTBOX_RELAY_"
#define ENV_KAFKA_PREFIX ENV_PREFIX "KAFKA_"
#define MASK "********"

typedef enum {
        KT_STRING,   /* free text */
        KT_CONNINFO, /* libpq connection string or URI, checked by libpq */
        KT_SLOT,     /* replication slot name: [a-z0-9_]{1,63}, as PostgreSQL requires */
        KT_IDENT,    /* lower-case unquoted SQL identifier: [a-z_][a-z0-9_$]*, <= 63 bytes */
        KT_TABLE,    /* [schema.]table[, ...], each part a KT_IDENT; stored as schema.table,... */
        KT_COLUMN,   /* column name: non-empty, <= 63 bytes, no control characters */
        KT_COLUMNS,  /* comma-separated KT_COLUMNs, possibly none; stored without blanks */
        KT_TEMPLATE, /* Kafka topic with ${column} placeholders */
        KT_TOPIC,    /* one literal Kafka topic name */
        KT_INT,      /* integer within [min, max] */
        KT_ENUM,     /* one of choices (case-insensitive, stored lower case) */
        KT_LISTEN,   /* off, or an address and port to listen on (http.h) */
} key_type_t;

#define KF_SECRET 0x1u /* value may hold a password: masked in output */

typedef struct {
        const char *name;
        key_type_t type;
        const char *def;
        const char *desc; /* one line, for --help and --print-config */
        unsigned flags;
        int64_t min, max;            /* KT_INT */
        const char *unit;            /* KT_INT, in "an integer number of <unit>" */
        const char *const *choices;  /* KT_ENUM, NULL-terminated */
} key_def_t;

/*
 * The choices arrays and keys[], alphabetical as --help and --print-config
 * list them: generated at build time from config_keys.dat, where the keys
 * are data (one entry each) and checked (order, fields, defaults).
 */
#include "config_keys.h"

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

/*
 * librdkafka property names that contain '_' and can be set as strings; an
 * OUTBOX_RELAY_KAFKA_* variable cannot tell '_' from '.', so these are mapped
 * by name. (The other '_' names are callbacks and pointers, not settable.)
 */
static const char *const kafka_underscore_props[] = {"enabled_events", "log_level"};

/* Parts of librdkafka property names whose values are credentials. */
static const char *const kafka_secret_parts[] = {"password", "secret", "key.pem",
                                                 "sasl.oauthbearer.config"};

typedef struct {
        char *name; /* without "kafka." */
        char *value;
        char *origin;
        char *prop;     /* the librdkafka property name is a spelling of (itself or its alias's) */
        unsigned layer; /* of the value (relay_config_t's layer when it was set) */
} kafka_prop_t;

/* How a value reaches the configuration: calls of one kind in a row are
 * one layer (each file and the environment are one of their own). */
typedef enum { ENTRY_NONE, ENTRY_SET, ENTRY_ARG, ENTRY_FILE, ENTRY_ENV } entry_t;

struct relay_config {
        char *value[NKEYS];
        char *origin[NKEYS];
        int64_t num[NKEYS]; /* KT_INT values; KT_ENUM: the position among the choices */
        kafka_prop_t *kafka;
        size_t nkafka, kafka_cap;
        rd_kafka_conf_t *kscratch; /* checks kafka.* as they are set; never used to connect */
        unsigned layer;            /* the layer being applied, counted from 0 */
        entry_t entry;             /* how its values came */
};

/* --- small helpers ----------------------------------------------------- */

/* The origin of a key no layer has set (what --print-config shows). */
#define ORIGIN_DEFAULT "default"

static const key_def_t *find_key(const char *name, size_t *idx)
{
        for (size_t i = 0; i < NKEYS; i++) {
                if (strcmp(keys[i].name, name) == 0) {
                        if (idx != NULL)
                                *idx = i;
                        return &keys[i];
                }
        }
        return NULL;
}

/* OUTBOX_RELAY_ + key upper-cased with '.' -> '_'. */
static void env_name(const char *key, char *buf, size_t len)
{
        size_t n = strlen(ENV_PREFIX);

        assert(len > n);
        memcpy(buf, ENV_PREFIX, n);
        for (; *key != '\0' && n + 1 < len; key++)
                buf[n++] = *key == '.' ? '_' : (char)toupper((unsigned char)*key);
        buf[n] = '\0';
}

/*
 * Optimal string alignment distance (Levenshtein plus adjacent
 * transpositions, the commonest typo: "slot.nmae"). Words longer than 64
 * bytes get a large distance rather than a heap allocation.
 */
static size_t edit_distance(const char *a, const char *b)
{
        enum { MAXW = 64 };
        size_t la = strlen(a), lb = strlen(b);
        size_t rows[3][MAXW + 1];
        size_t *prev2 = rows[0], *prev = rows[1], *cur = rows[2];

        if (la > MAXW || lb > MAXW)
                return SIZE_MAX;
        for (size_t j = 0; j <= lb; j++)
                prev[j] = j;
        for (size_t i = 1; i <= la; i++) {
                size_t *t;
                cur[0] = i;
                for (size_t j = 1; j <= lb; j++) {
                        size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
                        size_t d = prev[j] + 1;
                        if (cur[j - 1] + 1 < d)
                                d = cur[j - 1] + 1;
                        if (prev[j - 1] + cost < d)
                                d = prev[j - 1] + cost;
                        if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                            prev2[j - 2] + 1 < d)
                                d = prev2[j - 2] + 1;
                        cur[j] = d;
                }
                t = prev2;
                prev2 = prev;
                prev = cur;
                cur = t;
        }
        return prev[lb];
}

/* Is d close enough, for a word of this length, to be worth suggesting? */
static bool close_enough(size_t d, const char *word)
{
        return d != SIZE_MAX && (d <= 2 || d * 5 <= strlen(word));
}

/* The known key closest to word, or NULL when none is close. Borrowed. */
static const char *suggest_key(const char *word)
{
        static const char *const extra[] = {"kafka.bootstrap.servers"};
        const char *best = NULL;
        size_t bestd = SIZE_MAX, d;

        for (size_t i = 0; i < NKEYS; i++) {
                d = edit_distance(word, keys[i].name);
                if (d < bestd) {
                        bestd = d;
                        best = keys[i].name;
                }
        }
        for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++) {
                d = edit_distance(word, extra[i]);
                if (d < bestd) {
                        bestd = d;
                        best = extra[i];
                }
        }
        return best != NULL && close_enough(bestd, word) ? best : NULL;
}

/*
 * librdkafka has no list API for its properties, but its property table,
 * printed by rd_kafka_conf_properties_show() (the source of its
 * CONFIGURATION.md), has the name in the first column of every row and who
 * reads it in the second: C (consumers), P (producers) or * (both); an
 * alias's description says "Alias for `name`:". Calls fn with each row's name and that column, both trimmed,
 * and the property it is an alias for ("" when none). Only runs on an
 * error path or for a kafka.* key actually set.
 */
static void kafka_props_each(void (*fn)(void *ctx, const char *name, const char *cp,
                                        const char *alias_of),
                             void *ctx)
{
        char *text = NULL, *line, *save = NULL;
        size_t textlen = 0;
        FILE *f = open_memstream(&text, &textlen);

        if (f == NULL)
                return;
        rd_kafka_conf_properties_show(f);
        if (fclose(f) != 0 || text == NULL) {
                free(text);
                return;
        }
        for (line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
                static const char alias_for[] = "Alias for `";
                size_t n = strcspn(line, " |");
                const char *al = strstr(line, alias_for);
                char alias_of[128] = "", *cp;
                if (n == 0 || line[n] == '\0' || strchr("#-", line[0]) != NULL)
                        continue;
                if (al != NULL) {
                        al += strlen(alias_for);
                        snprintf(alias_of, sizeof(alias_of), "%.*s", (int)strcspn(al, "`"), al);
                }
                cp = strchr(line + n, '|');
                line[n] = '\0';
                if (strcmp(line, "Property") == 0)
                        continue;
                if (cp == NULL)
                        cp = "";
                else {
                        cp++;
                        cp += strspn(cp, " ");
                        cp[strcspn(cp, " |")] = '\0';
                }
                fn(ctx, line, cp, alias_of);
        }
        free(text);
}

typedef struct {
        const char *name;
        size_t bestd;
        char *buf;
        size_t len;
} suggest_t;

static void suggest_row(void *ctx, const char *name, const char *cp, const char *alias_of)
{
        suggest_t *s = ctx;
        size_t d = edit_distance(s->name, name);
        (void)cp;
        (void)alias_of;
        if (d < s->bestd) {
                s->bestd = d;
                snprintf(s->buf, s->len, "%s", name);
        }
}

/* The librdkafka property closest to name, copied into buf ("" when none is close). */
static void suggest_kafka_prop(const char *name, char *buf, size_t len)
{
        suggest_t s = {.name = name, .bestd = SIZE_MAX, .buf = buf, .len = len};

        buf[0] = '\0';
        kafka_props_each(suggest_row, &s);
        if (!close_enough(s.bestd, name))
                buf[0] = '\0';
}

typedef struct {
        const char *name;
        bool consumer, other; /* rows of that name for consumers only, for producers or both */
} who_reads_t;

static void who_reads_row(void *ctx, const char *name, const char *cp, const char *alias_of)
{
        who_reads_t *w = ctx;
        (void)alias_of;
        if (strcmp(name, w->name) != 0)
                return;
        if (strcmp(cp, "C") == 0)
                w->consumer = true;
        else
                w->other = true;
}

/* Is name a property only librdkafka's consumers read? (Some names have a
 * row in both the global and the topic table.) */
static bool kafka_prop_consumer_only(const char *name)
{
        who_reads_t w = {.name = name};

        kafka_props_each(who_reads_row, &w);
        return w.consumer && !w.other;
}

typedef struct {
        const char *name;
        char prop[128];
} canonical_t;

static void canonical_row(void *ctx, const char *name, const char *cp, const char *alias_of)
{
        canonical_t *k = ctx;
        (void)cp;
        if (strcmp(name, k->name) == 0 && alias_of[0] != '\0')
                snprintf(k->prop, sizeof(k->prop), "%s", alias_of);
}

/* The property librdkafka sets for name: the one it is an alias for, or
 * itself; caller frees (NULL when out of memory). */
static char *kafka_prop_canonical(const char *name)
{
        canonical_t k = {.name = name};

        snprintf(k.prop, sizeof(k.prop), "%s", name);
        kafka_props_each(canonical_row, &k);
        return strdup(k.prop);
}

static bool kafka_prop_is_secret(const char *name)
{
        for (size_t i = 0; i < sizeof(kafka_secret_parts) / sizeof(kafka_secret_parts[0]); i++)
                if (strstr(name, kafka_secret_parts[i]) != NULL)
                        return true;
        return false;
}

/* --- conninfo masking -------------------------------------------------- */

static bool is_uri(const char *s)
{
        return strncmp(s, "postgresql://", 13) == 0 || strncmp(s, "postgres://", 11) == 0;
}

static char *mask_conninfo(const char *ci, int depth);

/* libpq's keywords whose values are secrets: the role's password, and the
 * one that decrypts the client's TLS key. */
static bool is_password_keyword(const char *kw, size_t n)
{
        return (n == 8 && strncmp(kw, "password", 8) == 0) ||
               (n == 11 && strncmp(kw, "sslpassword", 11) == 0);
}

/*
 * URI form: scheme://[user[:password]@]hosts[/db][?k=v&...]. As libpq does,
 * the credentials are whatever precedes an '@' found before the first '/'.
 */
static void mask_uri(relay_strbuf_t *b, const char *ci)
{
        const char *p = strstr(ci, "://") + 3;
        const char *q = p, *at, *colon, *query;

        relay_strbuf_addn(b, ci, (size_t)(p - ci));
        while (*q != '\0' && *q != '@' && *q != '/')
                q++;
        if (*q == '@') {
                at = q;
                colon = memchr(p, ':', (size_t)(at - p));
                if (colon != NULL) {
                        relay_strbuf_addn(b, p, (size_t)(colon - p) + 1);
                        relay_strbuf_adds(b, MASK);
                } else {
                        relay_strbuf_addn(b, p, (size_t)(at - p));
                }
                p = at;
        }
        query = strchr(p, '?');
        if (query == NULL) {
                relay_strbuf_adds(b, p);
                return;
        }
        relay_strbuf_addn(b, p, (size_t)(query - p) + 1);
        p = query + 1;
        while (*p != '\0') {
                size_t n = strcspn(p, "&");
                const char *eq = memchr(p, '=', n);
                if (eq != NULL && is_password_keyword(p, (size_t)(eq - p))) {
                        relay_strbuf_addn(b, p, (size_t)(eq - p) + 1);
                        relay_strbuf_adds(b, MASK);
                } else {
                        relay_strbuf_addn(b, p, n);
                }
                p += n;
                if (*p == '&')
                        relay_strbuf_addc(b, *p++);
        }
}

/*
 * keyword = value form, scanned as libpq's conninfo_parse does: a value is
 * either single-quoted or runs to the next blank, and a backslash escapes
 * the next character in both. A dbname value may itself be a connection
 * string or URI (libpq expands it), so it is masked recursively. Anything
 * that does not scan is masked to the end: better too much than a leak.
 */
static void mask_keyvalue(relay_strbuf_t *b, const char *ci, int depth)
{
        const char *p = ci;

        while (*p != '\0') {
                const char *kw, *val;
                size_t kwlen;
                relay_strbuf_t dec = {0};
                char *decoded, *inner = NULL;

                while (isspace((unsigned char)*p))
                        relay_strbuf_addc(b, *p++);
                if (*p == '\0')
                        break;
                kw = p;
                while (*p != '\0' && *p != '=' && !isspace((unsigned char)*p))
                        p++;
                kwlen = (size_t)(p - kw);
                while (isspace((unsigned char)*p))
                        p++;
                if (*p != '=') {
                        /* Not "keyword =": the word may be a stray password. */
                        relay_strbuf_adds(b, MASK);
                        return;
                }
                relay_strbuf_addn(b, kw, (size_t)(p - kw));
                relay_strbuf_addc(b, *p++);
                while (isspace((unsigned char)*p))
                        relay_strbuf_addc(b, *p++);
                val = p;
                if (*p == '\'') {
                        p++;
                        while (*p != '\0' && *p != '\'') {
                                if (*p == '\\' && p[1] != '\0')
                                        p++;
                                relay_strbuf_addc(&dec, *p++);
                        }
                        if (*p == '\'')
                                p++;
                } else {
                        while (*p != '\0' && !isspace((unsigned char)*p)) {
                                if (*p == '\\' && p[1] != '\0')
                                        p++;
                                relay_strbuf_addc(&dec, *p++);
                        }
                }
                decoded = relay_strbuf_finish(&dec);
                if (is_password_keyword(kw, kwlen)) {
                        relay_strbuf_adds(b, MASK);
                } else if (kwlen == 6 && strncmp(kw, "dbname", 6) == 0 && decoded != NULL &&
                           (strchr(decoded, '=') != NULL || is_uri(decoded)) &&
                           (inner = mask_conninfo(decoded, depth + 1)) != NULL &&
                           strcmp(inner, decoded) != 0) {
                        relay_strbuf_addc(b, '\'');
                        for (const char *s = inner; *s != '\0'; s++) {
                                if (*s == '\'' || *s == '\\')
                                        relay_strbuf_addc(b, '\\');
                                relay_strbuf_addc(b, *s);
                        }
                        relay_strbuf_addc(b, '\'');
                } else if (decoded == NULL) {
                        relay_strbuf_adds(b, MASK); /* could not look inside: do not risk it */
                } else {
                        relay_strbuf_addn(b, val, (size_t)(p - val));
                }
                free(inner);
                free(decoded);
        }
}

static char *mask_conninfo(const char *ci, int depth)
{
        relay_strbuf_t b = {0};

        if (depth > 2) /* libpq expands dbname only once; deeper nesting is hostile */
                return strdup(MASK);
        if (is_uri(ci))
                mask_uri(&b, ci);
        else
                mask_keyvalue(&b, ci, depth);
        return relay_strbuf_finish(&b);
}

char *relay_config_mask_conninfo(const char *conninfo)
{
        return mask_conninfo(conninfo != NULL ? conninfo : "", 0);
}

/* --- value parsers, one per type ---------------------------------------
 *
 * Each takes the raw value and either returns 0 with *norm (the value to
 * store, malloc'd; NULL means store the raw value) and *num (KT_INT), or
 * RELAY_EINVAL with the rule the value broke in why ("must be ..."), or
 * RELAY_ENOMEM.
 */
typedef int (*parse_fn)(const key_def_t *k, const char *v, char **norm, int64_t *num, char *why,
                        size_t whylen);

static int parse_string(const key_def_t *k, const char *v, char **norm, int64_t *num, char *why,
                        size_t whylen)
{
        (void)k, (void)v, (void)norm, (void)num, (void)why, (void)whylen;
        return 0;
}

static int parse_conninfo(const key_def_t *k, const char *v, char **norm, int64_t *num, char *why,
                          size_t whylen)
{
        char *msg = NULL, *masked;
        PQconninfoOption *opts;
        size_t n;

        (void)k, (void)norm, (void)num;
        if (v[0] == '\0')
                return 0;
        opts = PQconninfoParse(v, &msg);
        if (opts != NULL) {
                PQconninfoFree(opts);
                return 0;
        }
        if (msg == NULL)
                return RELAY_ENOMEM;
        n = strlen(msg);
        while (n > 0 && isspace((unsigned char)msg[n - 1]))
                msg[--n] = '\0';
        /* libpq quotes fragments of the input; withhold them if it holds a password. */
        masked = relay_config_mask_conninfo(v);
        if (masked != NULL && strcmp(masked, v) == 0)
                relay_err_set(why, whylen,
                              "must be a libpq connection string or URI (%s); see "
                              "https://www.postgresql.org/docs/current/libpq-connect.html",
                              msg);
        else
                relay_err_set(why, whylen,
                              "must be a libpq connection string or URI (libpq's message is "
                              "withheld because the value contains a password); see "
                              "https://www.postgresql.org/docs/current/libpq-connect.html");
        free(masked);
        PQfreemem(msg);
        return RELAY_EINVAL;
}

/* Types whose value must pass one rule of names.h, and the rule in words ("must be ..."). */
static const struct {
        bool (*valid)(const char *s, size_t n);
        const char *rule;
} name_rules[] = {
        [KT_SLOT] = {relay_names_is_slot, RELAY_NAMES_SLOT_RULE},
        [KT_IDENT] = {relay_names_is_ident, RELAY_NAMES_IDENT_RULE},
        [KT_COLUMN] = {relay_names_is_column, RELAY_NAMES_COLUMN_RULE},
        [KT_TOPIC] = {relay_names_is_topic, "one Kafka topic name (no ${column}): " RELAY_NAMES_TOPIC_RULE},
};

static int parse_name(const key_def_t *k, const char *v, char **norm, int64_t *num, char *why,
                      size_t whylen)
{
        (void)norm, (void)num;
        if (!name_rules[k->type].valid(v, strlen(v))) {
                relay_err_set(why, whylen, "must be %s", name_rules[k->type].rule);
                return RELAY_EINVAL;
        }
        return 0;
}

static int parse_table(const key_def_t *k, const char *v, char **norm, int64_t *num, char *why,
                       size_t whylen)
{
        relay_strbuf_t b = {0};
        const char *p = v, *s;
        size_t n, count = 0;
        int rc = 0;

        (void)k, (void)num;
        /* One table, or several (one publication covers them all), stored
         * in one spelling, schema.table[,schema.table...], for --print-config
         * and the settings. */
        while (rc == 0 && relay_list_next(&p, &s, &n)) {
                relay_table_name_t t;
                char *item = relay_dupn(s, n);
                if (!item || (rc = relay_names_parse_table(item, &t, why, whylen)) != 0) {
                        rc = item ? rc : RELAY_ENOMEM;
                        free(item);
                        break;
                }
                free(item);
                /* The same table twice would be read twice by a backfill. */
                const char *q = count > 0 ? b.p : NULL, *prev;
                size_t m, sl = strlen(t.schema), tl = sl + 1 + strlen(t.name);
                while (rc == 0 && relay_list_next(&q, &prev, &m))
                        if (m == tl && strncmp(prev, t.schema, sl) == 0 && prev[sl] == '.' &&
                            strncmp(prev + sl + 1, t.name, tl - sl - 1) == 0) {
                                relay_err_set(why, whylen, "must name each table once, but "
                                              "\"%s.%s\" is listed twice", t.schema, t.name);
                                rc = RELAY_EINVAL;
                        }
                if (count++ > 0)
                        relay_strbuf_addc(&b, ',');
                relay_strbuf_adds(&b, t.schema);
                relay_strbuf_addc(&b, '.');
                relay_strbuf_adds(&b, t.name);
                relay_names_table_free(&t);
        }
        if (rc == 0 && count == 0) {
                relay_err_set(why, whylen,
                              "must name a table: \"schema.table\" or \"table\" (meaning "
                              "public.table), or several separated by commas");
                rc = RELAY_EINVAL;
        }
        if (rc) {
                free(b.p);
                return rc;
        }
        *norm = relay_strbuf_finish(&b);
        return *norm != NULL ? 0 : RELAY_ENOMEM;
}

static int parse_columns(const key_def_t *k, const char *v, char **norm, int64_t *num, char *why,
                         size_t whylen)
{
        relay_strbuf_t b = {0};
        const char *p = v, *s;
        size_t count = 0, n;

        (void)k, (void)num;
        if (strspn(v, " \t") == strlen(v)) {
                *norm = strdup("");
                return *norm != NULL ? 0 : RELAY_ENOMEM;
        }
        while (relay_list_next(&p, &s, &n)) {
                if (!relay_names_is_column(s, n)) {
                        free(b.p);
                        relay_err_set(why, whylen,
                                      "must be a comma-separated list of column names, each %s",
                                      RELAY_NAMES_COLUMN_RULE);
                        return RELAY_EINVAL;
                }
                /* A repeated column would send the same header twice. */
                const char *q = count > 0 ? b.p : NULL, *item;
                size_t m;
                while (relay_list_next(&q, &item, &m)) {
                        if (m == n && strncmp(item, s, m) == 0) {
                                relay_err_set(why, whylen, "must name each column once, but "
                                              "\"%.*s\" is listed twice", (int)m, item);
                                free(b.p);
                                return RELAY_EINVAL;
                        }
                }
                if (count++ > 0)
                        relay_strbuf_addc(&b, ',');
                relay_strbuf_addn(&b, s, n);
        }
        *norm = relay_strbuf_finish(&b);
        return *norm != NULL ? 0 : RELAY_ENOMEM;
}

static int parse_template(const key_def_t *k, const char *v, char **norm, int64_t *num, char *why,
                          size_t whylen)
{
        (void)k, (void)norm, (void)num;
        return relay_names_parse_template(v, NULL, why, whylen);
}

static int parse_int(const key_def_t *k, const char *v, char **norm, int64_t *num, char *why,
                     size_t whylen)
{
        const char *p = v;
        bool neg = false, ok = true;
        uint64_t acc = 0;
        int64_t val;
        char buf[32];

        /* Digits only: strtoll would also take blanks, "+", "0x" and partial input.
         * The bound keeps acc * 10 + 9 below 2^64, so no number wraps around into
         * range (2^64 + 100 is not 100). */
        if (*p == '-') {
                neg = true;
                p++;
        }
        if (*p == '\0')
                ok = false;
        for (; ok && *p != '\0'; p++) {
                if (*p < '0' || *p > '9' || acc > (uint64_t)INT64_MAX / 10 + 1)
                        ok = false;
                else
                        acc = acc * 10 + (uint64_t)(*p - '0');
        }
        if (ok && acc > (uint64_t)INT64_MAX)
                ok = false;
        val = ok ? (neg ? -(int64_t)acc : (int64_t)acc) : 0;
        if (!ok || val < k->min || val > k->max) {
                relay_err_set(why, whylen, "must be an integer number of %s between %lld and %lld",
                              k->unit, (long long)k->min, (long long)k->max);
                return RELAY_EINVAL;
        }
        *num = val;
        snprintf(buf, sizeof(buf), "%lld", (long long)val);
        *norm = strdup(buf);
        return *norm != NULL ? 0 : RELAY_ENOMEM;
}

static int parse_enum(const key_def_t *k, const char *v, char **norm, int64_t *num, char *why,
                      size_t whylen)
{
        relay_strbuf_t list = {0};
        char *s;

        for (size_t i = 0; k->choices[i] != NULL; i++) {
                if (strcasecmp(v, k->choices[i]) == 0) {
                        *num = (int64_t)i; /* relay_config_get_choice() */
                        *norm = strdup(k->choices[i]);
                        return *norm != NULL ? 0 : RELAY_ENOMEM;
                }
        }
        for (size_t i = 0; k->choices[i] != NULL; i++) {
                if (i > 0)
                        relay_strbuf_adds(&list, k->choices[i + 1] != NULL ? ", " : " or ");
                relay_strbuf_adds(&list, k->choices[i]);
        }
        s = relay_strbuf_finish(&list);
        relay_err_set(why, whylen, "must be %s", s != NULL ? s : "one of the documented values");
        free(s);
        return RELAY_EINVAL;
}

static int parse_listen(const key_def_t *k, const char *v, char **norm, int64_t *num, char *why,
                        size_t whylen)
{
        (void)k, (void)norm, (void)num;
        return relay_http_check_listen(v, why, whylen);
}

/* Indexed by key_type_t. */
static const parse_fn parsers[] = {
        [KT_STRING] = parse_string,   [KT_CONNINFO] = parse_conninfo, [KT_SLOT] = parse_name,
        [KT_IDENT] = parse_name,      [KT_TABLE] = parse_table,       [KT_COLUMN] = parse_name,
        [KT_COLUMNS] = parse_columns, [KT_TEMPLATE] = parse_template, [KT_TOPIC] = parse_name,
        [KT_INT] = parse_int,         [KT_ENUM] = parse_enum,         [KT_LISTEN] = parse_listen,
};

/* --- setting values ---------------------------------------------------- */

static int store_key(relay_config_t *c, size_t i, const char *value, const char *origin,
                     char *err, size_t errlen)
{
        const key_def_t *k = &keys[i];
        char why[RELAY_ERRBUF], vb[RELAY_ABBREV_BUF];
        char *norm = NULL, *org;
        int64_t num = 0;
        int rc;

        rc = parsers[k->type](k, value, &norm, &num, why, sizeof(why));
        if (rc == RELAY_ENOMEM) {
                relay_err_set(err, errlen, "out of memory");
                return rc;
        }
        if (rc < 0) {
                /* Never echo a value that may hold a password. */
                if (k->flags & KF_SECRET)
                        relay_err_set(err, errlen, "invalid value for \"%s\" (at %s): %s", k->name,
                                      origin, why);
                else
                        relay_err_set(err, errlen, "invalid value \"%s\" for \"%s\" (at %s): %s",
                                      relay_abbrev(value, vb, sizeof(vb)), k->name, origin, why);
                return RELAY_EINVAL;
        }
        if (norm == NULL && (norm = strdup(value)) == NULL)
                return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
        if ((org = strdup(origin)) == NULL) {
                free(norm);
                return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
        }
        free(c->value[i]);
        free(c->origin[i]);
        c->value[i] = norm;
        c->origin[i] = org;
        c->num[i] = num;
        return 0;
}

static int store_kafka(relay_config_t *c, const char *key, const char *value, const char *origin,
                       char *err, size_t errlen)
{
        const char *name = key + strlen(KAFKA_PREFIX);
        char kerr[RELAY_ERRBUF] = "";
        char hint[128], nb[RELAY_ABBREV_BUF];
        const char *shown;
        kafka_prop_t *kp = NULL;
        char *v = NULL, *o = NULL, *prop = NULL;

        if (name[0] == '\0') {
                relay_err_set(err, errlen,
                              "configuration key \"%s\" (at %s) names no librdkafka property; "
                              "write kafka.<property>, e.g. kafka.bootstrap.servers",
                              key, origin);
                return RELAY_EINVAL;
        }
        switch (rd_kafka_conf_set(c->kscratch, name, value, kerr, sizeof(kerr))) {
        case RD_KAFKA_CONF_OK:
                break;
        case RD_KAFKA_CONF_UNKNOWN:
                suggest_kafka_prop(name, hint, sizeof(hint));
                shown = relay_abbrev(name, nb, sizeof(nb));
                if (hint[0] != '\0')
                        relay_err_set(err, errlen,
                                      "unknown librdkafka property \"%s\" in configuration key "
                                      "\"kafka.%s\" (at %s); did you mean \"kafka.%s\"?",
                                      shown, shown, origin, hint);
                else
                        relay_err_set(err, errlen,
                                      "unknown librdkafka property \"%s\" in configuration key "
                                      "\"kafka.%s\" (at %s); see librdkafka's CONFIGURATION.md "
                                      "for property names",
                                      shown, shown, origin);
                return RELAY_EINVAL;
        case RD_KAFKA_CONF_INVALID:
        default:
                /* librdkafka's reason may quote the value: withhold it for credentials. */
                if (kafka_prop_is_secret(name) && value[0] != '\0' && strstr(kerr, value) != NULL)
                        relay_err_set(err, errlen,
                                      "invalid value for \"%s\" (at %s): librdkafka rejects it",
                                      key, origin);
                else
                        relay_err_set(err, errlen, "invalid value for \"%s\" (at %s): %s", key,
                                      origin, kerr);
                return RELAY_EINVAL;
        }

        if ((prop = kafka_prop_canonical(name)) == NULL)
                goto nomem;
        /*
         * Several names are one property (linger.ms and queue.buffering.max.ms,
         * bootstrap.servers and metadata.broker.list, acks and
         * request.required.acks). Within one layer, which of two spellings
         * librdkafka applies last would be the environment's or the file's
         * order of them, not a rank: refused, as a key set twice in one file is.
         */
        for (size_t i = 0; i < c->nkafka; i++) {
                const kafka_prop_t *other = &c->kafka[i];
                char ob[RELAY_ABBREV_BUF];
                if (other->layer != c->layer || strcmp(other->prop, prop) != 0)
                        continue;
                /* One name again: --set applies in order, a file refuses it
                 * itself; two variables of the environment (their names'
                 * case aside) would be its order again. */
                if (strcmp(other->name, name) == 0 && c->entry != ENTRY_ENV)
                        continue;
                if (strcmp(other->name, name) == 0) {
                        relay_err_set(err, errlen,
                                      "environment variables %s and %s both set configuration "
                                      "key \"kafka.%s\", so which value applies would depend "
                                      "on their order; unset one of them",
                                      other->origin, origin, relay_abbrev(name, nb, sizeof(nb)));
                        free(prop);
                        return RELAY_EINVAL;
                }
                relay_err_set(err, errlen,
                              "configuration keys \"kafka.%s\" (at %s) and \"kafka.%s\" (at %s) "
                              "are two names of one librdkafka property, %s, so which value "
                              "applies would depend on their order; set only one of them",
                              relay_abbrev(other->name, ob, sizeof(ob)), other->origin,
                              relay_abbrev(name, nb, sizeof(nb)), origin, prop);
                free(prop);
                return RELAY_EINVAL;
        }
        v = strdup(value);
        o = strdup(origin);
        if (v == NULL || o == NULL)
                goto nomem;
        /*
         * The list is in the order the values were set, a name set again
         * moving to the end: librdkafka sees them in that order, so of two
         * spellings of one property the one set by the higher layer wins, as
         * in the scratch configuration.
         */
        for (size_t i = 0; i < c->nkafka && kp == NULL; i++) {
                if (strcmp(c->kafka[i].name, name) == 0) {
                        kafka_prop_t moved = c->kafka[i];
                        memmove(&c->kafka[i], &c->kafka[i + 1],
                                (c->nkafka - i - 1) * sizeof(c->kafka[0]));
                        c->kafka[c->nkafka - 1] = moved;
                        kp = &c->kafka[c->nkafka - 1];
                }
        }
        if (kp == NULL) {
                if (c->nkafka == c->kafka_cap) {
                        size_t cap = c->kafka_cap ? c->kafka_cap * 2 : 8;
                        kafka_prop_t *arr = realloc(c->kafka, cap * sizeof(*arr));
                        if (arr == NULL)
                                goto nomem;
                        c->kafka = arr;
                        c->kafka_cap = cap;
                }
                kp = &c->kafka[c->nkafka];
                if ((kp->name = strdup(name)) == NULL)
                        goto nomem;
                kp->value = NULL;
                kp->origin = NULL;
                kp->prop = NULL;
                c->nkafka++;
        }
        free(kp->value);
        free(kp->origin);
        free(kp->prop);
        kp->value = v;
        kp->origin = o;
        kp->prop = prop;
        kp->layer = c->layer;
        return 0;

nomem:
        free(v);
        free(o);
        free(prop);
        return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
}

/* A value reaches the configuration by kind: a kind other than the last
 * one, and every file or environment, begins a layer. */
static void enter(relay_config_t *c, entry_t e)
{
        if (e != c->entry || e == ENTRY_FILE || e == ENTRY_ENV)
                c->layer++;
        c->entry = e;
}

static int set_key(relay_config_t *c, const char *key, const char *value, const char *origin,
                   char *err, size_t errlen)
{
        const char *hint;
        char kb[RELAY_ABBREV_BUF];
        size_t i;

        if (origin == NULL)
                origin = "unknown origin";
        if (key == NULL || value == NULL) {
                relay_err_set(err, errlen, "missing configuration key or value (at %s)", origin);
                return RELAY_EINVAL;
        }
        if (find_key(key, &i) != NULL)
                return store_key(c, i, value, origin, err, errlen);
        if (strncmp(key, KAFKA_PREFIX, strlen(KAFKA_PREFIX)) == 0)
                return store_kafka(c, key, value, origin, err, errlen);
        hint = suggest_key(key);
        key = relay_abbrev(key, kb, sizeof(kb));
        if (hint != NULL)
                relay_err_set(err, errlen,
                              "unknown configuration key \"%s\" (at %s); did you mean \"%s\"?", key,
                              origin, hint);
        else
                relay_err_set(err, errlen,
                              "unknown configuration key \"%s\" (at %s); \"outbox-relay --help\" "
                              "lists the keys",
                              key, origin);
        return RELAY_EINVAL;
}

int relay_config_set(relay_config_t *c, const char *key, const char *value, const char *origin,
                     char *err, size_t errlen)
{
        enter(c, ENTRY_SET);
        return set_key(c, key, value, origin, err, errlen);
}

int relay_config_set_arg(relay_config_t *c, const char *arg, char *err, size_t errlen)
{
        const char *eq = arg != NULL ? strchr(arg, '=') : NULL;
        char *key;
        int rc;

        if (eq == NULL || eq == arg) {
                char ab[RELAY_ABBREV_BUF];
                relay_err_set(err, errlen, "invalid --set argument \"%s\": expected KEY=VALUE",
                              arg != NULL ? relay_abbrev(arg, ab, sizeof(ab)) : "");
                return RELAY_EINVAL;
        }
        key = strndup(arg, (size_t)(eq - arg));
        if (key == NULL)
                return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
        enter(c, ENTRY_ARG);
        rc = set_key(c, key, eq + 1, "--set", err, errlen);
        free(key);
        return rc;
}

/* --- construction ------------------------------------------------------ */

int relay_config_new(relay_config_t **out)
{
        relay_config_t *c = calloc(1, sizeof(*c));
        char err[RELAY_ERRBUF];

        if (c == NULL)
                return RELAY_ENOMEM;
        c->kscratch = rd_kafka_conf_new();
        if (c->kscratch == NULL) {
                free(c);
                return RELAY_ENOMEM;
        }
        /* Defaults go through the parsers too, which normalises them and proves the table. */
        for (size_t i = 0; i < NKEYS; i++) {
                int rc = store_key(c, i, keys[i].def, ORIGIN_DEFAULT, err, sizeof(err));
                assert(rc != RELAY_EINVAL);
                assert(i == 0 || strcmp(keys[i - 1].name, keys[i].name) < 0);
                if (rc < 0) {
                        relay_config_free(c);
                        return rc;
                }
        }
        *out = c;
        return 0;
}

void relay_config_free(relay_config_t *c)
{
        if (c == NULL)
                return;
        for (size_t i = 0; i < NKEYS; i++) {
                free(c->value[i]);
                free(c->origin[i]);
        }
        for (size_t i = 0; i < c->nkafka; i++) {
                free(c->kafka[i].name);
                free(c->kafka[i].value);
                free(c->kafka[i].origin);
                free(c->kafka[i].prop);
        }
        free(c->kafka);
        if (c->kscratch != NULL)
                rd_kafka_conf_destroy(c->kscratch);
        free(c);
}

/* --- file and environment layers --------------------------------------- */

static int set_from_file(void *ctx, const char *key, const char *value, const char *origin,
                         char *err, size_t errlen)
{
        return set_key(ctx, key, value, origin, err, errlen);
}

int relay_config_load_file(relay_config_t *c, const char *path, char *err, size_t errlen)
{
        enter(c, ENTRY_FILE);
        return relay_conffile_load(path, set_from_file, c, err, errlen);
}

/* Key for an OUTBOX_RELAY_KAFKA_ variable's suffix (lower case, '_' -> '.'), or NULL. */
static char *kafka_key_from_env(const char *suffix, size_t n)
{
        char *key = malloc(strlen(KAFKA_PREFIX) + n + 1);
        char *name;

        if (key == NULL)
                return NULL;
        memcpy(key, KAFKA_PREFIX, strlen(KAFKA_PREFIX));
        name = key + strlen(KAFKA_PREFIX);
        for (size_t i = 0; i < n; i++)
                name[i] = (char)tolower((unsigned char)suffix[i]);
        name[n] = '\0';
        for (size_t i = 0; i < sizeof(kafka_underscore_props) / sizeof(kafka_underscore_props[0]);
             i++)
                if (strcmp(name, kafka_underscore_props[i]) == 0)
                        return key;
        for (size_t i = 0; i < n; i++)
                if (name[i] == '_')
                        name[i] = '.';
        return key;
}

/*
 * Kubernetes gives every container of a namespace variables for each Service
 * (service links, on by default); for one named outbox-relay, next to the
 * relay's own metrics port: OUTBOX_RELAY_SERVICE_HOST,
 * OUTBOX_RELAY_SERVICE_PORT[_<port name>], OUTBOX_RELAY_PORT and
 * OUTBOX_RELAY_PORT_<port>_<TCP|UDP|SCTP>[_PROTO|_PORT|_ADDR]. No key maps
 * to them, and refusing them would stop the relay in such a namespace.
 * rest: the variable's name after OUTBOX_RELAY_.
 */
static bool is_service_link(const char *rest)
{
        static const char *const protocols[] = {"_TCP", "_UDP", "_SCTP"};
        static const char *const suffixes[] = {"", "_PROTO", "_PORT", "_ADDR"};
        size_t digits;

        if (strcmp(rest, "SERVICE_HOST") == 0 || strcmp(rest, "SERVICE_PORT") == 0 ||
            strncmp(rest, "SERVICE_PORT_", 13) == 0 || strcmp(rest, "PORT") == 0)
                return true;
        if (strncmp(rest, "PORT_", 5) != 0)
                return false;
        rest += 5;
        digits = strspn(rest, "0123456789");
        if (digits == 0)
                return false;
        rest += digits;
        for (size_t i = 0; i < sizeof(protocols) / sizeof(protocols[0]); i++) {
                size_t n = strlen(protocols[i]);
                if (strncmp(rest, protocols[i], n) != 0)
                        continue;
                for (size_t j = 0; j < sizeof(suffixes) / sizeof(suffixes[0]); j++)
                        if (strcmp(rest + n, suffixes[j]) == 0)
                                return true;
        }
        return false;
}

int relay_config_load_env(relay_config_t *c, char *const *envp, char *err, size_t errlen)
{
        char var[128], ename[128];

        enter(c, ENTRY_ENV);
        for (; envp != NULL && *envp != NULL; envp++) {
                const char *entry = *envp, *eq = strchr(entry, '=');
                const char *key = NULL, *hint = NULL;
                char *kkey = NULL;
                size_t n, hintd = SIZE_MAX;
                int rc;

                if (eq == NULL || strncmp(entry, ENV_PREFIX, strlen(ENV_PREFIX)) != 0)
                        continue;
                n = (size_t)(eq - entry);
                if (n >= sizeof(var)) {
                        relay_err_set(err, errlen, "environment variable name \"%.40s...\" is "
                                      "too long to be a configuration variable; unset it",
                                      entry);
                        return RELAY_EINVAL;
                }
                memcpy(var, entry, n);
                var[n] = '\0';
                if (strcmp(var, ENV_PREFIX "CONFIG") == 0)
                        continue; /* the file's name, read by main */
                if (is_service_link(var + strlen(ENV_PREFIX)))
                        continue;
                for (size_t i = 0; i < NKEYS && key == NULL; i++) {
                        size_t d;
                        env_name(keys[i].name, ename, sizeof(ename));
                        if (strcmp(var, ename) == 0) {
                                key = keys[i].name;
                        } else if ((d = edit_distance(var, ename)) < hintd) {
                                hintd = d;
                                hint = keys[i].name;
                        }
                }
                if (key == NULL && strncmp(var, ENV_KAFKA_PREFIX, strlen(ENV_KAFKA_PREFIX)) == 0 &&
                    n > strlen(ENV_KAFKA_PREFIX)) {
                        kkey = kafka_key_from_env(var + strlen(ENV_KAFKA_PREFIX),
                                                  n - strlen(ENV_KAFKA_PREFIX));
                        if (kkey == NULL)
                                return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
                        key = kkey;
                }
                if (key == NULL) {
                        if (hint != NULL && close_enough(hintd, var + strlen(ENV_PREFIX))) {
                                env_name(hint, ename, sizeof(ename));
                                relay_err_set(err, errlen,
                                              "unknown environment variable \"%s\"; did you mean "
                                              "\"%s\"?",
                                              var, ename);
                        } else {
                                relay_err_set(err, errlen,
                                              "unknown environment variable \"%s\": no "
                                              "configuration key maps to it; unset it or see "
                                              "\"outbox-relay --help\"",
                                              var);
                        }
                        return RELAY_EINVAL;
                }
                rc = set_key(c, key, eq + 1, var, err, errlen);
                free(kkey);
                if (rc < 0)
                        return rc;
        }
        return 0;
}

/* --- reading ----------------------------------------------------------- */

/*
 * Several requests in flight per connection, or no gapless guarantee, let
 * librdkafka report a failed batch as delivered (its implicit ack) and send
 * an aggregate's later events past a refused one. Only an explicit switch
 * reopens that.
 */
static int check_transactional(const relay_config_t *c, char *err, size_t errlen)
{
        const char *t = relay_config_get(c, "kafka.transactional.id");
        if (t && *t) {
                relay_err_set(err, errlen,
                              "kafka.transactional.id is not allowed: set delivery.mode = "
                              "exactly-once (and eos.transactional.id to choose the id) instead");
                return RELAY_EINVAL;
        }
        return 0;
}

/* Whether a and b are the same value of librdkafka property name as
 * librdkafka reads them ("TRUE" and "true", "Read_Committed" and
 * "read_committed"): each as it gives it back once set. */
static bool kafka_same_value(const char *name, const char *a, const char *b)
{
        char kerr[256], va[512], vb[512];
        size_t la = sizeof(va), lb = sizeof(vb);
        rd_kafka_conf_t *ca = rd_kafka_conf_new(), *cb = rd_kafka_conf_new();
        bool same = ca && cb && rd_kafka_conf_set(ca, name, a, kerr, sizeof(kerr)) == RD_KAFKA_CONF_OK &&
                    rd_kafka_conf_set(cb, name, b, kerr, sizeof(kerr)) == RD_KAFKA_CONF_OK &&
                    rd_kafka_conf_get(ca, name, va, &la) == RD_KAFKA_CONF_OK &&
                    rd_kafka_conf_get(cb, name, vb, &lb) == RD_KAFKA_CONF_OK && strcmp(va, vb) == 0;
        if (ca)
                rd_kafka_conf_destroy(ca);
        if (cb)
                rd_kafka_conf_destroy(cb);
        return same;
}

/* librdkafka takes a consumer property in a producer's configuration and
 * ignores it, with a CONFWARN line the relay logs only at debug level. In
 * exactly-once mode the checkpoint reader, a consumer, is given them too. */
static int check_consumer_props(const relay_config_t *c, char *err, size_t errlen)
{
        bool eos = strcmp(relay_config_get(c, "delivery.mode"), "at-least-once") != 0;
        for (size_t i = 0; i < c->nkafka; i++) {
                const kafka_prop_t *kp = &c->kafka[i];
                const char *own = eos ? relay_checkpoint_own_setting(kp->name) : NULL;
                char why[256];
                if (own && !kafka_same_value(kp->name, kp->value, own))
                        snprintf(why, sizeof(why),
                                 "would have no effect: the exactly-once checkpoint reader, the "
                                 "relay's only consumer, sets %s = %s itself; remove it",
                                 kp->name, own);
                else if (!eos && kafka_prop_consumer_only(kp->name))
                        snprintf(why, sizeof(why),
                                 "is a librdkafka consumer property: with delivery.mode = "
                                 "at-least-once the relay only produces, so it would have no "
                                 "effect; remove it (a consumer of the events, such as "
                                 "outbox-inbox, is configured on its own)");
                else
                        continue;
                return relay_err(err, errlen, RELAY_EINVAL, "kafka.%s (at %s) %s", kp->name,
                                 kp->origin, why);
        }
        return 0;
}

/* The producer refuses it too, but only once the relay has connected:
 * here check and --print-config refuse it first. */
static int check_idempotence(const relay_config_t *c, char *err, size_t errlen)
{
        for (size_t i = 0; i < c->nkafka; i++) {
                const kafka_prop_t *kp = &c->kafka[i];
                if (strcmp(kp->name, "enable.idempotence") == 0 &&
                    !relay_kadmin_conf_true(c->kscratch, "enable.idempotence")) {
                        relay_err_set(err, errlen,
                                      "kafka.enable.idempotence = %s (at %s) is not allowed: "
                                      "without idempotence a retry can reorder or duplicate an "
                                      "aggregate's events; remove the setting (the relay uses "
                                      "true)",
                                      kp->value, kp->origin);
                        return RELAY_EINVAL;
                }
        }
        return 0;
}

static int check_pipelining(const relay_config_t *c, char *err, size_t errlen)
{
        const char *unsafe = relay_config_get(c, "delivery.unsafe.allow.pipelining");
        const kafka_prop_t *kp = NULL;
        char v[32];
        size_t vn = sizeof(v);
        if (unsafe && strcmp(unsafe, "true") == 0)
                return 0;
        /* The number as librdkafka reads it (strtol with base 0: "0x5" is
         * 5), from the spelling set last (store_kafka()). */
        for (size_t i = 0; i < c->nkafka; i++)
                if (strcmp(c->kafka[i].name, "max.in.flight.requests.per.connection") == 0 ||
                    strcmp(c->kafka[i].name, "max.in.flight") == 0)
                        kp = &c->kafka[i];
        if (kp && rd_kafka_conf_get(c->kscratch, "max.in.flight.requests.per.connection", v,
                                    &vn) == RD_KAFKA_CONF_OK && strcmp(v, "1") != 0) {
                relay_err_set(err, errlen,
                              "kafka.%s = %s (at %s) is not allowed: librdkafka reads %s, and "
                              "with more than one request in flight it can report an event "
                              "delivered that Kafka never stored; remove the setting (the relay "
                              "uses 1), or set delivery.unsafe.allow.pipelining = true to accept "
                              "the risk",
                              kp->name, kp->value, kp->origin, v);
                return RELAY_EINVAL;
        }
        const char *g = relay_config_get(c, "kafka.enable.gapless.guarantee");
        if (g && *g && !relay_kadmin_conf_true(c->kscratch, "enable.gapless.guarantee")) {
                relay_err_set(err, errlen,
                              "kafka.enable.gapless.guarantee = %s is not allowed: without it "
                              "librdkafka sends an aggregate's later events after one Kafka "
                              "refused, out of order; remove the setting, or set "
                              "delivery.unsafe.allow.pipelining = true to accept the risk",
                              g);
                return RELAY_EINVAL;
        }
        return 0;
}

int relay_config_validate(const relay_config_t *c, char *err, size_t errlen)
{
        int rc;
        static const char *const columns[] = {"outbox.column.id", "outbox.column.aggregate_type",
                                              "outbox.column.aggregate_id", "outbox.column.type",
                                              "outbox.column.payload"};
        size_t ncol = sizeof(columns) / sizeof(columns[0]);
        size_t lo = 0, hi = 0;
        const char *bootstrap = relay_config_get(c, "kafka.bootstrap.servers");

        if (bootstrap == NULL || bootstrap[0] == '\0') {
                relay_err_set(err, errlen,
                              "kafka.bootstrap.servers is not set; set it in the config file, with "
                              "OUTBOX_RELAY_KAFKA_BOOTSTRAP_SERVERS or --set "
                              "kafka.bootstrap.servers=host:9092");
                return RELAY_EINVAL;
        }

        /* Each backoff's ceiling must not be below its first step. */
        static const char *const backoffs[][2] = {
                {"reconnect.backoff.ms", "reconnect.backoff.max.ms"},
                {"errors.backoff.ms", "errors.backoff.max.ms"},
        };
        for (size_t i = 0; i < sizeof(backoffs) / sizeof(backoffs[0]); i++) {
                find_key(backoffs[i][0], &lo);
                find_key(backoffs[i][1], &hi);
                if (c->num[hi] < c->num[lo]) {
                        relay_err_set(err, errlen,
                                      "%s = %lld (at %s) is less than %s = %lld (at %s); raise %s "
                                      "or lower %s",
                                      backoffs[i][1], (long long)c->num[hi], c->origin[hi],
                                      backoffs[i][0], (long long)c->num[lo], c->origin[lo],
                                      backoffs[i][1], backoffs[i][0]);
                        return RELAY_EINVAL;
                }
        }

        if ((rc = check_consumer_props(c, err, errlen)))
                return rc;
        if ((rc = check_transactional(c, err, errlen)))
                return rc;
        if ((rc = check_idempotence(c, err, errlen)))
                return rc;
        if ((rc = check_pipelining(c, err, errlen)))
                return rc;

        /* id and type travel as headers too. */
        find_key("outbox.headers", &lo);
        size_t nheaders = 2, n;
        const char *p = c->value[lo][0] != '\0' ? c->value[lo] : NULL, *item;
        while (relay_list_next(&p, &item, &n))
                nheaders++;
        if (nheaders > RELAY_EVENT_MAX_HEADERS) {
                relay_err_set(err, errlen,
                              "outbox.headers (at %s) lists %zu columns: with id and type an "
                              "event would carry %zu headers, more than the %d allowed; list at "
                              "most %d columns",
                              c->origin[lo], nheaders - 2, nheaders, RELAY_EVENT_MAX_HEADERS,
                              RELAY_EVENT_MAX_HEADERS - 2);
                return RELAY_EINVAL;
        }

        /* Two roles on one column would make the event ambiguous (key = payload?). */
        for (size_t a = 0; a < ncol; a++) {
                for (size_t b = a + 1; b < ncol; b++) {
                        size_t ia = 0, ib = 0;
                        find_key(columns[a], &ia);
                        find_key(columns[b], &ib);
                        if (strcmp(c->value[ia], c->value[ib]) == 0) {
                                relay_err_set(err, errlen,
                                              "%s (at %s) and %s (at %s) both name column \"%s\"; "
                                              "each outbox.column.* key must name a different "
                                              "column",
                                              columns[a], c->origin[ia], columns[b], c->origin[ib],
                                              c->value[ia]);
                                return RELAY_EINVAL;
                        }
                }
        }
        return 0;
}

const char *relay_config_get(const relay_config_t *c, const char *key)
{
        size_t i;

        if (find_key(key, &i) != NULL)
                return c->value[i];
        if (strncmp(key, KAFKA_PREFIX, strlen(KAFKA_PREFIX)) == 0) {
                /* The value in effect under any of the property's names
                 * (kafka.metadata.broker.list answers for
                 * kafka.bootstrap.servers): the last one set, as librdkafka
                 * applies them in the list's order. */
                char *prop = kafka_prop_canonical(key + strlen(KAFKA_PREFIX));
                const char *v = "";
                for (size_t j = 0; prop && j < c->nkafka; j++)
                        if (strcmp(c->kafka[j].prop, prop) == 0)
                                v = c->kafka[j].value;
                free(prop);
                return v;
        }
        return NULL;
}

/* Is key of type t, as its caller knows? A wrong name or type is a bug
 * there, not a user error. Its index in *i. */
static bool typed_key(const char *key, key_type_t t, size_t *i)
{
        const key_def_t *k = find_key(key, i);

        assert(k != NULL && k->type == t);
        return k != NULL && k->type == t;
}

const char *relay_config_origin(const relay_config_t *c, const char *key)
{
        size_t i;
        if (find_key(key, &i) == NULL || c->origin[i] == NULL ||
            strcmp(c->origin[i], ORIGIN_DEFAULT) == 0)
                return NULL;
        return c->origin[i];
}

int64_t relay_config_get_int(const relay_config_t *c, const char *key)
{
        size_t i;

        return typed_key(key, KT_INT, &i) ? c->num[i] : 0;
}

int relay_config_get_choice(const relay_config_t *c, const char *key)
{
        size_t i;

        /* parse_enum() kept the position when the value was set. */
        return typed_key(key, KT_ENUM, &i) ? (int)c->num[i] : 0;
}

size_t relay_config_kafka_count(const relay_config_t *c)
{
        return c->nkafka;
}

void relay_config_kafka_at(const relay_config_t *c, size_t i, const char **name, const char **value)
{
        assert(i < c->nkafka);
        *name = c->kafka[i].name;
        *value = c->kafka[i].value;
}

/* --- output ------------------------------------------------------------ */

/* Print a value so that relay_config_load_file() reads it back unchanged. */
static void print_value(FILE *out, const char *v)
{
        size_t n = strlen(v);
        bool quote = n == 0 || isspace((unsigned char)v[0]) || isspace((unsigned char)v[n - 1]);

        for (const char *p = v; *p != '\0' && !quote; p++)
                quote = *p == '"' || *p == '#' || iscntrl((unsigned char)*p);
        if (!quote) {
                fputs(v, out);
                return;
        }
        static const char *const esc[256] = {
                ['"'] = "\\\"", ['\\'] = "\\\\", ['\n'] = "\\n", ['\t'] = "\\t", ['\r'] = "\\r",
        };
        fputc('"', out);
        relay_fput_escaped(out, v, n, esc);
        fputc('"', out);
}

static void print_kafka(const relay_config_t *c, FILE *out)
{
        if (c->nkafka > 0)
                fputs("# librdkafka properties, passed through without \"kafka.\"\n", out);
        for (size_t i = 0; i < c->nkafka; i++) {
                const kafka_prop_t *kp = &c->kafka[i];
                fprintf(out, "kafka.%s = ", kp->name);
                print_value(out, kafka_prop_is_secret(kp->name) && kp->value[0] != '\0' ? MASK
                                                                                       : kp->value);
                fprintf(out, "  # %s\n", kp->origin);
        }
}

void relay_config_print(const relay_config_t *c, FILE *out)
{
        bool kafka_done = false;
        const char *unsafe = relay_config_get(c, "delivery.unsafe.allow.pipelining");

        if (unsafe && strcmp(unsafe, "true") == 0)
                fputs("# WARNING: delivery.unsafe.allow.pipelining = true: librdkafka's "
                      "implicit-ack hole may be open\n",
                      out);
        for (size_t i = 0; i < NKEYS; i++) {
                char *masked = NULL;
                /* kafka.* sorts among the table's keys, so print it in its place. */
                if (!kafka_done && strcmp(keys[i].name, KAFKA_PREFIX) > 0) {
                        print_kafka(c, out);
                        kafka_done = true;
                }
                if (keys[i].flags & KF_SECRET)
                        masked = relay_config_mask_conninfo(c->value[i]);
                fprintf(out, "# %s\n%s = ", keys[i].desc, keys[i].name);
                print_value(out, (keys[i].flags & KF_SECRET) ? (masked != NULL ? masked : MASK)
                                                             : c->value[i]);
                fprintf(out, "  # %s\n", c->origin[i]);
                free(masked);
        }
        if (!kafka_done)
                print_kafka(c, out);
}

bool relay_config_keydoc(size_t i, relay_config_keydoc_t *out)
{
        if (i >= NKEYS)
                return false;
        const key_def_t *k = &keys[i];
        out->name = k->name;
        out->def = k->def;
        out->desc = k->desc;
        env_name(k->name, out->env, sizeof(out->env));
        out->values[0] = '\0';
        if (k->type == KT_INT) {
                snprintf(out->values, sizeof(out->values), "%lld to %lld %s", (long long)k->min,
                         (long long)k->max, k->unit);
        } else if (k->type == KT_ENUM) {
                size_t n = 0;
                for (size_t j = 0; k->choices[j] != NULL && n < sizeof(out->values); j++)
                        n += (size_t)snprintf(out->values + n, sizeof(out->values) - n, "%s%s",
                                              j == 0 ? "" : k->choices[j + 1] ? ", " : " or ",
                                              k->choices[j]);
        }
        return true;
}

void relay_config_print_help(FILE *out)
{
        char ename[128];

        fputs("  kafka.bootstrap.servers (required)\n"
              "        Kafka brokers, host:port[,host:port...]\n"
              "        env OUTBOX_RELAY_KAFKA_BOOTSTRAP_SERVERS\n"
              "  kafka.<property>\n"
              "        any librdkafka producer property, passed through without \"kafka.\"\n"
              "        (e.g. kafka.compression.type = zstd)\n"
              "        env OUTBOX_RELAY_KAFKA_<PROPERTY>, with \".\" written as \"_\"\n",
              out);
        for (size_t i = 0; i < NKEYS; i++) {
                const key_def_t *k = &keys[i];
                env_name(k->name, ename, sizeof(ename));
                fprintf(out, "  %s = %s\n        %s\n", k->name, k->def[0] ? k->def : "\"\"",
                        k->desc);
                if (k->type == KT_INT)
                        fprintf(out, "        %lld to %lld %s\n", (long long)k->min,
                                (long long)k->max, k->unit);
                fprintf(out, "        env %s\n", ename);
        }
}
