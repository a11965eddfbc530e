/*
 * test_outbox.c - outbox rows become events with Debezium's defaults: topic
 * from the template, key = aggregate id, value = payload as stored, headers
 * id and type plus extras, timestamp = commit time; rows that cannot become
 * events are refused with a message naming the column.
 *
 * Relation and Insert messages are built byte by byte in pgoutput's v1
 * layout and go through the real decoder; the mapping's settings come from
 * a configuration through relay_settings_load(), as in the daemon.
 */
#include <stdio.h>
#include <string.h>

#include "relay/config.h"
#include "relay/outbox.h"
#include "relay/pgoutput.h"
#include "relay/settings.h"

#include "tap.h"

typedef struct {
        char b[16384]; /* room for a row with a long tracing column */
        size_t n;
} buf_t;

/* A protocol version 1 decoder; the test cannot go on without one. */
static relay_pgoutput_t *decoder(void)
{
        relay_pgoutput_t *d;
        char err[RELAY_ERRBUF];

        if (relay_pgoutput_new(&d, 1, err, sizeof(err)))
                tap_bail("relay_pgoutput_new: %s", err);
        return d;
}

static void put8(buf_t *b, uint8_t v)
{
        b->b[b->n++] = (char)v;
}
static void put16(buf_t *b, uint16_t v)
{
        put8(b, (uint8_t)(v >> 8));
        put8(b, (uint8_t)v);
}
static void put32(buf_t *b, uint32_t v)
{
        put16(b, (uint16_t)(v >> 16));
        put16(b, (uint16_t)v);
}
static void putstr(buf_t *b, const char *s)
{
        size_t n = strlen(s) + 1;
        memcpy(b->b + b->n, s, n);
        b->n += n;
}

/* Relation: 'R', relid, nspname, relname, replident, ncols, (flags, name, typoid, typmod)* */
static void relation(buf_t *b, uint32_t relid, const char *nsp, const char *rel, int ncols,
                     const char *const *names, const uint32_t *types)
{
        b->n = 0;
        put8(b, 'R');
        put32(b, relid);
        putstr(b, nsp);
        putstr(b, rel);
        put8(b, 'd');
        put16(b, (uint16_t)ncols);
        for (int i = 0; i < ncols; i++) {
                put8(b, i == 0);
                putstr(b, names[i]);
                put32(b, types[i]);
                put32(b, 0xffffffffu);
        }
}

/* Insert: 'I', relid, 'N', ncols, ('n' | 't' len bytes)* ; NULL string = SQL NULL */
static void insert(buf_t *b, uint32_t relid, int ncols, const char *const *vals)
{
        b->n = 0;
        put8(b, 'I');
        put32(b, relid);
        put8(b, 'N');
        put16(b, (uint16_t)ncols);
        for (int i = 0; i < ncols; i++) {
                if (!vals[i]) {
                        put8(b, 'n');
                        continue;
                }
                put8(b, 't');
                put32(b, (uint32_t)strlen(vals[i]));
                memcpy(b->b + b->n, vals[i], strlen(vals[i]));
                b->n += strlen(vals[i]);
        }
}

static const char *const cols[] = {"id", "aggregatetype", "aggregateid", "type", "payload", "tenant"};
static const uint32_t types_json[] = {2950, 1043, 1043, 1043, 3802, 25};
static const uint32_t types_bytea[] = {2950, 1043, 1043, 1043, 17, 25};

/* Settings from a configuration with these three keys set, and key = value
 * when key is not NULL (the rest default). */
static relay_settings_t *settings_with(const char *table, const char *headers, const char *tpl,
                                       const char *key, const char *value)
{
        relay_config_t *c = NULL;
        relay_settings_t *set = NULL;
        char err[RELAY_ERRBUF];

        if (relay_config_new(&c) != 0 ||
            relay_config_set(c, "outbox.table", table, "test", err, sizeof(err)) != 0 ||
            relay_config_set(c, "outbox.headers", headers, "test", err, sizeof(err)) != 0 ||
            relay_config_set(c, "topic.template", tpl, "test", err, sizeof(err)) != 0 ||
            (key && relay_config_set(c, key, value, "test", err, sizeof(err)) != 0) ||
            relay_settings_load(&set, c, err, sizeof(err)) != 0)
                tap_bail("settings: %s", err);
        relay_config_free(c);
        return set;
}

static relay_settings_t *settings(const char *table, const char *headers, const char *tpl)
{
        return settings_with(table, headers, tpl, NULL, NULL);
}

/* The mapping borrows the settings: *set is freed by the caller after the mapping. */
static relay_outbox_t *mapping(relay_settings_t **set, const char *table, const char *headers,
                               const char *tpl)
{
        relay_outbox_t *o = NULL;
        char err[RELAY_ERRBUF];

        *set = settings(table, headers, tpl);
        if (relay_outbox_new(&o, *set, err, sizeof(err)) != 0)
                tap_bail("relay_outbox_new: %s", err);
        return o;
}

/* What most tests work with: a decoder, the mapping of one configuration
 * (its settings borrowed by the mapping) and one message at a time. */
typedef struct {
        relay_pgoutput_t *d;
        relay_settings_t *set;
        relay_outbox_t *o;
        relay_pgo_msg_t m;
        relay_event_t ev;
        char err[RELAY_ERRBUF];
        buf_t b;
} fx_t;

static void fx_open(fx_t *f, const char *table, const char *headers, const char *tpl)
{
        f->d = decoder();
        f->o = mapping(&f->set, table, headers, tpl);
}

/* Decode the message f->b holds into f->m: the decoder's answer. */
static int fx_decode(fx_t *f)
{
        return relay_pgoutput_decode(f->d, f->b.b, f->b.n, &f->m, f->err, sizeof(f->err));
}

/* Map the insert f->m holds, committed at commit_ts, into f->ev: the mapping's answer. */
static int fx_map(fx_t *f, int64_t commit_ts)
{
        return relay_outbox_map(f->o, &f->m.insert, commit_ts, &f->ev, f->err, sizeof(f->err));
}

/* A Relation message decoded (asserted) and offered to the mapping:
 * relay_outbox_bind()'s answer. */
static int fx_relation(fx_t *f, uint32_t relid, const char *nsp, const char *rel, int ncols,
                       const char *const *names, const uint32_t *types)
{
        relation(&f->b, relid, nsp, rel, ncols, names, types);
        is_int(fx_decode(f), 0, "decode relation %s.%s", nsp, rel);
        return relay_outbox_bind(f->o, f->m.relation.relation);
}

/* An Insert message decoded into f->m, asserted as what. */
static void fx_insert(fx_t *f, uint32_t relid, int ncols, const char *const *vals, const char *what)
{
        insert(&f->b, relid, ncols, vals);
        is_int(fx_decode(f), 0, "%s", what);
}

static void fx_close(fx_t *f)
{
        relay_outbox_free(f->o);
        relay_settings_free(f->set);
        relay_pgoutput_free(f->d);
}

static void test_defaults(void)
{
        fx_t f;

        fx_open(&f, "public.outbox", "tenant", "outbox.event.${aggregatetype}");

        is_int(fx_relation(&f, 100, "public", "other", 6, cols, types_json), 0, "another table with the same columns is not the outbox");
        ok(!relay_outbox_is_outbox(f.o, 100), "relid 100 is not the outbox");

        is_int(fx_relation(&f, 200, "public", "outbox", 6, cols, types_json), 1, "outbox table bound");
        ok(relay_outbox_is_outbox(f.o, 200), "relid 200 is the outbox");

        const char *row[] = {"8d5c5c6e-0000-4000-8000-000000000001", "order", "order-42",
                             "OrderCreated", "{\"total\": 12}", "acme"};
        fx_insert(&f, 200, 6, row, "decode insert");
        /* 2026-11-29 00:00:00 UTC = 1795910400 Unix seconds */
        int64_t commit_ts = (INT64_C(1795910400) - INT64_C(946684800)) * 1000000 + 123456;
        is_int(fx_map(&f, commit_ts), 0, "map");
        is_str(f.ev.topic, "outbox.event.order", "topic from the template");
        ok(f.ev.key_len == 8 && memcmp(f.ev.key, "order-42", 8) == 0, "key is the aggregate id");
        ok(f.ev.value_len == 13 && memcmp(f.ev.value, "{\"total\": 12}", 13) == 0, "value is the payload verbatim");
        is_int(f.ev.timestamp_ms, INT64_C(1795910400123), "timestamp is the commit time in ms");
        is_int(f.ev.nheaders, 3, "headers id, type, tenant");
        is_str(f.ev.headers[0].name, "id", "first header is id");
        ok(f.ev.headers[0].len == 36 && memcmp(f.ev.headers[0].value, row[0], 36) == 0, "id header value");
        is_str(f.ev.headers[1].name, "type", "second header is type");
        ok(f.ev.headers[1].len == 12 && memcmp(f.ev.headers[1].value, "OrderCreated", 12) == 0, "type header value");
        is_str(f.ev.headers[2].name, "tenant", "extra header");
        ok(f.ev.headers[2].len == 4 && memcmp(f.ev.headers[2].value, "acme", 4) == 0, "extra header value");

        /* NULL payload: a message with a NULL value, not an error. */
        const char *nullpayload[] = {"id-2", "order", "order-42", "OrderDeleted", NULL, NULL};
        fx_insert(&f, 200, 6, nullpayload, "decode insert with NULL payload");
        is_int(fx_map(&f, commit_ts), 0, "NULL payload maps");
        ok(f.ev.value == NULL, "NULL payload gives a NULL value");
        ok(f.ev.headers[2].value == NULL, "NULL extra header column gives a NULL header value");

        /* Refusals. */
        const char *nullkey[] = {"id-3", "order", NULL, "T", "{}", "x"};
        fx_insert(&f, 200, 6, nullkey, "decode insert with NULL aggregate id");
        is_int(fx_map(&f, commit_ts), RELAY_EMAP, "NULL aggregate id refused");
        ok(strstr(f.err, "NULL aggregate id") && strstr(f.err, "aggregateid"), "message names the column: %s", f.err);
        ok(f.ev.id && f.ev.id_len == 4 && memcmp(f.ev.id, "id-3", 4) == 0, "the event id is known for the caller's message");

        const char *nullid[] = {NULL, "order", "o", "T", "{}", "x"};
        fx_insert(&f, 200, 6, nullid, "decode insert with NULL id");
        is_int(fx_map(&f, commit_ts), RELAY_EMAP, "NULL id refused");
        ok(strstr(f.err, "NULL event id") != NULL, "message says so: %s", f.err);

        const char *badtopic[] = {"id-4", "ord er/1", "o", "T", "{}", "x"};
        fx_insert(&f, 200, 6, badtopic, "decode insert with a bad aggregate type");
        is_int(fx_map(&f, commit_ts), RELAY_EMAP, "invalid topic name refused");
        ok(strstr(f.err, "outbox.event.ord er/1") != NULL, "message names the topic: %s", f.err);

        /* ALTER TABLE: a re-sent Relation without the type column; remapped by name. */
        const char *const cols2[] = {"aggregateid", "id", "aggregatetype", "payload"};
        const uint32_t types2[] = {1043, 2950, 1043, 3802};
        is_int(fx_relation(&f, 200, "public", "outbox", 4, cols2, types2), 1, "rebound");
        const char *row2[] = {"agg-9", "id-9", "order", "{}"};
        fx_insert(&f, 200, 4, row2, "decode insert in new layout");
        is_int(fx_map(&f, commit_ts), RELAY_EMAP, "missing type column refused");
        ok(strstr(f.err, "no column \"type\"") && strstr(f.err, "outbox.column.type"), "message names column and key: %s", f.err);

        /* ALTER TABLE ... RENAME (or SET SCHEMA): the same relid under
         * another name is no longer the outbox, as after a restart. */
        is_int(fx_relation(&f, 200, "public", "outbox_old", 4, cols2, types2), 2,
               "renamed: unbound");
        ok(!relay_outbox_is_outbox(f.o, 200), "relid 200 is no longer the outbox");
        is_int(fx_relation(&f, 200, "archive", "outbox", 4, cols2, types2), 0,
               "another schema: not bound");
        ok(!relay_outbox_is_outbox(f.o, 200), "relid 200 still not the outbox");
        is_int(fx_relation(&f, 200, "public", "outbox", 4, cols2, types2), 1,
               "renamed back: bound again");
        relay_outbox_free(f.o);
        relay_settings_free(f.set);

        /* The same layout maps once the template and columns allow it. */
        f.o = mapping(&f.set, "outbox", "", "events-${aggregatetype}-${aggregateid}");
        is_int(relay_outbox_bind(f.o, f.m.relation.relation), 1, "\"outbox\" means public.outbox");
        ok(relay_outbox_is_outbox(f.o, 200), "bound");
        fx_close(&f);
}

static void test_bytea_and_template(void)
{
        fx_t f;

        fx_open(&f, "app.events", "", "${aggregatetype}.v1-${type}");

        is_int(fx_relation(&f, 7, "app", "events", 6, cols, types_bytea), 1, "schema-qualified outbox bound");
        const char *row[] = {"e1", "cust", "c-1", "Created", "\\x00ff41", "t"};
        fx_insert(&f, 7, 6, row, "decode insert");
        is_int(fx_map(&f, 0), 0, "map bytea row");
        is_str(f.ev.topic, "cust.v1-Created", "template with two columns and literals");
        ok(f.ev.value_len == 3 && (unsigned char)f.ev.value[0] == 0 && (unsigned char)f.ev.value[1] == 0xff &&
                   f.ev.value[2] == 'A',
           "bytea payload arrives as raw bytes");
        is_int(f.ev.timestamp_ms, INT64_C(946684800000), "PostgreSQL epoch maps to 2000-01-01");
        fx_close(&f);
        relay_outbox_free(NULL);
}

/*
 * More headers than an event may carry: refused, never cut silently. The
 * settings refuse more columns than fit beside id and type at start; a
 * row's tracing context can still add its headers (here traceparent) to
 * the most that fit.
 */
static void test_header_cap(void)
{
        enum { NEXTRA = RELAY_EVENT_MAX_HEADERS - 2, NCOLS = 5 + NEXTRA + 1 };
        static char names[NEXTRA][8];
        const char *colnames[NCOLS], *row[NCOLS];
        uint32_t types[NCOLS];
        char list[NEXTRA * 8], want[200];
        relay_pgoutput_t *d = decoder();
        relay_settings_t *set;
        relay_outbox_t *o;
        relay_pgo_msg_t m;
        relay_event_t ev;
        char err[RELAY_ERRBUF];
        size_t n = 0;
        buf_t b;

        for (int i = 0; i < 5; i++) {
                colnames[i] = cols[i];
                types[i] = types_json[i];
                row[i] = i == 1 ? "order" : "v";
        }
        for (int i = 0; i < NEXTRA; i++) {
                snprintf(names[i], sizeof(names[i]), "h%d", i);
                n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%s", i ? "," : "", names[i]);
                colnames[5 + i] = names[i];
                types[5 + i] = 25;
                row[5 + i] = "x";
        }
        colnames[NCOLS - 1] = "tc";
        types[NCOLS - 1] = 25;
        row[NCOLS - 1] = "traceparent=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        set = settings_with("public.outbox", list, "outbox.event.${aggregatetype}",
                            "tracing.span.context.field", "tc");
        if (relay_outbox_new(&o, set, err, sizeof(err)) != 0)
                tap_bail("relay_outbox_new: %s", err);
        relation(&b, 300, "public", "outbox", NCOLS, colnames, types);
        is_int(relay_pgoutput_decode(d, b.b, b.n, &m, err, sizeof(err)), 0, "decode wide relation");
        is_int(relay_outbox_bind(o, m.relation.relation), 1, "wide outbox bound");
        insert(&b, 300, NCOLS, row);
        is_int(relay_pgoutput_decode(d, b.b, b.n, &m, err, sizeof(err)), 0, "decode wide insert");
        is_int(relay_outbox_map(o, &m.insert, 0, &ev, err, sizeof(err)), RELAY_EMAP,
               "%d headers (traceparent, id, type, %d columns) refused", NEXTRA + 3, NEXTRA);
        snprintf(want, sizeof(want), "would carry %d headers (with those of its tracing context "
                 "column and %d outbox.headers columns and header placements), more than the %d",
                 NEXTRA + 3, NEXTRA, RELAY_EVENT_MAX_HEADERS);
        ok(strstr(err, want) != NULL && strstr(err, "list 1 fewer"),
           "message names the count, the cap and the fix: %s", err);
        is_int(ev.nheaders, RELAY_EVENT_MAX_HEADERS, "a dead-letter copy gets the first %d",
               RELAY_EVENT_MAX_HEADERS);
        is_str(ev.topic, "outbox.event.order", "and everything else of the row");
        relay_outbox_free(o);
        relay_settings_free(set);

        /* One column fewer fits exactly. */
        list[strlen(list) - strlen(names[NEXTRA - 1]) - 1] = '\0';
        set = settings_with("public.outbox", list, "outbox.event.${aggregatetype}",
                            "tracing.span.context.field", "tc");
        if (relay_outbox_new(&o, set, err, sizeof(err)) != 0)
                tap_bail("relay_outbox_new: %s", err);
        is_int(relay_outbox_bind(o, m.insert.relation), 1, "bound with %d extra headers", NEXTRA - 1);
        is_int(relay_outbox_map(o, &m.insert, 0, &ev, err, sizeof(err)), 0,
               "%d headers map", RELAY_EVENT_MAX_HEADERS);
        is_int(ev.nheaders, RELAY_EVENT_MAX_HEADERS, "all of them");
        relay_outbox_free(o);
        relay_settings_free(set);
        relay_pgoutput_free(d);
}

/* A configuration for outbox.source = messages (prefix "outbox"). */
static relay_outbox_t *msg_mapping(relay_settings_t **set, const char *source, const char *headers)
{
        relay_config_t *c = NULL;
        relay_outbox_t *o = NULL;
        char err[RELAY_ERRBUF];

        if (relay_config_new(&c) != 0 ||
            relay_config_set(c, "outbox.source", source, "test", err, sizeof(err)) != 0 ||
            relay_config_set(c, "outbox.headers", headers, "test", err, sizeof(err)) != 0 ||
            relay_settings_load(set, c, err, sizeof(err)) != 0 ||
            relay_outbox_new(&o, *set, err, sizeof(err)) != 0)
                tap_bail("message settings: %s", err);
        relay_config_free(c);
        return o;
}

static relay_pgo_message_t message(bool transactional, const char *prefix, const char *body)
{
        return (relay_pgo_message_t){.transactional = transactional, .prefix = prefix,
                                     .content = body, .content_len = (uint32_t)strlen(body)};
}

static const char *header(const relay_event_t *ev, const char *name, size_t *len)
{
        for (size_t i = 0; i < ev->nheaders; i++)
                if (strcmp(ev->headers[i].name, name) == 0) {
                        *len = ev->headers[i].len;
                        return ev->headers[i].value;
                }
        return NULL;
}

static void test_messages(void)
{
        relay_settings_t *set;
        relay_outbox_t *o = msg_mapping(&set, "messages", "tenant,missing");
        relay_pgo_message_t m;
        relay_event_t ev;
        char err[RELAY_ERRBUF];
        size_t hl;
        const char *hv;

        m = message(true, "outbox", "x");
        ok(relay_outbox_wants_message(o, &m), "a transactional message with the prefix is an event");
        m = message(false, "outbox", "x");
        ok(!relay_outbox_wants_message(o, &m), "a non-transactional message is not");
        m = message(true, "outboxes", "x");
        ok(!relay_outbox_wants_message(o, &m), "another prefix (even one starting with it) is not");

        /* jsonb's text form, as outbox_emit() writes it. */
        m = message(true, "outbox",
                    "{\"id\": \"e-1\", \"type\": \"OrderPlaced\", \"tenant\": 7, \"headers\": "
                    "{\"trace\": \"abc\", \"n\": 2, \"z\": null}, \"payload\": {\"total\": 9.50, "
                    "\"items\": [1, {\"q\": \"}\"}]}, \"aggregateid\": \"42\", \"aggregatetype\": "
                    "\"order\"}");
        is_int(relay_outbox_map_message(o, &m, 0, &ev, err, sizeof(err)), 0, "a good body maps");
        is_str(ev.topic, "outbox.event.order", "topic from the template and aggregatetype");
        ok(ev.key_len == 2 && memcmp(ev.key, "42", 2) == 0, "key is aggregateid");
        ok(ev.id_len == 3 && memcmp(ev.id, "e-1", 3) == 0, "id");
        static const char payload[] = "{\"total\": 9.50, \"items\": [1, {\"q\": \"}\"}]}";
        ok(ev.value_len == strlen(payload) && memcmp(ev.value, payload, ev.value_len) == 0,
           "value is the payload's bytes as written (9.50 not reformatted)");
        is_int((long)ev.timestamp_ms, 946684800000L, "timestamp is the commit time");
        hv = header(&ev, "type", &hl);
        ok(hv && hl == 11 && memcmp(hv, "OrderPlaced", 11) == 0, "type header");
        hv = header(&ev, "tenant", &hl);
        ok(hv && hl == 1 && *hv == '7', "outbox.headers field (a number as its JSON text)");
        hv = header(&ev, "missing", &hl);
        ok(!hv && hl == 0 && ev.nheaders == 7, "an absent outbox.headers field is a NULL header");
        hv = header(&ev, "trace", &hl);
        ok(hv && hl == 3 && memcmp(hv, "abc", 3) == 0, "the body's headers, strings as they are");
        hv = header(&ev, "n", &hl);
        ok(hv && hl == 1 && *hv == '2', "other header values as JSON");
        hv = header(&ev, "z", &hl);
        ok(!hv, "a null header value stays NULL");

        m = message(true, "outbox",
                     "{\"id\": \"e-2\", \"aggregatetype\": \"order\", \"aggregateid\": \"42\", "
                     "\"type\": \"T\", \"payload\": \"plain \\\"text\\\"\"}");
        is_int(relay_outbox_map_message(o, &m, 0, &ev, err, sizeof(err)), 0, "a string payload maps");
        ok(ev.value_len == 12 && memcmp(ev.value, "plain \"text\"", 12) == 0,
           "a JSON string payload is sent as its text");
        m = message(true, "outbox",
                    "{\"id\": \"e-3\", \"aggregatetype\": \"order\", \"aggregateid\": \"42\", "
                    "\"type\": \"T\"}");
        is_int(relay_outbox_map_message(o, &m, 0, &ev, err, sizeof(err)), 0, "no payload maps");
        ok(ev.value == NULL, "no payload: a NULL value");

        m = message(true, "outbox", "{\"id\": \"e-4\", \"aggregatetype\": \"order\"");
        is_int(relay_outbox_map_message(o, &m, 0, &ev, err, sizeof(err)), RELAY_EMAP,
               "truncated JSON is refused");
        ok(strstr(err, "not valid JSON") && strstr(err, "\"outbox\""), "and named: %s", err);
        ok(ev.value_len == m.content_len && ev.value == m.content && !ev.topic && !ev.id,
           "the whole body is the dead-letter value");
        m = message(true, "outbox", "[1]");
        is_int(relay_outbox_map_message(o, &m, 0, &ev, err, sizeof(err)), RELAY_EMAP,
               "a JSON array is refused");
        ok(strstr(err, "not an object") != NULL, "and named: %s", err);
        m = message(true, "outbox",
                    "{\"id\": \"e-5\", \"aggregateid\": \"42\", \"type\": \"T\", \"payload\": 1}");
        is_int(relay_outbox_map_message(o, &m, 0, &ev, err, sizeof(err)), RELAY_EMAP,
               "no aggregatetype for the topic is refused");
        ok(strstr(err, "\"aggregatetype\", which topic.template uses") && ev.id && ev.key,
           "and named, with id and key kept: %s", err);
        m = message(true, "outbox",
                    "{\"id\": \"e-6\", \"aggregatetype\": \"order\", \"aggregateid\": {}, "
                    "\"type\": \"T\"}");
        is_int(relay_outbox_map_message(o, &m, 0, &ev, err, sizeof(err)), RELAY_EMAP,
               "an object as aggregateid is refused");
        ok(strstr(err, "has no \"aggregateid\"") != NULL, "and named: %s", err);
        m = message(true, "outbox",
                    "{\"id\": \"e-7\", \"id\": \"e-8\", \"aggregatetype\": \"order\", "
                    "\"aggregateid\": \"1\", \"type\": \"T\"}");
        is_int(relay_outbox_map_message(o, &m, 0, &ev, err, sizeof(err)), RELAY_EMAP,
               "a duplicate key is refused");
        m = message(true, "outbox",
                    "{\"id\": \"e-9\", \"aggregatetype\": \"order\", \"aggregateid\": \"1\", "
                    "\"type\": \"T\", \"headers\": [\"x\"]}");
        is_int(relay_outbox_map_message(o, &m, 0, &ev, err, sizeof(err)), RELAY_EMAP,
               "headers that are not an object are refused");
        ok(strstr(err, "\"headers\" that is not an object") != NULL, "and named: %s", err);
        relay_outbox_free(o);
        relay_settings_free(set);

        /* messages only: the outbox table is not an outbox any more. */
        relay_pgoutput_t *d = decoder();
        relay_pgo_msg_t pm;
        buf_t b;
        o = msg_mapping(&set, "messages", "");
        relation(&b, 7, "public", "outbox", 6, cols, types_json);
        is_int(relay_pgoutput_decode(d, b.b, b.n, &pm, err, sizeof(err)), 0, "decode outbox relation");
        is_int(relay_outbox_bind(o, pm.relation.relation), 0,
               "outbox.source = messages: the outbox table is not bound");
        relay_outbox_free(o);
        relay_settings_free(set);
        o = msg_mapping(&set, "table", "");
        m = message(true, "outbox", "{}");
        ok(!relay_outbox_wants_message(o, &m), "outbox.source = table: no message is an event");
        relay_outbox_free(o);
        relay_settings_free(set);
        o = msg_mapping(&set, "both", "");
        is_int(relay_outbox_bind(o, pm.relation.relation), 1, "outbox.source = both: the table is bound");
        ok(relay_outbox_wants_message(o, &m), "and messages are events");
        relay_outbox_free(o);
        relay_settings_free(set);
        relay_pgoutput_free(d);
}

/* Settings from key = value pairs (NULL-terminated); the error text when they do not load. */
static relay_settings_t *settings_kv(const char *const *kv, char *err, size_t errlen)
{
        relay_config_t *c = NULL;
        relay_settings_t *set = NULL;

        if (relay_config_new(&c) != 0)
                tap_bail("relay_config_new");
        for (size_t i = 0; kv[i]; i += 2)
                if (relay_config_set(c, kv[i], kv[i + 1], "test", err, errlen) != 0) {
                        relay_config_free(c);
                        return NULL;
                }
        if (relay_settings_load(&set, c, err, errlen) != 0)
                set = NULL;
        relay_config_free(c);
        return set;
}

static const char *const dcols[] = {"id", "aggregatetype", "aggregateid", "type", "payload", "created"};

/* Map one row of dcols with types through a mapping from kv; returns the map's rc. */
static int map_row(const char *const *kv, const uint32_t *types, const char *const *row,
                   relay_event_t *ev, relay_outbox_t **o, relay_settings_t **set,
                   relay_pgoutput_t *d, char *err, size_t errlen)
{
        relay_pgo_msg_t m;
        buf_t b;

        *set = settings_kv(kv, err, errlen);
        if (!*set)
                tap_bail("settings: %s", err);
        if (relay_outbox_new(o, *set, err, errlen) != 0)
                tap_bail("relay_outbox_new: %s", err);
        relation(&b, 300, "public", "outbox", 6, dcols, types);
        if (relay_pgoutput_decode(d, b.b, b.n, &m, err, errlen) != 0 ||
            relay_outbox_bind(*o, m.relation.relation) != 1)
                tap_bail("bind: %s", err);
        insert(&b, 300, 6, row);
        if (relay_pgoutput_decode(d, b.b, b.n, &m, err, errlen) != 0)
                tap_bail("decode: %s", err);
        return relay_outbox_map(*o, &m.insert, 0, ev, err, errlen);
}

static void done_map(relay_outbox_t *o, relay_settings_t *set)
{
        relay_outbox_free(o);
        relay_settings_free(set);
}

#define JV "\"{\\\"a\\\": \\\"ü\\\"}\""
#define ENV "{\"payload\":\"hi\",\"kind\":\"Created\"}"
#define CH "{\"schema\":{\"type\":\"string\",\"optional\":false},\"payload\":\"shop\"}"

/* format.profile and Debezium's router keys (route.*, table.field.event.timestamp). */
static void test_debezium_keys(void)
{
        static const uint32_t text_ts[] = {2950, 1043, 1043, 1043, 25, 1114};
        static const uint32_t bytea_tstz[] = {2950, 1043, 1043, 1043, 17, 1184};
        relay_pgoutput_t *d = decoder();
        relay_outbox_t *o;
        relay_settings_t *set;
        relay_event_t ev;
        char err[RELAY_ERRBUF];

        const char *row[] = {"8d5c5c6e-0000-4000-8000-000000000001", "order", "order-42",
                             "OrderCreated", "{\"a\": \"ü\"}", "2001-02-03 04:05:06.789999"};
        const char *const json[] = {"format.profile", "connect-json", "table.field.event.timestamp",
                                    "created", NULL};
        is_int(map_row(json, text_ts, row, &ev, &o, &set, d, err, sizeof(err)), 0, "connect-json maps");
        ok(ev.key_len == 10 && memcmp(ev.key, "\"order-42\"", 10) == 0, "key is a JSON string");
        ok(ev.value_len == sizeof(JV) - 1 && memcmp(ev.value, JV, sizeof(JV) - 1) == 0,
           "value is the payload as a JSON string");
        is_int(ev.nheaders, 1, "one header: Debezium sends no type header");
        ok(ev.headers[0].len == 36 && memcmp(ev.headers[0].value, row[0], 36) == 0,
           "id header as SimpleHeaderConverter writes it");
        is_int(ev.timestamp_ms, INT64_C(981173106789), "timestamp from the timestamp column (ms, truncated)");
        done_map(o, set);

        const char *const server[] = {"format.profile", "debezium-server",
                                      "format.debezium.topic_prefix", "shop", NULL};
        is_int(map_row(server, text_ts, row, &ev, &o, &set, d, err, sizeof(err)), 0, "debezium-server maps");
        is_int(ev.nheaders, 5, "four __debezium.context headers and id");
        is_str(ev.headers[0].name, "__debezium.context.connectorLogicalName", "context headers first");
        ok(ev.headers[0].len == sizeof(CH) - 1 && memcmp(ev.headers[0].value, CH, sizeof(CH) - 1) == 0,
           "as JSON with a schema");
        is_str(ev.headers[4].name, "id", "then id");
        is_int(ev.timestamp_ms, INT64_C(946684800000), "no timestamp column: the commit time");
        done_map(o, set);

        /* tracing.span.context.field: Properties.store() text (a comment line,
         * '=' escaped in values) becomes the W3C headers, before id. */
        static const uint32_t text_text[] = {2950, 1043, 1043, 1043, 25, 25};
        const char *trow[] = {"id-t", "order", "order-42", "T", "{}",
                              "#Wed Dec 02 06:00:00 UTC 2026\n"
                              "tracestate=rojo\\=00f067aa0ba902b7,congo\\=t61rcWkgMzE\n"
                              "traceparent=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\n"};
        const char *const trace[] = {"format.profile", "connect-string", "tracing.span.context.field",
                                     "created", NULL};
        is_int(map_row(trace, text_text, trow, &ev, &o, &set, d, err, sizeof(err)), 0, "traced row maps");
        is_int(ev.nheaders, 3, "traceparent, tracestate, id");
        is_str(ev.headers[0].name, "traceparent", "traceparent first");
        ok(ev.headers[0].len == 55 &&
               memcmp(ev.headers[0].value, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", 55) == 0,
           "the writer's traceparent");
        is_str(ev.headers[1].name, "tracestate", "tracestate next");
        ok(ev.headers[1].len == 39 &&
               memcmp(ev.headers[1].value, "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", 39) == 0,
           "tracestate unescaped as Properties.load() does");
        is_str(ev.headers[2].name, "id", "then id");
        done_map(o, set);
        const char *const trace_server[] = {"format.profile", "debezium-server",
                                            "tracing.span.context.field", "created", NULL};
        is_int(map_row(trace_server, text_text, trow, &ev, &o, &set, d, err, sizeof(err)), 0,
               "traced row maps (debezium-server)");
#define TP "{\"schema\":{\"type\":\"string\",\"optional\":false},\"payload\":\"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\"}"
        ok(ev.nheaders == 3 && ev.headers[0].len == sizeof(TP) - 1 &&
               memcmp(ev.headers[0].value, TP, sizeof(TP) - 1) == 0,
           "traceparent as Debezium Server's JSON header (Schema.STRING_SCHEMA)");
        done_map(o, set);
        const char *const trace_raw[] = {"tracing.span.context.field", "created", NULL};
        const char *brow[] = {"id-t", "order", "order-42", "T", "{}",
                              "traceparent = 00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01"};
        is_int(map_row(trace_raw, text_text, brow, &ev, &o, &set, d, err, sizeof(err)), 0,
               "row with an invalid traceparent maps");
        ok(ev.nheaders == 2 && strcmp(ev.headers[0].name, "id") == 0,
           "an invalid traceparent (upper-case hex) gives no trace headers");
        done_map(o, set);
        const char *crow[] = {"id-t", "order", "order-42", "T", "{}",
                              "  traceparent : 01-0af7651916cd43dd8448eb211c80319c-\\\n"
                              "     b7ad6b7169203331-00-future\r\nbaggage=k1\\=v1"};
        is_int(map_row(trace_raw, text_text, crow, &ev, &o, &set, d, err, sizeof(err)), 0,
               "row with a continued line maps");
        ok(ev.nheaders == 4 && ev.headers[0].len == 55 &&
               memcmp(ev.headers[0].value, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", 55) == 0,
           "a later version's traceparent, continued over two lines, is sent as version 00");
        ok(ev.nheaders == 4 && strcmp(ev.headers[1].name, "baggage") == 0 && ev.headers[1].len == 5 &&
               memcmp(ev.headers[1].value, "k1=v1", 5) == 0,
           "baggage as written");
        done_map(o, set);

        /* W3C allows baggage up to 8192 bytes: a long line is no reason to drop it. */
        static char big[6000], lrow_trace[6200];
        memset(big, 'b', 5000);
        memcpy(big, "k=", 2);
        big[5000] = '\0';
        snprintf(lrow_trace, sizeof(lrow_trace),
                 "traceparent=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\nbaggage=%s", big);
        const char *lrow[] = {"id-t", "order", "order-42", "T", "{}", lrow_trace};
        is_int(map_row(trace_raw, text_text, lrow, &ev, &o, &set, d, err, sizeof(err)), 0,
               "row with 5000 bytes of baggage maps");
        ok(ev.nheaders == 4 && strcmp(ev.headers[1].name, "baggage") == 0 &&
               ev.headers[1].len == 5000 && memcmp(ev.headers[1].value, big, 5000) == 0,
           "  the baggage is sent whole (%zu headers, second %s, %zu bytes)", ev.nheaders,
           ev.nheaders > 1 ? ev.headers[1].name : "-", ev.nheaders > 1 ? ev.headers[1].len : 0);
        done_map(o, set);

        /* Properties.store() writes a character beyond U+FFFF as a surrogate
         * pair of \\u escapes: joined, it is UTF-8's four bytes (the two
         * halves on their own are no UTF-8 at all). A malformed \\u makes
         * Properties.load() refuse the whole text: no trace headers. */
        const char *srow[] = {"id-t", "order", "order-42", "T", "{}",
                              "traceparent=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\n"
                              "baggage=k=\\ud83d\\ude00"};
        is_int(map_row(trace_raw, text_text, srow, &ev, &o, &set, d, err, sizeof(err)), 0,
               "row with a surrogate pair in its baggage maps");
        ok(ev.nheaders == 4 && ev.headers[1].len == 6 &&
               memcmp(ev.headers[1].value, "k=\xf0\x9f\x98\x80", 6) == 0,
           "  the pair is one 4-byte UTF-8 character (%zu bytes)",
           ev.nheaders > 1 ? ev.headers[1].len : 0);
        done_map(o, set);
        const char *mrow[] = {"id-t", "order", "order-42", "T", "{}",
                              "traceparent=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\n"
                              "baggage=k=\\ud83d"};
        is_int(map_row(trace_raw, text_text, mrow, &ev, &o, &set, d, err, sizeof(err)), 0,
               "row with a lone surrogate in its span context maps");
        ok(ev.nheaders == 2 && strcmp(ev.headers[0].name, "id") == 0,
           "  no trace headers: Properties.load() refuses the text (%zu headers)", ev.nheaders);
        done_map(o, set);

        /* A timestamptz column with an offset; a tombstone for a blank payload. */
        const char *row2[] = {"id-2", "order", "order-42", "T", "\\x", "2001-02-03 04:05:06.789999+05:30"};
        const char *const tomb[] = {"route.tombstone.on.empty.payload", "true",
                                    "table.field.event.timestamp", "created", NULL};
        is_int(map_row(tomb, bytea_tstz, row2, &ev, &o, &set, d, err, sizeof(err)), 0, "bytea row maps");
        ok(ev.value != NULL && ev.value_len == 0, "an empty bytea payload is no tombstone (Debezium: bytes never blank)");
        is_int(ev.timestamp_ms, INT64_C(981173106789) - 19800000, "timestamptz offset applied");
        done_map(o, set);
        const char *row3[] = {"id-3", "order", "order-42", "T", " \t\n", "2001-02-03 04:05:06"};
        is_int(map_row(tomb, text_ts, row3, &ev, &o, &set, d, err, sizeof(err)), 0, "blank text payload maps");
        ok(ev.value == NULL, "a blank text payload becomes a tombstone");
        done_map(o, set);
        const char *row4[] = {"id-4", "order", "order-42", "T", "x", "yesterday"};
        is_int(map_row(tomb, text_ts, row4, &ev, &o, &set, d, err, sizeof(err)), RELAY_EMAP,
               "an unreadable timestamp is refused");
        ok(strstr(err, "table.field.event.timestamp") != NULL, "naming the key: %s", err);
        done_map(o, set);

        /* route.by.field and route.topic.replacement build the topic. */
        const char *const route[] = {"route.by.field", "type", "route.topic.replacement",
                                     "events.${routedByValue}.v1", NULL};
        is_int(map_row(route, text_ts, row, &ev, &o, &set, d, err, sizeof(err)), 0, "routed row maps");
        is_str(ev.topic, "events.OrderCreated.v1", "topic from route.by.field and route.topic.replacement");
        done_map(o, set);
        const char *const byonly[] = {"route.by.field", "type", NULL};
        is_int(map_row(byonly, text_ts, row, &ev, &o, &set, d, err, sizeof(err)), 0, "route.by.field alone");
        is_str(ev.topic, "outbox.event.OrderCreated", "Debezium's default replacement");
        done_map(o, set);
        /* route.topic.regex: the routing value through Java's RegexRouter rules. */
        const char *const re[] = {"route.by.field", "type", "route.topic.regex",
                                  "(?<verb>[A-Z][a-z]+)(?<what>[A-Za-z]+)", "route.topic.replacement",
                                  "evt.${what}.$1", NULL};
        is_int(map_row(re, text_ts, row, &ev, &o, &set, d, err, sizeof(err)), 0, "regex-routed row maps");
        is_str(ev.topic, "evt.Created.Order", "topic from the regex's groups");
        done_map(o, set);
        const char *const nomatch[] = {"route.by.field", "type", "route.topic.regex", "(.*)_v1",
                                       "route.topic.replacement", "$1", NULL};
        is_int(map_row(nomatch, text_ts, row, &ev, &o, &set, d, err, sizeof(err)), 0,
               "unmatched value maps");
        is_str(ev.topic, "OrderCreated", "a value the regex does not match is the topic, as RegexRouter");
        done_map(o, set);
        const char *const group[] = {"route.topic.replacement", "x.$1", NULL};
        is_int(map_row(group, text_ts, row, &ev, &o, &set, d, err, sizeof(err)), 0, "$1 with the default regex");
        is_str(ev.topic, "x.order", "$1 is the whole routing value (the aggregate type)");
        done_map(o, set);
        /* A routing value too long for any topic is refused, quoting it. */
        static char longtype[601];
        memset(longtype, 'q', 600);
        const char *lrow2[] = {row[0], row[1], row[2], longtype, row[4], row[5]};
        is_int(map_row(nomatch, text_ts, lrow2, &ev, &o, &set, d, err, sizeof(err)), RELAY_EMAP,
               "a 600-character routing value is refused");
        ok(strstr(err, "invalid Kafka topic name \"qqqqqqqqqqqqqqqqqqqq") != NULL &&
               strstr(err, "route.topic.regex") != NULL,
           "  the message quotes the value: %.80s", err);
        done_map(o, set);
        const char *const badre[] = {"route.topic.regex", "(.*?)_v1", NULL};
        ok(settings_kv(badre, err, sizeof(err)) == NULL && strstr(err, "route.topic.regex") &&
               strstr(err, "lazy quantifier"),
           "a construct POSIX lacks is refused by name: %s", err);
        const char *const both[] = {"route.by.field", "type", "topic.template", "x.${type}", NULL};
        ok(settings_kv(both, err, sizeof(err)) == NULL && strstr(err, "topic.template"),
           "topic.template and route.* together are refused: %s", err);
        /* ... and for logical decoding messages (outbox.source = messages). */
        const char *const mre[] = {"outbox.source", "messages", "route.topic.regex",
                                   "(?<agg>[a-z]+)_v(?<v>[0-9]+)", "route.topic.replacement",
                                   "${agg}.events.v$2", NULL};
        set = settings_kv(mre, err, sizeof(err));
        if (!set || relay_outbox_new(&o, set, err, sizeof(err)) != 0)
                tap_bail("messages with a regex: %s", err);
        relay_pgo_message_t mm = message(true, "outbox",
                                         "{\"id\": \"e-1\", \"aggregatetype\": \"order_v3\", "
                                         "\"aggregateid\": \"42\", \"type\": \"T\", \"payload\": {}}");
        is_int(relay_outbox_map_message(o, &mm, 0, &ev, err, sizeof(err)), 0, "a message maps with a regex");
        is_str(ev.topic, "order.events.v3", "the message's routing value through the regex");
        done_map(o, set);
        /* Placements apply to messages as to rows (outbox.source = both
         * sends both kinds for one aggregate): a header by its alias, the
         * partition from the field. */
        const char *const mplace[] = {"outbox.source", "both", "table.fields.additional.placement",
                                      "tenant:header:Tenant,part:partition", NULL};
        set = settings_kv(mplace, err, sizeof(err));
        if (!set || relay_outbox_new(&o, set, err, sizeof(err)) != 0)
                tap_bail("messages with placements: %s", err);
        mm = message(true, "outbox",
                     "{\"id\": \"e-2\", \"aggregatetype\": \"order\", \"aggregateid\": \"42\", "
                     "\"type\": \"T\", \"payload\": {}, \"tenant\": \"acme\", \"part\": 2}");
        is_int(relay_outbox_map_message(o, &mm, 0, &ev, err, sizeof(err)), 0,
               "a message maps with placements");
        size_t hl = 0;
        const char *hv = header(&ev, "Tenant", &hl);
        ok(hv && hl == 4 && memcmp(hv, "acme", 4) == 0 && !header(&ev, "tenant", &hl),
           "  the header placement is named by its alias, as for a row");
        ok(ev.has_partition && ev.partition == 2,
           "  the partition placement applies, as for a row (has %d, partition %d)",
           (int)ev.has_partition, (int)ev.partition);
        mm = message(true, "outbox",
                     "{\"id\": \"e-3\", \"aggregatetype\": \"order\", \"aggregateid\": \"42\", "
                     "\"type\": \"T\", \"payload\": {}, \"part\": -1}");
        is_int(relay_outbox_map_message(o, &mm, 0, &ev, err, sizeof(err)), RELAY_EMAP,
               "a message with a negative partition is refused");
        ok(strstr(err, "\"part\"") && strstr(err, "partition"), "  naming the field: %s", err);
        mm = message(true, "outbox",
                     "{\"id\": \"e-4\", \"aggregatetype\": \"order\", \"aggregateid\": \"42\", "
                     "\"type\": \"T\", \"payload\": {}}");
        is_int(relay_outbox_map_message(o, &mm, 0, &ev, err, sizeof(err)), 0,
               "a message without the partition field maps");
        ok(!ev.has_partition, "  and the partitioner decides, as for a NULL column");
        done_map(o, set);
        const char *const nogroup[] = {"route.topic.replacement", "x.$2", NULL};
        ok(settings_kv(nogroup, err, sizeof(err)) == NULL && strstr(err, "no group 2"),
           "a reference to a group the regex lacks is refused: %s", err);

        /* table.fields.additional.placement: header alias, envelope, partition. */
        static const uint32_t with_part[] = {2950, 1043, 1043, 1043, 25, 23};
        const char *prow[] = {"id-5", "order", "order-42", "Created", "hi", "2"};
        const char *const place[] = {"format.profile", "connect-json",
                                     "table.fields.additional.placement",
                                     "type:header:eventType, type:envelope:kind,created:partition",
                                     NULL};
        is_int(map_row(place, with_part, prow, &ev, &o, &set, d, err, sizeof(err)), 0,
               "placements map");
        is_int(ev.nheaders, 2, "id and the header placement");
        is_str(ev.headers[1].name, "eventType", "header named by its alias");
        ok(ev.value_len == sizeof(ENV) - 1 && memcmp(ev.value, ENV, sizeof(ENV) - 1) == 0,
           "value is the struct: payload, then the envelope field");
        ok(ev.has_partition && ev.partition == 2, "partition from the integer column");
        done_map(o, set);
        const char *const srv[] = {"format.profile", "debezium-server", "format.debezium.topic_prefix",
                                   "shop", "table.fields.additional.placement",
                                   "created:partition", NULL};
        is_int(map_row(srv, with_part, prow, &ev, &o, &set, d, err, sizeof(err)), 0,
               "partition placement under debezium-server maps");
        ok(!ev.has_partition, "Debezium Server's sink ignores the partition: so does the profile");
        done_map(o, set);
        /* table.field.additional.missing: a placed column the table lacks. */
        const char *const miss[] = {"format.profile", "connect-json",
                                    "table.fields.additional.placement",
                                    "nope:header,nope2:envelope,type:envelope", NULL};
        is_int(map_row(miss, with_part, prow, &ev, &o, &set, d, err, sizeof(err)), RELAY_EMAP,
               "a missing placed column is an error by default");
        ok(strstr(err, "\"nope\"") != NULL, "naming it: %s", err);
        done_map(o, set);
        const char *const ign[] = {"format.profile", "connect-json",
                                   "table.fields.additional.placement",
                                   "nope:header,nope2:envelope,type:envelope:kind,nope3:partition",
                                   "table.field.additional.missing", "ignore", NULL};
        is_int(map_row(ign, with_part, prow, &ev, &o, &set, d, err, sizeof(err)), 0,
               "table.field.additional.missing = ignore: the row maps");
        is_int(ev.nheaders, 1, "the missing header is left out");
        ok(ev.value_len == sizeof(ENV) - 1 && memcmp(ev.value, ENV, sizeof(ENV) - 1) == 0,
           "the missing envelope field is left out");
        ok(!ev.has_partition, "the missing partition column is left out");
        done_map(o, set);
        const char *const envstr[] = {"format.profile", "connect-string",
                                      "table.fields.additional.placement", "type:envelope", NULL};
        ok(settings_kv(envstr, err, sizeof(err)) == NULL && strstr(err, "envelope placement"),
           "an envelope placement needs a JSON profile: %s", err);
        const char *const badplace[] = {"table.fields.additional.placement", "type:body", NULL};
        ok(settings_kv(badplace, err, sizeof(err)) == NULL && strstr(err, "header, envelope or partition"),
           "an unknown placement is refused: %s", err);
        relay_pgoutput_free(d);
}

/* outbox.table lists two tables with different column orders: rows of both
 * map by their own layout, interleaved, and a third table is not ours. */
static void test_two_tables(void)
{
        fx_t f;

        fx_open(&f, "outbox, app.events", "", "t.${aggregatetype}");
        const char *const cols_b[] = {"payload", "type", "aggregateid", "aggregatetype", "id"};
        const uint32_t types_b[] = {3802, 1043, 1043, 1043, 2950};

        is_int((long)f.set->n_outbox_tables, 2, "two outbox tables");
        is_int(fx_relation(&f, 300, "public", "outbox", 6, cols, types_json), 1, "public.outbox bound");
        is_int(fx_relation(&f, 301, "app", "events", 5, cols_b, types_b), 1, "app.events bound");
        is_int(fx_relation(&f, 302, "public", "events", 5, cols_b, types_b), 0, "public.events is not listed");
        ok(relay_outbox_is_outbox(f.o, 300) && relay_outbox_is_outbox(f.o, 301) &&
                   !relay_outbox_is_outbox(f.o, 302),
           "both listed tables are outbox tables, the third is not");
        for (int round = 0; round < 2; round++) {
                const char *row_a[] = {"id-a", "order", "agg-a", "Placed", "{\"a\":1}", NULL};
                fx_insert(&f, 300, 6, row_a, "decode row a");
                is_int(fx_map(&f, 0), 0, "map row a");
                ok(f.ev.id_len == 4 && memcmp(f.ev.id, "id-a", 4) == 0 && f.ev.key_len == 5 &&
                           memcmp(f.ev.key, "agg-a", 5) == 0 && strcmp(f.ev.topic, "t.order") == 0,
                   "round %d: row of public.outbox mapped by its layout", round);
                const char *row_b[] = {"{\"b\":2}", "Shipped", "agg-b", "parcel", "id-b"};
                fx_insert(&f, 301, 5, row_b, "decode row b");
                is_int(fx_map(&f, 0), 0, "map row b");
                ok(f.ev.id_len == 4 && memcmp(f.ev.id, "id-b", 4) == 0 && f.ev.key_len == 5 &&
                           memcmp(f.ev.key, "agg-b", 5) == 0 && strcmp(f.ev.topic, "t.parcel") == 0 &&
                           f.ev.value_len == 7 && memcmp(f.ev.value, "{\"b\":2}", 7) == 0,
                   "round %d: row of app.events mapped by its own layout", round);
        }
        /* A message about a row names the row's table. */
        const char *const cols_c[] = {"id", "aggregateid", "type", "payload"};
        const uint32_t types_c[] = {2950, 1043, 1043, 3802};
        is_int(fx_relation(&f, 301, "app", "events", 4, cols_c, types_c), 1, "app.events rebound");
        const char *row_c[] = {"id-c", "agg-c", "T", "{}"};
        fx_insert(&f, 301, 4, row_c, "decode row c");
        is_int(fx_map(&f, 0), RELAY_EMAP,
               "a row of app.events without aggregatetype refused");
        ok(strstr(f.err, "app") && strstr(f.err, "events") && strstr(f.err, "aggregatetype"),
           "  the message names the table and the column: %s", f.err);
        fx_close(&f);
}

int main(void)
{
        test_defaults();
        test_two_tables();
        test_bytea_and_template();
        test_header_cap();
        test_messages();

        test_debezium_keys();
        return done_testing();
}
