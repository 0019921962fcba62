/* SPDX-License-Identifier: Apache-2.0
 * engine_det.c — deterministic mode: each push of a deterministic key is staged (in its
 * wire dtype) in a slot of a per-core pool, and at completion the chunk is summed in rank
 * order, so its bits do not depend on the arrival order. The pool is allocated once at
 * creation (cfg.det_pool_bytes / max_chunk_bytes slots); an empty pool makes the push fail
 * with TALLY_R_POOL_FULL and the worker retransmits it later.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"

int dp_det_init(struct tally_engine *e)
{
	uint32_t slot = (e->cfg.max_chunk_bytes + 63u) & ~63u;
	size_t n = e->cfg.det_pool_bytes / slot;
	if (n == 0)
		return 0;
	if (n > (1u << 24))
		n = 1u << 24;
	e->det_slot_bytes = slot;
	e->det_mem = dp_mem_alloc(e, n * slot);
	e->det_free = malloc(n * sizeof(*e->det_free));
	e->det_meta = malloc(n * sizeof(*e->det_meta));
	if (!e->det_mem || !e->det_free || !e->det_meta)
		return -ENOMEM;
	e->det_nslots = (uint32_t)n;
	/* Lowest slot index on top of the stack. */
	for (uint32_t i = 0; i < n; i++)
		e->det_free[i] = (uint32_t)n - 1 - i;
	e->det_nfree = (uint32_t)n;
	return 0;
}

void dp_det_fini(struct tally_engine *e)
{
	dp_mem_free(e, e->det_mem);
	free(e->det_free);
	free(e->det_meta);
	e->det_mem = NULL;
	e->det_free = NULL;
	e->det_meta = NULL;
	e->det_nslots = e->det_nfree = 0;
}

void dp_det_stage(struct tally_engine *e, struct dp_chunk *ch, uint32_t rank,
		  const void *payload, size_t bytes)
{
	uint32_t s = e->det_free[--e->det_nfree];
	memcpy(e->det_mem + (size_t)s * e->det_slot_bytes, payload, bytes);
	e->det_meta[s].rank = rank;
	e->det_meta[s].next = ch->det_head;
	ch->det_head = s;
}

void dp_det_release(struct tally_engine *e, struct dp_chunk *ch)
{
	uint32_t s = ch->det_head;
	while (s != DP_NIL) {
		uint32_t next = e->det_meta[s].next;
		e->det_free[e->det_nfree++] = s;
		s = next;
	}
	ch->det_head = DP_NIL;
}

void dp_det_reduce(struct tally_engine *e, struct dp_key *k, struct dp_chunk *ch, void *acc,
		   uint32_t n)
{
	const void **src = e->det_src;
	for (uint32_t s = ch->det_head; s != DP_NIL; s = e->det_meta[s].next)
		src[e->det_meta[s].rank] = e->det_mem + (size_t)s * e->det_slot_bytes;

	/* Compact in rank order (in place: the j-th contributor's rank is >= j). */
	uint32_t idx = (uint32_t)(ch - k->chunks);
	const uint64_t *bm = dp_contrib_bm(k, idx);
	uint32_t m = 0;
	for (uint32_t wd = 0; wd < k->bm_words; wd++) {
		uint64_t bits = bm[wd];
		while (bits) {
			uint32_t r = wd * 64 + (uint32_t)__builtin_ctzll(bits);
			bits &= bits - 1;
			src[m++] = src[r];
		}
	}
	enum tally_dtype dt = (enum tally_dtype)k->dtype;
	if (m > 0) {
		/* ((s0 + s1) + s2) + ...: one k-way pass, then the rest one by one in the same
		 * left-to-right order. */
		uint32_t first = m < TALLY_SUM_MAX_WAYS ? m : TALLY_SUM_MAX_WAYS;
		tally_sum_kway(dt, acc, (const void *const *)src, first, n);
		for (uint32_t i = first; i < m; i++)
			tally_sum_acc(dt, acc, src[i], n);
	}
	dp_det_release(e, ch);
}
