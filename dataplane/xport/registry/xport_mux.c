/* SPDX-License-Identifier: Apache-2.0
 * xport_mux.c — one engine over several transports at once (an appliance serving UDP or
 * DPDK and verbs): each packet out the way its rank joined, zero-copy RESULT buffers of
 * the default member, and a poll over all members. See tally_xport_reg.h.
 */
#include "tally_xport_reg.h"

#include <errno.h>
#include <string.h>

#define MUX_WAIT_NS 200000ull /* with cheap members connected, the others wait at most this */

static struct tally_xport_mux_member *mux_for(struct tally_xport_mux *mx,
					      const struct tally_addr *to)
{
	for (unsigned i = 0; i < mx->n; i++)
		if (mx->m[i].owns && mx->m[i].owns(to))
			return &mx->m[i];
	return mx->dflt >= 0 ? &mx->m[mx->dflt] : NULL;
}

static int mux_send(void *ctx, const struct tally_addr *to, const uint8_t *hdr,
		    const void *payload, size_t len)
{
	struct tally_xport_mux_member *m = mux_for(ctx, to);

	return m ? m->ops->send(m->ctx, to, hdr, payload, len) : -ENOTCONN;
}

/* RESULTs: the default member references the buffer (zero copy); another member (verbs:
 * the engine's arena is not registered memory) copies it with its plain send. */
static int mux_send_buf(void *ctx, const struct tally_addr *to, const uint8_t *hdr,
			const void *payload, size_t len, void *buf)
{
	struct tally_xport_mux *mx = ctx;
	struct tally_xport_mux_member *m = mux_for(mx, to);

	if (!m)
		return -ENOTCONN;
	if (mx->dflt >= 0 && m == &mx->m[mx->dflt] && m->ops->send_buf)
		return m->ops->send_buf(m->ctx, to, hdr, payload, len, buf);
	return m->ops->send(m->ctx, to, hdr, payload, len);
}

static void mux_buf_init(void *ctx, void *buf, const void *payload, size_t len)
{
	struct tally_xport_mux *mx = ctx;

	mx->m[mx->dflt].ops->buf_init(mx->m[mx->dflt].ctx, buf, payload, len);
}

static int mux_buf_busy(void *ctx, const void *buf)
{
	struct tally_xport_mux *mx = ctx;

	return mx->m[mx->dflt].ops->buf_busy(mx->m[mx->dflt].ctx, buf);
}

static uint64_t mux_now(void *ctx)
{
	struct tally_xport_mux *mx = ctx;
	const struct tally_xport_mux_member *m = &mx->m[mx->dflt >= 0 ? mx->dflt : 0];

	return m->ops->now_ns(m->ctx);
}

static int mux_poll_one(const struct tally_xport_mux_member *m, uint64_t timeout_ns)
{
	int rc = m->ops->poll ? m->ops->poll(m->ctx, timeout_ns) : 0;

	return rc > 0 ? rc : 0;
}

/* Both kinds without a shared wait. While cheap members (a CQ poll) keep delivering, the
 * others (a recvmmsg syscall each) are read every 4th turn; when all are quiet, block on
 * the one carrying traffic: briefly while cheap members have connections, so the others'
 * packets wait at most wait_ns. */
static int mux_poll(void *ctx, uint64_t timeout_ns)
{
	struct tally_xport_mux *mx = ctx;
	const struct tally_xport_mux_member *busy = NULL, *other = NULL;
	int n = 0, b;

	for (unsigned i = 0; i < mx->n; i++) {
		const struct tally_xport_mux_member *m = &mx->m[i];

		if (!m->cheap) {
			other = other ? other : m;
			continue;
		}
		for (int k = 0; k < 4 && (b = mux_poll_one(m, 0)) > 0; k++)
			n += b;
		if (!busy && m->conns && m->conns(m->ctx))
			busy = m;
	}
	if (!n || !(++mx->turn & 3))
		for (unsigned i = 0; i < mx->n; i++)
			if (!mx->m[i].cheap)
				n += mux_poll_one(&mx->m[i], 0);
	if (n || !timeout_ns)
		return n;
	if (busy)
		return mux_poll_one(busy, timeout_ns < mx->wait_ns ? timeout_ns : mx->wait_ns);
	return mux_poll_one(other ? other : &mx->m[0], timeout_ns);
}

void tally_xport_mux_init(struct tally_xport_mux *mx)
{
	memset(mx, 0, sizeof(*mx));
	mx->dflt = -1;
	mx->wait_ns = MUX_WAIT_NS;
	mx->ops.send = mux_send;
	mx->ops.now_ns = mux_now;
	mx->ops.poll = mux_poll;
}

int tally_xport_mux_add(struct tally_xport_mux *mx, const struct tally_xport_mux_member *mb)
{
	if (mx->n >= TALLY_XPORT_MUX_MAX)
		return -ENOSPC;
	if (!mb->owns && mx->dflt >= 0)
		return -EEXIST;
	mx->m[mx->n] = *mb;
	if (!mb->owns) {
		mx->dflt = (int)mx->n;
		if (mb->ops->buf_size) { /* its zero-copy RESULT buffers */
			mx->ops.buf_size = mb->ops->buf_size;
			mx->ops.buf_init = mb->ops->buf_init ? mux_buf_init : NULL;
			mx->ops.send_buf = mux_send_buf;
			mx->ops.buf_busy = mux_buf_busy;
		}
	}
	mx->n++;
	return 0;
}

int tally_xport_mux_add_xport(struct tally_xport_mux *mx, struct tally_xport *x, int cheap)
{
	const struct tally_xport_mux_member mb = { .ops = x->ops, .ctx = x->ctx,
		.owns = x->impl->owns, .conns = x->impl->conns, .cheap = cheap };

	return tally_xport_mux_add(mx, &mb);
}

const struct tally_xport_ops *tally_xport_mux_ops(struct tally_xport_mux *mx, void **ctx)
{
	if (mx->n == 1 && mx->dflt == 0) { /* one transport for every peer: its own ops */
		*ctx = mx->m[0].ctx;
		return mx->m[0].ops;
	}
	*ctx = mx;
	return &mx->ops;
}
