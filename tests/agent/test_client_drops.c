/* SPDX-License-Identifier: Apache-2.0
 * test_client_drops.c — when drops explain an operation that gave up, its error says so
 * (issue 39): two client sessions on kernel UDP against tally-udpd on loopback; rank 0's
 * socket gets the smallest receive buffer and is not read while rank 1 completes chunks,
 * so the kernel drops the RESULTs sent to it; then the appliance stops (SIGSTOP) and rank
 * 0's operation ends at dead_ms (fail_fast). Its error names the appliance, the number of
 * datagrams this host's receive buffer dropped and what to change (net.core.rmem_max when
 * the buffer got less than asked, else a CPU for the worker), and where the appliance's own drops are read (tallyctl stats).
 *   test_client_drops PATH_TO_TALLY_UDPD */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tally_client.h"
#include "tally_sum.h"
#include "tally_udp.h"
#include "udpd_proc.h"

#define NELEMS (512u * 1024u) /* 2 MiB of f32: 256 chunks of 8 KiB */
#define KEY 3u

static int failed;

static void check(int ok, const char *what)
{
	printf("%s %s\n", ok ? "ok  " : "FAIL", what);
	failed += !ok;
}

static void rx(void *arg, const void *buf, size_t len, const struct tally_addr *from)
{
	(void)from;
	tally_client_rx(arg, buf, len);
}

struct sess {
	struct tally_udp *u;
	struct tally_client *c;
};

static int open_sess(struct sess *s, unsigned port, uint32_t rank, int sock_buf)
{
	struct tally_udp_cfg uc = { .host = "127.0.0.1", .base_port = (uint16_t)port,
				    .sock_buf = sock_buf, .gro = 1, .busy_poll_us = -1 };
	struct tally_client_cfg cc = { 0 };
	struct tally_register reg = { .nelems = NELEMS, .dtype = TALLY_DT_F32,
				      .participants = 2, .quorum = 2 };
	char err[256];
	int rc = 0;

	s->u = tally_udp_create(&uc, NULL, NULL, &rc, err, sizeof(err));
	if (!s->u) {
		fprintf(stderr, "udp: %s\n", err);
		return rc;
	}
	tally_client_cfg_defaults(&cc);
	cc.job_id = 7;
	cc.token = 1234;
	cc.rank = rank;
	cc.world_size = 2;
	cc.fail_fast = 1;
	cc.dead_ms = 500;
	snprintf(cc.appliance, sizeof(cc.appliance), "127.0.0.1:%u", port);
	s->c = tally_client_create(&cc, tally_udp_ops(), s->u, &rc);
	if (!s->c)
		return rc;
	tally_udp_set_rx(s->u, rx, s->c);
	if ((rc = tally_client_join(s->c, 10000)) || (rc = tally_client_register(s->c, KEY, &reg)))
		fprintf(stderr, "rank %u: %s\n", rank, tally_client_strerror(s->c));
	return rc;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
	static float in0[NELEMS], in1[NELEMS], out0[NELEMS], out1[NELEMS];
	struct sess s0 = { 0 }, s1 = { 0 };
	const struct tally_udp_stats *st;
	unsigned port = 0;
	pid_t pid = 0;
	int h0, h1, rc;
	uint64_t t0;

	if (argc < 2 || access(argv[1], X_OK)) {
		printf("SKIP: no tally-udpd binary\n");
		return 77;
	}
	udpd_start(argv[1], &pid, &port, 2);
	/* rank 0: the kernel's smallest receive buffer (a RESULT or two); rank 1: the default */
	if (open_sess(&s0, port, 0, 1) || open_sess(&s1, port, 1, 0)) {
		check(0, "join and register");
		goto out;
	}
	h0 = tally_client_start(s0.c, KEY, 0, in0, out0);
	h1 = tally_client_start(s1.c, KEY, 0, in1, out1);
	check(h0 >= 0 && h1 >= 0, "both ranks started round 0");
	tally_udp_flush(s0.u); /* rank 0's first window goes out; nothing of it is read */
	for (t0 = now_ms(); now_ms() - t0 < 300;) {
		tally_client_tick(s1.c);
		tally_udp_ops()->poll(s1.u, 10000000ull);
	}
	kill(pid, SIGSTOP); /* the appliance stops answering: rank 0 fails at dead_ms */
	t0 = now_ms();
	rc = tally_client_wait(s0.c, h0);
	{
		const char *m = tally_client_strerror(s0.c);
		char want[64];

		printf("rank 0: rc %d after %llu ms: %s\n", rc, (unsigned long long)(now_ms() - t0), m);
		st = tally_udp_stats(s0.u);
		printf("rank 0's socket: %llu datagrams dropped (SO_MEMINFO)\n",
		       (unsigned long long)st->rx_sock_drops);
		snprintf(want, sizeof(want), "appliance 127.0.0.1:%u unreachable", port);
		check(rc == -EHOSTDOWN, "rank 0's operation ended -EHOSTDOWN (fail_fast)");
		check(strstr(m, want) != NULL, "the error names the appliance");
		check(st->rx_sock_drops > 0 && strstr(m, "datagrams dropped by this host's socket "
						       "receive buffer") != NULL,
		      "the error counts this host's receive-buffer drops");
		/* below what was asked (no root: net.core.rmem_max caps it) the text names
		 * the sysctl; at it (root, or 1 byte asked here) a process that read too late */
		check(strstr(m, "net.core.rmem_max") != NULL || strstr(m, "a core of its own"),
		      "the error names what to change");
		check(strstr(m, "tallyctl stats") != NULL, "the error says where the appliance's "
		      "drops are read");
	}
	kill(pid, SIGCONT);
out:
	if (s0.c)
		tally_client_destroy(s0.c);
	if (s1.c)
		tally_client_destroy(s1.c);
	tally_udp_destroy(s0.u);
	tally_udp_destroy(s1.u);
	udpd_stop(&pid);
	printf("%d failed\n", failed);
	return failed ? 1 : 0;
}
