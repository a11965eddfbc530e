/*
 * conffile.h - the "key = value" file format of both programs' --config
 * (outbox-relay and outbox-inbox): one grammar, one reader.
 *
 * A line is blank, a "#" comment, or key = value. Blanks around key and
 * value are dropped; an unquoted value ends at a "#" that follows a blank
 * ("a#b" stays a value: passwords); a double-quoted value keeps everything
 * inside, with \" \\ \n \t \r escapes. A UTF-8 byte order mark before the
 * first line is skipped; lines end in LF or CRLF. A NUL byte is an error
 * (not a text file), and so is a carriage return inside a line (CR-only
 * line ends, which would make the file one line) and a key set on two
 * lines of one file (the earlier would do nothing).
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_CONFFILE_H
#define RELAY_CONFFILE_H

#include <stddef.h>

#include "relay/common.h"

/**
 * @brief Takes one key and value of the file; origin is "PATH:LINE". All
 *        three are borrowed for the call. Returns 0 or a negative code with
 *        err filled (naming origin), which stops the reading.
 */
typedef int relay_conffile_set_fn(void *ctx, const char *key, const char *value,
                                  const char *origin, char *err, size_t errlen);

/**
 * @brief Read path, calling set for each key = value line in order.
 * @returns 0; RELAY_EINVAL (cannot open or read, a syntax error: err names
 *          the file and line); RELAY_ENOMEM; or set's code.
 */
int relay_conffile_load(const char *path, relay_conffile_set_fn *set, void *ctx, char *err,
                        size_t errlen) RELAY_MUST_CHECK;

#endif
