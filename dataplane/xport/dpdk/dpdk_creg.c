/* SPDX-License-Identifier: Apache-2.0
 * dpdk_creg.c — the DPDK client transport registered as "dpdk" (tally_xport_reg.h): a
 * worker's session over a DPDK port (net_memif client etc.). open brings up the EAL from
 * opts.eal_args, one RX/TX queue and a transmit mempool on opts.dpdk_port (default: the
 * first port), and resolves the appliance's MAC by ARP; close undoes all of it. One per
 * process (the EAL is).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include "tally_dpdk.h"
#include "tally_xport_reg.h"

#define CREG_MAX_ARGS 64

static struct {
	int eal_up;
	uint16_t port_id;
	int port_started;
	struct rte_mempool *pool;
	struct tally_dpdk_client *x;
} creg;

static void creg_close(void *ctx)
{
	(void)ctx;
	if (creg.x)
		tally_dpdk_client_destroy(creg.x);
	creg.x = NULL;
	if (creg.port_started) {
		rte_eth_dev_stop(creg.port_id);
		rte_eth_dev_close(creg.port_id);
		creg.port_started = 0;
	}
	if (creg.pool)
		rte_mempool_free(creg.pool);
	creg.pool = NULL;
	if (creg.eal_up)
		rte_eal_cleanup();
	creg.eal_up = 0;
}

/* EAL from the argument string; the copy stays allocated (the EAL keeps pointers). */
static int creg_eal(const struct tally_xport_opts *o, char *err, size_t errlen)
{
	char *argv[CREG_MAX_ARGS + 2], *copy = strdup(o->eal_args), *tok, *save = NULL;
	int argc = 0;

	if (!copy)
		return -ENOMEM;
	argv[argc++] = (char *)(o->prog ? o->prog : "tally");
	for (tok = strtok_r(copy, " \t", &save); tok && argc <= CREG_MAX_ARGS;
	     tok = strtok_r(NULL, " \t", &save))
		argv[argc++] = tok;
	argv[argc] = NULL;
	if (rte_eal_init(argc, argv) < 0) {
		snprintf(err, errlen, "dpdk: EAL init failed (%s) with '%s'", rte_strerror(rte_errno),
			 o->eal_args);
		return -EINVAL;
	}
	creg.eal_up = 1;
	return 0;
}

static int creg_port(const struct tally_xport_opts *o, char *err, size_t errlen)
{
	struct tally_dpdk_port_cfg pc = { .nb_rxq = 1, .nb_txq = 1 };
	int rc;

	if (o->dpdk_port) {
		if (tally_dpdk_port_find(o->dpdk_port, &creg.port_id)) {
			snprintf(err, errlen, "dpdk: no port named '%s'", o->dpdk_port);
			return -ENODEV;
		}
	} else if (rte_eth_dev_count_avail() < 1) {
		snprintf(err, errlen, "dpdk: no port (give a --vdev in --dpdk)");
		return -ENODEV;
	} else {
		creg.port_id = (uint16_t)rte_eth_find_next(0);
	}
	creg.pool = rte_pktmbuf_pool_create("wk_pool", 8191, 256, 0,
					    RTE_PKTMBUF_HEADROOM + TALLY_PKT_HDRS_LEN +
					    TALLY_HDR_LEN + TALLY_MAX_PAYLOAD + 64,
					    (int)rte_eth_dev_socket_id(creg.port_id) < 0 ?
					    (int)rte_socket_id() : rte_eth_dev_socket_id(creg.port_id));
	if (!creg.pool) {
		snprintf(err, errlen, "dpdk: mbuf pool of 8191 x 9.4 KB: %s (use --no-huge or more "
			 "hugepages)", rte_strerror(rte_errno));
		return -ENOMEM;
	}
	pc.rx_pools = &creg.pool;
	rc = tally_dpdk_port_setup(creg.port_id, &pc, err, errlen);
	if (!rc)
		creg.port_started = 1;
	return rc;
}

static int creg_client(const struct tally_xport_opts *o, char *err, size_t errlen)
{
	struct tally_dpdk_client_cfg cc = { 0 };
	int rc;

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
	if ((rc = creg_eal(o, err, errlen)) || (rc = creg_port(o, err, errlen)))
		return rc;
	cc.port_id = creg.port_id;
	cc.pool = creg.pool;
	cc.base_port = o->port;
	creg.x = tally_dpdk_client_create(&cc, &rc);
	if (!creg.x) {
		snprintf(err, errlen, "dpdk: client transport: %s", strerror(-rc));
		return rc;
	}
	if ((rc = tally_dpdk_client_resolve(creg.x, 5000)))
		snprintf(err, errlen, "dpdk: no ARP answer from %s within 5 s", o->host);
	return rc;
}

static void *creg_open(const struct tally_xport_opts *o, int *err, char *errbuf, size_t errlen)
{
	if (o->listen) {
		snprintf(errbuf, errlen, "dpdk: the registered DPDK transport is the client side "
			 "(tallyd drives its ports itself)");
		*err = -ENOTSUP;
		return NULL;
	}
	if (creg.eal_up) {
		snprintf(errbuf, errlen, "dpdk: one DPDK client transport per process");
		*err = -EBUSY;
		return NULL;
	}
	*err = creg_client(o, errbuf, errlen);
	if (*err) {
		creg_close(NULL);
		return NULL;
	}
	return creg.x;
}

static const struct tally_xport_ops *creg_ops(void *ctx)
{
	(void)ctx;
	return &tally_dpdk_client_ops;
}

static void creg_set_rx(void *ctx, const struct tally_xport_rx *rx)
{
	tally_dpdk_client_set_rx(ctx, rx->rx, rx->arg);
}

/* BYE is sent by the session; give the TX deadline a chance by polling briefly. */
static int creg_flush(void *ctx)
{
	int rc = tally_dpdk_client_ops.poll(ctx, 100000);

	return rc < 0 ? rc : 0;
}

static size_t creg_counters(const void *ctx, struct tally_xport_counter *out, size_t max)
{
	const struct tally_dpdk_client_stats *s = tally_dpdk_client_stats(ctx);
	uint64_t drops = 0;

	for (int d = 0; d < TALLY_PKT_D_COUNT; d++)
		drops += s->drops[d];
	const struct tally_xport_counter all[] = {
		{ "tx_pkts", s->tx_pkts, 0 }, { "rx_pkts", s->rx_pkts, 0 },
		{ "delivered", s->delivered, 0 }, { "arp_replies", s->arp_replies, 0 },
		{ "drops", drops, 0 },
	};
	return tally_xport_counters_copy(out, max, all, sizeof(all) / sizeof(all[0]));
}

static const struct tally_xport_impl tally_xport_dpdk = {
	.name = "dpdk",
	.open = creg_open,
	.close = creg_close,
	.ops = creg_ops,
	.set_rx = creg_set_rx,
	.flush = creg_flush,
	.counters = creg_counters,
};
TALLY_XPORT_REGISTER(tally_xport_dpdk)
