/* SPDX-License-Identifier: Apache-2.0
 * perf_util.h — shared helpers of the tally-perf subcommands (timing, statistics, output).
 */
#ifndef PERF_UTIL_H
#define PERF_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Seconds: monotonic wall clock, or after perf_use_cpu_clock(1) this thread's CPU time (on a
 * machine shared with other jobs it leaves out the time other processes ran in our place). */
double perf_now(void);
void perf_use_cpu_clock(int on);
/* Seconds of this thread's CPU time, whatever perf_use_cpu_clock says: a rate per CPU second,
 * unaffected by time the thread spends descheduled on a shared machine. */
double perf_cpu_now(void);

/* The engine benches' transport (tally_xport_ops): a send that drops everything, and the
 * monotonic clock in ns. ctx is not used. */
struct tally_addr;
int perf_send_none(void *ctx, const struct tally_addr *to, const uint8_t *hdr,
		   const void *payload, size_t len);
uint64_t perf_now_ns(void *ctx);
/* Median of n doubles (sorts a copy). */
double perf_median(const double *v, size_t n);
/* Buffer of `bytes` aligned to 64, touched (faulted in); NULL on failure. free() it. */
void *perf_alloc(size_t bytes);
/* Parse "256K", "64M", "1G", "8192" (binary units); -EINVAL on junk. */
int perf_parse_size(const char *s, size_t *out);
/* One timed repetition moves at least this many source bytes (small buffers are looped over,
 * staying in cache) so clock resolution does not matter. */
#define PERF_MIN_BYTES_PER_REP (8u << 20)
/* Above this many bytes a buffer is DRAM-sized: timed blocks get no warm-up block. */
#define PERF_WARM_MAX (64u << 20)
/* How many passes over a buffer of `bytes` one repetition makes (>= 1). */
unsigned perf_inner_iters(size_t bytes);
/* memcpy rate of `bytes` from src to dst: median GB/s of source bytes over reps; each timed
 * block of perf_inner_iters(bytes) copies follows an untimed one (steady state). */
double perf_memcpy_gbps(void *dst, const void *src, size_t bytes, int reps);

#endif
