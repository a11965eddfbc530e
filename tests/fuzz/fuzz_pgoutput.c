/*
 * fuzz_pgoutput.c - libFuzzer target for everything that parses server bytes:
 * the CopyData sub-protocol (walproto) and the pgoutput decoder.
 *
 * Input: byte 0 picks the protocol version (1 + byte % 4); the rest is one
 * CopyData payload as the server would send it. It goes to
 * relay_walproto_parse() and, when it is an XLogData, its payload goes to the
 * decoder of that version.
 *
 * The four decoders outlive single inputs, as on a real connection, so that
 * Relations from earlier inputs shape how later ones are decoded (stream and
 * two-phase messages are refused at their type byte, so they leave no state). They start primed with Relations shaped like the fixture tables
 * (so seed Inserts reach the tuple code at once) and are rebuilt every
 * RESET_EVERY inputs, which bounds both memory and the history a crash can
 * depend on. A crash that needs history may not reproduce from its saved
 * input alone: rerun the corpus in order (tests/fuzz/run CORPUS_DIR).
 *
 * Build and run with tests/fuzz/run.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "relay/pgoutput.h"
#include "relay/walproto.h"

#define RESET_EVERY 100000

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static relay_pgoutput_t *decoders[4];
static unsigned long runs;
static volatile size_t sink;

struct wb {
        unsigned char b[512];
        size_t n;
};

static void put8(struct wb *w, unsigned v)
{
        w->b[w->n++] = (unsigned char)v;
}

static void put32(struct wb *w, uint32_t v)
{
        for (int s = 24; s >= 0; s -= 8)
                put8(w, (v >> s) & 0xff);
}

static void putstr(struct wb *w, const char *s)
{
        size_t len = strlen(s) + 1;

        memcpy(w->b + w->n, s, len);
        w->n += len;
}

/* A Relation for relid with ncols text columns named c0, c1, ... */
static void prime(relay_pgoutput_t *d, uint32_t relid, const char *name, int ncols)
{
        struct wb w = {.n = 0};
        relay_pgo_msg_t m;
        char err[RELAY_ERRBUF];

        put8(&w, 'R');
        put32(&w, relid);
        putstr(&w, "public");
        putstr(&w, name);
        put8(&w, 'd');
        put8(&w, 0);
        put8(&w, (unsigned)ncols);
        for (int i = 0; i < ncols; i++) {
                char col[4] = {'c', (char)('0' + i), '\0', '\0'};

                put8(&w, i == 0);
                putstr(&w, col);
                put32(&w, 25);
                put32(&w, 0xffffffff);
        }
        if (relay_pgoutput_decode(d, (const char *)w.b, w.n, &m, err, sizeof(err)) != RELAY_OK)
                abort();
}

static void fresh_decoders(void)
{
        for (int v = 0; v < 4; v++) {
                relay_pgoutput_free(decoders[v]);
                char err[RELAY_ERRBUF];
                if (relay_pgoutput_new(&decoders[v], v + 1, err, sizeof(err)))
                        abort();
                /* The relids and column counts of the fixture tables outbox, misc, full_t. */
                prime(decoders[v], 16391, "outbox", 5);
                prime(decoders[v], 16398, "misc", 6);
                prime(decoders[v], 16405, "full_t", 2);
        }
}

/* Read every byte of a tuple; NULL and unchanged values must have no data. */
static size_t touch_tuple(const relay_pgo_relation_t *rel, relay_pgo_tuple_t t)
{
        size_t sum = 0;

        if (t.ncols != relay_pgo_relation_ncols(rel))
                abort();
        for (int i = 0; i < t.ncols; i++) {
                const relay_pgo_value_t *v = &t.values[i];

                if ((v->kind == 'n' || v->kind == 'u') != (v->data == NULL))
                        abort();
                for (uint32_t j = 0; j < v->len; j++)
                        sum += (unsigned char)v->data[j];
        }
        return sum;
}

/* A row message's relation must be the cached entry for its relid. */
static size_t touch_relation(const relay_pgoutput_t *d, uint32_t relid,
                             const relay_pgo_relation_t *rel)
{
        size_t sum;

        if (rel == NULL || relay_pgo_relation_id(rel) != relid ||
            relay_pgoutput_relation(d, relid) != rel)
                abort();
        sum = strlen(relay_pgo_relation_namespace(rel)) + strlen(relay_pgo_relation_name(rel));
        for (int i = 0; i < relay_pgo_relation_ncols(rel); i++)
                sum += strlen(relay_pgo_relation_colname(rel, i)) + relay_pgo_relation_coltype(rel, i);
        return sum;
}

/* Read every byte a decoded message points at, and check what the API promises. */
static void touch(const relay_pgoutput_t *d, const relay_pgo_msg_t *m)
{
        size_t sum = 0;

        switch (m->kind) {
        case RELAY_PGO_BEGIN:
                break;
        case RELAY_PGO_COMMIT:
                if (m->commit.flags != 0)
                        abort();
                break;
        case RELAY_PGO_ORIGIN:
                sum += strlen(m->origin.name);
                break;
        case RELAY_PGO_RELATION:
                sum += touch_relation(d, m->relation.relid, m->relation.relation);
                break;
        case RELAY_PGO_TYPE:
                sum += strlen(m->type.nspname) + strlen(m->type.name);
                break;
        case RELAY_PGO_INSERT:
                sum += touch_relation(d, m->insert.relid, m->insert.relation);
                sum += touch_tuple(m->insert.relation, m->insert.newtuple);
                break;
        case RELAY_PGO_UPDATE:
                sum += touch_relation(d, m->update.relid, m->update.relation);
                if (m->update.oldkind)
                        sum += touch_tuple(m->update.relation, m->update.oldtuple);
                else if (m->update.oldtuple.ncols != 0)
                        abort();
                sum += touch_tuple(m->update.relation, m->update.newtuple);
                break;
        case RELAY_PGO_DELETE:
                sum += touch_relation(d, m->delete.relid, m->delete.relation);
                if (m->delete.oldkind != 'K' && m->delete.oldkind != 'O')
                        abort();
                sum += touch_tuple(m->delete.relation, m->delete.oldtuple);
                break;
        case RELAY_PGO_TRUNCATE:
                for (uint32_t i = 0; i < m->truncate.nrelids; i++)
                        sum += m->truncate.relids[i];
                break;
        case RELAY_PGO_MESSAGE:
                sum += strlen(m->message.prefix);
                for (uint32_t i = 0; i < m->message.content_len; i++)
                        sum += (unsigned char)m->message.content[i];
                break;
        default:
                abort(); /* a kind outside the enum */
        }
        sink += sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        relay_pgoutput_t *d;
        relay_walmsg_t w;
        relay_pgo_msg_t m;
        char err[RELAY_ERRBUF];
        char *copy;
        int rc;

        if (runs++ % RESET_EVERY == 0)
                fresh_decoders();
        if (size < 1)
                return 0;
        d = decoders[data[0] % 4];

        /* An exact-size heap copy: ASan then catches a read even one byte past the end. */
        copy = malloc(size - 1 ? size - 1 : 1);
        if (copy == NULL)
                abort();
        memcpy(copy, data + 1, size - 1);

        err[0] = '\0';
        rc = relay_walproto_parse(copy, size - 1, &w, err, sizeof(err));
        if (rc != RELAY_OK) {
                if (rc != RELAY_EPROTO || err[0] == '\0')
                        abort();
        } else if (w.type == 'w') {
                if (w.data != copy + 25 || w.len != size - 1 - 25)
                        abort();
                err[0] = '\0';
                rc = relay_pgoutput_decode(d, w.data, w.len, &m, err, sizeof(err));
                if (rc == RELAY_OK)
                        touch(d, &m);
                else if (rc != RELAY_EPROTO || err[0] == '\0')
                        abort();
        } else if (w.type != 'k' || size - 1 != 18) {
                abort();
        }
        free(copy);
        return 0;
}
