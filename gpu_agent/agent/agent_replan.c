/* SPDX-License-Identifier: Apache-2.0
 * agent_replan.c — where keys go when appliances are gone: a pure function of the key table
 * (every part's home appliance and bytes, in declaration order, the same on every rank) and
 * the gone set, so every rank that knows the same gone set computes the same placement
 * without talking to the others. Parts whose home survives stay; each part of a gone home
 * goes, in part order, to the survivor with the least load per share (the same greedy as
 * agent_plan_place, over the survivors), counting every earlier part. A part's answer
 * depends only on the parts before it, so tensors declared after a failover get what a
 * recomputation over the whole table would give them. */
#include <errno.h>

#include "agent_internal.h"

void agent_replan_begin(struct agent_replan *r, const struct agent_plan *p, uint32_t gone)
{
	r->n = p->n;
	r->gone = gone;
	for (unsigned i = 0; i < p->n; i++) {
		r->share[i] = p->share[i];
		r->load[i] = 0;
	}
}

int agent_replan_next(struct agent_replan *r, unsigned home, uint64_t bytes)
{
	int best = -ENODEV;
	double best_v = 0.0;

	if (home < r->n && !(r->gone & (1u << home))) {
		r->load[home] += bytes;
		return (int)home;
	}
	for (unsigned i = 0; i < r->n; i++) {
		double v;

		if ((r->gone & (1u << i)) || r->share[i] <= 0.0)
			continue;
		v = (double)(r->load[i] + bytes) / r->share[i];
		if (best < 0 || v < best_v) {
			best = (int)i;
			best_v = v;
		}
	}
	if (best >= 0)
		r->load[best] += bytes;
	return best;
}
