/* SPDX-License-Identifier: Apache-2.0
 * tally_verbs.h — RDMA verbs transport (tally_xport_ops) over RC queue pairs set up with
 * rdma_cm (librdmacm): the client side for worker sessions and a listening side for an
 * appliance. Messages are the protocol's packets (64-byte header + payload).
 *
 * Each connection is one RC QP between a worker and one appliance core (the core index
 * travels in the connect request). Both ends register, once per connection, a ring of
 * landing slots (page-aligned, hugepage-backed where the system has free hugepages) that
 * the peer may RDMA WRITE into, and a staging ring to send from. A packet goes out as one
 * RDMA WRITE_WITH_IMM of header + payload into the peer's next landing slot; the receiver
 * finds the slot from its own in-order receive count, hands the bytes to the rx callback
 * (the engine or the client session sums or copies them there), and returns the slot as a
 * credit: the 32-bit immediate of every message carries the sender's cumulative count of
 * slots it has consumed, and an explicit zero-length credit message goes out when half a
 * ring is unreported. A message without credit waits in the sender's staging ring (twice
 * the landing ring) and is posted when credits return; only a full staging ring drops it
 * (counted: tx_no_credit; the protocols above retransmit). No slot is ever overwritten
 * before its receiver is done with it.
 *
 * The datapath (send, poll with timeout 0) posts work requests and polls one completion
 * queue: no lock, allocation or syscall. Connection setup, teardown and blocking waits
 * (poll with a timeout: a completion channel) are the control path.
 *
 * An instance is used by one thread.
 */
#ifndef TALLY_XPORT_VERBS_H
#define TALLY_XPORT_VERBS_H

#include <stddef.h>
#include <stdint.h>

#include "tally_xport.h"
#include "tally_xport_reg.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TALLY_VERBS_MAX_CORES 256
#define TALLY_VERBS_MAX_CONNS 1024
#define TALLY_VERBS_MAX_SLOTS 4096
/* tally_addr.cookie of a verbs peer: this tag, the connection's generation and index. */
#define TALLY_VERBS_COOKIE_TAG 0x5645000000000000ull /* "VE" */

struct tally_verbs;
struct tally_auth;

struct tally_verbs_cfg {
	const char *host;      /* client: appliance address; listen: local address (required:
				* rdma_cm binds to the device that owns it) */
	uint16_t port;         /* rdma_cm port (TCP port space), default TALLY_DEFAULT_PORT */
	int listen;            /* 0 client, 1 listen */
	uint16_t ncores;       /* listen: cores a request may name (required); client: upper
				* bound on the core index (default TALLY_VERBS_MAX_CORES) */
	uint32_t slots;        /* landing slots per connection and direction, a power of two,
				* default 128 (the staging ring has twice as many: a burst
				* waits there for credits instead of being dropped) */
	int gid_index;         /* < 0 (default): rdma_cm picks the GID of `host`; else that
				* index is checked against it and a mismatch is an error naming
				* the right index */
	uint32_t timeout_ms;   /* client: address/route resolution and connect, default 2000 */
	uint32_t max_conns;    /* listen: connections at once, default 256 */
	int busy_poll_us;      /* poll() with a timeout spins on the CQ this long before it
				* blocks on the completion channel: 0 default (50 with at least
				* 4 CPUs in the affinity mask, else off), < 0 off, at most 10000.
				* Programs apply TALLY_VERBS_BUSY_POLL_US (0 = off) here at their
				* edge (tally_verbs_setting). Spinning saves
				* the interrupt and wake-up of every completion where the peer runs
				* on another CPU. */
	int per_core;          /* listen: 0 one instance for every core (tally-udpd), else
				* TALLY_VERBS_LISTENER or TALLY_VERBS_CORE (see below) */
	/* Authentication at connection setup (verbs_auth.h; THREAT_MODEL.md says why an
	 * authenticated RC QP may skip per-packet MACs and what it does not protect).
	 * Client: with auth_key (32 bytes, copied at create) every connect request names
	 * (auth_job, auth_rank) with a fresh nonce under that key, and the appliance's accept
	 * must prove the same key; the session above then neither signs nor expects per-packet
	 * MACs (tally_client_cfg.auth = 0). NULL: a plain (v1) connect, per-packet MACs stay.
	 * Listen: auth_lookup gives the GMAC context of a job's key on the engine behind `core`
	 * (on the thread that polls this instance; NULL: no such job or it has no key). An
	 * authenticated request is checked against it (tag, replayed nonce, clock window) before
	 * anything is allocated, and its connection's tally_addr carries conn_authed, job and
	 * rank. No callback: authenticated requests are refused (the appliance wants
	 * per-packet MACs on verbs too). */
	const uint8_t *auth_key;
	uint32_t auth_job, auth_rank;
	struct tally_auth *(*auth_lookup)(void *arg, uint32_t core, uint32_t job_id);
	void *auth_arg;
	int32_t mr_cache;      /* client: result buffers kept registered (least recently used
				* evicted): 0 default 64, < 0 none (placement off), at most 4096;
				* programs apply TALLY_VERBS_MR_CACHE (0 = off) here */
	int auth_packet;       /* client: with auth_key, keep per-packet MACs (a plain connect:
				* TALLY_VERBS_AUTH=packet at the program's edge) */
	const struct tally_xport_fault *fault; /* test builds only (tally_xport_reg.h) */
};

/* A program's environment setting, applied to cfg at its edge (the library reads no
 * environment): TALLY_VERBS_BUSY_POLL_US (0..10000, 0 = off), TALLY_VERBS_MR_CACHE
 * (0..4096, 0 = no placement), TALLY_VERBS_AUTH (setup | packet). 0, or -EINVAL with a
 * message naming the variable. */
int tally_verbs_setting(struct tally_verbs_cfg *cfg, const char *name, const char *value,
			char *err, size_t errlen);

struct tally_verbs_stats {
	uint64_t tx_pkts, tx_bytes, tx_credit_msgs;
	uint64_t tx_no_credit;   /* dropped: staging full (the peer returned no credit in time) */
	uint64_t tx_not_conn;    /* dropped: no live connection to that peer/core */
	uint64_t tx_errors;      /* ibv_post_send failed */
	uint64_t rx_pkts, rx_bytes, rx_credit_msgs;
	uint64_t rx_bad_len;     /* dropped: a write shorter than a header or longer than a slot */
	uint64_t rx_bad_credit;  /* a peer returned credits it never had: connection dropped */
	uint64_t conns_up, conns_down, conns_rejected, reconnects;
	uint64_t wc_errors;      /* completions with an error status (QP broken) */
	uint64_t stall_probes;   /* zero-length writes to a peer that returned no credit */
	uint64_t stalls_dead;    /* connections dropped: such a write never completed */
	uint64_t up_by_packet;   /* listener: accepted connections brought up by their first
				  * packet before rdma_cm's ESTABLISHED */
	uint64_t cq_waits;       /* poll() calls that blocked on the completion channel */
	uint64_t spins, spin_hits; /* busy-poll spins started / ended by a completion */
	/* authentication at setup (verbs_auth.h): connections authenticated (both ends), and
	 * connect requests refused for: no key for the job (or no such job), a tag that does
	 * not verify, a nonce seen before, a clock outside the window, setup auth off on the
	 * listener; client: accepts whose tag did not verify (not the job's appliance/key) */
	uint64_t conns_authed;
	uint64_t auth_no_key, auth_bad_mac, auth_replay, auth_stale, auth_off;
	uint64_t auth_bad_accept;
	/* RESULTs placed in the worker's registered buffer (verbs_place.h). Client:
	 * advertisements sent, RESULTs that landed placed (header + record only) or with their
	 * payload (copied by the session), placement records naming memory we never
	 * registered (dropped), registrations made, evicted (LRU), failed. Listener:
	 * advertisements taken, refused (malformed, out of range, another rank's), RESULTs
	 * written into the advertised buffer, RESULTs to verbs peers sent with their payload in
	 * the landing slot, and of those the ones whose bytes fell outside the advertisement. */
	uint64_t adv_sent, rx_placed, rx_results_copied, rx_bad_place;
	uint64_t mr_regs, mr_evictions, mr_fail;
	uint64_t adv_ok, adv_refused, results_placed, results_copied, place_out_of_range;
};

void tally_verbs_cfg_defaults(struct tally_verbs_cfg *cfg);

/* Called for each received packet (buf valid only during the call). from->core is the
 * appliance core of the connection; from->ip/port the peer's address and rdma_cm port;
 * from->cookie names the connection (TALLY_VERBS_COOKIE_TAG set). */
typedef void (*tally_verbs_rx_fn)(void *arg, const void *buf, size_t len,
				  const struct tally_addr *from);

/* Listen: binds and listens. Client: connects to core 0 now (so a bad address, no device or
 * no listener fails here), other cores on first use. Returns NULL with *err a negative errno
 * and a message that names the setting to change in errbuf. */
struct tally_verbs *tally_verbs_create(const struct tally_verbs_cfg *cfg, tally_verbs_rx_fn rx,
				       void *rx_arg, int *err, char *errbuf, size_t errlen);
void tally_verbs_destroy(struct tally_verbs *v);
void tally_verbs_set_rx(struct tally_verbs *v, tally_verbs_rx_fn rx, void *rx_arg);
/* Client: a RESULT whose payload the appliance wrote straight into the buffer advertised
 * for its key and round (tally_xport_ops.advertise): hdr/hlen the header as landed, payload
 * inside our registered memory. Without it nothing is advertised. rx_arg as set_rx's. */
typedef void (*tally_verbs_rx_placed_fn)(void *arg, const void *hdr, size_t hlen,
					 const void *payload, size_t plen);
void tally_verbs_set_rx_placed(struct tally_verbs *v, tally_verbs_rx_placed_fn fn);

/* The ops to hand to tally_client_create()/tally_engine_create() with `v` as context. */
const struct tally_xport_ops *tally_verbs_ops(void);

/* Whether an address is a verbs peer's (for a transport multiplexer). */
int tally_verbs_is_addr(const struct tally_addr *a);

/* "rdma://HOST:PORT", "HOST:PORT" or "HOST" (port stays as given). 0 or -EINVAL. */
int tally_verbs_parse_addr(const char *s, char *host, size_t hostlen, uint16_t *port);

/* 1 when this client authenticates its connections at setup (cfg.auth_key given, and
 * not cfg.auth_packet, i.e. TALLY_VERBS_AUTH is not "packet"): the client session above must then neither sign nor
 * expect per-packet MACs (tally_client_cfg.auth = 0). TALLY_VERBS_AUTH=packet keeps
 * per-packet MACs on verbs (a plain connect; the session signs every packet). */
int tally_verbs_setup_authed(const struct tally_verbs *v);

/* Live connections. */
unsigned tally_verbs_conns(const struct tally_verbs *v);
const struct tally_verbs_stats *tally_verbs_stats(const struct tally_verbs *v);
/* The last error's text (connection events included), or "". */
const char *tally_verbs_strerror(const struct tally_verbs *v);

/* ---- Per-core listening (tallyd: each lcore polls the connections of its core) ---------
 * One listener (per_core = TALLY_VERBS_LISTENER) binds cfg.host:port and owns no connection;
 * one instance per core (per_core = TALLY_VERBS_CORE, binds nothing; max_conns is that
 * core's) owns its rdma_cm event channel, PD, CQ and the QPs of its core. The listener's
 * thread (tally_verbs_listen_poll) checks a connect request's core, moves its cm_id to that
 * core's event channel (rdma_migrate_id) and hands it to `fn`, which queues it for the core
 * (a single-producer/single-consumer ring: no lock). The core accepts it on its own thread
 * (tally_verbs_accept: QP on its CQ, rings registered) and from then on reads that
 * connection's events from its own channel (tally_verbs_cm_poll). Destroy the listener
 * first, then refuse what is still queued (tally_verbs_refuse), then the core instances. */
#define TALLY_VERBS_LISTENER TALLY_XPORT_LISTENER
#define TALLY_VERBS_CORE TALLY_XPORT_CORE

/* Requests travel as the registry's struct tally_xport_req (tally_xport_reg.h): the core
 * they name, and this transport's cm_id and private data (72 bytes) as its data. fn queues
 * req for core req->core (copy it): 0, or a negative errno (the request is refused as "the
 * appliance has no free connection"). On the listener's thread. */
void tally_verbs_set_handoff(struct tally_verbs *l, tally_xport_handoff_fn fn, void *arg);
/* Makes v (per_core = TALLY_VERBS_CORE) the instance of core `core` and sets up its PD and
 * CQ on the listener's device. 0 or -errno (tally_verbs_strerror(v) says why). */
int tally_verbs_attach(struct tally_verbs *l, unsigned core, struct tally_verbs *v);
/* Listener's thread: every pending rdma_cm event, requests handed off; never blocks.
 * Returns events handled or -errno. */
int tally_verbs_listen_poll(struct tally_verbs *l);
/* Core's thread: accept (or refuse, counted) a request handed to this instance. */
void tally_verbs_accept(struct tally_verbs *v, const struct tally_xport_req *req);
/* Refuse a request nobody will accept (shutdown). */
void tally_verbs_refuse(const struct tally_xport_req *req);
/* Core's thread, datapath: poll the CQ (packets to the rx callback, credits returned) without
 * any syscall; returns completions handled (sends included). */
int tally_verbs_poll_burst(struct tally_verbs *v);
/* Core's thread, slow path: the connections' rdma_cm events (established, disconnected), a
 * non-blocking read. Returns events handled or -errno. */
int tally_verbs_cm_poll(struct tally_verbs *v);

#ifdef __cplusplus
}
#endif
#endif
