/*
 * relay.h - the supervisor: runs sessions (session.h: replication client
 * -> pgoutput decoder -> outbox mapping -> producer -> ack tracker ->
 * confirmed LSN) one after another and decides what every ending means
 * (retry, stand by, stop with an exit code).
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_RELAY_H
#define RELAY_RELAY_H

#include "relay/config.h"
#include "relay/settings.h"

/* Process exit codes (documented in README). */
enum {
        RELAY_EXIT_OK = 0,       /* clean stop after SIGTERM/SIGINT */
        RELAY_EXIT_FATAL = 1,    /* fatal stream or protocol error */
        RELAY_EXIT_CONFIG = 2,   /* bad command line or configuration */
        RELAY_EXIT_SETUP = 3,    /* server or broker not usable: version, wal_level,
                                  * privilege, missing table, unreachable at start */
        RELAY_EXIT_EVENT = 4,    /* stopped before an event that could not be mapped or that
                                  * Kafka rejected (policy stop, or the dead-letter write failed) */
        RELAY_EXIT_SLOTLOST = 5, /* the replication slot was dropped or invalidated */
        RELAY_EXIT_FENCED = 6,   /* exactly-once: a newer relay took over the transactional.id */
};

/**
 * @brief Install the SIGTERM/SIGINT handlers (first: graceful stop; second:
 *        immediate exit) and ignore SIGPIPE. Call first thing in main(), so a
 *        stop requested during start-up is a clean stop too.
 * @returns 0, or RELAY_ESETUP with a message in err (relay_stop_signals()).
 */
int relay_install_signals(char *err, size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief Run until a signal or a fatal error (relay_install_signals() must
 *        have run). cfg (validated; the producer reads its kafka.* pairs)
 *        and set (loaded from cfg) are borrowed for the whole run.
 * @returns one of the RELAY_EXIT_* codes.
 */
int relay_run(const relay_config_t *cfg, const relay_settings_t *set);

#endif
