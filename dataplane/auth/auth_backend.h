/* SPDX-License-Identifier: Apache-2.0
 * auth_backend.h — private to dataplane/auth: which library computes AES-256-GMAC
 * (tally_auth_backend, chosen once per process) and the intel-ipsec-mb calls.
 */
#ifndef AUTH_BACKEND_H
#define AUTH_BACKEND_H

#include <stddef.h>
#include <stdint.h>

enum auth_be { AUTH_BE_OPENSSL = 0, AUTH_BE_IPSEC_MB = 1 };

/* The process's backend (chosen on the first call), or -EINVAL when TALLY_AUTH_BACKEND
 * names none that is built in (reported once on stderr). */
int auth_be_get(void);

#ifdef TALLY_HAVE_IPSEC_MB
#include <intel-ipsec-mb.h>
/* Expand key into kd (AES round keys and GHASH key powers). */
void auth_imb_key(struct gcm_key_data *kd, const uint8_t key[32]);
/* GMAC tag (16 bytes) of aad1 || aad2 under kd and a 12-byte IV; either part may be empty. */
void auth_imb_gmac(const struct gcm_key_data *kd, const uint8_t iv[12], const void *aad1,
		   size_t len1, const void *aad2, size_t len2, uint8_t tag[16]);
#endif

#endif
