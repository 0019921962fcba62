/* SPDX-License-Identifier: Apache-2.0
 * perf_util.c — shared helpers of the tally-perf subcommands: clocks, the engine benches'
 * null transport, median, buffers, sizes, and the memcpy baseline every rate is compared with.
 */
#include "perf_util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static clockid_t perf_clock = CLOCK_MONOTONIC;

void perf_use_cpu_clock(int on)
{
	perf_clock = on ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
}

double perf_now(void)
{
	struct timespec ts;

	clock_gettime(perf_clock, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double perf_cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int perf_send_none(void *ctx, const struct tally_addr *to, const uint8_t *hdr,
		   const void *payload, size_t len)
{
	(void)ctx, (void)to, (void)hdr, (void)payload, (void)len;
	return 0;
}

uint64_t perf_now_ns(void *ctx)
{
	struct timespec ts;

	(void)ctx;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int perf_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double perf_median(const double *v, size_t n)
{
	double *c;
	double m;

	if (n == 0)
		return 0.0;
	c = malloc(n * sizeof(*c));
	if (!c)
		return 0.0;
	memcpy(c, v, n * sizeof(*c));
	qsort(c, n, sizeof(*c), perf_cmp_double);
	m = (n & 1) ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2.0;
	free(c);
	return m;
}

void *perf_alloc(size_t bytes)
{
	void *p;
	size_t sz = (bytes + 63) & ~(size_t)63; /* aligned_alloc wants a multiple */

	if (sz == 0)
		sz = 64;
	p = aligned_alloc(64, sz);
	if (!p)
		return NULL;
	/* fault every page in now, not inside a timed loop */
	memset(p, 0, sz);
	return p;
}

int perf_parse_size(const char *s, size_t *out)
{
	char *end;
	unsigned long long v, mul = 1;

	if (!s || !out || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case '\0': break;
	case 'k': case 'K': mul = 1ULL << 10; end++; break;
	case 'm': case 'M': mul = 1ULL << 20; end++; break;
	case 'g': case 'G': mul = 1ULL << 30; end++; break;
	default: return -EINVAL;
	}
	/* accept "64KiB"/"64KB" style suffixes too */
	if (mul != 1 && (*end == 'i' || *end == 'I'))
		end++;
	if (mul != 1 && (*end == 'b' || *end == 'B'))
		end++;
	if (*end != '\0')
		return -EINVAL;
	if (v > (unsigned long long)SIZE_MAX / mul)
		return -EINVAL;
	*out = (size_t)(v * mul);
	return 0;
}

unsigned perf_inner_iters(size_t bytes)
{
	size_t it = bytes ? PERF_MIN_BYTES_PER_REP / bytes : 1;

	return it < 1 ? 1 : it > 1000000 ? 1000000 : (unsigned)it;
}

double perf_memcpy_gbps(void *dst, const void *src, size_t bytes, int reps)
{
	double *r;
	double m;

	if (reps < 1 || bytes == 0)
		return 0.0;
	r = malloc((size_t)reps * sizeof(*r));
	if (!r)
		return 0.0;
	for (int i = 0; i < reps; i++) {
		unsigned it = perf_inner_iters(bytes);
		double t0;

		/* warm-up block: caches, TLB and prefetchers as in the steady state (measured: the
		 * first block after other work runs ~10% slower in cache); DRAM-sized copies have
		 * nothing to warm (pages are faulted in by perf_alloc) */
		for (unsigned j = 0; bytes <= PERF_WARM_MAX && j < it; j++) {
			memcpy(dst, src, bytes);
			__asm__ volatile("" : : "r"(dst) : "memory");
		}
		t0 = perf_now();

		for (unsigned j = 0; j < it; j++) {
			memcpy(dst, src, bytes);
			/* keep every copy observable so none can be dropped */
			__asm__ volatile("" : : "r"(dst) : "memory");
		}
		r[i] = (double)bytes * it / (perf_now() - t0) / 1e9;
	}
	m = perf_median(r, (size_t)reps);
	free(r);
	return m;
}
