/* SPDX-License-Identifier: Apache-2.0
 * perf_gen.c — the line-rate generator's core (perf_gen.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

#include "perf_gen.h"
#include "tally_proto.h"
#include "tally_sum.h"

struct pg_gen {
	struct pg_opts o;
	unsigned slots;        /* keys * chunks */
	unsigned elems;        /* f32 per chunk */
	uint32_t flen;         /* bytes of one push frame */
	unsigned round_off;    /* byte offset of hdr.round in an encoded header */
	uint8_t *frames;       /* [slot][rank] push frames */
	float *ref;            /* [slot] reference sums */
	uint64_t *sent_tsc;    /* [window][slot][rank] */
	uint8_t *got;          /* [window][slot][rank] a RESULT came */
	uint64_t *round_t0;    /* [window] first push, tsc */
	uint64_t *round_got;   /* [window] RESULTs */
	uint64_t *round_sent;  /* [window] pushes handed to the port */
	uint8_t *txf[PG_MAX_BURST];
	uint32_t txl[PG_MAX_BURST];
	uint8_t *rtxf[PG_MAX_BURST]; /* repair's own batch */
	uint32_t rtxl[PG_MAX_BURST];
	uint32_t next_round;   /* round of the next push */
	uint32_t oldest;       /* oldest round not retired */
	uint64_t pos;          /* push index within the round */
	uint64_t rx_seen;
	double hz;
	const struct pg_io *io; /* the run's port (repair sends through it) */
	int stalled, repaired;  /* repair mode: the window is closed; the oldest was re-sent */
	uint64_t stall_t0;
};

static double pg_mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double pg_tsc_hz(void)
{
	static double hz;
	double t0, t1;
	uint64_t c0, c1;

	if (hz > 0)
		return hz;
	t0 = pg_mono();
	c0 = __rdtsc();
	do
		t1 = pg_mono();
	while (t1 - t0 < 0.02);
	c1 = __rdtsc();
	hz = (double)(c1 - c0) / (t1 - t0);
	return hz;
}

/* Small integers: every sum of up to 1024 ranks is exact in f32. */
static float pg_value(unsigned rank, unsigned slot, unsigned j)
{
	return (float)((rank * 7u + slot * 5u + j * 3u) % 17u);
}

/* Where hdr.round lies in an encoded header: the bytes that differ between two encodings. */
static unsigned pg_find_round(void)
{
	struct tally_hdr h = { .op = TALLY_OP_PUSH };
	uint8_t a[TALLY_HDR_LEN], b[TALLY_HDR_LEN];

	tally_proto_encode_hdr(a, &h);
	h.round = 0xffffffffu;
	tally_proto_encode_hdr(b, &h);
	for (unsigned i = 0; i < TALLY_HDR_LEN; i++)
		if (a[i] != b[i])
			return i;
	return 0;
}

static void pg_put_round(uint8_t *hdr, unsigned off, uint32_t round)
{
	hdr[off] = (uint8_t)round; /* little-endian on the wire, as tally_proto encodes */
	hdr[off + 1] = (uint8_t)(round >> 8);
	hdr[off + 2] = (uint8_t)(round >> 16);
	hdr[off + 3] = (uint8_t)(round >> 24);
}

static void pg_build(struct pg_gen *g)
{
	const struct pg_opts *o = &g->o;

	for (unsigned s = 0; s < g->slots; s++) {
		float *ref = g->ref + (size_t)s * g->elems;

		memset(ref, 0, sizeof(float) * g->elems);
		for (unsigned r = 0; r < o->ranks; r++) {
			uint8_t *f = g->frames + ((size_t)s * o->ranks + r) * g->flen;
			float *pl = (float *)(f + TALLY_HDR_LEN);
			struct tally_hdr h = {
				.op = TALLY_OP_PUSH, .job_id = o->job_id, .rank = r,
				.token = o->token, .key = pg_key(o, s / o->chunks),
				.offset = (s % o->chunks) * g->elems, .count = g->elems,
				.dtype = TALLY_DT_F32,
			};

			for (unsigned j = 0; j < g->elems; j++) {
				pl[j] = pg_value(r, s, j);
				ref[j] += pl[j];
			}
			tally_proto_finish(f, &h, pl, g->elems * sizeof(float));
		}
	}
}

/* Zeroed, in whole cache lines of its own: generators of several lcores (tally-linegen
 * --gen-lcores) write their state on every send, and no line may hold two lcores' data. */
static void *pg_zalloc(size_t n, size_t size)
{
	size_t bytes = (n * size + 63) / 64 * 64;
	void *p = aligned_alloc(64, bytes ? bytes : 64);

	if (p)
		memset(p, 0, bytes ? bytes : 64);
	return p;
}

int pg_create(const struct pg_opts *o, struct pg_gen **out)
{
	struct pg_gen *g;
	size_t per;

	*out = NULL;
	if (o->ranks < PG_MIN_RANKS || o->ranks > PG_MAX_RANKS || !o->keys || !o->chunks ||
	    !o->chunk_bytes || o->chunk_bytes % 4 || o->chunk_bytes > TALLY_MAX_PAYLOAD ||
	    o->window < 2 || !o->burst || o->burst > PG_MAX_BURST || !o->sample_every ||
	    (o->key_group && o->key_stride < o->key_group))
		return -EINVAL;
	g = pg_zalloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->o = *o;
	g->slots = o->keys * o->chunks;
	g->elems = o->chunk_bytes / 4;
	g->flen = TALLY_HDR_LEN + o->chunk_bytes;
	g->round_off = pg_find_round();
	per = (size_t)o->window * g->slots * o->ranks;
	g->frames = aligned_alloc(64, ((size_t)g->slots * o->ranks * g->flen + 63) / 64 * 64);
	g->ref = pg_zalloc((size_t)g->slots * g->elems, sizeof(float));
	g->sent_tsc = pg_zalloc(per, sizeof(uint64_t));
	g->got = pg_zalloc(per, 1);
	g->round_t0 = pg_zalloc(o->window, sizeof(uint64_t));
	g->round_got = pg_zalloc(o->window, sizeof(uint64_t));
	g->round_sent = pg_zalloc(o->window, sizeof(uint64_t));
	g->hz = pg_tsc_hz();
	if (!g->frames || !g->ref || !g->sent_tsc || !g->got || !g->round_t0 || !g->round_got ||
	    !g->round_sent) {
		pg_free(g);
		return -ENOMEM;
	}
	pg_build(g);
	*out = g;
	return 0;
}

void pg_free(struct pg_gen *g)
{
	if (!g)
		return;
	free(g->frames);
	free(g->ref);
	free(g->sent_tsc);
	free(g->got);
	free(g->round_t0);
	free(g->round_got);
	free(g->round_sent);
	free(g);
}

void pg_stats_add(struct pg_stats *d, const struct pg_stats *s)
{
	d->secs += s->secs;
	d->offered += s->offered;
	d->tx_refused += s->tx_refused;
	d->results += s->results;
	d->expected += s->expected;
	d->missing += s->missing;
	d->crc_bad += s->crc_bad;
	d->sum_bad += s->sum_bad;
	d->sum_checked += s->sum_checked;
	d->dup += s->dup;
	d->stray += s->stray;
	d->rounds += s->rounds;
	d->retx += s->retx;
	d->held_back += s->held_back;
	d->polls += s->polls;
	d->busy_polls += s->busy_polls;
	d->payload_bytes += s->payload_bytes;
	ph_merge(&d->chunk_ns, &s->chunk_ns);
	ph_merge(&d->push_ns, &s->push_ns);
	ph_merge(&d->round_ns, &s->round_ns);
}

uint32_t pg_key(const struct pg_opts *o, unsigned k)
{
	if (!o->key_group)
		return o->key_base + k;
	return o->key_base + k / o->key_group * o->key_stride + k % o->key_group;
}

int pg_key_index(const struct pg_opts *o, uint32_t key)
{
	uint32_t d = key - o->key_base, k;

	if (key < o->key_base)
		return -1;
	if (!o->key_group)
		k = d;
	else if (d % o->key_stride >= o->key_group)
		return -1;
	else
		k = d / o->key_stride * o->key_group + d % o->key_stride;
	return k < o->keys ? (int)k : -1;
}

const float *pg_reference(const struct pg_gen *g, unsigned key, unsigned chunk)
{
	return g->ref + (size_t)(key * g->o.chunks + chunk) * g->elems;
}

static size_t pg_idx(const struct pg_gen *g, uint32_t round, unsigned slot, unsigned rank)
{
	return ((size_t)(round % g->o.window) * g->slots + slot) * g->o.ranks + rank;
}

/* Re-send, once, every push of round `round`'s chunks that some rank has no RESULT of. */
static void pg_repair(struct pg_gen *g, uint32_t round, struct pg_stats *st)
{
	const struct pg_opts *o = &g->o;

	for (unsigned s = 0; s < g->slots; s++) {
		size_t base = pg_idx(g, round, s, 0);
		unsigned r, k = 0;

		for (r = 0; r < o->ranks && g->got[base + r]; r++)
			;
		if (r == o->ranks)
			continue;
		for (r = 0; r < o->ranks; r++) {
			uint8_t *f = g->frames + ((size_t)s * o->ranks + r) * g->flen;

			pg_put_round(f, g->round_off, round);
			g->rtxf[k] = f;
			g->rtxl[k++] = g->flen;
			if (k == o->burst || r + 1 == o->ranks) {
				g->io->tx(g->io->ctx, (const uint8_t *const *)g->rtxf, g->rtxl, k);
				st->retx += k;
				k = 0;
			}
		}
	}
}

/* Retire the oldest round: what did not come is missing. */
static void pg_retire(struct pg_gen *g, struct pg_stats *st)
{
	unsigned w = g->oldest % g->o.window;

	if (g->o.repair && g->io && g->round_got[w] < g->round_sent[w] && !g->repaired)
		pg_repair(g, g->oldest, st);
	g->repaired = 0;

	st->expected += g->round_sent[w];
	st->missing += g->round_sent[w] - g->round_got[w];
	st->rounds++;
	memset(g->got + (size_t)w * g->slots * g->o.ranks, 0, (size_t)g->slots * g->o.ranks);
	g->round_got[w] = 0;
	g->oldest++;
}


/* One received frame: check it, match it to the push it answers, time it. */
static void pg_result(struct pg_gen *g, const struct pg_frame *f, uint64_t now,
		      struct pg_stats *st)
{
	const struct pg_opts *o = &g->o;
	struct tally_pkt p;
	enum tally_reason why = tally_proto_decode_split(f->hdr, f->hlen, f->payload, f->plen, &p);
	unsigned key, slot, w;
	size_t i;

	if (why != TALLY_OK) {
		if (why == TALLY_R_BAD_CRC)
			st->crc_bad++;
		else
			st->stray++;
		return;
	}
	key = (unsigned)pg_key_index(o, p.hdr.key); /* -1: above o->keys, a stray */
	if (p.hdr.op != (o->echo ? TALLY_OP_PUSH : TALLY_OP_RESULT) || p.hdr.job_id != o->job_id || p.hdr.rank >= o->ranks ||
	    key >= o->keys || p.hdr.count != g->elems || p.hdr.offset % g->elems ||
	    p.hdr.offset / g->elems >= o->chunks || (int32_t)(p.hdr.round - g->oldest) < 0 ||
	    (int32_t)(p.hdr.round - g->next_round) > (g->pos ? 0 : -1)) {
		st->stray++; /* not ours, a round not sent yet, or one retired already (counted
			      * missing) */
		return;
	}
	slot = key * o->chunks + p.hdr.offset / g->elems;
	i = pg_idx(g, p.hdr.round, slot, p.hdr.rank);
	w = p.hdr.round % o->window;
	if (g->got[i]) {
		st->dup++;
		return;
	}
	g->got[i] = 1;
	g->round_got[w]++;
	st->results++;
	st->payload_bytes += o->chunk_bytes;
	ph_record(&st->push_ns, (uint64_t)((double)(now - g->sent_tsc[i]) * 1e9 / g->hz));
	/* ranks are sent in order: the last rank's push completes the chunk; a forwarder
	 * answers each push alone */
	ph_record(&st->chunk_ns,
		  (uint64_t)((double)(now - g->sent_tsc[o->echo ? i : i - p.hdr.rank +
								      o->ranks - 1]) *
			     1e9 / g->hz));
	if (++g->rx_seen % o->sample_every == 0) {
		const uint8_t *want = o->echo ? g->frames + ((size_t)slot * o->ranks + p.hdr.rank) *
							    g->flen + TALLY_HDR_LEN :
						(const uint8_t *)(g->ref + (size_t)slot * g->elems);

		st->sum_checked++;
		if (memcmp(p.payload, want, o->chunk_bytes))
			st->sum_bad++;
	}
	if (g->round_got[w] == (uint64_t)g->slots * o->ranks)
		ph_record(&st->round_ns, (uint64_t)((double)(now - g->round_t0[w]) * 1e9 / g->hz));
	while (g->oldest != g->next_round &&
	       g->round_got[g->oldest % o->window] == g->round_sent[g->oldest % o->window])
		pg_retire(g, st); /* complete rounds leave the window at once */
}

static unsigned pg_poll(struct pg_gen *g, const struct pg_io *io, struct pg_stats *st)
{
	struct pg_frame f[64];
	unsigned n = io->rx(io->ctx, f, 64);
	uint64_t now = __rdtsc();

	for (unsigned i = 0; i < n; i++)
		pg_result(g, &f[i], now, st);
	return n;
}

/* Repair mode, window closed on an incomplete oldest round: re-send its unanswered chunks
 * after repair_us, then every 10 x repair_us (a round given up would leave its key out of
 * step for good: the engine refuses the rounds after it). Always 0: keep waiting; the
 * pushes due meanwhile are held back. */
static int pg_wait(struct pg_gen *g, uint64_t now, struct pg_stats *st)
{
	double t = (g->o.repair_us ? g->o.repair_us : 1000) * 1e-6 * g->hz;

	if (!g->stalled) {
		g->stall_t0 = now;
		return 0;
	}
	if ((double)(now - g->stall_t0) > (g->repaired ? 10 * t : t)) {
		pg_repair(g, g->oldest, st);
		g->repaired = 1;
		g->stall_t0 = now;
	}
	return 0;
}

/* The next n pushes into g->txf/g->txl; opens a round (retiring the oldest at the window).
 * Returns how many: fewer when a round must be retired first with frames already in the
 * batch (a repair rewrites the round of templates the batch points at: send them first). */
static unsigned pg_fill(struct pg_gen *g, unsigned n, uint64_t now, struct pg_stats *st)
{
	const struct pg_opts *o = &g->o;
	uint64_t per_round = (uint64_t)g->slots * o->ranks;

	for (unsigned k = 0; k < n; k++) {
		unsigned slot = (unsigned)(g->pos / o->ranks), rank = (unsigned)(g->pos % o->ranks);
		unsigned w = g->next_round % o->window;
		uint8_t *f = g->frames + ((size_t)slot * o->ranks + rank) * g->flen;

		if (!g->pos) {
			if (g->next_round - g->oldest >= o->window) {
				if (k)
					return k;
				if (o->repair && !pg_wait(g, now, st)) {
					g->stalled = 1;
					return 0;
				}
				pg_retire(g, st); /* open loop: no waiting, what is late is lost */
			}
			g->stalled = 0;
			g->round_t0[w] = now;
			g->round_sent[w] = 0;
		}
		/* the port copies the frame before tx returns: one template serves every round */
		pg_put_round(f, g->round_off, g->next_round);
		g->sent_tsc[pg_idx(g, g->next_round, slot, rank)] = now;
		g->round_sent[w]++;
		g->txf[k] = f;
		g->txl[k] = g->flen;
		if (++g->pos == per_round) {
			g->pos = 0;
			g->next_round++;
		}
	}
	return n;
}

int pg_run(struct pg_gen *g, const struct pg_io *io, double rate, double seconds,
	   double drain_s, struct pg_stats *st)
{
	double ticks = rate > 0 ? g->hz / rate : 0, next;
	uint64_t t0, end, now;

	if (!io || !io->tx || !io->rx || seconds <= 0 || drain_s < 0)
		return -EINVAL;
	memset(st, 0, sizeof(*st));
	g->io = io;
	ph_reset(&st->chunk_ns);
	ph_reset(&st->push_ns);
	ph_reset(&st->round_ns);
	t0 = now = __rdtsc();
	end = t0 + (uint64_t)(seconds * g->hz);
	next = (double)t0;
	/* end on a chunk's last rank: a chunk half sent would never complete; with repair (a
	 * real appliance) on a round's end: every chunk must see every round */
	while (now < end || (g->o.repair ? g->pos : g->pos % g->o.ranks)) {
		unsigned n = g->o.burst, busy = 0;

		if (ticks > 0) {
			double due = ((double)now - next) / ticks;

			n = due < 0 ? 0 : due + 1 < n ? (unsigned)due + 1 : n;
		}
		if (now >= end && !g->o.repair && n > g->o.ranks - g->pos % g->o.ranks)
			n = (unsigned)(g->o.ranks - g->pos % g->o.ranks);
		if (now >= end && g->o.repair &&
		    n > (uint64_t)g->slots * g->o.ranks - g->pos)
			n = (unsigned)((uint64_t)g->slots * g->o.ranks - g->pos);
		if (n) {
			unsigned sent, due = n;

			n = pg_fill(g, n, now, st);
			if (!n && g->stalled && ticks > 0) {
				/* the device's window held them: offered, not sent */
				st->offered += due;
				st->held_back += due;
				next += due * ticks;
			}
			if (n) {
				sent = io->tx(io->ctx, (const uint8_t *const *)g->txf, g->txl, n);
				st->offered += n;
				st->tx_refused += n - sent;
				next += n * ticks;
				busy = 1;
			}
			/* a stall (descheduled) gives no credit beyond a few bursts: no storm */
			if ((double)now - next > 4.0 * g->o.burst * ticks)
				next = (double)now - 4.0 * g->o.burst * ticks;
		}
		busy |= pg_poll(g, io, st) != 0;
		st->polls++;
		st->busy_polls += busy;
		now = __rdtsc();
	}
	st->secs = (double)(now - t0) / g->hz;
	if (g->pos) { /* close the partial round: it holds round_sent pushes */
		g->pos = 0;
		g->next_round++;
	}
	end = now + (uint64_t)(drain_s * g->hz);
	g->stalled = 1; /* the drain waits on the oldest round as a closed window does */
	g->stall_t0 = now;
	while (g->oldest != g->next_round && (now = __rdtsc()) < end) {
		pg_poll(g, io, st);
		if (g->o.repair && g->oldest != g->next_round)
			pg_wait(g, now, st);
	}
	g->stalled = 0;
	while (g->oldest != g->next_round)
		pg_retire(g, st);
	return 0;
}
