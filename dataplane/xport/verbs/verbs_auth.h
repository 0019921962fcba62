/* SPDX-License-Identifier: Apache-2.0
 * verbs_auth.h — authentication of a verbs connection at setup (THREAT_MODEL.md, "RDMA
 * verbs"): the worker's rdma_cm connect request names (job, rank) with a fresh nonce and an
 * AES-256-GMAC tag under the job's key (tally_auth.h, OpenSSL); the appliance answers in the
 * accept with a tag over its own nonce and the worker's request, so each side proves it
 * holds the key. The RC QP then carries that identity (tally_addr.conn_authed) and its
 * packets need no per-packet MAC. Pure encode/verify and a replay cache: no device needed,
 * so the unit tests (tests/verbs/test_verbs_auth.c) run them on any host.
 *
 * Connect request (rdma_cm REQ private data: at most 56 bytes for RC; the v1 ring wire
 * takes 32 of them, so an authenticated request packs the ring fields tighter), network
 * byte order:
 *   0 magic "TVB2"   4 core u16   6 log2(slots) u8   7 slot bytes / 64 u8
 *   8 landing ring address u64   16 rkey u32   20 job id u32   24 rank u16   26 zero u16
 *  28 nonce: 4 bytes wall-clock seconds, 8 random bytes (the GMAC IV)   40 tag 16   = 56
 * tag = GMAC_K(IV = nonce; "TALLY VERBS REQ" || bytes 0..40 || worker IPv4 || appliance
 * IPv4 || port): the ring fields, core and both addresses are covered, so a recorded
 * request is useless from another host or for another core, and the appliance refuses a
 * nonce it has seen (replay cache) or one outside its clock window.
 * Accept (REP private data, up to 196 bytes): the v1 ring wire (32), then the appliance's
 * random 12-byte nonce (the IV) and tag = GMAC_K(IV; "TALLY VERBS REP" || bytes 0..44 of
 * the accept || the worker's 56-byte request || the same addresses).
 * IVs under the job key (tally_auth.h's one rule): a request's is 4 bytes of time and 64
 * random bits, an accept's 96 random bits, the per-packet ones a random 32-bit salt and a
 * 64-bit counter: two collide only if 64 or more random bits match (about 2^-64 per pair).
 * The prefixes keep request, accept and packet tags apart even so.
 */
#ifndef VERBS_VERBS_AUTH_H
#define VERBS_VERBS_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "tally_auth.h"

#define VERBS_MAGIC_AUTH 0x54564232u /* "TVB2": an authenticated connect request */
#define VERBS_REQ_LEN 56            /* RC connect private data limit, all of it */
#define VERBS_REQ_SIGNED 40         /* bytes under the request's tag */
#define VERBS_REP_WIRE 32           /* the ring wire (struct verbs_wire) */
#define VERBS_REP_LEN (VERBS_REP_WIRE + TALLY_AUTH_LEN)
#define VERBS_NONCE_LEN TALLY_AUTH_IV_LEN
/* How far a request's clock may be from the appliance's (seconds), and how many recent
 * nonces the appliance remembers (a nonce older than the oldest one forgotten is refused
 * as stale, so the cache bounds memory without letting a replay through). */
#define VERBS_AUTH_WINDOW_S 300u
#define VERBS_REPLAY_SLOTS 4096u

/* The request's fields (decoded; the tag is checked separately). */
struct verbs_req {
	uint32_t core;
	uint32_t nslots;
	uint32_t slot_bytes;
	uint64_t addr;
	uint32_t rkey;
	uint32_t job;
	uint32_t rank;
	uint8_t nonce[VERBS_NONCE_LEN];
};

/* Both ends' addresses as each side sees them (IPv4 and rdma_cm port, network order). */
struct verbs_bind {
	uint32_t worker_ip;
	uint32_t appliance_ip;
	uint16_t port;
};

/* A fresh request nonce: wall-clock seconds (big-endian) then 8 random bytes. 0 or -EIO. */
int verbs_auth_nonce(uint8_t nonce[VERBS_NONCE_LEN], uint32_t now_s);
/* Encode and sign a request (r->nonce set by the caller). 0, -EINVAL (a field does not fit:
 * core, rank, slots), -EIO. */
int verbs_auth_req_encode(uint8_t out[VERBS_REQ_LEN], const struct verbs_req *r,
			  struct tally_auth *a, const struct verbs_bind *b);
/* Whether private data is an authenticated request (its magic). */
int verbs_auth_is_req(const void *pd, size_t len);
/* Decode (no MAC check). 0 or -EPROTO (short, wrong magic, reserved bits set). */
int verbs_auth_req_decode(const void *pd, size_t len, struct verbs_req *r);
/* Check a request's tag under a's key. 0 or -EBADMSG. */
int verbs_auth_req_verify(struct tally_auth *a, const void *pd, const struct verbs_bind *b);
/* The accept's auth block: rep holds VERBS_REP_LEN bytes, its first VERBS_REP_WIRE the ring
 * wire; draws a random nonce and writes nonce and tag after the wire. 0 or -EIO. */
int verbs_auth_rep_sign(uint8_t rep[VERBS_REP_LEN], const uint8_t req[VERBS_REQ_LEN],
			struct tally_auth *a, const struct verbs_bind *b);
/* Worker: check the accept against our request. 0 or -EBADMSG (short, or the tag). */
int verbs_auth_rep_verify(const void *pd, size_t len, const uint8_t req[VERBS_REQ_LEN],
			  struct tally_auth *a, const struct verbs_bind *b);

/* The listener's memory of nonces it accepted. */
struct verbs_replay {
	uint8_t nonce[VERBS_REPLAY_SLOTS][VERBS_NONCE_LEN];
	uint32_t n, head;
	uint32_t floor_s; /* the newest timestamp forgotten: nothing at or below it is taken */
};

/* Check a verified request's nonce and remember it: 0, -EALREADY (seen: a replay), -ETIME
 * (its clock is outside VERBS_AUTH_WINDOW_S of now_s, or not above the forgotten floor). */
int verbs_replay_check(struct verbs_replay *rp, const uint8_t nonce[VERBS_NONCE_LEN],
		       uint32_t now_s);
/* The timestamp a nonce carries. */
uint32_t verbs_auth_nonce_time(const uint8_t nonce[VERBS_NONCE_LEN]);

#endif
