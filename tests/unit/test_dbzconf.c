/*
 * test_dbzconf.c - --debezium-config: a Debezium Server application.properties
 * and a Kafka Connect connector JSON modelled on Debezium's own outbox
 * documentation load unchanged and map onto the relay's keys; keys the relay
 * cannot honour are refused by name.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relay/config.h"
#include "relay/dbzconf.h"
#include "relay/settings.h"

#include "tap.h"

static relay_config_t *load(const char *file, char *notes, size_t nl, char *err, size_t el, int *rc)
{
        char path[1024];
        relay_config_t *c = NULL;
        snprintf(path, sizeof(path), "%s/debezium/%s", getenv("RELAY_FIXTURES"), file);
        if (relay_config_new(&c) != 0)
                tap_bail("relay_config_new");
        *rc = relay_dbzconf_load(c, path, notes, nl, err, el);
        return c;
}

static void write_tmp(const char *path, const char *text)
{
        FILE *f = fopen(path, "w");
        if (!f || fputs(text, f) < 0)
                tap_bail("could not write %s", path);
        fclose(f);
}

/* Load text, written to a scratch file; the configuration (caller frees) and *rc. */
static relay_config_t *load_text(const char *text, char *notes, size_t nl, char *err, size_t el,
                                 int *rc)
{
        const char *tmp = "/tmp/relay-test-dbzconf-text.conf";
        relay_config_t *c = NULL;
        write_tmp(tmp, text);
        if (relay_config_new(&c) != 0)
                tap_bail("relay_config_new");
        notes[0] = '\0';
        *rc = relay_dbzconf_load(c, tmp, notes, nl, err, el);
        remove(tmp);
        return c;
}

/* A connector refused at load, its message holding want1 and want2. */
static void refused_naming(const char *json, const char *what, const char *want1,
                           const char *want2)
{
        char notes[2048], err[RELAY_ERRBUF];
        int rc;
        relay_config_t *c = load_text(json, notes, sizeof(notes), err, sizeof(err), &rc);
        is_int(rc, RELAY_EINVAL, "%s: refused", what);
        ok(strstr(err, want1) && strstr(err, want2), "  naming %s and %s (%s)", want1, want2, err);
        relay_config_free(c);
}

int main(void)
{
        char notes[2048], err[RELAY_ERRBUF];
        int rc;
        relay_settings_t *set = NULL;

        relay_config_t *c = load("application.properties", notes, sizeof(notes), err, sizeof(err), &rc);
        is_int(rc, 0, "Debezium Server properties load: %s", rc ? err : "ok");
        is_str(relay_config_get(c, "kafka.bootstrap.servers"), "kafka:9092", "sink's bootstrap servers");
        is_str(relay_config_get(c, "postgres.conninfo"),
               "host='db.example' port='5432' user='postgres' password='o\\'reilly' dbname='shop'",
               "database.* become the conninfo, quoted");
        is_str(relay_config_get(c, "slot.name"), "debezium", "slot.name");
        is_str(relay_config_get(c, "publication.name"), "dbz_publication", "publication.name");
        is_str(relay_config_get(c, "outbox.table"), "public.outbox", "table.include.list");
        is_str(relay_config_get(c, "format.profile"), "debezium-server", "default json formats");
        is_str(relay_config_get(c, "format.debezium.topic_prefix"), "shop", "topic.prefix");
        is_str(relay_config_get(c, "route.topic.replacement"), "events.${routedByValue}", "router key");
        ok(strstr(notes, "debezium.source.snapshot.mode") == NULL && strstr(notes, "snapshot.mode") &&
           strstr(notes, "quarkus.log.console.json") && strstr(notes, "producer.key.serializer"),
           "ignored keys listed: %s", notes);
        ok(relay_config_validate(c, err, sizeof(err)) == 0 &&
           relay_settings_load(&set, c, err, sizeof(err)) == 0, "the result validates: %s", err);
        relay_settings_free(set);
        set = NULL;
        relay_config_free(c);

        c = load("connector.json", notes, sizeof(notes), err, sizeof(err), &rc);
        is_int(rc, 0, "Connect JSON loads: %s", rc ? err : "ok");
        is_str(relay_config_get(c, "outbox.table"), "inventory.outboxevent", "table");
        is_str(relay_config_get(c, "format.profile"), "connect-string", "StringConverter");
        is_str(relay_config_get(c, "table.field.event.timestamp"), "timestamp", "timestamp column");
        is_str(relay_config_get(c, "table.fields.additional.placement"), "type:header:eventType",
               "placement");
        is_str(relay_config_get(c, "table.op.invalid.behavior"), "fatal", "table.op.invalid.behavior");
        is_str(relay_config_get(c, "tracing.span.context.field"), "tracingspancontext",
               "a tracing.* key turns tracing on with Debezium's default column");
        is_str(relay_config_get(c, "table.expand.json.payload"), "false", "table.expand.json.payload");
        is_str(relay_config_get(c, "route.topic.regex"), "(?<routedByValue>[A-Za-z]+)(Aggregate)?",
               "route.topic.regex");
        ok(relay_config_validate(c, err, sizeof(err)) == 0 ||
           strstr(err, "kafka.bootstrap.servers") != NULL,
           "validates but for the bootstrap servers Connect's worker holds: %s", err);
        if (relay_config_set(c, "kafka.bootstrap.servers", "kafka:9092", "test", err, sizeof(err)) != 0)
                tap_bail("%s", err);
        ok(relay_settings_load(&set, c, err, sizeof(err)) == 0, "settings load: %s", err);
        ok(set && set->invalid_op == RELAY_INVALID_OP_FATAL, "table.op.invalid.behavior = fatal");
        ok(set && set->route_regex && strcmp(set->route_regex, "(?<routedByValue>[A-Za-z]+)(Aggregate)?") == 0,
           "the regex reaches the settings");
        relay_settings_free(set);
        set = NULL;
        relay_config_free(c);

        /* Several tables by name: one outbox.table list. */
        {
                const char *tmp = "/tmp/relay-test-dbzconf-two.conf";
                write_tmp(tmp, "debezium.source.table.include.list=public.outbox, app.events\n");
                if (relay_config_new(&c) != 0)
                        tap_bail("relay_config_new");
                rc = relay_dbzconf_load(c, tmp, notes, sizeof(notes), err, sizeof(err));
                is_int(rc, 0, "a table.include.list of two names loads: %s", rc ? err : "ok");
                is_str(relay_config_get(c, "outbox.table"), "public.outbox,app.events",
                       "  as the outbox.table list");
                relay_config_free(c);
                remove(tmp);
        }

        /* java.util.Properties escapes, as Debezium Server reads its file: a
         * regex's "\\." is "\." there, "\u00e9" is an e with an acute accent,
         * "\t" a tab, "\q" a q; a line ending in an escaped backslash does not
         * continue, and a comment line never does. */
        c = load_text("debezium.transforms=outbox\n"
                      "debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter\n"
                      "debezium.transforms.outbox.route.topic.regex=outbox\\\\.(?<routedByValue>.*)\n"
                      "# a comment that ends in a backslash \\\n"
                      "debezium.source.slot.name=after_comment\n"
                      "debezium.source.topic.prefix=shop\\u00e9\\\\\n"
                      "debezium.source.database.password=a\\tb\\\\c\\q\n",
                      notes, sizeof(notes), err, sizeof(err), &rc);
        is_int(rc, 0, "a properties file with escapes loads: %s", rc ? err : "ok");
        is_str(relay_config_get(c, "route.topic.regex"), "outbox\\.(?<routedByValue>.*)",
               "\"\\\\.\" in the file is the regex's \"\\.\"");
        is_str(relay_config_get(c, "slot.name"), "after_comment",
               "a comment line ending in a backslash does not continue");
        is_str(relay_config_get(c, "format.debezium.topic_prefix"), "shop\xc3\xa9\\",
               "\\u00e9 is UTF-8, and an escaped backslash at the end does not continue");
        is_str(relay_config_get(c, "postgres.conninfo"), "password='a\tb\\\\cq'",
               "\\t, \\\\ and \\q are a tab, one backslash and q in the password");
        relay_config_free(c);

        /* Debezium Server's values go through SmallRye Config's expressions:
         * MicroProfile's "\\$" ("\\\\$" in the file) and "$$" are a literal '$'
         * (Debezium's DebeziumServerConfigSourceFactoryTest, dbz#2818), so
         * both escaped forms of ${routedByValue} route to outbox.event.<value>,
         * and "pa$$word" is the password pa$word. */
        {
                static const char *const forms[] = {"outbox.event.\\\\${routedByValue}",
                                                    "outbox.event.$${routedByValue}"};
                for (size_t i = 0; i < 2; i++) {
                        char text[512];
                        snprintf(text, sizeof(text),
                                 "debezium.sink.kafka.producer.bootstrap.servers=kafka:9092\n"
                                 "debezium.transforms=outbox\n"
                                 "debezium.transforms.outbox.type=io.debezium.transforms.outbox."
                                 "EventRouter\n"
                                 "debezium.transforms.outbox.route.topic.replacement=%s\n"
                                 "debezium.source.database.password=pa$$word\n",
                                 forms[i]);
                        c = load_text(text, notes, sizeof(notes), err, sizeof(err), &rc);
                        is_int(rc, 0, "%s loads: %s", forms[i], rc ? err : "ok");
                        is_str(relay_config_get(c, "route.topic.replacement"),
                               "outbox.event.${routedByValue}", "  %s is ${routedByValue} escaped",
                               forms[i]);
                        is_str(relay_config_get(c, "postgres.conninfo"), "password='pa$word'",
                               "  pa$$word is pa$word");
                        int src = relay_settings_load(&set, c, err, sizeof(err));
                        ok(src == 0 && set->route_regex == NULL,
                           "  the topic is the template outbox.event.${aggregatetype}, not a "
                           "literal \"${routedByValue}\" (%s)",
                           src ? err : set->route_regex ? set->route_replacement : "template");
                        relay_settings_free(set);
                        set = NULL;
                        relay_config_free(c);
                }
        }

        /* A Quarkus profile key (%prod.K) replaces K in that profile, which
         * the file does not say is the one Debezium Server ran with. */
        c = load_text("debezium.source.slot.name=dev_slot\n"
                      "%prod.debezium.source.slot.name=prod_slot\n"
                      "%dev.quarkus.log.level=DEBUG\n",
                      notes, sizeof(notes), err, sizeof(err), &rc);
        is_int(rc, RELAY_EINVAL, "a %%prod.debezium.* key is refused");
        ok(strstr(err, "\"%prod.debezium.source.slot.name\" is Quarkus profile-specific") &&
           strstr(err, "without the \"%prod.\" prefix"),
           "  naming the key and the fix: %s", err);
        relay_config_free(c);

        /* A logical line has no length limit in Java: a 9000-byte value,
         * continued over two lines, arrives whole. */
        {
                static char text[9300], want[9100];
                memset(want, 'p', 9000);
                want[9000] = '\0';
                snprintf(text, sizeof(text), "debezium.source.database.password=%.4500s\\\n    %s\n",
                         want, want + 4500);
                c = load_text(text, notes, sizeof(notes), err, sizeof(err), &rc);
                const char *ci = rc == 0 ? relay_config_get(c, "postgres.conninfo") : NULL;
                ok(ci && strlen(ci) == 9000 + strlen("password=''") && strstr(ci, want) != NULL,
                   "a 9000-byte password over two lines arrives whole (%zu bytes of conninfo%s%s)",
                   ci ? strlen(ci) : 0, rc ? ": " : "", rc ? err : "");
                relay_config_free(c);
        }

        /* The connector's other database.* keys: the TLS files reach the
         * conninfo, database.server.name (Debezium 1.x) is listed without
         * effect, and a key the relay cannot honour is refused by name. */
        c = load_text("debezium.source.database.hostname=db\n"
                      "debezium.source.database.sslmode=verify-full\n"
                      "debezium.source.database.sslrootcert=/etc/ssl/db-ca.pem\n"
                      "debezium.source.database.sslcert=/etc/ssl/client.pem\n"
                      "debezium.source.database.sslkey=/etc/ssl/client.key\n"
                      "debezium.source.database.sslpassword=keypass\n"
                      "debezium.source.database.server.name=shop\n",
                      notes, sizeof(notes), err, sizeof(err), &rc);
        is_int(rc, 0, "database.ssl* load: %s", rc ? err : "ok");
        is_str(relay_config_get(c, "postgres.conninfo"),
               "host='db' sslmode='verify-full' sslcert='/etc/ssl/client.pem' "
               "sslkey='/etc/ssl/client.key' sslpassword='keypass' sslrootcert='/etc/ssl/db-ca.pem'",
               "  the certificate files and key password reach the conninfo");
        ok(strstr(notes, "database.server.name") != NULL,
           "  database.server.name is listed without effect: %s", notes);
        relay_config_free(c);
        c = load_text("debezium.source.database.initial.statements=SET search_path TO app\n", notes,
                      sizeof(notes), err, sizeof(err), &rc);
        ok(rc == RELAY_EINVAL && strstr(err, "database.initial.statements"),
           "database.initial.statements is refused by name: %s", rc ? err : "loaded");
        relay_config_free(c);

        const char *bad[][2] = {
                {"{\"config\": {\"transforms\": \"outbox\", \"transforms.outbox.type\": "
                 "\"io.debezium.transforms.outbox.EventRouter\", "
                 "\"transforms.outbox.table.json.payload.null.behavior\": \"optional_bytes\"}}",
                 "table.json.payload.null.behavior"},
                {"{\"config\": {\"transforms\": \"outbox\", \"transforms.outbox.type\": "
                 "\"io.debezium.transforms.outbox.EventRouter\", "
                 "\"transforms.outbox.tracing.with.context.field.only\": \"false\"}}",
                 "tracing.with.context.field.only"},
                {"{\"plugin.name\": \"decoderbufs\"}", "pgoutput"},
                {"debezium.source.table.include.list=public.outbox.*\n", "comma-separated"},
                {"debezium.format.value=avro\n", "json"},
                {"debezium.format.value=JSON\n", "json"}, /* Debezium Server refuses it too */
                {"debezium.source.some.unknown.key=1\n", "some.unknown.key"},
                {"{\"flush.lsn.source\": \"false\"}", "confirmed_flush_lsn"},
                {"{\"slot.drop.on.stop\": \"true\"}", "stopping Debezium drops its slot"},
                {"debezium.source.slot.drop.on.stop=True\n", "set it to false"},
                {"debezium.source.slot.name=s\\u12\n", "malformed \\uXXXX"},
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                const char *tmp = "/tmp/relay-test-dbzconf.conf";
                write_tmp(tmp, bad[i][0]);
                if (relay_config_new(&c) != 0)
                        tap_bail("relay_config_new");
                rc = relay_dbzconf_load(c, tmp, notes, sizeof(notes), err, sizeof(err));
                ok(rc == RELAY_EINVAL && strstr(err, bad[i][1]), "refused, naming %s: %s", bad[i][1], err);
                relay_config_free(c);
                remove(tmp);
        }
        /* A long value is quoted only in part: quoted whole, it filled the
         * error buffer before the message said why it was refused. */
        {
                char *text = malloc(64 + 200 * 16);
                if (text == NULL)
                        tap_bail("out of memory");
                strcpy(text, "debezium.source.table.include.list=");
                for (int i = 0; i < 200; i++)
                        strcat(text, "public.outbox.*,");
                strcat(text, "\n");
                c = load_text(text, notes, sizeof(notes), err, sizeof(err), &rc);
                ok(rc == RELAY_EINVAL && strstr(err, "...\" cannot be honoured") &&
                           strstr(err, "comma-separated"),
                   "a 3 200-byte value refused, quoted in part, saying why: %.120s", err);
                relay_config_free(c);
                free(text);
        }
        /* Debezium's defaults for the keys a configuration leaves out: the
         * connector streams from slot "debezium" and publication
         * "dbz_publication", so the relay, which takes over that slot, must
         * too (the relay's own defaults would create a new slot and miss
         * what waits in Debezium's). */
        c = load("connector.json", notes, sizeof(notes), err, sizeof(err), &rc);
        is_str(relay_config_get(c, "slot.name"), "debezium",
               "no slot.name: Debezium's default slot, \"debezium\"");
        is_str(relay_config_get(c, "publication.name"), "dbz_publication",
               "no publication.name: Debezium's default publication, \"dbz_publication\"");
        relay_config_free(c);

        /* A converter the connector leaves out is the worker's: no profile
         * (main.c refuses to start without one), not the other's guessed. */
        c = load_text("{\"config\": {\"value.converter\": "
                      "\"org.apache.kafka.connect.storage.StringConverter\"}}",
                      notes, sizeof(notes), err, sizeof(err), &rc);
        is_int(rc, 0, "value.converter alone loads: %s", rc ? err : "ok");
        ok(relay_config_origin(c, "format.profile") == NULL,
           "  without key.converter no format.profile is set (got \"%s\" from %s)",
           relay_config_get(c, "format.profile"),
           relay_config_origin(c, "format.profile") ? relay_config_origin(c, "format.profile")
                                                    : "the default");
        relay_config_free(c);
        c = load_text("{\"config\": {\"key.converter\": "
                      "\"org.apache.kafka.connect.storage.StringConverter\", \"value.converter\": "
                      "\"org.apache.kafka.connect.storage.StringConverter\"}}",
                      notes, sizeof(notes), err, sizeof(err), &rc);
        ok(rc == 0 && relay_config_origin(c, "format.profile") != NULL &&
                   strstr(relay_config_origin(c, "format.profile"), "key.converter"),
           "  with both, format.profile comes from them (%s)",
           relay_config_origin(c, "format.profile") ? relay_config_origin(c, "format.profile")
                                                    : "the default");
        relay_config_free(c);

        /* Converters that differ: the message names each as the file sets it. */
        /* A NUL byte: Java reads on, so a reader that stops there would miss
         * slot.name (taking Debezium's default slot) and flush.lsn.source. */
        {
                static const char text[] =
                        "debezium.source.database.hostname=db\0\n"
                        "debezium.source.slot.name=orders_slot\n"
                        "debezium.source.flush.lsn.source=false\n";
                const char *tmp = "/tmp/relay-test-dbzconf-nul.properties";
                FILE *f = fopen(tmp, "w");
                if (!f || fwrite(text, 1, sizeof(text) - 1, f) != sizeof(text) - 1 || fclose(f))
                        tap_bail("could not write %s", tmp);
                if (relay_config_new(&c) != 0)
                        tap_bail("relay_config_new");
                rc = relay_dbzconf_load(c, tmp, notes, sizeof(notes), err, sizeof(err));
                is_int(rc, RELAY_EINVAL, "a properties file with a NUL byte is refused (slot.name %s)",
                       relay_config_get(c, "slot.name"));
                ok(strstr(err, "holds a NUL byte (line 1)") && strstr(err, "UTF-8"),
                   "  naming the line and the fix: %s", err);
                relay_config_free(c);
                remove(tmp);
        }

        /* A Connect connector's own producer settings are producer.override.*
         * (KIP-458): they are the relay's kafka.*, serializers aside. */
        c = load_text("{\"config\": {\"producer.override.compression.type\": \"zstd\", "
                      "\"producer.override.key.serializer\": "
                      "\"org.apache.kafka.common.serialization.StringSerializer\"}}",
                      notes, sizeof(notes), err, sizeof(err), &rc);
        is_int(rc, 0, "producer.override.* loads: %s", rc ? err : "ok");
        is_str(relay_config_get(c, "kafka.compression.type"), "zstd",
               "  producer.override.compression.type is kafka.compression.type");
        ok(strstr(notes, "producer.override.key.serializer") != NULL,
           "  the serializer override is listed without effect: %s", notes);
        relay_config_free(c);

        /* A value JSON gives as a real, null, an array or an object is named
         * as what it is: 5432.0 is a number, but not one an integer option
         * takes. */
        refused_naming("{\"config\": {\"database.port\": 5432.0}}", "a real database.port",
                       "key \"database.port\" is a number with a fraction or exponent",
                       "give it as a string, an integer or a boolean");
        refused_naming("{\"config\": {\"slot.name\": null}}", "a null slot.name",
                       "key \"slot.name\" is null", "give it as a string");
        refused_naming("{\"config\": {\"key.converter\": "
                       "\"org.apache.kafka.connect.storage.StringConverter\", \"value.converter\": "
                       "\"org.apache.kafka.connect.json.JsonConverter\"}}",
                       "key StringConverter, value JsonConverter",
                       "\"value.converter\" = \"org.apache.kafka.connect.json.JsonConverter\"",
                       "key.converter \"org.apache.kafka.connect.storage.StringConverter\"");
        refused_naming("{\"config\": {\"key.converter\": "
                       "\"org.apache.kafka.connect.json.JsonConverter\", \"value.converter\": "
                       "\"org.apache.kafka.connect.json.JsonConverter\", "
                       "\"value.converter.schemas.enable\": \"false\"}}",
                       "JsonConverter with and without schemas",
                       "gives format.profile connect-json,", "gives connect-json-schema;");

        /* Booleans as Kafka Connect and Debezium read them: case-insensitive,
         * blanks around ignored (ConfigDef.parseType, Configuration.getBoolean). */
        c = load_text("{\"config\": {\"key.converter\": "
                      "\"org.apache.kafka.connect.json.JsonConverter\", "
                      "\"key.converter.schemas.enable\": \"FALSE\", \"value.converter\": "
                      "\"org.apache.kafka.connect.json.JsonConverter\", "
                      "\"value.converter.schemas.enable\": \"False\"}}",
                      notes, sizeof(notes), err, sizeof(err), &rc);
        is_int(rc, 0, "schemas.enable=False loads: %s", rc ? err : "ok");
        is_str(relay_config_get(c, "format.profile"), "connect-json",
               "  schemas.enable=False is JsonConverter without schemas");
        relay_config_free(c);
        c = load_text("debezium.source.topic.prefix=shop\n"
                      "debezium.source.extended.headers.enabled=False\n",
                      notes, sizeof(notes), err, sizeof(err), &rc);
        is_int(rc, 0, "extended.headers.enabled=False loads: %s", rc ? err : "ok");
        is_str(relay_config_get(c, "format.debezium.topic_prefix"), "",
               "  extended.headers.enabled=False: no context headers");
        relay_config_free(c);
        c = load_text("{\"slot.drop.on.stop\": \"false\"}", notes, sizeof(notes), err,
                      sizeof(err), &rc);
        ok(rc == 0 && strstr(notes, "slot.drop.on.stop"),
           "slot.drop.on.stop=false (Debezium's default) loads, listed without effect: %s",
           rc ? err : notes);
        relay_config_free(c);
        c = load_text("{\"flush.lsn.source\": \"TRUE\", \"transforms\": \"outbox\", "
                      "\"transforms.outbox.type\": \"io.debezium.transforms.outbox.EventRouter\", "
                      "\"transforms.outbox.table.json.payload.null.behavior\": \"IGNORE\"}",
                      notes, sizeof(notes), err, sizeof(err), &rc);
        is_int(rc, 0, "flush.lsn.source=TRUE and table.json.payload.null.behavior=IGNORE load: %s",
               rc ? err : "ok");
        relay_config_free(c);

        /* A file that is no Debezium configuration is refused, not taken as
         * one without keys: a directory, and a Kafka Connect standalone
         * connector's .properties (no debezium.* key: read as Debezium
         * Server's, every key would be ignored). */
        if (relay_config_new(&c) != 0)
                tap_bail("relay_config_new");
        rc = relay_dbzconf_load(c, "/tmp", notes, sizeof(notes), err, sizeof(err));
        ok(rc == RELAY_EINVAL && strstr(err, "could not read"),
           "a directory is refused: %s", rc ? err : "loaded");
        relay_config_free(c);
        c = load_text("connector.class=io.debezium.connector.postgresql.PostgresConnector\n"
                      "database.hostname=db\nslot.name=outbox_slot\n",
                      notes, sizeof(notes), err, sizeof(err), &rc);
        ok(rc == RELAY_EINVAL && strstr(err, "no Debezium Server key") && strstr(err, "JSON"),
           "a properties file without debezium.* keys is refused, naming the JSON form: %s",
           rc ? err : "loaded");
        relay_config_free(c);

        /* flush.lsn.source=true (Debezium's default) changes nothing here. */
        {
                const char *tmp = "/tmp/relay-test-dbzconf.json";
                write_tmp(tmp, "{\"config\": {\"flush.lsn.source\": \"true\"}}");
                if (relay_config_new(&c) != 0)
                        tap_bail("relay_config_new");
                notes[0] = '\0';
                rc = relay_dbzconf_load(c, tmp, notes, sizeof(notes), err, sizeof(err));
                ok(rc == 0 && strstr(notes, "flush.lsn.source"),
                   "flush.lsn.source=true is accepted and listed without effect: %s",
                   rc ? err : notes);
                relay_config_free(c);
                remove(tmp);
        }
        return done_testing();
}
