/*
 * metrics.c - owns the relay's figures: the live ones the main loop writes
 * without locks, the snapshot the HTTP thread reads under a mutex, and the
 * Prometheus text exposition of that snapshot and of /proc/self.
 *
 * Why a snapshot: the loop relays 100 000+ events/s and must never wait for
 * a scrape, and a scrape must never see half-updated figures or call into
 * libpq or librdkafka. So the loop bumps plain integers, and every
 * RELAY_METRICS_PUBLISH_MS copies them (a few tens of kilobytes) under the
 * mutex; rendering copies them out again and formats without the lock.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/metrics.h"

#include <dirent.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TOPIC_NAME_MAX 249 /* Kafka's limit */
#define TOPIC_SLOTS 256    /* hash slots, > 2 * RELAY_METRICS_MAX_TOPICS */
#define OTHER RELAY_METRICS_MAX_TOPICS
/* Committed transactions remembered for the latency histogram, the lag in
 * seconds and the count in flight: a ring that starts at this many and
 * doubles, as the ack tracker's does (a catch-up of small transactions has
 * tens of thousands in flight). */
#define RING_MIN 1024

static const double buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                 1,     2.5,  5,     10,   30,  60,   300};
#define NBUCKETS (sizeof(buckets) / sizeof(buckets[0]))

static const char *const dr_class_names[] = {RELAY_DR_CLASSES(RELAY_NAME_ENTRY)};
#define NCLASSES (sizeof(dr_class_names) / sizeof(dr_class_names[0]))

/* Why a session ended, by its return code (relay_metrics_session_end()). */
typedef enum {
        CAUSE_POSTGRES, /* RELAY_EIO: connection lost or refused */
        CAUSE_KAFKA,    /* RELAY_EKAFKA: delivery failed, producer died */
        CAUSE_STANDBY,  /* RELAY_EBUSY: the slot is active elsewhere */
        CAUSE_SLOT_LOST,
        CAUSE_MEMORY,
        CAUSE_FATAL,    /* anything else: the process stops */
        NCAUSES
} cause_t;
static const char *const cause_names[] = {"postgres", "kafka",  "standby",
                                          "slot_lost", "memory", "fatal"};

static const char *const state_names[] = {"starting", "streaming", "standby", "backoff",
                                          "stopping"};

typedef struct {
        uint64_t events, bytes;
} topic_count_t;

/* Everything /metrics and the health checks show: the live copy and the snapshot. */
typedef struct {
        uint64_t txns, produced, retries, dead_lettered, skipped;
        uint64_t dr_errors[NCLASSES];
        uint64_t ends[NCAUSES];
        size_t ntopics;
        char topic[RELAY_METRICS_MAX_TOPICS][TOPIC_NAME_MAX + 1];
        topic_count_t count[RELAY_METRICS_MAX_TOPICS + 1]; /* [OTHER]: the rest */
        uint64_t hist[NBUCKETS + 1]; /* cumulative at render time, not here */
        double hist_sum;
        uint64_t hist_count;
        relay_state_t state;
        int64_t state_since_ms; /* monotonic */
        int64_t turn_ms;        /* monotonic: the loop's last turn */
        int64_t confirmed_commit_ts;   /* PostgreSQL epoch us; 0: none yet */
        int64_t unconfirmed_commit_ts; /* of the oldest unconfirmed; 0: none */
        relay_metrics_sample_t sample;
        relay_kafka_stats_t kafka;
        relay_slot_info_t slot;
        bool catching_up;
        relay_catchup_t catchup;
} figures_t;

typedef struct {
        relay_lsn_t lsn;
        int64_t ts;
} txn_t;

struct relay_metrics {
        figures_t live;   /* main loop only */
        int64_t last_publish_ms;
        unsigned short slot_of[TOPIC_SLOTS]; /* topic index + 1; 0: empty */
        const char *last_topic; /* the caller's pointer of the last lookup (a hint only) */
        size_t last_index;
        txn_t *ring;
        size_t cap, head, len; /* cap: a power of two */
        uint64_t overflow; /* committed while the ring could not grow (out of memory), not
                            * yet confirmed; not observed */
        txn_t newest; /* the newest committed transaction, even when the ring was full */
        /* catch-up report */
        int64_t cu_last_ms;
        uint64_t cu_last_events;
        relay_lsn_t cu_last_received;

        pthread_mutex_t mu;
        figures_t snap; /* under mu */
        double start_time; /* Unix seconds */
};

static int64_t mono_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

relay_metrics_t *relay_metrics_new(void)
{
        relay_metrics_t *m = calloc(1, sizeof(*m));
        struct timespec ts;

        if (m == NULL)
                return NULL;
        m->cap = RING_MIN;
        if ((m->ring = malloc(m->cap * sizeof(*m->ring))) == NULL) {
                free(m);
                return NULL;
        }
        if (pthread_mutex_init(&m->mu, NULL) != 0) {
                free(m->ring);
                free(m);
                return NULL;
        }
        clock_gettime(CLOCK_REALTIME, &ts);
        m->start_time = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
        m->live.state_since_ms = m->live.turn_ms = mono_ms();
        m->snap = m->live;
        return m;
}

void relay_metrics_free(relay_metrics_t *m)
{
        if (m == NULL)
                return;
        pthread_mutex_destroy(&m->mu);
        free(m->ring);
        free(m);
}

/* --- main loop side ------------------------------------------------------ */

/* The topic's index, OTHER once RELAY_METRICS_MAX_TOPICS are taken. FNV-1a.
 * A topic named "other" is counted as the rest: a label of its own would be
 * a second series topic="other" once the rest counts too, and Prometheus
 * refuses a scrape with a duplicate series. */
static size_t topic_index(relay_metrics_t *m, const char *topic)
{
        if (strcmp(topic, "other") == 0)
                return OTHER;
        uint32_t h = 2166136261u;
        for (const unsigned char *p = (const unsigned char *)topic; *p; p++)
                h = (h ^ *p) * 16777619u;
        for (size_t i = 0; i < TOPIC_SLOTS; i++) {
                size_t slot = (h + i) % TOPIC_SLOTS;
                unsigned short v = m->slot_of[slot];
                if (v == 0) {
                        figures_t *f = &m->live;
                        if (f->ntopics >= RELAY_METRICS_MAX_TOPICS ||
                            strlen(topic) > TOPIC_NAME_MAX)
                                return OTHER;
                        memcpy(f->topic[f->ntopics], topic, strlen(topic) + 1);
                        m->slot_of[slot] = (unsigned short)(++f->ntopics);
                        return f->ntopics - 1;
                }
                if (strcmp(m->live.topic[v - 1], topic) == 0)
                        return v - 1;
        }
        return OTHER;
}

void relay_metrics_acked(relay_metrics_t *m, const char *topic, size_t bytes)
{
        /* Once per acknowledged event: the same topic string (librdkafka's,
         * of the topic handle) comes back for runs of events, so try the last
         * one before hashing. The pointer is only a hint: a new producer may
         * put another topic at the same address, hence the comparison. */
        size_t i;
        if (topic == NULL)
                topic = "";
        if (topic == m->last_topic && m->last_index != OTHER &&
            strcmp(m->live.topic[m->last_index], topic) == 0) {
                i = m->last_index;
        } else {
                i = topic_index(m, topic);
                m->last_topic = topic;
                m->last_index = i;
        }
        topic_count_t *c = &m->live.count[i];
        c->events++;
        c->bytes += bytes;
}

void relay_metrics_delivery_error(relay_metrics_t *m, relay_dr_class_t cls)
{
        if ((size_t)cls < NCLASSES)
                m->live.dr_errors[cls]++;
}

/* Double the ring, oldest first at 0; false when out of memory. */
static bool ring_grow(relay_metrics_t *m)
{
        txn_t *ring = malloc(2 * m->cap * sizeof(*ring));
        if (ring == NULL)
                return false;
        for (size_t i = 0; i < m->len; i++)
                ring[i] = m->ring[(m->head + i) & (m->cap - 1)];
        free(m->ring);
        m->ring = ring;
        m->cap *= 2;
        m->head = 0;
        return true;
}

void relay_metrics_commit(relay_metrics_t *m, relay_lsn_t end_lsn, int64_t commit_ts)
{
        m->live.txns++;
        m->newest.lsn = end_lsn;
        m->newest.ts = commit_ts;
        /* Once one could not be kept, none after it is either: the ring
         * stays the oldest run, and what it lacks is counted (overflow)
         * until the newest is confirmed. A ring with room again would take
         * later ones past the gap and count the gap forever. */
        if (m->overflow == 0 && (m->len < m->cap || ring_grow(m)))
                m->ring[(m->head + m->len++) & (m->cap - 1)] = m->newest;
        else
                m->overflow++;
}

void relay_metrics_produced(relay_metrics_t *m)
{
        m->live.produced++;
}

void relay_metrics_retry(relay_metrics_t *m)
{
        m->live.retries++;
}

void relay_metrics_dead_lettered(relay_metrics_t *m)
{
        m->live.dead_lettered++;
}

void relay_metrics_skipped(relay_metrics_t *m)
{
        m->live.skipped++;
}

void relay_metrics_session_end(relay_metrics_t *m, int rc)
{
        cause_t c;
        switch (rc) {
        case 0:
        case RELAY_ESTOPPED:
                /* A stop: no error to count (the counter's HELP says
                 * errors), where "fatal" would say the process failed. */
                c = NCAUSES;
                break;
        case RELAY_EIO:
                c = CAUSE_POSTGRES;
                break;
        case RELAY_EKAFKA:
                c = CAUSE_KAFKA;
                break;
        case RELAY_EBUSY:
                c = CAUSE_STANDBY;
                break;
        case RELAY_ESLOTLOST:
                c = CAUSE_SLOT_LOST;
                break;
        case RELAY_ENOMEM:
                c = CAUSE_MEMORY;
                break;
        default:
                c = CAUSE_FATAL;
                break;
        }
        if (c < NCAUSES)
                m->live.ends[c]++;
        /* What was not confirmed is received again by the next session, and
         * what it had in flight or held back went with its producer. */
        m->len = 0;
        m->overflow = 0;
        m->live.unconfirmed_commit_ts = 0;
        m->live.sample.inflight_events = 0;
        m->live.sample.held_back = false;
}

void relay_metrics_state(relay_metrics_t *m, relay_state_t st)
{
        if (m->live.state != st) {
                m->live.state = st;
                m->live.state_since_ms = mono_ms();
        }
        /* A state change is what /readyz answers from: publish it now. */
        m->last_publish_ms = 0;
        relay_metrics_publish(m, &m->live.sample);
}

void relay_metrics_kafka(relay_metrics_t *m, const relay_kafka_stats_t *ks)
{
        m->live.kafka = *ks;
}

void relay_metrics_slot(relay_metrics_t *m, const relay_slot_info_t *si)
{
        m->live.slot = *si;
}

static void observe(figures_t *f, double s)
{
        size_t i = 0;
        if (s < 0)
                s = 0; /* the server's clock is ahead of ours */
        while (i < NBUCKETS && s > buckets[i])
                i++;
        f->hist[i]++;
        f->hist_sum += s;
        f->hist_count++;
}

bool relay_metrics_turn(relay_metrics_t *m, int64_t now_ms, relay_lsn_t confirmable)
{
        figures_t *f = &m->live;
        f->turn_ms = now_ms;
        if (m->len > 0 && m->ring[m->head].lsn <= confirmable) {
                int64_t now_us = relay_pg_now_us();
                while (m->len > 0 && m->ring[m->head].lsn <= confirmable) {
                        const txn_t *t = &m->ring[m->head];
                        observe(f, (double)(now_us - t->ts) / 1e6);
                        f->confirmed_commit_ts = t->ts;
                        m->head = (m->head + 1) & (m->cap - 1);
                        m->len--;
                }
        }
        if (m->newest.lsn != 0 && m->newest.lsn <= confirmable) {
                f->confirmed_commit_ts = m->newest.ts;
                m->overflow = 0;
        }
        f->unconfirmed_commit_ts = m->len > 0 ? m->ring[m->head].ts : 0;
        return now_ms - m->last_publish_ms >= RELAY_METRICS_PUBLISH_MS;
}

void relay_metrics_publish(relay_metrics_t *m, const relay_metrics_sample_t *sample)
{
        m->live.sample = *sample;
        m->live.sample.inflight_txns = m->len + m->overflow;
        m->last_publish_ms = mono_ms();
        pthread_mutex_lock(&m->mu);
        m->snap = m->live;
        pthread_mutex_unlock(&m->mu);
}

void relay_metrics_alive(relay_metrics_t *m, int64_t now_ms)
{
        m->live.turn_ms = now_ms;
        if (now_ms - m->last_publish_ms >= RELAY_METRICS_PUBLISH_MS)
                relay_metrics_publish(m, &m->live.sample);
}

static relay_lsn_t server_end(const figures_t *f)
{
        relay_lsn_t end = f->sample.keepalive_end;
        if (f->slot.known && f->slot.server_end > end)
                end = f->slot.server_end;
        return end;
}

bool relay_metrics_catchup(relay_metrics_t *m, int64_t now_ms, relay_catchup_t *out)
{
        figures_t *f = &m->live;
        relay_lsn_t end = server_end(f), received = f->sample.received;
        int64_t lag = end > received ? (int64_t)(end - received) : 0;
        uint64_t events = f->produced;

        if (m->cu_last_ms == 0 || received < m->cu_last_received) {
                /* the first call, or a new session resumed from an older position */
                m->cu_last_ms = now_ms;
                m->cu_last_events = events;
                m->cu_last_received = received;
                return false;
        }
        if (now_ms - m->cu_last_ms < RELAY_METRICS_CATCHUP_LOG_MS)
                return false;
        bool behind = lag > RELAY_METRICS_CATCHUP_BYTES;
        if (!behind && !f->catching_up) {
                m->cu_last_ms = now_ms;
                m->cu_last_events = events;
                m->cu_last_received = received;
                return false;
        }
        double dt = (double)(now_ms - m->cu_last_ms) / 1000.0;
        relay_catchup_t c = {0};
        c.events_per_s = (double)(events - m->cu_last_events) / dt;
        c.wal_bytes_per_s = (double)(received - m->cu_last_received) / dt;
        c.lag_bytes = lag;
        /* The server keeps writing: the lag shrinks by what is received minus
         * what was written meanwhile, which only the lag's own change shows. */
        double prev_lag = f->catching_up ? (double)f->catchup.lag_bytes : -1;
        double shrink = prev_lag >= 0 ? (prev_lag - (double)lag) / dt : c.wal_bytes_per_s;
        c.eta_s = shrink > 0 ? (double)lag / shrink : -1;
        c.done = !behind;
        f->catching_up = behind;
        f->catchup = c;
        m->cu_last_ms = now_ms;
        m->cu_last_events = events;
        m->cu_last_received = received;
        *out = c;
        return true;
}

/* --- HTTP thread side ---------------------------------------------------- */

typedef struct {
        char *buf;
        size_t len, cap;
        bool failed;
} out_t;

static void put(out_t *o, const char *fmt, ...) RELAY_PRINTF(2, 3);
static void put(out_t *o, const char *fmt, ...)
{
        va_list ap;
        for (;;) {
                if (o->failed)
                        return;
                va_start(ap, fmt);
                int n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
                va_end(ap);
                if (n < 0) {
                        o->failed = true;
                        return;
                }
                if ((size_t)n < o->cap - o->len) {
                        o->len += (size_t)n;
                        return;
                }
                size_t cap = (o->cap + (size_t)n) * 2;
                char *b = realloc(o->buf, cap);
                if (b == NULL) {
                        o->failed = true;
                        return;
                }
                o->buf = b;
                o->cap = cap;
        }
}

static void head(out_t *o, const char *name, const char *type, const char *help)
{
        put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void one(out_t *o, const char *name, const char *type, const char *help, double v)
{
        head(o, name, type, help);
        put(o, "%s %.17g\n", name, v);
}

/* A label value, escaped as the exposition format wants (\\, \", \n). */
static void put_label(out_t *o, const char *v)
{
        for (const char *p = v; *p; p++) {
                if (*p == '\\' || *p == '"')
                        put(o, "\\%c", *p);
                else if (*p == '\n')
                        put(o, "\\n");
                else
                        put(o, "%c", *p);
        }
}

/* utime + stime (seconds), start (seconds after boot) and RSS (pages) from /proc/self/stat. */
static bool proc_stat(double *cpu, double *start_after_boot, double *rss_pages, double *vsize)
{
        char buf[1024];
        FILE *f = fopen("/proc/self/stat", "r");
        if (f == NULL)
                return false;
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        /* The command name may hold spaces and parentheses: fields follow the last ')'. */
        char *p = strrchr(buf, ')');
        if (p == NULL)
                return false;
        unsigned long long utime, stime, start, vsz;
        long long rss;
        if (sscanf(p + 2,
                   "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d "
                   "%*d %llu %llu %lld",
                   &utime, &stime, &start, &vsz, &rss) != 5)
                return false;
        double hz = (double)sysconf(_SC_CLK_TCK);
        *cpu = (double)(utime + stime) / hz;
        *start_after_boot = (double)start / hz;
        *rss_pages = (double)rss;
        *vsize = (double)vsz;
        return true;
}

static void render_process(out_t *o, double start_time)
{
        double cpu, start, rss, vsize;
        if (proc_stat(&cpu, &start, &rss, &vsize)) {
                one(o, "process_cpu_seconds_total", "counter",
                    "Total user and system CPU time spent in seconds.", cpu);
                one(o, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
                    rss * (double)sysconf(_SC_PAGESIZE));
                one(o, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
                    vsize);
        }
        one(o, "process_start_time_seconds", "gauge",
            "Start time of the process since unix epoch in seconds.", start_time);
        DIR *d = opendir("/proc/self/fd");
        if (d != NULL) {
                double n = 0;
                struct dirent *e;
                while ((e = readdir(d)) != NULL)
                        if (e->d_name[0] != '.')
                                n++;
                closedir(d);
                one(o, "process_open_fds", "gauge", "Number of open file descriptors.",
                    n - 1 /* the directory's own */);
        }
        long maxfd = sysconf(_SC_OPEN_MAX);
        if (maxfd > 0)
                one(o, "process_max_fds", "gauge", "Maximum number of open file descriptors.",
                    (double)maxfd);
}

/*
 * One sample per topic label of a per-topic counter (field: the offset of
 * the counter in topic_count_t); "other" only once it has counted something.
 */
static void per_topic(out_t *o, const figures_t *f, const char *name, size_t field)
{
        for (size_t i = 0; i <= f->ntopics; i++) {
                size_t k = i < f->ntopics ? i : OTHER;
                if (k == OTHER && f->count[OTHER].events == 0 && f->ntopics > 0)
                        continue;
                uint64_t v;
                memcpy(&v, (const char *)&f->count[k] + field, sizeof v);
                put(o, "%s{topic=\"", name);
                put_label(o, k == OTHER ? "other" : f->topic[k]);
                put(o, "\"} %llu\n", (unsigned long long)v);
        }
}

/* librdkafka's statistics: the producer's queues and brokers, then per
 * broker its round trip and requests. */
static void render_kafka(out_t *o, const relay_kafka_stats_t *k)
{
        const struct {
                const char *name, *help;
                double v;
        } producer[] = {
                {"outbox_relay_kafka_queue_messages",
                 "Messages in the producer's queues (librdkafka msg_cnt).", (double)k->msg_cnt},
                {"outbox_relay_kafka_queue_bytes",
                 "Bytes of the messages in the producer's queues (librdkafka msg_size).",
                 (double)k->msg_size},
                {"outbox_relay_kafka_brokers_up", "Brokers the producer is connected to (state UP).",
                 (double)k->brokers_up},
                {"outbox_relay_kafka_partitions_stalled",
                 "Partitions whose events Kafka has acknowledged none of for 10 s or more while "
                 "librdkafka resends them (the log names each).",
                 (double)k->partitions_stalled},
        };
        for (size_t i = 0; i < sizeof(producer) / sizeof(producer[0]); i++)
                one(o, producer[i].name, "gauge", producer[i].help, producer[i].v);
        static const struct {
                const char *name, *help;
        } g[] = {
                {"outbox_relay_kafka_broker_rtt_avg_seconds",
                 "Average request round-trip time to the broker."},
                {"outbox_relay_kafka_broker_rtt_p99_seconds",
                 "99th percentile of the request round-trip time to the broker."},
                {"outbox_relay_kafka_broker_outbuf_requests",
                 "Requests waiting to be sent to the broker."},
                {"outbox_relay_kafka_broker_waitresp_requests",
                 "Requests sent to the broker, waiting for a response."},
        };
        for (size_t gi = 0; gi < sizeof(g) / sizeof(g[0]); gi++) {
                if (k->nbrokers == 0)
                        break;
                head(o, g[gi].name, "gauge", g[gi].help);
                for (size_t b = 0; b < k->nbrokers; b++) {
                        double v = gi == 0   ? k->broker[b].rtt_avg
                                   : gi == 1 ? k->broker[b].rtt_p99
                                   : gi == 2 ? (double)k->broker[b].outbuf_cnt
                                             : (double)k->broker[b].waitresp_cnt;
                        put(o, "%s{broker=\"", g[gi].name);
                        put_label(o, k->broker[b].name);
                        put(o, "\"} %.17g\n", v);
                }
        }
}

static void render(out_t *o, const figures_t *f, double start_time)
{
        int64_t now_us = relay_pg_now_us();
        const relay_metrics_sample_t *s = &f->sample;

        head(o, "outbox_relay_events_total", "counter",
             "Events acknowledged by Kafka, by topic (the first 100 topics; the rest as "
             "topic=\"other\"). A resent event counts again.");
        per_topic(o, f, "outbox_relay_events_total", offsetof(topic_count_t, events));
        head(o, "outbox_relay_event_bytes_total", "counter",
             "Key and value bytes of the events acknowledged by Kafka, by topic.");
        per_topic(o, f, "outbox_relay_event_bytes_total", offsetof(topic_count_t, bytes));
        one(o, "outbox_relay_events_produced_total", "counter",
            "Events handed to the Kafka producer (a resent event counts again).",
            (double)f->produced);
        one(o, "outbox_relay_transactions_total", "counter",
            "Transactions received whole from PostgreSQL.", (double)f->txns);
        head(o, "outbox_relay_delivery_errors_total", "counter",
             "Delivery reports with an error, by class.");
        for (size_t c = 1; c < NCLASSES; c++)
                put(o, "outbox_relay_delivery_errors_total{class=\"%s\"} %llu\n",
                    dr_class_names[c], (unsigned long long)f->dr_errors[c]);
        one(o, "outbox_relay_retries_total", "counter",
            "Rejected events sent again alone.", (double)f->retries);
        one(o, "outbox_relay_dead_lettered_total", "counter",
            "Events written to the dead-letter topic.", (double)f->dead_lettered);
        one(o, "outbox_relay_skipped_total", "counter", "Events skipped by errors.skip.ids.",
            (double)f->skipped);
        one(o, "outbox_relay_held_back", "gauge",
            "1 while an event is settled in place (sent alone, waiting to be resent, or "
            "dead-lettered): nothing after it is produced meanwhile.",
            s->held_back ? 1 : 0);
        one(o, "outbox_relay_inflight_events", "gauge",
            "Events produced and not yet acknowledged by Kafka.", (double)s->inflight_events);
        one(o, "outbox_relay_inflight_transactions", "gauge",
            "Transactions received and not yet confirmed to PostgreSQL.",
            (double)s->inflight_txns);
        one(o, "outbox_relay_received_lsn", "gauge",
            "Highest WAL position received (commit end or keepalive), as a number.",
            (double)s->received);
        one(o, "outbox_relay_confirmed_lsn", "gauge",
            "WAL position confirmed to PostgreSQL (flush LSN of the last status update).",
            (double)s->confirmed);
        relay_lsn_t end = server_end(f);
        one(o, "outbox_relay_server_lsn", "gauge",
            "The server's WAL end: pg_current_wal_lsn() from the side connection, or the "
            "walsender's keepalive position if newer.",
            (double)end);
        one(o, "outbox_relay_lag_bytes", "gauge",
            "Server WAL end minus the confirmed position, in bytes.",
            end > s->confirmed ? (double)(end - s->confirmed) : 0);
        if (f->confirmed_commit_ts != 0)
                one(o, "outbox_relay_confirmed_commit_age_seconds", "gauge",
                    "Now minus the commit time of the last confirmed transaction.",
                    (double)(now_us - f->confirmed_commit_ts) / 1e6);
        one(o, "outbox_relay_unconfirmed_commit_age_seconds", "gauge",
            "Now minus the commit time of the oldest transaction received and not yet "
            "confirmed; 0 when none.",
            f->unconfirmed_commit_ts ? (double)(now_us - f->unconfirmed_commit_ts) / 1e6 : 0);

        head(o, "outbox_relay_commit_to_ack_seconds", "histogram",
             "From a transaction's commit in PostgreSQL (the server's clock) until Kafka "
             "acknowledged it and every transaction before it.");
        uint64_t cum = 0;
        for (size_t i = 0; i < NBUCKETS; i++) {
                cum += f->hist[i];
                put(o, "outbox_relay_commit_to_ack_seconds_bucket{le=\"%g\"} %llu\n", buckets[i],
                    (unsigned long long)cum);
        }
        put(o, "outbox_relay_commit_to_ack_seconds_bucket{le=\"+Inf\"} %llu\n",
            (unsigned long long)f->hist_count);
        put(o, "outbox_relay_commit_to_ack_seconds_sum %.17g\n", f->hist_sum);
        put(o, "outbox_relay_commit_to_ack_seconds_count %llu\n",
            (unsigned long long)f->hist_count);

        head(o, "outbox_relay_session_ends_total", "counter",
             "Replication sessions that ended in an error, by cause (standby: the slot was "
             "active in another process).");
        for (size_t c = 0; c < NCAUSES; c++)
                put(o, "outbox_relay_session_ends_total{cause=\"%s\"} %llu\n", cause_names[c],
                    (unsigned long long)f->ends[c]);
        head(o, "outbox_relay_state", "gauge", "1 for the relay's current state, 0 for the others.");
        for (size_t st = 0; st < RELAY_STATE_COUNT; st++)
                put(o, "outbox_relay_state{state=\"%s\"} %d\n", state_names[st],
                    f->state == (relay_state_t)st);

        if (f->slot.known) {
                static const char *const statuses[] = {"reserved", "extended", "unreserved",
                                                       "lost"};
                head(o, "outbox_relay_slot_wal_status", "gauge",
                     "1 for the slot's wal_status in pg_replication_slots, 0 for the others.");
                for (size_t i = 0; i < 4; i++)
                        put(o, "outbox_relay_slot_wal_status{wal_status=\"%s\"} %d\n", statuses[i],
                            strcmp(f->slot.wal_status, statuses[i]) == 0);
                if (f->slot.safe_wal_size_known)
                        one(o, "outbox_relay_slot_safe_wal_size_bytes", "gauge",
                            "safe_wal_size of the slot: WAL that can still be written before "
                            "the slot is in danger of being invalidated.",
                            (double)f->slot.safe_wal_size);
        }
        one(o, "outbox_relay_catching_up", "gauge",
            "1 while the server's WAL end is more than 16 MiB ahead of what was received.",
            f->catching_up ? 1 : 0);
        if (f->catching_up) {
                one(o, "outbox_relay_catchup_events_per_second", "gauge",
                    "Events produced per second over the last catch-up report interval.",
                    f->catchup.events_per_s);
                one(o, "outbox_relay_catchup_lag_bytes", "gauge",
                    "Server WAL end minus the received position at the last catch-up report.",
                    (double)f->catchup.lag_bytes);
                if (f->catchup.eta_s >= 0)
                        one(o, "outbox_relay_catchup_eta_seconds", "gauge",
                            "Estimated time until caught up, at the last interval's pace.",
                            f->catchup.eta_s);
        }

        if (f->kafka.known)
                render_kafka(o, &f->kafka);
        render_process(o, start_time);
}

char *relay_metrics_render(relay_metrics_t *m, size_t *len)
{
        figures_t *f = malloc(sizeof(*f));
        out_t o = {0};

        if (f == NULL)
                return NULL;
        pthread_mutex_lock(&m->mu);
        *f = m->snap;
        pthread_mutex_unlock(&m->mu);
        render(&o, f, m->start_time);
        free(f);
        if (o.failed || o.buf == NULL) {
                free(o.buf);
                return NULL;
        }
        *len = o.len;
        return o.buf;
}

bool relay_metrics_health(relay_metrics_t *m, bool ready, int64_t stall_ms, char *body,
                          size_t bodylen)
{
        relay_state_t st;
        int64_t turn, since;
        int up;
        bool known;

        pthread_mutex_lock(&m->mu);
        st = m->snap.state;
        turn = m->snap.turn_ms;
        since = m->snap.state_since_ms;
        up = m->snap.kafka.brokers_up;
        known = m->snap.kafka.known;
        pthread_mutex_unlock(&m->mu);

        int64_t now = mono_ms();
        double idle = (double)(now - turn) / 1000.0;
        const char *name = state_names[st];
        if (now - turn > stall_ms) {
                relay_err_set(body, bodylen,
                              "{\"status\":\"stalled\",\"state\":\"%s\",\"reason\":\"the main loop "
                              "has not turned for %.1f s\"}\n",
                              name, idle);
                return false;
        }
        if (!ready) {
                relay_err_set(body, bodylen,
                              "{\"status\":\"alive\",\"state\":\"%s\",\"loop_turned_s_ago\":%.3f}\n",
                              name, idle);
                return true;
        }
        double in_state = (double)(now - since) / 1000.0;
        switch (st) {
        case RELAY_STATE_STREAMING:
                if (known && up == 0) {
                        relay_err_set(body, bodylen,
                                      "{\"status\":\"unready\",\"state\":\"%s\",\"reason\":\"no "
                                      "Kafka broker is up\"}\n",
                                      name);
                        return false;
                }
                relay_err_set(body, bodylen,
                              "{\"status\":\"ready\",\"state\":\"%s\",\"for_s\":%.1f}\n", name,
                              in_state);
                return true;
        case RELAY_STATE_STANDBY:
                relay_err_set(body, bodylen,
                              "{\"status\":\"ready\",\"state\":\"%s\",\"reason\":\"the slot is "
                              "active in another process; taking over when it is free\"}\n",
                              name);
                return true;
        case RELAY_STATE_BACKOFF:
                relay_err_set(body, bodylen,
                              "{\"status\":\"unready\",\"state\":\"%s\",\"reason\":\"waiting to "
                              "retry after an error (see the log)\",\"for_s\":%.1f}\n",
                              name, in_state);
                return false;
        default:
                relay_err_set(body, bodylen,
                              "{\"status\":\"unready\",\"state\":\"%s\"}\n", name);
                return false;
        }
}
