/* SPDX-License-Identifier: Apache-2.0
 * engine_avg.c — keys registered with TALLY_KEY_AVERAGE: the RESULT is the average of the
 * contributors' pushes, taken on the f32 accumulator before the one rounding to the wire
 * dtype. Dividing after the appliance rounded the sum to f16 overflows (4 x 40000 sums to
 * 160000 > 65504: inf) and rounds twice (up to 1.33 ulp off the exact mean for 3 workers);
 * scaling first leaves one rounding of the f32 quotient. The divisor is the RESULT's
 * contributor count (with a quorum, the pushes that are in this sum). No allocation.
 */
#include "engine_int.h"

void engine_avg_store(const struct engine_key *k, void *res, float *acc, uint32_t n,
		      uint16_t contrib)
{
	float scale = 1.0f / (float)(contrib ? contrib : 1);

	switch (k->dtype) {
	case TALLY_DT_F16:
		tally_sum_f32_to_f16(res, acc, n, scale);
		break;
	case TALLY_DT_BF16:
		tally_sum_f32_to_bf16(res, acc, n, scale);
		break;
	default: /* f32: the RESULT payload is the accumulator itself (REGISTER refuses i32) */
		tally_sum_f32_scale(acc, acc, n, scale);
		break;
	}
}
