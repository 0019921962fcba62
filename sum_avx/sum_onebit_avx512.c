/* SPDX-License-Identifier: Apache-2.0
 * sum_onebit_avx512.c — the 1-bit compression reducers, AVX-512 F/BW/VL path (built with the
 * flags of sum_avx512.c). A sign is one unsigned compare into a mask register (16 bits = 2
 * bytes of the packed stream); ±scale is a blend on such a mask. Tails are masked. The sum of
 * squares keeps the 32 f64 lanes of sum_onebit.h in four zmm (elements 32q + 0..7, 8..15,
 * 16..23, 24..31); masked-off lanes add +0, which changes no partial sum.
 */
#include <immintrin.h>

#include "sum_onebit.h"

#define O5_INLINE static inline __attribute__((always_inline))

static inline __mmask16 o5_mask(size_t r)
{
	return r >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << r) - 1u);
}

/* sum_sign_bit of 16 lanes */
O5_INLINE __mmask16 o5_signs(__m512 c)
{
	return _mm512_cmple_epu32_mask(_mm512_castps_si512(c), _mm512_set1_epi32((int)0x80000000u));
}

/* Squares of 16 f32 lanes into two f64 accumulators (exact squares; only the add rounds). */
O5_INLINE void o5_sq(__m512 c, __m512d *lo, __m512d *hi)
{
	__m512d a = _mm512_cvtps_pd(_mm512_castps512_ps256(c));
	__m512d b = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(c), 1)));

	*lo = _mm512_add_pd(*lo, _mm512_mul_pd(a, a));
	*hi = _mm512_add_pd(*hi, _mm512_mul_pd(b, b));
}

static void o5_sign_pack(uint8_t *bits, const float *src, size_t n)
{
	size_t i = 0;

	for (; i + 64 <= n; i += 64) {
		uint64_t b = (uint64_t)o5_signs(_mm512_loadu_ps(src + i)) |
			     (uint64_t)o5_signs(_mm512_loadu_ps(src + i + 16)) << 16 |
			     (uint64_t)o5_signs(_mm512_loadu_ps(src + i + 32)) << 32 |
			     (uint64_t)o5_signs(_mm512_loadu_ps(src + i + 48)) << 48;

		memcpy(bits + i / 8, &b, 8);
	}
	for (; i < n; i += 16) {
		__mmask16 m = o5_mask(n - i);
		uint16_t b = (uint16_t)(o5_signs(_mm512_maskz_loadu_ps(m, src + i)) & m);

		memcpy(bits + i / 8, &b, n - i >= 16 ? 2 : (n - i + 7) / 8);
	}
}

/* dst = ±scale, or acc: dst += ±scale (dst the first operand: the NaN rule). */
O5_INLINE void o5_unpack(int acc, float *dst, const uint8_t *bits, size_t n, float scale)
{
	const __m512 pos = _mm512_set1_ps(scale), neg = _mm512_set1_ps(sum_sign_val(0, scale));
	size_t i = 0;

	for (; i + 64 <= n; i += 64) {
		uint64_t b;

		memcpy(&b, bits + i / 8, 8);
#pragma GCC unroll 4
		for (int j = 0; j < 4; j++) {
			__m512 v = _mm512_mask_blend_ps((__mmask16)(b >> 16 * j), neg, pos);

			if (acc)
				v = sum_add_ps512(_mm512_loadu_ps(dst + i + 16 * j), v);
			_mm512_storeu_ps(dst + i + 16 * j, v);
		}
	}
	for (; i < n; i += 16) {
		__mmask16 m = o5_mask(n - i);
		uint16_t b = 0;
		__m512 v;

		memcpy(&b, bits + i / 8, n - i >= 16 ? 2 : (n - i + 7) / 8);
		v = _mm512_mask_blend_ps(b, neg, pos);
		if (acc)
			v = sum_add_ps512(_mm512_maskz_loadu_ps(m, dst + i), v);
		_mm512_mask_storeu_ps(dst + i, m, v);
	}
}

static void o5_sign_unpack(float *dst, const uint8_t *bits, size_t n, float scale)
{
	o5_unpack(0, dst, bits, n, scale);
}

static void o5_sign_unpack_acc(float *acc, const uint8_t *bits, size_t n, float scale)
{
	o5_unpack(1, acc, bits, n, scale);
}

static void o5_store_part(double *part, const __m512d p[4])
{
	for (int j = 0; j < 4; j++)
		_mm512_storeu_pd(part + 8 * j, p[j]);
}

/* One block of 32 elements into the four accumulators (lanes 0..7, 8..15, 16..23, 24..31):
 * the sum of squares and compress pass 1 both go through here, so they cannot differ. */
O5_INLINE void o5_sq32(__m512 c0, __m512 c1, __m512d p[4])
{
	o5_sq(c0, &p[0], &p[1]);
	o5_sq(c1, &p[2], &p[3]);
}

static double o5_f32_sumsq(const float *src, size_t n)
{
	__m512d p[4] = { _mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd(),
			 _mm512_setzero_pd() };
	double part[SUM_SQ_LANES];
	size_t i = 0;

	for (; i + 32 <= n; i += 32)
		o5_sq32(_mm512_loadu_ps(src + i), _mm512_loadu_ps(src + i + 16), p);
	if (i < n) /* masked-off lanes are +0 */
		o5_sq32(_mm512_maskz_loadu_ps(o5_mask(n - i), src + i),
			_mm512_maskz_loadu_ps(o5_mask(n - i > 16 ? n - i - 16 : 0), src + i + 16), p);
	o5_store_part(part, p);
	return sum_sq_finish(part);
}

/* c = x + e on 16 elements at i (m: the ones that exist) into err; masked-off lanes are
 * 0 + 0 = +0 and store nothing. */
O5_INLINE __m512 o5_c16(float *err, const float *src, size_t i, __mmask16 m)
{
	__m512 c = sum_add_ps512(_mm512_maskz_loadu_ps(m, src + i), _mm512_maskz_loadu_ps(m, err + i));

	_mm512_mask_storeu_ps(err + i, m, c);
	return c;
}

static void o5_ef_pass1(uint8_t *bits, float *err, double *part, const float *src, size_t n)
{
	__m512d p[4] = { _mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd(),
			 _mm512_setzero_pd() };
	size_t i = 0;

	for (; i + 32 <= n; i += 32) {
		__m512 c0 = sum_add_ps512(_mm512_loadu_ps(src + i), _mm512_loadu_ps(err + i));
		__m512 c1 = sum_add_ps512(_mm512_loadu_ps(src + i + 16), _mm512_loadu_ps(err + i + 16));
		uint32_t b = (uint32_t)o5_signs(c0) | (uint32_t)o5_signs(c1) << 16;

		_mm512_storeu_ps(err + i, c0);
		_mm512_storeu_ps(err + i + 16, c1);
		memcpy(bits + i / 8, &b, 4);
		o5_sq32(c0, c1, p);
	}
	if (i < n) {
		__mmask16 m0 = o5_mask(n - i), m1 = o5_mask(n - i > 16 ? n - i - 16 : 0);
		__m512 c0 = o5_c16(err, src, i, m0), c1 = o5_c16(err, src, i + 16, m1);
		uint32_t b = (uint32_t)(o5_signs(c0) & m0) | (uint32_t)(o5_signs(c1) & m1) << 16;

		memcpy(bits + i / 8, &b, (n - i + 7) / 8);
		o5_sq32(c0, c1, p);
	}
	o5_store_part(part, p);
}

/* err holds c: e = c + (bit ? -scale : scale). */
static void o5_ef_pass2(float *err, size_t n, float scale)
{
	const __m512 pos = _mm512_set1_ps(scale), neg = _mm512_set1_ps(sum_sign_val(0, scale));
	size_t i = 0;

	for (; i + 32 <= n; i += 32) {
		__m512 c0 = _mm512_loadu_ps(err + i), c1 = _mm512_loadu_ps(err + i + 16);

		_mm512_storeu_ps(err + i, sum_add_ps512(c0, _mm512_mask_blend_ps(o5_signs(c0), pos, neg)));
		_mm512_storeu_ps(err + i + 16,
				 sum_add_ps512(c1, _mm512_mask_blend_ps(o5_signs(c1), pos, neg)));
	}
	for (; i < n; i += 16) {
		__mmask16 m = o5_mask(n - i);
		__m512 c = _mm512_maskz_loadu_ps(m, err + i);

		_mm512_mask_storeu_ps(err + i, m, sum_add_ps512(c, _mm512_mask_blend_ps(o5_signs(c), pos, neg)));
	}
}

static float o5_onebit_compress(uint8_t *bits, float *err, const float *src, size_t n)
{
	double part[SUM_SQ_LANES];
	float scale;

	if (n == 0)
		return 0.0f;
	o5_ef_pass1(bits, err, part, src, n);
	scale = sum_onebit_scale(sum_sq_finish(part), n);
	o5_ef_pass2(err, n, scale);
	return scale;
}

const struct sum_onebit_ops sum_onebit_avx512 = {
	.sign_pack = o5_sign_pack,
	.sign_unpack = o5_sign_unpack,
	.sign_unpack_acc = o5_sign_unpack_acc,
	.f32_sumsq = o5_f32_sumsq,
	.onebit_compress = o5_onebit_compress,
};
