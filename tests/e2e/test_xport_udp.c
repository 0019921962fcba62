/* SPDX-License-Identifier: Apache-2.0
 * test_xport_udp.c — the kernel UDP transport over loopback: one socket per appliance core
 * (port base + core), batching, echo through a listening instance, GSO/GRO paths, errors.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <cmocka.h>

#include "tally_proto.h"
#include "tally_udp.h"
#include "tally_xport_reg.h"

#define NPKT 300

struct rx_log {
	struct tally_udp *echo;      /* listen side: echo every datagram back */
	unsigned n;
	unsigned per_core[4];
	uint8_t seen[NPKT];
	int bad;
};

static void rx_cb(void *arg, const void *buf, size_t len, const struct tally_addr *from)
{
	struct rx_log *l = arg;
	const uint8_t *p = buf;
	uint32_t id;

	if (len < TALLY_HDR_LEN) {
		l->bad++;
		return;
	}
	memcpy(&id, p, 4);
	/* payload byte i of packet id is (id + i) & 0xff; length is 64 + id * 29 % 8000 */
	if (id >= NPKT || len != TALLY_HDR_LEN + (id * 29u) % 8000u) {
		l->bad++;
		return;
	}
	for (size_t i = TALLY_HDR_LEN; i < len; i++)
		if (p[i] != (uint8_t)(id + i)) {
			l->bad++;
			return;
		}
	if (from->core < 4)
		l->per_core[from->core]++;
	l->n++;
	if (l->echo)
		assert_int_equal(tally_udp_ops()->send(l->echo, from, p, p + TALLY_HDR_LEN,
						       len - TALLY_HDR_LEN), 0);
	else
		l->seen[id]++;
}

static uint16_t test_port(void)
{
	/* Distinct per process so parallel test runs do not collide. */
	return (uint16_t)(20000 + (getpid() % 20000));
}

static void run_echo(int gso, int gro)
{
	struct tally_udp_cfg scfg = { .host = "127.0.0.1", .listen = 1, .ncores = 3, .gro = gro };
	struct tally_udp_cfg ccfg = { .host = "127.0.0.1", .gso = gso, .gro = gro, .batch = 32 };
	struct rx_log slog = { 0 }, clog = { 0 };
	struct tally_udp *srv, *cli;
	char err[256];
	int rc = 0;

	scfg.base_port = ccfg.base_port = (uint16_t)(test_port() + gso * 4 + gro * 8);
	srv = tally_udp_create(&scfg, rx_cb, &slog, &rc, err, sizeof(err));
	assert_non_null(srv);
	slog.echo = srv;
	cli = tally_udp_create(&ccfg, rx_cb, &clog, &rc, err, sizeof(err));
	assert_non_null(cli);

	const struct tally_xport_ops *ops = tally_udp_ops();
	static uint8_t pkt[TALLY_HDR_LEN + 8000];

	for (uint32_t id = 0; id < NPKT; id++) {
		struct tally_addr to = { .core = id % 3 };
		size_t len = (id * 29u) % 8000u;

		memset(pkt, 0, TALLY_HDR_LEN);
		memcpy(pkt, &id, 4);
		for (size_t i = 0; i < len; i++)
			pkt[TALLY_HDR_LEN + i] = (uint8_t)(id + TALLY_HDR_LEN + i);
		assert_int_equal(ops->send(cli, &to, pkt, pkt + TALLY_HDR_LEN, len), 0);
	}
	uint64_t t0 = ops->now_ns(cli);

	while (clog.n < NPKT && ops->now_ns(cli) - t0 < 5000000000ull) {
		ops->poll(cli, 1000000);
		ops->poll(srv, 1000000);
	}
	assert_int_equal(slog.bad, 0);
	assert_int_equal(clog.bad, 0);
	assert_int_equal(slog.n, NPKT);
	assert_int_equal(clog.n, NPKT);
	for (unsigned c = 0; c < 3; c++) {
		assert_int_equal(slog.per_core[c], NPKT / 3); /* each core's port got its share */
		assert_int_equal(clog.per_core[c], NPKT / 3);
	}
	for (unsigned i = 0; i < NPKT; i++)
		assert_int_equal(clog.seen[i], 1);
	const struct tally_udp_stats *cs = tally_udp_stats(cli);

	assert_int_equal(cs->tx_pkts, NPKT);
	assert_int_equal(cs->rx_pkts, NPKT);
	assert_true(cs->tx_calls < NPKT); /* batched */
	if (gso) /* loopback takes GSO: runs of equal-size datagrams went as one send */
		assert_true(cs->tx_gso_sends > 0);
	if (gro) /* ...and the GRO socket got some of them as one buffer */
		assert_true(tally_udp_stats(srv)->rx_gro_batches > 0);
	printf("gso %d gro %d: tx calls %llu gso sends %llu; server rx gro batches %llu\n", gso, gro,
	       (unsigned long long)cs->tx_calls, (unsigned long long)cs->tx_gso_sends,
	       (unsigned long long)tally_udp_stats(srv)->rx_gro_batches);
	tally_udp_destroy(cli);
	tally_udp_destroy(srv);
}

static void test_echo_plain(void **state)
{
	(void)state;
	run_echo(0, 0);
}

static void test_echo_gso_gro(void **state)
{
	(void)state;
	run_echo(1, 1);
}

static void test_bad_host(void **state)
{
	struct tally_udp_cfg cfg = { .host = "no-such-host.invalid" };
	char err[256] = "";
	int rc = 0;

	(void)state;
	assert_null(tally_udp_create(&cfg, NULL, NULL, &rc, err, sizeof(err)));
	assert_true(rc < 0);
	assert_non_null(strstr(err, "no-such-host.invalid"));
}

static void test_bind_busy(void **state)
{
	struct tally_udp_cfg cfg = { .host = "127.0.0.1", .listen = 1, .ncores = 1 };
	struct tally_udp *a;
	char err[256] = "", want[64];
	int rc = 0;

	(void)state;
	cfg.base_port = (uint16_t)(test_port() + 100);
	a = tally_udp_create(&cfg, NULL, NULL, &rc, err, sizeof(err));
	assert_non_null(a);
	/* SO_REUSEADDR does not let two UDP sockets share a port without SO_REUSEPORT. */
	assert_null(tally_udp_create(&cfg, NULL, NULL, &rc, err, sizeof(err)));
	assert_int_equal(rc, -EADDRINUSE);
	snprintf(want, sizeof(want), "127.0.0.1:%u", cfg.base_port);
	assert_non_null(strstr(err, want));
	tally_udp_destroy(a);
}

static void test_bad_args(void **state)
{
	struct tally_udp_cfg cfg = { .host = "127.0.0.1" };
	struct tally_udp *u;
	char err[256];
	int rc = 0;
	uint8_t hdr[TALLY_HDR_LEN] = { 0 };
	struct tally_addr to = { .core = TALLY_UDP_MAX_CORES };

	(void)state;
	cfg.base_port = (uint16_t)(test_port() + 200);
	u = tally_udp_create(&cfg, NULL, NULL, &rc, err, sizeof(err));
	assert_non_null(u);
	assert_int_equal(tally_udp_ops()->send(u, &to, hdr, NULL, 0), -EINVAL);
	to.core = 0;
	assert_int_equal(tally_udp_ops()->send(u, &to, hdr, hdr, TALLY_MAX_PAYLOAD + 1), -EINVAL);
	assert_int_equal(tally_udp_stats(u)->tx_errors, 2);
	/* Nobody listens: ECONNREFUSED may surface, but poll neither fails nor blocks long. */
	assert_int_equal(tally_udp_ops()->send(u, &to, hdr, NULL, 0), 0);
	assert_true(tally_udp_ops()->poll(u, 1000000) >= 0);
	tally_udp_destroy(u);
	cfg.listen = 1;
	cfg.ncores = 0;
	assert_null(tally_udp_create(&cfg, NULL, NULL, &rc, err, sizeof(err)));
	assert_int_equal(rc, -EINVAL);
}

/* A program's edge: TALLY_UDP_BUSY_POLL_US from the environment applied to the options
 * (tally_xport_opts_env, the registry's "udp"), then the transport created with them. */
static struct tally_udp *env_create(const struct tally_udp_cfg *cfg, int *rc, char *err,
				    size_t errlen)
{
	struct tally_xport_opts o = { .busy_poll_us = cfg->busy_poll_us };
	struct tally_udp_cfg c = *cfg;

	*rc = tally_xport_opts_env("udp", &o, getenv, err, errlen);
	if (*rc)
		return NULL;
	c.busy_poll_us = o.busy_poll_us;
	return tally_udp_create(&c, NULL, NULL, rc, err, errlen);
}

/* The busy-poll setting: cfg at create, TALLY_UDP_BUSY_POLL_US at the program's edge, on by
 * default; a spin only within 2 ms of traffic, and one that finds nothing falls through to
 * ppoll and is counted (no timing asserted). */
static void test_busy_poll(void **state)
{
	struct tally_udp_cfg cfg = { .host = "127.0.0.1" };
	struct tally_udp *u;
	char err[256];
	int rc = 0;

	(void)state;
	cfg.base_port = (uint16_t)(test_port() + 300);
	cfg.busy_poll_us = TALLY_UDP_BUSY_POLL_MAX_US + 1;
	assert_null(tally_udp_create(&cfg, NULL, NULL, &rc, err, sizeof(err)));
	assert_int_equal(rc, -EINVAL);
	assert_non_null(strstr(err, "busy poll"));
	const char *bad[] = { "x", "-1", "20001", "5us" };

	cfg.busy_poll_us = 0;
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv("TALLY_UDP_BUSY_POLL_US", bad[i], 1);
		rc = 0;
		assert_null(env_create(&cfg, &rc, err, sizeof(err)));
		assert_int_equal(rc, -EINVAL);
		assert_non_null(strstr(err, "TALLY_UDP_BUSY_POLL_US"));
	}
	setenv("TALLY_UDP_BUSY_POLL_US", "0", 1); /* off: straight to ppoll */
	u = env_create(&cfg, &rc, err, sizeof(err));
	assert_non_null(u);
	assert_true(tally_udp_ops()->poll(u, 1000000) >= 0);
	assert_int_equal(tally_udp_stats(u)->spins, 0);
	assert_int_equal(tally_udp_stats(u)->blocks, 1);
	tally_udp_destroy(u);
	unsetenv("TALLY_UDP_BUSY_POLL_US");
	for (int dflt = 0; dflt < 2; dflt++) {
		/* 100 us, then the default (on, whatever the CPU count) */
		const struct tally_addr to = { .core = 0 };
		const uint8_t hdr[TALLY_HDR_LEN] = { 0 };
		struct timespec idle = { 0, 3000000 }; /* past UDP_SPIN_RECENT_NS (2 ms) */

		cfg.busy_poll_us = dflt ? 0 : 100;
		u = tally_udp_create(&cfg, NULL, NULL, &rc, err, sizeof(err));
		assert_non_null(u);
		/* no traffic yet: sleeps at once, no spin */
		assert_true(tally_udp_ops()->poll(u, 1000000) >= 0);
		assert_int_equal(tally_udp_stats(u)->spins, 0);
		/* just sent: spins, finds nothing, then sleeps the rest */
		assert_int_equal(tally_udp_ops()->send(u, &to, hdr, NULL, 0), 0);
		assert_true(tally_udp_ops()->poll(u, 1000000) >= 0);
		assert_int_equal(tally_udp_stats(u)->spins, 1);
		assert_int_equal(tally_udp_stats(u)->spin_hits, 0);
		/* quiet for longer than the recent-traffic window: no spin again */
		nanosleep(&idle, NULL);
		assert_true(tally_udp_ops()->poll(u, 1000000) >= 0);
		assert_int_equal(tally_udp_stats(u)->spins, 1);
		tally_udp_destroy(u);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_echo_plain),
		cmocka_unit_test(test_echo_gso_gro),
		cmocka_unit_test(test_bad_host),
		cmocka_unit_test(test_bind_busy),
		cmocka_unit_test(test_bad_args),
		cmocka_unit_test(test_busy_poll),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
