/* SPDX-License-Identifier: Apache-2.0
 * nccl_gather.c — the harness's all-gather and reduce-scatter scenarios (CollNet v8+), as
 * NCCL's CollNetDirect proxy passes its windows; called from test_nccl_plugin.c's ranks.
 */
#include "nccl_harness.h"

#include <stdlib.h>
#include <string.h>

/* All-gather of bpr bytes per rank, as NCCL's CollNetDirect proxy asks it: the whole window,
 * then a window that starts inside rank 1's block (sendData then points at its first byte
 * in the window). Every byte comes back as the rank that owns it sent it. */
void scen_allgather(struct napi *a, void *cc, int rank, int world)
{
	const size_t bpr = 10007, total = bpr * (size_t)world;
	const size_t wins[2][2] = {{0, total}, {bpr + 13, world > 1 ? total - bpr - 18 : 0}};
	unsigned char *send = malloc(bpr), *win = malloc(total);
	void *smh, *wmh, *req;
	ncclResult_t r;

	CHECK(send && win, "malloc");
	for (size_t j = 0; j < bpr; j++)
		send[j] = pat((size_t)rank + 100, j);
	CHECK(napi_coll_regmr(a, cc, send, bpr, &smh) == 0 &&
		      napi_coll_regmr(a, cc, win, total, &wmh) == 0, "regMr");
	for (int w = 0; w < (world > 1 ? 2 : 1); w++) {
		size_t woff = wins[w][0], wbytes = wins[w][1], rb = (size_t)rank * bpr;
		size_t skip = woff > rb && woff < rb + bpr ? woff - rb : 0;

		memset(win, 0xee, total);
		SUBMIT(r, &req, napi_coll_iallgather(a, cc, send + skip, win, bpr, woff, wbytes,
						     smh, wmh, &req));
		CHECK(r == 0 && req, "iallgather");
		CHECK(wait_reqs(a, &req, 1, &wbytes, 60) == 0, "allgather failed");
		for (size_t k = 0; k < wbytes; k++) {
			size_t g = woff + k;

			CHECK(win[k] == pat(g / bpr + 100, g % bpr),
			      "allgather window %d: byte %zu (rank %zu's) wrong", w, g, g / bpr);
		}
	}
	napi_coll_deregmr(a, cc, smh);
	napi_coll_deregmr(a, cc, wmh);
	free(send);
	free(win);
}

/* Reduce-scatter of f32: every rank gives the whole window, keeps its block's sums, which
 * must be the rank-order sums bit for bit; a block of 12 KB and one of 1.5 MiB + 12 B (the
 * plugin cuts it into several pieces at every block boundary). */
void scen_reducescatter(struct napi *a, void *cc, int rank, int world)
{
	static const size_t ns[] = {RS_BLOCK_A, RS_BLOCK_B};

	for (unsigned k = 0; k < 2; k++) {
		const size_t n = ns[k], bpr = n * 4, total = bpr * (size_t)world;
		float *in = malloc(total), *out = malloc(bpr), *ref = malloc(total);
		void *imh, *omh, *req;
		size_t got = bpr;
		ncclResult_t r;

		CHECK(in && out && ref, "malloc");
		fill(ncclFloat32, in, n * (size_t)world, rank, 7, 44 + (int)k);
		CHECK(napi_coll_regmr(a, cc, in, total, &imh) == 0 &&
			      napi_coll_regmr(a, cc, out, bpr, &omh) == 0, "regMr");
		SUBMIT(r, &req, napi_coll_ireducescatter(a, cc, in, out, bpr, 0, total,
							 ncclFloat32, imh, omh, &req));
		CHECK(r == 0 && req, "ireducescatter");
		CHECK(wait_reqs(a, &req, 1, &got, 60) == 0, "reducescatter failed");
		reference(ncclFloat32, ref, n * (size_t)world, world, 7, 44 + (int)k);
		CHECK(!memcmp(out, ref + (size_t)rank * n, bpr),
		      "reduce-scatter of %zu B blocks: rank %d's block differs from the rank-order "
		      "sums", bpr, rank);
		napi_coll_deregmr(a, cc, imh);
		napi_coll_deregmr(a, cc, omh);
		free(in);
		free(out);
		free(ref);
	}
}
