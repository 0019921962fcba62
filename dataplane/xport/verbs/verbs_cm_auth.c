/* SPDX-License-Identifier: Apache-2.0
 * verbs_cm_auth.c — authentication of connections at setup, the rdma_cm side of
 * verbs_auth.h: the listener's check of a signed connect request (before anything is
 * allocated) and its signed accept, the client's signed request and its check of the
 * accept, the refusal texts that name the setting to change, and the keys' lifetime.
 * Called by verbs_cm.c; calls verbs_auth.c and verbs_conn.c (verbs_err).
 */
#include "verbs_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *reject_text(uint32_t r)
{
	switch (r) {
	case VR_BAD_REQUEST: return "the appliance did not understand the request (version?)";
	case VR_BAD_CORE: return "no such appliance core";
	case VR_FULL: return "the appliance has no free connection (raise rdma-max-conns)";
	case VR_NO_MEMORY: return "the appliance could not register memory (its memlock limit)";
	case VR_AUTH_REPLAY: return "refused: the connect request's nonce was seen before (a "
				    "replayed request)";
	case VR_AUTH_OFF: return "the appliance wants per-packet MACs on verbs too (rdma-auth "
				 "packet): set TALLY_VERBS_AUTH=packet on the worker";
	default: return "refused (nothing listens there: is the appliance started with "
			"rdma-listen on that address and port?)";
	}
}

/* The client's text for a refusal: the authentication ones name the setting to change. */
void verbs_cm_reject_msg(struct tally_verbs *v, const struct verbs_conn *c,
		       const struct verbs_wire *r, const char *ip)
{
	uint32_t why = ntohl(r->magic) == VERBS_MAGIC ? ntohl(r->reason) : 0;
	unsigned port = ntohs(v->peer.sin_port), job = v->cfg.auth_job;

	v->last_reject = why;
	if (why == VR_AUTH_NO_KEY)
		verbs_err(v, "verbs: %s:%u core %u: the appliance has no key for job %u (no such job, "
			  "or not admitted with one): admit it with tallyctl job-add --key-file, or "
			  "unset TALLY_AUTH_KEY_FILE", ip, port, c->core, job);
	else if (why == VR_AUTH_BAD_MAC)
		verbs_err(v, "verbs: %s:%u core %u: refused: our connect request for job %u does not "
			  "verify with the appliance's key (bad_mac): TALLY_AUTH_KEY_FILE must hold "
			  "the key given to tallyctl job-add --key-file", ip, port, c->core, job);
	else if (why == VR_AUTH_STALE)
		verbs_err(v, "verbs: %s:%u core %u: refused: our clock is %d s off the appliance's, "
			  "outside its %u s window (or older than nonces it forgot): synchronise the "
			  "clocks (NTP, chrony)", ip, port, c->core,
			  (int)(verbs_auth_nonce_time(c->auth_req + 28) - ntohl(r->rkey)),
			  VERBS_AUTH_WINDOW_S);
	else
		verbs_err(v, "verbs: %s:%u core %u: %s%s", ip, port, c->core, reject_text(why),
			  v->auth && why == VR_BAD_CORE ? " (or an appliance without setup "
			  "authentication: set TALLY_VERBS_AUTH=packet)" : "");
}

/* The addresses both ends' tags cover, as the listener sees them (verbs_auth.h). */
static void listen_bind(struct rdma_cm_id *id, struct verbs_bind *b)
{
	struct sockaddr_in *p = (struct sockaddr_in *)rdma_get_peer_addr(id);
	struct sockaddr_in *l = (struct sockaddr_in *)rdma_get_local_addr(id);

	memset(b, 0, sizeof(*b));
	if (p && p->sin_family == AF_INET)
		b->worker_ip = p->sin_addr.s_addr;
	if (l && l->sin_family == AF_INET) {
		b->appliance_ip = l->sin_addr.s_addr;
		b->port = l->sin_port;
	}
}

/* An authenticated request, checked before anything is allocated for it: VR_OK with the
 * peer's ring in *peer and the job's context in *ap, or the refusal (counted). */
uint32_t verbs_cm_auth_request(struct tally_verbs *v, struct rdma_cm_id *id, const void *pd,
			     size_t len, struct verbs_req *r, struct verbs_wire *peer,
			     struct tally_auth **ap)
{
	struct verbs_bind b;
	int rc;

	if (verbs_auth_req_decode(pd, len, r))
		return VR_BAD_REQUEST;
	if (r->core >= v->cfg.ncores)
		return VR_BAD_CORE;
	if (!v->cfg.auth_lookup) {
		v->st.auth_off++;
		return VR_AUTH_OFF;
	}
	*ap = v->cfg.auth_lookup(v->cfg.auth_arg, r->core, r->job);
	if (!*ap) {
		v->st.auth_no_key++;
		return VR_AUTH_NO_KEY;
	}
	listen_bind(id, &b);
	if (verbs_auth_req_verify(*ap, pd, &b)) {
		v->st.auth_bad_mac++;
		return VR_AUTH_BAD_MAC;
	}
	/* only a request whose tag verified may take a place in the replay cache */
	rc = verbs_replay_check(v->replay, r->nonce, (uint32_t)time(NULL));
	if (rc) {
		rc == -EALREADY ? v->st.auth_replay++ : v->st.auth_stale++;
		return rc == -EALREADY ? VR_AUTH_REPLAY : VR_AUTH_STALE;
	}
	*peer = (struct verbs_wire){ .magic = htonl(VERBS_MAGIC), .core = htonl(r->core),
				     .addr = r->addr, .rkey = htonl(r->rkey),
				     .nslots = htonl(r->nslots), .slot_bytes = htonl(r->slot_bytes) };
	return VR_OK;
}

/* The accept's private data: our ring, and for an authenticated request our proof of the
 * key over the worker's request (verbs_auth.h). 0 or -EIO. */
int verbs_cm_accept_data(struct rdma_cm_id *id, const void *pd, struct tally_auth *a,
		       const struct verbs_wire *w, uint8_t rep[VERBS_REP_LEN])
{
	struct verbs_bind b;

	memcpy(rep, w, sizeof(*w));
	if (!a)
		return 0;
	listen_bind(id, &b);
	return verbs_auth_rep_sign(rep, pd, a, &b);
}

/* Client: sign our connect request for (auth_job, auth_rank) over our ring, core and both
 * addresses, with a fresh nonce. 0 or -EIO. */
static void client_bind(struct tally_verbs *v, struct verbs_conn *c, struct verbs_bind *b)
{
	struct sockaddr_in *l = (struct sockaddr_in *)rdma_get_local_addr(c->id);

	memset(b, 0, sizeof(*b));
	if (l && l->sin_family == AF_INET)
		b->worker_ip = l->sin_addr.s_addr;
	b->appliance_ip = v->peer.sin_addr.s_addr;
	b->port = v->peer.sin_port;
}

int verbs_cm_auth_req(struct tally_verbs *v, struct verbs_conn *c,
			   const struct verbs_wire *w)
{
	struct verbs_req r = { .core = c->core, .nslots = ntohl(w->nslots),
			       .slot_bytes = ntohl(w->slot_bytes), .addr = w->addr,
			       .rkey = ntohl(w->rkey), .job = v->cfg.auth_job,
			       .rank = v->cfg.auth_rank };
	struct verbs_bind b;

	client_bind(v, c, &b);
	if (verbs_auth_nonce(r.nonce, (uint32_t)time(NULL) - (v->skew_connect ? 1000u : 0u)) ||
	    verbs_auth_req_encode(c->auth_req, &r, v->auth, &b)) {
		verbs_err(v, "verbs: cannot sign the connect request (job %u rank %u core %u)",
			  r.job, r.rank, r.core);
		return -EIO;
	}
	if (v->replay_connect) { /* fault injection (TALLY_VERBS_FAULT): a recorded request */
		if (v->have_first)
			memcpy(c->auth_req, v->first_req, VERBS_REQ_LEN);
		memcpy(v->first_req, c->auth_req, VERBS_REQ_LEN);
		v->have_first = 1;
	}
	return 0;
}

/* Client: the appliance's accept must prove the job's key over our request. */
int verbs_cm_auth_accept(struct tally_verbs *v, struct verbs_conn *c, const void *pd,
			      size_t len, const char *ip)
{
	struct verbs_bind b;

	client_bind(v, c, &b);
	if (!verbs_auth_rep_verify(pd, len, c->auth_req, v->auth, &b)) {
		v->st.conns_authed++;
		return 0;
	}
	v->st.auth_bad_accept++;
	verbs_err(v, "verbs: %s:%u core %u accepted without proving job %u's key: the "
		  "appliance's key for the job is not ours (TALLY_AUTH_KEY_FILE; tallyctl job-add "
		  "--key-file), or it is not the Tally appliance we meant", ip,
		  ntohs(v->peer.sin_port), c->core, v->cfg.auth_job);
	return -EACCES;
}

/* Authentication state: the client's job key (copied: the caller's buffer is not kept),
 * the listener's replay cache. 0 or -errno with the message set. */
int verbs_cm_auth_open(struct tally_verbs *v)
{
	if (v->cfg.listen) {
		v->replay = calloc(1, sizeof(*v->replay));
		return v->replay ? 0 : -ENOMEM;
	}
	if (!v->cfg.auth_key || v->cfg.auth_packet) /* TALLY_VERBS_AUTH=packet at the edge */
		return 0;
	if (v->cfg.auth_rank >= TALLY_MAX_WORKERS) {
		verbs_err(v, "verbs: rank %u out of range for authentication (0..%u)",
			  v->cfg.auth_rank, TALLY_MAX_WORKERS - 1);
		return -EINVAL;
	}
	v->auth = tally_auth_new();
	if (!v->auth || tally_auth_set_key(v->auth, v->cfg.auth_key)) {
		verbs_err(v, "verbs: cannot key the connection authentication (libcrypto)");
		return -EIO;
	}
	v->cfg.auth_key = NULL;
	return 0;
}

int tally_verbs_setup_authed(const struct tally_verbs *v)
{
	return v && v->auth != NULL;
}

void verbs_cm_auth_free(struct tally_verbs *v)
{
	tally_auth_free(v->auth);
	free(v->replay);
	v->auth = NULL;
	v->replay = NULL;
}
