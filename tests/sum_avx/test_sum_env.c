/* SPDX-License-Identifier: Apache-2.0
 * test_sum_env.c — the first reducer call without tally_sum_init() honours TALLY_ISA, set by
 * meson for each run of this program: argv[1] names the path expected ("best": the best this
 * CPU has, the fallback for an unknown or unsupported name).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tally_sum.h"

static const char *expect;

static void test_lazy_select(void **state)
{
	float d[3] = { 1, 2, 3 }, s[3] = { 0.5f, 0.25f, -3 };
	enum tally_isa want = TALLY_ISA_SCALAR;

	(void)state;
	if (!strcmp(expect, "best")) {
		for (int i = 0; i < TALLY_ISA_COUNT; i++)
			if (tally_sum_isa_supported((enum tally_isa)i))
				want = (enum tally_isa)i;
	} else {
		for (int i = 0; i < TALLY_ISA_COUNT; i++)
			if (!strcmp(expect, tally_sum_isa_name((enum tally_isa)i)))
				want = (enum tally_isa)i;
		if (!tally_sum_isa_supported(want))
			skip();
	}
	tally_sum_f32_acc(d, s, 3); /* first call selects */
	assert_true(d[0] == 1.5f && d[1] == 2.25f && d[2] == 0.0f);
	assert_int_equal(tally_sum_isa(), want);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_lazy_select) };

	expect = argc > 1 ? argv[1] : "best";
	tally_sum_set_default(getenv("TALLY_ISA")); /* the program's edge: its environment */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
