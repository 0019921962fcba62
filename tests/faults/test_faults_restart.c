/* SPDX-License-Identifier: Apache-2.0
 * test_faults_restart.c — an appliance restart is a pause, not a lost job (suite 'faults'):
 * real engines and client sessions on the simulated network (tests/client/simnet.h), the
 * appliance "restarted" by destroying its engine and creating a fresh one on the same node.
 *   - the lagging rank: round 1 completed at the old appliance, its RESULT reached rank 0
 *     but not rank 1 (rank 1 cut off), rank 0 moved on to round 2; after the restart rank 1
 *     re-pushes round 1, the fresh appliance asks rank 0 for it (NEED_RESULT), installs the
 *     complete sum, and both rounds finish with the exact sums (nothing summed twice);
 *   - a restart mid-round with both ranks re-pushing: the sum is exact, not doubled;
 *   - the states and fail_fast: -EHOSTDOWN at dead_ms, DOWN, then UP when it answers;
 *   - without fail_fast the give-up text says how long the appliance was unreachable;
 *   - the engine alone: PING answered ACK or ERROR with the boot id (JOIN_OK too), hostile
 *     PINGs rejected, complete pushes refused unless whole and for a round open here.
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

#include "simnet.h"
#include "tally_client.h"
#include "tally_engine.h"

#define MS 1000000ull
#define JOB 5
#define TOKEN 0xfeedull
#define KEY 11
#define N 64      /* elements: 4 chunks of 16 */
#define W 2

struct fx {
	struct simnet *net;
	struct tally_engine *eng;
	struct tally_client *cl[W];
	float in[W][3][N], out[W][3][N];
};

static struct tally_engine *engine_new(struct fx *x)
{
	struct tally_engine_cfg ec;
	struct tally_engine *e;
	int err;

	memset(&ec, 0, sizeof(ec));
	ec.mem_budget = 16u << 20;
	ec.open_admission = 1;
	tally_engine_cfg_defaults(&ec);
	e = tally_engine_create(&ec, simnet_ops(), simnet_ctx(x->net, simnet_engine_node(x->net, 0)),
				&err);
	assert_non_null(e);
	simnet_attach_engine(x->net, 0, e);
	return e;
}

/* The appliance dies (everything it held is gone) and a fresh one starts on its address. */
static void restart(struct fx *x)
{
	tally_engine_destroy(x->eng);
	x->eng = engine_new(x);
}

static struct fx *fx_new(uint8_t fail_fast)
{
	struct fx *x = calloc(1, sizeof(*x));
	struct simnet_cfg nc = { .seed = 3, .nclients = W, .nengines = 1 };
	struct tally_register r = { .nelems = N, .chunk_elems = 16, .dtype = TALLY_DT_F32,
				    .participants = W, .quorum = W };
	int err;

	assert_non_null(x);
	nc.up.delay_ns = nc.down.delay_ns = 20000;
	x->net = simnet_create(&nc);
	assert_non_null(x->net);
	x->eng = engine_new(x);
	for (unsigned w = 0; w < W; w++) {
		struct tally_client_cfg cc = { .job_id = JOB, .token = TOKEN, .rank = w,
					       .world_size = W, .probe_ms = 20, .dead_ms = 100,
					       .give_up_ms = 3000, .fail_fast = fail_fast };

		snprintf(cc.appliance, sizeof(cc.appliance), "10.9.9.9:9170");
		x->cl[w] = tally_client_create(&cc, simnet_ops(),
					       simnet_ctx(x->net, simnet_client_node(x->net, w)), &err);
		assert_non_null(x->cl[w]);
		simnet_attach_client(x->net, w, x->cl[w]);
		assert_int_equal(tally_client_join(x->cl[w], 1000), 0);
		assert_int_equal(tally_client_register(x->cl[w], KEY, &r), 0);
		/* values whose sums are exact in f32, distinct per rank and round, so a push
		 * counted twice shows */
		for (unsigned rd = 0; rd < 3; rd++)
			for (unsigned i = 0; i < N; i++)
				x->in[w][rd][i] = (float)((w + 1) * 1000 + rd * 100 + i);
	}
	return x;
}

static void fx_free(struct fx *x)
{
	for (unsigned w = 0; w < W; w++)
		tally_client_destroy(x->cl[w]);
	tally_engine_destroy(x->eng);
	simnet_destroy(x->net);
	free(x);
}

/* Step until every handle in h[] (-1: none) is finished or `ns` pass; results in rc[]. */
static void drive(struct fx *x, const int *h, int *rc, unsigned n, uint64_t ns)
{
	uint64_t end = simnet_now(x->net) + ns;
	unsigned left = 0;

	for (unsigned i = 0; i < n; i++) {
		rc[i] = h[i] < 0 ? 1 : 0;
		left += h[i] >= 0;
	}
	while (left && simnet_now(x->net) < end) {
		simnet_step(x->net, 1 * MS);
		for (unsigned i = 0; i < n; i++) {
			if (h[i] < 0 || rc[i])
				continue;
			rc[i] = tally_client_test(x->cl[i], h[i]);
			if (rc[i])
				left--;
		}
	}
}

static void check_sum(struct fx *x, unsigned w, unsigned rd)
{
	for (unsigned i = 0; i < N; i++)
		assert_float_equal(x->out[w][rd][i], x->in[0][rd][i] + x->in[1][rd][i], 0.0);
}

static void round_all(struct fx *x, unsigned rd)
{
	int h[W], rc[W];

	for (unsigned w = 0; w < W; w++)
		h[w] = tally_client_start(x->cl[w], KEY, rd, x->in[w][rd], x->out[w][rd]);
	drive(x, h, rc, W, 500 * MS);
	for (unsigned w = 0; w < W; w++) {
		assert_int_equal(rc[w], 1);
		check_sum(x, w, rd);
	}
}

static void test_lagging_rank(void **state)
{
	struct fx *x = fx_new(0);
	unsigned r1 = simnet_client_node(x->net, 1);
	int h[W], rc[W];

	(void)state;
	round_all(x, 0);
	/* round 1: rank 1's pushes reach the appliance, then rank 1 is cut off */
	h[1] = tally_client_start(x->cl[1], KEY, 1, x->in[1][1], x->out[1][1]);
	h[0] = -1;
	simnet_run_for(x->net, 2 * MS);
	simnet_set_down(x->net, r1, 1);
	h[0] = tally_client_start(x->cl[0], KEY, 1, x->in[0][1], x->out[0][1]);
	int h0[W] = { h[0], -1 };
	drive(x, h0, rc, W, 100 * MS);
	assert_int_equal(rc[0], 1); /* rank 0 has round 1 */
	check_sum(x, 0, 1);
	assert_int_equal(tally_client_test(x->cl[1], h[1]), 0); /* rank 1 does not */
	/* rank 0 moves on to round 2; then the appliance dies and comes back fresh */
	h[0] = tally_client_start(x->cl[0], KEY, 2, x->in[0][2], x->out[0][2]);
	simnet_run_for(x->net, 2 * MS);
	restart(x);
	simnet_set_down(x->net, r1, 0);
	/* rank 1 gets round 1 from the installed sum; rank 0's round 2 waits for rank 1 */
	int hl[W] = { -1, h[1] };
	drive(x, hl, rc, W, 1000 * MS);
	assert_int_equal(rc[1], 1);
	check_sum(x, 1, 1);
	assert_int_equal(tally_client_test(x->cl[0], h[0]), 0);
	h[1] = tally_client_start(x->cl[1], KEY, 2, x->in[1][2], x->out[1][2]);
	drive(x, h, rc, W, 500 * MS);
	assert_int_equal(rc[0], 1);
	assert_int_equal(rc[1], 1);
	check_sum(x, 0, 2);
	check_sum(x, 1, 2);
	const struct tally_engine_stats *es = tally_engine_stats(x->eng);
	assert_true(es->installs == 4); /* every chunk of round 1, once */
	assert_true(es->need_asks >= 4);
	for (unsigned w = 0; w < W; w++) {
		const struct tally_client_stats *cs = tally_client_stats(x->cl[w]);

		assert_int_equal(cs->restarts, 1);
		assert_int_equal(tally_client_state(x->cl[w]), TALLY_CLIENT_UP);
	}
	assert_true(tally_client_stats(x->cl[0])->complete_pushes >= 4);
	assert_true(tally_client_stats(x->cl[0])->repushes >= 4);
	/* and the job goes on */
	fx_free(x);
}

/* The lagging rank when nobody pushes r+1: rank 0 got round 1's RESULT, then waits on
 * another key (a barrier, as tally-worker does before every round), so the fresh appliance
 * never sees round 2 of KEY. Rank 1's probes of its open round 1 must make the appliance
 * ask rank 0 anyway (engine_recover_probe), or both wait forever. */
static void test_lagging_rank_behind_barrier(void **state)
{
	struct fx *x = fx_new(0);
	unsigned r1 = simnet_client_node(x->net, 1);
	struct tally_register r = { .nelems = N, .chunk_elems = 16, .dtype = TALLY_DT_F32,
				    .participants = W, .quorum = W };
	int h[W], rc[W], hb[W];

	(void)state;
	for (unsigned w = 0; w < W; w++)
		assert_int_equal(tally_client_register(x->cl[w], KEY + 1, &r), 0);
	round_all(x, 0);
	h[1] = tally_client_start(x->cl[1], KEY, 1, x->in[1][1], x->out[1][1]);
	simnet_run_for(x->net, 2 * MS);
	simnet_set_down(x->net, r1, 1);
	h[0] = tally_client_start(x->cl[0], KEY, 1, x->in[0][1], x->out[0][1]);
	int h0[W] = { h[0], -1 };
	drive(x, h0, rc, W, 100 * MS);
	assert_int_equal(rc[0], 1);
	check_sum(x, 0, 1);
	/* rank 0 enters the barrier (KEY+1, round 0); the appliance restarts */
	hb[0] = tally_client_start(x->cl[0], KEY + 1, 0, x->in[0][2], x->out[0][2]);
	simnet_run_for(x->net, 2 * MS);
	restart(x);
	simnet_set_down(x->net, r1, 0);
	int hl[W] = { -1, h[1] };
	drive(x, hl, rc, W, 3000 * MS);
	assert_int_equal(rc[1], 1); /* hung here before engine_recover_probe */
	check_sum(x, 1, 1);
	assert_int_equal(tally_engine_stats(x->eng)->installs, 4);
	/* rank 1 reaches the barrier: both go on */
	hb[1] = tally_client_start(x->cl[1], KEY + 1, 0, x->in[1][2], x->out[1][2]);
	drive(x, hb, rc, W, 1000 * MS);
	assert_int_equal(rc[0], 1);
	assert_int_equal(rc[1], 1);
	check_sum(x, 0, 2);
	check_sum(x, 1, 2);
	fx_free(x);
}

static void test_no_double_sum(void **state)
{
	struct fx *x = fx_new(0);
	int h[W], rc[W];

	(void)state;
	round_all(x, 0);
	/* both ranks' round-1 pushes are in (rank 1 cut off before the RESULT), then the
	 * appliance restarts: both re-push, the fresh sum counts each once */
	for (unsigned w = 0; w < W; w++)
		h[w] = tally_client_start(x->cl[w], KEY, 1, x->in[w][1], x->out[w][1]);
	simnet_step(x->net, 1);
	simnet_set_down(x->net, simnet_engine_node(x->net, 0), 1);
	simnet_run_for(x->net, 50 * MS);
	restart(x);
	simnet_set_down(x->net, simnet_engine_node(x->net, 0), 0);
	drive(x, h, rc, W, 1000 * MS);
	for (unsigned w = 0; w < W; w++) {
		assert_int_equal(rc[w], 1);
		check_sum(x, w, 1);
		assert_int_equal(tally_client_stats(x->cl[w])->restarts, 1);
	}
	assert_int_equal(tally_engine_stats(x->eng)->installs, 0);
	round_all(x, 2);
	fx_free(x);
}

static void test_fail_fast_and_states(void **state)
{
	struct fx *x = fx_new(1);
	unsigned en = simnet_engine_node(x->net, 0);
	int h[W], rc[W];

	(void)state;
	round_all(x, 0);
	simnet_set_down(x->net, en, 1);
	uint64_t t0 = simnet_now(x->net);
	h[0] = tally_client_start(x->cl[0], KEY, 1, x->in[0][1], x->out[0][1]);
	h[1] = -1;
	simnet_run_for(x->net, 40 * MS);
	assert_int_equal(tally_client_state(x->cl[0]), TALLY_CLIENT_SILENT);
	drive(x, h, rc, W, 1000 * MS);
	assert_int_equal(rc[0], -EHOSTDOWN);
	uint64_t took = simnet_now(x->net) - t0;
	assert_true(took >= 100 * MS && took < 200 * MS);
	assert_int_equal(tally_client_state(x->cl[0]), TALLY_CLIENT_DOWN);
	assert_non_null(strstr(tally_client_strerror(x->cl[0]), "10.9.9.9:9170 unreachable"));
	uint64_t pings = tally_client_stats(x->cl[0])->pings;
	simnet_run_for(x->net, 1000 * MS);
	/* still probing, backed off to 500 ms */
	assert_true(tally_client_stats(x->cl[0])->pings >= pings + 2);
	assert_true(tally_client_stats(x->cl[0])->pings <= pings + 4);
	simnet_set_down(x->net, en, 0);
	simnet_run_for(x->net, 600 * MS);
	assert_int_equal(tally_client_state(x->cl[0]), TALLY_CLIENT_UP);
	assert_int_equal(tally_client_stats(x->cl[0])->restarts, 0); /* same appliance */
	/* rank 1 was idle all along: the idle time is no silence */
	round_all(x, 1); /* the failed round may start again */
	fx_free(x);
}

static void test_give_up_names_outage(void **state)
{
	struct fx *x = fx_new(0);
	int h[W], rc[W];

	(void)state;
	round_all(x, 0);
	simnet_set_down(x->net, simnet_engine_node(x->net, 0), 1);
	h[0] = tally_client_start(x->cl[0], KEY, 1, x->in[0][1], x->out[0][1]);
	h[1] = -1;
	drive(x, h, rc, W, 5000 * MS);
	assert_int_equal(rc[0], -ETIMEDOUT);
	const char *m = tally_client_strerror(x->cl[0]);
	const char *u = strstr(m, "appliance 10.9.9.9:9170 unreachable for ");
	assert_non_null(u);
	/* silent since the operation started, about give_up_ms ago */
	assert_true(strtoul(u + strlen("appliance 10.9.9.9:9170 unreachable for "), NULL, 10) >= 2900);
	fx_free(x);
}

/* ---- the engine's side alone, through a transport that keeps the last packet ---- */

struct cap {
	uint8_t buf[TALLY_HDR_LEN + TALLY_MAX_PAYLOAD];
	size_t len;
	unsigned n;
};

static int cap_send(void *ctx, const struct tally_addr *to, const uint8_t *hdr,
		    const void *payload, size_t len)
{
	struct cap *c = ctx;

	(void)to;
	memcpy(c->buf, hdr, TALLY_HDR_LEN);
	if (len)
		memcpy(c->buf + TALLY_HDR_LEN, payload, len);
	c->len = TALLY_HDR_LEN + len;
	c->n++;
	return 0;
}

static uint64_t cap_now(void *ctx)
{
	(void)ctx;
	return 1000;
}

static const struct tally_xport_ops cap_ops = { .send = cap_send, .now_ns = cap_now };

static struct tally_hdr cap_last(struct cap *c)
{
	struct tally_pkt p;

	assert_int_equal(tally_proto_decode(c->buf, c->len, &p), TALLY_OK);
	return p.hdr;
}

static enum tally_reason rx_hdr(struct tally_engine *e, struct tally_hdr *h, const void *pl,
				size_t len)
{
	static const struct tally_addr from = { .ip = 1, .port = 2 };
	uint8_t buf[TALLY_HDR_LEN + 256];

	h->job_id = JOB;
	h->token = TOKEN;
	tally_proto_finish(buf, h, pl, len);
	memcpy(buf + TALLY_HDR_LEN, pl, len);
	return tally_engine_rx(e, buf, TALLY_HDR_LEN + len, &from);
}

static void test_engine_ping_and_install_rules(void **state)
{
	struct tally_engine_cfg ec = { .open_admission = 1, .mem_budget = 1u << 20,
				       .boot_id = 0xb007 };
	struct tally_register r = { .nelems = 4, .chunk_elems = 4, .dtype = TALLY_DT_F32,
				    .participants = 2, .quorum = 2 };
	struct tally_join j = { .world_size = 2 };
	uint8_t jpl[TALLY_JOIN_LEN], rpl[TALLY_REGISTER_LEN], raw[TALLY_HDR_LEN];
	float v[4] = { 1, 2, 3, 4 };
	struct tally_hdr h, a;
	struct cap cap = { 0 };
	struct tally_pkt pkt;
	int err;

	(void)state;
	tally_engine_cfg_defaults(&ec);
	struct tally_engine *e = tally_engine_create(&ec, &cap_ops, &cap, &err);
	assert_non_null(e);
	/* a PING from a worker the appliance does not know: ERROR with the boot id */
	memset(&h, 0, sizeof(h));
	h.op = TALLY_OP_PING;
	assert_int_equal(rx_hdr(e, &h, NULL, 0), TALLY_R_WRONG_JOB);
	a = cap_last(&cap);
	assert_int_equal(a.op, TALLY_OP_ERROR);
	assert_int_equal(a.aux, TALLY_OP_PING);
	assert_int_equal(a.reason, TALLY_R_WRONG_JOB);
	assert_true(a.reserved == 0xb007);
	/* JOIN_OK carries it; a joined rank's PING is answered PING+ACK with it */
	memset(&h, 0, sizeof(h));
	h.op = TALLY_OP_JOIN;
	tally_proto_put_join(jpl, &j);
	assert_int_equal(rx_hdr(e, &h, jpl, sizeof(jpl)), TALLY_OK);
	a = cap_last(&cap);
	assert_int_equal(a.op, TALLY_OP_JOIN_OK);
	assert_true(((uint64_t)a.round << 32 | a.key) == 0xb007);
	memset(&h, 0, sizeof(h));
	h.op = TALLY_OP_PING;
	assert_int_equal(rx_hdr(e, &h, NULL, 0), TALLY_OK);
	a = cap_last(&cap);
	assert_int_equal(a.op, TALLY_OP_PING);
	assert_int_equal(a.flags, TALLY_F_ACK);
	assert_true(a.reserved == 0xb007);
	assert_int_equal(tally_engine_stats(e)->pings, 2);
	/* hostile PINGs: flags, a payload, an ACK sent to the appliance */
	h.flags = TALLY_F_MISSING;
	tally_proto_finish(raw, &h, NULL, 0);
	assert_int_equal(tally_proto_decode(raw, sizeof(raw), &pkt), TALLY_R_BAD_FLAGS);
	memset(&h, 0, sizeof(h));
	h.op = TALLY_OP_PING;
	assert_int_equal(rx_hdr(e, &h, v, sizeof(v)), TALLY_R_LEN_MISMATCH);
	h.flags = TALLY_F_ACK;
	assert_int_equal(rx_hdr(e, &h, NULL, 0), TALLY_R_UNEXPECTED_OP);
	/* complete pushes: refused unless the round is open here, and only whole sums */
	memset(&h, 0, sizeof(h));
	h.op = TALLY_OP_REGISTER;
	h.key = KEY;
	tally_proto_put_register(rpl, &r);
	assert_int_equal(rx_hdr(e, &h, rpl, sizeof(rpl)), TALLY_OK);
	memset(&h, 0, sizeof(h));
	h.op = TALLY_OP_PUSH;
	h.flags = TALLY_F_COMPLETE;
	h.key = KEY;
	h.round = 3;
	h.count = 4;
	h.dtype = TALLY_DT_F32;
	h.contrib = 1;
	assert_int_equal(rx_hdr(e, &h, v, sizeof(v)), TALLY_R_UNSUPPORTED);
	h.contrib = 2;
	assert_int_equal(rx_hdr(e, &h, v, sizeof(v)), TALLY_R_STALE_ROUND);
	assert_int_equal(tally_engine_stats(e)->installs, 0);
	assert_int_equal(tally_engine_stats(e)->completions, 0);
	tally_engine_destroy(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_engine_ping_and_install_rules),
		cmocka_unit_test(test_lagging_rank),
		cmocka_unit_test(test_lagging_rank_behind_barrier),
		cmocka_unit_test(test_no_double_sum),
		cmocka_unit_test(test_fail_fast_and_states),
		cmocka_unit_test(test_give_up_names_outage),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
