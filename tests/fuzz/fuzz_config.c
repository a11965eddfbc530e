/*
 * fuzz_config.c - libFuzzer target over the relay's configuration readers:
 * the --config file (conffile.c, config.c), --debezium-config (dbzconf.c,
 * props.c, jansson), the environment and --set, then what main.c does
 * with a configuration that loaded: validation, the typed settings
 * (settings.c, names.c, route.c) and --print-config.
 *
 * Input: one byte choosing the reader (modulo 4: 0 --config file,
 * 1 --debezium-config, 2 environment, 3 --set), then its text: a file's
 * bytes (written to a temporary file in $FUZZ_TMPDIR, else $TMPDIR or
 * /tmp), or lines, each a NAME=value of the environment or a key=value of
 * --set. Built and run by tests/fuzz/run.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "relay/config.h"
#include "relay/dbzconf.h"
#include "relay/settings.h"

#define MAX_LINES 64

/* The input's text in a temporary file; its path in path (PATH_MAX), 0 or -1. */
static int to_file(const unsigned char *d, size_t n, char *path, size_t pathlen)
{
        const char *dir = getenv("FUZZ_TMPDIR");
        if (!dir || !*dir)
                dir = getenv("TMPDIR");
        if (!dir || !*dir)
                dir = "/tmp";
        snprintf(path, pathlen, "%s/fuzz-config.XXXXXX", dir);
        int fd = mkstemp(path);
        if (fd < 0)
                return -1;
        int rc = n == 0 || write(fd, d, n) == (ssize_t)n ? 0 : -1;
        close(fd);
        return rc;
}

/* Lines of the input as the environment (env) or as --set arguments. */
static int from_lines(relay_config_t *c, const unsigned char *d, size_t n, int env, char *err,
                      size_t errlen)
{
        char *buf = malloc(n + 1);
        char *lines[MAX_LINES + 1];
        size_t k = 0;
        int rc = 0;
        if (buf == NULL)
                abort();
        memcpy(buf, d, n);
        buf[n] = '\0';
        for (char *save = NULL, *s = strtok_r(buf, "\n", &save); s && k < MAX_LINES;
             s = strtok_r(NULL, "\n", &save))
                lines[k++] = s;
        lines[k] = NULL;
        if (env)
                rc = relay_config_load_env(c, lines, err, errlen);
        else
                for (size_t i = 0; i < k && rc == 0; i++)
                        rc = relay_config_set_arg(c, lines[i], err, errlen);
        free(buf);
        return rc;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
        relay_config_t *c;
        char err[1024], notes[2048], path[4096];
        int rc;

        if (size < 1)
                return 0;
        if (relay_config_new(&c) != 0)
                abort();
        switch (data[0] % 4) {
        case 0:
        case 1:
                if (to_file(data + 1, size - 1, path, sizeof(path)) != 0)
                        abort();
                rc = data[0] % 4 == 0
                             ? relay_config_load_file(c, path, err, sizeof(err))
                             : relay_dbzconf_load(c, path, notes, sizeof(notes), err, sizeof(err));
                unlink(path);
                break;
        default:
                rc = from_lines(c, data + 1, size - 1, data[0] % 4 == 2, err, sizeof(err));
                break;
        }
        if (rc == 0) {
                relay_settings_t *s = NULL;
                if (relay_config_validate(c, err, sizeof(err)) == 0 &&
                    relay_settings_load(&s, c, err, sizeof(err)) == 0)
                        relay_settings_free(s);
                FILE *out = fopen("/dev/null", "w");
                if (out == NULL)
                        abort();
                relay_config_print(c, out);
                fclose(out);
        }
        relay_config_free(c);
        return 0;
}
