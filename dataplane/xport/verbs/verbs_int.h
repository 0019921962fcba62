/* SPDX-License-Identifier: Apache-2.0
 * verbs_int.h — internal state of the verbs transport. Calls go verbs_xport.c (create,
 * destroy, ops, stats) and verbs_core.c (per-core listening) -> verbs_io.c (send,
 * completion polling) -> verbs_pio.c (RESULTs placed in the worker's buffer, with
 * verbs_place.c) and verbs_cm.c (rdma_cm: listen, accept, connect, events) ->
 * verbs_cm_auth.c (authentication at setup, with verbs_auth.c) -> verbs_conn.c (a
 * connection's QP and registered memory) -> verbs_ring.c (slot and credit arithmetic),
 * never back.
 */
#ifndef VERBS_VERBS_INT_H
#define VERBS_VERBS_INT_H

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "tally_proto.h"
#include "tally_verbs.h"
#include "verbs_auth.h"
#include "verbs_place.h"
#include "verbs_ring.h"

#define VERBS_MAGIC 0x54564231u /* "TVB1": our connect/accept private data */
#define VERBS_SLOT_BYTES 9152u  /* TALLY_HDR_MAX + TALLY_MAX_PAYLOAD, 64-aligned */
_Static_assert(VERBS_SLOT_BYTES >= TALLY_HDR_MAX + TALLY_MAX_PAYLOAD,
	       "a slot holds the largest packet (a signed RESULT: 120 header bytes)");
#define VERBS_CQ_BATCH 32
#define VERBS_EXTRA_RECV 16     /* receives beyond the slots, for credit messages */
#define VERBS_RECONNECT_NS 200000000ull /* a client retries a core's connect at most this often */

enum verbs_state { VC_FREE = 0, VC_CONNECTING, VC_UP, VC_DEAD };

/* What travels in the rdma_cm connect request (client) and accept (listener): the sender's
 * landing ring. 32 bytes: within RC's 56-byte connect private data limit. */
struct verbs_wire {
	uint32_t magic;
	uint32_t core;       /* request: the appliance core; accept: echoed */
	uint64_t addr;       /* landing ring virtual address */
	uint32_t rkey;
	uint32_t nslots;
	uint32_t slot_bytes;
	uint32_t reason;     /* reject: why (enum verbs_reject) */
};

enum verbs_reject { VR_OK = 0, VR_BAD_REQUEST, VR_BAD_CORE, VR_FULL, VR_NO_MEMORY,
		   /* authenticated requests (verbs_auth.h) */
		   VR_AUTH_NO_KEY, VR_AUTH_BAD_MAC, VR_AUTH_REPLAY, VR_AUTH_STALE, VR_AUTH_OFF };

struct verbs_conn {
	enum verbs_state state;
	uint16_t gen;              /* bumped at every reuse: stale completions are ignored */
	uint32_t idx;
	uint32_t core;
	struct rdma_cm_id *id;
	struct ibv_qp *qp;
	uint8_t *mem;              /* landing ring (slots), then staging ring (2 x slots) */
	uint32_t *lens;            /* bytes of each staged message */
	size_t mem_len;
	int huge;                  /* mem is a hugetlb mapping */
	struct ibv_mr *mr;
	uint64_t raddr;            /* peer's landing ring */
	uint32_t rkey;
	struct verbs_ring ring;
	struct tally_addr addr;    /* as handed to the rx callback */
	uint32_t credit_out;       /* credit messages posted, not completed */
	int dirty;                 /* in tally_verbs.dirty[]: consumed slots maybe unreported */
	uint64_t retry_at_ns;      /* client: the next reconnect attempt */
	uint32_t stall_mark;       /* credit and receive counts when a credit stall began */
	uint64_t stall_ns;         /* when it began (0: not stalled) */
	uint64_t probe_ns;         /* when the stall probe was posted (0: none out) */
	uint8_t auth_req[VERBS_REQ_LEN]; /* client: our signed request (the accept covers it) */
	struct verbs_ptx *ptx;     /* per staging slot: where its payload is placed */
	struct verbs_adv *adv;     /* listener: the peer's advertisements (VERBS_ADV_TABLE) */
};

/* A staged message whose payload goes by RDMA WRITE to the worker's buffer (head > 0: the
 * bytes of header + placement record that go to the landing slot). */
struct verbs_ptx {
	uint64_t raddr;
	uint32_t rkey;
	uint32_t head;
};

struct tally_verbs {
	struct tally_verbs_cfg cfg;
	tally_verbs_rx_fn rx;
	void *rx_arg;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *listen_id;
	struct ibv_context *dev;   /* the device every connection is on (first one seen) */
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	int cq_armed;
	uint32_t cq_unacked;
	uint32_t last_wcs;         /* completions the last CQ poll handled (packets or not) */
	uint32_t nconns;           /* entries in conns[] */
	uint32_t live;
	struct verbs_conn *conns;
	uint32_t *dirty;           /* connections to report credits to when the CQ goes idle */
	uint32_t ndirty;
	struct verbs_conn *by_core[TALLY_VERBS_MAX_CORES]; /* client */
	struct sockaddr_in peer;   /* client: appliance */
	uint64_t busy_ns;          /* busy-poll budget per wait (0: off) */
	int lose_disconnects;      /* fault injection (TALLY_VERBS_FAULT, verbs_xport.c) */
	int lose_established;
	int replay_connect;        /* fault: later connects resend the first signed request */
	int skew_connect;          /* fault: signed requests carry a clock 1000 s behind */
	int fault_migrate_fail;    /* fault (listener): the next rdma_migrate_id fails */
	int fault_handoff_full;    /* fault (listener): the next hand-off finds the ring full */
	uint32_t last_reject;      /* client: the reason of the last refused connect (VR_*) */
	int have_first;
	uint8_t first_req[VERBS_REQ_LEN];
	struct tally_verbs_stats st;
	struct tally_auth *auth;   /* client: the job key (cfg.auth_key), else NULL */
	struct verbs_replay *replay; /* listener: nonces of accepted authenticated requests */
	char err[256];
	char host[256];            /* cfg.host, copied (the caller's string is not kept) */
	/* per-core listening (verbs_core.c): the listener's request handler, hand-off and the
	 * instance of each core */
	void (*on_request)(struct tally_verbs *v, struct rdma_cm_id *id, const void *pd,
			   size_t len);
	tally_xport_handoff_fn handoff;
	void *handoff_arg;
	struct tally_verbs **cores;
	/* RESULT placement, client side (verbs_place.h): the registration cache and, per core,
	 * the advertisements made (sent again after a reconnect) */
	tally_verbs_rx_placed_fn rx_placed;
	struct verbs_mrc mrc;
	struct verbs_adv **cadv;
	int bad_advert;            /* fault: advertise a length that wraps (refused) */
	int short_advert;          /* fault: advertise half the buffer (the rest copied) */
};

/* wr_id: generation, connection, and the kind in the low bits: 1 a data message, 0 a
 * credit message, VERBS_WR_PROBE a stall probe (verbs_conn_probe). */
#define VERBS_WR_PROBE 2u
#define VERBS_WR_PLACE 4u /* the unsignaled RDMA WRITE of a placed payload (errors only) */
static inline uint64_t verbs_wr_id(const struct verbs_conn *c, int data)
{
	return ((uint64_t)c->gen << 40) | ((uint64_t)c->idx << 8) | (uint64_t)(data & 1);
}

/* verbs_cm.c */
int verbs_cm_open(struct tally_verbs *v);
/* A listener's accepted connection is up (ESTABLISHED, or its first packet landed). */
void verbs_cm_up(struct tally_verbs *v, struct verbs_conn *c);
int verbs_cm_listen(struct tally_verbs *v);
int verbs_cm_connect(struct tally_verbs *v, uint32_t core);
/* Handle every pending rdma_cm event; 0 or -errno. */
int verbs_cm_events(struct tally_verbs *v);
/* A listener's connect request: accept it on this instance, or refuse it (counted). */
void verbs_cm_accept(struct tally_verbs *v, struct rdma_cm_id *id, const void *pd, size_t len);
void verbs_cm_close(struct tally_verbs *v, struct verbs_conn *c);

/* verbs_cm_auth.c: authentication at setup (verbs_auth.h) for verbs_cm.c */
/* The client's job key (TALLY_VERBS_AUTH), the listener's replay cache. 0 or -errno. */
int verbs_cm_auth_open(struct tally_verbs *v);
/* Free the authentication state (tally_verbs_destroy). */
void verbs_cm_auth_free(struct tally_verbs *v);
/* Listener: check a signed request before anything is allocated: VR_OK with the peer's
 * ring in *peer and the job's context in *ap, or the refusal (counted). */
uint32_t verbs_cm_auth_request(struct tally_verbs *v, struct rdma_cm_id *id, const void *pd,
			       size_t len, struct verbs_req *r, struct verbs_wire *peer,
			       struct tally_auth **ap);
/* Listener: the accept's private data (our ring; with a: our proof of the key). 0/-EIO. */
int verbs_cm_accept_data(struct rdma_cm_id *id, const void *pd, struct tally_auth *a,
			 const struct verbs_wire *w, uint8_t rep[VERBS_REP_LEN]);
/* Client: sign our request into c->auth_req (our ring w). 0 or -EIO. */
int verbs_cm_auth_req(struct tally_verbs *v, struct verbs_conn *c, const struct verbs_wire *w);
/* Client: the accept must prove the key over our request. 0 or -EACCES (message set). */
int verbs_cm_auth_accept(struct tally_verbs *v, struct verbs_conn *c, const void *pd,
			 size_t len, const char *ip);
/* Client: the message for a refused connect, naming what to change. */
void verbs_cm_reject_msg(struct tally_verbs *v, const struct verbs_conn *c,
			 const struct verbs_wire *r, const char *ip);

/* verbs_io.c */
uint64_t verbs_now_ns(void *ctx);
int verbs_send(void *ctx, const struct tally_addr *to, const uint8_t *hdr, const void *payload,
	       size_t len);
int verbs_poll(void *ctx, uint64_t timeout_ns);
/* Poll the CQ once; returns packets delivered. */
int verbs_poll_cq(struct tally_verbs *v);
/* The client's advertise op (tally_xport_ops.advertise). */
int verbs_advertise(void *ctx, const struct tally_addr *to, uint32_t job, uint32_t rank,
		    uint32_t key, uint32_t round, void *out, size_t len);

/* verbs_pio.c: placement (verbs_place.h) over a connection, for verbs_io.c */
/* Listener: a landed advertisement (buf starts with VERBS_ADV_MAGIC), taken or refused. */
void verbs_pio_adv_rx(struct tally_verbs *v, struct verbs_conn *c, const void *buf, size_t len);
/* Listener: stage a packet for c, placed when its RESULT was advertised. 0 or -errno. */
int verbs_pio_stage(struct tally_verbs *v, struct verbs_conn *c, const uint8_t *hdr,
		    const void *payload, size_t len);
/* Client: a landed message that is a placed RESULT (header + record) goes to rx_placed:
 * 1 handled (or dropped, counted), 0 not one (an ordinary packet). */
int verbs_pio_rx(struct tally_verbs *v, struct verbs_conn *c, const uint8_t *b, size_t len);
/* Client: register [out, out + len) (cached) and advertise it on c. 0 or -errno. */
int verbs_pio_advertise(struct tally_verbs *v, struct verbs_conn *c, const struct verbs_adv *a,
			void *out);
/* Client: the round of a->(key, round) is over: forget its advertisement; tell: the
 * appliance too (when connected). 0 or -errno. */
int verbs_pio_withdraw(struct tally_verbs *v, uint32_t core, const struct verbs_adv *a,
		       int tell);
/* Client: a reconnected core's advertisements again (the appliance may have restarted). */
void verbs_pio_readvertise(struct tally_verbs *v, struct verbs_conn *c);
/* Client: the cache and tables (create / destroy). 0 or -ENOMEM. */
int verbs_pio_init(struct tally_verbs *v);
void verbs_pio_fini(struct tally_verbs *v);

/* verbs_conn.c */
void verbs_err(struct tally_verbs *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* PD, CQ and completion channel on the device of `id` (first connection). 0 or -errno. */
int verbs_conn_device(struct tally_verbs *v, struct rdma_cm_id *id);
/* QP and registered rings for c (c->id set); fills *w with our landing ring. */
int verbs_conn_setup(struct tally_verbs *v, struct verbs_conn *c, struct verbs_wire *w);
/* The peer's ring from its private data; 0 or -EPROTO. */
int verbs_conn_peer(struct tally_verbs *v, struct verbs_conn *c, const void *pd, size_t len);
int verbs_conn_post_recv(struct verbs_conn *c);
/* Copy one message into staging (-ENOBUFS: staging full). hdr NULL: payload is a raw
 * message (an advertisement). pl: the payload goes by RDMA WRITE to pl->raddr, the slot
 * gets the header and a placement record (pl->head is set here). */
int verbs_conn_stage(struct tally_verbs *v, struct verbs_conn *c, const uint8_t *hdr,
		     const void *payload, size_t len, const struct verbs_ptx *pl);
/* Post what is staged as far as the peer's credit allows: messages posted or -errno. */
int verbs_conn_flush(struct tally_verbs *v, struct verbs_conn *c);
/* Post an explicit credit message. 0 or -errno. */
int verbs_conn_credit(struct verbs_conn *c);
/* Post a zero-length RDMA WRITE (no landing slot, no receive consumed): it completes if the
 * peer's QP is alive and fails after the QP's retries if not. 0 or -errno. */
int verbs_conn_probe(struct verbs_conn *c);
void verbs_conn_release(struct tally_verbs *v, struct verbs_conn *c);
struct verbs_conn *verbs_conn_alloc(struct tally_verbs *v);

#endif
