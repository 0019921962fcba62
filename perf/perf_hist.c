/* SPDX-License-Identifier: Apache-2.0
 * perf_hist.c — log-linear histogram (perf_hist.h).
 */
#include <math.h>
#include <string.h>

#include "perf_hist.h"

void ph_reset(struct ph_hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
}

unsigned ph_bucket(uint64_t v)
{
	unsigned e;

	if (v < PH_SUB)
		return (unsigned)v;
	e = 63u - (unsigned)__builtin_clzll(v); /* >= PH_SUB_BITS */
	return PH_SUB + (e - PH_SUB_BITS) * PH_SUB +
	       (unsigned)((v >> (e - PH_SUB_BITS)) & (PH_SUB - 1));
}

uint64_t ph_upper(unsigned i)
{
	unsigned e, sub, shift;

	if (i < PH_SUB)
		return i;
	e = (i - PH_SUB) / PH_SUB + PH_SUB_BITS;
	sub = (i - PH_SUB) % PH_SUB;
	shift = e - PH_SUB_BITS;
	/* the top bucket's bound is 2^64 - 1: compute it without overflowing */
	return ((uint64_t)(PH_SUB + sub) << shift) + (((uint64_t)1 << shift) - 1);
}

uint64_t ph_percentile(const struct ph_hist *h, double p)
{
	uint64_t want, seen = 0;

	if (!h->n)
		return 0;
	want = (uint64_t)ceil(p / 100.0 * (double)h->n);
	if (want < 1)
		want = 1;
	if (want > h->n)
		want = h->n;
	for (unsigned i = 0; i < PH_BUCKETS; i++) {
		seen += h->b[i];
		if (seen >= want) {
			uint64_t u = ph_upper(i);

			return u < h->max ? u : h->max;
		}
	}
	return h->max;
}

void ph_merge(struct ph_hist *dst, const struct ph_hist *src)
{
	for (unsigned i = 0; i < PH_BUCKETS; i++)
		dst->b[i] += src->b[i];
	dst->n += src->n;
	dst->sum += src->sum;
	if (src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
}
