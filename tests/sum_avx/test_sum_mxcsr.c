/* SPDX-License-Identifier: Apache-2.0
 * test_sum_mxcsr.c — a caller's MXCSR does not change the reducers' results (tally_sum.h):
 * with FTZ and DAZ set (and another rounding mode, and the invalid and denormal exceptions
 * unmasked) every path gives the bits the scalar path gives under the default MXCSR, for
 * subnormal inputs and results and signalling NaNs; no exception traps; the caller's control
 * bits are intact after every call.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <xmmintrin.h>

#include <cmocka.h>

#include "sum_impl.h" /* sum_test_set_cpu_mask, SUM_CPU_BF16 */
#include "sum_test_util.h"

#define MX_STD 0x1f80u
#define MX_FTZ_DAZ 0x8040u
#define MX_N 1100

/* caller modes: FTZ+DAZ; + round toward zero; + round up with invalid/denormal unmasked */
static const unsigned mx_modes[] = {
	MX_STD | MX_FTZ_DAZ,
	MX_STD | MX_FTZ_DAZ | 0x6000u,
	(MX_STD & ~0x0180u) | MX_FTZ_DAZ | 0x4000u,
};

enum mx_op {
	MX_F32_ACC, MX_F32_ADD, MX_F16_ACC, MX_BF16_ACC, MX_F16_TO_F32, MX_BF16_TO_F32,
	MX_F32_TO_F16, MX_F32_TO_BF16, MX_F32_SCALE, MX_F32_KWAY, MX_F16_KWAY, MX_BF16_KWAY,
	MX_OP_COUNT
};

static const char *const mx_names[MX_OP_COUNT] = {
	"f32_acc", "f32_add", "f16_acc", "bf16_acc", "f16_to_f32", "bf16_to_f32", "f32_to_f16",
	"f32_to_bf16", "f32_scale", "f32_kway", "f16_kway", "bf16_kway",
};

/* source: 4 (f32), 2 (f16), 3 (bf16); dst element size */
static const struct { int src; size_t dsz; } mx_shape[MX_OP_COUNT] = {
	[MX_F32_ACC] = { 4, 4 },     [MX_F32_ADD] = { 4, 4 },      [MX_F16_ACC] = { 2, 4 },
	[MX_BF16_ACC] = { 3, 4 },    [MX_F16_TO_F32] = { 2, 4 },   [MX_BF16_TO_F32] = { 3, 4 },
	[MX_F32_TO_F16] = { 4, 2 },  [MX_F32_TO_BF16] = { 4, 2 },  [MX_F32_SCALE] = { 4, 4 },
	[MX_F32_KWAY] = { 4, 4 },    [MX_F16_KWAY] = { 2, 4 },     [MX_BF16_KWAY] = { 3, 4 },
};

/* f32: subnormals of both signs, the smallest normals (sums and differences cross into the
 * subnormals), values in f16's subnormal range, and now and then a signalling NaN. */
static void mx_gen32(uint32_t *p, size_t n, uint64_t *s)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t r = st_rand(s);
		uint32_t sign = (uint32_t)(r >> 63) << 31, m = (uint32_t)(r >> 20) & 0x7fffffu;

		switch (r % 8) {
		case 0: p[i] = sign | 0x00800000u | m; break;
		case 1: p[i] = sign | (0x33000000u + (m & 0x3ffffffu) * 8); break; /* 2^-25 .. */
		case 2: p[i] = (r & 0x100) ? 0x7fa00011u : 0xff800101u; break;
		default: p[i] = sign | m; break;
		}
	}
}

/* f16 / bf16: mostly subnormals, some normals */
static void mx_gen16(uint16_t *p, size_t n, uint64_t *s, int bf)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t r = st_rand(s);
		uint16_t sign = (uint16_t)((r >> 63) << 15);

		if (r % 4)
			p[i] = sign | (uint16_t)((r >> 20) & (bf ? 0x7fu : 0x3ffu));
		else
			p[i] = sign | (uint16_t)(bf ? 0x0080u | ((r >> 20) & 0x7f) : 0x0400u | ((r >> 20) & 0x3ff));
	}
}

static uint32_t mx_dst0[MX_N], mx_ref[MX_N], mx_out[MX_N], mx_src[3][MX_N];

static void mx_run(enum mx_op op, void *d, size_t n, float sc)
{
	const void *k3[3] = { mx_src[0], mx_src[1], mx_src[2] };
	const void *a = mx_src[0], *b = mx_src[1];

	switch (op) {
	case MX_F32_ACC: tally_sum_f32_acc(d, a, n); break;
	case MX_F32_ADD: tally_sum_f32_add(d, a, b, n); break;
	case MX_F16_ACC: tally_sum_f16_acc(d, a, n); break;
	case MX_BF16_ACC: tally_sum_bf16_acc(d, a, n); break;
	case MX_F16_TO_F32: tally_sum_f16_to_f32(d, a, n); break;
	case MX_BF16_TO_F32: tally_sum_bf16_to_f32(d, a, n); break;
	case MX_F32_TO_F16: tally_sum_f32_to_f16(d, a, n, sc); break;
	case MX_F32_TO_BF16: tally_sum_f32_to_bf16(d, a, n, sc); break;
	case MX_F32_SCALE: tally_sum_f32_scale(d, a, n, sc); break;
	case MX_F32_KWAY: tally_sum_f32_kway(d, (const float *const *)k3, 3, n); break;
	case MX_F16_KWAY: tally_sum_f16_kway(d, (const uint16_t *const *)k3, 3, n); break;
	case MX_BF16_KWAY: tally_sum_bf16_kway(d, (const uint16_t *const *)k3, 3, n); break;
	default: fail();
	}
}

/* The call under the caller's MXCSR; returns MXCSR as the call left it. Nothing else runs
 * between the two writes (an unmasked exception must come from the reducer if at all). */
static unsigned mx_call(unsigned mode, enum mx_op op, void *d, size_t n, float sc)
{
	unsigned after;

	_mm_setcsr(mode);
	mx_run(op, d, n, sc);
	after = _mm_getcsr();
	_mm_setcsr(MX_STD);
	return after;
}

/* Sanity: under the default MXCSR subnormals survive (else the test would prove nothing). */
static void test_reference_keeps_subnormals(void **state)
{
	float a[2] = { st_float(0x00000100u), st_float(0x80800000u) };
	float b[2] = { st_float(0x00000001u), st_float(0x00000001u) }, d[2];
	volatile float x = a[0], y = b[0]; /* volatile: no folding at compile time */

	(void)state;
	tally_sum_set_isa(TALLY_ISA_SCALAR);
	tally_sum_f32_add(d, a, b, 2);
	assert_int_equal(st_bits(d[0]), 0x00000101u);
	assert_int_equal(st_bits(d[1]), 0x807fffffu);
	_mm_setcsr(MX_STD | MX_FTZ_DAZ);
	d[0] = x + y; /* what the caller itself gets */
	_mm_setcsr(MX_STD);
	assert_int_equal(st_bits(d[0]), 0);
}

static void mx_check_op(enum mx_op op, size_t n, float sc, uint64_t seed)
{
	enum tally_isa isas[TALLY_ISA_COUNT];
	const int ni = st_isas(isas), src = mx_shape[op].src;
	const int nobf = isas[ni - 1] == TALLY_ISA_AVX512; /* one more round: avx512-nobf16 */
	const size_t dbytes = n * mx_shape[op].dsz;
	uint64_t s = seed;

	mx_gen32(mx_dst0, n, &s);
	for (int j = 0; j < 3; j++) {
		if (src == 4)
			mx_gen32(mx_src[j], n, &s);
		else
			mx_gen16((uint16_t *)mx_src[j], n, &s, src == 3);
	}
	tally_sum_set_isa(TALLY_ISA_SCALAR);
	memcpy(mx_ref, mx_dst0, dbytes);
	mx_call(MX_STD, op, mx_ref, n, sc);
	for (int i = 0; i < ni + nobf; i++) {
		/* the last round: the avx512 path without its AVX512_BF16 table */
		sum_test_set_cpu_mask(i == ni ? ~SUM_CPU_BF16 : ~0u);
		if (tally_sum_set_isa(isas[i == ni ? ni - 1 : i]) < 0)
			fail();
		for (size_t m = 0; m < sizeof(mx_modes) / sizeof(mx_modes[0]); m++) {
			unsigned after;

			memcpy(mx_out, mx_dst0, dbytes);
			after = mx_call(mx_modes[m], op, mx_out, n, sc);
			if (memcmp(mx_out, mx_ref, dbytes))
				fail_msg("%s on %s%s, n=%zu, caller MXCSR %04x: result differs from the "
					 "default MXCSR's", mx_names[op], tally_sum_isa_name(tally_sum_isa()),
					 i == ni ? "-nobf16" : "", n, mx_modes[m]);
			if ((after & ~0x3fu) != mx_modes[m])
				fail_msg("%s: caller MXCSR %04x came back as %04x", mx_names[op],
					 mx_modes[m], after);
		}
	}
	sum_test_set_cpu_mask(~0u);
	tally_sum_set_isa(TALLY_ISA_SCALAR);
}

static void test_ops(void **state)
{
	static const size_t ns[] = { 1, 7, 8, 15, 16, 17, 31, 33, 63, 130, 257, 1001, MX_N };
	/* 1: conversion as is; 0.5: the product of a small normal is subnormal */
	static const float scales[] = { 1.0f, 0.5f };

	(void)state;
	for (int op = 0; op < MX_OP_COUNT; op++)
		for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
			mx_check_op((enum mx_op)op, ns[i], scales[i % 2], ns[i] * 7 + (uint64_t)op);
}

/* The flags the caller had stay set, with whatever the call raised added. */
static void test_flags_kept(void **state)
{
	float a[4] = { 1, 2, 3, 4 }, d[4] = { 0, 0, 0, 0 };
	unsigned after;

	(void)state;
	_mm_setcsr(MX_STD | MX_FTZ_DAZ | 0x3fu);
	tally_sum_f32_acc(d, a, 4);
	after = _mm_getcsr();
	_mm_setcsr(MX_STD);
	assert_int_equal(after, MX_STD | MX_FTZ_DAZ | 0x3fu);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reference_keeps_subnormals),
		cmocka_unit_test(test_ops),
		cmocka_unit_test(test_flags_kept),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
