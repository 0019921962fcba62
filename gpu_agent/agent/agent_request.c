/* SPDX-License-Identifier: Apache-2.0
 * agent_request.c — push_pull requests and their handles: take a slot, let the stage stage
 * the bytes in (no lock: it may block on a copy or the local ranks), queue the partitions
 * in the one start order of every rank; wait()/test() on the handles. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "agent_core.h"
#include "tally_agent.h"

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
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

/* push_pull's checks before it takes a request slot (name NULL: no such tensor; busy < 0:
 * failed to register); 0 or negative errno with the message in err. */
static int push_check(char *err, size_t errlen, int tensor, const char *name, size_t declared,
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

/* Take a free slot for a push_pull of `tensor` and hold the tensor busy: the slot, or
 * negative errno (message). */
static int take_slot_locked(struct tally_agent *a, int tensor, void *ptr, size_t bytes,
			    int device, void *stream, unsigned flags, tally_agent_cb cb,
			    void *cb_arg)
{
	struct agent_tensor *t = tensor_at(a, tensor);
	struct agent_req *r;
	unsigned slot;
	int rc;

	for (slot = 0; slot < a->cfg.max_handles; slot++)
		if (a->reqs[slot].state == REQ_FREE)
			break;
	if ((rc = push_check(a->err, sizeof(a->err), tensor, t ? t->name : NULL,
			     t ? t->bytes : 0, t ? t->busy : 0, bytes,
			     slot < a->cfg.max_handles, a->cfg.max_handles)))
		return rc;
	r = &a->reqs[slot];
	r->gen = (r->gen + 1) % (uint32_t)(0x7fffffff / a->cfg.max_handles);
	if (r->gen == 0)
		r->gen = 1;
	r->state = REQ_PENDING;
	r->tensor = tensor;
	r->buf = NULL;
	r->user = ptr;
	r->flags = flags;
	r->result = NULL;
	r->device = device;
	r->stream = stream;
	r->left = t->nparts;
	r->status = 0;
	r->cb = cb;
	r->cb_arg = cb_arg;
	r->comp = agent_comp_active(t, t->subm);
	r->t0_ns = mono_ns();
	r->watched = 0;
	r->round = t->subm;
	t->busy = 1;
	return (int)slot;
}

static void release_slot_locked(struct tally_agent *a, unsigned slot)
{
	a->tensors[a->reqs[slot].tensor].busy = 0;
	a->reqs[slot].state = REQ_FREE;
}

/* Take back what was queued for request `slot`. */
static void unqueue_locked(struct tally_agent *a, unsigned slot)
{
	struct agent_sched keep;
	struct agent_sched_item x;

	agent_sched_init(&keep, a->sched.n + 1);
	while (a->sched.n) {
		agent_sched_pop(&a->sched, &x);
		if (x.req != slot)
			agent_sched_push(&keep, &x);
	}
	agent_sched_free(&a->sched);
	a->sched = keep;
}

/* Queue the request's partitions by (round, priority, partition), the same on every rank;
 * 0 or negative errno with nothing queued. */
static int schedule_locked(struct tally_agent *a, unsigned slot)
{
	struct agent_tensor *t = &a->tensors[a->reqs[slot].tensor];
	int rc;

	for (unsigned i = 0; i < t->nparts; i++) {
		/* a first push goes in declaration order: no rank can know which tensor of
		 * higher priority another rank will declare later */
		struct agent_sched_item it = {t->subm ? t->priority : 0, t->subm, t->first_part + i,
					      slot};

		if (a->order_mode == TALLY_AGENT_ORDER_SUBMIT) /* submission order */
			it = (struct agent_sched_item){0, a->seq, t->first_part + i, slot};
		if ((rc = agent_sched_push(&a->sched, &it))) {
			unqueue_locked(a, slot);
			return rc;
		}
	}
	t->subm++;
	a->seq++;
	pthread_cond_broadcast(&a->wake);
	return 0;
}

/* A taken request that goes to no network: the stage still sees it end (the sharded one
 * keeps the local ranks' collectives in step). Its handle when the stage finishes it later,
 * else `status` with the slot released. */
static int fail_taken_locked(struct tally_agent *a, unsigned slot, int status)
{
	int h = handle_of(a, slot);

	a->reqs[slot].status = status;
	a->reqs[slot].left = 0;
	if (agent_copy_back_locked(a, slot))
		return h;
	release_slot_locked(a, slot);
	a->tensors[a->reqs[slot].tensor].result = AGENT_RESULT_FAILED;
	return status;
}

int tally_agent_push_pull_flags(struct tally_agent *a, int tensor, void *ptr, size_t bytes,
				int device, void *stream, unsigned flags, tally_agent_cb cb,
				void *cb_arg)
{
	struct agent_stage_req sr;
	char e[512] = "";
	int slot, rc;

	if (!ptr || (device != TALLY_AGENT_CPU && device != TALLY_AGENT_CUDA) ||
	    (flags & ~(TALLY_AGENT_RESULT_VIEW | TALLY_AGENT_NO_RESULT)))
		return -EINVAL;
	pthread_mutex_lock(&a->mu);
	if ((rc = slot = take_slot_locked(a, tensor, ptr, bytes, device, stream, flags, cb,
					  cb_arg)) < 0)
		goto out;
	agent_stage_req_of(a, (unsigned)slot, &sr);
	pthread_mutex_unlock(&a->mu);
	rc = a->stage->stage_in(a->stage_ctx, &sr, e, sizeof(e));
	pthread_mutex_lock(&a->mu);
	if (rc) { /* refused: nothing started, the last result stays where it was */
		agent_set_err(a, "%s", e);
		release_slot_locked(a, (unsigned)slot);
		goto out;
	}
	a->tensors[tensor].result = NULL; /* the last result's view ends with this push_pull */
	a->reqs[slot].buf = sr.buf;
	a->reqs[slot].result = sr.result;
	if (sr.status)
		agent_set_err(a, "%s", e);
	if ((rc = sr.status ? sr.status : schedule_locked(a, (unsigned)slot)))
		rc = fail_taken_locked(a, (unsigned)slot, rc);
	else {
		a->reqs[slot].watched = 1;
		rc = handle_of(a, (unsigned)slot);
	}
out:
	pthread_mutex_unlock(&a->mu);
	return rc;
}

int tally_agent_push_pull(struct tally_agent *a, int tensor, void *ptr, size_t bytes, int device,
			  void *stream, tally_agent_cb cb, void *cb_arg)
{
	return tally_agent_push_pull_flags(a, tensor, ptr, bytes, device, stream, 0, cb, cb_arg);
}

int tally_agent_result_view(struct tally_agent *a, int tensor, const void **out)
{
	const struct agent_tensor *t;
	int rc = 0;

	pthread_mutex_lock(&a->mu);
	if (!(t = tensor_at(a, tensor)))
		rc = -ENOENT;
	else if (t->busy > 0)
		rc = -EBUSY;
	else if (!t->result)
		rc = -ENODATA;
	else if (t->result == AGENT_RESULT_FAILED)
		rc = -EIO;
	else
		*out = t->result;
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

/* What request `slot` waits for, appended to out: its partitions still queued and in flight
 * (which appliance, key), and what holds the queue (the rounds order, the credit window). */
static void describe_stall_locked(struct tally_agent *a, unsigned slot, double idle_s,
				  char *out, size_t len)
{
	struct agent_req *r = &a->reqs[slot];
	const struct agent_tensor *t = &a->tensors[r->tensor];
	unsigned queued = 0, flying = 0, appl = 0, key = 0;
	size_t n;

	for (unsigned i = 0; i < a->sched.n; i++)
		queued += a->sched.items[i].req == slot;
	for (unsigned i = 0; i < a->nflight; i++)
		if (a->flight[i].req == slot && a->flight[i].result == 0) {
			const struct agent_part *p = part_at(a, a->flight[i].part);
			if (!flying++)
				appl = p->appl, key = p->key;
		}
	n = (size_t)snprintf(out, len, "push_pull %llu of tensor '%s'%s: no progress for %.1f s "
			     "(op_timeout_ms %u, TALLY_OP_TIMEOUT_MS)",
			     (unsigned long long)r->round, t->name, a->net_tag, idle_s,
			     a->cfg.op_timeout_ms);
	if (n >= len)
		return;
	/* an appliance with work in flight that does not answer: the last one left after a
	 * failover (it is pushed to again and waited for), whatever this request waits on */
	for (unsigned i = 0; i < a->nflight; i++) {
		unsigned d = part_at(a, a->flight[i].part)->appl;

		if (a->flight[i].result == 0 &&
		    (a->live[d] == TALLY_AGENT_DOWN || a->live[d] == TALLY_AGENT_SILENT)) {
			snprintf(out + n, len - n, ": appliance %u (%s:%u) does not answer (down, "
				 "and no other appliance left to move its keys to)", d,
				 a->cfg.appliances[d].host, a->cfg.appliances[d].port);
			return;
		}
	}
	if (flying) {
		snprintf(out + n, len - n, ": %u partition(s) in flight, e.g. key %u at appliance %u "
			 "(%s:%u), waiting for the other ranks' pushes of it", flying, key, appl,
			 a->cfg.appliances[appl].host, a->cfg.appliances[appl].port);
		return;
	}
	if (!queued) {
		snprintf(out + n, len - n, ": its bytes are with the local stage (the other local "
			 "ranks' push_pull of it)");
		return;
	}
	if (a->order_mode == TALLY_AGENT_ORDER_ROUNDS && t->ordered) {
		/* the rounds order: a round starts after every ordered tensor's earlier rounds */
		for (unsigned i = 0; i < a->ntensors; i++) {
			const struct agent_tensor *o = &a->tensors[i];

			if (o == t || !o->ordered || o->busy < 0 || o->subm > r->round)
				continue;
			snprintf(out + n, len - n, ": not started: the default 'rounds' start order "
				 "waits until tensor '%s' (pushed %u times) is pushed for round %llu; "
				 "a tensor pushed on its own schedule needs set_order(submit) "
				 "(tally.Agent does it by default) or set_ordered(tensor, 0)", o->name,
				 o->subm, (unsigned long long)r->round);
			return;
		}
	}
	snprintf(out + n, len - n, ": %u partition(s) not started, %zu bytes in flight (credit "
		 "window %zu), %u partitions queued in all", queued, a->inflight_bytes,
		 a->cfg.credit_bytes, a->sched.n);
}

static void noop_cb(void *arg, int handle, int status)
{
	(void)arg, (void)handle, (void)status;
}

/* 1 when request `slot` has gone past its deadline: no partition of the agent completed or
 * started for op_timeout_ms since it was submitted (2 x op_timeout_ms when one of its
 * partitions is on the network: the client fails those itself after op_timeout_ms, with
 * the appliance's reason). */
static int past_deadline_locked(struct tally_agent *a, unsigned slot, double *idle_s)
{
	struct agent_req *r = &a->reqs[slot];
	uint64_t now = mono_ns(), since = r->t0_ns > a->last_progress_ns ? r->t0_ns
						 : a->last_progress_ns;
	uint64_t lim = (uint64_t)a->cfg.op_timeout_ms * 1000000u;
	int flying = 0;

	for (unsigned i = 0; i < a->nflight; i++)
		flying |= a->flight[i].req == slot && a->flight[i].result == 0;
	*idle_s = (double)(now - since) / 1e9;
	return now > since && now - since > (flying ? 2 * lim : lim);
}

/* Fail request `slot` with -ETIMEDOUT and the stall's description: its queued partitions
 * are taken back; one already on the network still ends there (the request is released
 * then). The caller's wait() returns now; a callback runs now, or when the network is done
 * with the request, exactly once. A request the stage already holds (nothing left with the
 * core) ends when the stage reports it: its copy back is not started twice. */
static void expire_locked(struct tally_agent *a, unsigned slot, double idle_s)
{
	struct agent_req *r = &a->reqs[slot];
	char msg[sizeof(a->err)];
	unsigned before = a->sched.n, left = r->left;

	describe_stall_locked(a, slot, idle_s, msg, sizeof(msg));
	agent_set_err(a, "%s", msg);
	unqueue_locked(a, slot);
	r->left -= before - a->sched.n;
	r->watched = 0;
	if (!r->status)
		r->status = -ETIMEDOUT;
	if (left && r->left == 0 && !agent_copy_back_locked(a, slot))
		agent_finish_req_locked(a, slot);
}

void agent_expire_due_locked(struct tally_agent *a)
{
	for (unsigned s = 0; s < a->cfg.max_handles; s++) {
		struct agent_req *r = &a->reqs[s];
		double idle;

		/* each expiry may drop the lock (copy back, callback): every slot is read anew */
		if (r->state == REQ_PENDING && r->watched && r->left &&
		    past_deadline_locked(a, s, &idle))
			expire_locked(a, s, idle);
	}
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
	while (r->state == REQ_PENDING) {
		struct timespec ts;
		double idle;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&a->done, &a->mu, &ts);
		if (r->state == REQ_PENDING &&
		    past_deadline_locked(a, (unsigned)(r - a->reqs), &idle)) {
			/* the handle is given up: whatever is still on the network ends without it */
			r->cb = noop_cb;
			r->cb_arg = NULL;
			expire_locked(a, (unsigned)(r - a->reqs), idle);
			pthread_mutex_unlock(&a->mu);
			return -ETIMEDOUT;
		}
	}
	finish_locked(r, &rc);
	pthread_mutex_unlock(&a->mu);
	return rc;
}

int tally_agent_expire(struct tally_agent *a, int handle)
{
	unsigned slot;
	double idle;
	int rc = 0;

	if (handle < 0)
		return -ENOENT;
	pthread_mutex_lock(&a->mu);
	slot = (unsigned)handle % a->cfg.max_handles;
	if (a->reqs[slot].state != REQ_PENDING || handle_of(a, slot) != handle)
		rc = 0; /* done (or released): nothing to expire */
	else if (past_deadline_locked(a, slot, &idle)) {
		expire_locked(a, slot, idle);
		rc = 1;
	}
	pthread_mutex_unlock(&a->mu);
	return rc;
}
