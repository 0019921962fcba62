/* SPDX-License-Identifier: Apache-2.0
 * engine_auth.c — who sent a packet, on the appliance side: a rank's identity (its address,
 * bound by JOIN, checked on every later packet: engine_auth) and, for a keyed job,
 * per-packet authentication (tally_proto.h TALLY_F_AUTH, tally_auth.h): job keys, the check
 * every packet passes before it may change anything, and the JOIN/BYE nonces that make
 * recorded JOINs and BYEs useless.
 *
 * Replays of data packets need no nonce: a replayed PUSH of (rank, key, round, offset)
 * finds the rank's bit set in the chunk's exactly-once bitmap (engine_chunk.c: a duplicate,
 * answered HELD/RESULT to the bound address, never summed again), or the round gone
 * (STALE_ROUND) or not yet startable (TOO_EARLY); a replayed PULL only re-sends to the
 * bound address; a replayed REGISTER is an identical one (acked). JOIN and BYE change
 * bindings, so they carry a nonce: JOIN's is strictly increasing per rank (the client
 * uses the wall clock in ns), BYE repeats the bound JOIN's.
 * A connection the transport authenticated at setup (tally_addr.conn_authed: a verbs RC QP
 * whose connect request proved the job's key) carries its identity instead: its packets
 * need no MAC, and one naming another job or rank is dropped (conn_identity).
 * Calls engine_util.c only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "engine_int.h"

/* ---- identity: the address a rank is bound to ---- */

/* Transport address identity: IP, UDP port, the transport's cookie and the source MAC.
 * The MAC is part of it so that a spoofed JOIN from the same IP/port cannot redirect a
 * rank's RESULTs (THREAT_MODEL.md); behind a router every frame of a worker carries the
 * router's MAC, which stays the same. The core index is not part of it. */
int engine_addr_eq_l3(const struct tally_addr *a, const struct tally_addr *b)
{
	return a->ip == b->ip && a->port == b->port && a->cookie == b->cookie;
}

int engine_addr_eq(const struct tally_addr *a, const struct tally_addr *b)
{
	return engine_addr_eq_l3(a, b) && !memcmp(a->mac, b->mac, sizeof(a->mac));
}

enum tally_reason engine_auth(struct tally_engine *e, const struct tally_hdr *h,
			  const struct tally_addr *from, struct engine_job **jobp)
{
	struct engine_job *j = engine_job_find(e, h->job_id);
	if (!j)
		return TALLY_R_WRONG_JOB;
	if (j->token != h->token)
		return TALLY_R_WRONG_TOKEN;
	if (h->rank >= j->world)
		return TALLY_R_BAD_RANK;
	struct engine_rank *r = &j->ranks[h->rank];
	if (!r->bound || !engine_addr_eq_l3(&r->addr, from))
		return TALLY_R_NOT_JOINED;
	if (memcmp(r->addr.mac, from->mac, sizeof(r->addr.mac)))
		return TALLY_R_MAC_MISMATCH;
	/* Every packet of the rank, retransmissions and refused ones included, shows it is
	 * alive: a re-bind needs real silence. The cached clock costs nothing here. */
	r->last_ns = e->now;
	j->last_ns = e->now;
	engine_live_heard(e, j->id, h->rank, from->ip); /* and on every other core */
	*jobp = j;
	return TALLY_OK;
}

enum tally_reason engine_bind_check(const struct tally_engine *e, const struct engine_job *job,
				    uint32_t rank, const struct tally_addr *from, uint64_t now)
{
	const struct engine_rank *r = &job->ranks[rank];
	if (!r->bound || engine_addr_eq(&r->addr, from))
		return TALLY_OK;
	/* A keyed rank whose JOIN no packet under its session followed (a replayed JOIN from an
	 * earlier run, issue 33): the caller checked this JOIN's nonce is newer, so take it. */
	if (engine_job_auth(e, job) && !r->confirmed)
		return TALLY_OK; /* counted by engine_bind */
	/* Another identity: only a restarted worker, once the bound one is silent long enough,
	 * here and (cfg.live) on every other core: a rank at a barrier talks to one core only. */
	if (now - r->last_ns >= e->cfg.rejoin_timeout_ns &&
	    !engine_live_other(e, job->id, rank, from->ip, now))
		return TALLY_OK;
	return engine_addr_eq_l3(&r->addr, from) ? TALLY_R_MAC_MISMATCH : TALLY_R_RANK_TAKEN;
}

enum tally_reason engine_bind(struct tally_engine *e, struct engine_job *job, uint32_t rank,
			  const struct tally_addr *from, uint64_t now)
{
	struct engine_rank *r = &job->ranks[rank];
	enum tally_reason rsn = engine_bind_check(e, job, rank, from, now);
	if (rsn != TALLY_OK)
		return rsn;
	if (!r->bound)
		job->joined++;
	else if (!engine_addr_eq(&r->addr, from) && engine_job_auth(e, job) && !r->confirmed)
		e->st.unconfirmed_rebinds++;
	else if (!engine_addr_eq(&r->addr, from))
		e->st.rebinds++;
	if (!r->bound || !engine_addr_eq(&r->addr, from))
		r->confirmed = 0;
	r->bound = 1;
	r->left = 0;
	r->addr = *from;
	r->last_ns = now;
	return TALLY_OK;
}

/* ---- job keys and per-packet authentication ---- */

int engine_auth_init(struct tally_engine *e)
{
	e->auths = calloc(e->cfg.max_jobs, sizeof(*e->auths));
	e->join_nonce = calloc((size_t)e->cfg.max_jobs * TALLY_MAX_WORKERS,
			       sizeof(*e->join_nonce));
	if (!e->auths || !e->join_nonce)
		return -ENOMEM;
	for (uint32_t i = 0; i < e->cfg.max_jobs; i++) {
		e->auths[i] = tally_auth_new();
		if (!e->auths[i]) /* EINVAL: TALLY_AUTH_BACKEND names no backend (said on stderr) */
			return errno == EINVAL ? -EINVAL : -ENOMEM;
	}
	return 0;
}

void engine_auth_fini(struct tally_engine *e)
{
	if (e->auths)
		for (uint32_t i = 0; i < e->cfg.max_jobs; i++)
			tally_auth_free(e->auths[i]);
	free(e->auths);
	free(e->join_nonce);
	e->auths = NULL;
	e->join_nonce = NULL;
}

int tally_engine_job_key(struct tally_engine *e, uint32_t job_id,
			 const uint8_t key[TALLY_AUTH_KEY_LEN])
{
	if (!e || !key)
		return -EINVAL;
	struct engine_job *job = engine_job_find(e, job_id);
	if (!job)
		return -ENOENT;
	uint32_t slot = (uint32_t)(job - e->jobs);
	struct tally_auth *a = e->auths[slot];
	if (tally_auth_has_key(a))
		return tally_auth_key_equal(a, key) ? 0 : -EEXIST;
	int rc = tally_auth_set_key(a, key);
	if (rc)
		return rc;
	/* a fresh run nonce for this install (tally_engine_job_run gives all cores one) */
	if (getrandom(&job->run, sizeof(job->run), 0) != (ssize_t)sizeof(job->run)) {
		tally_auth_clear(a);
		return -EIO;
	}
	/* a new key: packets recorded under an earlier one fail the tag anyway */
	memset(e->join_nonce + (size_t)slot * TALLY_MAX_WORKERS, 0,
	       TALLY_MAX_WORKERS * sizeof(*e->join_nonce));
	return 0;
}

int tally_engine_job_run(struct tally_engine *e, uint32_t job_id, uint64_t run)
{
	struct engine_job *job = e ? engine_job_find(e, job_id) : NULL;

	if (!job)
		return -ENOENT;
	if (!engine_job_auth(e, job) || !run)
		return -EINVAL;
	job->run = run;
	return 0;
}

int tally_engine_job_keyed(struct tally_engine *e, uint32_t job_id)
{
	struct engine_job *job = e ? engine_job_find(e, job_id) : NULL;
	return job && engine_job_auth(e, job) != NULL;
}

struct tally_auth *tally_engine_job_auth(struct tally_engine *e, uint32_t job_id)
{
	struct engine_job *job = e ? engine_job_find(e, job_id) : NULL;
	return job ? engine_job_auth(e, job) : NULL;
}

static uint64_t *nonce_of(struct tally_engine *e, const struct engine_job *job, uint32_t rank);

void engine_sess_rx(struct tally_engine *e, const struct engine_job *job,
		    const struct tally_hdr *h, uint8_t *sess)
{
	if (h->op == TALLY_OP_JOIN || h->op == TALLY_OP_PING)
		tally_auth_sess(sess, 0, h->reserved);
	else
		tally_auth_sess(sess, job->run, *nonce_of(e, job, h->rank));
}

/* A packet of a keyed job verified under its session: a PING must name the bound JOIN's
 * nonce (a recorded PING of another session keeps no rank alive); any other packet but a
 * JOIN confirms the rank's binding. */
static enum tally_reason verified_session(struct tally_engine *e, struct engine_job *job,
					  const struct tally_hdr *h)
{
	if (h->op == TALLY_OP_JOIN || h->rank >= job->world)
		return TALLY_OK;
	struct engine_rank *rk = &job->ranks[h->rank];
	if (h->op == TALLY_OP_PING)
		return rk->bound && h->reserved != *nonce_of(e, job, h->rank) ? TALLY_R_REPLAY :
										 TALLY_OK;
	rk->confirmed = 1;
	return TALLY_OK;
}

enum tally_reason engine_rx_verify(struct tally_engine *e, const void *buf,
				   const struct tally_pkt *pkt, const struct tally_addr *from)
{
	struct engine_job *job = engine_job_find(e, pkt->hdr.job_id);
	struct tally_auth *a = job ? engine_job_auth(e, job) : NULL;
	enum tally_reason r;

	if (from && from->conn_authed) {
		/* the connection proved (job, rank) at setup (tally_xport.h): it speaks for that
		 * identity only, and without a MAC (THREAT_MODEL.md says when that is sound) */
		if (pkt->hdr.job_id != from->conn_job || pkt->hdr.rank != from->conn_rank)
			return engine_drop(e, TALLY_R_CONN_IDENTITY);
		if (!pkt->auth) {
			e->st.conn_auth_rx++;
			return TALLY_OK;
		}
	}
	if (!a) {
		r = pkt->auth ? TALLY_R_NO_KEY : TALLY_OK;
	} else if (!pkt->auth) {
		r = TALLY_R_AUTH_REQUIRED;
	} else {
		uint8_t sess[TALLY_AUTH_SESS_LEN];

		engine_sess_rx(e, job, &pkt->hdr, sess);
		r = tally_auth_verify_s(a, buf, sess, pkt) == 0 ? TALLY_OK : TALLY_R_BAD_MAC;
		if (r == TALLY_OK)
			r = verified_session(e, job, &pkt->hdr);
	}
	if (r == TALLY_OK) {
		e->st.auth_verified += a != NULL;
		return r;
	}
	if (r == TALLY_R_REPLAY)
		return engine_drop(e, r);
	/* only a JOIN is answered: it is how a worker with a wrong or missing key finds out */
	if (pkt->hdr.op == TALLY_OP_JOIN)
		return engine_reject_plain(e, &pkt->hdr, from, r);
	return engine_drop(e, r);
}

static uint64_t *nonce_of(struct tally_engine *e, const struct engine_job *job, uint32_t rank)
{
	return &e->join_nonce[(size_t)(job - e->jobs) * TALLY_MAX_WORKERS + rank];
}

enum tally_reason engine_join_nonce_check(struct tally_engine *e, const struct engine_job *job,
					  const struct tally_hdr *h, const struct tally_addr *from)
{
	if (!engine_job_auth(e, job))
		return TALLY_OK;
	uint64_t last = *nonce_of(e, job, h->rank);
	const struct engine_rank *rk = &job->ranks[h->rank];
	if (h->reserved > last)
		return TALLY_OK;
	/* the JOIN that bound this address, re-sent (its JOIN_OK was lost): answer again; from
	 * another source MAC it is a replay that would redirect the rank's RESULTs */
	if (h->reserved == last && last && rk->bound && engine_addr_eq(&rk->addr, from))
		return TALLY_OK;
	return TALLY_R_REPLAY;
}

void engine_join_nonce_set(struct tally_engine *e, const struct engine_job *job,
			   const struct tally_hdr *h)
{
	if (engine_job_auth(e, job))
		*nonce_of(e, job, h->rank) = h->reserved;
}

enum tally_reason engine_bye_nonce_check(struct tally_engine *e, const struct engine_job *job,
					 const struct tally_hdr *h)
{
	if (!engine_job_auth(e, job))
		return TALLY_OK;
	uint64_t last = *nonce_of(e, job, h->rank);
	return last && h->reserved == last ? TALLY_OK : TALLY_R_REPLAY;
}
