/*
 * log.c - the process's log sink: one line per record on stderr, either
 * PostgreSQL-like text or one JSON object per line for log shippers.
 *
 * The configured level and format are the only static state: they describe
 * the process's one stderr, not any connection, so there is nothing to pass
 * around. Each record is formatted completely and written with a single
 * fwrite() on the unbuffered stderr, so concurrent writers (librdkafka's
 * threads, if ever routed here) cannot interleave within a line.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "relay/log.h"

static relay_log_level_t min_level = RELAY_LOG_INFO;
static bool json_format;

/* Indexed by relay_log_level_t. */
static const struct {
        const char *name;  /* in JSON */
        const char *label; /* in text lines, as PostgreSQL spells it */
        const char *prio;  /* sd-daemon prefix: the syslog priority journald records */
} levels[] = {
        {"debug", "DEBUG", "<7>"},
        {"info", "INFO", "<6>"},
        {"warning", "WARNING", "<4>"},
        {"error", "ERROR", "<3>"},
        {"fatal", "FATAL", "<2>"},
};

/*
 * Is stderr the systemd journal? systemd sets JOURNAL_STREAM to the
 * "device:inode" of the stream it connects to stdout and stderr; a match
 * (not merely the variable, which a child started from a shell in such a
 * service inherits) means each line may start with "<N>", the syslog
 * priority journald records and strips (sd-daemon(3)). Without it every
 * line, FATAL included, is stored at the unit's default priority (info),
 * and journalctl -p warning shows none of them. Asked at each record, so
 * nothing about stderr is kept here.
 */
const char *relay_log_journal_prefix(relay_log_level_t level)
{
        const char *js = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;
        int end = 0;

        if ((int)level < RELAY_LOG_DEBUG || level > RELAY_LOG_FATAL)
                level = RELAY_LOG_ERROR;
        if (js == NULL || sscanf(js, "%llu:%llu%n", &dev, &ino, &end) != 2 || js[end] != '\0' ||
            fstat(STDERR_FILENO, &st) != 0 || (unsigned long long)st.st_dev != dev ||
            (unsigned long long)st.st_ino != ino)
                return "";
        return levels[level].prio;
}

/* JOURNAL_STREAM as read by relay_log_configure(), for relay_log_signal_safe(),
 * which may not call getenv(). */
static bool journal_known;
static unsigned long long journal_dev, journal_ino;

void relay_log_configure(relay_log_level_t level, relay_log_format_t format)
{
        const char *js = getenv("JOURNAL_STREAM");
        int end = 0;

        min_level = level;
        json_format = format == RELAY_LOG_JSON;
        journal_known = js != NULL &&
                        sscanf(js, "%llu:%llu%n", &journal_dev, &journal_ino, &end) == 2 &&
                        js[end] == '\0';
}

/* Appends s to b[*w..cap), as much as fits; the JSON escape of '"' and '\\'
 * when json (msg is a fixed string: no other character needs one). */
static void put(char *b, size_t *w, size_t cap, const char *s, bool json)
{
        for (; *s && *w < cap; s++) {
                if (json && (*s == '"' || *s == '\\') && *w + 1 < cap)
                        b[(*w)++] = '\\';
                b[(*w)++] = *s;
        }
}

/* Appends v in decimal, zero-padded to width digits. */
static void put_num(char *b, size_t *w, size_t cap, unsigned long long v, int width)
{
        char d[24];
        int n = 0;
        do {
                d[n++] = (char)('0' + v % 10);
                v /= 10;
        } while (v > 0 && n < (int)sizeof(d));
        while (n < width && n < (int)sizeof(d))
                d[n++] = '0';
        while (n > 0 && *w < cap)
                b[(*w)++] = d[--n];
}

void relay_log_utc_date(long long secs, int *year, int *month, int *day)
{
        /* H. Hinnant's civil_from_days. */
        long long z = (secs > 0 ? secs : 0) / 86400 + 719468;
        long long era = z / 146097, doe = z - era * 146097;
        long long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
        long long doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
        long long mon = mp < 10 ? mp + 3 : mp - 9;
        *day = (int)(doy - (153 * mp + 2) / 5 + 1);
        *month = (int)mon;
        *year = (int)(yoe + era * 400 + (mon <= 2));
}

void relay_log_signal_safe(relay_log_level_t level, const char *msg)
{
        char b[512];
        size_t w = 0, cap = sizeof(b) - 1;
        struct timespec now;
        struct stat st;

        if ((int)level < RELAY_LOG_DEBUG || level > RELAY_LOG_FATAL)
                level = RELAY_LOG_ERROR;
        if (level < min_level)
                return;
        if (journal_known && fstat(STDERR_FILENO, &st) == 0 &&
            (unsigned long long)st.st_dev == journal_dev &&
            (unsigned long long)st.st_ino == journal_ino)
                put(b, &w, cap, levels[level].prio, false);
        clock_gettime(CLOCK_REALTIME, &now);
        long long secs = now.tv_sec > 0 ? (long long)now.tv_sec : 0, sod = secs % 86400;
        int year, mon, day;
        relay_log_utc_date(secs, &year, &mon, &day);

        put(b, &w, cap, json_format ? "{\"ts\":\"" : "", false);
        put_num(b, &w, cap, (unsigned long long)year, 4);
        put(b, &w, cap, "-", false);
        put_num(b, &w, cap, (unsigned long long)mon, 2);
        put(b, &w, cap, "-", false);
        put_num(b, &w, cap, (unsigned long long)day, 2);
        put(b, &w, cap, json_format ? "T" : " ", false);
        put_num(b, &w, cap, (unsigned long long)(sod / 3600), 2);
        put(b, &w, cap, ":", false);
        put_num(b, &w, cap, (unsigned long long)(sod / 60 % 60), 2);
        put(b, &w, cap, ":", false);
        put_num(b, &w, cap, (unsigned long long)(sod % 60), 2);
        put(b, &w, cap, ".", false);
        put_num(b, &w, cap, (unsigned long long)(now.tv_nsec / 1000000), 3);
        if (json_format) {
                put(b, &w, cap, "Z\",\"level\":\"", false);
                put(b, &w, cap, levels[level].name, false);
                put(b, &w, cap, "\",\"pid\":", false);
                put_num(b, &w, cap, (unsigned long long)getpid(), 1);
                put(b, &w, cap, ",\"msg\":\"", false);
                put(b, &w, cap, msg, true);
                put(b, &w, cap, "\"}", false);
        } else {
                put(b, &w, cap, " UTC [", false);
                put_num(b, &w, cap, (unsigned long long)getpid(), 1);
                put(b, &w, cap, "] ", false);
                put(b, &w, cap, levels[level].label, false);
                put(b, &w, cap, ":  ", false);
                put(b, &w, cap, msg, false);
        }
        b[w++] = '\n';
        if (write(STDERR_FILENO, b, w) < 0) {
                /* nothing more to do: the caller exits anyway */
        }
}

/* The whole JSON line including '\n' (after prio, "" or "<N>"), or NULL
 * (then the caller falls back to text). */
static char *json_line(const char *ts, relay_log_level_t level, const char *prio, const char *msg)
{
        /* Messages quote server and broker text we do not control, and
         * jansson refuses invalid UTF-8 (the record would be lost). */
        char *clean = relay_utf8_sanitize(msg);
        json_t *obj;
        char *dump, *line;
        size_t n;

        if (clean == NULL)
                return NULL;
        obj = json_pack("{s:s, s:s, s:I, s:s}", "ts", ts, "level", levels[level].name, "pid",
                        (json_int_t)getpid(), "msg", clean);
        free(clean);
        if (obj == NULL)
                return NULL;
        /* Insertion order is kept (jansson >= 2.8), so ts comes first as documented. */
        dump = json_dumps(obj, JSON_COMPACT);
        json_decref(obj);
        if (dump == NULL)
                return NULL;
        n = strlen(dump);
        size_t pn = strlen(prio);
        line = malloc(pn + n + 2);
        if (line != NULL) {
                memcpy(line, prio, pn);
                memcpy(line + pn, dump, n);
                line[pn + n] = '\n';
                line[pn + n + 1] = '\0';
        }
        free(dump);
        return line;
}

/*
 * Text line: "2026-11-29 20:41:07.123 UTC [pid] LEVEL:  message\n" after
 * prio ("" or "<N>"); NULL on ENOMEM. As PostgreSQL's server log does, a tab
 * follows every newline inside the message, so a continuation line is never
 * mistaken for a new record; journald stores each line as an entry of its
 * own, so a continuation line starts with prio too.
 */
static char *text_line(const char *ts, relay_log_level_t level, const char *prio, const char *msg)
{
        char head[128];
        int hn = snprintf(head, sizeof(head), "%s%s UTC [%ld] %s:  ", prio, ts, (long)getpid(),
                          levels[level].label);
        size_t len = strlen(msg), pn = strlen(prio), extra = 0, w;
        char *line;

        if (hn < 0 || (size_t)hn >= sizeof(head))
                return NULL;
        for (size_t i = 0; i < len; i++)
                extra += msg[i] == '\n';
        line = malloc((size_t)hn + len + extra * (pn + 1) + 2);
        if (line == NULL)
                return NULL;
        memcpy(line, head, (size_t)hn);
        w = (size_t)hn;
        for (size_t i = 0; i < len; i++) {
                line[w++] = msg[i];
                if (msg[i] == '\n') {
                        memcpy(line + w, prio, pn);
                        w += pn;
                        line[w++] = '\t';
                }
        }
        line[w++] = '\n';
        line[w] = '\0';
        return line;
}

void relay_log(relay_log_level_t level, const char *fmt, ...)
{
        int saved_errno = errno; /* callers log and then inspect errno, or use %m */
        char stackbuf[1024];
        char *big = NULL, *line = NULL, *msg = stackbuf;
        size_t len;
        char ts[64];
        int ms;
        struct timespec now;
        struct tm tm;
        va_list ap;
        int n;

        if ((int)level < RELAY_LOG_DEBUG || level > RELAY_LOG_FATAL)
                level = RELAY_LOG_ERROR;
        if (level < min_level)
                return;

        va_start(ap, fmt);
        n = vsnprintf(stackbuf, sizeof(stackbuf), fmt, ap);
        va_end(ap);
        if (n < 0) {
                snprintf(stackbuf, sizeof(stackbuf), "(log message could not be formatted)");
        } else if ((size_t)n >= sizeof(stackbuf)) {
                big = malloc((size_t)n + 1);
                if (big != NULL) {
                        errno = saved_errno; /* for %m in the second pass */
                        va_start(ap, fmt);
                        vsnprintf(big, (size_t)n + 1, fmt, ap);
                        va_end(ap);
                        msg = big;
                } /* else: log the truncated message rather than nothing */
        }

        /* libpq's messages end in a newline; the line ends here anyway. */
        len = strlen(msg);
        while (len > 0 && (msg[len - 1] == '\n' || msg[len - 1] == '\r'))
                msg[--len] = '\0';

        const char *prio = relay_log_journal_prefix(level);
        clock_gettime(CLOCK_REALTIME, &now);
        gmtime_r(&now.tv_sec, &tm);
        ms = (int)(now.tv_nsec / 1000000);
        if (json_format) {
                char base[32];
                strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
                snprintf(ts, sizeof(ts), "%s.%03dZ", base, ms);
                line = json_line(ts, level, prio, msg);
        }
        if (line == NULL) {
                char base[32];
                strftime(base, sizeof(base), "%Y-%m-%d %H:%M:%S", &tm);
                snprintf(ts, sizeof(ts), "%s.%03d", base, ms);
                line = text_line(ts, level, prio, msg);
        }
        if (line != NULL) {
                fwrite(line, 1, strlen(line), stderr);
                free(line);
        } else {
                /* Out of memory: still say something, in pieces if need be. */
                fprintf(stderr, "%s%s UTC %s:  %s\n", prio, ts, levels[level].label, msg);
        }
        fflush(stderr);
        free(big);
        errno = saved_errno;
}

void relay_log_server_notice(void *arg, const char *message)
{
        static const struct {
                const char *prefix;
                relay_log_level_t level;
        } sev[] = {
                {"WARNING:", RELAY_LOG_WARNING}, {"NOTICE:", RELAY_LOG_INFO},
                {"INFO:", RELAY_LOG_INFO},       {"LOG:", RELAY_LOG_INFO},
                {"DEBUG:", RELAY_LOG_DEBUG},
        };
        /* Another severity word (lc_messages in another language): a warning,
         * so that it is not lost below the default level. */
        relay_log_level_t level = RELAY_LOG_WARNING;
        char buf[1024];
        size_t n = 0;

        (void)arg;
        for (size_t i = 0; i < sizeof(sev) / sizeof(sev[0]); i++) {
                size_t len = strlen(sev[i].prefix);
                if (strncmp(message, sev[i].prefix, len) == 0) {
                        level = sev[i].level;
                        message += len;
                        break;
                }
        }
        while (*message == ' ')
                message++;
        /* DETAIL and HINT lines join the first one: one log line per notice. */
        for (; *message != '\0' && n + 3 < sizeof(buf); message++) {
                if (*message != '\n') {
                        buf[n++] = *message;
                } else if (message[1] != '\0') {
                        buf[n++] = ';';
                        buf[n++] = ' ';
                }
        }
        buf[n] = '\0';
        relay_log(level, "PostgreSQL server: %s", buf);
}

void relay_log_hangups(const char *prog, const volatile sig_atomic_t *received,
                       sig_atomic_t *logged)
{
        for (sig_atomic_t n = *received; *logged != n; (*logged)++)
                relay_log_warning("SIGHUP received, but %s does not reload its configuration: "
                                  "restart it (SIGTERM stops it cleanly) to apply a changed one; "
                                  "ignoring",
                                  prog);
}
