/* SPDX-License-Identifier: Apache-2.0
 * perf_linegen_opts.c — `tally-perf linegen` / tally-linegen's options: usage, parsing and
 * the checks between them (perf_linegen.h).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf_gen.h"
#include "perf_linegen.h"

static int lg_check(struct lg_opts *o, const char *sizes);

static void lg_usage(FILE *f)
{
	fprintf(f,
		"usage: tally-perf linegen --synthetic-cap PPS [options]\n"
		"  NDR/PDR search of the line-rate generator (one lcore, many ranks) against the\n"
		"  synthetic appliance admitting PPS pushes/s; latency at the found rates.\n"
		"  --chunk-kib LIST   chunk sizes (default 1,4,8)\n"
		"  --ranks N          ranks this lcore plays (default 32)\n"
		"  --keys N           keys (default 4), --chunks N chunks per key (default 4)\n"
		"  --trial-s S        seconds per trial (default 0.5), --trials N (default 3)\n"
		"  --steps N          bisection steps (default 8)\n"
		"  --lo PPS --hi PPS  search bounds (default cap/100, 4 x cap)\n"
		"  --json             one JSON line per chunk size\n"
#ifdef LG_PORT
		"  --transport NAME --host IP --port P [--eal ARGS --local-ip A/N]: a real\n"
		"                     appliance instead (udp: tally-udpd, dpdk: tallyd)\n"
		"  --io-forward       the appliance is tallyd --io-forward: no JOIN/REGISTER, each\n"
		"                     push's answer is the push bounced (the I/O twin)\n"
		"  --ctl-socket PATH  the appliance's control socket: its lcores' busy polls / all\n"
		"                     polls around the reported trials\n"
		"  --dut-pid PID      the appliance's pid (same host): its DPDK worker threads' CPU\n"
		"                     time / wall time around the reported trials\n"
		"  --leave-last S     after the runs, keep the port open until the --dut-pid\n"
		"                     process exits (up to S seconds), so the appliance leaves\n"
		"                     first: DPDK 22.11's memif unmaps its rings under a peer\n"
		"                     lcore still polling them (tallyd segfaulted when we left)\n"
		"  --drain-s S        after a trial, wait up to S for its last rounds (0.05; with\n"
		"                     --transport 3: a round left open puts its keys out of step)\n"
		"  --repair-us US     re-send a closed window's unanswered chunks after US (1000):\n"
		"                     above the round trip, or re-sends are spurious (and fail NDR)\n"
#endif
#ifdef LG_MC
		"  --gen-lcores N     N generator lcores (EAL worker lcores), each on its own port\n"
		"                     (N --vdev in --eal, in order) playing its own job of --ranks\n"
		"                     ranks; --host and --local-ip: comma lists of N; each trial\n"
		"                     runs all N at rate / N, figures summed (perf_gen_mc.h)\n"
		"  --dut-cores D      the appliance's datapath cores (default 1), a multiple of N:\n"
		"                     port g is its port g with D / N queues; keys go to every core;\n"
		"                     or below N: tallyd --cores D polls port g with core g %% D\n"
#endif
		);
}

int lg_parse(int argc, char **argv, struct lg_opts *o)
{
	static const struct option lo[] = {
		{ "synthetic-cap", 1, 0, 'c' }, { "chunk-kib", 1, 0, 'k' }, { "ranks", 1, 0, 'r' },
		{ "keys", 1, 0, 'K' }, { "chunks", 1, 0, 'C' }, { "trial-s", 1, 0, 's' },
		{ "trials", 1, 0, 't' }, { "steps", 1, 0, 'S' }, { "lo", 1, 0, 'l' },
		{ "hi", 1, 0, 'h' }, { "json", 0, 0, 'j' }, { "help", 0, 0, 'H' },
		{ "transport", 1, 0, 'T' }, { "host", 1, 0, 'A' }, { "port", 1, 0, 'P' },
		{ "eal", 1, 0, 'E' }, { "local-ip", 1, 0, 'L' }, { "dpdk-port", 1, 0, 'D' },
		{ "io-forward", 0, 0, 'F' }, { "ctl-socket", 1, 0, 'X' },
		{ "repair-us", 1, 0, 'R' }, { "dut-pid", 1, 0, 'p' },
		{ "drain-s", 1, 0, 'd' }, { "leave-last", 1, 0, 'W' },
		{ "gen-lcores", 1, 0, 'G' }, { "dut-cores", 1, 0, 'U' }, { 0, 0, 0, 0 }
	};
	const char *sizes = "1,4,8";
	int c;

	*o = (struct lg_opts){ .ranks = 32, .keys = 4, .chunks = 4, .window = 16, .burst = 32,
			       .sample = 16, .steps = 8, .trials = 3, .trial_s = 0.5,
			       .drain_s = -1 };
	optind = 1;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'c': o->cap = atof(optarg); break;
		case 'k': sizes = optarg; break;
		case 'r': o->ranks = (unsigned)atoi(optarg); break;
		case 'K': o->keys = (unsigned)atoi(optarg); break;
		case 'C': o->chunks = (unsigned)atoi(optarg); break;
		case 's': o->trial_s = atof(optarg); break;
		case 't': o->trials = (unsigned)atoi(optarg); break;
		case 'S': o->steps = (unsigned)atoi(optarg); break;
		case 'l': o->lo = atof(optarg); break;
		case 'h': o->hi = atof(optarg); break;
		case 'j': o->json = 1; break;
		case 'H': lg_usage(stdout); return 1;
		case 'T': o->transport = optarg; break;
		case 'A': o->host = optarg; break;
		case 'P': o->port = (unsigned)atoi(optarg); break;
		case 'E': o->eal = optarg; break;
		case 'L': o->local_ip = optarg; break;
		case 'D': o->dpdk_port = optarg; break;
		case 'F': o->io_forward = 1; break;
		case 'X': o->ctl = optarg; break;
		case 'd': o->drain_s = atof(optarg); break;
		case 'p': o->dut_pid = atoi(optarg); break;
		case 'W': o->leave_last_s = atof(optarg); break;
		case 'R': o->repair_us = (unsigned)atoi(optarg); break;
		case 'G': o->gen_lcores = (unsigned)atoi(optarg); break;
		case 'U': o->dut_cores = (unsigned)atoi(optarg); break;
		default: lg_usage(stderr); return 2;
		}
	}
	return lg_check(o, sizes);
}

/* What lg_parse read: consistent, defaults filled in; 0 or 2 (usage, said why). */
static int lg_check(struct lg_opts *o, const char *sizes)
{
#ifdef LG_PORT
	if (o->transport && o->cap <= 0)
		o->cap = 1e6; /* only the default search bounds come from it */
	if (o->transport && !o->host) {
		fprintf(stderr, "tally-linegen: --transport needs --host (the appliance)\n");
		return 2;
	}
	if (o->leave_last_s > 0 && o->dut_pid <= 0) {
		fprintf(stderr, "tally-linegen: --leave-last needs --dut-pid (the appliance to outlast)\n");
		return 2;
	}
	if ((o->io_forward || o->ctl) && !o->transport) {
		fprintf(stderr, "tally-linegen: --io-forward and --ctl-socket need --transport\n");
		return 2;
	}
	if (!o->dut_cores)
		o->dut_cores = 1;
	if (o->dut_cores > 1 && !o->gen_lcores)
		o->gen_lcores = 1; /* the appliance's queues: only the lcores' ports have several */
#ifdef LG_MC
	if (o->gen_lcores && (!o->transport || strcmp(o->transport, "dpdk"))) {
		fprintf(stderr, "tally-linegen: --gen-lcores and --dut-cores need --transport dpdk\n");
		return 2;
	}
#else
	if (o->gen_lcores) {
		fprintf(stderr, "tally-linegen: --gen-lcores and --dut-cores: this build has no DPDK\n");
		return 2;
	}
#endif
#else
	if (o->transport || o->io_forward || o->ctl || o->gen_lcores || o->dut_cores) {
		fprintf(stderr, "tally-perf linegen: --transport, --io-forward, --ctl-socket, "
			"--gen-lcores, --dut-cores: use "
			"tally-linegen (a real port)\n");
		return 2;
	}
#endif
	if (o->cap <= 0) {
		fprintf(stderr, "tally-perf linegen: give --synthetic-cap PPS (> 0); a real appliance: "
			"tally-linegen --transport (perf/linegen_memif.sh)\n");
		return 2;
	}
	for (char *p = (char *)sizes; *p && o->nsizes < 8;) {
		char *e;
		unsigned long v = strtoul(p, &e, 10);

		if (e == p || !v || v * 1024 > 8192 || (*e && *e != ',')) {
			fprintf(stderr, "tally-perf linegen: --chunk-kib: 1..8 KiB, comma list\n");
			return 2;
		}
		o->sizes[o->nsizes++] = (unsigned)v * 1024;
		p = *e ? e + 1 : e;
	}
	if (o->ranks < 1 || o->ranks > PG_MAX_RANKS || !o->keys || !o->chunks || !o->trials ||
	    o->trial_s <= 0) {
		fprintf(stderr, "tally-perf linegen: --ranks 1..%u, --keys, --chunks, --trials >= 1, "
			"--trial-s > 0\n", PG_MAX_RANKS);
		return 2;
	}
	if (o->drain_s < 0) /* the drain ends once every round is in: long costs nothing then */
		o->drain_s = o->transport ? 3.0 : 0.05;
	if (o->lo <= 0)
		o->lo = o->cap / 100;
	if (o->hi <= 0)
		o->hi = 4 * o->cap;
	if (o->hi < o->lo) {
		fprintf(stderr, "tally-perf linegen: --lo %.0f above --hi %.0f\n", o->lo, o->hi);
		return 2;
	}
	return 0;
}
