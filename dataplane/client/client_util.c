/* SPDX-License-Identifier: Apache-2.0
 * client_util.c — helpers every client file uses (errno mapping, error text, header fill,
 * send, key lookup). A leaf: it calls nothing else in the library, so the session files
 * (client.c, client_op.c, client_rx.c) depend on it and never on each other in a cycle.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "client_int.h"

/* The appliance's reason → errno (what tally_client_* return). */
int client_err_from_reason(unsigned reason)
{
	switch (reason) {
	case TALLY_R_WRONG_TOKEN: return -EACCES;
	case TALLY_R_WRONG_JOB: return -EPERM;
	case TALLY_R_RANK_TAKEN: return -EBUSY;
	case TALLY_R_BAD_RANK: return -ERANGE;
	case TALLY_R_NOT_JOINED: return -ENOTCONN;
	case TALLY_R_NOT_PARTICIPANT: return -EPERM;
	case TALLY_R_UNKNOWN_KEY: return -ENOENT;
	case TALLY_R_KEY_CONFLICT: return -EEXIST;
	case TALLY_R_NO_MEMORY: return -ENOMEM;
	case TALLY_R_POOL_FULL: return -EAGAIN;
	case TALLY_R_TOO_EARLY: return -EAGAIN;
	case TALLY_R_UNSUPPORTED: return -EOPNOTSUPP;
	case TALLY_R_DRAINING: return -ESHUTDOWN;
	case TALLY_R_BAD_REGISTER: return -EINVAL;
	case TALLY_R_BAD_RANGE: return -EINVAL;
	case TALLY_R_CHUNK_MISMATCH: return -EINVAL;
	case TALLY_R_OVERSIZED: return -EMSGSIZE;
	case TALLY_R_JOB_TABLE_FULL: return -ENOSPC;
	case TALLY_R_INCARNATION_LIVE: return -EBUSY; /* retried like RANK_TAKEN */
	case TALLY_R_RANK_SILENT: return -EPIPE;
	case TALLY_R_QUOTA_KEYS: return -EDQUOT;
	case TALLY_R_QUOTA_BYTES: return -EDQUOT;
	case TALLY_R_QUOTA_RANKS: return -EDQUOT;
	case TALLY_R_NOT_ALLOWED: return -EACCES;
	case TALLY_R_ADMIT_SUBNET: return -EACCES;
	case TALLY_R_ADMIT_LIMIT: return -EAGAIN;
	case TALLY_R_MAC_MISMATCH: return -EBUSY;
	case TALLY_R_BAD_MAC: return -EKEYREJECTED;
	case TALLY_R_AUTH_REQUIRED: return -EKEYREJECTED;
	case TALLY_R_NO_KEY: return -EKEYREJECTED;
	case TALLY_R_REPLAY: return -EKEYREJECTED;
	default: return -EPROTO;
	}
}

void client_seterr(struct tally_client *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->errmsg, sizeof(c->errmsg), fmt, ap);
	va_end(ap);
}

void client_fill_hdr(const struct tally_client *c, struct tally_hdr *h, uint8_t op)
{
	memset(h, 0, sizeof(*h));
	h->op = op;
	h->job_id = c->cfg.job_id;
	h->rank = c->cfg.rank;
	h->token = c->cfg.token;
}

int client_send(struct tally_client *c, uint32_t core, const uint8_t *hdr, const void *payload,
	    size_t len)
{
	struct tally_addr to;
	int rc;

	memset(&to, 0, sizeof(to));
	to.core = core;
	if (c->auth) {
		/* signed per transmission: a re-send gets its own IV (tally_auth.h) */
		uint8_t hb[TALLY_HDR_MAX];

		uint8_t sess[TALLY_AUTH_SESS_LEN];

		memcpy(hb, hdr, TALLY_HDR_LEN);
		tally_auth_mark(hb);
		/* JOIN and PING: the run may be unknown (or another, after a restart) */
		tally_auth_sess(sess, hb[5] == TALLY_OP_JOIN || hb[5] == TALLY_OP_PING ? 0 : c->run,
				c->join_nonce);
		rc = tally_auth_sign_s(c->auth, hb, sess, payload, len);
		if (rc)
			return rc;
		c->st.auth_signed++;
		rc = c->ops->send(c->xctx, &to, hb, payload, len);
	} else {
		rc = c->ops->send(c->xctx, &to, hdr, payload, len);
	}
	if (rc == 0) {
		c->st.tx_pkts++;
		c->st.tx_bytes += tally_proto_hdr_len(hdr) + (c->auth ? TALLY_AUTH_LEN : 0) + len;
	}
	return rc;
}

struct client_key *client_key_find(const struct tally_client *c, uint32_t key)
{
	if (!c->khash)
		return NULL;
	for (uint32_t i = client_hash(key) & c->khash_mask;; i = (i + 1) & c->khash_mask) {
		uint32_t v = c->khash[i];

		if (!v)
			return NULL;
		if (c->keys[v - 1].key == key)
			return &c->keys[v - 1];
	}
}
