/* SPDX-License-Identifier: Apache-2.0
 * tallyd_idle_conf.c — the idle settings: how a datapath lcore waits when its queue is empty.
 * A round of a small tensor crosses the appliance several times; a sleep that grows to
 * hundreds of µs (the old back-off) added milliseconds to each round, so the sleep is
 * capped at TALLYD_IDLE_MAX_US_CAP and the default waits on the port's RX interrupt.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tallyd_config.h"

static const char *const idle_names[] = { "interrupt", "sleep", "poll" };

const char *tallyd_idle_name(int mode)
{
	return mode >= 0 && mode <= TALLYD_IDLE_POLL ? idle_names[mode] : "?";
}

static int idle_err(char *err, size_t errlen, const char *n, const char *v, const char *why)
{
	int val = v && *v;

	snprintf(err, errlen, "'%s%s%s': %s", n, val ? " " : "", val ? v : "", why);
	return -EINVAL;
}

static int idle_uint(const char *n, const char *v, unsigned long hi, uint32_t *out,
		     char *err, size_t errlen)
{
	char *end, why[96];
	unsigned long u;

	errno = 0;
	u = v && *v >= '0' && *v <= '9' ? strtoul(v, &end, 10) : 0;
	if (!v || *v < '0' || *v > '9' || errno || *end || u < 1 || u > hi) {
		snprintf(why, sizeof(why), "must be a whole number in 1..%lu", hi);
		return idle_err(err, errlen, n, v, why);
	}
	*out = (uint32_t)u;
	return 0;
}

int tallyd_idle_set(struct tallyd_conf *c, const char *n, const char *v, char *err,
		    size_t errlen)
{
	if (!strcmp(n, "idle")) {
		for (int m = 0; m <= TALLYD_IDLE_POLL; m++)
			if (v && !strcmp(v, idle_names[m])) {
				c->idle_mode = m;
				return 0;
			}
		return idle_err(err, errlen, n, v, "say interrupt, sleep or poll");
	}
	/* the old switch: off spins (poll), on waits (interrupt unless sleep was chosen) */
	if (!strcmp(n, "idle-backoff")) {
		int on;

		if (!v || !strcmp(v, "on") || !strcmp(v, "yes") || !strcmp(v, "true") ||
		    !strcmp(v, "1"))
			on = 1;
		else if (!strcmp(v, "off") || !strcmp(v, "no") || !strcmp(v, "false") ||
			 !strcmp(v, "0"))
			on = 0;
		else
			return idle_err(err, errlen, n, v, "say on or off");
		if (!on)
			c->idle_mode = TALLYD_IDLE_POLL;
		else if (c->idle_mode == TALLYD_IDLE_POLL)
			c->idle_mode = TALLYD_IDLE_INTERRUPT;
		return 0;
	}
	if (!strcmp(n, "no-idle-backoff")) {
		if (v) {
			snprintf(err, errlen, "'%s' takes no value", n);
			return -EINVAL;
		}
		c->idle_mode = TALLYD_IDLE_POLL;
		return 0;
	}
	if (!strcmp(n, "idle-polls"))
		return idle_uint(n, v, 100000000, &c->idle_polls, err, errlen);
	if (!strcmp(n, "idle-max-us"))
		return idle_uint(n, v, TALLYD_IDLE_MAX_US_CAP, &c->idle_max_us, err, errlen);
	return 1;
}

void tallyd_idle_usage(FILE *f)
{
	fprintf(f,
		"  --idle MODE           how an lcore waits after idle-polls empty polls (interrupt):\n"
		"                        interrupt: block on the port's RX interrupt (epoll, 1 ms\n"
		"                        bound) where the device has them (net_tap, net_memif, most\n"
		"                        NICs), else sleep; sleep: sleeps of 1..idle-max-us µs;\n"
		"                        poll: spin with rte_pause (dedicated cores, line rate)\n"
		"  --idle-backoff on|off old switch: off = --idle poll, on = interrupt\n"
		"  --idle-polls N        empty polls before waiting (1000)\n"
		"  --idle-max-us N       longest idle sleep, 1..%d (20)\n", TALLYD_IDLE_MAX_US_CAP);
}
