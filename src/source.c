/*
 * source.c - one replication connection's outbox events: owns the
 * connection, the pgoutput decoder and the outbox mapping, and turns each
 * message of the stream into the step its consumer (session.c, tail.c)
 * acts on, so the relay and `tail` cannot disagree on what is an event.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/source.h"

#include <stdlib.h>

#include "relay/lsn.h"

struct relay_source {
        relay_repl_t *repl;
        relay_pgoutput_t *dec;
        relay_outbox_t *outbox;
        bool in_txn;          /* between a Begin and its Commit */
        relay_pgo_begin_t txn; /* that Begin */
};

void relay_source_free(relay_source_t *src)
{
        if (!src)
                return;
        relay_repl_free(src->repl);
        relay_pgoutput_free(src->dec);
        relay_outbox_free(src->outbox);
        free(src);
}

int relay_source_open(relay_source_t **out, const relay_settings_t *set,
                      const volatile sig_atomic_t *stop, char *err, size_t errlen)
{
        relay_source_t *src = calloc(1, sizeof(*src));
        int rc;

        *out = NULL;
        if (!src)
                return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
        if ((rc = relay_outbox_new(&src->outbox, set, err, errlen)) ||
            (rc = relay_repl_connect(&src->repl, set, stop, err, errlen)) ||
            (rc = relay_pgoutput_new(&src->dec, relay_repl_proto_version(src->repl), err,
                                     errlen))) {
                relay_source_free(src);
                return rc;
        }
        *out = src;
        return 0;
}

relay_repl_t *relay_source_repl(relay_source_t *src)
{
        return src->repl;
}

relay_outbox_t *relay_source_outbox(relay_source_t *src)
{
        return src->outbox;
}

const relay_pgo_begin_t *relay_source_txn(const relay_source_t *src)
{
        return src->in_txn ? &src->txn : NULL;
}

/*
 * ROW for an Insert into an outbox table; MESSAGE for a transactional
 * message with our prefix when outbox.source takes messages (any other
 * message is not ours); NOTHING for the rest.
 */
static relay_source_step_kind_t event_kind(const relay_source_t *src, const relay_pgo_msg_t *m)
{
        if (m->kind == RELAY_PGO_INSERT)
                return relay_outbox_is_outbox(src->outbox, m->insert.relid) ? RELAY_STEP_ROW
                                                                             : RELAY_STEP_NOTHING;
        return relay_outbox_wants_message(src->outbox, &m->message) ? RELAY_STEP_MESSAGE
                                                                    : RELAY_STEP_NOTHING;
}

int relay_source_step(relay_source_t *src, const relay_walmsg_t *w, relay_source_step_t *step,
                      char *err, size_t errlen)
{
        relay_pgo_msg_t *m = &step->msg;
        int rc;

        step->kind = RELAY_STEP_NOTHING;
        step->bound = false;
        step->unbound = false;
        if (w->type == 'k') {
                step->kind = RELAY_STEP_KEEPALIVE;
                step->lsn = 0;
                return 0;
        }
        step->lsn = w->wal_start;
        if ((rc = relay_pgoutput_decode(src->dec, w->data, w->len, m, err, errlen)))
                return rc;
        switch (m->kind) {
        case RELAY_PGO_BEGIN:
                step->kind = RELAY_STEP_BEGIN;
                break;
        case RELAY_PGO_COMMIT:
                step->kind = RELAY_STEP_COMMIT;
                break;
        case RELAY_PGO_INSERT:
        case RELAY_PGO_MESSAGE:
                step->kind = event_kind(src, m);
                if (step->kind == RELAY_STEP_NOTHING)
                        return 0;
                break;
        case RELAY_PGO_RELATION:
                rc = relay_outbox_bind(src->outbox, m->relation.relation);
                if (rc < 0)
                        return relay_err(err, errlen, rc, "out of memory");
                step->bound = rc == 1;
                step->unbound = rc == 2;
                return 0;
        case RELAY_PGO_UPDATE:
                /* DELETEs pass in silence below, as with Debezium (deleting
                 * is how the outbox is emptied). */
                if (relay_outbox_update(src->outbox, &m->update, step->what, sizeof(step->what)))
                        step->kind = RELAY_STEP_UPDATE;
                return 0;
        case RELAY_PGO_DELETE:
        case RELAY_PGO_TRUNCATE:
        case RELAY_PGO_TYPE:
        case RELAY_PGO_ORIGIN:
                return 0;
        default:
                /* The decoder refuses every other kind at its type byte. */
                return relay_err(err, errlen, RELAY_EPROTO,
                                 "unexpected pgoutput message kind %d at " RELAY_LSN_FMT,
                                 (int)m->kind, RELAY_LSN_ARGS(w->wal_start));
        }
        /* A Begin opens a transaction; its events and its Commit belong to
         * it. Anything else is a stream the relay cannot confirm by. */
        bool begin = step->kind == RELAY_STEP_BEGIN;
        if (src->in_txn == begin)
                return relay_err(err, errlen, RELAY_EPROTO, "%s at " RELAY_LSN_FMT " %s a transaction",
                                 m->kind == RELAY_PGO_BEGIN    ? "Begin"
                                 : m->kind == RELAY_PGO_COMMIT ? "Commit"
                                 : m->kind == RELAY_PGO_INSERT ? "Insert"
                                                               : "transactional message",
                                 RELAY_LSN_ARGS(w->wal_start), begin ? "inside" : "outside");
        if (begin)
                src->txn = m->begin;
        if (begin || step->kind == RELAY_STEP_COMMIT)
                src->in_txn = begin;
        return 0;
}

int relay_source_map(relay_source_t *src, const relay_source_step_t *step, relay_event_t *ev,
                     char *err, size_t errlen)
{
        /* Events come only inside a transaction (relay_source_step). */
        int64_t commit_ts = src->txn.commit_time;

        if (step->kind == RELAY_STEP_MESSAGE)
                return relay_outbox_map_message(src->outbox, &step->msg.message, commit_ts, ev, err,
                                                errlen);
        return relay_outbox_map(src->outbox, &step->msg.insert, commit_ts, ev, err, errlen);
}
