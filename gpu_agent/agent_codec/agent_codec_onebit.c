/* SPDX-License-Identifier: Apache-2.0
 * agent_codec_onebit.c — the worker stage of 1-bit Adam / 1-bit LAMB (DeepSpeed's
 * two-stage error feedback): per chunk, c = x + e_w, scale_w = ||c|| / sqrt(m), the signs
 * of c, and e_w = c - scale_w sign(c). The wire is [f32 scale][bits] per chunk
 * (tally_onebit_key_bytes's layout), REGISTERed with compression TALLY_COMP_ONEBIT; the
 * appliance's server stage (engine_onebit.c) returns the average compressed the same way. */
#include <errno.h>
#include <string.h>

#include "agent_codec.h"
#include "tally_proto.h"
#include "tally_sum.h"

static void onebit_reg(struct tally_register *reg, uint32_t chunk_elems)
{
	reg->compression = TALLY_COMP_ONEBIT;
	reg->chunk_elems = chunk_elems;
	reg->flags &= (uint16_t)~TALLY_KEY_AVERAGE; /* the server stage averages */
}

static uint32_t onebit_chunk_elems(uint32_t mcb, uint32_t n)
{
	uint32_t ce;

	if (mcb > TALLY_MAX_PAYLOAD)
		mcb = TALLY_MAX_PAYLOAD;
	ce = (mcb - 4) * 8;
	return n < ce ? n : ce;
}

static size_t onebit_chunk_bytes(uint32_t m)
{
	return TALLY_ONEBIT_BYTES(m);
}

static void onebit_compress(uint8_t *wire, void *state, const float *src, uint32_t m)
{
	tally_put_le_f32(wire, tally_sum_onebit_compress(wire + 4, state, src, m));
}

static int onebit_decompress(float *dst, void *state, const uint8_t *mine, const uint8_t *res,
			     size_t res_bytes, uint32_t m, int excluded)
{
	if (res_bytes != TALLY_ONEBIT_BYTES(m))
		return -EINVAL;
	/* the server's result, already the average: ±scale_s per element */
	tally_sum_sign_unpack(dst, res + 4, m, tally_le_f32(res));
	/* left out by a quorum: e_w = c (e_w + ±scale_w), so nothing is lost */
	if (excluded)
		tally_sum_sign_unpack_acc(state, mine + 4, m, tally_le_f32(mine));
	return 0;
}

static void onebit_reset(void *state, size_t n)
{
	memset(state, 0, n * sizeof(float));
}

const struct agent_codec_ops agent_codec_onebit_ops = {
	.name = "onebit",
	.server_averages = 1,
	.state_elem_bytes = sizeof(float),
	.reg = onebit_reg,
	.chunk_elems = onebit_chunk_elems,
	.chunk_bytes = onebit_chunk_bytes,
	.compress = onebit_compress,
	.decompress = onebit_decompress,
	.reset = onebit_reset,
};
