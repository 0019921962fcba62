/* SPDX-License-Identifier: Apache-2.0
 * verbs_place.h — RESULTs placed straight into the worker's registered result buffer, the
 * logic without any verbs call (unit-tested on hosts with no RDMA device).
 *
 * The worker registers its result memory once (a cache keyed by address and length, LRU)
 * and, when a round of a key starts, sends an ADVERTISEMENT on the connection of the key's
 * core: (job, rank, key, round, addr, rkey, len). It is a verbs-level message (its own
 * magic, never handed to the engine). The appliance keeps the last one per key in a small
 * direct-mapped table of that connection (a rank can only name memory to its own
 * connection: the table is the connection's, and an authenticated connection's identity
 * must match). A RESULT to that connection whose (job, rank, key, round) match, INCLUDED
 * and not a re-send (the first copy of the chunk to that rank: nothing can land in the
 * buffer after the worker has its round) and whose bytes fit in [addr, addr + len), goes
 * as an RDMA WRITE of the payload to addr + offset * element size, then, in order on the
 * same QP, a WRITE_WITH_IMM of the header and a PLACEMENT record (where the payload went)
 * into the landing slot. Everything else goes the usual way (header + payload in the slot).
 */
#ifndef VERBS_PLACE_H
#define VERBS_PLACE_H

#include <stddef.h>
#include <stdint.h>

#define VERBS_ADV_MAGIC 0x44415654u   /* "TVAD" little-endian: an advertisement */
#define VERBS_PLACE_MAGIC 0x4c505654u /* "TVPL": the record after a placed RESULT's header */
#define VERBS_ADV_BYTES 40u
#define VERBS_PLACE_BYTES 16u
#define VERBS_ADV_TABLE 1024u         /* advertisements kept per connection (by key) */
#define VERBS_ADV_MAX_BYTES (1ull << 32) /* one key's result buffer at most (4 GiB) */
#define VERBS_MRC_DEFAULT 64u         /* registrations a client keeps (cfg.mr_cache) */
#define VERBS_MRC_MAX 4096u

/* An advertisement, host order. len 0 withdraws the key's. */
struct verbs_adv {
	uint32_t job, rank, key, round;
	uint32_t rkey;
	uint32_t valid;
	uint64_t addr, len;
};

enum verbs_adv_verdict {
	VA_OK = 0,
	VA_WITHDRAW,   /* len 0: forget this key's */
	VA_BAD_FORMAT, /* wrong size or version */
	VA_BAD_RANGE,  /* address 0, length past VERBS_ADV_MAX_BYTES, or wrapping */
	VA_BAD_OWNER,  /* names another job or rank than its authenticated connection */
};

void verbs_adv_encode(uint8_t out[VERBS_ADV_BYTES], const struct verbs_adv *a);
/* Check a landed advertisement (buf starts with VERBS_ADV_MAGIC). authed: the connection's
 * identity (job, rank) is known and must match. Fills *a on VA_OK / VA_WITHDRAW. */
enum verbs_adv_verdict verbs_adv_check(const void *buf, size_t len, int authed, uint32_t job,
				       uint32_t rank, struct verbs_adv *a);

/* Where a RESULT may be placed: the table entry for its key must match (job, rank, key,
 * round); the payload of `len` bytes for element `offset` of `count` elements goes to
 * *raddr, which with len must lie inside the advertised range. Returns 1 (place), 0 (no
 * advertisement for it: copy), -1 (advertised, but the bytes fall outside it: copy,
 * counted). Flags: INCLUDED set, RESEND and ONEBIT clear, else 0. */
int verbs_adv_place(const struct verbs_adv *tab, uint32_t job, uint32_t rank, uint32_t key,
		    uint32_t round, uint16_t flags, uint32_t offset, uint32_t count, size_t len,
		    uint64_t *raddr, uint32_t *rkey);
/* A key's two rounds in flight (round parity) have their own entries. */
static inline uint32_t verbs_adv_idx(uint32_t key, uint32_t round)
{
	return ((key << 1) | (round & 1)) & (VERBS_ADV_TABLE - 1);
}

void verbs_place_encode(uint8_t out[VERBS_PLACE_BYTES], uint64_t addr, uint32_t len);
/* A landed header + record: the payload's address and length, 0 or -1 (not a record). */
int verbs_place_decode(const uint8_t *rec, uint64_t *addr, uint32_t *len);

/* The client's registration cache: n entries of (addr, len, handle), least recently used
 * evicted. Lookup by containment: an entry covering [addr, addr + len) is a hit. */
struct verbs_mrc_ent {
	uint64_t addr, len;
	void *mr;        /* the registration (struct ibv_mr *), NULL: free entry */
	uint64_t used;   /* the cache's tick at the last hit */
};
struct verbs_mrc {
	struct verbs_mrc_ent *ent;
	uint32_t n;
	uint64_t tick;
};
/* The entry covering [addr, addr + len) (its use refreshed), or NULL. */
struct verbs_mrc_ent *verbs_mrc_find(struct verbs_mrc *m, uint64_t addr, uint64_t len);
/* The entry to fill for a new registration: a free one, else the least recently used
 * (its mr still set: the caller deregisters it first). */
struct verbs_mrc_ent *verbs_mrc_victim(struct verbs_mrc *m);
/* Whether [addr, addr + len) lies inside a registered entry (no use refresh). */
int verbs_mrc_covers(const struct verbs_mrc *m, uint64_t addr, uint64_t len);

#endif
