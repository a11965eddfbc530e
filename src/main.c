/*
 * main.c - the outbox-relay command: options, configuration layering
 * (defaults < file < environment < --set), logging setup, then the main
 * loop. Owns nothing past start-up; relay_run() owns the process from there
 * and its return value is the exit code. The commands check, status and
 * tail read the same configuration and run their module instead.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>

#include "relay/check.h"
#include "relay/config.h"
#include "relay/http.h"
#include "relay/dbzconf.h"
#include "relay/log.h"
#include "relay/lsn.h"
#include "relay/manual.h"
#include "relay/relay.h"
#include "relay/settings.h"
#include "relay/status.h"
#include "relay/tail.h"
#include "relay_version.h"

#define PROG "outbox-relay"

/* POSIX: the environment; declared by no standard header in strict C mode. */
extern char **environ;

static void version(FILE *out)
{
        int pq = PQlibVersion();

        /* PQlibVersion() is major * 10000 + minor since PostgreSQL 10. */
        fprintf(out, PROG " %s (librdkafka %s, libpq %d.%d)\n", RELAY_VERSION, rd_kafka_version_str(),
               pq / 10000, pq % 10000);
}

/* One line in PostgreSQL's client style; the caller exits with RELAY_EXIT_CONFIG. */
static int config_error(const char *msg)
{
        fprintf(stderr, "%s" PROG ": error: %s\n", relay_log_journal_prefix(RELAY_LOG_ERROR), msg);
        return RELAY_EXIT_CONFIG;
}

/*
 * The log format a configuration error of the relay is written in: the one
 * the relay would have logged in, as far as it is known. Layers past the one
 * that failed were not applied, so log.format is taken from what cfg holds,
 * then the environment, then --set, as the layers rank; one that is itself
 * wrong leaves the format unknown, and unknown is text. A log pipeline that
 * parses JSON lines would drop or mangle a text line, the one that says why
 * the relay exits.
 */
static relay_log_format_t error_log_format(const relay_config_t *cfg, const char *const *sets,
                                           size_t nsets)
{
        static const char key[] = "log.format", env[] = "OUTBOX_RELAY_LOG_FORMAT";
        const char *v = getenv(env);
        char err[RELAY_ERRBUF], envbuf[128];
        char *envp[] = {envbuf, NULL};
        relay_config_t *probe = NULL;
        relay_log_format_t format = RELAY_LOG_TEXT;
        int rc;

        if (cfg == NULL || relay_config_new(&probe) != 0)
                return RELAY_LOG_TEXT;
        rc = relay_config_set(probe, key, relay_config_get(cfg, key), "configuration", err,
                              sizeof(err));
        /* The environment layer's own parsing, given that one variable. */
        if (rc == 0 && v != NULL) {
                if ((size_t)snprintf(envbuf, sizeof(envbuf), "%s=%s", env, v) >= sizeof(envbuf))
                        rc = RELAY_EINVAL;
                else
                        rc = relay_config_load_env(probe, envp, err, sizeof(err));
        }
        for (size_t i = 0; rc == 0 && i < nsets; i++)
                if (strncmp(sets[i], key, strlen(key)) == 0 && sets[i][strlen(key)] == '=')
                        rc = relay_config_set_arg(probe, sets[i], err, sizeof(err));
        if (rc == 0)
                format = (relay_log_format_t)relay_config_get_choice(probe, key);
        relay_config_free(probe);
        return format;
}

/* A configuration error that ends the relay: a JSON log line when the relay
 * was to log in JSON (error_log_format()), config_error()'s line otherwise. */
static int relay_config_error(const relay_config_t *cfg, const char *const *sets, size_t nsets,
                              const char *msg)
{
        if (error_log_format(cfg, sets, nsets) != RELAY_LOG_JSON)
                return config_error(msg);
        relay_log_configure(RELAY_LOG_INFO, RELAY_LOG_JSON);
        relay_log_fatal("%s", msg);
        return RELAY_EXIT_CONFIG;
}

/*
 * Flush stdout and report a failure to write it (relay_stdout_finish()): a
 * reader that stopped reading (`outbox-relay --man | head`) made no error,
 * 0 and no word, as tail does. Anything else (a full disk) is said and is
 * 1; never 2, which is for the command line and the configuration.
 */
static int finish_stdout(void)
{
        char err[RELAY_ERRBUF];
        if (relay_stdout_finish(err, sizeof(err)) == 0)
                return RELAY_EXIT_OK;
        fprintf(stderr, PROG ": error: %s\n", err);
        return RELAY_EXIT_FATAL;
}

/* finish_stdout() after a print that returned print_rc: a print that failed
 * while stdout did not (out of memory for a JSON document) is said, 1. */
static int finish_print(int print_rc)
{
        int rc = finish_stdout();
        if (rc == RELAY_EXIT_OK && print_rc != 0 && !ferror(stdout)) {
                fprintf(stderr, PROG ": error: out of memory\n");
                return RELAY_EXIT_FATAL;
        }
        return rc;
}

/* --help, --man, --example-config and --version: print, and exit with what
 * finish_stdout() says. */
static int print_only(void (*print)(FILE *), const char **sets)
{
        free(sets);
        print(stdout);
        return finish_stdout();
}

/*
 * The exit status of --health-check: 0 when healthy, 1 otherwise, and
 * nothing else (Docker reserves a HEALTHCHECK's 2): a verdict line that
 * could not be written is reported, but does not change the verdict.
 */
static int health_verdict(bool healthy)
{
        (void)finish_stdout();
        return healthy ? 0 : 1;
}

/*
 * --health-check without the HTTP endpoint (http.listen = off): is another
 * outbox-relay process alive (not a zombie, not stopped) in this process
 * namespace? 0 or 1.
 */
static int health_check_proc(void)
{
        DIR *d = opendir("/proc");
        struct dirent *e;
        int found = 0;

        if (d == NULL) {
                fprintf(stderr, PROG ": error: could not open /proc: %s\n", strerror(errno));
                return 1;
        }
        while (!found && (e = readdir(d)) != NULL) {
                char path[64], buf[256];
                const char *lp, *rp;
                size_t n;
                FILE *f;
                long pid = strtol(e->d_name, NULL, 10);

                if (pid <= 0 || pid == (long)getpid())
                        continue;
                snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
                if ((f = fopen(path, "r")) == NULL)
                        continue; /* gone meanwhile */
                n = fread(buf, 1, sizeof(buf) - 1, f);
                fclose(f);
                buf[n] = '\0';
                /* "pid (comm) state ...": comm may hold anything, even ") ". */
                lp = strchr(buf, '(');
                rp = strrchr(buf, ')');
                if (lp == NULL || rp == NULL || rp < lp || rp[1] != ' ')
                        continue;
                if ((size_t)(rp - lp - 1) == strlen(PROG) && memcmp(lp + 1, PROG, strlen(PROG)) == 0 &&
                    strchr("ZXxTt", rp[2]) == NULL) {
                        printf("healthy: " PROG " is process %ld, state %c\n", pid, rp[2]);
                        found = 1;
                }
        }
        closedir(d);
        if (!found)
                printf("unhealthy: no live " PROG " process\n");
        return health_verdict(found);
}

/* The commands besides running the relay; the first argument names one. */
typedef enum { CMD_RELAY = 0, CMD_CHECK, CMD_STATUS, CMD_TAIL } command_t;

static command_t command_named(const char *word)
{
        if (strcmp(word, "check") == 0)
                return CMD_CHECK;
        if (strcmp(word, "status") == 0)
                return CMD_STATUS;
        if (strcmp(word, "tail") == 0)
                return CMD_TAIL;
        return CMD_RELAY;
}

/* Kafka bounds of check: each request waits at most this long. */
#define CHECK_KAFKA_TIMEOUT_MS 5000

/* check: one verdict per line (or JSON); 0 when nothing failed, 3 otherwise. */
static int run_check(const relay_config_t *cfg, const relay_settings_t *set, bool json)
{
        char err[RELAY_ERRBUF];
        relay_check_t *res = NULL;
        if (relay_check_run(&res, cfg, set, CHECK_KAFKA_TIMEOUT_MS, err, sizeof(err)) != 0) {
                fprintf(stderr, PROG ": error: %s\n", err);
                return RELAY_EXIT_FATAL;
        }
        bool failed = relay_check_failed(res);
        int rc = finish_print(relay_check_print(res, stdout, json));
        relay_check_free(res);
        if (rc != RELAY_EXIT_OK)
                return rc;
        return failed ? RELAY_EXIT_SETUP : RELAY_EXIT_OK;
}

/* status: 0 when the slot exists and is usable, 5 when it is missing or
 * lost, 3 when the server cannot be asked. */
static int run_status(const relay_settings_t *set, bool json)
{
        char err[RELAY_ERRBUF];
        relay_status_t *st = NULL;
        int rc = relay_status_read(&st, set, err, sizeof(err));
        if (rc != 0) {
                fprintf(stderr, PROG ": error: %s\n", err);
                return rc == RELAY_ENOMEM ? RELAY_EXIT_FATAL : RELAY_EXIT_SETUP;
        }
        bool lost = !st->exists || strcmp(st->wal_status, "lost") == 0;
        rc = finish_print(relay_status_print(st, stdout, json));
        relay_status_free(st);
        if (rc != RELAY_EXIT_OK)
                return rc;
        return lost ? RELAY_EXIT_SLOTLOST : RELAY_EXIT_OK;
}

static volatile sig_atomic_t tail_stop;

static void on_tail_signal(int sig)
{
        if (tail_stop)
                _exit(RELAY_EXIT_FATAL); /* second signal: the server drops the slot anyway */
        tail_stop = sig;
}

/* tail: JSON lines on stdout until SIGINT/SIGTERM (0); 3 setup, 1 stream error. */
static int run_tail(const relay_settings_t *set)
{
        char err[RELAY_ERRBUF], lsn[RELAY_LSN_BUFSZ];
        relay_tail_t *t = NULL;
        int rc;

        /* SIGPIPE stays as main() left it: ignored. */
        if (relay_stop_signals(on_tail_signal, false, err, sizeof(err)) != 0) {
                fprintf(stderr, PROG ": error: %s\n", err);
                return RELAY_EXIT_FATAL;
        }
        /* Not started: the server is not usable (unreachable too, as for
         * status), 3; 1 is for a stream that breaks. */
        if ((rc = relay_tail_open(&t, set, &tail_stop, err, sizeof(err))) != 0) {
                if (tail_stop)
                        return RELAY_EXIT_OK; /* stopped while the slot was being created */
                fprintf(stderr, PROG ": error: %s\n", err);
                return rc == RELAY_ENOMEM ? RELAY_EXIT_FATAL : RELAY_EXIT_SETUP;
        }
        fprintf(stderr,
                PROG ": tailing publication \"%s\" from temporary replication slot \"%s\" at %s: "
                     "events committed from now on; Ctrl-C ends\n",
                set->publication_name, relay_tail_slot(t),
                relay_lsn_format(relay_tail_start_lsn(t), lsn));
        rc = relay_tail_run(t, stdout, &tail_stop, err, sizeof(err));
        relay_tail_free(t);
        if (rc != 0) {
                fprintf(stderr, PROG ": error: %s\n", err);
                return RELAY_EXIT_FATAL;
        }
        return RELAY_EXIT_OK;
}

/*
 * --health-check: GET /healthz from the relay's own endpoint (http.listen,
 * asked on loopback), so the container image's HEALTHCHECK, which has no
 * shell or curl, tells a stalled main loop from a live one. 0 or 1.
 */
static int health_check(const char *listen)
{
        char body[512], err[RELAY_ERRBUF];

        if (listen == NULL || strcmp(listen, "off") == 0 || !relay_http_available())
                return health_check_proc();
        int status = relay_http_get(listen, "/healthz", 3000, body, sizeof(body), err,
                                    sizeof(err));
        if (status < 0) {
                printf("unhealthy: %s\n", err);
                return health_verdict(false);
        }
        body[strcspn(body, "\n")] = '\0';
        printf("%s: /healthz answered %d %s\n", status == 200 ? "healthy" : "unhealthy", status,
               body);
        return health_verdict(status == 200);
}

/*
 * --health-check given alone (the container image's HEALTHCHECK), in a
 * process namespace whose process 1 is the relay (a container): run again
 * with process 1's options, so that its --config and --set decide
 * http.listen as they did for the relay. docker exec gives the check the
 * container's environment and nothing of the relay's command line: before,
 * "docker run IMAGE --set http.listen=off" was reported unhealthy, and so
 * was a relay told another port with --set (a port that, on the host's
 * network, another process could answer for). Returns only when that
 * cannot be done (not a relay's container, a command line that cannot be
 * read, a command rather than the relay): the check then goes on with its
 * own options.
 */
static void health_check_as_pid1(void)
{
        static char line[65536], prog[] = PROG, health[] = "--health-check";
        char comm[64], *args[1024];
        size_t n = 0, nargs = 0;
        FILE *f;

        if (getpid() == 1 || (f = fopen("/proc/1/comm", "r")) == NULL)
                return;
        bool relay = fgets(comm, sizeof(comm), f) != NULL && strcmp(comm, PROG "\n") == 0;
        fclose(f);
        if (!relay || (f = fopen("/proc/1/cmdline", "r")) == NULL)
                return;
        n = fread(line, 1, sizeof(line), f);
        relay = n > 0 && n < sizeof(line) && line[n - 1] == '\0' && !ferror(f);
        fclose(f);
        if (!relay)
                return; /* unreadable, or longer than we read: do not guess */
        args[nargs++] = prog;
        /* Past argv[0]: each NUL-terminated argument. */
        for (size_t i = strlen(line) + 1; i < n; i += strlen(line + i) + 1) {
                if (nargs + 2 >= sizeof(args) / sizeof(args[0]))
                        return;
                args[nargs++] = line + i;
        }
        /* No options: nothing to take (and running again would run this again). */
        if (nargs == 1 || command_named(args[1]) != CMD_RELAY)
                return;
        args[nargs++] = health;
        args[nargs] = NULL;
        fflush(NULL);
        execv("/proc/self/exe", args);
}

int main(int argc, char **argv)
{
        enum {
                OPT_PRINT_CONFIG = 256,
                OPT_EXAMPLE_CONFIG,
                OPT_HEALTH_CHECK,
                OPT_MAN,
                OPT_JSON,
                OPT_DEBEZIUM_CONFIG
        };
        static const struct option options[] = {
                {"config", required_argument, NULL, 'c'},
                {"debezium-config", required_argument, NULL, OPT_DEBEZIUM_CONFIG},
                {"set", required_argument, NULL, 's'},
                {"print-config", no_argument, NULL, OPT_PRINT_CONFIG},
                {"example-config", no_argument, NULL, OPT_EXAMPLE_CONFIG},
                {"health-check", no_argument, NULL, OPT_HEALTH_CHECK},
                {"man", no_argument, NULL, OPT_MAN},
                {"json", no_argument, NULL, OPT_JSON},
                {"help", no_argument, NULL, 'h'},
                {"version", no_argument, NULL, 'V'},
                {NULL, 0, NULL, 0},
        };
        char err[RELAY_ERRBUF];
        const char *config_file = NULL, *dbz_file = NULL;
        char dbz_notes[2048] = "";
        const char **sets;
        size_t nsets = 0;
        bool print_config = false, json = false, health = false;
        command_t cmd = CMD_RELAY;
        relay_config_t *cfg = NULL;
        relay_settings_t *set = NULL;
        int opt, rc;

        if (relay_install_signals(err, sizeof(err)) != 0) {
                fprintf(stderr, PROG ": error: %s\n", err);
                return RELAY_EXIT_FATAL;
        }

        if (argc == 2 && strcmp(argv[1], "--health-check") == 0)
                health_check_as_pid1();

        /* --set arguments are kept in order; there cannot be more than argc of them. */
        sets = calloc((size_t)argc + 1, sizeof(*sets));
        if (sets == NULL)
                return config_error("out of memory");

        /* "outbox-relay COMMAND [options]": the command word comes first. */
        if (argc > 1 && (cmd = command_named(argv[1])) != CMD_RELAY) {
                argv[1] = argv[0];
                argv++;
                argc--;
        }

        opterr = 0; /* report in our own format below */
        while ((opt = getopt_long(argc, argv, ":c:s:hV", options, NULL)) != -1) {
                switch (opt) {
                case 'c':
                case OPT_DEBEZIUM_CONFIG: {
                        /* One file each: a second one silently replaced the first. */
                        const char **file = opt == 'c' ? &config_file : &dbz_file;
                        if (*file != NULL) {
                                free(sets);
                                snprintf(err, sizeof(err),
                                         "option \"--%s\" is given twice (\"%s\" and \"%s\"), "
                                         "but one file is read; put the keys in one file, or "
                                         "override the file's with the environment or --set",
                                         opt == 'c' ? "config" : "debezium-config", *file, optarg);
                                return config_error(err);
                        }
                        *file = optarg;
                        break;
                }
                case 's':
                        sets[nsets++] = optarg;
                        break;
                case OPT_PRINT_CONFIG:
                        print_config = true;
                        break;
                case OPT_JSON:
                        json = true;
                        break;
                case OPT_EXAMPLE_CONFIG:
                        return print_only(relay_manual_print_example, sets);
                case OPT_HEALTH_CHECK:
                        health = true;
                        break;
                case OPT_MAN:
                        return print_only(relay_manual_print_man, sets);
                case 'h':
                        return print_only(relay_manual_print_help, sets);
                case 'V':
                        return print_only(version, sets);
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
                if (command_named(argv[optind]) != CMD_RELAY)
                        snprintf(err, sizeof(err),
                                 "command \"%s\" must come first: " PROG " %s [options]",
                                 argv[optind], argv[optind]);
                else
                        snprintf(err, sizeof(err),
                                 "unexpected argument \"%s\"; configuration is given with "
                                 "--config or --set KEY=VALUE; commands are check, status and tail",
                                 argv[optind]);
                free(sets);
                return config_error(err);
        }

        if (json && cmd != CMD_CHECK && cmd != CMD_STATUS) {
                free(sets);
                return config_error("option \"--json\" goes with the commands check and status");
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
        /* Layers: defaults < Debezium's file < the relay's file < environment < --set. */
        if (dbz_file != NULL)
                rc = relay_dbzconf_load(cfg, dbz_file, dbz_notes, sizeof(dbz_notes), err,
                                        sizeof(err));
        if (rc == 0 && config_file != NULL)
                rc = relay_config_load_file(cfg, config_file, err, sizeof(err));
        if (rc == 0)
                rc = relay_config_load_env(cfg, environ, err, sizeof(err));
        for (size_t i = 0; rc == 0 && i < nsets; i++)
                rc = relay_config_set_arg(cfg, sets[i], err, sizeof(err));
        /* Debezium's bytes were asked for, and a Connect connector without
         * both converters does not say which (the worker's are used):
         * the relay's own raw format would be a silent change. status
         * writes nothing to Kafka (the cutover runs it on Debezium's file). */
        if (rc == 0 && dbz_file != NULL && cmd != CMD_STATUS &&
            relay_config_origin(cfg, "format.profile") == NULL)
                rc = relay_err(err, sizeof(err), RELAY_EINVAL,
                               "%s does not set key.converter and value.converter, so Kafka "
                               "Connect uses its worker's, which the file does not show (and the "
                               "key's bytes decide each event's partition); add the worker's "
                               "key.converter and value.converter to the connector's \"config\", "
                               "or set format.profile (connect-string, connect-json, "
                               "connect-json-schema; raw for the relay's own format)",
                               dbz_file);
        /* Only http.listen matters here (checked when it was set): a health
         * check must not fail for want of, say, kafka.bootstrap.servers. Its
         * answer is 0 or 1, also for a configuration it cannot read (Docker
         * reserves a HEALTHCHECK's 2). */
        if (health) {
                free(sets);
                if (rc == 0) {
                        rc = health_check(relay_config_get(cfg, "http.listen"));
                } else {
                        printf("unhealthy: %s\n", err);
                        rc = 1;
                }
                relay_config_free(cfg);
                return rc;
        }
        /* status and tail never talk to Kafka: do not ask for its address. */
        if (rc == 0 && (cmd == CMD_STATUS || cmd == CMD_TAIL) &&
            relay_config_get(cfg, "kafka.bootstrap.servers")[0] == '\0')
                rc = relay_config_set(cfg, "kafka.bootstrap.servers", "not-needed:9092",
                                      "(not needed by this command)", err, sizeof(err));
        if (rc == 0)
                rc = relay_config_validate(cfg, err, sizeof(err));
        if (rc == 0)
                rc = relay_settings_load(&set, cfg, err, sizeof(err));
        if (rc < 0) {
                /* The relay's log; a command, or --print-config, is read by a person. */
                if (cmd == CMD_RELAY && !print_config)
                        rc = relay_config_error(cfg, sets, nsets, err);
                else
                        rc = config_error(err);
                free(sets);
                relay_config_free(cfg);
                return rc;
        }
        free(sets);
        relay_log_configure(set->log_level, set->log_format);
        if (dbz_notes[0])
                relay_log_warning("Debezium configuration \"%s\": keys without effect here "
                                  "(snapshot, offsets, Java serializers and the like): %s",
                                  dbz_file, dbz_notes);

        if (print_config) {
                relay_config_print(cfg, stdout);
                rc = finish_stdout();
                relay_settings_free(set);
                relay_config_free(cfg);
                return rc;
        }

        /* check and status hold nothing worth a clean stop: let a signal end them. */
        if (cmd == CMD_CHECK || cmd == CMD_STATUS) {
                signal(SIGINT, SIG_DFL);
                signal(SIGTERM, SIG_DFL);
        }
        switch (cmd) {
        case CMD_CHECK:
                rc = run_check(cfg, set, json);
                break;
        case CMD_STATUS:
                rc = run_status(set, json);
                break;
        case CMD_TAIL:
                rc = run_tail(set);
                break;
        case CMD_RELAY:
                rc = relay_run(cfg, set);
                break;
        }
        relay_settings_free(set);
        relay_config_free(cfg);
        return rc;
}
