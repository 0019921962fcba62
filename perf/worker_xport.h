/* SPDX-License-Identifier: Apache-2.0
 * worker_xport.h — the transport under tally-worker's client session, opened by name from
 * the transport registry (tally_xport_reg.h): udp, dpdk or verbs where the build has them.
 */
#ifndef WORKER_XPORT_H
#define WORKER_XPORT_H

#include <stddef.h>
#include <stdint.h>

#include "tally_client.h"
#include "tally_xport.h"
#include "tally_xport_reg.h"

struct wx_opts {
	const char *transport; /* registry name (default "udp") */
	const char *setting;   /* where it came from, for errors ("--transport", ...) */
	const char *host;      /* appliance address */
	uint16_t base_port;
	const char *bind;      /* udp: local address */
	int gso, gro;          /* udp offloads */
	int busy_poll_us;      /* udp, verbs: 0 transport default, < 0 off */
	const char *eal_args;  /* dpdk: EAL arguments, space separated */
	const char *local_ip;  /* dpdk: our address, ADDR/LEN */
	const char *dpdk_port; /* dpdk: port name (default: the first port) */
	int gid_index;         /* verbs: -1 rdma_cm chooses, else checked */
	const uint8_t *auth_key; /* verbs: the job key (NULL: none): connections authenticated
				  * at setup as (auth_job, auth_rank) unless TALLY_VERBS_AUTH=packet */
	uint32_t auth_job, auth_rank;
};

struct worker_xport {
	struct tally_xport x;
	const struct tally_xport_ops *ops;
	void *ctx;
	int setup_authed;      /* verbs: connections authenticated at setup: no per-packet MAC */
};

/* Open the transport (its environment settings applied here, at the program's edge); 0, or
 * a negative errno with a message in err. */
int wx_open(const struct wx_opts *o, struct worker_xport *wx, char *err, size_t errlen);
/* Deliver received packets to the session from now on. */
void wx_attach(struct worker_xport *wx, struct tally_client *c);
/* Send what is queued (after BYE). */
void wx_flush(struct worker_xport *wx);
/* Print the transport's counters as JSON members (",\"udp\":{...}"), nothing if none. */
void wx_json(struct worker_xport *wx);
/* Lines of connection counters for the text summary (connection-oriented transports). */
void wx_text(struct worker_xport *wx);
void wx_close(struct worker_xport *wx);

#endif
