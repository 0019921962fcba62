/* SPDX-License-Identifier: Apache-2.0
 * agent_lane.h — the sharded local mode (cfg.local_agg = TALLY_AGENT_LOCAL_SHARD): shard
 * geometry, lane job ids, the local collective interface (shared memory + sum_avx over host
 * buffers, or NCCL over CUDA buffers) the shard stage (agent_stage.h) drives. Not installed. */
#ifndef AGENT_LANE_H
#define AGENT_LANE_H

#include <stddef.h>
#include <stdint.h>

#include "agent_internal.h"
#include "tally_agent.h"

/* A tensor of `elems` elements split over `ls` local ranks: every shard holds
 * shard_elems = ceil(elems / ls) elements (the same on every lane, so every lane declares
 * the same keys); shard lr starts at element off_elems = lr * shard_elems and holds
 * valid_elems real elements (fewer in the last shards, possibly 0), the rest is padding. */
struct agent_shard {
	size_t elems, shard_elems, off_elems, valid_elems;
};
int agent_shard_of(size_t elems, unsigned ls, unsigned lr, struct agent_shard *s);

/* Lane lr of job `job` talks to the appliances as job `job | lr << 24` (lane 0 is the job
 * itself). -EINVAL when the job id uses the top byte or lr >= 256 (the ids could collide). */
#define AGENT_LANE_SHIFT 24
int agent_lane_job(uint32_t job, unsigned lr, uint32_t *out);

/* The local collective of one machine's local ranks. Every call is collective: every local
 * rank makes the same calls for the same (tensor, round) in the same order. */
struct agent_coll_ops {
	/* Make room for tensor `tensor` (ids in declaration order, the same everywhere). */
	int (*declare)(void *ctx, unsigned tensor, size_t bytes, int dtype, char *err,
		       size_t errlen);
	/* shard = sum over local ranks of this rank's shard of buf (padding zeroed); `shard` is
	 * host memory (pinned for CUDA). Blocks until it is there. buf may serve as scratch
	 * (NCCL reduce-scatters in place); all_gather rewrites all of it. */
	int (*reduce_scatter)(void *ctx, unsigned tensor, uint32_t round, const void *buf,
			      void *stream, void *shard, char *err, size_t errlen);
	/* buf = every rank's shard, gathered. failed: this rank has no valid shard (a failed
	 * push_pull); it still takes part, so the others fail fast and stay in step. buf NULL
	 * (only where gathered is offered): the result stays at gathered(). */
	int (*all_gather)(void *ctx, unsigned tensor, uint32_t round, const void *shard,
			  int failed, void *buf, void *stream, char *err, size_t errlen);
	/* Optional: where all_gather gathers the tensor, shared by the local ranks; it holds
	 * round r's result until every local rank has started round r + 1. */
	void *(*gathered)(void *ctx, unsigned tensor);
	void (*destroy)(void *ctx);
};

/* CPU: the shared segment "/tally-lanes-..." (agent_shm.c). */
int agent_coll_shm_create(const struct tally_agent_cfg *cfg, const char *launch_id, size_t bytes,
			  const struct agent_coll_ops **ops, void **ctx, char *err, size_t errlen);
/* CUDA: NCCL communicators over the local ranks, the unique ids published by local rank 0 in
 * /dev/shm; device = the calling thread's current CUDA device. -ENOTSUP (message) in builds
 * without NCCL. */
int agent_coll_nccl_create(const struct tally_agent_cfg *cfg, const char *launch_id,
			   const struct agent_coll_ops **ops, void **ctx, char *err, size_t errlen);

/* A sharded agent over a given lane network (tests; tally_agent_create builds the client
 * network itself): cfg as for tally_agent_create (local_agg shard, local_size > 1); `ops`/`ctx`
 * is this lane's network (rank = node, world = machines, job = the lane job), owned from here
 * on. The core (agent.c) over the shard stage (agent_stage_shard.c). */
struct tally_agent *agent_lane_create(const struct tally_agent_cfg *cfg,
				      const struct agent_net_ops *ops, void *ctx,
				      const char *launch_id, int *err, char *errbuf, size_t errlen);
/* The configuration of lane cfg->local_rank's network session. */
int agent_lane_cfg(const struct tally_agent_cfg *cfg, struct tally_agent_cfg *lane, char *err,
		   size_t errlen);

#endif
