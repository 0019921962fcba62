/* SPDX-License-Identifier: Apache-2.0
 * agent_core.h — the agent's one set of tables (tensors, partitions, requests and their
 * handles and callbacks), shared by the API side (agent.c, agent_tensor.c, agent_request.c),
 * the progress thread (agent_progress.c) and completion (agent_complete.c). Below the core,
 * chosen once at create: a network (agent_net_ops) and a stage (agent_stage_ops). Not
 * installed. */
#ifndef AGENT_CORE_H
#define AGENT_CORE_H

#include <pthread.h>
#include <stdint.h>

#include "agent_internal.h"
#include "agent_stage.h"
#include "tally_agent.h"

enum { REQ_FREE = 0, REQ_PENDING, REQ_DONE };
#define AGENT_OP_MOVE (-2)
#define AGENT_RESULT_FAILED ((const void *)1)

struct agent_tensor {
	char name[TALLY_AGENT_NAME_MAX];
	size_t bytes;      /* the caller's */
	size_t key_bytes;  /* what its keys cover (the stage's: bytes, or this rank's shard) */
	int dtype;
	int priority;
	unsigned first_part, nparts;
	int busy;          /* a push_pull is in flight */
	int average;       /* divide the sum by world_size */
	int ordered;       /* takes part in the global start order (tally_agent_set_ordered) */
	uint32_t subm;     /* push_pulls submitted: the round of the next one */
	const void *result; /* where the last push_pull's result lies: NULL none yet or in
			     * flight, AGENT_RESULT_FAILED (tally_agent_result_view) */
	void *stage;       /* the stage's state for it (pinned staging, the shard), its to free */
	/* compression (agent_compress.c): rounds [comp_on, comp_off) go through codec */
	int comp_set, comp_off_set, comp_keys; /* comp_keys: compressed keys registered */
	uint64_t comp_on, comp_off;
	const struct agent_codec_ops *codec; /* the worker-stage codec (agent_codec.h) */
	void *cstate;      /* its state (1-bit: the worker error), per element of key_bytes */
	uint8_t *cin, *cout; /* compressed partitions, p->coff each, chunk by chunk */
	uint8_t *saved;    /* with several appliances: the open round's input, key_bytes,
			    * kept until it is summed so a failover can push it again */
};

#define AGENT_PART_BLOCK 1024u
#define AGENT_PART_BLOCKS 4096u

struct agent_part {
	uint32_t key, appl;
	uint32_t home;     /* appl as first placed (agent_plan); appl differs after a failover */
	uint8_t evict;     /* its draining appliance refused a round: it moves (failover) */
	size_t off, bytes;
	uint32_t round;    /* next round of this key (progress thread) */
	uint32_t cround;   /* next round of its compressed key */
	size_t coff;       /* its compressed bytes in the tensor's cin/cout */
	int avg;           /* registered TALLY_KEY_AVERAGE: the appliance averages it */
};

struct agent_req {
	int state;
	uint32_t gen;
	int tensor;
	uint8_t *buf;      /* host bytes summed in place (the stage's choice) */
	void *user;        /* the caller's pointer (device tensors: copied back at the end) */
	unsigned flags;    /* TALLY_AGENT_RESULT_VIEW, TALLY_AGENT_NO_RESULT */
	void *result;      /* where the stage leaves the result (NULL: user) */
	int device;
	void *stream;
	unsigned left;
	int status;
	tally_agent_cb cb;
	void *cb_arg;
	int comp;          /* a compressed round (agent_comp_active at submission) */
	uint64_t t0_ns;    /* submission (CLOCK_MONOTONIC): where its deadline starts */
	int watched;       /* its partitions are the core's (queued by push_pull, not yet
			    * expired): the progress thread applies its deadline */
	uint64_t round;    /* the tensor's push_pull count at submission */
};

struct agent_flight {
	int op;            /* network op id; -1 before start, AGENT_OP_MOVE: push again where
			    * its part lives now (its appliance failed it: gone) */
	uint32_t round;    /* the round it pushes (uncompressed parts) */
	uint32_t appl;     /* where it was started (its part may have moved since) */
	uint32_t req, part;
	int result;        /* 0 pending, 1 done, < 0 failed */
};

/* What lies below the core, chosen once at create (agent.c). */
struct agent_below {
	const struct agent_net_ops *net;
	void *net_ctx;
	const struct agent_stage_ops *stage;
	void *stage_ctx;
	int net_world;          /* workers a key sums over on this network (0: the world size) */
	char tag[24];           /* names this rank's network in errors: "" or " (lane 1)" */
};

struct tally_agent {
	struct tally_agent_cfg cfg;  /* the global ranks, whatever lies below */
	/* from struct agent_below, fixed for the agent's life */
	const struct agent_net_ops *net;
	void *net_ctx;
	const struct agent_stage_ops *stage;
	void *stage_ctx;
	int net_world;
	char net_tag[24];
	uint64_t codec_rejects;  /* RESULT chunks a codec refused (agent_comp_finish) */
	uint32_t comp_max_chunk; /* smallest JOIN_OK max_chunk_bytes (one-bit chunks), 0: cfg */
	uint64_t avg_appl;       /* appliances that offered TALLY_CAP_AVERAGE (bit per index) */
	struct agent_plan plan;

	pthread_mutex_t mu;
	pthread_cond_t wake;    /* progress thread (CLOCK_MONOTONIC) */
	pthread_cond_t done;    /* waiters (requests, declarations) */
	pthread_t thr;
	int thr_started, stop;

	struct agent_tensor *tensors;
	unsigned ntensors;
	/* partitions in blocks that never move: the progress thread reads them unlocked
	 * while a declaration appends */
	struct agent_part *pblk[AGENT_PART_BLOCKS];
	unsigned nparts;
	struct agent_req *reqs;
	uint64_t seq;           /* push_pulls submitted (the start order of ORDER_SUBMIT) */
	int order_mode;         /* enum tally_agent_order */
	struct agent_sched sched;
	struct agent_flight *flight;
	unsigned nflight, flight_cap;
	size_t inflight_bytes;
	int credit_blocked, order_blocked;
	uint64_t last_progress_ns; /* last partition completion (or overdraft) */

	int reg_tensor;         /* declaration waiting for REGISTER, -1 none */
	int reg_comp;           /* ... of its compressed keys (set_compression) */
	int reg_rc;
	char reg_err[256];

	/* failover (agent_failover.c, progress thread) */
	uint32_t gone;          /* dead appliances: every key moves (agreed through GONE) */
	uint32_t draining;      /* draining ones: a key moves when a round of it is refused */
	uint32_t gone_seen, drain_seen; /* failed ops' appliances, not yet applied */
	int evicted;            /* parts marked evict, not yet moved */
	int moving;             /* flight entries marked AGENT_OP_MOVE, not yet pushed again */
	uint64_t gone_ns[TALLY_AGENT_MAX_APPLIANCES]; /* when each went (CLOCK_REALTIME) */
	unsigned placed;        /* parts REGISTERed (the progress thread's) */
	uint64_t moved_pushes;  /* open-round pushes moved (progress thread's count) */
	int live[TALLY_AGENT_MAX_APPLIANCES]; /* enum tally_agent_liveness, under the lock */
	int gso[TALLY_AGENT_MAX_APPLIANCES];  /* enum tally_agent_gso, under the lock */

	char err[1024]; /* a client's give-up text comes with its drop summary */
	struct tally_agent_stats st;
	uint64_t push_bytes;    /* progress thread's count, copied to st under the lock */
};


/* May appliance `appl` average this agent's f16/bf16 keys (TALLY_KEY_AVERAGE)? Only where
 * its divisor, the RESULT's contributors, is the world size the agent would divide by: one
 * push per rank (no local aggregation) and every rank in every sum (no quorum). */
static inline int agent_avg_ok(const struct tally_agent *a, unsigned appl)
{
	return (a->avg_appl >> appl & 1) && a->net_world == a->cfg.world_size &&
	       (a->cfg.local_agg == TALLY_AGENT_LOCAL_OFF || a->cfg.local_size == 1) &&
	       (!a->cfg.quorum || a->cfg.quorum >= a->net_world);
}

/* Start a partition's allreduce for request rq: owner mode (TALLY_AGENT_NO_RESULT) where
 * this rank pushes for itself alone (no local aggregation: the local ranks would share the
 * result) and the network can say so. */
static inline int agent_net_start(struct tally_agent *a, const struct agent_req *rq,
				  unsigned appl, uint32_t key, uint32_t round, const void *in,
				  void *out)
{
	if ((rq->flags & TALLY_AGENT_NO_RESULT) && a->net->start_noresult &&
	    (a->cfg.local_agg == TALLY_AGENT_LOCAL_OFF || a->cfg.local_size == 1))
		return a->net->start_noresult(a->net_ctx, appl, key, round, in, out);
	return a->net->start(a->net_ctx, appl, key, round, in, out);
}

static inline struct agent_part *part_at(struct tally_agent *a, unsigned i)
{
	return &a->pblk[i / AGENT_PART_BLOCK][i % AGENT_PART_BLOCK];
}

/* A caller's tensor id: its entry, or NULL for no such tensor. */
static inline struct agent_tensor *tensor_at(struct tally_agent *a, int id)
{
	return id >= 0 && (unsigned)id < a->ntensors ? &a->tensors[id] : NULL;
}

static inline int handle_of(const struct tally_agent *a, unsigned slot)
{
	return (int)(a->reqs[slot].gen * a->cfg.max_handles + slot);
}

/* Record the last error: fmt has one %s. */
static inline void agent_set_err(struct tally_agent *a, const char *fmt, const char *s)
{
	agent_errf(a->err, sizeof(a->err), fmt, s);
}

/* Create the core over what lies below (owned from here on, destroyed on failure too). */
struct tally_agent *agent_core_create(const struct tally_agent_cfg *cfg, struct agent_below *b,
				      int *err, char *errbuf, size_t errlen);

void *agent_progress_main(void *arg);

/* REGISTER tensor id's keys (comp: its compressed keys) through the progress thread, which
 * owns the sessions (agent_tensor.c; a->mu held). 0 or a negative errno, with a->reg_err. */
int agent_register_sync(struct tally_agent *a, int id, int comp);

/* ---- deadlines (agent_request.c) ---- */
/* How often the progress thread looks for push_pulls past their deadline. */
#define AGENT_EXPIRE_EVERY_NS 100000000u
/* Fail every push_pull whose partitions the core holds (queued or on the network) and that
 * is past its deadline, as tally_agent_expire does (lock held; callbacks run with it
 * dropped). One still in its stage (stage_in, the sharded stage's all-gather) is left to
 * the stage's own timeout, which names what it waits for. */
void agent_expire_due_locked(struct tally_agent *a);

/* ---- compression through the tensor's codec (agent_compress.c) ---- */
struct tally_register;
int agent_comp_active(const struct agent_tensor *t, uint64_t round);
/* A partition's compressed-key REGISTER (the codec's): dtype, compression, chunk, key. */
void agent_comp_reg(const struct tally_agent *a, const struct agent_tensor *t,
		    const struct agent_part *p, struct tally_register *reg, uint32_t *key);
/* 1: the codec's RESULT is the average already (no worker-side averaging). */
int agent_comp_averages(const struct agent_tensor *t);
/* Worker stage of a partition from buf, then start it: the network op id or negative errno;
 * adds the wire bytes to *wire_bytes. */
int agent_comp_start(struct tally_agent *a, const struct agent_tensor *t, struct agent_part *p,
		     const uint8_t *buf, uint64_t *wire_bytes);
/* The server's result of a partition decompressed into buf: 0, or -EIO (a chunk the codec
 * refused, counted in codec_rejects). */
int agent_comp_finish(struct tally_agent *a, const struct agent_tensor *t,
		       const struct agent_part *p, uint8_t *buf);
void agent_comp_free(struct agent_tensor *t);

/* ---- failover (agent_failover.c), progress thread ---- */
/* A part's REGISTER for the network (key and parameters), uncompressed or compressed. */
void agent_part_reg(const struct tally_agent *a, const struct agent_tensor *t,
		    const struct agent_part *p, int comp, struct tally_register *reg,
		    uint32_t *key);
/* An op of flight entry f failed with rc: 1 if it is a failover (the entry was marked
 * AGENT_OP_MOVE and its appliance noted), 0 if it is an error. */
int agent_failover_take(struct tally_agent *a, struct agent_flight *f, int rc);
/* No lock: apply a grown gone set (declare it, re-plan, REGISTER moved keys) and push the
 * moved entries of flight [0, n) again. */
void agent_failover_poll(struct tally_agent *a, unsigned n);
/* Place parts [from, nparts) under the current gone set (declaration after a failover). */
int agent_failover_place(struct tally_agent *a, unsigned from);

/* ---- completion (agent_complete.c) ---- */
/* The stage's view of request `slot` (lock held). */
void agent_stage_req_of(struct tally_agent *a, unsigned slot, struct agent_stage_req *sr);
/* The network part of request `slot` is over: the stage copies back (the lock dropped
 * meanwhile). 1: the stage reports it later (agent_stage_done), 0: it may complete now. */
int agent_copy_back_locked(struct tally_agent *a, unsigned slot);
/* Publish request `slot` (a callback runs with the lock dropped). */
void agent_finish_req_locked(struct tally_agent *a, unsigned slot);
/* The stage's done report (agent_stage_done_fn, arg = the agent). */
void agent_stage_done(void *arg, unsigned slot, int status, const char *err);
/* Fail everything queued or in flight on the network with `status`. */
void agent_fail_all_locked(struct tally_agent *a, int status);
/* Fail what is left at destroy (the stage stopped): requests the stage still held. */
void agent_cancel_pending_locked(struct tally_agent *a);

#endif
