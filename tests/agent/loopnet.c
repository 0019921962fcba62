/* SPDX-License-Identifier: Apache-2.0
 * loopnet.c — see loopnet.h. A mutex-protected table; fine for unit tests, not a datapath. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loopnet.h"
#include "tally_sum.h"

#define MAXOPS 4096
#define MAXENT 256
#define MAXELEMS (1u << 14)
#define MAXKEYS 65536
#define MAXRANKS 16

struct lent {
	int used;
	uint32_t key, round, nelems;
	int dtype;
	unsigned count;
	int complete, released;
	uint64_t seq;
	double sum[MAXELEMS]; /* test partitions hold <= 16 Ki elements */
	int ops[MAXRANKS];
};

struct lop {
	int used, done;
	unsigned rank;
	size_t bytes;
	void *out;
	int ent;
	uint32_t key, round;
	const void *in;
	int pushed;    /* counted in the rank's window (its sum not yet delivered) */
	int next;      /* FIFO of ops waiting for the rank's window, -1 end */
};

struct loophub {
	pthread_mutex_t mu;
	unsigned world;
	int hold;
	uint64_t seq;
	int fail_appl, fail_rc;
	struct lent *ent;
	struct lop ops[MAXOPS];
	int key_appl[MAXKEYS];
	uint32_t key_nelems[MAXKEYS];
	int key_dtype[MAXKEYS];
	uint32_t *starts[MAXRANKS];
	unsigned nstarts[MAXRANKS];
	size_t inflight[MAXRANKS], max_inflight[MAXRANKS];
	/* client-like window: at most `window` ops of a rank pushed to the hub at once, the
	 * rest wait FIFO in start order (tally_client's per-core pending list) */
	unsigned window;
	unsigned pushed[MAXRANKS];
	int qhead[MAXRANKS], qtail[MAXRANKS];
};

struct loopnet {
	struct loophub *h;
	unsigned rank;
};

struct loophub *loophub_create(unsigned world)
{
	struct loophub *h = calloc(1, sizeof(*h));

	pthread_mutex_init(&h->mu, NULL);
	h->world = world;
	h->ent = calloc(MAXENT, sizeof(*h->ent));
	for (unsigned k = 0; k < MAXKEYS; k++)
		h->key_appl[k] = -1;
	for (unsigned r = 0; r < MAXRANKS; r++) {
		h->starts[r] = calloc(MAXOPS * 4, sizeof(uint32_t));
		h->qhead[r] = h->qtail[r] = -1;
	}
	return h;
}

void loophub_destroy(struct loophub *h)
{
	for (unsigned r = 0; r < MAXRANKS; r++)
		free(h->starts[r]);
	free(h->ent);
	pthread_mutex_destroy(&h->mu);
	free(h);
}

void loophub_window(struct loophub *h, unsigned ops)
{
	pthread_mutex_lock(&h->mu);
	h->window = ops;
	pthread_mutex_unlock(&h->mu);
}

void loophub_hold(struct loophub *h, int on)
{
	pthread_mutex_lock(&h->mu);
	h->hold = on;
	pthread_mutex_unlock(&h->mu);
}

static void pump_locked(struct loophub *h);

/* Element i of a buffer of dtype dt, and back (half types rounded once, as appliances do). */
static double elem_get(int dt, const void *p, uint32_t i)
{
	switch (dt) {
	case TALLY_DT_I32: return (double)((const int32_t *)p)[i];
	case TALLY_DT_F16: return (double)tally_f16_to_f32(((const uint16_t *)p)[i]);
	case TALLY_DT_BF16: return (double)tally_bf16_to_f32(((const uint16_t *)p)[i]);
	default: return (double)((const float *)p)[i];
	}
}

static void elem_put(int dt, void *p, uint32_t i, double v)
{
	switch (dt) {
	case TALLY_DT_I32: ((int32_t *)p)[i] = (int32_t)v; break;
	case TALLY_DT_F16: ((uint16_t *)p)[i] = tally_f32_to_f16((float)v); break;
	case TALLY_DT_BF16: ((uint16_t *)p)[i] = tally_f32_to_bf16((float)v); break;
	default: ((float *)p)[i] = (float)v; break;
	}
}

static void deliver(struct loophub *h, struct lent *e)
{
	for (unsigned r = 0; r < h->world; r++) {
		struct lop *o = &h->ops[e->ops[r]];

		for (uint32_t i = 0; i < e->nelems; i++)
			elem_put(e->dtype, o->out, i, e->sum[i]);
		o->done = 1;
		if (o->pushed) {
			o->pushed = 0;
			h->pushed[r]--;
		}
	}
	e->released = 1;
	e->used = 0;
}

unsigned loophub_release(struct loophub *h, unsigned n)
{
	unsigned done = 0;

	pthread_mutex_lock(&h->mu);
	while (done < n) {
		struct lent *best = NULL;
		for (unsigned i = 0; i < MAXENT; i++)
			if (h->ent[i].used && h->ent[i].complete && !h->ent[i].released &&
			    (!best || h->ent[i].seq < best->seq))
				best = &h->ent[i];
		if (!best)
			break;
		deliver(h, best);
		done++;
	}
	pump_locked(h);
	pthread_mutex_unlock(&h->mu);
	return done;
}

void loophub_fail_connect(struct loophub *h, unsigned appl, int rc)
{
	h->fail_appl = (int)appl;
	h->fail_rc = rc;
}

const uint32_t *loophub_starts(struct loophub *h, unsigned rank, unsigned *n)
{
	pthread_mutex_lock(&h->mu);
	*n = h->nstarts[rank];
	pthread_mutex_unlock(&h->mu);
	return h->starts[rank];
}

size_t loophub_max_inflight(struct loophub *h, unsigned rank)
{
	return h->max_inflight[rank];
}

size_t loophub_inflight(struct loophub *h, unsigned rank)
{
	size_t v;

	pthread_mutex_lock(&h->mu);
	v = h->inflight[rank];
	pthread_mutex_unlock(&h->mu);
	return v;
}

int loophub_key_appl(struct loophub *h, uint32_t key)
{
	return key < MAXKEYS ? h->key_appl[key] : -1;
}

void *loopnet_create(struct loophub *h, unsigned rank)
{
	struct loopnet *n = calloc(1, sizeof(*n));

	n->h = h;
	n->rank = rank;
	return n;
}

static int ln_connect(void *ctx, unsigned appl, uint32_t timeout_ms, char *err, size_t errlen)
{
	struct loopnet *n = ctx;

	if (n->h->fail_rc && n->h->fail_appl == (int)appl) {
		agent_errf(err, errlen, "appliance %u (loop) unreachable: no answer to JOIN after %u ms",
			   appl, timeout_ms);
		return n->h->fail_rc;
	}
	return 0;
}

static int ln_register(void *ctx, unsigned appl, uint32_t key, const struct tally_register *reg,
		       char *err, size_t errlen)
{
	struct loopnet *n = ctx;
	struct loophub *h = n->h;
	int rc = 0;

	if (key >= MAXKEYS || reg->nelems > MAXELEMS)
		return -ENOSPC;
	pthread_mutex_lock(&h->mu);
	if (h->key_appl[key] >= 0 && (h->key_appl[key] != (int)appl || h->key_nelems[key] != reg->nelems)) {
		agent_errf(err, errlen, "REGISTER key %u: KEY_CONFLICT (%u elements at appliance %d, "
			   "now %u at %u)", key, h->key_nelems[key], h->key_appl[key], reg->nelems, appl);
		rc = -EEXIST;
	} else {
		h->key_appl[key] = (int)appl;
		h->key_nelems[key] = reg->nelems;
		h->key_dtype[key] = reg->dtype;
	}
	pthread_mutex_unlock(&h->mu);
	return rc;
}

/* Add op `op` to its (key, round) sum; the last of the world's pushes completes it. */
static int push_locked(struct loophub *h, int op)
{
	struct lop *o = &h->ops[op];
	struct lent *e = NULL, *freee = NULL;

	for (unsigned i = 0; i < MAXENT && !e; i++) {
		if (h->ent[i].used && h->ent[i].key == o->key && h->ent[i].round == o->round)
			e = &h->ent[i];
		else if (!h->ent[i].used && !freee)
			freee = &h->ent[i];
	}
	if (!e && !freee)
		return -ENOSPC;
	if (!e) {
		e = freee;
		e->used = 1;
		e->key = o->key;
		e->round = o->round;
		e->nelems = h->key_nelems[o->key];
		e->dtype = h->key_dtype[o->key];
		e->count = 0;
		e->complete = e->released = 0;
		memset(e->sum, 0, e->nelems * sizeof(double));
	}
	for (uint32_t i = 0; i < e->nelems; i++)
		e->sum[i] += elem_get(e->dtype, o->in, i);
	o->ent = (int)(e - h->ent);
	o->pushed = 1;
	h->pushed[o->rank]++;
	e->ops[o->rank] = op;
	if (++e->count == h->world) {
		e->complete = 1;
		e->seq = ++h->seq;
		if (!h->hold)
			deliver(h, e);
	}
	return 0;
}

/* Push waiting ops while windows have room (a delivery frees room in every rank's). */
static void pump_locked(struct loophub *h)
{
	int moved = 1;

	while (moved) {
		moved = 0;
		for (unsigned r = 0; r < h->world; r++)
			while (h->qhead[r] >= 0 && h->pushed[r] < h->window) {
				int op = h->qhead[r];

				h->qhead[r] = h->ops[op].next;
				if (h->qhead[r] < 0)
					h->qtail[r] = -1;
				if (push_locked(h, op)) /* no entry free: the op stays pending */
					h->ops[op].used = 0;
				moved = 1;
			}
	}
}

static int ln_start(void *ctx, unsigned appl, uint32_t key, uint32_t round, const void *in, void *out)
{
	struct loopnet *n = ctx;
	struct loophub *h = n->h;
	int op = -1;

	(void)appl;
	pthread_mutex_lock(&h->mu);
	for (int i = 0; i < MAXOPS; i++)
		if (!h->ops[i].used) {
			op = i;
			break;
		}
	if (op < 0) {
		pthread_mutex_unlock(&h->mu);
		return -ENOSPC;
	}
	h->ops[op] = (struct lop){1, 0, n->rank,
				  h->key_nelems[key] * tally_dtype_size(h->key_dtype[key]), out, -1,
				  key, round,
				  in, 0, -1};
	if (h->window && (h->pushed[n->rank] >= h->window || h->qhead[n->rank] >= 0)) {
		if (h->qtail[n->rank] >= 0)
			h->ops[h->qtail[n->rank]].next = op;
		else
			h->qhead[n->rank] = op;
		h->qtail[n->rank] = op;
	} else if (push_locked(h, op)) {
		h->ops[op].used = 0;
		pthread_mutex_unlock(&h->mu);
		return -ENOSPC;
	}
	pump_locked(h);
	h->starts[n->rank][h->nstarts[n->rank]++ % (MAXOPS * 4)] = key;
	h->inflight[n->rank] += h->ops[op].bytes;
	if (h->inflight[n->rank] > h->max_inflight[n->rank])
		h->max_inflight[n->rank] = h->inflight[n->rank];
	pthread_mutex_unlock(&h->mu);
	return op;
}

static int ln_test(void *ctx, unsigned appl, int op)
{
	struct loopnet *n = ctx;
	struct loophub *h = n->h;
	int rc;

	(void)appl;
	pthread_mutex_lock(&h->mu);
	rc = h->ops[op].done;
	if (rc) {
		h->inflight[n->rank] -= h->ops[op].bytes;
		h->ops[op].used = 0;
	}
	pthread_mutex_unlock(&h->mu);
	return rc;
}

static void ln_progress(void *ctx, uint64_t timeout_ns)
{
	struct timespec ts = {0, (long)(timeout_ns < 50000 ? timeout_ns : 50000)};

	(void)ctx;
	nanosleep(&ts, NULL);
}

static const char *ln_strerror(void *ctx, unsigned appl)
{
	(void)ctx, (void)appl;
	return "loopnet";
}

static void ln_stats(void *ctx, uint64_t *rtx, uint64_t *excl)
{
	(void)ctx;
	*rtx = *excl = 0;
}

static void ln_destroy(void *ctx)
{
	free(ctx);
}

const struct agent_net_ops loopnet_ops = {
	.connect = ln_connect,
	.register_key = ln_register,
	.start = ln_start,
	.test = ln_test,
	.progress = ln_progress,
	.strerror = ln_strerror,
	.stats = ln_stats,
	.destroy = ln_destroy,
};
