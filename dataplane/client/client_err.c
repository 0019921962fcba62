/* SPDX-License-Identifier: Apache-2.0
 * client_err.c — the appliance's reports that end an operation before the give-up timer:
 * a participant it has been waiting on is silent (ERROR RANK_SILENT), it is draining, it
 * has passed the round pushed (ERROR STALE_ROUND, kept coming), or it refused our JOIN
 * (client_join_refused: an ERROR, or an unsigned one after its grace), or nothing listens
 * where the JOIN went (client_refused_until: the transport's ICMP port unreachable).
 * The text names what an operator needs: which rank, which appliance, which key and round.
 * Calls client_op.c and client_util.c only.
 */
#include <errno.h>
#include <stdio.h>

#include "client_int.h"

static const char *client_appliance(const struct tally_client *c)
{
	return c->cfg.appliance[0] ? c->cfg.appliance : "appliance";
}

void client_rx_silent(struct tally_client *c, const struct tally_hdr *h)
{
	struct client_key *k = client_key_find(c, h->key);
	uint32_t opi;

	if (!k)
		return;
	opi = k->par_op[h->round & 1];
	if (opi == CLIENT_NONE || c->ops_tab[opi].round != h->round)
		return; /* that round is no longer ours to fail (done, or a late copy) */
	/* hdr.aux: the silent rank; hdr.count: how long it has been silent, in ms (all ones:
	 * never heard, it has not joined) */
	if (h->count == UINT32_MAX)
		client_seterr(c, "rank %u has not joined at appliance %s (key %u, round %u waits "
			  "for it: start it, or check its address and job id)", h->aux,
			  client_appliance(c), h->key, h->round);
	else
		client_seterr(c, "rank %u silent for %.1f s at appliance %s (key %u, round %u)",
			  h->aux, h->count / 1000.0, client_appliance(c), h->key, h->round);
	client_err_drops(c); /* a silent rank's pushes may have been dropped on their way */
	client_op_fail(c, opi, -EPIPE);
}

void client_err_draining(struct tally_client *c, const struct tally_hdr *h, uint32_t core)
{
	c->drain_seen = true;
	c->live = TALLY_CLIENT_DRAINING;
	client_seterr(c, "appliance %s is draining (shutting down or upgrading): core %u refused "
		  "key %u round %u", client_appliance(c), core, h->key, h->round);
}

void client_rx_stale(struct tally_client *c, const struct tally_hdr *h)
{
	struct client_key *k = client_key_find(c, h->key);
	struct client_op *op;
	uint32_t opi;
	uint64_t now;

	if (!k)
		return;
	opi = k->par_op[h->round & 1];
	if (opi == CLIENT_NONE || c->ops_tab[opi].round != h->round)
		return; /* a delayed duplicate's answer: that round is done here */
	op = &c->ops_tab[opi];
	now = c->ops->now_ns(c->xctx);
	if (!op->stale_ns) {
		op->stale_ns = now ? now : 1;
		return;
	}
	if (now - op->stale_ns < CLIENT_STALE_FAIL_NS)
		return;
	client_seterr(c, "stale_round for %.1f s: %s passed round %u of key %u in another launch "
		  "of this job, token and incarnation: give each launch its own TALLY_INCARNATION "
		  "or TALLY_JOB_ID", (double)(now - op->stale_ns) / 1e9, client_appliance(c),
		  h->round, h->key);
	client_op_fail(c, opi, -ESTALE);
}

/* The JOIN in progress ends refused for `reason` (an ERROR, or an unsigned one whose
 * grace is over: client_auth.c). */
void client_join_refused(struct tally_client *c, uint8_t reason)
{
	c->wait_err = client_err_from_reason(reason);
	client_seterr(c, "JOIN of job %u rank %u refused by appliance core %u: %s%s%s",
		      c->cfg.job_id, c->cfg.rank, c->wait_key,
		      tally_reason_name((enum tally_reason)reason),
		      *tally_reason_hint((enum tally_reason)reason) ? ": " : "",
		      tally_reason_hint((enum tally_reason)reason));
	c->wait_done = true;
}

/* A new blocking request: no answer yet, and no refusal of an earlier one (nor a stale ICMP
 * from before the wait). */
void client_wait_reset(struct tally_client *c, uint32_t core)
{
	c->wait_done = false;
	c->wait_err = 0;
	c->unsigned_reason = 0;
	c->refused_ns = 0;
	if (c->wait == CLIENT_W_JOIN && c->ops->peer_error)
		(void)c->ops->peer_error(c->xctx, core);
}

/* The JOIN's wait polls until the returned time (at most `due`); once the grace after the
 * first "nothing listens" is over with no answer, the JOIN ends -ECONNREFUSED. */
uint64_t client_refused_until(struct tally_client *c, uint32_t core, uint64_t now, uint64_t due)
{
	uint64_t end;

	if (c->wait != CLIENT_W_JOIN || c->wait_done || !c->ops->peer_error)
		return due;
	if (c->ops->peer_error(c->xctx, core) && !c->refused_ns)
		c->refused_ns = now ? now : 1;
	if (!c->refused_ns)
		return due;
	end = c->refused_ns + TALLY_CLIENT_REFUSED_GRACE_MS * 1000000ull;
	if (now < end)
		return end < due ? end : due;
	if (core)
		client_seterr(c, "JOIN of job %u rank %u: nothing listens at %s core %u (port + %u): "
			      "its host answered ICMP port unreachable: start every core of the "
			      "appliance, or correct the address", c->cfg.job_id, c->cfg.rank,
			      client_appliance(c), core, core);
	else
		client_seterr(c, "JOIN of job %u rank %u: nothing listens at %s: its host answered "
			      "ICMP port unreachable (connection refused): start the appliance "
			      "(tally-udpd, tallyd) there, or correct the address", c->cfg.job_id,
			      c->cfg.rank, client_appliance(c));
	c->wait_err = -ECONNREFUSED;
	c->wait_done = true;
	return due;
}
