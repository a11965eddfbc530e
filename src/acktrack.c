/*
 * acktrack.c - the ring of in-flight PostgreSQL transactions.
 *
 * Owns one growable ring indexed by transaction sequence number (seq & mask):
 * the head is the oldest transaction not yet confirmable, the tail the one
 * being received. Delivery reports decrement pending counts out of order;
 * only relay_acktrack_confirmable() moves the head, so the confirmed LSN is
 * always the end of a fully acknowledged prefix (Bottled Water's ring,
 * PostgreSQL's apply worker flush list).
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/acktrack.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
        relay_lsn_t end_lsn;    /* 0 while open */
        relay_lsn_t commit_lsn; /* from Begin: names the transaction */
        uint64_t pending;
} txn_t;

struct relay_acktrack {
        txn_t *ring;
        uint64_t mask;     /* capacity - 1, capacity a power of two */
        uint64_t head;     /* seq of the oldest tracked transaction */
        uint64_t tail;     /* seq the next begin gets; head == tail: empty */
        bool open;         /* the transaction tail - 1 is between Begin and Commit */
        uint64_t pending;  /* sum of pending over the ring */
        relay_lsn_t last_end;  /* end_lsn of the newest committed transaction */
        relay_lsn_t confirmed; /* monotonic */
};

relay_acktrack_t *relay_acktrack_new(void)
{
        relay_acktrack_t *t = calloc(1, sizeof(*t));
        if (!t)
                return NULL;
        t->ring = calloc(1024, sizeof(txn_t));
        if (!t->ring) {
                free(t);
                return NULL;
        }
        t->mask = 1023;
        return t;
}

void relay_acktrack_free(relay_acktrack_t *t)
{
        if (!t)
                return;
        free(t->ring);
        free(t);
}

static txn_t *slot_of(relay_acktrack_t *t, uint64_t seq)
{
        return &t->ring[seq & t->mask];
}

/* Doubling keeps every live seq at seq & mask: copy entries to their new homes. */
static int grow(relay_acktrack_t *t)
{
        uint64_t cap = (t->mask + 1) * 2;
        txn_t *ring = calloc(cap, sizeof(txn_t));
        if (!ring)
                return RELAY_ENOMEM;
        for (uint64_t s = t->head; s != t->tail; s++)
                ring[s & (cap - 1)] = t->ring[s & t->mask];
        free(t->ring);
        t->ring = ring;
        t->mask = cap - 1;
        return 0;
}

int relay_acktrack_begin(relay_acktrack_t *t, relay_lsn_t commit_lsn)
{
        if (t->open)
                return RELAY_EPROTO;
        if (t->tail - t->head > t->mask) {
                int rc = grow(t);
                if (rc)
                        return rc;
        }
        txn_t *x = slot_of(t, t->tail++);
        x->end_lsn = 0;
        x->commit_lsn = commit_lsn;
        x->pending = 0;
        t->open = true;
        return 0;
}

relay_lsn_t relay_acktrack_commit_lsn(const relay_acktrack_t *t, uint64_t seq)
{
        if (seq < t->head || seq >= t->tail)
                return 0;
        return t->ring[seq & t->mask].commit_lsn;
}

uint64_t relay_acktrack_add(relay_acktrack_t *t)
{
        uint64_t seq = t->tail - 1;
        slot_of(t, seq)->pending++;
        t->pending++;
        return seq;
}

void relay_acktrack_unadd(relay_acktrack_t *t)
{
        txn_t *x = slot_of(t, t->tail - 1);
        if (x->pending > 0) {
                x->pending--;
                t->pending--;
        }
}

int relay_acktrack_commit(relay_acktrack_t *t, relay_lsn_t end_lsn)
{
        if (!t->open || end_lsn <= t->last_end)
                return RELAY_EPROTO;
        slot_of(t, t->tail - 1)->end_lsn = end_lsn;
        t->last_end = end_lsn;
        t->open = false;
        return 0;
}

int relay_acktrack_ack(relay_acktrack_t *t, uint64_t seq)
{
        if (seq < t->head || seq >= t->tail)
                return RELAY_EINVAL;
        txn_t *x = slot_of(t, seq);
        if (x->pending == 0)
                return RELAY_EINVAL;
        x->pending--;
        t->pending--;
        return 0;
}

relay_lsn_t relay_acktrack_confirmable(relay_acktrack_t *t)
{
        while (t->head != t->tail) {
                txn_t *x = slot_of(t, t->head);
                bool is_open = t->open && t->head == t->tail - 1;
                if (is_open || x->pending > 0)
                        break;
                if (x->end_lsn > t->confirmed)
                        t->confirmed = x->end_lsn;
                t->head++;
        }
        return t->confirmed;
}

bool relay_acktrack_drained(const relay_acktrack_t *t)
{
        return !t->open && t->pending == 0;
}

bool relay_acktrack_in_txn(const relay_acktrack_t *t)
{
        return t->open;
}

uint64_t relay_acktrack_pending(const relay_acktrack_t *t)
{
        return t->pending;
}

void relay_acktrack_advance_idle(relay_acktrack_t *t, relay_lsn_t lsn)
{
        if (!relay_acktrack_drained(t))
                return;
        /* Drained means every committed transaction is acknowledged; settle
         * the ring first so the idle position cannot jump ahead of it. */
        relay_acktrack_confirmable(t);
        if (t->head == t->tail && lsn > t->confirmed)
                t->confirmed = lsn;
}
