/*
 * test_acktrack.c - the confirmable position is the end of the longest fully
 * acknowledged prefix of committed transactions, whatever order delivery
 * reports arrive in.
 */
#include "relay/acktrack.h"

#include "tap.h"

static void test_prefix_out_of_order(void)
{
        relay_acktrack_t *t = relay_acktrack_new();
        uint64_t s1[3], s2[2], s3;

        ok(relay_acktrack_confirmable(t) == 0, "empty tracker confirms nothing");
        is_int(relay_acktrack_begin(t, 0), 0, "begin txn 1");
        for (int i = 0; i < 3; i++)
                s1[i] = relay_acktrack_add(t);
        is_int(relay_acktrack_commit(t, 0x100), 0, "commit txn 1 at 0/100");
        is_int(relay_acktrack_begin(t, 0), 0, "begin txn 2");
        s2[0] = relay_acktrack_add(t);
        s2[1] = relay_acktrack_add(t);
        is_int(relay_acktrack_commit(t, 0x200), 0, "commit txn 2 at 0/200");
        is_int(relay_acktrack_begin(t, 0x2f0), 0, "begin txn 3");
        s3 = relay_acktrack_add(t);
        is_int(relay_acktrack_commit_lsn(t, s3), 0x2f0, "txn 3 is named by its commit LSN");
        ok(relay_acktrack_in_txn(t), "txn 3 is open");
        is_int(relay_acktrack_pending(t), 6, "six messages in flight");

        /* Reports for a later transaction (another partition) come first. */
        is_int(relay_acktrack_ack(t, s2[0]), 0, "ack txn 2 msg 1");
        is_int(relay_acktrack_ack(t, s2[1]), 0, "ack txn 2 msg 2");
        is_int(relay_acktrack_ack(t, s3), 0, "ack txn 3 (still open)");
        ok(relay_acktrack_confirmable(t) == 0, "txn 2 acked but txn 1 is not: nothing confirmable");
        is_int(relay_acktrack_ack(t, s1[2]), 0, "ack txn 1 msg 3");
        is_int(relay_acktrack_ack(t, s1[0]), 0, "ack txn 1 msg 1");
        ok(relay_acktrack_confirmable(t) == 0, "txn 1 still has one pending");
        is_int(relay_acktrack_ack(t, s1[1]), 0, "ack txn 1 msg 2");
        is_int(relay_acktrack_confirmable(t), 0x200, "txns 1 and 2 acked: confirm 2's end_lsn");
        ok(!relay_acktrack_drained(t), "open txn 3: not drained");
        relay_acktrack_advance_idle(t, 0x900);
        is_int(relay_acktrack_confirmable(t), 0x200, "keepalive position ignored while txn 3 is open");
        is_int(relay_acktrack_commit(t, 0x300), 0, "commit txn 3");
        is_int(relay_acktrack_confirmable(t), 0x300, "txn 3 fully acked at commit: confirmable");
        ok(relay_acktrack_drained(t), "drained");
        relay_acktrack_advance_idle(t, 0x280);
        is_int(relay_acktrack_confirmable(t), 0x300, "a lower keepalive position never moves back");
        relay_acktrack_advance_idle(t, 0x900);
        is_int(relay_acktrack_confirmable(t), 0x900, "drained: keepalive WAL end becomes confirmable");
        relay_acktrack_free(t);
}

static void test_errors(void)
{
        relay_acktrack_t *t = relay_acktrack_new();
        is_int(relay_acktrack_commit(t, 0x10), RELAY_EPROTO, "commit without begin");
        is_int(relay_acktrack_begin(t, 0), 0, "begin");
        is_int(relay_acktrack_begin(t, 0), RELAY_EPROTO, "begin inside a transaction");
        uint64_t s = relay_acktrack_add(t);
        is_int(relay_acktrack_commit(t, 0x10), 0, "commit");
        is_int(relay_acktrack_ack(t, s + 1), RELAY_EINVAL, "ack for an unknown transaction");
        is_int(relay_acktrack_ack(t, s), 0, "ack");
        is_int(relay_acktrack_ack(t, s), RELAY_EINVAL, "second ack of the only message");
        is_int(relay_acktrack_begin(t, 0), 0, "begin");
        is_int(relay_acktrack_commit(t, 0x10), RELAY_EPROTO, "end_lsn not increasing");
        relay_acktrack_free(t);
        relay_acktrack_free(NULL);
        ok(1, "free accepts NULL");
}

/* Many transactions in flight force the ring to grow; acks in reverse order. */
static void test_growth(void)
{
        enum { N = 5000 };
        static uint64_t seqs[N];
        relay_acktrack_t *t = relay_acktrack_new();
        int bad = 0;
        for (int i = 0; i < N; i++) {
                bad |= relay_acktrack_begin(t, 0);
                seqs[i] = relay_acktrack_add(t);
                bad |= relay_acktrack_commit(t, (relay_lsn_t)(i + 1) * 16);
        }
        ok(!bad, "5000 transactions tracked");
        for (int i = N - 1; i >= 1; i--)
                bad |= relay_acktrack_ack(t, seqs[i]);
        ok(!bad, "acked all but the first, newest first");
        is_int(relay_acktrack_confirmable(t), 0, "first unacked: nothing confirmable");
        is_int(relay_acktrack_ack(t, seqs[0]), 0, "ack the first");
        is_int(relay_acktrack_confirmable(t), (relay_lsn_t)N * 16, "all confirmable at once");
        ok(relay_acktrack_drained(t), "drained");
        relay_acktrack_free(t);
}

/* A transaction with no outbox events (PG14 sends them) confirms at once. */
static void test_empty_txn(void)
{
        relay_acktrack_t *t = relay_acktrack_new();
        int rc = relay_acktrack_begin(t, 0);
        rc |= relay_acktrack_commit(t, 0x42);
        is_int(rc, 0, "empty transaction");
        is_int(relay_acktrack_confirmable(t), 0x42, "confirmable with nothing to ack");
        is_int(relay_acktrack_begin(t, 0), 0, "begin");
        (void)relay_acktrack_add(t);
        relay_acktrack_unadd(t);
        is_int(relay_acktrack_pending(t), 0, "unadd undoes add");
        is_int(relay_acktrack_commit(t, 0x50), 0, "commit");
        is_int(relay_acktrack_confirmable(t), 0x50, "refused message does not hold the transaction");
        relay_acktrack_free(t);
}

int main(void)
{
        test_prefix_out_of_order();
        test_errors();
        test_growth();
        test_empty_txn();
        return done_testing();
}
