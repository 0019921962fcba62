/* SPDX-License-Identifier: Apache-2.0
 * agent_progress.c — the progress thread, one step a function: REGISTER declarations;
 * schedule (take partitions off the queue in the global order, within the credit window);
 * start them on the network; poll the network; average what came back; retire finished
 * partitions; copy back and complete requests whose last partition is in; fail those past
 * their deadline (agent_expire_due_locked, every AGENT_EXPIRE_EVERY_NS). It owns the
 * network; the tables are shared with the API side under the agent's mutex. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent_core.h"
#include "tally_sum.h"

/* Divide n bytes of dtype by world (f32, f16, bf16; integers untouched). */
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

	/* declared after a failover: its parts go where the re-plan puts them */
	if ((a->gone | a->draining) && !a->reg_comp &&
	    (rc = agent_failover_place(a, t.first_part)))
		agent_errf(a->reg_err, sizeof(a->reg_err), "every appliance is gone (dead or "
			   "draining): no appliance for its keys");
	pthread_mutex_unlock(&a->mu);
	for (unsigned i = 0; i < t.nparts && !rc; i++) {
		struct agent_part *p = part_at(a, t.first_part + i); /* blocks never move */
		struct tally_register reg;
		uint32_t key;

		/* f16 / bf16 averages taken by the appliance on its f32 sum, rounded once */
		if (!a->reg_comp)
			p->avg = t.average && agent_avg_ok(a, p->appl) &&
				 (t.dtype == TALLY_DT_F16 || t.dtype == TALLY_DT_BF16);
		agent_part_reg(a, &t, p, a->reg_comp, &reg, &key);
		rc = a->net->register_key(a->net_ctx, p->appl, key, &reg, a->reg_err,
					  sizeof(a->reg_err));
	}
	pthread_mutex_lock(&a->mu);
	if (!rc && !a->reg_comp && t.first_part + t.nparts > a->placed)
		a->placed = t.first_part + t.nparts;
	a->reg_rc = rc;
	pthread_cond_broadcast(&a->done);
}

/* May the queue's head start without breaking the global order? Every rank must start
 * partitions in one order: a chunk completes only when every worker pushed it, so workers
 * whose windows (here and in the client, 64 chunks a core) hold different chunks wait on
 * each other for ever. The order is round by round (a tensor's n-th push_pull is round n),
 * within a round by (priority, declaration), partitions in index order. The queue already
 * yields that order among what was submitted; what this adds is waiting for what was not
 * submitted yet: round r of tensor t goes only when every ordered tensor before it has had
 * its round r submitted (it sorts first, so it has started), and every one after it its
 * round r-1. Round 0 (first pushes) goes in declaration order, as tensors may be declared
 * lazily at their first push, at different times on different ranks. */
static int in_order(const struct tally_agent *a, const struct agent_sched_item *top)
{
	const struct agent_tensor *t = &a->tensors[a->reqs[top->req].tensor];
	uint64_t r = top->seq;

	if (!t->ordered || a->order_mode == TALLY_AGENT_ORDER_SUBMIT)
		return 1;
	for (unsigned i = 0; i < a->ntensors; i++) {
		const struct agent_tensor *o = &a->tensors[i];

		if (o == t || !o->ordered || o->busy < 0)
			continue;
		int first = r == 0 ? o->first_part < t->first_part :
			    o->priority < t->priority ||
			    (o->priority == t->priority && o->first_part < t->first_part);
		if (r == 0 && !first)
			continue;
		if (first ? o->subm <= r : o->subm < r)
			return 0;
	}
	return 1;
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

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Schedule: move what the queue allows into flight (lock held); the start of the new
 * entries is left to start_new. */
static void schedule_locked(struct tally_agent *a)
{
	const struct agent_sched_item *top;
	struct agent_sched_item it;

	while ((top = agent_sched_peek(&a->sched))) {
		const struct agent_part *p = part_at(a, top->part);

		if (!in_order(a, top)) {
			if (!a->order_blocked)
				a->st.order_waits++;
			a->order_blocked = 1;
			break;
		}
		a->order_blocked = 0;
		/* With one start order on every rank the partitions in flight here are a
		 * prefix-closed part of it, so waiting for credits cannot deadlock: the oldest
		 * one in flight on the slowest rank was started by all. (The former overdraft
		 * after credit_stall_ms made the order timing-dependent.) */
		if (!agent_sched_may_start(a->inflight_bytes, p->bytes, a->cfg.credit_bytes)) {
			if (!a->credit_blocked)
				a->st.credit_waits++;
			a->credit_blocked = 1;
			break;
		}
		if (ensure_flight_cap(a))
			break;
		agent_sched_pop(&a->sched, &it);
		a->flight[a->nflight++] = (struct agent_flight){.op = -1, .req = it.req, .part = it.part};
		a->inflight_bytes += p->bytes;
		a->credit_blocked = 0;
		a->last_progress_ns = now_ns();
		if (a->inflight_bytes > a->st.max_inflight_bytes)
			a->st.max_inflight_bytes = a->inflight_bytes;
	}
}

/* Start: flight entries [from, to) go on the network (no lock: the flight array is only
 * resized or reordered by this thread, and entries below nflight stay put until we relock). */
static void start_new(struct tally_agent *a, unsigned from, unsigned to)
{
	for (unsigned i = from; i < to; i++) {
		struct agent_flight *f = &a->flight[i];
		struct agent_part *p = part_at(a, f->part);
		struct agent_req *rq = &a->reqs[f->req];
		uint8_t *b = rq->buf + p->off;

		f->appl = p->appl;
		if (rq->comp) {
			f->op = agent_comp_start(a, &a->tensors[rq->tensor], p, rq->buf,
						 &a->push_bytes);
		} else {
			struct agent_tensor *t = &a->tensors[rq->tensor];
			const uint8_t *in = b;

			/* several appliances: keep the input until it is summed, for a failover */
			if (t->saved) {
				memcpy(t->saved + p->off, b, p->bytes);
				in = t->saved + p->off;
			}
			f->round = p->round;
			f->op = agent_net_start(a, rq, p->appl, p->key, p->round, in, b);
			p->round++;
			a->push_bytes += p->bytes;
		}
		if (f->op < 0) {
			f->result = f->op;
			agent_errf(a->err, sizeof(a->err), "key %u round %u on appliance %u%s: %s",
				   p->key, (rq->comp ? p->cround : p->round) - 1, p->appl,
				   a->net_tag, a->net->strerror(a->net_ctx, p->appl));
		}
	}
}

/* Average: a partition's sum divided by the global world size, if its tensor averages. */
static int average_part(struct tally_agent *a, const struct agent_flight *f)
{
	struct agent_req *r = &a->reqs[f->req];
	const struct agent_tensor *t = &a->tensors[r->tensor];
	const struct agent_part *p = part_at(a, f->part);

	if (r->comp && agent_comp_finish(a, t, p, r->buf))
		return -EIO;
	/* p->avg: the appliance averaged; a codec's server stage may have averaged already */
	if (t->average && !p->avg && !(r->comp && agent_comp_averages(t)))
		average(r->buf + p->off, p->bytes, t->dtype, a->cfg.world_size);
	return 0;
}

/* Poll: drive the network, then test flight entries [0, n) that are still pending (no
 * lock, as start_new); what came back is averaged at once. */
static void poll_flight(struct tally_agent *a, unsigned n)
{
	a->net->progress(a->net_ctx, 200000);
	for (unsigned i = 0; i < n; i++) {
		struct agent_flight *f = &a->flight[i];
		struct agent_part *p = part_at(a, f->part);

		if (f->result || f->op == AGENT_OP_MOVE)
			continue;
		f->result = a->net->test(a->net_ctx, f->appl, f->op);
		if (f->result < 0 && agent_failover_take(a, f, f->result))
			f->result = 0; /* pushed again where its key moves (agent_failover_poll) */
		else if (f->result < 0)
			agent_errf(a->err, sizeof(a->err), "tensor '%s'%s key %u on appliance %u "
				   "(%s:%u): %s", a->tensors[a->reqs[f->req].tensor].name, a->net_tag,
				   p->key, f->appl, a->cfg.appliances[f->appl].host,
				   a->cfg.appliances[f->appl].port,
				   a->net->strerror(a->net_ctx, f->appl));
		else if (f->result == 1 && average_part(a, f) < 0) {
			f->result = -EIO;
			agent_errf(a->err, sizeof(a->err), "tensor '%s' key %u: the codec refused "
				   "its RESULT", a->tensors[a->reqs[f->req].tensor].name, p->key);
		}
	}
}

/* Complete: retire finished flight entries (lock held); a request whose last partition is
 * in goes through the stage's copy back, then is published (now, or by the stage later). */
static void complete_locked(struct tally_agent *a)
{
	uint64_t rtx = 0, excl = 0;

	a->net->stats(a->net_ctx, &rtx, &excl);
	a->st.retransmits = rtx;
	a->st.excluded = excl;
	a->st.push_bytes = a->push_bytes;
	a->st.moved_pushes = a->moved_pushes;
	if (a->net->more_stats)
		a->net->more_stats(a->net_ctx, &a->st);
	for (unsigned i = 0; i < a->plan.n; i++)
		a->live[i] = (a->gone & (1u << i)) ? TALLY_AGENT_GONE :
			     (a->draining & (1u << i)) ? TALLY_AGENT_DRAINING :
			     a->net->liveness ? a->net->liveness(a->net_ctx, i) : TALLY_AGENT_UP;
	for (unsigned i = 0; i < a->plan.n; i++)
		a->gso[i] = a->net->gso ? a->net->gso(a->net_ctx, i) : TALLY_AGENT_GSO_NONE;
	for (unsigned i = 0; i < a->nflight;) {
		struct agent_flight f = a->flight[i];
		struct agent_req *r = &a->reqs[f.req];

		if (f.result == 0) {
			i++;
			continue;
		}
		a->flight[i] = a->flight[--a->nflight];
		a->inflight_bytes -= part_at(a, f.part)->bytes;
		a->last_progress_ns = now_ns();
		a->st.partitions++;
		a->st.bytes += part_at(a, f.part)->bytes;
		if (f.result < 0 && !r->status)
			r->status = f.result;
		if (--r->left == 0 && !agent_copy_back_locked(a, f.req))
			agent_finish_req_locked(a, f.req);
	}
}

/* Nothing in flight: sleep until woken, or until the next deadline check while partitions
 * wait in the queue (a stalled start order or credit window must still time out). */
static void idle_locked(struct tally_agent *a, uint64_t next_expiry)
{
	struct timespec ts = {.tv_sec = (time_t)(next_expiry / 1000000000u),
			      .tv_nsec = (long)(next_expiry % 1000000000u)};

	if (a->sched.n)
		pthread_cond_timedwait(&a->wake, &a->mu, &ts); /* wake is CLOCK_MONOTONIC */
	else
		pthread_cond_wait(&a->wake, &a->mu);
}

void *agent_progress_main(void *arg)
{
	struct tally_agent *a = arg;
	uint64_t next_expiry = 0;

	pthread_mutex_lock(&a->mu);
	for (;;) {
		if (a->reg_tensor >= 0 && a->reg_rc == 1) {
			do_register(a);
			continue;
		}
		if (a->stop)
			break;
		uint64_t now = now_ns();
		if (now >= next_expiry) {
			agent_expire_due_locked(a);
			next_expiry = now + AGENT_EXPIRE_EVERY_NS;
			continue; /* an expiry may have dropped the lock */
		}
		unsigned first_new = a->nflight;
		schedule_locked(a);
		if (a->nflight == 0) {
			idle_locked(a, next_expiry);
			continue;
		}
		unsigned nflight = a->nflight;
		pthread_mutex_unlock(&a->mu);
		start_new(a, first_new, nflight);
		poll_flight(a, nflight);
		agent_failover_poll(a, nflight);
		pthread_mutex_lock(&a->mu);
		complete_locked(a);
	}
	agent_fail_all_locked(a, -ECANCELED);
	pthread_mutex_unlock(&a->mu);
	return NULL;
}
