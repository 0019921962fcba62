/* SPDX-License-Identifier: Apache-2.0
 * verbs_auth.c — the connect request's and accept's authentication (verbs_auth.h): their
 * byte layout, GMAC tags through tally_auth (OpenSSL), and the listener's replay cache.
 * Control path only (connection setup): getrandom and copies are fine here.
 */
#include "verbs_auth.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include <openssl/crypto.h>

static const char req_prefix[16] = "TALLY VERBS REQ";
static const char rep_prefix[16] = "TALLY VERBS REP";

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p + 2, (uint16_t)v);
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)get16(p) << 16 | get16(p + 2);
}

/* The addresses every tag covers: 12 bytes (worker IP, appliance IP, port, zero). */
static void bind_bytes(uint8_t out[12], const struct verbs_bind *b)
{
	memcpy(out, &b->worker_ip, 4);
	memcpy(out + 4, &b->appliance_ip, 4);
	memcpy(out + 8, &b->port, 2);
	out[10] = out[11] = 0;
}

uint32_t verbs_auth_nonce_time(const uint8_t nonce[VERBS_NONCE_LEN])
{
	return get32(nonce);
}

int verbs_auth_nonce(uint8_t nonce[VERBS_NONCE_LEN], uint32_t now_s)
{
	put32(nonce, now_s);
	return getrandom(nonce + 4, 8, 0) == 8 ? 0 : -EIO;
}

static int req_tag(struct tally_auth *a, const uint8_t *req, const struct verbs_bind *b,
		   uint8_t tag[TALLY_AUTH_TAG_LEN])
{
	uint8_t aad[16 + VERBS_REQ_SIGNED + 12];

	memcpy(aad, req_prefix, 16);
	memcpy(aad + 16, req, VERBS_REQ_SIGNED);
	bind_bytes(aad + 16 + VERBS_REQ_SIGNED, b);
	/* the nonce (bytes 28..40) is the IV and also under the tag */
	return tally_auth_gmac(a, req + 28, aad, sizeof(aad), NULL, 0, tag) ? -EIO : 0;
}

int verbs_auth_req_encode(uint8_t out[VERBS_REQ_LEN], const struct verbs_req *r,
			  struct tally_auth *a, const struct verbs_bind *b)
{
	uint32_t lg = 0;

	if (!a || !tally_auth_has_key(a) || r->core > 0xffff || r->rank > 0xffff ||
	    !r->nslots || (r->nslots & (r->nslots - 1)) || r->slot_bytes % 64 ||
	    r->slot_bytes / 64 > 0xff)
		return -EINVAL;
	while ((1u << lg) < r->nslots)
		lg++;
	memset(out, 0, VERBS_REQ_LEN);
	put32(out, VERBS_MAGIC_AUTH);
	put16(out + 4, (uint16_t)r->core);
	out[6] = (uint8_t)lg;
	out[7] = (uint8_t)(r->slot_bytes / 64);
	memcpy(out + 8, &r->addr, 8); /* as the v1 wire: the sender's own byte order */
	put32(out + 16, r->rkey);
	put32(out + 20, r->job);
	put16(out + 24, (uint16_t)r->rank);
	memcpy(out + 28, r->nonce, VERBS_NONCE_LEN);
	return req_tag(a, out, b, out + VERBS_REQ_SIGNED);
}

int verbs_auth_is_req(const void *pd, size_t len)
{
	return pd && len >= VERBS_REQ_LEN && get32(pd) == VERBS_MAGIC_AUTH;
}

int verbs_auth_req_decode(const void *pd, size_t len, struct verbs_req *r)
{
	const uint8_t *p = pd;

	if (!verbs_auth_is_req(pd, len) || p[6] > 31 || get16(p + 26))
		return -EPROTO;
	r->core = get16(p + 4);
	r->nslots = 1u << p[6];
	r->slot_bytes = 64u * p[7];
	memcpy(&r->addr, p + 8, 8);
	r->rkey = get32(p + 16);
	r->job = get32(p + 20);
	r->rank = get16(p + 24);
	memcpy(r->nonce, p + 28, VERBS_NONCE_LEN);
	return 0;
}

int verbs_auth_req_verify(struct tally_auth *a, const void *pd, const struct verbs_bind *b)
{
	uint8_t tag[TALLY_AUTH_TAG_LEN];
	const uint8_t *p = pd;

	if (!a || req_tag(a, p, b, tag))
		return -EBADMSG;
	return CRYPTO_memcmp(tag, p + VERBS_REQ_SIGNED, TALLY_AUTH_TAG_LEN) ? -EBADMSG : 0;
}

static int rep_tag(struct tally_auth *a, const uint8_t *rep, const uint8_t *req,
		   const struct verbs_bind *b, uint8_t tag[TALLY_AUTH_TAG_LEN])
{
	uint8_t aad[16 + VERBS_REP_WIRE + VERBS_NONCE_LEN + VERBS_REQ_LEN + 12];
	size_t o = 0;

	memcpy(aad, rep_prefix, 16), o += 16;
	memcpy(aad + o, rep, VERBS_REP_WIRE + VERBS_NONCE_LEN), o += VERBS_REP_WIRE + VERBS_NONCE_LEN;
	memcpy(aad + o, req, VERBS_REQ_LEN), o += VERBS_REQ_LEN;
	bind_bytes(aad + o, b);
	return tally_auth_gmac(a, rep + VERBS_REP_WIRE, aad, sizeof(aad), NULL, 0, tag) ? -EIO : 0;
}

int verbs_auth_rep_sign(uint8_t rep[VERBS_REP_LEN], const uint8_t req[VERBS_REQ_LEN],
			struct tally_auth *a, const struct verbs_bind *b)
{
	if (getrandom(rep + VERBS_REP_WIRE, VERBS_NONCE_LEN, 0) != VERBS_NONCE_LEN)
		return -EIO;
	return rep_tag(a, rep, req, b, rep + VERBS_REP_WIRE + VERBS_NONCE_LEN);
}

int verbs_auth_rep_verify(const void *pd, size_t len, const uint8_t req[VERBS_REQ_LEN],
			  struct tally_auth *a, const struct verbs_bind *b)
{
	uint8_t tag[TALLY_AUTH_TAG_LEN];
	const uint8_t *p = pd;

	if (!pd || len < VERBS_REP_LEN || !a || rep_tag(a, p, req, b, tag))
		return -EBADMSG;
	return CRYPTO_memcmp(tag, p + VERBS_REP_WIRE + VERBS_NONCE_LEN, TALLY_AUTH_TAG_LEN)
		       ? -EBADMSG : 0;
}

int verbs_replay_check(struct verbs_replay *rp, const uint8_t nonce[VERBS_NONCE_LEN],
		       uint32_t now_s)
{
	uint32_t t = verbs_auth_nonce_time(nonce);
	/* signed difference: the 32-bit seconds wrap in 2106 */
	int32_t d = (int32_t)(t - now_s);

	if (d > (int32_t)VERBS_AUTH_WINDOW_S || d < -(int32_t)VERBS_AUTH_WINDOW_S ||
	    (rp->floor_s && (int32_t)(t - rp->floor_s) <= 0))
		return -ETIME;
	for (uint32_t i = 0; i < rp->n; i++)
		if (!memcmp(rp->nonce[i], nonce, VERBS_NONCE_LEN))
			return -EALREADY;
	if (rp->n == VERBS_REPLAY_SLOTS) {
		/* forget the oldest; its time becomes the floor if it is the newest forgotten */
		uint32_t ft = verbs_auth_nonce_time(rp->nonce[rp->head]);

		if (!rp->floor_s || (int32_t)(ft - rp->floor_s) > 0)
			rp->floor_s = ft;
		memcpy(rp->nonce[rp->head], nonce, VERBS_NONCE_LEN);
		rp->head = (rp->head + 1) % VERBS_REPLAY_SLOTS;
		return 0;
	}
	memcpy(rp->nonce[rp->n++], nonce, VERBS_NONCE_LEN);
	return 0;
}
