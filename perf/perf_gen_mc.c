/* SPDX-License-Identifier: Apache-2.0
 * perf_gen_mc.c — N generator lcores, a DPDK port each (perf_gen_mc.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_common.h>
#include <rte_launch.h>
#include <rte_lcore.h>

#include "perf_gen_mc.h"
#include "tally_xport_reg.h"

#define GM_MAX_Q 8 /* queue pairs per port (appliance cores per generator lcore): the
		    * registry's dpdk transport's bound */

struct gm_lcore {
	unsigned g, lcore_id, m, first_core, dut_cores;
	struct gp_port *port;   /* its own "dpdk" transport instance: its own port and queues */
	/* the trial: written by the main lcore before the launch, read after the wait; the
	 * stats here, in this lcore's own cache-aligned block (copied out after the wait), so
	 * that no cache line is written by two lcores */
	struct pg_gen *gen;
	struct pg_io io;
	double rate, secs, drain, cpu;
	int rc;
	struct pg_stats st;
} __rte_cache_aligned;

struct gm {
	unsigned n;
	struct gm_lcore *lc[GM_MAX_LCORES];
};

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

/* Lcore g's port: the registry's "dpdk" (the first open starts the EAL), the next port
 * with m queue pairs, packets steered to the queue of their appliance core. */
static int gm_lcore_open(struct gm *m, const struct gm_opts *o, unsigned g, char *err,
			 size_t errlen)
{
	struct gm_lcore *lc = aligned_alloc(RTE_CACHE_LINE_SIZE, sizeof(*lc));
	char host[64], local[64];
	struct tally_xport_opts xo = { .port = o->base_port, .eal_args = o->eal,
				       .prog = o->prog ? o->prog : "tally-linegen",
				       .ncores = (uint16_t)o->dut_cores, .host = host,
				       .local_ip = local };

	if (!lc)
		return -ENOMEM;
	memset(lc, 0, sizeof(*lc));
	if (!(lc->port = aligned_alloc(64, (sizeof(*lc->port) + 63) / 64 * 64)))
		return free(lc), -ENOMEM;
	m->lc[g] = lc;
	lc->g = g;
	lc->dut_cores = o->dut_cores;
	/* D >= N: port g is tallyd's port g with D / N queues, its cores g*m .. g*m+m-1;
	 * N > D: tallyd --cores D polls port g with core g % D (one queue) */
	lc->m = o->lcores > o->dut_cores ? 1 : o->dut_cores / o->lcores;
	lc->first_core = o->lcores > o->dut_cores ? g % o->dut_cores : g * lc->m;
	xo.dpdk_queues = (uint16_t)lc->m;
	xo.dpdk_core_base = (uint16_t)lc->first_core;
	if (gm_item(o->hosts, g, host, sizeof(host)) || gm_item(o->local_ips, g, local,
								 sizeof(local)))
		return snprintf(err, errlen, "--host and --local-ip need one entry per generator "
				"lcore (comma lists of %u)", o->lcores), -EINVAL;
	int rc = gp_open(lc->port, "dpdk", &xo, err, errlen);
	if (rc)
		return rc;
	lc->port->ncores = o->dut_cores;
	gp_io(lc->port, &lc->io);
	return 0;
}

int gm_open(const struct gm_opts *o, struct gm **out, char *err, size_t errlen)
{
	struct gm *m;
	unsigned lcore_id;
	int rc = 0;

	*out = NULL;
	if (o->lcores < 1 || o->lcores > GM_MAX_LCORES || !o->dut_cores ||
	    (o->dut_cores >= o->lcores && o->dut_cores % o->lcores) ||
	    o->dut_cores / o->lcores > GM_MAX_Q)
		return snprintf(err, errlen, "--gen-lcores N (1..%u) and --dut-cores D: D must be "
				"a multiple of N, at most %u x N, or below N (tallyd --cores D: "
				"port g polled by core g %% D)", GM_MAX_LCORES, GM_MAX_Q), -EINVAL;
	if (!o->eal)
		return snprintf(err, errlen, "--gen-lcores needs --eal \"EAL args\""), -EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->n = o->lcores;
	for (unsigned g = 0; g < o->lcores && !rc; g++)
		rc = gm_lcore_open(m, o, g, err, errlen);
	if (!rc && rte_lcore_count() < o->lcores + 1) {
		snprintf(err, errlen, "--gen-lcores %u needs %u worker lcores and the main one, "
			 "EAL has %u lcores: add them to --lcores in --eal", o->lcores, o->lcores,
			 rte_lcore_count());
		rc = -EINVAL;
	}
	lcore_id = rc ? 0 : rte_get_next_lcore(-1, 1, 0);
	for (unsigned g = 0; g < o->lcores && !rc; g++) {
		m->lc[g]->lcore_id = lcore_id;
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
	/* the last instance's close takes the EAL down: after every lcore's port */
	for (unsigned g = GM_MAX_LCORES; g-- > 0;) {
		struct gm_lcore *lc = m->lc[g];

		if (!lc)
			continue;
		gp_close(lc->port);
		free(lc->port);
		free(lc);
	}
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
	lc->rc = pg_run(lc->gen, &lc->io, lc->rate, lc->secs, lc->drain, &lc->st);
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
		lc->rc = 0;
	}
	for (unsigned g = 0; g < m->n; g++) {
		int lrc = rte_eal_remote_launch(gm_worker, m->lc[g], m->lc[g]->lcore_id);

		if (lrc) {
			m->lc[g]->rc = lrc;
			rc = rc ? rc : lrc;
		}
	}
	/* the main lcore may share a CPU with a generator lcore (2 CPUs here; 16 for 8 + 8
	 * lcores and two main ones on the GPU host): sleep, do not spin (rte_eal_wait_lcore
	 * spins), until every lcore is back */
	for (unsigned g = 0; g < m->n; g++) {
		struct timespec nap = { 0, 1000 * 1000 };

		while (rte_eal_get_lcore_state(m->lc[g]->lcore_id) == RUNNING)
			nanosleep(&nap, NULL);
		rte_eal_wait_lcore(m->lc[g]->lcore_id);
		st[g] = m->lc[g]->st;
		cpu[g] = m->lc[g]->cpu;
		if (m->lc[g]->rc && !rc)
			rc = m->lc[g]->rc;
	}
	return rc;
}
