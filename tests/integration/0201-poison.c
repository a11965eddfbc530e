/*
 * 0201-poison.c - poison events among normal traffic, against the real
 * broker: an event larger than its topic allows and a row with a NULL
 * aggregate id.
 *
 * Policy dlq: the relay knows the topic's max.message.bytes before it
 * produces, so the oversized event is never sent to its topic (resending the
 * same bytes cannot help: no resends); both poison events land in the
 * dead-letter topic with their key, value and id plus headers saying why and
 * where; everything else is delivered in order and the slot moves past the
 * poison once the dead-letter writes are acknowledged.
 *
 * The dead-letter copy's outbox.error.commit.time is the commit time, also
 * when table.field.event.timestamp gives the event another timestamp.
 *
 * Policy stop: the relay halts before the oversized event, naming its id
 * and LSN, and confirms nothing past it; after the operator lists the id in
 * errors.skip.ids it resumes and nothing else is lost. Before a row that
 * cannot become an event it says how to get past it too: errors.skip.ids,
 * or errors.policy = dlq for a row without an id.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static const char *const big_topic_config[] = {"max.message.bytes", "2000", NULL};

typedef struct {
        char *db, *suffix, *slot, *conninfo;
        char set_conn[512], set_kafka[256], set_slot[128], set_dlq[200];
        char ok_topic[160], pz_topic[160], dlq_topic[160];
        PGconn *c;
} fixture_t;

static void fixture_init(fixture_t *f, const char *name)
{
        f->db = h_pg_create_db(name);
        f->suffix = h_unique_name("p");
        f->slot = h_unique_name("slot");
        f->conninfo = h_pg_conninfo(f->db);
        f->c = h_pg_connect(f->db);
        /* No NOT NULL on aggregateid: the application's bug we must survive. */
        h_pg_exec(f->c, "CREATE TABLE outbox (id uuid PRIMARY KEY, aggregatetype varchar(255), "
                        "aggregateid varchar(255), type varchar(255), payload jsonb)");
        snprintf(f->ok_topic, sizeof(f->ok_topic), "outbox.event.ok_%s", f->suffix);
        snprintf(f->pz_topic, sizeof(f->pz_topic), "outbox.event.pz_%s", f->suffix);
        snprintf(f->dlq_topic, sizeof(f->dlq_topic), "dlq_%s", f->suffix);
        h_kafka_create_topic(f->ok_topic, 1);
        h_kafka_create_topic_config(f->pz_topic, 1, big_topic_config);
        h_kafka_create_topic(f->dlq_topic, 1);
        snprintf(f->set_conn, sizeof(f->set_conn), "postgres.conninfo=%s", f->conninfo);
        snprintf(f->set_kafka, sizeof(f->set_kafka), "kafka.bootstrap.servers=%s", h_kafka_bootstrap());
        snprintf(f->set_slot, sizeof(f->set_slot), "slot.name=%s", f->slot);
        snprintf(f->set_dlq, sizeof(f->set_dlq), "errors.dlq.topic=%s", f->dlq_topic);
}

static void fixture_free(fixture_t *f)
{
        PQfinish(f->c);
        h_pg_drop_db(f->db);
        free(f->db);
        free(f->suffix);
        free(f->slot);
        free(f->conninfo);
}

static void insert_ok(fixture_t *f, int n)
{
        h_pg_exec(f->c,
                  "INSERT INTO outbox VALUES (gen_random_uuid(), 'ok_%s', 'a-1', 'Ok', "
                  "jsonb_build_object('n', %d))",
                  f->suffix, n);
}

/* Values of one ok topic, in order, as "n" numbers. */
static int ok_sequence(fixture_t *f, int *out, int max)
{
        h_msg_t *m;
        size_t n = h_kafka_consume_all(f->ok_topic, &m);
        int k = 0;
        for (size_t i = 0; i < n && k < max; i++) {
                const char *p = m[i].value ? strstr(m[i].value, "\"n\": ") : NULL;
                out[k++] = p ? atoi(p + 5) : -1;
        }
        h_msgs_free(m, n);
        return k;
}

static void test_dlq(void)
{
        fixture_t f;
        fixture_init(&f, "pdlq");
        const char *sets[] = {f.set_conn, f.set_kafka, f.set_slot, f.set_dlq, "errors.retries=2",
                              "errors.backoff.ms=100", "status.interval.ms=1000", NULL};
        h_relay_t *r = h_relay_start(sets);
        ok(h_relay_wait_log(r, "streaming from replication slot", 60000), "dlq: relay streams");

        insert_ok(&f, 1);
        h_pg_exec(f.c, "INSERT INTO outbox VALUES ('00000000-0000-4000-8000-00000000b16e', "
                           "'pz_%s', 'a-2', 'Big', jsonb_build_object('big', repeat('x', 5000)))",
                  f.suffix);
        insert_ok(&f, 2);
        h_pg_exec(f.c, "INSERT INTO outbox VALUES ('00000000-0000-4000-8000-0000000000ff', 'ok_%s', "
                       "NULL, 'NullKey', '{\"k\": null}')",
                  f.suffix);
        for (int i = 3; i <= 10; i++)
                insert_ok(&f, i);
        char *wal_after = h_pg_value(f.c, "SELECT pg_current_wal_lsn()");

        is_int(h_kafka_wait_count(f.dlq_topic, 2, 60000), 2, "dlq: two events in the dead-letter topic");
        is_int(h_kafka_wait_count(f.ok_topic, 10, 60000), 10, "dlq: the ten normal events delivered");
        int seq[32];
        int n = ok_sequence(&f, seq, 32);
        int in_order = n == 10;
        for (int i = 0; i < n && in_order; i++)
                in_order = seq[i] == i + 1;
        ok(in_order, "dlq: normal events in commit order, each once");
        is_int(h_kafka_count(f.pz_topic), 0, "dlq: nothing reached the topic that refused the event");

        h_msg_t *m;
        size_t nd = h_kafka_consume_all(f.dlq_topic, &m);
        int big = -1, nullkey = -1;
        for (size_t i = 0; i < nd; i++) {
                size_t hl;
                const char *id = h_msg_header(&m[i], "id", &hl);
                if (id && strcmp(id, "00000000-0000-4000-8000-00000000b16e") == 0)
                        big = (int)i;
                if (id && strcmp(id, "00000000-0000-4000-8000-0000000000ff") == 0)
                        nullkey = (int)i;
        }
        ok(big >= 0, "dlq: the oversized event is there by id");
        if (big >= 0) {
                size_t hl;
                const char *msg = h_msg_header(&m[big], "outbox.error.message", &hl);
                const char *topic = h_msg_header(&m[big], "outbox.error.topic", &hl);
                const char *attempts = h_msg_header(&m[big], "outbox.error.attempts", &hl);
                const char *lsn = h_msg_header(&m[big], "outbox.error.lsn", &hl);
                const char *type = h_msg_header(&m[big], "type", &hl);
                ok(msg && strstr(msg, "too large"), "dlq: error header says why (%s)", msg ? msg : "none");
                is_str(topic, f.pz_topic, "dlq: error header names the source topic");
                is_str(attempts, "0", "dlq: known too large before producing: never sent, not resent");
                ok(msg && strstr(msg, "max.message.bytes is 2000"),
                   "dlq: error header names the topic's limit");
                ok(lsn && strchr(lsn, '/'), "dlq: error header carries the LSN (%s)", lsn ? lsn : "none");
                is_str(type, "Big", "dlq: original headers kept");
                is_str(m[big].key, "a-2", "dlq: original key kept");
                ok(m[big].value_len > 5000 && strstr(m[big].value, "xxxx"), "dlq: original value kept");
        }
        ok(nullkey >= 0, "dlq: the row with a NULL aggregate id is there by id");
        if (nullkey >= 0) {
                size_t hl;
                const char *msg = h_msg_header(&m[nullkey], "outbox.error.message", &hl);
                ok(msg && strstr(msg, "NULL aggregate id"), "dlq: error header says NULL aggregate id");
                ok(m[nullkey].key == NULL, "dlq: NULL key stays NULL");
                is_str(m[nullkey].value, "{\"k\": null}", "dlq: its payload kept");
                is_str(h_msg_header(&m[nullkey], "outbox.error.attempts", &hl), "0",
                       "dlq: a row that cannot be mapped is not resent");
        }
        h_msgs_free(m, nd);

        /* The slot moves past the poison once its dead-letter copies are acked. */
        ok(h_pg_wait_confirmed(f.c, f.slot, wal_after, 15000) >= 0,
           "dlq: slot confirmed past the poison events");
        h_relay_signal(r, SIGTERM);
        is_int(h_relay_wait(r, 30000), 0, "dlq: clean stop");
        char *log = h_relay_log(r);
        ok(strstr(log, "2 dead-lettered"), "dlq: the relay counts the dead-lettered events");
        if (!strstr(log, "2 dead-lettered"))
                h_relay_diag_log(r);
        free(log);
        free(wal_after);
        h_relay_free(r);
        fixture_free(&f);
}

static void test_stop(void)
{
        fixture_t f;
        fixture_init(&f, "pstop");
        const char *sets[] = {f.set_conn, f.set_kafka, f.set_slot, f.set_dlq, "errors.policy=stop",
                              "status.interval.ms=500", NULL};
        h_relay_t *r = h_relay_start(sets);
        ok(h_relay_wait_log(r, "streaming from replication slot", 60000), "stop: relay streams");
        insert_ok(&f, 1);
        is_int(h_kafka_wait_count(f.ok_topic, 1, 60000), 1, "stop: first event delivered");
        h_pg_exec(f.c, "INSERT INTO outbox VALUES ('00000000-0000-4000-8000-00000000b16e', 'pz_%s', "
                       "'a-2', 'Big', jsonb_build_object('big', repeat('x', 5000)))",
                  f.suffix);
        insert_ok(&f, 2);
        is_int(h_relay_wait(r, 60000), 4, "stop: relay halts with exit code 4");
        char *log = h_relay_log(r);
        ok(strstr(log, "00000000-0000-4000-8000-00000000b16e") && strstr(log, "errors.policy = stop"),
           "stop: the message names the event id and the policy");
        ok(strstr(log, "errors.skip.ids") != NULL, "stop: the message names the way past it");
        free(log);
        /* Nothing confirmed past the poison: the slot still holds its
         * transaction (the server would send it again). Not a WAL position
         * read before the poison's INSERT: other tests write WAL beside this
         * one, and the relay may confirm such positions while it is idle
         * (a keepalive's), short of the poison. */
        char *held = h_pg_value(f.c,
                                "SELECT count(*) FROM pg_logical_slot_peek_binary_changes('%s', "
                                "NULL, NULL, 'proto_version', '1', 'publication_names', "
                                "'outbox_pub') WHERE position(convert_to("
                                "'00000000-0000-4000-8000-00000000b16e', 'UTF8') IN data) > 0",
                                f.slot);
        is_str(held, "1", "stop: nothing confirmed past the poison event (the slot still holds it)");
        is_int(h_kafka_count(f.dlq_topic), 0, "stop: nothing dead-lettered");
        h_relay_free(r);

        /* The operator's fix: skip that one event explicitly. */
        const char *sets2[] = {f.set_conn, f.set_kafka, f.set_slot, f.set_dlq, "errors.policy=stop",
                               "errors.skip.ids=00000000-0000-4000-8000-00000000b16e",
                               "status.interval.ms=500", NULL};
        r = h_relay_start(sets2);
        ok(h_relay_wait_log(r, "skipping event \"00000000-0000-4000-8000-00000000b16e\"", 60000),
           "stop: restarted relay skips the listed event, and says so");
        insert_ok(&f, 3);
        /* Event 2 may come twice (sent before the halt, sent again after),
         * so wait for event 3 itself rather than for a count. */
        int seq[32], n = 0, has[4] = {0};
        int64_t deadline = h_now_ms() + 60000;
        while (has[3] == 0 && h_now_ms() < deadline) {
                h_sleep_ms(200);
                n = ok_sequence(&f, seq, 32);
                memset(has, 0, sizeof(has));
                for (int i = 0; i < n; i++)
                        if (seq[i] >= 1 && seq[i] <= 3)
                                has[seq[i]]++;
        }
        for (int i = 0; i < n; i++)
                tap_diag("ok topic message %d: n = %d", i, seq[i]);
        ok(has[1] == 1 && has[2] >= 1 && has[3] == 1,
           "stop: events 1, 2, 3 all present (event 2 %d times: it was in flight at the halt)", has[2]);
        h_relay_signal(r, SIGTERM);
        is_int(h_relay_wait(r, 30000), 0, "stop: clean stop");
        log = h_relay_log(r);
        ok(strstr(log, "1 skipped") != NULL, "stop: the skip is counted");
        free(log);
        free(held);
        h_relay_free(r);
        fixture_free(&f);
}

/*
 * outbox.error.commit.time is the transaction's commit time, as its name
 * and README say, also when table.field.event.timestamp gives the event
 * another timestamp: it was the event's timestamp, here 2001-02-03.
 */
static void test_dlq_commit_time(void)
{
        fixture_t f;
        fixture_init(&f, "pdlqts");
        h_pg_exec(f.c, "ALTER TABLE outbox ADD COLUMN ts timestamptz");
        const char *sets[] = {f.set_conn, f.set_kafka, f.set_slot, f.set_dlq,
                              "table.field.event.timestamp=ts", NULL};
        h_relay_t *r = h_relay_start(sets);
        ok(h_relay_wait_log(r, "streaming from replication slot", 60000), "commit time: relay streams");
        /* A NULL aggregate id: dead-lettered at once. */
        char *commit_ms = h_pg_value(f.c,
                "INSERT INTO outbox VALUES ('00000000-0000-4000-8000-0000000000c7', 'ok_%s', NULL, "
                "'Old', '{}', '2001-02-03 04:05:06+00') "
                "RETURNING (extract(epoch FROM now()) * 1000)::bigint",
                f.suffix);
        is_int(h_kafka_wait_count(f.dlq_topic, 1, 60000), 1, "commit time: the event dead-lettered");
        h_msg_t *m;
        size_t nd = h_kafka_consume_all(f.dlq_topic, &m);
        size_t hl;
        const char *ct = nd ? h_msg_header(&m[0], "outbox.error.commit.time", &hl) : NULL;
        /* now() is the transaction's start, a few ms before its commit. */
        long long d = ct && commit_ms ? atoll(ct) - atoll(commit_ms) : -1;
        ok(d >= 0 && d < 5000,
           "commit time: outbox.error.commit.time is the commit's (%s), not the event's "
           "timestamp 981173106000 (transaction start %s)",
           ct ? ct : "none", commit_ms ? commit_ms : "?");
        h_msgs_free(m, nd);
        h_relay_signal(r, SIGTERM);
        is_int(h_relay_wait(r, 30000), 0, "commit time: clean stop");
        free(commit_ms);
        h_relay_free(r);
        fixture_free(&f);
}

/*
 * errors.policy = stop before a row that cannot become an event: the
 * message names the way past it, as for an event Kafka refuses (it said
 * only what was wrong with the row: "make the column NOT NULL" fixes the
 * next rows, not this one, and a restart stopped at it again). A row with
 * an id can be skipped by it; one without, only dead-lettered.
 */
static void test_stop_unmappable(void)
{
        fixture_t f;
        fixture_init(&f, "pstopmap");
        h_pg_exec(f.c, "ALTER TABLE outbox DROP CONSTRAINT outbox_pkey");
        h_pg_exec(f.c, "ALTER TABLE outbox ALTER COLUMN id DROP NOT NULL");
        const char *sets[] = {f.set_conn, f.set_kafka, f.set_slot, f.set_dlq, "errors.policy=stop",
                              NULL};
        h_relay_t *r = h_relay_start(sets);
        ok(h_relay_wait_log(r, "streaming from replication slot", 60000),
           "stop unmappable: relay streams");
        h_pg_exec(f.c, "INSERT INTO outbox VALUES ('00000000-0000-4000-8000-0000000000a1', 'ok_%s', "
                       "NULL, 'NullKey', '{}')",
                  f.suffix);
        h_pg_exec(f.c, "INSERT INTO outbox VALUES (NULL, 'ok_%s', 'a-1', 'NullId', '{}')", f.suffix);
        is_int(h_relay_wait(r, 60000), 4, "stop unmappable: halts at the NULL aggregate id, exit 4");
        char *log = h_relay_log(r);
        ok(strstr(log, "00000000-0000-4000-8000-0000000000a1") && strstr(log, "NULL aggregate id") &&
                   strstr(log, "errors.policy = stop") && strstr(log, "errors.skip.ids"),
           "stop unmappable: the message names the id, the cause, the policy and errors.skip.ids");
        if (!strstr(log, "errors.skip.ids"))
                h_relay_diag_log(r);
        free(log);
        h_relay_free(r);

        const char *sets2[] = {f.set_conn, f.set_kafka, f.set_slot, f.set_dlq, "errors.policy=stop",
                               "errors.skip.ids=00000000-0000-4000-8000-0000000000a1", NULL};
        r = h_relay_start(sets2);
        is_int(h_relay_wait(r, 60000), 4, "stop unmappable: skips it, halts at the NULL id, exit 4");
        log = h_relay_log(r);
        ok(strstr(log, "NULL event id") && strstr(log, "errors.policy = dlq"),
           "stop unmappable: without an id to list, the message names errors.policy = dlq");
        if (!strstr(log, "errors.policy = dlq"))
                h_relay_diag_log(r);
        free(log);
        is_int(h_kafka_count(f.dlq_topic), 0, "stop unmappable: nothing dead-lettered");
        h_relay_free(r);
        fixture_free(&f);
}

int main(void)
{
        test_dlq();
        test_dlq_commit_time();
        test_stop();
        test_stop_unmappable();
        return done_testing();
}
