/* SPDX-License-Identifier: Apache-2.0
 * engine_quota.c — per-job quotas: how many keys and how many bytes of the core's key arena
 * one job may hold, so one tenant (or one holder of a job's token) cannot take the memory
 * every other job needs. A job's own quotas (operator admission) override the engine's.
 * A leaf: reads job and config state only.
 */
#include <errno.h>

#include "engine_int.h"

enum tally_reason engine_quota_check(const struct tally_engine *e, const struct engine_job *job,
				     size_t bytes)
{
	uint32_t qk = job->q_keys ? job->q_keys : e->cfg.quota_keys;
	uint64_t qb = job->q_bytes ? job->q_bytes : e->cfg.quota_bytes;

	if (qk && job->nkeys >= qk)
		return TALLY_R_QUOTA_KEYS;
	if (qb && (uint64_t)job->mem + bytes > qb)
		return TALLY_R_QUOTA_BYTES;
	return TALLY_OK;
}

int tally_engine_job_quota(struct tally_engine *e, uint32_t job_id, uint32_t quota_keys,
			   uint64_t quota_bytes)
{
	struct engine_job *j = e ? engine_job_find(e, job_id) : NULL;

	if (!j)
		return -ENOENT;
	j->q_keys = quota_keys;
	j->q_bytes = quota_bytes;
	return 0;
}
