/* SPDX-License-Identifier: Apache-2.0
 * aopt_int.h — inside appliance/opt: what the parser and the writers share.
 */
#ifndef AOPT_INT_H
#define AOPT_INT_H

#include "tally_aopt.h"

/* The appliance's field for option id, or NULL (aopt_table.c). */
const struct tally_aopt_field *aopt_field(const struct tally_aopt_app *a, enum tally_aopt_id id);

/* aopt_help.c: 512M, 2G, 4096 (the largest unit that divides v); a field's value as the
 * config file spells it (0, or -1 for a type without a plain value, or a number below its
 * range: not set, the appliance picks). */
void aopt_size_text(unsigned long long v, char *buf, size_t len);
int aopt_value_text(const struct tally_aopt *o, const struct tally_aopt_field *f,
		    const void *conf, char *buf, size_t len);

#endif
