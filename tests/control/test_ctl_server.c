/* SPDX-License-Identifier: Apache-2.0
 * test_ctl_server.c — the unix-socket server over the fake backend: calls, malformed,
 * huge, slow and greedy clients, many clients, peer-credential refusal (a forked child
 * that drops to another uid), socket file handling.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
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

#include "fake_backend.h"

#define NOBODY 65534u
/* the allowed group: 4242 as root, else our own (only root may chown to any group) */
#define TEST_GID (geteuid() == 0 ? 4242u : (unsigned)getegid())

static struct fake F;
static struct tally_ctl_backend B;
static struct tally_ctl_server *S;
static pthread_t T;
static volatile int stop;
static char path[108];

static void *server_loop(void *arg)
{
	(void)arg;
	while (!stop)
		tally_ctl_server_poll(S, 20);
	return NULL;
}

static void quiet_log(void *ctx, int prio, const char *msg)
{
	(void)ctx; (void)prio; (void)msg;
}

static void start(struct tally_ctl_server_cfg *cfg)
{
	int err = 0;

	memset(&F, 0, sizeof(F));
	fake_backend_init(&F, &B);
	snprintf(path, sizeof(path), "/tmp/ctl-srv-%d.sock", (int)getpid());
	cfg->path = path;
	cfg->log = quiet_log;
	S = tally_ctl_server_create(cfg, &B, &err);
	assert_non_null(S);
	assert_int_equal(err, 0);
	stop = 0;
	assert_int_equal(pthread_create(&T, NULL, server_loop, NULL), 0);
}

static void stop_server(struct tally_ctl_server_stats *st)
{
	stop = 1;
	pthread_join(T, NULL);
	if (st)
		tally_ctl_server_stats(S, st);
	tally_ctl_server_destroy(S);
	S = NULL;
	assert_int_equal(access(path, F_OK), -1); /* socket removed */
}

static int start_default(void **state)
{
	struct tally_ctl_server_cfg cfg = { .allow_gid = TEST_GID, .allow_gid_set = 1 };
	(void)state;
	start(&cfg);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	if (S)
		stop_server(NULL);
	return 0;
}

static int conn(void)
{
	char msg[256];
	int fd = tally_ctl_connect(path, msg, sizeof(msg));
	if (fd < 0)
		fail_msg("connect: %s", msg);
	return fd;
}

static void send_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n <= 0)
			return; /* server may have closed: the caller checks the answer */
		buf += n;
		len -= (size_t)n;
	}
}

static int stop_at_nl;

/* Reads until EOF or timeout (or a whole line when stop_at_nl); returns bytes read, *eof
 * set if the server closed. */
static size_t read_until(int fd, char *buf, size_t cap, int timeout_ms, int *eof)
{
	size_t have = 0;
	*eof = 0;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, timeout_ms) <= 0)
			break;
		ssize_t n = recv(fd, buf + have, cap - 1 - have, 0);
		if (n <= 0) {
			*eof = 1;
			break;
		}
		have += (size_t)n;
		if (have == cap - 1 || (stop_at_nl && memchr(buf, '\n', have)))
			break;
	}
	buf[have] = '\0';
	return have;
}

static json_t *rpc(int fd, const char *method, const char *params, json_t **error)
{
	json_t *p = params ? json_loads(params, 0, NULL) : NULL, *r = NULL;
	assert_int_equal(tally_ctl_call(fd, method, p, 5000, &r, error), 0);
	json_decref(p);
	return r;
}

static void test_calls_and_socket_file(void **state)
{
	struct stat st;
	json_t *r, *e;
	(void)state;

	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0660);
	assert_int_equal(st.st_gid, TEST_GID);

	int fd = conn();
	r = rpc(fd, "job_add", "{\"job_id\": 4, \"token\": 99, \"world_size\": 2}", &e);
	assert_null(e);
	assert_int_equal(json_integer_value(json_object_get(r, "job_id")), 4);
	json_decref(r);
	/* several calls on one connection */
	r = rpc(fd, "jobs_list", NULL, &e);
	assert_int_equal(json_array_size(r), 1);
	json_decref(r);
	r = rpc(fd, "job_get", "{\"job_id\": 5}", &e);
	assert_null(r);
	assert_int_equal(json_integer_value(json_object_get(e, "code")), TALLY_CTL_E_APPLIANCE);
	json_decref(e);
	r = rpc(fd, "no_such_method", NULL, &e);
	assert_int_equal(json_integer_value(json_object_get(e, "code")),
			 TALLY_CTL_E_METHOD_NOT_FOUND);
	json_decref(e);
	close(fd);
}

static void test_pipelined_and_batch(void **state)
{
	static const char two[] =
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"stats_reset\"}  \n\n"
		"{\"jsonrpc\":\"2.0\",\"id\":2,\n \"method\":\"jobs_list\"}"
		"[{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"jobs_list\"},"
		"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"appliance_status\"}]\n";
	char buf[8192];
	int eof, fd = conn();
	(void)state;

	send_all(fd, two, strlen(two));
	shutdown(fd, SHUT_WR);
	read_until(fd, buf, sizeof(buf), 2000, &eof);
	assert_true(eof); /* the server closes after our EOF */
	/* three answer lines, in order */
	char *l1 = strtok(buf, "\n"), *l2 = strtok(NULL, "\n"), *l3 = strtok(NULL, "\n");
	assert_non_null(l3);
	json_t *a = json_loads(l1, 0, NULL), *b = json_loads(l2, 0, NULL);
	json_t *c = json_loads(l3, 0, NULL);
	assert_int_equal(json_integer_value(json_object_get(a, "id")), 1);
	assert_int_equal(json_integer_value(json_object_get(b, "id")), 2);
	assert_int_equal(json_array_size(c), 2);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(c, 1), "id")), 4);
	json_decref(a);
	json_decref(b);
	json_decref(c);
	close(fd);
}

static int start_small_output(void **state)
{
	struct tally_ctl_server_cfg cfg = { .max_output = 1024, .allow_gid = TEST_GID,
					    .allow_gid_set = 1 };
	(void)state;
	start(&cfg);
	return 0;
}

/* One answer larger than max_output is still delivered whole. */
static void test_large_answer(void **state)
{
	char req[4096];
	size_t off = 0;
	static char buf[65536];
	int eof, fd = conn();
	(void)state;

	off += (size_t)snprintf(req + off, sizeof(req) - off, "[");
	for (int i = 0; i < 12; i++)
		off += (size_t)snprintf(req + off, sizeof(req) - off,
			"%s{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"appliance_status\"}",
			i ? "," : "", i);
	snprintf(req + off, sizeof(req) - off, "]\n");
	send_all(fd, req, strlen(req));
	stop_at_nl = 1;
	read_until(fd, buf, sizeof(buf), 3000, &eof);
	stop_at_nl = 0;
	assert_true(strlen(buf) > 1024);
	json_t *r = json_loads(buf, JSON_DISABLE_EOF_CHECK, NULL);
	assert_int_equal(json_array_size(r), 12);
	json_decref(r);
	close(fd);
	struct tally_ctl_server_stats st;
	stop_server(&st);
	assert_int_equal(st.output_overflow, 0);
}

static void expect_error_and_close(const char *text, size_t len, int code)
{
	static char buf[1 << 17];
	int eof, fd = conn();

	send_all(fd, text, len);
	read_until(fd, buf, sizeof(buf), 3000, &eof);
	assert_true(eof);
	json_t *r = json_loads(buf, JSON_DISABLE_EOF_CHECK, NULL);
	if (!r)
		fail_msg("no JSON answer: '%.200s'", buf);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(r, "error"), "code")),
			 code);
	json_decref(r);
	close(fd);
}

static void test_malformed(void **state)
{
	static const char *bad[] = { "{not json}\n", "{\"a\": 1,, }\n", "]\n",
				     "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"id\":2}\n",
				     "{\"a\": \"\\u0000\"}\n", "\x01\x02\n" };
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_error_and_close(bad[i], strlen(bad[i]), TALLY_CTL_E_PARSE);
	/* the server still answers others */
	int fd = conn();
	json_t *e, *r = rpc(fd, "jobs_list", NULL, &e);
	assert_non_null(r);
	json_decref(r);
	close(fd);
	struct tally_ctl_server_stats st;
	stop_server(&st);
	assert_int_equal(st.parse_errors, sizeof(bad) / sizeof(bad[0]));
	for (int i = 0; i < TALLY_CTL_M_COUNT; i++)
		assert_int_equal(F.calls[i], i == TALLY_CTL_M_JOBS_LIST);
}

static void test_huge_request(void **state)
{
	enum { n = 100 * 1024 };
	static char big[n + 64];
	(void)state;

	int off = sprintf(big, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"jobs_list\","
			  "\"params\":{\"x\":\"");
	memset(big + off, 'a', n - (size_t)off);
	strcpy(big + n, "\"}}\n");
	expect_error_and_close(big, strlen(big), TALLY_CTL_E_TOO_LARGE);
	/* just under the limit is fine (and answered: unknown parameter) */
	size_t ok_len = TALLY_CTL_MAX_REQUEST - 8;
	memset(big + off, 'a', ok_len - (size_t)off);
	strcpy(big + ok_len, "\"}}\n");
	int fd = conn(), eof;
	send_all(fd, big, strlen(big));
	static char buf[4096];
	stop_at_nl = 1;
	read_until(fd, buf, sizeof(buf), 2000, &eof);
	stop_at_nl = 0;
	assert_false(eof);
	assert_non_null(strstr(buf, "unknown parameter 'x'"));
	close(fd);
	struct tally_ctl_server_stats st;
	stop_server(&st);
	assert_int_equal(st.too_large, 1);
	assert_int_equal(F.calls[TALLY_CTL_M_JOBS_LIST], 0);
}

static int start_short_timeout(void **state)
{
	struct tally_ctl_server_cfg cfg = { .request_timeout_ms = 400, .allow_gid = TEST_GID,
					    .allow_gid_set = 1 };
	(void)state;
	start(&cfg);
	return 0;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static void test_slow_clients(void **state)
{
	static const char req[] = "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"jobs_list\"}\n";
	char buf[1024];
	int eof;
	(void)state;

	/* slow but in time: three pieces 50 ms apart */
	int fd = conn();
	send_all(fd, req, 10);
	sleep_ms(50);
	send_all(fd, req + 10, 12);
	sleep_ms(50);
	send_all(fd, req + 22, strlen(req) - 22);
	stop_at_nl = 1;
	read_until(fd, buf, sizeof(buf), 2000, &eof);
	stop_at_nl = 0;
	assert_non_null(strstr(buf, "\"id\":7"));
	close(fd);

	/* half a request, then silence: closed after the request timeout */
	fd = conn();
	int idle = conn(); /* idle (nothing sent) connections are not timed out as slow */
	send_all(fd, req, 20);
	read_until(fd, buf, sizeof(buf), 3000, &eof);
	assert_true(eof);
	assert_int_equal(buf[0], '\0');
	close(fd);
	json_t *e, *r = rpc(idle, "jobs_list", NULL, &e);
	assert_non_null(r);
	json_decref(r);
	close(idle);

	/* a client that never reads its answers: dropped, others unaffected */
	int greedy = conn();
	int flags = fcntl(greedy, F_GETFL);
	fcntl(greedy, F_SETFL, flags | O_NONBLOCK);
	static const char st[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"appliance_status\"}";
	for (int i = 0; i < 20000; i++)
		if (send(greedy, st, sizeof(st) - 1, MSG_NOSIGNAL) < 0)
			break;
	fd = conn();
	r = rpc(fd, "jobs_list", NULL, &e);
	assert_non_null(r);
	json_decref(r);
	close(fd);
	sleep_ms(800);
	struct tally_ctl_server_stats ss;
	stop_server(&ss);
	assert_int_equal(ss.timeouts, 2);
	close(greedy);
}

static void test_many_clients(void **state)
{
	enum { N = 48 };
	int fds[N + 1];
	char buf[512];
	int eof;
	(void)state;

	for (int i = 0; i < N; i++)
		fds[i] = conn();
	for (int i = 0; i < N; i++) {
		char req[128];
		snprintf(req, sizeof(req),
			 "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"job_get\",\"params\":"
			 "{\"job_id\":%d}}\n", 1000 + i, i);
		send_all(fds[i], req, strlen(req));
	}
	stop_at_nl = 1;
	for (int i = 0; i < N; i++) {
		read_until(fds[i], buf, sizeof(buf), 2000, &eof);
		json_t *r = json_loads(buf, JSON_DISABLE_EOF_CHECK, NULL);
		assert_non_null(r);
		assert_int_equal(json_integer_value(json_object_get(r, "id")), 1000 + i);
		json_decref(r);
	}
	stop_at_nl = 0;
	/* one more than max_clients (48), all of them idle: the idlest (fds[0], answered
	 * first) is evicted to make room, so idle connections never lock the operator out */
	fds[N] = conn();
	json_t *e, *r = rpc(fds[N], "jobs_list", NULL, &e);
	assert_non_null(r);
	json_decref(r);
	int evicted = -1, neof = 0;
	for (int i = 0; i < N; i++) {
		read_until(fds[i], buf, sizeof(buf), 20, &eof);
		if (eof) {
			evicted = i;
			neof++;
		}
	}
	assert_int_equal(neof, 1);
	r = rpc(fds[evicted == 0 ? 1 : 0], "jobs_list", NULL, &e);
	assert_non_null(r);
	json_decref(r);
	for (int i = 0; i <= N; i++)
		close(fds[i]);
	struct tally_ctl_server_stats st;
	stop_server(&st);
	assert_int_equal(st.busy, 0);
	assert_int_equal(st.evicted, 1);
	assert_int_equal(F.calls[TALLY_CTL_M_JOB_GET], N);
}

static int start_many(void **state)
{
	struct tally_ctl_server_cfg cfg = { .max_clients = 48, .allow_gid = TEST_GID,
					    .allow_gid_set = 1 };
	(void)state;
	start(&cfg);
	return 0;
}

static int start_world_writable(void **state)
{
	/* 0666 so that another uid can connect: the credential check is what refuses it */
	struct tally_ctl_server_cfg cfg = { .mode = 0666, .allow_gid = TEST_GID,
					    .allow_gid_set = 1 };
	(void)state;
	start(&cfg);
	return 0;
}

/* Forked child as uid NOBODY (gid given): connects, asks jobs_list, exits 0 if the answer
 * contains want. Only async-signal-safe calls after fork (the parent has threads). */
static int child_as(gid_t gid, const char *want)
{
	pid_t pid = fork();
	int status;

	assert_true(pid >= 0);
	if (pid == 0) {
		static const char req[] =
			"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"jobs_list\"}\n";
		static char buf[1024];
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		size_t have = 0;
		gid_t g = gid;
		if (setgroups(1, &g) || setgid(gid) || setuid(NOBODY))
			_exit(10);
		int fd = socket(AF_UNIX, SOCK_STREAM, 0);
		memcpy(sa.sun_path, path, sizeof(path));
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
			_exit(errno == EACCES ? 13 : 11);
		(void)!send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL);
		for (;;) {
			ssize_t n = read(fd, buf + have, sizeof(buf) - 1 - have);
			if (n <= 0)
				break;
			have += (size_t)n;
			if (memchr(buf, '\n', have))
				break;
		}
		buf[have] = '\0';
		_exit(strstr(buf, want) ? 0 : 12);
	}
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_peer_credentials(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();
	/* another uid, not in the group: refused by the server */
	assert_int_equal(child_as(NOBODY, "-32001"), 0);
	/* another uid whose group is the allowed one: served */
	assert_int_equal(child_as(TEST_GID, "\"result\""), 0);
	struct tally_ctl_server_stats st;
	stop_server(&st);
	assert_int_equal(st.refused, 1);
	assert_int_equal(F.calls[TALLY_CTL_M_JOBS_LIST], 1);
}

static void test_socket_mode_refuses_others(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();
	/* mode 0660, group TEST_GID: nobody outside the group cannot even connect */
	assert_int_equal(child_as(NOBODY, "x"), 13);
	assert_int_equal(child_as(TEST_GID, "\"result\""), 0);
}

static void test_socket_path_handling(void **state)
{
	struct tally_ctl_server_cfg cfg = { .path = path, .log = quiet_log };
	char msg[256];
	int err = 0;
	(void)state;

	/* a live server's socket is never taken over */
	assert_null(tally_ctl_server_create(&cfg, &B, &err));
	assert_int_equal(err, -EADDRINUSE);
	stop_server(NULL);

	/* missing */
	assert_int_equal(tally_ctl_connect(path, msg, sizeof(msg)), -ENOENT);
	assert_non_null(strstr(msg, "missing"));
	assert_non_null(strstr(msg, path));

	/* stale socket: refused by connect, replaced by a new server */
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	strcpy(sa.sun_path, path);
	assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(s);
	assert_int_equal(tally_ctl_connect(path, msg, sizeof(msg)), -ECONNREFUSED);
	assert_non_null(strstr(msg, "refused"));
	struct tally_ctl_server *s2 = tally_ctl_server_create(&cfg, &B, &err);
	assert_non_null(s2);
	tally_ctl_server_destroy(s2);

	/* a regular file is never unlinked */
	int fd = open(path, O_CREAT | O_WRONLY, 0600);
	close(fd);
	assert_null(tally_ctl_server_create(&cfg, &B, &err));
	assert_int_equal(err, -EEXIST);
	assert_int_equal(tally_ctl_connect(path, msg, sizeof(msg)), -ENOTSOCK);
	unlink(path);

	/* parent directory created */
	char dir[96], sub[128];
	snprintf(dir, sizeof(dir), "/tmp/ctl-dir-%d", (int)getpid());
	snprintf(sub, sizeof(sub), "%s/t.sock", dir);
	cfg.path = sub;
	s2 = tally_ctl_server_create(&cfg, &B, &err);
	assert_non_null(s2);
	tally_ctl_server_destroy(s2);
	assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_calls_and_socket_file, start_default, teardown),
		cmocka_unit_test_setup_teardown(test_pipelined_and_batch, start_default, teardown),
		cmocka_unit_test_setup_teardown(test_large_answer, start_small_output, teardown),
		cmocka_unit_test_setup_teardown(test_malformed, start_default, teardown),
		cmocka_unit_test_setup_teardown(test_huge_request, start_default, teardown),
		cmocka_unit_test_setup_teardown(test_slow_clients, start_short_timeout, teardown),
		cmocka_unit_test_setup_teardown(test_many_clients, start_many, teardown),
		cmocka_unit_test_setup_teardown(test_peer_credentials, start_world_writable,
						teardown),
		cmocka_unit_test_setup_teardown(test_socket_mode_refuses_others, start_default,
						teardown),
		cmocka_unit_test_setup_teardown(test_socket_path_handling, start_default, teardown),
	};
	return cmocka_run_group_tests_name("ctl_server", tests, NULL, NULL);
}
