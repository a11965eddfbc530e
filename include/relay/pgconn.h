/*
 * pgconn.h - opening a PostgreSQL connection whose refusal can be told
 * apart, in any lc_messages language, from a server that is away: the
 * relay's replication connection (repl.c) and outbox-inbox's (inbox.c).
 *
 * libpq gives a failed connection's SQLSTATE only in its verbose message,
 * so relay_pgconn_connect() opens it verbose and relay_pgconn_failure()
 * reads the code and hands back the message as the default verbosity
 * writes it.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_PGCONN_H
#define RELAY_PGCONN_H

#include <signal.h>
#include <stddef.h>

#include <libpq-fe.h>

/* What a failed connection says about the next try. */
typedef enum {
        RELAY_PGCONN_AWAY,      /* no server answered, or one that may later (57P03, 53300) */
        RELAY_PGCONN_PRIVILEGE, /* 42501: no REPLICATION for a walsender, or no CONNECT */
        RELAY_PGCONN_PASSWORD,  /* 28P01, or a password needed and none given */
        RELAY_PGCONN_TLS,       /* the server's certificate or SSL refused (libpq's words) */
        RELAY_PGCONN_REFUSED,   /* 28000 (pg_hba.conf, role, LOGIN), 3D000 (no database) */
} relay_pgconn_failure_t;

/**
 * @brief PQconnectdbParams() (same keys, vals and expand) with the verbose
 *        error message relay_pgconn_failure() reads; the default verbosity
 *        again once it ends, for the session's messages. Goes on to the
 *        next address or host when one fails, as libpq does, and so at
 *        connect_timeout: with a new connection to the addresses after it
 *        (*out may be another connection than the first; its message
 *        starts with what was said of those before), or, on the last
 *        address, by giving up (the connection left unfinished, which
 *        relay_pgconn_failure() reads as "timeout expired"). Where it
 *        cannot tell the addresses after (a host given twice,
 *        target_session_attrs=prefer-standby, load_balance_hosts), libpq's
 *        blocking PQreset() tries them all again from the first, and does
 *        not look at stop.
 * @param stop set by a signal handler to stop (borrowed, may be NULL):
 *        looked at between polls, at least every 200 ms.
 * @returns 0 and *out, the connection (caller PQfinish()es it, whatever
 *          its status: CONNECTION_OK, or a failure for
 *          relay_pgconn_failure()); RELAY_ESTOPPED when *stop was set
 *          before it ended (*out NULL, the connection closed: a stop, not
 *          a connection failure); RELAY_ENOMEM (*out NULL).
 */
int relay_pgconn_connect(PGconn **out, const char *const *keys, const char *const *vals,
                         int expand, const volatile sig_atomic_t *stop);

/**
 * @brief Classify conn, a connection relay_pgconn_connect() did not make
 *        (status CONNECTION_BAD, or unfinished: given up at
 *        connect_timeout, "timeout expired"), by SQLSTATE; libpq's and OpenSSL's own
 *        messages (no code) are matched as English text, which they are
 *        (the project never calls setlocale()). Fills msg (msglen > 0)
 *        with its message without the codes, the LOCATION lines and the
 *        trailing newline.
 * @returns what the next try may expect: anything but RELAY_PGCONN_AWAY
 *          meets the same refusal.
 */
relay_pgconn_failure_t relay_pgconn_failure(PGconn *conn, char *msg, size_t msglen);

/** The fix to say for f (a static string), or NULL when there is none to
 *  say in general (RELAY_PGCONN_AWAY, RELAY_PGCONN_REFUSED, and
 *  RELAY_PGCONN_PRIVILEGE, whose fix is the caller's). */
const char *relay_pgconn_fix(relay_pgconn_failure_t f);

#endif
