/* SPDX-License-Identifier: Apache-2.0
 * test_opt_cuda.c — the fused CUDA optimizer kernels vs the CPU twins on the same inputs:
 * parameters bit-identical for SGD/Adam/AdamW (both sides avoid FMA and round sqrt/div
 * exactly), LAMB's within 1e-6 relative (norms summed in another order); moments
 * bit-identical for all. Enough tensors to need several launches, sizes that are not
 * multiples of 4, and every configuration twice: 16-byte-aligned arrays (the float4 path)
 * and arrays one float off (the element path). Exits 77 (skip) with the CUDA error where
 * there is no usable GPU. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "tally_opt.h"

#define NT 52 /* > tensors per launch (48) */

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

static void fill(float *buf, size_t n, int q, uint32_t *r)
{
	for (size_t i = 0; i < n; i++) {
		*r = *r * 1664525u + 1013904223u;
		float x = (float)((*r >> 8) & 0xffff) / 32768.0f - 1.0f;
		buf[i] = q == 3 ? fabsf(x) * 1e-4f : q == 1 ? x * 0.1f : x;
	}
}

/* Compares array q of tensor j: 0 param (LAMB: within 1e-6 relative), 2 m, 3 v (bitwise). */
static size_t compare(const struct tally_opt_cfg *cfg, size_t c, int j, int q, const float *got,
		      const float *want, size_t n)
{
	size_t bad = 0;

	for (size_t i = 0; i < n; i++) {
		int ok = q == 0 && cfg->kind == TALLY_OPT_LAMB
				 ? fabsf(got[i] - want[i]) <= 1e-6f * fabsf(want[i]) + 1e-9f
				 : memcmp(&got[i], &want[i], sizeof(float)) == 0;
		if (!ok && bad++ < 3)
			printf("  run %zu tensor %d array %d [%zu]: gpu %.9g cpu %.9g\n", c, j, q, i, got[i],
			       want[i]);
	}
	return bad;
}

/* One step of cfg on NT tensors, GPU vs CPU; off: arrays start this many floats into their
 * allocation (1: not 16-byte aligned). */
static int run_cfg(const struct tally_opt_cfg *cfg, size_t off, size_t c)
{
	struct tally_opt_tensor h[NT], d[NT];
	float *base[NT][4];
	uint32_t r = 77;
	size_t bad = 0;

	for (int j = 0; j < NT; j++) {
		size_t n = tsize(j), b = n * sizeof(float);
		float *buf[4], *dd[4];

		for (int q = 0; q < 4; q++) {
			buf[q] = malloc(b);
			fill(buf[q], n, q, &r);
			check(cudaMalloc((void **)&base[j][q], b + 16), "cudaMalloc");
			dd[q] = base[j][q] + off;
			check(cudaMemcpy(dd[q], buf[q], b, cudaMemcpyHostToDevice), "H2D");
		}
		h[j] = (struct tally_opt_tensor){buf[0], buf[1], buf[2], buf[3], n};
		d[j] = (struct tally_opt_tensor){dd[0], dd[1], dd[2], dd[3], n};
	}
	int rc = tally_opt_step_cuda(cfg, d, NT, NULL);
	if (rc) {
		printf("FAIL run %zu: tally_opt_step_cuda %d: %s\n", c, rc, tally_opt_cuda_error());
		return 1;
	}
	check(cudaDeviceSynchronize(), "sync");
	tally_opt_step_cpu(cfg, h, NT);
	for (int j = 0; j < NT; j++) {
		float *got = malloc(h[j].n * sizeof(float));
		const float *want[4] = {h[j].param, h[j].grad, h[j].m, h[j].v};
		const float *dev[4] = {d[j].param, d[j].grad, d[j].m, d[j].v};

		for (int q = 0; q < 4; q++) {
			if (q != 1) {
				check(cudaMemcpy(got, dev[q], h[j].n * sizeof(float), cudaMemcpyDeviceToHost), "D2H");
				bad += compare(cfg, c, j, q, got, want[q], h[j].n);
			}
			free((void *)want[q]);
			cudaFree(base[j][q]);
		}
		free(got);
	}
	printf("%s run %zu (kind %d, %s arrays): %zu mismatches\n", bad ? "FAIL" : "ok  ", c, cfg->kind,
	       off ? "unaligned" : "aligned", bad);
	return bad != 0;
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
		{.kind = TALLY_OPT_SGD, .lr = 0.1f, .momentum = 0.0f, .weight_decay = 1e-4f},
		{.kind = TALLY_OPT_SGD, .lr = 0.1f, .momentum = 0.9f, .weight_decay = 1e-4f, .first = 0},
		{.kind = TALLY_OPT_SGD, .lr = 0.05f, .momentum = 0.9f, .nesterov = 1, .first = 1},
		{.kind = TALLY_OPT_ADAM, .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .step = 5,
		 .weight_decay = 1e-2f},
		{.kind = TALLY_OPT_ADAMW, .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .step = 2,
		 .weight_decay = 1e-2f},
		{.kind = TALLY_OPT_LAMB, .lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-6f, .step = 3,
		 .weight_decay = 1e-2f},
	};
	size_t ncfg = sizeof(cfgs) / sizeof(cfgs[0]);
	for (size_t c = 0; c < 2 * ncfg; c++)
		fails += run_cfg(&cfgs[c % ncfg], c / ncfg, c) != 0;
	return fails ? 1 : 0;
}
