/*
 * 0227-eos-read-alive.c - the loop stays alive, and a stop is heard, while
 * the exactly-once checkpoint read waits.
 *
 * Under delivery.mode = exactly-once a session starts its stream, then
 * reads its checkpoint back; that read waits while another producer's
 * transaction is open on the checkpoint topic, up to 30 s (0218, 0220).
 * Meanwhile the relay must feed the systemd watchdog (WatchdogSec= kills a
 * service that stops sending WATCHDOG=1) and must end on SIGTERM, as it
 * does while creating the slot waits (0143-slot-wait). Before, the read
 * only sent status updates: no WATCHDOG=1 for as long as it waited, and a
 * SIGTERM waited for the read's 30 s to run out.
 *
 * Here the relay gets a NOTIFY_SOCKET and WATCHDOG_USEC = 400 ms (a
 * WATCHDOG=1 at least every 100 ms while alive); the test reads the socket
 * as systemd does. While the read waits (the stream active, no
 * "exactly-once: transactional.id" logged), 3 s must bring WATCHDOG=1, and
 * SIGTERM must end the relay with exit 0 within 15 s, half the read's
 * 30 s, the other transaction still open. With that transaction ended a
 * relay streams and relays an event.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "faults/faults.h"
#include "harness.h"

/* Read every datagram waiting on fd; count the WATCHDOG=1 among them. */
static int drain(int fd)
{
        char buf[4096];
        int n = 0;
        ssize_t len;
        while ((len = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT)) > 0) {
                buf[len] = '\0';
                if (strstr(buf, "WATCHDOG=1"))
                        n++;
        }
        return n;
}

/* Sleep ms, reading the socket meanwhile; returns the WATCHDOG=1 seen. */
static int listen_for(int fd, int ms)
{
        int n = 0;
        int64_t end = h_now_ms() + ms;
        while (h_now_ms() < end) {
                n += drain(fd);
                h_sleep_ms(20);
        }
        return n + drain(fd);
}

int main(void)
{
        fx_case_t fc;
        char topic[300];
        fx_case_open(&fc, "eosalive", "ea");
        snprintf(topic, sizeof(topic), "outbox.event.%s", fc.suffix);
        h_pg_create_outbox(fc.c, "outbox");
        fx_held_checkpoint_t held;
        fx_held_checkpoint_open(&held, &fc);

        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof(sa.sun_path), "/tmp/orelay-0227-%ld.sock", (long)getpid());
        unlink(sa.sun_path);
        int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
                tap_bail("notify socket %s: %s", sa.sun_path, strerror(errno));

        fx_sets_init(&fc.sets, fc.db, fc.slot, NULL);
        fx_sets_add(&fc.sets, "delivery.mode=exactly-once");
        fx_sets_add(&fc.sets, "eos.checkpoint.topic=%s", held.topic);
        setenv("NOTIFY_SOCKET", sa.sun_path, 1);
        setenv("WATCHDOG_USEC", "400000", 1);
        h_relay_t *r = h_relay_start(fc.sets.v);
        unsetenv("NOTIFY_SOCKET");
        unsetenv("WATCHDOG_USEC");

        int64_t deadline = h_now_ms() + 60000;
        bool active;
        while (!(active = fx_slot(fc.c, fc.slot).active_pid != 0) && h_now_ms() < deadline) {
                drain(fd);
                h_sleep_ms(100);
        }
        if (!ok(active, "the relay starts its stream"))
                h_relay_diag_log(r);
        listen_for(fd, 500); /* what came before the read */
        int pings = listen_for(fd, 3000);
        char *log = h_relay_log(r);
        bool waiting = strstr(log, "exactly-once: transactional.id") == NULL;
        free(log);
        ok(waiting, "its checkpoint read waits for the other transaction");
        if (!ok(pings > 0, "the relay sends WATCHDOG=1 while the read waits (%d in 3 s)", pings))
                h_relay_diag_log(r);

        h_relay_signal(r, SIGTERM);
        int rc = -1;
        for (int64_t end = h_now_ms() + 15000; rc == -1 && h_now_ms() < end;) {
                drain(fd);
                rc = h_relay_wait(r, 100);
        }
        if (!ok(rc == 0, "SIGTERM ends the relay (exit 0) within 15 s while the read waits "
                         "(exit code %d, -1: still running)", rc))
                h_relay_diag_log(r);
        h_relay_free(r);
        close(fd);
        unlink(sa.sun_path);

        fx_held_checkpoint_release(&held);
        r = fx_case_relay(&fc, "with the other transaction ended, a relay streams");
        h_pg_exec(fc.c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES "
                  "(gen_random_uuid(), '%s', 'a1', 'Alive', '{}')",
                  fc.suffix);
        /* The high watermark counts the transaction's marker too. */
        h_kafka_wait_count(topic, 2, 60000);
        h_msg_t *m;
        size_t n = h_kafka_consume_all(topic, &m);
        h_msgs_free(m, n);
        is_int((long)n, 1, "Kafka holds the event");
        fx_stop_relay(r, "relay stops cleanly");
        h_relay_free(r);
        fx_held_checkpoint_close(&held);
        fx_case_close(&fc, NULL);
        return done_testing();
}
