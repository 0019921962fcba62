/* SPDX-License-Identifier: Apache-2.0
 * test_opt_cuda.c — the fused CUDA optimizer kernels vs the CPU twins on the same inputs:
 * bit-identical for SGD/Adam/AdamW (both sides avoid FMA and round sqrt/div exactly), LAMB
 * within 1e-6 relative (norms summed in another order). Enough tensors and chunks to need
 * several launches. Exits 77 (skip) with the CUDA error where there is no usable GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "tally_opt.h"

#define NT 40 /* > tensors per launch */

static size_t tsize(int j)
{
	return j == 5 ? 3u * 1000 * 1000 + 7 : (size_t)(j * 997 + 1); /* one > blocks per launch */
}

static int check(cudaError_t e, const char *what)
{
	if (e != cudaSuccess) {
		fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
		exit(1);
	}
	return 0;
}

int main(void)
{
	int ndev = 0, fails = 0;
	cudaError_t e = cudaGetDeviceCount(&ndev);

	if (e != cudaSuccess || ndev == 0) {
		printf("SKIP: no usable GPU (cudaGetDeviceCount: %s, error %d)\n",
		       e != cudaSuccess ? cudaGetErrorString(e) : "0 devices", (int)e);
		return 77;
	}
	struct tally_opt_cfg cfgs[] = {
		{.kind = TALLY_OPT_SGD, .lr = 0.1f, .momentum = 0.9f, .weight_decay = 1e-4f, .first = 0},
		{.kind = TALLY_OPT_SGD, .lr = 0.05f, .momentum = 0.9f, .nesterov = 1, .first = 1},
		{.kind = TALLY_OPT_ADAM, .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .step = 5,
		 .weight_decay = 1e-2f},
		{.kind = TALLY_OPT_ADAMW, .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .step = 2,
		 .weight_decay = 1e-2f},
		{.kind = TALLY_OPT_LAMB, .lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-6f, .step = 3,
		 .weight_decay = 1e-2f},
	};
	for (size_t c = 0; c < sizeof(cfgs) / sizeof(cfgs[0]); c++) {
		struct tally_opt_tensor h[NT], d[NT];
		float *dp[NT];
		uint32_t r = 77;

		for (int j = 0; j < NT; j++) {
			size_t n = tsize(j), b = n * sizeof(float);
			float *buf[4];

			for (int q = 0; q < 4; q++) {
				buf[q] = malloc(b);
				for (size_t i = 0; i < n; i++) {
					r = r * 1664525u + 1013904223u;
					float x = (float)((r >> 8) & 0xffff) / 32768.0f - 1.0f;
					buf[q][i] = q == 3 ? fabsf(x) * 1e-4f : q == 1 ? x * 0.1f : x;
				}
			}
			h[j] = (struct tally_opt_tensor){buf[0], buf[1], buf[2], buf[3], n};
			float *dd[4];
			for (int q = 0; q < 4; q++) {
				check(cudaMalloc((void **)&dd[q], b), "cudaMalloc");
				check(cudaMemcpy(dd[q], buf[q], b, cudaMemcpyHostToDevice), "H2D");
			}
			d[j] = (struct tally_opt_tensor){dd[0], dd[1], dd[2], dd[3], n};
			dp[j] = dd[0];
		}
		int rc = tally_opt_step_cuda(&cfgs[c], d, NT, NULL);
		if (rc) {
			printf("FAIL cfg %zu: tally_opt_step_cuda %d: %s\n", c, rc, tally_opt_cuda_error());
			return 1;
		}
		check(cudaDeviceSynchronize(), "sync");
		tally_opt_step_cpu(&cfgs[c], h, NT);
		size_t bad = 0;
		for (int j = 0; j < NT; j++) {
			float *got = malloc(h[j].n * sizeof(float));
			check(cudaMemcpy(got, dp[j], h[j].n * sizeof(float), cudaMemcpyDeviceToHost), "D2H");
			for (size_t i = 0; i < h[j].n; i++) {
				float want = h[j].param[i];
				int ok = cfgs[c].kind == TALLY_OPT_LAMB
						 ? fabsf(got[i] - want) <= 1e-6f * fabsf(want) + 1e-9f
						 : memcmp(&got[i], &want, sizeof(float)) == 0;
				if (!ok && bad++ < 5)
					printf("  cfg %zu tensor %d [%zu]: gpu %.9g cpu %.9g\n", c, j, i, got[i], want);
			}
			free(got);
			free(h[j].param);
			free((void *)h[j].grad);
			free(h[j].m);
			free(h[j].v);
			cudaFree(d[j].param);
			cudaFree((void *)d[j].grad);
			cudaFree(d[j].m);
			cudaFree(d[j].v);
		}
		printf("%s cfg %zu (kind %d): %zu mismatches\n", bad ? "FAIL" : "ok  ", c, cfgs[c].kind, bad);
		fails += bad != 0;
	}
	return fails ? 1 : 0;
}
