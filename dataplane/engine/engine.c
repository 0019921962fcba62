/* SPDX-License-Identifier: Apache-2.0
 * engine.c — the aggregation engine's entry points: creation (every allocation the engine
 * ever makes happens here), packet dispatch, timers, counters, drain. The rules are in
 * tally_engine.h; jobs, keys, chunks and the deterministic pool live in engine_job.c,
 * engine_key.c, engine_chunk.c and engine_det.c, shared helpers in engine_util.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "engine_int.h"

void tally_engine_cfg_defaults(struct tally_engine_cfg *cfg)
{
	if (!cfg->ncores)
		cfg->ncores = 1;
	if (!cfg->base_port)
		cfg->base_port = TALLY_DEFAULT_PORT;
	if (!cfg->max_chunk_bytes)
		cfg->max_chunk_bytes = 8192;
	if (!cfg->mem_budget)
		cfg->mem_budget = (size_t)256 << 20;
	if (!cfg->max_jobs)
		cfg->max_jobs = 16;
	if (!cfg->max_keys)
		cfg->max_keys = 65536;
	if (!cfg->rejoin_timeout_ns)
		cfg->rejoin_timeout_ns = 5000000000ull;
	if (!cfg->job_idle_timeout_ns)
		cfg->job_idle_timeout_ns = 60000000000ull;
	if (!cfg->dead_rank_timeout_ns)
		cfg->dead_rank_timeout_ns = 10000000000ull;
	if (!cfg->admit_timeout_ns)
		cfg->admit_timeout_ns = 60000000000ull;
	if (!cfg->admit_claims) /* a flood of claims can take half the job table, never all */
		cfg->admit_claims = cfg->max_jobs > 1 ? cfg->max_jobs / 2 : 1;
	if (cfg->max_jobs > 1 && cfg->admit_claims >= cfg->max_jobs)
		cfg->admit_claims = cfg->max_jobs - 1; /* one slot stays the operator's */
	if (!cfg->admit_bytes) /* open admission together: half the memory, never all */
		cfg->admit_bytes = cfg->mem_budget / 2;
}

struct tally_engine *tally_engine_create(const struct tally_engine_cfg *cfg_in,
					 const struct tally_xport_ops *ops, void *xctx,
					 int *err)
{
	struct tally_engine *e = NULL;
	int rc = -EINVAL;

	if (!cfg_in || !ops || !ops->send || !ops->now_ns)
		goto fail;
	struct tally_engine_cfg cfg = *cfg_in;
	tally_engine_cfg_defaults(&cfg);
	if (cfg.max_chunk_bytes > TALLY_MAX_PAYLOAD || cfg.max_keys > (1u << 30) ||
	    cfg.max_jobs > 65536 || (!cfg.alloc != !cfg.free) ||
	    cfg.nallow > TALLY_ENGINE_MAX_ALLOW)
		goto fail;
	rc = tally_sum_init();
	if (rc < 0)
		goto fail;
	rc = -ENOMEM;
	e = calloc(1, sizeof(*e));
	if (!e)
		goto fail;
	/* a boot id per start (tally_proto.h PING); a short read falls back to the clock */
	if (!cfg.boot_id && getrandom(&cfg.boot_id, sizeof(cfg.boot_id), 0) != sizeof(cfg.boot_id))
		cfg.boot_id = ops->now_ns(xctx) ^ ((uint64_t)getpid() << 32);
	if (!cfg.boot_id)
		cfg.boot_id = 1;
	e->cfg = cfg;
	e->ops = ops;
	e->xctx = xctx;
	e->now = ops->now_ns(xctx);
	/* the transport's per-RESULT-buffer state, 16-aligned inside the key's block */
	e->xbuf_size = (uint32_t)((ops->buf_size + 15) & ~(size_t)15);
	rc = engine_jobs_init(e);
	if (rc < 0)
		goto fail;
	rc = engine_auth_init(e);
	if (rc < 0)
		goto fail;
	rc = engine_keys_arena_init(e);
	if (rc < 0)
		goto fail;
	rc = engine_keys_init(e);
	if (rc < 0)
		goto fail;
	rc = engine_det_init(e);
	if (rc < 0)
		goto fail;
	return e;
fail:
	if (e)
		tally_engine_destroy(e);
	if (err)
		*err = rc;
	return NULL;
}

void tally_engine_destroy(struct tally_engine *e)
{
	if (!e)
		return;
	if (e->jobs) {
		for (uint32_t i = 0; i < e->cfg.max_jobs; i++)
			if (e->jobs[i].in_use)
				tally_engine_job_remove(e, e->jobs[i].id);
	}
	engine_keys_fini(e);
	engine_det_fini(e);
	engine_jobs_free(e);
	engine_auth_fini(e);
	engine_keys_arena_fini(e);
	free(e);
}

enum tally_reason tally_engine_rx(struct tally_engine *e, const void *buf, size_t len,
				  const struct tally_addr *from)
{
	static const struct tally_addr noaddr;
	struct tally_pkt pkt;

	e->st.rx_pkts++;
	e->st.rx_bytes += len;
	if (!engine_guard_allowed(e, from)) /* the allow-list comes before anything else */
		return engine_drop(e, TALLY_R_NOT_ALLOWED);
	enum tally_reason r = tally_proto_decode(buf, len, &pkt);
	if (r != TALLY_OK)
		return engine_drop(e, r);
	r = engine_rx_verify(e, buf, &pkt, from);
	if (r != TALLY_OK)
		return r;
	switch (pkt.hdr.op) {
	case TALLY_OP_PUSH:
		return engine_rx_push(e, &pkt, from ? from : &noaddr, len);
	case TALLY_OP_JOIN:
		return engine_rx_join(e, &pkt, from, len);
	case TALLY_OP_REGISTER:
		if (pkt.hdr.flags & TALLY_F_ACK)
			return engine_drop(e, TALLY_R_UNEXPECTED_OP);
		return engine_rx_register(e, &pkt, from, len);
	case TALLY_OP_PULL:
		return engine_rx_pull(e, &pkt, from ? from : &noaddr, len);
	case TALLY_OP_BYE:
		return engine_rx_bye(e, &pkt, from ? from : &noaddr);
	case TALLY_OP_PING:
		return engine_rx_ping(e, &pkt, from, len);
	case TALLY_OP_GONE:
		return engine_rx_gone(e, &pkt, from ? from : &noaddr);
	default: /* JOIN_OK, RESULT, ERROR: only the worker side receives them */
		return engine_drop(e, TALLY_R_UNEXPECTED_OP);
	}
}

unsigned tally_engine_poll(struct tally_engine *e)
{
	engine_held_flush_any(e);
	if (e->zombies)
		engine_keys_reap(e);
	engine_life_poll(e);
	engine_guard_poll(e);
	return engine_deadlines(e);
}

const struct tally_engine_stats *tally_engine_stats(const struct tally_engine *e)
{
	return &e->st;
}

void tally_engine_stats_reset(struct tally_engine *e)
{
	memset(&e->st, 0, sizeof(e->st));
}

size_t tally_engine_mem_used(const struct tally_engine *e)
{
	return e->mem_used;
}

void tally_engine_set_draining(struct tally_engine *e, int on)
{
	e->draining = on ? 1 : 0;
}

int tally_engine_draining(const struct tally_engine *e)
{
	return e->draining;
}

uint64_t tally_engine_open_rounds(const struct tally_engine *e)
{
	return e->open_rounds;
}

uint64_t tally_engine_open_chunks(const struct tally_engine *e)
{
	return e->open_chunks;
}
