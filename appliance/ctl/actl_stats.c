/* SPDX-License-Identifier: Apache-2.0
 * actl_stats.c — status, stats_get and stats_reset, registered here beside their handlers;
 * the rate sample (totals of the last interval).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actl_int.h"
#include "tally_auth.h"

#ifndef TALLY_VERSION_STR
#define TALLY_VERSION_STR "0.1.0"
#endif

void actl_sample(struct tally_actl *a, struct actl_sample *s)
{
	s->ns = actl_now_ns();
	tally_actl_collect(a->ops, a->ctx, &s->c, NULL);
}

static int h_status(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	struct tally_actl *a = ctx;
	struct tally_ctl_server_stats ss = { 0 };
	json_t *jobs = NULL;
	(void)p;

	if (actl_h_jobs(a, NULL, &jobs, m, ml))
		jobs = NULL;
	if (a->srv) /* NULL when replaying a config without a socket */
		tally_ctl_server_stats(a->srv, &ss);
	*r = json_pack("{s:s, s:f}", "version", TALLY_VERSION_STR, "uptime_s",
		       a->ops->uptime(a->ctx));
	if (!*r) {
		json_decref(jobs);
		return -ENOMEM;
	}
	a->ops->status(a->ctx, *r);
	json_object_set_new(*r, "jobs", json_integer(jobs ? (json_int_t)json_array_size(jobs) : -1));
	const char *gmac = tally_auth_backend(); /* chosen once per process */
	json_object_set_new(*r, "gmac_backend", json_string(gmac ? gmac : "-"));
	/* refusals of the control socket (THREAT_MODEL.md): full (busy), idle clients evicted,
	 * root / our uid let in beyond max_clients (reserved), slow or idle ones closed */
	json_object_set_new(*r, "control", json_pack("{s:s, s:i, s:I, s:I, s:I, s:I}", "socket",
		a->srv ? tally_ctl_server_path(a->srv) : "-", "clients", (int)ss.clients,
		"busy", (json_int_t)ss.busy, "evicted", (json_int_t)ss.evicted,
		"reserved", (json_int_t)ss.reserved, "timeouts", (json_int_t)ss.timeouts));
	json_decref(jobs);
	return 0;
}

static double rate(uint64_t x, uint64_t y, double secs)
{
	return y >= x && secs > 0 ? (double)(y - x) / secs : 0.0;
}

static json_t *rates_json(struct tally_actl *a)
{
	struct actl_sample x = a->prev, y = a->last;

	if (!y.ns || y.ns == x.ns) { /* no interval yet: since start */
		actl_sample(a, &y);
		memset(&x, 0, sizeof(x));
		x.ns = y.ns - (uint64_t)(a->ops->uptime(a->ctx) * 1e9);
	}
	double secs = (double)(y.ns - x.ns) / 1e9;
	const struct tally_actl_counters *c0 = &x.c, *c1 = &y.c;
	json_t *rates = json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f}",
		"rx_pps", rate(c0->io.rx_pkts, c1->io.rx_pkts, secs),
		"rx_bps", 8 * rate(c0->io.rx_bytes, c1->io.rx_bytes, secs),
		"tx_pps", rate(c0->io.tx_pkts, c1->io.tx_pkts, secs),
		"tx_bps", 8 * rate(c0->io.tx_bytes, c1->io.tx_bytes, secs),
		"pushes_pps", rate(c0->eng.pushes, c1->eng.pushes, secs),
		"goodput_bps", 8 * rate(c0->eng.push_bytes, c1->eng.push_bytes, secs),
		"results_pps", rate(c0->eng.results, c1->eng.results, secs));
	return json_pack("{s:f, s:o}", "interval_s", secs, "rates", rates);
}

static int h_stats(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	struct tally_actl *a = ctx;
	unsigned n = actl_ncores(a);
	struct tally_actl_counters tot, *per = calloc(n ? n : 1, sizeof(*per));
	json_t *cores = json_array(), *ports;
	(void)p;

	if (!per || !cores) {
		free(per);
		json_decref(cores);
		snprintf(m, ml, "stats: out of memory");
		return -ENOMEM;
	}
	tally_actl_collect(a->ops, a->ctx, &tot, per);
	for (unsigned i = 0; i < n; i++) {
		json_t *o = json_pack("{s:i}", "core", (int)i); /* first column */
		json_t *cs = tally_actl_counters_json(&per[i]);
		json_object_update(o, cs);
		json_decref(cs);
		json_array_append_new(cores, o);
	}
	free(per);
	ports = a->ops->ports ? a->ops->ports(a->ctx) : NULL;
	*r = rates_json(a);
	if (!*r) {
		json_decref(cores);
		json_decref(ports);
		return -ENOMEM;
	}
	json_object_set_new(*r, "totals", tally_actl_counters_json(&tot));
	json_object_set_new(*r, "cores", cores);
	json_object_set_new(*r, "ports", ports ? ports : json_array());
	return 0;
}

static int h_stats_reset(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	struct tally_actl *a = ctx;
	int rc = a->ops->stats_reset(a->ctx);
	(void)p;

	if (rc) {
		snprintf(m, ml, "stats reset: %s", strerror(-rc));
		return rc;
	}
	actl_sample(a, &a->last);
	a->prev = a->last;
	*r = json_pack("{s:b}", "reset", 1);
	return 0;
}

void actl_stats_register(struct tally_ctl_backend *b)
{
	b->handlers[TALLY_CTL_M_APPLIANCE_STATUS] = h_status;
	b->handlers[TALLY_CTL_M_STATS_GET] = h_stats;
	b->handlers[TALLY_CTL_M_STATS_RESET] = h_stats_reset;
}
