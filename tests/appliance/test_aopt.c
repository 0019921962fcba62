/* SPDX-License-Identifier: Apache-2.0
 * test_aopt.c — the appliances' option table (appliance/opt): no option defined twice for
 * one appliance, every row documented, messages that name the option and its range, --help
 * and --config-save from the table, --config-save read back to the same settings.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tally_aopt.h"

struct conf {
	uint16_t port;
	uint32_t jobs;
	uint64_t pool;
	int open, level;
	char sock[32];
};

static const struct tally_aopt_field fields[] = {
	{ TALLY_AOPT_ID_BASE_PORT, offsetof(struct conf, port), sizeof(uint16_t), 0 },
	{ TALLY_AOPT_ID_MAX_JOBS, offsetof(struct conf, jobs), sizeof(uint32_t), 0 },
	{ TALLY_AOPT_ID_DET_POOL, offsetof(struct conf, pool), sizeof(uint64_t), 0 },
	{ TALLY_AOPT_ID_OPEN_ADMISSION, offsetof(struct conf, open), sizeof(int), 0 },
	{ TALLY_AOPT_ID_LOG_LEVEL, offsetof(struct conf, level), sizeof(int), 0 },
	{ TALLY_AOPT_ID_CTL_SOCKET, offsetof(struct conf, sock), 32, 0 },
};

static const struct tally_aopt_app app = {
	.app = TALLY_AOPT_UDPD, .prog = "test", .fields = fields,
	.nfields = sizeof(fields) / sizeof(fields[0]), .usage = "usage: test\n",
};

static char err[256];

static void test_rows(void **state)
{
	(void)state;
	size_t n;
	const struct tally_aopt *t = tally_aopt_table(&n);

	for (size_t i = 0; i < n; i++) {
		assert_non_null(t[i].help ? t[i].help : t[i].ctl_param);
		assert_true(t[i].apps != 0);
		for (unsigned app = TALLY_AOPT_TALLYD; app <= TALLY_AOPT_UDPD; app <<= 1)
			if (t[i].apps & app) /* the first row of that name is this one */
				assert_ptr_equal(tally_aopt_find(app, t[i].name), &t[i]);
	}
	/* a common option: one row both take */
	assert_ptr_equal(tally_aopt_find(TALLY_AOPT_TALLYD, "max-jobs"),
			 tally_aopt_find(TALLY_AOPT_UDPD, "max-jobs"));
	/* "port": tallyd's DPDK port, tally-udpd's older spelling of base-port */
	assert_string_equal(tally_aopt_find(TALLY_AOPT_UDPD, "port")->name, "base-port");
	assert_string_equal(tally_aopt_find(TALLY_AOPT_TALLYD, "port")->name, "port");
}

static void test_set(void **state)
{
	(void)state;
	struct conf c = { 0 };

	assert_int_equal(tally_aopt_set(&app, &c, "port", "9300", err, sizeof(err)), 0);
	assert_int_equal(c.port, 9300);
	assert_int_equal(tally_aopt_set(&app, &c, "det-pool", "64M", err, sizeof(err)), 0);
	assert_int_equal(c.pool, 64u << 20);
	assert_int_equal(tally_aopt_set(&app, &c, "log-level", "error", err, sizeof(err)), 0);
	assert_int_equal(c.level, 3);
	assert_int_not_equal(tally_aopt_set(&app, &c, "max-jobs", "65", err, sizeof(err)), 0);
	assert_string_equal(err, "'max-jobs 65': the number of jobs must be a whole number in "
			    "1..64");
	assert_int_not_equal(tally_aopt_set(&app, &c, "open", "maybe", err, sizeof(err)), 0);
	assert_string_equal(err, "'open maybe': say on or off");
	assert_int_not_equal(tally_aopt_set(&app, &c, "mtu", "1500", err, sizeof(err)), 0);
	assert_non_null(strstr(err, "unknown setting 'mtu' (test --help lists them)"));
	assert_int_not_equal(tally_aopt_set(&app, &c, "log-level", "loud", err, sizeof(err)), 0);
	assert_non_null(strstr(err, "say emerg, alert, crit, err, warning, notice, info or debug"));
}

static void test_help_and_save(void **state)
{
	(void)state;
	struct conf c, d;
	char *buf = NULL, path[64];
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	memset(&c, 0, sizeof(c)); /* padding too: compared whole below */
	memset(&d, 0, sizeof(d));
	c.port = 9170, c.jobs = 16, c.pool = 4u << 20, c.level = 6;

	tally_aopt_usage(&app, &c, f);
	fclose(f);
	assert_non_null(strstr(buf, "  --max-jobs N          concurrent jobs, 1..64"));
	assert_non_null(strstr(buf, "  --det-pool SIZE       deterministic staging pool per core (4M)"));
	assert_non_null(strstr(buf, "Trust (THREAT_MODEL.md):\n  --allow CIDR"));
	assert_null(strstr(buf, "--mtu")); /* tallyd's */
	free(buf);
	snprintf(c.sock, sizeof(c.sock), "/tmp/t.sock");
	c.open = 1;
	snprintf(path, sizeof(path), "/tmp/aopt-test-%d.conf", (int)getpid());
	f = fopen(path, "w");
	assert_non_null(f);
	tally_aopt_save(&app, &c, f);
	fclose(f);
	assert_int_equal(tally_aopt_file(&app, &d, path, err, sizeof(err)), 0);
	unlink(path);
	assert_memory_equal(&c, &d, sizeof(c));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rows),
		cmocka_unit_test(test_set),
		cmocka_unit_test(test_help_and_save),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
