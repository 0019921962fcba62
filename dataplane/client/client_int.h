/* SPDX-License-Identifier: Apache-2.0
 * client_int.h — internal state of the worker-side client session (tally_client.h).
 *
 * Split by responsibility:
 *   client.c       lifecycle, JOIN / REGISTER / BYE (blocking control), stats
 *   client_util.c  shared helpers: errno mapping, error text, header fill, send, key lookup
 *   client_op.c    operations: start/test/wait, chunk windows, (re)transmission, RTO
 *   client_rx.c    packet intake: validation, RESULT reassembly, quorum fold
 *   client_err.c   the appliance's reports that end an operation (silent rank, drain)
 *   client_fold.c  the quorum fold arithmetic per dtype
 *   client_ack.c   RTO estimator, HELD intake, PULL probes, gap (fast) retransmission
 *   client_live.c  liveness PINGs, appliance restart: rejoin, re-register, re-push,
 *                  complete sums on NEED_RESULT, fail_fast
 *   client_drive.c tick and wait: the op timers and the liveness timer together
 *   client_cwnd.c  the delay-based window per core (standing queueing delay)
 *   client_codec.c compression codecs' wire layout (chunk bytes, flag), by compression id
 *
 * Memory: key state at registration, window slots (with their staging buffers) at JOIN,
 * operation slots at creation. The packet paths never allocate (a key registered without
 * quorum allocates its fold buffer the first time a RESULT leaves this worker out).
 */
#ifndef TALLY_CLIENT_INT_H
#define TALLY_CLIENT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tally_auth.h"
#include "tally_client.h"

#define CLIENT_NONE UINT32_MAX
/* A slot that re-sends a push whose RESULT left us out until the appliance proves it saw
 * it (see client_rx.c); it belongs to no operation. */
#define CLIENT_ACKWAIT (UINT32_MAX - 1)
#define CLIENT_ERRLEN 768 /* a give-up's text with its drop summary (client_err_drops) */
#define CLIENT_CLOCK_G_NS 10000ull /* RFC 6298 "G": our timer granularity */
#define CLIENT_RTO_MIN_NS 20000ull /* default floor of the adaptive RTO (cfg.rto_min_us) */
#ifndef CLIENT_QUIET_DIV
#define CLIENT_QUIET_DIV 1         /* a core silent for rto / this: probe (client_op.c); 4
				    * measured: ~30% more RESULTs re-sent to probes, no faster */
#endif
#define CLIENT_HELD_CAP 8          /* held chunks are probed at least every 8 RTO */
#define CLIENT_TAIL_SLOTS 8        /* slots in flight at most on a core: the tail of its work
				    * (client_slot_due re-probes even if the core is silent) */
#define CLIENT_PROBES_MAX 6        /* unanswered probes (backed off) before the payload goes
				    * again unasked: a safety net, MISSING asks for it */

/* Per-chunk state word of an operation: low 2 bits the state, the rest the window slot. */
enum client_chunk_state { CLIENT_CH_QUEUED = 0, CLIENT_CH_INFLIGHT = 1, CLIENT_CH_DONE = 2 };
#define CLIENT_CH_STATE(w) ((w) & 3u)
#define CLIENT_CH_SLOT(w) ((w) >> 2)
#define CLIENT_CH_MAKE(st, slot) (((uint32_t)(slot) << 2) | (uint32_t)(st))

/* A compression codec's wire layout (client_codec.c, by REGISTER compression id). */
struct client_codec {
	const char *name;
	uint8_t dtype;                         /* the REGISTER dtype it takes */
	uint16_t flag;                         /* TALLY_F_* on its pushes and RESULTs */
	uint32_t (*wire_bytes)(uint32_t n);    /* push/RESULT bytes of n elements */
	uint32_t (*max_elems)(uint32_t bytes); /* most elements a chunk of `bytes` carries */
};

struct client_key {
	uint32_t key;
	struct tally_register reg;
	uint32_t nchunks;
	uint32_t core;           /* owner core: key % ncores */
	size_t esize;            /* wire bytes per element */
	bool started;            /* a round was started */
	uint32_t next_round;     /* the round start() accepts next */
	uint32_t par_op[2];      /* active operation per round parity, CLIENT_NONE when none */
	bool done_valid[2];
	uint32_t done_round[2];  /* last finished round per parity (duplicate RESULTs) */
	uint32_t *cst[2];        /* per parity: per-chunk state words of the active op */
	/* Quorum fold: what this worker still owes the sum, in f32 (i32 for i32 keys). */
	void *fold;
	uint8_t *fold_pending;   /* bitmap per chunk */
	uint32_t *unacked;       /* per chunk: a round whose RESULT excluded us, CLIENT_NONE */
	uint32_t *ackslot;       /* per chunk: window slot re-sending that push, CLIENT_NONE */
	/* A codec key (non-zero REGISTER compression; NULL: plain): its buffers are opaque
	 * wire chunks, chunk c at c * wire_stride (codec->wire_bytes(chunk_elems)), its
	 * pushes carry codec->flag, its RESULTs are never placed and a left-out push is not
	 * folded (the caller's codec state keeps it: excl_round) */
	const struct client_codec *codec;
	uint32_t wire_stride;
	uint32_t *excl_round;    /* codec keys, per chunk: the last round whose RESULT left us
				  * out (tally_client_excluded), CLIENT_NONE; with the fold buffers */
	/* The last RESULT per chunk (client_live.c): what a rank that missed it after an
	 * appliance restart needs; NULL for codec keys. */
	uint8_t *last;           /* the key's wire bytes */
	uint32_t *last_round;    /* per chunk, CLIENT_NONE: none yet */
	uint16_t *last_contrib;
};

/* One chunk in flight to an appliance core. */
struct client_slot {
	uint8_t hdr[TALLY_HDR_LEN];
	uint8_t ack_hdr[TALLY_HDR_LEN]; /* same payload labelled with the excluded round */
	const void *payload;
	uint32_t len;
	uint32_t op;              /* operation index, CLIENT_ACKWAIT, or CLIENT_NONE (free) */
	uint32_t kidx, round;     /* CLIENT_ACKWAIT: which key and round */
	uint32_t chunk;
	uint32_t retries;
	bool staged;              /* payload is this slot's staging buffer */
	bool send_ack;            /* also (re)send ack_hdr (see client_op.c) */
	bool held;                /* the appliance acknowledged it HELD: probe, don't re-send */
	bool probed;              /* a PULL probe is out and unanswered */
	bool done;                /* the appliance said the chunk is complete (HELD+DONE):
				   * probes ask for the RESULT (PULL+DONE) */
	uint8_t nprobe;           /* probes in a row without an answer */
	uint8_t nreprobe;         /* of the last probe, quick copies sent since it went
				   * unanswered (client_slot_due; not in nprobe, which sends
				   * the payload again at CLIENT_PROBES_MAX) */
	bool fast_rtx;            /* the last payload send was a gap re-send */
	uint64_t seq;             /* the core's transmission number of its last payload send */
	uint64_t fast_ns;         /* last gap re-send or probe (at most one per RTT) */
	uint64_t first_ns, sent_ns, due_ns;
	uint64_t rto_ns;          /* this chunk's current timeout (doubles per retry) */
	uint32_t next_free;
	uint8_t *stage;           /* max_chunk_bytes */
};

struct client_core {
	struct client_slot *slots;    /* 2 * cfg.window (see client_cores_init) */
	uint8_t *stage_mem;
	uint32_t free_head;
	uint32_t inflight;        /* slots in use */
	uint32_t data_inflight;   /* of which data pushes (at most cfg.window) */
	uint32_t unanswered;      /* of which not held (no answer yet, or sent again): what
				   * is in the queues; at most cwnd (client_cwnd.c) */
	uint32_t pend_head, pend_tail; /* operations with unsent chunks, FIFO */
	uint64_t next_due;        /* earliest due_ns among in-flight slots (lower bound) */
	/* RTO estimator (RFC 6298, in ns) */
	bool have_rtt;
	uint64_t srtt, rttvar, rto;
	uint64_t est;             /* the estimator's RTO (rto may be backed off above it) */
	uint64_t min_rtt;         /* shortest sample of a chunk sent once (0: none yet) */
	uint64_t tx_seq;          /* payload transmissions so far (slot seq) */
	uint64_t gap_floor;       /* no push slot in flight has a seq below this (slot seqs
				   * only grow): a gap scan for an answer at or below it has
				   * nothing to look at (client_gap_scan; 0: not known) */
	bool seen_held;           /* this core answers HELD and probes (JOIN_OK caps, or seen):
				   * else old rules, the RTO samples completions */
	uint64_t last_ans_ns;     /* last first answer (HELD or RESULT) to a push of ours */
	uint64_t last_rx_ns;      /* last HELD or RESULT from this core (its path is FIFO: a
				   * RESULT sent before it would be here; client_probe) */
	uint64_t stamp;           /* send stamp of the last RESULT or HELD from this core, echoed
				   * by PULLs (0: none; tally_proto.h, TALLY_F_DONE). The last,
				   * not the largest: after a restart the count starts again */
	uint32_t reo_mult;        /* reordering allowance, in min_rtt/4 (RFC 8985 reo_wnd) */
	uint32_t fast_clean;      /* gap re-sends since the allowance last changed */
	/* delay-based window (client_cwnd.c) */
	uint32_t cwnd;            /* unanswered data pushes allowed now, <= cfg.window */
	uint32_t cw_streak;       /* increases in a row since the last cut */
	uint64_t cw_change_ns;    /* first sample of the interval a decision looks at (one
				   * decision per smoothed RTT) */
	uint64_t cw_rmin;         /* smallest RTT sample in it (0: none yet) */
	bool cw_limited;          /* a window (or the cap) held back a push since the last
				   * decision */
};

enum client_op_state { CLIENT_OP_FREE = 0, CLIENT_OP_ACTIVE, CLIENT_OP_DONE, CLIENT_OP_FAILED };

struct client_op {
	uint8_t state;
	uint16_t gen;
	uint32_t kidx;
	uint32_t round;
	const uint8_t *in;
	uint8_t *out;
	uint32_t next_chunk;      /* send cursor */
	uint32_t remaining;       /* chunks without a RESULT */
	bool pending;             /* linked in its core's pending list */
	uint32_t pend_prev, pend_next;
	int err;
	uint64_t stale_ns;        /* first ERROR STALE_ROUND for this round, 0: none */
	bool nores;               /* TALLY_CLIENT_NORESULT, honoured: pushes and probes carry
				   * TALLY_F_NORESULT, header-only RESULTs complete chunks */
};

enum client_wait { CLIENT_W_NONE = 0, CLIENT_W_JOIN, CLIENT_W_REGISTER };

struct tally_client {
	struct tally_client_cfg cfg;
	const struct tally_xport_ops *ops;
	void *xctx;
	struct tally_client_stats st;
	char errmsg[CLIENT_ERRLEN];

	bool joined;
	uint16_t ncores;
	uint32_t max_chunk_bytes;
	uint32_t caps;
	struct client_core *cores;

	/* blocking control request in progress */
	enum client_wait wait;
	uint32_t wait_key;
	uint64_t refused_ns;       /* JOIN: when the transport first said nothing listens */
	uint8_t *wait_core_ok;     /* JOIN: per core answered */
	bool join_ok0;
	struct tally_join_ok jok;
	int wait_err;
	bool wait_done;
	uint8_t unsigned_reason;   /* keyed JOIN: reason of the first unsigned ERROR, or 0 */
	uint64_t unsigned_due_ns;  /* ... taken at this time if nothing signed came first */

	struct client_key *keys;
	uint32_t nkeys, keys_cap;
	uint32_t *khash;           /* open addressing: key index + 1, 0 empty */
	uint32_t khash_mask;

	struct tally_auth *auth;   /* cfg.auth: the job key's GMAC context, else NULL */
	uint64_t join_nonce;       /* nonce of our last JOIN (hdr.reserved), BYE repeats it */
	uint64_t run;              /* keyed: the appliance's run nonce (core 0's JOIN_OK); with
				    * join_nonce, the session every tag covers (tally_auth.h) */

	struct client_op *ops_tab;     /* cfg.max_ops */
	uint32_t nactive;          /* operations started and not finished */
	uint32_t op_free_head;     /* via pend_next */

	/* liveness (client_live.c) */
	bool heard;                /* a valid packet came since the last tick */
	bool restart;              /* the appliance restarted: rejoin at the next tick */
	bool failed_fast;          /* fail_fast: this outage's operations are failed already */
	bool drain_seen;           /* a push was refused DRAINING (state DRAINING) */
	bool was_busy;             /* work was outstanding at the last liveness tick */
	uint8_t live;              /* enum tally_client_state */
	uint64_t boot;             /* boot id of core 0's JOIN_OK (0: the appliance has none) */
	uint64_t jok_boot;         /* of the JOIN_OK being waited for */
	uint64_t last_heard_ns, ping_due_ns, ping_gap_ns, rejoined_ns;
};

/* client_codec.c (a leaf) */
/* The codec registered for compression id, NULL for TALLY_COMP_NONE or an unknown id. */
const struct client_codec *client_codec_by_id(uint8_t id);

/* client_util.c (a leaf: calls nothing else in the library) */
int client_err_from_reason(unsigned reason);
void client_seterr(struct tally_client *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
struct client_key *client_key_find(const struct tally_client *c, uint32_t key);
void client_fill_hdr(const struct tally_client *c, struct tally_hdr *h, uint8_t op);
int client_send(struct tally_client *c, uint32_t core, const uint8_t *hdr, const void *payload,
	    size_t len);
static inline uint32_t client_hash(uint32_t key)
{
	return key * 2654435761u;
}

/* client_auth.c (calls client_util.c only) */
int client_auth_init(struct tally_client *c);
void client_auth_fini(struct tally_client *c);
/* A fresh JOIN nonce: the wall clock in ns, above every earlier one of this session. */
uint64_t client_join_nonce(struct tally_client *c);
void client_join_refused(struct tally_client *c, uint8_t reason);
/* client_err.c: a JOIN's wait and the transport's "nothing listens there" (peer_error) */
void client_wait_reset(struct tally_client *c, uint32_t core);
/* Appends to the error what this host knows of packets lost on their way in (the session's
 * rejections, the transport's receive drops with the setting to raise) and where the
 * appliance's own drops are read: for operations that gave up. */
void client_err_drops(struct tally_client *c);
uint64_t client_refused_until(struct tally_client *c, uint32_t core, uint64_t now, uint64_t due);
uint64_t client_auth_until(struct tally_client *c, uint64_t now, uint64_t due);
int client_auth_deadline(struct tally_client *c);
/* Authentication of a decoded packet before anything else looks at it: 1 take it,
 * 0 dropped (counted). */
int client_auth_rx(struct tally_client *c, const void *buf, const struct tally_pkt *p);

/* client.c */
void client_rx_control(struct tally_client *c, const struct tally_pkt *p);
int client_fold_alloc(struct tally_client *c, struct client_key *k);
/* Blocking request: send, poll until answered (c->wait_done), retry with backoff. */
int client_request(struct tally_client *c, uint32_t core, const uint8_t *hdr,
		   const void *payload, size_t len, uint64_t timeout_ns);
/* client_request, retried while the appliance answers RANK_TAKEN / INCARNATION_LIVE. */
int client_request_rebind(struct tally_client *c, uint32_t core, const uint8_t *hdr,
			  const void *payload, size_t len, uint64_t timeout_ns);
/* The JOIN and REGISTER messages as tally_client_join / _register send them. */
void client_join_msg(struct tally_client *c, uint8_t hdr[TALLY_HDR_LEN],
		     uint8_t pl[TALLY_JOIN_LEN]);
void client_register_msg(struct tally_client *c, uint32_t key, const struct tally_register *reg,
			 uint8_t hdr[TALLY_HDR_LEN], uint8_t pl[TALLY_REGISTER_LEN]);

/* client_live.c (calls client.c, client_op.c, client_ack.c, client_util.c) */
/* A PING answer or an ERROR to a PING (boot id in hdr.reserved). */
void client_live_rx(struct tally_client *c, const struct tally_hdr *h);
/* ERROR NEED_RESULT: send round h->round's sum of that chunk if we hold it. */
void client_live_need(struct tally_client *c, const struct tally_hdr *h);
/* Liveness timer: PINGs, states, rejoin after a restart, fail_fast. Returns the ns until
 * it wants to run again (UINT64_MAX: nothing outstanding). */
uint64_t client_live_tick(struct tally_client *c);
/* The last RESULT of chunk ch of k, kept for NEED_RESULT (client_rx.c). */
static inline void client_live_keep(struct client_key *k, uint32_t ch, const struct tally_hdr *h,
				    const void *payload, size_t boff, size_t len)
{
	if (!k->last)
		return;
	memcpy(k->last + boff, payload, len);
	k->last_round[ch] = h->round;
	k->last_contrib[ch] = h->contrib;
}
/* "appliance A unreachable for N ms: " into buf while it is silent, else "" (give-up
 * texts). Returns buf. */
static inline const char *client_live_silence(const struct tally_client *c, uint64_t now,
					      char *buf, size_t len)
{
	buf[0] = '\0';
	if (c->live == TALLY_CLIENT_SILENT || c->live == TALLY_CLIENT_DOWN)
		snprintf(buf, len, "appliance %s unreachable for %llu ms: ",
			 c->cfg.appliance[0] ? c->cfg.appliance : "appliance",
			 (unsigned long long)((now - c->last_heard_ns) / 1000000u));
	return buf;
}
/* client_op.c's timers (client_drive.c runs them with the liveness timer). */
uint64_t client_op_tick(struct tally_client *c);
/* How long a core may stay silent before the pushes still unanswered are probed: the RTO
 * (CLIENT_QUIET_DIV 1). A fraction would find tail losses sooner, but probes that met a
 * RESULT still queued on its way each cost a RESULT re-sent (measured before HELD+DONE,
 * see CLIENT_QUIET_DIV). Also the tail time of client_op.c: 4 bare round trips (min_rtt)
 * instead measured 4-5x the probes on the loaded 2-CPU box (silences of a few ms are
 * scheduling there) and no gain beyond its noise. */
static inline uint64_t client_quiet_ns(const struct tally_client *c, const struct client_core *cc)
{
	uint64_t q = cc->rto / CLIENT_QUIET_DIV, min = (uint64_t)c->cfg.rto_min_us * 1000;

	return q > min ? q : min;
}

/* How long a probe's answer may take: the estimator's RTO (not backed off: a PULL is
 * answered at once, it never waits for other workers), at least rto_min. A probe
 * unanswered that long while its core sent us other packets was lost, or its answer was:
 * client_op.c (client_slot_due) probes again then instead of waiting out the slot's
 * backed-off timer (at 10% loss a lost probe or answer held a round's last chunk 20-80 ms). */
static inline uint64_t client_probe_wait(const struct tally_client *c,
					 const struct client_core *cc)
{
	uint64_t min = (uint64_t)c->cfg.rto_min_us * 1000;

	return cc->est > min ? cc->est : min;
}

/* Mark a slot held or not, keeping its core's count of unanswered data pushes. */
static inline void client_set_held(struct client_core *cc, struct client_slot *sl, bool held)
{
	if (sl->op != CLIENT_ACKWAIT && sl->held != held) {
		if (held)
			cc->unanswered--;
		else
			cc->unanswered++;
	}
	sl->held = held;
}

/* client_op.c */
int client_cores_init(struct tally_client *c);
void client_cores_free(struct tally_client *c);
int client_ops_init(struct tally_client *c);
void client_pump(struct tally_client *c, uint32_t core);
void client_slot_release(struct tally_client *c, uint32_t core, uint32_t slot);
void client_op_finish(struct tally_client *c, uint32_t opi);
void client_op_fail(struct tally_client *c, uint32_t opi, int err);
/* The operation a handle names (its slot index in *opi), NULL: no such live handle. */
struct client_op *client_handle_op(struct tally_client *c, int handle, uint32_t *opi);
/* nores: the push that was left out asked TALLY_F_NORESULT; so do its re-sends. */
void client_ackwait_start(struct tally_client *c, struct client_key *k, uint32_t ch, uint32_t round,
		      const void *payload, bool nores);

/* client_err.c: the appliance's reports that end an operation early */
/* ERROR RANK_SILENT: fail the operation waiting on that chunk (-EPIPE), naming the rank. */
void client_rx_silent(struct tally_client *c, const struct tally_hdr *h);
/* The text of a push refused because the appliance drains. */
void client_err_draining(struct tally_client *c, const struct tally_hdr *h, uint32_t core);
/* ERROR STALE_ROUND for the round in progress: ignored once (a delayed duplicate's answer
 * can cross a retransmission), the operation fails (-ESTALE) when they keep coming for
 * CLIENT_STALE_FAIL_NS: the appliance has passed this round of the key (another launch
 * with the same job, token and incarnation), no retransmission will be summed. */
#define CLIENT_STALE_FAIL_NS 1000000000ull
void client_rx_stale(struct tally_client *c, const struct tally_hdr *h);
/* client_ack.c (calls client_util.c, client_cwnd.c) */
/* An RTT sample: push -> first acknowledgement (HELD or RESULT) of a chunk sent once. */
void client_rtt_sample(struct client_core *cc, uint64_t rtt_ns, const struct tally_client_cfg *cfg);
void client_stamp_rx(struct client_core *cc, const struct tally_hdr *h);
/* (Re)send a slot's payload (and its ack copy); numbers the transmission. */
void client_xmit(struct tally_client *c, uint32_t core, struct client_slot *sl);
/* Header-only PULL for a held data slot. */
void client_probe(struct tally_client *c, uint32_t core, struct client_slot *sl, uint64_t now);
/* The same PULL again, its answer being late (client_slot_due): not counted in nprobe. */
void client_reprobe(struct tally_client *c, uint32_t core, struct client_slot *sl,
		    uint64_t now);
/* Transmission xseq was answered: re-send earlier pushes still unanswered an RTT later
 * and/or probe earlier held chunks without a RESULT (how: CLIENT_GAP_*). */
#define CLIENT_GAP_RESEND 1u
#define CLIENT_GAP_PROBE 2u
void client_gap_scan(struct tally_client *c, uint32_t core, uint64_t xseq, unsigned how,
		     uint64_t now);
void client_rx_held(struct tally_client *c, const struct tally_pkt *p);
/* A RESULT answering data slot sl: timers, RTT sample, reordering evidence. Returns the
 * gap scan to run once the RESULT is taken (CLIENT_GAP_*, 0: none) and its *gap_seq. */
unsigned client_result_answer(struct tally_client *c, struct client_core *cc,
			      struct client_slot *sl, const struct tally_hdr *h, uint64_t *gap_seq);
/* An answer says the appliance already had the push when our last copy came (RESEND): if
 * that copy was a gap re-send, the gap was reordering: widen the allowance. */
void client_spurious(struct client_core *cc, struct client_slot *sl);

/* client_cwnd.c (a leaf) */
/* Set every core's window to cfg.window (at JOIN, after client_cores_init). */
void client_cwnd_init(struct tally_client *c);
/* RTT sample rtt was taken on core cc (an appliance that answers HELD): adjust its window
 * to the queueing delay (the smallest sample of the last RTT - min_rtt). */
void client_cwnd_sample(struct tally_client *c, struct client_core *cc, uint64_t rtt,
			uint64_t now);
/* The queueing delay the window aims under: max(min_rtt, CLIENT_QTARGET_FLOOR_NS). */
uint64_t client_cwnd_target(const struct client_core *cc);

/* client_fold.c */
/* Build the push payload of a chunk whose fold is pending: stage = in + fold (in the wire
 * dtype); fold keeps what the wire dtype could not carry (0 for f32/i32). Returns whether
 * a residual remains. */
bool client_fold_stage(enum tally_dtype dt, void *stage, const void *in, void *fold, size_t n);
/* Undo client_fold_stage for a push whose fate is unknown (failed operation):
 * fold += stage - in. */
void client_fold_unstage(enum tally_dtype dt, void *fold, const void *stage, const void *in,
		     size_t n);
/* A decoded packet (buf: its header as received) past the checks of its own bytes. */
void client_rx_pkt(struct tally_client *c, const void *buf, const struct tally_pkt *p);
/* client_place.c: tell the transport where round `op` of k writes its results. */
void client_advertise(struct tally_client *c, const struct client_key *k,
		      const struct client_op *op);
void client_unadvertise(struct tally_client *c, const struct client_key *k,
			const struct client_op *op, int failed);

/* fold += the payload that was left out of the sum. */
void client_fold_add(enum tally_dtype dt, void *fold, const void *pushed, size_t n);

static inline uint32_t client_chunk_count(const struct client_key *k, uint32_t ch)
{
	uint32_t off = ch * k->reg.chunk_elems;
	uint32_t left = k->reg.nelems - off;
	return left < k->reg.chunk_elems ? left : k->reg.chunk_elems;
}

/* Where chunk ch lies in the key's in/out buffers, and its payload bytes: elements of the
 * wire dtype, or for a codec key its wire bytes, wire_stride per whole chunk. */
static inline size_t client_chunk_boff(const struct client_key *k, uint32_t ch)
{
	if (k->codec)
		return (size_t)ch * k->wire_stride;
	return (size_t)ch * k->reg.chunk_elems * k->esize;
}
static inline uint32_t client_chunk_bytes(const struct client_key *k, uint32_t ch)
{
	uint32_t n = client_chunk_count(k, ch);
	if (k->codec)
		return n == k->reg.chunk_elems ? k->wire_stride : k->codec->wire_bytes(n);
	return n * (uint32_t)k->esize;
}

#endif
