/*
 * common.h - error codes, LSN type, the error-buffer helper and the few string
 * helpers shared by every module of outbox-relay.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_COMMON_H
#define RELAY_COMMON_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/** @brief A WAL position: 64 bits, printed as two 32-bit hex halves. */
typedef uint64_t relay_lsn_t;

#define RELAY_LSN_FMT "%X/%X"
#define RELAY_LSN_ARGS(lsn) (unsigned)((uint64_t)(lsn) >> 32), (unsigned)((uint64_t)(lsn) & 0xffffffffu)

/** @brief Size every caller-supplied error buffer should have. */
#define RELAY_ERRBUF 1024

/**
 * @brief Called about every 100 ms, with the ctx it was given, while a
 *        module waits on something beyond the main loop (creating a slot
 *        waits for other sessions' transactions, the exactly-once
 *        checkpoint read for another producer's), so that the caller keeps
 *        its own duties going (status updates, the watchdog, /healthz) and
 *        can end the wait (a stop signal).
 * @returns 0 to go on waiting, or a negative code with err filled to end
 *          the wait; what ending means is the waiting function's to say.
 */
typedef int relay_tick_fn(void *ctx, char *err, size_t errlen);

/*
 * Return codes of fallible functions: 0, or one of these. The main loop
 * decides from the class whether to retry (transient) or stop (fatal).
 * X(name, value, what relay_strerror() says): one list, so that a new code
 * cannot lack its description. The codes run from 0 down without a gap.
 */
#define RELAY_RETURN_CODES(X)                                                                  \
        X(RELAY_OK, 0, "success")                                                              \
        /* bad configuration or argument: fix and restart */                                  \
        X(RELAY_EINVAL, -1, "invalid configuration or argument")                               \
        /* the server sent bytes we cannot accept: fatal */                                    \
        X(RELAY_EPROTO, -2, "protocol violation by the server")                                \
        /* connection lost or refused: transient, retry */                                     \
        X(RELAY_EIO, -3, "connection lost or refused")                                         \
        X(RELAY_ENOMEM, -4, "out of memory")                                                   \
        /* Kafka refused or failed: retry from the slot */                                     \
        X(RELAY_EKAFKA, -5, "Kafka error")                                                     \
        /* slot active in another process: stand by */                                         \
        X(RELAY_EBUSY, -6, "replication slot active in another process")                       \
        /* server not set up for us (version, wal_level, privilege, table) */                  \
        X(RELAY_ESETUP, -7, "server not set up for the relay")                                 \
        /* queue full: poll, then try again */                                                 \
        X(RELAY_EAGAIN, -8, "queue full, try again")                                           \
        X(RELAY_EMAP, -9, "outbox row cannot become an event")                                 \
        /* slot dropped or invalidated: events may be missing */                               \
        X(RELAY_ESLOTLOST, -10, "replication slot dropped or invalidated")                     \
        /* Kafka refuses this one event for good (too large, invalid or unauthorized           \
         * topic): the error policy decides */                                                 \
        X(RELAY_EREJECTED, -11, "event rejected by Kafka")                                     \
        /* another producer took over our transactional.id: stop */                            \
        X(RELAY_EFENCED, -12, "fenced by another producer with the same transactional.id")   \
        /* a wait ended because a stop was asked for (SIGTERM, SIGINT): a clean stop,         \
         * not an error */                                                                     \
        X(RELAY_ESTOPPED, -13, "stopped on request")

enum {
#define RELAY_RETURN_CODE_ENUM(name, value, what) name = value,
        RELAY_RETURN_CODES(RELAY_RETURN_CODE_ENUM)
#undef RELAY_RETURN_CODE_ENUM
};

#if defined(__GNUC__)
#define RELAY_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define RELAY_MUST_CHECK __attribute__((warn_unused_result))
#else
#define RELAY_PRINTF(a, b)
#define RELAY_MUST_CHECK
#endif

/**
 * @brief Format a message into a caller's error buffer (always NUL-terminated;
 *        err may be NULL or errlen 0, then nothing is written).
 */
void relay_err_set(char *err, size_t errlen, const char *fmt, ...) RELAY_PRINTF(3, 4);

/**
 * @brief relay_err_set(), then code: a failure said and returned in one
 *        statement (return relay_err(err, errlen, RELAY_ENOMEM, "out of memory")).
 */
int relay_err(char *err, size_t errlen, int code, const char *fmt, ...) RELAY_PRINTF(4, 5);

/**
 * @brief What a return code means, in a few words ("connection lost or
 *        refused"), for messages that have no detail of their own; "unknown
 *        return code" for anything else.
 */
const char *relay_strerror(int code);

/*
 * Names of an enum's values, from the enum's X-macro list (X(value, name),
 * as RELAY_DR_CLASSES): static const char *const names[] =
 * {RELAY_DR_CLASSES(RELAY_NAME_ENTRY)}; then RELAY_NAME_OF(names, v, "?").
 */
#define RELAY_NAME_ENTRY(value, name) [value] = name,
#define RELAY_NAME_OF(names, v, unknown)                                                       \
        relay_name_of((names), sizeof(names) / sizeof((names)[0]), (long)(v), (unknown))

/** @brief names[v], or unknown when v is out of the table's n entries or has no name. */
const char *relay_name_of(const char *const *names, size_t n, long v, const char *unknown);

/** @brief Value of a hex digit (0-9, a-f, A-F), or -1. Locale-independent, unlike isxdigit(). */
int relay_hexval(char c);

/**
 * @brief Copy of n bytes at s plus a terminating NUL (s may be NULL when n is
 *        0). Caller frees with free(); NULL when out of memory.
 */
char *relay_dupn(const char *s, size_t n);

/**
 * @brief Copy of s with every byte that is not part of valid UTF-8 replaced
 *        by '?': messages quote server, broker and table text we do not
 *        control (or cut it inside a character), and jansson refuses to
 *        build a JSON string from invalid UTF-8. Caller frees with free();
 *        NULL when out of memory.
 */
char *relay_utf8_sanitize(const char *s);

/** @brief Size of a relay_abbrev() buffer: room for a key or value quoted in a message. */
#define RELAY_ABBREV_BUF 96

/**
 * @brief s as a message may quote it: s itself when it is shorter than
 *        buflen, else its start, cut on a UTF-8 character boundary, plus
 *        "...", written into buf. A message quoting a pasted blob whole
 *        would fill the error buffer before it names the key, the file line
 *        and the fix. Returns s or buf (borrowed).
 */
const char *relay_abbrev(const char *s, char *buf, size_t buflen);

/** @brief free() each of the n pointers at ptrs (NULL ones too). */
void relay_free_all(void *const *ptrs, size_t n);

/**
 * @brief free() every argument, in order: a destructor's list of owned
 *        fields, the struct itself last (RELAY_FREE_ALL(s->a, s->b, s)).
 */
#define RELAY_FREE_ALL(...)                                                                        \
        relay_free_all((void *const[]){__VA_ARGS__},                                               \
                       sizeof((void *const[]){__VA_ARGS__}) / sizeof(void *))

/** @brief free() the n strings of items, then items (NULL when n is 0). */
void relay_free_list(char **items, size_t n);

/*
 * Key/value strings in the order they were added, owned copies; start
 * from {0}, free the contents with relay_pairs_free().
 */
typedef struct {
        char **k, **v;
        size_t n, cap;
} relay_pairs_t;

/** @brief Append copies of the kl bytes at k and the vl bytes at v.
 *  @returns 0; RELAY_ENOMEM (p unchanged). */
int relay_pairs_add(relay_pairs_t *p, const char *k, size_t kl, const char *v, size_t vl);

/** @brief Replace the value of key k, or append k = v when it has none.
 *  @returns 0; RELAY_ENOMEM (p unchanged). */
int relay_pairs_set(relay_pairs_t *p, const char *k, const char *v);

/** @brief The value of key k, the last one added (as java.util.Properties
 *         reads a file), or NULL. */
const char *relay_pairs_get(const relay_pairs_t *p, const char *k);

/** @brief Free the pairs and both arrays (not p itself); p is {0} again. */
void relay_pairs_free(relay_pairs_t *p);

/**
 * @brief Next item of a comma-separated list, blanks (space, tab) around it
 *        trimmed. Start with *p at the list; each call sets *item and *len
 *        (the item may be empty: "a,,b" has three) and moves *p on, to NULL
 *        after the last item. A list of blanks alone is one empty item;
 *        callers that mean "no items" by it check first.
 * @returns false when *p is NULL (no more items).
 */
bool relay_list_next(const char **p, const char **item, size_t *len);

/*
 * A string being built: growable (start from {0}; relay_strbuf_finish()
 * hands the result over) or bounded by a caller's buffer
 * (relay_strbuf_fixed()). The first append that fails (out of memory, or
 * past a bounded buffer's end) sets failed, and every later one is then
 * ignored; what was built so far stays NUL-terminated.
 */
typedef struct {
        char *p;      /* the text; the caller's buffer when fixed */
        size_t len;   /* bytes of text, the NUL not counted */
        size_t cap;   /* bytes at p */
        bool fixed;   /* bounded: p is never reallocated */
        bool failed;  /* an append did not fit or memory ran out */
} relay_strbuf_t;

/** @brief Build into the caller's buf of size bytes (empties it). */
void relay_strbuf_fixed(relay_strbuf_t *b, char *buf, size_t size);

/** @brief Append n bytes at s (s may be NULL when n is 0). */
void relay_strbuf_addn(relay_strbuf_t *b, const char *s, size_t n);

/** @brief Append the string s. */
void relay_strbuf_adds(relay_strbuf_t *b, const char *s);

/** @brief Append the character c. */
void relay_strbuf_addc(relay_strbuf_t *b, char c);

/**
 * @brief A growable builder's string (caller frees with free(); "" when
 *        nothing was appended), or NULL when an append failed (the buffer
 *        is freed then). b must not be used again but from {0}.
 */
char *relay_strbuf_finish(relay_strbuf_t *b);

/**
 * @brief Write the n bytes at s to out, each byte b for which esc[b] is set
 *        as that string instead: an escaping scheme as a table by byte.
 */
void relay_fput_escaped(FILE *out, const char *s, size_t n, const char *const esc[256]);

/**
 * @brief The stop signals of a program: handler for SIGTERM and SIGINT,
 *        without SA_RESTART (a wait in poll() must wake up for them), and
 *        SIGPIPE ignored when ignore_sigpipe (a write to a closed socket
 *        must fail, not kill). The handler must only set a
 *        volatile sig_atomic_t or _exit().
 * @returns 0, or RELAY_ESETUP with a message in err: without its handlers a
 *          stop would kill the program instead of ending its loop.
 */
int relay_stop_signals(void (*handler)(int), bool ignore_sigpipe, char *err,
                       size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief SIGHUP counted, not obeyed: a handler that only adds one to a
 *        volatile sig_atomic_t (common.c's, the only global here), with
 *        SA_RESTART (common.c says why). For a program's loop, which has no
 *        reload and must not die of a hangup (status 129, no drain): it
 *        compares *received with the count it has logged at every turn of
 *        its waits (relay_log_hangups()).
 * @returns 0 and *received (the counter), or RELAY_ESETUP with a message in err.
 */
int relay_hangup_signal(const volatile sig_atomic_t **received, char *err,
                        size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief Flush stdout and tell a failure to write it from a reader that
 *        stopped reading (`prog --man | head`: EPIPE, with SIGPIPE ignored,
 *        relay_stop_signals()), which is no error, as tail(1) has it.
 *        stdout's writes all fail alike, so errno of the last one (the
 *        flush's, or the print's before it when nothing was left to flush)
 *        says which.
 * @returns 0 when written or the reader is gone, or RELAY_EIO with the cause
 *          in err ("could not write to standard output: No space left on
 *          device"): a program says it and exits 1.
 */
int relay_stdout_finish(char *err, size_t errlen) RELAY_MUST_CHECK;

/** @brief Milliseconds on the monotonic clock (for intervals, not dates). */
int64_t relay_now_ms(void);

/** @brief Seconds between the Unix epoch and PostgreSQL's (2000-01-01 UTC). */
#define RELAY_PG_EPOCH_OFFSET_S INT64_C(946684800)

/** @brief The wall clock as PostgreSQL epoch microseconds (since 2000-01-01
 *         UTC), the clock of the server's commit times and of the status
 *         updates' send time. */
int64_t relay_pg_now_us(void);

/** @brief A PostgreSQL epoch time in microseconds (a commit time) as Unix
 *         epoch milliseconds (Kafka's timestamps), rounded down. */
int64_t relay_pg_to_unix_ms(int64_t pg_us);

#endif
