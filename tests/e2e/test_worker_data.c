/* SPDX-License-Identifier: Apache-2.0
 * test_worker_data.c — tally-worker's seeded data and its checker: the same (seed, rank,
 * key, round) always gives the same data, different ones differ, a correct sum in any order
 * passes, and a wrong one (one element off) is caught.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "worker_data.h"

#define N 3000
#define W 4

/* Sum ranks in reverse order in f32 (a different order than the checker's reference). */
static void sum_reverse(const struct wd_gen *g, uint32_t key, uint32_t round, void *out)
{
	static uint8_t buf[N * 4];
	float acc[N];
	size_t es = tally_dtype_size(g->dtype);

	for (int r = W - 1; r >= 0; r--) {
		wd_fill(g, (uint32_t)r, key, round, 0, N, buf);
		for (size_t i = 0; i < N; i++) {
			float v;

			if (g->dtype == TALLY_DT_F32)
				memcpy(&v, buf + i * 4, 4);
			else if (g->dtype == TALLY_DT_BF16)
				v = tally_bf16_to_f32(((uint16_t *)buf)[i]);
			else
				v = tally_f16_to_f32(((uint16_t *)buf)[i]);
			acc[i] = r == W - 1 ? v : acc[i] + v;
		}
	}
	for (size_t i = 0; i < N; i++) {
		if (es == 4)
			memcpy((uint8_t *)out + i * 4, &acc[i], 4);
		else {
			uint16_t h = g->dtype == TALLY_DT_BF16 ? tally_f32_to_bf16(acc[i]) :
								 tally_f32_to_f16(acc[i]);
			memcpy((uint8_t *)out + i * 2, &h, 2);
		}
	}
}

static void test_fill_is_a_function_of_its_inputs(void **state)
{
	struct wd_gen g = { .seed = 42, .dtype = TALLY_DT_F32 };
	float a[N], b[N], part[100];

	(void)state;
	wd_fill(&g, 1, 2, 3, 0, N, a);
	wd_fill(&g, 1, 2, 3, 0, N, b);
	assert_memory_equal(a, b, sizeof(a));
	wd_fill(&g, 1, 2, 3, 500, 100, part); /* any sub-range gives the same elements */
	assert_memory_equal(a + 500, part, sizeof(part));
	wd_fill(&g, 2, 2, 3, 0, N, b);
	assert_memory_not_equal(a, b, sizeof(a));
	wd_fill(&g, 1, 2, 4, 0, N, b);
	assert_memory_not_equal(a, b, sizeof(a));
	g.seed = 43;
	wd_fill(&g, 1, 2, 3, 0, N, b);
	assert_memory_not_equal(a, b, sizeof(a));
}

static void check(enum tally_dtype dt, enum wd_values vals, int bit_exact, int corrupt,
		  int expect_bad)
{
	struct wd_gen g = { .seed = 7, .dtype = dt, .values = vals };
	struct wd_check chk = { 0 };
	static uint8_t got[N * 4];

	sum_reverse(&g, 5, 1, got);
	if (corrupt) {
		if (dt == TALLY_DT_F32) {
			float v;

			memcpy(&v, got + 1234 * 4, 4);
			v = v * 1.001f + 0.01f;
			memcpy(got + 1234 * 4, &v, 4);
		} else {
			((uint16_t *)got)[1234] += 2; /* two ulps of the wire dtype */
		}
	}
	wd_verify(&g, W, 5, 1, 0, N, got, bit_exact, &chk);
	assert_int_equal(chk.checked, N);
	assert_int_equal(chk.mismatches, expect_bad ? 1 : 0);
	if (expect_bad)
		assert_non_null(strstr(chk.first, "element 1234"));
}

static void test_exact_values_any_order(void **state)
{
	(void)state;
	check(TALLY_DT_F32, WD_EXACT, 1, 0, 0);
	check(TALLY_DT_BF16, WD_EXACT, 1, 0, 0);
	check(TALLY_DT_F16, WD_EXACT, 1, 0, 0);
	check(TALLY_DT_F32, WD_EXACT, 1, 1, 1);
	check(TALLY_DT_BF16, WD_EXACT, 1, 1, 1);
}

static void test_random_values_bounded(void **state)
{
	(void)state;
	check(TALLY_DT_F32, WD_RANDOM, 0, 0, 0);
	check(TALLY_DT_BF16, WD_RANDOM, 0, 0, 0);
	check(TALLY_DT_F16, WD_RANDOM, 0, 0, 0);
	check(TALLY_DT_F32, WD_RANDOM, 0, 1, 1);
	check(TALLY_DT_BF16, WD_RANDOM, 0, 1, 1);
}

static void test_random_order_matters_bit_exact(void **state)
{
	struct wd_gen g = { .seed = 7, .dtype = TALLY_DT_F32, .values = WD_RANDOM };
	struct wd_check chk = { 0 };
	static float got[N];

	(void)state;
	/* Reverse order differs from rank order in some elements: the bit-exact check (meant
	 * for deterministic keys) must notice, which shows the bounded check is needed. */
	sum_reverse(&g, 5, 1, got);
	wd_verify(&g, W, 5, 1, 0, N, got, 1, &chk);
	assert_true(chk.mismatches > 0);
}

static void test_i32_wraps(void **state)
{
	struct wd_gen g = { .seed = 9, .dtype = TALLY_DT_I32 };
	struct wd_check chk = { 0 };
	int32_t buf[N];
	uint32_t acc[N] = { 0 };

	(void)state;
	for (uint32_t r = 0; r < W; r++) {
		wd_fill(&g, r, 1, 0, 0, N, buf);
		for (size_t i = 0; i < N; i++)
			acc[i] += (uint32_t)buf[i];
	}
	wd_verify(&g, W, 1, 0, 0, N, acc, 1, &chk);
	assert_int_equal(chk.mismatches, 0);
	acc[17]++;
	wd_verify(&g, W, 1, 0, 0, N, acc, 1, &chk);
	assert_int_equal(chk.mismatches, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fill_is_a_function_of_its_inputs),
		cmocka_unit_test(test_exact_values_any_order),
		cmocka_unit_test(test_random_values_bounded),
		cmocka_unit_test(test_random_order_matters_bit_exact),
		cmocka_unit_test(test_i32_wraps),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
