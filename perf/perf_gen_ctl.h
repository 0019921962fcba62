/* SPDX-License-Identifier: Apache-2.0
 * perf_gen_ctl.h — the appliance's side of a line-rate trial (issue 38): per datapath lcore
 * poll loops and the loops that found work, read from the appliance's control socket
 * (stats_get, as `tallyctl stats`) before and after a trial, so that the report can say
 * which side (generator or appliance) was busy. tally-linegen only (a real appliance).
 */
#ifndef PERF_GEN_CTL_H
#define PERF_GEN_CTL_H

#include <stdint.h>
#include <stdio.h>

#define GC_MAX_CORES 64

struct gc_snap {
	unsigned n;                    /* datapath cores */
	uint64_t loops[GC_MAX_CORES], busy[GC_MAX_CORES];
	uint64_t rx_pkts, tx_pkts, engine_rejects; /* totals */
	/* with the appliance's pid: CPU ticks (utime + stime) of its DPDK worker threads, in
	 * /proc's task order, and when they were read: a busy-polling lcore that gets its core
	 * runs 100% of the wall time; less is the OS running something else there */
	unsigned nthreads;
	uint64_t ticks[GC_MAX_CORES];
	double t;
};

/* stats_get over the unix socket at path (and, pid > 0, the worker threads' CPU time from
 * /proc/pid/task): 0, or negative errno with err saying why. */
int gc_snap(const char *path, int pid, struct gc_snap *s, char *err, size_t errlen);
/* Print, each name after prefix, "dut_busy":B,"dut_lcores":[{"core":i,"loops":L,"busy_loops":K,"busy":B},...],
 * "dut_rx_pkts":..,"dut_tx_pkts":..,"dut_engine_rejects":.., "dut_cpu":[C,...] for b - a
 * (B: the highest core's busy fraction; C: a worker thread's CPU seconds / wall seconds). */
void gc_print(FILE *f, const char *prefix, const struct gc_snap *a, const struct gc_snap *b);

#endif
