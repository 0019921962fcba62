/* SPDX-License-Identifier: Apache-2.0
 * test_engine_walk.c — i32/f16/bf16 keys against a scalar reference, 1024 workers
 * (multi-word bitmaps), the control-plane walkers (jobs, workers, keys, stuck chunks) and
 * drain.
 */
#include "harness.h"

#include <errno.h>

static void test_dtypes(void **state)
{
	(void)state;
	static const uint8_t dts[] = { TALLY_DT_I32, TALLY_DT_F16, TALLY_DT_BF16, TALLY_DT_F32 };
	enum { W = 3, N = 37, CH = 16 };
	for (size_t d = 0; d < sizeof(dts); d++) {
		uint8_t dt = dts[d];
		size_t es = tally_dtype_size(dt);
		struct h h;
		h_start(&h, NULL);
		struct tally_register r = h_reg(N, CH, dt, W, W);
		h_setup(&h, W, 11, &r);
		uint8_t in[W][N * 4];
		uint64_t s = 12345 + d;
		for (uint32_t w = 0; w < W; w++)
			for (uint32_t i = 0; i < N; i++) {
				h_rng(&s);
				float f = (float)((int64_t)(s % 20001) - 10000) / 256.0f;
				if (dt == TALLY_DT_I32) {
					int32_t x = (int32_t)(s >> 1); /* wraps when summed */
					memcpy(&in[w][i * 4], &x, 4);
				} else if (dt == TALLY_DT_F32) {
					memcpy(&in[w][i * 4], &f, 4);
				} else {
					uint16_t hv = dt == TALLY_DT_F16 ? tally_f32_to_f16(f)
									 : tally_f32_to_bf16(f);
					memcpy(&in[w][i * 2], &hv, 2);
				}
			}
		/* arrival order 2, 0, 1 per chunk */
		static const uint32_t order[W] = { 2, 0, 1 };
		for (uint32_t off = 0; off < N; off += CH) {
			uint32_t n = off + CH <= N ? CH : N - off;
			for (uint32_t k = 0; k < W; k++)
				assert_int_equal(h_push(&h, order[k], 11, 0, off, dt,
							&in[order[k]][off * es], n),
						 TALLY_OK);
			const struct cap_pkt *p = h_result(&h, 1, 11, 0, off);
			assert_non_null(p);
			assert_int_equal(p->pkt.hdr.dtype, dt);
			assert_int_equal(p->pkt.hdr.payload_len, n * es);
			for (uint32_t i = 0; i < n; i++) {
				const uint8_t *got = p->pkt.payload + i * es;
				if (dt == TALLY_DT_I32) {
					uint32_t acc = 0;
					for (uint32_t k = 0; k < W; k++) {
						uint32_t x;
						memcpy(&x, &in[order[k]][(off + i) * 4], 4);
						acc += x;
					}
					assert_memory_equal(got, &acc, 4);
				} else if (dt == TALLY_DT_F32) {
					float acc = 0;
					for (uint32_t k = 0; k < W; k++) {
						float x;
						memcpy(&x, &in[order[k]][(off + i) * 4], 4);
						acc = k == 0 ? x : acc + x;
					}
					assert_memory_equal(got, &acc, 4);
				} else {
					float acc = 0;
					for (uint32_t k = 0; k < W; k++) {
						uint16_t x;
						memcpy(&x, &in[order[k]][(off + i) * 2], 2);
						float f = dt == TALLY_DT_F16 ? tally_f16_to_f32(x)
									     : tally_bf16_to_f32(x);
						acc = k == 0 ? f : acc + f;
					}
					uint16_t want = dt == TALLY_DT_F16 ? tally_f32_to_f16(acc)
									   : tally_f32_to_bf16(acc);
					assert_memory_equal(got, &want, 2);
				}
			}
		}
		h_stop(&h);
	}
}

static void test_max_workers(void **state)
{
	(void)state;
	enum { W = TALLY_MAX_WORKERS };
	struct h h;
	struct tally_engine_cfg cfg;
	h_init_cfg(&cfg);
	cfg.det_pool_bytes = 256 * 8192;
	h_start(&h, &cfg);
	struct tally_register r = h_reg(8, 8, TALLY_DT_I32, W, W);
	h_setup(&h, W, 5, &r);
	int32_t v[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	for (uint32_t w = W; w-- > 0;) {
		assert_int_equal(h_count(&h, TALLY_OP_RESULT, 5, 0, 0), 0);
		assert_int_equal(h_push(&h, w, 5, 0, 0, TALLY_DT_I32, v, 8), TALLY_OK);
	}
	assert_int_equal(h_count(&h, TALLY_OP_RESULT, 5, 0, 0), W);
	const struct cap_pkt *p = h_result(&h, W - 1, 5, 0, 0);
	assert_int_equal(p->pkt.hdr.contrib, W);
	assert_int_equal(p->pkt.hdr.flags, TALLY_F_INCLUDED);
	const int32_t *res = (const int32_t *)p->pkt.payload;
	for (int i = 0; i < 8; i++)
		assert_int_equal(res[i], v[i] * W);
	/* deterministic with more ranks than one k-way pass takes */
	struct tally_register rd = h_reg(8, 8, TALLY_DT_I32, 130, 130);
	rd.flags = TALLY_KEY_DETERMINISTIC;
	for (uint32_t w = 0; w < 130; w++)
		assert_int_equal(h_register(&h, w, 6, &rd), TALLY_OK);
	h_clear(&h);
	for (uint32_t w = 0; w < 130; w++)
		assert_int_equal(h_push(&h, (w * 7) % 130, 6, 0, 0, TALLY_DT_I32, v, 8),
				 TALLY_OK);
	assert_int_equal(h_count(&h, TALLY_OP_RESULT, 6, 0, 0), 130);
	res = (const int32_t *)h_result(&h, 129, 6, 0, 0)->pkt.payload;
	for (int i = 0; i < 8; i++)
		assert_int_equal(res[i], v[i] * 130);
	h_stop(&h);
}

struct walk_out {
	unsigned n;
	struct tally_engine_job_info job[4];
	struct tally_engine_worker_info wk[8];
	struct tally_engine_key_info key[4];
	struct tally_engine_stuck_info stuck[4];
	uint64_t missing[4][2];
	int stop_after;
};

static int w_job(void *arg, const struct tally_engine_job_info *ji)
{
	struct walk_out *o = arg;
	o->job[o->n++] = *ji;
	return o->stop_after && o->n == (unsigned)o->stop_after ? 42 : 0;
}

static int w_worker(void *arg, const struct tally_engine_worker_info *wi)
{
	struct walk_out *o = arg;
	o->wk[o->n++] = *wi;
	return o->stop_after && o->n == (unsigned)o->stop_after ? 43 : 0;
}

static int w_key(void *arg, const struct tally_engine_key_info *ki)
{
	struct walk_out *o = arg;
	o->key[o->n++] = *ki;
	return 0;
}

static int w_stuck(void *arg, const struct tally_engine_stuck_info *si)
{
	struct walk_out *o = arg;
	assert_true(si->missing_words <= 2);
	memcpy(o->missing[o->n], si->missing, si->missing_words * sizeof(uint64_t));
	o->stuck[o->n] = *si;
	o->stuck[o->n].missing = NULL;
	o->n++;
	return 0;
}

static void test_walkers(void **state)
{
	(void)state;
	struct h h;
	h_start(&h, NULL);
	/* 70 ranks: bitmaps of two words */
	assert_int_equal(tally_engine_job_add(h.e, H_JOB, H_TOKEN, 70), 0);
	assert_int_equal(tally_engine_job_add(h.e, 3, 99, 2), 0);
	for (uint32_t w = 0; w < 70; w++)
		if (w != 5)
			assert_int_equal(h_join(&h, w, 70), TALLY_OK);
	struct tally_register r = h_reg(20, 8, TALLY_DT_BF16, 70, 70);
	r.deadline_us = 0;
	assert_int_equal(tally_engine_key_register(h.e, H_JOB, 1, &r), 0);
	struct tally_register r2 = h_reg(4, 4, TALLY_DT_F32, 2, 1);
	r2.flags = TALLY_KEY_DETERMINISTIC;
	assert_int_equal(tally_engine_key_register(h.e, 3, 2, &r2), 0);

	struct walk_out o;
	memset(&o, 0, sizeof(o));
	assert_int_equal(tally_engine_walk_jobs(h.e, w_job, &o), 0);
	assert_int_equal(o.n, 2);
	assert_int_equal(o.job[0].job_id, H_JOB);
	assert_int_equal(o.job[0].world_size, 70);
	assert_int_equal(o.job[0].joined, 69);
	assert_int_equal(o.job[0].keys, 1);
	assert_int_equal(o.job[1].job_id, 3);
	assert_int_equal(o.job[1].joined, 0);
	memset(&o, 0, sizeof(o));
	o.stop_after = 1;
	assert_int_equal(tally_engine_walk_jobs(h.e, w_job, &o), 42);
	assert_int_equal(o.n, 1);

	/* workers: bound ranks in rank order, last heard, packets */
	memset(&o, 0, sizeof(o));
	o.stop_after = 6;
	h.cap.now += 500;
	uint16_t bf[8] = { 0 };
	assert_int_equal(h_push(&h, 3, 1, 0, 8, TALLY_DT_BF16, bf, 8), TALLY_OK);
	assert_int_equal(tally_engine_walk_workers(h.e, w_worker, &o), 43);
	assert_int_equal(o.n, 6);
	assert_int_equal(o.wk[3].rank, 3);
	assert_int_equal(o.wk[5].rank, 6); /* rank 5 never joined */
	assert_int_equal(o.wk[3].pkts, 2);  /* JOIN and PUSH */
	assert_true(o.wk[3].last_heard_ns == h.cap.now);
	assert_int_equal(o.wk[2].pkts, 1);
	assert_int_equal(o.wk[3].addr.cookie, h_addr(3).cookie);

	/* pushes from ranks 0..63 except 5 (not joined) and 64 on chunk 1 of round 0 */
	h.cap.now += 1000;
	for (uint32_t w = 0; w < 65; w++)
		if (w != 5 && w != 3)
			assert_int_equal(h_push(&h, w, 1, 0, 8, TALLY_DT_BF16, bf, 8), TALLY_OK);
	/* chunk 0 opened later by rank 69 */
	h.cap.now += 1000;
	assert_int_equal(h_push(&h, 69, 1, 0, 0, TALLY_DT_BF16, bf, 8), TALLY_OK);

	memset(&o, 0, sizeof(o));
	assert_int_equal(tally_engine_walk_keys(h.e, w_key, &o), 0);
	assert_int_equal(o.n, 2);
	struct tally_engine_key_info *k = &o.key[0];
	assert_int_equal(k->key, 1);
	assert_int_equal(k->job_id, H_JOB);
	assert_int_equal(k->nelems, 20);
	assert_int_equal(k->chunk_elems, 8);
	assert_int_equal(k->nchunks, 3);
	assert_int_equal(k->dtype, TALLY_DT_BF16);
	assert_int_equal(k->participants, 70);
	assert_int_equal(k->quorum, 70);
	assert_int_equal(k->deterministic, 0);
	assert_int_equal(k->rounds_open, 1);
	assert_int_equal(k->parity[0].state, TALLY_SLOT_OPEN);
	assert_int_equal(k->parity[0].round, 0);
	assert_int_equal(k->parity[0].chunks_open, 2);
	assert_int_equal(k->parity[0].chunks_complete, 0);
	assert_int_equal(k->parity[1].state, TALLY_SLOT_UNUSED);
	assert_true(k->mem_bytes > 0);
	assert_int_equal(o.key[1].deterministic, 1);
	assert_int_equal(o.key[1].parity[0].state, TALLY_SLOT_UNUSED);
	assert_int_equal(tally_engine_open_chunks(h.e), 2);
	assert_int_equal(tally_engine_open_rounds(h.e), 1);

	/* stuck: oldest first; a threshold between the two ages selects only chunk 1 */
	memset(&o, 0, sizeof(o));
	assert_int_equal(tally_engine_walk_stuck(h.e, 0, w_stuck, &o), 0);
	assert_int_equal(o.n, 2);
	assert_int_equal(o.stuck[0].offset, 8);
	assert_int_equal(o.stuck[0].count, 8);
	assert_int_equal(o.stuck[0].age_ns, 2000);
	assert_int_equal(o.stuck[0].contrib, 64);
	assert_int_equal(o.stuck[0].participants, 70);
	assert_int_equal(o.stuck[0].missing_words, 2);
	/* missing: rank 5 and ranks 65..69 */
	assert_true(o.missing[0][0] == (1ull << 5));
	assert_true(o.missing[0][1] == 0x3eull);
	assert_int_equal(o.stuck[1].offset, 0);
	assert_int_equal(o.stuck[1].age_ns, 0);
	assert_true(o.missing[1][1] == 0x1full);
	memset(&o, 0, sizeof(o));
	assert_int_equal(tally_engine_walk_stuck(h.e, 1500, w_stuck, &o), 0);
	assert_int_equal(o.n, 1);
	assert_int_equal(o.stuck[0].offset, 8);
	h_stop(&h);
}

static void test_drain(void **state)
{
	(void)state;
	struct h h;
	h_start(&h, NULL);
	struct tally_register r = h_reg(8, 4, TALLY_DT_F32, 2, 2);
	h_setup(&h, 2, 1, &r);
	float v[4] = { 1, 2, 3, 4 };
	/* round 0: chunk 0 started, chunk 1 not yet */
	assert_int_equal(h_push(&h, 0, 1, 0, 0, TALLY_DT_F32, v, 4), TALLY_OK);
	assert_int_equal(tally_engine_draining(h.e), 0);
	tally_engine_set_draining(h.e, 1);
	assert_int_equal(tally_engine_draining(h.e), 1);
	assert_int_equal(tally_engine_open_rounds(h.e), 1);
	assert_int_equal(tally_engine_open_chunks(h.e), 1);
	/* the open round finishes, its unstarted chunk included */
	assert_int_equal(h_push(&h, 1, 1, 0, 0, TALLY_DT_F32, v, 4), TALLY_OK);
	assert_int_equal(tally_engine_open_chunks(h.e), 0);
	assert_int_equal(tally_engine_open_rounds(h.e), 1);
	assert_int_equal(h_push(&h, 1, 1, 0, 4, TALLY_DT_F32, v, 4), TALLY_OK);
	assert_int_equal(h_push(&h, 0, 1, 0, 4, TALLY_DT_F32, v, 4), TALLY_OK);
	assert_int_equal(tally_engine_open_rounds(h.e), 0);
	assert_int_equal(tally_engine_open_chunks(h.e), 0);
	struct walk_out o;
	memset(&o, 0, sizeof(o));
	tally_engine_walk_keys(h.e, w_key, &o);
	assert_int_equal(o.n, 1);
	assert_int_equal(o.key[0].parity[0].state, TALLY_SLOT_COMPLETE);
	assert_int_equal(o.key[0].parity[0].chunks_complete, 2);
	assert_int_equal(o.key[0].parity[0].chunks_open, 0);
	assert_int_equal(o.key[0].rounds_open, 0);
	/* a new round is refused; late and duplicate pushes still get their RESULT */
	H_EXPECT_REJECT(&h, h_push(&h, 0, 1, 1, 0, TALLY_DT_F32, v, 4), TALLY_R_DRAINING, 1);
	h_clear(&h);
	assert_int_equal(h_push(&h, 0, 1, 0, 4, TALLY_DT_F32, v, 4), TALLY_OK);
	assert_int_equal(h.cap.n, 1);
	/* keys can still be registered; undrained, rounds go on */
	struct tally_register r2 = h_reg(4, 4, TALLY_DT_F32, 2, 2);
	assert_int_equal(h_register(&h, 0, 2, &r2), TALLY_OK);
	tally_engine_set_draining(h.e, 0);
	assert_int_equal(h_push(&h, 0, 1, 1, 0, TALLY_DT_F32, v, 4), TALLY_OK);
	assert_int_equal(tally_engine_open_rounds(h.e), 1);
	h_stop(&h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dtypes),
		cmocka_unit_test(test_max_workers),
		cmocka_unit_test(test_walkers),
		cmocka_unit_test(test_drain),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
