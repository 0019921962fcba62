/* SPDX-License-Identifier: Apache-2.0
 * agent.c — the agent's API side: create/destroy, tensor registry and partitions, push_pull
 * requests and handles, wait/test. The progress thread (agent_progress.c) schedules the
 * partitions onto the network. One mutex guards the tables; the network is touched only by
 * the progress thread (and by create before it starts). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "agent_core.h"
#include "agent_internal.h"
#include "agent_lane.h"
#include "tally_agent.h"
#include "tally_sum.h"

void agent_set_err(struct tally_agent *a, const char *fmt, const char *s)
{
	agent_errf(a->err, sizeof(a->err), fmt, s);
}

struct tally_agent *agent_create_net(const struct tally_agent_cfg *cfg,
				     const struct agent_net_ops *ops, void *ctx, int *err,
				     char *errbuf, size_t errlen)
{
	struct tally_agent *a = calloc(1, sizeof(*a));
	int rc = -ENOMEM;

	if (!a) {
		agent_errf(errbuf, errlen, "out of memory");
		ops->destroy(ctx);
		goto fail;
	}
	a->cfg = *cfg;
	a->net = ops;
	a->net_ctx = ctx;
	a->reg_tensor = -1;
	pthread_mutex_init(&a->mu, NULL);
	pthread_cond_init(&a->wake, NULL);
	pthread_cond_init(&a->done, NULL);
	if ((rc = agent_cfg_resolve(&a->cfg, errbuf, errlen)))
		goto fail_free;
	if ((rc = agent_plan_init(&a->plan, &a->cfg))) {
		agent_errf(errbuf, errlen, "cannot split keys over the appliances");
		goto fail_free;
	}
	a->tensors = calloc(a->cfg.max_tensors, sizeof(*a->tensors));
	a->reqs = calloc(a->cfg.max_handles, sizeof(*a->reqs));
	if (!a->tensors || !a->reqs || agent_sched_init(&a->sched, 256)) {
		rc = -ENOMEM;
		agent_errf(errbuf, errlen, "out of memory");
		goto fail_free;
	}
	for (unsigned i = 0; i < a->cfg.nappliances; i++) {
		rc = ops->connect(ctx, i, a->cfg.connect_timeout_ms, errbuf, errlen);
		if (rc)
			goto fail_free;
	}
	if ((rc = -pthread_create(&a->thr, NULL, agent_progress_main, a))) {
		agent_errf(errbuf, errlen, "cannot start the progress thread");
		goto fail_free;
	}
	a->thr_started = 1;
	return a;
fail_free:
	tally_agent_destroy(a);
fail:
	if (err)
		*err = rc;
	return NULL;
}

struct tally_agent *tally_agent_create(const struct tally_agent_cfg *cfg, int *err,
				       char *errbuf, size_t errlen)
{
	struct tally_agent_cfg c = *cfg;
	const struct agent_net_ops *ops;
	const char *id;
	void *ctx;
	int rc;

	if ((rc = agent_cfg_resolve(&c, errbuf, errlen)))
		goto fail;
	if (!(id = getenv("TALLY_LOCAL_ID")))
		id = getenv("TORCHELASTIC_RUN_ID");
	if (c.local_agg == TALLY_AGENT_LOCAL_SHARD && c.local_size > 1) {
		/* every local rank pushes its shard on its own lane */
		struct tally_agent_cfg lane;

		if ((rc = agent_lane_cfg(&c, &lane, errbuf, errlen)) ||
		    (rc = agent_net_client_create(&lane, &ops, &ctx, errbuf, errlen)))
			goto fail;
		return agent_lane_create(&c, ops, ctx, id, err, errbuf, errlen);
	}
	if (c.local_agg && c.local_size > 1) {
		/* local rank 0 pushes for the machine: rank = machine index among the machines */
		struct tally_agent_cfg node = c;

		node.rank = c.rank / c.local_size;
		node.world_size = c.world_size / c.local_size;
		ops = NULL;
		ctx = NULL;
		if (c.local_rank == 0 &&
		    (rc = agent_net_client_create(&node, &ops, &ctx, errbuf, errlen)))
			goto fail;
		if ((rc = agent_net_local_create(&c, ops, ctx, id, c.local_shm_bytes, &ops, &ctx,
						 errbuf, errlen)))
			goto fail;
	} else if ((rc = agent_net_client_create(&c, &ops, &ctx, errbuf, errlen))) {
		goto fail;
	}
	return agent_create_net(&c, ops, ctx, err, errbuf, errlen);
fail:
	if (err)
		*err = rc;
	return NULL;
}

void tally_agent_destroy(struct tally_agent *a)
{
	if (!a)
		return;
	if (a->lane) {
		agent_lane_destroy(a->lane);
		free(a);
		return;
	}
	if (a->thr_started) {
		pthread_mutex_lock(&a->mu);
		a->stop = 1;
		pthread_cond_broadcast(&a->wake);
		pthread_mutex_unlock(&a->mu);
		pthread_join(a->thr, NULL);
	}
	pthread_mutex_lock(&a->mu);
	agent_fail_all_locked(a, -ECANCELED);
	pthread_mutex_unlock(&a->mu);
	if (a->net)
		a->net->destroy(a->net_ctx);
	for (unsigned i = 0; a->tensors && i < a->ntensors; i++)
		if (a->tensors[i].host)
			agent_dev_free_host(a->tensors[i].host);
	agent_sched_free(&a->sched);
	free(a->flight);
	for (unsigned b = 0; b < AGENT_PART_BLOCKS; b++)
		free(a->pblk[b]);
	free(a->tensors);
	free(a->reqs);
	pthread_cond_destroy(&a->wake);
	pthread_cond_destroy(&a->done);
	pthread_mutex_destroy(&a->mu);
	free(a);
}

const char *tally_agent_strerror(struct tally_agent *a)
{
	if (a && a->lane)
		return agent_lane_strerror(a->lane);
	return a ? a->err : "no agent";
}

/* ---- tensors ---- */

int tally_agent_lookup(struct tally_agent *a, const char *name)
{
	int id = -ENOENT;

	if (a->lane)
		return agent_lane_lookup(a->lane, name);
	pthread_mutex_lock(&a->mu);
	for (unsigned i = 0; i < a->ntensors; i++)
		if (strcmp(a->tensors[i].name, name) == 0)
			id = (int)i;
	pthread_mutex_unlock(&a->mu);
	return id;
}

int tally_agent_declare(struct tally_agent *a, const char *name, size_t bytes, int dtype,
			int priority)
{
	size_t esz = dtype >= 0 && dtype < TALLY_DT_COUNT ? tally_dtype_size(dtype) : 0;
	size_t pb;
	struct agent_tensor *t;
	int rc, id;

	if (a->lane)
		return agent_lane_declare(a->lane, name, bytes, dtype, priority);
	if (!name || !*name || strlen(name) >= TALLY_AGENT_NAME_MAX) {
		agent_set_err(a, "declare: tensor name empty or longer than 127 bytes%s", "");
		return -EINVAL;
	}
	if (!esz || bytes == 0 || bytes % esz) {
		agent_errf(a->err, sizeof(a->err), "declare '%s': %zu bytes is not a whole number of "
			   "elements of dtype %d", name, bytes, dtype);
		return -EINVAL;
	}
	pthread_mutex_lock(&a->mu);
	for (unsigned i = 0; i < a->ntensors; i++) {
		t = &a->tensors[i];
		if (strcmp(t->name, name) != 0)
			continue;
		if (t->bytes != bytes || t->dtype != dtype) {
			agent_errf(a->err, sizeof(a->err), "tensor '%s' changed shape: declared %zu bytes "
				   "%s, now %zu bytes %s", name, t->bytes, tally_dtype_name(t->dtype),
				   bytes, tally_dtype_name(dtype));
			rc = -EINVAL;
		} else {
			rc = (int)i;
		}
		pthread_mutex_unlock(&a->mu);
		return rc;
	}
	if (a->ntensors == a->cfg.max_tensors) {
		pthread_mutex_unlock(&a->mu);
		agent_errf(a->err, sizeof(a->err), "declare '%s': more than %u tensors", name,
			   a->cfg.max_tensors);
		return -ENOSPC;
	}
	/* partitions hold whole elements */
	pb = a->cfg.partition_bytes / esz * esz;
	unsigned np = (unsigned)((bytes + pb - 1) / pb);
	if ((size_t)a->nparts + np > (size_t)AGENT_PART_BLOCK * AGENT_PART_BLOCKS) {
		pthread_mutex_unlock(&a->mu);
		agent_errf(a->err, sizeof(a->err), "declare '%s': more than %u partitions in all",
			   name, AGENT_PART_BLOCK * AGENT_PART_BLOCKS);
		return -ENOSPC;
	}
	for (unsigned b = a->nparts / AGENT_PART_BLOCK; b <= (a->nparts + np - 1) / AGENT_PART_BLOCK; b++)
		if (!a->pblk[b] && !(a->pblk[b] = calloc(AGENT_PART_BLOCK, sizeof(struct agent_part)))) {
			pthread_mutex_unlock(&a->mu);
			return -ENOMEM;
		}
	id = (int)a->ntensors;
	t = &a->tensors[id];
	memset(t, 0, sizeof(*t));
	strcpy(t->name, name);
	t->bytes = bytes;
	t->dtype = dtype;
	t->priority = priority;
	t->average = a->cfg.average;
	t->ordered = 1;
	t->first_part = a->nparts;
	t->nparts = np;
	for (unsigned i = 0; i < np; i++) {
		struct agent_part *p = part_at(a, a->nparts + i);

		p->key = a->nparts + i; /* keys in declaration order: the same on every rank */
		p->off = (size_t)i * pb;
		p->bytes = bytes - p->off < pb ? bytes - p->off : pb;
		p->appl = agent_plan_place(&a->plan, p->bytes);
		p->round = 0;
	}
	a->nparts += np;
	a->ntensors++;
	/* REGISTER through the progress thread, which owns the sessions */
	while (a->reg_tensor >= 0)
		pthread_cond_wait(&a->done, &a->mu);
	a->reg_tensor = id;
	a->reg_rc = 1;
	pthread_cond_broadcast(&a->wake);
	while (a->reg_rc == 1)
		pthread_cond_wait(&a->done, &a->mu);
	rc = a->reg_rc;
	a->reg_tensor = -1;
	if (rc) {
		agent_errf(a->err, sizeof(a->err), "declare '%s': %s", name, a->reg_err);
		/* leave it declared (keys are numbered), but unusable */
		t->busy = -1;
	}
	pthread_cond_broadcast(&a->done);
	pthread_mutex_unlock(&a->mu);
	return rc ? rc : id;
}

int tally_agent_set_average(struct tally_agent *a, int tensor, int average)
{
	int rc = -ENOENT;

	if (a->lane)
		return agent_lane_set_average(a->lane, tensor, average);
	pthread_mutex_lock(&a->mu);
	if (tensor >= 0 && (unsigned)tensor < a->ntensors) {
		a->tensors[tensor].average = average != 0;
		rc = 0;
	}
	pthread_mutex_unlock(&a->mu);
	return rc;
}

int tally_agent_set_ordered(struct tally_agent *a, int tensor, int ordered)
{
	int rc = -ENOENT;

	if (a->lane)
		return agent_lane_set_ordered(a->lane, tensor, ordered);
	pthread_mutex_lock(&a->mu);
	if (tensor >= 0 && (unsigned)tensor < a->ntensors) {
		a->tensors[tensor].ordered = ordered != 0;
		rc = 0;
	}
	pthread_mutex_unlock(&a->mu);
	return rc;
}

int tally_agent_set_order(struct tally_agent *a, int mode)
{
	int rc = 0;

	if (mode != TALLY_AGENT_ORDER_ROUNDS && mode != TALLY_AGENT_ORDER_SUBMIT)
		return -EINVAL;
	if (a->lane)
		return agent_lane_set_order(a->lane, mode);
	pthread_mutex_lock(&a->mu);
	/* the queue's keys mean another thing in each mode: never mix them */
	for (unsigned i = 0; i < a->cfg.max_handles && !rc; i++)
		if (a->reqs[i].state == REQ_PENDING)
			rc = -EBUSY;
	if (rc)
		agent_set_err(a, "set_order: push_pulls pending%s", "");
	else
		a->order_mode = mode;
	pthread_mutex_unlock(&a->mu);
	return rc;
}

int tally_agent_partitions(struct tally_agent *a, int tensor, struct tally_agent_part *out,
			   unsigned max)
{
	int n;

	if (a->lane)
		return agent_lane_partitions(a->lane, tensor, out, max);
	pthread_mutex_lock(&a->mu);
	if (tensor < 0 || (unsigned)tensor >= a->ntensors) {
		pthread_mutex_unlock(&a->mu);
		return -ENOENT;
	}
	const struct agent_tensor *t = &a->tensors[tensor];
	for (unsigned i = 0; i < t->nparts && i < max; i++) {
		const struct agent_part *p = part_at(a, t->first_part + i);
		out[i] = (struct tally_agent_part){p->key, p->appl, p->off, p->bytes};
	}
	n = (int)t->nparts;
	pthread_mutex_unlock(&a->mu);
	return n;
}

/* ---- requests ---- */

static struct agent_req *req_of(struct tally_agent *a, int handle)
{
	unsigned slot;

	if (handle < 0)
		return NULL;
	slot = (unsigned)handle % a->cfg.max_handles;
	if (a->reqs[slot].state == REQ_FREE || handle_of(a, slot) != handle || a->reqs[slot].cb)
		return NULL;
	return &a->reqs[slot];
}

int agent_push_check(char *err, size_t errlen, int tensor, const char *name, size_t declared,
		     int busy, size_t bytes, int have_slot, unsigned max_handles)
{
	if (!name) {
		agent_errf(err, errlen, "push_pull: no tensor %d", tensor);
		return -ENOENT;
	}
	if (declared != bytes) {
		agent_errf(err, errlen, "tensor '%s' shape changed between iterations: declared %zu "
			   "bytes, push_pull of %zu bytes", name, declared, bytes);
		return -EINVAL;
	}
	if (busy) {
		agent_errf(err, errlen, busy < 0 ? "tensor '%s' failed to register"
			   : "tensor '%s' already has a push_pull in flight", name);
		return busy < 0 ? -EIO : -EBUSY;
	}
	if (!have_slot) {
		agent_errf(err, errlen, "push_pull: more than %u operations pending", max_handles);
		return -ENOSPC;
	}
	return 0;
}

int tally_agent_push_pull(struct tally_agent *a, int tensor, void *ptr, size_t bytes, int device,
			  void *stream, tally_agent_cb cb, void *cb_arg)
{
	struct agent_tensor *t;
	struct agent_req *r = NULL;
	unsigned slot;
	int rc;

	if (a->lane)
		return agent_lane_push_pull(a->lane, tensor, ptr, bytes, device, stream, cb,
					    cb_arg);
	if (!ptr || (device != TALLY_AGENT_CPU && device != TALLY_AGENT_CUDA))
		return -EINVAL;
	pthread_mutex_lock(&a->mu);
	t = tensor >= 0 && (unsigned)tensor < a->ntensors ? &a->tensors[tensor] : NULL;
	for (slot = 0; slot < a->cfg.max_handles; slot++)
		if (a->reqs[slot].state == REQ_FREE)
			break;
	if ((rc = agent_push_check(a->err, sizeof(a->err), tensor, t ? t->name : NULL,
				   t ? t->bytes : 0, t ? t->busy : 0, bytes,
				   slot < a->cfg.max_handles, a->cfg.max_handles)))
		goto out;
	r = &a->reqs[slot];
	if (device == TALLY_AGENT_CUDA) {
		char e[256];

		if (!t->host && (rc = agent_dev_alloc_host(&t->host, t->bytes, e, sizeof(e)))) {
			agent_set_err(a, "push_pull: %s", e);
			goto out;
		}
		/* blocking copy on the caller's stream, outside the lock would be nicer; the
		 * copy is short and the progress thread only needs the lock between polls */
		if ((rc = agent_dev_to_host(t->host, ptr, bytes, stream, e, sizeof(e)))) {
			agent_set_err(a, "push_pull: %s", e);
			goto out;
		}
		r->buf = t->host;
	} else {
		r->buf = ptr;
	}
	r->gen = (r->gen + 1) % (uint32_t)(0x7fffffff / a->cfg.max_handles);
	if (r->gen == 0)
		r->gen = 1;
	r->state = REQ_PENDING;
	r->tensor = tensor;
	r->user = ptr;
	r->device = device;
	r->stream = stream;
	r->left = t->nparts;
	r->status = 0;
	r->cb = cb;
	r->cb_arg = cb_arg;
	/* the queue orders by (round, priority, partition): the same on every rank */
	for (unsigned i = 0; i < t->nparts; i++) {
		/* a first push goes in declaration order: no rank can know which tensor of
		 * higher priority another rank will declare later */
		struct agent_sched_item it = {t->subm ? t->priority : 0, t->subm, t->first_part + i,
					      slot};

		if (a->order_mode == TALLY_AGENT_ORDER_SUBMIT) /* submission order */
			it = (struct agent_sched_item){0, a->seq, t->first_part + i, slot};

		if ((rc = agent_sched_push(&a->sched, &it))) {
			/* undo: take back what was queued for this request */
			struct agent_sched keep;
			agent_sched_init(&keep, a->sched.n + 1);
			while (a->sched.n) {
				struct agent_sched_item x;
				agent_sched_pop(&a->sched, &x);
				if (x.req != slot)
					agent_sched_push(&keep, &x);
			}
			agent_sched_free(&a->sched);
			a->sched = keep;
			r->state = REQ_FREE;
			goto out;
		}
	}
	t->busy = 1;
	t->subm++;
	a->seq++;
	rc = handle_of(a, slot);
	pthread_cond_broadcast(&a->wake);
out:
	pthread_mutex_unlock(&a->mu);
	return rc;
}

static void finish_locked(struct agent_req *r, int *status)
{
	*status = r->status;
	r->state = REQ_FREE;
}

int tally_agent_test(struct tally_agent *a, int handle)
{
	struct agent_req *r;
	int rc;

	if (a->lane)
		return agent_lane_test(a->lane, handle);
	pthread_mutex_lock(&a->mu);
	r = req_of(a, handle);
	if (!r)
		rc = -ENOENT;
	else if (r->state == REQ_PENDING)
		rc = 0;
	else {
		int st;

		finish_locked(r, &st);
		rc = st ? st : 1;
	}
	pthread_mutex_unlock(&a->mu);
	return rc;
}

int tally_agent_wait(struct tally_agent *a, int handle)
{
	struct agent_req *r;
	int rc;

	if (a->lane)
		return agent_lane_wait(a->lane, handle);
	pthread_mutex_lock(&a->mu);
	r = req_of(a, handle);
	if (!r) {
		pthread_mutex_unlock(&a->mu);
		return -ENOENT;
	}
	while (r->state == REQ_PENDING)
		pthread_cond_wait(&a->done, &a->mu);
	finish_locked(r, &rc);
	pthread_mutex_unlock(&a->mu);
	return rc;
}

void tally_agent_get_stats(struct tally_agent *a, struct tally_agent_stats *out)
{
	if (a->lane) {
		agent_lane_get_stats(a->lane, out);
		return;
	}
	pthread_mutex_lock(&a->mu);
	*out = a->st;
	pthread_mutex_unlock(&a->mu);
}

void tally_agent_ranks(struct tally_agent *a, int *rank, int *world, int *local_rank,
		       int *local_size)
{
	if (rank)
		*rank = a->cfg.rank;
	if (world)
		*world = a->cfg.world_size;
	if (local_rank)
		*local_rank = a->cfg.local_rank;
	if (local_size)
		*local_size = a->cfg.local_size;
}
