/*
 * 0218-eos-checkpoint-read.c - issue 14: reading the exactly-once
 * checkpoint back at session start (checkpoint.c) against the real broker.
 *
 * Several relays may share one checkpoint topic (its key names the slot).
 * Another relay's Kafka transaction that is open there (its checkpoint
 * record is written just before its commit) holds the partition's stable
 * end, all a read_committed consumer sees, below records committed after
 * it: our relay's latest checkpoint among them. Reading only to that end
 * found an older checkpoint (or none), and a relay restarted in that window
 * with its slot behind its last Kafka commit would send that commit's
 * events again. The read must go on to the end as it was at the start of
 * the read, waiting for the other transaction to end.
 *
 * Also prints how long a read takes: librdkafka's fetch.wait.max.ms
 * default made every read wait 500 ms for the empty fetch that shows the
 * end (half a second of each exactly-once start, measured by tests/bench
 * scenario 8).
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "relay/checkpoint.h"
#include "relay/config.h"
#include "relay/log.h"
#include "relay/lsn.h"

/* One read: its return code, the checkpoint, and how long it took. */
static int read_ck(const relay_config_t *cfg, const char *topic, const char *key, int timeout_ms,
                   relay_lsn_t *lsn, bool *found, int64_t *ms, char *err, size_t errlen)
{
        int64_t t0 = h_now_ms();
        err[0] = '\0';
        int rc = relay_checkpoint_read(cfg, topic, key, timeout_ms, NULL, NULL, lsn, found, err,
                                       errlen);
        *ms = h_now_ms() - t0;
        return rc;
}

int main(void)
{
        char *topic = h_unique_name("ckread");
        char *key = h_unique_name("sysid/slot");
        char *other_tid = h_unique_name("ckread-other");
        char *our_tid = h_unique_name("ckread-ours");
        const char *compact[] = {"cleanup.policy", "compact", NULL};
        relay_config_t *cfg = NULL;
        char err[RELAY_ERRBUF];
        relay_lsn_t lsn, want;
        bool found;
        int64_t ms;
        int rc;

        h_kafka_create_topic_config(topic, 1, compact);
        if (relay_config_new(&cfg) != 0 ||
            relay_config_set(cfg, "kafka.bootstrap.servers", h_kafka_bootstrap(), "test", err,
                             sizeof(err)) != 0)
                tap_bail("config: %s", err);
        if (getenv("CKDEBUG")) {
                relay_log_configure(RELAY_LOG_DEBUG, RELAY_LOG_TEXT);
                if (relay_config_set(cfg, "kafka.debug", "fetch", "test", err, sizeof(err)))
                        tap_bail("config: %s", err);
        }
        if (relay_lsn_parse("0/ABCDEF0", &want) != 0)
                tap_bail("lsn");

        /* Ours, committed before anything else is in the topic. */
        rd_kafka_t *ours = h_kafka_txn_producer(our_tid);
        h_kafka_txn_produce(ours, topic, key, "0/1000");
        rd_kafka_error_t *e = rd_kafka_commit_transaction(ours, 30000);
        ok(e == NULL, "our first checkpoint committed");
        rc = read_ck(cfg, topic, key, 10000, &lsn, &found, &ms, err, sizeof(err));
        ok(rc == 0 && found && lsn == 0x1000, "read back: 0/1000 (rc %d, found %d: %s)", rc, found,
           rc ? err : "");
        /* A figure, not a check: the house has no timing assertions. */
        tap_diag("a read of a topic with one transaction took %lld ms", (long long)ms);

        /* Another relay's transaction opens with its checkpoint record; then
         * ours commits a later checkpoint after it. */
        rd_kafka_t *other = h_kafka_txn_producer(other_tid);
        h_kafka_txn_produce(other, topic, "another/slot", "0/5");
        if ((e = rd_kafka_begin_transaction(ours)))
                tap_bail("begin: %s", rd_kafka_error_string(e));
        h_kafka_txn_produce(ours, topic, key, "0/ABCDEF0");
        e = rd_kafka_commit_transaction(ours, 30000);
        ok(e == NULL, "our later checkpoint committed behind the other's open transaction");

        rc = read_ck(cfg, topic, key, 3000, &lsn, &found, &ms, err, sizeof(err));
        ok(rc == RELAY_EKAFKA, "with the other transaction open the read waits, and gives up at "
                               "its limit (rc %d after %lld ms, found %d, %s)",
           rc, (long long)ms, found, rc ? err : "no error");
        ok(rc != 0 || !found || lsn == want,
           "it never returns the older checkpoint as the last one");
        ok(ms >= 2900, "it waited its whole limit (%lld ms)", (long long)ms);
        ok(rc == 0 || strstr(err, "open transaction") != NULL, "the error says why: %s", err);

        /* The other transaction ends (aborted): the read gets past it. */
        if ((e = rd_kafka_abort_transaction(other, 30000)))
                tap_bail("abort: %s", rd_kafka_error_string(e));
        rc = read_ck(cfg, topic, key, 10000, &lsn, &found, &ms, err, sizeof(err));
        char got[RELAY_LSN_BUFSZ];
        ok(rc == 0 && found && lsn == want, "after the abort the read finds our latest, %s (rc %d: %s)",
           found ? relay_lsn_format(lsn, got) : "none", rc, rc ? err : "");
        tap_diag("a read of three transactions took %lld ms", (long long)ms);

        /* A read that began while the other was open ends as soon as it does. */
        if ((e = rd_kafka_begin_transaction(other)))
                tap_bail("begin: %s", rd_kafka_error_string(e));
        h_kafka_txn_produce(other, topic, "another/slot", "0/6");
        e = rd_kafka_commit_transaction(other, 30000);
        ok(e == NULL, "the other relay's next transaction committed");
        rc = read_ck(cfg, topic, key, 10000, &lsn, &found, &ms, err, sizeof(err));
        ok(rc == 0 && found && lsn == want, "a committed neighbour changes nothing (rc %d: %s)", rc,
           rc ? err : "");

        rd_kafka_destroy(other);
        rd_kafka_destroy(ours);
        relay_config_free(cfg);
        h_kafka_delete_topic(topic);
        free(topic);
        free(key);
        free(other_tid);
        free(our_tid);
        return done_testing();
}
