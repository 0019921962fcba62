/* SPDX-License-Identifier: Apache-2.0
 * test_failover_replan.c — the re-plan after appliances are gone (gpu_agent/agent/agent_replan.c):
 * the same answer wherever it is computed (every rank, any order of discovering the gone
 * set, a table grown after the failover), only the gone appliances' keys move, and those
 * spread over the survivors in proportion to their shares. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "agent_internal.h"

#define NP 997

static unsigned home[NP];
static uint64_t bytes[NP];

/* A table like agent_plan makes it: 4 appliances, rates 100/100/100/200 Gbit/s. */
static void make_table(struct agent_plan *p)
{
	struct tally_agent_cfg cfg;

	memset(&cfg, 0, sizeof(cfg));
	cfg.nappliances = 4;
	for (unsigned i = 0; i < 4; i++)
		cfg.appliances[i].rate_gbps = i == 3 ? 200.0 : 100.0;
	assert_int_equal(agent_plan_init(p, &cfg), 0);
	struct agent_plan q = *p;
	for (unsigned i = 0; i < NP; i++) {
		bytes[i] = 4096u * (1 + (i * 7919u) % 61u); /* uneven partitions */
		home[i] = agent_plan_place(&q, bytes[i]);
	}
}

static void replan(const struct agent_plan *p, uint32_t gone, unsigned n, int *out)
{
	struct agent_replan r;

	agent_replan_begin(&r, p, gone);
	for (unsigned i = 0; i < n; i++)
		out[i] = agent_replan_next(&r, home[i], bytes[i]);
}

static void test_only_gone_keys_move(void **state)
{
	(void)state;
	struct agent_plan p;
	int out[NP];

	make_table(&p);
	replan(&p, 1u << 1, NP, out);
	for (unsigned i = 0; i < NP; i++) {
		assert_true(out[i] >= 0 && out[i] != 1);
		if (home[i] != 1)
			assert_int_equal(out[i], (int)home[i]);
	}
	/* nobody gone: the plan itself */
	replan(&p, 0, NP, out);
	for (unsigned i = 0; i < NP; i++)
		assert_int_equal(out[i], (int)home[i]);
}

static void test_same_on_every_rank(void **state)
{
	(void)state;
	struct agent_plan p, p2;
	int a[NP], b[NP];

	make_table(&p);
	make_table(&p2); /* another rank builds its own plan from the same declarations */
	/* gone set learnt in another order ({2} then {2,0} vs at once) gives one answer */
	replan(&p, 1u << 2, NP, a);
	replan(&p, (1u << 2) | 1u, NP, a);
	replan(&p2, 1u | (1u << 2), NP, b);
	assert_memory_equal(a, b, sizeof(a));
	/* a tensor declared after the failover: the prefix is unchanged */
	int c[NP];
	replan(&p2, 1u | (1u << 2), NP / 2, c);
	assert_memory_equal(a, c, sizeof(int) * (NP / 2));
}

static void test_balanced_over_survivors(void **state)
{
	(void)state;
	struct agent_plan p;
	int out[NP];
	double load[4] = {0}, total = 0, moved = 0;

	make_table(&p);
	replan(&p, 1u << 0, NP, out);
	for (unsigned i = 0; i < NP; i++) {
		load[out[i]] += (double)bytes[i];
		total += (double)bytes[i];
		if (home[i] == 0)
			moved += (double)bytes[i];
	}
	assert_true(moved > 0);
	assert_true(load[0] == 0);
	/* survivors 1, 2 (share 1) and 3 (share 2): loads in proportion 1:1:2 within one
	 * largest partition */
	double unit = total / 4.0, maxpart = 4096.0 * 61;
	printf("# loads after appliance 0 gone: %.0f %.0f %.0f (unit %.0f)\n", load[1], load[2],
	       load[3], unit);
	assert_true(load[1] > unit - maxpart && load[1] < unit + maxpart);
	assert_true(load[2] > unit - maxpart && load[2] < unit + maxpart);
	assert_true(load[3] > 2 * unit - maxpart && load[3] < 2 * unit + maxpart);
}

static void test_all_gone(void **state)
{
	(void)state;
	struct agent_plan p;
	int out[NP];

	make_table(&p);
	replan(&p, 0xf, 3, out);
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(out[i], -ENODEV);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_only_gone_keys_move),
		cmocka_unit_test(test_same_on_every_rank),
		cmocka_unit_test(test_balanced_over_survivors),
		cmocka_unit_test(test_all_gone),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
