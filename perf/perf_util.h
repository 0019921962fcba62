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
/* Median of n doubles (sorts a copy). */
double perf_median(const double *v, size_t n);
/* Buffer of `bytes` aligned to 64, touched (faulted in); NULL on failure. free() it. */
void *perf_alloc(size_t bytes);
/* Parse "256K", "64M", "1G", "8192" (binary units); -EINVAL on junk. */
int perf_parse_size(const char *s, size_t *out);
/* One timed repetition moves at least this many source bytes (small buffers are looped over,
 * staying in cache) so clock resolution does not matter. */
#define PERF_MIN_BYTES_PER_REP (8u << 20)
/* How many passes over a buffer of `bytes` one repetition makes (>= 1). */
unsigned perf_inner_iters(size_t bytes);
/* memcpy rate of `bytes` from src to dst: median GB/s of source bytes over reps; each timed
 * block of perf_inner_iters(bytes) copies follows an untimed one (steady state). */
double perf_memcpy_gbps(void *dst, const void *src, size_t bytes, int reps);

#endif
