/* SPDX-License-Identifier: Apache-2.0
 * test_agent_onebit.c — 1-bit compression end to end: 3 agents (threads) over their real
 * network (client sessions on kernel UDP) against tally-udpd on loopback push an f32 tensor
 * 5 times; set_compression switches it to one-bit at round 2. Rounds 0-1 are plain averages;
 * rounds 2-4 must equal, bit for bit, a reference computed here with the same reducers:
 * each worker's stage per chunk (worker error zero at the switch), the server stage (rank
 * order: deterministic keys; times (f32)(1/3); server error persisting), decompression.
 * The wire bytes (stats.push_bytes) shrink to scale + bits per chunk.
 *   test_agent_onebit PATH_TO_TALLY_UDPD */
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
#include <unistd.h>

#include <cmocka.h>

#include "tally_agent.h"
#include "udpd_proc.h"
#include "tally_proto.h"
#include "tally_sum.h"

static const char *udpd;
static pid_t appl_pid, open_pid;
static unsigned port, open_port;

static void start_appliance(pid_t *pid, unsigned *pport, int open_adm)
{
	udpd_start(udpd, pid, pport, open_adm ? 0 : 3);
}

static void stop_appliance(pid_t *pid)
{
	udpd_stop(pid);
}

#define WORLD 3
#define N 50000          /* 4 partitions of 16384 elements (the last 848) */
#define PART (16384)
#define MCB 1028         /* one-bit chunks of 8192 elements: 2 per full partition */
#define CE ((MCB - 4) * 8)
#define ROUNDS 5
#define SWITCH 2

struct worker {
	int rank, rc, quorum;
	float *res[ROUNDS];
	struct tally_agent_stats st;
	char err[512];
};

static float data(int rank, int round, int i)
{
	uint32_t h = (uint32_t)(rank * 7919 + round * 104729 + i) * 2654435761u;
	h ^= h >> 15;
	return (float)((int)(h % 2001) - 1000) * 1e-3f * (1.0f + 0.5f * (float)rank);
}

static int api_checks(struct tally_agent *a, int t, char *err, size_t len)
{
	int ti = tally_agent_declare(a, "counts", 64, TALLY_DT_I32, 0);

	if (ti < 0 || tally_agent_set_ordered(a, ti, 0))
		return -1;
	if (tally_agent_set_compression(a, ti, TALLY_AGENT_COMPRESS_ONEBIT, 0) != -EINVAL ||
	    tally_agent_set_compression(a, t, 7, SWITCH) != -EINVAL ||
	    tally_agent_set_compression(a, 99, TALLY_AGENT_COMPRESS_ONEBIT, SWITCH) != -ENOENT ||
	    tally_agent_reset_compression_error(a, 99) != -ENOENT) {
		snprintf(err, len, "argument checks: %s", tally_agent_strerror(a));
		return -1;
	}
	return 0;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct tally_agent_cfg c;
	char list[64];
	int err = 0;

	/* quorum: the last rank starts late, after the others could finish two rounds */
	if (w->quorum && w->rank == WORLD - 1)
		usleep(400000);
	tally_agent_cfg_defaults(&c);
	snprintf(list, sizeof(list), "127.0.0.1:%u", w->quorum ? open_port : port);
	assert_int_equal(tally_agent_parse_appliances(&c, list, NULL, 0), 0);
	c.job_id = w->quorum ? 8 : 7; /* quorum: the open-admission appliance */
	c.token = 1234;
	c.quorum = (uint16_t)w->quorum;
	c.rank = w->rank;
	c.world_size = WORLD;
	c.local_rank = w->rank;
	c.local_size = WORLD;
	c.partition_bytes = PART * 4;
	c.average = 1;
	c.deterministic = !w->quorum;
	c.max_chunk_bytes = MCB;
	c.connect_timeout_ms = 15000;
	c.op_timeout_ms = 10000;
	struct tally_agent *a = tally_agent_create(&c, &err, w->err, sizeof(w->err));
	if (!a) {
		w->rc = err ? err : -1;
		return NULL;
	}
	int t = tally_agent_declare(a, "momentum", N * 4, TALLY_DT_F32, 0);
	if (t < 0 || tally_agent_set_compression(a, t, TALLY_AGENT_COMPRESS_ONEBIT,
						 w->quorum ? 0 : SWITCH)) {
		snprintf(w->err, sizeof(w->err), "declare/set_compression: %s", tally_agent_strerror(a));
		w->rc = -2;
	}
	/* no start barrier: with quorum a rank that has not joined yet holds the others at
	 * most two rounds ahead (engine all_acked), so ranks may start at any time */
	if (!w->rc && w->rank == 0 && !w->quorum && api_checks(a, t, w->err, sizeof(w->err)))
		w->rc = -5;
	for (int it = 0; it < ROUNDS && !w->rc; it++) {
		float *x = w->res[it];

		for (int i = 0; i < N; i++)
			x[i] = data(w->rank, it, i);
		int h = tally_agent_push_pull(a, t, x, N * 4, TALLY_AGENT_CPU, NULL, NULL, NULL);
		if (h < 0 || tally_agent_wait(a, h)) {
			snprintf(w->err, sizeof(w->err), "round %d: %s", it, tally_agent_strerror(a));
			w->rc = -3;
		}
		/* a switch for a round already pushed is refused */
		if (!w->rc && it == SWITCH && !w->quorum &&
		    tally_agent_set_compression(a, t, TALLY_AGENT_COMPRESS_ONEBIT, 1) != -EINVAL)
			w->rc = -4;
	}
	tally_agent_get_stats(a, &w->st);
	tally_agent_destroy(a);
	return NULL;
}

/* What every rank must hold after round `it`. */
static void reference(float (*werr)[N], float *serr, int it, float *want)
{
	static float x[WORLD][N], acc[CE];
	static uint8_t bits[WORLD][CE / 8], sbits[CE / 8];
	float sc[WORLD];

	for (int r = 0; r < WORLD; r++)
		for (int i = 0; i < N; i++)
			x[r][i] = data(r, it, i);
	if (it < SWITCH) {
		for (int i = 0; i < N; i++)
			want[i] = ((x[0][i] + x[1][i]) + x[2][i]) * (1.0f / (float)WORLD);
		return;
	}
	for (int p = 0; p < N; p += PART) {
		int np = N - p < PART ? N - p : PART, ce = np < CE ? np : CE;

		for (int g = p; g < p + np; g += ce) {
			int m = p + np - g < ce ? p + np - g : ce;

			for (int r = 0; r < WORLD; r++)
				sc[r] = tally_sum_onebit_compress(bits[r], werr[r] + g, x[r] + g, (size_t)m);
			tally_sum_sign_unpack(acc, bits[0], (size_t)m, sc[0]);
			for (int r = 1; r < WORLD; r++)
				tally_sum_sign_unpack_acc(acc, bits[r], (size_t)m, sc[r]);
			tally_sum_f32_scale(acc, acc, (size_t)m, 1.0f / (float)WORLD);
			float s = tally_sum_onebit_compress(sbits, serr + g, acc, (size_t)m);
			tally_sum_sign_unpack(want + g, sbits, (size_t)m, s);
		}
	}
}

static void test_onebit_3_ranks(void **state)
{
	(void)state;
	struct worker w[WORLD];
	pthread_t t[WORLD];
	static float werr[WORLD][N], serr[N], want[N];

	for (int r = 0; r < WORLD; r++) {
		w[r] = (struct worker){.rank = r};
		for (int it = 0; it < ROUNDS; it++)
			w[r].res[it] = malloc(N * sizeof(float));
		pthread_create(&t[r], NULL, worker_main, &w[r]);
	}
	for (int r = 0; r < WORLD; r++)
		pthread_join(t[r], NULL);
	for (int r = 0; r < WORLD; r++)
		if (w[r].rc)
			fail_msg("rank %d: %d %s", r, w[r].rc, w[r].err);
	for (int it = 0; it < ROUNDS; it++) {
		reference(werr, serr, it, want);
		for (int r = 0; r < WORLD; r++) {
			for (int i = 0; i < N; i++)
				if (memcmp(&w[r].res[it][i], &want[i], 4))
					fail_msg("round %d rank %d element %d: %a, want %a", it, r, i,
						 (double)w[r].res[it][i], (double)want[i]);
		}
		printf("# round %d: %s, element 0 = %g\n", it, it < SWITCH ? "f32 average" :
		       "one-bit, bit-exact", (double)want[0]);
	}
	/* wire bytes: 2 plain rounds of N f32, 3 one-bit rounds of scale + bits per chunk */
	size_t ob = 0;
	for (int p = 0; p < N; p += PART) {
		uint32_t np = (uint32_t)(N - p < PART ? N - p : PART);
		ob += tally_onebit_key_bytes(np, np < CE ? np : CE);
	}
	for (int r = 0; r < WORLD; r++) {
		assert_int_equal(w[r].st.push_bytes, (uint64_t)SWITCH * N * 4 + (ROUNDS - SWITCH) * ob);
		for (int it = 0; it < ROUNDS; it++)
			free(w[r].res[it]);
	}
	printf("# push bytes per round: f32 %d, one-bit %zu (%.1fx less)\n", N * 4, ob,
	       (double)N * 4 / (double)ob);
}

/* Quorum 2 of 3, compressed from round 0: whoever is left out, every rank gets the same
 * server result (the average of the two that made it); a left-out rank folds its c into
 * its worker error (not observable here but through the next rounds' values). */
static void test_onebit_quorum(void **state)
{
	(void)state;
	struct worker w[WORLD];
	pthread_t t[WORLD];
	uint64_t excluded = 0;

	for (int r = 0; r < WORLD; r++) {
		w[r] = (struct worker){.rank = r, .quorum = 2};
		for (int it = 0; it < ROUNDS; it++)
			w[r].res[it] = malloc(N * sizeof(float));
		pthread_create(&t[r], NULL, worker_main, &w[r]);
	}
	for (int r = 0; r < WORLD; r++)
		pthread_join(t[r], NULL);
	for (int r = 0; r < WORLD; r++)
		if (w[r].rc)
			fail_msg("rank %d: %d %s", r, w[r].rc, w[r].err);
	for (int it = 0; it < ROUNDS; it++)
		for (int r = 1; r < WORLD; r++)
			if (memcmp(w[r].res[it], w[0].res[it], N * sizeof(float)))
				fail_msg("round %d: rank %d's result differs from rank 0's", it, r);
	for (int r = 0; r < WORLD; r++) {
		excluded += w[r].st.excluded;
		for (int it = 0; it < ROUNDS; it++)
			free(w[r].res[it]);
	}
	printf("# quorum 2 of 3: %llu chunks left a rank out (folded into its worker error)\n",
	       (unsigned long long)excluded);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: test_agent_onebit PATH_TO_TALLY_UDPD\n");
		return 2;
	}
	udpd = argv[1];
	start_appliance(&appl_pid, &port, 0);
	start_appliance(&open_pid, &open_port, 1);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_onebit_3_ranks),
		cmocka_unit_test(test_onebit_quorum),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	stop_appliance(&appl_pid);
	stop_appliance(&open_pid);
	return rc;
}
