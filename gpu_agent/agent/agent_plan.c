/* SPDX-License-Identifier: Apache-2.0
 * agent_plan.c — where keys go: the BytePS optimal split between dedicated and colocated
 * summation services, weighted by link rate, and a deterministic greedy placement (every
 * rank declares the same partitions in the same order, so every rank places them alike). */
#include <errno.h>
#include <stddef.h>

#include "agent_internal.h"
#include "tally_agent.h"

int tally_agent_split(unsigned n, unsigned k, unsigned ncolocated, double *cpu, double *gpu)
{
	double d;

	if ((k == 0 && ncolocated == 0) || (ncolocated && n == 0))
		return -EINVAL;
	if (ncolocated == 0 || (k > 0 && n <= k)) {
		/* no colocated service, or so many dedicated ones that colocated get nothing */
		*cpu = k ? 1.0 / k : 0.0;
		*gpu = k ? 0.0 : 1.0 / ncolocated;
		return 0;
	}
	d = (double)n * n + (double)k * n - 2.0 * k;
	*cpu = 2.0 * (n - 1) / d;
	*gpu = (double)(n - k) / d;
	return 0;
}

int agent_plan_init(struct agent_plan *p, const struct tally_agent_cfg *cfg)
{
	unsigned k = 0, colo = 0;
	double cpu, gpu, sum = 0.0, mean_rate = 0.0;
	int rc;

	p->n = cfg->nappliances;
	for (unsigned i = 0; i < p->n; i++) {
		colo += cfg->appliances[i].colocated != 0;
		mean_rate += cfg->appliances[i].rate_gbps;
		p->load[i] = 0;
	}
	k = p->n - colo;
	mean_rate /= p->n;
	if ((rc = tally_agent_split(cfg->gpu_hosts ? cfg->gpu_hosts : 1, k, colo, &cpu, &gpu)))
		return rc;
	for (unsigned i = 0; i < p->n; i++) {
		p->share[i] = (cfg->appliances[i].colocated ? gpu : cpu) *
			      (cfg->appliances[i].rate_gbps / mean_rate);
		sum += p->share[i];
	}
	if (!(sum > 0.0)) {
		/* e.g. only colocated services with n <= k: fall back to the link rates */
		for (unsigned i = 0; i < p->n; i++)
			p->share[i] = cfg->appliances[i].rate_gbps / mean_rate;
		sum = 0.0;
		for (unsigned i = 0; i < p->n; i++)
			sum += p->share[i];
	}
	for (unsigned i = 0; i < p->n; i++)
		p->share[i] /= sum;
	return 0;
}

unsigned agent_plan_place(struct agent_plan *p, size_t bytes)
{
	unsigned best = 0;
	double best_v = 0.0;

	for (unsigned i = 0; i < p->n; i++) {
		double v;

		if (p->share[i] <= 0.0)
			continue;
		v = (double)(p->load[i] + bytes) / p->share[i];
		if (best_v == 0.0 || v < best_v) {
			best = i;
			best_v = v;
		}
	}
	p->load[best] += bytes;
	return best;
}
