/* SPDX-License-Identifier: Apache-2.0
 * sum_test_util.h — data generators and bit comparisons shared by the sum_avx tests.
 */
#ifndef SUM_TEST_UTIL_H
#define SUM_TEST_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tally_sum.h"

static inline uint32_t st_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static inline float st_float(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static inline int st_isnan32(uint32_t u)
{
	return (u & 0x7fffffffu) > 0x7f800000u;
}

/* xorshift64*: deterministic, so every path sees the same data as the reference. */
static inline uint64_t st_rand(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1DULL;
}

/* f32 edge values: NaNs (quiet, signalling, negative), infinities, zeros, denormals, the
 * extremes, f16 overflow and ties (65504, 65519.99, 65520, 1+2^-11, 2^-25), bf16 ties. */
static const uint32_t st_f32_special[] = {
	0x7fc00000, 0x7fa12345, 0xffc00001, 0x7f800001, 0x7f800000, 0xff800000, 0x00000000,
	0x80000000, 0x00000001, 0x807fffff, 0x00400000, 0x7f7fffff, 0xff7fffff, 0x477fe000,
	0x477fefff, 0x477ff000, 0xc77ff000, 0x47800000, 0x3f801000, 0x3f803000, 0x33800000,
	0x33000000, 0x33400000, 0x33c00000, 0x38800000, 0x387fe000, 0x3f808000, 0x3f818000,
	0x7f7f8000, 0x7f7f7fff, 0xff7f8000, 0x00008000, 0x00018000, 0x3f800001, 0xbf7fffff,
};

/* Mostly ordinary values spread over many binades (sums round), 1 in 6 an edge value. */
static inline void st_fill_f32(float *p, size_t n, uint64_t *s)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t r = st_rand(s);

		if (r % 6 == 0) {
			p[i] = st_float(st_f32_special[(r >> 8) % (sizeof(st_f32_special) / 4)]);
		} else {
			uint32_t sign = (uint32_t)(r >> 63) << 31;
			uint32_t exp = 100u + (uint32_t)((r >> 32) % 60u); /* 2^-27 .. 2^32 */

			p[i] = st_float(sign | exp << 23 | ((uint32_t)(r >> 8) & 0x7fffffu));
		}
	}
}

static inline void st_fill_i32(int32_t *p, size_t n, uint64_t *s)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t r = st_rand(s);

		/* extremes now and then so sums wrap */
		p[i] = (r % 7 == 0) ? (int32_t)(r & 1 ? INT32_MAX : INT32_MIN) : (int32_t)(uint32_t)(r >> 16);
	}
}

/* Half the values any 16-bit pattern (NaN, Inf, subnormals included), half ordinary. */
static inline void st_fill_u16(uint16_t *p, size_t n, uint64_t *s, int bf16)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t r = st_rand(s);

		if (r & 1)
			p[i] = (uint16_t)(r >> 20);
		else if (bf16)
			p[i] = (uint16_t)(((r >> 63) << 15) | ((110u + (r >> 32) % 30u) << 7) | ((r >> 8) & 0x7f));
		else
			p[i] = (uint16_t)(((r >> 63) << 15) | ((5u + (r >> 32) % 20u) << 10) | ((r >> 8) & 0x3ff));
	}
}

/* Index of the first difference in n 32-bit words, or -1. NaNs too must match bit for bit
 * (the NaN rule of tally_sum.h). */
static inline long st_diff32(const void *a, const void *b, size_t n)
{
	const uint32_t *x = a, *y = b;

	for (size_t i = 0; i < n; i++)
		if (x[i] != y[i])
			return (long)i;
	return -1;
}

/* The NaN rule of tally_sum.h, written out here independently of the reducers: a NaN result
 * is the first NaN operand quieted, else the default NaN 0xffc00000 (Inf - Inf, 0 * Inf).
 * r is the plain result of the operation (the compiler may have swapped its operands). */
static inline float st_nan_rule(float a, float b, float r)
{
	uint32_t ua = st_bits(a), ub = st_bits(b);

	if (st_isnan32(ua))
		return st_float(ua | 0x00400000u);
	if (st_isnan32(ub))
		return st_float(ub | 0x00400000u);
	return st_isnan32(st_bits(r)) ? st_float(0xffc00000u) : r;
}

static inline float st_add(float a, float b)
{
	return st_nan_rule(a, b, a + b);
}

static inline float st_mul(float a, float b)
{
	return st_nan_rule(a, b, a * b);
}

static inline long st_diff16(const uint16_t *a, const uint16_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (a[i] != b[i])
			return (long)i;
	return -1;
}

/* The ISA paths this CPU has, scalar first. */
static inline int st_isas(enum tally_isa *out)
{
	int c = 0;

	for (int i = 0; i < TALLY_ISA_COUNT; i++)
		if (tally_sum_isa_supported((enum tally_isa)i))
			out[c++] = (enum tally_isa)i;
	return c;
}

#endif
