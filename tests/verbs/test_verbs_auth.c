/* SPDX-License-Identifier: Apache-2.0
 * test_verbs_auth.c — authentication of verbs connections at setup (verbs_auth.h), without
 * a device: the connect request's byte layout and its tag recomputed here straight from
 * OpenSSL's AES-256-GCM over the documented layout (a known-answer check of the format),
 * a wrong key, another worker address or core, every bit of the request and accept
 * flipped, random requests, the accept tied to its request, and the replay cache (a nonce
 * seen, a clock out of the window, a forgotten nonce never taken again).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "verbs_auth.h"

static const uint8_t KEY[32] = { 0x10, 0x21, 0x32, 0x43, 0x54, 0x65, 0x76, 0x87,
				 0x98, 0xa9, 0xba, 0xcb, 0xdc, 0xed, 0xfe, 0x0f,
				 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };
static const struct verbs_bind BIND = { .worker_ip = 0x0b02000au, .appliance_ip = 0x0a02000au,
					.port = 0xd223 };

static struct tally_auth *keyed(const uint8_t *key)
{
	struct tally_auth *a = tally_auth_new();
	assert_non_null(a);
	assert_int_equal(tally_auth_set_key(a, key), 0);
	return a;
}

static struct verbs_req sample(void)
{
	struct verbs_req r = { .core = 3, .nslots = 128, .slot_bytes = 9152,
			       .addr = 0x7f1234567000ull, .rkey = 0xabcdef01u, .job = 51,
			       .rank = 1023 };
	for (int i = 0; i < VERBS_NONCE_LEN; i++)
		r.nonce[i] = (uint8_t)(0xa0 + i);
	return r;
}

/* GMAC over aad with iv under KEY, computed here with EVP directly. */
static void ref_gmac(const uint8_t *iv, const uint8_t *aad, int len, uint8_t tag[16])
{
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
	int outl;
	uint8_t dummy[16];

	assert_int_equal(EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), NULL, NULL, NULL), 1);
	assert_int_equal(EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, 12, NULL), 1);
	assert_int_equal(EVP_EncryptInit_ex(c, NULL, NULL, KEY, iv), 1);
	assert_int_equal(EVP_EncryptUpdate(c, NULL, &outl, aad, len), 1);
	assert_int_equal(EVP_EncryptFinal_ex(c, dummy, &outl), 1);
	assert_int_equal(EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, 16, tag), 1);
	EVP_CIPHER_CTX_free(c);
}

static void test_request_layout_kat(void **state)
{
	(void)state;
	struct tally_auth *a = keyed(KEY);
	struct verbs_req r = sample(), d;
	uint8_t q[VERBS_REQ_LEN], aad[16 + 40 + 12], tag[16];

	assert_int_equal(verbs_auth_req_encode(q, &r, a, &BIND), 0);
	/* the documented layout, network byte order */
	static const uint8_t head[8] = { 'T', 'V', 'B', '2', 0, 3, 7, 143 };
	assert_memory_equal(q, head, 8);
	assert_memory_equal(q + 8, &r.addr, 8);
	static const uint8_t mid[12] = { 0xab, 0xcd, 0xef, 0x01, 0, 0, 0, 51, 0x03, 0xff, 0, 0 };
	assert_memory_equal(q + 16, mid, 12);
	assert_memory_equal(q + 28, r.nonce, 12);
	/* tag = GMAC(IV = nonce; "TALLY VERBS REQ\0" || bytes 0..40 || wip || aip || port || 00) */
	memcpy(aad, "TALLY VERBS REQ", 16);
	memcpy(aad + 16, q, 40);
	memcpy(aad + 56, &BIND.worker_ip, 4);
	memcpy(aad + 60, &BIND.appliance_ip, 4);
	memcpy(aad + 64, &BIND.port, 2);
	aad[66] = aad[67] = 0;
	ref_gmac(r.nonce, aad, sizeof(aad), tag);
	assert_memory_equal(q + 40, tag, 16);
	/* decode gives the fields back; the tag verifies */
	assert_true(verbs_auth_is_req(q, sizeof(q)));
	assert_int_equal(verbs_auth_req_decode(q, sizeof(q), &d), 0);
	assert_int_equal(d.core, 3);
	assert_int_equal(d.nslots, 128);
	assert_int_equal(d.slot_bytes, 9152);
	assert_true(d.addr == r.addr);
	assert_int_equal(d.rkey, r.rkey);
	assert_int_equal(d.job, 51);
	assert_int_equal(d.rank, 1023);
	assert_memory_equal(d.nonce, r.nonce, 12);
	assert_int_equal(verbs_auth_req_verify(a, q, &BIND), 0);
	/* rdma_cm pads private data: a longer buffer decodes the same */
	uint8_t padded[92] = { 0 };
	memcpy(padded, q, sizeof(q));
	assert_int_equal(verbs_auth_req_decode(padded, sizeof(padded), &d), 0);
	tally_auth_free(a);
}

static void test_request_refusals(void **state)
{
	(void)state;
	struct tally_auth *a = keyed(KEY), *other;
	uint8_t k2[32];
	struct verbs_req r = sample(), d;
	uint8_t q[VERBS_REQ_LEN];
	struct verbs_bind b = BIND;

	memcpy(k2, KEY, 32);
	k2[31] ^= 1;
	other = keyed(k2);
	assert_int_equal(verbs_auth_req_encode(q, &r, a, &BIND), 0);
	/* the wrong key */
	assert_int_equal(verbs_auth_req_verify(other, q, &BIND), -EBADMSG);
	/* the same request from another worker address, to another appliance or port */
	b.worker_ip ^= 1;
	assert_int_equal(verbs_auth_req_verify(a, q, &b), -EBADMSG);
	b = BIND, b.appliance_ip ^= 0x100;
	assert_int_equal(verbs_auth_req_verify(a, q, &b), -EBADMSG);
	b = BIND, b.port ^= 1;
	assert_int_equal(verbs_auth_req_verify(a, q, &b), -EBADMSG);
	/* every bit flipped: refused by decode or by the tag, never accepted */
	for (unsigned i = 0; i < 8 * VERBS_REQ_LEN; i++) {
		q[i / 8] ^= (uint8_t)(1u << (i % 8));
		assert_true(verbs_auth_req_decode(q, sizeof(q), &d) != 0 ||
			    verbs_auth_req_verify(a, q, &BIND) == -EBADMSG);
		q[i / 8] ^= (uint8_t)(1u << (i % 8));
	}
	assert_int_equal(verbs_auth_req_verify(a, q, &BIND), 0);
	/* malformed: short, the v1 magic, reserved bits, slot count beyond 2^31 */
	assert_int_equal(verbs_auth_req_decode(q, VERBS_REQ_LEN - 1, &d), -EPROTO);
	assert_int_equal(verbs_auth_req_decode(NULL, 0, &d), -EPROTO);
	q[3] = '1';
	assert_false(verbs_auth_is_req(q, sizeof(q)));
	assert_int_equal(verbs_auth_req_decode(q, sizeof(q), &d), -EPROTO);
	q[3] = '2';
	q[27] = 1;
	assert_int_equal(verbs_auth_req_decode(q, sizeof(q), &d), -EPROTO);
	q[27] = 0;
	q[6] = 32;
	assert_int_equal(verbs_auth_req_decode(q, sizeof(q), &d), -EPROTO);
	/* fields that do not fit, and no key */
	r.rank = 70000;
	assert_int_equal(verbs_auth_req_encode(q, &r, a, &BIND), -EINVAL);
	r = sample(), r.nslots = 96;
	assert_int_equal(verbs_auth_req_encode(q, &r, a, &BIND), -EINVAL);
	r = sample(), r.core = 1u << 16;
	assert_int_equal(verbs_auth_req_encode(q, &r, a, &BIND), -EINVAL);
	r = sample();
	struct tally_auth *none = tally_auth_new();
	assert_int_equal(verbs_auth_req_encode(q, &r, none, &BIND), -EINVAL);
	tally_auth_free(none);
	tally_auth_free(other);
	tally_auth_free(a);
}

/* Random requests (the magic set, the rest random): none verifies. */
static void test_request_fuzz(void **state)
{
	(void)state;
	struct tally_auth *a = keyed(KEY);
	struct verbs_req d;
	uint8_t q[VERBS_REQ_LEN];
	unsigned seed = 12345, decoded = 0;

	for (int n = 0; n < 20000; n++) {
		for (unsigned i = 0; i < sizeof(q); i++)
			q[i] = (uint8_t)(rand_r(&seed) >> 7);
		memcpy(q, "TVB2", 4);
		if (n & 1)
			q[26] = q[27] = 0;
		if (verbs_auth_req_decode(q, sizeof(q), &d) == 0) {
			decoded++;
			assert_true(d.nslots && !(d.nslots & (d.nslots - 1)));
		}
		assert_int_equal(verbs_auth_req_verify(a, q, &BIND), -EBADMSG);
	}
	assert_true(decoded > 1000); /* the fuzz reached the tag check, not only decode */
	tally_auth_free(a);
}

static void test_accept(void **state)
{
	(void)state;
	struct tally_auth *a = keyed(KEY), *w = keyed(KEY), *other;
	uint8_t k2[32] = { 5 };
	struct verbs_req r = sample();
	uint8_t q[VERBS_REQ_LEN], q2[VERBS_REQ_LEN], rep[VERBS_REP_LEN], rep2[VERBS_REP_LEN];
	uint8_t aad[16 + 44 + 56 + 12], tag[16];

	other = keyed(k2);
	assert_int_equal(verbs_auth_req_encode(q, &r, w, &BIND), 0);
	memset(rep, 0x5a, VERBS_REP_WIRE); /* the ring wire */
	assert_int_equal(verbs_auth_rep_sign(rep, q, a, &BIND), 0);
	assert_int_equal(verbs_auth_rep_verify(rep, sizeof(rep), q, w, &BIND), 0);
	/* the layout: GMAC(IV = the accept's nonce; "TALLY VERBS REP\0" || accept 0..44 ||
	 * request || addresses) */
	memcpy(aad, "TALLY VERBS REP", 16);
	memcpy(aad + 16, rep, 44);
	memcpy(aad + 60, q, 56);
	memcpy(aad + 116, &BIND.worker_ip, 4);
	memcpy(aad + 120, &BIND.appliance_ip, 4);
	memcpy(aad + 124, &BIND.port, 2);
	aad[126] = aad[127] = 0;
	ref_gmac(rep + 32, aad, sizeof(aad), tag);
	assert_memory_equal(rep + 44, tag, 16);
	/* a fresh nonce per accept */
	memcpy(rep2, rep, sizeof(rep));
	assert_int_equal(verbs_auth_rep_sign(rep2, q, a, &BIND), 0);
	assert_memory_not_equal(rep + 32, rep2 + 32, 12);
	/* signed by another key (not the job's appliance): refused */
	assert_int_equal(verbs_auth_rep_sign(rep2, q, other, &BIND), 0);
	assert_int_equal(verbs_auth_rep_verify(rep2, sizeof(rep2), q, w, &BIND), -EBADMSG);
	/* a recorded accept replayed to another request: refused */
	r.nonce[11] ^= 1;
	assert_int_equal(verbs_auth_req_encode(q2, &r, w, &BIND), 0);
	assert_int_equal(verbs_auth_rep_verify(rep, sizeof(rep), q2, w, &BIND), -EBADMSG);
	/* every bit of the accept flipped; a short or missing accept (an old appliance) */
	for (unsigned i = 0; i < 8 * VERBS_REP_LEN; i++) {
		rep[i / 8] ^= (uint8_t)(1u << (i % 8));
		assert_int_equal(verbs_auth_rep_verify(rep, sizeof(rep), q, w, &BIND), -EBADMSG);
		rep[i / 8] ^= (uint8_t)(1u << (i % 8));
	}
	assert_int_equal(verbs_auth_rep_verify(rep, VERBS_REP_WIRE, q, w, &BIND), -EBADMSG);
	assert_int_equal(verbs_auth_rep_verify(NULL, 0, q, w, &BIND), -EBADMSG);
	tally_auth_free(other);
	tally_auth_free(w);
	tally_auth_free(a);
}

static void nonce_at(uint8_t n[VERBS_NONCE_LEN], uint32_t t, uint32_t salt)
{
	assert_int_equal(verbs_auth_nonce(n, t), 0);
	memset(n + 4, 0, 8); /* distinct nonces the test can name again */
	memcpy(n + 4, &salt, 4);
}

static void test_replay_cache(void **state)
{
	(void)state;
	struct verbs_replay *rp = calloc(1, sizeof(*rp));
	uint8_t n[VERBS_NONCE_LEN], first[VERBS_NONCE_LEN];
	const uint32_t now = 1800000000u;

	assert_non_null(rp);
	assert_int_equal(verbs_auth_nonce(n, now), 0);
	assert_int_equal(verbs_auth_nonce_time(n), now);
	assert_int_equal(verbs_replay_check(rp, n, now), 0);
	assert_int_equal(verbs_replay_check(rp, n, now + 5), -EALREADY); /* replayed */
	/* clocks: within the window either way, outside it refused */
	nonce_at(n, now - VERBS_AUTH_WINDOW_S, 1);
	assert_int_equal(verbs_replay_check(rp, n, now), 0);
	nonce_at(n, now - VERBS_AUTH_WINDOW_S - 1, 2);
	assert_int_equal(verbs_replay_check(rp, n, now), -ETIME);
	nonce_at(n, now + VERBS_AUTH_WINDOW_S + 1, 3);
	assert_int_equal(verbs_replay_check(rp, n, now), -ETIME);
	/* fill the cache: the oldest are forgotten, and so is every nonce at or before the
	 * newest forgotten time: a forgotten nonce replayed is stale, never accepted */
	free(rp);
	rp = calloc(1, sizeof(*rp));
	nonce_at(first, now - 10, 0xffffffffu);
	assert_int_equal(verbs_replay_check(rp, first, now), 0);
	for (uint32_t i = 0; i < VERBS_REPLAY_SLOTS; i++) {
		nonce_at(n, now - 10 + i / 1000, i);
		assert_int_equal(verbs_replay_check(rp, n, now), 0);
	}
	assert_int_equal(rp->floor_s, now - 10);
	assert_int_equal(verbs_replay_check(rp, first, now), -ETIME);
	nonce_at(n, now - 10 + (VERBS_REPLAY_SLOTS - 1) / 1000, VERBS_REPLAY_SLOTS - 1);
	assert_int_equal(verbs_replay_check(rp, n, now), -EALREADY); /* still remembered */
	nonce_at(n, now, 0x77777777u);
	assert_int_equal(verbs_replay_check(rp, n, now), 0); /* a fresh one still goes in */
	free(rp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_layout_kat),
		cmocka_unit_test(test_request_refusals),
		cmocka_unit_test(test_request_fuzz),
		cmocka_unit_test(test_accept),
		cmocka_unit_test(test_replay_cache),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
