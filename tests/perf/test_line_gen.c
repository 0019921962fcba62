/* SPDX-License-Identifier: Apache-2.0
 * The line-rate harness's logic (issue 38): histogram percentiles against known inputs, the
 * NDR/PDR search against a synthetic rate-limited function, and the generator against the
 * synthetic throttled appliance (offered > accepted, losses counted as missing RESULTs,
 * nothing resent, bad CRCs and wrong sums counted). No timed assertion: every check is on
 * counts, which hold however slowly this busy machine runs us.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "perf_gen.h"
#include "perf_gen_synth.h"
#include "perf_hist.h"
#include "perf_ndr.h"
#include "tally_proto.h"

static struct ph_hist h; /* 8 KiB: not on the stack */

static void hist_known(void **state)
{
	(void)state;
	ph_reset(&h);
	assert_int_equal(ph_percentile(&h, 50), 0);
	for (uint64_t v = 1; v <= 1000; v++)
		ph_record(&h, v);
	assert_int_equal(h.n, 1000);
	assert_int_equal(h.min, 1);
	assert_int_equal(h.max, 1000);
	/* the true value, at most 1/16 above it */
	const struct { double p; uint64_t v; } want[] = { { 50, 500 }, { 99, 990 },
		{ 99.9, 999 }, { 10, 100 }, { 1, 10 } };
	for (unsigned i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		uint64_t got = ph_percentile(&h, want[i].p);

		assert_true(got >= want[i].v);
		assert_true(got <= want[i].v + want[i].v / 16);
	}
	assert_int_equal(ph_percentile(&h, 100), 1000);
	/* small values are exact */
	assert_int_equal(ph_percentile(&h, 0.5), 5);
	ph_reset(&h);
	for (int i = 0; i < 100; i++)
		ph_record(&h, 123456);
	assert_int_equal(ph_percentile(&h, 50), 123456); /* clamped to max */
	assert_int_equal(ph_percentile(&h, 99.9), 123456);
	/* every bucket bound covers its values within 1/16, over the whole range */
	for (uint64_t v = 1; v && v < UINT64_MAX / 3; v = v * 3 + 1) {
		uint64_t u = ph_upper(ph_bucket(v));

		assert_true(u >= v);
		assert_true(u - v <= v / 16);
		assert_true(ph_bucket(v) < PH_BUCKETS);
	}
	assert_int_equal(ph_upper(ph_bucket(UINT64_MAX)), UINT64_MAX);
}

/* A device that takes `cap` pushes/s: the excess is lost. */
struct synth_fn {
	double cap;
	double gen;   /* the most the generator offers (0: whatever is asked) */
	unsigned calls;
};

static int synth_trial(void *ctx, double rate, struct pn_trial *t)
{
	struct synth_fn *s = ctx;

	s->calls++;
	t->offered = s->gen > 0 && rate > s->gen ? s->gen : rate;
	t->expected = 1000000;
	t->missing = rate > s->cap ? (uint64_t)(t->expected * (rate - s->cap) / rate) + 1 : 0;
	t->accepted = rate > s->cap ? s->cap : rate;
	return 0;
}

static void search_converges(void **state)
{
	struct synth_fn s = { .cap = 1e6 };
	struct pn_opts o = { .lo = 1e4, .hi = 4e6, .steps = 24, .trials = 3, .pdr_loss = 0.005,
			     .min_offer = 0.95 };
	struct pn_result r;
	double res = (o.hi - o.lo) / (1 << 24) * 2;

	(void)state;
	assert_int_equal(pn_search(&o, synth_trial, &s, &r), 0);
	assert_true(r.ndr <= s.cap && r.ndr > s.cap - res);
	assert_true(r.pdr > s.cap && r.pdr <= s.cap / (1 - 0.005));
	assert_true(r.pdr > s.cap / (1 - 0.005) - res);
	assert_int_equal(r.ndr_t.missing, 0);
	assert_true(pn_loss(&r.pdr_t) <= 0.005);
	assert_int_equal(r.runs, s.calls);
	/* a target faster than the upper bound: found = hi, the generator is the limit */
	s.cap = 1e7;
	s.calls = 0;
	assert_int_equal(pn_search(&o, synth_trial, &s, &r), 0);
	assert_true(r.ndr == o.hi && r.pdr == o.hi);
	assert_int_equal(s.calls, 2 * o.trials);
	/* nothing passes: 0, after the two bounds */
	s.cap = 1;
	s.calls = 0;
	assert_int_equal(pn_search(&o, synth_trial, &s, &r), 0);
	assert_true(r.ndr == 0 && r.pdr == 0);
	assert_int_equal(s.calls, 4); /* a failed trial ends its step */
	assert_int_equal(r.gen_limited, 0);
	/* a generator that offers at most 500 k/s in front of a 1 M/s device: the search stops
	 * below 500 k / 0.95 and says the generator was the limit */
	s.cap = 1e6;
	s.gen = 5e5;
	assert_int_equal(pn_search(&o, synth_trial, &s, &r), 0);
	assert_true(r.ndr <= 5e5 / 0.95 && r.ndr > 5e5 - res);
	assert_true(r.gen_limited > 0);
	o.trials = 0;
	assert_int_equal(pn_search(&o, synth_trial, &s, &r), -22);
}

#define RANKS 32
#define KEYS 2
#define CHUNKS 2

static struct pg_opts gen_opts(unsigned chunk)
{
	struct pg_opts o = { .ranks = RANKS, .keys = KEYS, .chunks = CHUNKS, .chunk_bytes = chunk,
			     .window = 8, .burst = 32, .sample_every = 1, .job_id = 7,
			     .token = 0x1234, .key_base = 100 };
	return o;
}

static struct ps_target *target(unsigned chunk, double cap, uint64_t corrupt, uint64_t wrong)
{
	struct ps_opts so = { .cap_pps = cap, .ranks = RANKS, .keys = KEYS, .chunks = CHUNKS,
			      .chunk_bytes = chunk, .window = 8, .key_base = 100, .sums = 64, .depth = 512,
			      .corrupt_every = corrupt, .wrong_every = wrong };
	struct ps_target *t;

	assert_int_equal(ps_create(&so, &t), 0);
	return t;
}

static struct pg_stats st;

static void gen_throttled(void **state)
{
	struct pg_opts o = gen_opts(1024);
	struct pg_gen *g;
	struct ps_target *t = target(1024, 20000, 0, 0);
	struct pg_io io;

	(void)state;
	ps_io(t, &io);
	assert_int_equal(pg_create(&o, &g), 0);
	/* unpaced: offer as fast as the port takes frames */
	assert_int_equal(pg_run(g, &io, 0, 0.2, 0.05, &st), 0);
	assert_true(st.offered > 0);
	assert_int_equal(st.tx_refused, 0);
	assert_int_equal(st.expected, st.offered);          /* every push retired */
	assert_int_equal(st.results + st.missing, st.expected);
	assert_true(ps_stats(t)->dropped_rate > 0);          /* the target was saturated */
	/* offered more than accepted, and the losses are whole chunks' RESULTs */
	assert_true(st.offered > 2 * st.results);
	assert_true(st.missing >= ps_stats(t)->dropped_rate);
	assert_int_equal(ps_stats(t)->pushes, st.offered);  /* nothing resent */
	assert_int_equal(st.crc_bad + st.sum_bad + st.dup + st.stray, 0);
	assert_int_equal(st.sum_checked, st.results);
	assert_int_equal(st.chunk_ns.n, st.results);
	assert_int_equal(st.push_ns.n, st.results);
	/* a rank's own push is never later than the chunk's last push */
	assert_true(st.push_ns.max >= st.chunk_ns.max);
	assert_true(st.polls >= st.busy_polls);
	pg_free(g);
	ps_free(t);
}

static void gen_clean_and_faults(void **state)
{
	struct pg_opts o = gen_opts(4096);
	struct pg_gen *g;
	struct ps_target *t = target(4096, 0, 0, 0);
	struct pg_io io;

	(void)state;
	ps_io(t, &io);
	assert_int_equal(pg_create(&o, &g), 0);
	/* paced, unthrottled: every RESULT comes, every sum right. A descheduled test sends
	 * less than 0.1 s of pushes (no catch-up storm): run again until two rounds went by */
	for (int k = 0; k < 20 && (!k || st.rounds < 2); k++)
		assert_int_equal(pg_run(g, &io, 50000, 0.1, 0.05, &st), 0);
	assert_true(st.offered > 0);
	assert_int_equal(st.missing, 0);
	assert_int_equal(st.results, st.offered);
	assert_int_equal(st.sum_checked, st.results);
	assert_int_equal(st.sum_bad + st.crc_bad + st.dup + st.stray, 0);
	assert_true(st.round_ns.n > 0 && st.round_ns.n <= st.rounds);
	pg_free(g);
	ps_free(t);

	/* faults: a bad CRC on every 3rd chunk's rank-0 RESULT, a wrong sum in every 5th */
	t = target(4096, 0, 3, 5);
	ps_io(t, &io);
	assert_int_equal(pg_create(&o, &g), 0);
	for (int k = 0; k < 20 && (!k || ps_stats(t)->chunks < 15); k++) {
		ps_reset_stats(t); /* the fault pattern counts from here */
		assert_int_equal(pg_run(g, &io, 50000, 0.1, 0.05, &st), 0);
	}
	uint64_t chunks = ps_stats(t)->chunks;

	assert_true(chunks >= 15);
	assert_int_equal(st.crc_bad, chunks / 3);
	assert_int_equal(st.missing, chunks / 3);  /* a RESULT with a bad CRC is not counted */
	assert_int_equal(st.sum_bad, chunks / 5 * RANKS - chunks / 15);
	assert_int_equal(st.results + st.missing, st.expected);
	pg_free(g);
	ps_free(t);
}

/* The search driving the generator against the throttled target: 2 steps, 2 trials. */
struct gen_ctx {
	struct pg_gen *g;
	struct pg_io io;
	struct ps_target *t;
};

static int gen_trial(void *ctx, double rate, struct pn_trial *tr)
{
	struct gen_ctx *c = ctx;
	int rc = pg_run(c->g, &c->io, rate, 0.03, 0.02, &st);

	tr->offered = st.offered / st.secs;
	tr->accepted = st.results / st.secs;
	tr->expected = st.expected;
	tr->missing = st.missing;
	tr->bad = st.crc_bad + st.sum_bad;
	return rc;
}

static void search_generator(void **state)
{
	struct pg_opts o = gen_opts(1024);
	struct gen_ctx c;
	struct pn_opts so = { .lo = 1000, .hi = 400000, .steps = 2, .trials = 2,
			      .pdr_loss = 0.005, .min_offer = 0 };
	struct pn_result r;

	(void)state;
	c.t = target(1024, 20000, 0, 0);
	ps_io(c.t, &c.io);
	assert_int_equal(pg_create(&o, &c.g), 0);
	assert_int_equal(pn_search(&so, gen_trial, &c, &r), 0);
	/* the target takes 20 k/s: 400 k/s cannot pass; what passed passed every trial */
	assert_true(r.ndr < so.hi && r.pdr < so.hi);
	assert_true(r.pdr >= r.ndr); /* PDR searched from the NDR up */
	if (r.ndr > 0)
		assert_int_equal(r.ndr_t.missing, 0);
	assert_true(r.runs >= 2 && r.runs <= 2 * (2 + so.steps) * so.trials);
	pg_free(c.g);
	ps_free(c.t);
}

/* A port that swallows pushes and returns three RESULT-like frames that answer none of them:
 * a future round, another job, another op. */
struct odd_port {
	uint8_t f[3][64 + 1024];
	float sum[256];
	int given;
};

static unsigned odd_tx(void *ctx, const uint8_t *const *fr, const uint32_t *l, unsigned n)
{
	(void)ctx, (void)fr, (void)l;
	return n;
}

static unsigned odd_rx(void *ctx, struct pg_frame *f, unsigned max)
{
	struct odd_port *p = ctx;

	if (p->given || max < 3)
		return 0;
	p->given = 1;
	for (unsigned i = 0; i < 3; i++) {
		f[i].hdr = p->f[i];
		f[i].hlen = 64;
		f[i].payload = p->f[i] + 64;
		f[i].plen = i == 2 ? 0 : 1024;
	}
	return 3;
}

static void gen_strays(void **state)
{
	struct pg_opts o = gen_opts(1024);
	static struct odd_port p;
	struct pg_io io = { .ctx = &p, .tx = odd_tx, .rx = odd_rx };
	struct pg_gen *g;
	struct tally_hdr h = { .op = TALLY_OP_RESULT, .job_id = 7, .rank = 0, .token = 0x1234,
			       .key = 100, .round = 1, .count = 256, .dtype = 0, .contrib = RANKS };

	(void)state;
	tally_proto_finish(p.f[0], &h, p.sum, 1024);  /* round 1: not sent yet */
	h.round = 0;
	h.job_id = 8;
	tally_proto_finish(p.f[1], &h, p.sum, 1024);  /* another job */
	h.job_id = 7;
	h.op = TALLY_OP_HELD;
	tally_proto_finish(p.f[2], &h, NULL, 0);      /* not a RESULT */
	assert_int_equal(pg_create(&o, &g), 0);
	/* 1000/s for 50 ms: a few pushes of round 0, far from its 512 */
	assert_int_equal(pg_run(g, &io, 1000, 0.05, 0.01, &st), 0);
	assert_int_equal(st.stray, 3);
	assert_int_equal(st.results, 0);
	assert_int_equal(st.missing, st.offered);
	assert_true(st.offered < (uint64_t)RANKS * KEYS * CHUNKS);
	pg_free(g);
}

/* A port in front of the synthetic target that loses the 5th push it is given. */
struct lossy {
	struct pg_io in;
	uint64_t n;
};

static unsigned lossy_tx(void *ctx, const uint8_t *const *fr, const uint32_t *l, unsigned n)
{
	struct lossy *p = ctx;

	for (unsigned i = 0; i < n; i++)
		if (++p->n != 5)
			p->in.tx(p->in.ctx, &fr[i], &l[i], 1);
	return n; /* the port took it; the wire lost it */
}

static unsigned lossy_rx(void *ctx, struct pg_frame *f, unsigned max)
{
	struct lossy *p = ctx;

	return p->in.rx(p->in.ctx, f, max);
}

static void gen_repair(void **state)
{
	struct pg_opts o = gen_opts(1024);
	struct ps_target *t = target(1024, 0, 0, 0);
	static struct lossy lp;
	struct pg_io io = { .ctx = &lp, .tx = lossy_tx, .rx = lossy_rx };
	struct pg_gen *g;

	(void)state;
	ps_io(t, &lp.in);
	o.window = 2;
	o.repair = 1;
	assert_int_equal(pg_create(&o, &g), 0);
	assert_int_equal(pg_run(g, &io, 20000, 0.05, 0.02, &st), 0);
	/* whole rounds only; the window waited on the round with the lost push (the pushes due
	 * meanwhile held back), then re-sent that chunk once, all its ranks (this synthetic
	 * target, unlike the engine, sums a re-sent push again: its sums are not checked) */
	assert_int_equal((st.offered - st.held_back) % ((uint64_t)RANKS * KEYS * CHUNKS), 0);
	assert_int_equal(st.retx, RANKS);
	assert_true(st.held_back > 0);
	assert_int_equal(st.results + st.missing, st.expected);
	assert_int_equal(st.expected + st.held_back, st.offered);
	assert_int_equal(st.crc_bad + st.dup, 0);
	/* no loss: no repair */
	assert_int_equal(pg_run(g, &io, 20000, 0.05, 0.02, &st), 0);
	assert_int_equal(st.retx, 0);
	assert_int_equal(st.missing, 0);
	assert_int_equal(st.held_back, 0);
	pg_free(g);
	ps_free(t);
}

/* A forwarder as tallyd --io-forward: every push comes back as it was sent (a copy), but
 * the `lose`th is lost and the `flip`th comes back with one payload float changed and its
 * CRC recomputed (a good CRC, a wrong payload). */
#define ECHO_Q 4096
struct echo_port {
	uint8_t f[ECHO_Q][64 + 1024];
	uint32_t len[ECHO_Q];
	unsigned head, tail;
	uint64_t n, lose, flip;
};

static unsigned echo_tx(void *ctx, const uint8_t *const *fr, const uint32_t *l, unsigned n)
{
	struct echo_port *p = ctx;

	for (unsigned i = 0; i < n; i++) {
		uint8_t *f = p->f[p->tail % ECHO_Q];

		if (++p->n == p->lose || p->tail - p->head == ECHO_Q)
			continue;
		memcpy(f, fr[i], l[i]);
		if (p->n == p->flip) {
			struct tally_hdr h;

			tally_proto_peek_hdr(f, &h);
			((float *)(f + 64))[3] += 1.0f;
			tally_proto_finish(f, &h, f + 64, l[i] - 64);
		}
		p->len[p->tail++ % ECHO_Q] = l[i];
	}
	return n;
}

static unsigned echo_rx(void *ctx, struct pg_frame *f, unsigned max)
{
	struct echo_port *p = ctx;
	unsigned k = 0;

	for (; k < max && p->head != p->tail; k++, p->head++) {
		f[k].hdr = p->f[p->head % ECHO_Q];
		f[k].hlen = 64;
		f[k].payload = f[k].hdr + 64;
		f[k].plen = p->len[p->head % ECHO_Q] - 64;
	}
	return k;
}

static void gen_echo(void **state)
{
	struct pg_opts o = gen_opts(1024);
	static struct echo_port p;
	struct pg_io io = { .ctx = &p, .tx = echo_tx, .rx = echo_rx };
	struct pg_gen *g;

	(void)state;
	o.window = 2;
	o.repair = 1;
	o.echo = 1;
	assert_int_equal(pg_create(&o, &g), 0);
	/* every push echoed: each is its own answer, every payload checked equal to the sent */
	assert_int_equal(pg_run(g, &io, 20000, 0.05, 0.02, &st), 0);
	assert_true(st.offered >= (uint64_t)RANKS * KEYS * CHUNKS);
	assert_int_equal(st.results, st.offered);
	assert_int_equal(st.missing + st.retx + st.stray + st.crc_bad + st.sum_bad + st.dup, 0);
	assert_int_equal(st.sum_checked, st.results);
	assert_int_equal(st.chunk_ns.n, st.results);
	/* the 7th push lost: its chunk re-sent (all ranks, as for the engine); the 40th echoed
	 * with a changed payload under a good CRC: a wrong "sum" */
	p.n = 0;
	p.lose = 7;
	p.flip = 40; /* slot 1: not in the repaired chunk; sent in the first round however few the
		      * trial sends (a descheduled generator may send only one round) */
	assert_int_equal(pg_run(g, &io, 20000, 0.05, 0.02, &st), 0);
	assert_int_equal(st.retx, RANKS);
	assert_int_equal(st.sum_bad, 1);
	assert_int_equal(st.crc_bad, 0);
	assert_int_equal(st.results + st.missing, st.expected);
	/* a RESULT is not the answer a forwarder gives: stray */
	pg_free(g);
	o.window = 8;
	o.repair = 0;
	assert_int_equal(pg_create(&o, &g), 0);
	{
		static struct odd_port q;
		struct pg_io oio = { .ctx = &q, .tx = odd_tx, .rx = odd_rx };
		struct tally_hdr h = { .op = TALLY_OP_RESULT, .job_id = 7, .rank = 0,
				       .token = 0x1234, .key = 100, .round = 0, .count = 256 };

		for (unsigned i = 0; i < 3; i++)
			tally_proto_finish(q.f[i], &h, q.sum, 1024);
		assert_int_equal(pg_run(g, &oio, 1000, 0.05, 0.01, &st), 0);
		assert_true(st.offered > 0);
		assert_int_equal(st.results, 0);
		assert_int_equal(st.stray + st.crc_bad, 3);
		assert_true(st.stray >= 2);
	}
	pg_free(g);
}

static void gen_bad_options(void **state)
{
	struct pg_opts o = gen_opts(1022);
	struct pg_gen *g;

	(void)state;
	assert_int_equal(pg_create(&o, &g), -22); /* not whole f32 */
	o = gen_opts(1024);
	o.window = 1;
	assert_int_equal(pg_create(&o, &g), -22);
	o = gen_opts(1024);
	o.burst = PG_MAX_BURST + 1;
	assert_int_equal(pg_create(&o, &g), -22);
}

/* --gen-lcores: lcore g of N against D cores gets key_base = base + g*m, group m = D/N,
 * stride D: its keys are owned (key % D) by its port's cores g*m .. g*m+m-1 only, every one
 * of them, and each id maps back to its index; other ids are not its keys. N > D: group 1,
 * base + g % D (perf_gen_mc.c gm_keys). */
static void gen_key_layout(void **state)
{
	const unsigned D = 8, N = 2, m = D / N, keys = 6, base = 1024 * D;

	(void)state;
	for (unsigned g = 0; g < N; g++) {
		struct pg_opts o = gen_opts(1024);
		unsigned seen = 0;

		o.keys = keys;
		o.key_base = base + g * m;
		o.key_group = m;
		o.key_stride = D;
		for (unsigned k = 0; k < keys; k++) {
			uint32_t id = pg_key(&o, k);

			assert_true(id % D >= g * m && id % D < (g + 1) * m);
			seen |= 1u << (id % D);
			assert_int_equal(pg_key_index(&o, id), (int)k);
		}
		assert_int_equal(seen, ((1u << m) - 1) << (g * m));
		assert_int_equal(pg_key_index(&o, base + (g + 1) * m % D), -1); /* another's */
		assert_int_equal(pg_key_index(&o, pg_key(&o, keys)), -1);     /* past the last */
		assert_int_equal(pg_key_index(&o, base - 1), -1);
	}
	/* N > D (tallyd --cores D polls port g with core g % D): group 1, base + g % D; every
	 * key of lcore g is core g % D's */
	for (unsigned g = 0; g < 4; g++) {
		const unsigned d2 = 2;
		struct pg_opts o = gen_opts(1024);

		o.keys = keys;
		o.key_base = 1024 * d2 + g % d2;
		o.key_group = 1;
		o.key_stride = d2;
		for (unsigned k = 0; k < keys; k++) {
			assert_int_equal(pg_key(&o, k) % d2, g % d2);
			assert_int_equal(pg_key_index(&o, pg_key(&o, k)), (int)k);
		}
		assert_int_equal(pg_key_index(&o, o.key_base + 1), -1); /* the other core's */
	}
	struct pg_opts o = gen_opts(1024);
	struct pg_gen *gen;

	o.key_group = 4;
	o.key_stride = 2; /* a group wider than the stride: keys would collide */
	assert_int_equal(pg_create(&o, &gen), -22);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(hist_known),
		cmocka_unit_test(search_converges),
		cmocka_unit_test(gen_throttled),
		cmocka_unit_test(gen_clean_and_faults),
		cmocka_unit_test(search_generator),
		cmocka_unit_test(gen_strays),
		cmocka_unit_test(gen_repair),
		cmocka_unit_test(gen_echo),
		cmocka_unit_test(gen_bad_options),
		cmocka_unit_test(gen_key_layout),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
