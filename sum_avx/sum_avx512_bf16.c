/* SPDX-License-Identifier: Apache-2.0
 * sum_avx512_bf16.c — f32 → bf16 output with AVX512-BF16's VCVTNE2PS2BF16 (32 values per
 * instruction, round to nearest even, NaN quieted exactly as the scalar path does). Built
 * as its own static library with -mavx512bf16 -mavx512dq on top of the AVX-512 flags; used
 * only when CPUID has AVX512_BF16 and AVX512DQ.
 *
 * The instruction treats subnormal inputs as zero; the scalar reference rounds them (bf16
 * has f32's exponent range, so a normal input never gives a subnormal result). A vector
 * with a subnormal input (rare: VFPCLASSPS finds them) takes the integer rounding instead.
 */
#include <immintrin.h>

#include "sum_impl.h"

/* Bit-exact integer rounding of 16 values (the fallback for vectors with subnormals). */
static inline __m512i bf_rne_int(__m512 v)
{
	const __m512i x = _mm512_castps_si512(v);
	const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
	__m512i r = _mm512_add_epi32(x, _mm512_add_epi32(_mm512_set1_epi32(0x7fff),
		_mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1))));

	r = _mm512_mask_or_epi32(r, nan, x, _mm512_set1_epi32(0x00400000));
	return _mm512_srli_epi32(r, 16);
}

void sum_a5bf16_f32_to_bf16(uint16_t *dst, const float *src, size_t n, float scale)
{
	const __m512 s = _mm512_set1_ps(scale);
	/* packus works per 128-bit lane: put the qwords back in order */
	const __m512i fix = _mm512_set_epi64(7, 5, 3, 1, 6, 4, 2, 0);
	size_t i = 0;

	for (; i + 32 <= n; i += 32) {
		__m512 a = sum_mul_ps512(_mm512_loadu_ps(src + i), s);
		__m512 b = sum_mul_ps512(_mm512_loadu_ps(src + i + 16), s);

		if (__builtin_expect(_mm512_fpclass_ps_mask(a, 0x20) | _mm512_fpclass_ps_mask(b, 0x20), 0))
			_mm512_storeu_si512(dst + i, _mm512_permutexvar_epi64(fix,
				_mm512_packus_epi32(bf_rne_int(a), bf_rne_int(b))));
		else
			_mm512_storeu_si512(dst + i, (__m512i)_mm512_cvtne2ps_pbh(b, a));
	}
	for (; i < n; i += 16) {
		__mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1u);
		__m512 a = sum_mul_ps512(_mm512_maskz_loadu_ps(m, src + i), s);
		__m256i h;

		if (_mm512_fpclass_ps_mask(a, 0x20))
			h = _mm512_cvtepi32_epi16(bf_rne_int(a));
		else
			h = (__m256i)_mm512_cvtneps_pbh(a);
		_mm256_mask_storeu_epi16(dst + i, m, h);
	}
}
