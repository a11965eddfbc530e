/*
 * workload.c - writers and checker behind workload.h.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "workload.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static const char *const aggtypes[H_WORKLOAD_TYPES] = {"order", "customer"};

typedef struct {
        const h_workload_conf_t *conf;
        int id;
        int target;
        atomic_int committed;
        int rolled_back;
        char err[512];
        pthread_t th;
} writer_t;

struct h_workload {
        int n;
        writer_t *w;
};

static unsigned next_rand(unsigned *s)
{
        *s = *s * 1103515245u + 12345u;
        return (*s >> 8) & 0xffffff;
}

static int cmp_int(const void *a, const void *b)
{
        return *(const int *)a - *(const int *)b;
}

const char *h_workload_topic(const h_workload_conf_t *conf, int i, char *buf, size_t len)
{
        snprintf(buf, len, "outbox.event.%s_%s", aggtypes[i], conf->suffix);
        return buf;
}

void h_workload_setup_tables(PGconn *c, const h_workload_conf_t *conf)
{
        h_pg_create_outbox(c, "outbox");
        h_pg_exec(c, "CREATE TABLE aggregates (id int PRIMARY KEY, version int NOT NULL DEFAULT 0)");
        h_pg_exec(c, "INSERT INTO aggregates (id) SELECT g FROM generate_series(0, %d) g",
                  conf->aggregates - 1);
        h_pg_exec(c, "CREATE TABLE noise (id bigserial PRIMARY KEY, v text)");
}

void h_workload_setup(PGconn *c, const h_workload_conf_t *conf)
{
        char topic[256];
        h_workload_setup_tables(c, conf);
        for (int t = 0; t < H_WORKLOAD_TYPES; t++)
                h_kafka_create_topic(h_workload_topic(conf, t, topic, sizeof(topic)),
                                     conf->partitions > 0 ? conf->partitions : 4);
}

static int exec_ok(PGconn *c, const char *sql, char *err, size_t errlen)
{
        PGresult *r = PQexec(c, sql);
        int good = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
        if (!good)
                snprintf(err, errlen, "%.100s: %.300s", sql, PQerrorMessage(c));
        PQclear(r);
        return good;
}

void h_workload_event_sql(char *sql, size_t len, const char *suffix, int agg, int writer)
{
        int t = agg % H_WORKLOAD_TYPES;
        /* The payload repeats the row's id: h_workload_verify() compares
         * the id header with it. */
        snprintf(sql, len,
                 "WITH v AS (UPDATE aggregates SET version = version + 1 WHERE id = %d RETURNING "
                 "version), u AS (SELECT gen_random_uuid() AS id) INSERT INTO outbox (id, "
                 "aggregatetype, aggregateid, type, payload) SELECT u.id, '%s_%s', 'agg-%d', "
                 "'%sEvent', jsonb_build_object('agg', %d, 'v', v.version, 'w', %d, 'id', u.id, "
                 "'pad', repeat('x', 150)) FROM v, u RETURNING id",
                 agg, aggtypes[t], suffix, agg, aggtypes[t], agg, writer);
}

static int add_event(PGconn *c, writer_t *w, int agg, int del)
{
        char sql[1024];
        h_workload_event_sql(sql, sizeof(sql), w->conf->suffix, agg, w->id);
        PGresult *r = PQexec(c, sql);
        if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
                snprintf(w->err, sizeof(w->err), "insert: %.400s", PQerrorMessage(c));
                PQclear(r);
                return 0;
        }
        if (del) {
                snprintf(sql, sizeof(sql), "DELETE FROM outbox WHERE id = '%s'", PQgetvalue(r, 0, 0));
                PQclear(r);
                return exec_ok(c, sql, w->err, sizeof(w->err));
        }
        PQclear(r);
        return 1;
}

static void *writer_main(void *arg)
{
        writer_t *w = arg;
        const h_workload_conf_t *conf = w->conf;
        PGconn *c = h_pg_connect(conf->db);
        unsigned seed = 7919u * (unsigned)(w->id + 1);
        char *err = w->err;
        size_t errlen = sizeof(w->err);
        int max_txn = conf->max_txn > 0 ? conf->max_txn : 1;

        while (atomic_load(&w->committed) < w->target) {
                int left = w->target - atomic_load(&w->committed);
                int n = 1 + (int)(next_rand(&seed) % (unsigned)max_txn);
                if (n > left)
                        n = left;
                int fate = conf->rollbacks ? (int)(next_rand(&seed) % 10) : 9;
                int aggs[256];
                if (n > 256)
                        n = 256;
                for (int i = 0; i < n; i++)
                        aggs[i] = (int)(next_rand(&seed) % (unsigned)conf->aggregates);
                /* Lock aggregates in id order: writers never deadlock. */
                qsort(aggs, (size_t)n, sizeof(int), cmp_int);

                if (!exec_ok(c, "BEGIN", err, errlen))
                        goto fail;
                if (conf->noise && next_rand(&seed) % 3 == 0 &&
                    !exec_ok(c, "INSERT INTO noise (v) SELECT md5(random()::text) FROM "
                                "generate_series(1, 5)",
                             err, errlen))
                        goto fail;
                int kept = 0;
                int sp_at = fate == 1 ? n / 2 : -1;
                for (int i = 0; i < n; i++) {
                        if (i == sp_at && !exec_ok(c, "SAVEPOINT sp", err, errlen))
                                goto fail;
                        int del = conf->deletes && next_rand(&seed) % 5 == 0;
                        if (!add_event(c, w, aggs[i], del))
                                goto fail;
                        if (sp_at < 0 || i < sp_at)
                                kept++;
                }
                if (sp_at >= 0 && !exec_ok(c, "ROLLBACK TO SAVEPOINT sp", err, errlen))
                        goto fail;
                if (fate == 0) {
                        if (!exec_ok(c, "ROLLBACK", err, errlen))
                                goto fail;
                        w->rolled_back += n;
                        continue;
                }
                if (!exec_ok(c, "COMMIT", err, errlen))
                        goto fail;
                atomic_fetch_add(&w->committed, kept);
                w->rolled_back += n - kept;
                if (conf->noise && next_rand(&seed) % 4 == 0 &&
                    !exec_ok(c, "INSERT INTO noise (v) VALUES ('between')", err, errlen))
                        goto fail;
                if (conf->pause_ms > 0)
                        h_sleep_ms(conf->pause_ms);
        }
        PQfinish(c);
        return NULL;
fail:
        PQfinish(c);
        return w;
}

h_workload_t *h_workload_start(const h_workload_conf_t *conf)
{
        h_workload_t *wl = calloc(1, sizeof(*wl));
        if (!wl)
                tap_bail("out of memory");
        wl->n = conf->writers;
        wl->w = calloc((size_t)wl->n, sizeof(writer_t));
        if (!wl->w)
                tap_bail("out of memory");
        for (int i = 0; i < wl->n; i++) {
                writer_t *w = &wl->w[i];
                w->conf = conf;
                w->id = i;
                w->target = conf->events / wl->n + (i < conf->events % wl->n ? 1 : 0);
                atomic_init(&w->committed, 0);
                if (pthread_create(&w->th, NULL, writer_main, w) != 0)
                        tap_bail("could not start writer thread");
        }
        return wl;
}

int h_workload_committed(h_workload_t *wl)
{
        int n = 0;
        for (int i = 0; i < wl->n; i++)
                n += atomic_load(&wl->w[i].committed);
        return n;
}

int h_workload_wait(h_workload_t *wl, int *committed, int *rolled_back)
{
        int failed = 0, c = 0, rb = 0;
        for (int i = 0; i < wl->n; i++) {
                void *rv;
                pthread_join(wl->w[i].th, &rv);
                if (rv) {
                        failed++;
                        tap_diag("writer %d: %s", i, wl->w[i].err);
                }
                c += atomic_load(&wl->w[i].committed);
                rb += wl->w[i].rolled_back;
        }
        if (committed)
                *committed = c;
        if (rolled_back)
                *rolled_back = rb;
        free(wl->w);
        free(wl);
        return failed;
}

long long h_workload_count(const h_workload_conf_t *conf)
{
        char topic[256];
        long long n = 0;
        for (int t = 0; t < H_WORKLOAD_TYPES; t++)
                n += h_kafka_count(h_workload_topic(conf, t, topic, sizeof(topic)));
        return n;
}

long long h_workload_wait_count(const h_workload_conf_t *conf, long long n, int timeout_ms)
{
        int64_t deadline = h_now_ms() + timeout_ms;
        long long got = h_workload_count(conf);
        while (got < n && h_now_ms() < deadline) {
                h_sleep_ms(200);
                got = h_workload_count(conf);
        }
        return got;
}

void h_workload_verify(PGconn *c, const h_workload_conf_t *conf, h_verify_t *out)
{
        int na = conf->aggregates;
        int *want = calloc((size_t)na, sizeof(int));
        int *maxv = calloc((size_t)na, sizeof(int));
        int *part = malloc((size_t)na * sizeof(int));
        char **seen = calloc((size_t)na, sizeof(char *)); /* per aggregate: versions seen */
        char topic[256];

        if (!want || !maxv || !part || !seen)
                tap_bail("out of memory");
        memset(out, 0, sizeof(*out));
        for (int a = 0; a < na; a++)
                part[a] = -1;
        PGresult *r = PQexec(c, "SELECT id, version FROM aggregates");
        if (PQresultStatus(r) != PGRES_TUPLES_OK)
                tap_bail("could not read aggregates: %s", PQerrorMessage(c));
        for (int i = 0; i < PQntuples(r); i++) {
                int a = atoi(PQgetvalue(r, i, 0));
                if (a >= 0 && a < na) {
                        want[a] = atoi(PQgetvalue(r, i, 1));
                        out->expected += (size_t)want[a];
                }
        }
        PQclear(r);
        for (int a = 0; a < na; a++)
                if (!(seen[a] = calloc((size_t)want[a] + 1, 1)))
                        tap_bail("out of memory");

        for (int t = 0; t < H_WORKLOAD_TYPES; t++) {
                h_msg_t *msgs;
                size_t n = h_kafka_consume_all(h_workload_topic(conf, t, topic, sizeof(topic)), &msgs);
                out->messages += n;
                for (size_t i = 0; i < n; i++) {
                        const h_msg_t *m = &msgs[i];
                        json_error_t je;
                        json_t *j = json_loadb(m->value ? m->value : "", m->value_len, 0, &je);
                        int agg = -1, v = -1, wr = -1;
                        const char *pid = NULL; /* the row's id, which the payload repeats */
                        if (!j ||
                            json_unpack(j, "{s:i, s:i, s:i, s:s}", "agg", &agg, "v", &v, "w", &wr,
                                        "id", &pid) != 0 ||
                            agg < 0 || agg >= na) {
                                out->bad_value++;
                                json_decref(j);
                                continue;
                        }
                        char want_id[64];
                        snprintf(want_id, sizeof(want_id), "%s", pid);
                        json_decref(j);
                        char want_key[32], want_type[64];
                        snprintf(want_key, sizeof(want_key), "agg-%d", agg);
                        if (!m->key || strcmp(m->key, want_key) != 0 || agg % H_WORKLOAD_TYPES != t)
                                out->bad_key++;
                        if (part[agg] < 0)
                                part[agg] = m->partition;
                        else if (part[agg] != m->partition)
                                out->bad_partition++;
                        size_t hl;
                        const char *hid = h_msg_header(m, "id", &hl);
                        const char *htype = h_msg_header(m, "type", &hl);
                        snprintf(want_type, sizeof(want_type), "%sEvent", aggtypes[t]);
                        if (!hid || strcmp(hid, want_id) != 0 || !htype ||
                            strcmp(htype, want_type) != 0)
                                out->bad_headers++;
                        /* Partition order per aggregate: each committed version's
                         * first occurrence must come after those of the versions
                         * before it; a version seen before is a resend. A version
                         * that never arrives is missing, not out of order. */
                        if (v < 1 || v > want[agg]) {
                                out->bad_value++; /* never committed */
                        } else if (seen[agg][v]) {
                                out->duplicates++;
                        } else {
                                seen[agg][v] = 1;
                                if (v < maxv[agg]) {
                                        if (out->out_of_order < 5)
                                                tap_diag("aggregate %d: version %d after %d",
                                                         agg, v, maxv[agg]);
                                        out->out_of_order++;
                                } else {
                                        maxv[agg] = v;
                                }
                        }
                }
                h_msgs_free(msgs, n);
        }
        for (int a = 0; a < na; a++) {
                for (int v = 1; v <= want[a]; v++) {
                        if (!seen[a][v]) {
                                if (out->missing < 5)
                                        tap_diag("aggregate %d: version %d of %d never arrived", a,
                                                 v, want[a]);
                                out->missing++;
                        }
                }
                free(seen[a]);
        }
        free(seen);
        free(want);
        free(maxv);
        free(part);
}

void h_workload_diag(const h_verify_t *v)
{
        tap_diag("kafka: %zu messages for %zu committed events: %zu duplicates, %zu missing, %zu out "
                 "of order, %zu bad keys, %zu split aggregates, %zu bad headers, %zu bad values",
                 v->messages, v->expected, v->duplicates, v->missing, v->out_of_order, v->bad_key,
                 v->bad_partition, v->bad_headers, v->bad_value);
}
