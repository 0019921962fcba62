/* SPDX-License-Identifier: Apache-2.0
 * engine_ktab.c — the key table: a hash on (job id, key) with linear probing, O(1) lookup
 * on the PUSH path, plus the keys in registration order for the walkers. Sized for
 * cfg.max_keys at create time.
 */
#include <errno.h>
#include <stdlib.h>

#include "engine_int.h"

static inline uint32_t key_hash(uint32_t job_id, uint32_t key)
{
	uint64_t x = ((uint64_t)job_id << 32 | key) * 0x9E3779B97F4A7C15ull;
	return (uint32_t)(x >> 32) ^ (uint32_t)x;
}

int engine_keys_init(struct tally_engine *e)
{
	uint32_t cap = 16;
	while (cap < 2 * e->cfg.max_keys)
		cap <<= 1;
	e->ktab = calloc(cap, sizeof(*e->ktab));
	e->keys = calloc(e->cfg.max_keys, sizeof(*e->keys));
	if (!e->ktab || !e->keys)
		return -ENOMEM;
	e->kmask = cap - 1;
	return 0;
}

void engine_keys_fini(struct tally_engine *e)
{
	free(e->ktab);
	free(e->keys);
	e->ktab = NULL;
	e->keys = NULL;
}

struct engine_key *engine_key_find(const struct tally_engine *e, uint32_t job_id, uint32_t key)
{
	uint32_t i = key_hash(job_id, key) & e->kmask;
	for (;;) {
		struct engine_key *k = e->ktab[i];
		if (!k)
			return NULL;
		if (k->key == key && k->job_id == job_id)
			return k;
		i = (i + 1) & e->kmask;
	}
}

void engine_ktab_insert(struct tally_engine *e, struct engine_key *k)
{
	uint32_t i = key_hash(k->job_id, k->key) & e->kmask;
	while (e->ktab[i])
		i = (i + 1) & e->kmask;
	e->ktab[i] = k;
	k->vidx = e->nkeys;
	e->keys[e->nkeys++] = k;
}

/* Linear probing delete with backward shift (no tombstones). */
void engine_ktab_delete(struct tally_engine *e, struct engine_key *k)
{
	uint32_t i = key_hash(k->job_id, k->key) & e->kmask;
	while (e->ktab[i] != k)
		i = (i + 1) & e->kmask;
	uint32_t j = i;
	for (;;) {
		e->ktab[i] = NULL;
		for (;;) {
			j = (j + 1) & e->kmask;
			if (!e->ktab[j])
				goto shifted;
			uint32_t h = key_hash(e->ktab[j]->job_id, e->ktab[j]->key) & e->kmask;
			/* Move j back to i unless its home lies cyclically in (i, j]. */
			if (i <= j ? (i < h && h <= j) : (i < h || h <= j))
				continue;
			break;
		}
		e->ktab[i] = e->ktab[j];
		i = j;
	}
shifted:
	e->nkeys--;
	struct engine_key *last = e->keys[e->nkeys];
	e->keys[k->vidx] = last;
	last->vidx = k->vidx;
	e->keys[e->nkeys] = NULL;
}
