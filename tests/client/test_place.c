/* SPDX-License-Identifier: Apache-2.0
 * test_place.c — the session's side of RESULTs placed by the transport (verbs RDMA WRITE
 * into the caller's buffer, tally_xport_ops.advertise): a round advertises its output
 * (never an output that overlaps the input), a RESULT whose payload already lies at its
 * chunk's place is taken without a copy and checked (a payload changed under its CRC is
 * dropped), one placed elsewhere is copied, and the round's end withdraws its buffer
 * (finished: locally; failed: told). Scripted appliance on the simulated network.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fake_appliance.h"
#include "simnet.h"
#include "tally_client.h"

#define US 1000ull
#define MS 1000000ull

struct adv_call {
	uint32_t job, rank, key, round, core;
	void *out;
	size_t len;
};
static struct adv_call calls[16];
static unsigned ncalls;

static int rec_advertise(void *ctx, const struct tally_addr *to, uint32_t job, uint32_t rank,
			 uint32_t key, uint32_t round, void *out, size_t len)
{
	(void)ctx;
	if (ncalls < 16)
		calls[ncalls] = (struct adv_call){ job, rank, key, round, to->core, out, len };
	ncalls++;
	return 0;
}

static struct tally_xport_ops ops;

struct fx {
	struct simnet *net;
	struct fake_app fake;
	struct tally_client *c;
};

static struct fx *fx_new(uint32_t give_up_ms)
{
	struct fx *x = calloc(1, sizeof(*x));
	struct simnet_cfg nc = { .seed = 1, .nclients = 1, .nengines = 1 };
	struct tally_client_cfg cfg = { .job_id = 7, .token = 0x1234, .rank = 0,
					.world_size = 1, .give_up_ms = give_up_ms };
	struct tally_register r = { .nelems = 8, .chunk_elems = 4, .dtype = TALLY_DT_F32,
				    .participants = 1, .quorum = 1 };
	int err;

	assert_non_null(x);
	nc.up.delay_ns = nc.down.delay_ns = 10 * US;
	x->net = simnet_create(&nc);
	assert_non_null(x->net);
	fake_attach(&x->fake, x->net, 0, 1);
	ops = *simnet_ops();
	ops.advertise = rec_advertise;
	x->c = tally_client_create(&cfg, &ops, simnet_ctx(x->net, simnet_client_node(x->net, 0)),
				   &err);
	assert_non_null(x->c);
	simnet_attach_client(x->net, 0, x->c);
	assert_int_equal(tally_client_join(x->c, 100), 0);
	assert_int_equal(tally_client_register(x->c, 1, &r), 0);
	ncalls = 0;
	return x;
}

static void fx_free(struct fx *x)
{
	tally_client_destroy(x->c);
	simnet_destroy(x->net);
	free(x);
}

/* The header of key 1's RESULT for round 0, chunk `ch` (4 f32), CRC over `pl`. */
static void mk_hdr(uint8_t hb[TALLY_HDR_LEN], uint32_t ch, const float *pl)
{
	struct tally_hdr h = { .op = TALLY_OP_RESULT, .job_id = 7, .token = 0x1234, .rank = 0,
			       .key = 1, .round = 0, .offset = ch * 4, .count = 4,
			       .dtype = TALLY_DT_F32, .flags = TALLY_F_INCLUDED, .contrib = 1 };

	tally_proto_finish(hb, &h, pl, 4 * sizeof(float));
}

static void test_placed_taken_without_copy(void **state)
{
	struct fx *x = fx_new(0);
	float in[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, out[8], elsewhere[4] = { 50, 60, 70, 80 };
	const struct tally_client_stats *st = tally_client_stats(x->c);
	uint8_t hb[TALLY_HDR_LEN];

	(void)state;
	x->fake.mode = FAKE_HOLD; /* the pushes are held: the test answers them */
	for (int i = 0; i < 8; i++)
		out[i] = -1;
	int h = tally_client_start(x->c, 1, 0, in, out);
	assert_true(h >= 0);
	assert_int_equal(ncalls, 1);
	assert_true(calls[0].job == 7 && calls[0].rank == 0 && calls[0].key == 1 &&
		    calls[0].round == 0 && calls[0].core == 0);
	assert_ptr_equal(calls[0].out, out);
	assert_int_equal(calls[0].len, sizeof(out));
	simnet_run_for(x->net, 50 * US);

	/* chunk 0 placed: the "appliance" wrote the payload into out[0..4) first */
	const float sum0[4] = { 10, 20, 30, 40 };
	mk_hdr(hb, 0, sum0);
	memcpy(out, sum0, sizeof(sum0));
	out[2] = 31; /* ... but the bytes in place are not what the header's CRC covers */
	tally_client_rx_placed(x->c, hb, sizeof(hb), out, sizeof(sum0));
	assert_int_equal(st->drops[TALLY_R_BAD_CRC], 1);
	assert_int_equal(st->results, 0);
	out[2] = 30;
	tally_client_rx_placed(x->c, hb, sizeof(hb), out, sizeof(sum0));
	assert_int_equal(st->results, 1);
	assert_int_equal(st->results_placed, 1);
	/* a placed header whose op is not RESULT is refused */
	uint8_t hp[TALLY_HDR_LEN];
	struct tally_hdr ph = { .op = TALLY_OP_PUSH, .job_id = 7, .token = 0x1234, .key = 1,
				.offset = 4, .count = 4, .dtype = TALLY_DT_F32 };
	tally_proto_finish(hp, &ph, elsewhere, sizeof(elsewhere));
	tally_client_rx_placed(x->c, hp, sizeof(hp), elsewhere, sizeof(elsewhere));
	assert_int_equal(st->drops[TALLY_R_UNEXPECTED_OP], 1);
	/* chunk 1 with its payload elsewhere: copied to its place */
	mk_hdr(hb, 1, elsewhere);
	tally_client_rx_placed(x->c, hb, sizeof(hb), elsewhere, sizeof(elsewhere));
	assert_int_equal(tally_client_test(x->c, h), 1);
	assert_int_equal(st->results, 2);
	assert_int_equal(st->results_placed, 1);
	const float want[8] = { 10, 20, 30, 40, 50, 60, 70, 80 };
	assert_memory_equal(out, want, sizeof(want));
	/* the round finished: its buffer withdrawn, locally only (out NULL) */
	assert_int_equal(ncalls, 2);
	assert_int_equal(calls[1].len, 0);
	assert_null(calls[1].out);
	assert_int_equal(calls[1].round, 0);
	fx_free(x);
}

static void test_in_place_not_advertised(void **state)
{
	struct fx *x = fx_new(0);
	float buf[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };

	(void)state;
	x->fake.mode = FAKE_ECHO;
	int h = tally_client_start(x->c, 1, 0, buf, buf);
	assert_true(h >= 0);
	/* the pushed bytes must survive until the RESULT's header is checked */
	assert_int_equal(ncalls, 0);
	/* half-overlapping too */
	float big[12] = { 0 };
	int h2 = tally_client_start(x->c, 1, 1, big, big + 4);
	assert_true(h2 >= 0);
	assert_int_equal(ncalls, 0);
	fx_free(x);
}

static void test_failed_round_withdrawn_on_the_wire(void **state)
{
	struct fx *x = fx_new(20);
	float in[8] = { 1 }, out[8];
	uint64_t end;
	int h, rc = 0;

	(void)state;
	x->fake.mode = FAKE_SILENT;
	h = tally_client_start(x->c, 1, 0, in, out);
	assert_int_equal(ncalls, 1);
	end = simnet_now(x->net) + 2000 * MS;
	while (!rc && simnet_now(x->net) < end) {
		rc = tally_client_test(x->c, h);
		simnet_step(x->net, end - simnet_now(x->net));
	}
	assert_true(rc < 0);
	/* failed: withdrawn with its buffer named, so the transport tells the appliance */
	assert_int_equal(ncalls, 2);
	assert_int_equal(calls[1].len, 0);
	assert_ptr_equal(calls[1].out, out);
	fx_free(x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_placed_taken_without_copy),
		cmocka_unit_test(test_in_place_not_advertised),
		cmocka_unit_test(test_failed_round_withdrawn_on_the_wire),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
