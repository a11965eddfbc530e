/*
 * notify.h - tell a service manager (systemd, Type=notify) how the relay is
 * doing: ready (streaming, standing by, or backing off to retry), alive
 * (watchdog), stopping.
 *
 * Built with libsystemd these are sd_notify() calls, which do nothing when
 * the process was not started by systemd (no NOTIFY_SOCKET); built without
 * it they are no-ops. None can fail in a way the caller must handle.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_NOTIFY_H
#define RELAY_NOTIFY_H

/**
 * @brief READY=1 with status as the unit's status text (borrowed; only its
 *        first line is sent). Call when streaming starts, when standing by,
 *        and when backing off to retry (the configuration is good: the relay
 *        runs, even while its servers are away); repeating it is harmless.
 */
void relay_notify_ready(const char *status);

/**
 * @brief WATCHDOG=1, when the service manager asked for a watchdog
 *        (WatchdogSec=). Call once per turn of the main loop, from the main
 *        loop's thread: a loop that stops turning is what the watchdog must
 *        catch. Sends at most once per quarter of the watchdog interval, so
 *        calling it on every turn costs a clock read.
 */
void relay_notify_watchdog(void);

/**
 * @brief STATUS= alone: what the relay does before it is ready (a
 *        backfill). status is borrowed; only its first line is sent, as
 *        STATUS= is one line.
 */
void relay_notify_status(const char *status);

/**
 * @brief EXTEND_TIMEOUT_USEC=: the start is still making progress (a
 *        backfill, which runs before READY=1), so the service manager must
 *        not end it at TimeoutStartSec: a backfill cut there starts over at
 *        the next start, sending again what it had sent, for ever. Each
 *        message allows 30 s more; call at every step of the work, from the
 *        main loop's thread: it sends at most every 5 s, so a backfill that
 *        stops stepping lets the start time out again.
 */
void relay_notify_extend_start(void);

/** @brief STOPPING=1: a stop was requested and the relay is draining. */
void relay_notify_stopping(void);

#endif
