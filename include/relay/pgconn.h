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
 * @brief PQconnectdbParams() (same arguments) with the verbose error message
 *        relay_pgconn_failure() reads; the default verbosity again once it
 *        ends, for the session's messages.
 * @returns the connection (caller PQfinish()es it, whatever its status), or
 *          NULL when out of memory.
 */
PGconn *relay_pgconn_connect(const char *const *keys, const char *const *vals, int expand);

/**
 * @brief Classify conn, a connection relay_pgconn_connect() did not make
 *        (status CONNECTION_BAD), by SQLSTATE; libpq's and OpenSSL's own
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
