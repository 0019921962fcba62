/* SPDX-License-Identifier: Apache-2.0
 * test_sum_select.c — the automatic selection (kernels chosen by size, tally_sum.h) gives the
 * same bits as every forced path (scalar, avx2, avx512 with and without its BF16 table) for
 * the += operations at sizes around the switch: at the real 8 MiB switch, and with the switch
 * moved to a few KiB (sum_test_set_ymm_acc_bytes) to cover many lengths and misalignments.
 * Data: ordinary values, NaNs, Infs, subnormals (sum_test_util.h), so the NaN rule is checked
 * across the switch too. Also: TALLY_ISA=auto / tally_sum_set_auto() select it, a forced path
 * does not.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "sum_impl.h" /* sum_test_set_cpu_mask, sum_test_set_ymm_acc_bytes, SUM_CPU_BF16 */
#include "sum_test_util.h"

#define SEL_SWITCH_N (SUM_A5_YMM_ACC_BYTES / 4)
#define SEL_SLACK 64 /* elements of room for misalignment and the lengths past the switch */
#define SEL_MAX_N (SEL_SWITCH_N + SEL_SLACK)

struct sel_path {
	enum tally_isa isa;
	unsigned mask; /* sum_test_set_cpu_mask */
	const char *name;
};

static struct sel_path sel_paths[5];
static int sel_npaths;
static float *sel_src32, *sel_init, *sel_ref, *sel_out;
static uint16_t *sel_src16;

static int sel_setup(void **state)
{
	enum tally_isa isas[TALLY_ISA_COUNT];
	int n = st_isas(isas);
	uint64_t seed = 0x5e1ec7ed;

	(void)state;
	for (int i = 0; i < n; i++)
		sel_paths[sel_npaths++] = (struct sel_path){ isas[i], ~0u, tally_sum_isa_name(isas[i]) };
	if (n && isas[n - 1] == TALLY_ISA_AVX512) /* the plain AVX-512F table too */
		sel_paths[sel_npaths++] = (struct sel_path){ TALLY_ISA_AVX512, ~SUM_CPU_BF16, "avx512-nobf16" };
	sel_src32 = malloc(SEL_MAX_N * 4);
	sel_init = malloc(SEL_MAX_N * 4);
	sel_ref = aligned_alloc(64, SEL_MAX_N * 4); /* offset 0 is cache-line aligned */
	sel_out = aligned_alloc(64, SEL_MAX_N * 4);
	sel_src16 = malloc(SEL_MAX_N * 2);
	if (!sel_src32 || !sel_init || !sel_ref || !sel_out || !sel_src16)
		return -1;
	st_fill_f32(sel_src32, SEL_MAX_N, &seed);
	st_fill_f32(sel_init, SEL_MAX_N, &seed);
	return 0;
}

static int sel_teardown(void **state)
{
	(void)state;
	free(sel_src32), free(sel_init), free(sel_ref), free(sel_out), free(sel_src16);
	sum_test_set_cpu_mask(~0u);
	tally_sum_set_auto();
	return 0;
}

/* dst += the source of dtype dt from element soff on, n elements. */
static void sel_acc(enum tally_dtype dt, float *dst, size_t soff, size_t n)
{
	const void *src = dt == TALLY_DT_F16 || dt == TALLY_DT_BF16 ? (const void *)(sel_src16 + soff)
								     : (const void *)(sel_src32 + soff);

	tally_sum_acc(dt, dst, src, n);
}

/* One case: the automatic selection's result against every forced path's, bit for bit;
 * dst doff elements past a cache line. */
static void sel_case(enum tally_dtype dt, size_t n, size_t doff, size_t soff)
{
	float *ref = sel_ref + doff, *out = sel_out + doff;

	assert_true(doff + n <= SEL_MAX_N && soff + n <= SEL_MAX_N);
	sum_test_set_cpu_mask(~0u);
	assert_int_equal(tally_sum_set_auto(), 0);
	memcpy(ref, sel_init, n * 4);
	sel_acc(dt, ref, soff, n);
	for (int p = 0; p < sel_npaths; p++) {
		long d;

		sum_test_set_cpu_mask(sel_paths[p].mask);
		assert_int_equal(tally_sum_set_isa(sel_paths[p].isa), 0);
		memcpy(out, sel_init, n * 4);
		sel_acc(dt, out, soff, n);
		d = st_diff32(ref, out, n);
		if (d >= 0)
			fail_msg("%s += n=%zu doff=%zu soff=%zu: auto differs from %s at %ld: %08x vs %08x",
				 tally_dtype_name(dt), n, doff, soff, sel_paths[p].name, d,
				 (unsigned)st_bits(ref[d]), (unsigned)st_bits(out[d]));
	}
}

static const enum tally_dtype sel_dts[] = { TALLY_DT_F32, TALLY_DT_I32, TALLY_DT_F16, TALLY_DT_BF16 };

static void sel_fill16(enum tally_dtype dt)
{
	uint64_t seed = 0xb16b00b5u + (uint64_t)dt;

	st_fill_u16(sel_src16, SEL_MAX_N, &seed, dt == TALLY_DT_BF16);
}

/* The real switch: lengths just below, at and above it, aligned and not. */
static void test_real_switch(void **state)
{
	static const long dn[] = { -33, -1, 0, 1, 7, 31 };

	(void)state;
	for (size_t t = 0; t < sizeof(sel_dts) / sizeof(sel_dts[0]); t++) {
		sel_fill16(sel_dts[t]);
		for (size_t i = 0; i < sizeof(dn) / sizeof(dn[0]); i++) {
			size_t n = (size_t)((long)SEL_SWITCH_N + dn[i]);

			sel_case(sel_dts[t], n, 0, 0);
			sel_case(sel_dts[t], n, 3, 5);
		}
	}
}

/* The switch moved to 4 KiB (1024 elements): every length 1000..1100 and every dst alignment
 * within a cache line, so both kernels' heads, main loops and masked tails meet the switch. */
static void test_moved_switch(void **state)
{
	size_t old = sum_test_set_ymm_acc_bytes(4096);

	(void)state;
	for (size_t t = 0; t < sizeof(sel_dts) / sizeof(sel_dts[0]); t++) {
		sel_fill16(sel_dts[t]);
		for (size_t n = 1000; n <= 1100; n++)
			sel_case(sel_dts[t], n, n % 16, n % 3);
		for (size_t n = 0; n <= 40; n++) /* tiny lengths, switch at 0: the 256-bit kernel */
			sel_case(sel_dts[t], n, n % 16, 1);
	}
	sum_test_set_ymm_acc_bytes(0);
	for (size_t n = 0; n <= 40; n++) {
		sel_fill16(TALLY_DT_BF16);
		sel_case(TALLY_DT_BF16, n, n % 16, 1);
		sel_case(TALLY_DT_F32, n, (n + 5) % 16, 2);
	}
	sum_test_set_ymm_acc_bytes(old);
}

/* TALLY_ISA=auto (or unset) and tally_sum_set_auto() select it; a forced path does not. */
static void test_selection(void **state)
{
	(void)state;
	sum_test_set_cpu_mask(~0u);
	tally_sum_set_default("avx2");
	if (tally_sum_isa_supported(TALLY_ISA_AVX2)) {
		assert_int_equal(tally_sum_init(), 0);
		assert_int_equal(tally_sum_is_auto(), 0);
		assert_int_equal(tally_sum_isa(), TALLY_ISA_AVX2);
	}
	tally_sum_set_default("auto");
	assert_int_equal(tally_sum_init(), 0);
	assert_int_equal(tally_sum_is_auto(), 1);
	assert_int_equal(tally_sum_set_isa(TALLY_ISA_SCALAR), 0);
	assert_int_equal(tally_sum_is_auto(), 0);
	tally_sum_set_default(NULL);
	assert_int_equal(tally_sum_init(), 0);
	assert_int_equal(tally_sum_is_auto(), 1);
	assert_int_equal(tally_sum_set_isa(TALLY_ISA_SCALAR), 0);
	assert_int_equal(tally_sum_set_auto(), 0);
	assert_int_equal(tally_sum_is_auto(), 1);
	assert_int_equal(tally_sum_isa(), sel_paths[sel_npaths - 1].isa);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_selection),
		cmocka_unit_test(test_real_switch),
		cmocka_unit_test(test_moved_switch),
	};

	return cmocka_run_group_tests(tests, sel_setup, sel_teardown);
}
