/* SPDX-License-Identifier: Apache-2.0
 * verbs_ring.h — the slot and credit arithmetic of one verbs connection, without any verbs
 * call (unit-tested on hosts with no RDMA device).
 *
 * Each side owns `nlocal` landing slots the peer writes into and writes into the peer's
 * `nremote` slots, in order: the k-th data message goes to slot k % n at both ends, so no
 * slot index travels. The 32-bit immediate of every message (network order on the wire) is
 *   bit 31     : 1 data message (a landing slot was written), 0 credit only (no slot)
 *   bits 30..0 : the sender's cumulative count of landing slots it has consumed, mod 2^31.
 * A message to send is first copied into the next of `nstage` local staging slots (the
 * only copy; dropped only when every staging slot is in use), then posted when the peer
 * has a free landing slot: at most nremote posted and not yet consumed by the peer. A
 * staging slot is free again when its post has completed.
 */
#ifndef VERBS_RING_H
#define VERBS_RING_H

#include <stdint.h>

#define VERBS_IMM_DATA 0x80000000u
#define VERBS_IMM_MASK 0x7fffffffu

struct verbs_ring {
	uint32_t nlocal, nremote, nstage;
	uint32_t tx_staged;     /* data messages copied into staging */
	uint32_t tx_seq;        /* of those, posted */
	uint32_t tx_done;       /* of those, completed (their staging slot is free) */
	uint32_t peer_consumed; /* our messages the peer has consumed (mod 2^31) */
	uint32_t rx_seq;        /* data messages received */
	uint32_t rx_consumed;   /* of those, handed to the rx callback and done */
	uint32_t rx_reported;   /* rx_consumed as last told to the peer */
};

void verbs_ring_init(struct verbs_ring *r, uint32_t nlocal, uint32_t nremote, uint32_t nstage);
/* The staging slot for the next message, or -1 when all are in use (drop it). */
int verbs_ring_stage_slot(const struct verbs_ring *r);
/* The message is in that staging slot. */
void verbs_ring_staged(struct verbs_ring *r);
/* The next staged message that may be posted now: its staging slot, and in *remote the
 * peer's landing slot; -1 when nothing is staged or the peer has no free slot. */
int verbs_ring_post_slot(const struct verbs_ring *r, uint32_t *remote);
/* The immediate (host order) of the next message, data (1) or credit only (0). */
uint32_t verbs_ring_tx_imm(const struct verbs_ring *r, int data);
/* Account a posted message (data 1: the one verbs_ring_post_slot named; 0: credit only);
 * returns its immediate and marks our consumed count as reported. */
uint32_t verbs_ring_tx_commit(struct verbs_ring *r, int data);
/* A data message's send completed (they complete in order on an RC QP). */
void verbs_ring_tx_completed(struct verbs_ring *r);
/* A message arrived with immediate `imm` (host order). Sets *slot to the landing slot for a
 * data message, -1 for credit only. -EPROTO when the peer claims to have consumed more
 * than we posted, or writes more slots than we have free (a broken or hostile peer: drop
 * the connection). */
int verbs_ring_rx(struct verbs_ring *r, uint32_t imm, int *slot);
/* The callback is done with the last landing slot: it may be written again. */
void verbs_ring_rx_done(struct verbs_ring *r);
/* Whether an explicit credit message is due (half the ring consumed and unreported, and
 * no staged message waiting that would carry it). */
int verbs_ring_credit_due(const struct verbs_ring *r);

#endif
