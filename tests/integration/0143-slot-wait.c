/*
 * 0143-slot-wait.c - the loop stays alive while creating the slot waits.
 *
 * CREATE_REPLICATION_SLOT waits until every transaction running when it
 * began has ended, however long that is. A session holds a transaction
 * (with an xid) open in the relay's database; a relay with a new slot and
 * http.liveness.timeout.ms = 1000 starts, and its walsender is seen waiting
 * on that transaction's lock. Three liveness timeouts later /healthz must
 * still answer 200 (the loop turns: the same turns feed the systemd
 * watchdog), the creation still waiting. SIGTERM then ends the relay with
 * exit 0 although the transaction is still open, and no slot is left. With
 * the transaction ended, a relay creates the slot and relays an event.
 *
 * Port: RELAY_TEST_HTTP_PORT (default 19140) + 4.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tap.h"

/* Whether the walsender of the relay's database waits in CREATE_REPLICATION_SLOT on a lock. */
static bool creation_waits(PGconn *c, const char *db)
{
        char *v = h_pg_value(c,
                             "SELECT count(*) FROM pg_stat_activity WHERE datname = '%s' "
                             "AND backend_type = 'walsender' AND wait_event_type = 'Lock' "
                             "AND query LIKE 'CREATE_REPLICATION_SLOT%%'",
                             db);
        bool waits = strcmp(v, "0") != 0;
        free(v);
        return waits;
}

static long slot_count(PGconn *c, const char *slot)
{
        char *v = h_pg_value(c, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '%s'",
                             slot);
        long n = strtol(v, NULL, 10);
        free(v);
        return n;
}

int main(void)
{
        int port = h_http_port(4);
        char *db = h_pg_create_db("slotwait");
        char *slot = h_unique_name("slot_wait");
        char *agg = h_unique_name("SlotWait");
        char *ci = h_pg_conninfo(db);
        char set_conn[512], set_kafka[256], set_slot[128], set_http[64], topic[300];
        snprintf(set_conn, sizeof(set_conn), "postgres.conninfo=%s", ci);
        snprintf(set_kafka, sizeof(set_kafka), "kafka.bootstrap.servers=%s", h_kafka_bootstrap());
        snprintf(set_slot, sizeof(set_slot), "slot.name=%s", slot);
        snprintf(set_http, sizeof(set_http), "http.listen=127.0.0.1:%d", port);
        snprintf(topic, sizeof(topic), "outbox.event.%s", agg);
        const char *sets[] = {set_conn, set_kafka, set_slot, set_http,
                              "http.liveness.timeout.ms=1000", NULL};
        PGconn *c = h_pg_connect(db);
        h_pg_create_outbox(c, "outbox");

        PGconn *holder = h_pg_connect(db);
        h_pg_exec(holder, "BEGIN");
        h_pg_exec(holder, "SELECT pg_current_xact_id()");

        h_relay_t *r = h_relay_start(sets);
        int64_t deadline = h_now_ms() + 60000;
        bool waits;
        while (!(waits = creation_waits(c, db)) && h_now_ms() < deadline)
                h_sleep_ms(100);
        if (!ok(waits, "creating the slot waits for the open transaction"))
                h_relay_diag_log(r);
        h_sleep_ms(3000);
        char *body = NULL;
        int st = h_http_request(port, "GET", "/healthz", 2000, &body);
        is_int(st, 200, "/healthz: 200 after 3 s of waiting, liveness timeout 1 s: %s",
               body ? body : "");
        free(body);
        ok(creation_waits(c, db), "the creation still waits meanwhile");

        h_relay_signal(r, SIGTERM);
        int rc = h_relay_wait(r, 30000);
        is_int(rc, 0, "SIGTERM ends the relay (exit 0) while the transaction is still open");
        if (rc != 0)
                h_relay_diag_log(r);
        h_relay_free(r);
        is_int(slot_count(c, slot), 0, "no slot is left behind");

        h_pg_exec(holder, "COMMIT");
        PQfinish(holder);
        r = h_relay_start(sets);
        ok(h_relay_wait_log(r, "streaming from replication slot", 60000),
           "with the transaction ended, the relay creates the slot and streams");
        h_pg_exec(c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES "
                  "(gen_random_uuid(), '%s', 'a1', 'Waited', '{}')",
                  agg);
        is_int(h_kafka_wait_count(topic, 1, 60000), 1, "Kafka holds the event");
        h_relay_signal(r, SIGTERM);
        is_int(h_relay_wait(r, 30000), 0, "relay stops cleanly");
        h_relay_free(r);

        PQfinish(c);
        h_pg_drop_db(db);
        free(ci);
        free(agg);
        free(slot);
        free(db);
        return done_testing();
}
