/* SPDX-License-Identifier: Apache-2.0
 * agent_failover.c — keys move off appliances that are gone (gpu_agent/README.md
 * "Failover"). With several appliances the client sessions fail fast: an operation on an
 * appliance silent for dead_ms ends with -EHOSTDOWN, one refused by a draining appliance
 * with -ESHUTDOWN. Neither is an error here.
 *  - Dead (-EHOSTDOWN): the appliance joins this rank's dead set, which goes to the
 *    survivors (TALLY_OP_GONE); they pass it on to every rank of the job, so ranks that
 *    have not noticed move too. Every key of a dead appliance moves at once.
 *  - Draining (-ESHUTDOWN): a draining appliance still finishes the rounds it started and
 *    refuses the others, the same way for every rank, so a key moves when a round of it
 *    is refused, and not before (a rank that moved a key whose round the appliance had
 *    started would wait for ever on the survivor for ranks that pushed it there).
 * Where a key moves is agent_replan's, a function of the key table and the set of dead
 * and draining appliances, the same on every rank. Moved keys are REGISTERed at their new
 * appliances and the failed round is pushed again from the tensor's saved input. The
 * progress thread runs all of it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent_core.h"

struct fo_move {
	uint32_t part, appl, from, key, ckey;
	int comp;
	struct tally_register reg, creg;
};

void agent_part_reg(const struct tally_agent *a, const struct agent_tensor *t,
		    const struct agent_part *p, int comp, struct tally_register *reg,
		    uint32_t *key)
{
	size_t esz = tally_dtype_size(t->dtype);

	*reg = (struct tally_register){
		.nelems = (uint32_t)(p->bytes / esz),
		.chunk_elems = 0,
		.dtype = (uint8_t)t->dtype,
		.flags = (uint16_t)((a->cfg.deterministic ? TALLY_KEY_DETERMINISTIC : 0) |
				    (p->avg ? TALLY_KEY_AVERAGE : 0)),
		.participants = (uint16_t)a->net_world,
		.quorum = a->cfg.quorum && a->cfg.quorum < a->net_world ? a->cfg.quorum
							      : (uint16_t)a->net_world,
	};
	*key = p->key;
	if (comp)
		agent_comp_reg(a, t, p, reg, key);
}

int agent_failover_take(struct tally_agent *a, struct agent_flight *f, int rc)
{
	const struct agent_req *rq = &a->reqs[f->req];
	uint32_t all = a->plan.n >= 32 ? UINT32_MAX : (1u << a->plan.n) - 1;
	uint32_t out = a->gone | a->draining | a->gone_seen | a->drain_seen | (1u << f->appl);

	/* a compressed round cannot be pushed again: its worker error moved on already */
	if ((rc != -EHOSTDOWN && rc != -ESHUTDOWN) || a->plan.n < 2 || rq->comp ||
	    !a->tensors[rq->tensor].saved)
		return 0;
	if (out == all && rc == -ESHUTDOWN)
		return 0; /* the last appliance drains: nowhere to go (the error says so) */
	if (out == all) {
		/* never off the last one: silent is not proof of death (a stalled host), and
		 * there is nowhere else to go; push to it again and wait (a restart rejoins) */
		f->op = AGENT_OP_MOVE;
		a->moving = 1;
		return 1;
	}
	if (rc == -EHOSTDOWN) {
		a->gone_seen |= 1u << f->appl;
	} else {
		a->drain_seen |= 1u << f->appl;
		part_at(a, f->part)->evict = 1;
		a->evicted = 1;
	}
	f->op = AGENT_OP_MOVE;
	a->moving = 1;
	return 1;
}

/* Lock held: every placed part under the gone set; parts [from, to) take it at once (not
 * REGISTERed yet), the others that move are listed in *out for REGISTER. */
static int fo_plan_locked(struct tally_agent *a, unsigned from, unsigned to,
			  struct fo_move *out, unsigned *nout)
{
	struct agent_replan r;
	unsigned k = 0;

	agent_replan_begin(&r, &a->plan, a->gone | a->draining);
	for (unsigned ti = 0; ti < a->ntensors; ti++) {
		const struct agent_tensor *t = &a->tensors[ti];

		for (unsigned j = 0; j < t->nparts && t->first_part + j < to; j++) {
			unsigned pi = t->first_part + j;
			struct agent_part *p = part_at(a, pi);
			int ap = agent_replan_next(&r, p->home, p->bytes);

			if (ap < 0)
				return ap;
			/* a draining appliance keeps a key until it refuses a round of it */
			if (!(a->gone & (1u << p->home)) && !p->evict)
				ap = (int)p->home;
			if ((uint32_t)ap == p->appl)
				continue;
			if (pi >= from || !out) {
				p->appl = (uint32_t)ap;
				continue;
			}
			out[k] = (struct fo_move){.part = pi, .appl = (uint32_t)ap,
						  .from = p->appl, .comp = t->comp_keys};
			agent_part_reg(a, t, p, 0, &out[k].reg, &out[k].key);
			if (t->comp_keys)
				agent_part_reg(a, t, p, 1, &out[k].creg, &out[k].ckey);
			k++;
		}
	}
	if (nout)
		*nout = k;
	return 0;
}

int agent_failover_place(struct tally_agent *a, unsigned from)
{
	return fo_plan_locked(a, from, a->nparts, NULL, NULL);
}

/* No lock: REGISTER the moved keys at their new appliances, then move them there. */
static int fo_register(struct tally_agent *a, const struct fo_move *m, unsigned n)
{
	int rc = 0;

	for (unsigned i = 0; i < n && !rc; i++) {
		rc = a->net->register_key(a->net_ctx, m[i].appl, m[i].key, &m[i].reg, a->reg_err,
					  sizeof(a->reg_err));
		/* the sums the old appliance completed here: a rank that missed one pushes
		 * that round again to the new home, which asks us for it (NEED_RESULT) */
		if (!rc && a->net->carry)
			a->net->carry(a->net_ctx, m[i].from, m[i].appl, m[i].key);
		if (!rc && m[i].comp)
			rc = a->net->register_key(a->net_ctx, m[i].appl, m[i].ckey, &m[i].creg,
						  a->reg_err, sizeof(a->reg_err));
	}
	pthread_mutex_lock(&a->mu);
	for (unsigned i = 0; i < n && !rc; i++)
		part_at(a, m[i].part)->appl = m[i].appl;
	if (rc)
		agent_errf(a->err, sizeof(a->err), "failover: %s", a->reg_err);
	pthread_mutex_unlock(&a->mu);
	return rc;
}

/* No lock: the dead set is g, the draining set d (grown, or keys to evict). 0, or negative
 * errno (every appliance gone, or a survivor refused a moved key) with a->err set. */
static int fo_apply(struct tally_agent *a, uint32_t g, uint32_t d)
{
	struct timespec ts;
	struct fo_move *m;
	unsigned n = 0;
	int rc;

	clock_gettime(CLOCK_REALTIME, &ts);
	pthread_mutex_lock(&a->mu);
	for (unsigned i = 0; i < a->plan.n; i++)
		if (((g | d) & ~(a->gone | a->draining)) & (1u << i)) {
			a->gone_ns[i] = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
			a->st.failovers++;
		}
	int tell = g != a->gone;
	a->gone = g;
	a->draining = d;
	a->evicted = 0;
	m = calloc(a->placed ? a->placed : 1, sizeof(*m));
	rc = m ? fo_plan_locked(a, a->placed, a->placed, m, &n) : -ENOMEM;
	if (rc == -ENODEV)
		agent_errf(a->err, sizeof(a->err), "failover: every appliance is gone (dead or "
			   "draining); start one and relaunch, or add appliances to TALLY_APPLIANCES");
	pthread_mutex_unlock(&a->mu);
	if (tell && a->net->declare_gone)
		a->net->declare_gone(a->net_ctx, g);
	if (!rc)
		rc = fo_register(a, m, n);
	free(m);
	return rc;
}

/* Flights [0, n) still pending on an appliance that is gone now, their key moved: the
 * other ranks of the round push it at the key's new home (the rank that found the death
 * did, and ranks that learned it through a survivor route their next rounds there), so
 * the round is abandoned where it was and pushed again from the saved input (a live
 * appliance falsely declared dead would otherwise hold it for ever, waiting for the rank
 * that moved). A compressed round cannot be pushed again: it fails (-EHOSTDOWN), as it
 * does on the rank that found the death. */
static void fo_abandon(struct tally_agent *a, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct agent_flight *f = &a->flight[i];

		if (f->result || f->op < 0 || !(a->gone & (1u << f->appl)) ||
		    part_at(a, f->part)->appl == f->appl)
			continue;
		const struct agent_req *rq = &a->reqs[f->req];
		int rc = a->net->abandon(a->net_ctx, f->appl, f->op);

		if (rc == 1)
			continue; /* it ended meanwhile: tested as usual */
		if (rc == 0 && !rq->comp && a->tensors[rq->tensor].saved) {
			f->op = AGENT_OP_MOVE;
			a->moving = 1;
			continue;
		}
		f->result = rc < 0 ? rc : -EHOSTDOWN;
		agent_errf(a->err, sizeof(a->err), "failover: tensor '%s' key %u on appliance "
			   "%u%s, which is gone: %s", a->tensors[rq->tensor].name,
			   part_at(a, f->part)->key, f->appl, a->net_tag,
			   rc < 0 ? "its open round could not be abandoned there"
				  : "its open round cannot be pushed again (a compressed round)");
	}
}

void agent_failover_poll(struct tally_agent *a, unsigned n)
{
	uint32_t all = a->plan.n >= 32 ? UINT32_MAX : (1u << a->plan.n) - 1;
	uint32_t g = a->gone | a->gone_seen, d = a->draining | a->drain_seen;
	int rc = 0;

	if (a->plan.n < 2)
		return;
	if (a->net->gone)
		g |= a->net->gone(a->net_ctx) & all;
	a->gone_seen = a->drain_seen = 0;
	if (g != a->gone || d != a->draining || a->evicted) {
		rc = fo_apply(a, g, d);
		if (!rc && a->net->abandon)
			fo_abandon(a, n);
	}
	if (!a->moving)
		return;
	a->moving = 0;
	for (unsigned i = 0; i < n; i++) {
		struct agent_flight *f = &a->flight[i];

		if (f->op != AGENT_OP_MOVE || f->result)
			continue;
		struct agent_part *p = part_at(a, f->part);
		const struct agent_req *rq = &a->reqs[f->req];
		const struct agent_tensor *t = &a->tensors[rq->tensor];
		if (rc) {
			f->result = rc == -ENODEV ? -EHOSTDOWN : rc;
			continue;
		}
		/* the saved input: what this rank owes the sum (its output may hold part of
		 * a result already) */
		f->appl = p->appl;
		f->op = agent_net_start(a, rq, p->appl, p->key, f->round, t->saved + p->off,
					rq->buf + p->off);
		if (f->op < 0)
			f->result = f->op;
		else
			a->moved_pushes++;
	}
}
