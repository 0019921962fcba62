/* SPDX-License-Identifier: Apache-2.0
 * test_client.c — the client session against a scripted appliance on the simulated network:
 * JOIN of every core, chunking, windows, RTO and backoff, Karn's rule, give-up text,
 * ERROR → errno, hostile RESULTs counted, quorum fold (f32 exact, f16 residual carried),
 * abandoning an operation, carrying a key's last sums to another session.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fake_appliance.h"
#include "simnet.h"
#include "tally_client.h"

#define US 1000ull
#define MS 1000000ull

struct fx {
	struct simnet *net;
	struct fake_app *fake[2];
	struct tally_client *c;
};

static struct fx *fx_new(unsigned ncores, const struct tally_client_cfg *over,
			 uint64_t down_delay_ns)
{
	struct fx *x = calloc(1, sizeof(*x));
	struct simnet_cfg nc = { .seed = 1, .nclients = 1, .nengines = ncores };
	struct tally_client_cfg cfg = { .job_id = 7, .token = 0x1234, .rank = 0,
					.world_size = 1 };
	int err;

	nc.up.delay_ns = 10 * US;
	nc.down.delay_ns = down_delay_ns ? down_delay_ns : 10 * US;
	if (over)
		cfg = *over;
	assert_non_null(x);
	x->net = simnet_create(&nc);
	assert_non_null(x->net);
	for (unsigned i = 0; i < ncores; i++) {
		x->fake[i] = calloc(1, sizeof(struct fake_app));
		assert_non_null(x->fake[i]);
		fake_attach(x->fake[i], x->net, i, ncores);
	}
	x->c = tally_client_create(&cfg, simnet_ops(), simnet_ctx(x->net, simnet_client_node(x->net, 0)),
				   &err);
	assert_non_null(x->c);
	assert_int_equal(err, 0);
	simnet_attach_client(x->net, 0, x->c);
	return x;
}

static void fx_free(struct fx *x)
{
	tally_client_destroy(x->c);
	simnet_destroy(x->net);
	free(x->fake[0]);
	free(x->fake[1]);
	free(x);
}

static void reg_key(struct fx *x, uint32_t key, uint32_t nelems, uint32_t chunk, uint8_t dt,
		    uint16_t participants, uint16_t quorum)
{
	struct tally_register r = { .nelems = nelems, .chunk_elems = chunk, .dtype = dt,
				    .participants = participants, .quorum = quorum };

	assert_int_equal(tally_client_register(x->c, key, &r), 0);
}

/* Drive the network until the handle is done; returns test()'s final value. */
static int drive(struct fx *x, int h, uint64_t max_ns)
{
	uint64_t end = simnet_now(x->net) + max_ns;

	while (simnet_now(x->net) < end) {
		int rc = tally_client_test(x->c, h);

		if (rc)
			return rc;
		simnet_step(x->net, end - simnet_now(x->net));
	}
	return tally_client_test(x->c, h);
}

static void test_join_all_cores_and_chunking(void **state)
{
	(void)state;
	struct fx *x = fx_new(2, NULL, 0);
	float in[1000], out[1000];

	assert_int_equal(tally_client_join(x->c, 100), 0);
	assert_int_equal(tally_client_ncores(x->c), 2);
	assert_int_equal(x->fake[0]->njoin, 1);
	assert_int_equal(x->fake[1]->njoin, 1);
	reg_key(x, 5, 1000, 256, TALLY_DT_F32, 1, 1);
	/* key 5 is owned by core 5 % 2 = 1 */
	assert_int_equal(x->fake[1]->nregister, 1);
	assert_int_equal(x->fake[0]->nregister, 0);
	for (int i = 0; i < 1000; i++)
		in[i] = (float)i * 0.25f;
	memset(out, 0, sizeof(out));
	assert_int_equal(tally_client_allreduce(x->c, 5, 0, in, out), 0);
	assert_memory_equal(in, out, sizeof(in));
	assert_int_equal(x->fake[1]->npush, 4);
	assert_int_equal(x->fake[0]->npush, 0);
	uint32_t seen = 0;
	for (unsigned i = 0; i < 4; i++) {
		const struct fake_push *p = &x->fake[1]->log[i];
		uint32_t ch = p->offset / 256;

		assert_int_equal(p->offset % 256, 0);
		assert_int_equal(p->count, ch == 3 ? 1000 - 768 : 256);
		assert_int_equal(p->key, 5);
		assert_int_equal(p->round, 0);
		seen |= 1u << ch;
	}
	assert_int_equal(seen, 0xf);
	const struct tally_client_stats *st = tally_client_stats(x->c);
	assert_int_equal(st->pushes, 4);
	assert_int_equal(st->results, 4);
	assert_int_equal(st->retransmits, 0);
	/* in place (in == out), next round, and rounds must be in order */
	assert_int_equal(tally_client_allreduce(x->c, 5, 1, out, out), 0);
	assert_memory_equal(in, out, sizeof(in));
	assert_int_equal(tally_client_start(x->c, 5, 3, in, out), -EINVAL);
	assert_non_null(strstr(tally_client_strerror(x->c), "in order"));
	assert_int_equal(tally_client_start(x->c, 9, 0, in, out), -ENOENT);
	tally_client_bye(x->c);
	simnet_run_for(x->net, 1 * MS);
	assert_int_equal(x->fake[0]->nbye + x->fake[1]->nbye, 2);
	fx_free(x);
}

/* A JOIN_OK naming core 0 while the JOIN of core 1 is out is a late copy of core 0's (a
 * retried or duplicated JOIN): it must not count as core 1's, or the rank is never bound
 * there (an appliance that answers HELD to nobody: the udpd_relay hang). The client keeps
 * re-sending core 1's JOIN and ends with an error naming core 1. */
static void test_join_stray_core0_answer(void **state)
{
	(void)state;
	struct fx *x = fx_new(2, NULL, 0);

	x->fake[1]->join_aux_zero = true; /* on the wire: core 0's JOIN_OK again */
	assert_int_equal(tally_client_join(x->c, 100), -ETIMEDOUT);
	assert_true(x->fake[1]->njoin >= 2);
	assert_true(tally_client_stats(x->c)->dup_results >= 1);
	assert_non_null(strstr(tally_client_strerror(x->c), "core 1"));
	fx_free(x);
}

static void test_window_bounds_inflight(void **state)
{
	(void)state;
	struct tally_client_cfg cfg = { .job_id = 7, .token = 0x1234, .world_size = 1,
					.window = 3 };
	struct fx *x = fx_new(1, &cfg, 0);
	static int32_t in[100], out[100];

	for (int i = 0; i < 100; i++)
		in[i] = i * 3 - 50;
	assert_int_equal(tally_client_join(x->c, 100), 0);
	reg_key(x, 1, 100, 10, TALLY_DT_I32, 1, 1);
	x->fake[0]->mode = FAKE_HOLD;
	int h = tally_client_start(x->c, 1, 0, in, out);
	assert_true(h >= 0);
	unsigned released = 0;
	while (tally_client_test(x->c, h) == 0) {
		simnet_run_for(x->net, 100 * US);
		assert_true(x->fake[0]->nheld <= 3);
		if (x->fake[0]->nheld)
			released++;
		fake_release(x->fake[0]);
		assert_true(released < 100);
	}
	assert_int_equal(x->fake[0]->max_outstanding, 3);
	assert_int_equal(released, 4); /* 10 chunks, 3 at a time */
	assert_memory_equal(in, out, sizeof(in));
	fx_free(x);
}

static void test_rto_backoff_and_give_up(void **state)
{
	(void)state;
	struct tally_client_cfg cfg = { .job_id = 7, .token = 0x1234, .world_size = 1,
					.rto_init_us = 500, .rto_max_us = 4000,
					.give_up_ms = 20 };
	struct fx *x = fx_new(2, &cfg, 0);
	float in[16] = {0}, out[16];

	assert_int_equal(tally_client_join(x->c, 100), 0);
	reg_key(x, 3, 16, 16, TALLY_DT_F32, 1, 1);
	x->fake[1]->mode = FAKE_SILENT;
	int h = tally_client_start(x->c, 3, 4, in, out);
	assert_true(h >= 0);
	assert_int_equal(drive(x, h, 100 * MS), -ETIMEDOUT);
	/* no RTT sample yet: 500 µs, then doubling, capped at rto_max */
	const struct fake_push *l = x->fake[1]->log;
	uint64_t expect[] = { 500, 1000, 2000, 4000, 4000, 4000 };
	assert_true(x->fake[1]->npush >= 7);
	for (unsigned i = 0; i < 6; i++)
		assert_int_equal((l[i + 1].t - l[i].t) / US, expect[i]);
	/* retransmissions until give_up_ms after the first push, then nothing */
	assert_true(l[x->fake[1]->npush - 1].t - l[0].t <= 20 * MS);
	const char *m = tally_client_strerror(x->c);
	assert_non_null(strstr(m, "key 3"));
	assert_non_null(strstr(m, "round 4"));
	assert_non_null(strstr(m, "chunk 0"));
	assert_non_null(strstr(m, "core 1"));
	assert_non_null(strstr(m, "never acknowledged")); /* the push's state there */
	assert_non_null(strstr(m, "tallyctl stats")); /* where the appliance's drops are */
	assert_int_equal(tally_client_stats(x->c)->retransmits, x->fake[1]->npush - 1);
	/* the failed round may be started again */
	x->fake[1]->mode = FAKE_ECHO;
	assert_int_equal(tally_client_allreduce(x->c, 3, 4, in, out), 0);
	fx_free(x);
}

/* RTO adapts to measured RTTs. A completion that keeps the RESULT away longer than the
 * RTO (the appliance waiting for a slow worker) is sampled even though the chunk was
 * re-sent meanwhile, so the RTO grows past it instead of firing on it for ever; a RESULT
 * right after a re-send is ambiguous (Karn) and not sampled; the backed-off RTO stays
 * until a sample comes (RFC 6298 5.7). */
static void test_adaptive_rto_completion_wait(void **state)
{
	(void)state;
	struct tally_client_cfg cfg = { .job_id = 7, .token = 0x1234, .world_size = 1,
					.rto_init_us = 500, .rto_max_us = 100000,
					.give_up_ms = 1000 };
	struct fx *x = fx_new(1, &cfg, 0);  /* RTT: 20 µs */
	float in[64] = {0}, out[64];

	assert_int_equal(tally_client_join(x->c, 100), 0);
	reg_key(x, 0, 64, 64, TALLY_DT_F32, 1, 1);
	for (uint32_t r = 0; r < 20; r++)
		assert_int_equal(tally_client_allreduce(x->c, 0, r, in, out), 0);
	/* Now measure the RTO: the next push goes unanswered once. */
	x->fake[0]->silent_first = 1;
	unsigned base = x->fake[0]->npush;
	assert_int_equal(tally_client_allreduce(x->c, 0, 20, in, out), 0);
	uint64_t rto1 = x->fake[0]->log[base + 1].t - x->fake[0]->log[base].t;
	/* srtt 20 µs, rttvar decays: RTO = srtt + max(G=10 µs, 4 rttvar), floor 20 µs */
	assert_true(rto1 >= 20 * US && rto1 < 100 * US);
	/* that RESULT came one RTT after the re-send: not sampled, the backoff stays */
	x->fake[0]->silent_first = 1;
	base = x->fake[0]->npush;
	assert_int_equal(tally_client_allreduce(x->c, 0, 21, in, out), 0);
	assert_int_equal(x->fake[0]->log[base + 1].t - x->fake[0]->log[base].t, 2 * rto1);
	/* a clean round: the estimator's RTO again */
	assert_int_equal(tally_client_allreduce(x->c, 0, 22, in, out), 0);
	x->fake[0]->silent_first = 1;
	base = x->fake[0]->npush;
	assert_int_equal(tally_client_allreduce(x->c, 0, 23, in, out), 0);
	uint64_t rto2 = x->fake[0]->log[base + 1].t - x->fake[0]->log[base].t;
	assert_true(rto2 <= rto1);
	assert_int_equal(tally_client_allreduce(x->c, 0, 24, in, out), 0);
	/* The appliance holds the chunk 3 ms (a slow worker): re-sends meanwhile, then the
	 * RESULT long after the last one. */
	x->fake[0]->mode = FAKE_HOLD;
	int h = tally_client_start(x->c, 0, 25, in, out);
	simnet_run_for(x->net, 3 * MS);
	assert_true(tally_client_stats(x->c)->retransmits >= 3);
	fake_release(x->fake[0]);
	assert_int_equal(drive(x, h, 10 * MS), 1);
	/* the 3 ms completion was sampled: the RTO now exceeds it */
	x->fake[0]->mode = FAKE_ECHO;
	x->fake[0]->silent_first = 1;
	base = x->fake[0]->npush;
	assert_int_equal(tally_client_allreduce(x->c, 0, 26, in, out), 0);
	uint64_t rto_b = x->fake[0]->log[base + 1].t - x->fake[0]->log[base].t;
	assert_true(rto_b > 3 * MS);
	assert_true(rto_b <= 100 * MS);
	fx_free(x);
}

/* cfg.rto_min_us floors the adaptive RTO: with 20 µs RTTs the estimator alone would time out
 * after ~30 µs; a link whose queues hold completions for ms (shaped links) sets the floor. */
static void test_rto_floor(void **state)
{
	(void)state;
	struct tally_client_cfg cfg = { .job_id = 7, .token = 0x1234, .world_size = 1,
					.rto_init_us = 3000, .rto_max_us = 100000,
					.rto_min_us = 3000, .give_up_ms = 1000 };
	struct fx *x = fx_new(1, &cfg, 0);  /* RTT: 20 µs */
	float in[64] = {0}, out[64];

	assert_int_equal(tally_client_join(x->c, 100), 0);
	reg_key(x, 0, 64, 64, TALLY_DT_F32, 1, 1);
	for (uint32_t r = 0; r < 20; r++)
		assert_int_equal(tally_client_allreduce(x->c, 0, r, in, out), 0);
	x->fake[0]->silent_first = 1;
	unsigned base = x->fake[0]->npush;
	assert_int_equal(tally_client_allreduce(x->c, 0, 20, in, out), 0);
	assert_int_equal((x->fake[0]->log[base + 1].t - x->fake[0]->log[base].t) / US, 3000);
	fx_free(x);
}

static void test_errors_map_to_errno(void **state)
{
	(void)state;
	struct fx *x = fx_new(1, NULL, 0);

	x->fake[0]->join_error = TALLY_R_WRONG_TOKEN;
	assert_int_equal(tally_client_join(x->c, 100), -EACCES);
	assert_non_null(strstr(tally_client_strerror(x->c), "WRONG_TOKEN") ?
			strstr(tally_client_strerror(x->c), "WRONG_TOKEN") :
			strstr(tally_client_strerror(x->c), "wrong"));
	/* RANK_TAKEN (our rank still bound to an address whose BYE was lost) is retried
	 * with backoff until the JOIN's timeout, then -EBUSY */
	x->fake[0]->join_error = TALLY_R_RANK_TAKEN;
	uint64_t t0 = simnet_now(x->net);
	unsigned nj = x->fake[0]->njoin;
	assert_int_equal(tally_client_join(x->c, 100), -EBUSY);
	assert_true(simnet_now(x->net) - t0 <= 100 * MS);
	assert_true(simnet_now(x->net) - t0 >= 50 * MS);
	assert_true(x->fake[0]->njoin - nj >= 3);
	assert_non_null(strstr(tally_client_strerror(x->c), "rank_taken"));
	/* freed by the appliance after a few tries: JOIN succeeds */
	x->fake[0]->join_error_left = 3;
	nj = x->fake[0]->njoin;
	assert_int_equal(tally_client_join(x->c, 100), 0);
	assert_int_equal(x->fake[0]->njoin - nj, 4);
	assert_true(tally_client_stats(x->c)->rank_taken_retries >= 3);
	x->fake[0]->register_error = TALLY_R_KEY_CONFLICT;
	struct tally_register r = { .nelems = 10, .dtype = TALLY_DT_F32, .participants = 1,
				    .quorum = 1 };
	assert_int_equal(tally_client_register(x->c, 2, &r), -EEXIST);
	assert_non_null(strstr(tally_client_strerror(x->c), "key 2"));
	x->fake[0]->register_error = TALLY_R_NO_MEMORY;
	assert_int_equal(tally_client_register(x->c, 2, &r), -ENOMEM);
	/* bad parameters never reach the wire */
	unsigned nreg = x->fake[0]->nregister;
	r.quorum = 2;
	assert_int_equal(tally_client_register(x->c, 2, &r), -EINVAL);
	assert_int_equal(x->fake[0]->nregister, nreg);
	/* the appliance gone: JOIN times out */
	struct fx *y = fx_new(1, NULL, 0);
	simnet_set_down(y->net, simnet_engine_node(y->net, 0), 1);
	assert_int_equal(tally_client_join(y->c, 5), -ETIMEDOUT);
	assert_non_null(strstr(tally_client_strerror(y->c), "core 0"));
	fx_free(y);
	fx_free(x);
}

/* Build a RESULT for key 1 (f32, 8 elements, chunk 4) and let `mut` spoil it. */
static size_t mk_result(uint8_t *buf, uint32_t offset, void (*mut)(struct tally_hdr *),
			float v)
{
	struct tally_hdr h;
	float pl[4] = { v, v, v, v };

	memset(&h, 0, sizeof(h));
	h.op = TALLY_OP_RESULT;
	h.job_id = 7;
	h.token = 0x1234;
	h.rank = 0;
	h.key = 1;
	h.round = 0;
	h.offset = offset;
	h.count = 4;
	h.dtype = TALLY_DT_F32;
	h.flags = TALLY_F_INCLUDED;
	h.contrib = 1;
	if (mut)
		mut(&h);
	size_t len = h.count * tally_dtype_size((enum tally_dtype)h.dtype);

	tally_proto_finish(buf, &h, pl, len);
	memcpy(buf + TALLY_HDR_LEN, pl, len);
	return TALLY_HDR_LEN + len;
}

static void m_job(struct tally_hdr *h) { h->job_id = 8; }
static void m_token(struct tally_hdr *h) { h->token = 0x4321; }
static void m_rank(struct tally_hdr *h) { h->rank = 1; }
static void m_key(struct tally_hdr *h) { h->key = 99; }
static void m_round(struct tally_hdr *h) { h->round = 6; }
static void m_offset(struct tally_hdr *h) { h->offset = 2; }
static void m_offset_far(struct tally_hdr *h) { h->offset = 8; }
static void m_count(struct tally_hdr *h) { h->count = 2; }
static void m_dtype(struct tally_hdr *h) { h->dtype = TALLY_DT_F16; h->count = 4; }
static void m_contrib(struct tally_hdr *h) { h->contrib = 5; }
static void m_push(struct tally_hdr *h) { h->op = TALLY_OP_PUSH; }

static void test_hostile_results_counted(void **state)
{
	(void)state;
	struct fx *x = fx_new(1, NULL, 0);
	float in[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, out[8];
	uint8_t buf[TALLY_HDR_LEN + 64];
	size_t len;

	assert_int_equal(tally_client_join(x->c, 100), 0);
	reg_key(x, 1, 8, 4, TALLY_DT_F32, 1, 1);
	x->fake[0]->mode = FAKE_HOLD;
	for (unsigned i = 0; i < 8; i++)
		out[i] = -1;
	int h = tally_client_start(x->c, 1, 0, in, out);
	simnet_run_for(x->net, 50 * US);
	struct {
		void (*mut)(struct tally_hdr *);
		enum tally_reason why;
	} cases[] = {
		{ m_job, TALLY_R_WRONG_JOB },       { m_token, TALLY_R_WRONG_TOKEN },
		{ m_rank, TALLY_R_BAD_RANK },       { m_key, TALLY_R_UNKNOWN_KEY },
		{ m_round, TALLY_R_STALE_ROUND },   { m_offset, TALLY_R_BAD_RANGE },
		{ m_offset_far, TALLY_R_BAD_RANGE }, { m_count, TALLY_R_BAD_RANGE },
		{ m_dtype, TALLY_R_CHUNK_MISMATCH }, { m_contrib, TALLY_R_BAD_RANGE },
		{ m_push, TALLY_R_UNEXPECTED_OP },
	};
	const struct tally_client_stats *st = tally_client_stats(x->c);
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t before = st->drops[cases[i].why];

		len = mk_result(buf, 0, cases[i].mut, 99.0f);
		tally_client_rx(x->c, buf, len);
		if (st->drops[cases[i].why] != before + 1)
			fail_msg("case %u: reason %s not counted", i,
				 tally_reason_name(cases[i].why));
	}
	/* stateless rejections: bad CRC, truncated */
	len = mk_result(buf, 0, NULL, 99.0f);
	buf[TALLY_HDR_LEN] ^= 1;
	tally_client_rx(x->c, buf, len);
	assert_int_equal(st->drops[TALLY_R_BAD_CRC], 1);
	tally_client_rx(x->c, buf, 10);
	assert_int_equal(st->drops[TALLY_R_TRUNCATED], 1);
	assert_int_equal(st->results, 0);
	for (unsigned i = 0; i < 8; i++)
		assert_true(out[i] == -1.0f); /* nothing touched the output */
	/* the operation is intact: the genuine RESULTs complete it */
	fake_release(x->fake[0]);
	assert_int_equal(drive(x, h, 10 * MS), 1);
	assert_memory_equal(in, out, sizeof(in));
	/* a late duplicate of a finished round is a duplicate, not a drop */
	len = mk_result(buf, 4, NULL, 99.0f);
	tally_client_rx(x->c, buf, len);
	assert_int_equal(st->dup_results, 1);
	assert_true(out[4] == 5.0f);
	fx_free(x);
}

/* Quorum fold, f32: an excluded contribution rides on the next round's push, exactly. */
static const struct tally_client_cfg cfg_w2 = { .job_id = 7, .token = 0x1234, .rank = 0,
					       .world_size = 2 };

static void test_fold_f32_exact(void **state)
{
	(void)state;
	struct fx *x = fx_new(1, &cfg_w2, 0);
	float in0[6] = { 1.5f, 2, 3, 4, 5, 6 }, in1[6] = { 0.25f, 1, 1, 1, 1, 1 }, out[6];

	assert_int_equal(tally_client_join(x->c, 100), 0);
	reg_key(x, 4, 6, 3, TALLY_DT_F32, 2, 1);
	x->fake[0]->mode = FAKE_EXCLUDE;
	x->fake[0]->others = 10.0f;
	assert_int_equal(tally_client_allreduce(x->c, 4, 0, in0, out), 0);
	for (int i = 0; i < 6; i++)
		assert_true(out[i] == 10.0f); /* the others' sum */
	assert_int_equal(tally_client_stats(x->c)->excluded, 2);
	/* the appliance may not have seen our pushes (the RESULT could be the fan-out of a
	 * quorum reached before they arrived): each is re-sent until answered */
	unsigned base = x->fake[0]->npush;
	simnet_run_for(x->net, 1 * MS);
	assert_int_equal(x->fake[0]->npush - base, 2);
	assert_int_equal(x->fake[0]->log[base].round, 0);
	assert_int_equal(tally_client_stats(x->c)->ack_pushes, 2);
	x->fake[0]->mode = FAKE_ECHO;
	base = x->fake[0]->npush;
	assert_int_equal(tally_client_allreduce(x->c, 4, 1, in1, out), 0);
	/* round 1 pushes in1 + in0; an answer to a re-sent push of round 0 might have been
	 * a network duplicate, so each goes with a copy labelled round 0 (not added by the
	 * appliance: that round is complete) until round 1's RESULT */
	unsigned n1 = 0, n0 = 0;
	for (unsigned i = base; i < x->fake[0]->npush; i++) {
		const struct fake_push *p = &x->fake[0]->log[i];
		float want = p->offset == 0 ? in1[0] + in0[0] : in1[3] + in0[3];

		assert_true(p->first == want);
		if (p->round == 1)
			n1++;
		else
			n0++;
	}
	assert_int_equal(n1, 2);
	assert_int_equal(n0, 2);
	assert_true(out[0] == in1[0] + in0[0]);
	assert_true(out[5] == in1[5] + in0[5]);
	/* round 2: fold consumed and acks seen, plain pushes only */
	base = x->fake[0]->npush;
	assert_int_equal(tally_client_allreduce(x->c, 4, 2, in1, out), 0);
	assert_int_equal(x->fake[0]->npush - base, 2);
	assert_memory_equal(in1, out, sizeof(in1));
	fx_free(x);
}

/* An exclusion nobody confirmed: the next round's push goes with a copy labelled with the
 * excluded round, so the appliance can start the new round. */
static void test_unconfirmed_exclusion_acked_by_next_round(void **state)
{
	(void)state;
	struct fx *x = fx_new(1, &cfg_w2, 0);
	float in0[3] = { 1, 2, 3 }, in1[3] = { 4, 5, 6 }, out[3];

	assert_int_equal(tally_client_join(x->c, 100), 0);
	reg_key(x, 4, 3, 3, TALLY_DT_F32, 2, 1);
	x->fake[0]->mode = FAKE_EXCLUDE;
	int h = tally_client_start(x->c, 4, 0, in0, out);
	while (tally_client_test(x->c, h) == 0)
		simnet_step(x->net, 1 * MS);
	x->fake[0]->mode = FAKE_SILENT;     /* the re-sent pushes go unanswered */
	simnet_run_for(x->net, 2 * MS);
	assert_true(tally_client_stats(x->c)->ack_pushes >= 2);
	x->fake[0]->mode = FAKE_ECHO;
	unsigned base = x->fake[0]->npush;
	h = tally_client_start(x->c, 4, 1, in1, out);
	simnet_run_for(x->net, 30 * US);   /* the first transmission only */
	unsigned r0 = 0, r1 = 0;
	for (unsigned i = base; i < x->fake[0]->npush; i++) {
		const struct fake_push *p = &x->fake[0]->log[i];

		assert_true(p->first == in1[0] + in0[0]);
		if (p->round == 0)
			r0++;
		else
			r1++;
	}
	assert_int_equal(r0, 1);
	assert_int_equal(r1, 1);
	while (tally_client_test(x->c, h) == 0)
		simnet_step(x->net, 1 * MS);
	/* both answered: nothing more goes out */
	base = x->fake[0]->npush;
	simnet_run_for(x->net, 200 * MS);
	assert_int_equal(x->fake[0]->npush, base);
	fx_free(x);
}

/* f16: in + fold is rounded to f16 for the wire; the rounding error is carried on. */
static void test_fold_f16_residual_carried(void **state)
{
	(void)state;
	struct fx *x = fx_new(1, &cfg_w2, 0);
	uint16_t a[1] = { tally_f32_to_f16(1.0f) }, b[1] = { tally_f32_to_f16(2048.0f) };
	uint16_t z[1] = { 0 }, out[1];

	assert_int_equal(tally_client_join(x->c, 100), 0);
	reg_key(x, 6, 1, 1, TALLY_DT_F16, 2, 1);
	x->fake[0]->mode = FAKE_EXCLUDE;
	assert_int_equal(tally_client_allreduce(x->c, 6, 0, a, out), 0); /* owes 1.0 */
	x->fake[0]->mode = FAKE_ECHO;
	unsigned base = x->fake[0]->npush;
	assert_int_equal(tally_client_allreduce(x->c, 6, 1, b, out), 0);
	/* 2048 + 1 is not an f16: 2048 goes on the wire, 1.0 stays owed */
	float pushed1 = 0;
	for (unsigned i = base; i < x->fake[0]->npush; i++)
		if (x->fake[0]->log[i].round == 1)
			pushed1 = x->fake[0]->log[i].first;
	assert_true(pushed1 == 2048.0f);
	base = x->fake[0]->npush;
	assert_int_equal(tally_client_allreduce(x->c, 6, 2, z, out), 0);
	assert_int_equal(x->fake[0]->npush - base, 1);
	assert_true(x->fake[0]->log[base].first == 1.0f);
	assert_true(tally_f16_to_f32(out[0]) == 1.0f);
	fx_free(x);
}

/* A failed operation gives back what its pushes carried of earlier rounds. */
static void test_fold_restored_on_failure(void **state)
{
	(void)state;
	struct tally_client_cfg cfg = cfg_w2;
	float in0[4] = { 1.5f, 2, 3, 4 }, in1[4] = { 10, 20, 30, 40 }, out[4];

	cfg.give_up_ms = 10;
	struct fx *x = fx_new(1, &cfg, 0);
	assert_int_equal(tally_client_join(x->c, 100), 0);
	reg_key(x, 4, 4, 4, TALLY_DT_F32, 2, 1);
	x->fake[0]->mode = FAKE_EXCLUDE;
	assert_int_equal(tally_client_allreduce(x->c, 4, 0, in0, out), 0);
	x->fake[0]->mode = FAKE_SILENT;
	assert_int_equal(tally_client_allreduce(x->c, 4, 1, in1, out), -ETIMEDOUT);
	x->fake[0]->mode = FAKE_ECHO;
	unsigned base = x->fake[0]->npush;
	assert_int_equal(tally_client_allreduce(x->c, 4, 1, in1, out), 0);
	for (unsigned i = base; i < x->fake[0]->npush; i++)
		if (x->fake[0]->log[i].round == 1)
			assert_true(x->fake[0]->log[i].first == in1[0] + in0[0]);
	assert_true(out[3] == in1[3] + in0[3]);
	fx_free(x);
}

/* A chunk completed by the others before we pushed it (our window was full): its RESULT
 * is used, our contribution is folded into the next round, and it is still pushed once so
 * the appliance sees us. */
static void test_result_before_push_folds(void **state)
{
	(void)state;
	struct tally_client_cfg cfg = cfg_w2;
	float in0[3] = { 1, 2, 3 }, in1[3] = { 10, 20, 30 }, out[3] = { 0, 0, 0 };
	uint8_t buf[TALLY_HDR_LEN + 4];
	struct tally_hdr h;
	float others = 7;

	cfg.window = 1;
	struct fx *x = fx_new(1, &cfg, 0);
	assert_int_equal(tally_client_join(x->c, 100), 0);
	reg_key(x, 4, 3, 1, TALLY_DT_F32, 2, 1);
	x->fake[0]->mode = FAKE_HOLD;
	int hd = tally_client_start(x->c, 4, 0, in0, out);
	simnet_run_for(x->net, 50 * US);
	assert_int_equal(x->fake[0]->npush, 1); /* chunk 0 only: window of 1 */
	memset(&h, 0, sizeof(h));
	h.op = TALLY_OP_RESULT;
	h.job_id = 7;
	h.token = 0x1234;
	h.key = 4;
	h.offset = 2;
	h.count = 1;
	h.dtype = TALLY_DT_F32;
	h.contrib = 1;
	tally_proto_finish(buf, &h, &others, 4);
	memcpy(buf + TALLY_HDR_LEN, &others, 4);
	tally_client_rx(x->c, buf, sizeof(buf));
	assert_true(out[2] == 7.0f);
	assert_int_equal(tally_client_stats(x->c)->excluded, 1);
	fake_release(x->fake[0]);
	x->fake[0]->mode = FAKE_ECHO;
	assert_int_equal(drive(x, hd, 10 * MS), 1);
	assert_true(out[0] == 1.0f && out[1] == 2.0f && out[2] == 7.0f);
	/* chunk 2 of round 0 went out once anyway (an ack, not a sum) */
	unsigned r0c2 = 0;
	for (unsigned i = 0; i < x->fake[0]->npush; i++)
		if (x->fake[0]->log[i].round == 0 && x->fake[0]->log[i].offset == 2)
			r0c2++;
	assert_true(r0c2 >= 1);
	assert_int_equal(tally_client_allreduce(x->c, 4, 1, in1, out), 0);
	assert_true(out[2] == in1[2] + in0[2]); /* the fold rode along */
	assert_true(out[0] == in1[0]);
	fx_free(x);
}

/* ERROR answering a push: transient reasons are retried, others fail the operation. */
static void test_push_error(void **state)
{
	(void)state;
	struct fx *x = fx_new(1, NULL, 0);
	float in[4] = { 1, 2, 3, 4 }, out[4];
	uint8_t buf[TALLY_HDR_LEN];
	struct tally_hdr h;

	assert_int_equal(tally_client_join(x->c, 100), 0);
	reg_key(x, 8, 4, 4, TALLY_DT_F32, 1, 1);
	x->fake[0]->mode = FAKE_SILENT;
	int hd = tally_client_start(x->c, 8, 3, in, out);
	memset(&h, 0, sizeof(h));
	h.op = TALLY_OP_ERROR;
	h.job_id = 7;
	h.token = 0x1234;
	h.key = 8;
	h.round = 3;
	h.aux = TALLY_OP_PUSH;
	h.reason = TALLY_R_POOL_FULL;
	tally_proto_finish(buf, &h, NULL, 0);
	tally_client_rx(x->c, buf, sizeof(buf));
	assert_int_equal(tally_client_test(x->c, hd), 0); /* still running */
	h.reason = TALLY_R_NOT_JOINED;
	tally_proto_finish(buf, &h, NULL, 0);
	tally_client_rx(x->c, buf, sizeof(buf));
	assert_int_equal(tally_client_test(x->c, hd), -ENOTCONN);
	assert_non_null(strstr(tally_client_strerror(x->c), "key 8 round 3"));
	assert_int_equal(tally_client_stats(x->c)->errors, 2);
	fx_free(x);
}

/* Two rounds of one key may run at once; a third waits. */
static void test_two_rounds_in_flight(void **state)
{
	(void)state;
	struct fx *x = fx_new(1, NULL, 0);
	float a[32], b[32], oa[32], ob[32];

	for (int i = 0; i < 32; i++) {
		a[i] = (float)i;
		b[i] = (float)-i;
	}
	assert_int_equal(tally_client_join(x->c, 100), 0);
	reg_key(x, 2, 32, 8, TALLY_DT_F32, 1, 1);
	int h0 = tally_client_start(x->c, 2, 10, a, oa);
	int h1 = tally_client_start(x->c, 2, 11, b, ob);
	assert_true(h0 >= 0 && h1 >= 0);
	assert_int_equal(tally_client_start(x->c, 2, 12, a, oa), -EBUSY);
	assert_int_equal(drive(x, h0, 5 * MS), 1);
	assert_int_equal(drive(x, h1, 5 * MS), 1);
	assert_int_equal(tally_client_test(x->c, h0), -EINVAL); /* released */
	assert_memory_equal(a, oa, sizeof(a));
	assert_memory_equal(b, ob, sizeof(b));
	fx_free(x);
}

/* Owner mode against an appliance that does not offer TALLY_CAP_NORESULT (this scripted one
 * offers nothing): the flag never goes on the wire, the operation runs as a plain one and
 * writes the sums into out; counted as a fallback. Unknown start flags: -EINVAL. */
static void test_noresult_fallback(void **state)
{
	(void)state;
	struct fx *x = fx_new(1, NULL, 0);
	float in[600], out[600];

	assert_int_equal(tally_client_join(x->c, 100), 0);
	assert_false(tally_client_caps(x->c) & TALLY_CAP_NORESULT);
	reg_key(x, 3, 600, 256, TALLY_DT_F32, 1, 1);
	for (int i = 0; i < 600; i++)
		in[i] = (float)i;
	memset(out, 0, sizeof(out));
	assert_int_equal(tally_client_start_flags(x->c, 3, 0, in, out, 2u), -EINVAL);
	int hd = tally_client_start_flags(x->c, 3, 0, in, out, TALLY_CLIENT_NORESULT);
	assert_true(hd >= 0);
	assert_int_equal(tally_client_wait(x->c, hd), 0);
	assert_memory_equal(in, out, sizeof(in));
	assert_int_equal(x->fake[0]->npush, 3);
	for (unsigned i = 0; i < x->fake[0]->npush; i++)
		assert_false(x->fake[0]->log[i].flags & TALLY_F_NORESULT);
	const struct tally_client_stats *st = tally_client_stats(x->c);
	assert_int_equal(st->noresult_fallbacks, 1);
	assert_int_equal(st->noresult_ops, 0);
	assert_int_equal(st->noresult_acks, 0);
	assert_int_equal(st->results, 3);
	fx_free(x);
}

/* tally_client_abandon (failover: the key moved while the appliance still answers): the
 * operation's pushes, re-sends and probes stop, its handle is released, its late RESULTs
 * are dropped as stale and leave `out` alone, the round may be started again; an operation
 * that is no longer pending is left to test (1); counted. */
static void run_for(struct fx *x, uint64_t ns)
{
	simnet_run_for(x->net, ns);
}

static void test_abandon(void **state)
{
	(void)state;
	struct fx *x = fx_new(1, NULL, 0);
	float in[64], out[64];

	assert_int_equal(tally_client_join(x->c, 100), 0);
	reg_key(x, 4, 64, 16, TALLY_DT_F32, 1, 1);
	for (int i = 0; i < 64; i++) {
		in[i] = (float)i;
		out[i] = -1.0f;
	}
	x->fake[0]->mode = FAKE_HOLD;
	int h = tally_client_start(x->c, 4, 3, in, out);
	assert_true(h >= 0);
	assert_int_equal(drive(x, h, 2 * MS), 0); /* held: pending */
	assert_true(x->fake[0]->npush >= 4); /* (unanswered: some sent again) */
	assert_int_equal(tally_client_abandon(x->c, h), 0);
	unsigned npush = x->fake[0]->npush;
	assert_int_equal(tally_client_abandon(x->c, h), -EINVAL); /* released */
	assert_int_equal(tally_client_test(x->c, h), -EINVAL);
	const struct tally_client_stats *st = tally_client_stats(x->c);
	uint64_t tx = st->tx_pkts;
	assert_int_equal(st->abandoned, 1);
	run_for(x, 200 * MS); /* well past every RTO and probe timer */
	assert_int_equal(st->tx_pkts, tx);
	assert_int_equal(x->fake[0]->npush, npush);
	uint64_t stale = st->drops[TALLY_R_STALE_ROUND];
	fake_release(x->fake[0]); /* the appliance completes it after all: late RESULTs */
	run_for(x, 5 * MS);
	assert_true(st->drops[TALLY_R_STALE_ROUND] >= stale + 4);
	assert_int_equal(st->results, 0);
	for (int i = 0; i < 64; i++)
		assert_true(out[i] == -1.0f);
	/* the round again, answered: done; abandoning a finished one leaves it to test */
	x->fake[0]->mode = FAKE_ECHO;
	h = tally_client_start(x->c, 4, 3, in, out);
	assert_true(h >= 0);
	run_for(x, 10 * MS); /* answered within about 4 round trips of 20 us */
	assert_int_equal(tally_client_abandon(x->c, h), 1);
	assert_int_equal(tally_client_test(x->c, h), 1);
	assert_memory_equal(in, out, sizeof(in));
	assert_int_equal(st->abandoned, 1);
	fx_free(x);
}

/* tally_client_carry_last between two sessions: refused for a key one lacks (-ENOENT) or
 * registered with another layout (-EINVAL). (Its use, answering NEED_RESULT on the new
 * appliance: tests/faults test_failover_udp, test_false_death_completed.) */
static void test_carry_last_checks(void **state)
{
	(void)state;
	struct fx *a = fx_new(1, NULL, 0), *b = fx_new(1, NULL, 0);

	assert_int_equal(tally_client_join(a->c, 100), 0);
	assert_int_equal(tally_client_join(b->c, 100), 0);
	reg_key(a, 5, 64, 16, TALLY_DT_F32, 1, 1);
	assert_int_equal(tally_client_carry_last(b->c, a->c, 5), -ENOENT);
	reg_key(b, 5, 64, 32, TALLY_DT_F32, 1, 1);
	assert_int_equal(tally_client_carry_last(b->c, a->c, 5), -EINVAL);
	reg_key(a, 6, 64, 16, TALLY_DT_F32, 1, 1);
	reg_key(b, 6, 64, 16, TALLY_DT_F32, 1, 1);
	assert_int_equal(tally_client_carry_last(b->c, a->c, 6), 0);
	fx_free(a);
	fx_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_join_all_cores_and_chunking),
		cmocka_unit_test(test_join_stray_core0_answer),
		cmocka_unit_test(test_window_bounds_inflight),
		cmocka_unit_test(test_rto_backoff_and_give_up),
		cmocka_unit_test(test_adaptive_rto_completion_wait),
		cmocka_unit_test(test_rto_floor),
		cmocka_unit_test(test_errors_map_to_errno),
		cmocka_unit_test(test_hostile_results_counted),
		cmocka_unit_test(test_fold_f32_exact),
		cmocka_unit_test(test_unconfirmed_exclusion_acked_by_next_round),
		cmocka_unit_test(test_fold_f16_residual_carried),
		cmocka_unit_test(test_fold_restored_on_failure),
		cmocka_unit_test(test_result_before_push_folds),
		cmocka_unit_test(test_push_error),
		cmocka_unit_test(test_two_rounds_in_flight),
		cmocka_unit_test(test_noresult_fallback),
		cmocka_unit_test(test_abandon),
		cmocka_unit_test(test_carry_last_checks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
