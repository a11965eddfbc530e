/*
 * dbzconf.c - --debezium-config: a Debezium Server application.properties
 * or a Kafka Connect connector JSON mapped onto the relay's keys.
 *
 * Both are first flattened into one list of Connect-style pairs:
 * "debezium.source.K" and a Connect config's own keys become connector
 * keys K, "debezium.transforms.*" become "transforms.*",
 * "debezium.sink.kafka.producer.P" becomes "producer.P", "debezium.format.*"
 * stays "format.*". Then one table decides each key: mapped, ignored (with
 * a note: what the relay does instead) or refused. Owns nothing after
 * returning; the file is read whole (a configuration is small).
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/dbzconf.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "relay/props.h"

/* A Debezium name and what it is called on the other side. */
typedef struct {
        const char *from, *to;
} rename_t;

/* Debezium Server's prefixes onto Connect's key names; NULL: not a Debezium key. */
static const char *server_key(const char *k, char *buf, size_t buflen)
{
        static const rename_t map[] = {
                {"debezium.source.", ""},
                {"debezium.transforms", "transforms"},
                {"debezium.predicates", "predicates"},
                {"debezium.sink.kafka.producer.", "producer."},
                {"debezium.sink.", "sink."},
                {"debezium.format.", "format."},
        };
        for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
                size_t n = strlen(map[i].from);
                if (strncmp(k, map[i].from, n) == 0) {
                        snprintf(buf, buflen, "%s%s", map[i].to, k + n);
                        return buf;
                }
        }
        return NULL;
}

/*
 * Debezium Server reads its values through SmallRye Config (MicroProfile
 * Config), which expands ${name} expressions in a value holding a '$':
 * "\$" (MicroProfile's escape, turned into SmallRye's "$$"; "\\$" in the file,
 * as Properties reads a backslash) and "$$" are a literal '$' (ExpressionConfigSourceInterceptor.escapeDollarIfExists();
 * Debezium's DebeziumServerConfigSourceFactoryTest reads
 * "outbox.event.\${routedByValue}" and "outbox.event.$${routedByValue}" as
 * "outbox.event.${routedByValue}"). In place; ${...} is left as it is.
 */
static void smallrye_dollars(char *s)
{
        char *w = s;
        for (const char *r = s; *r; r++) {
                if ((r[0] == '\\' || r[0] == '$') && r[1] == '$')
                        r++;
                *w++ = *r;
        }
        *w = '\0';
}

/*
 * java.util.Properties.load(), through which Debezium Server reads its file
 * (props.h), so that a regex written "outbox\\.(.*)" in the file is Java's
 * "outbox\.(.*)". Trailing blanks of a value, which Java keeps, are dropped
 * here as in the relay's own file.
 */
static int parse_properties(const char *text, relay_pairs_t *out, relay_pairs_t *other,
                            const char *path, char *err, size_t errlen)
{
        size_t n = strlen(text), pos = 0;
        char *line = malloc(n + 1), *key = malloc(n + 1), *value = malloc(n + 1);
        relay_props_line_t l;
        int rc = 0;

        if (!line || !key || !value)
                rc = relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
        while (rc == 0 && relay_props_next(text, n, &pos, line, &l)) {
                size_t ve = l.len;
                while (ve > l.vstart && (line[ve - 1] == ' ' || line[ve - 1] == '\t'))
                        ve--;
                char buf[512];
                if (l.klen >= sizeof(buf)) {
                        rc = relay_err(err, errlen, RELAY_EINVAL, "%s: key \"%.80s...\" is too long",
                                       path, line);
                        break;
                }
                if (relay_props_unescape(line, l.klen, key) < 0 ||
                    relay_props_unescape(line + l.vstart, ve - l.vstart, value) < 0) {
                        rc = relay_err(err, errlen, RELAY_EINVAL,
                                       "%s: the line of key \"%.*s\" has a malformed \\uXXXX "
                                       "escape (Java refuses it too); write four hex digits, and "
                                       "a surrogate pair for a character beyond U+FFFF",
                                       path, (int)(l.klen < 200 ? l.klen : 200), line);
                        break;
                }
                smallrye_dollars(value);
                const char *k = server_key(key, buf, sizeof(buf));
                const char *dot = key[0] == '%' ? strchr(key, '.') : NULL;
                if (dot && server_key(dot + 1, buf, sizeof(buf))) {
                        /* Quarkus reads %prod.K in the prod profile (a packaged
                         * server's default) instead of K: which one Debezium
                         * used depends on a profile this file does not show. */
                        rc = relay_err(err, errlen, RELAY_EINVAL,
                                       "%s: key \"%.200s\" is Quarkus profile-specific: Debezium "
                                       "Server reads it instead of \"%.200s\" when profile "
                                       "\"%.*s\" is active (a packaged server runs prod unless "
                                       "QUARKUS_PROFILE names another), which the relay cannot "
                                       "tell; write the value "
                                       "the running server uses without the \"%.*s.\" prefix",
                                       path, key, dot + 1, (int)(dot - key - 1), key + 1,
                                       (int)(dot - key), key);
                        break;
                }
                if (relay_pairs_add(k ? out : other, k ? k : key, strlen(k ? k : key), value,
                                    strlen(value)))
                        rc = relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
        }
        RELAY_FREE_ALL(line, key, value);
        return rc;
}

static int parse_connect_json(const char *text, relay_pairs_t *out, char *err, size_t errlen,
                              const char *path)
{
        json_error_t je;
        json_t *root = json_loads(text, 0, &je);
        if (!root || !json_is_object(root)) {
                relay_err_set(err, errlen, "%s: not a Kafka Connect connector JSON: %s (line %d)",
                              path, root ? "not an object" : je.text, je.line);
                json_decref(root);
                return RELAY_EINVAL;
        }
        json_t *cfg = json_object_get(root, "config");
        if (!json_is_object(cfg))
                cfg = root;
        const char *k;
        json_t *v;
        int rc = 0;
        json_object_foreach(cfg, k, v)
        {
                char num[64];
                const char *s = json_is_string(v)   ? json_string_value(v)
                                : json_is_true(v)    ? "true"
                                : json_is_false(v)   ? "false"
                                : json_is_integer(v) ? (snprintf(num, sizeof(num), "%lld",
                                                                 (long long)json_integer_value(v)),
                                                        num)
                                                     : NULL;
                if (!s) {
                        if (cfg == root && strcmp(k, "name") == 0)
                                continue;
                        /* Connect reads a real as its text ("5432.0"), which an
                         * integer option refuses: not the "number" it is. */
                        relay_err_set(err, errlen,
                                      "%s: key \"%s\" is %s; give it as a string, an integer or "
                                      "a boolean",
                                      path, k,
                                      json_is_real(v)    ? "a number with a fraction or exponent"
                                      : json_is_null(v)  ? "null"
                                      : json_is_array(v) ? "an array"
                                                         : "an object");
                        rc = RELAY_EINVAL;
                        break;
                }
                if ((rc = relay_pairs_add(out, k, strlen(k), s, strlen(s))) != 0)
                        break;
        }
        json_decref(root);
        return rc;
}

/*
 * v is the word want as Kafka Connect (ConfigDef.parseType) and Debezium
 * (Configuration.getBoolean, the enums' parse()) read booleans and enum
 * words: blanks around ignored, any case, so "False" is false to them.
 */
static bool is_word(const char *v, const char *want)
{
        size_t n = strlen(want);
        while (isspace((unsigned char)*v))
                v++;
        if (strncasecmp(v, want, n) != 0)
                return false;
        for (v += n; isspace((unsigned char)*v); v++)
                ;
        return *v == '\0';
}

static void note(char *notes, size_t noteslen, const char *key)
{
        if (!notes || !noteslen)
                return;
        size_t n = strlen(notes);
        snprintf(notes + n, noteslen - n, "%s%s", n ? ", " : "", key);
}

/* The Outbox Event Router options that are the relay's keys under the same or another name. */
static const rename_t router_keys[] = {
        {"table.field.event.id", "outbox.column.id"},
        {"table.field.event.key", "outbox.column.aggregate_id"},
        {"table.field.event.payload", "outbox.column.payload"},
        {"table.field.event.type", "outbox.column.type"},
        {"table.field.event.timestamp", "table.field.event.timestamp"},
        {"table.field.event.schema.version", "table.field.event.schema.version"},
        {"table.fields.additional.placement", "table.fields.additional.placement"},
        {"table.field.additional.missing", "table.field.additional.missing"},
        {"table.op.invalid.behavior", "table.op.invalid.behavior"},
        {"table.expand.json.payload", "table.expand.json.payload"},
        {"route.by.field", "route.by.field"},
        {"route.topic.regex", "route.topic.regex"},
        {"route.topic.replacement", "route.topic.replacement"},
        {"route.tombstone.on.empty.payload", "route.tombstone.on.empty.payload"},
};

/* The connector's database.* keys and the libpq keywords they become. */
static const rename_t conn[] = {
        {"database.hostname", "host"},       {"database.port", "port"},
        {"database.user", "user"},           {"database.password", "password"},
        {"database.dbname", "dbname"},       {"database.sslmode", "sslmode"},
        {"database.sslcert", "sslcert"},     {"database.sslkey", "sslkey"},
        {"database.sslpassword", "sslpassword"}, {"database.sslrootcert", "sslrootcert"},
};

static bool conn_key(const char *k)
{
        for (size_t i = 0; i < sizeof(conn) / sizeof(conn[0]); i++)
                if (strcmp(k, conn[i].from) == 0)
                        return true;
        return false;
}

/* Connector keys the relay maps, with Debezium's defaults. */
static const rename_t connector_defaults[] = {
        {"slot.name", "debezium"},
        {"publication.name", "dbz_publication"},
};

/* Connector keys with no effect on what the relay sends. */
static const char *const ignored_prefixes[] = {
        "name",          "tasks.max",     "snapshot.",         "offset.",     "schema.history",
        "tombstones.on.delete", "heartbeat.",    "poll.interval.ms",  "max.batch.size",
        "max.queue.size", "publication.autocreate.mode",
        "status.update.interval.ms", "sink.type", "producer.key.serializer",
        "producer.value.serializer", "producer.override.key.serializer",
        "producer.override.value.serializer", "errors.", "key.converter.schemas.enable",
        "value.converter.schemas.enable", "header.converter", "skipped.operations",
        "decimal.handling.mode", "time.precision.mode", "binary.handling.mode",
        "database.server.name", "extended.headers.enabled", "database.tcpKeepAlive",
        "format.key", "format.value", "format.header", "value.converter.delegate.",
        "key.converter.", "value.converter.",
};

static bool ignored(const char *k)
{
        for (size_t i = 0; i < sizeof(ignored_prefixes) / sizeof(ignored_prefixes[0]); i++)
                if (strncmp(k, ignored_prefixes[i], strlen(ignored_prefixes[i])) == 0)
                        return true;
        return false;
}

static int set(relay_config_t *c, const char *key, const char *value, const char *path,
               const char *dbz, char *err, size_t errlen)
{
        char origin[600];
        snprintf(origin, sizeof(origin), "%s (Debezium key %s)", path, dbz);
        return relay_config_set(c, key, value, origin, err, errlen);
}

static int refuse(char *err, size_t errlen, const char *path, const char *k, const char *v,
                  const char *why)
{
        char vb[RELAY_ABBREV_BUF];
        relay_err_set(err, errlen, "%s: Debezium key \"%s\" = \"%s\" cannot be honoured: %s", path, k,
                      relay_abbrev(v, vb, sizeof(vb)), why);
        return RELAY_EINVAL;
}

/*
 * Connector keys the relay takes at Debezium's default only, because the
 * relay starts where the slot says Debezium stopped.
 */
typedef struct {
        const char *key, *keep, *why;
} cutover_key_t;

static const cutover_key_t *cutover_key(const char *k)
{
        static const cutover_key_t keys[] = {
                /* Only with true is the slot's position where Debezium stopped. */
                {"flush.lsn.source", "true",
                 "Debezium did not confirm its position to the slot, so the slot's "
                 "confirmed_flush_lsn is not where it stopped and the relay, which starts "
                 "there, would resend or skip events; let Debezium run with true until the "
                 "slot holds its position, then remove the key (README, Cutover from "
                 "Debezium)"},
                /* With true there is no slot left to take over: a new one
                 * would start past what waited in Debezium's. */
                {"slot.drop.on.stop", "false",
                 "stopping Debezium drops its slot, so the relay would create a new one that "
                 "starts then and never send the events written meanwhile; set it to false "
                 "and restart Debezium before the cutover (README, Cutover from Debezium)"},
        };
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
                if (strcmp(k, keys[i].key) == 0)
                        return &keys[i];
        return NULL;
}

/* Outbox Event Router options the relay takes at Debezium's default only. */
static const struct {
        const char *opt, *only, *why;
} router_fixed[] = {
        {"tracing.with.context.field.only", "true",
         "the relay starts no traces of its own: only rows with a span context are traced "
         "(true)"},
        {"table.json.payload.null.behavior", "ignore",
         "the relay expands JSON payloads with Debezium's default, ignore (null members leave "
         "no field)"},
};

/* Why router option opt = v is refused (router_fixed), or NULL. */
static const char *router_refusal(const char *opt, const char *v)
{
        for (size_t i = 0; i < sizeof(router_fixed) / sizeof(router_fixed[0]); i++)
                if (strcmp(opt, router_fixed[i].opt) == 0 && !is_word(v, router_fixed[i].only))
                        return router_fixed[i].why;
        return NULL;
}

/* Each of the n keys that is set must be want, else it is refused with why. */
static int require_all(const relay_pairs_t *p, const char *const *keys, size_t n,
                       const char *want, bool boolean, const char *why, const char *path,
                       char *err, size_t errlen)
{
        for (size_t i = 0; i < n; i++) {
                const char *f = relay_pairs_get(p, keys[i]);
                if (f && !(boolean ? is_word(f, want) : strcmp(f, want) == 0))
                        return refuse(err, errlen, path, keys[i], f, why);
        }
        return 0;
}

/* The converters (Connect) or formats (Debezium Server) as a format.profile. */
static int profile(relay_config_t *c, const relay_pairs_t *p, bool server, const char *path, char *err,
                   size_t errlen)
{
        if (server) {
                static const char *const parts[] = {"format.key", "format.value", "format.header"};
                static const char *const schemas[] = {"format.schemas.enable",
                                                      "format.key.schemas.enable",
                                                      "format.value.schemas.enable",
                                                      "format.header.schemas.enable"};
                /* DebeziumServer.getFormat() compares the format word exactly. */
                int rc = require_all(p, parts, 3, "json", false,
                                     "only Debezium Server's default json format has a profile "
                                     "(debezium-server)",
                                     path, err, errlen);
                if (rc == 0)
                        rc = require_all(p, schemas, 4, "true", true,
                                         "the debezium-server profile writes JsonConverter's "
                                         "default, schemas.enable=true",
                                         path, err, errlen);
                if (rc)
                        return rc;
                return set(c, "format.profile", "debezium-server", path, "debezium.format.*", err,
                           errlen);
        }
        const char *kc = relay_pairs_get(p, "key.converter");
        const char *vc = relay_pairs_get(p, "value.converter");
        /* A converter the connector leaves out is the worker's, which this
         * file does not show: no profile then (the caller refuses to start
         * without one, unless a layer above sets it). Taking the other's
         * for it would be a guess about the key's bytes, which decide the
         * partition. */
        if (!kc || !vc)
                return 0;
        const char *chosen = NULL, *conv[2] = {kc, vc};
        const char *sch[2] = {relay_pairs_get(p, "key.converter.schemas.enable"),
                              relay_pairs_get(p, "value.converter.schemas.enable")};
        for (int i = 0; i < 2; i++) {
                const char *cv = conv[i];
                const char *prof;
                if (!cv)
                        continue;
                /* BinaryDataConverter: the router's documented converter for a bytea
                 * payload, the bytes as they are (like ByteArrayConverter). */
                if (strstr(cv, "StringConverter") || strstr(cv, "ByteArrayConverter") ||
                    (i == 1 && strstr(cv, "BinaryDataConverter")))
                        prof = "connect-string";
                else if (strstr(cv, "JsonConverter"))
                        prof = sch[i] && is_word(sch[i], "false") ? "connect-json"
                                                                       : "connect-json-schema";
                else
                        return refuse(err, errlen, path, i ? "value.converter" : "key.converter",
                                      cv,
                                      "the profiles cover StringConverter, ByteArrayConverter and "
                                      "JsonConverter");
                if (chosen && strcmp(chosen, prof) != 0) {
                        /* The value's is named as set, the key's beside it:
                         * both are the user's to change. */
                        char why[RELAY_ERRBUF];
                        snprintf(why, sizeof(why),
                                 "it gives format.profile %s, but key.converter \"%s\" gives %s; "
                                 "a profile has one encoding for both",
                                 prof, kc, chosen);
                        return refuse(err, errlen, path, "value.converter", cv, why);
                }
                chosen = prof;
        }
        return set(c, "format.profile", chosen, path, "key.converter/value.converter", err, errlen);
}

int relay_dbzconf_load(relay_config_t *c, const char *path, char *notes, size_t noteslen,
                       char *err, size_t errlen)
{
        relay_pairs_t p = {0}, other = {0};
        char *text = NULL;
        int rc = 0;
        bool server;

        if (notes && noteslen)
                notes[0] = '\0';
        FILE *f = fopen(path, "r");
        if (!f) {
                relay_err_set(err, errlen, "could not open Debezium configuration \"%s\": %s", path,
                              strerror(errno));
                return RELAY_EINVAL;
        }
        size_t cap = 65536, n = 0, r;
        text = malloc(cap);
        while (text && (r = fread(text + n, 1, cap - n - 1, f)) > 0) {
                n += r;
                if (n + 1 >= cap) {
                        char *g = realloc(text, cap * 2);
                        if (!g) {
                                free(text);
                                text = NULL;
                                break;
                        }
                        text = g;
                        cap *= 2;
                }
        }
        /* A directory opens, then fails to read (EISDIR): not an empty file. */
        int read_errno = ferror(f) ? errno : 0;
        fclose(f);
        if (!text)
                return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
        if (read_errno) {
                free(text);
                relay_err_set(err, errlen, "could not read Debezium configuration \"%s\": %s",
                              path, strerror(read_errno));
                return RELAY_EINVAL;
        }
        text[n] = '\0';
        /* What follows a NUL would go unread (a value, then every key after
         * it); Java reads it as a character. Not a text file, or UTF-16. */
        const char *nul = memchr(text, '\0', n);
        if (nul) {
                unsigned line = 1;
                for (const char *q = text; q < nul; q++)
                        line += *q == '\n';
                free(text);
                relay_err_set(err, errlen,
                              "Debezium configuration \"%s\" holds a NUL byte (line %u): is it "
                              "a text file? save it as UTF-8 (a UTF-16 file has one in every "
                              "ASCII character)",
                              path, line);
                return RELAY_EINVAL;
        }
        const char *t = text;
        while (isspace((unsigned char)*t))
                t++;
        server = *t != '{';
        rc = server ? parse_properties(text, &p, &other, path, err, errlen)
                    : parse_connect_json(text, &p, err, errlen, path);
        free(text);
        if (rc == RELAY_ENOMEM)
                relay_err_set(err, errlen, "out of memory");
        if (rc)
                goto done;
        if (server && p.n == 0) {
                /* Every key would be ignored: not what its author meant. */
                rc = relay_err(err, errlen, RELAY_EINVAL,
                               "%s holds no Debezium Server key (debezium.source.*, "
                               "debezium.transforms.*, debezium.sink.*, debezium.format.*): give a "
                               "Debezium Server application.properties, or a Kafka Connect "
                               "connector as its JSON ({\"name\": ..., \"config\": {...}})",
                               path);
                goto done;
        }
        for (size_t i = 0; i < other.n; i++)
                note(notes, noteslen, other.k[i]);

        /* The connector. */
        const char *cls = relay_pairs_get(&p, "connector.class");
        if (cls && !strstr(cls, "PostgresConnector")) {
                rc = refuse(err, errlen, path, "connector.class", cls,
                            "the relay reads PostgreSQL (io.debezium.connector.postgresql."
                            "PostgresConnector)");
                goto done;
        }
        const char *plugin = relay_pairs_get(&p, "plugin.name");
        if (plugin && strcmp(plugin, "pgoutput") != 0) {
                rc = refuse(err, errlen, path, "plugin.name", plugin,
                            "the relay decodes pgoutput only");
                goto done;
        }
        /* Values quoted for a conninfo, whatever their length (a key file's
         * path, a long password). */
        relay_strbuf_t ci = {0};
        for (size_t i = 0; i < sizeof(conn) / sizeof(conn[0]); i++) {
                const char *v = relay_pairs_get(&p, conn[i].from);
                if (!v || !*v)
                        continue;
                if (ci.len)
                        relay_strbuf_addc(&ci, ' ');
                relay_strbuf_adds(&ci, conn[i].to);
                relay_strbuf_adds(&ci, "='");
                for (const char *q = v; *q; q++) {
                        if (*q == '\'' || *q == '\\')
                                relay_strbuf_addc(&ci, '\\');
                        relay_strbuf_addc(&ci, *q);
                }
                relay_strbuf_addc(&ci, '\'');
        }
        char *conninfo = relay_strbuf_finish(&ci);
        if (!conninfo) {
                rc = relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
                goto done;
        }
        if (conninfo[0])
                rc = set(c, "postgres.conninfo", conninfo, path, "database.*", err, errlen);
        free(conninfo);
        if (rc != 0)
                goto done;

        /* The Outbox Event Router: the transform whose type is EventRouter. */
        char rprefix[256] = "";
        const char *tlist = relay_pairs_get(&p, "transforms");
        if (tlist) {
                char names[1024];
                snprintf(names, sizeof(names), "%s", tlist);
                for (char *tok = strtok(names, ", "); tok; tok = strtok(NULL, ", ")) {
                        char tk[300];
                        snprintf(tk, sizeof(tk), "transforms.%s.type", tok);
                        const char *type = relay_pairs_get(&p, tk);
                        if (type && strstr(type, "outbox.EventRouter")) {
                                if (rprefix[0]) {
                                        rc = refuse(err, errlen, path, "transforms", tlist,
                                                    "more than one Outbox Event Router; the relay "
                                                    "maps one outbox table");
                                        goto done;
                                }
                                snprintf(rprefix, sizeof(rprefix), "transforms.%s.", tok);
                        } else {
                                rc = refuse(err, errlen, path, tk, type ? type : "",
                                            "the relay applies only the Outbox Event Router");
                                goto done;
                        }
                }
        }

        bool tracing_field = false, tracing_other = false;
        const cutover_key_t *cut;
        for (size_t i = 0; i < p.n && rc == 0; i++) {
                const char *k = p.k[i], *v = p.v[i];
                if (strcmp(k, "slot.name") == 0 || strcmp(k, "publication.name") == 0) {
                        rc = set(c, k, v, path, k, err, errlen);
                } else if (strcmp(k, "table.include.list") == 0) {
                        if (strpbrk(v, "*+?()[]|^$\\")) {
                                rc = refuse(err, errlen, path, k, v,
                                            "the relay reads outbox tables by name, not by "
                                            "regular expression: name each (schema.table), "
                                            "comma-separated");
                        } else {
                                rc = set(c, "outbox.table", v, path, k, err, errlen);
                        }
                } else if ((cut = cutover_key(k)) != NULL) {
                        if (is_word(v, cut->keep))
                                note(notes, noteslen, k);
                        else
                                rc = refuse(err, errlen, path, k, v, cut->why);
                } else if (strcmp(k, "topic.prefix") == 0) {
                        const char *x = relay_pairs_get(&p, "extended.headers.enabled");
                        if (!x || !is_word(x, "false"))
                                rc = set(c, "format.debezium.topic_prefix", v, path, k, err,
                                         errlen);
                } else if (strncmp(k, "producer.", 9) == 0 && !ignored(k)) {
                        char kk[300];
                        const char *prop = k + 9;
                        /* A Connect connector sets its own producer's P as
                         * producer.override.P (KIP-458); producer.P is the
                         * worker's prefix. */
                        if (!server && strncmp(prop, "override.", 9) == 0)
                                prop += 9;
                        snprintf(kk, sizeof(kk), "kafka.%s", prop);
                        rc = set(c, kk, v, path, k, err, errlen);
                } else if (strcmp(k, "bootstrap.servers") == 0) {
                        rc = set(c, "kafka.bootstrap.servers", v, path, k, err, errlen);
                } else if (rprefix[0] && strncmp(k, rprefix, strlen(rprefix)) == 0) {
                        const char *opt = k + strlen(rprefix);
                        bool done_key = strcmp(opt, "type") == 0;
                        for (size_t j = 0; !done_key && j < sizeof(router_keys) / sizeof(router_keys[0]); j++)
                                if (strcmp(opt, router_keys[j].from) == 0) {
                                        rc = set(c, router_keys[j].to, v, path, k, err, errlen);
                                        done_key = true;
                                }
                        if (done_key)
                                continue;
                        if (strcmp(opt, "tracing.span.context.field") == 0) {
                                rc = set(c, "tracing.span.context.field", v, path, k, err, errlen);
                                tracing_field = true;
                                continue;
                        }
                        const char *why = router_refusal(opt, v);
                        if (why) {
                                rc = refuse(err, errlen, path, k, v, why);
                                continue;
                        }
                        if (strncmp(opt, "tracing.", 8) == 0) {
                                /* Debezium traces with OpenTelemetry on its class path; a
                                 * tracing key says it does: its default column. */
                                tracing_other = true;
                                if (strcmp(opt, "tracing.operation.name") == 0)
                                        note(notes, noteslen, k); /* names Debezium's own span */
                                continue;
                        }
                        if (strcmp(opt, "table.json.payload.null.behavior") == 0) {
                                note(notes, noteslen, k);
                                continue;
                        }
                        rc = refuse(err, errlen, path, k, v,
                                    "this Outbox Event Router option is not implemented by the "
                                    "relay (see README, Coming from Debezium)");
                } else if (strncmp(k, "transforms", 10) == 0 || strncmp(k, "predicates", 10) == 0) {
                        if (strcmp(k, "transforms") != 0)
                                rc = refuse(err, errlen, path, k, v,
                                            "predicates and other transforms are not supported");
                } else if (strcmp(k, "connector.class") == 0 || strcmp(k, "plugin.name") == 0 ||
                           conn_key(k) || strcmp(k, "key.converter") == 0 ||
                           strcmp(k, "value.converter") == 0 || strncmp(k, "format.", 7) == 0) {
                        /* handled above or in profile() */
                } else if (ignored(k)) {
                        note(notes, noteslen, k);
                } else {
                        rc = refuse(err, errlen, path, k, v,
                                    "the relay does not know this key; remove it (or tell us why "
                                    "it matters)");
                }
        }
        /* A key left out is Debezium's default (PostgresConnectorConfig): the
         * slot Debezium streamed from, whose position the relay takes over.
         * The relay's own defaults would make a new slot and skip what waits
         * in Debezium's. */
        for (size_t i = 0; rc == 0 && i < sizeof(connector_defaults) / sizeof(connector_defaults[0]);
             i++)
                if (!relay_pairs_get(&p, connector_defaults[i].from)) {
                        char origin[600];
                        snprintf(origin, sizeof(origin), "%s (Debezium's default: %s is not set)",
                                 path, connector_defaults[i].from);
                        rc = relay_config_set(c, connector_defaults[i].from,
                                              connector_defaults[i].to, origin, err, errlen);
                }
        if (rc == 0 && tracing_other && !tracing_field)
                rc = set(c, "tracing.span.context.field", "tracingspancontext", path,
                         "tracing.* (the default tracing.span.context.field)", err, errlen);
        if (rc == 0)
                rc = profile(c, &p, server, path, err, errlen);
done:
        relay_pairs_free(&p);
        relay_pairs_free(&other);
        return rc;
}
