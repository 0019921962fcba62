/* SPDX-License-Identifier: Apache-2.0
 * dpdk_client.c — a worker's client session over a DPDK port: send copies the packet into an
 * mbuf addressed to appliance core `to->core` (UDP port base + core), poll busy-polls RX
 * and hands every valid datagram for our UDP port to the rx callback. Answers ARP and
 * ICMP echo for our address, resolves the appliance's MAC by ARP.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>

#include "tally_proto.h"
#include "tally_dpdk.h"

struct tally_dpdk_client {
	struct tally_dpdk_client_cfg cfg;
	struct tally_pkt_ifaddr ifa;
	tally_dpdk_client_rx_fn rx;
	void *rx_arg;
	struct tally_dpdk_tx tx;
	struct tally_dpdk_client_stats st;
	uint8_t server_mac[6];
	int mac_known;
	uint64_t last_arp_tsc;
	uint16_t ip_id;
};

struct tally_dpdk_client *tally_dpdk_client_create(const struct tally_dpdk_client_cfg *cfg,
						   int *err)
{
	struct rte_ether_addr mac;
	struct tally_dpdk_client *x;

	if (!cfg->pool || !cfg->local_ip || !cfg->server_ip) {
		*err = -EINVAL;
		return NULL;
	}
	if (rte_eth_macaddr_get(cfg->port_id, &mac)) {
		*err = -ENODEV;
		return NULL;
	}
	x = rte_zmalloc("tally_dpdk_client", sizeof(*x), RTE_CACHE_LINE_SIZE);
	if (!x) {
		*err = -ENOMEM;
		return NULL;
	}
	x->cfg = *cfg;
	if (!x->cfg.local_port)
		x->cfg.local_port = TALLY_DEFAULT_PORT - 1;
	if (!x->cfg.base_port)
		x->cfg.base_port = TALLY_DEFAULT_PORT;
	x->ifa.ip = cfg->local_ip;
	x->ifa.mask = cfg->local_mask ? cfg->local_mask : 0xffffffffu;
	memcpy(x->ifa.mac, mac.addr_bytes, 6);
	/* only datagrams to our own UDP port reach the session */
	x->ifa.base_port = x->cfg.local_port;
	x->ifa.nports = 1;
	if (cfg->server_mac_set) {
		memcpy(x->server_mac, cfg->server_mac, 6);
		x->mac_known = 1;
	}
	tally_dpdk_tx_init(&x->tx, 0, cfg->pool, cfg->flush_us ? cfg->flush_us : 5);
	/* one transmit entry per TX queue: entry i is queue txq + i */
	for (uint16_t q = 0; q < (cfg->nb_txq ? cfg->nb_txq : 1); q++)
		if (tally_dpdk_tx_add_port(&x->tx, cfg->port_id, (uint16_t)(cfg->txq + q),
					   &x->ifa)) {
			rte_free(x);
			*err = -EINVAL;
			return NULL;
		}
	*err = 0;
	return x;
}

void tally_dpdk_client_destroy(struct tally_dpdk_client *x)
{
	if (!x)
		return;
	tally_dpdk_tx_flush(&x->tx, 1);
	for (uint16_t p = 0; p < x->tx.nports; p++)
		for (uint16_t i = 0; i < x->tx.port[p].n; i++)
			rte_pktmbuf_free(x->tx.port[p].buf[i]);
	rte_free(x);
}

void tally_dpdk_client_set_rx(struct tally_dpdk_client *x, tally_dpdk_client_rx_fn rx, void *arg)
{
	x->rx = rx;
	x->rx_arg = arg;
}

const struct tally_dpdk_client_stats *tally_dpdk_client_stats(const struct tally_dpdk_client *x)
{
	struct tally_dpdk_client_stats *st = (struct tally_dpdk_client_stats *)&x->st;

	/* transmit counters live in the tx buffer */
	st->tx_pkts = x->tx.st.tx_pkts;
	st->tx_bytes = x->tx.st.tx_bytes;
	st->drops[TALLY_PKT_D_TX_FULL] = x->tx.st.drops[TALLY_PKT_D_TX_FULL];
	st->drops[TALLY_PKT_D_NO_MBUF] = x->tx.st.drops[TALLY_PKT_D_NO_MBUF];
	return st;
}

const uint8_t *tally_dpdk_client_server_mac(const struct tally_dpdk_client *x)
{
	return x->server_mac;
}

static void dpdk_cli_arp_request(struct tally_dpdk_client *x)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(x->cfg.pool);

	if (!m) {
		x->tx.st.drops[TALLY_PKT_D_NO_MBUF]++;
		return;
	}
	uint8_t *d = (uint8_t *)rte_pktmbuf_append(m, TALLY_PKT_ARP_FRAME_LEN);
	if (!d) {
		rte_pktmbuf_free(m);
		return;
	}
	tally_pkt_build_arp_request(d, &x->ifa, x->cfg.server_ip);
	x->last_arp_tsc = rte_rdtsc();
	tally_dpdk_tx_enqueue(&x->tx, 0, m);
	tally_dpdk_tx_flush(&x->tx, 1);
}

static int dpdk_cli_send(void *ctx, const struct tally_addr *to, const uint8_t *hdr,
		       const void *payload, size_t len)
{
	struct tally_dpdk_client *x = ctx;

	if (len > TALLY_MAX_PAYLOAD || (len && !payload))
		return -EINVAL;
	if (!x->mac_known) {
		/* ask again at most every 100 ms; the session retransmits */
		if (rte_rdtsc() - x->last_arp_tsc > rte_get_tsc_hz() / 10)
			dpdk_cli_arp_request(x);
		return -EHOSTUNREACH;
	}
	size_t hl = tally_proto_hdr_len(hdr); /* with its auth block, if signed */
	struct rte_mbuf *m = rte_pktmbuf_alloc(x->cfg.pool);
	if (!m) {
		x->tx.st.drops[TALLY_PKT_D_NO_MBUF]++;
		return -ENOBUFS;
	}
	uint8_t *d = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)(TALLY_PKT_HDRS_LEN +
								   hl + len));
	if (!d) {
		rte_pktmbuf_free(m);
		return -EMSGSIZE;
	}
	tally_pkt_build_udp(d, x->ifa.mac, x->server_mac, x->ifa.ip, x->cfg.server_ip,
			     rte_cpu_to_be_16(x->cfg.local_port),
			     rte_cpu_to_be_16((uint16_t)(x->cfg.base_port + to->core)),
			     hl + len, x->ip_id++);
	memcpy(d + TALLY_PKT_HDRS_LEN, hdr, hl);
	if (len)
		memcpy(d + TALLY_PKT_HDRS_LEN + hl, payload, len);
	/* the queue the appliance core polls (unsigned: a core below core_base wraps high) */
	uint32_t q = to->core - x->cfg.core_base;
	tally_dpdk_tx_enqueue(&x->tx, (uint16_t)(q < x->tx.nports ? q : 0), m);
	return 0;
}

static uint64_t dpdk_cli_now_ns(void *ctx)
{
	(void)ctx;
	uint64_t c = rte_get_tsc_cycles(), hz = rte_get_tsc_hz();

	return c / hz * 1000000000ull + c % hz * 1000000000ull / hz;
}

/* One RX burst; returns datagrams delivered to the session. */
static int dpdk_cli_rx_queue(struct tally_dpdk_client *x, uint16_t q);

static int dpdk_cli_rx_burst(struct tally_dpdk_client *x)
{
	int delivered = 0;
	uint16_t nq = x->cfg.nb_rxq ? x->cfg.nb_rxq : 1;

	for (uint16_t q = 0; q < nq; q++)
		delivered += dpdk_cli_rx_queue(x, (uint16_t)(x->cfg.rxq + q));
	return delivered;
}

static int dpdk_cli_rx_queue(struct tally_dpdk_client *x, uint16_t q)
{
	struct rte_mbuf *pkts[TALLY_DPDK_BURST];
	uint16_t n = rte_eth_rx_burst(x->cfg.port_id, q, pkts, TALLY_DPDK_BURST);
	int delivered = 0;

	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		struct tally_pkt_parsed p;

		x->st.rx_pkts++;
		x->st.rx_bytes += m->pkt_len;
		if (m->nb_segs != 1) {
			x->st.drops[TALLY_PKT_D_MULTISEG]++;
			rte_pktmbuf_free(m);
			continue;
		}
		switch (tally_pkt_parse(rte_pktmbuf_mtod(m, const uint8_t *), m->data_len,
					 &x->ifa, &p)) {
		case TALLY_PKT_C_UDP:
			if (x->rx) {
				const struct tally_addr from = { .ip = p.src_ip };

				x->rx(x->rx_arg, rte_pktmbuf_mtod_offset(m, const uint8_t *, p.l4_off),
				      p.l4_len, &from);
				delivered++;
				x->st.delivered++;
			}
			rte_pktmbuf_free(m);
			break;
		case TALLY_PKT_C_ARP_REPLY:
			if (p.src_ip == x->cfg.server_ip) {
				memcpy(x->server_mac, p.src_mac, 6);
				x->mac_known = 1;
			}
			rte_pktmbuf_free(m);
			break;
		case TALLY_PKT_C_ARP_REQ:
			x->st.arp_replies++;
			tally_dpdk_answer(&x->tx, 0, m, TALLY_PKT_C_ARP_REQ);
			break;
		case TALLY_PKT_C_ICMP_ECHO:
			x->st.icmp_replies++;
			tally_dpdk_answer(&x->tx, 0, m, TALLY_PKT_C_ICMP_ECHO);
			break;
		default:
			x->st.drops[p.drop]++;
			rte_pktmbuf_free(m);
			break;
		}
	}
	return delivered;
}

static int dpdk_cli_poll(void *ctx, uint64_t timeout_ns)
{
	struct tally_dpdk_client *x = ctx;
	uint64_t hz = rte_get_tsc_hz();
	uint64_t end = rte_rdtsc() + (timeout_ns >= 1000000000ull * 3600 ? UINT64_MAX / 2 :
				      timeout_ns * hz / 1000000000ull);
	int got;

	tally_dpdk_tx_flush(&x->tx, 1);
	for (;;) {
		got = dpdk_cli_rx_burst(x);
		tally_dpdk_tx_flush(&x->tx, 0);
		if (got || rte_rdtsc() >= end)
			break;
	}
	/* what the session sent while handling these goes out now */
	tally_dpdk_tx_flush(&x->tx, 1);
	return got;
}

int tally_dpdk_client_resolve(struct tally_dpdk_client *x, uint32_t timeout_ms)
{
	uint64_t hz = rte_get_tsc_hz();
	uint64_t end = rte_rdtsc() + hz / 1000 * timeout_ms;

	while (!x->mac_known) {
		if (rte_rdtsc() >= end)
			return -ETIMEDOUT;
		if (rte_rdtsc() - x->last_arp_tsc > hz / 10)
			dpdk_cli_arp_request(x);
		dpdk_cli_rx_burst(x);
		tally_dpdk_tx_flush(&x->tx, 0);
	}
	return 0;
}

const struct tally_xport_ops tally_dpdk_client_ops = {
	.send = dpdk_cli_send,
	.now_ns = dpdk_cli_now_ns,
	.poll = dpdk_cli_poll,
};
