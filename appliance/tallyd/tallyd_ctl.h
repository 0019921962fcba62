/* SPDX-License-Identifier: Apache-2.0
 * tallyd_ctl.h — tallyd's backend of the appliance control plane (appliance/ctl), called
 * from tallyd's main thread: start after the lcores are launched, poll from the main loop
 * (never blocks), stop before the lcores are stopped. Each returns 0 or a negative errno.
 */
#ifndef TALLYD_CTL_H
#define TALLYD_CTL_H

#include <stddef.h>

#include "tally_actl.h"

struct tallyd;

int tallyd_ctl_start(struct tallyd *d);
int tallyd_ctl_poll(struct tallyd *d);
int tallyd_ctl_stop(struct tallyd *d);

/* Replays a control config file ({"calls": [...]}, as `tallyctl config-save` writes it)
 * through the control methods; call after tallyd_ctl_start. 0, or a negative errno with
 * err saying which call failed and why. */
int tallyd_ctl_replay(struct tallyd *d, const char *path, char *err, size_t errlen);

/* Every counter of every lcore, summed (any thread): what `stats`, telemetry and the exit
 * log print. */
void tallyd_ctl_collect(struct tallyd *d, struct tally_actl_counters *total);

#endif
