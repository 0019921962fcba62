/* SPDX-License-Identifier: Apache-2.0
 * perf_ndr.h — RFC 2544-style rate search (as FD.io CSIT's MLRsearch, simplified): binary
 * search over the offered push rate for the highest rate with no loss and no retransmission
 * (NDR) and for the highest with at most pdr_loss of the pushes' RESULTs missing (PDR).
 * Every step runs `trials` trials; a step passes only if every trial passes.
 */
#ifndef PERF_NDR_H
#define PERF_NDR_H

#include <stdint.h>

/* What one trial at one offered rate measured. */
struct pn_trial {
	double rate;       /* offered pushes/s asked for */
	double offered;    /* pushes/s the generator actually offered */
	double accepted;   /* pushes/s whose RESULTs came back */
	uint64_t expected; /* RESULTs expected */
	uint64_t missing;  /* RESULTs that never came */
	uint64_t retx;     /* retransmissions (the generator sends none; a driver may) */
	uint64_t bad;      /* RESULTs with a bad CRC or a wrong sum: a trial with any fails */
};

/* Run one trial at `rate` pushes/s; 0, or negative errno (the search stops with it). */
typedef int (*pn_trial_fn)(void *ctx, double rate, struct pn_trial *t);

struct pn_opts {
	double lo, hi;     /* search bounds, pushes/s (hi: the line rate or more) */
	unsigned steps;    /* bisection steps per criterion after the bound checks */
	unsigned trials;   /* trials per step */
	double pdr_loss;   /* PDR's loss ratio, 0.005 */
	double min_offer;  /* a trial counts only if offered >= min_offer x rate (0.95): else
			    * the generator, not the device, was the limit, and it fails */
};

struct pn_result {
	double ndr, pdr;           /* found rates (0: not even lo passed) */
	struct pn_trial ndr_t, pdr_t; /* the worst trial at each found rate */
	unsigned runs;             /* trials run */
	unsigned gen_limited;      /* trials failed because the generator offered too little:
				    * if any, a found rate is a lower bound of the device's */
};

/* Loss ratio of a trial: missing / expected (1 when nothing was expected). */
double pn_loss(const struct pn_trial *t);
/* Search: 0, -EINVAL on bad options, or the trial function's error. */
int pn_search(const struct pn_opts *o, pn_trial_fn fn, void *ctx, struct pn_result *r);

#endif
