/* SPDX-License-Identifier: Apache-2.0
 * test_ctl_rpc.c — the schema, parameter validation, JSON-RPC dispatch and config replay,
 * against the fake backend (no socket).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fake_backend.h"

static struct fake F;
static struct tally_ctl_backend B;

static int setup(void **state)
{
	(void)state;
	memset(&F, 0, sizeof(F));
	fake_backend_init(&F, &B);
	return 0;
}

/* Sends {"jsonrpc":"2.0","id":1,"method":method,"params":params_text}. */
static json_t *call(const char *method, const char *params_text)
{
	json_t *req = json_pack("{s:s, s:i, s:s}", "jsonrpc", "2.0", "id", 1, "method", method);
	if (params_text) {
		json_t *p = json_loads(params_text, JSON_DECODE_ANY, NULL);
		assert_non_null(p);
		json_object_set_new(req, "params", p);
	}
	json_t *resp = tally_ctl_handle(&B, req);
	json_decref(req);
	assert_non_null(resp);
	assert_string_equal(json_string_value(json_object_get(resp, "jsonrpc")), "2.0");
	return resp;
}

static json_int_t err_code(const json_t *resp)
{
	const json_t *e = json_object_get(resp, "error");
	assert_non_null(e);
	assert_null(json_object_get(resp, "result"));
	return json_integer_value(json_object_get(e, "code"));
}

static const char *err_msg(const json_t *resp)
{
	return json_string_value(json_object_get(json_object_get(resp, "error"), "message"));
}

static json_t *ok(json_t *resp)
{
	if (json_object_get(resp, "error"))
		fail_msg("unexpected error: %s", err_msg(resp));
	assert_int_equal(json_integer_value(json_object_get(resp, "id")), 1);
	return json_object_get(resp, "result");
}

static void expect_error(const char *method, const char *params, int code, const char *needle)
{
	json_t *r = call(method, params);
	assert_int_equal(err_code(r), code);
	if (needle && !strstr(err_msg(r), needle))
		fail_msg("%s %s: message '%s' lacks '%s'", method, params ? params : "",
			 err_msg(r), needle);
	json_decref(r);
}

static void test_schema_is_consistent(void **state)
{
	size_t n;
	const struct tally_ctl_method *m = tally_ctl_methods(&n);
	(void)state;

	assert_int_equal(n, TALLY_CTL_M_COUNT);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(m[i].id, i);
		assert_non_null(strchr(m[i].name, '_')); /* object_verb */
		assert_ptr_equal(tally_ctl_method_by_name(m[i].name), &m[i]);
		assert_ptr_equal(tally_ctl_method_by_cmd(m[i].cmd), &m[i]);
		assert_true(strlen(m[i].help) > 5 && strlen(m[i].result) > 5);
		for (unsigned k = 0; k < m[i].nparams; k++) {
			const struct tally_ctl_param *p = &m[i].params[k];
			assert_true(strlen(p->help) > 3);
			assert_ptr_equal(tally_ctl_param_find(&m[i], p->name), p);
			if (p->type == TALLY_CTL_T_UINT)
				assert_true(p->min <= p->max);
			if (p->def) { /* every default is valid for its own parameter */
				char msg[128];
				json_t *v = tally_ctl_param_parse(p, p->def, msg, sizeof(msg));
				assert_non_null(v);
				json_decref(v);
			}
		}
		/* every method is served by the fake */
		assert_non_null(B.handlers[i]);
	}
	assert_null(tally_ctl_method_by_name("no_such"));
	assert_null(tally_ctl_method_by_cmd("no-such"));
}

static void test_every_method(void **state)
{
	static const struct { const char *method, *params; } calls[] = {
		{ "job_add", "{\"job_id\": 1, \"token\": \"0xffffffffffffffff\", \"world_size\": 4}" },
		{ "appliance_status", NULL },
		{ "stats_get", "{}" },
		{ "stats_reset", NULL },
		{ "jobs_list", NULL },
		{ "job_get", "{\"job_id\": 1}" },
		{ "keys_list", "{\"job_id\": 1}" },
		{ "chunks_stuck", "{\"threshold_ms\": 50}" },
		{ "workers_list", NULL },
		{ "job_set_policy", "{\"job_id\": 1, \"quorum\": 3, \"deadline_us\": 500}" },
		{ "log_set_level", "{\"level\": \"debug\"}" },
		{ "config_save", NULL },
		{ "appliance_drain", NULL },
		{ "job_evict", "{\"job_id\": 1}" },
		{ "appliance_shutdown", "{\"drain\": false}" },
	};
	(void)state;

	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
		json_t *r = call(calls[i].method, calls[i].params);
		ok(r);
		json_decref(r);
	}
	for (int i = 0; i < TALLY_CTL_M_COUNT; i++)
		assert_int_equal(F.calls[i], 1);
	/* effects seen by the backend, with defaults filled in */
	assert_true(F.draining);
	assert_true(F.shutdown);
	assert_false(F.shutdown_drain);
	assert_string_equal(F.level, "debug");
	assert_false(F.jobs[0].used); /* evicted */
	assert_int_equal(F.jobs[0].token, 0xffffffffffffffffull);
	assert_int_equal(F.jobs[0].quorum, 3);
	assert_int_equal(F.jobs[0].deadline_us, 500);
}

static void test_defaults_reach_handler(void **state)
{
	(void)state;
	json_t *r = call("chunks_stuck", NULL);
	/* the fake answers age = threshold + 5: default threshold 1000 */
	assert_int_equal(json_integer_value(json_object_get(json_array_get(ok(r), 0), "age_ms")),
			 1005);
	json_decref(r);
	r = call("appliance_shutdown", NULL);
	ok(r);
	assert_true(F.shutdown_drain); /* default drain=true */
	json_decref(r);
}

static void test_invalid_requests(void **state)
{
	static const char *bad[] = {
		"42", "\"x\"", "{\"id\": 1, \"method\": \"jobs_list\"}",
		"{\"jsonrpc\": \"1.0\", \"id\": 1, \"method\": \"jobs_list\"}",
		"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": 5}",
		"{\"jsonrpc\": \"2.0\", \"id\": {\"a\": 1}, \"method\": \"jobs_list\"}",
		"{\"jsonrpc\": \"2.0\", \"id\": 1}", "[]",
	};
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *req = json_loads(bad[i], JSON_DECODE_ANY, NULL);
		json_t *r = tally_ctl_handle(&B, req);
		assert_non_null(r);
		assert_int_equal(err_code(r), TALLY_CTL_E_INVALID_REQUEST);
		json_decref(r);
		json_decref(req);
	}
	for (int i = 0; i < TALLY_CTL_M_COUNT; i++)
		assert_int_equal(F.calls[i], 0);
}

static void test_method_not_found(void **state)
{
	(void)state;
	expect_error("jobs_delete_all", NULL, TALLY_CTL_E_METHOD_NOT_FOUND, "jobs_delete_all");
	expect_error("", NULL, TALLY_CTL_E_METHOD_NOT_FOUND, NULL);
}

static void test_invalid_params(void **state)
{
	(void)state;
	expect_error("job_get", NULL, TALLY_CTL_E_INVALID_PARAMS, "job_id");
	expect_error("job_get", "[1]", TALLY_CTL_E_INVALID_PARAMS, "object");
	expect_error("job_get", "{\"job_id\": \"7\"}", TALLY_CTL_E_INVALID_PARAMS, "job_id");
	expect_error("job_get", "{\"job_id\": -1}", TALLY_CTL_E_INVALID_PARAMS, "job_id");
	expect_error("job_get", "{\"job_id\": 4294967296}", TALLY_CTL_E_INVALID_PARAMS, "job_id");
	expect_error("job_get", "{\"job_id\": 1, \"jobid\": 1}", TALLY_CTL_E_INVALID_PARAMS,
		     "jobid");
	expect_error("job_get", "{\"job_id\": 1.5}", TALLY_CTL_E_INVALID_PARAMS, "job_id");
	expect_error("job_add", "{\"job_id\": 1, \"token\": 1, \"world_size\": 0}",
		     TALLY_CTL_E_INVALID_PARAMS, "world_size");
	expect_error("job_add", "{\"job_id\": 1, \"token\": 1, \"world_size\": 1025}",
		     TALLY_CTL_E_INVALID_PARAMS, "world_size");
	expect_error("job_add", "{\"job_id\": 1, \"token\": \"0x1g\", \"world_size\": 2}",
		     TALLY_CTL_E_INVALID_PARAMS, "token");
	expect_error("job_add", "{\"job_id\": 1, \"token\": \"18446744073709551616\", "
		     "\"world_size\": 2}", TALLY_CTL_E_INVALID_PARAMS, "token");
	expect_error("job_add", "{\"job_id\": 1, \"token\": -5, \"world_size\": 2}",
		     TALLY_CTL_E_INVALID_PARAMS, "token");
	expect_error("job_add", "{\"job_id\": 1, \"world_size\": 2}", TALLY_CTL_E_INVALID_PARAMS,
		     "token");
	expect_error("job_set_policy", "{\"job_id\": 1}", TALLY_CTL_E_INVALID_PARAMS, "quorum");
	expect_error("job_set_policy", "{\"job_id\": 1, \"deterministic\": 1}",
		     TALLY_CTL_E_INVALID_PARAMS, "deterministic");
	expect_error("log_set_level", "{\"level\": \"loud\"}", TALLY_CTL_E_INVALID_PARAMS,
		     "level");
	expect_error("stats_get", "{\"watch\": 1}", TALLY_CTL_E_INVALID_PARAMS, "watch");
	/* nothing reached the backend */
	for (int i = 0; i < TALLY_CTL_M_COUNT; i++)
		assert_int_equal(F.calls[i], 0);
}

static void test_backend_errors(void **state)
{
	(void)state;
	json_t *r = call("job_get", "{\"job_id\": 9}");
	assert_int_equal(err_code(r), TALLY_CTL_E_APPLIANCE);
	assert_non_null(strstr(err_msg(r), "no job 9"));
	json_t *data = json_object_get(json_object_get(r, "error"), "data");
	assert_int_equal(json_integer_value(json_object_get(data, "errno")), ENOENT);
	assert_string_equal(json_string_value(json_object_get(data, "name")), "ENOENT");
	json_decref(r);

	r = call("job_add", "{\"job_id\": 1, \"token\": 5, \"world_size\": 2}");
	ok(r);
	json_decref(r);
	expect_error("job_add", "{\"job_id\": 1, \"token\": 6, \"world_size\": 2}",
		     TALLY_CTL_E_APPLIANCE, "another token");
	expect_error("job_set_policy", "{\"job_id\": 1, \"quorum\": 3}",
		     TALLY_CTL_E_INVALID_PARAMS, "quorum 3");
	assert_int_equal(F.jobs[0].quorum, 0); /* unchanged */
	for (uint32_t id = 2; id <= FAKE_MAX_JOBS; id++) {
		char p[96];
		snprintf(p, sizeof(p), "{\"job_id\": %u, \"token\": 1, \"world_size\": 2}", id);
		r = call("job_add", p);
		ok(r);
		json_decref(r);
	}
	expect_error("job_add", "{\"job_id\": 99, \"token\": 1, \"world_size\": 2}",
		     TALLY_CTL_E_APPLIANCE, "no room");
}

static void test_not_implemented(void **state)
{
	(void)state;
	B.handlers[TALLY_CTL_M_JOBS_LIST] = NULL;
	expect_error("jobs_list", NULL, TALLY_CTL_E_NOT_IMPLEMENTED, "jobs_list");
}

static void test_notification_and_batch(void **state)
{
	(void)state;
	json_t *req = json_loads("{\"jsonrpc\": \"2.0\", \"method\": \"appliance_drain\"}", 0,
				 NULL);
	assert_null(tally_ctl_handle(&B, req));
	assert_int_equal(F.calls[TALLY_CTL_M_APPLIANCE_DRAIN], 1);
	json_decref(req);

	req = json_loads("[{\"jsonrpc\": \"2.0\", \"id\": \"a\", \"method\": \"jobs_list\"},"
			 " {\"jsonrpc\": \"2.0\", \"method\": \"stats_reset\"},"
			 " {\"jsonrpc\": \"2.0\", \"id\": 2, \"method\": \"nope\"}, 17]", 0, NULL);
	json_t *r = tally_ctl_handle(&B, req);
	assert_int_equal(json_array_size(r), 3);
	assert_string_equal(json_string_value(json_object_get(json_array_get(r, 0), "id")), "a");
	assert_true(json_is_array(json_object_get(json_array_get(r, 0), "result")));
	assert_int_equal(err_code(json_array_get(r, 1)), TALLY_CTL_E_METHOD_NOT_FOUND);
	assert_int_equal(err_code(json_array_get(r, 2)), TALLY_CTL_E_INVALID_REQUEST);
	assert_int_equal(F.calls[TALLY_CTL_M_STATS_RESET], 1);
	json_decref(r);
	json_decref(req);
}

static int replay_text(const char *text, char *msg, size_t len)
{
	char path[] = "/tmp/ctl-replay-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	int rc = tally_ctl_replay_file(&B, path, msg, len);
	unlink(path);
	return rc;
}

static void test_replay(void **state)
{
	char msg[512];
	(void)state;

	assert_int_equal(replay_text("{\"calls\": [{\"method\": \"job_add\", \"params\": "
		"{\"job_id\": 3, \"token\": \"0x10\", \"world_size\": 4}}, {\"method\": "
		"\"job_set_policy\", \"params\": {\"job_id\": 3, \"quorum\": 2}}]}", msg,
		sizeof(msg)), 0);
	assert_int_equal(F.jobs[0].token, 16);
	assert_int_equal(F.jobs[0].quorum, 2);

	/* a non-replayable method is refused before anything runs */
	assert_int_equal(replay_text("{\"calls\": [{\"method\": \"appliance_shutdown\"}]}", msg,
				     sizeof(msg)), -EINVAL);
	assert_non_null(strstr(msg, "call 0"));
	assert_int_equal(F.calls[TALLY_CTL_M_APPLIANCE_SHUTDOWN], 0);
	/* stops at the failing call and says which */
	assert_int_equal(replay_text("{\"calls\": [{\"method\": \"log_set_level\", \"params\": "
		"{\"level\": \"info\"}}, {\"method\": \"job_set_policy\", \"params\": "
		"{\"job_id\": 77, \"quorum\": 1}}, {\"method\": \"log_set_level\", \"params\": "
		"{\"level\": \"debug\"}}]}", msg, sizeof(msg)), -ENOENT);
	assert_non_null(strstr(msg, "call 1"));
	assert_string_equal(F.level, "info");
	assert_int_equal(replay_text("{\"calls\": [{\"method\": \"job_add\", \"params\": "
		"{\"job_id\": 3}}]}", msg, sizeof(msg)), -EINVAL);
	assert_non_null(strstr(msg, "token"));
	assert_int_equal(replay_text("{\"calls\": 5}", msg, sizeof(msg)), -EINVAL);
	assert_int_equal(replay_text("{\"calls\": [", msg, sizeof(msg)), -EINVAL);
	assert_non_null(strstr(msg, "line 1"));
	assert_int_equal(tally_ctl_replay_file(&B, "/nonexistent/x.json", msg, sizeof(msg)),
			 -EINVAL);
	assert_non_null(strstr(msg, "/nonexistent/x.json"));
}

/* config_save's answer, replayed into an empty appliance, rebuilds the same state. */
static void test_config_roundtrip(void **state)
{
	char msg[512];
	(void)state;
	json_t *r = call("job_add", "{\"job_id\": 5, \"token\": \"0x8000000000000001\", "
			 "\"world_size\": 8}");
	json_decref(r);
	r = call("job_set_policy", "{\"job_id\": 5, \"quorum\": 6, \"deterministic\": true}");
	json_decref(r);
	r = call("log_set_level", "{\"level\": \"warning\"}");
	json_decref(r);
	r = call("config_save", NULL);
	json_t *cfg = json_incref(ok(r));
	json_decref(r);

	struct fake before = F;
	memset(&F, 0, sizeof(F));
	assert_int_equal(tally_ctl_replay(&B, cfg, msg, sizeof(msg)), 0);
	assert_memory_equal(F.jobs, before.jobs, sizeof(F.jobs));
	assert_string_equal(F.level, "warning");
	json_decref(cfg);
}

/* Mutated valid requests (fixed seed): every one that parses gets a well-formed answer
 * (an error or a result, with the jsonrpc tag), or none for a notification. */
static void test_mutated_requests(void **state)
{
	static const char *seeds[] = {
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"job_add\",\"params\":"
		"{\"job_id\":1,\"token\":\"0x10\",\"world_size\":4}}",
		"{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"job_set_policy\",\"params\":"
		"{\"job_id\":1,\"quorum\":2,\"deterministic\":false}}",
		"[{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"chunks_stuck\",\"params\":"
		"{\"threshold_ms\":5}},{\"jsonrpc\":\"2.0\",\"method\":\"stats_reset\"}]",
	};
	static const char alphabet[] = "{}[]\":,0123456789-.eE \\tfnu_abcxyz";
	unsigned seed = 12345, parsed = 0;
	(void)state;

	for (int it = 0; it < 20000; it++) {
		char buf[512];
		const char *src = seeds[it % 3];
		size_t len = strlen(src);
		memcpy(buf, src, len + 1);
		for (int k = 0; k < 1 + it % 4; k++) {
			seed = seed * 1103515245u + 12345u;
			size_t pos = (seed >> 8) % len;
			buf[pos] = alphabet[(seed >> 20) % (sizeof(alphabet) - 1)];
		}
		json_t *req = json_loadb(buf, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, NULL);
		if (!req)
			continue;
		parsed++;
		json_t *r = tally_ctl_handle(&B, req);
		json_t *one = json_is_array(r) ? json_array_get(r, 0) : r;
		if (one) {
			assert_string_equal(json_string_value(json_object_get(one, "jsonrpc")), "2.0");
			assert_true((json_object_get(one, "result") != NULL) !=
				    (json_object_get(one, "error") != NULL));
		}
		json_decref(r);
		json_decref(req);
	}
	assert_true(parsed > 1000); /* the mutations did reach the dispatcher */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_schema_is_consistent, setup),
		cmocka_unit_test_setup(test_every_method, setup),
		cmocka_unit_test_setup(test_defaults_reach_handler, setup),
		cmocka_unit_test_setup(test_invalid_requests, setup),
		cmocka_unit_test_setup(test_method_not_found, setup),
		cmocka_unit_test_setup(test_invalid_params, setup),
		cmocka_unit_test_setup(test_backend_errors, setup),
		cmocka_unit_test_setup(test_not_implemented, setup),
		cmocka_unit_test_setup(test_notification_and_batch, setup),
		cmocka_unit_test_setup(test_replay, setup),
		cmocka_unit_test_setup(test_config_roundtrip, setup),
		cmocka_unit_test_setup(test_mutated_requests, setup),
	};
	return cmocka_run_group_tests_name("ctl_rpc", tests, NULL, NULL);
}
