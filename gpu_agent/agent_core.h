/* SPDX-License-Identifier: Apache-2.0
 * agent_core.h — the agent's tables, shared by the API side (agent.c) and the progress
 * thread (agent_progress.c). Not installed. */
#ifndef AGENT_CORE_H
#define AGENT_CORE_H

#include <pthread.h>
#include <stdint.h>

#include "agent_internal.h"
#include "tally_agent.h"

enum { REQ_FREE = 0, REQ_PENDING, REQ_DONE };

struct agent_tensor {
	char name[TALLY_AGENT_NAME_MAX];
	size_t bytes;
	int dtype;
	int priority;
	unsigned first_part, nparts;
	int busy;          /* a push_pull is in flight */
	int average;       /* divide the sum by world_size */
	int ordered;       /* takes part in the global start order (tally_agent_set_ordered) */
	uint32_t subm;     /* push_pulls submitted: the round of the next one */
	void *host;        /* pinned staging for device tensors (CUDA) */
};

#define AGENT_PART_BLOCK 1024u
#define AGENT_PART_BLOCKS 4096u

struct agent_part {
	uint32_t key, appl;
	size_t off, bytes;
	uint32_t round;    /* next round of this key (progress thread) */
};

struct agent_req {
	int state;
	uint32_t gen;
	int tensor;
	uint8_t *buf;      /* host bytes summed in place */
	void *user;        /* the caller's pointer (device tensors: copied back at the end) */
	int device;
	void *stream;
	unsigned left;
	int status;
	tally_agent_cb cb;
	void *cb_arg;
};

struct agent_flight {
	int op;            /* network op id; -1 before start */
	uint32_t req, part;
	int result;        /* 0 pending, 1 done, < 0 failed */
};

struct agent_lane;

struct tally_agent {
	struct tally_agent_cfg cfg;
	struct agent_lane *lane;    /* sharded local mode: the API forwards there (agent_lane.c) */
	const struct agent_net_ops *net;
	void *net_ctx;
	struct agent_plan plan;

	pthread_mutex_t mu;
	pthread_cond_t wake;    /* progress thread */
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
	int reg_rc;
	char reg_err[256];

	char err[512];
	struct tally_agent_stats st;
};


static inline struct agent_part *part_at(struct tally_agent *a, unsigned i)
{
	return &a->pblk[i / AGENT_PART_BLOCK][i % AGENT_PART_BLOCK];
}

static inline int handle_of(const struct tally_agent *a, unsigned slot)
{
	return (int)(a->reqs[slot].gen * a->cfg.max_handles + slot);
}

void *agent_progress_main(void *arg);
/* Fail everything queued or in flight with `status` (callbacks run unlocked). */
void agent_fail_all_locked(struct tally_agent *a, int status);
/* Record the last error: fmt has one %s. */
void agent_set_err(struct tally_agent *a, const char *fmt, const char *s);

#endif
