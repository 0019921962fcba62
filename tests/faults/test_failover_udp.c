/* SPDX-License-Identifier: Apache-2.0
 * test_failover_udp.c — one of two appliances lost mid-run, with real processes: two
 * tally-udpd on loopback, three ranks (libtally_agent over its real network, one thread
 * each) summing two tensors round after round, every element of every round checked
 * against the exact sum. The fault comes while rounds are in flight:
 *   kill -9 of appliance 1 (no restart): the ranks move its keys to appliance 0 and finish;
 *   SIGTERM (drain) of appliance 1: the same, and the drained appliance exits 0 (it
 *   abandoned no round);
 *   kill -9 of both, one after the other: no hang, every rank fails within twice the
 *   operation timeout saying the appliance does not answer;
 * each rank counts one failover and shows appliance 1 gone / draining; where it died the
 * survivor counts the GONE report (tallyctl stats) and lists appliance 1 among the job's
 * gone appliances (tallyctl jobs);
 *   a false death: appliance 1 stays up, but what rank 0 sends it is dropped (a UDP relay,
 *   udp_relay.h) until rank 0 declares it dead; only rank 0 notices, the others learn it
 *   from the survivor with their rounds of the same keys still open on appliance 1 (they
 *   abandon those there and push them again on the survivor): every rank finishes with
 *   exact sums within a deadline, no hang (gpu_agent/README.md "Failover").
 *   test_failover_udp PATH_TO_TALLY_UDPD PATH_TO_TALLYCTL [--false-death] */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tally_agent.h"
#include "tally_sum.h"
#include "udp_relay.h"
#include "udpd_proc.h"

#define W 3
#define NB (256 * 1024) /* 1 MiB f32: 16 partitions of 64 KiB */
#define NS 1000
#define ITERS 40

static const char *udpd, *tallyctl;
static char tmpdir[64];

struct appl {
	pid_t pid;
	unsigned port;
	char sock[128];
};

static void appl_start(struct appl *a, int idx)
{
	char p[16], w[16], err[160];

	a->port = udpd_free_ports();
	snprintf(p, sizeof(p), "%u", a->port);
	snprintf(w, sizeof(w), "%u", W);
	snprintf(a->sock, sizeof(a->sock), "%s/ctl%d.sock", tmpdir, idx);
	snprintf(err, sizeof(err), "%s/udpd%d.err", tmpdir, idx);
	unlink(a->sock);
	a->pid = fork();
	if (a->pid == 0) {
		freopen(err, "a", stderr);
		freopen("/dev/null", "w", stdout);
		execl(udpd, udpd, "--addr", "127.0.0.1", "--port", p, "--cores", "2", "--mem",
		      "64M", "--det-pool", "4M", "--job", "7", "--no-auth", "--token", "1234", "--world", w,
		      "--ctl-socket", a->sock, "--drain-timeout-ms", "8000", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 200; i++) {
		struct stat st;
		if (stat(a->sock, &st) == 0)
			return;
		usleep(50000);
	}
	fail_msg("tally-udpd %d did not start (see %s)", idx, err);
}

static int appl_wait(struct appl *a)
{
	int st = 0;

	if (a->pid <= 0)
		return -1;
	waitpid(a->pid, &st, 0);
	a->pid = 0;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void appl_kill(struct appl *a)
{
	if (a->pid > 0) {
		kill(a->pid, SIGKILL);
		appl_wait(a);
	}
}

static struct appl ap[2];
static uint32_t op_timeout_ms = 20000;
static atomic_int done_iters[W];
static atomic_int may_leave; /* the job stays (no BYE) until the survivor was asked */
static unsigned via1[W];  /* a rank's port for appliance 1 other than its own (a relay) */
static struct tally_agent *_Atomic agent_of[W]; /* each rank's agent while it runs */
static int gate_round = -1;  /* rank 0 waits before this round until gate_open */
static atomic_int at_gate, gate_open;

struct worker {
	int rank, rc;
	float *x, *s;
	char err[512];
	struct tally_agent_stats st;
	int live1;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct tally_agent_cfg c;
	char list[64];
	int err = 0;

	tally_agent_cfg_defaults(&c);
	snprintf(list, sizeof(list), "127.0.0.1:%u,127.0.0.1:%u", ap[0].port,
		 via1[w->rank] ? via1[w->rank] : ap[1].port);
	if (tally_agent_parse_appliances(&c, list, w->err, sizeof(w->err))) {
		w->rc = -1;
		return NULL;
	}
	c.job_id = 7;
	c.token = 1234;
	c.rank = w->rank;
	c.world_size = W;
	c.local_rank = 0;
	c.local_size = 1;
	c.partition_bytes = 64 * 1024;
	c.credit_bytes = 512 * 1024;
	c.average = 0;
	c.connect_timeout_ms = 15000;
	c.op_timeout_ms = op_timeout_ms;
	struct tally_agent *a = tally_agent_create(&c, &err, w->err, sizeof(w->err));
	if (!a) {
		w->rc = err ? err : -1;
		return NULL;
	}
	atomic_store(&agent_of[w->rank], a);
	int tb = tally_agent_declare(a, "big", NB * 4, TALLY_DT_F32, 0);
	int ts = tally_agent_declare(a, "small", NS * 4, TALLY_DT_F32, 1);
	if (tb < 0 || ts < 0) {
		snprintf(w->err, sizeof(w->err), "declare: %s", tally_agent_strerror(a));
		w->rc = -2;
	}
	for (int it = 0; it < ITERS && !w->rc; it++) {
		if (w->rank == 0 && it == gate_round) {
			atomic_store(&at_gate, 1);
			while (!atomic_load(&gate_open))
				usleep(1000);
		}
		for (int i = 0; i < NB; i++)
			w->x[i] = (float)(w->rank * 100 + it) + (float)(i % 17);
		for (int i = 0; i < NS; i++)
			w->s[i] = (float)(w->rank + i);
		int hs = tally_agent_push_pull(a, ts, w->s, NS * 4, TALLY_AGENT_CPU, NULL, NULL, NULL);
		int hb = tally_agent_push_pull(a, tb, w->x, NB * 4, TALLY_AGENT_CPU, NULL, NULL, NULL);
		int r1 = hb < 0 ? hb : tally_agent_wait(a, hb);
		int r2 = hs < 0 ? hs : tally_agent_wait(a, hs);
		if (r1 || r2) {
			snprintf(w->err, sizeof(w->err), "round %d: %s", it, tally_agent_strerror(a));
			w->rc = -3;
			break;
		}
		/* exact sums: small integers in f32 */
		for (int i = 0; i < NB && !w->rc; i++)
			if (w->x[i] != (float)(300 + W * it) + (float)(W * (i % 17))) {
				snprintf(w->err, sizeof(w->err), "round %d big[%d] = %g", it, i, w->x[i]);
				w->rc = -4;
			}
		for (int i = 0; i < NS && !w->rc; i++)
			if (w->s[i] != (float)(3 + W * i)) {
				snprintf(w->err, sizeof(w->err), "round %d small[%d] = %g", it, i, w->s[i]);
				w->rc = -4;
			}
		atomic_store(&done_iters[w->rank], it + 1);
	}
	tally_agent_get_stats(a, &w->st);
	w->live1 = tally_agent_liveness(a, 1, NULL);
	for (int i = 0; i < 3000 && !atomic_load(&may_leave); i++)
		usleep(10000);
	atomic_store(&agent_of[w->rank], NULL);
	tally_agent_destroy(a);
	return NULL;
}

/* No rank stopped on an error (a failed rank never reaches ITERS). */
/* One rank's outcome on stdout; its buffers freed. */
static void report_rank(struct worker *w, int r)
{
	printf("# rank %d: rc %d failovers %llu moved pushes %llu appliance 1 liveness %d %s\n",
	       r, w[r].rc, (unsigned long long)w[r].st.failovers,
	       (unsigned long long)w[r].st.moved_pushes, w[r].live1, w[r].err);
	free(w[r].x);
	free(w[r].s);
}

static int all_running(const struct worker *w)
{
	for (int r = 0; r < W; r++)
		if (w[r].rc)
			return 0;
	return 1;
}

static int min_done(void)
{
	int m = ITERS;

	for (int r = 0; r < W; r++) {
		int d = atomic_load(&done_iters[r]);
		m = d < m ? d : m;
	}
	return m;
}

/* tallyctl --json CMD of the survivor, the text after "name": (NULL if absent). */
static const char *ctl_field(const char *sock, const char *what, const char *name)
{
	static char buf[65536];
	char cmd[512];
	size_t n;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "%s --socket %s --json %s 2>&1", tallyctl, sock, what);
	f = popen(cmd, "r");
	if (!f)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	pclose(f);
	buf[n] = 0;
	char key[96];
	snprintf(key, sizeof(key), "\"%s\":", name);
	const char *p = strstr(buf, key);
	if (!p) {
		printf("# tallyctl %s: %.300s\n", what, buf);
		return NULL;
	}
	return p + strlen(key);
}

static long ctl_counter(const char *sock, const char *name)
{
	const char *v = ctl_field(sock, "stats", name);

	return v ? strtol(v, NULL, 10) : -1;
}

/* Does the survivor (appliance 0) list appliance 1, and only it, among job 7's gone? */
static int survivor_lists_1(void)
{
	const char *g = ctl_field(ap[0].sock, "jobs", "gone_appliances");
	char set[16] = "";

	for (unsigned i = 0, n = 0; g && g[i] && g[i - (i > 0)] != ']' && n + 1 < sizeof(set); i++)
		if (g[i] != ' ' && g[i] != '\n')
			set[n++] = g[i]; /* the JSON array without its spacing */
	printf("# survivor: job 7 gone_appliances %s\n", set);
	return strcmp(set, "[1]") == 0;
}

static void run_fault(int sig, struct worker *w)
{
	pthread_t t[W];
	int listed = 0;

	appl_start(&ap[0], 0);
	appl_start(&ap[1], 1);
	for (int r = 0; r < W; r++) {
		atomic_store(&done_iters[r], 0);
		w[r] = (struct worker){.rank = r, .x = malloc(NB * 4), .s = malloc(NS * 4)};
		pthread_create(&t[r], NULL, worker_main, &w[r]);
	}
	while (min_done() < 8)
		usleep(2000);
	kill(ap[1].pid, sig); /* the ranks are in round 8 or 9: partitions in flight */
	printf("# %s appliance 1 after %d rounds\n", sig == SIGKILL ? "kill -9" : "SIGTERM",
	       min_done());
	/* every rank through the last round: the survivor's view, then BYE */
	while (min_done() < ITERS && all_running(w))
		usleep(5000);
	listed = survivor_lists_1();
	atomic_store(&may_leave, 1);
	for (int r = 0; r < W; r++)
		pthread_join(t[r], NULL);
	atomic_store(&may_leave, 0);
	for (int r = 0; r < W; r++) {
		report_rank(w, r);
	}
	for (int r = 0; r < W; r++) {
		if (w[r].rc)
			fail_msg("rank %d: %d %s", r, w[r].rc, w[r].err);
		assert_int_equal(w[r].st.push_pulls, 2 * ITERS);
		assert_int_equal(w[r].st.failovers, 1);
	}
	/* dead: reported GONE; draining: each key moved on its own refusal, which may be all
	 * before the drained appliance exits (then nobody had to report it) */
	if (sig == SIGKILL)
		assert_true(listed);
}

static void test_kill9_one_of_two(void **state)
{
	(void)state;
	struct worker w[W];

	run_fault(SIGKILL, w);
	appl_wait(&ap[1]);
	for (int r = 0; r < W; r++)
		assert_int_equal(w[r].live1, TALLY_AGENT_GONE);
	/* the survivor heard the dead appliance reported (and passed it on) */
	long g = ctl_counter(ap[0].sock, "gone_reports");
	printf("# survivor gone_reports %ld\n", g);
	assert_true(g >= 1);
	appl_kill(&ap[0]);
}

static void test_drain_one_of_two(void **state)
{
	(void)state;
	struct worker w[W];

	run_fault(SIGTERM, w);
	int rc = appl_wait(&ap[1]);
	printf("# drained appliance exit status %d\n", rc);
	/* 0, or 3 when a round it held open was moved to the survivor by the workers
	 * (refused to one rank, so it never completed here): the sums are checked below */
	assert_true(rc == 0 || rc == 3);
	for (int r = 0; r < W; r++)
		assert_true(w[r].live1 == TALLY_AGENT_DRAINING || w[r].live1 == TALLY_AGENT_GONE);
	appl_kill(&ap[0]);
}

/* Both appliances lost (kill -9 of 1, the ranks move to 0, then kill -9 of 0): nothing
 * hangs, every rank's push_pull fails within twice op_timeout_ms saying the appliance does
 * not answer and there is nowhere left to go. */
static void test_both_lost(void **state)
{
	(void)state;
	struct worker w[W];
	pthread_t t[W];
	struct timespec t0, t1;

	op_timeout_ms = 2000;
	appl_start(&ap[0], 0);
	appl_start(&ap[1], 1);
	atomic_store(&may_leave, 1);
	for (int r = 0; r < W; r++) {
		atomic_store(&done_iters[r], 0);
		w[r] = (struct worker){.rank = r, .x = malloc(NB * 4), .s = malloc(NS * 4)};
		pthread_create(&t[r], NULL, worker_main, &w[r]);
	}
	while (min_done() < 4)
		usleep(2000);
	appl_kill(&ap[1]);
	int at = min_done();
	while (min_done() < at + 3 && all_running(w))
		usleep(2000); /* through the failover: rounds on appliance 0 alone */
	appl_kill(&ap[0]);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int r = 0; r < W; r++)
		pthread_join(t[r], NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("# both lost: ranks returned %.1f s after the second kill\n", s);
	op_timeout_ms = 20000;
	for (int r = 0; r < W; r++) {
		printf("# rank %d: rc %d after %d rounds: %s\n", r, w[r].rc, w[r].rc ? -1 : ITERS,
		       w[r].err);
		assert_int_equal(w[r].rc, -3);
		/* the session's give-up names the silent appliance and for how long */
		assert_non_null(strstr(w[r].err, "unreachable for"));
		assert_non_null(strstr(w[r].err, "appliance 0"));
		assert_int_equal(w[r].st.failovers, 1);
		free(w[r].x);
		free(w[r].s);
	}
	assert_true(s < 2 * 2.0 + 5.0);
	atomic_store(&may_leave, 0);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double timeout_mult(void)
{
	const char *m = getenv("TALLY_TIMEOUT_MULTIPLIER");
	double v = m ? atof(m) : 1.0;

	return v >= 1.0 ? v : 1.0;
}

static struct udp_relay relay;

/* Rank `r`'s view of appliance 1 (enum tally_agent_liveness), -1 while it has no agent. */
static int live_of(int r)
{
	struct tally_agent *a = atomic_load(&agent_of[r]);

	return a ? tally_agent_liveness(a, 1, NULL) : -1;
}

/* A false death (the hang this guards against: ranks that learned the death from the
 * survivor kept their open rounds on appliance 1, which waited for rank 0, while rank 0
 * waited for them on the survivor). Rank 0 reaches appliance 1 through a relay; before
 * round 8 rank 0 waits at a gate until the relay drops `mode` (UDP_RELAY_STALL_*) between
 * it and appliance 1, until rank 0 declares appliance 1 dead, then it passes again.
 * Appliance 1 never stops and keeps answering the others, so only rank 0 finds it dead;
 * the others may have pushed round 8 there already (they are not held):
 *  - both ways: appliance 1 completes no round that rank 0 did not (every round before 8
 *    was complete for rank 0): everyone's round 8 moves;
 *  - only its answers to rank 0: appliance 1 completes round 8 (of the keys rank 0 pushed
 *    before it gave up) for ranks 1 and 2, who go on to round 9, while rank 0 pushes
 *    round 8 again on the survivor: the survivor asks them for round 8's sum (NEED_RESULT),
 *    which they carried over from appliance 1's session.
 * The operation timeout is 60 s: every rank must finish all rounds, exact, within 20 s
 * (x TALLY_TIMEOUT_MULTIPLIER) of the stall. The workers live in statics: a hung rank
 * outlives this function. */
static void false_death(int mode)
{
	static struct worker w[W];
	static pthread_t t[W];
	double mult = timeout_mult();

	op_timeout_ms = 60000;
	gate_round = 8;
	atomic_store(&at_gate, 0);
	atomic_store(&gate_open, 0);
	appl_start(&ap[0], 0);
	appl_start(&ap[1], 1);
	if (udp_relay_start(&relay, ap[1].port))
		fail_msg("udp relay: no free ports or sockets");
	via1[0] = relay.port;
	for (int r = 0; r < W; r++) {
		atomic_store(&done_iters[r], 0);
		w[r] = (struct worker){.rank = r, .x = malloc(NB * 4), .s = malloc(NS * 4)};
		pthread_create(&t[r], NULL, worker_main, &w[r]);
	}
	while (!atomic_load(&at_gate) && all_running(w))
		usleep(2000);
	atomic_store(&relay.stall, mode);
	atomic_store(&gate_open, 1);
	double t0 = now_s(), end = t0 + 20.0 * mult;
	while (live_of(0) != TALLY_AGENT_GONE && all_running(w) && now_s() < t0 + 10.0 * mult)
		usleep(2000);
	double found = now_s() - t0;
	usleep(200000); /* rank 0's probes of appliance 1 stop reaching it a while longer */
	atomic_store(&relay.stall, 0);
	printf("# stall from round %d: rank 0 declared appliance 1 dead after %.2f s; %lu of "
	       "its packets to appliance 1 dropped, %lu back; ranks 1, 2 see appliance 1 as %d, "
	       "%d\n", gate_round, found, atomic_load(&relay.dropped),
	       atomic_load(&relay.dropped_back), live_of(1), live_of(2));
	while (min_done() < ITERS && all_running(w) && now_s() < end)
		usleep(5000);
	double took = now_s() - t0;
	int finished = min_done() == ITERS;
	printf("# %s %.1f s after the stall began (deadline %.0f s): rounds done %d %d %d\n",
	       finished ? "every rank finished" : "NOT finished", took, end - t0,
	       atomic_load(&done_iters[0]), atomic_load(&done_iters[1]),
	       atomic_load(&done_iters[2]));
	if (!finished) {
		for (int r = 0; r < W; r++)
			printf("# rank %d: rc %d %s\n", r, w[r].rc, w[r].err);
		fail_msg("a rank hung or failed after a false death of appliance 1 (the "
			 "survivor's gone set must move the other ranks' open rounds too)");
	}
	int listed = survivor_lists_1();
	atomic_store(&may_leave, 1);
	for (int r = 0; r < W; r++)
		pthread_join(t[r], NULL);
	atomic_store(&may_leave, 0);
	via1[0] = 0;
	gate_round = -1;
	op_timeout_ms = 20000;
	unsigned long long others_moved = 0;
	for (int r = 0; r < W; r++) {
		report_rank(w, r);
		if (r)
			others_moved += w[r].st.moved_pushes;
	}
	for (int r = 0; r < W; r++) {
		if (w[r].rc)
			fail_msg("rank %d: %d %s", r, w[r].rc, w[r].err);
		assert_int_equal(w[r].st.push_pulls, 2 * ITERS);
		assert_int_equal(w[r].st.failovers, 1);
		assert_int_equal(w[r].live1, TALLY_AGENT_GONE);
	}
	/* ranks 1 and 2 never saw appliance 1 fail: what they moved, they abandoned there
	 * (answers lost: they may have had nothing open there when they learned it) */
	if (mode == UDP_RELAY_STALL_BOTH)
		assert_true(others_moved >= 1);
	assert_true(listed);
	assert_true(took < 20.0 * mult);
	long asks = ctl_counter(ap[0].sock, "need_asks"), inst = ctl_counter(ap[0].sock, "installs");
	printf("# survivor need_asks %ld installs %ld\n", asks, inst);
	/* answers lost: the round completed on appliance 1 came to rank 0 from the survivor */
	if (mode == UDP_RELAY_STALL_DOWN)
		assert_true(inst >= 1);
}

static void test_false_death(void **state)
{
	(void)state;
	false_death(UDP_RELAY_STALL_BOTH);
}

static void test_false_death_completed(void **state)
{
	(void)state;
	false_death(UDP_RELAY_STALL_DOWN);
}

static int teardown(void **state)
{
	(void)state;
	udp_relay_stop(&relay);
	appl_kill(&ap[0]);
	appl_kill(&ap[1]);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s TALLY_UDPD TALLYCTL [--false-death]\n", argv[0]);
		return 2;
	}
	udpd = argv[1];
	tallyctl = argv[2];
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/tally-failover.XXXXXX");
	if (!mkdtemp(tmpdir))
		return 1;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_kill9_one_of_two, teardown),
		cmocka_unit_test_teardown(test_drain_one_of_two, teardown),
		cmocka_unit_test_teardown(test_both_lost, teardown),
		/* last: on failure its hung ranks stay until the process exits */
		cmocka_unit_test_teardown(test_false_death, teardown),
		cmocka_unit_test_teardown(test_false_death_completed, teardown),
	};
	/* --false-death: those tests alone (to show them hang without the fix, quickly) */
	int rc = argc > 3 && !strcmp(argv[3], "--false-death")
			 ? _cmocka_run_group_tests("false_death", tests + 3, 2, NULL, NULL)
			 : cmocka_run_group_tests(tests, NULL, NULL);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	if (rc == 0 && system(cmd)) /* keep the appliances' logs of a failed run */
		rc = 1;
	return rc;
}
