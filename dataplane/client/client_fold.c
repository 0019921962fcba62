/* SPDX-License-Identifier: Apache-2.0
 * client_fold.c — quorum fold arithmetic. The fold buffer holds, per element, what this
 * worker still owes the sum: f32 for f32/f16/bf16 keys, i32 (wrapping) for i32 keys.
 *
 * i32: the next push carries in + fold exactly (wrapping); fold becomes 0.
 * f32: the next push carries in + fold rounded to f32; the rounding error (TwoSum, exact)
 * stays in the fold.
 * f16 and bf16: in + fold is formed in f32 and rounded to the wire dtype for the push;
 * the rounding error (exactly representable in f32) stays in the fold buffer and rides
 * along with later pushes (error feedback), so nothing is dropped silently. A sum beyond
 * the wire dtype's range is pushed as the largest finite value and the excess stays in
 * the fold, rather than pushing Inf.
 */
#include <math.h>
#include <string.h>

#include "client_int.h"

#define F16_MAX_BITS 0x7bffu   /* 65504 */
#define BF16_MAX_BITS 0x7f7fu  /* largest finite bf16 */

static bool client_fold_stage_half(bool bf, uint16_t *stage, const uint16_t *in, float *fold,
			       size_t n)
{
	bool left = false;

	for (size_t i = 0; i < n; i++) {
		float x = bf ? tally_bf16_to_f32(in[i]) : tally_f16_to_f32(in[i]);
		float s = x + fold[i];
		uint16_t hv = bf ? tally_f32_to_bf16(s) : tally_f32_to_f16(s);
		float back = bf ? tally_bf16_to_f32(hv) : tally_f16_to_f32(hv);

		if (isinf(back) && isfinite(s)) {
			hv = (uint16_t)((s < 0 ? 0x8000u : 0) | (bf ? BF16_MAX_BITS : F16_MAX_BITS));
			back = bf ? tally_bf16_to_f32(hv) : tally_f16_to_f32(hv);
		}
		stage[i] = hv;
		/* NaN/Inf inputs pass through; nothing finite is left to carry for them */
		fold[i] = isfinite(s) ? s - back : 0.0f;
		if (fold[i] != 0.0f)
			left = true;
	}
	return left;
}

/* stage = in + fold; fold = the rounding error of that addition (TwoSum, exact). */
static bool client_fold_stage_f32(float *stage, const float *in, float *fold, size_t n)
{
	bool left = false;

	for (size_t i = 0; i < n; i++) {
		float a = in[i], b = fold[i];
		float s = a + b, bb = s - a, e = (a - (s - bb)) + (b - bb);

		stage[i] = s;
		fold[i] = isfinite(s) ? e : 0.0f;
		if (fold[i] != 0.0f)
			left = true;
	}
	return left;
}

bool client_fold_stage(enum tally_dtype dt, void *stage, const void *in, void *fold, size_t n)
{
	switch (dt) {
	case TALLY_DT_F32:
		return client_fold_stage_f32(stage, in, fold, n);
	case TALLY_DT_I32:
		tally_sum_i32_add(stage, in, fold, n);
		memset(fold, 0, n * 4);
		return false;
	case TALLY_DT_F16:
		return client_fold_stage_half(false, stage, in, fold, n);
	case TALLY_DT_BF16:
		return client_fold_stage_half(true, stage, in, fold, n);
	default:
		return false;
	}
}

void client_fold_add(enum tally_dtype dt, void *fold, const void *pushed, size_t n)
{
	tally_sum_acc(dt, fold, pushed, n);
}

void client_fold_unstage(enum tally_dtype dt, void *fold, const void *stage, const void *in,
		     size_t n)
{
	float *f = fold;

	if (dt == TALLY_DT_I32) {
		uint32_t *fi = fold;
		const uint32_t *s = stage, *x = in;

		for (size_t i = 0; i < n; i++)
			fi[i] += s[i] - x[i];
		return;
	}
	/* in double: exact for the operands the stage step produced */
	for (size_t i = 0; i < n; i++) {
		double s, x;

		if (dt == TALLY_DT_F32) {
			s = ((const float *)stage)[i];
			x = ((const float *)in)[i];
		} else if (dt == TALLY_DT_F16) {
			s = tally_f16_to_f32(((const uint16_t *)stage)[i]);
			x = tally_f16_to_f32(((const uint16_t *)in)[i]);
		} else {
			s = tally_bf16_to_f32(((const uint16_t *)stage)[i]);
			x = tally_bf16_to_f32(((const uint16_t *)in)[i]);
		}
		f[i] = isfinite(s) ? (float)((double)f[i] + (s - x)) : f[i];
	}
}
