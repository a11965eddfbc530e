/*
 * main.c - the outbox-relay command: options, configuration layering
 * (defaults < file < environment < --set), logging setup, then the main
 * loop. Owns nothing past start-up; relay_run() owns the process from there
 * and its return value is the exit code.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>

#include "relay/config.h"
#include "relay/log.h"
#include "relay/relay.h"
#include "relay/settings.h"
#include "relay_version.h"

#define PROG "outbox-relay"

/* POSIX: the environment; declared by no standard header in strict C mode. */
extern char **environ;

static void usage(FILE *out)
{
        fputs(PROG " relays transactional-outbox rows from PostgreSQL logical replication\n"
              "(pgoutput) to Kafka.\n"
              "\n"
              "Usage:\n"
              "  " PROG " [OPTION]...\n"
              "\n"
              "Options:\n"
              "  -c, --config=FILE      read configuration from FILE (default: the file named\n"
              "                         by OUTBOX_RELAY_CONFIG, else none)\n"
              "  -s, --set=KEY=VALUE    set a configuration key; may be repeated, applied in\n"
              "                         order after the file and the environment\n"
              "      --print-config     print the effective configuration with the origin of\n"
              "                         each value (secrets masked) and exit\n"
              "  -h, --help             show this help and exit\n"
              "  -V, --version          show the version and exit\n"
              "\n"
              "Configuration is layered: defaults < file < environment < --set.\n"
              "The file holds \"key = value\" lines and \"#\" comments; a value may be\n"
              "double-quoted. Every key can also be set by the environment variable\n"
              "OUTBOX_RELAY_<KEY>, the key upper-cased with \".\" written as \"_\"\n"
              "(slot.name: OUTBOX_RELAY_SLOT_NAME; kafka.bootstrap.servers:\n"
              "OUTBOX_RELAY_KAFKA_BOOTSTRAP_SERVERS).\n"
              "\n"
              "Configuration keys (key = default):\n",
              out);
        relay_config_print_help(out);
        fputs("\n"
              "Exit status:\n"
              "  0  clean stop after SIGTERM or SIGINT\n"
              "  1  fatal replication stream or protocol error\n"
              "  2  bad command line or configuration\n"
              "  3  server or broker setup error (version, wal_level, privilege, missing\n"
              "     table or publication, unreachable at start)\n"
              "  4  stopped before an event that could not be delivered: it could not be\n"
              "     mapped or Kafka rejected it (errors.policy = stop), or its dead-letter\n"
              "     write failed\n"
              "  5  the replication slot was dropped or invalidated\n",
              out);
}

static void version(void)
{
        int pq = PQlibVersion();

        /* PQlibVersion() is major * 10000 + minor since PostgreSQL 10. */
        printf(PROG " %s (librdkafka %s, libpq %d.%d)\n", RELAY_VERSION, rd_kafka_version_str(),
               pq / 10000, pq % 10000);
}

/* One line in PostgreSQL's client style; the caller exits with RELAY_EXIT_CONFIG. */
static int config_error(const char *msg)
{
        fprintf(stderr, PROG ": error: %s\n", msg);
        return RELAY_EXIT_CONFIG;
}

/* Flush stdout and report a failure to write it (a closed pipe, a full disk). */
static int finish_stdout(void)
{
        if (fflush(stdout) != 0 || ferror(stdout)) {
                fprintf(stderr, PROG ": error: could not write to standard output\n");
                return RELAY_EXIT_CONFIG;
        }
        return RELAY_EXIT_OK;
}

int main(int argc, char **argv)
{
        enum { OPT_PRINT_CONFIG = 256 };
        static const struct option options[] = {
                {"config", required_argument, NULL, 'c'},
                {"set", required_argument, NULL, 's'},
                {"print-config", no_argument, NULL, OPT_PRINT_CONFIG},
                {"help", no_argument, NULL, 'h'},
                {"version", no_argument, NULL, 'V'},
                {NULL, 0, NULL, 0},
        };
        char err[RELAY_ERRBUF];
        const char *config_file = NULL;
        const char **sets;
        size_t nsets = 0;
        bool print_config = false;
        relay_config_t *cfg = NULL;
        relay_settings_t *set = NULL;
        int opt, rc;

        relay_install_signals();

        /* --set arguments are kept in order; there cannot be more than argc of them. */
        sets = calloc((size_t)argc + 1, sizeof(*sets));
        if (sets == NULL)
                return config_error("out of memory");

        opterr = 0; /* report in our own format below */
        while ((opt = getopt_long(argc, argv, ":c:s:hV", options, NULL)) != -1) {
                switch (opt) {
                case 'c':
                        config_file = optarg;
                        break;
                case 's':
                        sets[nsets++] = optarg;
                        break;
                case OPT_PRINT_CONFIG:
                        print_config = true;
                        break;
                case 'h':
                        free(sets);
                        usage(stdout);
                        return finish_stdout();
                case 'V':
                        free(sets);
                        version();
                        return finish_stdout();
                case ':':
                        free(sets);
                        snprintf(err, sizeof(err),
                                 "option \"%s\" requires an argument; try \"" PROG " --help\"",
                                 argv[optind - 1]);
                        return config_error(err);
                default:
                        free(sets);
                        if (optopt != 0)
                                snprintf(err, sizeof(err),
                                         "invalid option \"-%c\"; try \"" PROG " --help\"",
                                         optopt);
                        else
                                snprintf(err, sizeof(err),
                                         "unrecognized option \"%s\"; try \"" PROG " --help\"",
                                         argv[optind - 1]);
                        return config_error(err);
                }
        }
        if (optind < argc) {
                snprintf(err, sizeof(err),
                         "unexpected argument \"%s\"; configuration is given with --config or "
                         "--set KEY=VALUE",
                         argv[optind]);
                free(sets);
                return config_error(err);
        }

        if (config_file == NULL) {
                config_file = getenv("OUTBOX_RELAY_CONFIG");
                if (config_file != NULL && config_file[0] == '\0')
                        config_file = NULL;
        }

        rc = relay_config_new(&cfg);
        if (rc < 0) {
                free(sets);
                return config_error("out of memory");
        }
        if (config_file != NULL)
                rc = relay_config_load_file(cfg, config_file, err, sizeof(err));
        if (rc == 0)
                rc = relay_config_load_env(cfg, environ, err, sizeof(err));
        for (size_t i = 0; rc == 0 && i < nsets; i++)
                rc = relay_config_set_arg(cfg, sets[i], err, sizeof(err));
        free(sets);
        if (rc == 0)
                rc = relay_config_validate(cfg, err, sizeof(err));
        if (rc == 0)
                rc = relay_settings_load(&set, cfg, err, sizeof(err));
        if (rc < 0) {
                relay_config_free(cfg);
                return config_error(err);
        }
        relay_log_configure(set->log_level, set->log_format);

        if (print_config) {
                relay_config_print(cfg, stdout);
                relay_settings_free(set);
                relay_config_free(cfg);
                return finish_stdout();
        }

        rc = relay_run(cfg, set);
        relay_settings_free(set);
        relay_config_free(cfg);
        return rc;
}
