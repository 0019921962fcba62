/* SPDX-License-Identifier: Apache-2.0
 * agent_complete.c — the end of a request, wherever it ends (the progress thread, push_pull,
 * the stage's own thread, destroy): the stage's copy back, then publish to wait()/test() or
 * run the callback. Every caller holds the agent's mutex; callbacks and stages run without
 * it (they may call back into the agent). */
#include <errno.h>
#include <pthread.h>

#include "agent_core.h"

void agent_stage_req_of(struct tally_agent *a, unsigned slot, struct agent_stage_req *sr)
{
	struct agent_req *r = &a->reqs[slot];
	struct agent_tensor *t = &a->tensors[r->tensor];

	*sr = (struct agent_stage_req){
		.slot = slot,
		.tensor = (unsigned)r->tensor,
		.name = t->name,
		.bytes = t->bytes,
		.dtype = t->dtype,
		.device = r->device,
		.ptr = r->user,
		.stream = r->stream,
		.flags = r->flags,
		.state = &t->stage,
		.buf = r->buf,
	};
}

int agent_copy_back_locked(struct tally_agent *a, unsigned slot)
{
	struct agent_stage_req sr;
	char e[512] = "";
	int st = a->reqs[slot].status, later;

	agent_stage_req_of(a, slot, &sr);
	pthread_mutex_unlock(&a->mu);
	later = a->stage->stage_out(a->stage_ctx, &sr, &st, e, sizeof(e));
	pthread_mutex_lock(&a->mu);
	if (later == AGENT_STAGE_LATER)
		return 1;
	if (st && !a->reqs[slot].status) {
		a->reqs[slot].status = st;
		agent_set_err(a, "%s", e);
	}
	return 0;
}

void agent_finish_req_locked(struct tally_agent *a, unsigned slot)
{
	struct agent_req *r = &a->reqs[slot];

	a->tensors[r->tensor].busy = 0;
	a->tensors[r->tensor].result = r->status ? AGENT_RESULT_FAILED
				       : r->result ? r->result : r->user;
	if (r->status)
		a->st.failed++;
	else
		a->st.push_pulls++;
	r->state = REQ_DONE;
	if (!r->cb) {
		pthread_cond_broadcast(&a->done);
		return;
	}
	tally_agent_cb cb = r->cb;
	void *arg = r->cb_arg;
	int h = handle_of(a, slot), st = r->status;

	r->state = REQ_FREE; /* the handle is released once the callback returns */
	pthread_mutex_unlock(&a->mu);
	cb(arg, h, st);
	pthread_mutex_lock(&a->mu);
}

void agent_stage_done(void *arg, unsigned slot, int status, const char *err)
{
	struct tally_agent *a = arg;
	struct agent_req *r = &a->reqs[slot];

	pthread_mutex_lock(&a->mu);
	if (status && !r->status) {
		r->status = status;
		agent_set_err(a, "%s", err);
	}
	agent_finish_req_locked(a, slot);
	pthread_mutex_unlock(&a->mu);
}

/* One partition of request `slot` ends with `status` outside the network's normal course:
 * the request ends without its copy back when it was the last. */
static void drop_part_locked(struct tally_agent *a, unsigned slot, int status)
{
	struct agent_req *r = &a->reqs[slot];

	if (!r->status)
		r->status = status;
	if (--r->left == 0)
		agent_finish_req_locked(a, slot);
}

void agent_fail_all_locked(struct tally_agent *a, int status)
{
	struct agent_sched_item it;

	while (a->sched.n) {
		agent_sched_pop(&a->sched, &it);
		drop_part_locked(a, it.req, status);
	}
	for (unsigned i = 0; i < a->nflight; i++)
		drop_part_locked(a, a->flight[i].req, status);
	a->nflight = 0;
	a->inflight_bytes = 0;
}

void agent_cancel_pending_locked(struct tally_agent *a)
{
	for (unsigned s = 0; a->reqs && s < a->cfg.max_handles; s++) {
		if (a->reqs[s].state != REQ_PENDING)
			continue;
		if (!a->reqs[s].status)
			a->reqs[s].status = -ECANCELED;
		agent_finish_req_locked(a, s);
	}
}
