/* SPDX-License-Identifier: Apache-2.0
 * test_sum_ops.c — every reducer × dtype on one ISA path (argv[1]), against a plain-C
 * reference computed here, bit for bit: n = 0..200 and large odd n, misaligned pointers,
 * edge values (NaN, ±Inf, denormals, overflow, ties), k = 1, 2, 3, 8, 64. Buffers end at or
 * just before a PROT_NONE page, so a tail that reads or writes past n crashes the test; bytes
 * around each buffer are checked unchanged.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "sum_impl.h" /* sum_test_set_cpu_mask */
#include "sum_test_util.h"

/* ---- guarded buffers ----
 * A few big regions, each ending at a PROT_NONE page, mapped once and reused: a buffer is
 * placed so that it ends `gap` bytes before the guard page; the gap and the 64 bytes before
 * the buffer hold patterns that must survive the call. */
#define GB_REGIONS (TALLY_SUM_MAX_WAYS + 3)
#define GB_BYTES ((size_t)16 << 20)
#define GB_PRE 64

struct gbuf {
	uint8_t *p;   /* the buffer */
	size_t bytes; /* its size */
	size_t gap;   /* bytes between its end and the guard page (pattern 0xa5) */
};

static uint8_t *gb_region[GB_REGIONS]; /* first byte of each region's guard page */

static int gb_setup(void **state)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	(void)state;
	for (int r = 0; r < GB_REGIONS; r++) {
		uint8_t *m = mmap(NULL, GB_BYTES + pg, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (m == MAP_FAILED || mprotect(m + GB_BYTES, pg, PROT_NONE))
			return -1;
		gb_region[r] = m + GB_BYTES;
	}
	return 0;
}

static int gb_teardown(void **state)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	(void)state;
	for (int r = 0; r < GB_REGIONS; r++)
		munmap(gb_region[r] - GB_BYTES, GB_BYTES + pg);
	return 0;
}

static void gb_alloc(struct gbuf *g, int region, size_t bytes, size_t gap)
{
	assert_true(bytes + gap + GB_PRE <= GB_BYTES);
	g->p = gb_region[region] - gap - bytes;
	g->bytes = bytes;
	g->gap = gap;
	memset(g->p - GB_PRE, 0x5a, GB_PRE);
	memset(g->p + bytes, 0xa5, gap);
}

static void gb_check_free(struct gbuf *g, const char *what)
{
	for (size_t i = 0; i < g->gap; i++)
		if (g->p[g->bytes + i] != 0xa5)
			fail_msg("%s: byte %zu past the end overwritten", what, i);
	for (size_t i = 1; i <= GB_PRE; i++)
		if (g->p[-(ptrdiff_t)i] != 0x5a)
			fail_msg("%s: byte %zu before the start overwritten", what, i);
}

/* ---- the operations under test ---- */
enum op {
	OP_F32_ACC, OP_F32_ADD, OP_I32_ACC, OP_I32_ADD, OP_F16_ACC, OP_BF16_ACC, OP_F16_TO_F32,
	OP_BF16_TO_F32, OP_F32_TO_F16, OP_F32_TO_BF16, OP_F32_SCALE, OP_COUNT
};

static const char *const op_names[OP_COUNT] = {
	"f32_acc", "f32_add", "i32_acc", "i32_add", "f16_acc", "bf16_acc", "f16_to_f32",
	"bf16_to_f32", "f32_to_f16", "f32_to_bf16", "f32_scale",
};

/* source element size (0: none), whether dst is read, dst element size, sources */
static const struct { size_t ssz; int dst_in; size_t dsz; int nsrc; } op_shape[OP_COUNT] = {
	[OP_F32_ACC] = { 4, 1, 4, 1 },     [OP_F32_ADD] = { 4, 0, 4, 2 },
	[OP_I32_ACC] = { 4, 1, 4, 1 },     [OP_I32_ADD] = { 4, 0, 4, 2 },
	[OP_F16_ACC] = { 2, 1, 4, 1 },     [OP_BF16_ACC] = { 2, 1, 4, 1 },
	[OP_F16_TO_F32] = { 2, 0, 4, 1 },  [OP_BF16_TO_F32] = { 2, 0, 4, 1 },
	[OP_F32_TO_F16] = { 4, 0, 2, 1 },  [OP_F32_TO_BF16] = { 4, 0, 2, 1 },
	[OP_F32_SCALE] = { 4, 0, 4, 1 },
};

static void fill(enum op op, void *p, size_t n, uint64_t *s, int is_dst)
{
	if (op == OP_I32_ACC || op == OP_I32_ADD)
		st_fill_i32(p, n, s);
	else if (is_dst && op_shape[op].dsz == 2)
		st_fill_u16(p, n, s, 0); /* garbage the conversion must overwrite */
	else if (!is_dst && op_shape[op].ssz == 2)
		st_fill_u16(p, n, s, op == OP_BF16_ACC || op == OP_BF16_TO_F32);
	else
		st_fill_f32(p, n, s);
}

static void run_op(enum op op, void *d, const void *a, const void *b, size_t n, float sc)
{
	switch (op) {
	case OP_F32_ACC: tally_sum_f32_acc(d, a, n); break;
	case OP_F32_ADD: tally_sum_f32_add(d, a, b, n); break;
	case OP_I32_ACC: tally_sum_i32_acc(d, a, n); break;
	case OP_I32_ADD: tally_sum_i32_add(d, a, b, n); break;
	case OP_F16_ACC: tally_sum_f16_acc(d, a, n); break;
	case OP_BF16_ACC: tally_sum_bf16_acc(d, a, n); break;
	case OP_F16_TO_F32: tally_sum_f16_to_f32(d, a, n); break;
	case OP_BF16_TO_F32: tally_sum_bf16_to_f32(d, a, n); break;
	case OP_F32_TO_F16: tally_sum_f32_to_f16(d, a, n, sc); break;
	case OP_F32_TO_BF16: tally_sum_f32_to_bf16(d, a, n, sc); break;
	case OP_F32_SCALE: tally_sum_f32_scale(d, a, n, sc); break;
	default: fail();
	}
}

/* The reference, element by element in plain C (built with -ffp-contract=off), NaNs by the
 * rule of tally_sum.h (st_add, st_mul). */
static void ref_op(enum op op, void *d, const void *a, const void *b, size_t n, float sc)
{
	float *df = d;
	int32_t *di = d;
	uint16_t *dh = d;
	const float *af = a, *bf = b;
	const int32_t *ai = a, *bi = b;
	const uint16_t *ah = a;

	for (size_t i = 0; i < n; i++) {
		switch (op) {
		case OP_F32_ACC: df[i] = st_add(df[i], af[i]); break;
		case OP_F32_ADD: df[i] = st_add(af[i], bf[i]); break;
		case OP_I32_ACC: di[i] = (int32_t)((uint32_t)di[i] + (uint32_t)ai[i]); break;
		case OP_I32_ADD: di[i] = (int32_t)((uint32_t)ai[i] + (uint32_t)bi[i]); break;
		case OP_F16_ACC: df[i] = st_add(df[i], tally_f16_to_f32(ah[i])); break;
		case OP_BF16_ACC: df[i] = st_add(df[i], tally_bf16_to_f32(ah[i])); break;
		case OP_F16_TO_F32: df[i] = tally_f16_to_f32(ah[i]); break;
		case OP_BF16_TO_F32: df[i] = tally_bf16_to_f32(ah[i]); break;
		case OP_F32_TO_F16: dh[i] = tally_f32_to_f16(st_mul(af[i], sc)); break;
		case OP_F32_TO_BF16: dh[i] = tally_f32_to_bf16(st_mul(af[i], sc)); break;
		case OP_F32_SCALE: df[i] = st_mul(af[i], sc); break;
		default: fail();
		}
	}
}

/* One case: buffers end `gap` elements before a guard page (gap varies the alignment). */
static void check_op(enum op op, enum tally_isa isa, size_t n, size_t dgap, size_t sgap,
		     float sc, uint64_t seed)
{
	const size_t ssz = op_shape[op].ssz, dsz = op_shape[op].dsz;
	struct gbuf d, s0, s1;
	void *ref = malloc(n * dsz + 1), *s0c = malloc(n * ssz + 1), *s1c = malloc(n * ssz + 1);
	uint64_t rs = seed;
	long bad;

	assert_non_null(ref);
	assert_non_null(s0c);
	assert_non_null(s1c);
	gb_alloc(&d, 0, n * dsz, dgap * dsz);
	gb_alloc(&s0, 1, n * ssz, sgap * ssz);
	gb_alloc(&s1, 2, n * ssz, (sgap + 1) * ssz);
	fill(op, d.p, n, &rs, 1);
	fill(op, s0.p, n, &rs, 0);
	fill(op, s1.p, n, &rs, 0);
	memcpy(ref, d.p, n * dsz);
	memcpy(s0c, s0.p, n * ssz);
	memcpy(s1c, s1.p, n * ssz);

	ref_op(op, ref, s0.p, s1.p, n, sc);
	assert_int_equal(tally_sum_set_isa(isa), 0);
	run_op(op, d.p, s0.p, s1.p, n, sc);

	bad = dsz == 2 ? st_diff16(ref, (const uint16_t *)d.p, n) : st_diff32(ref, d.p, n);
	if (bad >= 0)
		fail_msg("%s isa=%s n=%zu gaps=%zu/%zu scale=%g: element %ld differs", op_names[op],
			 tally_sum_isa_name(isa), n, dgap, sgap, (double)sc, bad);
	assert_memory_equal(s0c, s0.p, n * ssz); /* sources untouched */
	assert_memory_equal(s1c, s1.p, n * ssz);
	gb_check_free(&d, op_names[op]);
	gb_check_free(&s0, op_names[op]);
	gb_check_free(&s1, op_names[op]);
	free(ref);
	free(s0c);
	free(s1c);
}

static const size_t gaps[][2] = { { 0, 0 }, { 1, 0 }, { 0, 3 }, { 5, 13 }, { 8, 1 } };
static const float scales[] = { 1.0f, 0.25f, 1.0f / 3.0f, 3.0e4f };

/* The path under test: argv[1] (scalar, avx2, avx512); the program exits 77 (skipped) when
 * this CPU lacks it. */
static enum tally_isa test_isa;

static void test_ops_all(enum op op)
{
	/* the last is above the streaming-store size (8 MiB of f32 dst): only the ops that
	 * write a fresh f32 dst stream */
	static const size_t big[] = { 1001, 65537, (2u << 20) + 37 };
	const int fresh = op == OP_F32_ADD || op == OP_I32_ADD || op == OP_F16_TO_F32 || op == OP_BF16_TO_F32;

	for (size_t n = 0; n <= 200; n++)
		for (size_t g = 0; g < sizeof(gaps) / sizeof(gaps[0]); g++)
			check_op(op, test_isa, n, gaps[g][0], gaps[g][1], scales[(n + g) % 4], n * 131 + g + 1);
	for (size_t b = 0; b < sizeof(big) / sizeof(big[0]) - !fresh; b++)
		check_op(op, test_isa, big[b], b, 2 * b + 1, scales[b % 4], big[b]);
	tally_sum_set_isa(TALLY_ISA_SCALAR);
}

#define OP_TEST(name, op) \
	static void test_##name(void **state) { (void)state; test_ops_all(op); }
OP_TEST(f32_acc, OP_F32_ACC)
OP_TEST(f32_add, OP_F32_ADD)
OP_TEST(i32_acc, OP_I32_ACC)
OP_TEST(i32_add, OP_I32_ADD)
OP_TEST(f16_acc, OP_F16_ACC)
OP_TEST(bf16_acc, OP_BF16_ACC)
OP_TEST(f16_to_f32, OP_F16_TO_F32)
OP_TEST(bf16_to_f32, OP_BF16_TO_F32)
OP_TEST(f32_to_f16, OP_F32_TO_F16)
OP_TEST(f32_to_bf16, OP_F32_TO_BF16)
OP_TEST(f32_scale, OP_F32_SCALE)

/* ---- k-way ---- */
static void check_kway(enum tally_dtype dt, enum tally_isa isa, unsigned k, size_t n, size_t gap,
		       uint64_t seed)
{
	const size_t ssz = tally_dtype_size(dt);
	struct gbuf d, s[TALLY_SUM_MAX_WAYS];
	const void *sp[TALLY_SUM_MAX_WAYS];
	uint32_t *ref = malloc(n * 4 + 4);
	uint64_t rs = seed;
	long bad;

	assert_non_null(ref);
	gb_alloc(&d, 0, n * 4, gap * 4);
	st_fill_f32((float *)d.p, n, &rs); /* garbage the k-way must overwrite */
	for (unsigned j = 0; j < k; j++) {
		gb_alloc(&s[j], 1 + (int)j, n * ssz, (gap + j) % 7 * ssz);
		if (dt == TALLY_DT_I32)
			st_fill_i32((int32_t *)s[j].p, n, &rs);
		else if (ssz == 2)
			st_fill_u16((uint16_t *)s[j].p, n, &rs, dt == TALLY_DT_BF16);
		else
			st_fill_f32((float *)s[j].p, n, &rs);
		sp[j] = s[j].p;
	}
	/* reference: ((s0 + s1) + s2) + ... per element; the first term is taken as bits (k = 1
	 * is an exact copy/widening: no arithmetic may touch it) */
	for (size_t i = 0; i < n; i++) {
		uint32_t first = 0, u = 0;
		float f;

		for (unsigned j = 0; j < k; j++) {
			const void *p = sp[j];
			uint32_t bits = dt == TALLY_DT_F16 ? st_bits(tally_f16_to_f32(((const uint16_t *)p)[i]))
				: dt == TALLY_DT_BF16 ? st_bits(tally_bf16_to_f32(((const uint16_t *)p)[i]))
				: ((const uint32_t *)p)[i];

			if (j == 0)
				first = bits;
			u += bits;
		}
		f = st_float(first);
		for (unsigned j = 1; j < k; j++) {
			const void *p = sp[j];
			float x = dt == TALLY_DT_F16 ? tally_f16_to_f32(((const uint16_t *)p)[i])
				: dt == TALLY_DT_BF16 ? tally_bf16_to_f32(((const uint16_t *)p)[i])
				: ((const float *)p)[i];

			f = st_add(f, x);
		}
		ref[i] = dt == TALLY_DT_I32 ? u : k == 1 ? first : st_bits(f);
	}
	assert_int_equal(tally_sum_set_isa(isa), 0);
	switch (dt) {
	case TALLY_DT_F32: tally_sum_f32_kway((float *)d.p, (const float *const *)sp, k, n); break;
	case TALLY_DT_F16: tally_sum_f16_kway((float *)d.p, (const uint16_t *const *)sp, k, n); break;
	case TALLY_DT_BF16: tally_sum_bf16_kway((float *)d.p, (const uint16_t *const *)sp, k, n); break;
	case TALLY_DT_I32: tally_sum_i32_kway((int32_t *)d.p, (const int32_t *const *)sp, k, n); break;
	default: fail();
	}
	bad = st_diff32(ref, d.p, n);
	if (bad >= 0)
		fail_msg("kway %s isa=%s k=%u n=%zu gap=%zu: element %ld differs", tally_dtype_name(dt),
			 tally_sum_isa_name(isa), k, n, gap, bad);
	gb_check_free(&d, "kway dst");
	for (unsigned j = 0; j < k; j++)
		gb_check_free(&s[j], "kway src");
	free(ref);
}

static void test_kway(void **state)
{
	static const unsigned ks[] = { 1, 2, 3, 8, 64 };

	(void)state;
	for (int dt = 0; dt < TALLY_DT_COUNT; dt++)
		for (size_t ki = 0; ki < sizeof(ks) / sizeof(ks[0]); ki++) {
			unsigned k = ks[ki];

			for (size_t n = 0; n <= 200; n += (k > 8 ? 7 : 1))
				check_kway((enum tally_dtype)dt, test_isa, k, n, n % 5, n + k);
			check_kway((enum tally_dtype)dt, test_isa, k, 4099, 3, k);
			/* above the streaming-store size (8 MiB of dst) */
			if (k <= 2)
				check_kway((enum tally_dtype)dt, test_isa, k, (2u << 20) + 77, 1, k);
		}
	tally_sum_set_isa(TALLY_ISA_SCALAR);
}

/* k outside 1..64 writes nothing. */
static void test_kway_bad_k(void **state)
{
	float d[4] = { 1, 2, 3, 4 }, s[4] = { 5, 6, 7, 8 };
	const float *sp[1] = { s };

	(void)state;
	tally_sum_f32_kway(d, sp, 0, 4);
	tally_sum_f32_kway(d, sp, TALLY_SUM_MAX_WAYS + 1, 4);
	assert_true(d[0] == 1 && d[1] == 2 && d[2] == 3 && d[3] == 4);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_f32_acc),     cmocka_unit_test(test_f32_add),
		cmocka_unit_test(test_i32_acc),     cmocka_unit_test(test_i32_add),
		cmocka_unit_test(test_f16_acc),     cmocka_unit_test(test_bf16_acc),
		cmocka_unit_test(test_f16_to_f32),  cmocka_unit_test(test_bf16_to_f32),
		cmocka_unit_test(test_f32_to_f16),  cmocka_unit_test(test_f32_to_bf16),
		cmocka_unit_test(test_f32_scale),   cmocka_unit_test(test_kway),
		cmocka_unit_test(test_kway_bad_k),
	};

	test_isa = TALLY_ISA_COUNT;
	for (int i = 0; argc > 1 && i < TALLY_ISA_COUNT; i++)
		if (!strcmp(argv[1], tally_sum_isa_name((enum tally_isa)i)))
			test_isa = (enum tally_isa)i;
	/* "avx512-nobf16": the AVX-512 path as on a CPU without AVX512_BF16 */
	if (argc > 1 && !strcmp(argv[1], "avx512-nobf16")) {
		test_isa = TALLY_ISA_AVX512;
		sum_test_set_cpu_mask(~SUM_CPU_BF16);
	}
	if (test_isa == TALLY_ISA_COUNT) {
		fprintf(stderr, "usage: test_sum_ops scalar|avx2|avx512|avx512-nobf16\n");
		return 2;
	}
	if (!tally_sum_isa_supported(test_isa)) {
		printf("this CPU (or build) lacks the %s path: skipped\n", argv[1]);
		return 77; /* meson: skipped */
	}
	return cmocka_run_group_tests(tests, gb_setup, gb_teardown);
}
