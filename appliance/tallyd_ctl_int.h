/* SPDX-License-Identifier: Apache-2.0
 * tallyd_ctl_int.h — the control plane's state inside tallyd (internal to tallyd_ctl*.c).
 * Everything here runs on tallyd's main thread, except the telemetry callbacks (DPDK's
 * telemetry thread), which only read summed counters.
 */
#ifndef TALLYD_CTL_INT_H
#define TALLYD_CTL_INT_H

#include <stdint.h>

#include "tally_ctl.h"
#include "tallyd.h"

#define CTL_MAX_JOBS 64
#define CTL_OWN_KEYS 64

/* What the operator set through the control plane (config_save writes it back). */
struct ctl_job {
	int used;
	int admitted;              /* by job_add (token known) */
	uint32_t job_id, world_size;
	uint64_t token;
	int has_quorum, has_deadline;
	uint32_t quorum, deadline_us;
	/* keys given their own policy (job_set_policy with key): left alone by the job's */
	uint32_t own_keys[CTL_OWN_KEYS];
	unsigned n_own;
	uint32_t keys_enforced;    /* key count when the policy was last applied */
};

/* Counters of the last interval, for rates. */
struct ctl_sample {
	uint64_t ns;
	uint64_t rx_pkts, rx_bytes, tx_pkts, tx_bytes, pushes, push_bytes, results;
};

struct ctl {
	struct tallyd *d;
	struct tally_ctl_server *srv;
	struct tally_ctl_backend b;
	struct ctl_job jobs[CTL_MAX_JOBS];
	struct ctl_sample prev, last; /* rates = (last - prev) / interval */
	int log_level_set;
	char log_level[16];
};

/* Monotonic nanoseconds. */
uint64_t ctl_now_ns(void);
/* The totals the rates are computed from. */
void ctl_sample(struct ctl *c, struct ctl_sample *s);
struct ctl_job *ctl_job_find(struct ctl *c, uint32_t job_id, int create);

/* Handlers (tallyd_ctl_ops.c: status, stats, changes; tallyd_ctl_query.c: walks). */
int ctl_h_status(void *ctx, const json_t *p, json_t **r, char *m, size_t ml);
int ctl_h_stats(void *ctx, const json_t *p, json_t **r, char *m, size_t ml);
int ctl_h_stats_reset(void *ctx, const json_t *p, json_t **r, char *m, size_t ml);
int ctl_h_job_add(void *ctx, const json_t *p, json_t **r, char *m, size_t ml);
int ctl_h_job_evict(void *ctx, const json_t *p, json_t **r, char *m, size_t ml);
int ctl_h_policy(void *ctx, const json_t *p, json_t **r, char *m, size_t ml);
int ctl_h_drain(void *ctx, const json_t *p, json_t **r, char *m, size_t ml);
int ctl_h_shutdown(void *ctx, const json_t *p, json_t **r, char *m, size_t ml);
int ctl_h_log_level(void *ctx, const json_t *p, json_t **r, char *m, size_t ml);
int ctl_h_config_save(void *ctx, const json_t *p, json_t **r, char *m, size_t ml);
int ctl_h_jobs(void *ctx, const json_t *p, json_t **r, char *m, size_t ml);
int ctl_h_job_get(void *ctx, const json_t *p, json_t **r, char *m, size_t ml);
int ctl_h_keys(void *ctx, const json_t *p, json_t **r, char *m, size_t ml);
int ctl_h_stuck(void *ctx, const json_t *p, json_t **r, char *m, size_t ml);
int ctl_h_workers(void *ctx, const json_t *p, json_t **r, char *m, size_t ml);

/* Keys of a job on every core (job_id, key, owning core), for policy changes. Returns the
 * number found (up to max) or a negative errno. */
struct ctl_key_ref {
	uint32_t job_id, key;
	unsigned core;
	uint16_t participants, quorum;
	uint32_t deadline_us;
};
int ctl_job_keys(struct ctl *c, uint32_t job_id, struct ctl_key_ref *out, unsigned max);
/* Applies the stored job policies to keys registered since (every second). */
void ctl_policy_enforce(struct ctl *c);
/* Keys of a job, summed over the cores (a walk of the jobs only: cheap on the lcores). */
int ctl_job_key_count(struct ctl *c, uint32_t job_id, uint32_t *nkeys);
/* Sum of tally_engine_open_rounds / open_chunks over the cores. */
int ctl_open_work(struct ctl *c, uint64_t *rounds, uint64_t *chunks);

/* DPDK telemetry: /tally/stats, /tally/status (read-only). */
void ctl_telemetry_register(struct tallyd *d);
void ctl_telemetry_unregister(void);

#endif
