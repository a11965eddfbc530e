/*
 * 0121-status.c - `outbox-relay status` shows the slot position PostgreSQL
 * holds and the process streaming from it.
 *
 *   - while a relay streams: --json parses; confirmed_flush_lsn and
 *     restart_lsn lie between pg_replication_slots' values read just before
 *     and just after (the relay may confirm in between); active_pid is the
 *     slot's active_pid, the walsender whose pg_stat_replication row says
 *     application "outbox-relay" from 127.0.0.1; lag_bytes is the server's
 *     WAL end minus confirmed_flush_lsn as it reports them; exit 0;
 *   - after the relay stopped: nothing moves the slot, so the positions
 *     equal pg_replication_slots' exactly, active is false; the text output
 *     shows them too; exit 0;
 *   - a slot that does not exist: exit 5, and no Kafka address is needed;
 *   - on a standby that has received nothing: the server's WAL end is
 *     pg_last_wal_replay_lsn(), as /metrics has it, and says so.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define RUN_BOUND_MS 20000
/* h_cluster_init()'s port offset, unique among the tests. */
#define STANDBY_OFFSET 15

static const char *jstr(json_t *doc, const char *key)
{
        const char *s = json_string_value(json_object_get(doc, key));
        return s ? s : "";
}

/* Run status --json; the parsed document (NULL when it does not parse). */
static json_t *status_json(const char *what, const char *const *sets, int want)
{
        const char *opts[] = {"--json", NULL};
        char *out, *log;
        json_error_t jerr;
        int rc = h_relay_run_cmd("status", opts, sets, RUN_BOUND_MS, &out, &log);
        json_t *doc = json_loads(out, 0, &jerr);
        is_int(rc, want, "%s: status --json exits %d", what, want);
        if (!ok(doc != NULL, "%s: --json output parses", what))
                tap_diag("%s; stdout: %s; stderr: %s", jerr.text, out, log);
        free(out);
        free(log);
        return doc;
}

/* a <= b <= c as pg_lsn, compared by the server. */
static bool lsn_between(PGconn *c, const char *a, const char *b, const char *cc)
{
        char *v = h_pg_value(c, "SELECT '%s'::pg_lsn <= '%s'::pg_lsn AND '%s'::pg_lsn <= '%s'::pg_lsn",
                             a, b, b, cc);
        bool r = v && strcmp(v, "t") == 0;
        free(v);
        return r;
}

/*
 * A standby with no primary (standby.signal only), so it has received
 * nothing: the server's WAL end is what it replayed, the position its
 * walsenders decode to and /metrics shows, named as such; not the NULL of
 * pg_last_wal_receive_lsn() printed as 0/0.
 */
static void standby_case(void)
{
        h_cluster_t *sb = h_cluster_init(STANDBY_OFFSET, NULL);
        char cmd[512], set_conn[256], ci[128], *out, *log;

        if (!sb)
                tap_bail("could not make the standby's directory");
        snprintf(cmd, sizeof(cmd), "touch %s/data/standby.signal", h_cluster_dir(sb));
        if (h_run_as_postgres(cmd) != 0 || h_cluster_start(sb, NULL) != 0)
                tap_bail("could not start the standby");
        snprintf(ci, sizeof(ci), "host=127.0.0.1 port=%d user=postgres dbname=postgres",
                 h_cluster_port(sb));
        PGconn *c = PQconnectdb(ci);
        if (PQstatus(c) != CONNECTION_OK)
                tap_bail("could not connect to the standby: %s", PQerrorMessage(c));
        char *rec = h_pg_value(c, "SELECT pg_is_in_recovery()::text || ' ' || "
                                  "(pg_last_wal_receive_lsn() IS NULL)::text");
        is_str(rec, "true true", "standby: in recovery, nothing received");
        char *replay = h_pg_value(c, "SELECT pg_last_wal_replay_lsn()");
        h_cluster_conninfo_set(sb, set_conn, sizeof(set_conn));
        const char *sets[] = {set_conn, "slot.name=no_such_slot_here", NULL};

        json_t *doc = status_json("standby", sets, 5);
        is_str(jstr(doc, "server_lsn"), replay ? replay : "?",
               "standby --json: server_lsn is pg_last_wal_replay_lsn()");
        ok(json_is_true(json_object_get(doc, "server_in_recovery")),
           "standby --json: server_in_recovery is true");
        json_decref(doc);

        int rc = h_relay_run_cmd("status", NULL, sets, RUN_BOUND_MS, &out, &log);
        is_int(rc, 5, "standby text: exit 5 (no such slot)");
        char want[128];
        snprintf(want, sizeof(want), "server WAL end       %s (pg_last_wal_replay_lsn, a standby)",
                 replay ? replay : "?");
        if (!ok(strstr(out, want) != NULL, "standby text: says '%s'", want))
                tap_diag("status printed: %s", out);
        free(out);
        free(log);
        free(replay);
        free(rec);
        PQfinish(c);
        h_cluster_free(sb);
}

int main(void)
{
        h_case_t k;
        h_case_open(&k, "status", "slot_status", "st", 1, H_CASE_PUBLICATION);
        PGconn *c = k.c;
        const char *slot = k.slot;
        const char *relay_sets[] = {k.set_conn, k.set_kafka, k.set_slot, "status.interval.ms=1000",
                                    NULL};
        /* status needs no Kafka address. */
        const char *sets[] = {k.set_conn, k.set_slot, NULL};

        h_relay_t *r = h_relay_start(relay_sets);
        ok(h_relay_streams(r, 30000), "the relay streams");
        h_outbox_insert(c, k.aggtype, "a-1");
        is_int(h_kafka_wait_count(k.topic, 1, 30000), 1, "the event is in Kafka");

        /* While it streams: the positions lie between two reads of the slot. */
        char *conf0 = h_pg_slot_column(c, slot, "confirmed_flush_lsn");
        char *rest0 = h_pg_slot_column(c, slot, "restart_lsn");
        json_t *doc = status_json("streaming", sets, 0);
        char *conf1 = h_pg_slot_column(c, slot, "confirmed_flush_lsn");
        char *rest1 = h_pg_slot_column(c, slot, "restart_lsn");
        char *pid = h_pg_slot_column(c, slot, "active_pid");
        if (doc && conf0 && conf1 && rest0 && rest1 && pid) {
                const char *conf = jstr(doc, "confirmed_flush_lsn");
                const char *rest = jstr(doc, "restart_lsn");
                ok(json_is_true(json_object_get(doc, "exists")), "streaming: the slot exists");
                ok(lsn_between(c, conf0, conf, conf1),
                   "streaming: confirmed_flush_lsn %s is what PostgreSQL holds (%s .. %s)", conf,
                   conf0, conf1);
                ok(lsn_between(c, rest0, rest, rest1),
                   "streaming: restart_lsn %s is what PostgreSQL holds (%s .. %s)", rest, rest0, rest1);
                ok(json_is_true(json_object_get(doc, "active")), "streaming: active");
                is_int(json_integer_value(json_object_get(doc, "active_pid")), atol(pid),
                       "streaming: active_pid is the slot's active_pid");
                char *app = h_pg_value(c, "SELECT application_name || ' ' || host(client_addr) FROM "
                                          "pg_stat_replication WHERE pid = %s",
                                       pid);
                char got[256];
                snprintf(got, sizeof(got), "%s %s", jstr(doc, "application_name"),
                         jstr(doc, "client_addr"));
                is_str(got, app ? app : "(no walsender)",
                       "streaming: application and client address are the walsender's");
                is_str(jstr(doc, "application_name"), "outbox-relay",
                       "streaming: the walsender serves outbox-relay");
                free(app);
                char *lag = h_pg_value(c, "SELECT pg_wal_lsn_diff('%s', '%s')::bigint",
                                       jstr(doc, "server_lsn"), conf);
                is_int(json_integer_value(json_object_get(doc, "lag_bytes")), lag ? atoll(lag) : -1,
                       "streaming: lag_bytes is server_lsn - confirmed_flush_lsn");
                ok(json_integer_value(json_object_get(doc, "lag_bytes")) >= 0,
                   "streaming: lag_bytes is not negative");
                free(lag);
                is_str(jstr(doc, "wal_status"), "reserved", "streaming: wal_status reserved");
        }
        json_decref(doc);

        /* Stopped: nothing moves the slot; exact equality. */
        is_int(h_relay_stop(r, 30000), 0, "the relay stops cleanly");
        h_relay_free(r);
        /* The walsender may take a moment to release the slot after the relay
         * exited; if it does not, the exact comparisons below say so. */
        h_pg_wait_slot_active(c, slot, false, 10000);
        char *conf2 = h_pg_slot_column(c, slot, "confirmed_flush_lsn");
        char *rest2 = h_pg_slot_column(c, slot, "restart_lsn");
        doc = status_json("stopped", sets, 0);
        if (doc && conf2 && rest2) {
                is_str(jstr(doc, "confirmed_flush_lsn"), conf2,
                       "stopped: confirmed_flush_lsn equals pg_replication_slots'");
                is_str(jstr(doc, "restart_lsn"), rest2, "stopped: restart_lsn equals pg_replication_slots'");
                ok(json_is_false(json_object_get(doc, "active")) &&
                       json_is_null(json_object_get(doc, "active_pid")),
                   "stopped: not active, no pid");
        }
        json_decref(doc);
        char *out, *log;
        int rc = h_relay_run_cmd("status", NULL, sets, RUN_BOUND_MS, &out, &log);
        is_int(rc, 0, "stopped: status (text) exits 0");
        ok(conf2 && strstr(out, conf2) && strstr(out, "confirmed_flush_lsn"),
           "stopped: the text shows confirmed_flush_lsn %s", conf2 ? conf2 : "?");
        if (!strstr(out, "confirmed_flush_lsn"))
                tap_diag("stdout: %s; stderr: %s", out, log);
        free(out);
        free(log);

        /* A relay on the server's Unix socket: its walsender has no client
         * address and client_port -1, which JSON shows as null (unknown),
         * as it does the address. */
        {
                char *sock = h_pg_value(c, "SELECT split_part(current_setting("
                                           "'unix_socket_directories'), ',', 1)");
                char *port = h_pg_value(c, "SHOW port");
                char set_sock[512];
                snprintf(set_sock, sizeof(set_sock), "postgres.conninfo=host=%s port=%s dbname=%s "
                         "user=postgres", sock ? sock : "", port ? port : "", k.db);
                const char *sock_relay[] = {set_sock, k.set_kafka, k.set_slot, NULL};
                const char *sock_status[] = {set_sock, k.set_slot, NULL};
                r = h_relay_start(sock_relay);
                ok(h_relay_streams(r, 30000), "unix socket: the relay streams");
                doc = status_json("unix socket", sock_status, 0);
                ok(doc && json_is_true(json_object_get(doc, "active")) &&
                           json_is_null(json_object_get(doc, "client_addr")) &&
                           json_is_null(json_object_get(doc, "client_port")),
                   "unix socket: active, client_addr and client_port null (port %s)",
                   doc && json_object_get(doc, "client_port")
                           ? (json_is_null(json_object_get(doc, "client_port")) ? "null" : "a number")
                           : "missing");
                json_decref(doc);
                rc = h_relay_run_cmd("status", NULL, sock_status, RUN_BOUND_MS, &out, &log);
                ok(rc == 0 && strstr(out, "client on a Unix socket"),
                   "unix socket: the text says the client is on a Unix socket");
                free(out);
                free(log);
                is_int(h_relay_stop(r, 30000), 0, "unix socket: the relay stops cleanly");
                h_relay_free(r);
                free(sock);
                free(port);
        }

        /* A slot that does not exist. */
        const char *missing[] = {k.set_conn, "slot.name=no_such_slot_here", NULL};
        rc = h_relay_run_cmd("status", NULL, missing, RUN_BOUND_MS, &out, &log);
        is_int(rc, 5, "missing slot: exit 5");
        ok(strstr(out, "\"no_such_slot_here\" does not exist") != NULL,
           "missing slot: says it does not exist");
        free(out);
        free(log);

        standby_case();

        free(conf0);
        free(conf1);
        free(conf2);
        free(rest0);
        free(rest1);
        free(rest2);
        free(pid);
        h_case_close(&k);
        return done_testing();
}
