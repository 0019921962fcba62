/* SPDX-License-Identifier: Apache-2.0
 * nccl_perf.c — tally-nccl-perf: allreduce through libnccl-net-tally.so's CollNet table,
 * called as NCCL calls it (the harness of tests/nccl: dlopen, versioned table, listen /
 * connect with handles exchanged between forked ranks, regMr of host buffers, iallreduce /
 * test), against a real tally-udpd it starts (or TALLY_APPLIANCES with --external).
 * Printed in nccl-tests' columns (size, count, type, redop, time, algbw, busbw, #wrong)
 * plus the worker's CPU cost: getrusage(RUSAGE_SELF) of each rank process (the plugin, the
 * agent's progress thread, its UDP client; not the appliance) over the timed iterations,
 * per GB reduced (size x iterations), user + system and each, of the rank that used most;
 * "cores": that CPU time over the timed wall time (1.0: a core busy throughout, polling
 * included: the agent's progress thread and the client poll while they wait).
 * A CPU harness figure: no GPU, no NCCL (its proxy thread and staging copies are not in it).
 *   tally-nccl-perf PLUGIN.so TALLY-UDPD [-w ranks] [-b min] [-e max] [-n iters] [-m warmup]
 *                   [-v version] [--external] [--reduce-scatter]
 * --reduce-scatter: ireducescatter of the whole window (size = the window, size / ranks each
 * rank's block; busbw = algbw x (ranks - 1) / ranks, nccl-tests' factor), run twice in one
 * invocation against the one appliance: reduce-scatter owner mode off
 * (TALLY_NCCL_OWNER_MODE=0: every chunk's sum to every rank) and on (the default: to its
 * block's owner only); after both, each rank's downlink (the bytes its client sessions
 * received over the whole run, from the plugin's closeColl log line) and the ratio on / off.
 * #wrong then counts the rank's own block against the rank-order sums.
 * time: the mean over the timed iterations of one allreduce, submitted alone (nccl-tests
 * launches its iterations back to back; ours wait for each), the largest over the ranks.
 * #wrong: elements of one more, verified allreduce that differ bit for bit from the
 * rank-order sum (TALLY_DETERMINISTIC=1, set unless given).
 */
#include "nccl_harness.h"
#include "nccl_udpd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define MAXW 8

struct opts {
	int world, ver, iters, warmup, external, rs;
	size_t minb, maxb;
};

struct res { /* one rank, one size */
	double t, usr, sys;
	size_t wrong;
};

/* user and system CPU seconds of this process, every thread */
static void cpu_s(double *usr, double *sys)
{
	struct rusage u;

	getrusage(RUSAGE_SELF, &u);
	*usr = (double)u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6;
	*sys = (double)u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6;
}

static void allreduce(struct napi *a, void *cc, float *b, size_t n, void *mh)
{
	void *req;
	ncclResult_t r;
	int done = 0, sz;
	double end = now_s() + 300 * tmul;

	SUBMIT(r, &req, napi_coll_iallreduce(a, cc, b, b, n, ncclFloat32, mh, mh, &req));
	CHECK(r == ncclSuccess && req, "iallreduce of %zu floats: %d", n, r);
	while (!done) {
		CHECK(napi_coll_test(a, req, &done, &sz) == ncclSuccess, "allreduce failed:\n%s",
		      napi_log);
		CHECK(now_s() < end, "allreduce of %zu floats: no result in 300 s", n);
	}
}

/* Reduce-scatter of the window b (n floats, n / world per rank) into out (this rank's block). */
static void reducescatter(struct napi *a, void *cc, float *b, float *out, size_t n, int world,
			  void *mh, void *omh)
{
	size_t bpr = n / (size_t)world * 4;
	void *req;
	ncclResult_t r;
	int done = 0, sz;
	double end = now_s() + 300 * tmul;

	SUBMIT(r, &req, napi_coll_ireducescatter(a, cc, b, out, bpr, 0, bpr * (size_t)world,
						 ncclFloat32, mh, omh, &req));
	CHECK(r == ncclSuccess && req, "ireducescatter of %zu floats: %d", n, r);
	while (!done) {
		CHECK(napi_coll_test(a, req, &done, &sz) == ncclSuccess, "reduce-scatter failed:\n%s",
		      napi_log);
		CHECK(now_s() < end, "reduce-scatter of %zu floats: no result in 300 s", n);
	}
}

/* Elements of b (n floats: the sums, or with `from` the rank's block of them) that differ bit
 * for bit from the rank-order sums. */
static size_t wrong(const float *b, float *ref, size_t n, int world, int slot, size_t from)
{
	size_t w = 0;

	reference(ncclFloat32, ref, from + n, world, 1, slot);
	for (size_t i = 0; i < n; i++)
		w += memcmp(&b[i], &ref[from + i], 4) != 0;
	return w;
}

/* One collective of the run's kind over the first cnt floats of b. */
static void one(const struct opts *o, struct napi *a, void *cc, float *b, float *out, size_t cnt,
		void *mh, void *omh)
{
	if (o->rs)
		reducescatter(a, cc, b, out, cnt, o->world, mh, omh);
	else
		allreduce(a, cc, b, cnt, mh);
}

/* One rank: every size, results to the parent; a byte from the parent starts each size. */
static void rank_main(const struct opts *o, int rank, int up, int down)
{
	unsigned char h[NCCL_NET_HANDLE_MAXSIZE], all[MAXW][NCCL_NET_HANDLE_MAXSIZE];
	void *hp[MAXW], *lc, *cc, *mh, *omh;
	struct napi a;
	float *b = malloc(o->maxb), *ref = malloc(o->maxb), *out = malloc(o->maxb);
	int n = 0, ptr = 0, slot = 0;
	char go;

	CHECK(b && ref && out, "malloc");
	load(&a, o->ver);
	CHECK(napi_coll_init(&a) == ncclSuccess && napi_coll_devices(&a, &n, &ptr) == 0 && n == 1,
	      "collnet init / devices:\n%s", napi_log);
	CHECK(napi_coll_listen(&a, h, &lc) == ncclSuccess, "listen");
	xwrite(up, h, sizeof(h));
	xread(down, all, (size_t)o->world * sizeof(h));
	for (int i = 0; i < o->world; i++)
		hp[i] = all[i];
	CHECK(napi_coll_connect(&a, hp, o->world, rank, lc, &cc) == ncclSuccess, "connect:\n%s",
	      napi_log);
	CHECK(napi_coll_regmr(&a, cc, b, o->maxb, &mh) == ncclSuccess &&
		      napi_coll_regmr(&a, cc, out, o->maxb, &omh) == ncclSuccess, "regMr");
	for (size_t sz = o->minb; sz <= o->maxb; sz *= 2, slot++) {
		size_t cnt = o->rs ? sz / 4 / (size_t)o->world * (size_t)o->world : sz / 4;
		struct res r = {0};
		double t0, u0, s0, u1, s1;

		xread(down, &go, 1);
		fill(ncclFloat32, b, cnt, rank, 1, slot);
		for (int i = 0; i < o->warmup; i++)
			one(o, &a, cc, b, out, cnt, mh, omh);
		cpu_s(&u0, &s0);
		t0 = now_s();
		for (int i = 0; i < o->iters; i++)
			one(o, &a, cc, b, out, cnt, mh, omh);
		r.t = (now_s() - t0) / o->iters;
		cpu_s(&u1, &s1);
		r.usr = u1 - u0;
		r.sys = s1 - s0;
		fill(ncclFloat32, b, cnt, rank, 1, slot);
		one(o, &a, cc, b, out, cnt, mh, omh);
		if (o->rs)
			r.wrong = wrong(out, ref, cnt / (size_t)o->world, o->world, slot,
					(size_t)rank * (cnt / (size_t)o->world));
		else
			r.wrong = wrong(b, ref, cnt, o->world, slot, 0);
		xwrite(up, &r, sizeof(r));
	}
	napi_coll_deregmr(&a, cc, mh);
	napi_coll_deregmr(&a, cc, omh);
	napi_coll_close(&a, cc, lc);
	if (o->rs) { /* the downlink of the whole run: the plugin says it at closeColl */
		const char *l = strstr(napi_log, "closing: received ");
		unsigned long long rx = 0;

		CHECK(l && sscanf(l, "closing: received %llu", &rx) == 1,
		      "closeColl logged no downlink figure:\n%s", napi_log);
		uint64_t v = rx;

		xwrite(up, &v, sizeof(v));
	}
	exit(0);
}

static void size_text(size_t b, char *s, size_t n)
{
	snprintf(s, n, b >= (1u << 20) ? "%zuM" : b >= 1024 ? "%zuK" : "%zuB",
		 b >= (1u << 20) ? b >> 20 : b >= 1024 ? b >> 10 : b);
}

static void report(const struct opts *o, int up[])
{
	int slot = 0;
	double busf = (o->rs ? 1.0 : 2.0) * (o->world - 1) / o->world;

	printf("#%12s %12s %8s %6s %12s %8s %8s %7s %9s %9s %9s %7s\n", "size", "count", "type",
	       "redop", "time", "algbw", "busbw", "#wrong", "cpu", "usr", "sys", "cpu");
	printf("#%12s %12s %8s %6s %12s %8s %8s %7s %9s %9s %9s %7s\n", "(B)", "(elements)", "", "",
	       "(us)", "(GB/s)", "(GB/s)", "", "(s/GB)", "(s/GB)", "(s/GB)", "(cores)");
	for (size_t sz = o->minb; sz <= o->maxb; sz *= 2, slot++) {
		struct res worst = {0}, r;
		size_t wr = 0;
		char go = 'g';

		for (int i = 0; i < o->world; i++)
			xwrite(up[2 * i + 1], &go, 1);
		for (int i = 0; i < o->world; i++) {
			xread(up[2 * i], &r, sizeof(r));
			worst.t = r.t > worst.t ? r.t : worst.t;
			if (r.usr + r.sys > worst.usr + worst.sys) {
				worst.usr = r.usr;
				worst.sys = r.sys;
			}
			wr += r.wrong;
		}
		/* reduce-scatter: the window, whole blocks of floats */
		size_t wsz = o->rs ? sz / 4 / (size_t)o->world * (size_t)o->world * 4 : sz;
		double algbw = (double)wsz / worst.t / 1e9, gb = (double)wsz * o->iters / 1e9;
		double cpu = worst.usr + worst.sys;

		printf(" %12zu %12zu %8s %6s %12.1f %8.3f %8.3f %7zu %9.3f %9.3f %9.3f %7.2f\n", wsz,
		       wsz / 4, "float", "sum", worst.t * 1e6, algbw, algbw * busf, wr, cpu / gb,
		       worst.usr / gb, worst.sys / gb, cpu / (worst.t * o->iters));
	}
}

static int parse(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){.world = 2, .ver = 11, .iters = 20, .warmup = 3, .minb = 1024,
			   .maxb = (size_t)64 << 20};
	for (int i = 3; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : "";
		char *e;
		double x;

		if (!strcmp(argv[i], "--external")) {
			o->external = 1;
			continue;
		}
		if (!strcmp(argv[i], "--reduce-scatter")) {
			o->rs = 1;
			continue;
		}
		x = strtod(v, &e);
		if (*e == 'K' || *e == 'k')
			x *= 1024;
		else if (*e == 'M' || *e == 'm')
			x *= 1 << 20;
		if (!strcmp(argv[i], "-w"))
			o->world = (int)x;
		else if (!strcmp(argv[i], "-b"))
			o->minb = (size_t)x;
		else if (!strcmp(argv[i], "-e"))
			o->maxb = (size_t)x;
		else if (!strcmp(argv[i], "-n"))
			o->iters = (int)x;
		else if (!strcmp(argv[i], "-m"))
			o->warmup = (int)x;
		else if (!strcmp(argv[i], "-v"))
			o->ver = (int)x;
		else
			return -1;
		i++;
	}
	if (o->world < 1 || o->world > MAXW || o->minb < 4 || o->minb % 4 || o->maxb < o->minb ||
	    o->iters < 1 || o->warmup < 0 || o->ver < 7 || o->ver > 11 || (o->rs && o->ver < 8) ||
	    (o->rs && o->minb < 4 * (size_t)o->world))
		return -1;
	return 0;
}

/* Fork the ranks, pass every listen handle to every rank, print the rows; rx: each rank's
 * downlink (--reduce-scatter). 0 when every rank passed. */
static int run(const struct opts *o, uint64_t rx[MAXW])
{
	int up[2 * MAXW];
	unsigned char all[MAXW][NCCL_NET_HANDLE_MAXSIZE];
	pid_t pids[MAXW];

	for (int r = 0; r < o->world; r++) {
		int a[2], b[2];

		CHECK(pipe(a) == 0 && pipe(b) == 0, "pipe");
		if (!(pids[r] = fork())) {
			close(a[0]);
			close(b[1]);
			rank_main(o, r, a[1], b[0]);
		}
		close(a[1]);
		close(b[0]);
		up[2 * r] = a[0];
		up[2 * r + 1] = b[1];
	}
	for (int r = 0; r < o->world; r++)
		xread(up[2 * r], all[r], sizeof(all[r]));
	for (int r = 0; r < o->world; r++)
		xwrite(up[2 * r + 1], all, (size_t)o->world * sizeof(all[0]));
	report(o, up);
	for (int r = 0; o->rs && r < o->world; r++)
		xread(up[2 * r], &rx[r], sizeof(rx[r]));
	for (int r = 0; r < o->world; r++) {
		close(up[2 * r]);
		close(up[2 * r + 1]);
	}
	return wait_all(pids, o->world, 120);
}

int main(int argc, char **argv)
{
	const char *const open_adm[] = {"--open", NULL};
	pid_t udpd = 0;
	unsigned port;
	char app[64], smin[16], smax[16];
	uint64_t rx[2][MAXW] = {{0}};
	struct opts o;
	int bad = 0;

	if (argc < 3 || parse(argc, argv, &o)) {
		fprintf(stderr, "usage: %s PLUGIN.so TALLY-UDPD [-w ranks 1..%d] [-b min] [-e max] "
			"[-n iters] [-m warmup] [-v 7..11] [--external] [--reduce-scatter (v8+, "
			"-b >= 4 x ranks)]\n", argv[0], MAXW);
		return 2;
	}
	so_path = argv[1];
	setvbuf(stdout, NULL, _IONBF, 0);
	setenv("TALLY_DETERMINISTIC", "1", 0);
	setenv("TALLY_RTO_MIN_US", "2000", 0); /* ranks and appliance share the cores */
	if (!o.external) {
		udpd = nccl_udpd_start(argv[2], &port, open_adm);
		CHECK(udpd > 0, "tally-udpd did not start");
		snprintf(app, sizeof(app), "127.0.0.1:%u", port);
		setenv("TALLY_APPLIANCES", app, 1);
	}
	CHECK(getenv("TALLY_APPLIANCES"), "--external needs TALLY_APPLIANCES");
	size_text(o.minb, smin, sizeof(smin));
	size_text(o.maxb, smax, sizeof(smax));
	for (int pass = 0; pass < (o.rs ? 2 : 1) && !bad; pass++) {
		if (o.rs)
			setenv("TALLY_NCCL_OWNER_MODE", pass ? "1" : "0", 1);
		printf("# tally-nccl-perf: CPU harness playing NCCL (no GPU, no NCCL): CollNet v%d "
		       "%s, %d ranks, %s .. %s, %d iterations (+%d warm-up), appliance %s "
		       "(tally-udpd, %s), TALLY_DETERMINISTIC=%s%s\n", o.ver,
		       o.rs ? "reduce-scatter" : "allreduce", o.world, smin, smax, o.iters, o.warmup,
		       getenv("TALLY_APPLIANCES"), o.external ? "external" : "2 cores",
		       getenv("TALLY_DETERMINISTIC"),
		       !o.rs ? "" : pass ? ", owner mode on (sums to their block's owner only)"
					 : ", owner mode off (every sum to every rank)");
		bad = run(&o, rx[pass]);
	}
	for (int r = 0; o.rs && !bad && r < o.world; r++)
		printf("# downlink rank %d: %llu B owner mode off, %llu B on: ratio %.3f\n", r,
		       (unsigned long long)rx[0][r], (unsigned long long)rx[1][r],
		       rx[0][r] ? (double)rx[1][r] / (double)rx[0][r] : 0.0);
	nccl_udpd_stop(udpd);
	return bad;
}
