/* SPDX-License-Identifier: Apache-2.0
 * test_engine_rounds.c — the aggregation rules: duplicates, late pushes, parity slots and
 * bounded staleness (TOO_EARLY / STALE_ROUND), quorum and deadline completion, PULL, BYE,
 * deterministic sums under every arrival order, i32/f16/bf16 keys, 1024 workers, walkers,
 * drain, live policy and job removal.
 */
#include "harness.h"

#include <errno.h>

static void fill(float *v, uint32_t n, uint32_t seed)
{
	uint64_t s = 0x9E3779B97F4A7C15ull ^ ((uint64_t)seed * 0x100000001b3ull);
	for (uint32_t i = 0; i < n; i++) {
		h_rng(&s);
		/* wide exponent range so that the summation order matters */
		float m = (float)(s % 2000000) / 1000000.0f - 1.0f;
		int ex = (int)((s >> 32) % 40) - 20;
		v[i] = m * (float)(1 << (ex < 0 ? 0 : ex)) / (float)(1 << (ex < 0 ? -ex : 0));
	}
}

static void test_duplicates_and_late(void **state)
{
	(void)state;
	struct h h;
	h_start(&h, NULL);
	struct tally_register r = h_reg(8, 8, TALLY_DT_F32, 3, 2);
	h_setup(&h, 3, 1, &r);
	float v[3][8];
	for (int w = 0; w < 3; w++)
		fill(v[w], 8, (uint32_t)w);
	const struct tally_engine_stats *st = tally_engine_stats(h.e);

	assert_int_equal(h_push(&h, 0, 1, 0, 0, TALLY_DT_F32, v[0], 8), TALLY_OK);
	/* duplicate while open: ignored, not added twice, nothing sent */
	assert_int_equal(h_push(&h, 0, 1, 0, 0, TALLY_DT_F32, v[0], 8), TALLY_OK);
	assert_int_equal(st->duplicates, 1);
	assert_int_equal(h.cap.n, 0);
	/* quorum 2 reached by rank 2 */
	assert_int_equal(h_push(&h, 2, 1, 0, 0, TALLY_DT_F32, v[2], 8), TALLY_OK);
	assert_int_equal(st->completions, 1);
	assert_int_equal(st->quorum_completions, 1);
	assert_int_equal(h.cap.n, 3);
	float want[8];
	for (int i = 0; i < 8; i++) {
		want[i] = v[0][i];
		want[i] += v[2][i];
	}
	for (uint32_t w = 0; w < 3; w++) {
		const struct cap_pkt *p = h_result(&h, w, 1, 0, 0);
		assert_non_null(p);
		assert_int_equal(p->pkt.hdr.contrib, 2);
		assert_int_equal(p->pkt.hdr.flags, w == 1 ? 0 : TALLY_F_INCLUDED);
		assert_memory_equal(p->pkt.payload, want, sizeof(want));
	}
	/* duplicate after completion: a RESEND copy to that worker only */
	h_clear(&h);
	assert_int_equal(h_push(&h, 2, 1, 0, 0, TALLY_DT_F32, v[2], 8), TALLY_OK);
	assert_int_equal(h.cap.n, 1);
	assert_int_equal(h.cap.q[0].pkt.hdr.rank, 2);
	assert_int_equal(h.cap.q[0].pkt.hdr.flags, TALLY_F_INCLUDED | TALLY_F_RESEND);
	assert_int_equal(st->duplicates, 2);
	/* late push of the straggler: not added, RESULT without INCLUDED, marks it seen;
	 * RESEND tells the worker its push was seen (no need to re-send it) */
	h_clear(&h);
	assert_int_equal(h_push(&h, 1, 1, 0, 0, TALLY_DT_F32, v[1], 8), TALLY_OK);
	assert_int_equal(h.cap.n, 1);
	assert_int_equal(h.cap.q[0].pkt.hdr.rank, 1);
	assert_int_equal(h.cap.q[0].pkt.hdr.flags, TALLY_F_RESEND);
	assert_int_equal(h.cap.q[0].pkt.hdr.contrib, 2);
	assert_memory_equal(h.cap.q[0].pkt.payload, want, sizeof(want));
	assert_int_equal(st->late_pushes, 1);
	assert_int_equal(st->resends, 2);
	assert_int_equal(st->pushes, 2);
	h_stop(&h);
}

/* Full participation for round r of a one-chunk key of W workers. */
static void round_all(struct h *h, uint32_t W, uint32_t key, uint32_t round, const float *v,
		      uint32_t n)
{
	for (uint32_t w = 0; w < W; w++)
		assert_int_equal(h_push(h, w, key, round, 0, TALLY_DT_F32, v, n), TALLY_OK);
}

static void test_rounds_and_staleness(void **state)
{
	(void)state;
	struct h h;
	h_start(&h, NULL);
	struct tally_register r = h_reg(4, 4, TALLY_DT_F32, 2, 2);
	h_setup(&h, 2, 1, &r);
	float v[4] = { 1, 2, 3, 4 };

	/* round 0 complete; round 2 may not start before round 1 is acknowledged */
	round_all(&h, 2, 1, 0, v, 4);
	H_EXPECT_REJECT(&h, h_push(&h, 0, 1, 2, 0, TALLY_DT_F32, v, 4), TALLY_R_TOO_EARLY, 0);
	/* rounds more than one apart in an unused slot */
	H_EXPECT_REJECT(&h, h_push(&h, 0, 1, 3, 0, TALLY_DT_F32, v, 4), TALLY_R_TOO_EARLY, 0);
	assert_int_equal(h_push(&h, 0, 1, 1, 0, TALLY_DT_F32, v, 4), TALLY_OK);
	/* only rank 0 pushed round 1: round 2 still too early */
	H_EXPECT_REJECT(&h, h_push(&h, 0, 1, 2, 0, TALLY_DT_F32, v, 4), TALLY_R_TOO_EARLY, 0);
	assert_int_equal(h_push(&h, 1, 1, 1, 0, TALLY_DT_F32, v, 4), TALLY_OK);
	/* round 0's result is still retained for a worker that lost it */
	h_clear(&h);
	assert_int_equal(h_pull(&h, 1, 1, 0, 0), TALLY_OK);
	assert_int_equal(h.cap.n, 1);
	assert_int_equal(h.cap.q[0].pkt.hdr.round, 0);
	assert_int_equal(h.cap.q[0].pkt.hdr.flags, TALLY_F_INCLUDED | TALLY_F_RESEND);
	/* round 2 reuses slot 0 */
	assert_int_equal(h_push(&h, 0, 1, 2, 0, TALLY_DT_F32, v, 4), TALLY_OK);
	/* now round 0 is gone: a delayed duplicate of it is stale, answered with ERROR
	 * STALE_ROUND (its sender ignores it; a launch meeting another's rounds learns why) */
	H_EXPECT_REJECT(&h, h_push(&h, 1, 1, 0, 0, TALLY_DT_F32, v, 4), TALLY_R_STALE_ROUND, 1);
	H_EXPECT_REJECT(&h, h_pull(&h, 1, 1, 0, 0), TALLY_R_STALE_ROUND, 0);
	/* PULL of an open round: nothing to send yet; of a future round: too early */
	h_clear(&h);
	assert_int_equal(h_pull(&h, 1, 1, 2, 0), TALLY_OK);
	assert_int_equal(h.cap.n, 0);
	H_EXPECT_REJECT(&h, h_pull(&h, 1, 1, 4, 0), TALLY_R_TOO_EARLY, 0);
	/* a round 4 ahead in the same slot: stale by the parity rule (no second ERROR to rank
	 * 1 within ENGINE_STALE_ERR_GAP_NS) */
	H_EXPECT_REJECT(&h, h_push(&h, 1, 1, 6, 0, TALLY_DT_F32, v, 4), TALLY_R_STALE_ROUND, 0);
	/* round 3 needs everyone to have acknowledged round 1 by pushing round 2 */
	H_EXPECT_REJECT(&h, h_push(&h, 0, 1, 3, 0, TALLY_DT_F32, v, 4), TALLY_R_TOO_EARLY, 0);
	assert_int_equal(h_push(&h, 1, 1, 2, 0, TALLY_DT_F32, v, 4), TALLY_OK);

	/* Many rounds in lockstep: every round complete, results of value round * 2 */
	for (uint32_t rd = 3; rd < 40; rd++) {
		h_clear(&h);
		float x[4] = { (float)rd, 0, 0, 0 };
		round_all(&h, 2, 1, rd, x, 4);
		assert_int_equal(h_count(&h, TALLY_OP_RESULT, 1, rd, 0), 2);
		const struct cap_pkt *p = h_result(&h, 0, 1, rd, 0);
		assert_non_null(p);
		float got;
		memcpy(&got, p->pkt.payload, sizeof(got));
		assert_true(got == (float)(2 * rd));
	}
	assert_int_equal(tally_engine_stats(h.e)->completions, 40);
	h_stop(&h);
}

/* A key may start at any round (e.g. after a failover) when both slots are unused. */
static void test_start_anywhere(void **state)
{
	(void)state;
	struct h h;
	h_start(&h, NULL);
	struct tally_register r = h_reg(4, 4, TALLY_DT_F32, 2, 2);
	h_setup(&h, 2, 1, &r);
	float v[4] = { 1, 2, 3, 4 };
	round_all(&h, 2, 1, 1000, v, 4);
	round_all(&h, 2, 1, 1001, v, 4);
	round_all(&h, 2, 1, 1002, v, 4);
	assert_int_equal(tally_engine_stats(h.e)->completions, 3);
	h_stop(&h);
}

static void test_quorum_straggler(void **state)
{
	(void)state;
	/* 4 workers, quorum 3, rank 3 always late: its gradient is folded into its next push
	 * (as the client does), and over the run no gradient is lost. */
	struct h h;
	h_start(&h, NULL);
	struct tally_register r = h_reg(16, 16, TALLY_DT_I32, 4, 3);
	h_setup(&h, 4, 9, &r);
	int64_t pushed = 0, summed = 0;
	int32_t carry[16] = { 0 };
	const uint32_t R = 10;
	for (uint32_t rd = 0; rd < R; rd++) {
		h_clear(&h);
		int32_t g[4][16];
		for (uint32_t w = 0; w < 4; w++)
			for (int i = 0; i < 16; i++) {
				g[w][i] = (int32_t)(rd * 100 + w * 10 + (uint32_t)i);
				pushed += g[w][i];
			}
		for (int i = 0; i < 16; i++)
			g[3][i] += carry[i];
		for (uint32_t w = 0; w < 4; w++)
			assert_int_equal(h_push(&h, w, 9, rd, 0, TALLY_DT_I32, g[w], 16),
					 TALLY_OK);
		const struct cap_pkt *p = h_result(&h, 3, 9, rd, 0);
		assert_non_null(p);
		assert_int_equal(p->pkt.hdr.contrib, 3);
		assert_false(p->pkt.hdr.flags & TALLY_F_INCLUDED);
		const int32_t *res = (const int32_t *)p->pkt.payload;
		for (int i = 0; i < 16; i++) {
			assert_int_equal(res[i], g[0][i] + g[1][i] + g[2][i]);
			summed += res[i];
			carry[i] = g[3][i]; /* excluded: folded forward */
		}
	}
	/* The last carry is what a final flush round would add. */
	for (int i = 0; i < 16; i++)
		summed += carry[i];
	assert_true(summed == pushed);
	const struct tally_engine_stats *st = tally_engine_stats(h.e);
	assert_int_equal(st->quorum_completions, R);
	assert_int_equal(st->late_pushes, R);
	h_stop(&h);
}

static void test_deadline(void **state)
{
	(void)state;
	struct h h;
	h_start(&h, NULL);
	struct tally_register r = h_reg(8, 4, TALLY_DT_F32, 3, 3);
	r.deadline_us = 100;
	h_setup(&h, 3, 1, &r);
	float v[4] = { 1, 2, 3, 4 };
	assert_int_equal(tally_engine_poll(h.e), 0);
	assert_int_equal(h_push(&h, 0, 1, 0, 0, TALLY_DT_F32, v, 4), TALLY_OK);
	h.cap.now += 60000;
	assert_int_equal(h_push(&h, 1, 1, 0, 4, TALLY_DT_F32, v, 4), TALLY_OK);
	assert_int_equal(h_push(&h, 2, 1, 0, 4, TALLY_DT_F32, v, 4), TALLY_OK);
	assert_int_equal(tally_engine_poll(h.e), 0);
	assert_int_equal(h.cap.n, 0);
	h.cap.now += 40000; /* chunk 0: 100 us after its first push */
	assert_int_equal(tally_engine_poll(h.e), 1);
	assert_int_equal(h_count(&h, TALLY_OP_RESULT, 1, 0, 0), 3);
	const struct cap_pkt *p = h_result(&h, 0, 1, 0, 0);
	assert_int_equal(p->pkt.hdr.contrib, 1);
	assert_int_equal(p->pkt.hdr.flags, TALLY_F_INCLUDED);
	assert_memory_equal(p->pkt.payload, v, sizeof(v));
	assert_int_equal(h_result(&h, 1, 1, 0, 0)->pkt.hdr.flags, 0);
	h.cap.now += 59999;
	assert_int_equal(tally_engine_poll(h.e), 0);
	h.cap.now += 1;
	assert_int_equal(tally_engine_poll(h.e), 1);
	const struct tally_engine_stats *st = tally_engine_stats(h.e);
	assert_int_equal(st->deadline_completions, 2);
	assert_int_equal(st->quorum_completions, 0);
	assert_int_equal(tally_engine_open_chunks(h.e), 0);
	assert_int_equal(tally_engine_poll(h.e), 0);

	/* Live policy: no deadline, quorum lowered to 1 completes an open chunk at once. */
	assert_int_equal(tally_engine_key_policy(h.e, H_JOB, 1, 1, 0), 0);
	assert_int_equal(tally_engine_key_policy(h.e, H_JOB, 1, 4, 0), -EINVAL);
	assert_int_equal(tally_engine_key_policy(h.e, H_JOB, 2, 1, 0), -ENOENT);
	assert_int_equal(tally_engine_key_policy(h.e, H_JOB, 1, 3, 0), 0);
	for (uint32_t w = 0; w < 3; w++)
		assert_int_equal(h_push(&h, w, 1, 1, 4, TALLY_DT_F32, v, 4), TALLY_OK);
	assert_int_equal(h_push(&h, 0, 1, 1, 0, TALLY_DT_F32, v, 4), TALLY_OK);
	h.cap.now += 1000000000;
	assert_int_equal(tally_engine_poll(h.e), 0);
	h_clear(&h);
	assert_int_equal(tally_engine_key_policy(h.e, H_JOB, 1, 1, 0), 0);
	assert_int_equal(h_count(&h, TALLY_OP_RESULT, 1, 1, 0), 3);
	assert_int_equal(tally_engine_open_chunks(h.e), 0);
	h_stop(&h);
}

static void test_bye(void **state)
{
	(void)state;
	struct h h;
	h_start(&h, NULL);
	struct tally_register r = h_reg(4, 4, TALLY_DT_F32, 3, 2);
	h_setup(&h, 3, 1, &r);
	float v[4] = { 1, 2, 3, 4 };
	assert_int_equal(h_bye(&h, 2), TALLY_OK);
	assert_int_equal(tally_engine_stats(h.e)->byes, 1);
	H_EXPECT_REJECT(&h, h_bye(&h, 2), TALLY_R_BYE_REFUSED, 0);
	H_EXPECT_REJECT(&h, h_push(&h, 2, 1, 0, 0, TALLY_DT_F32, v, 4), TALLY_R_NOT_JOINED, 0);
	/* the fan-out skips the rank that left */
	round_all(&h, 2, 1, 0, v, 4);
	assert_int_equal(h_count(&h, TALLY_OP_RESULT, 1, 0, 0), 2);
	assert_null(h_result(&h, 2, 1, 0, 0));
	/* quorum 2 of 3: the two others go on for many rounds without the one that left */
	for (uint32_t rd = 1; rd < 8; rd++) {
		round_all(&h, 2, 1, rd, v, 4);
		assert_int_equal(h_count(&h, TALLY_OP_RESULT, 1, rd, 0), 2);
	}
	/* it may come back, from another address too (it was unbound) */
	struct tally_hdr hd = h_hdr(TALLY_OP_JOIN, 2);
	struct tally_join j = { .world_size = 3 };
	uint8_t pl[TALLY_JOIN_LEN];
	tally_proto_put_join(pl, &j);
	struct tally_addr a = h_addr(77);
	assert_int_equal(h_rx_hdr(&h, &hd, pl, sizeof(pl), &a), TALLY_OK);
	h_stop(&h);
}

/* All permutations of n ranks (Heap's algorithm), calling fn for each. */
static void permute(uint32_t *a, uint32_t n, uint32_t k, void (*fn)(const uint32_t *, void *),
		    void *arg)
{
	if (k == 1) {
		fn(a, arg);
		return;
	}
	for (uint32_t i = 0; i < k; i++) {
		permute(a, n, k - 1, fn, arg);
		uint32_t j = (k % 2) ? 0 : i;
		uint32_t t = a[j];
		a[j] = a[k - 1];
		a[k - 1] = t;
	}
}

#define DW 5
#define DN 300
struct det_ctx {
	int det;
	uint8_t dtype;
	uint16_t quorum;
	uint8_t in[DW][DN * 4];
	uint8_t ref[DN * 4];
	unsigned perms, distinct_from_ref;
};

static void det_ref(struct det_ctx *c, const int *in);

static void det_run(const uint32_t *order, void *arg)
{
	struct det_ctx *c = arg;
	struct h h;
	struct tally_engine_cfg cfg;
	/* One engine per order (5! orders per dtype and mode): a small key arena, not the
	 * harness's 64 MiB. Meson sets MALLOC_PERTURB_, so glibc fills every malloc and free:
	 * 64 MiB twice per engine took ~27 s of CPU and ~14 M page faults, 147 s on a loaded
	 * 2-core host (timed out at 120 s in CI); 1 MiB holds the DW x DN key many times over. */
	h_init_cfg(&cfg);
	cfg.mem_budget = 1u << 20;
	h_start(&h, &cfg);
	struct tally_register r = h_reg(DN, DN, c->dtype, DW, c->quorum);
	if (c->det)
		r.flags = TALLY_KEY_DETERMINISTIC;
	h_setup(&h, DW, 3, &r);
	for (uint32_t i = 0; i < DW; i++)
		assert_int_equal(h_push(&h, order[i], 3, 0, 0, c->dtype, c->in[order[i]], DN),
				 TALLY_OK);
	const struct cap_pkt *p = h_result(&h, 0, 3, 0, 0);
	assert_non_null(p);
	size_t bytes = DN * tally_dtype_size(c->dtype);
	assert_int_equal(p->pkt.hdr.payload_len, bytes);
	assert_int_equal(p->pkt.hdr.contrib, c->quorum);
	if (c->quorum < DW) {
		/* the contributors are the first `quorum` arrivals, summed in rank order */
		int in[DW] = { 0 };
		for (uint32_t i = 0; i < c->quorum; i++)
			in[order[i]] = 1;
		det_ref(c, in);
	}
	if (memcmp(p->pkt.payload, c->ref, bytes) != 0)
		c->distinct_from_ref++;
	c->perms++;
	h_stop(&h);
}

/* Reference: the contributors' sum in rank order, in f32, converted to the wire dtype. */
static void det_ref(struct det_ctx *c, const int *in)
{
	float acc[DN];
	for (uint32_t i = 0; i < DN; i++) {
		int first = 1;
		acc[i] = 0;
		for (uint32_t w = 0; w < DW; w++) {
			if (!in[w])
				continue;
			float x;
			if (c->dtype == TALLY_DT_F32)
				memcpy(&x, &c->in[w][i * 4], 4);
			else if (c->dtype == TALLY_DT_F16)
				x = tally_f16_to_f32((uint16_t)(c->in[w][i * 2] |
								c->in[w][i * 2 + 1] << 8));
			else
				x = tally_bf16_to_f32((uint16_t)(c->in[w][i * 2] |
								 c->in[w][i * 2 + 1] << 8));
			acc[i] = first ? x : acc[i] + x;
			first = 0;
		}
	}
	for (uint32_t i = 0; i < DN; i++) {
		if (c->dtype == TALLY_DT_F32) {
			memcpy(&c->ref[i * 4], &acc[i], 4);
		} else {
			uint16_t hv = c->dtype == TALLY_DT_F16 ? tally_f32_to_f16(acc[i])
							       : tally_f32_to_bf16(acc[i]);
			c->ref[i * 2] = (uint8_t)hv;
			c->ref[i * 2 + 1] = (uint8_t)(hv >> 8);
		}
	}
}

static void det_fill(struct det_ctx *c)
{
	for (uint32_t w = 0; w < DW; w++) {
		float f[DN];
		fill(f, DN, 100 + w);
		for (uint32_t i = 0; i < DN; i++) {
			if (c->dtype == TALLY_DT_F32) {
				memcpy(&c->in[w][i * 4], &f[i], 4);
			} else {
				uint16_t hv = c->dtype == TALLY_DT_F16
						      ? tally_f32_to_f16(f[i] / 64.0f)
						      : tally_f32_to_bf16(f[i]);
				c->in[w][i * 2] = (uint8_t)hv;
				c->in[w][i * 2 + 1] = (uint8_t)(hv >> 8);
			}
		}
	}
}

static void test_deterministic_every_order(void **state)
{
	(void)state;
	static const uint8_t dts[] = { TALLY_DT_F32, TALLY_DT_F16, TALLY_DT_BF16 };
	for (size_t d = 0; d < sizeof(dts); d++) {
		static struct det_ctx c;
		memset(&c, 0, sizeof(c));
		c.dtype = dts[d];
		c.quorum = DW;
		det_fill(&c);
		static const int all[DW] = { 1, 1, 1, 1, 1 };
		det_ref(&c, all);
		uint32_t order[DW] = { 0, 1, 2, 3, 4 };
		/* Deterministic: bit-identical to the rank-order reference for all 120 orders. */
		c.det = 1;
		permute(order, DW, DW, det_run, &c);
		assert_int_equal(c.perms, 120);
		assert_int_equal(c.distinct_from_ref, 0);
		/* The data is order-sensitive: arrival-order sums differ for some orders
		 * (this checks the test, not the engine). */
		if (dts[d] == TALLY_DT_F32) {
			c.det = 0;
			c.perms = 0;
			permute(order, DW, DW, det_run, &c);
			assert_int_equal(c.perms, 120);
			assert_true(c.distinct_from_ref > 0);
		}
		/* Quorum 3 of 5: the first three arrivals, summed in rank order. */
		c.det = 1;
		c.quorum = 3;
		c.perms = 0;
		c.distinct_from_ref = 0;
		permute(order, DW, DW, det_run, &c);
		assert_int_equal(c.perms, 120);
		assert_int_equal(c.distinct_from_ref, 0);
	}
}

static void test_deterministic_pool(void **state)
{
	(void)state;
	struct h h;
	struct tally_engine_cfg cfg;
	h_init_cfg(&cfg);
	cfg.det_pool_bytes = 3 * 8192; /* three staged pushes */
	h_start(&h, &cfg);
	struct tally_register r = h_reg(16, 4, TALLY_DT_F32, 2, 2);
	r.flags = TALLY_KEY_DETERMINISTIC;
	h_setup(&h, 2, 1, &r);
	float v[4] = { 1, 2, 3, 4 };
	/* rank 1 before rank 0: staged */
	assert_int_equal(h_push(&h, 1, 1, 0, 0, TALLY_DT_F32, v, 4), TALLY_OK);
	assert_int_equal(h_push(&h, 1, 1, 0, 4, TALLY_DT_F32, v, 4), TALLY_OK);
	assert_int_equal(h_push(&h, 1, 1, 0, 8, TALLY_DT_F32, v, 4), TALLY_OK);
	/* pool exhausted: a push that must wait for rank 0 is refused, nothing changed */
	H_EXPECT_REJECT(&h, h_push(&h, 1, 1, 0, 12, TALLY_DT_F32, v, 4), TALLY_R_POOL_FULL, 0);
	/* pushes in rank order need no slot */
	assert_int_equal(h_push(&h, 0, 1, 0, 12, TALLY_DT_F32, v, 4), TALLY_OK);
	assert_int_equal(h_push(&h, 1, 1, 0, 12, TALLY_DT_F32, v, 4), TALLY_OK);
	assert_int_equal(h_count(&h, TALLY_OP_RESULT, 1, 0, 12), 2);
	/* a duplicate needs no slot; rank 0 completes chunk 0 and frees its slot */
	assert_int_equal(h_push(&h, 1, 1, 0, 0, TALLY_DT_F32, v, 4), TALLY_OK);
	assert_int_equal(h_push(&h, 0, 1, 0, 0, TALLY_DT_F32, v, 4), TALLY_OK);
	const struct cap_pkt *p = h_result(&h, 0, 1, 0, 0);
	assert_non_null(p);
	const float *res = (const float *)p->pkt.payload;
	for (int i = 0; i < 4; i++)
		assert_true(res[i] == 2 * v[i]);
	assert_int_equal(h_push(&h, 1, 1, 1, 0, TALLY_DT_F32, v, 4), TALLY_OK);
	H_EXPECT_REJECT(&h, h_push(&h, 1, 1, 1, 12, TALLY_DT_F32, v, 4), TALLY_R_POOL_FULL, 0);
	/* completing by policy (only staged pushes, no rank 0) frees the slots too */
	assert_int_equal(tally_engine_key_policy(h.e, H_JOB, 1, 1, 0), 0);
	assert_int_equal(tally_engine_open_chunks(h.e), 0);
	p = h_result(&h, 1, 1, 0, 4);
	assert_non_null(p);
	assert_int_equal(p->pkt.hdr.contrib, 1);
	assert_memory_equal(p->pkt.payload, v, sizeof(v));
	assert_int_equal(tally_engine_key_policy(h.e, H_JOB, 1, 2, 0), 0);
	assert_int_equal(h_push(&h, 1, 1, 1, 4, TALLY_DT_F32, v, 4), TALLY_OK);
	assert_int_equal(h_push(&h, 1, 1, 1, 8, TALLY_DT_F32, v, 4), TALLY_OK);
	assert_int_equal(h_push(&h, 1, 1, 1, 12, TALLY_DT_F32, v, 4), TALLY_OK);
	assert_int_equal(h_register(&h, 0, 2, &r), TALLY_OK);
	assert_int_equal(h_register(&h, 1, 2, &r), TALLY_OK);
	H_EXPECT_REJECT(&h, h_push(&h, 1, 2, 0, 0, TALLY_DT_F32, v, 4), TALLY_R_POOL_FULL, 0);
	/* removing the job returns staged slots to the pool */
	assert_int_equal(tally_engine_job_remove(h.e, H_JOB), 0);
	assert_int_equal(tally_engine_open_chunks(h.e), 0);
	assert_int_equal(tally_engine_open_rounds(h.e), 0);
	h_setup(&h, 2, 1, &r);
	for (uint32_t off = 0; off < 12; off += 4)
		assert_int_equal(h_push(&h, 1, 1, 0, off, TALLY_DT_F32, v, 4), TALLY_OK);
	h_stop(&h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_duplicates_and_late),
		cmocka_unit_test(test_rounds_and_staleness),
		cmocka_unit_test(test_start_anywhere),
		cmocka_unit_test(test_quorum_straggler),
		cmocka_unit_test(test_deadline),
		cmocka_unit_test(test_bye),
		cmocka_unit_test(test_deterministic_every_order),
		cmocka_unit_test(test_deterministic_pool),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
