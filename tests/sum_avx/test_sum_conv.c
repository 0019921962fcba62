/* SPDX-License-Identifier: Apache-2.0
 * test_sum_conv.c — the scalar conversions against an independent oracle (exact arithmetic
 * in double: nearest representable value, ties to the even code), the dtype helpers, the
 * dtype-generic entry points, and ISA selection (TALLY_ISA parsing, -EINVAL / -ENOTSUP).
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "sum_impl.h" /* sum_test_set_cpu_mask */
#include "sum_test_util.h"

/* Value of a half-precision code by the definition (not by bit tricks). */
static double oracle_f16(uint16_t h)
{
	int e = (h >> 10) & 0x1f, f = h & 0x3ff;
	double v = e ? ldexp(1.0 + f / 1024.0, e - 15) : ldexp(f / 1024.0, -14);

	return (h & 0x8000) ? -v : v;
}

/* Nearest code among the finite non-negative codes [0, maxcode] of a monotone format, ties
 * to the even code; past half an ulp above the largest finite: infinity (inf code). */
static uint16_t oracle_round(double ax, double (*val)(uint16_t), uint16_t maxcode, uint16_t inf)
{
	uint16_t lo = 0, hi = maxcode;
	double top = val(maxcode), ulp = top - val((uint16_t)(maxcode - 1));

	if (ax >= top + ulp / 2)
		return inf; /* the tie at top + ulp/2 goes to the even code: 0x..00 of inf */
	if (ax >= top)
		return maxcode;
	while (hi - lo > 1) { /* val(lo) <= ax < val(hi) */
		uint16_t mid = (uint16_t)((lo + hi) / 2);

		if (val(mid) <= ax)
			lo = mid;
		else
			hi = mid;
	}
	if (ax - val(lo) < val(hi) - ax)
		return lo;
	if (ax - val(lo) > val(hi) - ax)
		return hi;
	return (lo & 1) ? hi : lo;
}

static double oracle_bf16(uint16_t h)
{
	return (double)st_float((uint32_t)h << 16);
}

static uint16_t oracle_to_f16(float x)
{
	uint16_t s = signbit(x) ? 0x8000 : 0;

	if (isnan(x))
		return 0xffff; /* checked separately */
	if (isinf(x))
		return s | 0x7c00;
	return s | oracle_round(fabs((double)x), oracle_f16, 0x7bff, 0x7c00);
}

static uint16_t oracle_to_bf16(float x)
{
	uint16_t s = signbit(x) ? 0x8000 : 0;

	if (isnan(x))
		return 0xffff;
	if (isinf(x))
		return s | 0x7f80;
	return s | oracle_round(fabs((double)x), oracle_bf16, 0x7f7f, 0x7f80);
}

static void test_f16_to_f32_all(void **state)
{
	(void)state;
	for (uint32_t h = 0; h < 0x10000; h++) {
		float f = tally_f16_to_f32((uint16_t)h);
		int e = (h >> 10) & 0x1f, m = h & 0x3ff;

		if (e == 0x1f && m) { /* NaN: quiet, sign and payload kept */
			assert_int_equal(st_bits(f), ((h & 0x8000u) << 16) | 0x7fc00000u | ((uint32_t)m << 13));
			continue;
		}
		if (e == 0x1f)
			assert_true(isinf(f) && !signbit(f) == !(h & 0x8000));
		else
			assert_true((double)f == oracle_f16((uint16_t)h) && !signbit(f) == !(h & 0x8000));
		/* widening is exact, so narrowing gives the code back */
		assert_int_equal(tally_f32_to_f16(f), h);
	}
}

static void test_bf16_to_f32_all(void **state)
{
	(void)state;
	for (uint32_t h = 0; h < 0x10000; h++) {
		float f = tally_bf16_to_f32((uint16_t)h);

		assert_int_equal(st_bits(f), h << 16);
		if (!isnan(f))
			assert_int_equal(tally_f32_to_bf16(f), h);
		else
			assert_int_equal(tally_f32_to_bf16(f), h | 0x40);
	}
}

/* Edge values by hand, then many random floats against the oracle. */
static void test_f32_to_half(void **state)
{
	static const struct { float x; uint16_t h, b; } known[] = {
		{ 1.0f, 0x3c00, 0x3f80 },
		{ 65504.0f, 0x7bff, 0x4780 },
		{ 65519.99f, 0x7bff, 0x4780 },
		{ 65520.0f, 0x7c00, 0x4780 },          /* f16 tie → even → Inf */
		{ -65520.0f, 0xfc00, 0xc780 },
		{ 1.0f + 0x1p-11f, 0x3c00, 0x3f80 },    /* tie → even (down) */
		{ 1.0f + 3 * 0x1p-11f, 0x3c02, 0x3f80 },/* tie → even (up) */
		{ 0x1p-24f, 0x0001, 0x3380 },           /* smallest f16 subnormal */
		{ 0x1p-25f, 0x0000, 0x3300 },           /* tie with 0 → 0 */
		{ 0x3p-25f, 0x0002, 0x33c0 },           /* tie 1/2 → 2 */
		{ 1.0f + 0x1p-8f, 0x3c04, 0x3f80 },     /* bf16 tie → even (down) */
		{ 1.0f + 3 * 0x1p-8f, 0x3c0c, 0x3f82 }, /* bf16 tie → even (up) */
		{ 0x1p-149f, 0x0000, 0x0000 },          /* f32 denormal: f16 0, bf16 rounds to 0 */
		{ 0x1.fep-127f, 0x0000, 0x0080 },       /* bf16 keeps subnormals */
		{ 3.3895314e38f, 0x7c00, 0x7f7f },      /* bf16 max finite */
		{ 3.4028235e38f, 0x7c00, 0x7f80 },      /* FLT_MAX rounds to bf16 Inf */
		{ -0.0f, 0x8000, 0x8000 },
		{ INFINITY, 0x7c00, 0x7f80 },
		{ -INFINITY, 0xfc00, 0xff80 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		assert_int_equal(tally_f32_to_f16(known[i].x), known[i].h);
		assert_int_equal(tally_f32_to_bf16(known[i].x), known[i].b);
		assert_int_equal(oracle_to_f16(known[i].x), known[i].h);
		assert_int_equal(oracle_to_bf16(known[i].x), known[i].b);
	}
	/* NaN stays NaN (quiet), sign kept, whatever the payload */
	static const uint32_t nans[] = { 0x7fc00000, 0x7f800001, 0xffa12345, 0x7fffffff };
	for (size_t i = 0; i < sizeof(nans) / sizeof(nans[0]); i++) {
		uint16_t h = tally_f32_to_f16(st_float(nans[i])), b = tally_f32_to_bf16(st_float(nans[i]));

		assert_true((h & 0x7e00) == 0x7e00 && (h >> 15) == (nans[i] >> 31));
		assert_true((b & 0x7fc0) == 0x7fc0 && (b >> 15) == (nans[i] >> 31));
	}
	uint64_t s = 42;
	for (int i = 0; i < 400000; i++) {
		uint64_t r = st_rand(&s);
		/* half uniformly random bits, half near the f16 range where rounding is busy */
		uint32_t u = (r & 1) ? (uint32_t)(r >> 32)
				     : (uint32_t)((r >> 63) << 31 | (95u + (r >> 40) % 50u) << 23 | ((r >> 8) & 0x7fffff));
		float x = st_float(u);

		if (isnan(x))
			continue;
		if (tally_f32_to_f16(x) != oracle_to_f16(x))
			fail_msg("f32 %08x -> f16 %04x, oracle %04x", u, tally_f32_to_f16(x), oracle_to_f16(x));
		if (tally_f32_to_bf16(x) != oracle_to_bf16(x))
			fail_msg("f32 %08x -> bf16 %04x, oracle %04x", u, tally_f32_to_bf16(x), oracle_to_bf16(x));
	}
}

static void test_dtype(void **state)
{
	static const char *const names[] = { "f32", "f16", "bf16", "i32" };
	static const size_t sizes[] = { 4, 2, 2, 4 };

	(void)state;
	for (int i = 0; i < TALLY_DT_COUNT; i++) {
		assert_int_equal(tally_dtype_parse(names[i]), i);
		assert_string_equal(tally_dtype_name((enum tally_dtype)i), names[i]);
		assert_int_equal(tally_dtype_size((enum tally_dtype)i), sizes[i]);
	}
	assert_int_equal(tally_dtype_parse("F32"), -EINVAL);
	assert_int_equal(tally_dtype_parse("f64"), -EINVAL);
	assert_int_equal(tally_dtype_parse(""), -EINVAL);
	assert_int_equal(tally_dtype_parse("f32 "), -EINVAL);
	assert_int_equal(tally_dtype_parse(NULL), -EINVAL);
	assert_int_equal(tally_dtype_size(TALLY_DT_COUNT), 0);
	assert_int_equal(tally_dtype_size((enum tally_dtype)-1), 0);
	assert_string_equal(tally_dtype_name(TALLY_DT_COUNT), "unknown");
}

static void test_isa_select(void **state)
{
	enum tally_isa best = TALLY_ISA_SCALAR;

	(void)state;
	for (int i = 0; i < TALLY_ISA_COUNT; i++)
		if (tally_sum_isa_supported((enum tally_isa)i))
			best = (enum tally_isa)i;
	assert_true(tally_sum_isa_supported(TALLY_ISA_SCALAR));
	assert_false(tally_sum_isa_supported(TALLY_ISA_COUNT));
	assert_string_equal(tally_sum_isa_name(TALLY_ISA_AVX512), "avx512");
	assert_string_equal(tally_sum_isa_name(TALLY_ISA_COUNT), "unknown");

	tally_sum_set_default(NULL);
	assert_int_equal(tally_sum_init(), 0);
	assert_int_equal(tally_sum_isa(), best);
	assert_int_equal(tally_sum_init(), 0); /* idempotent */
	assert_int_equal(tally_sum_isa(), best);

	for (int i = 0; i < TALLY_ISA_COUNT; i++) {
		tally_sum_set_default(tally_sum_isa_name((enum tally_isa)i));
		if (tally_sum_isa_supported((enum tally_isa)i)) {
			assert_int_equal(tally_sum_init(), 0);
			assert_int_equal(tally_sum_isa(), i);
		} else {
			assert_int_equal(tally_sum_init(), -ENOTSUP);
		}
	}
	/* unknown names: -EINVAL and the selection stays */
	assert_int_equal(tally_sum_set_isa(TALLY_ISA_SCALAR), 0);
	static const char *const bad[] = { "sse", "AVX2", "avx512 ", "avx-512", "0" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		tally_sum_set_default(bad[i]);
		assert_int_equal(tally_sum_init(), -EINVAL);
		assert_int_equal(tally_sum_isa(), TALLY_ISA_SCALAR);
	}
	tally_sum_set_default("auto");
	assert_int_equal(tally_sum_init(), 0);
	assert_int_equal(tally_sum_isa(), best);
	assert_int_equal(tally_sum_set_isa(TALLY_ISA_COUNT), -EINVAL);
	assert_int_equal(tally_sum_set_isa((enum tally_isa)-1), -EINVAL);

	/* a CPU without AVX-512 (and AVX2): forcing them is -ENOTSUP, auto falls back */
	sum_test_set_cpu_mask(1u << TALLY_ISA_SCALAR);
	assert_false(tally_sum_isa_supported(TALLY_ISA_AVX512));
	assert_false(tally_sum_isa_supported(TALLY_ISA_AVX2));
	assert_int_equal(tally_sum_set_isa(TALLY_ISA_AVX512), -ENOTSUP);
	tally_sum_set_default("avx512");
	assert_int_equal(tally_sum_init(), -ENOTSUP);
	tally_sum_set_default("avx2");
	assert_int_equal(tally_sum_init(), -ENOTSUP);
	tally_sum_set_default(NULL);
	assert_int_equal(tally_sum_init(), 0);
	assert_int_equal(tally_sum_isa(), TALLY_ISA_SCALAR);
	sum_test_set_cpu_mask(~0u);
	assert_int_equal(tally_sum_init(), 0);
	assert_int_equal(tally_sum_isa(), best);
}

/* The dtype-generic helpers route to the typed ones; an unknown dtype touches nothing. */
static void test_generic(void **state)
{
	enum { N = 37 };
	float acc[N], want[N], f[N];
	uint16_t h[N], out[N], wout[N];
	int32_t ia[N], iw[N], is[N];
	uint64_t s = 7;

	(void)state;
	st_fill_f32(acc, N, &s);
	st_fill_f32(f, N, &s);
	st_fill_u16(h, N, &s, 0);
	st_fill_i32(ia, N, &s);
	st_fill_i32(is, N, &s);

	for (int dt = 0; dt < TALLY_DT_COUNT; dt++) {
		const void *src = dt == TALLY_DT_I32 ? (const void *)is : dt == TALLY_DT_F32 ? (const void *)f : (const void *)h;
		void *a = dt == TALLY_DT_I32 ? (void *)ia : (void *)acc;
		void *w = dt == TALLY_DT_I32 ? (void *)iw : (void *)want;

		memcpy(w, a, sizeof(acc));
		switch (dt) {
		case TALLY_DT_F32: tally_sum_f32_acc(w, src, N); break;
		case TALLY_DT_F16: tally_sum_f16_acc(w, src, N); break;
		case TALLY_DT_BF16: tally_sum_bf16_acc(w, src, N); break;
		default: tally_sum_i32_acc(w, src, N); break;
		}
		tally_sum_acc((enum tally_dtype)dt, a, src, N);
		assert_int_equal(st_diff32(w, a, N), -1);

		/* load */
		switch (dt) {
		case TALLY_DT_F16: tally_sum_f16_to_f32(w, src, N); break;
		case TALLY_DT_BF16: tally_sum_bf16_to_f32(w, src, N); break;
		default: memcpy(w, src, sizeof(acc)); break;
		}
		tally_sum_load((enum tally_dtype)dt, a, src, N);
		assert_memory_equal(w, a, sizeof(acc));

		/* store */
		if (dt == TALLY_DT_F16 || dt == TALLY_DT_BF16) {
			if (dt == TALLY_DT_F16)
				tally_sum_f32_to_f16(wout, a, N, 1.0f);
			else
				tally_sum_f32_to_bf16(wout, a, N, 1.0f);
			tally_sum_store((enum tally_dtype)dt, out, a, N);
			assert_memory_equal(wout, out, sizeof(out));
		} else {
			int32_t o[N];

			tally_sum_store((enum tally_dtype)dt, o, a, N);
			assert_memory_equal(o, a, sizeof(o));
		}

		/* kway with k = 2 equals load + acc */
		const void *two[2] = { src, src };
		tally_sum_load((enum tally_dtype)dt, w, src, N);
		tally_sum_acc((enum tally_dtype)dt, w, src, N);
		tally_sum_kway((enum tally_dtype)dt, a, two, 2, N);
		assert_int_equal(st_diff32(w, a, N), -1);
	}
	/* unknown dtype */
	memcpy(want, acc, sizeof(acc));
	tally_sum_acc(TALLY_DT_COUNT, acc, f, N);
	tally_sum_load(TALLY_DT_COUNT, acc, f, N);
	tally_sum_store(TALLY_DT_COUNT, acc, f, N);
	const void *one[1] = { f };
	tally_sum_kway(TALLY_DT_COUNT, acc, one, 1, N);
	assert_memory_equal(want, acc, sizeof(acc));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_f16_to_f32_all), cmocka_unit_test(test_bf16_to_f32_all),
		cmocka_unit_test(test_f32_to_half),    cmocka_unit_test(test_dtype),
		cmocka_unit_test(test_isa_select),     cmocka_unit_test(test_generic),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
