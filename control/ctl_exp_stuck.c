/* SPDX-License-Identifier: Apache-2.0
 * ctl_exp_stuck.c — `chunks_stuck` as series an alert can use: per job, how many chunks are
 * open longer than the threshold and the oldest's age; per (job, missing rank), the same,
 * so "job 7 is stuck on rank 3" is one series. Every listed job gets a 0 so its series
 * exist before anything is stuck (and alerts resolve when it clears).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_exp.h"

struct agg {
	long long job, rank;   /* rank -1: the job's row */
	double count, max_age;
};

static struct agg *agg_find(struct agg **a, size_t *n, size_t *cap, long long job,
			    long long rank)
{
	for (size_t i = 0; i < *n; i++)
		if ((*a)[i].job == job && (*a)[i].rank == rank)
			return &(*a)[i];
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 32;
		struct agg *p = realloc(*a, c * sizeof(*p));
		if (!p)
			return NULL;
		*a = p;
		*cap = c;
	}
	(*a)[*n] = (struct agg){ .job = job, .rank = rank };
	return &(*a)[(*n)++];
}

static void add(struct agg **a, size_t *n, size_t *cap, long long job, long long rank,
		double age)
{
	struct agg *g = agg_find(a, n, cap, job, rank);
	if (!g)
		return;
	g->count += 1;
	if (age > g->max_age)
		g->max_age = age;
}

void ctl_exp_render_stuck(struct ctl_exp_out *o, const json_t *stuck, const json_t *jobs)
{
	struct agg *a = NULL;
	size_t n = 0, cap = 0, i, r;
	json_t *e, *m;
	char lb[256];

	json_array_foreach(jobs, i, e) /* a 0 for every job */
		agg_find(&a, &n, &cap, json_integer_value(json_object_get(e, "job_id")), -1);
	json_array_foreach(stuck, i, e) {
		long long job = json_integer_value(json_object_get(e, "job_id"));
		double age = (double)json_integer_value(json_object_get(e, "age_ms")) / 1e3;
		add(&a, &n, &cap, job, -1, age);
		json_array_foreach(json_object_get(e, "missing"), r, m)
			add(&a, &n, &cap, job, json_integer_value(m), age);
	}
	for (i = 0; i < n; i++) {
		char v[32];
		lb[0] = '\0';
		snprintf(v, sizeof(v), "%lld", a[i].job);
		ctl_exp_label(lb, sizeof(lb), "job_id", v);
		if (a[i].rank < 0) {
			ctl_exp_sample(o, "tally_stuck_chunks", "gauge",
				"chunks of the job open longer than the exporter's --stuck-threshold-ms "
				"(at most --stuck-limit counted)", lb, a[i].count);
			ctl_exp_sample(o, "tally_stuck_chunk_max_age_seconds", "gauge",
				"age of the job's oldest stuck chunk (0: none)", lb, a[i].max_age);
			continue;
		}
		snprintf(v, sizeof(v), "%lld", a[i].rank);
		ctl_exp_label(lb, sizeof(lb), "rank", v);
		ctl_exp_sample(o, "tally_stuck_rank_chunks", "gauge",
			       "stuck chunks still missing this rank's push", lb, a[i].count);
		ctl_exp_sample(o, "tally_stuck_rank_max_age_seconds", "gauge",
			       "age of the oldest stuck chunk still missing this rank's push", lb,
			       a[i].max_age);
	}
	free(a);
}
