/* SPDX-License-Identifier: Apache-2.0
 * tally_dpdk.h — the DPDK transport: port setup, buffered transmit, the engine-side
 * tally_xport_ops (one per appliance lcore), and the client-side tally_xport_ops that lets a
 * worker run the client session over a DPDK port (e.g. the client side of net_memif).
 *
 * Engine side, zero copy both ways: the engine sums straight from the received mbuf's
 * payload, and each packet it sends is a small header mbuf (Ethernet + IPv4 + UDP + Tally
 * header) chained to an mbuf that references the engine's payload as an external buffer.
 * Each RESULT buffer of the engine has its own refcounted shared info (struct
 * tally_dpdk_xbuf, kept by the engine with the key: tally_xport_ops.buf_size): the engine
 * holds one reference for the key's life, every queued copy one more, so the engine sees a
 * copy still waiting in a TX queue (buf_busy) and does not start round r+2 in that buffer
 * until it left. Its IOVA is found once when the key is created, never per send. Small
 * payloads (control replies, possibly on the engine's stack) are copied into the header
 * mbuf instead.
 *
 * Every function is used by one lcore (thread) at a time per object; no locks.
 */
#ifndef TALLY_XPORT_DPDK_H
#define TALLY_XPORT_DPDK_H

#include <stddef.h>
#include <stdint.h>

#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "tally_client.h"
#include "tally_pkt.h"
#include "tally_xport.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TALLY_DPDK_BURST 32
#define TALLY_DPDK_MAX_PORTS 8
#define TALLY_DPDK_TXBUF 64          /* packets buffered per port before a forced flush */
#define TALLY_DPDK_COPY_MAX 256      /* payloads up to this size are copied, not attached */

/* ---- ports ---- */

struct tally_dpdk_port_cfg {
	uint16_t nb_rxq, nb_txq;
	uint16_t rx_desc, tx_desc;       /* 0: 1024 */
	struct rte_mempool **rx_pools;   /* nb_rxq pools (NUMA-local to the port) */
	uint32_t mtu;                    /* 0: leave alone; else set if the device allows it */
	const uint8_t *mac;              /* NULL: keep the device's address */
	int rss;                         /* spread RX over the queues with RSS if offered */
	int rx_intr;                     /* ask for RX queue interrupts (intr_conf.rxq); a
					  * device that refuses them is set up without */
};

/* net_af_packet ports: the PMD does not report frames its kernel ring dropped (imissed
 * stays 0). tally_dpdk_afp_iface finds the interface in a vdev spec ("net_af_packet0,
 * iface=veth0,..."): 0, or -ENOENT (not an af_packet vdev). tally_dpdk_afp_drops adds the
 * drops since the last call of every packet socket of this process bound to iface (the
 * kernel resets them on read: keep the sum): the number of sockets, or -ENODEV / -ENOENT.
 * Control thread only (it makes syscalls). */
int tally_dpdk_afp_iface(const char *devargs, char *iface, size_t len);
int tally_dpdk_afp_drops(const char *iface, uint64_t *drops);

/* Port id of a device named as EAL knows it ("0000:3b:00.0", "net_memif0"). 0 or -ENODEV. */
int tally_dpdk_port_find(const char *name, uint16_t *port_id);

/* Configure queues, set MTU/MAC, start the port. On failure returns a negative errno and
 * writes a sentence saying what failed into err. Notes that are not failures (MTU left
 * alone, RSS not offered) go to the log. */
int tally_dpdk_port_setup(uint16_t port_id, const struct tally_dpdk_port_cfg *cfg,
			  char *err, size_t errlen);

/* After setup: 1 when every RX queue of the started port has an interrupt event fd the
 * PMD can arm (rte_eth_dev_rx_intr_enable; -ENOTSUP counts as always armed: net_tap's
 * event is its queue's fd), so an idle lcore may block on it; else 0. */
int tally_dpdk_port_rx_intr(uint16_t port_id, uint16_t nb_rxq);

/* Steer UDP destination port base + core to RX queue queue_of_core[core] (skipping cores
 * with queue_of_core[core] == UINT16_MAX) with rte_flow. Returns the number of rules
 * installed, or a negative errno and a reason in why (the device has no such flow
 * support): the caller then dispatches in software. */
int tally_dpdk_steer(uint16_t port_id, uint16_t base_port, const uint16_t *queue_of_core,
		     uint16_t ncores, char *why, size_t whylen);

/* ---- buffered transmit (one per lcore; a queue on each of its ports) ---- */

struct tally_dpdk_txport {
	uint16_t port_id, queue;
	struct tally_pkt_ifaddr ifa;
	struct rte_mempool *copy_pool;   /* set when the device cannot send mbuf chains: the
					  * payload is copied into one mbuf from this pool */
	struct rte_ring *via;            /* set when this lcore has no TX queue on the port:
					  * finished frames go to the ring of an lcore that has
					  * one (it transmits them with tally_dpdk_tx_enqueue) */
	uint16_t n;
	uint64_t deadline;               /* TSC: flush by then */
	struct rte_mbuf *buf[TALLY_DPDK_TXBUF];
};

struct tally_dpdk_tx_stats {
	uint64_t tx_pkts, tx_bytes;
	uint64_t relayed;                /* frames handed to another lcore's TX ring */
	uint64_t drops[TALLY_PKT_D_COUNT]; /* TX_FULL, NO_MBUF, RELAY_FULL */
};

struct tally_dpdk_tx {
	uint16_t core;                   /* this lcore's core index: UDP source port base+core */
	uint16_t nports;
	uint16_t ip_id;
	uint64_t flush_cycles;           /* TSC cycles a buffered packet may wait */
	struct rte_mempool *hdr_pool;    /* small mbufs: headers and extbuf carriers */
	struct rte_mbuf_ext_shared_info shinfo; /* payloads sent with plain send (no state) */
	struct tally_dpdk_tx_stats st;
	struct tally_dpdk_txport port[TALLY_DPDK_MAX_PORTS];
};

/* hdr_pool's data room must hold RTE_PKTMBUF_HEADROOM + 42 + the header with its auth block
 * (TALLY_HDR_MAX) + TALLY_DPDK_COPY_MAX. */
#define TALLY_DPDK_HDR_ROOM (RTE_PKTMBUF_HEADROOM + TALLY_PKT_HDRS_LEN + TALLY_HDR_MAX + \
			     TALLY_DPDK_COPY_MAX)

void tally_dpdk_tx_init(struct tally_dpdk_tx *tx, uint16_t core, struct rte_mempool *hdr_pool,
			uint32_t flush_us);
/* Does the device transmit mbuf chains (RTE_ETH_TX_OFFLOAD_MULTI_SEGS)? */
int tally_dpdk_port_multiseg(uint16_t port_id);
/* Add a port (index = order of calls). 0 or -ENOSPC. When the device cannot transmit
 * chains, give tx->port[i].copy_pool a pool whose mbufs hold a whole frame. */
int tally_dpdk_tx_add_port(struct tally_dpdk_tx *tx, uint16_t port_id, uint16_t queue,
			   const struct tally_pkt_ifaddr *ifa);
/* Queue a finished frame for port index pi (takes the mbuf; counts and frees it when the
 * buffer stays full). */
void tally_dpdk_tx_enqueue(struct tally_dpdk_tx *tx, uint16_t pi, struct rte_mbuf *m);
/* Transmit what is buffered: every port when force, else those past their deadline.
 * Unsent packets stay buffered for the next call. */
void tally_dpdk_tx_flush(struct tally_dpdk_tx *tx, int force);
/* Packets still buffered (drain). */
unsigned tally_dpdk_tx_pending(const struct tally_dpdk_tx *tx);

/* The transport's state per engine RESULT buffer. A buffer that crosses into a page not
 * IOVA-next to it goes out as two segments from split on (IOVA as PA only). */
struct tally_dpdk_xbuf {
	struct rte_mbuf_ext_shared_info shinfo; /* 1 (the engine's) + copies not yet freed */
	rte_iova_t iova;                 /* RTE_BAD_IOVA: looked up per send (fallback) */
	rte_iova_t iova2;                /* of payload + split */
	uint32_t split;                  /* 0: one IOVA-contiguous piece */
};

/* The engine's transport: ctx is a struct tally_dpdk_tx; tally_addr.cookie is the port
 * index a peer was heard on, mac/ip/port its addresses. */
extern const struct tally_xport_ops tally_dpdk_engine_ops;

/* Fill the peer address of a parsed UDP frame heard on port index pi. */
void tally_dpdk_addr_from(struct tally_addr *a, const struct tally_pkt_parsed *p, uint16_t pi);

/* Answer an ARP request or ICMP echo in place and queue it (m classified as such). */
void tally_dpdk_answer(struct tally_dpdk_tx *tx, uint16_t pi, struct rte_mbuf *m,
		       enum tally_pkt_class cls);

/* ---- client side (a worker's session over DPDK) ---- */

struct tally_dpdk_client_cfg {
	uint16_t port_id, rxq, txq;
	struct rte_mempool *pool;        /* mbufs for transmit (data room >= 42+64+chunk) */
	uint32_t local_ip, local_mask;   /* network order */
	uint16_t local_port;             /* host order; 0: 9169 */
	uint32_t server_ip;              /* network order */
	uint16_t base_port;              /* host order; 0: TALLY_DEFAULT_PORT */
	uint8_t server_mac[6];           /* used when server_mac_set, else resolved by ARP */
	int server_mac_set;
	uint32_t flush_us;               /* TX deadline, default 5 */
	uint16_t nb_rxq;                 /* poll RX queues rxq..rxq+nb_rxq-1 (0: 1). On
					  * net_memif each appliance core answers on its own
					  * queue pair, so open and poll as many as it has cores */
	uint16_t nb_txq;                 /* send on TX queues txq..txq+nb_txq-1 (0: 1, at most
					  * TALLY_DPDK_MAX_PORTS): a packet for appliance core c
					  * on queue txq + c - core_base when that is one of
					  * them, else on txq (a memif peer's queue j is polled
					  * by its core core_base + j: no software dispatch) */
	uint16_t core_base;
};

struct tally_dpdk_client_stats {
	uint64_t rx_pkts, rx_bytes, tx_pkts, tx_bytes;
	uint64_t arp_replies, icmp_replies, delivered;
	uint64_t drops[TALLY_PKT_D_COUNT];
};

struct tally_dpdk_client;

/* NULL and *err (negative errno) on failure. The port must be started. */
struct tally_dpdk_client *tally_dpdk_client_create(const struct tally_dpdk_client_cfg *cfg,
						   int *err);
void tally_dpdk_client_destroy(struct tally_dpdk_client *x);
/* Where poll() delivers each datagram for our UDP port (e.g. a client session: create it
 * with tally_dpdk_client_ops and x). from->ip is the sender's. */
typedef void (*tally_dpdk_client_rx_fn)(void *arg, const void *buf, size_t len,
					const struct tally_addr *from);
void tally_dpdk_client_set_rx(struct tally_dpdk_client *x, tally_dpdk_client_rx_fn rx, void *arg);
/* ARP for the server's MAC unless configured; 0 or -ETIMEDOUT. */
int tally_dpdk_client_resolve(struct tally_dpdk_client *x, uint32_t timeout_ms);
const struct tally_dpdk_client_stats *tally_dpdk_client_stats(const struct tally_dpdk_client *x);
/* The appliance's MAC (configured or resolved; zero before). */
const uint8_t *tally_dpdk_client_server_mac(const struct tally_dpdk_client *x);

/* send/now_ns/poll over the port; send copies the payload into an mbuf from cfg.pool. */
extern const struct tally_xport_ops tally_dpdk_client_ops;

#ifdef __cplusplus
}
#endif
#endif
