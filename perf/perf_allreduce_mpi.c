/* SPDX-License-Identifier: Apache-2.0
 * perf_allreduce_mpi.c — one rank of OpenMPI's MPI_Allreduce (float sum) for tally-perf
 * allreduce: tally-perf-mpi BYTES ROUNDS [WARMUP]. Prints one JSON line per rank: rank, seconds
 * (allreduce only, the ROUNDS timed rounds after WARMUP untimed ones), ok (every element of
 * every round equals the exact sum).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Small integers as floats: any summation order gives the exact sum. */
static float mpi_val(int rank, size_t i)
{
	uint32_t x = (uint32_t)(i * 2654435761u) ^ (uint32_t)(rank * 40503u + 17u);

	x ^= x >> 13;
	x *= 0x5bd1e995u;
	x ^= x >> 15;
	return (float)((int)(x % 1024u) - 512);
}

int main(int argc, char **argv)
{
	int rank = 0, world = 1, ok = 1, rc = 1;
	double secs = 0;
	float *in = NULL, *out = NULL;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &world);
	long long bytes = argc > 1 ? atoll(argv[1]) : 0;
	int rounds = argc > 2 ? atoi(argv[2]) : 0;
	int warmup = argc > 3 ? atoi(argv[3]) : 0;
	if (bytes < 4 || rounds < 1 || warmup < 0 || warmup > 1000) {
		if (!rank)
			fprintf(stderr, "usage: tally-perf-mpi BYTES ROUNDS [WARMUP]\n");
		goto out;
	}
	size_t n = (size_t)bytes / 4;
	in = malloc(n * sizeof(float));
	out = malloc(n * sizeof(float));
	if (!in || !out)
		goto out;
	for (size_t i = 0; i < n; i++)
		in[i] = mpi_val(rank, i);
	MPI_Barrier(MPI_COMM_WORLD);
	for (int r = 0; r < warmup + rounds; r++) {
		/* every round starts together: a rank still checking the last result would
		 * otherwise take CPU from the others' timed round (shared cores) */
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = MPI_Wtime();

		MPI_Allreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		if (r >= warmup)
			secs += MPI_Wtime() - t0;
		for (size_t i = 0; i < n && ok; i++) {
			float want = 0;

			for (int p = 0; p < world; p++)
				want += mpi_val(p, i);
			ok = out[i] == want;
		}
		memset(out, 0, n * sizeof(float));
	}
	printf("{\"impl\":\"mpi\",\"rank\":%d,\"seconds\":%.6f,\"ok\":%s}\n", rank, secs,
	       ok ? "true" : "false");
	fflush(stdout);
	rc = 0;
out:
	free(in);
	free(out);
	MPI_Finalize();
	return rc;
}
