/*
 * 0151-domain-columns.c - outbox columns of a domain type are their base
 * type's.
 *
 * pgoutput names a column's type by the domain's OID (its Relation
 * message); a SELECT's row description, as the backfill reads rows, by the
 * base type's. The relay decides from the type how a column's text becomes
 * bytes (bytea: the bytes it holds, "\x..." decoded) and whether a payload
 * is JSON. A payload column of a domain over bytea must give Kafka the
 * bytes, streamed as backfilled; Debezium resolves domains to their base
 * types too.
 *
 * The outbox table here has payload evt_bytes (a domain over bytea) and
 * aggregateid evt_key (a domain over a domain over text). One row is
 * committed before the relay's first start (backfilled, snapshot.mode =
 * initial), one after (streamed); both values must be the three bytes
 * 00 FF 41, the keys as written.
 *
 * The relay learns a domain's base type from the Type message pgoutput
 * sends before every Relation that has a column of it (the first of the
 * session for the second row). A third row comes after a domain made while
 * it streams (over bytea, with a domain over that) and the payload column
 * ALTERed to it: a Relation sent again, with the new domain's Type, and it
 * must still give the bytes.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static const char want[3] = {0x00, (char)0xff, 0x41};

int main(void)
{
        h_case_t k;
        h_case_open(&k, "domains", "slot_dom", "dom", 1, H_CASE_BARE);
        h_pg_exec(k.c, "CREATE DOMAIN evt_bytes AS bytea");
        h_pg_exec(k.c, "CREATE DOMAIN evt_text AS text");
        h_pg_exec(k.c, "CREATE DOMAIN evt_key AS evt_text CHECK (VALUE <> '')");
        h_pg_exec(k.c, "CREATE TABLE outbox (id uuid PRIMARY KEY, aggregatetype text NOT NULL, "
                       "aggregateid evt_key NOT NULL, type text NOT NULL, payload evt_bytes)");
#define INSERT "INSERT INTO outbox VALUES (gen_random_uuid(), '%s', '%s', 'T', '\\x00ff41')"
        h_pg_exec(k.c, INSERT, k.aggtype, "backfilled");

        const char *sets[] = {k.set_conn, k.set_kafka, k.set_slot, "snapshot.mode=initial", NULL};
        h_relay_t *r = h_relay_start(sets);
        ok(h_relay_streams(r, 60000), "the relay streams");
        h_pg_exec(k.c, INSERT, k.aggtype, "streamed");
        /* Made after the session started: the relay has not seen them. */
        h_pg_exec(k.c, "CREATE DOMAIN late_bytes AS bytea");
        h_pg_exec(k.c, "CREATE DOMAIN late_payload AS late_bytes CHECK (octet_length(VALUE) < 100)");
        h_pg_exec(k.c, "ALTER TABLE outbox ALTER COLUMN payload TYPE late_payload");
        h_pg_exec(k.c, INSERT, k.aggtype, "late domain");
        h_relayed_t rel;
        h_wait_relayed(k.c, k.slot, k.topic, 3, 60000, &rel);
        ok(rel.in_kafka == 3 && rel.confirmed, "all three events relayed (%lld in Kafka, confirmed %d)",
           (long long)rel.in_kafka, rel.confirmed);
        h_relayed_free(&rel);

        h_msg_t *m;
        size_t n = h_kafka_consume_all(k.topic, &m);
        for (size_t i = 0; i < n; i++) {
                bool bytes = m[i].value_len == sizeof(want) && memcmp(m[i].value, want, 3) == 0;
                if (!ok(bytes, "%s: the value is the bytes 00 FF 41 (%zu bytes)",
                        m[i].key ? m[i].key : "(null key)", m[i].value_len))
                        tap_diag("  got \"%.*s\"", (int)m[i].value_len, m[i].value);
        }
        const char *keys[] = {"backfilled", "streamed", "late domain", NULL};
        is_int((long)h_kafka_count_keys(k.topic, keys), 3, "keys as written");
        h_msgs_free(m, n);
        h_relay_stop(r, 60000);
        h_relay_free(r);
        h_case_close(&k);
        return done_testing();
}
