/* SPDX-License-Identifier: Apache-2.0
 * nccl_harness.h — what the plugin harness's files share: checks that end the process with
 * a message, deadlines scaled by TALLY_TIMEOUT_MULTIPLIER, pipes, waiting for ranks by pid,
 * the seeded byte pattern, loading a version's tables.
 */
#ifndef TESTS_NCCL_HARNESS_H
#define TESTS_NCCL_HARNESS_H

#include "nccl_api.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#define CHECK(c, ...)                                                                  \
	do {                                                                           \
		if (!(c)) {                                                            \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);           \
			fprintf(stderr, __VA_ARGS__);                                  \
			fputc('\n', stderr);                                           \
			exit(1);                                                       \
		}                                                                      \
	} while (0)

/* NCCL's way with a submission that hands back no request (the plugin's lanes are busy):
 * call again later. res: the last result; *reqp stays NULL past 60 s (scaled). */
#define SUBMIT(res, reqp, call)                                                        \
	do {                                                                           \
		double end_ = now_s() + 60 * tmul;                                     \
		for (;;) {                                                             \
			*(reqp) = NULL;                                                \
			(res) = (call);                                                \
			if ((res) != ncclSuccess || *(reqp) || now_s() > end_)         \
				break;                                                 \
			usleep(200);                                                   \
		}                                                                      \
	} while (0)

extern const char *so_path; /* the plugin */
extern double tmul;         /* TALLY_TIMEOUT_MULTIPLIER */

double now_s(void);
void xwrite(int fd, const void *b, size_t n);
void xread(int fd, void *b, size_t n);
/* Waits for every pid within the deadline (scaled); kills what is left. 0 when all exited 0. */
int wait_all(pid_t *pids, int n, double deadline_s);
uint32_t mix(uint32_t x);
unsigned char pat(size_t k, size_t j);
void load(struct napi *a, int ver);
/* collective data (nccl_data.c) */
float val(int rank, int round, int slot, size_t i);
size_t esize(ncclDataType_t dt);
void put(ncclDataType_t dt, void *b, size_t i, float v, int32_t iv);
float widen(ncclDataType_t dt, const void *b, size_t i);
void fill(ncclDataType_t dt, void *b, size_t n, int rank, int round, int slot);
/* the deterministic mode's sum of `world` ranks' fill(), rounded once to dt */
void reference(ncclDataType_t dt, void *out, size_t n, int world, int round, int slot);
/* Tests every request until all are done (each must within limit_s, scaled; a hang fails
 * the process); the first error ends it. test_nccl_plugin.c. */
ncclResult_t wait_reqs(struct napi *a, void **req, int n, size_t *bytes, double limit_s);
/* all-gather / reduce-scatter windows, every byte checked (nccl_gather.c) */
void scen_allgather(struct napi *a, void *cc, int rank, int world);
/* Its two block sizes, in f32 elements (owner mode: each rank does not receive the sums of
 * world - 1 blocks of each). */
#define RS_BLOCK_A 3001
#define RS_BLOCK_B 393219
void scen_reducescatter(struct napi *a, void *cc, int rank, int world);
/* net mode: isend / irecv between two processes on every table; connect to a closed port */
int mode_net(void);

#endif
