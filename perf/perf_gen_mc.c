/* SPDX-License-Identifier: Apache-2.0
 * perf_gen_mc.c — N generator lcores, a DPDK port each (perf_gen_mc.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>

#include "perf_gen_mc.h"
#include "tally_dpdk.h"

#define GM_MAX_Q 16      /* queue pairs per port (appliance cores per generator lcore) */
#define GM_MAX_ARGS 96

struct gm_lcore {
	unsigned g, lcore_id, m, first_core, dut_cores;
	uint16_t port_id;
	int port_started;
	struct rte_mempool *pool;
	struct tally_dpdk_client *cli[GM_MAX_Q]; /* queue pair j: appliance core first + j */
	struct gp_port *port;
	/* the trial: written by the main lcore before the launch, read after the wait */
	struct pg_gen *gen;
	struct pg_io io;
	double rate, secs, drain, cpu;
	struct pg_stats *st;
	int rc;
} __rte_cache_aligned;

struct gm {
	unsigned n;
	int eal_up;
	char *eal_copy; /* the EAL keeps pointers into argv */
	struct gm_lcore *lc[GM_MAX_LCORES];
};

/* ---- a port of several queue pairs as one tally_xport_ops (lcore-private) ---- */

static int gm_send(void *ctx, const struct tally_addr *to, const uint8_t *hdr,
		   const void *payload, size_t len)
{
	struct gm_lcore *lc = ctx;
	unsigned j = to->core - lc->first_core;

	/* a core of another port (JOIN goes to every core): queue 0, tallyd dispatches it */
	if (j >= lc->m)
		j = 0;
	return tally_dpdk_client_ops.send(lc->cli[j], to, hdr, payload, len);
}

static uint64_t gm_now_ns(void *ctx)
{
	struct gm_lcore *lc = ctx;

	return tally_dpdk_client_ops.now_ns(lc->cli[0]);
}

static int gm_poll(void *ctx, uint64_t timeout_ns)
{
	struct gm_lcore *lc = ctx;
	uint64_t end = gm_now_ns(lc) + timeout_ns;
	int got;

	do {
		got = 0;
		for (unsigned j = 0; j < lc->m; j++) {
			int rc = tally_dpdk_client_ops.poll(lc->cli[j], 0);

			if (rc > 0)
				got += rc;
		}
	} while (!got && timeout_ns && gm_now_ns(lc) < end);
	return got;
}

static const struct tally_xport_ops gm_ops = {
	.send = gm_send, .now_ns = gm_now_ns, .poll = gm_poll,
};

/* ---- setup ---- */

static int gm_eal(struct gm *m, const struct gm_opts *o, char *err, size_t errlen)
{
	char *argv[GM_MAX_ARGS + 2], *tok, *save = NULL;
	int argc = 0;

	if (!o->eal || !(m->eal_copy = strdup(o->eal)))
		return snprintf(err, errlen, "--gen-lcores needs --eal \"EAL args\""), -EINVAL;
	argv[argc++] = (char *)(o->prog ? o->prog : "tally-linegen");
	for (tok = strtok_r(m->eal_copy, " \t", &save); tok && argc <= GM_MAX_ARGS;
	     tok = strtok_r(NULL, " \t", &save))
		argv[argc++] = tok;
	argv[argc] = NULL;
	if (rte_eal_init(argc, argv) < 0)
		return snprintf(err, errlen, "EAL init failed (%s) with '%s'",
				rte_strerror(rte_errno), o->eal), -EINVAL;
	m->eal_up = 1;
	if (rte_lcore_count() < o->lcores + 1)
		return snprintf(err, errlen, "--gen-lcores %u needs %u worker lcores and the main "
				"one, EAL has %u lcores: add them to --lcores in --eal", o->lcores,
				o->lcores, rte_lcore_count()), -EINVAL;
	if (rte_eth_dev_count_avail() < o->lcores)
		return snprintf(err, errlen, "--gen-lcores %u needs a port per lcore, EAL has %u: "
				"add a --vdev per lcore to --eal", o->lcores,
				rte_eth_dev_count_avail()), -ENODEV;
	return 0;
}

/* The i-th item of a comma list into buf: 0, or -EINVAL when the list is shorter. */
static int gm_item(const char *list, unsigned i, char *buf, size_t len)
{
	const char *p = list;

	for (unsigned k = 0; p && k < i; k++) {
		p = strchr(p, ',');
		p = p ? p + 1 : NULL;
	}
	if (!p || !*p)
		return -EINVAL;
	size_t n = strcspn(p, ",");
	if (n >= len)
		return -EINVAL;
	memcpy(buf, p, n);
	buf[n] = '\0';
	return 0;
}

static int gm_port_up(struct gm_lcore *lc, char *err, size_t errlen)
{
	struct rte_mempool *pools[GM_MAX_Q];
	struct tally_dpdk_port_cfg pc = { .nb_rxq = (uint16_t)lc->m, .nb_txq = (uint16_t)lc->m,
					  .rx_pools = pools };
	char name[32];
	int socket = rte_eth_dev_socket_id(lc->port_id) < 0 ?
		     (int)rte_lcore_to_socket_id(lc->lcore_id) : rte_eth_dev_socket_id(lc->port_id);
	int rc;

	snprintf(name, sizeof(name), "lg_pool%u", lc->g);
	/* pushes in flight, each RX ring's descriptors, and slack */
	lc->pool = rte_pktmbuf_pool_create(name, 2048 * (lc->m + 1) - 1, 256, 0,
					   RTE_PKTMBUF_HEADROOM + TALLY_PKT_HDRS_LEN +
					   TALLY_HDR_LEN + TALLY_MAX_PAYLOAD + 64, socket);
	if (!lc->pool)
		return snprintf(err, errlen, "lcore %u: mbuf pool of %u x 9.4 KB: %s (give the EAL "
				"more memory: -m in --eal)", lc->g, 2048 * (lc->m + 1) - 1,
				rte_strerror(rte_errno)), -ENOMEM;
	for (unsigned j = 0; j < lc->m; j++)
		pools[j] = lc->pool;
	rc = tally_dpdk_port_setup(lc->port_id, &pc, err, errlen);
	if (!rc)
		lc->port_started = 1;
	return rc;
}

static int gm_clients(struct gm_lcore *lc, const struct gm_opts *o, char *err, size_t errlen)
{
	struct tally_dpdk_client_cfg cc = { .port_id = lc->port_id, .pool = lc->pool,
					    .base_port = o->base_port };
	char host[64], local[64];
	int rc;

	if (gm_item(o->hosts, lc->g, host, sizeof(host)) ||
	    gm_item(o->local_ips, lc->g, local, sizeof(local)))
		return snprintf(err, errlen, "--host and --local-ip need one entry per generator "
				"lcore (comma lists of %u)", o->lcores), -EINVAL;
	if (tally_pkt_parse_ipv4(host, &cc.server_ip) ||
	    tally_pkt_parse_cidr(local, &cc.local_ip, &cc.local_mask))
		return snprintf(err, errlen, "lcore %u: --host '%s' / --local-ip '%s': expected "
				"A.B.C.D / A.B.C.D/LEN", lc->g, host, local), -EINVAL;
	for (unsigned j = 0; j < lc->m; j++) {
		cc.rxq = cc.txq = (uint16_t)j;
		lc->cli[j] = tally_dpdk_client_create(&cc, &rc);
		if (!lc->cli[j])
			return snprintf(err, errlen, "lcore %u queue %u: client: %s", lc->g, j,
					strerror(-rc)), rc;
		tally_dpdk_client_set_rx(lc->cli[j], gp_deliver, lc->port);
		if (j)
			continue;
		if (tally_dpdk_client_resolve(lc->cli[0], 5000))
			return snprintf(err, errlen, "lcore %u: no ARP answer from %s within 5 s",
					lc->g, host), -ETIMEDOUT;
		memcpy(cc.server_mac, tally_dpdk_client_server_mac(lc->cli[0]), 6);
		cc.server_mac_set = 1;
	}
	return 0;
}

static int gm_lcore_open(struct gm *m, const struct gm_opts *o, unsigned g, unsigned lcore_id,
			 uint16_t port_id, char *err, size_t errlen)
{
	int socket = (int)rte_lcore_to_socket_id(lcore_id);
	struct gm_lcore *lc = rte_zmalloc_socket("gm_lcore", sizeof(*lc), RTE_CACHE_LINE_SIZE,
						 socket);
	int rc;

	if (!lc)
		return -ENOMEM;
	m->lc[g] = lc;
	lc->g = g;
	lc->lcore_id = lcore_id;
	lc->port_id = port_id;
	lc->dut_cores = o->dut_cores;
	lc->m = o->dut_cores / o->lcores;
	lc->first_core = g * lc->m;
	lc->port = rte_zmalloc_socket("gm_port", sizeof(*lc->port), RTE_CACHE_LINE_SIZE, socket);
	if (!lc->port)
		return -ENOMEM;
	gp_attach(lc->port, &gm_ops, lc);
	lc->port->ncores = o->dut_cores;
	rc = gm_port_up(lc, err, errlen);
	if (!rc)
		rc = gm_clients(lc, o, err, errlen);
	if (!rc)
		gp_io(lc->port, &lc->io);
	return rc;
}

int gm_open(const struct gm_opts *o, struct gm **out, char *err, size_t errlen)
{
	struct gm *m;
	unsigned g = 0, lcore_id;
	uint16_t port_id;
	int rc;

	*out = NULL;
	if (o->lcores < 1 || o->lcores > GM_MAX_LCORES || !o->dut_cores ||
	    o->dut_cores % o->lcores || o->dut_cores / o->lcores > GM_MAX_Q)
		return snprintf(err, errlen, "--gen-lcores N (1..%u) and --dut-cores D: D must be "
				"a multiple of N, at most %u x N (N > D would need lcores sharing "
				"one of the appliance's queues)", GM_MAX_LCORES, GM_MAX_Q), -EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->n = o->lcores;
	rc = gm_eal(m, o, err, errlen);
	lcore_id = rc ? 0 : rte_get_next_lcore(-1, 1, 0);
	if (!rc)
		RTE_ETH_FOREACH_DEV(port_id) {
			if (rc || g == o->lcores)
				break;
			rc = gm_lcore_open(m, o, g++, lcore_id, port_id, err, errlen);
			lcore_id = rte_get_next_lcore(lcore_id, 1, 0);
		}
	if (rc) {
		gm_close(m);
		return rc;
	}
	*out = m;
	return 0;
}

void gm_close(struct gm *m)
{
	if (!m)
		return;
	for (unsigned g = 0; g < GM_MAX_LCORES; g++) {
		struct gm_lcore *lc = m->lc[g];

		if (!lc)
			continue;
		for (unsigned j = 0; j < GM_MAX_Q; j++)
			tally_dpdk_client_destroy(lc->cli[j]);
		if (lc->port_started) {
			rte_eth_dev_stop(lc->port_id);
			rte_eth_dev_close(lc->port_id);
		}
		rte_mempool_free(lc->pool);
		rte_free(lc->port);
		rte_free(lc);
	}
	if (m->eal_up)
		rte_eal_cleanup();
	free(m->eal_copy);
	free(m);
}

unsigned gm_lcores(const struct gm *m)
{
	return m->n;
}

struct gp_port *gm_port(struct gm *m, unsigned g)
{
	return g < m->n ? m->lc[g]->port : NULL;
}

int gm_keys(const struct gm *m, unsigned g, struct pg_opts *o, uint32_t base, char *err,
	    size_t errlen)
{
	const struct gm_lcore *lc = m->lc[g];

	if (o->keys < lc->m)
		return snprintf(err, errlen, "--keys %u: each generator lcore needs at least one "
				"key per appliance core of its port (%u)", o->keys, lc->m), -EINVAL;
	o->job_id = 1 + g; /* a job per lcore: its rounds depend on no other lcore */
	o->key_base = base + lc->first_core;
	o->key_group = lc->m;
	o->key_stride = lc->dut_cores;
	return 0;
}

static double gm_secs(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) * 1e-9;
}

static int gm_worker(void *arg)
{
	struct gm_lcore *lc = arg;
	struct timespec c0, c1, w0, w1;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
	clock_gettime(CLOCK_MONOTONIC, &w0);
	lc->rc = pg_run(lc->gen, &lc->io, lc->rate, lc->secs, lc->drain, lc->st);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
	clock_gettime(CLOCK_MONOTONIC, &w1);
	lc->cpu = gm_secs(&c0, &c1) / gm_secs(&w0, &w1);
	return lc->rc;
}

int gm_run(struct gm *m, struct pg_gen *const *gens, double rate, double seconds,
	   double drain_s, struct pg_stats *st, double *cpu)
{
	int rc = 0;

	for (unsigned g = 0; g < m->n; g++) {
		struct gm_lcore *lc = m->lc[g];

		lc->gen = gens[g];
		lc->rate = rate / m->n;
		lc->secs = seconds;
		lc->drain = drain_s;
		lc->st = &st[g];
		lc->rc = 0;
	}
	for (unsigned g = 0; g < m->n; g++) {
		int lrc = rte_eal_remote_launch(gm_worker, m->lc[g], m->lc[g]->lcore_id);

		if (lrc) {
			m->lc[g]->rc = lrc;
			rc = rc ? rc : lrc;
		}
	}
	for (unsigned g = 0; g < m->n; g++) {
		rte_eal_wait_lcore(m->lc[g]->lcore_id);
		cpu[g] = m->lc[g]->cpu;
		if (m->lc[g]->rc && !rc)
			rc = m->lc[g]->rc;
	}
	return rc;
}
