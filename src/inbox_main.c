/*
 * inbox_main.c - the outbox-inbox command: options, configuration
 * (defaults < --config file < --set), signals, then the loop of inbox.c,
 * whose return value is the exit code. Owns nothing past start-up.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "relay/inbox.h"
#include "relay/inbox_config.h"
#include "relay/log.h"
#include "relay/manual.h"
#include "relay_version.h"

#define PROG "outbox-inbox"

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
        if (stop_requested)
                _exit(RELAY_INBOX_EXIT_OK); /* second signal: nothing is lost, see inbox.h */
        stop_requested = sig;
}

static void usage(FILE *out)
{
        fprintf(out,
                "Usage: " PROG " [--config FILE] [--set KEY=VALUE]...\n"
                "Consume outbox events from Kafka and apply each once to PostgreSQL: per\n"
                "message one transaction running inbox_accept() (sql/006_inbox.sql) and, for a\n"
                "new message id, the inbox.handler statement; the Kafka offset is committed\n"
                "after the transaction.\n\n"
                "Options:\n"
                "  -c, --config FILE   read key = value lines\n"
                "  -s, --set KEY=VALUE set one key (after the file)\n"
                "  -h, --help          this help\n"
                "  -V, --version       version\n"
                "      --man           print the manual page (roff)\n\n");
        relay_inbox_config_print_help(out);
        fprintf(out, "\nExit status: 0 stopped by SIGTERM/SIGINT, 1 Kafka fatal error (or revoked "
                     "partitions\nit could not give up, or standard output not written; a reader "
                     "that stops\nreading is no error), 2 bad configuration, 3 PostgreSQL refuses "
                     "the connection\nfor good (password, pg_hba.conf, no such role or database, "
                     "in any language)\nor inbox_accept() or the handler does not prepare, 4 "
                     "stopped before a message\nthat could not be applied or dead-lettered "
                     "(PostgreSQL away is retried).\n");
}

static int say_error(const char *msg, int exit_code)
{
        fprintf(stderr, "%s" PROG ": error: %s\n", relay_log_journal_prefix(RELAY_LOG_ERROR), msg);
        return exit_code;
}

static int config_error(const char *msg)
{
        return say_error(msg, RELAY_INBOX_EXIT_CONFIG);
}

/* --help, --man and --version: print, then flush as the relay does
 * (relay_stdout_finish()): a reader that stopped reading (`outbox-inbox
 * --man | head`) is no error, 0 and no word; a failed write (a full disk)
 * is said, 1. */
static int print_only(void (*print)(FILE *), char **sets)
{
        char err[RELAY_ERRBUF];
        free(sets);
        print(stdout);
        if (relay_stdout_finish(err, sizeof(err)) != 0)
                return say_error(err, RELAY_INBOX_EXIT_FATAL);
        return RELAY_INBOX_EXIT_OK;
}

static void version(FILE *out)
{
        fprintf(out, PROG " %s (librdkafka %s)\n", RELAY_VERSION, rd_kafka_version_str());
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                {"config", required_argument, NULL, 'c'},
                {"set", required_argument, NULL, 's'},
                {"help", no_argument, NULL, 'h'},
                {"version", no_argument, NULL, 'V'},
                {"man", no_argument, NULL, 'M'},
                {NULL, 0, NULL, 0},
        };
        const char *file = NULL;
        char **sets = calloc((size_t)argc + 1, sizeof(char *));
        size_t nsets = 0;
        relay_inbox_config_t *cfg = NULL;
        char err[RELAY_ERRBUF];
        int c, rc;

        /* First, as the relay: SIGPIPE ignored, so that a reader of --man
         * that stops reading fails a write (print_only()) instead of
         * killing the inbox (status 141). Without the stop handlers a stop
         * would kill the inbox, not end its loop with the stored offsets
         * committed; without SIGHUP's, so would a SIGHUP (status 129),
         * which PostgreSQL and PgBouncer take for a reload: the inbox has
         * none, and says so. */
        const volatile sig_atomic_t *hangups;
        if (relay_stop_signals(on_signal, true, err, sizeof(err)) != 0 ||
            relay_hangup_signal(&hangups, err, sizeof(err)) != 0) {
                free(sets);
                return say_error(err, RELAY_INBOX_EXIT_FATAL);
        }
        if (!sets)
                return config_error("out of memory");
        while ((c = getopt_long(argc, argv, "c:s:hV", opts, NULL)) != -1) {
                switch (c) {
                case 'c':
                        file = optarg;
                        break;
                case 's':
                        sets[nsets++] = optarg;
                        break;
                case 'h':
                        return print_only(usage, sets);
                case 'M':
                        return print_only(relay_manual_print_inbox_man, sets);
                case 'V':
                        return print_only(version, sets);
                default:
                        free(sets);
                        fprintf(stderr, "Try \"" PROG " --help\" for more information.\n");
                        return RELAY_INBOX_EXIT_CONFIG;
                }
        }
        if (optind < argc) {
                free(sets);
                snprintf(err, sizeof(err), "unexpected argument \"%s\": settings are given as "
                                           "--set KEY=VALUE", argv[optind]);
                return config_error(err);
        }
        if (relay_inbox_config_new(&cfg) != 0) {
                free(sets);
                return config_error("out of memory");
        }
        rc = file ? relay_inbox_config_load_file(cfg, file, err, sizeof(err)) : 0;
        for (size_t i = 0; rc == 0 && i < nsets; i++)
                rc = relay_inbox_config_set_arg(cfg, sets[i], err, sizeof(err));
        free(sets);
        if (rc == 0)
                rc = relay_inbox_config_validate(cfg, err, sizeof(err));
        if (rc != 0) {
                relay_inbox_config_free(cfg);
                return config_error(err);
        }
        relay_log_configure(cfg->log_level, RELAY_LOG_TEXT);

        rc = relay_inbox_run(cfg, &stop_requested, hangups);
        relay_inbox_config_free(cfg);
        return rc;
}
