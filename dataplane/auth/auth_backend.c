/* SPDX-License-Identifier: Apache-2.0
 * auth_backend.c — the GMAC backend of tally_auth, chosen once per process: intel-ipsec-mb
 * where it is built in and the CPU has AES-NI (its VAES/AVX-512 GHASH runs 3-4x OpenSSL
 * 3.0's here: perf/README.md, tally-gmac-bench), else OpenSSL EVP. The program's
 * TALLY_AUTH_BACKEND=openssl|ipsec-mb, passed in with tally_auth_select_backend(), overrides. Both compute the same NIST GMAC (same tags, same wire).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "auth_backend.h"
#include "tally_auth.h"

static pthread_once_t be_once = PTHREAD_ONCE_INIT;
static int be_choice = -EINVAL;
static char be_name[48] = "invalid";

const char *tally_auth_imb_arch(int arch)
{
#ifdef TALLY_HAVE_IPSEC_MB
	switch ((IMB_ARCH)arch) {
	case IMB_ARCH_NOAESNI: return "no-aesni";
	case IMB_ARCH_SSE: return "sse";
	case IMB_ARCH_AVX: return "avx";
	case IMB_ARCH_AVX2: return "avx2";
	case IMB_ARCH_AVX512: return "avx512";
	default: break;
	}
#else
	(void)arch;
#endif
	return "none";
}

#ifdef TALLY_HAVE_IPSEC_MB
/* The direct GMAC functions read nothing of the manager but their own pointers, so one
 * manager, set up once, serves every context on every thread. */
static IMB_MGR *be_mgr;

/* 0 with the manager set up, or -EIO; *arch the path init_mb_mgr_auto picked. */
static int be_imb_init(IMB_ARCH *arch)
{
	be_mgr = alloc_mb_mgr(0);
	if (!be_mgr)
		return -EIO;
	init_mb_mgr_auto(be_mgr, arch);
	if (imb_get_errno(be_mgr) != 0 || *arch == IMB_ARCH_NONE) {
		free_mb_mgr(be_mgr);
		be_mgr = NULL;
		return -EIO;
	}
	if (*arch == IMB_ARCH_AVX512 && (be_mgr->features & IMB_FEATURE_VAES))
		snprintf(be_name, sizeof(be_name), "ipsec-mb %s avx512-vaes", imb_get_version_str());
	else
		snprintf(be_name, sizeof(be_name), "ipsec-mb %s %s", imb_get_version_str(),
			 tally_auth_imb_arch(*arch));
	return 0;
}

void auth_imb_key(struct gcm_key_data *kd, const uint8_t key[32])
{
	IMB_AES256_GCM_PRE(be_mgr, key, kd);
}

void auth_imb_gmac(const struct gcm_key_data *kd, const uint8_t iv[12], const void *aad1,
		   size_t len1, const void *aad2, size_t len2, uint8_t tag[16])
{
	struct gcm_context_data cd;

	IMB_AES256_GMAC_INIT(be_mgr, kd, &cd, iv, 12);
	if (len1)
		IMB_AES256_GMAC_UPDATE(be_mgr, kd, &cd, aad1, len1);
	if (len2)
		IMB_AES256_GMAC_UPDATE(be_mgr, kd, &cd, aad2, len2);
	IMB_AES256_GMAC_FINALIZE(be_mgr, kd, &cd, tag, 16);
}
#endif

/* The program's setting (tally_auth_select_backend), "" none: read once, by be_choose. */
static char be_want[32];
static int be_chosen;

int tally_auth_select_backend(const char *name)
{
	if (__atomic_load_n(&be_chosen, __ATOMIC_ACQUIRE))
		return -EBUSY;
	snprintf(be_want, sizeof(be_want), "%s", name ? name : "");
	return 0;
}

static void be_choose(void)
{
	const char *want = be_want;
	int any = !*want;

	__atomic_store_n(&be_chosen, 1, __ATOMIC_RELEASE);

	if (!any && strcmp(want, "openssl") && strcmp(want, "ipsec-mb")) {
		fprintf(stderr, "tally_auth: %s=%s is not a GMAC backend: set it to openssl or "
			"ipsec-mb, or unset it\n", TALLY_AUTH_BACKEND_ENV, want);
		return;
	}
#ifdef TALLY_HAVE_IPSEC_MB
	if (any || !strcmp(want, "ipsec-mb")) {
		IMB_ARCH arch = IMB_ARCH_NONE;
		int rc = be_imb_init(&arch);
		/* without AES-NI ipsec-mb's fallback is slower than OpenSSL's */
		if (rc == 0 && (!any || arch != IMB_ARCH_NOAESNI)) {
			be_choice = AUTH_BE_IPSEC_MB;
			return;
		}
		if (!any) {
			fprintf(stderr, "tally_auth: %s=ipsec-mb: intel-ipsec-mb failed to set up "
				"on this CPU; set it to openssl\n", TALLY_AUTH_BACKEND_ENV);
			return;
		}
	}
#else
	if (!any && !strcmp(want, "ipsec-mb")) {
		fprintf(stderr, "tally_auth: %s=ipsec-mb: this build has no intel-ipsec-mb "
			"(libipsec-mb-dev); set it to openssl or unset it\n", TALLY_AUTH_BACKEND_ENV);
		return;
	}
#endif
	snprintf(be_name, sizeof(be_name), "openssl %s", OpenSSL_version(OPENSSL_VERSION_STRING));
	be_choice = AUTH_BE_OPENSSL;
}

int auth_be_get(void)
{
	pthread_once(&be_once, be_choose);
	return be_choice;
}

const char *tally_auth_backend(void)
{
	return auth_be_get() < 0 ? NULL : be_name;
}
