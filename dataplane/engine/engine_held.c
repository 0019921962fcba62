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
		if (hd->end == off) { /* the next chunk: the common case of a window burst */
			hd->end += count;
			return;
		}
		held_send(e, hd);
		held_fill(hd, k, rank, round, off, count);
		return;
	}
	if (e->nheld == ENGINE_HELD_MAX)
		engine_held_flush(e);
	held_fill(&e->held[e->nheld++], k, rank, round, off, count);
}

void engine_held_now(struct tally_engine *e, const struct engine_key *k, uint32_t rank,
		     uint32_t round, uint32_t off, uint32_t count, uint16_t flags,
		     enum tally_reason reason)
{
	struct engine_held hd;

	if (!k->job->ranks[rank].held)
		return;
	if (!(flags & TALLY_F_MISSING))
		e->st.held_chunks++;
	held_fill(&hd, k, rank, round, off, count);
	hd.flags = flags;
	hd.reason = (uint8_t)reason;
	held_send(e, &hd);
}
