/* SPDX-License-Identifier: Apache-2.0
 * engine_live.c — "last heard" per rank across every core of one appliance (issue 33). A
 * rank waiting at a barrier talks to one core only; on the others it looks silent, and the
 * per-core rule (rank_taken until rejoin_timeout_ns of silence) would let a token holder's
 * JOIN take it there. Each core stamps here when a rank's packet passes its identity check;
 * a JOIN or REGISTER from another IP is refused while any core heard the rank recently.
 *
 * A hash table of (job, rank) → (ms stamp, IPv4), relaxed atomics, no locks: a collision
 * overwrites (the entry then names another rank and is ignored: liveness falls back to the
 * core's own), and a torn read can refuse one re-bind spuriously (the worker retries). The
 * same IP is never refused here: a restarted worker on its own host re-binds as before.
 * The dead-rank report asks here too (engine_life.c): a rank stuck on one core's key, or
 * whose packets to one core are dropped on their way (a full software dispatch ring under
 * load), is alive while any core hears it.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "engine_int.h"

struct live_ent {
	_Atomic uint64_t key;   /* job_id << 32 | rank, +1 (0: empty) */
	_Atomic uint64_t ms_ip; /* ms stamp << 32 | IPv4 (network order); 0: never */
};

struct tally_engine_live {
	uint64_t mask;
	struct live_ent ent[];
};

struct tally_engine_live *tally_engine_live_create(uint32_t max_jobs)
{
	uint64_t n = 1;

	if (!max_jobs)
		max_jobs = 16;
	while (n < 2ull * max_jobs * TALLY_MAX_WORKERS)
		n <<= 1;
	struct tally_engine_live *l = calloc(1, sizeof(*l) + n * sizeof(l->ent[0]));
	if (l)
		l->mask = n - 1;
	return l;
}

void tally_engine_live_destroy(struct tally_engine_live *l)
{
	free(l);
}

static struct live_ent *live_slot(struct tally_engine_live *l, uint32_t job, uint32_t rank,
				  uint64_t *key)
{
	*key = ((uint64_t)job << 32 | rank) + 1;
	uint64_t h = *key * 0x9e3779b97f4a7c15ull;
	return &l->ent[(h >> 20) & l->mask];
}

void engine_live_heard(struct tally_engine *e, uint32_t job, uint32_t rank, uint32_t ip)
{
	struct tally_engine_live *l = e->cfg.live;
	uint64_t key;

	if (!l)
		return;
	struct live_ent *s = live_slot(l, job, rank, &key);
	uint64_t v = (uint64_t)(uint32_t)(e->now / 1000000u) << 32 | ip;
	/* one store per rank per ms at most: the line stays shared between cores otherwise */
	if (atomic_load_explicit(&s->ms_ip, memory_order_relaxed) == v &&
	    atomic_load_explicit(&s->key, memory_order_relaxed) == key)
		return;
	atomic_store_explicit(&s->key, key, memory_order_relaxed);
	atomic_store_explicit(&s->ms_ip, v, memory_order_release);
}

/* The stamp of (job, rank), or 0 when none (never heard, or the slot names another rank) */
static uint64_t live_stamp(const struct tally_engine *e, uint32_t job, uint32_t rank)
{
	struct tally_engine_live *l = e->cfg.live;
	uint64_t key;

	if (!l)
		return 0;
	struct live_ent *s = live_slot(l, job, rank, &key);
	uint64_t v = atomic_load_explicit(&s->ms_ip, memory_order_acquire);
	return atomic_load_explicit(&s->key, memory_order_relaxed) == key ? v : 0;
}

/* ns since stamp v (a stamp from another core's clock read may be a little ahead of ours) */
static uint64_t live_age_ns(uint64_t v, uint64_t now)
{
	uint32_t age_ms = (uint32_t)(now / 1000000u) - (uint32_t)(v >> 32);
	return (int32_t)age_ms < 0 ? 0 : (uint64_t)age_ms * 1000000u;
}

int engine_live_other(const struct tally_engine *e, uint32_t job, uint32_t rank, uint32_t ip,
		      uint64_t now)
{
	uint64_t v = live_stamp(e, job, rank);

	return v && (uint32_t)v != ip && live_age_ns(v, now) < e->cfg.rejoin_timeout_ns;
}

uint64_t engine_live_age(const struct tally_engine *e, uint32_t job, uint32_t rank, uint64_t now)
{
	uint64_t v = live_stamp(e, job, rank);

	return v ? live_age_ns(v, now) : UINT64_MAX;
}
