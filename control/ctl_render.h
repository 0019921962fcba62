/* SPDX-License-Identifier: Apache-2.0
 * ctl_render.h — tallyctl's human-readable output (internal to control/).
 */
#ifndef CTL_RENDER_H
#define CTL_RENDER_H

#include <stdio.h>

#include <jansson.h>

/* A result as aligned key/value lines and tables, with units from the key names. */
void ctl_render(FILE *f, const json_t *result);
/* An array of objects as one aligned table, each line prefixed by indent. */
void ctl_render_table(FILE *f, const json_t *rows, const char *indent);

#endif
