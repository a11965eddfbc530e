/*
 * tail.c - `outbox-relay tail`: owns a source (source.h: the relay's own
 * connection, decoder and outbox mapping) streaming from a temporary slot,
 * and turns each event into one JSON line.
 *
 * The slot is temporary, so confirming what was written is harmless (it
 * only lets the server recycle WAL while tail runs) and is done at each
 * keepalive that asks for it and every few seconds, so wal_sender_timeout
 * never ends the stream.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/tail.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "relay/lsn.h"
#include "relay/source.h"

#define STATUS_MS 5000

struct relay_tail {
        relay_settings_t set; /* shallow copy of the caller's, with our slot name */
        char slot[64];
        relay_source_t *src;
        relay_repl_t *repl; /* src's connection, borrowed */
        relay_lsn_t start;
        relay_lsn_t received; /* end of the last commit, or a keepalive's end when idle */
        bool reader_gone; /* out is a pipe its reader closed (`tail | head`): a stop */
};

/* Writing out failed (errno). A reader that went away ends tail as a stop
 * does, as `head` expects of what it reads from; anything else (a full
 * disk) is an error. */
static int out_failed(relay_tail_t *t, char *err, size_t errlen)
{
        if (errno == EPIPE) {
                t->reader_gone = true;
                return 0;
        }
        return relay_err(err, errlen, RELAY_EIO, "could not write to standard output: %s",
                         strerror(errno));
}

void relay_tail_free(relay_tail_t *t)
{
        if (!t)
                return;
        relay_source_free(t->src);
        free(t);
}

/* Creating the slot waits for the transactions then open: a stop cancels it. */
static int tail_waiting(void *ctx, char *err, size_t errlen)
{
        const volatile sig_atomic_t *stop = ctx;
        return *stop ? relay_err(err, errlen, RELAY_ESTOPPED, "stopped while waiting") : 0;
}

int relay_tail_open(relay_tail_t **out, const relay_settings_t *set,
                    const volatile sig_atomic_t *stop, char *err, size_t errlen)
{
        relay_tail_t *t = calloc(1, sizeof(*t));
        int rc;

        if (!t)
                return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
        t->set = *set;
        snprintf(t->slot, sizeof(t->slot), "outbox_relay_tail_%ld", (long)getpid());
        t->set.slot_name = t->slot;
        if ((rc = relay_source_open(&t->src, &t->set, stop, err, errlen)))
                goto fail;
        t->repl = relay_source_repl(t->src);
        relay_repl_set_tick(t->repl, tail_waiting, (void *)(uintptr_t)stop);
        if ((rc = relay_repl_check_publication(t->repl, err, errlen)) ||
            (rc = relay_repl_create_temporary_slot(t->repl, &t->start, err, errlen)) ||
            (rc = relay_repl_start(t->repl, 0, err, errlen)))
                goto fail;
        t->received = t->start;
        *out = t;
        return 0;
fail:
        relay_tail_free(t);
        return rc;
}

const char *relay_tail_slot(const relay_tail_t *t)
{
        return t->slot;
}

relay_lsn_t relay_tail_start_lsn(const relay_tail_t *t)
{
        return t->start;
}

static char *base64(const char *s, size_t n)
{
        static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        char *o = malloc((n + 2) / 3 * 4 + 1), *p = o;
        if (!o)
                return NULL;
        for (size_t i = 0; i < n; i += 3) {
                uint32_t v = (uint32_t)(unsigned char)s[i] << 16;
                if (i + 1 < n)
                        v |= (uint32_t)(unsigned char)s[i + 1] << 8;
                if (i + 2 < n)
                        v |= (unsigned char)s[i + 2];
                *p++ = tbl[v >> 18 & 63];
                *p++ = tbl[v >> 12 & 63];
                *p++ = i + 1 < n ? tbl[v >> 6 & 63] : '=';
                *p++ = i + 2 < n ? tbl[v & 63] : '=';
        }
        *p = '\0';
        return o;
}

/*
 * obj[name] = the bytes as a string when they are valid UTF-8 (jansson
 * checks), else obj[name + "_base64"]; null for SQL NULL. 0 or -1 (memory).
 */
static int set_bytes(json_t *obj, const char *name, const char *s, size_t n)
{
        if (!s)
                return json_object_set_new(obj, name, json_null());
        json_t *v = json_stringn(s, n);
        if (v)
                return json_object_set_new(obj, name, v); /* steals v */
        char key[80], *b = base64(s, n);
        if (!b)
                return -1;
        snprintf(key, sizeof(key), "%s_base64", name);
        int rc = json_object_set_new(obj, key, json_string(b));
        free(b);
        return rc;
}

/* PostgreSQL epoch microseconds -> "2026-12-02T10:00:00.123456Z". */
static void iso_time(int64_t pg_us, char *buf, size_t len)
{
        int64_t us = pg_us + RELAY_PG_EPOCH_OFFSET_S * 1000000;
        time_t secs = (time_t)(us >= 0 ? us / 1000000 : (us - 999999) / 1000000);
        int frac = (int)(us - (int64_t)secs * 1000000);
        struct tm tm;
        gmtime_r(&secs, &tm);
        size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(buf + n, len - n, ".%06dZ", frac);
}

static int write_event(relay_tail_t *t, FILE *out, const relay_source_step_t *st, char *err,
                       size_t errlen)
{
        char merr[RELAY_ERRBUF], a[RELAY_LSN_BUFSZ], b[RELAY_LSN_BUFSZ], when[64];
        const relay_pgo_begin_t *txn = relay_source_txn(t->src); /* events come inside one */
        relay_event_t ev;
        int mrc = relay_source_map(t->src, st, &ev, merr, sizeof(merr));
        if (mrc == RELAY_ENOMEM)
                return relay_err(err, errlen, mrc, "out of memory");
        iso_time(txn->commit_time, when, sizeof(when));
        /* "o" steals the reference of the value built for it. */
        json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:o}", "lsn", relay_lsn_format(st->lsn, a),
                              "commit_lsn", relay_lsn_format(txn->final_lsn, b), "commit_time",
                              when, "xid", (json_int_t)txn->xid, "topic",
                              ev.topic ? json_string(ev.topic) : json_null());
        json_t *hdrs = json_array();
        int bad = !o || !hdrs;
        if (!bad)
                bad |= set_bytes(o, "key", ev.key, ev.key_len);
        for (size_t i = 0; !bad && i < ev.nheaders; i++) {
                json_t *h = json_pack("{s:s}", "name", ev.headers[i].name);
                if (!h || set_bytes(h, "value", ev.headers[i].value, ev.headers[i].len)) {
                        json_decref(h);
                        bad = 1;
                } else {
                        bad |= json_array_append_new(hdrs, h); /* the array takes h */
                }
        }
        if (!bad) {
                bad |= json_object_set_new(o, "headers", hdrs); /* the object takes hdrs */
                hdrs = NULL;
                bad |= set_bytes(o, "payload", ev.value, ev.value_len);
        }
        /* The message may quote the row's text cut mid-character (or a
         * server's text that is not UTF-8): jansson refused it, and tail
         * stopped with "out of memory". */
        if (!bad && mrc) {
                char *clean = relay_utf8_sanitize(merr);
                bad |= !clean || json_object_set_new(o, "error", json_string(clean));
                free(clean);
        }
        char *line = bad ? NULL : json_dumps(o, JSON_COMPACT);
        json_decref(hdrs);
        json_decref(o);
        if (!line)
                return relay_err(err, errlen, RELAY_ENOMEM, "out of memory");
        int rc = fprintf(out, "%s\n", line) < 0 ? out_failed(t, err, errlen) : 0;
        free(line);
        return rc;
}

static int on_message(relay_tail_t *t, FILE *out, const relay_walmsg_t *w, bool *reply, char *err,
                      size_t errlen)
{
        relay_source_step_t st;
        int rc;

        if ((rc = relay_source_step(t->src, w, &st, err, errlen)))
                return rc;
        switch (st.kind) {
        case RELAY_STEP_KEEPALIVE:
                if (!relay_source_txn(t->src) && w->wal_end > t->received)
                        t->received = w->wal_end;
                *reply |= w->reply_requested;
                return 0;
        case RELAY_STEP_COMMIT:
                if (st.msg.commit.end_lsn > t->received)
                        t->received = st.msg.commit.end_lsn;
                return fflush(out) != 0 ? out_failed(t, err, errlen) : 0;
        case RELAY_STEP_ROW:
        case RELAY_STEP_MESSAGE:
                return write_event(t, out, &st, err, errlen);
        case RELAY_STEP_BEGIN: /* the source keeps it: relay_source_txn() */
        case RELAY_STEP_NOTHING:
        case RELAY_STEP_UPDATE: /* never an event; the relay's table.op.invalid.behavior */
                return 0;
        }
        return 0;
}

static int64_t mono_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int relay_tail_run(relay_tail_t *t, FILE *out, const volatile sig_atomic_t *stop, char *err,
                   size_t errlen)
{
        int64_t last_status = mono_ms();
        int64_t interval = relay_repl_wal_sender_timeout_ms(t->repl) / 2;
        int rc = 0;

        if (interval <= 0 || interval > STATUS_MS)
                interval = STATUS_MS;
        while (!*stop && !t->reader_gone) {
                relay_walmsg_t w;
                bool reply = false;
                while (!*stop && !t->reader_gone &&
                       (rc = relay_repl_read(t->repl, &w, err, errlen)) > 0)
                        if ((rc = on_message(t, out, &w, &reply, err, errlen)))
                                return rc;
                if (rc < 0)
                        return rc;
                if (reply || mono_ms() - last_status >= interval) {
                        if ((rc = relay_repl_send_status(t->repl, t->received, t->received, false,
                                                         err, errlen)))
                                return rc;
                        last_status = mono_ms();
                }
                if (*stop || t->reader_gone)
                        break;
                struct pollfd pfd = {.fd = relay_repl_socket(t->repl), .events = POLLIN};
                if (relay_repl_wants_write(t->repl))
                        pfd.events |= POLLOUT;
                if (poll(&pfd, 1, 1000) < 0 && errno != EINTR) {
                        relay_err_set(err, errlen, "poll failed: %s", strerror(errno));
                        return RELAY_EIO;
                }
                if ((pfd.revents & (POLLIN | POLLERR | POLLHUP)) &&
                    (rc = relay_repl_consume(t->repl, err, errlen)))
                        return rc;
                if ((pfd.revents & POLLOUT) && (rc = relay_repl_flush(t->repl, err, errlen)))
                        return rc;
        }
        if (!t->reader_gone && fflush(out) != 0 && (rc = out_failed(t, err, errlen)))
                return rc;
        /* The slot is dropped with the connection; a clean end just says goodbye first. */
        return relay_repl_stop(t->repl, 2000, NULL, err, errlen);
}
