/*
 * 0214-inbox.c - issue 14 item 4: the inbox kit makes a consumer's effect
 * exact although Kafka holds duplicates and the consumer itself crashes.
 *
 * The relay runs in at-least-once mode under 0205's crash loop (kill -9 at
 * random moments while 8 writers commit events over 100 aggregates), so
 * Kafka holds duplicates; meanwhile outbox-inbox consumes both topics into
 * a database of its own (sql/006_inbox.sql) and is itself killed with
 * kill -9 at random moments and restarted, while a second member of its
 * group joins and leaves (rebalances). Its handler counts events per
 * aggregate and checks that each aggregate's versions arrive as 1, 2, 3...
 * and with the key and id it was given.
 *
 * Asserts on what PostgreSQL holds at the end: every aggregate's counter
 * equals its committed events (the outbox database's version), no version
 * was applied out of order or twice (a duplicate would break the 1, 2, 3
 * sequence as well as the count), the inbox holds one row per committed
 * event, and nothing was dead-lettered. Kafka's duplicates are counted and
 * reported: they are what the inbox absorbed.
 *
 * Short variant (CI): 5 relay kills and 5 consumer kills during 5 000
 * events. Long (RELAY_FAULTS_LONG=1): 30 of each during 50 000 events.
 *
 * Then the error paths, on a topic of their own: a message whose handler
 * fails until a flag is set is retried and applied once; one whose handler
 * always fails, one without an id header and one whose payload is not JSON
 * reach the dead-letter topic with their error headers and are not in the
 * inbox; a later good message is applied. And the setup errors: no inbox
 * table, a handler that does not prepare (exit 3, the fix named).
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"
#include "workload.h"

/* The test's handler: per aggregate a count, the last version, and the
 * versions that did not follow the previous one. */
static const char *const handler_sql =
        "CREATE TABLE agg_counter (agg int PRIMARY KEY, n int NOT NULL, last_v int NOT NULL, "
        "  out_of_order int NOT NULL, bad_args int NOT NULL);"
        "CREATE FUNCTION on_event(p_key text, p_headers jsonb, p_payload jsonb, p_id text) "
        "RETURNS void LANGUAGE plpgsql AS $$ "
        "DECLARE a int := (p_payload->>'agg')::int; v int := (p_payload->>'v')::int; "
        "  bad int := (p_key IS DISTINCT FROM 'agg-' || a "
        "              OR p_headers->>'id' IS DISTINCT FROM p_id)::int; "
        "BEGIN "
        "  INSERT INTO agg_counter AS c VALUES (a, 1, v, (v <> 1)::int, bad) "
        "  ON CONFLICT (agg) DO UPDATE SET n = c.n + 1, last_v = EXCLUDED.last_v, "
        "    out_of_order = c.out_of_order + (EXCLUDED.last_v <> c.last_v + 1)::int, "
        "    bad_args = c.bad_args + EXCLUDED.bad_args; "
        "END $$;"
        /* The error-path handler: 'fail' always raises, 'flaky' on its first two
         * attempts (a sequence is not rolled back with the attempt). */
        "CREATE SEQUENCE flaky_attempts;"
        "CREATE TABLE applied (id text, payload jsonb);"
        "CREATE FUNCTION on_misc(p_payload jsonb, p_id text) RETURNS void LANGUAGE plpgsql AS $$ "
        "BEGIN "
        "  IF p_payload ? 'fail' THEN RAISE EXCEPTION 'refused by the handler'; END IF; "
        "  IF p_payload ? 'flaky' AND nextval('flaky_attempts') < 3 THEN "
        "    RAISE EXCEPTION 'not yet'; "
        "  END IF; "
        "  INSERT INTO applied VALUES (p_id, p_payload); "
        "END $$;";

/* instance: the static member id (group.instance.id), NULL for a dynamic member. */
static void inbox_sets(fx_sets_t *s, const char *cdb, const char *topics, const char *group,
                       const char *instance, const char *dlq, const char *handler)
{
        char *ci = h_pg_conninfo(cdb);
        memset(s, 0, sizeof(*s));
        fx_sets_add(s, "postgres.conninfo=%s", ci);
        fx_sets_add(s, "kafka.bootstrap.servers=%s", h_kafka_bootstrap());
        fx_sets_add(s, "inbox.topics=%s", topics);
        fx_sets_add(s, "inbox.handler=%s", handler);
        fx_sets_add(s, "kafka.group.id=%s", group);
        /* Static membership: a restarted consumer takes its partitions back
         * at once instead of waiting for the killed one's session to expire. */
        if (instance)
                fx_sets_add(s, "kafka.group.instance.id=%s", instance);
        fx_sets_add(s, "errors.dlq.topic=%s", dlq);
        fx_sets_add(s, "errors.backoff.ms=100");
        fx_sets_add(s, "errors.backoff.max.ms=200");
        fx_sets_add(s, "reconnect.backoff.ms=100");
        free(ci);
}

static h_relay_t *inbox_start(const fx_sets_t *s)
{
        return h_proc_start(h_env("RELAY_INBOX_BIN"), NULL, NULL, s->v);
}

static void error_paths(PGconn *cc, const char *cdb, const char *suffix)
{
        char *topic = fx_fmt("inbox.misc_%s", suffix);
        char *dlq = fx_fmt("inbox.misc.dlq_%s", suffix);
        char *group = fx_fmt("inbox-misc-%s", suffix);
        fx_sets_t s;

        h_kafka_create_topic(topic, 1);
        h_kafka_create_topic(dlq, 1);
        h_kafka_produce_hdrs(topic, "k1", "{\"flaky\": 1}",
                             (const char *const[]){"id", "m-flaky", NULL});
        h_kafka_produce_hdrs(topic, "k2", "{\"fail\": 1}",
                             (const char *const[]){"id", "m-fail", NULL});
        h_kafka_produce_hdrs(topic, "k3", "{\"x\": 1}",
                             (const char *const[]){"type", "no-id", NULL});
        h_kafka_produce_hdrs(topic, "k4", "not json",
                             (const char *const[]){"id", "m-notjson", NULL});
        h_kafka_produce_hdrs(topic, "k5", "{\"good\": 1}",
                             (const char *const[]){"id", "m-good", NULL});
        h_kafka_produce_hdrs(topic, "k5", "{\"good\": 1}",
                             (const char *const[]){"id", "m-good", NULL}); /* a duplicate */

        inbox_sets(&s, cdb, topic, group, "misc-1", dlq, "SELECT on_misc($3, $7)");
        h_relay_t *ib = inbox_start(&s);
        int64_t n_dlq = h_kafka_wait_count(dlq, 3, 60000);
        int64_t deadline = h_now_ms() + 60000;
        while (h_pg_number(cc, "SELECT count(*) FROM applied") < 2 && h_now_ms() < deadline)
                h_sleep_ms(100);
        h_relay_signal(ib, SIGTERM);
        int rc = h_relay_wait(ib, 60000);
        is_int(rc, 0, "the consumer stops cleanly on SIGTERM");
        if (rc != 0)
                h_relay_diag_log(ib);
        is_int(fx_log_count(ib, "not yet (SQLSTATE P0001), retrying"), 2,
               "the flaky handler's two failures were retried");

        is_int((int)h_pg_number(cc, "SELECT count(*) FROM applied WHERE id = 'm-flaky'"), 1,
               "the message whose handler failed twice is applied once on its third attempt");
        is_int((int)h_pg_number(cc, "SELECT count(*) FROM applied WHERE id = 'm-good'"), 1,
               "the good message and its duplicate are applied once");
        is_int((int)h_pg_number(cc, "SELECT count(*) FROM applied"), 2, "nothing else is applied");
        is_int((int)h_pg_number(cc, "SELECT count(*) FROM inbox WHERE topic LIKE 'inbox.misc_%'"), 2,
               "the inbox holds the two applied ids, not the dead-lettered ones");
        is_int((int)n_dlq, 3, "three messages in the dead-letter topic");

        h_msg_t *msgs;
        size_t n = h_kafka_consume_all(dlq, &msgs);
        int good = 0;
        for (size_t i = 0; i < n; i++) {
                size_t l;
                const char *why = h_msg_header(&msgs[i], "outbox.inbox.error.message", &l);
                const char *off = h_msg_header(&msgs[i], "outbox.inbox.error.offset", &l);
                const char *t = h_msg_header(&msgs[i], "outbox.inbox.error.topic", &l);
                const char *att = h_msg_header(&msgs[i], "outbox.inbox.error.attempts", &l);
                tap_diag("dead-lettered: key %s, offset %s, attempts %s: %s",
                         msgs[i].key ? msgs[i].key : "(null)", off ? off : "?", att ? att : "?",
                         why ? why : "?");
                if (!why || !off || !t || strcmp(t, topic) != 0 || !att || !msgs[i].key)
                        continue;
                if (strcmp(msgs[i].key, "k2") == 0 && strcmp(off, "1") == 0 &&
                    strstr(why, "refused by the handler") && strcmp(att, "4") == 0)
                        good++;
                else if (strcmp(msgs[i].key, "k3") == 0 && strcmp(off, "2") == 0 &&
                         strstr(why, "no \"id\" header") && strcmp(att, "0") == 0)
                        good++;
                else if (strcmp(msgs[i].key, "k4") == 0 && strcmp(off, "3") == 0 &&
                         strstr(why, "not JSON") && strcmp(att, "0") == 0 &&
                         strcmp(msgs[i].value, "not json") == 0)
                        good++;
        }
        is_int(good, 3,
               "dead-letter copies: the always-failing one after 1 + 3 attempts, the one "
               "without id and the non-JSON one at once, with key, value and error headers");
        h_msgs_free(msgs, n);
        h_relay_free(ib);
        fx_sets_free(&s);
        h_kafka_delete_topic(topic);
        h_kafka_delete_topic(dlq);
        free(topic);
        free(dlq);
        free(group);
}

/* Setup errors: exit 3 with a message that names the fix, before consuming. */
static void setup_errors(const char *cdb, const char *suffix)
{
        char *bare = h_pg_create_db("inboxbare");
        char *group = fx_fmt("inbox-setup-%s", suffix);
        fx_sets_t s;

        inbox_sets(&s, bare, "inbox.none", group, NULL, "inbox.none.dlq", "SELECT 1");
        h_relay_t *p = inbox_start(&s);
        int rc = h_relay_wait(p, 60000);
        char *log = h_relay_log(p);
        is_int(rc, 3, "without the inbox table outbox-inbox exits 3");
        ok(strstr(log, "run sql/006_inbox.sql") != NULL, "and says to run sql/006_inbox.sql");
        if (rc != 3 || !strstr(log, "run sql/006_inbox.sql"))
                h_relay_diag_log(p);
        free(log);
        h_relay_free(p);
        fx_sets_free(&s);

        inbox_sets(&s, cdb, "inbox.none", group, NULL, "inbox.none.dlq",
                   "SELECT no_such_function($3)");
        p = inbox_start(&s);
        rc = h_relay_wait(p, 60000);
        log = h_relay_log(p);
        is_int(rc, 3, "a handler that does not prepare: exit 3");
        ok(strstr(log, "could not prepare \"inbox.handler\"") && strstr(log, "no_such_function"),
           "the message names the key and the server's reason");
        if (rc != 3)
                h_relay_diag_log(p);
        free(log);
        h_relay_free(p);
        fx_sets_free(&s);
        h_pg_drop_db(bare);
        free(bare);
        free(group);
}

int main(void)
{
        const bool lng = fx_long();
        const int kills = lng ? 30 : 5;
        const int events = lng ? 50000 : 5000;
        fx_case_t fc;
        fx_case_open(&fc, "inbox", "ib");
        h_workload_conf_t wc = {
                .db = fc.db, .suffix = fc.suffix, .writers = 8, .aggregates = 100, .events = events,
                .max_txn = 10, .rollbacks = true, .deletes = true, .noise = true,
                .pause_ms = 50, .partitions = 4,
        };
        unsigned seed = (unsigned)h_now_ms() ^ (unsigned)getpid();
        char t0name[256], t1name[256];

        tap_diag("variant: %s, %d relay and %d consumer kills during %d events (seed %u)",
                 lng ? "long" : "short", kills, kills, events, seed);
        h_workload_setup(fc.c, &wc);
        fx_sets_init(&fc.sets, fc.db, fc.slot, NULL);

        char *cdb = h_pg_create_db("inboxc");
        PGconn *cc = h_pg_connect(cdb);
        h_pg_exec_file(cc, "006_inbox.sql");
        h_pg_exec(cc, "%s", handler_sql);

        char *topics = fx_fmt("%s,%s", h_workload_topic(&wc, 0, t0name, sizeof(t0name)),
                              h_workload_topic(&wc, 1, t1name, sizeof(t1name)));
        char *group = fx_fmt("inbox-%s", fc.suffix);
        char *dlq = fx_fmt("inbox.dlq_%s", fc.suffix);
        fx_sets_t is, is2;
        inbox_sets(&is, cdb, topics, group, "inbox-1", dlq, "SELECT on_event($1, $2, $3, $7)");
        /* A second, dynamic member joins and leaves now and then: each time
         * the group rebalances and the first one gives partitions up. */
        inbox_sets(&is2, cdb, topics, group, NULL, dlq, "SELECT on_event($1, $2, $3, $7)");
        h_relay_t *ib2 = NULL;
        int revokes = 0, joins2 = 0;

        h_relay_t *r = fx_case_relay(&fc, "relay streams");
        h_relay_t *ib = inbox_start(&is);
        if (!ok(h_relay_wait_log(ib, "assigned partitions", 60000), "outbox-inbox joins its group"))
                h_relay_diag_log(ib);

        int64_t t0 = h_now_ms();
        h_workload_t *wl = h_workload_start(&wc);
        int rkilled = 0, ikilled = 0, not_killed = 0;
        for (int k = 0; k < kills; k++) {
                fx_wait_slice(wl, r, k, kills, events, &seed, 1200);
                if (fx_kill9(r, "relay", k))
                        rkilled++;
                else
                        not_killed++;
                h_relay_free(r);
                r = h_relay_start(fc.sets.v);

                /* The consumer: killed a random moment after it got its partitions. */
                if (!h_relay_wait_log(ib, "assigned partitions", 60000))
                        h_relay_diag_log(ib);
                h_sleep_ms(fx_rand(&seed, 50, 1200));
                if (fx_kill9(ib, "consumer", k))
                        ikilled++;
                else
                        not_killed++;
                tap_diag("kill %d: relay and consumer, %d of %d events committed, %lld applied",
                         k + 1, h_workload_committed(wl), events,
                         h_pg_number(cc, "SELECT coalesce(sum(n), 0) FROM agg_counter"));
                revokes += fx_log_count(ib, "revoked partitions");
                h_relay_free(ib);
                ib = inbox_start(&is);

                /* Every other round the second member joins, or leaves cleanly. */
                if (k % 2 == 0 && !ib2) {
                        ib2 = inbox_start(&is2);
                        joins2++;
                } else if (k % 2 == 1 && ib2) {
                        h_relay_signal(ib2, SIGTERM);
                        int rc = h_relay_wait(ib2, 60000);
                        if (rc != 0) {
                                tap_diag("second consumer: exit %d on SIGTERM", rc);
                                h_relay_diag_log(ib2);
                        }
                        revokes += fx_log_count(ib2, "revoked partitions");
                        h_relay_free(ib2);
                        ib2 = NULL;
                }
        }
        if (ib2) {
                h_relay_signal(ib2, SIGTERM);
                if (h_relay_wait(ib2, 60000) != 0)
                        h_relay_diag_log(ib2);
                revokes += fx_log_count(ib2, "revoked partitions");
                h_relay_free(ib2);
        }
        int committed = 0, rolled_back = 0;
        int failed = h_workload_wait(wl, &committed, &rolled_back);
        is_int(failed, 0, "all writers finished");
        is_int(committed, events, "writers committed %d events", events);
        is_int(not_killed, 0, "every relay and consumer was alive when killed");
        is_int(rkilled, kills, "%d kill -9 of the relay", kills);
        is_int(ikilled, kills, "%d kill -9 of the consumer", kills);

        long long expected = 0;
        long long in_kafka = fx_wait_all_in_kafka(&fc, &wc, 300000, &expected);
        ok(in_kafka >= expected, "Kafka holds at least the %lld committed events (%lld)", expected,
           in_kafka);
        h_relay_wait_log(r, "streaming from replication slot", 60000);
        fx_stop_relay(r, "the last relay stops cleanly on SIGTERM");

        /* The consumer catches up; then its figures must stay put. */
        int64_t deadline = h_now_ms() + 300000;
        long long applied = 0;
        while ((applied = h_pg_number(cc, "SELECT coalesce(sum(n), 0) FROM agg_counter")) < expected &&
               h_now_ms() < deadline)
                h_sleep_ms(200);
        int64_t t_done = h_now_ms();
        h_sleep_ms(1000); /* anything applied twice late would show now */
        h_relay_signal(ib, SIGTERM);
        int rc = h_relay_wait(ib, 60000);
        is_int(rc, 0, "the last consumer stops cleanly on SIGTERM");
        if (rc != 0)
                h_relay_diag_log(ib);
        {
                /* What the last consumer refused: duplicates it read since its start. */
                char *log = h_relay_log(ib), *line = strstr(log, "stopped: ");
                if (line) {
                        char *nl = strchr(line, '\n');
                        if (nl)
                                *nl = '\0';
                        tap_diag("last consumer: %s", line);
                }
                free(log);
        }

        revokes += fx_log_count(ib, "revoked partitions");
        ok(joins2 > 0 && revokes > 0,
           "the group rebalanced: a second member joined %d times, %d revocations", joins2,
           revokes);

        h_verify_t v;
        h_workload_verify(fc.c, &wc, &v);
        fx_check_delivered("relay crash loop", &v);

        /* Per aggregate: the effect's count equals the committed events. */
        PGresult *want = PQexec(fc.c, "SELECT id, version FROM aggregates ORDER BY id");
        if (PQresultStatus(want) != PGRES_TUPLES_OK)
                tap_bail("could not read aggregates: %s", PQerrorMessage(fc.c));
        int wrong = 0;
        long long sum_want = 0;
        for (int i = 0; i < PQntuples(want); i++) {
                int a = atoi(PQgetvalue(want, i, 0)), w = atoi(PQgetvalue(want, i, 1));
                char *got = h_pg_value(cc, "SELECT n FROM agg_counter WHERE agg = %d", a);
                int g = got ? atoi(got) : 0;
                sum_want += w;
                if (g != w) {
                        if (wrong < 5)
                                tap_diag("aggregate %d: counter %d, committed events %d", a, g, w);
                        wrong++;
                }
                free(got);
        }
        PQclear(want);
        is_int(wrong, 0, "every aggregate's counter equals its committed events (%lld in all)",
               sum_want);
        long long final_applied = h_pg_number(cc, "SELECT coalesce(sum(n), 0) FROM agg_counter");
        is_int((int)final_applied, (int)sum_want, "the handler ran once per committed event");
        is_int((int)h_pg_number(cc, "SELECT coalesce(sum(out_of_order), 0) FROM agg_counter"), 0,
               "each aggregate's versions were applied as 1, 2, 3, ...");
        is_int((int)h_pg_number(cc, "SELECT coalesce(sum(bad_args), 0) FROM agg_counter"), 0,
               "the handler got the message's key and id");
        is_int((int)h_pg_number(cc, "SELECT count(*) FROM inbox"), (int)sum_want,
               "the inbox holds one row per committed event");
        is_int((int)h_kafka_count(dlq), 0, "nothing was dead-lettered");
        tap_diag("FIGURES inbox: events=%zu kafka_messages=%zu kafka_duplicates=%zu (%.1f%%) "
                 "relay_kills=%d consumer_kills=%d applied=%lld caught_up_after=%.1fs",
                 v.expected, v.messages, v.duplicates,
                 v.expected ? 100.0 * (double)v.duplicates / (double)v.expected : 0.0, rkilled,
                 ikilled, final_applied, (t_done - t0) / 1000.0);

        error_paths(cc, cdb, fc.suffix);
        setup_errors(cdb, fc.suffix);

        h_relay_free(r);
        h_relay_free(ib);
        fx_sets_free(&is);
        fx_sets_free(&is2);
        PQfinish(cc);
        h_pg_drop_db(cdb);
        free(cdb);
        free(topics);
        free(group);
        h_kafka_delete_topic(dlq);
        free(dlq);
        fx_case_close(&fc, &wc);
        return done_testing();
}
