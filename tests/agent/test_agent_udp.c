/* SPDX-License-Identifier: Apache-2.0
 * test_agent_udp.c — libtally_agent over its real network (client sessions on kernel UDP)
 * against a software appliance process (tally-udpd, appliance/udpd: the engine over UDP) on
 * loopback: 4 agents (threads) sum f32 tensors over several rounds, with averaging; an
 * unreachable appliance (a silent port: the timeout; nothing listening: ECONNREFUSED at once) and
 * a wrong job token fail with messages that say so; the sharded
 * local mode (2 machines x 2 local ranks, one job per lane) against an open-admission one;
 * owner mode (TALLY_AGENT_NO_RESULT): the sums reach only the rank that asked for them.
 *   test_agent_udp PATH_TO_TALLY_UDPD */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tally_agent.h"
#include "udpd_proc.h"
#include "tally_sum.h"

static const char *udpd;
static pid_t appl_pid, open_pid;
static unsigned port, open_port;

static void start_appliance(pid_t *pid, unsigned *pport, int open_adm)
{
	udpd_start(udpd, pid, pport, open_adm ? 0 : 4);
}

static void stop_appliance(pid_t *pid)
{
	udpd_stop(pid);
}

static void cfg_for(struct tally_agent_cfg *c, int rank, uint64_t token, unsigned p)
{
	char list[64];

	tally_agent_cfg_defaults(c);
	snprintf(list, sizeof(list), "127.0.0.1:%u", p);
	assert_int_equal(tally_agent_parse_appliances(c, list, NULL, 0), 0);
	c->job_id = 7;
	c->token = token;
	c->rank = rank;
	c->world_size = 4;
	c->local_rank = rank;
	c->local_size = 4;
	c->partition_bytes = 64 * 1024;
	c->credit_bytes = 256 * 1024;
	c->average = 1;
	c->connect_timeout_ms = 15000;
	c->op_timeout_ms = 10000;
}

#define N 100003 /* ~400 KB: 7 partitions */

struct worker {
	int rank, rc;
	int gso;       /* tally_agent_gso of the appliance after the rounds */
	float *x;
	char err[512];
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct tally_agent_cfg c;
	int err = 0;

	cfg_for(&c, w->rank, 1234, port);
	struct tally_agent *a = tally_agent_create(&c, &err, w->err, sizeof(w->err));
	if (!a) {
		w->rc = err ? err : -1;
		return NULL;
	}
	int t = tally_agent_declare(a, "layer0.grad", N * 4, TALLY_DT_F32, 0);
	int t2 = tally_agent_declare(a, "layer1.grad", 1000 * 4, TALLY_DT_F32, 1);
	static __thread float small[1000];
	if (t < 0 || t2 < 0) {
		snprintf(w->err, sizeof(w->err), "%s", tally_agent_strerror(a));
		w->rc = -2;
	}
	for (int it = 0; it < 5 && !w->rc; it++) {
		for (int i = 0; i < N; i++)
			w->x[i] = (float)(w->rank * 4 + it) + (float)(i % 13);
		for (int i = 0; i < 1000; i++)
			small[i] = (float)w->rank;
		int h2 = tally_agent_push_pull(a, t2, small, sizeof(small), TALLY_AGENT_CPU, NULL, NULL, NULL);
		int h = tally_agent_push_pull(a, t, w->x, N * 4, TALLY_AGENT_CPU, NULL, NULL, NULL);
		if (h < 0 || h2 < 0 || tally_agent_wait(a, h) || tally_agent_wait(a, h2)) {
			snprintf(w->err, sizeof(w->err), "it %d: %s", it, tally_agent_strerror(a));
			w->rc = -3;
		}
		for (int i = 0; i < 1000 && !w->rc; i++)
			if (small[i] != 1.5f)
				w->rc = -4;
	}
	w->gso = tally_agent_gso(a, 0);
	tally_agent_destroy(a);
	return NULL;
}

static void test_sum_4(void **state)
{
	(void)state;
	struct worker w[4];
	pthread_t t[4];

	for (int r = 0; r < 4; r++) {
		w[r] = (struct worker){.rank = r, .x = malloc(N * sizeof(float))};
		pthread_create(&t[r], NULL, worker_main, &w[r]);
	}
	for (int r = 0; r < 4; r++)
		pthread_join(t[r], NULL);
	for (int r = 0; r < 4; r++) {
		if (w[r].rc)
			fail_msg("rank %d: %d %s", r, w[r].rc, w[r].err);
		/* average over ranks of rank*4 + 4 + i%13 = 6 + 4 + i%13 */
		for (int i = 0; i < N; i++)
			assert_float_equal(w[r].x[i], 10.0f + (float)(i % 13), 1e-5);
		free(w[r].x);
		/* TALLY_GSO unset: tally-udpd's JOIN_OK offered TALLY_CAP_GSO, so GSO is on */
		assert_string_equal(tally_agent_gso_name(w[r].gso), "on (auto)");
	}
}

/* Owner mode (TALLY_AGENT_NO_RESULT): rank 0 wants the sums of a tensor, ranks 1-3 only
 * contribute. Rank 0's result is exact; the others' partitions complete on header-only
 * RESULTs (no sum payload reaches them), whatever their buffers hold afterwards. */
struct nr_worker {
	int rank, rc;
	struct tally_agent_stats st;
	float x[N];
	char err[512];
};

static void *nr_main(void *arg)
{
	struct nr_worker *w = arg;
	struct tally_agent_cfg c;
	int err = 0, t, h;

	cfg_for(&c, w->rank, 1234, port);
	c.average = 0;
	struct tally_agent *a = tally_agent_create(&c, &err, w->err, sizeof(w->err));
	if (!a) {
		w->rc = err ? err : -1;
		return NULL;
	}
	t = tally_agent_declare(a, "shard.grad", N * 4, TALLY_DT_F32, 0);
	for (int it = 0; it < 3 && !w->rc && t >= 0; it++) {
		for (int i = 0; i < N; i++)
			w->x[i] = (float)(w->rank + it) + (float)(i % 7);
		if (tally_agent_push_pull_flags(a, t, w->x, N * 4, TALLY_AGENT_CPU, NULL, 4u, NULL,
						NULL) != -EINVAL)
			w->rc = -5;
		h = tally_agent_push_pull_flags(a, t, w->x, N * 4, TALLY_AGENT_CPU, NULL,
						w->rank ? TALLY_AGENT_NO_RESULT : 0, NULL, NULL);
		if (h < 0 || tally_agent_wait(a, h)) {
			snprintf(w->err, sizeof(w->err), "it %d: %s", it, tally_agent_strerror(a));
			w->rc = -3;
		}
		/* sum over ranks of rank + it + i % 7 = 6 + 4 it + 4 (i % 7) */
		for (int i = 0; i < N && !w->rc && w->rank == 0; i++)
			if (w->x[i] != (float)(6 + 4 * it + 4 * (i % 7)))
				w->rc = -4;
	}
	if (t < 0) {
		snprintf(w->err, sizeof(w->err), "%s", tally_agent_strerror(a));
		w->rc = -2;
	}
	tally_agent_get_stats(a, &w->st);
	tally_agent_destroy(a);
	return NULL;
}

static void test_noresult_4(void **state)
{
	(void)state;
	struct nr_worker *w = calloc(4, sizeof(*w));
	pthread_t t[4];

	assert_non_null(w);
	for (int r = 0; r < 4; r++) {
		w[r].rank = r;
		pthread_create(&t[r], NULL, nr_main, &w[r]);
	}
	for (int r = 0; r < 4; r++)
		pthread_join(t[r], NULL);
	for (int r = 0; r < 4; r++) {
		const struct tally_agent_stats *st = &w[r].st;

		if (w[r].rc)
			fail_msg("rank %d: %d %s", r, w[r].rc, w[r].err);
		print_message("  rank %d: %llu owner-mode operations, %llu header-only chunks, "
			      "%llu sum bytes not received, %llu payloads anyway, downlink %llu B\n",
			      r, (unsigned long long)st->noresult_ops,
			      (unsigned long long)st->noresult_acks,
			      (unsigned long long)st->noresult_skipped_bytes,
			      (unsigned long long)st->noresult_payloads,
			      (unsigned long long)st->rx_bytes);
		assert_int_equal(st->noresult_payloads, 0);
		if (r == 0) {
			assert_int_equal(st->noresult_ops, 0);
			assert_int_equal(st->noresult_acks, 0);
		} else {
			/* 3 rounds of the whole tensor: every byte of its sums skipped */
			assert_true(st->noresult_ops > 0);
			assert_int_equal(st->noresult_skipped_bytes, 3ull * N * 4);
		}
	}
	/* the downlink of a rank that wanted nothing is a fraction of the one that did */
	assert_true(w[1].st.rx_bytes * 4 < w[0].st.rx_bytes);
	free(w);
}

static void test_wrong_token(void **state)
{
	(void)state;
	struct tally_agent_cfg c;
	char e[512] = "";
	int err = 0;

	cfg_for(&c, 0, 999, port);
	assert_null(tally_agent_create(&c, &err, e, sizeof(e)));
	printf("# wrong token: %d: %s\n", err, e);
	assert_true(err < 0);
	assert_non_null(strstr(e, "appliance 0"));
}

/* A UDP socket on a free loopback port: kept open (bound, never answering) or closed again
 * (nothing listens there: the kernel answers ICMP port unreachable). */
static int udp_port_socket(unsigned *p)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	*p = ntohs(sa.sin_port);
	return fd;
}

static void test_unreachable(void **state)
{
	(void)state;
	struct tally_agent_cfg c;
	char e[512] = "";
	int err = 0;
	unsigned p;
	int fd = udp_port_socket(&p); /* bound, never answers: no ICMP, the timeout stands */
	struct timespec t0, t1;

	cfg_for(&c, 0, 1234, p);
	c.connect_timeout_ms = 300;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_null(tally_agent_create(&c, &err, e, sizeof(e)));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	close(fd);
	printf("# unreachable: %d: %s\n", err, e);
	assert_int_equal(err, -ETIMEDOUT);
	assert_non_null(strstr(e, "unreachable"));
	assert_non_null(strstr(e, "300 ms"));
	assert_true(t1.tv_sec - t0.tv_sec < 5);
}

static void test_not_listening(void **state)
{
	(void)state;
	struct tally_agent_cfg c;
	char e[512] = "", want[64];
	int err = 0;
	unsigned p;
	struct timespec t0, t1;

	close(udp_port_socket(&p)); /* nothing listens there now */
	cfg_for(&c, 0, 1234, p);
	c.connect_timeout_ms = 10000;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_null(tally_agent_create(&c, &err, e, sizeof(e)));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("# not listening: %d after %.3f s: %s\n", err, (double)(t1.tv_sec - t0.tv_sec) +
	       (t1.tv_nsec - t0.tv_nsec) / 1e9, e);
	assert_int_equal(err, -ECONNREFUSED);
	snprintf(want, sizeof(want), "nothing listens at 127.0.0.1:%u", p);
	assert_non_null(strstr(e, want));
	assert_non_null(strstr(e, "TALLY_APPLIANCES"));
	assert_true(t1.tv_sec - t0.tv_sec < 3); /* not the 10 s connect timeout */
}

static void test_gso_env_checked(void **state)
{
	(void)state;
	struct tally_agent_cfg c;
	char e[512] = "";
	int err = 0;

	cfg_for(&c, 0, 1234, port);
	setenv("TALLY_GSO", "yes", 1);
	assert_null(tally_agent_create(&c, &err, e, sizeof(e)));
	unsetenv("TALLY_GSO");
	printf("# TALLY_GSO=yes: %d: %s\n", err, e);
	assert_int_equal(err, -EINVAL);
	assert_non_null(strstr(e, "TALLY_GSO"));
}

/* One rank of its own job on the open appliance with TALLY_GSO as given (NULL: unset):
 * a sum goes through, and the agent says how GSO was decided. */
static int gso_one(const char *env, uint32_t job)
{
	struct tally_agent_cfg c;
	char e[512] = "";
	int err = 0, st;
	float x[20000];

	cfg_for(&c, 0, 4321, open_port);
	c.job_id = job;
	c.world_size = c.local_size = 1;
	c.average = 0;
	if (env)
		setenv("TALLY_GSO", env, 1);
	struct tally_agent *a = tally_agent_create(&c, &err, e, sizeof(e));
	unsetenv("TALLY_GSO");
	if (!a)
		fail_msg("TALLY_GSO=%s: %d %s", env ? env : "(unset)", err, e);
	int t = tally_agent_declare(a, "g", sizeof(x), TALLY_DT_F32, 0);
	assert_true(t >= 0);
	for (int i = 0; i < 20000; i++)
		x[i] = (float)i;
	int h = tally_agent_push_pull(a, t, x, sizeof(x), TALLY_AGENT_CPU, NULL, NULL, NULL);
	assert_true(h >= 0);
	if (tally_agent_wait(a, h))
		fail_msg("TALLY_GSO=%s: %s", env ? env : "(unset)", tally_agent_strerror(a));
	for (int i = 0; i < 20000; i++)
		assert_true(x[i] == (float)i);
	st = tally_agent_gso(a, 0);
	assert_int_equal(tally_agent_gso(a, 1), -EINVAL);
	tally_agent_destroy(a);
	printf("# TALLY_GSO=%s: GSO %s\n", env ? env : "(unset)", tally_agent_gso_name(st));
	return st;
}

/* TALLY_GSO keeps its meaning when set (1 forces on, 0 off); unset, tally-udpd's JOIN_OK
 * (TALLY_CAP_GSO) turns it on. */
static void test_gso_modes(void **state)
{
	(void)state;
	assert_int_equal(gso_one(NULL, 31), TALLY_AGENT_GSO_ON_AUTO);
	assert_int_equal(gso_one("0", 32), TALLY_AGENT_GSO_OFF_FORCED);
	assert_int_equal(gso_one("1", 33), TALLY_AGENT_GSO_ON_FORCED);
}

/* The sharded local mode through the real network: 2 machines x 2 local ranks (threads),
 * each local rank on its own lane, i.e. its own job at the appliance (7 and 7 | 1 << 24,
 * created by their first JOINs), a tensor that divides neither by 2 nor by the partition. */
#define NS 50001

struct sworker {
	int rank, rc;
	float *x;
	uint16_t *b;
	char err[512];
	struct tally_agent_stats st;
};

static void *sworker_main(void *arg)
{
	struct sworker *w = arg;
	struct tally_agent_cfg c;
	int err = 0;

	cfg_for(&c, w->rank, 1234, open_port);
	c.local_rank = w->rank % 2;
	c.local_size = 2;
	c.local_agg = TALLY_AGENT_LOCAL_SHARD;
	c.partition_bytes = 16 * 1024;
	c.local_shm_bytes = 64u << 20;
	struct tally_agent *a = tally_agent_create(&c, &err, w->err, sizeof(w->err));
	if (!a) {
		w->rc = err ? err : -1;
		return NULL;
	}
	int t = tally_agent_declare(a, "shard.f32", NS * 4, TALLY_DT_F32, 0);
	int tb = tally_agent_declare(a, "shard.bf16", 999 * 2, TALLY_DT_BF16, 1);
	if (t < 0 || tb < 0) {
		snprintf(w->err, sizeof(w->err), "%s", tally_agent_strerror(a));
		w->rc = -2;
	}
	for (int it = 0; it < 4 && !w->rc; it++) {
		for (int i = 0; i < NS; i++)
			w->x[i] = (float)(w->rank * 4 + it) + (float)(i % 13);
		for (int i = 0; i < 999; i++)
			w->b[i] = tally_f32_to_bf16((float)(w->rank + it + i % 3));
		int h = tally_agent_push_pull(a, t, w->x, NS * 4, TALLY_AGENT_CPU, NULL, NULL, NULL);
		int hb = tally_agent_push_pull(a, tb, w->b, 999 * 2, TALLY_AGENT_CPU, NULL, NULL, NULL);
		if (h < 0 || hb < 0 || tally_agent_wait(a, h) || tally_agent_wait(a, hb)) {
			snprintf(w->err, sizeof(w->err), "it %d: %s", it, tally_agent_strerror(a));
			w->rc = -3;
		}
	}
	tally_agent_get_stats(a, &w->st);
	tally_agent_destroy(a);
	return NULL;
}

static void test_lanes_2x2(void **state)
{
	(void)state;
	struct sworker w[4];
	pthread_t t[4];
	char id[32];

	snprintf(id, sizeof(id), "udp%d", (int)getpid());
	setenv("TALLY_LOCAL_ID", id, 1);
	for (int r = 0; r < 4; r++) {
		w[r] = (struct sworker){.rank = r, .x = malloc(NS * 4), .b = malloc(999 * 2)};
		pthread_create(&t[r], NULL, sworker_main, &w[r]);
	}
	for (int r = 0; r < 4; r++)
		pthread_join(t[r], NULL);
	unsetenv("TALLY_LOCAL_ID");
	for (int r = 0; r < 4; r++) {
		if (w[r].rc)
			fail_msg("rank %d: %d %s", r, w[r].rc, w[r].err);
		/* average over ranks of rank*4 + 3 + i%13 = 6 + 3 + i%13 (exact in f32) */
		for (int i = 0; i < NS; i++)
			assert_true(w[r].x[i] == 9.0f + (float)(i % 13));
		/* bf16: sum over ranks of rank + 3 + i%3 = 6 + 12 + 4*(i%3), times 1/4 */
		for (int i = 0; i < 999; i++)
			assert_int_equal(w[r].b[i], tally_f32_to_bf16((18.0f + 4.0f * (float)(i % 3)) * 0.25f));
		assert_int_equal(w[r].st.push_pulls, 8);
		/* each lane carried about half the bytes: its shard, 4 rounds */
		assert_int_equal(w[r].st.bytes, 4 * ((NS + 1) / 2 * 4 + 500 * 2));
	}
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: test_agent_udp PATH_TO_TALLY_UDPD\n");
		return 2;
	}
	udpd = argv[1];
	start_appliance(&appl_pid, &port, 0);
	start_appliance(&open_pid, &open_port, 1);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sum_4),
		cmocka_unit_test(test_noresult_4),
		cmocka_unit_test(test_wrong_token),
		cmocka_unit_test(test_unreachable),
		cmocka_unit_test(test_not_listening),
		cmocka_unit_test(test_gso_env_checked),
		cmocka_unit_test(test_gso_modes),
		cmocka_unit_test(test_lanes_2x2),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	stop_appliance(&appl_pid);
	stop_appliance(&open_pid);
	return rc;
}
