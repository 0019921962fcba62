/* SPDX-License-Identifier: Apache-2.0
 * udp_int.h — internal state of the kernel UDP transport, shared by udp_xport.c (setup,
 * lifecycle, stats), udp_io.c (the packet path: batched send with GSO, flush, recvmmsg
 * with GRO, poll) and udp_sock.c (per-core sockets, error text). Calls go
 * udp_xport.c -> udp_io.c -> udp_sock.c, never back.
 */
#ifndef UDP_UDP_INT_H
#define UDP_UDP_INT_H

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include "tally_udp.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#ifndef SOL_UDP
#define SOL_UDP 17
#endif

#define UDP_SLOT (TALLY_HDR_MAX + TALLY_MAX_PAYLOAD) /* an authenticated header too */
#define UDP_GRO_BUF 65536u
#define UDP_GSO_MAX_BYTES 65000u
#define UDP_GSO_MAX_SEGS 64u
#define UDP_SPIN_RECENT_NS 2000000ull /* busy poll only within 2 ms of traffic */
#define UDP_RX_ROUNDS 4 /* recvmmsg batches per socket per poll, so one socket cannot starve others */

/* The transport's state per engine RESULT buffer (tally_xport_ops.buf_size): how many
 * queued packets still point into it (buf_busy). */
struct udp_xbuf {
	uint32_t queued;
};

/* A queued packet whose payload stays in the engine's RESULT buffer (udp_send_buf): its
 * slot holds the header alone and the send gathers both with an iovec, so a RESULT is not
 * copied into the queue on its way to the kernel. */
struct udp_ref {
	const uint8_t *pl;           /* NULL: the whole packet is in the slot */
	struct udp_xbuf *xb;
	uint32_t hl;                 /* header bytes in the slot */
};

struct udp_sock {
	int fd;
	uint32_t nq;                 /* queued packets */
	uint8_t *slots;              /* batch * UDP_SLOT */
	uint32_t *lens;              /* whole packet, header and payload */
	struct sockaddr_in *dst;     /* listen mode: per-slot destination */
	struct udp_ref *ref;         /* listen mode: per-slot payload reference */
	uint8_t refused;             /* client: the kernel reported ECONNREFUSED (an ICMP port
				      * unreachable) since udp_peer_error last asked */
};

struct tally_udp {
	struct tally_udp_cfg cfg;
	struct sockaddr_in peer;     /* client: appliance address, port = base */
	struct sockaddr_in local;    /* client: bind address (port 0) */
	int has_local;
	tally_udp_rx_fn rx;
	void *rx_arg;
	uint16_t nsocks;             /* entries in socks[] */
	struct udp_sock socks[TALLY_UDP_MAX_CORES];
	struct pollfd pfd[TALLY_UDP_MAX_CORES];
	uint16_t pfd_core[TALLY_UDP_MAX_CORES];
	uint16_t npfd;
	/* receive and GSO send scratch */
	struct mmsghdr *rmsg;
	struct iovec *riov;
	uint8_t *rbuf;
	size_t rbuf_len;
	char *rctl;
	struct mmsghdr *smsg;
	struct iovec *siov;
	char *sctl;
	/* listen mode with GSO: where unsent packets of a destination-grouped flush are
	 * gathered before going back to the queue's front (udp_keep_unsent) */
	uint8_t *sscratch;
	uint32_t *slens;
	struct sockaddr_in *sdst;
	struct udp_ref *sref;
	uint64_t busy_ns;            /* busy-poll budget per wait (0: off) */
	uint64_t busy_until_ns;      /* spin only before this: UDP_SPIN_RECENT_NS after the last
				      * traffic seen (udp_poll), so an idle socket sleeps */
	int active;                  /* a datagram went or came since udp_poll last looked */
	int gso_refused;             /* the kernel refused UDP_SEGMENT once: off for good */
	struct tally_udp_stats st;
	char err[256];
};

#define UDP_CTL_LEN CMSG_SPACE(sizeof(int))

/* udp_sock.c */
void udp_err(struct tally_udp *u, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Open core's socket (listen: bind base + core; client: connect to it). 0 or -errno. */
int udp_open(struct tally_udp *u, uint16_t core);
/* tally_xport_ops.rx_loss: socket receive-buffer drops and truncations, as a sentence. */
size_t udp_rx_loss(void *ctx, char *buf, size_t len);

/* udp_io.c */
int udp_flush_sock(struct tally_udp *u, struct udp_sock *s);
uint64_t udp_now_ns(void *ctx);
int udp_send(void *ctx, const struct tally_addr *to, const uint8_t *hdr, const void *payload,
	     size_t len);
/* tally_xport_ops.send_buf (listen mode): the payload is referenced, not copied, until the
 * packet leaves (buf_busy says so meanwhile); elsewhere the same as udp_send. */
int udp_send_buf(void *ctx, const struct tally_addr *to, const uint8_t *hdr,
		 const void *payload, size_t len, void *buf);
int udp_buf_busy(void *ctx, const void *buf);
/* Forget the queued packets that reference a RESULT buffer, unsent and without touching
 * the buffers (tally_udp_destroy: the engine that owned them may be gone). */
void udp_drop_refs(struct tally_udp *u, struct udp_sock *s);
int udp_poll(void *ctx, uint64_t timeout_ns);
int udp_peer_error(void *ctx, uint32_t core);

#endif
