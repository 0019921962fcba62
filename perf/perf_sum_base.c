/* SPDX-License-Identifier: Apache-2.0
 * perf_sum_base.c — the baseline loops of `tally-perf sum` (see perf_sum_base.h). Compiled
 * once per flag set with PSB_SFX naming the copy; nothing here may depend on the flags but
 * the code the compiler makes of these loops. `restrict` as a user would write it, so the
 * vectorizer needs no runtime alias checks.
 */
#include "perf_sum_base.h"

#define PSB_CAT2(a, b) a##_##b
#define PSB_CAT(a, b) PSB_CAT2(a, b)
#define PSB(x) PSB_CAT(x, PSB_SFX)
#define PSB_STR2(x) #x
#define PSB_STR(x) PSB_STR2(x)

static void PSB(f32_acc)(float *restrict dst, const float *restrict src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] += src[i];
}

static void PSB(i32_acc)(int32_t *restrict dst, const int32_t *restrict src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] += src[i];
}

/* k-way as plain loops: one fused loop for the common k = 2, 3, 4; otherwise a pass of
 * a + b then one += pass per further source (what one writes without thinking about DRAM). */
#define PSB_KWAY(T, name)                                                                      \
	static void PSB(name)(T *restrict dst, const T *const *src, unsigned k, size_t n)      \
	{                                                                                      \
		const T *restrict a = src[0], *restrict b = k > 1 ? src[1] : src[0];           \
		const T *restrict c = k > 2 ? src[2] : src[0], *restrict d = k > 3 ? src[3] : src[0]; \
                                                                                               \
		switch (k) {                                                                   \
		case 1:                                                                        \
			for (size_t i = 0; i < n; i++)                                         \
				dst[i] = a[i];                                                 \
			return;                                                                \
		case 3:                                                                        \
			for (size_t i = 0; i < n; i++)                                         \
				dst[i] = a[i] + b[i] + c[i];                                   \
			return;                                                                \
		case 4:                                                                        \
			for (size_t i = 0; i < n; i++)                                         \
				dst[i] = a[i] + b[i] + c[i] + d[i];                            \
			return;                                                                \
		default:                                                                       \
			for (size_t i = 0; i < n; i++)                                         \
				dst[i] = a[i] + b[i];                                          \
			for (unsigned w = 2; w < k; w++) {                                     \
				const T *restrict s = src[w];                                  \
                                                                                               \
				for (size_t i = 0; i < n; i++)                                 \
					dst[i] += s[i];                                        \
			}                                                                      \
		}                                                                              \
	}

PSB_KWAY(float, f32_kway)
PSB_KWAY(int32_t, i32_kway)

const struct psb_ops PSB(psb_ops) = {
	.name = PSB_STR(PSB_SFX),
	.f32_acc = PSB(f32_acc),
	.i32_acc = PSB(i32_acc),
	.f32_kway = PSB(f32_kway),
	.i32_kway = PSB(i32_kway),
};
