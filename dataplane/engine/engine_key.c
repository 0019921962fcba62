/* SPDX-License-Identifier: Apache-2.0
 * engine_key.c — registration within the memory budget (each key is one block of the
 * per-core arena: struct, chunk state, bitmaps, transport RESULT-buffer state,
 * accumulators) and the job's key and byte quotas, live policy (per key and job-wide), key
 * removal (deferred while the transport still references a RESULT buffer) and the key
 * walker.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"

int engine_keys_arena_init(struct tally_engine *e)
{
	size_t size = e->cfg.mem_budget & ~(size_t)(ENGINE_ARENA_ALIGN - 1);
	if (size == 0)
		return 0;
	e->arena_mem = engine_mem_alloc(e, size);
	if (!e->arena_mem)
		return -ENOMEM;
	engine_arena_init(&e->arena, e->arena_mem, size);
	return 0;
}

void engine_keys_arena_fini(struct tally_engine *e)
{
	engine_mem_free(e, e->arena_mem);
	e->arena_mem = NULL;
	memset(&e->arena, 0, sizeof(e->arena));
}

static void key_free(struct tally_engine *e, struct engine_key *k)
{
	e->mem_used -= k->mem;
	engine_arena_free(&e->arena, k);
}

static size_t align64(size_t n)
{
	return (n + 63) & ~(size_t)63;
}

/* Offsets inside a key's arena block. Everything before acc[0] starts zeroed. */
struct key_layout {
	size_t chunks, bits, xbufs, acc[2], res[2], err, total;
};

static void key_layout(const struct tally_engine *e, const struct tally_register *reg,
		       uint32_t nchunks, uint32_t bm_words, struct key_layout *l)
{
	size_t esize = tally_dtype_size((enum tally_dtype)reg->dtype);
	size_t off = align64(sizeof(struct engine_key));
	l->chunks = off;
	off += align64(2 * (size_t)nchunks * sizeof(struct engine_chunk));
	l->bits = off;
	off += align64(2 * (size_t)nchunks * ENGINE_BM_PER_CHUNK * bm_words * sizeof(uint64_t));
	l->xbufs = off;
	off += align64(2 * (size_t)nchunks * e->xbuf_size);
	for (int p = 0; p < 2; p++) {
		l->acc[p] = off;
		off += align64((size_t)reg->nelems * 4);
	}
	const struct engine_codec *codec = engine_codec_by_id(reg->compression);
	for (int p = 0; p < 2; p++) {
		l->res[p] = off;
		if (codec)
			off += align64(codec->key_bytes(reg->nelems, reg->chunk_elems));
		else if (esize != 4)
			off += align64((size_t)reg->nelems * esize);
	}
	/* the codec's state kept across rounds (e.g. the 1-bit server error) */
	l->err = off;
	if (codec)
		off += align64(codec->state_bytes(reg->nelems));
	l->total = off;
}

/* Does the transport still reference one of the key's RESULT buffers? */
static int key_busy(const struct tally_engine *e, const struct engine_key *k)
{
	if (!k->xbufs || !e->ops->buf_busy)
		return 0;
	for (uint32_t idx = 0; idx < 2 * k->nchunks; idx++)
		if (e->ops->buf_busy(e->xctx, engine_xbuf(e, k, idx)))
			return 1;
	return 0;
}

void engine_keys_reap(struct tally_engine *e)
{
	struct engine_key **link = &e->zombies;
	while (*link) {
		struct engine_key *k = *link;
		if (key_busy(e, k)) {
			link = &k->zombie_next;
			continue;
		}
		*link = k->zombie_next;
		key_free(e, k);
	}
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
	const struct engine_codec *codec = engine_codec_by_id(reg->compression);
	if (reg->dtype >= TALLY_DT_COUNT || (reg->compression && !codec) ||
	    (codec && reg->dtype != codec->dtype) ||
	    reg->nelems == 0 || reg->chunk_elems > (1u << 30) ||
	    reg->chunk_elems == 0 || reg->participants == 0 ||
	    reg->participants > job->world || reg->quorum == 0 ||
	    reg->quorum > reg->participants || (reg->flags & ~TALLY_KEY_FLAGS) ||
	    ((reg->flags & TALLY_KEY_AVERAGE) && (reg->dtype == TALLY_DT_I32 || reg->compression)))
		return -EINVAL;
	size_t esize = tally_dtype_size((enum tally_dtype)reg->dtype);
	uint64_t chunk_bytes = codec ? codec->wire_bytes(reg->chunk_elems) :
			       (uint64_t)reg->chunk_elems * esize;
	if (chunk_bytes > e->cfg.max_chunk_bytes)
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

/* The job's quotas: how many keys and how many bytes of the core's key arena one job may
 * hold, so one tenant (or one holder of a job's token) cannot take the memory every other
 * job needs. A job's own quotas (operator admission) override the engine's. May the job
 * register one more key of `bytes` arena bytes? OK, QUOTA_KEYS, QUOTA_BYTES. */
static enum tally_reason quota_check(const struct tally_engine *e, const struct engine_job *job,
				     size_t bytes)
{
	uint32_t qk = job->q_keys ? job->q_keys : e->cfg.quota_keys;
	uint64_t qb = job->q_bytes ? job->q_bytes : e->cfg.quota_bytes;

	if (qk && job->nkeys >= qk)
		return TALLY_R_QUOTA_KEYS;
	if (qb && (uint64_t)job->mem + bytes > qb)
		return TALLY_R_QUOTA_BYTES;
	if (job->open_adm) { /* open admission together never takes the operator's share */
		uint64_t open = bytes;
		for (uint32_t i = 0; i < e->cfg.max_jobs; i++)
			if (e->jobs[i].in_use && e->jobs[i].open_adm)
				open += e->jobs[i].mem;
		if (open > e->cfg.admit_bytes)
			return TALLY_R_QUOTA_BYTES;
	}
	return TALLY_OK;
}

/* Create a key (caller checked it does not exist). 0, -ENOMEM, -ENOSPC, -EDQUOT (the job's
 * quota); *why is the reason to answer. */
static int key_create(struct tally_engine *e, struct engine_job *job, uint32_t key,
		      const struct tally_register *reg, enum tally_reason *why)
{
	*why = TALLY_R_NO_MEMORY;
	if (e->nkeys >= e->cfg.max_keys)
		return -ENOSPC;
	uint32_t nchunks = (uint32_t)(((uint64_t)reg->nelems + reg->chunk_elems - 1) /
				      reg->chunk_elems);
	uint32_t bm_words = (reg->participants + 63u) / 64u;
	struct key_layout l;
	key_layout(e, reg, nchunks, bm_words, &l);
	*why = quota_check(e, job, l.total);
	if (*why != TALLY_OK)
		return -EDQUOT;
	*why = TALLY_R_NO_MEMORY;
	size_t charged;
	uint8_t *blk = engine_arena_alloc(&e->arena, l.total, &charged);
	if (!blk)
		return -ENOMEM;
	memset(blk, 0, l.acc[0]);
	struct engine_key *k = (struct engine_key *)blk;
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
	k->avg = (reg->flags & TALLY_KEY_AVERAGE) ? 1 : 0;
	k->esize = (uint32_t)tally_dtype_size((enum tally_dtype)reg->dtype);
	k->open_head = k->open_tail = ENGINE_NIL;
	k->mem = charged;
	k->codec = engine_codec_by_id(reg->compression);
	k->wire_stride = k->codec ? (uint32_t)k->codec->wire_bytes(reg->chunk_elems) : 0;
	for (int p = 0; p < 2; p++) {
		k->acc[p] = blk + l.acc[p];
		k->res[p] = k->esize != 4 || k->codec ? blk + l.res[p] : NULL;
	}
	k->err = l.total > l.err ? (float *)(blk + l.err) : NULL;
	if (k->err)
		memset(k->err, 0, l.total - l.err);
	k->chunks = (struct engine_chunk *)(blk + l.chunks);
	k->bits = (uint64_t *)(blk + l.bits);
	k->xbufs = e->xbuf_size ? blk + l.xbufs : NULL;
	for (size_t i = 0; i < 2 * (size_t)nchunks; i++) {
		k->chunks[i].det_head = ENGINE_NIL;
		k->chunks[i].prev = k->chunks[i].next = ENGINE_NIL;
	}
	/* The transport learns each RESULT buffer once (e.g. its IOVA), never per send. */
	if (k->xbufs && e->ops->buf_init) {
		for (uint32_t idx = 0; idx < 2 * nchunks; idx++) {
			uint32_t bytes;
			const void *pl = engine_result_payload(k, idx, &bytes);
			e->ops->buf_init(e->xctx, engine_xbuf(e, k, idx), pl, bytes);
		}
	}
	engine_ktab_insert(e, k);
	job->nkeys++;
	job->mem += charged;
	job->claim = 0; /* the claimant registered: no longer a pending claim */
	e->mem_used += charged;
	*why = TALLY_OK;
	return 0;
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
	return key_create(e, job, key, reg, &why);
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
	/* A keyed job binds ranks by JOIN only (its nonce refuses replays): a recorded
	 * REGISTER replayed from elsewhere must not take the rank. */
	if (engine_job_auth(e, job) && (!rk->bound || !engine_addr_eq(&rk->addr, src)))
		return engine_reject(e, h, from, TALLY_R_NOT_JOINED);
	uint64_t now = engine_now(e);
	r = engine_bind_check(e, job, h->rank, src, now);
	if (r != TALLY_OK)
		return engine_reject(e, h, from, r);
	struct engine_key *k = engine_key_find(e, h->job_id, h->key);
	if (k && !same_reg(&k->reg, &reg))
		return engine_reject(e, h, from, TALLY_R_KEY_CONFLICT);
	if (!k) {
		int rc = key_create(e, job, h->key, &reg, &r);
		if (rc < 0)
			return engine_reject(e, h, from, r);
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
	engine_ktab_delete(e, k);
	k->job->nkeys--;
	k->job->mem -= k->mem;
	k->job = NULL;
	/* A RESULT copy still queued in the transport points into this block: keep it (and
	 * its budget charge) until tally_engine_poll finds it released. */
	if (key_busy(e, k)) {
		k->zombie_next = e->zombies;
		e->zombies = k;
		return;
	}
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
			engine_complete(e, k, idx, ENGINE_HOW_QUORUM, ENGINE_NIL);
		idx = next;
	}
	engine_dl_update(e, k);
	return 0;
}

/* Job-wide policy (quorum, deadline): stored on the job so keys created later start with it
 * (engine_key_job_policy at creation), and applied at once to the job's keys through the
 * per-key path, overriding any key's own policy, as the operator's job-wide change always
 * did. */
int tally_engine_job_policy(struct tally_engine *e, uint32_t job_id, int set_quorum,
			    uint16_t quorum, int set_deadline, uint32_t deadline_us)
{
	struct engine_job *job = e ? engine_job_find(e, job_id) : NULL;

	if (!job)
		return -ENOENT;
	if (set_quorum) {
		job->pol_quorum_set = 1;
		job->pol_quorum = quorum;
	}
	if (set_deadline) {
		job->pol_deadline_set = 1;
		job->pol_deadline_us = deadline_us;
	}
	for (uint32_t i = 0; i < e->nkeys; i++) {
		struct engine_key *k = e->keys[i];
		if (!k || k->job != job)
			continue;
		uint16_t q = k->quorum;
		uint32_t dl = k->deadline_us;
		if (job->pol_quorum_set)
			q = job->pol_quorum && job->pol_quorum <= k->reg.participants ?
			    job->pol_quorum : k->reg.participants;
		if (job->pol_deadline_set)
			dl = job->pol_deadline_us;
		/* through the per-key path: a lower quorum completes open chunks reaching it */
		int rc = tally_engine_key_policy(e, job_id, k->key, q, dl);
		if (rc)
			return rc;
		k->own_policy = 0;
	}
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
