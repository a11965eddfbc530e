/*
 * pgoutput.h - decoder for the pgoutput logical replication protocol, versions
 * 1 to 4, and the relation cache it needs to interpret row messages.
 *
 * The decoder owns one relation cache (relid -> namespace, name, columns),
 * filled by Relation messages. Every other message is decoded into a
 * relay_pgo_msg_t whose pointers borrow from the input buffer or from the
 * cache; they stay valid until the next call of relay_pgoutput_decode() on the
 * same decoder (or until the input buffer is freed, whichever comes first).
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
        RELAY_PGO_STREAM_START = 'S',
        RELAY_PGO_STREAM_STOP = 'E',
        RELAY_PGO_STREAM_COMMIT = 'c',
        RELAY_PGO_STREAM_ABORT = 'A',
        RELAY_PGO_BEGIN_PREPARE = 'b',
        RELAY_PGO_PREPARE = 'P',
        RELAY_PGO_COMMIT_PREPARED = 'K',
        RELAY_PGO_ROLLBACK_PREPARED = 'r',
        RELAY_PGO_STREAM_PREPARE = 'p',
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

/**
 * @brief A decoded message. Only the fields of its kind are set; the rest are
 *        zero. Pointers borrow (see file comment).
 */
typedef struct {
        relay_pgo_kind_t kind;
        uint32_t xid;             /* Begin, stream messages, prepare family, and
                                   * [xid]-carrying messages inside a stream block */
        relay_lsn_t lsn;          /* Begin: final_lsn; Commit/Stream Commit/Commit
                                   * Prepared: commit_lsn; Prepare family: prepare_lsn;
                                   * Rollback Prepared: prepare_end_lsn; Stream Abort
                                   * (v4 long form): abort_lsn;
                                   * Origin: origin_commit_lsn; Message: its lsn */
        relay_lsn_t end_lsn;      /* Commit family and prepare family: end_lsn;
                                   * Rollback Prepared: rollback_end_lsn */
        int64_t timestamp;        /* Begin/Commit family: commit time; prepare family:
                                   * prepare time; Rollback Prepared: rollback time;
                                   * Stream Abort (v4 long form): abort time;
                                   * microseconds since 2000-01-01 UTC (PG epoch) */
        uint8_t flags;            /* Commit family flags; Message: 1 = transactional;
                                   * Truncate: options; Stream Start: first_segment */
        uint32_t relid;           /* Relation, Insert, Update, Delete */
        const relay_pgo_relation_t *relation; /* Relation/Insert/Update/Delete: the cached
                                               * relation (Insert etc. on an unknown
                                               * relid is RELAY_EPROTO) */
        relay_pgo_tuple_t newtuple; /* Insert, Update: the new row */
        relay_pgo_tuple_t oldtuple; /* Update ('K'/'O', may be ncols 0), Delete */
        char oldkind;               /* Update/Delete: 'K', 'O' or 0 when absent */
        const char *name;           /* Origin: origin name; Message: prefix; Type: type
                                     * name; prepare family: gid (NUL-terminated,
                                     * borrowed) */
        const char *content;        /* Message: content bytes (borrowed) */
        uint32_t content_len;
        uint32_t nrelids;           /* Truncate: number of relids */
        bool in_stream;             /* decoded inside a Stream Start..Stop block */
        const uint32_t *relids;     /* Truncate: nrelids relids (borrowed, owned by
                                     * the decoder) */
        uint32_t type_oid;          /* Type: the type's oid */
        const char *nspname;        /* Type: its namespace ("" = pg_catalog); the type
                                     * name is in name */
        uint32_t subxid;            /* Stream Abort: the aborted (sub)transaction,
                                     * == xid when the whole transaction aborts */
        int64_t prepare_timestamp;  /* Rollback Prepared: prepare time (timestamp
                                     * holds the rollback time) */
} relay_pgo_msg_t;

/**
 * @brief Create a decoder for protocol version proto_version (1..4).
 * @returns a decoder (caller frees with relay_pgoutput_free()), or NULL when
 *          out of memory or the version is out of range.
 */
relay_pgoutput_t *relay_pgoutput_new(int proto_version);

/** @brief Free a decoder and its relation cache; accepts NULL. */
void relay_pgoutput_free(relay_pgoutput_t *d);

/**
 * @brief Decode one pgoutput message (the payload of an XLogData after its
 *        25-byte header). Relation messages also update the cache (a re-sent
 *        Relation for a known relid replaces the old entry; pointers to the
 *        old entry obtained earlier become invalid).
 * @returns 0 and *out filled; RELAY_EPROTO for truncated, over-long or
 *          malformed input, an unknown message type, a row message for a relid
 *          never described, or a tuple whose column count differs from its
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
uint32_t relay_pgo_relation_coltype(const relay_pgo_relation_t *rel, int i); /* type oid */
int32_t relay_pgo_relation_coltypmod(const relay_pgo_relation_t *rel, int i);
bool relay_pgo_relation_colkey(const relay_pgo_relation_t *rel, int i);

#endif
