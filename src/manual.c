/*
 * manual.c - the user documentation of the outbox-relay command, in one
 * place: the tables of options, exit statuses and signals below, plus the
 * configuration key table (config.c, through relay_config_keydoc()), rendered
 * as --help, as the manual page outbox-relay(1) and as an example
 * configuration file. The build generates the installed manual page and
 * example file by running the binary, so what is installed is what the code
 * accepts.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/manual.h"

#include <stdbool.h>
#include <string.h>

#include "relay/config.h"
#include "relay_version.h"

#define PROG "outbox-relay"
#define HELP_WIDTH 79
#define HELP_INDENT 25

typedef struct {
        const char *flags; /* as --help shows them: "-c, --config=FILE" */
        const char *desc;
} option_doc_t;

/* Every option main.c accepts, in --help order. */
static const option_doc_t options[] = {
        {"-c, --config=FILE",
         "read configuration from FILE (default: the file named by OUTBOX_RELAY_CONFIG, else none)"},
        {"    --debezium-config=FILE",
         "read a Debezium configuration as is, below --config: a Debezium Server "
         "application.properties or a Kafka Connect connector JSON (connector, Outbox Event Router "
         "and converter keys mapped; keys without effect listed in a warning; others refused)"},
        {"-s, --set=KEY=VALUE",
         "set a configuration key; may be repeated, applied in order after the file and the "
         "environment"},
        {"    --print-config",
         "print the effective configuration with the origin of each value (secrets masked) and "
         "exit"},
        {"    --example-config",
         "print an example configuration file (every key with its default, commented out) and "
         "exit"},
        {"    --health-check",
         "ask the relay's /healthz at http.listen (on loopback when it listens on every "
         "interface) and exit 0 on 200, 1 otherwise; with http.listen = off, exit 0 when "
         "another live outbox-relay process runs in this process namespace (the container "
         "image's HEALTHCHECK)"},
        {"    --json", "with check or status: print one JSON document instead of lines"},
        {"    --man", "print this manual page in roff and exit"},
        {"-h, --help", "show this help and exit"},
        {"-V, --version", "show the version and exit"},
};

typedef struct {
        const char *name;
        const char *synopsis; /* its options, after the name */
        const char *desc;
} command_doc_t;

/* The commands main.c accepts as the first argument, with their exit statuses. */
static const command_doc_t commands[] = {
        {"check", "[--json] [OPTION]...",
         "check, read-only, what the relay needs before its first start or in CI/CD, with the "
         "same configuration: PostgreSQL's version (14 to 18), wal_level, the role's LOGIN and "
         "REPLICATION, the outbox table and the columns the mapping reads, the publication "
         "(exists or can be created, includes the table, publishes inserts only), the slot "
         "(plugin, active process, wal_status, safe_wal_size), max_slot_wal_keep_size, Kafka "
         "(metadata within 5 s), auto.create.topics.enable, the topics topic.template names "
         "today (for a ${column} template: the values in the outbox table, when the role may "
         "read it and it is at most 64 MB) and the dead-letter topic. One line per check: ok, "
         "warning or fail, what was found and the fix. It creates nothing: no publication, slot "
         "or topic. Exit status 0 when no check failed (warnings allowed), 3 when one did, 2 for "
         "a bad command line or configuration"},
        {"status", "[--json] [OPTION]...",
         "show what PostgreSQL holds for slot.name: confirmed_flush_lsn, restart_lsn, the "
         "server's WAL end, the lag in bytes (WAL end minus confirmed_flush_lsn) and in time "
         "(pg_stat_replication.flush_lag, measured by the server while a relay streams, else "
         "unknown), the WAL the slot retains, wal_status and safe_wal_size, and who streams from "
         "it (the walsender's pid, the relay's client address, state, age of its last status "
         "message). Exit "
         "status 0 when the slot exists, 5 when it does not or is lost (wal_status = lost), 3 "
         "when PostgreSQL cannot be asked, 2 for a bad command line or configuration. Needs no "
         "kafka.bootstrap.servers"},
        {"tail", "[OPTION]...",
         "print the events the relay would publish as JSON lines on standard output (lsn, "
         "commit_lsn, commit_time, xid, topic, key, headers, payload; \"error\" for a row the "
         "mapping refuses), decoded from a temporary replication slot that the server drops when "
         "tail ends: the relay's slot is never created or moved, and Kafka is not used. Shows "
         "events committed after tail started. A byte string that is not valid UTF-8 (a bytea "
         "payload) is written base64-encoded under its name plus \"_base64\" (payload_base64). "
         "SIGINT or SIGTERM ends it with exit status 0; 3 when the server or the publication is "
         "not usable (tail never creates the publication), 1 when the stream breaks, 2 for a bad "
         "command line or configuration"},
};

typedef struct {
        int code;
        const char *desc;
} exit_doc_t;

static const exit_doc_t exits[] = {
        {0, "clean stop after SIGTERM or SIGINT"},
        {1, "fatal replication stream or protocol error, or a second stop signal"},
        {2, "bad command line or configuration"},
        {3, "server or broker setup error (version, wal_level, privilege, missing table or "
            "publication, unreachable at start)"},
        {4, "stopped before an event that could not be delivered: it could not be mapped or Kafka "
            "rejected it (errors.policy = stop), or its dead-letter write failed"},
        {5, "the replication slot was dropped or invalidated: events may be missing"},
        {6, "delivery.mode = exactly-once: a newer relay took over the Kafka transactional.id "
            "(it owns the slot now); nothing more of this one is committed"},
};

typedef struct {
        const char *name;
        const char *desc;
} signal_doc_t;

static const signal_doc_t signals[] = {
        {"SIGTERM, SIGINT",
         "stop cleanly: finish the transaction being read, wait up to shutdown.timeout.ms for "
         "Kafka to acknowledge what is in flight, confirm it to PostgreSQL and exit 0; nothing is "
         "sent twice on the next start. A second signal exits at once with status 1 (nothing "
         "more is confirmed, so nothing is lost)"},
        {"SIGPIPE", "ignored"},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* --- --help -------------------------------------------------------------- */

/* Write text word-wrapped to HELP_WIDTH, every line after the first (and
 * the first too when first_col is past the indent) starting at indent. */
static void wrap(FILE *out, const char *text, size_t first_col, size_t indent)
{
        size_t col = first_col;
        const char *p = text;

        if (col > indent) {
                fputc('\n', out);
                col = 0;
        }
        for (; col < indent; col++)
                fputc(' ', out);
        while (*p != '\0') {
                size_t n = strcspn(p, " ");
                if (col > indent && col + 1 + n > HELP_WIDTH) {
                        fputc('\n', out);
                        for (col = 0; col < indent; col++)
                                fputc(' ', out);
                } else if (col > indent) {
                        fputc(' ', out);
                        col++;
                }
                fwrite(p, 1, n, out);
                col += n;
                p += n;
                while (*p == ' ')
                        p++;
        }
        fputc('\n', out);
}

void relay_manual_print_help(FILE *out)
{
        fputs(PROG " relays transactional-outbox rows from PostgreSQL logical replication\n"
              "(pgoutput) to Kafka.\n"
              "\n"
              "Usage:\n"
              "  " PROG " [OPTION]...\n",
              out);
        for (size_t i = 0; i < COUNT(commands); i++)
                fprintf(out, "  " PROG " %s %s\n", commands[i].name, commands[i].synopsis);
        fputs("\nCommands:\n", out);
        for (size_t i = 0; i < COUNT(commands); i++) {
                fprintf(out, "  %s", commands[i].name);
                wrap(out, commands[i].desc, 2 + strlen(commands[i].name), 10);
        }
        fputs("\nOptions:\n", out);
        for (size_t i = 0; i < COUNT(options); i++) {
                fprintf(out, "  %s", options[i].flags);
                wrap(out, options[i].desc, 2 + strlen(options[i].flags), HELP_INDENT);
        }
        fputs("\n"
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
        fputs("\nExit status (of the relay; each command above lists its own):\n", out);
        for (size_t i = 0; i < COUNT(exits); i++) {
                fprintf(out, "  %d", exits[i].code);
                wrap(out, exits[i].desc, 3, 5);
        }
        fputs("\nSignals:\n", out);
        for (size_t i = 0; i < COUNT(signals); i++) {
                fprintf(out, "  %s", signals[i].name);
                wrap(out, signals[i].desc, 2 + strlen(signals[i].name), 8);
        }
        fputs("\nSee the manual page outbox-relay(1) for more.\n", out);
}

/* --- the manual page ------------------------------------------------------ */

/* Text for roff: backslashes and hyphens escaped, and a line never starts
 * with a control character ('.' or '\''). */
static void roff(FILE *out, const char *s)
{
        if (*s == '.' || *s == '\'')
                fputs("\\&", out);
        for (; *s != '\0'; s++) {
                switch (*s) {
                case '\\':
                        fputs("\\e", out);
                        break;
                case '-':
                        fputs("\\-", out);
                        break;
                case '\n':
                        fputc('\n', out);
                        if (s[1] == '.' || s[1] == '\'')
                                fputs("\\&", out);
                        break;
                default:
                        fputc(*s, out);
                }
        }
}

static void roff_line(FILE *out, const char *s)
{
        roff(out, s);
        fputc('\n', out);
}

/* A tagged paragraph: the tag in bold, then the body. */
static void roff_tp(FILE *out, const char *tag, const char *body)
{
        fputs(".TP\n\\fB", out);
        roff(out, tag);
        fputs("\\fR\n", out);
        roff_line(out, body);
}

/* Roman text: sentences end with a period, descriptions have none. */
static void roff_sentence(FILE *out, const char *s)
{
        roff(out, s);
        fputs(".\n", out);
}

static void man_keys(FILE *out)
{
        relay_config_keydoc_t d;

        roff_tp(out, "kafka.bootstrap.servers",
                "Kafka brokers, host:port[,host:port...]. Required. Environment: "
                "OUTBOX_RELAY_KAFKA_BOOTSTRAP_SERVERS.");
        roff_tp(out, "kafka.<property>",
                "Any librdkafka producer property, passed through without \"kafka.\" (for "
                "example kafka.compression.type = zstd, kafka.security.protocol = ssl). The "
                "relay's own defaults are enable.idempotence = true (cannot be turned off), "
                "partitioner = murmur2_random (where Java producers put a key), linger.ms = the "
                "broker round trip measured at start when it is 10 ms or more (at most 100; 5 "
                "below: with one request in flight an event waits for the one before anyway) and "
                "queue.buffering.max.messages = 10000. With statistics.interval.ms set and "
                "log.level = debug, librdkafka's statistics (events per request, round trips) are "
                "logged. Environment: OUTBOX_RELAY_KAFKA_<PROPERTY>, "
                "with \".\" written as \"_\".");
        for (size_t i = 0; relay_config_keydoc(i, &d); i++) {
                fputs(".TP\n\\fB", out);
                roff(out, d.name);
                fputs("\\fR\n", out);
                roff(out, d.desc);
                fputs(".\n.br\n", out);
                if (d.values[0] != '\0') {
                        fputs("Values: ", out);
                        roff_sentence(out, d.values);
                        fputs(".br\n", out);
                }
                fputs("Default: ", out);
                if (d.def[0] != '\0') {
                        fputs("\\fB", out);
                        roff(out, d.def);
                        fputs("\\fR", out);
                } else {
                        fputs("empty", out);
                }
                fputs(". Environment: ", out);
                roff(out, d.env);
                fputs(".\n", out);
        }
}

void relay_manual_print_man(FILE *out)
{
        fputs(".\\\" outbox-relay(1), generated by \"" PROG " --man\" from the tables of\n"
              ".\\\" src/manual.c and src/config.c: edit those, not this file.\n"
              ".TH OUTBOX\\-RELAY 1 \"\" \"" PROG " " RELAY_VERSION "\" \"User Commands\"\n"
              ".nh\n"
              ".SH NAME\n"
              "outbox\\-relay \\- relay transactional\\-outbox events from PostgreSQL to Kafka\n"
              ".SH SYNOPSIS\n"
              ".B outbox\\-relay\n"
              "[\\fIOPTION\\fR]...\n",
              out);
        for (size_t i = 0; i < COUNT(commands); i++) {
                fputs(".br\n.B outbox\\-relay ", out);
                roff(out, commands[i].name);
                fputs("\n", out);
                roff_line(out, commands[i].synopsis);
        }
        fputs(".SH DESCRIPTION\n", out);
        roff_line(out,
                  "outbox-relay reads the inserts into an outbox table from PostgreSQL's "
                  "write-ahead log through a logical replication slot (the built-in pgoutput "
                  "plugin, no server extension) and produces each one to Kafka, with the table "
                  "layout and topic, key and header conventions of Debezium's Outbox Event "
                  "Router. It confirms a position to PostgreSQL only once Kafka has acknowledged "
                  "every event before it, so every committed event reaches Kafka at least once, "
                  "in commit order per aggregate, across crashes of the relay, the database or "
                  "the broker. Consumers deduplicate by the id header.");
        fputs(".PP\n", out);
        roff_line(out,
                  "On its first start the relay checks the server (PostgreSQL 14 or later, "
                  "wal_level = logical, a role with REPLICATION), creates the publication if it "
                  "is missing, then the slot, and streams. Several relays may share one slot: "
                  "one streams, the others stand by and take over when it stops. Anything "
                  "transient (PostgreSQL or Kafka unreachable, a delivery error) is not an exit: "
                  "the session is torn down without confirming more and resumed from the slot "
                  "after a backoff.");
        fputs(".SH COMMANDS\n", out);
        roff_line(out, "The first argument may name a command; without one the relay runs. "
                       "Commands read the same configuration (--config, environment, --set).");
        for (size_t i = 0; i < COUNT(commands); i++) {
                fputs(".TP\n\\fB", out);
                roff(out, commands[i].name);
                fputs("\\fR ", out);
                roff(out, commands[i].synopsis);
                fputs("\n", out);
                roff_sentence(out, commands[i].desc);
        }
        fputs(".SH OPTIONS\n", out);
        for (size_t i = 0; i < COUNT(options); i++) {
                const char *f = options[i].flags;
                while (*f == ' ')
                        f++;
                roff_tp(out, f, options[i].desc);
        }
        fputs(".SH CONFIGURATION\n", out);
        roff_line(out,
                  "Configuration is layered: defaults < file < environment < --set. The file "
                  "(--config FILE, or the file named by OUTBOX_RELAY_CONFIG) holds \"key = value\" "
                  "lines and \"#\" comments; a value may be double-quoted, and inside quotes a "
                  "backslash escapes a double quote or a backslash. Unknown keys and bad values "
                  "are refused with their file and line, and the relay exits 2. Passwords never "
                  "reach the logs or --print-config. The keys:");
        man_keys(out);
        fputs(".SH ENVIRONMENT\n", out);
        roff_tp(out, "OUTBOX_RELAY_CONFIG", "The configuration file, when --config is not given.");
        roff_tp(out, "OUTBOX_RELAY_<KEY>",
                "Any key, upper-cased with \".\" written as \"_\" (slot.name is "
                "OUTBOX_RELAY_SLOT_NAME). Any other OUTBOX_RELAY_ variable is refused.");
        roff_tp(out, "PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE, ...",
                "Read by libpq for what postgres.conninfo leaves out.");
        fputs(".SH EXIT STATUS\n", out);
        roff_line(out, "Of the relay; the commands' exit statuses are listed under COMMANDS.");
        for (size_t i = 0; i < COUNT(exits); i++) {
                char code[8];
                snprintf(code, sizeof(code), "%d", exits[i].code);
                roff_tp(out, code, exits[i].desc);
        }
        fputs(".SH SIGNALS\n", out);
        for (size_t i = 0; i < COUNT(signals); i++)
                roff_tp(out, signals[i].name, signals[i].desc);
        fputs(".SH HTTP ENDPOINT\n", out);
        roff_line(out,
                  "On http.listen (default 127.0.0.1:10187; off disables it) the relay serves "
                  "GET /metrics (Prometheus text format, names in the outbox_relay_ namespace), "
                  "/healthz (200 while the main loop turns within http.liveness.timeout.ms) and "
                  "/readyz (200 while streaming with a Kafka broker up, or standing by; 503 while "
                  "backing off after an error), each health answer with a short JSON body. The "
                  "server runs on a thread of its own and reads a snapshot the main loop "
                  "publishes, so a client cannot slow the relay; at most 64 connections, 16 per "
                  "address, 10 s idle timeout. The README lists every metric.");
        fputs(".SH SYSTEMD\n", out);
        roff_line(out,
                  "Built with libsystemd, the relay tells systemd (Type=notify) READY=1 once it "
                  "streams or stands by, STOPPING=1 when it drains, and WATCHDOG=1 from its main "
                  "loop when the unit sets WatchdogSec. The unit outbox-relay.service reads "
                  RELAY_SYSCONFDIR "/outbox-relay.conf as a credential (the file may be readable "
                  "by root only) and runs as a dynamic user; exit statuses 2 and 5 are not "
                  "restarted, since a restart cannot fix them.");
        fputs(".SH FILES\n", out);
        roff_tp(out, RELAY_SYSCONFDIR "/outbox-relay.conf",
                "The configuration file of the systemd unit outbox-relay.service.");
        roff_tp(out, RELAY_DOCDIR "/examples/outbox-relay.conf",
                "Every key with its default, commented out (also printed by --example-config).");
        roff_tp(out, RELAY_SQLDIR "/",
                "The outbox table, the publication, a least-privilege role, and the "
                "insert-and-delete pattern.");
        fputs(".SH EXAMPLES\n.nf\n", out);
        roff_line(out, "outbox-relay --set postgres.conninfo=\"host=db dbname=app user=outbox_relay\" \\\n"
                       "             --set kafka.bootstrap.servers=kafka:9092\n"
                       "outbox-relay --config " RELAY_SYSCONFDIR "/outbox-relay.conf --print-config\n"
                       "OUTBOX_RELAY_KAFKA_BOOTSTRAP_SERVERS=kafka:9092 outbox-relay\n"
                       "outbox-relay check --config " RELAY_SYSCONFDIR "/outbox-relay.conf\n"
                       "outbox-relay status --json --config " RELAY_SYSCONFDIR "/outbox-relay.conf\n"
                       "outbox-relay tail --set postgres.conninfo=\"dbname=app\" | jq .payload");
        fputs(".fi\n.SH SEE ALSO\n"
              "\\fBpg_recvlogical\\fR(1), \\fBkcat\\fR(1), \\fBsystemd.service\\fR(5)\n",
              out);
}

/* --- the example configuration file ----------------------------------------- */

/* text as "# " comment lines of at most HELP_WIDTH columns. */
static void comment(FILE *out, const char *text)
{
        size_t col = 0;

        while (*text != '\0') {
                size_t n = strcspn(text, " ");
                if (col > 0 && col + 1 + n > HELP_WIDTH) {
                        fputc('\n', out);
                        col = 0;
                }
                col += (size_t)fprintf(out, "%s%.*s", col == 0 ? "# " : " ", (int)n, text);
                text += n;
                while (*text == ' ')
                        text++;
        }
        fputc('\n', out);
}

void relay_manual_print_example(FILE *out)
{
        relay_config_keydoc_t d;

        fputs("# outbox-relay configuration: \"key = value\" lines, \"#\" comments.\n"
              "# Every key is listed with its default, commented out: uncomment what you\n"
              "# change. Layers: defaults < this file < OUTBOX_RELAY_* environment\n"
              "# variables < --set KEY=VALUE. See outbox-relay(1).\n"
              "\n"
              "# Kafka brokers, host:port[,host:port...] (required)\n"
              "#kafka.bootstrap.servers = localhost:9092\n"
              "\n"
              "# Any librdkafka producer property, prefixed with \"kafka.\", for example\n"
              "# kafka.compression.type = zstd\n",
              out);
        for (size_t i = 0; relay_config_keydoc(i, &d); i++) {
                fputs("\n", out);
                comment(out, d.desc);
                if (d.values[0] != '\0')
                        fprintf(out, "# (%s)\n", d.values);
                if (d.def[0] == '\0')
                        fprintf(out, "#%s = \"\"\n", d.name);
                else
                        fprintf(out, "#%s = %s\n", d.name, d.def);
        }
}
