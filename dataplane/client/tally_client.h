/* SPDX-License-Identifier: Apache-2.0
 * tally_client.h — the worker-side session with one appliance (all of its cores).
 *
 * "Allreduce this buffer under key K, round R": the session splits the buffer into the
 * key's chunks, PUSHes them to the core that owns the key (key % ncores from JOIN_OK) with
 * a window of chunks in flight per core, retransmits each chunk on its own timer (adaptive
 * RTO from measured RTTs, starting at cfg.rto_init_us, doubling per retry up to rto_max_us),
 * and writes each RESULT's payload into the output buffer.
 *
 * Acknowledgements (tally_proto.h, HELD; only with an appliance offering TALLY_CAP_HELD,
 * else every timeout re-sends and completion times are sampled, as before): the RTT sampled
 * is push -> the chunk's first answer, a HELD (the appliance holds the push, the chunk waits
 * for other workers) or the RESULT its push completed (TALLY_AUX_LAST), so the RTO follows
 * the network and the appliance, not the slowest worker. Timers restart with every answer
 * from the core (RFC 6298 5.3): pushes queued behind our own window are not lost; once the
 * core is quiet for an RTO, each unanswered or held chunk is probed with a header-only PULL
 * (backed off x2; held ones at least every 8 RTO), answered HELD (no re-send), the RESULT,
 * or HELD+MISSING (re-sent at once); the payload goes out unasked only after 6 probes with
 * no answer while the core answered other packets (a core silent since the last probe is
 * stalled: it gets more probes, backed off, not payloads). Losses show up as gaps (RACK-like): the first answer to a push sent
 * once re-sends every push sent before it to that core still unanswered an RTT plus a
 * reordering allowance later (stats.fast_retransmits); the allowance doubles when an answer
 * flagged RESEND shows such a re-send was not needed, halves after 16 that were; a RESULT
 * overtaking an earlier held chunk's has that one probed.
 * A probe of a chunk completed since the last packet from that core (or within an RTO
 * before it: PULL aux) is answered HELD+DONE; without the RESULT the session then asks with
 * PULL+DONE (result_asks). Held or unanswered chunks left after the core's last progress are
 * probed once it has been quiet for an RTO since (tail losses).
 * The window of unanswered pushes (neither HELD nor RESULT yet: in the queues) per core is
 * delay-based (client_cwnd.c): it starts at cfg.window and, once per smoothed RTT, is cut
 * in proportion to how far the standing queueing delay (the smallest of that RTT's samples
 * above, less min_rtt) is over its target max(min_rtt, 1 ms), at most by half, down to 4
 * chunks; under the target it grows back by 1, 2, 4, 8 chunks per RTT up to cfg.window. A
 * repair (a gap re-send, a MISSING re-send, a probe) waits behind every push in the queues
 * before it: the window keeps that queue short (stats.window_*).
 * Trade-off: one 64-byte HELD per held push (ranges of consecutive chunks share one) and a
 * few probes per wait, against whole duplicate payloads whenever completion is slower than
 * the RTO; a probe that meets a RESULT still on its way costs a 64-byte HELD+DONE.
 * A chunk that gets no RESULT within cfg.give_up_ms fails the operation with -ETIMEDOUT and
 * a message naming key, round, chunk.
 * The appliance may end an operation sooner: ERROR RANK_SILENT (a participant it waits on is
 * silent; -EPIPE, the message names the rank, the appliance, key and round) or ERROR
 * DRAINING (it is shutting down or upgrading; -ESHUTDOWN).
 *
 * Quorum (eager-SGD): a RESULT without TALLY_F_INCLUDED means this worker's push was left
 * out. The session keeps that chunk's contribution (in f32, or i32) and adds it into the
 * next round's push of the same chunk, so no gradient is lost. That push carries in + fold
 * rounded to the wire dtype (f32, f16, bf16); the rounding error stays in the fold for the
 * push after (error feedback), nothing is dropped. The left-out push is re-sent until the
 * appliance answers it (stats.ack_pushes): it starts round r+1 only after seeing everyone
 * in round r.
 *
 * Appliance restart (client_live.c): while work is outstanding and nothing has come from
 * the appliance for cfg.probe_ms, the session sends a header-only PING to core 0, again
 * every probe_ms doubling up to max(probe_ms, 500 ms) while the silence lasts (state
 * SILENT; DOWN once the silence reaches cfg.dead_ms). A restart is recognised positively:
 * the answer carries a boot id other than the one of our JOIN_OK, or is an ERROR saying the
 * appliance does not know us (NOT_JOINED, WRONG_JOB). The session then JOINs every core
 * again (same job, token, rank, incarnation), REGISTERs every key with its parameters and
 * re-sends every push still in flight from the caller's input (stats.repushes); queued
 * chunks follow as usual. A rank that missed round r's RESULT re-pushes r while the others
 * are at r+1: the fresh appliance asks them (ERROR NEED_RESULT) and the session answers
 * with round r's sum, kept per chunk from its RESULT (TALLY_F_COMPLETE; a copy of the key's
 * last result per chunk, until the next round's RESULT replaces it). Nothing is summed
 * twice: the appliance installs that sum in place of the re-pushes. Not covered: one-bit
 * keys (the server error is lost) and keys completed by quorum or deadline (the sum does
 * not say whose pushes it holds). With cfg.fail_fast the outstanding operations instead
 * end with -EHOSTDOWN at dead_ms (the caller moves them; the session keeps probing); else
 * they wait for the appliance and fail only at give_up_ms, the message saying how long the
 * appliance has been unreachable.
 *
 * Rounds of one key must be used in order (r, r+1, ...): pushing round r+1 acknowledges
 * round r to the appliance; rounds r and r+1 may run at once, r+2 waits (-EBUSY). A failed
 * round may be started again. A session is used by one thread.
 */
#ifndef TALLY_CLIENT_H
#define TALLY_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "tally_proto.h"
#include "tally_xport.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tally_client;

struct tally_client_cfg {
	uint32_t job_id;
	uint64_t token;
	uint32_t rank;
	uint32_t world_size;
	uint32_t max_chunk_bytes; /* default 8192; the appliance may lower it in JOIN_OK */
	uint32_t window;          /* chunks in flight per appliance core at most, default 64:
				   * the cap of the delay-based window (client_cwnd.c), which
				   * starts there and is cut while the queueing delay of our
				   * pushes is over max(min_rtt, 1 ms); it
				   * also bounds what the appliance may stage for us */
	uint32_t rto_init_us;     /* default 500 */
	uint32_t rto_max_us;      /* default 100000 */
	uint32_t give_up_ms;      /* default 30000 */
	uint32_t max_ops;         /* concurrent allreduce operations, default 256 */
	uint32_t rto_min_us;      /* floor of the adaptive RTO, default 20 (dedicated cores);
				   * raise it where completions wait in deep queues (shaped
				   * links) so that waiting is not taken for loss */
	uint64_t incarnation;     /* this launch of the job, sent in JOIN (0: none); every rank
				   * of one launch gives the same value. A new value replaces
				   * the appliance's state of an earlier launch (tally_engine.h). */
	char appliance[64];       /* the appliance's address for error messages
				   * ("10.0.0.1:9170"); "" → "appliance" */
	uint32_t probe_ms;  /* probe after this much silence while work is outstanding (default 200) */
	uint32_t dead_ms;   /* appliance considered down after this silence (default 1000) */
	uint8_t fail_fast;  /* 1: at dead_ms every outstanding op completes with -EHOSTDOWN (the caller
			       moves it elsewhere; the client keeps probing); 0 (default): wait for the
			       appliance to return, rejoin, re-push; fail at give_up_ms */
	/* Authentication (tally_proto.h TALLY_F_AUTH): with auth set, every packet is signed
	 * with auth_key (AES-256-GMAC, the job's key from TALLY_AUTH_KEY_FILE) and only
	 * packets whose tag verifies are taken (others counted in drops[bad_mac],
	 * drops[auth_required]); the JOIN carries a fresh nonce that JOIN_OK must echo
	 * (drops[replay]). A JOIN refused bad_mac / auth_required / no_key (an unsigned
	 * ERROR) fails once no signed answer came within TALLY_CLIENT_UNSIGNED_GRACE_MS,
	 * with a message naming TALLY_AUTH_KEY_FILE (stats join_unsigned_errors). */
	uint8_t auth;
	uint8_t auth_key[32];
};

/* The session's view of its appliance (tally_client_state). */
enum tally_client_state { TALLY_CLIENT_UP, TALLY_CLIENT_SILENT, TALLY_CLIENT_DOWN,
			  TALLY_CLIENT_DRAINING };

struct tally_client_stats {
	uint64_t tx_pkts, tx_bytes, rx_pkts, rx_bytes;
	uint64_t pushes;          /* first transmissions of a chunk */
	uint64_t retransmits;     /* payload re-sends (timer or gap) */
	uint64_t fast_retransmits;/* of which on a gap: a later push was acknowledged first */
	uint64_t helds;           /* HELD acknowledgements received */
	uint64_t probes;          /* header-only PULLs (timer, or gap for held chunks) */
	uint64_t missing;         /* probes answered MISSING (push lost: re-sent at once) */
	uint64_t results;         /* RESULTs used */
	uint64_t dup_results;     /* RESULTs for chunks already done */
	uint64_t excluded;        /* chunks whose RESULT did not include us (folded forward) */
	uint64_t ack_pushes;      /* pushes re-sent after such a RESULT until the appliance
				   * shows it saw them (it cannot start the next round before) */
	uint64_t errors;          /* ERROR packets received */
	uint64_t drops[TALLY_R_COUNT]; /* received packets rejected, by reason */
	uint64_t rank_taken_retries; /* JOINs refused RANK_TAKEN and tried again */
	/* appliance restarts (client_live.c); liveness PINGs also count in probes */
	uint64_t restarts;        /* appliance restarts survived (rejoined after one) */
	uint64_t rejoins;         /* JOIN + REGISTER rounds completed after a restart */
	uint64_t repushes;        /* pushes re-sent to a restarted appliance */
	uint64_t pings;           /* liveness PINGs sent */
	uint64_t complete_pushes; /* round sums sent on NEED_RESULT (a rank missed them) */
	uint64_t auth_signed;     /* packets signed (cfg.auth) */
	uint64_t auth_verified;   /* received packets whose tag verified */
	uint64_t join_unsigned_errors; /* unsigned ERRORs answering a keyed JOIN: not taken at
				   * once (anyone can send one), only if no signed answer comes
				   * within TALLY_CLIENT_UNSIGNED_GRACE_MS (issue 33) */
	uint64_t result_asks;     /* PULL+DONE sent: a probe was answered HELD+DONE (the
				   * RESULT went out) and that RESULT is not here: it was lost */
	/* The delay-based window (client_cwnd.c; cfg.window is its cap per core) */
	uint64_t window_now;      /* chunks the session may have in flight now, all cores */
	uint64_t window_decreases;/* cuts of a core's window: queueing delay over its target */
	uint64_t window_increases;/* steps back up: queueing delay under the target */
	uint64_t window_min;      /* the smallest window a core was cut to (0: none cut) */
	uint64_t qdelay_us;       /* the last standing queueing delay seen, any core (the
				   * smallest RTT sample of a smoothed RTT - min_rtt) */
	uint64_t qtarget_us;      /* its target then (max(min_rtt, 1 ms)) */
	uint64_t results_placed;  /* RESULTs whose payload the transport wrote in place (no
				   * copy; verbs, tally_xport_ops.advertise) */
	uint64_t adverts;         /* result buffers advertised to the transport */
	/* owner mode (TALLY_CLIENT_NORESULT) */
	uint64_t noresult_ops;    /* operations started with it and honoured */
	uint64_t noresult_fallbacks; /* started with it against an appliance that does not
				   * offer TALLY_CAP_NORESULT: run as plain operations */
	uint64_t noresult_acks;   /* header-only RESULTs taken: chunks completed without their
				   * sum crossing the downlink */
	uint64_t noresult_skipped_bytes; /* the payload bytes those would have carried */
	uint64_t noresult_payloads; /* RESULTs with payload that came to such operations anyway
				   * (the appliance had not seen the flag, e.g. the push was lost
				   * and a quorum completed the chunk): written into out */
	uint64_t abandoned;       /* operations the caller abandoned while pending
				   * (tally_client_abandon); their late answers count as
				   * drops[stale_round] */
};

/* A keyed session that gets an unsigned ERROR to its JOIN (bad_mac, auth_required, no_key,
 * replay: the appliance could not check the JOIN, so it cannot sign the answer) keeps
 * waiting this long (or to the JOIN deadline, if sooner) for a signed JOIN_OK, and only
 * then fails with that reason: a forged unsigned ERROR raced against the real JOIN_OK
 * cannot end the job. */
#define TALLY_CLIENT_UNSIGNED_GRACE_MS 1000u

/* A JOIN whose every copy the network answers "nothing listens there" (the transport's
 * peer_error: kernel UDP's ICMP port unreachable) fails -ECONNREFUSED this long after the
 * first such answer, with a message naming the address, instead of waiting out its timeout;
 * an answer within it (an appliance just binding its port; an ICMP is not authenticated)
 * wins. A rejoin after a restart is not failed by it: the session keeps probing. */
#define TALLY_CLIENT_REFUSED_GRACE_MS 200u

void tally_client_cfg_defaults(struct tally_client_cfg *cfg);

struct tally_client *tally_client_create(const struct tally_client_cfg *cfg,
					 const struct tally_xport_ops *ops, void *xctx,
					 int *err);
void tally_client_destroy(struct tally_client *c);

/* Blocking (drive the transport's poll). JOIN core 0 and learn ncores / max chunk; 0,
 * -ETIMEDOUT, or -EACCES / -EPERM / -EBUSY etc. mapped from the appliance's ERROR.
 * RANK_TAKEN (the rank still bound to an earlier address of ours whose BYE was lost) is
 * retried with backoff until timeout_ms, then -EBUSY. */
int tally_client_join(struct tally_client *c, uint32_t timeout_ms);
/* Register a key with the core that owns it (blocking, retried). reg->chunk_elems = 0
 * picks the largest chunk that fits max_chunk_bytes. 0 or negative errno. */
int tally_client_register(struct tally_client *c, uint32_t key, const struct tally_register *reg);
/* The largest payload this session sends: cfg.max_chunk_bytes, lowered to the appliance's
 * in JOIN_OK once joined. */
uint32_t tally_client_max_chunk_bytes(const struct tally_client *c);
/* The capabilities the appliance offered in JOIN_OK (TALLY_CAP_*), 0 before the JOIN. */
uint32_t tally_client_caps(const struct tally_client *c);

/* Start an allreduce of a registered key: `in` and `out` hold nelems of the key's dtype and
 * must stay valid until the operation completes (they may be the same buffer). Returns a
 * handle >= 0 or a negative errno. */
int tally_client_start(struct tally_client *c, uint32_t key, uint32_t round, const void *in,
		       void *out);
/* tally_client_start with flags (0: the same call):
 * TALLY_CLIENT_NORESULT: the caller does not want this operation's sums (a reduce-scatter
 *   shard another rank owns): its pushes carry TALLY_F_NORESULT (tally_proto.h) and each
 *   chunk completes on the appliance's header-only RESULT, so the sums never cross the
 *   downlink (stats.noresult_acks); `out` is left as it was. Everything else is as for any
 *   operation: quorum folds, retransmission and probes (a lost answer is probed for and
 *   answered header-only again), give-up. Honoured only with an appliance whose JOIN_OK
 *   offers TALLY_CAP_NORESULT; with another one the operation runs as a plain one and
 *   writes the sums into `out` (stats.noresult_fallbacks), so `out` must still be valid.
 * Other bits: -EINVAL. */
#define TALLY_CLIENT_NORESULT 1u
int tally_client_start_flags(struct tally_client *c, uint32_t key, uint32_t round,
			     const void *in, void *out, unsigned flags);
/* 1 done, 0 pending, negative errno failed (the handle is released when done or failed). */
int tally_client_test(struct tally_client *c, int handle);
/* Abandon a pending operation (the caller pushes it elsewhere: its key moved to another
 * appliance while this one still answers, gpu_agent/README.md "Failover"): its chunks
 * stop (no more pushes, re-sends or probes), its window slots are freed, the handle is
 * released, and RESULTs or ERRORs that come for it later are dropped as stale
 * (drops[stale_round]); stats.abandoned counts it. What the appliance holds of it stays
 * there. The round may be started again on this session. 0 abandoned; 1 it is no longer
 * pending (done or failed: test it as usual, nothing changed); -EINVAL no such handle. */
int tally_client_abandon(struct tally_client *c, int handle);
/* A key moved from one appliance's session to another's (failover): the round sums
 * `from` kept for it (the last RESULT per chunk, as for a restart) go to `to`, registered
 * with the same layout, so that `to` answers its appliance's NEED_RESULT for a round the
 * old appliance completed here while a rank that missed that RESULT pushed the round again
 * to the new one. 0 (codec keys keep none: nothing done), -ENOENT (not registered in one),
 * -EINVAL (other layouts: element count, chunk size or dtype differ). */
int tally_client_carry_last(struct tally_client *to, const struct tally_client *from,
			    uint32_t key);
/* Block until done: 0 or negative errno. */
int tally_client_wait(struct tally_client *c, int handle);
/* start + wait. */
int tally_client_allreduce(struct tally_client *c, uint32_t key, uint32_t round,
			   const void *in, void *out);

/* Non-blocking driving, for transports that deliver packets themselves. */
void tally_client_rx(struct tally_client *c, const void *buf, size_t len);
/* A RESULT whose payload the transport already placed (tally_xport_ops.advertise): the
 * header as received (hlen bytes, its auth block included) and the payload where it lies.
 * Checked as any packet (CRC or MAC over those bytes); when the payload lies where the
 * session would copy it, the copy is skipped (stats.results_placed). */
void tally_client_rx_placed(struct tally_client *c, const void *hdr, size_t hlen,
			    const void *payload, size_t plen);
/* Retransmit due chunks, send queued ones; returns the ns until the next timer (or
 * UINT64_MAX when idle). */
uint64_t tally_client_tick(struct tally_client *c);

/* Codec keys (a non-zero REGISTER compression, e.g. TALLY_COMP_ONEBIT): in/out of start()
 * are the key's opaque wire layout, chunk c at c * the codec's wire bytes of chunk_elems
 * (one-bit: TALLY_ONEBIT_BYTES(chunk_elems), tally_proto.h); the RESULT's wire bytes
 * (one-bit: [scale][bits]) are written back likewise. A RESULT that leaves this worker out
 * is not folded here (one-bit signs do not add up in f32): 1 when chunk `chunk` of `round`
 * was left out, for the caller to fold into its codec state (the worker error); 0
 * otherwise; -ENOENT (no such codec key or chunk). */
int tally_client_excluded(const struct tally_client *c, uint32_t key, uint32_t round,
			  uint32_t chunk);

/* Leave the job (BYE to every core, best effort). */
void tally_client_bye(struct tally_client *c);

/* The last error's text (which key, round, chunk, appliance core), or "". */
const char *tally_client_strerror(const struct tally_client *c);
const struct tally_client_stats *tally_client_stats(const struct tally_client *c);
uint16_t tally_client_ncores(const struct tally_client *c);
/* enum tally_client_state: UP (answers come, or nothing outstanding), SILENT (probing),
 * DOWN (silent for dead_ms), DRAINING (it refused a push: draining). */
int tally_client_state(const struct tally_client *c);

#ifdef __cplusplus
}
#endif
#endif
