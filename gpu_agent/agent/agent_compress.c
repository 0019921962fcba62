/* SPDX-License-Identifier: Apache-2.0
 * agent_compress.c — 1-bit compression of f32 tensors (tally_agent_set_compression): the
 * worker stage of DeepSpeed's two-stage error feedback, per chunk of each partition, before
 * the push, and the decompression of the appliance's server-stage result after it. A
 * tensor's compressed phase has its own keys (partition key | TALLY_AGENT_KEY_ONEBIT,
 * REGISTERed with compression TALLY_COMP_ONEBIT) with their own rounds (from 0), so the
 * uncompressed keys keep their rounds for a switch back. The client sends the compressed
 * buffer as opaque chunks [f32 scale][bits] (tally_onebit_key_bytes's layout). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "agent_core.h"
#include "tally_agent.h"
#include "tally_proto.h"
#include "tally_sum.h"

int agent_comp_active(const struct agent_tensor *t, uint64_t round)
{
	return t->comp_set && round >= t->comp_on && !(t->comp_off_set && round >= t->comp_off);
}

/* Chunk elements of a compressed key of n elements: the largest one-bit chunk that fits
 * the smallest max_chunk_bytes the appliances gave in JOIN_OK (else the configured one). */
static uint32_t comp_chunk_elems(const struct tally_agent *a, uint32_t n)
{
	uint32_t mcb = a->comp_max_chunk ? a->comp_max_chunk
		     : a->cfg.max_chunk_bytes ? a->cfg.max_chunk_bytes : 8192;
	uint32_t ce;

	if (mcb > TALLY_MAX_PAYLOAD)
		mcb = TALLY_MAX_PAYLOAD;
	ce = (mcb - 4) * 8;
	return n < ce ? n : ce;
}

void agent_comp_reg(const struct tally_agent *a, const struct agent_part *p,
		    struct tally_register *reg, uint32_t *key)
{
	reg->compression = TALLY_COMP_ONEBIT;
	reg->chunk_elems = comp_chunk_elems(a, reg->nelems);
	*key = p->key | TALLY_AGENT_KEY_ONEBIT;
	(void)p;
}

/* Per-tensor buffers: the worker error and the compressed in/out of every partition
 * (their offsets in p->coff). 0 or -ENOMEM. */
static int comp_alloc_locked(struct tally_agent *a, struct agent_tensor *t)
{
	size_t total = 0;

	for (unsigned i = 0; i < t->nparts; i++) {
		struct agent_part *p = part_at(a, t->first_part + i);
		uint32_t n = (uint32_t)(p->bytes / 4);

		p->coff = total;
		total += tally_onebit_key_bytes(n, comp_chunk_elems(a, n));
	}
	t->werr = calloc(t->key_bytes / 4, sizeof(float));
	t->cin = malloc(total);
	t->cout = malloc(total);
	if (!t->werr || !t->cin || !t->cout) {
		agent_comp_free(t);
		return -ENOMEM;
	}
	return 0;
}

void agent_comp_free(struct agent_tensor *t)
{
	free(t->werr);
	free(t->cin);
	free(t->cout);
	t->werr = NULL;
	t->cin = t->cout = NULL;
}

/* Buffers and REGISTER of the compressed keys through the progress thread (once). */
static int comp_prepare_locked(struct tally_agent *a, int id)
{
	struct agent_tensor *t = &a->tensors[id];
	int rc;

	if (t->comp_keys)
		return 0;
	if (!t->werr && (rc = comp_alloc_locked(a, t))) {
		agent_set_err(a, "set_compression '%s': out of memory", t->name);
		return rc;
	}
	while (a->reg_tensor >= 0)
		pthread_cond_wait(&a->done, &a->mu);
	a->reg_tensor = id;
	a->reg_comp = 1;
	a->reg_rc = 1;
	pthread_cond_broadcast(&a->wake);
	while (a->reg_rc == 1)
		pthread_cond_wait(&a->done, &a->mu);
	rc = a->reg_rc;
	a->reg_tensor = -1;
	a->reg_comp = 0;
	pthread_cond_broadcast(&a->done);
	if (rc) {
		agent_errf(a->err, sizeof(a->err), "set_compression '%s': %s", t->name, a->reg_err);
		return rc;
	}
	t->comp_keys = 1;
	return 0;
}

static int comp_check_locked(struct tally_agent *a, int tensor, int mode, uint64_t from_round)
{
	const struct agent_tensor *t;

	if (tensor < 0 || (unsigned)tensor >= a->ntensors) {
		agent_errf(a->err, sizeof(a->err), "set_compression: no tensor %d", tensor);
		return -ENOENT;
	}
	t = &a->tensors[tensor];
	if ((mode != TALLY_AGENT_COMPRESS_NONE && mode != TALLY_AGENT_COMPRESS_ONEBIT) ||
	    t->dtype != TALLY_DT_F32 || from_round < t->subm) {
		agent_errf(a->err, sizeof(a->err), "set_compression '%s': mode %d from round %llu: "
			   "needs an f32 tensor, a known mode and a round not yet submitted",
			   t->name, mode, (unsigned long long)from_round);
		return -EINVAL;
	}
	if (a->cfg.local_agg != TALLY_AGENT_LOCAL_OFF) {
		agent_set_err(a, "set_compression '%s': not with local aggregation", t->name);
		return -ENOTSUP;
	}
	if (t->busy) {
		agent_errf(a->err, sizeof(a->err), "set_compression '%s': %s", t->name,
			   t->busy < 0 ? "failed to register" : "a push_pull is in flight");
		return t->busy < 0 ? -EIO : -EBUSY;
	}
	return 0;
}

int tally_agent_set_compression(struct tally_agent *a, int tensor, int mode, uint64_t from_round)
{
	int rc;

	pthread_mutex_lock(&a->mu);
	if ((rc = comp_check_locked(a, tensor, mode, from_round)))
		goto out;
	struct agent_tensor *t = &a->tensors[tensor];
	if (mode == TALLY_AGENT_COMPRESS_NONE) {
		t->comp_off = from_round;
		t->comp_off_set = 1;
		goto out;
	}
	if ((rc = comp_prepare_locked(a, tensor)))
		goto out;
	/* the switch: a fresh worker error (the appliance's server error is per key) */
	memset(t->werr, 0, t->key_bytes);
	t->comp_set = 1;
	t->comp_on = from_round;
	t->comp_off_set = 0;
out:
	pthread_mutex_unlock(&a->mu);
	return rc;
}

int tally_agent_reset_compression_error(struct tally_agent *a, int tensor)
{
	int rc = 0;

	pthread_mutex_lock(&a->mu);
	if (tensor < 0 || (unsigned)tensor >= a->ntensors)
		rc = -ENOENT;
	else if (a->tensors[tensor].busy > 0)
		rc = -EBUSY;
	else if (a->tensors[tensor].werr)
		memset(a->tensors[tensor].werr, 0, a->tensors[tensor].key_bytes);
	pthread_mutex_unlock(&a->mu);
	return rc;
}

static void put_le_f32(uint8_t *p, float f)
{
	uint32_t v;

	memcpy(&v, &f, sizeof(v));
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static float le_f32(const uint8_t *p)
{
	uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
		     (uint32_t)p[3] << 24;
	float f;

	memcpy(&f, &v, sizeof(f));
	return f;
}

int agent_comp_start(struct tally_agent *a, const struct agent_tensor *t, struct agent_part *p,
		     const uint8_t *buf, uint64_t *wire_bytes)
{
	uint32_t n = (uint32_t)(p->bytes / 4), ce = comp_chunk_elems(a, n);
	uint32_t stride = TALLY_ONEBIT_BYTES(ce);
	const float *src = (const float *)(buf + p->off);
	float *err = t->werr + p->off / 4;
	uint8_t *cin = t->cin + p->coff;

	/* worker stage, chunk by chunk: c = x + e_w, scale_w, bits, e_w = c - scale_w sign(c) */
	for (uint32_t off = 0, c = 0; off < n; off += ce, c++) {
		uint32_t m = n - off < ce ? n - off : ce;
		uint8_t *o = cin + (size_t)c * stride;

		put_le_f32(o, tally_sum_onebit_compress(o + 4, err + off, src + off, m));
	}
	*wire_bytes += tally_onebit_key_bytes(n, ce);
	return a->net->start(a->net_ctx, p->appl, p->key | TALLY_AGENT_KEY_ONEBIT, p->cround++,
			     cin, t->cout + p->coff);
}

void agent_comp_finish(struct tally_agent *a, const struct agent_tensor *t,
		       const struct agent_part *p, uint8_t *buf)
{
	uint32_t n = (uint32_t)(p->bytes / 4), ce = comp_chunk_elems(a, n);
	uint32_t stride = TALLY_ONEBIT_BYTES(ce);
	float *dst = (float *)(buf + p->off);
	const uint8_t *cout = t->cout + p->coff;

	/* the server's result, already the average: ±scale_s per element */
	for (uint32_t off = 0, c = 0; off < n; off += ce, c++) {
		uint32_t m = n - off < ce ? n - off : ce;
		const uint8_t *o = cout + (size_t)c * stride;
		const uint8_t *mine = t->cin + p->coff + (size_t)c * stride;

		tally_sum_sign_unpack(dst + off, o + 4, m, le_f32(o));
		/* left out by a quorum: e_w = c (e_w + ±scale_w), so nothing is lost */
		if (a->net->excluded &&
		    a->net->excluded(a->net_ctx, p->appl, p->key | TALLY_AGENT_KEY_ONEBIT,
				     p->cround - 1, c))
			tally_sum_sign_unpack_acc(t->werr + p->off / 4 + off, mine + 4, m,
						  le_f32(mine));
	}
}
