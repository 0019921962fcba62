/* SPDX-License-Identifier: Apache-2.0
 * engine_job.c — jobs: operator and open admission (a job's own quotas), JOIN with the
 * rejoin timeout, BYE, and the job/worker walkers. Each job slot owns a fixed rank table
 * carved at create time, so admitting a job (an open-admission JOIN on the datapath core)
 * allocates nothing.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"

static struct engine_job *job_new(struct tally_engine *e, uint32_t id, uint64_t token,
			      uint32_t world, int *err)
{
	struct engine_job *free_slot = NULL;
	for (uint32_t i = 0; i < e->cfg.max_jobs; i++) {
		if (!e->jobs[i].in_use) {
			free_slot = &e->jobs[i];
			break;
		}
	}
	if (!free_slot) {
		*err = -ENOSPC;
		return NULL;
	}
	struct engine_rank *ranks = free_slot->ranks;
	memset(ranks, 0, world * sizeof(*ranks));
	tally_auth_clear(e->auths[free_slot - e->jobs]); /* a new job: no key until given one */
	memset(free_slot, 0, sizeof(*free_slot));
	free_slot->id = id;
	free_slot->token = token;
	free_slot->world = world;
	free_slot->ranks = ranks;
	free_slot->in_use = 1;
	free_slot->last_ns = engine_now(e); /* the idle timeout counts from admission */
	free_slot->created_ns = free_slot->last_ns;
	return free_slot;
}

int tally_engine_job_add(struct tally_engine *e, uint32_t job_id, uint64_t token,
			 uint32_t world_size)
{
	if (!e || world_size == 0 || world_size > TALLY_MAX_WORKERS)
		return -EINVAL;
	struct engine_job *j = engine_job_find(e, job_id);
	if (j)
		return (j->token == token && j->world == world_size) ? 0 : -EEXIST;
	int err = 0;
	return job_new(e, job_id, token, world_size, &err) ? 0 : err;
}

/* The job's own quotas (0: the engine's), checked at REGISTER (engine_key.c). */
int tally_engine_job_quota(struct tally_engine *e, uint32_t job_id, uint32_t quota_keys,
			   uint64_t quota_bytes)
{
	struct engine_job *j = e ? engine_job_find(e, job_id) : NULL;

	if (!j)
		return -ENOENT;
	j->q_keys = quota_keys;
	j->q_bytes = quota_bytes;
	return 0;
}

int tally_engine_job_remove(struct tally_engine *e, uint32_t job_id)
{
	struct engine_job *j = engine_job_find(e, job_id);
	if (!j)
		return -ENOENT;
	engine_keys_remove_job(e, j);
	tally_auth_clear(e->auths[j - e->jobs]);
	struct engine_rank *ranks = j->ranks;
	memset(j, 0, sizeof(*j));
	j->ranks = ranks;
	if (e->last_job == j)
		e->last_job = NULL;
	return 0;
}

/* Job slots and their rank tables (max_jobs x TALLY_MAX_WORKERS), zeroed: pages are
 * touched first by the core that binds ranks, so they end up on its NUMA node. */
int engine_jobs_init(struct tally_engine *e)
{
	e->jobs = calloc(e->cfg.max_jobs, sizeof(*e->jobs));
	e->rank_mem = calloc((size_t)e->cfg.max_jobs * TALLY_MAX_WORKERS, sizeof(*e->rank_mem));
	if (!e->jobs || !e->rank_mem)
		return -ENOMEM;
	for (uint32_t i = 0; i < e->cfg.max_jobs; i++)
		e->jobs[i].ranks = e->rank_mem + (size_t)i * TALLY_MAX_WORKERS;
	return 0;
}

void engine_jobs_free(struct tally_engine *e)
{
	free(e->jobs);
	free(e->rank_mem);
	e->jobs = NULL;
	e->rank_mem = NULL;
}

enum tally_reason engine_rx_join(struct tally_engine *e, const struct tally_pkt *pkt,
			     const struct tally_addr *from, size_t len)
{
	static const struct tally_addr noaddr;
	const struct tally_hdr *h = &pkt->hdr;
	struct tally_join jn;
	enum tally_reason r = tally_proto_get_join(pkt, &jn);
	if (r != TALLY_OK)
		return engine_reject(e, h, from, r);
	const struct tally_addr *src = from ? from : &noaddr;

	struct engine_job *job = engine_job_find(e, h->job_id);
	int created = 0;
	if (!job) {
		if (!e->cfg.open_admission)
			return engine_reject(e, h, from, TALLY_R_WRONG_JOB);
		if (jn.world_size == 0 || jn.world_size > TALLY_MAX_WORKERS ||
		    h->rank >= jn.world_size)
			return engine_reject(e, h, from, TALLY_R_BAD_RANK);
		r = engine_guard_claim(e, from, jn.world_size);
		if (r != TALLY_OK)
			return engine_reject(e, h, from, r);
		int err = 0;
		job = job_new(e, h->job_id, h->token, jn.world_size, &err);
		if (!job)
			return engine_reject(e, h, from, TALLY_R_JOB_TABLE_FULL);
		job->open_adm = 1;
		job->claim = 1;
		job->incarnation = jn.incarnation;
		created = 1;
	}
	if (job->token != h->token)
		return engine_reject(e, h, from, TALLY_R_WRONG_TOKEN);
	if (h->rank >= job->world || (jn.world_size && jn.world_size != job->world))
		return engine_reject(e, h, from, TALLY_R_BAD_RANK);
	r = engine_join_nonce_check(e, job, h, src);
	if (r != TALLY_OK)
		return engine_reject(e, h, from, r);
	uint64_t now = engine_now(e);
	const struct engine_rank *rk = &job->ranks[h->rank];
	if (rk->bound && !engine_addr_eq(&rk->addr, src) &&
	    !engine_guard_join_authentic(e, job, pkt))
		return engine_reject(e, h, from, TALLY_R_RANK_TAKEN);
	if (!created) { /* a relaunch replaces the old state (engine_life.c) */
		r = engine_incarnation(e, job, h->rank, src, jn.incarnation, now);
		if (r != TALLY_OK)
			return engine_reject(e, h, from, r);
	}
	r = engine_bind(e, job, h->rank, src, now);
	if (r != TALLY_OK) {
		if (created)
			tally_engine_job_remove(e, job->id);
		return engine_reject(e, h, from, r);
	}
	engine_join_nonce_set(e, job, h);
	engine_heard(job, h->rank, now, len);
	job->ranks[h->rank].held = (jn.caps & TALLY_CAP_HELD) != 0;
	e->st.joins++;

	struct tally_join_ok ok;
	memset(&ok, 0, sizeof(ok));
	ok.base_port = e->cfg.base_port;
	ok.ncores = e->cfg.ncores;
	ok.max_chunk_bytes = e->cfg.max_chunk_bytes;
	if (jn.max_chunk_bytes && jn.max_chunk_bytes < ok.max_chunk_bytes)
		ok.max_chunk_bytes = jn.max_chunk_bytes;
	ok.caps = TALLY_CAP_QUORUM | TALLY_CAP_HELD | TALLY_CAP_AVERAGE | TALLY_CAP_NORESULT |
		  (e->det_nslots ? TALLY_CAP_DETERMINISTIC : 0) |
		  (e->cfg.takes_gso ? TALLY_CAP_GSO : 0);
	ok.world_size = job->world;
	uint8_t pl[TALLY_JOIN_OK_LEN];
	tally_proto_put_join_ok(pl, &ok);

	struct tally_hdr oh;
	memset(&oh, 0, sizeof(oh));
	oh.op = TALLY_OP_JOIN_OK;
	oh.job_id = job->id;
	oh.token = job->token;
	oh.rank = h->rank;
	oh.aux = e->cfg.core_index; /* the client joins cores one at a time by this */
	oh.reserved = h->reserved;  /* the JOIN's nonce: this JOIN_OK answers that JOIN */
	oh.key = (uint32_t)e->cfg.boot_id; /* and our boot id (tally_proto.h PING) */
	oh.round = (uint32_t)(e->cfg.boot_id >> 32);
	oh.offset = (uint32_t)job->run; /* keyed: the run nonce (tally_engine_job_run) */
	oh.count = (uint32_t)(job->run >> 32);
	oh.payload_len = TALLY_JOIN_OK_LEN;
	oh.crc = tally_crc32c(pl, sizeof(pl));
	engine_send(e, src, &oh, pl, sizeof(pl));
	return TALLY_OK;
}

enum tally_reason engine_rx_bye(struct tally_engine *e, const struct tally_pkt *pkt,
			    const struct tally_addr *from)
{
	struct engine_job *job;
	enum tally_reason r = engine_guard_bye(e, &pkt->hdr, from, &job);
	if (r == TALLY_OK)
		r = engine_bye_nonce_check(e, job, &pkt->hdr);
	if (r != TALLY_OK)
		return engine_drop(e, r);
	struct engine_rank *rk = &job->ranks[pkt->hdr.rank];
	rk->bound = 0;
	rk->left = 1;
	job->joined--;
	e->st.byes++;
	if (job->joined == 0) { /* every bound rank left: the job ended */
		engine_job_end(e, job);
		e->st.jobs_freed_bye++;
	}
	return TALLY_OK;
}

int tally_engine_walk_jobs(const struct tally_engine *e,
			   int (*cb)(void *arg, const struct tally_engine_job_info *ji),
			   void *arg)
{
	for (uint32_t i = 0; i < e->cfg.max_jobs; i++) {
		const struct engine_job *j = &e->jobs[i];
		if (!j->in_use)
			continue;
		struct tally_engine_job_info ji = {
			.job_id = j->id,
			.world_size = j->world,
			.joined = j->joined,
			.keys = j->nkeys,
			.open_admission = j->open_adm,
			.incarnation = j->incarnation,
			.mem_bytes = j->mem,
			.quota_keys = j->q_keys ? j->q_keys : e->cfg.quota_keys,
			.quota_bytes = j->q_bytes ? j->q_bytes : e->cfg.quota_bytes,
			.gone = j->gone,
		};
		int rc = cb(arg, &ji);
		if (rc)
			return rc;
	}
	return 0;
}

int tally_engine_walk_workers(const struct tally_engine *e,
			      int (*cb)(void *arg, const struct tally_engine_worker_info *wi),
			      void *arg)
{
	for (uint32_t i = 0; i < e->cfg.max_jobs; i++) {
		const struct engine_job *j = &e->jobs[i];
		if (!j->in_use)
			continue;
		for (uint32_t r = 0; r < j->world; r++) {
			const struct engine_rank *rk = &j->ranks[r];
			if (!rk->bound)
				continue;
			struct tally_engine_worker_info wi = {
				.job_id = j->id,
				.rank = r,
				.addr = rk->addr,
				.last_heard_ns = rk->last_ns,
				.pkts = rk->pkts,
				.bytes = rk->bytes,
			};
			int rc = cb(arg, &wi);
			if (rc)
				return rc;
		}
	}
	return 0;
}
