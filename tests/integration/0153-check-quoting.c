/*
 * 0153-check-quoting.c - the SQL that outbox-relay check's fixes name (and
 * the relay's own row-level security refusal) runs as written, whatever
 * the names: each part spelled as PostgreSQL's quote_ident() spells it.
 *
 * The names: a role "Chk_<unique> x" (mixed case and a space), the outbox
 * table in a schema named "order" (a reserved keyword, which
 * outbox.table = order.outbox accepts: bare, "ALTER TABLE order.outbox"
 * is a syntax error) and its aggregate id column "Aggregate Id". Check
 * printed the table and the column bare in its fixes, the relay the role
 * in its REPLICATION fix. Each fix below is taken from check --json (or
 * the relay's log), run as the superuser, and what it was to change is
 * looked up in the catalogs:
 *
 *   - the relay started by the role before it has REPLICATION: exit 3,
 *     its ALTER ROLE ... REPLICATION (bare, the name was read as another
 *     role and a role option);
 *   - outbox.columns: ALTER TABLE ... ALTER COLUMN ... SET NOT NULL;
 *   - postgres.publication: ALTER PUBLICATION ... ADD TABLE ...;
 *   - snapshot.mode (no SELECT): GRANT SELECT ON ... TO ...;
 *   - snapshot.mode (row-level security): ALTER ROLE ... BYPASSRLS and
 *     ALTER TABLE ... DISABLE ROW LEVEL SECURITY;
 *   - the relay started with snapshot.mode = initial on that table: exit 3,
 *     its message (the same words as check's) names the same two commands.
 *
 * A fix that fails is applied by the test as it should have been written,
 * so each later step still tests its own.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* The fix of the check called name whose fix starts with starts, from one
 * check --json run (caller frees); NULL, said, when there is none. */
static char *fix_of(const char *const *sets, const char *name, const char *starts)
{
        const char *opts[] = {"--json", NULL};
        char *out = NULL, *log = NULL, *fix = NULL;
        int rc = h_relay_run_cmd("check", opts, sets, 60000, &out, &log);
        json_error_t jerr;
        json_t *doc = out ? json_loads(out, 0, &jerr) : NULL;
        json_t *checks = json_object_get(doc, "checks");
        for (size_t i = 0; i < json_array_size(checks) && !fix; i++) {
                json_t *c = json_array_get(checks, i);
                const char *n = json_string_value(json_object_get(c, "name"));
                const char *f = json_string_value(json_object_get(c, "fix"));
                if (n && f && strcmp(n, name) == 0 && strncmp(f, starts, strlen(starts)) == 0)
                        fix = strdup(f);
        }
        if (!fix)
                tap_diag("check exit %d: no %s fix starting \"%s\" in:\n%s\n%s", rc, name, starts,
                         out ? out : "", log ? log : "");
        json_decref(doc);
        free(out);
        free(log);
        return fix;
}

static bool is_t(char *v)
{
        bool t = v && strcmp(v, "t") == 0;
        free(v);
        return t;
}

/* What each fix is to change, in the catalogs. */
static bool not_null(PGconn *c, const char *role)
{
        (void)role;
        return is_t(h_pg_value(c, "SELECT attnotnull FROM pg_attribute WHERE attrelid = "
                                  "'\"order\".outbox'::regclass AND attname = 'Aggregate Id'"));
}

static bool published(PGconn *c, const char *role)
{
        (void)role;
        return is_t(h_pg_value(c, "SELECT count(*) = 1 FROM pg_publication_tables WHERE "
                                  "pubname = 'outbox_pub' AND schemaname = 'order'"));
}

static bool may_select(PGconn *c, const char *role)
{
        return is_t(h_pg_value(c, "SELECT has_table_privilege('%s', '\"order\".outbox', 'SELECT')",
                               role));
}

static bool bypasses(PGconn *c, const char *role)
{
        return is_t(h_pg_value(c, "SELECT rolbypassrls FROM pg_roles WHERE rolname = '%s'", role));
}

static bool rls_off(PGconn *c, const char *role)
{
        (void)role;
        return is_t(h_pg_value(c, "SELECT NOT relrowsecurity FROM pg_class WHERE oid = "
                                  "'\"order\".outbox'::regclass"));
}

/*
 * One fix that text names (check's, the relay's log): run it from `starts`
 * up to upto (with it when with; NULL: the end), and see that done(c,
 * role) holds after it. When it did not, run repair (what the fix should
 * have said) so that the next steps test their own. Two test points.
 */
static void run_fix(PGconn *c, const char *text, const char *who, const char *starts,
                    const char *upto, bool with, bool (*done)(PGconn *, const char *),
                    const char *role, const char *repair)
{
        ok(h_pg_run_named(c, text, starts, upto, with), "%s: the %s... runs as written", who,
           starts);
        ok(done(c, role), "%s: and it did what it is for", who);
        if (!done(c, role))
                h_pg_exec(c, "%s", repair);
}

/* check's fix for the check called name whose fix starts with starts (see
 * run_fix()). */
static void run_check_fix(PGconn *c, const char *const *sets, const char *name,
                          const char *starts, const char *upto,
                          bool (*done)(PGconn *, const char *), const char *role,
                          const char *repair)
{
        char *fix = fix_of(sets, name, starts);
        run_fix(c, fix, name, starts, upto, false, done, role, repair);
        free(fix);
}

static bool may_replicate(PGconn *c, const char *role)
{
        return is_t(h_pg_value(c, "SELECT rolreplication FROM pg_roles WHERE rolname = '%s'",
                               role));
}

/* Both ways out of row-level security that text names: each runs as
 * written and does what it is for. Four test points. */
static void run_rls_fixes(PGconn *c, const char *text, const char *role, const char *who)
{
        ok(h_pg_run_named(c, text, "ALTER TABLE ", " SECURITY", true),
           "%s: the ALTER TABLE ... DISABLE ROW LEVEL SECURITY runs as written", who);
        ok(rls_off(c, role), "%s: and row-level security is off", who);
        ok(h_pg_run_named(c, text, "ALTER ROLE ", " BYPASSRLS", true),
           "%s: the ALTER ROLE ... BYPASSRLS runs as written", who);
        ok(bypasses(c, role), "%s: and the role bypasses row-level security", who);
}

int main(void)
{
        char *db = h_pg_create_db("chkq");
        char *uniq = h_unique_name("Chk");
        char role[128], conninfo[1024], slotset[256], kafkaset[512];
        snprintf(role, sizeof(role), "%s x", uniq);
        role[0] = 'C'; /* mixed case */
        char *slot = h_unique_name("slot");
        PGconn *c = h_pg_connect(db);

        h_pg_exec(c, "CREATE SCHEMA \"order\"");
        h_pg_create_outbox(c, "\"order\".outbox");
        h_pg_exec(c, "ALTER TABLE \"order\".outbox RENAME COLUMN aggregateid TO \"Aggregate Id\"");
        h_pg_exec(c, "ALTER TABLE \"order\".outbox ALTER COLUMN \"Aggregate Id\" DROP NOT NULL");
        h_pg_exec(c, "CREATE PUBLICATION outbox_pub WITH (publish = 'insert')");
        h_pg_exec(c, "CREATE ROLE \"%s\" LOGIN", role);
        h_pg_exec(c, "GRANT USAGE ON SCHEMA \"order\" TO \"%s\"", role);

        char *ci = h_pg_conninfo(db);
        snprintf(conninfo, sizeof(conninfo), "postgres.conninfo=%s user='%s'", ci, role);
        free(ci);
        snprintf(slotset, sizeof(slotset), "slot.name=%s", slot);
        snprintf(kafkaset, sizeof(kafkaset), "kafka.bootstrap.servers=%s", h_kafka_bootstrap());
        const char *sets[] = {conninfo, kafkaset, slotset, "outbox.table=order.outbox",
                              "outbox.column.aggregate_id=Aggregate Id", "snapshot.mode=initial",
                              NULL};

        /* The relay, started by a role without REPLICATION, names the fix. */
        h_relay_t *r = h_relay_start(sets);
        int rc = h_relay_wait(r, 60000);
        if (!ok(rc == 3, "a role without REPLICATION: the relay stops at start, exit 3 (got %d)",
                rc))
                h_relay_diag_log(r);
        char *rlog = h_relay_log(r);
        char repl[256];
        snprintf(repl, sizeof(repl), "ALTER ROLE \"%s\" REPLICATION", role);
        run_fix(c, rlog, "the relay", "ALTER ROLE ", " REPLICATION", true, may_replicate, role,
                repl);
        free(rlog);
        h_relay_free(r);

        char grant[256];
        snprintf(grant, sizeof(grant), "GRANT SELECT ON \"order\".outbox TO \"%s\"", role);
        run_check_fix(c, sets, "outbox.columns", "ALTER TABLE ", NULL, not_null, role,
                      "ALTER TABLE \"order\".outbox ALTER COLUMN \"Aggregate Id\" SET NOT NULL");
        run_check_fix(c, sets, "postgres.publication", "ALTER PUBLICATION ", NULL, published,
                      role, "ALTER PUBLICATION outbox_pub ADD TABLE \"order\".outbox");
        run_check_fix(c, sets, "snapshot.mode", "GRANT SELECT ON ", ", or set snapshot.mode",
                      may_select, role, grant);

        /* Row-level security that applies to the role: both ways out. */
        h_pg_exec(c, "ALTER TABLE \"order\".outbox ENABLE ROW LEVEL SECURITY");
        h_pg_exec(c, "CREATE POLICY none ON \"order\".outbox FOR SELECT USING (false)");
        char *fix = fix_of(sets, "snapshot.mode", "ALTER ROLE ");
        run_rls_fixes(c, fix, role, "check (snapshot.mode)");
        free(fix);

        /* The relay says the same at its start, in the same SQL. */
        h_pg_exec(c, "ALTER ROLE \"%s\" NOBYPASSRLS", role);
        h_pg_exec(c, "ALTER TABLE \"order\".outbox ENABLE ROW LEVEL SECURITY");
        r = h_relay_start(sets);
        rc = h_relay_wait(r, 60000);
        if (!ok(rc == 3, "the relay refuses the backfill through row-level security: exit 3 (got %d)",
                rc))
                h_relay_diag_log(r);
        rlog = h_relay_log(r);
        run_rls_fixes(c, rlog, role, "the relay");
        free(rlog);
        h_relay_free(r);

        PQfinish(c);
        h_pg_drop_db(db);
        char quoted[160];
        snprintf(quoted, sizeof(quoted), "\"%s\"", role);
        h_pg_drop_role(quoted);
        free(slot);
        free(uniq);
        free(db);
        return done_testing();
}
