/*
 * names.c - the syntax of identifiers, table names, column names, Kafka
 * topic names and the topic template, written once for the configuration,
 * the settings and the outbox mapping (see names.h).
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/names.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define LOWER "abcdefghijklmnopqrstuvwxyz"
#define DIGITS "0123456789"

/* 1 to 63 bytes, each one of allowed. */
static bool name_of(const char *s, size_t n, const char *allowed)
{
        if (n == 0 || n >= RELAY_NAMEDATALEN)
                return false;
        for (size_t i = 0; i < n; i++)
                if (s[i] == '\0' || strchr(allowed, s[i]) == NULL)
                        return false;
        return true;
}

bool relay_names_is_ident(const char *s, size_t n)
{
        return name_of(s, n, LOWER DIGITS "_$") && strchr(LOWER "_", s[0]) != NULL;
}

bool relay_names_is_slot(const char *s, size_t n)
{
        return name_of(s, n, LOWER DIGITS "_");
}

bool relay_names_is_column(const char *s, size_t n)
{
        if (n == 0 || n >= RELAY_NAMEDATALEN)
                return false;
        for (size_t i = 0; i < n; i++)
                if (iscntrl((unsigned char)s[i]))
                        return false;
        return true;
}

/* Characters Kafka allows in a topic name (Topic.validate). */
static bool is_topic_char(char ch)
{
        return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
               ch == '.' || ch == '_' || ch == '-';
}

bool relay_names_is_topic(const char *t, size_t n)
{
        if (n == 0 || n > RELAY_TOPIC_MAX || (n == 1 && t[0] == '.') ||
            (n == 2 && t[0] == '.' && t[1] == '.'))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!is_topic_char(t[i]))
                        return false;
        return true;
}

void relay_names_table_free(relay_table_name_t *t)
{
        if (t == NULL)
                return;
        free(t->schema);
        free(t->name);
        t->schema = t->name = NULL;
}

int relay_names_parse_table(const char *text, relay_table_name_t *out, char *why, size_t whylen)
{
        const char *dot = strchr(text, '.');
        const char *schema = dot ? text : "public", *name = dot ? dot + 1 : text;
        size_t slen = dot ? (size_t)(dot - text) : strlen("public");

        if (!relay_names_is_ident(schema, slen) || !relay_names_is_ident(name, strlen(name))) {
                relay_err_set(why, whylen,
                              "must be \"schema.table\" or \"table\" (meaning public.table), each "
                              "part %s",
                              RELAY_NAMES_IDENT_RULE);
                return RELAY_EINVAL;
        }
        if (out == NULL)
                return 0;
        out->schema = relay_dupn(schema, slen);
        out->name = strdup(name);
        if (out->schema == NULL || out->name == NULL) {
                relay_names_table_free(out);
                return relay_err(why, whylen, RELAY_ENOMEM, "out of memory");
        }
        return 0;
}

void relay_names_template_free(relay_topic_template_t *t)
{
        if (t == NULL)
                return;
        for (size_t i = 0; i < t->nparts; i++)
                free(t->parts[i].text);
        free(t->parts);
        t->parts = NULL;
        t->nparts = 0;
}

static int add_part(relay_topic_template_t *t, const char *s, size_t n, bool is_column)
{
        relay_topic_part_t *parts = realloc(t->parts, (t->nparts + 1) * sizeof(*parts));

        if (parts == NULL)
                return RELAY_ENOMEM;
        t->parts = parts;
        parts[t->nparts].text = relay_dupn(s, n);
        if (parts[t->nparts].text == NULL)
                return RELAY_ENOMEM;
        parts[t->nparts].len = n;
        parts[t->nparts].is_column = is_column;
        t->nparts++;
        return 0;
}

/*
 * Grammar: template = 1*( literal | "${" column "}" ), literal = 1*topic-char.
 * One pass checks and, when out is set, splits.
 */
int relay_names_parse_template(const char *text, relay_topic_template_t *out, char *why,
                               size_t whylen)
{
        relay_topic_template_t t = {NULL, 0};
        const char *lit = text;
        size_t fixed = 0, ncols = 0; /* characters outside ${...}, placeholders */
        int rc = 0;

        if (text[0] == '\0') {
                relay_err_set(why, whylen, "must not be empty; write a topic name with ${column} "
                              "placeholders, e.g. outbox.event.${aggregatetype}");
                return RELAY_EINVAL;
        }
        for (const char *p = text; rc == 0 && *p != '\0'; p++) {
                if (*p == '$') {
                        const char *name = p + 2;
                        size_t n;
                        if (p[1] != '{') {
                                relay_err_set(why, whylen, "must use \"$\" only to start a "
                                              "${column} placeholder (Kafka topic names cannot "
                                              "contain \"$\")");
                                rc = RELAY_EINVAL;
                                break;
                        }
                        n = strcspn(name, "}${");
                        if (name[n] != '}') {
                                relay_err_set(why, whylen, "must close every \"${\" with \"}\", "
                                              "as in outbox.event.${aggregatetype}");
                                rc = RELAY_EINVAL;
                                break;
                        }
                        if (!relay_names_is_column(name, n)) {
                                relay_err_set(why, whylen, "must name a column in every ${...}: "
                                              "%s", RELAY_NAMES_COLUMN_RULE);
                                rc = RELAY_EINVAL;
                                break;
                        }
                        if (out != NULL && p > lit)
                                rc = add_part(&t, lit, (size_t)(p - lit), false);
                        if (out != NULL && rc == 0)
                                rc = add_part(&t, name, n, true);
                        p = name + n;
                        lit = p + 1;
                        ncols++;
                } else if (!is_topic_char(*p)) {
                        if (isprint((unsigned char)*p))
                                relay_err_set(why, whylen, "must not contain \"%c\": outside "
                                              "${column} a Kafka topic name allows only letters, "
                                              "digits, \".\", \"_\" and \"-\"", *p);
                        else
                                relay_err_set(why, whylen, "must not contain byte 0x%02x: "
                                              "outside ${column} a Kafka topic name allows only "
                                              "letters, digits, \".\", \"_\" and \"-\"",
                                              (unsigned char)*p);
                        rc = RELAY_EINVAL;
                } else {
                        fixed++;
                }
        }
        /* What no value of the columns can turn into a topic Kafka accepts. */
        if (rc == 0) {
                if (fixed > RELAY_TOPIC_MAX) {
                        relay_err_set(why, whylen, "must have at most %d characters outside "
                                      "${column}: a Kafka topic name has at most %d, but this "
                                      "has %zu", RELAY_TOPIC_MAX, RELAY_TOPIC_MAX, fixed);
                        rc = RELAY_EINVAL;
                } else if (ncols == 0 && (strcmp(text, ".") == 0 || strcmp(text, "..") == 0)) {
                        relay_err_set(why, whylen, "must not be \"%s\": Kafka refuses \".\" "
                                      "and \"..\" as topic names", text);
                        rc = RELAY_EINVAL;
                }
        }
        if (rc == 0 && out != NULL && *lit != '\0')
                rc = add_part(&t, lit, strlen(lit), false);
        if (rc == RELAY_ENOMEM)
                relay_err_set(why, whylen, "out of memory");
        if (rc != 0 || out == NULL) {
                relay_names_template_free(&t);
                return rc;
        }
        *out = t;
        return 0;
}
