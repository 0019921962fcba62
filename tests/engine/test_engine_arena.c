/* SPDX-License-Identifier: Apache-2.0
 * test_engine_arena.c — the per-core arena keys come from (first fit, coalescing, exact
 * accounting), the engine calling cfg.alloc at create time only (REGISTER, open-admission
 * JOIN and removal allocate nothing), and the RESULT buffer rule through the optional
 * transport hooks: a buffer the transport still references is not reused for round r+2,
 * and a removed key whose buffers are referenced keeps its memory until the poll after
 * they are released.
 */
#include "harness.h"

#include <errno.h>

#include "engine_arena.h"

/* ---- the allocator alone ---- */

#define A_SIZE (1u << 20)
#define A_N 256

static uint8_t a_mem[A_SIZE] __attribute__((aligned(64)));

static void fill(uint8_t *p, size_t n, uint8_t v)
{
	memset(p, v, n);
}

static int intact(const uint8_t *p, size_t n, uint8_t v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return 0;
	return 1;
}

static void test_arena_random(void **state)
{
	(void)state;
	struct engine_arena a;
	uint8_t *ptr[A_N] = { 0 };
	size_t len[A_N] = { 0 }, charged[A_N] = { 0 }, sum = 0;
	uint64_t x = 88172645463325252ull;

	engine_arena_init(&a, a_mem, A_SIZE);
	assert_int_equal(engine_arena_check(&a), 0);
	for (int step = 0; step < 20000; step++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		uint32_t i = (uint32_t)(x % A_N);
		if (ptr[i]) {
			assert_true(intact(ptr[i], len[i], (uint8_t)i));
			engine_arena_free(&a, ptr[i]);
			sum -= charged[i];
			ptr[i] = NULL;
		} else {
			len[i] = 1 + (size_t)((x >> 20) % 20000);
			ptr[i] = engine_arena_alloc(&a, len[i], &charged[i]);
			if (ptr[i]) {
				assert_int_equal((uintptr_t)ptr[i] % 64, 0);
				assert_true(charged[i] >= len[i] + 64);
				assert_true(charged[i] < len[i] + 64 + 192);
				fill(ptr[i], len[i], (uint8_t)i);
				sum += charged[i];
			}
		}
		assert_int_equal(a.used, sum);
		if (step % 64 == 0)
			assert_int_equal(engine_arena_check(&a), 0);
	}
	for (uint32_t i = 0; i < A_N; i++) {
		if (ptr[i]) {
			assert_true(intact(ptr[i], len[i], (uint8_t)i));
			engine_arena_free(&a, ptr[i]);
		}
	}
	assert_int_equal(engine_arena_check(&a), 0);
	assert_int_equal(a.used, 0);
	/* everything coalesced back: the whole region is one block again */
	size_t c;
	void *all = engine_arena_alloc(&a, A_SIZE - 64, &c);
	assert_non_null(all);
	assert_int_equal(c, A_SIZE);
	engine_arena_free(&a, all);
	assert_int_equal(engine_arena_check(&a), 0);
}

static void test_arena_edges(void **state)
{
	(void)state;
	struct engine_arena a;
	size_t c = 0;

	engine_arena_init(&a, a_mem, 100); /* smaller than one block */
	assert_null(engine_arena_alloc(&a, 1, &c));
	engine_arena_init(&a, NULL, 0);
	assert_null(engine_arena_alloc(&a, 1, &c));
	engine_arena_free(&a, NULL);

	engine_arena_init(&a, a_mem, 4096);
	assert_null(engine_arena_alloc(&a, 4096, &c)); /* no room for the header */
	void *p = engine_arena_alloc(&a, 4096 - 64, &c);
	assert_non_null(p);
	assert_int_equal(c, 4096);
	assert_null(engine_arena_alloc(&a, 1, &c));
	engine_arena_free(&a, p);
	/* three blocks; freeing the middle then its neighbours merges all three */
	void *b1 = engine_arena_alloc(&a, 64, NULL), *b2 = engine_arena_alloc(&a, 64, NULL);
	void *b3 = engine_arena_alloc(&a, 64, NULL);
	assert_non_null(b1);
	assert_non_null(b2);
	assert_non_null(b3);
	engine_arena_free(&a, b2);
	assert_int_equal(engine_arena_check(&a), 0);
	engine_arena_free(&a, b1);
	assert_int_equal(engine_arena_check(&a), 0);
	engine_arena_free(&a, b3);
	assert_int_equal(engine_arena_check(&a), 0);
	assert_int_equal(a.used, 0);
	assert_non_null(engine_arena_alloc(&a, 4096 - 64, &c));
}

/* ---- the engine allocates at create time only ---- */

static unsigned n_alloc, n_free;

static void *count_alloc(void *actx, size_t size, size_t align)
{
	(void)actx;
	n_alloc++;
	return aligned_alloc(align, (size + align - 1) / align * align);
}

static void count_free(void *actx, void *p)
{
	(void)actx;
	n_free++;
	free(p);
}

static void test_alloc_only_at_create(void **state)
{
	(void)state;
	struct h h;
	struct tally_engine_cfg cfg;

	h_init_cfg(&cfg);
	cfg.mem_budget = 4u << 20;
	cfg.max_jobs = 2;
	cfg.open_admission = 1;
	cfg.alloc = count_alloc;
	cfg.free = count_free;
	n_alloc = n_free = 0;
	h_start(&h, &cfg);
	unsigned at_create = n_alloc;
	assert_true(at_create >= 1);
	struct tally_register r = h_reg(3000, 1024, TALLY_DT_BF16, 2, 2);
	for (int pass = 0; pass < 3; pass++) {
		/* open admission: the first JOIN creates the job */
		assert_int_equal(h_join(&h, 0, 2), TALLY_OK);
		assert_int_equal(h_join(&h, 1, 2), TALLY_OK);
		for (uint32_t k = 0; k < 8; k++)
			assert_int_equal(h_register(&h, 0, k, &r), TALLY_OK);
		assert_true(tally_engine_mem_used(h.e) > 8 * 2 * 3000 * 6);
		assert_int_equal(tally_engine_job_remove(h.e, H_JOB), 0);
		assert_int_equal(tally_engine_mem_used(h.e), 0);
		h_clear(&h);
	}
	assert_int_equal(n_alloc, at_create);
	assert_int_equal(n_free, 0);
	/* the budget still bounds it: a key bigger than the arena is NO_MEMORY */
	assert_int_equal(h_join(&h, 0, 2), TALLY_OK);
	struct tally_register big = h_reg(1u << 20, 1024, TALLY_DT_F32, 2, 2);
	H_EXPECT_REJECT(&h, h_register(&h, 0, 99, &big), TALLY_R_NO_MEMORY, 1);
	h_stop(&h);
	assert_int_equal(n_free, n_alloc);
}

/* ---- the RESULT buffer rule through the transport hooks ---- */

struct fx_buf {
	int refs;                  /* copies "queued" in the fake transport */
	int inited;
	const void *payload;
};

static struct fx_buf *fx_held[64];
static unsigned fx_nheld;

static void fx_init(void *ctx, void *buf, const void *payload, size_t len)
{
	(void)ctx;
	(void)len;
	struct fx_buf *b = buf;
	assert_int_equal(b->refs, 0); /* zeroed by the engine */
	b->inited = 1;
	b->payload = payload;
}

static int fx_send_buf(void *ctx, const struct tally_addr *to, const uint8_t *hdr,
		       const void *payload, size_t len, void *buf)
{
	struct fx_buf *b = buf;
	assert_true(b->inited);
	assert_ptr_equal(b->payload, payload);
	b->refs++;
	assert_true(fx_nheld < 64);
	fx_held[fx_nheld++] = b;
	return cap_send(ctx, to, hdr, payload, len);
}

static int fx_busy(void *ctx, const void *buf)
{
	(void)ctx;
	return ((const struct fx_buf *)buf)->refs > 0;
}

static void fx_release_all(void)
{
	for (unsigned i = 0; i < fx_nheld; i++)
		fx_held[i]->refs--;
	fx_nheld = 0;
}

static const struct tally_xport_ops fx_ops = {
	.send = cap_send,
	.now_ns = cap_now,
	.buf_size = sizeof(struct fx_buf),
	.buf_init = fx_init,
	.send_buf = fx_send_buf,
	.buf_busy = fx_busy,
};

static void fx_start(struct h *h)
{
	int err = 0;
	memset(h, 0, sizeof(*h));
	h_init_cfg(&h->cfg);
	h->cap.now = 1000000000ull;
	h->e = tally_engine_create(&h->cfg, &fx_ops, &h->cap, &err);
	assert_non_null(h->e);
	fx_nheld = 0;
}

static void test_busy_buffer_not_reused(void **state)
{
	(void)state;
	struct h h;
	float a[256], b[256];

	fx_start(&h);
	struct tally_register r = h_reg(256, 256, TALLY_DT_F32, 2, 2);
	h_setup(&h, 2, 1, &r);
	for (int i = 0; i < 256; i++) {
		a[i] = (float)i;
		b[i] = 1.0f;
	}
	for (uint32_t rd = 0; rd < 2; rd++) {
		assert_int_equal(h_push(&h, 0, 1, rd, 0, TALLY_DT_F32, a, 256), TALLY_OK);
		assert_int_equal(h_push(&h, 1, 1, rd, 0, TALLY_DT_F32, b, 256), TALLY_OK);
	}
	assert_int_equal(fx_nheld, 4);
	assert_int_equal(h_count(&h, TALLY_OP_RESULT, 1, 0, 0), 2);
	/* round 0's copies are still referenced: round 2 may not start in that buffer */
	float sum0[256];
	memcpy(sum0, fx_held[0]->payload, sizeof(sum0));
	H_EXPECT_REJECT(&h, h_push(&h, 0, 1, 2, 0, TALLY_DT_F32, b, 256), TALLY_R_TOO_EARLY, 0);
	assert_int_equal(tally_engine_stats(h.e)->result_busy, 1);
	assert_memory_equal(fx_held[0]->payload, sum0, sizeof(sum0));
	fx_release_all();
	assert_int_equal(h_push(&h, 0, 1, 2, 0, TALLY_DT_F32, b, 256), TALLY_OK);
	assert_int_equal(tally_engine_stats(h.e)->result_busy, 1);

	/* a key removed while a copy is referenced keeps its memory until a poll after */
	assert_int_equal(h_push(&h, 1, 1, 2, 0, TALLY_DT_F32, b, 256), TALLY_OK);
	assert_int_equal(fx_nheld, 2);
	size_t used = tally_engine_mem_used(h.e);
	assert_true(used > 0);
	assert_int_equal(tally_engine_job_remove(h.e, H_JOB), 0);
	assert_int_equal(tally_engine_mem_used(h.e), used);
	tally_engine_poll(h.e);
	assert_int_equal(tally_engine_mem_used(h.e), used);
	fx_release_all();
	tally_engine_poll(h.e);
	assert_int_equal(tally_engine_mem_used(h.e), 0);
	h_stop(&h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_arena_random),
		cmocka_unit_test(test_arena_edges),
		cmocka_unit_test(test_alloc_only_at_create),
		cmocka_unit_test(test_busy_buffer_not_reused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
