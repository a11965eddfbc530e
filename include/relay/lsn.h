/*
 * lsn.h - parse and format WAL positions ("16/B374D848").
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_LSN_H
#define RELAY_LSN_H

#include "relay/common.h"

/**
 * @brief Parse "X/X" (each half 1 to 8 hex digits, nothing else).
 * @returns 0 and *out set, or RELAY_EINVAL (out untouched).
 */
int relay_lsn_parse(const char *s, relay_lsn_t *out) RELAY_MUST_CHECK;

/**
 * @brief Format into buf (at least RELAY_LSN_BUFSZ bytes); returns buf.
 */
#define RELAY_LSN_BUFSZ 18
char *relay_lsn_format(relay_lsn_t lsn, char *buf);

#endif
