/* SPDX-License-Identifier: Apache-2.0
 * test_auth_client.c — the worker side of a keyed JOIN against unsigned ERRORs (issue 33):
 * an unsigned ERROR bad_mac answering the JOIN (anyone can send one) raced ahead of the
 * real, signed JOIN_OK no longer ends the session: the JOIN succeeds and the forged ERROR
 * is counted (join_unsigned_errors). With no signed answer at all (the appliance really
 * cannot check our key), the JOIN fails with that reason once TALLY_CLIENT_UNSIGNED_GRACE_MS
 * has passed, naming TALLY_AUTH_KEY_FILE. Scripted appliance cores on the simulated net.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fake_appliance.h"
#include "simnet.h"
#include "tally_auth.h"
#include "tally_client.h"

#define MS 1000000ull

static const uint8_t KEY[32] = { 7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
				 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31 };

struct fx {
	struct simnet *net;
	struct fake_app fake[2];
	struct tally_auth *auth[2];
	struct tally_client *c;
};

static struct fx *fx_new(void)
{
	struct fx *x = calloc(1, sizeof(*x));
	struct simnet_cfg nc = { .seed = 3, .nclients = 1, .nengines = 2 };
	struct tally_client_cfg cfg = { .job_id = 7, .token = 0x1234, .rank = 0,
					.world_size = 1, .auth = 1 };
	int err;

	assert_non_null(x);
	nc.up.delay_ns = 20000;
	nc.down.delay_ns = 20000;
	x->net = simnet_create(&nc);
	assert_non_null(x->net);
	for (unsigned i = 0; i < 2; i++) {
		fake_attach(&x->fake[i], x->net, i, 2);
		x->auth[i] = tally_auth_new();
		assert_non_null(x->auth[i]);
		assert_int_equal(tally_auth_set_key(x->auth[i], KEY), 0);
		x->fake[i].auth = x->auth[i];
	}
	memcpy(cfg.auth_key, KEY, sizeof(KEY));
	x->c = tally_client_create(&cfg, simnet_ops(),
				   simnet_ctx(x->net, simnet_client_node(x->net, 0)), &err);
	assert_int_equal(err, 0);
	assert_non_null(x->c);
	simnet_attach_client(x->net, 0, x->c);
	return x;
}

static void fx_free(struct fx *x)
{
	tally_client_destroy(x->c);
	simnet_destroy(x->net);
	for (unsigned i = 0; i < 2; i++)
		tally_auth_free(x->auth[i]);
	free(x);
}

/* The forged unsigned ERROR arrives first (same link, sent first), the signed JOIN_OK
 * right after it: the JOIN succeeds on every core. */
static void test_unsigned_error_raced(void **state)
{
	(void)state;
	struct fx *x = fx_new();

	x->fake[0].unsigned_join_error = TALLY_R_BAD_MAC;
	x->fake[1].unsigned_join_error = TALLY_R_BAD_MAC;
	assert_int_equal(tally_client_join(x->c, 5000), 0);
	const struct tally_client_stats *st = tally_client_stats(x->c);
	assert_true(st->join_unsigned_errors >= 2); /* one per core at least */
	assert_true(st->auth_verified >= 2);        /* the signed JOIN_OKs */
	fx_free(x);
}

/* Only the unsigned ERROR (a wrong key): the JOIN fails bad_mac after the grace, not at
 * once and not at the 5 s deadline, with the setting named. */
static void test_unsigned_error_alone(void **state)
{
	(void)state;
	struct fx *x = fx_new();

	x->fake[0].unsigned_join_error = TALLY_R_BAD_MAC;
	x->fake[0].join_no_ok = true;
	uint64_t t0 = simnet_now(x->net);
	int rc = tally_client_join(x->c, 5000);
	uint64_t took = simnet_now(x->net) - t0;
	assert_int_not_equal(rc, 0);
	assert_int_not_equal(rc, -ETIMEDOUT);
	assert_true(took >= TALLY_CLIENT_UNSIGNED_GRACE_MS * MS);
	assert_true(took < 2 * TALLY_CLIENT_UNSIGNED_GRACE_MS * MS);
	assert_non_null(strstr(tally_client_strerror(x->c), "bad_mac"));
	assert_non_null(strstr(tally_client_strerror(x->c), "TALLY_AUTH_KEY_FILE"));
	assert_true(tally_client_stats(x->c)->join_unsigned_errors >= 1);
	fx_free(x);
}

/* A JOIN deadline shorter than the grace: the unsigned reason is the answer at the
 * deadline (not a bare timeout). */
static void test_unsigned_error_short_deadline(void **state)
{
	(void)state;
	struct fx *x = fx_new();

	x->fake[0].unsigned_join_error = TALLY_R_AUTH_REQUIRED;
	x->fake[0].join_no_ok = true;
	int rc = tally_client_join(x->c, 200);
	assert_int_not_equal(rc, 0);
	assert_int_not_equal(rc, -ETIMEDOUT);
	assert_non_null(strstr(tally_client_strerror(x->c), "auth_required"));
	fx_free(x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unsigned_error_raced),
		cmocka_unit_test(test_unsigned_error_alone),
		cmocka_unit_test(test_unsigned_error_short_deadline),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
