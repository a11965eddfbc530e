/*
 * 0224-check-kafka-timeout.c - `check`'s kafka.auto_create_topics line when
 * the broker's auto.create.topics.enable cannot be read for a reason other
 * than a missing permission: its fix must fit the cause (README: every
 * line names the problem and the fix).
 *
 * librdkafka's mock cluster (two brokers), `check` asking broker 1 (the
 * first the metadata lists):
 *   - broker 1 down: the DescribeConfigs request waits for it and times out
 *     ("Failed while waiting for broker: Local: Timed out"). The line must
 *     say that no answer came and to check that the broker is up and
 *     reachable, not to grant DescribeConfigs;
 *   - broker 1 up: the mock does not support DescribeConfigs (as a broker
 *     older than 0.11), which no grant helps with either.
 * `check` used to print "grant DescribeConfigs on the cluster to see it"
 * for both.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "harness.h"

/* check's kafka.auto_create_topics line (caller frees; NULL when none). */
static char *autocreate_line(const fx_case_t *fc)
{
        char *out, *log, *line = NULL;
        int rc = h_relay_run_cmd("check", NULL, fc->sets.v, 120000, &out, &log);
        const char *p = strstr(out, "kafka.auto_create_topics");
        if (p) {
                while (p > out && p[-1] != '\n')
                        p--;
                line = strndup(p, strcspn(p, "\n"));
                tap_diag("check exit %d: %s", rc, line);
        } else {
                tap_diag("check exit %d, no kafka.auto_create_topics line:\n%s\n%s", rc, out, log);
        }
        free(out);
        free(log);
        return line;
}

int main(void)
{
        rd_kafka_mock_cluster_t *mock;
        fx_case_t fc;
        fx_mock_case_open(&fc, "checktimeout", "ct", 2, &mock);

        rd_kafka_mock_broker_set_down(mock, 1);
        char *line = autocreate_line(&fc);
        ok(line && strstr(line, "could not read auto.create.topics.enable from broker 1: no "
                                "answer within"),
           "broker down: the line says no answer came");
        ok(line && strstr(line, "check that the broker is up and reachable"),
           "and to check the broker");
        ok(line && !strstr(line, "grant DescribeConfigs"), "not to grant DescribeConfigs");
        free(line);

        rd_kafka_mock_broker_set_up(mock, 1);
        line = autocreate_line(&fc);
        ok(line && strstr(line, "not supported by broker"),
           "broker up, DescribeConfigs unsupported: the line says so");
        ok(line && !strstr(line, "grant DescribeConfigs"), "not to grant DescribeConfigs");
        free(line);

        fx_case_close(&fc, NULL);
        return done_testing();
}
