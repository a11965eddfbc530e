/*
 * manual.h - the relay's user documentation, generated from one source: the
 * option, exit status and signal tables of manual.c and the configuration
 * key table of config.c (from src/config_keys.dat). --help, the manual page outbox-relay(1) (printed by
 * --man; the build writes it with that) and the example configuration file
 * (--example-config) all come from them, so none can drift from the others
 * or from the code.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef RELAY_MANUAL_H
#define RELAY_MANUAL_H

#include <stdio.h>

/** @brief The --help text. */
void relay_manual_print_help(FILE *out);

/** @brief The manual page outbox-relay(1) in roff (man(7) macros). */
void relay_manual_print_man(FILE *out);

/**
 * @brief An example configuration file: every key with its description,
 *        accepted values and default, commented out. Uncommented, it loads
 *        with relay_config_load_file() and changes nothing but
 *        kafka.bootstrap.servers (required, so it has an example value).
 */
void relay_manual_print_example(FILE *out);

/** outbox-inbox(1) as roff, from outbox-inbox's key table. */
void relay_manual_print_inbox_man(FILE *out);

#endif
