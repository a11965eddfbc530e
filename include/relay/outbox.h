/*
 * outbox.h - the outbox mapping: which relation is the outbox table and how
 * one of its inserted rows becomes a Kafka event (topic, key, value,
 * headers, timestamp), with Debezium's Outbox Event Router defaults; and,
 * with outbox.source = messages or both, which logical decoding messages
 * are events and how their JSON body becomes one by the same rules.
 *
 * Columns are resolved by name each time the outbox table's Relation message
 * arrives, so an ALTER TABLE (columns added, reordered by a rewrite) is
 * picked up from the stream without a restart.
 *
 * Under a format.profile other than raw, key, value and headers are
 * re-encoded as Debezium plus the profile's converters would write them
 * (format.h), without the type header and with Debezium's context headers
 * when format.debezium.topic_prefix is set; table.fields.additional.placement
 * adds headers, envelope fields (a struct value) or an explicit partition.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_OUTBOX_H
#define RELAY_OUTBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "relay/common.h"
#include "relay/event.h"
#include "relay/pgoutput.h"
#include "relay/settings.h"

typedef struct relay_outbox relay_outbox_t;

/**
 * @brief Create a mapping from the outbox.* and topic.template settings.
 *        set is borrowed and must outlive the mapping.
 * @returns 0 and *out (caller frees with relay_outbox_free()); RELAY_EINVAL
 *          for a route.topic.regex that settings did not check; RELAY_ENOMEM.
 */
int relay_outbox_new(relay_outbox_t **out, const relay_settings_t *set, char *err,
                     size_t errlen) RELAY_MUST_CHECK;

/** @brief Free; accepts NULL. */
void relay_outbox_free(relay_outbox_t *o);

/**
 * @brief Offer a Relation (as decoded). With outbox.source = messages no
 *        relation is the outbox table. When it names one of outbox.table's
 *        tables, its columns are resolved by name (the mapping is bound to
 *        it until another is bound); columns the mapping needs but the table
 *        lacks are remembered and reported by relay_outbox_map(). A
 *        relation bound before that now has another name (renamed, or moved
 *        to another schema) is no longer an outbox table: its rows are not
 *        events, as for a relay started after the rename.
 * @returns 1 when rel is the outbox table; 2 when it was one and is no
 *          longer; 0 otherwise; RELAY_ENOMEM.
 */
int relay_outbox_bind(relay_outbox_t *o, const relay_pgo_relation_t *rel) RELAY_MUST_CHECK;

/** @brief True when relid is an outbox table's relation bound so far. */
bool relay_outbox_is_outbox(const relay_outbox_t *o, uint32_t relid);

/**
 * @brief Map an Insert into an outbox table (rebinding to insert->relation
 *        when it is another outbox table than the bound one). commit_ts is
 *        the transaction's commit time (PostgreSQL epoch microseconds, from
 *        Begin).
 * @returns 0 and *ev; RELAY_EMAP when the row cannot become an event (a
 *          needed column is missing from the table, id or aggregate id is
 *          NULL, a topic column is NULL, the topic name is invalid, more
 *          than RELAY_EVENT_MAX_HEADERS headers, a column type the profile
 *          cannot encode, an unreadable timestamp or partition column),
 *          with a message naming the column and the fix. Even then *ev holds what
 *          the row does have (id, key, value, headers, timestamp; topic NULL
 *          when it could not be built), so the caller can name the event and
 *          dead-letter it; RELAY_ENOMEM.
 */
int relay_outbox_map(relay_outbox_t *o, const relay_pgo_insert_t *insert, int64_t commit_ts,
                     relay_event_t *ev, char *err, size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief Is u an UPDATE of an outbox row? Debezium's router never makes one
 *        an event: table.op.invalid.behavior says what the caller does
 *        (DELETEs are not asked about: the outbox pattern deletes its rows).
 * @returns 1 and what (the row's id, for the caller's message); 0 when u is
 *          another table's.
 */
int relay_outbox_update(const relay_outbox_t *o, const relay_pgo_update_t *u, char *what,
                        size_t whatlen);
/**
 * @brief True when m is an outbox event: outbox.source takes messages, m is
 *        transactional and its prefix is exactly outbox.message.prefix.
 *        Anything else (other prefixes, non-transactional messages) is not
 *        the relay's and is ignored.
 */
bool relay_outbox_wants_message(const relay_outbox_t *o, const relay_pgo_message_t *m);

/**
 * @brief Map a logical decoding message whose content is the event body, a
 *        JSON object:
 *          {"id": "...", "aggregatetype": "...", "aggregateid": "...",
 *           "type": "...", "payload": <any JSON value>,
 *           "headers": {"name": "value", ...}}
 *        id, aggregateid and type are required strings (or numbers); the
 *        value is the payload as written (a JSON string: its text; null or
 *        absent: a NULL value); ${field} in topic.template and the
 *        outbox.headers names refer to top-level fields (an absent field in
 *        outbox.headers gives a NULL header); headers adds one header per
 *        member (strings as they are, null as NULL, other values as JSON).
 *        commit_ts as for relay_outbox_map(). The event's pointers borrow
 *        from m's buffer and from the mapping, until the next mapping.
 * @returns 0 and *ev; RELAY_EMAP for a body that is not such an object, with
 *          a message naming the problem; *ev then holds what the body has
 *          (the whole content as the value when it is not JSON), for the
 *          dead-letter copy; RELAY_ENOMEM.
 */
int relay_outbox_map_message(relay_outbox_t *o, const relay_pgo_message_t *m, int64_t commit_ts,
                             relay_event_t *ev, char *err, size_t errlen) RELAY_MUST_CHECK;

#endif
