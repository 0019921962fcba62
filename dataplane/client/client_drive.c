/* SPDX-License-Identifier: Apache-2.0
 * client_drive.c — driving a session: tally_client_tick runs the operations' timers
 * (client_op.c) and the appliance liveness timer (client_live.c); tally_client_wait polls
 * the transport and ticks until an operation ends; tally_client_abandon stops one;
 * tally_client_start and
 * tally_client_allreduce, the plain calls over tally_client_start_flags (client_op.c).
 */
#include <errno.h>

#include "client_int.h"

uint64_t tally_client_tick(struct tally_client *c)
{
	uint64_t live, ops;

	if (!c->joined)
		return UINT64_MAX;
	live = client_live_tick(c);
	ops = client_op_tick(c);
	return live < ops ? live : ops;
}

int tally_client_wait(struct tally_client *c, int handle)
{
	for (;;) {
		int rc = tally_client_test(c, handle);
		uint64_t next;

		if (rc)
			return rc < 0 ? rc : 0;
		if (!c->ops->poll)
			return -ENOTSUP;
		/* Take in what already arrived before deciding that anything is late: after
		 * the process was descheduled, RESULTs wait in the socket, and timers alone
		 * would re-send chunks that are done (measured: 3-4x spurious retransmits on
		 * a loaded host). */
		for (int i = 0; i < 16 && c->ops->poll(c->xctx, 0) > 0; i++)
			;
		rc = tally_client_test(c, handle);
		if (rc)
			return rc < 0 ? rc : 0;
		next = tally_client_tick(c);
		rc = tally_client_test(c, handle);
		if (rc)
			return rc < 0 ? rc : 0;
		if (next > 10000000ull)
			next = 10000000ull; /* wake at least every 10 ms */
		if (!next)
			next = 1;
		rc = c->ops->poll(c->xctx, next);
		if (rc < 0 && rc != -EINTR && rc != -EAGAIN)
			return rc;
	}
}

int tally_client_abandon(struct tally_client *c, int handle)
{
	uint32_t opi;
	struct client_op *op = client_handle_op(c, handle, &opi);

	if (!op)
		return -EINVAL;
	if (op->state != CLIENT_OP_ACTIVE)
		return 1;
	/* as a failure: slots freed, a quorum fold's staged part owed again, the round may
	 * be started again; then the handle goes (its result is nobody's) */
	client_op_fail(c, opi, -ECANCELED);
	c->st.abandoned++;
	return tally_client_test(c, handle) == -ECANCELED ? 0 : -EINVAL;
}

int tally_client_start(struct tally_client *c, uint32_t key, uint32_t round, const void *in,
		       void *out)
{
	return tally_client_start_flags(c, key, round, in, out, 0);
}

int tally_client_allreduce(struct tally_client *c, uint32_t key, uint32_t round,
			   const void *in, void *out)
{
	int h = tally_client_start(c, key, round, in, out);

	if (h < 0)
		return h;
	return tally_client_wait(c, h);
}
