/* SPDX-License-Identifier: Apache-2.0
 * agent_internal.h — what the parts of libtally_agent share: the network interface the core
 * drives (client sessions in production, an in-process hub in tests), the key plan, the
 * scheduler queue, device staging. Not installed. */
#ifndef AGENT_INTERNAL_H
#define AGENT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tally_agent.h"
#include "tally_proto.h"

#define TALLY_AGENT_DEFAULT_PORT 9170
#define TALLY_AGENT_MAX_WORKERS 1024

void agent_errf(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int agent_cfg_resolve(struct tally_agent_cfg *c, char *err, size_t errlen);
/* The transport's name (TALLY_TRANSPORT, default "udp") and its environment settings
 * applied to o (agent_cfg.c: the agent reads its environment there). 0 or -EINVAL. */
struct tally_xport_opts;
const char *agent_cfg_transport(void);
/* The agent's other environment settings, read only in agent_cfg.c (its edge). */
struct tally_client_cfg;
int agent_cfg_live_env(struct tally_client_cfg *cc, int multi, char *err, size_t errlen);
int agent_cfg_gso(int *gso, char *err, size_t errlen);
const char *agent_cfg_local_id(void);
int agent_cfg_xport_env(const char *name, struct tally_xport_opts *o, char *err, size_t errlen);

/* The network below the agent. Every call comes from one thread at a time (create, then
 * the progress thread). `appl` indexes cfg.appliances. */
struct agent_net_ops {
	/* JOIN appliance `appl`; 0 or negative errno with a message. */
	int (*connect)(void *ctx, unsigned appl, uint32_t timeout_ms, char *err, size_t errlen);
	/* REGISTER a key (blocking); 0 or negative errno with a message. */
	int (*register_key)(void *ctx, unsigned appl, uint32_t key, const struct tally_register *reg,
			    char *err, size_t errlen);
	/* Start an allreduce; an op id >= 0 or negative errno. */
	int (*start)(void *ctx, unsigned appl, uint32_t key, uint32_t round, const void *in, void *out);
	/* The same for a caller that does not want the sums (owner mode: the appliance answers
	 * header-only where it can, out is then left alone). NULL: only start (a plain one). */
	int (*start_noresult)(void *ctx, unsigned appl, uint32_t key, uint32_t round,
			      const void *in, void *out);
	/* Owner-mode and downlink counters into st (the noresult_* and rx_bytes fields).
	 * NULL: none. */
	void (*more_stats)(void *ctx, struct tally_agent_stats *st);
	/* 1 done, 0 pending, negative errno failed (the op id is released when not pending). */
	int (*test)(void *ctx, unsigned appl, int op);
	/* Stop a pending op (its key moved while the appliance still answers: failover):
	 * no more sends for it, its id released, its late answers dropped. 0 abandoned, 1 not
	 * pending any more (test it as usual), negative errno. NULL: a network without it. */
	int (*abandon)(void *ctx, unsigned appl, int op);
	/* A key REGISTERed at appliance `to` in place of `from` (failover): the round sums
	 * `from` kept for it go along (tally_client_carry_last). 0 or negative errno. NULL:
	 * none kept. */
	int (*carry)(void *ctx, unsigned from, unsigned to, uint32_t key);
	/* Drive I/O and timers; may wait up to timeout_ns for packets. */
	void (*progress)(void *ctx, uint64_t timeout_ns);
	/* The last error of an appliance's session, or "". */
	const char *(*strerror)(void *ctx, unsigned appl);
	void (*stats)(void *ctx, uint64_t *retransmits, uint64_t *excluded);
	void (*destroy)(void *ctx); /* says BYE where it can */
	/* One-bit keys: was chunk `chunk` of (key, round) left out by a quorum? 1 / 0. NULL:
	 * never (networks without quorum). */
	int (*excluded)(void *ctx, unsigned appl, uint32_t key, uint32_t round, uint32_t chunk);
	/* The largest payload appliance `appl` takes (JOIN_OK, after connect). NULL: the
	 * configured max_chunk_bytes. */
	uint32_t (*max_chunk)(void *ctx, unsigned appl);
	/* Failover (NULL: a network without it). The gone set others reported through the
	 * survivors (TALLY_OP_GONE); tell the survivors ours (re-sent until they echo it);
	 * an appliance's liveness (enum tally_agent_liveness). */
	uint32_t (*gone)(void *ctx);
	void (*declare_gone)(void *ctx, uint32_t gone);
	int (*liveness)(void *ctx, unsigned appl);
	/* Does appliance `appl` take TALLY_KEY_AVERAGE keys (JOIN_OK TALLY_CAP_AVERAGE, after
	 * connect)? 1 / 0. NULL: no. */
	int (*averages)(void *ctx, unsigned appl);
	/* How sends to appliance `appl` use UDP GSO now (enum tally_agent_gso; progress
	 * thread, no syscall). NULL: TALLY_AGENT_GSO_NONE. */
	int (*gso)(void *ctx, unsigned appl);
};

/* Production network: one tally_client + kernel UDP transport per appliance. */
int agent_net_client_create(const struct tally_agent_cfg *cfg, const struct agent_net_ops **ops,
			    void **ctx, char *err, size_t errlen);

/* Intra-machine aggregation over shared memory, wrapping the local root's network (inner:
 * rank = node, world = nodes; NULL on the other local ranks). Takes ownership of ictx. */
int agent_net_local_create(const struct tally_agent_cfg *cfg, const struct agent_net_ops *inner,
			   void *ictx, const char *launch_id, size_t shm_bytes,
			   const struct agent_net_ops **ops, void **ctx, char *err, size_t errlen);

/* ---- what the local ranks of a machine share (agent_shm.c) ---- */
struct agent_shm {
	char name[128];
	int fd, owner;
	uint8_t *base;
	size_t size;
};
/* "/tally-KIND-JOB-TOKENHASH-nNODE-LAUNCH" ('/' in the launch id becomes '_'). */
void agent_shm_name(char *out, size_t len, const char *kind, const struct tally_agent_cfg *cfg,
		    const char *launch_id);
/* Local rank 0 creates the segment (size bytes, sparse), the others attach within
 * connect_timeout_ms and check the local size; 0 or negative errno with a message. */
int agent_shm_attach(struct agent_shm *s, const struct tally_agent_cfg *cfg, const char *kind,
		     const char *launch_id, size_t size, char *err, size_t errlen);
void agent_shm_detach(struct agent_shm *s); /* the root also unlinks */
/* A flag word in the segment, across processes (a shared futex): sleep while *flag still
 * holds `seen`, at most timeout_ns (a waiter that polled burnt the CPU the ranks it waits
 * for needed); wake every sleeper after a store. */
void agent_shm_wait(uint32_t *flag, uint32_t seen, uint64_t timeout_ns);
void agent_shm_wake(uint32_t *flag);
/* dst = sum of k sources of n elements (f16/bf16 accumulated in f32); 0 or -ENOMEM. */
int agent_local_sum(int dtype, void *dst, const void *const *src, unsigned k, size_t n);

/* Create an agent over a given network (tests); takes ownership of ctx (destroyed on
 * failure too). */
struct tally_agent *agent_create_net(const struct tally_agent_cfg *cfg,
				     const struct agent_net_ops *ops, void *ctx, int *err,
				     char *errbuf, size_t errlen);

/* ---- key placement ---- */
struct agent_plan {
	unsigned n;
	double share[TALLY_AGENT_MAX_APPLIANCES];   /* target fraction of the bytes */
	uint64_t load[TALLY_AGENT_MAX_APPLIANCES];  /* bytes placed so far */
};
int agent_plan_init(struct agent_plan *p, const struct tally_agent_cfg *cfg);
/* The appliance for the next partition of `bytes` (and account for it). */
unsigned agent_plan_place(struct agent_plan *p, size_t bytes);

/* ---- re-plan over the survivors (agent_replan.c) ---- */
struct agent_replan {
	unsigned n;
	uint32_t gone;                              /* bit i: appliance i is gone */
	double share[TALLY_AGENT_MAX_APPLIANCES];
	uint64_t load[TALLY_AGENT_MAX_APPLIANCES];
};
void agent_replan_begin(struct agent_replan *r, const struct agent_plan *p, uint32_t gone);
/* Feed every part in declaration order: its appliance under the gone set (its home if that
 * survives), or -ENODEV when every appliance with a share is gone. */
int agent_replan_next(struct agent_replan *r, unsigned home, uint64_t bytes);

/* ---- scheduler ---- */
struct agent_sched_item {
	int64_t priority;
	uint64_t seq;   /* round: the tensor's push_pull count before this one */
	uint32_t part;  /* global partition index */
	uint32_t req;   /* request slot */
};
struct agent_sched {
	struct agent_sched_item *items;
	unsigned n, cap;
};
int agent_sched_init(struct agent_sched *s, unsigned cap);
void agent_sched_free(struct agent_sched *s);
int agent_sched_push(struct agent_sched *s, const struct agent_sched_item *it);
const struct agent_sched_item *agent_sched_peek(const struct agent_sched *s);
void agent_sched_pop(struct agent_sched *s, struct agent_sched_item *out);
int agent_sched_may_start(size_t inflight, size_t bytes, size_t credit);

/* ---- NUMA-local staging memory (agent_numa.c) ---- */
#define AGENT_NUMA_HDR 4096u /* header before every staging buffer; keeps page alignment */
enum { AGENT_HOST_NUMA = 1, AGENT_HOST_CUDA = 2 };
/* The NUMA node of a PCI device (busid as CUDA prints it) from sysfs ("/sys"): the node,
 * -ENOENT where the platform does not say, -EINVAL for a malformed id. */
int agent_numa_node_of_pci(const char *sysfs, const char *busid);
/* bytes preferring `node`, every page touched; NULL with a message. */
void *agent_numa_alloc(size_t bytes, int node, char *err, size_t errlen);
void agent_numa_free(void *buf);
/* What made a staging buffer (AGENT_HOST_*) and its mapping size; -EINVAL if none did. */
int agent_numa_kind(const void *buf, size_t *map_bytes);
void agent_numa_set_kind(void *buf, int kind, size_t map_bytes);
/* The node holding the page at addr, or negative errno. */
int agent_numa_node_of(const void *addr);

/* ---- device staging (CUDA builds; stubs return -ENOTSUP otherwise) ---- */
/* Pinned host memory on the current device's NUMA node where sysfs names one. */
int agent_dev_alloc_host(void **host, size_t bytes, char *err, size_t errlen);
void agent_dev_free_host(void *host);
/* Copy device → pinned host on `stream` and wait for it. */
int agent_dev_to_host(void *host, const void *dev, size_t bytes, void *stream, char *err,
		      size_t errlen);
/* Copy pinned host → device on `stream` and wait for it. */
int agent_dev_to_device(void *dev, const void *host, size_t bytes, void *stream, char *err,
			size_t errlen);

#endif
