/* SPDX-License-Identifier: Apache-2.0
 * test_faults_engine.c — the engine's job lifecycle (suite 'faults'): jobs end on BYE and on
 * idle and give their memory back, a relaunch (new incarnation) replaces a job without an
 * operator while a straggler of the old one stays out, a full job table says so, a silent
 * rank is reported to the ranks waiting on it, and a push refused by a drain gets an ERROR.
 */
#include "harness.h"

#define SEC 1000000000ull

static struct tally_addr addr_of(uint32_t job, uint32_t rank, uint32_t gen)
{
	struct tally_addr a = h_addr(rank);
	a.port = (uint16_t)(a.port + 100 * gen + job);
	a.cookie += 1000ull * gen + 100000ull * job;
	return a;
}

static enum tally_reason join_inc(struct h *h, uint32_t job, uint32_t rank, uint32_t world,
				  uint64_t inc, const struct tally_addr *a)
{
	struct tally_hdr hd = h_hdr(TALLY_OP_JOIN, rank);
	hd.job_id = job;
	struct tally_join j = { .world_size = world, .max_chunk_bytes = 8192, .incarnation = inc };
	uint8_t pl[TALLY_JOIN_LEN];
	tally_proto_put_join(pl, &j);
	return h_rx_hdr(h, &hd, pl, sizeof(pl), a);
}

static enum tally_reason job_pkt(struct h *h, uint32_t job, uint8_t op, uint32_t rank,
				 uint32_t key, uint32_t round, const void *pl, size_t plen,
				 const struct tally_addr *a)
{
	struct tally_hdr hd = h_hdr(op, rank);
	hd.job_id = job;
	hd.key = key;
	hd.round = round;
	if (op == TALLY_OP_PUSH) {
		hd.count = (uint32_t)(plen / 4);
		hd.dtype = TALLY_DT_F32;
	}
	return h_rx_hdr(h, &hd, pl, plen, a);
}

static void start_open(struct h *h, uint32_t max_jobs)
{
	struct tally_engine_cfg cfg;
	h_init_cfg(&cfg);
	cfg.max_jobs = max_jobs;
	cfg.open_admission = 1;
	h_start(h, &cfg);
}

/* 20 jobs in a row that end with BYE on an engine of 16 job slots: all admitted, and the
 * memory is back where it started. */
static void test_jobs_in_a_row(void **state)
{
	(void)state;
	struct h h;
	start_open(&h, 16);
	size_t mem0 = tally_engine_mem_used(h.e);
	struct tally_register r = h_reg(1000, 250, TALLY_DT_F32, 2, 2);
	uint8_t rp[TALLY_REGISTER_LEN];
	tally_proto_put_register(rp, &r);
	float v[250] = { 1 };
	for (uint32_t j = 0; j < 20; j++) {
		uint32_t id = 100 + j;
		for (uint32_t w = 0; w < 2; w++) {
			struct tally_addr a = addr_of(j, w, 0);
			assert_int_equal(join_inc(&h, id, w, 2, 0, &a), TALLY_OK);
			assert_int_equal(job_pkt(&h, id, TALLY_OP_REGISTER, w, 1, 0, rp,
						 sizeof(rp), &a), TALLY_OK);
		}
		assert_true(tally_engine_mem_used(h.e) > mem0);
		for (uint32_t w = 0; w < 2; w++) {
			struct tally_addr a = addr_of(j, w, 0);
			assert_int_equal(job_pkt(&h, id, TALLY_OP_PUSH, w, 1, 0, v, sizeof(v), &a),
					 TALLY_OK);
		}
		for (uint32_t w = 0; w < 2; w++) {
			struct tally_addr a = addr_of(j, w, 0);
			assert_int_equal(job_pkt(&h, id, TALLY_OP_BYE, w, 0, 0, NULL, 0, &a),
					 TALLY_OK);
		}
		assert_int_equal(tally_engine_mem_used(h.e), mem0);
	}
	assert_int_equal(tally_engine_stats(h.e)->jobs_freed_bye, 20);
	h_stop(&h);
}

/* A job nobody speaks for during the idle timeout ends: memory back to its start value;
 * an operator-admitted job keeps its admission. */
static void test_idle_frees(void **state)
{
	(void)state;
	struct h h;
	h_start(&h, NULL);
	size_t mem0 = tally_engine_mem_used(h.e);
	struct tally_register r = h_reg(4096, 1024, TALLY_DT_F32, 2, 2);
	h_setup(&h, 2, 3, &r);
	float v[1024] = { 0 };
	assert_int_equal(h_push(&h, 0, 3, 0, 0, TALLY_DT_F32, v, 1024), TALLY_OK);
	assert_true(tally_engine_mem_used(h.e) > mem0);
	h.cap.now += 59 * SEC;
	for (uint32_t i = 0; i < 2 * h.cfg.max_jobs; i++)
		tally_engine_poll(h.e);
	assert_true(tally_engine_mem_used(h.e) > mem0); /* not idle long enough yet */
	h.cap.now += 2 * SEC;
	for (uint32_t i = 0; i < 2 * h.cfg.max_jobs; i++)
		tally_engine_poll(h.e);
	assert_int_equal(tally_engine_mem_used(h.e), mem0);
	assert_int_equal(tally_engine_open_chunks(h.e), 0);
	assert_int_equal(tally_engine_stats(h.e)->jobs_freed_idle, 1);
	/* admission kept: the same ranks join again without the operator */
	assert_int_equal(h_join(&h, 0, 2), TALLY_OK);
	assert_int_equal(tally_engine_job_add(h.e, H_JOB, H_TOKEN, 2), 0);
	h_stop(&h);
}

/* A relaunch replaces the job once the old launch is silent (or from the rank's own
 * address); a straggler of the old launch stays out. */
static void test_incarnation(void **state)
{
	(void)state;
	struct h h;
	start_open(&h, 4);
	size_t mem0 = tally_engine_mem_used(h.e);
	struct tally_register r = h_reg(8, 8, TALLY_DT_F32, 2, 2);
	uint8_t rp[TALLY_REGISTER_LEN];
	tally_proto_put_register(rp, &r);
	float v[8] = { 1, 1, 1, 1, 1, 1, 1, 1 };
	struct tally_addr o0 = addr_of(0, 0, 0), o1 = addr_of(0, 1, 0);
	struct tally_addr n0 = addr_of(0, 0, 1), n1 = addr_of(0, 1, 1);
	assert_int_equal(join_inc(&h, H_JOB, 0, 2, 11, &o0), TALLY_OK);
	assert_int_equal(join_inc(&h, H_JOB, 1, 2, 11, &o1), TALLY_OK);
	assert_int_equal(job_pkt(&h, H_JOB, TALLY_OP_REGISTER, 0, 1, 0, rp, sizeof(rp), &o0), TALLY_OK);
	/* the old launch died mid-round 7 */
	assert_int_equal(job_pkt(&h, H_JOB, TALLY_OP_PUSH, 0, 1, 7, v, sizeof(v), &o0), TALLY_OK);
	/* while it is live, another launch is refused with its own reason */
	H_EXPECT_REJECT(&h, join_inc(&h, H_JOB, 0, 2, 22, &n0), TALLY_R_INCARNATION_LIVE, 1);
	h.cap.now += h.cfg.rejoin_timeout_ns;
	assert_int_equal(join_inc(&h, H_JOB, 0, 2, 22, &n0), TALLY_OK);
	assert_int_equal(tally_engine_stats(h.e)->incarnations, 1);
	assert_int_equal(tally_engine_mem_used(h.e), mem0);
	/* a straggler of launch 11: its data is not from a bound address, its JOIN is refused */
	H_EXPECT_REJECT(&h, job_pkt(&h, H_JOB, TALLY_OP_PUSH, 1, 1, 7, v, sizeof(v), &o1),
			TALLY_R_NOT_JOINED, 0);
	H_EXPECT_REJECT(&h, join_inc(&h, H_JOB, 1, 2, 11, &o1), TALLY_R_INCARNATION_LIVE, 1);
	/* the new launch starts again at round 0 (was stale_round with the old key state) */
	assert_int_equal(join_inc(&h, H_JOB, 1, 2, 22, &n1), TALLY_OK);
	assert_int_equal(job_pkt(&h, H_JOB, TALLY_OP_REGISTER, 0, 1, 0, rp, sizeof(rp), &n0), TALLY_OK);
	assert_int_equal(job_pkt(&h, H_JOB, TALLY_OP_PUSH, 0, 1, 0, v, sizeof(v), &n0), TALLY_OK);
	assert_int_equal(job_pkt(&h, H_JOB, TALLY_OP_PUSH, 1, 1, 0, v, sizeof(v), &n1), TALLY_OK);
	assert_int_equal(tally_engine_stats(h.e)->completions, 1);
	/* rule (b): the rank's own bound address relaunches at once */
	assert_int_equal(join_inc(&h, H_JOB, 0, 2, 33, &n0), TALLY_OK);
	assert_int_equal(tally_engine_stats(h.e)->incarnations, 2);
	H_EXPECT_REJECT(&h, join_inc(&h, H_JOB, 1, 2, 22, &n1), TALLY_R_INCARNATION_LIVE, 1);
	h_stop(&h);
}

static void test_job_table_full(void **state)
{
	(void)state;
	struct h h;
	start_open(&h, 2);
	/* open admission takes at most max_jobs - 1 slots (the operator's reserve): the
	 * operator's jobs are what fill a table */
	struct tally_addr a = addr_of(0, 0, 0);
	assert_int_equal(join_inc(&h, 50, 0, 1, 0, &a), TALLY_OK);
	a = addr_of(1, 0, 0);
	H_EXPECT_REJECT(&h, join_inc(&h, 51, 0, 1, 0, &a), TALLY_R_ADMIT_LIMIT, 1);
	assert_int_equal(tally_engine_job_add(h.e, 60, 7, 1), 0);
	h_stop(&h);
	start_open(&h, 2);
	assert_int_equal(tally_engine_job_add(h.e, 60, 7, 1), 0);
	assert_int_equal(tally_engine_job_add(h.e, 61, 7, 1), 0);
	a = addr_of(2, 0, 0);
	H_EXPECT_REJECT(&h, join_inc(&h, 52, 0, 1, 0, &a), TALLY_R_JOB_TABLE_FULL, 1);
	assert_string_equal(tally_reason_name(TALLY_R_JOB_TABLE_FULL), "job_table_full");
	h_stop(&h);
}

static size_t count_silent(const struct h *h, uint32_t to, uint32_t dead)
{
	size_t n = 0;
	for (size_t i = 0; i < h->cap.n; i++) {
		const struct tally_hdr *hd = &h->cap.q[i].pkt.hdr;
		if (hd->op == TALLY_OP_ERROR && hd->reason == TALLY_R_RANK_SILENT &&
		    hd->rank == to && hd->aux == dead)
			n++;
	}
	return n;
}

/* Ranks 0 and 1 pushed, rank 2 went silent: both hear about it within the timeout,
 * once per period. */
static void test_rank_silent(void **state)
{
	(void)state;
	struct h h;
	h_start(&h, NULL);
	struct tally_register r = h_reg(8, 8, TALLY_DT_F32, 3, 3);
	h_setup(&h, 3, 4, &r);
	float v[8] = { 0 };
	assert_int_equal(h_push(&h, 0, 4, 12, 0, TALLY_DT_F32, v, 8), TALLY_OK);
	assert_int_equal(h_push(&h, 1, 4, 12, 0, TALLY_DT_F32, v, 8), TALLY_OK);
	h.cap.now += h.cfg.dead_rank_timeout_ns - 1;
	tally_engine_poll(h.e);
	assert_int_equal(count_silent(&h, 0, 2), 0);
	h.cap.now += 1;
	tally_engine_poll(h.e);
	assert_int_equal(count_silent(&h, 0, 2), 1);
	assert_int_equal(count_silent(&h, 1, 2), 1);
	assert_int_equal(count_silent(&h, 2, 2), 0);
	const struct tally_hdr *e0 = &h.cap.q[0].pkt.hdr;
	assert_int_equal(e0->key, 4);
	assert_int_equal(e0->round, 12);
	assert_int_equal(e0->count, h.cfg.dead_rank_timeout_ns / 1000000u);
	assert_int_equal(tally_engine_stats(h.e)->dead_rank_errors, 1);
	tally_engine_poll(h.e);
	assert_int_equal(count_silent(&h, 0, 2), 1); /* rate-limited */
	h.cap.now += h.cfg.dead_rank_timeout_ns;
	tally_engine_poll(h.e);
	assert_int_equal(count_silent(&h, 0, 2), 2);
	h_stop(&h);
}

/* Quorum: a rank that has not joined yet holds the others at most two rounds ahead, so the
 * rounds it still has to push are kept (it got STALE_ROUND forever when the slot was
 * reused), and the dead-rank timeout names it to the ranks that wait. */
static void test_quorum_late_joiner(void **state)
{
	(void)state;
	struct h h;
	h_start(&h, NULL);
	struct tally_register r = h_reg(8, 8, TALLY_DT_I32, 3, 2);
	int32_t v[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	assert_int_equal(tally_engine_job_add(h.e, H_JOB, H_TOKEN, 3), 0);
	for (uint32_t w = 0; w < 2; w++) {
		assert_int_equal(h_join(&h, w, 3), TALLY_OK);
		assert_int_equal(h_register(&h, w, 4, &r), TALLY_OK);
	}
	for (uint32_t rd = 0; rd < 2; rd++)
		for (uint32_t w = 0; w < 2; w++)
			assert_int_equal(h_push(&h, w, 4, rd, 0, TALLY_DT_I32, v, 8), TALLY_OK);
	assert_int_equal(tally_engine_stats(h.e)->quorum_completions, 2);
	h_clear(&h);
	assert_int_equal(h_push(&h, 0, 4, 2, 0, TALLY_DT_I32, v, 8), TALLY_R_TOO_EARLY);
	h.cap.now += h.cfg.dead_rank_timeout_ns;
	tally_engine_poll(h.e);
	assert_int_equal(count_silent(&h, 0, 2), 1);
	assert_int_equal(count_silent(&h, 1, 2), 1);
	for (size_t i = 0; i < h.cap.n; i++) {
		const struct tally_hdr *hd = &h.cap.q[i].pkt.hdr;
		if (hd->op != TALLY_OP_ERROR)
			continue;
		assert_int_equal(hd->round, 2);
		assert_int_equal(hd->key, 4);
		assert_int_equal(hd->count, UINT32_MAX); /* never heard */
	}
	/* it joins late: rounds 0 and 1 are still there, it gets both sums (its push not in
	 * them: the client folds it forward), and round 2 may start */
	h_clear(&h);
	assert_int_equal(h_join(&h, 2, 3), TALLY_OK);
	assert_int_equal(h_register(&h, 2, 4, &r), TALLY_OK);
	for (uint32_t rd = 0; rd < 2; rd++) {
		assert_int_equal(h_push(&h, 2, 4, rd, 0, TALLY_DT_I32, v, 8), TALLY_OK);
		const struct cap_pkt *p = h_result(&h, 2, 4, rd, 0);
		assert_non_null(p);
		assert_int_equal(p->pkt.hdr.contrib, 2);
		assert_int_equal(((const int32_t *)p->pkt.payload)[7], 16);
	}
	assert_int_equal(h_push(&h, 0, 4, 2, 0, TALLY_DT_I32, v, 8), TALLY_OK);
	h_stop(&h);
}

/* A rank that is slow but alive (heard within the timeout) is not reported. */
static void test_slow_rank_not_silent(void **state)
{
	(void)state;
	struct h h;
	h_start(&h, NULL);
	struct tally_register r = h_reg(8, 8, TALLY_DT_F32, 2, 2);
	h_setup(&h, 2, 4, &r);
	float v[8] = { 0 };
	assert_int_equal(h_push(&h, 0, 4, 0, 0, TALLY_DT_F32, v, 8), TALLY_OK);
	h.cap.now += h.cfg.dead_rank_timeout_ns - SEC;
	assert_int_equal(h_register(&h, 1, 5, &r), TALLY_OK); /* rank 1 busy with key 5 */
	h_clear(&h);
	h.cap.now += SEC;
	for (int i = 0; i < 4; i++)
		tally_engine_poll(h.e);
	assert_int_equal(count_silent(&h, 0, 1), 0);
	h.cap.now += h.cfg.dead_rank_timeout_ns;
	tally_engine_poll(h.e);
	assert_int_equal(count_silent(&h, 0, 1), 1);
	h_stop(&h);
}

/* A push refused by a drain gets ERROR DRAINING, once per rank per gap. */
static void test_drain_error(void **state)
{
	(void)state;
	struct h h;
	h_start(&h, NULL);
	struct tally_register r = h_reg(8, 8, TALLY_DT_F32, 2, 2);
	h_setup(&h, 2, 4, &r);
	float v[8] = { 0 };
	tally_engine_set_draining(h.e, 1);
	H_EXPECT_REJECT(&h, h_push(&h, 0, 4, 0, 0, TALLY_DT_F32, v, 8), TALLY_R_DRAINING, 1);
	assert_int_equal(h.cap.q[0].pkt.hdr.aux, TALLY_OP_PUSH);
	assert_int_equal(h.cap.q[0].pkt.hdr.rank, 0);
	H_EXPECT_REJECT(&h, h_push(&h, 0, 4, 0, 0, TALLY_DT_F32, v, 8), TALLY_R_DRAINING, 0);
	H_EXPECT_REJECT(&h, h_push(&h, 1, 4, 0, 0, TALLY_DT_F32, v, 8), TALLY_R_DRAINING, 1);
	h.cap.now += SEC;
	H_EXPECT_REJECT(&h, h_push(&h, 0, 4, 0, 0, TALLY_DT_F32, v, 8), TALLY_R_DRAINING, 1);
	assert_int_equal(tally_engine_stats(h.e)->drain_errors, 3);
	h_stop(&h);
}

/* Two cores of one appliance (one "last heard" table): rank 1 waits on core 1's key and
 * probes it there, so core 0, whose chunk misses rank 1's push, hears nothing from it.
 * It is alive: core 0 must not report it dead (in the memif e2e run, a rank whose packets
 * to one core were dropped in a full dispatch ring was reported silent there, and every
 * rank waiting on it failed). Silent on every core, it is reported. */
static void test_rank_alive_on_another_core(void **state)
{
	(void)state;
	struct tally_engine_live *l = tally_engine_live_create(4);
	struct h c0, c1;
	assert_non_null(l);
	struct tally_register r = h_reg(8, 8, TALLY_DT_F32, 2, 2);
	h_setup_cores(&c0, &c1, l, 2, 4, &r);
	assert_int_equal(h_register(&c1, 0, 5, &r), TALLY_OK);
	assert_int_equal(h_register(&c1, 1, 5, &r), TALLY_OK);
	h_clear(&c1);
	float v[8] = { 0 };
	assert_int_equal(h_push(&c0, 0, 4, 0, 0, TALLY_DT_F32, v, 8), TALLY_OK);
	assert_int_equal(h_push(&c1, 1, 5, 0, 0, TALLY_DT_F32, v, 8), TALLY_OK);
	for (unsigned s = 0; s < 12; s++) { /* rank 1 probes core 1's key every second */
		c0.cap.now += SEC;
		c1.cap.now += SEC;
		assert_int_equal(h_pull(&c1, 1, 5, 0, 0), TALLY_OK);
		tally_engine_poll(c1.e);
		for (int i = 0; i < 4; i++)
			tally_engine_poll(c0.e);
	}
	assert_int_equal(count_silent(&c0, 0, 1), 0);
	assert_int_equal(tally_engine_stats(c0.e)->dead_rank_errors, 0);
	/* now silent everywhere: reported, with its silence to the whole appliance */
	c0.cap.now += c0.cfg.dead_rank_timeout_ns;
	tally_engine_poll(c0.e);
	assert_int_equal(count_silent(&c0, 0, 1), 1);
	for (size_t i = 0; i < c0.cap.n; i++) {
		const struct tally_hdr *hd = &c0.cap.q[i].pkt.hdr;
		if (hd->op == TALLY_OP_ERROR && hd->reason == TALLY_R_RANK_SILENT) {
			/* core 1 stamped its cached clock, one poll (a second here) behind */
			assert_true(hd->count >= c0.cfg.dead_rank_timeout_ns / 1000000u);
			assert_true(hd->count <= c0.cfg.dead_rank_timeout_ns / 1000000u + 1000);
		}
	}
	h_stop(&c0);
	h_stop(&c1);
	tally_engine_live_destroy(l);
}

static size_t count_asks(const struct h *h, uint32_t to)
{
	size_t n = 0;
	for (size_t i = 0; i < h->cap.n; i++) {
		const struct tally_hdr *hd = &h->cap.q[i].pkt.hdr;
		if (hd->op == TALLY_OP_ERROR && hd->reason == TALLY_R_NEED_RESULT && hd->rank == to)
			n++;
	}
	return n;
}

/* NEED_RESULT asks (the lagging rank after an appliance restart) are advisory and were
 * sent on every probe of a chunk open 500 ms: ranks probing 400 chunks held for a slow
 * rank made the appliance send that rank thousands of asks a second (63% of what it sent
 * in a failed memif run), crowding out the answers that would repair the slow rank's lost
 * pushes. Now at most one per chunk per second, and none for a round whose predecessor
 * this engine carried (no rank can hold such a round's sum from an earlier appliance). */
static void test_need_result_asks_bounded(void **state)
{
	(void)state;
	struct h h;
	h_start(&h, NULL);
	struct tally_register r = h_reg(16, 8, TALLY_DT_F32, 2, 2);
	h_setup(&h, 2, 4, &r);
	float v[8] = { 0 };
	/* round 0 of chunk 0 waits for rank 1; rank 0 probes it every 10 ms for 2 s */
	assert_int_equal(h_push(&h, 0, 4, 0, 0, TALLY_DT_F32, v, 8), TALLY_OK);
	for (int i = 0; i < 200; i++) {
		h.cap.now += 10000000ull;
		tally_engine_poll(h.e); /* the engine's clock moves on its polls */
		assert_int_equal(h_pull(&h, 0, 4, 0, 0), TALLY_OK);
	}
	size_t asks = count_asks(&h, 1);
	assert_true(asks >= 1); /* the restart case still gets its ask */
	assert_true(asks <= 2);
	assert_int_equal(count_asks(&h, 0), 0); /* never the rank that pushed */
	/* the round completes; round 1 of chunk 1 after round 0 completed here: no asks */
	assert_int_equal(h_push(&h, 1, 4, 0, 0, TALLY_DT_F32, v, 8), TALLY_OK);
	assert_int_equal(h_push(&h, 0, 4, 0, 8, TALLY_DT_F32, v, 8), TALLY_OK);
	assert_int_equal(h_push(&h, 1, 4, 0, 8, TALLY_DT_F32, v, 8), TALLY_OK);
	assert_int_equal(h_push(&h, 0, 4, 1, 8, TALLY_DT_F32, v, 8), TALLY_OK);
	h_clear(&h);
	for (int i = 0; i < 200; i++) {
		h.cap.now += 10000000ull;
		tally_engine_poll(h.e);
		assert_int_equal(h_pull(&h, 0, 4, 1, 8), TALLY_OK);
	}
	assert_int_equal(count_asks(&h, 1), 0);
	h_stop(&h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_jobs_in_a_row),
		cmocka_unit_test(test_idle_frees),
		cmocka_unit_test(test_incarnation),
		cmocka_unit_test(test_job_table_full),
		cmocka_unit_test(test_rank_silent),
		cmocka_unit_test(test_quorum_late_joiner),
		cmocka_unit_test(test_slow_rank_not_silent),
		cmocka_unit_test(test_rank_alive_on_another_core),
		cmocka_unit_test(test_need_result_asks_bounded),
		cmocka_unit_test(test_drain_error),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
