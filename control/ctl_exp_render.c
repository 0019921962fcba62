/* SPDX-License-Identifier: Apache-2.0
 * ctl_exp_render.c — the control plane's JSON answers as Prometheus text (format 0.0.4).
 *
 * The mapping is generic over the JSON, never a list of counters, so a counter added to
 * the appliance's X-macro lists shows up without a change here:
 *  - stats.cores[]: every number is a counter tally_<field>_total{core}; every object
 *    (drops, frame_drops, any new one) a counter tally_<object>_total{core,reason}.
 *  - stats.ports[]: tally_port_<field>_total{port}.
 *  - status: top-level numbers and booleans are gauges tally_<field>, one level of objects
 *    tally_<object>_<field> (tally_memory_used_bytes), booleans of cores[] and ports[]
 *    tally_core_<field>{core} / tally_port_<field>{port}; strings of the top level go to
 *    tally_info's labels.
 *  - jobs[]: tally_job_<field>{job} gauges (nested objects flattened), strings into
 *    tally_job_info's labels.
 *  - workers[]: tally_worker_<field>_total{job,rank,core}; durations are gauges in seconds.
 *  - stuck chunks: per job and per (job, missing rank): how many, and the oldest's age.
 * Fields named *_ms, *_us, *_s are converted to seconds; rates are left to PromQL.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ctl_exp.h"

#define LB 512

static void help_of(char *h, size_t len, const char *what, const char *field)
{
	snprintf(h, len, "Tally %s: field '%s' of the control plane's answer", what, field);
}

/* Every number (counter) and object of numbers (counter by reason) of one entry. */
static void counters_of(struct ctl_exp_out *o, const json_t *entry, const char *prefix,
			const char *skip, const char *lb, const char *what)
{
	const char *k;
	json_t *v;
	char name[128], help[192], lb2[LB];

	json_object_foreach((json_t *)entry, k, v) {
		if (!strcmp(k, skip))
			continue;
		if (json_is_number(v)) {
			snprintf(name, sizeof(name), "%s%s_total", prefix, k);
			ctl_exp_sanitize(name);
			help_of(help, sizeof(help), what, k);
			ctl_exp_sample(o, name, "counter", help, lb, json_number_value(v));
		} else if (json_is_object(v)) {
			const char *r;
			json_t *rv;
			snprintf(name, sizeof(name), "%s%s_total", prefix, k);
			ctl_exp_sanitize(name);
			snprintf(help, sizeof(help), "Tally %s: '%s' by reason", what, k);
			json_object_foreach(v, r, rv) {
				if (!json_is_number(rv))
					continue;
				snprintf(lb2, sizeof(lb2), "%s", lb);
				ctl_exp_label(lb2, sizeof(lb2), "reason", r);
				ctl_exp_sample(o, name, "counter", help, lb2, json_number_value(rv));
			}
		}
	}
}

static void render_stats(struct ctl_exp_out *o, const json_t *stats)
{
	size_t i;
	json_t *e;
	char lb[LB];

	json_array_foreach(json_object_get(stats, "cores"), i, e) {
		lb[0] = '\0';
		ctl_exp_label_int(lb, sizeof(lb), "core", json_object_get(e, "core"));
		counters_of(o, e, "tally_", "core", lb, "counter per appliance core");
	}
	json_array_foreach(json_object_get(stats, "ports"), i, e) {
		lb[0] = '\0';
		ctl_exp_label_int(lb, sizeof(lb), "port", json_object_get(e, "port"));
		counters_of(o, e, "tally_port_", "port", lb, "counter per NIC port");
	}
}

/* Numbers and booleans of obj as gauges prefix<field> (units converted). */
static void gauges_of(struct ctl_exp_out *o, const json_t *obj, const char *prefix,
		      const char *skip, const char *lb, const char *what)
{
	const char *k;
	json_t *v;
	char name[128], f[96], help[192];

	json_object_foreach((json_t *)obj, k, v) {
		if ((skip && !strcmp(k, skip)) || !ctl_exp_is_num(v))
			continue;
		double scale = ctl_exp_base_unit(k, f, sizeof(f));
		snprintf(name, sizeof(name), "%s%s", prefix, f);
		help_of(help, sizeof(help), what, k);
		ctl_exp_sample(o, name, "gauge", help, lb, ctl_exp_num(v) * scale);
	}
}

/* Booleans of each entry of arr as gauges prefix<field>{key}. */
static void flags_of(struct ctl_exp_out *o, const json_t *arr, const char *prefix,
		     const char *key)
{
	size_t i;
	json_t *e, *v;
	const char *k;
	char lb[LB], name[128], help[192];

	json_array_foreach(arr, i, e) {
		lb[0] = '\0';
		ctl_exp_label_int(lb, sizeof(lb), key, json_object_get(e, key));
		json_object_foreach(e, k, v) {
			if (!json_is_boolean(v))
				continue;
			snprintf(name, sizeof(name), "%s%s", prefix, k);
			ctl_exp_sanitize(name);
			help_of(help, sizeof(help), "status flag (1 true)", k);
			ctl_exp_sample(o, name, "gauge", help, lb, ctl_exp_num(v));
		}
	}
}

static void render_status(struct ctl_exp_out *o, const json_t *st)
{
	const char *k;
	json_t *v;
	char lb[LB] = "", prefix[128];

	json_object_foreach((json_t *)st, k, v) {
		if (json_is_string(v)) {
			char key[64];
			snprintf(key, sizeof(key), "%s", k);
			ctl_exp_sanitize(key);
			ctl_exp_label(lb, sizeof(lb), key, json_string_value(v));
		} else if (json_is_object(v)) {
			snprintf(prefix, sizeof(prefix), "tally_%s_", k);
			ctl_exp_sanitize(prefix);
			gauges_of(o, v, prefix, NULL, "", "appliance status");
		}
	}
	ctl_exp_sample(o, "tally_info", "gauge",
		       "Tally appliance: version and transport in labels (always 1)", lb, 1);
	gauges_of(o, st, "tally_", NULL, "", "appliance status");
	flags_of(o, json_object_get(st, "cores"), "tally_core_", "core");
	flags_of(o, json_object_get(st, "ports"), "tally_port_", "port");
}

static void flatten_job(struct ctl_exp_out *o, const json_t *job, const char *prefix,
			const char *lb, char *info, size_t ilen)
{
	const char *k;
	json_t *v;
	char p2[128];

	gauges_of(o, job, prefix, "job_id", lb, "job");
	json_object_foreach((json_t *)job, k, v) {
		if (json_is_object(v)) {
			snprintf(p2, sizeof(p2), "%s%s_", prefix, k);
			ctl_exp_sanitize(p2);
			flatten_job(o, v, p2, lb, NULL, 0);
		} else if (json_is_string(v) && info) {
			char key[64];
			snprintf(key, sizeof(key), "%s", k);
			ctl_exp_sanitize(key);
			ctl_exp_label(info, ilen, key, json_string_value(v));
		}
	}
}

static void render_jobs(struct ctl_exp_out *o, const json_t *jobs)
{
	size_t i;
	json_t *e;
	char lb[LB], info[LB];

	json_array_foreach(jobs, i, e) {
		lb[0] = '\0';
		ctl_exp_label_int(lb, sizeof(lb), "job_id", json_object_get(e, "job_id"));
		snprintf(info, sizeof(info), "%s", lb);
		flatten_job(o, e, "tally_job_", lb, info, sizeof(info));
		ctl_exp_sample(o, "tally_job_info", "gauge",
			       "Tally job: its string fields in labels (always 1)", info, 1);
	}
}

static void render_workers(struct ctl_exp_out *o, const json_t *workers)
{
	size_t i;
	json_t *e, *v;
	const char *k;
	char lb[LB], name[128], f[96], help[192];

	json_array_foreach(workers, i, e) {
		lb[0] = '\0';
		ctl_exp_label_int(lb, sizeof(lb), "job_id", json_object_get(e, "job_id"));
		ctl_exp_label_int(lb, sizeof(lb), "rank", json_object_get(e, "rank"));
		ctl_exp_label_int(lb, sizeof(lb), "core", json_object_get(e, "core"));
		json_object_foreach(e, k, v) {
			if (!json_is_number(v) || !strcmp(k, "job_id") || !strcmp(k, "rank") ||
			    !strcmp(k, "core"))
				continue;
			double scale = ctl_exp_base_unit(k, f, sizeof(f));
			int dur = strstr(f, "_seconds") != NULL;
			snprintf(name, sizeof(name), "tally_worker_%s%s", f, dur ? "" : "_total");
			help_of(help, sizeof(help), dur ? "worker (age)" : "worker counter", k);
			ctl_exp_sample(o, name, dur ? "gauge" : "counter", help, lb,
				       json_number_value(v) * scale);
		}
	}
}

int ctl_exp_render(const struct ctl_exp_snap *snap, const struct ctl_exp_self *self,
		   const char *appliance, struct ctl_exp_buf *out)
{
	struct ctl_exp_out o = { 0 };

	ctl_exp_label(o.app, sizeof(o.app), "appliance", appliance);
	ctl_exp_sample(&o, "tally_up", "gauge",
		       "1 when the appliance's control socket answered every query of this scrape",
		       "", snap->up);
	if (snap->status)
		render_status(&o, snap->status);
	if (snap->stats)
		render_stats(&o, snap->stats);
	if (snap->jobs)
		render_jobs(&o, snap->jobs);
	if (snap->workers)
		render_workers(&o, snap->workers);
	if (snap->stuck)
		ctl_exp_render_stuck(&o, snap->stuck, snap->jobs);
	ctl_exp_sample(&o, "tally_exporter_query_duration_seconds", "gauge",
		       "seconds the exporter's last control-socket queries took", "", snap->query_s);
	if (self) {
		ctl_exp_sample(&o, "tally_exporter_refreshes_total", "counter",
			       "control-socket refreshes (scrapes within the cache interval share one)",
			       "", (double)self->refreshes);
		ctl_exp_sample(&o, "tally_exporter_control_errors_total", "counter",
			       "refreshes where a control call failed", "", (double)self->control_errors);
		ctl_exp_sample(&o, "tally_exporter_http_requests_total", "counter",
			       "HTTP requests answered", "", (double)self->http_requests);
		ctl_exp_sample(&o, "tally_exporter_http_rejected_total", "counter",
			       "HTTP connections refused (over the connection cap) or malformed", "",
			       (double)self->http_rejected);
		ctl_exp_sample(&o, "tally_exporter_http_timeouts_total", "counter",
			       "HTTP connections closed for being too slow", "",
			       (double)self->http_timeouts);
	}
	return ctl_exp_out_finish(&o, out);
}
