/* SPDX-License-Identifier: Apache-2.0
 * engine_onebit.c — the server stage of 1-bit Adam / 1-bit LAMB (DeepSpeed's two-stage
 * error feedback) for keys registered with compression TALLY_COMP_ONEBIT. A push carries
 * [f32 scale_w][sign bits]; it is decompressed straight into the parity's f32 accumulator
 * (the first contribution loads, the others add: ±scale_w per element). At completion the
 * sum is averaged over the contributors, compressed with the key's persistent server error
 * into the chunk's RESULT buffer [f32 scale_s][bits], and the error keeps what the signs
 * could not carry. Nothing here allocates; the error lives in the key's arena block.
 */
#include <string.h>

#include "engine_int.h"

void engine_onebit_add(struct tally_engine *e, float *acc, const void *payload, uint32_t n,
		       int first)
{
	const uint8_t *pl = payload;
	float scale = tally_le_f32(pl);

	if (first)
		tally_sum_sign_unpack(acc, pl + 4, n, scale);
	else
		tally_sum_sign_unpack_acc(acc, pl + 4, n, scale);
	e->st.onebit_pushes++;
}

void engine_onebit_server(struct tally_engine *e, struct engine_key *k, uint32_t idx, float *acc,
			  uint32_t n, uint16_t contrib)
{
	uint32_t p = idx >= k->nchunks;
	uint32_t c = idx - p * k->nchunks;
	uint8_t *out = (uint8_t *)k->res[p] + (size_t)c * k->ob_stride;
	float *err = k->err + (size_t)c * k->reg.chunk_elems;

	/* The average over the pushes that made it (quorum: fewer than participants). One
	 * f32 multiply by the rounded reciprocal, exact for a power-of-two count. */
	if (contrib > 1)
		tally_sum_f32_scale(acc, acc, n, 1.0f / (float)contrib);
	tally_put_le_f32(out, tally_sum_onebit_compress(out + 4, err, acc, n));
	e->st.onebit_results++;
}

static size_t onebit_wire_bytes(uint32_t n)
{
	return TALLY_ONEBIT_BYTES(n);
}

static const struct engine_codec onebit_codec = {
	.name = "onebit", .id = TALLY_COMP_ONEBIT, .recover = 0, .flag = TALLY_F_ONEBIT,
	.wire_bytes = onebit_wire_bytes, .add = engine_onebit_add, .result = engine_onebit_server,
};

/* The registration table: one line per codec, indexed by its REGISTER compression id. */
static const struct engine_codec *const engine_codec_tab[TALLY_COMP_COUNT] = {
	[TALLY_COMP_ONEBIT] = &onebit_codec,
};

const struct engine_codec *engine_codec_by_id(uint8_t id)
{
	return id < TALLY_COMP_COUNT ? engine_codec_tab[id] : NULL;
}
