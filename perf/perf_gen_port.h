/* SPDX-License-Identifier: Apache-2.0
 * perf_gen_port.h — the generator's port to a real appliance: any transport of the registry
 * (udp against tally-udpd, dpdk on net_memif against tallyd), opened by name, received
 * raw (tally_xport_set_rx), and the job's setup done by hand for all R ranks from this one
 * address: JOIN per rank at every appliance core (each keeps its own job table), REGISTER
 * per rank and key at the key's core (key id % cores, as the client library does)
 * (participants = quorum = R); each push goes to its key's core (UDP port base + core).
 * tally-linegen --gen-lcores N (perf_gen_mc.c) gives each generator lcore a gp_port of its
 * own, over its own instance of the "dpdk" transport (its own port): nothing shared.
 */
#ifndef PERF_GEN_PORT_H
#define PERF_GEN_PORT_H

#include "perf_gen.h"
#include "tally_proto.h"
#include "tally_xport_reg.h"

#define GP_STAGE 256 /* a ring: a transport's poll (also the one inside tx) may deliver more
		       * than the generator takes in one rx call */
#define GP_FRAME (TALLY_HDR_MAX + 9216)

struct gp_port {
	struct tally_xport x;
	const struct tally_xport_ops *ops;
	void *ctx;
	struct tally_addr to;
	/* RESULTs received, copied (a transport's buffer lives for its callback): a ring from
	 * head to tail; the last rx call handed out `handed` from head (valid until the next) */
	uint8_t stage[GP_STAGE][GP_FRAME];
	uint32_t len[GP_STAGE];
	uint64_t head, tail;
	unsigned handed;
	uint64_t delivered, overflow, send_errors; /* frames given to the generator; lost
						    * to a full stage; sends refused */
	/* setup replies */
	unsigned join_ok, reg_ok, errors;
	int setup;
	unsigned ncores;      /* the appliance's cores (0 or 1: one); set before gp_setup */
	unsigned bad_ncores;  /* JOIN_OKs that named another core count */
	unsigned seen_ncores; /* the last such count */
};

/* Open transport `name` as a client of host:port (tally_xport_opts fields as given). */
int gp_open(struct gp_port *p, const char *name, const struct tally_xport_opts *xo, char *err,
	    size_t errlen);
void gp_close(struct gp_port *p);
/* JOIN and REGISTER every rank and key of o; 0, or -ETIMEDOUT / -EPROTO (err says). */
int gp_setup(struct gp_port *p, const struct pg_opts *o, double timeout_s, char *err,
	     size_t errlen);
void gp_io(struct gp_port *p, struct pg_io *io);

#endif
