/*
 * 0221-inbox-payloads.c - outbox-inbox and payloads at the edge of what
 * PostgreSQL's text and jsonb accept (real PostgreSQL and Kafka, no relay).
 *
 * inbox.payload = text: a payload with a NUL byte, or one that is not
 * UTF-8 (the test's database is UTF8), can never be received as text; it
 * must be dead-lettered at once (attempts 0), not applied cut at the NUL
 * byte nor retried. A good one is applied as it is.
 *
 * inbox.payload = jsonb: numbers past a C long long or double
 * (123456789012345678901234567890, 1e400) are JSON, and jsonb (numeric)
 * holds them: they must be applied with their digits, not dead-lettered as
 * "not JSON"; so must arrays nested deeper than jansson parses (2048
 * levels) but jsonb does. A string holding \u0000 is JSON that jsonb
 * refuses: it must be dead-lettered at once, not retried.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"

static const char *const handler_sql =
        "CREATE TABLE applied_text (id text PRIMARY KEY, payload text);"
        "CREATE FUNCTION on_text(p_payload text, p_id text) RETURNS void LANGUAGE sql AS "
        "$$ INSERT INTO applied_text VALUES (p_id, p_payload) $$;"
        "CREATE TABLE applied_json (id text PRIMARY KEY, payload jsonb);"
        "CREATE FUNCTION on_json(p_payload jsonb, p_id text) RETURNS void LANGUAGE sql AS "
        "$$ INSERT INTO applied_json VALUES (p_id, p_payload) $$;"
        "CREATE TABLE parent (id int PRIMARY KEY);"
        "CREATE TABLE child (parent int REFERENCES parent DEFERRABLE INITIALLY DEFERRED);"
        "CREATE FUNCTION on_deferred() RETURNS void LANGUAGE sql AS "
        "$$ INSERT INTO child VALUES (42) $$;";

/* A message of a case: its id header and value bytes. */
typedef struct {
        const char *id;
        const char *value;
        size_t len;
} msg_t;

/* A case: messages on a topic of their own and how outbox-inbox runs on it. */
typedef struct {
        const char *payload; /* inbox.payload */
        const char *handler;
        const msg_t *msgs;
        size_t n_msgs;
        const char *applied; /* run until this table holds n_applied rows */
        int n_applied;
        int n_dlq;           /* and the dead-letter topic n_dlq messages (or 60 s) */
        int run_ms;          /* > 0: run this long instead */
        const char *extra;   /* one more --set KEY=VALUE, or NULL */
        const char *const *headers; /* each message's: name, value, ..., NULL; NULL: its id */
        int exit_code;       /* 0: stopped by SIGTERM; else it stops by itself with this */
        const char *needle;  /* counted in its log into found (NULL: not) */
        int found;
} case_t;

/*
 * Produce k's messages to a topic of their own, run outbox-inbox on it as k
 * says, and return the dead-letter topic's messages (*n of them;
 * h_msgs_free()).
 */
static h_msg_t *run_case(PGconn *cc, const char *cdb, const char *suffix, case_t *k, size_t *n)
{
        /* Named after the first message: one topic and group per case. */
        char *topic = fx_fmt("inbox.%s_%s", k->msgs[0].id, suffix);
        char *dlq = fx_fmt("inbox.%s.dlq_%s", k->msgs[0].id, suffix);
        char *ci = h_pg_conninfo(cdb);
        char *count = fx_fmt("SELECT count(*) FROM %s", k->applied);
        h_msg_t *out;
        fx_sets_t s;

        h_kafka_create_topic(topic, 1);
        h_kafka_create_topic(dlq, 1);
        for (size_t i = 0; i < k->n_msgs; i++)
                h_kafka_produce_bytes(topic, "k", k->msgs[i].value, k->msgs[i].len,
                                      k->headers ? k->headers
                                                 : (const char *const[]){"id", k->msgs[i].id,
                                                                         NULL});
        memset(&s, 0, sizeof(s));
        fx_sets_add(&s, "postgres.conninfo=%s", ci);
        fx_sets_add(&s, "kafka.bootstrap.servers=%s", h_kafka_bootstrap());
        fx_sets_add(&s, "inbox.topics=%s", topic);
        fx_sets_add(&s, "inbox.handler=%s", k->handler);
        fx_sets_add(&s, "inbox.payload=%s", k->payload);
        fx_sets_add(&s, "kafka.group.id=inbox-%s-%s", k->msgs[0].id, suffix);
        fx_sets_add(&s, "errors.dlq.topic=%s", dlq);
        fx_sets_add(&s, "errors.backoff.ms=100");
        fx_sets_add(&s, "errors.backoff.max.ms=200");
        fx_sets_add(&s, "reconnect.backoff.ms=200");
        fx_sets_add(&s, "reconnect.backoff.max.ms=800");
        if (k->extra)
                fx_sets_add(&s, "%s", k->extra);
        h_relay_t *ib = h_proc_start(h_env("RELAY_INBOX_BIN"), NULL, NULL, s.v);
        int64_t deadline = h_now_ms() + (k->run_ms > 0 ? k->run_ms : 60000);
        int rc = -1;
        while ((k->run_ms > 0 || h_pg_number(cc, count) < k->n_applied ||
                h_kafka_count(dlq) < k->n_dlq) &&
               h_now_ms() < deadline && (rc = h_relay_wait(ib, 0)) < 0)
                h_sleep_ms(200);
        if (rc < 0) {
                h_sleep_ms(500); /* a message still being retried would show in its attempts */
                h_relay_signal(ib, SIGTERM);
                rc = h_relay_wait(ib, 60000);
        }
        is_int(rc, k->exit_code, "outbox-inbox (first message %s) exits %d", k->msgs[0].id,
               k->exit_code);
        if (rc != k->exit_code)
                h_relay_diag_log(ib);
        if (k->needle)
                k->found = fx_log_count(ib, k->needle);
        *n = h_kafka_consume_all(dlq, &out);
        h_relay_free(ib);
        fx_sets_free(&s);
        h_kafka_delete_topic(topic);
        h_kafka_delete_topic(dlq);
        free(count);
        free(ci);
        free(topic);
        free(dlq);
        return out;
}

/* The dead-letter copy of message id: 1 when its attempts and error message
 * are as expected, 0 when not (diagnosed), -1 when there is none. */
static int dead_lettered(const h_msg_t *msgs, size_t n, const char *id, const char *attempts,
                         const char *why_has)
{
        for (size_t i = 0; i < n; i++) {
                size_t l;
                const char *mid = h_msg_header(&msgs[i], "id", &l);
                if (!mid || strcmp(mid, id) != 0)
                        continue;
                const char *why = h_msg_header(&msgs[i], "outbox.inbox.error.message", &l);
                const char *att = h_msg_header(&msgs[i], "outbox.inbox.error.attempts", &l);
                tap_diag("dead-lettered %s: attempts %s: %s", id, att ? att : "?",
                         why ? why : "?");
                return why && att && strcmp(att, attempts) == 0 && strstr(why, why_has) ? 1 : 0;
        }
        return -1;
}

static void text_payloads(PGconn *cc, const char *cdb, const char *suffix)
{
        static const msg_t msgs[] = {
                {"t-nul", "ab\0cd", 5}, {"t-latin1", "caf\xe9", 4}, {"t-good", "plain text", 10}};
        case_t k = {.payload = "text", .handler = "SELECT on_text($3, $7)", .msgs = msgs,
                    .n_msgs = 3, .applied = "applied_text", .n_applied = 1, .n_dlq = 2};
        size_t n;
        h_msg_t *dl = run_case(cc, cdb, suffix, &k, &n);

        is_int((int)h_pg_number(cc, "SELECT count(*) FROM applied_text WHERE id = 't-nul'"), 0,
               "a text payload with a NUL byte is not applied (cut at the NUL byte)");
        is_int((int)h_pg_number(cc, "SELECT count(*) FROM applied_text "
                             "WHERE id = 't-good' AND payload = 'plain text'"),
               1, "a good text payload is applied as it is");
        is_int((int)h_pg_number(cc, "SELECT count(*) FROM applied_text"), 1, "nothing else is applied");
        is_int((int)n, 2, "two messages in the dead-letter topic");
        is_int(dead_lettered(dl, n, "t-nul", "0", "holds a NUL byte"), 1,
               "the payload with a NUL byte is dead-lettered at once, the message says why");
        is_int(dead_lettered(dl, n, "t-latin1", "0", "not UTF-8 text"), 1,
               "the payload that is not UTF-8 is dead-lettered at once, not retried");
        h_msgs_free(dl, n);
}

static void json_payloads(PGconn *cc, const char *cdb, const char *suffix)
{
        /* Arrays nested 3000 deep: past jansson's limit (2048), well within
         * jsonb's (max_stack_depth). */
        enum { DEPTH = 3000 };
        static char deep[2 * DEPTH + 1];
        memset(deep, '[', DEPTH);
        memset(deep + DEPTH, ']', DEPTH);
#define M(id, v) {id, v, sizeof(v) - 1}
        const msg_t msgs[] = {M("j-bigint", "{\"n\": 123456789012345678901234567890}"),
                              M("j-bigreal", "{\"x\": 1e400}"),
                              M("j-nul", "{\"s\": \"a\\u0000b\"}"),
                              M("j-good", "{\"ok\": true}"),
                              {"j-deep", deep, 2 * DEPTH}};
#undef M
        case_t k = {.payload = "jsonb", .handler = "SELECT on_json($3, $7)", .msgs = msgs,
                    .n_msgs = 5, .applied = "applied_json", .n_applied = 4, .n_dlq = 1};
        size_t n;
        h_msg_t *dl = run_case(cc, cdb, suffix, &k, &n);

        is_int((int)h_pg_number(cc, "SELECT count(*) FROM applied_json WHERE id = 'j-bigint' "
                             "AND payload->>'n' = '123456789012345678901234567890'"),
               1, "an integer past 64 bits is JSON: applied with its digits");
        is_int((int)h_pg_number(cc, "SELECT count(*) FROM applied_json WHERE id = 'j-bigreal' "
                             "AND (payload->>'x')::numeric = 1e400"),
               1, "a number past a double is JSON: applied with its value");
        is_int((int)h_pg_number(cc, "SELECT count(*) FROM applied_json WHERE id = 'j-good'"), 1,
               "a plain JSON payload is applied");
        is_int((int)h_pg_number(cc, "SELECT count(*) FROM applied_json WHERE id = 'j-deep' "
                             "AND jsonb_typeof(payload) = 'array'"),
               1, "arrays nested 3000 deep are JSON jsonb holds: applied, not dead-lettered");
        is_int((int)h_pg_number(cc, "SELECT count(*) FROM applied_json"), 4, "nothing else is applied");
        is_int((int)n, 1, "one message in the dead-letter topic");
        is_int(dead_lettered(dl, n, "j-nul", "0", "\\u0000"), 1,
               "the payload with \\u0000 (which jsonb refuses) is dead-lettered at once");
        h_msgs_free(dl, n);
}

/*
 * A handler that ends its own session: the connection is lost during the
 * message every time. That counts as no attempt (not the handler's fault),
 * but the retry must wait reconnect.backoff.ms, doubling, as a failed
 * connect does, not reconnect and retry at once, over and over.
 */
static void lost_connection(PGconn *cc, const char *cdb, const char *suffix)
{
        static const msg_t msgs[] = {{"c-kill", "{\"kill\": 1}", 11}};
        case_t k = {.payload = "bytea",
                    .handler = "SELECT pg_terminate_backend(pg_backend_pid())",
                    .msgs = msgs, .n_msgs = 1, .applied = "inbox", .run_ms = 4000,
                    .needle = "lost the PostgreSQL connection"};
        size_t n;
        h_msg_t *dl = run_case(cc, cdb, suffix, &k, &n);
        int lost = k.found;

        tap_diag("connection lost %d times in 4 s (reconnect.backoff.ms 200, max 800)", lost);
        ok(lost >= 1 && lost <= 10,
           "a lost connection is retried after the reconnect backoff, not at once (%d in 4 s)",
           lost);
        is_int((int)h_pg_number(cc, "SELECT count(*) FROM inbox WHERE message_id = 'c-kill'"), 0,
               "the message is not in the inbox");
        is_int((int)n, 0, "nor dead-lettered");
        h_msgs_free(dl, n);
}

/*
 * A handler whose effect fails at COMMIT (a deferred foreign key): the
 * failed COMMIT has ended the transaction, so no ROLLBACK follows it (the
 * server would warn "there is no transaction in progress" at each
 * attempt, a line that misleads); retried, then dead-lettered.
 */
static void commit_fails(PGconn *cc, const char *cdb, const char *suffix)
{
        static const msg_t msgs[] = {{"d-fk", "{\"fk\": 1}", 9}};
        case_t k = {.payload = "bytea", .handler = "SELECT on_deferred()", .msgs = msgs,
                    .n_msgs = 1, .applied = "inbox", .n_dlq = 1,
                    .needle = "there is no transaction in progress", .found = -1};
        size_t n;
        h_msg_t *dl = run_case(cc, cdb, suffix, &k, &n);

        is_int(k.found, 0, "no \"there is no transaction in progress\" warning");
        is_int((int)n, 1, "the message is dead-lettered");
        is_int(dead_lettered(dl, n, "d-fk", "4", "COMMIT"), 1,
               "after 1 + 3 attempts, each failing at COMMIT");
        h_msgs_free(dl, n);
}

/*
 * A dead-letter copy above the dead-letter producer's kafka.message.max.bytes
 * (here 1000 bytes; librdkafka's default is 1000000, below what a broker
 * takes by default): outbox-inbox stops before the message (exit 4), and
 * the message must name the limit to raise, not blame the broker.
 */
static void dlq_too_large(PGconn *cc, const char *cdb, const char *suffix)
{
        static char big[2000];
        memset(big, 'x', sizeof(big)); /* not JSON: dead-lettered at once */
        msg_t msgs[] = {{"l-big", big, sizeof(big)}};
        case_t k = {.payload = "jsonb", .handler = "SELECT 1", .msgs = msgs, .n_msgs = 1,
                    .applied = "inbox", .n_dlq = 1, .extra = "kafka.message.max.bytes=1000",
                    .exit_code = 4, .needle = "raise kafka.message.max.bytes"};
        size_t n;
        h_msg_t *dl = run_case(cc, cdb, suffix, &k, &n);

        is_int(k.found, 1, "the message names kafka.message.max.bytes as the limit to raise");
        is_int((int)n, 0, "nothing reached the dead-letter topic");
        h_msgs_free(dl, n);
}

/*
 * A LATIN1 database: a JSON payload's UTF-8 ("caf\xc3\xa9") must arrive as
 * its characters, converted by the server, not as its bytes read as LATIN1
 * (five characters: c, a, f, A with tilde, copyright sign).
 */
static void latin1_database(const char *suffix)
{
        static const char v[] = "{\"name\": \"caf\xc3\xa9\"}";
        const msg_t msgs[] = {{"e-latin1", v, sizeof(v) - 1}};
        char *db = h_unique_name("inboxl1");
        PGconn *pc = h_pg_connect("postgres");

        h_pg_exec(pc, "CREATE DATABASE %s ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' "
                      "TEMPLATE template0",
                  db);
        PQfinish(pc);
        PGconn *lc = h_pg_connect(db);
        h_pg_exec_file(lc, "006_inbox.sql");
        h_pg_exec(lc, "%s", handler_sql);
        case_t k = {.payload = "jsonb", .handler = "SELECT on_json($3, $7)", .msgs = msgs,
                    .n_msgs = 1, .applied = "applied_json", .n_applied = 1};
        size_t n;
        h_msg_t *dl = run_case(lc, db, suffix, &k, &n);

        char *got = h_pg_value(lc, "SELECT encode(convert_to(payload->>'name', 'UTF8'), 'hex') "
                                   "FROM applied_json WHERE id = 'e-latin1'");
        is_str(got ? got : "(none)", "636166c3a9",
               "in a LATIN1 database UTF-8 \"caf\\xc3\\xa9\" is stored as its characters");
        free(got);
        h_msgs_free(dl, n);
        PQfinish(lc);
        h_pg_drop_db(db);
        free(db);
}

/*
 * An inbox_accept() that answers no row, or NULL, instead of one boolean
 * (a SETOF function, a bad edit): PostgreSQL ran it without error, so
 * there is no server message to quote. Under errors.policy=stop the inbox
 * must stop before the message (exit 4) naming what came back and the
 * fix, not with an empty reason; and a NULL must not be read as "already
 * applied", which would skip the message for good.
 */
static void accept_answers(const char *suffix, const char *body, const char *id,
                           const char *needle)
{
        const msg_t msgs[] = {{id, "{\"a\": 1}", 8}};
        char *db = h_unique_name("inboxa");
        PGconn *pc = h_pg_connect("postgres");
        h_pg_exec(pc, "CREATE DATABASE %s", db);
        PQfinish(pc);
        PGconn *ac = h_pg_connect(db);
        h_pg_exec(ac, "CREATE TABLE seen (id text)");
        h_pg_exec(ac,
                  "CREATE FUNCTION inbox_accept(p_message_id text, p_topic text, p_partition "
                  "integer, p_offset bigint) %s",
                  body);
        case_t k = {.payload = "jsonb", .handler = "INSERT INTO seen VALUES ($7)", .msgs = msgs,
                    .n_msgs = 1, .applied = "seen", .run_ms = 30000,
                    .extra = "errors.policy=stop", .exit_code = 4, .needle = needle};
        size_t n;
        h_msg_t *dl = run_case(ac, db, suffix, &k, &n);
        ok(k.found >= 1, "the stop names what inbox_accept() returned (\"%s\")", needle);
        is_int((int)h_pg_number(ac, "SELECT count(*) FROM seen"), 0, "the handler did not run");
        h_msgs_free(dl, n);
        PQfinish(ac);
        h_pg_drop_db(db);
        free(db);
}

/* The values of header name in m, in order, joined by "|" into buf. */
static const char *all_values(const h_msg_t *m, const char *name, char *buf, size_t len)
{
        size_t at = 0;
        buf[0] = '\0';
        for (size_t i = 0; i < m->nheaders && at + 1 < len; i++)
                if (strcmp(m->header_names[i], name) == 0) {
                        int w = snprintf(buf + at, len - at, "%s%.*s", at ? "|" : "",
                                         (int)m->header_lens[i], m->header_values[i]);
                        if (w < 0)
                                break;
                        at += (size_t)w;
                }
        return buf;
}

/*
 * A message that is itself a dead-letter copy (it carries
 * outbox.inbox.error.* headers) and fails again: as Kafka Connect's
 * DeadLetterQueueReporter (populateContextHeaders: headers.add on the
 * original's headers), the copy keeps the earlier error headers and adds
 * its own after them, so the LAST of each name is this failure's (Java's
 * Headers.lastHeader, librdkafka's rd_kafka_header_get_last) and the
 * earlier ones stay as history.
 */
static void dead_letter_again(PGconn *cc, const char *cdb, const char *suffix)
{
        static const char *const hdrs[] = {"id", "r-again",
                                           "outbox.inbox.error.message", "an earlier reason",
                                           "outbox.inbox.error.attempts", "9", NULL};
        const msg_t msgs[] = {{"r-again", "ab\0cd", 5}};
        case_t k = {.payload = "text", .handler = "SELECT on_text($3, $7)", .msgs = msgs,
                    .n_msgs = 1, .applied = "applied_text", .n_dlq = 1, .headers = hdrs};
        size_t n;
        char buf[512];
        h_msg_t *dl = run_case(cc, cdb, suffix, &k, &n);

        is_int((int)n, 1, "the copy of a copy is dead-lettered");
        if (n == 1) {
                all_values(&dl[0], "outbox.inbox.error.message", buf, sizeof(buf));
                tap_diag("outbox.inbox.error.message values: %s", buf);
                const char *bar = strchr(buf, '|');
                ok(strncmp(buf, "an earlier reason|", 18) == 0 && bar &&
                           strstr(bar, "holds a NUL byte") && !strchr(bar + 1, '|'),
                   "the earlier reason stays first, this failure's comes last");
                is_str(all_values(&dl[0], "outbox.inbox.error.attempts", buf, sizeof(buf)), "9|0",
                       "attempts: the earlier 9, then this failure's 0");
        }
        h_msgs_free(dl, n);
}

int main(void)
{
        char *suffix = h_unique_name("ip");
        char *cdb = h_pg_create_db("inboxp");
        PGconn *cc = h_pg_connect(cdb);

        h_pg_exec_file(cc, "006_inbox.sql");
        h_pg_exec(cc, "%s", handler_sql);
        text_payloads(cc, cdb, suffix);
        dead_letter_again(cc, cdb, suffix);
        json_payloads(cc, cdb, suffix);
        lost_connection(cc, cdb, suffix);
        commit_fails(cc, cdb, suffix);
        dlq_too_large(cc, cdb, suffix);
        latin1_database(suffix);
        accept_answers(suffix, "RETURNS SETOF boolean LANGUAGE sql AS $$ SELECT true WHERE false $$",
                       "a-norow", "inbox_accept() returned no row instead of one true or false");
        accept_answers(suffix, "RETURNS boolean LANGUAGE sql AS $$ SELECT NULL::boolean $$",
                       "a-null", "inbox_accept() returned NULL instead of one true or false");
        PQfinish(cc);
        h_pg_drop_db(cdb);
        free(cdb);
        free(suffix);
        return done_testing();
}
