/* SPDX-License-Identifier: Apache-2.0
 * fuzz_engine.c — libFuzzer target for the engine fed decoded packets. The input is a
 * little program: each command builds one packet (JOIN, REGISTER, PUSH, PULL, BYE, raw
 * bytes, a replay of an earlier packet) with fields taken from the input, or moves the
 * virtual clock, drains, changes policy, removes a job. After every step it checks:
 *  - a rejected packet changed nothing (digest of every walker and counter);
 *  - counters add up (rx = accepted + drops), open rounds/chunks and memory match the
 *    key walker, memory stays within the budget;
 *  - every packet sent decodes; every RESULT is exact: rank r always pushes 2^r in every
 *    element, so a sum names its contributors; it must hold `contrib` distinct bits and
 *    the recipient's bit iff TALLY_F_INCLUDED (exactly once, never twice).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally_engine.h"

#define CHECK(c)                                                                       \
	do {                                                                           \
		if (!(c)) {                                                            \
			fprintf(stderr, "fuzz_engine: check failed: %s (line %d)\n", #c, \
				__LINE__);                                             \
			abort();                                                       \
		}                                                                      \
	} while (0)

#define F_JOB 1u
#define F_TOKEN 0xABCDEF0123456789ull
#define F_WORLD 6u
#define F_MAXCHUNK 512u

struct fz {
	const uint8_t *p;
	size_t left;
	uint64_t now;
	struct tally_engine *e;
	uint64_t accepted;
	int tainted;       /* an accepted packet carried a payload we did not build */
	uint8_t ring[8][TALLY_HDR_LEN + F_MAXCHUNK];
	size_t ring_len[8];
	struct tally_addr ring_from[8];
	int ring_ours[8];
	unsigned ring_n;
};

static uint8_t take8(struct fz *f)
{
	if (!f->left)
		return 0;
	f->left--;
	return *f->p++;
}

static uint16_t take16(struct fz *f)
{
	return (uint16_t)(take8(f) | take8(f) << 8);
}

static struct tally_addr addr_of(uint32_t id)
{
	struct tally_addr a;
	memset(&a, 0, sizeof(a));
	a.ip = 0x0a000000u + id;
	a.port = (uint16_t)(7000 + id);
	a.cookie = id;
	return a;
}

static float elem_value(uint8_t dtype, const uint8_t *p)
{
	uint16_t h;
	int32_t i;
	float f;
	switch (dtype) {
	case TALLY_DT_F32:
		memcpy(&f, p, 4);
		return f;
	case TALLY_DT_I32:
		memcpy(&i, p, 4);
		return (float)i;
	case TALLY_DT_F16:
		memcpy(&h, p, 2);
		return tally_f16_to_f32(h);
	default:
		memcpy(&h, p, 2);
		return tally_bf16_to_f32(h);
	}
}

/* A key registered TALLY_KEY_AVERAGE sends sum / contrib, rounded once to its dtype: is v0
 * that for some sum `bits` of contrib workers' one-bit values that holds bit `rank` exactly
 * when `included`? */
static int avg_matches(uint8_t dtype, float v0, uint16_t contrib, uint32_t rank, int included)
{
	for (unsigned b = 1; b < 256 && contrib; b++) {
		if ((unsigned)__builtin_popcount(b) != contrib || ((b >> rank) & 1u) != (unsigned)included)
			continue;
		float a = (float)b * (1.0f / (float)contrib);
		float r = dtype == TALLY_DT_F16 ? tally_f16_to_f32(tally_f32_to_f16(a)) :
			  dtype == TALLY_DT_BF16 ? tally_bf16_to_f32(tally_f32_to_bf16(a)) : a;
		if (dtype != TALLY_DT_I32 && r == v0)
			return 1;
	}
	return 0;
}

static int fz_send(void *ctx, const struct tally_addr *to, const uint8_t *hdr,
		   const void *payload, size_t len)
{
	struct fz *f = ctx;
	static uint8_t buf[TALLY_HDR_LEN + TALLY_MAX_PAYLOAD];
	(void)to;
	CHECK(len <= TALLY_MAX_PAYLOAD);
	memcpy(buf, hdr, TALLY_HDR_LEN);
	if (len)
		memcpy(buf + TALLY_HDR_LEN, payload, len);
	struct tally_pkt pkt;
	CHECK(tally_proto_decode(buf, TALLY_HDR_LEN + len, &pkt) == TALLY_OK);
	const struct tally_hdr *h = &pkt.hdr;
	CHECK(h->op == TALLY_OP_JOIN_OK || h->op == TALLY_OP_REGISTER ||
	      h->op == TALLY_OP_RESULT || h->op == TALLY_OP_ERROR || h->op == TALLY_OP_HELD ||
	      h->op == TALLY_OP_PING);
	/* HELD: header only, a non-empty range of whole chunks (decode checked the rest) */
	if (h->op == TALLY_OP_HELD) {
		CHECK(len == 0 && h->count >= 1);
		return 0;
	}
	if (h->op != TALLY_OP_RESULT || f->tainted)
		return 0;
	CHECK(h->contrib >= 1 && h->contrib <= 8);
	size_t es = tally_dtype_size((enum tally_dtype)h->dtype);
	float v0 = elem_value(h->dtype, pkt.payload);
	unsigned bits = v0 >= 1.0f && v0 <= 255.0f ? (unsigned)v0 : 0;
	int incl = (h->flags & TALLY_F_INCLUDED) != 0;
	if (!bits || (float)bits != v0 || (unsigned)__builtin_popcount(bits) != h->contrib ||
	    ((bits >> h->rank) & 1u) != (unsigned)incl)
		CHECK(avg_matches(h->dtype, v0, h->contrib, h->rank, incl));
	for (uint32_t i = 1; i < h->count; i++)
		CHECK(elem_value(h->dtype, pkt.payload + i * es) == v0);
	return 0;
}

static uint64_t fz_now(void *ctx)
{
	return ((struct fz *)ctx)->now;
}

static const struct tally_xport_ops fz_ops = { .send = fz_send, .now_ns = fz_now };

/* ---- digest of observable state ---- */
static void mix(uint64_t *d, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		*d = (*d ^ b[i]) * 0x100000001b3ull;
}
static int d_job(void *a, const struct tally_engine_job_info *x)
{
	mix(a, x, sizeof(*x));
	return 0;
}
static int d_wk(void *a, const struct tally_engine_worker_info *x)
{
	/* a packet from the bound rank refreshes its "last heard" even when refused (it
	 * shows the rank alive): the only state a rejection may change */
	struct tally_engine_worker_info w = *x;
	w.last_heard_ns = 0;
	mix(a, &w, sizeof(w));
	return 0;
}
struct ksum {
	uint64_t d, open_chunks, open_rounds, mem;
};
static int d_key(void *a, const struct tally_engine_key_info *x)
{
	struct ksum *s = a;
	mix(&s->d, x, sizeof(*x));
	s->open_chunks += x->parity[0].chunks_open + x->parity[1].chunks_open;
	s->open_rounds += x->rounds_open;
	s->mem += x->mem_bytes;
	CHECK(x->quorum >= 1 && x->quorum <= x->participants);
	for (int p = 0; p < 2; p++)
		CHECK(x->parity[p].chunks_complete <= x->nchunks);
	return 0;
}
static int d_stuck(void *a, const struct tally_engine_stuck_info *x)
{
	uint64_t f[] = { x->job_id, x->key, x->round, x->offset, x->count, x->age_ns,
			 x->contrib, x->participants, x->missing_words };
	mix(a, f, sizeof(f));
	unsigned missing = 0;
	for (uint32_t w = 0; w < x->missing_words; w++)
		missing += (unsigned)__builtin_popcountll(x->missing[w]);
	CHECK(missing + x->contrib == x->participants);
	return 0;
}

static uint64_t digest(struct fz *f)
{
	struct tally_engine_stats st = *tally_engine_stats(f->e);
	uint64_t drops = 0;
	for (int r = 0; r < TALLY_R_COUNT; r++)
		drops += st.drops[r];
	CHECK(st.rx_pkts == f->accepted + drops);
	st.rx_pkts = st.rx_bytes = st.tx_pkts = st.tx_bytes = st.tx_errors = 0;
	memset(st.drops, 0, sizeof(st.drops));
	st.drain_errors = 0; /* counts a refusal's ERROR, like drops */
	st.stale_errors = 0; /* the same, for STALE_ROUND */
	uint64_t d = 0xcbf29ce484222325ull;
	mix(&d, &st, sizeof(st));
	tally_engine_walk_jobs(f->e, d_job, &d);
	tally_engine_walk_workers(f->e, d_wk, &d);
	struct ksum ks = { d, 0, 0, 0 };
	tally_engine_walk_keys(f->e, d_key, &ks);
	CHECK(ks.open_chunks == tally_engine_open_chunks(f->e));
	CHECK(ks.open_rounds == tally_engine_open_rounds(f->e));
	CHECK(ks.mem == tally_engine_mem_used(f->e));
	CHECK(ks.mem <= (1u << 20));
	d = ks.d;
	tally_engine_walk_stuck(f->e, 0, d_stuck, &d);
	mix(&d, &ks.open_chunks, sizeof(ks.open_chunks));
	return d;
}

static void feed(struct fz *f, const uint8_t *buf, size_t len, const struct tally_addr *from,
		 int ours)
{
	uint64_t before = digest(f);
	struct tally_pkt pkt;
	int is_push = tally_proto_decode(buf, len, &pkt) == TALLY_OK &&
		      pkt.hdr.op == TALLY_OP_PUSH;
	enum tally_reason r = tally_engine_rx(f->e, buf, len, from);
	CHECK((unsigned)r < TALLY_R_COUNT);
	if (r == TALLY_OK) {
		f->accepted++;
		if (is_push && !ours)
			f->tainted = 1;
	} else {
		CHECK(digest(f) == before);
	}
	unsigned slot = f->ring_n++ % 8;
	if (len <= sizeof(f->ring[0])) {
		memcpy(f->ring[slot], buf, len);
		f->ring_len[slot] = len;
		f->ring_from[slot] = from ? *from : addr_of(0);
		f->ring_ours[slot] = ours;
	} else {
		f->ring_len[slot] = 0;
		f->ring_ours[slot] = 1;
	}
}

struct key_view {
	uint32_t key;
	int found;
	struct tally_engine_key_info ki;
};
static int find_key(void *a, const struct tally_engine_key_info *x)
{
	struct key_view *v = a;
	if (x->job_id == F_JOB && x->key == v->key) {
		v->ki = *x;
		v->found = 1;
		return 1;
	}
	return 0;
}

static void cmd_packet(struct fz *f, uint8_t cmd)
{
	static uint8_t buf[TALLY_HDR_LEN + TALLY_MAX_PAYLOAD];
	uint8_t sel = take8(f);
	struct tally_hdr h;
	memset(&h, 0, sizeof(h));
	h.job_id = (sel & 0x80) ? take8(f) : F_JOB;
	h.token = (sel & 0x40) ? F_TOKEN ^ take8(f) : F_TOKEN;
	h.rank = take8(f) % 8;
	struct tally_addr from = addr_of((sel & 0x20) ? take8(f) % 10 : h.rank);
	size_t plen = 0;
	uint8_t *pl = buf + TALLY_HDR_LEN;
	int ours = 1;

	switch (cmd) {
	case 1: { /* JOIN */
		struct tally_join j = { .world_size = (sel & 0x10) ? take8(f) % 9 : F_WORLD,
					.max_chunk_bytes = take16(f) };
		h.op = TALLY_OP_JOIN;
		tally_proto_put_join(pl, &j);
		plen = TALLY_JOIN_LEN;
		break;
	}
	case 2: { /* REGISTER */
		struct tally_register r;
		memset(&r, 0, sizeof(r));
		h.op = TALLY_OP_REGISTER;
		h.key = take8(f) % 4;
		r.nelems = take16(f) % 1200;
		r.chunk_elems = take8(f) * 2u;
		r.dtype = take8(f) % 5;
		r.participants = take8(f) % 8;
		r.quorum = take8(f) % 8;
		r.flags = take8(f) % 5; /* 3 (deterministic + average), 4 unknown */
		r.deadline_us = take8(f) * 10u;
		tally_proto_put_register(pl, &r);
		plen = TALLY_REGISTER_LEN;
		break;
	}
	case 3:   /* PUSH */
	case 4: { /* PULL */
		h.op = cmd == 3 ? TALLY_OP_PUSH : TALLY_OP_PULL;
		struct key_view kv = { .key = take8(f) % 4 };
		h.key = kv.key;
		h.round = take8(f) % 8;
		uint8_t idx = take8(f);
		tally_engine_walk_keys(f->e, find_key, &kv);
		if (kv.found && !(sel & 0x08)) {
			uint32_t c = idx % kv.ki.nchunks;
			h.offset = c * kv.ki.chunk_elems;
			uint32_t left = kv.ki.nelems - h.offset;
			h.count = left < kv.ki.chunk_elems ? left : kv.ki.chunk_elems;
			h.dtype = kv.ki.dtype;
		} else {
			h.offset = take16(f);
			h.count = take8(f) % 64 + 1;
			h.dtype = take8(f) % 4;
		}
		if (cmd == 3) {
			size_t es = tally_dtype_size((enum tally_dtype)h.dtype);
			float v = (float)(1u << h.rank);
			for (uint32_t i = 0; i < h.count && i * es < F_MAXCHUNK; i++) {
				uint8_t *e = pl + i * es;
				if (h.dtype == TALLY_DT_F32) {
					memcpy(e, &v, 4);
				} else if (h.dtype == TALLY_DT_I32) {
					int32_t x = 1 << h.rank;
					memcpy(e, &x, 4);
				} else {
					uint16_t x = h.dtype == TALLY_DT_F16 ? tally_f32_to_f16(v)
									     : tally_f32_to_bf16(v);
					memcpy(e, &x, 2);
				}
			}
			plen = (size_t)h.count * es;
			if (plen > F_MAXCHUNK)
				plen = F_MAXCHUNK; /* decode rejects the count: fine */
		}
		break;
	}
	case 5:
		h.op = TALLY_OP_BYE;
		break;
	default: { /* raw header fields with a random op and payload from the input */
		h.op = take8(f) % 10;
		h.flags = take16(f);
		h.key = take8(f) % 5;
		h.round = take8(f);
		h.offset = take16(f);
		h.count = take16(f);
		h.dtype = take8(f) % 5;
		plen = take8(f);
		for (size_t i = 0; i < plen; i++)
			pl[i] = take8(f);
		ours = 0;
		break;
	}
	}
	tally_proto_finish(buf, &h, pl, plen);
	size_t len = TALLY_HDR_LEN + plen;
	if (sel & 0x04) { /* corrupt one byte or cut the packet */
		uint16_t at = take16(f);
		if (at & 0x8000)
			len = at % (len + 1);
		else
			buf[at % len] ^= (uint8_t)(take8(f) | 1);
		ours = 0;
	}
	feed(f, buf, len, (sel & 0x02) ? NULL : &from, ours);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz *f = calloc(1, sizeof(*f));
	CHECK(f);
	f->p = data;
	f->left = size;
	f->now = 1000000000ull;
	struct tally_engine_cfg cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.max_chunk_bytes = F_MAXCHUNK;
	cfg.mem_budget = 1u << 20;
	cfg.det_pool_bytes = 12 * F_MAXCHUNK;
	cfg.max_jobs = 2;
	cfg.max_keys = 8;
	cfg.open_admission = take8(f) & 1;
	cfg.rejoin_timeout_ns = 1000000;
	int err = 0;
	f->e = tally_engine_create(&cfg, &fz_ops, f, &err);
	CHECK(f->e);
	if (!cfg.open_admission)
		CHECK(tally_engine_job_add(f->e, F_JOB, F_TOKEN, F_WORLD) == 0);

	unsigned steps = 0;
	while (f->left && steps++ < 2000) {
		uint8_t cmd = take8(f) % 12;
		switch (cmd) {
		case 0:
		case 1:
		case 2:
		case 3:
		case 4:
		case 5:
			cmd_packet(f, cmd ? cmd : 9);
			break;
		case 6: /* time passes */
			f->now += (uint64_t)take8(f) * ((take8(f) & 1) ? 1000000 : 10000);
			(void)digest(f);
			tally_engine_poll(f->e);
			break;
		case 7:
			tally_engine_set_draining(f->e, !tally_engine_draining(f->e));
			break;
		case 8: {
			uint32_t key = take8(f) % 4;
			uint16_t q = take8(f) % 8;
			uint32_t dl = take8(f) * 10u;
			(void)tally_engine_key_policy(f->e, F_JOB, key, q, dl);
			break;
		}
		case 9:
			if (take8(f) & 1)
				(void)tally_engine_job_remove(f->e, F_JOB);
			else
				(void)tally_engine_job_add(f->e, F_JOB, F_TOKEN, F_WORLD);
			break;
		default: { /* replay an earlier packet (duplicate / delayed / reordered) */
			if (!f->ring_n)
				break;
			unsigned n = f->ring_n < 8 ? f->ring_n : 8;
			unsigned s = take8(f) % n;
			static uint8_t buf[sizeof(f->ring[0])];
			memcpy(buf, f->ring[s], f->ring_len[s]);
			struct tally_addr from = f->ring_from[s];
			feed(f, buf, f->ring_len[s], &from, f->ring_ours[s]);
			break;
		}
		}
		(void)digest(f);
	}
	if (getenv("FUZZ_ENGINE_VERBOSE")) {
		const struct tally_engine_stats *st = tally_engine_stats(f->e);
		fprintf(stderr, "steps %u rx %llu accepted %llu pushes %llu completions %llu "
			"results %llu dups %llu late %llu tainted %d\n", steps,
			(unsigned long long)st->rx_pkts, (unsigned long long)f->accepted,
			(unsigned long long)st->pushes, (unsigned long long)st->completions,
			(unsigned long long)st->results, (unsigned long long)st->duplicates,
			(unsigned long long)st->late_pushes, f->tainted);
	}
	tally_engine_destroy(f->e);
	free(f);
	return 0;
}
