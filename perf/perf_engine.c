/* SPDX-License-Identifier: Apache-2.0
 * perf_engine.c — `tally-perf engine`: one engine instance on one core fed prebuilt PUSH
 * packets of W workers (the whole receive path: decode with CRC32C, checks, exactly-once
 * bitmaps, sum_avx accumulation, completion, CRC of the result and the RESULT fan-out to W
 * workers through a transport that takes the payload by reference, as DPDK's does).
 *
 * Per round every worker pushes every chunk of one key, chunk-major (chunk 0 of workers
 * 0..W-1, then chunk 1, ...); the round number is patched into the headers between rounds
 * (the CRC covers only the payload). Reported: goodput = push payload bytes summed per
 * second, packets/s, RESULT packets/s and chunk completions/s, the memcpy rate of the same
 * packet bytes measured in the same run (interleaved repetitions, medians), their ratio and
 * cores per 100G port = 12.5 GB/s / goodput. Rates are per CPU second of the benchmark
 * thread (CLOCK_THREAD_CPUTIME_ID), for the engine and for memcpy alike, so a loaded machine
 * does not count other processes' time; the wall-clock goodput is in the JSON too.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perf_cmds.h"
#include "perf_util.h"
#include "tally_engine.h"

#define PENG_MAX_DT 4
#define PENG_JOB 1u
#define PENG_TOKEN 0x5ca1ab1eull

struct peng_opts {
	int dts[PENG_MAX_DT], ndt;
	unsigned workers;
	size_t chunk_bytes;
	unsigned chunks;   /* chunks per key (working set) */
	int det_mode;      /* 0 off, 1 on, 2 both */
	int order;         /* 0 rank, 1 reverse, 2 shuffled: workers' arrival order per chunk */
	int reps;
	double min_rep_s;  /* one repetition runs at least this long */
	int cpu;           /* -1: no pinning */
	int json;
};

struct peng_xport {
	uint64_t pkts, bytes;
};

static int peng_send(void *ctx, const struct tally_addr *to, const uint8_t *hdr,
		     const void *payload, size_t len)
{
	struct peng_xport *x = ctx;
	(void)to;
	(void)payload; /* referenced, not copied (zero-copy transports) */
	x->pkts++;
	x->bytes += len + (hdr ? TALLY_HDR_LEN : 0);
	return 0;
}

/* memcpy of `bytes`, GB/s of source bytes per CPU second (same clock as the engine). */
static double peng_memcpy_gbps(void *dst, const void *src, size_t bytes, double min_s)
{
	double t = 0;
	uint64_t n = 0;
	while (t < min_s) {
		double t0 = perf_cpu_now();
		memcpy(dst, src, bytes);
		__asm__ volatile("" : : "r"(dst) : "memory");
		t += perf_cpu_now() - t0;
		n++;
	}
	return (double)bytes * (double)n / t / 1e9;
}

static const struct tally_xport_ops peng_ops = { .send = peng_send, .now_ns = perf_now_ns };

static void peng_usage(FILE *f)
{
	fprintf(f,
		"usage: tally-perf engine [--dtype f32|f16|bf16|i32] [--workers W] [--chunk BYTES]\n"
		"                         [--chunks N] [--det on|off|both] [--order rank|reverse|shuffled]\n"
		"                         [--reps N] [--min-time S] [--cpu N] [--json]\n"
		"       tally-perf engine --onebit [--workers W] [--chunk BYTES] [--chunks N]\n"
		"                         [--min-time S]   (one-bit server stage vs f32, one run)\n"
		"       tally-perf engine --auth [--workers W] [--chunk BYTES]... [--chunks N]\n"
		"                         [--reps N] [--min-time S] [--json]   (GMAC vs plain)\n"
		"  One engine on one core fed prebuilt PUSH packets of W workers (default 4), chunk\n"
		"  payloads of BYTES (default 8K), N chunks per key (default 256), deterministic mode\n"
		"  off and on (default both). --order: the workers' arrival order within each chunk\n"
		"  (default shuffled, a fixed random permutation per chunk; deterministic mode\n"
		"  stages a push until all lower ranks are in). --dtype may be repeated (default\n"
		"  f32). Figures are medians of --reps (default 7) repetitions of at least\n"
		"  --min-time CPU seconds (0.2), off/on and memcpy of the same packet bytes\n"
		"  interleaved; the deterministic cost is the median of per-repetition time\n"
		"  ratios. --cpu pins the thread.\n");
}

static int peng_bad(const char *what, const char *arg)
{
	fprintf(stderr, "tally-perf engine: %s '%s'\n", what, arg ? arg : "");
	peng_usage(stderr);
	return 2;
}

static int peng_parse(int argc, char **argv, struct peng_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->workers = 4;
	o->chunk_bytes = 8192;
	o->chunks = 256;
	o->det_mode = 2;
	o->order = 2;
	o->reps = 7;
	o->min_rep_s = 0.2;
	o->cpu = -1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		char *end;
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			peng_usage(stdout);
			return 1;
		}
		if (!strcmp(a, "--json")) {
			o->json = 1;
			continue;
		}
		if (!v)
			return peng_bad("missing value for", a);
		i++;
		if (!strcmp(a, "--dtype")) {
			int dt = tally_dtype_parse(v);
			if (dt < 0 || o->ndt == PENG_MAX_DT)
				return peng_bad("bad --dtype", v);
			o->dts[o->ndt++] = dt;
		} else if (!strcmp(a, "--workers")) {
			unsigned long w = strtoul(v, &end, 10);
			if (*end || w < 1 || w > TALLY_MAX_WORKERS)
				return peng_bad("bad --workers (1..1024)", v);
			o->workers = (unsigned)w;
		} else if (!strcmp(a, "--chunk")) {
			if (perf_parse_size(v, &o->chunk_bytes) < 0 || o->chunk_bytes < 4 ||
			    o->chunk_bytes > TALLY_MAX_PAYLOAD || o->chunk_bytes % 4)
				return peng_bad("bad --chunk (4..9000, multiple of 4)", v);
		} else if (!strcmp(a, "--chunks")) {
			unsigned long n = strtoul(v, &end, 10);
			if (*end || n < 1 || n > (1u << 20))
				return peng_bad("bad --chunks", v);
			o->chunks = (unsigned)n;
		} else if (!strcmp(a, "--det")) {
			if (!strcmp(v, "off"))
				o->det_mode = 0;
			else if (!strcmp(v, "on"))
				o->det_mode = 1;
			else if (!strcmp(v, "both"))
				o->det_mode = 2;
			else
				return peng_bad("bad --det (on|off|both)", v);
		} else if (!strcmp(a, "--order")) {
			if (!strcmp(v, "rank"))
				o->order = 0;
			else if (!strcmp(v, "reverse"))
				o->order = 1;
			else if (!strcmp(v, "shuffled"))
				o->order = 2;
			else
				return peng_bad("bad --order (rank|reverse|shuffled)", v);
		} else if (!strcmp(a, "--reps")) {
			long n = strtol(v, &end, 10);
			if (*end || n < 1 || n > 1000)
				return peng_bad("bad --reps (1..1000)", v);
			o->reps = (int)n;
		} else if (!strcmp(a, "--min-time")) {
			double s = strtod(v, &end);
			if (*end || !(s > 0 && s <= 60))
				return peng_bad("bad --min-time (seconds, 0..60]", v);
			o->min_rep_s = s;
		} else if (!strcmp(a, "--cpu")) {
			long n = strtol(v, &end, 10);
			if (*end || n < 0 || n >= CPU_SETSIZE)
				return peng_bad("bad --cpu", v);
			o->cpu = (int)n;
		} else {
			return peng_bad("unknown option", a);
		}
	}
	if (o->ndt == 0)
		o->dts[o->ndt++] = TALLY_DT_F32;
	return 0;
}

struct peng_run {
	struct tally_engine *e;
	struct peng_xport x;
	uint8_t *pkts;       /* [chunks][workers] packets of pkt_len bytes */
	size_t pkt_len, npkts;
	struct tally_addr *addr;
	unsigned workers;
	uint32_t *seq;       /* feed order: packet indices */
	uint32_t round;
};

static void peng_fill(uint8_t *p, enum tally_dtype dt, size_t n, uint64_t *s)
{
	for (size_t i = 0; i < n; i++) {
		*s ^= *s << 13;
		*s ^= *s >> 7;
		*s ^= *s << 17;
		float f = (float)((int64_t)(*s % 2001) - 1000) / 128.0f;
		switch (dt) {
		case TALLY_DT_F32:
			memcpy(p + 4 * i, &f, 4);
			break;
		case TALLY_DT_I32: {
			int32_t v = (int32_t)(*s % 2001) - 1000;
			memcpy(p + 4 * i, &v, 4);
			break;
		}
		default: {
			uint16_t h = dt == TALLY_DT_F16 ? tally_f32_to_f16(f) : tally_f32_to_bf16(f);
			memcpy(p + 2 * i, &h, 2);
			break;
		}
		}
	}
}

static void peng_free(struct peng_run *r)
{
	tally_engine_destroy(r->e);
	free(r->pkts);
	free(r->addr);
	free(r->seq);
	memset(r, 0, sizeof(*r));
}

/* Engine, job, joined workers, one key, prebuilt packets. 0 or -errno. */
static int peng_setup(struct peng_run *r, const struct peng_opts *o, enum tally_dtype dt,
		      int det)
{
	size_t es = tally_dtype_size(dt);
	if (o->chunk_bytes % es)
		return -EINVAL;
	uint32_t celems = (uint32_t)(o->chunk_bytes / es);
	uint32_t nelems = celems * o->chunks;
	struct tally_engine_cfg cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.max_chunk_bytes = (uint32_t)o->chunk_bytes;
	cfg.mem_budget = (size_t)nelems * 12 + ((size_t)64 << 20);
	cfg.det_pool_bytes = det ? (size_t)o->workers * 4 * o->chunk_bytes + 4096 : 0;
	cfg.max_jobs = 1;
	cfg.max_keys = 16;
	int err = 0;
	memset(r, 0, sizeof(*r));
	r->e = tally_engine_create(&cfg, &peng_ops, &r->x, &err);
	if (!r->e)
		return err;
	err = tally_engine_job_add(r->e, PENG_JOB, PENG_TOKEN, o->workers);
	if (err < 0)
		goto fail;
	r->workers = o->workers;
	r->addr = calloc(o->workers, sizeof(*r->addr));
	r->pkt_len = TALLY_HDR_LEN + o->chunk_bytes;
	r->npkts = (size_t)o->chunks * o->workers;
	r->pkts = perf_alloc(r->npkts * r->pkt_len);
	r->seq = malloc(r->npkts * sizeof(*r->seq));
	err = -ENOMEM;
	if (!r->addr || !r->pkts || !r->seq)
		goto fail;
	/* chunk-major; within a chunk the workers in rank, reverse or shuffled order */
	uint64_t q = 0x9E3779B97F4A7C15ull;
	for (uint32_t c = 0; c < o->chunks; c++) {
		uint32_t *sq = r->seq + (size_t)c * o->workers;
		for (uint32_t w = 0; w < o->workers; w++)
			sq[w] = c * o->workers + (o->order == 1 ? o->workers - 1 - w : w);
		for (uint32_t w = o->workers; o->order == 2 && w > 1; w--) {
			q ^= q << 13;
			q ^= q >> 7;
			q ^= q << 17;
			uint32_t j = (uint32_t)(q % w), t = sq[w - 1];
			sq[w - 1] = sq[j];
			sq[j] = t;
		}
	}
	uint8_t buf[TALLY_HDR_LEN + TALLY_JOIN_LEN];
	for (uint32_t w = 0; w < o->workers; w++) {
		r->addr[w].ip = 0x0a000000u + w;
		r->addr[w].port = (uint16_t)(20000 + w);
		r->addr[w].cookie = w;
		struct tally_hdr h;
		memset(&h, 0, sizeof(h));
		h.op = TALLY_OP_JOIN;
		h.job_id = PENG_JOB;
		h.token = PENG_TOKEN;
		h.rank = w;
		struct tally_join j = { .world_size = o->workers,
					.max_chunk_bytes = (uint32_t)o->chunk_bytes };
		tally_proto_put_join(buf + TALLY_HDR_LEN, &j);
		tally_proto_finish(buf, &h, buf + TALLY_HDR_LEN, TALLY_JOIN_LEN);
		if (tally_engine_rx(r->e, buf, sizeof(buf), &r->addr[w]) != TALLY_OK)
			goto fail_inval;
	}
	struct tally_register reg;
	memset(&reg, 0, sizeof(reg));
	reg.nelems = nelems;
	reg.chunk_elems = celems;
	reg.dtype = (uint8_t)dt;
	reg.participants = (uint16_t)o->workers;
	reg.quorum = (uint16_t)o->workers;
	reg.flags = det ? TALLY_KEY_DETERMINISTIC : 0;
	err = tally_engine_key_register(r->e, PENG_JOB, 1, &reg);
	if (err < 0)
		goto fail;
	uint64_t s = 0x243F6A8885A308D3ull;
	for (uint32_t c = 0; c < o->chunks; c++)
		for (uint32_t w = 0; w < o->workers; w++) {
			uint8_t *p = r->pkts + ((size_t)c * o->workers + w) * r->pkt_len;
			struct tally_hdr h;
			memset(&h, 0, sizeof(h));
			h.op = TALLY_OP_PUSH;
			h.job_id = PENG_JOB;
			h.token = PENG_TOKEN;
			h.rank = w;
			h.key = 1;
			h.offset = c * celems;
			h.count = celems;
			h.dtype = (uint8_t)dt;
			peng_fill(p + TALLY_HDR_LEN, dt, celems, &s);
			tally_proto_finish(p, &h, p + TALLY_HDR_LEN, o->chunk_bytes);
		}
	return 0;
fail_inval:
	err = -EINVAL;
fail:
	peng_free(r);
	return err;
}

/* Next round number into every header (header offset 28, little-endian; the CRC covers
 * the payload only). Not timed. */
static void peng_patch(struct peng_run *r)
{
	uint32_t rd = r->round++;
	for (size_t i = 0; i < r->npkts; i++) {
		uint8_t *p = r->pkts + i * r->pkt_len;
		p[28] = (uint8_t)rd;
		p[29] = (uint8_t)(rd >> 8);
		p[30] = (uint8_t)(rd >> 16);
		p[31] = (uint8_t)(rd >> 24);
	}
}

/* One round: every packet once, chunk-major. Returns packets rejected (must be 0). */
static uint64_t peng_feed(struct peng_run *r)
{
	uint64_t bad = 0;
	for (size_t i = 0; i < r->npkts; i++) {
		uint32_t k = r->seq[i];
		bad += tally_engine_rx(r->e, r->pkts + (size_t)k * r->pkt_len, r->pkt_len,
				       &r->addr[k % r->workers]) != TALLY_OK;
	}
	return bad;
}

struct peng_res {
	double gbps, pps, results_ps, completions_ps, memcpy_gbps, wall_gbps;
	double det_cost;   /* deterministic run: median of per-rep time ratios on / off */
	uint64_t rounds;
};

#define PENG_RUNS 2
struct peng_series {       /* per-rep samples of one run */
	double *gb, *pps, *rps, *cps, *wg, *ratio;
};

/* Rounds of one run for at least min_rep_s CPU seconds; fills sample `rep`. */
static int peng_rep(struct peng_run *r, const struct peng_opts *o, struct peng_series *se,
		    int rep, uint64_t *rounds)
{
	const struct tally_engine_stats *st = tally_engine_stats(r->e);
	tally_engine_stats_reset(r->e);
	double t = 0, wall = 0;
	uint64_t n = 0, bad = 0;
	while (t < o->min_rep_s) {
		peng_patch(r);
		double w0 = perf_now(), t0 = perf_cpu_now();
		bad += peng_feed(r);
		t += perf_cpu_now() - t0;
		wall += perf_now() - w0;
		n++;
	}
	if (bad || st->completions != n * o->chunks) {
		fprintf(stderr, "tally-perf engine: %llu packets rejected, %llu of %llu chunks "
			"completed\n", (unsigned long long)bad,
			(unsigned long long)st->completions, (unsigned long long)(n * o->chunks));
		return -EPROTO;
	}
	se->gb[rep] = (double)st->push_bytes / t / 1e9;
	se->pps[rep] = (double)st->rx_pkts / t;
	se->rps[rep] = (double)st->results / t;
	se->cps[rep] = (double)st->completions / t;
	se->wg[rep] = (double)st->push_bytes / wall / 1e9;
	*rounds += n;
	return 0;
}

/* Measure the runs dets[0..nr-1] (deterministic off/on) of one dtype, their repetitions
 * interleaved with each other and with memcpy so that all see the same conditions. */
static int peng_measure(const struct peng_opts *o, enum tally_dtype dt, const int *dets,
			int nr, struct peng_res *res)
{
	struct peng_run r[PENG_RUNS];
	struct peng_series se[PENG_RUNS];
	double *mc = calloc((size_t)o->reps, sizeof(double));
	uint8_t *dst = NULL;
	int err = -ENOMEM, ready = 0;
	memset(r, 0, sizeof(r));
	memset(se, 0, sizeof(se));
	memset(res, 0, sizeof(*res) * (size_t)nr);
	if (!mc)
		goto out;
	for (int k = 0; k < nr; k++) {
		err = peng_setup(&r[k], o, dt, dets[k]);
		if (err < 0)
			goto out;
		ready = k + 1;
		double **f[] = { &se[k].gb, &se[k].pps, &se[k].rps, &se[k].cps, &se[k].wg,
				 &se[k].ratio };
		err = -ENOMEM;
		for (size_t q = 0; q < sizeof(f) / sizeof(f[0]); q++)
			if (!(*f[q] = calloc((size_t)o->reps, sizeof(double))))
				goto out;
		/* warm-up round: faults in accumulators and packets */
		peng_patch(&r[k]);
		err = -EPROTO;
		if (peng_feed(&r[k]))
			goto out;
	}
	size_t total = r[0].npkts * r[0].pkt_len;
	err = -ENOMEM;
	dst = perf_alloc(total);
	if (!dst)
		goto out;
	for (int rep = 0; rep < o->reps; rep++) {
		mc[rep] = peng_memcpy_gbps(dst, r[0].pkts, total, o->min_rep_s / 4);
		for (int k = 0; k < nr; k++) {
			err = peng_rep(&r[k], o, &se[k], rep, &res[k].rounds);
			if (err < 0)
				goto out;
		}
		for (int k = 0; k < nr; k++)
			se[k].ratio[rep] = se[0].gb[rep] / se[k].gb[rep];
	}
	for (int k = 0; k < nr; k++) {
		size_t n = (size_t)o->reps;
		res[k].gbps = perf_median(se[k].gb, n);
		res[k].pps = perf_median(se[k].pps, n);
		res[k].results_ps = perf_median(se[k].rps, n);
		res[k].completions_ps = perf_median(se[k].cps, n);
		res[k].wall_gbps = perf_median(se[k].wg, n);
		res[k].memcpy_gbps = perf_median(mc, n);
		res[k].det_cost = perf_median(se[k].ratio, n);
	}
	err = 0;
out:
	for (int k = 0; k < PENG_RUNS; k++) {
		free(se[k].gb);
		free(se[k].pps);
		free(se[k].rps);
		free(se[k].cps);
		free(se[k].wg);
		free(se[k].ratio);
		if (k < ready)
			peng_free(&r[k]);
	}
	free(mc);
	free(dst);
	return err;
}

int perf_engine_main(int argc, char **argv)
{
	struct peng_opts o;
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--onebit"))
			return perf_engine_onebit_main(argc, argv);
		else if (!strcmp(argv[i], "--auth"))
			return perf_engine_auth_main(argc, argv);
	int rc = peng_parse(argc, argv, &o);
	if (rc)
		return rc == 1 ? 0 : rc;
	if (o.cpu >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(o.cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set) < 0) {
			fprintf(stderr, "tally-perf engine: cannot pin to cpu %d: %s\n", o.cpu,
				strerror(errno));
			return 1;
		}
	}
	rc = tally_sum_init();
	if (rc < 0) {
		fprintf(stderr, "tally-perf engine: reducers: %s\n", strerror(-rc));
		return 1;
	}
	const char *isa = tally_sum_isa_name(tally_sum_isa());
	static const char *const order_name[] = { "rank", "reverse", "shuffled" };
	if (!o.json) {
		printf("tally-perf engine: one engine, %u workers, %zu-byte chunks, %u chunks per key, "
		       "%s arrival order, isa %s; medians of %d reps\n", o.workers, o.chunk_bytes,
		       o.chunks, order_name[o.order], isa, o.reps);
		printf("goodput = push payload summed per CPU second of this thread; memcpy = the "
		       "same packet bytes, same run, same clock\n");
		printf("%-4s %-3s %9s %10s %10s %11s %9s %7s %10s\n", "dt", "det", "GB/s", "Mpps",
		       "results/s", "chunks/s", "memcpy", "ratio", "cores/100G");
	}
	for (int d = 0; d < o.ndt; d++) {
		int dets[PENG_RUNS], nr = 0;
		if (o.det_mode != 1)
			dets[nr++] = 0;
		if (o.det_mode != 0)
			dets[nr++] = 1;
		struct peng_res res[PENG_RUNS];
		const char *dn = tally_dtype_name((enum tally_dtype)o.dts[d]);
		rc = peng_measure(&o, (enum tally_dtype)o.dts[d], dets, nr, res);
		if (rc < 0) {
			fprintf(stderr, "tally-perf engine: %s: %s\n", dn, strerror(-rc));
			return 1;
		}
		for (int k = 0; k < nr; k++) {
			const struct peng_res *r = &res[k];
			int det = dets[k], paired = det && dets[0] == 0;
			double ratio = r->gbps / r->memcpy_gbps;
			double cores = 12.5 / r->gbps;
			if (o.json) {
				printf("{\"bench\":\"engine\",\"dtype\":\"%s\",\"workers\":%u,"
				       "\"chunk_bytes\":%zu,\"chunks\":%u,\"deterministic\":%s,"
				       "\"order\":\"%s\",\"isa\":\"%s\",\"gbps\":%.3f,"
				       "\"pps\":%.0f,\"results_per_s\":%.0f,"
				       "\"completions_per_s\":%.0f,\"memcpy_gbps\":%.3f,"
				       "\"ratio\":%.4f,\"cores_per_100g\":%.4f,\"wall_gbps\":%.3f,"
				       "\"rounds\":%llu",
				       dn, o.workers, o.chunk_bytes, o.chunks, det ? "true" : "false",
				       order_name[o.order], isa, r->gbps, r->pps, r->results_ps,
				       r->completions_ps, r->memcpy_gbps, ratio, cores, r->wall_gbps,
				       (unsigned long long)r->rounds);
				if (paired)
					printf(",\"det_cost\":%.4f", r->det_cost);
				printf("}\n");
			} else {
				printf("%-4s %-3s %9.2f %10.3f %10.0f %11.0f %9.2f %7.3f %10.3f", dn,
				       det ? "on" : "off", r->gbps, r->pps / 1e6, r->results_ps,
				       r->completions_ps, r->memcpy_gbps, ratio, cores);
				if (paired)
					printf("   (det: %.2fx the time of off)", r->det_cost);
				printf("\n");
			}
			fflush(stdout);
		}
	}
	return 0;
}
