/*
 * kadmin.c - Kafka admin requests: one request's reply queue, options and
 * answer (also used for the checkpoint topic's CreateTopics), and the one
 * the relay and `check` make: read a topic's or a broker's configuration
 * value (DescribeConfigs), waiting for the answer. Kept apart so the
 * producer and the preflight share it.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include "relay/kadmin.h"

#include <stdlib.h>
#include <string.h>

bool relay_kadmin_begin(relay_kadmin_req_t *r, rd_kafka_t *rk, rd_kafka_admin_op_t op)
{
        *r = (relay_kadmin_req_t){.q = rd_kafka_queue_new(rk),
                                  .opt = rd_kafka_AdminOptions_new(rk, op)};
        return r->q && r->opt;
}

rd_kafka_event_t *relay_kadmin_wait(relay_kadmin_req_t *r, int timeout_ms)
{
        return r->ev = rd_kafka_queue_poll(r->q, timeout_ms);
}

void relay_kadmin_end(relay_kadmin_req_t *r)
{
        if (r->ev)
                rd_kafka_event_destroy(r->ev);
        if (r->opt)
                rd_kafka_AdminOptions_destroy(r->opt);
        if (r->q)
                rd_kafka_queue_destroy(r->q);
        *r = (relay_kadmin_req_t){0};
}

bool relay_kadmin_timed_out(rd_kafka_resp_err_t e)
{
        return e == RD_KAFKA_RESP_ERR__TIMED_OUT || e == RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT;
}

rd_kafka_resp_err_t relay_kadmin_config(rd_kafka_t *rk, rd_kafka_ResourceType_t type,
                                        const char *resname, const char *name, int timeout_ms,
                                        char **out, char *err, size_t errlen)
{
        rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR__TIMED_OUT;
        char kerr[RELAY_ERRBUF];
        relay_kadmin_req_t req;
        bool begun = relay_kadmin_begin(&req, rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS);
        rd_kafka_ConfigResource_t *res = rd_kafka_ConfigResource_new(type, resname);
        rd_kafka_event_t *ev;

        *out = NULL;
        relay_err_set(err, errlen, "no answer within %d ms", timeout_ms);
        if (!begun || !res) {
                relay_err_set(err, errlen, "out of memory");
                e = RD_KAFKA_RESP_ERR__FAIL;
                goto done;
        }
        rd_kafka_AdminOptions_set_request_timeout(req.opt, timeout_ms, kerr, sizeof(kerr));
        rd_kafka_DescribeConfigs(rk, &res, 1, req.opt, req.q);
        if (!(ev = relay_kadmin_wait(&req, timeout_ms + 500)))
                goto done;
        if ((e = rd_kafka_event_error(ev))) {
                relay_err_set(err, errlen, "%s", rd_kafka_event_error_string(ev));
                goto done;
        }
        const rd_kafka_DescribeConfigs_result_t *r = rd_kafka_event_DescribeConfigs_result(ev);
        size_t nres = 0, ncfg = 0;
        const rd_kafka_ConfigResource_t **rs = r ? rd_kafka_DescribeConfigs_result_resources(r, &nres) : NULL;
        if (!rs || nres < 1) {
                relay_err_set(err, errlen, "empty DescribeConfigs result");
                e = RD_KAFKA_RESP_ERR__BAD_MSG;
                goto done;
        }
        if ((e = rd_kafka_ConfigResource_error(rs[0]))) {
                const char *es = rd_kafka_ConfigResource_error_string(rs[0]);
                relay_err_set(err, errlen, "%s", es ? es : rd_kafka_err2str(e));
                goto done;
        }
        const rd_kafka_ConfigEntry_t **cs = rd_kafka_ConfigResource_configs(rs[0], &ncfg);
        for (size_t i = 0; i < ncfg; i++) {
                const char *v = rd_kafka_ConfigEntry_value(cs[i]);
                if (strcmp(rd_kafka_ConfigEntry_name(cs[i]), name) == 0 && v) {
                        if (!(*out = strdup(v))) {
                                relay_err_set(err, errlen, "out of memory");
                                e = RD_KAFKA_RESP_ERR__FAIL;
                                goto done;
                        }
                        break;
                }
        }
        if (!*out) {
                relay_err_set(err, errlen, "the answer has no %s", name);
                e = RD_KAFKA_RESP_ERR__NOENT;
        }
done:
        relay_kadmin_end(&req);
        if (res)
                rd_kafka_ConfigResource_destroy(res);
        return e;
}

bool relay_kadmin_conf_true(const rd_kafka_conf_t *conf, const char *name)
{
        char v[16];
        size_t n = sizeof(v);
        return rd_kafka_conf_get(conf, name, v, &n) == RD_KAFKA_CONF_OK && strcmp(v, "true") == 0;
}
