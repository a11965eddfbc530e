/*
 * route.h - Debezium's route.topic.regex and route.topic.replacement as
 * Kafka Connect's RegexRouter applies them to the routing value: the
 * pattern must match the whole value (Matcher.matches()), and then the
 * topic is the replacement with $n, ${name} and \x expanded
 * (Matcher.replaceFirst()); a value it does not match is the topic as is.
 *
 * Java's pattern is translated into a POSIX extended regular expression
 * (regcomp(3), no new dependency): named and non-capturing groups, \d \w \s
 * and their negations, escapes and \Q..\E, classes, quantifiers including {n,m}, and a
 * leading (?i). Constructs POSIX has no equivalent for (lazy and possessive
 * quantifiers, lookaround, back references, \b, \p{..}, inline
 * flags elsewhere, a quantifier right after another) are refused at start
 * with a message naming them. Two differences remain (README): POSIX
 * takes the leftmost-longest match, so an ambiguous pattern's groups may
 * split a value differently than Java's first-alternative-wins (and Java's
 * replaceFirst() keeps what follows a shorter first match); and '.' and
 * classes work on bytes, not UTF-16 characters, so a single '.' does not
 * stand for one non-ASCII character.
 * '.' takes no \n or \r, as Java's.
 *
 * No state besides the compiled pattern; no I/O.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_ROUTE_H
#define RELAY_ROUTE_H

#include <stddef.h>

#include "relay/common.h"

typedef struct relay_route relay_route_t;

/**
 * @brief Compile a Java regex and a Java replacement string. The
 *        replacement's group references are checked against the pattern's
 *        groups here, as Java would fail on the first event.
 * @returns 0 and *out (caller frees with relay_route_free()); RELAY_EINVAL
 *          with a message naming the construct or reference; RELAY_ENOMEM.
 */
int relay_route_new(relay_route_t **out, const char *regex, const char *replacement, char *err,
                    size_t errlen) RELAY_MUST_CHECK;

/** @brief Free; accepts NULL. */
void relay_route_free(relay_route_t *r);

/**
 * @brief The topic for a routing value (len bytes, no NUL inside): the
 *        expanded replacement when the pattern matches all of it, else the
 *        value itself. Written NUL-terminated into out.
 * @returns 0 and *outn; RELAY_EINVAL when it does not fit in outlen (out
 *          then holds what fits, NUL-terminated, and *outn its length);
 *          RELAY_ENOMEM.
 */
int relay_route_apply(const relay_route_t *r, const char *value, size_t len, char *out,
                      size_t outlen, size_t *outn) RELAY_MUST_CHECK;

/**
 * @brief The POSIX pattern a Java regex translates into (for tests and
 *        messages), NUL-terminated in out.
 * @returns 0; RELAY_EINVAL with the construct named in err.
 */
int relay_route_translate(const char *regex, char *out, size_t outlen, char *err,
                          size_t errlen) RELAY_MUST_CHECK;

#endif
