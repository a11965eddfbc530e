/*
 * 0166-sighup.c - SIGHUP neither stops nor restarts the relay.
 *
 * PostgreSQL and PgBouncer reload their configuration on SIGHUP, so an
 * operator may well send it; the relay has no reload, and SIGHUP's default
 * action ended it at once (status 129, no drain: what was in flight was sent
 * again on the next start, and systemd counted a failure). Now it logs that a
 * restart applies a changed configuration and goes on streaming:
 *
 *   - after SIGHUP the relay says so (the warning names the restart) and is
 *     still running;
 *   - events committed before and after it all reach Kafka, once each;
 *   - SIGTERM afterwards is the usual clean stop, exit 0.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdlib.h>

#include "harness.h"

#define EVENTS 5

int main(void)
{
        h_case_t k;
        h_case_open(&k, "hup", "slot_hup", "hup", 1, 0);
        const char *sets[] = {k.set_conn, k.set_kafka, k.set_slot, "http.listen=off",
                              "shutdown.timeout.ms=5000", NULL};
        h_relay_t *r = h_relay_start(sets);
        if (!ok(h_relay_streams(r, 60000), "the relay streams"))
                h_relay_diag_log(r);

        char id[16];
        for (int i = 0; i < EVENTS; i++) {
                snprintf(id, sizeof(id), "a-%d", i);
                h_outbox_insert(k.c, k.aggtype, id);
        }
        is_int(h_kafka_wait_count(k.topic, EVENTS, 60000), EVENTS,
               "the first %d events are in Kafka", EVENTS);

        h_relay_signal(r, SIGHUP);
        if (!ok(h_relay_wait_log(r, "SIGHUP received, but outbox-relay does not reload its "
                                    "configuration: restart it",
                                 30000),
                "SIGHUP: the relay says that it does not reload, and that a restart applies "
                "a changed configuration"))
                h_relay_diag_log(r);
        int early = h_relay_wait(r, 0);
        if (!ok(early == -1, "the relay is still running after SIGHUP (exit status %d)", early))
                h_relay_diag_log(r);

        for (int i = 0; i < EVENTS; i++) {
                snprintf(id, sizeof(id), "b-%d", i);
                h_outbox_insert(k.c, k.aggtype, id);
        }
        h_relayed_t rel;
        h_wait_relayed(k.c, k.slot, k.topic, 2 * EVENTS, 60000, &rel);
        is_int(rel.in_kafka, 2 * EVENTS, "the %d events committed after SIGHUP are in Kafka too",
               EVENTS);
        ok(rel.confirmed, "and confirmed to PostgreSQL");
        h_relayed_free(&rel);

        is_int(h_relay_stop(r, 60000), 0, "SIGTERM after it: clean stop, exit 0");
        ok(!h_relay_wait_log(r, "FATAL", 0), "no FATAL line");
        is_int(h_kafka_count(k.topic), 2 * EVENTS, "each event is in Kafka once");
        h_relay_free(r);
        h_case_close(&k);
        return done_testing();
}
