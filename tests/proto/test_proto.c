/* SPDX-License-Identifier: Apache-2.0
 * test_proto.c — wire protocol v1: CRC32C, header and payload round trips, and every
 * stateless rejection reason of tally_proto_decode produced on purpose.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tally_proto.h"

static void test_crc32c_check_value(void **state)
{
	(void)state;
	/* The standard CRC-32C check value. */
	assert_int_equal(tally_crc32c("123456789", 9), 0xE3069283u);
	assert_int_equal(tally_crc32c("", 0), 0u);
	/* RFC 3720 B.4: 32 bytes of zeros / of 0xff. */
	uint8_t z[32];
	memset(z, 0, sizeof(z));
	assert_int_equal(tally_crc32c(z, sizeof(z)), 0x8A9136AAu);
	memset(z, 0xff, sizeof(z));
	assert_int_equal(tally_crc32c(z, sizeof(z)), 0x62A8AB43u);
	/* One flipped bit changes it. */
	z[7] ^= 0x10;
	assert_int_not_equal(tally_crc32c(z, sizeof(z)), 0x62A8AB43u);
}

static struct tally_hdr sample_hdr(void)
{
	struct tally_hdr h;
	memset(&h, 0, sizeof(h));
	h.op = TALLY_OP_PUSH;
	h.flags = 0x0102;
	h.job_id = 0xA1B2C3D4u;
	h.rank = 1023;
	h.token = 0x0123456789ABCDEFull;
	h.key = 0xDEADBEEFu;
	h.round = 0xFFFFFFFEu;
	h.offset = 4096;
	h.count = 16;
	h.dtype = TALLY_DT_F32;
	h.reason = 0;
	h.contrib = 0xBEEF;
	h.aux = 0x55AA55AAu;
	return h;
}

/* Build a PUSH packet of n f32 into buf; returns its length. */
static size_t build_push(uint8_t *buf, struct tally_hdr *h, uint32_t n)
{
	float *pl = (float *)(buf + TALLY_HDR_LEN);
	for (uint32_t i = 0; i < n; i++)
		pl[i] = (float)i * 0.5f - 3.0f;
	h->count = n;
	tally_proto_finish(buf, h, pl, n * sizeof(float));
	return TALLY_HDR_LEN + n * sizeof(float);
}

static void test_header_round_trip(void **state)
{
	(void)state;
	uint8_t buf[TALLY_HDR_LEN + 64];
	struct tally_hdr h = sample_hdr();
	size_t len = build_push(buf, &h, 16);
	/* Layout is little-endian at fixed offsets. */
	assert_int_equal(buf[0], 'T');
	assert_int_equal(buf[1], 'L');
	assert_int_equal(buf[2], 'Y');
	assert_int_equal(buf[3], '1');
	assert_int_equal(buf[4], TALLY_VERSION);
	assert_int_equal(buf[5], TALLY_OP_PUSH);
	assert_int_equal(buf[16], 0xEF); /* token LSB */

	struct tally_pkt pkt;
	assert_int_equal(tally_proto_decode(buf, len, &pkt), TALLY_OK);
	assert_int_equal(pkt.hdr.magic, TALLY_MAGIC);
	assert_int_equal(pkt.hdr.version, TALLY_VERSION);
	assert_int_equal(pkt.hdr.op, h.op);
	assert_int_equal(pkt.hdr.flags, h.flags);
	assert_int_equal(pkt.hdr.job_id, h.job_id);
	assert_int_equal(pkt.hdr.rank, h.rank);
	assert_true(pkt.hdr.token == h.token);
	assert_int_equal(pkt.hdr.key, h.key);
	assert_int_equal(pkt.hdr.round, h.round);
	assert_int_equal(pkt.hdr.offset, h.offset);
	assert_int_equal(pkt.hdr.count, 16);
	assert_int_equal(pkt.hdr.dtype, h.dtype);
	assert_int_equal(pkt.hdr.contrib, h.contrib);
	assert_int_equal(pkt.hdr.payload_len, 64);
	assert_int_equal(pkt.hdr.crc, tally_crc32c(buf + TALLY_HDR_LEN, 64));
	assert_int_equal(pkt.hdr.aux, h.aux);
	assert_ptr_equal(pkt.payload, buf + TALLY_HDR_LEN);
}

static void test_every_op_round_trip(void **state)
{
	(void)state;
	uint8_t buf[TALLY_HDR_LEN + TALLY_MAX_PAYLOAD];
	for (uint8_t op = 1; op <= TALLY_OP_MAX; op++) {
		struct tally_hdr h = sample_hdr();
		h.op = op;
		h.rank = op;
		size_t plen = 0;
		uint8_t *pl = buf + TALLY_HDR_LEN;
		if (op == TALLY_OP_JOIN) {
			struct tally_join j = { .world_size = 8, .caps = 3, .max_chunk_bytes = 8192 };
			tally_proto_put_join(pl, &j);
			plen = TALLY_JOIN_LEN;
		} else if (op == TALLY_OP_JOIN_OK) {
			struct tally_join_ok j = { .base_port = 9170, .ncores = 4,
						   .max_chunk_bytes = 4096, .caps = 1,
						   .world_size = 8 };
			tally_proto_put_join_ok(pl, &j);
			plen = TALLY_JOIN_OK_LEN;
		} else if (op == TALLY_OP_REGISTER) {
			struct tally_register r = { .nelems = 100, .chunk_elems = 10,
						    .dtype = TALLY_DT_BF16, .participants = 4,
						    .quorum = 3, .deadline_us = 777,
						    .flags = TALLY_KEY_DETERMINISTIC };
			tally_proto_put_register(pl, &r);
			plen = TALLY_REGISTER_LEN;
		} else if (op == TALLY_OP_PUSH || op == TALLY_OP_RESULT) {
			h.dtype = TALLY_DT_F16;
			h.count = 100;
			for (unsigned i = 0; i < 200; i++)
				pl[i] = (uint8_t)(i * 7);
			plen = 200;
		} else if (op == TALLY_OP_ERROR) {
			h.reason = TALLY_R_TOO_EARLY;
			h.aux = TALLY_OP_PUSH;
		} else if (op == TALLY_OP_HELD) {
			h.flags = TALLY_F_MISSING; /* the only flags HELD has: see test_held */
		} else if (op == TALLY_OP_PING) {
			h.flags = TALLY_F_ACK; /* the answer; a PING itself has none */
		}
		tally_proto_finish(buf, &h, pl, plen);
		struct tally_pkt pkt;
		assert_int_equal(tally_proto_decode(buf, TALLY_HDR_LEN + plen, &pkt), TALLY_OK);
		assert_int_equal(pkt.hdr.op, op);
		assert_int_equal(pkt.hdr.rank, op);
		assert_int_equal(pkt.hdr.payload_len, plen);
		if (op == TALLY_OP_JOIN) {
			struct tally_join j;
			assert_int_equal(tally_proto_get_join(&pkt, &j), TALLY_OK);
			assert_int_equal(j.world_size, 8);
			assert_int_equal(j.caps, 3);
			assert_int_equal(j.max_chunk_bytes, 8192);
		} else if (op == TALLY_OP_JOIN_OK) {
			struct tally_join_ok j;
			assert_int_equal(tally_proto_get_join_ok(&pkt, &j), TALLY_OK);
			assert_int_equal(j.base_port, 9170);
			assert_int_equal(j.ncores, 4);
			assert_int_equal(j.max_chunk_bytes, 4096);
			assert_int_equal(j.caps, 1);
			assert_int_equal(j.world_size, 8);
		} else if (op == TALLY_OP_REGISTER) {
			struct tally_register r;
			assert_int_equal(tally_proto_get_register(&pkt, &r), TALLY_OK);
			assert_int_equal(r.nelems, 100);
			assert_int_equal(r.chunk_elems, 10);
			assert_int_equal(r.dtype, TALLY_DT_BF16);
			assert_int_equal(r.participants, 4);
			assert_int_equal(r.quorum, 3);
			assert_int_equal(r.deadline_us, 777);
			assert_int_equal(r.flags, TALLY_KEY_DETERMINISTIC);
		} else if (op == TALLY_OP_ERROR) {
			assert_int_equal(pkt.hdr.reason, TALLY_R_TOO_EARLY);
			assert_int_equal(pkt.hdr.aux, TALLY_OP_PUSH);
		} else if (op == TALLY_OP_PUSH || op == TALLY_OP_RESULT) {
			assert_memory_equal(pkt.payload, pl, 200);
		}
	}
}

/* Re-encode a modified header over a valid packet without fixing the CRC. */
static void rewrite(uint8_t *buf, const struct tally_hdr *h)
{
	tally_proto_encode_hdr(buf, h);
}

/* One-bit PUSH/RESULT: [f32 scale][ceil(count/8) bytes], dtype f32, count in elements. */
static void test_onebit_decode(void **state)
{
	(void)state;
	uint8_t buf[TALLY_HDR_LEN + TALLY_MAX_PAYLOAD + 64];
	struct tally_pkt pkt;
	uint32_t counts[] = { 1, 7, 8, 9, 100, (TALLY_MAX_PAYLOAD - 4) * 8 };

	assert_int_equal(TALLY_ONEBIT_BYTES(1), 5);
	assert_int_equal(TALLY_ONEBIT_BYTES(8), 5);
	assert_int_equal(TALLY_ONEBIT_BYTES(9), 6);
	assert_int_equal(tally_onebit_key_bytes(100, 16), 6 * 6 + 5);
	assert_int_equal(tally_onebit_key_bytes(96, 16), 6 * 6);
	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		for (int op = TALLY_OP_PUSH; op <= TALLY_OP_RESULT; op++) {
			struct tally_hdr h = sample_hdr();
			uint32_t n = counts[i], len = TALLY_ONEBIT_BYTES(n);
			uint8_t *pl = buf + TALLY_HDR_LEN;

			h.op = (uint8_t)op;
			h.flags = TALLY_F_ONEBIT;
			h.count = n;
			for (uint32_t b = 0; b < len; b++)
				pl[b] = (uint8_t)(b * 37 + 1);
			tally_proto_finish(buf, &h, pl, len);
			assert_int_equal(tally_proto_decode(buf, TALLY_HDR_LEN + len, &pkt), TALLY_OK);
			assert_int_equal(pkt.hdr.count, n);
			assert_true(pkt.hdr.flags & TALLY_F_ONEBIT);
			assert_ptr_equal(pkt.payload, pl);
			/* one byte of bits more or less than ceil(n / 8) */
			tally_proto_finish(buf, &h, pl, len + 1);
			assert_int_equal(tally_proto_decode(buf, TALLY_HDR_LEN + len + 1, &pkt),
					 len + 1 > TALLY_MAX_PAYLOAD ? TALLY_R_OVERSIZED
								     : TALLY_R_BAD_COUNT);
			tally_proto_finish(buf, &h, pl, len - 1);
			assert_int_equal(tally_proto_decode(buf, TALLY_HDR_LEN + len - 1, &pkt),
					 TALLY_R_BAD_COUNT);
			/* the same bytes as f32 elements: n * 4 != payload */
			h.flags = 0;
			tally_proto_finish(buf, &h, pl, len);
			assert_int_equal(tally_proto_decode(buf, TALLY_HDR_LEN + len, &pkt),
					 n * 4 == len ? TALLY_OK : TALLY_R_BAD_COUNT);
			/* one-bit is f32 on the user side only */
			h.flags = TALLY_F_ONEBIT;
			h.dtype = TALLY_DT_F16;
			tally_proto_finish(buf, &h, pl, len);
			assert_int_equal(tally_proto_decode(buf, TALLY_HDR_LEN + len, &pkt),
					 TALLY_R_BAD_DTYPE);
			/* count 0 */
			h.dtype = TALLY_DT_F32;
			h.count = 0;
			tally_proto_finish(buf, &h, pl, 4);
			assert_int_equal(tally_proto_decode(buf, TALLY_HDR_LEN + 4, &pkt),
					 TALLY_R_BAD_COUNT);
			/* CRC as for any payload */
			h.count = n;
			tally_proto_finish(buf, &h, pl, len);
			pl[len - 1] ^= 0x80;
			assert_int_equal(tally_proto_decode(buf, TALLY_HDR_LEN + len, &pkt),
					 TALLY_R_BAD_CRC);
		}
	}
}

static void test_decode_rejections(void **state)
{
	(void)state;
	uint8_t buf[TALLY_HDR_LEN + TALLY_MAX_PAYLOAD + 64];
	uint8_t orig[sizeof(buf)];
	struct tally_hdr h = sample_hdr();
	h.rank = 3;
	size_t len = build_push(buf, &h, 32);
	memcpy(orig, buf, sizeof(buf));
	struct tally_pkt pkt;
	struct tally_hdr m;

	assert_int_equal(tally_proto_decode(buf, len, &pkt), TALLY_OK);

	/* truncated: every length below the header */
	for (size_t l = 0; l < TALLY_HDR_LEN; l++)
		assert_int_equal(tally_proto_decode(buf, l, &pkt), TALLY_R_TRUNCATED);
	assert_int_equal(tally_proto_decode(NULL, 100, &pkt), TALLY_R_TRUNCATED);

	buf[0] ^= 1;
	assert_int_equal(tally_proto_decode(buf, len, &pkt), TALLY_R_BAD_MAGIC);
	memcpy(buf, orig, len);
	buf[4] = 2;
	assert_int_equal(tally_proto_decode(buf, len, &pkt), TALLY_R_BAD_VERSION);
	memcpy(buf, orig, len);
	buf[5] = 0;
	assert_int_equal(tally_proto_decode(buf, len, &pkt), TALLY_R_BAD_OP);
	buf[5] = TALLY_OP_MAX + 1;
	assert_int_equal(tally_proto_decode(buf, len, &pkt), TALLY_R_BAD_OP);
	memcpy(buf, orig, len);

	/* length: one byte more or less than the header says */
	assert_int_equal(tally_proto_decode(buf, len - 1, &pkt), TALLY_R_LEN_MISMATCH);
	assert_int_equal(tally_proto_decode(buf, len + 1, &pkt), TALLY_R_LEN_MISMATCH);
	/* oversized */
	m = h;
	m.payload_len = TALLY_MAX_PAYLOAD + 4;
	rewrite(buf, &m);
	assert_int_equal(tally_proto_decode(buf, TALLY_HDR_LEN + TALLY_MAX_PAYLOAD + 4, &pkt),
			 TALLY_R_OVERSIZED);
	memcpy(buf, orig, len);
	/* control op with a payload of the wrong size */
	m = h;
	m.op = TALLY_OP_BYE;
	rewrite(buf, &m);
	assert_int_equal(tally_proto_decode(buf, len, &pkt), TALLY_R_LEN_MISMATCH);
	m.op = TALLY_OP_JOIN;
	rewrite(buf, &m);
	assert_int_equal(tally_proto_decode(buf, len, &pkt), TALLY_R_LEN_MISMATCH);
	memcpy(buf, orig, len);

	m = h;
	m.dtype = TALLY_DT_COUNT;
	rewrite(buf, &m);
	assert_int_equal(tally_proto_decode(buf, len, &pkt), TALLY_R_BAD_DTYPE);
	/* count * size != payload: f16 count for an f32 payload, zero count, overflow */
	m = h;
	m.dtype = TALLY_DT_F16;
	rewrite(buf, &m);
	assert_int_equal(tally_proto_decode(buf, len, &pkt), TALLY_R_BAD_COUNT);
	m = h;
	m.count = 0;
	rewrite(buf, &m);
	assert_int_equal(tally_proto_decode(buf, len, &pkt), TALLY_R_BAD_COUNT);
	m = h;
	m.count = 0x80000000u + 32; /* count*4 wraps to 128 in 32 bits */
	rewrite(buf, &m);
	assert_int_equal(tally_proto_decode(buf, len, &pkt), TALLY_R_BAD_COUNT);
	memcpy(buf, orig, len);

	m = h;
	m.rank = TALLY_MAX_WORKERS;
	rewrite(buf, &m);
	assert_int_equal(tally_proto_decode(buf, len, &pkt), TALLY_R_BAD_RANK);
	memcpy(buf, orig, len);

	/* CRC: a payload bit flipped, or the CRC field changed */
	buf[TALLY_HDR_LEN + 5] ^= 0x40;
	assert_int_equal(tally_proto_decode(buf, len, &pkt), TALLY_R_BAD_CRC);
	memcpy(buf, orig, len);
	m = h;
	m.crc ^= 1;
	rewrite(buf, &m);
	assert_int_equal(tally_proto_decode(buf, len, &pkt), TALLY_R_BAD_CRC);
	/* empty payload with a non-zero CRC */
	m = h;
	m.op = TALLY_OP_BYE;
	m.payload_len = 0;
	m.crc = 1;
	rewrite(buf, &m);
	assert_int_equal(tally_proto_decode(buf, TALLY_HDR_LEN, &pkt), TALLY_R_BAD_CRC);
	m.crc = 0;
	rewrite(buf, &m);
	assert_int_equal(tally_proto_decode(buf, TALLY_HDR_LEN, &pkt), TALLY_OK);

	/* the reserved field is ignored on receive */
	memcpy(buf, orig, len);
	buf[60] = 0x77;
	assert_int_equal(tally_proto_decode(buf, len, &pkt), TALLY_OK);
	/* the largest payload is accepted */
	m = h;
	m.count = TALLY_MAX_PAYLOAD / 4;
	memset(buf + TALLY_HDR_LEN, 0x3c, TALLY_MAX_PAYLOAD);
	tally_proto_finish(buf, &m, buf + TALLY_HDR_LEN, TALLY_MAX_PAYLOAD);
	assert_int_equal(tally_proto_decode(buf, TALLY_HDR_LEN + TALLY_MAX_PAYLOAD, &pkt),
			 TALLY_OK);
}

static size_t build_register(uint8_t *buf, const struct tally_register *r)
{
	struct tally_hdr h;
	memset(&h, 0, sizeof(h));
	h.op = TALLY_OP_REGISTER;
	h.key = 9;
	tally_proto_put_register(buf + TALLY_HDR_LEN, r);
	tally_proto_finish(buf, &h, buf + TALLY_HDR_LEN, TALLY_REGISTER_LEN);
	return TALLY_HDR_LEN + TALLY_REGISTER_LEN;
}

static void test_register_validation(void **state)
{
	(void)state;
	const struct tally_register good = { .nelems = 1000, .chunk_elems = 2048,
					     .dtype = TALLY_DT_F32, .participants = 8,
					     .quorum = 8 };
	struct {
		struct tally_register r;
		enum tally_reason want;
	} cases[] = {
		{ good, TALLY_OK },
		{ good, TALLY_R_BAD_REGISTER }, /* dtype */
		{ good, TALLY_R_UNSUPPORTED },  /* compression */
		{ good, TALLY_R_BAD_REGISTER }, /* nelems 0 */
		{ good, TALLY_R_BAD_REGISTER }, /* chunk 0 */
		{ good, TALLY_R_BAD_REGISTER }, /* chunk too big */
		{ good, TALLY_R_BAD_REGISTER }, /* participants 0 */
		{ good, TALLY_R_BAD_REGISTER }, /* participants > max */
		{ good, TALLY_R_BAD_REGISTER }, /* quorum 0 */
		{ good, TALLY_R_BAD_REGISTER }, /* quorum > participants */
		{ good, TALLY_R_BAD_REGISTER }, /* unknown flag */
		{ good, TALLY_OK },             /* largest chunk, max workers, quorum 1 */
		{ good, TALLY_OK },             /* one-bit f32 */
		{ good, TALLY_R_BAD_REGISTER }, /* one-bit needs f32 */
		{ good, TALLY_OK },             /* one-bit, largest chunk: 4 + ceil(n/8) bytes */
		{ good, TALLY_R_BAD_REGISTER }, /* one-bit chunk one byte too big */
		{ good, TALLY_OK },             /* average, f16 */
		{ good, TALLY_R_BAD_REGISTER }, /* average, i32 */
		{ good, TALLY_R_BAD_REGISTER }, /* average, one-bit */
	};
	cases[1].r.dtype = TALLY_DT_COUNT;
	cases[2].r.compression = TALLY_COMP_COUNT;
	cases[3].r.nelems = 0;
	cases[4].r.chunk_elems = 0;
	cases[5].r.chunk_elems = TALLY_MAX_PAYLOAD / 4 + 1;
	cases[6].r.participants = 0;
	cases[7].r.participants = TALLY_MAX_WORKERS + 1;
	cases[8].r.quorum = 0;
	cases[9].r.quorum = 9;
	cases[10].r.flags = 0x4; /* (0x1 deterministic, 0x2 average) */
	cases[11].r.chunk_elems = TALLY_MAX_PAYLOAD / 4;
	cases[11].r.participants = TALLY_MAX_WORKERS;
	cases[11].r.quorum = 1;
	cases[12].r.compression = TALLY_COMP_ONEBIT;
	cases[13].r.compression = TALLY_COMP_ONEBIT;
	cases[13].r.dtype = TALLY_DT_F16;
	cases[14].r.compression = TALLY_COMP_ONEBIT;
	cases[14].r.chunk_elems = (TALLY_MAX_PAYLOAD - 4) * 8;
	cases[15].r.compression = TALLY_COMP_ONEBIT;
	cases[15].r.chunk_elems = (TALLY_MAX_PAYLOAD - 4) * 8 + 1;
	cases[16].r.flags = TALLY_KEY_AVERAGE;
	cases[16].r.dtype = TALLY_DT_F16;
	cases[17].r.flags = TALLY_KEY_AVERAGE;
	cases[17].r.dtype = TALLY_DT_I32;
	cases[18].r.flags = TALLY_KEY_AVERAGE;
	cases[18].r.compression = TALLY_COMP_ONEBIT;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t buf[TALLY_HDR_LEN + TALLY_REGISTER_LEN];
		size_t len = build_register(buf, &cases[i].r);
		struct tally_pkt pkt;
		assert_int_equal(tally_proto_decode(buf, len, &pkt), TALLY_OK);
		struct tally_register out;
		memset(&out, 0xA5, sizeof(out));
		enum tally_reason got = tally_proto_get_register(&pkt, &out);
		if (got != cases[i].want)
			fail_msg("case %zu: got %s want %s", i, tally_reason_name(got),
				 tally_reason_name(cases[i].want));
		if (got == TALLY_OK)
			assert_int_equal(out.participants, cases[i].r.participants);
	}
	/* a getter applied to the wrong op */
	uint8_t buf[TALLY_HDR_LEN + TALLY_REGISTER_LEN];
	size_t len = build_register(buf, &good);
	struct tally_pkt pkt;
	assert_int_equal(tally_proto_decode(buf, len, &pkt), TALLY_OK);
	struct tally_join j;
	assert_int_equal(tally_proto_get_join(&pkt, &j), TALLY_R_LEN_MISMATCH);
}

static void test_names(void **state)
{
	(void)state;
	for (int r = 0; r < TALLY_R_COUNT; r++) {
		const char *n = tally_reason_name((enum tally_reason)r);
		assert_non_null(n);
		assert_string_not_equal(n, "unknown");
		for (int q = 0; q < r; q++)
			assert_string_not_equal(n, tally_reason_name((enum tally_reason)q));
	}
	assert_string_equal(tally_reason_name(TALLY_R_COUNT), "unknown");
	assert_string_equal(tally_op_name(TALLY_OP_PUSH), "PUSH");
	assert_string_equal(tally_op_name(0), "unknown");
	assert_string_equal(tally_op_name(200), "unknown");
}

/* HELD (and HELD+MISSING / +RESEND / +DONE): header only, a non-empty range within 32 bits, a
 * known dtype, only its own flags. Every field survives the round trip. */
static void test_held(void **state)
{
	(void)state;
	uint8_t buf[TALLY_HDR_LEN + 8];
	struct tally_hdr h = sample_hdr();
	struct tally_pkt pkt;

	h.op = TALLY_OP_HELD;
	h.flags = 0;
	h.offset = 256;
	h.count = 3 * 256;
	h.rank = 7;
	h.reason = TALLY_R_TOO_EARLY;
	tally_proto_finish(buf, &h, NULL, 0);
	assert_int_equal(tally_proto_decode(buf, TALLY_HDR_LEN, &pkt), TALLY_OK);
	assert_int_equal(pkt.hdr.op, TALLY_OP_HELD);
	assert_int_equal(pkt.hdr.offset, 256);
	assert_int_equal(pkt.hdr.count, 768);
	assert_int_equal(pkt.hdr.key, h.key);
	assert_int_equal(pkt.hdr.round, h.round);
	assert_int_equal(pkt.hdr.reason, TALLY_R_TOO_EARLY);
	assert_string_equal(tally_op_name(TALLY_OP_HELD), "HELD");
	for (uint16_t f = 0; f < 0x400; f++) {
		if (f & TALLY_F_AUTH)
			continue; /* another header length: test_auth_* */
		h.flags = f;
		tally_proto_finish(buf, &h, NULL, 0);
		enum tally_reason want = (f == 0 || f == TALLY_F_MISSING || f == TALLY_F_RESEND ||
					  f == TALLY_F_DONE) ? TALLY_OK : TALLY_R_BAD_FLAGS;
		assert_int_equal(tally_proto_decode(buf, TALLY_HDR_LEN, &pkt), want);
	}
	h.flags = TALLY_F_MISSING;
	h.count = 0;
	tally_proto_finish(buf, &h, NULL, 0);
	assert_int_equal(tally_proto_decode(buf, TALLY_HDR_LEN, &pkt), TALLY_R_BAD_COUNT);
	h.offset = 0xFFFFFF00u;
	h.count = 0xFF;
	tally_proto_finish(buf, &h, NULL, 0);
	assert_int_equal(tally_proto_decode(buf, TALLY_HDR_LEN, &pkt), TALLY_OK);
	h.count = 0x100; /* its end does not fit 32 bits */
	tally_proto_finish(buf, &h, NULL, 0);
	assert_int_equal(tally_proto_decode(buf, TALLY_HDR_LEN, &pkt), TALLY_R_BAD_COUNT);
	h.count = 1;
	h.dtype = TALLY_DT_COUNT;
	tally_proto_finish(buf, &h, NULL, 0);
	assert_int_equal(tally_proto_decode(buf, TALLY_HDR_LEN, &pkt), TALLY_R_BAD_DTYPE);
	h.dtype = TALLY_DT_F32;
	memset(buf + TALLY_HDR_LEN, 1, 4); /* a payload: HELD has none */
	tally_proto_finish(buf, &h, buf + TALLY_HDR_LEN, 4);
	assert_int_equal(tally_proto_decode(buf, TALLY_HDR_LEN + 4, &pkt), TALLY_R_LEN_MISMATCH);
	assert_string_equal(tally_reason_name(TALLY_R_BAD_FLAGS), "bad_flags");
}

/* Random garbage never crashes the decoder and never decodes as OK unless it is valid. */
static void test_random_garbage(void **state)
{
	(void)state;
	uint8_t buf[TALLY_HDR_LEN + 256];
	uint64_t s = 0x9E3779B97F4A7C15ull;
	unsigned ok = 0;
	for (int it = 0; it < 20000; it++) {
		size_t len = (size_t)(s % sizeof(buf));
		for (size_t i = 0; i < len; i++) {
			s ^= s << 13;
			s ^= s >> 7;
			s ^= s << 17;
			buf[i] = (uint8_t)s;
		}
		/* Half of them with a valid magic and version to go deeper. */
		if ((it & 1) && len >= 8) {
			buf[0] = 'T'; buf[1] = 'L'; buf[2] = 'Y'; buf[3] = '1'; buf[4] = 1;
		}
		struct tally_pkt pkt;
		if (tally_proto_decode(buf, len, &pkt) == TALLY_OK)
			ok++;
	}
	/* a random 32-bit CRC matching is (nearly) impossible */
	assert_int_equal(ok, 0);
}

/* tally_proto_peek_op: the op byte of anything that starts like a header, 0 for the rest
 * (what tallyd's dispatcher sheds by, before validation). */
static void test_peek_op(void **state)
{
	(void)state;
	struct tally_hdr h;
	uint8_t buf[TALLY_HDR_LEN + 8];

	memset(&h, 0, sizeof(h));
	h.op = TALLY_OP_PULL;
	tally_proto_finish(buf, &h, NULL, 0);
	assert_int_equal(tally_proto_peek_op(buf, TALLY_HDR_LEN), TALLY_OP_PULL);
	assert_int_equal(tally_proto_peek_op(buf, TALLY_HDR_LEN - 1), 0); /* short */
	h.op = TALLY_OP_PUSH;
	tally_proto_finish(buf, &h, NULL, 0);
	assert_int_equal(tally_proto_peek_op(buf, sizeof(buf)), TALLY_OP_PUSH);
	buf[4] = TALLY_VERSION + 1; /* another version */
	assert_int_equal(tally_proto_peek_op(buf, sizeof(buf)), 0);
	buf[4] = TALLY_VERSION;
	buf[3] ^= 0xff; /* another magic */
	assert_int_equal(tally_proto_peek_op(buf, sizeof(buf)), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc32c_check_value),
		cmocka_unit_test(test_header_round_trip),
		cmocka_unit_test(test_every_op_round_trip),
		cmocka_unit_test(test_decode_rejections),
		cmocka_unit_test(test_onebit_decode),
		cmocka_unit_test(test_register_validation),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_held),
		cmocka_unit_test(test_random_garbage),
		cmocka_unit_test(test_peek_op),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
