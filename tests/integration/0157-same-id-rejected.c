/*
 * 0157-same-id-rejected.c - an event Kafka refuses that shares its id with
 * another event of its transaction, against the real broker.
 *
 * The error policy remembers a refused event by its transaction and id
 * until it is settled. With the shipped schema (id the primary key, rows
 * deleted in the same transaction, sql/004) a transaction can insert,
 * delete and insert again an event with the same id; several outbox tables
 * with their own serial ids give the same. Here one transaction holds
 * three events with one id: "Good" {"n": 1}, "Old" {"n": 2} with a
 * timestamp from 2001 into a topic with message.timestamp.before.max.ms of
 * an hour (Kafka refuses it for good), and "Late" {"n": 3}; another
 * transaction follows with {"n": 4}.
 *
 * The relay resends the refused event alone, then dead-letters it
 * (errors.retries = 1), delivers the other three to their topic, and
 * confirms past all of it. It once forgot the id when "Good" was resent
 * alone and delivered, so "Old" was produced with the stream again, refused
 * again and counted as a first refusal: the relay restarted forever,
 * writing "Good" again each time and never dead-lettering "Old". Keeping
 * the attempts until the transaction's Commit alone (one entry for the
 * three) dead-lettered all three, "Good" and "Late" untried: a refused
 * event is also told apart by its topic, key, value and headers.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define EID "0157aaaa-0000-4000-8000-000000000001"

/* How many messages of msgs carry header type = type. */
static int count_type(const h_msg_t *msgs, size_t n, const char *type)
{
        int k = 0;
        for (size_t i = 0; i < n; i++) {
                size_t hl;
                const char *t = h_msg_header(&msgs[i], "type", &hl);
                if (t && strcmp(t, type) == 0)
                        k++;
        }
        return k;
}

int main(void)
{
        h_case_t k;
        char dlq[200];
        const char *extra[] = {"errors.retries=1", "errors.backoff.ms=100",
                               "status.interval.ms=500", NULL};
        h_relay_t *r = h_kafka_refusing_open(&k, "sameid", "sid", dlq, sizeof(dlq), extra);
        ok(h_relay_streams(r, 60000), "relay streams");

        h_pg_exec(k.c,
                  "BEGIN;"
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                  "VALUES ('" EID "', '%s', 'a-1', 'Good', '{\"n\": 1}');"
                  "DELETE FROM outbox WHERE id = '" EID "';"
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload, created_at) "
                  "VALUES ('" EID "', '%s', 'a-1', 'Old', '{\"n\": 2}', "
                  "'2001-02-03 04:05:06+00');"
                  "DELETE FROM outbox WHERE id = '" EID "';"
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                  "VALUES ('" EID "', '%s', 'a-1', 'Late', '{\"n\": 3}');"
                  "DELETE FROM outbox WHERE id = '" EID "';"
                  "COMMIT",
                  k.aggtype, k.aggtype, k.aggtype);
        h_pg_exec(k.c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                  "VALUES (gen_random_uuid(), '%s', 'a-1', 'Next', '{\"n\": 4}')",
                  k.aggtype);
        char *wal_after = h_pg_wal_lsn(k.c);

        is_int(h_kafka_wait_count(dlq, 1, 90000), 1, "the refused event is dead-lettered");
        /* Events are delivered at least once: wait for the last one itself. */
        h_msg_t *m = NULL;
        size_t n = 0;
        int64_t deadline = h_now_ms() + 60000;
        for (;;) {
                h_msgs_free(m, n);
                n = h_kafka_consume_all(k.topic, &m);
                if (count_type(m, n, "Next") > 0 || h_now_ms() > deadline)
                        break;
                h_sleep_ms(500);
        }
        int good = count_type(m, n, "Good"), late = count_type(m, n, "Late");
        ok(good >= 1 && late >= 1 && count_type(m, n, "Next") >= 1,
           "Good (%d times), Late (%d times) and the next transaction's event reach the topic",
           good, late);
        is_int(count_type(m, n, "Old"), 0, "the refused event is not in the topic");
        h_msgs_free(m, n);

        h_msg_t *d = NULL;
        size_t nd = h_kafka_consume_all(dlq, &d);
        bool only_old = nd >= 1 && count_type(d, nd, "Old") == (int)nd;
        ok(only_old, "only the refused event is in the dead-letter topic (%zu messages, %d of them Old)",
           nd, count_type(d, nd, "Old"));
        if (!only_old)
                h_relay_diag_log(r);
        if (nd >= 1) {
                size_t hl;
                const char *id = h_msg_header(&d[0], "id", &hl);
                const char *msg = h_msg_header(&d[0], "outbox.error.message", &hl);
                is_str(id, EID, "the dead-letter copy names the event id");
                ok(msg && strstr(msg, "timestamp") != NULL,
                   "the dead-letter copy says why (%s)", msg ? msg : "none");
        }
        h_msgs_free(d, nd);
        ok(h_pg_wait_confirmed(k.c, k.slot, wal_after, 30000) >= 0,
           "the slot is confirmed past both transactions");

        h_relay_signal(r, SIGTERM);
        is_int(h_relay_wait(r, 30000), 0, "clean stop");
        char *log = h_relay_log(r);
        ok(log && strstr(log, "written to dead-letter topic") != NULL,
           "the log says the event was dead-lettered");
        if (!log || !strstr(log, "written to dead-letter topic"))
                h_relay_diag_log(r);
        free(log);
        free(wal_after);
        h_kafka_refusing_close(&k, r, dlq);
        return done_testing();
}
