/* SPDX-License-Identifier: Apache-2.0
 * agent_stage_shard.c — the sharded local mode's stage (cfg.local_agg =
 * TALLY_AGENT_LOCAL_SHARD), BytePS's intra-machine pipeline: local rank lr of a machine owns
 * shard lr of every tensor.
 *
 *   stage_in:   reduce-scatter over the local ranks (agent_coll_shm.c for host buffers,
 *               agent_coll_nccl.c for CUDA ones) → this rank's summed shard in host memory,
 *               whose keys the core pushes on this rank's lane: its own network session as
 *               rank = machine, world = machines, job = job | lr << 24, so every local rank
 *               (every GPU) drives its own share of the machine's traffic.
 *   stage_out:  when the shard is back (averaged by the core, by the GLOBAL world size),
 *               the finisher thread all-gathers it over the local ranks into the caller's
 *               buffer (or, TALLY_AGENT_RESULT_VIEW on host memory, leaves it in the shared
 *               gather area) and reports the request done.
 *
 * Collectives must run in the same order on every local rank (NCCL requires it):
 * reduce-scatters run in push_pull order (push_pull from one thread, the same sequence on
 * every local rank — as DDP does), all-gathers in the finisher in that same order (the
 * queue below), whatever order the lane completes in. A failed request still takes part in
 * its all-gather, marked failed, so the collective stays in step and the other local ranks
 * fail fast with a message.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "agent_lane.h"
#include "agent_stage.h"
#include "tally_sum.h"

/* A tensor's resources here (behind the core's per-tensor stage pointer). */
struct shard_tensor {
	void *shard;        /* host shard (pinned once a CUDA request used it) */
	size_t shard_bytes;
	uint32_t rounds;    /* reduce-scatters run: the collectives' round */
	int pinned, on_cpu, on_gpu; /* room made in the collectives */
};

/* One all-gather to run, in push_pull order. */
struct shard_job {
	unsigned slot, tensor;
	uint32_t round;
	int device, net_done, status;
	const char *name;
	void *ptr, *stream;
	struct shard_tensor *t;
};

struct shard_stage {
	struct tally_agent_cfg cfg; /* the global ranks */
	char *launch_id;
	const struct agent_coll_ops *cpu, *gpu;
	void *cpu_ctx, *gpu_ctx;
	pthread_mutex_t setup;      /* the lazy NCCL setup and room in the collectives */
	pthread_mutex_t mu;         /* the queue */
	pthread_cond_t work;
	pthread_t thr;
	int thr_started, stop;
	agent_stage_done_fn done;
	void *done_arg;
	struct shard_job *q;        /* ring of max_handles jobs */
	unsigned head, count;
};

static size_t shard_key_bytes(void *ctx, size_t bytes, int dtype)
{
	struct shard_stage *s = ctx;
	size_t esz = tally_dtype_size(dtype);
	struct agent_shard sh;

	/* every local rank declares the same shard size: the lanes' keys agree */
	if (agent_shard_of(bytes / esz, (unsigned)s->cfg.local_size, (unsigned)s->cfg.local_rank,
			   &sh))
		return 0;
	return sh.shard_elems * esz;
}

/* ---- the finisher: all-gathers in push_pull order ---- */

static void *shard_finisher(void *arg)
{
	struct shard_stage *s = arg;

	pthread_mutex_lock(&s->mu);
	for (;;) {
		while (!s->stop && (!s->count || !s->q[s->head].net_done))
			pthread_cond_wait(&s->work, &s->mu);
		if (s->stop)
			break;
		/* taken off the ring first: the done report may let the caller push again */
		struct shard_job j = s->q[s->head];
		const struct agent_coll_ops *coll = j.device == TALLY_AGENT_CUDA ? s->gpu : s->cpu;
		void *cctx = j.device == TALLY_AGENT_CUDA ? s->gpu_ctx : s->cpu_ctx;
		char e[256] = "", msg[512] = "";
		int rc;

		s->head = (s->head + 1) % s->cfg.max_handles;
		s->count--;
		pthread_mutex_unlock(&s->mu);
		rc = coll->all_gather(cctx, j.tensor, j.round, j.t->shard, j.status != 0, j.ptr,
				      j.stream, e, sizeof(e));
		if (rc)
			agent_errf(msg, sizeof(msg), "tensor '%s' round %u: all-gather over the local "
				   "ranks: %s", j.name, j.round, e);
		s->done(s->done_arg, j.slot, rc, msg);
		pthread_mutex_lock(&s->mu);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

static int shard_start(void *ctx, agent_stage_done_fn done, void *arg, char *err,
		       size_t errlen)
{
	struct shard_stage *s = ctx;
	int rc;

	s->done = done;
	s->done_arg = arg;
	if ((rc = -pthread_create(&s->thr, NULL, shard_finisher, s))) {
		agent_errf(err, errlen, "cannot start the lane's finisher thread");
		return rc;
	}
	s->thr_started = 1;
	return 0;
}

static void shard_stop(void *ctx)
{
	struct shard_stage *s = ctx;

	if (!s->thr_started)
		return;
	pthread_mutex_lock(&s->mu);
	s->stop = 1;
	pthread_cond_broadcast(&s->work);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->thr, NULL);
	s->thr_started = 0;
}

/* ---- before and after the network ---- */

/* A host shard for a request of `device` (pinned for CUDA), replacing an unpinned one. */
static int shard_buffer(struct shard_tensor *t, int device, char *e, size_t elen)
{
	void *buf = NULL;
	int rc = 0;

	if (t->shard && (device != TALLY_AGENT_CUDA || t->pinned))
		return 0;
	if (device == TALLY_AGENT_CUDA)
		rc = agent_dev_alloc_host(&buf, t->shard_bytes, e, elen);
	else if (!(buf = aligned_alloc(64, (t->shard_bytes + 63) & ~(size_t)63)))
		rc = -ENOMEM;
	if (rc)
		return rc;
	if (t->pinned)
		agent_dev_free_host(t->shard);
	else
		free(t->shard);
	t->shard = buf;
	t->pinned = device == TALLY_AGENT_CUDA;
	return 0;
}

/* The collective, its room for the tensor and the host shard a request of `device` needs.
 * Set up at the tensor's first push_pull on that device, which every local rank makes in
 * the same order, so shared offsets and NCCL's setup agree (and a CUDA-only job takes no
 * room in the shared segment). */
static int shard_prepare(struct shard_stage *s, struct shard_tensor *t,
			 const struct agent_stage_req *r, char *e, size_t elen)
{
	int rc = 0;

	pthread_mutex_lock(&s->setup);
	if (r->device == TALLY_AGENT_CUDA && !s->gpu)
		rc = agent_coll_nccl_create(&s->cfg, s->launch_id, &s->gpu, &s->gpu_ctx, e, elen);
	if (!rc && r->device == TALLY_AGENT_CUDA && !t->on_gpu &&
	    !(rc = s->gpu->declare(s->gpu_ctx, r->tensor, r->bytes, r->dtype, e, elen)))
		t->on_gpu = 1;
	if (!rc && r->device == TALLY_AGENT_CPU && !t->on_cpu &&
	    !(rc = s->cpu->declare(s->cpu_ctx, r->tensor, r->bytes, r->dtype, e, elen)))
		t->on_cpu = 1;
	if (!rc)
		rc = shard_buffer(t, r->device, e, elen);
	pthread_mutex_unlock(&s->setup);
	return rc;
}

static int shard_in(void *ctx, struct agent_stage_req *r, char *err, size_t errlen)
{
	struct shard_stage *s = ctx;
	struct shard_tensor *t = *r->state;
	char e[256] = "";
	int rc;

	if (!t) {
		if (!(t = calloc(1, sizeof(*t)))) {
			agent_errf(err, errlen, "push_pull '%s': out of memory", r->name);
			return -ENOMEM;
		}
		t->shard_bytes = shard_key_bytes(s, r->bytes, r->dtype);
		*r->state = t;
	}
	if ((rc = shard_prepare(s, t, r, e, sizeof(e)))) {
		agent_errf(err, errlen, "push_pull '%s': %s", r->name, e[0] ? e : "out of memory");
		return rc;
	}
	/* From here on the request goes to the finisher, failed or not: the all-gather keeps
	 * the local ranks in step. */
	struct shard_job j = {r->slot, r->tensor, t->rounds, r->device, 0, 0, r->name, r->ptr,
			      r->stream, t};
	const struct agent_coll_ops *coll = r->device == TALLY_AGENT_CUDA ? s->gpu : s->cpu;

	if ((r->flags & TALLY_AGENT_RESULT_VIEW) && coll->gathered) {
		/* the result stays in the shared gather area: no copy out */
		r->result = coll->gathered(r->device == TALLY_AGENT_CUDA ? s->gpu_ctx : s->cpu_ctx,
					   r->tensor);
		j.ptr = NULL;
	}

	rc = coll->reduce_scatter(r->device == TALLY_AGENT_CUDA ? s->gpu_ctx : s->cpu_ctx,
				  r->tensor, j.round, r->ptr, r->stream, t->shard, e, sizeof(e));
	if (rc) {
		r->status = rc;
		agent_errf(err, errlen, "tensor '%s' round %u: %s", r->name, j.round, e);
	}
	t->rounds++;
	r->buf = t->shard;
	pthread_mutex_lock(&s->mu);
	s->q[(s->head + s->count++) % s->cfg.max_handles] = j;
	pthread_mutex_unlock(&s->mu);
	return 0;
}

static int shard_out(void *ctx, const struct agent_stage_req *r, int *status, char *err,
		     size_t errlen)
{
	struct shard_stage *s = ctx;

	(void)err, (void)errlen;
	pthread_mutex_lock(&s->mu);
	for (unsigned i = 0; i < s->count; i++) {
		struct shard_job *j = &s->q[(s->head + i) % s->cfg.max_handles];

		if (j->slot == r->slot && !j->net_done) {
			j->net_done = 1;
			j->status = *status;
			break;
		}
	}
	pthread_cond_broadcast(&s->work);
	pthread_mutex_unlock(&s->mu);
	return AGENT_STAGE_LATER;
}

/* ---- create / destroy ---- */

static void shard_free_state(void *ctx, void *state)
{
	struct shard_tensor *t = state;

	(void)ctx;
	if (!t)
		return;
	if (t->pinned)
		agent_dev_free_host(t->shard);
	else
		free(t->shard);
	free(t);
}

static void shard_destroy(void *ctx)
{
	struct shard_stage *s = ctx;

	if (!s)
		return;
	shard_stop(s);
	if (s->cpu)
		s->cpu->destroy(s->cpu_ctx);
	if (s->gpu)
		s->gpu->destroy(s->gpu_ctx);
	free(s->q);
	free(s->launch_id);
	pthread_cond_destroy(&s->work);
	pthread_mutex_destroy(&s->mu);
	pthread_mutex_destroy(&s->setup);
	free(s);
}

static const struct agent_stage_ops shard_ops = {
	.start = shard_start,
	.key_bytes = shard_key_bytes,
	.stage_in = shard_in,
	.stage_out = shard_out,
	.stop = shard_stop,
	.free_state = shard_free_state,
	.destroy = shard_destroy,
};

int agent_stage_shard_create(const struct tally_agent_cfg *cfg, const char *launch_id,
			     const struct agent_stage_ops **ops, void **ctx, char *err,
			     size_t errlen)
{
	struct shard_stage *s = calloc(1, sizeof(*s));
	int rc = -ENOMEM;

	if (!s) {
		agent_errf(err, errlen, "out of memory");
		return rc;
	}
	s->cfg = *cfg;
	pthread_mutex_init(&s->setup, NULL);
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->work, NULL);
	s->launch_id = strdup(launch_id ? launch_id : "0");
	s->q = calloc(cfg->max_handles, sizeof(*s->q));
	if (!s->launch_id || !s->q) {
		agent_errf(err, errlen, "out of memory");
		goto fail;
	}
	if (cfg->local_rank == 0) {
		/* a crashed launch's NCCL ids (agent_coll_nccl.c): gone before the others can
		 * attach the segment below, so none of them reads stale ids later */
		char name[160];

		agent_shm_name(name, sizeof(name), "nccl", cfg, launch_id);
		shm_unlink(name);
	}
	if ((rc = agent_coll_shm_create(cfg, launch_id, cfg->local_shm_bytes, &s->cpu,
					&s->cpu_ctx, err, errlen)))
		goto fail;
	*ops = &shard_ops;
	*ctx = s;
	return 0;
fail:
	shard_destroy(s);
	return rc;
}
