/* SPDX-License-Identifier: Apache-2.0
 * sum_onebit.h — internal to libtally_sum: the 1-bit compression table (one per ISA) and the
 * element-wise reference code every path must match. The scalar path is these loops from 0;
 * the AVX2 path runs them on its tails; the AVX-512 path masks its tails instead.
 */
#ifndef SUM_ONEBIT_H
#define SUM_ONEBIT_H

#include "sum_impl.h"

struct sum_onebit_ops {
	void (*sign_pack)(uint8_t *bits, const float *src, size_t n);
	void (*sign_unpack)(float *dst, const uint8_t *bits, size_t n, float scale);
	void (*sign_unpack_acc)(float *acc, const uint8_t *bits, size_t n, float scale);
	double (*f32_sumsq)(const float *src, size_t n);
	float (*onebit_compress)(uint8_t *bits, float *err, const float *src, size_t n);
};

extern const struct sum_onebit_ops sum_onebit_scalar;
extern const struct sum_onebit_ops sum_onebit_avx2;
extern const struct sum_onebit_ops sum_onebit_avx512;

/* The f64 sum of squares has this many partial sums: element i goes to lane i % 32, each lane
 * adds in index order, and sum_sq_finish folds them 16, 8, 4, 2, 1 apart. 32 = four zmm or
 * eight ymm of f64, enough independent add chains to keep up with the loads. */
#define SUM_SQ_LANES 32

/* Fold the partial sums (the same code for every path: it lives in sum_onebit.c); a NaN sum
 * becomes the default NaN, so which lane's NaN won does not show. */
double sum_sq_finish(const double part[SUM_SQ_LANES]);
/* scale = sqrt(sumsq) / sqrt(n) in f64, rounded to f32 once; n = 0 gives 0, a NaN sum the
 * default NaN 0xffc00000. */
float sum_onebit_scale(double sumsq, size_t n);

/* The sign bit of tally_sum.h: 1 for c >= 0 (-0 too) and for NaNs with the sign bit clear,
 * 0 for c < 0 and NaNs with it set. On the bits that is "unsigned <= 0x80000000": no FP
 * compare, so no exception flag and no DAZ effect. */
static inline uint32_t sum_sign_bit(float c)
{
	return sum_f32_bits(c) <= 0x80000000u;
}

/* bit 1: scale, bit 0: -scale, by flipping the sign bit (exact; a NaN keeps its payload). */
static inline float sum_sign_val(uint32_t bit, float scale)
{
	return sum_bits_f32(sum_f32_bits(scale) ^ ((bit ^ 1u) << 31));
}

/* Pack from element i (a multiple of 8) to n; the last byte's bits past n are 0. */
static inline void sum_pack_from(uint8_t *bits, const float *src, size_t i, size_t n)
{
	for (; i < n; i += 8) {
		uint32_t b = 0;

		for (size_t j = 0; j < 8 && i + j < n; j++)
			b |= sum_sign_bit(src[i + j]) << j;
		bits[i / 8] = (uint8_t)b;
	}
}

/* dst[i] = ±scale (acc: dst[i] += ±scale, dst first: the NaN rule), from element i to n. */
static inline void sum_unpack_from(float *dst, const uint8_t *bits, size_t i, size_t n,
				   float scale, int acc)
{
	for (; i < n; i++) {
		float v = sum_sign_val((bits[i / 8] >> (i % 8)) & 1u, scale);

		dst[i] = acc ? sum_add_f32(dst[i], v) : v;
	}
}

/* Squares into the lanes, from element i (a multiple of SUM_SQ_LANES) to n. Squares of f32
 * values are exact in f64 (48-bit products, no overflow or subnormal), only the adds round. */
static inline void sum_sq_from(double *part, const float *src, size_t i, size_t n)
{
	for (; i < n; i++) {
		double d = src[i];

		part[i % SUM_SQ_LANES] += d * d;
	}
}

/* Compress pass 1 from element i (a multiple of SUM_SQ_LANES) to n: c = x + e (x first) into
 * err, its sign bits into bits, its squares into the lanes. */
static inline void sum_ef_pass1_from(uint8_t *bits, float *err, double *part, const float *src,
				     size_t i, size_t n)
{
	for (; i < n; i += 8) {
		uint32_t b = 0;

		for (size_t j = 0; j < 8 && i + j < n; j++) {
			float c = sum_add_f32(src[i + j], err[i + j]);
			double d = c;

			err[i + j] = c;
			part[(i + j) % SUM_SQ_LANES] += d * d;
			b |= sum_sign_bit(c) << j;
		}
		bits[i / 8] = (uint8_t)b;
	}
}

/* Compress pass 2 from element i to n: err holds c; e = c + (bit ? -scale : scale). */
static inline void sum_ef_pass2_from(float *err, size_t i, size_t n, float scale)
{
	for (; i < n; i++)
		err[i] = sum_add_f32(err[i], sum_sign_val(sum_sign_bit(err[i]) ^ 1u, scale));
}

#endif
