/* SPDX-License-Identifier: Apache-2.0
 * engine_onebit.c — the server stage of 1-bit Adam / 1-bit LAMB (DeepSpeed's two-stage
 * error feedback) for keys registered with compression TALLY_COMP_ONEBIT. A push carries
 * [f32 scale_w][sign bits]; it is decompressed straight into the parity's f32 accumulator
 * (the first contribution loads, the others add: ±scale_w per element). At completion the
 * sum is averaged over the contributors, compressed with the key's persistent server error
 * into the chunk's RESULT buffer [f32 scale_s][bits], and the error keeps what the signs
 * could not carry. Nothing here allocates; the error lives in the key's arena block
 * (state_bytes). Registered in engine_codec.c.
 */
#include <string.h>

#include "engine_int.h"

/* acc = (first) or += the decompressed push (±scale per element); counts onebit_pushes. */
static void engine_onebit_add(struct tally_engine *e, float *acc, const void *payload,
			      uint32_t n, int first)
{
	const uint8_t *pl = payload;
	float scale = tally_le_f32(pl);

	if (first)
		tally_sum_sign_unpack(acc, pl + 4, n, scale);
	else
		tally_sum_sign_unpack_acc(acc, pl + 4, n, scale);
	e->st.onebit_pushes++;
}

/* Completion of chunk slot idx: acc (the sum of contrib pushes) averaged, then compressed
 * with the key's server error into the chunk's RESULT buffer. */
static void engine_onebit_server(struct tally_engine *e, struct engine_key *k, uint32_t idx,
				 float *acc, uint32_t n, uint16_t contrib)
{
	uint32_t p = idx >= k->nchunks;
	uint32_t c = idx - p * k->nchunks;
	uint8_t *out = (uint8_t *)k->res[p] + (size_t)c * k->wire_stride;
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

/* the persistent server error, f32 per element */
static size_t onebit_state_bytes(uint32_t nelems)
{
	return (size_t)nelems * 4;
}

const struct engine_codec engine_onebit_codec = {
	.name = "onebit", .id = TALLY_COMP_ONEBIT, .dtype = TALLY_DT_F32, .recover = 0,
	.flag = TALLY_F_ONEBIT, .wire_bytes = onebit_wire_bytes,
	.key_bytes = tally_onebit_key_bytes, .state_bytes = onebit_state_bytes,
	.add = engine_onebit_add, .result = engine_onebit_server,
};
