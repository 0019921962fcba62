/* SPDX-License-Identifier: Apache-2.0
 * engine_key.c — the key table (hash on job id and key, O(1) lookup on the PUSH path),
 * registration with the memory budget, live policy, key removal and the key walker.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

static void ktab_insert(struct tally_engine *e, struct engine_key *k)
{
	uint32_t i = key_hash(k->job_id, k->key) & e->kmask;
	while (e->ktab[i])
		i = (i + 1) & e->kmask;
	e->ktab[i] = k;
	k->vidx = e->nkeys;
	e->keys[e->nkeys++] = k;
}

/* Linear probing delete with backward shift (no tombstones). */
static void ktab_delete(struct tally_engine *e, struct engine_key *k)
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

static void key_free(struct tally_engine *e, struct engine_key *k)
{
	if (!k)
		return;
	for (int p = 0; p < 2; p++) {
		engine_mem_free(e, k->acc[p]);
		engine_mem_free(e, k->res[p]);
	}
	free(k->chunks);
	free(k->bits);
	free(k);
}

static size_t align64(size_t n)
{
	return (n + 63) & ~(size_t)63;
}

/* Budget bytes a key needs. */
static size_t key_mem(const struct tally_register *reg, uint32_t nchunks, uint32_t bm_words)
{
	size_t esize = tally_dtype_size((enum tally_dtype)reg->dtype);
	size_t m = sizeof(struct engine_key);
	m += 2 * align64((size_t)reg->nelems * 4);
	if (esize != 4)
		m += 2 * align64((size_t)reg->nelems * esize);
	m += 2 * (size_t)nchunks * sizeof(struct engine_chunk);
	m += 2 * (size_t)nchunks * 2 * bm_words * sizeof(uint64_t);
	return m;
}

static int same_reg(const struct tally_register *a, const struct tally_register *b)
{
	return a->nelems == b->nelems && a->chunk_elems == b->chunk_elems &&
	       a->dtype == b->dtype && a->compression == b->compression &&
	       a->flags == b->flags && a->participants == b->participants &&
	       a->quorum == b->quorum && a->deadline_us == b->deadline_us;
}

/* Checks beyond tally_proto_get_register that depend on the engine and job. */
static int reg_check(const struct tally_engine *e, const struct engine_job *job,
		     const struct tally_register *reg, enum tally_reason *why)
{
	*why = TALLY_R_BAD_REGISTER;
	if (reg->dtype >= TALLY_DT_COUNT || reg->compression != 0 || reg->nelems == 0 ||
	    reg->chunk_elems == 0 || reg->participants == 0 ||
	    reg->participants > job->world || reg->quorum == 0 ||
	    reg->quorum > reg->participants || (reg->flags & ~TALLY_KEY_DETERMINISTIC))
		return -EINVAL;
	size_t esize = tally_dtype_size((enum tally_dtype)reg->dtype);
	if ((uint64_t)reg->chunk_elems * esize > e->cfg.max_chunk_bytes)
		return -EINVAL;
	/* Chunk indices of both parities must fit 32 bits (and never be ENGINE_NIL). */
	if (((uint64_t)reg->nelems + reg->chunk_elems - 1) / reg->chunk_elems > (1u << 30))
		return -EINVAL;
	if ((reg->flags & TALLY_KEY_DETERMINISTIC) && e->det_nslots == 0) {
		*why = TALLY_R_UNSUPPORTED;
		return -EINVAL;
	}
	*why = TALLY_OK;
	return 0;
}

/* Create a key (caller checked it does not exist). 0, -ENOMEM, -ENOSPC. */
static int key_create(struct tally_engine *e, struct engine_job *job, uint32_t key,
		      const struct tally_register *reg)
{
	if (e->nkeys >= e->cfg.max_keys)
		return -ENOSPC;
	uint32_t nchunks = (uint32_t)(((uint64_t)reg->nelems + reg->chunk_elems - 1) /
				      reg->chunk_elems);
	uint32_t bm_words = (reg->participants + 63u) / 64u;
	size_t need = key_mem(reg, nchunks, bm_words);
	if (need > e->cfg.mem_budget || e->mem_used > e->cfg.mem_budget - need)
		return -ENOMEM;

	struct engine_key *k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	k->job_id = job->id;
	k->key = key;
	k->job = job;
	k->reg = *reg;
	memset(k->reg.reserved, 0, sizeof(k->reg.reserved));
	k->quorum = reg->quorum;
	k->deadline_us = reg->deadline_us;
	k->deadline_ns = (uint64_t)reg->deadline_us * 1000u;
	engine_key_job_policy(k);
	k->nchunks = nchunks;
	k->bm_words = bm_words;
	k->dtype = reg->dtype;
	k->det = (reg->flags & TALLY_KEY_DETERMINISTIC) ? 1 : 0;
	k->esize = (uint32_t)tally_dtype_size((enum tally_dtype)reg->dtype);
	k->open_head = k->open_tail = ENGINE_NIL;
	k->mem = need;
	for (int p = 0; p < 2; p++) {
		k->acc[p] = engine_mem_alloc(e, (size_t)reg->nelems * 4);
		if (!k->acc[p])
			goto nomem;
		if (k->esize != 4) {
			k->res[p] = engine_mem_alloc(e, (size_t)reg->nelems * k->esize);
			if (!k->res[p])
				goto nomem;
		}
	}
	k->chunks = calloc(2 * (size_t)nchunks, sizeof(*k->chunks));
	k->bits = calloc(2 * (size_t)nchunks * 2 * bm_words, sizeof(uint64_t));
	if (!k->chunks || !k->bits)
		goto nomem;
	for (size_t i = 0; i < 2 * (size_t)nchunks; i++) {
		k->chunks[i].det_head = ENGINE_NIL;
		k->chunks[i].prev = k->chunks[i].next = ENGINE_NIL;
	}
	ktab_insert(e, k);
	job->nkeys++;
	e->mem_used += need;
	return 0;
nomem:
	key_free(e, k);
	return -ENOMEM;
}

int tally_engine_key_register(struct tally_engine *e, uint32_t job_id, uint32_t key,
			      const struct tally_register *reg)
{
	if (!e || !reg)
		return -EINVAL;
	struct engine_job *job = engine_job_find(e, job_id);
	if (!job)
		return -ENOENT;
	enum tally_reason why;
	if (reg_check(e, job, reg, &why) < 0)
		return -EINVAL;
	struct engine_key *k = engine_key_find(e, job_id, key);
	if (k)
		return same_reg(&k->reg, reg) ? 0 : -EEXIST;
	return key_create(e, job, key, reg);
}

enum tally_reason engine_rx_register(struct tally_engine *e, const struct tally_pkt *pkt,
				 const struct tally_addr *from, size_t len)
{
	static const struct tally_addr noaddr;
	const struct tally_hdr *h = &pkt->hdr;
	const struct tally_addr *src = from ? from : &noaddr;
	struct engine_job *job = engine_job_find(e, h->job_id);
	if (!job)
		return engine_reject(e, h, from, TALLY_R_WRONG_JOB);
	if (job->token != h->token)
		return engine_reject(e, h, from, TALLY_R_WRONG_TOKEN);
	if (h->rank >= job->world)
		return engine_reject(e, h, from, TALLY_R_BAD_RANK);
	struct tally_register reg;
	enum tally_reason r = tally_proto_get_register(pkt, &reg);
	if (r != TALLY_OK)
		return engine_reject(e, h, from, r);
	if (reg_check(e, job, &reg, &r) < 0)
		return engine_reject(e, h, from, r);

	/* Validate everything before the implicit bind so a rejection changes nothing. */
	const struct engine_rank *rk = &job->ranks[h->rank];
	uint64_t now = engine_now(e);
	if (rk->bound && !engine_addr_eq(&rk->addr, src) &&
	    now - rk->last_ns < e->cfg.rejoin_timeout_ns)
		return engine_reject(e, h, from, TALLY_R_RANK_TAKEN);
	struct engine_key *k = engine_key_find(e, h->job_id, h->key);
	if (k && !same_reg(&k->reg, &reg))
		return engine_reject(e, h, from, TALLY_R_KEY_CONFLICT);
	if (!k) {
		int rc = key_create(e, job, h->key, &reg);
		if (rc < 0)
			return engine_reject(e, h, from, TALLY_R_NO_MEMORY);
	}
	engine_bind(e, job, h->rank, src, now);
	engine_heard(job, h->rank, now, len);
	e->st.registers++;

	uint8_t pl[TALLY_REGISTER_LEN];
	tally_proto_put_register(pl, &reg);
	struct tally_hdr ah = *h;
	ah.flags = TALLY_F_ACK;
	ah.reason = 0;
	ah.contrib = 0;
	ah.aux = 0;
	ah.payload_len = TALLY_REGISTER_LEN;
	ah.crc = tally_crc32c(pl, sizeof(pl));
	engine_send(e, src, &ah, pl, sizeof(pl));
	return TALLY_OK;
}

/* Forget a key's open chunks (staged pushes, lists, open counters), then free it. */
static void key_remove(struct tally_engine *e, struct engine_key *k)
{
	for (uint32_t idx = 0; idx < 2 * k->nchunks; idx++) {
		struct engine_chunk *ch = &k->chunks[idx];
		if (ch->state == ENGINE_CH_OPEN) {
			engine_open_unlink(e, k, idx);
			ch->state = ENGINE_CH_UNUSED;
		}
		engine_det_release(e, ch);
	}
	for (int p = 0; p < 2; p++) {
		if (k->par[p].open) {
			k->par[p].open = 0;
			e->open_rounds--;
		}
	}
	engine_dl_update(e, k);
	ktab_delete(e, k);
	k->job->nkeys--;
	e->mem_used -= k->mem;
	key_free(e, k);
}

void engine_keys_remove_job(struct tally_engine *e, struct engine_job *job)
{
	if (!e->keys)
		return;
	for (uint32_t i = e->nkeys; i-- > 0;) {
		struct engine_key *k = e->keys[i];
		if (k && k->job == job)
			key_remove(e, k);
	}
}

int tally_engine_key_policy(struct tally_engine *e, uint32_t job_id, uint32_t key,
			    uint16_t quorum, uint32_t deadline_us)
{
	struct engine_key *k = engine_key_find(e, job_id, key);
	if (!k)
		return -ENOENT;
	if (quorum == 0 || quorum > k->reg.participants)
		return -EINVAL;
	k->own_policy = 1;
	k->quorum = quorum;
	k->deadline_us = deadline_us;
	k->deadline_ns = (uint64_t)deadline_us * 1000u;
	/* A lower quorum completes the open chunks that already reach it. */
	uint32_t idx = k->open_head;
	while (idx != ENGINE_NIL) {
		uint32_t next = k->chunks[idx].next;
		if (k->chunks[idx].count >= k->quorum)
			engine_complete(e, k, idx, ENGINE_HOW_QUORUM);
		idx = next;
	}
	engine_dl_update(e, k);
	return 0;
}

int tally_engine_walk_keys(const struct tally_engine *e,
			   int (*cb)(void *arg, const struct tally_engine_key_info *ki),
			   void *arg)
{
	for (uint32_t i = 0; i < e->nkeys; i++) {
		const struct engine_key *k = e->keys[i];
		struct tally_engine_key_info ki;
		memset(&ki, 0, sizeof(ki));
		ki.job_id = k->job_id;
		ki.key = k->key;
		ki.nelems = k->reg.nelems;
		ki.chunk_elems = k->reg.chunk_elems;
		ki.nchunks = k->nchunks;
		ki.dtype = k->dtype;
		ki.deterministic = k->det;
		ki.participants = k->reg.participants;
		ki.quorum = k->quorum;
		ki.deadline_us = k->deadline_us;
		for (int p = 0; p < 2; p++) {
			const struct engine_par *par = &k->par[p];
			ki.parity[p].round = par->round;
			ki.parity[p].chunks_open = par->chunks_open;
			ki.parity[p].chunks_complete = par->started ? par->chunks_done : 0;
			if (!par->started)
				ki.parity[p].state = TALLY_SLOT_UNUSED;
			else if (par->open)
				ki.parity[p].state = TALLY_SLOT_OPEN;
			else
				ki.parity[p].state = TALLY_SLOT_COMPLETE;
			ki.rounds_open += par->open;
		}
		ki.mem_bytes = k->mem;
		int rc = cb(arg, &ki);
		if (rc)
			return rc;
	}
	return 0;
}
