/* SPDX-License-Identifier: Apache-2.0
 * tally_proto.h — wire protocol v1 between worker (client session) and appliance (engine).
 *
 * UDP/IPv4, default base port 9170, one port per appliance core (base + core index).
 * Every packet: a fixed 64-byte little-endian header, then `payload_len` bytes of payload
 * whose CRC32C is in the header: the standard CRC-32C (Castagnoli, initial value and final
 * XOR 0xFFFFFFFF, check value 0xE3069283 for "123456789"; 0 for an empty payload),
 * computed with ISA-L's crc32_iscsi.
 */
#ifndef TALLY_PROTO_H
#define TALLY_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tally_sum.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TALLY_MAGIC 0x31594c54u /* "TLY1" little-endian */
#define TALLY_VERSION 1
#define TALLY_DEFAULT_PORT 9170
#define TALLY_HDR_LEN 64
#define TALLY_MAX_PAYLOAD 9000u     /* largest payload accepted on any transport */
#define TALLY_MAX_WORKERS 1024u     /* ranks 0..1023 */

enum tally_op {
	TALLY_OP_JOIN = 1,
	TALLY_OP_JOIN_OK = 2,
	TALLY_OP_REGISTER = 3, /* worker→appliance; echoed back with TALLY_F_ACK */
	TALLY_OP_PUSH = 4,
	TALLY_OP_RESULT = 5,
	TALLY_OP_PULL = 6,
	TALLY_OP_ERROR = 7,    /* reason in hdr.reason, the offending op in hdr.aux (RANK_SILENT:
				* the silent rank in hdr.aux, see enum tally_reason) */
	TALLY_OP_BYE = 8,
	TALLY_OP_HELD = 9,     /* appliance→worker, header only: see "HELD" below */
	TALLY_OP_PING = 10,    /* liveness probe, header only: see "PING" below */
	TALLY_OP_GONE = 11,    /* both ways, header only: see "GONE" below */
	TALLY_OP_MAX = 11
};

/* PING (worker→appliance, header only, flags 0, or TALLY_F_AUTH in a keyed job, whose
 * PINGs and answers are signed like its other packets): a worker with work outstanding that has
 * heard nothing for its probe_ms asks whether the appliance lives. Answered with PING +
 * TALLY_F_ACK (the sender is joined: job, token, rank, address check out) or with ERROR
 * (aux = TALLY_OP_PING, reason WRONG_JOB / NOT_JOINED / ...: the appliance does not know
 * this worker, e.g. because it restarted). Both answers, and every JOIN_OK, carry the
 * appliance's boot id in hdr.reserved: a random 64-bit value drawn at each start, so a
 * worker recognises a restart positively (tally_client.h). */

/* HELD (appliance→worker, no payload): the appliance holds this worker's pushes of
 * (key, round) for every chunk in [offset, offset + count) elements (whole chunks, one or
 * more consecutive ones; dtype = the key's). Sent when a push is added to a chunk that does
 * not complete with it, when a duplicate push reaches a chunk still open, and in answer to
 * a PULL for a chunk still open that holds the sender's push; with TALLY_F_MISSING, in
 * answer to a PULL for a chunk that does not hold it (lost, or refused); with TALLY_F_RESEND
 * in answer to a duplicate push (like TCP's D-SACK: that re-send was not needed, so the
 * worker widens its reordering allowance). The worker then stops
 * re-sending that payload: its retransmission timer measures push -> HELD/RESULT (the
 * network and the appliance), not the wait for the slowest worker, and while held it only
 * PULLs (header only, backed off) in case the RESULT is lost.
 * Trade-off: one 64-byte packet more per held push (fewer where the engine coalesces
 * consecutive chunks of one worker into one range, until it next sends anything or is
 * polled), against duplicate payloads of whole chunks and an RTO inflated by straggling
 * workers. A HELD is advisory: the exactly-once bitmap, quorum, deterministic mode and
 * the round rules do not change; a lost HELD costs one payload re-send (a duplicate,
 * answered with HELD again). The engine keeps no per-packet timer. */

/* GONE (header only; hdr.aux = a set of appliances, bit i = the i-th appliance of the job's
 * appliance list as every worker's agent orders it): worker→appliance, "these appliances
 * are gone for this job" (dead or draining; the worker moved their keys to the survivors);
 * appliance→worker, the job's whole gone set as this appliance knows it. The appliance ORs
 * what a worker reports into its job's set and, when the set grew, sends it to every bound
 * rank of the job (so a rank that has not noticed yet moves too, see gpu_agent/README.md
 * "Failover"), else to the sender alone (its acknowledgement). */

/* hdr.flags */
#define TALLY_F_ACK 0x0001u      /* REGISTER acknowledgement */
#define TALLY_F_INCLUDED 0x0002u /* RESULT: the recipient's own push is in this sum */
#define TALLY_F_RESEND 0x0004u   /* RESULT: a re-sent copy to a push the appliance had
				  * seen already (duplicate or late push, or PULL after one) */
#define TALLY_F_MISSING 0x0008u  /* HELD: the opposite, the appliance does NOT hold the
				  * sender's push of this chunk (answer to a PULL): re-send it */
/* PUSH/RESULT of a one-bit key (REGISTER compression TALLY_COMP_ONEBIT): the payload is
 * TALLY_ONEBIT_BYTES(count) bytes, [f32 scale, little-endian][sign bits of the count
 * elements, LSB-first, bit 1 = "+" (tally_sum.h)], dtype is f32 (the user side's), count
 * stays in elements. The element i of the chunk is bit_i ? scale : -scale. */
#define TALLY_F_ONEBIT 0x0040u
/* Every flag that names a codec's wire layout: a PUSH's or RESULT's flags under this mask
 * must be its key's codec's flag (0 for an uncompressed key). A codec with a wire flag
 * adds it here. */
#define TALLY_F_CODECS TALLY_F_ONEBIT
/* PUSH: not a contribution but the complete sum of (key, round, chunk) as a RESULT gave
 * it to the sender (payload = that RESULT's, contrib = its contributor count), sent in
 * answer to ERROR NEED_RESULT after an appliance restart: a rank that missed round r's
 * RESULT re-pushes round r to the fresh appliance while the others, already at r+1, hold
 * that result. The engine installs it as round r's result (tally_engine.h). */
#define TALLY_F_COMPLETE 0x0100u
/* HELD+DONE (header only): the answer to a PULL for a chunk that completed less than the
 * PULL's hdr.aux microseconds ago (the sender's round-trip estimate; a worker that offered
 * TALLY_CAP_HELD): "its RESULT went out to you". Such a PULL most likely crossed the RESULT
 * on its way (probes sent while the worker, or the appliance, was descheduled); answering
 * each with the payload re-sent 20-40% of the RESULTs on a loaded host with no loss. The
 * RESULT left before this answer on the same path, so a worker that receives HELD+DONE
 * without having the RESULT has lost it: it PULLs again with TALLY_F_DONE ("I know, send
 * it"), answered with the RESULT. A chunk complete for longer than aux (the RESULT was
 * lost, not crossed), a PULL+DONE and a PULL with aux 0 (older workers) get the RESULT at
 * once. Trade-off: one round trip more to repair a RESULT lost within a round trip of the
 * probe. Not with MISSING or RESEND.
 * Send stamps tell a RESULT delayed from one lost: every RESULT and HELD an appliance core
 * sends carries in hdr.reserved TALLY_STAMP_VALID | a 32-bit count of the packets that core
 * sent, and a PULL echoes in hdr.reserved the stamp of the last one its sender got from that
 * core (0: none). A RESULT stamped at or after the echo may still be on its way behind
 * everything the sender has not had yet (a stalled queue delays the PULL too, and the time
 * rule alone re-sent such RESULTs at no loss): always HELD+DONE, so a payload is re-sent
 * only once it is known lost, for one more round trip when it was. One stamped before the
 * echo left before a packet that arrived: lost, unless the path reordered it, so the plain
 * aux window applies. */
#define TALLY_F_DONE 0x0200u
/* NORESULT (owner mode: reduce-scatter, where each chunk's sum is wanted by one rank, its
 * shard's owner). On a PUSH (or a PULL probing one): "count my push, do not send me the
 * sum". A worker sets it only with an appliance whose JOIN_OK offers TALLY_CAP_NORESULT, so
 * an appliance that does not know it never sees it, and a worker that never sets it never
 * receives it. When the chunk completes, a rank whose push had it gets a header-only RESULT
 * with TALLY_F_NORESULT instead of the sum: payload_len 0, crc 0, every other field as the
 * RESULT's (round, offset, count, dtype, contrib, INCLUDED, RESEND, AUX_LAST, the codec's
 * flag), so the worker's RESULT rules (completion, RTT sample, quorum fold, probes,
 * HELD+DONE) hold unchanged; only the payload is not there. The appliance remembers the
 * wish per (chunk, rank) for the round: a duplicate or late push, or a PULL, of that rank
 * is answered the same way (a lost acknowledgement is recovered by the usual probe; a
 * PULL that carries the flag is answered so even when no push of it was seen). The sum
 * itself, its exactly-once, quorum, deadline and deterministic rules do not change: the flag
 * only chooses what goes back. The ranks without it get the RESULT as before. */
#define TALLY_F_NORESULT 0x0010u
#define TALLY_STAMP_VALID (1ull << 32)
/* Authenticated packet (a job admitted with a key, tally_auth.h): the 64-byte header is
 * followed by a TALLY_AUTH_LEN-byte auth block, [12-byte GMAC IV][16-byte GMAC tag], then
 * the payload (payload_len counts the payload only). The tag is AES-256-GMAC over the
 * 64 header bytes and the payload; hdr.crc is 0 (the tag covers the payload). JOIN puts a
 * fresh nonce in hdr.reserved (strictly increasing per rank), JOIN_OK echoes it, BYE
 * repeats the nonce of the JOIN that bound the rank (replays of either are refused).
 * Any op may carry it; without it the format and CRC are unchanged.
 * A RESULT's block is twice as long (TALLY_AUTH_RESULT_LEN), signed in two levels so that
 * the appliance MACs a chunk's payload once however many ranks it sends it to:
 * [inner IV 12][inner tag 16] = GMAC over the payload alone, computed once per chunk, then
 * [outer IV 12][outer tag 16] = GMAC over the 64 header bytes and the inner IV and tag,
 * per destination (tally_auth.h says why this is sound). */
#define TALLY_F_AUTH 0x0080u
#define TALLY_AUTH_IV_LEN 12
#define TALLY_AUTH_TAG_LEN 16
#define TALLY_AUTH_LEN (TALLY_AUTH_IV_LEN + TALLY_AUTH_TAG_LEN)
#define TALLY_AUTH_RESULT_LEN (2 * TALLY_AUTH_LEN)
/* A signed header of any op but RESULT: the header and the auth block. */
#define TALLY_HDR_AUTH (TALLY_HDR_LEN + TALLY_AUTH_LEN)
/* Largest encoded header: a signed RESULT's (header and two-level auth block). */
#define TALLY_HDR_MAX (TALLY_HDR_LEN + TALLY_AUTH_RESULT_LEN)

/* The wire header. Encoded/decoded field by field (never cast a packet buffer to it). */
struct tally_hdr {
	uint32_t magic;
	uint8_t version;
	uint8_t op;
	uint16_t flags;
	uint32_t job_id;
	uint32_t rank;        /* sender's rank (worker ops) or recipient's rank (RESULT, JOIN_OK) */
	uint64_t token;       /* the job's 64-bit token */
	uint32_t key;
	uint32_t round;
	uint32_t offset;      /* chunk offset within the key, in elements */
	uint32_t count;       /* elements in this chunk */
	uint8_t dtype;        /* enum tally_dtype (wire dtype of the payload) */
	uint8_t reason;       /* ERROR: enum tally_reason */
	uint16_t contrib;     /* RESULT: how many workers' pushes the sum holds */
	uint32_t payload_len; /* bytes after the header */
	uint32_t crc;         /* CRC32C of the payload (0 for an empty payload) */
	uint32_t aux;         /* op-specific: ERROR: the rejected op; RESULT: TALLY_AUX_LAST;
			       * PULL: the sender's round-trip estimate in us (TALLY_F_DONE);
			       * JOIN_OK: the answering core (a worker takes it only from the
			       * core whose JOIN is out) */
	uint64_t reserved;    /* PING+ACK, ERROR from the appliance: its boot id (see PING;
			       * JOIN_OK carries it in key (low) and round (high)); JOIN,
			       * JOIN_OK, BYE with TALLY_F_AUTH: the JOIN nonce; PING: the
			       * sender's JOIN nonce (keyed); else zero on send (encoded as
			       * given), ignored on receive. offset|count (low|high): JOIN_OK:
			       * the job's run nonce (keyed); PING+ACK and an ERROR answering a
			       * JOIN or PING: the request's nonce (tally_auth.h session) */
};

/* RESULT's aux: the recipient's push completed the chunk, so this RESULT is its answer and
 * a round-trip sample (tally_client.h). In aux rather than flags: flags say what the sum
 * is (INCLUDED) and why it came (RESEND); this only says when. */
#define TALLY_AUX_LAST 0x1u

/* Payloads of the control ops (little-endian, fixed size). */
#define TALLY_CAP_DETERMINISTIC 0x1u
#define TALLY_CAP_QUORUM 0x2u
#define TALLY_CAP_HELD 0x4u  /* JOIN: send me HELD (MISSING, AUX_LAST); JOIN_OK: this
			      * appliance does (to the workers that asked) */
#define TALLY_CAP_AVERAGE 0x8u /* JOIN_OK: REGISTER may ask TALLY_KEY_AVERAGE */
#define TALLY_CAP_NORESULT 0x10u /* JOIN_OK: PUSH may carry TALLY_F_NORESULT */
#define TALLY_CAP_GSO 0x20u  /* JOIN_OK: UDP GSO-segmented datagrams (UDP_SEGMENT) arrive here
			      * as the datagrams they are (kernel UDP sockets: tally-udpd), so a
			      * worker may send with GSO. Absent (tallyd): a DPDK AF_PACKET port
			      * on a veth may get the 64 KB super-frame unsegmented and drop it */

struct tally_join {          /* JOIN payload, 24 bytes */
	uint32_t world_size;
	uint32_t caps;
	uint32_t max_chunk_bytes; /* the worker's largest payload */
	uint32_t reserved;
	uint64_t incarnation;     /* this launch of the job (0: none given; see tally_engine.h) */
};
#define TALLY_JOIN_LEN 24

struct tally_join_ok {       /* JOIN_OK payload, 16 bytes */
	uint16_t base_port;
	uint16_t ncores;
	uint32_t max_chunk_bytes; /* min(worker's, appliance's) */
	uint32_t caps;
	uint32_t world_size;
};
#define TALLY_JOIN_OK_LEN 16

#define TALLY_KEY_DETERMINISTIC 0x1u
/* The RESULT is the average, not the sum: the appliance scales its f32 sum by 1 / the
 * RESULT's contributor count before rounding to the wire dtype (f16 4 x 40000 averages to
 * 40000, not inf). Float dtypes only (i32 is BAD_REGISTER); needs TALLY_CAP_AVERAGE. */
#define TALLY_KEY_AVERAGE 0x2u
#define TALLY_KEY_FLAGS (TALLY_KEY_DETERMINISTIC | TALLY_KEY_AVERAGE)

/* REGISTER compression modes. */
enum tally_comp {
	TALLY_COMP_NONE = 0,
	TALLY_COMP_ONEBIT = 1,    /* 1-bit Adam / LAMB server stage: dtype f32 (see TALLY_F_ONEBIT) */
	TALLY_COMP_COUNT
};
/* Wire bytes of a one-bit chunk of n elements: the f32 scale and ceil(n / 8) bytes of bits. */
#define TALLY_ONEBIT_BYTES(n) (4u + ((uint32_t)(n) + 7u) / 8u)
/* The most elements of a one-bit chunk of at most `bytes` wire bytes (0: not even the scale). */
#define TALLY_ONEBIT_ELEMS(bytes) ((uint32_t)(bytes) > 4u ? ((uint32_t)(bytes) - 4u) * 8u : 0u)
/* A one-bit key's whole payload laid out chunk by chunk, chunk c at c * stride where
 * stride = TALLY_ONEBIT_BYTES(chunk_elems) (what a client sends and receives as the key's
 * buffer): its total bytes. */
static inline size_t tally_onebit_key_bytes(uint32_t nelems, uint32_t chunk_elems)
{
	uint32_t full = nelems / chunk_elems, last = nelems % chunk_elems;
	return (size_t)full * TALLY_ONEBIT_BYTES(chunk_elems) +
	       (last ? TALLY_ONEBIT_BYTES(last) : 0);
}

/* A little-endian f32 on the wire (the one-bit scales): read and write. */
static inline float tally_le_f32(const uint8_t *p)
{
	uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
		     (uint32_t)p[3] << 24;
	float f;

	memcpy(&f, &v, sizeof(f));
	return f;
}

static inline void tally_put_le_f32(uint8_t *p, float f)
{
	uint32_t v;

	memcpy(&v, &f, sizeof(v));
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

struct tally_register {      /* REGISTER payload, 32 bytes; hdr.key names the key */
	uint32_t nelems;
	uint32_t chunk_elems;     /* chunk i covers [i*chunk_elems, min(+chunk_elems, nelems)) */
	uint8_t dtype;
	uint8_t compression;      /* enum tally_comp: 0 none, 1 one-bit (f32 keys only) */
	uint16_t flags;           /* TALLY_KEY_* */
	uint16_t participants;    /* W for this key: ranks 0..participants-1 */
	uint16_t quorum;          /* 1..participants; participants = wait for all */
	uint32_t deadline_us;     /* 0 = none; else complete this long after the first push */
	uint32_t reserved[3];
};
#define TALLY_REGISTER_LEN 32

/* Why a packet was rejected. Every rejection has one; engines count them per reason. */
enum tally_reason {
	TALLY_OK = 0,
	/* stateless (tally_proto_decode) */
	TALLY_R_TRUNCATED,      /* shorter than the header */
	TALLY_R_BAD_MAGIC,
	TALLY_R_BAD_VERSION,
	TALLY_R_BAD_OP,
	TALLY_R_LEN_MISMATCH,   /* payload_len disagrees with the bytes received or the op */
	TALLY_R_OVERSIZED,      /* payload_len > TALLY_MAX_PAYLOAD */
	TALLY_R_BAD_DTYPE,
	TALLY_R_BAD_COUNT,      /* count * dtype size != payload_len for data ops */
	TALLY_R_BAD_CRC,
	TALLY_R_BAD_RANK,       /* rank >= TALLY_MAX_WORKERS or >= the job's world size */
	/* stateful (engine) */
	TALLY_R_WRONG_JOB,
	TALLY_R_WRONG_TOKEN,
	TALLY_R_NOT_JOINED,     /* data op from a rank with no JOIN, or from another address */
	TALLY_R_RANK_TAKEN,     /* JOIN for a rank bound to another live address */
	TALLY_R_UNKNOWN_KEY,
	TALLY_R_BAD_RANGE,      /* offset/count not a chunk of the key */
	TALLY_R_CHUNK_MISMATCH, /* dtype differs from the key's */
	TALLY_R_NOT_PARTICIPANT,
	TALLY_R_STALE_ROUND,    /* a round whose result is gone (delayed duplicate) */
	TALLY_R_TOO_EARLY,      /* round r+2 before every participant acknowledged round r */
	TALLY_R_BAD_REGISTER,   /* malformed REGISTER payload */
	TALLY_R_KEY_CONFLICT,   /* REGISTER disagrees with the key already registered */
	TALLY_R_NO_MEMORY,      /* memory budget exceeded */
	TALLY_R_POOL_FULL,      /* deterministic staging pool exhausted (worker retries) */
	TALLY_R_UNSUPPORTED,    /* e.g. compression not offered */
	TALLY_R_DRAINING,       /* appliance draining: no new rounds */
	TALLY_R_UNEXPECTED_OP,  /* an op this side never receives */
	TALLY_R_JOB_TABLE_FULL, /* JOIN of a new job: every job slot (max_jobs) is in use */
	TALLY_R_INCARNATION_LIVE, /* JOIN of another incarnation while the job's is live */
	TALLY_R_RANK_SILENT,    /* ERROR to ranks waiting on a chunk: hdr.aux names the silent
				 * rank, hdr.count how long it has been silent (ms) */
	/* stateless again (tally_proto_decode), numbered last so the codes above keep theirs */
	TALLY_R_BAD_FLAGS,      /* flags the op does not define (HELD: MISSING or RESEND) */
	/* identity, quotas, admission (engine_auth.c, engine_key.c, engine_guard.c; THREAT_MODEL.md) */
	TALLY_R_MAC_MISMATCH,   /* rank bound at this IP/port but from another source MAC */
	TALLY_R_BYE_REFUSED,    /* BYE not from the rank's bound address and MAC */
	TALLY_R_QUOTA_KEYS,     /* REGISTER beyond the job's key quota */
	TALLY_R_QUOTA_BYTES,    /* REGISTER beyond the job's memory quota */
	TALLY_R_QUOTA_RANKS,    /* JOIN of a new job whose world size exceeds the rank quota */
	TALLY_R_NOT_ALLOWED,    /* source address outside every --allow CIDR */
	TALLY_R_ADMIT_SUBNET,   /* open-admission JOIN from outside the admission subnet */
	TALLY_R_ADMIT_LIMIT,    /* open-admission JOIN: admit_claims open-admission jobs exist */
	/* stateful again, appended */
	TALLY_R_NEED_RESULT,    /* ERROR to a rank whose push of round+1 of this chunk the
				 * appliance holds while another rank pushes round (it missed
				 * that RESULT before a restart): answer with a TALLY_F_COMPLETE
				 * push of round's sum if you hold it */
	/* authentication (tally_auth.h), numbered last for the same reason */
	TALLY_R_BAD_MAC,        /* TALLY_F_AUTH packet whose tag does not verify with the key */
	TALLY_R_AUTH_REQUIRED,  /* packet without TALLY_F_AUTH for a job admitted with a key */
	TALLY_R_NO_KEY,         /* TALLY_F_AUTH packet for a job (or peer) without a key */
	TALLY_R_REPLAY,         /* JOIN nonce not above the rank's last, BYE or JOIN_OK nonce
				 * not the bound JOIN's */
	TALLY_R_CONN_IDENTITY,  /* a packet on a connection authenticated at setup (verbs) that
				 * names another job or rank than the connection's */
	TALLY_R_COUNT
};

const char *tally_reason_name(enum tally_reason r);
/* What to change when a reason is a configured limit (e.g. "the job's key quota: tallyd
 * --quota-keys, tallyctl job-add --quota-keys"), else "" (never NULL). */
const char *tally_reason_hint(enum tally_reason r);
const char *tally_op_name(uint8_t op);

/* A decoded packet: header plus a pointer into the caller's buffer (zero copy). */
struct tally_pkt {
	struct tally_hdr hdr;
	const uint8_t *payload;
	const uint8_t *auth;  /* TALLY_F_AUTH: the auth block (IV, tag), else NULL */
};

/* Bytes of an encoded header as sent: TALLY_HDR_LEN, or when its flags say TALLY_F_AUTH
 * (the auth block follows it) TALLY_HDR_AUTH, TALLY_HDR_MAX for a RESULT (op byte 5).
 * Transports send this many header bytes. */
static inline size_t tally_proto_hdr_len(const uint8_t *hdr)
{
	if (!(hdr[6] & TALLY_F_AUTH))
		return TALLY_HDR_LEN;
	return hdr[5] == TALLY_OP_RESULT ? TALLY_HDR_MAX : TALLY_HDR_AUTH;
}

/* The op of a received datagram, before any validation, for a dispatcher that sheds load
 * by kind (tallyd drops PULL probes first when a core's software dispatch ring runs full):
 * the op byte of a datagram that holds a whole header and starts with our magic and
 * version, else 0. Decide nothing else from it: the packet is not validated. */
static inline uint8_t tally_proto_peek_op(const uint8_t *buf, size_t len)
{
	if (len < TALLY_HDR_LEN || buf[0] != (uint8_t)TALLY_MAGIC ||
	    buf[1] != (uint8_t)(TALLY_MAGIC >> 8) || buf[2] != (uint8_t)(TALLY_MAGIC >> 16) ||
	    buf[3] != (uint8_t)(TALLY_MAGIC >> 24) || buf[4] != TALLY_VERSION)
		return 0;
	return buf[5];
}

/* Encode a header into 64 bytes at `out`. Sets magic/version; `hdr->payload_len` and
 * `hdr->crc` are written as given (use tally_proto_finish()). */
void tally_proto_encode_hdr(uint8_t out[TALLY_HDR_LEN], const struct tally_hdr *hdr);

/* Fill payload_len and crc of `hdr` from a payload, then encode it. */
void tally_proto_finish(uint8_t out[TALLY_HDR_LEN], struct tally_hdr *hdr,
			const void *payload, size_t len);

/* CRC32C (Castagnoli) of a buffer, as carried in hdr.crc. */
uint32_t tally_crc32c(const void *buf, size_t len);

/* An ERROR answering a JOIN or a PING (aux names the op; a RANK_SILENT's aux is a rank
 * instead): a keyed one is signed under (0, the request's nonce), echoed in offset|count
 * (tally_auth.h session). */
static inline int tally_proto_join_ping_error(const struct tally_hdr *h)
{
	return h->op == TALLY_OP_ERROR && h->reason != TALLY_R_RANK_SILENT &&
	       (h->aux == TALLY_OP_JOIN || h->aux == TALLY_OP_PING);
}

/* Decode and validate everything that needs no state: length, magic, version, op, payload
 * length (exact for control ops: JOIN 24, JOIN_OK 16; REGISTER 32; PULL, ERROR, BYE 0), dtype
 * (PUSH, RESULT, PULL, HELD), count >= 1 and count * dtype size == payload (PUSH/RESULT; a
 * RESULT with TALLY_F_NORESULT: no payload, else BAD_COUNT; with
 * TALLY_F_ONEBIT: dtype f32 else BAD_DTYPE, payload == TALLY_ONEBIT_BYTES(count) else
 * BAD_COUNT), HELD: no payload, count >= 1 and offset + count within 32 bits
 * (TALLY_R_BAD_COUNT), no flags but one of TALLY_F_MISSING, TALLY_F_RESEND, TALLY_F_DONE
 * (TALLY_R_BAD_FLAGS), PING: no payload, no flags but TALLY_F_ACK and TALLY_F_AUTH
 * (TALLY_R_BAD_FLAGS),
 * rank bound, CRC (checked last). The reserved field is ignored.
 * With TALLY_F_AUTH the auth block sits between header and payload (its bytes count in
 * len), crc must be 0 (else BAD_CRC) and the tag is NOT checked here (the key is the
 * engine's or client's: tally_auth_verify); pkt->auth points at the block.
 * Returns TALLY_OK and fills *pkt, or the reason. Never reads past buf[len). */
enum tally_reason tally_proto_decode(const void *buf, size_t len, struct tally_pkt *pkt);
/* The same with the payload apart from the header (a verbs RESULT whose payload the appliance
 * wrote straight into the worker's buffer): hlen must be the header's tally_proto_hdr_len,
 * plen its payload_len; the CRC is over `payload`, pkt->payload points at it. */
enum tally_reason tally_proto_decode_split(const void *hdr, size_t hlen, const void *payload,
					   size_t plen, struct tally_pkt *pkt);
/* The fields of an encoded header we built ourselves, without any check (a transport
 * deciding how to send it). Unset fields are zero. */
void tally_proto_peek_hdr(const uint8_t *hdr, struct tally_hdr *h);

/* Fixed payload (de)serialisers. get_* return TALLY_OK or TALLY_R_BAD_REGISTER /
 * TALLY_R_LEN_MISMATCH for a bad payload (or a packet of another op), and
 * TALLY_R_UNSUPPORTED for a REGISTER asking for an unknown compression mode. */
void tally_proto_put_join(uint8_t out[TALLY_JOIN_LEN], const struct tally_join *j);
enum tally_reason tally_proto_get_join(const struct tally_pkt *pkt, struct tally_join *j);
void tally_proto_put_join_ok(uint8_t out[TALLY_JOIN_OK_LEN], const struct tally_join_ok *j);
enum tally_reason tally_proto_get_join_ok(const struct tally_pkt *pkt, struct tally_join_ok *j);
void tally_proto_put_register(uint8_t out[TALLY_REGISTER_LEN], const struct tally_register *r);
/* Also validates the fields: known dtype, compression 0, or 1 with dtype f32 (else
 * BAD_REGISTER), nelems >= 1, 1 <= chunk_elems and the chunk's payload (chunk_elems * dtype
 * size, or TALLY_ONEBIT_BYTES(chunk_elems)) <= TALLY_MAX_PAYLOAD,
 * 1 <= participants <= TALLY_MAX_WORKERS,
 * 1 <= quorum <= participants, known flags. */
enum tally_reason tally_proto_get_register(const struct tally_pkt *pkt, struct tally_register *r);

#ifdef __cplusplus
}
#endif
#endif
