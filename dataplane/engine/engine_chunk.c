/* SPDX-License-Identifier: Apache-2.0
 * engine_chunk.c — the PUSH path: round/parity rules, exactly-once bitmaps, accumulation
 * through sum_avx, completion (quorum or deadline; an average key's sum scaled before its
 * one rounding), whose RESULTs engine_result.c sends (fan-out, re-sends to duplicate/late
 * pushes and PULLs, owner mode), and the
 * stuck-chunk walker. Nothing here allocates.
 */
#include <stdbool.h>
#include <string.h>

#include "engine_int.h"

/* ---- open list (per key, oldest first) and the engine's deadline-key list ---- */

void engine_dl_update(struct tally_engine *e, struct engine_key *k)
{
	int want = k->deadline_ns > 0 && k->open_head != ENGINE_NIL && k->job != NULL;
	if (want == k->on_dl)
		return;
	if (want) {
		k->dl_prev = NULL;
		k->dl_next = e->dl_head;
		if (e->dl_head)
			e->dl_head->dl_prev = k;
		e->dl_head = k;
	} else {
		if (k->dl_prev)
			k->dl_prev->dl_next = k->dl_next;
		else
			e->dl_head = k->dl_next;
		if (k->dl_next)
			k->dl_next->dl_prev = k->dl_prev;
		k->dl_prev = k->dl_next = NULL;
	}
	k->on_dl = (uint8_t)want;
}

static void open_link(struct tally_engine *e, struct engine_key *k, uint32_t idx)
{
	struct engine_chunk *ch = &k->chunks[idx];
	ch->next = ENGINE_NIL;
	ch->prev = k->open_tail;
	if (k->open_tail != ENGINE_NIL)
		k->chunks[k->open_tail].next = idx;
	else
		k->open_head = idx;
	k->open_tail = idx;
	k->par[idx >= k->nchunks].chunks_open++;
	e->open_chunks++;
	if (k->deadline_ns && !k->on_dl)
		engine_dl_update(e, k);
}

void engine_open_unlink(struct tally_engine *e, struct engine_key *k, uint32_t idx)
{
	struct engine_chunk *ch = &k->chunks[idx];
	if (ch->prev != ENGINE_NIL)
		k->chunks[ch->prev].next = ch->next;
	else
		k->open_head = ch->next;
	if (ch->next != ENGINE_NIL)
		k->chunks[ch->next].prev = ch->prev;
	else
		k->open_tail = ch->prev;
	ch->prev = ch->next = ENGINE_NIL;
	k->par[idx >= k->nchunks].chunks_open--;
	e->open_chunks--;
	if (k->open_head == ENGINE_NIL && k->on_dl)
		engine_dl_update(e, k);
}

/* TALLY_KEY_AVERAGE keys: the RESULT is the average of the contributors' pushes, taken on
 * the f32 accumulator before the one rounding to the wire dtype. Dividing after the
 * appliance rounded the sum to f16 overflows (4 x 40000 sums to 160000 > 65504: inf) and
 * rounds twice (up to 1.33 ulp off the exact mean for 3 workers); scaling first leaves one
 * rounding of the f32 quotient. The divisor is the RESULT's contributor count (with a
 * quorum, the pushes that are in this sum): into res (f16 / bf16), or in place (f32, whose
 * RESULT payload is the accumulator itself; REGISTER refuses i32 averages). */
static void avg_store(const struct engine_key *k, void *res, float *acc, uint32_t n,
		      uint16_t contrib)
{
	float scale = 1.0f / (float)(contrib ? contrib : 1);

	switch (k->dtype) {
	case TALLY_DT_F16:
		tally_sum_f32_to_f16(res, acc, n, scale);
		break;
	case TALLY_DT_BF16:
		tally_sum_f32_to_bf16(res, acc, n, scale);
		break;
	default:
		tally_sum_f32_scale(acc, acc, n, scale);
		break;
	}
}

void engine_complete(struct tally_engine *e, struct engine_key *k, uint32_t idx, int how,
		     uint32_t last)
{
	struct engine_chunk *ch = &k->chunks[idx];
	uint32_t p = idx >= k->nchunks;
	uint32_t c = idx - p * k->nchunks;
	uint32_t n = engine_chunk_len(k, c);
	size_t off = (size_t)c * k->reg.chunk_elems;
	void *acc = (uint8_t *)k->acc[p] + off * 4;

	engine_open_unlink(e, k, idx);
	ch->state = ENGINE_CH_DONE;
	ch->first_ns = engine_now(e); /* a fresh read: chunk_start reads one per chunk too */
	struct engine_par *par = &k->par[p];
	if (par->started && par->round == ch->round && ++par->chunks_done == k->nchunks &&
	    par->open) {
		par->open = 0;
		e->open_rounds--;
	}
	if (k->det)
		engine_det_reduce(e, k, ch, acc, n);
	if (k->codec)
		k->codec->result(e, k, idx, acc, n, ch->count);
	else if (k->avg)
		avg_store(k, k->res[p] ? (uint8_t *)k->res[p] + off * k->esize : NULL, acc, n,
			  ch->count);
	else if (k->res[p])
		tally_sum_store((enum tally_dtype)k->dtype,
				(uint8_t *)k->res[p] + off * k->esize, acc, n);
	uint32_t bytes;
	const void *pl = engine_result_payload(k, idx, &bytes);
	ch->crc = tally_crc32c(pl, bytes);

	e->st.completions++;
	if (how == ENGINE_HOW_DEADLINE)
		e->st.deadline_completions++;
	else if (ch->count < k->reg.participants)
		e->st.quorum_completions++;

	/* Pending HELDs go first: a worker must not see this RESULT before the HELD of a
	 * chunk it pushed earlier (it would take the gap for a loss); one for this chunk
	 * need not go at all. */
	if (e->nheld)
		engine_held_trim(e, k, ch->round, (uint32_t)off, n);
	engine_held_flush_any(e);
	engine_result_fanout(e, k, idx, how, last);
}

/* ---- complete sums after an appliance restart (engine_recover.c asks for them) ---- */

/* Every participant's bit: the sum being installed held all of them. */
static void all_bits(const struct engine_key *k, uint64_t *bm)
{
	for (uint32_t wd = 0; wd < k->bm_words; wd++) {
		uint32_t left = k->reg.participants - wd * 64;

		bm[wd] = left >= 64 ? ~0ull : ((1ull << left) - 1);
	}
}

static enum tally_reason chunk_install(struct tally_engine *e, const struct tally_pkt *pkt,
				       struct engine_job *job, struct engine_key *k, uint32_t c,
				       size_t len)
{
	const struct tally_hdr *h = &pkt->hdr;
	uint32_t p = h->round & 1, idx = p * k->nchunks + c;
	struct engine_chunk *ch = &k->chunks[idx];

	/* one-bit sums carry the old appliance's server error, which is gone; a quorum sum
	 * does not say which ranks it holds: neither can stand in for the lost round */
	if ((k->codec && !k->codec->recover) || h->contrib != k->reg.participants)
		return engine_drop(e, TALLY_R_UNSUPPORTED);
	engine_heard(job, h->rank, engine_now_cached(e), len);
	if (ch->state == ENGINE_CH_DONE && ch->round == h->round) {
		e->st.duplicates++; /* another rank's answer came first */
		return TALLY_OK;
	}
	/* only a round someone re-pushed and waits on (it is open here) is installed */
	if (ch->state != ENGINE_CH_OPEN || ch->round != h->round)
		return engine_drop(e, TALLY_R_STALE_ROUND);
	/* and only once this engine asked for it (NEED_RESULT: a restart left ranks a round
	 * apart): an unasked complete sum, e.g. forged into an unauthenticated job's open
	 * chunk during a normal run, would replace every rank's sum with one packet */
	if (!ch->asked) {
		e->st.installs_unasked++;
		return engine_drop(e, TALLY_R_STALE_ROUND);
	}
	/* the partial sum of the re-pushes is dropped, never added to: those ranks'
	 * contributions are in the complete sum already (nothing summed twice) */
	if (k->det)
		engine_det_release(e, ch);
	tally_sum_load((enum tally_dtype)k->dtype,
		       (uint8_t *)k->acc[p] + (size_t)h->offset * 4, pkt->payload, h->count);
	all_bits(k, engine_contrib_bm(k, idx));
	all_bits(k, engine_seen_bm(k, idx));
	ch->count = k->reg.participants;
	ch->nseen = k->reg.participants;
	ch->folded = k->reg.participants;
	e->st.installs++;
	engine_complete(e, k, idx, ENGINE_HOW_QUORUM, ENGINE_NIL);
	return TALLY_OK;
}

/* ---- PUSH ---- */

/* Has every participant acknowledged the other slot's round (pushed it)? A participant
 * that left with BYE cannot acknowledge and does not hold the others back. One that has
 * not joined yet does: reusing the slot would drop the round it still has to push (it
 * would get STALE_ROUND forever); the dead-rank timeout names it (engine_life.c). */
static int all_acked(const struct engine_key *k, const struct engine_chunk *other, uint32_t oidx)
{
	if (other->nseen >= k->reg.participants)
		return 1;
	const uint64_t *seen = engine_seen_bm(k, oidx);
	const struct engine_rank *ranks = k->job->ranks;
	for (uint32_t w = 0; w < k->reg.participants; w++)
		if (!ranks[w].left && !engine_bit(seen, w))
			return 0;
	return 1;
}

/* May chunk slot `ch` start round r, given the other parity's slot `other`? */
static enum tally_reason may_start(const struct engine_key *k, const struct engine_chunk *ch,
				   const struct engine_chunk *other, uint32_t oidx, uint32_t r)
{
	if (ch->state == ENGINE_CH_UNUSED) {
		if (other->state == ENGINE_CH_UNUSED || other->round == r + 1 ||
		    (r >= 1 && other->round == r - 1))
			return TALLY_OK;
		return other->round > r ? TALLY_R_STALE_ROUND : TALLY_R_TOO_EARLY;
	}
	if (ch->round > r || r - ch->round > 2)
		return TALLY_R_STALE_ROUND;
	/* ch holds r-2: reusable once every participant acknowledged it by pushing r-1,
	 * and never while r-2 itself is still open. */
	if (ch->state != ENGINE_CH_DONE || other->state == ENGINE_CH_UNUSED || other->round != r - 1 ||
	    !all_acked(k, other, oidx))
		return TALLY_R_TOO_EARLY;
	return TALLY_OK;
}

static void chunk_start(struct tally_engine *e, struct engine_key *k, uint32_t idx, uint32_t r,
			uint64_t now)
{
	struct engine_chunk *ch = &k->chunks[idx];
	uint32_t p = r & 1;
	struct engine_par *par = &k->par[p];
	if (!par->started || par->round != r) {
		if (par->open)
			e->open_rounds--;
		par->started = 1;
		par->round = r;
		par->chunks_done = 0;
		par->open = 1;
		e->open_rounds++;
	}
	memset(engine_contrib_bm(k, idx), 0, ENGINE_BM_PER_CHUNK * k->bm_words * sizeof(uint64_t));
	ch->folded = 0;
	ch->round = r;
	ch->state = ENGINE_CH_OPEN;
	ch->asked = 0;
	ch->count = 0;
	ch->nseen = 0;
	ch->crc = 0;
	ch->first_ns = now;
	k->stall_ns = 0;
	open_link(e, k, idx);
}

/* The checks PUSH and PULL share, in this order: job/token/address, key, (PUSH: dtype), and
 * that offset/count name one chunk of the key (a PULL may leave count 0). */
static enum tally_reason engine_locate(struct tally_engine *e, const struct tally_hdr *h,
				   const struct tally_addr *from, int push, struct engine_job **job,
				   struct engine_key **kp, uint32_t *cp)
{
	enum tally_reason rsn = engine_auth(e, h, from, job);
	if (rsn != TALLY_OK)
		return rsn;
	struct engine_key *k = engine_key_find(e, h->job_id, h->key);
	if (!k)
		return TALLY_R_UNKNOWN_KEY;
	if (push && (h->dtype != k->dtype ||
		     (h->flags & TALLY_F_CODECS) != (k->codec ? k->codec->flag : 0)))
		return TALLY_R_CHUNK_MISMATCH;
	uint32_t c = h->offset / k->reg.chunk_elems;
	if (h->offset >= k->reg.nelems || c * k->reg.chunk_elems != h->offset ||
	    ((push || h->count) && h->count != engine_chunk_len(k, c)))
		return TALLY_R_BAD_RANGE;
	*kp = k;
	*cp = c;
	return TALLY_OK;
}

enum tally_reason engine_rx_push(struct tally_engine *e, const struct tally_pkt *pkt,
			     const struct tally_addr *from, size_t len)
{
	const struct tally_hdr *h = &pkt->hdr;
	struct engine_job *job;
	struct engine_key *k;
	uint32_t c;
	enum tally_reason rsn = engine_locate(e, h, from, 1, &job, &k, &c);
	if (rsn != TALLY_OK)
		return engine_drop(e, rsn);
	uint32_t w = h->rank;
	if (w >= k->reg.participants)
		return engine_drop(e, TALLY_R_NOT_PARTICIPANT);

	if (h->flags & TALLY_F_COMPLETE)
		return chunk_install(e, pkt, job, k, c, len);
	uint32_t r = h->round, p = r & 1;
	uint32_t idx = p * k->nchunks + c;
	struct engine_chunk *ch = &k->chunks[idx];
	uint64_t now = engine_now_cached(e);

	if (ch->state == ENGINE_CH_UNUSED || ch->round != r) {
		uint32_t oidx = (p ^ 1) * k->nchunks + c;
		rsn = may_start(k, ch, &k->chunks[oidx], oidx, r);
		if (rsn == TALLY_R_TOO_EARLY && !k->stall_ns) {
			k->stall_ns = now ? now : 1;
			k->stall_round = r;
			k->stall_idx = oidx;
		}
		if (rsn == TALLY_R_STALE_ROUND)
			return engine_refuse_stale(e, job, h, from);
		if (rsn != TALLY_OK)
			return engine_drop(e, rsn);
		/* Round r-2's RESULT copies still queued in the transport reference this
		 * buffer: starting r would change packets not yet sent. The worker retries. */
		if (ch->state != ENGINE_CH_UNUSED && e->ops->buf_busy && k->xbufs &&
		    e->ops->buf_busy(e->xctx, engine_xbuf(e, k, idx))) {
			e->st.result_busy++;
			return engine_drop(e, TALLY_R_TOO_EARLY);
		}
		if (e->draining && (!k->par[p].started || k->par[p].round != r))
			return engine_refuse_draining(e, job, h, from);
		if (k->det && w != 0 && !engine_det_available(e))
			return engine_drop(e, TALLY_R_POOL_FULL);
		now = engine_now(e); /* deadline and stuck age count from here */
		chunk_start(e, k, idx, r, now);
	}

	uint64_t *contrib = engine_contrib_bm(k, idx);
	uint64_t *seen = contrib + k->bm_words;
	int nores = (h->flags & TALLY_F_NORESULT) != 0;
	if (ch->state == ENGINE_CH_DONE) {
		engine_heard(job, w, now, len);
		/* Complete: a duplicate or a late push (not added; the worker folds it into
		 * its next push). Either way it gets the RESULT. */
		/* the push's own wish decides its answer (and the next probe's) */
		engine_putbit(engine_nores_bm(k, idx), w, nores);
		if (engine_bit(contrib, w)) {
			e->st.duplicates++;
			engine_result_unicast(e, k, idx, w, 1, nores);
		} else {
			e->st.late_pushes++;
			if (!engine_bit(seen, w)) {
				engine_setbit(seen, w);
				ch->nseen++;
			}
			/* RESEND: this push was seen, so the worker need not make sure of it */
			engine_result_unicast(e, k, idx, w, 1, nores);
		}
		return TALLY_OK;
	}
	if (engine_bit(contrib, w)) {
		engine_heard(job, w, now, len);
		engine_putbit(engine_nores_bm(k, idx), w, nores);
		e->st.duplicates++;
		/* its HELD was lost or is late: say it again, the payload need not come back;
		 * RESEND: this copy was not needed (a worker's reordering estimate learns) */
		engine_held_now(e, k, w, r, h->offset, h->count, TALLY_F_RESEND, TALLY_OK);
		engine_recover_check(e, k, c);
		return TALLY_OK;
	}
	/* Reached for a chunk already open only: nothing has changed yet. */
	if (k->det && w != ch->folded && !engine_det_available(e))
		return engine_drop(e, TALLY_R_POOL_FULL);
	engine_heard(job, w, now, len);
	void *acc = (uint8_t *)k->acc[p] + (size_t)h->offset * 4;
	if (k->det) {
		engine_det_push(e, k, ch, w, acc, pkt->payload, h->count);
	} else if (k->codec) {
		k->codec->add(e, acc, pkt->payload, h->count, ch->count == 0);
	} else {
		if (ch->count == 0)
			tally_sum_load((enum tally_dtype)k->dtype, acc, pkt->payload, h->count);
		else
			tally_sum_acc((enum tally_dtype)k->dtype, acc, pkt->payload, h->count);
	}
	engine_setbit(contrib, w);
	engine_setbit(seen, w);
	engine_putbit(engine_nores_bm(k, idx), w, nores);
	ch->count++;
	ch->nseen++;
	e->st.pushes++;
	e->st.push_bytes += h->payload_len;
	if (ch->count >= k->quorum) {
		engine_complete(e, k, idx, ENGINE_HOW_QUORUM, w);
	} else {
		engine_held_add(e, k, w, r, h->offset, h->count);
		engine_recover_check(e, k, c);
	}
	return TALLY_OK;
}

/* ---- PULL ---- */

/* Did this PULL perhaps cross its chunk's RESULT (tally_proto.h, TALLY_F_DONE)? If the
 * echoed send stamp shows the sender has had nothing that left after the RESULT, however
 * long ago; or if it completed within the sender's round trip (aux: a path may reorder a
 * little, and older workers echo nothing). */
static bool pull_crossed(struct tally_engine *e, const struct tally_hdr *h,
			 const struct engine_chunk *ch)
{
	if ((h->reserved & TALLY_STAMP_VALID) &&
	    (int32_t)((uint32_t)h->reserved - ch->stamp) <= 0)
		return true;
	return engine_now(e) - ch->first_ns < (uint64_t)h->aux * 1000;
}

enum tally_reason engine_rx_pull(struct tally_engine *e, const struct tally_pkt *pkt,
			     const struct tally_addr *from, size_t len)
{
	const struct tally_hdr *h = &pkt->hdr;
	struct engine_job *job;
	struct engine_key *k;
	uint32_t c;
	enum tally_reason rsn = engine_locate(e, h, from, 0, &job, &k, &c);
	if (rsn != TALLY_OK)
		return engine_drop(e, rsn);
	if (h->rank >= k->reg.participants)
		return engine_drop(e, TALLY_R_NOT_PARTICIPANT);
	uint32_t idx = (h->round & 1) * k->nchunks + c;
	const struct engine_chunk *ch = &k->chunks[idx];
	uint32_t off = c * k->reg.chunk_elems, n = engine_chunk_len(k, c);
	if (ch->state == ENGINE_CH_UNUSED || ch->round < h->round) {
		/* the round has not started here: the sender's push of it is missing; say
		 * whether a push could start it now (else the worker backs off) */
		uint32_t oidx = ((h->round & 1) ^ 1) * k->nchunks + c;
		enum tally_reason why = may_start(k, ch, &k->chunks[oidx], oidx, h->round);
		if (k->job->ranks[h->rank].held)
			e->st.missing++;
		engine_held_now(e, k, h->rank, h->round, off, n, TALLY_F_MISSING,
				why == TALLY_OK ? TALLY_OK : TALLY_R_TOO_EARLY);
		return engine_drop(e, TALLY_R_TOO_EARLY);
	}
	if (ch->round > h->round) /* the probe of a push that was stale: say so too */
		return engine_refuse_stale(e, job, h, from);
	engine_heard(job, h->rank, engine_now_cached(e), len);
	e->st.pulls++;
	if (ch->state == ENGINE_CH_DONE) {
		/* Its RESULT went out. A probe that arrives within the sender's round trip
		 * (hdr.aux) of the completion most likely crossed it on its way: say so in a
		 * header (tally_proto.h, TALLY_F_DONE); later, the RESULT was lost: send it.
		 * A rank whose push the chunk has not seen (quorum) gets the RESULT as before.
		 * A rank that asked NORESULT gets its header-only RESULT at once: it costs no
		 * more than the HELD+DONE would. */
		int nores = (h->flags & TALLY_F_NORESULT) ||
			    engine_bit(engine_nores_bm(k, idx), h->rank);
		if (!nores && k->job->ranks[h->rank].held && !(h->flags & TALLY_F_DONE) &&
		    pull_crossed(e, h, ch) && engine_bit(engine_seen_bm(k, idx), h->rank)) {
			e->st.done_answers++;
			engine_held_now(e, k, h->rank, h->round, off, n, TALLY_F_DONE, TALLY_OK);
			return TALLY_OK;
		}
		/* RESEND tells the worker its push was seen (it acknowledges the round, see
		 * tally_client.h): a PULL is no push, so only if one was */
		engine_result_unicast(e, k, idx, h->rank, engine_bit(engine_seen_bm(k, idx), h->rank),
			       nores);
	} else if (engine_bit(engine_contrib_bm(k, idx), h->rank)) {
		/* a probe: the push is held, the chunk waits for others */
		if (k->job->ranks[h->rank].held)
			e->st.probes++;
		engine_held_now(e, k, h->rank, h->round, off, n, 0, TALLY_OK);
		engine_recover_check(e, k, c);
		engine_recover_probe(e, k, idx);
	} else {
		if (k->job->ranks[h->rank].held)
			e->st.missing++;
		engine_held_now(e, k, h->rank, h->round, off, n, TALLY_F_MISSING, TALLY_OK);
	}
	return TALLY_OK;
}

/* ---- deadlines and stuck chunks ---- */

unsigned engine_deadlines(struct tally_engine *e)
{
	if (!e->dl_head)
		return 0;
	uint64_t now = engine_now(e);
	unsigned done = 0;
	struct engine_key *k = e->dl_head;
	while (k) {
		struct engine_key *next = k->dl_next;
		/* The open list is in first-push order: stop at the first one not due. */
		while (k->open_head != ENGINE_NIL) {
			uint32_t idx = k->open_head;
			if (now - k->chunks[idx].first_ns < k->deadline_ns)
				break;
			engine_complete(e, k, idx, ENGINE_HOW_DEADLINE, ENGINE_NIL);
			done++;
		}
		k = next;
	}
	return done;
}

int tally_engine_walk_stuck(const struct tally_engine *e, uint64_t min_age_ns,
			    int (*cb)(void *arg, const struct tally_engine_stuck_info *si),
			    void *arg)
{
	uint64_t now = e->ops->now_ns(e->xctx);
	uint64_t missing[ENGINE_BM_WORDS_MAX];
	for (uint32_t i = 0; i < e->nkeys; i++) {
		const struct engine_key *k = e->keys[i];
		for (uint32_t idx = k->open_head; idx != ENGINE_NIL; idx = k->chunks[idx].next) {
			const struct engine_chunk *ch = &k->chunks[idx];
			uint64_t age = now - ch->first_ns;
			if (age < min_age_ns)
				break; /* the rest of this key's list is younger */
			const uint64_t *cbm = engine_contrib_bm(k, idx);
			for (uint32_t wd = 0; wd < k->bm_words; wd++) {
				uint32_t lo = wd * 64, left = k->reg.participants - lo;
				uint64_t all = left >= 64 ? ~0ull : ((1ull << left) - 1);
				missing[wd] = all & ~cbm[wd];
			}
			uint32_t c = idx >= k->nchunks ? idx - k->nchunks : idx;
			struct tally_engine_stuck_info si = {
				.job_id = k->job_id,
				.key = k->key,
				.round = ch->round,
				.offset = c * k->reg.chunk_elems,
				.count = engine_chunk_len(k, c),
				.age_ns = age,
				.contrib = ch->count,
				.participants = k->reg.participants,
				.missing = missing,
				.missing_words = k->bm_words,
			};
			int rc = cb(arg, &si);
			if (rc)
				return rc;
		}
	}
	return 0;
}
