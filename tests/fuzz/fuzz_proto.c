/* SPDX-License-Identifier: Apache-2.0
 * fuzz_proto.c — libFuzzer target for the wire decoder: any bytes either decode, and then
 * re-encode to the same header and pass the payload getters consistently, or are rejected
 * with a valid reason. Built with -fsanitize=fuzzer under clang, or linked with replay.c.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally_proto.h"

#define CHECK(c)                                                                       \
	do {                                                                           \
		if (!(c)) {                                                            \
			fprintf(stderr, "fuzz_proto: check failed: %s (line %d)\n", #c,  \
				__LINE__);                                             \
			abort();                                                       \
		}                                                                      \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tally_pkt pkt;
	enum tally_reason r = tally_proto_decode(data, size, &pkt);
	CHECK((unsigned)r < TALLY_R_COUNT);
	/* the decoder only gives stateless reasons (BAD_FLAGS is one, numbered last) */
	CHECK(r <= TALLY_R_BAD_RANK || r == TALLY_R_BAD_FLAGS);
	(void)tally_reason_name(r);
	if (r != TALLY_OK)
		return 0;

	const struct tally_hdr *h = &pkt.hdr;
	/* an authenticated packet: the auth block between header and payload, no CRC; a
	 * RESULT's is two-level (inner payload tag, outer header tag) */
	size_t hl = !(h->flags & TALLY_F_AUTH)	  ? TALLY_HDR_LEN :
		    h->op == TALLY_OP_RESULT ? TALLY_HDR_MAX :
					       TALLY_HDR_AUTH;
	CHECK(tally_proto_hdr_len(data) == hl);
	CHECK(size == hl + h->payload_len);
	CHECK(h->payload_len <= TALLY_MAX_PAYLOAD);
	CHECK(pkt.payload == data + hl);
	CHECK(pkt.auth == (hl == TALLY_HDR_LEN ? NULL : data + TALLY_HDR_LEN));
	CHECK(h->op >= 1 && h->op <= TALLY_OP_MAX);
	CHECK(h->rank < TALLY_MAX_WORKERS);
	CHECK(h->crc == (hl == TALLY_HDR_LEN ? tally_crc32c(pkt.payload, h->payload_len) : 0));
	(void)tally_op_name(h->op);

	/* The header re-encodes to the same bytes (the reserved field is not kept). */
	uint8_t enc[TALLY_HDR_LEN];
	tally_proto_encode_hdr(enc, h);
	CHECK(memcmp(enc, data, 56) == 0);

	if (h->op == TALLY_OP_HELD) {
		CHECK(h->payload_len == 0 && h->count >= 1 && h->dtype < TALLY_DT_COUNT);
		CHECK((uint64_t)h->offset + h->count <= UINT32_MAX);
		CHECK(!(h->flags & ~(TALLY_F_MISSING | TALLY_F_RESEND | TALLY_F_DONE | TALLY_F_AUTH)));
		/* at most one of them */
		CHECK(!!(h->flags & TALLY_F_MISSING) + !!(h->flags & TALLY_F_RESEND) +
		      !!(h->flags & TALLY_F_DONE) <= 1);
	}
	if ((h->op == TALLY_OP_PUSH || h->op == TALLY_OP_RESULT) && (h->flags & TALLY_F_ONEBIT)) {
		/* one-bit: f32, [scale][ceil(count / 8) bytes of bits] */
		CHECK(h->dtype == TALLY_DT_F32 && h->count >= 1);
		CHECK(TALLY_ONEBIT_BYTES(h->count) == h->payload_len);
	} else if (h->op == TALLY_OP_PUSH || h->op == TALLY_OP_RESULT) {
		CHECK(h->dtype < TALLY_DT_COUNT);
		CHECK((uint64_t)h->count * tally_dtype_size((enum tally_dtype)h->dtype) ==
		      h->payload_len);
	}
	struct tally_join j;
	CHECK((tally_proto_get_join(&pkt, &j) == TALLY_OK) == (h->op == TALLY_OP_JOIN));
	if (h->op == TALLY_OP_JOIN) {
		uint8_t out[TALLY_JOIN_LEN];
		tally_proto_put_join(out, &j);
		CHECK(memcmp(out, pkt.payload, 12) == 0);
	}
	struct tally_join_ok jo;
	CHECK((tally_proto_get_join_ok(&pkt, &jo) == TALLY_OK) == (h->op == TALLY_OP_JOIN_OK));
	if (h->op == TALLY_OP_JOIN_OK) {
		uint8_t out[TALLY_JOIN_OK_LEN];
		tally_proto_put_join_ok(out, &jo);
		CHECK(memcmp(out, pkt.payload, TALLY_JOIN_OK_LEN) == 0);
	}
	struct tally_register reg;
	r = tally_proto_get_register(&pkt, &reg);
	if (h->op != TALLY_OP_REGISTER) {
		CHECK(r == TALLY_R_LEN_MISMATCH);
	} else if (r == TALLY_OK) {
		size_t es = tally_dtype_size((enum tally_dtype)reg.dtype);
		CHECK(es > 0 && reg.nelems > 0 && reg.chunk_elems > 0);
		CHECK(reg.compression < TALLY_COMP_COUNT);
		CHECK(reg.compression == TALLY_COMP_ONEBIT ?
		      reg.dtype == TALLY_DT_F32 && TALLY_ONEBIT_BYTES(reg.chunk_elems) <= TALLY_MAX_PAYLOAD :
		      (uint64_t)reg.chunk_elems * es <= TALLY_MAX_PAYLOAD);
		CHECK(reg.quorum >= 1 && reg.quorum <= reg.participants);
		CHECK(reg.participants <= TALLY_MAX_WORKERS);
		/* a valid REGISTER survives a round trip */
		uint8_t buf[TALLY_HDR_LEN + TALLY_REGISTER_LEN];
		struct tally_hdr hh = *h;
		tally_proto_put_register(buf + TALLY_HDR_LEN, &reg);
		tally_proto_finish(buf, &hh, buf + TALLY_HDR_LEN, TALLY_REGISTER_LEN);
		struct tally_pkt p2;
		CHECK(tally_proto_decode(buf, sizeof(buf), &p2) == TALLY_OK);
		struct tally_register reg2;
		CHECK(tally_proto_get_register(&p2, &reg2) == TALLY_OK);
		CHECK(reg2.nelems == reg.nelems && reg2.chunk_elems == reg.chunk_elems &&
		      reg2.dtype == reg.dtype && reg2.flags == reg.flags &&
		      reg2.participants == reg.participants && reg2.quorum == reg.quorum &&
		      reg2.deadline_us == reg.deadline_us && reg2.compression == reg.compression);
	} else {
		CHECK(r == TALLY_R_BAD_REGISTER || r == TALLY_R_UNSUPPORTED);
	}
	return 0;
}
