/* SPDX-License-Identifier: Apache-2.0
 * tally_engine.h — the appliance-side aggregation engine, one instance per datapath core.
 * An instance is used by one thread only; readers on other threads may read the stats
 * block (plain counters, summed by readers, torn reads tolerated).
 *
 * Rules (DESIGN.md "Aggregation"):
 *  - Jobs: (job id, token, world size). Added by the operator (tally_engine_job_add) or, with
 *    cfg.open_admission, by the first JOIN (its token and world size fix the job). Every
 *    packet's job id and token are checked. JOIN binds rank → address; a JOIN for a rank bound
 *    to a different address is refused (TALLY_R_RANK_TAKEN) unless nothing was heard from
 *    that rank for cfg.rejoin_timeout_ns (worker restart). JOIN is answered with JOIN_OK.
 *    Each core's engine binds ranks on its own: a worker JOINs every core it uses, or a
 *    REGISTER from an unbound rank (valid job and token) binds it as a JOIN would.
 *    A JOIN whose world_size is non-zero and differs from the job's is TALLY_R_BAD_RANK.
 *  - Keys: registered by REGISTER (first one creates, later identical ones are acked, a
 *    different one gets ERROR KEY_CONFLICT) or by tally_engine_key_register(). Memory for
 *    accumulators and chunk state comes from cfg.mem_budget at registration; exceeding it is
 *    -ENOMEM / TALLY_R_NO_MEMORY. Nothing is allocated on the PUSH path.
 *  - Memory: every allocation happens in tally_engine_create (cfg.alloc is called there
 *    only). Keys come from a per-core arena of cfg.mem_budget bytes carved then (one block
 *    per key: state, bitmaps, transport buffer state, accumulators; first fit, coalesced on
 *    free), so REGISTER on the datapath core takes no lock and makes no syscall;
 *    tally_engine_mem_used() is the arena's bytes in use (block headers included), and a
 *    fragmented arena also answers NO_MEMORY. Job slots own fixed rank tables (max_jobs x
 *    TALLY_MAX_WORKERS) carved at create, so an open-admission JOIN allocates nothing.
 *    A removed key whose RESULT buffers the transport still references stays charged until
 *    tally_engine_poll() finds them released.
 *  - Per key: two parity slots (round & 1), each with an accumulator (f32; i32 for i32
 *    keys), and per chunk a contributor bitmap, a "seen" bitmap (any push of that round,
 *    late ones included), a count, a round number and a state.
 *  - PUSH (key, round r, chunk c) from rank w, slot p = r & 1:
 *      * slot holds round r, open: w's bit set → duplicate (counted, not added, answered
 *        HELD); else add (first contribution loads), set bit; count == quorum → complete:
 *        RESULT to every joined participant, flag INCLUDED per recipient, contrib = count;
 *        (HELD, MISSING and AUX_LAST only to workers whose JOIN offered TALLY_CAP_HELD)
 *        count < quorum → HELD to w (coalesced: consecutive chunks of one worker's key and
 *        round share one HELD, sent before any RESULT and at the latest at
 *        tally_engine_poll(); call it once per receive burst).
 *      * slot holds round r, complete: a RESULT unicast to w (RESEND flag if w was
 *        included, i.e. a duplicate); w's push is NOT added (it is folded by the worker into
 *        its next push, eager-SGD); mark w seen.
 *      * slot holds round r-2 (or is unused): starting round r needs every participant to
 *        have acknowledged round r-2, i.e. the other slot holds round r-1 with every
 *        participant seen (a participant not bound — left with BYE — does not count) and
 *        round r-2 complete. Otherwise TALLY_R_TOO_EARLY (worker retransmits later). For
 *        r < 2 an unused slot may start when the other slot is unused or holds r±1
 *        (the same holds for any r, so a key may start at any round, e.g. after a
 *        failover).
 *      * slot holds a round > r, or < r-2: TALLY_R_STALE_ROUND.
 *  - Deadline (key's deadline_us > 0): a chunk still open that long after its first push
 *    completes with whatever it has (tally_engine_poll()).
 *  - Deterministic keys: a chunk is summed in rank order, left to right, so its bits do not
 *    depend on arrival order. A push whose lower-ranked contributions are all in goes
 *    straight into the accumulator; any other push is staged in a buffer from a per-core
 *    pool (cfg.det_pool_bytes; exhausted → TALLY_R_POOL_FULL, the worker retries) and
 *    added in rank order as soon as its turn comes or at completion.
 *      * a slot whose RESULT buffer the transport still references (a copy of round r-2
 *        queued for transmit, tally_xport_ops.buf_busy) is not reused either:
 *        TALLY_R_TOO_EARLY, counted in result_busy; the queued copies never change.
 *  - One-bit keys (REGISTER compression TALLY_COMP_ONEBIT, dtype f32; 1-bit Adam / LAMB,
 *    the appliance as DeepSpeed's server stage): a push's payload is [f32 scale_w][bits]
 *    (tally_proto.h TALLY_F_ONEBIT; a push without the flag, or a flagged push to another
 *    key, is CHUNK_MISMATCH). It is added to the parity's f32 accumulator as ±scale_w per
 *    element (tally_sum_sign_unpack for the first contribution, _unpack_acc after; in rank
 *    order for deterministic keys, the staged pushes kept compressed). At completion the
 *    sum is multiplied by (f32)(1 / contrib) -- the average over the contributors that
 *    made it, so with a quorum it is the average of those Q pushes, not of W --, then
 *    compressed with the key's server error (tally_sum_onebit_compress: c = avg + err,
 *    scale_s = ||c|| / sqrt(n), bits = sign(c), err = c - scale_s * sign(c)) into the
 *    chunk's RESULT payload [scale_s][bits], sent with TALLY_F_ONEBIT. The server error is
 *    f32 per element, zero at registration, charged to the key's arena block, and survives
 *    rounds (a chunk's round r+1 cannot complete before its round r). A worker left out
 *    gets the RESULT without INCLUDED as usual; its contribution is not folded by the
 *    client (signs cannot be summed into f32) but by the caller, into its worker error.
 *  - PULL (key, round, offset): re-sends that RESULT if the slot holds that round complete;
 *    answers HELD at once if it holds that round open with the sender's push in (a probe);
 *    HELD with TALLY_F_MISSING if that round is open without it or not started here (the
 *    worker re-sends its push; a round not started is also counted TOO_EARLY as before).
 *  - BYE unbinds the rank; a BYE for a rank bound elsewhere (address or MAC) is BYE_REFUSED.
 *  - Identity and guard (engine_guard.c): a rank is bound to (IP, port, transport cookie,
 *    MAC); every packet that passes job, token and address refreshes its "last heard"
 *    (retransmissions, PULLs and refused pushes included). A JOIN or REGISTER for a bound
 *    rank from another address is RANK_TAKEN, from the same IP/port with another MAC
 *    MAC_MISMATCH, until the rank was silent cfg.rejoin_timeout_ns (then it re-binds,
 *    counted in rebinds); a data packet from the bound IP/port with another MAC is
 *    MAC_MISMATCH. cfg.allow is checked before anything; open admission is limited to
 *    cfg.admit_subnet, cfg.quota_ranks and cfg.admit_claims pending claims, and a claim
 *    with no key after cfg.admit_timeout_ns is ended. REGISTER beyond the job's quotas is
 *    QUOTA_KEYS / QUOTA_BYTES (engine_key.c).
 *  - PING (tally_proto.h): answered PING+ACK to a joined rank, ERROR (NOT_JOINED,
 *    WRONG_JOB, ...) to anyone else; both, JOIN_OK and every ERROR carry cfg.boot_id, so a
 *    worker tells a restart from a slow appliance (pings counts them).
 *  - After a restart (engine_recover.c): a chunk open at round r whose other parity holds
 *    r+1 has every rank seen at r+1 but not at r asked for round r's sum (ERROR
 *    NEED_RESULT, need_asks), after each push that does not complete it and each PULL of
 *    it. A PUSH with TALLY_F_COMPLETE (contrib = participants; one-bit keys and partial
 *    sums are UNSUPPORTED) is installed as round r's result when that chunk is open at r:
 *    the partial sum and deterministic staging of the re-pushes are dropped, every
 *    participant's bit set, and the chunk completes as usual (installs); a second one is a
 *    duplicate, one for a chunk not open at that round STALE_ROUND.
 *  - Job lifecycle (engine_life.c): a job ends when every rank bound to it has said BYE
 *    (jobs_freed_bye), or when no packet came from any of its ranks for
 *    cfg.job_idle_timeout_ns (jobs_freed_idle; tally_engine_poll checks one job slot per
 *    call, round-robin). Ending frees its keys and memory and drops its rank bindings; an
 *    open-admission job also gives its slot back, an operator-admitted one keeps its
 *    admission (id, token, world, policy). A JOIN that needs a new slot when all max_jobs
 *    are in use is refused TALLY_R_JOB_TABLE_FULL (not NO_MEMORY).
 *  - Incarnations: JOIN carries a 64-bit incarnation (one launch of the job; 0 = none
 *    given, accepted by any incarnation as before). The job takes the first non-zero one it
 *    sees. A JOIN (right token) with another non-zero incarnation is adopted, i.e. the job's
 *    keys and bindings are dropped, it takes the new incarnation (counted in incarnations)
 *    and the JOIN proceeds, when
 *      (a) the job is silent: nothing from any rank for cfg.rejoin_timeout_ns, or
 *      (b) the joining rank is still bound at exactly the JOIN's address (IP, port,
 *          cookie): one socket cannot belong to two launches, so its owner relaunched;
 *    else it is refused TALLY_R_INCARNATION_LIVE (clients retry it like RANK_TAKEN). A
 *    straggler of the replaced incarnation is safe: its data packets come from an address
 *    that is no longer bound (NOT_JOINED, dropped), and its JOIN names an incarnation other
 *    than the job's while the new one is heard, so it is refused.
 *  - Dead rank: a chunk open for cfg.dead_rank_timeout_ns with a participant whose push is
 *    missing and who has been silent (no packet to this core) as long gets ERROR RANK_SILENT
 *    sent to each bound participant whose push is in (hdr.rank the recipient, hdr.aux the
 *    silent rank, hdr.count its silence in ms, key/round/offset the chunk); tally_engine_poll
 *    looks at the oldest open chunk of one key per call, and a key reports at most once per
 *    timeout period (dead_rank_errors counts reports).
 *  - Draining: a push refused TALLY_R_DRAINING is answered with ERROR DRAINING (aux PUSH),
 *    at most once per rank per ENGINE_DRAIN_ERR_GAP_NS (drain_errors counts them).
 *  - Stale round: a push (or its probe, a PULL) of a round the key's slot has passed
 *    (STALE_ROUND) is answered with
 *    ERROR STALE_ROUND at most once per rank per ENGINE_STALE_ERR_GAP_NS (stale_errors counts
 *    them): a delayed duplicate's is ignored by its sender (that round is done there), but a
 *    launch that meets another launch's rounds (same job, token and incarnation) learns why
 *    its pushes go unanswered instead of waiting for its operation timeout.
 *  - Every rejection returns its reason, is counted in drops[reason] and changes no state.
 *    Rejected control requests (JOIN, REGISTER) are answered with ERROR when the sender's
 *    address is known; data packets are dropped silently.
 */
#ifndef TALLY_ENGINE_H
#define TALLY_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "tally_proto.h"
#include "tally_xport.h"

struct tally_auth; /* tally_auth.h */

#ifdef __cplusplus
extern "C" {
#endif

struct tally_engine;

/* An IPv4 prefix, network order: ip matches when (ip & mask) == net. */
struct tally_engine_cidr {
	uint32_t net, mask;
};
#define TALLY_ENGINE_MAX_ALLOW 16

struct tally_engine_cfg {
	uint16_t core_index;       /* this core's index (JOIN_OK) */
	uint16_t ncores;           /* cores of the appliance (JOIN_OK) */
	uint16_t base_port;        /* UDP base port (JOIN_OK) */
	uint32_t max_chunk_bytes;  /* largest payload this appliance accepts (<= TALLY_MAX_PAYLOAD) */
	size_t mem_budget;         /* bytes for keys: accumulators, result buffers, chunk state */
	size_t det_pool_bytes;     /* staging pool for deterministic keys (0: none allowed) */
	uint32_t max_jobs;         /* default 16 */
	uint32_t max_keys;         /* default 65536 */
	int open_admission;        /* first JOIN creates its job (embedded quick start only) */
	uint64_t rejoin_timeout_ns;/* default 5 s */
	/* The key arena (mem_budget bytes) and the deterministic pool, NUMA-local hugepages on
	 * DPDK; called by tally_engine_create/destroy only. NULL: aligned_alloc/free. */
	void *(*alloc)(void *actx, size_t size, size_t align);
	void (*free)(void *actx, void *p);
	void *alloc_ctx;
	uint64_t job_idle_timeout_ns;  /* default 60 s: a job silent this long is ended */
	uint64_t dead_rank_timeout_ns; /* default 10 s: a chunk waiting this long on a rank silent
					* as long gets ERROR RANK_SILENT to the waiting ranks */
	/* Guard (engine_guard.c; THREAT_MODEL.md). Addresses and masks in network order. */
	uint32_t nallow;           /* source allow-list: 0 = every source; else a packet from
				    * outside allow[0..nallow) is NOT_ALLOWED before anything */
	struct tally_engine_cidr allow[TALLY_ENGINE_MAX_ALLOW];
	struct tally_engine_cidr admit_subnet; /* open admission only from here (mask 0: any) */
	uint64_t admit_timeout_ns; /* default 10 s: an open-admission job that registered no key
				    * this long after its first JOIN is ended (claims_expired) */
	uint64_t admit_bytes;      /* key memory all open-admission jobs together may hold
				    * (QUOTA_BYTES; default mem_budget / 2): the rest is operator
				    * admission's */
	uint32_t admit_claims;     /* default max_jobs / 2 (at most max_jobs - 1): open-admission
				    * jobs at once, keyed or not (keyless ones expire);
				    * a JOIN for one more is ADMIT_LIMIT */
	/* Quotas per job on this engine (checked at REGISTER, engine_key.c), 0 = none; an
	 * operator-admitted job may have its own (tally_engine_job_quota). */
	uint32_t quota_keys;       /* keys a job may register (QUOTA_KEYS) */
	uint64_t quota_bytes;      /* key memory a job may hold (QUOTA_BYTES) */
	uint32_t quota_ranks;      /* world size an open-admission JOIN may ask (QUOTA_RANKS) */
	struct tally_engine_live *live; /* "last heard" per rank shared by every core of the
				    * appliance (tally_engine_live_create); NULL: per core only */
	int takes_gso;             /* the appliance receives on kernel UDP sockets, which hand
				    * GSO-segmented datagrams over one by one: JOIN_OK offers
				    * TALLY_CAP_GSO (tally-udpd; never a DPDK appliance) */
	uint64_t boot_id;          /* this start of the appliance, in JOIN_OK / PING answers /
				    * ERRORs (tally_proto.h PING): every core of one appliance
				    * gives the same; 0: tally_engine_create draws one */
};

/* One per appliance, given to every core's engine (cfg.live) and destroyed after them:
 * a rank heard on any core is alive on all, so a JOIN from another IP cannot take it on a
 * core it is not talking to (engine_live.c). NULL on ENOMEM. */
struct tally_engine_live *tally_engine_live_create(uint32_t max_jobs);
void tally_engine_live_destroy(struct tally_engine_live *l);

/* Engine counters, one X(field, shown_name, help) each: the struct, the names the control
 * plane shows and its sum are all generated from this list (drops[] by reason follow). The
 * engine's own packet counters are shown as engine_* (the appliance counts frames too). */
#define TALLY_ENGINE_STATS(X) \
	X(rx_pkts, engine_rx_pkts, "packets handed to the engine") \
	X(rx_bytes, engine_rx_bytes, "their bytes") \
	X(tx_pkts, engine_tx_pkts, "packets the engine sent") \
	X(tx_bytes, engine_tx_bytes, "their bytes") \
	X(tx_errors, tx_errors, "sends the transport refused") \
	X(joins, joins, "JOINs accepted") \
	X(registers, registers, "REGISTERs accepted") \
	X(pulls, pulls, "PULLs answered (RESULT, or HELD: see probes)") \
	X(byes, byes, "BYEs accepted") \
	X(pushes, pushes, "pushes added to an accumulator") \
	X(push_bytes, push_bytes, "payload bytes of those pushes (goodput)") \
	X(duplicates, duplicates, "pushes whose bit was already set (open chunk: answered HELD)") \
	X(late_pushes, late_pushes, "pushes after completion (not added)") \
	X(completions, completions, "chunks completed") \
	X(quorum_completions, quorum_completions, "completed with count < participants") \
	X(deadline_completions, deadline_completions, "completed by deadline") \
	X(results, results, "RESULT packets sent (fan-out copies)") \
	X(resends, resends, "RESULT re-sent (duplicate push, late push, PULL)") \
	X(result_busy, result_busy, "pushes refused (too_early, also in drops): the slot's " \
	  "previous RESULT copies were still queued in the transport") \
	X(onebit_pushes, onebit_pushes, "one-bit pushes decompressed into an accumulator " \
	  "(also in pushes)") \
	X(onebit_results, onebit_results, "one-bit chunks compressed by the server stage") \
	X(jobs_freed_bye, jobs_freed_bye, "jobs ended: every bound rank said BYE") \
	X(jobs_freed_idle, jobs_freed_idle, "jobs ended: no packet for the job idle timeout") \
	X(incarnations, incarnations, "jobs replaced by a new incarnation (relaunch)") \
	X(dead_rank_errors, dead_rank_errors, "RANK_SILENT reports (ERRORs to waiting ranks)") \
	X(drain_errors, drain_errors, "ERROR DRAINING sent for refused pushes") \
	X(stale_errors, stale_errors, "ERROR STALE_ROUND sent for pushes of a round a key has passed") \
	X(held_sent, held_sent, "HELD acknowledgements sent (one covers a range of chunks)") \
	X(held_chunks, held_chunks, "chunk pushes acknowledged HELD (chunk still open)") \
	X(probes, probes, "PULLs for an open chunk holding the sender's push, answered HELD") \
	X(missing, missing, "PULLs for a chunk without the sender's push, answered MISSING") \
	X(rebinds, rebinds, "ranks re-bound to a new address or MAC after the rejoin timeout") \
	X(unconfirmed_rebinds, unconfirmed_rebinds, "keyed ranks taken by a newer JOIN before " \
	  "any packet under the bound JOIN's session came (a replayed JOIN of an earlier run)") \
	X(claims_expired, claims_expired, "open-admission jobs ended: no key registered within " \
	  "the admission timeout") \
	X(pings, pings, "liveness PINGs answered (PING+ACK, or ERROR to an unknown worker)") \
	X(need_asks, need_asks, "ERROR NEED_RESULT sent: a rank re-pushed round r after a " \
	  "restart while others were at r+1") \
	X(installs, installs, "complete sums installed as a round's result (TALLY_F_COMPLETE)") \
	X(installs_unasked, installs_unasked, "TALLY_F_COMPLETE pushes refused (stale_round, " \
	  "also in drops): no NEED_RESULT asked for that chunk and round") \
	X(gone_reports, gone_reports, "GONE reports that grew a job's set of gone appliances " \
	  "(its workers failed over from another appliance)") \
	X(auth_verified, auth_verified, "received packets whose per-packet MAC verified") \
	X(auth_signed, auth_signed, "packets sent signed with a per-packet MAC") \
	X(conn_auth_rx, conn_auth_rx, "packets of keyed jobs taken without a MAC from a " \
	  "connection authenticated at setup (verbs)") \
	X(conn_auth_tx, conn_auth_tx, "packets of keyed jobs sent unsigned to such a connection") \
	X(done_answers, done_answers, "PULLs for a completed chunk answered HELD+DONE (header " \
	  "only: its RESULT had gone out; a PULL+DONE gets the payload)") \
	X(held_trimmed, held_trimmed, "pending HELDs not sent: the RESULT of their chunk " \
	  "followed at once and answers the push") \
	X(result_bytes, result_bytes, "payload bytes of the RESULTs sent (the downlink's sums)") \
	X(noresult_acks, noresult_acks, "RESULTs sent header-only (also in results): the " \
	  "rank's push asked TALLY_F_NORESULT, e.g. a reduce-scatter shard it does not own")

struct tally_engine_stats {
#define TALLY_ENGINE_STAT_FIELD(f, name, help) uint64_t f;
	TALLY_ENGINE_STATS(TALLY_ENGINE_STAT_FIELD)
#undef TALLY_ENGINE_STAT_FIELD
	uint64_t drops[TALLY_R_COUNT];
};

/* Fills defaults for every zero field it can (max_jobs, max_keys, rejoin, idle and dead
 * rank timeouts, max_chunk_bytes = 8192, mem_budget = 256 MiB, ncores = 1, base_port = 9170). */
void tally_engine_cfg_defaults(struct tally_engine_cfg *cfg);

/* Returns NULL and sets *err (negative errno) on failure. ops/xctx are used for every send. */
struct tally_engine *tally_engine_create(const struct tally_engine_cfg *cfg,
					 const struct tally_xport_ops *ops, void *xctx,
					 int *err);
void tally_engine_destroy(struct tally_engine *e);

/* Operator admission. 0, -EEXIST (same id, other token/world), -ENOSPC, -EINVAL. */
int tally_engine_job_add(struct tally_engine *e, uint32_t job_id, uint64_t token,
			 uint32_t world_size);
/* An operator-admitted job's own quotas (0: the engine's cfg.quota_keys / quota_bytes);
 * they bound later REGISTERs, keys already held stay. 0, -ENOENT. */
int tally_engine_job_quota(struct tally_engine *e, uint32_t job_id, uint32_t quota_keys,
			   uint64_t quota_bytes);
/* Give an admitted job its key (tally_auth.h; the operator's, never sent on the wire):
 * from then on the job takes only TALLY_F_AUTH packets whose GMAC verifies (drops:
 * bad_mac, auth_required; a JOIN refused so is answered with an unsigned ERROR naming the
 * reason), every packet the engine sends it is signed, JOIN nonces must increase per rank
 * and BYE repeats the bound JOIN's (replay). A job without a key refuses TALLY_F_AUTH
 * packets (no_key). The key stays with the admission (job ends and incarnations keep it).
 * 0 (also: the same key again), -ENOENT (no such job), -EEXIST (it has another key),
 * -EINVAL, -EIO. Call on the engine's thread, off the datapath (it keys a context). */
int tally_engine_job_key(struct tally_engine *e, uint32_t job_id, const uint8_t key[32]);
/* A keyed job's run nonce (issue 33): every signed packet's tag covers it and the worker's
 * JOIN nonce (tally_auth.h TALLY_AUTH_SESS_LEN), so packets recorded in an earlier run of
 * the job (another install of its key: job-add again, or another appliance start) fail
 * the tag (bad_mac). tally_engine_job_key draws one per core; an appliance with several
 * cores gives each the same one (one drawn per admission) after the key, since a worker
 * learns it once, from core 0's JOIN_OK. 0, -ENOENT, -EINVAL (no key, or run 0). */
int tally_engine_job_run(struct tally_engine *e, uint32_t job_id, uint64_t run);
/* 1 when the job has a key. */
int tally_engine_job_keyed(struct tally_engine *e, uint32_t job_id);
/* The job's GMAC context (NULL: no such job, or no key), for a transport that
 * authenticates connections at setup with the job's key (tally_verbs.h auth_lookup). Use
 * it on the engine's thread only, off the datapath; its key never leaves it. */
struct tally_auth *tally_engine_job_auth(struct tally_engine *e, uint32_t job_id);
/* Evict a job: its keys and memory are freed. 0 or -ENOENT. */
int tally_engine_job_remove(struct tally_engine *e, uint32_t job_id);

/* Register a key directly (same checks as REGISTER). 0, -EEXIST (conflicting), -ENOMEM,
 * -EDQUOT (the job's key or byte quota),
 * -ENOENT (no such job), -EINVAL (bad parameters), -ENOSPC (max_keys). */
int tally_engine_key_register(struct tally_engine *e, uint32_t job_id, uint32_t key,
			      const struct tally_register *reg);

/* One received packet. Returns TALLY_OK or the reason it was rejected (also counted). */
enum tally_reason tally_engine_rx(struct tally_engine *e, const void *buf, size_t len,
				  const struct tally_addr *from);

/* Timers (deadline completions; memory of removed keys the transport released; one job's
 * idle check and one key's dead-rank check per call). Call regularly from the core's loop. Returns the number of chunks completed by deadline. */
unsigned tally_engine_poll(struct tally_engine *e);

/* Live policy for a key (quorum 1..participants, deadline_us, deterministic is fixed at
 * registration). Takes effect for chunks not yet complete. 0, -ENOENT, -EINVAL. */
int tally_engine_key_policy(struct tally_engine *e, uint32_t job_id, uint32_t key,
			    uint16_t quorum, uint32_t deadline_us);

/* Job-wide policy: stored on the job and applied to its keys now and to every key created
 * later (a quorum of 0 or above a key's participants means all participants, for that key).
 * set_quorum / set_deadline say which of the two it changes. It overrides the per-key
 * policy of every key of the job. 0, -ENOENT (no such job). */
int tally_engine_job_policy(struct tally_engine *e, uint32_t job_id, int set_quorum,
			    uint16_t quorum, int set_deadline, uint32_t deadline_us);

const struct tally_engine_stats *tally_engine_stats(const struct tally_engine *e);
void tally_engine_stats_reset(struct tally_engine *e);
/* Bytes of the memory budget in use. */
size_t tally_engine_mem_used(const struct tally_engine *e);

/* ---- Introspection and drain, for the control plane. Call on the engine's own thread
 * (the appliance marshals control requests there). Walkers call cb once per item in a
 * stable order; a non-zero return from cb stops the walk and is returned. ---- */

struct tally_engine_job_info {
	uint32_t job_id;
	uint32_t world_size;
	uint32_t joined;           /* ranks bound to an address */
	uint32_t keys;             /* keys registered */
	int open_admission;        /* created by the first JOIN */
	uint32_t gone;             /* appliances its workers reported GONE (bit i: the i-th of
				    * the job's appliance list): they failed over from them */
	uint64_t incarnation;      /* the launch it serves (0: none given yet) */
	uint64_t mem_bytes;        /* key memory charged to it (its quota counts this) */
	uint32_t quota_keys;       /* its quotas in force (0: none) */
	uint32_t reserved2;
	uint64_t quota_bytes;
};
int tally_engine_walk_jobs(const struct tally_engine *e,
			   int (*cb)(void *arg, const struct tally_engine_job_info *ji),
			   void *arg);

struct tally_engine_worker_info {
	uint32_t job_id;
	uint32_t rank;
	struct tally_addr addr;    /* learned from its JOIN */
	uint64_t last_heard_ns;    /* engine clock at its last accepted packet (the PUSH
				    * path uses the clock as of the last poll/chunk start) */
	uint64_t pkts;             /* packets accepted from it */
	uint64_t bytes;            /* their bytes */
};
/* Bound ranks only, job by job, rank order. */
int tally_engine_walk_workers(const struct tally_engine *e,
			      int (*cb)(void *arg, const struct tally_engine_worker_info *wi),
			      void *arg);

enum tally_slot_state {
	TALLY_SLOT_UNUSED = 0,     /* no round ever started in this parity */
	TALLY_SLOT_OPEN = 1,       /* its round has chunks not yet complete */
	TALLY_SLOT_COMPLETE = 2,   /* every chunk of its round complete */
};

struct tally_engine_key_info {
	uint32_t job_id, key;
	uint32_t nelems, chunk_elems, nchunks;
	uint8_t dtype;             /* enum tally_dtype */
	uint8_t deterministic;
	uint16_t participants, quorum;
	uint32_t deadline_us;
	uint32_t rounds_open;      /* 0..2: parities whose round is still open */
	struct {
		uint32_t round;            /* the round this parity holds (last started) */
		uint8_t state;             /* enum tally_slot_state */
		uint32_t chunks_open;      /* started, not complete */
		uint32_t chunks_complete;  /* complete in this round */
	} parity[2];
	size_t mem_bytes;          /* budget charged for this key */
};
int tally_engine_walk_keys(const struct tally_engine *e,
			   int (*cb)(void *arg, const struct tally_engine_key_info *ki),
			   void *arg);

struct tally_engine_stuck_info {
	uint32_t job_id, key, round;
	uint32_t offset;           /* chunk offset in elements */
	uint32_t count;            /* chunk elements */
	uint64_t age_ns;           /* since the chunk's first push */
	uint16_t contrib;          /* pushes summed so far */
	uint16_t participants;
	/* Bitmap of participant ranks whose push is missing (bit r of word r/64); valid only
	 * during the callback. */
	const uint64_t *missing;
	uint32_t missing_words;
};
/* Chunks open for at least min_age_ns, oldest first within each key. */
int tally_engine_walk_stuck(const struct tally_engine *e, uint64_t min_age_ns,
			    int (*cb)(void *arg, const struct tally_engine_stuck_info *si),
			    void *arg);

/* Drain: while set, a push that would start a new round of a key is refused with
 * TALLY_R_DRAINING (counted, dropped); rounds already open finish normally. */
void tally_engine_set_draining(struct tally_engine *e, int on);
int tally_engine_draining(const struct tally_engine *e);
/* What is still open: rounds (key parities with chunks not yet complete) and chunks
 * (started, not complete). Drain is done when both are 0. */
uint64_t tally_engine_open_rounds(const struct tally_engine *e);
uint64_t tally_engine_open_chunks(const struct tally_engine *e);

#ifdef __cplusplus
}
#endif
#endif
