/* SPDX-License-Identifier: Apache-2.0
 * client_auth.c — the worker side of per-packet authentication (tally_proto.h
 * TALLY_F_AUTH): the session's GMAC context, JOIN nonces, and the check every received
 * packet passes first. Signing is in client_send (client_util.c). Calls client_util.c only.
 */
#include <errno.h>
#include <time.h>

#include <openssl/crypto.h>

#include "client_int.h"

int client_auth_init(struct tally_client *c)
{
	if (!c->cfg.auth)
		return 0;
	c->auth = tally_auth_new();
	if (!c->auth) /* EINVAL: TALLY_AUTH_BACKEND names no backend (said on stderr) */
		return errno == EINVAL ? -EINVAL : -ENOMEM;
	int rc = tally_auth_set_key(c->auth, c->cfg.auth_key);
	OPENSSL_cleanse(c->cfg.auth_key, sizeof(c->cfg.auth_key)); /* the context has it */
	return rc;
}

void client_auth_fini(struct tally_client *c)
{
	tally_auth_free(c->auth);
	c->auth = NULL;
}

uint64_t client_join_nonce(struct tally_client *c)
{
	struct timespec ts;
	uint64_t n = 0;

	/* the wall clock: a restarted worker's JOIN is newer than its last one */
	if (clock_gettime(CLOCK_REALTIME, &ts) == 0)
		n = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	return n > c->join_nonce ? n : c->join_nonce + 1;
}

/* An unsigned ERROR to our JOIN that says why the appliance could not take it (it could
 * not check the JOIN, so it cannot sign the answer). A keyless session takes it at once;
 * a keyed one only after TALLY_CLIENT_UNSIGNED_GRACE_MS without a signed answer
 * (client_auth_unsigned_due): anyone can send one. */
static int join_auth_error(const struct tally_client *c, const struct tally_hdr *h)
{
	return h->op == TALLY_OP_ERROR && h->aux == TALLY_OP_JOIN && c->wait == CLIENT_W_JOIN &&
	       (h->reason == TALLY_R_BAD_MAC || h->reason == TALLY_R_AUTH_REQUIRED ||
		h->reason == TALLY_R_NO_KEY || h->reason == TALLY_R_REPLAY);
}

int client_auth_rx(struct tally_client *c, const void *buf, const struct tally_pkt *p)
{
	if (!c->auth) {
		if (!p->auth || join_auth_error(c, &p->hdr))
			return 1;
		c->st.drops[TALLY_R_NO_KEY]++;
		return 0;
	}
	if (!p->auth) {
		if (join_auth_error(c, &p->hdr)) {
			c->st.join_unsigned_errors++;
			if (!c->unsigned_reason) {
				uint64_t grace = (uint64_t)TALLY_CLIENT_UNSIGNED_GRACE_MS * 1000000u;

				c->unsigned_reason = p->hdr.reason;
				c->unsigned_due_ns = c->ops->now_ns(c->xctx) + grace;
			}
			return 0;
		}
		c->st.drops[TALLY_R_AUTH_REQUIRED]++;
		return 0;
	}
	/* the session (tally_auth.h): JOIN_OK names the run; answers to JOIN and PING are
	 * under (0, our nonce), as those requests were; everything else under (run, nonce) */
	const struct tally_hdr *h = &p->hdr;
	uint64_t run = c->run;
	uint8_t sess[TALLY_AUTH_SESS_LEN];

	if (h->op == TALLY_OP_JOIN_OK)
		run = (uint64_t)h->count << 32 | h->offset;
	else if (h->op == TALLY_OP_PING || tally_proto_join_ping_error(h))
		run = 0;
	tally_auth_sess(sess, run, c->join_nonce);
	if (tally_auth_verify_s(c->auth, buf, sess, p) != 0) {
		c->st.drops[TALLY_R_BAD_MAC]++;
		return 0;
	}
	/* a JOIN_OK answers our JOIN only if it echoes its nonce (else: a recorded one) */
	if (p->hdr.op == TALLY_OP_JOIN_OK && p->hdr.reserved != c->join_nonce) {
		c->st.drops[TALLY_R_REPLAY]++;
		return 0;
	}
	c->st.auth_verified++;
	return 1;
}

/* A blocking request polls until the returned time (at most `due`): the end of an unsigned
 * ERROR's grace, when that ERROR becomes the JOIN's answer (a wrong key, most likely; the
 * message names the setting: client_join_refused sets wait_done). */
uint64_t client_auth_until(struct tally_client *c, uint64_t now, uint64_t due)
{
	if (!c->unsigned_reason || c->wait_done || c->wait != CLIENT_W_JOIN)
		return due;
	if (now >= c->unsigned_due_ns) {
		client_join_refused(c, c->unsigned_reason);
		return due;
	}
	return c->unsigned_due_ns < due ? c->unsigned_due_ns : due;
}

/* The request's deadline: within an unsigned ERROR's grace that ERROR is the answer. */
int client_auth_deadline(struct tally_client *c)
{
	if (!c->unsigned_reason || c->wait != CLIENT_W_JOIN)
		return -ETIMEDOUT;
	client_join_refused(c, c->unsigned_reason);
	return c->wait_err;
}
