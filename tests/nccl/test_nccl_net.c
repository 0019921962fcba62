/* SPDX-License-Identifier: Apache-2.0
 * test_nccl_net.c — the harness's net mode: NCCL's point-to-point calls (listen, connect,
 * accept, isend / irecv / test with 8 outstanding, 0 B .. 4 MiB + 3) between two processes
 * on every table, and a connect to a closed port that must fail.
 */
#include "nccl_harness.h"

#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------ net */
static const size_t net_sizes[] = {0, 1, 2, 3, 7, 8, 100, 4095, 4096, 4097, 65536, 65537,
				   1 << 20, (4 << 20) + 3};
#define NNET (sizeof(net_sizes) / sizeof(net_sizes[0]))
#define NMSG (2 * NNET)
#define NWIN 8

/* Sends (or receives) the NMSG messages with NWIN outstanding requests, testing the oldest */
static void net_stream(struct napi *a, void *comm, int send)
{
	void *req[NMSG] = {0};
	unsigned char *buf[NMSG];
	size_t posted = 0, done = 0;
	double end = now_s() + 60 * tmul;

	while (done < NMSG) {
		CHECK(now_s() < end, "net %s: request %zu not done in time", send ? "send" : "recv",
		      done);
		if (posted < NMSG && posted - done < NWIN) {
			size_t k = posted, sz = net_sizes[k % NNET], cap = send ? sz : sz + 16;

			buf[k] = malloc(cap + 1);
			for (size_t j = 0; j < cap; j++)
				buf[k][j] = send ? pat(k, j) : 0xee;
			CHECK((send ? napi_net_isend(a, comm, buf[k], sz, 7, &req[k])
				    : napi_net_irecv(a, comm, buf[k], cap, 7, &req[k])) == ncclSuccess,
			      "isend/irecv %zu", k);
			if (req[k])
				posted++;
			continue;
		}
		int d = 0, size = -1;

		CHECK(napi_net_test(a, req[done], &d, &size) == ncclSuccess, "test %zu", done);
		if (!d)
			continue;
		size_t sz = net_sizes[done % NNET];
		CHECK((size_t)size == sz, "request %zu: test says %d bytes, sent %zu", done, size, sz);
		for (size_t j = 0; !send && j < sz + 16; j++)
			CHECK(buf[done][j] == (j < sz ? pat(done, j) : 0xee),
			      "message %zu (%zu bytes): byte %zu wrong", done, sz, j);
		free(buf[done]);
		done++;
	}
}

static void net_receiver(int ver, int fd)
{
	struct napi a;
	unsigned char h[NCCL_NET_HANDLE_MAXSIZE];
	void *lc = NULL, *rc = NULL;
	int n = 0, ptr = 0, mr = 0;
	double end = now_s() + 30 * tmul;

	load(&a, ver);
	CHECK(napi_net_init(&a) == ncclSuccess, "net init");
	CHECK(napi_net_devices(&a, &n, &ptr, &mr) == ncclSuccess && n == 1 &&
		      (ptr & NCCL_PTR_HOST) && mr == 1,
	      "net devices %d ptrSupport %d maxRecvs %d", n, ptr, mr);
	CHECK(napi_net_listen(&a, h, &lc) == ncclSuccess, "listen");
	xwrite(fd, h, sizeof(h));
	while (!rc) {
		CHECK(now_s() < end, "accept: no connection in time");
		CHECK(napi_net_accept(&a, lc, &rc) == ncclSuccess, "accept");
		if (!rc)
			usleep(1000);
	}
	net_stream(&a, rc, 0);
	napi_net_close(&a, NULL, rc, lc);
	exit(0);
}

static void net_sender(int ver, int fd)
{
	struct napi a;
	unsigned char h[NCCL_NET_HANDLE_MAXSIZE];
	void *sc = NULL;
	double end = now_s() + 30 * tmul;

	load(&a, ver);
	CHECK(napi_net_init(&a) == ncclSuccess, "net init");
	xread(fd, h, sizeof(h));
	while (!sc) {
		CHECK(now_s() < end, "connect: no send comm in time");
		CHECK(napi_net_connect(&a, h, &sc) == ncclSuccess, "connect");
	}
	net_stream(&a, sc, 1);
	napi_net_close(&a, sc, NULL, NULL);
	exit(0);
}

/* A handle whose listener is gone: connect() must fail (naming the address), not hang */
static void net_refused(void)
{
	struct napi a;
	unsigned char h[NCCL_NET_HANDLE_MAXSIZE];
	void *lc = NULL, *sc = NULL;
	double end = now_s() + 30 * tmul;
	ncclResult_t r = ncclSuccess;

	load(&a, 11);
	CHECK(napi_net_init(&a) == ncclSuccess, "net init");
	CHECK(napi_net_listen(&a, h, &lc) == ncclSuccess, "listen");
	napi_net_close(&a, NULL, NULL, lc);
	while (r == ncclSuccess && !sc) {
		CHECK(now_s() < end, "connect to a closed port neither failed nor connected");
		r = napi_net_connect(&a, h, &sc);
	}
	CHECK(r == ncclSystemError && !sc && strstr(napi_log, "connect to"),
	      "connect to a closed port: result %d", r);
	exit(0);
}

int mode_net(void)
{
	static const int vers[] = {11, 10, 9, 8, 7};

	for (unsigned v = 0; v < sizeof(vers) / sizeof(vers[0]); v++) {
		int p[2];
		pid_t pids[2];
		double t0 = now_s();

		CHECK(pipe(p) == 0, "pipe");
		if (!(pids[0] = fork()))
			net_receiver(vers[v], p[1]);
		if (!(pids[1] = fork()))
			net_sender(vers[v], p[0]);
		close(p[0]);
		close(p[1]);
		CHECK(wait_all(pids, 2, 90) == 0, "net v%d failed", vers[v]);
		printf("net v%d: %zu messages (0 B .. 4 MiB + 3), %d outstanding: ok in %.2f s\n",
		       vers[v], NMSG, NWIN, now_s() - t0);
	}
	pid_t p = fork();

	if (!p)
		net_refused();
	CHECK(wait_all(&p, 1, 60) == 0, "connect to a closed port");
	printf("net: connect to a closed port fails with ncclSystemError\n");
	return 0;
}
