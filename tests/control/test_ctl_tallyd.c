/* SPDX-License-Identifier: Apache-2.0
 * test_ctl_tallyd.c — a real tallyd on a virtual device (net_tap, --no-huge), driven with
 * tallyctl while raw-protocol workers on the kernel side of the tap send traffic: every
 * command, --json parsed back and checked against that traffic, a live policy change
 * taking effect on the next round, DPDK telemetry, drain then shutdown with no lost result.
 * argv: TALLYD TALLYCTL. Needs root (tap device); skipped (77) otherwise.
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
#include <sys/socket.h>
#include <sys/un.h>
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
#define CHUNK 256 /* 1 KiB + headers: under the tap MTU of 1500 */
#define W 2

static const char *tallyd, *tallyctl;
static char sock[108], iface[16], prefix[32], logpath[64], my_ip[32], srv_ip[32];
static pid_t tpid = -1;
static struct uw w[W];
static char out[1 << 17], err[1 << 14];
static unsigned full_rounds; /* rounds both ranks completed, for the expected counters */

/* tallyctl against this appliance's socket (ctl_cli.c) */
static struct ctl_cli cli = { .sock = sock, .tag = "int", .out = out, .outcap = sizeof(out),
			      .err = err, .errcap = sizeof(err) };
#define ctl(...) ctl_cli_run(&cli, __VA_ARGS__)
/* tallyctl --json CMD ...: the parsed result (asserts exit 0). */
#define CTLJ(...) ctl_cli_json(&cli, ctl_cli_run(&cli, "--json", __VA_ARGS__, NULL))
#define geti(o, path) ctl_cli_geti(o, path, 0) /* 0 for an absent path */
#define key_quorum(key) ctl_cli_key_quorum(&cli, "7", key)
#define sleep_ms ctl_cli_sleep_ms
#define slurp ctl_cli_slurp

static void kill_tallyd(void)
{
	if (tpid > 0) {
		kill(tpid, SIGTERM);
		for (int i = 0; i < 100 && waitpid(tpid, NULL, WNOHANG) == 0; i++)
			sleep_ms(100);
		kill(tpid, SIGKILL);
		waitpid(tpid, NULL, 0);
		tpid = -1;
	}
	unlink(sock);
}

/* Start tallyd on the tap, its control socket given with sock_flag (--ctl-socket or its
 * alias --control), and one extra setting; 0 once it answers `status`, -1 if it never
 * does, else tallyd's exit status (it exited early; its output is in logpath). */
static int start_tallyd(const char *sock_flag, const char *opt, const char *val)
{
	tpid = fork();
	if (tpid == 0) {
		char port[64], ip[48];
		int fd = open(logpath, O_CREAT | O_TRUNC | O_WRONLY, 0600);
		dup2(fd, 1);
		dup2(fd, 2);
		snprintf(port, sizeof(port), "net_tap0,iface=%s", iface);
		snprintf(ip, sizeof(ip), "%s/24", srv_ip);
		execl(tallyd, tallyd, "--port", port, "--ip", ip, sock_flag, sock, "--mem", "64M",
		      "--mtu", "0", opt, val, "--", "--no-huge", "-m", "256", "--file-prefix",
		      prefix, "-l", "0,1", "--no-pci", (char *)NULL);
		_exit(98);
	}
	for (int i = 0; i < 200; i++) {
		int status;
		if (waitpid(tpid, &status, WNOHANG) == tpid) {
			tpid = -1;
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
		}
		if (ctl("status", NULL) == 0)
			return 0;
		sleep_ms(100);
	}
	return -1;
}

static int group_setup(void **state)
{
	char cmd[256];
	int id = (int)getpid();
	(void)state;

	snprintf(sock, sizeof(sock), "/tmp/ctl-int-%d.sock", id);
	snprintf(iface, sizeof(iface), "ctl%d", id % 100000);
	snprintf(prefix, sizeof(prefix), "ctl-int-%d", id);
	snprintf(logpath, sizeof(logpath), "/tmp/ctl-int-%d.log", id);
	snprintf(my_ip, sizeof(my_ip), "10.213.%d.1", id % 250);
	snprintf(srv_ip, sizeof(srv_ip), "10.213.%d.2", id % 250);
	if (start_tallyd("--ctl-socket", "--drain-timeout-ms", "3000") != 0) {
		kill_tallyd();
		slurp(logpath, out, sizeof(out));
		fprintf(stderr, "tallyd did not start:\n%s\n", out);
		return -1;
	}
	snprintf(cmd, sizeof(cmd), "ip addr add %s/24 dev %s && ip link set %s up", my_ip, iface,
		 iface);
	if (system(cmd) != 0) {
		kill_tallyd();
		return -1;
	}
	for (int r = 0; r < W; r++)
		if (uw_open(&w[r], my_ip, srv_ip, 9170, JOB, TOKEN, (uint32_t)r))
			return -1;
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	for (int r = 0; r < W; r++)
		uw_close(&w[r]);
	kill_tallyd();
	unlink(logpath);
	return 0;
}

static void push_chunk(int rank, uint32_t round, int chunk)
{
	float v[CHUNK];
	for (int i = 0; i < CHUNK; i++)
		v[i] = (float)(rank + 1) + (float)round * 10.0f + (float)i;
	assert_int_equal(uw_push(&w[rank], KEY, round, (uint32_t)(chunk * CHUNK), v, CHUNK), 0);
}

/* The next RESULT for rank: checks round, value (sum of the ranks in `ranks` mask) and
 * the contributor count. Returns the chunk index. */
static int expect_result(int rank, uint32_t round, unsigned ranks)
{
	struct tally_pkt p;
	int rc = uw_result(&w[rank], 3000, &p);
	if (rc) {
		ctl("stats", NULL);
		fail_msg("rank %d: no RESULT for round %u (%d); appliance counters:\n%s", rank,
			 round, rc, out);
	}
	assert_int_equal(p.hdr.round, round);
	assert_int_equal(p.hdr.count, CHUNK);
	unsigned n = (unsigned)__builtin_popcount(ranks);
	assert_int_equal(p.hdr.contrib, n);
	float v0, v5;
	memcpy(&v0, p.payload, 4);
	memcpy(&v5, p.payload + 20, 4);
	float want = 0;
	for (int r = 0; r < W; r++)
		if (ranks & (1u << r))
			want += (float)(r + 1) + (float)round * 10.0f;
	assert_true(v0 == want + n * (float)0 && v5 == want + (float)(n * 5));
	return (int)(p.hdr.offset / CHUNK);
}

static void full_round(uint32_t round)
{
	for (int r = 0; r < W; r++)
		for (int c = 0; c < NELEMS / CHUNK; c++)
			push_chunk(r, round, c);
	for (int r = 0; r < W; r++) {
		int seen = 0;
		for (int c = 0; c < NELEMS / CHUNK; c++)
			seen |= 1 << expect_result(r, round, (1u << W) - 1);
		assert_int_equal(seen, 3);
	}
	full_rounds++;
}

static void test_status_empty(void **state)
{
	(void)state;
	json_t *s = CTLJ("status");
	assert_int_equal(json_array_size(json_object_get(s, "cores")), 1);
	assert_int_equal(json_array_size(json_object_get(s, "ports")), 1);
	assert_string_equal(json_string_value(json_object_get(json_array_get(
		json_object_get(s, "ports"), 0), "ip")), srv_ip);
	assert_int_equal(geti(s, "jobs"), 0);
	assert_true(json_is_false(json_object_get(s, "draining")));
	json_decref(s);
	s = CTLJ("jobs");
	assert_int_equal(json_array_size(s), 0);
	json_decref(s);
	assert_int_equal(ctl("status", NULL), 0); /* human form */
	assert_non_null(strstr(out, "uptime_s"));
}

static void test_job_admission(void **state)
{
	(void)state;
	assert_int_equal(ctl("job-add", "7", "--no-auth", "--token", "0x1234abcd5678ef00",
			     "--world-size", "2", NULL), 0);
	/* same again: idempotent; another token: refused, nothing changes */
	assert_int_equal(ctl("job-add", "7", "--no-auth", "--token", "0x1234abcd5678ef00",
			     "--world-size", "2", NULL), 0);
	assert_int_equal(ctl("job-add", "7", "--no-auth", "--token", "5", "--world-size", "2", NULL), 1);
	assert_non_null(strstr(err, "another token"));
	assert_int_equal(ctl("job", "9", NULL), 1);
	assert_non_null(strstr(err, "no job 9"));
	json_t *j = CTLJ("job", "7");
	assert_int_equal(geti(j, "world_size"), 2);
	assert_int_equal(geti(j, "workers"), 0);
	json_decref(j);
}

static void test_traffic_counters(void **state)
{
	struct tally_register reg = { .nelems = NELEMS, .chunk_elems = CHUNK, .dtype = 0,
				      .participants = W, .quorum = W };
	(void)state;

	for (int r = 0; r < W; r++) {
		assert_int_equal(uw_join(&w[r], W), 0);
		assert_int_equal(uw_register(&w[r], KEY, &reg), 0);
	}
	for (uint32_t round = 0; round < 3; round++)
		full_round(round);

	json_t *s = CTLJ("stats");
	unsigned pushes = full_rounds * W * (NELEMS / CHUNK);
	assert_int_equal(geti(s, "totals.pushes"), pushes);
	assert_int_equal(geti(s, "totals.push_bytes"), (json_int_t)pushes * CHUNK * 4);
	assert_int_equal(geti(s, "totals.results"), pushes); /* fan-out: W per completion */
	assert_int_equal(geti(s, "totals.completions"), full_rounds * (NELEMS / CHUNK));
	assert_int_equal(geti(s, "totals.duplicates"), 0);
	assert_true(geti(s, "totals.joins") >= W);
	assert_true(geti(s, "totals.rx_pkts") >= pushes);
	assert_true(geti(s, "totals.tx_pkts") >= pushes);
	/* per-core and totals agree */
	assert_int_equal(geti(json_array_get(json_object_get(s, "cores"), 0), "pushes"), pushes);
	json_decref(s);

	json_t *ws = CTLJ("workers", "7");
	assert_int_equal(json_array_size(ws), W);
	for (int r = 0; r < W; r++) {
		json_t *x = json_array_get(ws, (size_t)r);
		assert_int_equal(geti(x, "rank"), r);
		assert_non_null(strstr(json_string_value(json_object_get(x, "addr")), my_ip));
	}
	json_decref(ws);

	json_t *ks = CTLJ("keys");
	assert_int_equal(json_array_size(ks), 1);
	json_t *k = json_array_get(ks, 0);
	assert_int_equal(geti(k, "key"), KEY);
	assert_int_equal(geti(k, "participants"), W);
	assert_int_equal(geti(k, "quorum"), W);
	assert_int_equal(geti(k, "chunks"), NELEMS / CHUNK);
	assert_int_equal(geti(k, "open_rounds"), 0);
	assert_int_equal(json_array_size(json_object_get(k, "missing")), 0);
	json_decref(ks);

	json_t *j = CTLJ("job", "7");
	assert_int_equal(geti(j, "workers"), W);
	assert_int_equal(geti(j, "keys"), 1);
	json_decref(j);
}

static void test_stuck_chunks(void **state)
{
	uint32_t round = full_rounds;
	(void)state;

	push_chunk(0, round, 0); /* rank 1 "hangs" */
	sleep_ms(60);
	json_t *st = CTLJ("stuck", "20");
	assert_int_equal(json_array_size(st), 1);
	json_t *c = json_array_get(st, 0);
	assert_int_equal(geti(c, "key"), KEY);
	assert_int_equal(geti(c, "round"), round);
	assert_int_equal(geti(c, "chunk"), 0);
	assert_int_equal(geti(c, "have"), 1);
	assert_true(geti(c, "age_ms") >= 20);
	assert_int_equal(json_array_size(json_object_get(c, "missing")), 1);
	assert_int_equal(json_integer_value(json_array_get(json_object_get(c, "missing"), 0)), 1);
	json_decref(st);
	st = CTLJ("stuck", "60000");
	assert_int_equal(json_array_size(st), 0);
	json_decref(st);
	json_t *ks = CTLJ("keys", "7");
	json_t *k = json_array_get(ks, 0);
	assert_int_equal(geti(k, "open_rounds"), 1);
	assert_int_equal(json_integer_value(json_array_get(json_object_get(k, "missing"), 0)), 1);
	json_decref(ks);
	/* human tables (CTL_SHOW=1 prints them) */
	assert_int_equal(ctl("stuck", "20", NULL), 0);
	assert_non_null(strstr(out, "missing"));
	if (getenv("CTL_SHOW"))
		fprintf(stderr, "%s", out);
	assert_int_equal(ctl("keys", NULL), 0);
	assert_non_null(strstr(out, "state=open"));
	if (getenv("CTL_SHOW"))
		fprintf(stderr, "%s", out);
	assert_int_equal(ctl("workers", NULL), 0);
	assert_non_null(strstr(out, my_ip));
	if (getenv("CTL_SHOW"))
		fprintf(stderr, "%s", out);
	assert_int_equal(ctl("stats", NULL), 0);
	if (getenv("CTL_SHOW"))
		fprintf(stderr, "%s", out);

	/* the rest of the round */
	push_chunk(0, round, 1);
	push_chunk(1, round, 0);
	push_chunk(1, round, 1);
	for (int r = 0; r < W; r++)
		for (int ch = 0; ch < 2; ch++)
			expect_result(r, round, 3);
	full_rounds++;
}

static void test_live_policy(void **state)
{
	(void)state;
	json_t *s0 = CTLJ("stats");
	json_int_t qc0 = geti(s0, "totals.quorum_completions");
	json_decref(s0);

	json_t *p = CTLJ("policy", "7", "--quorum", "1");
	assert_int_equal(geti(p, "keys_changed"), 1);
	json_decref(p);
	/* the next round completes with rank 0 alone */
	uint32_t round = full_rounds;
	push_chunk(0, round, 0);
	push_chunk(0, round, 1);
	expect_result(0, round, 1);
	expect_result(0, round, 1);
	/* every participant gets the completion's fan-out, rank 1 too (its push not in it) */
	expect_result(1, round, 1);
	expect_result(1, round, 1);
	/* rank 1 pushes late: answered with the result again, its push not added */
	push_chunk(1, round, 0);
	push_chunk(1, round, 1);
	expect_result(1, round, 1);
	expect_result(1, round, 1);
	json_t *s = CTLJ("stats");
	assert_int_equal(geti(s, "totals.quorum_completions") - qc0, 2);
	assert_int_equal(geti(s, "totals.late_pushes"), 2);
	json_decref(s);
	json_t *ks = CTLJ("keys");
	assert_int_equal(geti(json_array_get(ks, 0), "quorum"), 1);
	json_decref(ks);

	/* back to everyone (0 = all participants); the next round waits for both again */
	p = CTLJ("policy", "7", "--quorum", "0", "--deadline-us", "0");
	json_decref(p);
	full_rounds++;
	full_round(full_rounds);

	/* honest errors, nothing changed */
	assert_int_equal(ctl("policy", "7", "--deterministic", "true", NULL), 1);
	assert_non_null(strstr(err, "deterministic is fixed"));
	assert_int_equal(ctl("policy", "7", "--quorum", "3", NULL), 1);
	assert_non_null(strstr(err, "participants"));
	assert_int_equal(ctl("policy", "7", "--key", "99", "--quorum", "1", NULL), 1);
	assert_int_equal(ctl("policy", "8", "--quorum", "1", NULL), 1);
	ks = CTLJ("keys");
	assert_int_equal(geti(json_array_get(ks, 0), "quorum"), W);
	json_decref(ks);
}

/* A job's policy also governs keys registered after it was set, except keys given a
 * policy of their own. */
static void test_policy_later_keys(void **state)
{
	struct tally_register reg = { .nelems = CHUNK, .chunk_elems = CHUNK, .dtype = 0,
				      .participants = W, .quorum = W };
	json_int_t q = -1;
	(void)state;

	json_decref(CTLJ("policy", "7", "--quorum", "1"));
	for (int r = 0; r < W; r++)
		assert_int_equal(uw_register(&w[r], 2, &reg), 0);
	/* at once: the policy is the engine job's, applied when the key is created */
	q = key_quorum(2);
	assert_int_equal(q, 1);
	json_decref(CTLJ("policy", "7", "--key", "2", "--quorum", "2"));
	assert_int_equal(key_quorum(2), 2);
	for (int r = 0; r < W; r++)
		assert_int_equal(uw_register(&w[r], 3, &reg), 0);
	q = key_quorum(3);
	assert_int_equal(q, 1);
	assert_int_equal(key_quorum(2), 2); /* its own policy kept */
	/* a job-wide change applies to every key */
	json_decref(CTLJ("policy", "7", "--quorum", "0"));
	for (uint32_t k = 1; k <= 3; k++)
		assert_int_equal(key_quorum(k), W);
}

/* /tally/stats from the DPDK telemetry socket (a new reference). */
static json_t *tel_stats(void)
{
	char path[100], buf[16384];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	snprintf(path, sizeof(path), "/var/run/dpdk/%s/dpdk_telemetry.v2", prefix);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		close(fd);
		fail_msg("telemetry socket %s: %s", path, strerror(errno));
	}
	assert_true(read(fd, buf, sizeof(buf)) > 0); /* greeting */
	assert_int_equal(write(fd, "/tally/stats", 12), 12);
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_true(n > 0);
	buf[n] = '\0';
	json_t *t = json_loads(buf, 0, NULL);
	assert_non_null(t);
	json_t *s = json_incref(json_object_get(t, "/tally/stats"));
	json_decref(t);
	assert_non_null(s);
	return s;
}

/* DPDK telemetry socket: /tally/stats agrees with stats_get. */
static void test_telemetry(void **state)
{
	(void)state;
	json_t *t = tel_stats();
	json_t *s = CTLJ("stats");
	assert_int_equal(geti(t, "pushes"), geti(s, "totals.pushes"));
	assert_int_equal(geti(t, "results"), geti(s, "totals.results"));
	json_decref(t);
	json_decref(s);
}

/* Each counter of telemetry t read between stats a and b: a <= t <= b (counters only grow);
 * returns how many differ between a and b, the poll-loop counters (they move while idle)
 * left out. Recurses into drops and frame_drops. */
static int between(const json_t *a, const json_t *t, const json_t *b)
{
	const char *k;
	json_t *vb;
	int moved = 0;

	assert_int_equal(json_object_size(t), json_object_size(b));
	json_object_foreach((json_t *)b, k, vb) {
		const json_t *va = json_object_get(a, k), *vt = json_object_get(t, k);
		if (!vt)
			fail_msg("telemetry has no '%s'", k);
		if (json_is_object(vb)) {
			moved += between(va, vt, vb);
			continue;
		}
		json_int_t x = json_integer_value(va), y = json_integer_value(vt);
		json_int_t z = json_integer_value(vb);
		if (x > y || y > z)
			fail_msg("'%s': stats %lld, then telemetry %lld, then stats %lld", k,
				 (long long)x, (long long)y, (long long)z);
		if (x != z && strcmp(k, "loops") && strcmp(k, "busy_loops") &&
		    strcmp(k, "idle_sleeps"))
			moved++;
	}
	return moved;
}

/* Telemetry and `tallyctl stats --json` totals: the same names and, on an idle appliance
 * after traffic, the same values (a frame the kernel sends between the reads changes the
 * counters: read again then; the poll-loop counters always move, so they are bracketed). */
static void test_telemetry_same_counters(void **state)
{
	int moved = 1;
	(void)state;

	for (int i = 0; i < 20 && moved; i++) {
		json_t *s0 = CTLJ("stats");
		json_t *t = tel_stats();
		json_t *s1 = CTLJ("stats");

		assert_true(geti(s1, "totals.pushes") > 0); /* after traffic */
		moved = between(json_object_get(s0, "totals"), t, json_object_get(s1, "totals"));
		json_decref(s0);
		json_decref(s1);
		json_decref(t);
		if (moved)
			sleep_ms(100);
	}
	assert_int_equal(moved, 0);
}

static void test_config_and_admin(void **state)
{
	char cfg[64];
	(void)state;

	assert_int_equal(ctl("log-level", "debug", NULL), 0);
	snprintf(cfg, sizeof(cfg), "/tmp/ctl-int-%d.json", (int)getpid());
	assert_int_equal(ctl("config-save", cfg, NULL), 0);
	json_t *c = json_load_file(cfg, 0, NULL);
	unlink(cfg);
	assert_non_null(c);
	json_t *calls = json_object_get(c, "calls");
	int saw_job = 0, saw_policy = 0, saw_log = 0;
	size_t i;
	json_t *x;
	json_array_foreach(calls, i, x) {
		const char *m = json_string_value(json_object_get(x, "method"));
		json_t *p = json_object_get(x, "params");
		uint64_t tok = 0;
		if (!strcmp(m, "job_add")) {
			assert_int_equal(tally_ctl_get_u64(p, "token", &tok), 0);
			saw_job = geti(p, "job_id") == JOB && tok == TOKEN && geti(p, "world_size") == W;
		} else if (!strcmp(m, "job_set_policy")) {
			saw_policy = geti(p, "job_id") == JOB && geti(p, "quorum") == 0;
		} else if (!strcmp(m, "log_set_level")) {
			saw_log = !strcmp(json_string_value(json_object_get(p, "level")), "debug");
		}
	}
	assert_true(saw_job && saw_policy && saw_log);
	json_decref(c);

	/* admit, evict, evict again */
	assert_int_equal(ctl("job-add", "8", "--no-auth", "--token", "1", "--world-size", "4", NULL), 0);
	json_t *e = CTLJ("evict", "8");
	assert_int_equal(geti(e, "keys_freed"), 0);
	json_decref(e);
	assert_int_equal(ctl("evict", "8", NULL), 1);
	json_t *js = CTLJ("jobs");
	assert_int_equal(json_array_size(js), 1);
	json_decref(js);

	/* reset: counters start again from zero */
	assert_int_equal(ctl("stats-reset", NULL), 0);
	json_t *s = CTLJ("stats");
	assert_int_equal(geti(s, "totals.pushes"), 0);
	assert_int_equal(geti(s, "totals.results"), 0);
	json_decref(s);
	full_rounds = 0;
}

static void test_drain_then_shutdown(void **state)
{
	uint32_t round = 100; /* any later round works once the previous ones are acknowledged */
	(void)state;

	/* find the next round: keys_list shows the last started one */
	json_t *ks = CTLJ("keys");
	json_t *rounds = NULL;
	size_t i;
	json_t *x;
	json_array_foreach(ks, i, x)
		if (geti(x, "key") == KEY)
			rounds = json_object_get(x, "rounds");
	round = 0;
	json_array_foreach(rounds, i, x)
		if ((uint32_t)geti(x, "round") + 1 > round)
			round = (uint32_t)geti(x, "round") + 1;
	json_decref(ks);

	/* a round half done when the drain starts */
	push_chunk(0, round, 0);
	push_chunk(0, round, 1);
	json_t *d = CTLJ("drain");
	assert_true(json_is_true(json_object_get(d, "draining")));
	assert_int_equal(geti(d, "open_rounds"), 1);
	json_decref(d);
	/* it finishes: no result lost */
	push_chunk(1, round, 0);
	push_chunk(1, round, 1);
	for (int r = 0; r < W; r++)
		for (int c = 0; c < 2; c++)
			expect_result(r, round, 3);
	d = CTLJ("drain");
	assert_int_equal(geti(d, "open_rounds"), 0);
	json_decref(d);
	/* a new round is refused while draining */
	push_chunk(0, round + 1, 0);
	struct tally_pkt p;
	assert_int_not_equal(uw_result(&w[0], 300, &p), 0);
	json_t *s = CTLJ("stats");
	assert_true(geti(s, "totals.drops.draining") >= 1);
	assert_int_equal(geti(s, "totals.results"), 4);
	json_decref(s);
	s = CTLJ("status");
	assert_true(json_is_true(json_object_get(s, "draining")));
	json_decref(s);

	json_t *sh = CTLJ("shutdown");
	assert_true(json_is_true(json_object_get(sh, "stopping")));
	json_decref(sh);
	int status = -1;
	for (int k = 0; k < 150 && waitpid(tpid, &status, WNOHANG) == 0; k++)
		sleep_ms(100);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	tpid = -1;
	assert_int_equal(ctl("status", NULL), 3);
	assert_non_null(strstr(err, "missing"));
}

/* The job_add / job_set_policy calls of job 9 in a config-save file. */
static void saved_job9(const char *path, uint64_t *token, json_int_t *world,
		       json_int_t *quorum, json_int_t *deadline)
{
	json_t *c = json_load_file(path, 0, NULL), *x;
	size_t i;

	assert_non_null(c);
	*token = 0;
	*world = *quorum = *deadline = -1;
	json_array_foreach(json_object_get(c, "calls"), i, x) {
		const char *m = json_string_value(json_object_get(x, "method"));
		json_t *p = json_object_get(x, "params");
		if (geti(p, "job_id") != 9)
			continue;
		if (!strcmp(m, "job_add")) {
			assert_int_equal(tally_ctl_get_u64(p, "token", token), 0);
			*world = geti(p, "world_size");
		} else if (!strcmp(m, "job_set_policy")) {
			*quorum = geti(p, "quorum");
			*deadline = geti(p, "deadline_us");
		}
	}
	json_decref(c);
}

/* tallyctl config-save, then tallyd restarted with --control-config FILE: the job and its
 * policy are back. A file that cannot be replayed stops tallyd with exit 2. */
static void test_control_config_replay(void **state)
{
	char cfg[64], cfg2[64], bad[64];
	uint64_t tok;
	json_int_t world, quorum, deadline;
	(void)state;

	snprintf(cfg, sizeof(cfg), "/tmp/ctl-int-%d-a.json", (int)getpid());
	snprintf(cfg2, sizeof(cfg2), "/tmp/ctl-int-%d-b.json", (int)getpid());
	snprintf(bad, sizeof(bad), "/tmp/ctl-int-%d-c.json", (int)getpid());
	assert_int_equal(tpid, -1); /* the previous test shut it down */
	if (start_tallyd("--control", "--drain-timeout-ms", "3000") != 0) {
		slurp(logpath, out, sizeof(out));
		fail_msg("tallyd did not start:\n%s", out);
	}
	assert_int_equal(ctl("job-add", "9", "--no-auth", "--token", "0xfeed", "--world-size", "3",
			     NULL), 0);
	json_decref(CTLJ("policy", "9", "--quorum", "2", "--deadline-us", "5000"));
	assert_int_equal(ctl("config-save", cfg, NULL), 0);
	saved_job9(cfg, &tok, &world, &quorum, &deadline);
	assert_true(tok == 0xfeed && world == 3 && quorum == 2 && deadline == 5000);
	kill_tallyd();

	/* a fresh tallyd knows nothing of job 9 until it replays the file */
	if (start_tallyd("--control", "--control-config", cfg) != 0) {
		slurp(logpath, out, sizeof(out));
		unlink(cfg);
		fail_msg("tallyd --control-config did not start:\n%s", out);
	}
	json_t *js = CTLJ("jobs");
	assert_int_equal(json_array_size(js), 1);
	assert_int_equal(geti(json_array_get(js, 0), "job_id"), 9);
	json_decref(js);
	assert_int_equal(ctl("config-save", cfg2, NULL), 0);
	saved_job9(cfg2, &tok, &world, &quorum, &deadline);
	unlink(cfg2);
	assert_true(tok == 0xfeed && world == 3 && quorum == 2 && deadline == 5000);
	kill_tallyd();

	/* a file that does not replay: tallyd says so and exits 2 */
	FILE *f = fopen(bad, "w");
	assert_non_null(f);
	fputs("{\"calls\":[{\"method\":\"job_set_policy\",\"params\":{\"job_id\":77,"
	      "\"quorum\":1}}]}\n", f);
	fclose(f);
	int rc = start_tallyd("--control", "--control-config", bad);
	unlink(bad);
	unlink(cfg);
	if (rc == 0)
		kill_tallyd();
	assert_int_equal(rc, 2);
	slurp(logpath, out, sizeof(out));
	assert_non_null(strstr(out, "--control-config"));
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s TALLYD TALLYCTL\n", argv[0]);
		return 2;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "skipped: needs root for the tap device\n");
		return 77;
	}
	tallyd = argv[1];
	tallyctl = argv[2];
	cli.bin = tallyctl;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_status_empty),
		cmocka_unit_test(test_job_admission),
		cmocka_unit_test(test_traffic_counters),
		cmocka_unit_test(test_stuck_chunks),
		cmocka_unit_test(test_live_policy),
		cmocka_unit_test(test_policy_later_keys),
		cmocka_unit_test(test_telemetry),
		cmocka_unit_test(test_telemetry_same_counters),
		cmocka_unit_test(test_config_and_admin),
		cmocka_unit_test(test_drain_then_shutdown),
		cmocka_unit_test(test_control_config_replay),
	};
	return cmocka_run_group_tests_name("ctl_tallyd", tests, group_setup, group_teardown);
}
