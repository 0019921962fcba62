/* SPDX-License-Identifier: Apache-2.0
 * actl_util.c — helpers shared by the handler files (a leaf: calls no other actl file).
 */
#include <string.h>
#include <time.h>

#include "actl_int.h"

uint64_t actl_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct actl_job *actl_job_find(struct tally_actl *a, uint32_t job_id, int create)
{
	struct actl_job *free_slot = NULL;

	for (int i = 0; i < ACTL_MAX_JOBS; i++) {
		if (a->jobs[i].used && a->jobs[i].job_id == job_id)
			return &a->jobs[i];
		if (!a->jobs[i].used && !free_slot)
			free_slot = &a->jobs[i];
	}
	if (!create || !free_slot)
		return NULL;
	memset(free_slot, 0, sizeof(*free_slot));
	free_slot->used = 1;
	free_slot->job_id = job_id;
	return free_slot;
}

unsigned actl_ncores(const struct tally_actl *a)
{
	return a->ops->ncores(a->ctx);
}

static int q_open(struct tally_engine *e, unsigned core, void *arg)
{
	uint64_t *out = arg;
	(void)core;

	out[0] = e ? tally_engine_open_rounds(e) : 0;
	out[1] = e ? tally_engine_open_chunks(e) : 0;
	return 0;
}

int actl_open_work(struct tally_actl *a, uint64_t *rounds, uint64_t *chunks)
{
	*rounds = *chunks = 0;
	for (unsigned i = 0; i < actl_ncores(a); i++) {
		uint64_t v[2] = { 0, 0 };
		int rc = a->ops->exec(a->ctx, i, q_open, v);
		if (rc)
			return rc;
		*rounds += v[0];
		*chunks += v[1];
	}
	return 0;
}
