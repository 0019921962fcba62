/* SPDX-License-Identifier: Apache-2.0
 * test_system.c — randomized whole-system tests in one process: W client sessions and the
 * real engine (2 appliance cores) on the simulated network, with loss, duplication,
 * reordering and delay. Every result of every worker is checked against the reference sum:
 * bit-exact for deterministic keys and i32; otherwise |r - s| <= (W-1)·2^-24·Σ|x_i| plus
 * half an ulp of the wire dtype (f16/bf16 results are the f32 sum rounded once).
 * Quorum: a straggler is left out, its gradient shows up later, nothing is lost.
 * Give-up: an appliance core that vanishes fails its keys with -ETIMEDOUT and a message.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include <cmocka.h>

#include "sys_harness.h"

#define US 1000ull
#define MS 1000000ull

/* Several keys: every dtype, deterministic and not, sizes not a multiple of the chunk,
 * a one-element key, an automatic chunk size; owners spread over both cores. */
static const struct sys_key base_keys[] = {
	{ .key = 10, .nelems = 1000, .chunk_elems = 256, .dtype = TALLY_DT_F32 },
	{ .key = 11, .nelems = 777, .chunk_elems = 200, .dtype = TALLY_DT_F16 },
	{ .key = 12, .nelems = 300, .chunk_elems = 0, .dtype = TALLY_DT_BF16 },
	{ .key = 13, .nelems = 2500, .chunk_elems = 512, .dtype = TALLY_DT_I32 },
	{ .key = 14, .nelems = 600, .chunk_elems = 128, .dtype = TALLY_DT_F32, .det = true },
	{ .key = 15, .nelems = 513, .chunk_elems = 256, .dtype = TALLY_DT_F16, .det = true },
	{ .key = 16, .nelems = 100, .chunk_elems = 33, .dtype = TALLY_DT_BF16, .det = true },
	{ .key = 17, .nelems = 1, .chunk_elems = 1, .dtype = TALLY_DT_I32 },
};

/* TALLY_SEED=n shifts every seed (to sweep many networks by hand); default 0. */
static uint64_t seed_shift;

static struct sys_cfg mk_cfg(unsigned W, uint64_t seed, double loss, double dup,
			     double reorder)
{
	struct sys_cfg c;

	memset(&c, 0, sizeof(c));
	c.seed = seed + seed_shift * 7919;
	c.W = W;
	c.M = 2;
	c.up = (struct simnet_link){ .loss = loss, .dup = dup, .reorder = reorder,
				     .delay_ns = 5 * US, .jitter_ns = 3 * US,
				     .reorder_ns = 40 * US };
	c.down = c.up;
	c.nkeys = sizeof(base_keys) / sizeof(base_keys[0]);
	memcpy(c.keys, base_keys, sizeof(base_keys));
	c.window = 16;
	c.give_up_ms = 5000;
	return c;
}

static const unsigned Ws[] = { 1, 2, 3, 8, 32 };

static void run_matrix(double loss, double dup, double reorder, uint32_t rounds,
		       const char *what)
{
	for (unsigned i = 0; i < sizeof(Ws) / sizeof(Ws[0]); i++) {
		struct sys_cfg cfg = mk_cfg(Ws[i], 1000 + Ws[i], loss, dup, reorder);
		struct sys *s = sys_new(&cfg);

		sys_run(s, rounds, 20000 * MS, NULL);
		/* every worker got every result (sys_run completed every operation), and
		 * the clients rejected nothing the engine sent */
		if (sys_client_drops(s))
			for (unsigned r = 0; r < TALLY_R_COUNT; r++)
				for (unsigned w = 0; w < cfg.W; w++)
					if (tally_client_stats(s->cl[w])->drops[r])
						fail_msg("rank %u dropped %llu (%s)", w,
							 (unsigned long long)tally_client_stats(s->cl[w])->drops[r],
							 tally_reason_name(r));
		print_message("  %-9s W=%-2u: %u rounds x %u keys, %llu retransmits, "
			      "%llu ms virtual, worst err/bound %.3f\n", what, Ws[i], rounds,
			      cfg.nkeys, (unsigned long long)sys_retransmits(s),
			      (unsigned long long)(simnet_now(s->net) / MS), s->worst_rel);
		sys_free(s);
	}
}

static void test_matrix_clean(void **state)
{
	(void)state;
	run_matrix(0, 0, 0, 6, "clean");
}

static void test_matrix_lossy(void **state)
{
	(void)state;
	run_matrix(0.05, 0.02, 0.05, 4, "5% loss");
}

static void test_loss_20pct(void **state)
{
	(void)state;
	const unsigned w20[] = { 2, 8 };

	for (unsigned i = 0; i < 2; i++) {
		struct sys_cfg cfg = mk_cfg(w20[i], 77 + i, 0.20, 0.05, 0.10);
		struct sys *s = sys_new(&cfg);
		uint64_t pushes = 0;

		sys_run(s, 4, 60000 * MS, NULL);
		for (unsigned w = 0; w < cfg.W; w++)
			pushes += tally_client_stats(s->cl[w])->pushes;
		assert_true(sys_retransmits(s) > 0);
		print_message("  20%% loss W=%u: %llu pushes, %llu retransmits (%.1f%%), "
			      "%llu ms virtual\n", cfg.W, (unsigned long long)pushes,
			      (unsigned long long)sys_retransmits(s),
			      100.0 * (double)sys_retransmits(s) / (double)pushes,
			      (unsigned long long)(simnet_now(s->net) / MS));
		sys_free(s);
	}
}

/* Hostile RESULTs injected into every client during a run are counted and harmless. */
static void inject_hostile(void *arg, struct sys *s, unsigned w, unsigned k, uint32_t round,
			   const void *out)
{
	(void)arg;
	(void)out;
	if (k != 0)
		return;
	struct tally_hdr h;
	uint8_t buf[TALLY_HDR_LEN + 16];
	float pl[4] = { 1e30f, 1e30f, 1e30f, 1e30f };
	struct tally_addr to = simnet_addr(s->net, simnet_client_node(s->net, w));

	memset(&h, 0, sizeof(h));
	h.op = TALLY_OP_RESULT;
	h.job_id = SYS_JOB;
	h.token = SYS_TOKEN ^ 1; /* wrong token */
	h.rank = w;
	h.key = s->cfg.keys[0].key;
	h.round = round + 1;     /* the round this worker starts next */
	h.count = 4;
	h.dtype = TALLY_DT_F32;
	h.flags = TALLY_F_INCLUDED;
	h.contrib = 1;
	tally_proto_finish(buf, &h, pl, sizeof(pl));
	memcpy(buf + TALLY_HDR_LEN, pl, sizeof(pl));
	simnet_inject(s->net, simnet_engine_node(s->net, 0), &to, buf, sizeof(buf));
	h.token = SYS_TOKEN;
	h.count = 3;             /* wrong count for the chunk */
	tally_proto_finish(buf, &h, pl, 12);
	simnet_inject(s->net, simnet_engine_node(s->net, 0), &to, buf, TALLY_HDR_LEN + 12);
}

static void test_hostile_results_during_run(void **state)
{
	(void)state;
	struct sys_cfg cfg = mk_cfg(3, 5, 0.02, 0.02, 0.02);
	struct sys *s = sys_new(&cfg);
	struct sys_hooks hk = { .result = inject_hostile };
	uint32_t rounds = 5;

	sys_run(s, rounds, 20000 * MS, &hk);
	simnet_run_for(s->net, 10 * MS);
	for (unsigned w = 0; w < cfg.W; w++) {
		const struct tally_client_stats *st = tally_client_stats(s->cl[w]);

		assert_int_equal(st->drops[TALLY_R_WRONG_TOKEN], rounds);
		assert_int_equal(st->drops[TALLY_R_BAD_RANGE], rounds);
	}
	sys_free(s);
}

/* ---- quorum: one straggler ---- */

#define QR 10
struct straggle {
	unsigned straggler;
	uint32_t rounds;
	uint32_t done[8][SYS_MAX_KEYS];    /* rounds completed per worker and key */
	bool policy_set[SYS_MAX_KEYS];
	void *res[SYS_MAX_KEYS][QR];       /* each round's result (first worker to finish) */
	uint32_t asked_round[SYS_MAX_KEYS];  /* round + 1 the straggler waits to start */
	uint64_t asked_ns[SYS_MAX_KEYS];
	unsigned timeout_starts;
	bool left_out_seen[SYS_MAX_KEYS];  /* a straggle round's sum lacked the straggler */
};

static bool straggle_round(const struct straggle *g, uint32_t r)
{
	return r % 3 == 1 && r + 2 < g->rounds;
}

static bool all_done(const struct straggle *g, const struct sys *s, unsigned k, uint32_t r,
		     bool incl_straggler)
{
	for (unsigned w = 0; w < s->cfg.W; w++)
		if ((incl_straggler || w != g->straggler) && g->done[w][k] <= r)
			return false;
	return true;
}

/* One ulp of the wire dtype at magnitude m (0 for f32 and i32). */
static double wire_ulp(uint8_t dt, double m)
{
	int e;

	if (dt != TALLY_DT_F16 && dt != TALLY_DT_BF16)
		return 0;
	frexp(m > 0 ? m : 1e-30, &e);
	if (dt == TALLY_DT_F16)
		return ldexp(1.0, e - 1 - 10 > -24 ? e - 1 - 10 : -24);
	return ldexp(1.0, e - 1 - 7);
}

static bool q_may_start(void *arg, struct sys *s, unsigned w, unsigned k, uint32_t r)
{
	struct straggle *g = arg;

	if (r == g->rounds - 1) {
		/* the last round waits for everyone and needs everyone: no fold left over */
		if (!all_done(g, s, k, r - 1, true))
			return false;
		if (!g->policy_set[k]) {
			uint32_t key = s->cfg.keys[k].key;

			assert_int_equal(tally_engine_key_policy(s->eng[key % s->cfg.M], SYS_JOB,
								 key, (uint16_t)s->cfg.W, 0), 0);
			g->policy_set[k] = true;
		}
		return true;
	}
	/* The straggler computes slowly: it starts after the others have their sum, or
	 * after 20 ms (the others cannot start round r until the appliance has seen the
	 * straggler's push of round r-1; a lost push is re-sent, but if every re-send and
	 * its answer were lost the straggler's round-r push is what tells the appliance). */
	if (w == g->straggler && straggle_round(g, r)) {
		uint64_t now = simnet_now(s->net);

		if (g->asked_round[k] != r + 1) {
			g->asked_round[k] = r + 1;
			g->asked_ns[k] = now;
		}
		if (all_done(g, s, k, r, false))
			return true;
		if (now - g->asked_ns[k] >= 20 * MS) {
			g->timeout_starts++;
			return true;
		}
		return false;
	}
	return true;
}

static void q_result(void *arg, struct sys *s, unsigned w, unsigned k, uint32_t r,
		     const void *out)
{
	struct straggle *g = arg;
	size_t bytes = (size_t)s->cfg.keys[k].nelems *
		       tally_dtype_size((enum tally_dtype)s->cfg.keys[k].dtype);

	g->done[w][k] = r + 1;
	if (!g->res[k][r]) {
		g->res[k][r] = malloc(bytes);
		assert_non_null(g->res[k][r]);
		memcpy(g->res[k][r], out, bytes);
	} else {
		/* every worker gets the same sum, the straggler included */
		assert_memory_equal(g->res[k][r], out, bytes);
	}
	if (w == g->straggler && straggle_round(g, r)) {
		/* the round completed without it: the sum is not the full reference */
		if (sys_check(s, k, r, out, NULL) >= 0)
			g->left_out_seen[k] = true;
	}
}

static void run_quorum(unsigned W, struct sys_cfg *cfg, struct straggle *g)
{
	struct sys *s;
	struct sys_hooks hk = { .may_start = q_may_start, .result = q_result, .arg = g,
				.no_check = true };

	g->rounds = QR;
	s = sys_new(cfg);
	sys_run(s, QR, 60000 * MS, &hk);
	for (unsigned k = 0; k < cfg->nkeys; k++) {
		const struct sys_key *sk = &cfg->keys[k];
		size_t es = tally_dtype_size((enum tally_dtype)sk->dtype);
		uint8_t *g_in = malloc((size_t)sk->nelems * es);
		double *pf = calloc(sk->nelems, sizeof(double)), *ab = calloc(sk->nelems, sizeof(double));
		uint32_t *pi = calloc(sk->nelems, sizeof(uint32_t));
		double worst = 0;

		assert_non_null(g_in);
		assert_non_null(pf);
		assert_non_null(ab);
		assert_non_null(pi);
		for (uint32_t r = 0; r < QR; r++)
			for (unsigned w = 0; w < W; w++) {
				sys_gradient(s, w, k, r, g_in);
				for (uint32_t i = 0; i < sk->nelems; i++) {
					pi[i] += ((uint32_t *)g_in)[i];
					pf[i] += sys_widen(sk->dtype, g_in, i);
					ab[i] += fabs(sys_widen(sk->dtype, g_in, i));
				}
			}
		/* over the whole run: sum of all results == sum of all pushes */
		for (uint32_t i = 0; i < sk->nelems; i++) {
			uint32_t ri = 0;
			double rf = 0, rounding = 0;

			for (uint32_t r = 0; r < QR; r++) {
				double v = sys_widen(sk->dtype, g->res[k][r], i);

				ri += ((uint32_t *)g->res[k][r])[i];
				rf += v;
				/* f16/bf16: each result is rounded once to the wire dtype */
				rounding += wire_ulp(sk->dtype, fabs(v));
			}
			if (sk->dtype == TALLY_DT_I32) {
				assert_int_equal(ri, pi[i]);
				continue;
			}
			/* f32 adds of each round (W pushes and folds), the results' rounding,
			 * and what an f16/bf16 fold may still hold (under one wire ulp) */
			double bound = 2.0 * (W + 1) * ldexp(1.0, -24) * ab[i] + rounding +
				       wire_ulp(sk->dtype, 2.0 * W);

			if (!(fabs(rf - pf[i]) <= bound))
				fail_msg("key %u elem %u: results sum %.9g, pushes sum %.9g, bound %.3g",
					 sk->key, i, rf, pf[i], bound);
			if (bound > 0 && fabs(rf - pf[i]) / bound > worst)
				worst = fabs(rf - pf[i]) / bound;
		}
		free(g_in);
		free(pf);
		free(ab);
		free(pi);
		for (uint32_t r = 0; r < QR; r++)
			free(g->res[k][r]);
		assert_true(g->left_out_seen[k]);
		print_message("  quorum W=%u key %u (%s): all results vs all pushes, "
			      "worst err/bound %.3f\n", W, sk->key,
			      tally_dtype_name((enum tally_dtype)sk->dtype), worst);
	}
	print_message("  quorum W=%u: straggler left out of %llu chunks, %llu ack pushes, "
		      "%u late starts not waiting for the others\n", W,
		      (unsigned long long)tally_client_stats(s->cl[g->straggler])->excluded,
		      (unsigned long long)tally_client_stats(s->cl[g->straggler])->ack_pushes,
		      g->timeout_starts);
	assert_true(tally_client_stats(s->cl[g->straggler])->excluded > 0);
	sys_free(s);
}

static void test_quorum_straggler(void **state)
{
	(void)state;
	static struct straggle g;
	struct sys_cfg cfg = mk_cfg(4, 99, 0.03, 0.02, 0.05);

	memset(&g, 0, sizeof(g));
	g.straggler = 3;
	cfg.nkeys = 2;
	cfg.keys[0] = (struct sys_key){ .key = 20, .nelems = 1000, .chunk_elems = 128,
					.dtype = TALLY_DT_I32, .quorum = 3 };
	cfg.keys[1] = (struct sys_key){ .key = 21, .nelems = 500, .chunk_elems = 100,
					.dtype = TALLY_DT_F32, .quorum = 3 };
	cfg.keys[2] = (struct sys_key){ .key = 22, .nelems = 300, .chunk_elems = 128,
					.dtype = TALLY_DT_F16, .quorum = 3 };
	cfg.keys[3] = (struct sys_key){ .key = 23, .nelems = 200, .chunk_elems = 64,
					.dtype = TALLY_DT_BF16, .quorum = 3, .det = true };
	cfg.nkeys = 4;
	run_quorum(4, &cfg, &g);
}

/* Deadline completion: quorum is everyone, but a chunk closes 2 ms after its first push. */
static void test_deadline_straggler(void **state)
{
	(void)state;
	static struct straggle g;
	struct sys_cfg cfg = mk_cfg(3, 123, 0, 0, 0);

	memset(&g, 0, sizeof(g));
	g.straggler = 1;
	cfg.engine_poll_ns = 100 * US;
	cfg.nkeys = 2;
	cfg.keys[0] = (struct sys_key){ .key = 30, .nelems = 700, .chunk_elems = 128,
					.dtype = TALLY_DT_I32, .deadline_us = 2000 };
	cfg.keys[1] = (struct sys_key){ .key = 31, .nelems = 300, .chunk_elems = 64,
					.dtype = TALLY_DT_F32, .deadline_us = 2000 };
	run_quorum(3, &cfg, &g);
}

/* An appliance core that goes away: its keys fail with -ETIMEDOUT and a clear message;
 * the other core's keys still complete. */
static void test_give_up_appliance_gone(void **state)
{
	(void)state;
	struct sys_cfg cfg = mk_cfg(2, 7, 0, 0, 0);
	struct sys *s;
	float in[2][300], out[2][2][300];
	int h[2][2];

	cfg.nkeys = 2;
	cfg.keys[0] = (struct sys_key){ .key = 40, .nelems = 300, .chunk_elems = 64,
					.dtype = TALLY_DT_F32 };
	cfg.keys[1] = (struct sys_key){ .key = 41, .nelems = 300, .chunk_elems = 64,
					.dtype = TALLY_DT_F32 };
	cfg.give_up_ms = 50;
	s = sys_new(&cfg);
	sys_run(s, 2, 1000 * MS, NULL);
	simnet_set_down(s->net, simnet_engine_node(s->net, 1), 1);
	uint64_t t0 = simnet_now(s->net);
	for (unsigned w = 0; w < 2; w++) {
		sys_gradient(s, w, 0, 2, in[w]);
		for (unsigned k = 0; k < 2; k++) {
			h[w][k] = tally_client_start(s->cl[w], 40 + k, 2, in[w], out[w][k]);
			assert_true(h[w][k] >= 0);
		}
	}
	int rc[2][2] = { { 0, 0 }, { 0, 0 } };
	uint64_t t_fail = 0;
	while (simnet_now(s->net) - t0 < 1000 * MS &&
	       (!rc[0][0] || !rc[0][1] || !rc[1][0] || !rc[1][1])) {
		/* timers run at the start of a step, before time moves on */
		uint64_t t_tick = simnet_now(s->net);

		simnet_step(s->net, 1000 * MS);
		for (unsigned w = 0; w < 2; w++)
			for (unsigned k = 0; k < 2; k++)
				if (!rc[w][k]) {
					rc[w][k] = tally_client_test(s->cl[w], h[w][k]);
					if (rc[w][k] < 0 && !t_fail)
						t_fail = t_tick;
				}
	}
	/* key 40 lives on core 0: done; key 41 on core 1: gone */
	assert_int_equal(rc[0][0], 1);
	assert_int_equal(rc[1][0], 1);
	assert_int_equal(rc[0][1], -ETIMEDOUT);
	assert_int_equal(rc[1][1], -ETIMEDOUT);
	if (!(t_fail - t0 >= 50 * MS && t_fail - t0 <= 60 * MS))
		fail_msg("gave up after %llu us", (unsigned long long)((t_fail - t0) / US));
	const char *m = tally_client_strerror(s->cl[0]);
	print_message("  give-up after %llu ms: %s\n",
		      (unsigned long long)((t_fail - t0) / MS), m);
	assert_non_null(strstr(m, "key 41"));
	assert_non_null(strstr(m, "round 2"));
	assert_non_null(strstr(m, "chunk"));
	assert_non_null(strstr(m, "core 1"));
	sys_free(s);
}

int main(void)
{
	const char *env = getenv("TALLY_SEED");

	if (env)
		seed_shift = strtoull(env, NULL, 0);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_matrix_clean),
		cmocka_unit_test(test_matrix_lossy),
		cmocka_unit_test(test_loss_20pct),
		cmocka_unit_test(test_hostile_results_during_run),
		cmocka_unit_test(test_quorum_straggler),
		cmocka_unit_test(test_deadline_straggler),
		cmocka_unit_test(test_give_up_appliance_gone),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
