/* SPDX-License-Identifier: Apache-2.0
 * test_failover_engine.c — a job's set of gone appliances on a survivor (engine_gone.c,
 * TALLY_OP_GONE): a rank's report grows the set and goes to every bound rank of the job, a
 * report the set holds already is acknowledged to the sender alone, a hostile report (wrong
 * token, unjoined rank, payload) changes nothing and is counted, the set is shown per job
 * and cleared by a relaunch. Also the wire: GONE names itself and is header only. */
#include "harness.h"

static enum tally_reason gone(struct h *h, uint32_t rank, uint32_t set, uint64_t token)
{
	struct tally_hdr hd = h_hdr(TALLY_OP_GONE, rank);
	hd.token = token;
	hd.aux = set;
	struct tally_addr a = h_addr(rank);
	return h_rx_hdr(h, &hd, NULL, 0, &a);
}

static int job_gone(void *arg, const struct tally_engine_job_info *ji)
{
	if (ji->job_id == H_JOB)
		*(uint32_t *)arg = ji->gone;
	return 0;
}

static uint32_t gone_of(struct h *h)
{
	uint32_t g = ~0u;
	tally_engine_walk_jobs(h->e, job_gone, &g);
	return g;
}

static void test_report_goes_to_every_rank(void **state)
{
	(void)state;
	struct h h;
	h_start(&h, NULL);
	h_setup(&h, 3, 0, NULL);
	assert_int_equal(gone_of(&h), 0);

	assert_int_equal(gone(&h, 1, 1u << 2, H_TOKEN), TALLY_OK);
	assert_int_equal(gone_of(&h), 1u << 2);
	assert_int_equal(tally_engine_stats(h.e)->gone_reports, 1);
	/* the grown set to ranks 0, 1, 2 at their addresses */
	assert_int_equal(h_count(&h, TALLY_OP_GONE, ~0u, ~0u, ~0u), 3);
	for (size_t i = 0; i < h.cap.n; i++) {
		const struct tally_hdr *hd = &h.cap.q[i].pkt.hdr;
		struct tally_addr a = h_addr(hd->rank);
		assert_int_equal(hd->aux, 1u << 2);
		assert_int_equal(hd->token, H_TOKEN);
		assert_int_equal(h.cap.q[i].to.cookie, a.cookie);
	}
	/* another rank reports the same: acknowledged to it alone, not counted */
	h_clear(&h);
	assert_int_equal(gone(&h, 0, 1u << 2, H_TOKEN), TALLY_OK);
	assert_int_equal(h_count(&h, TALLY_OP_GONE, ~0u, ~0u, ~0u), 1);
	assert_int_equal(h.cap.q[0].pkt.hdr.rank, 0);
	assert_int_equal(tally_engine_stats(h.e)->gone_reports, 1);
	/* a second appliance: the union */
	h_clear(&h);
	assert_int_equal(gone(&h, 2, 1u << 3, H_TOKEN), TALLY_OK);
	assert_int_equal(gone_of(&h), (1u << 2) | (1u << 3));
	assert_int_equal(h_count(&h, TALLY_OP_GONE, ~0u, ~0u, ~0u), 3);
	assert_int_equal(h.cap.q[0].pkt.hdr.aux, (1u << 2) | (1u << 3));
	h_stop(&h);
}

static void test_hostile_reports_change_nothing(void **state)
{
	(void)state;
	struct h h;
	h_start(&h, NULL);
	h_setup(&h, 2, 0, NULL);
	uint64_t wt = h_drops(&h, TALLY_R_WRONG_TOKEN), nj = h_drops(&h, TALLY_R_NOT_JOINED);

	assert_int_equal(gone(&h, 0, 1, H_TOKEN ^ 1), TALLY_R_WRONG_TOKEN);
	assert_int_equal(h_drops(&h, TALLY_R_WRONG_TOKEN), wt + 1);
	/* rank 1 from rank 0's address: not the bound one */
	struct tally_hdr hd = h_hdr(TALLY_OP_GONE, 1);
	hd.aux = 1;
	struct tally_addr a0 = h_addr(0);
	assert_int_equal(h_rx_hdr(&h, &hd, NULL, 0, &a0), TALLY_R_NOT_JOINED);
	assert_int_equal(h_drops(&h, TALLY_R_NOT_JOINED), nj + 1);
	/* a payload: GONE is header only */
	uint32_t junk = 7;
	struct tally_hdr hp = h_hdr(TALLY_OP_GONE, 0);
	struct tally_addr a = h_addr(0);
	assert_int_equal(h_rx_hdr(&h, &hp, &junk, sizeof(junk), &a), TALLY_R_LEN_MISMATCH);
	assert_int_equal(gone_of(&h), 0);
	assert_int_equal(h_count(&h, TALLY_OP_GONE, ~0u, ~0u, ~0u), 0);
	assert_int_equal(tally_engine_stats(h.e)->gone_reports, 0);
	h_stop(&h);
}

static void test_relaunch_clears_the_set(void **state)
{
	(void)state;
	struct h h;
	h_start(&h, NULL);
	h_setup(&h, 2, 0, NULL);
	assert_int_equal(gone(&h, 0, 1, H_TOKEN), TALLY_OK);
	assert_int_equal(gone_of(&h), 1);
	/* every rank leaves: the job ends (operator-admitted: it stays, empty) */
	assert_int_equal(h_bye(&h, 0), TALLY_OK);
	assert_int_equal(h_bye(&h, 1), TALLY_OK);
	assert_int_equal(gone_of(&h), 0);
	h_stop(&h);
}

static void test_op_name(void **state)
{
	(void)state;
	assert_string_equal(tally_op_name(TALLY_OP_GONE), "GONE");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_report_goes_to_every_rank),
		cmocka_unit_test(test_hostile_reports_change_nothing),
		cmocka_unit_test(test_relaunch_clears_the_set),
		cmocka_unit_test(test_op_name),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
