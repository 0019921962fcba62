/* SPDX-License-Identifier: Apache-2.0
 * verbs_ring.c — slot and credit arithmetic of a verbs connection (see verbs_ring.h).
 */
#include "verbs_ring.h"

#include <errno.h>

void verbs_ring_init(struct verbs_ring *r, uint32_t nlocal, uint32_t nremote, uint32_t nstage)
{
	*r = (struct verbs_ring){ .nlocal = nlocal, .nremote = nremote, .nstage = nstage };
}

int verbs_ring_stage_slot(const struct verbs_ring *r)
{
	if (r->tx_staged - r->tx_done >= r->nstage)
		return -1;
	return (int)(r->tx_staged % r->nstage);
}

void verbs_ring_staged(struct verbs_ring *r)
{
	r->tx_staged++;
}

int verbs_ring_post_slot(const struct verbs_ring *r, uint32_t *remote)
{
	uint32_t unconsumed = (r->tx_seq - r->peer_consumed) & VERBS_IMM_MASK;

	if (r->tx_seq == r->tx_staged || unconsumed >= r->nremote)
		return -1;
	*remote = r->tx_seq % r->nremote;
	return (int)(r->tx_seq % r->nstage);
}

uint32_t verbs_ring_tx_imm(const struct verbs_ring *r, int data)
{
	return (data ? VERBS_IMM_DATA : 0) | (r->rx_consumed & VERBS_IMM_MASK);
}

uint32_t verbs_ring_tx_commit(struct verbs_ring *r, int data)
{
	uint32_t imm = verbs_ring_tx_imm(r, data);

	if (data)
		r->tx_seq++;
	r->rx_reported = r->rx_consumed;
	return imm;
}

void verbs_ring_tx_completed(struct verbs_ring *r)
{
	r->tx_done++;
}

int verbs_ring_rx(struct verbs_ring *r, uint32_t imm, int *slot)
{
	uint32_t consumed = imm & VERBS_IMM_MASK;
	/* Counts are compared mod 2^31: the new count may not go back, nor pass what we sent. */
	uint32_t advance = (consumed - r->peer_consumed) & VERBS_IMM_MASK;
	uint32_t outstanding = (r->tx_seq - r->peer_consumed) & VERBS_IMM_MASK;

	*slot = -1;
	if (advance > outstanding)
		return -EPROTO;
	if (imm & VERBS_IMM_DATA) {
		/* The peer may not write more than nlocal slots ahead of what we consumed. */
		if (r->rx_seq - r->rx_consumed >= r->nlocal)
			return -EPROTO;
		*slot = (int)(r->rx_seq % r->nlocal);
		r->rx_seq++;
	}
	r->peer_consumed = consumed;
	return 0;
}

void verbs_ring_rx_done(struct verbs_ring *r)
{
	r->rx_consumed++;
}

int verbs_ring_credit_due(const struct verbs_ring *r)
{
	uint32_t remote;

	if (verbs_ring_post_slot(r, &remote) >= 0)
		return 0; /* a staged message goes out now and carries the credit */
	return r->rx_consumed - r->rx_reported >= (r->nlocal + 1) / 2;
}
