/* SPDX-License-Identifier: Apache-2.0
 * agent.c — the agent's life: create picks, once, what lies below the one core (the network:
 * client sessions, the summing local mode's shared-memory wrapper or a lane; the stage:
 * flat or sharded), starts the progress thread; destroy undoes it. Also the agent-wide
 * queries (last error, stats, ranks). Tensors: agent_tensor.c; requests: agent_request.c. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent_core.h"
#include "agent_internal.h"
#include "agent_lane.h"
#include "agent_stage.h"
#include "tally_agent.h"

static void below_destroy(struct agent_below *b)
{
	if (b->net)
		b->net->destroy(b->net_ctx);
	if (b->stage)
		b->stage->destroy(b->stage_ctx);
	b->net = NULL;
	b->stage = NULL;
}

/* Tables, then JOIN every appliance, then the threads. */
static int core_start(struct tally_agent *a, char *errbuf, size_t errlen)
{
	int rc;

	if ((rc = agent_cfg_resolve(&a->cfg, errbuf, errlen)))
		return rc;
	if (!a->net_world)
		a->net_world = a->cfg.world_size;
	if ((rc = agent_plan_init(&a->plan, &a->cfg))) {
		agent_errf(errbuf, errlen, "cannot split keys over the appliances");
		return rc;
	}
	a->tensors = calloc(a->cfg.max_tensors, sizeof(*a->tensors));
	a->reqs = calloc(a->cfg.max_handles, sizeof(*a->reqs));
	if (!a->tensors || !a->reqs || agent_sched_init(&a->sched, 256)) {
		agent_errf(errbuf, errlen, "out of memory");
		return -ENOMEM;
	}
	for (unsigned i = 0; i < a->cfg.nappliances; i++) {
		if ((rc = a->net->connect(a->net_ctx, i, a->cfg.connect_timeout_ms, errbuf, errlen)))
			return rc;
		/* one-bit keys size their chunks to what every appliance takes (JOIN_OK): an
		 * appliance on a 1500-byte MTU lowers it to 1 KiB */
		uint32_t mc = a->net->max_chunk ? a->net->max_chunk(a->net_ctx, i) : 0;
		if (mc && (!a->comp_max_chunk || mc < a->comp_max_chunk))
			a->comp_max_chunk = mc;
		if (a->net->averages && a->net->averages(a->net_ctx, i))
			a->avg_appl |= 1ull << i;
		a->gso[i] = a->net->gso ? a->net->gso(a->net_ctx, i) : TALLY_AGENT_GSO_NONE;
	}
	if ((rc = -pthread_create(&a->thr, NULL, agent_progress_main, a))) {
		agent_errf(errbuf, errlen, "cannot start the progress thread");
		return rc;
	}
	a->thr_started = 1;
	return a->stage->start(a->stage_ctx, agent_stage_done, a, errbuf, errlen);
}

struct tally_agent *agent_core_create(const struct tally_agent_cfg *cfg, struct agent_below *b,
				      int *err, char *errbuf, size_t errlen)
{
	struct tally_agent *a = calloc(1, sizeof(*a));
	int rc = -ENOMEM;

	if (!a) {
		agent_errf(errbuf, errlen, "out of memory");
		below_destroy(b);
		goto fail;
	}
	a->cfg = *cfg;
	a->net = b->net;
	a->net_ctx = b->net_ctx;
	a->stage = b->stage;
	a->stage_ctx = b->stage_ctx;
	a->net_world = b->net_world;
	memcpy(a->net_tag, b->tag, sizeof(a->net_tag));
	a->reg_tensor = -1;
	pthread_mutex_init(&a->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&a->wake, &ca);
	pthread_condattr_destroy(&ca);
	pthread_cond_init(&a->done, NULL);
	if (!(rc = core_start(a, errbuf, errlen)))
		return a;
	tally_agent_destroy(a);
fail:
	if (err)
		*err = rc;
	return NULL;
}

struct tally_agent *agent_create_net(const struct tally_agent_cfg *cfg,
				     const struct agent_net_ops *ops, void *ctx, int *err,
				     char *errbuf, size_t errlen)
{
	struct agent_below b = {.net = ops, .net_ctx = ctx};

	agent_stage_flat_create(&b.stage, &b.stage_ctx);
	return agent_core_create(cfg, &b, err, errbuf, errlen);
}

struct tally_agent *agent_lane_create(const struct tally_agent_cfg *cfg,
				      const struct agent_net_ops *ops, void *ctx,
				      const char *launch_id, int *err, char *errbuf, size_t errlen)
{
	struct agent_below b = {.net = ops, .net_ctx = ctx};
	struct tally_agent_cfg c = *cfg, lane;
	int rc;

	if ((rc = agent_cfg_resolve(&c, errbuf, errlen)) ||
	    (rc = agent_lane_cfg(&c, &lane, errbuf, errlen)) ||
	    (rc = agent_stage_shard_create(&c, launch_id, &b.stage, &b.stage_ctx, errbuf,
					   errlen))) {
		below_destroy(&b);
		if (err)
			*err = rc;
		return NULL;
	}
	b.net_world = lane.world_size; /* the lane's keys sum over the machines */
	snprintf(b.tag, sizeof(b.tag), " (lane %d)", c.local_rank);
	return agent_core_create(&c, &b, err, errbuf, errlen);
}

/* The network of this rank: its own sessions, or (summing local mode) a share of its
 * machine's, pushed by local rank 0 as rank = machine index among the machines. */
static int create_net(const struct tally_agent_cfg *c, const char *id,
		      const struct agent_net_ops **ops, void **ctx, char *errbuf, size_t errlen)
{
	struct tally_agent_cfg node = *c;
	int rc;

	if (!c->local_agg || c->local_size <= 1)
		return agent_net_client_create(c, ops, ctx, errbuf, errlen);
	node.rank = c->rank / c->local_size;
	node.world_size = c->world_size / c->local_size;
	*ops = NULL;
	*ctx = NULL;
	if (c->local_rank == 0 &&
	    (rc = agent_net_client_create(&node, ops, ctx, errbuf, errlen)))
		return rc;
	return agent_net_local_create(c, *ops, *ctx, id, c->local_shm_bytes, ops, ctx, errbuf,
				      errlen);
}

struct tally_agent *tally_agent_create(const struct tally_agent_cfg *cfg, int *err,
				       char *errbuf, size_t errlen)
{
	struct tally_agent_cfg c = *cfg, lane;
	const struct agent_net_ops *ops;
	const char *id;
	void *ctx;
	int rc;

	if ((rc = agent_cfg_resolve(&c, errbuf, errlen)))
		goto fail;
	id = agent_cfg_local_id();
	if (c.local_agg == TALLY_AGENT_LOCAL_SHARD && c.local_size > 1) {
		/* every local rank pushes its shard on its own lane */
		if ((rc = agent_lane_cfg(&c, &lane, errbuf, errlen)) ||
		    (rc = agent_net_client_create(&lane, &ops, &ctx, errbuf, errlen)))
			goto fail;
		return agent_lane_create(&c, ops, ctx, id, err, errbuf, errlen);
	}
	if ((rc = create_net(&c, id, &ops, &ctx, errbuf, errlen)))
		goto fail;
	return agent_create_net(&c, ops, ctx, err, errbuf, errlen);
fail:
	if (err)
		*err = rc;
	return NULL;
}

void tally_agent_destroy(struct tally_agent *a)
{
	if (!a)
		return;
	if (a->thr_started) {
		pthread_mutex_lock(&a->mu);
		a->stop = 1;
		pthread_cond_broadcast(&a->wake);
		pthread_mutex_unlock(&a->mu);
		pthread_join(a->thr, NULL);
	}
	/* the stage's thread may still finish requests: stop it before failing the rest */
	if (a->stage)
		a->stage->stop(a->stage_ctx);
	pthread_mutex_lock(&a->mu);
	agent_fail_all_locked(a, -ECANCELED);
	agent_cancel_pending_locked(a);
	pthread_mutex_unlock(&a->mu);
	if (a->net)
		a->net->destroy(a->net_ctx);
	for (unsigned i = 0; a->tensors && i < a->ntensors; i++)
		if (a->tensors[i].stage)
			a->stage->free_state(a->stage_ctx, a->tensors[i].stage);
	for (unsigned i = 0; a->tensors && i < a->ntensors; i++) {
		agent_comp_free(&a->tensors[i]);
		free(a->tensors[i].saved);
	}
	if (a->stage)
		a->stage->destroy(a->stage_ctx);
	agent_sched_free(&a->sched);
	free(a->flight);
	for (unsigned b = 0; b < AGENT_PART_BLOCKS; b++)
		free(a->pblk[b]);
	free(a->tensors);
	free(a->reqs);
	pthread_cond_destroy(&a->wake);
	pthread_cond_destroy(&a->done);
	pthread_mutex_destroy(&a->mu);
	free(a);
}

const char *tally_agent_strerror(struct tally_agent *a)
{
	return a ? a->err : "no agent";
}

void tally_agent_get_stats(struct tally_agent *a, struct tally_agent_stats *out)
{
	pthread_mutex_lock(&a->mu);
	*out = a->st;
	pthread_mutex_unlock(&a->mu);
}

int tally_agent_liveness(struct tally_agent *a, unsigned i, uint64_t *gone_realtime_ns)
{
	int st;

	if (i >= a->plan.n)
		return -EINVAL;
	pthread_mutex_lock(&a->mu);
	st = a->live[i];
	if (gone_realtime_ns)
		*gone_realtime_ns = a->gone_ns[i];
	pthread_mutex_unlock(&a->mu);
	return st;
}

int tally_agent_gso(struct tally_agent *a, unsigned i)
{
	int st;

	if (i >= a->plan.n)
		return -EINVAL;
	pthread_mutex_lock(&a->mu);
	st = a->gso[i];
	pthread_mutex_unlock(&a->mu);
	return st;
}

const char *tally_agent_gso_name(int state)
{
	static const char *const names[] = { "none", "off (auto)", "on (auto)", "off (forced)",
					     "on (forced)", "off (refused)" };

	return state >= 0 && state < (int)(sizeof(names) / sizeof(names[0])) ? names[state]
									    : "?";
}

void tally_agent_ranks(struct tally_agent *a, int *rank, int *world, int *local_rank,
		       int *local_size)
{
	if (rank)
		*rank = a->cfg.rank;
	if (world)
		*world = a->cfg.world_size;
	if (local_rank)
		*local_rank = a->cfg.local_rank;
	if (local_size)
		*local_size = a->cfg.local_size;
}
