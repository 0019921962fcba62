/* SPDX-License-Identifier: Apache-2.0
 * agent_codec_fp16.c — Horovod's Compression.fp16 as a worker-stage codec: an f32 tensor's
 * compressed keys are plain TALLY_DT_F16 keys (no server stage: the appliance widens each
 * push, sums in f32, and stores the sum, or the average, back as f16); the worker narrows
 * f32 to f16 before the push and widens the f16 RESULT back to f32. Half the wire bytes,
 * f16's precision and range (|x| <= 65504, about 3 significant digits). No state. */
#include <errno.h>

#include "agent_codec.h"
#include "tally_proto.h"
#include "tally_sum.h"

static void fp16_reg(struct tally_register *reg, uint32_t chunk_elems)
{
	reg->dtype = TALLY_DT_F16; /* a plain key: the client chunks it as any f16 key */
	(void)chunk_elems;
}

/* One codec chunk per partition: f16 is element by element, the client does the chunking. */
static uint32_t fp16_chunk_elems(uint32_t max_chunk_bytes, uint32_t n)
{
	(void)max_chunk_bytes;
	return n ? n : 1;
}

static size_t fp16_chunk_bytes(uint32_t m)
{
	return (size_t)m * 2;
}

static void fp16_compress(uint8_t *wire, void *state, const float *src, uint32_t m)
{
	(void)state;
	tally_sum_f32_to_f16((uint16_t *)(void *)wire, src, m, 1.0f);
}

static int fp16_decompress(float *dst, void *state, const uint8_t *mine, const uint8_t *res,
			   size_t res_bytes, uint32_t m, int excluded)
{
	(void)state;
	(void)mine;
	(void)excluded;
	if (res_bytes != fp16_chunk_bytes(m))
		return -EINVAL;
	tally_sum_f16_to_f32(dst, (const uint16_t *)(const void *)res, m);
	return 0;
}

static void fp16_reset(void *state, size_t n)
{
	(void)state;
	(void)n;
}

const struct agent_codec_ops agent_codec_fp16_ops = {
	.name = "fp16",
	.server_averages = 0,
	.state_elem_bytes = 0,
	.reg = fp16_reg,
	.chunk_elems = fp16_chunk_elems,
	.chunk_bytes = fp16_chunk_bytes,
	.compress = fp16_compress,
	.decompress = fp16_decompress,
	.reset = fp16_reset,
};
