/* SPDX-License-Identifier: Apache-2.0
 * perf_gen_synth.h — a synthetic appliance for the generator's own checks (tests, --synthetic):
 * in process, behind the same struct pg_io as a real port. It decodes every PUSH (CRC
 * included), admits at most cap_pps of them (token bucket on the TSC; the rest are dropped,
 * as a saturated appliance's RX ring drops), sums each chunk's pushes of a round and, when
 * all ranks are in, queues one RESULT per rank. Faults on demand: a bad CRC on every Nth
 * chunk's first RESULT, a wrong sum (with a good CRC) in every Mth chunk.
 */
#ifndef PERF_GEN_SYNTH_H
#define PERF_GEN_SYNTH_H

#include <stdint.h>

#include "perf_gen.h"

struct ps_opts {
	double cap_pps;          /* pushes admitted per second (0: no limit) */
	unsigned depth;          /* pushes admitted at once after a pause (an RX ring's slots,
				  * 512): more than the generator's catch-up (4 bursts) */
	unsigned ranks, keys, chunks, chunk_bytes, window;
	uint32_t key_base;
	unsigned sums;           /* chunks whose RESULTs may wait to be received (>= 2) */
	uint64_t corrupt_every;  /* 0: never */
	uint64_t wrong_every;    /* 0: never */
};

struct ps_stats {
	uint64_t pushes, admitted, dropped_rate, dropped_queue, bad, chunks, results;
	uint64_t polls, busy_polls;
};

struct ps_target;

int ps_create(const struct ps_opts *o, struct ps_target **t);
void ps_free(struct ps_target *t);
/* Its port: tx delivers pushes to it, rx returns its RESULTs. */
void ps_io(struct ps_target *t, struct pg_io *io);
const struct ps_stats *ps_stats(const struct ps_target *t);
void ps_reset_stats(struct ps_target *t);
/* A new admission rate (a search step against a throttled target). */
void ps_set_cap(struct ps_target *t, double cap_pps);

#endif
