/* SPDX-License-Identifier: Apache-2.0
 * test_guard_conf.c — the trust settings both appliances parse (appliance/ctl/actl_guard.c):
 * the CIDR parser, every setting's range and error sentence (which must name the setting),
 * and how whole-appliance quotas become per-core engine settings.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <arpa/inet.h>

#include <cmocka.h>

#include "tally_actl.h"

static void test_cidr(void **state)
{
	struct tally_engine_cidr c;
	(void)state;
	assert_int_equal(tally_actl_parse_cidr("10.1.0.0/16", &c), 0);
	assert_int_equal(c.net, htonl(0x0a010000u));
	assert_int_equal(c.mask, htonl(0xffff0000u));
	assert_int_equal(tally_actl_parse_cidr("192.168.7.9/32", &c), 0);
	assert_int_equal(c.mask, 0xffffffffu);
	assert_int_equal(tally_actl_parse_cidr("10.1.3.0/23", &c), -EDOM);
	assert_int_equal(tally_actl_parse_cidr("10.1.0.1/16", &c), -EDOM);
	static const char *const bad[] = { "", "10.0.0.0", "10.0.0.0/", "10.0.0.0/0",
					   "10.0.0.0/33", "10.0.0/8", "10.0.0.256/32", "x/8",
					   "10.0.0.0/8x", "10.0.0.0/-1", " 10.0.0.0/8" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (tally_actl_parse_cidr(bad[i], &c) != -EINVAL)
			fail_msg("'%s' accepted", bad[i]);
}

static void expect_err(struct tally_actl_guard *g, const char *n, const char *v,
		       const char *want)
{
	char err[256] = "";
	struct tally_actl_guard before = *g;
	assert_int_equal(tally_actl_guard_set(g, n, v, err, sizeof(err)), -EINVAL);
	if (!strstr(err, n) || !strstr(err, want))
		fail_msg("'%s %s': error '%s' does not name the setting or say '%s'", n,
			 v ? v : "(none)", err, want);
	assert_memory_equal(&before, g, sizeof(*g)); /* a bad value changes nothing */
}

static void test_settings(void **state)
{
	struct tally_actl_guard g;
	char err[256];
	(void)state;
	tally_actl_guard_init(&g);
	assert_int_equal(tally_actl_guard_set(&g, "mem", "1G", err, sizeof(err)), 1);
	assert_int_equal(tally_actl_guard_set(&g, "allow", "10.0.0.0/8", err, sizeof(err)), 0);
	assert_int_equal(tally_actl_guard_set(&g, "allow", "192.168.1.0/24", err, sizeof(err)), 0);
	assert_int_equal(g.nallow, 2);
	expect_err(&g, "allow", "10.0.0.1/8", "host bits set; the network is 10.0.0.0/8");
	expect_err(&g, "allow", "10.0.0.0", "expected a network");
	expect_err(&g, "allow", NULL, "needs a value");
	expect_err(&g, "admit-subnet", "fe80::/10", "expected a network");
	for (int i = 2; i < TALLY_ENGINE_MAX_ALLOW; i++)
		assert_int_equal(tally_actl_guard_set(&g, "allow", "172.16.0.0/12", err,
						      sizeof(err)), 0);
	expect_err(&g, "allow", "172.16.0.0/12", "at most 16");
	assert_int_equal(tally_actl_guard_set(&g, "quota-bytes", "64M", err, sizeof(err)), 0);
	assert_int_equal(g.quota_bytes, 64ull << 20);
	assert_int_equal(tally_actl_guard_set(&g, "quota-bytes", "1GiB", err, sizeof(err)), 0);
	assert_int_equal(g.quota_bytes, 1ull << 30);
	expect_err(&g, "quota-bytes", "12X", "a size");
	expect_err(&g, "quota-bytes", "2048G", "0..1099511627776");
	expect_err(&g, "quota-ranks", "1025", "0..1024");
	expect_err(&g, "quota-keys", "-1", "a whole number");
	expect_err(&g, "admit-claims", "65", "0..64");
	expect_err(&g, "ctl-idle-timeout-ms", "5", "100..");
	assert_int_equal(tally_actl_guard_set(&g, "quota-keys", "1001", err, sizeof(err)), 0);
	assert_int_equal(tally_actl_guard_set(&g, "rejoin-timeout-ms", "2500", err, sizeof(err)), 0);
	assert_int_equal(tally_actl_guard_set(&g, "admit-subnet", "10.9.0.0/16", err, sizeof(err)), 0);
	/* whole-appliance quotas split over 4 cores, rounded up */
	struct tally_engine_cfg ec;
	memset(&ec, 0, sizeof(ec));
	ec.mem_budget = 1u << 30;
	tally_actl_guard_engine(&g, &ec, 4);
	assert_int_equal(ec.quota_keys, 251);
	assert_int_equal(ec.quota_bytes, 256u << 20);
	assert_int_equal(ec.rejoin_timeout_ns, 2500000000ull);
	assert_int_equal(ec.nallow, TALLY_ENGINE_MAX_ALLOW);
	assert_int_equal(ec.admit_subnet.net, htonl(0x0a090000u));
	/* defaults: half of a core's memory and key table per job */
	tally_actl_guard_init(&g);
	memset(&ec, 0, sizeof(ec));
	ec.mem_budget = 512u << 20;
	tally_actl_guard_engine(&g, &ec, 4);
	assert_int_equal(ec.quota_bytes, 256u << 20);
	assert_int_equal(ec.quota_keys, 32768);
	assert_int_equal(ec.nallow, 0);
}

/* The worker's error text names the setting that bounds it. */
static void test_hints(void **state)
{
	(void)state;
	assert_non_null(strstr(tally_reason_hint(TALLY_R_QUOTA_BYTES), "--quota-bytes"));
	assert_non_null(strstr(tally_reason_hint(TALLY_R_QUOTA_KEYS), "job-add --quota-keys"));
	assert_non_null(strstr(tally_reason_hint(TALLY_R_NOT_ALLOWED), "--allow"));
	assert_non_null(strstr(tally_reason_hint(TALLY_R_ADMIT_SUBNET), "--admit-subnet"));
	assert_string_equal(tally_reason_hint(TALLY_OK), "");
	assert_string_equal(tally_reason_hint(TALLY_R_COUNT), "");
	for (int r = TALLY_R_MAC_MISMATCH; r < TALLY_R_COUNT; r++)
		assert_string_not_equal(tally_reason_name((enum tally_reason)r), "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cidr),
		cmocka_unit_test(test_settings),
		cmocka_unit_test(test_hints),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
