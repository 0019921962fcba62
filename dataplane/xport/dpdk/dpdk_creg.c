/* SPDX-License-Identifier: Apache-2.0
 * dpdk_creg.c — the DPDK client transport registered as "dpdk" (tally_xport_reg.h): a
 * worker's session over a DPDK port (net_memif client etc.). The first open brings up the
 * EAL from opts.eal_args; each open takes a port (opts.dpdk_port, default: the first port
 * no open instance has) with opts.dpdk_queues RX/TX queue pairs and a transmit mempool,
 * and resolves the appliance's MAC by ARP. Several instances may be open at once, a port
 * each (tally-linegen --gen-lcores: one per generator lcore, each used by that lcore
 * only); close undoes an instance, the last one the EAL too.
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
#define CREG_MAX 32 /* instances (ports) open at once */

struct creg_inst {
	uint16_t port_id;
	int port_started;
	struct rte_mempool *pool;
	struct tally_dpdk_client *x;
};

static struct {
	int eal_up;
	unsigned seq; /* pool names */
	struct creg_inst *inst[CREG_MAX];
} creg;

static void creg_inst_free(struct creg_inst *c)
{
	if (c->x)
		tally_dpdk_client_destroy(c->x);
	if (c->port_started) {
		rte_eth_dev_stop(c->port_id);
		rte_eth_dev_close(c->port_id);
	}
	if (c->pool)
		rte_mempool_free(c->pool);
	free(c);
}

/* Free instance slot i; the EAL goes with the last instance. */
static void creg_drop(int i)
{
	int left = 0;

	if (i >= 0 && creg.inst[i])
		creg_inst_free(creg.inst[i]);
	if (i >= 0)
		creg.inst[i] = NULL;
	for (int k = 0; k < CREG_MAX; k++)
		left |= creg.inst[k] != NULL;
	if (!left && creg.eal_up) {
		rte_eal_cleanup();
		creg.eal_up = 0;
	}
}

static void creg_close(void *ctx)
{
	for (int i = 0; i < CREG_MAX; i++)
		if (creg.inst[i] && creg.inst[i]->x == ctx)
			return creg_drop(i);
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

/* The first available port no open instance has. */
static int creg_free_port(uint16_t *port_id)
{
	uint16_t p;

	RTE_ETH_FOREACH_DEV(p) {
		int taken = 0;

		for (int i = 0; i < CREG_MAX; i++)
			taken |= creg.inst[i] && creg.inst[i]->port_started && creg.inst[i]->port_id == p;
		if (!taken) {
			*port_id = p;
			return 0;
		}
	}
	return -ENODEV;
}

static int creg_port(struct creg_inst *c, const struct tally_xport_opts *o, char *err,
		     size_t errlen)
{
	uint16_t nq = o->dpdk_queues ? o->dpdk_queues : 1;
	struct rte_mempool *pools[TALLY_DPDK_MAX_PORTS];
	struct tally_dpdk_port_cfg pc = { .nb_rxq = nq, .nb_txq = nq, .rx_pools = pools };
	unsigned n = 8191 + 2048 * (nq - 1u); /* each RX queue's descriptors come from it */
	char name[32];
	int rc;

	if (o->dpdk_port) {
		if (tally_dpdk_port_find(o->dpdk_port, &c->port_id)) {
			snprintf(err, errlen, "dpdk: no port named '%s'", o->dpdk_port);
			return -ENODEV;
		}
	} else if (creg_free_port(&c->port_id)) {
		snprintf(err, errlen, "dpdk: no port left (give a --vdev in --dpdk, one per open)");
		return -ENODEV;
	}
	snprintf(name, sizeof(name), creg.seq ? "wk_pool%u" : "wk_pool", creg.seq);
	creg.seq++;
	c->pool = rte_pktmbuf_pool_create(name, n, 256, 0,
					  RTE_PKTMBUF_HEADROOM + TALLY_PKT_HDRS_LEN +
					  TALLY_HDR_LEN + TALLY_MAX_PAYLOAD + 64,
					  (int)rte_eth_dev_socket_id(c->port_id) < 0 ?
					  (int)rte_socket_id() : rte_eth_dev_socket_id(c->port_id));
	if (!c->pool) {
		snprintf(err, errlen, "dpdk: mbuf pool of %u x 9.4 KB: %s (use --no-huge or more "
			 "hugepages, or more memory: -m)", n, rte_strerror(rte_errno));
		return -ENOMEM;
	}
	for (uint16_t q = 0; q < nq; q++)
		pools[q] = c->pool;
	rc = tally_dpdk_port_setup(c->port_id, &pc, err, errlen);
	if (!rc)
		c->port_started = 1;
	return rc;
}

static int creg_client(struct creg_inst *c, const struct tally_xport_opts *o, char *err,
		       size_t errlen)
{
	struct tally_dpdk_client_cfg cc = { 0 };
	int rc;

	if (!o->eal_args || !o->host || !o->local_ip) {
		snprintf(err, errlen, "--transport dpdk needs --dpdk \"EAL args\", --host APPLIANCE_IP "
			 "and --local-ip ADDR/LEN");
		return -EINVAL;
	}
	if (o->dpdk_queues > TALLY_DPDK_MAX_PORTS) {
		snprintf(err, errlen, "dpdk: %u queue pairs: at most %d per port", o->dpdk_queues,
			 TALLY_DPDK_MAX_PORTS);
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
	if ((!creg.eal_up && (rc = creg_eal(o, err, errlen))) || (rc = creg_port(c, o, err, errlen)))
		return rc;
	cc.port_id = c->port_id;
	cc.pool = c->pool;
	cc.base_port = o->port;
	cc.nb_rxq = cc.nb_txq = o->dpdk_queues ? o->dpdk_queues : 1;
	cc.core_base = o->dpdk_core_base;
	c->x = tally_dpdk_client_create(&cc, &rc);
	if (!c->x) {
		snprintf(err, errlen, "dpdk: client transport: %s", strerror(-rc));
		return rc;
	}
	if ((rc = tally_dpdk_client_resolve(c->x, 5000)))
		snprintf(err, errlen, "dpdk: no ARP answer from %s within 5 s", o->host);
	return rc;
}

static void *creg_open(const struct tally_xport_opts *o, int *err, char *errbuf, size_t errlen)
{
	int i;

	if (o->listen) {
		snprintf(errbuf, errlen, "dpdk: the registered DPDK transport is the client side "
			 "(tallyd drives its ports itself)");
		*err = -ENOTSUP;
		return NULL;
	}
	for (i = 0; i < CREG_MAX && creg.inst[i]; i++)
		;
	if (i == CREG_MAX || !(creg.inst[i] = calloc(1, sizeof(*creg.inst[i])))) {
		snprintf(errbuf, errlen, "dpdk: at most %d DPDK client transports per process",
			 CREG_MAX);
		*err = -EBUSY;
		return NULL;
	}
	*err = creg_client(creg.inst[i], o, errbuf, errlen);
	if (*err) {
		creg_drop(i);
		return NULL;
	}
	return creg.inst[i]->x;
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
