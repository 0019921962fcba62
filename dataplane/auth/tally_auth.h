/* SPDX-License-Identifier: Apache-2.0
 * tally_auth.h — per-packet authentication (tally_proto.h TALLY_F_AUTH): AES-256-GMAC
 * through intel-ipsec-mb (VAES/AVX-512 where the CPU has them) where it is built in, else
 * OpenSSL 3 libcrypto (EVP); the same NIST GMAC either way, no crypto of ours.
 *
 * Why GMAC: on this CPU (AVX-512, VAES, VPCLMULQDQ) GHASH runs at several times
 * HMAC-SHA256's speed at 1 KiB and 8 KiB (perf: `tally-perf engine --auth`, `openssl speed`),
 * and the engine signs every RESULT copy per destination.
 *
 * Nonce (IV) uniqueness under one key -- the one rule GMAC must never break: every context
 * (one per job per engine core, one per client session) draws at tally_auth_set_key a random
 * 32-bit salt and a random 64-bit counter start (getrandom); each signed packet gets
 * IV = salt || counter and then counter + 1. So one context never repeats an IV (2^64
 * packets), and retransmissions and RESULT fan-out copies are each signed anew with their
 * own IV (a re-sent byte-identical packet keeps its IV and tag, which reveals nothing).
 * Two contexts under the same key (cores, sessions, appliances, a restart or relaunch)
 * repeat an IV only if their salts match (2^-32) AND their counter ranges overlap (about
 * (n1 + n2) / 2^64 for n1, n2 packets): ~2^-64 per pair for 2^32-packet runs.
 *
 * Contexts are allocated once (tally_auth_new) and keyed off the datapath (set_key); sign
 * and verify allocate nothing and make no syscall.
 */
#ifndef TALLY_AUTH_H
#define TALLY_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "tally_proto.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TALLY_AUTH_KEY_LEN 32  /* AES-256 */
#define TALLY_AUTH_KEY_ENV "TALLY_AUTH_KEY_FILE"

struct tally_auth;

/* The GMAC backend, chosen once per process at the first tally_auth_new (or here):
 * TALLY_AUTH_BACKEND=openssl|ipsec-mb (tally_auth_select_backend), else ipsec-mb where built in and the CPU has
 * AES-NI, else openssl. Its name and version ("ipsec-mb 1.3.0 avx512-vaes",
 * "openssl 3.0.19"), or NULL when the variable names none that this build has (said once on
 * stderr); tally_auth_new then fails with errno EINVAL. */
#define TALLY_AUTH_BACKEND_ENV "TALLY_AUTH_BACKEND"
const char *tally_auth_backend(void);
/* The name of an intel-ipsec-mb IMB_ARCH value (the path init_mb_mgr_auto picked), as
 * tally_auth_backend shows it: "no-aesni", "sse", "avx", "avx2", "avx512"; "none" for any
 * other value, and in a build without intel-ipsec-mb. */
const char *tally_auth_imb_arch(int arch);
/* The program's backend setting (its TALLY_AUTH_BACKEND, read at the program's edge: the
 * library reads no environment): "openssl", "ipsec-mb", or NULL/"" for the default. Call it
 * before the first tally_auth_new / tally_auth_backend (e.g. at start, with the value of
 * TALLY_AUTH_BACKEND_ENV); it is checked when the backend is chosen, as above. 0, or -EBUSY once the backend is chosen. */
int tally_auth_select_backend(const char *name);

/* A context without a key, or NULL with errno ENOMEM, or EINVAL (tally_auth_backend). */
struct tally_auth *tally_auth_new(void);
void tally_auth_free(struct tally_auth *a);
/* Key it (and draw a fresh salt and counter start). 0, -EINVAL, -EIO (libcrypto or
 * getrandom failed). */
int tally_auth_set_key(struct tally_auth *a, const uint8_t key[TALLY_AUTH_KEY_LEN]);
/* Forget the key (wiped): sign/verify then fail. */
void tally_auth_clear(struct tally_auth *a);
int tally_auth_has_key(const struct tally_auth *a);
/* Constant-time equality of the context's key with `key` (1 equal, 0 not or no key). */
int tally_auth_key_equal(const struct tally_auth *a, const uint8_t key[TALLY_AUTH_KEY_LEN]);

/* Sign one packet: hdr holds TALLY_HDR_MAX bytes, its first 64 an encoded header whose
 * flags have TALLY_F_AUTH and whose crc is 0. Writes IV and tag into hdr[64..92), or for a
 * RESULT both levels into hdr[64..120) (tally_proto.h). 0, or -EINVAL (no key / header
 * not marked), -EIO. */
int tally_auth_sign(struct tally_auth *a, uint8_t *hdr, const void *payload, size_t len);

/* A RESULT signed in two levels, so that a chunk sent to n ranks costs one MAC over its
 * payload and n MACs over 92 bytes instead of n over the payload:
 *   inner = (IVi, GMAC_K(IVi; prefix16 || payload))   once per chunk (sign_payload)
 *   outer = (IVo, GMAC_K(IVo; header64 || inner))     per destination (sign_result)
 * Why it is sound: every IV comes from the same context's counter, so each IV is used for
 * exactly one message, inner or outer. A receiver accepts (hdr, inner, payload) only if the
 * outer tag verifies; unless the appliance signed that very (hdr, inner), that is a GMAC
 * forgery of the outer message. If it did, inner's IV was used for exactly one payload,
 * the chunk's, so any other payload passing the inner tag is a GMAC forgery of the inner
 * message. Splicing an inner block onto another header needs a new outer tag (forgery);
 * the header (rank, key, round, offset, flags, payload_len) stays under the outer tag.
 * The inner tag may be reused for every copy and re-send of the chunk's RESULT.
 * Domain separation besides the unique IVs: a single-level tag covers a header whose op is
 * not RESULT, an outer tag one whose op is RESULT, an inner tag starts with
 * TALLY_AUTH_INNER_PREFIX (no header magic), so no tag of one kind reads as another's even
 * if a payload held a packet's bytes (16 bytes: the payload stays block-aligned). */
#define TALLY_AUTH_INNER_PREFIX "TALLY RESULT PL"
#define TALLY_AUTH_INNER_PREFIX_LEN 16 /* with its NUL */
int tally_auth_sign_payload(struct tally_auth *a, uint8_t inner[TALLY_AUTH_LEN],
			    const void *payload, size_t len);
/* hdr as for tally_auth_sign, op RESULT: copies inner to hdr[64..92), writes the outer IV
 * and tag to hdr[92..120). 0, or -EINVAL (no key / not a marked RESULT), -EIO. */
int tally_auth_sign_result(struct tally_auth *a, uint8_t *hdr,
			   const uint8_t inner[TALLY_AUTH_LEN]);
/* Verify a decoded packet's tag (pkt->auth != NULL; `buf` the packet as received).
 * 0 or -EBADMSG (also with no key or no auth block). Constant time in the tag compare. */
int tally_auth_verify(struct tally_auth *a, const void *buf, const struct tally_pkt *pkt);

/* The same, bound to a run (issue 33): `sess` (TALLY_AUTH_SESS_LEN bytes, or NULL for none)
 * is covered by the tag as well, after the header (single-level: header || sess || payload;
 * RESULT outer: header || inner || sess; the inner payload tag is unchanged). It is not
 * sent: both ends know it. A keyed job's session is (run nonce of the appliance's job
 * install, little-endian 64 bits) || (the worker's JOIN nonce): a packet recorded in
 * another run, or for another worker session, fails the tag. */
#define TALLY_AUTH_SESS_LEN 16
int tally_auth_sign_s(struct tally_auth *a, uint8_t *hdr, const uint8_t *sess,
		      const void *payload, size_t len);
int tally_auth_sign_result_s(struct tally_auth *a, uint8_t *hdr, const uint8_t *sess,
			     const uint8_t inner[TALLY_AUTH_LEN]);
int tally_auth_verify_s(struct tally_auth *a, const void *buf, const uint8_t *sess,
			const struct tally_pkt *pkt);
/* sess = run || jn (little-endian) */
void tally_auth_sess(uint8_t sess[TALLY_AUTH_SESS_LEN], uint64_t run, uint64_t jn);

/* Mark an encoded header authenticated (set TALLY_F_AUTH, crc 0) in place. */
void tally_auth_mark(uint8_t *hdr);

/* The GMAC primitive itself (known-answer tests): tag of `aad` (two parts, either may be
 * empty) under the context's key and the given IV. 0 or -EIO. */
int tally_auth_gmac(struct tally_auth *a, const uint8_t iv[TALLY_AUTH_IV_LEN],
		    const void *aad1, size_t len1, const void *aad2, size_t len2,
		    uint8_t tag[TALLY_AUTH_TAG_LEN]);

/* Read a key file: exactly 32 raw bytes, or 64 hex digits (optionally one trailing
 * newline). 0, or a negative errno with a message in err naming the file and what is wrong
 * (unreadable, too short, too long, not hex, readable by others). */
int tally_auth_key_load(const char *path, uint8_t key[TALLY_AUTH_KEY_LEN], char *err,
			size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
