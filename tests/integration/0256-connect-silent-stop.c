/*
 * 0256-connect-silent-stop.c - a PostgreSQL host that accepts the TCP
 * connection and never answers (the test's own socket, never accepted
 * from while the programs connect: the kernel completes the handshake,
 * nothing replies), for the relay and outbox-inbox themselves:
 *   - with connect_timeout=2, one attempt of the relay is one connection
 *     to it, as libpq's own connect makes (it was two: at the timeout,
 *     PQreset() connected again from the first host), and says libpq's
 *     "timeout expired";
 *   - without connect_timeout, SIGTERM during the connect stops the relay,
 *     exit 0 and "stopped" (it was not seen until the connect ended: never,
 *     against a host that stays silent);
 *   - the same for outbox-relay tail (exit 0), and for outbox-inbox,
 *     which says it stopped while connecting.
 * The connections are counted from the listener's queue once the program
 * has exited.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "faults/faults.h"
#include "harness.h"

/* Wait up to 30 s for a connection to the listener, without accepting it. */
static bool connected_to(int fd)
{
        struct pollfd p = {.fd = fd, .events = POLLIN};
        return poll(&p, 1, 30000) == 1;
}

static void relay_sets(fx_sets_t *s, int port, const char *timeout, const char *slot)
{
        memset(s, 0, sizeof(*s));
        fx_sets_add(s, "postgres.conninfo=host=127.0.0.1 port=%d user=%s dbname=postgres%s", port,
                    h_env("RELAY_TEST_PGUSER"), timeout);
        fx_sets_add(s, "kafka.bootstrap.servers=%s", h_kafka_bootstrap());
        fx_sets_add(s, "slot.name=%s", slot);
        /* One attempt: the next one would be minutes away. */
        fx_sets_add(s, "reconnect.backoff.ms=600000");
        fx_sets_add(s, "reconnect.backoff.max.ms=600000");
}

static bool log_has(h_relay_t *r, const char *needle)
{
        char *log = h_relay_log(r);
        bool has = strstr(log, needle) != NULL;
        free(log);
        return has;
}

/* p (freed here) connects to the silent host: SIGTERM stops it, exit 0,
 * saying said (NULL: nothing to look for), after one connection. */
static void stop_connecting(h_relay_t *p, int silent, const char *who, const char *said)
{
        ok(connected_to(silent), "%s connects to the silent host", who);
        h_relay_signal(p, SIGTERM);
        int rc = h_relay_wait(p, 60000);
        if (!ok(rc == 0, "SIGTERM during the connect: %s exits 0 (got %d)", who, rc))
                h_relay_diag_log(p);
        if (said)
                ok(rc == 0 && log_has(p, said), "and says \"%s\"", said);
        h_relay_free(p);
        is_int(h_silent_connections(silent), 1, "one connection to the silent host");
}

int main(void)
{
        int port;
        int silent = h_silent_listener(&port);
        char *slot = h_unique_name("csilent");
        fx_sets_t s;

        /* connect_timeout=2: one attempt, then the backoff's wait. */
        relay_sets(&s, port, " connect_timeout=2", slot);
        h_relay_t *r = h_relay_start(s.v);
        fx_sets_free(&s);
        if (!ok(h_relay_wait_log(r, "retrying in", 60000),
                "connect_timeout=2: the relay's attempt failed and waits for the next"))
                h_relay_diag_log(r);
        ok(log_has(r, "timeout expired"), "with libpq's \"timeout expired\"");
        h_relay_signal(r, SIGTERM);
        is_int(h_relay_wait(r, 60000), 0, "SIGTERM in the backoff's wait: exit 0");
        h_relay_free(r);
        is_int(h_silent_connections(silent), 1,
               "the attempt made one connection to the silent host");

        /* No connect_timeout: only the stop ends the connect. */
        relay_sets(&s, port, "", slot);
        stop_connecting(h_relay_start(s.v), silent, "the relay", "stopped");
        fx_sets_free(&s);

        /* outbox-relay tail connects the same way (its own stop flag). */
        relay_sets(&s, port, "", slot);
        stop_connecting(h_relay_start_cmd("tail", NULL, s.v), silent, "outbox-relay tail", NULL);
        fx_sets_free(&s);

        memset(&s, 0, sizeof(s));
        fx_sets_add(&s, "postgres.conninfo=host=127.0.0.1 port=%d user=%s dbname=postgres", port,
                    h_env("RELAY_TEST_PGUSER"));
        fx_sets_add(&s, "kafka.bootstrap.servers=%s", h_kafka_bootstrap());
        fx_sets_add(&s, "inbox.topics=%s", slot);
        fx_sets_add(&s, "inbox.handler=SELECT 1");
        fx_sets_add(&s, "kafka.group.id=%s", slot);
        stop_connecting(h_proc_start(h_env("RELAY_INBOX_BIN"), NULL, NULL, s.v), silent,
                        "outbox-inbox", "stopped while connecting to PostgreSQL");
        fx_sets_free(&s);

        close(silent);
        free(slot);
        return done_testing();
}
