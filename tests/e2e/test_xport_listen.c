/* SPDX-License-Identifier: Apache-2.0
 * test_xport_listen.c — the registry's appliance side (tally_xport_reg.h) over a fake
 * transport registered here beside "udp": per-core listening (hand-off with the core a
 * request names, attach, accept and refuse on a core, poll_burst), refused for a
 * transport without it; the control plane's counters of every registered transport (names,
 * order, each open instance added at its place); counters by name; defaults.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tally_xport_reg.h"

/* ---- the fake: a listener holds queued "connect requests"; cores count what they get */
struct fake {
	int listener;
	unsigned core;
	struct fake *cores[4];
	tally_xport_handoff_fn fn;
	void *arg;
	uint32_t pending[8];        /* listener: cores named by requests not yet handed off */
	unsigned npending;
	uint64_t accepted, refused, bursts, rejected;
};
static unsigned refusals;       /* tally_xport_refuse has no instance */

static void *f_open(const struct tally_xport_opts *o, int *err, char *eb, size_t el)
{
	struct fake *f = calloc(1, sizeof(*f));

	(void)eb, (void)el;
	if (!f)
		*err = -ENOMEM;
	else
		f->listener = o->per_core == TALLY_XPORT_LISTENER;
	return f;
}
static void f_close(void *c) { free(c); }
static const struct tally_xport_ops f_ops;
static const struct tally_xport_ops *f_ops_of(void *c) { (void)c; return &f_ops; }
static void f_set_rx(void *c, const struct tally_xport_rx *rx) { (void)c, (void)rx; }
static void f_set_handoff(void *l, tally_xport_handoff_fn fn, void *arg)
{
	((struct fake *)l)->fn = fn;
	((struct fake *)l)->arg = arg;
}
static int f_attach(void *l, unsigned core, void *c)
{
	struct fake *L = l;

	if (core >= 4)
		return -EINVAL;
	L->cores[core] = c;
	((struct fake *)c)->core = core;
	return 0;
}
static int f_listen_poll(void *l)
{
	struct fake *L = l;
	unsigned n = L->npending;

	for (unsigned i = 0; i < n; i++) {
		struct tally_xport_req r = { .core = L->pending[i], .len = 8 };

		r.data[0] = 0xfeed0000u + i;
		if (L->fn(L->arg, &r))
			L->rejected++;
	}
	L->npending = 0;
	return (int)n;
}
static void f_accept(void *c, const struct tally_xport_req *r)
{
	struct fake *f = c;

	if (r->core == f->core && r->len == 8 && (r->data[0] >> 16) == 0xfeed)
		f->accepted++;
}
static void f_refuse(const struct tally_xport_req *r) { (void)r; refusals++; }
static int f_poll_burst(void *c) { return (int)++((struct fake *)c)->bursts; }
static void f_defaults(struct tally_xport_opts *o)
{
	o->max_conns = o->max_conns ? o->max_conns : 256;
	o->slots = o->slots ? o->slots : 128;
}
static const struct tally_xport_counter_def f_defs[] = {
	{ "accepted", "requests accepted" }, { "rejected", "requests refused" },
};
static void f_ctl(const void *c, uint64_t *v)
{
	const struct fake *f = c;

	v[0] = f->accepted;
	v[1] = f->rejected;
}
static const struct tally_xport_impl fake_impl = {
	.name = "fake", .open = f_open, .close = f_close, .ops = f_ops_of, .set_rx = f_set_rx,
	.defaults = f_defaults, .set_handoff = f_set_handoff, .attach = f_attach,
	.listen_poll = f_listen_poll, .accept = f_accept, .refuse = f_refuse,
	.poll_burst = f_poll_burst, .ctl_defs = f_defs, .nctl = 2, .ctl_counters = f_ctl,
};
TALLY_XPORT_REGISTER(fake_impl)

/* ---- the program's side: one queue per core (a ring in tallyd) */
struct prog {
	struct tally_xport_req q[4][4];
	unsigned n[4];
};
static int prog_handoff(void *arg, const struct tally_xport_req *r)
{
	struct prog *p = arg;

	if (r->core >= 2 || p->n[r->core] >= 4)
		return -ENOBUFS;
	p->q[r->core][p->n[r->core]++] = *r;
	return 0;
}

static void test_per_core(void **state)
{
	struct tally_xport_opts o = { .listen = 1, .ncores = 2, .per_core = TALLY_XPORT_LISTENER };
	struct tally_xport l, c[2];
	struct prog p = { 0 };
	char err[256];

	(void)state;
	assert_int_equal(tally_xport_open("fake", "fake-listen", &o, &l, err, sizeof(err)), 0);
	assert_int_equal(tally_xport_set_handoff(&l, prog_handoff, &p), 0);
	o.per_core = TALLY_XPORT_CORE;
	for (unsigned i = 0; i < 2; i++) {
		assert_int_equal(tally_xport_open("fake", "fake-listen", &o, &c[i], err, sizeof(err)), 0);
		assert_int_equal(tally_xport_attach(&l, i, &c[i]), 0);
	}
	struct fake *L = l.ctx;
	L->pending[0] = 1, L->pending[1] = 0, L->pending[2] = 1, L->pending[3] = 7;
	L->npending = 4;
	assert_int_equal(tally_xport_listen_poll(&l), 4);
	assert_int_equal(L->rejected, 1);          /* core 7: the program refused it */
	uint64_t rej = 0;                           /* by name: a control-plane-only counter */
	assert_int_equal(tally_xport_counter_get(&l, "rejected", &rej), 0);
	assert_int_equal(rej, 1);
	assert_int_equal(tally_xport_counter_get(&l, "bogus", &rej), -ENOENT);
	assert_int_equal(p.n[0], 1);
	assert_int_equal(p.n[1], 2);
	for (unsigned k = 0; k < 2; k++)            /* each core accepts its own */
		for (unsigned i = 0; i < p.n[k]; i++)
			tally_xport_accept(&c[k], &p.q[k][i]);
	assert_int_equal(((struct fake *)c[0].ctx)->accepted, 1);
	assert_int_equal(((struct fake *)c[1].ctx)->accepted, 2);
	assert_int_equal(tally_xport_poll_burst(&c[1]), 1);
	tally_xport_refuse(&c[0], &p.q[0][0]);
	assert_int_equal(refusals, 1);

	/* the control plane's counters: every registered transport's, in one order */
	size_t n = tally_xport_ctl_count(), base = n;
	uint64_t v[TALLY_XPORT_CTL_MAX] = { 0 };
	const char *x;

	assert_int_equal(n, 2 + 4);                 /* fake's 2, udp's 4 */
	for (size_t i = 0; i < n; i++)
		if (tally_xport_ctl_def(i, &x) && !strcmp(x, "fake")) {
			base = i;
			break;
		}
	assert_true(base < n);
	assert_string_equal(tally_xport_ctl_def(base + 1, &x)->name, "rejected");
	assert_null(tally_xport_ctl_def(n, &x));
	tally_xport_ctl_add(&c[0], v);              /* core 0 with the listener's, as tallyd */
	tally_xport_ctl_add(&l, v);
	assert_int_equal(v[base], 1);
	assert_int_equal(v[base + 1], 1);
	tally_xport_ctl_add(&c[1], v);
	assert_int_equal(v[base], 3);
	for (size_t i = 0; i < n; i++)              /* nothing else touched */
		if (i != base && i != base + 1)
			assert_int_equal(v[i], 0);
	tally_xport_close(&l);
	tally_xport_close(&c[0]);
	tally_xport_close(&c[1]);
}

static void test_no_per_core(void **state)
{
	struct tally_xport_opts o = { .listen = 1, .ncores = 1, .host = "127.0.0.1",
				      .per_core = TALLY_XPORT_LISTENER };
	struct tally_xport x;
	char err[256];

	(void)state;
	assert_int_equal(tally_xport_open("udp", "rdma-listen", &o, &x, err, sizeof(err)), -ENOTSUP);
	assert_non_null(strstr(err, "rdma-listen: the udp transport has no per-core listening"));
	assert_null(x.ctx);
}

static void test_counters_defaults(void **state)
{
	struct tally_xport_opts o = { .listen = 1, .ncores = 1, .host = "127.0.0.1",
				      .port = (uint16_t)(41000 + getpid() % 2000) };
	struct tally_xport x;
	uint64_t v = 99;
	char err[256];

	(void)state;
	assert_int_equal(tally_xport_open("udp", NULL, &o, &x, err, sizeof(err)), 0);
	assert_int_equal(tally_xport_counter_get(&x, "rx_bytes", &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(tally_xport_counter_get(&x, "bogus", &v), -ENOENT);
	assert_int_equal(tally_xport_set_handoff(&x, prog_handoff, NULL), -ENOTSUP);
	tally_xport_close(&x);
	o.slots = 64;
	tally_xport_opts_defaults("fake", &o);      /* zero fields only */
	assert_int_equal(o.slots, 64);
	assert_int_equal(o.max_conns, 256);
	tally_xport_opts_defaults("bogus", &o);     /* unknown: nothing */
	assert_int_equal(o.max_conns, 256);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_per_core),
		cmocka_unit_test(test_no_per_core),
		cmocka_unit_test(test_counters_defaults),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
