/* SPDX-License-Identifier: Apache-2.0
 * perf_sum_base.h — `tally-perf sum`'s baseline: the plain C loops a user would write
 * (dst[i] += src[i]; dst[i] = s0[i] + s1[i] + ...), left to the compiler's vectorizer.
 * perf_sum_base.c is built twice, each copy in its own static library with its own flags
 * (perf/meson.build): "avx2" with -O3 -mavx2 -mfma, "native" with -O3 -ffast-math
 * -march=native (the -Ofast -march=native loop; built only where the compiler takes it).
 * f32 and i32 only; the reducers' other dtypes have no plain-loop counterpart.
 */
#ifndef PERF_SUM_BASE_H
#define PERF_SUM_BASE_H

#include <stddef.h>
#include <stdint.h>

struct psb_ops {
	const char *name;
	void (*f32_acc)(float *dst, const float *src, size_t n);
	void (*i32_acc)(int32_t *dst, const int32_t *src, size_t n);
	/* 1 <= k <= 64; dst aliases no source */
	void (*f32_kway)(float *dst, const float *const *src, unsigned k, size_t n);
	void (*i32_kway)(int32_t *dst, const int32_t *const *src, unsigned k, size_t n);
};

#ifdef PSB_HAVE_AVX2
extern const struct psb_ops psb_ops_avx2;
#endif
#ifdef PSB_HAVE_NATIVE
extern const struct psb_ops psb_ops_native;
#endif

#endif
