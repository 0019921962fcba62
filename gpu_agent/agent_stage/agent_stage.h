/* SPDX-License-Identifier: Apache-2.0
 * agent_stage.h — the stage below the agent core: what happens to a push_pull's bytes before
 * its partitions go to the network and after they came back. Chosen once at create:
 *   flat (agent_stage_flat.c): the caller's buffer, or pinned staging for a CUDA one (plain
 *     mode and the summing local mode, whose sharing happens in the network below);
 *   shard (agent_stage_shard.c): reduce-scatter over the local ranks before, average-free
 *     all-gather after (the sharded local mode).
 * The core owns every table (tensors, requests, handles, callbacks); a stage keeps only its
 * own resources: per-tensor state behind the pointer the core holds for it, and its queue of
 * collectives. Not installed. */
#ifndef AGENT_STAGE_H
#define AGENT_STAGE_H

#include <stddef.h>
#include <stdint.h>

#include "tally_agent.h"

/* What a stage sees of one request. */
struct agent_stage_req {
	unsigned slot;    /* the core's request slot: named again in done() */
	unsigned tensor;  /* tensor id (declaration order, the same on every rank) */
	const char *name; /* the tensor's name (lives as long as the agent) */
	size_t bytes;     /* the caller's bytes */
	int dtype, device;
	void *ptr;        /* the caller's buffer */
	void *stream;
	unsigned flags;   /* TALLY_AGENT_RESULT_VIEW: the stage may leave the result elsewhere */
	void **state;     /* the tensor's stage state: NULL until the stage sets it */
	uint8_t *buf;     /* set by stage_in: the host bytes the tensor's keys are cut from */
	int status;       /* set by stage_in: taken, but failed before the network */
	void *result;     /* set by stage_in: where the result will lie (NULL: ptr) */
};

/* A stage reports a request it finishes on its own thread (status 0 or negative errno; err:
 * the message, "" for none). Called without any lock of the stage held. */
typedef void (*agent_stage_done_fn)(void *arg, unsigned slot, int status, const char *err);

enum { AGENT_STAGE_LATER = 1 };

struct agent_stage_ops {
	/* Start reporting through done (threads); 0 or negative errno with a message. */
	int (*start)(void *ctx, agent_stage_done_fn done, void *arg, char *err, size_t errlen);
	/* The bytes a tensor's keys cover (its partitions are cut from these). */
	size_t (*key_bytes)(void *ctx, size_t bytes, int dtype);
	/* In the caller's thread, the tensor held busy, no lock: set r->buf. Negative errno:
	 * refused (message in err, the request is not taken). 0: taken; with r->status < 0 it
	 * failed already and nothing goes to the network. */
	int (*stage_in)(void *ctx, struct agent_stage_req *r, char *err, size_t errlen);
	/* Once per taken request, when its network part is over (*status: its result so far):
	 * 0, finished here (*status updated, message in err), or AGENT_STAGE_LATER: done()
	 * reports it. */
	int (*stage_out)(void *ctx, const struct agent_stage_req *r, int *status, char *err,
			 size_t errlen);
	/* Stop reporting (joins its threads): no done() call after it returns. */
	void (*stop)(void *ctx);
	void (*free_state)(void *ctx, void *state);
	void (*destroy)(void *ctx);
};

int agent_stage_flat_create(const struct agent_stage_ops **ops, void **ctx);
/* cfg resolved (local_agg shard, local_size > 1); attaches the machine's shared segment. */
int agent_stage_shard_create(const struct tally_agent_cfg *cfg, const char *launch_id,
			     const struct agent_stage_ops **ops, void **ctx, char *err,
			     size_t errlen);

#endif
