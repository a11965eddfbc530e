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
#include "relay/props.h"

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "relay/expand.h"
#include "relay/format.h"
#include "relay/route.h"

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
        int col;           /* -1 when the table lacks it */
        const char *alias; /* header or envelope field name (extra and envelope columns) */
} named_col_t;

struct relay_outbox {
        const relay_settings_t *set;
        uint32_t relid; /* the bound relation's; 0 until a Relation arrived */
        bool bound;
        const relay_table_name_t *table; /* the bound one of outbox.table's tables */
        uint32_t *relids; /* per outbox.table table: its relation's relid, 0 until bound */

        named_col_t cols[NCOLS];
        named_col_t *extra; /* outbox.headers, then header placements */
        size_t nextra;
        named_col_t *env; /* envelope placements */
        size_t nenv;
        relay_format_kind_t *env_kind;
        bool *env_optional;
        named_col_t part; /* the last partition placement; name NULL if none */
        uint32_t part_type;
        int route_col; /* route.by.field: the envelope schema's name */
        char *schema_name; /* the envelope struct's, fixed by the first event (as Debezium's cache) */
        int ver_col;       /* table.field.event.schema.version's position, -1 if none */
        struct {
                char *text; /* the version's digits */
                char *name; /* its struct's name, fixed by its first event */
        } *vnames;          /* Debezium caches a schema per version */
        size_t nvnames;
        int *segcol; /* per topic template part: the column's position, or -1 */
        bool payload_bytea;

        char *topic; /* scratch */
        size_t topic_cap;
        bool topic_oom; /* topic_append ran out of memory; topic_finish says so */
        char *bytes; /* scratch for decoded bytea */
        size_t bytes_cap;
        relay_header_t *headers; /* scratch: id, type, extras */

        json_t *body;  /* the last message's parsed body */
        char **strs;   /* strings made for the last message (numbers, JSON text) */
        size_t nstrs, strs_cap;
        relay_header_t *mheaders; /* scratch: RELAY_EVENT_MAX_HEADERS + 1 */
        /* format.profile other than raw: encodings, column schemas, scratch. */
        bool encode;
        relay_format_enc_t kenc, venc, henc;
        relay_format_kind_t kind[NCOLS];
        bool optional[NCOLS];
        relay_format_kind_t *xkind; /* per outbox.headers column */
        bool *xoptional;
        relay_format_kind_t *hkind; /* per header of the event being mapped */
        bool *hoptional;
        size_t *hoff;
        relay_fmtbuf_t kbuf, vbuf, hbuf;
        int ts_col;         /* table.field.event.timestamp's position, -1 if none or absent */
        uint32_t ts_type;   /* its type OID */
        relay_route_t *route; /* route.topic.regex when not the default; NULL otherwise */
        int trace_col;        /* tracing.span.context.field's position, -1 if none or absent */
        char *trace;          /* scratch: the trace headers' values */
        size_t trace_cap;
        char *tline;          /* scratch: one logical line of the tracing column */
        size_t tline_cap;
        bool context_headers; /* format.debezium.topic_prefix set */
        char run_id[37];      /* the __debezium.context.runId of this mapping */
};

static void message_reset(relay_outbox_t *o)
{
        json_decref(o->body);
        o->body = NULL;
        for (size_t i = 0; i < o->nstrs; i++)
                free(o->strs[i]);
        o->nstrs = 0;
}
/* Debezium's context headers (DebeziumHeaderProducer), before the router's. */
#define NCONTEXT 4
/* W3C trace context headers from tracing.span.context.field: traceparent,
 * tracestate, baggage. */
#define NTRACE 3

void relay_outbox_free(relay_outbox_t *o)
{
        if (!o)
                return;
        relay_route_free(o->route);
        message_reset(o);
        relay_fmtbuf_free(&o->kbuf);
        relay_fmtbuf_free(&o->vbuf);
        relay_fmtbuf_free(&o->hbuf);
        for (size_t i = 0; i < o->nvnames; i++)
                RELAY_FREE_ALL(o->vnames[i].text, o->vnames[i].name);
        RELAY_FREE_ALL(o->relids, o->extra, o->env, o->env_kind, o->env_optional, o->schema_name,
                       o->vnames, o->segcol, o->trace, o->tline, o->topic, o->bytes, o->headers,
                       o->strs, o->mheaders, o->xkind, o->xoptional, o->hkind, o->hoptional, o->hoff,
                       o);
}

/* A version 4 UUID, as java.util.UUID.randomUUID() prints it: Debezium's
 * runId is new at every connector start, so is ours at every mapping. */
static void random_uuid(char out[37])
{
        unsigned char b[16] = {0};
        FILE *f = fopen("/dev/urandom", "rb");
        if (!f || fread(b, 1, sizeof(b), f) != sizeof(b)) {
                /* No entropy source: still a well-formed, process-unique id. */
                uint64_t v = (uint64_t)time(NULL) << 20 ^ (uint64_t)getpid();
                memcpy(b, &v, sizeof(v));
        }
        if (f)
                fclose(f);
        b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
        b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
        static const char hex[] = "0123456789abcdef";
        size_t o = 0;
        for (int i = 0; i < 16; i++) {
                if (i == 4 || i == 6 || i == 8 || i == 10)
                        out[o++] = '-';
                out[o++] = hex[b[i] >> 4];
                out[o++] = hex[b[i] & 15];
        }
        out[o] = '\0';
}

static bool not_null(const relay_settings_t *set, const char *col)
{
        for (size_t i = 0; i < set->n_format_not_null; i++)
                if (strcmp(set->format_not_null[i], col) == 0)
                        return true;
        return false;
}

int relay_outbox_new(relay_outbox_t **out, const relay_settings_t *set, char *err, size_t errlen)
{
        relay_outbox_t *o = calloc(1, sizeof(*o));
        const char *names[NCOLS];

        if (!o)
                goto nomem;
        o->set = set;
        o->table = &set->outbox_table;
        if (!(o->relids = calloc(set->n_outbox_tables + 1, sizeof(*o->relids))))
                goto nomem;
        names[COL_ID] = set->outbox_column.id;
        names[COL_AGGTYPE] = set->outbox_column.aggregate_type;
        names[COL_AGGID] = set->outbox_column.aggregate_id;
        names[COL_TYPE] = set->outbox_column.type;
        names[COL_PAYLOAD] = set->outbox_column.payload;
        for (int i = 0; i < NCOLS; i++)
                o->cols[i] = (named_col_t){names[i], -1, names[i]};
        o->nextra = set->n_outbox_headers;
        for (size_t i = 0; i < set->n_additional; i++) {
                if (set->additional[i].placement == RELAY_PLACE_HEADER)
                        o->nextra++;
                else if (set->additional[i].placement == RELAY_PLACE_ENVELOPE)
                        o->nenv++;
        }
        o->extra = calloc(o->nextra + 1, sizeof(*o->extra));
        o->env = calloc(o->nenv + 1, sizeof(*o->env));
        o->env_kind = calloc(o->nenv + 1, sizeof(*o->env_kind));
        o->env_optional = calloc(o->nenv + 1, sizeof(*o->env_optional));
        o->part = (named_col_t){NULL, -1, NULL};
        o->segcol = calloc(set->topic_template.nparts + 1, sizeof(*o->segcol));
        o->headers = calloc(2 + NCONTEXT + NTRACE + o->nextra, sizeof(relay_header_t));
        o->mheaders = calloc(RELAY_EVENT_MAX_HEADERS + 1, sizeof(relay_header_t));
        if (!o->extra || !o->segcol || !o->headers || !o->mheaders || !o->env || !o->env_kind ||
            !o->env_optional)
                goto nomem;
        size_t nx = 0, ne = 0;
        for (size_t i = 0; i < set->n_outbox_headers; i++, nx++)
                o->extra[nx] = (named_col_t){set->outbox_headers[i], -1, set->outbox_headers[i]};
        for (size_t i = 0; i < set->n_additional; i++) {
                const relay_additional_field_t *a = &set->additional[i];
                named_col_t c = {a->column, -1, a->alias};
                if (a->placement == RELAY_PLACE_HEADER)
                        o->extra[nx++] = c;
                else if (a->placement == RELAY_PLACE_ENVELOPE)
                        o->env[ne++] = c;
                else
                        o->part = c;
        }
        o->encode = set->format_profile != RELAY_PROFILE_RAW;
        relay_format_encodings(set->format_profile, &o->kenc, &o->venc, &o->henc);
        if (o->encode) {
                o->xkind = calloc(o->nextra + 1, sizeof(*o->xkind));
                o->xoptional = calloc(o->nextra + 1, sizeof(*o->xoptional));
                o->hkind = calloc(2 + NCONTEXT + NTRACE + o->nextra, sizeof(*o->hkind));
                o->hoptional = calloc(2 + NCONTEXT + NTRACE + o->nextra, sizeof(*o->hoptional));
                o->hoff = calloc(2 + NCONTEXT + NTRACE + o->nextra, sizeof(*o->hoff));
                if (!o->xkind || !o->xoptional || !o->hkind || !o->hoptional || !o->hoff)
                        goto nomem;
                for (int i = 0; i < NCOLS; i++)
                        o->optional[i] = !not_null(set, names[i]);
                for (size_t i = 0; i < o->nextra; i++)
                        o->xoptional[i] = !not_null(set, o->extra[i].name);
                for (size_t i = 0; i < o->nenv; i++)
                        o->env_optional[i] = !not_null(set, o->env[i].name);
                o->context_headers = set->format_debezium_topic_prefix[0] != '\0';
                if (o->context_headers)
                        random_uuid(o->run_id);
        }
        for (size_t i = 0; i < set->topic_template.nparts; i++)
                o->segcol[i] = -1;
        o->trace_col = -1;
        if (set->route_regex) {
                int rc = relay_route_new(&o->route, set->route_regex, set->route_replacement, err,
                                         errlen);
                if (rc) {
                        relay_outbox_free(o);
                        return rc;
                }
        }
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

/*
 * A relation bound as an outbox table that comes again under another name
 * (ALTER TABLE ... RENAME or SET SCHEMA, in the publication still by its
 * relid) is no longer one: outbox.table names the table, as a relay that
 * starts after the rename sees it. Its column positions were those of the
 * old definition, so its rows would have been mapped from the wrong
 * columns. 2 when relid was bound, 0 otherwise.
 */
static int unbind(relay_outbox_t *o, uint32_t relid)
{
        int rc = 0;
        for (size_t i = 0; i < o->set->n_outbox_tables; i++)
                if (relid != 0 && o->relids[i] == relid) {
                        o->relids[i] = 0;
                        rc = 2;
                }
        if (rc && o->relid == relid) {
                o->relid = 0;
                o->bound = false;
        }
        return rc;
}

int relay_outbox_bind(relay_outbox_t *o, const relay_pgo_relation_t *rel)
{
        const relay_topic_template_t *tpl = &o->set->topic_template;

        if (o->set->outbox_source == RELAY_SOURCE_MESSAGES)
                return 0;
        size_t t = 0;
        const relay_table_name_t *tables = o->set->outbox_tables;
        while (t < o->set->n_outbox_tables &&
               (strcmp(relay_pgo_relation_name(rel), tables[t].name) != 0 ||
                strcmp(relay_pgo_relation_namespace(rel), tables[t].schema) != 0))
                t++;
        if (t == o->set->n_outbox_tables)
                return unbind(o, relay_pgo_relation_id(rel));
        /* A table dropped and created again comes with a new relid, whose
         * Relation precedes its rows. */
        o->relids[t] = relay_pgo_relation_id(rel);
        o->table = &tables[t];
        o->relid = o->relids[t];
        o->bound = true;
        for (int i = 0; i < NCOLS; i++)
                o->cols[i].col = find_col(rel, o->cols[i].name);
        for (size_t i = 0; i < o->nextra; i++)
                o->extra[i].col = find_col(rel, o->extra[i].name);
        for (size_t i = 0; i < o->nenv; i++) {
                o->env[i].col = find_col(rel, o->env[i].name);
                o->env_kind[i] = o->env[i].col < 0 ? RELAY_KIND_UNSUPPORTED
                                                   : relay_format_kind(relay_pgo_relation_coltype(
                                                             rel, o->env[i].col));
        }
        o->route_col = find_col(rel, o->set->route_by_field);
        o->ver_col = o->set->schema_version_column[0] ? find_col(rel, o->set->schema_version_column)
                                                      : -1;
        if (o->part.name) {
                o->part.col = find_col(rel, o->part.name);
                o->part_type = o->part.col >= 0 ? relay_pgo_relation_coltype(rel, o->part.col) : 0;
        }
        for (size_t i = 0; i < tpl->nparts; i++)
                o->segcol[i] = tpl->parts[i].is_column ? find_col(rel, tpl->parts[i].text) : -1;
        o->ts_col = o->set->event_timestamp_column[0]
                            ? find_col(rel, o->set->event_timestamp_column)
                            : -1;
        o->ts_type = o->ts_col >= 0 ? relay_pgo_relation_coltype(rel, o->ts_col) : 0;
        o->trace_col = o->set->tracing_context_column[0]
                               ? find_col(rel, o->set->tracing_context_column)
                               : -1;
        int p = o->cols[COL_PAYLOAD].col;
        o->payload_bytea = p >= 0 && relay_pgo_relation_coltype(rel, p) == BYTEAOID;
        if (o->encode) {
                for (int i = 0; i < NCOLS; i++)
                        o->kind[i] = o->cols[i].col < 0 ? RELAY_KIND_UNSUPPORTED
                                                        : relay_format_kind(relay_pgo_relation_coltype(
                                                                  rel, o->cols[i].col));
                for (size_t i = 0; i < o->nextra; i++)
                        o->xkind[i] = o->extra[i].col < 0
                                              ? RELAY_KIND_UNSUPPORTED
                                              : relay_format_kind(relay_pgo_relation_coltype(
                                                        rel, o->extra[i].col));
        }
        return 1;
}

bool relay_outbox_is_outbox(const relay_outbox_t *o, uint32_t relid)
{
        for (size_t i = 0; i < o->set->n_outbox_tables; i++)
                if (o->relids[i] == relid && relid != 0)
                        return true;
        return false;
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
                              o->table->schema, o->table->name, c->name,
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

static int route_topic(relay_outbox_t *o, size_t *tlen, char *err, size_t errlen);

/*
 * The topic is built in o->topic, one template part at a time, with room
 * kept for the terminating NUL. Running out of memory is remembered and
 * reported once, by topic_finish.
 */
static void topic_append(relay_outbox_t *o, size_t *tlen, const char *s, size_t n)
{
        if (o->topic_oom || grow_buf(&o->topic, &o->topic_cap, *tlen + n + 1)) {
                o->topic_oom = true;
                return;
        }
        memcpy(o->topic + *tlen, s, n);
        *tlen += n;
}

/*
 * Ends the built topic and sets ev->topic, or records why Kafka would refuse
 * it as the row's mapping error; fails (RELAY_ENOMEM, err set) only for want
 * of memory.
 */
static int topic_finish(relay_outbox_t *o, size_t tlen, relay_event_t *ev, int *first, char *err,
                        size_t errlen)
{
        char msg[RELAY_ERRBUF];

        if (o->topic == NULL)
                topic_append(o, &tlen, "", 0);
        if (o->topic_oom)
                return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
        o->topic[tlen] = '\0';
        int rc;
        if (o->route && (rc = route_topic(o, &tlen, err, errlen)) == RELAY_ENOMEM)
                return rc;
        if (relay_names_is_topic(o->topic, tlen)) {
                ev->topic = o->topic;
                return 0;
        }
        relay_err_set(msg, sizeof(msg),
                      "invalid Kafka topic name \"%.*s\" from %s: topic names are 1 to %d "
                      "characters of a-z, A-Z, 0-9, '.', '_' and '-'",
                      (int)(tlen > 300 ? 300 : tlen), o->topic,
                      o->route ? "route.topic.regex and route.topic.replacement" : "topic.template",
                      RELAY_TOPIC_MAX);
        first_error(first, RELAY_EMAP, err, errlen, msg);
        return 0;
}

/* A column format.profile cannot encode: the message names it and its type. */
static int unsupported(relay_outbox_t *o, const char *col, char *err, size_t errlen)
{
        relay_err_set(err, errlen,
                      "format.profile %s cannot encode outbox column \"%s\": its type has no "
                      "Debezium schema the relay knows (text, varchar, char, uuid, json, jsonb, "
                      "bytea, smallint, integer, bigint, boolean); change the column's type or "
                      "use format.profile raw",
                      o->set->format_profile == RELAY_PROFILE_CONNECT_STRING ? "connect-string"
                      : o->set->format_profile == RELAY_PROFILE_CONNECT_JSON ? "connect-json"
                      : o->set->format_profile == RELAY_PROFILE_CONNECT_JSON_SCHEMA
                              ? "connect-json-schema"
                              : "debezium-server",
                      col);
        return RELAY_EMAP;
}

/* The struct of an envelope placement, as JsonConverter writes it: fields
 * payload, then the envelope columns in order (a NULL as null). */
static int struct_json(relay_outbox_t *o, const relay_pgo_insert_t *m, const relay_event_t *ev)
{
        relay_fmtbuf_t *b = &o->vbuf;
        int rc = relay_format_put(b, "{\"payload\":", 11);
        if (!rc)
                rc = relay_format_json(b, o->kind[COL_PAYLOAD], ev->value, ev->value_len);
        for (size_t i = 0; !rc && i < o->nenv; i++) {
                if (o->env[i].col < 0)
                        continue; /* missing, ignored */
                const relay_pgo_value_t *v = value_at(m, o->env[i].col);
                bool present = v && (v->kind == 't' || v->kind == 'b');
                rc = relay_format_put(b, ",", 1);
                if (!rc)
                        rc = relay_format_string(b, o->env[i].alias, strlen(o->env[i].alias));
                if (!rc)
                        rc = relay_format_put(b, ":", 1);
                if (!rc)
                        rc = relay_format_json(b, o->env_kind[i], present ? v->data : NULL,
                                               present ? v->len : 0);
        }
        return rc ? rc : relay_format_put(b, "}", 1);
}

/*
 * The value with envelope placements. With a schema, the struct is named
 * as EventRouterDelegate names it: the row schema's name,
 * "<topic.prefix>.<schema>.<table>.Value", with the routing value put
 * before ".Value"; Debezium caches that schema per payload schema, so the
 * first event's routing value names them all, as here (per session).
 */
static int envelope(relay_outbox_t *o, const relay_pgo_insert_t *m, const relay_event_t *ev,
                    char *msg, size_t msglen)
{
        for (size_t i = 0; i < o->nenv; i++) {
                if (o->env[i].col < 0 && !o->set->additional_missing_ignore) {
                        relay_err_set(msg, msglen,
                                      "table.fields.additional.placement puts column \"%s\" in the "
                                      "envelope, but outbox table \"%s.%s\" has no such column; "
                                      "add it, or set table.field.additional.missing = ignore",
                                      o->env[i].name, o->table->schema,
                                      o->table->name);
                        return RELAY_EMAP;
                }
                if (o->env[i].col >= 0 && o->env_kind[i] == RELAY_KIND_UNSUPPORTED)
                        return unsupported(o, o->env[i].name, msg, msglen);
        }
        if (o->venc == RELAY_ENC_JSON)
                return struct_json(o, m, ev);
        /* table.field.event.schema.version: a version per event, a schema per
         * version (a NULL version is a schema without one). */
        const relay_pgo_value_t *vv = NULL;
        if (o->set->schema_version_column[0]) {
                vv = value_at(m, o->ver_col);
                if (!vv) {
                        relay_err_set(msg, msglen,
                                      "table.field.event.schema.version names column \"%s\", "
                                      "which the outbox table does not have",
                                      o->set->schema_version_column);
                        return RELAY_EMAP;
                }
                if (vv->kind != 't')
                        vv = NULL;
                for (size_t i = 0; vv && i < vv->len; i++)
                        if (!(vv->data[i] >= '0' && vv->data[i] <= '9') &&
                            !(i == 0 && vv->data[i] == '-')) {
                                relay_err_set(msg, msglen,
                                              "schema version column \"%s\" holds \"%.*s\", not "
                                              "an integer",
                                              o->set->schema_version_column,
                                              (int)(vv->len > 32 ? 32 : vv->len), vv->data);
                                return RELAY_EMAP;
                        }
        }
        char **name = &o->schema_name;
        if (o->set->schema_version_column[0]) {
                size_t i = 0;
                for (; i < o->nvnames; i++)
                        if ((!vv && !o->vnames[i].text) ||
                            (vv && o->vnames[i].text && strlen(o->vnames[i].text) == vv->len &&
                             memcmp(o->vnames[i].text, vv->data, vv->len) == 0))
                                break;
                if (i == o->nvnames) {
                        void *g = realloc(o->vnames, (o->nvnames + 1) * sizeof(*o->vnames));
                        if (!g)
                                return RELAY_ENOMEM;
                        o->vnames = g;
                        o->vnames[i].name = NULL;
                        o->vnames[i].text = vv ? strndup(vv->data, vv->len) : NULL;
                        if (vv && !o->vnames[i].text)
                                return RELAY_ENOMEM;
                        o->nvnames++;
                }
                name = &o->vnames[i].name;
        }
        if (!*name) {
                const relay_pgo_value_t *rv = value_at(m, o->route_col);
                if (!rv || rv->kind != 't') {
                        relay_err_set(msg, msglen,
                                      "route.by.field column \"%s\" is missing or NULL: the "
                                      "envelope's schema is named after its value",
                                      o->set->route_by_field);
                        return RELAY_EMAP;
                }
                size_t n = strlen(o->set->format_debezium_topic_prefix) +
                           strlen(o->table->schema) + strlen(o->table->name) +
                           rv->len + 16;
                *name = malloc(n);
                if (!*name)
                        return RELAY_ENOMEM;
                snprintf(*name, n, "%s.%s.%s.%.*s.Value", o->set->format_debezium_topic_prefix,
                         o->table->schema, o->table->name, (int)rv->len,
                         rv->data);
        }
        relay_fmtbuf_t *b = &o->vbuf;
        static const char head[] = "{\"schema\":{\"type\":\"struct\",\"fields\":[";
        int rc = relay_format_put(b, head, sizeof(head) - 1);
        if (!rc)
                rc = relay_format_schema(b, o->kind[COL_PAYLOAD], o->optional[COL_PAYLOAD],
                                         "payload");
        for (size_t i = 0; !rc && i < o->nenv; i++) {
                if (o->env[i].col < 0)
                        continue; /* missing, ignored */
                rc = relay_format_put(b, ",", 1);
                if (!rc)
                        rc = relay_format_schema(b, o->env_kind[i], o->env_optional[i],
                                                 o->env[i].alias);
        }
        static const char mid[] = "],\"optional\":false,\"name\":";
        if (!rc)
                rc = relay_format_put(b, mid, sizeof(mid) - 1);
        if (!rc)
                rc = relay_format_string(b, *name, strlen(*name));
        if (!rc && vv)
                rc = relay_format_put(b, ",\"version\":", 11);
        if (!rc && vv)
                rc = relay_format_put(b, vv->data, vv->len);
        if (!rc)
                rc = relay_format_put(b, "},\"payload\":", 12);
        if (!rc)
                rc = struct_json(o, m, ev);
        return rc ? rc : relay_format_put(b, "}", 1);
}

/*
 * Re-encode the key, value and headers of a mapped event with the
 * profile's converters, in place. A part that cannot be encoded stays raw,
 * so a refused row's dead-letter copy still carries what the row has.
 * report: fill err (no earlier problem was reported).
 */
static int encode(relay_outbox_t *o, const relay_pgo_insert_t *m, relay_event_t *ev, char *err,
                  size_t errlen, bool report)
{
        char msg[RELAY_ERRBUF];
        bool null;
        int rc;

        o->kbuf.len = o->vbuf.len = o->hbuf.len = 0;
        if (ev->key) {
                if (o->kind[COL_AGGID] == RELAY_KIND_UNSUPPORTED) {
                        rc = unsupported(o, o->cols[COL_AGGID].name, msg, sizeof(msg));
                        goto fail;
                }
                rc = relay_format_append(&o->kbuf, o->kenc, o->kind[COL_AGGID],
                                         o->optional[COL_AGGID], ev->key, ev->key_len, &null);
                if (rc)
                        goto bad;
        }
        if (o->cols[COL_PAYLOAD].col >= 0) {
                if (o->kind[COL_PAYLOAD] == RELAY_KIND_UNSUPPORTED) {
                        rc = unsupported(o, o->cols[COL_PAYLOAD].name, msg, sizeof(msg));
                        goto fail;
                }
                if (o->nenv) {
                        rc = envelope(o, m, ev, msg, sizeof(msg));
                        if (rc == RELAY_EMAP)
                                goto fail;
                        null = false;
                } else {
                        /* table.expand.json.payload: a string payload holding a
                         * JSON object becomes the struct the router infers. */
                        rc = o->set->expand_json_payload && ev->value &&
                                             (o->kind[COL_PAYLOAD] == RELAY_KIND_JSON ||
                                              o->kind[COL_PAYLOAD] == RELAY_KIND_STRING)
                                     ? relay_expand_payload(&o->vbuf, o->venc,
                                                            o->cols[COL_PAYLOAD].name, ev->value,
                                                            ev->value_len)
                                     : 0;
                        if (rc == 0)
                                rc = relay_format_append(&o->vbuf, o->venc, o->kind[COL_PAYLOAD],
                                                         o->optional[COL_PAYLOAD], ev->value,
                                                         ev->value_len, &null);
                        else if (rc == 1) {
                                rc = 0;
                                null = false;
                        }
                }
                if (rc)
                        goto bad;
                ev->value = null ? NULL : o->vbuf.p ? o->vbuf.p : "";
                ev->value_len = null ? 0 : o->vbuf.len;
        }
        for (size_t i = 0; i < ev->nheaders; i++) {
                if (o->hkind[i] == RELAY_KIND_UNSUPPORTED) {
                        rc = unsupported(o, o->headers[i].name, msg, sizeof(msg));
                        goto fail;
                }
                o->hoff[i] = o->hbuf.len;
                rc = relay_format_append(&o->hbuf, o->henc, o->hkind[i], o->hoptional[i],
                                         o->headers[i].value, o->headers[i].len, &null);
                if (rc)
                        goto bad;
                if (null)
                        o->hoff[i] = SIZE_MAX;
        }
        /* Pointers only now: the header buffer may have moved while growing.
         * A Kafka null appends nothing, so a header ends where the next
         * non-null one begins. A header whose bytes did not change keeps
         * pointing at the row: the producer finds the id header by its
         * pointer (ev->id) to name a failed delivery. */
        size_t end = o->hbuf.len;
        for (size_t i = ev->nheaders; i-- > 0;) {
                if (o->hoff[i] == SIZE_MAX) {
                        o->headers[i].value = NULL;
                        o->headers[i].len = 0;
                        continue;
                }
                size_t len = end - o->hoff[i];
                const char *enc = o->hbuf.p + o->hoff[i];
                end = o->hoff[i];
                if (o->headers[i].value && len == o->headers[i].len &&
                    memcmp(enc, o->headers[i].value, len) == 0)
                        continue;
                o->headers[i].value = enc;
                o->headers[i].len = len;
        }
        if (ev->key) {
                ev->key = o->kbuf.p ? o->kbuf.p : "";
                ev->key_len = o->kbuf.len;
        }
        return 0;
bad:
        if (rc == RELAY_ENOMEM) {
                relay_err_set(err, errlen, "out of memory");
                return rc;
        }
        relay_err_set(msg, sizeof(msg),
                      "outbox row has a value the format.profile's schema cannot hold (a boolean "
                      "other than t or f)");
        rc = RELAY_EMAP;
fail:
        if (report)
                relay_err_set(err, errlen, "%s", msg);
        return rc;
}

/* Java's String.trim(): everything up to U+0020 is blank. */
static bool blank(const char *s, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)s[i] > ' ')
                        return false;
        return true;
}

#define TIMESTAMPOID 1114
#define INT2OID 21
#define INT4OID 23
#define TIMESTAMPTZOID 1184

/* Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, int64_t m, int64_t d)
{
        y -= m <= 2;
        int64_t era = (y >= 0 ? y : y - 399) / 400;
        int64_t yoe = y - era * 400;
        int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
        int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        return era * 146097 + doe - 719468;
}

static bool digits(const char **p, const char *end, int n, int64_t *out)
{
        int64_t v = 0;
        for (int i = 0; i < n; i++, (*p)++) {
                if (*p >= end || **p < '0' || **p > '9')
                        return false;
                v = v * 10 + (**p - '0');
        }
        *out = v;
        return true;
}

/*
 * A timestamp or timestamptz in PostgreSQL's ISO output ("2026-12-02
 * 04:05:40.123456", "+05:30" or "-08" after a timestamptz) as Unix epoch
 * milliseconds. Debezium reads a timestamp column as MicroTimestamp
 * (microseconds as if UTC) and divides by 1000 with Java's truncation,
 * which C's division shares. False for anything else (BC, infinity).
 */
static bool parse_timestamp(const char *s, size_t n, int64_t *ms)
{
        const char *p = s, *end = s + n;
        int64_t y, mo, d, h, mi, sec, us = 0;
        if (!digits(&p, end, 4, &y) || p >= end || *p++ != '-' || !digits(&p, end, 2, &mo) ||
            p >= end || *p++ != '-' || !digits(&p, end, 2, &d) || p >= end || *p++ != ' ' ||
            !digits(&p, end, 2, &h) || p >= end || *p++ != ':' || !digits(&p, end, 2, &mi) ||
            p >= end || *p++ != ':' || !digits(&p, end, 2, &sec))
                return false;
        if (p < end && *p == '.') {
                int k = 0;
                for (p++; p < end && *p >= '0' && *p <= '9'; p++, k++)
                        if (k < 6)
                                us = us * 10 + (*p - '0');
                if (k == 0)
                        return false;
                for (; k < 6; k++)
                        us *= 10;
        }
        int64_t off = 0;
        if (p < end && (*p == '+' || *p == '-')) {
                int sign = *p++ == '-' ? -1 : 1;
                int64_t oh, om = 0, os = 0;
                if (!digits(&p, end, 2, &oh))
                        return false;
                if (p < end && *p == ':' && (p++, !digits(&p, end, 2, &om)))
                        return false;
                if (p < end && *p == ':' && (p++, !digits(&p, end, 2, &os)))
                        return false;
                off = sign * (oh * 3600 + om * 60 + os);
        }
        if (p != end || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 24 || mi > 59 || sec > 60)
                return false;
        int64_t secs = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - off;
        *ms = (secs * 1000000 + us) / 1000;
        return true;
}

/*
 * Every field is filled as far as the row allows even when the row is
 * refused, so a dead-letter copy carries the id, key, payload and headers
 * that exist; the first problem found is the one returned.
 */
static bool lower_hex(const char *s, size_t n, bool nonzero)
{
        bool any = false;
        for (size_t i = 0; i < n; i++) {
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
                any = any || s[i] != '0';
        }
        return any || !nonzero;
}

/* OpenTelemetry's W3CTraceContextPropagator accepts it as a parent. */
static bool valid_traceparent(const char *s, size_t n)
{
        if (n < 55 || (n > 55 && s[55] != '-'))
                return false;
        if (!lower_hex(s, 2, false) || (s[0] == 'f' && s[1] == 'f') || (n > 55 && s[0] == '0' && s[1] == '0'))
                return false;
        return s[2] == '-' && lower_hex(s + 3, 32, true) && s[35] == '-' &&
               lower_hex(s + 36, 16, true) && s[52] == '-' && lower_hex(s + 53, 2, false);
}

/*
 * The tracing column (tracing.span.context.field) holds the application's
 * span context as java.util.Properties text (Debezium's EventDispatcher
 * writes it with Properties.store(): a comment line, then traceparent=...,
 * tracestate=...). Debezium's ActivateTracingSpan extracts it with the W3C
 * propagator and injects its own span's context; the relay has no span of
 * its own and passes the application's: traceparent (as version 00, which
 * is what OpenTelemetry writes), and tracestate and baggage as written,
 * when the traceparent is valid and the text has no malformed \\u escape
 * (Properties.load() would refuse it whole). Returns the headers made (0 to NTRACE),
 * values in o->trace; -1 when out of memory.
 */
static int trace_headers(relay_outbox_t *o, const char *s, size_t len, relay_header_t *h)
{
        static const char *const keys[NTRACE] = {"traceparent", "tracestate", "baggage"};
        size_t off[NTRACE], vlen[NTRACE], n = 0;
        bool have[NTRACE] = {false, false, false};
        size_t i = 0;
        /* A logical line is never longer than the column: no cut (W3C
         * baggage may be 8192 bytes and more). */
        if (grow_buf(&o->tline, &o->tline_cap, len + 1))
                return -1;
        /* Unescaping never lengthens: the values kept and the line at hand
         * fit in the column's length. */
        if (grow_buf(&o->trace, &o->trace_cap, len + 1))
                return -1;
        char *line = o->tline;
        relay_props_line_t l;
        while (relay_props_next(s, len, &i, line, &l)) {
                /* Every key and value is resolved, as Properties.load() does:
                 * a malformed escape anywhere makes the context unreadable. */
                size_t kstart = n, vstart;
                long w = relay_props_unescape(line, l.klen, o->trace + n);
                if (w < 0)
                        return 0;
                vstart = n += (size_t)w;
                w = relay_props_unescape(line + l.vstart, l.len - l.vstart, o->trace + n);
                if (w < 0)
                        return 0;
                n += (size_t)w;
                int j = 0;
                while (j < NTRACE && !(vstart - kstart == strlen(keys[j]) &&
                                       memcmp(o->trace + kstart, keys[j], vstart - kstart) == 0))
                        j++;
                if (j == NTRACE) {
                        n = kstart;
                        continue;
                }
                /* The value moves down over its key; a later line wins, as in Properties. */
                memmove(o->trace + kstart, o->trace + vstart, n - vstart);
                off[j] = kstart;
                vlen[j] = n - vstart;
                have[j] = true;
                n = kstart + vlen[j];
        }
        if (!have[0] || !valid_traceparent(o->trace + off[0], vlen[0]))
                return 0;
        int nt = 0;
        o->trace[off[0]] = '0'; /* OpenTelemetry injects version 00 */
        o->trace[off[0] + 1] = '0';
        h[nt++] = (relay_header_t){keys[0], o->trace + off[0], 55};
        for (int j = 1; j < NTRACE; j++)
                if (have[j] && vlen[j] > 0)
                        h[nt++] = (relay_header_t){keys[j], o->trace + off[j], vlen[j]};
        return nt;
}

/* The routing value in o->topic becomes the topic (route.topic.regex). A
 * result too long for any topic stays the value, cut: the caller's topic
 * check refuses it by name. */
static int route_topic(relay_outbox_t *o, size_t *tlen, char *err, size_t errlen)
{
        char out[2 * RELAY_TOPIC_MAX + 2];
        size_t n;
        int rc = relay_route_apply(o->route, o->topic, *tlen, out, sizeof(out), &n);
        if (rc == RELAY_ENOMEM) {
                relay_err_set(err, errlen, "out of memory");
                return rc;
        }
        /* RELAY_EINVAL: longer than any topic; out holds what fits (more
         * than RELAY_TOPIC_MAX), which the name check refuses, quoting it. */
        if (grow_buf(&o->topic, &o->topic_cap, n + 1))
                return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
        memcpy(o->topic, out, n);
        o->topic[n] = '\0';
        *tlen = n;
        return 0;
}

int relay_outbox_map(relay_outbox_t *o, const relay_pgo_insert_t *m, int64_t commit_ts,
                     relay_event_t *ev, char *err, size_t errlen)
{
        char msg[RELAY_ERRBUF];
        bool present;
        int rc, first = 0;

        memset(ev, 0, sizeof(*ev));
        /* Several outbox tables: columns are resolved per table, so a row
         * of another table than the last one's binds its relation first. */
        if (m->relid != o->relid && m->relation && relay_outbox_bind(o, m->relation) < 0)
                return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
        ev->timestamp_ms = relay_pg_to_unix_ms(commit_ts);

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
                              o->table->schema, o->table->name,
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
        o->topic_oom = false;
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
                                              sg->text, o->table->schema,
                                              o->table->name);
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
                topic_append(o, &tlen, s, n);
        }
        if (topic_ok && (rc = topic_finish(o, tlen, ev, &first, err, errlen)))
                return rc;

        /* Headers: id, type, then the extra columns (NULL values stay NULL). */
        size_t nh = 0;
        const char *hv;
        size_t hl;
        if (o->context_headers) {
                const char *names[NCONTEXT] = {
                        "__debezium.context.connectorLogicalName", "__debezium.context.taskId",
                        "__debezium.context.connectorName", "__debezium.context.runId"};
                const char *vals[NCONTEXT] = {o->set->format_debezium_topic_prefix, "0",
                                              "postgresql", o->run_id};
                for (int i = 0; i < NCONTEXT; i++) {
                        o->hkind[nh] = RELAY_KIND_STRING;
                        o->hoptional[nh] = false; /* Schema.STRING_SCHEMA */
                        o->headers[nh].name = names[i];
                        o->headers[nh].value = vals[i];
                        o->headers[nh++].len = strlen(vals[i]);
                }
        }
        /* Debezium's tracing runs before the router adds "id". */
        const relay_pgo_value_t *trv = value_at(m, o->trace_col);
        if (trv && trv->kind == 't') {
                relay_header_t th[NTRACE];
                int nt = trace_headers(o, trv->data, trv->len, th);
                if (nt < 0)
                        return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
                for (int i = 0; i < nt; i++) {
                        if (o->encode) {
                                o->hkind[nh] = RELAY_KIND_STRING;
                                o->hoptional[nh] = false; /* Schema.STRING_SCHEMA */
                        }
                        o->headers[nh++] = th[i];
                }
        }
        if (ev->id) {
                if (o->encode) {
                        o->hkind[nh] = o->kind[COL_ID];
                        o->hoptional[nh] = o->optional[COL_ID];
                }
                o->headers[nh].name = "id";
                o->headers[nh].value = ev->id;
                o->headers[nh++].len = ev->id_len;
        }
        /* Debezium's router sends no type header: only the relay's own profile does. */
        rc = o->encode ? 0
                       : text_col(o, m, &o->cols[COL_TYPE], col_keys[COL_TYPE], &hv, &hl,
                                  &present, msg, sizeof(msg));
        if (rc) {
                first_error(&first, rc, err, errlen, msg);
        } else if (!o->encode) {
                o->headers[nh].name = "type";
                o->headers[nh].value = hv;
                o->headers[nh++].len = hl;
        }
        for (size_t i = 0; i < o->nextra; i++) {
                bool placed = i >= o->set->n_outbox_headers;
                if (placed && o->extra[i].col < 0 && o->set->additional_missing_ignore)
                        continue; /* table.field.additional.missing = ignore */
                rc = text_col(o, m, &o->extra[i],
                              placed ? "table.fields.additional.placement" : "outbox.headers", &hv,
                              &hl, &present, msg, sizeof(msg));
                if (rc) {
                        first_error(&first, rc, err, errlen, msg);
                        continue;
                }
                if (o->encode) {
                        o->hkind[nh] = o->xkind[i];
                        o->hoptional[nh] = o->xoptional[i];
                }
                o->headers[nh].name = o->extra[i].alias;
                o->headers[nh].value = hv;
                o->headers[nh++].len = hl;
        }
        /* Never a silent truncation: the row is refused, and a dead-letter
         * copy carries the first RELAY_EVENT_MAX_HEADERS with the reason. */
        if (nh > RELAY_EVENT_MAX_HEADERS) {
                /* The settings refuse more without the row's tracing
                 * context: its headers are what tipped it over. */
                relay_err_set(msg, sizeof(msg),
                              "outbox row would carry %zu headers (with those of its tracing "
                              "context column and %zu outbox.headers columns and header "
                              "placements), more than the %d an event may have; list %zu fewer "
                              "columns in outbox.headers or header placements",
                              nh, o->nextra, RELAY_EVENT_MAX_HEADERS,
                              nh - RELAY_EVENT_MAX_HEADERS);
                first_error(&first, RELAY_EMAP, err, errlen, msg);
                nh = RELAY_EVENT_MAX_HEADERS;
        }
        ev->headers = o->headers;
        ev->nheaders = nh;

        if (o->part.name && !(o->part.col < 0 && o->set->additional_missing_ignore)) {
                const relay_pgo_value_t *pv2 = value_at(m, o->part.col);
                char num[16];
                long pn = -1;
                char *endp = NULL;
                if (pv2 && pv2->kind == 't' && pv2->len > 0 && pv2->len < sizeof(num)) {
                        memcpy(num, pv2->data, pv2->len);
                        num[pv2->len] = '\0';
                        pn = strtol(num, &endp, 10);
                }
                if (!pv2 || (o->part_type != INT4OID && o->part_type != INT2OID)) {
                        relay_err_set(msg, sizeof(msg),
                                      "table.fields.additional.placement puts column \"%s\" in "
                                      "the partition, but outbox table \"%s.%s\" has no such "
                                      "integer column; name an integer column",
                                      o->part.name, o->table->schema,
                                      o->table->name);
                        first_error(&first, RELAY_EMAP, err, errlen, msg);
                } else if (pv2->kind == 't' && (!endp || *endp || pn < 0 || pn > INT32_MAX)) {
                        relay_err_set(msg, sizeof(msg),
                                      "partition column \"%s\" holds \"%.*s\", not a partition "
                                      "number (0 or more)",
                                      o->part.name, (int)(pv2->len > 32 ? 32 : pv2->len),
                                      pv2->data);
                        first_error(&first, RELAY_EMAP, err, errlen, msg);
                } else if (pv2->kind == 't' &&
                           o->set->format_profile != RELAY_PROFILE_DEBEZIUM_SERVER) {
                        ev->has_partition = true;
                        ev->partition = (int32_t)pn;
                }
                /* NULL: the partitioner decides, as Debezium's null partition.
                 * Debezium Server's Kafka sink sends every record with a null
                 * partition (KafkaChangeConsumer), so the placement has no
                 * effect there either. */
        }

        if (o->set->event_timestamp_column[0]) {
                const relay_pgo_value_t *tv = value_at(m, o->ts_col);
                int64_t t;
                if (!tv || (o->ts_type != TIMESTAMPOID && o->ts_type != TIMESTAMPTZOID)) {
                        relay_err_set(msg, sizeof(msg),
                                      "table.field.event.timestamp names column \"%s\", which "
                                      "outbox table \"%s.%s\" %s; name a timestamp or "
                                      "timestamptz column",
                                      o->set->event_timestamp_column, o->table->schema,
                                      o->table->name,
                                      tv ? "has, but neither as timestamp nor as timestamptz"
                                         : "does not have");
                        first_error(&first, RELAY_EMAP, err, errlen, msg);
                } else if (tv->kind == 't' && parse_timestamp(tv->data, tv->len, &t)) {
                        ev->timestamp_ms = t;
                } else if (tv->kind == 't') {
                        relay_err_set(msg, sizeof(msg),
                                      "column \"%s\" (table.field.event.timestamp) holds \"%.*s\", "
                                      "not a timestamp the relay can read (ISO DateStyle, AD, "
                                      "finite)",
                                      o->set->event_timestamp_column,
                                      (int)(tv->len > 64 ? 64 : tv->len), tv->data);
                        first_error(&first, RELAY_EMAP, err, errlen, msg);
                }
                /* NULL: the commit time, as Debezium falls back to ts_ms. */
        }

        if (o->encode) {
                rc = encode(o, m, ev, err, errlen, first == 0);
                if (rc == RELAY_ENOMEM)
                        return rc;
                if (rc && first == 0)
                        first = rc;
        }
        /* Debezium: payload == null || payload.toString().trim().isEmpty();
         * a bytes payload's toString() is never empty. */
        if (o->set->route_tombstone_on_empty_payload && pv &&
            (pv->kind == 'n' || (!o->payload_bytea && blank(pv->data, pv->len)))) {
                ev->value = NULL;
                ev->value_len = 0;
        }
        return first;
}

int relay_outbox_update(const relay_outbox_t *o, const relay_pgo_update_t *u, char *what,
                        size_t whatlen)
{
        if (!relay_outbox_is_outbox(o, u->relid))
                return 0;
        /* The updated table's own id column: with several outbox tables
         * the bound one may be another, its columns in another order. */
        int c = u->relation ? find_col(u->relation, o->cols[COL_ID].name) : -1;
        const relay_pgo_value_t *v =
                c >= 0 && c < u->newtuple.ncols ? &u->newtuple.values[c] : NULL;
        if (v && v->kind == 't')
                relay_err_set(what, whatlen, "UPDATE of the outbox row with id \"%.*s\"",
                              (int)(v->len > 200 ? 200 : v->len), v->data);
        else
                relay_err_set(what, whatlen, "UPDATE of an outbox row");
        return 1;
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
        ev->timestamp_ms = relay_pg_to_unix_ms(commit_ts);
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
        o->topic_oom = false;
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
                topic_append(o, &tlen, s, n);
        }
        if (topic_ok && (rc = topic_finish(o, tlen, ev, &first, err, errlen)))
                return rc;

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
                /* A header placement is named by its alias, as for a row. */
                o->mheaders[nh++] = (relay_header_t){o->extra[i].alias, hv, hl};
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

        /* A partition placement takes the top-level field, as a row its
         * column: with outbox.source = both an aggregate's messages and rows
         * must share a partition to stay in order. Absent or null: the
         * partitioner decides, as for a NULL column. */
        const json_t *part = o->part.name ? json_object_get(o->body, o->part.name) : NULL;
        if (part && json_is_integer(part) && json_integer_value(part) >= 0 &&
            json_integer_value(part) <= INT32_MAX) {
                ev->has_partition = true;
                ev->partition = (int32_t)json_integer_value(part);
        } else if (part && !json_is_null(part)) {
                relay_err_set(msg, sizeof(msg),
                              "outbox message (prefix \"%s\") has \"%s\" that is not a partition "
                              "number (an integer, 0 or more), which "
                              "table.fields.additional.placement puts in the partition",
                              pfx, o->part.name);
                first_error(&first, RELAY_EMAP, err, errlen, msg);
        }
        return first;
nomem:
        return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
}
