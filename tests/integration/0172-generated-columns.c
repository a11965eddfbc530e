/*
 * 0172-generated-columns.c - an outbox column the mapping reads that is a
 * generated column (here the Kafka key, aggregateid GENERATED ALWAYS AS
 * (payload->>'orderId') STORED).
 *
 * pgoutput leaves generated columns out of the Relation message and of
 * every row before PostgreSQL 18 (and virtual ones always), while
 * pg_publication_tables.attnames lists them on 15: the relay started, and
 * every row went to the error policy as "outbox table has no column
 * aggregateid" although it has one.
 *
 * Before 18 (the server the test runs on): the relay refuses to start
 * (exit 3, one error line naming the column as a generated one), creates
 * no publication, and `outbox-relay check` fails on it.
 * On 18: a relay that creates its publication creates it with
 * publish_generated_columns = stored and the event reaches Kafka keyed by
 * the generated value; a publication without it is refused with that fix;
 * a virtual generated column is refused.
 *
 * The same for the columns the mapping reads beyond the outbox columns,
 * outbox.headers and the template (rows already in the slot when the relay
 * starts, errors.policy = stop): table.field.event.timestamp as a stored
 * generated column, where each row failed ("does not have"), and a
 * generated column placed as a header with table.field.additional.missing
 * = ignore, where each event reached Kafka without the header. Before 18
 * both are refused at start and by check; on 18 the relay's publication
 * sends them and the event carries the timestamp and the header. And, on
 * 15+, a publication whose column list leaves out the timestamp column is
 * refused at start and by check with the SET TABLE fix, a timestamp column
 * the table lacks as such (not as the list's fault); a tracing column and
 * an ignorable placement the table lacks still start, and deliver.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define EXIT_BOUND_MS 60000

/* The outbox of sql/001_outbox.sql with the key generated from the payload. */
static void make_outbox(PGconn *c, const char *kind)
{
        h_pg_exec(c, "CREATE TABLE outbox (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT "
                     "NULL, aggregateid text GENERATED ALWAYS AS (payload->>'orderId') %s, "
                     "type varchar(255) NOT NULL, payload jsonb)",
                  kind);
}

static void insert(PGconn *c, const char *aggtype, const char *order)
{
        h_pg_exec(c,
                  "INSERT INTO outbox (id, aggregatetype, type, payload) VALUES "
                  "(gen_random_uuid(), '%s', 'T', jsonb_build_object('orderId', '%s'))",
                  aggtype, order);
}

/* Run a relay that must exit 3 with one error line holding every needle;
 * extra: more settings (NULL-terminated, at most 4) or NULL. */
static void expect_refusal(const char *what, const h_case_t *k, const char *set_pub,
                           const char *const *needles, const char *const *extra)
{
        const char *sets[10] = {k->set_conn, k->set_kafka, k->set_slot, set_pub, NULL};
        for (int i = 0; extra && extra[i] && i < 4; i++)
                sets[4 + i] = extra[i];
        h_relay_t *r = h_relay_start(sets);
        int rc = h_relay_wait(r, EXIT_BOUND_MS);
        char *log = h_relay_log(r);
        int nerr = 0, nall = 0;
        for (char *line = log, *nl; line && *line; line = nl ? nl + 1 : NULL) {
                if ((nl = strchr(line, '\n')))
                        *nl = '\0';
                if (!strstr(line, " FATAL:  ") && !strstr(line, " ERROR:  "))
                        continue;
                nerr++;
                bool all = true;
                for (int i = 0; needles[i]; i++)
                        all = all && strstr(line, needles[i]);
                if (all) {
                        nall++;
                        tap_diag("%s: %s", what, line);
                }
        }
        bool good = ok(rc == 3, "%s: the relay exits 3 (got %d)", what, rc);
        good &= ok(nerr == 1 && nall == 1, "%s: one error line, naming the column and the fix",
                   what);
        if (!good) {
                for (int i = 0; needles[i]; i++)
                        tap_diag("  wanted: \"%s\"", needles[i]);
                h_relay_diag_log(r);
        }
        free(log);
        h_relay_free(r);
}

static bool publication_exists(PGconn *c, const char *pub)
{
        char *n = h_pg_value(c, "SELECT count(*) FROM pg_publication WHERE pubname = '%s'", pub);
        bool yes = strcmp(n, "0") != 0;
        free(n);
        return yes;
}

/* A case with the stored generated key; its publication's name (caller
 * frees) and the setting that names it. */
static char *open_case(h_case_t *k, char *set_pub, size_t len)
{
        h_case_open(k, "gencol", "slot_gencol", "gencol", 1, H_CASE_BARE);
        make_outbox(k->c, "STORED");
        char *pub = h_unique_name("pub_gencol");
        snprintf(set_pub, len, "publication.name=%s", pub);
        return pub;
}

/* The outbox of sql/001_outbox.sql with one more column, column_def. */
static void make_outbox_with(PGconn *c, const char *column_def)
{
        h_pg_exec(c, "CREATE TABLE outbox (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT "
                     "NULL, aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, "
                     "payload jsonb, %s)",
                  column_def);
}

static void insert_tenant_row(PGconn *c, const char *aggtype)
{
        h_pg_exec(c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES "
                  "(gen_random_uuid(), '%s', 'order-7', 'T', '{\"tenant\": \"acme\"}')",
                  aggtype);
}

/* `outbox-relay check` must fail with every needle in its output. */
static void expect_check_failure(const char *what, const h_case_t *k, const char *set_pub,
                                 const char *const *needles, const char *const *extra)
{
        const char *sets[10] = {k->set_conn, k->set_kafka, k->set_slot, set_pub, NULL};
        for (int i = 0; extra && extra[i] && i < 4; i++)
                sets[4 + i] = extra[i];
        char *out = NULL, *log = NULL;
        int rc = h_relay_run_cmd("check", NULL, sets, EXIT_BOUND_MS, &out, &log);
        bool all = out != NULL;
        for (int i = 0; all && needles[i]; i++)
                all = strstr(out, needles[i]) != NULL;
        ok(rc != 0 && all, "%s: check fails naming the column (exit %d)", what, rc);
        if (!all)
                tap_diag("check said:\n%s", out ? out : "(nothing)");
        free(out);
        free(log);
}

/* A relay with extra settings streams, one row goes in: the messages in
 * the case's topic afterwards (caller frees with h_msgs_free()). */
static size_t deliver(const char *what, const h_case_t *k, const char *set_pub,
                      const char *const *extra, h_msg_t **msgs)
{
        const char *sets[10] = {k->set_conn, k->set_kafka, k->set_slot, set_pub, NULL};
        for (int i = 0; extra && extra[i] && i < 4; i++)
                sets[4 + i] = extra[i];
        h_relay_t *r = h_relay_start(sets);
        if (ok(h_relay_streams(r, 120000), "%s: the relay streams", what)) {
                insert_tenant_row(k->c, k->aggtype);
                h_relayed_t w;
                h_wait_relayed(k->c, k->slot, k->topic, 1, 120000, &w);
                h_relayed_free(&w);
        }
        is_int(h_relay_stop(r, 60000), 0, "%s: the relay stops cleanly", what);
        h_relay_free(r);
        return h_kafka_consume_all(k->topic, msgs);
}

/*
 * Columns the mapping reads beyond the outbox columns, outbox.headers and
 * the template: a stored generated column as the event timestamp, and as
 * a header placement that table.field.additional.missing = ignore would
 * have dropped silently.
 */
typedef struct {
        const char *what, *column_def;
        const char *sets[4];
        const char *needles[5];
} mapped_case_t;

static const mapped_case_t mapped_cases[] = {
        {"generated event timestamp",
         "created timestamptz GENERATED ALWAYS AS (timestamptz '2001-02-03 04:05:06+00') STORED",
         {"table.field.event.timestamp=created", "errors.policy=stop", NULL},
         {"\"created\"", "table.field.event.timestamp", "generated column", NULL}},
        {"generated header placement",
         "tenant text GENERATED ALWAYS AS (payload->>'tenant') STORED",
         {"table.fields.additional.placement=tenant:header", "table.field.additional.missing=ignore",
          "errors.policy=stop", NULL},
         {"\"tenant\"", "table.fields.additional.placement", "generated column", NULL}},
};

static void mapped_generated(int version)
{
        for (size_t i = 0; i < sizeof(mapped_cases) / sizeof(mapped_cases[0]); i++) {
                const mapped_case_t *m = &mapped_cases[i];
                h_case_t k;
                char set_pub[128];
                h_case_open(&k, "gencol", "slot_gencol", "gencol", 1, H_CASE_BARE);
                make_outbox_with(k.c, m->column_def);
                char *pub = h_unique_name("pub_gencol");
                snprintf(set_pub, sizeof(set_pub), "publication.name=%s", pub);
                h_msg_t *msgs = NULL;
                size_t n = 0;
                if (version < 180000) {
                        /* A row already in the slot when the relay starts. */
                        h_pg_exec(k.c, "CREATE PUBLICATION %s FOR TABLE outbox WITH (publish = "
                                       "'insert')", pub);
                        h_pg_exec(k.c, "SELECT pg_create_logical_replication_slot('%s', "
                                       "'pgoutput')", k.slot);
                        insert_tenant_row(k.c, k.aggtype);
                        expect_refusal(m->what, &k, set_pub, m->needles, m->sets);
                        n = h_kafka_consume_all(k.topic, &msgs);
                        is_int((int64_t)n, 0, "%s: nothing reached Kafka", m->what);
                        for (size_t j = 0; j < n; j++)
                                tap_diag("%s: in Kafka with %zu headers, tenant %s, timestamp "
                                         "%lld", m->what, msgs[j].nheaders,
                                         h_msg_header(&msgs[j], "tenant", NULL) ? "present"
                                                                                : "absent",
                                         (long long)msgs[j].timestamp);
                        expect_check_failure(m->what, &k, set_pub, m->needles, m->sets);
                } else {
                        /* The relay's publication publishes stored ones. */
                        n = deliver(m->what, &k, set_pub, m->sets, &msgs);
                        is_int((int64_t)n, 1, "%s: the event reached Kafka", m->what);
                        const char *tenant = n ? h_msg_header(&msgs[0], "tenant", NULL) : NULL;
                        if (i == 0)
                                is_int(n ? msgs[0].timestamp : 0, 981173106000,
                                       "%s: the event's timestamp is the column's", m->what);
                        else
                                ok(tenant && strcmp(tenant, "acme") == 0,
                                   "%s: the header carries the column's value", m->what);
                        h_pg_exec(k.c, "SELECT pg_drop_replication_slot('%s')", k.slot);
                }
                h_msgs_free(msgs, n);
                h_pg_exec(k.c, "DROP PUBLICATION IF EXISTS %s", pub);
                free(pub);
                h_case_close(&k);
        }
}

/*
 * PostgreSQL 15+: a column list without the event timestamp's column is
 * refused like one without an outbox column; a tracing column and an
 * ignorable placement that the table lacks are no list's fault.
 */
static void mapped_column_list(void)
{
        h_case_t k;
        char set_pub[128];
        h_case_open(&k, "gencol", "slot_gencol", "gencol", 1, H_CASE_BARE);
        make_outbox_with(k.c, "created timestamptz");
        char *pub = h_unique_name("pub_gencol");
        snprintf(set_pub, sizeof(set_pub), "publication.name=%s", pub);
        h_pg_exec(k.c, "CREATE PUBLICATION %s FOR TABLE outbox (id, aggregatetype, aggregateid, "
                       "type, payload) WITH (publish = 'insert')", pub);
        h_pg_exec(k.c, "SELECT pg_create_logical_replication_slot('%s', 'pgoutput')", k.slot);
        insert_tenant_row(k.c, k.aggtype);
        const char *sets[] = {"table.field.event.timestamp=created", "errors.policy=stop", NULL};
        const char *needles[] = {"column list", "\"created\" (table.field.event.timestamp)",
                                 "SET TABLE", NULL};
        expect_refusal("column list without the timestamp column", &k, set_pub, needles, sets);
        is_int(h_kafka_count(k.topic), 0, "column list without the timestamp column: nothing "
                                          "reached Kafka");
        expect_check_failure("column list without the timestamp column", &k, set_pub, needles,
                             sets);
        h_pg_exec(k.c, "SELECT pg_drop_replication_slot('%s')", k.slot);

        /* A timestamp column the table lacks: named as such, not as the list's. */
        const char *typo[] = {"table.field.event.timestamp=createdat", NULL};
        const char *tneedles[] = {"has no column \"createdat\" (table.field.event.timestamp)",
                                  "set table.field.event.timestamp to the column", NULL};
        expect_refusal("timestamp column the table lacks", &k, set_pub, tneedles, typo);
        const char *cneedles[] = {"has no column \"createdat\" (table.field.event.timestamp)",
                                  NULL};
        expect_check_failure("timestamp column the table lacks", &k, set_pub, cneedles, typo);
        h_pg_exec(k.c, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                       "WHERE slot_name = '%s'", k.slot);

        const char *absent[] = {"tracing.span.context.field=tracingspancontext",
                                "table.fields.additional.placement=nosuch:header",
                                "table.field.additional.missing=ignore", NULL};
        h_msg_t *msgs = NULL;
        size_t n = deliver("optional columns the table lacks", &k, set_pub, absent, &msgs);
        is_int((int64_t)n, 1, "optional columns the table lacks: the event reached Kafka");
        h_msgs_free(msgs, n);
        free(pub);
        h_case_close(&k);
}

static void before_18(void)
{
        h_case_t k;
        char set_pub[128];
        char *pub = open_case(&k, set_pub, sizeof(set_pub));

        const char *needles[] = {"\"aggregateid\"", "generated column", "before PostgreSQL 18",
                                 "plain column", NULL};
        expect_refusal("stored generated key", &k, set_pub, needles, NULL);
        ok(!publication_exists(k.c, pub), "no publication was created for a mapping that "
                                          "cannot work");

        /* outbox-relay check says the same. */
        h_pg_exec(k.c, "CREATE PUBLICATION %s FOR TABLE outbox WITH (publish = 'insert')", pub);
        const char *sets[] = {k.set_conn, k.set_kafka, k.set_slot, set_pub, NULL};
        char *out = NULL, *log = NULL;
        int rc = h_relay_run_cmd("check", NULL, sets, EXIT_BOUND_MS, &out, &log);
        ok(rc != 0, "check fails (exit %d)", rc);
        ok(out && strstr(out, "\"aggregateid\"") && strstr(out, "generated column"),
           "check names the generated column");
        if (!(out && strstr(out, "generated column")))
                tap_diag("check said:\n%s", out ? out : "(nothing)");
        free(out);
        free(log);

        /* With the publication there, the relay still refuses before streaming. */
        expect_refusal("stored generated key, publication made by hand", &k, set_pub, needles,
                       NULL);
        is_int(h_kafka_count(k.topic), 0, "nothing reached Kafka");
        free(pub);
        h_case_close(&k);
}

static void on_18(void)
{
        h_case_t k;
        char set_pub[128];
        char *pub = open_case(&k, set_pub, sizeof(set_pub));

        /* A publication without generated columns: refused with the fix. */
        h_pg_exec(k.c, "CREATE PUBLICATION %s FOR TABLE outbox WITH (publish = 'insert')", pub);
        const char *needles[] = {"\"aggregateid\"", "publish_generated_columns = stored", NULL};
        expect_refusal("publication without generated columns", &k, set_pub, needles, NULL);
        h_pg_exec(k.c, "DROP PUBLICATION %s", pub);

        /* The relay's own publication publishes them: the key arrives. */
        const char *sets[] = {k.set_conn, k.set_kafka, k.set_slot, set_pub, NULL};
        h_relay_t *r = h_relay_start(sets);
        if (h_relay_streams(r, 120000)) {
                insert(k.c, k.aggtype, "order-42");
                h_relayed_t w;
                h_wait_relayed(k.c, k.slot, k.topic, 1, 120000, &w);
                is_int(w.in_kafka, 1, "the event reached Kafka");
                const char *keys[] = {"order-42", NULL};
                is_int((int64_t)h_kafka_count_keys(k.topic, keys), 1,
                       "keyed by the generated column's value");
                h_relayed_free(&w);
        } else {
                ok(false, "the relay streams with a generated key column on 18");
        }
        is_int(h_relay_stop(r, 60000), 0, "the relay stops cleanly");
        h_relay_free(r);
        h_pg_exec(k.c, "SELECT pg_drop_replication_slot('%s')", k.slot);
        h_pg_exec(k.c, "DROP PUBLICATION %s", pub);

        /* Virtual (18's default for GENERATED ALWAYS AS): never sent. */
        h_pg_exec(k.c, "DROP TABLE outbox");
        make_outbox(k.c, "VIRTUAL");
        const char *vneedles[] = {"\"aggregateid\"", "virtual generated column", NULL};
        expect_refusal("virtual generated key", &k, set_pub, vneedles, NULL);
        free(pub);
        h_case_close(&k);
}

int main(void)
{
        PGconn *c = h_pg_connect("postgres");
        char *v = h_pg_value(c, "SHOW server_version_num");
        int version = atoi(v);
        free(v);
        PQfinish(c);
        tap_diag("PostgreSQL %d", version);
        if (version < 180000)
                before_18();
        else
                on_18();
        mapped_generated(version);
        if (version >= 150000)
                mapped_column_list();
        return done_testing();
}
