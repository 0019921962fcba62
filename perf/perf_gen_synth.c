/* SPDX-License-Identifier: Apache-2.0
 * perf_gen_synth.c — the synthetic throttled appliance (perf_gen_synth.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <x86intrin.h>

#include "perf_gen_synth.h"
#include "tally_proto.h"
#include "tally_sum.h"

struct ps_ent {
	uint8_t hdr[TALLY_HDR_LEN];
	unsigned sum;
};

struct ps_target {
	struct ps_opts o;
	struct ps_stats st;
	unsigned slots, elems;
	double ticks, credit; /* TSC ticks per admitted push; the bucket's time */
	float *acc;           /* [window][slot] running sums */
	uint32_t *acc_round;  /* [window][slot] the round acc holds */
	uint32_t *acc_n;      /* [window][slot] pushes in it */
	float *sums;          /* [sums] finished chunks, waiting for rx */
	struct ps_ent *ring;  /* [sums * ranks] RESULTs */
	uint64_t head, tail, emitted;
};

int ps_create(const struct ps_opts *o, struct ps_target **out)
{
	struct ps_target *t;
	size_t cells;

	*out = NULL;
	if (!o->ranks || !o->keys || !o->chunks || !o->chunk_bytes || o->chunk_bytes % 4 ||
	    o->window < 2 || o->sums < 2 || o->cap_pps < 0 || !o->depth)
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->o = *o;
	t->slots = o->keys * o->chunks;
	t->elems = o->chunk_bytes / 4;
	cells = (size_t)o->window * t->slots;
	t->acc = calloc(cells * t->elems, sizeof(float));
	t->acc_round = calloc(cells, sizeof(uint32_t));
	t->acc_n = calloc(cells, sizeof(uint32_t));
	t->sums = calloc((size_t)o->sums * t->elems, sizeof(float));
	t->ring = calloc((size_t)o->sums * o->ranks, sizeof(struct ps_ent));
	if (!t->acc || !t->acc_round || !t->acc_n || !t->sums || !t->ring) {
		ps_free(t);
		return -ENOMEM;
	}
	ps_set_cap(t, o->cap_pps);
	*out = t;
	return 0;
}

void ps_free(struct ps_target *t)
{
	if (!t)
		return;
	free(t->acc);
	free(t->acc_round);
	free(t->acc_n);
	free(t->sums);
	free(t->ring);
	free(t);
}

void ps_set_cap(struct ps_target *t, double cap_pps)
{
	t->o.cap_pps = cap_pps;
	t->ticks = cap_pps > 0 ? pg_tsc_hz() / cap_pps : 0;
	t->credit = (double)__rdtsc();
}

const struct ps_stats *ps_stats(const struct ps_target *t)
{
	return &t->st;
}

void ps_reset_stats(struct ps_target *t)
{
	memset(&t->st, 0, sizeof(t->st));
}

/* All ranks are in: one RESULT per rank, or none if they cannot all be queued. */
static void ps_emit(struct ps_target *t, const struct tally_hdr *push, const float *acc)
{
	const struct ps_opts *o = &t->o;
	uint64_t cap = (uint64_t)o->sums * o->ranks;
	unsigned s;
	float *sum;
	struct tally_hdr h;

	if (cap - (t->tail - t->head) < o->ranks) {
		t->st.dropped_queue += o->ranks;
		return;
	}
	s = (unsigned)(t->emitted++ % o->sums);
	sum = t->sums + (size_t)s * t->elems;
	memcpy(sum, acc, o->chunk_bytes);
	t->st.chunks++;
	if (o->wrong_every && t->st.chunks % o->wrong_every == 0)
		sum[0] += 1.0f; /* a wrong sum with a right CRC: only the sum check sees it */
	h = *push;
	h.op = TALLY_OP_RESULT;
	h.flags = TALLY_F_INCLUDED;
	h.contrib = (uint16_t)o->ranks;
	h.aux = TALLY_AUX_LAST;
	h.payload_len = o->chunk_bytes;
	h.crc = tally_crc32c(sum, o->chunk_bytes);
	for (unsigned r = 0; r < o->ranks; r++) {
		struct ps_ent *e = &t->ring[t->tail++ % cap];

		struct tally_hdr hr = h;

		hr.rank = r;
		if (!r && o->corrupt_every && t->st.chunks % o->corrupt_every == 0)
			hr.crc ^= 1; /* rank 0's copy arrives with a bad CRC */
		tally_proto_encode_hdr(e->hdr, &hr);
		e->sum = s;
	}
	t->st.results += o->ranks;
}

static void ps_push(struct ps_target *t, const uint8_t *f, uint32_t len, uint64_t now)
{
	struct tally_pkt p;
	unsigned slot, c;
	float *acc;
	const float *pl;

	t->st.pushes++;
	if (t->ticks > 0) { /* token bucket: `depth` pushes of credit, as an RX ring's slots */
		if ((double)now < t->credit) {
			t->st.dropped_rate++;
			return;
		}
		if (t->credit < (double)now - t->o.depth * t->ticks)
			t->credit = (double)now - t->o.depth * t->ticks;
		t->credit += t->ticks;
	}
	if (tally_proto_decode(f, len, &p) != TALLY_OK || p.hdr.op != TALLY_OP_PUSH ||
	    p.hdr.key - t->o.key_base >= t->o.keys || p.hdr.count != t->elems ||
	    p.hdr.offset % t->elems || p.hdr.offset / t->elems >= t->o.chunks) {
		t->st.bad++;
		return;
	}
	t->st.admitted++;
	slot = (p.hdr.key - t->o.key_base) * t->o.chunks + p.hdr.offset / t->elems;
	c = (p.hdr.round % t->o.window) * t->slots + slot;
	acc = t->acc + (size_t)c * t->elems;
	if (t->acc_round[c] != p.hdr.round || !t->acc_n[c]) { /* a new round takes the cell */
		memset(acc, 0, t->o.chunk_bytes);
		t->acc_round[c] = p.hdr.round;
		t->acc_n[c] = 0;
	}
	pl = (const float *)p.payload;
	for (unsigned j = 0; j < t->elems; j++)
		acc[j] += pl[j];
	if (++t->acc_n[c] == t->o.ranks) {
		ps_emit(t, &p.hdr, acc);
		t->acc_n[c] = 0;
	}
}

static unsigned ps_tx(void *ctx, const uint8_t *const *frames, const uint32_t *lens, unsigned n)
{
	struct ps_target *t = ctx;
	uint64_t now = __rdtsc();

	t->st.polls++;
	t->st.busy_polls += n != 0;
	for (unsigned i = 0; i < n; i++)
		ps_push(t, frames[i], lens[i], now);
	return n; /* the port took them all; the appliance dropped what it could not admit */
}

static unsigned ps_rx(void *ctx, struct pg_frame *f, unsigned max)
{
	struct ps_target *t = ctx;
	uint64_t cap = (uint64_t)t->o.sums * t->o.ranks;
	unsigned n = 0;

	while (n < max && t->head != t->tail) {
		struct ps_ent *e = &t->ring[t->head++ % cap];

		f[n].hdr = e->hdr;
		f[n].hlen = TALLY_HDR_LEN;
		f[n].payload = (const uint8_t *)(t->sums + (size_t)e->sum * t->elems);
		f[n].plen = t->o.chunk_bytes;
		n++;
	}
	return n;
}

void ps_io(struct ps_target *t, struct pg_io *io)
{
	io->ctx = t;
	io->tx = ps_tx;
	io->rx = ps_rx;
}
