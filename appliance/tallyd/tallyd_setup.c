/* SPDX-License-Identifier: Apache-2.0
 * tallyd_setup.c — after rte_eal_init: find the ports, give each queue its lcore, build
 * NUMA-local mempools, rings and engines, start the ports and steer each core's UDP port to
 * its queue (rte_flow), or say that frames are dispatched in software.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_flow.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "tallyd.h"
#include "tallyd_setup.h"

#define LOG(lvl, ...) rte_log(RTE_LOG_##lvl, RTE_LOGTYPE_USER1, "tallyd: " __VA_ARGS__)

static void *setup_alloc(void *actx, size_t size, size_t align)
{
	const struct tallyd_lcore *lc = actx;

	return rte_malloc_socket("tally_engine", size, (unsigned)align, lc->socket);
}

static void setup_free(void *actx, void *p)
{
	(void)actx;
	rte_free(p);
}

static int setup_ports_find(struct tallyd *d, char *err, size_t errlen)
{
	for (uint16_t i = 0; i < d->conf.nports; i++) {
		struct tallyd_port *p = &d->port[i];
		struct rte_eth_dev_info info;

		if (tally_dpdk_port_find(d->conf.port[i].dev, &p->port_id)) {
			snprintf(err, errlen, "port %u (%s): no such device after EAL init (%u ports "
				 "found; a PCI device must be bound to vfio-pci or be an mlx5)", i,
				 d->conf.port[i].dev, rte_eth_dev_count_avail());
			return -ENODEV;
		}
		d->pidx[p->port_id] = i;
		p->socket = rte_eth_dev_socket_id(p->port_id);
		if (p->socket < 0)
			p->socket = (int)rte_socket_id();
		if (rte_eth_dev_info_get(p->port_id, &info) == 0)
			snprintf(p->driver, sizeof(p->driver), "%s", info.driver_name);
		if (tally_dpdk_afp_iface(d->conf.port[i].dev, p->afp_iface, sizeof(p->afp_iface)))
			p->afp_iface[0] = '\0';
	}
	d->nports = d->conf.nports;
	return 0;
}

/* Lcore ids per port: explicit, or EAL's worker lcores in order. */
static int setup_lcores(struct tallyd *d, char *err, size_t errlen)
{
	unsigned next = rte_get_next_lcore(-1, 1, 0);

	d->main_lcore = rte_get_main_lcore();
	/* verbs only: the ids tallyd_eal_prepare gave, or EAL's workers in order (-l given) */
	while (!d->conf.nports && d->conf.ncore_lcores < tallyd_conf_ncores(&d->conf)) {
		if (next >= RTE_MAX_LCORE) {
			snprintf(err, errlen, "%u datapath lcores needed but EAL has only %u worker "
				 "lcores: add cores to the EAL core list (-l)",
				 tallyd_conf_ncores(&d->conf), rte_lcore_count() - 1);
			return -EINVAL;
		}
		d->conf.core_lcores[d->conf.ncore_lcores++] = (uint16_t)next;
		next = rte_get_next_lcore(next, 1, 0);
	}
	for (uint16_t i = 0; i < d->conf.nports; i++) {
		struct tallyd_port_conf *p = &d->conf.port[i];
		uint16_t q = p->queues ? p->queues : (p->nlcores ? p->nlcores : 1);

		if (tallyd_conf_port_shared(&d->conf, i)) { /* the lcore of port i % cores */
			p->lcores[0] = d->conf.port[i % d->conf.cores].lcores[0];
			p->nlcores = 1;
			continue;
		}
		for (uint16_t j = p->nlcores; j < q; j++) {
			while (next < RTE_MAX_LCORE) {
				int taken = 0;

				for (uint16_t a = 0; a < d->conf.nports; a++)
					for (uint16_t b = 0; b < d->conf.port[a].nlcores; b++)
						taken |= d->conf.port[a].lcores[b] == next;
				if (!taken)
					break;
				next = rte_get_next_lcore(next, 1, 0);
			}
			if (next >= RTE_MAX_LCORE) {
				snprintf(err, errlen, "%u datapath lcores needed but EAL has only %u "
					 "worker lcores: add cores to the EAL core list (-l)",
					 tallyd_conf_ncores(&d->conf), rte_lcore_count() - 1);
				return -EINVAL;
			}
			p->lcores[p->nlcores++] = (uint16_t)next;
			next = rte_get_next_lcore(next, 1, 0);
		}
		for (uint16_t j = 0; j < p->nlcores; j++) {
			unsigned id = p->lcores[j];

			if (id == d->main_lcore || id >= RTE_MAX_LCORE || !rte_lcore_is_enabled(id)) {
				snprintf(err, errlen, "port %u: lcore %u %s", i, id,
					 id == d->main_lcore ? "is the main lcore (it runs the "
					 "control plane): pick another" :
					 "is not in the EAL core list (-l / --lcores)");
				return -EINVAL;
			}
		}
	}
	return 0;
}

/* lc polls queue q of port pi; with several ports, other cores relay that port's TX
 * through it (its TX queue there is q). */
static int setup_poll_add(struct tallyd *d, struct tallyd_lcore *lc, uint16_t pi, uint16_t q,
			  char *err, size_t errlen)
{
	struct tallyd_poll *p = &lc->poll[lc->npoll];
	char name[RTE_MEMZONE_NAMESIZE];

	if (lc->npoll >= TALLYD_MAX_PORTS)
		return snprintf(err, errlen, "core %u: more than %d queues to poll", lc->idx,
				TALLYD_MAX_PORTS), -ENOSPC;
	p->port_idx = pi;
	p->port_id = d->port[pi].port_id;
	p->rxq = q;
	if (d->conf.nports > 1) {
		/* the first port keeps the name it always had */
		if (lc->npoll)
			snprintf(name, sizeof(name), "tallyd_txin%u_%u", lc->idx, pi);
		else
			snprintf(name, sizeof(name), "tallyd_txin%u", lc->idx);
		p->txin = rte_ring_create(name, d->conf.dispatch_ring, lc->socket, RING_F_SC_DEQ);
		if (!p->txin)
			return snprintf(err, errlen, "core %u: cannot create its rings: %s", lc->idx,
					rte_strerror(rte_errno)), -ENOMEM;
	}
	lc->npoll++;
	return 0;
}

static struct tallyd_lcore *setup_lcore(struct tallyd *d, unsigned idx, uint16_t pi,
					uint16_t q, unsigned lcore_id, char *err, size_t errlen)
{
	const struct tallyd_sizing *s = &d->size;
	/* verbs only: the lcore's own NUMA node */
	int socket = pi == TALLYD_NO_PORT ? (int)rte_lcore_to_socket_id(lcore_id) :
		     d->port[pi].socket;
	char name[RTE_MEMZONE_NAMESIZE];
	struct tallyd_lcore *lc;

	lc = rte_zmalloc_socket("tallyd_lcore", sizeof(*lc), RTE_CACHE_LINE_SIZE, socket);
	if (!lc) {
		snprintf(err, errlen, "core %u: no memory for its state", idx);
		return NULL;
	}
	lc->d = d;
	lc->idx = idx;
	lc->lcore_id = lcore_id;
	lc->socket = socket;
	lc->port_idx = pi;
	lc->rxq = q;
	lc->txq = q;
	if (pi == TALLYD_NO_PORT) /* verbs only: no mbufs, no frames between cores */
		goto rings;
	if (setup_poll_add(d, lc, pi, q, err, errlen))
		return NULL;
	snprintf(name, sizeof(name), "tallyd_rx%u", idx);
	lc->rx_pool = rte_pktmbuf_pool_create(name, s->rx_mbufs, TALLYD_POOL_CACHE, 0,
					      (uint16_t)(RTE_PKTMBUF_HEADROOM + d->conf.frame_room),
					      socket);
	snprintf(name, sizeof(name), "tallyd_hdr%u", idx);
	if (lc->rx_pool)
		lc->hdr_pool = rte_pktmbuf_pool_create(name, s->hdr_mbufs, TALLYD_POOL_CACHE, 0,
						       TALLY_DPDK_HDR_ROOM, socket);
	if (!lc->rx_pool || !lc->hdr_pool) {
		snprintf(err, errlen, "core %u: cannot create its mempools (%u x %u B + %u x %u B "
			 "on socket %d): %s. The whole configuration needs %lu hugepages of %zu kB "
			 "(%.1f MiB; tallyd --check-config prints the sizing)", idx, s->rx_mbufs,
			 s->rx_elt, s->hdr_mbufs, s->hdr_elt, socket, rte_strerror(rte_errno),
			 s->hugepages, s->hugepage_size >> 10, s->total / 1048576.0);
		return NULL;
	}
rings:
	snprintf(name, sizeof(name), "tallyd_cmd%u", idx);
	lc->cmd = rte_ring_create(name, TALLYD_CMD_RING, socket, RING_F_SP_ENQ | RING_F_SC_DEQ);
	snprintf(name, sizeof(name), "tallyd_ack%u", idx);
	lc->ack = rte_ring_create(name, TALLYD_CMD_RING, socket, RING_F_SP_ENQ | RING_F_SC_DEQ);
	if (pi != TALLYD_NO_PORT && (d->conf.nports > 1 || tallyd_conf_ncores(&d->conf) > 1)) {
		snprintf(name, sizeof(name), "tallyd_disp%u", idx);
		lc->dispatch = rte_ring_create(name, d->conf.dispatch_ring, socket, RING_F_SC_DEQ);
		if (!lc->dispatch)
			goto ring_fail;
	}
	if (!lc->cmd || !lc->ack)
		goto ring_fail;
	return lc;
ring_fail:
	snprintf(err, errlen, "core %u: cannot create its rings: %s", idx, rte_strerror(rte_errno));
	return NULL;
}

/* One boot id for every core of this start: workers tell a restart by it (tally_proto.h
 * PING). 0 (no entropy): each engine draws its own. */
static uint64_t setup_boot_id(void)
{
	static uint64_t id;

	if (!id && getrandom(&id, sizeof(id), 0) != sizeof(id))
		id = 0;
	return id;
}

/* lc's queue on port pi, or NULL when it does not poll that port. */
static const struct tallyd_poll *setup_poll_of(const struct tallyd_lcore *lc, uint16_t pi)
{
	for (uint16_t k = 0; k < lc->npoll; k++)
		if (lc->poll[k].port_idx == pi)
			return &lc->poll[k];
	return NULL;
}

static int setup_engine(struct tallyd *d, struct tallyd_lcore *lc, char *err, size_t errlen)
{
	struct tally_engine_cfg ec;
	void *xctx;
	int rc = 0;

	tally_dpdk_tx_init(&lc->tx, (uint16_t)lc->idx, lc->hdr_pool, d->conf.tx_flush_us);
	for (uint16_t i = 0; i < d->nports; i++) {
		const struct tallyd_poll *own = setup_poll_of(lc, i);

		tally_dpdk_tx_add_port(&lc->tx, d->port[i].port_id, own ? own->rxq : lc->txq,
				       &d->port[i].ifa);
		/* a core has a TX queue on the ports it polls only (a memif peer reads as
		 * many queues as the port has RX queues); the first core polling another
		 * port sends for it */
		for (unsigned c = 0; !own && c < d->ncores; c++) {
			const struct tallyd_poll *q = setup_poll_of(d->lcore[c], i);

			if (q) {
				lc->tx.port[i].via = q->txin;
				break;
			}
		}
		/* a device without TX chains gets each RESULT copied into one RX-sized mbuf */
		if (!d->port[i].multiseg)
			lc->tx.port[i].copy_pool = lc->rx_pool;
	}
	if (d->conf.io_forward)
		return 0;
	const struct tally_xport_ops *ops = tallyd_verbs_xport(lc, &xctx);
	memset(&ec, 0, sizeof(ec));
	ec.core_index = (uint16_t)lc->idx;
	ec.ncores = (uint16_t)d->ncores;
	ec.base_port = d->conf.base_port;
	ec.max_chunk_bytes = d->conf.max_chunk;
	ec.max_jobs = d->conf.max_jobs;
	ec.mem_budget = (size_t)(d->conf.mem_budget / d->ncores);
	tally_actl_guard_engine(&d->conf.guard, &ec, d->ncores);
	ec.det_pool_bytes = (size_t)d->conf.det_pool;
	ec.open_admission = d->conf.open_admission;
	ec.dead_rank_timeout_ns = (uint64_t)d->conf.dead_rank_timeout_ms * 1000000u;
	ec.job_idle_timeout_ns = (uint64_t)d->conf.job_idle_timeout_ms * 1000000u;
	ec.alloc = setup_alloc;
	ec.free = setup_free;
	ec.alloc_ctx = lc;
	ec.boot_id = setup_boot_id();
	if (!d->live && !(d->live = tally_engine_live_create(d->conf.max_jobs))) {
		snprintf(err, errlen, "core %u: liveness table: out of memory", lc->idx);
		return -ENOMEM;
	}
	ec.live = d->live; /* a rank heard on any core is alive on all */
	tally_engine_cfg_defaults(&ec);
	lc->engine = tally_engine_create(&ec, ops, xctx, &rc);
	if (!lc->engine) {
		snprintf(err, errlen, "core %u: engine not created: %s", lc->idx,
			 rte_strerror(rc < 0 ? -rc : EINVAL));
		return rc < 0 ? rc : -EINVAL;
	}
	return 0;
}

static int setup_port_start(struct tallyd *d, uint16_t pi, char *err, size_t errlen)
{
	struct tallyd_port *p = &d->port[pi];
	const struct tallyd_port_conf *pc = &d->conf.port[pi];
	struct rte_mempool *pools[TALLYD_MAX_CORES];
	uint16_t queue_of_core[TALLYD_MAX_CORES];
	struct tally_dpdk_port_cfg cfg;
	struct rte_ether_addr mac;
	char why[256];
	int rc;

	p->nrxq = 0;
	for (unsigned c = 0; c < d->ncores; c++) {
		const struct tallyd_poll *q = setup_poll_of(d->lcore[c], pi);

		queue_of_core[c] = UINT16_MAX;
		if (q) {
			queue_of_core[c] = q->rxq;
			pools[q->rxq] = d->lcore[c]->rx_pool;
			p->nrxq++;
		}
	}
	p->ntxq = p->nrxq; /* a queue pair per core polling the port */
	memset(&cfg, 0, sizeof(cfg));
	cfg.nb_rxq = p->nrxq;
	cfg.nb_txq = p->ntxq;
	cfg.rx_desc = d->conf.rx_desc;
	cfg.tx_desc = d->conf.tx_desc;
	cfg.rx_pools = pools;
	cfg.mtu = d->conf.mtu;
	cfg.mac = pc->mac_set ? pc->mac : NULL;
	cfg.rss = d->conf.rss;
	cfg.rx_intr = d->conf.idle_mode == TALLYD_IDLE_INTERRUPT;
	rc = tally_dpdk_port_setup(p->port_id, &cfg, err, errlen);
	if (rc)
		return rc;
	p->rx_intr = cfg.rx_intr && tally_dpdk_port_rx_intr(p->port_id, p->nrxq);
	if (cfg.rx_intr)
		LOG(INFO, "port %u (%s): %s\n", pi, p->driver, p->rx_intr ?
		    "RX interrupts: idle lcores block on them" :
		    "no RX interrupts: idle lcores sleep (idle-max-us caps each sleep)");
	rte_eth_macaddr_get(p->port_id, &mac);
	p->multiseg = tally_dpdk_port_multiseg(p->port_id);
	if (!p->multiseg)
		LOG(NOTICE, "port %u (%s): no multi-segment transmit; RESULT payloads are copied "
		    "(no zero-copy fan-out)\n", pi, p->driver);
	p->ifa.ip = pc->ip;
	p->ifa.mask = pc->mask;
	memcpy(p->ifa.mac, pc->mac_set ? pc->mac : mac.addr_bytes, 6);
	p->ifa.base_port = d->conf.base_port;
	p->ifa.nports = (uint16_t)d->ncores;
	if (d->ncores == 1 && p->nrxq == 1) {
		p->steered = 1; /* one core: nothing to steer */
		return 0;
	}
	rc = tally_dpdk_steer(p->port_id, d->conf.base_port, queue_of_core, (uint16_t)d->ncores,
			      why, sizeof(why));
	p->steered = rc >= 0;
	if (rc >= 0)
		LOG(INFO, "port %u (%s): rte_flow steers %d core ports to their queues\n", pi,
		    p->driver, rc);
	else
		LOG(NOTICE, "port %u (%s): %s; frames for another core are dispatched in software "
		    "over lockless rings%s\n", pi, p->driver, why,
		    p->nrxq > 1 && d->conf.rss ? " (RSS spreads them over the queues)" : "");
	return 0;
}

/* READY=1 (Type=notify) must mean the port can carry traffic: wait for the link of NIC ports.
 * Virtual devices are skipped: their link follows peers that may start later (memif). */
static int setup_wait_links(struct tallyd *d, char *err, size_t errlen)
{
	enum { WAIT_MS = 10000, STEP_MS = 100 };

	for (uint16_t pi = 0; pi < d->nports; pi++) {
		struct tallyd_port *p = &d->port[pi];
		struct rte_eth_link link = { 0 };

		if (strncmp(d->conf.port[pi].dev, "net_", 4) == 0)
			continue;
		for (int ms = 0; ms <= WAIT_MS; ms += STEP_MS) {
			if (rte_eth_link_get_nowait(p->port_id, &link) == 0 &&
			    link.link_status == RTE_ETH_LINK_UP)
				break;
			rte_delay_ms(STEP_MS);
		}
		if (link.link_status != RTE_ETH_LINK_UP) {
			snprintf(err, errlen, "port %u (%s, %s): link still down after %d s: check the "
				 "cable and the peer's port (tallyd waits for the link before READY)",
				 pi, d->conf.port[pi].dev, p->driver, WAIT_MS / 1000);
			return -ETIMEDOUT;
		}
		if (link.link_speed == RTE_ETH_SPEED_NUM_UNKNOWN)
			LOG(INFO, "port %u (%s): link up (speed not reported)\n", pi, p->driver);
		else
			LOG(INFO, "port %u (%s): link up, %u Mbit/s\n", pi, p->driver, link.link_speed);
	}
	return 0;
}

/* Ports dealt over fewer cores: say which core polls which port and queue. */
static void setup_log_polls(const struct tallyd *d)
{
	for (unsigned c = 0; d->conf.cores && d->nports && c < d->ncores; c++) {
		const struct tallyd_lcore *lc = d->lcore[c];
		char buf[160];
		int len = 0;

		for (uint16_t k = 0; k < lc->npoll && len < (int)sizeof(buf); k++)
			len += snprintf(buf + len, sizeof(buf) - (size_t)len, "%sport %u queue %u",
					k ? ", " : "", lc->poll[k].port_idx, lc->poll[k].rxq);
		LOG(INFO, "core %u (lcore %u, UDP port %u) polls %s\n", c, lc->lcore_id,
		    d->conf.base_port + c, buf);
	}
}

int tallyd_setup(struct tallyd *d, char *err, size_t errlen)
{
	int rc = setup_ports_find(d, err, errlen);

	if (rc || (rc = setup_lcores(d, err, errlen)))
		return rc;
	d->ncores = 0;
	for (uint16_t pi = 0; pi < d->conf.nports; pi++) {
		const struct tallyd_port_conf *pc = &d->conf.port[pi];

		if (tallyd_conf_port_shared(&d->conf, pi)) {
			if ((rc = setup_poll_add(d, d->lcore[pi % d->conf.cores], pi, 0, err,
						 errlen)))
				return rc;
			continue;
		}
		for (uint16_t q = 0; q < pc->nlcores; q++) {
			unsigned idx = d->ncores;
			struct tallyd_lcore *lc = setup_lcore(d, idx, pi, q, pc->lcores[q], err,
							      errlen);
			if (!lc)
				return -ENOMEM;
			d->lcore[d->ncores++] = lc;
		}
	}
	setup_log_polls(d);
	for (uint16_t i = 0; !d->conf.nports && i < d->conf.ncore_lcores; i++) {
		struct tallyd_lcore *lc = setup_lcore(d, i, TALLYD_NO_PORT, 0,
						      d->conf.core_lcores[i], err, errlen);
		if (!lc)
			return -ENOMEM;
		d->lcore[d->ncores++] = lc;
	}
	for (uint16_t pi = 0; pi < d->nports; pi++)
		if ((rc = setup_port_start(d, pi, err, errlen)))
			return rc;
	if ((rc = setup_wait_links(d, err, errlen)) || (rc = tallyd_verbs_create(d, err, errlen)))
		return rc;
	for (unsigned i = 0; i < d->ncores; i++)
		if ((rc = setup_engine(d, d->lcore[i], err, errlen)))
			return rc;
	return 0;
}

void tallyd_teardown(struct tallyd *d)
{
	tallyd_verbs_destroy(d);
	for (uint16_t pi = 0; pi < d->nports; pi++) {
		struct rte_flow_error ferr;

		rte_flow_flush(d->port[pi].port_id, &ferr);
		rte_eth_dev_stop(d->port[pi].port_id);
		rte_eth_dev_close(d->port[pi].port_id);
	}
	for (unsigned i = 0; i < d->ncores; i++) {
		struct tallyd_lcore *lc = d->lcore[i];

		for (uint16_t p = 0; p < lc->tx.nports; p++)
			for (uint16_t k = 0; k < lc->tx.port[p].n; k++)
				rte_pktmbuf_free(lc->tx.port[p].buf[k]);
		if (lc->engine)
			tally_engine_destroy(lc->engine);
		/* frames still in flight between cores */
		void *o;
		while (lc->dispatch && rte_ring_sc_dequeue(lc->dispatch, &o) == 0)
			rte_pktmbuf_free(o);
		for (uint16_t k = 0; k < lc->npoll; k++) {
			while (lc->poll[k].txin && rte_ring_sc_dequeue(lc->poll[k].txin, &o) == 0)
				rte_pktmbuf_free(o);
			rte_ring_free(lc->poll[k].txin);
		}
		rte_ring_free(lc->dispatch);
		rte_ring_free(lc->cmd);
		rte_ring_free(lc->ack);
		rte_mempool_free(lc->hdr_pool);
		rte_mempool_free(lc->rx_pool);
		rte_free(lc);
		d->lcore[i] = NULL;
	}
	d->ncores = 0;
	tally_engine_live_destroy(d->live); /* after every engine */
	d->live = NULL;
}
