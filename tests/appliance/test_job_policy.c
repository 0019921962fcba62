/* SPDX-License-Identifier: Apache-2.0
 * test_job_policy.c — the job policy lives on the engine's job (tally_engine_job_policy):
 * a key registered right after it starts with the job's quorum and deadline; a quorum above
 * a key's participants (or 0) means all of them; a per-key policy holds until the next
 * job-wide one, which overrides every key.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tally_engine.h"

#define JOB 3
#define TOKEN 0x55ull

static int x_send(void *ctx, const struct tally_addr *to, const uint8_t *hdr,
		  const void *payload, size_t len)
{
	(void)ctx; (void)to; (void)hdr; (void)payload; (void)len;
	return 0;
}

static uint64_t x_now(void *ctx)
{
	(void)ctx;
	return 1000;
}

static const struct tally_xport_ops xops = { .send = x_send, .now_ns = x_now };

struct quorum_of {
	uint32_t key;
	int quorum;
	uint32_t deadline_us;
};

static int cb_key(void *arg, const struct tally_engine_key_info *ki)
{
	struct quorum_of *q = arg;

	if (ki->job_id == JOB && ki->key == q->key) {
		q->quorum = ki->quorum;
		q->deadline_us = ki->deadline_us;
	}
	return 0;
}

static int quorum(struct tally_engine *e, uint32_t key, uint32_t *deadline_us)
{
	struct quorum_of q = { .key = key, .quorum = -1 };

	assert_int_equal(tally_engine_walk_keys(e, cb_key, &q), 0);
	if (deadline_us)
		*deadline_us = q.deadline_us;
	return q.quorum;
}

static void reg(struct tally_engine *e, uint32_t key, uint16_t participants)
{
	struct tally_register r = { .nelems = 256, .chunk_elems = 256, .participants = participants,
				    .quorum = participants };

	assert_int_equal(tally_engine_key_register(e, JOB, key, &r), 0);
}

static void test_job_policy(void **state)
{
	struct tally_engine_cfg cfg = { 0 };
	int err = 0;
	uint32_t dl = 0;
	(void)state;

	tally_engine_cfg_defaults(&cfg);
	cfg.mem_budget = 16u << 20;
	struct tally_engine *e = tally_engine_create(&cfg, &xops, NULL, &err);
	assert_non_null(e);
	assert_int_equal(tally_engine_job_policy(e, JOB, 1, 1, 0, 0), -ENOENT);
	assert_int_equal(tally_engine_job_add(e, JOB, TOKEN, 4), 0);
	reg(e, 1, 4);
	assert_int_equal(tally_engine_job_policy(e, JOB, 1, 2, 1, 700), 0);
	assert_int_equal(quorum(e, 1, &dl), 2); /* existing keys at once */
	assert_int_equal(dl, 700);
	reg(e, 2, 4);                           /* registered right after: the job's policy */
	assert_int_equal(quorum(e, 2, &dl), 2);
	assert_int_equal(dl, 700);
	reg(e, 3, 1);                           /* quorum above its participants: all of them */
	assert_int_equal(quorum(e, 3, NULL), 1);
	/* a key's own policy, until the next job-wide change */
	assert_int_equal(tally_engine_key_policy(e, JOB, 2, 3, 0), 0);
	assert_int_equal(quorum(e, 2, NULL), 3);
	assert_int_equal(tally_engine_job_policy(e, JOB, 1, 0, 0, 0), 0); /* 0: all */
	assert_int_equal(quorum(e, 1, &dl), 4);
	assert_int_equal(dl, 700);              /* the deadline was left as it was */
	assert_int_equal(quorum(e, 2, NULL), 4);
	reg(e, 4, 4);
	assert_int_equal(quorum(e, 4, NULL), 4);
	tally_engine_destroy(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_job_policy) };
	return cmocka_run_group_tests_name("job_policy", tests, NULL, NULL);
}
