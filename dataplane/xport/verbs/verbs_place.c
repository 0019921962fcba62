/* SPDX-License-Identifier: Apache-2.0
 * verbs_place.c — advertisements, placement records and the registration cache (see
 * verbs_place.h): pure logic, no verbs call.
 */
#include "verbs_place.h"

#include <string.h>

#include "tally_proto.h"

#define ADV_VERSION 1u

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

/* magic, version, job, rank, key, round, rkey, len (32 bits: 0 withdraws; the 4 GiB
 * limit is one key's buffer), addr (64 bits), 4 spare bytes = 40 */
void verbs_adv_encode(uint8_t out[VERBS_ADV_BYTES], const struct verbs_adv *a)
{
	memset(out, 0, VERBS_ADV_BYTES);
	put32(out, VERBS_ADV_MAGIC);
	put32(out + 4, ADV_VERSION);
	put32(out + 8, a->job);
	put32(out + 12, a->rank);
	put32(out + 16, a->key);
	put32(out + 20, a->round);
	put32(out + 24, a->rkey);
	put32(out + 28, a->len >= VERBS_ADV_MAX_BYTES ? 0xffffffffu : (uint32_t)a->len);
	put64(out + 32, a->addr);
}

enum verbs_adv_verdict verbs_adv_check(const void *buf, size_t len, int authed, uint32_t job,
				       uint32_t rank, struct verbs_adv *a)
{
	const uint8_t *b = buf;
	struct verbs_adv v;

	if (len != VERBS_ADV_BYTES || get32(b) != VERBS_ADV_MAGIC || get32(b + 4) != ADV_VERSION)
		return VA_BAD_FORMAT;
	v = (struct verbs_adv){ .job = get32(b + 8), .rank = get32(b + 12), .key = get32(b + 16),
				.round = get32(b + 20), .rkey = get32(b + 24),
				.len = get32(b + 28), .addr = get64(b + 32), .valid = 1 };
	if (authed && (v.job != job || v.rank != rank))
		return VA_BAD_OWNER;
	if (v.rank >= TALLY_MAX_WORKERS)
		return VA_BAD_OWNER;
	if (!v.len) {
		*a = v;
		return VA_WITHDRAW;
	}
	/* 0xffffffff is what an encoder writes for "too long": refused like a wrap */
	if (!v.addr || v.len == 0xffffffffu || v.addr + v.len < v.addr)
		return VA_BAD_RANGE;
	*a = v;
	return VA_OK;
}

int verbs_adv_place(const struct verbs_adv *tab, uint32_t job, uint32_t rank, uint32_t key,
		    uint32_t round, uint16_t flags, uint32_t offset, uint32_t count, size_t len,
		    uint64_t *raddr, uint32_t *rkey)
{
	const struct verbs_adv *a = &tab[verbs_adv_idx(key, round)];
	uint64_t off;

	if (!(flags & TALLY_F_INCLUDED) || (flags & (TALLY_F_RESEND | TALLY_F_ONEBIT)) || !len ||
	    !count || len % count)
		return 0;
	if (!a->valid || a->key != key || a->round != round || a->job != job || a->rank != rank)
		return 0;
	off = (uint64_t)offset * (len / count); /* elements of the wire dtype */
	if (off > a->len || len > a->len - off)
		return -1;
	*raddr = a->addr + off;
	*rkey = a->rkey;
	return 1;
}

void verbs_place_encode(uint8_t out[VERBS_PLACE_BYTES], uint64_t addr, uint32_t len)
{
	put32(out, VERBS_PLACE_MAGIC);
	put32(out + 4, len);
	put64(out + 8, addr);
}

int verbs_place_decode(const uint8_t *rec, uint64_t *addr, uint32_t *len)
{
	if (get32(rec) != VERBS_PLACE_MAGIC)
		return -1;
	*len = get32(rec + 4);
	*addr = get64(rec + 8);
	return 0;
}

struct verbs_mrc_ent *verbs_mrc_find(struct verbs_mrc *m, uint64_t addr, uint64_t len)
{
	for (uint32_t i = 0; i < m->n; i++) {
		struct verbs_mrc_ent *e = &m->ent[i];

		if (e->mr && addr >= e->addr && addr - e->addr <= e->len &&
		    len <= e->len - (addr - e->addr)) {
			e->used = ++m->tick;
			return e;
		}
	}
	return NULL;
}

int verbs_mrc_covers(const struct verbs_mrc *m, uint64_t addr, uint64_t len)
{
	for (uint32_t i = 0; i < m->n; i++) {
		const struct verbs_mrc_ent *e = &m->ent[i];

		if (e->mr && addr >= e->addr && addr - e->addr <= e->len &&
		    len <= e->len - (addr - e->addr))
			return 1;
	}
	return 0;
}

struct verbs_mrc_ent *verbs_mrc_victim(struct verbs_mrc *m)
{
	struct verbs_mrc_ent *old = NULL;

	for (uint32_t i = 0; i < m->n; i++) {
		struct verbs_mrc_ent *e = &m->ent[i];

		if (!e->mr)
			return e;
		if (!old || e->used < old->used)
			old = e;
	}
	return old;
}
