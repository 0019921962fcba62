/* SPDX-License-Identifier: Apache-2.0
 * agent_compress.c — a tensor's compressed phase (tally_agent_set_codec,
 * tally_agent_set_compression) through its worker-stage codec (agent_codec/): the codec
 * compresses each chunk of a partition before the push and decompresses the appliance's
 * RESULT after it; here are the buffers, keys and rounds. A tensor's compressed phase has
 * its own keys (partition key | TALLY_AGENT_KEY_ONEBIT, REGISTERed as the codec says) with
 * their own rounds (from 0), so the uncompressed keys keep their rounds for a switch back.
 * The client sends the compressed buffer chunk by chunk, chunk c at c * chunk_bytes(ce). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "agent_codec.h"
#include "agent_core.h"
#include "tally_agent.h"
#include "tally_proto.h"
#include "tally_sum.h"

int agent_comp_active(const struct agent_tensor *t, uint64_t round)
{
	return t->comp_set && round >= t->comp_on && !(t->comp_off_set && round >= t->comp_off);
}

/* Chunk elements of a compressed key of n elements: the codec's largest chunk that fits
 * the smallest max_chunk_bytes the appliances gave in JOIN_OK (else the configured one). */
static uint32_t comp_chunk_elems(const struct tally_agent *a, const struct agent_tensor *t,
				 uint32_t n)
{
	uint32_t mcb = a->comp_max_chunk ? a->comp_max_chunk
		     : a->cfg.max_chunk_bytes ? a->cfg.max_chunk_bytes : 8192;

	return t->codec->chunk_elems(mcb, n);
}

void agent_comp_reg(const struct tally_agent *a, const struct agent_tensor *t,
		    const struct agent_part *p, struct tally_register *reg, uint32_t *key)
{
	t->codec->reg(reg, comp_chunk_elems(a, t, reg->nelems));
	*key = p->key | TALLY_AGENT_KEY_ONEBIT;
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
		total += agent_codec_key_bytes(t->codec, n, comp_chunk_elems(a, t, n));
	}
	if (t->codec->state_elem_bytes)
		t->cstate = calloc(t->key_bytes / 4, t->codec->state_elem_bytes);
	t->cin = malloc(total);
	t->cout = malloc(total);
	if ((t->codec->state_elem_bytes && !t->cstate) || !t->cin || !t->cout) {
		agent_comp_free(t);
		return -ENOMEM;
	}
	return 0;
}

void agent_comp_free(struct agent_tensor *t)
{
	free(t->cstate);
	free(t->cin);
	free(t->cout);
	t->cstate = NULL;
	t->cin = t->cout = NULL;
}

/* Buffers and REGISTER of the compressed keys through the progress thread (once). */
static int comp_prepare_locked(struct tally_agent *a, int id)
{
	struct agent_tensor *t = &a->tensors[id];
	int rc;

	if (t->comp_keys)
		return 0;
	if (!t->cin && (rc = comp_alloc_locked(a, t))) {
		agent_set_err(a, "set_compression '%s': out of memory", t->name);
		return rc;
	}
	rc = agent_register_sync(a, id, 1);
	pthread_cond_broadcast(&a->done);
	if (rc) {
		agent_errf(a->err, sizeof(a->err), "set_compression '%s': %s", t->name, a->reg_err);
		return rc;
	}
	t->comp_keys = 1;
	return 0;
}

/* Checks of a switch of tensor to codec cd (NULL: none) from from_round; bad: an unknown
 * mode (set_compression). */
static int comp_check_locked(struct tally_agent *a, int tensor, int bad, uint64_t from_round)
{
	const struct agent_tensor *t;

	if (tensor < 0 || (unsigned)tensor >= a->ntensors) {
		agent_errf(a->err, sizeof(a->err), "set_compression: no tensor %d", tensor);
		return -ENOENT;
	}
	t = &a->tensors[tensor];
	if (bad || t->dtype != TALLY_DT_F32 || from_round < t->subm) {
		agent_errf(a->err, sizeof(a->err), "set_compression '%s': from round %llu: "
			   "needs an f32 tensor, a known mode and a round not yet submitted",
			   t->name, (unsigned long long)from_round);
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

/* Tensor's rounds from from_round on through codec cd (NULL: uncompressed); checked. */
static int comp_switch_locked(struct tally_agent *a, int tensor,
			      const struct agent_codec_ops *cd, uint64_t from_round)
{
	struct agent_tensor *t = &a->tensors[tensor];
	int rc;

	if (!cd) {
		t->comp_off = from_round;
		t->comp_off_set = 1;
		return 0;
	}
	if (t->codec && t->codec != cd && t->comp_keys) {
		agent_errf(a->err, sizeof(a->err), "set_codec '%s': it uses codec %s already",
			   t->name, t->codec->name);
		return -EINVAL;
	}
	if (t->codec != cd) {
		agent_comp_free(t);
		t->codec = cd;
	}
	if ((rc = comp_prepare_locked(a, tensor)))
		return rc;
	/* the switch: a fresh worker state (the appliance's server error is per key) */
	if (t->cstate)
		cd->reset(t->cstate, t->key_bytes / 4);
	t->comp_set = 1;
	t->comp_on = from_round;
	t->comp_off_set = 0;
	return 0;
}

int tally_agent_set_compression(struct tally_agent *a, int tensor, int mode, uint64_t from_round)
{
	int bad = mode != TALLY_AGENT_COMPRESS_NONE && mode != TALLY_AGENT_COMPRESS_ONEBIT;
	int rc;

	pthread_mutex_lock(&a->mu);
	if (!(rc = comp_check_locked(a, tensor, bad, from_round)))
		rc = comp_switch_locked(a, tensor, mode == TALLY_AGENT_COMPRESS_ONEBIT ?
					agent_codec_by_name("onebit") : NULL, from_round);
	pthread_mutex_unlock(&a->mu);
	return rc;
}

/* The tensor already runs its rounds from from_round on through cd (NULL: uncompressed):
 * a second wrapper of the same names (a second DistributedOptimizer, a rebuilt DDP hook)
 * asks again from round 0, long passed; nothing would change, so nothing is refused. */
static int comp_already_locked(const struct tally_agent *a, int tensor,
			       const struct agent_codec_ops *cd, uint64_t from_round)
{
	const struct agent_tensor *t;

	if (tensor < 0 || (unsigned)tensor >= a->ntensors)
		return 0;
	t = &a->tensors[tensor];
	if (!cd)
		return !t->comp_set || (t->comp_off_set && t->comp_off <= from_round);
	return t->comp_set && t->codec == cd && t->comp_on <= from_round && !t->comp_off_set;
}

int tally_agent_set_codec(struct tally_agent *a, int tensor, const char *name,
			  uint64_t from_round)
{
	const struct agent_codec_ops *cd = agent_codec_by_name(name);
	char names[128];
	int rc;

	pthread_mutex_lock(&a->mu);
	if (!cd && (!name || strcmp(name, "none"))) {
		agent_codec_names(names, sizeof(names));
		agent_errf(a->err, sizeof(a->err), "set_codec: no codec '%s' (known: none, %s)",
			   name ? name : "(null)", names);
		rc = -ENOENT;
	} else if (comp_already_locked(a, tensor, cd, from_round)) {
		rc = 0;
	} else if (!(rc = comp_check_locked(a, tensor, 0, from_round))) {
		rc = comp_switch_locked(a, tensor, cd, from_round);
	}
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
	else if (a->tensors[tensor].cstate)
		a->tensors[tensor].codec->reset(a->tensors[tensor].cstate,
						a->tensors[tensor].key_bytes / 4);
	pthread_mutex_unlock(&a->mu);
	return rc;
}

/* The state of a partition's elements from off on (NULL: the codec keeps none). */
static void *comp_state(const struct agent_tensor *t, const struct agent_part *p, uint32_t off)
{
	if (!t->cstate)
		return NULL;
	return (uint8_t *)t->cstate + (p->off / 4 + off) * t->codec->state_elem_bytes;
}

int agent_comp_start(struct tally_agent *a, const struct agent_tensor *t, struct agent_part *p,
		     const uint8_t *buf, uint64_t *wire_bytes)
{
	const struct agent_codec_ops *cd = t->codec;
	uint32_t n = (uint32_t)(p->bytes / 4), ce = comp_chunk_elems(a, t, n);
	size_t stride = cd->chunk_bytes(ce);
	const float *src = (const float *)(buf + p->off);
	uint8_t *cin = t->cin + p->coff;

	for (uint32_t off = 0, c = 0; off < n; off += ce, c++) {
		uint32_t m = n - off < ce ? n - off : ce;

		cd->compress(cin + (size_t)c * stride, comp_state(t, p, off), src + off, m);
	}
	*wire_bytes += agent_codec_key_bytes(cd, n, ce);
	return a->net->start(a->net_ctx, p->appl, p->key | TALLY_AGENT_KEY_ONEBIT, p->cround++,
			     cin, t->cout + p->coff);
}

int agent_comp_finish(struct tally_agent *a, const struct agent_tensor *t,
		      const struct agent_part *p, uint8_t *buf)
{
	const struct agent_codec_ops *cd = t->codec;
	uint32_t n = (uint32_t)(p->bytes / 4), ce = comp_chunk_elems(a, t, n);
	size_t stride = cd->chunk_bytes(ce);
	float *dst = (float *)(buf + p->off);

	for (uint32_t off = 0, c = 0; off < n; off += ce, c++) {
		uint32_t m = n - off < ce ? n - off : ce;
		size_t at = p->coff + (size_t)c * stride;
		int ex = a->net->excluded &&
			 a->net->excluded(a->net_ctx, p->appl, p->key | TALLY_AGENT_KEY_ONEBIT,
					  p->cround - 1, c);

		if (cd->decompress(dst + off, comp_state(t, p, off), t->cin + at, t->cout + at,
				   cd->chunk_bytes(m), m, ex)) {
			a->codec_rejects++;
			return -EIO;
		}
	}
	return 0;
}

int agent_comp_averages(const struct agent_tensor *t)
{
	return t->codec && t->codec->server_averages;
}
