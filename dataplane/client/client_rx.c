/* SPDX-License-Identifier: Apache-2.0
 * client_rx.c — what the session receives: every packet decoded and validated, RESULTs
 * checked against the operation they claim to answer (job, token, rank, key, round,
 * offset, count, dtype) and written into its output buffer; a RESULT that left this worker
 * out folds the contribution forward (quorum, eager-SGD). Rejections are counted by reason.
 */
#include <errno.h>
#include <string.h>

#include "client_int.h"

static void client_set_bit(uint8_t *bm, uint32_t i)
{
	bm[i >> 3] |= (uint8_t)(1u << (i & 7));
}

/* Keep a contribution the appliance did not add: it goes into our next push of the chunk. */
static int client_exclude(struct tally_client *c, struct client_key *k, uint32_t ch, uint32_t round,
		      const void *pushed)
{
	uint32_t off = ch * k->reg.chunk_elems;

	if (!k->fold && client_fold_alloc(c, k) != 0)
		return -ENOMEM;
	/* a codec's wire chunks cannot be folded here; the caller's codec state (e.g. the 1-bit
	 * worker error) keeps the contribution */
	if (!k->codec) {
		client_fold_add((enum tally_dtype)k->reg.dtype, (uint8_t *)k->fold + (size_t)off * 4,
				pushed, client_chunk_count(k, ch));
		client_set_bit(k->fold_pending, ch);
	} else {
		k->excl_round[ch] = round;
	}
	k->unacked[ch] = round;
	c->st.excluded++;
	return 0;
}

static void client_rx_result(struct tally_client *c, const struct tally_pkt *p)
{
	const struct tally_hdr *h = &p->hdr;
	struct client_key *k = client_key_find(c, h->key);
	uint32_t ch, par, opi, w, *cst;
	uint64_t gap_seq = 0;
	unsigned gap_how = 0;
	struct client_op *op;
	const uint8_t *mine;
	size_t len;

	if (!k) {
		c->st.drops[TALLY_R_UNKNOWN_KEY]++;
		return;
	}
	if (h->dtype != k->reg.dtype ||
	    (h->flags & TALLY_F_CODECS) != (k->codec ? k->codec->flag : 0)) {
		c->st.drops[TALLY_R_CHUNK_MISMATCH]++;
		return;
	}
	if (h->offset % k->reg.chunk_elems || h->offset >= k->reg.nelems ||
	    h->count != client_chunk_count(k, h->offset / k->reg.chunk_elems) ||
	    h->contrib < 1 || h->contrib > k->reg.participants) {
		c->st.drops[TALLY_R_BAD_RANGE]++;
		return;
	}
	ch = h->offset / k->reg.chunk_elems;
	client_stamp_rx(&c->cores[k->core], h);
	/* A RESULT of round r+1 proves the appliance saw our push of round r. One of round r
	 * after our re-sent push most likely answers it, so the re-sending stops, but it may
	 * also be a network duplicate of the first: until round r+1's RESULT, our pushes of
	 * round r+1 still carry a copy labelled r (client_op.c). */
	if (k->unacked && k->unacked[ch] == h->round - 1)
		k->unacked[ch] = CLIENT_NONE;
	if (k->ackslot && k->ackslot[ch] != CLIENT_NONE) {
		struct client_slot *as = &c->cores[k->core].slots[k->ackslot[ch]];

		if (h->round == as->round || h->round == as->round + 1) {
			client_slot_release(c, k->core, k->ackslot[ch]);
			k->ackslot[ch] = CLIENT_NONE;
			client_pump(c, k->core);
		}
	}
	par = h->round & 1;
	opi = k->par_op[par];
	if (opi == CLIENT_NONE || c->ops_tab[opi].round != h->round) {
		/* a late copy of a round we finished is harmless; one we have not started
		 * (or a round that never was) is not */
		if (k->done_valid[par] && (int32_t)(k->done_round[par] - h->round) >= 0)
			c->st.dup_results++;
		else
			c->st.drops[TALLY_R_STALE_ROUND]++;
		return;
	}
	op = &c->ops_tab[opi];
	/* a header-only RESULT answers only what asked for one (tally_proto.h) */
	bool bare = (h->flags & TALLY_F_NORESULT) != 0;
	if (bare && !op->nores) {
		c->st.drops[TALLY_R_UNEXPECTED_OP]++;
		return;
	}
	cst = k->cst[par];
	w = cst[ch];
	len = client_chunk_bytes(k, ch);
	switch (CLIENT_CH_STATE(w)) {
	case CLIENT_CH_DONE:
		c->st.dup_results++;
		return;
	case CLIENT_CH_QUEUED:
		/* Completed without us before we pushed (quorum/deadline). */
		if (h->flags & TALLY_F_INCLUDED) {
			c->st.drops[TALLY_R_UNEXPECTED_OP]++;
			return;
		}
		mine = op->in + client_chunk_boff(k, ch);
		if (client_exclude(c, k, ch, h->round, mine)) {
			client_seterr(c, "allreduce key %u round %u chunk %u: no memory to keep the "
				  "excluded contribution", k->key, h->round, ch);
			client_op_fail(c, opi, -ENOMEM);
			return;
		}
		if (!(h->flags & TALLY_F_RESEND))
			client_ackwait_start(c, k, ch, h->round, mine, op->nores);
		break;
	default: {
		struct client_core *cc = &c->cores[k->core];
		uint32_t s = CLIENT_CH_SLOT(w);
		struct client_slot *sl = &cc->slots[s];

		gap_how = client_result_answer(c, cc, sl, h, &gap_seq);
		if (!(h->flags & TALLY_F_INCLUDED)) {
			if (client_exclude(c, k, ch, h->round, sl->payload)) {
				client_seterr(c, "allreduce key %u round %u chunk %u: no memory to keep "
					  "the excluded contribution", k->key, h->round, ch);
				client_op_fail(c, opi, -ENOMEM);
				return;
			}
			client_slot_release(c, k->core, s);
			/* RESEND answers a push of ours: the appliance saw it. Otherwise make
			 * sure it does (the slot's contents stay intact when taken again). */
			if (h->flags & TALLY_F_RESEND)
				k->unacked[ch] = CLIENT_NONE;
			else
				client_ackwait_start(c, k, ch, h->round, sl->payload, op->nores);
		} else {
			client_slot_release(c, k->core, s);
		}
		break;
	}
	}
	if (!bare && op->nores)
		c->st.noresult_payloads++;
	if (bare) { /* owner mode: the chunk is complete, its sum is another rank's */
		c->st.noresult_acks++;
		c->st.noresult_skipped_bytes += len;
	} else if (p->payload == op->out + client_chunk_boff(k, ch)) {
		/* verbs wrote the payload in place already (tally_client_rx_placed) */
		c->st.results_placed++;
	} else {
		memmove(op->out + client_chunk_boff(k, ch), p->payload, len);
	}
	if (!bare)
		client_live_keep(k, ch, h, p->payload, client_chunk_boff(k, ch), len);
	cst[ch] = CLIENT_CH_MAKE(CLIENT_CH_DONE, 0);
	c->st.results++;
	if (--op->remaining == 0)
		client_op_finish(c, opi);
	if (gap_seq)
		client_gap_scan(c, k->core, gap_seq, gap_how, c->ops->now_ns(c->xctx));
	client_pump(c, k->core);
}

int tally_client_excluded(const struct tally_client *c, uint32_t key, uint32_t round,
			  uint32_t chunk)
{
	const struct client_key *k = client_key_find(c, key);

	if (!k || !k->codec || chunk >= k->nchunks)
		return -ENOENT;
	return k->excl_round && k->excl_round[chunk] == round;
}

/* An ERROR answering one of our PUSHes. Transient reasons are left to retransmission. */
static void client_rx_push_error(struct tally_client *c, const struct tally_hdr *h)
{
	struct client_key *k = client_key_find(c, h->key);
	uint32_t opi;

	switch (h->reason) {
	case TALLY_R_STALE_ROUND:
		client_rx_stale(c, h);
		return;
	case TALLY_R_POOL_FULL:
	case TALLY_R_TOO_EARLY:
		return;
	default:
		break;
	}
	if (!k || h->reason >= TALLY_R_COUNT)
		return;
	opi = k->par_op[h->round & 1];
	if (opi == CLIENT_NONE || c->ops_tab[opi].round != h->round)
		return;
	if (h->reason == TALLY_R_DRAINING) {
		client_err_draining(c, h, k->core);
		if (!c->cfg.fail_fast)
			return; /* the only appliance: hold the op; re-pushed after its restart */
	} else {
		client_seterr(c, "allreduce key %u round %u: appliance core %u rejected chunk at offset %u: %s",
			  h->key, h->round, k->core, h->offset,
			  tally_reason_name((enum tally_reason)h->reason));
	}
	client_op_fail(c, opi, client_err_from_reason(h->reason));
}

void tally_client_rx(struct tally_client *c, const void *buf, size_t len)
{
	struct tally_pkt p;
	enum tally_reason r;

	c->st.rx_pkts++;
	c->st.rx_bytes += len;
	r = tally_proto_decode(buf, len, &p);
	if (r != TALLY_OK) {
		c->st.drops[r < TALLY_R_COUNT ? r : TALLY_R_BAD_OP]++;
		return;
	}
	client_rx_pkt(c, buf, &p);
}

void client_rx_pkt(struct tally_client *c, const void *buf, const struct tally_pkt *pp)
{
	struct tally_pkt p = *pp;

	if (p.hdr.job_id != c->cfg.job_id) {
		c->st.drops[TALLY_R_WRONG_JOB]++;
		return;
	}
	if (p.hdr.token != c->cfg.token) {
		c->st.drops[TALLY_R_WRONG_TOKEN]++;
		return;
	}
	if (p.hdr.rank != c->cfg.rank) {
		c->st.drops[TALLY_R_BAD_RANK]++;
		return;
	}
	if (!client_auth_rx(c, buf, &p))
		return;
	c->heard = true; /* the appliance lives (client_live.c) */
	if (p.hdr.op == TALLY_OP_PING || (p.hdr.op == TALLY_OP_ERROR && p.hdr.aux == TALLY_OP_PING)) {
		if (p.hdr.op == TALLY_OP_ERROR)
			c->st.errors++;
		if (c->joined)
			client_live_rx(c, &p.hdr);
		else
			c->st.drops[TALLY_R_NOT_JOINED]++;
		return;
	}
	if (p.hdr.op == TALLY_OP_ERROR && p.hdr.reason == TALLY_R_NEED_RESULT) {
		c->st.errors++;
		if (c->joined)
			client_live_need(c, &p.hdr);
		return;
	}
	if (p.hdr.op == TALLY_OP_RESULT) {
		if (!c->joined) {
			c->st.drops[TALLY_R_NOT_JOINED]++;
			return;
		}
		client_rx_result(c, &p);
	} else if (p.hdr.op == TALLY_OP_ERROR && p.hdr.reason == TALLY_R_RANK_SILENT) {
		c->st.errors++; /* aux names the silent rank, not an op */
		if (c->joined)
			client_rx_silent(c, &p.hdr);
	} else if (p.hdr.op == TALLY_OP_HELD) {
		if (!c->joined) {
			c->st.drops[TALLY_R_NOT_JOINED]++;
			return;
		}
		client_rx_held(c, &p);
	} else if (p.hdr.op == TALLY_OP_ERROR && p.hdr.aux == TALLY_OP_PUSH) {
		c->st.errors++;
		if (c->joined)
			client_rx_push_error(c, &p.hdr);
	} else if (p.hdr.op == TALLY_OP_ERROR && p.hdr.aux == TALLY_OP_PULL &&
		   p.hdr.reason == TALLY_R_STALE_ROUND) {
		c->st.errors++; /* the probe of a stale push (HELD-capable workers probe) */
		if (c->joined)
			client_rx_stale(c, &p.hdr);
	} else {
		client_rx_control(c, &p);
	}
}

/* verbs: the payload was written in place by the appliance (client_place.c) */
void tally_client_rx_placed(struct tally_client *c, const void *hdr, size_t hlen,
			    const void *payload, size_t plen)
{
	struct tally_pkt p;
	enum tally_reason r;

	c->st.rx_pkts++;
	c->st.rx_bytes += hlen + plen;
	r = tally_proto_decode_split(hdr, hlen, payload, plen, &p);
	if (r != TALLY_OK) {
		c->st.drops[r < TALLY_R_COUNT ? r : TALLY_R_BAD_OP]++;
		return;
	}
	if (p.hdr.op != TALLY_OP_RESULT) {
		c->st.drops[TALLY_R_UNEXPECTED_OP]++;
		return;
	}
	client_rx_pkt(c, hdr, &p);
}
