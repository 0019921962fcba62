/* SPDX-License-Identifier: Apache-2.0
 * test_agent.c — libtally_agent unit tests over the in-process loopnet: configuration and
 * environment, the optimal split and key placement, partitioning, sums across 4 agents
 * (threads), averaging, scheduling order (priority, then submission), the credit window,
 * callbacks and their deadline, and error paths with their messages. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent_internal.h"
#include "loopnet.h"
#include "tally_agent.h"
#include "tally_sum.h"

static void clear_env(void)
{
	const char *vars[] = {"TALLY_APPLIANCES", "TALLY_JOB_ID", "TALLY_TOKEN", "TALLY_PARTITION_BYTES",
			      "TALLY_CREDIT_BYTES", "TALLY_AVERAGE", "RANK", "WORLD_SIZE", "LOCAL_RANK",
			      "LOCAL_WORLD_SIZE", "TALLY_RANK", "TALLY_WORLD_SIZE", "TALLY_QUORUM",
			      "TALLY_RTO_MIN_US"};
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
}

static void base_cfg(struct tally_agent_cfg *c, int rank, int world)
{
	tally_agent_cfg_defaults(c);
	assert_int_equal(tally_agent_parse_appliances(c, "127.0.0.1:9170", NULL, 0), 0);
	c->rank = rank;
	c->world_size = world;
	c->partition_bytes = 4096;
	c->credit_bytes = 16384;
}

static struct tally_agent *mk(struct loophub *h, const struct tally_agent_cfg *c)
{
	char e[256] = "";
	int err = 0;
	struct tally_agent *a = agent_create_net(c, &loopnet_ops, loopnet_create(h, (unsigned)c->rank),
						 &err, e, sizeof(e));
	if (!a)
		fail_msg("agent_create_net: %d %s", err, e);
	return a;
}

/* ---- configuration ---- */

static void test_env(void **state)
{
	(void)state;
	struct tally_agent_cfg c;
	char e[256];

	clear_env();
	tally_agent_cfg_defaults(&c);
	setenv("TALLY_APPLIANCES", "10.0.0.1:9000,appl-b@40+colo,10.0.0.3", 1);
	setenv("TALLY_JOB_ID", "42", 1);
	setenv("TALLY_TOKEN", "0xdeadbeefcafe", 1);
	setenv("RANK", "3", 1);
	setenv("WORLD_SIZE", "8", 1);
	setenv("LOCAL_RANK", "1", 1);
	setenv("LOCAL_WORLD_SIZE", "2", 1);
	setenv("TALLY_AVERAGE", "1", 1);
	assert_int_equal(tally_agent_cfg_from_env(&c, e, sizeof(e)), 0);
	assert_int_equal(c.nappliances, 3);
	assert_string_equal(c.appliances[0].host, "10.0.0.1");
	assert_int_equal(c.appliances[0].port, 9000);
	assert_string_equal(c.appliances[1].host, "appl-b");
	assert_int_equal(c.appliances[1].port, 9170);
	assert_true(c.appliances[1].colocated);
	assert_float_equal(c.appliances[1].rate_gbps, 40.0, 1e-9);
	assert_int_equal(c.appliances[2].port, 9170);
	assert_int_equal(c.job_id, 42);
	assert_true(c.token == 0xdeadbeefcafeull);
	assert_int_equal(c.rank, 3);
	assert_int_equal(c.world_size, 8);
	assert_int_equal(c.local_rank, 1);
	assert_int_equal(c.local_size, 2);
	assert_int_equal(c.average, 1);
	assert_int_equal(agent_cfg_resolve(&c, e, sizeof(e)), 0);
	assert_int_equal(c.gpu_hosts, 4);
	assert_int_equal(c.rto_min_us, 0);

	/* the RTO floor: from the environment, and never above the ceiling */
	setenv("TALLY_RTO_MIN_US", "2000", 1);
	assert_int_equal(tally_agent_cfg_from_env(&c, e, sizeof(e)), 0);
	assert_int_equal(c.rto_min_us, 2000);
	assert_int_equal(tally_agent_cfg_check(&c, e, sizeof(e)), 0);
	c.rto_max_us = 1000;
	assert_int_equal(tally_agent_cfg_check(&c, e, sizeof(e)), -EINVAL);
	assert_non_null(strstr(e, "rto_min_us 2000"));
	c.rto_max_us = 0;
	unsetenv("TALLY_RTO_MIN_US");

	/* TALLY_RANK wins over torchrun's RANK */
	setenv("TALLY_RANK", "5", 1);
	assert_int_equal(tally_agent_cfg_from_env(&c, e, sizeof(e)), 0);
	assert_int_equal(c.rank, 5);

	/* bad values: a message naming the variable, cfg unchanged */
	struct tally_agent_cfg before = c;
	setenv("WORLD_SIZE", "eight", 1);
	assert_int_equal(tally_agent_cfg_from_env(&c, e, sizeof(e)), -EINVAL);
	assert_non_null(strstr(e, "WORLD_SIZE"));
	assert_memory_equal(&before, &c, sizeof(c));
	setenv("WORLD_SIZE", "8", 1);
	setenv("TALLY_TOKEN", "-1", 1);
	assert_int_equal(tally_agent_cfg_from_env(&c, e, sizeof(e)), -EINVAL);
	assert_non_null(strstr(e, "TALLY_TOKEN"));
	clear_env();
}

static void test_appliance_list_errors(void **state)
{
	(void)state;
	const char *bad[] = {"", ",", "a:0", "a:70000", "a:x", "a,,b", "a,", "a@0", "a@-3", "a+gpu", ":9170"};
	struct tally_agent_cfg c;
	char e[256];

	tally_agent_cfg_defaults(&c);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		e[0] = 0;
		assert_int_equal(tally_agent_parse_appliances(&c, bad[i], e, sizeof(e)), -EINVAL);
		assert_true(strlen(e) > 0);
		assert_int_equal(c.nappliances, 0); /* unchanged */
	}
}

static void test_cfg_check(void **state)
{
	(void)state;
	struct tally_agent_cfg c;
	char e[256];

	base_cfg(&c, 4, 4); /* rank out of range */
	assert_int_equal(agent_cfg_resolve(&c, e, sizeof(e)), -EINVAL);
	assert_non_null(strstr(e, "rank 4"));
	base_cfg(&c, 0, 2);
	c.partition_bytes = 1001;
	assert_int_equal(agent_cfg_resolve(&c, e, sizeof(e)), -EINVAL);
	assert_non_null(strstr(e, "partition_bytes"));
	tally_agent_cfg_defaults(&c);
	assert_int_equal(agent_cfg_resolve(&c, e, sizeof(e)), -EINVAL);
	assert_non_null(strstr(e, "TALLY_APPLIANCES"));
}

/* ---- split and placement ---- */

static void test_split(void **state)
{
	(void)state;
	double cpu, gpu;

	/* BytePS: n=4 GPU hosts, k=2 dedicated: M_cpu = 6/20, M_gpu = 2/20 */
	assert_int_equal(tally_agent_split(4, 2, 4, &cpu, &gpu), 0);
	assert_float_equal(cpu, 6.0 / 20.0, 1e-12);
	assert_float_equal(gpu, 2.0 / 20.0, 1e-12);
	for (unsigned n = 2; n < 10; n++)
		for (unsigned k = 0; k < n; k++) {
			assert_int_equal(tally_agent_split(n, k, n, &cpu, &gpu), 0);
			assert_float_equal(k * cpu + n * gpu, 1.0, 1e-12);
		}
	/* no colocated service: equal shares; k >= n: colocated ones get nothing */
	assert_int_equal(tally_agent_split(8, 4, 0, &cpu, &gpu), 0);
	assert_float_equal(cpu, 0.25, 1e-12);
	assert_int_equal(tally_agent_split(2, 3, 2, &cpu, &gpu), 0);
	assert_float_equal(gpu, 0.0, 1e-12);
	assert_int_equal(tally_agent_split(0, 0, 0, &cpu, &gpu), -EINVAL);
}

static void test_placement(void **state)
{
	(void)state;
	struct tally_agent_cfg c;
	struct agent_plan p;
	uint64_t total = 0;

	/* rates 100, 100, 200: the fast appliance gets half the bytes */
	base_cfg(&c, 0, 4);
	assert_int_equal(tally_agent_parse_appliances(&c, "a@100,b@100,c@200", NULL, 0), 0);
	assert_int_equal(agent_cfg_resolve(&c, NULL, 0), 0);
	assert_int_equal(agent_plan_init(&p, &c), 0);
	for (int i = 0; i < 1000; i++) {
		size_t b = 1000 + (size_t)(i * 7919) % 3000;
		agent_plan_place(&p, b);
		total += b;
	}
	assert_true(llabs((long long)p.load[2] - (long long)total / 2) <= 4000);
	assert_true(llabs((long long)p.load[0] - (long long)total / 4) <= 4000);
	/* colocated: n=4 hosts (world 4, local 1), 2 dedicated + 4 colocated services */
	base_cfg(&c, 0, 4);
	c.local_size = 1;
	c.local_rank = 0;
	assert_int_equal(tally_agent_parse_appliances(&c, "d1,d2,g1+colo,g2+colo,g3+colo,g4+colo", NULL, 0), 0);
	assert_int_equal(agent_cfg_resolve(&c, NULL, 0), 0);
	assert_int_equal(agent_plan_init(&p, &c), 0);
	assert_float_equal(p.share[0], 0.3, 1e-12);
	assert_float_equal(p.share[2], 0.1, 1e-12);
}

/* ---- partitions, sums ---- */

static void test_partitions(void **state)
{
	(void)state;
	struct loophub *h = loophub_create(1);
	struct tally_agent_cfg c;
	struct tally_agent_part parts[16];
	struct tally_agent *a;

	base_cfg(&c, 0, 1);
	assert_int_equal(tally_agent_parse_appliances(&c, "a,b", NULL, 0), 0);
	a = mk(h, &c);
	int t0 = tally_agent_declare(a, "w0", 3 * 4096 + 12, TALLY_DT_F32, 0);
	int t1 = tally_agent_declare(a, "w1", 100, TALLY_DT_I32, 1);
	assert_int_equal(t0, 0);
	assert_int_equal(t1, 1);
	assert_int_equal(tally_agent_partitions(a, t0, parts, 16), 4);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(parts[i].key, i);
		assert_int_equal(parts[i].offset, (size_t)i * 4096);
		assert_int_equal(parts[i].bytes, i < 3 ? 4096 : 12);
		assert_int_equal(loophub_key_appl(h, parts[i].key), (int)parts[i].appliance);
	}
	/* two equal appliances: the big partitions alternate */
	assert_int_not_equal(parts[0].appliance, parts[1].appliance);
	assert_int_equal(tally_agent_partitions(a, t1, parts, 16), 1);
	assert_int_equal(parts[0].key, 4); /* keys continue in declaration order */
	/* same name, same shape: same id; other shape: a clear error */
	assert_int_equal(tally_agent_declare(a, "w0", 3 * 4096 + 12, TALLY_DT_F32, 0), t0);
	assert_int_equal(tally_agent_declare(a, "w0", 400, TALLY_DT_F32, 0), -EINVAL);
	assert_non_null(strstr(tally_agent_strerror(a), "changed shape"));
	assert_int_equal(tally_agent_declare(a, "odd", 6, TALLY_DT_F32, 0), -EINVAL);
	assert_int_equal(tally_agent_declare(a, "bad-dtype", 8, 9, 0), -EINVAL);
	assert_int_equal(tally_agent_lookup(a, "w1"), t1);
	assert_int_equal(tally_agent_lookup(a, "nope"), -ENOENT);
	tally_agent_destroy(a);
	loophub_destroy(h);
}

#define W 4
#define N (3 * 1024 + 5) /* f32 elements: 4 partitions, the last one short */

struct worker {
	struct loophub *h;
	int rank, average, iters;
	float *data;
	int32_t *idata;
	int rc;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct tally_agent_cfg c;

	base_cfg(&c, w->rank, W);
	c.average = w->average;
	struct tally_agent *a = mk(w->h, &c);
	int tf = tally_agent_declare(a, "grad", N * 4, TALLY_DT_F32, 1);
	int ti = tally_agent_declare(a, "count", 64 * 4, TALLY_DT_I32, 0);

	w->rc = tf < 0 || ti < 0 ? -1 : 0;
	for (int it = 0; it < w->iters && !w->rc; it++) {
		for (int i = 0; i < N; i++)
			w->data[i] = (float)(w->rank + 1) * (float)(i % 97) + (float)it;
		for (int i = 0; i < 64; i++)
			w->idata[i] = w->rank * 1000 + i;
		int hf = tally_agent_push_pull(a, tf, w->data, N * 4, TALLY_AGENT_CPU, NULL, NULL, NULL);
		int hi = tally_agent_push_pull(a, ti, w->idata, 64 * 4, TALLY_AGENT_CPU, NULL, NULL, NULL);
		if (hf < 0 || hi < 0 || tally_agent_wait(a, hf) || tally_agent_wait(a, hi))
			w->rc = -2;
	}
	tally_agent_destroy(a);
	return NULL;
}

static void run_world(int average)
{
	struct loophub *h = loophub_create(W);
	struct worker w[W];
	pthread_t t[W];
	const int iters = 3;

	for (int r = 0; r < W; r++) {
		w[r] = (struct worker){h, r, average, iters, calloc(N, 4), calloc(64, 4), 0};
		pthread_create(&t[r], NULL, worker_main, &w[r]);
	}
	for (int r = 0; r < W; r++)
		pthread_join(t[r], NULL);
	for (int r = 0; r < W; r++) {
		assert_int_equal(w[r].rc, 0);
		for (int i = 0; i < N; i++) {
			/* sum over ranks of (rank+1)*(i%97) + it, last iteration it = 2 */
			float s = 10.0f * (float)(i % 97) + (float)(W * (iters - 1));
			assert_float_equal(w[r].data[i], average ? s / W : s, 1e-3);
		}
		for (int i = 0; i < 64; i++)
			assert_int_equal(w[r].idata[i], 6000 + 4 * i); /* integers are never averaged */
		free(w[r].data);
		free(w[r].idata);
	}
	loophub_destroy(h);
}

static void test_sum_4_workers(void **state)
{
	(void)state;
	run_world(0);
}

static void test_average_4_workers(void **state)
{
	(void)state;
	run_world(1);
}

/* ---- scheduling ---- */

static void wait_starts(struct loophub *h, unsigned n)
{
	unsigned got = 0;

	for (int i = 0; i < 2000; i++) {
		loophub_starts(h, 0, &got);
		if (got >= n)
			return;
		usleep(1000);
	}
	fail_msg("only %u of %u starts", got, n);
}

static void test_priority_and_credits(void **state)
{
	(void)state;
	struct loophub *h = loophub_create(1);
	struct tally_agent_cfg c;
	struct tally_agent *a;
	static float bufs[3][4 * 1024];
	unsigned n;

	base_cfg(&c, 0, 1);
	c.credit_bytes = 2 * 4096; /* two partitions in flight */
	c.credit_stall_ms = 600000; /* completions are held on purpose: no overdraft */
	a = mk(h, &c);
	int tc = tally_agent_declare(a, "first", 2 * 4096, TALLY_DT_F32, 0);   /* keys 0,1 */
	int tl = tally_agent_declare(a, "late", 3 * 4096, TALLY_DT_F32, 5);    /* keys 2,3,4 */
	int te = tally_agent_declare(a, "early", 2 * 4096, TALLY_DT_F32, 1);   /* keys 5,6 */
	/* round 0 (first pushes) goes in declaration order; priorities order later rounds */
	int h0[3] = {tally_agent_push_pull(a, tc, bufs[0], 2 * 4096, TALLY_AGENT_CPU, NULL, NULL, NULL),
		     tally_agent_push_pull(a, tl, bufs[1], 3 * 4096, TALLY_AGENT_CPU, NULL, NULL, NULL),
		     tally_agent_push_pull(a, te, bufs[2], 2 * 4096, TALLY_AGENT_CPU, NULL, NULL, NULL)};
	for (int i = 0; i < 3; i++)
		assert_int_equal(tally_agent_wait(a, h0[i]), 0);
	const uint32_t *s0 = loophub_starts(h, 0, &n);
	const uint32_t want0[] = {0, 1, 2, 3, 4, 5, 6};
	assert_int_equal(n, 7);
	assert_memory_equal(s0, want0, sizeof(want0));
	loophub_hold(h, 1);
	int hc = tally_agent_push_pull(a, tc, bufs[0], 2 * 4096, TALLY_AGENT_CPU, NULL, NULL, NULL);
	wait_starts(h, 7 + 2);
	/* the window is full: these wait, and go in priority order, not submission order */
	int hl = tally_agent_push_pull(a, tl, bufs[1], 3 * 4096, TALLY_AGENT_CPU, NULL, NULL, NULL);
	int he = tally_agent_push_pull(a, te, bufs[2], 2 * 4096, TALLY_AGENT_CPU, NULL, NULL, NULL);
	assert_true(hc >= 0 && hl >= 0 && he >= 0);
	/* a second push_pull of a tensor in flight is refused */
	assert_int_equal(tally_agent_push_pull(a, tl, bufs[1], 3 * 4096, TALLY_AGENT_CPU, NULL, NULL, NULL), -EBUSY);
	usleep(20000);
	loophub_starts(h, 0, &n);
	assert_int_equal(n, 7 + 2);
	assert_int_equal(tally_agent_test(a, hl), 0);
	for (unsigned done = 0; done < 7; done++) {
		assert_true(loophub_inflight(h, 0) <= c.credit_bytes);
		assert_int_equal(loophub_release(h, 1), 1);
		if (done < 5)
			wait_starts(h, 7 + 3 + done);
	}
	assert_int_equal(tally_agent_wait(a, hc), 0);
	assert_int_equal(tally_agent_wait(a, he), 0);
	assert_int_equal(tally_agent_wait(a, hl), 0);
	const uint32_t *s = loophub_starts(h, 0, &n);
	const uint32_t want[] = {0, 1, 5, 6, 2, 3, 4};
	assert_int_equal(n, 7 + 7);
	assert_memory_equal(s + 7, want, sizeof(want));
	assert_true(loophub_max_inflight(h, 0) <= c.credit_bytes);
	struct tally_agent_stats st;
	tally_agent_get_stats(a, &st);
	assert_int_equal(st.push_pulls, 6);
	assert_int_equal(st.partitions, 14);
	assert_true(st.credit_waits >= 1);
	assert_true(st.max_inflight_bytes <= c.credit_bytes);
	/* handles are released: a second wait is -ENOENT */
	assert_int_equal(tally_agent_wait(a, hc), -ENOENT);
	tally_agent_destroy(a);
	loophub_destroy(h);
}

static void test_big_partition_still_goes(void **state)
{
	(void)state;
	struct loophub *h = loophub_create(1);
	struct tally_agent_cfg c;
	static float buf[1024];

	base_cfg(&c, 0, 1);
	c.credit_bytes = 100; /* smaller than one partition */
	struct tally_agent *a = mk(h, &c);
	int t = tally_agent_declare(a, "x", 4096, TALLY_DT_F32, 0);
	for (int i = 0; i < 1024; i++)
		buf[i] = (float)i;
	int hd = tally_agent_push_pull(a, t, buf, 4096, TALLY_AGENT_CPU, NULL, NULL, NULL);
	assert_int_equal(tally_agent_wait(a, hd), 0);
	assert_float_equal(buf[1023], 1023.0, 0);
	tally_agent_destroy(a);
	loophub_destroy(h);
}

/* Two workers submit the same tensors in opposite orders with a one-partition window: had
 * each started what it got first, each would hold the window with a partition the other has
 * queued. Both start in the one global order instead (rank 1 waits for t1). */
struct xworker {
	struct loophub *h;
	int rank, rc;
	struct tally_agent_stats st;
};

static void *xworker_main(void *arg)
{
	struct xworker *w = arg;
	struct tally_agent_cfg c;
	static __thread float b1[2048], b2[2048];

	base_cfg(&c, w->rank, 2);
	c.credit_bytes = 4096;
	struct tally_agent *a = mk(w->h, &c);
	int t1 = tally_agent_declare(a, "t1", 8192, TALLY_DT_F32, 0);
	int t2 = tally_agent_declare(a, "t2", 8192, TALLY_DT_F32, 0);
	for (int i = 0; i < 2048; i++)
		b1[i] = b2[i] = 1.0f;
	int first = w->rank ? t2 : t1, second = w->rank ? t1 : t2;
	int h1 = tally_agent_push_pull(a, first, w->rank ? b2 : b1, 8192, TALLY_AGENT_CPU, NULL, NULL, NULL);
	usleep(20000); /* rank 1's t2 is queued well before its t1 */
	int h2 = tally_agent_push_pull(a, second, w->rank ? b1 : b2, 8192, TALLY_AGENT_CPU, NULL, NULL, NULL);
	w->rc = tally_agent_wait(a, h1) | tally_agent_wait(a, h2);
	for (int i = 0; i < 2048 && !w->rc; i++)
		if (b1[i] != 2.0f || b2[i] != 2.0f)
			w->rc = -100;
	tally_agent_get_stats(a, &w->st);
	tally_agent_destroy(a);
	return NULL;
}

static void test_credit_deadlock_avoided(void **state)
{
	(void)state;
	struct loophub *h = loophub_create(2);
	struct xworker w[2] = {{h, 0, 0, {0}}, {h, 1, 0, {0}}};
	pthread_t t[2];
	unsigned n0, n1;

	for (int r = 0; r < 2; r++)
		pthread_create(&t[r], NULL, xworker_main, &w[r]);
	for (int r = 0; r < 2; r++)
		pthread_join(t[r], NULL);
	assert_int_equal(w[0].rc, 0);
	assert_int_equal(w[1].rc, 0);
	assert_true(w[1].st.order_waits >= 1);
	assert_true(w[0].st.max_inflight_bytes <= 4096 && w[1].st.max_inflight_bytes <= 4096);
	const uint32_t *s0 = loophub_starts(h, 0, &n0), *s1 = loophub_starts(h, 1, &n1);
	const uint32_t want[] = {0, 1, 2, 3};
	assert_int_equal(n0, 4);
	assert_int_equal(n1, 4);
	assert_memory_equal(s0, want, sizeof(want));
	assert_memory_equal(s1, want, sizeof(want));
	loophub_destroy(h);
}

/* The reported stall, small: 4 workers, 12 tensors of 4 partitions each (48 partitions, far
 * over a client window of 4 ops), mixed priorities, each rank submitting the tensors in its
 * own order, 3 iterations, a window of credits that never binds. A chunk completes only when
 * every worker pushed it, so workers that fill their client windows with different
 * partitions wait on each other for ever. Bounded: a worker gives up after 10 s. */
#define OW 4
#define OT 12
#define OE 4096 /* f32 elements a tensor: 4 partitions of 4 KiB */

struct oworker {
	struct loophub *h;
	int rank, rc, iters;
	float *x; /* OT tensors of OE */
	struct tally_agent_stats st;
};

static void *oworker_main(void *arg)
{
	struct oworker *w = arg;
	struct tally_agent_cfg c;
	int tid[OT], hd[OT], perm[OT];

	base_cfg(&c, w->rank, OW);
	c.credit_bytes = 1u << 20;
	struct tally_agent *a = mk(w->h, &c);
	for (int i = 0; i < OT; i++) {
		char name[32];

		snprintf(name, sizeof(name), "t%d", i);
		tid[i] = tally_agent_declare(a, name, OE * 4, TALLY_DT_F32, (i * 7) % 3);
		perm[i] = i;
	}
	/* a rank-specific order: rank 0 ascending, rank 1 descending, others rotated */
	for (int i = 0; i < OT; i++)
		perm[i] = w->rank == 1 ? OT - 1 - i : (i + w->rank * 5) % OT;
	w->rc = 0;
	for (int it = 0; it < w->iters && !w->rc; it++) {
		for (int i = 0; i < OT * OE; i++)
			w->x[i] = (float)(w->rank + 1) + (float)(i % 31);
		for (int k = 0; k < OT; k++) {
			int t = perm[k];

			hd[t] = tally_agent_push_pull(a, tid[t], w->x + (size_t)t * OE, OE * 4,
						      TALLY_AGENT_CPU, NULL, NULL, NULL);
			if (hd[t] < 0)
				w->rc = -1;
			if (w->rank == 2 && k == 3)
				usleep(2000); /* let this rank's first ones start */
		}
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (int k = 0; k < OT && !w->rc; k++) {
			int r;

			while ((r = tally_agent_test(a, hd[k])) == 0) {
				clock_gettime(CLOCK_MONOTONIC, &t1);
				if (t1.tv_sec - t0.tv_sec > 10) {
					w->rc = -ETIMEDOUT;
					break;
				}
				usleep(1000);
			}
			if (r < 0)
				w->rc = r;
		}
		for (int i = 0; i < OT * OE && !w->rc; i++)
			if (w->x[i] != 10.0f + 4.0f * (float)(i % 31))
				w->rc = -100;
	}
	tally_agent_get_stats(a, &w->st);
	tally_agent_destroy(a);
	return NULL;
}

static void test_same_order_on_every_rank(void **state)
{
	(void)state;
	struct loophub *h = loophub_create(OW);
	struct oworker w[OW];
	pthread_t t[OW];
	unsigned n0, n;

	loophub_window(h, 4);
	for (int r = 0; r < OW; r++) {
		w[r] = (struct oworker){h, r, 0, 3, calloc((size_t)OT * OE, 4), {0}};
		pthread_create(&t[r], NULL, oworker_main, &w[r]);
	}
	for (int r = 0; r < OW; r++)
		pthread_join(t[r], NULL);
	for (int r = 0; r < OW; r++) {
		if (w[r].rc)
			fprintf(stderr, "rank %d: rc %d, %llu partitions done\n", r, w[r].rc,
				(unsigned long long)w[r].st.partitions);
	}
	for (int r = 0; r < OW; r++) {
		assert_int_equal(w[r].rc, 0);
		assert_int_equal(w[r].st.partitions, 3 * OT * 4);
	}
	/* one start order everywhere: round by round; round 0 in declaration order, later
	 * ones by priority, then declaration */
	const uint32_t *s0 = loophub_starts(h, 0, &n0);
	assert_int_equal(n0, 3 * OT * 4);
	for (int r = 1; r < OW; r++) {
		const uint32_t *s = loophub_starts(h, (unsigned)r, &n);
		assert_int_equal(n, n0);
		assert_memory_equal(s, s0, n0 * sizeof(*s));
	}
	unsigned k = 0;
	for (uint32_t i = 0; i < OT * 4; i++) /* round 0: declaration order */
		assert_int_equal(s0[k++], i);
	for (int round = 1; round < 3; round++)
		for (int prio = 0; prio < 3; prio++)
			for (int i = 0; i < OT; i++)
				if ((i * 7) % 3 == prio)
					for (int p = 0; p < 4; p++)
						assert_int_equal(s0[k++], (uint32_t)(i * 4 + p));
	for (int r = 0; r < OW; r++)
		free(w[r].x);
	loophub_destroy(h);
}

/* DDP's bucket rebuild under TALLY_AGENT_ORDER_SUBMIT: 4 workers, a client-like window of 4
 * ops, credits for 4 partitions; iteration 0 pushes 3 buckets, then the set is rebuilt to 4
 * buckets of other sizes (one name comes back: same index and size), each declared lazily
 * at its first push, like the Python hook; one rank is slow (sleeps between pushes) in the
 * first iterations, another between iterations. Every push_pull completes with the right
 * sum and every rank starts the partitions in the same order: submission order. Bounded: a
 * worker gives up after 10 s. */
#define RW 4
#define RITERS 6
#define RPART 1024 /* f32 elements a partition (4 KiB) */
#define RSTARTS 256

struct rworker {
	struct loophub *h;
	int rank, rc;
	uint32_t want[RSTARTS]; /* keys in submission order */
	unsigned nwant;
};

static void *rworker_main(void *arg)
{
	static const int before[] = {3, 2, 4}, after[] = {3, 1, 2, 2}; /* partitions a bucket */
	struct rworker *w = arg;
	struct tally_agent_cfg c;
	float *x = calloc(4 * RPART * 4, sizeof(float));

	base_cfg(&c, w->rank, RW);
	struct tally_agent *a = mk(w->h, &c);
	assert_int_equal(tally_agent_set_order(a, 7), -EINVAL);
	assert_int_equal(tally_agent_set_order(a, TALLY_AGENT_ORDER_SUBMIT), 0);
	for (int it = 0; it < RITERS && !w->rc; it++) {
		const int *sz = it ? after : before;
		int nb = it ? 4 : 3, hd[4];

		for (int b = 0; b < nb && !w->rc; b++) {
			char name[32];
			float *buf = x + (size_t)b * 4 * RPART;
			struct tally_agent_part parts[4];

			snprintf(name, sizeof(name), "b%d.%d", b, sz[b]);
			int t = tally_agent_declare(a, name, (size_t)sz[b] * RPART * 4, TALLY_DT_F32, -b);
			for (int i = 0; i < sz[b] * RPART; i++)
				buf[i] = (float)(w->rank + 1) * (float)(i % 13 + it);
			int np = tally_agent_partitions(a, t, parts, 4);
			for (int i = 0; i < np && w->nwant < RSTARTS; i++)
				w->want[w->nwant++] = parts[i].key;
			if (w->rank == 1 && it < 3)
				usleep(3000 * (unsigned)(b + 1)); /* a slow backward */
			hd[b] = tally_agent_push_pull(a, t, buf, (size_t)sz[b] * RPART * 4, TALLY_AGENT_CPU,
						      NULL, NULL, NULL);
			if (t < 0 || hd[b] < 0)
				w->rc = -1;
		}
		if (w->rank == 3 && it == 1 && !w->rc)
			assert_int_equal(tally_agent_set_order(a, TALLY_AGENT_ORDER_ROUNDS), -EBUSY);
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (int b = 0; b < nb && !w->rc; b++) {
			int r;

			while ((r = tally_agent_test(a, hd[b])) == 0) {
				clock_gettime(CLOCK_MONOTONIC, &t1);
				if (t1.tv_sec - t0.tv_sec > 10) {
					w->rc = -ETIMEDOUT;
					break;
				}
				usleep(500);
			}
			if (r < 0)
				w->rc = r;
			/* 1+2+3+4 = 10 times the rank-1 value */
			for (int i = 0; i < sz[b] * RPART && !w->rc; i++)
				if (x[(size_t)b * 4 * RPART + i] != 10.0f * (float)(i % 13 + it))
					w->rc = -100;
		}
		if (w->rank == 2)
			usleep(2000);
	}
	tally_agent_destroy(a);
	free(x);
	return NULL;
}

static void test_submit_order_bucket_rebuild(void **state)
{
	(void)state;
	for (int rep = 0; rep < 5; rep++) {
		struct loophub *h = loophub_create(RW);
		struct rworker w[RW];
		pthread_t t[RW];
		unsigned n0, n;

		loophub_window(h, 4);
		for (int r = 0; r < RW; r++) {
			w[r] = (struct rworker){.h = h, .rank = r};
			pthread_create(&t[r], NULL, rworker_main, &w[r]);
		}
		for (int r = 0; r < RW; r++)
			pthread_join(t[r], NULL);
		for (int r = 0; r < RW; r++)
			assert_int_equal(w[r].rc, 0);
		const uint32_t *s0 = loophub_starts(h, 0, &n0);
		assert_int_equal(n0, w[0].nwant);
		assert_memory_equal(s0, w[0].want, n0 * sizeof(*s0));
		for (int r = 1; r < RW; r++) {
			const uint32_t *s = loophub_starts(h, (unsigned)r, &n);
			assert_int_equal(n, n0);
			assert_memory_equal(s, s0, n0 * sizeof(*s));
		}
		loophub_destroy(h);
	}
}

/* ---- intra-machine aggregation: 2 machines x 2 local ranks (threads), shared memory ---- */

struct lworker {
	struct loophub *h;
	int rank, rc;
	char id[32];
	float *x;
	int32_t *k;
};

static void *lworker_main(void *arg)
{
	struct lworker *w = arg;
	struct tally_agent_cfg c;
	const struct agent_net_ops *ops;
	void *ctx;
	char e[256] = "";
	int err = 0;

	base_cfg(&c, w->rank, 4);
	c.local_rank = w->rank % 2;
	c.local_size = 2;
	c.local_agg = 1;
	c.average = 1;
	c.connect_timeout_ms = 5000;
	c.local_shm_bytes = 64u << 20;
	void *inner = c.local_rank == 0 ? loopnet_create(w->h, (unsigned)(w->rank / 2)) : NULL;
	w->rc = agent_net_local_create(&c, inner ? &loopnet_ops : NULL, inner, w->id, c.local_shm_bytes,
				       &ops, &ctx, e, sizeof(e));
	if (w->rc) {
		fprintf(stderr, "rank %d: %s\n", w->rank, e);
		return NULL;
	}
	struct tally_agent *a = agent_create_net(&c, ops, ctx, &err, e, sizeof(e));
	if (!a) {
		w->rc = err ? err : -1;
		return NULL;
	}
	int tf = tally_agent_declare(a, "grad", N * 4, TALLY_DT_F32, 1);
	int ti = tally_agent_declare(a, "count", 64 * 4, TALLY_DT_I32, 0);
	for (int it = 0; it < 3 && !w->rc; it++) {
		for (int i = 0; i < N; i++)
			w->x[i] = (float)(w->rank + 1) * (float)(i % 97) + (float)it;
		for (int i = 0; i < 64; i++)
			w->k[i] = w->rank * 1000 + i;
		int hf = tally_agent_push_pull(a, tf, w->x, N * 4, TALLY_AGENT_CPU, NULL, NULL, NULL);
		int hi = tally_agent_push_pull(a, ti, w->k, 64 * 4, TALLY_AGENT_CPU, NULL, NULL, NULL);
		if (hf < 0 || hi < 0 || tally_agent_wait(a, hf) || tally_agent_wait(a, hi)) {
			fprintf(stderr, "rank %d it %d: %d %d %s\n", w->rank, it, tf, ti, tally_agent_strerror(a));
			w->rc = -2;
		}
	}
	tally_agent_destroy(a);
	return NULL;
}

static void test_local_aggregation(void **state)
{
	(void)state;
	struct loophub *h = loophub_create(2); /* the appliance sees 2 machines */
	struct lworker w[4];
	pthread_t t[4];

	for (int r = 0; r < 4; r++) {
		w[r] = (struct lworker){.h = h, .rank = r, .x = calloc(N, 4), .k = calloc(64, 4)};
		snprintf(w[r].id, sizeof(w[r].id), "unit%d", (int)getpid());
		pthread_create(&t[r], NULL, lworker_main, &w[r]);
	}
	for (int r = 0; r < 4; r++)
		pthread_join(t[r], NULL);
	for (int r = 0; r < 4; r++) {
		assert_int_equal(w[r].rc, 0);
		for (int i = 0; i < N; i++)
			assert_float_equal(w[r].x[i], (10.0f * (float)(i % 97) + 8.0f) / 4.0f, 1e-3);
		for (int i = 0; i < 64; i++)
			assert_int_equal(w[r].k[i], 6000 + 4 * i);
		free(w[r].x);
		free(w[r].k);
	}
	/* only the two local roots pushed: one op per key and round each */
	unsigned n0, n1, n2;
	loophub_starts(h, 0, &n0);
	loophub_starts(h, 1, &n1);
	loophub_starts(h, 2, &n2);
	assert_int_equal(n0, 3 * 5); /* 4 f32 partitions + 1 i32 per iteration */
	assert_int_equal(n1, 3 * 5);
	assert_int_equal(n2, 0);
	/* the roots removed their segments */
	char path[128];
	snprintf(path, sizeof(path), "/dev/shm/tally-agent-1-00000000-n0-unit%d", (int)getpid());
	assert_int_not_equal(access(path, F_OK), 0);
	loophub_destroy(h);
}

/* ---- callbacks and errors ---- */

struct cbrec {
	pthread_mutex_t mu;
	int calls, status, handle;
};

static void on_done(void *arg, int handle, int status)
{
	struct cbrec *r = arg;

	pthread_mutex_lock(&r->mu);
	r->calls++;
	r->status = status;
	r->handle = handle;
	pthread_mutex_unlock(&r->mu);
}

static void test_callback_and_cancel(void **state)
{
	(void)state;
	struct loophub *h = loophub_create(1);
	struct tally_agent_cfg c;
	struct cbrec rec = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0};
	static float buf[1024];

	base_cfg(&c, 0, 1);
	struct tally_agent *a = mk(h, &c);
	int t = tally_agent_declare(a, "x", 4096, TALLY_DT_F32, 0);
	const void *view = NULL;

	assert_int_equal(tally_agent_result_view(a, t, &view), -ENODATA);
	/* RESULT_VIEW without the sharded mode: the result is written into buf all the same */
	int hd = tally_agent_push_pull_flags(a, t, buf, 4096, TALLY_AGENT_CPU, NULL,
					     TALLY_AGENT_RESULT_VIEW, on_done, &rec);
	assert_true(hd >= 0);
	for (int i = 0; i < 2000 && !rec.calls; i++)
		usleep(1000);
	assert_int_equal(rec.calls, 1);
	assert_int_equal(rec.status, 0);
	assert_int_equal(rec.handle, hd);
	assert_int_equal(tally_agent_wait(a, hd), -ENOENT); /* callback handles are not waited on */
	assert_int_equal(tally_agent_result_view(a, t, &view), 0);
	assert_ptr_equal(view, buf);

	/* destroy with a push_pull that can never complete: callback with -ECANCELED */
	loophub_hold(h, 1);
	rec.calls = 0;
	hd = tally_agent_push_pull(a, t, buf, 4096, TALLY_AGENT_CPU, NULL, on_done, &rec);
	assert_true(hd >= 0);
	usleep(10000);
	assert_int_equal(tally_agent_result_view(a, t, &view), -EBUSY);
	tally_agent_destroy(a);
	assert_int_equal(rec.calls, 1);
	assert_int_equal(rec.status, -ECANCELED);
	loophub_destroy(h);
}

/* A push_pull with a callback that nobody waits on or expires still has its deadline: the
 * progress thread fails it (here: queued behind the rounds order for a tensor never pushed). */
static void test_callback_deadline(void **state)
{
	(void)state;
	struct loophub *h = loophub_create(1);
	struct tally_agent_cfg c;
	struct cbrec rec = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0};
	static float buf[1024];
	struct timespec t0, t1;

	base_cfg(&c, 0, 1);
	c.op_timeout_ms = 300;
	struct tally_agent *a = mk(h, &c);
	int ta = tally_agent_declare(a, "a", 4096, TALLY_DT_F32, 0);
	assert_true(tally_agent_declare(a, "b", 4096, TALLY_DT_F32, 0) >= 0);
	int hd = tally_agent_push_pull(a, ta, buf, 4096, TALLY_AGENT_CPU, NULL, NULL, NULL);
	assert_int_equal(tally_agent_wait(a, hd), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	hd = tally_agent_push_pull(a, ta, buf, 4096, TALLY_AGENT_CPU, NULL, on_done, &rec);
	assert_true(hd >= 0);
	for (int i = 0; i < 5000 && !rec.calls; i++)
		usleep(1000);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("# callback deadline after %.2f s: %s\n", s, tally_agent_strerror(a));
	assert_int_equal(rec.calls, 1);
	assert_int_equal(rec.status, -ETIMEDOUT);
	assert_true(s >= 0.29);
	assert_non_null(strstr(tally_agent_strerror(a), "tensor 'b'"));
	assert_int_equal(tally_agent_expire(a, hd), 0); /* done: nothing left to expire */
	tally_agent_destroy(a);
	loophub_destroy(h);
}

static void test_errors(void **state)
{
	(void)state;
	struct loophub *h = loophub_create(1);
	struct tally_agent_cfg c;
	char e[256] = "";
	int err = 0;
	static float buf[2048];

	/* unreachable appliance: which one and after how long */
	base_cfg(&c, 0, 1);
	assert_int_equal(tally_agent_parse_appliances(&c, "a,b", NULL, 0), 0);
	c.connect_timeout_ms = 250;
	loophub_fail_connect(h, 1, -ETIMEDOUT);
	assert_null(agent_create_net(&c, &loopnet_ops, loopnet_create(h, 0), &err, e, sizeof(e)));
	assert_int_equal(err, -ETIMEDOUT);
	assert_non_null(strstr(e, "appliance 1"));
	assert_non_null(strstr(e, "250 ms"));
	loophub_fail_connect(h, 0, 0);

	base_cfg(&c, 0, 1);
	struct tally_agent *a = mk(h, &c);
	int t = tally_agent_declare(a, "x", 4096, TALLY_DT_F32, 0);
	/* shape changed between iterations */
	assert_int_equal(tally_agent_push_pull(a, t, buf, 8192, TALLY_AGENT_CPU, NULL, NULL, NULL), -EINVAL);
	assert_non_null(strstr(tally_agent_strerror(a), "shape changed"));
	assert_int_equal(tally_agent_push_pull(a, 99, buf, 4096, TALLY_AGENT_CPU, NULL, NULL, NULL), -ENOENT);
	assert_int_equal(tally_agent_push_pull(a, t, NULL, 4096, TALLY_AGENT_CPU, NULL, NULL, NULL), -EINVAL);
	assert_int_equal(tally_agent_push_pull(a, t, buf, 4096, 7, NULL, NULL, NULL), -EINVAL);
	/* a flag no one defined (1: RESULT_VIEW, 2: NO_RESULT) */
	assert_int_equal(tally_agent_push_pull_flags(a, t, buf, 4096, TALLY_AGENT_CPU, NULL, 4, NULL,
						     NULL), -EINVAL);
	const void *view;
	assert_int_equal(tally_agent_result_view(a, 99, &view), -ENOENT);
	assert_int_equal(tally_agent_wait(a, 12345), -ENOENT);
	assert_int_equal(tally_agent_test(a, -1), -ENOENT);
	tally_agent_destroy(a);

	/* a key registered differently by another rank (different declaration order) */
	base_cfg(&c, 0, 1);
	a = mk(h, &c); /* key 0 is 1024 elements at appliance 0 from above */
	assert_int_equal(tally_agent_declare(a, "other", 400, TALLY_DT_F32, 0), -EEXIST);
	assert_non_null(strstr(tally_agent_strerror(a), "KEY_CONFLICT"));
	int id = tally_agent_lookup(a, "other");
	assert_true(id >= 0);
	assert_int_equal(tally_agent_push_pull(a, id, buf, 400, TALLY_AGENT_CPU, NULL, NULL, NULL), -EIO);
	assert_int_equal(tally_agent_result_view(a, id, &view), -ENODATA); /* refused: none ran */
	tally_agent_destroy(a);
	loophub_destroy(h);
}

static void test_cuda_tensor(void **state)
{
	(void)state;
	struct loophub *h = loophub_create(1);
	struct tally_agent_cfg c;
	static float buf[1024];

	base_cfg(&c, 0, 1);
	struct tally_agent *a = mk(h, &c);
	int t = tally_agent_declare(a, "x", 4096, TALLY_DT_F32, 0);
	int rc = tally_agent_push_pull(a, t, buf, 4096, TALLY_AGENT_CUDA, NULL, NULL, NULL);
	/* no GPU here (or no CUDA in the build): a clear refusal, nothing queued */
	assert_true(rc == -ENOTSUP || rc == -ENODEV || rc == -EIO);
	assert_true(strlen(tally_agent_strerror(a)) > 0);
	int hd = tally_agent_push_pull(a, t, buf, 4096, TALLY_AGENT_CPU, NULL, NULL, NULL);
	assert_int_equal(tally_agent_wait(a, hd), 0);
	tally_agent_destroy(a);
	loophub_destroy(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_env),
		cmocka_unit_test(test_appliance_list_errors),
		cmocka_unit_test(test_cfg_check),
		cmocka_unit_test(test_split),
		cmocka_unit_test(test_placement),
		cmocka_unit_test(test_partitions),
		cmocka_unit_test(test_sum_4_workers),
		cmocka_unit_test(test_average_4_workers),
		cmocka_unit_test(test_priority_and_credits),
		cmocka_unit_test(test_big_partition_still_goes),
		cmocka_unit_test(test_credit_deadlock_avoided),
		cmocka_unit_test(test_same_order_on_every_rank),
		cmocka_unit_test(test_submit_order_bucket_rebuild),
		cmocka_unit_test(test_local_aggregation),
		cmocka_unit_test(test_callback_and_cancel),
		cmocka_unit_test(test_callback_deadline),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_cuda_tensor),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
