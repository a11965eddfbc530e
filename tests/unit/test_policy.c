/*
 * test_policy.c - the error policy's decisions (resend alone, backoff,
 * dead-letter, stop), the rejected events it remembers across sessions,
 * the skip list and the dead-letter copy's headers.
 */
#include "relay/policy.h"

#include <string.h>

#include "tap.h"

static relay_policy_t *make(bool stop, int64_t retries, const char *const *skip, size_t nskip)
{
        relay_policy_t *p = NULL;
        char err[RELAY_ERRBUF];
        relay_policy_conf_t c = {.stop = stop, .retries = retries, .backoff_ms = 100,
                                 .backoff_max_ms = 350, .dlq_topic = "dlq", .skip_ids = skip,
                                 .nskip = nskip};
        if (relay_policy_new(&p, &c, err, sizeof(err)) != 0)
                tap_bail("relay_policy_new: %s", err);
        return p;
}

static void test_next_dlq(void)
{
        relay_policy_t *p = make(false, 3, NULL, 0);
        int64_t w = -1;
        is_int(relay_policy_next(p, 1, &w), RELAY_POLICY_RESEND, "dlq: first rejection: resend");
        is_int(w, 0, "dlq: ... alone and at once (it may have been a neighbour's fault)");
        is_int(relay_policy_next(p, 2, &w), RELAY_POLICY_RESEND, "dlq: refused alone once: retry 1");
        is_int(w, 100, "dlq: ... after errors.backoff.ms");
        is_int(relay_policy_next(p, 3, &w), RELAY_POLICY_RESEND, "dlq: retry 2");
        is_int(w, 200, "dlq: ... backoff doubled");
        is_int(relay_policy_next(p, 4, &w), RELAY_POLICY_RESEND, "dlq: retry 3");
        is_int(w, 350, "dlq: ... capped at errors.backoff.max.ms");
        is_int(relay_policy_next(p, 5, &w), RELAY_POLICY_DEAD_LETTER,
               "dlq: errors.retries spent: dead-letter");
        relay_policy_free(p);

        p = make(false, 0, NULL, 0);
        is_int(relay_policy_next(p, 1, &w), RELAY_POLICY_RESEND,
               "retries=0: the first resend alone still happens");
        is_int(relay_policy_next(p, 2, &w), RELAY_POLICY_DEAD_LETTER,
               "retries=0: refused alone: dead-letter at once");
        relay_policy_free(p);
}

static void test_next_stop(void)
{
        relay_policy_t *p = make(true, 3, NULL, 0);
        int64_t w = -1;
        ok(relay_policy_stops(p), "stop policy");
        is_int(relay_policy_next(p, 1, &w), RELAY_POLICY_RESEND, "stop: first rejection: resend alone");
        is_int(w, 0, "stop: ... at once");
        is_int(relay_policy_next(p, 2, &w), RELAY_POLICY_STOP, "stop: refused alone: stop before it");
        relay_policy_free(p);
}

/* An event of topic "t" with id (NULL: none) and value, no key; its id
 * travels as its one header, as a mapped event's does (id_headers[] keeps it). */
static relay_header_t id_headers[16];
static size_t nids;

static relay_event_t ev_of(const char *id, const char *value)
{
        relay_event_t ev = {.topic = "t", .id = id, .id_len = id ? strlen(id) : 0,
                            .value = value, .value_len = value ? strlen(value) : 0};
        if (id && nids < sizeof(id_headers) / sizeof(id_headers[0])) {
                id_headers[nids] = (relay_header_t){"id", id, strlen(id)};
                ev.headers = &id_headers[nids++];
                ev.nheaders = 1;
        }
        return ev;
}

static void test_memory(void)
{
        relay_policy_t *p = make(false, 3, NULL, 0);
        const char *cause = NULL;
        relay_event_t a = ev_of("a", "1"), b = ev_of("b", "1"), none = ev_of(NULL, "1"),
                      x = ev_of("x", "1");
        is_int(relay_policy_attempts(p, 0x100, &a, NULL), 0, "nothing remembered at first");
        is_int(relay_policy_rejected(p, 0x100, &a, "too large"), 1, "first rejection of a");
        is_int(relay_policy_rejected(p, 0x100, &b, "too large"), 1, "first rejection of b");
        is_int(relay_policy_rejected(p, 0x200, &a, "denied"), 1,
               "same id in another transaction is another event");
        is_int(relay_policy_rejected(p, 0x100, &a, "still too large"), 2, "second rejection of a");
        is_int(relay_policy_attempts(p, 0x100, &a, &cause), 2, "a: two attempts remembered");
        is_str(cause, "still too large", "a: the last cause");
        is_int(relay_policy_pending(p), 3, "three events remembered");
        is_int(relay_policy_rejected(p, 0x300, &none, "no id"), 1, "an event without id");
        is_int(relay_policy_attempts(p, 0x300, &none, NULL), 1, "found by its transaction");
        is_int(relay_policy_attempts(p, 0x300, &x, NULL), 0, "an id does not match no id");
        relay_policy_forget_txn(p, 0x100);
        is_int(relay_policy_attempts(p, 0x100, &a, NULL), 0, "a forgotten at its Commit");
        is_int(relay_policy_attempts(p, 0x100, &b, NULL), 0, "b too");
        is_int(relay_policy_attempts(p, 0x200, &a, NULL), 1, "a of another transaction remembered");
        relay_policy_forget_txn(p, 0x999);
        is_int(relay_policy_pending(p), 2, "forgetting an unknown transaction changes nothing");
        relay_policy_free(p);
}

/* One transaction, one id, three events (0157): each is known apart by its
 * topic, key, value and headers; alike but for the timestamp, one. */
static void test_same_id(void)
{
        relay_policy_t *p = make(false, 3, NULL, 0);
        relay_header_t h1[] = {{"id", "e", 1}, {"type", "Good", 4}},
                       h2[] = {{"id", "e", 1}, {"type", "Old", 3}},
                       hnull[] = {{"id", "e", 1}, {"type", NULL, 0}};
        relay_event_t good = ev_of("e", "{}"), old = ev_of("e", "{}"), late = ev_of("e", "{\"n\": 3}"),
                      other_topic = ev_of("e", "{}"), keyed = ev_of("e", "{}"), nullh = ev_of("e", "{}"),
                      later = ev_of("e", "{}");
        good.headers = h1;
        good.nheaders = 2;
        old.headers = h2;
        old.nheaders = 2;
        old.timestamp_ms = 981173106000;
        other_topic.topic = "u";
        keyed.key = "k";
        keyed.key_len = 1;
        nullh.headers = hnull;
        nullh.nheaders = 2;
        later.headers = h2;
        later.nheaders = 2;
        is_int(relay_policy_rejected(p, 0x100, &old, "invalid timestamp"), 1, "old refused");
        is_int(relay_policy_attempts(p, 0x100, &good, NULL), 0, "another header value: another event");
        is_int(relay_policy_attempts(p, 0x100, &late, NULL), 0, "another value: another event");
        is_int(relay_policy_attempts(p, 0x100, &other_topic, NULL), 0, "another topic: another event");
        is_int(relay_policy_attempts(p, 0x100, &keyed, NULL), 0, "another key: another event");
        is_int(relay_policy_attempts(p, 0x100, &nullh, NULL), 0, "a NULL header: another event");
        is_int(relay_policy_attempts(p, 0x100, &later, NULL), 1,
               "alike but for the timestamp: the same entry");
        is_int(relay_policy_rejected(p, 0x100, &good, "denied"), 1, "good refused too: its own entry");
        is_int(relay_policy_rejected(p, 0x100, &old, "invalid timestamp"), 2, "old counted apart");
        is_int(relay_policy_pending(p), 2, "two events remembered");
        /* Under debezium-server the id header is a JSON envelope: the event
         * is found by it, whatever id text a report could make of it. */
        relay_header_t env[] = {{"id", "{\"schema\":{\"type\":\"string\",\"optional\":false},"
                                       "\"payload\":\"say \\\"hi\\\"\"}", 0}};
        env[0].len = strlen(env[0].value);
        relay_event_t dbz = ev_of("say \"hi\"", "{}"), dbz_report = ev_of("say \\\"hi\\\"", "{}");
        dbz.headers = env;
        dbz.nheaders = 1;
        dbz_report.headers = env;
        dbz_report.nheaders = 1;
        is_int(relay_policy_rejected(p, 0x100, &dbz_report, "invalid timestamp"), 1,
               "refused, named by its escaped id");
        is_int(relay_policy_attempts(p, 0x100, &dbz, NULL), 1, "found again by its row's id");
        relay_policy_free(p);
}

static void test_skip(void)
{
        static const char *const ids[] = {"id-1", "id-2", "id-3"};
        relay_policy_t *p = make(false, 3, ids, 3);
        ok(relay_policy_skip(p, "id-1", 4), "skip id-1");
        ok(relay_policy_skip(p, "id-3", 4), "skip id-3");
        ok(!relay_policy_skip(p, "id-", 3), "a prefix is not a match");
        ok(!relay_policy_skip(p, "id-10", 5), "a longer id is not a match");
        ok(!relay_policy_skip(p, NULL, 0), "no id: never skipped");
        relay_policy_free(p);
        relay_policy_free(NULL);
}

static void test_dead_letter(void)
{
        relay_policy_t *p = make(false, 3, NULL, 0);
        relay_header_t h[2] = {{"id", "e-1", 3}, {"type", "T", 1}};
        relay_event_t ev = {.topic = "orders", .key = "k", .key_len = 1, .value = "v",
                            .value_len = 1, .id = "e-1", .id_len = 3, .headers = h,
                            .nheaders = 2, .timestamp_ms = 1700000000123};
        relay_policy_dlq_t scratch;
        relay_event_t out;
        char err[RELAY_ERRBUF];
        /* The commit time, not the event's timestamp (a column's, under
         * table.field.event.timestamp). */
        is_int(relay_policy_dead_letter(p, &ev, 0x16B374D848, 1700000000456, "too large", 4,
                                        &scratch, &out, err, sizeof(err)),
               0, "dead-letter copy built");
        is_str(out.topic, "dlq", "to the dead-letter topic");
        ok(out.key == ev.key && out.value == ev.value, "same key and value");
        is_int(out.nheaders, 7, "own two headers plus five");
        is_str(out.headers[0].name, "id", "own headers first");
        is_str(out.headers[2].name, "outbox.error.message", "then the cause");
        ok(out.headers[2].len == 9 && memcmp(out.headers[2].value, "too large", 9) == 0,
           "cause value");
        ok(out.headers[3].len == 6 && memcmp(out.headers[3].value, "orders", 6) == 0, "source topic");
        ok(out.headers[4].len == 11 && memcmp(out.headers[4].value, "16/B374D848", 11) == 0,
           "LSN as %%X/%%X");
        ok(out.headers[5].len == 13 && memcmp(out.headers[5].value, "1700000000456", 13) == 0,
           "commit time in ms");
        is_int(out.timestamp_ms, 1700000000123, "the event's own timestamp kept");
        ok(out.headers[6].len == 1 && memcmp(out.headers[6].value, "4", 1) == 0, "attempts");

        ev.topic = NULL;
        is_int(relay_policy_dead_letter(p, &ev, 1, 0, "unmappable", 0, &scratch, &out, err, sizeof(err)),
               0, "an event without topic (mapping failed)");
        is_int(out.headers[3].len, 0, "its source topic header is empty");

        relay_header_t many[RELAY_EVENT_MAX_WIRE_HEADERS];
        for (size_t i = 0; i < RELAY_EVENT_MAX_WIRE_HEADERS; i++)
                many[i] = (relay_header_t){"h", "v", 1};
        ev.headers = many;
        ev.nheaders = RELAY_EVENT_MAX_WIRE_HEADERS - 4;
        is_int(relay_policy_dead_letter(p, &ev, 1, 0, "x", 0, &scratch, &out, err, sizeof(err)),
               RELAY_EINVAL, "too many headers to add five: refused, not truncated");
        ok(strstr(err, "headers") != NULL, "the message says why (%s)", err);
        relay_policy_free(p);
}

int main(void)
{
        test_next_dlq();
        test_next_stop();
        test_memory();
        test_same_id();
        test_skip();
        test_dead_letter();
        return done_testing();
}
