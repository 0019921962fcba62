/* SPDX-License-Identifier: Apache-2.0
 * test_ctl_udpd.c — tally-udpd (the appliance over kernel UDP) driven with tallyctl over
 * the same control socket server as tallyd: status, job-add, raw-protocol workers on
 * loopback, `tallyctl --json stats` checked against that traffic, jobs, keys, workers, a
 * job policy that a key registered right after it gets at once, config-save, shutdown.
 * argv: TALLY_UDPD TALLYCTL. No root needed.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include "tally_ctl.h"

#include "ctl_cli.h"
#include "udp_worker.h"

#define JOB 7
#define TOKEN 0x1234abcd5678ef00ull
#define KEY 1
#define NELEMS 512
#define CHUNK 256
#define W 2

static const char *udpd, *tallyctl;
static char sock[108], logpath[64], statspath[64];
static pid_t upid = -1;
static uint16_t port;
static struct uw w[W];
static char out[1 << 17], err[1 << 14];

/* tallyctl against this appliance's socket (ctl_cli.c) */
static struct ctl_cli cli = { .sock = sock, .tag = "udpd", .out = out, .outcap = sizeof(out),
			      .err = err, .errcap = sizeof(err) };
#define ctl(...) ctl_cli_run(&cli, __VA_ARGS__)
/* tallyctl --json CMD ...: the parsed result (asserts exit 0). */
#define CTLJ(...) ctl_cli_json(&cli, ctl_cli_run(&cli, "--json", __VA_ARGS__, NULL))
#define geti(o, path) ctl_cli_geti(o, path, -1) /* -1 for an absent path */
#define key_quorum(key) ctl_cli_key_quorum(&cli, "7", key)
#define sleep_ms ctl_cli_sleep_ms
#define slurp ctl_cli_slurp

static int group_setup(void **state)
{
	char p[16];
	int id = (int)getpid();
	(void)state;

	snprintf(sock, sizeof(sock), "/tmp/ctl-udpd-%d.sock", id);
	snprintf(logpath, sizeof(logpath), "/tmp/ctl-udpd-%d.log", id);
	snprintf(statspath, sizeof(statspath), "/tmp/ctl-udpd-%d.json", id);
	port = (uint16_t)(30000 + (id % 10000) * 2);
	snprintf(p, sizeof(p), "%u", port);
	upid = fork();
	if (upid == 0) {
		int fd = open(logpath, O_CREAT | O_TRUNC | O_WRONLY, 0600);
		dup2(fd, 1);
		dup2(fd, 2);
		execl(udpd, udpd, "--ip", "127.0.0.1", "--base-port", p, "--cores", "2", "--mem",
		      "64M", "--ctl-socket", sock, "--stats", statspath, (char *)NULL);
		_exit(98);
	}
	for (int i = 0; i < 100; i++) {
		if (waitpid(upid, NULL, WNOHANG) == upid) {
			upid = -1;
			slurp(logpath, out, sizeof(out));
			fprintf(stderr, "tally-udpd exited early:\n%s\n", out);
			return -1;
		}
		if (ctl("status", NULL) == 0)
			break;
		sleep_ms(50);
	}
	for (int r = 0; r < W; r++)
		if (uw_open(&w[r], "127.0.0.1", "127.0.0.1", port, JOB, TOKEN, (uint32_t)r))
			return -1;
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	for (int r = 0; r < W; r++)
		uw_close(&w[r]);
	if (upid > 0) {
		kill(upid, SIGKILL);
		waitpid(upid, NULL, 0);
	}
	unlink(sock);
	unlink(logpath);
	unlink(statspath);
	return 0;
}

static void full_round(uint32_t key, uint32_t round)
{
	float v[CHUNK];
	struct tally_pkt p;

	for (int i = 0; i < CHUNK; i++)
		v[i] = (float)i;
	for (int r = 0; r < W; r++)
		for (int c = 0; c < NELEMS / CHUNK; c++)
			assert_int_equal(uw_push(&w[r], key, round, (uint32_t)(c * CHUNK), v, CHUNK), 0);
	for (int r = 0; r < W; r++)
		for (int c = 0; c < NELEMS / CHUNK; c++) {
			assert_int_equal(uw_result(&w[r], 3000, &p), 0);
			assert_int_equal(p.hdr.round, round);
			assert_int_equal(p.hdr.contrib, W);
		}
}

static void test_status_and_job(void **state)
{
	(void)state;
	json_t *s = CTLJ("status");
	assert_int_equal(json_array_size(json_object_get(s, "cores")), 2);
	assert_string_equal(json_string_value(json_object_get(s, "transport")), "kernel-udp");
	json_decref(s);
	json_decref(CTLJ("job-add", "7", "--no-auth", "--token", "0x1234abcd5678ef00",
			 "--world-size", "2"));
	json_t *j = CTLJ("job", "7");
	assert_int_equal(geti(j, "world_size"), W);
	json_decref(j);
}

static void test_stats_json(void **state)
{
	struct tally_register reg = { .nelems = NELEMS, .chunk_elems = CHUNK, .dtype = 0,
				      .participants = W, .quorum = W };
	(void)state;

	for (int r = 0; r < W; r++) {
		assert_int_equal(uw_join(&w[r], W), 0);
		assert_int_equal(uw_register(&w[r], KEY, &reg), 0);
	}
	for (uint32_t round = 0; round < 3; round++)
		full_round(KEY, round);
	json_t *s = CTLJ("stats");
	unsigned pushes = 3 * W * (NELEMS / CHUNK);
	assert_int_equal(geti(s, "totals.pushes"), pushes);
	assert_int_equal(geti(s, "totals.push_bytes"), (json_int_t)pushes * CHUNK * 4);
	assert_int_equal(geti(s, "totals.results"), pushes);
	assert_int_equal(geti(s, "totals.completions"), 3 * (NELEMS / CHUNK));
	assert_int_equal(geti(s, "totals.duplicates"), 0);
	assert_true(geti(s, "totals.joins") >= W);
	assert_true(geti(s, "totals.rx_pkts") >= pushes);
	assert_true(geti(s, "totals.tx_pkts") >= pushes);
	assert_int_equal(geti(s, "totals.drops.wrong_token"), 0); /* every reason is shown */
	assert_int_equal(json_array_size(json_object_get(s, "cores")), 2);
	json_decref(s);
	json_t *ws = CTLJ("workers", "7");
	assert_int_equal(json_array_size(ws), W);
	json_decref(ws);
	json_t *ks = CTLJ("keys");
	assert_int_equal(json_array_size(ks), 1);
	assert_int_equal(geti(json_array_get(ks, 0), "open_rounds"), 0);
	json_decref(ks);
}

static void test_policy_and_config(void **state)
{
	struct tally_register reg = { .nelems = CHUNK, .chunk_elems = CHUNK, .dtype = 0,
				      .participants = W, .quorum = W };
	(void)state;

	json_decref(CTLJ("policy", "7", "--quorum", "1"));
	for (int r = 0; r < W; r++)
		assert_int_equal(uw_register(&w[r], 2, &reg), 0);
	assert_int_equal(key_quorum(2), 1); /* at once */
	assert_int_equal(key_quorum(KEY), 1);
	json_t *c = CTLJ("config-save");
	char *t = json_dumps(c, JSON_COMPACT);
	assert_non_null(strstr(t, "job_set_policy"));
	assert_non_null(strstr(t, "job_add"));
	free(t);
	json_decref(c);
}

static void test_shutdown(void **state)
{
	char stats[8192];
	int status;
	(void)state;

	json_decref(CTLJ("shutdown"));
	for (int i = 0; i < 100 && waitpid(upid, &status, WNOHANG) == 0; i++)
		sleep_ms(50);
	upid = -1;
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	slurp(statspath, stats, sizeof(stats));
	json_t *s = json_loads(stats, 0, NULL);
	assert_non_null(s);
	assert_int_equal(geti(s, "pushes"), 3 * W * (NELEMS / CHUNK));
	json_decref(s);
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
		cmocka_unit_test(test_status_and_job),
		cmocka_unit_test(test_stats_json),
		cmocka_unit_test(test_policy_and_config),
		cmocka_unit_test(test_shutdown),
	};
	return cmocka_run_group_tests_name("ctl_udpd", tests, group_setup, group_teardown);
}
