/* SPDX-License-Identifier: Apache-2.0
 * worker_xport.h — the transport under tally-worker's client session: kernel UDP, or DPDK
 * (net_memif etc.) where the build has it.
 */
#ifndef WORKER_XPORT_H
#define WORKER_XPORT_H

#include <stddef.h>
#include <stdint.h>

#include "tally_client.h"
#include "tally_xport.h"

enum wx_kind { WX_UDP = 0, WX_DPDK = 1, WX_VERBS = 2 };

struct wx_opts {
	enum wx_kind kind;
	const char *host;      /* appliance address */
	uint16_t base_port;
	const char *bind;      /* udp: local address */
	int gso, gro;          /* udp offloads */
	int busy_poll_us;      /* udp: 0 transport default, < 0 off */
	const char *eal_args;  /* dpdk: EAL arguments, space separated */
	const char *local_ip;  /* dpdk: our address, ADDR/LEN */
	const char *dpdk_port; /* dpdk: port name (default: the first port) */
	int gid_index;         /* verbs: -1 rdma_cm chooses, else checked */
	const uint8_t *auth_key; /* verbs: the job key (NULL: none): connections authenticated
				  * at setup as (auth_job, auth_rank) unless TALLY_VERBS_AUTH=packet */
	uint32_t auth_job, auth_rank;
};

struct worker_xport {
	enum wx_kind kind;
	const struct tally_xport_ops *ops;
	void *ctx;
	int setup_authed;      /* verbs: connections authenticated at setup: no per-packet MAC */
};

/* Open the transport; 0, or a negative errno with a message in err. */
int wx_open(const struct wx_opts *o, struct worker_xport *wx, char *err, size_t errlen);
/* Deliver received packets to the session from now on. */
void wx_attach(struct worker_xport *wx, struct tally_client *c);
/* Send what is queued (after BYE). */
void wx_flush(struct worker_xport *wx);
/* Print the transport's counters as JSON members (",\"udp\":{...}"), nothing if none. */
void wx_json(struct worker_xport *wx);
/* A line of transport counters for the text summary (verbs only; nothing otherwise). */
void wx_text(struct worker_xport *wx);
void wx_close(struct worker_xport *wx);

#ifdef TALLY_WORKER_DPDK
/* The DPDK side (worker_xport_dpdk.c), only in builds with the DPDK client transport. */
int wx_dpdk_open(const struct wx_opts *o, struct worker_xport *wx, char *err, size_t errlen);
void wx_dpdk_attach(struct worker_xport *wx, struct tally_client *c);
void wx_dpdk_flush(struct worker_xport *wx);
void wx_dpdk_json(struct worker_xport *wx);
void wx_dpdk_close(struct worker_xport *wx);
#endif

#ifdef TALLY_WORKER_VERBS
/* The verbs side (worker_xport_verbs.c), only in builds with libibverbs and librdmacm. */
int wx_verbs_open(const struct wx_opts *o, struct worker_xport *wx, char *err, size_t errlen);
void wx_verbs_attach(struct worker_xport *wx, struct tally_client *c);
void wx_verbs_json(struct worker_xport *wx);
void wx_verbs_text(struct worker_xport *wx);
void wx_verbs_close(struct worker_xport *wx);
#endif

#endif
