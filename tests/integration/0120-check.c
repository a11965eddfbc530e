/*
 * 0120-check.c - `outbox-relay check` names each broken setting with its
 * fix and exits 3; on a good setup it exits 0; it creates nothing.
 *
 *   - good setup: exit 0; the topic of a row in the outbox table is found
 *     to exist, a topic named by another row does not and is still missing
 *     after check (its metadata request must not auto-create it, though the
 *     test broker auto-creates topics), the dead-letter topic exists; no
 *     slot or publication was created; --json parses and holds the same
 *     verdicts, in the same order, as the text;
 *   - broken, each in one run with the fix in the line: wal_level=replica (a
 *     throwaway second cluster), a role without REPLICATION (also one whose
 *     name needs quotes: the fix is run as written), a publication
 *     without the table, a publication publishing updates (also as JSON), a
 *     missing table column, Kafka unreachable, kafka.acks=1 (which the
 *     relay's idempotent producer refuses: the relay exits 2 on it);
 *   - outbox.source = messages without a table: the table is not checked,
 *     a missing publication is a warning (created empty); snapshot.mode =
 *     initial: a filter the server refuses and a role without SELECT fail;
 *     two outbox tables: both checked, the publication must include both;
 *   - route.topic.regex: the topic checked is the one the regex makes of a
 *     row's routing value, not the value itself;
 *   - PostgreSQL 15+: a publication whose column list leaves out the
 *     payload fails with the SET TABLE that drops the list; after it, ok;
 *   - a partitioned outbox table: without publish_via_partition_root the
 *     fix is that setting, not ADD TABLE; with it the publication is ok; a
 *     row's topic quoted up to inside a UTF-8 character still gives a JSON
 *     document with the text's verdicts; with table.op.invalid.behavior =
 *     fatal, a partition without a replica identity is a warning naming it
 *     (and an UPDATE does fail), also when only the partitioned table has
 *     REPLICA IDENTITY FULL; with the partition's, ok and the UPDATE works.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <errno.h>
#include <jansson.h>
#include <librdkafka/rdkafka.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#define RUN_BOUND_MS 30000

static char g_set_kafka[256];

/* Does the cluster's full metadata list topic? (An all-topics request creates nothing.) */
static bool topic_listed(const char *topic)
{
        char err[512];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        if (rd_kafka_conf_set(conf, "bootstrap.servers", h_kafka_bootstrap(), err, sizeof(err)))
                tap_bail("conf: %s", err);
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
        if (!rk)
                tap_bail("rd_kafka_new: %s", err);
        const struct rd_kafka_metadata *md = NULL;
        rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 1, NULL, &md, 10000);
        if (e)
                tap_bail("metadata: %s", rd_kafka_err2str(e));
        bool found = false;
        for (int i = 0; i < md->topic_cnt; i++)
                if (strcmp(md->topics[i].topic, topic) == 0 && !md->topics[i].err)
                        found = true;
        rd_kafka_metadata_destroy(md);
        rd_kafka_destroy(rk);
        return found;
}

/* Each line of text as a TAP diagnostic. */
static void diag_lines(const char *title, const char *text)
{
        tap_diag("%s:", title);
        while (text && *text) {
                const char *nl = strchr(text, '\n');
                int len = nl ? (int)(nl - text) : (int)strlen(text);
                tap_diag("  %.*s", len, text);
                text = nl ? nl + 1 : NULL;
        }
}

/* The text line of check "name" with status (first one containing every needle), or NULL. */
static char *find_line(const char *out, const char *status, const char *name,
                       const char *const *needles)
{
        char *copy = strdup(out), *line = copy, *found = NULL;
        while (line && *line) {
                char *nl = strchr(line, '\n');
                if (nl)
                        *nl = '\0';
                char st[16], nm[80];
                if (sscanf(line, "%15s %79s", st, nm) == 2 && strcmp(st, status) == 0 &&
                    strcmp(nm, name) == 0) {
                        bool all = true;
                        for (int i = 0; needles && needles[i]; i++)
                                all &= strstr(line, needles[i]) != NULL;
                        if (all && !found)
                                found = strdup(line);
                }
                line = nl ? nl + 1 : NULL;
        }
        free(copy);
        return found;
}

/*
 * Run check in text mode: exit want, and a line "<status> <name> ..." that
 * holds every needle (the message and the fix). Returns the output (caller frees).
 */
static char *expect_line(const char *what, const char *const *sets, int want, const char *status,
                         const char *name, const char *const *needles)
{
        char *out, *log;
        int rc = h_relay_run_cmd("check", NULL, sets, RUN_BOUND_MS, &out, &log);
        char *line = find_line(out, status, name, needles);
        bool good = ok(rc == want, "%s: check exits %d (got %d)", what, want, rc);
        good &= ok(line != NULL, "%s: a \"%s\" line for %s names the problem and the fix", what,
                   status, name);
        if (line)
                tap_diag("%s: %s", what, line);
        if (!good) {
                for (int i = 0; needles && needles[i]; i++)
                        tap_diag("  wanted: \"%s\"", needles[i]);
                diag_lines("stdout", out);
                diag_lines("stderr", log);
        }
        free(line);
        free(log);
        return out;
}

/*
 * Run check --json: it parses, "failed" matches the exit code, and its
 * verdicts are text_out's lines (same names and statuses, in order; the
 * text line is "status name message; fix"). Returns the document.
 */
static json_t *expect_json(const char *what, const char *const *sets, int want,
                           const char *text_out)
{
        const char *opts[] = {"--json", NULL};
        char *out, *log;
        json_error_t jerr;
        int rc = h_relay_run_cmd("check", opts, sets, RUN_BOUND_MS, &out, &log);
        json_t *doc = json_loads(out, 0, &jerr);
        is_int(rc, want, "%s: check --json exits %d", what, want);
        if (!ok(doc && json_is_array(json_object_get(doc, "checks")), "%s: --json output parses",
                what)) {
                tap_diag("%s at line %d", jerr.text, jerr.line);
                diag_lines("stdout", out);
                diag_lines("stderr", log);
                free(out);
                free(log);
                json_decref(doc);
                return NULL;
        }
        ok(json_is_boolean(json_object_get(doc, "failed")) &&
               json_boolean_value(json_object_get(doc, "failed")) == (want == 3),
           "%s: \"failed\" is %s", what, want == 3 ? "true" : "false");
        json_t *checks = json_object_get(doc, "checks");
        size_t i = 0;
        bool same = true;
        const char *line = text_out;
        for (; line && *line; i++) {
                const char *nl = strchr(line, '\n');
                json_t *c = json_array_get(checks, i);
                char want_line[2048];
                if (!c) {
                        same = false;
                        break;
                }
                const char *fix = json_string_value(json_object_get(c, "fix"));
                snprintf(want_line, sizeof(want_line), "%-8s %-32s %s%s%s",
                         json_string_value(json_object_get(c, "status")),
                         json_string_value(json_object_get(c, "name")),
                         json_string_value(json_object_get(c, "message")), fix && *fix ? "; " : "",
                         fix ? fix : "");
                size_t len = nl ? (size_t)(nl - line) : strlen(line);
                if (strlen(want_line) != len || strncmp(want_line, line, len) != 0) {
                        tap_diag("text:  %.*s", (int)len, line);
                        tap_diag("json:  %s", want_line);
                        same = false;
                }
                line = nl ? nl + 1 : NULL;
        }
        same &= i == json_array_size(checks);
        ok(same, "%s: the JSON verdicts are the text's (%zu checks)", what, json_array_size(checks));
        free(out);
        free(log);
        return doc;
}

/* The JSON verdict named name with status, whose message or fix holds needle. */
static bool json_has(json_t *doc, const char *name, const char *status, const char *needle)
{
        json_t *c;
        size_t i;
        json_array_foreach(json_object_get(doc, "checks"), i, c) {
                const char *n = json_string_value(json_object_get(c, "name"));
                const char *s = json_string_value(json_object_get(c, "status"));
                const char *m = json_string_value(json_object_get(c, "message"));
                const char *f = json_string_value(json_object_get(c, "fix"));
                if (n && s && m && f && strcmp(n, name) == 0 && strcmp(s, status) == 0 &&
                    (strstr(m, needle) || strstr(f, needle)))
                        return true;
        }
        return false;
}

/* A count(*) result (h_pg_value()'s string, freed here). */
static long count_of(char *v)
{
        long n = v ? strtol(v, NULL, 10) : -1;
        free(v);
        return n;
}
#define COUNT(c, ...) count_of(h_pg_value(c, __VA_ARGS__))

/* --- cases ------------------------------------------------------------------ */

static void case_good_and_broken(void)
{
        char *db = h_pg_create_db("check");
        char *slot = h_unique_name("slot_check");
        char *dlq = h_unique_name("check_dlq");
        char *present = h_unique_name("present");
        char *absent = h_unique_name("absent");
        char *role = h_unique_name("norepl");
        char topic_present[256], topic_absent[256];
        char set_conn[512], set_slot[128], set_dlq[128], set_role_conn[512];
        PGconn *c = h_pg_connect(db);

        h_pg_create_outbox(c, "outbox");
        h_pg_exec_file(c, "002_publication.sql");
        /* Rows name two topics: one exists, one does not. */
        snprintf(topic_present, sizeof(topic_present), "outbox.event.%s", present);
        snprintf(topic_absent, sizeof(topic_absent), "outbox.event.%s", absent);
        h_kafka_create_topic(topic_present, 1);
        h_kafka_create_topic(dlq, 1);
        h_pg_exec(c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES "
                  "(gen_random_uuid(), '%s', 'a', 'T', '{}'), (gen_random_uuid(), '%s', 'b', 'T', '{}')",
                  present, absent);
        char *ci = h_pg_conninfo(db);
        snprintf(set_conn, sizeof(set_conn), "postgres.conninfo=%s", ci);
        snprintf(set_slot, sizeof(set_slot), "slot.name=%s", slot);
        snprintf(set_dlq, sizeof(set_dlq), "errors.dlq.topic=%s", dlq);

        /* Good: every line ok or warning, exit 0. */
        const char *good[] = {set_conn, g_set_kafka, set_slot, set_dlq, NULL};
        const char *n_present[] = {topic_present, "exists", NULL};
        char *out = expect_line("good setup", good, 0, "ok", "kafka.topic", n_present);
        ok(!strstr(out, "\nfail ") && strncmp(out, "fail ", 5) != 0, "good setup: no fail line");
        const char *n_absent[] = {topic_absent, "does not exist", "auto.create.topics.enable", NULL};
        char *line = find_line(out, "warning", "kafka.topic", n_absent);
        ok(line != NULL, "good setup: the missing topic a row names is a warning (auto-create is on)");
        free(line);
        const char *n_dlq[] = {dlq, "exists", NULL};
        line = find_line(out, "ok", "kafka.dlq_topic", n_dlq);
        ok(line != NULL, "good setup: the dead-letter topic exists");
        free(line);
        const char *n_wal[] = {"logical", NULL};
        line = find_line(out, "ok", "postgres.wal_level", n_wal);
        ok(line != NULL, "good setup: wal_level ok");
        free(line);
        json_t *doc = expect_json("good setup", good, 0, out);
        ok(doc && json_has(doc, "postgres.publication", "ok", "inserts of \"public.outbox\" only"),
           "good setup (JSON): the publication is ok");
        json_decref(doc);
        free(out);
        ok(!topic_listed(topic_absent), "check did not create topic \"%s\"", topic_absent);
        is_int(COUNT(c, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '%s'", slot), 0,
               "check did not create slot \"%s\"", slot);
        is_int(COUNT(c, "SELECT count(*) FROM pg_publication WHERE pubname <> '%s'", "outbox_pub"), 0,
               "check created no publication");

        /* A role without REPLICATION. */
        h_pg_exec(c, "CREATE ROLE %s LOGIN NOREPLICATION", role);
        snprintf(set_role_conn, sizeof(set_role_conn),
                 "postgres.conninfo=host=%s port=%s user=%s dbname=%s", h_env("RELAY_TEST_PGHOST"),
                 h_env("RELAY_TEST_PGPORT"), role, db);
        const char *s_role[] = {set_role_conn, g_set_kafka, set_slot, set_dlq, NULL};
        const char *n_role[] = {"REPLICATION", "ALTER ROLE", role, NULL};
        free(expect_line("role without REPLICATION", s_role, 3, "fail", "postgres.role", n_role));

        /* The same for a role whose name SQL must quote: the fix must run as written. */
        char qrole[128], fix_role[192];
        snprintf(qrole, sizeof(qrole), "\"Q-%s\"", role);
        h_pg_exec(c, "CREATE ROLE %s LOGIN NOREPLICATION", qrole);
        snprintf(set_role_conn, sizeof(set_role_conn),
                 "postgres.conninfo=host=%s port=%s user=Q-%s dbname=%s", h_env("RELAY_TEST_PGHOST"),
                 h_env("RELAY_TEST_PGPORT"), role, db);
        snprintf(fix_role, sizeof(fix_role), "ALTER ROLE %s REPLICATION", qrole);
        const char *n_qrole[] = {fix_role, NULL};
        free(expect_line("role whose name needs quotes", s_role, 3, "fail", "postgres.role", n_qrole));
        h_pg_exec(c, "%s", fix_role);
        const char *n_qrole_ok[] = {"has LOGIN and REPLICATION", NULL};
        free(expect_line("that role after the fix", s_role, 0, "ok", "postgres.role", n_qrole_ok));
        h_pg_drop_role(qrole);

        /* A publication without the table. */
        h_pg_exec(c, "CREATE TABLE other (x int)");
        h_pg_exec(c, "CREATE PUBLICATION pub_other FOR TABLE other WITH (publish = 'insert')");
        const char *s_other[] = {set_conn, g_set_kafka, set_slot, set_dlq,
                                 "publication.name=pub_other", NULL};
        const char *n_other[] = {"does not include table \"public.outbox\"",
                                 "ALTER PUBLICATION pub_other ADD TABLE public.outbox", NULL};
        free(expect_line("publication without the table", s_other, 3, "fail",
                         "postgres.publication", n_other));

        /* PostgreSQL 15+: a column list without the payload; every row would be an error. */
        if (PQserverVersion(c) >= 150000) {
                h_pg_exec(c, "CREATE PUBLICATION pub_cols FOR TABLE outbox (id, aggregatetype, "
                             "aggregateid, type) WITH (publish = 'insert')");
                const char *s_cols[] = {set_conn, g_set_kafka, set_slot, set_dlq,
                                        "publication.name=pub_cols", NULL};
                const char *n_cols[] = {"column list", "\"payload\" (outbox.column.payload)",
                                        "ALTER PUBLICATION pub_cols SET TABLE public.outbox", NULL};
                free(expect_line("publication with a column list without the payload", s_cols, 3,
                                 "fail", "postgres.publication", n_cols));
                h_pg_exec(c, "ALTER PUBLICATION pub_cols SET TABLE public.outbox");
                const char *n_cols_ok[] = {"publishes inserts of \"public.outbox\" only", NULL};
                free(expect_line("the same publication after its fix", s_cols, 0, "ok",
                                 "postgres.publication", n_cols_ok));
        } else {
                tap_diag("PostgreSQL %d: no column lists before 15", PQserverVersion(c));
        }

        /* A publication publishing updates (the default publish list). */
        h_pg_exec(c, "CREATE PUBLICATION pub_all_dml FOR TABLE outbox");
        const char *s_upd[] = {set_conn, g_set_kafka, set_slot, set_dlq,
                               "publication.name=pub_all_dml", NULL};
        const char *n_upd[] = {"publishes update", "SET (publish = 'insert')", NULL};
        out = expect_line("publication publishing updates", s_upd, 3, "fail", "postgres.publication",
                          n_upd);
        doc = expect_json("publication publishing updates", s_upd, 3, out);
        ok(doc && json_has(doc, "postgres.publication", "fail", "publish = 'insert'"),
           "publication publishing updates (JSON): fail with the fix");
        json_decref(doc);
        free(out);

        /* A column the mapping reads is missing. */
        const char *s_col[] = {set_conn, g_set_kafka, set_slot, set_dlq,
                               "outbox.column.payload=body", NULL};
        const char *n_col[] = {"has no column \"body\"", "outbox.column.payload", NULL};
        free(expect_line("missing table column", s_col, 3, "fail", "outbox.columns", n_col));

        /* A JSON-schema profile: format.not_null_columns must match the catalog. */
        const char *s_nn[] = {set_conn, g_set_kafka, set_slot, set_dlq,
                              "format.profile=debezium-server",
                              "format.not_null_columns=id,aggregatetype,aggregateid,type,payload", NULL};
        const char *n_nn[] = {"payload (listed, nullable)",
                              "set format.not_null_columns = id,aggregatetype,aggregateid,type,created_at",
                              NULL};
        free(expect_line("not_null_columns against the catalog", s_nn, 3, "fail", "outbox.columns",
                         n_nn));
        const char *s_nn_ok[] = {set_conn, g_set_kafka, set_slot, set_dlq,
                                 "format.profile=debezium-server", NULL};
        const char *n_nn_ok[] = {"the mapping's columns exist", NULL};
        free(expect_line("debezium-server with the default not_null_columns", s_nn_ok, 0, "ok",
                         "outbox.columns", n_nn_ok));

        /* Kafka unreachable (nothing listens on port 1). */
        const char *s_kafka[] = {set_conn, "kafka.bootstrap.servers=127.0.0.1:1", set_slot, set_dlq,
                                 NULL};
        const char *n_kafka[] = {"could not reach Kafka", "kafka.bootstrap.servers", NULL};
        free(expect_line("Kafka unreachable", s_kafka, 3, "fail", "kafka.connection", n_kafka));

        /* A kafka.* setting only an idempotent producer refuses (check's own
         * client is not idempotent): the relay exits 2 on it, check must fail. */
        const char *s_acks[] = {set_conn, g_set_kafka, set_slot, set_dlq, "kafka.acks=1", NULL};
        const char *n_acks[] = {"acks", "idempotent", NULL};
        free(expect_line("kafka.acks=1", s_acks, 3, "fail", "kafka.settings", n_acks));
        h_relay_t *r = h_relay_start(s_acks);
        is_int(h_relay_wait(r, RUN_BOUND_MS), 2, "kafka.acks=1: the relay itself exits 2");
        h_relay_free(r);

        PQfinish(c);
        h_pg_drop_db(db);
        h_pg_drop_role(role);
        h_kafka_delete_topic(topic_present);
        h_kafka_delete_topic(dlq);
        free(ci);
        free(role);
        free(absent);
        free(present);
        free(dlq);
        free(slot);
        free(db);
}

/*
 * A partitioned outbox table in a publication without
 * publish_via_partition_root: the fix is that setting (the table is a
 * member already: ADD TABLE would fail), and with it the publication is ok.
 * A row whose topic is cut inside a UTF-8 character when quoted: --json
 * still prints a document, the same verdicts as the text.
 */
static void case_partitioned_and_utf8(void)
{
        char *db = h_pg_create_db("check_part");
        char *slot = h_unique_name("slot_check_part");
        char set_conn[512], set_slot[128];
        PGconn *c = h_pg_connect(db);

        h_pg_exec(c, "CREATE TABLE outbox (id uuid NOT NULL, aggregatetype varchar(255) NOT NULL, "
                     "aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb, "
                     "created_at timestamptz NOT NULL DEFAULT now()) PARTITION BY RANGE (created_at)");
        h_pg_exec(c, "CREATE TABLE outbox_all PARTITION OF outbox FOR VALUES FROM ('2000-01-01') TO "
                     "('2100-01-01')");
        h_pg_exec(c, "CREATE PUBLICATION pub_leaves FOR TABLE outbox WITH (publish = 'insert')");
        h_pg_exec(c, "CREATE PUBLICATION pub_root FOR TABLE outbox WITH (publish = 'insert', "
                     "publish_via_partition_root = true)");
        char *ci = h_pg_conninfo(db);
        snprintf(set_conn, sizeof(set_conn), "postgres.conninfo=%s", ci);
        snprintf(set_slot, sizeof(set_slot), "slot.name=%s", slot);

        const char *s_leaves[] = {set_conn, g_set_kafka, set_slot, "publication.name=pub_leaves",
                                  NULL};
        const char *n_leaves[] = {"is partitioned", "pub_leaves",
                                  "ALTER PUBLICATION pub_leaves SET (publish_via_partition_root = true)",
                                  NULL};
        char *out = expect_line("partitioned table, publication without publish_via_partition_root",
                                s_leaves, 3, "fail", "postgres.publication", n_leaves);
        ok(!strstr(out, "ADD TABLE"), "  and no ADD TABLE for a table the publication holds");
        free(out);
        const char *s_root[] = {set_conn, g_set_kafka, set_slot, "publication.name=pub_root", NULL};
        const char *n_root[] = {"publishes inserts of \"public.outbox\" only", NULL};
        free(expect_line("partitioned table, publish_via_partition_root = true", s_root, 0, "ok",
                         "postgres.publication", n_root));

        /* table.op.invalid.behavior = fatal on a table without a primary key: the
         * publication publishes updates, so an UPDATE fails in the application. */
        h_pg_exec(c, "CREATE PUBLICATION pub_upd FOR TABLE outbox WITH (publish = 'insert, update', "
                     "publish_via_partition_root = true)");
        const char *s_upd[] = {set_conn, g_set_kafka, set_slot, "publication.name=pub_upd",
                               "table.op.invalid.behavior=fatal", NULL};
        const char *n_upd[] = {"partition \"public.outbox_all\" has no replica identity",
                               "ALTER TABLE public.outbox_all REPLICA IDENTITY FULL", NULL};
        free(expect_line("updates published, no replica identity", s_upd, 0, "warning",
                         "postgres.publication", n_upd));
        h_pg_exec(c, "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES "
                     "(gen_random_uuid(), 'ri', 'a', 'T', '{}')");
        PGresult *ures = PQexec(c, "UPDATE outbox SET type = 'U' WHERE aggregatetype = 'ri'");
        ok(PQresultStatus(ures) == PGRES_FATAL_ERROR &&
               strstr(PQresultErrorMessage(ures), "replica identity"),
           "  as it says, the UPDATE fails: %s", PQresultErrorMessage(ures));
        PQclear(ures);
        /* The partitioned table's own setting is not its partitions'. */
        h_pg_exec(c, "ALTER TABLE outbox REPLICA IDENTITY FULL");
        free(expect_line("updates published, only the partitioned table's replica identity full",
                         s_upd, 0, "warning", "postgres.publication", n_upd));
        h_pg_exec(c, "ALTER TABLE outbox_all REPLICA IDENTITY FULL");
        const char *n_upd_ok[] = {"publishes inserts and updates", NULL};
        free(expect_line("updates published, the partition's replica identity full", s_upd, 0, "ok",
                         "postgres.publication", n_upd_ok));
        ures = PQexec(c, "UPDATE outbox SET type = 'U' WHERE aggregatetype = 'ri'");
        is_int(PQresultStatus(ures), PGRES_COMMAND_OK, "  and the UPDATE works now: %s",
               PQresultErrorMessage(ures));
        PQclear(ures);
        h_pg_exec(c, "DELETE FROM outbox");
        /* A plain table without a primary key: the table itself is named. */
        h_pg_exec(c, "CREATE TABLE plain (LIKE outbox)");
        h_pg_exec(c, "CREATE PUBLICATION pub_plain FOR TABLE plain WITH (publish = 'insert, update')");
        const char *s_plain[] = {set_conn, g_set_kafka, set_slot, "publication.name=pub_plain",
                                 "outbox.table=plain", "table.op.invalid.behavior=error", NULL};
        const char *n_plain[] = {"table \"public.plain\" has no replica identity",
                                 "ALTER TABLE public.plain ADD PRIMARY KEY (id)", NULL};
        free(expect_line("updates published, a plain table without a primary key", s_plain, 0,
                         "warning", "postgres.publication", n_plain));

        /* 13 bytes of "outbox.event." then 2-byte characters: byte 80 is a first half. */
        h_pg_exec(c, "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES "
                     "(gen_random_uuid(), repeat(U&'\\00E9', 40), 'a', 'T', '{}')");
        const char *n_topic[] = {"invalid Kafka topic name", NULL};
        out = expect_line("a topic quoted up to inside a character", s_root, 3, "fail", "kafka.topic",
                          n_topic);
        json_t *doc = expect_json("a topic quoted up to inside a character", s_root, 3, out);
        ok(doc && json_has(doc, "kafka.topic", "fail", "invalid Kafka topic name"),
           "  (JSON): the invalid topic is a failure");
        json_decref(doc);
        free(out);

        PQfinish(c);
        h_pg_drop_db(db);
        free(ci);
        free(slot);
        free(db);
}

/*
 * route.topic.regex: the topics checked are the ones the regex and
 * replacement make of the rows' routing values, as the relay sends to.
 */
static void case_route_regex(void)
{
        char *db = h_pg_create_db("check_route");
        char *slot = h_unique_name("slot_check_route");
        char *agg = h_unique_name("rt");
        char set_conn[512], set_slot[128], routed[256];
        PGconn *c = h_pg_connect(db);

        h_pg_create_outbox(c, "outbox");
        h_pg_exec_file(c, "002_publication.sql");
        h_pg_exec(c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES "
                  "(gen_random_uuid(), '%s.v1', 'a', 'T', '{}')",
                  agg);
        snprintf(routed, sizeof(routed), "%s-events.v1", agg);
        h_kafka_create_topic(routed, 1);
        char *ci = h_pg_conninfo(db);
        snprintf(set_conn, sizeof(set_conn), "postgres.conninfo=%s", ci);
        snprintf(set_slot, sizeof(set_slot), "slot.name=%s", slot);
        const char *sets[] = {set_conn, g_set_kafka, set_slot, "route.by.field=aggregatetype",
                              "route.topic.regex=(?<agg>[a-z0-9_]+)\\.(?<ver>v[0-9]+)",
                              "route.topic.replacement=${agg}-events.${ver}", NULL};
        const char *n_routed[] = {routed, "exists", NULL};
        char *out = expect_line("route.topic.regex", sets, 0, "ok", "kafka.topic", n_routed);
        char raw[256];
        snprintf(raw, sizeof(raw), "\"%s.v1\"", agg);
        ok(!strstr(out, raw), "route.topic.regex: the routing value itself is not taken for a topic");
        free(out);

        PQfinish(c);
        h_pg_drop_db(db);
        h_kafka_delete_topic(routed);
        free(ci);
        free(agg);
        free(slot);
        free(db);
}

static void case_wal_level(void)
{
        h_cluster_t *cl = h_cluster_up(-1, "-c wal_level=replica");
        if (!ok(cl, "a second cluster with wal_level=replica started"))
                return;
        char set_conn[512];
        h_cluster_conninfo_set(cl, set_conn, sizeof(set_conn));
        const char *sets[] = {set_conn, g_set_kafka, NULL};
        const char *needles[] = {"\"replica\"", "wal_level = logical", "restart PostgreSQL", NULL};
        free(expect_line("wal_level=replica", sets, 3, "fail", "postgres.wal_level", needles));
        h_cluster_free(cl);
}

/*
 * outbox.source = messages in a database without an outbox table: the table
 * is not checked, the publication may be missing (the relay creates it
 * empty) and exit 0; snapshot.mode = initial: a filter the server refuses
 * and a role without SELECT on the table each fail with the fix.
 */
static void case_messages_and_snapshot(void)
{
        char *db = h_pg_create_db("checkmsg");
        char *slot = h_unique_name("slot_check");
        char *dlq = h_unique_name("check_dlq");
        char *role = h_unique_name("nosel");
        char set_conn[512], set_slot[128], set_dlq[128], set_role_conn[512];
        PGconn *c = h_pg_connect(db);
        char *ci = h_pg_conninfo(db);
        snprintf(set_conn, sizeof(set_conn), "postgres.conninfo=%s", ci);
        snprintf(set_slot, sizeof(set_slot), "slot.name=%s", slot);
        snprintf(set_dlq, sizeof(set_dlq), "errors.dlq.topic=%s", dlq);
        h_kafka_create_topic(dlq, 1);

        const char *s_msg[] = {set_conn, g_set_kafka, set_slot, set_dlq, "outbox.source=messages",
                               NULL};
        const char *n_src[] = {"logical decoding messages with prefix \"outbox\"", NULL};
        char *out = expect_line("messages, no table", s_msg, 0, "ok", "outbox.source", n_src);
        ok(!strstr(out, "outbox.table") && !strstr(out, "outbox.columns"),
           "messages, no table: the outbox table is not checked");
        const char *n_pub[] = {"does not exist; the relay creates it empty", NULL};
        char *line = find_line(out, "warning", "postgres.publication", n_pub);
        ok(line != NULL, "messages, no table: a missing publication is created empty by the relay");
        free(line);
        free(out);
        is_int(COUNT(c, "SELECT count(*) FROM pg_publication"), 0, "check created no publication");
        h_pg_exec(c, "CREATE PUBLICATION outbox_pub");
        const char *n_pub_ok[] = {"exists (no tables", NULL};
        free(expect_line("messages, empty publication", s_msg, 0, "ok", "postgres.publication",
                         n_pub_ok));

        /* The backfill's needs: a filter the server plans, SELECT on the table. */
        h_pg_create_outbox(c, "outbox");
        h_pg_exec(c, "ALTER PUBLICATION outbox_pub ADD TABLE outbox");
        h_pg_exec(c, "ALTER PUBLICATION outbox_pub SET (publish = 'insert')");
        const char *s_bad[] = {set_conn, g_set_kafka, set_slot, set_dlq, "snapshot.mode=initial",
                               "snapshot.filter=sent_at IS NULL", NULL};
        const char *n_bad[] = {"snapshot.filter \"sent_at IS NULL\" does not work",
                               "column \"sent_at\" does not exist", "WHERE clause", NULL};
        free(expect_line("snapshot.filter on a missing column", s_bad, 3, "fail", "snapshot.filter",
                         n_bad));
        h_pg_exec(c, "ALTER TABLE outbox ADD COLUMN sent_at timestamptz");
        const char *n_good[] = {"where (sent_at IS NULL) are backfilled", NULL};
        free(expect_line("snapshot.filter that works", s_bad, 0, "ok", "snapshot.filter", n_good));
        h_pg_exec(c, "CREATE ROLE %s LOGIN REPLICATION", role);
        snprintf(set_role_conn, sizeof(set_role_conn),
                 "postgres.conninfo=host=%s port=%s user=%s dbname=%s", h_env("RELAY_TEST_PGHOST"),
                 h_env("RELAY_TEST_PGPORT"), role, db);
        const char *s_sel[] = {set_role_conn, g_set_kafka, set_slot, set_dlq,
                               "snapshot.mode=initial", NULL};
        char grant[256];
        snprintf(grant, sizeof(grant), "GRANT SELECT ON public.outbox TO %s", role);
        const char *n_sel[] = {grant, "snapshot.mode = never", NULL};
        free(expect_line("snapshot.mode initial without SELECT", s_sel, 3, "fail", "snapshot.mode",
                         n_sel));
        is_int(COUNT(c, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '%s'", slot), 0,
               "check did not create slot \"%s\"", slot);

        /* Two outbox tables: each is checked, and the publication must have both. */
        h_pg_create_outbox(c, "outbox2");
        const char *s_two[] = {set_conn, g_set_kafka, set_slot, set_dlq,
                               "outbox.table=outbox,outbox2", NULL};
        const char *n_two[] = {"does not include table \"public.outbox2\"",
                               "ALTER PUBLICATION outbox_pub ADD TABLE public.outbox2", NULL};
        out = expect_line("two tables, one not published", s_two, 3, "fail", "postgres.publication",
                          n_two);
        const char *n_two_t[] = {"outbox table \"public.outbox2\" exists", NULL};
        line = find_line(out, "ok", "outbox.table", n_two_t);
        ok(line != NULL, "two tables: the second table is checked too");
        free(line);
        free(out);
        h_pg_exec(c, "ALTER PUBLICATION outbox_pub ADD TABLE outbox2");
        const char *n_two_ok[] = {"inserts of \"public.outbox\", \"public.outbox2\" only", NULL};
        free(expect_line("two tables, both published", s_two, 0, "ok", "postgres.publication",
                         n_two_ok));

        PQfinish(c);
        h_pg_drop_db(db);
        h_pg_drop_role(role);
        h_kafka_delete_topic(dlq);
        free(ci);
        free(role);
        free(dlq);
        free(slot);
        free(db);
}

int main(void)
{
        snprintf(g_set_kafka, sizeof(g_set_kafka), "kafka.bootstrap.servers=%s", h_kafka_bootstrap());
        case_good_and_broken();
        case_partitioned_and_utf8();
        case_route_regex();
        case_wal_level();
        case_messages_and_snapshot();
        return done_testing();
}
