/* SPDX-License-Identifier: Apache-2.0
 * agent_shard.c — the sharded local mode's arithmetic: which elements of a tensor each local
 * rank owns (equal shards, the last ones padded, so every lane declares the same keys), the
 * job id each lane talks as, and the configuration of a lane's network session. */
#include <errno.h>

#include "agent_lane.h"

int agent_shard_of(size_t elems, unsigned ls, unsigned lr, struct agent_shard *s)
{
	if (!ls || lr >= ls || !elems)
		return -EINVAL;
	s->elems = elems;
	s->shard_elems = (elems + ls - 1) / ls;
	s->off_elems = (size_t)lr * s->shard_elems;
	s->valid_elems = s->off_elems >= elems ? 0
			 : elems - s->off_elems < s->shard_elems ? elems - s->off_elems
								 : s->shard_elems;
	return 0;
}

int agent_lane_job(uint32_t job, unsigned lr, uint32_t *out)
{
	if (job >> AGENT_LANE_SHIFT || lr >= 1u << (32 - AGENT_LANE_SHIFT))
		return -EINVAL;
	*out = job | (uint32_t)lr << AGENT_LANE_SHIFT;
	return 0;
}

int agent_lane_cfg(const struct tally_agent_cfg *cfg, struct tally_agent_cfg *lane, char *err,
		   size_t errlen)
{
	unsigned nodes = (unsigned)(cfg->world_size / cfg->local_size);

	*lane = *cfg;
	if (agent_lane_job(cfg->job_id, (unsigned)cfg->local_rank, &lane->job_id)) {
		agent_errf(err, errlen, "sharded local mode: job id %u uses the top byte (lane lr "
			   "talks as job id | lr << %d): pick a TALLY_JOB_ID below %u", cfg->job_id,
			   AGENT_LANE_SHIFT, 1u << AGENT_LANE_SHIFT);
		return -EINVAL;
	}
	lane->rank = cfg->rank / cfg->local_size;
	lane->world_size = (int)nodes;
	lane->local_rank = 0;
	lane->local_size = 1;
	lane->local_agg = 0;
	lane->average = 0; /* the lane divides by the global world size itself */
	lane->gpu_hosts = cfg->gpu_hosts ? cfg->gpu_hosts : nodes;
	if (lane->quorum > nodes)
		lane->quorum = (uint16_t)nodes;
	return 0;
}
