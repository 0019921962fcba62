/* SPDX-License-Identifier: Apache-2.0
 * engine_result.c — what goes back when a chunk is complete: the RESULT fan-out to every
 * bound participant (one shared payload, a header per rank; a keyed job's payload MACed
 * once), the copy to one rank (duplicate or late push, PULL), and owner mode's header-only
 * RESULT to a rank whose push asked TALLY_F_NORESULT (tally_proto.h). Nothing here
 * allocates.
 */
#include <string.h>

#include "engine_int.h"

static void result_hdr(const struct engine_key *k, uint32_t idx, struct tally_hdr *h,
		       uint32_t bytes)
{
	const struct engine_chunk *ch = &k->chunks[idx];
	uint32_t c = idx >= k->nchunks ? idx - k->nchunks : idx;
	memset(h, 0, sizeof(*h));
	h->op = TALLY_OP_RESULT;
	h->job_id = k->job_id;
	h->token = k->job->token;
	h->key = k->key;
	h->round = ch->round;
	h->offset = c * k->reg.chunk_elems;
	h->count = engine_chunk_len(k, c);
	h->dtype = k->dtype;
	h->flags = k->codec ? k->codec->flag : 0;
	h->contrib = ch->count;
	h->payload_len = bytes;
	h->crc = ch->crc;
}

/* The header-only RESULT of a rank that asked TALLY_F_NORESULT (tally_proto.h): h is the
 * RESULT's header as it would go with the payload. Its own send (no transport buffer: there
 * is no payload to reference). */
static void result_noresult(struct tally_engine *e, const struct tally_addr *to,
			    struct tally_hdr *h)
{
	h->flags |= TALLY_F_NORESULT;
	h->payload_len = 0;
	h->crc = 0;
	e->st.noresult_acks++;
	engine_send(e, to, h, NULL, 0);
}

/* A RESULT copy to one rank (duplicate push, late push, PULL); header-only when `nores`. */
void engine_result_unicast(struct tally_engine *e, struct engine_key *k, uint32_t idx,
			   uint32_t rank, int resend, int nores)
{
	uint32_t bytes;
	const void *pl = engine_result_payload(k, idx, &bytes);
	struct tally_hdr h;
	result_hdr(k, idx, &h, bytes);
	h.rank = rank;
	if (engine_bit(engine_contrib_bm(k, idx), rank))
		h.flags |= TALLY_F_INCLUDED;
	if (resend)
		h.flags |= TALLY_F_RESEND;
	engine_held_flush_any(e);
	e->st.results++;
	e->st.resends++;
	if (nores) {
		result_noresult(e, &k->job->ranks[rank].addr, &h);
	} else {
		e->st.result_bytes += bytes;
		engine_send_result(e, &k->job->ranks[rank].addr, &h, pl, bytes,
				   engine_xbuf(e, k, idx), NULL);
	}
	k->chunks[idx].stamp = e->tx_stamp;
}

/* The fan-out of a chunk just completed: one header per recipient (its rank, INCLUDED), one
 * shared payload; a rank that asked NORESULT gets the header alone. */
void engine_result_fanout(struct tally_engine *e, struct engine_key *k, uint32_t idx, int how,
			  uint32_t last)
{
	struct engine_chunk *ch = &k->chunks[idx];
	uint32_t bytes;
	const void *pl = engine_result_payload(k, idx, &bytes);
	struct tally_hdr h;
	result_hdr(k, idx, &h, bytes);
	const uint64_t *cb = engine_contrib_bm(k, idx);
	const uint64_t *nb = engine_nores_bm(k, idx);
	struct engine_rank *ranks = k->job->ranks;
	void *xbuf = engine_xbuf(e, k, idx);
	/* a keyed job's payload is MACed once, not once per rank (tally_auth.h), and only
	 * when a recipient needs it (none on connections authenticated at setup) */
	uint8_t inner[TALLY_AUTH_LEN];
	const uint8_t *in = NULL;
	int inner_done = 0;
	for (uint32_t r = 0; r < k->reg.participants; r++) {
		if (!ranks[r].bound)
			continue;
		int nores = engine_bit(nb, r);
		if (!nores && !inner_done && !ranks[r].addr.conn_authed) {
			inner_done = 1;
			in = engine_result_inner(e, k->job, pl, bytes, inner) ? inner : NULL;
		}
		h.rank = r;
		h.flags = (uint16_t)((k->codec ? k->codec->flag : 0) |
				     (engine_bit(cb, r) ? TALLY_F_INCLUDED : 0));
		h.aux = r == last && how == ENGINE_HOW_QUORUM && ranks[r].held ? TALLY_AUX_LAST : 0;
		e->st.results++;
		if (nores) { /* owner mode: the sum is another rank's; the header answers */
			result_noresult(e, &ranks[r].addr, &h);
			h.payload_len = bytes;
			h.crc = ch->crc;
			continue;
		}
		e->st.result_bytes += bytes;
		engine_send_result(e, &ranks[r].addr, &h, pl, bytes, xbuf, in);
	}
	ch->stamp = e->tx_stamp;
}
