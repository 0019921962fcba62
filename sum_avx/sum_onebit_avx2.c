/* SPDX-License-Identifier: Apache-2.0
 * sum_onebit_avx2.c — the 1-bit compression reducers, AVX2 path (built with the flags of
 * sum_avx2.c). A sign is a signed compare of the bits with the sign bit flipped, collected by
 * VMOVMSKPS (8 lanes = one byte); unpacking broadcasts a byte and tests one bit per lane. The
 * sum of squares keeps the 32 f64 lanes of sum_onebit.h in eight ymm; tails run the reference
 * loops of sum_onebit.h on the same lanes.
 */
#include <immintrin.h>

#include "sum_onebit.h"

#define O2_INLINE static inline __attribute__((always_inline))

/* Lanes whose sign bit (sum_sign_bit) is 0: bits > 0x80000000 unsigned, i.e. with the top bit
 * flipped, > 0 signed. */
O2_INLINE __m256i o2_negs(__m256 c)
{
	const __m256i top = _mm256_set1_epi32((int)0x80000000u);

	return _mm256_cmpgt_epi32(_mm256_xor_si256(_mm256_castps_si256(c), top), _mm256_setzero_si256());
}

O2_INLINE uint32_t o2_signs(__m256 c)
{
	return ~(uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(o2_negs(c))) & 0xffu;
}

/* All-ones in lane j where bit j of b is set. */
O2_INLINE __m256 o2_expand(uint32_t b)
{
	const __m256i sel = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);

	return _mm256_castsi256_ps(
		_mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)b), sel), sel));
}

/* Squares of 8 f32 lanes into two f64 accumulators (exact squares; only the add rounds). */
O2_INLINE void o2_sq(__m256 c, __m256d *lo, __m256d *hi)
{
	__m256d a = _mm256_cvtps_pd(_mm256_castps256_ps128(c));
	__m256d b = _mm256_cvtps_pd(_mm256_extractf128_ps(c, 1));

	*lo = _mm256_add_pd(*lo, _mm256_mul_pd(a, a));
	*hi = _mm256_add_pd(*hi, _mm256_mul_pd(b, b));
}

/* One block of 32 elements into the eight accumulators (lanes 4j..4j+3): the sum of squares
 * and compress pass 1 both go through here, so they cannot differ. */
O2_INLINE void o2_sq32(const __m256 c[4], __m256d p[8])
{
#pragma GCC unroll 4
	for (int j = 0; j < 4; j++)
		o2_sq(c[j], &p[2 * j], &p[2 * j + 1]);
}

static void o2_sign_pack(uint8_t *bits, const float *src, size_t n)
{
	size_t i = 0;

	for (; i + 32 <= n; i += 32) {
		uint32_t b = o2_signs(_mm256_loadu_ps(src + i)) |
			     o2_signs(_mm256_loadu_ps(src + i + 8)) << 8 |
			     o2_signs(_mm256_loadu_ps(src + i + 16)) << 16 |
			     o2_signs(_mm256_loadu_ps(src + i + 24)) << 24;

		memcpy(bits + i / 8, &b, 4);
	}
	for (; i + 8 <= n; i += 8)
		bits[i / 8] = (uint8_t)o2_signs(_mm256_loadu_ps(src + i));
	sum_pack_from(bits, src, i, n);
}

/* dst = ±scale, or acc: dst += ±scale (dst the first operand: the NaN rule). */
O2_INLINE void o2_unpack(int acc, float *dst, const uint8_t *bits, size_t n, float scale)
{
	const __m256 pos = _mm256_set1_ps(scale), neg = _mm256_set1_ps(sum_sign_val(0, scale));
	size_t i = 0;

	for (; i + 32 <= n; i += 32) {
		uint32_t b;

		memcpy(&b, bits + i / 8, 4);
#pragma GCC unroll 4
		for (int j = 0; j < 4; j++) {
			__m256 v = _mm256_blendv_ps(neg, pos, o2_expand(b >> 8 * j));

			if (acc)
				v = sum_add_ps256(_mm256_loadu_ps(dst + i + 8 * j), v);
			_mm256_storeu_ps(dst + i + 8 * j, v);
		}
	}
	for (; i + 8 <= n; i += 8) {
		__m256 v = _mm256_blendv_ps(neg, pos, o2_expand(bits[i / 8]));

		if (acc)
			v = sum_add_ps256(_mm256_loadu_ps(dst + i), v);
		_mm256_storeu_ps(dst + i, v);
	}
	sum_unpack_from(dst, bits, i, n, scale, acc);
}

static void o2_sign_unpack(float *dst, const uint8_t *bits, size_t n, float scale)
{
	o2_unpack(0, dst, bits, n, scale);
}

static void o2_sign_unpack_acc(float *acc, const uint8_t *bits, size_t n, float scale)
{
	o2_unpack(1, acc, bits, n, scale);
}

static void o2_store_part(double *part, const __m256d p[8])
{
	for (int j = 0; j < 8; j++)
		_mm256_storeu_pd(part + 4 * j, p[j]);
}

#define O2_ZERO8                                                                       \
	{ _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), \
	  _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd() }

static double o2_f32_sumsq(const float *src, size_t n)
{
	__m256d p[8] = O2_ZERO8;
	double part[SUM_SQ_LANES];
	size_t i = 0;

	for (; i + 32 <= n; i += 32) {
		__m256 c[4] = { _mm256_loadu_ps(src + i), _mm256_loadu_ps(src + i + 8),
				_mm256_loadu_ps(src + i + 16), _mm256_loadu_ps(src + i + 24) };

		o2_sq32(c, p);
	}
	o2_store_part(part, p);
	sum_sq_from(part, src, i, n);
	return sum_sq_finish(part);
}

static void o2_ef_pass1(uint8_t *bits, float *err, double *part, const float *src, size_t n)
{
	__m256d p[8] = O2_ZERO8;
	size_t i = 0;

	for (; i + 32 <= n; i += 32) {
		__m256 c[4];
		uint32_t b = 0;

#pragma GCC unroll 4
		for (int j = 0; j < 4; j++) {
			c[j] = sum_add_ps256(_mm256_loadu_ps(src + i + 8 * j), _mm256_loadu_ps(err + i + 8 * j));
			_mm256_storeu_ps(err + i + 8 * j, c[j]);
			b |= o2_signs(c[j]) << 8 * j;
		}
		memcpy(bits + i / 8, &b, 4);
		o2_sq32(c, p);
	}
	o2_store_part(part, p);
	sum_ef_pass1_from(bits, err, part, src, i, n);
}

/* err holds c: e = c + (bit ? -scale : scale). */
static void o2_ef_pass2(float *err, size_t n, float scale)
{
	const __m256 pos = _mm256_set1_ps(scale), neg = _mm256_set1_ps(sum_sign_val(0, scale));
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256 c = _mm256_loadu_ps(err + i);

		/* lanes with sign bit 0 add +scale, the others -scale */
		_mm256_storeu_ps(err + i, sum_add_ps256(c, _mm256_blendv_ps(neg, pos,
						_mm256_castsi256_ps(o2_negs(c)))));
	}
	sum_ef_pass2_from(err, i, n, scale);
}

static float o2_onebit_compress(uint8_t *bits, float *err, const float *src, size_t n)
{
	double part[SUM_SQ_LANES];
	float scale;

	if (n == 0)
		return 0.0f;
	o2_ef_pass1(bits, err, part, src, n);
	scale = sum_onebit_scale(sum_sq_finish(part), n);
	o2_ef_pass2(err, n, scale);
	return scale;
}

const struct sum_onebit_ops sum_onebit_avx2 = {
	.sign_pack = o2_sign_pack,
	.sign_unpack = o2_sign_unpack,
	.sign_unpack_acc = o2_sign_unpack_acc,
	.f32_sumsq = o2_f32_sumsq,
	.onebit_compress = o2_onebit_compress,
};
