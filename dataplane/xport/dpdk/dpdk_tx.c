/* SPDX-License-Identifier: Apache-2.0
 * dpdk_tx.c — buffered transmit flushed on a TSC deadline, the engine-side transport (header
 * mbuf chained to the payload attached as an external buffer), ARP/ICMP answers.
 */
#include <errno.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_memory.h>
#include <rte_ring.h>

#include "tally_proto.h"
#include "tally_dpdk.h"

/* The engine keeps a payload unchanged until its slot is reused for round r+2, long after
 * the transmit completed: nothing to free when the last reference goes. */
static void dpdk_extbuf_free_noop(void *addr, void *opaque)
{
	(void)addr;
	(void)opaque;
}

void tally_dpdk_tx_init(struct tally_dpdk_tx *tx, uint16_t core, struct rte_mempool *hdr_pool,
			uint32_t flush_us)
{
	memset(tx, 0, sizeof(*tx));
	tx->core = core;
	tx->hdr_pool = hdr_pool;
	tx->flush_cycles = rte_get_tsc_hz() / 1000000 * (flush_us ? flush_us : 1);
	tx->shinfo.free_cb = dpdk_extbuf_free_noop;
	tx->shinfo.fcb_opaque = NULL;
	/* one reference held forever: the count never reaches 0, attaches add one each */
	rte_mbuf_ext_refcnt_set(&tx->shinfo, 1);
}

int tally_dpdk_tx_add_port(struct tally_dpdk_tx *tx, uint16_t port_id, uint16_t queue,
			   const struct tally_pkt_ifaddr *ifa)
{
	if (tx->nports >= TALLY_DPDK_MAX_PORTS)
		return -ENOSPC;
	struct tally_dpdk_txport *p = &tx->port[tx->nports++];

	memset(p, 0, sizeof(*p));
	p->port_id = port_id;
	p->queue = queue;
	p->ifa = *ifa;
	return 0;
}

static void dpdk_flush_port(struct tally_dpdk_tx *tx, struct tally_dpdk_txport *p)
{
	uint32_t len[TALLY_DPDK_TXBUF];

	/* lengths first: the device may free what it sent before we look again */
	for (uint16_t i = 0; i < p->n; i++)
		len[i] = p->buf[i]->pkt_len;
	uint16_t sent = rte_eth_tx_burst(p->port_id, p->queue, p->buf, p->n);
	for (uint16_t i = 0; i < sent; i++)
		tx->st.tx_bytes += len[i];
	tx->st.tx_pkts += sent;
	if (sent < p->n)
		memmove(p->buf, p->buf + sent, (size_t)(p->n - sent) * sizeof(p->buf[0]));
	p->n = (uint16_t)(p->n - sent);
}

void tally_dpdk_tx_enqueue(struct tally_dpdk_tx *tx, uint16_t pi, struct rte_mbuf *m)
{
	struct tally_dpdk_txport *p = &tx->port[pi];

	if (p->via) {
		if (rte_ring_mp_enqueue(p->via, m)) {
			tx->st.drops[TALLY_PKT_D_RING_FULL]++;
			rte_pktmbuf_free(m);
		} else {
			tx->st.relayed++;
		}
		return;
	}
	if (p->n == TALLY_DPDK_TXBUF) {
		dpdk_flush_port(tx, p);
		if (p->n == TALLY_DPDK_TXBUF) {
			tx->st.drops[TALLY_PKT_D_TX_FULL]++;
			rte_pktmbuf_free(m);
			return;
		}
	}
	if (p->n == 0)
		p->deadline = rte_rdtsc() + tx->flush_cycles;
	p->buf[p->n++] = m;
	if (p->n >= TALLY_DPDK_BURST)
		dpdk_flush_port(tx, p);
}

void tally_dpdk_tx_flush(struct tally_dpdk_tx *tx, int force)
{
	uint64_t now = force ? 0 : rte_rdtsc();

	for (uint16_t i = 0; i < tx->nports; i++) {
		struct tally_dpdk_txport *p = &tx->port[i];

		if (p->n && (force || now >= p->deadline))
			dpdk_flush_port(tx, p);
	}
}

unsigned tally_dpdk_tx_pending(const struct tally_dpdk_tx *tx)
{
	unsigned n = 0;

	for (uint16_t i = 0; i < tx->nports; i++)
		n += tx->port[i].n;
	return n;
}

int tally_dpdk_port_multiseg(uint16_t port_id)
{
	struct rte_eth_dev_info info;

	if (rte_eth_dev_info_get(port_id, &info))
		return 0;
	return !!(info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS);
}

static rte_iova_t dpdk_iova(const void *va)
{
	if (rte_eal_iova_mode() == RTE_IOVA_VA)
		return (rte_iova_t)(uintptr_t)va;
	return rte_mem_virt2iova(va);
}

static int dpdk_engine_send(void *ctx, const struct tally_addr *to, const uint8_t *hdr,
			  const void *payload, size_t len)
{
	struct tally_dpdk_tx *tx = ctx;
	int copy = len <= TALLY_DPDK_COPY_MAX;

	if (to->cookie >= tx->nports || len > TALLY_MAX_PAYLOAD || (len && !payload))
		return -EINVAL;
	uint16_t pi = (uint16_t)to->cookie;
	const struct tally_dpdk_txport *p = &tx->port[pi];
	if (p->copy_pool)
		copy = 1; /* no chains on this device: one linear frame */
	struct rte_mbuf *m = rte_pktmbuf_alloc(copy && len > TALLY_DPDK_COPY_MAX ? p->copy_pool :
					       tx->hdr_pool);

	if (!m)
		goto nombuf;
	size_t hlen = TALLY_PKT_HDRS_LEN + TALLY_HDR_LEN + (copy ? len : 0);
	uint8_t *d = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)hlen);
	if (!d) {
		rte_pktmbuf_free(m);
		return -EMSGSIZE;
	}
	tally_pkt_build_udp(d, p->ifa.mac, to->mac, p->ifa.ip, to->ip,
			     rte_cpu_to_be_16((uint16_t)(p->ifa.base_port + tx->core)), to->port,
			     TALLY_HDR_LEN + len, tx->ip_id++);
	memcpy(d + TALLY_PKT_HDRS_LEN, hdr, TALLY_HDR_LEN);
	if (copy) {
		if (len)
			memcpy(d + TALLY_PKT_HDRS_LEN + TALLY_HDR_LEN, payload, len);
	} else {
		struct rte_mbuf *e = rte_pktmbuf_alloc(tx->hdr_pool);

		if (!e) {
			rte_pktmbuf_free(m);
			goto nombuf;
		}
		rte_mbuf_ext_refcnt_update(&tx->shinfo, 1);
		rte_pktmbuf_attach_extbuf(e, (void *)(uintptr_t)payload, dpdk_iova(payload),
					  (uint16_t)len, &tx->shinfo);
		e->data_len = (uint16_t)len;
		e->pkt_len = (uint32_t)len;
		if (rte_pktmbuf_chain(m, e)) {
			rte_pktmbuf_free(e);
			rte_pktmbuf_free(m);
			return -EMSGSIZE;
		}
	}
	tally_dpdk_tx_enqueue(tx, pi, m);
	return 0;
nombuf:
	tx->st.drops[TALLY_PKT_D_NO_MBUF]++;
	return -ENOBUFS;
}

static uint64_t dpdk_now_ns(void *ctx)
{
	(void)ctx;
	uint64_t c = rte_get_tsc_cycles(), hz = rte_get_tsc_hz();

	return c / hz * 1000000000ull + c % hz * 1000000000ull / hz;
}

const struct tally_xport_ops tally_dpdk_engine_ops = {
	.send = dpdk_engine_send,
	.now_ns = dpdk_now_ns,
	.poll = NULL,
};

void tally_dpdk_addr_from(struct tally_addr *a, const struct tally_pkt_parsed *p, uint16_t pi)
{
	memset(a, 0, sizeof(*a));
	a->ip = p->src_ip;
	a->port = p->sport;
	memcpy(a->mac, p->src_mac, 6);
	a->cookie = pi;
}

void tally_dpdk_answer(struct tally_dpdk_tx *tx, uint16_t pi, struct rte_mbuf *m,
		       enum tally_pkt_class cls)
{
	uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);
	size_t n;

	if (cls == TALLY_PKT_C_ARP_REQ)
		n = tally_pkt_arp_reply(f, &tx->port[pi].ifa);
	else
		n = tally_pkt_icmp_echo_reply(f, m->data_len);
	m->data_len = (uint16_t)n;
	m->pkt_len = (uint32_t)n;
	m->ol_flags = 0;
	tally_dpdk_tx_enqueue(tx, pi, m);
}
