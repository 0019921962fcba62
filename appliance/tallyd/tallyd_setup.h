/* SPDX-License-Identifier: Apache-2.0
 * tallyd_setup.h — ports, lcores, pools, rings and engines after rte_eal_init.
 */
#ifndef TALLYD_SETUP_H
#define TALLYD_SETUP_H

#include <stddef.h>

struct tallyd;

/* 0, or a negative errno with a sentence in err (which port, core, how much memory). */
int tallyd_setup(struct tallyd *d, char *err, size_t errlen);
/* Stop and close the ports, free engines, rings and pools (lcores stopped first). */
void tallyd_teardown(struct tallyd *d);

#endif
