/*
 * status.h - `outbox-relay status`: what PostgreSQL holds for the relay's
 * slot (position, lag, WAL retention, the walsender serving it), read from
 * pg_replication_slots and pg_stat_replication on an ordinary connection.
 * Read-only.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_STATUS_H
#define RELAY_STATUS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "relay/common.h"
#include "relay/settings.h"

/**
 * @brief The slot as the server sees it. Strings are owned by the struct
 *        (relay_status_free()); "" when unknown.
 */
typedef struct {
        char *slot_name;
        bool exists;
        char *plugin;
        char *database;
        relay_lsn_t confirmed_flush_lsn;
        relay_lsn_t restart_lsn;
        bool restart_lsn_known;  /* false: NULL, as for an invalidated (lost) slot */
        relay_lsn_t server_lsn;  /* pg_current_wal_lsn(); on a standby pg_last_wal_replay_lsn(),
                                    as far as its walsenders decode (and as /metrics shows) */
        bool in_recovery;        /* the server is a standby */
        int64_t lag_bytes;       /* server_lsn - confirmed_flush_lsn */
        int64_t retained_bytes;  /* server_lsn - restart_lsn: WAL the slot keeps (0 when
                                  * restart_lsn is unknown) */
        char *wal_status;
        bool safe_wal_size_known; /* false: unlimited (max_slot_wal_keep_size = -1) */
        int64_t safe_wal_size;
        bool active;
        int active_pid;          /* the walsender serving it; 0 when inactive */
        char *client_addr;       /* "" for a Unix socket or when not streaming */
        int client_port;         /* 0 when unknown: a Unix socket, or not streaming */
        char *application_name;
        char *state;             /* pg_stat_replication.state */
        bool flush_lag_known;    /* PostgreSQL's own measurement, see README */
        double flush_lag_s;
        bool reply_age_known;
        double reply_age_s;      /* since the relay's last status message */
} relay_status_t;

/**
 * @brief Connect (postgres.conninfo from set, borrowed) and read the status
 *        of set->slot_name.
 * @returns 0 and *out (caller frees with relay_status_free()), also when
 *          the slot does not exist (exists = false); RELAY_EIO when the
 *          server cannot be reached or the query fails (err says why);
 *          RELAY_ENOMEM.
 */
int relay_status_read(relay_status_t **out, const relay_settings_t *set, char *err,
                      size_t errlen) RELAY_MUST_CHECK;

/** @brief Free; accepts NULL. */
void relay_status_free(relay_status_t *s);

/**
 * @brief Write the status as aligned text lines, or with json as one JSON
 *        object (the fields above, LSNs as "X/X" strings, unknown values null:
 *        restart_lsn and retained_bytes of a lost slot among them;
 *        lag_seconds: 0 when lag_bytes is 0, else flush_lag when known, else null).
 * @returns 0, or -1 when out could not be written.
 */
int relay_status_print(const relay_status_t *s, FILE *out, bool json);

#endif
