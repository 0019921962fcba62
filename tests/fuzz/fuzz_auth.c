/* SPDX-License-Identifier: Apache-2.0
 * fuzz_auth.c — libFuzzer target for authenticated packets (TALLY_F_AUTH, tally_auth.h).
 * The input names header fields, a payload and one mutation (position, xor). The target
 * signs a packet with those fields and checks that:
 *  - it decodes with its auth block, or is refused for a stateless reason, and if it
 *    decodes its tag verifies (and not under another key);
 *  - the packet with any one byte changed (header, IV, tag or payload) never verifies:
 *    either the decoder refuses it or the tag does not match;
 *  - a keyed engine refuses the changed packet and the raw input bytes, and neither
 *    changes its counters of accepted work (joins, registers, pushes, BYEs, pulls).
 * Input: op, flags(2), rank, key(4), round(4), offset(4), count(2), dtype, nonce(8),
 * mutation position(2), xor, then the payload (at most 2048 bytes).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally_auth.h"
#include "tally_engine.h"

#define CHECK(c)                                                                       \
	do {                                                                           \
		if (!(c)) {                                                            \
			fprintf(stderr, "fuzz_auth: check failed: %s (line %d)\n", #c,   \
				__LINE__);                                             \
			abort();                                                       \
		}                                                                      \
	} while (0)

#define FA_JOB 9u
#define FA_TOKEN 0x0123456789abcdefull
#define FA_HDR 34u /* input bytes before the payload */

static const uint8_t FA_KEY[TALLY_AUTH_KEY_LEN] = { 0xfa, 0x11, 0x22, 0x33, 0x44 };
static const uint8_t FA_KEY2[TALLY_AUTH_KEY_LEN] = { 0xfa, 0x11, 0x22, 0x33, 0x45 };

static int fa_send(void *ctx, const struct tally_addr *to, const uint8_t *hdr,
		   const void *payload, size_t len)
{
	(void)ctx, (void)to, (void)hdr, (void)payload, (void)len;
	return 0;
}

static uint64_t fa_now(void *ctx)
{
	(void)ctx;
	return 1000000000ull;
}

static const struct tally_xport_ops fa_ops = { .send = fa_send, .now_ns = fa_now };

static struct tally_engine *eng;
static struct tally_auth *wk, *other;

static void fa_init(void)
{
	struct tally_engine_cfg cfg;
	int err = 0;
	memset(&cfg, 0, sizeof(cfg));
	cfg.mem_budget = 4u << 20;
	cfg.max_jobs = 2;
	cfg.max_keys = 64;
	eng = tally_engine_create(&cfg, &fa_ops, NULL, &err);
	CHECK(eng != NULL);
	CHECK(tally_engine_job_add(eng, FA_JOB, FA_TOKEN, 4) == 0);
	CHECK(tally_engine_job_key(eng, FA_JOB, FA_KEY) == 0);
	wk = tally_auth_new();
	other = tally_auth_new();
	CHECK(wk && other);
	CHECK(tally_auth_set_key(wk, FA_KEY) == 0);
	CHECK(tally_auth_set_key(other, FA_KEY2) == 0);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Counters of accepted work: a refused packet must leave them as they were. */
static uint64_t fa_work(void)
{
	const struct tally_engine_stats *st = tally_engine_stats(eng);
	return st->joins + st->registers + st->pushes + st->byes + st->pulls + st->duplicates +
	       st->late_pushes;
}

static void fa_refused(const uint8_t *buf, size_t len)
{
	struct tally_addr from;
	memset(&from, 0, sizeof(from));
	from.ip = 0x0a000001u;
	from.port = 1234;
	uint64_t w0 = fa_work();
	CHECK(tally_engine_rx(eng, buf, len, &from) != TALLY_OK);
	CHECK(fa_work() == w0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t pkt[TALLY_HDR_MAX + 2048];
	struct tally_pkt p;
	struct tally_hdr h;

	if (!eng)
		fa_init();
	fa_refused(data, size); /* the raw bytes: never accepted by the keyed job */
	if (size < FA_HDR)
		return 0;
	size_t plen = size - FA_HDR > 2048 ? 2048 : size - FA_HDR;
	memset(&h, 0, sizeof(h));
	h.op = data[0];
	h.flags = (uint16_t)(data[1] | data[2] << 8 | TALLY_F_AUTH);
	h.job_id = FA_JOB;
	h.token = FA_TOKEN;
	h.rank = data[3];
	h.key = get32(data + 4);
	h.round = get32(data + 8);
	h.offset = get32(data + 12);
	h.count = (uint32_t)(data[16] | data[17] << 8);
	h.dtype = data[18];
	memcpy(&h.reserved, data + 19, 8);
	h.payload_len = (uint32_t)plen;
	tally_proto_encode_hdr(pkt, &h);
	size_t hl = tally_proto_hdr_len(pkt); /* a RESULT's block is two-level */
	memcpy(pkt + hl, data + FA_HDR, plen);
	CHECK(tally_auth_sign(wk, pkt, pkt + hl, plen) == 0);
	size_t len = hl + plen;
	enum tally_reason r = tally_proto_decode(pkt, len, &p);
	if (r == TALLY_OK) {
		CHECK(p.auth == pkt + TALLY_HDR_LEN);
		CHECK(tally_auth_verify(wk, pkt, &p) == 0);
		CHECK(tally_auth_verify(other, pkt, &p) != 0);
	} else {
		CHECK(r <= TALLY_R_BAD_RANK || r == TALLY_R_BAD_FLAGS);
	}
	/* one byte changed anywhere: never verifies */
	size_t pos = (size_t)(data[27] | data[28] << 8) % len;
	uint8_t x = data[29] ? data[29] : 1;
	pkt[pos] ^= x;
	if (tally_proto_decode(pkt, len, &p) == TALLY_OK && p.auth)
		CHECK(tally_auth_verify(wk, pkt, &p) != 0);
	fa_refused(pkt, len);
	return 0;
}
