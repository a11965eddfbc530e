/*
 * test_config.c - the configuration layers: defaults, file, environment and
 * --set precedence with origins, every kind of bad value and the message it
 * gives, kafka.* pass-through, secret masking, and print -> load round trips.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "relay/config.h"
#include "tap.h"

static char err[RELAY_ERRBUF];

static relay_config_t *new_config(void)
{
        relay_config_t *c = NULL;

        if (relay_config_new(&c) != 0 || c == NULL)
                tap_bail("relay_config_new failed");
        return c;
}

/* A temporary file holding text; caller unlinks and frees the path. */
static char *write_temp(const char *text)
{
        const char *dir = getenv("TMPDIR");
        char *path;
        FILE *f;
        int fd;

        if (dir == NULL || dir[0] == '\0')
                dir = "/tmp";
        path = malloc(strlen(dir) + 32);
        if (path == NULL)
                tap_bail("out of memory");
        sprintf(path, "%s/test_config_XXXXXX", dir);
        fd = mkstemp(path);
        if (fd < 0 || (f = fdopen(fd, "w")) == NULL)
                tap_bail("could not create a temporary file in %s", dir);
        fputs(text, f);
        if (fclose(f) != 0)
                tap_bail("could not write %s", path);
        return path;
}

/* relay_config_print() output as a string; caller frees. */
static char *print_string(const relay_config_t *c)
{
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);

        if (f == NULL)
                tap_bail("open_memstream failed");
        relay_config_print(c, f);
        fclose(f);
        return buf;
}

static bool has(const char *hay, const char *needle)
{
        return hay != NULL && strstr(hay, needle) != NULL;
}

/* Expect relay_config_set_arg(arg) to fail with a message containing want. */
static void set_fails(relay_config_t *c, const char *arg, const char *want)
{
        err[0] = '\0';
        is_int(relay_config_set_arg(c, arg, err, sizeof(err)), RELAY_EINVAL, "--set %s fails", arg);
        if (!ok(has(err, want), "  and says \"%s\"", want))
                tap_diag("  message: %s", err);
}

/* Expect relay_config_set_arg(arg) to succeed and key to read back as want. */
static void set_ok(relay_config_t *c, const char *arg, const char *key, const char *want)
{
        err[0] = '\0';
        if (relay_config_set_arg(c, arg, err, sizeof(err)) != 0) {
                ok(0, "--set %s", arg);
                tap_diag("  message: %s", err);
                return;
        }
        is_str(relay_config_get(c, key), want, "--set %s gives %s = %s", arg, key, want);
}

static void test_defaults(void)
{
        static const char *const want[][2] = {
                {"postgres.conninfo", ""},
                {"slot.name", "outbox_relay"},
                {"publication.name", "outbox_pub"},
                {"outbox.table", "public.outbox"},
                {"outbox.column.id", "id"},
                {"outbox.column.aggregate_type", "aggregatetype"},
                {"outbox.column.aggregate_id", "aggregateid"},
                {"outbox.column.type", "type"},
                {"outbox.column.payload", "payload"},
                {"outbox.headers", ""},
                {"topic.template", "outbox.event.${aggregatetype}"},
                {"status.interval.ms", "10000"},
                {"shutdown.timeout.ms", "30000"},
                {"reconnect.backoff.ms", "500"},
                {"reconnect.backoff.max.ms", "30000"},
                {"log.level", "info"},
                {"log.format", "text"},
        };
        relay_config_t *c = new_config();
        char *out;

        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
                is_str(relay_config_get(c, want[i][0]), want[i][1], "default %s", want[i][0]);
        is_int(relay_config_get_int(c, "status.interval.ms"), 10000, "status.interval.ms as int");
        is_int(relay_config_get_int(c, "shutdown.timeout.ms"), 30000, "shutdown.timeout.ms as int");
        is_int(relay_config_get_int(c, "reconnect.backoff.ms"), 500, "reconnect.backoff.ms as int");
        is_int(relay_config_get_int(c, "reconnect.backoff.max.ms"), 30000,
               "reconnect.backoff.max.ms as int");
        is_int(relay_config_kafka_count(c), 0, "no kafka.* by default");
        is_str(relay_config_get(c, "kafka.bootstrap.servers"), "", "unset kafka.* reads as \"\"");
        ok(relay_config_get(c, "no.such.key") == NULL, "unknown key reads as NULL");

        out = print_string(c);
        ok(has(out, "\nslot.name = outbox_relay  # default\n"), "print shows defaults");
        ok(has(out, "\npostgres.conninfo = \"\"  # default\n"), "print quotes an empty value");
        free(out);

        is_int(relay_config_validate(c, err, sizeof(err)), RELAY_EINVAL,
               "defaults alone do not validate");
        is_str(err,
               "kafka.bootstrap.servers is not set; set it in the config file, with "
               "OUTBOX_RELAY_KAFKA_BOOTSTRAP_SERVERS or --set kafka.bootstrap.servers=host:9092",
               "  because kafka.bootstrap.servers is required");
        set_ok(c, "kafka.bootstrap.servers=localhost:9092", "kafka.bootstrap.servers",
               "localhost:9092");
        is_int(relay_config_validate(c, err, sizeof(err)), 0, "defaults + bootstrap validate");
        relay_config_free(c);
        relay_config_free(NULL);
        ok(1, "relay_config_free(NULL) is harmless");
}

static void test_precedence(void)
{
        char *path = write_temp("# layered test\n"
                                "\n"
                                "slot.name = file_slot\n"
                                "publication.name = file_pub\n"
                                "status.interval.ms = 2000\n"
                                "log.level = debug\n"
                                "kafka.bootstrap.servers = file:9092\n");
        char *const envp[] = {
                "PATH=/usr/bin",
                "OUTBOX_RELAY_CONFIG=/ignored.conf",
                "OUTBOX_RELAY_SLOT_NAME=env_slot",
                "OUTBOX_RELAY_PUBLICATION_NAME=env_pub",
                "OUTBOX_RELAY_KAFKA_ACKS=all",
                "OUTBOX_RELAY_OUTBOX_COLUMN_AGGREGATE_TYPE=agg_type",
                NULL,
        };
        relay_config_t *c = new_config();
        char want[256];
        char *out;
        const char *name, *value;

        is_int(relay_config_load_file(c, path, err, sizeof(err)), 0, "load file");
        is_str(relay_config_get(c, "slot.name"), "file_slot", "file overrides default");
        is_int(relay_config_load_env(c, envp, err, sizeof(err)), 0, "load env");
        is_str(relay_config_get(c, "slot.name"), "env_slot", "env overrides file");
        is_str(relay_config_get(c, "outbox.column.aggregate_type"), "agg_type",
               "env name of a key with \"_\" maps exactly");
        is_int(relay_config_set_arg(c, "slot.name=cli_slot", err, sizeof(err)), 0, "--set");
        is_int(relay_config_set_arg(c, "kafka.linger.ms=5", err, sizeof(err)), 0, "--set kafka");
        is_int(relay_config_set_arg(c, "kafka.bootstrap.servers=cli:9092", err, sizeof(err)), 0,
               "--set kafka again");
        is_int(relay_config_set_arg(c, "slot.name=cli_slot2", err, sizeof(err)), 0,
               "--set twice");

        is_str(relay_config_get(c, "slot.name"), "cli_slot2", "last --set wins over env and file");
        is_str(relay_config_get(c, "publication.name"), "env_pub", "env wins over file");
        is_int(relay_config_get_int(c, "status.interval.ms"), 2000, "file wins over default");
        is_str(relay_config_get(c, "log.level"), "debug", "file enum value");
        is_int(relay_config_validate(c, err, sizeof(err)), 0, "layered config validates");

        out = print_string(c);
        ok(has(out, "\nslot.name = cli_slot2  # --set\n"), "print: --set origin");
        ok(has(out, "\npublication.name = env_pub  # OUTBOX_RELAY_PUBLICATION_NAME\n"),
           "print: environment origin");
        snprintf(want, sizeof(want), "\nstatus.interval.ms = 2000  # %s:5\n", path);
        ok(has(out, want), "print: file:line origin");
        ok(has(out, "\noutbox.table = public.outbox  # default\n"), "print: default origin");
        ok(has(out, "\nkafka.acks = all  # OUTBOX_RELAY_KAFKA_ACKS\n"), "print: kafka.* origin");
        ok(has(out, "\nkafka.bootstrap.servers = cli:9092  # --set\n"),
           "print: kafka.* overridden");
        ok(!has(out, "ignored.conf"), "OUTBOX_RELAY_CONFIG is not a key");
        if (tap_failed)
                tap_diag("print output:\n%s", out);
        free(out);

        /* Pass-through order is set order; a name set again moves to the end
         * (test_kafka_aliases: librdkafka reads them in this order). */
        is_int(relay_config_kafka_count(c), 3, "three kafka.* properties");
        relay_config_kafka_at(c, 0, &name, &value);
        ok(strcmp(name, "acks") == 0 && strcmp(value, "all") == 0,
           "kafka #0 acks = all (got %s = %s)", name, value);
        relay_config_kafka_at(c, 1, &name, &value);
        ok(strcmp(name, "linger.ms") == 0 && strcmp(value, "5") == 0,
           "kafka #1 linger.ms = 5 (got %s = %s)", name, value);
        relay_config_kafka_at(c, 2, &name, &value);
        ok(strcmp(name, "bootstrap.servers") == 0 && strcmp(value, "cli:9092") == 0,
           "kafka #2 bootstrap.servers = cli:9092 (got %s = %s)", name, value);
        is_str(relay_config_get(c, "kafka.linger.ms"), "5", "kafka.* readable by key");

        relay_config_free(c);
        unlink(path);
        free(path);
}

/* What librdkafka reads for property name from the kafka.* list, applied in
 * its order as the producer applies it; caller frees. */
static char *kafka_reads(const relay_config_t *c, const char *name)
{
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        char kerr[256], v[64] = "?";
        size_t vn = sizeof(v);

        for (size_t i = 0; i < relay_config_kafka_count(c); i++) {
                const char *n, *val;
                relay_config_kafka_at(c, i, &n, &val);
                if (rd_kafka_conf_set(conf, n, val, kerr, sizeof(kerr)) != RD_KAFKA_CONF_OK)
                        tap_bail("librdkafka refused %s = %s: %s", n, val, kerr);
        }
        if (rd_kafka_conf_get(conf, name, v, &vn) != RD_KAFKA_CONF_OK)
                tap_bail("librdkafka has no %s", name);
        rd_kafka_conf_destroy(conf);
        return strdup(v);
}

/*
 * Several librdkafka names are one property (linger.ms is
 * queue.buffering.max.ms, max.in.flight is
 * max.in.flight.requests.per.connection): whichever layer set one last must
 * win, as for any key, and the pipelining guard must judge the number
 * librdkafka reads.
 */
static void test_kafka_aliases(void)
{
        char *path = write_temp("kafka.bootstrap.servers = f:9092\n"
                                "kafka.linger.ms = 5\n");
        char *const envp[] = {"OUTBOX_RELAY_KAFKA_QUEUE_BUFFERING_MAX_MS=100",
                              "OUTBOX_RELAY_KAFKA_MAX_IN_FLIGHT=5", NULL};
        relay_config_t *c = new_config();
        char *got;

        is_int(relay_config_load_file(c, path, err, sizeof(err)), 0, "alias file loads");
        is_int(relay_config_load_env(c, envp, err, sizeof(err)), 0, "alias environment loads");
        set_ok(c, "kafka.linger.ms=50", "kafka.linger.ms", "50");
        got = kafka_reads(c, "queue.buffering.max.ms");
        is_str(got, "50", "--set kafka.linger.ms=50 wins over the environment's "
               "queue.buffering.max.ms=100 (its alias) in what librdkafka reads");
        free(got);

        /* The environment's max.in.flight=5 is overridden by --set's alias. */
        set_ok(c, "kafka.max.in.flight.requests.per.connection=1",
               "kafka.max.in.flight.requests.per.connection", "1");
        got = kafka_reads(c, "max.in.flight.requests.per.connection");
        is_str(got, "1", "librdkafka reads max.in.flight.requests.per.connection 1");
        free(got);
        is_int(relay_config_validate(c, err, sizeof(err)), 0,
               "max.in.flight=5 overridden by --set ...per.connection=1 validates (%s)", err);

        relay_config_free(c);

        /* librdkafka reads integers with strtol base 0: 0x5 is 5. */
        c = new_config();
        set_ok(c, "kafka.bootstrap.servers=h:9092", "kafka.bootstrap.servers", "h:9092");
        set_ok(c, "kafka.max.in.flight=0x5", "kafka.max.in.flight", "0x5");
        got = kafka_reads(c, "max.in.flight.requests.per.connection");
        is_str(got, "5", "librdkafka reads max.in.flight=0x5 as 5");
        free(got);
        is_int(relay_config_validate(c, err, sizeof(err)), RELAY_EINVAL,
               "kafka.max.in.flight=0x5 fails validation");
        ok(has(err, "kafka.max.in.flight = 0x5 (at --set) is not allowed: librdkafka reads 5"),
           "  naming the key, value, origin and what librdkafka reads (%s)", err);
        set_ok(c, "delivery.unsafe.allow.pipelining=true", "delivery.unsafe.allow.pipelining",
               "true");
        is_int(relay_config_validate(c, err, sizeof(err)), 0,
               "  and validates with delivery.unsafe.allow.pipelining (%s)", err);

        relay_config_free(c);
        unlink(path);
        free(path);
}

/*
 * Two names of one librdkafka property in one layer: librdkafka applies
 * the one set last, which was the environment's order of its variables or
 * the file's order of its lines, not a rank; both orders of the same
 * environment used to load, each giving librdkafka another value. Refused
 * now, with both names and origins and the fix; across layers the higher
 * layer still wins (test_kafka_aliases), and one name set again by --set
 * is still applied in order.
 */
/* A key read by its other librdkafka name: a broker list given only as
 * metadata.broker.list was "kafka.bootstrap.servers is not set". */
static void test_kafka_alias_read(void)
{
        relay_config_t *c = new_config();
        set_ok(c, "kafka.metadata.broker.list=m:9092", "kafka.bootstrap.servers", "m:9092");
        err[0] = '\0';
        is_int(relay_config_validate(c, err, sizeof(err)), 0,
               "metadata.broker.list alone validates (%s)", err);
        set_ok(c, "kafka.queue.buffering.max.ms=40", "kafka.linger.ms", "40");
        relay_config_free(c);
}

static void test_kafka_aliases_one_layer(void)
{
        char *const env_ab[] = {"OUTBOX_RELAY_KAFKA_LINGER_MS=7",
                                "OUTBOX_RELAY_KAFKA_QUEUE_BUFFERING_MAX_MS=90", NULL};
        char *const env_ba[] = {"OUTBOX_RELAY_KAFKA_QUEUE_BUFFERING_MAX_MS=90",
                                "OUTBOX_RELAY_KAFKA_LINGER_MS=7", NULL};
        char *const *envs[] = {env_ab, env_ba};
        relay_config_t *c;
        char *got;

        for (size_t i = 0; i < 2; i++) {
                c = new_config();
                err[0] = '\0';
                int rc = relay_config_load_env(c, envs[i], err, sizeof(err));
                is_int(rc, RELAY_EINVAL,
                       "environment with linger.ms and queue.buffering.max.ms (order %zu) is "
                       "refused",
                       i + 1);
                if (rc == 0) {
                        got = kafka_reads(c, "queue.buffering.max.ms");
                        tap_diag("  loaded: librdkafka reads queue.buffering.max.ms %s", got);
                        free(got);
                }
                ok(has(err, "\"kafka.linger.ms\" (at OUTBOX_RELAY_KAFKA_LINGER_MS)") &&
                           has(err, "\"kafka.queue.buffering.max.ms\" (at "
                                    "OUTBOX_RELAY_KAFKA_QUEUE_BUFFERING_MAX_MS)") &&
                           has(err, "two names of one librdkafka property, "
                                    "queue.buffering.max.ms") &&
                           has(err, "set only one of them"),
                   "  naming both variables, the property and the fix (%s)", err);
                relay_config_free(c);
        }

        /* One name twice in the environment, as kafka.* names are lower-cased. */
        char *const env_case[] = {"OUTBOX_RELAY_KAFKA_LINGER_MS=7",
                                  "OUTBOX_RELAY_KAFKA_linger_ms=90", NULL};
        c = new_config();
        err[0] = '\0';
        is_int(relay_config_load_env(c, env_case, err, sizeof(err)), RELAY_EINVAL,
               "OUTBOX_RELAY_KAFKA_LINGER_MS and OUTBOX_RELAY_KAFKA_linger_ms are refused");
        ok(has(err, "environment variables OUTBOX_RELAY_KAFKA_LINGER_MS and "
                    "OUTBOX_RELAY_KAFKA_linger_ms both set configuration key "
                    "\"kafka.linger.ms\"") &&
                   has(err, "unset one of them"),
           "  naming both variables, the key and the fix (%s)", err);
        relay_config_free(c);

        char *path = write_temp("kafka.bootstrap.servers = f:9092\n"
                                "kafka.acks = all\n"
                                "kafka.request.required.acks = 1\n");
        char want[600];
        c = new_config();
        err[0] = '\0';
        is_int(relay_config_load_file(c, path, err, sizeof(err)), RELAY_EINVAL,
               "a file with acks and request.required.acks is refused");
        snprintf(want, sizeof(want),
                 "\"kafka.acks\" (at %s:2) and \"kafka.request.required.acks\" (at %s:3) are "
                 "two names of one librdkafka property, request.required.acks",
                 path, path);
        ok(has(err, want), "  naming both lines (%s)", err);
        relay_config_free(c);
        unlink(path);
        free(path);

        c = new_config();
        set_ok(c, "kafka.bootstrap.servers=a:9092", "kafka.bootstrap.servers", "a:9092");
        set_fails(c, "kafka.metadata.broker.list=b:9092",
                  "\"kafka.bootstrap.servers\" (at --set) and \"kafka.metadata.broker.list\" "
                  "(at --set) are two names of one librdkafka property, metadata.broker.list");
        /* One name again is applied in order, as any --set. */
        set_ok(c, "kafka.bootstrap.servers=c:9092", "kafka.bootstrap.servers", "c:9092");
        relay_config_free(c);

        /* A layer each: the environment's, --set's, then a value set on its
         * own (what main sets for commands that need no Kafka). */
        char *const env_one[] = {"OUTBOX_RELAY_KAFKA_BOOTSTRAP_SERVERS=e:9092", NULL};
        c = new_config();
        is_int(relay_config_load_env(c, env_one, err, sizeof(err)), 0, "environment loads");
        set_ok(c, "kafka.metadata.broker.list=s:9092", "kafka.metadata.broker.list", "s:9092");
        got = kafka_reads(c, "metadata.broker.list");
        is_str(got, "s:9092", "--set's metadata.broker.list wins over the environment's alias");
        free(got);
        is_int(relay_config_set(c, "kafka.bootstrap.servers", "n:9092", "(not needed)", err,
                                sizeof(err)),
               0, "a value set on its own after --set is a layer of its own (%s)", err);
        got = kafka_reads(c, "metadata.broker.list");
        is_str(got, "n:9092", "  and wins");
        free(got);
        relay_config_free(c);
}

static void test_unknown_keys(void)
{
        char *path = write_temp("slot.name = s\n"
                                "\n"
                                "slot.nmae = s\n");
        relay_config_t *c = new_config();
        char want[512];

        is_int(relay_config_load_file(c, path, err, sizeof(err)), RELAY_EINVAL,
               "unknown key in file fails");
        snprintf(want, sizeof(want),
                 "unknown configuration key \"slot.nmae\" (at %s:3); did you mean \"slot.name\"?",
                 path);
        is_str(err, want, "  with file:line and a suggestion");
        set_fails(c, "reconect.backoff.ms=5", "did you mean \"reconnect.backoff.ms\"?");
        set_fails(c, "outbox.column.aggregatetype=x",
                  "did you mean \"outbox.column.aggregate_type\"?");
        set_fails(c, "kafak.bootstrap.servers=x", "did you mean \"kafka.bootstrap.servers\"?");
        set_fails(c, "completely.different=1",
                  "unknown configuration key \"completely.different\" (at --set); "
                  "\"outbox-relay --help\" lists the keys");
        set_fails(c, "kafka.bootstrap.server=h:9092",
                  "unknown librdkafka property \"bootstrap.server\" in configuration key "
                  "\"kafka.bootstrap.server\" (at --set); did you mean "
                  "\"kafka.bootstrap.servers\"?");
        set_fails(c, "kafka.=x", "names no librdkafka property");
        set_fails(c, "kafka.linger.ms=abc", "invalid value for \"kafka.linger.ms\" (at --set)");
        set_fails(c, "slot.name", "invalid --set argument \"slot.name\": expected KEY=VALUE");
        set_fails(c, "=x", "expected KEY=VALUE");
        is_int(relay_config_kafka_count(c), 0, "rejected kafka.* are not kept");
        relay_config_free(c);
        unlink(path);
        free(path);
}

static void test_bad_values(void)
{
        relay_config_t *c = new_config();
        char big[80];

        set_fails(c, "status.interval.ms=abc",
                  "invalid value \"abc\" for \"status.interval.ms\" (at --set): must be an integer "
                  "number of milliseconds between 100 and 3600000");
        set_fails(c, "status.interval.ms=99", "between 100 and 3600000");
        set_fails(c, "status.interval.ms=3600001", "between 100 and 3600000");
        set_fails(c, "status.interval.ms=-100", "between 100 and 3600000");
        set_fails(c, "status.interval.ms= 100", "between 100 and 3600000");
        set_fails(c, "status.interval.ms=100ms", "between 100 and 3600000");
        set_fails(c, "status.interval.ms=+100", "between 100 and 3600000");
        set_fails(c, "status.interval.ms=", "between 100 and 3600000");
        set_fails(c, "status.interval.ms=99999999999999999999999", "between 100 and 3600000");
        /* 2^64 + 100: the digits must not wrap around to 100. */
        set_fails(c, "status.interval.ms=18446744073709551716", "between 100 and 3600000");
        set_fails(c, "reconnect.backoff.ms=9", "between 10 and 3600000");
        set_fails(c, "shutdown.timeout.ms=-1", "between 0 and 3600000");
        set_ok(c, "shutdown.timeout.ms=0", "shutdown.timeout.ms", "0");
        set_ok(c, "status.interval.ms=0100", "status.interval.ms", "100");
        is_int(relay_config_get_int(c, "status.interval.ms"), 100, "  as int");
        is_int(relay_config_get_int(c, "shutdown.timeout.ms"), 0, "shutdown.timeout.ms 0 as int");

        set_fails(c, "log.level=verbose",
                  "invalid value \"verbose\" for \"log.level\" (at --set): must be debug, info, "
                  "warning or error");
        set_fails(c, "log.level=fatal", "must be debug, info, warning or error");
        set_fails(c, "log.format=xml", "must be text or json");
        set_ok(c, "log.level=WARNING", "log.level", "warning");
        set_ok(c, "log.format=json", "log.format", "json");

        set_fails(c, "slot.name=Outbox", "must be a replication slot name");
        set_fails(c, "slot.name=out-box", "must be a replication slot name");
        set_fails(c, "slot.name=", "must be a replication slot name");
        memset(big, 'a', 64);
        big[64] = '\0';
        {
                char arg[100];
                snprintf(arg, sizeof(arg), "slot.name=%s", big);
                set_fails(c, arg, "1 to 63 lower-case letters, digits and \"_\"");
                snprintf(arg, sizeof(arg), "slot.name=%.63s", big);
                set_ok(c, arg, "slot.name", big + 1);
        }
        set_ok(c, "slot.name=0slot_9", "slot.name", "0slot_9");
        set_fails(c, "publication.name=Pub", "must be a lower-case identifier");
        set_fails(c, "publication.name=0pub", "must be a lower-case identifier");
        set_ok(c, "publication.name=_pub$1", "publication.name", "_pub$1");

        set_fails(c, "outbox.table=a.b.c", "must be \"schema.table\" or \"table\"");
        set_fails(c, "outbox.table=.outbox", "must be \"schema.table\" or \"table\"");
        set_fails(c, "outbox.table=app.", "must be \"schema.table\" or \"table\"");
        set_fails(c, "outbox.table=Outbox", "must be \"schema.table\" or \"table\"");
        set_fails(c, "outbox.table=", "must be \"schema.table\" or \"table\"");
        set_fails(c, "outbox.table=my table", "must be \"schema.table\" or \"table\"");
        set_ok(c, "outbox.table=events", "outbox.table", "public.events");
        set_ok(c, "outbox.table=app.events", "outbox.table", "app.events");
        set_ok(c, "outbox.table=outbox, app.events", "outbox.table", "public.outbox,app.events");
        set_fails(c, "outbox.table=outbox,public.outbox", "listed twice");
        set_fails(c, "outbox.table=outbox,,", "must be \"schema.table\" or \"table\"");
        set_fails(c, "outbox.table=outbox,a.b.c", "must be \"schema.table\" or \"table\"");

        set_fails(c, "outbox.column.id=", "must be a column name");
        set_ok(c, "outbox.column.id=eventId", "outbox.column.id", "eventId");

        set_ok(c, "outbox.headers= trace_id , tenant ", "outbox.headers", "trace_id,tenant");
        set_ok(c, "outbox.headers=", "outbox.headers", "");
        set_fails(c, "outbox.headers=a,,b", "comma-separated list of column names");
        set_fails(c, "outbox.headers=a,", "comma-separated list of column names");
        set_fails(c, "outbox.headers=a,b,a", "\"a\" is listed twice");

        set_fails(c, "topic.template=outbox.${aggregatetype", "must close every \"${\" with \"}\"");
        set_fails(c, "topic.template=outbox.${aggre${gatetype}", "must close every \"${\"");
        set_fails(c, "topic.template=outbox.${}", "must name a column in every ${...}");
        set_fails(c, "topic.template=out$box", "must use \"$\" only to start");
        set_fails(c, "topic.template=out box", "must not contain \" \"");
        /* No Kafka topic can be longer than 249 bytes, or "." or "..". */
        {
                char tpl[300] = "topic.template=";
                memset(tpl + strlen(tpl), 'a', 250);
                set_fails(c, tpl, "249");
                snprintf(tpl, sizeof(tpl), "topic.template=%0249d.${aggregatetype}", 0);
                set_fails(c, tpl, "249");
                set_fails(c, "topic.template=..", "\"..\"");
                memset(tpl, 0, sizeof(tpl));
                memcpy(tpl, "topic.template=", 15);
                memset(tpl + 15, 'a', 249);
                set_ok(c, tpl, "topic.template", tpl + 15);
                set_ok(c, "topic.template=.${aggregatetype}", "topic.template", ".${aggregatetype}");
        }
        set_fails(c, "topic.template=", "must not be empty");
        set_ok(c, "topic.template=${aggregatetype}", "topic.template", "${aggregatetype}");
        set_ok(c, "topic.template=evt.${aggregatetype}-${type}_v1", "topic.template",
               "evt.${aggregatetype}-${type}_v1");

        set_fails(c, "postgres.conninfo=host", "must be a libpq connection string or URI");
        set_fails(c, "postgres.conninfo=nosuchoption=1", "nosuchoption");
        set_ok(c, "postgres.conninfo=host=db port=5433 dbname=app", "postgres.conninfo",
               "host=db port=5433 dbname=app");
        set_ok(c, "postgres.conninfo=postgresql://db:5433/app", "postgres.conninfo",
               "postgresql://db:5433/app");
        err[0] = '\0';
        is_int(relay_config_set_arg(c, "postgres.conninfo=host=db password=hunter2 bogus", err,
                                    sizeof(err)),
               RELAY_EINVAL, "malformed conninfo with a password fails");
        ok(!has(err, "hunter2") && !has(err, "bogus") && has(err, "withheld"),
           "  without echoing any of it (%s)", err);
        is_str(relay_config_get(c, "postgres.conninfo"), "postgresql://db:5433/app",
               "failed sets leave the old value");

        relay_config_free(c);
}

static void test_cross_key(void)
{
        relay_config_t *c = new_config();

        set_ok(c, "kafka.bootstrap.servers=h:9092", "kafka.bootstrap.servers", "h:9092");
        set_ok(c, "outbox.column.type=payload", "outbox.column.type", "payload");
        is_int(relay_config_validate(c, err, sizeof(err)), RELAY_EINVAL,
               "two outbox columns on one name fail");
        is_str(err,
               "outbox.column.type (at --set) and outbox.column.payload (at default) both name "
               "column \"payload\"; each outbox.column.* key must name a different column",
               "  naming both keys, origins and the fix");
        set_ok(c, "outbox.column.payload=body", "outbox.column.payload", "body");
        is_int(relay_config_validate(c, err, sizeof(err)), 0, "distinct columns validate");
        set_ok(c, "outbox.column.aggregate_id=id", "outbox.column.aggregate_id", "id");
        is_int(relay_config_validate(c, err, sizeof(err)), RELAY_EINVAL, "id twice fails");
        ok(has(err, "outbox.column.id (at default) and outbox.column.aggregate_id (at --set)"),
           "  naming both (%s)", err);
        set_ok(c, "outbox.column.aggregate_id=aggregateid", "outbox.column.aggregate_id",
               "aggregateid");

        set_ok(c, "reconnect.backoff.ms=5000", "reconnect.backoff.ms", "5000");
        set_ok(c, "reconnect.backoff.max.ms=1000", "reconnect.backoff.max.ms", "1000");
        is_int(relay_config_validate(c, err, sizeof(err)), RELAY_EINVAL, "max backoff < backoff");
        is_str(err,
               "reconnect.backoff.max.ms = 1000 (at --set) is less than reconnect.backoff.ms = "
               "5000 (at --set); raise reconnect.backoff.max.ms or lower reconnect.backoff.ms",
               "  naming both values and the fix");
        set_ok(c, "reconnect.backoff.max.ms=5000", "reconnect.backoff.max.ms", "5000");
        is_int(relay_config_validate(c, err, sizeof(err)), 0, "equal backoffs validate");

        /* Refused here, so that check and --print-config refuse it too, not
         * only the producer once the relay has connected. */
        set_ok(c, "kafka.enable.idempotence=false", "kafka.enable.idempotence", "false");
        is_int(relay_config_validate(c, err, sizeof(err)), RELAY_EINVAL,
               "kafka.enable.idempotence=false fails validation");
        ok(has(err, "kafka.enable.idempotence = false (at --set) is not allowed"),
           "  naming the key, its origin and why (%s)", err);
        set_ok(c, "kafka.enable.idempotence=true", "kafka.enable.idempotence", "true");
        is_int(relay_config_validate(c, err, sizeof(err)), 0, "kafka.enable.idempotence=true validates");
        /* librdkafka reads true, t and 1 in any case as true, false, f and 0 as
         * false: the relay must judge the value it reads, not the spelling. */
        static const char *const truthy[] = {"TRUE", "True", "t", "T", "1"};
        static const char *const falsy[] = {"FALSE", "f", "0"};
        for (size_t i = 0; i < sizeof(truthy) / sizeof(truthy[0]); i++) {
                char arg[64];
                snprintf(arg, sizeof(arg), "kafka.enable.idempotence=%s", truthy[i]);
                set_ok(c, arg, "kafka.enable.idempotence", truthy[i]);
                is_int(relay_config_validate(c, err, sizeof(err)), 0, "%s validates (%s)", arg,
                       err);
                snprintf(arg, sizeof(arg), "kafka.enable.gapless.guarantee=%s", truthy[i]);
                set_ok(c, arg, "kafka.enable.gapless.guarantee", truthy[i]);
                is_int(relay_config_validate(c, err, sizeof(err)), 0, "%s validates (%s)", arg,
                       err);
        }
        for (size_t i = 0; i < sizeof(falsy) / sizeof(falsy[0]); i++) {
                char arg[64];
                snprintf(arg, sizeof(arg), "kafka.enable.gapless.guarantee=%s", falsy[i]);
                set_ok(c, arg, "kafka.enable.gapless.guarantee", falsy[i]);
                is_int(relay_config_validate(c, err, sizeof(err)), RELAY_EINVAL, "%s fails", arg);
                set_ok(c, "kafka.enable.gapless.guarantee=true", "kafka.enable.gapless.guarantee",
                       "true");
                snprintf(arg, sizeof(arg), "kafka.enable.idempotence=%s", falsy[i]);
                set_ok(c, arg, "kafka.enable.idempotence", falsy[i]);
                is_int(relay_config_validate(c, err, sizeof(err)), RELAY_EINVAL, "%s fails", arg);
        }
        set_ok(c, "kafka.enable.idempotence=true", "kafka.enable.idempotence", "true");

        set_ok(c, "kafka.bootstrap.servers=", "kafka.bootstrap.servers", "");
        is_int(relay_config_validate(c, err, sizeof(err)), RELAY_EINVAL,
               "empty kafka.bootstrap.servers fails");
        ok(has(err, "kafka.bootstrap.servers is not set"), "  as not set");
        relay_config_free(c);
}

static void test_env(void)
{
        relay_config_t *c = new_config();
        char *const typo[] = {"OUTBOX_RELAY_SLOT_NAEM=x", NULL};
        char *const unknown[] = {"OUTBOX_RELAY_FROBNICATE=1", NULL};
        char *const badval[] = {"OUTBOX_RELAY_STATUS_INTERVAL_MS=abc", NULL};
        char *const kafka[] = {"OUTBOX_RELAY_KAFKA_BOOTSTRAP_SERVERS=k1:9092,k2:9092",
                               "OUTBOX_RELAY_KAFKA_LOG_LEVEL=3",
                               "OUTBOX_RELAY_KAFKA_SASL_USERNAME=user",
                               "OUTBOX_RELAY_LOG_FORMAT=json",
                               "OUTBOX_RELAY_POSTGRES_CONNINFO=",
                               "RELAY_TEST_KAFKA=ignored",
                               "OUTBOX_RELAY_CONFIG=",
                               NULL};
        char *const nokafka[] = {"OUTBOX_RELAY_KAFKA_=1", NULL};
        /* What Kubernetes gives every pod of a namespace with a Service named
         * outbox-relay (service links, on by default). */
        char *const k8s[] = {"OUTBOX_RELAY_SERVICE_HOST=10.96.0.12",
                             "OUTBOX_RELAY_SERVICE_PORT=10187",
                             "OUTBOX_RELAY_SERVICE_PORT_METRICS=10187",
                             "OUTBOX_RELAY_PORT=tcp://10.96.0.12:10187",
                             "OUTBOX_RELAY_PORT_10187_TCP=tcp://10.96.0.12:10187",
                             "OUTBOX_RELAY_PORT_10187_TCP_PROTO=tcp",
                             "OUTBOX_RELAY_PORT_10187_TCP_PORT=10187",
                             "OUTBOX_RELAY_PORT_10187_TCP_ADDR=10.96.0.12",
                             NULL};
        char *const k8s_like[] = {"OUTBOX_RELAY_PORT_10187_HTTP=x", NULL};

        is_int(relay_config_load_env(c, typo, err, sizeof(err)), RELAY_EINVAL, "typo'd variable");
        is_str(err,
               "unknown environment variable \"OUTBOX_RELAY_SLOT_NAEM\"; did you mean "
               "\"OUTBOX_RELAY_SLOT_NAME\"?",
               "  names it and suggests the right one");
        is_int(relay_config_load_env(c, k8s, err, sizeof(err)), 0,
               "Kubernetes' service variables are not configuration: %s", err);
        is_int(relay_config_load_env(c, k8s_like, err, sizeof(err)), RELAY_EINVAL,
               "  but only those (OUTBOX_RELAY_PORT_10187_HTTP is refused)");
        is_int(relay_config_load_env(c, unknown, err, sizeof(err)), RELAY_EINVAL,
               "unknown variable");
        ok(has(err, "unknown environment variable \"OUTBOX_RELAY_FROBNICATE\""), "  names it (%s)",
           err);
        is_int(relay_config_load_env(c, nokafka, err, sizeof(err)), RELAY_EINVAL,
               "OUTBOX_RELAY_KAFKA_ alone");
        is_int(relay_config_load_env(c, badval, err, sizeof(err)), RELAY_EINVAL, "bad value");
        is_str(err,
               "invalid value \"abc\" for \"status.interval.ms\" (at "
               "OUTBOX_RELAY_STATUS_INTERVAL_MS): must be an integer number of milliseconds "
               "between 100 and 3600000",
               "  names the variable");
        is_int(relay_config_load_env(c, kafka, err, sizeof(err)), 0, "kafka.* from env");
        is_str(relay_config_get(c, "kafka.bootstrap.servers"), "k1:9092,k2:9092",
               "OUTBOX_RELAY_KAFKA_BOOTSTRAP_SERVERS -> kafka.bootstrap.servers");
        is_str(relay_config_get(c, "kafka.log_level"), "3",
               "OUTBOX_RELAY_KAFKA_LOG_LEVEL -> kafka.log_level (a '_' property)");
        is_str(relay_config_get(c, "kafka.sasl.username"), "user",
               "OUTBOX_RELAY_KAFKA_SASL_USERNAME -> kafka.sasl.username");
        is_str(relay_config_get(c, "log.format"), "json", "OUTBOX_RELAY_LOG_FORMAT");
        is_int(relay_config_load_env(c, NULL, err, sizeof(err)), 0, "NULL envp is empty");
        relay_config_free(c);
}

static void file_fails(const char *text, int line, const char *want)
{
        char *path = write_temp(text);
        relay_config_t *c = new_config();
        char where[512];

        err[0] = '\0';
        is_int(relay_config_load_file(c, path, err, sizeof(err)), RELAY_EINVAL,
               "file error on line %d", line);
        snprintf(where, sizeof(where), "(at %s:%d)", path, line);
        if (!ok(has(err, where) && has(err, want), "  names %s:%d and says \"%s\"", "path", line,
                want))
                tap_diag("  message: %s", err);
        relay_config_free(c);
        unlink(path);
        free(path);
}

static void test_file(void)
{
        relay_config_t *c = new_config();
        char *path;

        is_int(relay_config_load_file(c, "/nonexistent/relay.conf", err, sizeof(err)),
               RELAY_EINVAL, "missing file");
        is_str(err,
               "could not open configuration file \"/nonexistent/relay.conf\": No such file or "
               "directory",
               "  says could not open");
        is_int(relay_config_load_file(c, "/", err, sizeof(err)), RELAY_EINVAL, "a directory");
        ok(has(err, "configuration file \"/\""), "  names it (%s)", err);
        relay_config_free(c);

        file_fails("slot.name = a\njust some words\n", 2, "expected \"key = value\"");
        file_fails("\n\n = value\n", 3, "missing key before \"=\"");
        file_fails("slot.name = \"open\n", 1, "has no closing double quote");
        file_fails("slot.name = \"a\" b\n", 1, "unexpected text after the closing quote");
        file_fails("slot.name = \"a\\qb\"\n", 1, "invalid escape");
        file_fails("# ok\nstatus.interval.ms = 5\n", 2,
                   "invalid value \"5\" for \"status.interval.ms\"");
        file_fails("slot.name = a\nslot.name = Bad\n", 2, "must be a replication slot name");
        /* CR-only line ends: one line, whose first value (a free-form one)
         * or comment would take the rest, slot.name lost in silence. */
        file_fails("kafka.client.id = relay\rslot.name = orders_slot\r", 1,
                   "a carriage return (CR) inside the line");
        file_fails("outbox.message.prefix = app\rslot.name = orders_slot\r", 1,
                   "save it with LF (or CRLF) line ends");
        file_fails("slot.name = a\n# settings\rslot.name = orders_slot\r\n", 2,
                   "a carriage return (CR) inside the line");
        /* A key twice in one file: the earlier line would do nothing, in
         * silence (the example file lists every key commented out, and a
         * line appended at the end is the classic way to get there). */
        file_fails("slot.name = a\n# later\nslot.name = b\n", 3,
                   "is already set on line 1 of this file; remove one of the two lines");
        file_fails("kafka.linger.ms = 5\nkafka.linger.ms = 10\n", 2,
                   "configuration key \"kafka.linger.ms\"");

        path = write_temp("\xef\xbb\xbf# a BOM, CRLF line ends, comments and quoting\r\n"
                          "   # indented comment\r\n"
                          "\r\n"
                          "slot.name=tight\r\n"
                          "\tpublication.name\t=\tspaced   \r\n"
                          "kafka.client.id = \"quoted # not a comment \\\"x\\\" \\\\ \""
                          "  # comment\n"
                          "kafka.sasl.password = a#b\n"
                          "kafka.sasl.username = user # trailing comment\n"
                          "outbox.headers = \"\"\n"
                          "log.level = # only a comment, so the value is empty\n");
        c = new_config();
        is_int(relay_config_load_file(c, path, err, sizeof(err)), RELAY_EINVAL,
               "empty log.level fails");
        ok(has(err, ":10)"), "  on line 10 (%s)", err);
        is_str(relay_config_get(c, "slot.name"), "tight", "no blanks around =");
        is_str(relay_config_get(c, "publication.name"), "spaced", "tabs and trailing blanks");
        is_str(relay_config_get(c, "kafka.client.id"), "quoted # not a comment \"x\" \\ ",
               "quoted value with escapes and a trailing comment");
        is_str(relay_config_get(c, "kafka.sasl.password"), "a#b", "'#' inside a word is kept");
        is_str(relay_config_get(c, "kafka.sasl.username"), "user", "' #' starts a comment");
        is_str(relay_config_get(c, "outbox.headers"), "", "\"\" is empty");
        relay_config_free(c);
        unlink(path);
        free(path);
}

static void test_masking(void)
{
        static const struct {
                const char *in, *want, *secret;
        } cases[] = {
                {"host=db password=secret user=u", "host=db password=******** user=u", "secret"},
                {"password='se cret' host=x", "password=******** host=x", "cret"},
                {"password = 'it\\'s' host=x", "password = ******** host=x", "it"},
                {"host=x password=sec\\ ret", "host=x password=********", "ret"},
                {"postgresql://u:secret@h/db", "postgresql://u:********@h/db", "secret"},
                {"postgres://u:secret@h1:5432,h2/db?sslmode=require",
                 "postgres://u:********@h1:5432,h2/db?sslmode=require", "secret"},
                {"postgresql://u@h/db?password=secret&sslmode=require",
                 "postgresql://u@h/db?password=********&sslmode=require", "secret"},
                {"postgresql://h/db", "postgresql://h/db", NULL},
                {"dbname='postgresql://u:secret@h/db' connect_timeout=5",
                 "dbname='postgresql://u:********@h/db' connect_timeout=5", "secret"},
                {"dbname='host=h password=secret'", "dbname='host=h password=********'", "secret"},
                {"host=db dbname=app", "host=db dbname=app", NULL},
                {"host=db secret", "host=db ********", "secret"},
                {"host=db sslkey=k.pem sslpassword=keysecret", "host=db sslkey=k.pem sslpassword=********",
                 "keysecret"},
                {"postgresql://u@h/db?sslpassword=keysecret",
                 "postgresql://u@h/db?sslpassword=********", "keysecret"},
                {"", "", NULL},
        };
        relay_config_t *c = new_config();
        char *out;

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char *m = relay_config_mask_conninfo(cases[i].in);
                is_str(m, cases[i].want, "mask %s", cases[i].in);
                if (cases[i].secret != NULL)
                        ok(!has(m, cases[i].secret), "  hides \"%s\"", cases[i].secret);
                free(m);
        }

        set_ok(c, "postgres.conninfo=host=db password='se cret' user=relay", "postgres.conninfo",
               "host=db password='se cret' user=relay");
        set_ok(c, "kafka.sasl.password=kafkapass", "kafka.sasl.password", "kafkapass");
        set_ok(c, "kafka.ssl.key.password=keypass", "kafka.ssl.key.password", "keypass");
        set_ok(c, "kafka.ssl.keystore.password=storepass", "kafka.ssl.keystore.password",
               "storepass");
        /* Debian's librdkafka lacks OIDC; either way the secret must not be echoed. */
        if (relay_config_set_arg(c, "kafka.sasl.oauthbearer.client.secret=oauthsecret", err,
                                 sizeof(err)) != 0)
                ok(!has(err, "oauthsecret"), "a rejected secret is not echoed (%s)", err);
        set_ok(c, "kafka.sasl.username=relayuser", "kafka.sasl.username", "relayuser");
        out = print_string(c);
        ok(!has(out, "se cret") && !has(out, "cret'"), "print hides the conninfo password");
        ok(has(out, "postgres.conninfo = host=db password=******** user=relay  # --set"),
           "  but shows the rest of the conninfo");
        ok(!has(out, "kafkapass"), "print hides kafka.sasl.password");
        ok(!has(out, "keypass"), "print hides kafka.ssl.key.password");
        ok(!has(out, "storepass"), "print hides kafka.ssl.keystore.password");
        ok(!has(out, "oauthsecret"), "print hides kafka.sasl.oauthbearer.client.secret");
        ok(has(out, "kafka.sasl.password = ********  # --set"), "  and shows it is set");
        ok(has(out, "kafka.sasl.username = relayuser"), "usernames are not secret");
        free(out);

        set_ok(c, "postgres.conninfo=postgresql://relay:urisecret@db/app", "postgres.conninfo",
               "postgresql://relay:urisecret@db/app");
        out = print_string(c);
        ok(!has(out, "urisecret"), "print hides a URI password");
        ok(has(out, "postgresql://relay:********@db/app"), "  keeping the URI readable");
        free(out);
        relay_config_free(c);
}

static void test_round_trip(void)
{
        static const char *const keys[] = {
                "postgres.conninfo", "slot.name", "publication.name", "outbox.table",
                "outbox.column.id", "outbox.column.aggregate_type", "outbox.column.aggregate_id",
                "outbox.column.type", "outbox.column.payload", "outbox.headers", "topic.template",
                "status.interval.ms", "shutdown.timeout.ms", "reconnect.backoff.ms",
                "reconnect.backoff.max.ms", "log.level", "log.format",
        };
        relay_config_t *a = new_config(), *b = new_config();
        char *out, *path, *again;
        bool same = true;

        /* Values that need quoting or escaping, set where files cannot reach. */
        if (relay_config_set(a, "postgres.conninfo", "host=db application_name='a #b' dbname=x",
                             "--set", err, sizeof(err)) != 0 ||
            relay_config_set(a, "kafka.client.id", " lead\t\"q\" \\ #x\nnext ", "--set", err,
                             sizeof(err)) != 0 ||
            relay_config_set(a, "kafka.bootstrap.servers", "h:9092", "--set", err,
                             sizeof(err)) != 0 ||
            relay_config_set(a, "outbox.column.type", "Event Type", "--set", err,
                             sizeof(err)) != 0 ||
            relay_config_set(a, "outbox.headers", "x#y,z", "--set", err, sizeof(err)) != 0)
                tap_bail("setting round-trip values: %s", err);
        out = print_string(a);
        path = write_temp(out);
        is_int(relay_config_load_file(b, path, err, sizeof(err)), 0,
               "print output loads as a file");
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
                if (strcmp(relay_config_get(a, keys[i]), relay_config_get(b, keys[i])) != 0) {
                        same = false;
                        tap_diag("  %s: \"%s\" became \"%s\"", keys[i],
                                 relay_config_get(a, keys[i]), relay_config_get(b, keys[i]));
                }
        }
        ok(same, "every key survives the round trip");
        is_str(relay_config_get(b, "kafka.client.id"), " lead\t\"q\" \\ #x\nnext ",
               "an awkward kafka.* value survives");
        is_int(relay_config_kafka_count(b), relay_config_kafka_count(a), "kafka.* count survives");
        is_int(relay_config_validate(b, err, sizeof(err)), 0, "reloaded config validates");

        /* Printing the reloaded one gives the same text but for the origins. */
        again = print_string(b);
        ok(has(again, "outbox.column.type = Event Type  # "), "inner blanks need no quotes");
        ok(has(again, "kafka.client.id = \" lead\\t\\\"q\\\" \\\\ #x\\nnext \"  # "),
           "awkward values print quoted and escaped");
        ok(has(again, "outbox.headers = \"x#y,z\"  # "), "'#' forces quotes");
        free(again);
        free(out);
        unlink(path);
        free(path);
        relay_config_free(a);
        relay_config_free(b);
}

static void test_help(void)
{
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);

        if (f == NULL)
                tap_bail("open_memstream failed");
        relay_config_print_help(f);
        fclose(f);
        ok(has(buf, "  slot.name = outbox_relay\n"), "help shows key and default");
        ok(has(buf, "env OUTBOX_RELAY_SLOT_NAME\n"), "help shows the environment variable");
        ok(has(buf, "env OUTBOX_RELAY_OUTBOX_COLUMN_AGGREGATE_TYPE\n"),
           "  for keys with \"_\" too");
        ok(has(buf, "100 to 3600000 milliseconds"), "help shows integer bounds");
        ok(has(buf, "kafka.bootstrap.servers (required)"), "help shows the required kafka key");
        ok(has(buf, "  postgres.conninfo = \"\"\n"), "help shows an empty default as \"\"");
        free(buf);
}

/* ok(cond, desc) about err; on failure, show the end of err (where it was cut). */
static void err_says(bool cond, const char *desc)
{
        size_t n = strlen(err);
        if (!ok(cond, "%s", desc))
                tap_diag("  message ends: %s", err + (n > 200 ? n - 200 : 0));
}

/*
 * A very long key or value (a list of hundreds of tables, a pasted blob) is
 * quoted only in part: quoted whole, it filled the error buffer, and the
 * message was cut before it named the key, the file line and the rule.
 */
static void test_long_input(void)
{
        enum { LONG = 3000 };
        char *big = malloc(LONG + 64), *text = malloc(2 * LONG + 256), *path;
        relay_config_t *c = new_config();
        char at[300];

        if (big == NULL || text == NULL)
                tap_bail("out of memory");
        memset(big, '9', LONG);
        big[LONG] = '\0';
        sprintf(text, "slot.name = ok\nstatus.interval.ms = %s\n", big);
        path = write_temp(text);
        snprintf(at, sizeof(at), "(at %s:2)", path);
        is_int(relay_config_load_file(c, path, err, sizeof(err)), RELAY_EINVAL,
               "a 3 000-digit value in a file fails");
        err_says(has(err, "\"status.interval.ms\"") && has(err, at) &&
                         has(err, "between 100 and 3600000") && has(err, "..."),
                 "  naming the key, its line and the rule, the value cut short");
        unlink(path);
        free(path);

        memset(big, 'k', LONG);
        sprintf(text, "# comment\n%s = 1\n", big);
        path = write_temp(text);
        snprintf(at, sizeof(at), "(at %s:2)", path);
        is_int(relay_config_load_file(c, path, err, sizeof(err)), RELAY_EINVAL,
               "a 3 000-byte key in a file fails");
        err_says(has(err, "unknown configuration key") && has(err, at) &&
                        has(err, "lists the keys"),
                 "  naming its line and where the keys are listed");
        unlink(path);
        free(path);

        sprintf(text, "%s = \"unclosed\n", big);
        path = write_temp(text);
        snprintf(at, sizeof(at), "(at %s:1)", path);
        is_int(relay_config_load_file(c, path, err, sizeof(err)), RELAY_EINVAL,
               "an unclosed quote after a 3 000-byte key fails");
        err_says(has(err, at) && has(err, "has no closing double quote"),
                 "  naming its line and the problem");
        unlink(path);
        free(path);

        sprintf(text, "kafka.%s=1", big);
        err[0] = '\0';
        is_int(relay_config_set_arg(c, text, err, sizeof(err)), RELAY_EINVAL,
               "--set kafka.<3 000 bytes>=1 fails");
        err_says(has(err, "unknown librdkafka property") && has(err, "(at --set)") &&
                        has(err, "CONFIGURATION.md"),
                 "  naming --set and where the properties are listed");

        /* Cut on a character boundary: the message stays UTF-8. */
        strcpy(text, "outbox.table=");
        for (size_t i = 0; i < 1000; i++)
                strcat(text, "\xc3\xa9");
        err[0] = '\0';
        is_int(relay_config_set_arg(c, text, err, sizeof(err)), RELAY_EINVAL,
               "--set outbox.table=<1 000 x \"\\u00e9\"> fails");
        char *clean = relay_utf8_sanitize(err);
        err_says(has(err, "\"outbox.table\" (at --set)") && clean && strcmp(clean, err) == 0,
                 "  naming the key, in valid UTF-8");
        free(clean);

        relay_config_free(c);
        free(big);
        free(text);
}

/*
 * A librdkafka consumer property in kafka.* (group.id copied from a
 * consumer's configuration, say) is accepted by librdkafka's configuration
 * and then ignored by the relay's producer, with a CONFWARN line only at
 * log.level = debug: a setting that silently does nothing. Nothing consumes
 * in at-least-once mode, so it is refused there, naming the fix; in
 * exactly-once mode it reaches the checkpoint reader, a consumer.
 */
static void test_consumer_props(void)
{
        static const char *const consumer[] = {"kafka.group.id=orders",
                                               "kafka.auto.offset.reset=latest",
                                               "kafka.isolation.level=read_uncommitted"};
        for (size_t i = 0; i < sizeof(consumer) / sizeof(consumer[0]); i++) {
                relay_config_t *c = new_config();
                char key[64];
                snprintf(key, sizeof(key), "%.*s (at --set)",
                         (int)(strchr(consumer[i], '=') - consumer[i]), consumer[i]);
                set_ok(c, "kafka.bootstrap.servers=h:9092", "kafka.bootstrap.servers", "h:9092");
                is_int(relay_config_set_arg(c, consumer[i], err, sizeof(err)), 0,
                       "--set %s is a property librdkafka knows", consumer[i]);
                is_int(relay_config_validate(c, err, sizeof(err)), RELAY_EINVAL,
                       "  but at-least-once, with nothing consuming, refuses it");
                if (!ok(has(err, key) && has(err, "consumer property") && has(err, "remove it"),
                        "  naming it, where it was set and the fix"))
                        tap_diag("  message: %s", err);
                set_ok(c, "delivery.mode=exactly-once", "delivery.mode", "exactly-once");
                is_int(relay_config_validate(c, err, sizeof(err)), RELAY_EINVAL,
                       "  exactly-once refuses it too: the checkpoint reader sets it itself");
                if (!ok(has(err, key) && has(err, "checkpoint reader") && has(err, "remove it"),
                        "  naming it, where it was set, the reader's own value and the fix"))
                        tap_diag("  message: %s", err);
                relay_config_free(c);
        }
        /* The reader's own value, as librdkafka reads it, is no conflict. */
        relay_config_t *same = new_config();
        set_ok(same, "kafka.bootstrap.servers=h:9092", "kafka.bootstrap.servers", "h:9092");
        set_ok(same, "delivery.mode=exactly-once", "delivery.mode", "exactly-once");
        set_ok(same, "kafka.isolation.level=read_committed", "kafka.isolation.level",
               "read_committed");
        set_ok(same, "kafka.enable.auto.commit=FALSE", "kafka.enable.auto.commit", "FALSE");
        is_int(relay_config_validate(same, err, sizeof(err)), 0,
               "exactly-once takes the reader's own values (read_committed, FALSE): %s", err);
        set_ok(same, "kafka.enable.auto.commit=true", "kafka.enable.auto.commit", "true");
        is_int(relay_config_validate(same, err, sizeof(err)), RELAY_EINVAL,
               "  but not another (enable.auto.commit=true)");
        relay_config_free(same);
        /* A consumer property the checkpoint reader takes from kafka.*. */
        relay_config_t *e = new_config();
        set_ok(e, "kafka.bootstrap.servers=h:9092", "kafka.bootstrap.servers", "h:9092");
        set_ok(e, "kafka.fetch.max.bytes=1048576", "kafka.fetch.max.bytes", "1048576");
        is_int(relay_config_validate(e, err, sizeof(err)), RELAY_EINVAL,
               "kafka.fetch.max.bytes: at-least-once refuses it");
        set_ok(e, "delivery.mode=exactly-once", "delivery.mode", "exactly-once");
        is_int(relay_config_validate(e, err, sizeof(err)), 0,
               "  exactly-once takes it (the checkpoint reader consumes with it): %s", err);
        relay_config_free(e);
        relay_config_t *c = new_config();
        set_ok(c, "kafka.bootstrap.servers=h:9092", "kafka.bootstrap.servers", "h:9092");
        set_ok(c, "kafka.compression.type=zstd", "kafka.compression.type", "zstd");
        set_ok(c, "kafka.client.id=me", "kafka.client.id", "me");
        is_int(relay_config_validate(c, err, sizeof(err)), 0,
               "producer and common properties validate: %s", err);
        relay_config_free(c);
}

int main(void)
{
        test_defaults();
        test_precedence();
        test_kafka_aliases();
        test_kafka_aliases_one_layer();
        test_kafka_alias_read();
        test_unknown_keys();
        test_bad_values();
        test_cross_key();
        test_env();
        test_file();
        test_masking();
        test_round_trip();
        test_help();
        test_long_input();
        test_consumer_props();
        return done_testing();
}
