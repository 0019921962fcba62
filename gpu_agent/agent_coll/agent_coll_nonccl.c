/* SPDX-License-Identifier: Apache-2.0
 * agent_coll_nonccl.c — the sharded mode's CUDA collective in builds without NCCL (or
 * without CUDA): CUDA tensors are refused with a message saying why; host tensors use the
 * shared-memory collective as everywhere. */
#include <errno.h>

#include "agent_lane.h"

int agent_coll_nccl_create(const struct tally_agent_cfg *cfg, const char *launch_id,
			   const struct agent_coll_ops **ops, void **ctx, char *err, size_t errlen)
{
	(void)cfg, (void)launch_id, (void)ops, (void)ctx;
	agent_errf(err, errlen, "CUDA tensor in the sharded local mode, but this build of "
		   "libtally_agent has no NCCL (configure with nvcc on PATH and libnccl in the "
		   "CUDA library directory)");
	return -ENOTSUP;
}
