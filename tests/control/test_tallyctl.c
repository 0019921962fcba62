/* SPDX-License-Identifier: Apache-2.0
 * test_tallyctl.c — tallyctl's argument parsing, help, output and exit codes, run as a
 * program against a fake appliance (the control server over the fake backend, in a forked
 * process). argv[1]: the tallyctl binary.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "ctl_cli.h"
#include "fake_backend.h"

#define NOBODY 65534u

static const char *tallyctl;
static char sock[108];
static pid_t server_pid = -1;
static char out[1 << 16], err[1 << 14];

static void quiet_log(void *ctx, int prio, const char *msg)
{
	(void)ctx; (void)prio; (void)msg;
}

/* The fake appliance, in its own process, until appliance_shutdown. */
static void start_server(mode_t mode)
{
	unlink(sock);
	server_pid = fork();
	assert_true(server_pid >= 0);
	if (server_pid == 0) {
		static struct fake f;
		struct tally_ctl_backend b;
		struct tally_ctl_server_cfg cfg = { .path = sock, .mode = mode, .log = quiet_log };
		int e;
		fake_backend_init(&f, &b);
		struct tally_ctl_server *s = tally_ctl_server_create(&cfg, &b, &e);
		if (!s)
			_exit(1);
		while (!f.shutdown)
			tally_ctl_server_poll(s, 100);
		tally_ctl_server_destroy(s);
		_exit(0);
	}
	for (int i = 0; i < 500; i++) {
		char m[128];
		int fd = tally_ctl_connect(sock, m, sizeof(m));
		if (fd >= 0) {
			close(fd);
			return;
		}
		struct timespec ts = { 0, 10000000 };
		nanosleep(&ts, NULL);
	}
	fail_msg("fake server did not start");
}

static int stop_server(void)
{
	int status = -1;
	if (server_pid > 0) {
		kill(server_pid, SIGTERM);
		waitpid(server_pid, &status, 0);
	}
	server_pid = -1;
	unlink(sock);
	return status;
}

/* Runs tallyctl with the given arguments (NULL-terminated), as uid if uid != 0; captures
 * stdout/stderr into out/err; returns the exit status. */
static int run_as(uid_t uid, const char *first, ...)
{
	const char *args[32] = { tallyctl, "--socket", sock };
	int n = 3, status;
	va_list ap;
	char po[64], pe[64];

	va_start(ap, first);
	for (const char *a = first; a && n < 31; a = va_arg(ap, const char *))
		args[n++] = a;
	va_end(ap);
	args[n] = NULL;
	snprintf(po, sizeof(po), "/tmp/ctl-out-%d", (int)getpid());
	snprintf(pe, sizeof(pe), "/tmp/ctl-err-%d", (int)getpid());
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fo = open(po, O_CREAT | O_TRUNC | O_WRONLY, 0666);
		int fe = open(pe, O_CREAT | O_TRUNC | O_WRONLY, 0666);
		dup2(fo, 1);
		dup2(fe, 2);
		if (uid) {
			gid_t g = NOBODY;
			if (setgroups(1, &g) || setgid(NOBODY) || setuid(uid))
				_exit(99);
		}
		execv(tallyctl, (char *const *)args);
		_exit(98);
	}
	waitpid(pid, &status, 0);
	ctl_cli_slurp(po, out, sizeof(out));
	ctl_cli_slurp(pe, err, sizeof(err));
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

#define run(...) run_as(0, __VA_ARGS__, NULL)

static void expect(int code, int got, const char *needle_out, const char *needle_err)
{
	if (got != code)
		fail_msg("exit %d, expected %d; stdout '%.300s' stderr '%.300s'", got, code, out, err);
	if (needle_out && !strstr(out, needle_out))
		fail_msg("stdout lacks '%s': '%.500s'", needle_out, out);
	if (needle_err && !strstr(err, needle_err))
		fail_msg("stderr lacks '%s': '%.500s'", needle_err, err);
}

static void test_usage(void **state)
{
	(void)state;
	expect(2, run_as(0, NULL), NULL, "no command");
	expect(0, run("--help"), "commands:", NULL);
	expect(2, run("frobnicate"), NULL, "unknown command 'frobnicate'");
	expect(2, run("--bogus", "status"), NULL, "unknown option '--bogus'");
	expect(2, run("job"), NULL, "job_id");
	expect(2, run("job", "x7"), NULL, "job_id: 'x7'");
	expect(2, run("job", "1", "2"), NULL, "unexpected argument '2'");
	expect(2, run("job", "--job-id"), NULL, "needs a value");
	expect(2, run("job-add", "1", "--token", "5", "--world-size", "0"), NULL, "world_size");
	expect(2, run("job-add", "1", "--world-size", "4"), NULL, "token");
	expect(2, run("policy", "1"), NULL, "at least one of");
	expect(2, run("policy", "1", "--deterministic", "maybe"), NULL, "deterministic");
	expect(2, run("log-level", "loud"), NULL, "error|warning");
	expect(2, run("stats", "--count", "2"), NULL, "--count needs --watch");
	expect(2, run("stats", "--watch", "0"), NULL, "watch");
	expect(2, run("--timeout", "abc", "status"), NULL, "--timeout");
	expect(2, run("job", "1", "--job-id", "2"), NULL, "given twice");
	expect(0, run("help", "stuck"), "JSON-RPC method: chunks_stuck", NULL);
	expect(2, run("help", "nope"), NULL, "unknown command");
}

/* Every command has --help generated from the schema: usage line, every parameter. */
static void test_help_from_schema(void **state)
{
	size_t n;
	const struct tally_ctl_method *m = tally_ctl_methods(&n);
	(void)state;

	for (size_t i = 0; i < n; i++) {
		char line[96];
		expect(0, run(m[i].cmd, "--help"), m[i].name, NULL);
		snprintf(line, sizeof(line), "usage: tallyctl [--socket PATH] [--json] %s", m[i].cmd);
		assert_non_null(strstr(out, line));
		for (unsigned k = 0; k < m[i].nparams; k++) {
			assert_non_null(strstr(out, m[i].params[k].help));
		}
		assert_non_null(strstr(out, m[i].help));
	}
}

static void test_unreachable(void **state)
{
	(void)state;
	unlink(sock);
	expect(3, run("status"), NULL, "missing");
	assert_non_null(strstr(err, sock));

	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	strcpy(sa.sun_path, sock);
	assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(s);
	expect(3, run("status"), NULL, "refused");
	unlink(sock);
	if (geteuid() != 0)
		return;
	/* socket mode 0660, group tally absent here: another uid cannot connect */
	start_server(0660);
	expect(3, run_as(NOBODY, "status", NULL), NULL, "permission denied");
	/* world-connectable socket: the server's credential check refuses */
	stop_server();
	start_server(0666);
	expect(3, run_as(NOBODY, "jobs", NULL), NULL, "permission denied: uid 65534");
	expect(0, run("jobs"), NULL, NULL);
	stop_server();
}

static void test_commands(void **state)
{
	char cfg[64];
	(void)state;

	start_server(0660);
	expect(0, run("job-add", "1", "--no-auth", "--token", "0xdeadbeefcafef00d", "--world-size", "4"),
	       "world_size", NULL);
	expect(1, run("job-add", "1", "--no-auth", "--token", "7", "--world-size", "4"), NULL,
	       "another token");
	expect(1, run("job", "9"), NULL, "no job 9");
	expect(0, run("--json", "jobs"), NULL, NULL);
	json_t *j = json_loads(out, 0, NULL);
	assert_int_equal(json_array_size(j), 1);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(j, 0), "world_size")), 4);
	json_decref(j);
	/* human table: header line then one row */
	expect(0, run("jobs"), "job_id", NULL);
	assert_non_null(strstr(out, "world_size"));
	expect(0, run("status"), "0d 01:02:05", NULL); /* uptime 3725 s */
	assert_non_null(strstr(out, "1.00 GiB"));      /* budget_bytes with units */
	expect(0, run("policy", "1", "--quorum", "3", "--deadline-us", "2000"), NULL, NULL);
	expect(1, run("policy", "1", "--quorum", "9"), NULL, "world size 4");
	expect(0, run("--json", "job", "--job-id=1"), NULL, NULL);
	j = json_loads(out, 0, NULL);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "policy"),
							    "quorum")), 3);
	json_decref(j);
	expect(0, run("stuck", "250"), "age_ms", NULL);
	assert_non_null(strstr(out, "255 ms"));
	expect(0, run("keys"), "missing", NULL);
	assert_non_null(strstr(out, "2,3"));
	expect(0, run("workers"), "(none)", NULL);
	expect(0, run("--json", "stats"), NULL, NULL);
	j = json_loads(out, 0, NULL);
	assert_non_null(json_object_get(j, "totals"));
	json_decref(j);
	expect(0, run("stats", "--watch", "1", "--count", "2"), "rates over the last", NULL);
	expect(0, run("stats-reset"), NULL, NULL);
	expect(0, run("log-level", "debug"), "previous", NULL);

	snprintf(cfg, sizeof(cfg), "/tmp/ctl-cfg-%d.json", (int)getpid());
	expect(0, run("config-save", cfg), NULL, "saved");
	j = json_load_file(cfg, 0, NULL);
	assert_non_null(j);
	json_t *calls = json_object_get(j, "calls");
	assert_int_equal(json_array_size(calls), 3);
	assert_string_equal(json_string_value(json_object_get(json_array_get(calls, 0), "method")),
			    "job_add");
	/* the token survives as the full 64-bit value */
	uint64_t tok = 0;
	assert_int_equal(tally_ctl_get_u64(json_object_get(json_array_get(calls, 0), "params"),
					   "token", &tok), 0);
	assert_int_equal(tok, 0xdeadbeefcafef00dull);
	json_decref(j);
	unlink(cfg);
	expect(0, run("evict", "1"), NULL, NULL);
	expect(1, run("evict", "1"), NULL, "no job 1");
	expect(0, run("drain"), "draining", NULL);
	expect(0, run("shutdown"), "stopping", NULL);
	/* the fake appliance stops after answering */
	int status;
	assert_int_equal(waitpid(server_pid, &status, 0), server_pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	server_pid = -1;
	expect(3, run("status"), NULL, "missing");
}

static int teardown(void **state)
{
	(void)state;
	stop_server();
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s TALLYCTL\n", argv[0]);
		return 2;
	}
	tallyctl = argv[1];
	snprintf(sock, sizeof(sock), "/tmp/ctl-cli-%d.sock", (int)getpid());
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_usage, teardown),
		cmocka_unit_test_teardown(test_help_from_schema, teardown),
		cmocka_unit_test_teardown(test_unreachable, teardown),
		cmocka_unit_test_teardown(test_commands, teardown),
	};
	return cmocka_run_group_tests_name("tallyctl", tests, NULL, NULL);
}
