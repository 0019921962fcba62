/* SPDX-License-Identifier: Apache-2.0
 * worker_xport_dpdk.c — tally-worker over a DPDK port (net_memif client etc.): EAL from the
 * --dpdk argument string, one RX/TX queue, a mempool for transmit, ARP for the appliance.
 */
#include "worker_xport.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include "tally_dpdk.h"

#define WXD_MAX_ARGS 64

static struct {
	int eal_up;
	uint16_t port_id;
	int port_started;
	struct rte_mempool *pool;
	struct tally_dpdk_client *x;
} wxd;

int wx_dpdk_open(const struct wx_opts *o, struct worker_xport *wx, char *err, size_t errlen)
{
	char *argv[WXD_MAX_ARGS + 2], *copy, *tok, *save = NULL;
	struct tally_dpdk_port_cfg pc = { .nb_rxq = 1, .nb_txq = 1 };
	struct tally_dpdk_client_cfg cc = { 0 };
	int argc = 0, rc;

	if (!o->eal_args || !o->host || !o->local_ip) {
		snprintf(err, errlen, "--transport dpdk needs --dpdk \"EAL args\", --host APPLIANCE_IP "
			 "and --local-ip ADDR/LEN");
		return -EINVAL;
	}
	if (tally_pkt_parse_ipv4(o->host, &cc.server_ip)) {
		snprintf(err, errlen, "dpdk: --host '%s' is not an IPv4 address", o->host);
		return -EINVAL;
	}
	if (tally_pkt_parse_cidr(o->local_ip, &cc.local_ip, &cc.local_mask)) {
		snprintf(err, errlen, "dpdk: --local-ip '%s' is not ADDR/LEN", o->local_ip);
		return -EINVAL;
	}
	copy = strdup(o->eal_args);
	if (!copy)
		return -ENOMEM;
	argv[argc++] = (char *)"tally-worker";
	for (tok = strtok_r(copy, " \t", &save); tok && argc <= WXD_MAX_ARGS;
	     tok = strtok_r(NULL, " \t", &save))
		argv[argc++] = tok;
	argv[argc] = NULL;
	rc = rte_eal_init(argc, argv);
	/* EAL keeps pointers into argv: copy stays allocated for the process's life. */
	if (rc < 0) {
		snprintf(err, errlen, "dpdk: EAL init failed (%s) with '%s'", rte_strerror(rte_errno),
			 o->eal_args);
		return -EINVAL;
	}
	wxd.eal_up = 1;
	if (o->dpdk_port) {
		if (tally_dpdk_port_find(o->dpdk_port, &wxd.port_id)) {
			snprintf(err, errlen, "dpdk: no port named '%s'", o->dpdk_port);
			return -ENODEV;
		}
	} else if (rte_eth_dev_count_avail() < 1) {
		snprintf(err, errlen, "dpdk: no port (give a --vdev in --dpdk)");
		return -ENODEV;
	} else {
		wxd.port_id = (uint16_t)rte_eth_find_next(0);
	}
	wxd.pool = rte_pktmbuf_pool_create("wk_pool", 8191, 256, 0,
					   RTE_PKTMBUF_HEADROOM + TALLY_PKT_HDRS_LEN +
					   TALLY_HDR_LEN + TALLY_MAX_PAYLOAD + 64,
					   (int)rte_eth_dev_socket_id(wxd.port_id) < 0 ?
					   (int)rte_socket_id() : rte_eth_dev_socket_id(wxd.port_id));
	if (!wxd.pool) {
		snprintf(err, errlen, "dpdk: mbuf pool of 8191 x 9.4 KB: %s (use --no-huge or more "
			 "hugepages)", rte_strerror(rte_errno));
		return -ENOMEM;
	}
	pc.rx_pools = &wxd.pool;
	rc = tally_dpdk_port_setup(wxd.port_id, &pc, err, errlen);
	if (rc)
		return rc;
	wxd.port_started = 1;
	cc.port_id = wxd.port_id;
	cc.pool = wxd.pool;
	cc.base_port = o->base_port;
	wxd.x = tally_dpdk_client_create(&cc, &rc);
	if (!wxd.x) {
		snprintf(err, errlen, "dpdk: client transport: %s", strerror(-rc));
		return rc;
	}
	wx->ops = &tally_dpdk_client_ops;
	wx->ctx = wxd.x;
	rc = tally_dpdk_client_resolve(wxd.x, 5000);
	if (rc) {
		snprintf(err, errlen, "dpdk: no ARP answer from %s within 5 s", o->host);
		return rc;
	}
	return 0;
}

void wx_dpdk_attach(struct worker_xport *wx, struct tally_client *c)
{
	tally_dpdk_client_bind(wx->ctx, c);
}

void wx_dpdk_flush(struct worker_xport *wx)
{
	/* BYE is sent by the session; give the TX deadline a chance by polling briefly. */
	if (wx->ctx)
		tally_dpdk_client_ops.poll(wx->ctx, 100000);
}

void wx_dpdk_json(struct worker_xport *wx)
{
	const struct tally_dpdk_client_stats *s;
	uint64_t drops = 0;

	if (!wx->ctx)
		return;
	s = tally_dpdk_client_stats(wx->ctx);
	for (int d = 0; d < TALLY_PKT_D_COUNT; d++)
		drops += s->drops[d];
	printf(",\"dpdk\":{\"tx_pkts\":%" PRIu64 ",\"rx_pkts\":%" PRIu64 ",\"delivered\":%" PRIu64
	       ",\"arp_replies\":%" PRIu64 ",\"drops\":%" PRIu64 "}",
	       s->tx_pkts, s->rx_pkts, s->delivered, s->arp_replies, drops);
}

void wx_dpdk_close(struct worker_xport *wx)
{
	if (wxd.x)
		tally_dpdk_client_destroy(wxd.x);
	wxd.x = NULL;
	wx->ctx = NULL;
	if (wxd.port_started) {
		rte_eth_dev_stop(wxd.port_id);
		rte_eth_dev_close(wxd.port_id);
		wxd.port_started = 0;
	}
	if (wxd.pool)
		rte_mempool_free(wxd.pool);
	wxd.pool = NULL;
	if (wxd.eal_up)
		rte_eal_cleanup();
	wxd.eal_up = 0;
}
