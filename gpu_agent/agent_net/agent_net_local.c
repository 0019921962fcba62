/* SPDX-License-Identifier: Apache-2.0
 * agent_net_local.c — intra-machine aggregation (the CPU backend, also BytePS's
 * "CPU-assisted" path for PCIe-only GPU hosts): the local ranks of a machine share one POSIX
 * shared-memory segment; every local rank copies its partition into its own slot, the local
 * root (local rank 0) sums the slots with sum_avx (k-way, one pass), push_pulls the machine's
 * sum through the real network as rank node = rank / local_size of world nodes, and the
 * others copy the result back from the root's slot. Only local roots talk to appliances.
 *
 * It is an agent_net_ops wrapper around the root's network, so the agent core (scheduling,
 * credits, averaging by the global world size) is unchanged.
 *
 * Segment (agent_shm.c): TALLY_LOCAL_SHM_BYTES (default 4 GiB) sparse on /dev/shm, named
 * "tally-agent-..." from the job, token, node and a per-launch id (torchrun's
 * TORCHELASTIC_RUN_ID, or TALLY_LOCAL_ID). Layout: a 4 MiB control block (per key:
 * ready[local_size] and done generations, round + 1, process-shared atomics), then per key
 * local_size slots of the key's bytes, at offsets every rank computes alike (keys are
 * registered in the same order everywhere).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent_internal.h"
#include "tally_sum.h"

#define LOC_CTL_BYTES (4u << 20)
#define LOC_MAX_OPS 4096

struct loc_key {
	uint64_t off;    /* slot 0 of this key in the segment */
	uint32_t bytes;
	int dtype;
};

struct loc_op {
	int used, state; /* 1: waiting for local contributions (root), 2: on the network, 3: done */
	uint32_t key, round;
	const void *in;
	void *out;
	int inner;       /* inner op id (root) */
	int result;
};

struct loc {
	const struct agent_net_ops *inner;
	void *ictx;
	unsigned lr, ls, maxkeys, nnodes;
	struct agent_shm shm;
	uint8_t *base;
	size_t size, used;
	struct loc_key *keys;
	struct loc_op ops[LOC_MAX_OPS];
	uint32_t bell_seen; /* the bell when the last tests began (a local rank's progress) */
};

static uint32_t *ready_of(struct loc *l, uint32_t key, unsigned r)
{
	return (uint32_t *)(l->base + 64) + (size_t)key * (l->ls + 1) + r;
}

static uint32_t *done_of(struct loc *l, uint32_t key)
{
	return ready_of(l, key, l->ls);
}

/* The last word of the control block: the root rings it (adds one, wakes the sleepers) after
 * each done it publishes; the other local ranks sleep on it between their tests. */
static uint32_t *bell_of(struct loc *l)
{
	return (uint32_t *)(l->base + LOC_CTL_BYTES) - 1;
}

static uint8_t *slot_of(struct loc *l, uint32_t key, unsigned r)
{
	return l->base + l->keys[key].off + (size_t)r * l->keys[key].bytes;
}

static int loc_connect(void *ctx, unsigned appl, uint32_t timeout_ms, char *err, size_t errlen)
{
	struct loc *l = ctx;

	return l->inner ? l->inner->connect(l->ictx, appl, timeout_ms, err, errlen) : 0;
}

static int loc_register(void *ctx, unsigned appl, uint32_t key, const struct tally_register *reg,
			char *err, size_t errlen)
{
	struct loc *l = ctx;
	size_t esz = tally_dtype_size(reg->dtype);
	size_t bytes = (size_t)reg->nelems * esz, need;

	if (key >= l->maxkeys) {
		agent_errf(err, errlen, "local aggregation: key %u beyond the %u keys of the shared "
			   "segment's control block", key, l->maxkeys);
		return -ENOSPC;
	}
	if (l->keys[key].bytes) /* already placed (the agent registers each key once) */
		return -EEXIST;
	need = l->used + ((bytes * l->ls + 63) & ~(size_t)63);
	if (need > l->size) {
		agent_errf(err, errlen, "local aggregation: shared segment of %zu bytes is full "
			   "(raise TALLY_LOCAL_SHM_BYTES)", l->size);
		return -ENOSPC;
	}
	l->keys[key] = (struct loc_key){l->used, (uint32_t)bytes, reg->dtype};
	l->used = need;
	if (!l->inner)
		return 0;
	/* the machine is one participant: the roots of all machines sum */
	struct tally_register r = *reg;
	r.participants = (uint16_t)l->nnodes;
	if (r.quorum > r.participants)
		r.quorum = r.participants;
	return l->inner->register_key(l->ictx, appl, key, &r, err, errlen);
}

static int loc_start(void *ctx, unsigned appl, uint32_t key, uint32_t round, const void *in, void *out)
{
	struct loc *l = ctx;
	int op = -1;

	(void)appl;
	if (key >= l->maxkeys || !l->keys[key].bytes)
		return -ENOENT;
	for (int i = 0; i < LOC_MAX_OPS; i++)
		if (!l->ops[i].used) {
			op = i;
			break;
		}
	if (op < 0)
		return -ENOSPC;
	l->ops[op] = (struct loc_op){1, 1, key, round, in, out, -1, 0};
	if (l->lr != 0) {
		memcpy(slot_of(l, key, l->lr), in, l->keys[key].bytes);
		__atomic_store_n(ready_of(l, key, l->lr), round + 1, __ATOMIC_RELEASE);
		l->ops[op].state = 2;
	}
	return op;
}

/* Root: sum the local slots into slot 0 and hand it to the network. */
static void root_advance(struct loc *l, unsigned appl, struct loc_op *o)
{
	const struct loc_key *k = &l->keys[o->key];
	const void *src[TALLY_SUM_MAX_WAYS];
	size_t n = k->bytes / tally_dtype_size(k->dtype);

	for (unsigned r = 1; r < l->ls; r++)
		if (__atomic_load_n(ready_of(l, o->key, r), __ATOMIC_ACQUIRE) != o->round + 1)
			return;
	src[0] = o->in;
	for (unsigned r = 1; r < l->ls; r++)
		src[r] = slot_of(l, o->key, r);
	if ((o->result = agent_local_sum(k->dtype, slot_of(l, o->key, 0), src, l->ls, n))) {
		o->state = 3;
		return;
	}
	o->inner = l->inner->start(l->ictx, appl, o->key, o->round, slot_of(l, o->key, 0),
				   slot_of(l, o->key, 0));
	if (o->inner < 0) {
		o->result = o->inner;
		o->state = 3;
	} else {
		o->state = 2;
	}
}

static int loc_test(void *ctx, unsigned appl, int op)
{
	struct loc *l = ctx;
	struct loc_op *o = &l->ops[op];
	int rc;

	if (l->lr == 0) {
		if (o->state == 1)
			root_advance(l, appl, o);
		if (o->state == 1)
			return 0; /* local contributions still missing */
		if (o->state == 2) {
			rc = l->inner->test(l->ictx, appl, o->inner);
			if (rc == 0)
				return 0;
			o->result = rc < 0 ? rc : 0;
			if (rc == 1) {
				memcpy(o->out, slot_of(l, o->key, 0), l->keys[o->key].bytes);
				__atomic_store_n(done_of(l, o->key), o->round + 1, __ATOMIC_RELEASE);
				__atomic_add_fetch(bell_of(l), 1, __ATOMIC_RELEASE);
				agent_shm_wake(bell_of(l));
			}
		}
	} else {
		if (__atomic_load_n(done_of(l, o->key), __ATOMIC_ACQUIRE) != o->round + 1)
			return 0;
		memcpy(o->out, slot_of(l, o->key, 0), l->keys[o->key].bytes);
		o->result = 0;
	}
	rc = o->result;
	o->used = 0;
	return rc ? rc : 1;
}

/* The core calls progress, then tests its ops, then progress again. A local rank sleeps until
 * the root rang since the tests before began (a done published then is not missed: the bell
 * moved on), at most 50 us (new push_pulls are started between progress calls). The root
 * drives its network, also at most 50 us at a time: its local ranks' contributions are
 * looked at in between. */
static void loc_progress(void *ctx, uint64_t timeout_ns)
{
	struct loc *l = ctx;

	if (l->inner) {
		l->inner->progress(l->ictx, timeout_ns < 50000 ? timeout_ns : 50000);
		return;
	}
	agent_shm_wait(bell_of(l), l->bell_seen, timeout_ns < 50000 ? timeout_ns : 50000);
	l->bell_seen = __atomic_load_n(bell_of(l), __ATOMIC_ACQUIRE);
}

static const char *loc_strerror(void *ctx, unsigned appl)
{
	struct loc *l = ctx;

	return l->inner ? l->inner->strerror(l->ictx, appl)
			: "local aggregation: waiting for the local root";
}

static void loc_stats(void *ctx, uint64_t *rtx, uint64_t *excl)
{
	struct loc *l = ctx;

	*rtx = *excl = 0;
	if (l->inner)
		l->inner->stats(l->ictx, rtx, excl);
}

static int loc_gso(void *ctx, unsigned appl)
{
	struct loc *l = ctx;

	return l->inner && l->inner->gso ? l->inner->gso(l->ictx, appl) : TALLY_AGENT_GSO_NONE;
}

static void loc_destroy(void *ctx)
{
	struct loc *l = ctx;

	if (l->inner)
		l->inner->destroy(l->ictx);
	agent_shm_detach(&l->shm);
	free(l->keys);
	free(l);
}

static const struct agent_net_ops loc_ops = {
	.connect = loc_connect,
	.register_key = loc_register,
	.start = loc_start,
	.test = loc_test,
	.progress = loc_progress,
	.strerror = loc_strerror,
	.stats = loc_stats,
	.destroy = loc_destroy,
	.gso = loc_gso,
};

int agent_net_local_create(const struct tally_agent_cfg *cfg, const struct agent_net_ops *inner,
			   void *ictx, const char *launch_id, size_t shm_bytes,
			   const struct agent_net_ops **ops, void **ctx, char *err, size_t errlen)
{
	struct loc *l = calloc(1, sizeof(*l));
	int rc = -ENOMEM;

	if (!l) {
		if (inner)
			inner->destroy(ictx);
		return rc;
	}
	l->inner = inner;
	l->ictx = ictx;
	l->shm.fd = -1;
	l->lr = (unsigned)cfg->local_rank;
	l->ls = (unsigned)cfg->local_size;
	l->nnodes = (unsigned)(cfg->world_size / cfg->local_size);
	l->size = shm_bytes ? shm_bytes : (size_t)4 << 30;
	l->used = LOC_CTL_BYTES;
	l->maxkeys = (unsigned)((LOC_CTL_BYTES - 128) / (4u * (l->ls + 1))); /* the bell last */
	l->keys = calloc(l->maxkeys, sizeof(*l->keys));
	if (!l->keys || l->ls > TALLY_SUM_MAX_WAYS || (l->lr == 0) != (inner != NULL)) {
		agent_errf(err, errlen, "local aggregation: bad setup (local size %u, max %d)", l->ls,
			   TALLY_SUM_MAX_WAYS);
		rc = -EINVAL;
		goto fail;
	}
	if ((rc = agent_shm_attach(&l->shm, cfg, "agent", launch_id, l->size, err, errlen)))
		goto fail;
	l->base = l->shm.base;
	*ops = &loc_ops;
	*ctx = l;
	return 0;
fail:
	loc_destroy(l);
	return rc;
}
