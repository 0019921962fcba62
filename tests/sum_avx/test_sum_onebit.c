/* SPDX-License-Identifier: Apache-2.0
 * test_sum_onebit.c — the 1-bit compression reducers (tally_sum.h): every path bit for bit
 * against a reference written here from the header's rules (sign bit, LSB-first packing,
 * ±scale, the f64 sum-of-squares order, c = x + e, scale, e = c -/+ scale), for n = 0..200
 * and large odd n, misaligned buffers, data with NaN/Inf/±0/subnormals; the error-feedback
 * invariant checked in f64; padding bits and the bytes around the outputs; a caller's
 * FTZ/DAZ does not change a bit.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <xmmintrin.h>

#include <cmocka.h>

#include "sum_test_util.h"

#define OB_BIG ((1u << 20) + 13)
#define OB_SLACK 16 /* room for misalignment offsets and guards */
#define OB_GUARD 0xa5u

static enum tally_isa ob_isas[TALLY_ISA_COUNT];
static int ob_nisa;
static float *ob_x, *ob_e0, *ob_e, *ob_eref, *ob_d0, *ob_d, *ob_dref;
static uint8_t *ob_b, *ob_bref;

/* ---- the rules, written independently of the library ---- */
static uint32_t ob_sign(float c)
{
	if (isnan(c))
		return !signbit(c);
	return !(c < 0.0f); /* -0 >= 0 */
}

static float ob_pm(uint32_t bit, float scale)
{
	return st_float(st_bits(scale) ^ (bit ? 0u : 0x80000000u));
}

static void ob_ref_pack(uint8_t *bits, const float *x, size_t n)
{
	memset(bits, 0, (n + 7) / 8);
	for (size_t i = 0; i < n; i++)
		bits[i >> 3] |= (uint8_t)(ob_sign(x[i]) << (i & 7));
}

static uint32_t ob_bit(const uint8_t *bits, size_t i)
{
	return (bits[i >> 3] >> (i & 7)) & 1u;
}

static double ob_ref_sumsq(const float *x, size_t n)
{
	double p[32] = { 0 };

	for (size_t i = 0; i < n; i++)
		p[i % 32] += (double)x[i] * (double)x[i];
	for (unsigned w = 16; w; w /= 2)
		for (unsigned j = 0; j < w; j++)
			p[j] += p[j + w];
	return isnan(p[0]) ? st_float(0xffc00000u) : p[0]; /* a NaN: compared as "is NaN" below */
}

/* e in/out; returns the scale */
static float ob_ref_compress(uint8_t *bits, float *e, const float *x, size_t n)
{
	double ss;
	float scale;

	if (!n)
		return 0.0f;
	for (size_t i = 0; i < n; i++)
		e[i] = st_add(x[i], e[i]);
	ss = ob_ref_sumsq(e, n);
	scale = isnan(ss) ? st_float(0xffc00000u) : (float)(sqrt(ss) / sqrt((double)n));
	ob_ref_pack(bits, e, n);
	for (size_t i = 0; i < n; i++)
		e[i] = st_add(e[i], ob_pm(!ob_bit(bits, i), scale));
	return scale;
}

/* ---- data ---- */
enum ob_data { OB_ORDINARY, OB_FINITE_EDGE, OB_ANY_EDGE };

/* ordinary: values over 2^-7 .. 2^8, both signs; finite edge: st_fill_f32 (1 in 6 an edge
 * value: ±0, subnormals, extremes) with NaN and Inf replaced by 1.5; any edge: all of it */
static void ob_fill(float *p, size_t n, uint64_t *s, enum ob_data kind)
{
	if (kind != OB_ORDINARY)
		st_fill_f32(p, n, s);
	for (size_t i = 0; i < n; i++) {
		if (kind == OB_ORDINARY) {
			uint64_t r = st_rand(s);

			p[i] = st_float((uint32_t)(r >> 63) << 31 | (120u + (uint32_t)(r >> 32) % 16u) << 23 |
					((uint32_t)(r >> 8) & 0x7fffffu));
		} else if (kind == OB_FINITE_EDGE && !isfinite(p[i])) {
			p[i] = 1.5f;
		}
	}
}

static int ob_setup(void **state)
{
	const size_t fl = (OB_BIG + OB_SLACK) * 4, by = OB_BIG / 8 + OB_SLACK * 2;

	(void)state;
	ob_nisa = st_isas(ob_isas);
	print_message("paths:");
	for (int i = 0; i < ob_nisa; i++)
		print_message(" %s", tally_sum_isa_name(ob_isas[i]));
	print_message("\n");
	ob_x = malloc(fl), ob_e0 = malloc(fl), ob_e = malloc(fl), ob_eref = malloc(fl);
	ob_d0 = malloc(fl), ob_d = malloc(fl), ob_dref = malloc(fl);
	ob_b = malloc(by), ob_bref = malloc(by);
	return ob_x && ob_e0 && ob_e && ob_eref && ob_d0 && ob_d && ob_dref && ob_b && ob_bref ? 0 : -1;
}

static int ob_teardown(void **state)
{
	(void)state;
	free(ob_x), free(ob_e0), free(ob_e), free(ob_eref);
	free(ob_d0), free(ob_d), free(ob_dref);
	free(ob_b), free(ob_bref);
	tally_sum_set_isa(TALLY_ISA_SCALAR);
	return 0;
}

/* The bit stream at b + 1 (odd address) with guard bytes on both sides. */
static void ob_check_bits(const char *what, const char *isa, size_t n, const uint8_t *got,
			  const uint8_t *want)
{
	size_t nb = (n + 7) / 8;

	if (got[-1] != OB_GUARD || got[nb] != OB_GUARD)
		fail_msg("%s on %s, n=%zu: wrote outside the %zu bytes", what, isa, n, nb);
	for (size_t i = 0; i < nb; i++)
		if (got[i] != want[i])
			fail_msg("%s on %s, n=%zu: byte %zu got %02x want %02x", what, isa, n, i, got[i], want[i]);
}

static void ob_check_f32(const char *what, const char *isa, size_t n, size_t off,
			 const float *got, const float *want)
{
	long bad = st_diff32(got, want, n);

	if (bad >= 0)
		fail_msg("%s on %s, n=%zu off=%zu: [%ld] got %08x want %08x", what, isa, n, off, bad,
			 st_bits(got[bad]), st_bits(want[bad]));
	if (st_bits(got[-1]) != 0x5a5a5a5au || st_bits(got[n]) != 0x5a5a5a5au)
		fail_msg("%s on %s, n=%zu off=%zu: wrote outside dst", what, isa, n, off);
}

/* Pack, unpack, unpack-accumulate, sum of squares and compress of one data set on every path,
 * f32 arrays at element offset `off` (+1, +2 ...), bit streams at odd addresses. */
static void ob_case(size_t n, size_t off, enum ob_data kind, float scale, uint64_t seed)
{
	float *x = ob_x + off + 1, *e = ob_e + off + 2, *d = ob_d + off + 3;
	uint8_t *b = ob_b + 1 + off % 3, *bref = ob_bref;
	const size_t nb = (n + 7) / 8;
	double ss;
	float sc_ref;
	uint64_t s = seed;

	ob_fill(x, n, &s, kind);
	ob_fill(ob_e0, n, &s, kind);
	ob_fill(ob_d0, n, &s, kind);
	ss = ob_ref_sumsq(x, n);
	memcpy(ob_eref, ob_e0, n * 4);
	sc_ref = ob_ref_compress(bref, ob_eref, x, n);
	for (int p = 0; p < ob_nisa; p++) {
		const char *isa = tally_sum_isa_name(ob_isas[p]);
		double got_ss;
		float sc;

		assert_int_equal(tally_sum_set_isa(ob_isas[p]), 0);
		/* pack: the signs of x (compared with ob_dref as scratch for the reference) */
		memset(b - 1, OB_GUARD, nb + 2);
		tally_sum_sign_pack(b, x, n);
		ob_ref_pack((uint8_t *)ob_dref, x, n);
		ob_check_bits("sign_pack", isa, n, b, (const uint8_t *)ob_dref);
		/* unpack from the reference bits of c, padding bits set: they must be ignored */
		if (n % 8)
			bref[nb - 1] |= (uint8_t)(0xffu << (n % 8));
		memset(d - 1, 0x5a, (n + 2) * 4);
		tally_sum_sign_unpack(d, bref, n, scale);
		for (size_t i = 0; i < n; i++)
			ob_dref[i] = ob_pm(ob_bit(bref, i), scale);
		ob_check_f32("sign_unpack", isa, n, off, d, ob_dref);
		memcpy(d, ob_d0, n * 4);
		tally_sum_sign_unpack_acc(d, bref, n, scale);
		for (size_t i = 0; i < n; i++)
			ob_dref[i] = st_add(ob_d0[i], ob_pm(ob_bit(bref, i), scale));
		ob_check_f32("sign_unpack_acc", isa, n, off, d, ob_dref);
		if (n % 8)
			bref[nb - 1] &= (uint8_t)~(0xffu << (n % 8));
		/* the sum of squares of x */
		got_ss = tally_sum_f32_sumsq(x, n);
		if (isnan(ss) ? !isnan(got_ss) : memcmp(&got_ss, &ss, 8))
			fail_msg("f32_sumsq on %s, n=%zu: got %a want %a", isa, n, got_ss, ss);
		/* compress: x + e0, error in place */
		memset(e - 1, 0x5a, 4), memset(e + n, 0x5a, 4);
		memcpy(e, ob_e0, n * 4);
		memset(b - 1, OB_GUARD, nb + 2);
		sc = tally_sum_onebit_compress(b, e, x, n);
		if (st_bits(sc) != st_bits(sc_ref))
			fail_msg("onebit_compress on %s, n=%zu: scale %08x want %08x", isa, n,
				 st_bits(sc), st_bits(sc_ref));
		ob_check_bits("onebit_compress bits", isa, n, b, bref);
		ob_check_f32("onebit_compress err", isa, n, off, e, ob_eref);
	}
}

static void ob_all(enum ob_data kind)
{
	static const uint32_t scales[] = { 0x3ec00000, 0x00012345, 0x7fa00005, 0xff800000,
					   0x00000000, 0xc0200000 };
	static const size_t big[] = { 1001, 4099, 65537, OB_BIG };

	for (size_t n = 0; n <= 200; n++)
		ob_case(n, n % 13, kind, st_float(scales[n % 6]), n * 7919 + kind);
	for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++)
		ob_case(big[i], (i * 5) % 11, kind, st_float(scales[i]), big[i] + kind);
	tally_sum_set_isa(TALLY_ISA_SCALAR);
}

static void test_ordinary(void **state)
{
	(void)state;
	ob_all(OB_ORDINARY);
}

static void test_finite_edge(void **state)
{
	(void)state;
	ob_all(OB_FINITE_EDGE);
}

static void test_nan_inf(void **state)
{
	(void)state;
	ob_all(OB_ANY_EDGE);
}

/* The sign bit on the edge values one by one: -0 and +0 are 1, NaNs by their sign bit. */
static void test_sign_edges(void **state)
{
	static const uint32_t v[] = { 0x00000000, 0x80000001, 0x80000000, 0xbf800000, 0x00000001,
				      0x807fffff, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000,
				      0x7f800001, 0xff800001, 0x7fffffff, 0xffffffff, 0x007fffff,
				      0xff7fffff };
	const uint8_t want[2] = { 0x55, 0x55 }; /* even entries are the "+" ones */
	float x[16];
	uint8_t b[2];

	(void)state;
	for (int i = 0; i < 16; i++)
		x[i] = st_float(v[i]);
	for (int p = 0; p < ob_nisa; p++) {
		assert_int_equal(tally_sum_set_isa(ob_isas[p]), 0);
		for (size_t n = 1; n <= 16; n++) {
			memset(b, 0xff, sizeof(b));
			tally_sum_sign_pack(b, x, n);
			for (size_t i = 0; i < n; i++)
				if (ob_bit(b, i) != (i % 2 == 0))
					fail_msg("%s: sign of %08x is %u", tally_sum_isa_name(ob_isas[p]),
						 v[i], ob_bit(b, i));
			if (n % 8 && (b[(n - 1) / 8] >> (n % 8)))
				fail_msg("%s n=%zu: padding bits set", tally_sum_isa_name(ob_isas[p]), n);
		}
		assert_memory_equal(b, want, 2);
	}
	tally_sum_set_isa(TALLY_ISA_SCALAR);
}

/* Error feedback in f64 on every path's result (they are equal, see above): e_new is
 * c - scale*sign(c) rounded once to f32 (exact where Sterbenz applies: scale/2 <= |c| <=
 * 2 scale), scale is the RMS of c, and the bits are the signs of c. */
static void test_error_feedback(void **state)
{
	static const size_t ns[] = { 1, 7, 31, 32, 33, 200, 4099, 65537 };

	(void)state;
	for (int p = 0; p < ob_nisa; p++) {
		assert_int_equal(tally_sum_set_isa(ob_isas[p]), 0);
		for (size_t t = 0; t < sizeof(ns) / sizeof(ns[0]); t++) {
			const size_t n = ns[t];
			uint64_t s = 77 + t;
			long double sum = 0;
			float sc;

			ob_fill(ob_x, n, &s, t % 2 ? OB_FINITE_EDGE : OB_ORDINARY);
			ob_fill(ob_e0, n, &s, OB_ORDINARY);
			memcpy(ob_e, ob_e0, n * 4);
			sc = tally_sum_onebit_compress(ob_b, ob_e, ob_x, n);
			for (size_t i = 0; i < n; i++) {
				float c = ob_x[i] + ob_e0[i];
				double sg = c >= 0 ? 1.0 : -1.0, want = (double)c - sg * (double)sc;
				double ulp = (double)nextafterf(fabsf(ob_e[i]), INFINITY) - fabsf(ob_e[i]);

				sum += (long double)c * c;
				assert_int_equal(ob_bit(ob_b, i), c >= 0);
				if (fabs((double)ob_e[i] - want) > ulp / 2)
					fail_msg("n=%zu [%zu]: e %a, c - s*scale = %a", n, i, (double)ob_e[i], want);
				if (fabsf(c) >= sc / 2 && fabsf(c) <= 2 * sc && (double)ob_e[i] + sg * sc != (double)c)
					fail_msg("n=%zu [%zu]: e + s*scale != c (exact case)", n, i);
			}
			if (fabsl(sqrtl(sum / n) - sc) > 0x1p-23L * sc)
				fail_msg("n=%zu: scale %a, RMS %La", n, (double)sc, sqrtl(sum / n));
		}
	}
	tally_sum_set_isa(TALLY_ISA_SCALAR);
}

/* The f64 summation order, on data where it shows: a few 2^30 (squares 2^60, ulp 2^8) among
 * 1, 4, 8, 16 (squares 1 .. 256: lost or kept by the rounding depending on how they group).
 * The data must tell the documented order from a plain left-to-right sum. */
static void test_sumsq_order(void **state)
{
	static const float small[] = { 1.0f, 4.0f, 8.0f, 16.0f, 0x1p30f };
	int differs = 0;

	(void)state;
	for (size_t n = 1; n <= 4200; n += n < 200 ? 1 : 401) {
		uint64_t s = n * 13;
		double want, seq = 0;

		for (size_t i = 0; i < n; i++) {
			uint64_t r = st_rand(&s);

			ob_x[i] = (r & 1 ? -1 : 1) * small[(r >> 8) % 23 == 0 ? 4 : (r >> 16) % 4];
			seq += (double)ob_x[i] * ob_x[i];
		}
		want = ob_ref_sumsq(ob_x, n);
		differs += want != seq;
		for (int p = 0; p < ob_nisa; p++) {
			double got;

			assert_int_equal(tally_sum_set_isa(ob_isas[p]), 0);
			got = tally_sum_f32_sumsq(ob_x, n);
			if (got != want)
				fail_msg("f32_sumsq on %s, n=%zu: got %a want %a (left to right %a)",
					 tally_sum_isa_name(ob_isas[p]), n, got, want, seq);
		}
	}
	if (differs < 10)
		fail_msg("the data tells the order from left to right in %d cases only", differs);
	print_message("sumsq order: %d of the data sets differ from a left-to-right sum\n", differs);
	tally_sum_set_isa(TALLY_ISA_SCALAR);
}

/* A caller with FTZ+DAZ (and round toward zero) gets the same bits: subnormal data. */
static void test_mxcsr(void **state)
{
	const unsigned saved = _mm_getcsr();
	const size_t n = 4099;

	(void)state;
	for (int p = 0; p < ob_nisa; p++) {
		uint64_t s = 5;
		float sc, sc2;

		assert_int_equal(tally_sum_set_isa(ob_isas[p]), 0);
		ob_fill(ob_x, n, &s, OB_FINITE_EDGE);
		for (size_t i = 0; i < n; i += 3)
			ob_x[i] = st_float(0x00000100u + (uint32_t)i); /* subnormals */
		memset(ob_e, 0, n * 4), memset(ob_eref, 0, n * 4);
		sc = tally_sum_onebit_compress(ob_b, ob_e, ob_x, n);
		memcpy(ob_d, ob_x, n * 4);
		tally_sum_sign_unpack_acc(ob_d, ob_b, n, st_float(0x00000123u));
		_mm_setcsr(saved | 0x8040u | 0x6000u);
		sc2 = tally_sum_onebit_compress(ob_bref, ob_eref, ob_x, n);
		memcpy(ob_dref, ob_x, n * 4);
		tally_sum_sign_unpack_acc(ob_dref, ob_b, n, st_float(0x00000123u));
		_mm_setcsr(saved);
		assert_int_equal(st_bits(sc), st_bits(sc2));
		assert_memory_equal(ob_b, ob_bref, (n + 7) / 8);
		assert_memory_equal(ob_e, ob_eref, n * 4);
		assert_memory_equal(ob_d, ob_dref, n * 4);
	}
	tally_sum_set_isa(TALLY_ISA_SCALAR);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sign_edges),   cmocka_unit_test(test_ordinary),
		cmocka_unit_test(test_finite_edge),  cmocka_unit_test(test_nan_inf),
		cmocka_unit_test(test_error_feedback), cmocka_unit_test(test_sumsq_order),
		cmocka_unit_test(test_mxcsr),
	};

	return cmocka_run_group_tests(tests, ob_setup, ob_teardown);
}
