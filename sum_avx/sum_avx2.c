/* SPDX-License-Identifier: Apache-2.0
 * sum_avx2.c — AVX2 + F16C path. Built as its own static library with -mavx2 -mf16c
 * -ffp-contract=off (no -mfma), only called after the dispatcher checked CPUID.
 *
 * Same structure as sum_avx512.c with 8-lane vectors; tails (< 8 elements) run the scalar
 * reference code, which uses the same single-rounding adds, so results are bit-identical.
 */
#include <immintrin.h>

#include "sum_onebit.h"

#define A2_INLINE static inline __attribute__((always_inline))
/* streaming stores for big fresh destinations, no software prefetch: see sum_avx512.c */
#define A2_NT_BYTES (8u << 20)

enum a2_kind { A2_F32, A2_F16, A2_BF16, A2_I32 };

static inline size_t a2_esz(enum a2_kind k)
{
	return (k == A2_F16 || k == A2_BF16) ? 2 : 4;
}

A2_INLINE __m256 a2_ld(enum a2_kind k, const void *p, size_t i)
{
	switch (k) {
	case A2_F16:
		return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
	case A2_BF16:
		return _mm256_castsi256_ps(_mm256_slli_epi32(
			_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i))), 16));
	default:
		return _mm256_loadu_ps((const float *)p + i);
	}
}

A2_INLINE __m256 a2_add(enum a2_kind k, __m256 a, __m256 b)
{
	if (k == A2_I32)
		return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(a), _mm256_castps_si256(b)));
	return sum_add_ps256(a, b); /* a first: the NaN rule */
}

/* One element the scalar way (tails). */
A2_INLINE float a2_ld1(enum a2_kind k, const void *p, size_t i)
{
	switch (k) {
	case A2_F16: return sum_f16_to_f32(((const uint16_t *)p)[i]);
	case A2_BF16: return sum_bf16_to_f32(((const uint16_t *)p)[i]);
	default: return ((const float *)p)[i];
	}
}

A2_INLINE float a2_add1(enum a2_kind k, float a, float b)
{
	if (k == A2_I32)
		return sum_bits_f32(sum_f32_bits(a) + sum_f32_bits(b));
	return sum_add_f32(a, b);
}

A2_INLINE void a2_acc(enum a2_kind k, float *dst, const void *src, size_t n)
{
	const enum a2_kind ak = k == A2_I32 ? A2_I32 : A2_F32;
	size_t i = 0;

	/* running pointers with constant offsets (the index form costs a lea per access) */
	for (float *dp = dst; i + 32 <= n; i += 32, dp += 32) {
		const void *sp = (const char *)src + i * a2_esz(k);
		__m256 d0 = a2_ld(A2_F32, dp, 0), d1 = a2_ld(A2_F32, dp, 8);
		__m256 d2 = a2_ld(A2_F32, dp, 16), d3 = a2_ld(A2_F32, dp, 24);

		d0 = a2_add(ak, d0, a2_ld(k, sp, 0));
		d1 = a2_add(ak, d1, a2_ld(k, sp, 8));
		d2 = a2_add(ak, d2, a2_ld(k, sp, 16));
		d3 = a2_add(ak, d3, a2_ld(k, sp, 24));
		_mm256_storeu_ps(dp, d0);
		_mm256_storeu_ps(dp + 8, d1);
		_mm256_storeu_ps(dp + 16, d2);
		_mm256_storeu_ps(dp + 24, d3);
	}
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(dst + i, a2_add(ak, a2_ld(A2_F32, dst, i), a2_ld(k, src, i)));
	for (; i < n; i++)
		dst[i] = a2_add1(ak, dst[i], a2_ld1(k, src, i));
}

#define A2_KV 8
A2_INLINE void a2_kway_body(enum a2_kind k, float *dst, const void *const *src, unsigned kk,
			    size_t n, int nt)
{
	const enum a2_kind ak = k == A2_I32 ? A2_I32 : A2_F32;
	const char *sp[TALLY_SUM_MAX_WAYS]; /* in registers: vector stores may alias src[] */
	size_t i = 0;

	sp[0] = src[0]; /* k >= 1 (checked by the dispatcher) */
	for (unsigned w = 1; w < kk; w++)
		sp[w] = src[w];
	src = (const void *const *)sp;
	/* streaming stores need 32-byte alignment: peel scalar elements until dst is aligned */
	if (nt)
		for (; i < n && ((uintptr_t)(dst + i) & 31); i++) {
			float a = a2_ld1(k, src[0], i);

			for (unsigned w = 1; w < kk; w++)
				a = a2_add1(ak, a, a2_ld1(k, src[w], i));
			dst[i] = a;
		}
	for (; i + 8 * A2_KV <= n; i += 8 * A2_KV) {
		__m256 a[A2_KV];

#pragma GCC unroll 8
		for (int j = 0; j < A2_KV; j++)
			a[j] = a2_ld(k, src[0], i + 8 * j);
		for (unsigned w = 1; w < kk; w++) {
			const void *p = src[w];

#pragma GCC unroll 8
			for (int j = 0; j < A2_KV; j++)
				a[j] = a2_add(ak, a[j], a2_ld(k, p, i + 8 * j));
		}
#pragma GCC unroll 8
		for (int j = 0; j < A2_KV; j++) {
			if (nt)
				_mm256_stream_ps(dst + i + 8 * j, a[j]);
			else
				_mm256_storeu_ps(dst + i + 8 * j, a[j]);
		}
	}
	for (; i + 8 <= n; i += 8) {
		__m256 a = a2_ld(k, src[0], i);

		for (unsigned w = 1; w < kk; w++)
			a = a2_add(ak, a, a2_ld(k, src[w], i));
		_mm256_storeu_ps(dst + i, a);
	}
	for (; i < n; i++) {
		float a = a2_ld1(k, src[0], i);

		for (unsigned w = 1; w < kk; w++)
			a = a2_add1(ak, a, a2_ld1(k, src[w], i));
		dst[i] = a;
	}
	if (nt)
		_mm_sfence();
}

/* copies with the source loop unrolled for the common small k */
A2_INLINE void a2_kway_nt(enum a2_kind k, float *dst, const void *const *src, unsigned kk,
			  size_t n, int nt)
{
	switch (kk) {
	case 1: a2_kway_body(k, dst, src, 1, n, nt); break;
	case 2: a2_kway_body(k, dst, src, 2, n, nt); break;
	case 4: a2_kway_body(k, dst, src, 4, n, nt); break;
	default: a2_kway_body(k, dst, src, kk, n, nt); break;
	}
}

A2_INLINE void a2_kway(enum a2_kind k, float *dst, const void *const *src, unsigned kk, size_t n)
{
	if (n * 4 >= A2_NT_BYTES && !((uintptr_t)dst & 3))
		a2_kway_nt(k, dst, src, kk, n, 1);
	else
		a2_kway_nt(k, dst, src, kk, n, 0);
}

/* f32 → bf16, round to nearest even on the bits; NaN kept quiet. 8 results in 128 bits. */
A2_INLINE __m128i a2_bf16_rne(__m256 v)
{
	const __m256i x = _mm256_castps_si256(v);
	const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
	__m256i r = _mm256_add_epi32(x, _mm256_add_epi32(_mm256_set1_epi32(0x7fff),
		_mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1))));
	__m256i q = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));

	r = _mm256_blendv_epi8(_mm256_srli_epi32(r, 16), q, nan);
	/* values are <= 0xffff, so the unsigned-saturating pack is exact */
	return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

A2_INLINE void a2_to_half(int bf, uint16_t *dst, const float *src, size_t n, float scale)
{
	const __m256 s = _mm256_set1_ps(scale);
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256 v = sum_mul_ps256(_mm256_loadu_ps(src + i), s);
		__m128i h = bf ? a2_bf16_rne(v) : _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);

		_mm_storeu_si128((__m128i *)(dst + i), h);
	}
	for (; i < n; i++)
		{
		float v = sum_mul_f32(src[i], scale);

		dst[i] = bf ? sum_f32_to_bf16(v) : sum_f32_to_f16(v);
	}
}

static void a2_f32_to_f16(uint16_t *dst, const float *src, size_t n, float scale)
{
	a2_to_half(0, dst, src, n, scale);
}

static void a2_f32_to_bf16(uint16_t *dst, const float *src, size_t n, float scale)
{
	a2_to_half(1, dst, src, n, scale);
}

static void a2_f32_scale(float *dst, const float *src, size_t n, float scale)
{
	const __m256 s = _mm256_set1_ps(scale);
	size_t i = 0;

	for (; i + 32 <= n; i += 32) {
		__m256 v0 = sum_mul_ps256(_mm256_loadu_ps(src + i), s);
		__m256 v1 = sum_mul_ps256(_mm256_loadu_ps(src + i + 8), s);
		__m256 v2 = sum_mul_ps256(_mm256_loadu_ps(src + i + 16), s);
		__m256 v3 = sum_mul_ps256(_mm256_loadu_ps(src + i + 24), s);

		_mm256_storeu_ps(dst + i, v0);
		_mm256_storeu_ps(dst + i + 8, v1);
		_mm256_storeu_ps(dst + i + 16, v2);
		_mm256_storeu_ps(dst + i + 24, v3);
	}
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(dst + i, sum_mul_ps256(_mm256_loadu_ps(src + i), s));
	for (; i < n; i++)
		dst[i] = sum_mul_f32(src[i], scale);
}

static void a2_f32_acc(float *dst, const float *src, size_t n)
{
	a2_acc(A2_F32, dst, src, n);
}

static void a2_i32_acc(int32_t *dst, const int32_t *src, size_t n)
{
	a2_acc(A2_I32, (float *)dst, src, n);
}

static void a2_f16_acc(float *dst, const uint16_t *src, size_t n)
{
	a2_acc(A2_F16, dst, src, n);
}

static void a2_bf16_acc(float *dst, const uint16_t *src, size_t n)
{
	a2_acc(A2_BF16, dst, src, n);
}

static void a2_f32_add(float *dst, const float *a, const float *b, size_t n)
{
	const void *s[2] = { a, b };

	a2_kway(A2_F32, dst, s, 2, n);
}

static void a2_i32_add(int32_t *dst, const int32_t *a, const int32_t *b, size_t n)
{
	const void *s[2] = { a, b };

	a2_kway(A2_I32, (float *)dst, s, 2, n);
}

static void a2_f16_to_f32(float *dst, const uint16_t *src, size_t n)
{
	const void *s[1] = { src };

	a2_kway(A2_F16, dst, s, 1, n);
}

static void a2_bf16_to_f32(float *dst, const uint16_t *src, size_t n)
{
	const void *s[1] = { src };

	a2_kway(A2_BF16, dst, s, 1, n);
}

static void a2_f32_kway(float *dst, const float *const *src, unsigned k, size_t n)
{
	a2_kway(A2_F32, dst, (const void *const *)src, k, n);
}

static void a2_i32_kway(int32_t *dst, const int32_t *const *src, unsigned k, size_t n)
{
	a2_kway(A2_I32, (float *)dst, (const void *const *)src, k, n);
}

static void a2_f16_kway(float *dst, const uint16_t *const *src, unsigned k, size_t n)
{
	a2_kway(A2_F16, dst, (const void *const *)src, k, n);
}

static void a2_bf16_kway(float *dst, const uint16_t *const *src, unsigned k, size_t n)
{
	a2_kway(A2_BF16, dst, (const void *const *)src, k, n);
}

const struct sum_ops sum_ops_avx2 = {
	.f32_acc = a2_f32_acc,
	.f32_add = a2_f32_add,
	.i32_acc = a2_i32_acc,
	.i32_add = a2_i32_add,
	.f16_acc = a2_f16_acc,
	.bf16_acc = a2_bf16_acc,
	.f16_to_f32 = a2_f16_to_f32,
	.bf16_to_f32 = a2_bf16_to_f32,
	.f32_to_f16 = a2_f32_to_f16,
	.f32_to_bf16 = a2_f32_to_bf16,
	.f32_scale = a2_f32_scale,
	.f32_kway = a2_f32_kway,
	.i32_kway = a2_i32_kway,
	.f16_kway = a2_f16_kway,
	.bf16_kway = a2_bf16_kway,
	.onebit = &sum_onebit_avx2,
};
