/*
 * test_repl.c - the replication client against a scripted server, without
 * a PostgreSQL: what the connection asks for at startup given the user's
 * conninfo, and what relay_repl_read() makes of the ways a stream can end.
 *
 * A child process listens on a Unix socket in a fresh directory and speaks
 * just enough of the protocol (v3, trust authentication, server_version
 * 15.0) for relay_repl_connect() and relay_repl_start(): each query gets
 * one row of text columns (SHOW wal_level: "logical"; IDENTIFY_SYSTEM:
 * systemid, timeline, xlogpos, dbname; SHOW wal_sender_timeout: "60s"),
 * START_REPLICATION gets CopyBothResponse and then what the case scripts. The server bytes are
 * written out field by field, as the protocol documentation lays them out
 * (protocol-message-formats).
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "relay/config.h"
#include "relay/repl.h"
#include "relay/settings.h"
#include "tap.h"

/* What the server sends once the stream started. */
typedef enum {
        AFTER_NOTHING,  /* no START_REPLICATION expected */
        AFTER_COPYDONE, /* CopyDone: the server ends its half of the COPY */
        AFTER_NO_PUBLICATION, /* the walsender's error for a publication dropped meanwhile */
        START_SYNCED, /* START_REPLICATION refused (55000): a slot synchronized from the primary */
        START_LOST,   /* START_REPLICATION refused (55000): the slot is invalidated */
        /* lc_messages = de_DE.UTF-8 (PostgreSQL 15's translations): */
        AFTER_NO_PUBLICATION_DE, /* the walsender's 42704 for the publication, slot there */
        START_NO_SLOT_DE,        /* START_REPLICATION refused (42704): the slot is gone */
        START_UNDEFINED_DE,      /* START_REPLICATION refused (42704), the slot there */
} script_t;

static char dir[64];
static char sock[100];
static char startup_file[100]; /* the StartupMessage's parameters, "name=value" lines */

/* --- the scripted server (child process) ------------------------------- */

/* All n bytes through read (rd) or write; -1 at EOF or on an error. */
static int full(int fd, void *p, size_t n, bool rd)
{
        char *c = p;
        while (n > 0) {
                ssize_t k = rd ? read(fd, c, n) : write(fd, c, n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return -1;
                c += k;
                n -= (size_t)k;
        }
        return 0;
}

static int rfull(int fd, void *p, size_t n)
{
        return full(fd, p, n, true);
}

static int wfull(int fd, const void *p, size_t n)
{
        return full(fd, (void *)(uintptr_t)p, n, false);
}

static void put32(unsigned char *p, uint32_t v)
{
        p[0] = (unsigned char)(v >> 24);
        p[1] = (unsigned char)(v >> 16);
        p[2] = (unsigned char)(v >> 8);
        p[3] = (unsigned char)v;
}

/* One message: Byte1 type, Int32 length (itself included), body. */
static void msg(int fd, char type, const void *body, size_t n)
{
        unsigned char hdr[5];
        hdr[0] = (unsigned char)type;
        put32(hdr + 1, (uint32_t)(n + 4));
        if (wfull(fd, hdr, 5) || (n && wfull(fd, body, n)))
                _exit(3);
}

/* One row of n text columns (values NULL: none): RowDescription, DataRow,
 * CommandComplete, ReadyForQuery. */
static void row(int fd, int n, const char *const *values)
{
        unsigned char b[1024];
        size_t k = 0;

        /* RowDescription: Int16 n; per column String name ("v"), Int32 table
         * 0, Int16 attnum 0, Int32 type 25 (text), Int16 size -1, Int32
         * typmod -1, Int16 format 0 */
        b[k++] = 0;
        b[k++] = (unsigned char)n;
        for (int i = 0; i < n; i++) {
                memcpy(b + k, "v", 2);
                k += 2;
                put32(b + k, 0), k += 4;
                b[k++] = 0, b[k++] = 0;
                put32(b + k, 25), k += 4;
                b[k++] = 0xff, b[k++] = 0xff;
                put32(b + k, 0xffffffff), k += 4;
                b[k++] = 0, b[k++] = 0;
        }
        msg(fd, 'T', b, k);
        if (values == NULL) {
                msg(fd, 'C', "SELECT 0", 9);
                msg(fd, 'Z', "I", 1);
                return;
        }
        /* DataRow: Int16 n; per column Int32 length, bytes */
        k = 0;
        b[k++] = 0;
        b[k++] = (unsigned char)n;
        for (int i = 0; i < n; i++) {
                size_t vl = strlen(values[i]);
                put32(b + k, (uint32_t)vl), k += 4;
                memcpy(b + k, values[i], vl), k += vl;
        }
        msg(fd, 'D', b, k);
        msg(fd, 'C', "SELECT 1", 9);
        msg(fd, 'Z', "I", 1);
}

static void one_row(int fd, const char *value)
{
        row(fd, 1, &value);
}

/* StartupMessage: Int32 length, Int32 protocol 3.0, then String name,
 * String value pairs and a final NUL. Written to startup_file. */
static void startup(int fd)
{
        unsigned char hdr[4], *body;
        uint32_t len;

        if (rfull(fd, hdr, 4))
                _exit(3);
        len = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3];
        if (len < 9 || len > 10000 || !(body = malloc(len)) || rfull(fd, body, len - 4))
                _exit(3);
        body[len - 4 - 1] = '\0';
        FILE *f = fopen(startup_file, "w");
        if (!f)
                _exit(3);
        for (size_t i = 4; i < len - 5 && body[i];) {
                const char *name = (const char *)body + i;
                i += strlen(name) + 1;
                const char *value = i < len - 4 ? (const char *)body + i : "";
                i += strlen(value) + 1;
                fprintf(f, "%s=%s\n", name, value);
        }
        fclose(f);
        free(body);
}

static void serve(int fd, script_t script)
{
        unsigned char hdr[5], *body;
        uint32_t len;

        startup(fd);
        unsigned char auth[4] = {0, 0, 0, 0}; /* AuthenticationOk */
        msg(fd, 'R', auth, 4);
        msg(fd, 'S', "server_version\00015.0", 20);
        msg(fd, 'S', "integer_datetimes\0on", 21);
        unsigned char key[8] = {0, 0, 0, 42, 0, 0, 0, 7}; /* BackendKeyData: pid, secret */
        msg(fd, 'K', key, 8);
        msg(fd, 'Z', "I", 1);

        for (;;) {
                if (rfull(fd, hdr, 5))
                        _exit(0); /* the client went away */
                len = (uint32_t)hdr[1] << 24 | (uint32_t)hdr[2] << 16 | (uint32_t)hdr[3] << 8 |
                      hdr[4];
                if (len < 4 || len > 100000 || !(body = malloc(len - 4 + 1)) ||
                    rfull(fd, body, len - 4))
                        _exit(3);
                body[len - 4] = '\0';
                if (hdr[0] == 'X')
                        _exit(0);
                if (hdr[0] != 'Q') {
                        free(body); /* CopyData (status updates), CopyDone: not answered */
                        continue;
                }
                const char *q = (const char *)body;
                if (strncmp(q, "START_REPLICATION", 17) == 0 &&
                    (script == START_NO_SLOT_DE || script == START_UNDEFINED_DE)) {
                        /* As PostgreSQL 15 says it with lc_messages = de_DE.UTF-8
                         * (postgres-15.mo); no English word the relay could match. */
                        static const char e[] =
                                "SERROR\0VERROR\0C42704\0"
                                "MReplikations-Slot \302\273outbox_relay\302\253 existiert nicht\0"
                                "Fslot.c\0L456\0RReplicationSlotAcquire\0";
                        msg(fd, 'E', e, sizeof(e));
                        msg(fd, 'Z', "I", 1);
                } else if (strncmp(q, "SELECT coalesce(wal_status = 'lost'", 35) == 0) {
                        /* The slot's state: no row when it is gone, else
                         * whether it is invalidated. */
                        if (script == START_NO_SLOT_DE)
                                row(fd, 1, NULL);
                        else
                                one_row(fd, script == START_LOST ? "t" : "f");
                } else if (strncmp(q, "START_REPLICATION", 17) == 0 &&
                           (script == START_SYNCED || script == START_LOST)) {
                        /* As PostgreSQL 17 says them (CreateDecodingContext()). */
                        static const char synced[] =
                                "SERROR\0VERROR\0C55000\0"
                                "Mcannot use replication slot \"outbox_relay\" for logical "
                                "decoding\0"
                                "DThis replication slot is being synchronized from the primary "
                                "server.\0"
                                "HSpecify another replication slot.\0";
                        static const char lost[] =
                                "SERROR\0VERROR\0C55000\0"
                                "Mcan no longer get changes from replication slot "
                                "\"outbox_relay\"\0"
                                "DThis slot has been invalidated because it exceeded the maximum "
                                "reserved size.\0";
                        if (script == START_SYNCED)
                                msg(fd, 'E', synced, sizeof(synced));
                        else
                                msg(fd, 'E', lost, sizeof(lost));
                        msg(fd, 'Z', "I", 1);
                } else if (strncmp(q, "START_REPLICATION", 17) == 0) {
                        /* CopyBothResponse: Int8 format 0, Int16 0 columns */
                        unsigned char cb[3] = {0, 0, 0};
                        msg(fd, 'W', cb, 3);
                        switch (script) {
                        case AFTER_NOTHING:
                        case START_SYNCED:
                        case START_LOST:
                        case START_NO_SLOT_DE:
                        case START_UNDEFINED_DE:
                                _exit(4);
                        case AFTER_NO_PUBLICATION_DE: {
                                static const char e[] =
                                        "SERROR\0VERROR\0C42704\0"
                                        "MPublikation \302\273outbox_pub\302\253 existiert nicht\0"
                                        "WSlot \302\273outbox_relay\302\253, Ausgabe-Plugin "
                                        "\302\273pgoutput\302\253, im Callback change, "
                                        "zugeh\303\266rige LSN 0/2178858\0"
                                        "Fpg_publication.c\0L1043\0Rget_publication_oid\0";
                                msg(fd, 'E', e, sizeof(e));
                                msg(fd, 'Z', "I", 1);
                                break;
                        }
                        case AFTER_COPYDONE:
                                msg(fd, 'c', NULL, 0);
                                break;
                        case AFTER_NO_PUBLICATION: {
                                /* ErrorResponse: Byte1 field type, String value, ...,
                                 * Byte1 0; as PostgreSQL 15 says it (manual run, see
                                 * test_publication_gone), then ReadyForQuery: the
                                 * walsender returns to its command loop. */
                                static const char e[] =
                                        "SERROR\0VERROR\0C42704\0"
                                        "Mpublication \"outbox_pub\" does not exist\0"
                                        "Wslot \"outbox_relay\", output plugin \"pgoutput\", in the "
                                        "change callback, associated LSN 0/2178858\0"
                                        "Fpg_publication.c\0L1043\0Rget_publication_oid\0";
                                msg(fd, 'E', e, sizeof(e)); /* sizeof: the final 0 */
                                msg(fd, 'Z', "I", 1);
                                break;
                        }
                        }
                } else if (strcmp(q, "SHOW wal_level") == 0) {
                        one_row(fd, "logical");
                } else if (strcmp(q, "SHOW wal_sender_timeout") == 0) {
                        one_row(fd, "60s");
                } else if (strcmp(q, "IDENTIFY_SYSTEM") == 0) {
                        /* systemid, timeline, xlogpos, dbname */
                        static const char *const id[] = {"7000000000000000001", "1",
                                                          "0/1A2B3C4", "app"};
                        row(fd, 4, id);
                } else {
                        _exit(5); /* a query this script does not know */
                }
                free(body);
        }
}

/* --- the client ---------------------------------------------------------- */

/* Start a server for one connection; its pid. */
static pid_t server(script_t script)
{
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        int ls = socket(AF_UNIX, SOCK_STREAM, 0);

        snprintf(a.sun_path, sizeof(a.sun_path), "%s", sock);
        unlink(sock);
        if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(ls, 1) != 0)
                tap_bail("could not listen on %s: %s", sock, strerror(errno));
        pid_t pid = fork();
        if (pid < 0)
                tap_bail("fork: %s", strerror(errno));
        if (pid == 0) {
                int fd = accept(ls, NULL, NULL);
                if (fd < 0)
                        _exit(3);
                serve(fd, script);
                _exit(0);
        }
        close(ls);
        return pid;
}

/* Settings with this postgres.conninfo. */
static relay_settings_t *settings_ci(const char *conninfo)
{
        relay_config_t *c = NULL;
        relay_settings_t *set = NULL;
        char err[RELAY_ERRBUF];

        if (relay_config_new(&c) != 0 ||
            relay_config_set(c, "postgres.conninfo", conninfo, "test", err, sizeof(err)) != 0 ||
            relay_settings_load(&set, c, err, sizeof(err)) != 0)
                tap_bail("settings: %s", err);
        relay_config_free(c);
        return set;
}

/* Settings whose postgres.conninfo is the scripted server's keyword list, then extra. */
static relay_settings_t *settings(const char *extra)
{
        char conninfo[512];

        snprintf(conninfo, sizeof(conninfo),
                 "host=%s port=5432 user=relay dbname=app sslmode=disable gssencmode=disable "
                 "connect_timeout=5 %s",
                 dir, extra);
        return settings_ci(conninfo);
}

/* The StartupMessage's value of name, from startup_file ("(absent)" when not sent). */
static const char *startup_param(const char *name)
{
        static char line[1024];
        size_t n = strlen(name);
        FILE *f = fopen(startup_file, "r");

        while (f && fgets(line, sizeof(line), f)) {
                line[strcspn(line, "\n")] = '\0';
                if (strncmp(line, name, n) == 0 && line[n] == '=') {
                        fclose(f);
                        return line + n + 1;
                }
        }
        if (f)
                fclose(f);
        return "(absent)";
}

#define RELAY_OPTIONS                                                                              \
        "-c datestyle=ISO -c intervalstyle=postgres -c extra_float_digits=3 -c TimeZone=UTC "      \
        "-c bytea_output=hex -c idle_in_transaction_session_timeout=0"

/*
 * What the relay's connection asks the server for, given the user's
 * conninfo: replication=database whatever the user wrote, the user's
 * database, role, application_name (PostgreSQL matches
 * synchronous_standby_names against it; "outbox-relay" only when the user
 * named none) and options, the relay's session settings after the user's.
 */
static void test_startup(const char *what, relay_settings_t *set, const char *app,
                         const char *options)
{
        char err[RELAY_ERRBUF] = "";
        relay_repl_t *r = NULL;
        int status;

        unlink(startup_file);
        pid_t pid = server(AFTER_NOTHING);
        int rc = relay_repl_connect(&r, set, NULL, err, sizeof(err));
        is_int(rc, 0, "%s: connects", what);
        if (rc)
                tap_diag("%s", err);
        relay_repl_free(r);
        waitpid(pid, &status, 0);
        is_str(startup_param("replication"), "database", "%s: replication=database", what);
        is_str(startup_param("database"), "app", "%s: the user's database", what);
        is_str(startup_param("user"), "relay", "%s: the user's role", what);
        is_str(startup_param("application_name"), app, "%s: application_name %s", what, app);
        is_str(startup_param("options"), options, "%s: options", what);
        is_str(startup_param("client_encoding"), "UTF8", "%s: client_encoding UTF8", what);
        relay_settings_free(set);
}

static void on_alarm(int sig)
{
        (void)sig;
        static const char m[] = "not ok - relay_repl_read() came back within 10 s (it spins)\n";
        (void)!write(1, m, sizeof(m) - 1);
        _exit(1);
}

/* Read until relay_repl_read() says something other than "nothing yet". */
static int read_until_end(relay_repl_t *r, relay_walmsg_t *w, char *err, size_t errlen)
{
        for (;;) {
                int rc = relay_repl_read(r, w, err, errlen);
                if (rc != 0)
                        return rc;
                struct pollfd p = {.fd = relay_repl_socket(r), .events = POLLIN};
                if (poll(&p, 1, 1000) < 0 && errno != EINTR)
                        return RELAY_EIO;
                if ((rc = relay_repl_consume(r, err, errlen)))
                        return rc;
        }
}

/* Stream from a server running script until relay_repl_read() ends it
 * (10 s at most: a read that never returns fails the test); its code. */
static int stream_end(const relay_settings_t *set, script_t script, char *err, size_t errlen)
{
        relay_repl_t *r = NULL;
        relay_walmsg_t w;
        int status;

        pid_t pid = server(script);
        if (relay_repl_connect(&r, set, NULL, err, errlen) != 0 ||
            relay_repl_start(r, 0, err, errlen) != 0)
                tap_bail("the scripted server: %s", err);
        signal(SIGALRM, on_alarm);
        alarm(10);
        int rc = read_until_end(r, &w, err, errlen);
        alarm(0);
        relay_repl_free(r);
        waitpid(pid, &status, 0);
        return rc;
}

/* What IDENTIFY_SYSTEM says: the system identifier and the WAL end. */
static void test_identify(const relay_settings_t *set)
{
        char err[RELAY_ERRBUF] = "";
        relay_repl_t *r = NULL;
        int status;

        pid_t pid = server(AFTER_NOTHING);
        if (relay_repl_connect(&r, set, NULL, err, sizeof(err)) != 0)
                tap_bail("the scripted server: %s", err);
        is_str(relay_repl_system_id(r), "7000000000000000001", "IDENTIFY_SYSTEM's systemid");
        is_int(relay_repl_wal_end(r), 0x1a2b3c4, "IDENTIFY_SYSTEM's xlogpos, 0/1A2B3C4");
        relay_repl_free(r);
        waitpid(pid, &status, 0);
}

/*
 * The server ends its half of the COPY with CopyDone (a proxy, or a server
 * ending the stream on its own): libpq then reports the COPY as COPY_IN,
 * over and over, and never NULL, so draining PQgetResult() until NULL spun
 * forever at full CPU. The stream has ended: say so, once.
 */
static void test_server_copydone(const relay_settings_t *set)
{
        char err[RELAY_ERRBUF] = "";

        is_int(stream_end(set, AFTER_COPYDONE, err, sizeof(err)), RELAY_EIO,
               "the server's CopyDone ends the stream: RELAY_EIO");
        is_str(err, "replication stream ended by the server", "its message");
}

/*
 * The publication dropped while the relay streams (and maybe created
 * again): PostgreSQL 14-17 fail at the next change they decode, as of its
 * snapshot, on every restart (reproduced on 15 with
 * pg_logical_slot_peek_binary_changes after DROP PUBLICATION, an insert,
 * CREATE PUBLICATION: 42704 each time; 0127 with the relay). The slot is
 * stuck, not lost: the message said to drop it "or set slot.recreate =
 * true", which only recreates a slot whose WAL was removed.
 */
static void test_publication_gone(const relay_settings_t *set)
{
        char err[RELAY_ERRBUF] = "";

        /* A setup error (exit 3): as a lost slot (exit 5) with slot.recreate =
         * true, the relay retried for ever, saying "recreating it". */
        is_int(stream_end(set, AFTER_NO_PUBLICATION, err, sizeof(err)), RELAY_ESETUP,
               "publication gone: a setup error, not a lost slot");
        ok(strstr(err, "replication stream ended: publication \"outbox_pub\" does not exist;"),
           "publication gone: the server's words first");
        ok(strstr(err, "cannot decode past them even once it exists again"),
           "publication gone: says why creating it again is not enough");
        ok(strstr(err, "pg_replication_slot_advance('outbox_relay', pg_current_wal_lsn())"),
           "publication gone: names the fix for the slot");
        ok(!strstr(err, "slot.recreate"), "publication gone: no slot.recreate, which cannot help");
        tap_diag("%s", err);

        /* The server's message in German: its SQLSTATE and the slot, which
         * the relay asks about, still say which object is gone. */
        err[0] = '\0';
        is_int(stream_end(set, AFTER_NO_PUBLICATION_DE, err, sizeof(err)), RELAY_ESETUP,
               "publication gone, lc_messages = de_DE: a setup error, not a lost slot");
        ok(strstr(err, "pg_replication_slot_advance('outbox_relay', pg_current_wal_lsn())"),
           "publication gone, lc_messages = de_DE: names the fix for the slot");
        tap_diag("%s", err);
}

/*
 * START_REPLICATION refused with 55000 (object not in prerequisite state).
 * That is an invalidated slot, or a server that cannot decode from it for
 * a reason of its own setup: PostgreSQL 17 on a standby refuses a slot
 * synchronized from the primary (a multi-host conninfo without
 * target_session_attrs=read-write reaching the standby). Both were "slot
 * dropped or invalidated ... drop the slot or set slot.recreate = true"
 * (exit 5): on a standby the slot cannot be dropped, and with
 * slot.recreate = true the relay retried for ever.
 */
static void test_start_refused(const relay_settings_t *set)
{
        const struct {
                script_t script;
                int want;
                const char *what;
        } cases[] = {
                {START_SYNCED, RELAY_ESETUP, "a synchronized slot: a setup error, the server's hint"},
                {START_LOST, RELAY_ESLOTLOST, "an invalidated slot: lost"},
                {START_NO_SLOT_DE, RELAY_ESLOTLOST,
                 "42704 in German, the slot gone (pg_replication_slots): lost"},
                {START_UNDEFINED_DE, RELAY_ESETUP,
                 "42704 in German, the slot there: not lost, the server's words"},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char err[RELAY_ERRBUF] = "";
                relay_repl_t *r = NULL;
                int status;
                pid_t pid = server(cases[i].script);
                if (relay_repl_connect(&r, set, NULL, err, sizeof(err)) != 0)
                        tap_bail("the scripted server: %s", err);
                is_int(relay_repl_start(r, 0, err, sizeof(err)), cases[i].want, "%s", cases[i].what);
                tap_diag("%s", err);
                if (cases[i].script == START_UNDEFINED_DE)
                        ok(strstr(err, "existiert nicht") && !strstr(err, "slot.recreate"),
                           "with the server's words and no slot.recreate");
                else if (cases[i].want == RELAY_ESETUP)
                        ok(strstr(err, "HINT:  Specify another replication slot.") &&
                                   !strstr(err, "slot.recreate"),
                           "with the server's words and no slot.recreate");
                relay_repl_free(r);
                waitpid(pid, &status, 0);
        }
}

int main(void)
{
        snprintf(dir, sizeof(dir), "/tmp/relay-test-repl-XXXXXX");
        if (!mkdtemp(dir))
                tap_bail("mkdtemp: %s", strerror(errno));
        snprintf(sock, sizeof(sock), "%s/.s.PGSQL.5432", dir);
        snprintf(startup_file, sizeof(startup_file), "%s/startup", dir);
        /* The user's environment must not decide what the cases expect. */
        unsetenv("PGAPPNAME");
        unsetenv("PGOPTIONS");
        unsetenv("PGREPLICATION");
        unsetenv("PGSERVICE");
        unsetenv("PGSERVICEFILE");

        test_startup("keyword list", settings(""), "outbox-relay", RELAY_OPTIONS);
        test_startup("keyword list with application_name and options",
                     settings("application_name=orders_relay options='-c work_mem=8MB'"),
                     "orders_relay", "-c work_mem=8MB " RELAY_OPTIONS);
        setenv("PGAPPNAME", "from_env", 1);
        test_startup("PGAPPNAME", settings(""), "from_env", RELAY_OPTIONS);
        unsetenv("PGAPPNAME");
        test_startup("keyword list asking for replication=false",
                     settings("replication=false"), "outbox-relay", RELAY_OPTIONS);
        char uri[512];
        /* A URI names a socket directory as a percent-encoded host. */
        snprintf(uri, sizeof(uri),
                 "postgresql://relay@%%2Ftmp%%2F%s:5432/app?sslmode=disable&gssencmode=disable&"
                 "application_name=orders_relay&options=-c%%20work_mem%%3D8MB&replication=true",
                 dir + strlen("/tmp/"));
        test_startup("URI with application_name and options", settings_ci(uri), "orders_relay",
                     "-c work_mem=8MB " RELAY_OPTIONS);

        /* A service's options, as libpq resolves them: below the
         * conninfo's own, above PGOPTIONS. */
        char svcfile[160];
        snprintf(svcfile, sizeof(svcfile), "%s/pg_service.conf", dir);
        FILE *f = fopen(svcfile, "w");
        if (!f)
                tap_bail("%s: %s", svcfile, strerror(errno));
        fprintf(f, "[fake]\noptions=-c work_mem=3MB\n");
        fclose(f);
        setenv("PGSERVICEFILE", svcfile, 1);
        setenv("PGOPTIONS", "-c work_mem=1MB", 1);
        test_startup("service= with options in the service file", settings("service=fake"),
                     "outbox-relay", "-c work_mem=3MB " RELAY_OPTIONS);
        test_startup("service= and options in the conninfo",
                     settings("service=fake options='-c work_mem=8MB'"), "outbox-relay",
                     "-c work_mem=8MB " RELAY_OPTIONS);
        setenv("PGSERVICE", "fake", 1);
        test_startup("PGSERVICE with options in the service file", settings(""), "outbox-relay",
                     "-c work_mem=3MB " RELAY_OPTIONS);
        unsetenv("PGSERVICE");
        test_startup("PGOPTIONS without a service", settings(""), "outbox-relay",
                     "-c work_mem=1MB " RELAY_OPTIONS);
        unsetenv("PGOPTIONS");
        unsetenv("PGSERVICEFILE");
        unlink(svcfile);

        relay_settings_t *set = settings("");
        test_identify(set);
        test_server_copydone(set);
        test_publication_gone(set);
        test_start_refused(set);
        relay_settings_free(set);
        unlink(startup_file);
        unlink(sock);
        rmdir(dir);
        return done_testing();
}
