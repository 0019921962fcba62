/* SPDX-License-Identifier: Apache-2.0
 * tallyd.h — the appliance's state, shared by the datapath lcores (tallyd_lcore.c), the
 * main thread (tallyd_main.c) and the control plane (tallyd_ctl.c).
 *
 * Threads: each datapath lcore owns its struct tallyd_lcore (engine, TX buffers, rings'
 * consumer side). The main thread never touches an engine: it posts a struct tallyd_cmd on
 * the lcore's SP/SC command ring and the lcore executes it between bursts and posts it back
 * on its SP/SC ack ring. Statistics are plain per-lcore counters that readers sum (torn
 * reads tolerated; tally_engine_stats() may also be read from the main thread).
 */
#ifndef TALLYD_H
#define TALLYD_H

#include <stdint.h>

#include <rte_common.h>
#include <rte_ethdev.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "tally_engine.h"
#include "tally_dpdk.h"
#include "tally_xport_reg.h"
#include "tally_actl.h"
#include "tallyd_config.h"
#include "tallyd_size.h"

#define TALLYD_CMD_RING 64
#define TALLYD_NO_PORT UINT16_MAX  /* port_idx of a verbs-only lcore */
#define TALLYD_VERBS_REQ_RING 64   /* connect requests queued for one lcore */

struct tallyd;
struct tallyd_lcore;

enum tallyd_cmd_op {
	TALLYD_CMD_NOP = 0,
	TALLYD_CMD_DRAIN,        /* stop starting new rounds (engine drain where offered) */
	TALLYD_CMD_STATS_RESET,  /* engine and lcore counters */
	TALLYD_CMD_QUERY,        /* run fn on the lcore: it may read or change the engine
				  * (the control plane's engine work, tallyd_ctl.c) */
};

struct tallyd_cmd {
	enum tallyd_cmd_op op;
	int result;              /* set by the lcore: 0 or a negative errno */
	int (*fn)(struct tallyd_lcore *lc, void *buf, size_t len, void *arg);
	void *arg;
	void *buf;
	size_t len;
};

/* Counted on the lcore (tx_pkts, tx_bytes and tx_relayed are in its TX buffer's block and
 * its TX drops in tx.st.drops: tallyd_ctl.c's collect adds them). */
struct tallyd_lcore_stats {
	struct tally_actl_io_stats io;
	uint64_t drops[TALLY_PKT_D_COUNT];
	uint64_t last_tally_tsc;        /* TSC of the last Tally datagram (drain) */
};

/* The idle wait of one lcore (tallyd_idle.c). */
struct tallyd_idle {
	uint32_t empty;                 /* empty polls in a row */
	uint32_t sleep_us;              /* next sleep (sleep mode) */
	int mode;                       /* enum tallyd_idle_mode in effect on this lcore */
	int armed;                      /* interrupt mode: RX interrupt enabled */
	uint64_t waits;                 /* sleeps or interrupt waits */
	uint64_t wakeups;               /* interrupt waits ended by an RX event */
	char why[64];                   /* why interrupt mode fell back (status) */
};

/* One RX queue an lcore polls, and the ring other cores relay that port's TX through. */
struct tallyd_poll {
	uint16_t port_idx, port_id, rxq;  /* its TX queue on that port is rxq too */
	struct rte_ring *txin;          /* MP/SC: frames other cores want sent on the port */
};

struct tallyd_lcore {
	struct tallyd *d;
	unsigned idx;                   /* core index: owns UDP port base + idx */
	unsigned lcore_id;
	int socket;
	uint16_t port_idx, rxq;         /* its first RX queue (= poll[0]) */
	uint16_t npoll;                 /* RX queues it polls: 1, more when `cores` is below
					 * the number of ports (port p: core p % cores), 0 for
					 * verbs only */
	struct tallyd_poll poll[TALLYD_MAX_PORTS];
	struct tally_engine *engine;    /* NULL with --io-forward */
	struct rte_mempool *rx_pool, *hdr_pool;
	struct rte_ring *dispatch;      /* MP/SC: frames for this core from other cores */
	uint16_t txq;                   /* our TX queue on our first port (= rxq) */
	struct rte_ring *cmd, *ack;     /* SP/SC: main → lcore, lcore → main */
	volatile int running;
	volatile int stopped;            /* left its loop and answered its last commands */
	volatile int draining;
	struct tally_dpdk_tx tx;        /* our TX queue on each polled port; others via txin */
	void *verbs;                    /* rdma-listen: this core's connections (verbsx.ctx) */
	struct tally_xport verbsx;      /* the same, opened from the transport registry */
	struct tally_xport_mux mux;     /* the engine's transport: the port and verbs at once */
	struct rte_ring *verbs_req;     /* SP/SC: connect requests from the listener */
	struct tallyd_idle idle;
	struct tallyd_lcore_stats st;
} __rte_cache_aligned;

struct tallyd_port {
	uint16_t port_id;
	int socket;
	uint16_t nrxq, ntxq;
	int steered;                    /* rte_flow rules steer each core's port */
	int multiseg;                   /* transmits mbuf chains (zero-copy RESULTs) */
	int rx_intr;                    /* its RX queues have interrupts (idle = interrupt) */
	struct tally_pkt_ifaddr ifa;
	char driver[32];
	char afp_iface[16];             /* net_af_packet: its interface ("" otherwise) */
	uint64_t afp_drops;             /* frames its kernel ring dropped (main thread) */
};

struct tallyd {
	struct tallyd_conf conf;
	struct tallyd_sizing size;
	struct tallyd_port port[TALLYD_MAX_PORTS];
	uint16_t nports;
	uint16_t pidx[RTE_MAX_ETHPORTS]; /* ethdev port id → index in port[] */
	struct tallyd_lcore *lcore[TALLYD_MAX_CORES];
	unsigned ncores;
	struct tally_engine_live *live; /* "last heard" per rank, shared by the engines */
	unsigned main_lcore;
	uint64_t start_ns;              /* CLOCK_REALTIME at start */
	uint64_t start_tsc;
	volatile int quit;              /* SIGTERM/SIGINT or a control-plane shutdown */
	volatile int stop;              /* lcores leave their loops */
	volatile int draining;
	struct tally_actl *ctl;         /* the control plane (appliance/ctl) */
	void *verbs;                    /* rdma-listen's listener (main thread), or NULL */
	struct tally_xport verbsx;      /* the same, opened from the transport registry */
};

/* Main thread: post cmd to core `idx` and wait for the lcore's acknowledgement (it polls
 * its command ring every loop, at most idle-max-us apart when sleeping, up to
 * 1 ms in idle = interrupt, where it blocks in rte_epoll_wait). Returns cmd->result, or -ENODEV
 * (no such core) / -ESHUTDOWN (the lcore is not running). */
int tallyd_cmd_exec(struct tallyd *d, unsigned idx, struct tallyd_cmd *cmd);
/* The same command to every core (cmds[ncores], each a copy), posted at once. Returns 0
 * or the first core's negative result. */
int tallyd_cmd_exec_all(struct tallyd *d, struct tallyd_cmd *cmds);

/* Non-blocking halves: post returns 0 or -ENOBUFS; reap returns 1 with *cmd, or 0. */
int tallyd_cmd_post(struct tallyd *d, unsigned idx, struct tallyd_cmd *cmd);
int tallyd_cmd_reap(struct tallyd *d, unsigned idx, struct tallyd_cmd **cmd);

/* Lcore side (tallyd_lcore.c). */
int tallyd_lcore_main(void *arg);

/* Idle wait (tallyd_idle.c), on the lcore's thread: start picks the mode in effect (an RX
 * interrupt needs a port that has them and nothing but that queue feeding the lcore) and
 * logs it; busy() after a loop that found work; empty() after one that found none (it
 * pauses, sleeps or waits on the RX interrupt); stop() before the lcore returns. */
void tallyd_idle_start(struct tallyd_lcore *lc);
void tallyd_idle_empty(struct tallyd_lcore *lc);
void tallyd_idle_stop(struct tallyd_lcore *lc);
static inline void tallyd_idle_busy(struct tallyd_lcore *lc)
{
	lc->idle.empty = 0;
	lc->idle.sleep_us = 1;
	if (lc->idle.armed) {
		rte_eth_dev_rx_intr_disable(lc->d->port[lc->port_idx].port_id, lc->rxq);
		lc->idle.armed = 0;
	}
}

/* tallyd_verbs.c: rdma-listen. The listener runs on the main thread and hands each connect
 * request to the lcore of the core it names; each lcore owns a verbs instance (its CQ, its
 * QPs) and a transport that sends each packet the way its rank joined (DPDK or verbs). */
int tallyd_verbs_create(struct tallyd *d, char *err, size_t errlen); /* before engines */
void tallyd_verbs_destroy(struct tallyd *d);                         /* lcores stopped */
/* The engine's transport on lc (ctx for its ops). */
const struct tally_xport_ops *tallyd_verbs_xport(struct tallyd_lcore *lc, void **ctx);
int tallyd_verbs_poll(struct tallyd_lcore *lc);  /* datapath: completions handled */
void tallyd_verbs_slow(struct tallyd_lcore *lc); /* slow path: requests, rdma_cm events */
void tallyd_verbs_listen(struct tallyd *d);      /* main thread: connect requests */
void tallyd_verbs_collect(const struct tallyd *d, unsigned core, struct tally_actl_counters *out);
void tallyd_verbs_status(const struct tallyd *d, json_t *out, json_t *cores);

/* Seconds since start. */
double tallyd_uptime(const struct tallyd *d);

#endif
