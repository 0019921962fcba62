/* SPDX-License-Identifier: Apache-2.0
 * simnet.h — an in-memory network with virtual time for whole-system tests in one process.
 *
 * Nodes: appliance cores 0..nengines-1 (node ids 0..nengines-1) and clients
 * 0..nclients-1 (node ids nengines..). Every node gets a transport context for the
 * tally_xport_ops of simnet_ops(): a client addresses a core by tally_addr.core, an engine
 * answers to the address it learned (cookie = client node id + 1).
 *
 * Each direction (client → appliance "up", appliance → client "down") has seeded random
 * loss, duplication, reordering (an extra delay for some packets) and delay with jitter.
 * Everything is deterministic given the seed: one thread, virtual time, events ordered by
 * (time, sequence number).
 *
 * Driving: simnet_step() runs every node's tick hook (tally_client_tick /
 * tally_engine_poll), advances virtual time to the next event and delivers what is due
 * (tally_client_rx / tally_engine_rx). A client's blocking calls (join, register, wait)
 * work through the ops' poll, which delivers packets to every node but ticks none of the
 * other clients: with several clients use tally_client_start/test and simnet_step.
 */
#ifndef TALLY_SIMNET_H
#define TALLY_SIMNET_H

#include <stddef.h>
#include <stdint.h>

#include "tally_client.h"
#include "tally_engine.h"
#include "tally_xport.h"

struct simnet;

struct simnet_link {
	double loss;         /* probability a packet is dropped */
	double dup;          /* probability a packet is delivered twice */
	double reorder;      /* probability a packet is held back reorder_ns more */
	uint64_t delay_ns;   /* base one-way latency (at least 1 ns is used) */
	uint64_t jitter_ns;  /* plus uniform 0..jitter_ns */
	uint64_t reorder_ns;
	/* A bottleneck: each client's link in this direction carries one KiB per ns_per_kib
	 * (0: no limit); packets queue behind each other (FIFO per client and direction), so
	 * what a client has in flight becomes queueing delay. */
	uint64_t ns_per_kib;
};

struct simnet_cfg {
	uint64_t seed;
	unsigned nclients, nengines;
	struct simnet_link up, down;
	/* Period of the engines' timer hook (deadline completions); 0: engines are polled
	 * only after each packet they receive. */
	uint64_t engine_poll_ns;
};

struct simnet_stats {
	uint64_t sent, delivered, lost, duplicated, reordered;
	uint64_t down_drops;  /* sent to or from a node marked down */
	uint64_t bad_dest;    /* no such node */
};

/* A node's behaviour. rx gets each delivered packet; tick (optional) runs timers and
 * returns the ns until it wants to run again (UINT64_MAX: idle). */
struct simnet_node_ops {
	void (*rx)(void *arg, const void *buf, size_t len, const struct tally_addr *from);
	uint64_t (*tick)(void *arg);
	/* appliance timers (tally_engine_poll): run after packets reach the node and every
	 * cfg.engine_poll_ns of virtual time */
	void (*timers)(void *arg);
};

struct simnet *simnet_create(const struct simnet_cfg *cfg);
void simnet_destroy(struct simnet *net);

const struct tally_xport_ops *simnet_ops(void);
unsigned simnet_engine_node(const struct simnet *net, unsigned core);
unsigned simnet_client_node(const struct simnet *net, unsigned client);
void *simnet_ctx(struct simnet *net, unsigned node);
/* The address the engines see for a client (its JOIN's source). */
struct tally_addr simnet_addr(const struct simnet *net, unsigned node);

void simnet_attach(struct simnet *net, unsigned node, const struct simnet_node_ops *ops,
		   void *arg);
void simnet_attach_client(struct simnet *net, unsigned client, struct tally_client *c);
void simnet_attach_engine(struct simnet *net, unsigned core, struct tally_engine *e);

/* Inject a packet as if `from_node` had sent it (hostile-input tests): delivered exactly
 * once after the base delay, whatever the link's impairments. */
int simnet_inject(struct simnet *net, unsigned from_node, const struct tally_addr *to,
		  const void *buf, size_t len);

/* Faults: a node that is down loses everything to and from it; a client's extra one-way
 * delay applies to its packets towards the appliance (a straggler). */
void simnet_set_down(struct simnet *net, unsigned node, int down);
void simnet_set_extra_delay(struct simnet *net, unsigned node, uint64_t ns);
void simnet_set_link(struct simnet *net, const struct simnet_link *up,
		     const struct simnet_link *down);
/* A stall: client `client`'s link towards the appliance (up) or from it carries nothing for
 * ns from now; what is sent meanwhile waits behind it, in order, and nothing is lost. */
void simnet_stall(struct simnet *net, unsigned client, int up, uint64_t ns);

/* A chosen loss: fn sees every packet sent (not injected ones) with its source and
 * destination node, and drops it by returning nonzero (counted lost). NULL: none. */
typedef int (*simnet_filter_fn)(void *arg, unsigned src, unsigned dst, const uint8_t *hdr,
				size_t len);
void simnet_set_filter(struct simnet *net, simnet_filter_fn fn, void *arg);

uint64_t simnet_now(const struct simnet *net);
/* One step: tick every node, advance to the next event or wake-up (at most max_ns),
 * deliver what is due. Returns packets delivered. */
unsigned simnet_step(struct simnet *net, uint64_t max_ns);
/* Advance to now + ns, stepping. */
void simnet_run_for(struct simnet *net, uint64_t ns);
/* Packets in flight. */
size_t simnet_inflight(const struct simnet *net);
const struct simnet_stats *simnet_stats(const struct simnet *net);

/* The seeded generator the network uses, for tests that want reproducible data. */
uint64_t simnet_rand(struct simnet *net);

#endif
