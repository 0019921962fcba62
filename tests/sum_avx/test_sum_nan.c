/* SPDX-License-Identifier: Apache-2.0
 * test_sum_nan.c — NaN operands give the same bits on every path (scalar, avx2, avx512 with
 * and without its AVX512_BF16 table), and the bits tally_sum.h promises: the first NaN operand
 * in summation order, quieted; an invalid operation (Inf - Inf, 0 * Inf) the default NaN.
 *
 * Operands are half NaNs with distinct payloads (both signs, quiet and signalling), the rest
 * ±Inf and ordinary values, so both-NaN, NaN + Inf and Inf - Inf meet at every position for
 * n = 0..200, large odd n and above the streaming-store size; misaligned by a few elements.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "sum_impl.h" /* sum_test_set_cpu_mask, SUM_CPU_BF16 */
#include "sum_test_util.h"

#define NT_SMALL 4200                /* k-way with many sources: up to this n */
#define NT_BIG ((2u << 20) + 64)     /* above the 8 MiB streaming-store size */
#define NT_SLACK 16                  /* room for the misalignment offsets */

static const uint32_t nan32[] = {
	0x7fc00001, 0xffc54321, 0x7fbfffff, 0xff800003, 0x7fe0f00f, 0xffffffff, 0x7f800001, 0xffa5a5a5,
};
static const uint16_t nan16[] = { 0x7e01, 0xfe55, 0x7c01, 0xfd23, 0x7fff, 0xffff, 0x7d00, 0xfc3f };
static const uint16_t nanbf[] = { 0x7fc1, 0xffc5, 0x7f81, 0xffa3, 0x7fff, 0xffff, 0x7f90, 0xff81 };

/* ---- the paths ---- */
struct nt_path {
	enum tally_isa isa;
	unsigned mask; /* sum_test_set_cpu_mask */
	const char *name;
};

static struct nt_path nt_paths[4];
static int nt_npaths;

static void nt_use(const struct nt_path *p)
{
	sum_test_set_cpu_mask(p->mask);
	assert_int_equal(tally_sum_set_isa(p->isa), 0);
}

/* ---- the rule (st_add, st_mul in sum_test_util.h) on bits ---- */
static uint32_t nt_add(uint32_t a, uint32_t b)
{
	return st_bits(st_add(st_float(a), st_float(b)));
}

static uint32_t nt_mul(uint32_t a, uint32_t b)
{
	return st_bits(st_mul(st_float(a), st_float(b)));
}

/* 16-bit source widened: f16 NaNs come out quiet, bf16 is a plain shift (bits kept). */
static uint32_t nt_wide(uint16_t h, int bf)
{
	return bf ? (uint32_t)h << 16 : st_bits(tally_f16_to_f32(h));
}

/* ---- data: 1/2 NaN, 1/8 +Inf, 1/8 -Inf, 1/4 ordinary ---- */
static void nt_gen32(uint32_t *p, size_t n, uint64_t *s)
{
	static const uint32_t other[] = { 0x7f800000, 0xff800000, 0x3fc00000, 0xc0100000 };

	for (size_t i = 0; i < n; i++) {
		uint64_t r = st_rand(s);

		p[i] = (r & 1) ? nan32[(r >> 8) % 8] : other[(r >> 4) % 4];
	}
}

static void nt_gen16(uint16_t *p, size_t n, uint64_t *s, int bf)
{
	static const uint16_t o16[] = { 0x7c00, 0xfc00, 0x3e00, 0xc080 };
	static const uint16_t obf[] = { 0x7f80, 0xff80, 0x3fc0, 0xc010 };

	for (size_t i = 0; i < n; i++) {
		uint64_t r = st_rand(s);

		if (r & 1)
			p[i] = (bf ? nanbf : nan16)[(r >> 8) % 8];
		else
			p[i] = (bf ? obf : o16)[(r >> 4) % 4];
	}
}

/* ---- buffers, allocated once ---- */
static uint32_t *nt_d0, *nt_d, *nt_ref, *nt_src[TALLY_SUM_MAX_WAYS];

static int nt_setup(void **state)
{
	enum tally_isa isas[TALLY_ISA_COUNT];
	int c = st_isas(isas);

	(void)state;
	for (int i = 0; i < c; i++)
		nt_paths[nt_npaths++] = (struct nt_path){ isas[i], ~0u, tally_sum_isa_name(isas[i]) };
	if (c && isas[c - 1] == TALLY_ISA_AVX512)
		nt_paths[nt_npaths++] = (struct nt_path){ TALLY_ISA_AVX512, ~SUM_CPU_BF16, "avx512-nobf16" };
	nt_d0 = malloc((NT_BIG + NT_SLACK) * 4);
	nt_d = malloc((NT_BIG + NT_SLACK) * 4);
	nt_ref = malloc((NT_BIG + NT_SLACK) * 4);
	if (!nt_d0 || !nt_d || !nt_ref)
		return -1;
	for (int j = 0; j < TALLY_SUM_MAX_WAYS; j++)
		if (!(nt_src[j] = malloc(((j < 3 ? NT_BIG : NT_SMALL) + NT_SLACK) * 4)))
			return -1;
	return 0;
}

static int nt_teardown(void **state)
{
	(void)state;
	free(nt_d0);
	free(nt_d);
	free(nt_ref);
	for (int j = 0; j < TALLY_SUM_MAX_WAYS; j++)
		free(nt_src[j]);
	sum_test_set_cpu_mask(~0u);
	return 0;
}

/* First differing element (esz 2 or 4 bytes), or -1. */
static long nt_diff(const void *a, const void *b, size_t n, size_t esz)
{
	return esz == 2 ? st_diff16(a, b, n) : st_diff32(a, b, n);
}

static uint32_t nt_elem(const void *p, size_t i, size_t esz)
{
	return esz == 2 ? ((const uint16_t *)p)[i] : ((const uint32_t *)p)[i];
}

/* ---- element-wise operations ---- */
enum nt_op {
	NT_F32_ACC, NT_F32_ADD, NT_F16_ACC, NT_BF16_ACC, NT_F16_TO_F32, NT_BF16_TO_F32,
	NT_F32_TO_F16, NT_F32_TO_BF16, NT_F32_SCALE, NT_OP_COUNT
};

static const char *const nt_op_names[NT_OP_COUNT] = {
	"f32_acc", "f32_add", "f16_acc", "bf16_acc", "f16_to_f32", "bf16_to_f32",
	"f32_to_f16", "f32_to_bf16", "f32_scale",
};

/* source element size, 1 if bf16, whether dst is read, dst element size */
static const struct { size_t ssz; int bf; int dst_in; size_t dsz; } nt_shape[NT_OP_COUNT] = {
	[NT_F32_ACC] = { 4, 0, 1, 4 },     [NT_F32_ADD] = { 4, 0, 0, 4 },
	[NT_F16_ACC] = { 2, 0, 1, 4 },     [NT_BF16_ACC] = { 2, 1, 1, 4 },
	[NT_F16_TO_F32] = { 2, 0, 0, 4 },  [NT_BF16_TO_F32] = { 2, 1, 0, 4 },
	[NT_F32_TO_F16] = { 4, 0, 0, 2 },  [NT_F32_TO_BF16] = { 4, 0, 0, 2 },
	[NT_F32_SCALE] = { 4, 0, 0, 4 },
};

static void nt_ref_op(enum nt_op op, void *d, const void *a, const void *b, size_t n, float sc)
{
	uint32_t *d32 = d;
	uint16_t *d16 = d;
	const uint32_t *a32 = a, *b32 = b;
	const uint16_t *a16 = a;

	for (size_t i = 0; i < n; i++) {
		switch (op) {
		case NT_F32_ACC: d32[i] = nt_add(d32[i], a32[i]); break;
		case NT_F32_ADD: d32[i] = nt_add(a32[i], b32[i]); break;
		case NT_F16_ACC: d32[i] = nt_add(d32[i], nt_wide(a16[i], 0)); break;
		case NT_BF16_ACC: d32[i] = nt_add(d32[i], nt_wide(a16[i], 1)); break;
		case NT_F16_TO_F32: d32[i] = nt_wide(a16[i], 0); break;
		case NT_BF16_TO_F32: d32[i] = nt_wide(a16[i], 1); break;
		case NT_F32_TO_F16: d16[i] = tally_f32_to_f16(st_float(nt_mul(a32[i], st_bits(sc)))); break;
		case NT_F32_TO_BF16: d16[i] = tally_f32_to_bf16(st_float(nt_mul(a32[i], st_bits(sc)))); break;
		case NT_F32_SCALE: d32[i] = nt_mul(a32[i], st_bits(sc)); break;
		default: fail();
		}
	}
}

static void nt_run_op(enum nt_op op, void *d, const void *a, const void *b, size_t n, float sc)
{
	switch (op) {
	case NT_F32_ACC: tally_sum_f32_acc(d, a, n); break;
	case NT_F32_ADD: tally_sum_f32_add(d, a, b, n); break;
	case NT_F16_ACC: tally_sum_f16_acc(d, a, n); break;
	case NT_BF16_ACC: tally_sum_bf16_acc(d, a, n); break;
	case NT_F16_TO_F32: tally_sum_f16_to_f32(d, a, n); break;
	case NT_BF16_TO_F32: tally_sum_bf16_to_f32(d, a, n); break;
	case NT_F32_TO_F16: tally_sum_f32_to_f16(d, a, n, sc); break;
	case NT_F32_TO_BF16: tally_sum_f32_to_bf16(d, a, n, sc); break;
	case NT_F32_SCALE: tally_sum_f32_scale(d, a, n, sc); break;
	default: fail();
	}
}

/* One case on every path: dst at element offset `off`, sources at off + 1 and off + 3. */
static void nt_case(enum nt_op op, size_t n, size_t off, float sc, uint64_t seed)
{
	const size_t ssz = nt_shape[op].ssz, dsz = nt_shape[op].dsz;
	void *a = (char *)nt_src[0] + (off + 1) * ssz, *b = (char *)nt_src[1] + (off + 3) * ssz;
	void *d = (char *)nt_d + off * dsz, *d0 = (char *)nt_d0 + off * dsz;
	void *ref = (char *)nt_ref + off * dsz;
	uint64_t s = seed;

	nt_gen32(d0, (n * dsz + 3) / 4, &s);
	if (ssz == 2) {
		nt_gen16(a, n, &s, nt_shape[op].bf);
	} else {
		nt_gen32(a, n, &s);
		nt_gen32(b, n, &s);
	}
	memcpy(ref, d0, n * dsz);
	nt_ref_op(op, ref, a, b, n, sc);
	for (int p = 0; p < nt_npaths; p++) {
		long bad;

		memcpy(d, d0, n * dsz);
		nt_use(&nt_paths[p]);
		nt_run_op(op, d, a, b, n, sc);
		bad = nt_diff(ref, d, n, dsz);
		if (bad >= 0)
			fail_msg("%s on %s, n=%zu off=%zu scale=%08x: [%ld] dst %08x src %08x %08x: "
				 "got %08x want %08x", nt_op_names[op], nt_paths[p].name, n, off,
				 st_bits(sc), bad, nt_shape[op].dst_in ? nt_elem(d0, bad, dsz) : 0,
				 nt_elem(a, bad, ssz), op == NT_F32_ADD ? nt_elem(b, bad, 4) : 0,
				 nt_elem(d, bad, dsz), nt_elem(ref, bad, dsz));
	}
}

static void nt_op_all(enum nt_op op)
{
	/* a NaN scale meets NaN data (both payloads), 0 and Inf make 0 * Inf */
	static const uint32_t scales[] = { 0x3f800000, 0x7fa00005, 0xffc00077, 0x00000000,
					   0x7f800000, 0x3e800000 };
	const size_t nsc = sizeof(scales) / sizeof(scales[0]);
	static const size_t big[] = { 1001, 4099, 65537, NT_BIG - 27 };

	for (size_t n = 0; n <= 200; n++)
		nt_case(op, n, n % 13, st_float(scales[n % nsc]), n * 977 + op);
	for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++)
		for (size_t j = 0; j < nsc; j += i + 1)
			nt_case(op, big[i], (i + j) % 11, st_float(scales[j]), big[i] + j);
	sum_test_set_cpu_mask(~0u);
	tally_sum_set_isa(TALLY_ISA_SCALAR);
}

#define NT_TEST(name, op) \
	static void test_##name(void **state) { (void)state; nt_op_all(op); }
NT_TEST(f32_acc, NT_F32_ACC)
NT_TEST(f32_add, NT_F32_ADD)
NT_TEST(f16_acc, NT_F16_ACC)
NT_TEST(bf16_acc, NT_BF16_ACC)
NT_TEST(f16_to_f32, NT_F16_TO_F32)
NT_TEST(bf16_to_f32, NT_BF16_TO_F32)
NT_TEST(f32_to_f16, NT_F32_TO_F16)
NT_TEST(f32_to_bf16, NT_F32_TO_BF16)
NT_TEST(f32_scale, NT_F32_SCALE)

/* ---- k-way: ((s0 + s1) + s2) + ..., the first NaN in source order wins ---- */
static void nt_kway_run(enum tally_dtype dt, const void *const *sp, unsigned k, size_t n)
{
	switch (dt) {
	case TALLY_DT_F32: tally_sum_f32_kway((float *)nt_d, (const float *const *)sp, k, n); break;
	case TALLY_DT_F16: tally_sum_f16_kway((float *)nt_d, (const uint16_t *const *)sp, k, n); break;
	case TALLY_DT_BF16: tally_sum_bf16_kway((float *)nt_d, (const uint16_t *const *)sp, k, n); break;
	default: fail();
	}
}

static void nt_kway_case(enum tally_dtype dt, unsigned k, size_t n, size_t off, uint64_t seed)
{
	const size_t ssz = tally_dtype_size(dt);
	const int bf = dt == TALLY_DT_BF16;
	const void *sp[TALLY_SUM_MAX_WAYS];
	uint64_t s = seed;

	for (unsigned j = 0; j < k; j++) {
		void *p = (char *)nt_src[j] + (off + j) % NT_SLACK * ssz;

		if (ssz == 2)
			nt_gen16(p, n, &s, bf);
		else
			nt_gen32(p, n, &s);
		sp[j] = p;
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t acc = ssz == 2 ? nt_wide(((const uint16_t *)sp[0])[i], bf) : ((const uint32_t *)sp[0])[i];

		for (unsigned j = 1; j < k; j++)
			acc = nt_add(acc, ssz == 2 ? nt_wide(((const uint16_t *)sp[j])[i], bf)
						   : ((const uint32_t *)sp[j])[i]);
		nt_ref[i] = acc;
	}
	for (int p = 0; p < nt_npaths; p++) {
		long bad;

		memset(nt_d, 0x5a, n * 4);
		nt_use(&nt_paths[p]);
		nt_kway_run(dt, sp, k, n);
		bad = st_diff32(nt_ref, nt_d, n);
		if (bad >= 0)
			fail_msg("kway %s k=%u on %s, n=%zu off=%zu: [%ld] s0 %08x s1 %08x: got %08x "
				 "want %08x", tally_dtype_name(dt), k, nt_paths[p].name, n, off, bad,
				 nt_elem(sp[0], bad, ssz), k > 1 ? nt_elem(sp[1], bad, ssz) : 0,
				 nt_d[bad], nt_ref[bad]);
	}
}

static void test_kway(void **state)
{
	static const unsigned ks[] = { 1, 2, 3, 4, 5, 8, 64 };
	static const enum tally_dtype dts[] = { TALLY_DT_F32, TALLY_DT_F16, TALLY_DT_BF16 };

	(void)state;
	for (size_t t = 0; t < 3; t++)
		for (size_t ki = 0; ki < sizeof(ks) / sizeof(ks[0]); ki++) {
			unsigned k = ks[ki];

			for (size_t n = 0; n <= 200; n += (k > 8 ? 3 : 1))
				nt_kway_case(dts[t], k, n, n % 7, n * 31 + k);
			nt_kway_case(dts[t], k, 4099, k % 5, k);
			if (k <= 3) /* the streaming-store path */
				nt_kway_case(dts[t], k, NT_BIG - 45, 2, k + 7);
		}
	sum_test_set_cpu_mask(~0u);
	tally_sum_set_isa(TALLY_ISA_SCALAR);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_f32_acc),     cmocka_unit_test(test_f32_add),
		cmocka_unit_test(test_f16_acc),     cmocka_unit_test(test_bf16_acc),
		cmocka_unit_test(test_f16_to_f32),  cmocka_unit_test(test_bf16_to_f32),
		cmocka_unit_test(test_f32_to_f16),  cmocka_unit_test(test_f32_to_bf16),
		cmocka_unit_test(test_f32_scale),   cmocka_unit_test(test_kway),
	};

	return cmocka_run_group_tests(tests, nt_setup, nt_teardown);
}
