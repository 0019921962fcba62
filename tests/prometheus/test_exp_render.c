/* SPDX-License-Identifier: Apache-2.0
 * test_exp_render.c — tally-exporter's rendering on canned control-plane answers: every
 * family has one HELP and one TYPE before its samples, names are valid, counters end in
 * _total, units are converted, labels escaped, and counters the exporter has never heard
 * of (a new engine counter, a new per-reason block) appear without a code change.
 */
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ctl_exp.h"

static const char *STATUS = "{\"version\":\"0.1.0\",\"uptime_s\":12.5,\"transport\":\"kernel-udp\","
	"\"draining\":false,\"jobs\":1,\"cores\":[{\"core\":0,\"running\":true}],"
	"\"memory\":{\"budget_bytes\":1000,\"used_bytes\":950}}";
static const char *STATS = "{\"interval_s\":1.0,\"rates\":{\"rx_pps\":5.0},\"totals\":{\"pushes\":9},"
	"\"cores\":[{\"core\":0,\"pushes\":4,\"push_bytes\":4096,\"zz_new_counter\":7,"
	"\"drops\":{\"bad_crc\":2,\"wrong_token\":0},\"frame_drops\":{\"not_ip\":1},"
	"\"new_reasons\":{\"why\":3}},"
	"{\"core\":1,\"pushes\":5,\"push_bytes\":5120,\"zz_new_counter\":0,"
	"\"drops\":{\"bad_crc\":0,\"wrong_token\":1},\"frame_drops\":{\"not_ip\":0},"
	"\"new_reasons\":{\"why\":0}}],"
	"\"ports\":[{\"port\":0,\"rx_missed\":11}]}";
static const char *JOBS = "[{\"job_id\":7,\"world_size\":2,\"workers\":2,\"keys\":4,"
	"\"admission\":\"op\\\"en\",\"policy\":{\"quorum\":1,\"deadline_us\":5000}}]";
static const char *WORKERS = "[{\"job_id\":7,\"rank\":1,\"addr\":\"127.0.0.1:5\",\"core\":0,"
	"\"last_heard_ms\":2500,\"pkts\":10,\"rx_bytes\":100}]";
static const char *STUCK = "[{\"job_id\":7,\"key\":1,\"round\":3,\"chunk\":0,\"elems\":8,\"core\":0,"
	"\"age_ms\":4000,\"have\":1,\"need\":2,\"missing_count\":1,\"missing\":[1]},"
	"{\"job_id\":7,\"key\":2,\"round\":3,\"chunk\":0,\"elems\":8,\"core\":1,"
	"\"age_ms\":3000,\"have\":1,\"need\":2,\"missing_count\":1,\"missing\":[1]}]";

static char *text;

static json_t *j(const char *s)
{
	json_error_t e;
	json_t *v = json_loads(s, 0, &e);
	if (!v)
		fprintf(stderr, "bad canned JSON: %s\n", e.text);
	return v;
}

static int setup(void **state)
{
	struct ctl_exp_snap s = { .up = 1, .query_s = 0.001 };
	struct ctl_exp_self self = { .refreshes = 3 };
	struct ctl_exp_buf b = { 0 };
	(void)state;

	s.status = j(STATUS);
	s.stats = j(STATS);
	s.jobs = j(JOBS);
	s.workers = j(WORKERS);
	s.stuck = j(STUCK);
	if (ctl_exp_render(&s, &self, "node\"1", &b))
		return -1;
	ctl_exp_snap_clear(&s);
	text = b.p;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	free(text);
	return 0;
}

static void has(const char *line)
{
	if (!strstr(text, line)) {
		fprintf(stderr, "missing: %s\n---\n%s", line, text);
		fail();
	}
}

static int valid_name(const char *s, size_t n)
{
	if (!n || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
			return 0;
	return 1;
}

static void test_format(void **state)
{
	char help[128] = "", type[128] = "", kind[16];
	unsigned fams = 0;
	(void)state;

	for (char *l = text, *nl; *l; l = nl + 1) {
		nl = strchr(l, '\n');
		assert_non_null(nl);
		*nl = '\0';
		if (!strncmp(l, "# HELP ", 7)) {
			assert_int_equal(sscanf(l, "# HELP %127s", help), 1);
		} else if (!strncmp(l, "# TYPE ", 7)) {
			assert_int_equal(sscanf(l, "# TYPE %127s %15s", type, kind), 2);
			assert_string_equal(type, help); /* HELP then TYPE, same family */
			assert_true(valid_name(type, strlen(type)));
			assert_int_equal(strncmp(type, "tally_", 6), 0);
			size_t n = strlen(type);
			int total = n > 6 && !strcmp(type + n - 6, "_total");
			if (!strcmp(kind, "counter"))
				assert_true(total);
			else
				assert_true(!strcmp(kind, "gauge") && !total);
			fams++;
		} else {
			size_t n = strcspn(l, "{ ");
			assert_true(valid_name(l, n));
			assert_int_equal(n, strlen(type)); /* a sample of the current family */
			assert_int_equal(strncmp(l, type, n), 0);
			assert_non_null(strstr(l, "{appliance=\"node\\\"1\""));
		}
		*nl = '\n';
	}
	assert_true(fams > 20);
}

static void test_generic(void **state)
{
	(void)state;
	has("tally_zz_new_counter_total{appliance=\"node\\\"1\",core=\"0\"} 7\n");
	has("tally_new_reasons_total{appliance=\"node\\\"1\",core=\"0\",reason=\"why\"} 3\n");
	has("tally_drops_total{appliance=\"node\\\"1\",core=\"1\",reason=\"wrong_token\"} 1\n");
	has("tally_frame_drops_total{appliance=\"node\\\"1\",core=\"0\",reason=\"not_ip\"} 1\n");
	has("tally_pushes_total{appliance=\"node\\\"1\",core=\"1\"} 5\n");
	has("tally_push_bytes_total{appliance=\"node\\\"1\",core=\"0\"} 4096\n");
	has("tally_port_rx_missed_total{appliance=\"node\\\"1\",port=\"0\"} 11\n");
	assert_null(strstr(text, "rx_pps")); /* rates are PromQL's job */
}

static void test_gauges_units(void **state)
{
	(void)state;
	has("# TYPE tally_up gauge\ntally_up{appliance=\"node\\\"1\"} 1\n");
	has("tally_uptime_seconds{appliance=\"node\\\"1\"} 12.5\n");
	has("tally_memory_used_bytes{appliance=\"node\\\"1\"} 950\n");
	has("tally_memory_budget_bytes{appliance=\"node\\\"1\"} 1000\n");
	has("tally_core_running{appliance=\"node\\\"1\",core=\"0\"} 1\n");
	has("tally_info{appliance=\"node\\\"1\",version=\"0.1.0\",transport=\"kernel-udp\"} 1\n");
	has("tally_job_workers{appliance=\"node\\\"1\",job_id=\"7\"} 2\n");
	has("tally_job_policy_deadline_seconds{appliance=\"node\\\"1\",job_id=\"7\"} 0.005\n");
	has("tally_job_info{appliance=\"node\\\"1\",job_id=\"7\",admission=\"op\\\"en\"} 1\n");
	has("tally_worker_last_heard_seconds{appliance=\"node\\\"1\",job_id=\"7\",rank=\"1\",core=\"0\"} 2.5\n");
	has("tally_worker_pkts_total{appliance=\"node\\\"1\",job_id=\"7\",rank=\"1\",core=\"0\"} 10\n");
}

static void test_stuck(void **state)
{
	(void)state;
	has("tally_stuck_chunks{appliance=\"node\\\"1\",job_id=\"7\"} 2\n");
	has("tally_stuck_chunk_max_age_seconds{appliance=\"node\\\"1\",job_id=\"7\"} 4\n");
	has("tally_stuck_rank_chunks{appliance=\"node\\\"1\",job_id=\"7\",rank=\"1\"} 2\n");
	has("tally_stuck_rank_max_age_seconds{appliance=\"node\\\"1\",job_id=\"7\",rank=\"1\"} 4\n");
}

static void test_down(void **state)
{
	struct ctl_exp_snap s = { 0 };
	struct ctl_exp_buf b = { 0 };
	(void)state;

	assert_int_equal(ctl_exp_render(&s, NULL, "a", &b), 0);
	assert_non_null(strstr(b.p, "# HELP tally_up "));
	assert_non_null(strstr(b.p, "tally_up{appliance=\"a\"} 0\n"));
	ctl_exp_buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_generic),
		cmocka_unit_test(test_gauges_units),
		cmocka_unit_test(test_stuck),
		cmocka_unit_test(test_down),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
