/* SPDX-License-Identifier: Apache-2.0
 * engine_life.c — the job lifecycle an appliance that runs for months needs: a job ends
 * (BYE from every bound rank, or idle) and gives its memory back, a relaunch of a job id (a
 * new incarnation) replaces the old state without an operator, and a chunk waiting on a
 * silent rank is reported to the ranks that wait instead of being waited on forever.
 * The rules are in tally_engine.h. Called by engine.c (poll) and engine_job.c (JOIN, BYE);
 * calls engine_key.c, engine_auth.c (identity) and engine_util.c only. Nothing here allocates.
 */
#include <string.h>

#include "engine_int.h"

/* Keys (and their memory) freed, bindings dropped; admission (id, token, world, policy,
 * incarnation) stays. */
static void job_reset(struct tally_engine *e, struct engine_job *job)
{
	engine_keys_remove_job(e, job);
	memset(job->ranks, 0, job->world * sizeof(*job->ranks));
	job->joined = 0;
	job->gone = 0; /* a new launch or job starts with every appliance */
}

void engine_job_end(struct tally_engine *e, struct engine_job *job)
{
	job_reset(e, job);
	if (!job->open_adm)
		return;
	/* Nobody admitted it but its first JOIN: the slot goes back to the table. */
	struct engine_rank *ranks = job->ranks;
	memset(job, 0, sizeof(*job));
	job->ranks = ranks;
	if (e->last_job == job)
		e->last_job = NULL;
}

enum tally_reason engine_incarnation(struct tally_engine *e, struct engine_job *job,
				 uint32_t rank, const struct tally_addr *from, uint64_t inc,
				 uint64_t now)
{
	if (inc == 0 || inc == job->incarnation)
		return TALLY_OK; /* no incarnation given, or the job's own */
	if (job->incarnation == 0 && !job->joined && !job->nkeys) {
		job->incarnation = inc; /* the first launch of an admitted job: nothing to replace */
		return TALLY_OK;
	}
	const struct engine_rank *rk = &job->ranks[rank];
	/* (b): the address this rank is bound at now speaks for the new launch. A straggler of
	 * the old launch cannot hold that address at the same time. */
	int same_addr = rk->bound && engine_addr_eq(&rk->addr, from);
	/* (a): the old launch is silent as a whole (rejoin timeout, as for one rank). */
	int silent = now - job->last_ns >= e->cfg.rejoin_timeout_ns;
	if (!same_addr && !silent)
		return TALLY_R_INCARNATION_LIVE;
	job_reset(e, job);
	job->incarnation = inc;
	job->last_ns = now;
	e->st.incarnations++;
	return TALLY_OK;
}

/* One job slot per call: a job with state and no packet for the idle timeout ends. */
static void life_idle(struct tally_engine *e, uint64_t now)
{
	if (e->life_job >= e->cfg.max_jobs)
		e->life_job = 0;
	struct engine_job *job = &e->jobs[e->life_job++];
	if (!job->in_use || (!job->joined && !job->nkeys && !job->open_adm))
		return;
	if (now - job->last_ns < e->cfg.job_idle_timeout_ns)
		return;
	engine_job_end(e, job);
	e->st.jobs_freed_idle++;
}

/* How long rank w has been silent to the whole appliance: to this core, and to every other
 * core through the shared "last heard" table (engine_live.c). A rank waiting on another
 * core's key, or whose packets to this core are dropped on their way in (a full software
 * dispatch ring), is alive: reporting it dead failed every rank waiting here. */
static uint64_t rank_silence(const struct tally_engine *e, const struct engine_key *k,
			     uint32_t w, uint64_t now)
{
	const struct engine_rank *r = &k->job->ranks[w];
	uint64_t here = r->last_ns ? now - r->last_ns : UINT64_MAX;
	uint64_t any = engine_live_age(e, k->job->id, w, now);

	return any < here ? any : here;
}

/* The first participant missing from bitmap `have` who has been silent for `timeout`
 * (a rank that never joined has never been heard: silent since 0), ENGINE_NIL if none.
 * With skip_left, a rank that left with BYE is not waited for. */
static uint32_t silent_rank(const struct tally_engine *e, const struct engine_key *k,
			    const uint64_t *have, uint64_t now, uint64_t timeout, int skip_left)
{
	const struct engine_rank *ranks = k->job->ranks;
	for (uint32_t w = 0; w < k->reg.participants; w++)
		if (!engine_bit(have, w) && !(skip_left && ranks[w].left) &&
		    rank_silence(e, k, w, now) >= timeout)
			return w;
	return ENGINE_NIL;
}

/* ERROR RANK_SILENT about `dead`, for chunk idx's offset and `round`, to every bound
 * participant in bitmap `have` (those waiting on it). */
static void silent_report(struct tally_engine *e, struct engine_key *k, uint32_t idx,
			  uint32_t round, const uint64_t *have, uint32_t dead, uint64_t now)
{
	struct engine_rank *ranks = k->job->ranks;
	uint64_t ms = rank_silence(e, k, dead, now) / 1000000u;
	struct tally_hdr h;

	engine_chunk_error_hdr(&h, k, idx, TALLY_R_RANK_SILENT, dead);
	h.round = round;
	/* UINT32_MAX: never heard by any core (the rank has not joined) */
	h.count = ms >= UINT32_MAX ? UINT32_MAX : (uint32_t)ms;
	for (uint32_t w = 0; w < k->reg.participants; w++) {
		if (!ranks[w].bound || !engine_bit(have, w))
			continue;
		h.rank = w;
		engine_send(e, &ranks[w].addr, &h, NULL, 0);
	}
	e->st.dead_rank_errors++;
	k->silent_err_ns = now;
}

/* One key per call, once per period: its oldest open chunk (the open list is in first-push
 * order) waiting longer than the dead-rank timeout on a rank silent as long; or, with no
 * chunk open, pushes refused TOO_EARLY that long because a rank has not acknowledged the
 * slot's previous round (quorum: a rank that never joined, or died, holds the others two
 * rounds ahead at most) — the ranks that pushed learn which rank they wait for. */
static void life_dead_rank(struct tally_engine *e, uint64_t now)
{
	if (!e->nkeys)
		return;
	if (e->life_key >= e->nkeys)
		e->life_key = 0;
	struct engine_key *k = e->keys[e->life_key++];
	uint64_t t = e->cfg.dead_rank_timeout_ns;
	if (!k->job || (k->silent_err_ns && now - k->silent_err_ns < t))
		return;
	if (k->open_head != ENGINE_NIL) {
		uint32_t idx = k->open_head;
		const uint64_t *cb = engine_contrib_bm(k, idx);
		uint32_t dead;
		if (now - k->chunks[idx].first_ns >= t &&
		    (dead = silent_rank(e, k, cb, now, t, 0)) != ENGINE_NIL)
			silent_report(e, k, idx, k->chunks[idx].round, cb, dead, now);
		return;
	}
	if (!k->stall_ns || now - k->stall_ns < t)
		return;
	const uint64_t *seen = engine_seen_bm(k, k->stall_idx);
	uint32_t dead = silent_rank(e, k, seen, now, t, 1);
	if (dead != ENGINE_NIL)
		silent_report(e, k, k->stall_idx, k->stall_round, seen, dead, now);
}

void engine_life_poll(struct tally_engine *e)
{
	uint64_t now = engine_now(e);
	if (e->cfg.max_jobs)
		life_idle(e, now);
	life_dead_rank(e, now);
}
