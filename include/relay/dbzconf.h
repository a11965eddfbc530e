/*
 * dbzconf.h - a Debezium configuration read as is (--debezium-config FILE):
 * a Debezium Server application.properties or a Kafka Connect connector
 * JSON, its connector, Outbox Event Router and converter keys mapped onto
 * the relay's keys.
 *
 * Keys the relay has no use for on purpose (snapshot, offsets, Java
 * serializers, Quarkus) are listed in the notes for the caller to log; a
 * key that would change what reaches Kafka and that the relay cannot honour
 * is refused with its name.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_DBZCONF_H
#define RELAY_DBZCONF_H

#include <stddef.h>

#include "relay/common.h"
#include "relay/config.h"

/**
 * @brief Read path (properties, or JSON when it starts with '{') and set
 *        the mapped keys in c, each with origin "path (Debezium key K)".
 *        notes (may be NULL) receives the ignored keys, comma-separated.
 * @returns 0; RELAY_EINVAL (unreadable file, a key refused, a value
 *          relay_config_set() refuses: the message names the key and the
 *          fix); RELAY_ENOMEM.
 */
int relay_dbzconf_load(relay_config_t *c, const char *path, char *notes, size_t noteslen,
                       char *err, size_t errlen) RELAY_MUST_CHECK;

#endif
