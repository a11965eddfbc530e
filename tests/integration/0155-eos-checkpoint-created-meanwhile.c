/*
 * 0155-eos-checkpoint-created-meanwhile.c - the exactly-once checkpoint
 * topic created by someone else between the reader's metadata request and
 * its CreateTopics (another relay sharing the topic, an operator), with a
 * checkpoint of ours already in it.
 *
 * checkpoint.c asks for the topic's metadata; when the broker says it does
 * not exist, it creates it. If the topic appears in between, CreateTopics
 * answers TOPIC_ALREADY_EXISTS: the topic is there and may hold our
 * checkpoint. The reader took that answer for a topic of its own making,
 * which holds none, so the session began at the slot's position and sent
 * again the events of every Kafka transaction committed after it.
 *
 * The window is made deterministic against the real broker without
 * touching the relay: the reader's librdkafka debug lines reach the relay's
 * log sink (fwrite() on stderr) on the thread that parses the metadata
 * answer, and this test's stderr is a stream of its own whose write
 * function, on the line that shows the application's metadata request
 * answered "Unknown topic or partition", creates the topic and commits a
 * checkpoint record into it before that thread goes on. What the broker
 * answered is decided by then; what comes next is the reader's CreateTopics.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#define _GNU_SOURCE
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "relay/checkpoint.h"
#include "relay/config.h"
#include "relay/log.h"
#include "relay/lsn.h"

/* The checkpoint the other party commits: what the read must find. */
#define THEIRS "0/ABCDEF0"

static FILE *real_stderr;
static rd_kafka_t *other; /* transactional, initialised before the read */
static const char *topic, *key;
static char line[4096];
static size_t linelen;
static pthread_t answering; /* the thread that logged the application's answer */
static bool answer_seen, created;
static char create_err[1024];

static void quiet(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
        (void)rk;
        (void)level;
        (void)fac;
        (void)buf;
}

/* The other party: creates the topic as the relay would (compacted, one
 * partition) and commits our key's checkpoint into it. Runs on the reader's
 * librdkafka thread, which waits for it. */
static void create_meanwhile(void)
{
        char es[512];
        rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(topic, 1, -1, es, sizeof(es));
        rd_kafka_AdminOptions_t *opt = rd_kafka_AdminOptions_new(other, RD_KAFKA_ADMIN_OP_CREATETOPICS);
        rd_kafka_queue_t *q = rd_kafka_queue_new(other);
        rd_kafka_event_t *ev = NULL;

        if (!nt || !opt || !q || rd_kafka_NewTopic_set_config(nt, "cleanup.policy", "compact") ||
            rd_kafka_AdminOptions_set_operation_timeout(opt, 20000, es, sizeof(es))) {
                snprintf(create_err, sizeof(create_err), "admin request: %s", es);
                goto out;
        }
        rd_kafka_CreateTopics(other, &nt, 1, opt, q);
        ev = rd_kafka_queue_poll(q, 30000);
        size_t n = 0;
        const rd_kafka_CreateTopics_result_t *res = ev ? rd_kafka_event_CreateTopics_result(ev) : NULL;
        const rd_kafka_topic_result_t **tr = res ? rd_kafka_CreateTopics_result_topics(res, &n) : NULL;
        if (!ev || rd_kafka_event_error(ev) || n != 1 || rd_kafka_topic_result_error(tr[0])) {
                snprintf(create_err, sizeof(create_err), "create: %s",
                         !ev ? "no answer"
                         : rd_kafka_event_error(ev) ? rd_kafka_event_error_string(ev)
                         : n == 1 ? rd_kafka_err2str(rd_kafka_topic_result_error(tr[0]))
                                  : "no topic in the answer");
                goto out;
        }
        rd_kafka_error_t *e = rd_kafka_begin_transaction(other);
        rd_kafka_resp_err_t pe = e ? 0
                                   : rd_kafka_producev(other, RD_KAFKA_V_TOPIC(topic),
                                                       RD_KAFKA_V_KEY(key, strlen(key)),
                                                       RD_KAFKA_V_VALUE(THEIRS, strlen(THEIRS)),
                                                       RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                                       RD_KAFKA_V_END);
        if (!e && pe)
                snprintf(create_err, sizeof(create_err), "produce: %s", rd_kafka_err2str(pe));
        else if (!e && !(e = rd_kafka_commit_transaction(other, 30000)))
                created = true;
        if (e) {
                snprintf(create_err, sizeof(create_err), "transaction: %s",
                         rd_kafka_error_string(e));
                rd_kafka_error_destroy(e);
        }
out:
        if (ev)
                rd_kafka_event_destroy(ev);
        if (q)
                rd_kafka_queue_destroy(q);
        if (opt)
                rd_kafka_AdminOptions_destroy(opt);
        if (nt)
                rd_kafka_NewTopic_destroy(nt);
}

/* One complete line of the log (stdio holds the stream's lock meanwhile). */
static void on_line(const char *l)
{
        if (strstr(l, "Received metadata") && strstr(l, "application requested")) {
                answering = pthread_self();
                answer_seen = true;
        } else if (answer_seen && !created && !create_err[0] &&
                   pthread_equal(answering, pthread_self()) && strstr(l, topic) &&
                   strstr(l, "Unknown topic or partition")) {
                create_meanwhile();
        }
}

static ssize_t hook_write(void *c, const char *buf, size_t n)
{
        (void)c;
        fwrite(buf, 1, n, real_stderr);
        for (size_t i = 0; i < n; i++) {
                if (buf[i] == '\n' || linelen == sizeof(line) - 1) {
                        line[linelen] = '\0';
                        on_line(line);
                        linelen = 0;
                } else {
                        line[linelen++] = buf[i];
                }
        }
        return (ssize_t)n;
}

int main(void)
{
        char *t = h_unique_name("ckmeanwhile");
        char *k = h_unique_name("sysid/slot");
        char *tid = h_unique_name("ckmeanwhile-other");
        relay_config_t *cfg = NULL;
        char err[RELAY_ERRBUF], es[512];
        relay_lsn_t lsn, want;
        bool found;

        topic = t;
        key = k;
        if (relay_lsn_parse(THEIRS, &want) != 0)
                tap_bail("lsn");
        if (relay_config_new(&cfg) != 0 ||
            relay_config_set(cfg, "kafka.bootstrap.servers", h_kafka_bootstrap(), "test", err,
                             sizeof(err)) != 0 ||
            relay_config_set(cfg, "kafka.debug", "metadata", "test", err, sizeof(err)) != 0)
                tap_bail("config: %s", err);

        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        if (rd_kafka_conf_set(conf, "bootstrap.servers", h_kafka_bootstrap(), es, sizeof(es)) ||
            rd_kafka_conf_set(conf, "transactional.id", tid, es, sizeof(es)))
                tap_bail("producer config: %s", es);
        rd_kafka_conf_set_log_cb(conf, quiet); /* never through the hooked stream */
        if (!(other = rd_kafka_new(RD_KAFKA_PRODUCER, conf, es, sizeof(es))))
                tap_bail("producer: %s", es);
        rd_kafka_error_t *e = rd_kafka_init_transactions(other, 30000);
        if (e)
                tap_bail("init transactions: %s", rd_kafka_error_string(e));

        /* The relay's log sink writes to stderr: this one watches each line. */
        cookie_io_functions_t io = {.write = hook_write};
        FILE *hooked = fopencookie(NULL, "w", io);
        if (!hooked || setvbuf(hooked, NULL, _IONBF, 0) != 0)
                tap_bail("fopencookie");
        real_stderr = stderr;
        stderr = hooked;
        relay_log_configure(RELAY_LOG_DEBUG, RELAY_LOG_TEXT);

        err[0] = '\0';
        int rc = relay_checkpoint_read(cfg, topic, key, 20000, NULL, NULL, &lsn, &found, err,
                                       sizeof(err));

        relay_log_configure(RELAY_LOG_INFO, RELAY_LOG_TEXT);
        stderr = real_stderr;
        fclose(hooked);

        ok(answer_seen, "the reader's metadata request was answered");
        ok(created, "the topic did not exist when the broker answered it, and was created "
                    "with our checkpoint " THEIRS " before the reader's CreateTopics (%s)",
           create_err[0] ? create_err : "done");
        char got[RELAY_LSN_BUFSZ];
        ok(rc == 0 && found && lsn == want,
           "the read finds the checkpoint in the topic it found already created: %s (rc %d%s%s)",
           found ? relay_lsn_format(lsn, got) : "none", rc, rc ? ": " : "", rc ? err : "");

        rd_kafka_destroy(other);
        relay_config_free(cfg);
        h_kafka_delete_topic(topic);
        free(t);
        free(k);
        free(tid);
        return done_testing();
}
