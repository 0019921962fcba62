/* SPDX-License-Identifier: Apache-2.0
 * nccl_piece.c — a collective's bytes as pieces of a few fixed sizes, each pushed on a lane
 * (an agent tensor reused across calls and sizes): see nccl_coll.h for why. A piece of a
 * shard another rank owns (reduce-scatter) is pushed in owner mode (TALLY_AGENT_NO_RESULT):
 * the appliance sends its sums to the owner only.
 * Every piece completes through the agent's callback (its progress thread): it copies a
 * padded piece's sums out, frees the lane, and counts the piece off its request; test()
 * (NCCL's proxy thread) only reads the counters.
 */
#include "nccl_coll.h"
#include "tally_agent.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void coll_plan_reset(struct coll_comm *cc)
{
	cc->nplan = 0;
}

static int plan_one(struct coll_comm *cc, char *data, char *out, size_t bytes)
{
	struct coll_piece *p;
	size_t c = (size_t)1 << COLL_MIN_SHIFT;
	unsigned ci = 0;

	if (cc->nplan == cc->plan_cap) {
		unsigned cap = cc->plan_cap ? 2 * cc->plan_cap : 64;
		struct coll_piece *np = realloc(cc->plan, cap * sizeof(*np));

		if (!np)
			return -ENOMEM;
		cc->plan = np;
		cc->plan_cap = cap;
	}
	while (c < bytes) {
		c <<= 1;
		ci++;
	}
	p = &cc->plan[cc->nplan++];
	*p = (struct coll_piece){.data = data, .out = out, .bytes = bytes, .cls = ci};
	return 0;
}

int coll_plan_add(struct coll_comm *cc, char *data, char *out, size_t bytes)
{
	size_t off = 0;
	int rc = 0;

	/* whole pieces of P */
	while (!rc && bytes - off >= cc->piece) {
		rc = plan_one(cc, data + off, out ? out + off : NULL, cc->piece);
		off += cc->piece;
	}
	/* the tail's binary digits down to the grain: no padding on the wire */
	while (!rc && bytes - off >= COLL_TAIL_GRAIN) {
		size_t p = COLL_TAIL_GRAIN;

		while (p * 2 <= bytes - off)
			p *= 2;
		rc = plan_one(cc, data + off, out ? out + off : NULL, p);
		off += p;
	}
	/* under 4 KiB: one piece, padded to its class (one datagram either way) */
	if (!rc && off < bytes)
		rc = plan_one(cc, data + off, out ? out + off : NULL, bytes - off);
	return rc;
}

/* Piece sizes in use: 64 B .. P. */
static unsigned coll_nclass(const struct coll_comm *cc)
{
	unsigned n = 1;

	while (((size_t)1 << (COLL_MIN_SHIFT + n - 1)) < cc->piece)
		n++;
	return n;
}

static int lane_declare(struct coll_comm *cc, struct coll_lane *l, int tdt, unsigned ci,
			unsigned li, char *err, size_t errlen)
{
	char name[64];
	size_t bytes = (size_t)1 << (COLL_MIN_SHIFT + ci);
	int t;

	snprintf(name, sizeof(name), "nccl:%d:%zu:%u", tdt, bytes, li);
	t = tally_agent_declare(cc->a, name, bytes, tdt, 0);
	if (t >= 0 && tally_agent_set_ordered(cc->a, t, 0) != 0)
		t = -EINVAL;
	if (t < 0) {
		snprintf(err, errlen, "%s (the communicator's key %u, %zu bytes: it holds at most "
			 "4 dtypes x %u piece sizes x TALLY_NCCL_LANES=%u keys, plus one per %zu "
			 "bytes of its largest collective; the appliance's limits are tally-udpd / "
			 "tallyd --quota-keys and --quota-bytes, or the admitted job's quota_keys "
			 "and quota_bytes)", tally_agent_strerror(cc->a), cc->ntensors + 1, bytes,
			 coll_nclass(cc), cc->lanes, cc->piece);
		return t;
	}
	l->tensor = t;
	cc->ntensors++;
	return 0;
}

/* Lanes for the plan: pieces of one class take consecutive lanes from its counter. A class
 * grows to as many lanes as one collective needs of it (the same on every rank). */
static int plan_lanes(struct coll_comm *cc, int tdt, char *err, size_t errlen)
{
	unsigned need[COLL_NCLASS] = {0};

	for (unsigned i = 0; i < cc->nplan; i++)
		need[cc->plan[i].cls]++;
	for (unsigned ci = 0; ci < COLL_NCLASS; ci++) {
		struct coll_class *k = &cc->cls[tdt][ci];

		if (need[ci] > COLL_MAX_LANES) {
			snprintf(err, errlen, "%u pieces of %zu bytes in one collective: at most %d "
				 "(raise TALLY_PARTITION_BYTES)", need[ci],
				 (size_t)1 << (COLL_MIN_SHIFT + ci), COLL_MAX_LANES);
			return -E2BIG;
		}
		if (need[ci] > k->nlanes && need[ci] > cc->lanes)
			k->nlanes = need[ci];
		if (k->nlanes < cc->lanes && need[ci])
			k->nlanes = cc->lanes;
		need[ci] = 0; /* from here: pieces of the class placed so far */
	}
	for (unsigned i = 0; i < cc->nplan; i++) {
		struct coll_piece *p = &cc->plan[i];
		struct coll_class *k = &cc->cls[tdt][p->cls];
		struct coll_lane *l;

		p->lane = (k->next + need[p->cls]++) % k->nlanes;
		if (!(l = k->lanes[p->lane])) {
			if (!(l = calloc(1, sizeof(*l))))
				return -ENOMEM;
			l->tensor = -1;
			l->cc = cc;
			k->lanes[p->lane] = l;
		}
		if (atomic_load(&l->busy))
			return -EBUSY;
	}
	/* declared only once every lane is free: a retry declares nothing twice */
	for (unsigned i = 0; i < cc->nplan; i++) {
		struct coll_piece *p = &cc->plan[i];
		struct coll_lane *l = cc->cls[tdt][p->cls].lanes[p->lane];
		int rc;

		if (l->tensor < 0 && (rc = lane_declare(cc, l, tdt, p->cls, p->lane, err, errlen)))
			return rc;
	}
	return 0;
}

static void first_err(atomic_int *e, int status)
{
	int zero = 0;

	atomic_compare_exchange_strong(e, &zero, status);
}

/* The agent's progress thread, once per piece. */
static void piece_done(void *arg, int handle, int status)
{
	struct coll_lane *l = arg;
	struct coll_req *r = l->req;

	(void)handle;
	if (!status && l->out)
		memcpy(l->out, l->buf, l->out_bytes);
	if (status)
		first_err(r ? &r->err : &l->cc->bg_err, status);
	l->req = NULL;
	atomic_store(&l->busy, 0);
	if (r)
		atomic_fetch_sub(&r->left, 1);
}

static int piece_push(struct coll_comm *cc, struct coll_req *r, struct coll_piece *p, int tdt)
{
	struct coll_lane *l = cc->cls[tdt][p->cls].lanes[p->lane];
	size_t cb = (size_t)1 << (COLL_MIN_SHIFT + p->cls);
	char *ptr = p->data;
	int h;

	l->req = p->out ? r : NULL;
	l->out = NULL;
	if (!(p->data == p->out && p->bytes == cb)) {
		/* padded, or another rank's shard (NCCL's send buffer is not ours to write) */
		if (!l->buf && !(l->buf = malloc(cb)))
			return -ENOMEM;
		memcpy(l->buf, p->data, p->bytes);
		memset(l->buf + p->bytes, 0, cb - p->bytes);
		ptr = l->buf;
		l->out = p->out;
		l->out_bytes = p->bytes;
	}
	atomic_store(&l->busy, 1);
	if (l->req)
		atomic_fetch_add(&r->left, 1);
	/* another rank's shard: owner mode, its sums stay off this rank's downlink (the
	 * appliance answers each chunk header-only; the lane completes as before) */
	h = tally_agent_push_pull_flags(cc->a, l->tensor, ptr, cb, TALLY_AGENT_CPU, NULL,
					p->out || !cc->owner ? 0 : TALLY_AGENT_NO_RESULT,
					piece_done, l);
	if (h < 0) {
		atomic_store(&l->busy, 0);
		if (l->req)
			atomic_fetch_sub(&r->left, 1);
		l->req = NULL;
		return h;
	}
	return 0;
}

int coll_plan_push(struct coll_comm *cc, struct coll_req *r, int tdt, char *err, size_t errlen)
{
	int rc = plan_lanes(cc, tdt, err, errlen);

	if (rc)
		return rc;
	for (unsigned i = 0; i < cc->nplan; i++) {
		struct coll_piece *p = &cc->plan[i];

		cc->cls[tdt][p->cls].next = (p->lane + 1) % cc->cls[tdt][p->cls].nlanes;
		if ((rc = piece_push(cc, r, p, tdt))) {
			/* the ranks now disagree on what was pushed: this collective fails here,
			 * the others' at their give-up; pieces already out still count on r */
			snprintf(err, errlen, "piece %u of %u: %s", i, cc->nplan,
				 rc == -ENOMEM ? "out of memory" : tally_agent_strerror(cc->a));
			return rc == -EBUSY ? -EIO : rc;
		}
	}
	return 0;
}

int coll_lanes_drain(struct coll_comm *cc, unsigned max_ms)
{
	for (unsigned ms = 0;; ms++) {
		int busy = 0;

		for (unsigned d = 0; d < COLL_NDT && !busy; d++)
			for (unsigned ci = 0; ci < COLL_NCLASS && !busy; ci++)
				for (unsigned li = 0; li < cc->cls[d][ci].nlanes && !busy; li++)
					busy = cc->cls[d][ci].lanes[li] &&
					       atomic_load(&cc->cls[d][ci].lanes[li]->busy);
		if (!busy)
			return 0;
		if (ms >= max_ms)
			return -ETIMEDOUT;
		usleep(1000);
	}
}

void coll_lanes_free(struct coll_comm *cc)
{
	for (unsigned d = 0; d < COLL_NDT; d++)
		for (unsigned ci = 0; ci < COLL_NCLASS; ci++)
			for (unsigned li = 0; li < cc->cls[d][ci].nlanes; li++) {
				struct coll_lane *l = cc->cls[d][ci].lanes[li];

				if (l) {
					free(l->buf);
					free(l);
				}
			}
	free(cc->plan);
}
