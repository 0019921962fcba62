/* SPDX-License-Identifier: Apache-2.0
 * nccl_coll.h — the CollNet part's state, shared by nccl_coll.c (init, connect, the
 * collectives, test) and nccl_piece.c (pieces and the lanes that carry them).
 *
 * Keys are reused across sizes: a collective's bytes are cut into *pieces* whose sizes come
 * from a fixed set (powers of two, 64 B .. the piece size P, a power of two <= the agent's
 * partition bytes): whole pieces of P, then the tail as its binary digits down to 4 KiB, and
 * what is left under 4 KiB padded with zeros to the next power of two. Each (dtype, piece
 * size) *class* has up to `lanes` agent tensors (TALLY_NCCL_LANES, default 8), the piece's
 * lane chosen round-robin by a counter that every rank advances alike (NCCL submits the
 * same collectives in the same order everywhere), so which keys a collective uses never
 * depends on timing. A class's lane count only grows when one collective needs more pieces
 * of it than it has lanes (a big allreduce: bytes / P). So a communicator holds at most
 * 4 dtypes x 20 classes x lanes keys however many distinct sizes NCCL sends, plus bytes / P
 * of its biggest collective.
 */
#ifndef TALLY_NCCL_COLL_H
#define TALLY_NCCL_COLL_H

#include "nccl_int.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define COLL_NDT 4          /* f32, f16, bf16, i32 (enum tally_dtype) */
#define COLL_MIN_SHIFT 6    /* smallest piece: 64 B */
#define COLL_NCLASS 20      /* 64 B .. 32 MiB */
#define COLL_TAIL_GRAIN 4096 /* tails are cut in powers of two down to this, then padded */
#define COLL_MAX_LANES 1024 /* per class (bytes / P of one collective) */

struct coll_comm;
struct coll_req;

/* One agent tensor of one class: busy from its push until the agent's callback. */
struct coll_lane {
	atomic_int busy;
	int tensor;            /* agent tensor id, -1 until declared */
	char *buf;             /* class bytes, for pieces that are not pushed in place */
	struct coll_comm *cc;
	struct coll_req *req;  /* whose result this is; NULL: a shard another rank owns */
	char *out;             /* the callback copies buf -> out (out_bytes) */
	size_t out_bytes;
};

struct coll_class {
	unsigned nlanes, next; /* lanes declared so far may be fewer: see coll_lane.tensor */
	struct coll_lane *lanes[COLL_MAX_LANES];
};

struct coll_req {
	struct coll_comm *cc;
	int used;
	atomic_int left;       /* this rank's pieces still on the network */
	atomic_int err;        /* first failure (negative errno), 0 none */
	size_t bytes;          /* what test() reports */
};

/* A piece of a collective: `bytes` of input at `data`, its sums wanted at `out` (NULL: not
 * this rank's shard). data == out: pushed in place when bytes is a whole class. */
struct coll_piece {
	char *data, *out;
	size_t bytes;
	unsigned cls, lane;
};

struct coll_comm {
	struct tally_agent *a;
	uint32_t job;
	int rank;
	struct coll_req reqs[NCCL_NET_MAX_REQUESTS];
	unsigned next;
	size_t piece;          /* P */
	unsigned lanes;        /* lanes per class (TALLY_NCCL_LANES) */
	int owner;             /* reduce-scatter owner mode (TALLY_NCCL_OWNER_MODE, default 1) */
	unsigned ntensors;     /* declared: one key each */
	atomic_int bg_err;     /* a failed piece of another rank's shard */
	struct coll_class cls[COLL_NDT][COLL_NCLASS];
	struct coll_piece *plan;
	unsigned nplan, plan_cap;
};

/* The plan of one collective: coll_plan_reset, coll_plan_add per segment (a segment never
 * shares a piece with another: reduce-scatter cuts at every rank's block), then
 * coll_plan_push. */
void coll_plan_reset(struct coll_comm *cc);
int coll_plan_add(struct coll_comm *cc, char *data, char *out, size_t bytes);
/* Lanes for every piece (declaring new ones: a blocking REGISTER each), then the pushes.
 * 0; -EBUSY (a lane still carries an earlier piece: nothing was pushed, NCCL asks again);
 * other negative errno with the text in err. */
int coll_plan_push(struct coll_comm *cc, struct coll_req *r, int tdt, char *err, size_t errlen);
/* Wait up to max_ms for every lane to be free: the pieces of other ranks' shards a
 * reduce-scatter left in the background are still owed to those ranks (their sums need our
 * pushes). 0, or -ETIMEDOUT with some still out. */
int coll_lanes_drain(struct coll_comm *cc, unsigned max_ms);
void coll_lanes_free(struct coll_comm *cc);

#endif
