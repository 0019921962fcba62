/* SPDX-License-Identifier: Apache-2.0
 * test_mpi.c — every case libtally_mpi handles, as a plain MPI program (run under mpirun,
 * with or without LD_PRELOAD=libtally_mpi*.so; the results must be the same):
 * Allreduce of f32 / MPI_INT / MPI_INT32_T, sizes 0 .. MAX bytes, in place and out of
 * place; sub-communicators (split, dup, create) in interleaved order; Iallreduce overlapped
 * with compute, completed by Test, Wait and Waitall (two of one size open at once);
 * Reduce_scatter_block and Reduce_scatter with uneven counts, in place and not;
 * unsupported types and ops (passed through); two threads on two communicators; every
 * other completion call (Testall, Testany, Waitany, Testsome, Waitsome) on arrays mixing
 * Iallreduces, plain requests and MPI_REQUEST_NULL, MPI_Cancel and MPI_Request_free of an
 * Iallreduce; 16-bit float sums where the MPI has the type (MPICH's MPIX_C_FLOAT16).
 * Values are small integers, so any summation order gives the exact sum; with --det the
 * f32 values are fractions and the result must equal, bit for bit, the sum in rank order.
 * test_mpi [--loop N (only N 1 MiB Allreduces, 20 ms apart)] [--max BYTES] [--det THRESHOLD] [--no-threads] [--f16] (--det: Allreduce sizes from the
 * threshold on only); exit 0 all passed, 1 a failure (printed).
 */
#include <dlfcn.h>
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int rank, world, fails, det, f16;
static size_t det_min; /* --det: sizes from here on are taken over (the threshold) */

#define CHECK(cond, ...)                                                                   \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "rank %d: FAIL %s:%d: ", rank, __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                                      \
			fprintf(stderr, "\n");                                             \
			fails++;                                                           \
		}                                                                          \
	} while (0)

static float fval(int r, size_t i, int salt)
{
	uint32_t x = (uint32_t)(i * 2654435761u) ^ (uint32_t)(r * 40503u + (unsigned)salt * 977u);

	x ^= x >> 13;
	x *= 0x5bd1e995u;
	x ^= x >> 15;
	if (det) /* fractions: the sum depends on the order */
		return (float)(x % 100000u) / 7.0f + 0.001f;
	return (float)((int)(x % 1024u) - 512);
}

static int32_t ival(int r, size_t i, int salt)
{
	return (int32_t)fval(r, i, salt + 1000) * 1000 + (int32_t)(i % 7);
}

/* f32 sum over the ranks of `group` (its world ranks), in their order. */
static float fsum(const int *group, int n, size_t i, int salt)
{
	float s = fval(group[0], i, salt);

	for (int p = 1; p < n; p++)
		s += fval(group[p], i, salt);
	return s;
}

static int comm_group(MPI_Comm c, int *out)
{
	int n;
	MPI_Group g, wg;

	MPI_Comm_size(c, &n);
	MPI_Comm_group(c, &g);
	MPI_Comm_group(MPI_COMM_WORLD, &wg);
	int *in = malloc(sizeof(int) * (size_t)n);
	for (int i = 0; i < n; i++)
		in[i] = i;
	MPI_Group_translate_ranks(g, n, in, wg, out);
	free(in);
	MPI_Group_free(&g);
	MPI_Group_free(&wg);
	return n;
}

static int fcheck(MPI_Comm c, const float *out, size_t n, int salt, const char *what)
{
	int g[64], ng = comm_group(c, g), bad = 0;

	for (size_t i = 0; i < n && bad < 3; i++) {
		float w = fsum(g, ng, i, salt);
		if (memcmp(&w, &out[i], 4)) {
			CHECK(0, "%s: [%zu] = %.9g, want %.9g", what, i, out[i], w);
			bad++;
		}
	}
	return bad;
}

static void t_allreduce_f32(MPI_Comm c, size_t n, int inplace, int salt, const char *what)
{
	float *in = malloc(n * 4 + 4), *out = malloc(n * 4 + 4);
	int r;

	MPI_Comm_rank(c, &r);
	(void)r;
	for (size_t i = 0; i < n; i++)
		in[i] = out[i] = fval(rank, i, salt);
	int rc = MPI_Allreduce(inplace ? MPI_IN_PLACE : in, out, (int)n, MPI_FLOAT, MPI_SUM, c);
	CHECK(rc == MPI_SUCCESS, "%s: rc %d", what, rc);
	fcheck(c, out, n, salt, what);
	if (!inplace)
		for (size_t i = 0; i < n && i < 1000; i++)
			CHECK(in[i] == fval(rank, i, salt), "%s: sendbuf changed", what);
	free(in);
	free(out);
}

static void t_allreduce_i32(MPI_Comm c, size_t n, MPI_Datatype t, int inplace, int salt)
{
	int32_t *in = malloc(n * 4 + 4), *out = malloc(n * 4 + 4);
	int g[64], ng = comm_group(c, g), bad = 0;

	for (size_t i = 0; i < n; i++)
		in[i] = out[i] = ival(rank, i, salt);
	MPI_Allreduce(inplace ? MPI_IN_PLACE : in, out, (int)n, t, MPI_SUM, c);
	for (size_t i = 0; i < n && bad < 3; i++) {
		int32_t w = 0;
		for (int p = 0; p < ng; p++)
			w += ival(g[p], i, salt);
		if (w != out[i]) {
			CHECK(0, "i32 n=%zu: [%zu] = %d, want %d", n, i, out[i], w);
			bad++;
		}
	}
	free(in);
	free(out);
}

/* Sizes 0 .. max bytes, f32 in and out of place, the two 32-bit integer types. */
static void t_sizes(size_t max)
{
	size_t sizes[] = {0, 4, 1000, 4096, 65536, 65540, 1 << 20, 3 << 20, 16 << 20, 64 << 20};

	for (unsigned k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		char what[64];

		if (sizes[k] > max || (det && sizes[k] < det_min))
			continue; /* plain MPI sums in its own order: not rank-ordered */
		snprintf(what, sizeof(what), "f32 %zu B", sizes[k]);
		t_allreduce_f32(MPI_COMM_WORLD, sizes[k] / 4, (int)(k & 1), (int)k, what);
		t_allreduce_f32(MPI_COMM_WORLD, sizes[k] / 4, !(k & 1), (int)k + 50, what);
		if (sizes[k] <= (4u << 20)) {
			t_allreduce_i32(MPI_COMM_WORLD, sizes[k] / 4, MPI_INT, (int)(k & 1), (int)k);
			t_allreduce_i32(MPI_COMM_WORLD, sizes[k] / 4, MPI_INT32_T, !(k & 1), (int)k);
		}
	}
}

/* World, halves (split), a dup and a create'd one, interleaved; freed in the middle. */
static void t_comms(void)
{
	MPI_Comm half, dup, made;
	MPI_Group wg, eg;
	int evens[32], ne = 0;

	MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
	MPI_Comm_dup(MPI_COMM_WORLD, &dup);
	for (int i = 0; i < world; i += 2)
		evens[ne++] = i;
	MPI_Comm_group(MPI_COMM_WORLD, &wg);
	MPI_Group_incl(wg, ne, evens, &eg);
	MPI_Comm_create(MPI_COMM_WORLD, eg, &made);
	for (int round = 0; round < 4; round++) {
		t_allreduce_f32(half, 40000 + (size_t)round, round & 1, 100 + round, "split");
		t_allreduce_f32(MPI_COMM_WORLD, 30000, 0, 200 + round, "world");
		t_allreduce_f32(dup, 30000, 1, 300 + round, "dup");
		if (made != MPI_COMM_NULL)
			t_allreduce_f32(made, 20000, round & 1, 400 + round, "create");
		t_allreduce_f32(half, 40000 + (size_t)round, 0, 500 + round, "split again");
	}
	MPI_Comm_free(&half); /* BYE; the job's keys are gone, a new split gets a new job */
	MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
	t_allreduce_f32(half, 40000, 0, 600, "split after free");
	MPI_Comm_free(&half);
	MPI_Comm_free(&dup);
	if (made != MPI_COMM_NULL)
		MPI_Comm_free(&made);
	MPI_Group_free(&eg);
	MPI_Group_free(&wg);
}

/* Iallreduce overlapped with compute; completed by Test (polled), Wait, Waitall; two of
 * one size open at once; a mixed Waitall with a plain request. */
static void t_iallreduce(void)
{
	enum { N = 200000, K = 5 };
	float *b[K];
	MPI_Request rq[K + 1];
	double acc = 0;

	for (int k = 0; k < K; k++) {
		b[k] = malloc(N * 4);
		for (size_t i = 0; i < N; i++)
			b[k][i] = fval(rank, i, 700 + k);
	}
	MPI_Iallreduce(MPI_IN_PLACE, b[0], N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &rq[0]);
	MPI_Iallreduce(MPI_IN_PLACE, b[1], N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &rq[1]);
	MPI_Iallreduce(MPI_IN_PLACE, b[2], N / 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &rq[2]);
	for (int i = 0; i < 2000000; i++) /* compute while the sums run */
		acc += i * 1e-9;
	int flag = 0;
	double t0 = MPI_Wtime();
	while (!flag && MPI_Wtime() - t0 < 120)
		MPI_Test(&rq[1], &flag, MPI_STATUS_IGNORE);
	CHECK(flag && rq[1] == MPI_REQUEST_NULL, "MPI_Test never completed the Iallreduce");
	MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
	CHECK(rq[0] == MPI_REQUEST_NULL, "MPI_Wait left the request");
	MPI_Iallreduce(MPI_IN_PLACE, b[3], N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &rq[3]);
	MPI_Iallreduce(MPI_IN_PLACE, b[4], 100, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &rq[4]);
	int token = rank, got = -1;
	MPI_Request plain[2];
	MPI_Irecv(&got, 1, MPI_INT, (rank + world - 1) % world, 9, MPI_COMM_WORLD, &plain[0]);
	MPI_Isend(&token, 1, MPI_INT, (rank + 1) % world, 9, MPI_COMM_WORLD, &plain[1]);
	MPI_Request all[5] = {rq[2], plain[0], rq[3], plain[1], rq[4]};
	MPI_Status sts[5];
	MPI_Waitall(5, all, sts);
	CHECK(got == (rank + world - 1) % world, "plain Irecv in a mixed Waitall: %d", got);
	for (int k = 0; k < 5; k++)
		CHECK(all[k] == MPI_REQUEST_NULL, "Waitall left request %d", k);
	size_t n[K] = {N, N, N / 2, N, 100};
	for (int k = 0; k < K; k++) {
		fcheck(MPI_COMM_WORLD, b[k], n[k], 700 + k, "iallreduce");
		free(b[k]);
	}
	CHECK(acc > 0, "compute");
}

/* Completion calls on mixed arrays: [Iallreduce, NULL, Irecv, Iallreduce, Isend]; each
 * call is driven until every request is finished, each index reported once. */
enum { CN = 60000, CK = 5 };
struct cset {
	float *b[2];
	MPI_Request rq[CK];
	int seen[CK], got, token, salt;
};

static void cset_start(struct cset *c, int salt)
{
	c->salt = salt;
	c->token = rank + salt;
	c->got = -1;
	memset(c->seen, 0, sizeof(c->seen));
	for (int k = 0; k < 2; k++) {
		c->b[k] = malloc(CN * 4);
		for (size_t i = 0; i < CN; i++)
			c->b[k][i] = fval(rank, i, salt + k);
	}
	MPI_Iallreduce(MPI_IN_PLACE, c->b[0], CN, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &c->rq[0]);
	c->rq[1] = MPI_REQUEST_NULL;
	MPI_Irecv(&c->got, 1, MPI_INT, (rank + world - 1) % world, salt, MPI_COMM_WORLD,
		  &c->rq[2]);
	MPI_Iallreduce(MPI_IN_PLACE, c->b[1], CN, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &c->rq[3]);
	MPI_Isend(&c->token, 1, MPI_INT, (rank + 1) % world, salt, MPI_COMM_WORLD, &c->rq[4]);
}

static void cset_check(struct cset *c, const char *what)
{
	for (int k = 0; k < CK; k++) {
		CHECK(c->rq[k] == MPI_REQUEST_NULL, "%s: request %d left open", what, k);
		CHECK(c->seen[k] == (k != 1), "%s: request %d reported %d times", what, k,
		      c->seen[k]);
	}
	CHECK(c->got == (rank + world - 1) % world + c->salt, "%s: plain Irecv got %d", what,
	      c->got);
	for (int k = 0; k < 2; k++) {
		fcheck(MPI_COMM_WORLD, c->b[k], CN, c->salt + k, what);
		free(c->b[k]);
	}
}

static void t_completion(void)
{
	/* through a volatile: MPICH's mpi.h attributes make GCC see a 0-byte array */
	MPI_Status *volatile ignore = MPI_STATUSES_IGNORE;
	struct cset c;
	int idx[CK], n, flag;
	double t0;

	cset_start(&c, 3000); /* Waitany until MPI_UNDEFINED */
	for (int i = 0; i < CK + 1; i++) {
		MPI_Status st;
		MPI_Waitany(CK, c.rq, &idx[0], &st);
		if (idx[0] == MPI_UNDEFINED)
			break;
		c.seen[idx[0]]++;
	}
	cset_check(&c, "Waitany");

	cset_start(&c, 3100); /* Waitsome, MPI_STATUSES_IGNORE */
	for (int i = 0; i < CK + 1; i++) {
		MPI_Waitsome(CK, c.rq, &n, idx, ignore);
		if (n == MPI_UNDEFINED)
			break;
		for (int j = 0; j < n; j++)
			c.seen[idx[j]]++;
	}
	cset_check(&c, "Waitsome");

	cset_start(&c, 3200); /* Testany polled */
	for (t0 = MPI_Wtime(); MPI_Wtime() - t0 < 120;) {
		MPI_Testany(CK, c.rq, &idx[0], &flag, MPI_STATUS_IGNORE);
		if (flag && idx[0] == MPI_UNDEFINED)
			break;
		if (flag)
			c.seen[idx[0]]++;
	}
	cset_check(&c, "Testany");

	cset_start(&c, 3300); /* Testsome polled, MPI_STATUSES_IGNORE */
	for (t0 = MPI_Wtime(); MPI_Wtime() - t0 < 120;) {
		MPI_Testsome(CK, c.rq, &n, idx, ignore);
		if (n == MPI_UNDEFINED)
			break;
		for (int j = 0; j < n; j++)
			c.seen[idx[j]]++;
	}
	cset_check(&c, "Testsome");

	cset_start(&c, 3400); /* Testall polled: all at once or none */
	MPI_Status sts[CK];
	t0 = MPI_Wtime();
	flag = 0;
	for (int it = 0; !flag && MPI_Wtime() - t0 < 120; it++) {
		MPI_Testall(CK, c.rq, &flag, (it & 1) ? ignore : sts);
		int open = 0;
		for (int k = 0; k < CK; k++)
			open += c.rq[k] != MPI_REQUEST_NULL;
		CHECK(flag ? open == 0 : open == 4, "Testall: flag %d with %d open", flag, open);
	}
	for (int k = 0; k < CK; k++)
		c.seen[k] = k != 1;
	cset_check(&c, "Testall");
}

/* MPI_Cancel of an Iallreduce: it completes anyway (a sum cannot be taken back) and
 * MPI_Test_cancelled says so. MPI_Request_free of one is erroneous (MPI-3.1 5.12): an
 * error, and the request still completes through MPI_Wait. */
static void t_cancel_free(void)
{
	enum { N = 70000 };
	float *b = malloc(N * 4), *f = malloc(N * 4);
	MPI_Request rq;
	MPI_Status st;
	int cancelled = -1;

	for (size_t i = 0; i < N; i++)
		b[i] = fval(rank, i, 3500), f[i] = fval(rank, i, 3501);
	MPI_Iallreduce(MPI_IN_PLACE, b, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &rq);
	MPI_Cancel(&rq);
	MPI_Wait(&rq, &st);
	MPI_Test_cancelled(&st, &cancelled);
	CHECK(cancelled == 0 && rq == MPI_REQUEST_NULL, "MPI_Cancel: cancelled=%d", cancelled);
	fcheck(MPI_COMM_WORLD, b, N, 3500, "Iallreduce after MPI_Cancel");

	MPI_Iallreduce(MPI_IN_PLACE, f, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &rq);
	MPI_Request keep = rq;
	int rc = MPI_Request_free(&rq);
	CHECK(rc != MPI_SUCCESS && rq == keep, "MPI_Request_free of an Iallreduce: rc %d", rc);
	MPI_Wait(&rq, MPI_STATUS_IGNORE);
	CHECK(rq == MPI_REQUEST_NULL, "MPI_Wait after a refused MPI_Request_free");
	fcheck(MPI_COMM_WORLD, f, N, 3501, "Iallreduce after a refused MPI_Request_free");
	free(b);
	free(f);
}

#ifdef MPIX_C_FLOAT16
/* 16-bit floats (MPICH's MPIX_C_FLOAT16 = IEEE binary16): quarter integers (exact in any
 * order), or with --det fractions whose sum must equal, bit for bit, the rank-ordered one
 * the appliance computes (widened to f32, summed in rank order, rounded to nearest even).
 * Debian's MPICH 4.0.2 cannot sum MPIX_C_FLOAT16 itself (its Allreduce aborts in yaksa's
 * pack, "actual_pack_bytes == data_sz", any size): only with --f16 (an appliance there),
 * only sizes libtally_mpi takes over (from TALLY_MPI_THRESHOLD), and none without it. */
static _Float16 hval(int r, size_t i, int salt)
{
	float v = fval(r, i, salt);

	return det ? (_Float16)(v / 4096.0f) : (_Float16)(v / 4.0f);
}

static void t_f16(size_t max)
{
	size_t sizes[] = {1000, 8192, 65538, 1 << 20, (3 << 20) + 2};
	const char *th = getenv("TALLY_MPI_THRESHOLD");
	size_t min = th ? strtoull(th, NULL, 0) : 65536;
	int checked = 0;

	if (!f16)
		return;
	if (!dlsym(RTLD_DEFAULT, "tally_mpi_cfg_from_env")) {
		if (rank == 0)
			printf("f16: not run without libtally_mpi (MPICH 4.0.2 aborts on it)\n");
		return;
	}
	for (unsigned k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t n = sizes[k] / 2, bad = 0;
		if (sizes[k] > max || sizes[k] < min)
			continue;
		_Float16 *in = malloc(n * 2), *out = malloc(n * 2);
		for (size_t i = 0; i < n; i++)
			in[i] = out[i] = hval(rank, i, 3600 + (int)k);
		MPI_Allreduce((k & 1) ? MPI_IN_PLACE : in, out, (int)n, MPIX_C_FLOAT16, MPI_SUM,
			      MPI_COMM_WORLD);
		for (size_t i = 0; i < n && bad < 3; i++) {
			float acc = (float)hval(0, i, 3600 + (int)k);
			for (int p = 1; p < world; p++)
				acc += (float)hval(p, i, 3600 + (int)k);
			_Float16 w = (_Float16)acc;
			if (memcmp(&w, &out[i], 2)) {
				CHECK(0, "f16 %zu B: [%zu] = %.6g, want %.6g", sizes[k], i,
				      (double)out[i], (double)w);
				bad++;
			}
		}
		checked++;
		free(in);
		free(out);
	}
	if (rank == 0)
		printf("f16: MPIX_C_FLOAT16 sums checked at %d sizes\n", checked);
}
#else
static void t_f16(size_t max)
{
	(void)max;
	if (rank == 0)
		printf("f16: this MPI has no 16-bit float type\n");
}
#endif

/* Reduce_scatter_block and Reduce_scatter with uneven counts (rank r gets (world-r)*B+r),
 * in place and out of place. Counts fall with the rank: MPICH 4.0.2's own in-place
 * Reduce_scatter aborts (memcpy overlap in yaksa) when a rank's block is longer than its
 * displacement, so the plain run could not compare rising counts. */
static void t_reduce_scatter(void)
{
	enum { B = 20000 };
	int counts[64], g[64];
	size_t tot = 0, off = 0;

	for (int p = 0; p < world; p++) {
		counts[p] = (world - p) * B + p;
		if (p == rank)
			off = tot;
		tot += (size_t)counts[p];
	}
	comm_group(MPI_COMM_WORLD, g);
	for (int inplace = 0; inplace < 2; inplace++) {
		float *in = malloc(tot * 4), *out = malloc(tot * 4);
		for (size_t i = 0; i < tot; i++)
			in[i] = out[i] = fval(rank, i, 800 + inplace);
		MPI_Reduce_scatter(inplace ? MPI_IN_PLACE : in, inplace ? in : out, counts,
				   MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		float *res = inplace ? in : out;
		for (int i = 0, bad = 0; i < counts[rank] && bad < 3; i++) {
			float w = fsum(g, world, off + (size_t)i, 800 + inplace);
			if (memcmp(&w, &res[i], 4)) {
				CHECK(0, "reduce_scatter inplace=%d [%d] %.9g want %.9g", inplace, i,
				      res[i], w);
				bad++;
			}
		}
		/* block: world * B elements, rank r gets [r*B, (r+1)*B) */
		for (size_t i = 0; i < (size_t)world * B; i++)
			in[i] = fval(rank, i, 850 + inplace);
		MPI_Reduce_scatter_block(inplace ? MPI_IN_PLACE : in, inplace ? in : out, B,
					 MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		for (int i = 0, bad = 0; i < B && bad < 3; i++) {
			float w = fsum(g, world, (size_t)rank * B + (size_t)i, 850 + inplace);
			if (memcmp(&w, &res[i], 4)) {
				CHECK(0, "reduce_scatter_block inplace=%d [%d] %.9g want %.9g",
				      inplace, i, res[i], w);
				bad++;
			}
		}
		free(in);
		free(out);
	}
}

/* Not taken over: double, MPI_MAX, short; results as plain MPI's. */
static void t_passthrough(void)
{
	enum { N = 100000 };
	double *d = malloc(N * 8);
	float *f = malloc(N * 4);
	short *s = malloc(N * 2);

	for (size_t i = 0; i < N; i++) {
		d[i] = fval(rank, i, 900) * 0.5;
		f[i] = fval(rank, i, 901);
		s[i] = (short)(rank + (int)(i % 100));
	}
	MPI_Allreduce(MPI_IN_PLACE, d, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	MPI_Allreduce(MPI_IN_PLACE, f, N, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
	MPI_Allreduce(MPI_IN_PLACE, s, N, MPI_SHORT, MPI_SUM, MPI_COMM_WORLD);
	for (size_t i = 0, bad = 0; i < N && bad < 3; i++) {
		double wd = 0;
		float wf = fval(0, i, 901);
		short ws = 0;
		for (int p = 0; p < world; p++) {
			wd += fval(p, i, 900) * 0.5;
			wf = fval(p, i, 901) > wf ? fval(p, i, 901) : wf;
			ws = (short)(ws + p + (int)(i % 100));
		}
		if (d[i] != wd || f[i] != wf || s[i] != ws) {
			CHECK(0, "passthrough [%zu]: %g/%g %g/%g %d/%d", i, d[i], wd, f[i], wf, s[i],
			      ws);
			bad++;
		}
	}
	free(d);
	free(f);
	free(s);
}

/* Two threads, each on its own communicator (MPI_THREAD_MULTIPLE). */
struct thr {
	MPI_Comm c;
	int salt;
};

static void *thr_main(void *arg)
{
	struct thr *t = arg;

	for (int i = 0; i < 6; i++) {
		t_allreduce_f32(t->c, 50000 + (size_t)(i * 7), i & 1, t->salt + i, "thread");
		float *b = malloc(30000 * 4);
		MPI_Request rq;
		for (size_t k = 0; k < 30000; k++)
			b[k] = fval(rank, k, t->salt + 50 + i);
		MPI_Iallreduce(MPI_IN_PLACE, b, 30000, MPI_FLOAT, MPI_SUM, t->c, &rq);
		MPI_Wait(&rq, MPI_STATUS_IGNORE);
		fcheck(t->c, b, 30000, t->salt + 50 + i, "thread iallreduce");
		free(b);
	}
	return NULL;
}

static void t_threads(void)
{
	struct thr t[2];
	pthread_t th[2];

	MPI_Comm_dup(MPI_COMM_WORLD, &t[0].c);
	MPI_Comm_dup(MPI_COMM_WORLD, &t[1].c);
	t[0].salt = 1000;
	t[1].salt = 2000;
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, thr_main, &t[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	MPI_Comm_free(&t[0].c);
	MPI_Comm_free(&t[1].c);
}

int main(int argc, char **argv)
{
	size_t max = 64u << 20;
	int threads = 1, provided = 0, total = 0, loop = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--max") && i + 1 < argc)
			max = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--det") && i + 1 < argc)
			det = 1, det_min = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--loop") && i + 1 < argc)
			loop = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--no-threads"))
			threads = 0;
		else if (!strcmp(argv[i], "--f16"))
			f16 = 1;
	}
	MPI_Init_thread(&argc, &argv, threads ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE,
			&provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &world);
	/* errors come back as return codes: the test reports them */
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	double t0 = MPI_Wtime();
	for (int i = 0; i < loop; i++) { /* --loop N: while an appliance is killed */
		t_allreduce_f32(MPI_COMM_WORLD, 262144, i & 1, i, "loop");
		if (fails)
			break; /* the appliance is gone: every rank's sum failed alike */
		if (rank == 0 && i == loop / 4)
			printf("loop: quarter\n"), fflush(stdout);
		struct timespec ts = {0, 20000000};
		nanosleep(&ts, NULL);
	}
	if (!loop) {
		t_sizes(max);
		t_f16(max);
	}
	if (!det && !loop) {
		t_comms();
		t_iallreduce();
		t_completion();
		t_cancel_free();
		t_reduce_scatter();
		t_passthrough();
		if (threads && provided == MPI_THREAD_MULTIPLE)
			t_threads();
		else if (threads && rank == 0)
			printf("threads: MPI gave thread level %d, not MULTIPLE: skipped\n", provided);
	}
	MPI_Allreduce(&fails, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("test_mpi: %s (%d failures, %.1f s, det=%d, max %zu B)\n",
		       total ? "FAIL" : "ok", total, MPI_Wtime() - t0, det, max);
	MPI_Finalize();
	return total ? 1 : 0;
}
