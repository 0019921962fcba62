/* SPDX-License-Identifier: Apache-2.0
 * harness.h — engine tests: a capturing in-memory transport with a virtual clock, packet
 * builders for every worker op, and a digest of all observable engine state (to check
 * that a rejected packet changes nothing).
 */
#ifndef TEST_ENGINE_HARNESS_H
#define TEST_ENGINE_HARNESS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tally_engine.h"

#define H_JOB 7u
#define H_TOKEN 0x1122334455667788ull

struct cap_pkt {
	struct tally_addr to;
	struct tally_pkt pkt;
	size_t len;
	uint8_t buf[TALLY_HDR_MAX + TALLY_MAX_PAYLOAD];
};

struct cap {
	struct cap_pkt *q;
	size_t n, cap;
	uint64_t now;
	int fail_send;      /* send returns -ENOBUFS */
	int keep_held;      /* capture HELD acknowledgements too (else only counted) */
	size_t held;        /* HELDs sent */
	struct tally_hdr last_held;
};

static inline int cap_send(void *ctx, const struct tally_addr *to, const uint8_t *hdr,
		    const void *payload, size_t len)
{
	struct cap *c = ctx;
	if (c->fail_send)
		return -105;
	if (c->n == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 64;
		c->q = realloc(c->q, c->cap * sizeof(*c->q));
		assert_non_null(c->q);
	}
	struct cap_pkt *p = &c->q[c->n];
	p->to = *to;
	size_t hl = tally_proto_hdr_len(hdr); /* a signed header carries its auth block */
	memcpy(p->buf, hdr, hl);
	assert_true(len <= TALLY_MAX_PAYLOAD);
	if (len)
		memcpy(p->buf + hl, payload, len);
	p->len = hl + len;
	/* Everything the engine sends must decode (CRC included). */
	enum tally_reason r = tally_proto_decode(p->buf, p->len, &p->pkt);
	if (r != TALLY_OK)
		fail_msg("engine sent an undecodable packet: %s", tally_reason_name(r));
	p->pkt.payload = p->buf + hl;
	/* HELD acknowledgements are counted apart, so the tests of what else the engine
	 * sends see the same packets as before them */
	if (p->pkt.hdr.op == TALLY_OP_HELD) {
		c->held++;
		c->last_held = p->pkt.hdr;
		if (!c->keep_held)
			return 0;
	}
	c->n++;
	return 0;
}

static inline uint64_t cap_now(void *ctx)
{
	return ((struct cap *)ctx)->now;
}

static const struct tally_xport_ops cap_ops = {
	.send = cap_send,
	.now_ns = cap_now,
};

static inline struct tally_addr h_addr(uint32_t rank)
{
	struct tally_addr a;
	memset(&a, 0, sizeof(a));
	a.ip = 0x0a000001u + rank;
	a.port = (uint16_t)(9000 + rank);
	a.cookie = 100 + rank;
	return a;
}

struct h {
	struct tally_engine *e;
	struct cap cap;
	struct tally_engine_cfg cfg;
};

static inline void h_init_cfg(struct tally_engine_cfg *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->ncores = 2;
	cfg->base_port = 9170;
	cfg->mem_budget = 64u << 20;
	cfg->det_pool_bytes = 64u * 8192;
	tally_engine_cfg_defaults(cfg);
}

static inline void h_start(struct h *h, const struct tally_engine_cfg *cfg)
{
	memset(h, 0, sizeof(*h));
	if (cfg)
		h->cfg = *cfg;
	else
		h_init_cfg(&h->cfg);
	h->cap.now = 1000000000ull;
	int err = 0;
	h->e = tally_engine_create(&h->cfg, &cap_ops, &h->cap, &err);
	assert_non_null(h->e);
}

static inline void h_stop(struct h *h)
{
	tally_engine_destroy(h->e);
	free(h->cap.q);
	memset(h, 0, sizeof(*h));
}

static inline void h_clear(struct h *h)
{
	h->cap.n = 0;
}

/* Build and feed one packet. */
static inline enum tally_reason h_rx_hdr(struct h *h, struct tally_hdr *hd, const void *pl,
				  size_t plen, const struct tally_addr *from)
{
	static uint8_t buf[TALLY_HDR_LEN + TALLY_MAX_PAYLOAD];
	if (plen)
		memcpy(buf + TALLY_HDR_LEN, pl, plen);
	tally_proto_finish(buf, hd, buf + TALLY_HDR_LEN, plen);
	return tally_engine_rx(h->e, buf, TALLY_HDR_LEN + plen, from);
}

static inline struct tally_hdr h_hdr(uint8_t op, uint32_t rank)
{
	struct tally_hdr hd;
	memset(&hd, 0, sizeof(hd));
	hd.op = op;
	hd.job_id = H_JOB;
	hd.token = H_TOKEN;
	hd.rank = rank;
	return hd;
}

static inline enum tally_reason h_join(struct h *h, uint32_t rank, uint32_t world)
{
	struct tally_hdr hd = h_hdr(TALLY_OP_JOIN, rank);
	struct tally_join j = { .world_size = world, .max_chunk_bytes = 8192 };
	uint8_t pl[TALLY_JOIN_LEN];
	tally_proto_put_join(pl, &j);
	struct tally_addr a = h_addr(rank);
	return h_rx_hdr(h, &hd, pl, sizeof(pl), &a);
}

static inline struct tally_register h_reg(uint32_t nelems, uint32_t chunk, uint8_t dtype,
				   uint16_t participants, uint16_t quorum)
{
	struct tally_register r;
	memset(&r, 0, sizeof(r));
	r.nelems = nelems;
	r.chunk_elems = chunk;
	r.dtype = dtype;
	r.participants = participants;
	r.quorum = quorum;
	return r;
}

static inline enum tally_reason h_register(struct h *h, uint32_t rank, uint32_t key,
				    const struct tally_register *r)
{
	struct tally_hdr hd = h_hdr(TALLY_OP_REGISTER, rank);
	hd.key = key;
	uint8_t pl[TALLY_REGISTER_LEN];
	tally_proto_put_register(pl, r);
	struct tally_addr a = h_addr(rank);
	return h_rx_hdr(h, &hd, pl, sizeof(pl), &a);
}

static inline enum tally_reason h_push(struct h *h, uint32_t rank, uint32_t key, uint32_t round,
				uint32_t offset, uint8_t dtype, const void *pl, uint32_t count)
{
	struct tally_hdr hd = h_hdr(TALLY_OP_PUSH, rank);
	hd.key = key;
	hd.round = round;
	hd.offset = offset;
	hd.count = count;
	hd.dtype = dtype;
	struct tally_addr a = h_addr(rank);
	return h_rx_hdr(h, &hd, pl, (size_t)count * tally_dtype_size(dtype), &a);
}

static inline enum tally_reason h_pull(struct h *h, uint32_t rank, uint32_t key, uint32_t round,
				uint32_t offset)
{
	struct tally_hdr hd = h_hdr(TALLY_OP_PULL, rank);
	hd.key = key;
	hd.round = round;
	hd.offset = offset;
	struct tally_addr a = h_addr(rank);
	return h_rx_hdr(h, &hd, NULL, 0, &a);
}

/* A PULL as the client probes: flags (TALLY_F_DONE) and its round-trip estimate in us. */
static inline enum tally_reason h_probe(struct h *h, uint32_t rank, uint32_t key,
					uint32_t round, uint32_t offset, uint16_t flags,
					uint32_t rtt_us)
{
	struct tally_hdr hd = h_hdr(TALLY_OP_PULL, rank);
	hd.key = key;
	hd.round = round;
	hd.offset = offset;
	hd.flags = flags;
	hd.aux = rtt_us;
	struct tally_addr a = h_addr(rank);
	return h_rx_hdr(h, &hd, NULL, 0, &a);
}

static inline enum tally_reason h_bye(struct h *h, uint32_t rank)
{
	struct tally_hdr hd = h_hdr(TALLY_OP_BYE, rank);
	struct tally_addr a = h_addr(rank);
	return h_rx_hdr(h, &hd, NULL, 0, &a);
}

/* Job of `world` ranks, all joined, one key registered by every rank. */
static inline void h_setup(struct h *h, uint32_t world, uint32_t key, const struct tally_register *r)
{
	assert_int_equal(tally_engine_job_add(h->e, H_JOB, H_TOKEN, world), 0);
	for (uint32_t w = 0; w < world; w++)
		assert_int_equal(h_join(h, w, world), TALLY_OK);
	if (r)
		for (uint32_t w = 0; w < world; w++)
			assert_int_equal(h_register(h, w, key, r), TALLY_OK);
	h_clear(h);
}

/* Two cores of one appliance (core_index 0 and 1) sharing `live` (NULL: per-core liveness),
 * each with h_setup's job of `world` ranks and key `key` (registered with r). */
static inline void h_setup_cores(struct h *h0, struct h *h1, struct tally_engine_live *live,
				 uint32_t world, uint32_t key, const struct tally_register *r)
{
	struct tally_engine_cfg cfg;
	h_init_cfg(&cfg);
	cfg.live = live;
	h_start(h0, &cfg);
	cfg.core_index = 1;
	h_start(h1, &cfg);
	h_setup(h0, world, key, r);
	h_setup(h1, world, key, r);
}

/* Captured packets of an op (and, for RESULT, of a key/round/offset; ~0 = any). */
static inline size_t h_count(const struct h *h, uint8_t op, uint32_t key, uint32_t round,
		      uint32_t offset)
{
	size_t n = 0;
	for (size_t i = 0; i < h->cap.n; i++) {
		const struct tally_hdr *hd = &h->cap.q[i].pkt.hdr;
		if (hd->op != op)
			continue;
		if (key != ~0u && hd->key != key)
			continue;
		if (round != ~0u && hd->round != round)
			continue;
		if (offset != ~0u && hd->offset != offset)
			continue;
		n++;
	}
	return n;
}

/* The RESULT to `rank` for key/round/offset, the last one captured; NULL if none. */
static inline const struct cap_pkt *h_result(const struct h *h, uint32_t rank, uint32_t key,
				      uint32_t round, uint32_t offset)
{
	for (size_t i = h->cap.n; i-- > 0;) {
		const struct tally_hdr *hd = &h->cap.q[i].pkt.hdr;
		if (hd->op == TALLY_OP_RESULT && hd->rank == rank && hd->key == key &&
		    hd->round == round && hd->offset == offset)
			return &h->cap.q[i];
	}
	return NULL;
}

/* ---- state digest: everything observable except rx/drop counters ---- */

struct digest {
	uint64_t h;
};

static inline void dg_mix(struct digest *d, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++) {
		d->h ^= b[i];
		d->h *= 0x100000001b3ull;
	}
}

static inline int dg_job(void *arg, const struct tally_engine_job_info *ji)
{
	dg_mix(arg, ji, sizeof(*ji));
	return 0;
}

static inline int dg_worker(void *arg, const struct tally_engine_worker_info *wi)
{
	dg_mix(arg, wi, sizeof(*wi));
	return 0;
}

static inline int dg_key(void *arg, const struct tally_engine_key_info *ki)
{
	dg_mix(arg, ki, sizeof(*ki));
	return 0;
}

static inline int dg_stuck(void *arg, const struct tally_engine_stuck_info *si)
{
	uint64_t f[] = { si->job_id, si->key, si->round, si->offset, si->count, si->age_ns,
			 si->contrib, si->participants, si->missing_words };
	dg_mix(arg, f, sizeof(f));
	dg_mix(arg, si->missing, si->missing_words * sizeof(uint64_t));
	return 0;
}

static inline uint64_t h_digest(const struct h *h)
{
	struct digest d = { 0xcbf29ce484222325ull };
	struct tally_engine_stats st = *tally_engine_stats(h->e);
	st.rx_pkts = st.rx_bytes = 0;
	st.tx_pkts = st.tx_bytes = st.tx_errors = 0; /* sends are checked on their own */
	memset(st.drops, 0, sizeof(st.drops));
	st.result_busy = 0; /* counts a refusal, like drops */
	st.drain_errors = 0; /* counts a refusal's ERROR, like drops */
	st.stale_errors = 0; /* the same, for STALE_ROUND */
	st.held_sent = st.missing = 0; /* a MISSING answers a refused PULL, like an ERROR */
	/* MACs checked and made, per packet like rx_pkts (a refused packet may have a good tag) */
	st.auth_verified = st.auth_signed = st.conn_auth_rx = st.conn_auth_tx = 0;
	dg_mix(&d, &st, sizeof(st));
	size_t mem = tally_engine_mem_used(h->e);
	dg_mix(&d, &mem, sizeof(mem));
	uint64_t o[2] = { tally_engine_open_rounds(h->e), tally_engine_open_chunks(h->e) };
	dg_mix(&d, o, sizeof(o));
	tally_engine_walk_jobs(h->e, dg_job, &d);
	tally_engine_walk_workers(h->e, dg_worker, &d);
	tally_engine_walk_keys(h->e, dg_key, &d);
	tally_engine_walk_stuck(h->e, 0, dg_stuck, &d);
	return d.h;
}

static inline uint64_t h_drops(const struct h *h, enum tally_reason r)
{
	return tally_engine_stats(h->e)->drops[r];
}

/* Expect a rejection: the reason returned, counted once, nothing else changed, and
 * (for data ops) nothing sent. */
#define H_EXPECT_REJECT(h, call, why_, sends_error)                                  \
	do {                                                                           \
		uint64_t d0_ = h_digest(h);                                            \
		uint64_t c0_ = h_drops(h, why_);                                     \
		size_t n0_ = (h)->cap.n;                                               \
		enum tally_reason r_ = (call);                                         \
		if (r_ != (why_))                                                    \
			fail_msg("%s: got %s, want %s", #call, tally_reason_name(r_),  \
				 tally_reason_name(why_));                           \
		assert_int_equal(h_drops(h, why_), c0_ + 1);                         \
		assert_true(h_digest(h) == d0_);                                       \
		if (sends_error) {                                                     \
			assert_int_equal((h)->cap.n, n0_ + 1);                         \
			assert_int_equal((h)->cap.q[n0_].pkt.hdr.op, TALLY_OP_ERROR);  \
			assert_int_equal((h)->cap.q[n0_].pkt.hdr.reason, why_);      \
		} else {                                                               \
			assert_int_equal((h)->cap.n, n0_);                             \
		}                                                                      \
	} while (0)

static inline uint64_t h_rng(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

#endif
