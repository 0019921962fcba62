/* SPDX-License-Identifier: Apache-2.0
 * perf_auth_mac.c — the MAC candidates of per-packet authentication on this CPU, through
 * OpenSSL 3 (what `tally-perf engine --auth` prints first): AES-256-GMAC as tally_auth uses
 * it (IV re-set, header and payload as additional data, tag), ChaCha20-Poly1305 with the
 * payload as additional data (the other nonce-based MAC), HMAC-SHA256 and keyed BLAKE2b
 * (no nonce) through EVP_MAC. GB/s of MACed bytes per CPU second of this thread, one
 * context each, keyed once.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include "perf_cmds.h"
#include "perf_util.h"
#include "tally_auth.h"

static const uint8_t pam_key[32] = { 7, 7, 7 };
static uint8_t pam_buf[TALLY_MAX_PAYLOAD];

static double pam_gmac(size_t n, double min_s)
{
	struct tally_auth *a = tally_auth_new();
	uint8_t iv[TALLY_AUTH_IV_LEN] = { 0 }, tag[TALLY_AUTH_TAG_LEN];
	double t0, t = 0;
	long it = 0;
	if (!a || tally_auth_set_key(a, pam_key))
		return -1;
	for (t0 = perf_cpu_now(); (t = perf_cpu_now() - t0) < min_s; it += 64)
		for (int k = 0; k < 64; k++, iv[0]++)
			tally_auth_gmac(a, iv, pam_buf, TALLY_HDR_LEN, pam_buf + TALLY_HDR_LEN,
					n - TALLY_HDR_LEN, tag);
	tally_auth_free(a);
	return (double)n * (double)it / t / 1e9;
}

static double pam_chacha(size_t n, double min_s)
{
	EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
	uint8_t iv[12] = { 0 }, tag[16];
	double t0, t = 0;
	long it = 0;
	int ol;
	if (!x || EVP_EncryptInit_ex(x, EVP_chacha20_poly1305(), NULL, pam_key, NULL) != 1)
		return -1;
	for (t0 = perf_cpu_now(); (t = perf_cpu_now() - t0) < min_s; it += 64)
		for (int k = 0; k < 64; k++, iv[0]++) {
			EVP_EncryptInit_ex(x, NULL, NULL, NULL, iv);
			EVP_EncryptUpdate(x, NULL, &ol, pam_buf, (int)n);
			EVP_EncryptFinal_ex(x, tag, &ol);
			EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_GET_TAG, 16, tag);
		}
	EVP_CIPHER_CTX_free(x);
	return (double)n * (double)it / t / 1e9;
}

static double pam_evp_mac(const char *alg, const char *digest, size_t n, double min_s)
{
	EVP_MAC *m = EVP_MAC_fetch(NULL, alg, NULL);
	EVP_MAC_CTX *x = m ? EVP_MAC_CTX_new(m) : NULL;
	OSSL_PARAM p[2] = { OSSL_PARAM_END, OSSL_PARAM_END };
	uint8_t out[64];
	size_t ol;
	double t0, t = 0, r = -1;
	long it = 0;
	if (digest)
		p[0] = OSSL_PARAM_construct_utf8_string("digest", (char *)digest, 0);
	if (!x || EVP_MAC_init(x, pam_key, sizeof(pam_key), p) != 1)
		goto out;
	for (t0 = perf_cpu_now(); (t = perf_cpu_now() - t0) < min_s; it += 64)
		for (int k = 0; k < 64; k++) {
			EVP_MAC_init(x, NULL, 0, NULL);
			EVP_MAC_update(x, pam_buf, n);
			EVP_MAC_final(x, out, &ol, sizeof(out));
		}
	r = (double)n * (double)it / t / 1e9;
out:
	EVP_MAC_CTX_free(x);
	EVP_MAC_free(m);
	return r;
}

void perf_auth_mac_table(const size_t *sizes, unsigned nsizes, double min_s, int json)
{
	if (!json)
		printf("MAC candidates (GB/s per CPU second; AES-GMAC through tally_auth: %s, the "
		       "others through OpenSSL %s):\n%6s %10s %12s %12s %10s\n", tally_auth_backend(),
		       OpenSSL_version(OPENSSL_VERSION_STRING), "bytes", "AES-GMAC", "ChaCha-Poly",
		       "HMAC-SHA256", "BLAKE2b");
	for (unsigned s = 0; s < nsizes; s++) {
		size_t n = sizes[s] + TALLY_HDR_LEN;
		double g = pam_gmac(n, min_s), c = pam_chacha(n, min_s);
		double h = pam_evp_mac("HMAC", "SHA256", n, min_s);
		double b = pam_evp_mac("BLAKE2BMAC", NULL, n, min_s);
		if (json)
			printf("{\"bench\":\"auth_mac\",\"bytes\":%zu,\"aes256_gmac_gbps\":%.3f,"
			       "\"chacha20_poly1305_gbps\":%.3f,\"hmac_sha256_gbps\":%.3f,"
			       "\"blake2b_gbps\":%.3f}\n", n, g, c, h, b);
		else
			printf("%6zu %10.2f %12.2f %12.2f %10.2f\n", n, g, c, h, b);
	}
	fflush(stdout);
}
