/* SPDX-License-Identifier: Apache-2.0
 * agent_verbs.c — libtally_agent over RDMA verbs (TALLY_TRANSPORT=verbs) in the Soft-RoCE
 * guest (verbs_guest.sh): 3 agents (threads) average f32 tensors of ~1.2 MB (several
 * partitions) for 4 iterations against tally-udpd --rdma-listen; every element is checked.
 * A 4th agent with TALLY_TRANSPORT=bogus must fail with a message naming the variable.
 *   agent_verbs ADDR:PORT        exit 0 = passed
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally_agent.h"
#include "tally_proto.h"

#define W 3
#define N 300007 /* ~1.2 MB of f32 */

static const char *appl;

struct worker {
	int rank, rc;
	float *x;
	char err[512];
};

static void cfg_for(struct tally_agent_cfg *c, int rank)
{
	tally_agent_cfg_defaults(c);
	tally_agent_parse_appliances(c, appl, NULL, 0);
	/* AGENT_VERBS_JOB (default 51) and TALLY_AUTH_KEY_FILE: the guest's auth case runs the
	 * agent on a keyed job (its verbs connections authenticated at setup) */
	const char *job = getenv("AGENT_VERBS_JOB"), *kf = getenv("TALLY_AUTH_KEY_FILE");
	c->job_id = job ? (uint32_t)atoi(job) : 51;
	c->token = c->job_id;
	if (kf)
		snprintf(c->auth_key_file, sizeof(c->auth_key_file), "%s", kf);
	c->rank = rank;
	c->world_size = W;
	c->local_rank = 0;
	c->local_size = 1;
	c->partition_bytes = 256 * 1024;
	c->average = 1;
	c->connect_timeout_ms = 20000;
	c->op_timeout_ms = 60000;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct tally_agent_cfg c;
	struct tally_agent *a;
	int err = 0, t;

	cfg_for(&c, w->rank);
	a = tally_agent_create(&c, &err, w->err, sizeof(w->err));
	if (!a) {
		w->rc = err ? err : -1;
		return NULL;
	}
	t = tally_agent_declare(a, "grad", N * 4, TALLY_DT_F32, 0);
	for (int it = 0; it < 4 && !w->rc && t >= 0; it++) {
		for (int i = 0; i < N; i++)
			w->x[i] = (float)(w->rank * 3 + it) + (float)(i % 17);
		int h = tally_agent_push_pull(a, t, w->x, N * 4, TALLY_AGENT_CPU, NULL, NULL, NULL);
		if (h < 0 || tally_agent_wait(a, h)) {
			snprintf(w->err, sizeof(w->err), "it %d: %s", it, tally_agent_strerror(a));
			w->rc = -3;
		}
		/* mean over ranks of 3r + it + i%17 = 3 + it + i%17 */
		for (int i = 0; i < N && !w->rc; i++)
			if (w->x[i] != (float)(3 + it) + (float)(i % 17)) {
				snprintf(w->err, sizeof(w->err), "it %d element %d: %g", it, i, w->x[i]);
				w->rc = -4;
			}
	}
	if (t < 0)
		w->rc = -2;
	tally_agent_destroy(a);
	return NULL;
}

int main(int argc, char **argv)
{
	struct worker w[W];
	pthread_t th[W];
	struct tally_agent_cfg c;
	char e[512] = "";
	int fails = 0, err = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: agent_verbs ADDR:PORT (with TALLY_TRANSPORT=verbs)\n");
		return 2;
	}
	appl = argv[1];
	for (int r = 0; r < W; r++) {
		w[r] = (struct worker){ .rank = r, .x = malloc(N * sizeof(float)) };
		pthread_create(&th[r], NULL, worker_main, &w[r]);
	}
	for (int r = 0; r < W; r++) {
		pthread_join(th[r], NULL);
		if (w[r].rc) {
			printf("FAIL agent rank %d: %d %s\n", r, w[r].rc, w[r].err);
			fails++;
		}
		free(w[r].x);
	}
	if (!fails)
		printf("ok   %d agents over verbs: 4 iterations of %d f32 averaged, every element checked\n",
		       W, N);
	setenv("TALLY_TRANSPORT", "bogus", 1);
	cfg_for(&c, 0);
	c.world_size = 1;
	if (tally_agent_create(&c, &err, e, sizeof(e)) || !strstr(e, "TALLY_TRANSPORT='bogus'")) {
		printf("FAIL TALLY_TRANSPORT=bogus: '%s'\n", e);
		fails++;
	} else {
		printf("ok   TALLY_TRANSPORT=bogus refused: %s\n", e);
	}
	return fails ? 1 : 0;
}
