/* SPDX-License-Identifier: Apache-2.0
 * perf_gen.h — the line-rate generator's core (issue 38): one lcore plays many ranks of a
 * job. Every PUSH frame (header + payload) is built once per (rank, key, chunk); per send
 * only the round is rewritten (the payload does not change between rounds, so neither does
 * its CRC). Sends are paced by the TSC at a given rate, open loop: nothing is retransmitted,
 * a push the port refuses or a RESULT that never comes counts as missing when its round
 * leaves the window. RESULTs are consumed at full speed between sends: every RESULT's CRC is
 * checked (tally_proto_decode_split), one in sample_every is compared with the reference sum,
 * and push -> RESULT (per chunk and per rank) and whole-round latencies go to preallocated
 * histograms. The port is a pair of callbacks (struct pg_io): a DPDK port, or the synthetic
 * throttled appliance of perf_gen_synth.c. No allocation after pg_create().
 */
#ifndef PERF_GEN_H
#define PERF_GEN_H

#include <stdint.h>

#include "perf_hist.h"

#define PG_MIN_RANKS 1
#define PG_MAX_RANKS 1024
#define PG_MAX_BURST 256

/* One received frame: the 64-byte header and the payload (contiguous on a real port). */
struct pg_frame {
	const uint8_t *hdr;
	const uint8_t *payload;
	uint32_t hlen, plen;
};

struct pg_io {
	void *ctx;
	/* Send n frames of lens[i] bytes; how many the port took (the rest are lost). */
	unsigned (*tx)(void *ctx, const uint8_t *const *frames, const uint32_t *lens, unsigned n);
	/* Up to max received frames, valid until the next rx call. */
	unsigned (*rx)(void *ctx, struct pg_frame *f, unsigned max);
};

struct pg_opts {
	unsigned ranks;         /* ranks this lcore plays (the whole job here) */
	unsigned keys;
	unsigned chunks;        /* chunks per key */
	unsigned chunk_bytes;   /* f32 payload per push, a multiple of 4 */
	unsigned window;        /* rounds in flight before the oldest is retired (>= 2) */
	unsigned burst;         /* frames per tx call at most */
	unsigned sample_every;  /* compare 1 RESULT in N with the reference (1: all) */
	uint32_t job_id;
	uint64_t token;
	uint32_t key_base;      /* first key id */
	unsigned key_group;     /* 0: keys key_base .. key_base + keys - 1. Else key k is
				 * key_base + (k / key_group) * key_stride + k % key_group: an
				 * appliance with key_stride cores owns key id % key_stride, so
				 * key_base % key_stride .. + key_group - 1 are the cores this
				 * lcore's keys go to (the cores of its own port) */
	unsigned key_stride;
	int repair;             /* a real appliance: when a round leaves the window with chunks
				 * unanswered, re-send those chunks' pushes once (the engine
				 * keeps two rounds per chunk: a chunk never completed blocks its
				 * key); counted in retx. The RESULTs still count as missing.
				 * And the window closes: a new round waits for the oldest (the
				 * engine would refuse it); after repair_us the oldest's
				 * unanswered chunks are re-sent, then every 10 x repair_us (also
				 * while draining); it is never given up within a run. Pushes due
				 * meanwhile are held back (offered, not sent). */
	unsigned repair_us;     /* 0: 1000 */
	int echo;               /* the device is tallyd --io-forward: the answer to a push is
				 * the push itself, bounced (op PUSH, same header and payload), one
				 * per push as a RESULT is; the check compares it with the frame
				 * sent, and chunk latency is each push's own round trip */
};

struct pg_stats {
	double secs;             /* sending time */
	uint64_t offered;        /* pushes handed to the port */
	uint64_t tx_refused;     /* of those, refused by the port (full ring) */
	uint64_t results;        /* valid RESULTs matched to a push we sent */
	uint64_t expected, missing; /* RESULTs of retired rounds: expected, never came */
	uint64_t crc_bad, sum_bad, sum_checked, dup, stray;
	uint64_t rounds;         /* rounds retired */
	uint64_t retx;           /* pushes re-sent by repair (0 without it) */
	uint64_t held_back;      /* pushes due but not sent: the window was closed (repair mode;
				  * counted in offered, lost load of the device) */
	uint64_t polls, busy_polls; /* rx calls, and those that returned frames */
	uint64_t payload_bytes;  /* gradient bytes of the pushes whose RESULT came */
	struct ph_hist chunk_ns; /* a chunk's last push (the one that completes it) -> each
				  * RESULT: the appliance's (and port's) latency */
	struct ph_hist push_ns;  /* each rank's own push -> its RESULT: adds the wait for the
				  * other ranks' pushes, which the pacing spreads out */
	struct ph_hist round_ns; /* a round's first push -> its last RESULT (complete rounds) */
};

struct pg_gen;

/* Add src's counts and histograms into dst (lcores of one trial); secs add up too: divide
 * by the lcores for the trial's mean sending time. */
void pg_stats_add(struct pg_stats *dst, const struct pg_stats *src);

/* TSC ticks per second, measured once against CLOCK_MONOTONIC (about 20 ms). */
double pg_tsc_hz(void);
int pg_create(const struct pg_opts *o, struct pg_gen **g);
void pg_free(struct pg_gen *g);
/* The key id of the lcore's k-th key (key_base, key_group, key_stride), and the index of a
 * key id (-1: not one of o's keys). */
uint32_t pg_key(const struct pg_opts *o, unsigned k);
int pg_key_index(const struct pg_opts *o, uint32_t key);
/* The reference sum of one chunk (f32, elements of chunk_bytes / 4). */
const float *pg_reference(const struct pg_gen *g, unsigned key, unsigned chunk);
/* Offer pushes at `rate` per second (0: as fast as the port takes them) for `seconds`, then
 * drain RESULTs for `drain_s` and retire every round. Stats are reset first. Rounds go on
 * from the previous run (the appliance sees ever-new rounds). 0 or -EINVAL. */
int pg_run(struct pg_gen *g, const struct pg_io *io, double rate, double seconds,
	   double drain_s, struct pg_stats *st);

#endif
