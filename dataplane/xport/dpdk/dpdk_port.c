/* SPDX-License-Identifier: Apache-2.0
 * dpdk_port.c — ethdev setup (queues, MTU, MAC, RSS) and rte_flow steering of each core's
 * UDP port to the queue its lcore polls.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rte_ethdev.h>
#include <rte_flow.h>
#include <rte_log.h>

#include "tally_dpdk.h"

#define DP_LOG(lvl, ...) rte_log(RTE_LOG_##lvl, RTE_LOGTYPE_USER1, "tally-dpdk: " __VA_ARGS__)

int tally_dpdk_port_find(const char *name, uint16_t *port_id)
{
	char buf[RTE_ETH_NAME_MAX_LEN];
	const char *comma = strchr(name, ',');
	size_t n = comma ? (size_t)(comma - name) : strlen(name);

	/* a vdev spec's device name is the part before its first argument */
	if (n >= sizeof(buf))
		return -ENODEV;
	memcpy(buf, name, n);
	buf[n] = '\0';
	if (rte_eth_dev_get_port_by_name(buf, port_id) == 0)
		return 0;
	return -ENODEV;
}

static int dp_port_bringup(uint16_t port_id, const struct tally_dpdk_port_cfg *cfg, int intr,
			   char *err, size_t errlen)
{
	struct rte_eth_dev_info info;
	struct rte_eth_conf conf;
	uint16_t nrxd = cfg->rx_desc ? cfg->rx_desc : 1024;
	uint16_t ntxd = cfg->tx_desc ? cfg->tx_desc : 1024;
	int socket = rte_eth_dev_socket_id(port_id);
	int rc;

	rc = rte_eth_dev_info_get(port_id, &info);
	if (rc) {
		snprintf(err, errlen, "port %u: cannot read device info: %s", port_id,
			 rte_strerror(-rc));
		return rc;
	}
	if (cfg->nb_rxq > info.max_rx_queues || cfg->nb_txq > info.max_tx_queues) {
		snprintf(err, errlen,
			 "port %u (%s): %u RX / %u TX queues asked, the device has at most %u / %u",
			 port_id, info.driver_name, cfg->nb_rxq, cfg->nb_txq, info.max_rx_queues,
			 info.max_tx_queues);
		return -EINVAL;
	}
	memset(&conf, 0, sizeof(conf));
	conf.intr_conf.rxq = intr ? 1 : 0;
	if (cfg->rss && cfg->nb_rxq > 1) {
		uint64_t want = RTE_ETH_RSS_NONFRAG_IPV4_UDP | RTE_ETH_RSS_IPV4;
		if (info.flow_type_rss_offloads & want) {
			conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
			conf.rx_adv_conf.rss_conf.rss_hf = info.flow_type_rss_offloads & want;
		} else {
			DP_LOG(NOTICE, "port %u (%s): no RSS for IPv4/UDP; queue 0 gets all traffic\n",
			       port_id, info.driver_name);
		}
	}
	if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS)
		conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
	rc = rte_eth_dev_configure(port_id, cfg->nb_rxq, cfg->nb_txq, &conf);
	if (rc) {
		snprintf(err, errlen, "port %u (%s): configure %u/%u queues failed: %s", port_id,
			 info.driver_name, cfg->nb_rxq, cfg->nb_txq, rte_strerror(-rc));
		return rc;
	}
	rc = rte_eth_dev_adjust_nb_rx_tx_desc(port_id, &nrxd, &ntxd);
	if (rc) {
		snprintf(err, errlen, "port %u: descriptor counts rejected: %s", port_id,
			 rte_strerror(-rc));
		return rc;
	}
	if (cfg->mtu) {
		if (cfg->mtu <= info.max_mtu) {
			rc = rte_eth_dev_set_mtu(port_id, (uint16_t)cfg->mtu);
			if (rc)
				DP_LOG(NOTICE, "port %u (%s): MTU %u not set (%s); leaving it alone\n",
				       port_id, info.driver_name, cfg->mtu, rte_strerror(-rc));
		} else {
			/* net_memif reports 1518 yet passes jumbo frames: not an error */
			DP_LOG(NOTICE, "port %u (%s): max MTU %u < %u; leaving the MTU alone\n",
			       port_id, info.driver_name, info.max_mtu, cfg->mtu);
		}
	}
	for (uint16_t q = 0; q < cfg->nb_rxq; q++) {
		rc = rte_eth_rx_queue_setup(port_id, q, nrxd, (unsigned)socket, NULL,
					    cfg->rx_pools[q]);
		if (rc) {
			snprintf(err, errlen, "port %u: RX queue %u setup (%u descriptors) failed: %s",
				 port_id, q, nrxd, rte_strerror(-rc));
			return rc;
		}
	}
	for (uint16_t q = 0; q < cfg->nb_txq; q++) {
		struct rte_eth_txconf txc = info.default_txconf;

		txc.offloads = conf.txmode.offloads;
		rc = rte_eth_tx_queue_setup(port_id, q, ntxd, (unsigned)socket, &txc);
		if (rc) {
			snprintf(err, errlen, "port %u: TX queue %u setup (%u descriptors) failed: %s",
				 port_id, q, ntxd, rte_strerror(-rc));
			return rc;
		}
	}
	if (cfg->mac) {
		struct rte_ether_addr a;

		memcpy(a.addr_bytes, cfg->mac, 6);
		rc = rte_eth_dev_default_mac_addr_set(port_id, &a);
		if (rc)
			DP_LOG(NOTICE, "port %u (%s): cannot set the MAC (%s); answering for the "
			       "configured one in software, in promiscuous mode\n", port_id,
			       info.driver_name, rte_strerror(-rc));
		if (rc)
			rte_eth_promiscuous_enable(port_id);
	}
	rc = rte_eth_dev_start(port_id);
	if (rc) {
		snprintf(err, errlen, "port %u (%s): start failed: %s", port_id, info.driver_name,
			 rte_strerror(-rc));
		return rc;
	}
	return 0;
}

int tally_dpdk_port_setup(uint16_t port_id, const struct tally_dpdk_port_cfg *cfg,
			  char *err, size_t errlen)
{
	int rc = dp_port_bringup(port_id, cfg, cfg->rx_intr, err, errlen);

	if (!rc || !cfg->rx_intr)
		return rc;
	/* some PMDs refuse intr_conf.rxq (no event fds): polling still works */
	DP_LOG(NOTICE, "port %u: %s with RX interrupts; setting it up without them\n", port_id,
	       err);
	return dp_port_bringup(port_id, cfg, 0, err, errlen);
}

int tally_dpdk_port_rx_intr(uint16_t port_id, uint16_t nb_rxq)
{
	for (uint16_t q = 0; q < nb_rxq; q++) {
		/* an event fd per queue, and a PMD that can arm it */
		int fd = rte_eth_dev_rx_intr_ctl_q_get_fd(port_id, q);
		int rc = fd < 0 ? fd : rte_eth_dev_rx_intr_enable(port_id, q);

		/* net_tap: its queue fd is the event, always armed (no enable op) */
		if (rc && rc != -ENOTSUP) {
			DP_LOG(INFO, "port %u queue %u: no RX interrupt (%s: %d)\n", port_id, q,
			       fd < 0 ? "no event fd" : "cannot arm it", rc);
			return 0;
		}
		rte_eth_dev_rx_intr_disable(port_id, q);
	}
	return nb_rxq > 0;
}

int tally_dpdk_steer(uint16_t port_id, uint16_t base_port, const uint16_t *queue_of_core,
		     uint16_t ncores, char *why, size_t whylen)
{
	int installed = 0;

	for (uint16_t c = 0; c < ncores; c++) {
		if (queue_of_core[c] == UINT16_MAX)
			continue;
		struct rte_flow_attr attr = { .ingress = 1 };
		struct rte_flow_item_udp udp_spec = {
			.hdr.dst_port = rte_cpu_to_be_16((uint16_t)(base_port + c)) };
		struct rte_flow_item_udp udp_mask = { .hdr.dst_port = RTE_BE16(0xffff) };
		struct rte_flow_item pattern[] = {
			{ .type = RTE_FLOW_ITEM_TYPE_ETH },
			{ .type = RTE_FLOW_ITEM_TYPE_IPV4 },
			{ .type = RTE_FLOW_ITEM_TYPE_UDP, .spec = &udp_spec, .mask = &udp_mask },
			{ .type = RTE_FLOW_ITEM_TYPE_END },
		};
		struct rte_flow_action_queue q = { .index = queue_of_core[c] };
		struct rte_flow_action actions[] = {
			{ .type = RTE_FLOW_ACTION_TYPE_QUEUE, .conf = &q },
			{ .type = RTE_FLOW_ACTION_TYPE_END },
		};
		struct rte_flow_error ferr;

		memset(&ferr, 0, sizeof(ferr));
		if (rte_flow_validate(port_id, &attr, pattern, actions, &ferr) ||
		    !rte_flow_create(port_id, &attr, pattern, actions, &ferr)) {
			snprintf(why, whylen, "rte_flow rule for UDP port %u -> queue %u refused: %s",
				 base_port + c, queue_of_core[c],
				 ferr.message ? ferr.message : "no flow support");
			rte_flow_flush(port_id, &ferr);
			return -ENOTSUP;
		}
		installed++;
	}
	return installed;
}
