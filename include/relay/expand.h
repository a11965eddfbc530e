/*
 * expand.h - table.expand.json.payload: a JSON object payload as Debezium's
 * Outbox Event Router expands it into a Connect struct (JsonSchemaData)
 * and a profile's converter writes that struct.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_EXPAND_H
#define RELAY_EXPAND_H

#include <stddef.h>

#include "relay/common.h"
#include "relay/format.h"

/**
 * @brief table.expand.json.payload: a JSON object payload (data, len) as
 *        Debezium's router expands it into a struct (JsonSchemaData, its
 *        top-level struct named key, the payload column) and enc's
 *        converter writes it: Struct.toString() for RAW and SIMPLE, the
 *        JSON value, or the {"schema":..,"payload":..} envelope. b is reset
 *        first.
 * @returns 1 and b; 0 when the router would leave the payload a string
 *          (not an object, not JSON, or a document JsonSchemaData refuses);
 *          RELAY_ENOMEM.
 */
int relay_expand_payload(relay_fmtbuf_t *b, relay_format_enc_t enc, const char *key,
                         const char *data, size_t len) RELAY_MUST_CHECK;


#endif
