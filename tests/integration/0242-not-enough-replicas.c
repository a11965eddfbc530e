/*
 * 0242-not-enough-replicas.c - a partition whose broker keeps refusing the
 * relay's events with a retriable error (NOT_ENOUGH_REPLICAS) is said while
 * deliveries are stuck, not only when kafka.message.timeout.ms expires.
 *
 * On the 3-node cluster (tests/env/cluster), a topic of one partition, 3
 * replicas and min.insync.replicas = 3; one follower is stopped (controlled
 * shutdown: it leaves the ISR at once), so the leader refuses every acks=all
 * produce with NOT_ENOUGH_REPLICAS and librdkafka resends it every
 * retry.backoff.ms, without a word, until message.timeout.ms (120 s here).
 * A single-node broker cannot show this: Kafka 4 caps the topic's
 * min.insync.replicas at its replication factor (a topic of one replica
 * with min.insync.replicas = 2 takes acks=all writes).
 *
 * Before, the relay's log, /healthz, /readyz and the delivery error
 * counters said nothing for those 120 s (outbox_relay_inflight_events and
 * outbox_relay_unconfirmed_commit_age_seconds only grew), then one warning
 * "Local: Message timed out". Now, from librdkafka's statistics (per
 * partition: sent, resends counted, and acknowledged), a warning names the
 * topic, partition and leader once nothing was acknowledged for 10 s while
 * events were sent, and an info line says when acknowledgements come back.
 * The slot is never confirmed past the stuck event meanwhile.
 *
 * Then a stall that outlasts kafka.message.timeout.ms (30 s): the session
 * fails and starts again with a new producer, which delivers the event
 * once the follower is back. The end of the stall said by the producer
 * freed with the session must still be said (before, it never was when
 * the new producer did not stall 10 s itself: not ok 22).
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define STUCK "0242aaaa-0000-4000-8000-000000000002"
#define STUCK2 "0242aaaa-0000-4000-8000-000000000003"

static const char *g_cluster; /* tests/env/cluster */

/* Run "tests/env/cluster ARGS": its status; *out (may be NULL) its first line. */
static int cluster(char **out, const char *args)
{
        char cmd[1024];
        snprintf(cmd, sizeof(cmd), "bash '%s' %s </dev/null", g_cluster, args);
        fflush(stdout);
        FILE *f = popen(cmd, "r");
        char line[1024];
        char *first = NULL;
        while (f && fgets(line, sizeof(line), f))
                if (!first) {
                        line[strcspn(line, "\n")] = '\0';
                        first = strdup(line);
                }
        int st = f ? pclose(f) : -1;
        if (st != 0)
                tap_diag("tests/env/cluster %s: status %d", args, st);
        if (out)
                *out = first ? first : strdup("");
        else
                free(first);
        return st;
}

static void cluster_down(void)
{
        cluster(NULL, "down");
}

/* Stop the follower, write the event id, and see the stall said while the
 * slot stays below it and Kafka holds held events; *end: its commit's end. */
static void stall(h_relay_t *r, h_case_t *k, int follower, const char *id, int held,
                  char **end)
{
        char args[64], needle[512];
        snprintf(args, sizeof(args), "stop %d", follower);
        is_int(cluster(NULL, args), 0, "a follower stops: 2 of 3 replicas in sync");
        h_pg_exec(k->c,
                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
                  "VALUES ('%s', '%s', 'a-1', 'Stuck', '{}')",
                  id, k->aggtype);
        *end = h_pg_wal_lsn(k->c);
        snprintf(needle, sizeof(needle),
                 "topic \"%s\" partition 0: Kafka has acknowledged no event for", k->topic);
        bool said = h_relay_wait_log(r, needle, 90000);
        char *log = h_relay_log(r);
        bool timed_out = log && strstr(log, "Message timed out") != NULL;
        free(log);
        ok(said && !timed_out,
           "the stuck partition is said while its events are resent, before "
           "kafka.message.timeout.ms (said: %s, timed out first: %s)",
           said ? "yes" : "no", timed_out ? "yes" : "no");
        if (!said)
                h_relay_diag_log(r);
        char *conf = h_pg_confirmed_lsn(k->c, k->slot);
        ok(conf && !h_pg_lsn_ge(k->c, conf, *end),
           "meanwhile the slot stays below the stuck event (confirmed %s, its commit ends %s)",
           conf ? conf : "(null)", *end);
        free(conf);
        is_int(h_kafka_count(k->topic), held, "and Kafka holds the events before it only");
}

/* Start the follower: the stuck event is delivered, confirmed, and the end
 * of the stall said; Kafka holds held events. */
static void recover(h_relay_t *r, h_case_t *k, int follower, const char *end, int held)
{
        char args[64], needle[512];
        snprintf(args, sizeof(args), "start %d", follower);
        is_int(cluster(NULL, args), 0, "the follower is back");
        bool moved = h_pg_wait_confirmed(k->c, k->slot, end, 90000) >= 0;
        ok(moved, "the stuck event is delivered and confirmed (%s)", end);
        snprintf(needle, sizeof(needle), "topic \"%s\" partition 0: Kafka acknowledges events again",
                 k->topic);
        if (!ok(h_relay_wait_log(r, needle, 30000), "and that acknowledgements came back is said"))
                h_relay_diag_log(r);
        is_int(h_kafka_count(k->topic), held, "Kafka holds the events");
        is_int(h_relay_stop(r, 60000), 0, "the relay stops cleanly");
}

int main(void)
{
        char args[512], *boot = NULL, *lead = NULL, *end = NULL;
        g_cluster = h_env("RELAY_TEST_CLUSTER_CMD");
        atexit(cluster_down);
        if (cluster(&boot, "up") != 0 || !*boot)
                tap_bail("could not start the 3-node Kafka cluster (see the messages above)");
        setenv("RELAY_TEST_KAFKA", boot, 1); /* before any harness Kafka call */
        free(boot);

        h_case_t k;
        h_case_open(&k, "notenough", "slot", "ner", 0, 0);
        static const char *const all3[] = {"min.insync.replicas", "3", NULL};
        h_kafka_create_topic_config(k.topic, 1, all3);
        snprintf(args, sizeof(args), "wait-isr 60 '%s'", k.topic);
        is_int(cluster(NULL, args), 0, "the topic's 3 replicas are in sync");
        snprintf(args, sizeof(args), "leader '%s' 0", k.topic);
        cluster(&lead, args);
        int follower = atoi(lead) == 1 ? 2 : 1;
        tap_diag("leader %s; the follower stopped is node %d", lead, follower);
        free(lead);

        const char *sets[] = {k.set_conn, k.set_kafka, k.set_slot, "kafka.message.timeout.ms=120000",
                              "status.interval.ms=1000", NULL};
        h_relay_t *r = h_relay_start(sets);
        ok(h_relay_streams(r, 60000), "relay streams into the cluster");
        h_outbox_insert(k.c, k.aggtype, "a-1");
        is_int(h_kafka_wait_count(k.topic, 1, 60000), 1, "a first event is delivered");
        stall(r, &k, follower, STUCK, 1, &end);
        recover(r, &k, follower, end, 2);
        h_relay_free(r);
        free(end);

        tap_diag("a stall that outlasts kafka.message.timeout.ms");
        snprintf(args, sizeof(args), "wait-isr 60 '%s'", k.topic);
        is_int(cluster(NULL, args), 0, "the topic's 3 replicas are in sync again");
        snprintf(args, sizeof(args), "leader '%s' 0", k.topic);
        cluster(&lead, args);
        follower = atoi(lead) == 1 ? 2 : 1;
        tap_diag("leader %s; the follower stopped is node %d", lead, follower);
        free(lead);
        sets[3] = "kafka.message.timeout.ms=30000";
        r = h_relay_start(sets);
        ok(h_relay_streams(r, 60000), "a relay streams again");
        stall(r, &k, follower, STUCK2, 2, &end);
        ok(h_relay_wait_log(r, "Message timed out", 60000),
           "the stuck event times out: the session starts again with a new producer");
        recover(r, &k, follower, end, 3);
        h_relay_free(r);
        free(end);
        h_case_close(&k);
        return done_testing();
}
