/* SPDX-License-Identifier: Apache-2.0
 * worker_xport_verbs.c — tally-worker's RDMA verbs transport (--transport verbs,
 * TALLY_TRANSPORT=verbs, or --host rdma://ADDR:PORT): one RC QP per appliance core,
 * connected with rdma_cm to the appliance's rdma-listen address.
 */
#include "worker_xport.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "tally_verbs.h"

static void wx_verbs_rx(void *arg, const void *buf, size_t len, const struct tally_addr *from)
{
	(void)from;
	tally_client_rx(arg, buf, len);
}

int wx_verbs_open(const struct wx_opts *o, struct worker_xport *wx, char *err, size_t errlen)
{
	struct tally_verbs_cfg vc = { .port = o->base_port, .gid_index = o->gid_index,
				      .busy_poll_us = o->busy_poll_us };
	static char host[64];
	int rc = 0;

	if (tally_verbs_parse_addr(o->host, host, sizeof(host), &vc.port)) {
		snprintf(err, errlen, "--host '%s': want ADDR, ADDR:PORT or rdma://ADDR:PORT",
			 o->host ? o->host : "");
		return -EINVAL;
	}
	vc.host = host;
	vc.auth_key = o->auth_key;
	vc.auth_job = o->auth_job;
	vc.auth_rank = o->auth_rank;
	wx->ctx = tally_verbs_create(&vc, NULL, NULL, &rc, err, errlen);
	if (!wx->ctx)
		return rc ? rc : -EINVAL;
	wx->ops = tally_verbs_ops();
	wx->setup_authed = tally_verbs_setup_authed(wx->ctx);
	return 0;
}

static void wx_verbs_rx_placed(void *arg, const void *hdr, size_t hlen, const void *payload,
			       size_t plen)
{
	tally_client_rx_placed(arg, hdr, hlen, payload, plen);
}

void wx_verbs_attach(struct worker_xport *wx, struct tally_client *c)
{
	tally_verbs_set_rx(wx->ctx, wx_verbs_rx, c);
	tally_verbs_set_rx_placed(wx->ctx, wx_verbs_rx_placed);
}

void wx_verbs_json(struct worker_xport *wx)
{
	const struct tally_verbs_stats *s = tally_verbs_stats(wx->ctx);

	printf(",\"verbs\":{\"tx_pkts\":%" PRIu64 ",\"rx_pkts\":%" PRIu64 ",\"tx_no_credit\":%" PRIu64
	       ",\"tx_not_conn\":%" PRIu64 ",\"tx_errors\":%" PRIu64 ",\"tx_credit_msgs\":%" PRIu64
	       ",\"rx_credit_msgs\":%" PRIu64 ",\"rx_bad_len\":%" PRIu64 ",\"wc_errors\":%" PRIu64
	       ",\"conns_up\":%" PRIu64 ",\"conns_down\":%" PRIu64 ",\"reconnects\":%" PRIu64
	       ",\"cq_waits\":%" PRIu64 ",\"spins\":%" PRIu64 ",\"spin_hits\":%" PRIu64
	       ",\"stall_probes\":%" PRIu64 ",\"stalls_dead\":%" PRIu64 ",\"conns_authed\":%"
	       PRIu64 ",\"auth_bad_accept\":%" PRIu64 ",\"adv_sent\":%" PRIu64 ",\"rx_placed\":%"
	       PRIu64 ",\"rx_results_copied\":%" PRIu64 ",\"rx_bad_place\":%" PRIu64
	       ",\"mr_regs\":%" PRIu64 ",\"mr_evictions\":%" PRIu64 ",\"mr_fail\":%" PRIu64 "}",
	       s->tx_pkts, s->rx_pkts, s->tx_no_credit, s->tx_not_conn, s->tx_errors,
	       s->tx_credit_msgs, s->rx_credit_msgs, s->rx_bad_len, s->wc_errors, s->conns_up,
	       s->conns_down, s->reconnects, s->cq_waits, s->spins, s->spin_hits, s->stall_probes,
	       s->stalls_dead, s->conns_authed, s->auth_bad_accept, s->adv_sent, s->rx_placed,
	       s->rx_results_copied, s->rx_bad_place, s->mr_regs, s->mr_evictions, s->mr_fail);
}

void wx_verbs_text(struct worker_xport *wx)
{
	const struct tally_verbs_stats *s = tally_verbs_stats(wx->ctx);

	printf("  verbs: connections up %" PRIu64 " down %" PRIu64 ", reconnects %" PRIu64
	       ", dropped no-credit %" PRIu64 " not-connected %" PRIu64 ", completion errors %"
	       PRIu64 ", stall probes %" PRIu64 " (peer gone %" PRIu64 "), authenticated at "
	       "setup %" PRIu64 "\n", s->conns_up,
	       s->conns_down, s->reconnects, s->tx_no_credit, s->tx_not_conn, s->wc_errors,
	       s->stall_probes, s->stalls_dead, s->conns_authed);
	printf("  verbs: RESULTs placed in our buffer %" PRIu64 ", landed with payload %" PRIu64
	       ", bad placements %" PRIu64 "; advertisements %" PRIu64 ", registrations %" PRIu64
	       " (evicted %" PRIu64 ", failed %" PRIu64 ")\n", s->rx_placed, s->rx_results_copied,
	       s->rx_bad_place, s->adv_sent, s->mr_regs, s->mr_evictions, s->mr_fail);
	/* a later core's refused connect (e.g. authentication) is only in the transport */
	if (*tally_verbs_strerror(wx->ctx))
		printf("  verbs: last error: %s\n", tally_verbs_strerror(wx->ctx));
}

void wx_verbs_close(struct worker_xport *wx)
{
	tally_verbs_destroy(wx->ctx);
}
