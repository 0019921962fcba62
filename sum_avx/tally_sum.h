/* SPDX-License-Identifier: Apache-2.0
 * tally_sum.h — the reducers every summation in Tally goes through.
 *
 * All operations take any n (0 included) and any alignment. Accumulation is always in
 * f32 for floating types (f16/bf16 sources are widened) and in i32 (two's complement,
 * wrapping) for integers. For the same summation order every ISA path produces the same
 * bits as the scalar path: no FMA, no reassociation.
 *
 * NaNs, on every path and for any n, bit for bit: a NaN result of an add (+=, a + b, k-way)
 * or of the multiply by `scale` is the first NaN operand in the order written here (dst
 * before src in +=, a before b, src[0] before src[1] ..., the value before scale), quieted
 * (quiet bit 0x00400000 set, sign and payload kept); where no operand is NaN (Inf - Inf,
 * 0 * Inf) it is the default NaN 0xffc00000. This is x86's rule for ADDPS/MULPS (the first
 * source operand wins), with the operand order fixed. So a k-way sum returns its first NaN
 * source quieted. Widening keeps the payload: f16 NaNs come out quiet (as VCVTPH2PS), bf16 is
 * a plain shift (a signalling bf16 NaN stays signalling until an add quiets it); f32 -> f16 /
 * bf16 keep the sign and the top payload bits, quieted. Pure copies (k = 1 of f32, load and
 * store of f32/i32) keep the bits.
 *
 * MXCSR: the floating-point reducers run under the default control word (exceptions masked,
 * round to nearest even, no FTZ, no DAZ) whatever the calling thread set: subnormal inputs
 * and results are kept, results are the same bits as for a caller with the default word (so
 * the same on every node of a reduction), and no FP exception traps. A call leaves the
 * caller's control bits as they were and adds the exception flags it raised (bits 0-5), as if
 * the caller had done the arithmetic. Chosen over documenting "the caller's FTZ/DAZ applies"
 * because that would make a reduction's bits depend on which thread ran it, and the cost is
 * small: one STMXCSR per call when the caller's word is the default (no difference measurable
 * with tally-perf sum, f32 4 KiB .. 256 MiB), and two LDMXCSR (about 8 ns) per call when it
 * is not (tally-perf sum --ftz: f32 += at 4 KiB 188 -> 138 GB/s, at 256 KiB and 256 MiB
 * within the noise). The i32 operations and the scalar conversions below do no FP arithmetic.
 *
 * The implementation is chosen once (first call or tally_sum_init()) from CPUID; the
 * programs' environment variable TALLY_ISA=scalar|avx2|avx512, passed in with
 * tally_sum_set_default(), forces a path. The automatic selection (TALLY_ISA unset or
 * "auto") may also pick kernels by operation and size: on AVX-512 CPUs
 * the += operations run on 256-bit vectors for accumulators of 8 MiB and more (measured
 * faster in DRAM, slower in cache; sum_impl.h has the figures). Which kernel runs never
 * changes a result: every path and kernel gives the same bits.
 */
#ifndef TALLY_SUM_H
#define TALLY_SUM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Wire/element types. Values are part of the wire protocol (tally_proto.h). */
enum tally_dtype {
	TALLY_DT_F32 = 0,
	TALLY_DT_F16 = 1,
	TALLY_DT_BF16 = 2,
	TALLY_DT_I32 = 3,
	TALLY_DT_COUNT
};

enum tally_isa {
	TALLY_ISA_SCALAR = 0,
	TALLY_ISA_AVX2 = 1,   /* AVX2 + F16C */
	TALLY_ISA_AVX512 = 2, /* AVX-512 F/BW/VL (+BF16 where present) */
	TALLY_ISA_COUNT
};

#define TALLY_SUM_MAX_WAYS 64

/* Bytes per element of a dtype; 0 for an unknown dtype. */
size_t tally_dtype_size(enum tally_dtype dt);
const char *tally_dtype_name(enum tally_dtype dt);
/* Parses "f32", "f16", "bf16", "i32"; returns the dtype or -EINVAL. */
int tally_dtype_parse(const char *s);

/* The program's ISA setting (its TALLY_ISA, read at the program's edge: the library reads no
 * environment): NULL, "" or "auto" the automatic selection, else "scalar", "avx2" or
 * "avx512" forced. Stored for tally_sum_init() and the first reducer call (call it before
 * either, e.g. at start with the value of TALLY_ISA). 0, or -EINVAL (an
 * unknown path) or -ENOTSUP (this CPU lacks it), as tally_sum_init() will return. */
int tally_sum_set_default(const char *isa);
/* Select the implementation now (honours the setting above). Returns 0, or -EINVAL when it
 * names an unknown path, -ENOTSUP when it names a path this CPU lacks. Idempotent. */
int tally_sum_init(void);
/* The path in use. */
enum tally_isa tally_sum_isa(void);
const char *tally_sum_isa_name(enum tally_isa isa);
/* Whether this CPU (and build) can run a path. */
int tally_sum_isa_supported(enum tally_isa isa);
/* Switch paths (tests and benchmarks); -ENOTSUP if unsupported. Not thread-safe against
 * concurrent reducer calls: call it while no reducer runs. */
int tally_sum_set_isa(enum tally_isa isa);
/* Back to the automatic selection on the best path (as tally_sum_init() with no setting,
 * whatever the setting says); 0. Same thread-safety as tally_sum_set_isa(). */
int tally_sum_set_auto(void);
/* 1 when the automatic selection is in use, 0 when a path was forced. */
int tally_sum_is_auto(void);

/* ---- f32 / i32 ---- */
void tally_sum_f32_acc(float *dst, const float *src, size_t n);                  /* dst += src */
void tally_sum_f32_add(float *dst, const float *a, const float *b, size_t n);    /* dst = a + b */
void tally_sum_i32_acc(int32_t *dst, const int32_t *src, size_t n);
void tally_sum_i32_add(int32_t *dst, const int32_t *a, const int32_t *b, size_t n);

/* ---- half precision sources into an f32 accumulator ---- */
void tally_sum_f16_acc(float *dst, const uint16_t *src, size_t n);   /* dst += (f32)src */
void tally_sum_bf16_acc(float *dst, const uint16_t *src, size_t n);
void tally_sum_f16_to_f32(float *dst, const uint16_t *src, size_t n); /* dst = (f32)src */
void tally_sum_bf16_to_f32(float *dst, const uint16_t *src, size_t n);

/* ---- f32 accumulator out, round-to-nearest-even, NaN/Inf preserved, overflow to Inf,
 * multiplied by scale first (scale 1.0f: plain conversion; averaging: 1/W) ---- */
void tally_sum_f32_to_f16(uint16_t *dst, const float *src, size_t n, float scale);
void tally_sum_f32_to_bf16(uint16_t *dst, const float *src, size_t n, float scale);
void tally_sum_f32_scale(float *dst, const float *src, size_t n, float scale); /* dst = src*scale */

/* ---- k-way: dst = ((src[0] + src[1]) + src[2]) + ... + src[k-1], left to right, in one
 * pass over dst. 1 <= k <= TALLY_SUM_MAX_WAYS; dst may alias nothing in src. ---- */
void tally_sum_f32_kway(float *dst, const float *const *src, unsigned k, size_t n);
void tally_sum_i32_kway(int32_t *dst, const int32_t *const *src, unsigned k, size_t n);
/* f16/bf16 sources widened to f32 and summed in the same order. */
void tally_sum_f16_kway(float *dst, const uint16_t *const *src, unsigned k, size_t n);
void tally_sum_bf16_kway(float *dst, const uint16_t *const *src, unsigned k, size_t n);

/* ---- dtype-generic helpers used by the engine. `acc` is f32 for f32/f16/bf16 and i32 for
 * i32; `src`/`dst` are in the wire dtype. ---- */
void tally_sum_acc(enum tally_dtype dt, void *acc, const void *src, size_t n);   /* acc += src */
void tally_sum_load(enum tally_dtype dt, void *acc, const void *src, size_t n);  /* acc = src */
void tally_sum_store(enum tally_dtype dt, void *dst, const void *acc, size_t n); /* dst = acc */
void tally_sum_kway(enum tally_dtype dt, void *acc, const void *const *src, unsigned k, size_t n);

/* ---- 1-bit compression (1-bit Adam / 1-bit LAMB, DeepSpeed's two-stage error feedback) ----
 * Sign bits, packed LSB-first: bit i of the stream is bit i % 8 of byte i / 8. A stream of n
 * elements is TALLY_SUM_SIGN_BYTES(n) bytes; the last byte's bits past n are 0 on output and
 * ignored on input. Bit 1 is "+", 0 is "-", as DeepSpeed's `x.sign().add_(1).bool()`: 1 for
 * x >= 0, -0 included; for a NaN the sign bit decides (1 with it clear). On the bits: 1 when
 * bits(x) <= 0x80000000 as unsigned. Bits take no FP arithmetic, so no flags, no DAZ effect.
 * ±scale is scale, or scale with its sign bit flipped (exact; a NaN keeps its payload).
 * Any n (0 included), any alignment; the bit stream and the f32 arrays must not overlap. */
#define TALLY_SUM_SIGN_BYTES(n) (((size_t)(n) + 7) / 8)
/* bits = sign bits of src[0..n). */
void tally_sum_sign_pack(uint8_t *bits, const float *src, size_t n);
/* dst[i] = bit i ? scale : -scale. No arithmetic: the bits of ±scale. */
void tally_sum_sign_unpack(float *dst, const uint8_t *bits, size_t n, float scale);
/* acc[i] += bit i ? scale : -scale (acc the first operand of the add: the NaN rule). The
 * appliance's server stage: acc = 0, then one call per worker with scale_w / W. */
void tally_sum_sign_unpack_acc(float *acc, const uint8_t *bits, size_t n, float scale);
/* Sum of squares of src in f64, in a fixed order, the same bits on every path: element i goes
 * to partial sum i % 32 (each adds its squares in index order; f32 squares are exact in f64),
 * then the partials fold pairwise: p[j] += p[j + 16], then + 8, + 4, + 2, + 1 (j ascending).
 * 0 for n = 0; +Inf if any element is ±Inf and none NaN; a NaN element gives the default
 * NaN (f64 0xfff8000000000000) whatever its payload. sqrt() of it is the L2 norm. */
double tally_sum_f32_sumsq(const float *src, size_t n);
/* Compress with error feedback, one stage (worker and server alike; DeepSpeed's
 * compressed_allreduce):
 *   c = src + err             (f32, src the first operand: the NaN rule)
 *   scale = ||c||_2 / sqrt(n) = (f32)(sqrt(tally_sum_f32_sumsq(c)) / sqrt(n)), both square
 *                               roots and the division in f64, rounded to f32 once
 *   bits = sign bits of c
 *   err = c + (bit ? -scale : +scale)   i.e. c - scale * sign(c), one f32 rounding
 * Returns scale. n = 0: returns 0 and writes nothing. A NaN in c makes scale the default NaN
 * 0xffc00000 (and so every err a NaN); an Inf (no NaN) makes it +Inf. err is read and
 * written (in/out); src may be err itself (then c = 2 * err) but may not otherwise overlap
 * it; bits must not overlap either. Two passes over err: c is kept in err between them. */
float tally_sum_onebit_compress(uint8_t *bits, float *err, const float *src, size_t n);

/* ---- scalar conversions (reference semantics of every path) ---- */
float tally_f16_to_f32(uint16_t h);
uint16_t tally_f32_to_f16(float f);
float tally_bf16_to_f32(uint16_t h);
uint16_t tally_f32_to_bf16(float f);

#ifdef __cplusplus
}
#endif
#endif
