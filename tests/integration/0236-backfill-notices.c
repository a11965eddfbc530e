/*
 * 0236-backfill-notices.c - what the server says on the backfill's
 * connection comes through the relay's log sink, not as a raw line on
 * stderr (as on the replication and side connections, 0204).
 *
 * snapshot.mode = initial with log.format = json, and a snapshot.filter
 * calling a function that raises a WARNING for each row. The relay's log
 * must hold that warning as a JSON line, and no line that is not JSON (it
 * used to get libpq's default: "WARNING:  ..." on stderr, between the JSON
 * lines, as for the server's "terminating connection due to immediate
 * shutdown command" when it restarts during a backfill). Kafka must hold the
 * row.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"

int main(void)
{
        fx_case_t fc;
        char topic[300];
        fx_case_open(&fc, "bfnotice", "bn");
        snprintf(topic, sizeof(topic), "outbox.event.%s", fc.suffix);
        h_pg_create_outbox(fc.c, "outbox");
        h_pg_exec(fc.c, "CREATE FUNCTION public.noisy_filter() RETURNS boolean LANGUAGE plpgsql "
                        "AS $$BEGIN RAISE WARNING 'noisy backfill filter'; RETURN true; END$$");
        h_pg_exec(fc.c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES "
                  "(gen_random_uuid(), '%s', 'backfilled', 'Backfilled', '{}')",
                  fc.suffix);
        fx_sets_init(&fc.sets, fc.db, fc.slot, NULL);
        fx_sets_add(&fc.sets, "%s", "snapshot.mode=initial");
        fx_sets_add(&fc.sets, "%s", "snapshot.filter=public.noisy_filter()");
        fx_sets_add(&fc.sets, "%s", "log.format=json");
        h_relay_t *r = fx_case_relay(&fc, "the relay backfills and streams");
        is_int((int)h_kafka_wait_count(topic, 1, 60000), 1, "Kafka holds the backfilled row");
        fx_stop_relay(r, "relay stops cleanly");

        ok(fx_log_count(r, "\"msg\":\"PostgreSQL server: noisy backfill filter") > 0,
           "the filter's warning came through the log sink as a JSON line");
        char *log = h_relay_log(r);
        int raw = 0;
        for (char *line = log; line && *line; line = strchr(line, '\n')) {
                if (*line == '\n')
                        line++;
                if (*line && *line != '{' && *line != '\n')
                        raw++;
        }
        is_int(raw, 0, "every line of the relay's log is JSON");
        if (raw)
                h_relay_diag_log(r);
        free(log);
        h_relay_free(r);
        fx_case_close(&fc, NULL);
        return done_testing();
}
