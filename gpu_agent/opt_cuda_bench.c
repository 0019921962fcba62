/* SPDX-License-Identifier: Apache-2.0
 * opt_cuda_bench.c — tally-opt-bench: bandwidth of the fused CUDA optimizer kernels vs the
 * GPU's own device-to-device copy bandwidth, measured in the same run. Prints figures only.
 *   tally-opt-bench [MELEMS per tensor (default 64)] [tensors (default 4)]
 * Bytes moved per element: SGD+momentum 20 (p,g,m read; p,m written), Adam/AdamW 28,
 * LAMB 48 (two passes); copy counts read + write. */
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "tally_opt.h"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
	fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); return 1; } } while (0)

int main(int argc, char **argv)
{
	size_t n = (size_t)(argc > 1 ? atof(argv[1]) : 64) * 1000 * 1000;
	int nt = argc > 2 ? atoi(argv[2]) : 4, ndev = 0, reps = 20;
	cudaEvent_t a, b;
	float ms;

	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
		fprintf(stderr, "tally-opt-bench: no usable GPU\n");
		return 77;
	}
	struct tally_opt_tensor *t = calloc((size_t)nt, sizeof(*t));
	for (int j = 0; j < nt; j++) {
		float *q[4];
		for (int k = 0; k < 4; k++) {
			CK(cudaMalloc((void **)&q[k], n * sizeof(float)));
			CK(cudaMemset(q[k], 0, n * sizeof(float)));
		}
		t[j] = (struct tally_opt_tensor){q[0], q[1], q[2], q[3], n};
	}
	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	/* copy bandwidth: p -> m of every tensor */
	CK(cudaEventRecord(a, 0));
	for (int r = 0; r < reps; r++)
		for (int j = 0; j < nt; j++)
			CK(cudaMemcpyAsync(t[j].m, t[j].param, n * sizeof(float), cudaMemcpyDeviceToDevice, 0));
	CK(cudaEventRecord(b, 0));
	CK(cudaEventSynchronize(b));
	CK(cudaEventElapsedTime(&ms, a, b));
	double copy_gbs = 2.0 * n * sizeof(float) * nt * reps / (ms * 1e6);
	printf("d2d copy: %.1f GB/s (read+write)\n", copy_gbs);
	struct { const char *name; int kind; double bytes; } ks[] = {
		{"sgd+momentum", TALLY_OPT_SGD, 20}, {"adam", TALLY_OPT_ADAM, 28},
		{"adamw", TALLY_OPT_ADAMW, 28}, {"lamb", TALLY_OPT_LAMB, 48},
	};
	for (size_t k = 0; k < sizeof(ks) / sizeof(ks[0]); k++) {
		struct tally_opt_cfg cfg;
		tally_opt_cfg_defaults(&cfg, ks[k].kind);
		cfg.momentum = 0.9f;
		cfg.first = 0;
		if (tally_opt_step_cuda(&cfg, t, (size_t)nt, NULL)) { /* warm-up */
			fprintf(stderr, "%s: %s\n", ks[k].name, tally_opt_cuda_error());
			return 1;
		}
		CK(cudaEventRecord(a, 0));
		for (int r = 0; r < reps; r++)
			tally_opt_step_cuda(&cfg, t, (size_t)nt, NULL);
		CK(cudaEventRecord(b, 0));
		CK(cudaEventSynchronize(b));
		CK(cudaEventElapsedTime(&ms, a, b));
		double gbs = ks[k].bytes * n * nt * reps / (ms * 1e6);
		printf("%-13s %.1f GB/s  ratio to copy %.3f\n", ks[k].name, gbs, gbs / copy_gbs);
	}
	return 0;
}
