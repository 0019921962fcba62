/* SPDX-License-Identifier: Apache-2.0
 * auth.c — AES-256-GMAC contexts (tally_auth.h): key, sign, verify, over the process's
 * backend (auth_backend.c): intel-ipsec-mb's expanded key and GHASH powers, or an OpenSSL
 * EVP cipher context keeping the key schedule; each packet re-initialises only the IV.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "auth_backend.h"
#include "tally_auth.h"

struct tally_auth {
#ifdef TALLY_HAVE_IPSEC_MB
	struct gcm_key_data kd; /* ipsec-mb: first, 64-byte aligned */
#endif
	EVP_CIPHER_CTX *ctx;    /* openssl */
	int be;
	int keyed;
	uint32_t salt;
	uint64_t ctr;
	uint8_t key[TALLY_AUTH_KEY_LEN]; /* kept for tally_auth_key_equal only */
};

struct tally_auth *tally_auth_new(void)
{
	int be = auth_be_get();
	if (be < 0) {
		errno = EINVAL;
		return NULL;
	}
	/* 64-byte aligned for ipsec-mb's key data; size rounded up as aligned_alloc wants */
	size_t sz = (sizeof(struct tally_auth) + 63) & ~(size_t)63;
	struct tally_auth *a = aligned_alloc(64, sz);
	if (!a)
		return NULL;
	memset(a, 0, sz);
	a->be = be;
	if (be == AUTH_BE_OPENSSL && !(a->ctx = EVP_CIPHER_CTX_new())) {
		free(a);
		errno = ENOMEM;
		return NULL;
	}
	return a;
}

void tally_auth_free(struct tally_auth *a)
{
	if (!a)
		return;
	tally_auth_clear(a);
	EVP_CIPHER_CTX_free(a->ctx);
	free(a);
}

int tally_auth_set_key(struct tally_auth *a, const uint8_t key[TALLY_AUTH_KEY_LEN])
{
	uint8_t rnd[12];

	if (!a || !key)
		return -EINVAL;
	tally_auth_clear(a);
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return -EIO;
#ifdef TALLY_HAVE_IPSEC_MB
	if (a->be == AUTH_BE_IPSEC_MB)
		auth_imb_key(&a->kd, key);
#endif
	if (a->be == AUTH_BE_OPENSSL &&
	    (EVP_EncryptInit_ex(a->ctx, EVP_aes_256_gcm(), NULL, key, NULL) != 1 ||
	     EVP_CIPHER_CTX_ctrl(a->ctx, EVP_CTRL_GCM_SET_IVLEN, TALLY_AUTH_IV_LEN, NULL) != 1))
		return -EIO;
	memcpy(&a->salt, rnd, 4);
	memcpy(&a->ctr, rnd + 4, 8);
	memcpy(a->key, key, TALLY_AUTH_KEY_LEN);
	a->keyed = 1;
	return 0;
}

void tally_auth_clear(struct tally_auth *a)
{
	if (!a)
		return;
	OPENSSL_cleanse(a->key, sizeof(a->key));
	if (a->keyed && a->ctx)
		EVP_CIPHER_CTX_reset(a->ctx); /* wipes the key schedule */
#ifdef TALLY_HAVE_IPSEC_MB
	if (a->keyed)
		OPENSSL_cleanse(&a->kd, sizeof(a->kd));
#endif
	a->keyed = 0;
}

int tally_auth_has_key(const struct tally_auth *a)
{
	return a && a->keyed;
}

int tally_auth_key_equal(const struct tally_auth *a, const uint8_t key[TALLY_AUTH_KEY_LEN])
{
	return a && a->keyed && CRYPTO_memcmp(a->key, key, TALLY_AUTH_KEY_LEN) == 0;
}

int tally_auth_gmac(struct tally_auth *a, const uint8_t iv[TALLY_AUTH_IV_LEN],
		    const void *aad1, size_t len1, const void *aad2, size_t len2,
		    uint8_t tag[TALLY_AUTH_TAG_LEN])
{
	int outl = 0;
	uint8_t dummy[16];

	if (!a->keyed || len1 > INT32_MAX || len2 > INT32_MAX)
		return -EIO;
#ifdef TALLY_HAVE_IPSEC_MB
	if (a->be == AUTH_BE_IPSEC_MB) {
		auth_imb_gmac(&a->kd, iv, aad1, len1, aad2, len2, tag);
		return 0;
	}
#endif
	if (EVP_EncryptInit_ex(a->ctx, NULL, NULL, NULL, iv) != 1)
		return -EIO;
	/* GMAC is GCM with everything as additional data and no plaintext */
	if (len1 && EVP_EncryptUpdate(a->ctx, NULL, &outl, aad1, (int)len1) != 1)
		return -EIO;
	if (len2 && EVP_EncryptUpdate(a->ctx, NULL, &outl, aad2, (int)len2) != 1)
		return -EIO;
	if (EVP_EncryptFinal_ex(a->ctx, dummy, &outl) != 1 ||
	    EVP_CIPHER_CTX_ctrl(a->ctx, EVP_CTRL_GCM_GET_TAG, TALLY_AUTH_TAG_LEN, tag) != 1)
		return -EIO;
	return 0;
}

void tally_auth_mark(uint8_t *hdr)
{
	hdr[6] |= (uint8_t)TALLY_F_AUTH;
	memset(hdr + 48, 0, 4); /* crc (offset 48): the tag covers the payload */
}

/* A fresh IV from the context (salt || counter): never repeated within it. */
static void next_iv(struct tally_auth *a, uint8_t *iv)
{
	memcpy(iv, &a->salt, 4);
	memcpy(iv + 4, &a->ctr, 8);
	a->ctr++;
}

int tally_auth_sign_payload(struct tally_auth *a, uint8_t inner[TALLY_AUTH_LEN],
			    const void *payload, size_t len)
{
	if (!a || !a->keyed)
		return -EINVAL;
	next_iv(a, inner);
	return tally_auth_gmac(a, inner, TALLY_AUTH_INNER_PREFIX, TALLY_AUTH_INNER_PREFIX_LEN,
			       payload, len, inner + TALLY_AUTH_IV_LEN);
}

void tally_auth_sess(uint8_t sess[TALLY_AUTH_SESS_LEN], uint64_t run, uint64_t jn)
{
	for (int i = 0; i < 8; i++) {
		sess[i] = (uint8_t)(run >> (8 * i));
		sess[8 + i] = (uint8_t)(jn >> (8 * i));
	}
}

/* The AAD before the payload: n bytes of hdr, then sess when given (a stack copy: no
 * allocation on the datapath). */
static size_t aad_head(uint8_t *out, const uint8_t *hdr, size_t n, const uint8_t *sess)
{
	memcpy(out, hdr, n);
	if (!sess)
		return n;
	memcpy(out + n, sess, TALLY_AUTH_SESS_LEN);
	return n + TALLY_AUTH_SESS_LEN;
}

int tally_auth_sign_result_s(struct tally_auth *a, uint8_t *hdr, const uint8_t *sess,
			     const uint8_t inner[TALLY_AUTH_LEN])
{
	uint8_t *outer = hdr + TALLY_HDR_AUTH;
	uint8_t aad[TALLY_HDR_AUTH + TALLY_AUTH_SESS_LEN];

	if (!a || !a->keyed || !(hdr[6] & TALLY_F_AUTH) || hdr[5] != TALLY_OP_RESULT)
		return -EINVAL;
	memcpy(hdr + TALLY_HDR_LEN, inner, TALLY_AUTH_LEN);
	next_iv(a, outer);
	/* the outer tag covers the header and the inner IV and tag (contiguous), then sess */
	return tally_auth_gmac(a, outer, aad, aad_head(aad, hdr, TALLY_HDR_AUTH, sess), NULL, 0,
			       outer + TALLY_AUTH_IV_LEN);
}

int tally_auth_sign_result(struct tally_auth *a, uint8_t *hdr,
			   const uint8_t inner[TALLY_AUTH_LEN])
{
	return tally_auth_sign_result_s(a, hdr, NULL, inner);
}

int tally_auth_sign_s(struct tally_auth *a, uint8_t *hdr, const uint8_t *sess,
		      const void *payload, size_t len)
{
	uint8_t *iv = hdr + TALLY_HDR_LEN;
	uint8_t aad[TALLY_HDR_LEN + TALLY_AUTH_SESS_LEN];

	if (!a || !a->keyed || !(hdr[6] & TALLY_F_AUTH))
		return -EINVAL;
	if (hdr[5] == TALLY_OP_RESULT) {
		uint8_t inner[TALLY_AUTH_LEN];
		int rc = tally_auth_sign_payload(a, inner, payload, len);
		return rc ? rc : tally_auth_sign_result_s(a, hdr, sess, inner);
	}
	next_iv(a, iv);
	return tally_auth_gmac(a, iv, aad, aad_head(aad, hdr, TALLY_HDR_LEN, sess), payload, len,
			       hdr + TALLY_HDR_LEN + TALLY_AUTH_IV_LEN);
}

int tally_auth_sign(struct tally_auth *a, uint8_t *hdr, const void *payload, size_t len)
{
	return tally_auth_sign_s(a, hdr, NULL, payload, len);
}

/* Recompute the tag of (aad1, aad2) under the IV at blk and compare it with the tag that
 * follows it, in constant time. */
static int check_tag(struct tally_auth *a, const uint8_t *blk, const void *aad1, size_t len1,
		     const void *aad2, size_t len2)
{
	uint8_t tag[TALLY_AUTH_TAG_LEN];

	if (tally_auth_gmac(a, blk, aad1, len1, aad2, len2, tag) != 0)
		return -EBADMSG;
	if (CRYPTO_memcmp(tag, blk + TALLY_AUTH_IV_LEN, TALLY_AUTH_TAG_LEN) != 0)
		return -EBADMSG;
	return 0;
}

int tally_auth_verify_s(struct tally_auth *a, const void *buf, const uint8_t *sess,
			const struct tally_pkt *pkt)
{
	uint8_t aad[TALLY_HDR_AUTH + TALLY_AUTH_SESS_LEN];

	if (!a || !a->keyed || !pkt->auth)
		return -EBADMSG;
	if (pkt->hdr.op != TALLY_OP_RESULT)
		return check_tag(a, pkt->auth, aad, aad_head(aad, buf, TALLY_HDR_LEN, sess),
				 pkt->payload, pkt->hdr.payload_len);
	/* outer first (header, inner IV and tag, sess: cheap), then the payload under the inner */
	if (check_tag(a, pkt->auth + TALLY_AUTH_LEN, aad, aad_head(aad, buf, TALLY_HDR_AUTH, sess),
		      NULL, 0) != 0)
		return -EBADMSG;
	return check_tag(a, pkt->auth, TALLY_AUTH_INNER_PREFIX, TALLY_AUTH_INNER_PREFIX_LEN,
			 pkt->payload, pkt->hdr.payload_len);
}

int tally_auth_verify(struct tally_auth *a, const void *buf, const struct tally_pkt *pkt)
{
	return tally_auth_verify_s(a, buf, NULL, pkt);
}
