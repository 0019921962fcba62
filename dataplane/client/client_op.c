/* SPDX-License-Identifier: Apache-2.0
 * client_op.c — allreduce operations: chunking, per-core windows, per-chunk retransmission
 * timers with an adaptive RTO (RFC 6298 estimator and backoff; samples as in client_rx.c),
 * give-up. All state is preallocated: operation slots at creation, window slots and their
 * staging buffers at JOIN, per-chunk state words at key registration.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client_int.h"


static uint64_t client_now(struct tally_client *c)
{
	return c->ops->now_ns(c->xctx);
}

int client_ops_init(struct tally_client *c)
{
	c->ops_tab = calloc(c->cfg.max_ops, sizeof(*c->ops_tab));
	if (!c->ops_tab)
		return -ENOMEM;
	for (uint32_t i = 0; i < c->cfg.max_ops; i++)
		c->ops_tab[i].pend_next = i + 1 < c->cfg.max_ops ? i + 1 : CLIENT_NONE;
	c->op_free_head = 0;
	return 0;
}

/* Each core has 2 x window slots: at most `window` carry data pushes (the appliance sizes
 * its deterministic staging by the windows), the rest re-send pushes that were left out
 * of a complete chunk (client_ackwait_start), which the appliance does not stage. */
int client_cores_init(struct tally_client *c)
{
	uint32_t w = 2 * c->cfg.window;

	c->cores = calloc(c->ncores, sizeof(*c->cores));
	if (!c->cores)
		return -ENOMEM;
	for (uint32_t i = 0; i < c->ncores; i++) {
		struct client_core *cc = &c->cores[i];

		cc->slots = calloc(w, sizeof(*cc->slots));
		/* 64-byte aligned staging so reducers run on aligned data */
		cc->stage_mem = aligned_alloc(64, (size_t)w * ((c->max_chunk_bytes + 63) & ~63u));
		if (!cc->slots || !cc->stage_mem)
			return -ENOMEM;
		for (uint32_t s = 0; s < w; s++) {
			cc->slots[s].op = CLIENT_NONE;
			cc->slots[s].next_free = s + 1 < w ? s + 1 : CLIENT_NONE;
			cc->slots[s].stage = cc->stage_mem +
					     (size_t)s * ((c->max_chunk_bytes + 63) & ~63u);
		}
		cc->free_head = 0;
		cc->pend_head = cc->pend_tail = CLIENT_NONE;
		cc->next_due = UINT64_MAX;
		cc->rto = cc->est = (uint64_t)c->cfg.rto_init_us * 1000;
	}
	return 0;
}

void client_cores_free(struct tally_client *c)
{
	if (!c->cores)
		return;
	for (uint32_t i = 0; i < c->nkeys; i++)
		if (c->keys[i].ackslot)
			for (uint32_t ch = 0; ch < c->keys[i].nchunks; ch++)
				c->keys[i].ackslot[ch] = CLIENT_NONE;
	for (uint32_t i = 0; i < c->ncores; i++) {
		free(c->cores[i].slots);
		free(c->cores[i].stage_mem);
	}
	free(c->cores);
	c->cores = NULL;
}

static void client_pend_unlink(struct tally_client *c, struct client_core *cc, uint32_t opi)
{
	struct client_op *op = &c->ops_tab[opi];

	if (!op->pending)
		return;
	if (op->pend_prev != CLIENT_NONE)
		c->ops_tab[op->pend_prev].pend_next = op->pend_next;
	else
		cc->pend_head = op->pend_next;
	if (op->pend_next != CLIENT_NONE)
		c->ops_tab[op->pend_next].pend_prev = op->pend_prev;
	else
		cc->pend_tail = op->pend_prev;
	op->pending = false;
}

void client_slot_release(struct tally_client *c, uint32_t core, uint32_t s)
{
	struct client_core *cc = &c->cores[core];

	if (cc->slots[s].op != CLIENT_ACKWAIT) {
		cc->data_inflight--;
		if (!cc->slots[s].held)
			cc->unanswered--;
	}
	cc->slots[s].op = CLIENT_NONE;
	cc->slots[s].next_free = cc->free_head;
	cc->free_head = s;
	cc->inflight--;
}

void client_op_finish(struct tally_client *c, uint32_t opi)
{
	struct client_op *op = &c->ops_tab[opi];
	struct client_key *k = &c->keys[op->kidx];
	uint32_t p = op->round & 1;

	client_pend_unlink(c, &c->cores[k->core], opi);
	client_unadvertise(c, k, op, 0);
	k->par_op[p] = CLIENT_NONE;
	k->done_valid[p] = true;
	k->done_round[p] = op->round;
	op->state = CLIENT_OP_DONE;
	c->nactive--;
}

/* Fail an operation: its chunks stop, its slots are freed. The round may be started again. */
void client_op_fail(struct tally_client *c, uint32_t opi, int err)
{
	struct client_op *op = &c->ops_tab[opi];
	struct client_key *k = &c->keys[op->kidx];
	uint32_t p = op->round & 1, *cst = k->cst[p];

	for (uint32_t ch = 0; ch < k->nchunks; ch++)
		if (CLIENT_CH_STATE(cst[ch]) == CLIENT_CH_INFLIGHT) {
			struct client_slot *sl = &c->cores[k->core].slots[CLIENT_CH_SLOT(cst[ch])];
			uint32_t off = ch * k->reg.chunk_elems;

			/* what the push carried of earlier rounds is owed again */
			if (sl->staged) {
				client_fold_unstage((enum tally_dtype)k->reg.dtype,
						(uint8_t *)k->fold + (size_t)off * 4, sl->stage,
						op->in + (size_t)off * k->esize,
						client_chunk_count(k, ch));
				k->fold_pending[ch >> 3] |= (uint8_t)(1u << (ch & 7));
			}
			client_slot_release(c, k->core, CLIENT_CH_SLOT(cst[ch]));
			cst[ch] = CLIENT_CH_MAKE(CLIENT_CH_DONE, 0);
		}
	client_pend_unlink(c, &c->cores[k->core], opi);
	client_unadvertise(c, k, op, 1);
	k->par_op[p] = CLIENT_NONE;
	if (k->next_round == op->round + 1 && k->par_op[p ^ 1] == CLIENT_NONE)
		k->next_round = op->round;
	op->state = CLIENT_OP_FAILED;
	op->err = err;
	c->nactive--;
}

/* First transmission of chunk `ch` of operation `opi` in window slot `s`. */
static void client_send_chunk(struct tally_client *c, uint32_t opi, uint32_t ch, uint32_t s,
			  uint64_t now)
{
	struct client_op *op = &c->ops_tab[opi];
	struct client_key *k = &c->keys[op->kidx];
	struct client_core *cc = &c->cores[k->core];
	struct client_slot *sl = &cc->slots[s];
	uint32_t off = ch * k->reg.chunk_elems, n = client_chunk_count(k, ch);
	struct tally_hdr h;

	sl->op = opi;
	sl->chunk = ch;
	sl->retries = 0;
	sl->len = client_chunk_bytes(k, ch);
	sl->payload = op->in + client_chunk_boff(k, ch);
	sl->staged = false;
	sl->send_ack = false;
	sl->held = sl->probed = sl->done = false;
	cc->unanswered++;
	sl->nprobe = 0;
	sl->fast_ns = 0;
	sl->fast_rtx = false;
	if (k->fold && (k->fold_pending[ch >> 3] & (1u << (ch & 7)))) {
		bool left = client_fold_stage((enum tally_dtype)k->reg.dtype, sl->stage, sl->payload,
					  (uint8_t *)k->fold + (size_t)off * 4, n);

		if (!left)
			k->fold_pending[ch >> 3] &= (uint8_t)~(1u << (ch & 7));
		sl->payload = sl->stage;
		sl->staged = true;
	}
	client_fill_hdr(c, &h, TALLY_OP_PUSH);
	h.key = k->key;
	h.round = op->round;
	h.offset = off;
	h.count = n;
	h.dtype = k->reg.dtype;
	if (k->codec)
		h.flags |= k->codec->flag;
	if (op->nores)
		h.flags |= TALLY_F_NORESULT;
	tally_proto_finish(sl->hdr, &h, sl->payload, sl->len);
	/* Our push of the previous round was answered by a RESULT that left us out: the
	 * appliance may never have seen it, and cannot start this round until it has. So a
	 * copy labelled with that round goes along (it is not added: that chunk is complete)
	 * until a RESULT of this round proves the appliance moved on. */
	if (k->unacked && k->unacked[ch] != CLIENT_NONE) {
		if (k->unacked[ch] == op->round - 1) {
			h.round = op->round - 1;
			tally_proto_encode_hdr(sl->ack_hdr, &h);
			sl->send_ack = true;
		} else {
			k->unacked[ch] = CLIENT_NONE;
		}
	}
	sl->first_ns = sl->sent_ns = now;
	sl->rto_ns = cc->rto;
	sl->due_ns = now + cc->rto;
	if (sl->due_ns < cc->next_due)
		cc->next_due = sl->due_ns;
	k->cst[op->round & 1][ch] = CLIENT_CH_MAKE(CLIENT_CH_INFLIGHT, s);
	c->st.pushes++;
	client_xmit(c, k->core, sl);
}

/* Re-send a push whose RESULT left us out until a RESULT proves the appliance saw it: the
 * RESULT may have been the fan-out of a chunk completed before our push arrived (or with
 * our push lost), and the appliance starts the next round of the chunk only once every
 * participant was seen in this one. Best effort: no free slot, no re-send (the next
 * round's push carries a copy anyway). */
void client_ackwait_start(struct tally_client *c, struct client_key *k, uint32_t ch, uint32_t round,
		      const void *payload, bool nores)
{
	struct client_core *cc = &c->cores[k->core];
	uint32_t s, n = client_chunk_count(k, ch);
	struct client_slot *sl;
	struct tally_hdr h;
	uint64_t now;

	if (cc->free_head == CLIENT_NONE || k->ackslot[ch] != CLIENT_NONE)
		return;
	s = cc->free_head;
	sl = &cc->slots[s];
	cc->free_head = sl->next_free;
	cc->inflight++;
	sl->len = client_chunk_bytes(k, ch);
	memmove(sl->stage, payload, sl->len);
	sl->payload = sl->stage;
	sl->staged = true;
	sl->send_ack = false;
	sl->held = sl->probed = sl->done = false;
	sl->nprobe = 0;
	sl->fast_ns = 0;
	sl->op = CLIENT_ACKWAIT;
	sl->kidx = (uint32_t)(k - c->keys);
	sl->round = round;
	sl->chunk = ch;
	sl->retries = 0;
	client_fill_hdr(c, &h, TALLY_OP_PUSH);
	h.key = k->key;
	h.round = round;
	h.offset = ch * k->reg.chunk_elems;
	h.count = n;
	h.dtype = k->reg.dtype;
	if (k->codec)
		h.flags |= k->codec->flag;
	if (nores)
		h.flags |= TALLY_F_NORESULT;
	tally_proto_finish(sl->hdr, &h, sl->payload, sl->len);
	now = client_now(c);
	sl->first_ns = sl->sent_ns = now;
	sl->rto_ns = cc->rto;
	sl->due_ns = now + cc->rto;
	if (sl->due_ns < cc->next_due)
		cc->next_due = sl->due_ns;
	k->ackslot[ch] = s;
	c->st.ack_pushes++;
	client_xmit(c, k->core, sl);
}

void client_pump(struct tally_client *c, uint32_t core)
{
	struct client_core *cc = &c->cores[core];
	uint64_t now = 0;
	bool have_now = false;

	while (cc->free_head != CLIENT_NONE && cc->data_inflight < c->cfg.window &&
	       cc->unanswered < cc->cwnd &&
	       cc->pend_head != CLIENT_NONE) {
		uint32_t opi = cc->pend_head, s;
		struct client_op *op = &c->ops_tab[opi];
		struct client_key *k = &c->keys[op->kidx];
		const uint32_t *cst = k->cst[op->round & 1];
		uint32_t ch = op->next_chunk;

		while (ch < k->nchunks && CLIENT_CH_STATE(cst[ch]) != CLIENT_CH_QUEUED)
			ch++;
		if (ch >= k->nchunks) {
			op->next_chunk = ch;
			client_pend_unlink(c, cc, opi);
			continue;
		}
		if (!have_now) {
			now = client_now(c);
			have_now = true;
		}
		s = cc->free_head;
		cc->free_head = cc->slots[s].next_free;
		cc->inflight++;
		cc->data_inflight++;
		op->next_chunk = ch + 1;
		client_send_chunk(c, opi, ch, s, now);
	}
	if (cc->pend_head != CLIENT_NONE)
		cc->cw_limited = true; /* client_cwnd.c: more to send than the windows allow */
}

int tally_client_start_flags(struct tally_client *c, uint32_t key, uint32_t round,
			     const void *in, void *out, unsigned flags)
{
	struct client_key *k;
	struct client_core *cc;
	struct client_op *op;
	uint32_t opi, p = round & 1;

	if (!c->joined) {
		client_seterr(c, "start key %u round %u: not joined", key, round);
		return -ENOTCONN;
	}
	k = client_key_find(c, key);
	if (!k) {
		client_seterr(c, "start key %u round %u: key not registered", key, round);
		return -ENOENT;
	}
	if (!in || !out || (flags & ~TALLY_CLIENT_NORESULT))
		return -EINVAL;
	if (k->started && round != k->next_round) {
		client_seterr(c, "start key %u round %u: rounds must be used in order (next is %u)",
			  key, round, k->next_round);
		return -EINVAL;
	}
	if (k->par_op[p] != CLIENT_NONE) {
		client_seterr(c, "start key %u round %u: round %u of this key still running", key,
			  round, round - 2);
		return -EBUSY;
	}
	if (c->op_free_head == CLIENT_NONE) {
		client_seterr(c, "start key %u round %u: %u operations already running", key, round,
			  c->cfg.max_ops);
		return -EAGAIN;
	}
	opi = c->op_free_head;
	op = &c->ops_tab[opi];
	c->op_free_head = op->pend_next;
	op->state = CLIENT_OP_ACTIVE;
	op->gen++;
	c->nactive++;
	op->kidx = (uint32_t)(k - c->keys);
	op->round = round;
	op->in = in;
	op->out = out;
	op->next_chunk = 0;
	op->remaining = k->nchunks;
	op->err = 0;
	op->stale_ns = 0;
	/* never set against an appliance that does not know the flag (tally_proto.h) */
	op->nores = (flags & TALLY_CLIENT_NORESULT) && (c->caps & TALLY_CAP_NORESULT);
	if (op->nores)
		c->st.noresult_ops++;
	else if (flags & TALLY_CLIENT_NORESULT)
		c->st.noresult_fallbacks++;
	memset(k->cst[p], 0, k->nchunks * sizeof(uint32_t));
	k->par_op[p] = opi;
	k->started = true;
	k->next_round = round + 1;
	/* append to the owner core's FIFO of operations with unsent chunks */
	cc = &c->cores[k->core];
	op->pending = true;
	op->pend_next = CLIENT_NONE;
	op->pend_prev = cc->pend_tail;
	if (cc->pend_tail != CLIENT_NONE)
		c->ops_tab[cc->pend_tail].pend_next = opi;
	else
		cc->pend_head = opi;
	cc->pend_tail = opi;
	if (c->ops->advertise)
		client_advertise(c, k, op); /* before the pushes: in order on the connection */
	client_pump(c, k->core);
	return (int)(((uint32_t)op->gen << 15) | opi);
}

struct client_op *client_handle_op(struct tally_client *c, int handle, uint32_t *opi)
{
	uint32_t i = (uint32_t)handle & 0x7fffu;
	struct client_op *op;

	if (handle < 0 || i >= c->cfg.max_ops)
		return NULL;
	op = &c->ops_tab[i];
	if (op->state == CLIENT_OP_FREE || op->gen != (uint16_t)((uint32_t)handle >> 15))
		return NULL;
	*opi = i;
	return op;
}

int tally_client_test(struct tally_client *c, int handle)
{
	uint32_t opi;
	struct client_op *op = client_handle_op(c, handle, &opi);
	int rc;

	if (!op)
		return -EINVAL;
	if (op->state == CLIENT_OP_ACTIVE)
		return 0;
	rc = op->state == CLIENT_OP_DONE ? 1 : op->err;
	op->state = CLIENT_OP_FREE;
	op->pend_next = c->op_free_head;
	c->op_free_head = opi;
	return rc;
}

/* A slot's timer fired. A data push not yet probed since it was last sent is probed first
 * (header-only PULL): held, it stays held (the timer backs off); unanswered, the answer is
 * most likely late, not lost (a busy appliance, a descheduled process), and the probe
 * costs 64 bytes where a re-send would cost a duplicate payload. The appliance answers
 * MISSING when it does not hold the push (client_ack.c re-sends it then); only
 * CLIENT_PROBES_MAX probes in a row without any answer have the payload re-sent unasked.
 * Losses proper are mostly repaired sooner, from gaps (client_ack.c). */
static void client_slot_expire(struct tally_client *c, uint32_t core, struct client_slot *sl,
			       uint64_t now)
{
	struct client_core *cc = &c->cores[core];
	uint64_t max = (uint64_t)c->cfg.rto_max_us * 1000;
	uint64_t rto;

	/* the estimate may have grown since the push left (the first round's queues) */
	if (sl->rto_ns < cc->rto)
		sl->rto_ns = cc->rto;
	rto = sl->rto_ns * 2 > max ? max : sl->rto_ns * 2;
	/* (an appliance that never answered HELD does not answer probes either: re-send) A
	 * core that sent nothing since our last probe is stalled, or its path is (a
	 * descheduled appliance, a queue): more probes, not payloads, which would only join
	 * the queue (a 100 ms stall re-sent 256 chunks, test_window's test_stall_not_loss);
	 * CLIENT_PROBES_MAX counts probes lost while the core answered others. */
	bool silent = cc->last_rx_ns <= sl->fast_ns;

	if (cc->seen_held && sl->op != CLIENT_ACKWAIT &&
	    (sl->nprobe < CLIENT_PROBES_MAX || silent)) {
		/* held: backed off (x2; x4 measured: tail RESULT losses cost 5x more), up to
		 * CLIENT_HELD_CAP RTOs: a RESULT lost at the end of a long wait is found
		 * that soon (the wait itself is someone else's) */
		if (sl->held && rto > CLIENT_HELD_CAP * cc->rto)
			rto = CLIENT_HELD_CAP * cc->rto > sl->rto_ns ? CLIENT_HELD_CAP * cc->rto :
								       sl->rto_ns;
		if (sl->held || sl->probed)
			sl->rto_ns = rto;
		sl->due_ns = now + sl->rto_ns;
		client_probe(c, core, sl, now);
		return;
	}
	sl->nprobe = 0;
	sl->rto_ns = rto;
	sl->due_ns = now + rto;
	client_set_held(cc, sl, false);
	sl->probed = false;
	sl->retries++;
	/* RFC 6298 5.5-5.7: the backed-off RTO stays for new chunks until a sample comes in
	 * (chunks sent together back off to the same value, no compounding). */
	if (rto > cc->rto && cc->rto < 4 * cc->est)
		cc->rto = rto < 4 * cc->est ? rto : 4 * cc->est;
	sl->sent_ns = now;
	if (sl->op == CLIENT_ACKWAIT)
		c->st.ack_pushes++;
	else
		c->st.retransmits++;
	client_xmit(c, core, sl);
}

/* When a slot's timer is due. RFC 6298 5.3: the timer restarts with every answer that
 * shows progress: while the core keeps answering, a push still without one is queued, not
 * lost (losses show as gaps: client_ack.c); the timer is for a core gone silent. A tail
 * loss shows no gap (nothing comes after it): a held chunk whose RESULT, or a push whose
 * answer, was lost after the core's last progress. So once the core has been quiet for an
 * RTO since that progress (client_quiet_ns) such a slot is probed, whatever its backed-off
 * timer (held chunks: up to CLIENT_HELD_CAP RTOs); once per progress (a probe's answer is
 * none). Probes cost a header each way: HELD, MISSING, or HELD+DONE when they only crossed
 * the answer. A probe is answered at once (it never waits for other workers): one still
 * unanswered a probe wait later (client_probe_wait, doubled per quick copy, up to 8x)
 * while the core sent us other packets since was lost, or its answer was: it is probed
 * again then, not at the slot's backed-off timer (at 10% loss each way, the last chunk of
 * a round waited 20-80 ms for it). A core silent since may be stalled, and the backoff
 * stands, unless its silence says nothing: a PULL+DONE (the RESULT is lost, the appliance
 * sends it at once) or the tail of the work (CLIENT_TAIL_SLOTS in flight at most, nothing
 * else to answer; a stall's probes stay that few). Returns when the slot wants looking at
 * again for that (UINT64_MAX: no probe out), which is no due time: an answer meanwhile
 * leaves the timer as it was. */
static uint64_t client_slot_due(struct tally_client *c, uint32_t core,
				struct client_slot *sl, uint64_t now)
{
	struct client_core *cc = &c->cores[core];
	uint64_t q = client_quiet_ns(c, cc), wake = UINT64_MAX;

	if (sl->op == CLIENT_ACKWAIT || !cc->seen_held)
		return UINT64_MAX;
	if (sl->probed && (cc->last_rx_ns > sl->fast_ns || sl->done ||
			   cc->inflight <= CLIENT_TAIL_SLOTS)) {
		unsigned sh = sl->nreprobe < 3 ? sl->nreprobe : 3;

		wake = sl->fast_ns + (client_probe_wait(c, cc) << sh);
		/* a quick copy leaves the slot's timer as it was: only its expiries count
		 * towards CLIENT_PROBES_MAX (a loaded host answers late, not never: quick
		 * copies counted there re-sent 100+ payloads a run at no loss) */
		if (wake <= now) {
			client_reprobe(c, core, sl, now);
			wake = now + client_probe_wait(c, cc);
		}
	} else if (!sl->probed && cc->last_ans_ns > sl->fast_ns &&
		   (sl->held || cc->last_ans_ns > sl->sent_ns)) {
		uint64_t t = cc->last_ans_ns + q;

		if (sl->due_ns <= now || t < sl->due_ns)
			sl->due_ns = t;
		return UINT64_MAX;
	}
	if (sl->due_ns <= now && cc->last_ans_ns + q > now)
		sl->due_ns = cc->last_ans_ns + q;
	return wake;
}

uint64_t client_op_tick(struct tally_client *c)
{
	uint64_t now, next = UINT64_MAX;
	uint64_t give_up = (uint64_t)c->cfg.give_up_ms * 1000000u;

	if (!c->joined)
		return UINT64_MAX;
	now = client_now(c);
	for (uint32_t core = 0; core < c->ncores; core++) {
		struct client_core *cc = &c->cores[core];

		if (cc->inflight && now >= cc->next_due) {
			uint64_t nd = UINT64_MAX;

			for (uint32_t s = 0; s < 2 * c->cfg.window && cc->inflight; s++) {
				struct client_slot *sl = &cc->slots[s];

				if (sl->op == CLIENT_NONE)
					continue;
				if (sl->op == CLIENT_ACKWAIT && now - sl->first_ns >= give_up) {
					c->keys[sl->kidx].ackslot[sl->chunk] = CLIENT_NONE;
					client_slot_release(c, core, s);
					continue;
				}
				if (now - sl->first_ns >= give_up) {
					struct client_op *op = &c->ops_tab[sl->op];
					struct client_key *k = &c->keys[op->kidx];
					char why[128];

					client_seterr(c, "%sallreduce key %u round %u: chunk %u (offset %u, "
						  "%u elements) got no RESULT from appliance core "
						  "%u within %u ms (%u retransmits; push %s)",
						  client_live_silence(c, now, why, sizeof(why)), k->key, op->round,
						  sl->chunk, sl->chunk * k->reg.chunk_elems,
						  client_chunk_count(k, sl->chunk), core,
						  c->cfg.give_up_ms, sl->retries,
						  sl->done ? "complete there (HELD+DONE), its RESULT lost" :
						  sl->held ? "held there (HELD), waiting for other ranks" :
						  "never acknowledged");
					client_err_drops(c);
					client_op_fail(c, sl->op, -ETIMEDOUT);
					continue;
				}
				uint64_t wake = client_slot_due(c, core, sl, now);

				/* a DOWN appliance is found again by the liveness PINGs
				 * (client_live.c), not by re-sending payloads into the void */
				if (sl->due_ns <= now && c->live == TALLY_CLIENT_DOWN)
					sl->due_ns = now + (uint64_t)c->cfg.rto_max_us * 1000;
				else if (sl->due_ns <= now)
					client_slot_expire(c, core, sl, now);
				if (sl->probed && sl->fast_ns == now) /* probed just now */
					wake = now + client_probe_wait(c, cc);
				if (sl->first_ns + give_up < sl->due_ns)
					sl->due_ns = sl->first_ns + give_up;
				if (sl->due_ns < nd)
					nd = sl->due_ns;
				if (wake > now && wake < nd && sl->op != CLIENT_NONE)
					nd = wake;
			}
			cc->next_due = nd;
		}
		client_pump(c, core);
		if (cc->inflight && cc->next_due < next)
			next = cc->next_due;
	}
	if (next == UINT64_MAX)
		return UINT64_MAX;
	return next > now ? next - now : 0;
}
