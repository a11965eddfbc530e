/*
 * 0233-slotmon-connect-gap.c - the slot monitor's connection attempt
 * (slotmon.c) against the environment's PostgreSQL, stepped as the relay
 * steps it but with a gap of 20 s of the loop's clock between two steps,
 * as the supervisor's wait between sessions makes one: the server answered
 * meanwhile, so the attempt goes on and the query is answered; no timeout.
 * Then a server that never answers (a listening socket nobody accepts on)
 * stepped every 250 ms: a timeout after 10 s whose message is a whole
 * sentence, not libpq's unfinished "connection to server at ... failed:".
 *
 * The monitor used to give up on the first step after the gap, with
 * "could not connect to read the slot (timeout): connection to server at
 * \"127.0.0.1\", port N failed:" (what a reviewer saw during repeated
 * walsender kills), and its real timeout said the same.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "relay/slotmon.h"

int main(void)
{
        char err[RELAY_ERRBUF] = "";
        relay_slot_info_t si;
        char *db = h_pg_create_db("slotmongap");
        char *conninfo = h_pg_conninfo(db);
        relay_slotmon_t *sm = relay_slotmon_new(conninfo, "no_such_slot", "", NULL, 0);
        if (sm == NULL)
                tap_bail("out of memory");

        /* t = 0: the attempt starts; then 20 s of the loop's clock pass
         * without a step, while the server answers (real time: 300 ms). */
        int64_t t = 0;
        int rc = relay_slotmon_step(sm, t, &si, err, sizeof(err));
        is_int(rc, 0, "the connection attempt starts: %s", err);
        h_sleep_ms(300);
        t = 20000;
        rc = 0;
        for (int i = 0; i < 200 && rc == 0; i++, t += 250) {
                rc = relay_slotmon_step(sm, t, &si, err, sizeof(err));
                h_sleep_ms(20);
        }
        is_int(rc, 1, "after the gap the attempt goes on and the query is answered");
        is_str(err, "", "no error: %s", err);
        relay_slotmon_free(sm);

        /* A server that never answers: the kernel completes the TCP
         * handshake (backlog), nobody reads the startup packet. */
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t alen = sizeof(a);
        if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 4) != 0 ||
            getsockname(fd, (struct sockaddr *)&a, &alen) != 0)
                tap_bail("could not listen on loopback");
        char mute[128];
        snprintf(mute, sizeof(mute), "host=127.0.0.1 port=%d dbname=x user=x",
                 ntohs(a.sin_port));
        sm = relay_slotmon_new(mute, "no_such_slot", "", NULL, 0);
        if (sm == NULL)
                tap_bail("out of memory");
        err[0] = '\0';
        rc = 0;
        for (t = 0; t < 30000 && rc == 0; t += 250) {
                rc = relay_slotmon_step(sm, t, &si, err, sizeof(err));
                h_sleep_ms(5);
        }
        is_int(rc, RELAY_EIO, "a server that never answers: the attempt is given up");
        is_str(err,
               "could not connect to read the slot: the server did not complete the connection "
               "within 10 s",
               "the timeout says why in a whole sentence");
        relay_slotmon_free(sm);
        close(fd);

        free(conninfo);
        h_pg_drop_db(db);
        free(db);
        return done_testing();
}
