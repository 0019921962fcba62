/* SPDX-License-Identifier: Apache-2.0
 * test_agent_codec.c — the worker-stage codec registry (agent_codec.h) and the fp16 codec:
 * lookup by name, the generated table naming every codec, fp16's wire size, a round trip
 * f32 -> f16 -> f32 within f16's rounding (half an ulp: 2^-11 relative, normal range;
 * 2^-25 absolute, subnormal), special values, and a RESULT of the wrong length refused
 * with -EINVAL leaving the tensor untouched. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "agent_codec.h"
#include "tally_proto.h"

#define N 1000

static void test_registry(void **state)
{
	char names[128];

	(void)state;
	assert_non_null(agent_codec_by_name("fp16"));
	assert_non_null(agent_codec_by_name("onebit"));
	assert_null(agent_codec_by_name("zstd"));
	assert_null(agent_codec_by_name(NULL));
	assert_string_equal(agent_codec_by_name("fp16")->name, "fp16");
	agent_codec_names(names, sizeof(names));
	assert_non_null(strstr(names, "fp16"));
	assert_non_null(strstr(names, "onebit"));
}

static void test_fp16_reg(void **state)
{
	const struct agent_codec_ops *c = agent_codec_by_name("fp16");
	struct tally_register reg = {.nelems = 5000, .dtype = TALLY_DT_F32,
				     .flags = TALLY_KEY_AVERAGE};

	(void)state;
	c->reg(&reg, c->chunk_elems(8192, 5000));
	assert_int_equal(reg.dtype, TALLY_DT_F16);
	assert_int_equal(reg.compression, TALLY_COMP_NONE);
	assert_int_equal(reg.nelems, 5000);
	assert_int_equal(reg.flags, TALLY_KEY_AVERAGE); /* the appliance may average f16 */
	assert_int_equal(c->chunk_bytes(N), 2 * N);
	assert_int_equal(agent_codec_key_bytes(c, 5000, c->chunk_elems(8192, 5000)), 10000);
	assert_int_equal(c->state_elem_bytes, 0);
	assert_int_equal(c->server_averages, 0);
}

static void test_fp16_round_trip(void **state)
{
	const struct agent_codec_ops *c = agent_codec_by_name("fp16");
	float src[N], dst[N];
	uint8_t wire[2 * N];

	(void)state;
	for (int i = 0; i < N; i++)
		src[i] = (float)((i % 2 ? -1.0 : 1.0) * pow(10.0, (i % 90) / 10.0 - 5.0) * (1 + i % 7));
	src[0] = 0.0f;
	src[1] = 65504.0f;     /* f16's largest */
	src[2] = 1e6f;         /* beyond f16: inf */
	src[3] = 5.9604645e-8f; /* f16's smallest subnormal */
	c->compress(wire, NULL, src, N);
	assert_int_equal(c->decompress(dst, NULL, wire, wire, sizeof(wire), N, 0), 0);
	assert_true(dst[0] == 0.0f);
	assert_true(dst[1] == 65504.0f);
	assert_true(isinf(dst[2]) && dst[2] > 0);
	assert_true(dst[3] == src[3]);
	for (int i = 4; i < N; i++) {
		double tol = fabs(src[i]) >= 6.103515625e-5 ? fabs(src[i]) * 0x1p-11 : 0x1p-25;

		if (fabs((double)dst[i] - src[i]) > tol)
			fail_msg("element %d: %g -> %g (tolerance %g)", i, src[i], dst[i], tol);
	}
}

static void test_fp16_bad_length(void **state)
{
	const struct agent_codec_ops *c = agent_codec_by_name("fp16");
	float src[N], dst[N];
	uint8_t wire[2 * N];

	(void)state;
	for (int i = 0; i < N; i++)
		src[i] = (float)i;
	c->compress(wire, NULL, src, N);
	memset(dst, 0x5a, sizeof(dst));
	assert_int_equal(c->decompress(dst, NULL, wire, wire, sizeof(wire) - 2, N, 0), -EINVAL);
	assert_int_equal(c->decompress(dst, NULL, wire, wire, sizeof(wire) + 2, N, 0), -EINVAL);
	assert_int_equal(c->decompress(dst, NULL, wire, wire, 4 * N, N, 0), -EINVAL);
	for (int i = 0; i < N; i++) {
		uint32_t v;

		memcpy(&v, &dst[i], sizeof(v));
		assert_int_equal(v, 0x5a5a5a5au); /* untouched */
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_registry),
		cmocka_unit_test(test_fp16_reg),
		cmocka_unit_test(test_fp16_round_trip),
		cmocka_unit_test(test_fp16_bad_length),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
