/* SPDX-License-Identifier: Apache-2.0
 * worker_data.h — seeded gradients of tally-worker and tally-perf line, and their reference
 * sums. Element i of (seed, rank, key, round) is a pure function of those numbers, so every
 * worker can compute every other worker's data and the exact expected sum.
 */
#ifndef WORKER_DATA_H
#define WORKER_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "tally_sum.h"

enum wd_values {
	WD_RANDOM = 0, /* f32 mantissas over [-16, 16): sums depend on the order (bounded) */
	WD_EXACT = 1,  /* few significant bits: every order gives the same f32 sum */
};

struct wd_gen {
	uint64_t seed;
	enum tally_dtype dtype;
	enum wd_values values;
};

/* Fill n elements (wire dtype) of rank's data for (key, round), starting at element `first`. */
void wd_fill(const struct wd_gen *g, uint32_t rank, uint32_t key, uint32_t round, size_t first,
	     size_t n, void *out);

struct wd_check {
	uint64_t checked;      /* elements compared */
	uint64_t mismatches;
	double max_err;        /* largest |got - reference| seen */
	double max_err_ratio;  /* largest |got - reference| / bound (bounded mode) */
	char first[256];       /* the first mismatch, described */
};

/* Compare `got` (n elements of the wire dtype, key elements [first, first+n)) with the sum
 * over ranks 0..world-1. bit_exact: compare against the rank-order f32 sum converted to the
 * wire dtype bit for bit (deterministic keys, exact values, i32); otherwise within the bound
 * (W-1)·2^-24·Σ|x| of the f32 sum plus half an ulp of the wire dtype. */
void wd_verify(const struct wd_gen *g, uint32_t world, uint32_t key, uint32_t round,
	       size_t first, size_t n, const void *got, int bit_exact, struct wd_check *chk);

#endif
