/* SPDX-License-Identifier: Apache-2.0
 * client_live.c — the session's view of its appliance: is it there (PING after probe_ms of
 * silence while work is outstanding), did it restart (a new boot id, or an ERROR saying it
 * does not know us), and riding through a restart: JOIN and REGISTER again, re-send every
 * push in flight, answer NEED_RESULT with the round sums kept per chunk (tally_client.h,
 * ARCHITECTURE.md "Appliance restart"). With cfg.fail_fast, operations end -EHOSTDOWN at
 * dead_ms instead of waiting. Calls client.c, client_op.c, client_ack.c, client_util.c,
 * client_err.c.
 */
#include <errno.h>
#include <string.h>

#include "client_int.h"

#define LIVE_GAP_MAX_NS 500000000ull /* PING backoff cap (or probe_ms, if longer) */

static uint64_t live_now(struct tally_client *c)
{
	return c->ops->now_ns(c->xctx);
}

static const char *live_appliance(const struct tally_client *c)
{
	return c->cfg.appliance[0] ? c->cfg.appliance : "appliance";
}

void client_live_rx(struct tally_client *c, const struct tally_hdr *h)
{
	bool other_boot = h->reserved && c->boot && h->reserved != c->boot;

	if (h->op == TALLY_OP_PING) {
		if (!(h->flags & TALLY_F_ACK)) {
			c->st.drops[TALLY_R_UNEXPECTED_OP]++;
			return;
		}
		if (other_boot)
			c->restart = true;
		return;
	}
	/* ERROR to our PING: the appliance does not know us. Restarted (another boot id),
	 * or it ended our job (same boot: e.g. idle); a late ERROR from before our rejoin
	 * names the boot we joined, and is ignored for a while. */
	if (h->reason != TALLY_R_NOT_JOINED && h->reason != TALLY_R_WRONG_JOB)
		return;
	if (other_boot || !h->reserved || !c->boot ||
	    live_now(c) - c->rejoined_ns > (uint64_t)c->cfg.dead_ms * 1000000u)
		c->restart = true;
}

void client_live_need(struct tally_client *c, const struct tally_hdr *h)
{
	struct client_key *k = client_key_find(c, h->key);
	uint8_t hdr[TALLY_HDR_LEN];
	struct tally_hdr p;
	uint32_t ch;

	if (!k || !k->last || h->offset % k->reg.chunk_elems || h->offset >= k->reg.nelems)
		return;
	ch = h->offset / k->reg.chunk_elems;
	/* only a sum of every participant can stand in for the round (tally_client.h) */
	if (h->count != client_chunk_count(k, ch) || k->last_round[ch] != h->round ||
	    k->last_contrib[ch] != k->reg.participants)
		return;
	client_fill_hdr(c, &p, TALLY_OP_PUSH);
	p.flags = TALLY_F_COMPLETE;
	p.key = k->key;
	p.round = h->round;
	p.offset = h->offset;
	p.count = h->count;
	p.dtype = k->reg.dtype;
	p.contrib = k->last_contrib[ch];
	tally_proto_finish(hdr, &p, k->last + client_chunk_boff(k, ch), client_chunk_bytes(k, ch));
	c->st.complete_pushes++;
	client_send(c, k->core, hdr, k->last + client_chunk_boff(k, ch), client_chunk_bytes(k, ch));
}

int tally_client_carry_last(struct tally_client *to, const struct tally_client *from,
			    uint32_t key)
{
	struct client_key *d = client_key_find(to, key);
	const struct client_key *k = client_key_find(from, key);

	if (!d || !k)
		return -ENOENT;
	if (!d->last || !k->last)
		return 0; /* codec keys keep none */
	if (d->reg.nelems != k->reg.nelems || d->reg.chunk_elems != k->reg.chunk_elems ||
	    d->reg.dtype != k->reg.dtype || d->esize != k->esize)
		return -EINVAL;
	memcpy(d->last, k->last, (size_t)k->reg.nelems * k->esize);
	memcpy(d->last_round, k->last_round, k->nchunks * sizeof(*k->last_round));
	memcpy(d->last_contrib, k->last_contrib, k->nchunks * sizeof(*k->last_contrib));
	return 0;
}

/* Every push in flight goes again (the fresh appliance lost them); re-sends of pushes a
 * quorum left out are dropped (quorum keys are not covered, tally_client.h). */
static void live_repush(struct tally_client *c, uint64_t now)
{
	for (uint32_t core = 0; core < c->ncores; core++) {
		struct client_core *cc = &c->cores[core];

		cc->next_due = UINT64_MAX;
		cc->last_ans_ns = now;
		for (uint32_t s = 0; s < 2 * c->cfg.window && cc->inflight; s++) {
			struct client_slot *sl = &cc->slots[s];

			if (sl->op == CLIENT_NONE)
				continue;
			if (sl->op == CLIENT_ACKWAIT) {
				struct client_key *k = &c->keys[sl->kidx];

				k->ackslot[sl->chunk] = CLIENT_NONE;
				k->unacked[sl->chunk] = CLIENT_NONE;
				client_slot_release(c, core, s);
				continue;
			}
			client_set_held(cc, sl, false);
			sl->probed = sl->send_ack = sl->fast_rtx = false;
			sl->nprobe = 0;
			sl->fast_ns = 0;
			sl->sent_ns = now;
			sl->rto_ns = cc->rto;
			sl->due_ns = now + cc->rto;
			if (sl->due_ns < cc->next_due)
				cc->next_due = sl->due_ns;
			c->st.repushes++;
			client_xmit(c, core, sl);
		}
		client_pump(c, core);
	}
}

/* Fail every operation (fail_fast at dead_ms, or a rejoin the appliance refused). */
static void live_fail_all(struct tally_client *c, int err)
{
	for (uint32_t i = 0; i < c->cfg.max_ops; i++)
		if (c->ops_tab[i].state == CLIENT_OP_ACTIVE)
			client_op_fail(c, i, err);
}

/* JOIN every core and REGISTER every key again, blocking at most about dead_ms per
 * request: the appliance has just answered, so it is up. 0, -ETIMEDOUT (it went away
 * again: keep probing), or the appliance's refusal. */
static int live_rejoin(struct tally_client *c)
{
	uint64_t to = (uint64_t)c->cfg.dead_ms * 1000000u;
	uint8_t hdr[TALLY_HDR_LEN], pl[TALLY_REGISTER_LEN > TALLY_JOIN_LEN ?
					  TALLY_REGISTER_LEN : TALLY_JOIN_LEN];
	int rc = 0;

	client_join_msg(c, hdr, pl);
	c->wait = CLIENT_W_JOIN;
	for (uint32_t core = 0; core < c->ncores && !rc; core++) {
		c->wait_key = core;
		rc = client_request_rebind(c, core, hdr, pl, TALLY_JOIN_LEN, to);
		if (!rc && core == 0 && (c->jok.ncores != c->ncores ||
					 c->jok.max_chunk_bytes < c->max_chunk_bytes)) {
			client_seterr(c, "appliance %s restarted with %u cores and %u-byte chunks "
				      "(was %u, %u): start the job again", live_appliance(c),
				      c->jok.ncores, c->jok.max_chunk_bytes, c->ncores,
				      c->max_chunk_bytes);
			rc = -EPROTO;
		}
	}
	c->wait = CLIENT_W_REGISTER;
	for (uint32_t i = 0; i < c->nkeys && !rc; i++) {
		struct client_key *k = &c->keys[i];

		client_register_msg(c, k->key, &k->reg, hdr, pl);
		c->wait_key = k->key;
		rc = client_request(c, k->core, hdr, pl, TALLY_REGISTER_LEN, to);
	}
	c->wait = CLIENT_W_NONE;
	return rc;
}

static void live_restart(struct tally_client *c)
{
	uint64_t now;
	int rc;

	c->restart = false;
	rc = live_rejoin(c);
	now = live_now(c);
	if (rc == -ETIMEDOUT || rc == -ECONNREFUSED)
		return; /* gone again (or not listening yet): the PINGs go on */
	if (rc == -EPERM) {
		/* the job is not admitted there (yet): an operator-admitted job comes back with
		 * the appliance's control config, or an operator admits it again; the PINGs go
		 * on and the ops fail at give_up_ms, saying so */
		client_seterr(c, "appliance %s restarted and has not admitted job %u again "
			      "(tallyctl job-add, or --control-config)", live_appliance(c),
			      c->cfg.job_id);
		return;
	}
	if (rc) {
		if (rc != -EPROTO)
			client_seterr(c, "appliance %s restarted and refused our rejoin: %s",
				      live_appliance(c), c->errmsg);
		live_fail_all(c, rc);
		return;
	}
	c->boot = c->jok_boot;
	c->restart = false; /* answers to PINGs sent before we joined again */
	c->st.restarts++;
	c->st.rejoins++;
	c->rejoined_ns = c->last_heard_ns = now;
	c->ping_gap_ns = (uint64_t)c->cfg.probe_ms * 1000000u;
	c->ping_due_ns = now + c->ping_gap_ns;
	c->live = TALLY_CLIENT_UP;
	c->drain_seen = false;
	c->failed_fast = false;
	live_repush(c, now);
}

static bool live_busy(const struct tally_client *c)
{
	if (c->nactive)
		return true;
	for (uint32_t i = 0; i < c->ncores; i++)
		if (c->cores[i].inflight)
			return true;
	return false;
}

static void live_ping(struct tally_client *c, uint64_t now)
{
	uint64_t cap = (uint64_t)c->cfg.probe_ms * 1000000u;
	uint8_t hdr[TALLY_HDR_LEN];
	struct tally_hdr h;

	client_fill_hdr(c, &h, TALLY_OP_PING);
	h.reserved = c->join_nonce; /* keyed: the session the appliance checks (engine_auth.c) */
	tally_proto_finish(hdr, &h, NULL, 0);
	client_send(c, 0, hdr, NULL, 0);
	c->st.pings++;
	c->st.probes++;
	if (cap < LIVE_GAP_MAX_NS)
		cap = LIVE_GAP_MAX_NS;
	c->ping_due_ns = now + c->ping_gap_ns;
	c->ping_gap_ns = c->ping_gap_ns * 2 > cap ? cap : c->ping_gap_ns * 2;
}

uint64_t client_live_tick(struct tally_client *c)
{
	uint64_t now = live_now(c), probe = (uint64_t)c->cfg.probe_ms * 1000000u;
	uint64_t dead = (uint64_t)c->cfg.dead_ms * 1000000u, silence;
	bool busy;

	if (c->heard) {
		c->heard = false;
		c->last_heard_ns = now;
		c->ping_gap_ns = probe;
		if (c->live == TALLY_CLIENT_SILENT || c->live == TALLY_CLIENT_DOWN)
			c->live = c->drain_seen ? TALLY_CLIENT_DRAINING : TALLY_CLIENT_UP;
	}
	if (c->restart) {
		live_restart(c);
		now = live_now(c);
	}
	/* idle and up: silence is not news (a DOWN appliance is still probed); it counts
	 * from the first tick with work outstanding (the session may not be ticked idle) */
	busy = live_busy(c);
	if (busy && !c->was_busy && c->live != TALLY_CLIENT_SILENT && c->live != TALLY_CLIENT_DOWN)
		c->last_heard_ns = now;
	c->was_busy = busy;
	if (!busy && c->live != TALLY_CLIENT_SILENT && c->live != TALLY_CLIENT_DOWN)
		return UINT64_MAX;
	silence = now - c->last_heard_ns;
	if (silence < probe) {
		c->ping_gap_ns = probe;
		c->ping_due_ns = c->last_heard_ns + probe;
		return c->ping_due_ns - now;
	}
	if (now >= c->ping_due_ns)
		live_ping(c, now);
	c->live = silence >= dead ? TALLY_CLIENT_DOWN : TALLY_CLIENT_SILENT;
	if (c->live == TALLY_CLIENT_DOWN && c->cfg.fail_fast && !c->failed_fast && c->nactive) {
		client_seterr(c, "appliance %s unreachable for %llu ms (fail_fast): operations "
			      "ended", live_appliance(c), (unsigned long long)(silence / 1000000u));
		client_err_drops(c);
		c->failed_fast = true;
		live_fail_all(c, -EHOSTDOWN);
	}
	return c->ping_due_ns > now ? c->ping_due_ns - now : 1;
}
