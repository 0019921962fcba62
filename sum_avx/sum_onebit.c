/* SPDX-License-Identifier: Apache-2.0
 * sum_onebit.c — the 1-bit compression reducers, scalar path (the reference loops of
 * sum_onebit.h from element 0), and the norm's final fold and scale shared by every path:
 * one copy of that code, so it cannot differ between paths.
 */
#include <emmintrin.h>

#include "sum_onebit.h"

double sum_sq_finish(const double part[SUM_SQ_LANES])
{
	double p[SUM_SQ_LANES];

	memcpy(p, part, sizeof(p));
	for (unsigned w = SUM_SQ_LANES / 2; w; w /= 2)
		for (unsigned j = 0; j < w; j++)
			p[j] = p[j] + p[j + w];
	if (p[0] != p[0]) {
		uint64_t dn = 0xfff8000000000000ull; /* x86's default NaN, f64 */

		memcpy(&p[0], &dn, sizeof(dn));
	}
	return p[0];
}

/* SQRTSD straight: sqrt() would need libm for its errno path, and it is correctly rounded
 * either way. */
static double onebit_sqrt(double x)
{
	return _mm_cvtsd_f64(_mm_sqrt_sd(_mm_setzero_pd(), _mm_set_sd(x)));
}

float sum_onebit_scale(double sumsq, size_t n)
{
	if (n == 0)
		return 0.0f;
	if (sumsq != sumsq)
		return sum_bits_f32(0xffc00000u);
	/* DeepSpeed's norm / sqrt(numel), in f64 (n converts exactly below 2^53) */
	return (float)(onebit_sqrt(sumsq) / onebit_sqrt((double)n));
}

static void scalar_sign_pack(uint8_t *bits, const float *src, size_t n)
{
	sum_pack_from(bits, src, 0, n);
}

static void scalar_sign_unpack(float *dst, const uint8_t *bits, size_t n, float scale)
{
	sum_unpack_from(dst, bits, 0, n, scale, 0);
}

static void scalar_sign_unpack_acc(float *acc, const uint8_t *bits, size_t n, float scale)
{
	sum_unpack_from(acc, bits, 0, n, scale, 1);
}

static double scalar_f32_sumsq(const float *src, size_t n)
{
	double part[SUM_SQ_LANES] = { 0 };

	sum_sq_from(part, src, 0, n);
	return sum_sq_finish(part);
}

static float scalar_onebit_compress(uint8_t *bits, float *err, const float *src, size_t n)
{
	double part[SUM_SQ_LANES] = { 0 };
	float scale;

	if (n == 0)
		return 0.0f;
	sum_ef_pass1_from(bits, err, part, src, 0, n);
	scale = sum_onebit_scale(sum_sq_finish(part), n);
	sum_ef_pass2_from(err, 0, n, scale);
	return scale;
}

const struct sum_onebit_ops sum_onebit_scalar = {
	.sign_pack = scalar_sign_pack,
	.sign_unpack = scalar_sign_unpack,
	.sign_unpack_acc = scalar_sign_unpack_acc,
	.f32_sumsq = scalar_f32_sumsq,
	.onebit_compress = scalar_onebit_compress,
};
