/* SPDX-License-Identifier: Apache-2.0
 * engine_held.c — HELD acknowledgements (tally_proto.h): "your pushes of these chunks are
 * in, the chunk waits for other workers". Pushes that do not complete their chunk are
 * acknowledged in ranges: consecutive chunks of one (job, rank, key, round) extend one
 * pending HELD, sent when the range cannot grow, when the table is full, before the engine
 * sends any RESULT (so a worker never sees a later chunk's RESULT before an earlier
 * chunk's HELD and takes that for a loss) and at tally_engine_poll(). No clock, no timer:
 * the table is a handful of fixed entries inside the engine.
 */
#include <string.h>

#include "engine_int.h"

#define ENGINE_HELD_BACK 32 /* chunks a new range may re-acknowledge (bounds the walk) */

static void held_send(struct tally_engine *e, const struct engine_held *hd)
{
	struct tally_hdr h;

	memset(&h, 0, sizeof(h));
	h.op = TALLY_OP_HELD;
	h.job_id = hd->job_id;
	h.token = hd->token;
	h.rank = hd->rank;
	h.key = hd->key;
	h.round = hd->round;
	h.offset = hd->off;
	h.count = hd->end - hd->off;
	h.dtype = hd->dtype;
	h.flags = hd->flags;
	h.reason = hd->reason;
	e->st.held_sent++;
	engine_send(e, &hd->to, &h, NULL, 0);
}

void engine_held_flush(struct tally_engine *e)
{
	for (uint32_t i = 0; i < e->nheld; i++)
		held_send(e, &e->held[i]);
	e->nheld = 0;
}

/* Send the pending ranges of (job, rank), oldest first; the others stay pending (their
 * order with this rank's packets does not matter to anyone). */
static void held_flush_rank(struct tally_engine *e, uint32_t job_id, uint32_t rank)
{
	uint32_t j = 0;

	for (uint32_t i = 0; i < e->nheld; i++) {
		struct engine_held *hd = &e->held[i];

		if (hd->rank == rank && hd->job_id == job_id) {
			held_send(e, hd);
			continue;
		}
		if (j != i)
			e->held[j] = *hd;
		j++;
	}
	e->nheld = j;
}

/* A new range is acknowledged cumulatively, as TCP's ACKs are: it starts at the first of
 * the (up to ENGINE_HELD_BACK) chunks just before it that are still open in this round and
 * hold the rank's push. A lost HELD is then repaired by the next HELD of the key; alone,
 * it made the worker take those pushes for lost (a gap) and re-send each payload, answered
 * HELD+RESEND, which also widened its reordering allowance and slowed real repairs
 * (measured at 10% loss: about as many duplicate pushes as lost ones). */
static uint32_t held_back(const struct engine_key *k, uint32_t rank, uint32_t round,
			  uint32_t off)
{
	uint32_t c = off / k->reg.chunk_elems, p = round & 1;
	uint32_t lim = c > ENGINE_HELD_BACK ? c - ENGINE_HELD_BACK : 0;

	while (c > lim) {
		uint32_t idx = p * k->nchunks + c - 1;
		const struct engine_chunk *ch = &k->chunks[idx];

		if (ch->state != ENGINE_CH_OPEN || ch->round != round ||
		    !engine_bit(engine_contrib_bm(k, idx), rank))
			break;
		c--;
	}
	return c * k->reg.chunk_elems;
}

static void held_fill(struct engine_held *hd, const struct engine_key *k, uint32_t rank,
		      uint32_t round, uint32_t off, uint32_t count)
{
	hd->to = k->job->ranks[rank].addr;
	hd->job_id = k->job_id;
	hd->token = k->job->token;
	hd->rank = rank;
	hd->key = k->key;
	hd->round = round;
	hd->off = off;
	hd->end = off + count;
	hd->dtype = k->dtype;
	hd->flags = 0;
	hd->reason = TALLY_OK;
}

/* A pending range of (job, rank) after entry i. */
static int held_later(const struct tally_engine *e, uint32_t i, uint32_t job_id, uint32_t rank)
{
	for (uint32_t j = i + 1; j < e->nheld; j++)
		if (e->held[j].rank == rank && e->held[j].job_id == job_id)
			return 1;
	return 0;
}

void engine_held_add(struct tally_engine *e, const struct engine_key *k, uint32_t rank,
		     uint32_t round, uint32_t off, uint32_t count)
{
	if (!k->job->ranks[rank].held)
		return; /* a worker that did not ask for HELDs (JOIN caps) */
	e->st.held_chunks++;
	for (uint32_t i = 0; i < e->nheld; i++) {
		struct engine_held *hd = &e->held[i];

		if (hd->rank != rank || hd->key != k->key || hd->job_id != k->job_id ||
		    hd->round != round)
			continue;
		/* the next chunk, the common case of a window burst; unless a range of this
		 * rank's other pushes came since, which would then go out after newer ones */
		if (hd->end == off && !held_later(e, i, k->job_id, rank)) {
			hd->end += count;
			return;
		}
		/* the rank's pending ranges go, in the order of the pushes they answer: a HELD
		 * sent ahead of an older pending one showed the worker a gap (a re-send) */
		held_flush_rank(e, k->job_id, rank);
		break;
	}
	if (e->nheld == ENGINE_HELD_MAX)
		engine_held_flush(e);
	struct engine_held *hd = &e->held[e->nheld++];
	held_fill(hd, k, rank, round, off, count);
	hd->off = held_back(k, rank, round, off);
}

/* A HELD followed at once by the RESULT of its chunk says nothing the RESULT does not (it
 * answers the push too, INCLUDED): with the ranks in step, most pushes met their chunk's
 * last one in the same burst, and every such chunk cost a HELD more per rank. Only the
 * newest end of a range can go, and only from the rank's newest pending range: a later
 * one (another key's pushes) is flushed before the RESULT, and the worker took that HELD
 * of later pushes for a gap and re-sent the trimmed push (issue 17: the 1 MiB allreduce,
 * W=4, window 32, 12-29 such re-sends a run with no loss). */
void engine_held_trim(struct tally_engine *e, const struct engine_key *k, uint32_t round,
		      uint32_t off, uint32_t count)
{
	uint32_t j = 0;

	for (uint32_t i = 0; i < e->nheld; i++) {
		struct engine_held *hd = &e->held[i];

		if (hd->key == k->key && hd->job_id == k->job_id && hd->round == round &&
		    !hd->flags) {
			/* only its newest end: the RESULT of a chunk at the front would come
			 * after the HELD of later pushes, a gap to the worker (re-sends) */
			if (hd->end == off + count && !held_later(e, i, hd->job_id, hd->rank))
				hd->end = off;
			if (hd->off >= hd->end) {
				e->st.held_trimmed++;
				continue;
			}
		}
		if (j != i)
			e->held[j] = *hd;
		j++;
	}
	e->nheld = j;
}

void engine_held_now(struct tally_engine *e, const struct engine_key *k, uint32_t rank,
		     uint32_t round, uint32_t off, uint32_t count, uint16_t flags,
		     enum tally_reason reason)
{
	struct engine_held hd;

	if (!k->job->ranks[rank].held)
		return;
	/* Pending ranges answer older pushes: they go first, or the worker could take this
	 * answer (the first to a push sent later) for a gap. MISSING, DONE and RESEND show
	 * no gap: they leave the pending ranges to grow. */
	if (!flags)
		held_flush_rank(e, k->job_id, rank);
	if (!(flags & (TALLY_F_MISSING | TALLY_F_DONE)))
		e->st.held_chunks++;
	held_fill(&hd, k, rank, round, off, count);
	if (!flags) /* a probe's answer: cumulative too (not MISSING, RESEND or DONE) */
		hd.off = held_back(k, rank, round, off);
	hd.flags = flags;
	hd.reason = (uint8_t)reason;
	held_send(e, &hd);
}
