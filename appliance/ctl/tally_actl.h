/* SPDX-License-Identifier: Apache-2.0
 * tally_actl.h — the appliance control plane (actl): the control methods of tally_ctl.h
 * (status, stats, jobs, keys, workers, stuck, job_add, evict, policy, drain, shutdown,
 * log level, config save/replay) implemented once over a small backend that each appliance
 * provides: tallyd (DPDK lcores, command rings) and tally-udpd (kernel UDP, engine thread).
 *
 * Threads: tally_actl_start/poll/stop/replay and every backend op but `collect` run on the
 * appliance's main thread; `exec` runs fn on the engine's own thread and waits for it.
 * `collect` only reads plain counters (any thread, torn reads tolerated).
 *
 * Counters: one X-macro list per block (engine: TALLY_ENGINE_STATS in tally_engine.h; per
 * core I/O: TALLY_ACTL_IO_STATS below; transports: their registrations' ctl_defs; drop reasons: enum tally_reason and enum
 * tally_pkt_drop with their name functions). The struct, the names and the sum come from
 * those lists; tally_actl_collect is the one place that sums cores, and `stats`, DPDK
 * telemetry and the exit logs all print what it returns, every counter and every reason.
 */
#ifndef TALLY_ACTL_H
#define TALLY_ACTL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "tally_engine.h"
#include "tally_pkt.h"
#include "tally_xport_reg.h"

/* Per-core I/O counters: X(field, help). Zero where a backend has no such thing. */
#define TALLY_ACTL_IO_STATS(X) \
	X(rx_pkts, "frames (datagrams) received") \
	X(rx_bytes, "their bytes") \
	X(tx_pkts, "frames sent") \
	X(tx_bytes, "their bytes") \
	X(tally_pkts, "Tally datagrams handed to the engine (or bounced)") \
	X(engine_rejects, "of those, rejected by the engine (drops says why)") \
	X(arp_replies, "ARP requests answered") \
	X(icmp_replies, "ICMP echo requests answered") \
	X(dispatched_out, "sent to the owning core's ring") \
	X(dispatched_in, "taken from this core's ring") \
	X(tx_relayed, "frames sent through another core's port") \
	X(loops, "poll loops") \
	X(busy_loops, "poll loops that found work") \
	X(idle_sleeps, "idle sleeps") \
	X(cmds, "control commands run on the core") \
	X(rx_truncated, "datagrams larger than the receive buffer (kernel UDP, dropped)") \
	X(tx_send_errors, "sends the kernel refused (kernel UDP, dropped)")

struct tally_actl_io_stats {
#define TALLY_ACTL_IO_FIELD(f, help) uint64_t f;
	TALLY_ACTL_IO_STATS(TALLY_ACTL_IO_FIELD)
#undef TALLY_ACTL_IO_FIELD
};

/* Per-core transport counters: every transport the program has shows the counters its
 * registration lists (tally_xport_reg.h: ctl_defs, e.g. verbs_conns_up, udp_tx_calls), in
 * the registry's order, zeros included; a backend's collect adds an open transport's with
 * tally_xport_ctl_add(x, out->xport). */
/* Everything counted on one core (or summed over all). */
struct tally_actl_counters {
	struct tally_actl_io_stats io;
	uint64_t xport[TALLY_XPORT_CTL_MAX];     /* tally_xport_ctl_def(i) names xport[i] */
	struct tally_engine_stats eng;
	uint64_t frame_drops[TALLY_PKT_D_COUNT]; /* frames dropped before the engine */
};

/* sum += c (every field of every block). */
void tally_actl_counters_add(struct tally_actl_counters *sum, const struct tally_actl_counters *c);
void tally_actl_engine_stats_add(struct tally_engine_stats *sum, const struct tally_engine_stats *s);
/* Every counter in one stable order: group NULL for plain counters, "drops" (engine
 * rejection reasons) or "frame_drops" (frames dropped before the engine), zeros included. */
typedef void (*tally_actl_counter_fn)(void *arg, const char *group, const char *name,
				      uint64_t v);
void tally_actl_counters_each(const struct tally_actl_counters *c, tally_actl_counter_fn fn,
			      void *arg);
/* {name: n, ..., "drops": {reason: n}, "frame_drops": {reason: n}}. */
json_t *tally_actl_counters_json(const struct tally_actl_counters *c);
/* "name=n ..." of every counter, then the reasons seen: "rejected: reason=n ..." and
 * "frame_drops: reason=n ..." (exit logs). */
void tally_actl_counters_line(const struct tally_actl_counters *c, char *buf, size_t len);

/* ---- backend ------------------------------------------------------------------------- */
/* Runs on the engine's thread; e is NULL where the core runs no engine (tallyd
 * --io-forward): a change returns -ENOTSUP then, a query 0. */
typedef int (*tally_actl_engine_fn)(struct tally_engine *e, unsigned core, void *arg);

struct tally_actl_ops {
	unsigned (*ncores)(void *ctx);
	/* fn on core's engine thread; its result, -ENODEV (no such core), -ESHUTDOWN */
	int (*exec)(void *ctx, unsigned core, tally_actl_engine_fn fn, void *arg);
	/* fn on every core, posted at once; 0 or the first core's negative result */
	int (*exec_all)(void *ctx, tally_actl_engine_fn fn, void *arg);
	/* the counters of one core (any thread) */
	void (*collect)(void *ctx, unsigned core, struct tally_actl_counters *out);
	int (*stats_reset)(void *ctx);     /* engine and core counters, on every core */
	int (*drain)(void *ctx);           /* engines stop starting rounds */
	void (*shutdown)(void *ctx, int drain);
	int (*quitting)(void *ctx);        /* a shutdown or signal is under way */
	double (*uptime)(void *ctx);
	/* Appliance fields of `status`: draining, open_admission, cores, ports, memory, ... */
	void (*status)(void *ctx, json_t *out);
	/* Per-port counters for `stats` (a new array), NULL: none. */
	json_t *(*ports)(void *ctx);
	/* syslog priority LOG_ERR..LOG_DEBUG; returns the previous one or a negative errno */
	int (*set_log_level)(void *ctx, int prio);
	void (*log)(void *ctx, int prio, const char *msg); /* syslog priorities */
};

/* The one collect: per core into cores[ncores] (NULL: not wanted), summed into *total. */
void tally_actl_collect(const struct tally_actl_ops *ops, void *ctx,
			struct tally_actl_counters *total, struct tally_actl_counters *cores);

/* ---- the control plane --------------------------------------------------------------- */
struct tally_actl;

struct tally_actl_cfg {
	const char *socket_path;    /* NULL or "": TALLY_CTL_DEFAULT_SOCKET */
	const struct tally_actl_ops *ops;
	void *ctx;
	unsigned idle_timeout_ms;   /* idle control connections closed after (0: the server's
				     * TALLY_CTL_IDLE_TIMEOUT_MS) */
};

/* Serves the socket. An explicit path that cannot be served fails (-errno); the default
 * one (held by another appliance, or not writable) is logged and skipped. NULL + *err. */
struct tally_actl *tally_actl_start(const struct tally_actl_cfg *cfg, int *err);
/* Handles ready requests (never blocks when timeout_ms is 0) and samples rates. */
int tally_actl_poll(struct tally_actl *a, int timeout_ms);
void tally_actl_stop(struct tally_actl *a);
/* Replays a `tallyctl config-save` file through the methods. 0 or -errno with err. */
int tally_actl_replay(struct tally_actl *a, const char *path, char *err, size_t errlen);
/* The server's epoll fd (-1 without a socket), for loops that wait on it. */
int tally_actl_fd(const struct tally_actl *a);

/* ---- what the kernel dropped before the appliance saw it (actl_kernel.c) ------------- */
/* The counters of the appliance's network namespace (/proc/net/snmp), namespace-wide. */
struct tally_actl_kernel {
	uint64_t reasm_fragments;   /* IP fragments queued for reassembly */
	uint64_t reasm_ok;          /* datagrams reassembled */
	uint64_t reasm_failed;      /* reassemblies that failed (timeouts included) */
	uint64_t udp_rcvbuf_errors; /* datagrams dropped: a socket's receive buffer was full */
	uint64_t udp_in_errors;     /* every UDP receive error (rcvbuf ones included) */
};
int tally_actl_kernel_read(struct tally_actl_kernel *k);
/* Adds kernel_reasm_* (and with udp, kernel_udp_*) to a `ports` entry. */
void tally_actl_kernel_json(json_t *port, int udp);

/* ---- trust settings (actl_guard.c), the same in tallyd and tally-udpd ---------------- */
struct tally_actl_guard {
	uint32_t nallow;                 /* --allow CIDR, repeatable */
	struct tally_engine_cidr allow[TALLY_ENGINE_MAX_ALLOW];
	struct tally_engine_cidr admit_subnet; /* --admit-subnet (mask 0: any) */
	uint32_t admit_timeout_ms;       /* --admit-timeout-ms (0: the engine's 60 s) */
	uint32_t admit_claims;           /* --admit-claims (0: half of max-jobs) */
	uint32_t quota_keys;             /* --quota-keys, whole appliance (0: half the key table) */
	uint64_t quota_bytes;            /* --quota-bytes, like --mem (0: half of it) */
	uint32_t quota_ranks;            /* --quota-ranks (0: TALLY_MAX_WORKERS) */
	uint32_t ctl_idle_timeout_ms;    /* --ctl-idle-timeout-ms */
	uint32_t rejoin_timeout_ms;      /* --rejoin-timeout-ms (0: the engine's 5 s) */
};
void tally_actl_guard_init(struct tally_actl_guard *g);
/* One setting by its long-flag name: 0, 1 when `name` is not a trust setting, or -EINVAL
 * with a sentence naming the setting in err. */
int tally_actl_guard_set(struct tally_actl_guard *g, const char *name, const char *value,
			 char *err, size_t errlen);
/* "10.0.0.0/24" → network and mask (network order). -EINVAL (not a CIDR), -EDOM (host
 * bits set). */
int tally_actl_parse_cidr(const char *s, struct tally_engine_cidr *out);
/* The engine settings of one core; call after mem_budget and max_keys are set. `split`:
 * the cores a whole-appliance quota is divided over (tallyd: its cores; udpd: 1, its --mem
 * is per core already). */
void tally_actl_guard_engine(const struct tally_actl_guard *g, struct tally_engine_cfg *ec,
			     unsigned split);

/* ---- RDMA verbs listener settings (actl_verbs.c), the same in tallyd and tally-udpd --- */
#define TALLY_ACTL_RDMA_SLOTS_MAX 4096
#define TALLY_ACTL_RDMA_CONNS_MAX 1024
struct tally_actl_verbs {
	char listen[80];     /* rdma-listen ADDR:PORT ("" = none) */
	uint32_t slots;      /* rdma-slots: landing slots per connection (0: 128) */
	int gid_index;       /* rdma-gid-index (-1: rdma_cm chooses) */
	uint32_t max_conns;  /* rdma-max-conns: connections at once, whole appliance (0: 256) */
	int auth_packet;     /* rdma-auth packet: keyed jobs keep per-packet MACs on verbs
			      * (authenticated connect requests refused), else setup (default) */
};
void tally_actl_verbs_init(struct tally_actl_verbs *v);
/* One setting by its name (rdma-listen, rdma-slots, rdma-gid-index, rdma-max-conns,
 * rdma-auth): 0,
 * 1 when `name` is not one of them, or -EINVAL with a sentence naming the setting. */
int tally_actl_verbs_set(struct tally_actl_verbs *v, const char *name, const char *value,
			 char *err, size_t errlen);
/* The settings as `status` shows them: {"listen", "slots", "gid_index", "max_conns",
 * "auth"}. */
json_t *tally_actl_verbs_json(const struct tally_actl_verbs *v);

#endif
