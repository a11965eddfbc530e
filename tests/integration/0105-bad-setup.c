/*
 * 0105-bad-setup.c - a relay that cannot work says why in one line and
 * stops with the documented exit code, instead of retrying forever.
 *
 * Each case is one relay run that must exit within a bound with the
 * expected code and exactly one error line naming the fix:
 *   - missing outbox table (3), a publication column list without the
 *     payload (3), a role without REPLICATION (3), Kafka
 *     unreachable at start (3), PostgreSQL with wal_level=replica (3; a
 *     throwaway second cluster started by this test);
 *   - configuration: unknown key (2, "did you mean"), no
 *     kafka.bootstrap.servers (2), a bad integer (2);
 *   - with errors.policy = stop, an outbox row that cannot become an event
 *     (aggregateid NULL in an outbox table without NOT NULL constraints)
 *     after a good one: exit 4,
 *     the log names the event id and its LSN, the good event is in Kafka,
 *     the slot is not confirmed past the bad transaction and still holds
 *     it, and a restarted relay stops at the same event again: nothing is
 *     skipped silently.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <arpa/inet.h>
#include <errno.h>
#include <librdkafka/rdkafka.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#define EXIT_BOUND_MS 60000

/* --- helpers ------------------------------------------------------------ */


static bool is_error_line(const char *line)
{
        return strstr(line, " FATAL:  ") || strstr(line, " ERROR:  ") ||
               strstr(line, "outbox-relay: error: ");
}

/*
 * The log's error lines: their number, and a copy of the first one that
 * contains every needle (NULL when none does; caller frees).
 */
static char *error_line_with(const char *log, const char *const *needles, int *nerrors)
{
        char *copy = strdup(log), *line = copy, *found = NULL;
        *nerrors = 0;
        while (line && *line) {
                char *nl = strchr(line, '\n');
                if (nl)
                        *nl = '\0';
                if (is_error_line(line)) {
                        (*nerrors)++;
                        bool all = true;
                        for (int i = 0; needles[i]; i++)
                                if (!strstr(line, needles[i]))
                                        all = false;
                        if (all && !found)
                                found = strdup(line);
                }
                line = nl ? nl + 1 : NULL;
        }
        free(copy);
        return found;
}

/*
 * Run a relay that must fail: exit code want within EXIT_BOUND_MS and
 * exactly one error line, containing every needle. Returns the relay's
 * log (caller frees).
 */
static char *expect_failure(const char *what, const char *const *sets, int want,
                            const char *const *needles)
{
        int64_t t0 = h_now_ms();
        h_relay_t *r = h_relay_start(sets);
        int rc = h_relay_wait(r, EXIT_BOUND_MS);
        int64_t took = h_now_ms() - t0;
        char *log = h_relay_log(r);
        int nerrors;
        char *line = error_line_with(log, needles, &nerrors);
        bool good = true;

        if (rc < 0)
                tap_diag("%s: still running after %d s", what, EXIT_BOUND_MS / 1000);
        good &= ok(rc == want, "%s: exit %d (got %d after %.1f s)", what, want, rc, took / 1000.0);
        good &= ok(line != NULL, "%s: the error line names the problem and the fix", what);
        is_int(nerrors, 1, "%s: exactly one error line", what);
        good &= nerrors == 1;
        if (line)
                tap_diag("%s: %s", what, line);
        if (!good) {
                for (int i = 0; needles[i]; i++)
                        tap_diag("  wanted: \"%s\"", needles[i]);
                h_relay_diag_log(r);
        }
        free(line);
        h_relay_free(r);
        return log;
}


/* Insert messages among the slot's pending changes that carry needle
 * (waits until no walsender holds the slot). */
static long slot_count(PGconn *c, const char *slot)
{
        char *v =
            h_pg_value(c, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '%s'", slot);
        long n = v ? strtol(v, NULL, 10) : -1;
        free(v);
        return n;
}

/* --- cases --------------------------------------------------------------- */

static const char *g_kafka_set; /* "kafka.bootstrap.servers=..." */

static void case_missing_table(void)
{
        char *db = h_pg_create_db("bad_notable");
        char *slot = h_unique_name("slot_bad");
        char *ci = h_pg_conninfo(db);
        char set_conn[512], set_slot[128];
        snprintf(set_conn, sizeof(set_conn), "postgres.conninfo=%s", ci);
        snprintf(set_slot, sizeof(set_slot), "slot.name=%s", slot);
        const char *sets[] = {set_conn, g_kafka_set, set_slot, NULL};
        const char *needles[] = {"does not exist", "sql/001_outbox.sql", NULL};
        free(expect_failure("missing outbox table", sets, 3, needles));
        PGconn *c = h_pg_connect(db);
        is_int(slot_count(c, slot), 0, "missing outbox table: no slot was left behind");
        PQfinish(c);
        h_pg_drop_db(db);
        free(ci);
        free(slot);
        free(db);
}

/* PostgreSQL 15+: a publication whose column list leaves out the payload
 * would deliver every row without it, each an error for the error policy
 * (stop at it, or dead-letter them all): the relay refuses to start.
 * PostgreSQL 14 has no column lists (the relay does not ask for them
 * there): that it refuses the publication is what holds on 14. */
static void case_column_list(void)
{
        char *db = h_pg_create_db("bad_collist");
        char *slot = h_unique_name("slot_bad");
        char *pub = h_unique_name("pub_cols");
        PGconn *c = h_pg_connect(db);
        h_pg_create_outbox(c, "outbox");
        char err[512];
        int created = h_pg_try(c, err, sizeof(err),
                               "CREATE PUBLICATION %s FOR TABLE outbox (id, aggregatetype, "
                               "aggregateid, type) WITH (publish = 'insert')",
                               pub);
        if (PQserverVersion(c) < 150000) {
                if (!ok(created != 0 && strstr(err, "syntax error"),
                        "column list: PostgreSQL %d has none (the publication is refused)",
                        PQserverVersion(c) / 10000))
                        tap_diag("CREATE PUBLICATION with a column list: %s",
                                 created ? err : "succeeded");
        } else {
                if (created != 0)
                        tap_bail("CREATE PUBLICATION with a column list: %s", err);
                char *ci = h_pg_conninfo(db);
                char set_conn[512], set_slot[128], set_pub[128];
                snprintf(set_conn, sizeof(set_conn), "postgres.conninfo=%s", ci);
                snprintf(set_slot, sizeof(set_slot), "slot.name=%s", slot);
                snprintf(set_pub, sizeof(set_pub), "publication.name=%s", pub);
                const char *sets[] = {set_conn, g_kafka_set, set_slot, set_pub, NULL};
                const char *needles[] = {"has a column list", "\"payload\" (outbox.column.payload)",
                                         "SET TABLE", NULL};
                free(expect_failure("publication column list without payload", sets, 3, needles));
                is_int(slot_count(c, slot), 0, "column list: no slot was left behind");
                free(ci);
        }
        PQfinish(c);
        h_pg_drop_db(db);
        free(pub);
        free(slot);
        free(db);
}

static void case_no_replication_role(void)
{
        char *db = h_pg_create_db("bad_role");
        char *role = h_unique_name("norepl");
        char *slot = h_unique_name("slot_bad");
        PGconn *c = h_pg_connect(db);
        h_pg_create_outbox(c, "outbox");
        h_pg_exec(c, "CREATE ROLE %s LOGIN NOREPLICATION", role);
        h_pg_exec(c, "GRANT ALL ON outbox TO %s", role);
        char set_conn[512], set_slot[128];
        snprintf(set_conn, sizeof(set_conn), "postgres.conninfo=host=%s port=%s user=%s dbname=%s",
                 h_env("RELAY_TEST_PGHOST"), h_env("RELAY_TEST_PGPORT"), role, db);
        snprintf(set_slot, sizeof(set_slot), "slot.name=%s", slot);
        const char *sets[] = {set_conn, g_kafka_set, set_slot, NULL};
        const char *needles[] = {"REPLICATION", role, NULL};
        free(expect_failure("role without REPLICATION", sets, 3, needles));
        PQfinish(c);
        h_pg_drop_db(db);
        h_pg_drop_role(role);
        free(slot);
        free(role);
        free(db);
}

static void case_kafka_unreachable(void)
{
        char *db = h_pg_create_db("bad_kafka");
        char *slot = h_unique_name("slot_bad");
        PGconn *c = h_pg_connect(db);
        h_pg_create_outbox(c, "outbox");
        char *ci = h_pg_conninfo(db);
        char set_conn[512], set_slot[128];
        snprintf(set_conn, sizeof(set_conn), "postgres.conninfo=%s", ci);
        snprintf(set_slot, sizeof(set_slot), "slot.name=%s", slot);
        const char *sets[] = {set_conn, "kafka.bootstrap.servers=127.0.0.1:1", set_slot, NULL};
        const char *needles[] = {"could not reach Kafka", "kafka.bootstrap.servers", NULL};
        free(expect_failure("Kafka unreachable at start", sets, 3, needles));
        is_int(slot_count(c, slot), 0, "Kafka unreachable: no slot was created");

        /* A stop while the first start still waits for Kafka (up to 10 s)
         * is a clean stop, honoured without waiting that out. Here the
         * broker accepts connections and never answers (a hung broker). */
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t salen = sizeof(sa);
        int lfd = socket(AF_INET, SOCK_STREAM, 0);
        if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(lfd, 16) != 0 ||
            getsockname(lfd, (struct sockaddr *)&sa, &salen) != 0)
                tap_bail("silent listener: %s", strerror(errno));
        char set_silent[64];
        snprintf(set_silent, sizeof(set_silent), "kafka.bootstrap.servers=127.0.0.1:%d",
                 ntohs(sa.sin_port));
        const char *silent[] = {set_conn, set_silent, set_slot, NULL};
        h_relay_t *r = h_relay_start(silent);
        ok(h_relay_wait_log(r, "starting outbox-relay", 10000), "Kafka unreachable: relay started");
        poll(NULL, 0, 1000);
        int64_t t0 = h_now_ms();
        h_relay_signal(r, SIGTERM);
        int rc = h_relay_wait(r, 8000);
        int64_t took = h_now_ms() - t0;
        char *log = h_relay_log(r);
        is_int(rc, 0, "SIGTERM while waiting for Kafka: exit 0 (after %.1f s)", took / 1000.0);
        ok(took < 8000, "SIGTERM while waiting for Kafka: honoured before the 10 s wait ran out");
        ok(log && strstr(log, "stopped") && !strstr(log, "ERROR") && !strstr(log, "FATAL"),
           "SIGTERM while waiting for Kafka: logs \"stopped\", no error");
        if (rc != 0 || !log || !strstr(log, "stopped"))
                h_relay_diag_log(r);
        free(log);
        h_relay_free(r);
        close(lfd);
        is_int(slot_count(c, slot), 0, "SIGTERM while waiting for Kafka: no slot was created");
        PQfinish(c);
        h_pg_drop_db(db);
        free(ci);
        free(slot);
        free(db);
}

static void case_config(void)
{
        /* None of these gets as far as connecting anywhere. */
        const char *unknown[] = {g_kafka_set, "slot.nmae=x", NULL};
        const char *n1[] = {"unknown configuration key \"slot.nmae\"", "did you mean \"slot.name\"",
                            NULL};
        free(expect_failure("unknown key", unknown, 2, n1));

        const char *nokafka[] = {"slot.name=x", NULL};
        const char *n2[] = {"kafka.bootstrap.servers is not set",
                            "--set kafka.bootstrap.servers=", NULL};
        free(expect_failure("no kafka.bootstrap.servers", nokafka, 2, n2));

        const char *badint[] = {g_kafka_set, "status.interval.ms=10s", NULL};
        const char *n3[] = {"status.interval.ms", "must be an integer", NULL};
        free(expect_failure("bad integer", badint, 2, n3));
}

static void case_wal_level(void)
{
        h_cluster_t *cl = h_cluster_up(7, "-c wal_level=replica");
        if (!ok(cl, "a second cluster with wal_level=replica started"))
                return;
        char set_conn[512];
        h_cluster_conninfo_set(cl, set_conn, sizeof(set_conn));
        const char *sets[] = {set_conn, g_kafka_set, "slot.name=never_created", NULL};
        const char *needles[] = {"wal_level", "logical", "restart", NULL};
        free(expect_failure("wal_level=replica", sets, 3, needles));
        char dir[256];
        snprintf(dir, sizeof(dir), "%s", h_cluster_dir(cl));
        h_cluster_free(cl);
        struct stat st;
        ok(stat(dir, &st) != 0, "the second cluster is stopped and %s removed", dir);
}

/* "could not turn outbox row (id \"<id>\") at X/X": the LSN, or "" */
static void logged_lsn(const char *log, const char *id, char *lsn, size_t lsnlen)
{
        char prefix[256];
        unsigned hi, lo;
        snprintf(prefix, sizeof(prefix), "could not turn outbox row (id \"%s\") at ", id);
        const char *p = strstr(log, prefix);
        lsn[0] = '\0';
        if (p && sscanf(p + strlen(prefix), "%X/%X", &hi, &lo) == 2)
                snprintf(lsn, lsnlen, "%X/%X", hi, lo);
}

static void case_bad_event(void)
{
        char *db = h_pg_create_db("bad_event");
        char *slot = h_unique_name("slot_bad");
        char *aggtype = h_unique_name("badev");
        char topic[256], set_conn[512], set_slot[128];
        PGconn *c = h_pg_connect(db);
        /* An outbox variant without NOT NULL constraints. */
        h_pg_exec(c, "CREATE TABLE outbox (id uuid PRIMARY KEY, aggregatetype varchar(255),"
                     " aggregateid varchar(255), type varchar(255), payload jsonb,"
                     " created_at timestamptz DEFAULT clock_timestamp())");
        snprintf(topic, sizeof(topic), "outbox.event.%s", aggtype);
        h_kafka_create_topic(topic, 1);
        char *ci = h_pg_conninfo(db);
        snprintf(set_conn, sizeof(set_conn), "postgres.conninfo=%s", ci);
        snprintf(set_slot, sizeof(set_slot), "slot.name=%s", slot);
        /* errors.policy = stop: halt before the row (the default, dlq,
         * would dead-letter it and go on). */
        const char *sets[] = {
            set_conn, g_kafka_set, set_slot, "status.interval.ms=1000", "errors.policy=stop", NULL};

        h_relay_t *r = h_relay_start(sets);
        if (!ok(h_relay_wait_log(r, "streaming from replication slot", 60000),
                "bad event: relay streams"))
                h_relay_diag_log(r);
        char *good_id = h_pg_value(c,
                                   "INSERT INTO outbox (id, aggregatetype, aggregateid, type, "
                                   "payload) VALUES (gen_random_uuid(), '%s', 'agg-1', 'Good', "
                                   "'{\"ok\": true}') RETURNING id",
                                   aggtype);
        is_int(h_kafka_wait_count(topic, 1, 60000), 1, "bad event: the good event is in Kafka");
        char *lsn_before = h_pg_value(c, "SELECT pg_current_wal_lsn()");
        char *bad_id = h_pg_value(c,
                                  "INSERT INTO outbox (id, aggregatetype, aggregateid, type, "
                                  "payload) VALUES (gen_random_uuid(), '%s', NULL, 'Bad', "
                                  "'{\"ok\": false}') RETURNING id",
                                  aggtype);
        char *lsn_after = h_pg_value(c, "SELECT pg_current_wal_lsn()");
        int rc = h_relay_wait(r, EXIT_BOUND_MS);
        is_int(rc, 4, "bad event: exit 4 (an outbox row could not become an event)");
        char *log = h_relay_log(r);
        char needle_id[128], lsn1[64], lsn2[64];
        snprintf(needle_id, sizeof(needle_id), "(id \"%s\")", bad_id);
        const char *needles[] = {"could not turn outbox row", needle_id, "NULL aggregate id",
                                 "NOT NULL", NULL};
        int nerrors;
        char *line = error_line_with(log, needles, &nerrors);
        ok(line != NULL, "bad event: the error names the event id, the NULL column and the fix");
        is_int(nerrors, 1, "bad event: exactly one error line");
        logged_lsn(log, bad_id, lsn1, sizeof(lsn1));
        ok(lsn1[0] != '\0', "bad event: the error names the row's LSN (%s)", lsn1);
        if (line)
                tap_diag("bad event: %s", line);
        if (rc != 4 || !line || !lsn1[0])
                h_relay_diag_log(r);
        free(line);
        free(log);
        h_relay_free(r);
        if (lsn1[0])
                ok(h_pg_lsn_ge(c, lsn1, lsn_before) && !h_pg_lsn_ge(c, lsn1, lsn_after),
                   "bad event: the logged LSN %s lies in the bad transaction (%s .. %s)", lsn1,
                   lsn_before, lsn_after);

        /* Kafka: the good event, nothing else. */
        h_msg_t *msgs;
        size_t n = h_kafka_consume_all(topic, &msgs);
        const char *hid = n == 1 ? h_msg_header(&msgs[0], "id", NULL) : NULL;
        ok(n == 1 && hid && strcmp(hid, good_id) == 0,
           "bad event: Kafka holds exactly the good event (%zu messages)", n);
        h_msgs_free(msgs, n);

        /* PostgreSQL: not confirmed past the bad transaction, which is still pending. */
        char *conf = h_pg_value(c,
                                "SELECT confirmed_flush_lsn FROM pg_replication_slots "
                                "WHERE slot_name = '%s'",
                                slot);
        ok(conf && !h_pg_lsn_ge(c, conf, lsn_after),
           "bad event: the slot is confirmed only before the bad transaction (%s < %s)",
           conf ? conf : "(null)", lsn_after);
        is_int(h_pg_pending_inserts_with(c, slot, bad_id), 1,
               "bad event: the slot still holds the bad row");
        is_int(h_pg_pending_inserts_with(c, slot, good_id), 0,
               "bad event: the good event was confirmed (not pending any more)");

        /* A restarted relay must stop at the very same row. */
        r = h_relay_start(sets);
        rc = h_relay_wait(r, EXIT_BOUND_MS);
        is_int(rc, 4, "bad event: a restarted relay stops again with exit 4");
        log = h_relay_log(r);
        logged_lsn(log, bad_id, lsn2, sizeof(lsn2));
        ok(lsn1[0] && strcmp(lsn1, lsn2) == 0,
           "bad event: at the same event and LSN (%s, first run %s): nothing skipped", lsn2, lsn1);
        if (rc != 4 || strcmp(lsn1, lsn2) != 0)
                h_relay_diag_log(r);
        free(log);
        h_relay_free(r);
        is_int(h_kafka_count(topic), 1, "bad event: the restart sent nothing again");

        PQfinish(c);
        h_pg_drop_db(db);
        h_kafka_delete_topic(topic);
        free(conf);
        free(lsn_before);
        free(lsn_after);
        free(good_id);
        free(bad_id);
        free(ci);
        free(aggtype);
        free(slot);
        free(db);
}

int main(void)
{
        char set_kafka[256];
        snprintf(set_kafka, sizeof(set_kafka), "kafka.bootstrap.servers=%s", h_kafka_bootstrap());
        g_kafka_set = set_kafka;

        case_config();
        case_missing_table();
        case_column_list();
        case_no_replication_role();
        case_kafka_unreachable();
        case_wal_level();
        case_bad_event();
        return done_testing();
}
