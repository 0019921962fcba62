/* SPDX-License-Identifier: Apache-2.0
 * test_engine.c — engine admission and validation: JOIN, open admission, rejoin timeout,
 * REGISTER with the memory budget and conflicts, every rejection reason produced on
 * purpose (counted, nothing changed), and a first complete sum.
 */
#include "harness.h"

#include <errno.h>

static void test_join(void **state)
{
	(void)state;
	struct h h;
	struct tally_engine_cfg cfg;
	h_init_cfg(&cfg);
	cfg.core_index = 1; /* JOIN_OK names the answering core in aux */
	h_start(&h, &cfg);
	assert_int_equal(tally_engine_job_add(h.e, H_JOB, H_TOKEN, 4), 0);
	assert_int_equal(tally_engine_job_add(h.e, H_JOB, H_TOKEN, 4), 0);
	assert_int_equal(tally_engine_job_add(h.e, H_JOB, H_TOKEN + 1, 4), -EEXIST);
	assert_int_equal(tally_engine_job_add(h.e, H_JOB, H_TOKEN, 5), -EEXIST);
	assert_int_equal(tally_engine_job_add(h.e, 8, 1, 0), -EINVAL);
	assert_int_equal(tally_engine_job_add(h.e, 8, 1, TALLY_MAX_WORKERS + 1), -EINVAL);

	assert_int_equal(h_join(&h, 2, 4), TALLY_OK);
	assert_int_equal(h.cap.n, 1);
	const struct cap_pkt *p = &h.cap.q[0];
	assert_int_equal(p->pkt.hdr.op, TALLY_OP_JOIN_OK);
	assert_int_equal(p->pkt.hdr.rank, 2);
	assert_int_equal(p->pkt.hdr.job_id, H_JOB);
	assert_int_equal(p->pkt.hdr.aux, 1);
	struct tally_addr a2 = h_addr(2);
	assert_int_equal(p->to.cookie, a2.cookie);
	struct tally_join_ok ok;
	assert_int_equal(tally_proto_get_join_ok(&p->pkt, &ok), TALLY_OK);
	assert_int_equal(ok.base_port, 9170);
	assert_int_equal(ok.ncores, 2);
	assert_int_equal(ok.max_chunk_bytes, 8192);
	assert_int_equal(ok.world_size, 4);
	assert_true(ok.caps & TALLY_CAP_DETERMINISTIC);
	assert_true(ok.caps & TALLY_CAP_QUORUM);
	/* an engine not told its receive path takes GSO (tallyd's) does not offer it */
	assert_false(ok.caps & TALLY_CAP_GSO);
	assert_int_equal(tally_engine_stats(h.e)->joins, 1);

	/* Re-JOIN from the same address (lost JOIN_OK) is answered again. */
	assert_int_equal(h_join(&h, 2, 4), TALLY_OK);
	assert_int_equal(h.cap.n, 2);
	/* world size 0 in JOIN means "whatever the job says". */
	assert_int_equal(h_join(&h, 1, 0), TALLY_OK);

	/* The same rank from another address: refused with ERROR RANK_TAKEN. */
	struct tally_hdr hd = h_hdr(TALLY_OP_JOIN, 2);
	struct tally_join j = { .world_size = 4 };
	uint8_t pl[TALLY_JOIN_LEN];
	tally_proto_put_join(pl, &j);
	struct tally_addr other = h_addr(3);
	H_EXPECT_REJECT(&h, h_rx_hdr(&h, &hd, pl, sizeof(pl), &other), TALLY_R_RANK_TAKEN, 1);
	/* ... until the rank was silent for the rejoin timeout (a restarted worker). */
	h.cap.now += h.cfg.rejoin_timeout_ns;
	assert_int_equal(h_rx_hdr(&h, &hd, pl, sizeof(pl), &other), TALLY_OK);

	/* wrong job, wrong token, rank out of range, world size disagreement */
	hd = h_hdr(TALLY_OP_JOIN, 0);
	hd.job_id = 99;
	struct tally_addr a0 = h_addr(0);
	H_EXPECT_REJECT(&h, h_rx_hdr(&h, &hd, pl, sizeof(pl), &a0), TALLY_R_WRONG_JOB, 1);
	hd = h_hdr(TALLY_OP_JOIN, 0);
	hd.token ^= 1;
	H_EXPECT_REJECT(&h, h_rx_hdr(&h, &hd, pl, sizeof(pl), &a0), TALLY_R_WRONG_TOKEN, 1);
	assert_int_equal(h.cap.q[h.cap.n - 1].pkt.hdr.aux, TALLY_OP_JOIN);
	H_EXPECT_REJECT(&h, h_join(&h, 4, 4), TALLY_R_BAD_RANK, 1);
	H_EXPECT_REJECT(&h, h_join(&h, 0, 5), TALLY_R_BAD_RANK, 1);
	h_stop(&h);
}

/* takes_gso (tally-udpd's kernel sockets) is offered in JOIN_OK as TALLY_CAP_GSO: the
 * workers' auto rule (TALLY_GSO unset) turns GSO on by it. */
static void test_join_gso(void **state)
{
	(void)state;
	struct h h;
	struct tally_engine_cfg cfg;
	struct tally_join_ok ok;

	h_init_cfg(&cfg);
	cfg.takes_gso = 1;
	h_start(&h, &cfg);
	assert_int_equal(tally_engine_job_add(h.e, H_JOB, H_TOKEN, 4), 0);
	assert_int_equal(h_join(&h, 0, 4), TALLY_OK);
	assert_int_equal(h.cap.n, 1);
	assert_int_equal(tally_proto_get_join_ok(&h.cap.q[0].pkt, &ok), TALLY_OK);
	assert_true(ok.caps & TALLY_CAP_GSO);
	assert_true(ok.caps & TALLY_CAP_QUORUM);
	h_stop(&h);
}

static int count_jobs(void *arg, const struct tally_engine_job_info *ji)
{
	struct tally_engine_job_info *out = arg;
	*out = *ji;
	return 0;
}

static void test_open_admission(void **state)
{
	(void)state;
	struct h h;
	struct tally_engine_cfg cfg;
	h_init_cfg(&cfg);
	cfg.max_jobs = 1;
	/* Without open admission an unknown job is refused. */
	h_start(&h, &cfg);
	H_EXPECT_REJECT(&h, h_join(&h, 0, 3), TALLY_R_WRONG_JOB, 1);
	h_stop(&h);

	cfg.open_admission = 1;
	h_start(&h, &cfg);
	/* A JOIN with no usable world size cannot create a job. */
	H_EXPECT_REJECT(&h, h_join(&h, 0, 0), TALLY_R_BAD_RANK, 1);
	H_EXPECT_REJECT(&h, h_join(&h, 3, 3), TALLY_R_BAD_RANK, 1);
	assert_int_equal(h_join(&h, 0, 3), TALLY_OK);
	struct tally_engine_job_info ji;
	memset(&ji, 0, sizeof(ji));
	tally_engine_walk_jobs(h.e, count_jobs, &ji);
	assert_int_equal(ji.job_id, H_JOB);
	assert_int_equal(ji.world_size, 3);
	assert_int_equal(ji.joined, 1);
	assert_int_equal(ji.open_admission, 1);
	/* The first JOIN fixed the token. */
	struct tally_hdr hd = h_hdr(TALLY_OP_JOIN, 1);
	hd.token = 5;
	struct tally_join j = { .world_size = 3 };
	uint8_t pl[TALLY_JOIN_LEN];
	tally_proto_put_join(pl, &j);
	struct tally_addr a1 = h_addr(1);
	H_EXPECT_REJECT(&h, h_rx_hdr(&h, &hd, pl, sizeof(pl), &a1), TALLY_R_WRONG_TOKEN, 1);
	/* The job table is full: another job id cannot be created. */
	hd = h_hdr(TALLY_OP_JOIN, 1);
	hd.job_id = H_JOB + 1;
	H_EXPECT_REJECT(&h, h_rx_hdr(&h, &hd, pl, sizeof(pl), &a1), TALLY_R_JOB_TABLE_FULL, 1);
	assert_int_equal(h_join(&h, 1, 3), TALLY_OK);
	h_stop(&h);
}

static void test_register(void **state)
{
	(void)state;
	struct h h;
	struct tally_engine_cfg cfg;
	h_init_cfg(&cfg);
	cfg.mem_budget = 1u << 20;
	cfg.max_keys = 4;
	h_start(&h, &cfg);
	h_setup(&h, 4, 0, NULL);
	assert_int_equal(tally_engine_mem_used(h.e), 0);

	struct tally_register r = h_reg(1000, 256, TALLY_DT_F32, 4, 4);
	assert_int_equal(h_register(&h, 0, 5, &r), TALLY_OK);
	assert_int_equal(h.cap.n, 1);
	const struct cap_pkt *p = &h.cap.q[0];
	assert_int_equal(p->pkt.hdr.op, TALLY_OP_REGISTER);
	assert_true(p->pkt.hdr.flags & TALLY_F_ACK);
	assert_int_equal(p->pkt.hdr.key, 5);
	struct tally_register echo;
	assert_int_equal(tally_proto_get_register(&p->pkt, &echo), TALLY_OK);
	assert_int_equal(echo.nelems, 1000);
	assert_int_equal(echo.chunk_elems, 256);
	size_t used = tally_engine_mem_used(h.e);
	/* accumulators of both parities at least */
	assert_true(used >= 2 * 1000 * 4);
	/* Identical REGISTER from another rank: acked, nothing more charged. */
	assert_int_equal(h_register(&h, 1, 5, &r), TALLY_OK);
	assert_int_equal(tally_engine_mem_used(h.e), used);
	assert_int_equal(tally_engine_stats(h.e)->registers, 2);
	/* Conflicts */
	struct tally_register c = r;
	c.nelems = 1001;
	H_EXPECT_REJECT(&h, h_register(&h, 2, 5, &c), TALLY_R_KEY_CONFLICT, 1);
	c = r;
	c.quorum = 3;
	H_EXPECT_REJECT(&h, h_register(&h, 2, 5, &c), TALLY_R_KEY_CONFLICT, 1);
	c = r;
	c.dtype = TALLY_DT_F16;
	H_EXPECT_REJECT(&h, h_register(&h, 2, 5, &c), TALLY_R_KEY_CONFLICT, 1);
	/* Bad registrations: malformed, bigger than the appliance's chunk, more participants
	 * than the job has, deterministic without a pool is tested below, compression. */
	c = r;
	c.quorum = 5;
	H_EXPECT_REJECT(&h, h_register(&h, 2, 6, &c), TALLY_R_BAD_REGISTER, 1);
	c = r;
	c.chunk_elems = 2049; /* 8196 bytes > 8192 */
	H_EXPECT_REJECT(&h, h_register(&h, 2, 6, &c), TALLY_R_BAD_REGISTER, 1);
	c = r;
	c.participants = 5;
	c.quorum = 5;
	H_EXPECT_REJECT(&h, h_register(&h, 2, 6, &c), TALLY_R_BAD_REGISTER, 1);
	c = r;
	c.compression = TALLY_COMP_COUNT;
	H_EXPECT_REJECT(&h, h_register(&h, 2, 6, &c), TALLY_R_UNSUPPORTED, 1);
	c = h_reg(0x80000001u, 1, TALLY_DT_F32, 4, 4); /* more than 2^30 chunks */
	H_EXPECT_REJECT(&h, h_register(&h, 2, 6, &c), TALLY_R_BAD_REGISTER, 1);
	/* Over the budget: a clear NO_MEMORY, nothing charged. */
	c = h_reg(1u << 20, 2048, TALLY_DT_F32, 4, 4);
	H_EXPECT_REJECT(&h, h_register(&h, 2, 6, &c), TALLY_R_NO_MEMORY, 1);
	assert_int_equal(tally_engine_key_register(h.e, H_JOB, 6, &c), -ENOMEM);
	assert_int_equal(tally_engine_mem_used(h.e), used);

	/* The direct API */
	assert_int_equal(tally_engine_key_register(h.e, H_JOB, 5, &r), 0);
	c = r;
	c.nelems = 7;
	assert_int_equal(tally_engine_key_register(h.e, H_JOB, 5, &c), -EEXIST);
	assert_int_equal(tally_engine_key_register(h.e, 99, 5, &r), -ENOENT);
	c.quorum = 0;
	assert_int_equal(tally_engine_key_register(h.e, H_JOB, 9, &c), -EINVAL);
	for (uint32_t k = 10; k < 13; k++)
		assert_int_equal(tally_engine_key_register(h.e, H_JOB, k, &r), 0);
	assert_int_equal(tally_engine_key_register(h.e, H_JOB, 13, &r), -ENOSPC);
	H_EXPECT_REJECT(&h, h_register(&h, 0, 13, &r), TALLY_R_NO_MEMORY, 1);
	assert_int_equal(tally_engine_mem_used(h.e), 4 * used);

	/* Removing the job frees everything. */
	assert_int_equal(tally_engine_job_remove(h.e, H_JOB), 0);
	assert_int_equal(tally_engine_job_remove(h.e, H_JOB), -ENOENT);
	assert_int_equal(tally_engine_mem_used(h.e), 0);
	h_stop(&h);

	/* An engine without a staging pool refuses deterministic keys. */
	h_init_cfg(&cfg);
	cfg.det_pool_bytes = 0;
	h_start(&h, &cfg);
	h_setup(&h, 2, 0, NULL);
	r = h_reg(100, 100, TALLY_DT_F32, 2, 2);
	r.flags = TALLY_KEY_DETERMINISTIC;
	H_EXPECT_REJECT(&h, h_register(&h, 0, 1, &r), TALLY_R_UNSUPPORTED, 1);
	h_stop(&h);
}

static void test_register_binds(void **state)
{
	(void)state;
	struct h h;
	h_start(&h, NULL);
	assert_int_equal(tally_engine_job_add(h.e, H_JOB, H_TOKEN, 2), 0);
	struct tally_register r = h_reg(4, 4, TALLY_DT_F32, 2, 2);
	/* A REGISTER from a rank that joined another core binds it here. */
	assert_int_equal(h_register(&h, 0, 1, &r), TALLY_OK);
	assert_int_equal(h_register(&h, 1, 1, &r), TALLY_OK);
	float v[4] = { 1, 2, 3, 4 };
	assert_int_equal(h_push(&h, 0, 1, 0, 0, TALLY_DT_F32, v, 4), TALLY_OK);
	assert_int_equal(h_push(&h, 1, 1, 0, 0, TALLY_DT_F32, v, 4), TALLY_OK);
	assert_int_equal(h_count(&h, TALLY_OP_RESULT, 1, 0, 0), 2);
	/* ... but not from another address while the rank is live. */
	struct tally_hdr hd = h_hdr(TALLY_OP_REGISTER, 1);
	hd.key = 1;
	uint8_t pl[TALLY_REGISTER_LEN];
	tally_proto_put_register(pl, &r);
	struct tally_addr other = h_addr(5);
	H_EXPECT_REJECT(&h, h_rx_hdr(&h, &hd, pl, sizeof(pl), &other), TALLY_R_RANK_TAKEN, 1);
	hd.token++;
	H_EXPECT_REJECT(&h, h_rx_hdr(&h, &hd, pl, sizeof(pl), &other), TALLY_R_WRONG_TOKEN, 1);
	hd = h_hdr(TALLY_OP_REGISTER, 1);
	hd.job_id++;
	H_EXPECT_REJECT(&h, h_rx_hdr(&h, &hd, pl, sizeof(pl), &other), TALLY_R_WRONG_JOB, 1);
	hd = h_hdr(TALLY_OP_REGISTER, 2);
	H_EXPECT_REJECT(&h, h_rx_hdr(&h, &hd, pl, sizeof(pl), &other), TALLY_R_BAD_RANK, 1);
	h_stop(&h);
}

static void test_data_rejections(void **state)
{
	(void)state;
	struct h h;
	h_start(&h, NULL);
	struct tally_register r = h_reg(10, 4, TALLY_DT_F32, 3, 3);
	h_setup(&h, 4, 1, &r);
	float v[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	struct tally_hdr hd;
	struct tally_addr a0 = h_addr(0);

	/* stateless reasons reach the counters through rx too */
	uint8_t junk[TALLY_HDR_LEN + 16];
	memset(junk, 0, sizeof(junk));
	H_EXPECT_REJECT(&h, tally_engine_rx(h.e, junk, 10, &a0), TALLY_R_TRUNCATED, 0);
	H_EXPECT_REJECT(&h, tally_engine_rx(h.e, junk, sizeof(junk), &a0), TALLY_R_BAD_MAGIC, 0);
	hd = h_hdr(TALLY_OP_PUSH, 0);
	hd.count = 4;
	tally_proto_finish(junk, &hd, v, 16);
	memcpy(junk + TALLY_HDR_LEN, v, 16);
	junk[TALLY_HDR_LEN] ^= 1;
	H_EXPECT_REJECT(&h, tally_engine_rx(h.e, junk, sizeof(junk) - 16 + 16, &a0),
			TALLY_R_BAD_CRC, 0);

	/* job, token, rank, binding */
	hd = h_hdr(TALLY_OP_PUSH, 0);
	hd.key = 1;
	hd.count = 4;
	hd.job_id = 8;
	H_EXPECT_REJECT(&h, h_rx_hdr(&h, &hd, v, 16, &a0), TALLY_R_WRONG_JOB, 0);
	hd.job_id = H_JOB;
	hd.token = 1;
	H_EXPECT_REJECT(&h, h_rx_hdr(&h, &hd, v, 16, &a0), TALLY_R_WRONG_TOKEN, 0);
	hd.token = H_TOKEN;
	hd.rank = 4;
	H_EXPECT_REJECT(&h, h_rx_hdr(&h, &hd, v, 16, &a0), TALLY_R_BAD_RANK, 0);
	hd.rank = 1; /* rank 1's packet from rank 0's address */
	H_EXPECT_REJECT(&h, h_rx_hdr(&h, &hd, v, 16, &a0), TALLY_R_NOT_JOINED, 0);
	H_EXPECT_REJECT(&h, h_rx_hdr(&h, &hd, v, 16, NULL), TALLY_R_NOT_JOINED, 0);

	/* key, dtype, range, participants */
	H_EXPECT_REJECT(&h, h_push(&h, 0, 2, 0, 0, TALLY_DT_F32, v, 4), TALLY_R_UNKNOWN_KEY, 0);
	H_EXPECT_REJECT(&h, h_push(&h, 0, 1, 0, 0, TALLY_DT_I32, v, 4), TALLY_R_CHUNK_MISMATCH,
			0);
	H_EXPECT_REJECT(&h, h_push(&h, 0, 1, 0, 0, TALLY_DT_F16, v, 4), TALLY_R_CHUNK_MISMATCH,
			0);
	H_EXPECT_REJECT(&h, h_push(&h, 0, 1, 0, 2, TALLY_DT_F32, v, 4), TALLY_R_BAD_RANGE, 0);
	H_EXPECT_REJECT(&h, h_push(&h, 0, 1, 0, 12, TALLY_DT_F32, v, 4), TALLY_R_BAD_RANGE, 0);
	H_EXPECT_REJECT(&h, h_push(&h, 0, 1, 0, 0, TALLY_DT_F32, v, 3), TALLY_R_BAD_RANGE, 0);
	/* the last chunk holds 2 elements, not 4 */
	H_EXPECT_REJECT(&h, h_push(&h, 0, 1, 0, 8, TALLY_DT_F32, v, 4), TALLY_R_BAD_RANGE, 0);
	H_EXPECT_REJECT(&h, h_push(&h, 3, 1, 0, 0, TALLY_DT_F32, v, 4), TALLY_R_NOT_PARTICIPANT,
			0);
	assert_int_equal(h_push(&h, 0, 1, 0, 8, TALLY_DT_F32, v, 2), TALLY_OK);

	/* ops the appliance never receives */
	hd = h_hdr(TALLY_OP_RESULT, 0);
	hd.count = 4;
	H_EXPECT_REJECT(&h, h_rx_hdr(&h, &hd, v, 16, &a0), TALLY_R_UNEXPECTED_OP, 0);
	hd = h_hdr(TALLY_OP_ERROR, 0);
	H_EXPECT_REJECT(&h, h_rx_hdr(&h, &hd, NULL, 0, &a0), TALLY_R_UNEXPECTED_OP, 0);
	hd = h_hdr(TALLY_OP_JOIN_OK, 0);
	uint8_t jo[TALLY_JOIN_OK_LEN] = { 0 };
	H_EXPECT_REJECT(&h, h_rx_hdr(&h, &hd, jo, sizeof(jo), &a0), TALLY_R_UNEXPECTED_OP, 0);
	hd = h_hdr(TALLY_OP_REGISTER, 0);
	hd.flags = TALLY_F_ACK;
	uint8_t rp[TALLY_REGISTER_LEN];
	tally_proto_put_register(rp, &r);
	H_EXPECT_REJECT(&h, h_rx_hdr(&h, &hd, rp, sizeof(rp), &a0), TALLY_R_UNEXPECTED_OP, 0);

	/* PULL and BYE go through the same checks */
	H_EXPECT_REJECT(&h, h_pull(&h, 0, 2, 0, 0), TALLY_R_UNKNOWN_KEY, 0);
	H_EXPECT_REJECT(&h, h_pull(&h, 0, 1, 0, 3), TALLY_R_BAD_RANGE, 0);
	H_EXPECT_REJECT(&h, h_pull(&h, 3, 1, 0, 0), TALLY_R_NOT_PARTICIPANT, 0);
	hd = h_hdr(TALLY_OP_BYE, 1);
	H_EXPECT_REJECT(&h, h_rx_hdr(&h, &hd, NULL, 0, &a0), TALLY_R_BYE_REFUSED, 0);

	const struct tally_engine_stats *st = tally_engine_stats(h.e);
	assert_int_equal(st->pushes, 1);
	h_stop(&h);
}

static void test_first_sum(void **state)
{
	(void)state;
	struct h h;
	h_start(&h, NULL);
	/* 3 workers, 10 elements in chunks of 4: chunks of 4, 4, 2 */
	struct tally_register r = h_reg(10, 4, TALLY_DT_F32, 3, 3);
	h_setup(&h, 3, 42, &r);
	assert_int_equal(tally_engine_stats(h.e)->tx_pkts, 6); /* JOIN_OKs, REGISTER acks */
	tally_engine_stats_reset(h.e);
	assert_int_equal(tally_engine_stats(h.e)->tx_pkts, 0);
	float in[3][10];
	for (int w = 0; w < 3; w++)
		for (int i = 0; i < 10; i++)
			in[w][i] = (float)(w + 1) * 0.1f + (float)i;
	for (uint32_t off = 0; off < 10; off += 4) {
		uint32_t n = off + 4 <= 10 ? 4 : 2;
		for (uint32_t w = 0; w < 3; w++) {
			assert_int_equal(h_count(&h, TALLY_OP_RESULT, 42, 0, off), 0);
			assert_int_equal(h_push(&h, w, 42, 0, off, TALLY_DT_F32, &in[w][off], n),
					 TALLY_OK);
		}
		assert_int_equal(h_count(&h, TALLY_OP_RESULT, 42, 0, off), 3);
		for (uint32_t w = 0; w < 3; w++) {
			const struct cap_pkt *p = h_result(&h, w, 42, 0, off);
			assert_non_null(p);
			assert_int_equal(p->to.cookie, h_addr(w).cookie);
			assert_int_equal(p->pkt.hdr.count, n);
			assert_int_equal(p->pkt.hdr.contrib, 3);
			assert_int_equal(p->pkt.hdr.flags, TALLY_F_INCLUDED);
			assert_int_equal(p->pkt.hdr.dtype, TALLY_DT_F32);
			const float *res = (const float *)p->pkt.payload;
			for (uint32_t i = 0; i < n; i++) {
				float want = in[0][off + i];
				want += in[1][off + i];
				want += in[2][off + i];
				assert_memory_equal(&res[i], &want, sizeof(float));
			}
		}
	}
	const struct tally_engine_stats *st = tally_engine_stats(h.e);
	assert_int_equal(st->pushes, 9);
	assert_int_equal(st->push_bytes, 3 * 40);
	assert_int_equal(st->completions, 3);
	assert_int_equal(st->quorum_completions, 0);
	assert_int_equal(st->results, 9);
	assert_int_equal(st->tx_pkts, 9);
	assert_int_equal(tally_engine_open_chunks(h.e), 0);
	assert_int_equal(tally_engine_open_rounds(h.e), 0);

	/* A failing transport is counted, not fatal. */
	h.cap.fail_send = 1;
	for (uint32_t w = 0; w < 3; w++)
		assert_int_equal(h_push(&h, w, 42, 1, 0, TALLY_DT_F32, &in[w][0], 4), TALLY_OK);
	assert_int_equal(st->tx_errors, 3);
	assert_int_equal(st->completions, 4);
	h_stop(&h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_join),
		cmocka_unit_test(test_join_gso),
		cmocka_unit_test(test_open_admission),
		cmocka_unit_test(test_register),
		cmocka_unit_test(test_register_binds),
		cmocka_unit_test(test_data_rejections),
		cmocka_unit_test(test_first_sum),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
