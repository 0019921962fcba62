/* SPDX-License-Identifier: Apache-2.0
 * agent_stage_flat.c — the flat stage: host buffers go to the network in place; a CUDA
 * buffer is copied to the tensor's pinned staging on the caller's stream before, and back
 * after (a failed push_pull leaves the device buffer alone). */
#include <errno.h>
#include <stdlib.h>

#include "agent_internal.h"
#include "agent_stage.h"

static int flat_start(void *ctx, agent_stage_done_fn done, void *arg, char *err, size_t errlen)
{
	(void)ctx, (void)done, (void)arg, (void)err, (void)errlen;
	return 0; /* finishes everything in stage_out: never reports later */
}

static size_t flat_key_bytes(void *ctx, size_t bytes, int dtype)
{
	(void)ctx, (void)dtype;
	return bytes;
}

static int flat_in(void *ctx, struct agent_stage_req *r, char *err, size_t errlen)
{
	char e[256];
	int rc;

	(void)ctx;
	if (r->device != TALLY_AGENT_CUDA) {
		r->buf = r->ptr;
		return 0;
	}
	if (!*r->state && (rc = agent_dev_alloc_host(r->state, r->bytes, e, sizeof(e))))
		goto fail;
	if ((rc = agent_dev_to_host(*r->state, r->ptr, r->bytes, r->stream, e, sizeof(e))))
		goto fail;
	r->buf = *r->state;
	return 0;
fail:
	agent_errf(err, errlen, "push_pull: %s", e);
	return rc;
}

static int flat_out(void *ctx, const struct agent_stage_req *r, int *status, char *err,
		    size_t errlen)
{
	int rc;

	(void)ctx;
	if (r->device != TALLY_AGENT_CUDA || *status)
		return 0;
	if ((rc = agent_dev_to_device(r->ptr, r->buf, r->bytes, r->stream, err, errlen)))
		*status = rc;
	return 0;
}

static void flat_stop(void *ctx)
{
	(void)ctx;
}

static void flat_free_state(void *ctx, void *state)
{
	(void)ctx;
	if (state)
		agent_dev_free_host(state);
}

static void flat_destroy(void *ctx)
{
	(void)ctx;
}

static const struct agent_stage_ops flat_ops = {
	.start = flat_start,
	.key_bytes = flat_key_bytes,
	.stage_in = flat_in,
	.stage_out = flat_out,
	.stop = flat_stop,
	.free_state = flat_free_state,
	.destroy = flat_destroy,
};

int agent_stage_flat_create(const struct agent_stage_ops **ops, void **ctx)
{
	*ops = &flat_ops;
	*ctx = NULL; /* stateless: the per-tensor staging lives behind the core's pointers */
	return 0;
}
