/* SPDX-License-Identifier: Apache-2.0
 * engine_arena.h — a first-fit allocator over one region carved at engine creation, so the
 * datapath core never calls malloc (or the EAL heap, which locks) after start-up.
 *
 * Blocks are multiples of 64 bytes and start with a 64-byte header (size, physical
 * predecessor's size, free flag, free-list links), so payloads are cache-line aligned.
 * Free blocks sit on one doubly linked list; alloc takes the first that fits and splits off
 * the rest; free merges with free physical neighbours at once (no two free blocks are ever
 * adjacent). What a caller is charged is the whole block, header included, so the sum of
 * charges is exactly what the region has given out.
 */
#ifndef ENGINE_ENGINE_ARENA_H
#define ENGINE_ENGINE_ARENA_H

#include <stddef.h>
#include <stdint.h>

#define ENGINE_ARENA_ALIGN 64u

struct engine_blk;

struct engine_arena {
	uint8_t *base;                 /* ENGINE_ARENA_ALIGN-aligned */
	size_t size;                   /* multiple of ENGINE_ARENA_ALIGN */
	size_t used;                   /* bytes of allocated blocks, headers included */
	struct engine_blk *free_head;
};

/* Take over [mem, mem + size) (mem aligned to ENGINE_ARENA_ALIGN; size rounded down).
 * A region too small for one block leaves an arena that fails every alloc. */
void engine_arena_init(struct engine_arena *a, void *mem, size_t size);
/* size bytes, 64-byte aligned, or NULL when no free block is large enough. The block's
 * whole size (what the arena's `used` grew by) is stored in *charged when not NULL. */
void *engine_arena_alloc(struct engine_arena *a, size_t size, size_t *charged);
void engine_arena_free(struct engine_arena *a, void *p);
/* Walk the region and the free list: 0 when every invariant holds, else -EFAULT
 * (tests and fuzzing). */
int engine_arena_check(const struct engine_arena *a);

#endif
