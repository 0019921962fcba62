/* SPDX-License-Identifier: Apache-2.0
 * test_xport_reg.c — the transport registry (tally_xport_reg.h): lookup by name and the
 * errors that name the setting and the known transports (or say the program lacks one),
 * settings applied from a program's lookup, open/close over "udp" with the one rx form and
 * its counters, and the multiplexer's routing, zero-copy buffers and poll.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tally_xport_reg.h"

static void test_lookup(void **state)
{
	char err[256];

	(void)state;
	assert_non_null(tally_xport_lookup("udp", "TALLY_TRANSPORT", err, sizeof(err)));
	assert_null(tally_xport_lookup("bogus", "TALLY_TRANSPORT", err, sizeof(err)));
	assert_non_null(strstr(err, "TALLY_TRANSPORT='bogus'"));
	assert_non_null(strstr(err, "udp"));
	/* this test links udp only: verbs and dpdk are known, not built in */
	assert_null(tally_xport_lookup("verbs", "--transport", err, sizeof(err)));
	assert_non_null(strstr(err, "--transport: this program was built without the verbs transport"));
	assert_null(tally_xport_lookup("rdma", "--transport", err, sizeof(err)));
	assert_non_null(strstr(err, "verbs transport"));
	assert_null(tally_xport_lookup(NULL, NULL, err, sizeof(err)));
	assert_string_equal(tally_xport_names(err, sizeof(err)), "udp");
}

static const char *fake_val;

static char *fake_get(const char *name)
{
	return !strcmp(name, "TALLY_UDP_BUSY_POLL_US") ? (char *)fake_val : NULL;
}

static void test_settings(void **state)
{
	struct tally_xport_opts o = { .busy_poll_us = 7 };
	char err[256];

	(void)state;
	fake_val = NULL; /* unset: the options stay */
	assert_int_equal(tally_xport_opts_env("udp", &o, fake_get, err, sizeof(err)), 0);
	assert_int_equal(o.busy_poll_us, 7);
	fake_val = "0"; /* 0 = off */
	assert_int_equal(tally_xport_opts_env("udp", &o, fake_get, err, sizeof(err)), 0);
	assert_int_equal(o.busy_poll_us, -1);
	fake_val = "120";
	assert_int_equal(tally_xport_opts_env("udp", &o, fake_get, err, sizeof(err)), 0);
	assert_int_equal(o.busy_poll_us, 120);
	fake_val = "5us";
	assert_int_equal(tally_xport_opts_env("udp", &o, fake_get, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "TALLY_UDP_BUSY_POLL_US='5us'"));
	assert_int_equal(tally_xport_opts_env("bogus", &o, fake_get, err, sizeof(err)), -ENOENT);
}

static int rx_count;

static void count_rx(void *arg, const void *buf, size_t len, const struct tally_addr *from)
{
	(void)arg, (void)buf, (void)len, (void)from;
	rx_count++;
}

static void test_open_udp(void **state)
{
	struct tally_xport_opts lo = { .listen = 1, .host = "127.0.0.1", .ncores = 1,
				       .port = 39000 + (uint16_t)(getpid() % 2000) };
	struct tally_xport_opts co = { .host = "127.0.0.1", .port = lo.port };
	const struct tally_xport_rx rx = { .rx = count_rx };
	struct tally_xport l, c;
	struct tally_xport_counter ct[32];
	uint8_t hdr[64] = { 0 };
	struct tally_addr to = { 0 };
	char err[256];
	size_t n;

	(void)state;
	assert_int_equal(tally_xport_open("udp", NULL, &lo, &l, err, sizeof(err)), 0);
	assert_int_equal(tally_xport_open("udp", NULL, &co, &c, err, sizeof(err)), 0);
	tally_xport_set_rx(&l, &rx);
	assert_int_equal(c.ops->send(c.ctx, &to, hdr, "abcd", 4), 0);
	assert_int_equal(tally_xport_flush(&c), 0);
	for (int i = 0; i < 100 && !rx_count; i++)
		l.ops->poll(l.ctx, 10000000);
	assert_int_equal(rx_count, 1);
	n = tally_xport_counters(&c, ct, 32);
	assert_true(n > 2);
	assert_string_equal(ct[0].name, "tx_pkts");
	assert_int_equal(ct[0].value, 1);
	assert_int_equal(tally_xport_setup_authed(&c), 0);
	assert_int_equal(tally_xport_conns(&c), 0);
	tally_xport_close(&c);
	tally_xport_close(&l);
	assert_null(l.ctx);
	/* a bad option: the transport's message, the registry's error code */
	co.host = NULL;
	assert_int_equal(tally_xport_open("udp", NULL, &co, &c, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "udp: bad configuration"));
}

/* ---- the multiplexer over two fake members ---- */
struct fake {
	int sends, send_bufs, inits, polls, pending, conns;
};

static int f_send(void *ctx, const struct tally_addr *to, const uint8_t *hdr, const void *p,
		  size_t len)
{
	(void)to, (void)hdr, (void)p, (void)len;
	((struct fake *)ctx)->sends++;
	return 0;
}

static int f_send_buf(void *ctx, const struct tally_addr *to, const uint8_t *hdr, const void *p,
		      size_t len, void *buf)
{
	(void)to, (void)hdr, (void)p, (void)len, (void)buf;
	((struct fake *)ctx)->send_bufs++;
	return 0;
}

static void f_buf_init(void *ctx, void *buf, const void *p, size_t len)
{
	(void)buf, (void)p, (void)len;
	((struct fake *)ctx)->inits++;
}

static int f_buf_busy(void *ctx, const void *buf)
{
	(void)ctx, (void)buf;
	return 1;
}

static uint64_t f_now(void *ctx)
{
	(void)ctx;
	return 42;
}

static int f_poll(void *ctx, uint64_t timeout_ns)
{
	struct fake *f = ctx;
	int n = f->pending;

	(void)timeout_ns;
	f->polls++;
	f->pending = 0;
	return n;
}

static unsigned f_conns(const void *ctx)
{
	return (unsigned)((const struct fake *)ctx)->conns;
}

static int f_owns(const struct tally_addr *a)
{
	return a->cookie == 7;
}

static const struct tally_xport_ops zc_ops = { .send = f_send, .now_ns = f_now, .poll = f_poll,
	.buf_size = 32, .buf_init = f_buf_init, .send_buf = f_send_buf, .buf_busy = f_buf_busy };
static const struct tally_xport_ops cp_ops = { .send = f_send, .now_ns = f_now, .poll = f_poll };

static void test_mux(void **state)
{
	struct fake port = { 0 }, rdma = { 0 };
	const struct tally_xport_mux_member mp = { .ops = &zc_ops, .ctx = &port };
	const struct tally_xport_mux_member mv = { .ops = &cp_ops, .ctx = &rdma, .owns = f_owns,
						   .conns = f_conns, .cheap = 1 };
	struct tally_xport_mux mx;
	struct tally_addr a = { 0 }, v = { .cookie = 7 };
	const struct tally_xport_ops *ops;
	uint8_t hdr[64] = { 0 }, buf[32];
	void *ctx;

	(void)state;
	tally_xport_mux_init(&mx);
	assert_int_equal(tally_xport_mux_add(&mx, &mp), 0);
	ops = tally_xport_mux_ops(&mx, &ctx); /* one member: its own ops */
	assert_ptr_equal(ops, &zc_ops);
	assert_ptr_equal(ctx, &port);
	assert_int_equal(tally_xport_mux_add(&mx, &mp), -EEXIST); /* one default */
	assert_int_equal(tally_xport_mux_add(&mx, &mv), 0);
	ops = tally_xport_mux_ops(&mx, &ctx);
	assert_ptr_equal(ctx, &mx);
	assert_int_equal(ops->buf_size, 32);
	assert_int_equal(ops->send(ctx, &a, hdr, NULL, 0), 0);
	assert_int_equal(ops->send(ctx, &v, hdr, NULL, 0), 0);
	assert_int_equal(port.sends, 1);
	assert_int_equal(rdma.sends, 1);
	assert_int_equal(ops->send_buf(ctx, &a, hdr, buf, 4, buf), 0); /* zero copy */
	assert_int_equal(ops->send_buf(ctx, &v, hdr, buf, 4, buf), 0); /* copied */
	assert_int_equal(port.send_bufs, 1);
	assert_int_equal(rdma.sends, 2);
	ops->buf_init(ctx, buf, buf, 4);
	assert_int_equal(port.inits, 1);
	assert_int_equal(ops->buf_busy(ctx, buf), 1);
	assert_int_equal(ops->now_ns(ctx), 42);
	/* poll: the cheap member first; the other when it is quiet */
	rdma.pending = 3;
	assert_int_equal(ops->poll(ctx, 0), 3);
	port.pending = 2;
	assert_int_equal(ops->poll(ctx, 1000), 2);
	assert_true(port.polls >= 1 && rdma.polls >= 2);
	/* without a default member a non-verbs peer gets -ENOTCONN */
	tally_xport_mux_init(&mx);
	assert_int_equal(tally_xport_mux_add(&mx, &mv), 0);
	ops = tally_xport_mux_ops(&mx, &ctx);
	assert_ptr_equal(ctx, &mx); /* not the member's own: it is no default */
	assert_int_equal(ops->send(ctx, &a, hdr, NULL, 0), -ENOTCONN);
	assert_int_equal(ops->buf_size, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lookup),
		cmocka_unit_test(test_settings),
		cmocka_unit_test(test_open_udp),
		cmocka_unit_test(test_mux),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
