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

typedef enum {
        RELAY_LOG_DEBUG = 0,
        RELAY_LOG_INFO = 1,
        RELAY_LOG_WARNING = 2,
        RELAY_LOG_ERROR = 3,
        RELAY_LOG_FATAL = 4,
} relay_log_level_t;

/**
 * @brief Configure: level name ("debug", "info", "warning", "error") and
 *        format ("text" or "json").
 * @returns 0 or RELAY_EINVAL for an unknown name (nothing changed).
 */
int relay_log_configure(const char *level, const char *format, char *err, size_t errlen) RELAY_MUST_CHECK;

/** @brief Emit one line at level (dropped below the configured level). */
void relay_log(relay_log_level_t level, const char *fmt, ...) RELAY_PRINTF(2, 3);

#define relay_log_debug(...) relay_log(RELAY_LOG_DEBUG, __VA_ARGS__)
#define relay_log_info(...) relay_log(RELAY_LOG_INFO, __VA_ARGS__)
#define relay_log_warning(...) relay_log(RELAY_LOG_WARNING, __VA_ARGS__)
#define relay_log_error(...) relay_log(RELAY_LOG_ERROR, __VA_ARGS__)
#define relay_log_fatal(...) relay_log(RELAY_LOG_FATAL, __VA_ARGS__)

#endif
