/* SPDX-License-Identifier: Apache-2.0
 * test_auth_kat.c — the GMAC wrapper (dataplane/auth) against published vectors: NIST CAVP
 * gcmEncryptExtIV256.rsp (PTlen = 0, i.e. GMAC) and McGrew & Viega's GCM test case 13;
 * then sign/verify round trips, tampering, IV freshness and key files. Run once per GMAC
 * backend (TALLY_AUTH_BACKEND, tests/security/meson.build).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <errno.h>

#include <cmocka.h>

#include "tally_auth.h"

static size_t unhex(const char *s, uint8_t *out)
{
	size_t n = strlen(s) / 2;
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		assert_int_equal(sscanf(s + 2 * i, "%2x", &v), 1);
		out[i] = (uint8_t)v;
	}
	return n;
}

struct kat {
	const char *key, *iv, *aad, *tag;
};

static const struct kat kats[] = {
	/* NIST CAVP gcmEncryptExtIV256.rsp, [PTlen = 0] */
	{ "b52c505a37d78eda5dd34f20c22540ea1b58963cf8e5bf8ffa85f9f2492505b4",
	  "516c33929df5a3284ff463d7", "", "bdc1ac884d332457a1d2664f168c76f0" },
	{ "78dc4e0aaf52d935c3c01eea57428f00ca1fd475f5da86a49c8dd73d68c8e223",
	  "d79cf22d504cc793c3fb6c8a", "b96baa8c1c75a671bfb2d08d06be5f36",
	  "3e5d486aa2e30b22e040b85723a06e76" },
	{ "886cff5f3e6b8d0e1ad0a38fcdb26de97e8acbe79f6bed66959a598fa5047d65",
	  "3a8efa1cd74bbab5448f9945", "519fee519d25c7a304d6c6aa1897ee1eb8c59655",
	  "f6d47505ec96c98a42dc3ae719877b87" },
	/* McGrew & Viega, "The Galois/Counter Mode of Operation", test case 13 */
	{ "0000000000000000000000000000000000000000000000000000000000000000",
	  "000000000000000000000000", "", "530f8afbc74536b9a963b4f1c4cb738b" },
};

static void test_kat(void **state)
{
	(void)state;
	struct tally_auth *a = tally_auth_new();
	assert_non_null(a);
	for (size_t i = 0; i < sizeof(kats) / sizeof(kats[0]); i++) {
		uint8_t key[32], iv[12], aad[64], want[16], tag[16];
		assert_int_equal(unhex(kats[i].key, key), 32);
		assert_int_equal(unhex(kats[i].iv, iv), 12);
		size_t n = unhex(kats[i].aad, aad);
		unhex(kats[i].tag, want);
		assert_int_equal(tally_auth_set_key(a, key), 0);
		assert_int_equal(tally_auth_gmac(a, iv, aad, n, NULL, 0, tag), 0);
		assert_memory_equal(tag, want, 16);
		/* the same bytes split in two parts (header, payload) give the same tag */
		assert_int_equal(tally_auth_gmac(a, iv, aad, n / 2, aad + n / 2, n - n / 2, tag), 0);
		assert_memory_equal(tag, want, 16);
		/* one bit of AAD off: another tag */
		if (n) {
			aad[0] ^= 1;
			assert_int_equal(tally_auth_gmac(a, iv, aad, n, NULL, 0, tag), 0);
			assert_memory_not_equal(tag, want, 16);
		}
	}
	tally_auth_free(a);
}

/* A signed PUSH: header + auth block + payload in one buffer. */
static size_t build(struct tally_auth *a, uint8_t *buf, uint32_t round, const float *pl,
		    uint32_t n)
{
	struct tally_hdr h;
	memset(&h, 0, sizeof(h));
	h.op = TALLY_OP_PUSH;
	h.job_id = 3;
	h.token = 42;
	h.round = round;
	h.count = n;
	h.dtype = TALLY_DT_F32;
	h.flags = TALLY_F_AUTH;
	h.payload_len = n * 4;
	tally_proto_encode_hdr(buf, &h);
	memcpy(buf + TALLY_HDR_AUTH, pl, n * 4);
	assert_int_equal(tally_auth_sign(a, buf, buf + TALLY_HDR_AUTH, n * 4), 0);
	return TALLY_HDR_AUTH + n * 4;
}

static void test_sign_verify(void **state)
{
	(void)state;
	uint8_t key[32], key2[32], buf[TALLY_HDR_MAX + 4096], iv0[12];
	float pl[1024];
	struct tally_pkt p;
	for (int i = 0; i < 32; i++) {
		key[i] = (uint8_t)(i * 7 + 1);
		key2[i] = key[i] ^ (i == 31);
	}
	for (int i = 0; i < 1024; i++)
		pl[i] = (float)i * 0.5f;
	struct tally_auth *tx = tally_auth_new(), *rx = tally_auth_new(), *bad = tally_auth_new();
	assert_int_equal(tally_auth_set_key(tx, key), 0);
	assert_int_equal(tally_auth_set_key(rx, key), 0);
	assert_int_equal(tally_auth_set_key(bad, key2), 0);
	assert_true(tally_auth_key_equal(rx, key));
	assert_false(tally_auth_key_equal(rx, key2));

	size_t len = build(tx, buf, 5, pl, 1024);
	assert_int_equal(tally_proto_decode(buf, len, &p), TALLY_OK);
	assert_non_null(p.auth);
	assert_int_equal(tally_auth_verify(rx, buf, &p), 0);
	assert_int_not_equal(tally_auth_verify(bad, buf, &p), 0); /* wrong key */
	memcpy(iv0, buf + TALLY_HDR_LEN, 12);
	/* every byte of header, IV, tag and payload is covered */
	size_t probes[] = { 8, 24, 28, 56, TALLY_HDR_LEN, TALLY_HDR_LEN + 13, TALLY_HDR_AUTH,
			    len - 1 };
	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
		buf[probes[i]] ^= 0x10;
		if (tally_proto_decode(buf, len, &p) == TALLY_OK)
			assert_int_not_equal(tally_auth_verify(rx, buf, &p), 0);
		buf[probes[i]] ^= 0x10;
	}
	/* the same content signed again gets a fresh IV (counter), and still verifies */
	build(tx, buf, 5, pl, 1024);
	assert_memory_not_equal(buf + TALLY_HDR_LEN, iv0, 12);
	assert_int_equal(tally_proto_decode(buf, len, &p), TALLY_OK);
	assert_int_equal(tally_auth_verify(rx, buf, &p), 0);
	/* the auth block without the flag (or the reverse) does not decode as signed */
	assert_int_equal(tally_proto_decode(buf, len, &p), TALLY_OK);
	buf[6] &= (uint8_t)~TALLY_F_AUTH;
	assert_int_not_equal(tally_proto_decode(buf, len, &p), TALLY_OK);
	/* a key cleared: nothing verifies or signs */
	tally_auth_clear(rx);
	buf[6] |= TALLY_F_AUTH;
	assert_int_equal(tally_proto_decode(buf, len, &p), TALLY_OK);
	assert_int_not_equal(tally_auth_verify(rx, buf, &p), 0);
	assert_int_not_equal(tally_auth_sign(rx, buf, pl, 16), 0);
	tally_auth_free(tx);
	tally_auth_free(rx);
	tally_auth_free(bad);
}

/* A RESULT for rank `rank` signed in two levels with a shared inner (payload) tag. */
static size_t build_result(struct tally_auth *a, uint8_t *buf, uint32_t rank, const float *pl,
			   uint32_t n, const uint8_t inner[TALLY_AUTH_LEN])
{
	struct tally_hdr h;
	memset(&h, 0, sizeof(h));
	h.op = TALLY_OP_RESULT;
	h.job_id = 3;
	h.token = 42;
	h.rank = rank;
	h.round = 9;
	h.count = n;
	h.dtype = TALLY_DT_F32;
	h.flags = TALLY_F_AUTH;
	h.payload_len = n * 4;
	tally_proto_encode_hdr(buf, &h);
	assert_int_equal(tally_proto_hdr_len(buf), TALLY_HDR_MAX);
	memcpy(buf + TALLY_HDR_MAX, pl, n * 4);
	assert_int_equal(tally_auth_sign_result(a, buf, inner), 0);
	return TALLY_HDR_MAX + n * 4;
}

static int verifies(struct tally_auth *a, const uint8_t *buf, size_t len)
{
	struct tally_pkt p;
	return tally_proto_decode(buf, len, &p) == TALLY_OK && tally_auth_verify(a, buf, &p) == 0;
}

/* RESULT: one payload tag per chunk, one header tag per copy; the two levels are the GMAC
 * of the primitive, and no byte, splice or swap gets through. */
static void test_result_split(void **state)
{
	(void)state;
	static uint8_t b0[TALLY_HDR_MAX + 1024], b1[TALLY_HDR_MAX + 1024], b2[TALLY_HDR_MAX + 1024];
	uint8_t key[32], inner[TALLY_AUTH_LEN], inner2[TALLY_AUTH_LEN], tag[16];
	float pl[256], pl2[256];
	for (int i = 0; i < 32; i++)
		key[i] = (uint8_t)(i * 5 + 3);
	for (int i = 0; i < 256; i++) {
		pl[i] = (float)i;
		pl2[i] = (float)i + (i == 7);
	}
	struct tally_auth *tx = tally_auth_new(), *rx = tally_auth_new();
	assert_int_equal(tally_auth_set_key(tx, key), 0);
	assert_int_equal(tally_auth_set_key(rx, key), 0);
	assert_int_equal(tally_auth_sign_payload(tx, inner, pl, sizeof(pl)), 0);
	size_t len = build_result(tx, b0, 0, pl, 256, inner);
	build_result(tx, b1, 1, pl, 256, inner);
	assert_true(verifies(rx, b0, len));
	assert_true(verifies(rx, b1, len));
	/* the same inner block in both copies, distinct outer IVs (and distinct from inner's) */
	assert_memory_equal(b0 + TALLY_HDR_LEN, b1 + TALLY_HDR_LEN, TALLY_AUTH_LEN);
	assert_memory_not_equal(b0 + TALLY_HDR_AUTH, b1 + TALLY_HDR_AUTH, TALLY_AUTH_IV_LEN);
	assert_memory_not_equal(b0 + TALLY_HDR_AUTH, inner, TALLY_AUTH_IV_LEN);
	/* both levels are the primitive's GMAC: inner over prefix||payload, outer over
	 * hdr||inner; the payload alone (no prefix) gives another tag */
	assert_int_equal(tally_auth_gmac(rx, inner, "TALLY RESULT PL", 16, pl, sizeof(pl), tag), 0);
	assert_memory_equal(tag, inner + TALLY_AUTH_IV_LEN, 16);
	assert_int_equal(tally_auth_gmac(rx, inner, pl, sizeof(pl), NULL, 0, tag), 0);
	assert_memory_not_equal(tag, inner + TALLY_AUTH_IV_LEN, 16);
	assert_int_equal(tally_auth_gmac(rx, inner, TALLY_AUTH_INNER_PREFIX, 16, pl, sizeof(pl),
					 tag), 0);
	assert_memory_equal(tag, inner + TALLY_AUTH_IV_LEN, 16);
	assert_int_equal(tally_auth_gmac(rx, b0 + TALLY_HDR_AUTH, b0, TALLY_HDR_LEN,
					 inner, TALLY_AUTH_LEN, tag), 0);
	assert_memory_equal(tag, b0 + TALLY_HDR_AUTH + TALLY_AUTH_IV_LEN, 16);
	/* every byte: header, inner IV/tag, outer IV/tag, payload */
	size_t probes[] = { 5, 12, 28, 56, TALLY_HDR_LEN, TALLY_HDR_LEN + 20, TALLY_HDR_AUTH,
			    TALLY_HDR_AUTH + 13, TALLY_HDR_MAX, len - 1 };
	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
		b0[probes[i]] ^= 0x04;
		assert_false(verifies(rx, b0, len));
		b0[probes[i]] ^= 0x04;
	}
	assert_true(verifies(rx, b0, len));
	/* another chunk's payload under this header and inner block (a swapped payload) */
	memcpy(b2, b0, len);
	memcpy(b2 + TALLY_HDR_MAX, pl2, sizeof(pl2));
	assert_false(verifies(rx, b2, len));
	/* a genuine inner block of another payload spliced under this copy's outer tag */
	assert_int_equal(tally_auth_sign_payload(tx, inner2, pl2, sizeof(pl2)), 0);
	memcpy(b2 + TALLY_HDR_LEN, inner2, TALLY_AUTH_LEN);
	assert_false(verifies(rx, b2, len));
	/* rank 1's copy relabelled for rank 0 (its outer tag covers the rank) */
	memcpy(b2, b1, len);
	b2[12] = 0;
	assert_false(verifies(rx, b2, len));
	/* the one-call form signs both levels too; a PUSH-sized block on a RESULT does not decode */
	build(tx, b2, 9, pl, 256);
	b2[5] = TALLY_OP_RESULT;
	struct tally_pkt p;
	assert_int_equal(tally_proto_decode(b2, TALLY_HDR_AUTH + 1024, &p), TALLY_R_LEN_MISMATCH);
	memcpy(b2 + TALLY_HDR_MAX, pl, sizeof(pl));
	assert_int_equal(tally_auth_sign(tx, b2, pl, sizeof(pl)), 0);
	assert_true(verifies(rx, b2, len));
	tally_auth_free(tx);
	tally_auth_free(rx);
}

/* The decoder's side of the auth block: its length, no CRC, names of the new reasons. */
static void test_decode_auth(void **state)
{
	(void)state;
	uint8_t buf[TALLY_HDR_MAX + 64];
	struct tally_hdr h;
	struct tally_pkt p;
	memset(&h, 0, sizeof(h));
	memset(buf, 0, sizeof(buf));
	h.op = TALLY_OP_PUSH;
	h.count = 16;
	h.dtype = TALLY_DT_F32;
	h.flags = TALLY_F_AUTH;
	h.payload_len = 64;
	tally_proto_encode_hdr(buf, &h);
	assert_int_equal(tally_proto_hdr_len(buf), TALLY_HDR_AUTH);
	assert_int_equal(tally_proto_decode(buf, TALLY_HDR_AUTH + 64, &p), TALLY_OK);
	assert_ptr_equal(p.auth, buf + TALLY_HDR_LEN);
	assert_ptr_equal(p.payload, buf + TALLY_HDR_AUTH);
	/* the block missing (a v1-sized packet with the flag), or cut short */
	assert_int_equal(tally_proto_decode(buf, TALLY_HDR_LEN + 64, &p), TALLY_R_LEN_MISMATCH);
	assert_int_equal(tally_proto_decode(buf, TALLY_HDR_LEN + 10, &p), TALLY_R_LEN_MISMATCH);
	/* a CRC on an authenticated packet is refused (the tag covers the payload) */
	h.crc = 1;
	tally_proto_encode_hdr(buf, &h);
	assert_int_equal(tally_proto_decode(buf, TALLY_HDR_AUTH + 64, &p), TALLY_R_BAD_CRC);
	/* without the flag, the same bytes are 28 too many */
	h.crc = 0;
	h.flags = 0;
	tally_proto_encode_hdr(buf, &h);
	assert_int_equal(tally_proto_decode(buf, TALLY_HDR_AUTH + 64, &p), TALLY_R_LEN_MISMATCH);
	/* HELD may carry it beside MISSING */
	memset(&h, 0, sizeof(h));
	h.op = TALLY_OP_HELD;
	h.count = 4;
	h.flags = TALLY_F_AUTH | TALLY_F_MISSING;
	tally_proto_encode_hdr(buf, &h);
	assert_int_equal(tally_proto_decode(buf, TALLY_HDR_AUTH, &p), TALLY_OK);
	h.flags = TALLY_F_AUTH | TALLY_F_MISSING | TALLY_F_RESEND;
	tally_proto_encode_hdr(buf, &h);
	assert_int_equal(tally_proto_decode(buf, TALLY_HDR_AUTH, &p), TALLY_R_BAD_FLAGS);
	/* the JOIN nonce travels in reserved */
	memset(&h, 0, sizeof(h));
	h.op = TALLY_OP_BYE;
	h.reserved = 0x1122334455667788ull;
	tally_proto_finish(buf, &h, NULL, 0);
	assert_int_equal(tally_proto_decode(buf, TALLY_HDR_LEN, &p), TALLY_OK);
	assert_true(p.hdr.reserved == 0x1122334455667788ull);
	assert_null(p.auth);
	assert_string_equal(tally_reason_name(TALLY_R_BAD_MAC), "bad_mac");
	assert_string_equal(tally_reason_name(TALLY_R_AUTH_REQUIRED), "auth_required");
	assert_string_equal(tally_reason_name(TALLY_R_NO_KEY), "no_key");
	assert_string_equal(tally_reason_name(TALLY_R_REPLAY), "replay");
}

static void write_file(const char *path, const void *d, size_t n, mode_t mode)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(d, 1, n, f), n);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
}

static void test_key_file(void **state)
{
	(void)state;
	char path[] = "/tmp/tally_auth_kat_XXXXXX", err[256];
	uint8_t key[32], raw[32];
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	const char *hex = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n";
	write_file(path, hex, strlen(hex), 0600);
	assert_int_equal(tally_auth_key_load(path, key, err, sizeof(err)), 0);
	for (int i = 0; i < 32; i++)
		assert_int_equal(key[i], i);
	for (int i = 0; i < 32; i++)
		raw[i] = (uint8_t)(255 - i);
	write_file(path, raw, 32, 0400);
	assert_int_equal(tally_auth_key_load(path, key, err, sizeof(err)), 0);
	assert_memory_equal(key, raw, 32);
	/* short, not hex, readable by others, missing: refused with the file named */
	write_file(path, raw, 16, 0600);
	assert_int_equal(tally_auth_key_load(path, key, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, path));
	assert_non_null(strstr(err, "16 bytes"));
	write_file(path, "zz0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", 64,
		   0600);
	assert_int_equal(tally_auth_key_load(path, key, err, sizeof(err)), -EINVAL);
	write_file(path, raw, 32, 0644);
	assert_int_equal(tally_auth_key_load(path, key, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "chmod 600"));
	unlink(path);
	assert_true(tally_auth_key_load(path, key, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "cannot read"));
	assert_true(tally_auth_key_load("", key, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, TALLY_AUTH_KEY_ENV));
}

/* The backend asked for in TALLY_AUTH_BACKEND is the one that runs (meson runs this file
 * once per backend), so each backend meets the vectors above. */
static void test_backend(void **state)
{
	(void)state;
	const char *want = getenv(TALLY_AUTH_BACKEND_ENV), *got = tally_auth_backend();
	assert_non_null(got);
	printf("GMAC backend: %s\n", got);
	if (want && *want)
		assert_int_equal(strncmp(got, want, strlen(want)), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_backend),
		cmocka_unit_test(test_kat),
		cmocka_unit_test(test_sign_verify),
		cmocka_unit_test(test_result_split),
		cmocka_unit_test(test_decode_auth),
		cmocka_unit_test(test_key_file),
	};
	tally_auth_select_backend(getenv(TALLY_AUTH_BACKEND_ENV)); /* the program's edge */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
