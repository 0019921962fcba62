/* SPDX-License-Identifier: Apache-2.0
 * test_verbs_place.c — RESULT placement's pure logic (verbs_place.c), no device: an
 * advertisement round-trips; hostile ones (wrong size, version, zero or wrapping address,
 * the "too long" length, another job or rank on an authenticated connection) are refused;
 * a RESULT is placed only when its (job, rank, key, round) match, INCLUDED and not a re-send
 * or one-bit, and only inside the advertised bytes; the placement record; the registration
 * cache finds by containment and evicts the least recently used.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tally_proto.h"
#include "verbs_place.h"

static struct verbs_adv adv(uint64_t addr, uint64_t len)
{
	return (struct verbs_adv){ .job = 7, .rank = 2, .key = 11, .round = 5, .rkey = 0x1234,
				   .addr = addr, .len = len };
}

static void test_adv_roundtrip(void **state)
{
	uint8_t m[VERBS_ADV_BYTES];
	struct verbs_adv a = adv(0x7f0000001000ull, 3u << 20), b;

	(void)state;
	verbs_adv_encode(m, &a);
	assert_int_equal(verbs_adv_check(m, sizeof(m), 0, 0, 0, &b), VA_OK);
	assert_int_equal(b.job, 7);
	assert_int_equal(b.rank, 2);
	assert_int_equal(b.key, 11);
	assert_int_equal(b.round, 5);
	assert_int_equal(b.rkey, 0x1234);
	assert_true(b.addr == a.addr && b.len == a.len && b.valid);
	/* an authenticated connection's own identity passes */
	assert_int_equal(verbs_adv_check(m, sizeof(m), 1, 7, 2, &b), VA_OK);
	/* length 0 withdraws the key's */
	a.len = 0;
	verbs_adv_encode(m, &a);
	assert_int_equal(verbs_adv_check(m, sizeof(m), 0, 0, 0, &b), VA_WITHDRAW);
}

static void test_adv_hostile(void **state)
{
	uint8_t m[VERBS_ADV_BYTES];
	struct verbs_adv a = adv(0x1000, 4096), b = { 0 };

	(void)state;
	verbs_adv_encode(m, &a);
	assert_int_equal(verbs_adv_check(m, sizeof(m) - 1, 0, 0, 0, &b), VA_BAD_FORMAT);
	assert_int_equal(verbs_adv_check(m, sizeof(m) + 1, 0, 0, 0, &b), VA_BAD_FORMAT);
	m[4] = 2; /* version */
	assert_int_equal(verbs_adv_check(m, sizeof(m), 0, 0, 0, &b), VA_BAD_FORMAT);
	/* another rank or job than the authenticated connection's */
	verbs_adv_encode(m, &a);
	assert_int_equal(verbs_adv_check(m, sizeof(m), 1, 7, 3, &b), VA_BAD_OWNER);
	assert_int_equal(verbs_adv_check(m, sizeof(m), 1, 8, 2, &b), VA_BAD_OWNER);
	a.rank = TALLY_MAX_WORKERS;
	verbs_adv_encode(m, &a);
	assert_int_equal(verbs_adv_check(m, sizeof(m), 0, 0, 0, &b), VA_BAD_OWNER);
	/* address 0, a range that wraps, a length past the limit */
	a = adv(0, 4096);
	verbs_adv_encode(m, &a);
	assert_int_equal(verbs_adv_check(m, sizeof(m), 0, 0, 0, &b), VA_BAD_RANGE);
	a = adv(UINT64_MAX - 4096, 8192);
	verbs_adv_encode(m, &a);
	assert_int_equal(verbs_adv_check(m, sizeof(m), 0, 0, 0, &b), VA_BAD_RANGE);
	a = adv(0x1000, VERBS_ADV_MAX_BYTES);
	verbs_adv_encode(m, &a);
	assert_int_equal(verbs_adv_check(m, sizeof(m), 0, 0, 0, &b), VA_BAD_RANGE);
	/* nothing of a refused one was taken */
	assert_false(b.valid);
}

static void test_place_rules(void **state)
{
	static struct verbs_adv tab[VERBS_ADV_TABLE];
	uint64_t ra = 0;
	uint32_t rk = 0;
	const uint16_t inc = TALLY_F_INCLUDED;

	(void)state;
	memset(tab, 0, sizeof(tab));
	struct verbs_adv a = adv(0x100000, 10000 * 4); /* 10000 f32 */
	a.valid = 1;
	tab[verbs_adv_idx(a.key, a.round)] = a;
	/* chunk at element 2048, 2048 f32: placed at addr + 8192 */
	assert_int_equal(verbs_adv_place(tab, 7, 2, 11, 5, inc, 2048, 2048, 8192, &ra, &rk), 1);
	assert_true(ra == 0x100000 + 8192 && rk == 0x1234);
	/* the last, short chunk ends exactly at the end */
	assert_int_equal(verbs_adv_place(tab, 7, 2, 11, 5, inc, 8192, 1808, 1808 * 4, &ra, &rk), 1);
	/* one element past the end: advertised, out of range (copied, counted) */
	assert_int_equal(verbs_adv_place(tab, 7, 2, 11, 5, inc, 8193, 1808, 1808 * 4, &ra, &rk), -1);
	assert_int_equal(verbs_adv_place(tab, 7, 2, 11, 5, inc, 0xffffffffu, 1, 4, &ra, &rk), -1);
	/* no match: another round, key, job, rank */
	assert_int_equal(verbs_adv_place(tab, 7, 2, 11, 6, inc, 0, 2048, 8192, &ra, &rk), 0);
	assert_int_equal(verbs_adv_place(tab, 7, 2, 11, 7, inc, 0, 2048, 8192, &ra, &rk), 0);
	assert_int_equal(verbs_adv_place(tab, 7, 2, 11 + VERBS_ADV_TABLE / 2, 5, inc, 0, 2048,
					 8192, &ra, &rk), 0);
	assert_int_equal(verbs_adv_place(tab, 8, 2, 11, 5, inc, 0, 2048, 8192, &ra, &rk), 0);
	assert_int_equal(verbs_adv_place(tab, 7, 3, 11, 5, inc, 0, 2048, 8192, &ra, &rk), 0);
	/* only the first copy to a rank whose push is in it */
	assert_int_equal(verbs_adv_place(tab, 7, 2, 11, 5, 0, 0, 2048, 8192, &ra, &rk), 0);
	assert_int_equal(verbs_adv_place(tab, 7, 2, 11, 5, inc | TALLY_F_RESEND, 0, 2048, 8192,
					 &ra, &rk), 0);
	assert_int_equal(verbs_adv_place(tab, 7, 2, 11, 5, inc | TALLY_F_ONEBIT, 0, 2048, 8192,
					 &ra, &rk), 0);
	/* a payload that is not whole elements */
	assert_int_equal(verbs_adv_place(tab, 7, 2, 11, 5, inc, 0, 3, 8, &ra, &rk), 0);
	/* the other round parity has its own entry */
	struct verbs_adv b = a;
	b.round = 6;
	b.addr = 0x900000;
	tab[verbs_adv_idx(b.key, b.round)] = b;
	assert_int_equal(verbs_adv_place(tab, 7, 2, 11, 6, inc, 0, 2048, 8192, &ra, &rk), 1);
	assert_true(ra == 0x900000);
	assert_int_equal(verbs_adv_place(tab, 7, 2, 11, 5, inc, 0, 2048, 8192, &ra, &rk), 1);
	assert_true(ra == 0x100000);
}

static void test_place_record(void **state)
{
	uint8_t r[VERBS_PLACE_BYTES];
	uint64_t a = 0;
	uint32_t l = 0;

	(void)state;
	verbs_place_encode(r, 0x7fff12345678ull, 8192);
	assert_int_equal(verbs_place_decode(r, &a, &l), 0);
	assert_true(a == 0x7fff12345678ull && l == 8192);
	r[0] ^= 1;
	assert_int_equal(verbs_place_decode(r, &a, &l), -1);
}

static void test_mr_cache(void **state)
{
	struct verbs_mrc_ent ent[3];
	struct verbs_mrc m = { .ent = ent, .n = 3 };
	int h[4];

	(void)state;
	memset(ent, 0, sizeof(ent));
	for (int i = 0; i < 3; i++) {
		struct verbs_mrc_ent *e = verbs_mrc_victim(&m);

		assert_non_null(e);
		assert_null(e->mr); /* free entries first */
		*e = (struct verbs_mrc_ent){ .addr = 0x10000ull * (i + 1), .len = 0x8000,
					     .mr = &h[i], .used = ++m.tick };
	}
	/* containment: the whole buffer, a part, not past its end */
	assert_ptr_equal(verbs_mrc_find(&m, 0x10000, 0x8000)->mr, &h[0]);
	assert_ptr_equal(verbs_mrc_find(&m, 0x24000, 0x1000)->mr, &h[1]);
	assert_null(verbs_mrc_find(&m, 0x24000, 0x5000));
	assert_null(verbs_mrc_find(&m, 0x0f000, 0x2000));
	assert_true(verbs_mrc_covers(&m, 0x30000, 0x8000));
	assert_false(verbs_mrc_covers(&m, 0x38000, 1));
	/* h[0] and h[1] were used since h[2]: the victim is h[2] */
	assert_ptr_equal(verbs_mrc_victim(&m)->mr, &h[2]);
	assert_non_null(verbs_mrc_find(&m, 0x30000, 0x10));
	assert_ptr_equal(verbs_mrc_victim(&m)->mr, &h[0]);
	/* covers() does not refresh: h[0] stays the victim */
	assert_true(verbs_mrc_covers(&m, 0x10000, 0x10));
	assert_ptr_equal(verbs_mrc_victim(&m)->mr, &h[0]);
}

/* A placed RESULT's header and payload apart: the CRC is over the payload where it lies. */
static void test_decode_split(void **state)
{
	static float pl[2048];
	uint8_t hb[TALLY_HDR_LEN];
	struct tally_hdr h = { .op = TALLY_OP_RESULT, .job_id = 7, .rank = 2, .key = 11,
			       .round = 5, .offset = 2048, .count = 2048, .dtype = TALLY_DT_F32,
			       .flags = TALLY_F_INCLUDED, .contrib = 3 };
	struct tally_pkt p;

	(void)state;
	for (int i = 0; i < 2048; i++)
		pl[i] = (float)i * 0.5f;
	tally_proto_finish(hb, &h, pl, sizeof(pl));
	assert_int_equal(tally_proto_decode_split(hb, sizeof(hb), pl, sizeof(pl), &p), TALLY_OK);
	assert_ptr_equal(p.payload, (const uint8_t *)pl);
	assert_int_equal(p.hdr.key, 11);
	assert_int_equal(tally_proto_decode_split(hb, sizeof(hb), pl, sizeof(pl) - 4, &p),
			 TALLY_R_LEN_MISMATCH);
	assert_int_equal(tally_proto_decode_split(hb, sizeof(hb) - 1, pl, sizeof(pl), &p),
			 TALLY_R_TRUNCATED);
	pl[100] += 1.0f; /* the placed bytes differ from what the header's CRC covers */
	assert_int_equal(tally_proto_decode_split(hb, sizeof(hb), pl, sizeof(pl), &p),
			 TALLY_R_BAD_CRC);
	/* peek reads the fields the sender needs without checks */
	struct tally_hdr q;
	tally_proto_peek_hdr(hb, &q);
	assert_true(q.op == TALLY_OP_RESULT && q.key == 11 && q.round == 5 && q.offset == 2048 &&
		    q.count == 2048 && q.flags == TALLY_F_INCLUDED && q.job_id == 7 && q.rank == 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_adv_roundtrip),
		cmocka_unit_test(test_adv_hostile),
		cmocka_unit_test(test_place_rules),
		cmocka_unit_test(test_place_record),
		cmocka_unit_test(test_mr_cache),
		cmocka_unit_test(test_decode_split),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
