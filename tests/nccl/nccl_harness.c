/* SPDX-License-Identifier: Apache-2.0
 * nccl_harness.c — see nccl_harness.h.
 */
#include "nccl_harness.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *so_path;
double tmul = 1.0;

double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

void xwrite(int fd, const void *b, size_t n)
{
	CHECK(write(fd, b, n) == (ssize_t)n, "pipe write: %s", strerror(errno));
}

void xread(int fd, void *b, size_t n)
{
	size_t o = 0;

	while (o < n) {
		ssize_t r = read(fd, (char *)b + o, n - o);

		CHECK(r > 0, "pipe read: %s", r == 0 ? "closed" : strerror(errno));
		o += (size_t)r;
	}
}

/* Waits for every pid within the deadline; kills what is left. 0 when all exited 0. */
int wait_all(pid_t *pids, int n, double deadline_s)
{
	double end = now_s() + deadline_s * tmul;
	int bad = 0, left = n;

	while (left && now_s() < end) {
		for (int i = 0; i < n; i++) {
			int st;

			if (pids[i] <= 0 || waitpid(pids[i], &st, WNOHANG) != pids[i])
				continue;
			if (!WIFEXITED(st) || WEXITSTATUS(st)) {
				fprintf(stderr, "rank %d exited with status %d\n", i, st);
				bad = 1;
			}
			pids[i] = 0;
			left--;
		}
		usleep(20000);
	}
	for (int i = 0; i < n; i++)
		if (pids[i] > 0) {
			fprintf(stderr, "rank %d still running past the deadline: killed (hang)\n", i);
			kill(pids[i], SIGKILL);
			waitpid(pids[i], NULL, 0);
			bad = 1;
		}
	return bad;
}

uint32_t mix(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352du;
	x ^= x >> 15;
	x *= 0x846ca68bu;
	return x ^ (x >> 16);
}

unsigned char pat(size_t k, size_t j)
{
	return (unsigned char)mix((uint32_t)(k * 1000003u + j));
}

void load(struct napi *a, int ver)
{
	CHECK(napi_load(a, so_path, ver) == 0, "cannot load v%d tables", ver);
}
