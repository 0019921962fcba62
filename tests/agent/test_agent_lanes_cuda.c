/* SPDX-License-Identifier: Apache-2.0
 * test_agent_lanes_cuda.c — the sharded local mode's CUDA backend (NCCL reduce-scatter, shard
 * to pinned host memory, lane push_pull, NCCL all-gather) against its CPU backend on the same
 * inputs: 2 machines x L local ranks (threads; local rank lr on GPU lr, L = the GPUs there
 * are, at most 4), lanes over the in-process loopnet, f32 and bf16 tensors whose sizes do
 * not divide by L (the padded scratch path), 3 rounds. Every CUDA result must be bit-equal
 * to the CPU one of the same rank and to the exact average (the inputs are small integers,
 * exact in both dtypes, so the summation order does not matter). Builds with NCCL only.
 * Exits 77 (skip) with the CUDA error where there is no usable GPU. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "agent_internal.h"
#include "agent_lane.h"
#include "loopnet.h"
#include "tally_agent.h"
#include "tally_sum.h"

#define MACHINES 2
#define NF (3 * 1024 + 7)
#define NB 1001
#define ROUNDS 3

static int ls;
static struct loophub *hubs[4];

struct cw {
	int rank, rc;
	char err[512];
};

static float fval(int rank, int i, int it)
{
	return (float)((rank + 1) * (i % 11) + it);
}

static int fail(struct cw *w, const char *what, cudaError_t e)
{
	snprintf(w->err, sizeof(w->err), "%s: %s", what, cudaGetErrorString(e));
	return w->rc = -EIO;
}

static void *cw_main(void *arg)
{
	struct cw *w = arg;
	struct tally_agent_cfg c;
	int lr = w->rank % ls, err = 0, world = MACHINES * ls;
	float *hf = malloc(NF * 4), *df, *back = malloc(NF * 4);
	uint16_t *hb = malloc(NB * 2), *db, *backb = malloc(NB * 2);
	cudaStream_t s;
	cudaError_t e;
	char id[48];

	if ((e = cudaSetDevice(lr)) != cudaSuccess || (e = cudaStreamCreate(&s)) != cudaSuccess ||
	    (e = cudaMalloc((void **)&df, NF * 4)) != cudaSuccess ||
	    (e = cudaMalloc((void **)&db, NB * 2)) != cudaSuccess) {
		fail(w, "CUDA setup", e);
		return NULL;
	}
	tally_agent_cfg_defaults(&c);
	tally_agent_parse_appliances(&c, "127.0.0.1:9170", NULL, 0);
	c.rank = w->rank;
	c.world_size = world;
	c.local_rank = lr;
	c.local_size = ls;
	c.local_agg = TALLY_AGENT_LOCAL_SHARD;
	c.average = 1;
	c.partition_bytes = 1024;
	c.credit_bytes = 8192;
	c.connect_timeout_ms = 20000;
	c.local_shm_bytes = 64u << 20;
	snprintf(id, sizeof(id), "lanescuda%d", (int)getpid());
	struct tally_agent *a = agent_lane_create(&c, &loopnet_ops,
						  loopnet_create(hubs[lr], (unsigned)(w->rank / ls)),
						  id, &err, w->err, sizeof(w->err));
	if (!a) {
		w->rc = err ? err : -1;
		return NULL;
	}
	int thf = tally_agent_declare(a, "h.f32", NF * 4, TALLY_DT_F32, 0);
	int tdf = tally_agent_declare(a, "d.f32", NF * 4, TALLY_DT_F32, 0);
	int thb = tally_agent_declare(a, "h.bf16", NB * 2, TALLY_DT_BF16, 1);
	int tdb = tally_agent_declare(a, "d.bf16", NB * 2, TALLY_DT_BF16, 1);
	for (int it = 0; it < ROUNDS && !w->rc; it++) {
		for (int i = 0; i < NF; i++)
			hf[i] = fval(w->rank, i, it);
		for (int i = 0; i < NB; i++)
			hb[i] = tally_f32_to_bf16((float)(w->rank + it + i % 7));
		if ((e = cudaMemcpy(df, hf, NF * 4, cudaMemcpyHostToDevice)) != cudaSuccess ||
		    (e = cudaMemcpy(db, hb, NB * 2, cudaMemcpyHostToDevice)) != cudaSuccess) {
			fail(w, "H2D", e);
			break;
		}
		int h[4] = {
			tally_agent_push_pull(a, thf, hf, NF * 4, TALLY_AGENT_CPU, NULL, NULL, NULL),
			tally_agent_push_pull(a, tdf, df, NF * 4, TALLY_AGENT_CUDA, s, NULL, NULL),
			tally_agent_push_pull(a, thb, hb, NB * 2, TALLY_AGENT_CPU, NULL, NULL, NULL),
			tally_agent_push_pull(a, tdb, db, NB * 2, TALLY_AGENT_CUDA, s, NULL, NULL)};
		for (int j = 0; j < 4 && !w->rc; j++)
			if (h[j] < 0 || (err = tally_agent_wait(a, h[j]))) {
				snprintf(w->err, sizeof(w->err), "round %d op %d: %d %s", it, j,
					 h[j] < 0 ? h[j] : err, tally_agent_strerror(a));
				w->rc = -2;
			}
		if (w->rc)
			break;
		if ((e = cudaMemcpy(back, df, NF * 4, cudaMemcpyDeviceToHost)) != cudaSuccess ||
		    (e = cudaMemcpy(backb, db, NB * 2, cudaMemcpyDeviceToHost)) != cudaSuccess) {
			fail(w, "D2H", e);
			break;
		}
		size_t bad = 0;
		for (int i = 0; i < NF; i++) {
			float sum = 0;
			for (int q = 0; q < world; q++)
				sum += fval(q, i, it);
			float want = sum * (1.0f / (float)world);
			if (memcmp(&back[i], &hf[i], 4) || hf[i] != want)
				if (bad++ < 5)
					printf("  rank %d round %d f32[%d]: cuda %.9g cpu %.9g exact %.9g\n",
					       w->rank, it, i, back[i], hf[i], want);
		}
		for (int i = 0; i < NB; i++)
			if (backb[i] != hb[i] && bad++ < 10)
				printf("  rank %d round %d bf16[%d]: cuda %04x cpu %04x\n", w->rank, it, i,
				       backb[i], hb[i]);
		if (bad) {
			snprintf(w->err, sizeof(w->err), "round %d: %zu mismatches", it, bad);
			w->rc = -3;
		}
	}
	tally_agent_destroy(a);
	cudaFree(df);
	cudaFree(db);
	cudaStreamDestroy(s);
	free(hf);
	free(back);
	free(hb);
	free(backb);
	return NULL;
}

int main(void)
{
	int ndev = 0, fails = 0;
	cudaError_t e = cudaGetDeviceCount(&ndev);
	struct cw w[MACHINES * 4];
	pthread_t t[MACHINES * 4];

	if (e != cudaSuccess || ndev == 0) {
		printf("SKIP: no usable GPU (cudaGetDeviceCount: %s, error %d)\n",
		       e != cudaSuccess ? cudaGetErrorString(e) : "0 devices", (int)e);
		return 77;
	}
	ls = ndev < 4 ? ndev : 4; /* NCCL wants one GPU per rank of a communicator */
	printf("# %d GPU(s): %d machines x %d local ranks\n", ndev, MACHINES, ls);
	for (int l = 0; l < ls; l++)
		hubs[l] = loophub_create(MACHINES);
	for (int r = 0; r < MACHINES * ls; r++) {
		w[r] = (struct cw){.rank = r};
		pthread_create(&t[r], NULL, cw_main, &w[r]);
	}
	for (int r = 0; r < MACHINES * ls; r++)
		pthread_join(t[r], NULL);
	for (int r = 0; r < MACHINES * ls; r++) {
		printf("%s rank %d: %s\n", w[r].rc ? "FAIL" : "ok  ", r, w[r].rc ? w[r].err : "");
		fails += w[r].rc != 0;
	}
	for (int l = 0; l < ls; l++)
		loophub_destroy(hubs[l]);
	return fails ? 1 : 0;
}
