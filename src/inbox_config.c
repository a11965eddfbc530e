/*
 * inbox_config.c - outbox-inbox's key table, its file and --set parsing and
 * the kafka.* pass-through. Owns the typed configuration it fills.
 *
 * A table of its own rather than the relay's: a consumer shares no key with
 * the relay but postgres.conninfo and kafka.*, and the relay's --help,
 * manual and environment mapping should not list keys it ignores.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/inbox_config.h"

#include <errno.h>
#include <regex.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <librdkafka/rdkafka.h>

#include "relay/conffile.h"
#include "relay/names.h"

typedef enum { K_STR, K_INT, K_WORD, K_LIST } kind_t;

typedef struct {
        const char *name;
        const char *def;
        kind_t kind;
        size_t off;       /* of the field in relay_inbox_config_t */
        int64_t min, max; /* K_INT */
        const char *desc;
        const char *const *words; /* K_WORD: the enum's values in order, NULL-ended */
} key_t_;

/* K_WORD fields are enums; the parser stores the word's index as one. */
_Static_assert(sizeof(relay_inbox_payload_t) == sizeof(int) &&
                       sizeof(relay_inbox_policy_t) == sizeof(int) &&
                       sizeof(relay_log_level_t) == sizeof(int),
               "K_WORD fields must be int-sized enums");

/* In the order of their enums. */
static const char *const payload_words[] = {"jsonb", "text", "bytea", NULL};
static const char *const policy_words[] = {"dlq", "stop", NULL};
static const char *const level_words[] = {"debug", "info", "warning", "error", NULL};

#define F(f) offsetof(relay_inbox_config_t, f)

/* Alphabetical. */
static const key_t_ keys[] = {
        {.name = "errors.backoff.max.ms", .def = "30000", .kind = K_INT,
         .off = F(errors_backoff_max_ms), .min = 0, .max = 3600000,
         .desc = "longest wait between two attempts of a failing handler (doubling)"},
        {.name = "errors.backoff.ms", .def = "1000", .kind = K_INT, .off = F(errors_backoff_ms),
         .min = 0, .max = 3600000, .desc = "wait before the first retry of a failing handler"},
        {.name = "errors.dlq.topic", .def = "outbox.inbox.dlq", .kind = K_STR,
         .off = F(errors_dlq_topic),
         .desc = "dead-letter topic for messages whose handler still fails after the retries"},
        {.name = "errors.policy", .def = "dlq", .kind = K_WORD, .off = F(errors_policy),
         .words = policy_words,
         .desc = "after the retries: dlq (dead-letter the message and go on) or stop"},
        {.name = "errors.retries", .def = "3", .kind = K_INT, .off = F(errors_retries), .min = 0,
         .max = 1000000, .desc = "retries of a failing handler before the policy applies"},
        {.name = "inbox.handler", .def = "", .kind = K_STR, .off = F(handler),
         .desc = "SQL run for each new message, with $1 key (text), $2 headers (jsonb), $3 "
                 "payload (inbox.payload), $4 topic (text), $5 partition (integer), $6 offset "
                 "(bigint), $7 message id (text); required"},
        {.name = "inbox.id.header", .def = "id", .kind = K_STR, .off = F(id_header),
         .desc = "header holding the message id that inbox_accept() records"},
        {.name = "inbox.payload", .def = "jsonb", .kind = K_WORD, .off = F(payload),
         .words = payload_words, .desc = "type of $3: jsonb, text or bytea"},
        {.name = "inbox.topics", .def = "", .kind = K_LIST, .off = F(topics),
         .desc = "topics to consume, comma-separated (one starting with ^ is a regular "
                 "expression, which must not match errors.dlq.topic); required"},
        {.name = "log.level", .def = "info", .kind = K_WORD, .off = F(log_level),
         .words = level_words, .desc = "debug, info, warning or error"},
        {.name = "postgres.conninfo", .def = "", .kind = K_STR, .off = F(postgres_conninfo),
         .desc = "libpq connection string of the consumer's database (empty: PG* variables)"},
        {.name = "reconnect.backoff.max.ms", .def = "30000", .kind = K_INT,
         .off = F(reconnect_backoff_max_ms), .min = 10, .max = 3600000,
         .desc = "longest wait between reconnection attempts to PostgreSQL (doubling)"},
        {.name = "reconnect.backoff.ms", .def = "500", .kind = K_INT,
         .off = F(reconnect_backoff_ms), .min = 10, .max = 3600000,
         .desc = "first wait before reconnecting to PostgreSQL"},
};

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

/* kafka.* properties the guarantee rests on: the inbox sets them itself. */
static const struct {
        const char *name;
        const char *value;
        const char *why;
} fixed[] = {
        {"enable.auto.commit", "false",
         "the inbox commits an offset only after the message's PostgreSQL transaction"},
        {"enable.auto.offset.store", "false",
         "the inbox stores an offset only after the message's PostgreSQL transaction"},
        {"isolation.level", "read_committed",
         "messages of aborted Kafka transactions must never reach the handler"},
};

/* Defaults the user may change. */
static const struct {
        const char *name;
        const char *value;
} kdefaults[] = {
        {"group.id", "outbox-inbox"},
        {"auto.offset.reset", "earliest"},
        {"client.id", "outbox-inbox"},
};

static int set_kafka(relay_inbox_config_t *c, const char *name, const char *value, char *err,
                     size_t errlen)
{
        if (relay_pairs_set(&c->kafka, name, value))
                return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
        return 0;
}

static int parse_list(const char *value, char ***out, size_t *n_out)
{
        const char *p = value, *item;
        size_t len, n = 0;
        char **v = NULL;

        while (relay_list_next(&p, &item, &len)) {
                if (len == 0)
                        continue;
                char **nv = realloc(v, (n + 1) * sizeof(char *));
                if (!nv || !(nv[n] = relay_dupn(item, len))) {
                        relay_free_list(nv ? nv : v, n);
                        return RELAY_ENOMEM;
                }
                v = nv;
                n++;
        }
        *out = v;
        *n_out = n;
        return 0;
}

static int set_known(relay_inbox_config_t *c, const key_t_ *k, const char *value,
                     const char *origin, char *err, size_t errlen)
{
        char *base = (char *)c;

        switch (k->kind) {
        case K_STR: {
                char *v = strdup(value);
                if (!v)
                        return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
                char **field = (char **)(base + k->off);
                free(*field);
                *field = v;
                return 0;
        }
        case K_INT: {
                char *end;
                errno = 0;
                long long v = strtoll(value, &end, 10);
                if (errno != 0 || end == value || *end != '\0' || v < k->min || v > k->max) {
                        relay_err_set(err, errlen,
                                      "invalid value \"%s\" for \"%s\" (%s): an integer from %lld "
                                      "to %lld is expected",
                                      value, k->name, origin, (long long)k->min,
                                      (long long)k->max);
                        return RELAY_EINVAL;
                }
                *(int64_t *)(base + k->off) = v;
                return 0;
        }
        case K_WORD: {
                char use[256] = "";
                size_t n = 0;
                for (int i = 0; k->words[i]; i++) {
                        /* Any case, as outbox-relay's own enums. */
                        if (strcasecmp(value, k->words[i]) == 0) {
                                *(int *)(base + k->off) = i;
                                return 0;
                        }
                }
                while (k->words[n])
                        n++;
                for (size_t i = 0; i < n; i++)
                        snprintf(use + strlen(use), sizeof(use) - strlen(use), "%s%s",
                                 i == 0 ? "" : i + 1 == n ? " or " : ", ", k->words[i]);
                relay_err_set(err, errlen, "invalid value \"%s\" for \"%s\" (%s): use %s", value,
                              k->name, origin, use);
                return RELAY_EINVAL;
        }
        case K_LIST: {
                char **v;
                size_t n;
                if (parse_list(value, &v, &n) != 0)
                        return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
                relay_free_list(c->topics, c->n_topics);
                c->topics = v;
                c->n_topics = n;
                return 0;
        }
        }
        return RELAY_EINVAL;
}

int relay_inbox_config_set(relay_inbox_config_t *c, const char *key, const char *value,
                           const char *origin, char *err, size_t errlen)
{
        if (strncmp(key, "kafka.", 6) == 0 && key[6] != '\0') {
                const char *name = key + 6;
                /* A typo fails here, with its origin, not at consumer start. */
                rd_kafka_conf_t *scratch = rd_kafka_conf_new();
                char kerr[256];
                char canon[64];
                size_t clen = sizeof(canon);
                if (!scratch)
                        return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
                rd_kafka_conf_res_t res = rd_kafka_conf_set(scratch, name, value, kerr, sizeof(kerr));
                /* The value as librdkafka reads it (it takes f and 0 for false, any
                 * case): comparing what was written would refuse the same setting. */
                if (res == RD_KAFKA_CONF_OK &&
                    rd_kafka_conf_get(scratch, name, canon, &clen) != RD_KAFKA_CONF_OK)
                        canon[0] = '\0';
                rd_kafka_conf_destroy(scratch);
                if (res != RD_KAFKA_CONF_OK) {
                        relay_err_set(err, errlen, "invalid Kafka setting \"%s\" (%s): %s", key,
                                      origin, kerr);
                        return RELAY_EINVAL;
                }
                for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
                        if (strcmp(name, fixed[i].name) == 0 &&
                            strcmp(canon, fixed[i].value) != 0) {
                                relay_err_set(err, errlen,
                                              "\"%s\" cannot be \"%s\" (%s): %s; remove the "
                                              "setting",
                                              key, value, origin, fixed[i].why);
                                return RELAY_EINVAL;
                        }
                }
                return set_kafka(c, name, value, err, errlen);
        }
        for (size_t i = 0; i < NKEYS; i++)
                if (strcmp(keys[i].name, key) == 0)
                        return set_known(c, &keys[i], value, origin, err, errlen);
        relay_err_set(err, errlen,
                      "unrecognized configuration key \"%s\" (%s): see outbox-inbox --help for "
                      "the keys",
                      key, origin);
        return RELAY_EINVAL;
}

int relay_inbox_config_new(relay_inbox_config_t **out)
{
        relay_inbox_config_t *c = calloc(1, sizeof(*c));
        char err[RELAY_ERRBUF];

        if (!c)
                return RELAY_ENOMEM;
        for (size_t i = 0; i < NKEYS; i++) {
                if (set_known(c, &keys[i], keys[i].def, "default", err, sizeof(err)) != 0) {
                        relay_inbox_config_free(c);
                        return RELAY_ENOMEM;
                }
        }
        for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
                if (set_kafka(c, fixed[i].name, fixed[i].value, err, sizeof(err)) != 0)
                        goto oom;
        for (size_t i = 0; i < sizeof(kdefaults) / sizeof(kdefaults[0]); i++)
                if (set_kafka(c, kdefaults[i].name, kdefaults[i].value, err, sizeof(err)) != 0)
                        goto oom;
        *out = c;
        return 0;
oom:
        relay_inbox_config_free(c);
        return RELAY_ENOMEM;
}

void relay_inbox_config_free(relay_inbox_config_t *c)
{
        if (!c)
                return;
        relay_free_list(c->topics, c->n_topics);
        relay_pairs_free(&c->kafka);
        RELAY_FREE_ALL(c->postgres_conninfo, c->handler, c->id_header, c->errors_dlq_topic, c);
}

int relay_inbox_config_set_arg(relay_inbox_config_t *c, const char *arg, char *err, size_t errlen)
{
        const char *eq = strchr(arg, '=');
        if (!eq || eq == arg) {
                relay_err_set(err, errlen, "invalid --set argument \"%s\": use --set KEY=VALUE",
                              arg);
                return RELAY_EINVAL;
        }
        char *key = relay_dupn(arg, (size_t)(eq - arg));
        if (!key)
                return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
        int rc = relay_inbox_config_set(c, key, eq + 1, "--set", err, errlen);
        free(key);
        return rc;
}

static int set_from_file(void *ctx, const char *key, const char *value, const char *origin,
                         char *err, size_t errlen)
{
        return relay_inbox_config_set(ctx, key, value, origin, err, errlen);
}

int relay_inbox_config_load_file(relay_inbox_config_t *c, const char *path, char *err,
                                 size_t errlen)
{
        return relay_conffile_load(path, set_from_file, c, err, errlen);
}

/*
 * A "^" subscription takes in topic, as librdkafka matches it (rdregex.c:
 * regcomp() with REG_EXTENDED | REG_NOSUB, regexec() anywhere in the name).
 * A pattern that does not compile is librdkafka's to report at subscribe.
 */
static bool pattern_takes(const char *sub, const char *topic)
{
        regex_t re;
        if (sub[0] != '^' || regcomp(&re, sub, REG_EXTENDED | REG_NOSUB) != 0)
                return false;
        bool hit = regexec(&re, topic, 0, NULL, 0) == 0;
        regfree(&re);
        return hit;
}

int relay_inbox_config_validate(const relay_inbox_config_t *c, char *err, size_t errlen)
{
        const char *bs = relay_pairs_get(&c->kafka, "bootstrap.servers");
        if (!bs || !*bs) {
                relay_err_set(err, errlen,
                              "\"kafka.bootstrap.servers\" is not set: name the Kafka brokers, "
                              "e.g. --set kafka.bootstrap.servers=kafka:9092");
                return RELAY_EINVAL;
        }
        if (c->n_topics == 0) {
                relay_err_set(err, errlen,
                              "\"inbox.topics\" is not set: name the topics to consume, "
                              "comma-separated");
                return RELAY_EINVAL;
        }
        if (!*c->handler) {
                relay_err_set(err, errlen,
                              "\"inbox.handler\" is not set: give the SQL to run for each new "
                              "message, e.g. SELECT my_handler($1, $2, $3)");
                return RELAY_EINVAL;
        }
        if (!*c->id_header) {
                relay_err_set(err, errlen, "\"inbox.id.header\" is empty: name the header that "
                                           "holds the message id");
                return RELAY_EINVAL;
        }
        if (c->errors_policy == RELAY_INBOX_ERRORS_DLQ) {
                if (!*c->errors_dlq_topic) {
                        relay_err_set(err, errlen, "\"errors.dlq.topic\" is empty: name the "
                                                   "dead-letter topic or set errors.policy=stop");
                        return RELAY_EINVAL;
                }
                if (!relay_names_is_topic(c->errors_dlq_topic, strlen(c->errors_dlq_topic))) {
                        relay_err_set(err, errlen,
                                      "invalid value \"%s\" for \"errors.dlq.topic\": a Kafka "
                                      "topic name is " RELAY_NAMES_TOPIC_RULE,
                                      c->errors_dlq_topic);
                        return RELAY_EINVAL;
                }
                for (size_t i = 0; i < c->n_topics; i++) {
                        if (pattern_takes(c->topics[i], c->errors_dlq_topic)) {
                                relay_err_set(err, errlen,
                                              "the dead-letter topic \"%s\" matches the pattern "
                                              "\"%s\" in \"inbox.topics\" (librdkafka subscribes "
                                              "to a topic starting with ^ as a regular "
                                              "expression): a failing message would come back "
                                              "forever; narrow the pattern or use another "
                                              "errors.dlq.topic",
                                              c->errors_dlq_topic, c->topics[i]);
                                return RELAY_EINVAL;
                        }
                        if (strcmp(c->topics[i], c->errors_dlq_topic) == 0) {
                                relay_err_set(err, errlen,
                                              "the dead-letter topic \"%s\" is also in "
                                              "\"inbox.topics\": a failing message would come "
                                              "back forever; use another errors.dlq.topic",
                                              c->errors_dlq_topic);
                                return RELAY_EINVAL;
                        }
                }
        }
        if (c->errors_backoff_max_ms < c->errors_backoff_ms) {
                relay_err_set(err, errlen,
                              "\"errors.backoff.max.ms\" (%lld) is below \"errors.backoff.ms\" "
                              "(%lld): raise it",
                              (long long)c->errors_backoff_max_ms, (long long)c->errors_backoff_ms);
                return RELAY_EINVAL;
        }
        if (c->reconnect_backoff_max_ms < c->reconnect_backoff_ms) {
                relay_err_set(err, errlen,
                              "\"reconnect.backoff.max.ms\" (%lld) is below "
                              "\"reconnect.backoff.ms\" (%lld): raise it",
                              (long long)c->reconnect_backoff_max_ms,
                              (long long)c->reconnect_backoff_ms);
                return RELAY_EINVAL;
        }
        return 0;
}

void relay_inbox_config_print_help(FILE *out)
{
        fprintf(out, "Keys (--set KEY=VALUE or \"key = value\" lines in the --config file):\n");
        for (size_t i = 0; i < NKEYS; i++)
                fprintf(out, "  %-26s %s (default: %s)\n", keys[i].name, keys[i].desc,
                        *keys[i].def ? keys[i].def : "none");
        fprintf(out, "  %-26s any librdkafka consumer property (kafka.bootstrap.servers is "
                     "required;\n  %-26s defaults: group.id=outbox-inbox, "
                     "auto.offset.reset=earliest)\n",
                "kafka.<property>", "");
        fprintf(out, "Fixed (a different value is refused):");
        for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
                fprintf(out, " kafka.%s=%s", fixed[i].name, fixed[i].value);
        fprintf(out, "\n");
}

bool relay_inbox_config_keydoc(size_t i, relay_inbox_keydoc_t *out)
{
        if (i >= NKEYS)
                return false;
        *out = (relay_inbox_keydoc_t){keys[i].name, keys[i].def, keys[i].desc};
        return true;
}

bool relay_inbox_config_fixed(size_t i, const char **name, const char **value, const char **why)
{
        if (i >= sizeof(fixed) / sizeof(fixed[0]))
                return false;
        *name = fixed[i].name;
        *value = fixed[i].value;
        *why = fixed[i].why;
        return true;
}
