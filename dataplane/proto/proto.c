/* SPDX-License-Identifier: Apache-2.0
 * proto.c — wire protocol v1: header encode/decode, stateless validation, control payloads.
 * Every field is read and written byte by byte in little-endian order, so the code is
 * independent of host byte order and alignment; nothing reads past the caller's length.
 */
#include <string.h>

#include <isa-l/crc.h>

#include "tally_proto.h"

/* Header layout (byte offsets). */
enum {
	HO_MAGIC = 0,
	HO_VERSION = 4,
	HO_OP = 5,
	HO_FLAGS = 6,
	HO_JOB = 8,
	HO_RANK = 12,
	HO_TOKEN = 16,
	HO_KEY = 24,
	HO_ROUND = 28,
	HO_OFFSET = 32,
	HO_COUNT = 36,
	HO_DTYPE = 40,
	HO_REASON = 41,
	HO_CONTRIB = 42,
	HO_PLEN = 44,
	HO_CRC = 48,
	HO_AUX = 52,
	HO_RESERVED = 56,
};

static inline void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static inline void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

static inline uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (uint16_t)p[1] << 8);
}

static inline uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static const char *const reason_names[TALLY_R_COUNT] = {
	[TALLY_OK] = "ok",
	[TALLY_R_TRUNCATED] = "truncated",
	[TALLY_R_BAD_MAGIC] = "bad_magic",
	[TALLY_R_BAD_VERSION] = "bad_version",
	[TALLY_R_BAD_OP] = "bad_op",
	[TALLY_R_LEN_MISMATCH] = "len_mismatch",
	[TALLY_R_OVERSIZED] = "oversized",
	[TALLY_R_BAD_DTYPE] = "bad_dtype",
	[TALLY_R_BAD_COUNT] = "bad_count",
	[TALLY_R_BAD_CRC] = "bad_crc",
	[TALLY_R_BAD_RANK] = "bad_rank",
	[TALLY_R_WRONG_JOB] = "wrong_job",
	[TALLY_R_WRONG_TOKEN] = "wrong_token",
	[TALLY_R_NOT_JOINED] = "not_joined",
	[TALLY_R_RANK_TAKEN] = "rank_taken",
	[TALLY_R_UNKNOWN_KEY] = "unknown_key",
	[TALLY_R_BAD_RANGE] = "bad_range",
	[TALLY_R_CHUNK_MISMATCH] = "chunk_mismatch",
	[TALLY_R_NOT_PARTICIPANT] = "not_participant",
	[TALLY_R_STALE_ROUND] = "stale_round",
	[TALLY_R_TOO_EARLY] = "too_early",
	[TALLY_R_BAD_REGISTER] = "bad_register",
	[TALLY_R_KEY_CONFLICT] = "key_conflict",
	[TALLY_R_NO_MEMORY] = "no_memory",
	[TALLY_R_POOL_FULL] = "pool_full",
	[TALLY_R_UNSUPPORTED] = "unsupported",
	[TALLY_R_DRAINING] = "draining",
	[TALLY_R_UNEXPECTED_OP] = "unexpected_op",
	[TALLY_R_JOB_TABLE_FULL] = "job_table_full",
	[TALLY_R_INCARNATION_LIVE] = "incarnation_live",
	[TALLY_R_RANK_SILENT] = "rank_silent",
	[TALLY_R_BAD_FLAGS] = "bad_flags",
	[TALLY_R_MAC_MISMATCH] = "mac_mismatch",
	[TALLY_R_BYE_REFUSED] = "bye_refused",
	[TALLY_R_QUOTA_KEYS] = "quota_keys",
	[TALLY_R_QUOTA_BYTES] = "quota_bytes",
	[TALLY_R_QUOTA_RANKS] = "quota_ranks",
	[TALLY_R_NOT_ALLOWED] = "not_allowed",
	[TALLY_R_ADMIT_SUBNET] = "admit_subnet",
	[TALLY_R_ADMIT_LIMIT] = "admit_limit",
	[TALLY_R_NEED_RESULT] = "need_result",
	[TALLY_R_BAD_MAC] = "bad_mac",
	[TALLY_R_AUTH_REQUIRED] = "auth_required",
	[TALLY_R_NO_KEY] = "no_key",
	[TALLY_R_REPLAY] = "replay",
	[TALLY_R_CONN_IDENTITY] = "conn_identity",
};

/* Reasons that are a configured limit: the setting an operator changes. */
static const char *const reason_hints[TALLY_R_COUNT] = {
	[TALLY_R_NO_MEMORY] = "the appliance's memory budget is full (tallyd mem_budget)",
	[TALLY_R_JOB_TABLE_FULL] = "every job slot is in use (tallyd max_jobs)",
	[TALLY_R_QUOTA_KEYS] = "the job's key quota is reached (tallyd --quota-keys, "
			       "tallyctl job-add --quota-keys)",
	[TALLY_R_QUOTA_BYTES] = "the job's memory quota is reached (tallyd --quota-bytes, "
				"tallyctl job-add --quota-bytes)",
	[TALLY_R_QUOTA_RANKS] = "the world size exceeds the open-admission rank quota "
				"(tallyd --quota-ranks, or admit the job: tallyctl job-add)",
	[TALLY_R_NOT_ALLOWED] = "the source is outside the allow-list (tallyd --allow CIDR)",
	[TALLY_R_ADMIT_SUBNET] = "open admission is restricted to a subnet (tallyd "
				 "--admit-subnet CIDR)",
	[TALLY_R_ADMIT_LIMIT] = "too many open-admission jobs (the rest of the job table is "
				"operator admission's; tallyd --admit-claims, --admit-timeout)",
	[TALLY_R_RANK_TAKEN] = "the rank is bound to another live address (tallyd "
			       "rejoin_timeout)",
	[TALLY_R_MAC_MISMATCH] = "the rank is bound to this IP and port from another MAC",
	[TALLY_R_BAD_MAC] = "our key is not the job's: check TALLY_AUTH_KEY_FILE",
	[TALLY_R_AUTH_REQUIRED] = "the job was admitted with a key: set TALLY_AUTH_KEY_FILE",
	[TALLY_R_NO_KEY] = "the appliance has no key for this job: admit it with a key file "
			   "(tallyctl job-add --key-file), or unset TALLY_AUTH_KEY_FILE",
};

const char *tally_reason_hint(enum tally_reason r)
{
	if ((unsigned)r >= TALLY_R_COUNT || !reason_hints[r])
		return "";
	return reason_hints[r];
}

const char *tally_reason_name(enum tally_reason r)
{
	if ((unsigned)r >= TALLY_R_COUNT)
		return "unknown";
	return reason_names[r];
}

const char *tally_op_name(uint8_t op)
{
	static const char *const names[TALLY_OP_MAX + 1] = {
		[TALLY_OP_JOIN] = "JOIN",   [TALLY_OP_JOIN_OK] = "JOIN_OK",
		[TALLY_OP_REGISTER] = "REGISTER", [TALLY_OP_PUSH] = "PUSH",
		[TALLY_OP_RESULT] = "RESULT", [TALLY_OP_PULL] = "PULL",
		[TALLY_OP_ERROR] = "ERROR", [TALLY_OP_BYE] = "BYE",
		[TALLY_OP_HELD] = "HELD", [TALLY_OP_PING] = "PING", [TALLY_OP_GONE] = "GONE",
	};
	if (op == 0 || op > TALLY_OP_MAX)
		return "unknown";
	return names[op];
}

uint32_t tally_crc32c(const void *buf, size_t len)
{
	/* ISA-L's crc32_iscsi does neither the initial nor the final inversion of the
	 * standard CRC32C; doing both here gives the usual check value (0xE3069283 for
	 * "123456789") and 0 for an empty buffer. Its length is an int: feed large
	 * buffers in pieces. */
	const unsigned char *p = buf;
	uint32_t crc = 0xffffffffu;
	while (len > 0) {
		int n = len > (1u << 30) ? (1 << 30) : (int)len;
		crc = crc32_iscsi((unsigned char *)p, n, crc);
		p += n;
		len -= (size_t)n;
	}
	return ~crc;
}

void tally_proto_encode_hdr(uint8_t out[TALLY_HDR_LEN], const struct tally_hdr *h)
{
	put32(out + HO_MAGIC, TALLY_MAGIC);
	out[HO_VERSION] = TALLY_VERSION;
	out[HO_OP] = h->op;
	put16(out + HO_FLAGS, h->flags);
	put32(out + HO_JOB, h->job_id);
	put32(out + HO_RANK, h->rank);
	put64(out + HO_TOKEN, h->token);
	put32(out + HO_KEY, h->key);
	put32(out + HO_ROUND, h->round);
	put32(out + HO_OFFSET, h->offset);
	put32(out + HO_COUNT, h->count);
	out[HO_DTYPE] = h->dtype;
	out[HO_REASON] = h->reason;
	put16(out + HO_CONTRIB, h->contrib);
	put32(out + HO_PLEN, h->payload_len);
	put32(out + HO_CRC, h->crc);
	put32(out + HO_AUX, h->aux);
	put64(out + HO_RESERVED, h->reserved); /* boot id (JOIN_OK: nonce echo), JOIN/BYE nonce, else 0 */
}

void tally_proto_finish(uint8_t out[TALLY_HDR_LEN], struct tally_hdr *hdr, const void *payload,
			size_t len)
{
	hdr->magic = TALLY_MAGIC;
	hdr->version = TALLY_VERSION;
	hdr->payload_len = (uint32_t)len;
	hdr->crc = len ? tally_crc32c(payload, len) : 0;
	tally_proto_encode_hdr(out, hdr);
}

/* Exact payload length of the control ops; -1 for the data ops (checked by count). */
static long op_fixed_len(uint8_t op)
{
	switch (op) {
	case TALLY_OP_JOIN:
		return TALLY_JOIN_LEN;
	case TALLY_OP_JOIN_OK:
		return TALLY_JOIN_OK_LEN;
	case TALLY_OP_REGISTER:
		return TALLY_REGISTER_LEN;
	case TALLY_OP_PULL:
	case TALLY_OP_ERROR:
	case TALLY_OP_BYE:
	case TALLY_OP_HELD:
	case TALLY_OP_PING:
	case TALLY_OP_GONE:
		return 0;
	default:
		return -1;
	}
}

/* PUSH/RESULT: dtype and count against the payload length (one-bit: scale + bits). */
static enum tally_reason data_len_check(const struct tally_hdr *h)
{
	if (h->dtype >= TALLY_DT_COUNT)
		return TALLY_R_BAD_DTYPE;
	/* the acknowledgement a NORESULT push gets: a RESULT's header, no payload */
	if (h->op == TALLY_OP_RESULT && (h->flags & TALLY_F_NORESULT))
		return h->count == 0 || h->payload_len ? TALLY_R_BAD_COUNT : TALLY_OK;
	if (h->flags & TALLY_F_ONEBIT) {
		if (h->dtype != TALLY_DT_F32)
			return TALLY_R_BAD_DTYPE;
		if (h->count == 0 || TALLY_ONEBIT_BYTES(h->count) != h->payload_len)
			return TALLY_R_BAD_COUNT;
		return TALLY_OK;
	}
	size_t es = tally_dtype_size((enum tally_dtype)h->dtype);
	if (h->count == 0 || (uint64_t)h->count * es != h->payload_len)
		return TALLY_R_BAD_COUNT;
	return TALLY_OK;
}

enum tally_reason tally_proto_decode(const void *buf, size_t len, struct tally_pkt *pkt)
{
	const uint8_t *b = buf;

	if (!b || len < TALLY_HDR_LEN)
		return TALLY_R_TRUNCATED;
	size_t hl = tally_proto_hdr_len(b);
	if (len < hl)
		return TALLY_R_LEN_MISMATCH;
	return tally_proto_decode_split(b, hl, b + hl, len - hl, pkt);
}

void tally_proto_peek_hdr(const uint8_t *b, struct tally_hdr *h)
{
	memset(h, 0, sizeof(*h));
	h->magic = get32(b + HO_MAGIC);
	h->version = b[HO_VERSION];
	h->op = b[HO_OP];
	h->flags = get16(b + HO_FLAGS);
	h->job_id = get32(b + HO_JOB);
	h->rank = get32(b + HO_RANK);
	h->token = get64(b + HO_TOKEN);
	h->key = get32(b + HO_KEY);
	h->round = get32(b + HO_ROUND);
	h->offset = get32(b + HO_OFFSET);
	h->count = get32(b + HO_COUNT);
	h->dtype = b[HO_DTYPE];
	h->payload_len = get32(b + HO_PLEN);
}

enum tally_reason tally_proto_decode_split(const void *hbuf, size_t hlen, const void *payload,
					   size_t plen, struct tally_pkt *pkt)
{
	const uint8_t *b = hbuf;
	size_t len = hlen + plen;
	struct tally_hdr h;

	if (!b || hlen < TALLY_HDR_LEN)
		return TALLY_R_TRUNCATED;
	if (plen && !payload)
		return TALLY_R_LEN_MISMATCH;
	h.magic = get32(b + HO_MAGIC);
	if (h.magic != TALLY_MAGIC)
		return TALLY_R_BAD_MAGIC;
	h.version = b[HO_VERSION];
	if (h.version != TALLY_VERSION)
		return TALLY_R_BAD_VERSION;
	h.op = b[HO_OP];
	if (h.op == 0 || h.op > TALLY_OP_MAX)
		return TALLY_R_BAD_OP;
	h.payload_len = get32(b + HO_PLEN);
	if (h.payload_len > TALLY_MAX_PAYLOAD)
		return TALLY_R_OVERSIZED;
	size_t hl = tally_proto_hdr_len(b);
	if (hlen != hl || (size_t)h.payload_len != len - hl)
		return TALLY_R_LEN_MISMATCH;
	long fixed = op_fixed_len(h.op);
	if (fixed >= 0 && (long)h.payload_len != fixed)
		return TALLY_R_LEN_MISMATCH;

	h.flags = get16(b + HO_FLAGS);
	h.job_id = get32(b + HO_JOB);
	h.rank = get32(b + HO_RANK);
	h.token = get64(b + HO_TOKEN);
	h.key = get32(b + HO_KEY);
	h.round = get32(b + HO_ROUND);
	h.offset = get32(b + HO_OFFSET);
	h.count = get32(b + HO_COUNT);
	h.dtype = b[HO_DTYPE];
	h.reason = b[HO_REASON];
	h.contrib = get16(b + HO_CONTRIB);
	h.crc = get32(b + HO_CRC);
	h.aux = get32(b + HO_AUX);
	h.reserved = get64(b + HO_RESERVED);

	if (h.op == TALLY_OP_PUSH || h.op == TALLY_OP_RESULT) {
		enum tally_reason r = data_len_check(&h);
		if (r != TALLY_OK)
			return r;
	} else if (h.op == TALLY_OP_PULL && h.dtype >= TALLY_DT_COUNT) {
		return TALLY_R_BAD_DTYPE;
	} else if (h.op == TALLY_OP_HELD) {
		if (h.dtype >= TALLY_DT_COUNT)
			return TALLY_R_BAD_DTYPE;
		/* a range of whole chunks: never empty, never past 2^32 elements */
		if (h.count == 0 || (uint64_t)h.offset + h.count > UINT32_MAX)
			return TALLY_R_BAD_COUNT;
		/* at most one of MISSING, RESEND (a duplicate push acknowledged) and DONE (the
		 * chunk is complete), nothing else */
		uint16_t kind = h.flags & (TALLY_F_MISSING | TALLY_F_RESEND | TALLY_F_DONE);
		if ((h.flags & ~(TALLY_F_MISSING | TALLY_F_RESEND | TALLY_F_DONE | TALLY_F_AUTH)) ||
		    (kind & (kind - 1)))
			return TALLY_R_BAD_FLAGS;
	} else if (h.op == TALLY_OP_PING && (h.flags & ~(TALLY_F_ACK | TALLY_F_AUTH))) {
		/* AUTH: a keyed job's PINGs and their answers are signed like its other packets */
		return TALLY_R_BAD_FLAGS;
	}
	if (h.rank >= TALLY_MAX_WORKERS)
		return TALLY_R_BAD_RANK;
	/* The CRC last: it is the only check that reads the whole payload. An authenticated
	 * packet has none (its tag, checked by the key's owner, covers the payload). */
	if (hl != TALLY_HDR_LEN) {
		if (h.crc != 0)
			return TALLY_R_BAD_CRC;
	} else if (h.crc != (h.payload_len ? tally_crc32c(payload, h.payload_len) : 0u)) {
		return TALLY_R_BAD_CRC;
	}

	if (pkt) {
		pkt->hdr = h;
		pkt->payload = plen ? payload : b + hl;
		pkt->auth = hl != TALLY_HDR_LEN ? b + TALLY_HDR_LEN : NULL;
	}
	return TALLY_OK;
}

void tally_proto_put_join(uint8_t out[TALLY_JOIN_LEN], const struct tally_join *j)
{
	put32(out, j->world_size);
	put32(out + 4, j->caps);
	put32(out + 8, j->max_chunk_bytes);
	put32(out + 12, 0);
	put64(out + 16, j->incarnation);
}

enum tally_reason tally_proto_get_join(const struct tally_pkt *pkt, struct tally_join *j)
{
	if (pkt->hdr.op != TALLY_OP_JOIN || pkt->hdr.payload_len != TALLY_JOIN_LEN)
		return TALLY_R_LEN_MISMATCH;
	const uint8_t *p = pkt->payload;
	j->world_size = get32(p);
	j->caps = get32(p + 4);
	j->max_chunk_bytes = get32(p + 8);
	j->reserved = get32(p + 12);
	j->incarnation = get64(p + 16);
	return TALLY_OK;
}

void tally_proto_put_join_ok(uint8_t out[TALLY_JOIN_OK_LEN], const struct tally_join_ok *j)
{
	put16(out, j->base_port);
	put16(out + 2, j->ncores);
	put32(out + 4, j->max_chunk_bytes);
	put32(out + 8, j->caps);
	put32(out + 12, j->world_size);
}

enum tally_reason tally_proto_get_join_ok(const struct tally_pkt *pkt, struct tally_join_ok *j)
{
	if (pkt->hdr.op != TALLY_OP_JOIN_OK || pkt->hdr.payload_len != TALLY_JOIN_OK_LEN)
		return TALLY_R_LEN_MISMATCH;
	const uint8_t *p = pkt->payload;
	j->base_port = get16(p);
	j->ncores = get16(p + 2);
	j->max_chunk_bytes = get32(p + 4);
	j->caps = get32(p + 8);
	j->world_size = get32(p + 12);
	return TALLY_OK;
}

void tally_proto_put_register(uint8_t out[TALLY_REGISTER_LEN], const struct tally_register *r)
{
	memset(out, 0, TALLY_REGISTER_LEN);
	put32(out, r->nelems);
	put32(out + 4, r->chunk_elems);
	out[8] = r->dtype;
	out[9] = r->compression;
	put16(out + 10, r->flags);
	put16(out + 12, r->participants);
	put16(out + 14, r->quorum);
	put32(out + 16, r->deadline_us);
}

enum tally_reason tally_proto_get_register(const struct tally_pkt *pkt, struct tally_register *r)
{
	if (pkt->hdr.op != TALLY_OP_REGISTER || pkt->hdr.payload_len != TALLY_REGISTER_LEN)
		return TALLY_R_LEN_MISMATCH;
	const uint8_t *p = pkt->payload;
	struct tally_register v;
	memset(&v, 0, sizeof(v));
	v.nelems = get32(p);
	v.chunk_elems = get32(p + 4);
	v.dtype = p[8];
	v.compression = p[9];
	v.flags = get16(p + 10);
	v.participants = get16(p + 12);
	v.quorum = get16(p + 14);
	v.deadline_us = get32(p + 16);

	if (v.compression >= TALLY_COMP_COUNT)
		return TALLY_R_UNSUPPORTED;
	/* a one-bit chunk is scale + bits; its elements are f32 on the user side */
	uint64_t chunk_bytes = v.compression == TALLY_COMP_ONEBIT ?
			       (uint64_t)TALLY_ONEBIT_BYTES(v.chunk_elems) :
			       (uint64_t)v.chunk_elems * tally_dtype_size((enum tally_dtype)v.dtype);
	if (v.compression == TALLY_COMP_ONEBIT && v.dtype != TALLY_DT_F32)
		return TALLY_R_BAD_REGISTER;
	if (v.dtype >= TALLY_DT_COUNT || v.nelems == 0 || v.chunk_elems == 0 ||
	    v.chunk_elems > (1u << 30) || chunk_bytes > TALLY_MAX_PAYLOAD ||
	    v.participants == 0 || v.participants > TALLY_MAX_WORKERS || v.quorum == 0 ||
	    v.quorum > v.participants || (v.flags & ~TALLY_KEY_FLAGS) ||
	    ((v.flags & TALLY_KEY_AVERAGE) && (v.dtype == TALLY_DT_I32 || v.compression)))
		return TALLY_R_BAD_REGISTER;
	*r = v;
	return TALLY_OK;
}
