/* SPDX-License-Identifier: Apache-2.0
 * sum_avx512.c — AVX-512 F/BW/VL path. Built as its own static library with
 * -mavx512f -mavx512bw -mavx512vl -mf16c -ffp-contract=off (never the global flags), and only
 * ever called after the dispatcher checked CPUID.
 *
 * One generic kernel per operation, specialised at compile time by the source kind (always
 * inlined with a constant kind): f32/i32 sources load as they are, f16 widens with VCVTPH2PS
 * (exact), bf16 widens by a 16-bit shift (exact). Adds are one VADDPS/VPADDD per lane in the
 * scalar path's order, so results are bit-identical to sum_scalar.c. Heads are peeled with a
 * masked op so the destination is 64-byte aligned in the main loop; tails are masked.
 */
#include <immintrin.h>

#include "sum_onebit.h"

#define A5_INLINE static inline __attribute__((always_inline))

/* Destinations at least this big are written with streaming stores when the operation does
 * not read them (k-way, conversions into a fresh buffer): they would only evict the sources,
 * and skipping the read-for-ownership saves a sixth of a 4-way sum's traffic. Measured here
 * (f32 4-way, 256 MiB, CPU-time medians of 25, 3 runs; traffic / memcpy traffic): streaming
 * 1.14 1.04 1.23, plain stores 1.01 1.02 0.79 (RFO not counted), streaming + software
 * prefetch 1 KiB ahead 0.72 0.81 1.07: the hardware prefetchers do better alone, so no
 * prefetch. Below ~8 MiB the difference drowns in the noise of this shared machine. */
#ifndef A5_NT_BYTES
#define A5_NT_BYTES (8u << 20)
#endif

enum a5_kind { A5_F32, A5_F16, A5_BF16, A5_I32 };

static inline size_t a5_esz(enum a5_kind k)
{
	return (k == A5_F16 || k == A5_BF16) ? 2 : 4;
}

static inline __mmask16 a5_mask(size_t r)
{
	return (__mmask16)((1u << r) - 1u);
}

/* 16 elements of kind k at element index i, widened to f32 (i32 kept as bits). */
A5_INLINE __m512 a5_ld(enum a5_kind k, const void *p, size_t i)
{
	switch (k) {
	case A5_F16:
		return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i)));
	case A5_BF16:
		return _mm512_castsi512_ps(_mm512_slli_epi32(
			_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i))),
			16));
	default:
		return _mm512_loadu_ps((const float *)p + i);
	}
}

/* Masked variant: lanes outside m read nothing (no fault past the end) and are zero. */
A5_INLINE __m512 a5_ldm(enum a5_kind k, const void *p, size_t i, __mmask16 m)
{
	switch (k) {
	case A5_F16:
		return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)p + i));
	case A5_BF16:
		return _mm512_castsi512_ps(_mm512_slli_epi32(
			_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, (const uint16_t *)p + i)), 16));
	default:
		return _mm512_maskz_loadu_ps(m, (const float *)p + i);
	}
}

A5_INLINE __m512 a5_add(enum a5_kind k, __m512 a, __m512 b)
{
	if (k == A5_I32)
		return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(a), _mm512_castps_si512(b)));
	return sum_add_ps512(a, b); /* a first: the NaN rule */
}

A5_INLINE void a5_st(float *p, __m512 v, int nt)
{
	if (nt)
		_mm512_stream_ps(p, v);
	else
		_mm512_storeu_ps(p, v);
}

/* Elements before dst is 64-byte aligned (0 when dst is not even 4-byte aligned). */
static inline size_t a5_head(const void *dst, size_t n)
{
	size_t h = ((uintptr_t)dst & 3) ? 0 : ((-(uintptr_t)dst) & 63) / 4;

	return h < n ? h : n;
}

/* ---- dst += src (dst f32 or i32), 8 vectors per step (measured a little faster than 2 or 4;
 * software prefetch measured slower: the hardware prefetchers keep up with two streams) ---- */
#define A5_AV 8
/* The elements before dst is 64-byte aligned, with one masked op; returns how many. */
A5_INLINE size_t a5_acc_head(enum a5_kind k, float *dst, const void *src, size_t n)
{
	const enum a5_kind ak = k == A5_I32 ? A5_I32 : A5_F32;
	size_t h = a5_head(dst, n);

	if (h) {
		__mmask16 m = a5_mask(h);

		_mm512_mask_storeu_ps(dst, m, a5_add(ak, a5_ldm(A5_F32, dst, 0, m), a5_ldm(k, src, 0, m)));
	}
	return h;
}

A5_INLINE void a5_acc(enum a5_kind k, float *dst, const void *src, size_t n)
{
	const enum a5_kind ak = k == A5_I32 ? A5_I32 : A5_F32;
	size_t i = a5_acc_head(k, dst, src, n);

	/* running pointers, constant offsets: the index form compiled to a lea per access and
	 * measured ~1/3 slower for f16 */
	for (float *dp = dst + i; i + 16 * A5_AV <= n; i += 16 * A5_AV, dp += 16 * A5_AV) {
		const void *sp = (const char *)src + i * a5_esz(k);
		__m512 d[A5_AV];

#pragma GCC unroll 8
		for (int j = 0; j < A5_AV; j++)
			d[j] = a5_add(ak, a5_ld(A5_F32, dp, 16 * j), a5_ld(k, sp, 16 * j));
#pragma GCC unroll 8
		for (int j = 0; j < A5_AV; j++)
			_mm512_storeu_ps(dp + 16 * j, d[j]);
	}
	for (; i + 16 <= n; i += 16)
		_mm512_storeu_ps(dst + i, a5_add(ak, a5_ld(A5_F32, dst, i), a5_ld(k, src, i)));
	if (i < n) {
		__mmask16 m = a5_mask(n - i);

		_mm512_mask_storeu_ps(dst + i, m, a5_add(ak, a5_ldm(A5_F32, dst, i, m), a5_ldm(k, src, i, m)));
	}
}

/* ---- dst += src on 256-bit vectors: the automatic selection's kernel for accumulators
 * past sum_a5_ymm_acc_bytes (sum_impl.h has the measurements). Same adds in the same order as
 * a5_acc, so the same bits; head as a5_acc, tail masked 8 lanes at a time. ---- */
A5_INLINE __m256 a5y_ldm(enum a5_kind k, const void *p, size_t i, __mmask8 m)
{
	switch (k) {
	case A5_F16:
		return _mm256_cvtph_ps(_mm_maskz_loadu_epi16(m, (const uint16_t *)p + i));
	case A5_BF16:
		return _mm256_castsi256_ps(_mm256_slli_epi32(
			_mm256_cvtepu16_epi32(_mm_maskz_loadu_epi16(m, (const uint16_t *)p + i)), 16));
	default:
		return _mm256_maskz_loadu_ps(m, (const float *)p + i);
	}
}

A5_INLINE __m256 a5y_ld(enum a5_kind k, const void *p, size_t i)
{
	switch (k) {
	case A5_F16:
		return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
	case A5_BF16:
		return _mm256_castsi256_ps(_mm256_slli_epi32(
			_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i))), 16));
	default:
		return _mm256_loadu_ps((const float *)p + i);
	}
}

A5_INLINE __m256 a5y_add(enum a5_kind k, __m256 a, __m256 b)
{
	if (k == A5_I32)
		return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(a), _mm256_castps_si256(b)));
	return sum_add_ps256(a, b); /* a first: the NaN rule */
}

#define A5_YV 4 /* 4 x 32 bytes a step: two cache lines of dst, as the AVX2 path */
A5_INLINE void a5y_acc(enum a5_kind k, float *dst, const void *src, size_t n)
{
	const enum a5_kind ak = k == A5_I32 ? A5_I32 : A5_F32;
	size_t i = a5_acc_head(k, dst, src, n);

	for (float *dp = dst + i; i + 8 * A5_YV <= n; i += 8 * A5_YV, dp += 8 * A5_YV) {
		const void *sp = (const char *)src + i * a5_esz(k);
		__m256 d[A5_YV];

#pragma GCC unroll 4
		for (int j = 0; j < A5_YV; j++)
			d[j] = a5y_add(ak, a5y_ld(A5_F32, dp, 8 * j), a5y_ld(k, sp, 8 * j));
#pragma GCC unroll 4
		for (int j = 0; j < A5_YV; j++)
			_mm256_storeu_ps(dp + 8 * j, d[j]);
	}
	for (; i < n; i += 8) {
		__mmask8 m = n - i >= 8 ? (__mmask8)0xff : (__mmask8)((1u << (n - i)) - 1u);

		_mm256_mask_storeu_ps(dst + i, m, a5y_add(ak, a5y_ldm(A5_F32, dst, i, m), a5y_ldm(k, src, i, m)));
	}
}

/* ---- k-way into a fresh dst: 8 vectors of every source per step, summed left to right in
 * registers, dst written once. k == 2 with a == src[0], b == src[1] is dst = a + b. ---- */
#define A5_KV 8
A5_INLINE void a5_kway_body(enum a5_kind k, float *dst, const void *const *src, unsigned kk,
			    size_t n, int nt)
{
	const enum a5_kind ak = k == A5_I32 ? A5_I32 : A5_F32;
	const size_t es = a5_esz(k);
	/* a local copy of the source pointers: the vector stores may alias anything, so reading
	 * src[] would reload every pointer every step; these stay in registers */
	const char *sp[TALLY_SUM_MAX_WAYS];
	size_t i = a5_head(dst, n);

	sp[0] = src[0]; /* k >= 1 (checked by the dispatcher) */
	for (unsigned w = 1; w < kk; w++)
		sp[w] = src[w];
	if (i) {
		__mmask16 m = a5_mask(i);
		__m512 a = a5_ldm(k, sp[0], 0, m);

		for (unsigned w = 1; w < kk; w++)
			a = a5_add(ak, a, a5_ldm(k, sp[w], 0, m));
		_mm512_mask_storeu_ps(dst, m, a);
	}
	for (float *dp = dst + i; i + 16 * A5_KV <= n; i += 16 * A5_KV, dp += 16 * A5_KV) {
		const size_t off = i * es;
		__m512 a[A5_KV];

#pragma GCC unroll 8
		for (int j = 0; j < A5_KV; j++)
			a[j] = a5_ld(k, sp[0] + off, 16 * j);
		for (unsigned w = 1; w < kk; w++) {
#pragma GCC unroll 8
			for (int j = 0; j < A5_KV; j++)
				a[j] = a5_add(ak, a[j], a5_ld(k, sp[w] + off, 16 * j));
		}
#pragma GCC unroll 8
		for (int j = 0; j < A5_KV; j++)
			a5_st(dp + 16 * j, a[j], nt);
	}
	for (; i < n; i += 16) {
		__mmask16 m = n - i >= 16 ? (__mmask16)0xffff : a5_mask(n - i);
		__m512 a = a5_ldm(k, sp[0], i, m);

		for (unsigned w = 1; w < kk; w++)
			a = a5_add(ak, a, a5_ldm(k, sp[w], i, m));
		_mm512_mask_storeu_ps(dst + i, m, a);
	}
	if (nt)
		_mm_sfence(); /* streaming stores visible before anyone reads dst */
}

/* Small k (the common 2..4-way sums, and k = 1 conversions) get their own copies with the
 * source loop fully unrolled. */
A5_INLINE void a5_kway_nt(enum a5_kind k, float *dst, const void *const *src, unsigned kk,
			  size_t n, int nt)
{
	switch (kk) {
	case 1: a5_kway_body(k, dst, src, 1, n, nt); break;
	case 2: a5_kway_body(k, dst, src, 2, n, nt); break;
	case 3: a5_kway_body(k, dst, src, 3, n, nt); break;
	case 4: a5_kway_body(k, dst, src, 4, n, nt); break;
	default: a5_kway_body(k, dst, src, kk, n, nt); break;
	}
}

A5_INLINE void a5_kway(enum a5_kind k, float *dst, const void *const *src, unsigned kk, size_t n)
{
	/* streaming only where the main loop's stores are 64-byte aligned */
	if (n * 4 >= A5_NT_BYTES && !((uintptr_t)dst & 3))
		a5_kway_nt(k, dst, src, kk, n, 1);
	else
		a5_kway_nt(k, dst, src, kk, n, 0);
}

/* ---- f32 → f16 / bf16 / f32 with a scale ---- */
A5_INLINE __m256i a5_bf16_rne(__m512 v)
{
	const __m512i x = _mm512_castps_si512(v);
	const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
	__m512i r = _mm512_add_epi32(x, _mm512_add_epi32(_mm512_set1_epi32(0x7fff),
		_mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1))));

	r = _mm512_srli_epi32(r, 16);
	r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x40));
	return _mm512_cvtepi32_epi16(r);
}

A5_INLINE __m256i a5_cvt_out(int bf, __m512 v)
{
	return bf ? a5_bf16_rne(v) : _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

A5_INLINE void a5_to_half(int bf, uint16_t *dst, const float *src, size_t n, float scale)
{
	const __m512 s = _mm512_set1_ps(scale);
	size_t i = 0;

	for (; i + 32 <= n; i += 32) {
		__m256i h0 = a5_cvt_out(bf, sum_mul_ps512(_mm512_loadu_ps(src + i), s));
		__m256i h1 = a5_cvt_out(bf, sum_mul_ps512(_mm512_loadu_ps(src + i + 16), s));

		_mm256_storeu_si256((__m256i *)(dst + i), h0);
		_mm256_storeu_si256((__m256i *)(dst + i + 16), h1);
	}
	for (; i < n; i += 16) {
		__mmask16 m = n - i >= 16 ? (__mmask16)0xffff : a5_mask(n - i);

		_mm256_mask_storeu_epi16(dst + i, m,
			a5_cvt_out(bf, sum_mul_ps512(_mm512_maskz_loadu_ps(m, src + i), s)));
	}
}

static void a5_f32_to_f16(uint16_t *dst, const float *src, size_t n, float scale)
{
	a5_to_half(0, dst, src, n, scale);
}

static void a5_f32_to_bf16(uint16_t *dst, const float *src, size_t n, float scale)
{
	a5_to_half(1, dst, src, n, scale);
}

static void a5_f32_scale(float *dst, const float *src, size_t n, float scale)
{
	const __m512 s = _mm512_set1_ps(scale);
	size_t i = 0;

	for (; i + 64 <= n; i += 64) {
		__m512 v0 = sum_mul_ps512(_mm512_loadu_ps(src + i), s);
		__m512 v1 = sum_mul_ps512(_mm512_loadu_ps(src + i + 16), s);
		__m512 v2 = sum_mul_ps512(_mm512_loadu_ps(src + i + 32), s);
		__m512 v3 = sum_mul_ps512(_mm512_loadu_ps(src + i + 48), s);

		_mm512_storeu_ps(dst + i, v0);
		_mm512_storeu_ps(dst + i + 16, v1);
		_mm512_storeu_ps(dst + i + 32, v2);
		_mm512_storeu_ps(dst + i + 48, v3);
	}
	for (; i < n; i += 16) {
		__mmask16 m = n - i >= 16 ? (__mmask16)0xffff : a5_mask(n - i);

		_mm512_mask_storeu_ps(dst + i, m, sum_mul_ps512(_mm512_maskz_loadu_ps(m, src + i), s));
	}
}

/* ---- the table ---- */
static void a5_f32_acc(float *dst, const float *src, size_t n)
{
	a5_acc(A5_F32, dst, src, n);
}

static void a5_i32_acc(int32_t *dst, const int32_t *src, size_t n)
{
	a5_acc(A5_I32, (float *)dst, src, n);
}

static void a5_f16_acc(float *dst, const uint16_t *src, size_t n)
{
	a5_acc(A5_F16, dst, src, n);
}

static void a5_bf16_acc(float *dst, const uint16_t *src, size_t n)
{
	a5_acc(A5_BF16, dst, src, n);
}

/* The automatic selection's += (sum_ops_avx512_auto): 512-bit vectors in cache, 256-bit
 * past sum_a5_ymm_acc_bytes of accumulator. Same bits either way. */
size_t sum_a5_ymm_acc_bytes = SUM_A5_YMM_ACC_BYTES;

#define A5_AUTO_ACC(name, kind, T, S)                                                       \
	static void name(T *dst, const S *src, size_t n)                                   \
	{                                                                                  \
		if (n >= __atomic_load_n(&sum_a5_ymm_acc_bytes, __ATOMIC_RELAXED) / 4)     \
			a5y_acc(kind, (float *)dst, src, n);                               \
		else                                                                       \
			a5_acc(kind, (float *)dst, src, n);                                \
	}
A5_AUTO_ACC(a5_f32_acc_auto, A5_F32, float, float)
A5_AUTO_ACC(a5_i32_acc_auto, A5_I32, int32_t, int32_t)
A5_AUTO_ACC(a5_f16_acc_auto, A5_F16, float, uint16_t)
A5_AUTO_ACC(a5_bf16_acc_auto, A5_BF16, float, uint16_t)

static void a5_f32_add(float *dst, const float *a, const float *b, size_t n)
{
	const void *s[2] = { a, b };

	a5_kway(A5_F32, dst, s, 2, n);
}

static void a5_i32_add(int32_t *dst, const int32_t *a, const int32_t *b, size_t n)
{
	const void *s[2] = { a, b };

	a5_kway(A5_I32, (float *)dst, s, 2, n);
}

static void a5_f16_to_f32(float *dst, const uint16_t *src, size_t n)
{
	const void *s[1] = { src };

	a5_kway(A5_F16, dst, s, 1, n);
}

static void a5_bf16_to_f32(float *dst, const uint16_t *src, size_t n)
{
	const void *s[1] = { src };

	a5_kway(A5_BF16, dst, s, 1, n);
}

static void a5_f32_kway(float *dst, const float *const *src, unsigned k, size_t n)
{
	a5_kway(A5_F32, dst, (const void *const *)src, k, n);
}

static void a5_i32_kway(int32_t *dst, const int32_t *const *src, unsigned k, size_t n)
{
	a5_kway(A5_I32, (float *)dst, (const void *const *)src, k, n);
}

static void a5_f16_kway(float *dst, const uint16_t *const *src, unsigned k, size_t n)
{
	a5_kway(A5_F16, dst, (const void *const *)src, k, n);
}

static void a5_bf16_kway(float *dst, const uint16_t *const *src, unsigned k, size_t n)
{
	a5_kway(A5_BF16, dst, (const void *const *)src, k, n);
}

/* Four tables: forced (TALLY_ISA=avx512) or automatic, each with or without the AVX512_BF16
 * output conversion. */
#define A5_TABLE(name, acc, to_bf16)                    \
	const struct sum_ops name = {                   \
		.f32_acc = a5_f32_acc##acc,             \
		.f32_add = a5_f32_add,                  \
		.i32_acc = a5_i32_acc##acc,             \
		.i32_add = a5_i32_add,                  \
		.f16_acc = a5_f16_acc##acc,             \
		.bf16_acc = a5_bf16_acc##acc,           \
		.f16_to_f32 = a5_f16_to_f32,            \
		.bf16_to_f32 = a5_bf16_to_f32,          \
		.f32_to_f16 = a5_f32_to_f16,            \
		.f32_to_bf16 = to_bf16,                 \
		.f32_scale = a5_f32_scale,              \
		.f32_kway = a5_f32_kway,                \
		.i32_kway = a5_i32_kway,                \
		.f16_kway = a5_f16_kway,                \
		.bf16_kway = a5_bf16_kway,              \
		.onebit = &sum_onebit_avx512,           \
	}

A5_TABLE(sum_ops_avx512, , a5_f32_to_bf16);
A5_TABLE(sum_ops_avx512_auto, _auto, a5_f32_to_bf16);
#ifdef TALLY_HAVE_AVX512BF16
A5_TABLE(sum_ops_avx512_bf16, , sum_a5bf16_f32_to_bf16);
A5_TABLE(sum_ops_avx512_bf16_auto, _auto, sum_a5bf16_f32_to_bf16);
#endif
