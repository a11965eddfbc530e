/*
 * workload.h - the application the integration tests play: concurrent
 * writers inserting outbox events in the same transactions as their
 * business change, and the check of what Kafka holds afterwards.
 *
 * Each event bumps its aggregate's version under the aggregate's row lock
 * (UPDATE aggregates SET version = version + 1 ... RETURNING version) and
 * carries it in its payload, so the committed versions of one aggregate are
 * 1..N in commit order and rolled-back work leaves no gap: Kafka's copy can
 * be checked for loss, duplicates and order without trusting the relay.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_TEST_WORKLOAD_H
#define RELAY_TEST_WORKLOAD_H

#include <stdbool.h>
#include <stddef.h>

#include <libpq-fe.h>

#define H_WORKLOAD_TYPES 2

typedef struct {
        const char *db;     /* database holding outbox, aggregates and noise */
        const char *suffix; /* makes aggregate types, hence topics, unique to the run */
        int writers;
        int aggregates;
        int events;         /* committed events to reach, over all writers */
        int max_txn;        /* events per transaction: 1..max_txn */
        bool rollbacks;     /* some transactions rolled back, some to a savepoint */
        bool deletes;       /* some outbox rows deleted in their own transaction */
        bool noise;         /* an unrelated table written in and between transactions */
        int pause_ms;       /* pause after each transaction of a writer (0: flat out) */
        int partitions;     /* of each topic */
} h_workload_conf_t;

typedef struct h_workload h_workload_t;

typedef struct {
        size_t messages;     /* consumed */
        size_t expected;     /* committed events (sum of aggregate versions) */
        size_t duplicates;   /* messages whose version was seen before for its aggregate */
        size_t missing;      /* committed versions never seen */
        size_t out_of_order; /* first occurrences that came after a later version's */
        size_t bad_key;      /* key is not agg-<n>, or wrong topic */
        size_t bad_partition; /* an aggregate seen in two partitions */
        size_t bad_headers;  /* id/type headers missing or wrong */
        size_t bad_value;    /* payload not the JSON written */
} h_verify_t;

/** Create the tables and the topics (bails on failure). c is borrowed. */
/** The tables of h_workload_setup() without its topics (for a cluster that
 *  has no CreateTopics, such as librdkafka's mock). */
void h_workload_setup_tables(PGconn *c, const h_workload_conf_t *conf);

void h_workload_setup(PGconn *c, const h_workload_conf_t *conf);

/** The i-th topic (0 <= i < H_WORKLOAD_TYPES) into buf. */
const char *h_workload_topic(const h_workload_conf_t *conf, int i, char *buf, size_t len);

/** Start the writers (conf is borrowed until h_workload_wait). */
h_workload_t *h_workload_start(const h_workload_conf_t *conf);

/** Events committed so far (racy read, for progress). */
int h_workload_committed(h_workload_t *w);

/** Join the writers; returns how many failed (each reported with tap_diag). Frees w. */
int h_workload_wait(h_workload_t *w, int *committed, int *rolled_back);

/** Messages in the workload's topics (high watermarks). */
long long h_workload_count(const h_workload_conf_t *conf);

/** Wait until Kafka holds at least n messages or timeout_ms; returns the count. */
long long h_workload_wait_count(const h_workload_conf_t *conf, long long n, int timeout_ms);

/** Consume both topics and compare with the committed versions in the database. */
void h_workload_verify(PGconn *c, const h_workload_conf_t *conf, h_verify_t *out);

/**
 * The statement that writes one event of aggregate agg as writer number
 * writer does (the aggregate's next version; the payload repeats the row's
 * id, which h_workload_verify() compares with the id header), into sql.
 */
void h_workload_event_sql(char *sql, size_t len, const char *suffix, int agg, int writer);

/** Print a verify result as TAP diagnostics. */
void h_workload_diag(const h_verify_t *v);

#endif
