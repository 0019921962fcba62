/* SPDX-License-Identifier: Apache-2.0
 * worker_xport.c — tally-worker's transports (see worker_xport.h).
 */
#include "worker_xport.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "tally_udp.h"

static void wx_udp_rx(void *arg, const void *buf, size_t len, const struct tally_addr *from)
{
	(void)from;
	tally_client_rx(arg, buf, len);
}

int wx_open(const struct wx_opts *o, struct worker_xport *wx, char *err, size_t errlen)
{
	struct tally_udp_cfg uc = { 0 };
	int rc = 0;

	wx->kind = o->kind;
	if (o->kind == WX_VERBS) {
#ifdef TALLY_WORKER_VERBS
		return wx_verbs_open(o, wx, err, errlen);
#else
		snprintf(err, errlen, "--transport verbs: this build has no verbs transport "
			 "(libibverbs-dev, librdmacm-dev)");
		return -ENOTSUP;
#endif
	}
	if (o->kind == WX_DPDK) {
#ifdef TALLY_WORKER_DPDK
		return wx_dpdk_open(o, wx, err, errlen);
#else
		snprintf(err, errlen, "--transport dpdk: this build has no DPDK client transport");
		return -ENOTSUP;
#endif
	}
	uc.host = o->host;
	uc.base_port = o->base_port;
	uc.bind_host = o->bind;
	uc.gso = o->gso;
	uc.gro = o->gro;
	uc.busy_poll_us = o->busy_poll_us;
	wx->ctx = tally_udp_create(&uc, NULL, NULL, &rc, err, errlen);
	if (!wx->ctx)
		return rc ? rc : -EINVAL;
	wx->ops = tally_udp_ops();
	return 0;
}

void wx_attach(struct worker_xport *wx, struct tally_client *c)
{
	if (wx->kind == WX_UDP)
		tally_udp_set_rx(wx->ctx, wx_udp_rx, c);
#ifdef TALLY_WORKER_VERBS
	else if (wx->kind == WX_VERBS)
		wx_verbs_attach(wx, c);
#endif
#ifdef TALLY_WORKER_DPDK
	else
		wx_dpdk_attach(wx, c);
#endif
}

void wx_flush(struct worker_xport *wx)
{
	if (wx->kind == WX_UDP && wx->ctx)
		tally_udp_flush(wx->ctx);
#ifdef TALLY_WORKER_DPDK
	if (wx->kind == WX_DPDK)
		wx_dpdk_flush(wx);
#endif
}

void wx_text(struct worker_xport *wx)
{
#ifdef TALLY_WORKER_VERBS
	if (wx->kind == WX_VERBS && wx->ctx)
		wx_verbs_text(wx);
#else
	(void)wx;
#endif
}

void wx_json(struct worker_xport *wx)
{
	const struct tally_udp_stats *s;

#ifdef TALLY_WORKER_VERBS
	if (wx->kind == WX_VERBS && wx->ctx) {
		wx_verbs_json(wx);
		return;
	}
#endif
#ifdef TALLY_WORKER_DPDK
	if (wx->kind == WX_DPDK) {
		wx_dpdk_json(wx);
		return;
	}
#endif
	if (wx->kind != WX_UDP || !wx->ctx)
		return;
	s = tally_udp_stats(wx->ctx);
	printf(",\"udp\":{\"tx_pkts\":%" PRIu64 ",\"tx_calls\":%" PRIu64 ",\"tx_errors\":%" PRIu64
	       ",\"tx_gso_sends\":%" PRIu64 ",\"rx_pkts\":%" PRIu64 ",\"rx_calls\":%" PRIu64
	       ",\"rx_gro_batches\":%" PRIu64 ",\"rx_truncated\":%" PRIu64 ",\"spins\":%" PRIu64
	       ",\"spin_hits\":%" PRIu64 ",\"spin_ms\":%.3f,\"blocks\":%" PRIu64 ",\"block_ms\":%.3f}",
	       s->tx_pkts, s->tx_calls, s->tx_errors, s->tx_gso_sends, s->rx_pkts, s->rx_calls,
	       s->rx_gro_batches, s->rx_truncated, s->spins, s->spin_hits, (double)s->spin_ns / 1e6, s->blocks,
	       (double)s->block_ns / 1e6);
}

void wx_close(struct worker_xport *wx)
{
	if (wx->kind == WX_UDP && wx->ctx)
		tally_udp_destroy(wx->ctx);
#ifdef TALLY_WORKER_VERBS
	if (wx->kind == WX_VERBS && wx->ctx)
		wx_verbs_close(wx);
#endif
#ifdef TALLY_WORKER_DPDK
	if (wx->kind == WX_DPDK)
		wx_dpdk_close(wx);
#endif
	wx->ctx = NULL;
}
