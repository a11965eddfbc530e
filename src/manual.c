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
#include "relay/inbox_config.h"
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
         "read configuration from FILE, given once (default: the file named by OUTBOX_RELAY_CONFIG, "
         "else none)"},
        {"    --debezium-config=FILE",
         "read a Debezium configuration as is (given once), below --config: a Debezium Server "
         "application.properties or a Kafka Connect connector JSON (connector, Outbox Event Router "
         "and converter keys mapped; keys without effect listed in a warning; others refused; a "
         "connector without key.converter and value.converter needs format.profile)"},
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
         "image's HEALTHCHECK). Given alone where process 1 is the relay (a container), it "
         "takes process 1's options too, so the relay's --config and --set decide http.listen "
         "as they did for it"},
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
         "(plugin, active process, wal_status, safe_wal_size; with slot.failover or a failover "
         "slot, its failover flag and synchronized_standby_slots, PostgreSQL 17 or later), "
         "max_slot_wal_keep_size, Kafka "
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
         "commit_lsn, commit_time, xid, topic, key, headers, payload; \"error\" for an event "
         "the mapping refuses), decoded from a temporary replication slot that the server drops when "
         "tail ends: the relay's slot is never created or moved, and Kafka is not used. Shows "
         "events committed after tail started. A byte string that is not valid UTF-8 (a bytea "
         "payload) is written base64-encoded under its name plus \"_base64\" (payload_base64). "
         "SIGINT or SIGTERM ends it with exit status 0, as does a reader that stops reading "
         "(outbox-relay tail | head); 3 when the server or the publication is "
         "not usable (tail never creates the publication), 1 when the stream breaks, 2 for a bad "
         "command line or configuration"},
};

typedef struct {
        int code;
        const char *desc;
} exit_doc_t;

static const exit_doc_t exits[] = {
        {0, "clean stop after SIGTERM or SIGINT (events Kafka did not acknowledge within "
            "shutdown.timeout.ms are not confirmed and are sent again on the next start; a "
            "session that could not start and failed after the signal is not retried)"},
        {1, "fatal replication stream or protocol error, an error of Kafka or of the connection "
            "after a stop signal in a session that had started (also in the final flush of what "
            "was in flight, or the connection lost before its confirmation reached PostgreSQL: "
            "those events are sent again on the next start), or a second stop signal"},
        {2, "bad command line or configuration (said on one line; a log line of the relay's "
            "log.format when that is known to be json: set before the error, in the "
            "environment or with --set)"},
        {3, "server or broker setup error (connection parameters libpq cannot resolve, a "
            "connection the server refuses for good: password, pg_hba.conf, no such database "
            "or role, no REPLICATION, told by SQLSTATE in any lc_messages language; version, "
            "wal_level, privilege, missing table or publication, Kafka unreachable at start "
            "(PostgreSQL unreachable is retried, at start too); an "
            "exactly-once checkpoint of another WAL history: beyond the server's WAL end, or "
            "passed by the stream without a transaction ending at it)"},
        {4, "stopped before an event that could not be delivered: it could not be mapped or Kafka "
            "rejected it (errors.policy = stop), or its dead-letter write failed"},
        {5, "the replication slot was dropped or invalidated: events may be missing"},
        {6, "delivery.mode = exactly-once: a newer relay took over the Kafka transactional.id "
            "(it owns the slot now); nothing more of this one is committed. Restarted, it stands "
            "by for the slot. Two relays of different slots (or of clones of one server) with "
            "the same eos.transactional.id also end so, each fencing the other at every start"},
};

typedef struct {
        const char *name;
        const char *desc;
} signal_doc_t;

static const signal_doc_t signals[] = {
        {"SIGTERM, SIGINT",
         "stop cleanly: finish the transaction being read, wait up to shutdown.timeout.ms for "
         "Kafka to acknowledge what is in flight, confirm it to PostgreSQL and exit 0; nothing is "
         "sent twice on the next start (a stop while an event Kafka refused waits for its resend "
         "ends before that event's transaction, which the next start reads again); the log says "
         "when the drain begins. A second signal exits at once with status 1 (nothing more is "
         "confirmed, so nothing is lost), with a FATAL log line that says so (in JSON under "
         "log.format = json)"},
        {"SIGHUP",
         "ignored, with a warning: the relay does not reload its configuration (as PostgreSQL "
         "and PgBouncer do on SIGHUP); a restart applies a changed one"},
        {"SIGPIPE", "ignored"},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* --- --help -------------------------------------------------------------- */

/* Write text word-wrapped to HELP_WIDTH, every line after the first (and
 * the first too when first_col reaches the indent: a name as long as the
 * indent would run into its text) starting at indent. */
static void wrap(FILE *out, const char *text, size_t first_col, size_t indent)
{
        size_t col = first_col;
        const char *p = text;

        if (col >= indent && col > 0) {
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
        fputs("\nExit status (of the relay; each command above lists its own; a reader of\n"
              "standard output that stops reading is no error, a failed write is 1):\n",
              out);
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
        static const char *const esc[256] = {['\\'] = "\\e", ['-'] = "\\-"};
        for (;;) {
                size_t n = strcspn(s, "\n");
                if (*s == '.' || *s == '\'')
                        fputs("\\&", out);
                relay_fput_escaped(out, s, n, esc);
                if (s[n] == '\0')
                        return;
                fputc('\n', out);
                s += n + 1;
        }
}

static void roff_line(FILE *out, const char *s)
{
        roff(out, s);
        fputc('\n', out);
}

/* A command's name and synopsis on one roff line, between the given requests. */
static void command_line(FILE *out, const char *lead, const command_doc_t *c, const char *sep)
{
        fputs(lead, out);
        roff(out, c->name);
        fputs(sep, out);
        roff_line(out, c->synopsis);
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

/*
 * One key's entry: name, description, the values it takes (may be ""), its
 * default (none_word when empty) and its environment variable (may be NULL).
 */
static void man_key(FILE *out, const char *name, const char *desc, const char *values,
                    const char *def, const char *none_word, const char *env)
{
        fputs(".TP\n\\fB", out);
        roff(out, name);
        fputs("\\fR\n", out);
        roff(out, desc);
        fputs(".\n.br\n", out);
        if (values[0] != '\0') {
                fputs("Values: ", out);
                roff_sentence(out, values);
                fputs(".br\n", out);
        }
        fputs("Default: ", out);
        if (def[0] != '\0') {
                fputs("\\fB", out);
                roff(out, def);
                fputs("\\fR", out);
        } else {
                fputs(none_word, out);
        }
        if (env) {
                fputs(". Environment: ", out);
                roff(out, env);
        }
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
                "logged. A consumer-only property (group.id, auto.offset.reset, ...) is refused "
                "with delivery.mode = at-least-once, where nothing consumes; exactly-once gives it "
                "to the checkpoint reader too, except those the reader sets itself (group.id, "
                "enable.auto.commit, enable.partition.eof, isolation.level = read_committed, "
                "auto.offset.reset = earliest, allow.auto.create.topics = false, fetch.wait.max.ms "
                "= 10), refused unless set to the same value. Environment: OUTBOX_RELAY_KAFKA_<PROPERTY>, "
                "with \".\" written as \"_\".");
        for (size_t i = 0; relay_config_keydoc(i, &d); i++)
                man_key(out, d.name, d.desc, d.values, d.def, "empty", d.env);
}

void relay_manual_print_man(FILE *out)
{
        fputs(".\\\" outbox-relay(1), generated by \"" PROG " --man\" from the tables of\n"
              ".\\\" src/manual.c and src/config_keys.dat: edit those, not this file.\n"
              ".TH OUTBOX\\-RELAY 1 \"\" \"" PROG " " RELAY_VERSION "\" \"User Commands\"\n"
              ".nh\n"
              ".SH NAME\n"
              "outbox\\-relay \\- relay transactional\\-outbox events from PostgreSQL to Kafka\n"
              ".SH SYNOPSIS\n"
              ".B outbox\\-relay\n"
              "[\\fIOPTION\\fR]...\n",
              out);
        for (size_t i = 0; i < COUNT(commands); i++)
                command_line(out, ".br\n.B outbox\\-relay ", &commands[i], "\n");
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
        fputs(".PP\n", out);
        roff_line(out,
                  "With snapshot.mode = initial, the start that creates the slot first relays "
                  "the rows the outbox table already holds (those meeting snapshot.filter), read "
                  "in the snapshot the slot exported, so each row is relayed once across the "
                  "boundary; the slot becomes permanent only once Kafka has acknowledged them, "
                  "so a crash during the backfill leaves no slot and the next start backfills "
                  "again. The role then needs SELECT on the table. Relays of one slot that "
                  "start together backfill once between them, the others standing by; the "
                  "server's statement, lock and idle-in-transaction timeouts (and 17's "
                  "transaction_timeout) are off on the backfill's connections.");
        fputs(".SH COMMANDS\n", out);
        roff_line(out, "The first argument may name a command; without one the relay runs. "
                       "Commands read the same configuration (--config, environment, --set).");
        for (size_t i = 0; i < COUNT(commands); i++) {
                command_line(out, ".TP\n\\fB", &commands[i], "\\fR ");
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
                  "lines and \"#\" comments (also after a value, following a blank: \"a#b\" stays "
                  "a value); a value may be double-quoted, and inside quotes a backslash escapes a "
                  "double quote or a backslash, and \\n, \\t and \\r are a newline, a tab and a "
                  "carriage return (as --print-config writes them). Unknown keys, bad values and "
                  "a key set twice in one file are refused with their file and line, and the "
                  "relay exits 2 (a later layer may set a key the file set); so are two "
                  "librdkafka names of one property in one layer (kafka.linger.ms and "
                  "kafka.queue.buffering.max.ms both in the environment, in one file or as "
                  "--set), where their order would decide. Passwords never "
                  "reach the logs or --print-config. The keys:");
        man_keys(out);
        fputs(".SH ENVIRONMENT\n", out);
        roff_tp(out, "OUTBOX_RELAY_CONFIG", "The configuration file, when --config is not given.");
        roff_tp(out, "OUTBOX_RELAY_<KEY>",
                "Any key, upper-cased with \".\" written as \"_\" (slot.name is "
                "OUTBOX_RELAY_SLOT_NAME). Any other OUTBOX_RELAY_ variable is refused, except "
                "those Kubernetes sets for a Service named outbox-relay, which are ignored: "
                "OUTBOX_RELAY_SERVICE_HOST, OUTBOX_RELAY_SERVICE_PORT[_<name>], OUTBOX_RELAY_PORT "
                "and OUTBOX_RELAY_PORT_<port>_<TCP|UDP|SCTP>[_PROTO|_PORT|_ADDR].");
        roff_tp(out, "PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE, ...",
                "Read by libpq for what postgres.conninfo leaves out.");
        fputs(".SH EXIT STATUS\n", out);
        roff_line(out, "Of the relay; the commands' exit statuses are listed under COMMANDS. "
                       "What prints (the commands, --help, --man, --version, --example-config, "
                       "--print-config) ends with the status it has when its output is read, and "
                       "says nothing, when the reader stops reading (outbox-relay --man | head); "
                       "a write to standard output that fails otherwise (a full disk) is said "
                       "and exits 1.");
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
                  "publishes, so a client cannot slow the relay; at most 64 connections from "
                  "other addresses, 16 per address, 10 s idle timeout, and 16 more for 127.0.0.1 "
                  "and ::1, which --health-check asks from: clients elsewhere that hold every "
                  "slot cannot fail it (a liveness probe should run it rather than GET /healthz "
                  "from another address). The README lists every metric.");
        fputs(".SH SYSTEMD\n", out);
        roff_line(out,
                  "Built with libsystemd, the relay tells systemd (Type=notify) READY=1 once it "
                  "streams, stands by, or backs off to retry (PostgreSQL or Kafka away at start: "
                  "the unit is started, /readyz says not ready), STATUS= saying which (and why it "
                  "waits to retry), STOPPING=1 when it drains, and WATCHDOG=1 from its "
                  "main loop when the unit sets WatchdogSec. A backfill (snapshot.mode = initial) "
                  "runs before READY=1: while it makes progress the relay says so in STATUS= and "
                  "extends the start timeout (EXTEND_TIMEOUT_USEC), so TimeoutStartSec does not "
                  "end it (the next start would backfill again). The unit outbox-relay.service reads "
                  RELAY_SYSCONFDIR "/outbox-relay.conf as a credential (the file may be readable "
                  "by root only) and runs as a dynamic user; exit statuses 2, 4 and 5 are not "
                  "restarted, since a restart cannot fix them (the event of status 4 is read "
                  "again at every start: fix its cause, or list its id in errors.skip.ids, then "
                  "start the unit). Status 6 is: a relay fenced because another took its slot "
                  "over comes back standing by, and registers the transactional.id again only "
                  "once the slot is its own. Two relays of different slots sharing an "
                  "eos.transactional.id fence each other at every restart, for ever (each "
                  "aborting the other's open transaction: nothing is lost or visible twice, "
                  "but little is relayed): give each slot its own. When standard error is the "
                  "journal (JOURNAL_STREAM names it), each log line starts with its syslog priority "
                  "(<4> for a warning, <3> error, <2> fatal, as sd-daemon(3) says), which journald "
                  "records and strips, so journalctl -p warning shows the warnings and errors.");
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

typedef struct {
        const char *tag, *desc;
} tp_row_t;

static void roff_tps(FILE *out, const tp_row_t *rows, size_t n)
{
        for (size_t i = 0; i < n; i++)
                roff_tp(out, rows[i].tag, rows[i].desc);
}

/* outbox-inbox(1): its keys come from inbox_config.c's table. */
void relay_manual_print_inbox_man(FILE *out)
{
        static const tp_row_t inbox_options[] = {
                {"-c, --config FILE",
                 "Read \"key = value\" lines from FILE, in outbox-relay's format: \"#\" "
                 "comments, also after a value and a blank, so a value holding \" #\" (SQL's "
                 "# operator) is double-quoted."},
                {"-s, --set KEY=VALUE", "Set one key; applied after the file, in order."},
                {"-h, --help", "Print the options and keys, then exit."},
                {"-V, --version", "Print the version and librdkafka's, then exit."},
                {"--man", "Print this manual page (roff), then exit."},
        }, inbox_exits[] = {
                {"0", "Stopped by SIGTERM or SIGINT."},
                {"1", "The Kafka client reported a fatal error, or revoked partitions could "
                      "not be given up; or --help, --man or --version could not write to "
                      "standard output (a full disk; a reader that stops reading, as in "
                      "outbox-inbox --man | head, is no error: 0, nothing said)."},
                {"2", "Bad command line or configuration; the message names the key."},
                {"3", "PostgreSQL refuses the connection for good (a wrong or missing "
                      "password, no pg_hba.conf entry, no such role or database, no LOGIN or "
                      "CONNECT; told by SQLSTATE in any lc_messages language), or "
                      "inbox_accept() or the handler does not prepare (run sql/006_inbox.sql "
                      "in the consumer's database, or fix inbox.handler); no retry can fix it. "
                      "PostgreSQL unreachable, or starting up, is retried."},
                {"4", "Stopped before a message that could not be applied or dead-lettered "
                      "(errors.policy = stop, or the dead-letter write failed); its offset is "
                      "not committed, so the next start tries it again."},
        };
        relay_inbox_keydoc_t d;
        const char *name, *value, *why;

        fputs(".\\\" outbox-inbox(1), generated by \"outbox-inbox --man\" from the tables of\n"
              ".\\\" src/manual.c and src/inbox_config.c: edit those, not this file.\n"
              ".TH OUTBOX\\-INBOX 1 \"\" \"outbox-inbox " RELAY_VERSION "\" \"User Commands\"\n"
              ".nh\n"
              ".SH NAME\n"
              "outbox\\-inbox \\- apply each Kafka message's effect to PostgreSQL exactly once\n"
              ".SH SYNOPSIS\n"
              ".B outbox\\-inbox\n"
              "[\\fB\\-\\-config\\fR \\fIFILE\\fR] [\\fB\\-\\-set\\fR \\fIKEY\\fR=\\fIVALUE\\fR]...\n"
              ".SH DESCRIPTION\n",
              out);
        roff_line(out,
                  "outbox-inbox consumes the events outbox-relay (or Debezium) publishes, as a "
                  "member of a Kafka consumer group reading with isolation.level = "
                  "read_committed, and applies each message in one PostgreSQL transaction: "
                  "inbox_accept() (sql/006_inbox.sql) records the message id and says whether it "
                  "is new; only for a new id does the inbox.handler statement run; then COMMIT, "
                  "and only then is the Kafka offset stored for commit. A crash before the "
                  "COMMIT leaves neither the inbox row nor the effect, and the message comes "
                  "again; a crash after it leaves both, and the message, if it comes again, is "
                  "refused. So duplicates in Kafka, consumer crashes and rebalances never apply "
                  "an effect twice or skip one.");
        fputs(".PP\n", out);
        roff_line(out,
                  "Messages are handled one at a time, in partition order, on the polling "
                  "thread. Offsets are committed asynchronously every 200 ms and when idle, "
                  "synchronously when partitions are revoked and at stop.");
        fputs(".SH OPTIONS\n", out);
        roff_tps(out, inbox_options, COUNT(inbox_options));
        fputs(".SH CONFIGURATION\n", out);
        roff_line(out, "Layers: defaults < --config file < --set. Unknown keys, bad values and "
                       "a key set twice in the file are refused with their origin (exit 2). The "
                       "keys:");
        for (size_t i = 0; relay_inbox_config_keydoc(i, &d); i++)
                man_key(out, d.name, d.desc, "", d.def, "none", NULL);
        roff_tp(out, "kafka.<property>",
                "Any librdkafka consumer property, without \"kafka.\"; kafka.bootstrap.servers is "
                "required. Defaults: group.id = outbox-inbox, client.id = outbox-inbox, "
                "auto.offset.reset = earliest. Set group.instance.id (static membership) so that "
                "a restarted consumer takes its partitions back at once.");
        fputs(".PP\nFixed (another value is refused):\n", out);
        for (size_t i = 0; relay_inbox_config_fixed(i, &name, &value, &why); i++) {
                char tag[128];
                snprintf(tag, sizeof(tag), "kafka.%s = %s", name, value);
                roff_tp(out, tag, why);
        }
        fputs(".SH HANDLER\n", out);
        roff_line(out,
                  "inbox.handler is one SQL statement with up to seven parameters: $1 the key "
                  "(text), $2 the headers (a jsonb object of name to text value; a repeated name "
                  "keeps its last value), $3 the payload (inbox.payload: jsonb, text or bytea), "
                  "$4 the topic, $5 the partition (integer), $6 the offset (bigint), $7 the "
                  "message id (the inbox.id.header header). A tombstone's payload is SQL NULL.");
        fputs(".SH ERRORS\n", out);
        roff_line(out,
                  "A handler error rolls the transaction back and is retried errors.retries "
                  "times with backoff (errors.backoff.ms, doubling up to errors.backoff.max.ms); "
                  "then, with errors.policy = dlq, the message goes to errors.dlq.topic with "
                  "headers outbox.inbox.error.message, .topic, .partition, .offset and .attempts, "
                  "and its offset is committed only once Kafka has acknowledged the copy. A "
                  "message the database can never receive (no id header, a key or header that is "
                  "not UTF-8, a payload that is not UTF-8 or holds a NUL byte for a text "
                  "handler, not JSON or holding \\u0000 for a jsonb handler) is dead-lettered "
                  "at once. Text reaches the server as UTF-8 (client_encoding), which converts "
                  "it to the database's encoding. A lost "
                  "PostgreSQL connection, or a server that cannot take writes now whatever "
                  "the message (SQLSTATE 25006 read-only, 57P* shutting down, 08*, 53100 disk "
                  "full, 58000 and 58030 system and I/O errors), is no attempt of the message's: it is retried on a new "
                  "connection with reconnect.backoff.ms, "
                  "doubling up to reconnect.backoff.max.ms. Retries hold back the partition's "
                  "later messages: keep their total under max.poll.interval.ms.");
        fputs(".SH EXIT STATUS\n", out);
        roff_tps(out, inbox_exits, COUNT(inbox_exits));
        fputs(".SH SIGNALS\n", out);
        roff_tp(out, "SIGTERM, SIGINT",
                "Finish the message at hand, commit the offsets, leave the group and exit 0. A "
                "second signal exits at once; nothing is lost (the offset of a message not "
                "committed in PostgreSQL was never stored).");
        roff_tp(out, "SIGHUP",
                "Ignored, with a warning: the inbox does not reload its configuration (as "
                "PostgreSQL and PgBouncer do on SIGHUP); a restart applies a changed one.");
        fputs(".SH FILES\n", out);
        roff_tp(out, RELAY_SQLDIR "/006_inbox.sql",
                "The inbox table, inbox_accept() and the retention statement, for the "
                "consumer's database.");
        fputs(".SH EXAMPLES\n.nf\n", out);
        roff_line(out, "outbox-inbox --set postgres.conninfo=\"host=db dbname=orders_view\" \\\n"
                       "             --set kafka.bootstrap.servers=kafka:9092 \\\n"
                       "             --set inbox.topics=outbox.event.order \\\n"
                       "             --set inbox.handler='SELECT apply_event($1, $2, $3, $7)' \\\n"
                       "             --set kafka.group.id=orders-view");
        fputs(".fi\n.SH SEE ALSO\n\\fBoutbox-relay\\fR(1)\n", out);
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
