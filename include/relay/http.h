/*
 * http.h - the HTTP endpoint: GET /metrics (Prometheus text), /healthz
 * (liveness) and /readyz (readiness), served by libmicrohttpd on a thread
 * of its own; and the small client behind --health-check.
 *
 * The server thread reads only the metrics snapshot (metrics.h): it never
 * calls libpq or librdkafka and never waits for the main loop. Built
 * without libmicrohttpd (meson -Dhttp=disabled), relay_http_start() says so
 * and the relay runs without the endpoint.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_HTTP_H
#define RELAY_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "relay/common.h"
#include "relay/metrics.h"

typedef struct relay_http relay_http_t;

/* Limits against slow or hostile clients: connections from other
 * addresses share RELAY_HTTP_MAX_CONNECTIONS; the host's own loopback
 * address (127.0.0.1, ::1: --health-check's) has RELAY_HTTP_MAX_PER_IP
 * more of its own, so clients elsewhere that hold every shared slot cannot
 * fail the health check of the container (Docker's HEALTHCHECK, a
 * Kubernetes exec probe). */
#define RELAY_HTTP_MAX_CONNECTIONS 64
#define RELAY_HTTP_MAX_PER_IP 16
#define RELAY_HTTP_TIMEOUT_S 10

/** @brief Whether this build has the endpoint (libmicrohttpd). */
bool relay_http_available(void);

/**
 * @brief Check an http.listen value: "off", "HOST:PORT" with HOST a numeric
 *        IPv4 address, "[IPV6]:PORT", or ":PORT" (every interface).
 * @returns 0, or RELAY_EINVAL with the rule broken in why.
 */
int relay_http_check_listen(const char *listen, char *why, size_t whylen) RELAY_MUST_CHECK;

/**
 * @brief Listen on listen (checked by relay_http_check_listen(), not "off")
 *        and serve m (borrowed: it must outlive the server). /healthz fails
 *        when the loop has not turned for stall_ms.
 * @returns 0 and *out (stop with relay_http_stop()); RELAY_ESETUP when the
 *          address cannot be bound (in use, not local) or the build has no
 *          HTTP support; RELAY_ENOMEM.
 */
int relay_http_start(relay_http_t **out, const char *listen, int64_t stall_ms, relay_metrics_t *m,
                     char *err, size_t errlen) RELAY_MUST_CHECK;

/** @brief Stop serving (waits for the server thread) and free; accepts NULL. */
void relay_http_stop(relay_http_t *h);

/**
 * @brief GET path from the relay listening on listen (an address of every
 *        interface is asked on loopback), for --health-check.
 * @returns the HTTP status (200, 503...) with the start of the body in
 *          body; or RELAY_EIO when there is no answer within timeout_ms (err
 *          says why).
 */
int relay_http_get(const char *listen, const char *path, int timeout_ms, char *body,
                   size_t bodylen, char *err, size_t errlen);

#endif
