/* SPDX-License-Identifier: Apache-2.0
 * test_engine_noresult.c — owner mode (tally_proto.h TALLY_F_NORESULT): a rank whose push
 * asks not to get the sum is answered by a header-only RESULT (INCLUDED, contrib, RESEND as
 * a RESULT's) while the ranks without the flag get the payload; a lost answer is recovered
 * by a PULL (answered header-only, never HELD+DONE); duplicate and late pushes are answered
 * by their own flag; deterministic sums are bit-identical whoever asked for them; quorum
 * keeps INCLUDED honest; JOIN_OK offers TALLY_CAP_NORESULT; the counters say how many
 * answers went without payload and how many payload bytes went at all.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"

#define KEY 5u
#define CE 4u  /* elements per chunk */
#define W 3u   /* ranks; rank c owns chunk c */

static enum tally_reason push_f(struct h *h, uint32_t rank, uint32_t round, uint32_t chunk,
				const float *v, uint16_t flags)
{
	struct tally_hdr hd = h_hdr(TALLY_OP_PUSH, rank);
	struct tally_addr a = h_addr(rank);

	hd.key = KEY;
	hd.round = round;
	hd.offset = chunk * CE;
	hd.count = CE;
	hd.dtype = TALLY_DT_F32;
	hd.flags = flags;
	return h_rx_hdr(h, &hd, v, CE * sizeof(float), &a);
}

/* A push as the plugin's reduce-scatter sends it: NORESULT unless the rank owns the chunk. */
static enum tally_reason push_rs(struct h *h, uint32_t rank, uint32_t round, uint32_t chunk,
				 const float *v)
{
	return push_f(h, rank, round, chunk, v, rank == chunk ? 0 : TALLY_F_NORESULT);
}

static enum tally_reason join_caps(struct h *h, uint32_t rank, uint32_t caps)
{
	struct tally_hdr hd = h_hdr(TALLY_OP_JOIN, rank);
	struct tally_join j = { .world_size = W, .max_chunk_bytes = 8192, .caps = caps };
	uint8_t pl[TALLY_JOIN_LEN];
	struct tally_addr a = h_addr(rank);

	tally_proto_put_join(pl, &j);
	return h_rx_hdr(h, &hd, pl, sizeof(pl), &a);
}

static void setup(struct h *h, uint16_t quorum, uint16_t kflags)
{
	struct tally_register r = h_reg(W * CE, CE, TALLY_DT_F32, W, quorum);

	r.flags = kflags;
	h_start(h, NULL);
	assert_int_equal(tally_engine_job_add(h->e, H_JOB, H_TOKEN, W), 0);
	for (uint32_t w = 0; w < W; w++) {
		assert_int_equal(join_caps(h, w, TALLY_CAP_HELD), TALLY_OK);
		const struct cap_pkt *ok = &h->cap.q[h->cap.n - 1];
		struct tally_join_ok jo;

		assert_int_equal(ok->pkt.hdr.op, TALLY_OP_JOIN_OK);
		assert_int_equal(tally_proto_get_join_ok(&ok->pkt, &jo), TALLY_OK);
		assert_true(jo.caps & TALLY_CAP_NORESULT);
		assert_int_equal(h_register(h, w, KEY, &r), TALLY_OK);
	}
	h_clear(h);
}

static void vals(float *v, uint32_t rank, uint32_t chunk, uint32_t round)
{
	for (uint32_t i = 0; i < CE; i++)
		v[i] = (float)(rank + 1) * 0.1f + (float)chunk + (float)i * 0.001f + (float)round;
}

/* The RESULT of chunk c to `rank`: payload (owner) or header-only (the others). */
static void expect_answer(const struct h *h, uint32_t rank, uint32_t round, uint32_t c,
			  int owner, uint16_t contrib, int included)
{
	const struct cap_pkt *p = h_result(h, rank, KEY, round, c * CE);

	assert_non_null(p);
	assert_int_equal(p->pkt.hdr.count, CE);
	assert_int_equal(p->pkt.hdr.contrib, contrib);
	assert_int_equal(!!(p->pkt.hdr.flags & TALLY_F_INCLUDED), included);
	if (owner) {
		assert_false(p->pkt.hdr.flags & TALLY_F_NORESULT);
		assert_int_equal(p->pkt.hdr.payload_len, CE * sizeof(float));
		float want[CE] = { 0 }, v[CE];

		for (uint32_t w = 0; w < W; w++) {
			vals(v, w, c, round);
			for (uint32_t i = 0; i < CE; i++)
				want[i] += v[i];
		}
		float got[CE];

		memcpy(got, p->pkt.payload, sizeof(got));
		for (uint32_t i = 0; i < CE; i++)
			assert_float_equal(got[i], want[i], 1e-5);
	} else {
		assert_true(p->pkt.hdr.flags & TALLY_F_NORESULT);
		assert_int_equal(p->pkt.hdr.payload_len, 0);
		assert_int_equal(p->len, TALLY_HDR_LEN);
	}
}

/* Every rank pushes every chunk, marking the ones it does not own: each chunk's sum goes to
 * its owner alone; the others get W-1 header-only answers; HELDs and sums unchanged. */
static void test_fanout(void **state)
{
	(void)state;
	struct h h;
	float v[CE];

	setup(&h, W, 0);
	const struct tally_engine_stats *st = tally_engine_stats(h.e);
	for (uint32_t w = 0; w < W; w++)
		for (uint32_t c = 0; c < W; c++) {
			vals(v, w, c, 0);
			assert_int_equal(push_rs(&h, w, 0, c, v), TALLY_OK);
		}
	assert_int_equal(h_count(&h, TALLY_OP_RESULT, KEY, 0, ~0u), W * W);
	for (uint32_t c = 0; c < W; c++)
		for (uint32_t w = 0; w < W; w++)
			expect_answer(&h, w, 0, c, w == c, W, 1);
	assert_int_equal(st->results, W * W);
	assert_int_equal(st->noresult_acks, W * (W - 1));
	assert_int_equal(st->result_bytes, W * CE * sizeof(float));
	assert_int_equal(st->completions, W);
	/* the completing push's answer is its RTT sample, header-only or not */
	const struct cap_pkt *last = h_result(&h, W - 1, KEY, 0, 0);
	assert_int_equal(last->pkt.hdr.aux, TALLY_AUX_LAST);
	h_stop(&h);
}

/* Lost answers: a PULL of a complete chunk from a rank that asked NORESULT gets the
 * header-only RESULT again, at once (not HELD+DONE, even when it may have crossed it); a
 * PULL that carries the flag gets it too, whatever the push asked. */
static void test_probe_recovers(void **state)
{
	(void)state;
	struct h h;
	float v[CE];

	setup(&h, W, 0);
	h.cap.keep_held = 1;
	const struct tally_engine_stats *st = tally_engine_stats(h.e);
	for (uint32_t w = 0; w < W; w++) {
		vals(v, w, 0, 0);
		assert_int_equal(push_rs(&h, w, 0, 0, v), TALLY_OK);
	}
	tally_engine_poll(h.e);
	h_clear(&h);
	uint64_t done0 = st->done_answers, acks0 = st->noresult_acks;
	/* rank 1 lost its answer; its probe (round trip 1 s: it would count as crossed) */
	assert_int_equal(h_probe(&h, 1, KEY, 0, 0, 0, 1000000), TALLY_OK);
	assert_int_equal(h.cap.n, 1);
	expect_answer(&h, 1, 0, 0, 0, W, 1);
	assert_true(h.cap.q[0].pkt.hdr.flags & TALLY_F_RESEND);
	assert_int_equal(st->done_answers, done0);
	assert_int_equal(st->noresult_acks, acks0 + 1);
	/* and a PULL+DONE (after a HELD+DONE of an older appliance path) the same */
	h_clear(&h);
	assert_int_equal(h_probe(&h, 2, KEY, 0, 0, TALLY_F_DONE, 0), TALLY_OK);
	expect_answer(&h, 2, 0, 0, 0, W, 1);
	/* the owner's probe crossing its RESULT: HELD+DONE as before (no payload re-sent) */
	h_clear(&h);
	assert_int_equal(h_probe(&h, 0, KEY, 0, 0, 0, 1000000), TALLY_OK);
	assert_int_equal(h.cap.n, 1);
	assert_int_equal(h.cap.q[0].pkt.hdr.op, TALLY_OP_HELD);
	assert_int_equal(h.cap.q[0].pkt.hdr.flags, TALLY_F_DONE);
	/* its PULL+DONE: the payload */
	h_clear(&h);
	assert_int_equal(h_probe(&h, 0, KEY, 0, 0, TALLY_F_DONE, 0), TALLY_OK);
	expect_answer(&h, 0, 0, 0, 1, W, 1);
	/* a PULL flagged NORESULT from the owner: header-only, the flag of the probe wins */
	h_clear(&h);
	assert_int_equal(h_probe(&h, 0, KEY, 0, 0, TALLY_F_DONE | TALLY_F_NORESULT, 0), TALLY_OK);
	expect_answer(&h, 0, 0, 0, 0, W, 1);
	h_stop(&h);
}

/* Duplicates: on an open chunk HELD+RESEND (nothing summed twice); on a complete one the
 * answer follows the duplicate's own flag. */
static void test_duplicates(void **state)
{
	(void)state;
	struct h h;
	float v[CE];

	setup(&h, W, 0);
	h.cap.keep_held = 1;
	vals(v, 1, 0, 0);
	assert_int_equal(push_rs(&h, 1, 0, 0, v), TALLY_OK);
	assert_int_equal(push_rs(&h, 1, 0, 0, v), TALLY_OK); /* duplicate, open chunk */
	assert_int_equal(h_count(&h, TALLY_OP_RESULT, ~0u, ~0u, ~0u), 0);
	assert_int_equal(h.cap.last_held.flags, TALLY_F_RESEND);
	for (uint32_t w = 0; w < W; w += 2) {
		vals(v, w, 0, 0);
		assert_int_equal(push_rs(&h, w, 0, 0, v), TALLY_OK);
	}
	expect_answer(&h, 0, 0, 0, 1, W, 1); /* the sum holds rank 1 once */
	expect_answer(&h, 1, 0, 0, 0, W, 1);
	expect_answer(&h, 2, 0, 0, 0, W, 1);
	/* duplicates after completion */
	h_clear(&h);
	vals(v, 2, 0, 0);
	assert_int_equal(push_rs(&h, 2, 0, 0, v), TALLY_OK);
	expect_answer(&h, 2, 0, 0, 0, W, 1);
	assert_true(h.cap.q[h.cap.n - 1].pkt.hdr.flags & TALLY_F_RESEND);
	/* the same rank now without the flag (it wants the sum after all): the payload */
	h_clear(&h);
	assert_int_equal(push_f(&h, 2, 0, 0, v, 0), TALLY_OK);
	const struct cap_pkt *p = h_result(&h, 2, KEY, 0, 0);
	assert_non_null(p);
	assert_false(p->pkt.hdr.flags & TALLY_F_NORESULT);
	assert_int_equal(p->pkt.hdr.payload_len, CE * sizeof(float));
	assert_int_equal(tally_engine_stats(h.e)->duplicates, 3);
	h_stop(&h);
}

/* Deterministic keys: the owner's sum is bit-identical under every arrival order whoever
 * asked NORESULT (the flag chooses only the answer). */
static void test_deterministic(void **state)
{
	(void)state;
	static const uint32_t orders[][W] = { { 0, 1, 2 }, { 2, 1, 0 }, { 1, 2, 0 }, { 2, 0, 1 } };
	uint8_t ref[CE * sizeof(float)];

	for (size_t o = 0; o < sizeof(orders) / sizeof(orders[0]); o++) {
		struct h h;
		float v[CE];

		setup(&h, W, TALLY_KEY_DETERMINISTIC);
		for (uint32_t i = 0; i < W; i++) {
			uint32_t w = orders[o][i];

			/* values whose f32 sum depends on the order */
			for (uint32_t e = 0; e < CE; e++)
				v[e] = w == 0 ? 1e8f : (w == 1 ? -1e8f : 1.0f + (float)e * 1e-3f);
			assert_int_equal(push_rs(&h, w, 0, 1, v), TALLY_OK);
		}
		const struct cap_pkt *p = h_result(&h, 1, KEY, 0, CE);
		assert_non_null(p);
		assert_int_equal(p->pkt.hdr.payload_len, sizeof(ref));
		if (o == 0)
			memcpy(ref, p->pkt.payload, sizeof(ref));
		else
			assert_memory_equal(ref, p->pkt.payload, sizeof(ref));
		for (uint32_t w = 0; w < W; w += 2) {
			p = h_result(&h, w, KEY, 0, CE);
			assert_non_null(p);
			assert_true(p->pkt.hdr.flags & TALLY_F_NORESULT);
			assert_int_equal(p->pkt.hdr.payload_len, 0);
		}
		h_stop(&h);
	}
}

/* Quorum 2 of 3: a non-owner left out gets a header-only RESULT without INCLUDED (it folds
 * its gradient forward as with a RESULT), its late push is answered header-only with
 * RESEND, and the owner's sum holds the two pushes. */
static void test_quorum(void **state)
{
	(void)state;
	struct h h;
	float v[CE];

	setup(&h, 2, 0);
	for (uint32_t w = 0; w < 2; w++) {
		vals(v, w, 0, 0);
		assert_int_equal(push_rs(&h, w, 0, 0, v), TALLY_OK);
	}
	expect_answer(&h, 1, 0, 0, 0, 2, 1);
	/* rank 2 did not push: it gets no NORESULT wish recorded, so the full RESULT */
	const struct cap_pkt *p = h_result(&h, 2, KEY, 0, 0);
	assert_non_null(p);
	assert_false(p->pkt.hdr.flags & (TALLY_F_NORESULT | TALLY_F_INCLUDED));
	/* its late push, flagged: header-only, not included, RESEND */
	h_clear(&h);
	vals(v, 2, 0, 0);
	assert_int_equal(push_rs(&h, 2, 0, 0, v), TALLY_OK);
	p = h_result(&h, 2, KEY, 0, 0);
	assert_non_null(p);
	assert_int_equal(p->pkt.hdr.flags & (TALLY_F_NORESULT | TALLY_F_INCLUDED | TALLY_F_RESEND),
			 TALLY_F_NORESULT | TALLY_F_RESEND);
	assert_int_equal(p->pkt.hdr.payload_len, 0);
	assert_int_equal(p->pkt.hdr.contrib, 2);
	assert_int_equal(tally_engine_stats(h.e)->late_pushes, 1);
	h_stop(&h);
}

/* The next round starts clean: a rank that asked NORESULT in round 0 and not in round 1
 * gets round 1's payload. */
static void test_next_round(void **state)
{
	(void)state;
	struct h h;
	float v[CE];

	setup(&h, W, 0);
	for (uint32_t w = 0; w < W; w++) {
		vals(v, w, 0, 0);
		assert_int_equal(push_rs(&h, w, 0, 0, v), TALLY_OK);
	}
	for (uint32_t w = 0; w < W; w++) {
		vals(v, w, 0, 1);
		assert_int_equal(push_f(&h, w, 1, 0, v, 0), TALLY_OK);
	}
	for (uint32_t w = 0; w < W; w++)
		expect_answer(&h, w, 1, 0, 1, W, 1);
	h_stop(&h);
}

/* The wire rules: a header-only RESULT decodes only with NORESULT and no payload. */
static void test_decode(void **state)
{
	(void)state;
	uint8_t b[TALLY_HDR_LEN + 16];
	struct tally_hdr hd = h_hdr(TALLY_OP_RESULT, 0);
	struct tally_pkt p;

	hd.count = 4;
	hd.dtype = TALLY_DT_F32;
	hd.flags = TALLY_F_NORESULT;
	tally_proto_finish(b, &hd, NULL, 0);
	assert_int_equal(tally_proto_decode(b, TALLY_HDR_LEN, &p), TALLY_OK);
	hd.flags = 0; /* a RESULT without payload and without the flag */
	tally_proto_finish(b, &hd, NULL, 0);
	assert_int_equal(tally_proto_decode(b, TALLY_HDR_LEN, &p), TALLY_R_BAD_COUNT);
	hd.flags = TALLY_F_NORESULT; /* the flag with a payload */
	memset(b + TALLY_HDR_LEN, 0, 16);
	tally_proto_finish(b, &hd, b + TALLY_HDR_LEN, 16);
	assert_int_equal(tally_proto_decode(b, sizeof(b), &p), TALLY_R_BAD_COUNT);
	hd.count = 0;
	tally_proto_finish(b, &hd, NULL, 0);
	assert_int_equal(tally_proto_decode(b, TALLY_HDR_LEN, &p), TALLY_R_BAD_COUNT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fanout),
		cmocka_unit_test(test_probe_recovers),
		cmocka_unit_test(test_duplicates),
		cmocka_unit_test(test_deterministic),
		cmocka_unit_test(test_quorum),
		cmocka_unit_test(test_next_round),
		cmocka_unit_test(test_decode),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
