/* SPDX-License-Identifier: Apache-2.0
 * perf_gen_mc.h — tally-linegen --gen-lcores N (issue 38): N generator lcores against an
 * appliance of D datapath cores, each lcore with state of its own and a DPDK port of its
 * own, so that no lcore writes what another reads on the datapath (no locks, no rings).
 *
 * Topology (the one tallyd supports): tallyd polls each of its queues with one lcore, and
 * a memif client cannot have more queue pairs than its server, so every (port, queue) the
 * generator can own privately is one of tallyd's D. Generator lcore g therefore owns port g
 * (an instance of the registry's "dpdk" transport on the g-th ethdev of the EAL arguments,
 * e.g. the g-th net_memif client, with m queue pairs), which is tallyd's port g with
 * m = D / N queues (tallyd numbers cores port by port: port g's queue j is core g*m + j). Lcore g plays its own job (job id 1 + g, its own ranks) whose keys are owned by
 * port g's cores only (key id % D in g*m .. g*m+m-1, perf_gen.h key_group / key_stride),
 * and sends each push on the queue its key's core polls (the steering an rte_flow rule
 * does on a NIC), so tallyd dispatches nothing in software and every RESULT comes back on
 * port g. N > D: tallyd runs with --cores D and polls its port g (one queue) with core
 * g % D (tallyd deals its ports over its cores), so lcore g's keys are core g % D's
 * (key_base g % D, key_group 1, key_stride D) and several lcores feed one core, each on
 * its own port; tallyd still dispatches nothing. N neither dividing nor above D is refused.
 *
 * The main lcore coordinates: job setup on each port in turn, then every trial launches all
 * N lcores at once (rte_eal_remote_launch, each pg_run at rate / N) and waits for all
 * (rte_eal_wait_lcore). DPDK builds of tally-linegen only.
 */
#ifndef PERF_GEN_MC_H
#define PERF_GEN_MC_H

#include <stddef.h>
#include <stdint.h>

#include "perf_gen.h"
#include "perf_gen_port.h"

#define GM_MAX_LCORES 32

struct gm_opts {
	unsigned lcores;        /* N: generator lcores = EAL worker lcores used, ports */
	unsigned dut_cores;     /* D: the appliance's datapath cores, a multiple of N or < N */
	const char *eal;        /* EAL arguments: >= N worker lcores, N ports in order */
	const char *hosts;      /* comma list of N: port g's appliance address */
	const char *local_ips;  /* comma list of N: port g's own ADDR/LEN */
	uint16_t base_port;     /* the appliance's UDP base port (0: the default) */
	const char *prog;
};

struct gm;

/* EAL, N ports (m queue pairs each, a transmit pool per lcore on its NUMA node), the
 * appliance's MAC on each by ARP. 0, or a negative errno with err saying what to change. */
int gm_open(const struct gm_opts *o, struct gm **out, char *err, size_t errlen);
void gm_close(struct gm *m);
unsigned gm_lcores(const struct gm *m);
/* Lcore g's receive staging and setup (gp_setup) port, already attached to its queues. */
struct gp_port *gm_port(struct gm *m, unsigned g);
/* Lcore g's key layout: sets o->key_base (from base, a multiple of D), key_group, key_stride
 * and job_id; -EINVAL (err says) when o->keys cannot reach every core of port g. */
int gm_keys(const struct gm *m, unsigned g, struct pg_opts *o, uint32_t base, char *err,
	    size_t errlen);

/* One trial: lcore g runs pg_run(gens[g], rate / N, seconds, drain_s) into st[g]; cpu[g]
 * is its thread's CPU time / wall time. All start together; returns when all are done:
 * 0 or the first lcore's error. */
int gm_run(struct gm *m, struct pg_gen *const *gens, double rate, double seconds,
	   double drain_s, struct pg_stats *st, double *cpu);

#endif
