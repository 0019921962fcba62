/* SPDX-License-Identifier: Apache-2.0
 * test_ctl_authdef.c — operator-admitted jobs are authenticated by default (issue 14):
 * tallyctl job-add with neither --key-file nor --no-auth is refused with a message naming
 * both ways out and the job table is unchanged; --no-auth and --key-file admit, `jobs`
 * says which; config-save writes no_auth so a --control-config replay restores both kinds;
 * a saved file with a job_add of neither kind stops the appliance (exit 2); tally-udpd
 * --job follows the same rule. Against tally-udpd (same control plane as tallyd).
 * argv: TALLY_UDPD TALLYCTL. No root needed.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "ctl_cli.h"

#define MSG_DEFAULT "operator-admitted jobs are authenticated by default"

static const char *udpd, *tallyctl;
static char sock[108], logpath[64], keypath[64], cfg[64], port[16];
static pid_t upid = -1;
static char out[1 << 16], err[1 << 14];

static struct ctl_cli cli = { .sock = sock, .tag = "authdef", .out = out,
			      .outcap = sizeof(out), .err = err, .errcap = sizeof(err) };
#define ctl(...) ctl_cli_run(&cli, __VA_ARGS__)
#define CTLJ(...) ctl_cli_json(&cli, ctl_cli_run(&cli, "--json", __VA_ARGS__, NULL))
#define geti(o, path) ctl_cli_geti(o, path, -1)

/* tally-udpd with its fixed settings plus up to 8 more (NULL-terminated); waits for its
 * control socket. 0 when it answers, else its exit status (log in `out`). */
static int start_udpd(const char *a0, ...)
{
	const char *argv[32] = { udpd, "--ip", "127.0.0.1", "--base-port", port, "--cores", "2",
				 "--mem", "64M", "--ctl-socket", sock };
	int n = 11, status;
	va_list ap;

	va_start(ap, a0);
	for (const char *a = a0; a && n < 30; a = va_arg(ap, const char *))
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	upid = fork();
	if (upid == 0) {
		int fd = open(logpath, O_CREAT | O_TRUNC | O_WRONLY, 0600);
		dup2(fd, 1);
		dup2(fd, 2);
		execv(udpd, (char *const *)argv);
		_exit(98);
	}
	for (int i = 0; i < 100; i++) {
		if (waitpid(upid, &status, WNOHANG) == upid) {
			upid = -1;
			ctl_cli_slurp(logpath, out, sizeof(out));
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
		}
		if (ctl("status", NULL) == 0)
			return 0;
		ctl_cli_sleep_ms(50);
	}
	return -1;
}

static void stop_udpd(void)
{
	if (upid > 0) {
		kill(upid, SIGKILL);
		waitpid(upid, NULL, 0);
	}
	upid = -1;
	unlink(sock);
}

/* The `auth` of job id in `tallyctl jobs`, NULL when the job is not there. */
static const char *job_auth(json_t *jobs, json_int_t id)
{
	size_t i;
	json_t *j;

	json_array_foreach(jobs, i, j)
		if (geti(j, "job_id") == id)
			return json_string_value(json_object_get(j, "auth"));
	return NULL;
}

static int group_setup(void **state)
{
	int id = (int)getpid();
	(void)state;

	snprintf(sock, sizeof(sock), "/tmp/ctl-authdef-%d.sock", id);
	snprintf(logpath, sizeof(logpath), "/tmp/ctl-authdef-%d.log", id);
	snprintf(keypath, sizeof(keypath), "/tmp/ctl-authdef-%d.key", id);
	snprintf(cfg, sizeof(cfg), "/tmp/ctl-authdef-%d.json", id);
	snprintf(port, sizeof(port), "%d", 20000 + (id % 5000) * 2);
	int fd = open(keypath, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	if (fd < 0)
		return -1;
	/* 64 hex digits: the format of `openssl rand -hex 32` */
	static const char hex[] = "00112233445566778899aabbccddeeff"
				  "0123456789abcdef0123456789abcdef\n";
	int ok = write(fd, hex, sizeof(hex) - 1) == (ssize_t)(sizeof(hex) - 1);
	close(fd);
	return ok ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	stop_udpd();
	unlink(logpath);
	unlink(keypath);
	unlink(cfg);
	return 0;
}

static void test_refused_then_admitted(void **state)
{
	(void)state;
	assert_int_equal(start_udpd(NULL), 0);
	assert_int_equal(ctl("job-add", "5", "--token", "5", "--world-size", "2", NULL), 1);
	assert_non_null(strstr(err, "job 5: " MSG_DEFAULT));
	assert_non_null(strstr(err, "--key-file FILE"));
	assert_non_null(strstr(err, "--no-auth"));
	json_t *js = CTLJ("jobs"); /* nothing changed */
	assert_int_equal(json_array_size(js), 0);
	json_decref(js);
	assert_int_equal(ctl("job", "5", NULL), 1);
	/* both at once: refused too */
	assert_int_equal(ctl("job-add", "5", "--no-auth", "--token", "5", "--world-size", "2",
			     "--key-file", keypath, NULL), 1);
	assert_non_null(strstr(err, "not both"));
	js = CTLJ("jobs");
	assert_int_equal(json_array_size(js), 0);
	json_decref(js);

	json_t *r = CTLJ("job-add", "5", "--no-auth", "--token", "5", "--world-size", "2");
	assert_true(json_is_false(json_object_get(r, "authenticated")));
	json_decref(r);
	r = CTLJ("job-add", "6", "--token", "6", "--world-size", "2", "--key-file", keypath);
	assert_true(json_is_true(json_object_get(r, "authenticated")));
	json_decref(r);
	js = CTLJ("jobs");
	assert_int_equal(json_array_size(js), 2);
	assert_string_equal(job_auth(js, 5), "no_auth");
	assert_string_equal(job_auth(js, 6), "keyed");
	json_decref(js);
	assert_int_equal(ctl("jobs", NULL), 0); /* the human table shows it too */
	assert_non_null(strstr(out, "no_auth"));
	assert_non_null(strstr(out, "keyed"));
}

/* config-save writes no_auth; a fresh appliance replaying the file has both jobs back as
 * they were. */
static void test_replay_keeps_both(void **state)
{
	(void)state;
	assert_int_equal(ctl("config-save", cfg, NULL), 0);
	json_t *c = json_load_file(cfg, 0, NULL), *x;
	size_t i;
	int seen = 0;
	assert_non_null(c);
	json_array_foreach(json_object_get(c, "calls"), i, x) {
		json_t *p = json_object_get(x, "params");
		if (geti(p, "job_id") == 5) {
			assert_true(json_is_true(json_object_get(p, "no_auth")));
			assert_null(json_object_get(p, "key_file"));
			seen |= 1;
		} else if (geti(p, "job_id") == 6) {
			assert_string_equal(json_string_value(json_object_get(p, "key_file")),
					    keypath);
			assert_null(json_object_get(p, "no_auth"));
			seen |= 2;
		}
	}
	json_decref(c);
	assert_int_equal(seen, 3);
	stop_udpd();

	assert_int_equal(start_udpd("--control-config", cfg, NULL), 0);
	json_t *js = CTLJ("jobs");
	assert_int_equal(json_array_size(js), 2);
	assert_string_equal(job_auth(js, 5), "no_auth");
	assert_string_equal(job_auth(js, 6), "keyed");
	json_decref(js);
	stop_udpd();
}

/* A saved file written before the default (a job_add of neither kind): refused at start,
 * exit 2, the log names the way out. */
static void test_replay_refuses_unmarked(void **state)
{
	(void)state;
	FILE *f = fopen(cfg, "w");
	assert_non_null(f);
	fputs("{\"calls\":[{\"method\":\"job_add\",\"params\":{\"job_id\":8,\"token\":8,"
	      "\"world_size\":2}}]}\n", f);
	fclose(f);
	assert_int_equal(start_udpd("--control-config", cfg, NULL), 2);
	assert_non_null(strstr(out, "--control-config"));
	assert_non_null(strstr(out, "job 8: " MSG_DEFAULT));
}

/* tally-udpd --job: the same rule at start. */
static void test_udpd_job_flag(void **state)
{
	(void)state;
	assert_int_equal(start_udpd("--job", "3", "--token", "3", "--world", "2", NULL), 2);
	assert_non_null(strstr(out, "job 3: " MSG_DEFAULT));
	assert_int_equal(start_udpd("--job", "3", "--token", "3", "--world", "2", "--no-auth",
				    "--key-file", keypath, NULL), 2);
	assert_non_null(strstr(out, "not both"));
	assert_int_equal(start_udpd("--no-auth", NULL), 2);
	assert_non_null(strstr(out, "--job ID"));

	assert_int_equal(start_udpd("--job", "3", "--no-auth", "--token", "3", "--world", "2",
				    NULL), 0);
	json_t *js = CTLJ("jobs");
	assert_string_equal(job_auth(js, 3), "no_auth");
	json_decref(js);
	stop_udpd();
	assert_int_equal(start_udpd("--job", "3", "--token", "3", "--world", "2", "--key-file",
				    keypath, NULL), 0);
	js = CTLJ("jobs");
	assert_string_equal(job_auth(js, 3), "keyed");
	json_decref(js);
	stop_udpd();
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s TALLY_UDPD TALLYCTL\n", argv[0]);
		return 2;
	}
	udpd = argv[1];
	tallyctl = argv[2];
	cli.bin = tallyctl;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refused_then_admitted),
		cmocka_unit_test(test_replay_keeps_both),
		cmocka_unit_test(test_replay_refuses_unmarked),
		cmocka_unit_test(test_udpd_job_flag),
	};
	return cmocka_run_group_tests_name("ctl_authdef", tests, group_setup, group_teardown);
}
