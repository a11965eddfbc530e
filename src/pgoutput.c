/*
 * pgoutput.c - decoder for the pgoutput logical replication protocol,
 * versions 1 to 4, and the relation cache that row messages refer to.
 *
 * The decoder owns two things: the relation cache (relid -> relation, one
 * allocation per entry in an open-addressing table) and scratch arrays for
 * tuple values and truncate relids. The scratch arrays are sized when a
 * Relation is cached, so decoding a row message never allocates: Inserts are
 * the hot path.
 *
 * Stream and two-phase messages are refused by type (see pgoutput.h): the
 * relay never asks for them, and without them no change carries an [xid]
 * prefix, so the decoder keeps no stream state.
 *
 * Every byte comes from the network and is checked before use; a malformed
 * message is RELAY_EPROTO and leaves the cache as it was.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relay/pgoutput.h"

/* Private return code of the parsers: ran out of bytes, the reader knows how many it wanted. */
#define TRUNC 1

/* Initial sizes; both grow on demand from Relation messages. */
#define INITIAL_SLOTS  16
#define INITIAL_VALUES 16

struct col {
        const char *name;
        uint32_t typid;
        int32_t typmod;
        bool key;
};

/* One allocation: the struct, cols[ncols], then the namespace, name and column names. */
struct relay_pgo_relation {
        uint32_t relid;
        char replident;
        int ncols;
        const char *nspname;
        const char *relname;
        struct col cols[];
};

struct relay_pgoutput {
        relay_pgo_relation_t **slots; /* NULL = empty; cap is a power of two, never full */
        size_t cap;
        size_t count;
        relay_pgo_value_t *oldvals; /* valcap entries each: tuple views of the last message */
        relay_pgo_value_t *newvals;
        size_t valcap;
        uint32_t *relids; /* Truncate scratch */
        size_t relidcap;
        struct domain *domains; /* sorted by oid, learned from Type messages (learn_type()) */
        size_t ndomains;
};

struct domain {
        uint32_t oid, base;
};

/*
 * Bounds-checked big-endian reader. A failed read leaves p at the field that
 * did not fit and records in want how many bytes that field needed, so the
 * caller can say "need N bytes, have M" without tracking sizes itself.
 */
struct rd {
        const uint8_t *p, *end;
        size_t want;
};

static inline bool rd_has(struct rd *r, size_t n)
{
        if ((size_t)(r->end - r->p) >= n)
                return true;
        r->want = n;
        return false;
}

/* size (1 to 8) big-endian bytes as an unsigned number. */
static inline bool rd_be(struct rd *r, size_t size, uint64_t *v)
{
        uint64_t x = 0;

        if (!rd_has(r, size))
                return false;
        for (size_t i = 0; i < size; i++)
                x = x << 8 | r->p[i];
        r->p += size;
        *v = x;
        return true;
}

/*
 * The fixed-size fields. Oids, xids and LSNs are unsigned on the server
 * though the protocol documentation calls them Int32 and Int64; the signed
 * readers reinterpret the same bits (two's complement).
 */
#define RD_FIXED(name, type, size)                                                                 \
        static inline bool name(struct rd *r, type *v)                                             \
        {                                                                                          \
                uint64_t x;                                                                        \
                if (!rd_be(r, size, &x))                                                           \
                        return false;                                                              \
                *v = (type)x;                                                                      \
                return true;                                                                       \
        }
RD_FIXED(rd_u8, uint8_t, 1)
RD_FIXED(rd_i16, int16_t, 2)
RD_FIXED(rd_u32, uint32_t, 4)
RD_FIXED(rd_i32, int32_t, 4)
RD_FIXED(rd_lsn, relay_lsn_t, 8)
RD_FIXED(rd_i64, int64_t, 8)
#undef RD_FIXED

/* A NUL-terminated string that must end inside the buffer; *len excludes the NUL. */
static inline bool rd_str(struct rd *r, const char **s, size_t *len)
{
        size_t left = (size_t)(r->end - r->p);
        const uint8_t *nul = left ? memchr(r->p, 0, left) : NULL;

        if (nul == NULL) {
                r->want = left + 1;
                return false;
        }
        *s = (const char *)r->p;
        *len = (size_t)(nul - r->p);
        r->p = nul + 1;
        return true;
}

static inline bool rd_bytes(struct rd *r, size_t n, const uint8_t **b)
{
        if (!rd_has(r, n))
                return false;
        *b = r->p;
        r->p += n;
        return true;
}

/*
 * What a parser gets: the decoder (its relation cache and scratch), the
 * cursor over the message's body, the message to fill, and for a Relation
 * the cache entry it built, which the caller installs once the whole message
 * proved valid.
 */
typedef int parse_fn(relay_pgoutput_t *d, struct rd *r, relay_pgo_msg_t *out,
                     relay_pgo_relation_t **newrel, char *err, size_t errlen);

static parse_fn parse_begin, parse_commit, parse_origin, parse_relation, parse_type, parse_insert,
        parse_update, parse_delete, parse_truncate, parse_message;

/*
 * Every message type pgoutput has, by its type byte: the name messages use
 * and its parser. The kinds without a parser exist only with streaming or
 * two_phase, which the relay never requests; a byte without a name is no
 * pgoutput message at all.
 */
static const struct kind {
        const char *name;
        parse_fn *parse;
} kinds[256] = {
        ['B'] = {"Begin", parse_begin},
        ['C'] = {"Commit", parse_commit},
        ['O'] = {"Origin", parse_origin},
        ['R'] = {"Relation", parse_relation},
        ['Y'] = {"Type", parse_type},
        ['I'] = {"Insert", parse_insert},
        ['U'] = {"Update", parse_update},
        ['D'] = {"Delete", parse_delete},
        ['T'] = {"Truncate", parse_truncate},
        ['M'] = {"Message", parse_message},
        ['S'] = {"Stream Start", NULL},
        ['E'] = {"Stream Stop", NULL},
        ['c'] = {"Stream Commit", NULL},
        ['A'] = {"Stream Abort", NULL},
        ['b'] = {"Begin Prepare", NULL},
        ['P'] = {"Prepare", NULL},
        ['K'] = {"Commit Prepared", NULL},
        ['r'] = {"Rollback Prepared", NULL},
        ['p'] = {"Stream Prepare", NULL},
};

static int bad(char *err, size_t errlen, uint8_t type, const char *fmt, ...) RELAY_PRINTF(4, 5);
static int bad(char *err, size_t errlen, uint8_t type, const char *fmt, ...)
{
        char detail[256];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(detail, sizeof(detail), fmt, ap);
        va_end(ap);
        relay_err_set(err, errlen, "invalid pgoutput %s message: %s", kinds[type].name, detail);
        return RELAY_EPROTO;
}

static int nomem(char *err, size_t errlen, uint8_t type)
{
        relay_err_set(err, errlen, "out of memory decoding pgoutput %s message", kinds[type].name);
        return RELAY_ENOMEM;
}

/*
 * murmur3's finaliser: every relid bit reaches the low bits the mask keeps, so
 * relids with equal low bits (OIDs handed out in strides) do not pile up.
 */
static inline uint32_t hash_relid(uint32_t relid)
{
        uint32_t h = relid;

        h ^= h >> 16;
        h *= UINT32_C(0x85ebca6b);
        h ^= h >> 13;
        h *= UINT32_C(0xc2b2ae35);
        h ^= h >> 16;
        return h;
}

/* The slot holding relid, or the empty slot where it would go. */
static relay_pgo_relation_t **find_slot(relay_pgo_relation_t **slots, size_t cap, uint32_t relid)
{
        size_t mask = cap - 1;
        size_t i = hash_relid(relid) & mask;

        while (slots[i] != NULL && slots[i]->relid != relid)
                i = (i + 1) & mask;
        return &slots[i];
}

static inline const relay_pgo_relation_t *lookup(const relay_pgoutput_t *d, uint32_t relid)
{
        return *find_slot(d->slots, d->cap, relid);
}

/*
 * Put rel into the cache, replacing (and freeing) an entry with its relid.
 * The table is grown first, into a new array, so a failure changes nothing.
 */
static int install(relay_pgoutput_t *d, relay_pgo_relation_t *rel)
{
        relay_pgo_relation_t **slot = find_slot(d->slots, d->cap, rel->relid);

        if (*slot != NULL) {
                free(*slot);
                *slot = rel;
                return RELAY_OK;
        }
        /* Load factor at most 1/2 keeps probe chains short and guarantees an empty slot. */
        if ((d->count + 1) * 2 > d->cap) {
                size_t ncap = d->cap * 2;
                relay_pgo_relation_t **nslots = calloc(ncap, sizeof(*nslots));

                if (nslots == NULL)
                        return RELAY_ENOMEM;
                for (size_t i = 0; i < d->cap; i++)
                        if (d->slots[i] != NULL)
                                *find_slot(nslots, ncap, d->slots[i]->relid) = d->slots[i];
                free(d->slots);
                d->slots = nslots;
                d->cap = ncap;
                slot = find_slot(d->slots, d->cap, rel->relid);
        }
        *slot = rel;
        d->count++;
        return RELAY_OK;
}

/* Grow the tuple scratch so that no row message of a cached relation has to allocate. */
static bool reserve_values(relay_pgoutput_t *d, size_t n)
{
        relay_pgo_value_t *p;

        if (n <= d->valcap)
                return true;
        p = realloc(d->oldvals, n * sizeof(*p));
        if (p == NULL)
                return false;
        d->oldvals = p;
        p = realloc(d->newvals, n * sizeof(*p));
        if (p == NULL)
                return false;
        d->newvals = p;
        d->valcap = n;
        return true;
}

/*
 * PostgreSQL's finite timestamps (datatype/timestamp.h: MIN_TIMESTAMP up to
 * END_TIMESTAMP, microseconds since 2000-01-01): a commit time outside them
 * comes from no server. The relay subtracts commit times from its clock
 * (commit-to-ack, lag, catch-up), which overflowed int64 for one near
 * INT64_MIN.
 */
#define PG_MIN_TIMESTAMP INT64_C(-211813488000000000)
#define PG_END_TIMESTAMP INT64_C(9223371331200000000)

static int check_commit_time(uint8_t type, int64_t t, char *err, size_t errlen)
{
        if (t < PG_MIN_TIMESTAMP || t >= PG_END_TIMESTAMP)
                return bad(err, errlen, type,
                           "commit time %lld is outside PostgreSQL's timestamp range",
                           (long long)t);
        return RELAY_OK;
}

/*
 * Begin: Byte1 'B', Int64 final_lsn, Int64 commit_ts, Int32 xid   (20 bytes)
 */
static int parse_begin(relay_pgoutput_t *d, struct rd *r, relay_pgo_msg_t *out,
                       relay_pgo_relation_t **newrel, char *err, size_t errlen)
{
        relay_pgo_begin_t *m = &out->begin;

        if (!rd_has(r, 20))
                return TRUNC;
        (void)(rd_lsn(r, &m->final_lsn) && rd_i64(r, &m->commit_time) && rd_u32(r, &m->xid));
        return check_commit_time('B', m->commit_time, err, errlen);
}

/*
 * Commit: Byte1 'C', Int8 flags (0), Int64 commit_lsn, Int64 end_lsn,
 *         Int64 commit_ts                                         (25 bytes)
 */
static int parse_commit(relay_pgoutput_t *d, struct rd *r, relay_pgo_msg_t *out,
                        relay_pgo_relation_t **newrel, char *err, size_t errlen)
{
        relay_pgo_commit_t *m = &out->commit;

        if (!rd_has(r, 25))
                return TRUNC;
        (void)(rd_u8(r, &m->flags) && rd_lsn(r, &m->commit_lsn) && rd_lsn(r, &m->end_lsn) &&
               rd_i64(r, &m->commit_time));
        if (m->flags != 0)
                return bad(err, errlen, 'C', "unknown flags 0x%02x", m->flags);
        return check_commit_time('C', m->commit_time, err, errlen);
}

/*
 * Origin: Byte1 'O', Int64 origin_commit_lsn, String origin_name
 */
static int parse_origin(relay_pgoutput_t *d, struct rd *r, relay_pgo_msg_t *out,
                        relay_pgo_relation_t **newrel, char *err, size_t errlen)
{
        relay_pgo_origin_t *m = &out->origin;
        size_t len;

        if (!rd_lsn(r, &m->origin_lsn) || !rd_str(r, &m->name, &len))
                return TRUNC;
        return RELAY_OK;
}

/*
 * A relation entry in one allocation: the column array, then the names
 * (namespace, relation, then colbytes for the columns' names). relid,
 * replident, ncols and the two names are set; *colnames is where the
 * columns' names go. NULL when out of memory.
 */
static relay_pgo_relation_t *relation_alloc(uint32_t relid, char replident, int ncols,
                                            const char *nsp, size_t nsplen, const char *relname,
                                            size_t rellen, size_t colbytes, char **colnames)
{
        relay_pgo_relation_t *rel = malloc(offsetof(struct relay_pgo_relation, cols) +
                                           (size_t)ncols * sizeof(struct col) + nsplen + 1 +
                                           rellen + 1 + colbytes);
        if (rel == NULL)
                return NULL;
        char *s = (char *)&rel->cols[ncols];
        rel->relid = relid;
        rel->replident = replident;
        rel->ncols = ncols;
        rel->nspname = memcpy(s, nsp, nsplen + 1);
        s += nsplen + 1;
        rel->relname = memcpy(s, relname, rellen + 1);
        *colnames = s + rellen + 1;
        return rel;
}

/* Where oid is in d->domains, or would go. */
static size_t domain_at(const relay_pgoutput_t *d, uint32_t oid)
{
        size_t lo = 0, hi = d->ndomains;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (d->domains[mid].oid < oid)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

static uint32_t base_type(const relay_pgoutput_t *d, uint32_t typid)
{
        size_t i = domain_at(d, typid);
        return i < d->ndomains && d->domains[i].oid == typid ? d->domains[i].base : typid;
}

/*
 * Built-in types by name, those whose values the relay reads by type
 * (format.c's kinds, outbox.c's partition and timestamp columns). Their
 * OIDs are fixed (catalog/pg_type.dat) and names unique in pg_catalog.
 */
static const struct builtin {
        const char *name;
        uint32_t oid;
} builtins[] = {
    {"bool", 16},         {"bytea", 17},        {"int8", 20},   {"int2", 21},  {"int4", 23},
    {"text", 25},         {"json", 114},        {"bpchar", 1042}, {"varchar", 1043},
    {"timestamp", 1114}, {"timestamptz", 1184}, {"uuid", 2950}, {"jsonb", 3802},
};

/*
 * A column of a domain is read as the domain's base type, as the
 * backfill's SELECT names it (printtup sends a domain's base type), so that
 * a bytea domain's "\\x..." text is bytes either way. The Relation names the
 * domain's OID; the Type message pgoutput sends before it names the base:
 * proto.c's logicalrep_write_typ() sends getBaseType()'s namespace and name
 * (through domains over domains) under the column's type OID, from the
 * catalog as of the change. pgoutput.c's send_relation_and_attrs() sends
 * one for every column the Relation carries whose type OID is
 * FirstGenbkiObjectId (10000) or more, the same columns (dropped, generated
 * and, from 15, those outside a column list are left out of both), and it
 * is the only writer of a Relation (14 to 18): the first of a session, one
 * again after a relcache invalidation (an ALTER TABLE, a column changed to
 * a domain) all come with their Types. A type below 10000 is hand-assigned
 * in pg_type.dat, which holds no domain. So the stream alone says what a
 * domain is, also one made or dropped while the relay streams; the catalog
 * is never asked.
 *
 * Only a built-in base the relay tells apart is recorded. Any other type
 * (a domain over numeric or text[], an enum, an array of a domain: its Type
 * names the array type itself) stays as named, as the base itself would:
 * the relay reads neither by type. A Type for an OID recorded before that
 * names no such base drops it: the OID is another type's now.
 */
static int learn_type(relay_pgoutput_t *d, uint32_t oid, const char *nsp, const char *name)
{
        uint32_t base = 0;
        if (nsp[0] == '\0' || strcmp(nsp, "pg_catalog") == 0)
                for (size_t i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++)
                        if (strcmp(name, builtins[i].name) == 0)
                                base = builtins[i].oid;
        if (base == oid)
                base = 0;
        size_t at = domain_at(d, oid);
        bool known = at < d->ndomains && d->domains[at].oid == oid;
        if (known && base) {
                d->domains[at].base = base;
        } else if (known) {
                memmove(d->domains + at, d->domains + at + 1,
                        (d->ndomains - at - 1) * sizeof(*d->domains));
                d->ndomains--;
        } else if (base) {
                struct domain *v = realloc(d->domains, (d->ndomains + 1) * sizeof(*v));
                if (!v)
                        return RELAY_ENOMEM;
                memmove(v + at + 1, v + at, (d->ndomains - at) * sizeof(*v));
                v[at] = (struct domain){.oid = oid, .base = base};
                d->domains = v;
                d->ndomains++;
        }
        return 0;
}

/*
 * Relation: Byte1 'R', Int32 relid, String namespace, String relname,
 *           Int8 replident ('d', 'n', 'f', 'i'), Int16 ncols, then ncols times:
 *           Int8 flags (1 = part of the key), String name, Int32 type_oid,
 *           Int32 typmod
 *
 * Two passes: the first validates and sizes the column names, the second
 * copies them into a single allocation. The entry is only built here; the
 * caller installs it once the whole message proved valid.
 */
static int parse_relation(relay_pgoutput_t *d, struct rd *r, relay_pgo_msg_t *out,
                          relay_pgo_relation_t **newrel, char *err, size_t errlen)
{
        relay_pgo_relation_msg_t *m = &out->relation;
        const char *nsp, *relname, *name = NULL;
        size_t nsplen, rellen, len = 0, colbytes = 0;
        uint8_t replident, flags = 0;
        int16_t ncols;
        int32_t typmod;
        uint32_t typid;
        struct rd cols;
        relay_pgo_relation_t *rel;
        char *s;

        if (!rd_u32(r, &m->relid) || !rd_str(r, &nsp, &nsplen) || !rd_str(r, &relname, &rellen) ||
            !rd_u8(r, &replident) || !rd_i16(r, &ncols))
                return TRUNC;
        if (replident != 'd' && replident != 'n' && replident != 'f' && replident != 'i')
                return bad(err, errlen, 'R', "unknown replica identity 0x%02x for relation %u",
                           replident, m->relid);
        if (ncols < 0)
                return bad(err, errlen, 'R', "negative column count %d for relation %u", ncols,
                           m->relid);

        cols = *r;
        for (int i = 0; i < ncols; i++) {
                if (!rd_u8(r, &flags) || !rd_str(r, &name, &len) || !rd_u32(r, &typid) ||
                    !rd_i32(r, &typmod))
                        return TRUNC;
                if (flags & ~1u)
                        return bad(err, errlen, 'R',
                                   "unknown flags 0x%02x on column %d of relation %u", flags, i + 1,
                                   m->relid);
                colbytes += len + 1;
        }

        if (!reserve_values(d, (size_t)ncols))
                return nomem(err, errlen, 'R');
        rel = relation_alloc(m->relid, (char)replident, ncols, nsp, nsplen, relname, rellen,
                             colbytes, &s);
        if (rel == NULL)
                return nomem(err, errlen, 'R');
        for (int i = 0; i < ncols; i++) {
                struct col *c = &rel->cols[i];

                /* Cannot fail: the first pass read the same bytes. */
                (void)(rd_u8(&cols, &flags) && rd_str(&cols, &name, &len) &&
                       rd_u32(&cols, &c->typid) && rd_i32(&cols, &c->typmod));
                c->typid = base_type(d, c->typid);
                c->key = flags & 1;
                c->name = memcpy(s, name, len + 1);
                s += len + 1;
        }
        *newrel = rel;
        return RELAY_OK;
}

/*
 * Type: Byte1 'Y', Int32 type_oid, String namespace, String typname
 */
static int parse_type(relay_pgoutput_t *d, struct rd *r, relay_pgo_msg_t *out,
                      relay_pgo_relation_t **newrel, char *err, size_t errlen)
{
        relay_pgo_type_t *m = &out->type;
        size_t len;

        if (!rd_u32(r, &m->oid) || !rd_str(r, &m->nspname, &len) || !rd_str(r, &m->name, &len))
                return TRUNC;
        if (learn_type(d, m->oid, m->nspname, m->name))
                return nomem(err, errlen, 'Y');
        return RELAY_OK;
}

/*
 * TupleData: Int16 ncols, then ncols times one of
 *            Byte1 'n' (NULL) | Byte1 'u' (unchanged TOAST) |
 *            Byte1 't' Int32 len Byte(len) text | Byte1 'b' Int32 len Byte(len) binary
 *
 * The column count must match the cached relation; vals has room for it
 * (reserved when the relation was cached).
 */
static int parse_tuple(struct rd *r, uint8_t type, const relay_pgo_relation_t *rel,
                       relay_pgo_value_t *vals, relay_pgo_tuple_t *t, char *err, size_t errlen)
{
        int16_t ncols;
        uint8_t kind;
        int32_t len;
        const uint8_t *data;

        if (!rd_i16(r, &ncols))
                return TRUNC;
        if (ncols != rel->ncols)
                return bad(err, errlen, type,
                           "tuple has %d columns, relation \"%s.%s\" (%u) has %d", ncols,
                           rel->nspname, rel->relname, rel->relid, rel->ncols);
        for (int i = 0; i < ncols; i++) {
                relay_pgo_value_t *v = &vals[i];

                if (!rd_u8(r, &kind))
                        return TRUNC;
                v->kind = (char)kind;
                if (kind == 't' || kind == 'b') {
                        if (!rd_i32(r, &len))
                                return TRUNC;
                        if (len < 0)
                                return bad(err, errlen, type, "column %d has negative length %d",
                                           i + 1, len);
                        if (!rd_bytes(r, (size_t)len, &data))
                                return TRUNC;
                        v->len = (uint32_t)len;
                        v->data = (const char *)data;
                } else if (kind == 'n' || kind == 'u') {
                        v->len = 0;
                        v->data = NULL;
                } else {
                        return bad(err, errlen, type, "column %d has unknown kind 0x%02x", i + 1,
                                   kind);
                }
        }
        t->ncols = ncols;
        t->values = vals;
        return RELAY_OK;
}

/* "expected 'N', 'K' or 'O', got 0x58" for the tags in accept. */
static int bad_tag(char *err, size_t errlen, uint8_t type, const char *accept, uint8_t tag)
{
        char list[32] = "";
        size_t n = strlen(accept), used = 0;

        for (size_t i = 0; i < n; i++)
                used += (size_t)snprintf(list + used, sizeof(list) - used, "%s'%c'",
                                         i == 0 ? "" : i + 1 < n ? ", " : " or ", accept[i]);
        return bad(err, errlen, type, "expected %s, got 0x%02x", list, tag);
}

/* Where a row message's parts go; old and new NULL: it has no such tuple. */
typedef struct {
        uint32_t *relid;
        const relay_pgo_relation_t **rel;
        char *oldkind;
        relay_pgo_tuple_t *old, *new;
} row_out_t;

/*
 * The layout every row message shares after its type: Int32 relid (which
 * must be cached), Byte1 tag, then, where the message has an old tuple,
 * 'K' (key) or 'O' (old row) followed by that TupleData and, where it also
 * has a new row, Byte1 'N' and its TupleData; or 'N' and the new row's
 * TupleData at once. Which tuples the message has is out's old and new.
 */
static int read_row(const relay_pgoutput_t *d, struct rd *r, uint8_t type, row_out_t out,
                    char *err, size_t errlen)
{
        const char *accept = out.old == NULL ? "N" : out.new == NULL ? "KO" : "NKO";
        uint8_t tag;
        int rc;

        if (!rd_u32(r, out.relid))
                return TRUNC;
        *out.rel = lookup(d, *out.relid);
        if (*out.rel == NULL)
                return bad(err, errlen, type,
                           "relation %u was never described by a Relation message", *out.relid);
        if (!rd_u8(r, &tag))
                return TRUNC;
        if (out.old != NULL && (tag == 'K' || tag == 'O')) {
                *out.oldkind = (char)tag;
                rc = parse_tuple(r, type, *out.rel, d->oldvals, out.old, err, errlen);
                if (rc != RELAY_OK || out.new == NULL)
                        return rc;
                if (!rd_u8(r, &tag))
                        return TRUNC;
                accept = "N";
        }
        if (tag != 'N' || out.new == NULL)
                return bad_tag(err, errlen, type, accept, tag);
        return parse_tuple(r, type, *out.rel, d->newvals, out.new, err, errlen);
}

/*
 * Insert: Byte1 'I', Int32 relid, Byte1 'N', TupleData
 */
static int parse_insert(relay_pgoutput_t *d, struct rd *r, relay_pgo_msg_t *out,
                        relay_pgo_relation_t **newrel, char *err, size_t errlen)
{
        relay_pgo_insert_t *m = &out->insert;

        return read_row(d, r, 'I',
                        (row_out_t){&m->relid, &m->relation, NULL, NULL, &m->newtuple}, err,
                        errlen);
}

/*
 * Update: Byte1 'U', Int32 relid, optionally (Byte1 'K' | Byte1 'O') TupleData,
 *         Byte1 'N', TupleData
 */
static int parse_update(relay_pgoutput_t *d, struct rd *r, relay_pgo_msg_t *out,
                        relay_pgo_relation_t **newrel, char *err, size_t errlen)
{
        relay_pgo_update_t *m = &out->update;

        return read_row(d, r, 'U',
                        (row_out_t){&m->relid, &m->relation, &m->oldkind, &m->oldtuple,
                                    &m->newtuple},
                        err, errlen);
}

/*
 * Delete: Byte1 'D', Int32 relid, (Byte1 'K' | Byte1 'O'), TupleData
 */
static int parse_delete(relay_pgoutput_t *d, struct rd *r, relay_pgo_msg_t *out,
                        relay_pgo_relation_t **newrel, char *err, size_t errlen)
{
        relay_pgo_delete_t *m = &out->delete;

        return read_row(d, r, 'D',
                        (row_out_t){&m->relid, &m->relation, &m->oldkind, &m->oldtuple, NULL},
                        err, errlen);
}

/*
 * Truncate: Byte1 'T', Int32 nrelids, Int8 options (1 CASCADE,
 *           2 RESTART IDENTITY), Int32 relid x nrelids
 */
static int parse_truncate(relay_pgoutput_t *d, struct rd *r, relay_pgo_msg_t *out,
                          relay_pgo_relation_t **newrel, char *err, size_t errlen)
{
        relay_pgo_truncate_t *m = &out->truncate;
        int32_t n;

        if (!rd_i32(r, &n) || !rd_u8(r, &m->options))
                return TRUNC;
        if (n < 0)
                return bad(err, errlen, 'T', "negative relation count %d", n);
        if (m->options & ~3u)
                return bad(err, errlen, 'T', "unknown options 0x%02x", m->options);
        /* Check the length before sizing the scratch from a count the server chose. */
        if (!rd_has(r, (size_t)n * 4))
                return TRUNC;
        if ((size_t)n > d->relidcap) {
                uint32_t *p = realloc(d->relids, (size_t)n * sizeof(*p));

                if (p == NULL)
                        return nomem(err, errlen, 'T');
                d->relids = p;
                d->relidcap = (size_t)n;
        }
        for (int32_t i = 0; i < n; i++)
                (void)rd_u32(r, &d->relids[i]);
        m->nrelids = (uint32_t)n;
        m->relids = d->relids;
        return RELAY_OK;
}

/*
 * Message: Byte1 'M', Int8 flags (1 = transactional), Int64 lsn,
 *          String prefix, Int32 len, Byte(len) content
 */
static int parse_message(relay_pgoutput_t *d, struct rd *r, relay_pgo_msg_t *out,
                         relay_pgo_relation_t **newrel, char *err, size_t errlen)
{
        relay_pgo_message_t *m = &out->message;
        size_t len;
        uint8_t flags;
        int32_t n;
        const uint8_t *content;

        if (!rd_u8(r, &flags) || !rd_lsn(r, &m->lsn) || !rd_str(r, &m->prefix, &len) ||
            !rd_i32(r, &n))
                return TRUNC;
        if (flags & ~1u)
                return bad(err, errlen, 'M', "unknown flags 0x%02x", flags);
        if (n < 0)
                return bad(err, errlen, 'M', "negative content length %d", n);
        if (!rd_bytes(r, (size_t)n, &content))
                return TRUNC;
        m->transactional = flags & 1;
        m->content = (const char *)content;
        m->content_len = (uint32_t)n;
        return RELAY_OK;
}

int relay_pgoutput_new(relay_pgoutput_t **out, int proto_version, char *err, size_t errlen)
{
        relay_pgoutput_t *d;

        *out = NULL;
        if (proto_version < 1 || proto_version > 4)
                return relay_err(err, errlen, RELAY_EINVAL,
                                 "pgoutput protocol version %d is not one of 1 to 4", proto_version);
        /* cap stays 0 without slots, so the destructor's loop needs no test. */
        if ((d = calloc(1, sizeof(*d))) != NULL &&
            (d->slots = calloc(INITIAL_SLOTS, sizeof(*d->slots))) != NULL)
                d->cap = INITIAL_SLOTS;
        if (d == NULL || d->slots == NULL || !reserve_values(d, INITIAL_VALUES)) {
                relay_pgoutput_free(d);
                return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
        }
        *out = d;
        return 0;
}

void relay_pgoutput_free(relay_pgoutput_t *d)
{
        if (d == NULL)
                return;
        for (size_t i = 0; i < d->cap; i++)
                free(d->slots[i]);
        RELAY_FREE_ALL(d->slots, d->oldvals, d->newvals, d->relids, d->domains, d);
}

/*
 * Any pgoutput message: Byte1 type, then the type's fields (see the parsers).
 * The cache changes only after the whole message, including the absence of
 * trailing bytes, has been checked.
 */
int relay_pgoutput_decode(relay_pgoutput_t *d, const char *buf, size_t len, relay_pgo_msg_t *out,
                          char *err, size_t errlen)
{
        const uint8_t *body;
        struct rd r;
        relay_pgo_relation_t *newrel = NULL;
        uint8_t type;
        int rc;

        if (len == 0) {
                relay_err_set(err, errlen, "truncated pgoutput message: no type byte");
                return RELAY_EPROTO;
        }
        type = (uint8_t)buf[0];
        body = (const uint8_t *)buf + 1;
        r.p = body;
        r.end = (const uint8_t *)buf + len;
        r.want = 0;

        if (kinds[type].name == NULL) {
                relay_err_set(err, errlen, "invalid pgoutput message: unknown message type 0x%02x",
                              type);
                return RELAY_EPROTO;
        }
        if (kinds[type].parse == NULL) {
                relay_err_set(err, errlen,
                              "unexpected pgoutput %s message (type '%c'): the relay starts "
                              "replication without streaming and two_phase, so the server must "
                              "not send it",
                              kinds[type].name, type);
                return RELAY_EPROTO;
        }

        memset(out, 0, sizeof(*out));
        out->kind = (relay_pgo_kind_t)type;
        rc = kinds[type].parse(d, &r, out, &newrel, err, errlen);
        if (rc == TRUNC) {
                relay_err_set(err, errlen,
                              "truncated pgoutput %s message: need %zu bytes, have %zu",
                              kinds[type].name, (size_t)(r.p - body) + r.want, (size_t)(r.end - body));
                return RELAY_EPROTO;
        }
        if (rc != RELAY_OK)
                return rc;
        if (r.p != r.end) {
                free(newrel);
                return bad(err, errlen, type, "%zu trailing bytes after %zu", (size_t)(r.end - r.p),
                           (size_t)(r.p - body));
        }

        if (newrel != NULL) {
                if (install(d, newrel) != RELAY_OK) {
                        free(newrel);
                        return nomem(err, errlen, type);
                }
                out->relation.relation = newrel;
        }
        return RELAY_OK;
}

const relay_pgo_relation_t *relay_pgoutput_relation(const relay_pgoutput_t *d, uint32_t relid)
{
        return lookup(d, relid);
}

uint32_t relay_pgo_relation_id(const relay_pgo_relation_t *rel)
{
        return rel->relid;
}

const char *relay_pgo_relation_namespace(const relay_pgo_relation_t *rel)
{
        return rel->nspname;
}

const char *relay_pgo_relation_name(const relay_pgo_relation_t *rel)
{
        return rel->relname;
}

char relay_pgo_relation_replident(const relay_pgo_relation_t *rel)
{
        return rel->replident;
}

int relay_pgo_relation_ncols(const relay_pgo_relation_t *rel)
{
        return rel->ncols;
}

/* Column accessors answer NULL / 0 for an index out of range rather than read past cols. */
const char *relay_pgo_relation_colname(const relay_pgo_relation_t *rel, int i)
{
        return i >= 0 && i < rel->ncols ? rel->cols[i].name : NULL;
}

uint32_t relay_pgo_relation_coltype(const relay_pgo_relation_t *rel, int i)
{
        return i >= 0 && i < rel->ncols ? rel->cols[i].typid : 0;
}

int32_t relay_pgo_relation_coltypmod(const relay_pgo_relation_t *rel, int i)
{
        return i >= 0 && i < rel->ncols ? rel->cols[i].typmod : 0;
}

bool relay_pgo_relation_colkey(const relay_pgo_relation_t *rel, int i)
{
        return i >= 0 && i < rel->ncols && rel->cols[i].key;
}

relay_pgo_relation_t *relay_pgo_relation_new(uint32_t relid, const char *nspname,
                                             const char *relname, int ncols,
                                             const char *const *names, const uint32_t *types,
                                             const int32_t *typmods)
{
        size_t colbytes = 0;
        char *s;

        if (ncols < 0)
                return NULL;
        for (int i = 0; i < ncols; i++)
                colbytes += strlen(names[i]) + 1;
        relay_pgo_relation_t *rel = relation_alloc(relid, 'd', ncols, nspname, strlen(nspname),
                                                   relname, strlen(relname), colbytes, &s);
        if (rel == NULL)
                return NULL;
        for (int i = 0; i < ncols; i++) {
                size_t len = strlen(names[i]);
                rel->cols[i].name = memcpy(s, names[i], len + 1);
                s += len + 1;
                rel->cols[i].typid = types[i];
                rel->cols[i].typmod = typmods[i];
                rel->cols[i].key = false;
        }
        return rel;
}

void relay_pgo_relation_free(relay_pgo_relation_t *rel)
{
        free(rel);
}
