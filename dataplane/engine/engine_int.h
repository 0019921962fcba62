/* SPDX-License-Identifier: Apache-2.0
 * engine_int.h — internal state of the aggregation engine, shared by engine*.c only.
 *
 * Files, each calling only files listed after it (no file cycle):
 *   engine.c        create/destroy, rx dispatch (op switch), poll, stats, drain
 *   engine_job.c    jobs: operator and open admission (own quotas), JOIN/BYE, walkers
 *   engine_guard.c  allow-list, open-admission limits and claim expiry, BYE identity
 *   engine_life.c   job lifecycle: end (BYE, idle), incarnations, dead-rank reports
 *   engine_key.c    registration (key memory from the arena, per-job quotas), removal,
 *                   policy (per key and job-wide), key walker
 *   engine_chunk.c  PUSH, completion (TALLY_KEY_AVERAGE: the sum scaled before its
 *                   rounding), PULL, deadlines, stuck walker,
 *                   complete-sum installs after a restart (TALLY_F_COMPLETE)
 *   engine_result.c RESULTs: the fan-out, copies to one rank, owner mode's header-only
 *                   RESULT (TALLY_F_NORESULT)
 *   engine_recover.c restart support: PING answers, NEED_RESULT asks
 *   engine_det.c    deterministic staging pool
 *   engine_codec.c  the codec registry: one line per server stage, by compression id
 *   engine_onebit.c one-bit keys: decompress-accumulate, the server stage at completion
 *   engine_held.c   HELD acknowledgements, coalesced into ranges
 *   engine_ktab.c   the key hash table
 *   engine_auth.c   who sent a packet: rank identity (address equality, the per-packet
 *                   check, binding); job keys, verify on receive, JOIN/BYE nonces
 *   engine_util.c   shared helpers: drop/send/reject, create-time memory, job lookup
 *   engine_arena.c  the per-core allocator keys come from (engine_arena.h)
 */
#ifndef ENGINE_ENGINE_INT_H
#define ENGINE_ENGINE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "engine_arena.h"
#include "tally_auth.h"
#include "tally_engine.h"

#define ENGINE_NIL UINT32_MAX
#define ENGINE_BM_WORDS_MAX ((TALLY_MAX_WORKERS + 63) / 64)

enum { ENGINE_CH_UNUSED = 0, ENGINE_CH_OPEN = 1, ENGINE_CH_DONE = 2 };
enum { ENGINE_HOW_QUORUM = 0, ENGINE_HOW_DEADLINE = 1 };

/* One chunk in one parity slot. */
struct engine_chunk {
	uint32_t round;
	uint8_t state;        /* ENGINE_CH_* */
	uint8_t asked;        /* a NEED_RESULT went out for this round (engine_recover.c):
			       * only then is a TALLY_F_COMPLETE push installed */
	uint16_t count;       /* contributions summed (or staged) */
	uint16_t nseen;       /* participants seen in this round, contributors included */
	uint16_t folded;      /* deterministic: ranks 0..folded-1 summed into acc in order */
	uint32_t prev, next;  /* the key's open list (index into key->chunks) */
	uint32_t det_head;    /* staged pushes by ascending rank (deterministic), ENGINE_NIL: none */
	uint32_t crc;         /* CRC32C of the RESULT payload, once complete */
	uint32_t stamp;       /* once complete: the send stamp of its last RESULT copy
			       * (tally_proto.h, TALLY_F_DONE) */
	uint32_t ask_ms;      /* engine ms of its last NEED_RESULT asks (asked: rate limit) */
	uint64_t first_ns;    /* now_ns() of the first push (deadline, stuck age); once
			       * complete, of the completion (did a PULL cross the RESULT?) */
};

/* Key-level view of one parity: the round last started there. */
struct engine_par {
	uint32_t round;
	uint8_t started;
	uint8_t open;          /* counted in e->open_rounds */
	uint32_t chunks_open;  /* open chunks in this parity (any round) */
	uint32_t chunks_done;  /* chunks of `round` complete */
};

struct engine_job;

struct tally_engine;
struct engine_key;
/* The server stage of a compression codec (REGISTER compression id selects it): decode a
 * push into the f32 accumulator (first: load, else add), encode the RESULT from the sum
 * with the key's state; wire_bytes sizes a push/RESULT of n elements, flag marks its
 * packets. Registration: the key's REGISTER dtype must be `dtype` and a chunk's wire bytes
 * (wire_bytes(chunk_elems)) fit max_chunk_bytes; its arena block holds, per parity, the
 * RESULT buffers (key_bytes: chunk c at c * wire_bytes(chunk_elems)) and, once, the state
 * kept across rounds (state_bytes, zeroed; 0: none). One line per codec in
 * engine_codec_tab (engine_codec.c); NULL for plain keys. */
struct engine_codec {
	const char *name;
	uint8_t id;       /* TALLY_COMP_* */
	uint8_t dtype;    /* the REGISTER dtype it takes (TALLY_DT_*) */
	uint8_t recover;  /* may a rank's RESULT stand in for a lost round */
	uint16_t flag;    /* TALLY_F_* carried by its pushes and RESULTs */
	size_t (*wire_bytes)(uint32_t n);
	size_t (*key_bytes)(uint32_t nelems, uint32_t chunk_elems);
	size_t (*state_bytes)(uint32_t nelems);
	void (*add)(struct tally_engine *e, float *acc, const void *payload, uint32_t n, int first);
	void (*result)(struct tally_engine *e, struct engine_key *k, uint32_t idx, float *acc,
		       uint32_t n, uint16_t contrib);
};
/* engine_codec.c (refers to each codec's file only) */
/* The codec registered for compression id, NULL for TALLY_COMP_NONE or an unknown id. */
const struct engine_codec *engine_codec_by_id(uint8_t id);
/* engine_onebit.c (a leaf): 1-bit Adam / LAMB, TALLY_COMP_ONEBIT */
extern const struct engine_codec engine_onebit_codec;


struct engine_key {
	uint32_t job_id, key;
	struct engine_job *job;
	struct tally_register reg; /* as registered (REGISTER conflict check) */
	uint16_t quorum;           /* live policy */
	uint32_t deadline_us;
	uint64_t deadline_ns;
	uint32_t nchunks;
	uint32_t bm_words;         /* 64-bit words per bitmap */
	uint8_t dtype;
	uint8_t det;
	uint32_t esize;            /* wire bytes per element */
	void *acc[2];              /* f32 (or i32) accumulators, one per parity */
	void *res[2];              /* wire-dtype result buffers (f16/bf16 keys), else NULL */
	struct engine_chunk *chunks;   /* [2 * nchunks], parity-major */
	uint64_t *bits;            /* per chunk: contributors, seen, and noresult (its push
				    * asked TALLY_F_NORESULT), bm_words each */
	uint32_t open_head, open_tail;
	struct engine_key *dl_prev, *dl_next; /* engine list of deadline keys with open chunks */
	uint8_t on_dl;
	struct engine_par par[2];
	uint32_t vidx;             /* index in e->keys */
	size_t mem;                /* budget charged (the key's arena block) */
	uint8_t *xbufs;            /* transport state per RESULT buffer, [2 * nchunks] of
				    * e->xbuf_size bytes (tally_xport_ops.buf_size), or NULL */
	struct engine_key *zombie_next; /* removed, waiting for the transport (e->zombies) */
	uint8_t own_policy;        /* set by tally_engine_key_policy: the job's policy skips it
				    * until the next job-wide one */
	/* codec keys (non-zero REGISTER compression): res[p] holds each chunk's RESULT wire
	 * bytes, wire_stride = codec->wire_bytes(chunk_elems) apart; err is the codec's state
	 * (state_bytes, e.g. the 1-bit server error, f32 per element), zero at registration,
	 * kept across rounds (both parities share it: a chunk's rounds complete in order) */
	const struct engine_codec *codec; /* the key's server stage, NULL: plain (no codec) */
	uint32_t wire_stride;
	float *err;
	uint64_t silent_err_ns;    /* last RANK_SILENT report (rate limit), 0: none */
	uint64_t stall_ns;         /* first push refused TOO_EARLY since a chunk last started */
	uint32_t stall_round, stall_idx; /* that push's round and the slot it waits for */
	uint8_t avg;               /* TALLY_KEY_AVERAGE: RESULT = sum / contributors */
};

struct engine_rank {
	struct tally_addr addr;
	uint8_t bound;
	uint8_t held;          /* its JOIN offered TALLY_CAP_HELD: HELD, MISSING, AUX_LAST */
	uint8_t left;          /* unbound by its BYE (a rank never joined is not left) */
	uint8_t confirmed;     /* keyed job: a packet under the bound JOIN's session came (until
				* then a newer-nonce JOIN may take the rank: a replayed JOIN
				* cannot hold it, engine_bind_check) */
	uint64_t last_ns, pkts, bytes;
	uint64_t drain_err_ns;         /* last ERROR DRAINING to it (rate limit), 0: none */
	uint64_t stale_err_ns;         /* last ERROR STALE_ROUND to it (rate limit), 0: none */
};

struct engine_job {
	uint32_t id;
	uint64_t token;
	uint32_t world;
	uint8_t in_use, open_adm;
	uint32_t joined, nkeys;
	uint64_t run;                  /* keyed: this key install's run nonce (tally_auth.h sess) */
	struct engine_rank *ranks;     /* [world], a fixed slice of e->rank_mem */
	/* job policy (tally_engine_job_policy), applied to every key created afterwards */
	uint8_t pol_quorum_set, pol_deadline_set;
	uint16_t pol_quorum;           /* 0 or above a key's participants: all participants */
	uint32_t pol_deadline_us;
	uint64_t incarnation;          /* 0: none given yet */
	uint64_t last_ns;              /* last packet from any rank, or admission (idle timeout) */
	/* guard and quotas (engine_guard.c; quotas: engine_job.c sets, engine_key.c checks) */
	uint64_t created_ns;           /* admission (open claims expire from here) */
	uint8_t claim;                 /* open admission, no key registered yet */
	uint32_t q_keys;               /* own quotas (0: the engine's) */
	uint64_t q_bytes;
	size_t mem;                    /* arena bytes of its live keys */
	uint32_t gone;                 /* appliances its workers reported GONE (engine_gone.c) */
};

struct engine_stage {                  /* one staged push in the deterministic pool */
	uint32_t next;
	uint32_t rank;
};

/* A HELD not yet sent: chunks [off, end) (elements) of (job, rank, key, round). */
struct engine_held {
	struct tally_addr to;
	uint64_t token;
	uint32_t job_id, rank, key, round;
	uint32_t off, end;
	uint8_t dtype;
	uint16_t flags;        /* TALLY_F_MISSING / TALLY_F_RESEND: never pending, sent at once */
	uint8_t reason;        /* MISSING: TALLY_R_TOO_EARLY when the round cannot start yet */
};
#define ENGINE_HELD_MAX 16

struct tally_engine {
	struct tally_engine_cfg cfg;
	const struct tally_xport_ops *ops;
	void *xctx;
	struct tally_engine_stats st;

	struct engine_job *jobs;       /* [cfg.max_jobs] */
	struct engine_job *last_job;   /* lookup cache */
	struct engine_rank *rank_mem;  /* [max_jobs * TALLY_MAX_WORKERS], carved at create */

	struct engine_arena arena;     /* keys: struct, chunk state, bitmaps, accumulators */
	void *arena_mem;               /* cfg.mem_budget bytes from cfg.alloc, at create */
	uint32_t xbuf_size;            /* ops->buf_size rounded up to 16, 0: none */
	struct engine_key *zombies;    /* removed keys whose RESULT buffers are still sent */

	struct engine_key **ktab;      /* open addressing, linear probing */
	uint32_t kmask;
	struct engine_key **keys;      /* registration order, [cfg.max_keys] */
	uint32_t nkeys;
	size_t mem_used;

	uint64_t now;              /* last clock read */
	struct engine_key *dl_head;
	uint64_t open_rounds, open_chunks;
	int draining;

	/* deterministic staging pool */
	uint8_t *det_mem;
	uint32_t det_nslots, det_slot_bytes, det_nfree;
	uint32_t *det_free;        /* stack of free slot indices */
	struct engine_stage *det_meta;
	const void *det_src[TALLY_MAX_WORKERS]; /* scratch: staged payloads by rank */
	uint32_t life_job, life_key;   /* round-robin cursors of the idle and dead-rank checks */
	uint32_t guard_job;            /* round-robin cursor of the claim expiry */

	struct engine_held held[ENGINE_HELD_MAX]; /* pending HELDs (engine_held.c) */
	uint32_t nheld;
	uint32_t tx_stamp;    /* RESULTs and HELDs sent, their send stamp (tally_proto.h) */

	/* authentication (engine_auth.c): one GMAC context per job slot, created at create
	 * and keyed at admission; the last accepted JOIN nonce per (job slot, rank), kept
	 * across job ends and incarnations so a recorded JOIN or BYE stays refused */
	struct tally_auth **auths;     /* [cfg.max_jobs] */
	uint64_t *join_nonce;          /* [cfg.max_jobs * TALLY_MAX_WORKERS] */
};

/* engine_auth.c (calls engine_util.c only) */
int engine_auth_init(struct tally_engine *e);
void engine_auth_fini(struct tally_engine *e);
/* Before any state change: a job with a key takes only packets whose tag verifies
 * (BAD_MAC, AUTH_REQUIRED), a job without one takes none with an auth block (NO_KEY).
 * A refused JOIN is answered with an unsigned ERROR so a worker with a wrong or missing
 * key hears why at once; everything else is dropped. TALLY_OK or the reason (counted). */
enum tally_reason engine_rx_verify(struct tally_engine *e, const void *buf,
				   const struct tally_pkt *pkt, const struct tally_addr *from);
/* Identity: IP, UDP port, transport cookie and source MAC. */
int engine_addr_eq(const struct tally_addr *a, const struct tally_addr *b);
/* The same without the MAC (the IP/port a MAC_MISMATCH is told from). */
int engine_addr_eq_l3(const struct tally_addr *a, const struct tally_addr *b);
/* May `from` bind `rank` now? TALLY_OK (unbound, the same identity, or silent for the
 * rejoin timeout), RANK_TAKEN or MAC_MISMATCH. Changes nothing. */
/* engine_live.c: stamp a rank heard on this core; is it heard from another IP on any core
 * within the rejoin timeout? (cfg.live NULL: never) */
void engine_live_heard(struct tally_engine *e, uint32_t job, uint32_t rank, uint32_t ip);
int engine_live_other(const struct tally_engine *e, uint32_t job, uint32_t rank, uint32_t ip,
		      uint64_t now);
/* ns since any core heard (job, rank); UINT64_MAX when the table cannot say (cfg.live NULL,
 * never heard, or its slot taken by another rank). */
uint64_t engine_live_age(const struct tally_engine *e, uint32_t job, uint32_t rank, uint64_t now);
enum tally_reason engine_bind_check(const struct tally_engine *e, const struct engine_job *job,
				    uint32_t rank, const struct tally_addr *from, uint64_t now);
/* Job, token, rank < world, rank bound to `from` (MAC_MISMATCH: its IP/port from another
 * MAC). On success *jobp is set and the rank's "last heard" is the cached clock. */
enum tally_reason engine_auth(struct tally_engine *e, const struct tally_hdr *h,
			  const struct tally_addr *from, struct engine_job **jobp);
/* Bind rank to `from` (JOIN rules: RANK_TAKEN unless silent for rejoin_timeout). */
enum tally_reason engine_bind(struct tally_engine *e, struct engine_job *job, uint32_t rank,
			  const struct tally_addr *from, uint64_t now);
/* JOIN of a keyed job: nonce (hdr.reserved) must be above the rank's last accepted one
 * (equal: the same JOIN re-sent from the address it bound). TALLY_OK or TALLY_R_REPLAY. */
enum tally_reason engine_join_nonce_check(struct tally_engine *e, const struct engine_job *job,
					  const struct tally_hdr *h, const struct tally_addr *from);
/* A keyed packet's session (tally_auth.h TALLY_AUTH_SESS_LEN): JOIN and PING (the worker
 * may not know the run yet, or after a restart, another one): (0, its nonce); their
 * answers the same, the nonce echoed in offset|count; JOIN_OK (run, the JOIN's nonce);
 * everything else (run, the rank's bound JOIN nonce). Sending: engine_util.c sess_tx. */
void engine_sess_rx(struct tally_engine *e, const struct engine_job *job,
		    const struct tally_hdr *h, uint8_t *sess);
void engine_join_nonce_set(struct tally_engine *e, const struct engine_job *job,
			   const struct tally_hdr *h);
/* BYE of a keyed job: must repeat the nonce of the JOIN that bound the rank. */
enum tally_reason engine_bye_nonce_check(struct tally_engine *e, const struct engine_job *job,
					 const struct tally_hdr *h);

/* engine_util.c (calls no other file of the library) */
/* The job's GMAC context when it has a key, else NULL. */
struct tally_auth *engine_job_auth(const struct tally_engine *e, const struct engine_job *job);
/* engine_reject without a signature (answers to packets that failed authentication). */
enum tally_reason engine_reject_plain(struct tally_engine *e, const struct tally_hdr *req,
				      const struct tally_addr *from, enum tally_reason r);
enum tally_reason engine_drop(struct tally_engine *e, enum tally_reason r);
void engine_send(struct tally_engine *e, const struct tally_addr *to, const struct tally_hdr *h,
	     const void *payload, size_t len);
/* A RESULT from a buffer the transport may reference (xbuf: its state, NULL: none).
 * inner: the payload's tag of a keyed job (engine_result_inner), signed once per chunk;
 * NULL: computed for this copy. */
void engine_send_result(struct tally_engine *e, const struct tally_addr *to,
			const struct tally_hdr *h, const void *payload, size_t len, void *xbuf,
			const uint8_t *inner);
/* The inner (payload) tag of a keyed job's RESULT (tally_auth_sign_payload) into inner:
 * 1, or 0 (job not keyed, or it failed: each copy then signs its own, counted there). */
int engine_result_inner(struct tally_engine *e, const struct engine_job *job,
			const void *payload, size_t len, uint8_t inner[TALLY_AUTH_LEN]);
/* The ERROR header r about chunk slot idx of k (its job, round, offset, dtype); the caller
 * sets rank, count and reserved. */
void engine_chunk_error_hdr(struct tally_hdr *h, const struct engine_key *k, uint32_t idx,
			    enum tally_reason r, uint32_t aux);
/* A rejected control request: counted, and answered with ERROR to `from`. */
enum tally_reason engine_reject(struct tally_engine *e, const struct tally_hdr *req,
			    const struct tally_addr *from, enum tally_reason r);
/* cfg.alloc / cfg.free (or aligned_alloc): at create and destroy only. */
void *engine_mem_alloc(struct tally_engine *e, size_t size);
void engine_mem_free(struct tally_engine *e, void *p);
struct engine_job *engine_job_find(struct tally_engine *e, uint32_t id);
/* A push refused while draining: counted, answered with ERROR DRAINING (rate-limited per
 * rank). Returns TALLY_R_DRAINING. */
#define ENGINE_DRAIN_ERR_GAP_NS 100000000ull
enum tally_reason engine_refuse_draining(struct tally_engine *e, struct engine_job *job,
				     const struct tally_hdr *h, const struct tally_addr *from);
/* A push of a round its slot has passed: counted, answered with ERROR STALE_ROUND
 * (rate-limited per rank). Returns TALLY_R_STALE_ROUND. */
#define ENGINE_STALE_ERR_GAP_NS 200000000ull
enum tally_reason engine_refuse_stale(struct tally_engine *e, struct engine_job *job,
				      const struct tally_hdr *h, const struct tally_addr *from);

/* clock (inline) */
/* A fresh clock read (also cached in e->now for engine_now_cached()). */
static inline uint64_t engine_now(struct tally_engine *e)
{
	e->now = e->ops->now_ns(e->xctx);
	return e->now;
}
/* The last clock read (poll, chunk start, control ops): for "last heard" on the PUSH
 * path, where a clock read per packet would cost more than the bookkeeping is worth. */
static inline uint64_t engine_now_cached(const struct tally_engine *e)
{
	return e->now;
}

/* engine_job.c */
static inline void engine_heard(struct engine_job *job, uint32_t rank, uint64_t now, size_t bytes)
{
	struct engine_rank *r = &job->ranks[rank];
	r->last_ns = now;
	r->pkts++;
	r->bytes += bytes;
	job->last_ns = now;
}
enum tally_reason engine_rx_join(struct tally_engine *e, const struct tally_pkt *pkt,
			     const struct tally_addr *from, size_t len);
enum tally_reason engine_rx_bye(struct tally_engine *e, const struct tally_pkt *pkt,
			    const struct tally_addr *from);
int engine_jobs_init(struct tally_engine *e);
void engine_jobs_free(struct tally_engine *e);

/* engine_guard.c (calls engine_life.c, engine_auth.c and engine_util.c) */
/* cfg.allow: 1 if the source may send at all. */
static inline int engine_guard_allowed(const struct tally_engine *e, const struct tally_addr *from)
{
	if (!e->cfg.nallow)
		return 1;
	for (uint32_t i = 0; i < e->cfg.nallow; i++)
		if (from && (from->ip & e->cfg.allow[i].mask) == e->cfg.allow[i].net)
			return 1;
	return 0;
}
/* An open-admission JOIN that would create a job of `world` ranks: OK, ADMIT_SUBNET,
 * QUOTA_RANKS or ADMIT_LIMIT. */
enum tally_reason engine_guard_claim(const struct tally_engine *e, const struct tally_addr *from,
				     uint32_t world);
/* A JOIN that would re-bind a bound rank to another identity: 1 if it may (the per-packet
 * authentication's check of the JOIN goes here; until then every JOIN that passes the
 * rejoin timeout may). */
int engine_guard_join_authentic(const struct tally_engine *e, const struct engine_job *job,
				const struct tally_pkt *pkt);
enum tally_reason engine_guard_bye(struct tally_engine *e, const struct tally_hdr *h,
				   const struct tally_addr *from, struct engine_job **jobp);
/* Claim expiry, one job slot per call (tally_engine_poll). */
void engine_guard_poll(struct tally_engine *e);

/* engine_life.c */
/* End a job: keys freed, bindings dropped; an open-admission job also loses its slot. */
void engine_job_end(struct tally_engine *e, struct engine_job *job);
/* engine_gone.c: a worker's GONE report (tally_proto.h) */
enum tally_reason engine_rx_gone(struct tally_engine *e, const struct tally_pkt *pkt,
				 const struct tally_addr *from);
/* JOIN of `rank` with incarnation `inc`: TALLY_OK (the job adopted it if new, see
 * tally_engine.h) or TALLY_R_INCARNATION_LIVE. */
enum tally_reason engine_incarnation(struct tally_engine *e, struct engine_job *job,
				 uint32_t rank, const struct tally_addr *from, uint64_t inc,
				 uint64_t now);
/* Idle check of one job and dead-rank check of one key (tally_engine_poll). */
void engine_life_poll(struct tally_engine *e);

/* engine_ktab.c */
int engine_keys_init(struct tally_engine *e);
void engine_keys_fini(struct tally_engine *e);
struct engine_key *engine_key_find(const struct tally_engine *e, uint32_t job_id, uint32_t key);
void engine_ktab_insert(struct tally_engine *e, struct engine_key *k);
void engine_ktab_delete(struct tally_engine *e, struct engine_key *k);

/* engine_key.c */
/* Carve the key arena (cfg.mem_budget) at create; the region is freed by engine_keys_arena_fini. */
int engine_keys_arena_init(struct tally_engine *e);
void engine_keys_arena_fini(struct tally_engine *e);
/* Free removed keys whose RESULT buffers the transport no longer references. */
void engine_keys_reap(struct tally_engine *e);
enum tally_reason engine_rx_register(struct tally_engine *e, const struct tally_pkt *pkt,
				 const struct tally_addr *from, size_t len);
void engine_keys_remove_job(struct tally_engine *e, struct engine_job *job);
static inline uint32_t engine_chunk_len(const struct engine_key *k, uint32_t c)
{
	uint32_t off = c * k->reg.chunk_elems;
	uint32_t left = k->reg.nelems - off;
	return left < k->reg.chunk_elems ? left : k->reg.chunk_elems;
}
#define ENGINE_BM_PER_CHUNK 3 /* contributors, seen, noresult */
static inline uint64_t *engine_contrib_bm(const struct engine_key *k, uint32_t idx)
{
	return k->bits + (size_t)idx * ENGINE_BM_PER_CHUNK * k->bm_words;
}
static inline uint64_t *engine_seen_bm(const struct engine_key *k, uint32_t idx)
{
	return engine_contrib_bm(k, idx) + k->bm_words;
}
/* Ranks whose last push (or PULL) of this chunk's round asked TALLY_F_NORESULT: they get
 * the header-only RESULT (tally_proto.h). */
static inline uint64_t *engine_nores_bm(const struct engine_key *k, uint32_t idx)
{
	return engine_contrib_bm(k, idx) + 2 * k->bm_words;
}
static inline int engine_bit(const uint64_t *bm, uint32_t r)
{
	return (int)((bm[r >> 6] >> (r & 63)) & 1u);
}
static inline void engine_setbit(uint64_t *bm, uint32_t r)
{
	bm[r >> 6] |= 1ull << (r & 63);
}
static inline void engine_putbit(uint64_t *bm, uint32_t r, int on)
{
	if (on)
		engine_setbit(bm, r);
	else
		bm[r >> 6] &= ~(1ull << (r & 63));
}
/* The RESULT payload of chunk slot idx: the wire-dtype buffer, or the accumulator. */
static inline const void *engine_result_payload(const struct engine_key *k, uint32_t idx,
						uint32_t *bytes)
{
	uint32_t p = idx >= k->nchunks;
	uint32_t c = idx - p * k->nchunks;
	size_t off = (size_t)c * k->reg.chunk_elems;
	if (k->codec) {
		*bytes = (uint32_t)k->codec->wire_bytes(engine_chunk_len(k, c));
		return (const uint8_t *)k->res[p] + (size_t)c * k->wire_stride;
	}
	*bytes = engine_chunk_len(k, c) * k->esize;
	if (k->res[p])
		return (const uint8_t *)k->res[p] + off * k->esize;
	return (const uint8_t *)k->acc[p] + off * 4;
}

/* The transport's state for RESULT buffer idx (NULL when the transport keeps none). */
static inline void *engine_xbuf(const struct tally_engine *e, const struct engine_key *k,
				uint32_t idx)
{
	return k->xbufs ? k->xbufs + (size_t)idx * e->xbuf_size : NULL;
}

/* The job's policy for a key just created (no chunk is open yet, so nothing completes). */
static inline void engine_key_job_policy(struct engine_key *k)
{
	const struct engine_job *j = k->job;

	if (j->pol_quorum_set)
		k->quorum = j->pol_quorum && j->pol_quorum <= k->reg.participants ?
			    j->pol_quorum : k->reg.participants;
	if (j->pol_deadline_set) {
		k->deadline_us = j->pol_deadline_us;
		k->deadline_ns = (uint64_t)j->pol_deadline_us * 1000u;
	}
}

/* engine_recover.c (calls engine_auth.c and engine_util.c only) */
enum tally_reason engine_rx_ping(struct tally_engine *e, const struct tally_pkt *pkt,
				 const struct tally_addr *from, size_t len);
/* After a push or PULL at chunk c: one parity open at round r, the other at r+1 → ask
 * the ranks seen at r+1 only for round r's sum (ERROR NEED_RESULT). */
void engine_recover_check(struct tally_engine *e, struct engine_key *k, uint32_t c);
/* A probe of open chunk slot idx: the lagging-rank ask when no rank is at r+1. */
void engine_recover_probe(struct tally_engine *e, struct engine_key *k, uint32_t idx);

/* engine_chunk.c */
enum tally_reason engine_rx_push(struct tally_engine *e, const struct tally_pkt *pkt,
			     const struct tally_addr *from, size_t len);
enum tally_reason engine_rx_pull(struct tally_engine *e, const struct tally_pkt *pkt,
			     const struct tally_addr *from, size_t len);
/* how: ENGINE_HOW_QUORUM (completed by rank `last`'s push) or ENGINE_HOW_DEADLINE. */
void engine_complete(struct tally_engine *e, struct engine_key *k, uint32_t idx, int how,
		     uint32_t last);
/* engine_result.c (calls engine_held.c and engine_util.c) */
/* The fan-out of completed chunk slot idx (how, last: as engine_complete's). */
void engine_result_fanout(struct tally_engine *e, struct engine_key *k, uint32_t idx, int how,
			  uint32_t last);
/* A RESULT copy to one rank (duplicate push, late push, PULL): RESEND when `resend`,
 * header-only when `nores` (the rank asked TALLY_F_NORESULT). */
void engine_result_unicast(struct tally_engine *e, struct engine_key *k, uint32_t idx,
			   uint32_t rank, int resend, int nores);
/* Deadline completions (tally_engine_poll). */
unsigned engine_deadlines(struct tally_engine *e);
void engine_open_unlink(struct tally_engine *e, struct engine_key *k, uint32_t idx);
void engine_dl_update(struct tally_engine *e, struct engine_key *k);

/* Wire bytes of a push/RESULT of n elements of key k. */
static inline size_t engine_wire_bytes(const struct engine_key *k, uint32_t n)
{
	return k->codec ? k->codec->wire_bytes(n) : (size_t)n * k->esize;
}

/* engine_held.c (calls engine_util.c only) */
/* Acknowledge rank's push of chunk [off, off+count) of (k, round): coalesced, sent later. */
void engine_held_add(struct tally_engine *e, const struct engine_key *k, uint32_t rank,
		     uint32_t round, uint32_t off, uint32_t count);
/* The same, sent at once with flags: 0 (answer to a PULL probe), TALLY_F_RESEND (to a
 * duplicate push: the worker learns its re-send was not needed), TALLY_F_MISSING (answer to
 * a PULL: the push is not here). */
void engine_held_now(struct tally_engine *e, const struct engine_key *k, uint32_t rank,
		     uint32_t round, uint32_t off, uint32_t count, uint16_t flags,
		     enum tally_reason reason);
/* Send every pending HELD. */
void engine_held_flush(struct tally_engine *e);
/* Chunk c of k completes now in round `round`: a pending HELD that ends with it gives that
 * chunk up, the RESULT answers it (a pending range of that chunk alone goes). */
void engine_held_trim(struct tally_engine *e, const struct engine_key *k, uint32_t round,
		      uint32_t off, uint32_t count);
static inline void engine_held_flush_any(struct tally_engine *e)
{
	if (e->nheld)
		engine_held_flush(e);
}

/* engine_det.c */
int engine_det_init(struct tally_engine *e);
void engine_det_fini(struct tally_engine *e);
static inline int engine_det_available(const struct tally_engine *e)
{
	return e->det_nfree > 0;
}
/* A deterministic push of rank w into an open chunk: summed into acc at once when every
 * lower rank already is (then staged successors follow), else staged in a free slot
 * (the caller checked one is available when w != ch->folded). */
void engine_det_push(struct tally_engine *e, const struct engine_key *k, struct engine_chunk *ch,
		 uint32_t w, void *acc, const void *payload, uint32_t n);
/* Completion: add the staged pushes in rank order to acc, and free their slots. */
void engine_det_reduce(struct tally_engine *e, struct engine_key *k, struct engine_chunk *ch,
		   void *acc, uint32_t n);
void engine_det_release(struct tally_engine *e, struct engine_chunk *ch);

#endif
