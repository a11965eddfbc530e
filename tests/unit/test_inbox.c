/*
 * test_inbox.c - outbox-inbox without services: the message id and the
 * headers as the handler gets them (inbox_map.c), and its configuration
 * (inbox_config.c): defaults, the kafka.* properties it fixes, required
 * keys and cross-key rules, each refusal naming the key.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#include "relay/inbox_config.h"
#include "relay/inbox_map.h"
#include "tap.h"

static char err[RELAY_ERRBUF];

static void test_map(void)
{
        rd_kafka_headers_t *h = rd_kafka_headers_new(8);
        char *s = NULL;

        is_int(relay_inbox_message_id(NULL, "id", &s, err, sizeof(err)), RELAY_EMAP,
               "no headers: no id");
        ok(strstr(err, "no \"id\" header") != NULL, "the refusal names the header (%s)", err);
        is_int(relay_inbox_headers_json(NULL, &s, err, sizeof(err)), 0, "no headers: JSON");
        is_str(s, "{}", "no headers give {}");
        free(s);

        rd_kafka_header_add(h, "id", -1, "", 0);
        is_int(relay_inbox_message_id(h, "id", &s, err, sizeof(err)), RELAY_EMAP,
               "an empty id is refused");
        rd_kafka_header_add(h, "type", -1, "OrderPlaced", -1);
        rd_kafka_header_add(h, "id", -1, "e-1", -1); /* the last one counts */
        rd_kafka_header_add(h, "trace", -1, NULL, 0);
        rd_kafka_header_add(h, "quote", -1, "a\"b\\c", -1);
        is_int(relay_inbox_message_id(h, "id", &s, err, sizeof(err)), 0, "id found");
        is_str(s, "e-1", "the last id header is the id");
        free(s);
        is_int(relay_inbox_headers_json(h, &s, err, sizeof(err)), 0, "headers to JSON");
        is_str(s, "{\"id\":\"e-1\",\"type\":\"OrderPlaced\",\"trace\":null,\"quote\":\"a\\\"b\\\\c\"}",
               "a repeated name keeps its last value, NULL is null, quotes escaped");
        free(s);

        rd_kafka_header_add(h, "bin", -1, "\xff\xfe", 2);
        is_int(relay_inbox_headers_json(h, &s, err, sizeof(err)), RELAY_EMAP,
               "a header that is not UTF-8 is refused");
        ok(strstr(err, "\"bin\"") != NULL, "the refusal names the header (%s)", err);
        rd_kafka_headers_destroy(h);

        {
                const char *u = "h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80";
                ok(relay_inbox_utf8_ok(u, strlen(u)), "UTF-8 accepted");
        }
        ok(!relay_inbox_utf8_ok("a\0b", 3), "a NUL byte is refused");
        ok(!relay_inbox_utf8_ok("\xc0\xaf", 2), "an overlong form is refused");
        ok(!relay_inbox_utf8_ok("\xed\xa0\x80", 3), "a surrogate is refused");
        ok(!relay_inbox_utf8_ok("\xe2\x82", 2), "a truncated sequence is refused");
}

static relay_inbox_config_t *fresh(void)
{
        relay_inbox_config_t *c = NULL;
        if (relay_inbox_config_new(&c) != 0)
                tap_bail("relay_inbox_config_new failed");
        return c;
}

static int set(relay_inbox_config_t *c, const char *arg)
{
        return relay_inbox_config_set_arg(c, arg, err, sizeof(err));
}

static const char *kafka(const relay_inbox_config_t *c, const char *name)
{
        for (size_t i = 0; i < c->kafka.n; i++)
                if (strcmp(c->kafka.k[i], name) == 0)
                        return c->kafka.v[i];
        return NULL;
}

/* The server's state, not the message: no attempt counted, no dead letter. */
static void test_server_unable(void)
{
        static const char *const server[] = {"25006", "57P01", "57P03", "08006", "08000",
                                             "53100", "58030"};
        static const char *const message[] = {"23505", "22P02", "42883", "40001", "40P01",
                                              "57014", "53200", "P0001", "XX000", "2500",
                                              "58P01", "58P02"};
        for (size_t i = 0; i < sizeof(server) / sizeof(*server); i++)
                ok(relay_inbox_server_unable(server[i]), "SQLSTATE %s is the server's", server[i]);
        for (size_t i = 0; i < sizeof(message) / sizeof(*message); i++)
                ok(!relay_inbox_server_unable(message[i]), "SQLSTATE %s counts against the message",
                   message[i]);
        ok(!relay_inbox_server_unable(NULL), "no SQLSTATE: not the server's state");
}

static void test_config(void)
{
        relay_inbox_config_t *c = fresh();

        is_int(c->payload, RELAY_INBOX_PAYLOAD_JSONB, "payload defaults to jsonb");
        is_int((int)c->errors_retries, 3, "3 retries by default");
        is_str(c->errors_dlq_topic, "outbox.inbox.dlq", "dead-letter topic default");
        is_str(kafka(c, "isolation.level"), "read_committed", "read_committed is set");
        is_str(kafka(c, "enable.auto.commit"), "false", "auto commit is off");
        is_str(kafka(c, "group.id"), "outbox-inbox", "default group");

        is_int(relay_inbox_config_validate(c, err, sizeof(err)), RELAY_EINVAL,
               "bootstrap servers are required");
        ok(strstr(err, "kafka.bootstrap.servers") != NULL, "named: %s", err);
        is_int(set(c, "kafka.bootstrap.servers=k:9092"), 0, "bootstrap servers set");
        is_int(relay_inbox_config_validate(c, err, sizeof(err)), RELAY_EINVAL, "topics required");
        ok(strstr(err, "inbox.topics") != NULL, "named: %s", err);
        is_int(set(c, "inbox.topics= a , b,,"), 0, "topics set");
        is_int((int)c->n_topics, 2, "two topics, blanks and empty items dropped");
        is_str(c->topics[1], "b", "second topic trimmed");
        is_int(relay_inbox_config_validate(c, err, sizeof(err)), RELAY_EINVAL, "handler required");
        ok(strstr(err, "inbox.handler") != NULL, "named: %s", err);
        is_int(set(c, "inbox.handler=SELECT f($3)"), 0, "handler set");
        is_int(relay_inbox_config_validate(c, err, sizeof(err)), 0, "a complete configuration");

        is_int(set(c, "errors.dlq.topic=b"), 0, "dlq topic set");
        is_int(relay_inbox_config_validate(c, err, sizeof(err)), RELAY_EINVAL,
               "a dead-letter topic that is also consumed is refused");
        ok(strstr(err, "errors.dlq.topic") != NULL, "named: %s", err);
        /* Found out at start, not at the first failing message (exit 4 then,
         * on every restart: "Broker: Invalid topic"). */
        is_int(set(c, "errors.dlq.topic=my dlq"), 0, "dlq topic set");
        is_int(relay_inbox_config_validate(c, err, sizeof(err)), RELAY_EINVAL,
               "a dead-letter topic that is not a Kafka topic name is refused");
        ok(strstr(err, "errors.dlq.topic") && strstr(err, "\"my dlq\""),
           "the key and the value are named: %s", err);
        is_int(set(c, "errors.dlq.topic=b"), 0, "dlq topic set");
        is_int(set(c, "errors.policy=stop"), 0, "policy stop");
        is_int(relay_inbox_config_validate(c, err, sizeof(err)), 0,
               "with errors.policy=stop the dead-letter topic does not matter");

        /* librdkafka subscribes to a "^" topic as a regular expression: one
         * that takes in the dead-letter topic would bring each failing
         * message back from it, forever. */
        is_int(set(c, "errors.policy=dlq"), 0, "policy dlq");
        is_int(set(c, "errors.dlq.topic=outbox.inbox.dlq"), 0, "the default dlq topic");
        is_int(set(c, "inbox.topics=^outbox\\..*"), 0, "a regular expression subscription");
        is_int(relay_inbox_config_validate(c, err, sizeof(err)), RELAY_EINVAL,
               "a pattern in inbox.topics that matches the dead-letter topic is refused");
        ok(strstr(err, "\"outbox.inbox.dlq\"") && strstr(err, "^outbox\\..*"),
           "the topic and the pattern are named: %s", err);
        is_int(set(c, "inbox.topics=^outbox\\.event\\..*"), 0, "a narrower pattern");
        is_int(relay_inbox_config_validate(c, err, sizeof(err)), 0,
               "a pattern that does not match the dead-letter topic is accepted: %s", err);

        is_int(set(c, "kafka.enable.auto.commit=true"), RELAY_EINVAL, "auto commit refused");
        ok(strstr(err, "enable.auto.commit") != NULL, "named: %s", err);
        is_int(set(c, "kafka.isolation.level=read_uncommitted"), RELAY_EINVAL,
               "read_uncommitted refused");
        is_int(set(c, "kafka.isolation.level=read_committed"), 0, "the fixed value is accepted");
        /* librdkafka reads f and 0 in any case as false: the same setting. */
        is_int(set(c, "kafka.enable.auto.commit=FALSE"), 0, "auto commit FALSE accepted: %s", err);
        is_int(set(c, "kafka.enable.auto.commit=0"), 0, "auto commit 0 accepted: %s", err);
        is_int(set(c, "kafka.enable.auto.offset.store=f"), 0, "offset store f accepted: %s", err);
        is_int(set(c, "kafka.enable.auto.commit=1"), RELAY_EINVAL, "auto commit 1 refused");
        is_int(set(c, "kafka.enable.auto.commit=T"), RELAY_EINVAL, "auto commit T refused");
        is_int(set(c, "kafka.isolation.level=READ_COMMITTED"), 0,
               "READ_COMMITTED accepted, as librdkafka does: %s", err);
        /* The inbox's own words in any case, as outbox-relay's enums. */
        is_int(set(c, "errors.policy=STOP"), 0, "errors.policy=STOP accepted: %s", err);
        is_int((int)c->errors_policy, (int)RELAY_INBOX_ERRORS_STOP, "  as stop");
        is_int(set(c, "errors.policy=dlq"), 0, "policy dlq again");
        is_int(set(c, "kafka.no.such.thing=1"), RELAY_EINVAL, "unknown Kafka property refused");
        is_int(set(c, "inbox.payload=xml"), RELAY_EINVAL, "bad payload type refused");
        ok(strstr(err, "jsonb, text or bytea") != NULL, "the choices are named: %s", err);
        is_int(set(c, "inbox.payload=bytea"), 0, "bytea accepted");
        is_int(c->payload, RELAY_INBOX_PAYLOAD_BYTEA, "payload is bytea");
        is_int(set(c, "errors.retries=-1"), RELAY_EINVAL, "negative retries refused");
        is_int(set(c, "no.such.key=1"), RELAY_EINVAL, "unknown key refused");
        ok(strstr(err, "no.such.key") != NULL, "named: %s", err);
        is_int(set(c, "novalue"), RELAY_EINVAL, "--set without = refused");
        is_int(set(c, "errors.backoff.ms=5000"), 0, "backoff set");
        is_int(set(c, "errors.backoff.max.ms=100"), 0, "backoff max set");
        is_int(relay_inbox_config_validate(c, err, sizeof(err)), RELAY_EINVAL,
               "backoff max below backoff refused");

        char path[] = "/tmp/test_inbox_XXXXXX";
        int fd = mkstemp(path);
        FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (!f)
                tap_bail("could not create a temporary file");
        fputs("# comment\n\nlog.level = debug\n  inbox.id.header = event_id  \nbad line\n", f);
        fclose(f);
        is_int(relay_inbox_config_load_file(c, path, err, sizeof(err)), RELAY_EINVAL,
               "a line without = is refused");
        char want[600];
        snprintf(want, sizeof(want), "%s:5", path);
        ok(strstr(err, want) != NULL, "with its file and line: %s", err);
        is_str(c->id_header, "event_id", "the lines before it were applied, trimmed");
        is_int(c->log_level, RELAY_LOG_DEBUG, "log.level from the file");
        remove(path);

        /* Editors on some systems start UTF-8 files with a byte order mark;
         * as part of the first key it would be refused as a key that looks
         * right ("unrecognized configuration key "log.level""). */
        f = fopen(path, "w");
        if (!f)
                tap_bail("could not create a temporary file");
        fputs("\xef\xbb\xbflog.level = warning\n", f);
        fclose(f);
        err[0] = '\0';
        is_int(relay_inbox_config_load_file(c, path, err, sizeof(err)), 0,
               "a UTF-8 byte order mark before the first key is skipped (%s)", err);
        is_int(c->log_level, RELAY_LOG_WARNING, "the first line's key is read");
        remove(path);

        /* The relay's own file format (conffile.h): a double-quoted value
         * keeps a " #" inside; an unquoted one ends at a comment after a
         * blank, while "a#b" stays a value. The inbox read both literally. */
        f = fopen(path, "w");
        if (!f)
                tap_bail("could not create a temporary file");
        fputs("inbox.id.header = \"my # id\"  # quoted\ninbox.handler = SELECT on_event($1) # comment\n"
              "errors.dlq.topic = dlq#1\n",
              f);
        fclose(f);
        err[0] = '\0';
        is_int(relay_inbox_config_load_file(c, path, err, sizeof(err)), 0,
               "quotes and comments as in outbox-relay's --config (%s)", err);
        is_str(c->id_header, "my # id", "  a quoted value keeps \" # \"");
        is_str(c->handler, "SELECT on_event($1)", "  a comment after a blank ends a value");
        is_str(c->errors_dlq_topic, "dlq#1", "  \"#\" inside a value stays");
        remove(path);

        /* fopen() opens a directory for reading; the read fails (EISDIR). */
        is_int(relay_inbox_config_load_file(c, "/tmp", err, sizeof(err)), RELAY_EINVAL,
               "a directory as configuration file is refused, not read as empty");
        ok(strstr(err, "could not read configuration file \"/tmp\"") != NULL,
           "the message names the file and the reason: %s", err);
        relay_inbox_config_free(c);
        relay_inbox_config_free(NULL);
}

int main(void)
{
        test_map();
        test_server_unable();
        test_config();
        return done_testing();
}
