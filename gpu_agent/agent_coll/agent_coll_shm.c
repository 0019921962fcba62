/* SPDX-License-Identifier: Apache-2.0
 * agent_coll_shm.c — the sharded mode's local collective over host buffers (the CPU
 * backend): one shared segment per machine ("/tally-lanes-...", agent_shm.c).
 *
 *  reduce_scatter: every local rank copies its tensor into its own slot, all but its own
 *    shard (nobody else reads that), and raises its posted flag to round + 1; once all are
 *    posted, rank lr sums shard lr of every other slot and of its own tensor with sum_avx
 *    into its host shard (padding zeroed).
 *  all_gather: rank lr writes its shard into the tensor's gather area and raises its gathered
 *    flag (round + 1, top bit set if it has no valid shard); once all are up, it copies the
 *    gather area out, or leaves the result there for the caller to read (TALLY_AGENT_RESULT_VIEW:
 *    it stays until every rank posted the next round, i.e. started its next push_pull).
 * A rank waiting for the others sleeps on their flags (agent_shm_wait, a shared futex).
 * Slots are reused round after round without more flags: a rank posts round r + 1 of a
 * tensor only after its round r finished (one push_pull per tensor in flight), i.e. after
 * every rank's gathered flag of round r, raised after that rank had read the slots.
 *
 * Layout: the 64-byte segment header, then a 4 MiB control block (per tensor: posted[ls],
 * gathered[ls], process-shared atomics), then per tensor in declaration order ls slots of
 * ls * shard bytes and a gather area of ls * shard bytes, at offsets every rank computes
 * alike.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent_lane.h"
#include "tally_sum.h"

#define CSHM_CTL_BYTES (4u << 20)
#define CSHM_FAILED 0x80000000u

struct cshm_tensor {
	uint64_t off;     /* slot 0; the gather area follows the ls slots */
	size_t bytes;     /* the tensor's real bytes */
	size_t padded;    /* ls * shard bytes */
	int dtype;
	struct agent_shard sh;
};

struct cshm {
	struct agent_shm shm;
	unsigned lr, ls, maxt;
	uint32_t timeout_ms;
	size_t used;
	struct cshm_tensor *t;
};

static uint32_t *flag_of(struct cshm *c, unsigned tensor, int gathered, unsigned r)
{
	return (uint32_t *)(c->shm.base + 64) + (size_t)tensor * 2 * c->ls +
	       (gathered ? c->ls : 0) + r;
}

static uint8_t *slot_of(struct cshm *c, unsigned tensor, unsigned r)
{
	return c->shm.base + c->t[tensor].off + (size_t)r * c->t[tensor].padded;
}

static uint8_t *gather_of(struct cshm *c, unsigned tensor)
{
	return slot_of(c, tensor, c->ls);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Wait until every rank's flag holds `want` (the failed bit aside), asleep on the flag
 * (agent_shm_wait: each store below wakes its sleepers). -ETIMEDOUT naming the first rank
 * missing, or -EIO naming a rank that failed. */
static int wait_all(struct cshm *c, unsigned tensor, int gathered, uint32_t want, uint32_t ms,
		    const char *what, char *err, size_t errlen)
{
	uint64_t t0 = now_ms(), el;

	for (unsigned r = 0; r < c->ls;) {
		uint32_t *f = flag_of(c, tensor, gathered, r);
		uint32_t v = __atomic_load_n(f, __ATOMIC_ACQUIRE);

		if ((v & ~CSHM_FAILED) == want) {
			if ((v & CSHM_FAILED) && r != c->lr) {
				agent_errf(err, errlen, "local rank %u failed its shard of round %u", r,
					   want - 1);
				return -EIO;
			}
			r++;
			continue;
		}
		if ((el = now_ms() - t0) > ms) {
			agent_errf(err, errlen, "local rank %u did not %s round %u within %u ms (its "
				   "last: round %d)", r, what, want - 1, ms, (int)(v & ~CSHM_FAILED) - 1);
			return -ETIMEDOUT;
		}
		agent_shm_wait(f, v, ((uint64_t)(ms - el) + 1) * 1000000u);
	}
	return 0;
}

/* Raise this rank's flag and wake the ranks asleep on it. */
static void post(struct cshm *c, unsigned tensor, int gathered, uint32_t v)
{
	uint32_t *f = flag_of(c, tensor, gathered, c->lr);

	__atomic_store_n(f, v, __ATOMIC_RELEASE);
	agent_shm_wake(f);
}

static int cshm_declare(void *ctx, unsigned tensor, size_t bytes, int dtype, char *err,
			size_t errlen)
{
	struct cshm *c = ctx;
	struct cshm_tensor t = {.bytes = bytes, .dtype = dtype};
	size_t esz = tally_dtype_size(dtype), need;

	if (tensor >= c->maxt) {
		agent_errf(err, errlen, "sharded local mode: more than %u tensors for the shared "
			   "segment's control block", c->maxt);
		return -ENOSPC;
	}
	if (c->t[tensor].padded) /* declared before (the lane declares each id once) */
		return -EEXIST;
	agent_shard_of(bytes / esz, c->ls, c->lr, &t.sh);
	t.padded = t.sh.shard_elems * esz * c->ls;
	t.off = c->used;
	need = c->used + ((t.padded * (c->ls + 1) + 63) & ~(size_t)63);
	if (need > c->shm.size) {
		agent_errf(err, errlen, "sharded local mode: shared segment of %zu bytes is full "
			   "(raise TALLY_LOCAL_SHM_BYTES)", c->shm.size);
		return -ENOSPC;
	}
	c->t[tensor] = t;
	c->used = need;
	return 0;
}

static int cshm_reduce_scatter(void *ctx, unsigned tensor, uint32_t round, const void *buf,
			       void *stream, void *shard, char *err, size_t errlen)
{
	struct cshm *c = ctx;
	const struct cshm_tensor *t = &c->t[tensor];
	const void *src[TALLY_SUM_MAX_WAYS];
	size_t esz = tally_dtype_size(t->dtype);
	size_t lo = t->sh.off_elems * esz, hi;
	int rc;

	(void)stream;
	if (lo > t->bytes)
		lo = t->bytes; /* a trailing rank without elements */
	hi = lo + t->sh.valid_elems * esz;
	/* the peers read only their own shards of this slot; ours is summed from buf */
	memcpy(slot_of(c, tensor, c->lr), buf, lo);
	memcpy(slot_of(c, tensor, c->lr) + hi, (const uint8_t *)buf + hi, t->bytes - hi);
	post(c, tensor, 0, round + 1);
	if ((rc = wait_all(c, tensor, 0, round + 1, c->timeout_ms, "reach push_pull of", err,
			   errlen)))
		return rc;
	for (unsigned r = 0; r < c->ls; r++)
		src[r] = r == c->lr ? (const uint8_t *)buf + lo : slot_of(c, tensor, r) + lo;
	if (t->sh.valid_elems &&
	    (rc = agent_local_sum(t->dtype, shard, src, c->ls, t->sh.valid_elems))) {
		agent_errf(err, errlen, "out of memory summing the local shards");
		return rc;
	}
	memset((uint8_t *)shard + t->sh.valid_elems * esz, 0,
	       (t->sh.shard_elems - t->sh.valid_elems) * esz);
	return 0;
}

static int cshm_all_gather(void *ctx, unsigned tensor, uint32_t round, const void *shard,
			   int failed, void *buf, void *stream, char *err, size_t errlen)
{
	struct cshm *c = ctx;
	const struct cshm_tensor *t = &c->t[tensor];
	size_t esz = tally_dtype_size(t->dtype);
	int rc;

	(void)stream;
	if (!failed)
		memcpy(gather_of(c, tensor) + t->sh.off_elems * esz, shard, t->sh.valid_elems * esz);
	post(c, tensor, 1, (round + 1) | (failed ? CSHM_FAILED : 0));
	/* the peers' shards come after their network rounds, each bounded by op_timeout */
	if ((rc = wait_all(c, tensor, 1, round + 1, 2 * c->timeout_ms, "deliver its shard of",
			   err, errlen)))
		return rc;
	if (!failed && buf)
		memcpy(buf, gather_of(c, tensor), t->bytes);
	return 0;
}

static void *cshm_gathered(void *ctx, unsigned tensor)
{
	return gather_of(ctx, tensor);
}

static void cshm_destroy(void *ctx)
{
	struct cshm *c = ctx;

	agent_shm_detach(&c->shm);
	free(c->t);
	free(c);
}

static const struct agent_coll_ops cshm_ops = {
	.declare = cshm_declare,
	.reduce_scatter = cshm_reduce_scatter,
	.all_gather = cshm_all_gather,
	.gathered = cshm_gathered,
	.destroy = cshm_destroy,
};

int agent_coll_shm_create(const struct tally_agent_cfg *cfg, const char *launch_id, size_t bytes,
			  const struct agent_coll_ops **ops, void **ctx, char *err, size_t errlen)
{
	struct cshm *c = calloc(1, sizeof(*c));
	int rc;

	if (!c) {
		agent_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	c->shm.fd = -1;
	c->lr = (unsigned)cfg->local_rank;
	c->ls = (unsigned)cfg->local_size;
	c->timeout_ms = cfg->op_timeout_ms;
	c->used = CSHM_CTL_BYTES;
	c->maxt = (unsigned)((CSHM_CTL_BYTES - 64) / (8u * c->ls));
	c->t = calloc(c->maxt, sizeof(*c->t));
	if (!c->t || c->ls > TALLY_SUM_MAX_WAYS || c->lr >= c->ls) {
		agent_errf(err, errlen, "sharded local mode: bad setup (local rank %u of %u, at most "
			   "%d)", c->lr, c->ls, TALLY_SUM_MAX_WAYS);
		rc = c->t ? -EINVAL : -ENOMEM;
		goto fail;
	}
	if ((rc = agent_shm_attach(&c->shm, cfg, "lanes", launch_id,
				   bytes ? bytes : (size_t)4 << 30, err, errlen)))
		goto fail;
	*ops = &cshm_ops;
	*ctx = c;
	return 0;
fail:
	cshm_destroy(c);
	return rc;
}
