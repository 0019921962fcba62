/* SPDX-License-Identifier: Apache-2.0
 * agent_lane.c — the sharded local mode (cfg.local_agg = TALLY_AGENT_LOCAL_SHARD), BytePS's
 * intra-machine pipeline: local rank lr of a machine owns shard lr of every tensor.
 *
 *   push_pull:  reduce-scatter over the local ranks (agent_coll_shm.c for host buffers,
 *               agent_coll_nccl.c for CUDA ones) → this rank's summed shard in host memory
 *               → the inner agent push_pulls it on this rank's lane: its own network session
 *               as rank = machine, world = machines, job = job | lr << 24, so every local
 *               rank (every GPU) drives its own share of the machine's traffic.
 *   finisher:   when the lane's shard is back: average by the GLOBAL world size, all-gather
 *               over the local ranks into the caller's buffer, complete the handle.
 *
 * The inner agent is an unchanged tally_agent (scheduling, credits, ordering), declared with
 * the shard sizes, so the lanes of a machine declare the same keys. Collectives must run in
 * the same order on every local rank (NCCL requires it): reduce-scatters run in push_pull
 * order (push_pull from one thread, the same sequence on every local rank — as DDP does),
 * all-gathers in one finisher thread in that same order, whatever order the lanes complete
 * in. A failed request still takes part in its all-gather, marked failed, so the collective
 * stays in step and the other local ranks fail fast with a message.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "agent_core.h"
#include "agent_lane.h"
#include "tally_sum.h"

struct lane_tensor {
	char name[TALLY_AGENT_NAME_MAX];
	size_t bytes, shard_bytes;
	int dtype, inner, average, busy;
	uint32_t rounds;   /* push_pulls submitted */
	void *shard;       /* host shard (pinned once a CUDA tensor used it) */
	int pinned, on_cpu, on_gpu; /* room made in the collectives */
};

struct lane_req {
	int state;
	uint32_t gen, round;
	int tensor, device, inner_done, status;
	void *ptr, *stream;
	tally_agent_cb cb;
	void *cb_arg;
	struct agent_lane *lane;
};

struct agent_lane {
	struct tally_agent_cfg cfg; /* the global ranks */
	struct tally_agent *in;     /* this lane's agent */
	char *launch_id;
	const struct agent_coll_ops *cpu, *gpu;
	void *cpu_ctx, *gpu_ctx;

	pthread_mutex_t decl;       /* declarations and the lazy NCCL setup (API threads) */
	pthread_mutex_t mu;         /* tables; never held across a call into the inner agent */
	pthread_cond_t work, done;
	pthread_t thr;
	int thr_started, stop;

	struct lane_tensor *t;
	unsigned nt;
	struct lane_req *reqs;
	unsigned *fifo;             /* submitted request slots, in push_pull order */
	unsigned head, count;
	uint64_t push_pulls, failed;
	char err[512];
};

/* ---- requests ---- */

static int lane_handle(const struct agent_lane *l, unsigned slot)
{
	return (int)(l->reqs[slot].gen * l->cfg.max_handles + slot);
}

static struct lane_req *lane_req_of(struct agent_lane *l, int handle)
{
	unsigned slot;

	if (handle < 0)
		return NULL;
	slot = (unsigned)handle % l->cfg.max_handles;
	if (l->reqs[slot].state == REQ_FREE || lane_handle(l, slot) != handle || l->reqs[slot].cb)
		return NULL;
	return &l->reqs[slot];
}

static void lane_inner_done(void *arg, int handle, int status)
{
	struct lane_req *r = arg;
	struct agent_lane *l = r->lane;

	(void)handle;
	pthread_mutex_lock(&l->mu);
	if (status < 0) {
		r->status = status;
		agent_errf(l->err, sizeof(l->err), "tensor '%s' (lane %d): %s",
			   l->t[r->tensor].name, l->cfg.local_rank, tally_agent_strerror(l->in));
	}
	r->inner_done = 1;
	pthread_cond_broadcast(&l->work);
	pthread_mutex_unlock(&l->mu);
}

/* Publish a finished request (lock held); a callback runs unlocked. */
static void lane_complete_locked(struct agent_lane *l, unsigned slot)
{
	struct lane_req *r = &l->reqs[slot];

	l->t[r->tensor].busy = 0;
	if (r->status)
		l->failed++;
	else
		l->push_pulls++;
	if (!r->cb) {
		r->state = REQ_DONE;
		pthread_cond_broadcast(&l->done);
		return;
	}
	tally_agent_cb cb = r->cb;
	void *arg = r->cb_arg;
	int h = lane_handle(l, slot), st = r->status;

	r->state = REQ_FREE;
	pthread_mutex_unlock(&l->mu);
	cb(arg, h, st);
	pthread_mutex_lock(&l->mu);
}

/* All-gathers in push_pull order, whatever order the lane completes in. */
static void *lane_finisher(void *arg)
{
	struct agent_lane *l = arg;

	pthread_mutex_lock(&l->mu);
	for (;;) {
		while (!l->stop && (!l->count || !l->reqs[l->fifo[l->head]].inner_done))
			pthread_cond_wait(&l->work, &l->mu);
		if (l->stop)
			break;
		unsigned slot = l->fifo[l->head];
		struct lane_req *r = &l->reqs[slot];
		struct lane_tensor *t = &l->t[r->tensor];
		int failed = r->status != 0, avg = t->average, rc;
		char e[256] = "";

		pthread_mutex_unlock(&l->mu);
		if (!failed && avg)
			agent_average(t->shard, t->shard_bytes, t->dtype, l->cfg.world_size);
		if (r->device == TALLY_AGENT_CUDA)
			rc = l->gpu->all_gather(l->gpu_ctx, (unsigned)r->tensor, r->round, t->shard,
						failed, r->ptr, r->stream, e, sizeof(e));
		else
			rc = l->cpu->all_gather(l->cpu_ctx, (unsigned)r->tensor, r->round, t->shard,
						failed, r->ptr, r->stream, e, sizeof(e));
		pthread_mutex_lock(&l->mu);
		if (rc && !r->status) {
			r->status = rc;
			agent_errf(l->err, sizeof(l->err), "tensor '%s' round %u: all-gather over the "
				   "local ranks: %s", t->name, r->round, e);
		}
		l->head = (l->head + 1) % l->cfg.max_handles;
		l->count--;
		lane_complete_locked(l, slot);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

/* ---- create / destroy ---- */

void agent_lane_destroy(struct agent_lane *l)
{
	if (!l)
		return;
	if (l->thr_started) {
		pthread_mutex_lock(&l->mu);
		l->stop = 1;
		pthread_cond_broadcast(&l->work);
		pthread_mutex_unlock(&l->mu);
		pthread_join(l->thr, NULL);
	}
	tally_agent_destroy(l->in); /* its pending callbacks land in our table */
	pthread_mutex_lock(&l->mu);
	for (unsigned s = 0; l->reqs && s < l->cfg.max_handles; s++)
		if (l->reqs[s].state == REQ_PENDING) {
			if (!l->reqs[s].status)
				l->reqs[s].status = -ECANCELED;
			lane_complete_locked(l, s);
		}
	pthread_mutex_unlock(&l->mu);
	for (unsigned i = 0; l->t && i < l->nt; i++) {
		if (l->t[i].pinned)
			agent_dev_free_host(l->t[i].shard);
		else
			free(l->t[i].shard);
	}
	if (l->cpu)
		l->cpu->destroy(l->cpu_ctx);
	if (l->gpu)
		l->gpu->destroy(l->gpu_ctx);
	free(l->t);
	free(l->reqs);
	free(l->fifo);
	free(l->launch_id);
	pthread_cond_destroy(&l->work);
	pthread_cond_destroy(&l->done);
	pthread_mutex_destroy(&l->mu);
	pthread_mutex_destroy(&l->decl);
	free(l);
}

struct tally_agent *agent_lane_create(const struct tally_agent_cfg *cfg,
				      const struct agent_net_ops *ops, void *ctx,
				      const char *launch_id, int *err, char *errbuf, size_t errlen)
{
	struct agent_lane *l = calloc(1, sizeof(*l));
	struct tally_agent *a = calloc(1, sizeof(*a));
	struct tally_agent_cfg lc;
	int rc = -ENOMEM;

	if (!l || !a) {
		agent_errf(errbuf, errlen, "out of memory");
		ops->destroy(ctx);
		goto fail;
	}
	l->cfg = *cfg;
	pthread_mutex_init(&l->decl, NULL);
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->work, NULL);
	pthread_cond_init(&l->done, NULL);
	if ((rc = agent_cfg_resolve(&l->cfg, errbuf, errlen))) {
		ops->destroy(ctx);
		goto fail;
	}
	cfg = &l->cfg;
	l->launch_id = strdup(launch_id ? launch_id : "0");
	l->t = calloc(cfg->max_tensors, sizeof(*l->t));
	l->reqs = calloc(cfg->max_handles, sizeof(*l->reqs));
	l->fifo = calloc(cfg->max_handles, sizeof(*l->fifo));
	if (!l->launch_id || !l->t || !l->reqs || !l->fifo) {
		agent_errf(errbuf, errlen, "out of memory");
		ops->destroy(ctx);
		goto fail;
	}
	if ((rc = agent_lane_cfg(cfg, &lc, errbuf, errlen))) {
		ops->destroy(ctx);
		goto fail;
	}
	if (cfg->local_rank == 0) {
		/* a crashed launch's NCCL ids (agent_coll_nccl.c): gone before the others can
		 * attach the segment below, so none of them reads stale ids later */
		char name[160];

		agent_shm_name(name, sizeof(name), "nccl", cfg, launch_id);
		shm_unlink(name);
	}
	if ((rc = agent_coll_shm_create(cfg, launch_id, cfg->local_shm_bytes, &l->cpu,
					&l->cpu_ctx, errbuf, errlen))) {
		ops->destroy(ctx);
		goto fail;
	}
	if (!(l->in = agent_create_net(&lc, ops, ctx, &rc, errbuf, errlen)))
		goto fail;
	if ((rc = -pthread_create(&l->thr, NULL, lane_finisher, l))) {
		agent_errf(errbuf, errlen, "cannot start the lane's finisher thread");
		goto fail;
	}
	l->thr_started = 1;
	a->cfg = *cfg;
	a->lane = l;
	return a;
fail:
	agent_lane_destroy(l);
	free(a);
	if (err)
		*err = rc;
	return NULL;
}

/* ---- tensors ---- */

int agent_lane_lookup(struct agent_lane *l, const char *name)
{
	int id = -ENOENT;

	pthread_mutex_lock(&l->mu);
	for (unsigned i = 0; i < l->nt; i++)
		if (strcmp(l->t[i].name, name) == 0)
			id = (int)i;
	pthread_mutex_unlock(&l->mu);
	return id;
}

int agent_lane_declare(struct agent_lane *l, const char *name, size_t bytes, int dtype,
		       int priority)
{
	size_t esz = dtype >= 0 && dtype < TALLY_DT_COUNT ? tally_dtype_size(dtype) : 0;
	struct lane_tensor t = {.dtype = dtype, .bytes = bytes, .average = l->cfg.average};
	struct agent_shard sh;
	int rc, id;

	if (!name || !*name || strlen(name) >= TALLY_AGENT_NAME_MAX) {
		agent_errf(l->err, sizeof(l->err), "declare: tensor name empty or longer than 127 bytes");
		return -EINVAL;
	}
	if (!esz || bytes == 0 || bytes % esz) {
		agent_errf(l->err, sizeof(l->err), "declare '%s': %zu bytes is not a whole number of "
			   "elements of dtype %d", name, bytes, dtype);
		return -EINVAL;
	}
	pthread_mutex_lock(&l->decl);
	if ((id = agent_lane_lookup(l, name)) >= 0) {
		const struct lane_tensor *o = &l->t[id];

		if (o->bytes != bytes || o->dtype != dtype) {
			agent_errf(l->err, sizeof(l->err), "tensor '%s' changed shape: declared %zu "
				   "bytes %s, now %zu bytes %s", name, o->bytes,
				   tally_dtype_name(o->dtype), bytes, tally_dtype_name(dtype));
			id = -EINVAL;
		}
		goto out;
	}
	id = (int)l->nt;
	if (l->nt == l->cfg.max_tensors) {
		agent_errf(l->err, sizeof(l->err), "declare '%s': more than %u tensors", name,
			   l->cfg.max_tensors);
		id = -ENOSPC;
		goto out;
	}
	agent_shard_of(bytes / esz, (unsigned)l->cfg.local_size, (unsigned)l->cfg.local_rank, &sh);
	t.shard_bytes = sh.shard_elems * esz;
	strcpy(t.name, name);
	/* the lane's keys: every local rank declares the same shard size */
	rc = tally_agent_declare(l->in, name, t.shard_bytes, dtype, priority);
	t.inner = rc >= 0 ? rc : tally_agent_lookup(l->in, name);
	if (rc < 0) {
		agent_errf(l->err, sizeof(l->err), "%s", tally_agent_strerror(l->in));
		t.busy = -1; /* declared (ids stay aligned with the collectives'), unusable */
	}
	pthread_mutex_lock(&l->mu);
	l->t[l->nt++] = t;
	pthread_mutex_unlock(&l->mu);
	if (rc < 0)
		id = rc;
out:
	pthread_mutex_unlock(&l->decl);
	return id;
}

int agent_lane_set_average(struct agent_lane *l, int tensor, int average)
{
	int rc = -ENOENT;

	pthread_mutex_lock(&l->mu);
	if (tensor >= 0 && (unsigned)tensor < l->nt) {
		l->t[tensor].average = average != 0;
		rc = 0;
	}
	pthread_mutex_unlock(&l->mu);
	return rc;
}

static int inner_of(struct agent_lane *l, int tensor)
{
	int id = -ENOENT;

	pthread_mutex_lock(&l->mu);
	if (tensor >= 0 && (unsigned)tensor < l->nt && l->t[tensor].inner >= 0)
		id = l->t[tensor].inner;
	pthread_mutex_unlock(&l->mu);
	return id;
}

int agent_lane_set_ordered(struct agent_lane *l, int tensor, int ordered)
{
	int id = inner_of(l, tensor);

	return id < 0 ? id : tally_agent_set_ordered(l->in, id, ordered);
}

/* The lane's start order (the lanes of every machine submit alike: push_pull order). */
int agent_lane_set_order(struct agent_lane *l, int mode)
{
	return tally_agent_set_order(l->in, mode);
}

int agent_lane_partitions(struct agent_lane *l, int tensor, struct tally_agent_part *out,
			  unsigned max)
{
	int id = inner_of(l, tensor);

	return id < 0 ? id : tally_agent_partitions(l->in, id, out, max);
}

/* ---- push_pull ---- */

/* The collective, its room for the tensor and the host shard a request of `device` needs.
 * Set up at the tensor's first push_pull on that device, which every local rank makes in
 * the same order, so shared offsets and NCCL's setup agree (and a CUDA-only job takes no
 * room in the shared segment). */
static int lane_prepare(struct agent_lane *l, struct lane_tensor *t, int device)
{
	unsigned id = (unsigned)(t - l->t);
	char e[256] = "";
	int rc = 0;

	pthread_mutex_lock(&l->decl);
	if (device == TALLY_AGENT_CUDA && !l->gpu)
		rc = agent_coll_nccl_create(&l->cfg, l->launch_id, &l->gpu, &l->gpu_ctx, e, sizeof(e));
	if (!rc && device == TALLY_AGENT_CUDA && !t->on_gpu &&
	    !(rc = l->gpu->declare(l->gpu_ctx, id, t->bytes, t->dtype, e, sizeof(e))))
		t->on_gpu = 1;
	if (!rc && device == TALLY_AGENT_CPU && !t->on_cpu &&
	    !(rc = l->cpu->declare(l->cpu_ctx, id, t->bytes, t->dtype, e, sizeof(e))))
		t->on_cpu = 1;
	if (!rc && (!t->shard || (device == TALLY_AGENT_CUDA && !t->pinned))) {
		void *buf = NULL;

		if (device == TALLY_AGENT_CUDA)
			rc = agent_dev_alloc_host(&buf, t->shard_bytes, e, sizeof(e));
		else if (!(buf = aligned_alloc(64, (t->shard_bytes + 63) & ~(size_t)63)))
			rc = -ENOMEM;
		if (!rc) {
			if (t->pinned)
				agent_dev_free_host(t->shard);
			else
				free(t->shard);
			t->shard = buf;
			t->pinned = device == TALLY_AGENT_CUDA;
		}
	}
	pthread_mutex_unlock(&l->decl);
	if (rc)
		agent_errf(l->err, sizeof(l->err), "push_pull '%s': %s", t->name,
			   e[0] ? e : "out of memory");
	return rc;
}

int agent_lane_push_pull(struct agent_lane *l, int tensor, void *ptr, size_t bytes, int device,
			 void *stream, tally_agent_cb cb, void *cb_arg)
{
	struct lane_tensor *t;
	struct lane_req *r;
	unsigned slot;
	char e[256] = "";
	int rc;

	if (!ptr || (device != TALLY_AGENT_CPU && device != TALLY_AGENT_CUDA))
		return -EINVAL;
	pthread_mutex_lock(&l->mu);
	t = tensor >= 0 && (unsigned)tensor < l->nt ? &l->t[tensor] : NULL;
	for (slot = 0; slot < l->cfg.max_handles; slot++)
		if (l->reqs[slot].state == REQ_FREE)
			break;
	if ((rc = agent_push_check(l->err, sizeof(l->err), tensor, t ? t->name : NULL,
				   t ? t->bytes : 0, t ? t->busy : 0, bytes,
				   slot < l->cfg.max_handles, l->cfg.max_handles)))
		goto out;
	t->busy = 1;
	r = &l->reqs[slot];
	r->gen = (r->gen + 1) % (uint32_t)(0x7fffffff / l->cfg.max_handles);
	if (r->gen == 0)
		r->gen = 1;
	*r = (struct lane_req){REQ_PENDING, r->gen, t->rounds, tensor, device, 0, 0, ptr, stream,
			       cb, cb_arg, l};
	pthread_mutex_unlock(&l->mu);
	if ((rc = lane_prepare(l, t, device))) {
		pthread_mutex_lock(&l->mu);
		t->busy = 0;
		r->state = REQ_FREE;
		goto out;
	}

	/* From here on the request goes to the finisher, failed or not: the all-gather keeps
	 * the local ranks in step. */
	if (device == TALLY_AGENT_CUDA)
		rc = l->gpu->reduce_scatter(l->gpu_ctx, (unsigned)tensor, r->round, ptr, stream,
					    t->shard, e, sizeof(e));
	else
		rc = l->cpu->reduce_scatter(l->cpu_ctx, (unsigned)tensor, r->round, ptr, stream,
					    t->shard, e, sizeof(e));
	if (!rc)
		rc = tally_agent_push_pull(l->in, t->inner, t->shard, t->shard_bytes,
					   TALLY_AGENT_CPU, NULL, lane_inner_done, r);
	pthread_mutex_lock(&l->mu);
	if (rc < 0) {
		r->status = rc;
		r->inner_done = 1;
		agent_errf(l->err, sizeof(l->err), "tensor '%s' round %u: %s", t->name, r->round,
			   e[0] ? e : tally_agent_strerror(l->in));
	}
	t->rounds++;
	l->fifo[(l->head + l->count++) % l->cfg.max_handles] = slot;
	pthread_cond_broadcast(&l->work);
	rc = lane_handle(l, slot);
out:
	pthread_mutex_unlock(&l->mu);
	return rc;
}

int agent_lane_test(struct agent_lane *l, int handle)
{
	struct lane_req *r;
	int rc;

	pthread_mutex_lock(&l->mu);
	r = lane_req_of(l, handle);
	if (!r) {
		rc = -ENOENT;
	} else if (r->state == REQ_PENDING) {
		rc = 0;
	} else {
		rc = r->status ? r->status : 1;
		r->state = REQ_FREE;
	}
	pthread_mutex_unlock(&l->mu);
	return rc;
}

int agent_lane_wait(struct agent_lane *l, int handle)
{
	struct lane_req *r;
	int rc;

	pthread_mutex_lock(&l->mu);
	r = lane_req_of(l, handle);
	if (!r) {
		pthread_mutex_unlock(&l->mu);
		return -ENOENT;
	}
	while (r->state == REQ_PENDING)
		pthread_cond_wait(&l->done, &l->mu);
	rc = r->status;
	r->state = REQ_FREE;
	pthread_mutex_unlock(&l->mu);
	return rc;
}

const char *agent_lane_strerror(struct agent_lane *l)
{
	return l->err;
}

void agent_lane_get_stats(struct agent_lane *l, struct tally_agent_stats *out)
{
	tally_agent_get_stats(l->in, out);
	pthread_mutex_lock(&l->mu);
	out->push_pulls = l->push_pulls;
	out->failed = l->failed;
	pthread_mutex_unlock(&l->mu);
}
