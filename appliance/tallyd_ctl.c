/* SPDX-License-Identifier: Apache-2.0
 * tallyd_ctl.c — placeholder control plane (the control-socket server replaces it).
 */
#include "tallyd.h"
#include "tallyd_ctl.h"

int tallyd_ctl_start(struct tallyd *d)
{
	(void)d;
	return 0;
}

int tallyd_ctl_poll(struct tallyd *d)
{
	(void)d;
	return 0;
}

int tallyd_ctl_stop(struct tallyd *d)
{
	(void)d;
	return 0;
}
