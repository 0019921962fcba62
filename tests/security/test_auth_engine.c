/* SPDX-License-Identifier: Apache-2.0
 * test_auth_engine.c — the engine's side of authenticated packets (tally_engine_job_key):
 * a bad tag is dropped and counted and changes nothing, an unsigned packet to a keyed job
 * is refused (JOIN: answered auth_required), a signed one to a job without a key too,
 * recorded JOINs and BYEs replayed are refused, a replayed PUSH is never summed twice, and
 * everything the engine sends a keyed job is signed per destination.
 */
#include <errno.h>

#include "harness.h"
#include "tally_auth.h"

static const uint8_t KEY[32] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
				 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32 };

struct ah {
	struct h h;
	struct tally_auth *w;    /* the workers' context (same key) */
	uint8_t buf[TALLY_HDR_MAX + TALLY_MAX_PAYLOAD];
	size_t len;
	int conn;                /* feed from rank's connection authenticated at setup */
	uint32_t conn_rank;      /* ... whose proven identity is (conn_job, conn_rank) */
	uint32_t conn_job;
	uint64_t run;            /* the job's run nonce (tally_engine_job_run) */
	uint64_t jn[8];          /* each rank's bound JOIN nonce: the session's other half */
};

#define A_RUN 0x52554e0000000001ull

/* The session a packet's tag covers (tally_auth.h; engine_sess_rx/tx): JOIN, PING and the
 * answers to them (nonce echoed in offset|count): (0, nonce); JOIN_OK (run, its nonce);
 * else (run, the rank's bound JOIN nonce). */
static void a_sess(const struct ah *a, const struct tally_hdr *h, uint8_t *sess)
{
	uint64_t echo = (uint64_t)h->count << 32 | h->offset;

	if (h->op == TALLY_OP_JOIN || (h->op == TALLY_OP_PING && !(h->flags & TALLY_F_ACK)))
		tally_auth_sess(sess, 0, h->reserved);
	else if (h->op == TALLY_OP_PING || tally_proto_join_ping_error(h))
		tally_auth_sess(sess, 0, echo);
	else if (h->op == TALLY_OP_JOIN_OK)
		tally_auth_sess(sess, a->run, h->reserved);
	else
		tally_auth_sess(sess, a->run, a->jn[h->rank]);
}

static int a_verify(struct ah *a, const uint8_t *buf, const struct tally_pkt *p)
{
	uint8_t sess[TALLY_AUTH_SESS_LEN];

	a_sess(a, &p->hdr, sess);
	return tally_auth_verify_s(a->w, buf, sess, p);
}

/* Build (and keep in a->buf) a signed packet; sign = 0: the unsigned v1 format. */
static void a_build(struct ah *a, struct tally_hdr *hd, const void *pl, size_t plen, int sign)
{
	if (!sign) {
		if (plen) /* memcpy's source must not be NULL, even for 0 bytes (UBSan) */
			memcpy(a->buf + TALLY_HDR_LEN, pl, plen);
		tally_proto_finish(a->buf, hd, a->buf + TALLY_HDR_LEN, plen);
		a->len = TALLY_HDR_LEN + plen;
		return;
	}
	hd->flags |= TALLY_F_AUTH;
	hd->crc = 0;
	hd->payload_len = (uint32_t)plen;
	tally_proto_encode_hdr(a->buf, hd);
	if (plen)
		memcpy(a->buf + TALLY_HDR_AUTH, pl, plen);
	uint8_t sess[TALLY_AUTH_SESS_LEN];
	a_sess(a, hd, sess);
	assert_int_equal(tally_auth_sign_s(a->w, a->buf, sess, a->buf + TALLY_HDR_AUTH, plen), 0);
	a->len = TALLY_HDR_AUTH + plen;
}

/* A verbs connection authenticated at setup as (job, rank) (tally_xport.h conn_authed). */
static struct tally_addr a_conn_addr(uint32_t job, uint32_t rank)
{
	struct tally_addr at = h_addr(rank);
	at.cookie = 0x5645000000000000ull | rank;
	at.conn_authed = 1;
	at.conn_job = job;
	at.conn_rank = rank;
	return at;
}

static enum tally_reason a_feed(struct ah *a, uint32_t from_rank)
{
	struct tally_addr at = h_addr(from_rank);
	if (a->conn)
		at = a_conn_addr(a->conn_job, a->conn_rank);
	return tally_engine_rx(a->h.e, a->buf, a->len, &at);
}

static enum tally_reason a_join(struct ah *a, uint32_t rank, uint64_t nonce, int sign)
{
	struct tally_hdr hd = h_hdr(TALLY_OP_JOIN, rank);
	struct tally_join j = { .world_size = 2, .max_chunk_bytes = 8192 };
	uint8_t pl[TALLY_JOIN_LEN];
	tally_proto_put_join(pl, &j);
	hd.reserved = nonce;
	a_build(a, &hd, pl, sizeof(pl), sign);
	enum tally_reason r = a_feed(a, rank);
	if (r == TALLY_OK)
		a->jn[rank] = nonce;
	return r;
}

static enum tally_reason a_bye(struct ah *a, uint32_t rank, uint64_t nonce)
{
	struct tally_hdr hd = h_hdr(TALLY_OP_BYE, rank);
	hd.reserved = nonce;
	a_build(a, &hd, NULL, 0, 1);
	return a_feed(a, rank);
}

static enum tally_reason a_push(struct ah *a, uint32_t rank, uint32_t round, const float *v,
				uint32_t n, int sign)
{
	struct tally_hdr hd = h_hdr(TALLY_OP_PUSH, rank);
	hd.key = 1;
	hd.round = round;
	hd.count = n;
	hd.dtype = TALLY_DT_F32;
	a_build(a, &hd, v, n * 4, sign);
	return a_feed(a, rank);
}

static int a_setup(void **state)
{
	struct ah *a = calloc(1, sizeof(*a));
	assert_non_null(a);
	h_start(&a->h, NULL);
	a->w = tally_auth_new();
	assert_int_equal(tally_auth_set_key(a->w, KEY), 0);
	assert_int_equal(tally_engine_job_add(a->h.e, H_JOB, H_TOKEN, 2), 0);
	assert_int_equal(tally_engine_job_key(a->h.e, H_JOB, KEY), 0);
	assert_int_equal(tally_engine_job_run(a->h.e, H_JOB, A_RUN), 0);
	a->run = A_RUN;
	*state = a;
	return 0;
}

static int a_teardown(void **state)
{
	struct ah *a = *state;
	tally_auth_free(a->w);
	h_stop(&a->h);
	free(a);
	return 0;
}

/* Every captured packet from n0 on is signed and verifies with the job's key. */
static void a_all_signed(struct ah *a, size_t n0)
{
	for (size_t i = n0; i < a->h.cap.n; i++) {
		struct cap_pkt *c = &a->h.cap.q[i];
		struct tally_pkt p;
		assert_int_equal(tally_proto_decode(c->buf, c->len, &p), TALLY_OK);
		assert_non_null(p.auth);
		assert_int_equal(a_verify(a, c->buf, &p), 0);
	}
}

/* Both ranks joined and key 1 (8 f32, one chunk, 2 participants) registered. */
static void a_ready(struct ah *a)
{
	struct tally_register r = h_reg(8, 8, TALLY_DT_F32, 2, 2);
	uint8_t pl[TALLY_REGISTER_LEN];
	tally_proto_put_register(pl, &r);
	for (uint32_t w = 0; w < 2; w++) {
		assert_int_equal(a_join(a, w, 1000 + w, 1), TALLY_OK);
		struct tally_hdr hd = h_hdr(TALLY_OP_REGISTER, w);
		hd.key = 1;
		a_build(a, &hd, pl, sizeof(pl), 1);
		assert_int_equal(a_feed(a, w), TALLY_OK);
	}
}

static void test_join_signed(void **state)
{
	struct ah *a = *state;
	assert_int_equal(a_join(a, 0, 77, 1), TALLY_OK);
	assert_int_equal(a->h.cap.n, 1);
	const struct tally_hdr *ok = &a->h.cap.q[0].pkt.hdr;
	assert_int_equal(ok->op, TALLY_OP_JOIN_OK);
	assert_true(ok->flags & TALLY_F_AUTH);
	assert_int_equal(ok->reserved, 77); /* the JOIN's nonce echoed */
	a_all_signed(a, 0);
	/* the same JOIN re-sent from the same address (JOIN_OK lost): answered again */
	assert_int_equal(a_feed(a, 0), TALLY_OK);
	assert_int_equal(a->h.cap.n, 2);
	assert_int_equal(tally_engine_job_key(a->h.e, H_JOB, KEY), 0);
	uint8_t other[32] = { 9 };
	assert_int_equal(tally_engine_job_key(a->h.e, H_JOB, other), -EEXIST);
	assert_int_equal(tally_engine_job_key(a->h.e, H_JOB + 1, KEY), -ENOENT);
	assert_int_equal(tally_engine_job_keyed(a->h.e, H_JOB), 1);
}

static void test_bad_tag(void **state)
{
	struct ah *a = *state;
	float v[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	a_ready(a);
	h_clear(&a->h);
	/* a payload bit flipped after signing */
	a_push(a, 0, 0, v, 8, 1);
	a->buf[a->len - 1] ^= 1;
	H_EXPECT_REJECT(&a->h, a_feed(a, 0), TALLY_R_BAD_MAC, 0);
	/* a header field changed (round) after signing */
	a_push(a, 0, 0, v, 8, 1);
	a->buf[28] ^= 1; /* round */
	H_EXPECT_REJECT(&a->h, a_feed(a, 0), TALLY_R_BAD_MAC, 0);
	/* the tag itself */
	a_push(a, 0, 0, v, 8, 1);
	a->buf[TALLY_HDR_LEN + TALLY_AUTH_IV_LEN] ^= 0x80;
	H_EXPECT_REJECT(&a->h, a_feed(a, 0), TALLY_R_BAD_MAC, 0);
	/* a BYE with a bad tag does not unbind */
	struct tally_hdr hd = h_hdr(TALLY_OP_BYE, 1);
	hd.reserved = 1001;
	a_build(a, &hd, NULL, 0, 1);
	a->buf[TALLY_HDR_LEN] ^= 1; /* the IV */
	H_EXPECT_REJECT(&a->h, a_feed(a, 1), TALLY_R_BAD_MAC, 0);
	/* a JOIN signed with another key: refused with an unsigned ERROR bad_mac */
	uint8_t k2[32] = { 7 };
	struct tally_auth *w = a->w;
	a->w = tally_auth_new();
	assert_int_equal(tally_auth_set_key(a->w, k2), 0);
	H_EXPECT_REJECT(&a->h, a_join(a, 1, 5000, 1), TALLY_R_BAD_MAC, 1);
	assert_false(a->h.cap.q[a->h.cap.n - 1].pkt.hdr.flags & TALLY_F_AUTH);
	tally_auth_free(a->w);
	a->w = w;
	/* the genuine pushes still sum */
	assert_int_equal(a_push(a, 0, 0, v, 8, 1), TALLY_OK);
	assert_int_equal(a_push(a, 1, 0, v, 8, 1), TALLY_OK);
	const struct cap_pkt *res = h_result(&a->h, 0, 1, 0, 0);
	assert_non_null(res);
	float got[8];
	memcpy(got, res->buf + TALLY_HDR_MAX, sizeof(got));
	for (int i = 0; i < 8; i++)
		assert_true(got[i] == 2 * v[i]);
}

static void test_unsigned_refused(void **state)
{
	struct ah *a = *state;
	float v[8] = { 1 };
	/* unsigned JOIN: refused, answered auth_required (unsigned: the worker has no key) */
	H_EXPECT_REJECT(&a->h, a_join(a, 0, 1, 0), TALLY_R_AUTH_REQUIRED, 1);
	assert_false(a->h.cap.q[a->h.cap.n - 1].pkt.hdr.flags & TALLY_F_AUTH);
	a_ready(a);
	h_clear(&a->h);
	/* unsigned push, PULL, BYE from a bound rank's address: dropped, nothing changed */
	H_EXPECT_REJECT(&a->h, a_push(a, 0, 0, v, 8, 0), TALLY_R_AUTH_REQUIRED, 0);
	H_EXPECT_REJECT(&a->h, h_pull(&a->h, 0, 1, 0, 0), TALLY_R_AUTH_REQUIRED, 0);
	H_EXPECT_REJECT(&a->h, h_bye(&a->h, 1), TALLY_R_AUTH_REQUIRED, 0);
	/* a signed packet for a job admitted without a key */
	assert_int_equal(tally_engine_job_add(a->h.e, H_JOB + 1, H_TOKEN, 2), 0);
	struct tally_hdr hd = h_hdr(TALLY_OP_JOIN, 0);
	struct tally_join j = { .world_size = 2 };
	uint8_t pl[TALLY_JOIN_LEN];
	tally_proto_put_join(pl, &j);
	hd.job_id = H_JOB + 1;
	a_build(a, &hd, pl, sizeof(pl), 1);
	H_EXPECT_REJECT(&a->h, a_feed(a, 0), TALLY_R_NO_KEY, 1);
}

static void test_replay_join_bye(void **state)
{
	struct ah *a = *state;
	a_ready(a); /* rank 0 bound by JOIN nonce 1000 */
	uint8_t rec_join[TALLY_HDR_MAX + TALLY_JOIN_LEN];
	assert_int_equal(a_join(a, 0, 1000, 1), TALLY_OK); /* its re-send: answered */
	memcpy(rec_join, a->buf, a->len);
	size_t rec_join_len = a->len;
	/* an older nonce, even correctly signed (a JOIN recorded earlier), is refused */
	H_EXPECT_REJECT(&a->h, a_join(a, 0, 999, 1), TALLY_R_REPLAY, 1);
	/* the recorded JOIN replayed from the bound IP and port but another source MAC (it
	 * would redirect rank 0's RESULTs): refused */
	struct tally_addr spoof = h_addr(0);
	spoof.mac[5] = 0x66;
	H_EXPECT_REJECT(&a->h, tally_engine_rx(a->h.e, rec_join, rec_join_len, &spoof),
			TALLY_R_REPLAY, 1);
	/* the recorded JOIN replayed from another address: refused */
	memcpy(a->buf, rec_join, rec_join_len);
	a->len = rec_join_len;
	H_EXPECT_REJECT(&a->h, a_feed(a, 5), TALLY_R_REPLAY, 1);
	/* BYE must repeat the bound JOIN's nonce */
	H_EXPECT_REJECT(&a->h, a_bye(a, 0, 999), TALLY_R_REPLAY, 0);
	/* a signed REGISTER (recorded) does not bind a keyed job's rank from elsewhere */
	struct tally_register rg = h_reg(8, 8, TALLY_DT_F32, 2, 2);
	uint8_t rpl[TALLY_REGISTER_LEN];
	tally_proto_put_register(rpl, &rg);
	struct tally_hdr rh = h_hdr(TALLY_OP_REGISTER, 0);
	rh.key = 1;
	a_build(a, &rh, rpl, sizeof(rpl), 1);
	H_EXPECT_REJECT(&a->h, a_feed(a, 6), TALLY_R_NOT_JOINED, 1);
	assert_int_equal(a_bye(a, 0, 1000), TALLY_OK);
	uint8_t rec_bye[TALLY_HDR_AUTH];
	memcpy(rec_bye, a->buf, TALLY_HDR_AUTH);
	/* nor, now that rank 0 left, from its old address */
	a_build(a, &rh, rpl, sizeof(rpl), 1);
	H_EXPECT_REJECT(&a->h, a_feed(a, 0), TALLY_R_NOT_JOINED, 1);
	/* after the BYE, the recorded JOIN replayed from the old address is refused too */
	memcpy(a->buf, rec_join, rec_join_len);
	a->len = rec_join_len;
	H_EXPECT_REJECT(&a->h, a_feed(a, 0), TALLY_R_REPLAY, 1);
	/* the worker joins again (newer nonce); the recorded BYE does not unbind it: its tag
	 * covers the old session (nonce 1000), so it fails the tag */
	assert_int_equal(a_join(a, 0, 2000, 1), TALLY_OK);
	memcpy(a->buf, rec_bye, TALLY_HDR_AUTH);
	a->len = TALLY_HDR_AUTH;
	H_EXPECT_REJECT(&a->h, a_feed(a, 0), TALLY_R_BAD_MAC, 0);
	assert_int_equal(tally_engine_stats(a->h.e)->byes, 1);
}

static void test_replay_push_and_results(void **state)
{
	struct ah *a = *state;
	float v[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	a_ready(a);
	h_clear(&a->h);
	assert_int_equal(a_push(a, 0, 0, v, 8, 1), TALLY_OK);
	/* the same signed push replayed: a duplicate, never summed twice */
	uint64_t pushes = tally_engine_stats(a->h.e)->pushes;
	assert_int_equal(a_feed(a, 0), TALLY_OK);
	assert_int_equal(tally_engine_stats(a->h.e)->pushes, pushes);
	assert_int_equal(tally_engine_stats(a->h.e)->duplicates, 1);
	assert_int_equal(a_push(a, 1, 0, v, 8, 1), TALLY_OK);
	/* RESULTs: one per destination, each with its own outer IV and tag over one shared
	 * payload tag (the chunk's payload MACed once, tally_auth.h) */
	assert_int_equal(h_count(&a->h, TALLY_OP_RESULT, 1, 0, 0), 2);
	a_all_signed(a, 0);
	const struct cap_pkt *r0 = h_result(&a->h, 0, 1, 0, 0), *r1 = h_result(&a->h, 1, 1, 0, 0);
	assert_memory_not_equal(r0->buf + TALLY_HDR_AUTH, r1->buf + TALLY_HDR_AUTH,
				TALLY_AUTH_IV_LEN);
	assert_memory_equal(r0->buf + TALLY_HDR_LEN, r1->buf + TALLY_HDR_LEN, TALLY_AUTH_LEN);
	/* rank 1's copy re-addressed to rank 0: its outer tag covers the rank */
	struct cap_pkt *r1c = (struct cap_pkt *)r1;
	struct tally_pkt p;
	r1c->buf[12] ^= 1;
	assert_int_equal(tally_proto_decode(r1c->buf, r1c->len, &p), TALLY_OK);
	assert_int_not_equal(a_verify(a, r1c->buf, &p), 0);
	r1c->buf[12] ^= 1;
	/* round 0's push replayed once round 2 runs: stale, not summed */
	assert_int_equal(a_push(a, 0, 1, v, 8, 1), TALLY_OK);
	assert_int_equal(a_push(a, 1, 1, v, 8, 1), TALLY_OK);
	assert_int_equal(a_push(a, 0, 2, v, 8, 1), TALLY_OK);
	assert_int_equal(a_push(a, 1, 2, v, 8, 1), TALLY_OK);
	H_EXPECT_REJECT(&a->h, a_push(a, 0, 0, v, 8, 1), TALLY_R_STALE_ROUND, 1);
}

/* Connections authenticated at setup (verbs): unsigned packets are the connection's
 * identity's only; what the engine sends them is unsigned; a per-packet rank beside them
 * keeps its MACs; the payload MAC is skipped when no recipient needs it. */
static void conn_ready(struct ah *a, int rank1_conn)
{
	struct tally_register r = h_reg(8, 8, TALLY_DT_F32, 2, 2);
	uint8_t pl[TALLY_REGISTER_LEN];
	tally_proto_put_register(pl, &r);
	for (uint32_t w = 0; w < 2; w++) {
		int c = w == 0 || rank1_conn;
		a->conn = c;
		a->conn_job = H_JOB;
		a->conn_rank = w;
		assert_int_equal(a_join(a, w, 1000 + w, !c), TALLY_OK);
		const struct tally_hdr *ok = &a->h.cap.q[a->h.cap.n - 1].pkt.hdr;
		assert_int_equal(ok->op, TALLY_OP_JOIN_OK);
		assert_int_equal(!!(ok->flags & TALLY_F_AUTH), !c); /* unsigned on the conn */
		struct tally_hdr hd = h_hdr(TALLY_OP_REGISTER, w);
		hd.key = 1;
		a_build(a, &hd, pl, sizeof(pl), !c);
		assert_int_equal(a_feed(a, w), TALLY_OK);
	}
}

static void test_conn_authed(void **state)
{
	struct ah *a = *state;
	float v[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	conn_ready(a, 1);
	h_clear(&a->h);
	const struct tally_engine_stats *st = tally_engine_stats(a->h.e);
	uint64_t rx0 = st->conn_auth_rx;
	/* rank 0's connection claiming rank 1, or another job: refused, counted, unanswered */
	a->conn = 1, a->conn_rank = 0;
	struct tally_hdr hd = h_hdr(TALLY_OP_PUSH, 1);
	hd.key = 1, hd.count = 8, hd.dtype = TALLY_DT_F32;
	a_build(a, &hd, v, sizeof(v), 0);
	H_EXPECT_REJECT(&a->h, a_feed(a, 0), TALLY_R_CONN_IDENTITY, 0);
	a_build(a, &hd, v, sizeof(v), 1); /* even signed with the key: not this QP's rank */
	H_EXPECT_REJECT(&a->h, a_feed(a, 0), TALLY_R_CONN_IDENTITY, 0);
	a->conn_job = H_JOB + 7;
	H_EXPECT_REJECT(&a->h, a_push(a, 0, 0, v, 8, 0), TALLY_R_CONN_IDENTITY, 0);
	a->conn_job = H_JOB;
	/* the same unsigned push from an address without setup authentication */
	a->conn = 0;
	H_EXPECT_REJECT(&a->h, a_push(a, 0, 0, v, 8, 0), TALLY_R_AUTH_REQUIRED, 0);
	assert_int_equal(st->pushes, 0);
	/* the genuine unsigned pushes sum; RESULTs go out unsigned, no MAC computed */
	uint64_t signed0 = st->auth_signed;
	a->conn = 1, a->conn_rank = 0;
	assert_int_equal(a_push(a, 0, 0, v, 8, 0), TALLY_OK);
	a->conn_rank = 1;
	assert_int_equal(a_push(a, 1, 0, v, 8, 0), TALLY_OK);
	assert_int_equal(st->conn_auth_rx - rx0, 2);
	assert_int_equal(h_count(&a->h, TALLY_OP_RESULT, 1, 0, 0), 2);
	for (uint32_t w = 0; w < 2; w++) {
		const struct cap_pkt *res = h_result(&a->h, w, 1, 0, 0);
		assert_non_null(res);
		assert_false(res->pkt.hdr.flags & TALLY_F_AUTH);
		float got[8];
		memcpy(got, res->buf + TALLY_HDR_LEN, sizeof(got));
		for (int i = 0; i < 8; i++)
			assert_true(got[i] == 2 * v[i]);
	}
	assert_int_equal(st->auth_signed, signed0);
	assert_int_equal(st->auth_verified, 0);
	assert_true(st->conn_auth_tx >= 2);
	assert_int_equal(st->drops[TALLY_R_CONN_IDENTITY], 3);
}

static void test_conn_mixed(void **state)
{
	struct ah *a = *state;
	float v[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	conn_ready(a, 0); /* rank 0 on an authenticated connection, rank 1 per packet */
	h_clear(&a->h);
	a->conn = 1, a->conn_rank = 0;
	assert_int_equal(a_push(a, 0, 0, v, 8, 0), TALLY_OK);
	a->conn = 0;
	/* rank 1 without its MAC is still refused */
	H_EXPECT_REJECT(&a->h, a_push(a, 1, 0, v, 8, 0), TALLY_R_AUTH_REQUIRED, 0);
	assert_int_equal(a_push(a, 1, 0, v, 8, 1), TALLY_OK);
	const struct cap_pkt *r0 = h_result(&a->h, 0, 1, 0, 0), *r1 = h_result(&a->h, 1, 1, 0, 0);
	assert_non_null(r0);
	assert_non_null(r1);
	assert_false(r0->pkt.hdr.flags & TALLY_F_AUTH);
	assert_true(r1->pkt.hdr.flags & TALLY_F_AUTH);
	struct tally_pkt p;
	assert_int_equal(tally_proto_decode(r1->buf, r1->len, &p), TALLY_OK);
	assert_int_equal(a_verify(a, r1->buf, &p), 0);
	assert_int_equal(tally_engine_stats(a->h.e)->auth_verified, 1 + 2); /* push, JOIN, REG */
}

/* A keyed worker's PING (signed, TALLY_F_AUTH) passes the decoder and is answered with a
 * signed PING+ACK carrying the boot id; unsigned, it is refused (issue 33: every keyed PING
 * was dropped as bad_flags, so keyed workers never heard an answer). */
static void test_ping_signed(void **state)
{
	struct ah *a = *state;
	struct tally_hdr hd = h_hdr(TALLY_OP_PING, 0);
	const struct tally_engine_stats *st = tally_engine_stats(a->h.e);

	a_ready(a);
	hd.reserved = a->jn[0]; /* the session's nonce */
	size_t n0 = a->h.cap.n;
	a_build(a, &hd, NULL, 0, 1);
	assert_int_equal(tally_proto_decode(a->buf, a->len, NULL), TALLY_OK);
	assert_int_equal(a_feed(a, 0), TALLY_OK);
	assert_int_equal(st->pings, 1);
	assert_int_equal(st->drops[TALLY_R_BAD_FLAGS], 0);
	assert_int_equal(a->h.cap.n, n0 + 1);
	const struct tally_hdr *ans = &a->h.cap.q[n0].pkt.hdr;
	assert_int_equal(ans->op, TALLY_OP_PING);
	assert_int_equal(ans->flags, TALLY_F_ACK | TALLY_F_AUTH);
	assert_true(ans->reserved != 0); /* the boot id */
	a_all_signed(a, n0);
	/* a PING of another session (a recording of an earlier run): refused, not answered */
	hd = h_hdr(TALLY_OP_PING, 0);
	hd.reserved = a->jn[0] - 1;
	a_build(a, &hd, NULL, 0, 1);
	assert_int_equal(a_feed(a, 0), TALLY_R_REPLAY);
	assert_int_equal(a->h.cap.n, n0 + 1);
	/* the same PING unsigned: refused and counted, not answered */
	hd = h_hdr(TALLY_OP_PING, 0);
	a_build(a, &hd, NULL, 0, 0);
	assert_int_equal(a_feed(a, 0), TALLY_R_AUTH_REQUIRED);
	assert_int_equal(a->h.cap.n, n0 + 1);
	assert_int_equal(st->pings, 1);
}

/* Owner mode in a keyed job: rank 1 pushes with TALLY_F_NORESULT; its header-only RESULT is
 * signed (the two-level RESULT block over an empty payload) and verifies with the job's key,
 * and so does rank 0's RESULT with the sum; a PULL of rank 1 gets the header-only copy signed
 * too. */
static void test_noresult_signed(void **state)
{
	struct ah *a = *state;
	float v[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };

	a_ready(a);
	size_t n0 = a->h.cap.n;
	assert_int_equal(a_push(a, 0, 0, v, 8, 1), TALLY_OK);
	struct tally_hdr hd = h_hdr(TALLY_OP_PUSH, 1);
	hd.key = 1;
	hd.count = 8;
	hd.dtype = TALLY_DT_F32;
	hd.flags = TALLY_F_NORESULT;
	a_build(a, &hd, v, sizeof(v), 1);
	assert_int_equal(a_feed(a, 1), TALLY_OK);
	const struct cap_pkt *r0 = h_result(&a->h, 0, 1, 0, 0), *r1 = h_result(&a->h, 1, 1, 0, 0);
	assert_non_null(r0);
	assert_non_null(r1);
	assert_int_equal(r0->pkt.hdr.payload_len, sizeof(v));
	assert_true(r1->pkt.hdr.flags & TALLY_F_NORESULT);
	assert_int_equal(r1->pkt.hdr.payload_len, 0);
	assert_int_equal(r1->len, TALLY_HDR_MAX);
	a_all_signed(a, n0);
	n0 = a->h.cap.n;
	hd = h_hdr(TALLY_OP_PULL, 1);
	hd.key = 1;
	hd.dtype = TALLY_DT_F32;
	a_build(a, &hd, NULL, 0, 1);
	assert_int_equal(a_feed(a, 1), TALLY_OK);
	assert_int_equal(a->h.cap.n, n0 + 1);
	assert_true(a->h.cap.q[n0].pkt.hdr.flags & TALLY_F_NORESULT);
	a_all_signed(a, n0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_join_signed, a_setup, a_teardown),
		cmocka_unit_test_setup_teardown(test_bad_tag, a_setup, a_teardown),
		cmocka_unit_test_setup_teardown(test_unsigned_refused, a_setup, a_teardown),
		cmocka_unit_test_setup_teardown(test_replay_join_bye, a_setup, a_teardown),
		cmocka_unit_test_setup_teardown(test_replay_push_and_results, a_setup, a_teardown),
		cmocka_unit_test_setup_teardown(test_conn_authed, a_setup, a_teardown),
		cmocka_unit_test_setup_teardown(test_conn_mixed, a_setup, a_teardown),
		cmocka_unit_test_setup_teardown(test_ping_signed, a_setup, a_teardown),
		cmocka_unit_test_setup_teardown(test_noresult_signed, a_setup, a_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
