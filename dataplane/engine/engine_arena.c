/* SPDX-License-Identifier: Apache-2.0
 * engine_arena.c — first-fit allocation with immediate coalescing over a pre-carved region
 * (see engine_arena.h). Used on REGISTER and key removal only, never per packet.
 */
#include <errno.h>
#include <string.h>

#include "engine_arena.h"

struct engine_blk {
	size_t size;                   /* whole block, header included */
	size_t prev_size;              /* physical predecessor's size, 0 for the first block */
	uint32_t free;
	struct engine_blk *fprev, *fnext;
};

#define HDR ENGINE_ARENA_ALIGN
_Static_assert(sizeof(struct engine_blk) <= HDR, "block header must fit its 64 bytes");

static inline size_t arena_round(size_t n)
{
	return (n + ENGINE_ARENA_ALIGN - 1) & ~(size_t)(ENGINE_ARENA_ALIGN - 1);
}

static inline struct engine_blk *blk_next(const struct engine_arena *a, struct engine_blk *b)
{
	uint8_t *n = (uint8_t *)b + b->size;
	return n < a->base + a->size ? (struct engine_blk *)n : NULL;
}

static inline struct engine_blk *blk_prev(struct engine_blk *b)
{
	return b->prev_size ? (struct engine_blk *)((uint8_t *)b - b->prev_size) : NULL;
}

static void list_add(struct engine_arena *a, struct engine_blk *b)
{
	b->free = 1;
	b->fprev = NULL;
	b->fnext = a->free_head;
	if (a->free_head)
		a->free_head->fprev = b;
	a->free_head = b;
}

static void list_del(struct engine_arena *a, struct engine_blk *b)
{
	if (b->fprev)
		b->fprev->fnext = b->fnext;
	else
		a->free_head = b->fnext;
	if (b->fnext)
		b->fnext->fprev = b->fprev;
	b->free = 0;
	b->fprev = b->fnext = NULL;
}

void engine_arena_init(struct engine_arena *a, void *mem, size_t size)
{
	memset(a, 0, sizeof(*a));
	size &= ~(size_t)(ENGINE_ARENA_ALIGN - 1);
	if (!mem || size < 2 * HDR)
		return;
	a->base = mem;
	a->size = size;
	struct engine_blk *b = mem;
	memset(b, 0, sizeof(*b));
	b->size = size;
	list_add(a, b);
}

/* Cut b (allocated, not on the list) to `need` bytes when the rest can hold a block. */
static void blk_split(struct engine_arena *a, struct engine_blk *b, size_t need)
{
	if (b->size - need < 2 * HDR)
		return;
	struct engine_blk *r = (struct engine_blk *)((uint8_t *)b + need);
	memset(r, 0, sizeof(*r));
	r->size = b->size - need;
	r->prev_size = need;
	b->size = need;
	struct engine_blk *n = blk_next(a, r);
	if (n)
		n->prev_size = r->size;
	list_add(a, r);
}

void *engine_arena_alloc(struct engine_arena *a, size_t size, size_t *charged)
{
	if (size > a->size)
		return NULL;
	size_t need = HDR + arena_round(size ? size : 1);
	struct engine_blk *b = a->free_head;
	while (b && b->size < need)
		b = b->fnext;
	if (!b)
		return NULL;
	list_del(a, b);
	blk_split(a, b, need);
	a->used += b->size;
	if (charged)
		*charged = b->size;
	return (uint8_t *)b + HDR;
}

void engine_arena_free(struct engine_arena *a, void *p)
{
	if (!p)
		return;
	struct engine_blk *b = (struct engine_blk *)((uint8_t *)p - HDR);
	a->used -= b->size;
	struct engine_blk *n = blk_next(a, b);
	if (n && n->free) {
		list_del(a, n);
		b->size += n->size;
	}
	struct engine_blk *pr = blk_prev(b);
	if (pr && pr->free) {
		list_del(a, pr);
		pr->size += b->size;
		b = pr;
	}
	n = blk_next(a, b);
	if (n)
		n->prev_size = b->size;
	list_add(a, b);
}

int engine_arena_check(const struct engine_arena *a)
{
	size_t used = 0, nfree = 0, prev = 0;
	int prev_free = 0;
	for (uint8_t *p = a->base; a->base && p < a->base + a->size;) {
		const struct engine_blk *b = (const struct engine_blk *)p;
		if (b->size < 2 * HDR || b->size % ENGINE_ARENA_ALIGN || b->prev_size != prev ||
		    p + b->size > a->base + a->size || (b->free && prev_free))
			return -EFAULT;
		if (b->free)
			nfree++;
		else
			used += b->size;
		prev = b->size;
		prev_free = (int)b->free;
		p += b->size;
	}
	for (const struct engine_blk *b = a->free_head; b; b = b->fnext) {
		if (!b->free || (b->fnext && b->fnext->fprev != b) || nfree == 0)
			return -EFAULT;
		nfree--;
	}
	return (nfree == 0 && used == a->used) ? 0 : -EFAULT;
}
