/*
 * 0255-slotmon-step-gap.c - the slot monitor (slotmon.c) counts against its
 * 10 s deadline only the time in which it is stepped: a gap between two
 * steps (the supervisor's wait between two sessions, the next session's
 * start) is time in which nobody looked, and a query the server answers
 * after such a gap, but within 10 s of steps, is an answer, not a timeout.
 *
 * 0160 covers an answer that came during the gap (the socket is read
 * before the deadline is looked at); this covers one that comes after it,
 * which the deadline's extension alone lets through. The monitor is
 * stepped here with a clock of the test's own (relay_slotmon_step() takes
 * the time it is stepped at), so no wait of the test decides the outcome:
 * its query held on a lock (pg_publication ACCESS EXCLUSIVE, as 0160), a
 * step 500 ms after the query was sent, one 30 s later (the gap), the
 * lock given up, then steps 50 ms apart until the answer comes. A query
 * held while the monitor is stepped every 500 ms still times out, saying
 * why.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"
#include "relay/slotmon.h"

/* Step sm at *now, advancing it by step_ms (and the real time by 50 ms)
 * until it says something or the test's clock reaches until. */
static int step_until(relay_slotmon_t *sm, int64_t *now, int64_t step_ms, int64_t until,
                      char *err, size_t errlen)
{
        relay_slot_info_t si;
        int rc = 0;
        while (rc == 0 && *now < until) {
                *now += step_ms;
                rc = relay_slotmon_step(sm, *now, &si, err, errlen);
                if (rc == 0)
                        h_sleep_ms(50);
        }
        return rc;
}

/* Whether the monitor's query waits for a lock (within 30 s). */
static bool monitor_waits(PGconn *c, const char *db)
{
        int64_t until = h_now_ms() + 30000;
        while (!h_pg_slotmon_waits(c, db) && h_now_ms() < until)
                h_sleep_ms(100);
        return h_pg_slotmon_waits(c, db);
}

int main(void)
{
        fx_case_t fc;
        char err[512] = "";
        relay_slot_info_t si;
        fx_case_open(&fc, "slotmonstepgap", "sp");
        char *conninfo = h_pg_conninfo(fc.db);
        relay_slotmon_t *sm = relay_slotmon_new(conninfo, fc.slot, "", NULL, 0);
        if (!sm)
                tap_bail("out of memory");

        /* Connected, first answer: 100 ms steps. */
        int64_t now = 1000000;
        int rc = step_until(sm, &now, 100, now + 9000, err, sizeof(err));
        ok(rc == 1, "the monitor connects and reads the slot (rc %d: %s)", rc, err);

        PGconn *holder = h_pg_connect(fc.db);
        h_pg_exec(holder, "BEGIN");
        h_pg_exec(holder, "LOCK TABLE pg_catalog.pg_publication IN ACCESS EXCLUSIVE MODE");
        /* The next query goes RELAY_SLOTMON_INTERVAL_MS after the answer. */
        now += RELAY_SLOTMON_INTERVAL_MS;
        rc = relay_slotmon_step(sm, now, &si, err, sizeof(err));
        ok(rc == 0 && monitor_waits(fc.c, fc.db), "its next query waits for the lock (rc %d)", rc);
        now += 500;
        rc = relay_slotmon_step(sm, now, &si, err, sizeof(err));
        ok(rc == 0, "500 ms later it waits (rc %d: %s)", rc, err);
        now += 30000;
        err[0] = '\0';
        rc = relay_slotmon_step(sm, now, &si, err, sizeof(err));
        if (!ok(rc == 0, "stepped again after a gap of 30 s: no timeout, it waits"))
                tap_diag("rc %d: %s", rc, err);
        h_pg_exec(holder, "COMMIT");
        rc = step_until(sm, &now, 50, now + 5000, err, sizeof(err));
        ok(rc == 1, "the answer that came after the gap is taken (rc %d: %s)", rc, err);

        /* A real timeout: the query held while stepped every 500 ms. */
        h_pg_exec(holder, "BEGIN");
        h_pg_exec(holder, "LOCK TABLE pg_catalog.pg_publication IN ACCESS EXCLUSIVE MODE");
        now += RELAY_SLOTMON_INTERVAL_MS;
        rc = relay_slotmon_step(sm, now, &si, err, sizeof(err));
        int64_t sent = now;
        ok(rc == 0 && monitor_waits(fc.c, fc.db), "a query held again (rc %d)", rc);
        rc = step_until(sm, &now, 500, now + 20000, err, sizeof(err));
        ok(rc < 0 && now - sent > 10000 &&
                   strstr(err, "could not read the slot: the server did not answer the query "
                               "within 10 s") != NULL,
           "stepped every 500 ms, it times out after 10 s, saying why (rc %d after %lld ms: %s)",
           rc, (long long)(now - sent), err);
        h_pg_exec(holder, "COMMIT");
        PQfinish(holder);

        relay_slotmon_free(sm);
        free(conninfo);
        fx_case_close(&fc, NULL);
        return done_testing();
}
