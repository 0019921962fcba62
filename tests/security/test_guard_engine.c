/* SPDX-License-Identifier: Apache-2.0
 * test_guard_engine.c — the engine's guard, unit by unit, on the capture transport of the
 * engine tests: "last heard" refreshed by every valid packet (so a live rank cannot be
 * stolen), identity (IP, port, MAC) for JOIN, data and BYE, re-bind after real silence,
 * per-job quotas (keys, bytes, operator override, memory given back), the allow-list, and
 * open admission (subnet, rank quota, claim limit, claim expiry). Each case checks the
 * refusal's reason, its counter, and that nothing else changed.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../engine/harness.h"

#define SEC 1000000000ull

static void advance(struct h *h, uint64_t ns)
{
	h->cap.now += ns;
	tally_engine_poll(h->e); /* the appliance loop polls: the engine's clock moves */
}

static enum tally_reason join_from(struct h *h, uint32_t job, uint32_t rank, uint32_t world,
				   const struct tally_addr *a)
{
	struct tally_hdr hd = h_hdr(TALLY_OP_JOIN, rank);
	struct tally_join j = { .world_size = world, .max_chunk_bytes = 8192 };
	uint8_t pl[TALLY_JOIN_LEN];
	hd.job_id = job;
	tally_proto_put_join(pl, &j);
	return h_rx_hdr(h, &hd, pl, sizeof(pl), a);
}

static enum tally_reason op_from(struct h *h, uint8_t op, uint32_t rank,
				 const struct tally_addr *a)
{
	struct tally_hdr hd = h_hdr(op, rank);
	return h_rx_hdr(h, &hd, NULL, 0, a);
}

static enum tally_reason register_as(struct h *h, uint32_t job, uint32_t rank, uint32_t key,
				     uint32_t nelems)
{
	struct tally_register r = h_reg(nelems, 2048, TALLY_DT_F32, 1, 1);
	struct tally_hdr hd = h_hdr(TALLY_OP_REGISTER, rank);
	uint8_t pl[TALLY_REGISTER_LEN];
	struct tally_addr a = h_addr(rank);
	hd.job_id = job;
	hd.key = key;
	tally_proto_put_register(pl, &r);
	return h_rx_hdr(h, &hd, pl, sizeof(pl), &a);
}

/* A rank that only probes (PULL) or is refused (TOO_EARLY) is alive: no takeover. */
static void test_last_heard_every_packet(void **state)
{
	struct h h;
	(void)state;
	h_start(&h, NULL);
	struct tally_register r = h_reg(4, 4, TALLY_DT_F32, 2, 2);
	h_setup(&h, 2, 1, &r);
	float v[4] = { 1, 2, 3, 4 };
	assert_int_equal(h_push(&h, 0, 1, 0, 0, TALLY_DT_F32, v, 4), TALLY_OK);
	/* rank 0 waits for rank 1: only probes (and a push of round 2, too early) for 8 s */
	for (int s = 0; s < 8; s++) {
		advance(&h, SEC);
		assert_int_equal(h_pull(&h, 0, 1, 0, 0), TALLY_OK);
		assert_int_equal(h_push(&h, 0, 1, 2, 0, TALLY_DT_F32, v, 4), TALLY_R_TOO_EARLY);
	}
	struct tally_addr thief = h_addr(0);
	thief.ip = 0x0a0000feu;
	H_EXPECT_REJECT(&h, join_from(&h, H_JOB, 0, 2, &thief), TALLY_R_RANK_TAKEN, 1);
	/* rank 1 never sent since its JOIN (8 s > the 5 s rejoin timeout): a restart may
	 * take it over, and that re-bind is counted */
	struct tally_addr moved = h_addr(1);
	moved.port = 4242;
	assert_int_equal(join_from(&h, H_JOB, 1, 2, &moved), TALLY_OK);
	assert_int_equal(tally_engine_stats(h.e)->rebinds, 1);
	h_stop(&h);
}

/* A rank at a barrier talks to one core; on another core it looks silent. With the
 * appliance's shared liveness (cfg.live) a JOIN from another IP is refused on that core
 * too; a rank silent on every core may still be re-bound (a restarted worker), and its
 * own IP is never refused by the shared rule. Without cfg.live: today's per-core rule. */
static void liveness_across_cores(int shared)
{
	struct tally_engine_live *live = shared ? tally_engine_live_create(16) : NULL;
	struct tally_register r = h_reg(4, 4, TALLY_DT_F32, 2, 2);
	struct h h0, h1;
	h_setup_cores(&h0, &h1, live, 2, 1, &r);
	float v[4] = { 1, 2, 3, 4 };
	assert_int_equal(h_push(&h0, 0, 1, 0, 0, TALLY_DT_F32, v, 4), TALLY_OK);
	for (int s = 0; s < 8; s++) { /* rank 0 probes core 0 only, for 8 s */
		advance(&h0, SEC);
		advance(&h1, SEC);
		assert_int_equal(h_pull(&h0, 0, 1, 0, 0), TALLY_OK);
	}
	struct tally_addr thief = h_addr(0);
	thief.ip = 0x0a0000feu;
	if (shared)
		H_EXPECT_REJECT(&h1, join_from(&h1, H_JOB, 0, 2, &thief), TALLY_R_RANK_TAKEN, 1);
	else /* per core: core 1 has not heard rank 0 for 8 s */
		assert_int_equal(join_from(&h1, H_JOB, 0, 2, &thief), TALLY_OK);
	/* rank 1 is silent on both cores: a restart from another IP takes it on core 1 */
	struct tally_addr moved = h_addr(1);
	moved.ip = 0x0a0000fdu;
	assert_int_equal(join_from(&h1, H_JOB, 1, 2, &moved), TALLY_OK);
	if (shared) {
		/* rank 0 restarted on its own host (another port): not refused by the shared rule */
		struct tally_addr again = h_addr(0);
		again.port = 4243;
		assert_int_equal(join_from(&h1, H_JOB, 0, 2, &again), TALLY_OK);
	}
	h_stop(&h0);
	h_stop(&h1);
	tally_engine_live_destroy(live);
}

static void test_liveness_across_cores(void **state)
{
	(void)state;
	liveness_across_cores(0);
	liveness_across_cores(1);
}

/* Same IP and port, another MAC: JOIN, data and BYE are refused under their reasons. */
static void test_mac_identity(void **state)
{
	struct h h;
	(void)state;
	h_start(&h, NULL);
	struct tally_register r = h_reg(4, 4, TALLY_DT_F32, 2, 2);
	h_setup(&h, 2, 1, &r);
	struct tally_addr spoof = h_addr(0);
	spoof.mac[5] = 0x66;
	H_EXPECT_REJECT(&h, join_from(&h, H_JOB, 0, 2, &spoof), TALLY_R_MAC_MISMATCH, 1);
	float v[4] = { 1e9f, 1, 1, 1 };
	struct tally_hdr hd = h_hdr(TALLY_OP_PUSH, 0);
	hd.key = 1;
	hd.count = 4;
	hd.dtype = TALLY_DT_F32;
	H_EXPECT_REJECT(&h, h_rx_hdr(&h, &hd, v, sizeof(v), &spoof), TALLY_R_MAC_MISMATCH, 0);
	/* spoofed BYEs: another MAC, another port, another address; the rank stays bound */
	H_EXPECT_REJECT(&h, op_from(&h, TALLY_OP_BYE, 0, &spoof), TALLY_R_BYE_REFUSED, 0);
	struct tally_addr other = h_addr(0);
	other.port = 1;
	H_EXPECT_REJECT(&h, op_from(&h, TALLY_OP_BYE, 0, &other), TALLY_R_BYE_REFUSED, 0);
	H_EXPECT_REJECT(&h, op_from(&h, TALLY_OP_BYE, 0, &other), TALLY_R_BYE_REFUSED, 0);
	/* the real ranks still sum, and RESULTs go to the bound MAC */
	float w[4] = { 1, 2, 3, 4 };
	assert_int_equal(h_push(&h, 0, 1, 0, 0, TALLY_DT_F32, w, 4), TALLY_OK);
	assert_int_equal(h_push(&h, 1, 1, 0, 0, TALLY_DT_F32, w, 4), TALLY_OK);
	const struct cap_pkt *res = h_result(&h, 0, 1, 0, 0);
	assert_non_null(res);
	assert_int_equal(res->to.mac[5], 0);
	assert_true(((const float *)res->pkt.payload)[0] == 2.0f);
	assert_int_equal(op_from(&h, TALLY_OP_BYE, 0, &(struct tally_addr){ 0 }),
			 TALLY_R_BYE_REFUSED);
	h_stop(&h);
}

static int job_mem(void *arg, const struct tally_engine_job_info *ji)
{
	if (ji->job_id == H_JOB)
		*(uint64_t *)arg = ji->mem_bytes;
	return 0;
}

static void test_quotas(void **state)
{
	struct tally_engine_cfg cfg;
	struct h h;
	(void)state;
	h_init_cfg(&cfg);
	cfg.quota_keys = 2;
	cfg.quota_bytes = 1u << 20;
	h_start(&h, &cfg);
	assert_int_equal(tally_engine_job_add(h.e, H_JOB, H_TOKEN, 1), 0);
	assert_int_equal(tally_engine_job_add(h.e, H_JOB + 1, H_TOKEN, 1), 0);
	assert_int_equal(h_join(&h, 0, 1), TALLY_OK);
	/* 3 x 64K elements = 3 x (2 x 256 KiB) accumulators: the second fits, the third not */
	assert_int_equal(register_as(&h, H_JOB, 0, 1, 65536), TALLY_OK);
	H_EXPECT_REJECT(&h, register_as(&h, H_JOB, 0, 2, 3 * 65536), TALLY_R_QUOTA_BYTES, 1);
	assert_int_equal(register_as(&h, H_JOB, 0, 2, 16), TALLY_OK);
	H_EXPECT_REJECT(&h, register_as(&h, H_JOB, 0, 3, 16), TALLY_R_QUOTA_KEYS, 1);
	assert_int_equal(tally_engine_key_register(h.e, H_JOB, 9,
		&(struct tally_register){ .nelems = 16, .chunk_elems = 16, .dtype = TALLY_DT_F32,
					  .participants = 1, .quorum = 1 }), -EDQUOT);
	uint64_t mem = 0;
	tally_engine_walk_jobs(h.e, job_mem, &mem);
	assert_true(mem > 512u << 10 && mem <= 1u << 20);
	/* the operator raises this job's quota: one more key fits */
	assert_int_equal(tally_engine_job_quota(h.e, H_JOB, 3, 0), 0);
	assert_int_equal(register_as(&h, H_JOB, 0, 3, 16), TALLY_OK);
	assert_int_equal(tally_engine_job_quota(h.e, 999, 3, 0), -ENOENT);
	/* the job ends: its memory is no longer charged to it */
	assert_int_equal(h_bye(&h, 0), TALLY_OK);
	mem = 1;
	tally_engine_walk_jobs(h.e, job_mem, &mem);
	assert_int_equal(mem, 0);
	h_stop(&h);
}

static void test_allow_list(void **state)
{
	struct tally_engine_cfg cfg;
	struct h h;
	(void)state;
	h_init_cfg(&cfg);
	cfg.nallow = 1;
	cfg.allow[0].net = 0x0a000000u;      /* h_addr's IPs, as stored: 10.0.0.0/30 */
	cfg.allow[0].mask = 0xfffffffcu;
	h_start(&h, &cfg);
	assert_int_equal(tally_engine_job_add(h.e, H_JOB, H_TOKEN, 8), 0);
	assert_int_equal(h_join(&h, 0, 8), TALLY_OK);
	H_EXPECT_REJECT(&h, h_join(&h, 5, 8), TALLY_R_NOT_ALLOWED, 0);
	/* before decoding: garbage from outside is NOT_ALLOWED, not BAD_MAGIC */
	struct tally_addr out = h_addr(7);
	uint8_t junk[8] = { 0 };
	assert_int_equal(tally_engine_rx(h.e, junk, sizeof(junk), &out), TALLY_R_NOT_ALLOWED);
	assert_int_equal(h_drops(&h, TALLY_R_BAD_MAGIC) + h_drops(&h, TALLY_R_TRUNCATED), 0);
	h_stop(&h);
}

static int count_jobs(void *arg, const struct tally_engine_job_info *ji)
{
	(void)ji;
	(*(unsigned *)arg)++;
	return 0;
}

static void test_open_admission(void **state)
{
	struct tally_engine_cfg cfg;
	struct h h;
	unsigned n;
	(void)state;
	h_init_cfg(&cfg);
	cfg.open_admission = 1;
	cfg.admit_subnet.net = 0x0a000000u;  /* 10.0.0.0/29 as h_addr stores it */
	cfg.admit_subnet.mask = 0xfffffff8u;
	cfg.admit_claims = 2;
	cfg.quota_ranks = 8;
	cfg.admit_timeout_ns = 3 * SEC;
	h_start(&h, &cfg);
	struct tally_addr a = h_addr(1), far = h_addr(9);
	H_EXPECT_REJECT(&h, join_from(&h, 100, 0, 2, &far), TALLY_R_ADMIT_SUBNET, 1);
	H_EXPECT_REJECT(&h, join_from(&h, 100, 0, 16, &a), TALLY_R_QUOTA_RANKS, 1);
	/* a token-less flood: new job ids, one JOIN each; two claims, then refusals */
	assert_int_equal(join_from(&h, 100, 0, 1, &a), TALLY_OK);
	assert_int_equal(join_from(&h, 101, 0, 1, &a), TALLY_OK);
	for (uint32_t j = 102; j < 140; j++)
		assert_int_equal(join_from(&h, j, 0, 1, &a), TALLY_R_ADMIT_LIMIT);
	assert_int_equal(h_drops(&h, TALLY_R_ADMIT_LIMIT), 38);
	assert_int_equal(h_drops(&h, TALLY_R_JOB_TABLE_FULL), 0);
	/* the operator still admits jobs */
	assert_int_equal(tally_engine_job_add(h.e, H_JOB, H_TOKEN, 2), 0);
	/* job 101 registers a key: no longer a claim; job 100 never does and expires */
	struct tally_hdr hd = h_hdr(TALLY_OP_REGISTER, 0);
	struct tally_register r = h_reg(16, 16, TALLY_DT_F32, 1, 1);
	uint8_t pl[TALLY_REGISTER_LEN];
	hd.job_id = 101;
	hd.key = 1;
	tally_proto_put_register(pl, &r);
	assert_int_equal(h_rx_hdr(&h, &hd, pl, sizeof(pl), &a), TALLY_OK);
	advance(&h, 4 * SEC);
	for (uint32_t i = 0; i < h.cfg.max_jobs; i++)
		tally_engine_poll(h.e);
	assert_int_equal(tally_engine_stats(h.e)->claims_expired, 1);
	n = 0;
	tally_engine_walk_jobs(h.e, count_jobs, &n);
	assert_int_equal(n, 2); /* 101 (registered) and the operator's */
	/* a claim slot is free again */
	assert_int_equal(join_from(&h, 150, 0, 1, &a), TALLY_OK);
	h_stop(&h);
}

static enum tally_reason register_from(struct h *h, uint32_t job, uint32_t key, uint32_t nelems,
					const struct tally_addr *a)
{
	struct tally_register r = h_reg(nelems, 2048, TALLY_DT_F32, 1, 1);
	struct tally_hdr hd = h_hdr(TALLY_OP_REGISTER, 0);
	uint8_t pl[TALLY_REGISTER_LEN];
	hd.job_id = job;
	hd.key = key;
	tally_proto_put_register(pl, &r);
	return h_rx_hdr(h, &hd, pl, sizeof(pl), a);
}

/* Open admission never takes operator admission's room (issue 33): claims that registered
 * a key still count against admit_claims (slots), and open jobs together hold at most
 * admit_bytes (half the memory), each at its quota or not. */
static void test_open_admission_reserve(void **state)
{
	struct tally_engine_cfg cfg;
	struct h h;
	(void)state;
	h_init_cfg(&cfg);
	cfg.open_admission = 1;
	cfg.max_jobs = 4;
	cfg.admit_claims = 2;
	cfg.quota_bytes = cfg.mem_budget / 2;
	h_start(&h, &cfg);
	struct tally_addr a = h_addr(1);
	/* two open jobs, each registers one small key: still open jobs, the third is refused */
	assert_int_equal(join_from(&h, 100, 0, 1, &a), TALLY_OK);
	assert_int_equal(register_from(&h, 100, 1, 2048, &a), TALLY_OK);
	assert_int_equal(join_from(&h, 101, 0, 1, &a), TALLY_OK);
	assert_int_equal(register_from(&h, 101, 1, 2048, &a), TALLY_OK);
	H_EXPECT_REJECT(&h, join_from(&h, 102, 0, 1, &a), TALLY_R_ADMIT_LIMIT, 1);
	/* the operator's jobs take the other two slots */
	assert_int_equal(tally_engine_job_add(h.e, H_JOB, H_TOKEN, 1), 0);
	assert_int_equal(tally_engine_job_add(h.e, H_JOB + 1, H_TOKEN, 1), 0);
	/* both open jobs register 1M-element keys (8 MiB) up to their quota (half the
	 * memory each): together they stop at half */
	unsigned ok[2] = { 0, 0 };
	enum tally_reason last[2] = { TALLY_OK, TALLY_OK };
	for (uint32_t k = 2; k < 12; k++)
		for (int j = 0; j < 2; j++)
			if (last[j] == TALLY_OK &&
			    (last[j] = register_from(&h, 100 + (uint32_t)j, k, 1u << 20, &a)) == TALLY_OK)
				ok[j]++;
	assert_int_equal(last[0], TALLY_R_QUOTA_BYTES);
	assert_int_equal(last[1], TALLY_R_QUOTA_BYTES);
	assert_true(ok[0] + ok[1] >= 2);
	assert_true((ok[0] + ok[1]) * (8u << 20) <= h.cfg.mem_budget / 2);
	/* the operator's job still gets memory: a 2M-element key (16 MiB) */
	assert_int_equal(h_join(&h, 0, 1), TALLY_OK);
	assert_int_equal(register_as(&h, H_JOB, 0, 1, 2u << 20), TALLY_OK);
	assert_int_equal(h_drops(&h, TALLY_R_NO_MEMORY), 0);
	h_stop(&h);
}

static enum tally_reason complete_push(struct h *h, uint32_t rank, uint32_t key, uint32_t round,
					const float *v)
{
	struct tally_hdr hd = h_hdr(TALLY_OP_PUSH, rank);
	hd.key = key;
	hd.round = round;
	hd.count = 4;
	hd.dtype = TALLY_DT_F32;
	hd.flags = TALLY_F_COMPLETE;
	hd.contrib = 2;
	struct tally_addr a = h_addr(rank);
	return h_rx_hdr(h, &hd, v, 4 * sizeof(float), &a);
}

/* A TALLY_F_COMPLETE push (the re-push of a whole sum after an appliance restart) in an
 * unauthenticated job (issue 33): during a normal run, a forged one into an open chunk is
 * refused and counted, and the real sum completes it. What stays possible (THREAT_MODEL.md):
 * in the recovery window, once the engine asked a rank NEED_RESULT for a chunk, a complete
 * sum from that rank's address is installed. */
static void test_complete_forgery(void **state)
{
	struct h h;
	(void)state;
	h_start(&h, NULL);
	struct tally_register r = h_reg(4, 4, TALLY_DT_F32, 2, 2);
	h_setup(&h, 2, 1, &r);
	float v0[4] = { 1, 2, 3, 4 }, v1[4] = { 10, 20, 30, 40 }, bad[4] = { 666, 666, 666, 666 };
	const struct tally_engine_stats *st = tally_engine_stats(h.e);
	assert_int_equal(h_push(&h, 0, 1, 0, 0, TALLY_DT_F32, v0, 4), TALLY_OK);
	assert_int_equal(complete_push(&h, 1, 1, 0, bad), TALLY_R_STALE_ROUND);
	assert_int_equal(st->installs_unasked, 1);
	assert_int_equal(st->installs, 0);
	assert_int_equal(st->completions, 0);
	assert_int_equal(h_push(&h, 1, 1, 0, 0, TALLY_DT_F32, v1, 4), TALLY_OK);
	assert_int_equal(st->completions, 1);
	assert_int_equal(st->installs, 0);
	/* the recovery window: key 2 is fresh (as after a restart); rank 1 is at round 1,
	 * rank 0 re-pushes round 0: the engine asks rank 1 for round 0's sum, and takes it */
	assert_int_equal(h_register(&h, 0, 2, &r), TALLY_OK);
	assert_int_equal(h_register(&h, 1, 2, &r), TALLY_OK);
	assert_int_equal(h_push(&h, 1, 2, 1, 0, TALLY_DT_F32, v1, 4), TALLY_OK);
	assert_int_equal(h_push(&h, 0, 2, 0, 0, TALLY_DT_F32, v0, 4), TALLY_OK);
	assert_true(st->need_asks >= 1);
	assert_int_equal(complete_push(&h, 1, 2, 0, bad), TALLY_OK);
	assert_int_equal(st->installs, 1);
	h_stop(&h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_last_heard_every_packet),
		cmocka_unit_test(test_liveness_across_cores),
		cmocka_unit_test(test_mac_identity),
		cmocka_unit_test(test_quotas),
		cmocka_unit_test(test_allow_list),
		cmocka_unit_test(test_open_admission),
		cmocka_unit_test(test_open_admission_reserve),
		cmocka_unit_test(test_complete_forgery),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
