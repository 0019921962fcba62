/* SPDX-License-Identifier: Apache-2.0
 * tally_xport.h — the small interface between the transport-independent dataplane (engine,
 * client session) and a transport (in-memory test network, kernel UDP, DPDK, verbs).
 */
#ifndef TALLY_XPORT_H
#define TALLY_XPORT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A peer address, opaque to the engine, which stores the one a JOIN came from and hands
 * it back for every packet to that rank. A client addresses an appliance core by `core`. */
struct tally_addr {
	uint32_t core;    /* appliance core index (client → appliance) */
	uint32_t ip;      /* IPv4, network byte order (transports that use it) */
	uint16_t port;    /* UDP port, network byte order */
	uint8_t mac[6];
	uint64_t cookie;  /* transport-private (in-memory network: node id) */
	/* Set by a transport that authenticated this peer's connection at setup (verbs RC QP,
	 * tally_verbs.h auth_*) as (conn_job, conn_rank) under the job's key: the engine takes
	 * that identity's packets without a per-packet MAC, refuses any other identity on it
	 * (conn_identity) and sends to it unsigned. 0 everywhere else. */
	uint8_t conn_authed;
	uint32_t conn_job;
	uint32_t conn_rank;
};

struct tally_xport_ops {
	/* Send one packet: the 64-byte encoded header, then `len` payload bytes (payload may
	 * be NULL when len is 0). The payload buffer stays valid and unchanged until the
	 * engine's slot holding it is reused for round r+2, so a transport may reference it
	 * (zero copy) instead of copying; one that does must implement buf_busy below so the
	 * reuse waits for its references to go. Returns 0, or a negative errno (the packet is
	 * dropped; protocols above retransmit). Never blocks. */
	int (*send)(void *ctx, const struct tally_addr *to, const uint8_t *hdr,
		    const void *payload, size_t len);
	/* Monotonic time in nanoseconds (virtual time in simulations). */
	uint64_t (*now_ns)(void *ctx);
	/* Client sessions only: wait up to timeout_ns for packets and deliver each with
	 * tally_client_rx(); returns how many were delivered or a negative errno. A
	 * simulation advances its virtual clock here. */
	int (*poll)(void *ctx, uint64_t timeout_ns);

	/* ---- Optional, engine side: zero-copy RESULT buffers with a reference count. ----
	 * A transport that references RESULT payloads (DPDK extbufs; kernel UDP in listen mode,
	 * whose queued RESULTs are gathered from these buffers by sendmmsg's iovecs) sets
	 * buf_size > 0: the engine then keeps buf_size bytes of transport state per RESULT
	 * buffer (one per chunk and parity), allocated with the key from the engine's arena, zeroed, 16-aligned.
	 * buf_init (optional) is called once per buffer when the key is created (on the engine's core:
	 * no syscall, no lock; e.g. set up a refcounted descriptor, cache the IOVA). RESULTs
	 * are then sent with send_buf (as send, naming the buffer's state). buf_busy returns
	 * non-zero while a sent copy still references the buffer (queued, not yet transmitted):
	 * the engine then refuses to start a new round in that buffer (TALLY_R_TOO_EARLY, the
	 * worker retries) and keeps a removed key's memory until no buffer is busy. A copying
	 * transport (simulations) leaves all four zero. */
	size_t buf_size;
	void (*buf_init)(void *ctx, void *buf, const void *payload, size_t len);
	int (*send_buf)(void *ctx, const struct tally_addr *to, const uint8_t *hdr,
			const void *payload, size_t len, void *buf);
	int (*buf_busy)(void *ctx, const void *buf);

	/* ---- Optional, client side: RESULTs placed straight into the caller's buffer. ----
	 * Called when round `round` of `key` starts with its output [out, out + len): a
	 * transport that can let the appliance write RESULT payloads there (verbs: RDMA WRITE
	 * into registered memory, tally_verbs.h) says so to core `to->core` and then delivers
	 * such a RESULT with its payload already in place (tally_client_rx_placed). 0, or a
	 * negative errno (nothing advertised: RESULTs come the usual way). NULL: never.
	 * len 0: the round is over, forget its buffer (it is not advertised again after a
	 * reconnect); out NULL: it finished (the appliance has sent all it will place), else
	 * it failed (the appliance is told to forget it too). */
	int (*advertise)(void *ctx, const struct tally_addr *to, uint32_t job, uint32_t rank,
			 uint32_t key, uint32_t round, void *out, size_t len);

	/* ---- Optional, client side: what the network said about a core's address. ----
	 * -ECONNREFUSED when, since the last call, the host at `core`'s address answered that
	 * nothing listens there (kernel UDP: an ICMP port unreachable on the connected socket),
	 * else 0; the call clears it. The session asks only while it waits for a JOIN's answer
	 * (tally_client_join: ends it within TALLY_CLIENT_REFUSED_GRACE_MS; a rejoin after a
	 * restart goes back to probing): during a run an ICMP says nothing that the liveness
	 * probes do not. NULL: never tells. */
	int (*peer_error)(void *ctx, uint32_t core);
	/* Optional, client side: one sentence on what this host's receive path dropped before
	 * the session saw it, with the setting to change (kernel UDP: datagrams the sockets'
	 * receive buffers overflowed, net.core.rmem_max), "" when nothing; returns its length.
	 * Asked when an operation gives up (its error says whether drops explain it), never on
	 * the datapath. NULL: cannot tell. */
	size_t (*rx_loss)(void *ctx, char *buf, size_t len);
};

#ifdef __cplusplus
}
#endif
#endif
