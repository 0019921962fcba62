/* SPDX-License-Identifier: Apache-2.0
 * fake_backend.h — an in-memory appliance behind the control schema, for the control tests.
 */
#ifndef FAKE_BACKEND_H
#define FAKE_BACKEND_H

#include <stdint.h>

#include "tally_ctl.h"

#define FAKE_MAX_JOBS 4

struct fake_job {
	int used;
	uint32_t id, world;
	uint64_t token;
	uint32_t quorum, deadline_us;
	int deterministic;
};

struct fake {
	struct fake_job jobs[FAKE_MAX_JOBS];
	uint64_t rx_pkts, pushes;
	int draining, shutdown, shutdown_drain;
	char level[16];
	unsigned calls[TALLY_CTL_M_COUNT];
};

/* Fills b with handlers for every method over f (zeroed by the caller). */
void fake_backend_init(struct fake *f, struct tally_ctl_backend *b);

#endif
