/* SPDX-License-Identifier: Apache-2.0
 * dpdk_tx.c — buffered transmit flushed on a TSC deadline, the engine-side transport (header
 * mbuf chained to the payload attached as an external buffer), ARP/ICMP answers.
 */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_memory.h>
#include <rte_ring.h>

#include "tally_proto.h"
#include "tally_dpdk.h"

/* The engine owns its buffers (and holds one reference on each buffer's shinfo for the
 * key's life): nothing to free when a copy's reference goes. */
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
			tx->st.drops[TALLY_PKT_D_RELAY_FULL]++;
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

/* The header mbuf of a frame to `to` (Ethernet + IPv4 + UDP + Tally header), with the
 * payload copied in when copy. NULL when no mbuf (counted) or no room (*rc). */
static struct rte_mbuf *dpdk_frame(struct tally_dpdk_tx *tx, const struct tally_addr *to,
				   const uint8_t *hdr, const void *payload, size_t len, int copy,
				   int *rc)
{
	const struct tally_dpdk_txport *p = &tx->port[to->cookie];
	struct rte_mbuf *m = rte_pktmbuf_alloc(copy && len > TALLY_DPDK_COPY_MAX ? p->copy_pool :
					       tx->hdr_pool);

	*rc = -ENOBUFS;
	if (!m) {
		tx->st.drops[TALLY_PKT_D_NO_MBUF]++;
		return NULL;
	}
	/* an authenticated header carries its per-destination tag: it stays in this mbuf,
	 * ahead of the shared payload segment */
	size_t hl = tally_proto_hdr_len(hdr);
	size_t hlen = TALLY_PKT_HDRS_LEN + hl + (copy ? len : 0);
	uint8_t *d = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)hlen);
	if (!d) {
		rte_pktmbuf_free(m);
		*rc = -EMSGSIZE;
		return NULL;
	}
	tally_pkt_build_udp(d, p->ifa.mac, to->mac, p->ifa.ip, to->ip,
			     rte_cpu_to_be_16((uint16_t)(p->ifa.base_port + tx->core)), to->port,
			     hl + len, tx->ip_id++);
	memcpy(d + TALLY_PKT_HDRS_LEN, hdr, hl);
	if (copy && len)
		memcpy(d + TALLY_PKT_HDRS_LEN + hl, payload, len);
	return m;
}

/* Chain to m a segment referencing [va, va + len) at iova, holding one reference on sh.
 * On failure m (and what it chains) is freed. */
static int dpdk_chain_ext(struct tally_dpdk_tx *tx, struct rte_mbuf *m, const void *va,
			  rte_iova_t iova, size_t len, struct rte_mbuf_ext_shared_info *sh)
{
	struct rte_mbuf *e = rte_pktmbuf_alloc(tx->hdr_pool);

	if (!e) {
		rte_pktmbuf_free(m);
		tx->st.drops[TALLY_PKT_D_NO_MBUF]++;
		return -ENOBUFS;
	}
	rte_mbuf_ext_refcnt_update(sh, 1);
	rte_pktmbuf_attach_extbuf(e, (void *)(uintptr_t)va, iova, (uint16_t)len, sh);
	e->data_len = (uint16_t)len;
	e->pkt_len = (uint32_t)len;
	if (rte_pktmbuf_chain(m, e)) {
		rte_pktmbuf_free(e);
		rte_pktmbuf_free(m);
		return -EMSGSIZE;
	}
	return 0;
}

static int dpdk_send_check(const struct tally_dpdk_tx *tx, const struct tally_addr *to,
			   const void *payload, size_t len)
{
	if (to->cookie >= tx->nports || len > TALLY_MAX_PAYLOAD || (len && !payload))
		return -EINVAL;
	return 0;
}

/* Payloads without buffer state (tests, direct callers): the shared no-op shinfo and an
 * IOVA lookup per send. The engine's RESULTs go through dpdk_engine_send_buf. */
static int dpdk_engine_send(void *ctx, const struct tally_addr *to, const uint8_t *hdr,
			  const void *payload, size_t len)
{
	struct tally_dpdk_tx *tx = ctx;
	int rc = dpdk_send_check(tx, to, payload, len);

	if (rc < 0)
		return rc;
	/* no chains on this device: one linear frame */
	int copy = len <= TALLY_DPDK_COPY_MAX || tx->port[to->cookie].copy_pool;
	struct rte_mbuf *m = dpdk_frame(tx, to, hdr, payload, len, copy, &rc);
	if (!m)
		return rc;
	if (!copy) {
		rc = dpdk_chain_ext(tx, m, payload, dpdk_iova(payload), len, &tx->shinfo);
		if (rc < 0)
			return rc;
	}
	tally_dpdk_tx_enqueue(tx, (uint16_t)to->cookie, m);
	return 0;
}

/* Where a RESULT buffer's IOVA is, found once (key creation). DPDK memory: a memseg lookup,
 * no syscall. Other memory (tests): the page map, once here instead of per send. */
static rte_iova_t dpdk_iova_once(const void *va)
{
	if (rte_eal_iova_mode() == RTE_IOVA_VA)
		return (rte_iova_t)(uintptr_t)va;
	const struct rte_memseg *ms = rte_mem_virt2memseg(va, NULL);
	if (ms && ms->iova != RTE_BAD_IOVA)
		return ms->iova + (rte_iova_t)((uintptr_t)va - (uintptr_t)ms->addr);
	return rte_mem_virt2iova(va);
}

static void dpdk_buf_init(void *ctx, void *buf, const void *payload, size_t len)
{
	struct tally_dpdk_xbuf *xb = buf;
	const uint8_t *va = payload;

	(void)ctx;
	xb->shinfo.free_cb = dpdk_extbuf_free_noop;
	xb->shinfo.fcb_opaque = NULL;
	/* the engine's own reference, for the key's life: > 1 means a copy is queued */
	rte_mbuf_ext_refcnt_set(&xb->shinfo, 1);
	xb->iova = dpdk_iova_once(va);
	xb->split = 0;
	xb->iova2 = RTE_BAD_IOVA;
	if (xb->iova == RTE_BAD_IOVA || len == 0)
		return;
	/* IOVA as PA: a buffer may cross into a page that is not physically next. */
	for (size_t off = 4096 - ((uintptr_t)va & 4095); off < len; off += 4096) {
		rte_iova_t at = dpdk_iova_once(va + off);
		rte_iova_t base = xb->split ? xb->iova2 - xb->split : xb->iova;
		if (at == base + off)
			continue;
		if (xb->split || at == RTE_BAD_IOVA) {
			xb->iova = RTE_BAD_IOVA; /* more than two pieces: per-send fallback */
			return;
		}
		xb->split = (uint32_t)off;
		xb->iova2 = at;
	}
}

static int dpdk_buf_busy(void *ctx, const void *buf)
{
	const struct tally_dpdk_xbuf *xb = buf;

	(void)ctx;
	if (rte_mbuf_ext_refcnt_read(&xb->shinfo) > 1)
		return 1;
	/* the last free (maybe on another lcore) happens before the engine writes again */
	atomic_thread_fence(memory_order_acquire);
	return 0;
}

static int dpdk_engine_send_buf(void *ctx, const struct tally_addr *to, const uint8_t *hdr,
				const void *payload, size_t len, void *buf)
{
	struct tally_dpdk_tx *tx = ctx;
	struct tally_dpdk_xbuf *xb = buf;
	int rc = dpdk_send_check(tx, to, payload, len);

	if (rc < 0)
		return rc;
	if (len <= TALLY_DPDK_COPY_MAX || tx->port[to->cookie].copy_pool ||
	    xb->iova == RTE_BAD_IOVA)
		return dpdk_engine_send(ctx, to, hdr, payload, len);
	struct rte_mbuf *m = dpdk_frame(tx, to, hdr, payload, len, 0, &rc);
	if (!m)
		return rc;
	size_t first = xb->split ? xb->split : len;
	rc = dpdk_chain_ext(tx, m, payload, xb->iova, first, &xb->shinfo);
	if (rc == 0 && first < len)
		rc = dpdk_chain_ext(tx, m, (const uint8_t *)payload + first, xb->iova2, len - first,
				    &xb->shinfo);
	if (rc < 0)
		return rc;
	tally_dpdk_tx_enqueue(tx, (uint16_t)to->cookie, m);
	return 0;
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
	.buf_size = sizeof(struct tally_dpdk_xbuf),
	.buf_init = dpdk_buf_init,
	.send_buf = dpdk_engine_send_buf,
	.buf_busy = dpdk_buf_busy,
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
