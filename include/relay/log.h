/*
 * log.h - the relay's one log sink: levels, text or JSON lines on stderr.
 *
 * Only the main loop and main() log; modules below it return errors instead
 * (relay_log_debug aside). Messages follow PostgreSQL's style: lower case, no
 * final period, "could not <verb> ...: <reason>", names in double quotes.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_LOG_H
#define RELAY_LOG_H

#include "relay/common.h"

/* log.level and log.format, in the order of their choices in src/config_keys.dat. */
typedef enum {
        RELAY_LOG_DEBUG = 0,
        RELAY_LOG_INFO = 1,
        RELAY_LOG_WARNING = 2,
        RELAY_LOG_ERROR = 3,
        RELAY_LOG_FATAL = 4,
} relay_log_level_t;

typedef enum {
        RELAY_LOG_TEXT = 0, /* PostgreSQL-like lines */
        RELAY_LOG_JSON = 1, /* one JSON object per line */
} relay_log_format_t;

/**
 * @brief Configure the lowest level logged and the line format (the
 *        log.level and log.format settings). Until called: info, text.
 */
void relay_log_configure(relay_log_level_t level, relay_log_format_t format);

/**
 * @brief "<N>", the sd-daemon(3) prefix of level's syslog priority, when
 *        stderr is the systemd journal (JOURNAL_STREAM names its device and
 *        inode), so that journald stores a warning as a warning; "" otherwise.
 *        relay_log() starts each line with it; a line written to stderr by
 *        other means (a command line error) may too. A static string.
 */
const char *relay_log_journal_prefix(relay_log_level_t level);

/**
 * @brief One line at level, as relay_log() writes it (text or JSON, with the
 *        journal's "<N>"), from a signal handler: async-signal-safe (no stdio,
 *        no allocation, a single write(2)). msg is a fixed ASCII string of up
 *        to ~400 bytes without newlines; longer is cut.
 */
void relay_log_signal_safe(relay_log_level_t level, const char *msg);

/**
 * @brief The UTC calendar date of secs seconds after the epoch (before it:
 *        the epoch's) by integer arithmetic, for relay_log_signal_safe():
 *        gmtime_r() is not async-signal-safe.
 */
void relay_log_utc_date(long long secs, int *year, int *month, int *day);

/** @brief Emit one line at level (dropped below the configured level). */
void relay_log(relay_log_level_t level, const char *fmt, ...) RELAY_PRINTF(2, 3);

/**
 * @brief A libpq notice processor (PQsetNoticeProcessor, arg unused): the
 *        server's NOTICE and WARNING messages on a connection (say
 *        "terminating connection due to immediate shutdown command") go
 *        through the sink like every other line, so log.format = json stays
 *        one JSON object per line. A pass-through of the server's words, not
 *        a decision, hence allowed below the loop. Install it right after
 *        PQconnectStart*() to hear the handshake too; a blocking
 *        PQconnectdb*() has no hook before the handshake.
 */
void relay_log_server_notice(void *arg, const char *message);

/**
 * @brief The warning that prog ("outbox-relay", "outbox-inbox") does not
 *        reload its configuration on SIGHUP, once for each SIGHUP counted
 *        in *received (relay_hangup_signal()) since *logged, which it
 *        advances. The loop calls it at every turn of its waits; the
 *        caller owns *logged.
 */
void relay_log_hangups(const char *prog, const volatile sig_atomic_t *received,
                       sig_atomic_t *logged);

#define relay_log_debug(...) relay_log(RELAY_LOG_DEBUG, __VA_ARGS__)
#define relay_log_info(...) relay_log(RELAY_LOG_INFO, __VA_ARGS__)
#define relay_log_warning(...) relay_log(RELAY_LOG_WARNING, __VA_ARGS__)
#define relay_log_error(...) relay_log(RELAY_LOG_ERROR, __VA_ARGS__)
#define relay_log_fatal(...) relay_log(RELAY_LOG_FATAL, __VA_ARGS__)

#endif
