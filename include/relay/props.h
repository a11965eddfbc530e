/*
 * props.h - java.util.Properties text as Properties.load() reads it: the
 * format of Debezium Server's application.properties (dbzconf.c) and of the
 * span context Debezium's tracing writes into the outbox row (outbox.c).
 *
 * A logical line: leading blanks (space, tab, form feed) dropped; a line
 * whose first non-blank is '#' or '!' is a comment, never continued; a line
 * ending in an odd number of backslashes continues on the next, whose
 * leading blanks are dropped; lines end at \n, \r or \r\n. Its key runs up
 * to the first unescaped '=', ':' or blank; blanks, then one '=' or ':',
 * then blanks separate it from the value, which keeps its trailing blanks.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_PROPS_H
#define RELAY_PROPS_H

#include <stdbool.h>
#include <stddef.h>

/** @brief One logical line: key at line[0..klen), value at line[vstart..len). */
typedef struct {
        size_t len, klen, vstart;
} relay_props_line_t;

/**
 * @brief The next logical line of text[*pos..n), joined into line (the
 *        caller's, with room for n bytes: a logical line is never longer
 *        than the text); escapes are left for relay_props_unescape().
 * @returns false when only blank lines and comments are left.
 */
bool relay_props_next(const char *text, size_t n, size_t *pos, char *line,
                      relay_props_line_t *out);

/**
 * @brief Resolve the escapes of s[0..n) into out, NUL-terminated: \t \n \r
 *        \f, \uXXXX as UTF-8 (a surrogate pair joined), and a backslash
 *        before anything else stands for that character. The text never
 *        grows (\uXXXX is 6 bytes for at most 3), so out needs n + 1 bytes.
 * @returns the length written, or -1 for a malformed \u (not four hex
 *          digits, or a lone surrogate), which Java refuses too.
 */
long relay_props_unescape(const char *s, size_t n, char *out);

#endif
