/* SPDX-License-Identifier: Apache-2.0
 * sum_scalar.c — the reference path: plain C, left-to-right, no FMA (built with
 * -ffp-contract=off). Every SIMD path must produce the same bits. Adds and multiplies go
 * through sum_add_f32 / sum_mul_f32: the NaN rule must not depend on the compiler's choice of
 * operand order.
 */
#include "sum_onebit.h"

/* noinline: the k-way loops call the += loops per block, and inlined there GCC no longer
 * vectorized them once the NaN rule was in (k-way 4 ran at half speed) */
#define SCALAR_NOINLINE __attribute__((noinline))

static SCALAR_NOINLINE void scalar_f32_acc(float *dst, const float *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = sum_add_f32(dst[i], src[i]);
}

static void scalar_f32_add(float *dst, const float *a, const float *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = sum_add_f32(a[i], b[i]);
}

/* Wrapping two's complement: add as unsigned (signed overflow is undefined in C). */
static void scalar_i32_acc(int32_t *dst, const int32_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = (int32_t)((uint32_t)dst[i] + (uint32_t)src[i]);
}

static void scalar_i32_add(int32_t *dst, const int32_t *a, const int32_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = (int32_t)((uint32_t)a[i] + (uint32_t)b[i]);
}

static void scalar_f16_acc(float *dst, const uint16_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = sum_add_f32(dst[i], sum_f16_to_f32(src[i]));
}

static SCALAR_NOINLINE void scalar_bf16_acc(float *dst, const uint16_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = sum_add_f32(dst[i], sum_bf16_to_f32(src[i]));
}

static void scalar_f16_to_f32(float *dst, const uint16_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = sum_f16_to_f32(src[i]);
}

static void scalar_bf16_to_f32(float *dst, const uint16_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = sum_bf16_to_f32(src[i]);
}

static void scalar_f32_to_f16(uint16_t *dst, const float *src, size_t n, float scale)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = sum_f32_to_f16(sum_mul_f32(src[i], scale));
}

static void scalar_f32_to_bf16(uint16_t *dst, const float *src, size_t n, float scale)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = sum_f32_to_bf16(sum_mul_f32(src[i], scale));
}

static void scalar_f32_scale(float *dst, const float *src, size_t n, float scale)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = sum_mul_f32(src[i], scale);
}

/* k-way in blocks: the block's partial sums stay in a small stack buffer (L1), dst is
 * written once. Per element the order is ((s0 + s1) + s2) + ... as the header promises. */
#define SCALAR_BLK 512

static void scalar_f32_kway(float *dst, const float *const *src, unsigned k, size_t n)
{
	float acc[SCALAR_BLK];

	for (size_t off = 0; off < n; off += SCALAR_BLK) {
		size_t m = n - off < SCALAR_BLK ? n - off : SCALAR_BLK;

		memcpy(acc, src[0] + off, m * sizeof(float));
		for (unsigned j = 1; j < k; j++)
			scalar_f32_acc(acc, src[j] + off, m);
		memcpy(dst + off, acc, m * sizeof(float));
	}
}

static void scalar_i32_kway(int32_t *dst, const int32_t *const *src, unsigned k, size_t n)
{
	int32_t acc[SCALAR_BLK];

	for (size_t off = 0; off < n; off += SCALAR_BLK) {
		size_t m = n - off < SCALAR_BLK ? n - off : SCALAR_BLK;

		memcpy(acc, src[0] + off, m * sizeof(int32_t));
		for (unsigned j = 1; j < k; j++)
			scalar_i32_acc(acc, src[j] + off, m);
		memcpy(dst + off, acc, m * sizeof(int32_t));
	}
}

static void scalar_f16_kway(float *dst, const uint16_t *const *src, unsigned k, size_t n)
{
	float acc[SCALAR_BLK];

	for (size_t off = 0; off < n; off += SCALAR_BLK) {
		size_t m = n - off < SCALAR_BLK ? n - off : SCALAR_BLK;

		scalar_f16_to_f32(acc, src[0] + off, m);
		for (unsigned j = 1; j < k; j++)
			scalar_f16_acc(acc, src[j] + off, m);
		memcpy(dst + off, acc, m * sizeof(float));
	}
}

static void scalar_bf16_kway(float *dst, const uint16_t *const *src, unsigned k, size_t n)
{
	float acc[SCALAR_BLK];

	for (size_t off = 0; off < n; off += SCALAR_BLK) {
		size_t m = n - off < SCALAR_BLK ? n - off : SCALAR_BLK;

		scalar_bf16_to_f32(acc, src[0] + off, m);
		for (unsigned j = 1; j < k; j++)
			scalar_bf16_acc(acc, src[j] + off, m);
		memcpy(dst + off, acc, m * sizeof(float));
	}
}

const struct sum_ops sum_ops_scalar = {
	.f32_acc = scalar_f32_acc,
	.f32_add = scalar_f32_add,
	.i32_acc = scalar_i32_acc,
	.i32_add = scalar_i32_add,
	.f16_acc = scalar_f16_acc,
	.bf16_acc = scalar_bf16_acc,
	.f16_to_f32 = scalar_f16_to_f32,
	.bf16_to_f32 = scalar_bf16_to_f32,
	.f32_to_f16 = scalar_f32_to_f16,
	.f32_to_bf16 = scalar_f32_to_bf16,
	.f32_scale = scalar_f32_scale,
	.f32_kway = scalar_f32_kway,
	.i32_kway = scalar_i32_kway,
	.f16_kway = scalar_f16_kway,
	.bf16_kway = scalar_bf16_kway,
	.onebit = &sum_onebit_scalar,
};
