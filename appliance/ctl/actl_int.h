/* SPDX-License-Identifier: Apache-2.0
 * actl_int.h — the control plane's state (internal to appliance/ctl). Files and their
 * direction (no file cycle): actl.c (start, poll, registration) → actl_stats.c,
 * actl_jobs.c, actl_query.c → actl_util.c, actl_counters.c (leaves). Each handler file
 * registers its own handlers next to them (*_register).
 */
#ifndef ACTL_INT_H
#define ACTL_INT_H

#include <stdint.h>

#include "tally_actl.h"
#include "tally_ctl.h"

#define ACTL_MAX_JOBS 64

/* What the operator set through the control plane (config_save writes it back). The
 * policies themselves live on the engines' jobs (tally_engine_job_policy). */
struct actl_job {
	int used;
	int admitted;              /* by job_add (token known) */
	uint32_t job_id, world_size;
	uint64_t token;
	int has_quorum, has_deadline;
	uint32_t quorum, deadline_us;
	uint32_t quota_keys;       /* job_add's own quotas, whole appliance (0: defaults) */
	uint64_t quota_bytes;
	char key_file[256];        /* job_add's key_file ("" none): config_save repeats it */
	int no_auth;               /* job_add's no_auth: admitted unauthenticated on purpose */
};

/* Counters of the last interval, for rates. */
struct actl_sample {
	uint64_t ns;
	struct tally_actl_counters c;
};

struct tally_actl {
	const struct tally_actl_ops *ops;
	void *ctx;
	struct tally_ctl_server *srv;
	struct tally_ctl_backend b;
	struct actl_job jobs[ACTL_MAX_JOBS];
	struct actl_sample prev, last; /* rates = (last - prev) / interval */
	int log_level_set;
	char log_level[16];
};

/* actl_util.c */
uint64_t actl_now_ns(void);
struct actl_job *actl_job_find(struct tally_actl *a, uint32_t job_id, int create);
unsigned actl_ncores(const struct tally_actl *a);
/* Sum of tally_engine_open_rounds / open_chunks over the cores. */
int actl_open_work(struct tally_actl *a, uint64_t *rounds, uint64_t *chunks);

/* actl_stats.c: status, stats_get, stats_reset; the rate sample */
void actl_stats_register(struct tally_ctl_backend *b);
void actl_sample(struct tally_actl *a, struct actl_sample *s);
/* actl_jobs.c: job_add, job_evict, job_set_policy, drain, shutdown, log level, config */
void actl_jobs_register(struct tally_ctl_backend *b);
/* actl_query.c: jobs, job_get, keys, stuck, workers */
void actl_query_register(struct tally_ctl_backend *b);
int actl_h_jobs(void *ctx, const json_t *p, json_t **r, char *m, size_t ml);
int actl_h_job_get(void *ctx, const json_t *p, json_t **r, char *m, size_t ml);

#endif
