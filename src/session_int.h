/*
 * session_int.h - the session's state, shared by session.c (the stream
 * loop) and settle.c (settling rejected events in place) and by nothing
 * else: one module in two files, as PostgreSQL's *_internal.h headers are.
 * The rest of the program sees only include/relay/session.h.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_SESSION_INT_H
#define RELAY_SESSION_INT_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "relay/acktrack.h"
#include "relay/limits.h"
#include "relay/metrics.h"
#include "relay/outbox.h"
#include "relay/pgoutput.h"
#include "relay/policy.h"
#include "relay/producer.h"
#include "relay/repl.h"
#include "relay/session.h"
#include "relay/settings.h"
#include "relay/slotmon.h"
#include "relay/source.h"

/* State that outlives sessions: what the error policy must remember and
 * what was learnt about Kafka's limits and topics. */
struct relay_process {
        relay_policy_t *pol;
        relay_limits_t *lim;
        int64_t max_batch; /* batch.size for new producers (0: librdkafka's) */
        int linger_ms;     /* linger.ms for new producers, from the first session's round trip (0: 5) */
        int64_t relinger_after_ms; /* no attempt to apply linger_ms before (settling; a drain timed out) */
        int64_t relingered_ms;     /* when the producer was last replaced for linger_ms (0: never) */
        relay_producer_rtt_watch_t *rttw; /* the round trip in librdkafka's statistics */
        relay_producer_parts_t *parts;    /* the topics' partition counts producers saw */
        uint64_t implicit_acks;
        relay_metrics_t *metrics; /* read by the HTTP thread through its snapshot only */
        relay_slotmon_t *slotmon;
        bool slotmon_warned; /* the side connection's current failure was logged */
        char unpublished[160]; /* the outbox table last warned as unpublished; "" none */
        const volatile sig_atomic_t *hangups; /* SIGHUPs received (borrowed) */
        sig_atomic_t hangups_logged;
};

/* Where the stream stands: what was received, what was confirmed, when. */
typedef struct {
        relay_lsn_t received;      /* highest commit end or keepalive WAL end received */
        relay_lsn_t keepalive_end; /* the server's WAL end from its last keepalive */
        relay_lsn_t sent_flush;    /* flush LSN of the last status update */
        int64_t last_status_ms;
        int64_t status_interval_ms;
        bool reply_pending;        /* the server asked for a reply */
} progress_t;

/* One message produced in place (a resend or a dead-letter copy), whose
 * outcome the loop waits for before producing anything after it. */
typedef struct {
        bool settling; /* an event is being resent (settle.c resend()): its
                        * waits too hold back everything after it */
        bool pending;
        int err;
        relay_dr_class_t cls;
        char why[RELAY_ERRBUF];
} inplace_t;

/*
 * delivery.mode = exactly-once: the session's events go out in Kafka
 * transactions, each closed by a checkpoint record (the end LSN of its last
 * PostgreSQL transaction) and committed at a PostgreSQL transaction
 * boundary. The slot is confirmed only up to what a committed Kafka
 * transaction holds; on restart, transactions the checkpoint covers are
 * read from the slot again but not produced.
 */
typedef struct {
        bool on;
        char key[160];          /* checkpoint key: <system identifier>/<slot> */
        char tid[200];          /* transactional.id in use */
        relay_lsn_t checkpoint; /* skip transactions whose commit LSN is below it */
        bool skipping;          /* the open PostgreSQL transaction is covered by it */
        bool unproven;          /* transactions were skipped below it, and the stream has
                                 * not yet shown a commit ending exactly at it (which
                                 * proves it ours): nothing confirmed past them meanwhile */
        bool behind;            /* it committed longer ago than eos.commit.catchup.interval.ms */
        bool open;              /* a Kafka transaction is open */
        int64_t opened_ms;
        int64_t last_commit_ms; /* when the last commit began (0: none yet) */
        int64_t commit_ms;      /* how long recent commits took while following, smoothed */
        relay_lsn_t open_end;   /* end LSN of the last PostgreSQL transaction in it */
        relay_lsn_t committed;  /* Kafka holds everything up to here, committed */
        bool spoilt;            /* a Kafka transaction failed or was aborted: events it
                                 * held were acknowledged but are not in Kafka, so
                                 * nothing more is confirmed in this session */
        uint64_t commits, skipped_txns;
        uint64_t txn_events;    /* events produced into the open transaction */
        int64_t held_ms, max_held_ms; /* time the stream was held by commits */
} eos_t;

struct relay_session {
        const relay_config_t *cfg; /* for the producer's kafka.* pairs */
        const relay_settings_t *set;
        relay_process_t *proc;
        const volatile sig_atomic_t *stop; /* a stop was asked for */
        relay_source_t *src;  /* the connection, decoder and mapping */
        relay_repl_t *repl;   /* src's connection, borrowed */
        relay_producer_t *prod;
        relay_acktrack_t *ack;
        progress_t prog;
        inplace_t inplace;
        bool streaming; /* START_REPLICATION succeeded: status updates may be sent */

        bool stop_cancelled; /* a stop cancelled a command waiting on the server */
        char backfill_lost[RELAY_ERRBUF]; /* why the backfill's temporary slot is gone ("": it is not) */
        bool dr_failed;
        bool dr_purged; /* the failure recorded is a purge: a later cause replaces it */
        char dr_err[RELAY_ERRBUF];
        bool ack_bug;
        bool draining; /* relay_session_drain() runs: no session resumes after this one */

        eos_t eos;

        relay_lsn_t txn_lsn; /* the open transaction's commit LSN (from Begin): names it */
        int64_t commit_ts;   /* of the open transaction, PostgreSQL epoch us */
        relay_session_counts_t n;
};

/* Producer tags: a transaction's message carries its sequence shifted left
 * (even); the one message produced in place carries 1. */
#define TAG_SEQ(seq) ((uint64_t)(seq) << 1)
#define TAG_INPLACE UINT64_C(1)
#define TAG_CHECKPOINT UINT64_C(3) /* exactly-once: the checkpoint record */

/* session.c: the steps settle.c waits with. Each returns 0 or a session
 * failure (err filled). */

/* Serve Kafka for up to ms, keeping status updates flowing. */
int relay_session_serve(relay_session_t *s, int ms, char *err, size_t errlen);
/* Offer one event to the producer, waiting out a full queue. */
int relay_session_send(relay_session_t *s, const relay_event_t *ev, uint64_t tag, char *err,
                       size_t errlen);
/* Wait until Kafka has answered for everything produced so far. */
int relay_session_wait_drained(relay_session_t *s, char *err, size_t errlen);
/* Replace the producer (nothing may be in flight) by one with the process's batch size. */
int relay_session_new_producer(relay_session_t *s, char *err, size_t errlen);
/* A failed delivery, a delivery-report bug or a dead producer, as a session failure. */
int relay_session_kafka_check(relay_session_t *s, char *err, size_t errlen);
/* Send a standby status update when one is due, asked for, or worth it. */
int relay_session_status(relay_session_t *s, bool force, char *err, size_t errlen);

/* settle.c: one event of the open transaction, mapped from an outbox row
 * or message ("what", for messages) with the mapping's result rc: skip it,
 * settle it in place (resend alone, dead-letter, or stop: RELAY_EMAP), or
 * produce it. */
int relay_settle_event(relay_session_t *s, relay_event_t ev, int rc, const char *what,
                       relay_lsn_t lsn, char *err, size_t errlen);

#endif
