/* SPDX-License-Identifier: Apache-2.0
 * test_engine_onebit.c — one-bit keys (1-bit Adam / LAMB server stage): workers compress
 * known data with tally_sum_onebit_compress (worker error kept per worker), the engine's
 * RESULT [scale_s][bits] must equal, byte for byte, a reference server stage computed here
 * with the same reducers in the same order (unpack / unpack-acc per contributor, times
 * (f32)(1 / contributors), compress with a server error that persists over the rounds).
 * Also: quorum (average over the contributors that made it), deterministic keys (rank
 * order whatever the arrival order), mismatched pushes, memory charged.
 */
#include <errno.h>

#include "harness.h"
#include "tally_sum.h"

#define W 4
#define NEL 1000
#define CE 384 /* chunks of 384, 384, 232 elements */
#define NCH ((NEL + CE - 1) / CE)
#define KEY 3
#define ROUNDS 3

struct ob {
	float werr[W][NEL];       /* worker errors */
	float serr[NEL];          /* the reference server error */
	uint8_t push[W][NCH][TALLY_ONEBIT_BYTES(CE)];
};

static uint32_t ch_n(uint32_t c)
{
	return NEL - c * CE < CE ? NEL - c * CE : CE;
}

static void put_f32(uint8_t *p, float f)
{
	uint32_t v;
	memcpy(&v, &f, 4);
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static float get_f32(const uint8_t *p)
{
	uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
		     (uint32_t)p[3] << 24;
	float f;
	memcpy(&f, &v, 4);
	return f;
}

/* Worker stage of round r for every worker and chunk: momentum-like data, compressed. */
static void workers_compress(struct ob *o, uint32_t r)
{
	float x[CE];
	uint64_t seed = 0x2545f4914f6cdd1dull + r;
	for (uint32_t w = 0; w < W; w++)
		for (uint32_t c = 0; c < NCH; c++) {
			uint32_t n = ch_n(c);
			for (uint32_t i = 0; i < n; i++)
				x[i] = (float)((int)(h_rng(&seed) % 2001) - 1000) * 1e-3f *
				       (1.0f + 0.25f * (float)w);
			uint8_t *p = o->push[w][c];
			put_f32(p, tally_sum_onebit_compress(p + 4, o->werr[w] + c * CE, x, n));
		}
}

/* The reference server stage of chunk c over contributors ranks[0..k) in that order. */
static void server_ref(struct ob *o, uint32_t c, const uint32_t *ranks, uint32_t k,
		       uint8_t *out)
{
	float acc[CE];
	uint32_t n = ch_n(c);
	for (uint32_t j = 0; j < k; j++) {
		const uint8_t *p = o->push[ranks[j]][c];
		if (j == 0)
			tally_sum_sign_unpack(acc, p + 4, n, get_f32(p));
		else
			tally_sum_sign_unpack_acc(acc, p + 4, n, get_f32(p));
	}
	if (k > 1)
		tally_sum_f32_scale(acc, acc, n, 1.0f / (float)k);
	put_f32(out, tally_sum_onebit_compress(out + 4, o->serr + c * CE, acc, n));
}

static enum tally_reason push_ob(struct h *h, uint32_t rank, uint32_t key, uint32_t round,
				 uint32_t c, const uint8_t *pl, uint16_t flags)
{
	struct tally_hdr hd = h_hdr(TALLY_OP_PUSH, rank);
	hd.key = key;
	hd.round = round;
	hd.offset = c * CE;
	hd.count = ch_n(c);
	hd.dtype = TALLY_DT_F32;
	hd.flags = flags;
	struct tally_addr a = h_addr(rank);
	return h_rx_hdr(h, &hd, pl, TALLY_ONEBIT_BYTES(ch_n(c)), &a);
}

/* Every recipient's RESULT of (round, chunk c) equals `want`, contrib k, INCLUDED as given. */
static void expect_result(const struct h *h, uint32_t round, uint32_t c, const uint8_t *want,
			  uint32_t k, const int *included)
{
	for (uint32_t w = 0; w < W; w++) {
		const struct cap_pkt *p = h_result(h, w, KEY, round, c * CE);
		assert_non_null(p);
		assert_true(p->pkt.hdr.flags & TALLY_F_ONEBIT);
		assert_int_equal(p->pkt.hdr.count, ch_n(c));
		assert_int_equal(p->pkt.hdr.contrib, k);
		assert_int_equal(!!(p->pkt.hdr.flags & TALLY_F_INCLUDED), !!included[w]);
		assert_int_equal(p->pkt.hdr.payload_len, TALLY_ONEBIT_BYTES(ch_n(c)));
		assert_memory_equal(p->pkt.payload, want, TALLY_ONEBIT_BYTES(ch_n(c)));
	}
}

/* Rounds with every worker, rank order (a plain key sums in arrival order). */
static void test_onebit_rounds(void **state)
{
	(void)state;
	static struct ob o;
	struct h h;
	uint8_t want[TALLY_ONEBIT_BYTES(CE)];
	const uint32_t ranks[W] = { 0, 1, 2, 3 };
	const int all[W] = { 1, 1, 1, 1 };

	memset(&o, 0, sizeof(o));
	h_start(&h, NULL);
	struct tally_register r = h_reg(NEL, CE, TALLY_DT_F32, W, W);
	r.compression = TALLY_COMP_ONEBIT;
	h_setup(&h, W, KEY, &r);
	for (uint32_t rnd = 0; rnd < ROUNDS; rnd++) {
		workers_compress(&o, rnd);
		h_clear(&h);
		for (uint32_t c = 0; c < NCH; c++) {
			for (uint32_t w = 0; w < W; w++)
				assert_int_equal(push_ob(&h, w, KEY, rnd, c, o.push[w][c],
							 TALLY_F_ONEBIT), TALLY_OK);
			server_ref(&o, c, ranks, W, want);
			expect_result(&h, rnd, c, want, W, all);
		}
	}
	const struct tally_engine_stats *st = tally_engine_stats(h.e);
	assert_int_equal(st->onebit_pushes, ROUNDS * NCH * W);
	assert_int_equal(st->onebit_results, ROUNDS * NCH);
	/* a duplicate gets the same RESULT again */
	h_clear(&h);
	assert_int_equal(push_ob(&h, 1, KEY, ROUNDS - 1, 0, o.push[1][0], TALLY_F_ONEBIT), TALLY_OK);
	assert_int_equal(h_count(&h, TALLY_OP_RESULT, KEY, ROUNDS - 1, 0), 1);
	assert_true(h.cap.q[0].pkt.hdr.flags & TALLY_F_RESEND);
	assert_true(h.cap.q[0].pkt.hdr.flags & TALLY_F_ONEBIT);
	h_stop(&h);
}

/* Quorum 3 of 4: the RESULT is the average of the three that made it; the late one gets
 * it without INCLUDED. The server error carries on over the rounds. */
static void test_onebit_quorum(void **state)
{
	(void)state;
	static struct ob o;
	struct h h;
	uint8_t want[TALLY_ONEBIT_BYTES(CE)];
	/* per round: arrival order, the last one is late */
	const uint32_t order[ROUNDS][W] = { { 2, 0, 1, 3 }, { 3, 1, 0, 2 }, { 1, 3, 2, 0 } };

	memset(&o, 0, sizeof(o));
	h_start(&h, NULL);
	struct tally_register r = h_reg(NEL, CE, TALLY_DT_F32, W, W - 1);
	r.compression = TALLY_COMP_ONEBIT;
	h_setup(&h, W, KEY, &r);
	for (uint32_t rnd = 0; rnd < ROUNDS; rnd++) {
		workers_compress(&o, rnd);
		for (uint32_t c = 0; c < NCH; c++) {
			int inc[W] = { 1, 1, 1, 1 };
			inc[order[rnd][W - 1]] = 0;
			h_clear(&h);
			for (uint32_t j = 0; j < W - 1; j++)
				assert_int_equal(push_ob(&h, order[rnd][j], KEY, rnd, c,
							 o.push[order[rnd][j]][c], TALLY_F_ONEBIT),
						 TALLY_OK);
			server_ref(&o, c, order[rnd], W - 1, want);
			expect_result(&h, rnd, c, want, W - 1, inc);
			/* the late push: not added, answered with the same RESULT */
			h_clear(&h);
			uint32_t late = order[rnd][W - 1];
			assert_int_equal(push_ob(&h, late, KEY, rnd, c, o.push[late][c],
						 TALLY_F_ONEBIT), TALLY_OK);
			const struct cap_pkt *p = h_result(&h, late, KEY, rnd, c * CE);
			assert_non_null(p);
			assert_false(p->pkt.hdr.flags & TALLY_F_INCLUDED);
			assert_memory_equal(p->pkt.payload, want, TALLY_ONEBIT_BYTES(ch_n(c)));
		}
	}
	assert_int_equal(tally_engine_stats(h.e)->quorum_completions, ROUNDS * NCH);
	assert_int_equal(tally_engine_stats(h.e)->late_pushes, ROUNDS * NCH);
	h_stop(&h);
}

/* Deterministic key: shuffled arrivals, the RESULT as if summed in rank order. */
static void test_onebit_deterministic(void **state)
{
	(void)state;
	static struct ob o;
	struct h h;
	uint8_t want[TALLY_ONEBIT_BYTES(CE)];
	const uint32_t ranks[W] = { 0, 1, 2, 3 };
	const int all[W] = { 1, 1, 1, 1 };
	uint64_t seed = 0x9e3779b97f4a7c15ull;

	memset(&o, 0, sizeof(o));
	h_start(&h, NULL);
	struct tally_register r = h_reg(NEL, CE, TALLY_DT_F32, W, W);
	r.compression = TALLY_COMP_ONEBIT;
	r.flags = TALLY_KEY_DETERMINISTIC;
	h_setup(&h, W, KEY, &r);
	for (uint32_t rnd = 0; rnd < ROUNDS; rnd++) {
		workers_compress(&o, rnd);
		h_clear(&h);
		for (uint32_t c = 0; c < NCH; c++) {
			uint32_t perm[W] = { 0, 1, 2, 3 };
			for (uint32_t i = W - 1; i > 0; i--) {
				uint32_t j = (uint32_t)(h_rng(&seed) % (i + 1)), t = perm[i];
				perm[i] = perm[j];
				perm[j] = t;
			}
			if (c == 0) { /* highest rank first: everything staged until rank 0 */
				perm[0] = 3, perm[1] = 2, perm[2] = 1, perm[3] = 0;
			}
			for (uint32_t j = 0; j < W; j++)
				assert_int_equal(push_ob(&h, perm[j], KEY, rnd, c, o.push[perm[j]][c],
							 TALLY_F_ONEBIT), TALLY_OK);
			server_ref(&o, c, ranks, W, want);
			expect_result(&h, rnd, c, want, W, all);
		}
	}
	h_stop(&h);
}

/* Pushes that do not match the key's compression; memory charged for the server error. */
static void test_onebit_mismatch(void **state)
{
	(void)state;
	struct h h;
	uint8_t pl[TALLY_ONEBIT_BYTES(CE)] = { 0 };
	float f[CE] = { 0 };

	h_start(&h, NULL);
	struct tally_register r = h_reg(NEL, CE, TALLY_DT_F32, W, W);
	h_setup(&h, W, 1, &r);
	size_t plain = tally_engine_mem_used(h.e);
	r.compression = TALLY_COMP_ONEBIT;
	for (uint32_t w = 0; w < W; w++)
		assert_int_equal(h_register(&h, w, KEY, &r), TALLY_OK);
	size_t onebit = tally_engine_mem_used(h.e) - plain;
	/* two f32 accumulators as a plain key, plus RESULT bytes and the f32 server error */
	assert_true(onebit >= plain + NEL * 4 + 2 * tally_onebit_key_bytes(NEL, CE));
	/* a one-bit key registered again as f16 or plain: conflict */
	struct tally_register c = r;
	c.compression = 0;
	H_EXPECT_REJECT(&h, h_register(&h, 0, KEY, &c), TALLY_R_KEY_CONFLICT, 1);
	c = r;
	c.dtype = TALLY_DT_F16;
	H_EXPECT_REJECT(&h, h_register(&h, 0, 9, &c), TALLY_R_BAD_REGISTER, 1);
	/* a chunk whose scale + bits exceed the appliance's max_chunk_bytes (8192) */
	c = r;
	c.chunk_elems = (8192 - 4) * 8 + 1;
	c.nelems = c.chunk_elems;
	H_EXPECT_REJECT(&h, h_register(&h, 0, 9, &c), TALLY_R_BAD_REGISTER, 1);
	c.chunk_elems = c.nelems = (8192 - 4) * 8;
	assert_int_equal(tally_engine_key_register(h.e, H_JOB, 9, &c), 0);
	/* plain push to a one-bit key, one-bit push to a plain key */
	H_EXPECT_REJECT(&h, h_push(&h, 0, KEY, 0, 0, TALLY_DT_F32, f, CE), TALLY_R_CHUNK_MISMATCH, 0);
	H_EXPECT_REJECT(&h, push_ob(&h, 0, 1, 0, 0, pl, TALLY_F_ONEBIT), TALLY_R_CHUNK_MISMATCH, 0);
	assert_int_equal(push_ob(&h, 0, KEY, 0, 0, pl, TALLY_F_ONEBIT), TALLY_OK);
	/* job removal gives everything back */
	assert_int_equal(tally_engine_job_remove(h.e, H_JOB), 0);
	assert_int_equal(tally_engine_mem_used(h.e), 0);
	h_stop(&h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_onebit_rounds),
		cmocka_unit_test(test_onebit_quorum),
		cmocka_unit_test(test_onebit_deterministic),
		cmocka_unit_test(test_onebit_mismatch),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
