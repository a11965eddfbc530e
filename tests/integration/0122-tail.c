/*
 * 0122-tail.c - `outbox-relay tail` prints what the relay would publish,
 * from a temporary slot, without Kafka and without touching the real slot.
 *
 *   - tail runs with no kafka.bootstrap.servers; while it runs the server
 *     has exactly one temporary slot, named after tail's pid;
 *   - six events in two transactions (one of them also writes a row of
 *     another table, and one row is deleted in its own transaction): the
 *     JSON lines are those six, in commit order, each with the id, key,
 *     topic, type header and payload inserted, and the commit LSN of its
 *     transaction;
 *   - a bytea payload that is not UTF-8 arrives as valid JSON, under
 *     payload_base64, decoding to the bytes inserted;
 *   - outbox.source = both: a transaction with an outbox row and a
 *     transactional message with the prefix gives two lines, in that order,
 *     with the message's topic, key, id, type and payload and the same
 *     commit LSN; a message of another prefix and a non-transactional one
 *     (written before it) give none, as with the relay;
 *   - a row the mapping refuses, whose message cuts a character in two,
 *     gives a line that parses, with the message under "error" (bytes
 *     that are not UTF-8 as '?'), and tail goes on to the next row;
 *   - SIGTERM ends tail with exit 0; the temporary slot is gone, and the
 *     real slot (created beforehand) has not moved: pg_replication_slots
 *     holds the same rows of the test's database before and after;
 *   - a server that refuses the connection is not usable: exit 3, as the
 *     manual says (1 is for a stream that breaks);
 *   - SIGTERM while tail creates its slot, which waits for a transaction
 *     held open, ends it with exit 0 (one signal, not a second one's 1);
 *   - a reader that stops reading (`tail | head -n 1`) ends tail with exit
 *     0 and no error (it used to say "could not write to standard output:
 *     Broken pipe" and exit 1), and its temporary slot is gone.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "harness.h"

#define NEVENTS 6

/* All slots of this test's database (the other tests run beside it, with
 * their own) as one string: name, temporary, restart and confirmed LSN. */
static char *slots_snapshot(PGconn *c)
{
        char *v = h_pg_value(c, "SELECT coalesce(string_agg(slot_name || ' ' || temporary || ' ' || "
                                "restart_lsn || ' ' || confirmed_flush_lsn, '; ' ORDER BY slot_name), "
                                "'') FROM pg_replication_slots WHERE database = current_database()");
        return v ? v : strdup("");
}

static int count_lines(const char *s)
{
        int n = 0;
        for (; s && *s; s++)
                n += *s == '\n';
        return n;
}

/* Start tail and wait until it streams; NULL (diagnosed) when it does not. */
static h_relay_t *start_tail(const char *what, const char *const *sets)
{
        h_relay_t *t = h_relay_start_cmd("tail", NULL, sets);
        if (!ok(h_relay_wait_log(t, "tailing publication", 30000), "%s: tail streams", what)) {
                h_relay_diag_log(t);
                h_relay_free(t);
                return NULL;
        }
        return t;
}

/* Wait until tail printed n lines; its output. */
static char *wait_lines(h_relay_t *t, int n)
{
        int64_t deadline = h_now_ms() + 20000;
        for (;;) {
                char *out = h_relay_stdout(t);
                if (count_lines(out) >= n || h_now_ms() > deadline)
                        return out;
                free(out);
                h_sleep_ms(50);
        }
}

static const char *jstr(json_t *o, const char *key)
{
        const char *s = json_string_value(json_object_get(o, key));
        return s ? s : "";
}

static const char *header(json_t *o, const char *name)
{
        json_t *h;
        size_t i;
        json_array_foreach(json_object_get(o, "headers"), i, h) {
                if (strcmp(jstr(h, "name"), name) == 0)
                        return jstr(h, "value");
        }
        return "(none)";
}

static void case_events(PGconn *c, const char *set_conn, const char *slot)
{
        char set_slot[128];
        snprintf(set_slot, sizeof(set_slot), "slot.name=%s", slot);
        /* No kafka.bootstrap.servers: tail needs none. */
        const char *sets[] = {set_conn, set_slot, NULL};
        char *before = slots_snapshot(c);

        h_relay_t *t = start_tail("events", sets);
        if (!t) {
                free(before);
                return;
        }
        char want_slot[64];
        snprintf(want_slot, sizeof(want_slot), "outbox_relay_tail_%ld", (long)h_relay_pid(t));
        char *tmp = h_pg_value(c, "SELECT string_agg(slot_name, ',') FROM pg_replication_slots "
                                  "WHERE temporary AND database = current_database()");
        is_str(tmp, want_slot, "while tail runs, its temporary slot is the only temporary one in its database");
        free(tmp);

        /* Two transactions; the ids come back in insertion order. */
        char *ids[NEVENTS], *lsns[2];
        for (int txn = 0; txn < 2; txn++) {
                h_pg_exec(c, "BEGIN");
                if (txn == 1)
                        h_pg_exec(c, "INSERT INTO other VALUES (1)");
                for (int i = 0; i < NEVENTS / 2; i++) {
                        int k = txn * (NEVENTS / 2) + i;
                        ids[k] = h_pg_value(c,
                                            "INSERT INTO outbox (id, aggregatetype, aggregateid, "
                                            "type, payload) VALUES (gen_random_uuid(), 'tail%d', "
                                            "'agg-%d', 'Type%d', '{\"n\": %d, \"s\": \"é\"}') RETURNING id",
                                            k % 2, k, k, k);
                }
                h_pg_exec(c, "COMMIT");
                /* The commit's position: the WAL end right after it is past it. */
                lsns[txn] = h_pg_value(c, "SELECT pg_current_wal_lsn()");
        }
        /* Deleted in its own transaction: not an insert, no line. */
        h_pg_exec(c, "DELETE FROM outbox WHERE id = '%s'", ids[0]);

        char *out = wait_lines(t, NEVENTS);
        h_relay_signal(t, SIGTERM);
        int rc = h_relay_wait(t, 10000);
        is_int(rc, 0, "SIGTERM ends tail with exit 0");
        free(out);
        out = h_relay_stdout(t);
        is_int(count_lines(out), NEVENTS, "tail printed %d lines", NEVENTS);

        char *line = out;
        bool fields = true, parsed = true, order = true;
        char prev_commit[32] = "";
        for (int k = 0; k < NEVENTS && line && *line; k++) {
                char *nl = strchr(line, '\n');
                if (nl)
                        *nl = '\0';
                json_error_t jerr;
                json_t *o = json_loads(line, 0, &jerr);
                if (!o) {
                        parsed = false;
                        tap_diag("line %d does not parse (%s): %s", k + 1, jerr.text, line);
                        line = nl ? nl + 1 : NULL;
                        continue;
                }
                char topic[64], key[32], type[32], payload[64];
                snprintf(topic, sizeof(topic), "outbox.event.tail%d", k % 2);
                snprintf(key, sizeof(key), "agg-%d", k);
                snprintf(type, sizeof(type), "Type%d", k);
                /* jsonb's text output of what was inserted. */
                snprintf(payload, sizeof(payload), "{\"n\": %d, \"s\": \"é\"}", k);
                bool good = strcmp(jstr(o, "topic"), topic) == 0 && strcmp(jstr(o, "key"), key) == 0 &&
                            strcmp(header(o, "id"), ids[k]) == 0 &&
                            strcmp(header(o, "type"), type) == 0 &&
                            strcmp(jstr(o, "payload"), payload) == 0 &&
                            json_object_get(o, "error") == NULL && jstr(o, "commit_time")[0] != '\0';
                if (!good) {
                        fields = false;
                        tap_diag("line %d: %s", k + 1, line);
                        tap_diag("  want topic %s key %s id %s type %s payload %s", topic, key,
                                 ids[k], type, payload);
                }
                /* Each transaction's commit LSN is before the WAL end read after it. */
                const char *commit = jstr(o, "commit_lsn");
                char *before_end = h_pg_value(c, "SELECT '%s'::pg_lsn < '%s'::pg_lsn AND '%s'::pg_lsn "
                                                 "< '%s'::pg_lsn",
                                              jstr(o, "lsn"), commit, commit, lsns[k / (NEVENTS / 2)]);
                if (!before_end || strcmp(before_end, "t") != 0 ||
                    (k % (NEVENTS / 2) != 0 && strcmp(prev_commit, commit) != 0)) {
                        order = false;
                        tap_diag("line %d: lsn %s commit_lsn %s, WAL end after commit %s", k + 1,
                                 jstr(o, "lsn"), commit, lsns[k / (NEVENTS / 2)]);
                }
                free(before_end);
                snprintf(prev_commit, sizeof(prev_commit), "%s", commit);
                json_decref(o);
                line = nl ? nl + 1 : NULL;
        }
        ok(parsed, "every line parses as JSON");
        ok(fields, "each line holds the id, key, topic, type and payload inserted, in commit order");
        ok(order, "each line's lsn and commit_lsn are its transaction's");
        if (!parsed || !fields)
                h_relay_diag_log(t);
        free(out);
        h_relay_free(t);

        /* The server drops the slot as the walsender exits, just after tail does. */
        int64_t t0 = h_now_ms();
        for (;;) {
                char *n = h_pg_value(c, "SELECT count(*) FROM pg_replication_slots WHERE temporary "
                                        "AND database = current_database()");
                bool gone = n && strcmp(n, "0") == 0;
                free(n);
                if (gone || h_now_ms() - t0 > 10000)
                        break;
                h_sleep_ms(50);
        }
        char *after = slots_snapshot(c);
        is_str(after, before, "after tail: pg_replication_slots is as before (temporary slot gone, "
                              "real slot not moved)");
        free(after);
        free(before);
        for (int k = 0; k < NEVENTS; k++)
                free(ids[k]);
        free(lsns[0]);
        free(lsns[1]);
}

static void case_bytes(PGconn *c, const char *set_conn)
{
        h_pg_exec(c, "CREATE TABLE outbox_bin (id uuid PRIMARY KEY, aggregatetype text NOT NULL, "
                     "aggregateid text NOT NULL, type text NOT NULL, payload bytea)");
        h_pg_exec(c, "CREATE PUBLICATION pub_bin FOR TABLE outbox_bin WITH (publish = 'insert')");
        const char *sets[] = {set_conn, "outbox.table=outbox_bin", "publication.name=pub_bin", NULL};
        h_relay_t *t = start_tail("bytea", sets);
        if (!t)
                return;
        h_pg_exec(c, "INSERT INTO outbox_bin VALUES (gen_random_uuid(), 'bin', 'k', 'T', "
                     "'\\xff00fe41'::bytea)");
        char *out = wait_lines(t, 1);
        h_relay_signal(t, SIGTERM);
        is_int(h_relay_wait(t, 10000), 0, "bytea: SIGTERM ends tail with exit 0");
        json_error_t jerr;
        json_t *o = json_loads(out, JSON_DISABLE_EOF_CHECK, &jerr);
        ok(o != NULL, "bytea: the line is valid JSON");
        /* ff 00 fe 41 in base64 */
        is_str(o ? jstr(o, "payload_base64") : "", "/wD+QQ==",
               "bytea: a payload that is not UTF-8 is under payload_base64, the bytes inserted");
        ok(o && json_object_get(o, "payload") == NULL, "bytea: no plain payload field then");
        if (!o)
                tap_diag("stdout: %s", out);
        json_decref(o);
        free(out);
        h_relay_free(t);
}

static json_t *line_json(const char *line, int k)
{
        json_error_t jerr;
        json_t *o = json_loadb(line, strcspn(line, "\n"), 0, &jerr);
        if (!o)
                tap_diag("line %d does not parse (%s)", k, jerr.text);
        return o;
}

/* Wait for tail's two lines, end it with SIGTERM (exit 0), and parse them
 * into *a and *b (NULL when missing or not JSON); its stdout, to free. */
static char *end_two_lines(h_relay_t *t, const char *what, const char *lines, json_t **a,
                           json_t **b)
{
        free(wait_lines(t, 2));
        h_relay_signal(t, SIGTERM);
        is_int(h_relay_wait(t, 10000), 0, "%s: SIGTERM ends tail with exit 0", what);
        char *out = h_relay_stdout(t);
        is_int(count_lines(out), 2, "%s: two lines, %s", what, lines);
        char *second = strchr(out, '\n');
        *a = line_json(out, 1);
        *b = second ? line_json(second + 1, 2) : NULL;
        return out;
}

static void case_messages(PGconn *c, const char *set_conn)
{
        const char *sets[] = {set_conn, "outbox.source=both", NULL};
        h_relay_t *t = start_tail("messages", sets);
        if (!t)
                return;
        /* Not the relay's: another prefix, and a message outside any transaction. */
        h_pg_exec(c, "SELECT pg_logical_emit_message(true, 'other', '{\"id\": \"foreign\", "
                     "\"aggregatetype\": \"tailm\", \"aggregateid\": \"x\", \"type\": \"T\"}')");
        h_pg_exec(c, "SELECT pg_logical_emit_message(false, 'outbox', '{\"id\": \"nontx\", "
                     "\"aggregatetype\": \"tailm\", \"aggregateid\": \"x\", \"type\": \"T\"}')");
        h_pg_exec(c, "BEGIN");
        char *row = h_pg_value(c, "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                                  "VALUES (gen_random_uuid(), 'tailm', 'agg-row', 'RowType', "
                                  "'{}') RETURNING id");
        h_pg_exec(c, "SELECT pg_logical_emit_message(true, 'outbox', '{\"id\": \"msg-1\", "
                     "\"aggregatetype\": \"tailm\", \"aggregateid\": \"agg-msg\", "
                     "\"type\": \"MsgType\", \"payload\": \"hello\"}')");
        h_pg_exec(c, "COMMIT");
        json_t *a, *b;
        char *out = end_two_lines(t, "messages", "the row and our transactional message", &a, &b);
        is_str(a ? header(a, "id") : "", row ? row : "?", "messages: the row's line comes first");
        is_str(b ? jstr(b, "topic") : "", "outbox.event.tailm", "messages: the message's topic");
        is_str(b ? jstr(b, "key") : "", "agg-msg", "messages: its key is its aggregateid");
        is_str(b ? header(b, "id") : "", "msg-1", "messages: its id header");
        is_str(b ? header(b, "type") : "", "MsgType", "messages: its type header");
        is_str(b ? jstr(b, "payload") : "", "hello", "messages: its payload");
        ok(a && b && json_object_get(b, "error") == NULL &&
                   strcmp(jstr(a, "commit_lsn"), jstr(b, "commit_lsn")) == 0,
           "messages: no error, and both carry their transaction's commit LSN");
        if (!a || !b)
                tap_diag("stdout: %s", out);
        json_decref(a);
        json_decref(b);
        free(out);
        free(row);
        h_relay_free(t);
}

/*
 * A row the mapping refuses gets a line with the relay's message under
 * "error". The message quotes the bad topic cut to 300 bytes, here in the
 * middle of an "é": tail built the line from it unchecked, jansson refused
 * the invalid UTF-8, and tail stopped with "out of memory" (exit 1).
 */
static void case_error_not_utf8(PGconn *c, const char *set_conn)
{
        const char *sets[] = {set_conn, NULL};
        h_relay_t *t = start_tail("error", sets);
        if (!t)
                return;
        /* topic "outbox.event." (13 bytes) + 200 "é": cut at 300, byte 287 of
         * the "é"s, the first half of one. */
        h_pg_exec(c, "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES "
                     "(gen_random_uuid(), repeat('é', 200), 'agg-bad', 'T', '{}')");
        char *good = h_pg_value(c, "INSERT INTO outbox (id, aggregatetype, aggregateid, type, "
                                   "payload) VALUES (gen_random_uuid(), 'tailerr', 'agg-good', "
                                   "'T', '{}') RETURNING id");
        json_t *a, *b;
        char *out = end_two_lines(t, "error", "the refused row and the next one", &a, &b);
        const char *e = a ? jstr(a, "error") : "";
        ok(strncmp(e, "invalid Kafka topic name \"outbox.event.é", 41) == 0,
           "error: the refused row's line parses and its error names the topic");
        ok(a && json_object_get(a, "topic") == json_null() && strcmp(jstr(a, "key"), "agg-bad") == 0,
           "error: it has no topic and the row's key");
        is_str(b ? header(b, "id") : "", good ? good : "?", "error: the next row follows");
        if (!a || !b) {
                tap_diag("stdout: %s", out);
                h_relay_diag_log(t);
        }
        json_decref(a);
        json_decref(b);
        free(out);
        free(good);
        h_relay_free(t);
}

static void case_unreachable(void)
{
        const char *sets[] = {"postgres.conninfo=host=127.0.0.1 port=1 dbname=x connect_timeout=5",
                              NULL};
        char *out = NULL, *log = NULL;
        int rc = h_relay_run_cmd("tail", NULL, sets, 30000, &out, &log);
        is_int(rc, 3, "unreachable: tail exits 3 when the server refuses the connection");
        ok(strstr(log, "could not connect to PostgreSQL") != NULL, "unreachable: the error says so");
        if (rc != 3)
                tap_diag("log: %s", log);
        free(out);
        free(log);
}

static void case_stop_while_creating(const char *db, const char *set_conn)
{
        const char *sets[] = {set_conn, NULL};
        PGconn *holder = h_pg_connect(db), *c = h_pg_connect(db);
        h_pg_exec(holder, "BEGIN");
        h_pg_exec(holder, "SELECT pg_current_xact_id()");
        h_relay_t *t = h_relay_start_cmd("tail", NULL, sets);
        int64_t deadline = h_now_ms() + 30000;
        bool waits;
        while (!(waits = h_pg_slot_creation_waits(c, db)) && h_now_ms() < deadline)
                h_sleep_ms(100);
        ok(waits, "stop: tail's slot waits for the open transaction");
        h_relay_signal(t, SIGTERM);
        int rc = h_relay_wait(t, 30000);
        is_int(rc, 0, "stop: SIGTERM ends tail with exit 0 while the transaction is still open");
        if (rc != 0)
                h_relay_diag_log(t);
        h_relay_free(t);
        h_pg_exec(holder, "COMMIT");
        PQfinish(holder);
        PQfinish(c);
}

/* Insert one event in its own transaction. */
static void insert_one(PGconn *c, const char *agg)
{
        h_pg_exec(c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES "
                  "(gen_random_uuid(), 'tailpipe', '%s', 'T', '{}')",
                  agg);
}

static void case_reader_gone(PGconn *c, const char *set_conn)
{
        const char *sets[] = {set_conn, NULL};
        int fds[2];
        if (pipe(fds) != 0 || fcntl(fds[0], F_SETFD, FD_CLOEXEC) != 0 ||
            fcntl(fds[1], F_SETFD, FD_CLOEXEC) != 0)
                tap_bail("could not make a pipe");
        h_relay_t *t = h_proc_start_out(h_env("RELAY_BIN"), "tail", NULL, sets, fds[1]);
        close(fds[1]);
        if (!ok(h_relay_wait_log(t, "tailing publication", 30000), "reader gone: tail streams")) {
                h_relay_diag_log(t);
                h_relay_free(t);
                close(fds[0]);
                return;
        }
        char name[64];
        snprintf(name, sizeof(name), "outbox_relay_tail_%ld", (long)h_relay_pid(t));
        insert_one(c, "pipe-1");
        /* head -n 1: read the first line, then go away. */
        FILE *in = fdopen(fds[0], "r");
        char line[4096];
        bool got = in && fgets(line, sizeof(line), in) != NULL;
        ok(got && strstr(line, "pipe-1") != NULL, "reader gone: the reader got the first event");
        if (in)
                fclose(in);
        else
                close(fds[0]);
        /* The next line meets a pipe nobody reads. */
        insert_one(c, "pipe-2");
        int rc = h_relay_wait(t, 30000);
        is_int(rc, 0, "reader gone: tail ends with exit 0");
        char *log = h_relay_log(t);
        ok(!strstr(log, "error"), "reader gone: no error is said");
        if (rc != 0 || strstr(log, "error"))
                h_relay_diag_log(t);
        free(log);
        h_relay_free(t);
        /* The server drops the temporary slot as the walsender exits. */
        int64_t deadline = h_now_ms() + 20000;
        char *n;
        while ((n = h_pg_value(c, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = "
                                  "'%s'",
                               name)) != NULL &&
               strcmp(n, "0") != 0 && h_now_ms() < deadline) {
                free(n);
                h_sleep_ms(100);
        }
        is_str(n ? n : "?", "0", "reader gone: its temporary slot is gone");
        free(n);
}

int main(void)
{
        char *db = h_pg_create_db("tail");
        char *slot = h_unique_name("slot_tail");
        char set_conn[512];
        PGconn *c = h_pg_connect(db);

        h_pg_create_outbox(c, "outbox");
        h_pg_exec(c, "CREATE TABLE other (x int)");
        h_pg_exec_file(c, "002_publication.sql");
        h_pg_exec(c, "ALTER PUBLICATION outbox_pub ADD TABLE other");
        /* The relay's real slot, which tail must leave alone. */
        h_pg_exec(c, "SELECT pg_create_logical_replication_slot('%s', 'pgoutput')", slot);
        char *ci = h_pg_conninfo(db);
        snprintf(set_conn, sizeof(set_conn), "postgres.conninfo=%s", ci);

        case_events(c, set_conn, slot);
        case_bytes(c, set_conn);
        case_messages(c, set_conn);
        case_error_not_utf8(c, set_conn);
        case_unreachable();
        case_stop_while_creating(db, set_conn);
        case_reader_gone(c, set_conn);

        PQfinish(c);
        h_pg_drop_db(db);
        free(ci);
        free(slot);
        free(db);
        return done_testing();
}
