/* SPDX-License-Identifier: Apache-2.0
 * engine_det.c — deterministic mode: a chunk of a deterministic key is summed in rank
 * order, left to right, whatever the arrival order, so its bits do not depend on it. A push
 * whose lower ranks are all summed already goes straight into the accumulator (then any
 * staged successors); any other push is staged (in its wire dtype) in a slot of a per-core
 * pool until its turn or the completion. The pool is allocated once at creation
 * (cfg.det_pool_bytes / max_chunk_bytes slots); an empty pool makes a push that needs a
 * slot fail with TALLY_R_POOL_FULL and the worker retransmits it later.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"

int engine_det_init(struct tally_engine *e)
{
	uint32_t slot = (e->cfg.max_chunk_bytes + 63u) & ~63u;
	size_t n = e->cfg.det_pool_bytes / slot;
	if (n == 0)
		return 0;
	if (n > (1u << 24))
		n = 1u << 24;
	e->det_slot_bytes = slot;
	e->det_mem = engine_mem_alloc(e, n * slot);
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

void engine_det_fini(struct tally_engine *e)
{
	engine_mem_free(e, e->det_mem);
	free(e->det_free);
	free(e->det_meta);
	e->det_mem = NULL;
	e->det_free = NULL;
	e->det_meta = NULL;
	e->det_nslots = e->det_nfree = 0;
}

static inline void *det_slot(const struct tally_engine *e, uint32_t s)
{
	return e->det_mem + (size_t)s * e->det_slot_bytes;
}

/* acc = src for rank 0, acc += src after it: left to right in rank order. */
static inline void det_fold(struct tally_engine *e, const struct engine_key *k, struct engine_chunk *ch, void *acc,
			    const void *src, uint32_t n)
{
	if (k->codec)
		k->codec->add(e, acc, src, n, ch->folded == 0);
	else if (ch->folded == 0)
		tally_sum_load((enum tally_dtype)k->dtype, acc, src, n);
	else
		tally_sum_acc((enum tally_dtype)k->dtype, acc, src, n);
	ch->folded++;
}

void engine_det_push(struct tally_engine *e, const struct engine_key *k, struct engine_chunk *ch,
		 uint32_t w, void *acc, const void *payload, uint32_t n)
{
	if (w == ch->folded) {
		/* Every lower rank is in acc: add now, then the staged ranks that follow. */
		det_fold(e, k, ch, acc, payload, n);
		uint32_t s;
		while ((s = ch->det_head) != ENGINE_NIL && e->det_meta[s].rank == ch->folded) {
			det_fold(e, k, ch, acc, det_slot(e, s), n);
			ch->det_head = e->det_meta[s].next;
			e->det_free[e->det_nfree++] = s;
		}
		return;
	}
	/* Stage, keeping the list in ascending rank order (all staged ranks > folded). */
	uint32_t s = e->det_free[--e->det_nfree];
	memcpy(det_slot(e, s), payload, engine_wire_bytes(k, n));
	e->det_meta[s].rank = w;
	uint32_t *link = &ch->det_head;
	while (*link != ENGINE_NIL && e->det_meta[*link].rank < w)
		link = &e->det_meta[*link].next;
	e->det_meta[s].next = *link;
	*link = s;
}

void engine_det_release(struct tally_engine *e, struct engine_chunk *ch)
{
	uint32_t s = ch->det_head;
	while (s != ENGINE_NIL) {
		uint32_t next = e->det_meta[s].next;
		e->det_free[e->det_nfree++] = s;
		s = next;
	}
	ch->det_head = ENGINE_NIL;
}

void engine_det_reduce(struct tally_engine *e, struct engine_key *k, struct engine_chunk *ch, void *acc,
		   uint32_t n)
{
	enum tally_dtype dt = (enum tally_dtype)k->dtype;
	if (k->codec) {
		/* decompress-add in rank order (staged pushes stay compressed) */
		for (uint32_t s = ch->det_head; s != ENGINE_NIL; s = e->det_meta[s].next)
			det_fold(e, k, ch, acc, det_slot(e, s), n);
	} else if (ch->folded > 0) {
		/* acc holds ranks 0..folded-1; the staged ranks are all above, ascending. */
		for (uint32_t s = ch->det_head; s != ENGINE_NIL; s = e->det_meta[s].next)
			tally_sum_acc(dt, acc, det_slot(e, s), n);
	} else if (ch->det_head != ENGINE_NIL) {
		/* ((s0 + s1) + s2) + ...: one k-way pass, then the rest one by one in the
		 * same left-to-right order. */
		const void **src = e->det_src;
		uint32_t m = 0;
		for (uint32_t s = ch->det_head; s != ENGINE_NIL; s = e->det_meta[s].next)
			src[m++] = det_slot(e, s);
		uint32_t first = m < TALLY_SUM_MAX_WAYS ? m : TALLY_SUM_MAX_WAYS;
		tally_sum_kway(dt, acc, (const void *const *)src, first, n);
		for (uint32_t i = first; i < m; i++)
			tally_sum_acc(dt, acc, src[i], n);
	}
	engine_det_release(e, ch);
}
