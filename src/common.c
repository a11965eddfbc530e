/*
 * common.c - the error-buffer helper and return-code names every module
 * shares. Kept tiny so any module (and any test) can link it alone.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <stdarg.h>
#include <stdio.h>

#include "relay/common.h"

void relay_err_set(char *err, size_t errlen, const char *fmt, ...)
{
        va_list ap;

        /* Callers that do not care about the detail pass NULL/0. */
        if (err == NULL || errlen == 0)
                return;
        va_start(ap, fmt);
        /* vsnprintf truncates and always terminates when errlen > 0. */
        if (vsnprintf(err, errlen, fmt, ap) < 0)
                err[0] = '\0';
        va_end(ap);
}

const char *relay_strerror(int code)
{
        switch (code) {
        case RELAY_OK:
                return "RELAY_OK";
        case RELAY_EINVAL:
                return "RELAY_EINVAL";
        case RELAY_EPROTO:
                return "RELAY_EPROTO";
        case RELAY_EIO:
                return "RELAY_EIO";
        case RELAY_ENOMEM:
                return "RELAY_ENOMEM";
        case RELAY_EKAFKA:
                return "RELAY_EKAFKA";
        case RELAY_EBUSY:
                return "RELAY_EBUSY";
        case RELAY_ESETUP:
                return "RELAY_ESETUP";
        case RELAY_EAGAIN:
                return "RELAY_EAGAIN";
        case RELAY_EMAP:
                return "RELAY_EMAP";
        case RELAY_ESLOTLOST:
                return "RELAY_ESLOTLOST";
        default:
                return "unknown return code";
        }
}
