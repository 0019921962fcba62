/* SPDX-License-Identifier: Apache-2.0
 * tallyd_size.c — mempool, ring and accumulator sizes from the configuration.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "tally_dpdk.h"
#include "tallyd_size.h"

/* Mempools are most compact at 2^k - 1 objects. */
static unsigned sz_pow2m1(unsigned n)
{
	unsigned v = 1;

	while (v - 1 < n)
		v <<= 1;
	return v - 1;
}

static size_t sz_pool(unsigned n, unsigned elt, unsigned ncaches, size_t page)
{
	struct rte_mempool_objsz osz;
	size_t obj = rte_mempool_calc_obj_size(elt, 0, &osz);
	size_t bytes;

	if (obj > page) {
		bytes = (size_t)n * obj;
	} else {
		/* objects do not straddle pages */
		size_t per_page = page / obj;
		bytes = (n + per_page - 1) / per_page * page;
	}
	/* the pool header and per-lcore caches come on top */
	return bytes + sizeof(struct rte_mempool) + (size_t)ncaches * sizeof(struct rte_mempool_cache);
}

int tallyd_size(const struct tallyd_conf *c, size_t hugepage_size, struct tallyd_sizing *s,
		char *err, size_t errlen)
{
	unsigned nports = c->nports;

	memset(s, 0, sizeof(*s));
	s->ncores = tallyd_conf_ncores(c);
	s->hugepage_size = hugepage_size ? hugepage_size : (2u << 20);
	unsigned ring = s->ncores > 1 ? c->dispatch_ring : 0;
	unsigned cache = TALLYD_POOL_CACHE * (s->ncores + 1);
	/* ports dealt over fewer cores (`cores`): a core fills the RX ring of each it polls */
	unsigned polls = nports && c->cores ? (nports + s->ncores - 1) / s->ncores : 1;
	/* an RX mbuf lives in an RX ring, a burst, a dispatch ring, or (ARP/ICMP answers and
	 * io-forward) a TX buffer and TX ring of any port */
	s->rx_mbufs = sz_pow2m1(polls * c->rx_desc + TALLY_DPDK_BURST + ring +
				nports * (c->tx_desc + TALLY_DPDK_TXBUF) + cache);
	s->rx_elt = (unsigned)(sizeof(struct rte_mbuf) + RTE_PKTMBUF_HEADROOM + c->frame_room);
	s->rx_pool_bytes = sz_pool(s->rx_mbufs, s->rx_elt, s->ncores + 1, s->hugepage_size);
	if (!nports) /* verbs only: no mbuf pools, no dispatch rings */
		s->rx_mbufs = 0, s->rx_elt = 0, s->rx_pool_bytes = 0, ring = 0;
	/* a RESULT in flight holds a header mbuf and an extbuf carrier */
	unsigned hdr = 2 * nports * (c->tx_desc + TALLY_DPDK_TXBUF) + cache;
	s->hdr_mbufs = sz_pow2m1(hdr);
	if (s->hdr_mbufs > TALLYD_HDR_POOL_MAX) {
		snprintf(err, errlen, "tx-desc %u on %u ports needs %u header mbufs per core, more "
			 "than %u: lower tx-desc", c->tx_desc, nports, hdr, TALLYD_HDR_POOL_MAX);
		return -EINVAL;
	}
	s->hdr_elt = (unsigned)(sizeof(struct rte_mbuf) + TALLY_DPDK_HDR_ROOM);
	s->hdr_pool_bytes = nports ? sz_pool(s->hdr_mbufs, s->hdr_elt, s->ncores + 1,
					     s->hugepage_size) : 0;
	if (!nports)
		s->hdr_mbufs = 0;
	s->ring_bytes = (size_t)s->ncores * ((size_t)ring * sizeof(void *) + 2 * 64 * sizeof(void *) +
					     3 * 4096);
	if (!c->io_forward)
		s->engine_bytes = (size_t)(c->mem_budget / (s->ncores ? s->ncores : 1)) +
				  (size_t)c->det_pool;
	s->overhead = TALLYD_EAL_OVERHEAD + (size_t)nports * TALLYD_PORT_OVERHEAD;
	s->total = s->ncores * (s->rx_pool_bytes + s->hdr_pool_bytes + s->engine_bytes) +
		   s->ring_bytes + s->overhead;
	s->hugepages = (unsigned long)((s->total + s->hugepage_size - 1) / s->hugepage_size);
	return 0;
}

int tallyd_hugepages(const char *meminfo, size_t *page_size, unsigned long *free_pages)
{
	FILE *f = fopen(meminfo ? meminfo : "/proc/meminfo", "r");
	char line[256];
	int got = 0;

	if (!f)
		return -errno;
	*page_size = 0;
	*free_pages = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long v;

		if (sscanf(line, "HugePages_Free: %lu", &v) == 1) {
			*free_pages = v;
			got |= 1;
		} else if (sscanf(line, "Hugepagesize: %lu kB", &v) == 1) {
			*page_size = (size_t)v << 10;
			got |= 2;
		}
	}
	fclose(f);
	return got == 3 ? 0 : -ENOENT;
}

void tallyd_size_print(const struct tallyd_sizing *s, FILE *f)
{
	const double mib = 1 << 20;

	fprintf(f, "sizing: %u datapath cores\n", s->ncores);
	fprintf(f, "  RX pool per core:     %u mbufs x %u B = %.1f MiB\n", s->rx_mbufs, s->rx_elt,
		s->rx_pool_bytes / mib);
	fprintf(f, "  header pool per core: %u mbufs x %u B = %.1f MiB\n", s->hdr_mbufs,
		s->hdr_elt, s->hdr_pool_bytes / mib);
	fprintf(f, "  engine per core:      %.1f MiB (keys, accumulators, staging)\n",
		s->engine_bytes / mib);
	fprintf(f, "  rings:                %.1f MiB\n", s->ring_bytes / mib);
	fprintf(f, "  EAL and devices:      %.1f MiB (estimate)\n", s->overhead / mib);
	fprintf(f, "  total:                %.1f MiB = %lu hugepages of %zu kB\n", s->total / mib,
		s->hugepages, s->hugepage_size >> 10);
}
