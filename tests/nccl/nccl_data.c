/* SPDX-License-Identifier: Apache-2.0
 * nccl_data.c — the harness's collective data: values whose sums depend on the order of
 * the adds, and the deterministic mode's reference sum (ranks in rank order, f32 / i32
 * accumulator, one rounding). Shared by the tests and perf/nccl_perf.c.
 */
#include "nccl_harness.h"
#include "tally_sum.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Values with many exponents, never zero: rounding depends on the order of the adds */
float val(int rank, int round, int slot, size_t i)
{
	uint32_t h = mix((uint32_t)rank * 0x9e3779b9u ^ (uint32_t)round << 20 ^ (uint32_t)slot << 25 ^
			 mix((uint32_t)i));
	float m = 0.5f + (float)(h & 0xffff) / 65536.0f;

	return ldexpf(h & 0x80000000u ? -m : m, (int)((h >> 16) % 12) - 6);
}

size_t esize(ncclDataType_t dt)
{
	return dt == ncclFloat16 || dt == ncclBfloat16 ? 2 : 4;
}

void put(ncclDataType_t dt, void *b, size_t i, float v, int32_t iv)
{
	switch (dt) {
	case ncclFloat32: ((float *)b)[i] = v; break;
	case ncclFloat16: ((uint16_t *)b)[i] = tally_f32_to_f16(v); break;
	case ncclBfloat16: ((uint16_t *)b)[i] = tally_f32_to_bf16(v); break;
	default: ((int32_t *)b)[i] = iv; break;
	}
}

float widen(ncclDataType_t dt, const void *b, size_t i)
{
	switch (dt) {
	case ncclFloat32: return ((const float *)b)[i];
	case ncclFloat16: return tally_f16_to_f32(((const uint16_t *)b)[i]);
	default: return tally_bf16_to_f32(((const uint16_t *)b)[i]);
	}
}

void fill(ncclDataType_t dt, void *b, size_t n, int rank, int round, int slot)
{
	for (size_t i = 0; i < n; i++) {
		float v = val(rank, round, slot, i);

		put(dt, b, i, v, (int32_t)mix((uint32_t)(v * 1e6f)));
	}
}

/* The deterministic mode's sum: ranks added in rank order into an f32 (i32) accumulator,
 * rounded once to the element type. */
void reference(ncclDataType_t dt, void *out, size_t n, int world, int round, int slot)
{
	unsigned char one[4];

	for (size_t i = 0; i < n; i++) {
		float acc = 0;
		uint32_t iacc = 0;

		for (int r = 0; r < world; r++) {
			float v = val(r, round, slot, i);

			put(dt, one, 0, v, (int32_t)mix((uint32_t)(v * 1e6f)));
			if (dt == ncclInt32)
				iacc += (uint32_t) * (int32_t *)one;
			else
				acc = r ? acc + widen(dt, one, 0) : widen(dt, one, 0);
		}
		if (dt == ncclInt32)
			((int32_t *)out)[i] = (int32_t)iacc;
		else if (dt == ncclFloat32)
			((float *)out)[i] = acc;
		else
			put(dt, out, i, acc, 0);
	}
}

