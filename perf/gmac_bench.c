/* SPDX-License-Identifier: Apache-2.0
 * gmac_bench.c — tally-gmac-bench: AES-256-GMAC through OpenSSL EVP (as dataplane/auth
 * uses it: IV re-set, a 64-byte header and the payload as additional data, tag) against
 * intel-ipsec-mb's imb_aes_gmac (key expanded once, init/update/finalize per message), on
 * the same buffers in one run, repetitions interleaved. Before timing, both must give the
 * same tag for the same key, IV and data (GMAC is GMAC), or the bench fails.
 *
 *   tally-gmac-bench [--reps N] [--min-time S] [SIZE...]   (sizes in bytes; default 64 1024 8192)
 *
 * Prints the arch path ipsec-mb chose (init_mb_mgr_auto), then per size: GB/s of MACed
 * bytes per CPU second of this thread for each library (median of reps) and their ratio
 * (median of per-repetition ratios); and ipsec-mb's GHASH alone over the same bytes (rounded
 * down to 16), the ceiling of any GMAC on this CPU (GMAC = GHASH + one AES block).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <intel-ipsec-mb.h>
#include <openssl/evp.h>

#include "perf_util.h"
#include "tally_auth.h"

#define GB_HDR 64
#define GB_MAX 65536
#define GB_MAXSZ 16

static uint8_t gb_buf[GB_MAX] __attribute__((aligned(64)));
static const uint8_t gb_key[32] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13 };

struct gb_ctx {
	EVP_CIPHER_CTX *evp;
	IMB_MGR *mgr;
	struct gcm_key_data kd __attribute__((aligned(64)));
	struct gcm_context_data cd;
};

/* Header and payload as two parts, as tally_auth_gmac does. */
static int gb_evp(struct gb_ctx *c, const uint8_t *iv, size_t n, uint8_t *tag)
{
	int ol = 0;
	uint8_t dummy[16];
	size_t h = n < GB_HDR ? n : GB_HDR;
	if (EVP_EncryptInit_ex(c->evp, NULL, NULL, NULL, iv) != 1 ||
	    EVP_EncryptUpdate(c->evp, NULL, &ol, gb_buf, (int)h) != 1 ||
	    (n > h && EVP_EncryptUpdate(c->evp, NULL, &ol, gb_buf + h, (int)(n - h)) != 1) ||
	    EVP_EncryptFinal_ex(c->evp, dummy, &ol) != 1 ||
	    EVP_CIPHER_CTX_ctrl(c->evp, EVP_CTRL_GCM_GET_TAG, 16, tag) != 1)
		return -EIO;
	return 0;
}

static int gb_imb(struct gb_ctx *c, const uint8_t *iv, size_t n, uint8_t *tag)
{
	size_t h = n < GB_HDR ? n : GB_HDR;
	IMB_AES256_GMAC_INIT(c->mgr, &c->kd, &c->cd, iv, 12);
	IMB_AES256_GMAC_UPDATE(c->mgr, &c->kd, &c->cd, gb_buf, h);
	if (n > h)
		IMB_AES256_GMAC_UPDATE(c->mgr, &c->kd, &c->cd, gb_buf + h, n - h);
	IMB_AES256_GMAC_FINALIZE(c->mgr, &c->kd, &c->cd, tag, 16);
	return 0;
}

/* GHASH alone, no IV set-up and no AES block: what a GMAC cannot beat. */
static int gb_ghash(struct gb_ctx *c, const uint8_t *iv, size_t n, uint8_t *tag)
{
	memcpy(tag, iv, 12); /* a changing start state, like the IV */
	memset(tag + 12, 0, 4);
	IMB_GHASH(c->mgr, &c->kd, gb_buf, n & ~(size_t)15, tag, 16);
	return 0;
}

typedef int (*gb_fn)(struct gb_ctx *, const uint8_t *, size_t, uint8_t *);

static double gb_rate(struct gb_ctx *c, gb_fn fn, size_t n, double min_s)
{
	uint8_t iv[12] = { 9 }, tag[16];
	double t0 = perf_cpu_now(), t;
	long it = 0;
	do {
		for (int k = 0; k < 256; k++, iv[11]++)
			if (fn(c, iv, n, tag))
				return -1;
		it += 256;
	} while ((t = perf_cpu_now() - t0) < min_s);
	return (double)n * (double)it / t / 1e9;
}

/* Same tag from both for every size (and a few odd splits and lengths). */
static int gb_check(struct gb_ctx *c, const size_t *sz, int nsz)
{
	static const size_t odd[] = { 0, 1, 15, 16, 17, 63, 65, 100, 1000 };
	for (int i = 0; i < nsz + (int)(sizeof(odd) / sizeof(odd[0])); i++) {
		size_t n = i < nsz ? sz[i] : odd[i - nsz];
		uint8_t iv[12] = { 3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, (uint8_t)i }, t1[16], t2[16];
		if (gb_evp(c, iv, n, t1) || gb_imb(c, iv, n, t2))
			return -EIO;
		if (memcmp(t1, t2, 16) != 0) {
			fprintf(stderr, "tally-gmac-bench: tags differ at %zu bytes\n", n);
			return -EBADMSG;
		}
	}
	return 0;
}

static int gb_setup(struct gb_ctx *c, IMB_ARCH *arch)
{
	c->mgr = alloc_mb_mgr(0);
	c->evp = EVP_CIPHER_CTX_new();
	if (!c->mgr || !c->evp)
		return -ENOMEM;
	init_mb_mgr_auto(c->mgr, arch);
	if (imb_get_errno(c->mgr) != 0) {
		fprintf(stderr, "tally-gmac-bench: init_mb_mgr_auto: %s\n",
			imb_get_strerror(imb_get_errno(c->mgr)));
		return -EIO;
	}
	IMB_AES256_GCM_PRE(c->mgr, gb_key, &c->kd);
	if (EVP_EncryptInit_ex(c->evp, EVP_aes_256_gcm(), NULL, gb_key, NULL) != 1 ||
	    EVP_CIPHER_CTX_ctrl(c->evp, EVP_CTRL_GCM_SET_IVLEN, 12, NULL) != 1)
		return -EIO;
	return 0;
}

static int gb_args(int argc, char **argv, int *reps, double *min_s, size_t *sz, int *nsz)
{
	*nsz = 0;
	for (int i = 1; i < argc; i++) {
		char *end;
		if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
			*reps = (int)strtol(argv[++i], &end, 10);
			if (*end || *reps < 1 || *reps > 101)
				goto bad;
		} else if (!strcmp(argv[i], "--min-time") && i + 1 < argc) {
			*min_s = strtod(argv[++i], &end);
			if (*end || !(*min_s > 0 && *min_s <= 10))
				goto bad;
		} else {
			unsigned long v = strtoul(argv[i], &end, 10);
			if (*end || v < 1 || v > GB_MAX || *nsz >= GB_MAXSZ)
				goto bad;
			sz[(*nsz)++] = v;
		}
	}
	return 0;
bad:
	fprintf(stderr, "usage: tally-gmac-bench [--reps 1..101] [--min-time 0..10] "
		"[SIZE 1..%d]... (bad or missing value near argument)\n", GB_MAX);
	return -EINVAL;
}

int main(int argc, char **argv)
{
	struct gb_ctx c = { 0 };
	size_t sz[GB_MAXSZ] = { 64, 1024, 8192 };
	double min_s = 0.2;
	int reps = 5, nsz = 3, rc = 1;
	IMB_ARCH arch = IMB_ARCH_NONE;

	if (gb_args(argc, argv, &reps, &min_s, sz, &nsz))
		return 2;
	if (!nsz) {
		sz[0] = 64, sz[1] = 1024, sz[2] = 8192;
		nsz = 3;
	}
	for (size_t i = 0; i < sizeof(gb_buf); i++)
		gb_buf[i] = (uint8_t)(i * 131 + 7);
	if (gb_setup(&c, &arch) || gb_check(&c, sz, nsz))
		goto out;
	printf("intel-ipsec-mb %s, arch %s (init_mb_mgr_auto), features 0x%llx; %s\n",
	       imb_get_version_str(), tally_auth_imb_arch(arch),
	       (unsigned long long)c.mgr->features, OpenSSL_version(OPENSSL_VERSION));
	printf("tags equal (EVP vs ipsec-mb) at every size and 9 odd lengths\n");
	printf("%8s %12s %12s %8s %12s   (GB/s per CPU second, median of %d reps, %.2f s "
	       "each)\n", "bytes", "openssl", "ipsec-mb", "ratio", "ghash-only", reps, min_s);
	for (int s = 0; s < nsz; s++) {
		double ro[101], ri[101], rr[101], rg[101];
		for (int r = 0; r < reps; r++) {
			ro[r] = gb_rate(&c, gb_evp, sz[s], min_s);
			ri[r] = gb_rate(&c, gb_imb, sz[s], min_s);
			rg[r] = sz[s] >= 16 ? gb_rate(&c, gb_ghash, sz[s], min_s) *
				(double)(sz[s] & ~(size_t)15) / (double)sz[s] : 0;
			rr[r] = ri[r] / ro[r];
		}
		size_t n = (size_t)reps;
		printf("%8zu %12.2f %12.2f %8.2f %12.2f\n", sz[s], perf_median(ro, n),
		       perf_median(ri, n), perf_median(rr, n), perf_median(rg, n));
	}
	rc = 0;
out:
	EVP_CIPHER_CTX_free(c.evp);
	free_mb_mgr(c.mgr);
	return rc;
}
