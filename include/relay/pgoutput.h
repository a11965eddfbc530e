/*
 * pgoutput.h - decoder for the pgoutput logical replication protocol, versions
 * 1 to 4, and the relation cache it needs to interpret row messages.
 *
 * The decoder owns one relation cache (relid -> namespace, name, columns),
 * filled by Relation messages. Every other message is decoded into a
 * relay_pgo_msg_t: a kind and one struct per kind (as PostgreSQL's
 * logicalproto.h has LogicalRepBeginData, LogicalRepCommitData, ...), so each
 * field means one thing. Its pointers borrow from the input buffer or from the
 * cache; they stay valid until the next call of relay_pgoutput_decode() on the
 * same decoder (or until the input buffer is freed, whichever comes first).
 *
 * The relay starts replication without streaming and without two_phase, so
 * the server never sends the stream (S, E, c, A) or two-phase (b, P, K, r, p)
 * messages; the decoder refuses them at the type byte as a protocol error
 * naming the message, rather than carry parsers nothing uses. Without them
 * the message layouts are the same in versions 1 to 4.
 *
 * The decoder never trusts the server: every read is bounds-checked and a
 * malformed message is RELAY_EPROTO with a description in the error buffer.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_PGOUTPUT_H
#define RELAY_PGOUTPUT_H

#include <stdbool.h>
#include <stdint.h>

#include "relay/common.h"

typedef struct relay_pgoutput relay_pgoutput_t;
typedef struct relay_pgo_relation relay_pgo_relation_t;

/** @brief The messages the decoder accepts; the value is the type byte. */
typedef enum {
        RELAY_PGO_BEGIN = 'B',
        RELAY_PGO_COMMIT = 'C',
        RELAY_PGO_ORIGIN = 'O',
        RELAY_PGO_RELATION = 'R',
        RELAY_PGO_TYPE = 'Y',
        RELAY_PGO_INSERT = 'I',
        RELAY_PGO_UPDATE = 'U',
        RELAY_PGO_DELETE = 'D',
        RELAY_PGO_TRUNCATE = 'T',
        RELAY_PGO_MESSAGE = 'M',
} relay_pgo_kind_t;

/** @brief One column value of a TupleData, borrowed from the input buffer. */
typedef struct {
        char kind;        /* 'n' NULL, 'u' unchanged TOAST, 't' text, 'b' binary */
        uint32_t len;     /* bytes at data ('t'/'b' only, else 0) */
        const char *data; /* not NUL-terminated; NULL for 'n'/'u' */
} relay_pgo_value_t;

/** @brief A decoded TupleData: ncols values, in the relation's column order. */
typedef struct {
        int ncols;
        const relay_pgo_value_t *values; /* borrowed, owned by the decoder */
} relay_pgo_tuple_t;

/*
 * Timestamps are microseconds since 2000-01-01 UTC (PostgreSQL's epoch), as
 * on the wire. Strings are NUL-terminated and borrowed.
 */

/** @brief Begin: a transaction starts. */
typedef struct {
        relay_lsn_t final_lsn; /* LSN of its commit record */
        int64_t commit_time;   /* within PostgreSQL's timestamp range (checked) */
        uint32_t xid;
} relay_pgo_begin_t;

/** @brief Commit: the transaction ends. */
typedef struct {
        uint8_t flags;          /* always 0 (checked) */
        relay_lsn_t commit_lsn; /* LSN of the commit record (Begin's final_lsn) */
        relay_lsn_t end_lsn;    /* end of the commit record: what a subscriber confirms */
        int64_t commit_time;    /* within PostgreSQL's timestamp range (checked) */
} relay_pgo_commit_t;

/** @brief Origin: the transaction was replayed from another node. */
typedef struct {
        relay_lsn_t origin_lsn; /* commit LSN on the origin server */
        const char *name;
} relay_pgo_origin_t;

/** @brief Relation: a table's layout, now in the cache. */
typedef struct {
        uint32_t relid;
        const relay_pgo_relation_t *relation; /* the new cache entry */
} relay_pgo_relation_msg_t;

/** @brief Type: a data type used by a following Relation. */
typedef struct {
        uint32_t oid;
        const char *nspname; /* "" = pg_catalog */
        const char *name;
} relay_pgo_type_t;

/** @brief Insert: a new row. */
typedef struct {
        uint32_t relid;
        const relay_pgo_relation_t *relation; /* cached (an unknown relid is RELAY_EPROTO) */
        relay_pgo_tuple_t newtuple;
} relay_pgo_insert_t;

/** @brief Update: a changed row, with the old key or row when the replica identity sends it. */
typedef struct {
        uint32_t relid;
        const relay_pgo_relation_t *relation;
        char oldkind;               /* 'K' (key), 'O' (old row) or 0 when absent */
        relay_pgo_tuple_t oldtuple; /* ncols 0 when oldkind is 0 */
        relay_pgo_tuple_t newtuple;
} relay_pgo_update_t;

/** @brief Delete: a removed row, identified by its key or whole old row. */
typedef struct {
        uint32_t relid;
        const relay_pgo_relation_t *relation;
        char oldkind; /* 'K' or 'O' */
        relay_pgo_tuple_t oldtuple;
} relay_pgo_delete_t;

/** @brief Truncate: tables emptied. */
typedef struct {
        uint8_t options;        /* 1 CASCADE, 2 RESTART IDENTITY */
        uint32_t nrelids;
        const uint32_t *relids; /* borrowed, owned by the decoder */
} relay_pgo_truncate_t;

/** @brief Message: pg_logical_emit_message() output. */
typedef struct {
        bool transactional;
        relay_lsn_t lsn;
        const char *prefix;
        const char *content; /* not NUL-terminated */
        uint32_t content_len;
} relay_pgo_message_t;

/**
 * @brief A decoded message: kind says which member of the union is set.
 *        Pointers borrow (see file comment).
 */
typedef struct {
        relay_pgo_kind_t kind;
        union {
                relay_pgo_begin_t begin;
                relay_pgo_commit_t commit;
                relay_pgo_origin_t origin;
                relay_pgo_relation_msg_t relation;
                relay_pgo_type_t type;
                relay_pgo_insert_t insert;
                relay_pgo_update_t update;
                relay_pgo_delete_t delete;
                relay_pgo_truncate_t truncate;
                relay_pgo_message_t message;
        };
} relay_pgo_msg_t;

/**
 * @brief Create a decoder for protocol version proto_version (1..4).
 * @returns 0 and *out (caller frees with relay_pgoutput_free());
 *          RELAY_EINVAL (a version out of range); RELAY_ENOMEM.
 */
int relay_pgoutput_new(relay_pgoutput_t **out, int proto_version, char *err,
                       size_t errlen) RELAY_MUST_CHECK;

/** @brief Free a decoder and its relation cache; accepts NULL. */
void relay_pgoutput_free(relay_pgoutput_t *d);

/**
 * @brief Decode one pgoutput message (the payload of an XLogData after its
 *        25-byte header). Relation messages also update the cache (a re-sent
 *        Relation for a known relid replaces the old entry; pointers to the
 *        old entry obtained earlier become invalid).
 * @returns 0 and *out filled; RELAY_EPROTO for truncated, over-long or
 *          malformed input, an unknown message type, a stream or two-phase
 *          message (never requested), a row message for a relid never
 *          described, or a tuple whose column count differs from its
 *          relation's; RELAY_ENOMEM. On error *out is unspecified and the
 *          cache is unchanged.
 */
int relay_pgoutput_decode(relay_pgoutput_t *d, const char *buf, size_t len, relay_pgo_msg_t *out,
                          char *err, size_t errlen) RELAY_MUST_CHECK;

/** @brief The cached relation for relid, or NULL. Borrowed. */
const relay_pgo_relation_t *relay_pgoutput_relation(const relay_pgoutput_t *d, uint32_t relid);

/* Relation accessors; all strings borrowed from the cache, NUL-terminated. */
uint32_t relay_pgo_relation_id(const relay_pgo_relation_t *rel);
const char *relay_pgo_relation_namespace(const relay_pgo_relation_t *rel); /* "" = pg_catalog */
const char *relay_pgo_relation_name(const relay_pgo_relation_t *rel);
char relay_pgo_relation_replident(const relay_pgo_relation_t *rel);
int relay_pgo_relation_ncols(const relay_pgo_relation_t *rel);
const char *relay_pgo_relation_colname(const relay_pgo_relation_t *rel, int i);
uint32_t relay_pgo_relation_coltype(const relay_pgo_relation_t *rel, int i); /* type oid; a domain's base */
int32_t relay_pgo_relation_coltypmod(const relay_pgo_relation_t *rel, int i);
bool relay_pgo_relation_colkey(const relay_pgo_relation_t *rel, int i);

/**
 * @brief A relation described from outside the stream (the backfill's
 *        result columns), with the same accessors as a cached one: replica
 *        identity 'd', no key columns. The strings are copied.
 * @returns the relation (caller frees with relay_pgo_relation_free()), or
 *          NULL when out of memory.
 */
relay_pgo_relation_t *relay_pgo_relation_new(uint32_t relid, const char *nspname,
                                             const char *relname, int ncols,
                                             const char *const *names, const uint32_t *types,
                                             const int32_t *typmods);

/** @brief Free a relation from relay_pgo_relation_new(); accepts NULL. Never one of the cache's. */
void relay_pgo_relation_free(relay_pgo_relation_t *rel);

#endif
