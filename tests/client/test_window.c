/* SPDX-License-Identifier: Apache-2.0
 * test_window.c — the delay-based window (client_cwnd.c) on the simulated network with the
 * real engine: a fast path keeps the whole window; a bottleneck link (simnet ns_per_kib)
 * that turns what is in flight into queueing delay has the window cut until the queueing
 * delay is near its target, and the window grows back to cfg.window once the bottleneck is
 * gone; with loss on the bottleneck every sum is still exact.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sys_harness.h"

#define US 1000ull
#define MS 1000000ull
/* The cap: 2 rounds x 192 chunks may be open per worker. sys_run starts each key's next
 * round as soon as its last one completed, so the workers' windows hold different keys'
 * chunks; with a cap of 64 (fixed window or this one) both windows filled with held chunks
 * the other worker had not pushed yet, and the run stalled (the agent avoids this by
 * starting partitions in the same order on every rank). */
#define WINDOW 128u
#define SLOW_NS_PER_KIB (50 * US) /* 20 KiB/ms: a full window (128 x 1 KiB) queues 6.6 ms */

static struct sys_cfg win_cfg(unsigned W, uint64_t seed, double loss)
{
	struct sys_cfg c;

	memset(&c, 0, sizeof(c));
	c.seed = seed;
	c.W = W;
	c.M = 1;
	c.up = (struct simnet_link){ .loss = loss, .delay_ns = 5 * US, .jitter_ns = 2 * US };
	c.down = c.up;
	/* 3 x 64 chunks of 1 KiB per round on one core: more than the window */
	c.nkeys = 3;
	for (unsigned k = 0; k < 3; k++)
		c.keys[k] = (struct sys_key){ .key = 60 + k, .nelems = 64 * 256,
					      .chunk_elems = 256, .dtype = TALLY_DT_F32 };
	c.keys[2].dtype = TALLY_DT_BF16;
	c.keys[2].chunk_elems = 512;
	c.window = WINDOW;
	c.give_up_ms = 20000;
	return c;
}

static void set_rate(struct sys *s, uint64_t ns_per_kib, double loss)
{
	struct simnet_link l = s->cfg.up;

	l.ns_per_kib = ns_per_kib;
	l.loss = loss;
	simnet_set_link(s->net, &l, &l);
}

/* Phases, switched when worker 0 finishes a round of key 0: fast, slow (bottleneck), fast. */
struct phases {
	uint32_t slow_from, fast_from;
	struct tally_client_stats at_slow, at_fast; /* worker 0's stats at each switch */
};

static void on_result(void *arg, struct sys *s, unsigned w, unsigned k, uint32_t round,
		      const void *out)
{
	struct phases *ph = arg;

	(void)out;
	if (w != 0 || k != 0)
		return;
	if (round + 1 == ph->slow_from) {
		ph->at_slow = *tally_client_stats(s->cl[0]);
		set_rate(s, SLOW_NS_PER_KIB, s->cfg.up.loss);
	} else if (round + 1 == ph->fast_from) {
		ph->at_fast = *tally_client_stats(s->cl[0]);
		set_rate(s, 0, s->cfg.up.loss);
	}
}

static void print_stats(const char *when, const struct tally_client_stats *st)
{
	print_message("  %s: window %llu, %llu cuts (min %llu), %llu increases, queueing delay "
		      "%llu us (target %llu us), %llu re-sent (%llu on gaps, %llu MISSING), "
		      "%llu probes\n", when,
		      (unsigned long long)st->window_now, (unsigned long long)st->window_decreases,
		      (unsigned long long)st->window_min, (unsigned long long)st->window_increases,
		      (unsigned long long)st->qdelay_us, (unsigned long long)st->qtarget_us,
		      (unsigned long long)st->retransmits, (unsigned long long)st->fast_retransmits,
		      (unsigned long long)st->missing, (unsigned long long)st->probes);
}

/* (1) No loss: the window stays whole on the fast path, is cut on the bottleneck until the
 * queueing delay is near its 1 ms target (a full window would queue 6.6 ms: 128 x 1 KiB at
 * 50 us each, plus the other worker's RESULTs on the way down), and is whole again once
 * the bottleneck is gone. */
static void test_window_follows_queue(void **state)
{
	(void)state;
	struct sys_cfg cfg = win_cfg(2, 21, 0);
	struct sys *s = sys_new(&cfg);
	struct phases ph = { .slow_from = 4, .fast_from = 24 };
	struct sys_hooks hk = { .result = on_result, .arg = &ph };
	const struct tally_client_stats *end;

	sys_run(s, 44, 20000 * MS, &hk);
	end = tally_client_stats(s->cl[0]);
	print_stats("fast", &ph.at_slow);
	print_stats("bottleneck", &ph.at_fast);
	print_stats("fast again", end);
	print_stats("fast again, rank 1", tally_client_stats(s->cl[1]));
	print_message("  appliance: %llu duplicates, %llu refused too early, %llu pushes\n",
		      (unsigned long long)tally_engine_stats(s->eng[0])->duplicates,
		      (unsigned long long)tally_engine_stats(s->eng[0])->drops[TALLY_R_TOO_EARLY],
		      (unsigned long long)(end->pushes + tally_client_stats(s->cl[1])->pushes));
	/* fast: nothing queues, nothing is cut */
	assert_int_equal(ph.at_slow.window_decreases, 0);
	assert_int_equal(ph.at_slow.window_now, WINDOW);
	/* bottleneck: cut, and the queue held near the target instead of a full window's */
	assert_true(ph.at_fast.window_decreases > 0);
	assert_true(ph.at_fast.window_min < WINDOW / 2);
	assert_true(ph.at_fast.qtarget_us == 1000);
	assert_true(ph.at_fast.qdelay_us < 2 * ph.at_fast.qtarget_us);
	/* fast again: grown back to the cap, not cut again */
	assert_int_equal(end->window_now, WINDOW);
	assert_true(end->window_increases > ph.at_fast.window_increases);
	/* no loss: re-sends at most the 0.5% of pushes (a simnet whose jitter
	 * reordered the drained queue once showed here as gap re-sends). Not 0: the gap rule
	 * still re-sends a few pushes the appliance holds here, main's client too (seeds 41,
	 * 51, 61, 71: 22, 20, 17, 40 of 14k pushes, every one a duplicate at the
	 * appliance; seed 21: 0 there, 1 with the quick re-probes of client_slot_due); the
	 * cause is not found yet (no upstream reordering, no push refused TOO_EARLY) */
	uint64_t pushes = end->pushes + tally_client_stats(s->cl[1])->pushes;

	assert_true(sys_retransmits(s) * 200 <= pushes);
	assert_true(tally_engine_stats(s->eng[0])->duplicates * 200 <= pushes);
	sys_free(s);
}

/* (2) The same with 5% loss each way on the bottleneck: the window is cut, every loss is
 * repaired, every sum exact (sys_run checks each), about one re-send per lost packet. */
static void test_window_lossy_exact(void **state)
{
	(void)state;
	struct sys_cfg cfg = win_cfg(2, 22, 0.05);
	struct sys *s = sys_new(&cfg);
	struct phases ph = { .slow_from = 2, .fast_from = 100 };
	struct sys_hooks hk = { .result = on_result, .arg = &ph };
	uint64_t lost0 = simnet_stats(s->net)->lost, lost, retx;

	sys_run(s, 16, 60000 * MS, &hk);
	lost = simnet_stats(s->net)->lost - lost0;
	retx = sys_retransmits(s);
	print_stats("lossy bottleneck, rank 0", tally_client_stats(s->cl[0]));
	print_message("  %llu packets lost, %llu re-sent, %.1f ms virtual\n",
		      (unsigned long long)lost, (unsigned long long)retx,
		      simnet_now(s->net) / 1e6);
	for (unsigned w = 0; w < cfg.W; w++)
		assert_true(tally_client_stats(s->cl[w])->window_decreases > 0);
	assert_true(retx > 0);
	assert_true(retx <= lost + lost / 4);
	sys_free(s);
}

/* (3) A stall is not a loss: worker 1's uplink carries nothing for 100 ms (what it sends
 * waits, in order), so the appliance is silent to that worker. Its timers
 * probe, backed off; no payload is re-sent (the 6-probe safety net re-sends only when the
 * core answered something since the last probe: then those probes were lost), every sum
 * exact. */
struct stall {
	int state; /* 0 before, 1 stalled */
};

static void on_result_stall(void *arg, struct sys *s, unsigned w, unsigned k, uint32_t round,
			    const void *out)
{
	struct stall *st = arg;

	(void)w, (void)out;
	if (st->state == 0 && k == 0 && round == 3) {
		simnet_stall(s->net, 1, 1, 100 * MS);
		st->state = 1;
	}
}

static void test_stall_not_loss(void **state)
{
	(void)state;
	struct sys_cfg cfg = win_cfg(2, 21, 0);
	struct sys *s = sys_new(&cfg);
	struct stall st = { 0 };
	struct sys_hooks hk = { .result = on_result_stall, .arg = &st };

	sys_run(s, 8, 20000 * MS, &hk);
	for (unsigned w = 0; w < cfg.W; w++)
		print_stats(w ? "stall, rank 1" : "stall, rank 0", tally_client_stats(s->cl[w]));
	print_message("  %.1f ms virtual, appliance duplicates %llu\n", simnet_now(s->net) / 1e6,
		      (unsigned long long)tally_engine_stats(s->eng[0])->duplicates);
	assert_int_equal(st.state, 1);
	assert_true(simnet_now(s->net) > 100 * MS); /* it did stall */
	assert_int_equal(sys_retransmits(s), 0);
	assert_int_equal(tally_engine_stats(s->eng[0])->duplicates, 0);
	sys_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_window_follows_queue),
		cmocka_unit_test(test_window_lossy_exact),
		cmocka_unit_test(test_stall_not_loss),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
