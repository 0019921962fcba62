/* SPDX-License-Identifier: Apache-2.0
 * engine_util.c — helpers every engine file uses: drops, sends (signed for a keyed job) and
 * ERROR replies, the create-time memory callback, job lookup. It calls no other file of the
 * library: every file may call it.
 */
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"

void *engine_mem_alloc(struct tally_engine *e, size_t size)
{
	size = (size + 63) & ~(size_t)63;
	if (size == 0)
		size = 64;
	if (e->cfg.alloc)
		return e->cfg.alloc(e->cfg.alloc_ctx, size, 64);
	return aligned_alloc(64, size);
}

void engine_mem_free(struct tally_engine *e, void *p)
{
	if (!p)
		return;
	if (e->cfg.free)
		e->cfg.free(e->cfg.alloc_ctx, p);
	else
		free(p);
}

enum tally_reason engine_drop(struct tally_engine *e, enum tally_reason r)
{
	e->st.drops[r]++;
	return r;
}

struct tally_auth *engine_job_auth(const struct tally_engine *e, const struct engine_job *job)
{
	struct tally_auth *a = e->auths[job - e->jobs];
	return tally_auth_has_key(a) ? a : NULL;
}

/* The session a packet to a keyed job's rank is signed under (engine_sess_rx says which). */
static void sess_tx(const struct tally_engine *e, const struct engine_job *job,
		    const struct tally_hdr *h, uint8_t *sess)
{
	uint64_t echo = (uint64_t)h->count << 32 | h->offset;

	if (h->op == TALLY_OP_JOIN_OK)
		tally_auth_sess(sess, job->run, h->reserved);
	else if (h->op == TALLY_OP_PING || tally_proto_join_ping_error(h))
		tally_auth_sess(sess, 0, echo);
	else
		tally_auth_sess(sess, job->run,
				e->join_nonce[(size_t)(job - e->jobs) * TALLY_MAX_WORKERS + h->rank]);
}

/* Every packet the engine sends goes through here: a keyed job's packets are signed per
 * destination (each RESULT copy has its own header, so its own outer IV and tag; the
 * payload's inner tag is shared by the chunk's copies when the caller computed it). */
static void send_pkt(struct tally_engine *e, const struct tally_addr *to,
		     const struct tally_hdr *h, const void *payload, size_t len, void *xbuf,
		     int sign, const uint8_t *inner)
{
	uint8_t hb[TALLY_HDR_MAX];
	struct engine_job *job = sign ? engine_job_find(e, h->job_id) : NULL;
	struct tally_auth *a = job ? engine_job_auth(e, job) : NULL;
	struct tally_hdr hs;
	int rc;

	if (h->op == TALLY_OP_RESULT || h->op == TALLY_OP_HELD) {
		/* the send stamp a PULL echoes (tally_proto.h, TALLY_F_DONE) */
		hs = *h;
		hs.reserved = TALLY_STAMP_VALID | ++e->tx_stamp;
		h = &hs;
	}
	tally_proto_encode_hdr(hb, h);
	if (a && to->conn_authed) {
		a = NULL; /* the connection was authenticated at setup: no per-packet MAC */
		e->st.conn_auth_tx++;
	}
	if (a) {
		uint8_t sess[TALLY_AUTH_SESS_LEN];

		sess_tx(e, job, h, sess);
		tally_auth_mark(hb);
		if ((inner && h->op == TALLY_OP_RESULT ? tally_auth_sign_result_s(a, hb, sess, inner) :
		     tally_auth_sign_s(a, hb, sess, len ? payload : NULL, len)) != 0) {
			e->st.tx_errors++;
			return;
		}
		e->st.auth_signed++;
	}
	if (xbuf && e->ops->send_buf)
		rc = e->ops->send_buf(e->xctx, to, hb, payload, len, xbuf);
	else
		rc = e->ops->send(e->xctx, to, hb, len ? payload : NULL, len);
	if (rc < 0) {
		e->st.tx_errors++;
		return;
	}
	e->st.tx_pkts++;
	e->st.tx_bytes += tally_proto_hdr_len(hb) + len;
}

void engine_send(struct tally_engine *e, const struct tally_addr *to, const struct tally_hdr *h,
	     const void *payload, size_t len)
{
	send_pkt(e, to, h, payload, len, NULL, 1, NULL);
}

void engine_send_result(struct tally_engine *e, const struct tally_addr *to,
			const struct tally_hdr *h, const void *payload, size_t len, void *xbuf,
			const uint8_t *inner)
{
	send_pkt(e, to, h, payload, len, xbuf, 1, inner);
}

int engine_result_inner(struct tally_engine *e, const struct engine_job *job,
			const void *payload, size_t len, uint8_t inner[TALLY_AUTH_LEN])
{
	struct tally_auth *a = engine_job_auth(e, job);

	return a && tally_auth_sign_payload(a, inner, payload, len) == 0;
}

static void error_hdr(const struct tally_engine *e, struct tally_hdr *h,
		      const struct tally_hdr *req, enum tally_reason r)
{
	memset(h, 0, sizeof(*h));
	h->reserved = e->cfg.boot_id; /* a worker learns from any ERROR whether we restarted */
	h->op = TALLY_OP_ERROR;
	h->reason = (uint8_t)r;
	h->aux = req->op;
	h->job_id = req->job_id;
	h->rank = req->rank;
	h->token = req->token;
	h->key = req->key;
	h->round = req->round;
	h->offset = req->offset;
	h->count = req->count;
	h->dtype = req->dtype;
	if (req->op == TALLY_OP_JOIN || req->op == TALLY_OP_PING) {
		/* their nonce echoed: a keyed answer is signed under (0, it) (engine_sess_tx) */
		h->offset = (uint32_t)req->reserved;
		h->count = (uint32_t)(req->reserved >> 32);
	}
}

void engine_chunk_error_hdr(struct tally_hdr *h, const struct engine_key *k, uint32_t idx,
			    enum tally_reason r, uint32_t aux)
{
	uint32_t c = idx >= k->nchunks ? idx - k->nchunks : idx;

	memset(h, 0, sizeof(*h));
	h->op = TALLY_OP_ERROR;
	h->reason = (uint8_t)r;
	h->aux = aux;
	h->job_id = k->job_id;
	h->token = k->job->token;
	h->key = k->key;
	h->round = k->chunks[idx].round;
	h->offset = c * k->reg.chunk_elems;
	h->dtype = k->dtype;
}

/* Counted as dropped for r; an ERROR r back to the sender where there is one, signed with
 * the job's key unless `sign` is 0 (the request failed authentication: no key to trust). */
static enum tally_reason reject(struct tally_engine *e, const struct tally_hdr *req,
				const struct tally_addr *from, enum tally_reason r, int sign)
{
	struct tally_hdr h;

	engine_drop(e, r);
	if (!from)
		return r;
	error_hdr(e, &h, req, r);
	send_pkt(e, from, &h, NULL, 0, NULL, sign, NULL);
	return r;
}

enum tally_reason engine_reject_plain(struct tally_engine *e, const struct tally_hdr *req,
				      const struct tally_addr *from, enum tally_reason r)
{
	return reject(e, req, from, r, 0);
}

enum tally_reason engine_reject(struct tally_engine *e, const struct tally_hdr *req,
			    const struct tally_addr *from, enum tally_reason r)
{
	return reject(e, req, from, r, 1);
}

struct engine_job *engine_job_find(struct tally_engine *e, uint32_t id)
{
	struct engine_job *j = e->last_job;
	if (j && j->in_use && j->id == id)
		return j;
	for (uint32_t i = 0; i < e->cfg.max_jobs; i++) {
		j = &e->jobs[i];
		if (j->in_use && j->id == id) {
			e->last_job = j;
			return j;
		}
	}
	return NULL;
}

enum tally_reason engine_refuse_draining(struct tally_engine *e, struct engine_job *job,
				     const struct tally_hdr *h, const struct tally_addr *from)
{
	struct engine_rank *rk = &job->ranks[h->rank];
	/* A refused push is off the summing path: one clock read is affordable here. */
	uint64_t now = engine_now(e);

	/* A window of pushes is refused at once: one ERROR per rank is enough to fail its
	 * operation, the gap keeps a draining core from answering every retransmission. */
	if (rk->drain_err_ns && now - rk->drain_err_ns < ENGINE_DRAIN_ERR_GAP_NS)
		return engine_drop(e, TALLY_R_DRAINING);
	rk->drain_err_ns = now ? now : 1;
	e->st.drain_errors++;
	return engine_reject(e, h, from, TALLY_R_DRAINING);
}

enum tally_reason engine_refuse_stale(struct tally_engine *e, struct engine_job *job,
				      const struct tally_hdr *h, const struct tally_addr *from)
{
	struct engine_rank *rk = &job->ranks[h->rank];
	/* off the summing path, like a draining refusal: one clock read */
	uint64_t now = engine_now(e);

	if (rk->stale_err_ns && now - rk->stale_err_ns < ENGINE_STALE_ERR_GAP_NS)
		return engine_drop(e, TALLY_R_STALE_ROUND);
	rk->stale_err_ns = now ? now : 1;
	e->st.stale_errors++;
	return engine_reject(e, h, from, TALLY_R_STALE_ROUND);
}
