/* SPDX-License-Identifier: Apache-2.0
 * sum_dispatch.c — picks the reducer path once (CPUID, the program's TALLY_ISA setting) and routes every public
 * call through that path's table; dtype helpers and the dtype-generic entry points.
 */
#include <cpuid.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xmmintrin.h>

#include "sum_onebit.h"

static const char *const sum_isa_names[TALLY_ISA_COUNT] = { "scalar", "avx2", "avx512" };
static const char *const sum_dt_names[TALLY_DT_COUNT] = { "f32", "f16", "bf16", "i32" };
static const size_t sum_dt_sizes[TALLY_DT_COUNT] = { 4, 2, 2, 4 };

/* The table in use; NULL until the first call or tally_sum_init(). Read with acquire so a
 * thread that sees the pointer sees a fully selected path (the tables are constant). */
static const struct sum_ops *sum_cur;
static enum tally_isa sum_cur_isa;
static int sum_cur_auto; /* the automatic selection (sum_impl.h: SUM_A5_YMM_ACC_BYTES) */
static unsigned sum_cpu_mask = ~0u;

size_t tally_dtype_size(enum tally_dtype dt)
{
	return (unsigned)dt < TALLY_DT_COUNT ? sum_dt_sizes[dt] : 0;
}

const char *tally_dtype_name(enum tally_dtype dt)
{
	return (unsigned)dt < TALLY_DT_COUNT ? sum_dt_names[dt] : "unknown";
}

int tally_dtype_parse(const char *s)
{
	if (!s)
		return -EINVAL;
	for (int i = 0; i < TALLY_DT_COUNT; i++)
		if (!strcmp(s, sum_dt_names[i]))
			return i;
	return -EINVAL;
}

const char *tally_sum_isa_name(enum tally_isa isa)
{
	return (unsigned)isa < TALLY_ISA_COUNT ? sum_isa_names[isa] : "unknown";
}

/* F16C and AVX512_BF16 straight from CPUID: not every compiler's __builtin_cpu_supports knows
 * them (clang 14 does not). The OS-state checks come with the AVX2 / AVX-512F builtins. */
static int sum_cpu_f16c(void)
{
	unsigned a, b, c, d;

	return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}

#ifdef TALLY_HAVE_AVX512BF16
static int sum_cpu_avx512bf16(void)
{
	unsigned a, b, c, d;

	/* leaf 7 subleaf 1, EAX bit 5; subleaf 0 EBX bit 17: AVX512DQ */
	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(b & (1u << 17)))
		return 0;
	return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));
}
#endif

/* The table of a path; `aut`: the automatic selection's variant where the path has one. */
static const struct sum_ops *sum_table(enum tally_isa isa, int aut)
{
	(void)aut;
	switch (isa) {
	case TALLY_ISA_SCALAR:
		return &sum_ops_scalar;
#ifdef TALLY_HAVE_AVX2
	case TALLY_ISA_AVX2:
		return &sum_ops_avx2;
#endif
#ifdef TALLY_HAVE_AVX512
	case TALLY_ISA_AVX512:
#ifdef TALLY_HAVE_AVX512BF16
		if ((sum_cpu_mask & SUM_CPU_BF16) && sum_cpu_avx512bf16())
			return aut ? &sum_ops_avx512_bf16_auto : &sum_ops_avx512_bf16;
#endif
		return aut ? &sum_ops_avx512_auto : &sum_ops_avx512;
#endif
	default:
		return NULL;
	}
}

static int sum_cpu_has(enum tally_isa isa)
{
	switch (isa) {
	case TALLY_ISA_SCALAR:
		return 1;
	case TALLY_ISA_AVX2:
		/* libgcc's checks include the OS enabling the YMM/ZMM state (XGETBV). */
		return __builtin_cpu_supports("avx2") && sum_cpu_f16c();
	case TALLY_ISA_AVX512:
		return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		       __builtin_cpu_supports("avx512vl") && sum_cpu_f16c();
	default:
		return 0;
	}
}

int tally_sum_isa_supported(enum tally_isa isa)
{
	if ((unsigned)isa >= TALLY_ISA_COUNT || !(sum_cpu_mask & (1u << isa)))
		return 0;
	return sum_table(isa, 0) != NULL && sum_cpu_has(isa);
}

void sum_test_set_cpu_mask(unsigned mask)
{
	sum_cpu_mask = mask | (1u << TALLY_ISA_SCALAR);
}

size_t sum_test_set_ymm_acc_bytes(size_t bytes)
{
#ifdef TALLY_HAVE_AVX512
	return __atomic_exchange_n(&sum_a5_ymm_acc_bytes, bytes, __ATOMIC_RELAXED);
#else
	(void)bytes;
	return 0;
#endif
}

static enum tally_isa sum_best(void)
{
	for (int i = TALLY_ISA_COUNT - 1; i > 0; i--)
		if (tally_sum_isa_supported((enum tally_isa)i))
			return (enum tally_isa)i;
	return TALLY_ISA_SCALAR;
}

static int sum_set(enum tally_isa isa, int aut)
{
	if ((unsigned)isa >= TALLY_ISA_COUNT)
		return -EINVAL;
	if (!tally_sum_isa_supported(isa))
		return -ENOTSUP;
	__atomic_store_n(&sum_cur_isa, isa, __ATOMIC_RELAXED);
	__atomic_store_n(&sum_cur_auto, aut, __ATOMIC_RELAXED);
	__atomic_store_n(&sum_cur, sum_table(isa, aut), __ATOMIC_RELEASE);
	return 0;
}

int tally_sum_set_isa(enum tally_isa isa)
{
	return sum_set(isa, 0);
}

int tally_sum_set_auto(void)
{
	return sum_set(sum_best(), 1);
}

/* The program's ISA setting (its TALLY_ISA, passed with tally_sum_set_default): "" means
 * the automatic selection. Written before the reducers run (program start). */
static char sum_want[16];
static int sum_want_bad; /* the setting did not fit: unknown */

int tally_sum_set_default(const char *isa)
{
	size_t n = isa ? strlen(isa) : 0;

	sum_want_bad = n >= sizeof(sum_want);
	memcpy(sum_want, isa && !sum_want_bad ? isa : "", sum_want_bad ? 1 : n + 1);
	if (sum_want_bad)
		return -EINVAL;
	for (int i = 0; n && strcmp(isa, "auto") && i < TALLY_ISA_COUNT; i++)
		if (!strcmp(isa, sum_isa_names[i]))
			return tally_sum_isa_supported((enum tally_isa)i) ? 0 : -ENOTSUP;
	return !n || !strcmp(isa, "auto") ? 0 : -EINVAL;
}

/* The setting: empty or "auto" means the automatic selection (*aut = 1) on the best path;
 * otherwise a path name, forced. */
static int sum_want_isa(enum tally_isa *out, int *aut)
{
	const char *s = sum_want;

	*aut = !sum_want_bad && (!*s || !strcmp(s, "auto"));
	if (*aut) {
		*out = sum_best();
		return 0;
	}
	for (int i = 0; !sum_want_bad && i < TALLY_ISA_COUNT; i++) {
		if (!strcmp(s, sum_isa_names[i])) {
			if (!tally_sum_isa_supported((enum tally_isa)i))
				return -ENOTSUP;
			*out = (enum tally_isa)i;
			return 0;
		}
	}
	return -EINVAL;
}

int tally_sum_init(void)
{
	enum tally_isa isa;
	int aut, rc = sum_want_isa(&isa, &aut);

	if (rc < 0)
		return rc; /* the selection stays as it was */
	return sum_set(isa, aut);
}

/* First reducer call without tally_sum_init(): a bad setting cannot be returned, so it is
 * reported once on stderr and the best path is used. */
static const struct sum_ops *sum_lazy_init(void)
{
	int rc = tally_sum_init();

	if (rc < 0) {
		fprintf(stderr, "tally_sum: TALLY_ISA='%s' %s; using %s\n", sum_want,
			rc == -ENOTSUP ? "is not supported by this CPU" : "is unknown (scalar|avx2|avx512)",
			sum_isa_names[sum_best()]);
		tally_sum_set_auto();
	}
	return __atomic_load_n(&sum_cur, __ATOMIC_ACQUIRE);
}

static inline const struct sum_ops *sum_ops(void)
{
	const struct sum_ops *o = __atomic_load_n(&sum_cur, __ATOMIC_ACQUIRE);

	return __builtin_expect(o != NULL, 1) ? o : sum_lazy_init();
}

enum tally_isa tally_sum_isa(void)
{
	sum_ops();
	return __atomic_load_n(&sum_cur_isa, __ATOMIC_RELAXED);
}

int tally_sum_is_auto(void)
{
	sum_ops();
	return __atomic_load_n(&sum_cur_auto, __ATOMIC_RELAXED);
}

/* ---- MXCSR (tally_sum.h): every reducer runs under the default control word, whatever the
 * caller set (FTZ/DAZ from -ffast-math or torch.set_flush_denormal, another rounding mode,
 * unmasked exceptions), so every node of a reduction computes the same bits. Reading the word
 * is a few cycles; it is only written when the caller's differs, and then restored with the
 * flags the call raised added, as if the caller had done the arithmetic. */
#define SUM_MXCSR_FLAGS 0x3fu  /* sticky exception flags */
#define SUM_MXCSR_STD 0x1f80u  /* exceptions masked, round to nearest, no FTZ, no DAZ */

static inline unsigned sum_fp_enter(void)
{
	unsigned m = _mm_getcsr();

	if (__builtin_expect((m & ~SUM_MXCSR_FLAGS) != SUM_MXCSR_STD, 0))
		_mm_setcsr(SUM_MXCSR_STD | (m & SUM_MXCSR_FLAGS));
	return m;
}

static inline void sum_fp_leave(unsigned m)
{
	if (__builtin_expect((m & ~SUM_MXCSR_FLAGS) != SUM_MXCSR_STD, 0))
		_mm_setcsr(m | (_mm_getcsr() & SUM_MXCSR_FLAGS));
}

/* The indirect call is opaque to the compiler, so no FP work moves across the MXCSR writes. */
#define SUM_STD_FP(call)                          \
	do {                                      \
		unsigned sum_mx_ = sum_fp_enter(); \
		call;                             \
		sum_fp_leave(sum_mx_);            \
	} while (0)

/* ---- public entry points: one indirect call each ---- */
void tally_sum_f32_acc(float *dst, const float *src, size_t n)
{
	SUM_STD_FP(sum_ops()->f32_acc(dst, src, n));
}

void tally_sum_f32_add(float *dst, const float *a, const float *b, size_t n)
{
	SUM_STD_FP(sum_ops()->f32_add(dst, a, b, n));
}

void tally_sum_i32_acc(int32_t *dst, const int32_t *src, size_t n)
{
	sum_ops()->i32_acc(dst, src, n); /* integers: MXCSR plays no part */
}

void tally_sum_i32_add(int32_t *dst, const int32_t *a, const int32_t *b, size_t n)
{
	sum_ops()->i32_add(dst, a, b, n); /* integers: MXCSR plays no part */
}

void tally_sum_f16_acc(float *dst, const uint16_t *src, size_t n)
{
	SUM_STD_FP(sum_ops()->f16_acc(dst, src, n));
}

void tally_sum_bf16_acc(float *dst, const uint16_t *src, size_t n)
{
	SUM_STD_FP(sum_ops()->bf16_acc(dst, src, n));
}

void tally_sum_f16_to_f32(float *dst, const uint16_t *src, size_t n)
{
	SUM_STD_FP(sum_ops()->f16_to_f32(dst, src, n));
}

void tally_sum_bf16_to_f32(float *dst, const uint16_t *src, size_t n)
{
	SUM_STD_FP(sum_ops()->bf16_to_f32(dst, src, n));
}

void tally_sum_f32_to_f16(uint16_t *dst, const float *src, size_t n, float scale)
{
	SUM_STD_FP(sum_ops()->f32_to_f16(dst, src, n, scale));
}

void tally_sum_f32_to_bf16(uint16_t *dst, const float *src, size_t n, float scale)
{
	SUM_STD_FP(sum_ops()->f32_to_bf16(dst, src, n, scale));
}

void tally_sum_f32_scale(float *dst, const float *src, size_t n, float scale)
{
	SUM_STD_FP(sum_ops()->f32_scale(dst, src, n, scale));
}

/* k outside 1..TALLY_SUM_MAX_WAYS is a caller bug: nothing is written. */
void tally_sum_f32_kway(float *dst, const float *const *src, unsigned k, size_t n)
{
	if (k >= 1 && k <= TALLY_SUM_MAX_WAYS)
		SUM_STD_FP(sum_ops()->f32_kway(dst, src, k, n));
}

void tally_sum_i32_kway(int32_t *dst, const int32_t *const *src, unsigned k, size_t n)
{
	if (k >= 1 && k <= TALLY_SUM_MAX_WAYS)
		sum_ops()->i32_kway(dst, src, k, n); /* integers: MXCSR plays no part */
}

void tally_sum_f16_kway(float *dst, const uint16_t *const *src, unsigned k, size_t n)
{
	if (k >= 1 && k <= TALLY_SUM_MAX_WAYS)
		SUM_STD_FP(sum_ops()->f16_kway(dst, src, k, n));
}

void tally_sum_bf16_kway(float *dst, const uint16_t *const *src, unsigned k, size_t n)
{
	if (k >= 1 && k <= TALLY_SUM_MAX_WAYS)
		SUM_STD_FP(sum_ops()->bf16_kway(dst, src, k, n));
}

/* ---- 1-bit compression ---- */
void tally_sum_sign_pack(uint8_t *bits, const float *src, size_t n)
{
	sum_ops()->onebit->sign_pack(bits, src, n); /* bit tests: MXCSR plays no part */
}

void tally_sum_sign_unpack(float *dst, const uint8_t *bits, size_t n, float scale)
{
	sum_ops()->onebit->sign_unpack(dst, bits, n, scale); /* sign flips: no arithmetic */
}

void tally_sum_sign_unpack_acc(float *acc, const uint8_t *bits, size_t n, float scale)
{
	SUM_STD_FP(sum_ops()->onebit->sign_unpack_acc(acc, bits, n, scale));
}

double tally_sum_f32_sumsq(const float *src, size_t n)
{
	double r;

	SUM_STD_FP(r = sum_ops()->onebit->f32_sumsq(src, n));
	return r;
}

float tally_sum_onebit_compress(uint8_t *bits, float *err, const float *src, size_t n)
{
	float scale;

	SUM_STD_FP(scale = sum_ops()->onebit->onebit_compress(bits, err, src, n));
	return scale;
}

/* ---- dtype-generic helpers (unknown dtype: nothing is touched) ---- */
void tally_sum_acc(enum tally_dtype dt, void *acc, const void *src, size_t n)
{
	switch (dt) {
	case TALLY_DT_F32: tally_sum_f32_acc(acc, src, n); break;
	case TALLY_DT_F16: tally_sum_f16_acc(acc, src, n); break;
	case TALLY_DT_BF16: tally_sum_bf16_acc(acc, src, n); break;
	case TALLY_DT_I32: tally_sum_i32_acc(acc, src, n); break;
	default: break;
	}
}

void tally_sum_load(enum tally_dtype dt, void *acc, const void *src, size_t n)
{
	switch (dt) {
	case TALLY_DT_F32:
	case TALLY_DT_I32:
		if (n)
			memmove(acc, src, n * 4);
		break;
	case TALLY_DT_F16: tally_sum_f16_to_f32(acc, src, n); break;
	case TALLY_DT_BF16: tally_sum_bf16_to_f32(acc, src, n); break;
	default: break;
	}
}

void tally_sum_store(enum tally_dtype dt, void *dst, const void *acc, size_t n)
{
	switch (dt) {
	case TALLY_DT_F32:
	case TALLY_DT_I32:
		if (n)
			memmove(dst, acc, n * 4);
		break;
	case TALLY_DT_F16: tally_sum_f32_to_f16(dst, acc, n, 1.0f); break;
	case TALLY_DT_BF16: tally_sum_f32_to_bf16(dst, acc, n, 1.0f); break;
	default: break;
	}
}

void tally_sum_kway(enum tally_dtype dt, void *acc, const void *const *src, unsigned k, size_t n)
{
	switch (dt) {
	case TALLY_DT_F32: tally_sum_f32_kway(acc, (const float *const *)src, k, n); break;
	case TALLY_DT_F16: tally_sum_f16_kway(acc, (const uint16_t *const *)src, k, n); break;
	case TALLY_DT_BF16: tally_sum_bf16_kway(acc, (const uint16_t *const *)src, k, n); break;
	case TALLY_DT_I32: tally_sum_i32_kway(acc, (const int32_t *const *)src, k, n); break;
	default: break;
	}
}

/* ---- scalar conversions ---- */
float tally_f16_to_f32(uint16_t h)
{
	return sum_f16_to_f32(h);
}

uint16_t tally_f32_to_f16(float f)
{
	return sum_f32_to_f16(f);
}

float tally_bf16_to_f32(uint16_t h)
{
	return sum_bf16_to_f32(h);
}

uint16_t tally_f32_to_bf16(float f)
{
	return sum_f32_to_bf16(f);
}
