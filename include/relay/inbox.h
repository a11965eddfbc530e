/*
 * inbox.h - outbox-inbox's loop: a Kafka consumer group member that applies
 * each message once to PostgreSQL through the inbox table (sql/006_inbox.sql)
 * and a configured handler statement.
 *
 * For each message, one PostgreSQL transaction: inbox_accept(id, topic,
 * partition, offset), the handler if the id is new, COMMIT. Only then is the
 * message's offset stored for commit to Kafka. A crash before the COMMIT
 * leaves neither the inbox row nor the effect, and the offset uncommitted:
 * the message comes again and is applied. A crash after it leaves both: the
 * message may come again (its offset commit was lost) and inbox_accept()
 * refuses it. So an effect is never applied twice nor skipped.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_INBOX_H
#define RELAY_INBOX_H

#include <signal.h>

#include "relay/inbox_config.h"

/* Exit codes of outbox-inbox. */
enum {
        RELAY_INBOX_EXIT_OK = 0,      /* stopped by SIGTERM or SIGINT */
        RELAY_INBOX_EXIT_FATAL = 1,   /* Kafka client fatal error, partitions not given up,
                                       * stdout not written (not: its reader gone) */
        RELAY_INBOX_EXIT_CONFIG = 2,  /* bad command line or configuration */
        RELAY_INBOX_EXIT_SETUP = 3,   /* PostgreSQL refuses the connection for good, or the
                                       * inbox function or the handler does not prepare */
        RELAY_INBOX_EXIT_STOPPED = 4, /* stopped before a message it could not apply or dead-letter */
};

/**
 * @brief Consume until *stop is set (by a signal handler) or a fatal error,
 *        warning once for each SIGHUP counted in *hangups
 *        (relay_hangup_signal()) that nothing is reloaded. cfg is borrowed
 *        and must have passed relay_inbox_config_validate(). Logs its
 *        decisions (it is the program's main loop).
 * @returns an exit code above.
 */
int relay_inbox_run(const relay_inbox_config_t *cfg, volatile sig_atomic_t *stop,
                    const volatile sig_atomic_t *hangups);

#endif
