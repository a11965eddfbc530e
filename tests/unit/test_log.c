/*
 * test_log.c - the log sink's lines as systemd's journal reads them: with
 * stderr connected to the journal (JOURNAL_STREAM names stderr's device and
 * inode, as systemd sets it for a unit), every line, continuation lines
 * included, starts with the sd-daemon priority prefix ("<4>" for a warning),
 * which journald turns into the entry's PRIORITY; without it (before: always)
 * a FATAL line was stored at info and journalctl -p warning showed nothing.
 * Elsewhere (a terminal, a file, docker logs, or JOURNAL_STREAM naming
 * another stream, as a child of such a unit inherits it) the lines are
 * unchanged.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "relay/log.h"
#include "tap.h"

static relay_log_format_t g_format = RELAY_LOG_TEXT;
static relay_log_level_t g_min = RELAY_LOG_INFO;

static void configure(relay_log_level_t min, relay_log_format_t format)
{
        g_min = min;
        g_format = format;
        relay_log_configure(min, format);
}

/* What one relay_log() call (relay_log_signal_safe() when safe) writes to
 * stderr, with JOURNAL_STREAM set to journal ("self": stderr's own
 * device:inode; "sibling": stderr's device, another inode, as another
 * socket's stream; NULL: unset). */
static char *logged_by(bool safe, const char *journal, relay_log_level_t level, const char *msg)
{
        static char buf[4096];
        char js[64];
        struct stat st;
        FILE *f = tmpfile();
        int saved = dup(STDERR_FILENO);
        size_t n;

        if (f == NULL || saved < 0)
                tap_bail("could not redirect stderr");
        fflush(stderr);
        dup2(fileno(f), STDERR_FILENO);
        if (journal == NULL) {
                unsetenv("JOURNAL_STREAM");
        } else {
                bool sibling = strcmp(journal, "sibling") == 0;
                if ((sibling || strcmp(journal, "self") == 0) && fstat(STDERR_FILENO, &st) == 0) {
                        snprintf(js, sizeof(js), "%llu:%llu", (unsigned long long)st.st_dev,
                                 (unsigned long long)st.st_ino + (sibling ? 1 : 0));
                        journal = js;
                }
                setenv("JOURNAL_STREAM", journal, 1);
        }
        if (safe) {
                /* It reads JOURNAL_STREAM when configured, as relay.c does
                 * before it installs its handlers. */
                relay_log_configure(g_min, g_format);
                relay_log_signal_safe(level, msg);
        } else {
                relay_log(level, "%s", msg);
        }
        fflush(stderr);
        dup2(saved, STDERR_FILENO);
        close(saved);
        unsetenv("JOURNAL_STREAM");
        rewind(f);
        n = fread(buf, 1, sizeof(buf) - 1, f);
        buf[n] = '\0';
        fclose(f);
        return buf;
}

static char *logged(const char *journal, relay_log_level_t level, const char *msg)
{
        return logged_by(false, journal, level, msg);
}

/*
 * relay_log_signal_safe() writes what relay_log() does: the same prefix,
 * the same line after the timestamp, a timestamp of the same shape (digits
 * where relay_log()'s has digits) and one line. tslen: the timestamp's
 * length, from where it starts after the prefix (and "{\"ts\":\"" in JSON).
 */
static void same_line(const char *journal, relay_log_level_t level, const char *msg,
                      size_t tsat, size_t tslen, const char *what)
{
        char want[4096];
        snprintf(want, sizeof(want), "%s", logged(journal, level, msg));
        const char *got = logged_by(true, journal, level, msg);
        bool same = strlen(got) == strlen(want) && strlen(got) > tsat + tslen &&
                    strcmp(got + tsat + tslen, want + tsat + tslen) == 0 &&
                    strncmp(got, want, tsat) == 0;
        for (size_t i = tsat; same && i < tsat + tslen; i++)
                same = (got[i] >= '0' && got[i] <= '9') == (want[i] >= '0' && want[i] <= '9') &&
                       (got[i] >= '0' && got[i] <= '9' ? true : got[i] == want[i]);
        if (!ok(same, "signal-safe, %s: the line relay_log() writes", what))
                tap_diag("got: %s  relay_log(): %s", got, want);
}

/* The line without its timestamp: what follows the prefix ("" or "<N>"). */
static void starts(const char *line, const char *prefix, const char *what)
{
        ok(strncmp(line, prefix, strlen(prefix)) == 0 &&
                   (line[strlen(prefix)] >= '0' && line[strlen(prefix)] <= '9'),
           "%s: the line starts with \"%s\" and then the timestamp (%.26s)", what, prefix, line);
}

static void test_text(void)
{
        relay_log_configure(RELAY_LOG_DEBUG, RELAY_LOG_TEXT);
        starts(logged("self", RELAY_LOG_WARNING, "w"), "<4>", "journal, warning");
        starts(logged("self", RELAY_LOG_ERROR, "e"), "<3>", "journal, error");
        starts(logged("self", RELAY_LOG_FATAL, "f"), "<2>", "journal, fatal");
        starts(logged("self", RELAY_LOG_INFO, "i"), "<6>", "journal, info");
        starts(logged("self", RELAY_LOG_DEBUG, "d"), "<7>", "journal, debug");
        ok(strstr(logged("self", RELAY_LOG_WARNING, "w"), "WARNING:  w\n") != NULL,
           "journal: the rest of the line is unchanged");

        /* libpq's two-line messages: each line is an entry of the journal. */
        const char *two = logged("self", RELAY_LOG_WARNING, "could not connect\nIs the server running?");
        ok(strstr(two, "could not connect\n<4>\tIs the server running?\n") != NULL,
           "journal: a continuation line has the prefix too, then the tab");

        starts(logged(NULL, RELAY_LOG_WARNING, "w"), "", "no JOURNAL_STREAM");
        starts(logged("1:1", RELAY_LOG_WARNING, "w"), "", "JOURNAL_STREAM of another stream");
        starts(logged("sibling", RELAY_LOG_WARNING, "w"), "",
               "JOURNAL_STREAM of another stream on stderr's device");
        starts(logged("self-ish", RELAY_LOG_WARNING, "w"), "", "JOURNAL_STREAM that does not parse");
        ok(strstr(logged(NULL, RELAY_LOG_WARNING, "a\nb"), "a\n\tb\n") != NULL,
           "no journal: a continuation line is a tab, as before");
}

static void test_json(void)
{
        relay_log_configure(RELAY_LOG_INFO, RELAY_LOG_JSON);
        const char *line = logged("self", RELAY_LOG_ERROR, "e");
        ok(strncmp(line, "<3>{\"ts\":", 9) == 0, "journal, json: \"<3>\" before the object (%.30s)", line);
        line = logged(NULL, RELAY_LOG_ERROR, "e");
        ok(strncmp(line, "{\"ts\":", 6) == 0, "no journal, json: the object alone (%.30s)", line);
        ok(logged("self", RELAY_LOG_DEBUG, "below the level")[0] == '\0',
           "journal: a record below log.level writes nothing, no prefix alone");
        relay_log_configure(RELAY_LOG_INFO, RELAY_LOG_TEXT);
}

/* The second stop signal's line (relay.c's handler) is a record like any
 * other: a JSON object under log.format = json (0147), with the journal's
 * priority. Before, a fixed text line written to stderr as is. */
static void test_signal_safe(void)
{
        const char *m = "second stop signal: exiting at once with status 1; \"q\" \\";
        configure(RELAY_LOG_INFO, RELAY_LOG_TEXT);
        same_line(NULL, RELAY_LOG_FATAL, m, 0, 23, "text");
        same_line("self", RELAY_LOG_FATAL, m, 3, 23, "text, journal (<2>)");
        same_line("self", RELAY_LOG_WARNING, m, 3, 23, "text, journal, warning (<4>)");
        same_line("1:1", RELAY_LOG_FATAL, m, 0, 23, "text, JOURNAL_STREAM of another stream");
        same_line("sibling", RELAY_LOG_FATAL, m, 0, 23,
                  "text, JOURNAL_STREAM of another stream on stderr's device");
        configure(RELAY_LOG_INFO, RELAY_LOG_JSON);
        same_line(NULL, RELAY_LOG_FATAL, m, 7, 24, "json");
        same_line("self", RELAY_LOG_FATAL, m, 10, 24, "json, journal");
        configure(RELAY_LOG_ERROR, RELAY_LOG_TEXT);
        ok(logged_by(true, "self", RELAY_LOG_WARNING, "w")[0] == '\0',
           "signal-safe: a record below log.level writes nothing");
        configure(RELAY_LOG_INFO, RELAY_LOG_TEXT);
}

/*
 * relay_log_utc_date(), the signal-safe line's date, against gmtime_r() on
 * every day from the epoch to 2200 (leap years, 2100 not one): same_line()
 * compares it on the day the test runs only.
 */
static void test_dates(void)
{
        long long bad = -1;
        int y = 0, m = 0, d = 0;
        struct tm tm;
        for (long long day = 0; day < 84006 && bad < 0; day++) {
                long long secs = day * 86400 + day * 7919 % 86400;
                time_t t = (time_t)secs;
                relay_log_utc_date(secs, &y, &m, &d);
                if (gmtime_r(&t, &tm) == NULL || y != tm.tm_year + 1900 ||
                    m != tm.tm_mon + 1 || d != tm.tm_mday)
                        bad = secs;
        }
        if (!ok(bad < 0, "the signal-safe date is gmtime_r()'s from 1970 to 2200"))
                tap_diag("at %lld: %04d-%02d-%02d, gmtime_r(): %04d-%02d-%02d", bad, y, m, d,
                         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
}

int main(void)
{
        test_text();
        test_json();
        test_signal_safe();
        test_dates();
        return done_testing();
}
