/* SPDX-License-Identifier: Apache-2.0
 * fake_backend.c — an in-memory appliance: jobs with policies, two cores, counters that the
 * tests set, drain/shutdown flags. Errors mirror the engine's (-ENOENT, -EEXIST, -ENOSPC,
 * -EINVAL with a message naming the field).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fake_backend.h"

static struct fake_job *find(struct fake *f, uint32_t id)
{
	for (int i = 0; i < FAKE_MAX_JOBS; i++)
		if (f->jobs[i].used && f->jobs[i].id == id)
			return &f->jobs[i];
	return NULL;
}

static uint32_t u32(const json_t *p, const char *k)
{
	return (uint32_t)json_integer_value(json_object_get(p, k));
}

static json_t *job_json(const struct fake_job *j)
{
	return json_pack("{s:I, s:I, s:i, s:{s:I, s:I, s:b}}", "job_id", (json_int_t)j->id,
			 "world_size", (json_int_t)j->world, "workers", 0, "policy", "quorum",
			 (json_int_t)j->quorum, "deadline_us", (json_int_t)j->deadline_us,
			 "deterministic", j->deterministic);
}

#define F struct fake *f = ctx; f->calls

static int h_status(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	F[TALLY_CTL_M_APPLIANCE_STATUS]++;
	int n = 0;
	(void)p; (void)m; (void)ml;
	for (int i = 0; i < FAKE_MAX_JOBS; i++)
		n += f->jobs[i].used;
	*r = json_pack("{s:s, s:i, s:b, s:[{s:i, s:i}, {s:i, s:i}], s:{s:I, s:I}, s:i}",
		       "version", "fake", "uptime_s", 3725, "draining", f->draining, "cores",
		       "core", 0, "queue", 0, "core", 1, "queue", 1, "memory", "budget_bytes",
		       (json_int_t)1 << 30, "used_bytes", (json_int_t)1 << 20, "jobs", n);
	return 0;
}

static int h_stats(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	F[TALLY_CTL_M_STATS_GET]++;
	(void)p; (void)m; (void)ml;
	*r = json_pack("{s:f, s:{s:I, s:I, s:{s:i}}, s:[{s:i, s:I}, {s:i, s:I}]}", "interval_s",
		       1.0, "totals", "rx_pkts", (json_int_t)f->rx_pkts, "pushes",
		       (json_int_t)f->pushes, "drops", "bad_crc", 0, "cores", "core", 0,
		       "rx_pkts", (json_int_t)(f->rx_pkts / 2), "core", 1, "rx_pkts",
		       (json_int_t)(f->rx_pkts - f->rx_pkts / 2));
	return 0;
}

static int h_reset(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	F[TALLY_CTL_M_STATS_RESET]++;
	(void)p; (void)m; (void)ml;
	f->rx_pkts = f->pushes = 0;
	*r = json_pack("{s:b}", "reset", 1);
	return 0;
}

static int h_jobs(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	F[TALLY_CTL_M_JOBS_LIST]++;
	(void)p; (void)m; (void)ml;
	*r = json_array();
	for (int i = 0; i < FAKE_MAX_JOBS; i++)
		if (f->jobs[i].used)
			json_array_append_new(*r, job_json(&f->jobs[i]));
	return 0;
}

static int h_job(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	F[TALLY_CTL_M_JOB_GET]++;
	struct fake_job *j = find(f, u32(p, "job_id"));
	if (!j) {
		snprintf(m, ml, "no job %u", u32(p, "job_id"));
		return -ENOENT;
	}
	*r = job_json(j);
	return 0;
}

static int h_job_add(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	F[TALLY_CTL_M_JOB_ADD]++;
	uint64_t tok;
	uint32_t id = u32(p, "job_id"), w = u32(p, "world_size");
	struct fake_job *j = find(f, id);

	if (tally_ctl_get_u64(p, "token", &tok))
		return -EINVAL;
	if (j) {
		if (j->token == tok && j->world == w)
			goto ok;
		snprintf(m, ml, "job %u exists with another token or world size", id);
		return -EEXIST;
	}
	for (int i = 0; i < FAKE_MAX_JOBS && !j; i++)
		if (!f->jobs[i].used)
			j = &f->jobs[i];
	if (!j) {
		snprintf(m, ml, "no room for job %u (%d jobs)", id, FAKE_MAX_JOBS);
		return -ENOSPC;
	}
	*j = (struct fake_job){ .used = 1, .id = id, .world = w, .token = tok };
ok:
	*r = json_pack("{s:I, s:I}", "job_id", (json_int_t)id, "world_size", (json_int_t)w);
	return 0;
}

static int h_keys(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	F[TALLY_CTL_M_KEYS_LIST]++;
	(void)p; (void)m; (void)ml;
	*r = json_pack("[{s:i, s:i, s:i, s:[i,i]}]", "job_id", 1, "key", 7, "round", 3,
		       "missing", 2, 3);
	return 0;
}

static int h_stuck(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	F[TALLY_CTL_M_CHUNKS_STUCK]++;
	(void)m; (void)ml;
	*r = json_pack("[{s:i, s:i, s:i, s:I, s:[i]}]", "key", 7, "round", 3, "chunk", 0,
		       "age_ms", json_integer_value(json_object_get(p, "threshold_ms")) + 5,
		       "missing", 3);
	return 0;
}

static int h_workers(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	F[TALLY_CTL_M_WORKERS_LIST]++;
	(void)p; (void)m; (void)ml;
	*r = json_array();
	return 0;
}

static int h_policy(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	F[TALLY_CTL_M_JOB_SET_POLICY]++;
	struct fake_job *j = find(f, u32(p, "job_id"));
	const json_t *q = json_object_get(p, "quorum"), *d = json_object_get(p, "deadline_us");
	const json_t *det = json_object_get(p, "deterministic");

	if (!j) {
		snprintf(m, ml, "no job %u", u32(p, "job_id"));
		return -ENOENT;
	}
	if (q && json_integer_value(q) > j->world) {
		snprintf(m, ml, "quorum %lld is more than the job's world size %u",
			 (long long)json_integer_value(q), j->world);
		return -EINVAL;
	}
	if (q)
		j->quorum = (uint32_t)json_integer_value(q);
	if (d)
		j->deadline_us = (uint32_t)json_integer_value(d);
	if (det)
		j->deterministic = json_is_true(det);
	*r = job_json(j);
	return 0;
}

static int h_evict(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	F[TALLY_CTL_M_JOB_EVICT]++;
	struct fake_job *j = find(f, u32(p, "job_id"));
	if (!j) {
		snprintf(m, ml, "no job %u", u32(p, "job_id"));
		return -ENOENT;
	}
	j->used = 0;
	*r = json_pack("{s:I, s:i}", "job_id", (json_int_t)j->id, "keys_freed", 0);
	return 0;
}

static int h_drain(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	F[TALLY_CTL_M_APPLIANCE_DRAIN]++;
	(void)p; (void)m; (void)ml;
	f->draining = 1;
	*r = json_pack("{s:b, s:i}", "draining", 1, "open_rounds", 0);
	return 0;
}

static int h_shutdown(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	F[TALLY_CTL_M_APPLIANCE_SHUTDOWN]++;
	(void)m; (void)ml;
	f->shutdown = 1;
	f->shutdown_drain = json_is_true(json_object_get(p, "drain"));
	*r = json_pack("{s:b}", "stopping", 1);
	return 0;
}

static int h_log(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	F[TALLY_CTL_M_LOG_SET_LEVEL]++;
	(void)m; (void)ml;
	*r = json_pack("{s:s, s:s}", "level", json_string_value(json_object_get(p, "level")),
		       "previous", f->level[0] ? f->level : "notice");
	snprintf(f->level, sizeof(f->level), "%s", json_string_value(json_object_get(p, "level")));
	return 0;
}

static int h_config(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	F[TALLY_CTL_M_CONFIG_SAVE]++;
	json_t *calls = json_array();
	char tok[24];
	(void)p; (void)m; (void)ml;
	for (int i = 0; i < FAKE_MAX_JOBS; i++) {
		struct fake_job *j = &f->jobs[i];
		if (!j->used)
			continue;
		snprintf(tok, sizeof(tok), "0x%llx", (unsigned long long)j->token);
		json_array_append_new(calls, json_pack("{s:s, s:{s:I, s:s, s:I}}", "method",
			"job_add", "params", "job_id", (json_int_t)j->id, "token", tok,
			"world_size", (json_int_t)j->world));
		json_array_append_new(calls, json_pack("{s:s, s:{s:I, s:I, s:I, s:b}}", "method",
			"job_set_policy", "params", "job_id", (json_int_t)j->id, "quorum",
			(json_int_t)j->quorum, "deadline_us", (json_int_t)j->deadline_us,
			"deterministic", j->deterministic));
	}
	if (f->level[0])
		json_array_append_new(calls, json_pack("{s:s, s:{s:s}}", "method", "log_set_level",
						       "params", "level", f->level));
	*r = json_pack("{s:o}", "calls", calls);
	return 0;
}

void fake_backend_init(struct fake *f, struct tally_ctl_backend *b)
{
	memset(b, 0, sizeof(*b));
	b->ctx = f;
	b->handlers[TALLY_CTL_M_APPLIANCE_STATUS] = h_status;
	b->handlers[TALLY_CTL_M_STATS_GET] = h_stats;
	b->handlers[TALLY_CTL_M_STATS_RESET] = h_reset;
	b->handlers[TALLY_CTL_M_JOBS_LIST] = h_jobs;
	b->handlers[TALLY_CTL_M_JOB_GET] = h_job;
	b->handlers[TALLY_CTL_M_JOB_ADD] = h_job_add;
	b->handlers[TALLY_CTL_M_KEYS_LIST] = h_keys;
	b->handlers[TALLY_CTL_M_CHUNKS_STUCK] = h_stuck;
	b->handlers[TALLY_CTL_M_WORKERS_LIST] = h_workers;
	b->handlers[TALLY_CTL_M_JOB_SET_POLICY] = h_policy;
	b->handlers[TALLY_CTL_M_JOB_EVICT] = h_evict;
	b->handlers[TALLY_CTL_M_APPLIANCE_DRAIN] = h_drain;
	b->handlers[TALLY_CTL_M_APPLIANCE_SHUTDOWN] = h_shutdown;
	b->handlers[TALLY_CTL_M_LOG_SET_LEVEL] = h_log;
	b->handlers[TALLY_CTL_M_CONFIG_SAVE] = h_config;
}
