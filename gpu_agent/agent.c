/* SPDX-License-Identifier: Apache-2.0
 * agent.c — the agent core: tensor registry and partitions, push_pull requests and handles,
 * and the progress thread that schedules partitions (priority + credits) onto the network
 * and completes requests. One mutex guards the tables; the network is touched only by the
 * progress thread (and by create before it starts). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "agent_internal.h"
#include "tally_agent.h"
#include "tally_sum.h"

enum { REQ_FREE = 0, REQ_PENDING, REQ_DONE };

struct agent_tensor {
	char name[TALLY_AGENT_NAME_MAX];
	size_t bytes;
	int dtype;
	int priority;
	unsigned first_part, nparts;
	int busy;          /* a push_pull is in flight */
	void *host;        /* pinned staging for device tensors (CUDA) */
};

#define AGENT_PART_BLOCK 1024u
#define AGENT_PART_BLOCKS 4096u

struct agent_part {
	uint32_t key, appl;
	size_t off, bytes;
	uint32_t round;    /* next round of this key (progress thread) */
};

struct agent_req {
	int state;
	uint32_t gen;
	int tensor;
	uint8_t *buf;      /* host bytes summed in place */
	void *user;        /* the caller's pointer (device tensors: copied back at the end) */
	int device;
	void *stream;
	unsigned left;
	int status;
	tally_agent_cb cb;
	void *cb_arg;
};

struct agent_flight {
	int op;            /* network op id; -1 before start */
	uint32_t req, part;
	int result;        /* 0 pending, 1 done, < 0 failed */
};

struct tally_agent {
	struct tally_agent_cfg cfg;
	const struct agent_net_ops *net;
	void *net_ctx;
	struct agent_plan plan;

	pthread_mutex_t mu;
	pthread_cond_t wake;    /* progress thread */
	pthread_cond_t done;    /* waiters (requests, declarations) */
	pthread_t thr;
	int thr_started, stop;

	struct agent_tensor *tensors;
	unsigned ntensors;
	/* partitions in blocks that never move: the progress thread reads them unlocked
	 * while a declaration appends */
	struct agent_part *pblk[AGENT_PART_BLOCKS];
	unsigned nparts;
	struct agent_req *reqs;
	uint64_t seq;
	struct agent_sched sched;
	struct agent_flight *flight;
	unsigned nflight, flight_cap;
	size_t inflight_bytes;
	int credit_blocked;

	int reg_tensor;         /* declaration waiting for REGISTER, -1 none */
	int reg_rc;
	char reg_err[256];

	char err[512];
	struct tally_agent_stats st;
};

static void *progress_main(void *arg);

static inline struct agent_part *part_at(struct tally_agent *a, unsigned i)
{
	return &a->pblk[i / AGENT_PART_BLOCK][i % AGENT_PART_BLOCK];
}

static void set_err(struct tally_agent *a, const char *fmt, const char *s)
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
	if ((rc = -pthread_create(&a->thr, NULL, progress_main, a))) {
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
	void *ctx;
	int rc;

	if ((rc = agent_cfg_resolve(&c, errbuf, errlen)) ||
	    (rc = agent_net_client_create(&c, &ops, &ctx, errbuf, errlen))) {
		if (err)
			*err = rc;
		return NULL;
	}
	return agent_create_net(&c, ops, ctx, err, errbuf, errlen);
}

static void fail_all_locked(struct tally_agent *a, int status);

void tally_agent_destroy(struct tally_agent *a)
{
	if (!a)
		return;
	if (a->thr_started) {
		pthread_mutex_lock(&a->mu);
		a->stop = 1;
		pthread_cond_broadcast(&a->wake);
		pthread_mutex_unlock(&a->mu);
		pthread_join(a->thr, NULL);
	}
	pthread_mutex_lock(&a->mu);
	fail_all_locked(a, -ECANCELED);
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
	return a ? a->err : "no agent";
}

/* ---- tensors ---- */

int tally_agent_lookup(struct tally_agent *a, const char *name)
{
	int id = -ENOENT;

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

	if (!name || !*name || strlen(name) >= TALLY_AGENT_NAME_MAX) {
		set_err(a, "declare: tensor name empty or longer than 127 bytes%s", "");
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

int tally_agent_partitions(struct tally_agent *a, int tensor, struct tally_agent_part *out,
			   unsigned max)
{
	int n;

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

static int handle_of(const struct tally_agent *a, unsigned slot)
{
	return (int)(a->reqs[slot].gen * a->cfg.max_handles + slot);
}

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

int tally_agent_push_pull(struct tally_agent *a, int tensor, void *ptr, size_t bytes, int device,
			  void *stream, tally_agent_cb cb, void *cb_arg)
{
	struct agent_tensor *t;
	struct agent_req *r = NULL;
	unsigned slot;
	int rc;

	if (!ptr || (device != TALLY_AGENT_CPU && device != TALLY_AGENT_CUDA))
		return -EINVAL;
	pthread_mutex_lock(&a->mu);
	if (tensor < 0 || (unsigned)tensor >= a->ntensors) {
		agent_errf(a->err, sizeof(a->err), "push_pull: no tensor %d", tensor);
		rc = -ENOENT;
		goto out;
	}
	t = &a->tensors[tensor];
	if (t->bytes != bytes) {
		agent_errf(a->err, sizeof(a->err), "tensor '%s' shape changed between iterations: "
			   "declared %zu bytes, push_pull of %zu bytes", t->name, t->bytes, bytes);
		rc = -EINVAL;
		goto out;
	}
	if (t->busy) {
		agent_errf(a->err, sizeof(a->err), t->busy < 0 ? "tensor '%s' failed to register"
			   : "tensor '%s' already has a push_pull in flight", t->name);
		rc = t->busy < 0 ? -EIO : -EBUSY;
		goto out;
	}
	for (slot = 0; slot < a->cfg.max_handles; slot++)
		if (a->reqs[slot].state == REQ_FREE)
			break;
	if (slot == a->cfg.max_handles) {
		agent_errf(a->err, sizeof(a->err), "push_pull: more than %u operations pending",
			   a->cfg.max_handles);
		rc = -ENOSPC;
		goto out;
	}
	r = &a->reqs[slot];
	if (device == TALLY_AGENT_CUDA) {
		char e[256];

		if (!t->host && (rc = agent_dev_alloc_host(&t->host, t->bytes, e, sizeof(e)))) {
			set_err(a, "push_pull: %s", e);
			goto out;
		}
		/* blocking copy on the caller's stream, outside the lock would be nicer; the
		 * copy is short and the progress thread only needs the lock between polls */
		if ((rc = agent_dev_to_host(t->host, ptr, bytes, stream, e, sizeof(e)))) {
			set_err(a, "push_pull: %s", e);
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
	a->seq++;
	for (unsigned i = 0; i < t->nparts; i++) {
		struct agent_sched_item it = {t->priority, a->seq, t->first_part + i, slot};

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

/* ---- progress thread ---- */

/* A request's last partition is in: copy back to the device, then publish. Called with
 * the lock held; returns 1 when a callback must run (after unlocking). */
static int complete_req_locked(struct tally_agent *a, struct agent_req *r)
{
	a->tensors[r->tensor].busy = 0;
	if (r->status)
		a->st.failed++;
	else
		a->st.push_pulls++;
	r->state = REQ_DONE;
	if (r->cb)
		return 1;
	pthread_cond_broadcast(&a->done);
	return 0;
}

static void fail_all_locked(struct tally_agent *a, int status)
{
	struct agent_sched_item it;

	while (a->sched.n) {
		agent_sched_pop(&a->sched, &it);
		struct agent_req *r = &a->reqs[it.req];
		if (!r->status)
			r->status = status;
		if (--r->left == 0 && complete_req_locked(a, r)) {
			tally_agent_cb cb = r->cb;
			void *arg = r->cb_arg;
			int h = handle_of(a, it.req), st = r->status;

			r->state = REQ_FREE;
			pthread_mutex_unlock(&a->mu);
			cb(arg, h, st);
			pthread_mutex_lock(&a->mu);
		}
	}
	for (unsigned i = 0; i < a->nflight; i++) {
		struct agent_req *r = &a->reqs[a->flight[i].req];
		if (!r->status)
			r->status = status;
		if (--r->left == 0 && complete_req_locked(a, r)) {
			tally_agent_cb cb = r->cb;
			void *arg = r->cb_arg;
			int h = handle_of(a, a->flight[i].req), st = r->status;

			r->state = REQ_FREE;
			pthread_mutex_unlock(&a->mu);
			cb(arg, h, st);
			pthread_mutex_lock(&a->mu);
		}
	}
	a->nflight = 0;
	a->inflight_bytes = 0;
}

static void average(void *buf, size_t bytes, int dtype, int world)
{
	float s = 1.0f / (float)world;

	switch (dtype) {
	case TALLY_DT_F32:
		for (size_t i = 0; i < bytes / 4; i++)
			((float *)buf)[i] *= s;
		break;
	case TALLY_DT_F16:
		for (size_t i = 0; i < bytes / 2; i++) {
			uint16_t *h = (uint16_t *)buf + i;
			*h = tally_f32_to_f16(tally_f16_to_f32(*h) * s);
		}
		break;
	case TALLY_DT_BF16:
		for (size_t i = 0; i < bytes / 2; i++) {
			uint16_t *h = (uint16_t *)buf + i;
			*h = tally_f32_to_bf16(tally_bf16_to_f32(*h) * s);
		}
		break;
	default: /* integers are not averaged */
		break;
	}
}

static void do_register(struct tally_agent *a)
{
	struct agent_tensor t = a->tensors[a->reg_tensor];
	int rc = 0;

	pthread_mutex_unlock(&a->mu);
	for (unsigned i = 0; i < t.nparts && !rc; i++) {
		const struct agent_part *p = part_at(a, t.first_part + i); /* blocks never move */
		size_t esz = tally_dtype_size(t.dtype);
		struct tally_register reg = {
			.nelems = (uint32_t)(p->bytes / esz),
			.chunk_elems = 0,
			.dtype = (uint8_t)t.dtype,
			.participants = (uint16_t)a->cfg.world_size,
			.quorum = a->cfg.quorum ? a->cfg.quorum : (uint16_t)a->cfg.world_size,
		};
		rc = a->net->register_key(a->net_ctx, p->appl, p->key, &reg, a->reg_err,
					  sizeof(a->reg_err));
	}
	pthread_mutex_lock(&a->mu);
	a->reg_rc = rc;
	pthread_cond_broadcast(&a->done);
}

static int ensure_flight_cap(struct tally_agent *a)
{
	if (a->nflight < a->flight_cap)
		return 0;
	unsigned cap = a->flight_cap ? a->flight_cap * 2 : 64;
	struct agent_flight *n = realloc(a->flight, cap * sizeof(*n));
	if (!n)
		return -ENOMEM;
	a->flight = n;
	a->flight_cap = cap;
	return 0;
}

static void *progress_main(void *arg)
{
	struct tally_agent *a = arg;

	pthread_mutex_lock(&a->mu);
	for (;;) {
		if (a->reg_tensor >= 0 && a->reg_rc == 1) {
			do_register(a);
			continue;
		}
		if (a->stop)
			break;
		/* start what the scheduler allows */
		unsigned first_new = a->nflight;
		const struct agent_sched_item *top;
		while ((top = agent_sched_peek(&a->sched))) {
			const struct agent_part *p = part_at(a, top->part);
			if (!agent_sched_may_start(a->inflight_bytes, p->bytes, a->cfg.credit_bytes)) {
				if (!a->credit_blocked)
					a->st.credit_waits++;
				a->credit_blocked = 1;
				break;
			}
			if (ensure_flight_cap(a))
				break;
			struct agent_sched_item it;
			agent_sched_pop(&a->sched, &it);
			a->flight[a->nflight++] = (struct agent_flight){-1, it.req, it.part, 0};
			a->inflight_bytes += p->bytes;
			a->credit_blocked = 0;
			if (a->inflight_bytes > a->st.max_inflight_bytes)
				a->st.max_inflight_bytes = a->inflight_bytes;
		}
		if (a->nflight == 0) {
			pthread_cond_wait(&a->wake, &a->mu);
			continue;
		}
		unsigned nflight = a->nflight;
		pthread_mutex_unlock(&a->mu);

		/* Network work without the lock: the flight array is only resized or reordered by
		 * this thread, and entries [0, nflight) stay put until we relock. */
		for (unsigned i = first_new; i < nflight; i++) {
			struct agent_flight *f = &a->flight[i];
			struct agent_part *p = part_at(a, f->part);
			uint8_t *b = a->reqs[f->req].buf + p->off;

			f->op = a->net->start(a->net_ctx, p->appl, p->key, p->round, b, b);
			if (f->op < 0) {
				f->result = f->op;
				agent_errf(a->err, sizeof(a->err), "key %u round %u on appliance %u: %s",
					   p->key, p->round, p->appl,
					   a->net->strerror(a->net_ctx, p->appl));
			}
			p->round++;
		}
		a->net->progress(a->net_ctx, 200000);
		for (unsigned i = 0; i < nflight; i++) {
			struct agent_flight *f = &a->flight[i];
			struct agent_part *p = part_at(a, f->part);

			if (f->result)
				continue;
			f->result = a->net->test(a->net_ctx, p->appl, f->op);
			if (f->result < 0)
				agent_errf(a->err, sizeof(a->err), "tensor '%s' key %u on appliance %u (%s:%u): %s",
					   a->tensors[a->reqs[f->req].tensor].name, p->key, p->appl,
					   a->cfg.appliances[p->appl].host, a->cfg.appliances[p->appl].port,
					   a->net->strerror(a->net_ctx, p->appl));
			else if (f->result == 1 && a->cfg.average) {
				struct agent_req *r = &a->reqs[f->req];
				average(r->buf + p->off, p->bytes, a->tensors[r->tensor].dtype,
					a->cfg.world_size);
			}
		}
		/* requests whose last partition is in: copy device tensors back (no lock) */
		pthread_mutex_lock(&a->mu);
		uint64_t rtx = 0, excl = 0;
		a->net->stats(a->net_ctx, &rtx, &excl);
		a->st.retransmits = rtx;
		a->st.excluded = excl;
		for (unsigned i = 0; i < a->nflight;) {
			struct agent_flight f = a->flight[i];
			struct agent_req *r = &a->reqs[f.req];

			if (f.result == 0) {
				i++;
				continue;
			}
			a->flight[i] = a->flight[--a->nflight];
			a->inflight_bytes -= part_at(a, f.part)->bytes;
			a->st.partitions++;
			a->st.bytes += part_at(a, f.part)->bytes;
			if (f.result < 0 && !r->status)
				r->status = f.result;
			if (--r->left)
				continue;
			if (r->device == TALLY_AGENT_CUDA && !r->status) {
				char e[256];
				int rc;

				pthread_mutex_unlock(&a->mu);
				rc = agent_dev_to_device(r->user, r->buf, a->tensors[r->tensor].bytes,
							 r->stream, e, sizeof(e));
				pthread_mutex_lock(&a->mu);
				if (rc) {
					r->status = rc;
					set_err(a, "%s", e);
				}
			}
			if (complete_req_locked(a, r)) {
				tally_agent_cb cb = r->cb;
				void *cb_arg = r->cb_arg;
				int h = handle_of(a, f.req), st = r->status;

				r->state = REQ_FREE;
				pthread_mutex_unlock(&a->mu);
				cb(cb_arg, h, st);
				pthread_mutex_lock(&a->mu);
			}
		}
	}
	fail_all_locked(a, -ECANCELED);
	pthread_mutex_unlock(&a->mu);
	return NULL;
}
