/*
 * outbox.c - turns an inserted outbox row into a Kafka event.
 *
 * Owns the parsed mapping settings (table name, column names, topic
 * template, extra header columns), the column positions resolved from the
 * outbox table's latest Relation message, and per-event scratch space
 * (topic name, decoded bytea, header array) reused from event to event so the
 * hot path does not allocate once warm.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/outbox.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BYTEAOID 17
/* Kafka's limit on topic names (Topic.MAX_NAME_LENGTH). */
#define TOPIC_MAX 249

enum { COL_ID, COL_AGGTYPE, COL_AGGID, COL_TYPE, COL_PAYLOAD, NCOLS };

static const char *const col_keys[NCOLS] = {
        "outbox.column.id", "outbox.column.aggregate_type", "outbox.column.aggregate_id",
        "outbox.column.type", "outbox.column.payload",
};

typedef struct {
        char *text; /* literal text, or the column name of a ${column} */
        size_t len;
        bool is_column;
        int col; /* resolved position, -1 when the table lacks it */
} segment_t;

typedef struct {
        char *name;
        int col;
} named_col_t;

struct relay_outbox {
        char *nspname;
        char *relname;
        uint32_t relid; /* 0 until the Relation arrived */
        bool bound;

        named_col_t cols[NCOLS];
        named_col_t *extra; /* outbox.headers */
        size_t nextra;
        segment_t *segs; /* topic template */
        size_t nsegs;
        bool payload_bytea;

        char *topic; /* scratch */
        size_t topic_cap;
        char *bytes; /* scratch for decoded bytea */
        size_t bytes_cap;
        relay_header_t *headers; /* scratch: id, type, extras */
};

static char *dupn(const char *s, size_t n)
{
        char *d = malloc(n + 1);
        if (d) {
                memcpy(d, s, n);
                d[n] = '\0';
        }
        return d;
}

void relay_outbox_free(relay_outbox_t *o)
{
        if (!o)
                return;
        free(o->nspname);
        free(o->relname);
        for (int i = 0; i < NCOLS; i++)
                free(o->cols[i].name);
        for (size_t i = 0; i < o->nextra; i++)
                free(o->extra[i].name);
        free(o->extra);
        for (size_t i = 0; i < o->nsegs; i++)
                free(o->segs[i].text);
        free(o->segs);
        free(o->topic);
        free(o->bytes);
        free(o->headers);
        free(o);
}

static int add_segment(relay_outbox_t *o, const char *s, size_t n, bool is_column)
{
        segment_t *segs = realloc(o->segs, (o->nsegs + 1) * sizeof(*segs));
        if (!segs)
                return RELAY_ENOMEM;
        o->segs = segs;
        segs[o->nsegs].text = dupn(s, n);
        if (!segs[o->nsegs].text)
                return RELAY_ENOMEM;
        segs[o->nsegs].len = n;
        segs[o->nsegs].is_column = is_column;
        segs[o->nsegs].col = -1;
        o->nsegs++;
        return 0;
}

/* "outbox.event.${aggregatetype}" -> literal "outbox.event." + column aggregatetype */
static int parse_template(relay_outbox_t *o, const char *tpl, char *err, size_t errlen)
{
        const char *p = tpl;
        while (*p) {
                const char *open = strstr(p, "${");
                if (!open) {
                        return add_segment(o, p, strlen(p), false);
                }
                if (open > p && add_segment(o, p, (size_t)(open - p), false))
                        return RELAY_ENOMEM;
                const char *close = strchr(open + 2, '}');
                if (!close || close == open + 2) {
                        relay_err_set(err, errlen,
                                      "invalid topic.template \"%s\": \"${\" must be followed by a "
                                      "column name and \"}\", e.g. outbox.event.${aggregatetype}",
                                      tpl);
                        return RELAY_EINVAL;
                }
                if (add_segment(o, open + 2, (size_t)(close - open - 2), true))
                        return RELAY_ENOMEM;
                p = close + 1;
        }
        return 0;
}

int relay_outbox_new(relay_outbox_t **out, const relay_outbox_conf_t *conf, char *err, size_t errlen)
{
        relay_outbox_t *o = calloc(1, sizeof(*o));
        int rc = RELAY_ENOMEM;
        if (!o)
                goto fail;

        const char *dot = strchr(conf->table, '.');
        if (dot) {
                o->nspname = dupn(conf->table, (size_t)(dot - conf->table));
                o->relname = strdup(dot + 1);
        } else {
                o->nspname = strdup("public");
                o->relname = strdup(conf->table);
        }
        if (!o->nspname || !o->relname)
                goto fail;
        if (!*o->nspname || !*o->relname || strchr(o->relname, '.')) {
                relay_err_set(err, errlen,
                              "invalid outbox.table \"%s\": use \"schema.table\" or \"table\"",
                              conf->table);
                rc = RELAY_EINVAL;
                goto fail;
        }

        const char *names[NCOLS] = {conf->col_id, conf->col_aggregate_type, conf->col_aggregate_id,
                                    conf->col_type, conf->col_payload};
        for (int i = 0; i < NCOLS; i++) {
                if (!names[i] || !*names[i]) {
                        relay_err_set(err, errlen, "%s must not be empty", col_keys[i]);
                        rc = RELAY_EINVAL;
                        goto fail;
                }
                o->cols[i].name = strdup(names[i]);
                o->cols[i].col = -1;
                if (!o->cols[i].name)
                        goto fail;
        }

        if (conf->headers && *conf->headers) {
                const char *p = conf->headers;
                while (*p) {
                        size_t n = strcspn(p, ",");
                        const char *s = p;
                        while (n && (*s == ' ' || *s == '\t')) {
                                s++;
                                n--;
                        }
                        while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
                                n--;
                        if (n) {
                                named_col_t *e = realloc(o->extra, (o->nextra + 1) * sizeof(*e));
                                if (!e)
                                        goto fail;
                                o->extra = e;
                                e[o->nextra].name = dupn(s, n);
                                e[o->nextra].col = -1;
                                if (!e[o->nextra].name)
                                        goto fail;
                                o->nextra++;
                        }
                        p += strcspn(p, ",");
                        if (*p == ',')
                                p++;
                }
        }
        o->headers = calloc(2 + o->nextra, sizeof(relay_header_t));
        if (!o->headers)
                goto fail;

        rc = parse_template(o, conf->topic_template ? conf->topic_template : "", err, errlen);
        if (rc)
                goto fail;
        if (o->nsegs == 0) {
                relay_err_set(err, errlen, "topic.template must not be empty");
                rc = RELAY_EINVAL;
                goto fail;
        }
        *out = o;
        return 0;
fail:
        if (rc == RELAY_ENOMEM)
                relay_err_set(err, errlen, "out of memory");
        relay_outbox_free(o);
        return rc;
}

static int find_col(const relay_pgo_relation_t *rel, const char *name)
{
        int n = relay_pgo_relation_ncols(rel);
        for (int i = 0; i < n; i++)
                if (strcmp(relay_pgo_relation_colname(rel, i), name) == 0)
                        return i;
        return -1;
}

int relay_outbox_bind(relay_outbox_t *o, const relay_pgo_relation_t *rel)
{
        if (strcmp(relay_pgo_relation_name(rel), o->relname) != 0 ||
            strcmp(relay_pgo_relation_namespace(rel), o->nspname) != 0)
                return 0;
        o->relid = relay_pgo_relation_id(rel);
        o->bound = true;
        for (int i = 0; i < NCOLS; i++)
                o->cols[i].col = find_col(rel, o->cols[i].name);
        for (size_t i = 0; i < o->nextra; i++)
                o->extra[i].col = find_col(rel, o->extra[i].name);
        for (size_t i = 0; i < o->nsegs; i++)
                if (o->segs[i].is_column)
                        o->segs[i].col = find_col(rel, o->segs[i].text);
        int p = o->cols[COL_PAYLOAD].col;
        o->payload_bytea = p >= 0 && relay_pgo_relation_coltype(rel, p) == BYTEAOID;
        return 1;
}

bool relay_outbox_is_outbox(const relay_outbox_t *o, uint32_t relid)
{
        return o->bound && relid == o->relid;
}

static int grow_buf(char **buf, size_t *cap, size_t need)
{
        if (need <= *cap)
                return 0;
        size_t n = *cap ? *cap : 256;
        while (n < need)
                n *= 2;
        char *b = realloc(*buf, n);
        if (!b)
                return RELAY_ENOMEM;
        *buf = b;
        *cap = n;
        return 0;
}

static int hexval(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

/* bytea's text output (bytea_output = hex, the default since 9.0): "\x0a1b..." */
static int decode_bytea(relay_outbox_t *o, const relay_pgo_value_t *v, size_t *outlen)
{
        if (v->len < 2 || v->data[0] != '\\' || v->data[1] != 'x' || (v->len - 2) % 2)
                return RELAY_EMAP;
        size_t n = (v->len - 2) / 2;
        if (grow_buf(&o->bytes, &o->bytes_cap, n + 1))
                return RELAY_ENOMEM;
        for (size_t i = 0; i < n; i++) {
                int hi = hexval(v->data[2 + 2 * i]), lo = hexval(v->data[3 + 2 * i]);
                if (hi < 0 || lo < 0)
                        return RELAY_EMAP;
                o->bytes[i] = (char)(hi << 4 | lo);
        }
        *outlen = n;
        return 0;
}

static bool valid_topic(const char *t, size_t n)
{
        if (n == 0 || n > TOPIC_MAX || (n == 1 && t[0] == '.') || (n == 2 && t[0] == '.' && t[1] == '.'))
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = t[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-'))
                        return false;
        }
        return true;
}

static const relay_pgo_value_t *value_at(const relay_pgo_msg_t *m, int col)
{
        if (col < 0 || col >= m->newtuple.ncols)
                return NULL;
        return &m->newtuple.values[col];
}

/* A column the mapping needs, as text; NULL value -> *present false. */
static int text_col(relay_outbox_t *o, const relay_pgo_msg_t *m, const named_col_t *c,
                    const char *what, const char **s, size_t *len, bool *present, char *err,
                    size_t errlen)
{
        const relay_pgo_value_t *v = value_at(m, c->col);
        if (!v) {
                relay_err_set(err, errlen,
                              "outbox table \"%s.%s\" has no column \"%s\" (%s); add the column "
                              "or set %s to the column that holds it",
                              o->nspname, o->relname, c->name, what, what);
                return RELAY_EMAP;
        }
        if (v->kind == 'n') {
                *s = NULL;
                *len = 0;
                *present = false;
                return 0;
        }
        if (v->kind != 't' && v->kind != 'b') {
                relay_err_set(err, errlen, "outbox column \"%s\" arrived without a value (kind '%c')",
                              c->name, v->kind);
                return RELAY_EMAP;
        }
        *s = v->data;
        *len = v->len;
        *present = true;
        return 0;
}

/* Keep the first failure: its message is the one the caller reports. */
static void first_error(int *first, int rc, char *err, size_t errlen, const char *msg)
{
        if (*first == 0) {
                *first = rc;
                relay_err_set(err, errlen, "%s", msg);
        }
}

/*
 * Every field is filled as far as the row allows even when the row is
 * refused, so a dead-letter copy carries the id, key, payload and headers
 * that exist; the first problem found is the one returned.
 */
int relay_outbox_map(relay_outbox_t *o, const relay_pgo_msg_t *m, int64_t commit_ts,
                     relay_event_t *ev, char *err, size_t errlen)
{
        char msg[RELAY_ERRBUF];
        bool present;
        int rc, first = 0;

        memset(ev, 0, sizeof(*ev));
        /* PostgreSQL epoch microseconds -> Unix epoch milliseconds. */
        ev->timestamp_ms = commit_ts / 1000 + INT64_C(946684800000);

        rc = text_col(o, m, &o->cols[COL_ID], col_keys[COL_ID], &ev->id, &ev->id_len, &present,
                      msg, sizeof(msg));
        if (rc)
                first_error(&first, rc, err, errlen, msg);
        else if (!present) {
                relay_err_set(msg, sizeof(msg),
                              "outbox row has a NULL event id (column \"%s\"); every event needs "
                              "an id for consumers to deduplicate: make the column NOT NULL",
                              o->cols[COL_ID].name);
                first_error(&first, RELAY_EMAP, err, errlen, msg);
        }
        rc = text_col(o, m, &o->cols[COL_AGGID], col_keys[COL_AGGID], &ev->key, &ev->key_len,
                      &present, msg, sizeof(msg));
        if (rc)
                first_error(&first, rc, err, errlen, msg);
        else if (!present) {
                relay_err_set(msg, sizeof(msg),
                              "outbox row has a NULL aggregate id (column \"%s\"), which is the "
                              "Kafka key that keeps an aggregate's events in order: make the "
                              "column NOT NULL",
                              o->cols[COL_AGGID].name);
                first_error(&first, RELAY_EMAP, err, errlen, msg);
        }

        const relay_pgo_value_t *pv = value_at(m, o->cols[COL_PAYLOAD].col);
        if (!pv) {
                relay_err_set(msg, sizeof(msg),
                              "outbox table \"%s.%s\" has no column \"%s\" (%s); add the column "
                              "or set %s",
                              o->nspname, o->relname, o->cols[COL_PAYLOAD].name,
                              col_keys[COL_PAYLOAD], col_keys[COL_PAYLOAD]);
                first_error(&first, RELAY_EMAP, err, errlen, msg);
        } else if (pv->kind == 't' && o->payload_bytea) {
                size_t n;
                rc = decode_bytea(o, pv, &n);
                if (rc == RELAY_ENOMEM) {
                        relay_err_set(err, errlen, "out of memory");
                        return rc;
                }
                if (rc) {
                        first_error(&first, rc, err, errlen,
                                    "bytea payload is not in hex format; set bytea_output = "
                                    "'hex' for the relay's role");
                } else {
                        ev->value = o->bytes;
                        ev->value_len = n;
                }
        } else if (pv->kind == 't' || pv->kind == 'b') {
                ev->value = pv->data;
                ev->value_len = pv->len;
        }

        /* Topic: literal segments and column values. */
        size_t tlen = 0;
        bool topic_ok = true;
        for (size_t i = 0; topic_ok && i < o->nsegs; i++) {
                const segment_t *sg = &o->segs[i];
                const char *s = sg->text;
                size_t n = sg->len;
                if (sg->is_column) {
                        const relay_pgo_value_t *v = value_at(m, sg->col);
                        if (!v) {
                                relay_err_set(msg, sizeof(msg),
                                              "topic.template refers to column \"%s\", which "
                                              "outbox table \"%s.%s\" does not have",
                                              sg->text, o->nspname, o->relname);
                                first_error(&first, RELAY_EMAP, err, errlen, msg);
                                topic_ok = false;
                                break;
                        }
                        if (v->kind != 't') {
                                relay_err_set(msg, sizeof(msg),
                                              "column \"%s\" used in topic.template is NULL; "
                                              "make it NOT NULL",
                                              sg->text);
                                first_error(&first, RELAY_EMAP, err, errlen, msg);
                                topic_ok = false;
                                break;
                        }
                        s = v->data;
                        n = v->len;
                }
                if (grow_buf(&o->topic, &o->topic_cap, tlen + n + 1)) {
                        relay_err_set(err, errlen, "out of memory");
                        return RELAY_ENOMEM;
                }
                memcpy(o->topic + tlen, s, n);
                tlen += n;
        }
        if (topic_ok) {
                o->topic[tlen] = '\0';
                if (valid_topic(o->topic, tlen)) {
                        ev->topic = o->topic;
                } else {
                        relay_err_set(msg, sizeof(msg),
                                      "invalid Kafka topic name \"%.*s\" from topic.template: "
                                      "topic names are 1 to 249 characters of a-z, A-Z, 0-9, "
                                      "'.', '_' and '-'",
                                      (int)(tlen > 300 ? 300 : tlen), o->topic);
                        first_error(&first, RELAY_EMAP, err, errlen, msg);
                }
        }

        /* Headers: id, type, then the extra columns (NULL values stay NULL). */
        size_t nh = 0;
        const char *hv;
        size_t hl;
        if (ev->id) {
                o->headers[nh].name = "id";
                o->headers[nh].value = ev->id;
                o->headers[nh++].len = ev->id_len;
        }
        rc = text_col(o, m, &o->cols[COL_TYPE], col_keys[COL_TYPE], &hv, &hl, &present, msg,
                      sizeof(msg));
        if (rc) {
                first_error(&first, rc, err, errlen, msg);
        } else {
                o->headers[nh].name = "type";
                o->headers[nh].value = hv;
                o->headers[nh++].len = hl;
        }
        for (size_t i = 0; i < o->nextra; i++) {
                rc = text_col(o, m, &o->extra[i], "outbox.headers", &hv, &hl, &present, msg,
                              sizeof(msg));
                if (rc) {
                        first_error(&first, rc, err, errlen, msg);
                        continue;
                }
                o->headers[nh].name = o->extra[i].name;
                o->headers[nh].value = hv;
                o->headers[nh++].len = hl;
        }
        ev->headers = o->headers;
        ev->nheaders = nh;
        return first;
}
