/*
 * outbox.c - turns an inserted outbox row into a Kafka event.
 *
 * Reads the mapping from the settings (borrowed: table name, column names,
 * parsed topic template, extra header columns) and owns the column
 * positions resolved from the outbox table's latest Relation message and
 * per-event scratch space (topic name, decoded bytea, header array) reused
 * from event to event so the hot path does not allocate once warm. For
 * logical decoding messages (outbox.source = messages or both) it also
 * owns the parsed body of the last message and the strings made from it,
 * which the event borrows until the next mapping.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/outbox.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#define BYTEAOID 17

enum { COL_ID, COL_AGGTYPE, COL_AGGID, COL_TYPE, COL_PAYLOAD, NCOLS };

static const char *const col_keys[NCOLS] = {
        "outbox.column.id", "outbox.column.aggregate_type", "outbox.column.aggregate_id",
        "outbox.column.type", "outbox.column.payload",
};

/* A column the mapping reads, by name (borrowed from the settings), and where the table has it. */
typedef struct {
        const char *name;
        int col; /* -1 when the table lacks it */
} named_col_t;

struct relay_outbox {
        const relay_settings_t *set;
        uint32_t relid; /* 0 until the Relation arrived */
        bool bound;

        named_col_t cols[NCOLS];
        named_col_t *extra; /* outbox.headers */
        size_t nextra;
        int *segcol; /* per topic template part: the column's position, or -1 */
        bool payload_bytea;

        char *topic; /* scratch */
        size_t topic_cap;
        char *bytes; /* scratch for decoded bytea */
        size_t bytes_cap;
        relay_header_t *headers; /* scratch: id, type, extras */

        json_t *body;  /* the last message's parsed body */
        char **strs;   /* strings made for the last message (numbers, JSON text) */
        size_t nstrs, strs_cap;
        relay_header_t *mheaders; /* scratch: RELAY_EVENT_MAX_HEADERS + 1 */
};

static void message_reset(relay_outbox_t *o)
{
        json_decref(o->body);
        o->body = NULL;
        for (size_t i = 0; i < o->nstrs; i++)
                free(o->strs[i]);
        o->nstrs = 0;
}

void relay_outbox_free(relay_outbox_t *o)
{
        if (!o)
                return;
        free(o->extra);
        free(o->segcol);
        free(o->topic);
        free(o->bytes);
        free(o->headers);
        message_reset(o);
        free(o->strs);
        free(o->mheaders);
        free(o);
}

int relay_outbox_new(relay_outbox_t **out, const relay_settings_t *set, char *err, size_t errlen)
{
        relay_outbox_t *o = calloc(1, sizeof(*o));
        const char *names[NCOLS];

        if (!o)
                goto nomem;
        o->set = set;
        names[COL_ID] = set->outbox_column.id;
        names[COL_AGGTYPE] = set->outbox_column.aggregate_type;
        names[COL_AGGID] = set->outbox_column.aggregate_id;
        names[COL_TYPE] = set->outbox_column.type;
        names[COL_PAYLOAD] = set->outbox_column.payload;
        for (int i = 0; i < NCOLS; i++)
                o->cols[i] = (named_col_t){names[i], -1};
        o->nextra = set->n_outbox_headers;
        o->extra = calloc(o->nextra + 1, sizeof(*o->extra));
        o->segcol = calloc(set->topic_template.nparts + 1, sizeof(*o->segcol));
        o->headers = calloc(2 + o->nextra, sizeof(relay_header_t));
        o->mheaders = calloc(RELAY_EVENT_MAX_HEADERS + 1, sizeof(relay_header_t));
        if (!o->extra || !o->segcol || !o->headers || !o->mheaders)
                goto nomem;
        for (size_t i = 0; i < o->nextra; i++)
                o->extra[i] = (named_col_t){set->outbox_headers[i], -1};
        for (size_t i = 0; i < set->topic_template.nparts; i++)
                o->segcol[i] = -1;
        *out = o;
        return 0;
nomem:
        relay_err_set(err, errlen, "out of memory");
        relay_outbox_free(o);
        return RELAY_ENOMEM;
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
        const relay_topic_template_t *tpl = &o->set->topic_template;

        if (o->set->outbox_source == RELAY_SOURCE_MESSAGES)
                return 0;
        if (strcmp(relay_pgo_relation_name(rel), o->set->outbox_table.name) != 0 ||
            strcmp(relay_pgo_relation_namespace(rel), o->set->outbox_table.schema) != 0)
                return 0;
        o->relid = relay_pgo_relation_id(rel);
        o->bound = true;
        for (int i = 0; i < NCOLS; i++)
                o->cols[i].col = find_col(rel, o->cols[i].name);
        for (size_t i = 0; i < o->nextra; i++)
                o->extra[i].col = find_col(rel, o->extra[i].name);
        for (size_t i = 0; i < tpl->nparts; i++)
                o->segcol[i] = tpl->parts[i].is_column ? find_col(rel, tpl->parts[i].text) : -1;
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

/* bytea's text output (bytea_output = hex, the default since 9.0): "\x0a1b..." */
static int decode_bytea(relay_outbox_t *o, const relay_pgo_value_t *v, size_t *outlen)
{
        if (v->len < 2 || v->data[0] != '\\' || v->data[1] != 'x' || (v->len - 2) % 2)
                return RELAY_EMAP;
        size_t n = (v->len - 2) / 2;
        if (grow_buf(&o->bytes, &o->bytes_cap, n + 1))
                return RELAY_ENOMEM;
        for (size_t i = 0; i < n; i++) {
                int hi = relay_hexval(v->data[2 + 2 * i]), lo = relay_hexval(v->data[3 + 2 * i]);
                if (hi < 0 || lo < 0)
                        return RELAY_EMAP;
                o->bytes[i] = (char)(hi << 4 | lo);
        }
        *outlen = n;
        return 0;
}

static const relay_pgo_value_t *value_at(const relay_pgo_insert_t *m, int col)
{
        if (col < 0 || col >= m->newtuple.ncols)
                return NULL;
        return &m->newtuple.values[col];
}

/* A column the mapping needs, as text; NULL value -> *present false. */
static int text_col(relay_outbox_t *o, const relay_pgo_insert_t *m, const named_col_t *c,
                    const char *what, const char **s, size_t *len, bool *present, char *err,
                    size_t errlen)
{
        const relay_pgo_value_t *v = value_at(m, c->col);
        if (!v) {
                relay_err_set(err, errlen,
                              "outbox table \"%s.%s\" has no column \"%s\" (%s); add the column "
                              "or set %s to the column that holds it",
                              o->set->outbox_table.schema, o->set->outbox_table.name, c->name,
                              what, what);
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
int relay_outbox_map(relay_outbox_t *o, const relay_pgo_insert_t *m, int64_t commit_ts,
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
                              o->set->outbox_table.schema, o->set->outbox_table.name,
                              o->cols[COL_PAYLOAD].name, col_keys[COL_PAYLOAD],
                              col_keys[COL_PAYLOAD]);
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
        const relay_topic_template_t *tpl = &o->set->topic_template;
        for (size_t i = 0; topic_ok && i < tpl->nparts; i++) {
                const relay_topic_part_t *sg = &tpl->parts[i];
                const char *s = sg->text;
                size_t n = sg->len;
                if (sg->is_column) {
                        const relay_pgo_value_t *v = value_at(m, o->segcol[i]);
                        if (!v) {
                                relay_err_set(msg, sizeof(msg),
                                              "topic.template refers to column \"%s\", which "
                                              "outbox table \"%s.%s\" does not have",
                                              sg->text, o->set->outbox_table.schema,
                                              o->set->outbox_table.name);
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
                if (relay_names_is_topic(o->topic, tlen)) {
                        ev->topic = o->topic;
                } else {
                        relay_err_set(msg, sizeof(msg),
                                      "invalid Kafka topic name \"%.*s\" from topic.template: "
                                      "topic names are 1 to %d characters of a-z, A-Z, 0-9, "
                                      "'.', '_' and '-'",
                                      (int)(tlen > 300 ? 300 : tlen), o->topic, RELAY_TOPIC_MAX);
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
        /* Never a silent truncation: the row is refused, and a dead-letter
         * copy carries the first RELAY_EVENT_MAX_HEADERS with the reason. */
        if (nh > RELAY_EVENT_MAX_HEADERS) {
                relay_err_set(msg, sizeof(msg),
                              "outbox row would carry %zu headers (id, type and %zu outbox.headers "
                              "columns), more than the %d an event may have; list at most %d "
                              "columns in outbox.headers",
                              nh, o->nextra, RELAY_EVENT_MAX_HEADERS, RELAY_EVENT_MAX_HEADERS - 2);
                first_error(&first, RELAY_EMAP, err, errlen, msg);
                nh = RELAY_EVENT_MAX_HEADERS;
        }
        ev->headers = o->headers;
        ev->nheaders = nh;
        return first;
}

/* --- logical decoding messages ------------------------------------------ */

bool relay_outbox_wants_message(const relay_outbox_t *o, const relay_pgo_message_t *m)
{
        return o->set->outbox_source != RELAY_SOURCE_TABLE && m->transactional &&
               strcmp(m->prefix, o->set->outbox_message_prefix) == 0;
}

/* Keep s (malloc'd) until the next message; NULL when out of memory. */
static char *keep(relay_outbox_t *o, char *s)
{
        if (!s)
                return NULL;
        if (o->nstrs == o->strs_cap) {
                size_t n = o->strs_cap ? o->strs_cap * 2 : 16;
                char **g = realloc(o->strs, n * sizeof(*g));
                if (!g) {
                        free(s);
                        return NULL;
                }
                o->strs = g;
                o->strs_cap = n;
        }
        o->strs[o->nstrs++] = s;
        return s;
}

/*
 * A JSON value as header or key text: a string as it is, null as NULL,
 * anything else as its compact JSON text. Returns 0, RELAY_ENOMEM.
 */
static int value_text(relay_outbox_t *o, const json_t *v, const char **s, size_t *len)
{
        if (!v || json_is_null(v)) {
                *s = NULL;
                *len = 0;
                return 0;
        }
        if (json_is_string(v)) {
                *s = json_string_value(v);
                *len = json_string_length(v);
                return 0;
        }
        char *t = keep(o, json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER));
        if (!t)
                return RELAY_ENOMEM;
        *s = t;
        *len = strlen(t);
        return 0;
}

/* A scalar field the event needs (string or number); false when absent,
 * null, empty or another type. */
static int scalar_field(relay_outbox_t *o, const char *name, const char **s, size_t *len,
                        bool *ok)
{
        const json_t *v = json_object_get(o->body, name);
        *ok = false;
        *s = NULL;
        *len = 0;
        if (!v || !(json_is_string(v) || json_is_number(v)))
                return 0;
        int rc = value_text(o, v, s, len);
        if (rc)
                return rc;
        *ok = *len > 0;
        return 0;
}

/* Skip one JSON value of valid JSON (jansson has checked it); returns the
 * position after it. */
static size_t skip_value(const char *b, size_t n, size_t i)
{
        int depth = 0;
        bool in_str = false;
        for (; i < n; i++) {
                char c = b[i];
                if (in_str) {
                        if (c == '\\')
                                i++;
                        else if (c == '"') {
                                in_str = false;
                                if (depth == 0)
                                        return i + 1;
                        }
                } else if (c == '"') {
                        in_str = true;
                } else if (c == '{' || c == '[') {
                        depth++;
                } else if (c == '}' || c == ']') {
                        if (depth == 0)
                                return i; /* end of an enclosing container */
                        if (--depth == 0)
                                return i + 1;
                } else if (depth == 0 && (c == ',' || c == ' ' || c == '\t' || c == '\n' ||
                                          c == '\r')) {
                        return i;
                }
        }
        return n;
}

static size_t skip_ws(const char *b, size_t n, size_t i)
{
        while (i < n && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r'))
                i++;
        return i;
}

/*
 * The bytes of the top-level member name's value in a JSON object, as the
 * application wrote them (so a payload built by jsonb arrives exactly as
 * the table path sends a jsonb column). False when not found this way (a
 * key written with escapes): the caller serialises the parsed value.
 */
static bool member_span(const char *b, size_t n, const char *name, const char **start,
                        size_t *len)
{
        size_t i = skip_ws(b, n, 0), nl = strlen(name);
        if (i >= n || b[i] != '{')
                return false;
        i++;
        for (;;) {
                i = skip_ws(b, n, i);
                if (i >= n || b[i] != '"')
                        return false;
                size_t k = i + 1, e = skip_value(b, n, i);
                if (e < 2 || e > n)
                        return false;
                bool match = e - 1 - k == nl && memcmp(b + k, name, nl) == 0;
                i = skip_ws(b, n, e);
                if (i >= n || b[i] != ':')
                        return false;
                i = skip_ws(b, n, i + 1);
                size_t vend = skip_value(b, n, i);
                if (match) {
                        *start = b + i;
                        *len = vend - i;
                        return vend > i;
                }
                i = skip_ws(b, n, vend);
                if (i >= n || b[i] != ',')
                        return false;
                i++;
        }
}

int relay_outbox_map_message(relay_outbox_t *o, const relay_pgo_message_t *m, int64_t commit_ts,
                             relay_event_t *ev, char *err, size_t errlen)
{
        char msg[RELAY_ERRBUF];
        const char *pfx = o->set->outbox_message_prefix;
        json_error_t je;
        bool ok;
        int rc, first = 0;

        memset(ev, 0, sizeof(*ev));
        ev->timestamp_ms = commit_ts / 1000 + INT64_C(946684800000);
        message_reset(o);

        o->body = json_loadb(m->content, m->content_len, JSON_REJECT_DUPLICATES, &je);
        if (!o->body || !json_is_object(o->body)) {
                /* The whole content is the dead-letter copy's value. */
                ev->value = m->content;
                ev->value_len = m->content_len;
                if (o->body)
                        relay_err_set(err, errlen,
                                      "outbox message (prefix \"%s\") is JSON but not an object; "
                                      "the body must be {\"id\": ..., \"aggregatetype\": ..., "
                                      "\"aggregateid\": ..., \"type\": ..., \"payload\": ...}",
                                      pfx);
                else
                        relay_err_set(err, errlen,
                                      "outbox message (prefix \"%s\") is not valid JSON: %s at "
                                      "byte %d; the body must be a JSON object with id, "
                                      "aggregatetype, aggregateid, type and payload (see "
                                      "sql/005_outbox_emit.sql)",
                                      pfx, je.text, je.position);
                json_decref(o->body);
                o->body = NULL;
                return RELAY_EMAP;
        }

        static const char *const required[] = {"id", "aggregateid", "type"};
        const char **dst[] = {&ev->id, &ev->key, NULL};
        size_t *dstlen[] = {&ev->id_len, &ev->key_len, NULL};
        const char *type = NULL;
        size_t type_len = 0;
        dst[2] = &type;
        dstlen[2] = &type_len;
        for (int i = 0; i < 3; i++) {
                if ((rc = scalar_field(o, required[i], dst[i], dstlen[i], &ok)))
                        goto nomem;
                if (!ok) {
                        *dst[i] = NULL;
                        *dstlen[i] = 0;
                        relay_err_set(msg, sizeof(msg),
                                      "outbox message (prefix \"%s\") has no \"%s\": the body "
                                      "needs a non-empty string for %s",
                                      pfx, required[i], required[i]);
                        first_error(&first, RELAY_EMAP, err, errlen, msg);
                }
        }

        /* The value: the payload as written. */
        const json_t *pv = json_object_get(o->body, "payload");
        if (pv && json_is_string(pv)) {
                ev->value = json_string_value(pv);
                ev->value_len = json_string_length(pv);
        } else if (pv && !json_is_null(pv)) {
                if (!member_span(m->content, m->content_len, "payload", &ev->value, &ev->value_len) &&
                    (rc = value_text(o, pv, &ev->value, &ev->value_len)))
                        goto nomem;
        }

        /* Topic: literal segments and top-level fields. */
        size_t tlen = 0;
        bool topic_ok = true;
        const relay_topic_template_t *tpl = &o->set->topic_template;
        for (size_t i = 0; i < tpl->nparts; i++) {
                const relay_topic_part_t *sg = &tpl->parts[i];
                const char *s = sg->text;
                size_t n = sg->len;
                if (sg->is_column) {
                        if ((rc = scalar_field(o, sg->text, &s, &n, &ok)))
                                goto nomem;
                        if (!ok) {
                                relay_err_set(msg, sizeof(msg),
                                              "outbox message (prefix \"%s\") has no string "
                                              "\"%s\", which topic.template uses",
                                              pfx, sg->text);
                                first_error(&first, RELAY_EMAP, err, errlen, msg);
                                topic_ok = false;
                                break;
                        }
                }
                if (grow_buf(&o->topic, &o->topic_cap, tlen + n + 1)) {
                        relay_err_set(err, errlen, "out of memory");
                        return RELAY_ENOMEM;
                }
                memcpy(o->topic + tlen, s, n);
                tlen += n;
        }
        if (topic_ok) {
                if (grow_buf(&o->topic, &o->topic_cap, tlen + 1)) {
                        relay_err_set(err, errlen, "out of memory");
                        return RELAY_ENOMEM;
                }
                o->topic[tlen] = '\0';
                if (relay_names_is_topic(o->topic, tlen)) {
                        ev->topic = o->topic;
                } else {
                        relay_err_set(msg, sizeof(msg),
                                      "invalid Kafka topic name \"%.*s\" from topic.template: "
                                      "topic names are 1 to %d characters of a-z, A-Z, 0-9, "
                                      "'.', '_' and '-'",
                                      (int)(tlen > 300 ? 300 : tlen), o->topic, RELAY_TOPIC_MAX);
                        first_error(&first, RELAY_EMAP, err, errlen, msg);
                }
        }

        /* Headers: id, type, the outbox.headers fields, then "headers". */
        size_t nh = 0, want = 0;
        if (ev->id) {
                o->mheaders[nh++] = (relay_header_t){"id", ev->id, ev->id_len};
                want++;
        }
        if (type) {
                o->mheaders[nh++] = (relay_header_t){"type", type, type_len};
                want++;
        }
        for (size_t i = 0; i < o->nextra; i++) {
                want++;
                if (nh >= RELAY_EVENT_MAX_HEADERS)
                        continue;
                const char *hv;
                size_t hl;
                if ((rc = value_text(o, json_object_get(o->body, o->extra[i].name), &hv, &hl)))
                        goto nomem;
                o->mheaders[nh++] = (relay_header_t){o->extra[i].name, hv, hl};
        }
        json_t *hdrs = json_object_get(o->body, "headers");
        if (hdrs && !json_is_null(hdrs) && !json_is_object(hdrs)) {
                relay_err_set(msg, sizeof(msg),
                              "outbox message (prefix \"%s\") has \"headers\" that is not an "
                              "object; write {\"name\": \"value\", ...}",
                              pfx);
                first_error(&first, RELAY_EMAP, err, errlen, msg);
        } else if (hdrs && json_is_object(hdrs)) {
                const char *name;
                json_t *v;
                json_object_foreach(hdrs, name, v) {
                        want++;
                        if (nh >= RELAY_EVENT_MAX_HEADERS)
                                continue;
                        const char *hv;
                        size_t hl;
                        if ((rc = value_text(o, v, &hv, &hl)))
                                goto nomem;
                        o->mheaders[nh++] = (relay_header_t){name, hv, hl};
                }
        }
        if (want > RELAY_EVENT_MAX_HEADERS) {
                relay_err_set(msg, sizeof(msg),
                              "outbox message would carry %zu headers (id, type, outbox.headers "
                              "and its \"headers\"), more than the %d an event may have",
                              want, RELAY_EVENT_MAX_HEADERS);
                first_error(&first, RELAY_EMAP, err, errlen, msg);
        }
        ev->headers = o->mheaders;
        ev->nheaders = nh;
        return first;
nomem:
        relay_err_set(err, errlen, "out of memory");
        return RELAY_ENOMEM;
}
