/* SPDX-License-Identifier: Apache-2.0
 * client_place.c — RESULTs written straight into the caller's output buffer by the
 * transport (verbs: RDMA WRITE into registered memory, tally_xport_ops.advertise): the
 * advertisement when a round starts, forgotten when it ends (a reconnect must not
 * advertise a buffer the caller has back). The receipt of such a RESULT is client_rx.c's
 * (tally_client_rx_placed: checked like any packet, the copy skipped). An operation that
 * wants no sums (TALLY_CLIENT_NORESULT) advertises nothing.
 */
#include <string.h>

#include "client_int.h"

void client_advertise(struct tally_client *c, const struct client_key *k,
		      const struct client_op *op)
{
	uint32_t last = k->nchunks - 1;
	size_t len = client_chunk_boff(k, last) + client_chunk_bytes(k, last);
	struct tally_addr to;

	/* A codec key's RESULTs are opaque wire chunks the caller decodes, never placed; an
	 * output that overlaps the input would be written while a re-send or a fold may still
	 * read the pushed bytes. */
	if (k->codec || !len || op->nores || (op->out < op->in + len && op->in < op->out + len))
		return;
	memset(&to, 0, sizeof(to));
	to.core = k->core;
	if (c->ops->advertise(c->xctx, &to, c->cfg.job_id, c->cfg.rank, k->key, op->round,
			      op->out, len) == 0)
		c->st.adverts++;
}

void client_unadvertise(struct tally_client *c, const struct client_key *k,
			const struct client_op *op, int failed)
{
	struct tally_addr to;

	if (!c->ops->advertise || k->codec)
		return;
	memset(&to, 0, sizeof(to));
	to.core = k->core;
	/* a finished round's fan-out is all placed already: only a failed one is told */
	c->ops->advertise(c->xctx, &to, c->cfg.job_id, c->cfg.rank, k->key, op->round,
			  failed ? op->out : NULL, 0);
}
