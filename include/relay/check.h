/*
 * check.h - the preflight of `outbox-relay check`: every condition the
 * relay needs from PostgreSQL and Kafka, checked read-only, one verdict
 * (ok, warning, fail) per check with the fix.
 *
 * It never creates or changes anything: no publication, no slot, no topic
 * (metadata requests name their topics with allow.auto.create.topics=false).
 * It reads the outbox table only to list the topics a template with
 * ${column} parts names today, and only when that is cheap and allowed.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_CHECK_H
#define RELAY_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "relay/common.h"
#include "relay/config.h"
#include "relay/settings.h"

/* X(status, name relay_check_status_name() gives): one list, so that they cannot drift. */
#define RELAY_CHECK_STATUSES(X)                                                                \
        X(RELAY_CHECK_OK, "ok")                                                                \
        X(RELAY_CHECK_WARNING, "warning") /* works, but look at it */                          \
        X(RELAY_CHECK_FAIL, "fail")       /* the relay cannot work this way */

typedef enum {
#define RELAY_CHECK_STATUS_ENUM(status, name) status,
        RELAY_CHECK_STATUSES(RELAY_CHECK_STATUS_ENUM)
#undef RELAY_CHECK_STATUS_ENUM
} relay_check_status_t;

/** @brief One verdict. Strings owned by the result list. */
typedef struct {
        const char *name;    /* "postgres.wal_level", "kafka.topic", ... */
        relay_check_status_t status;
        const char *message; /* what was found, PostgreSQL's message style */
        const char *fix;     /* what to do; "" when nothing */
} relay_check_item_t;

typedef struct relay_check relay_check_t;

/**
 * @brief Run every check. cfg (its kafka.* pairs configure the Kafka client)
 *        and set are borrowed for the call. kafka_timeout_ms bounds each
 *        Kafka request. Problems found are verdicts, not errors.
 * @returns 0 and *out (caller frees with relay_check_free()); RELAY_ENOMEM.
 */
int relay_check_run(relay_check_t **out, const relay_config_t *cfg, const relay_settings_t *set,
                    int kafka_timeout_ms, char *err, size_t errlen) RELAY_MUST_CHECK;

/** @brief Free; accepts NULL. */
void relay_check_free(relay_check_t *c);

/** @brief Number of verdicts. */
size_t relay_check_count(const relay_check_t *c);

/** @brief The i-th verdict (i < relay_check_count()) into *out; its strings borrow from c. */
void relay_check_at(const relay_check_t *c, size_t i, relay_check_item_t *out);

/** @brief True when any verdict is RELAY_CHECK_FAIL. */
bool relay_check_failed(const relay_check_t *c);

/** @brief "ok", "warning" or "fail". */
const char *relay_check_status_name(relay_check_status_t s);

/**
 * @brief Write the verdicts: one line each ("fail     postgres.wal_level  message;
 *        fix"), or with json one JSON document ({"checks": [{"name",
 *        "status", "message", "fix"}...], "failed": bool}).
 * @returns 0, or -1 when out could not be written.
 */
int relay_check_print(const relay_check_t *c, FILE *out, bool json);

#endif
