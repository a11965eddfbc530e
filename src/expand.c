/*
 * expand.c - table.expand.json.payload: Debezium's JsonSchemaData (a JSON
 * string payload inferred into a Connect struct) and what Kafka Connect's
 * converters write for that struct: Struct.toString(), JsonConverter's
 * value and its schema. No state; the caller's buffer.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/expand.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

static int put(relay_fmtbuf_t *b, const char *s, size_t n)
{
        return relay_format_put(b, s, n);
}

static int puts_(relay_fmtbuf_t *b, const char *s)
{
        return relay_format_put(b, s, strlen(s));
}

/* A JSON string with Jackson's escapes. */
static int jstr(relay_fmtbuf_t *b, const char *s, size_t n)
{
        return relay_format_string(b, s, n);
}

/* --- table.expand.json.payload ------------------------------------------
 * Debezium's JsonSchemaData: a JSON object payload becomes a Connect struct
 * whose schema is inferred from the document (Jackson's node types: an
 * integer that fits 32 bits is int32, else int64; other numbers float64;
 * null members and empty arrays leave no field; nested objects are structs
 * named by their path from the payload column, "payload.a.b"), then written
 * by the profile's converter. A document JsonSchemaData throws on (an array
 * of mixed types or number kinds, of nulls only, of empty arrays) stays the
 * string it was, as the router's catch leaves it. */

enum { XS_STRING, XS_BOOLEAN, XS_INT32, XS_INT64, XS_FLOAT64, XS_ARRAY, XS_STRUCT };

typedef struct xs {
        int type;
        bool required;     /* a struct merged from several: copySchemaBasics() drops optional */
        char *name;        /* struct */
        struct xs *items;  /* array */
        size_t nf;         /* struct fields */
        char **fname;
        struct xs **fs;
} xs_t;

static void xs_free(xs_t *s)
{
        if (!s)
                return;
        free(s->name);
        xs_free(s->items);
        for (size_t i = 0; i < s->nf; i++) {
                free(s->fname[i]);
                xs_free(s->fs[i]);
        }
        free(s->fname);
        free(s->fs);
        free(s);
}

static bool xs_equal(const xs_t *a, const xs_t *b)
{
        if (!a || !b)
                return a == b;
        if (a->type != b->type || a->required != b->required || a->nf != b->nf ||
            !!a->name != !!b->name || (a->name && strcmp(a->name, b->name) != 0) ||
            !xs_equal(a->items, b->items))
                return false;
        for (size_t i = 0; i < a->nf; i++)
                if (strcmp(a->fname[i], b->fname[i]) != 0 || !xs_equal(a->fs[i], b->fs[i]))
                        return false;
        return true;
}

/* A copy of s (deep); NULL when out of memory. */
static xs_t *xs_copy(const xs_t *s)
{
        xs_t *c = calloc(1, sizeof(*c));
        if (!c)
                return NULL;
        c->type = s->type;
        c->required = s->required;
        if ((s->name && !(c->name = strdup(s->name))) || (s->items && !(c->items = xs_copy(s->items))))
                goto nomem;
        if (s->nf) {
                c->fname = calloc(s->nf, sizeof(*c->fname));
                c->fs = calloc(s->nf, sizeof(*c->fs));
                if (!c->fname || !c->fs)
                        goto nomem;
                for (size_t i = 0; i < s->nf; i++, c->nf++)
                        if (!(c->fname[i] = strdup(s->fname[i])) || !(c->fs[i] = xs_copy(s->fs[i]))) {
                                free(c->fname[i]);
                                goto nomem;
                        }
        }
        return c;
nomem:
        xs_free(c);
        return NULL;
}

static int xs_add(xs_t *s, const char *name, xs_t *f)
{
        char **n = realloc(s->fname, (s->nf + 1) * sizeof(*n));
        if (n)
                s->fname = n;
        xs_t **g = realloc(s->fs, (s->nf + 1) * sizeof(*g));
        if (g)
                s->fs = g;
        char *d = n && g ? strdup(name) : NULL;
        if (!d) {
                xs_free(f);
                return RELAY_ENOMEM;
        }
        s->fname[s->nf] = d;
        s->fs[s->nf++] = f;
        return 0;
}

/* Jackson's node type: objects, arrays, strings, numbers, booleans, null. */
static int node_type(const json_t *j)
{
        switch (json_typeof(j)) {
        case JSON_INTEGER:
        case JSON_REAL:
                return 'n';
        case JSON_TRUE:
        case JSON_FALSE:
                return 'b';
        case JSON_OBJECT:
                return 'o';
        case JSON_ARRAY:
                return 'a';
        case JSON_STRING:
                return 's';
        default:
                return 'z';
        }
}

static int number_type(const json_t *j)
{
        if (json_is_real(j))
                return XS_FLOAT64;
        json_int_t v = json_integer_value(j);
        return v >= INT32_MIN && v <= INT32_MAX ? XS_INT32 : XS_INT64;
}

#define XS_FAIL 1 /* JsonSchemaData throws: the payload stays a string */

static int infer(const char *key, const json_t *j, xs_t **out);

/* An array's element schema (toConnectSchemaWithCycles); *out NULL never. */
static int infer_items(const char *key, const json_t *a, xs_t **out)
{
        const json_t *ref = NULL;
        size_t i;
        json_t *e;
        json_array_foreach(a, i, e) {
                if (json_is_null(e))
                        continue;
                if (!ref)
                        ref = e;
                if (node_type(e) != node_type(ref))
                        return XS_FAIL; /* "Field is not a homogenous array" */
                if (node_type(ref) == 'n' && number_type(e) != number_type(ref))
                        return XS_FAIL;
        }
        *out = NULL;
        if (ref && json_is_object(ref)) {
                /* Java merges a HashSet of the distinct element schemas, in
                 * the set's order, into a struct that is no longer optional;
                 * here they merge in array order (the same bytes when all
                 * elements have the same members). */
                xs_t *merged = NULL, *first = NULL;
                bool distinct = false;
                json_array_foreach(a, i, e) {
                        if (!json_is_object(e))
                                continue;
                        xs_t *s;
                        int rc = infer(key, e, &s);
                        if (rc) {
                                xs_free(merged);
                                xs_free(first);
                                return rc;
                        }
                        if (!merged) {
                                merged = s;
                                if (!(first = xs_copy(s))) {
                                        xs_free(merged);
                                        return RELAY_ENOMEM;
                                }
                                continue;
                        }
                        distinct = distinct || !xs_equal(first, s);
                        for (size_t f = 0; f < s->nf; f++) {
                                size_t g = 0;
                                while (g < merged->nf && strcmp(merged->fname[g], s->fname[f]) != 0)
                                        g++;
                                if (g == merged->nf) {
                                        xs_t *c = xs_copy(s->fs[f]);
                                        if (!c || xs_add(merged, s->fname[f], c)) {
                                                xs_free(s);
                                                xs_free(merged);
                                                xs_free(first);
                                                return RELAY_ENOMEM;
                                        }
                                }
                        }
                        xs_free(s);
                }
                xs_free(first);
                if (distinct)
                        merged->required = true;
                *out = merged;
                return 0;
        }
        if (!ref)
                return XS_FAIL; /* only nulls: "unrecognized member schema" */
        int rc = infer(NULL, ref, out);
        if (rc == 0 && !*out)
                return XS_FAIL;
        return rc;
}

/* toConnectSchema(key, node): 0 and *out (NULL for no schema); XS_FAIL; RELAY_ENOMEM. */
static int infer(const char *key, const json_t *j, xs_t **out)
{
        *out = NULL;
        int t = node_type(j);
        if (t == 'z')
                return 0;
        xs_t *s = calloc(1, sizeof(*s));
        if (!s)
                return RELAY_ENOMEM;
        int rc = 0;
        switch (t) {
        case 's':
                s->type = XS_STRING;
                break;
        case 'b':
                s->type = XS_BOOLEAN;
                break;
        case 'n':
                s->type = number_type(j);
                break;
        case 'a':
                s->type = XS_ARRAY;
                if (json_array_size(j) == 0) {
                        free(s);
                        return 0;
                }
                rc = infer_items(key, j, &s->items);
                break;
        default: {
                s->type = XS_STRUCT;
                if (key && !(s->name = strdup(key))) {
                        rc = RELAY_ENOMEM;
                        break;
                }
                const char *k;
                json_t *v;
                json_object_foreach((json_t *)(uintptr_t)j, k, v) {
                        size_t kl = key ? strlen(key) : 0;
                        char *fk = malloc(kl + strlen(k) + 2);
                        if (!fk) {
                                rc = RELAY_ENOMEM;
                                break;
                        }
                        if (kl && key[strspn(key, " \t\n\r\f\v")])
                                sprintf(fk, "%s.%s", key, k);
                        else
                                strcpy(fk, k);
                        xs_t *f;
                        rc = infer(fk, v, &f);
                        free(fk);
                        if (rc)
                                break;
                        if (!f)
                                continue;
                        bool dup = false;
                        for (size_t i = 0; i < s->nf; i++)
                                dup = dup || strcmp(s->fname[i], k) == 0;
                        if (dup)
                                xs_free(f);
                        else if ((rc = xs_add(s, k, f)))
                                break;
                }
                break;
        }
        }
        if (rc) {
                xs_free(s);
                return rc;
        }
        *out = s;
        return 0;
}

/*
 * Whether the value JsonSchemaData.toConnectData() builds from j fits the
 * schema inferred for it: every Struct.put() validates its value against
 * the field's schema (ConnectSchema.validateValue(), lists element by
 * element), and the schema came from one element of an array while the
 * values come from all of them. Two objects of an array whose member has
 * another type in each ([{"price": 10}, {"price": 9.99}]), a null among
 * objects of different members (their merged struct is required), or
 * [[1], [2.5]] throw there, after the router has already replaced the
 * payload's schema: the payload stays the string it was (a converter that
 * writes the schema, JsonConverter, then throws on the pair).
 */
static bool fits(const xs_t *s, const json_t *j)
{
        if (json_is_null(j))
                return !s->required;
        switch (node_type(j)) {
        case 's':
                return s->type == XS_STRING;
        case 'b':
                return s->type == XS_BOOLEAN;
        case 'n':
                return s->type == number_type(j);
        case 'a': {
                size_t i;
                json_t *e;
                if (s->type != XS_ARRAY)
                        return false;
                json_array_foreach(j, i, e) {
                        if (!fits(s->items, e))
                                return false;
                }
                return true;
        }
        default:
                if (s->type != XS_STRUCT)
                        return false;
                for (size_t f = 0; f < s->nf; f++) {
                        const json_t *v = json_object_get(j, s->fname[f]);
                        if (v && !fits(s->fs[f], v))
                                return false;
                }
                return true;
        }
}

/* Java's Double.toString() (the shortest digits that read back). */
static int java_double(relay_fmtbuf_t *b, double d)
{
        char e[40], out[64];
        if (d == 0)
                return puts_(b, signbit(d) ? "-0.0" : "0.0");
        for (int prec = 1; prec <= 17; prec++) {
                snprintf(e, sizeof(e), "%.*e", prec - 1, d);
                if (strtod(e, NULL) == d)
                        break;
        }
        char digits[24];
        size_t nd = 0, o = 0;
        const char *p = e;
        bool neg = *p == '-';
        if (neg)
                p++;
        for (; *p && *p != 'e'; p++)
                if (*p >= '0' && *p <= '9')
                        digits[nd++] = *p;
        int exp = atoi(p + 1);
        while (nd > 1 && digits[nd - 1] == '0')
                nd--;
        if (neg)
                out[o++] = '-';
        double a = fabs(d);
        if (a >= 1e-3 && a < 1e7) {
                if (exp >= 0) {
                        for (int i = 0; i <= exp; i++)
                                out[o++] = (size_t)i < nd ? digits[i] : '0';
                        out[o++] = '.';
                        if ((size_t)exp + 1 >= nd)
                                out[o++] = '0';
                        for (size_t i = (size_t)exp + 1; i < nd; i++)
                                out[o++] = digits[i];
                } else {
                        out[o++] = '0';
                        out[o++] = '.';
                        for (int i = 0; i < -exp - 1; i++)
                                out[o++] = '0';
                        for (size_t i = 0; i < nd; i++)
                                out[o++] = digits[i];
                }
                out[o] = '\0';
        } else {
                out[o++] = digits[0];
                out[o++] = '.';
                if (nd == 1)
                        out[o++] = '0';
                for (size_t i = 1; i < nd; i++)
                        out[o++] = digits[i];
                snprintf(out + o, sizeof(out) - o, "E%d", exp);
        }
        return puts_(b, out);
}

static int emit_number(relay_fmtbuf_t *b, const json_t *j)
{
        char n[32];
        if (json_is_real(j))
                return java_double(b, json_real_value(j));
        snprintf(n, sizeof(n), "%lld", (long long)json_integer_value(j));
        return puts_(b, n);
}

/*
 * The value as a converter writes it. JsonConverter (text false): JSON,
 * every schema field, null when absent. StringConverter (text true):
 * Struct.toString() and List.toString(), Struct{a=1,b=[x, y]}, strings
 * unquoted and null fields left out.
 */
static int emit_value(relay_fmtbuf_t *b, const xs_t *s, const json_t *j, bool text)
{
        int rc = 0;
        if (!j || json_is_null(j))
                return puts_(b, "null");
        switch (json_typeof(j)) {
        case JSON_STRING:
                return text ? put(b, json_string_value(j), json_string_length(j))
                            : jstr(b, json_string_value(j), json_string_length(j));
        case JSON_TRUE:
                return puts_(b, "true");
        case JSON_FALSE:
                return puts_(b, "false");
        case JSON_INTEGER:
        case JSON_REAL:
                return emit_number(b, j);
        case JSON_ARRAY: {
                size_t i;
                json_t *e;
                rc = puts_(b, "[");
                json_array_foreach(j, i, e) {
                        if (!rc && i)
                                rc = puts_(b, text ? ", " : ",");
                        if (!rc)
                                rc = emit_value(b, s ? s->items : NULL, e, text);
                }
                return rc ? rc : puts_(b, "]");
        }
        default: {
                bool first = true;
                rc = puts_(b, text ? "Struct{" : "{");
                for (size_t i = 0; s && !rc && i < s->nf; i++) {
                        const json_t *v = json_object_get(j, s->fname[i]);
                        if (text && (!v || json_is_null(v)))
                                continue;
                        if (!first)
                                rc = puts_(b, ",");
                        first = false;
                        if (!rc)
                                rc = text ? puts_(b, s->fname[i])
                                          : jstr(b, s->fname[i], strlen(s->fname[i]));
                        if (!rc)
                                rc = puts_(b, text ? "=" : ":");
                        if (!rc)
                                rc = emit_value(b, s->fs[i], v, text);
                }
                return rc ? rc : puts_(b, "}");
        }
        }
}

/* JsonConverter's schema for an inferred (optional) schema. */
static int emit_schema(relay_fmtbuf_t *b, const xs_t *s, const char *field)
{
        static const char *const names[] = {"string", "boolean", "int32", "int64", "double",
                                            "array", "struct"};
        int rc = puts_(b, "{\"type\":\"");
        if (!rc)
                rc = puts_(b, names[s->type]);
        if (!rc)
                rc = puts_(b, "\"");
        if (!rc && s->type == XS_ARRAY) {
                rc = puts_(b, ",\"items\":");
                if (!rc)
                        rc = emit_schema(b, s->items, NULL);
        }
        if (!rc && s->type == XS_STRUCT) {
                rc = puts_(b, ",\"fields\":[");
                for (size_t i = 0; !rc && i < s->nf; i++) {
                        if (i)
                                rc = puts_(b, ",");
                        if (!rc)
                                rc = emit_schema(b, s->fs[i], s->fname[i]);
                }
                if (!rc)
                        rc = puts_(b, "]");
        }
        if (!rc)
                rc = puts_(b, s->required ? ",\"optional\":false" : ",\"optional\":true");
        if (!rc && s->name) {
                rc = puts_(b, ",\"name\":");
                if (!rc)
                        rc = jstr(b, s->name, strlen(s->name));
        }
        if (!rc && field) {
                rc = puts_(b, ",\"field\":");
                if (!rc)
                        rc = jstr(b, field, strlen(field));
        }
        return rc ? rc : puts_(b, "}");
}

/*
 * Jackson's StreamReadConstraints (2.15 on; Debezium 3.6 ships 2.21): a
 * document nested deeper than 1000 objects and arrays fails readTree(),
 * and the router's catch leaves the payload a string. jansson reads up to
 * 2048.
 */
#define JACKSON_MAX_DEPTH 1000

static bool deeper_than(const json_t *j, int left)
{
        size_t i;
        const char *k;
        json_t *e;
        if (!json_is_object(j) && !json_is_array(j))
                return false;
        if (left == 0)
                return true;
        if (json_is_array(j)) {
                json_array_foreach(j, i, e) {
                        if (deeper_than(e, left - 1))
                                return true;
                }
                return false;
        }
        json_object_foreach((json_t *)(uintptr_t)j, k, e) {
                if (deeper_than(e, left - 1))
                        return true;
        }
        return false;
}

int relay_expand_payload(relay_fmtbuf_t *b, relay_format_enc_t enc, const char *key,
                         const char *data, size_t len)
{
        /* The router parses only what starts with '{' or '['; a top-level
         * array's struct conversion throws, so only objects expand. */
        if (len == 0 || data[0] != '{')
                return 0;
        json_t *doc = json_loadb(data, len, JSON_ALLOW_NUL, NULL);
        if (!doc)
                return 0;
        xs_t *s = NULL;
        int rc = json_is_object(doc) && !deeper_than(doc, JACKSON_MAX_DEPTH) ? infer(key, doc, &s)
                                                                             : XS_FAIL;
        if (rc == 0 && !fits(s, doc))
                rc = XS_FAIL;
        if (rc == 0) {
                b->len = 0;
                switch (enc) {
                case RELAY_ENC_RAW:
                case RELAY_ENC_SIMPLE:
                        rc = emit_value(b, s, doc, true);
                        break;
                case RELAY_ENC_JSON:
                        rc = emit_value(b, s, doc, false);
                        break;
                case RELAY_ENC_ENVELOPE:
                        rc = puts_(b, "{\"schema\":");
                        if (!rc)
                                rc = emit_schema(b, s, NULL);
                        if (!rc)
                                rc = puts_(b, ",\"payload\":");
                        if (!rc)
                                rc = emit_value(b, s, doc, false);
                        if (!rc)
                                rc = puts_(b, "}");
                        break;
                }
                if (rc == 0)
                        rc = 1;
        } else if (rc == XS_FAIL) {
                rc = 0;
        }
        xs_free(s);
        json_decref(doc);
        return rc;
}
