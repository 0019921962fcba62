/* SPDX-License-Identifier: Apache-2.0
 * opt_cuda_bench.c — tally-opt-bench: bandwidth of the fused CUDA optimizer kernels vs the
 * GPU's own device-to-device copy bandwidth, both measured in the same run at each size.
 * Prints figures only.
 *   tally-opt-bench [--elems N,N,...] [--tensors T] [--json]
 * N: total elements per step (default 1e6,1e7,1e8,1e9), split over T tensors (default 4)
 * carved out of one allocation per array (as a flattened parameter buffer; each tensor starts
 * on a 128-byte boundary). The copy is one cudaMemcpyAsync of all N elements: the device's
 * own bandwidth at that size, however many tensors the kernels are given.
 * Bytes moved per element: SGD+momentum 20 (p,g,m read; p,m written), Adam/AdamW 28,
 * LAMB 40 (pass 1 reads p,g,m,v and writes m,v; pass 2 reads p,m,v and writes p); the copy
 * counts read + write. Each figure is the mean over enough repetitions for ~0.2 s. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "tally_opt.h"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
	fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

static const struct { const char *name; int kind; double bytes; } kinds[] = {
	{"sgd+momentum", TALLY_OPT_SGD, 20}, {"adam", TALLY_OPT_ADAM, 28},
	{"adamw", TALLY_OPT_ADAMW, 28}, {"lamb", TALLY_OPT_LAMB, 40},
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

static cudaEvent_t ev_a, ev_b;

/* Seconds per repetition of one step of kind k (k < 0: the copy of all p to all m). */
static double timed(int k, struct tally_opt_tensor *t, int nt, size_t total, int reps)
{
	struct tally_opt_cfg cfg;
	float ms;

	if (k >= 0) {
		tally_opt_cfg_defaults(&cfg, kinds[k].kind);
		cfg.momentum = 0.9f;
		cfg.first = 0;
	}
	for (int r = -1; r < reps; r++) { /* r = -1: warm-up, not timed */
		if (r == 0)
			CK(cudaEventRecord(ev_a, 0));
		if (k < 0)
			CK(cudaMemcpyAsync(t[0].m, t[0].param, total * sizeof(float), cudaMemcpyDeviceToDevice, 0));
		if (k >= 0 && tally_opt_step_cuda(&cfg, t, (size_t)nt, NULL)) {
			fprintf(stderr, "%s: %s\n", kinds[k].name, tally_opt_cuda_error());
			exit(1);
		}
	}
	CK(cudaEventRecord(ev_b, 0));
	CK(cudaEventSynchronize(ev_b));
	CK(cudaEventElapsedTime(&ms, ev_a, ev_b));
	return ms / 1e3 / reps;
}

static void one_size(size_t total, int nt, int json)
{
	struct tally_opt_tensor *t = calloc((size_t)nt, sizeof(*t));
	size_t per = total / (size_t)nt / 32 * 32;
	float *q[4];
	double res[NKINDS];

	for (int a = 0; a < 4; a++) {
		CK(cudaMalloc((void **)&q[a], total * sizeof(float)));
		CK(cudaMemset(q[a], 0, total * sizeof(float)));
	}
	for (int j = 0; j < nt; j++) {
		size_t o = per * (size_t)j, n = j == nt - 1 ? total - o : per;

		t[j] = (struct tally_opt_tensor){q[0] + o, q[1] + o, q[2] + o, q[3] + o, n};
	}
	/* ~0.2 s per figure at the copy's speed, at least 5 repetitions */
	int reps = (int)(2e11 / (8.0 * (double)total) / 1e3);
	reps = reps < 5 ? 5 : reps > 5000 ? 5000 : reps;
	double copy = 8.0 * (double)total / timed(-1, t, nt, total, reps) / 1e9;
	for (size_t k = 0; k < NKINDS; k++)
		res[k] = kinds[k].bytes * (double)total / timed((int)k, t, nt, total, reps) / 1e9;
	if (json) {
		printf("{\"elems\": %zu, \"tensors\": %d, \"reps\": %d, \"copy_gbs\": %.1f", total, nt, reps, copy);
		for (size_t k = 0; k < NKINDS; k++)
			printf(", \"%s_gbs\": %.1f, \"%s_ratio\": %.3f", kinds[k].name, res[k], kinds[k].name,
			       res[k] / copy);
		printf("}\n");
	} else {
		printf("%-12zu %9.1f", total, copy);
		for (size_t k = 0; k < NKINDS; k++)
			printf("  %8.1f %5.3f", res[k], res[k] / copy);
		printf("\n");
	}
	for (int a = 0; a < 4; a++)
		cudaFree(q[a]);
	free(t);
}

static int usage(void)
{
	fprintf(stderr, "usage: tally-opt-bench [--elems N,N,...] [--tensors T] [--json]\n");
	return 2;
}

int main(int argc, char **argv)
{
	const char *elems = "1e6,1e7,1e8,1e9";
	int nt = 4, ndev = 0, json = 0, drv = 0, rt = 0;
	struct cudaDeviceProp prop;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--elems") && i + 1 < argc)
			elems = argv[++i];
		else if (!strcmp(argv[i], "--tensors") && i + 1 < argc)
			nt = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--json"))
			json = 1;
		else
			return usage();
	}
	if (nt < 1 || nt > 1024) {
		fprintf(stderr, "tally-opt-bench: --tensors must be 1..1024\n");
		return 2;
	}
	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
		fprintf(stderr, "tally-opt-bench: no usable GPU\n");
		return 77;
	}
	CK(cudaGetDeviceProperties(&prop, 0));
	CK(cudaDriverGetVersion(&drv));
	CK(cudaRuntimeGetVersion(&rt));
	CK(cudaEventCreate(&ev_a));
	CK(cudaEventCreate(&ev_b));
	printf("# %s, %d SMs, CUDA driver API %d, runtime %d; %d tensors per step; GB/s and ratio to the "
	       "d2d copy\n", prop.name, prop.multiProcessorCount, drv, rt, nt);
	if (!json) {
		printf("%-12s %9s", "elements", "copy");
		for (size_t k = 0; k < NKINDS; k++)
			printf("  %14s", kinds[k].name);
		printf("\n");
	}
	for (const char *s = elems; *s;) {
		char *end;
		double v = strtod(s, &end);

		if (end == s || v < 32.0 * nt || v > 4e9 || (*end && *end != ',')) {
			fprintf(stderr, "tally-opt-bench: bad --elems entry at '%s' (need 32 x tensors..4e9)\n", s);
			return 2;
		}
		one_size((size_t)v, nt, json);
		s = *end ? end + 1 : end;
	}
	return 0;
}
