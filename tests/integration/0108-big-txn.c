/*
 * 0108-big-txn.c - large transactions, on whatever PostgreSQL version the
 * environment runs (tests/run runs it on 14 to 18).
 *
 * 1. The relay asked the server for the highest pgoutput protocol version
 *    it speaks (14: 2, 15: 3, 16 and later: 4): the walsender's own record
 *    of the command (pg_stat_activity.query) is checked, so every version
 *    the relay negotiates is exercised live on the server that offers it.
 * 2. One transaction of 200 000 rows: Kafka holds every event once, each
 *    aggregate's events in insert order in one partition, and the slot is
 *    confirmed past the commit.
 * 3. A transaction that spills to disk: the relay's conninfo sets
 *    logical_decoding_work_mem = 64kB in its options (which the relay must
 *    keep next to its own session settings), so the server's reorder buffer writes a 20 000-row
 *    transaction to disk before the commit (asserted from
 *    pg_stat_replication_slots.spill_txns); every event arrives once, in
 *    order.
 *
 * Asserts on what Kafka and PostgreSQL hold, never on timing.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define BIG 200000
#define SPILL 20000
#define AGGREGATES 50

typedef struct {
        long messages, duplicates, missing, out_of_order, bad_partition, bad_value;
} check_t;

/* Events seq in [first, first + n) were inserted with aggregateid
 * 'agg-' || seq % AGGREGATES and payload {"seq": seq}, in seq order within
 * one transaction. */
static void check_topic(const char *topic, long first, long n, check_t *k)
{
        h_msg_t *msgs;
        size_t count = h_kafka_consume_all(topic, &msgs);
        unsigned char *seen = calloc((size_t)n, 1);
        long last_seq[AGGREGATES];
        int part_of[AGGREGATES];
        memset(k, 0, sizeof(*k));
        for (int a = 0; a < AGGREGATES; a++) {
                last_seq[a] = -1;
                part_of[a] = -1;
        }
        if (!seen)
                tap_bail("out of memory");
        for (size_t i = 0; i < count; i++) {
                const h_msg_t *m = &msgs[i];
                long seq = -1;
                int agg = -1;
                if (!m->value || sscanf(m->value, "{\"seq\": %ld}", &seq) != 1) {
                        k->bad_value++;
                        continue;
                }
                if (seq < first || seq >= first + n)
                        continue; /* an earlier part's event */
                k->messages++;
                if (!m->key || sscanf(m->key, "agg-%d", &agg) != 1 || agg < 0 || agg >= AGGREGATES ||
                    agg != seq % AGGREGATES) {
                        k->bad_value++;
                        continue;
                }
                if (seen[seq - first]++) {
                        k->duplicates++;
                        continue;
                }
                if (part_of[agg] < 0)
                        part_of[agg] = m->partition;
                else if (part_of[agg] != m->partition)
                        k->bad_partition++;
                /* consume_all reads partition by partition in offset order,
                 * so one aggregate's events come in partition order. */
                if (seq < last_seq[agg])
                        k->out_of_order++;
                last_seq[agg] = seq;
        }
        for (long s = 0; s < n; s++)
                if (!seen[s])
                        k->missing++;
        free(seen);
        h_msgs_free(msgs, count);
}

static void report(const char *what, const check_t *k, long n)
{
        is_int(k->messages, n, "%s: Kafka holds %ld events", what, n);
        is_int(k->duplicates, 0, "%s: no duplicates", what);
        is_int(k->missing, 0, "%s: no event lost", what);
        is_int(k->out_of_order, 0, "%s: each aggregate's events in insert order", what);
        is_int(k->bad_partition, 0, "%s: each aggregate in one partition", what);
        is_int(k->bad_value, 0, "%s: every key and value as inserted", what);
}

static void insert_txn(PGconn *c, const char *aggtype, long first, long n)
{
        h_pg_exec(c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                  "SELECT gen_random_uuid(), '%s', 'agg-' || (g %% %d), 'Big', "
                  "jsonb_build_object('seq', g) FROM generate_series(%ld, %ld) g ORDER BY g",
                  aggtype, AGGREGATES, first, first + n - 1);
}

static long slot_stat(PGconn *c, const char *slot, const char *column)
{
        char *v = h_pg_value(c, "SELECT %s FROM pg_stat_replication_slots WHERE slot_name = '%s'",
                             column, slot);
        long r = v ? atol(v) : -1;
        free(v);
        return r;
}

int main(void)
{
        h_case_t k;
        h_case_open(&k, "bigtxn", "slot", "big", 4, 0);
        PGconn *c = k.c;
        const char *topic = k.topic;
        char *vnum = h_pg_value(c, "SHOW server_version_num");
        int version = atoi(vnum);
        int want_proto = version >= 160000 ? 4 : version >= 150000 ? 3 : 2;
        tap_diag("PostgreSQL %d.%d", version / 10000, version % 10000);

        const char *sets[] = {k.set_conn, k.set_kafka, k.set_slot, "status.interval.ms=1000", NULL};

        /* 1. the protocol version the walsender was asked for */
        h_relay_t *relay = h_relay_start(sets);
        ok(h_relay_streams(relay, 60000), "relay streams");
        char *cmd = h_pg_value(c,
                               "SELECT query FROM pg_stat_activity WHERE backend_type = 'walsender' "
                               "AND query LIKE 'START_REPLICATION SLOT %%%s%%'",
                               k.slot);
        char want[64];
        snprintf(want, sizeof(want), "proto_version '%d'", want_proto);
        ok(cmd && strstr(cmd, want), "PostgreSQL %d was asked for pgoutput %s (%s)", version / 10000,
           want, cmd ? cmd : "no walsender");

        /* 2. one 200 000-row transaction */
        insert_txn(c, k.aggtype, 1, BIG);
        int64_t t0 = h_now_ms();
        h_relayed_t rl;
        h_wait_relayed(c, k.slot, topic, BIG, 300000, &rl);
        is_int(rl.in_kafka, BIG, "the 200 000-row transaction reached Kafka");
        tap_diag("200 000-row transaction in Kafka and confirmed %.1f s after its commit",
                 (double)(h_now_ms() - t0) / 1000.0);
        ok(rl.confirmed, "slot confirmed past the commit (%s)", rl.lsn);
        h_relayed_free(&rl);
        is_int(h_relay_stop(relay, 30000), 0, "SIGTERM: clean exit 0");
        h_relay_free(relay);

        check_t ck;
        check_topic(topic, 1, BIG, &ck);
        report("200 000-row transaction", &ck, BIG);

        /* 3. a transaction that spills to disk */
        /* In the conninfo's options: the relay adds its own session
         * settings after the user's, and must keep these. */
        snprintf(k.set_conn, sizeof(k.set_conn),
                 "postgres.conninfo=%s options='-c logical_decoding_work_mem=64kB'", k.conninfo);
        /* A slot of its own, so the 200 000-row transaction's statistics
         * (it may spill too, and they may arrive late) do not count. */
        char *slot2 = h_unique_name("slot");
        snprintf(k.set_slot, sizeof(k.set_slot), "slot.name=%s", slot2);
        relay = h_relay_start(sets);
        ok(h_relay_streams(relay, 60000), "relay streams with logical_decoding_work_mem = 64kB");
        insert_txn(c, k.aggtype, BIG + 1, SPILL);
        h_wait_relayed(c, slot2, topic, BIG + SPILL, 120000, &rl);
        is_int(rl.in_kafka, BIG + SPILL, "the spilled transaction reached Kafka");
        ok(rl.confirmed, "slot confirmed past the commit (%s)", rl.lsn);
        h_relayed_free(&rl);
        /* Replication slot statistics reach the view a little after the
         * walsender decoded the transaction (on 14, through the stats
         * collector): wait for them, bounded. */
        long spilled = slot_stat(c, slot2, "spill_txns");
        for (int i = 0; i < 100 && spilled <= 0; i++) {
                h_sleep_ms(100);
                spilled = slot_stat(c, slot2, "spill_txns");
        }
        ok(spilled > 0, "the server spilled the transaction to disk (spill_txns %ld, spill_bytes %ld)",
           spilled, slot_stat(c, slot2, "spill_bytes"));
        is_int(h_relay_stop(relay, 30000), 0, "SIGTERM: clean exit 0");
        h_relay_free(relay);

        check_topic(topic, BIG + 1, SPILL, &ck);
        report("spilled transaction", &ck, SPILL);

        free(cmd);
        free(vnum);
        free(slot2);
        h_case_close(&k);
        return done_testing();
}
