/* SPDX-License-Identifier: Apache-2.0
 * tally_udp.h — kernel UDP transport (tally_xport_ops) for client sessions, and a
 * listening mode for a software appliance (tests, fallback).
 *
 * Client mode: one connected socket per appliance core (destination port base + core),
 * opened on first use, so NIC flow rules / RSS on the appliance steer each core's traffic.
 * send() queues packets per socket and sendmmsg()s them in batches (flushed when a batch is
 * full and at every poll()); poll() recvmmsg()s every socket and hands each datagram to the
 * rx callback (e.g. tally_client_rx). UDP GSO (UDP_SEGMENT) and GRO (UDP_GRO) are used where
 * the kernel has them and the configuration asks for them, and switched off cleanly (counted,
 * logged once in the error text) when the kernel refuses.
 *
 * Listen mode: sockets bound to base + core for core < ncores; send() goes to the address in
 * `to` (ip/port, as learned from a received packet) through socket `to->core`.
 *
 * An instance is used by one thread.
 */
#ifndef TALLY_XPORT_UDP_H
#define TALLY_XPORT_UDP_H

#include <stddef.h>
#include <stdint.h>

#include "tally_xport.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TALLY_UDP_MAX_CORES 256

struct tally_udp;

struct tally_udp_cfg {
	const char *host;      /* client: appliance IPv4 address or name; listen: bind address
				* (NULL or "" = any) */
	uint16_t base_port;    /* default TALLY_DEFAULT_PORT */
	uint16_t ncores;       /* listen: sockets to bind (required); client: upper bound on the
				* core index (default TALLY_UDP_MAX_CORES) */
	int listen;            /* 0 client, 1 listen */
	const char *bind_host; /* client: local address to bind (NULL = any) */
	int sock_buf;          /* SO_SNDBUF/SO_RCVBUF bytes, default 32 MiB (FORCE when root) */
	uint32_t batch;        /* sendmmsg/recvmmsg batch, default 64, max 1024 */
	int gso;               /* UDP_SEGMENT on send: 0 off (default), 1 on when the kernel has it.
				* Off by default: over a veth the kernel hands a DPDK AF_PACKET
				* appliance one 64 KB super-frame that it cannot take (measured:
				* every chunk times out), while a kernel receiver or a NIC with
				* UDP segmentation offload segments it correctly. Clients switch
				* it on by the appliance's JOIN_OK (TALLY_CAP_GSO,
				* tally_udp_set_gso). In listen mode
				* (tally-udpd: on by default) each flush is ordered by destination
				* first, so RESULTs queued rank by rank still join per worker. */
	int gro;               /* UDP_GRO on receive: 0 off, 1 on when available (default 1) */
	int busy_poll_us;      /* before blocking in ppoll, spin on recvmmsg(MSG_DONTWAIT) this
				* long, yielding the CPU between looks (sched_yield: threads
				* waiting for this CPU run first): 0 default
				* (TALLY_UDP_BUSY_POLL_DEFAULT_US, both modes), < 0 off, at most
				* TALLY_UDP_BUSY_POLL_MAX_US. A RESULT (or, listening, a push)
				* that lands within the spin skips the sleep/wake-up (scheduler
				* latency, measured 0.1-8 ms on a loaded host). Programs apply
				* the environment variable TALLY_UDP_BUSY_POLL_US (0 = off) here
				* at their edge (tally_udp_busy_setting, or tally_xport_opts_env). */
};

#define TALLY_UDP_BUSY_POLL_DEFAULT_US 50
#define TALLY_UDP_BUSY_POLL_MAX_US 10000

struct tally_udp_stats {
	uint64_t tx_pkts, tx_bytes, tx_calls, tx_errors, tx_gso_sends;
	uint64_t rx_pkts, rx_bytes, rx_calls, rx_gro_batches;
	uint64_t rx_truncated;    /* datagrams larger than the receive buffer (dropped) */
	uint64_t rx_sock_drops;   /* datagrams the kernel dropped at the sockets (receive buffer
				   * full: SO_MEMINFO), as of the last rx_loss call */
	uint64_t refused;         /* client: ICMP port unreachable reports taken by a JOIN's
				   * wait (tally_xport_ops.peer_error) */
	uint64_t spins, spin_hits; /* busy-poll spins started / ended by a datagram */
	uint64_t spin_ns;          /* time spent spinning */
	uint64_t blocks, block_ns; /* ppoll calls that slept, and the time spent in them */
};

/* Fills defaults for every zero field. */
void tally_udp_cfg_defaults(struct tally_udp_cfg *cfg);

/* Called for each received datagram (buf valid only during the call). from->core is the
 * socket (appliance core) it arrived on; from->ip/port are the sender's. */
typedef void (*tally_udp_rx_fn)(void *arg, const void *buf, size_t len,
				const struct tally_addr *from);

/* TALLY_UDP_BUSY_POLL_US's value (0..TALLY_UDP_BUSY_POLL_MAX_US, 0 = off) as busy_poll_us
 * (off: -1). 0, or -EINVAL with a message naming the variable. */
int tally_udp_busy_setting(const char *value, int *busy_poll_us, char *errbuf, size_t errlen);

/* Resolves the host, opens (listen mode: binds) the sockets. Returns NULL on failure with
 * *err set to a negative errno (-EINVAL for a busy-poll setting out of range) and a message ("udp: bind 10.0.0.1:9170: Address in use")
 * in errbuf. */
struct tally_udp *tally_udp_create(const struct tally_udp_cfg *cfg, tally_udp_rx_fn rx,
				   void *rx_arg, int *err, char *errbuf, size_t errlen);
void tally_udp_destroy(struct tally_udp *u);

/* Set or change the rx callback (e.g. once the client session exists). */
void tally_udp_set_rx(struct tally_udp *u, tally_udp_rx_fn rx, void *rx_arg);

/* The ops to hand to tally_client_create()/tally_engine_create() with `u` as context. */
const struct tally_xport_ops *tally_udp_ops(void);

/* Switch UDP_SEGMENT on or off for the sends from now on (a client whose appliance's JOIN_OK
 * says whether it takes GSO, TALLY_CAP_GSO). No syscall: the segment size rides each send's
 * control message. 0; -EOPNOTSUPP to switch on after the kernel refused GSO on this path;
 * -EINVAL to switch on in listen mode when created without GSO. Same thread as the sends. */
int tally_udp_set_gso(struct tally_udp *u, int on);
/* 1 while sends use GSO (0 after a refusal even if asked). */
int tally_udp_gso(const struct tally_udp *u);

/* Send everything queued. 0 or the first negative errno (the packets are dropped). */
int tally_udp_flush(struct tally_udp *u);

const struct tally_udp_stats *tally_udp_stats(const struct tally_udp *u);
/* The last error's text, or "". */
const char *tally_udp_strerror(const struct tally_udp *u);

#ifdef __cplusplus
}
#endif
#endif
