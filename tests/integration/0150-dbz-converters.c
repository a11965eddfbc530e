/*
 * 0150-dbz-converters.c - --debezium-config with a Kafka Connect connector
 * that leaves out a converter.
 *
 * A converter the connector's "config" does not set is the Connect worker's,
 * which the connector JSON does not show; the key's bytes decide each
 * event's partition. The relay used to take the value's converter for the
 * key when only one was given, and its own raw format when neither was:
 * other bytes than Debezium's, in silence. Now it refuses to start (exit 2,
 * naming both fixes) unless format.profile is set in a layer above the
 * Debezium file; with both converters it starts as before.
 *
 * The relay runs with --print-config, which needs no server. `status`,
 * which sends nothing to Kafka (README's cutover runs it on Debezium's
 * file), is not refused.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"

#define CONNECTOR                                                                                 \
        "{\"name\": \"outbox\", \"config\": {\n"                                                  \
        "  \"connector.class\": \"io.debezium.connector.postgresql.PostgresConnector\",\n"        \
        "  \"plugin.name\": \"pgoutput\",\n"                                                      \
        "  \"topic.prefix\": \"shop\",\n"                                                         \
        "  \"transforms\": \"outbox\",\n"                                                         \
        "  \"transforms.outbox.type\": \"io.debezium.transforms.outbox.EventRouter\"%s\n}}\n"

#define STRING_CONVERTER "\"org.apache.kafka.connect.storage.StringConverter\""

/* Run cmd (NULL: the relay with --print-config) on a connector with extra
 * config lines, with conninfo (NULL: none) and set; the exit code, *log
 * its standard error (caller frees). */
static int run_on(const char *cmd, const char *conninfo, const char *extra, const char *set,
                  char **log)
{
        char *file = fx_fmt("%s/0150-%d.json", h_env("RELAY_TEST_ENV_DIR"), (int)getpid());
        h_write_file(file, CONNECTOR, extra);
        const char *opts[] = {"--debezium-config", file, cmd ? NULL : "--print-config", NULL};
        const char *sets[] = {"kafka.bootstrap.servers=127.0.0.1:9", set ? set : conninfo,
                              set ? conninfo : NULL, NULL};
        char *out = NULL;
        int rc = h_relay_run_cmd(cmd, opts, sets, 30000, &out, log);
        free(out);
        remove(file);
        free(file);
        return rc;
}

static int print_config(const char *extra, const char *set, char **log)
{
        return run_on(NULL, NULL, extra, set, log);
}

int main(void)
{
        static const struct {
                const char *what, *extra;
        } cases[] = {
                {"no converter", ""},
                {"value.converter alone", ",\n  \"value.converter\": " STRING_CONVERTER},
                {"key.converter alone", ",\n  \"key.converter\": " STRING_CONVERTER},
        };
        char *log;
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                int rc = print_config(cases[i].extra, NULL, &log);
                is_int(rc, 2, "%s: refused as a configuration error", cases[i].what);
                ok(strstr(log, "does not set key.converter and value.converter") &&
                           strstr(log, "add the worker's key.converter and value.converter") &&
                           strstr(log, "or set format.profile"),
                   "%s: the message names the cause and both fixes", cases[i].what);
                if (rc != 2)
                        tap_diag("%s", log);
                free(log);
                rc = print_config(cases[i].extra, "format.profile=connect-string", &log);
                is_int(rc, 0, "%s, format.profile set with --set: starts", cases[i].what);
                if (rc != 0)
                        tap_diag("%s", log);
                free(log);
        }
        int rc = print_config(",\n  \"key.converter\": " STRING_CONVERTER
                              ",\n  \"value.converter\": " STRING_CONVERTER,
                              NULL, &log);
        is_int(rc, 0, "both converters: starts");
        if (rc != 0)
                tap_diag("%s", log);
        free(log);

        /* status reads the slot and sends nothing to Kafka: README's
         * cutover runs it on Debezium's file, which need not name the
         * converters. It answers as with format.profile set. */
        char *db = h_pg_create_db("dbzconv");
        char *ci = h_pg_conninfo(db);
        char *set_ci = fx_fmt("postgres.conninfo=%s", ci);
        char *log2;
        rc = run_on("status", set_ci, "", NULL, &log);
        int want = run_on("status", set_ci, "", "format.profile=connect-string", &log2);
        ok(rc != 2 && rc == want && !strstr(log, "key.converter"),
           "status: not refused for the converters (exit %d; with format.profile %d)", rc, want);
        if (rc != want || strstr(log, "key.converter"))
                tap_diag("%s", log);
        free(log);
        free(log2);
        free(set_ci);
        free(ci);
        h_pg_drop_db(db);
        free(db);
        return done_testing();
}
