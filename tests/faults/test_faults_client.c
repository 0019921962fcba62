/* SPDX-License-Identifier: Apache-2.0
 * test_faults_client.c — the client session turns the appliance's fault reports into failed
 * operations with a message an operator can act on (suite 'faults'): ERROR RANK_SILENT
 * names the silent rank, the appliance, key and round (-EPIPE); ERROR DRAINING says the
 * appliance is draining (-ESHUTDOWN); the JOIN carries the configured incarnation.
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

struct fx {
	struct simnet *net;
	struct fake_app fake;
	struct tally_client *c;
};

static struct fx *fx_new_ff(uint8_t fail_fast)
{
	struct fx *x = calloc(1, sizeof(*x));
	struct simnet_cfg nc = { .seed = 1, .nclients = 1, .nengines = 1 };
	struct tally_client_cfg cfg = { .job_id = 7, .token = 0x1234, .rank = 1,
					.world_size = 4, .incarnation = 99,
					.fail_fast = fail_fast };
	int err;

	assert_non_null(x);
	snprintf(cfg.appliance, sizeof(cfg.appliance), "10.0.0.1:9170");
	nc.up.delay_ns = 10000;
	nc.down.delay_ns = 10000;
	x->net = simnet_create(&nc);
	assert_non_null(x->net);
	fake_attach(&x->fake, x->net, 0, 1);
	x->c = tally_client_create(&cfg, simnet_ops(), simnet_ctx(x->net, simnet_client_node(x->net, 0)),
				   &err);
	assert_non_null(x->c);
	simnet_attach_client(x->net, 0, x->c);
	assert_int_equal(tally_client_join(x->c, 100), 0);
	struct tally_register r = { .nelems = 4, .chunk_elems = 4, .dtype = TALLY_DT_F32,
				    .participants = 4, .quorum = 4 };
	assert_int_equal(tally_client_register(x->c, 7, &r), 0);
	x->fake.mode = FAKE_SILENT;
	return x;
}

static struct fx *fx_new(void)
{
	return fx_new_ff(0);
}

static void fx_free(struct fx *x)
{
	tally_client_destroy(x->c);
	simnet_destroy(x->net);
	free(x);
}

static void error_to(struct fx *x, uint8_t reason, uint32_t aux, uint32_t count)
{
	uint8_t buf[TALLY_HDR_LEN];
	struct tally_hdr h;

	memset(&h, 0, sizeof(h));
	h.op = TALLY_OP_ERROR;
	h.job_id = 7;
	h.token = 0x1234;
	h.rank = 1;
	h.key = 7;
	h.round = 12;
	h.aux = aux;
	h.count = count;
	h.reason = reason;
	tally_proto_finish(buf, &h, NULL, 0);
	tally_client_rx(x->c, buf, sizeof(buf));
}

static void test_rank_silent(void **state)
{
	(void)state;
	struct fx *x = fx_new();
	float in[4] = { 1, 2, 3, 4 }, out[4];
	int hd = tally_client_start(x->c, 7, 12, in, out);

	assert_true(hd >= 0);
	/* aux 4 is also TALLY_OP_PUSH: the silent rank must not be read as an op */
	error_to(x, TALLY_R_RANK_SILENT, 4, 10200);
	assert_int_equal(tally_client_test(x->c, hd), -EPIPE);
	/* then what this host knows of drops (none here) and where the appliance's are read */
	assert_string_equal(tally_client_strerror(x->c),
			    "rank 4 silent for 10.2 s at appliance 10.0.0.1:9170 (key 7, round 12); "
			    "what the appliance dropped: `tallyctl stats` there (drops by reason; "
			    "rx_missed: its receive ring overflowed)");
	/* the round started again fails the same way while the rank stays silent */
	hd = tally_client_start(x->c, 7, 12, in, out);
	error_to(x, TALLY_R_RANK_SILENT, 3, 10000);
	assert_int_equal(tally_client_test(x->c, hd), -EPIPE);
	assert_non_null(strstr(tally_client_strerror(x->c), "rank 3 silent"));
	fx_free(x);
}

/* With other appliances (fail_fast) the caller moves the op: it fails -ESHUTDOWN. */
static void test_draining(void **state)
{
	(void)state;
	struct fx *x = fx_new_ff(1);
	float in[4] = { 1, 2, 3, 4 }, out[4];
	int hd = tally_client_start(x->c, 7, 12, in, out);

	error_to(x, TALLY_R_DRAINING, TALLY_OP_PUSH, 0);
	assert_int_equal(tally_client_test(x->c, hd), -ESHUTDOWN);
	assert_non_null(strstr(tally_client_strerror(x->c),
			       "appliance 10.0.0.1:9170 is draining (shutting down or upgrading)"));
	fx_free(x);
}

/* The only appliance drains (an upgrade): the op waits for its restart, not failed. */
static void test_draining_waits(void **state)
{
	(void)state;
	struct fx *x = fx_new();
	float in[4] = { 1, 2, 3, 4 }, out[4];
	int hd = tally_client_start(x->c, 7, 12, in, out);

	error_to(x, TALLY_R_DRAINING, TALLY_OP_PUSH, 0);
	assert_int_equal(tally_client_test(x->c, hd), 0);
	assert_int_equal(tally_client_state(x->c), TALLY_CLIENT_DRAINING);
	fx_free(x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rank_silent),
		cmocka_unit_test(test_draining),
		cmocka_unit_test(test_draining_waits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
