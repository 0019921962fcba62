/* SPDX-License-Identifier: Apache-2.0
 * worker_opts.h — tally-worker's command line: its options, usage text and parser
 * (worker_opts.c); the run itself is in tally_worker.c.
 */
#ifndef WORKER_OPTS_H
#define WORKER_OPTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tally_client.h"
#include "worker_data.h"
#include "worker_xport.h"

struct wk_opts {
	struct wx_opts x;
	uint32_t job_id;
	uint64_t token;
	uint32_t rank, world;
	uint32_t nkeys, key_base;
	size_t bytes;
	uint32_t chunk_bytes;
	uint32_t rounds;
	double seconds;      /* stop starting rounds after this long (0: run all rounds) */
	int blast;           /* forward baseline: blast PUSH frames, count what comes back */
	uint32_t blast_cores;
	uint32_t window;
	uint32_t join_ms, give_up_ms, rto_us, rto_min_us;
	uint64_t seed;
	enum tally_dtype dtype;
	enum wd_values values;
	int deterministic;
	int verify;
	int json;
	int linger;          /* after the report, stay attached until SIGTERM/SIGINT */
	int barrier;         /* all ranks meet before each round (default on) */
	uint32_t warmup;     /* untimed (verified) rounds before the timed ones */
	uint64_t incarnation; /* this launch of the job, in JOIN (0: none) */
	int events;          /* one JSON line on stderr per round done and session state
			      * change, CLOCK_MONOTONIC seconds (perf/faults_bench.py) */
	uint32_t probe_ms, dead_ms; /* the session's liveness settings (0: defaults) */
	const char *failover; /* appliances to move the job to when this one is down */
	const char *key_file; /* --key-file or $TALLY_AUTH_KEY_FILE: authenticated job */
};

void wk_usage(FILE *f);
/* Parse argv into o (defaults filled). 0, or -EINVAL after saying why on stderr. */
int wk_parse(int argc, char **argv, struct wk_opts *o);

#endif
