/* SPDX-License-Identifier: Apache-2.0
 * test_verbs_ring.c — the verbs transport's slot and credit arithmetic (verbs_ring.c), two
 * ends wired back to back in memory: no slot is written before its receiver is done with
 * it, credits come back in every message's immediate or in explicit credit messages, a
 * hostile peer's credits are refused, and the counters wrap.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tally_verbs.h"
#include "verbs_ring.h"

/* The sender posts the next staged data message: returns the peer's landing slot (and the
 * immediate in *imm), or -1 when the peer has no free slot. */
static int post_staged(struct verbs_ring *tx, uint32_t *imm)
{
	uint32_t remote = 99;

	if (verbs_ring_post_slot(tx, &remote) < 0)
		return -1;
	*imm = verbs_ring_tx_commit(tx, 1);
	return (int)remote;
}

/* Stage one message (if staging has room) and post what credit allows. */
static int post(struct verbs_ring *tx, uint32_t *imm)
{
	if (verbs_ring_stage_slot(tx) >= 0)
		verbs_ring_staged(tx);
	return post_staged(tx, imm);
}

static void test_slots_in_order_and_credit_bound(void **state)
{
	struct verbs_ring a, b;
	uint32_t imm[8];
	int slot;

	(void)state;
	verbs_ring_init(&a, 4, 4, 8);
	verbs_ring_init(&b, 4, 4, 8);
	for (int i = 0; i < 4; i++)
		assert_int_equal(post(&a, &imm[i]), i);
	/* The peer has consumed nothing: a fifth message would overwrite slot 0; it waits in
	 * staging (slot 4 of 8) instead. */
	assert_int_equal(verbs_ring_stage_slot(&a), 4);
	verbs_ring_staged(&a);
	assert_int_equal(post_staged(&a, &imm[4]), -1);
	for (int i = 0; i < 4; i++) {
		verbs_ring_tx_completed(&a);
		assert_int_equal(verbs_ring_rx(&b, imm[i], &slot), 0);
		assert_int_equal(slot, i); /* the receiver finds the slot from its own count */
	}
	/* Still no credit until b says it consumed something. */
	assert_int_equal(post_staged(&a, &imm[4]), -1);
	verbs_ring_rx_done(&b);
	verbs_ring_rx_done(&b);
	assert_true(verbs_ring_credit_due(&b)); /* half the ring consumed, unreported, and
						 * nothing staged at b to carry it */
	uint32_t credit = verbs_ring_tx_commit(&b, 0);
	assert_false(credit & VERBS_IMM_DATA);
	assert_false(verbs_ring_credit_due(&b));
	assert_int_equal(verbs_ring_rx(&a, credit, &slot), 0);
	assert_int_equal(slot, -1);
	/* Slots 0 and 1 are free again, in order: the staged fifth message goes to slot 0. */
	assert_int_equal(post_staged(&a, &imm[4]), 0);
	assert_int_equal(post(&a, &imm[0]), 1);
	assert_int_equal(post(&a, &imm[0]), -1);
}

static void test_staging_waits_for_send_completion(void **state)
{
	struct verbs_ring a;
	uint32_t imm = 0;
	int slot;

	(void)state;
	verbs_ring_init(&a, 2, 2, 4);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(verbs_ring_stage_slot(&a), i);
		verbs_ring_staged(&a);
	}
	/* Four staged, none completed: staging is full, a fifth is dropped by the caller. */
	assert_int_equal(verbs_ring_stage_slot(&a), -1);
	assert_int_equal(post_staged(&a, &imm), 0);
	assert_int_equal(post_staged(&a, &imm), 1);
	assert_int_equal(post_staged(&a, &imm), -1); /* no credit for the third */
	/* The peer consumed both, but our staging slot 0 is still being sent. */
	assert_int_equal(verbs_ring_rx(&a, 2, &slot), 0);
	assert_int_equal(verbs_ring_stage_slot(&a), -1);
	verbs_ring_tx_completed(&a);
	assert_int_equal(verbs_ring_stage_slot(&a), 0);
	assert_int_equal(post_staged(&a, &imm), 0); /* the third goes to landing slot 0 */
}

static void test_credit_rides_on_staged(void **state)
{
	struct verbs_ring b;
	uint32_t imm = 0;
	int slot;

	(void)state;
	verbs_ring_init(&b, 4, 4, 8);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(verbs_ring_rx(&b, VERBS_IMM_DATA, &slot), 0);
		verbs_ring_rx_done(&b);
	}
	verbs_ring_staged(&b);
	/* A staged message can go now and will carry the credit: no explicit one. */
	assert_false(verbs_ring_credit_due(&b));
	assert_int_equal(post_staged(&b, &imm), 0);
	assert_int_equal(imm, VERBS_IMM_DATA | 4);
	assert_false(verbs_ring_credit_due(&b));
}

static void test_piggybacked_credit(void **state)
{
	struct verbs_ring a, b;
	uint32_t imm = 0;
	int slot;

	(void)state;
	verbs_ring_init(&a, 8, 8, 16);
	verbs_ring_init(&b, 8, 8, 16);
	assert_int_equal(post(&a, &imm), 0);
	assert_int_equal(verbs_ring_rx(&b, imm, &slot), 0);
	verbs_ring_rx_done(&b);
	/* b's answer (a RESULT) carries b's consumed count: a learns slot 0 is free. */
	assert_int_equal(post(&b, &imm), 0);
	assert_int_equal(imm & VERBS_IMM_MASK, 1);
	assert_true(imm & VERBS_IMM_DATA);
	assert_int_equal(verbs_ring_rx(&a, imm, &slot), 0);
	assert_int_equal(slot, 0);
	assert_int_equal(a.peer_consumed, 1);
}

static void test_hostile_peer_refused(void **state)
{
	struct verbs_ring a;
	uint32_t imm = 0;
	int slot;

	(void)state;
	verbs_ring_init(&a, 2, 2, 4);
	assert_int_equal(post(&a, &imm), 0);
	/* Claims to have consumed 5 of our 1 message. */
	assert_int_equal(verbs_ring_rx(&a, 5, &slot), -EPROTO);
	/* Writes a third slot while we hold two unconsumed: would overwrite one in use. */
	assert_int_equal(verbs_ring_rx(&a, VERBS_IMM_DATA | 0, &slot), 0);
	assert_int_equal(verbs_ring_rx(&a, VERBS_IMM_DATA | 0, &slot), 0);
	assert_int_equal(verbs_ring_rx(&a, VERBS_IMM_DATA | 0, &slot), -EPROTO);
	/* A credit going backwards is refused too. */
	verbs_ring_tx_completed(&a);
	assert_int_equal(verbs_ring_rx(&a, 1, &slot), 0);
	assert_int_equal(verbs_ring_rx(&a, 1, &slot), 0); /* same count: no advance, accepted */
	assert_int_equal(verbs_ring_rx(&a, 0, &slot), -EPROTO); /* backwards */
}

static void test_wraps(void **state)
{
	struct verbs_ring a, b;
	uint32_t imm = 0;
	int slot;

	(void)state;
	verbs_ring_init(&a, 4, 4, 8);
	verbs_ring_init(&b, 4, 4, 8);
	/* Near the 31-bit immediate wrap and the 32-bit counter wrap. */
	a.tx_seq = a.tx_done = a.tx_staged = 0xfffffffeu;
	a.peer_consumed = 0xfffffffeu & VERBS_IMM_MASK;
	b.rx_seq = b.rx_consumed = b.rx_reported = 0xfffffffeu;
	for (int i = 0; i < 1000; i++) {
		int s = post(&a, &imm);

		assert_true(s >= 0);
		verbs_ring_tx_completed(&a);
		assert_int_equal(verbs_ring_rx(&b, imm, &slot), 0);
		assert_int_equal(slot, s); /* both ends agree on the slot across the wrap */
		verbs_ring_rx_done(&b);
		assert_int_equal(verbs_ring_rx(&a, verbs_ring_tx_commit(&b, 0), &slot), 0);
	}
}

static void test_parse_addr(void **state)
{
	char h[64];
	uint16_t port = 9170;

	(void)state;
	assert_int_equal(tally_verbs_parse_addr("rdma://192.0.2.1:7000", h, sizeof(h), &port), 0);
	assert_string_equal(h, "192.0.2.1");
	assert_int_equal(port, 7000);
	assert_int_equal(tally_verbs_parse_addr("192.0.2.2", h, sizeof(h), &port), 0);
	assert_int_equal(port, 7000);
	assert_int_equal(tally_verbs_parse_addr("192.0.2.2:0", h, sizeof(h), &port), -EINVAL);
	assert_int_equal(tally_verbs_parse_addr("192.0.2.2:70000", h, sizeof(h), &port), -EINVAL);
	assert_int_equal(tally_verbs_parse_addr("rdma://:9170", h, sizeof(h), &port), -EINVAL);
	assert_int_equal(tally_verbs_parse_addr("192.0.2.2:x", h, sizeof(h), &port), -EINVAL);
}

static void test_no_device_error(void **state)
{
	struct tally_verbs_cfg cfg = { .host = "192.0.2.1" };
	char err[512] = "";
	int rc = 0;
	struct tally_verbs *v;

	(void)state;
	/* Bad settings are refused before any device is touched, naming the setting. */
	cfg.slots = 2;
	assert_null(tally_verbs_create(&cfg, NULL, NULL, &rc, err, sizeof(err)));
	assert_int_equal(rc, -EINVAL);
	assert_non_null(strstr(err, "slots 2"));
	cfg.slots = 100; /* not a power of two */
	assert_null(tally_verbs_create(&cfg, NULL, NULL, &rc, err, sizeof(err)));
	assert_non_null(strstr(err, "slots 100: want a power of two"));
	cfg.slots = 0;
	v = tally_verbs_create(&cfg, NULL, NULL, &rc, err, sizeof(err));
	if (v) { /* a host with an RDMA device: nothing more to check here */
		tally_verbs_destroy(v);
		skip();
	}
	/* Hosts without RDMA (ibv_get_device_list NULL/empty) or without a listener. */
	assert_true(strstr(err, "no RDMA device") || strstr(err, "verbs:"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slots_in_order_and_credit_bound),
		cmocka_unit_test(test_staging_waits_for_send_completion),
		cmocka_unit_test(test_credit_rides_on_staged),
		cmocka_unit_test(test_piggybacked_credit),
		cmocka_unit_test(test_hostile_peer_refused),
		cmocka_unit_test(test_wraps),
		cmocka_unit_test(test_parse_addr),
		cmocka_unit_test(test_no_device_error),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
