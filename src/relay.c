/*
 * relay.c - the supervisor: opens sessions (session.c) one after another
 * and decides what each ending means: stop, retry after a backoff, stand by
 * while another relay holds the slot, or stop with an exit code. The only
 * place besides main.c and the session that logs; owns the stop signals'
 * flag, its only global (SIGHUP's counter is common.c's).
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/relay.h"

#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "relay/http.h"
#include "relay/log.h"
#include "relay/metrics.h"
#include "relay/notify.h"
#include "relay/session.h"

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
        /* Second signal: leave now, confirm nothing more. relay_log() is not
         * safe to use here; relay_log_signal_safe() writes the same line (a
         * JSON one under log.format = json, with the journal's priority), so
         * that an exit 1 in the middle of a drain does not go unexplained. */
        if (stop_requested) {
                relay_log_signal_safe(RELAY_LOG_FATAL,
                                      "second stop signal: exiting at once with status 1; what "
                                      "was not confirmed is sent again on the next start");
                _exit(RELAY_EXIT_FATAL);
        }
        stop_requested = sig;
}

/* Standby relays retry START_REPLICATION this often, so a takeover after
 * the active relay dies takes about this long plus the server noticing. */
#define STANDBY_RETRY_MS 1000

/* Sleep ms, waking early for a stop signal; the loop is alive meanwhile. */
static void nap(relay_process_t *proc, int64_t ms)
{
        int64_t end = relay_now_ms() + ms;
        while (!stop_requested) {
                relay_process_turn(proc);
                relay_metrics_alive(relay_process_metrics(proc), relay_now_ms());
                int64_t left = end - relay_now_ms();
                if (left <= 0)
                        break;
                poll(NULL, 0, (int)(left > 100 ? 100 : left));
        }
}

/* Backing off after err: systemd's STATUS= says so, rather than the
 * "streaming" (or "standing by") of the session that ended. With READY=1:
 * a relay that got this far has a good configuration and runs, also when
 * its first session could not start (PostgreSQL or Kafka away at boot), as
 * PgBouncer is ready without its servers. Held back until then, it kept
 * the unit activating: systemctl start waited, and at TimeoutStartSec
 * systemd stopped the relay and (Restart=on-failure) started it over, for
 * as long as the server was away. /readyz says it is not ready meanwhile. */
static void notify_backoff(const char *err)
{
        char status[RELAY_ERRBUF + 32];
        snprintf(status, sizeof(status), "backing off: %s", err);
        relay_notify_ready(status);
}

static int64_t backoff_ms(const relay_settings_t *set, int attempt)
{
        int64_t base = set->reconnect_backoff_ms;
        int64_t max = set->reconnect_backoff_max_ms;
        int64_t d = base;
        for (int i = 0; i < attempt && d < max; i++)
                d *= 2;
        if (d > max)
                d = max;
        /* Full jitter on the upper half: replicas that failed together do
         * not come back together. */
        return d / 2 + (int64_t)((double)rand() / RAND_MAX * (double)(d / 2));
}

/* What the supervisor does after a session ended with rc. */
typedef enum {
        OUTCOME_RETRY,    /* transient: back off, resume from the slot */
        OUTCOME_STANDBY,  /* another relay streams from the slot: retry soon */
        OUTCOME_SLOTLOST, /* fatal unless slot.recreate */
        OUTCOME_FATAL,    /* stop with the exit code */
} outcome_t;

/* Every session ending in one table: what to do, and the exit code when
 * that is to stop. Codes not listed are fatal (exit 1). */
static const struct {
        int rc;
        outcome_t outcome;
        int exit_code;
} endings[] = {
        {RELAY_EBUSY, OUTCOME_STANDBY, RELAY_EXIT_FATAL},
        {RELAY_ESLOTLOST, OUTCOME_SLOTLOST, RELAY_EXIT_SLOTLOST},
        {RELAY_EIO, OUTCOME_RETRY, RELAY_EXIT_FATAL},
        {RELAY_EKAFKA, OUTCOME_RETRY, RELAY_EXIT_FATAL},
        {RELAY_ENOMEM, OUTCOME_RETRY, RELAY_EXIT_FATAL},
        {RELAY_EINVAL, OUTCOME_FATAL, RELAY_EXIT_CONFIG},
        {RELAY_ESETUP, OUTCOME_FATAL, RELAY_EXIT_SETUP},
        {RELAY_EMAP, OUTCOME_FATAL, RELAY_EXIT_EVENT},
        {RELAY_EFENCED, OUTCOME_FATAL, RELAY_EXIT_FENCED},
};

static outcome_t classify(int rc, int *exit_code)
{
        for (size_t i = 0; i < sizeof(endings) / sizeof(endings[0]); i++)
                if (endings[i].rc == rc) {
                        *exit_code = endings[i].exit_code;
                        return endings[i].outcome;
                }
        *exit_code = RELAY_EXIT_FATAL;
        return OUTCOME_FATAL;
}

int relay_install_signals(char *err, size_t errlen)
{
        return relay_stop_signals(on_signal, true, err, errlen);
}

/* A session that streamed until asked to stop, or until an event stopped
 * it (rc RELAY_EMAP): drain it, say what it did; the exit code. A drain
 * that failed (a delivery, the producer, a Kafka transaction, the final
 * confirmation) is no clean stop: its error's exit code, as if the session
 * had ended with it, and *end_rc (how the session ended, for the metrics)
 * gets it; after an event that stopped the session, the event's exit code,
 * the drain's failure logged too. */
static int finish(relay_session_t *s, relay_process_t *proc, int rc, const char *err, int *end_rc)
{
        char derr[RELAY_ERRBUF];
        relay_notify_stopping();
        relay_metrics_state(relay_process_metrics(proc), RELAY_STATE_STOPPING);
        if (rc == RELAY_EMAP)
                relay_log_error("%s", err);
        else if (stop_requested)
                relay_log_info("%s received: stopping: waiting up to shutdown.timeout.ms for Kafka to "
                               "acknowledge what is in flight, then confirming it (a second signal "
                               "exits at once)",
                               stop_requested == SIGINT ? "SIGINT" : "SIGTERM");
        int drc = relay_session_drain(s, derr, sizeof(derr));
        relay_session_counts_t n = relay_session_counts(s);
        relay_log_info("stopped after relaying %llu events in %llu transactions (%llu "
                       "dead-lettered, %llu skipped)",
                       (unsigned long long)n.events, (unsigned long long)n.txns,
                       (unsigned long long)n.dead_lettered, (unsigned long long)n.skipped);
        if (relay_process_implicit_acks(proc))
                relay_log_warning("%llu delivery reports came without an offset and were sent "
                                  "again from the slot",
                                  (unsigned long long)relay_process_implicit_acks(proc));
        *end_rc = rc ? rc : drc;
        if (rc) {
                if (drc)
                        relay_log_error("%s", derr);
                return RELAY_EXIT_EVENT;
        }
        if (drc) {
                int code;
                classify(drc, &code);
                relay_log_fatal("%s", derr);
                return code;
        }
        return RELAY_EXIT_OK;
}

int relay_run(const relay_config_t *cfg, const relay_settings_t *set)
{
        srand((unsigned)time(NULL) ^ (unsigned)getpid());

        const char *slot = set->slot_name;
        char err[RELAY_ERRBUF];
        bool ever_streamed = false, standby_logged = false, drained = false;
        relay_lsn_t resume = 0; /* highest LSN this process confirmed, across sessions */
        int attempt = 0, exit_code = RELAY_EXIT_OK;
        relay_process_t *proc;
        relay_session_opts_t opts = {
                .first = true,
                .recreate_slot = set->slot_recreate,
                .stop = &stop_requested,
        };

        /*
         * SIGHUP: PostgreSQL and PgBouncer reload their configuration on it,
         * and its default action ended the relay at once (status 129)
         * without a drain, so everything in flight was sent again. The relay
         * has no reload (its layers include the environment, which a running
         * process cannot re-read): the loop's turns say that a restart
         * applies a changed configuration, and it goes on. Here, not in
         * relay_install_signals(): the commands keep the default (a hangup
         * ends tail).
         */
        const volatile sig_atomic_t *hangups;
        if (relay_hangup_signal(&hangups, err, sizeof(err)) ||
            relay_process_new(&proc, set, hangups, err, sizeof(err))) {
                relay_log_fatal("%s", err);
                return RELAY_EXIT_FATAL;
        }
        relay_metrics_t *metrics = relay_process_metrics(proc);
        relay_http_t *http = NULL; /* the HTTP endpoint, on its own thread */
        if (strcmp(set->http_listen, "off") != 0 && !relay_http_available()) {
                relay_log_warning("this build has no HTTP endpoint (built without libmicrohttpd): "
                                  "http.listen = %s is ignored",
                                  set->http_listen);
        } else if (strcmp(set->http_listen, "off") != 0) {
                int hrc = relay_http_start(&http, set->http_listen, set->http_liveness_timeout_ms,
                                           metrics, err, sizeof(err));
                if (hrc) {
                        relay_log_fatal("%s", err);
                        relay_process_free(proc);
                        return hrc == RELAY_ESETUP ? RELAY_EXIT_SETUP : RELAY_EXIT_FATAL;
                }
                relay_log_info("serving /metrics, /healthz and /readyz on http://%s",
                               set->http_listen);
        }
        if (set->unsafe_allow_pipelining)
                relay_log_warning("delivery.unsafe.allow.pipelining = true: with more than one "
                                  "request in flight librdkafka can report an event delivered "
                                  "that Kafka never stored; the relay resends such events, but "
                                  "an aggregate's events may be reordered");
        char source[400];
        int sn = 0;
        char tables[300];
        if (set->outbox_source != RELAY_SOURCE_MESSAGES)
                sn = snprintf(source, sizeof(source), "table%s %s%s",
                              set->n_outbox_tables > 1 ? "s" : "",
                              relay_settings_tables(set, tables, sizeof(tables)),
                              set->outbox_source == RELAY_SOURCE_BOTH ? " and " : "");
        if (set->outbox_source != RELAY_SOURCE_TABLE && sn >= 0 && (size_t)sn < sizeof(source))
                snprintf(source + sn, sizeof(source) - (size_t)sn, "messages with prefix \"%s\"",
                         set->outbox_message_prefix);
        relay_log_info("starting outbox-relay: slot \"%s\", publication \"%s\", %s", slot,
                       set->publication_name, source);
        while (!stop_requested && !drained) {
                relay_session_t *s;
                err[0] = '\0';
                opts.may_create_slot = !ever_streamed;
                int rc = relay_session_open(&s, cfg, set, proc, &opts, &resume, err, sizeof(err));
                bool opened = rc == 0;
                opts.first = false;
                if (rc == 0) {
                        if (standby_logged)
                                relay_log_info("replication slot \"%s\" is free; taking over", slot);
                        relay_log_info("streaming from replication slot \"%s\"", slot);
                        relay_notify_ready("streaming");
                        relay_metrics_state(metrics, RELAY_STATE_STREAMING);
                        standby_logged = false;
                        ever_streamed = true;
                        rc = relay_session_stream(s, err, sizeof(err));
                        /* A stop that ended a wait inside a step of the
                         * stream (the backoff before an event Kafka refused
                         * is resent): a stop as at any other point, drained
                         * and confirmed up to the transaction it stopped
                         * in, never into it (0169). */
                        if (rc == RELAY_ESTOPPED && stop_requested)
                                rc = 0;
                        if (rc == 0 || rc == RELAY_EMAP) {
                                exit_code = finish(s, proc, rc, err, &rc);
                                drained = true;
                        } else if (relay_session_confirmed(s) > resume) {
                                /* Only a session that got something confirmed resets the
                                 * backoff: one that fails at the same event again (a
                                 * missing topic) waits longer each time. */
                                resume = relay_session_confirmed(s);
                                attempt = 0;
                        }
                        relay_session_free(s);
                }
                relay_metrics_session_end(metrics, rc);
                if (drained)
                        break;
                int code;
                outcome_t outcome = classify(rc, &code);
                if (err[0] == '\0') /* every failure should say why; never log an empty line */
                        relay_err_set(err, sizeof(err), "%s", relay_strerror(rc));
                if (stop_requested) {
                        /* A stop ends the session cleanly (rc 0 or
                         * RELAY_ESTOPPED), or the wait of a standby. */
                        if (rc == 0 || rc == RELAY_ESTOPPED || outcome == OUTCOME_STANDBY)
                                break;
                        /* A session that could not start (the server down,
                         * Kafka refusing the backfill) with a failure that
                         * would be retried: the retry is what the stop
                         * cancels, as in the backoff's nap. Nothing of that
                         * session was confirmed, so nothing went wrong by
                         * stopping; exit 1 would depend only on whether the
                         * signal came during the nap or the attempt. */
                        if (!opened && outcome == OUTCOME_RETRY) {
                                relay_log_warning("%s; not retried: stopping", err);
                                break;
                        }
                        /* Any other error after it still is one: its message
                         * and exit code, not a retry. */
                        outcome = OUTCOME_FATAL;
                }
                relay_metrics_state(metrics, outcome == OUTCOME_STANDBY ? RELAY_STATE_STANDBY
                                                                        : RELAY_STATE_BACKOFF);
                switch (outcome) {
                case OUTCOME_STANDBY:
                        if (!standby_logged)
                                relay_log_info("replication slot \"%s\" is active in another "
                                               "process; standing by",
                                               slot);
                        standby_logged = true;
                        relay_notify_ready("standing by: the slot is active in another process");
                        nap(proc, STANDBY_RETRY_MS);
                        continue;
                case OUTCOME_SLOTLOST:
                        if (!set->slot_recreate)
                                break;
                        relay_log_warning("%s; recreating it (slot.recreate = true)", err);
                        notify_backoff(err);
                        nap(proc, backoff_ms(set, attempt++));
                        continue;
                case OUTCOME_RETRY: {
                        int64_t d = backoff_ms(set, attempt++);
                        relay_log_warning("%s; retrying in %lld ms", err, (long long)d);
                        notify_backoff(err);
                        nap(proc, d);
                        continue;
                }
                case OUTCOME_FATAL:
                        break;
                }
                relay_log_fatal("%s", err);
                exit_code = code;
                break;
        }
        if (exit_code == RELAY_EXIT_OK && !drained) {
                relay_notify_stopping();
                relay_log_info("stopped");
        }
        relay_http_stop(http);
        relay_process_free(proc);
        return exit_code;
}
