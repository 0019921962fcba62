/* SPDX-License-Identifier: Apache-2.0
 * perf_sum.c — `tally-perf sum`: reducer rates against memcpy of the same bytes, measured in
 * the same run (repetitions interleaved: memcpy, +=, k-way, memcpy, ...), medians reported.
 *
 * For each dtype, size and ways K (n = size / 4 elements: size is the f32 accumulator's bytes, so
 * every dtype runs the same element count; a 16-bit source buffer is size / 2 bytes):
 *   op "acc":  the f32 accumulator += source, K-1 times (K-1 sources, K-1 passes over dst) —
 *              what the engine does with one push at a time; K = 2 is plain dst += src;
 *   op "kway": dst = src[0] + ... + src[K-1] into a fresh f32 dst, one pass.
 * Rates: GB/s of source bytes consumed, G source elements/s, and traffic (bytes read +
 * written, the accumulator's read counted for "acc"); memcpy of `size` bytes moves 2*size.
 * Baseline (f32, i32): the same op as plain C loops built with other flags (perf_sum_base.h),
 * timed in the same repetitions (order swapped every other one); vsbase = ours / baseline.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xmmintrin.h>

#include "perf_cmds.h"
#include "perf_sum_base.h"
#include "perf_util.h"
#include "tally_sum.h"

#define PSUM_MAX_DT 4
#define PSUM_MAX_SIZES 8
#define PSUM_MAX_WAYS_ARGS 8

struct psum_opts {
	int dts[PSUM_MAX_DT], ndt;
	size_t sizes[PSUM_MAX_SIZES];
	int nsizes;
	unsigned ways[PSUM_MAX_WAYS_ARGS];
	int nways;
	int reps; /* 0: by size */
	int json;
	int isa_forced;
	int wall;
	int ftz; /* measure as a caller with FTZ and DAZ set in MXCSR */
	int onebit; /* the 1-bit compression reducers instead of the dtype table */
	const struct psb_ops *base; /* baseline loops; NULL: none */
};

/* One measured line. */
struct psum_res {
	const char *op;
	int dt;
	unsigned ways;
	size_t size, n;
	int reps;
	double gbps, gelems, traffic, mgbps;
	double bgbps; /* baseline GB/s; 0: not measured */
};

static void psum_usage(FILE *f)
{
	fprintf(f,
		"usage: tally-perf sum [--dtype f32|f16|bf16|i32] [--ways K] [--size BYTES] [--reps N]\n"
		"                      [--isa auto|scalar|avx2|avx512] [--baseline avx2|native|none]\n"
		"                      [--wall] [--ftz] [--onebit] [--json]\n"
		"  Reducer rates vs memcpy of the same bytes, measured in one run (medians).\n"
		"  --dtype, --ways, --size may be repeated; defaults: f32 f16 bf16, 2 and 4 ways,\n"
		"  256K (cache) and 256M (DRAM). BYTES: the f32 accumulator, n = BYTES/4 elements for\n"
		"  every dtype (a 16-bit source is BYTES/2); K, M, G suffixes are binary.\n"
		"  K: 2..%d. --reps: 1..1000 (default 15 for sizes up to 8M, 5 above).\n"
		"  --isa forces a reducer path (default: TALLY_ISA, or auto: the best this CPU has,\n"
		"  kernels picked by size as tally_sum.h says).\n"
		"  Time is this thread's CPU time (robust when other jobs share the cores);\n"
		"  --wall times with the wall clock instead.\n"
		"  --ftz: measure as a caller that set FTZ and DAZ in MXCSR (the reducers run under the\n"
		"  default MXCSR whatever the caller set: this times switching it).\n"
		"  --onebit: the 1-bit compression reducers instead (per --size: f32 +=, sign pack,\n"
		"  unpack, unpack-accumulate, compress with error feedback), elements/s and the\n"
		"  ratio to the f32 += element rate of the same run; --dtype and --ways do not apply.\n"
		"  --baseline: f32 and i32 ops also as plain C loops (dst[i] += src[i]; s0[i] + s1[i]\n"
		"  + ...) built with -O3 -mavx2 -mfma (avx2, the default) or -O3 -ffast-math\n"
		"  -march=native (native: the build host's CPU), timed in the same repetitions;\n"
		"  vsbase = our rate / the baseline's.\n",
		TALLY_SUM_MAX_WAYS);
}

/* The baselines this build has; avx2 only where the CPU runs it. */
static const struct psb_ops *psum_base_default(void)
{
#ifdef PSB_HAVE_AVX2
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		return &psb_ops_avx2;
#endif
	return NULL;
}

static int psum_base_parse(const char *v, const struct psb_ops **out)
{
	if (!strcmp(v, "none")) {
		*out = NULL;
		return 0;
	}
#ifdef PSB_HAVE_AVX2
	if (!strcmp(v, "avx2") && psum_base_default()) {
		*out = &psb_ops_avx2;
		return 0;
	}
#endif
#ifdef PSB_HAVE_NATIVE
	if (!strcmp(v, "native")) { /* built for the build host: run it there */
		*out = &psb_ops_native;
		return 0;
	}
#endif
	return -EINVAL;
}

static int psum_bad(const char *fmt, const char *arg)
{
	fprintf(stderr, "tally-perf sum: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n");
	psum_usage(stderr);
	return 2;
}

static int psum_parse(int argc, char **argv, struct psum_opts *o)
{
	o->ndt = o->nsizes = o->nways = o->reps = o->json = o->isa_forced = o->wall = o->ftz = 0;
	o->onebit = 0;
	o->base = psum_base_default();
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			psum_usage(stdout);
			return 1;
		}
		if (!strcmp(a, "--json")) {
			o->json = 1;
			continue;
		}
		if (!strcmp(a, "--wall")) {
			o->wall = 1;
			continue;
		}
		if (!strcmp(a, "--ftz")) {
			o->ftz = 1;
			continue;
		}
		if (!strcmp(a, "--onebit")) {
			o->onebit = 1;
			continue;
		}
		if (strcmp(a, "--dtype") && strcmp(a, "--ways") && strcmp(a, "--size") &&
		    strcmp(a, "--reps") && strcmp(a, "--isa") && strcmp(a, "--baseline"))
			return psum_bad("unknown option '%s'", a);
		if (!v)
			return psum_bad("%s needs a value", a);
		i++;
		if (!strcmp(a, "--dtype")) {
			int dt = tally_dtype_parse(v);

			if (dt < 0)
				return psum_bad("unknown dtype '%s' (f32, f16, bf16, i32)", v);
			if (o->ndt == PSUM_MAX_DT)
				return psum_bad("too many --dtype (%s)", v);
			o->dts[o->ndt++] = dt;
		} else if (!strcmp(a, "--ways")) {
			char *end;
			unsigned long k = strtoul(v, &end, 10);

			if (*v < '0' || *v > '9' || *end || k < 2 || k > TALLY_SUM_MAX_WAYS)
				return psum_bad("--ways '%s': want an integer 2..64", v);
			if (o->nways == PSUM_MAX_WAYS_ARGS)
				return psum_bad("too many --ways (%s)", v);
			o->ways[o->nways++] = (unsigned)k;
		} else if (!strcmp(a, "--size")) {
			size_t sz;

			if (perf_parse_size(v, &sz) < 0 || sz < 64 || sz > (8ULL << 30))
				return psum_bad("--size '%s': want 64 .. 8G bytes (e.g. 262144, 256K, 64M)", v);
			if (o->nsizes == PSUM_MAX_SIZES)
				return psum_bad("too many --size (%s)", v);
			o->sizes[o->nsizes++] = sz;
		} else if (!strcmp(a, "--reps")) {
			char *end;
			long r = strtol(v, &end, 10);

			if (*v < '0' || *v > '9' || *end || r < 1 || r > 1000)
				return psum_bad("--reps '%s': want an integer 1..1000", v);
			o->reps = (int)r;
		} else if (!strcmp(a, "--baseline")) {
			if (psum_base_parse(v, &o->base) < 0)
				return psum_bad("--baseline '%s': want avx2, native or none (as built)", v);
		} else {
			int isa = -1;

			for (int j = 0; j < TALLY_ISA_COUNT; j++)
				if (!strcmp(v, tally_sum_isa_name((enum tally_isa)j)))
					isa = j;
			if (!strcmp(v, "auto")) {
				tally_sum_set_auto();
				o->isa_forced = 1;
				continue;
			}
			if (isa < 0)
				return psum_bad("unknown --isa '%s' (auto, scalar, avx2, avx512)", v);
			if (tally_sum_set_isa((enum tally_isa)isa) < 0)
				return psum_bad("--isa %s: this CPU (or build) lacks it", v);
			o->isa_forced = 1;
		}
	}
	if (!o->ndt) {
		o->dts[0] = TALLY_DT_F32, o->dts[1] = TALLY_DT_F16, o->dts[2] = TALLY_DT_BF16;
		o->ndt = 3;
	}
	if (!o->nsizes) {
		o->sizes[0] = 256u << 10, o->sizes[1] = 256u << 20;
		o->nsizes = 2;
	}
	if (!o->nways) {
		o->ways[0] = 2, o->ways[1] = 4;
		o->nways = 2;
	}
	return 0;
}

/* Source j: ordinary values in [-1, 1) / (j + 1) of the dtype, no NaN or subnormal to skew
 * timings. Random f32 values are generated once into `tmp` (n floats) and converted with the
 * reducers themselves, so filling 1 GiB takes a moment, not seconds. */
static void psum_fill(int dt, void *const *src, unsigned k, size_t n, float *tmp)
{
	uint64_t seed = 0x9e3779b97f4a7c15ULL;

	for (size_t i = 0; i < n; i++) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		tmp[i] = (float)((int32_t)(seed >> 32)) * 0x1p-31f;
	}
	for (unsigned j = 0; j < k; j++) {
		float sc = 1.0f / (float)(j + 1);

		switch (dt) {
		case TALLY_DT_F16: tally_sum_f32_to_f16(src[j], tmp, n, sc); break;
		case TALLY_DT_BF16: tally_sum_f32_to_bf16(src[j], tmp, n, sc); break;
		case TALLY_DT_I32:
			for (size_t i = 0; i < n; i++)
				((int32_t *)src[j])[i] = (int32_t)(tmp[i] * 1e6f) + (int32_t)j;
			break;
		default: tally_sum_f32_scale(src[j], tmp, n, sc); break;
		}
	}
}

/* Buffers for one (size, ways): sources (size bytes: room for f32), the f32 dst, and the
 * memcpy target. Allocated for the widest case and reused across dtypes. */
struct psum_bufs {
	void *src[TALLY_SUM_MAX_WAYS];
	void *dst, *mdst;
	unsigned k;
};

static void psum_free(struct psum_bufs *b)
{
	for (unsigned j = 0; j < b->k; j++)
		free(b->src[j]);
	free(b->dst);
	free(b->mdst);
	memset(b, 0, sizeof(*b));
}

static int psum_alloc(struct psum_bufs *b, size_t size, unsigned k)
{
	memset(b, 0, sizeof(*b));
	for (; b->k < k; b->k++)
		if (!(b->src[b->k] = perf_alloc(size)))
			goto fail;
	b->dst = perf_alloc(size);
	b->mdst = perf_alloc(size);
	if (!b->dst || !b->mdst)
		goto fail;
	return 0;
fail:
	psum_free(b);
	return -ENOMEM;
}

/* One op over the buffers: ours (base NULL) or the baseline's plain loop (f32, i32). */
static void psum_run_op(int dt, int kway, const struct psb_ops *base, struct psum_bufs *b,
			unsigned k, size_t n)
{
	if (base && kway) {
		if (dt == TALLY_DT_I32)
			base->i32_kway(b->dst, (const int32_t *const *)b->src, k, n);
		else
			base->f32_kway(b->dst, (const float *const *)b->src, k, n);
	} else if (base) {
		for (unsigned j = 0; j + 1 < k; j++) {
			if (dt == TALLY_DT_I32)
				base->i32_acc(b->dst, b->src[j], n);
			else
				base->f32_acc(b->dst, b->src[j], n);
		}
	} else if (kway) {
		tally_sum_kway((enum tally_dtype)dt, b->dst, (const void *const *)b->src, k, n);
	} else {
		for (unsigned j = 0; j + 1 < k; j++)
			tally_sum_acc((enum tally_dtype)dt, b->dst, b->src[j], n);
	}
	__asm__ volatile("" : : "r"(b->dst) : "memory");
}

static void psum_print(const struct psum_opts *o, const struct psum_res *r, double vs_f32)
{
	double mtraffic = 2 * r->mgbps;

	if (o->json) {
		printf("{\"op\":\"%s\",\"dtype\":\"%s\",\"ways\":%u,\"size\":%zu,\"n\":%zu,\"isa\":\"%s\","
		       "\"reps\":%d,\"gbps\":%.3f,\"gelems\":%.4f,\"traffic_gbps\":%.3f,"
		       "\"memcpy_gbps\":%.3f,\"memcpy_traffic_gbps\":%.3f,\"ratio\":%.4f,"
		       "\"traffic_ratio\":%.4f,\"clock\":\"%s\",\"ftz\":%s,\"auto\":%s",
		       r->op, tally_dtype_name((enum tally_dtype)r->dt), r->ways, r->size, r->n,
		       tally_sum_isa_name(tally_sum_isa()), r->reps, r->gbps, r->gelems, r->traffic,
		       r->mgbps, mtraffic, r->gbps / r->mgbps, r->traffic / mtraffic, o->wall ? "wall" : "cpu",
		       o->ftz ? "true" : "false", tally_sum_is_auto() ? "true" : "false");
		if (vs_f32 > 0)
			printf(",\"gelems_vs_f32\":%.4f", vs_f32);
		if (r->bgbps > 0)
			printf(",\"baseline\":\"%s\",\"baseline_gbps\":%.3f,\"vs_baseline\":%.4f",
			       o->base->name, r->bgbps, r->gbps / r->bgbps);
		printf("}\n");
	} else {
		char vs[16] = "-", bg[16] = "-", vb[16] = "-";

		if (vs_f32 > 0)
			snprintf(vs, sizeof(vs), "%.2f", vs_f32);
		if (r->bgbps > 0) {
			snprintf(bg, sizeof(bg), "%.2f", r->bgbps);
			snprintf(vb, sizeof(vb), "%.3f", r->gbps / r->bgbps);
		}
		printf("%-5s %-4s %4u %10zu %8.2f %8.3f %8.2f %8.2f %8.2f %6.3f %6.3f %6s %8s %6s\n",
		       r->op, tally_dtype_name((enum tally_dtype)r->dt), r->ways, r->size, r->gbps,
		       r->gelems, r->traffic, r->mgbps, mtraffic, r->gbps / r->mgbps,
		       r->traffic / mtraffic, vs, bg, vb);
	}
	fflush(stdout);
}

/* One timed block of `it` runs of an op (after an untimed one in cache, as perf_memcpy_gbps
 * does); GB/s of source bytes. An "acc" op first reloads the accumulator (untimed) so it
 * stays ordinary numbers. */
static double psum_time_op(int dt, int kway, const struct psb_ops *base, struct psum_bufs *b,
			   unsigned k, size_t size, unsigned it)
{
	const size_t n = size / 4, sb = n * tally_dtype_size((enum tally_dtype)dt);
	double t0;

	if (!kway)
		tally_sum_load((enum tally_dtype)dt, b->dst, b->src[k - 1], n);
	for (unsigned i = 0; size <= PERF_WARM_MAX && i < it; i++)
		psum_run_op(dt, kway, base, b, k, n);
	t0 = perf_now();
	for (unsigned i = 0; i < it; i++)
		psum_run_op(dt, kway, base, b, k, n);
	return (double)(kway ? k : k - 1) * sb * it / (perf_now() - t0) / 1e9;
}

/* Measure acc and kway of one dtype, ours and the baseline's; memcpy interleaved rep by rep,
 * ours and the baseline's in swapped order every other rep. g[op][rep]: op 0 acc, 1 kway,
 * 2 baseline acc, 3 baseline kway. */
static int psum_measure(int dt, size_t size, unsigned k, int reps, struct psum_bufs *b,
			const struct psb_ops *base, struct psum_res out[2])
{
	const size_t es = tally_dtype_size((enum tally_dtype)dt), n = size / 4, sb = n * es;
	const size_t db = n * 4; /* accumulator bytes */
	const int nop = base ? 4 : 2;
	double *mc = calloc((size_t)reps, sizeof(double)), *g = calloc((size_t)reps * 4, sizeof(double));
	unsigned it[2] = { perf_inner_iters((k - 1) * sb), perf_inner_iters(k * sb) };

	if (!mc || !g) {
		free(mc), free(g);
		return -ENOMEM;
	}
	psum_fill(dt, b->src, k, n, b->dst);
	for (int op = 0; op < nop; op++) /* warm-up: pages, caches, branch predictors */
		psum_time_op(dt, op & 1, op >= 2 ? base : NULL, b, k, size, 1);
	for (int r = 0; r < reps; r++) {
		mc[r] = perf_memcpy_gbps(b->mdst, b->src[0], sb, 1);
		for (int j = 0; j < nop; j++) {
			int op = (r & 1) && base ? j ^ 2 : j; /* odd reps: baseline first */

			g[op * reps + r] = psum_time_op(dt, op & 1, op >= 2 ? base : NULL, b, k, size,
							it[op & 1]);
		}
	}
	for (int i = 0; i < 2; i++) {
		struct psum_res *x = &out[i];
		double gm = perf_median(g + i * reps, (size_t)reps);
		double src_bytes = i ? (double)k * sb : (double)(k - 1) * sb;
		double traffic_bytes = i ? (double)k * sb + db : (double)(k - 1) * (sb + 2.0 * db);

		x->op = i ? "kway" : "acc";
		x->dt = dt;
		x->ways = k;
		x->size = size;
		x->n = n;
		x->reps = reps;
		x->gbps = gm;
		x->gelems = gm / (double)es;
		x->traffic = gm * traffic_bytes / src_bytes;
		x->mgbps = perf_median(mc, (size_t)reps);
		x->bgbps = base ? perf_median(g + (i + 2) * reps, (size_t)reps) : 0;
	}
	free(mc), free(g);
	return 0;
}

/* ---- --onebit: the 1-bit compression reducers vs f32 += of the same n, one run ---- */
enum { PSOB_ACC, PSOB_PACK, PSOB_UNPACK, PSOB_UNPACK_ACC, PSOB_COMPRESS, PSOB_COUNT };
static const char *const psob_names[PSOB_COUNT] = {
	"f32_acc", "sign_pack", "sign_unpack", "sign_unpack_acc", "onebit_compress",
};

struct psob_bufs {
	float *dst, *src, *err;
	uint8_t *bits;
};

static void psob_run(int op, struct psob_bufs *b, size_t n)
{
	switch (op) {
	case PSOB_ACC: tally_sum_f32_acc(b->dst, b->src, n); break;
	case PSOB_PACK: tally_sum_sign_pack(b->bits, b->src, n); break;
	case PSOB_UNPACK: tally_sum_sign_unpack(b->dst, b->bits, n, 0.25f); break;
	case PSOB_UNPACK_ACC: tally_sum_sign_unpack_acc(b->dst, b->bits, n, 0x1p-20f); break;
	default: tally_sum_onebit_compress(b->bits, b->err, b->src, n); break;
	}
	__asm__ volatile("" : : "r"(b->dst), "r"(b->bits) : "memory");
}

/* Median G elements/s of every op over reps; the ops interleaved rep by rep. */
static int psob_measure(size_t size, int reps, struct psob_bufs *b, double out[PSOB_COUNT])
{
	const size_t n = size / 4;
	const unsigned it = perf_inner_iters(size);
	double *r = calloc((size_t)reps * PSOB_COUNT, sizeof(double));

	if (!r)
		return -ENOMEM;
	psum_fill(TALLY_DT_F32, (void *const *)&b->src, 1, n, b->dst);
	memset(b->err, 0, size);
	tally_sum_sign_pack(b->bits, b->src, n);
	for (int op = 0; op < PSOB_COUNT; op++)
		psob_run(op, b, n); /* warm-up */
	for (int rep = 0; rep < reps; rep++) {
		memcpy(b->dst, b->src, size); /* the accumulator stays ordinary numbers */
		for (int op = 0; op < PSOB_COUNT; op++) {
			double t0;

			for (unsigned i = 0; size <= PERF_WARM_MAX && i < it; i++)
				psob_run(op, b, n);
			t0 = perf_now();
			for (unsigned i = 0; i < it; i++)
				psob_run(op, b, n);
			r[op * reps + rep] = (double)n * it / (perf_now() - t0) / 1e9;
		}
	}
	for (int op = 0; op < PSOB_COUNT; op++)
		out[op] = perf_median(r + op * reps, (size_t)reps);
	free(r);
	return 0;
}

static void psob_print(const struct psum_opts *o, size_t size, int reps, const double g[PSOB_COUNT])
{
	for (int op = 0; op < PSOB_COUNT; op++) {
		if (o->json)
			printf("{\"op\":\"%s\",\"dtype\":\"f32\",\"size\":%zu,\"n\":%zu,\"isa\":\"%s\","
			       "\"reps\":%d,\"gelems\":%.4f,\"f32_acc_gelems\":%.4f,\"vs_f32_acc\":%.4f,"
			       "\"clock\":\"%s\",\"ftz\":%s}\n",
			       psob_names[op], size, size / 4, tally_sum_isa_name(tally_sum_isa()), reps,
			       g[op], g[PSOB_ACC], g[op] / g[PSOB_ACC], o->wall ? "wall" : "cpu",
			       o->ftz ? "true" : "false");
		else
			printf("%-16s %10zu %10zu %9.3f %9.3f\n", psob_names[op], size, size / 4, g[op],
			       g[op] / g[PSOB_ACC]);
	}
	fflush(stdout);
}

static int psob_main(const struct psum_opts *o)
{
	if (!o->json) {
		printf("1-bit: G elements/s; vs_acc = rate / f32 += rate (dst += src, same n, same run)\n");
		printf("%-16s %10s %10s %9s %9s\n", "op", "size", "n", "Gelem/s", "vs_acc");
	}
	for (int si = 0; si < o->nsizes; si++) {
		const size_t size = o->sizes[si];
		int reps = o->reps ? o->reps : size <= (8u << 20) ? 15 : 5;
		struct psob_bufs b = { perf_alloc(size), perf_alloc(size), perf_alloc(size),
				       perf_alloc(size / 32 + 64) };
		double g[PSOB_COUNT];
		int rc = b.dst && b.src && b.err && b.bits ? psob_measure(size, reps, &b, g) : -ENOMEM;

		if (rc == 0)
			psob_print(o, size, reps, g);
		free(b.dst), free(b.src), free(b.err), free(b.bits);
		if (rc < 0) {
			fprintf(stderr, "tally-perf sum: out of memory (4 x %zu bytes)\n", size);
			return 1;
		}
	}
	return 0;
}

int perf_sum_main(int argc, char **argv)
{
	struct psum_opts o;
	int rc = psum_parse(argc, argv, &o);

	if (rc)
		return rc == 1 ? 0 : rc;
	perf_use_cpu_clock(!o.wall);
	if (o.ftz) /* FTZ (bit 15) and DAZ (bit 6); this thread runs every measurement */
		_mm_setcsr(_mm_getcsr() | 0x8040u);
	if (!o.isa_forced && (rc = tally_sum_init()) < 0) {
		fprintf(stderr, "tally-perf sum: TALLY_ISA='%s' %s\n", getenv("TALLY_ISA"),
			rc == -ENOTSUP ? "is not supported by this CPU" : "is unknown (scalar, avx2, avx512)");
		return 2;
	}
	if (o.onebit) {
		if (!o.json)
			printf("tally-perf sum: isa %s; medians of %s-time rates; size = f32 bytes (n = size/4)%s\n",
			       tally_sum_isa_name(tally_sum_isa()), o.wall ? "wall" : "CPU",
			       o.ftz ? "; caller MXCSR has FTZ+DAZ" : "");
		return psob_main(&o);
	}
	if (!o.json) {
		printf("tally-perf sum: isa %s%s; medians of %s-time rates; size = f32 accumulator bytes (n = size/4)%s\n",
		       tally_sum_isa_name(tally_sum_isa()), tally_sum_is_auto() ? " (auto)" : "", o.wall ? "wall" : "CPU",
		       o.ftz ? "; caller MXCSR has FTZ+DAZ" : "");
		printf("acc: f32 accumulator += source, ways-1 times; kway: fresh f32 dst = sum of ways sources\n");
		if (o.base)
			printf("baseline: plain C loops, %s flags (f32, i32); vsbase = GB/s / base GB/s\n",
			       o.base->name);
		printf("%-5s %-4s %4s %10s %8s %8s %8s %8s %8s %6s %6s %6s %8s %6s\n", "op", "dt", "ways",
		       "size", "GB/s", "Gelem/s", "traffic", "memcpy", "mc_traf", "ratio", "t_rat", "vsf32",
		       "base", "vsbase");
	}
	for (int si = 0; si < o.nsizes; si++) {
		unsigned kmax = 0;
		struct psum_bufs b;

		for (int wi = 0; wi < o.nways; wi++)
			kmax = o.ways[wi] > kmax ? o.ways[wi] : kmax;
		if (psum_alloc(&b, o.sizes[si], kmax) < 0) {
			fprintf(stderr, "tally-perf sum: cannot allocate %u x %zu bytes\n", kmax + 3, o.sizes[si]);
			return 1;
		}
		for (int wi = 0; wi < o.nways; wi++) {
			double f32_gelems[2] = { 0, 0 };

			for (int di = 0; di < o.ndt; di++) {
				int reps = o.reps ? o.reps : o.sizes[si] <= (8u << 20) ? 15 : 5;
				struct psum_res res[2];

				const struct psb_ops *base = o.dts[di] == TALLY_DT_F32 ||
					o.dts[di] == TALLY_DT_I32 ? o.base : NULL;

				if (psum_measure(o.dts[di], o.sizes[si], o.ways[wi], reps, &b, base, res) < 0) {
					fprintf(stderr, "tally-perf sum: out of memory\n");
					psum_free(&b);
					return 1;
				}
				for (int i = 0; i < 2; i++) {
					if (o.dts[di] == TALLY_DT_F32)
						f32_gelems[i] = res[i].gelems;
					psum_print(&o, &res[i], o.dts[di] != TALLY_DT_F32 && f32_gelems[i] > 0
						   ? res[i].gelems / f32_gelems[i] : 0);
				}
			}
		}
		psum_free(&b);
	}
	return rc;
}
