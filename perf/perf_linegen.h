/* SPDX-License-Identifier: Apache-2.0
 * perf_linegen.h — `tally-perf linegen` / tally-linegen's options (perf_linegen_opts.c),
 * read by the runs (perf_linegen.c). Private to those two programs.
 */
#ifndef PERF_LINEGEN_H
#define PERF_LINEGEN_H

struct lg_opts {
	double cap, lo, hi, trial_s, drain_s;
	unsigned ranks, keys, chunks, window, burst, sample, steps, trials, repair_us;
	unsigned sizes[8], nsizes;
	int json, io_forward;
	double leave_last_s; /* keep the port open until dut_pid exits (up to this long) */
	const char *ctl; /* the appliance's control socket (tally-linegen) */
	const char *transport, *host, *eal, *local_ip, *dpdk_port; /* tally-linegen only */
	unsigned port;
	int dut_pid; /* the appliance's pid: its lcores' CPU time (tally-linegen) */
	unsigned gen_lcores; /* 0: the main thread generates through the registry's port */
	unsigned dut_cores;  /* the appliance's datapath cores (--dut-cores, default 1) */
};

/* Parse argv into o, defaults filled in: 0, 1 (--help printed), or 2 (usage error, said). */
int lg_parse(int argc, char **argv, struct lg_opts *o);

#endif
