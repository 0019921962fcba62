/* SPDX-License-Identifier: Apache-2.0
 * client_ack.c — acknowledgements and loss detection of the pushes in flight: the RTO
 * estimator (RFC 6298) fed by push -> first acknowledgement (HELD or RESULT), HELD intake,
 * header-only PULL probes for held chunks, and gap detection (RACK-like): an acknowledgement
 * of a push sent later to the same core while an earlier one has none, an RTT after the
 * earlier one went out, means the earlier push (or its HELD) was lost: re-send it now
 * rather than at its timer (at most once per smoothed RTT). A RESULT of a later push while
 * an earlier held chunk has none means that RESULT was likely lost: probe it.
 * Calls client_util.c and client_cwnd.c (the window follows each RTT sample).
 */
#include <string.h>

#include "client_int.h"

void client_rtt_sample(struct client_core *cc, uint64_t r, const struct tally_client_cfg *cfg)
{
	uint64_t var, rto, max = (uint64_t)cfg->rto_max_us * 1000;
	uint64_t min = (uint64_t)cfg->rto_min_us * 1000;

	if (!cc->min_rtt || r < cc->min_rtt)
		cc->min_rtt = r;
	if (!cc->have_rtt) {
		cc->srtt = r;
		cc->rttvar = r / 2;
		cc->have_rtt = true;
	} else {
		uint64_t d = cc->srtt > r ? cc->srtt - r : r - cc->srtt;

		cc->rttvar = (3 * cc->rttvar + d) / 4;
		cc->srtt = (7 * cc->srtt + r) / 8;
	}
	var = 4 * cc->rttvar;
	rto = cc->srtt + (var > CLIENT_CLOCK_G_NS ? var : CLIENT_CLOCK_G_NS);
	if (rto < min)
		rto = min;
	cc->est = rto > max ? max : rto;
	cc->rto = cc->est;
}

/* A RESULT or HELD from this core: its send stamp is what our next PULL echoes. */
void client_stamp_rx(struct client_core *cc, const struct tally_hdr *h)
{
	if (h->reserved & TALLY_STAMP_VALID)
		cc->stamp = h->reserved;
}

void client_xmit(struct tally_client *c, uint32_t core, struct client_slot *sl)
{
	sl->seq = ++c->cores[core].tx_seq;
	sl->fast_rtx = false;
	if (sl->send_ack)
		client_send(c, core, sl->ack_hdr, sl->payload, sl->len);
	client_send(c, core, sl->hdr, sl->payload, sl->len);
}

/* A header-only PULL for a held data slot: the appliance answers HELD (still waiting),
 * HELD+DONE (its RESULT went out: client_rx_done), MISSING (it lost our push), or, for a
 * PULL+DONE (sl->done: we know it is complete, and have no RESULT), the RESULT. */
static void client_pull(struct tally_client *c, uint32_t core, struct client_slot *sl,
			uint64_t now)
{
	const struct client_op *op = &c->ops_tab[sl->op];
	const struct client_key *k = &c->keys[op->kidx];
	struct client_core *cc = &c->cores[core];
	uint8_t hb[TALLY_HDR_LEN];
	struct tally_hdr h;

	client_fill_hdr(c, &h, TALLY_OP_PULL);
	h.key = k->key;
	h.round = op->round;
	h.offset = sl->chunk * k->reg.chunk_elems;
	h.count = client_chunk_count(k, sl->chunk);
	h.dtype = k->reg.dtype;
	/* What "just completed" means to the appliance: a RESULT it sent before the last
	 * packet we got from that core would be here (one path, in order), so one sent
	 * since, or within a round trip before it (the estimator's RTO: the smoothed RTT let
	 * jitter through, simnet's test_slow_worker), may be on its way (this probe crosses
	 * it: HELD+DONE); an older one was lost (the RESULT at once). */
	uint64_t rtt_us = (now - (cc->last_rx_ns < now ? cc->last_rx_ns : now) + cc->est) / 1000;

	/* owner mode: a lost header-only RESULT is answered header-only again */
	if (op->nores)
		h.flags |= TALLY_F_NORESULT;
	if (sl->done)
		h.flags |= TALLY_F_DONE;
	else
		h.aux = rtt_us < UINT32_MAX ? (uint32_t)rtt_us : UINT32_MAX;
	h.reserved = cc->stamp;
	tally_proto_finish(hb, &h, NULL, 0);
	sl->probed = true;
	sl->fast_ns = now;
	/* the appliance answers a probe at once: look again when its answer is late
	 * (client_slot_due re-probes then if the core answered anything since) */
	if (now + client_probe_wait(c, cc) < cc->next_due)
		cc->next_due = now + client_probe_wait(c, cc);
	c->st.probes++;
	client_send(c, core, hb, NULL, 0);
}

void client_probe(struct tally_client *c, uint32_t core, struct client_slot *sl, uint64_t now)
{
	sl->nprobe++;
	sl->nreprobe = 0;
	client_pull(c, core, sl, now);
}

void client_reprobe(struct tally_client *c, uint32_t core, struct client_slot *sl,
		    uint64_t now)
{
	if (sl->nreprobe < UINT8_MAX)
		sl->nreprobe++;
	client_pull(c, core, sl, now);
}

/* Slots sent before transmission `xseq` (just answered) and still without an answer an RTT
 * plus a reordering allowance later: CLIENT_GAP_RESEND re-sends unanswered pushes (the
 * first answer to a push sent once), CLIENT_GAP_PROBE probes held chunks (a RESULT). */
/* One in-flight push slot of client_gap_scan. */
static void gap_one(struct tally_client *c, uint32_t core, struct client_slot *sl,
		    uint64_t xseq, unsigned how, uint64_t now, uint64_t late)
{
	struct client_core *cc = &c->cores[core];

	/* a re-sent push is judged like any other: by answers to pushes sent after it (seq)
	 * an RTT later (sent_ns), RACK's rule; probes once per RTT */
	if (sl->seq >= xseq || now - sl->sent_ns < late)
		return;
	if (sl->held) {
		if ((how & CLIENT_GAP_PROBE) && !sl->probed && now - sl->fast_ns >= late)
			client_probe(c, core, sl, now);
		return;
	}
	if (!(how & CLIENT_GAP_RESEND))
		return;
	sl->fast_ns = sl->sent_ns = now;
	sl->retries++;
	c->st.retransmits++;
	c->st.fast_retransmits++;
	client_xmit(c, core, sl);
	sl->fast_rtx = true;
	/* none of the last 16 proven spurious: narrow the allowance again */
	if (++cc->fast_clean >= 16 && cc->reo_mult > 1) {
		cc->reo_mult /= 2;
		cc->fast_clean = 0;
	}
}

void client_gap_scan(struct tally_client *c, uint32_t core, uint64_t xseq, unsigned how,
		     uint64_t now)
{
	struct client_core *cc = &c->cores[core];
	uint64_t reo = cc->min_rtt / 4 * (cc->reo_mult ? cc->reo_mult : 1);
	uint64_t late, floor = cc->tx_seq + 1;

	if (!cc->have_rtt)
		return;
	/* Answers in the order sent (the usual case) leave nothing older in flight: skip the
	 * walk over every slot, once per RESULT, that would find nothing. */
	if (xseq <= cc->gap_floor)
		return;
	if (reo > cc->srtt)
		reo = cc->srtt;
	late = cc->min_rtt + reo + CLIENT_CLOCK_G_NS;
	for (uint32_t s = 0; s < 2 * c->cfg.window; s++) {
		struct client_slot *sl = &cc->slots[s];

		if (sl->op == CLIENT_NONE || sl->op == CLIENT_ACKWAIT)
			continue;
		gap_one(c, core, sl, xseq, how, now, late);
		if (sl->seq < floor) /* after a re-send: its new seq */
			floor = sl->seq;
	}
	cc->gap_floor = floor;
}

void client_spurious(struct client_core *cc, struct client_slot *sl)
{
	if (!sl->fast_rtx)
		return;
	sl->fast_rtx = false;
	if (!cc->reo_mult)
		cc->reo_mult = 1;
	if (cc->reo_mult < 64)
		cc->reo_mult *= 2;
	cc->fast_clean = 0;
}

unsigned client_result_answer(struct tally_client *c, struct client_core *cc,
			      struct client_slot *sl, const struct tally_hdr *h, uint64_t *gap_seq)
{
	uint64_t now = c->ops->now_ns(c->xctx);
	uint64_t tail = now + client_quiet_ns(c, cc);

	cc->last_ans_ns = cc->last_rx_ns = now;
	/* progress: what is left unanswered is looked at once the core is quiet that long
	 * (client_op.c, tail losses) */
	if (tail < cc->next_due)
		cc->next_due = tail;
	if (h->aux & TALLY_AUX_LAST)
		cc->seen_held = true; /* an appliance that answers HELD and probes */
	if ((h->flags & (TALLY_F_RESEND | TALLY_F_INCLUDED)) ==
	    (TALLY_F_RESEND | TALLY_F_INCLUDED) && !sl->held)
		client_spurious(cc, sl);
	/* The RTT sample is push -> first answer: a RESULT that is the first answer to a
	 * push sent once, if that push completed the chunk (AUX_LAST: else our HELD was lost
	 * and the RESULT times the wait for the others). After a HELD the wait is not
	 * sampled, nor (Karn) a chunk re-sent. */
	if (sl->retries == 0 && !sl->held && (!cc->seen_held || (h->aux & TALLY_AUX_LAST))) {
		client_rtt_sample(cc, now - sl->first_ns, &c->cfg);
		if (cc->seen_held) /* else a completion time: no queueing delay to read */
			client_cwnd_sample(c, cc, now - sl->first_ns, now);
	} else if (!cc->seen_held && !(h->flags & TALLY_F_RESEND) &&
		   now - sl->sent_ns > 2 * cc->min_rtt + CLIENT_CLOCK_G_NS) {
		/* An appliance that never answers HELD: the completion time is all there is,
		 * or the RTO could never grow past the completion skew it keeps firing on. A
		 * RESULT more than a round trip after our last copy is the fan-out of a
		 * completion that copy did not cause: timing it from the first push is exact
		 * if that push arrived. */
		client_rtt_sample(cc, now - sl->first_ns, &c->cfg);
	}
	/* Only a RESULT with our push in proves it arrived. The first answer to a push sent
	 * once shows a gap in what we sent before it (re-send); a RESULT of a held chunk, in
	 * completion order, a RESULT lost before it (probe). */
	if (!(h->flags & TALLY_F_INCLUDED) || sl->retries || sl->probed)
		return 0; /* (a RESULT that may answer our probe shows no order: client_rx_held) */
	*gap_seq = sl->seq;
	return sl->held ? CLIENT_GAP_PROBE : CLIENT_GAP_RESEND | CLIENT_GAP_PROBE;
}

/* Mark one in-flight chunk held; returns its slot (NULL: nothing to mark). */
static struct client_slot *client_hold(struct tally_client *c, struct client_key *k,
				       uint32_t round, uint32_t ch)
{
	uint32_t opi = k->par_op[round & 1], w;

	if (opi == CLIENT_NONE || c->ops_tab[opi].round != round)
		return NULL; /* a late HELD of a round finished: harmless */
	w = k->cst[round & 1][ch];
	if (CLIENT_CH_STATE(w) != CLIENT_CH_INFLIGHT)
		return NULL;
	return &c->cores[k->core].slots[CLIENT_CH_SLOT(w)];
}

/* MISSING: the appliance does not hold our push of the chunk a probe asked about (lost, or
 * refused as too early). Only the answer to an outstanding probe counts: a late copy of an
 * older one must not re-send a payload already sent again. */
static void client_rx_missing(struct tally_client *c, struct client_key *k,
			      const struct tally_hdr *h, uint64_t now)
{
	struct client_slot *sl = client_hold(c, k, h->round, h->offset / k->reg.chunk_elems);

	c->st.missing++;
	if (!sl || !sl->probed)
		return;
	client_set_held(&c->cores[k->core], sl, false);
	sl->probed = false;
	sl->nprobe = 0;
	sl->retries++;
	sl->fast_ns = sl->sent_ns = now;
	/* The probe went and came back: the path works, no backoff; unless the round could
	 * not start yet (TOO_EARLY: another worker has not acknowledged the one before),
	 * which may take long: back off then. */
	if (h->reason == TALLY_R_TOO_EARLY) {
		uint64_t max = (uint64_t)c->cfg.rto_max_us * 1000;

		sl->rto_ns = sl->rto_ns * 2 > max ? max : sl->rto_ns * 2;
	} else {
		sl->rto_ns = c->cores[k->core].rto;
	}
	sl->due_ns = now + sl->rto_ns;
	c->st.retransmits++;
	client_xmit(c, k->core, sl);
}

/* HELD+DONE: the chunk a probe asked about is complete and its RESULT went out before
 * this answer, on the same path. Here already (slot gone): the probe had crossed it, as
 * most do. Not here: it was lost; ask for it now (PULL+DONE), and again an RTO later. */
static void client_rx_done(struct tally_client *c, struct client_key *k,
			   const struct tally_hdr *h, uint64_t now)
{
	struct client_slot *sl = client_hold(c, k, h->round, h->offset / k->reg.chunk_elems);
	struct client_core *cc = &c->cores[k->core];

	if (!sl || !sl->probed || sl->done)
		return; /* crossed the RESULT, or a late copy: the PULL+DONE is out already */
	client_set_held(cc, sl, true);
	sl->done = true;
	sl->nprobe = 0;
	sl->rto_ns = cc->rto;
	sl->due_ns = now + sl->rto_ns;
	if (sl->due_ns < cc->next_due)
		cc->next_due = sl->due_ns;
	c->st.result_asks++;
	client_probe(c, k->core, sl, now);
}

void client_rx_held(struct tally_client *c, const struct tally_pkt *p)
{
	const struct tally_hdr *h = &p->hdr;
	struct client_key *k = client_key_find(c, h->key);
	struct client_slot *last = NULL;
	uint64_t now, xseq = 0;

	if (!k) {
		c->st.drops[TALLY_R_UNKNOWN_KEY]++;
		return;
	}
	if (h->dtype != k->reg.dtype) {
		c->st.drops[TALLY_R_CHUNK_MISMATCH]++;
		return;
	}
	uint64_t end = (uint64_t)h->offset + h->count;
	if (h->offset % k->reg.chunk_elems || end > k->reg.nelems ||
	    (end % k->reg.chunk_elems && end != k->reg.nelems)) {
		c->st.drops[TALLY_R_BAD_RANGE]++;
		return;
	}
	c->st.helds++;
	now = c->ops->now_ns(c->xctx);
	struct client_core *cc = &c->cores[k->core];
	cc->seen_held = true;
	cc->last_rx_ns = now;
	client_stamp_rx(cc, h);
	if (h->flags & TALLY_F_MISSING) {
		client_rx_missing(c, k, h, now);
		return;
	}
	if (h->flags & TALLY_F_DONE) {
		client_rx_done(c, k, h, now);
		return;
	}
	for (uint32_t ch = h->offset / k->reg.chunk_elems; (uint64_t)ch * k->reg.chunk_elems < end;
	     ch++) {
		struct client_slot *sl = client_hold(c, k, h->round, ch);

		if (!sl)
			continue;
		bool probed = sl->probed;

		sl->probed = false; /* answered */
		sl->nprobe = 0;
		if (h->flags & TALLY_F_RESEND)
			client_spurious(cc, sl);
		if (sl->held)
			continue;
		/* evidence of a gap only from a push sent once: an answer to an earlier copy
		 * of a re-sent one would make everything sent since look lost; nor from one
		 * that may answer our probe (sent after every push: it shows no order) */
		if (sl->retries == 0 && !probed && sl->seq > xseq)
			xseq = sl->seq;
		/* first HELD: from now on probe (backed off), never re-send unasked */
		client_set_held(cc, sl, true);
		cc->last_ans_ns = now;
		if (now + client_quiet_ns(c, cc) < cc->next_due) /* progress: client_op.c */
			cc->next_due = now + client_quiet_ns(c, cc);
		sl->rto_ns = 2 * cc->rto;
		sl->due_ns = now + sl->rto_ns;
		if (sl->due_ns < cc->next_due)
			cc->next_due = sl->due_ns;
		if (sl->retries == 0 && (!last || sl->seq > last->seq))
			last = sl;
	}
	/* one sample per HELD: its newest first-time push (the others waited in the range) */
	if (last) {
		client_rtt_sample(cc, now - last->first_ns, &c->cfg);
		client_cwnd_sample(c, cc, now - last->first_ns, now);
	}
	if (xseq)
		client_gap_scan(c, k->core, xseq, CLIENT_GAP_RESEND, now);
}
