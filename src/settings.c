/*
 * settings.c - turns the layered configuration into typed settings, once.
 *
 * The only code besides config.c that reads keys by name: each key is read
 * here and converted (enums, booleans, milliseconds, the table name, the
 * column lists, the topic template), so a renamed key is one edit and a
 * typo in a key name fails every test at the first load, not some day in
 * the field. Values arrive already checked by config.c; a conversion that
 * still fails means the configuration was built some other way, and is
 * reported as the bad value it is.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/settings.h"

#include <stdlib.h>
#include <string.h>

/* Reading state: the first failure wins, later reads become no-ops. */
typedef struct {
        const relay_config_t *cfg;
        int rc;
        char *err;
        size_t errlen;
} reader_t;

static void fail(reader_t *r, int rc, const char *key, const char *value, const char *why)
{
        if (r->rc != 0)
                return;
        r->rc = rc;
        if (rc == RELAY_ENOMEM)
                relay_err_set(r->err, r->errlen, "out of memory");
        else
                relay_err_set(r->err, r->errlen, "invalid value \"%s\" for \"%s\": %s", value, key,
                              why);
}

/* The value of a key the table must have; NULL (and the failure recorded) otherwise. */
static const char *get(reader_t *r, const char *key)
{
        const char *v = relay_config_get(r->cfg, key);

        if (v == NULL && r->rc == 0) {
                r->rc = RELAY_EINVAL;
                relay_err_set(r->err, r->errlen,
                              "internal error: configuration key \"%s\" is not in the key table",
                              key);
        }
        return v;
}

static char *str(reader_t *r, const char *key)
{
        const char *v = get(r, key);
        char *d;

        if (v == NULL)
                return NULL;
        if ((d = strdup(v)) == NULL)
                fail(r, RELAY_ENOMEM, key, v, NULL);
        return d;
}

/* The index of the value in choices (NULL-terminated), or 0 and a failure. */
static int choice(reader_t *r, const char *key, const char *const *choices, const char *rule)
{
        const char *v = get(r, key);

        if (v == NULL)
                return 0;
        for (int i = 0; choices[i] != NULL; i++)
                if (strcmp(v, choices[i]) == 0)
                        return i;
        fail(r, RELAY_EINVAL, key, v, rule);
        return 0;
}

static bool boolean(reader_t *r, const char *key)
{
        static const char *const choices[] = {"false", "true", NULL};

        return choice(r, key, choices, "must be true or false") == 1;
}

/*
 * A comma-separated list as an array of strings, blanks trimmed and empty
 * items dropped ("a, ,b" is a and b).
 */
static char **list(reader_t *r, const char *key, size_t *count)
{
        const char *v = get(r, key), *p, *item;
        char **items = NULL;
        size_t n = 0, len;

        *count = 0;
        if (v == NULL)
                return NULL;
        p = v;
        while (relay_list_next(&p, &item, &len)) {
                char **grown;
                if (len == 0)
                        continue;
                grown = realloc(items, (n + 1) * sizeof(*items));
                if (grown == NULL || (grown[n] = relay_dupn(item, len)) == NULL) {
                        items = grown != NULL ? grown : items;
                        while (n > 0)
                                free(items[--n]);
                        free(items);
                        fail(r, RELAY_ENOMEM, key, v, NULL);
                        return NULL;
                }
                items = grown;
                n++;
        }
        *count = n;
        return items;
}

static void table(reader_t *r, const char *key, relay_table_name_t *out)
{
        const char *v = get(r, key);
        char why[RELAY_ERRBUF];
        int rc;

        if (v != NULL && r->rc == 0 && (rc = relay_names_parse_table(v, out, why, sizeof(why))) != 0)
                fail(r, rc, key, v, why);
}

static void template(reader_t *r, const char *key, relay_topic_template_t *out)
{
        const char *v = get(r, key);
        char why[RELAY_ERRBUF];
        int rc;

        if (v != NULL && r->rc == 0 &&
            (rc = relay_names_parse_template(v, out, why, sizeof(why))) != 0)
                fail(r, rc, key, v, why);
}

static void free_list(char **items, size_t n)
{
        for (size_t i = 0; i < n; i++)
                free(items[i]);
        free(items);
}

void relay_settings_free(relay_settings_t *s)
{
        if (s == NULL)
                return;
        free(s->postgres_conninfo);
        free(s->kafka_bootstrap_servers);
        free(s->slot_name);
        free(s->publication_name);
        relay_names_table_free(&s->outbox_table);
        free(s->outbox_column.id);
        free(s->outbox_column.aggregate_type);
        free(s->outbox_column.aggregate_id);
        free(s->outbox_column.type);
        free(s->outbox_column.payload);
        free_list(s->outbox_headers, s->n_outbox_headers);
        relay_names_template_free(&s->topic_template);
        free(s->errors_dlq_topic);
        free(s->eos_transactional_id);
        free(s->eos_checkpoint_topic);
        free_list(s->errors_skip_ids, s->n_errors_skip_ids);
        free(s);
}

int relay_settings_load(relay_settings_t **out, const relay_config_t *cfg, char *err,
                        size_t errlen)
{
        /* In relay_log_level_t and relay_errors_policy_t order. */
        static const char *const levels[] = {"debug", "info", "warning", "error", NULL};
        static const char *const formats[] = {"text", "json", NULL};
        static const char *const policies[] = {"dlq", "stop", NULL};
        reader_t r = {cfg, 0, err, errlen};
        relay_settings_t *s = calloc(1, sizeof(*s));

        if (s == NULL) {
                relay_err_set(err, errlen, "out of memory");
                return RELAY_ENOMEM;
        }
        s->postgres_conninfo = str(&r, "postgres.conninfo");
        s->kafka_bootstrap_servers = str(&r, "kafka.bootstrap.servers");
        s->slot_name = str(&r, "slot.name");
        s->slot_recreate = boolean(&r, "slot.recreate");
        s->publication_name = str(&r, "publication.name");

        table(&r, "outbox.table", &s->outbox_table);
        s->outbox_column.id = str(&r, "outbox.column.id");
        s->outbox_column.aggregate_type = str(&r, "outbox.column.aggregate_type");
        s->outbox_column.aggregate_id = str(&r, "outbox.column.aggregate_id");
        s->outbox_column.type = str(&r, "outbox.column.type");
        s->outbox_column.payload = str(&r, "outbox.column.payload");
        s->outbox_headers = list(&r, "outbox.headers", &s->n_outbox_headers);
        template(&r, "topic.template", &s->topic_template);

        s->errors_policy = (relay_errors_policy_t)choice(&r, "errors.policy", policies,
                                                         "must be dlq or stop");
        s->errors_retries = relay_config_get_int(cfg, "errors.retries");
        s->errors_backoff_ms = relay_config_get_int(cfg, "errors.backoff.ms");
        s->errors_backoff_max_ms = relay_config_get_int(cfg, "errors.backoff.max.ms");
        s->errors_dlq_topic = str(&r, "errors.dlq.topic");
        s->errors_skip_ids = list(&r, "errors.skip.ids", &s->n_errors_skip_ids);

        s->unsafe_allow_pipelining = boolean(&r, "delivery.unsafe.allow.pipelining");
        {
                static const char *const modes[] = {"at-least-once", "exactly-once", NULL};
                s->exactly_once = choice(&r, "delivery.mode", modes,
                                         "must be at-least-once or exactly-once") == 1;
        }
        s->eos_transactional_id = str(&r, "eos.transactional.id");
        s->eos_commit_interval_ms = relay_config_get_int(cfg, "eos.commit.interval.ms");
        s->eos_checkpoint_topic = str(&r, "eos.checkpoint.topic");

        s->status_interval_ms = relay_config_get_int(cfg, "status.interval.ms");
        s->shutdown_timeout_ms = relay_config_get_int(cfg, "shutdown.timeout.ms");
        s->reconnect_backoff_ms = relay_config_get_int(cfg, "reconnect.backoff.ms");
        s->reconnect_backoff_max_ms = relay_config_get_int(cfg, "reconnect.backoff.max.ms");

        s->log_level = (relay_log_level_t)choice(&r, "log.level", levels,
                                                 "must be debug, info, warning or error");
        s->log_format = (relay_log_format_t)choice(&r, "log.format", formats,
                                                   "must be text or json");

        if (r.rc != 0) {
                relay_settings_free(s);
                return r.rc;
        }
        *out = s;
        return 0;
}
