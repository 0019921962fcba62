/* SPDX-License-Identifier: Apache-2.0
 * sum_impl.h — internal to libtally_sum: the per-ISA operation table, and the scalar
 * conversions every path must match bit for bit (inline so the scalar loops stay tight).
 */
#ifndef SUM_IMPL_H
#define SUM_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tally_sum.h"

struct sum_onebit_ops; /* sum_onebit.h: the 1-bit compression reducers */

/* One table per ISA; the dispatcher picks one at init and every public call goes through it. */
struct sum_ops {
	void (*f32_acc)(float *dst, const float *src, size_t n);
	void (*f32_add)(float *dst, const float *a, const float *b, size_t n);
	void (*i32_acc)(int32_t *dst, const int32_t *src, size_t n);
	void (*i32_add)(int32_t *dst, const int32_t *a, const int32_t *b, size_t n);
	void (*f16_acc)(float *dst, const uint16_t *src, size_t n);
	void (*bf16_acc)(float *dst, const uint16_t *src, size_t n);
	void (*f16_to_f32)(float *dst, const uint16_t *src, size_t n);
	void (*bf16_to_f32)(float *dst, const uint16_t *src, size_t n);
	void (*f32_to_f16)(uint16_t *dst, const float *src, size_t n, float scale);
	void (*f32_to_bf16)(uint16_t *dst, const float *src, size_t n, float scale);
	void (*f32_scale)(float *dst, const float *src, size_t n, float scale);
	void (*f32_kway)(float *dst, const float *const *src, unsigned k, size_t n);
	void (*i32_kway)(int32_t *dst, const int32_t *const *src, unsigned k, size_t n);
	void (*f16_kway)(float *dst, const uint16_t *const *src, unsigned k, size_t n);
	void (*bf16_kway)(float *dst, const uint16_t *const *src, unsigned k, size_t n);
	const struct sum_onebit_ops *onebit;
};

extern const struct sum_ops sum_ops_scalar;
#ifdef TALLY_HAVE_AVX2
extern const struct sum_ops sum_ops_avx2;
#endif
#ifdef TALLY_HAVE_AVX512
extern const struct sum_ops sum_ops_avx512;
#endif
#ifdef TALLY_HAVE_AVX512BF16
/* The AVX-512 table with the f32 → bf16 output of sum_avx512_bf16.c (CPUs with
 * AVX512_BF16 + AVX512DQ); still reported as the "avx512" path. */
extern const struct sum_ops sum_ops_avx512_bf16;
void sum_a5bf16_f32_to_bf16(uint16_t *dst, const float *src, size_t n, float scale);
#endif

/* The automatic selection (TALLY_ISA unset or "auto") on an AVX-512 CPU: the avx512 table,
 * but the += operations (f32, i32, f16, bf16 sources) run on 256-bit vectors once the
 * accumulator is sum_a5_ymm_acc_bytes or more (n * 4 >= it). TALLY_ISA=avx512 (or
 * tally_sum_set_isa) gives the pure 512-bit table. Same adds, same order: the same bits.
 * Why: in DRAM the 512-bit += lost to 256-bit vectors; in cache it wins. Measured on this
 * project's AVX-512 machine (AMD EPYC, AVX-512 F/BW/VL/BF16, 32 MiB L3, shared with other
 * jobs), tally-perf sum --isa avx512 vs --isa avx2, medians of 3 runs, ratio avx512/avx2:
 *   bf16 +=  1 MiB 1.03, 4 MiB 1.01/0.93, 16 MiB 0.78/0.77, 32 MiB 0.84/0.87,
 *            64 MiB 0.84/0.84, 256 MiB 0.91/0.90    (2-way/4-way)
 *   f32 +=   1 MiB 0.98, 4 MiB 0.98/1.03, 16 MiB 0.93/1.01, 64 MiB 0.97/0.97, 256 MiB 0.98/1.00
 *   f32 += 256 KiB: 512-bit 128 GB/s, 256-bit 96 GB/s (1.33).
 * The 8 MiB switch sits between the last size where 512-bit held (4 MiB) and the first where
 * it lost (16 MiB). With it (tally-perf sum, old and new binary interleaved, 3 runs): bf16 +=
 * 64 MiB 2-way 10.3 10.7 10.1 -> 12.5 7.1 11.3 GB/s (the 7.1: a loaded run), f32 += 64 MiB
 * vs the plain AVX2 loop (--baseline avx2) 1.02 1.13 1.05 (2-way), 1.05 1.29 1.02 (4-way). k-way sums keep 512-bit vectors (4-way: 0.93 .. 1.39, no size where
 * 256-bit won beyond the noise). */
#ifndef SUM_A5_YMM_ACC_BYTES
#define SUM_A5_YMM_ACC_BYTES (8u << 20)
#endif
#ifdef TALLY_HAVE_AVX512
extern const struct sum_ops sum_ops_avx512_auto;
extern size_t sum_a5_ymm_acc_bytes;
#endif
#ifdef TALLY_HAVE_AVX512BF16
extern const struct sum_ops sum_ops_avx512_bf16_auto;
#endif

/* Bit of the CPU mask (see sum_test_set_cpu_mask) for the AVX512_BF16 extension. */
#define SUM_CPU_BF16 (1u << TALLY_ISA_COUNT)

/* Tests only: pretend the CPU lacks the paths whose bit (1 << isa) is clear in mask, so the
 * -ENOTSUP handling can be exercised on a CPU that has everything; with SUM_CPU_BF16 clear
 * the avx512 path uses its plain AVX-512F table. ~0u restores. Takes effect at the next
 * tally_sum_set_isa() / tally_sum_init(). */
void sum_test_set_cpu_mask(unsigned mask);
/* Tests only: move the automatic selection's 256-bit += switch (bytes of accumulator; see
 * SUM_A5_YMM_ACC_BYTES); returns the old value (0 where the build has no AVX-512 path).
 * Call it while no reducer runs. */
size_t sum_test_set_ymm_acc_bytes(size_t bytes);

static inline uint32_t sum_f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

static inline float sum_bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

/* ---- NaN operands (the rule in tally_sum.h) ----
 * A NaN result is the first NaN operand quieted, or the default NaN 0xffc00000 when neither
 * operand is NaN (Inf - Inf, 0 * Inf): what x86's ADDPS/MULPS give with the operands in that
 * order. C lets the compiler swap the operands of + and * (GCC did, by loop and by length), so
 * the scalar code settles the one case where the order matters, a NaN first operand; with a
 * non-NaN first operand x86 gives the rule's bits in either order. The vector paths pin the
 * operand order with the asm below instead. */
#define SUM_QUIET_BIT 0x00400000u

/* r = a op b (either order): a NaN `a`, quieted, replaces it. Branch-free on the bits: with a
 * branch, or a float compare, GCC does not vectorize the loops (a + b might trap). */
static inline float sum_nan_first(float a, float r)
{
	uint32_t ua = sum_f32_bits(a);
	uint32_t nan = -(uint32_t)((int32_t)(ua & 0x7fffffffu) > 0x7f800000);

	return sum_bits_f32(((ua | SUM_QUIET_BIT) & nan) | (sum_f32_bits(r) & ~nan));
}

static inline float sum_add_f32(float a, float b)
{
	return sum_nan_first(a, a + b);
}

static inline float sum_mul_f32(float a, float b)
{
	return sum_nan_first(a, a * b);
}

/* VADDPS / VMULPS with `a` as the first source (Intel operand order: dst, src1, src2); `b`
 * may come straight from memory. Only in the translation units built for that ISA. */
#if defined(__AVX__)
#include <immintrin.h>

static inline __attribute__((always_inline)) __m256 sum_add_ps256(__m256 a, __m256 b)
{
	__m256 r;

	__asm__("vaddps {%2, %1, %0|%0, %1, %2}" : "=x"(r) : "x"(a), "xm"(b));
	return r;
}

static inline __attribute__((always_inline)) __m256 sum_mul_ps256(__m256 a, __m256 b)
{
	__m256 r;

	__asm__("vmulps {%2, %1, %0|%0, %1, %2}" : "=x"(r) : "x"(a), "xm"(b));
	return r;
}
#endif
#if defined(__AVX512F__)
static inline __attribute__((always_inline)) __m512 sum_add_ps512(__m512 a, __m512 b)
{
	__m512 r;

	__asm__("vaddps {%2, %1, %0|%0, %1, %2}" : "=v"(r) : "v"(a), "vm"(b));
	return r;
}

static inline __attribute__((always_inline)) __m512 sum_mul_ps512(__m512 a, __m512 b)
{
	__m512 r;

	__asm__("vmulps {%2, %1, %0|%0, %1, %2}" : "=v"(r) : "v"(a), "vm"(b));
	return r;
}
#endif

/* Exact widening; NaNs come out quiet with the payload kept (as VCVTPH2PS does). */
static inline float sum_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu;
	uint32_t frac = h & 0x3ffu;

	if (exp == 0x1f)
		return sum_bits_f32(sign | 0x7f800000u | (frac << 13) | (frac ? 0x00400000u : 0));
	if (exp != 0)
		return sum_bits_f32(sign | ((exp + 112u) << 23) | (frac << 13));
	if (frac == 0)
		return sum_bits_f32(sign);
	/* subnormal: normalise */
	exp = 113;
	while (!(frac & 0x400u)) {
		frac <<= 1;
		exp--;
	}
	return sum_bits_f32(sign | (exp << 23) | ((frac & 0x3ffu) << 13));
}

/* Round to nearest even; overflow to Inf; NaN stays NaN (quiet, top payload bits kept, as
 * VCVTPS2PH does); subnormal results exact-rounded. */
static inline uint16_t sum_f32_to_f16(float f)
{
	uint32_t x = sum_f32_bits(f);
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);

	x &= 0x7fffffffu;
	if (x > 0x7f800000u)
		return (uint16_t)(sign | 0x7e00u | ((x >> 13) & 0x3ffu));
	if (x >= 0x477ff000u) /* >= 65520: rounds to Inf (ties to even: 65536) */
		return (uint16_t)(sign | 0x7c00u);
	if (x >= 0x38800000u) { /* normal result */
		uint32_t h = ((x >> 23) - 112u) << 10 | ((x >> 13) & 0x3ffu);
		uint32_t rem = x & 0x1fffu;

		if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
			h++;
		return (uint16_t)(sign | h);
	}
	if (x <= 0x33000000u) /* <= 2^-25: rounds to zero (tie goes to even 0) */
		return sign;
	{
		uint32_t e = x >> 23;
		uint32_t m = (x & 0x7fffffu) | 0x800000u;
		uint32_t shift = 126u - e;
		uint32_t r = m >> shift;
		uint32_t rem = m & ((1u << shift) - 1u);
		uint32_t half = 1u << (shift - 1u);

		if (rem > half || (rem == half && (r & 1u)))
			r++;
		return (uint16_t)(sign | r);
	}
}

static inline float sum_bf16_to_f32(uint16_t h)
{
	return sum_bits_f32((uint32_t)h << 16);
}

/* Round to nearest even (subnormals kept, unlike VCVTNEPS2BF16), overflow to Inf, NaN quiet. */
static inline uint16_t sum_f32_to_bf16(float f)
{
	uint32_t x = sum_f32_bits(f);

	if ((x & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x >> 16) | 0x0040u);
	x += 0x7fffu + ((x >> 16) & 1u);
	return (uint16_t)(x >> 16);
}

#endif
