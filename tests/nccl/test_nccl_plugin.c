/* SPDX-License-Identifier: Apache-2.0
 * test_nccl_plugin.c — plays NCCL's part against libnccl-net-tally.so, as NCCL calls a net /
 * CollNet plugin (no GPU, host memory): dlopen, dlsym of each versioned table, init with a
 * logger, devices / getProperties, listen in every rank, the handles exchanged between W
 * processes (fork, pipes), connect, regMr, many outstanding iallreduce / test calls on
 * reused buffers, closeColl. Against a real tally-udpd.
 *   test_nccl_plugin PLUGIN.so UDPD MODE
 *   net:   isend / irecv pairs of many sizes between two processes, 8 outstanding
 *   (every mode below runs the tables of v11 (NCCL 2.28), v10, v9, v8 (2.19) and v7 (2.18))
 *   coll:  W=3 ranks, f32 / f16 / bf16 / i32, 1 .. 262147 elements, 6 outstanding, twice on
 *          the same buffers, and 64 MiB f32 (v11); every sum bit for bit against the
 *          rank-order reference (TALLY_DETERMINISTIC=1); reduceSupport says no to the rest;
 *          iallgather (whole window and one starting inside a block) and ireducescatter
 *          (not v7, whose CollNet has neither) in owner mode: after closeColl each rank's
 *          logged counters show the other ranks' blocks answered header-only and no sum
 *          payload of them received
 *   fault: the appliance SIGKILLed while an iallreduce waits for it -> test() returns an
 *          NCCL error naming the appliance within the deadline; no appliance at connect ->
 *          an error naming it
 *   coll-ext: the coll sums (v11, v8) against the appliance in TALLY_APPLIANCES (tallyd on
 *          net_af_packet: nccl_tallyd.sh)
 *   key:   a job admitted with one key, the plugin given another -> connect fails naming
 *          TALLY_AUTH_KEY_FILE; with the right key the same job sums.
 *   sizes: 160 distinct sizes bit-exact under --quota-keys 64 (keys reused across sizes);
 *          --quota-keys 6 -> an NCCL error naming --quota-keys and TALLY_NCCL_LANES.
 * Deadlines scale with TALLY_TIMEOUT_MULTIPLIER.
 */
#include "nccl_harness.h"
#include "nccl_udpd.h"
#include "tally_sum.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXW 4

static const char *udpd_path;

/* ------------------------------------------------------------------ coll */
enum scen { SC_SUM, SC_KILL, SC_NOAPP, SC_BADKEY, SC_GOODKEY, SC_SIZES, SC_QUOTA };
static const ncclDataType_t dts[] = {ncclFloat32, ncclFloat16, ncclBfloat16, ncclInt32};
static const char *const dt_names[] = {"f32", "f16", "bf16", "i32"};
static const size_t counts[] = {1, 3, 1000, 4097, 65536, 262147};
#define NCOUNT (sizeof(counts) / sizeof(counts[0]))
static char appliance_name[64]; /* "127.0.0.1:PORT", what errors must name */

struct rank_io {
	int to_parent, from_parent;
};

/* Waits for every request; each must complete (or, want_err, fail) within the deadline. */
ncclResult_t wait_reqs(struct napi *a, void **req, int n, size_t *bytes, double limit_s)
{
	double end = now_s() + limit_s * tmul;
	int left = n;

	while (left) {
		CHECK(now_s() < end, "%d iallreduce(s) not done in %.0f s: hang", left,
		      limit_s * tmul);
		for (int i = 0; i < n; i++) {
			int d = 0, sz = -1;
			ncclResult_t r;

			if (!req[i])
				continue;
			r = napi_coll_test(a, req[i], &d, &sz);
			if (r != ncclSuccess)
				return r;
			if (!d)
				continue;
			CHECK((size_t)sz == bytes[i], "test size %d, want %zu", sz, bytes[i]);
			req[i] = NULL;
			left--;
		}
	}
	return ncclSuccess;
}

/* One round: every count of dtype d outstanding at once, odd slots from a separate send
 * buffer, even slots in place; then every result against the reference. */
static void sum_round(struct napi *a, void *cc, char *sb, char *rb, void *smh, void *rmh,
		      int rank, int world, int round, unsigned d, char *ref)
{
	void *req[NCOUNT];
	size_t bytes[NCOUNT], off[NCOUNT], o = 0, es = esize(dts[d]);
	ncclResult_t r;

	for (unsigned s = 0; s < NCOUNT; s++) {
		char *src = s & 1 ? sb : rb;

		off[s] = o;
		bytes[s] = counts[s] * es;
		o += (bytes[s] + 63) & ~(size_t)63;
		fill(dts[d], src + off[s], counts[s], rank, round, (int)(s + 8 * d));
		SUBMIT(r, &req[s], napi_coll_iallreduce(a, cc, src + off[s], rb + off[s],
							counts[s], dts[d], s & 1 ? smh : rmh,
							rmh, &req[s]));
		CHECK(r == ncclSuccess && req[s], "iallreduce %s x %zu", dt_names[d], counts[s]);
	}
	CHECK(wait_reqs(a, req, NCOUNT, bytes, 120) == ncclSuccess, "allreduce %s round %d failed",
	      dt_names[d], round);
	for (unsigned s = 0; s < NCOUNT; s++) {
		reference(dts[d], ref, counts[s], world, round, (int)(s + 8 * d));
		for (size_t i = 0; i < counts[s]; i++)
			CHECK(!memcmp(rb + off[s] + i * es, ref + i * es, es),
			      "%s x %zu, round %d: element %zu differs from the rank-order sum",
			      dt_names[d], counts[s], round, i);
	}
}

/* Some element's sum in reverse rank order differs from the rank-order one: so a sum in
 * any other order than the deterministic mode's fails the comparison. */
static int order_matters(const float *ref, size_t n, int world, int round, int slot)
{
	for (size_t i = 0; i < n; i++) {
		float acc = val(world - 1, round, slot, i);

		for (int r = world - 2; r >= 0; r--)
			acc += val(r, round, slot, i);
		if (memcmp(&acc, &ref[i], 4))
			return 1;
	}
	return 0;
}

static void scen_sum(struct napi *a, void *cc, int rank, int world)
{
	size_t big = a->ver == 11 ? (size_t)16 << 20 : 0; /* 64 MiB of f32 */
	size_t bsz = 8 << 20;
	char *sb = malloc(bsz), *rb = malloc(bsz), *ref = malloc(big ? big * 4 : bsz);
	void *smh, *rmh;
	int s;

	CHECK(sb && rb && ref, "malloc");
	CHECK(napi_coll_support(a, ncclFloat32, ncclSum, &s) == 0 && s, "f32 sum unsupported");
	CHECK(napi_coll_support(a, ncclBfloat16, ncclSum, &s) == 0 && s, "bf16 unsupported");
	CHECK(napi_coll_support(a, ncclFloat64, ncclSum, &s) == 0 && !s, "f64 claimed");
	CHECK(napi_coll_support(a, ncclInt8, ncclSum, &s) == 0 && !s, "i8 claimed");
	CHECK(napi_coll_support(a, ncclFloat32, ncclMax, &s) == 0 && !s, "max claimed");
	CHECK(napi_coll_regmr(a, cc, sb, bsz, &smh) == 0 && napi_coll_regmr(a, cc, rb, bsz, &rmh) == 0,
	      "regMr");
	for (int round = 0; round < 2; round++)
		for (unsigned d = 0; d < 4; d++)
			sum_round(a, cc, sb, rb, smh, rmh, rank, world, round, d, ref);
	if (big) {
		float *bb = malloc(big * 4);
		void *bmh, *req;
		size_t bytes = big * 4;

		CHECK(bb && napi_coll_regmr(a, cc, bb, bytes, &bmh) == 0, "64 MiB buffer");
		fill(ncclFloat32, bb, big, rank, 5, 63);
		ncclResult_t r;

		SUBMIT(r, &req, napi_coll_iallreduce(a, cc, bb, bb, big, ncclFloat32, bmh, bmh,
						     &req));
		CHECK(r == 0 && req, "64 MiB iallreduce");
		CHECK(wait_reqs(a, &req, 1, &bytes, 300) == 0, "64 MiB allreduce failed");
		reference(ncclFloat32, ref, big, world, 5, 63);
		CHECK(!memcmp(bb, ref, bytes), "64 MiB f32 differs from the rank-order sum");
		CHECK(order_matters((const float *)ref, big, world, 5, 63),
		      "the reference is order-blind: the bit-exact check would prove nothing");
		napi_coll_deregmr(a, cc, bmh);
		free(bb);
	}
	if (!a->c7) { /* v7's table has no all-gather / reduce-scatter entries */
		scen_allgather(a, cc, rank, world);
		scen_reducescatter(a, cc, rank, world);
	}
	napi_coll_deregmr(a, cc, smh);
	napi_coll_deregmr(a, cc, rmh);
	free(sb);
	free(rb);
	free(ref);
}

/* NSIZES distinct element counts, geometric from 1 to 1 Mi (4 MiB of f32), every fifth
 * bf16, DEPTH outstanding at a time, each against the rank-order reference. Under a key
 * quota far below NSIZES (the keys are reused across sizes). SC_QUOTA: a quota too small
 * even so: some collective fails with an NCCL error naming --quota-keys, none hangs. */
#define NSIZES 160
#define DEPTH 4
static void scen_sizes(struct napi *a, void *cc, int rank, int world, enum scen sc)
{
	size_t cnt[NSIZES], cap = (size_t)1 << 20;
	char *buf[DEPTH], *ref = malloc(cap * 4);
	void *mh[DEPTH];
	ncclResult_t r = ncclSuccess;

	for (int i = 0; i < NSIZES; i++) {
		size_t c = (size_t)llround(exp(log((double)cap) * i / (NSIZES - 1)));

		cnt[i] = i && c <= cnt[i - 1] ? cnt[i - 1] + 1 : c;
	}
	CHECK(ref && cnt[NSIZES - 1] == cap, "sizes");
	for (int j = 0; j < DEPTH; j++) {
		CHECK((buf[j] = malloc(cap * 4)), "malloc");
		CHECK(napi_coll_regmr(a, cc, buf[j], cap * 4, &mh[j]) == 0, "regMr");
	}
	for (int i = 0; i < NSIZES && r == ncclSuccess; i += DEPTH) {
		void *req[DEPTH] = {0};
		size_t bytes[DEPTH];
		int n = 0;

		for (; n < DEPTH && i + n < NSIZES && r == ncclSuccess; n++) {
			ncclDataType_t dt = (i + n) % 5 == 4 ? ncclBfloat16 : ncclFloat32;

			bytes[n] = cnt[i + n] * esize(dt);
			fill(dt, buf[n], cnt[i + n], rank, 3, i + n);
			SUBMIT(r, &req[n], napi_coll_iallreduce(a, cc, buf[n], buf[n], cnt[i + n], dt,
								mh[n], mh[n], &req[n]));
			CHECK(r != ncclSuccess || req[n], "size %zu: no request in 60 s", cnt[i + n]);
		}
		if (r == ncclSuccess)
			r = wait_reqs(a, req, n, bytes, 120);
		for (int k = 0; k < n && r == ncclSuccess; k++) {
			ncclDataType_t dt = (i + k) % 5 == 4 ? ncclBfloat16 : ncclFloat32;

			reference(dt, ref, cnt[i + k], world, 3, i + k);
			CHECK(!memcmp(buf[k], ref, bytes[k]), "%zu elements (%s): differs from the "
			      "rank-order sum", cnt[i + k], dt == ncclFloat32 ? "f32" : "bf16");
		}
	}
	if (sc == SC_QUOTA) {
		CHECK(r == ncclInvalidUsage || r == ncclRemoteError,
		      "the key quota was not hit (result %d)", r);
		CHECK(strstr(napi_log, "--quota-keys") && strstr(napi_log, "TALLY_NCCL_LANES"),
		      "the quota error names neither --quota-keys nor TALLY_NCCL_LANES:\n%s",
		      napi_log);
		printf("rank %d: quota too small: NCCL error %d naming --quota-keys\n", rank, r);
	} else {
		CHECK(r == ncclSuccess, "%d distinct sizes: NCCL error %d", NSIZES, r);
	}
	for (int j = 0; j < DEPTH; j++) {
		napi_coll_deregmr(a, cc, mh[j]);
		free(buf[j]);
	}
	free(ref);
}

/* Rank 0 submits an allreduce that waits for rank 1, which never submits; the parent kills
 * the appliance meanwhile: rank 0's test() must fail, naming the appliance, in time. */
static void scen_kill(struct napi *a, void *cc, int rank, struct rank_io *io)
{
	static float buf[262144];
	void *mh, *req = NULL;
	size_t bytes = sizeof(buf);
	char c = 'S';
	double t0;
	ncclResult_t r;

	CHECK(napi_coll_regmr(a, cc, buf, sizeof(buf), &mh) == 0, "regMr");
	if (rank == 1) {
		xread(io->from_parent, &c, 1); /* the appliance is dead */
		return;
	}
	fill(ncclFloat32, buf, 262144, rank, 0, 0);
	CHECK(napi_coll_iallreduce(a, cc, buf, buf, 262144, ncclFloat32, mh, mh, &req) == 0 && req,
	      "iallreduce");
	xwrite(io->to_parent, &c, 1);
	t0 = now_s();
	r = wait_reqs(a, &req, 1, &bytes, 60);
	CHECK(r == ncclRemoteError || r == ncclSystemError,
	      "allreduce with the appliance dead: result %d, want an NCCL error", r);
	CHECK(strstr(napi_log, appliance_name), "the error does not name %s:\n%s", appliance_name,
	      napi_log);
	printf("rank 0: appliance killed: NCCL error %d after %.1f s, the log names %s\n", r,
	       now_s() - t0, appliance_name);
}

/* Reduce-scatter's owner mode, from the counters the plugin logs at closeColl: the pieces
 * of the other ranks' blocks were answered header-only (their sums never came here) and no
 * sum payload came to any of them, all of them answered by closeColl (one rank alone owns
 * every block: nothing to answer). */
static void check_owner_mode(int rank, int world)
{
	const char *l = strstr(napi_log, "owner mode:");
	unsigned long long rx = 0, ops = 0, acks = 0, skipped = 0, anyway = 1;

	CHECK(l, "closeColl logged no owner-mode counters:\n%s", napi_log);
	CHECK(sscanf(l, "owner mode: %llu operations, %llu chunks answered header-only, %llu sum "
		     "bytes not received, %llu sum payloads received anyway", &ops, &acks,
		     &skipped, &anyway) == 4, "owner-mode counters unreadable: %.200s", l);
	const char *rl = strstr(napi_log, "closing: received ");
	CHECK(rl && sscanf(rl, "closing: received %llu", &rx) == 1, "no downlink figure");
	printf("rank %d owner mode: %llu operations, %llu chunks header-only, %llu sum bytes not "
	       "received, %llu payloads anyway; downlink %llu bytes\n", rank, ops, acks, skipped,
	       anyway, rx);
	CHECK(world == 1 || (ops > 0 && acks > 0 && skipped > 0),
	      "reduce-scatter pushed no piece in owner mode (the appliance offers "
	      "TALLY_CAP_NORESULT)");
	CHECK(anyway == 0, "%llu sum payloads of other ranks' blocks reached rank %d", anyway,
	      rank);
	/* closeColl waits for the background pieces: every other block was answered */
	unsigned long long want = (unsigned long long)(world - 1) * (RS_BLOCK_A + RS_BLOCK_B) * 4;
	CHECK(skipped >= want, "rank %d: %llu sum bytes not received, want at least the other "
	      "ranks' blocks, %llu", rank, skipped, want);
}

static void coll_rank(int ver, int rank, int world, enum scen sc, struct rank_io *io)
{
	struct napi a;
	unsigned char h[NCCL_NET_HANDLE_MAXSIZE], all[MAXW][NCCL_NET_HANDLE_MAXSIZE];
	void *hp[MAXW], *lc = NULL, *cc = NULL;
	int n = 0, ptr = 0;
	double t0;
	ncclResult_t r;

	load(&a, ver);
	CHECK(napi_coll_init(&a) == ncclSuccess, "collnet init");
	CHECK(napi_coll_devices(&a, &n, &ptr) == ncclSuccess && n == 1 && (ptr & NCCL_PTR_HOST),
	      "collnet devices %d ptrSupport %d", n, ptr);
	CHECK(napi_coll_listen(&a, h, &lc) == ncclSuccess, "collnet listen");
	xwrite(io->to_parent, h, sizeof(h));
	xread(io->from_parent, all, (size_t)world * sizeof(h));
	for (int i = 0; i < world; i++)
		hp[i] = all[i];
	t0 = now_s();
	r = napi_coll_connect(&a, hp, world, rank, lc, &cc);
	if (sc == SC_NOAPP || sc == SC_BADKEY) {
		CHECK(r != ncclSuccess && !cc, "connect succeeded without a (matching) appliance");
		CHECK(strstr(napi_log, sc == SC_NOAPP ? appliance_name : "TALLY_AUTH_KEY_FILE"),
		      "the connect error does not name %s:\n%s",
		      sc == SC_NOAPP ? appliance_name : "TALLY_AUTH_KEY_FILE", napi_log);
		printf("v%d connect %s: NCCL error %d after %.1f s, naming %s\n", ver,
		       sc == SC_NOAPP ? "with no appliance" : "with the wrong key", r, now_s() - t0,
		       sc == SC_NOAPP ? appliance_name : "TALLY_AUTH_KEY_FILE");
		napi_coll_close(&a, NULL, lc);
		exit(0);
	}
	CHECK(r == ncclSuccess && cc, "collnet connect: %d", r);
	CHECK(strstr(napi_log, "CollNet job"), "the log does not say which job:\n%s", napi_log);
	if (sc == SC_KILL)
		scen_kill(&a, cc, rank, io);
	else if (sc == SC_GOODKEY)
		scen_sum(&a, cc, rank, world); /* v8: no 64 MiB */
	else if (sc == SC_SIZES || sc == SC_QUOTA)
		scen_sizes(&a, cc, rank, world, sc);
	else
		scen_sum(&a, cc, rank, world);
	CHECK(napi_coll_close(&a, cc, lc) == ncclSuccess, "closeColl");
	if ((sc == SC_SUM || sc == SC_GOODKEY) && !a.c7)
		check_owner_mode(rank, world);
	exit(0);
}

/* Forks `world` ranks, passes every listen handle to every rank (NCCL's bootstrap), and for
 * SC_KILL kills the appliance once rank 0 has its allreduce in flight. 0 when all passed. */
static int run_ranks(int ver, int world, enum scen sc, pid_t *udpd, double limit_s)
{
	struct rank_io io[MAXW];
	int up[MAXW][2], down[MAXW][2];
	unsigned char all[MAXW][NCCL_NET_HANDLE_MAXSIZE];
	pid_t pids[MAXW];
	char c = 'K';

	for (int r = 0; r < world; r++) {
		CHECK(pipe(up[r]) == 0 && pipe(down[r]) == 0, "pipe");
		io[r] = (struct rank_io){up[r][1], down[r][0]};
		if (!(pids[r] = fork()))
			coll_rank(ver, r, world, sc, &io[r]);
		close(up[r][1]);
		close(down[r][0]);
	}
	for (int r = 0; r < world; r++)
		xread(up[r][0], all[r], sizeof(all[r]));
	for (int r = 0; r < world; r++)
		xwrite(down[r][1], all, (size_t)world * sizeof(all[0]));
	if (sc == SC_KILL) {
		xread(up[0][0], &c, 1);
		nccl_udpd_kill(*udpd);
		*udpd = 0;
		xwrite(down[1][1], &c, 1);
	}
	int bad = wait_all(pids, world, limit_s);
	for (int r = 0; r < world; r++) {
		close(up[r][0]);
		close(down[r][1]);
	}
	return bad;
}

static pid_t start_udpd(unsigned *port, const char *const *extra)
{
	pid_t p = nccl_udpd_start(udpd_path, port, extra);
	char env[96];

	CHECK(p > 0, "tally-udpd did not start");
	snprintf(appliance_name, sizeof(appliance_name), "127.0.0.1:%u", *port);
	snprintf(env, sizeof(env), "%s", appliance_name);
	setenv("TALLY_APPLIANCES", env, 1);
	return p;
}

static const char *const open_adm[] = {"--open", NULL};

static int mode_coll(void)
{
	static const int vers[] = {11, 10, 9, 8, 7};
	unsigned port;

	setenv("TALLY_DETERMINISTIC", "1", 1);
	for (unsigned v = 0; v < 5; v++) {
		pid_t u = start_udpd(&port, open_adm);
		double t0 = now_s();
		int bad = run_ranks(vers[v], 3, SC_SUM, &u, 400);

		nccl_udpd_stop(u);
		CHECK(!bad, "collnet v%d sums failed", vers[v]);
		printf("collnet v%d: 3 ranks, f32/f16/bf16/i32 x %zu counts (1 .. 262147), 2 rounds%s"
		       "%s: bit-exact in %.2f s\n", vers[v], NCOUNT,
		       vers[v] == 11 ? ", 64 MiB f32" : "",
		       vers[v] == 7 ? "" : ", all-gather, reduce-scatter", now_s() - t0);
	}
	return 0;
}

/* The same sums against the appliance TALLY_APPLIANCES names (tallyd, nccl_tallyd.sh) */
static int mode_coll_ext(void)
{
	static const int vers[] = {11, 8};
	const char *app = getenv("TALLY_APPLIANCES");
	pid_t none = 0;

	CHECK(app, "coll-ext needs TALLY_APPLIANCES");
	snprintf(appliance_name, sizeof(appliance_name), "%s", app);
	setenv("TALLY_DETERMINISTIC", "1", 1);
	for (unsigned v = 0; v < 2; v++) {
		double t0 = now_s();

		CHECK(run_ranks(vers[v], 3, SC_SUM, &none, 400) == 0, "collnet v%d against %s failed",
		      vers[v], app);
		printf("collnet v%d against %s: 3 ranks, every dtype and count, all-gather, "
		       "reduce-scatter%s: bit-exact in %.2f s\n", vers[v], app,
		       vers[v] == 11 ? ", 64 MiB f32" : "", now_s() - t0);
	}
	return 0;
}

static int mode_fault(void)
{
	unsigned port;
	pid_t u = start_udpd(&port, open_adm);

	setenv("TALLY_OP_TIMEOUT_MS", "3000", 1);
	setenv("TALLY_CONNECT_TIMEOUT_MS", "2000", 1);
	CHECK(run_ranks(11, 2, SC_KILL, &u, 120) == 0, "appliance killed: not an NCCL error");
	nccl_udpd_kill(u);
	/* nothing listens on the port any more */
	CHECK(run_ranks(8, 1, SC_NOAPP, &u, 120) == 0, "no appliance: not an NCCL error");
	CHECK(run_ranks(10, 1, SC_NOAPP, &u, 120) == 0, "no appliance: not an NCCL error");
	return 0;
}

/* Many distinct sizes through few keys: TALLY_NCCL_LANES=2 holds at most 2 dtypes x 15
 * piece sizes (64 B .. 1 MiB) x 2 lanes + 4 one-MiB pieces = 64 keys; the appliance allows
 * the job 64 (--quota-keys). The per-size keys of before needed one per distinct size and
 * slot (NSIZES here). Then a quota of 6: an NCCL error naming the setting. */
static int mode_sizes(void)
{
	const char *const q64[] = {"--open", "--quota-keys", "64", NULL};
	const char *const q6[] = {"--open", "--quota-keys", "6", NULL};
	unsigned port;
	double t0 = now_s();
	pid_t u = start_udpd(&port, q64);
	int bad;

	setenv("TALLY_DETERMINISTIC", "1", 1);
	setenv("TALLY_NCCL_LANES", "2", 1);
	bad = run_ranks(11, 2, SC_SIZES, &u, 400);
	nccl_udpd_stop(u);
	CHECK(!bad, "distinct sizes under a 64-key quota failed");
	printf("sizes: %d distinct sizes (1 .. 2^20 elements, f32 and bf16, %d at a time), 2 "
	       "ranks, --quota-keys 64, TALLY_NCCL_LANES=2: bit-exact in %.2f s\n", NSIZES, DEPTH,
	       now_s() - t0);
	/* a bad TALLY_NCCL_LANES: init refuses, naming it */
	pid_t c = fork();

	if (c == 0) {
		struct napi a;

		setenv("TALLY_NCCL_LANES", "0", 1);
		load(&a, 11);
		CHECK(napi_coll_init(&a) == ncclInvalidUsage && strstr(napi_log, "TALLY_NCCL_LANES"),
		      "TALLY_NCCL_LANES=0 accepted or not named:\n%s", napi_log);
		exit(0);
	}
	CHECK(wait_all(&c, 1, 60) == 0, "TALLY_NCCL_LANES=0");
	u = start_udpd(&port, q6);
	setenv("TALLY_OP_TIMEOUT_MS", "5000", 1);
	bad = run_ranks(10, 2, SC_QUOTA, &u, 200);
	nccl_udpd_stop(u);
	CHECK(!bad, "a 6-key quota: not an NCCL error naming --quota-keys");
	return 0;
}

static int write_key(const char *path, char digit)
{
	char hex[65];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	memset(hex, digit, 64);
	hex[64] = '\n';
	if (fd < 0 || write(fd, hex, 65) != 65)
		return -1;
	return close(fd);
}

static int mode_key(void)
{
	char dir[] = "/tmp/tally-nccl-key.XXXXXX", k1[64], k2[64];
	unsigned port;
	int bad;

	CHECK(mkdtemp(dir), "mkdtemp");
	snprintf(k1, sizeof(k1), "%s/job.key", dir);
	snprintf(k2, sizeof(k2), "%s/other.key", dir);
	CHECK(write_key(k1, 'a') == 0 && write_key(k2, 'b') == 0, "key files");
	const char *const adm[] = {"--job", "4242", "--token", "99", "--world", "1", "--key-file",
				   k1, NULL};
	pid_t u = start_udpd(&port, adm);

	setenv("TALLY_JOB_ID", "4242", 1);
	setenv("TALLY_TOKEN", "99", 1);
	setenv("TALLY_CONNECT_TIMEOUT_MS", "2000", 1);
	setenv("TALLY_AUTH_KEY_FILE", k2, 1);
	bad = run_ranks(11, 1, SC_BADKEY, &u, 120);
	bad |= run_ranks(9, 1, SC_BADKEY, &u, 120);
	setenv("TALLY_AUTH_KEY_FILE", k1, 1);
	setenv("TALLY_DETERMINISTIC", "1", 1);
	bad |= run_ranks(8, 1, SC_GOODKEY, &u, 200);
	nccl_udpd_stop(u);
	unlink(k1);
	unlink(k2);
	rmdir(dir);
	CHECK(!bad, "key test failed");
	printf("key: the wrong key is refused naming TALLY_AUTH_KEY_FILE; the right one sums\n");
	return 0;
}

int main(int argc, char **argv)
{
	const char *m = getenv("TALLY_TIMEOUT_MULTIPLIER");

	if (argc != 4) {
		fprintf(stderr, "usage: %s PLUGIN.so TALLY-UDPD net|coll|coll-ext|fault|key|sizes\n", argv[0]);
		return 2;
	}
	so_path = argv[1];
	udpd_path = argv[2];
	if (m && atof(m) > 0)
		tmul = atof(m);
	setvbuf(stdout, NULL, _IONBF, 0);
	alarm((unsigned)(900 * tmul)); /* a last resort: every wait has its own deadline */
	/* the plugin reads the rest of its settings from the environment at init */
	setenv("TALLY_RTO_MIN_US", "2000", 1); /* workers share 2 busy cores */
	if (!strcmp(argv[3], "net"))
		return mode_net();
	if (!strcmp(argv[3], "coll"))
		return mode_coll();
	if (!strcmp(argv[3], "coll-ext"))
		return mode_coll_ext();
	if (!strcmp(argv[3], "fault"))
		return mode_fault();
	if (!strcmp(argv[3], "key"))
		return mode_key();
	if (!strcmp(argv[3], "sizes"))
		return mode_sizes();
	fprintf(stderr, "unknown mode %s\n", argv[3]);
	return 2;
}
