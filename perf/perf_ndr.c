/* SPDX-License-Identifier: Apache-2.0
 * perf_ndr.c — NDR/PDR binary search (perf_ndr.h).
 */
#include <errno.h>
#include <string.h>

#include "perf_ndr.h"

double pn_loss(const struct pn_trial *t)
{
	return t->expected ? (double)t->missing / (double)t->expected : 1.0;
}

static int pn_pass(const struct pn_opts *o, const struct pn_trial *t, int ndr,
		   unsigned *gen_limited)
{
	double max_loss = o->pdr_loss;

	if (t->offered < o->min_offer * t->rate) {
		(*gen_limited)++;
		return 0;
	}
	if (t->bad)
		return 0;
	if (ndr)
		return t->expected && !t->missing && !t->retx;
	return t->expected && pn_loss(t) <= max_loss;
}

/* All trials at `rate`: 1 pass, 0 fail, <0 error; *worst = the trial with most loss. */
static int pn_step(const struct pn_opts *o, pn_trial_fn fn, void *ctx, double rate, int ndr,
		   struct pn_trial *worst, unsigned *runs, unsigned *gen_limited)
{
	int pass = 1;

	memset(worst, 0, sizeof(*worst));
	for (unsigned i = 0; i < o->trials; i++) {
		struct pn_trial t;
		int rc;

		memset(&t, 0, sizeof(t));
		t.rate = rate;
		rc = fn(ctx, rate, &t);
		(*runs)++;
		if (rc < 0)
			return rc;
		if (!i || pn_loss(&t) > pn_loss(worst) || t.bad > worst->bad)
			*worst = t;
		if (!pn_pass(o, &t, ndr, gen_limited)) {
			*worst = t;
			pass = 0;
			break; /* one failed trial fails the step: no need for the others */
		}
	}
	return pass;
}

static int pn_one(const struct pn_opts *o, double lo, pn_trial_fn fn, void *ctx, int ndr,
		  double *found, struct pn_trial *ft, unsigned *runs, unsigned *gl)
{
	double hi = o->hi;
	struct pn_trial t;
	int rc;

	*found = 0;
	memset(ft, 0, sizeof(*ft));
	rc = pn_step(o, fn, ctx, hi, ndr, &t, runs, gl);
	if (rc < 0)
		return rc;
	if (rc) { /* the upper bound passes: the generator did not find the limit */
		*found = hi;
		*ft = t;
		return 0;
	}
	rc = pn_step(o, fn, ctx, lo, ndr, &t, runs, gl);
	if (rc <= 0)
		return rc < 0 ? rc : 0;
	*found = lo;
	*ft = t;
	for (unsigned s = 0; s < o->steps; s++) {
		double mid = (lo + hi) / 2;

		rc = pn_step(o, fn, ctx, mid, ndr, &t, runs, gl);
		if (rc < 0)
			return rc;
		if (rc) {
			lo = mid;
			*found = mid;
			*ft = t;
		} else {
			hi = mid;
		}
	}
	return 0;
}

int pn_search(const struct pn_opts *o, pn_trial_fn fn, void *ctx, struct pn_result *r)
{
	int rc;

	memset(r, 0, sizeof(*r));
	if (!fn || !o->trials || o->lo <= 0 || o->hi < o->lo || o->pdr_loss < 0 ||
	    o->pdr_loss >= 1 || o->min_offer < 0 || o->min_offer > 1)
		return -EINVAL;
	rc = pn_one(o, o->lo, fn, ctx, 1, &r->ndr, &r->ndr_t, &r->runs, &r->gen_limited);
	if (rc)
		return rc;
	/* the NDR passed PDR's test too: search above it (as MLRsearch) */
	rc = pn_one(o, r->ndr > o->lo ? r->ndr : o->lo, fn, ctx, 0, &r->pdr, &r->pdr_t, &r->runs,
		    &r->gen_limited);
	if (!rc && r->ndr > r->pdr) { /* PDR's lower bound failed this time: noise */
		r->pdr = r->ndr;
		r->pdr_t = r->ndr_t;
	}
	return rc;
}
