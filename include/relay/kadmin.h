/*
 * kadmin.h - Kafka admin requests on a client the caller owns: one
 * request's queue, options and answer, and reading one configuration value
 * of a topic or broker (DescribeConfigs); and a client's bool property as
 * librdkafka reads it.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_KADMIN_H
#define RELAY_KADMIN_H

#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stddef.h>

#include "relay/common.h"

/*
 * One admin request on a client the caller owns: its reply queue and
 * options, and the event its answer came in. Start from {0}.
 */
typedef struct {
        rd_kafka_queue_t *q;
        rd_kafka_AdminOptions_t *opt;
        rd_kafka_event_t *ev;
} relay_kadmin_req_t;

/** @brief A reply queue and options for op on rk (borrowed).
 *  @returns false when out of memory (end the request all the same). */
bool relay_kadmin_begin(relay_kadmin_req_t *r, rd_kafka_t *rk, rd_kafka_admin_op_t op);

/** @brief Wait up to timeout_ms for the answer: r->ev, NULL when none came. */
rd_kafka_event_t *relay_kadmin_wait(relay_kadmin_req_t *r, int timeout_ms);

/** @brief Destroy what the request holds (event, options, queue). */
void relay_kadmin_end(relay_kadmin_req_t *r);

/**
 * @brief The value of name for resource resname of type (a topic's name,
 *        a broker's id as text) in *out (caller frees; NULL on error),
 *        asked on rk (borrowed), waiting up to timeout_ms (+500 ms).
 * @returns RD_KAFKA_RESP_ERR_NO_ERROR; the resource's or request's error
 *          (e.g. RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART,
 *          RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED;
 *          RD_KAFKA_RESP_ERR__NOENT when the answer lacks name), with the
 *          reason in err. A timeout is one of the codes
 *          relay_kadmin_timed_out() accepts: no answer came in time, which
 *          says nothing about the resource or the principal's rights.
 */
rd_kafka_resp_err_t relay_kadmin_config(rd_kafka_t *rk, rd_kafka_ResourceType_t type,
                                        const char *resname, const char *name, int timeout_ms,
                                        char **out, char *err, size_t errlen) RELAY_MUST_CHECK;

/**
 * @brief Is e a timeout rather than an answer: RD_KAFKA_RESP_ERR__TIMED_OUT
 *        (relay_kadmin_config() waited in vain, or librdkafka's request
 *        timeout ran out, also while it waited for the controller a topic's
 *        DescribeConfigs goes to) or the broker's REQUEST_TIMED_OUT? Such a
 *        request is worth making again later: the cluster was slow or
 *        unreachable, it did not refuse.
 */
bool relay_kadmin_timed_out(rd_kafka_resp_err_t e);

/** @brief Whether the bool property name of conf (borrowed) is true as
 *         librdkafka reads it: true, t or 1 in any case. The value as
 *         written cannot be compared; librdkafka gives it back as "true"
 *         or "false". False when it is not set or not a property. */
bool relay_kadmin_conf_true(const rd_kafka_conf_t *conf, const char *name);

#endif
