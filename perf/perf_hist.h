/* SPDX-License-Identifier: Apache-2.0
 * perf_hist.h — a log-linear latency histogram (as HdrHistogram): 16 linear sub-buckets per
 * power of two, so a percentile is at most 1/16 (6.25%) above the true value. All storage is
 * inside the struct: recording costs no allocation and no syscall (the generator's path).
 */
#ifndef PERF_HIST_H
#define PERF_HIST_H

#include <stdint.h>

#define PH_SUB_BITS 4u
#define PH_SUB (1u << PH_SUB_BITS)
#define PH_BUCKETS (PH_SUB + (64u - PH_SUB_BITS) * PH_SUB)

struct ph_hist {
	uint64_t n, min, max;
	double sum;
	uint64_t b[PH_BUCKETS];
};

void ph_reset(struct ph_hist *h);
/* Bucket of a value, and the largest value that falls into bucket i. */
unsigned ph_bucket(uint64_t v);
uint64_t ph_upper(unsigned i);

static inline void ph_record(struct ph_hist *h, uint64_t v)
{
	h->b[ph_bucket(v)]++;
	h->n++;
	h->sum += (double)v;
	if (v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
}

/* The p-th percentile (0 < p <= 100): the upper bound of the bucket that holds the
 * ceil(p/100 * n)-th smallest value, never above max; 0 for an empty histogram. */
uint64_t ph_percentile(const struct ph_hist *h, double p);
/* Add every count of src into dst (trials of one step). */
void ph_merge(struct ph_hist *dst, const struct ph_hist *src);

#endif
