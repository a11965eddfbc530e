/*
 * notify.c - sd_notify() messages for systemd's Type=notify and WatchdogSec=
 * (see notify.h); no-ops when built without libsystemd.
 *
 * Owns the watchdog interval (read once from WATCHDOG_USEC by libsystemd)
 * and the time of the last ping: process-wide facts, like the signal flags,
 * so they are file statics rather than part of a session.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/notify.h"

#ifdef RELAY_HAVE_LIBSYSTEMD

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <systemd/sd-daemon.h>

/* relay_notify_extend_start(): each message allows this much more, and is
 * sent at most this often (so a few messages may be lost in between). */
#define EXTEND_USEC (30u * 1000000u)
#define EXTEND_EVERY_USEC (5u * 1000000u)

static bool watchdog_checked;
static uint64_t watchdog_usec; /* 0: no watchdog asked for */
static uint64_t last_ping_usec;
static uint64_t last_extend_usec;

static uint64_t now_usec(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

void relay_notify_ready(const char *status)
{
        sd_notifyf(0, "READY=1\nSTATUS=%.*s", (int)strcspn(status, "\n"), status);
}

void relay_notify_watchdog(void)
{
        if (!watchdog_checked) {
                watchdog_checked = true;
                if (sd_watchdog_enabled(0, &watchdog_usec) <= 0)
                        watchdog_usec = 0;
        }
        if (watchdog_usec == 0)
                return;
        uint64_t now = now_usec();
        if (last_ping_usec != 0 && now - last_ping_usec < watchdog_usec / 4)
                return;
        last_ping_usec = now;
        sd_notify(0, "WATCHDOG=1");
}

void relay_notify_status(const char *status)
{
        sd_notifyf(0, "STATUS=%.*s", (int)strcspn(status, "\n"), status);
}

void relay_notify_extend_start(void)
{
        uint64_t now = now_usec();
        if (last_extend_usec != 0 && now - last_extend_usec < EXTEND_EVERY_USEC)
                return;
        last_extend_usec = now;
        sd_notifyf(0, "EXTEND_TIMEOUT_USEC=%llu", (unsigned long long)EXTEND_USEC);
}

void relay_notify_stopping(void)
{
        sd_notify(0, "STOPPING=1\nSTATUS=stopping: draining what is in flight");
}

#else

void relay_notify_ready(const char *status)
{
        (void)status;
}

void relay_notify_watchdog(void)
{
}

void relay_notify_status(const char *status)
{
        (void)status;
}

void relay_notify_extend_start(void)
{
}

void relay_notify_stopping(void)
{
}

#endif
