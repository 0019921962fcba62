/* SPDX-License-Identifier: Apache-2.0
 * test_engine_avg.c — keys registered with TALLY_KEY_AVERAGE: the RESULT is the average
 * of the contributors, scaled on the f32 sum before the one rounding to the wire dtype.
 * f16 4 x 40000 averages to 40000 (a sum rounded to f16 first is inf); 3-worker f16 and
 * bf16 averages within 0.5 ulp (+ the f32 quotient's rounding, 2^-10 of that) of the
 * exact float64 mean, while rounding the sum first misses that bound on the same data;
 * quorum divides by the RESULT's contributors; f32 in place, scaled once (a duplicate's
 * re-sent RESULT is the same); deterministic keys; bad REGISTERs refused; JOIN_OK offers
 * TALLY_CAP_AVERAGE.
 */
#include <math.h>

#include "harness.h"
#include "tally_sum.h"

#define KEY 5
#define NEL 3000
#define CE 1024 /* chunks of 1024, 1024, 952 (f16: 2 KiB each) */
#define NCH ((NEL + CE - 1) / CE)

static uint32_t ch_n(uint32_t c)
{
	return NEL - c * CE < CE ? NEL - c * CE : CE;
}

static double to_f64(uint8_t dt, uint16_t v)
{
	return dt == TALLY_DT_F16 ? (double)tally_f16_to_f32(v) : (double)tally_bf16_to_f32(v);
}

static uint16_t from_f32(uint8_t dt, float f)
{
	return dt == TALLY_DT_F16 ? tally_f32_to_f16(f) : tally_f32_to_bf16(f);
}

/* The spacing of the dtype's grid at |x| (normal range; the data below stays there). */
static double ulp_at(uint8_t dt, double x)
{
	int ex = (int)floor(log2(fabs(x)));
	return ldexp(1.0, ex - (dt == TALLY_DT_F16 ? 10 : 7));
}

/* The RESULT of chunk c to `rank`: its payload (n elements), contrib checked. */
static const uint8_t *result_of(const struct h *h, uint32_t rank, uint32_t round, uint32_t c,
				uint32_t contrib)
{
	const struct cap_pkt *p = h_result(h, rank, KEY, round, c * CE);
	assert_non_null(p);
	assert_int_equal(p->pkt.hdr.count, ch_n(c));
	assert_int_equal(p->pkt.hdr.contrib, contrib);
	return p->pkt.payload;
}

static void test_avg_f16_no_overflow(void **state)
{
	(void)state;
	struct h h;
	uint16_t pl[CE];
	for (uint32_t i = 0; i < CE; i++)
		pl[i] = tally_f32_to_f16(40000.0f);
	for (int avg = 1; avg >= 0; avg--) {
		h_start(&h, NULL);
		struct tally_register r = h_reg(CE, CE, TALLY_DT_F16, 4, 4);
		r.flags = avg ? TALLY_KEY_AVERAGE : 0;
		h_setup(&h, 4, KEY, &r);
		for (uint32_t w = 0; w < 4; w++)
			assert_int_equal(h_push(&h, w, KEY, 0, 0, TALLY_DT_F16, pl, CE), TALLY_OK);
		const uint16_t *out = (const uint16_t *)(const void *)result_of(&h, 2, 0, 0, 4);
		for (uint32_t i = 0; i < CE; i++) {
			float v = tally_f16_to_f32(out[i]);
			if (avg)
				assert_true(v == 40000.0f);
			else /* the plain sum: 160000 does not fit f16 */
				assert_true(isinf(v));
		}
		h_stop(&h);
	}
}

/* 3 workers, random data in +-[0.25, 4) (the f32 sum of three is exact there). */
static void check_three(uint8_t dt)
{
	static uint16_t x[3][NEL];
	struct h h;
	uint64_t s = 0x9e3779b97f4a7c15ull + dt;
	size_t twice_off = 0;

	for (uint32_t w = 0; w < 3; w++)
		for (uint32_t i = 0; i < NEL; i++) {
			double m = 0.25 + (double)(h_rng(&s) % 1000000) / 1000000.0 * 3.75;
			x[w][i] = from_f32(dt, (float)((h_rng(&s) & 1) ? m : -m));
		}
	h_start(&h, NULL);
	struct tally_register r = h_reg(NEL, CE, dt, 3, 3);
	r.flags = TALLY_KEY_AVERAGE;
	h_setup(&h, 3, KEY, &r);
	for (uint32_t c = 0; c < NCH; c++) {
		for (uint32_t w = 0; w < 3; w++) /* arrival 2, 0, 1 */
			assert_int_equal(h_push(&h, (w + 2) % 3, KEY, 0, c * CE, dt,
						x[(w + 2) % 3] + c * CE, ch_n(c)), TALLY_OK);
		const uint8_t *pl = result_of(&h, 0, 0, c, 3);
		for (uint32_t j = 0; j < ch_n(c); j++) {
			uint32_t i = c * CE + j;
			uint16_t got;
			memcpy(&got, pl + 2 * j, 2);
			double mean = (to_f64(dt, x[0][i]) + to_f64(dt, x[1][i]) + to_f64(dt, x[2][i])) / 3.0;
			if (mean == 0.0) {
				assert_true(to_f64(dt, got) == 0.0);
				continue;
			}
			double err = fabs(to_f64(dt, got) - mean) / ulp_at(dt, mean);
			if (err > 0.5 * (1.0 + 1.0 / 1024))
				fail_msg("%s element %u: %.9g vs exact mean %.12g: %.4f ulp",
					 tally_dtype_name(dt), i, to_f64(dt, got), mean, err);
			/* what rounding the sum to the dtype first, then dividing, gives */
			float sum = (float)(to_f64(dt, x[0][i]) + to_f64(dt, x[1][i]) + to_f64(dt, x[2][i]));
			double two = to_f64(dt, from_f32(dt, (float)to_f64(dt, from_f32(dt, sum)) *
							  (1.0f / 3.0f)));
			if (fabs(two - mean) / ulp_at(dt, mean) > 0.5 * (1.0 + 1.0 / 1024))
				twice_off++;
		}
	}
	/* the data can tell the two apart: the old order misses the bound somewhere */
	assert_true(twice_off > 0);
	print_message("%s: %zu of %u elements off by > 0.5 ulp when the sum is rounded first\n",
		      tally_dtype_name(dt), twice_off, NEL);
	h_stop(&h);
}

static void test_avg_three_f16(void **state)
{
	(void)state;
	check_three(TALLY_DT_F16);
}

static void test_avg_three_bf16(void **state)
{
	(void)state;
	check_three(TALLY_DT_BF16);
}

/* Quorum 2 of 3: the average of the two that made it; the late one gets that RESULT. */
static void test_avg_quorum(void **state)
{
	(void)state;
	struct h h;
	uint16_t a[CE], b[CE], late[CE];
	for (uint32_t i = 0; i < CE; i++) {
		a[i] = tally_f32_to_f16(1.0f + (float)i);
		b[i] = tally_f32_to_f16(3.0f + (float)i);
		late[i] = tally_f32_to_f16(1000.0f);
	}
	h_start(&h, NULL);
	struct tally_register r = h_reg(CE, CE, TALLY_DT_F16, 3, 2);
	r.flags = TALLY_KEY_AVERAGE;
	h_setup(&h, 3, KEY, &r);
	assert_int_equal(h_push(&h, 1, KEY, 0, 0, TALLY_DT_F16, a, CE), TALLY_OK);
	assert_int_equal(h_push(&h, 2, KEY, 0, 0, TALLY_DT_F16, b, CE), TALLY_OK);
	const uint16_t *out = (const uint16_t *)(const void *)result_of(&h, 0, 0, 0, 2);
	uint16_t want[CE];
	for (uint32_t i = 0; i < CE; i++)
		want[i] = tally_f32_to_f16(2.0f + (float)i);
	assert_memory_equal(out, want, sizeof(want));
	h_clear(&h);
	assert_int_equal(h_push(&h, 0, KEY, 0, 0, TALLY_DT_F16, late, CE), TALLY_OK);
	const struct cap_pkt *p = h_result(&h, 0, KEY, 0, 0);
	assert_non_null(p);
	assert_false(p->pkt.hdr.flags & TALLY_F_INCLUDED);
	assert_memory_equal(p->pkt.payload, want, sizeof(want));
	h_stop(&h);
}

/* f32: the accumulator is the RESULT; it is scaled once per round (a duplicate's re-sent
 * RESULT and the next rounds of the parity are right), deterministic keys too. */
static void check_f32(int det)
{
	struct h h;
	float x[3][CE], want[CE];
	h_start(&h, NULL);
	struct tally_register r = h_reg(CE, CE, TALLY_DT_F32, 3, 3);
	r.flags = TALLY_KEY_AVERAGE | (det ? TALLY_KEY_DETERMINISTIC : 0);
	h_setup(&h, 3, KEY, &r);
	for (uint32_t rnd = 0; rnd < 4; rnd++) {
		for (uint32_t w = 0; w < 3; w++)
			for (uint32_t i = 0; i < CE; i++)
				x[w][i] = (float)(w + 1) * (float)(i + rnd);
		for (uint32_t i = 0; i < CE; i++)
			want[i] = (x[0][i] + x[1][i] + x[2][i]) * (1.0f / 3.0f);
		h_clear(&h);
		for (uint32_t w = 3; w-- > 0;)
			assert_int_equal(h_push(&h, w, KEY, rnd, 0, TALLY_DT_F32, x[w], CE), TALLY_OK);
		assert_memory_equal(result_of(&h, 1, rnd, 0, 3), want, sizeof(want));
		h_clear(&h);
		assert_int_equal(h_push(&h, 1, KEY, rnd, 0, TALLY_DT_F32, x[1], CE), TALLY_OK);
		assert_true(h_result(&h, 1, KEY, rnd, 0)->pkt.hdr.flags & TALLY_F_RESEND);
		assert_memory_equal(result_of(&h, 1, rnd, 0, 3), want, sizeof(want));
	}
	h_stop(&h);
}

static void test_avg_f32(void **state)
{
	(void)state;
	check_f32(0);
	check_f32(1);
}

/* i32 or one-bit keys cannot average; JOIN_OK offers the capability. */
static void test_avg_refused(void **state)
{
	(void)state;
	struct h h;
	h_start(&h, NULL);
	assert_int_equal(tally_engine_job_add(h.e, H_JOB, H_TOKEN, 2), 0);
	assert_int_equal(h_join(&h, 0, 2), TALLY_OK);
	const struct cap_pkt *ok = &h.cap.q[h.cap.n - 1];
	assert_int_equal(ok->pkt.hdr.op, TALLY_OP_JOIN_OK);
	struct tally_join_ok jo;
	assert_int_equal(tally_proto_get_join_ok(&ok->pkt, &jo), TALLY_OK);
	assert_true(jo.caps & TALLY_CAP_AVERAGE);
	h_clear(&h);
	struct tally_register r = h_reg(CE, CE, TALLY_DT_I32, 2, 2);
	r.flags = TALLY_KEY_AVERAGE;
	H_EXPECT_REJECT(&h, h_register(&h, 0, KEY, &r), TALLY_R_BAD_REGISTER, 1);
	r = h_reg(CE, CE, TALLY_DT_F32, 2, 2);
	r.flags = TALLY_KEY_AVERAGE;
	r.compression = TALLY_COMP_ONEBIT;
	H_EXPECT_REJECT(&h, h_register(&h, 0, KEY, &r), TALLY_R_BAD_REGISTER, 1);
	r.flags = 0x4; /* no such flag */
	r.compression = 0;
	H_EXPECT_REJECT(&h, h_register(&h, 0, KEY, &r), TALLY_R_BAD_REGISTER, 1);
	/* the same key registered once averaged and once not is a conflict */
	r.flags = TALLY_KEY_AVERAGE;
	assert_int_equal(h_register(&h, 0, KEY, &r), TALLY_OK);
	r.flags = 0;
	assert_int_equal(h_register(&h, 0, KEY, &r), TALLY_R_KEY_CONFLICT);
	h_stop(&h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_avg_f16_no_overflow),
		cmocka_unit_test(test_avg_three_f16),
		cmocka_unit_test(test_avg_three_bf16),
		cmocka_unit_test(test_avg_quorum),
		cmocka_unit_test(test_avg_f32),
		cmocka_unit_test(test_avg_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
