/* SPDX-License-Identifier: Apache-2.0
 * test_agent_lanes.c — the sharded local mode (local_agg = shard) on the CPU backend: shard
 * geometry and lane job ids, the configuration, then whole pipelines over the in-process
 * loopnet (one hub per lane, as each lane is its own job): machines × local ranks as
 * threads, reduce-scatter through shared memory, one network session per lane, all-gather,
 * several rounds of f32, bf16 and i32 tensors whose sizes divide neither by the local size
 * nor by the partition size; results checked for equality with the exact sums (the inputs
 * are small integers, exact in every dtype; the average is compared with the same
 * multiplication by 1/world the agent does). Errors: a local rank that
 * never arrives (timeout naming it), a local size that differs, a CUDA tensor without a GPU,
 * destroy with requests in flight. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent_internal.h"
#include "agent_lane.h"
#include "loopnet.h"
#include "tally_agent.h"
#include "tally_sum.h"

/* ---- geometry, job ids, configuration ---- */

static void test_shard_math(void **state)
{
	(void)state;
	struct agent_shard s;

	for (size_t n = 1; n < 200; n += 7)
		for (unsigned ls = 1; ls <= 9; ls++) {
			size_t total = 0, next = 0;

			for (unsigned lr = 0; lr < ls; lr++) {
				assert_int_equal(agent_shard_of(n, ls, lr, &s), 0);
				assert_int_equal(s.shard_elems, (n + ls - 1) / ls);
				assert_int_equal(s.off_elems, lr * s.shard_elems);
				assert_true(s.valid_elems <= s.shard_elems);
				/* shards tile the tensor: the valid part of each starts where the
				 * previous one's ended, padding only at the end */
				if (s.valid_elems) {
					assert_int_equal(s.off_elems, next);
					next += s.valid_elems;
				}
				total += s.valid_elems;
			}
			assert_int_equal(total, n);
			assert_int_equal(next, n);
		}
	/* 3 elements over 4 ranks: 1, 1, 1 and an empty last shard */
	assert_int_equal(agent_shard_of(3, 4, 3, &s), 0);
	assert_int_equal(s.shard_elems, 1);
	assert_int_equal(s.valid_elems, 0);
	assert_int_equal(agent_shard_of(10, 4, 3, &s), 0); /* 3,3,3,1 */
	assert_int_equal(s.valid_elems, 1);
	assert_int_equal(s.off_elems, 9);
	assert_int_equal(agent_shard_of(10, 0, 0, &s), -EINVAL);
	assert_int_equal(agent_shard_of(10, 2, 2, &s), -EINVAL);
	assert_int_equal(agent_shard_of(0, 2, 0, &s), -EINVAL);
}

static void base_cfg(struct tally_agent_cfg *c, int rank, int world, int ls)
{
	tally_agent_cfg_defaults(c);
	assert_int_equal(tally_agent_parse_appliances(c, "127.0.0.1:9170", NULL, 0), 0);
	c->rank = rank;
	c->world_size = world;
	c->local_rank = rank % ls;
	c->local_size = ls;
	c->local_agg = TALLY_AGENT_LOCAL_SHARD;
	c->partition_bytes = 1024;
	c->credit_bytes = 4096;
	c->connect_timeout_ms = 5000;
	c->local_shm_bytes = 64u << 20;
}

static void test_lane_job_and_cfg(void **state)
{
	(void)state;
	struct tally_agent_cfg c, l;
	uint32_t j;
	char e[256] = "";

	assert_int_equal(agent_lane_job(7, 0, &j), 0);
	assert_int_equal(j, 7);
	assert_int_equal(agent_lane_job(7, 3, &j), 0);
	assert_int_equal(j, 7u | 3u << 24);
	assert_int_equal(agent_lane_job(0xffffff, 255, &j), 0);
	assert_int_equal(j, 0xffffffffu);
	assert_int_equal(agent_lane_job(1u << 24, 0, &j), -EINVAL);
	assert_int_equal(agent_lane_job(7, 256, &j), -EINVAL);
	/* distinct jobs, distinct lanes: distinct ids */
	for (uint32_t a = 0; a < 40; a++)
		for (unsigned la = 0; la < 8; la++) {
			uint32_t ja, jb;
			assert_int_equal(agent_lane_job(a, la, &ja), 0);
			assert_int_equal(agent_lane_job(a + 1, la, &jb), 0);
			assert_int_not_equal(ja, jb);
		}

	base_cfg(&c, 5, 8, 2); /* machine 2 of 4, local rank 1 */
	c.job_id = 42;
	c.average = 1;
	c.quorum = 6;
	assert_int_equal(agent_cfg_resolve(&c, e, sizeof(e)), 0);
	assert_int_equal(agent_lane_cfg(&c, &l, e, sizeof(e)), 0);
	assert_int_equal(l.rank, 2);
	assert_int_equal(l.world_size, 4);
	assert_int_equal(l.local_rank, 0);
	assert_int_equal(l.local_size, 1);
	assert_int_equal(l.local_agg, 0);
	assert_int_equal(l.average, 0); /* the lane divides by the global world itself */
	assert_int_equal(l.job_id, 42u | 1u << 24);
	assert_int_equal(l.quorum, 4);
	assert_int_equal(l.gpu_hosts, 4);
	assert_int_equal(l.token, c.token);

	/* a job id in the top byte is refused with a message, in the check and the lane */
	c.job_id = 1u << 24;
	assert_int_equal(tally_agent_cfg_check(&c, e, sizeof(e)), -EINVAL);
	assert_non_null(strstr(e, "job id"));
	assert_int_equal(agent_lane_cfg(&c, &l, e, sizeof(e)), -EINVAL);
	assert_non_null(strstr(e, "16777216"));
	c.job_id = 1;
	c.local_agg = 3;
	assert_int_equal(tally_agent_cfg_check(&c, e, sizeof(e)), -EINVAL);
	assert_non_null(strstr(e, "local_agg"));
	/* world not a multiple of the local size */
	base_cfg(&c, 0, 6, 4);
	assert_int_equal(agent_cfg_resolve(&c, e, sizeof(e)), -EINVAL);
	assert_non_null(strstr(e, "multiple"));

	/* environment: words and numbers */
	tally_agent_cfg_defaults(&c);
	setenv("TALLY_LOCAL_AGG", "shard", 1);
	assert_int_equal(tally_agent_cfg_from_env(&c, e, sizeof(e)), 0);
	assert_int_equal(c.local_agg, TALLY_AGENT_LOCAL_SHARD);
	setenv("TALLY_LOCAL_AGG", "sum", 1);
	assert_int_equal(tally_agent_cfg_from_env(&c, e, sizeof(e)), 0);
	assert_int_equal(c.local_agg, TALLY_AGENT_LOCAL_SUM);
	setenv("TALLY_LOCAL_AGG", "2", 1);
	assert_int_equal(tally_agent_cfg_from_env(&c, e, sizeof(e)), 0);
	assert_int_equal(c.local_agg, 2);
	setenv("TALLY_LOCAL_AGG", "3", 1);
	assert_int_equal(tally_agent_cfg_from_env(&c, e, sizeof(e)), -EINVAL);
	assert_non_null(strstr(e, "TALLY_LOCAL_AGG"));
	unsetenv("TALLY_LOCAL_AGG");
}

/* ---- pipelines over loopnet ---- */

#define MAXLS 4
#define NF (3 * 256 + 5)  /* f32 elements: odd, over several 1 KiB partitions per shard */
#define NB 301            /* bf16 */
#define NI 7              /* i32: fewer elements than 2 * local ranks in some shards */
#define ROUNDS 3

struct lw {
	struct loophub **hubs; /* one per lane */
	int rank, world, ls, rc;
	int view;              /* the f32 tensor with TALLY_AGENT_RESULT_VIEW */
	int vrc;               /* what lw_check_views found (the rounds go on: no one hangs) */
	char id[48];
	float *f;
	uint16_t *b;
	int32_t *k;
	char err[512];
	struct tally_agent_stats st;
	int nparts_f;
};

static struct tally_agent *mk_lane(struct lw *w, struct tally_agent_cfg *c)
{
	int err = 0;
	unsigned node = (unsigned)(w->rank / w->ls);
	void *net = loopnet_create(w->hubs[w->rank % w->ls], node);
	struct tally_agent *a = agent_lane_create(c, &loopnet_ops, net, w->id, &err, w->err,
						  sizeof(w->err));

	if (!a)
		w->rc = err ? err : -1;
	return a;
}

static float fval(int rank, int i, int it)
{
	return (float)((rank + 1) * (i % 13) + it);
}

/* Where each result lies: the f32 one in the shared gather area with RESULT_VIEW (its input
 * left as it was, the result copied into w->f for the checks), the others in place. */
static void lw_check_views(struct lw *w, struct tally_agent *a, int tf, int tb, int it)
{
	const void *vf = NULL, *vb = NULL;
	int bad = -1;

	if (tally_agent_result_view(a, tf, &vf) || tally_agent_result_view(a, tb, &vb) ||
	    vb != w->b || (vf == w->f) == !!w->view) {
		snprintf(w->err, sizeof(w->err), "round %d: result views f32 %p (buffer %p), bf16 "
			 "%p (buffer %p)", it, vf, (void *)w->f, vb, (void *)w->b);
		w->vrc = -3;
		return;
	}
	if (!w->view)
		return;
	for (int i = 0; i < NF && bad < 0; i++)
		if (w->f[i] != fval(w->rank, i, it))
			bad = i;
	if (bad >= 0) {
		snprintf(w->err, sizeof(w->err), "round %d: RESULT_VIEW wrote into the buffer "
			 "(f32[%d] = %g)", it, bad, (double)w->f[bad]);
		w->vrc = -4;
	}
	memcpy(w->f, vf, NF * 4);
}

static void *lw_main(void *arg)
{
	struct lw *w = arg;
	struct tally_agent_cfg c;

	base_cfg(&c, w->rank, w->world, w->ls);
	c.average = 1;
	struct tally_agent *a = mk_lane(w, &c);
	if (!a)
		return NULL;
	/* the 2 x 4 run starts partitions in submission order (DDP's), the others by rounds */
	if (w->ls == 4 && tally_agent_set_order(a, TALLY_AGENT_ORDER_SUBMIT)) {
		snprintf(w->err, sizeof(w->err), "set_order: %s", tally_agent_strerror(a));
		w->rc = -5;
	}
	int tf = tally_agent_declare(a, "grad.f32", NF * 4, TALLY_DT_F32, 1);
	int tb = tally_agent_declare(a, "grad.bf16", NB * 2, TALLY_DT_BF16, 0);
	int ti = tally_agent_declare(a, "count", NI * 4, TALLY_DT_I32, 2);
	struct tally_agent_part parts[64];

	w->nparts_f = tally_agent_partitions(a, tf, parts, 64);
	if (tf < 0 || tb < 0 || ti < 0) {
		snprintf(w->err, sizeof(w->err), "declare: %s", tally_agent_strerror(a));
		w->rc = -1;
	}
	for (int it = 0; it < ROUNDS && !w->rc; it++) {
		for (int i = 0; i < NF; i++)
			w->f[i] = fval(w->rank, i, it);
		for (int i = 0; i < NB; i++)
			w->b[i] = tally_f32_to_bf16((float)(w->rank + (i % 5) + it));
		for (int i = 0; i < NI; i++)
			w->k[i] = w->rank * 1000 + i + it;
		int h[3] = {tally_agent_push_pull_flags(a, tf, w->f, NF * 4, TALLY_AGENT_CPU, NULL,
							w->view ? TALLY_AGENT_RESULT_VIEW : 0, NULL,
							NULL),
			    tally_agent_push_pull(a, tb, w->b, NB * 2, TALLY_AGENT_CPU, NULL, NULL, NULL),
			    tally_agent_push_pull(a, ti, w->k, NI * 4, TALLY_AGENT_CPU, NULL, NULL, NULL)};
		for (int j = 0; j < 3 && !w->rc; j++)
			if (h[j] < 0 || tally_agent_wait(a, h[j])) {
				snprintf(w->err, sizeof(w->err), "round %d tensor %d: %d %s", it, j, h[j],
					 tally_agent_strerror(a));
				w->rc = -2;
			}
		if (!w->rc)
			lw_check_views(w, a, tf, tb, it);
	}
	tally_agent_get_stats(a, &w->st);
	tally_agent_destroy(a);
	return NULL;
}

static void run_lanes(int machines, int ls, int view)
{
	int world = machines * ls;
	struct loophub *hubs[MAXLS];
	struct lw w[16];
	pthread_t t[16];

	for (int l = 0; l < ls; l++)
		hubs[l] = loophub_create((unsigned)machines); /* each lane: one job of the machines */
	for (int r = 0; r < world; r++) {
		w[r] = (struct lw){.hubs = hubs, .rank = r, .world = world, .ls = ls, .view = view,
				   .f = calloc(NF, 4), .b = calloc(NB, 2), .k = calloc(NI, 4)};
		snprintf(w[r].id, sizeof(w[r].id), "lanes%d-%dx%d", (int)getpid(), machines, ls);
		pthread_create(&t[r], NULL, lw_main, &w[r]);
	}
	for (int r = 0; r < world; r++)
		pthread_join(t[r], NULL);
	for (int r = 0; r < world; r++)
		if (w[r].rc || w[r].vrc)
			fail_msg("rank %d: %d %d %s", r, w[r].rc, w[r].vrc, w[r].err);
	const int it = ROUNDS - 1;
	for (int r = 0; r < world; r++) {
		for (int i = 0; i < NF; i++) {
			float s = 0;
			for (int q = 0; q < world; q++)
				s += fval(q, i, it);
			assert_true(w[r].f[i] == s * (1.0f / (float)world)); /* as the agent averages */
		}
		for (int i = 0; i < NB; i++) {
			float s = 0;
			for (int q = 0; q < world; q++)
				s += (float)(q + (i % 5) + it);
			uint16_t want = tally_f32_to_bf16(tally_bf16_to_f32(tally_f32_to_bf16(s)) *
							 (1.0f / (float)world));
			if (w[r].b[i] != want)
				fail_msg("rank %d bf16[%d]: %04x want %04x", r, i, w[r].b[i], want);
		}
		for (int i = 0; i < NI; i++) {
			int32_t s = 0;
			for (int q = 0; q < world; q++)
				s += q * 1000 + i + it;
			assert_int_equal(w[r].k[i], s); /* integers are never averaged */
		}
		assert_int_equal(w[r].st.push_pulls, 3 * ROUNDS);
		assert_int_equal(w[r].st.failed, 0);
		/* the lane pushed its shard only: ceil(NF / ls) f32 over 1 KiB partitions */
		assert_int_equal(w[r].nparts_f, (int)(((NF + ls - 1) / ls * 4 + 1023) / 1024));
	}
	/* every lane's network saw every machine push every round, no more */
	for (int l = 0; l < ls; l++) {
		for (int m = 0; m < machines; m++) {
			unsigned n;
			loophub_starts(hubs[l], (unsigned)m, &n);
			assert_int_equal(n, (unsigned)(ROUNDS * (w[0].nparts_f + 2)));
		}
		loophub_destroy(hubs[l]);
	}
	for (int r = 0; r < world; r++) {
		free(w[r].f);
		free(w[r].b);
		free(w[r].k);
	}
	/* the local roots removed their segments */
	char path[160];
	snprintf(path, sizeof(path), "/dev/shm/tally-lanes-1-00000000-n0-%s", w[0].id);
	assert_int_not_equal(access(path, F_OK), 0);
}

static void test_lanes_2x2(void **state)
{
	(void)state;
	run_lanes(2, 2, 0);
}

static void test_lanes_1x3(void **state)
{
	(void)state;
	run_lanes(1, 3, 1); /* NI = 7 over 3: shards of 3, 3, 1; f32 left in the gather area */
}

static void test_lanes_2x4(void **state)
{
	(void)state;
	run_lanes(2, 4, 1); /* NI = 7 over 4: the last shard is padding only */
}

/* ---- errors ---- */

struct ew {
	struct loophub **hubs;
	int rank, ls, mode, rc, wrc;
	char id[48];
	char err[512];
	const char *msg;
	int calls, status;
};

static void on_done(void *arg, int handle, int status)
{
	struct ew *w = arg;

	(void)handle;
	w->calls++;
	w->status = status;
}

static void *ew_main(void *arg)
{
	struct ew *w = arg;
	struct tally_agent_cfg c;
	static __thread float x[100];
	struct lw lw = {.hubs = w->hubs, .rank = w->rank, .ls = w->ls};

	base_cfg(&c, w->rank, w->ls, w->ls);
	/* only the missing-rank case waits for its timeout; the others must not hit it on a
	 * loaded machine */
	c.op_timeout_ms = w->mode == 0 ? 300 : 10000;
	c.connect_timeout_ms = 5000;
	if (w->mode == 1 && w->rank == 1)
		c.local_size = 3, c.world_size = 3; /* disagrees with the root's 2 */
	memcpy(lw.id, w->id, sizeof(lw.id));
	struct tally_agent *a = mk_lane(&lw, &c);
	w->rc = lw.rc;
	memcpy(w->err, lw.err, sizeof(w->err));
	if (!a)
		return NULL;
	int t = tally_agent_declare(a, "x", sizeof(x), TALLY_DT_F32, 0);
	if (w->mode == 0 && w->rank == 0) { /* rank 1 never pushes */
		int h = tally_agent_push_pull_flags(a, t, x, sizeof(x), TALLY_AGENT_CPU, NULL,
						    TALLY_AGENT_RESULT_VIEW, NULL, NULL);
		const void *view;
		w->wrc = h < 0 ? h : tally_agent_wait(a, h);
		snprintf(w->err, sizeof(w->err), "%s", tally_agent_strerror(a));
		w->rc = tally_agent_result_view(a, t, &view) == -EIO ? 0 : -EPROTO; /* no view */
	} else if (w->mode == 0 || w->mode == 1) {
		usleep(w->mode ? 1500000 : 900000); /* keep the segment while the other looks */
	} else if (w->mode == 2) { /* a CUDA tensor, no GPU here */
		w->wrc = tally_agent_push_pull(a, t, x, sizeof(x), TALLY_AGENT_CUDA, NULL, NULL, NULL);
		snprintf(w->err, sizeof(w->err), "%s", tally_agent_strerror(a));
		int h = tally_agent_push_pull(a, t, x, sizeof(x), TALLY_AGENT_CPU, NULL, NULL, NULL);
		w->rc = h < 0 ? h : tally_agent_wait(a, h);
	} else if (w->mode == 3) { /* destroy with requests that cannot complete */
		w->wrc = tally_agent_push_pull(a, t, x, sizeof(x), TALLY_AGENT_CPU, NULL, on_done, w);
		usleep(50000);
	}
	tally_agent_destroy(a);
	return NULL;
}

static void run_errors(int mode, struct ew *w)
{
	struct loophub *hubs[2] = {loophub_create(1), loophub_create(1)};
	pthread_t t[2];

	if (mode == 3) {
		loophub_hold(hubs[0], 1);
		loophub_hold(hubs[1], 1);
	}
	for (int r = 0; r < 2; r++) {
		w[r] = (struct ew){.hubs = hubs, .rank = r, .ls = 2, .mode = mode};
		snprintf(w[r].id, sizeof(w[r].id), "lanerr%d-%d", (int)getpid(), mode);
		pthread_create(&t[r], NULL, ew_main, &w[r]);
		if (mode == 1)
			usleep(100000); /* the root first */
	}
	for (int r = 0; r < 2; r++)
		pthread_join(t[r], NULL);
	loophub_destroy(hubs[0]);
	loophub_destroy(hubs[1]);
}

static void test_lanes_errors(void **state)
{
	(void)state;
	struct ew w[2];

	/* a local rank that never pushes: the other fails after op_timeout, naming it */
	run_errors(0, w);
	assert_int_equal(w[0].rc, 0);
	assert_int_equal(w[0].wrc, -ETIMEDOUT);
	printf("# missing local rank: %s\n", w[0].err);
	assert_non_null(strstr(w[0].err, "local rank 1"));
	assert_non_null(strstr(w[0].err, "300 ms"));

	/* local sizes that disagree */
	run_errors(1, w);
	assert_int_equal(w[0].rc, 0);
	assert_int_equal(w[1].rc, -EINVAL);
	printf("# local size mismatch: %s\n", w[1].err);
	assert_non_null(strstr(w[1].err, "local size 3"));

	/* CUDA tensor without a GPU (or without NCCL): refused at once, CPU still works */
	run_errors(2, w);
	for (int r = 0; r < 2; r++) {
		assert_true(w[r].wrc == -ENOTSUP || w[r].wrc == -ENODEV || w[r].wrc == -EIO ||
			    w[r].wrc == -ETIMEDOUT);
		assert_true(strlen(w[r].err) > 0);
		assert_int_equal(w[r].rc, 0);
	}
	printf("# CUDA tensor: %s\n", w[0].err);

	/* destroy with requests in flight: callbacks with -ECANCELED */
	run_errors(3, w);
	for (int r = 0; r < 2; r++) {
		assert_true(w[r].wrc >= 0);
		assert_int_equal(w[r].calls, 1);
		assert_int_equal(w[r].status, -ECANCELED);
	}
}

/* ---- the CPU collective on its own ---- */

struct cw {
	int lr, mode, rs, ag;
	float shard[8], out[13];
	char err[256];
};

static void *coll_main(void *arg)
{
	struct cw *w = arg;
	struct tally_agent_cfg c;
	const struct agent_coll_ops *ops;
	void *ctx;
	float in[13];
	char id[48];

	base_cfg(&c, w->lr, 2, 2);
	c.op_timeout_ms = 2000;
	snprintf(id, sizeof(id), "coll%d-%d", (int)getpid(), w->mode);
	if ((w->rs = agent_coll_shm_create(&c, id, 16u << 20, &ops, &ctx, w->err, sizeof(w->err))))
		return NULL;
	for (int i = 0; i < 13; i++)
		in[i] = (float)(i * (w->lr + 1));
	memset(w->shard, 0xff, sizeof(w->shard)); /* padding must come back zeroed */
	if (!(w->rs = ops->declare(ctx, 0, sizeof(in), TALLY_DT_F32, w->err, sizeof(w->err))))
		w->rs = ops->reduce_scatter(ctx, 0, 0, in, NULL, w->shard, w->err, sizeof(w->err));
	w->ag = ops->all_gather(ctx, 0, 0, w->shard, w->mode && w->lr == 1, w->out, NULL, w->err,
				sizeof(w->err));
	usleep(100000); /* the root keeps the segment until the other is done */
	ops->destroy(ctx);
	return NULL;
}

static void test_coll_shm(void **state)
{
	(void)state;

	for (int mode = 0; mode < 2; mode++) {
		struct cw w[2] = {{.lr = 0, .mode = mode}, {.lr = 1, .mode = mode}};
		pthread_t t[2];

		for (int r = 0; r < 2; r++)
			pthread_create(&t[r], NULL, coll_main, &w[r]);
		for (int r = 0; r < 2; r++)
			pthread_join(t[r], NULL);
		for (int r = 0; r < 2; r++)
			assert_int_equal(w[r].rs, 0);
		/* 13 elements over 2: shards of 7; shard 1 holds 6 and one of padding */
		for (int r = 0; r < 2; r++)
			for (int i = 0; i < 7; i++) {
				int e = r * 7 + i;
				float want = e < 13 ? 3.0f * (float)e : 0.0f;
				assert_true(w[r].shard[i] == want);
			}
		if (mode == 0) {
			for (int r = 0; r < 2; r++) {
				assert_int_equal(w[r].ag, 0);
				for (int i = 0; i < 13; i++)
					assert_true(w[r].out[i] == 3.0f * (float)i);
			}
		} else { /* local rank 1 had no valid shard: rank 0 fails fast, naming it */
			assert_int_equal(w[0].ag, -EIO);
			printf("# failed shard: %s\n", w[0].err);
			assert_non_null(strstr(w[0].err, "local rank 1 failed"));
			assert_int_equal(w[1].ag, 0);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shard_math),
		cmocka_unit_test(test_lane_job_and_cfg),
		cmocka_unit_test(test_coll_shm),
		cmocka_unit_test(test_lanes_2x2),
		cmocka_unit_test(test_lanes_1x3),
		cmocka_unit_test(test_lanes_2x4),
		cmocka_unit_test(test_lanes_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
