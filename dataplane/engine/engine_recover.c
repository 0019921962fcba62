/* SPDX-License-Identifier: Apache-2.0
 * engine_recover.c — what a worker needs from the engine to ride through an appliance
 * restart (tally_proto.h PING, NEED_RESULT, TALLY_F_COMPLETE; ARCHITECTURE.md "Appliance
 * restart"): PINGs answered with the boot id, and the lagging-rank case, where the old
 * appliance completed round r of a chunk, some ranks got its RESULT and moved on to r+1,
 * another did not and re-pushes r to the fresh appliance. Nobody else pushes r again, so
 * the engine asks the ranks it saw at r+1 for round r's sum (ERROR NEED_RESULT) and
 * installs the first complete push that comes back as round r's result
 * (engine_chunk.c, chunk_install). Calls engine_auth.c (identity) and engine_util.c only;
 * nothing here allocates.
 */
#include <string.h>

#include "engine_int.h"

enum tally_reason engine_rx_ping(struct tally_engine *e, const struct tally_pkt *pkt,
				 const struct tally_addr *from, size_t len)
{
	const struct tally_hdr *h = &pkt->hdr;
	struct engine_job *job;
	struct tally_hdr a;

	if (h->flags & TALLY_F_ACK)
		return engine_drop(e, TALLY_R_UNEXPECTED_OP);
	e->st.pings++;
	enum tally_reason rsn = engine_auth(e, h, from, &job);
	/* ERROR (with the boot id) tells a worker we do not know it: it joins again */
	if (rsn != TALLY_OK)
		return engine_reject(e, h, from, rsn);
	engine_heard(job, h->rank, engine_now_cached(e), len);
	memset(&a, 0, sizeof(a));
	a.op = TALLY_OP_PING;
	a.flags = TALLY_F_ACK;
	a.job_id = job->id;
	a.token = job->token;
	a.rank = h->rank;
	a.aux = e->cfg.core_index;
	a.reserved = e->cfg.boot_id;
	a.offset = (uint32_t)h->reserved; /* the PING's nonce: keyed, signed under (0, it) */
	a.count = (uint32_t)(h->reserved >> 32);
	engine_send(e, &job->ranks[h->rank].addr, &a, NULL, 0);
	return TALLY_OK;
}

/* A chunk probed this long after its first push, with no rank seen at r+1, may be the
 * lagging-rank case behind a barrier: the others got round r's RESULT and wait elsewhere
 * (tally-worker's barrier key), so none pushes r+1 (see engine_recover_probe). */
#define RECOVER_PROBE_AGE_NS 500000000ull

/* Asks for one chunk go out at most this often. They are advisory (a lost one is asked
 * again), and every probe and push of the chunk calls here: unlimited, a chunk waiting on
 * a slow rank under load asked it once per probe of every other rank -- 58,095 asks in a
 * 35 s memif run (63% of what the appliance sent), crowding out of the dispatch and TX
 * relay rings the MISSING answers and re-sent pushes that would have repaired it. */
#define RECOVER_ASK_GAP_MS 1000u

/* Slot idx holds round r open: ask every bound rank in `oseen` (seen in r+1) but not seen
 * in r for r's sum; oseen NULL: every bound rank not seen in r. Most such ranks do not
 * hold the sum (they re-pushed r+1 before r, or are slow); they ignore the ask (it is
 * advisory, like HELD). */
static void recover_ask(struct tally_engine *e, struct engine_key *k, uint32_t idx,
			const uint64_t *oseen)
{
	const uint64_t *seen = engine_seen_bm(k, idx);
	uint32_t c = idx >= k->nchunks ? idx - k->nchunks : idx;
	struct engine_chunk *ch = &k->chunks[idx];
	uint32_t now_ms = (uint32_t)(engine_now_cached(e) / 1000000u);
	struct tally_hdr h;

	/* Only keys whose every round takes every rank: with quorum, a deadline or one-bit,
	 * ranks a round apart are normal (eager-SGD) and no complete sum could be installed. */
	if (k->reg.compression || k->reg.quorum < k->reg.participants || k->reg.deadline_us)
		return;
	if (ch->asked && now_ms - ch->ask_ms < RECOVER_ASK_GAP_MS)
		return;
	ch->ask_ms = now_ms;

	for (uint32_t wd = 0; wd < k->bm_words; wd++) {
		uint64_t ask = (oseen ? oseen[wd] : ~0ull) & ~seen[wd];

		while (ask) {
			uint32_t w = wd * 64 + (uint32_t)__builtin_ctzll(ask);

			ask &= ask - 1;
			if (w >= k->reg.participants || !k->job->ranks[w].bound)
				continue;
			engine_chunk_error_hdr(&h, k, idx, TALLY_R_NEED_RESULT, TALLY_OP_PUSH);
			h.rank = w;
			h.count = engine_chunk_len(k, c);
			h.reserved = e->cfg.boot_id;
			e->st.need_asks++;
			ch->asked = 1;
			engine_send(e, &k->job->ranks[w].addr, &h, NULL, 0);
		}
	}
}

void engine_recover_check(struct tally_engine *e, struct engine_key *k, uint32_t c)
{
	uint32_t i0 = c, i1 = k->nchunks + c;
	const struct engine_chunk *s0 = &k->chunks[i0], *s1 = &k->chunks[i1];

	if (s0->state == ENGINE_CH_OPEN && s1->state != ENGINE_CH_UNUSED && s1->round == s0->round + 1)
		recover_ask(e, k, i0, engine_seen_bm(k, i1));
	else if (s1->state == ENGINE_CH_OPEN && s0->state != ENGINE_CH_UNUSED &&
		 s0->round == s1->round + 1)
		recover_ask(e, k, i1, engine_seen_bm(k, i0));
}

/* A probe (PULL of a held push) of open chunk idx: if it has waited RECOVER_PROBE_AGE_NS
 * and no rank is at r+1 yet, ask every bound rank not seen in r. After a restart a rank
 * that got r's RESULT from the old appliance may be blocked on another key (a barrier)
 * and never push r+1, which is what engine_recover_check waits for. Rate: the worker's
 * probe backoff; ranks that are merely slow ignore the ask. */
void engine_recover_probe(struct tally_engine *e, struct engine_key *k, uint32_t idx)
{
	const struct engine_chunk *ch = &k->chunks[idx];
	uint32_t oidx = idx >= k->nchunks ? idx - k->nchunks : idx + k->nchunks;
	const struct engine_chunk *o = &k->chunks[oidx];

	if (ch->state != ENGINE_CH_OPEN ||
	    engine_now_cached(e) - ch->first_ns < RECOVER_PROBE_AGE_NS)
		return;
	/* The other slot holds r-1 (this engine carried it: every rank got r-1's sum here,
	 * so none can hold r's from an appliance before it) or r+1 (engine_recover_check
	 * asks the ranks seen there): only a first round here can be the lagging case. */
	if (o->state != ENGINE_CH_UNUSED)
		return;
	recover_ask(e, k, idx, NULL);
}
