/* SPDX-License-Identifier: Apache-2.0
 * worker_data.c — seeded gradients and their reference sums (see worker_data.h).
 */
#include "worker_data.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static inline uint64_t wd_mix(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t wd_base(const struct wd_gen *g, uint32_t rank, uint32_t key, uint32_t round)
{
	uint64_t b = wd_mix(g->seed);

	b = wd_mix(b ^ ((uint64_t)rank << 32 | key));
	return wd_mix(b ^ round);
}

/* One element as f32 (before the wire conversion). */
static inline float wd_value(const struct wd_gen *g, uint64_t base, size_t i)
{
	uint64_t h = wd_mix(base + i * 0x9e3779b97f4a7c15ull);
	int32_t m;

	if (g->values == WD_EXACT) {
		/* 8 significant bits on a 1/16 grid: exact in bf16/f16/f32, and any sum of up to
		 * 2^15 of them is exact in f32, whatever the order. */
		m = (int32_t)(h >> 56) - 128;
		return (float)m / 16.0f;
	}
	/* 24-bit mantissa in [-1, 1) scaled by 2^-4..2^3: full-precision f32, sums round.
	 * (Powers of two from a table: exact, and much cheaper than ldexpf per element.) */
	static const float scale[8] = { 0x1p-27f, 0x1p-26f, 0x1p-25f, 0x1p-24f,
					0x1p-23f, 0x1p-22f, 0x1p-21f, 0x1p-20f };
	m = (int32_t)(h >> 40) - (1 << 23);
	return (float)m * scale[h & 7];
}

void wd_fill(const struct wd_gen *g, uint32_t rank, uint32_t key, uint32_t round, size_t first,
	     size_t n, void *out)
{
	uint64_t base = wd_base(g, rank, key, round);

	switch (g->dtype) {
	case TALLY_DT_F32: {
		float *o = out;

		for (size_t i = 0; i < n; i++)
			o[i] = wd_value(g, base, first + i);
		break;
	}
	case TALLY_DT_F16: {
		uint16_t *o = out;

		for (size_t i = 0; i < n; i++) {
			float v = wd_value(g, base, first + i);

			/* f16 tops out at 65504 and loses bits below 2^-14: scale into range. */
			o[i] = tally_f32_to_f16(g->values == WD_EXACT ? v : v / 4.0f);
		}
		break;
	}
	case TALLY_DT_BF16: {
		uint16_t *o = out;

		for (size_t i = 0; i < n; i++)
			o[i] = tally_f32_to_bf16(wd_value(g, base, first + i));
		break;
	}
	case TALLY_DT_I32: {
		int32_t *o = out;

		for (size_t i = 0; i < n; i++)
			o[i] = (int32_t)(uint32_t)wd_mix(base + (first + i) * 0x9e3779b97f4a7c15ull);
		break;
	}
	default:
		memset(out, 0, n * tally_dtype_size(g->dtype));
	}
}

static double wd_got(enum tally_dtype dt, const void *got, size_t i)
{
	switch (dt) {
	case TALLY_DT_F32:
		return ((const float *)got)[i];
	case TALLY_DT_F16:
		return tally_f16_to_f32(((const uint16_t *)got)[i]);
	case TALLY_DT_BF16:
		return tally_bf16_to_f32(((const uint16_t *)got)[i]);
	default:
		return ((const int32_t *)got)[i];
	}
}

static double wd_as_f32(enum tally_dtype dt, const void *buf)
{
	return wd_got(dt, buf, 0);
}

/* Half an ulp of the wire dtype at |v| (0 for f32: the bound covers it). */
static double wd_half_ulp(enum tally_dtype dt, double v)
{
	int e;

	if (dt == TALLY_DT_F32 || v == 0)
		return 0;
	frexp(fabs(v), &e);
	if (dt == TALLY_DT_BF16)
		return ldexp(1.0, e - 1 - 8);
	if (e < -13)
		e = -13; /* f16 subnormals: fixed spacing 2^-24 */
	return ldexp(1.0, e - 1 - 11);
}

#define WD_BLOCK 1024

void wd_verify(const struct wd_gen *g, uint32_t world, uint32_t key, uint32_t round,
	       size_t first, size_t n, const void *got, int bit_exact, struct wd_check *chk)
{
	size_t es = tally_dtype_size(g->dtype);
	uint8_t tmp[WD_BLOCK * 4];
	float acc32[WD_BLOCK];
	double accd[WD_BLOCK], absd[WD_BLOCK];
	int32_t acci[WD_BLOCK];

	for (size_t b = 0; b < n; b += WD_BLOCK) {
		size_t bn = n - b < WD_BLOCK ? n - b : WD_BLOCK;

		for (uint32_t r = 0; r < world; r++) {
			wd_fill(g, r, key, round, first + b, bn, tmp);
			for (size_t i = 0; i < bn; i++) {
				if (g->dtype == TALLY_DT_I32) {
					int32_t v;

					memcpy(&v, tmp + i * 4, 4);
					acci[i] = r ? (int32_t)((uint32_t)acci[i] + (uint32_t)v) : v;
					continue;
				}
				double v = wd_as_f32(g->dtype, tmp + i * es);

				/* rank-order f32 sum: what a deterministic engine computes */
				acc32[i] = r ? acc32[i] + (float)v : (float)v;
				accd[i] = r ? accd[i] + v : v;
				absd[i] = r ? absd[i] + fabs(v) : fabs(v);
			}
		}
		for (size_t i = 0; i < bn; i++) {
			const uint8_t *gp = (const uint8_t *)got + (b + i) * es;
			int bad;
			double err = 0, bound = 0, gv = 0;

			if (g->dtype == TALLY_DT_I32) {
				int32_t v;

				memcpy(&v, gp, 4);
				bad = v != acci[i];
				gv = v;
				accd[i] = acci[i];
			} else if (bit_exact) {
				uint8_t want[4];

				if (g->dtype == TALLY_DT_F32)
					memcpy(want, &acc32[i], 4);
				else {
					uint16_t h = g->dtype == TALLY_DT_BF16 ?
						tally_f32_to_bf16(acc32[i]) : tally_f32_to_f16(acc32[i]);
					memcpy(want, &h, 2);
				}
				bad = memcmp(gp, want, es) != 0;
				gv = wd_got(g->dtype, gp, 0);
				err = fabs(gv - accd[i]);
			} else {
				double e32 = (double)(world - 1) * ldexp(1.0, -24) * absd[i];

				gv = wd_got(g->dtype, gp, 0);
				bound = e32 + wd_half_ulp(g->dtype, fabs(accd[i]) + e32) + 1e-30;
				err = fabs(gv - accd[i]);
				bad = !(err <= bound); /* NaN fails too */
				if (err / bound > chk->max_err_ratio)
					chk->max_err_ratio = err / bound;
			}
			if (err > chk->max_err)
				chk->max_err = err;
			chk->checked++;
			if (bad) {
				if (!chk->mismatches)
					snprintf(chk->first, sizeof(chk->first),
						 "key %u round %u element %zu: got %.9g, expected %.9g%s (bound %.3g)",
						 key, round, first + b + i, gv, accd[i],
						 bit_exact ? " bit-exact" : "", bound);
				chk->mismatches++;
			}
		}
	}
}
