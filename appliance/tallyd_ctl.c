/* SPDX-License-Identifier: Apache-2.0
 * tallyd_ctl.c — tallyd's control plane: the JSON-RPC server (control/) bound to the
 * appliance's state, polled from tallyd's main thread; config replay; DPDK telemetry.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#include <rte_log.h>

#include "tallyd_ctl.h"
#include "tallyd_ctl_int.h"

#define SAMPLE_NS 1000000000ull

uint64_t ctl_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct ctl_job *ctl_job_find(struct ctl *c, uint32_t job_id, int create)
{
	struct ctl_job *free_slot = NULL;

	for (int i = 0; i < CTL_MAX_JOBS; i++) {
		if (c->jobs[i].used && c->jobs[i].job_id == job_id)
			return &c->jobs[i];
		if (!c->jobs[i].used && !free_slot)
			free_slot = &c->jobs[i];
	}
	if (!create || !free_slot)
		return NULL;
	memset(free_slot, 0, sizeof(*free_slot));
	free_slot->used = 1;
	free_slot->job_id = job_id;
	return free_slot;
}

static void ctl_log(void *ctx, int prio, const char *msg)
{
	(void)ctx;
	/* syslog priorities LOG_ERR..LOG_DEBUG (3..7) are RTE_LOG_ERR..RTE_LOG_DEBUG (4..8) */
	rte_log((uint32_t)(prio + 1), RTE_LOGTYPE_USER1, "tallyd: control: %s\n", msg);
}

static void backend_init(struct ctl *c)
{
	tally_ctl_handler_fn *h = c->b.handlers;

	c->b.ctx = c;
	h[TALLY_CTL_M_APPLIANCE_STATUS] = ctl_h_status;
	h[TALLY_CTL_M_STATS_GET] = ctl_h_stats;
	h[TALLY_CTL_M_STATS_RESET] = ctl_h_stats_reset;
	h[TALLY_CTL_M_JOBS_LIST] = ctl_h_jobs;
	h[TALLY_CTL_M_JOB_GET] = ctl_h_job_get;
	h[TALLY_CTL_M_JOB_ADD] = ctl_h_job_add;
	h[TALLY_CTL_M_KEYS_LIST] = ctl_h_keys;
	h[TALLY_CTL_M_CHUNKS_STUCK] = ctl_h_stuck;
	h[TALLY_CTL_M_WORKERS_LIST] = ctl_h_workers;
	h[TALLY_CTL_M_JOB_SET_POLICY] = ctl_h_policy;
	h[TALLY_CTL_M_JOB_EVICT] = ctl_h_job_evict;
	h[TALLY_CTL_M_APPLIANCE_DRAIN] = ctl_h_drain;
	h[TALLY_CTL_M_APPLIANCE_SHUTDOWN] = ctl_h_shutdown;
	h[TALLY_CTL_M_LOG_SET_LEVEL] = ctl_h_log_level;
	h[TALLY_CTL_M_CONFIG_SAVE] = ctl_h_config_save;
}

int tallyd_ctl_start(struct tallyd *d)
{
	struct tally_ctl_server_cfg cfg = { .path = d->conf.ctl_path, .log = ctl_log };
	struct ctl *c = calloc(1, sizeof(*c));
	int err = 0;

	if (!c)
		return -ENOMEM;
	c->d = d;
	backend_init(c);
	c->srv = tally_ctl_server_create(&cfg, &c->b, &err);
	if (!c->srv) {
		/* An explicit --ctl-socket that cannot be served is fatal. The default one may
		 * be held by another tallyd on this host, or /run/tally not be writable (not
		 * root): run without a control socket then, and say so. */
		if (strcmp(cfg.path, TALLY_CTL_DEFAULT_SOCKET) != 0) {
			rte_log(RTE_LOG_ERR, RTE_LOGTYPE_USER1, "tallyd: control socket %s: %s\n",
				cfg.path, strerror(-err));
			free(c);
			return err;
		}
		rte_log(RTE_LOG_ERR, RTE_LOGTYPE_USER1, "tallyd: control socket %s: %s; running "
			"without one (give --ctl-socket PATH)\n", cfg.path, strerror(-err));
	}
	ctl_sample(c, &c->last);
	c->prev = c->last;
	d->ctl = c;
	ctl_telemetry_register(d);
	return 0;
}

int tallyd_ctl_poll(struct tallyd *d)
{
	struct ctl *c = d->ctl;
	int rc;

	if (!c)
		return 0;
	rc = c->srv ? tally_ctl_server_poll(c->srv, 0) : 0;
	if (ctl_now_ns() - c->last.ns >= SAMPLE_NS) {
		c->prev = c->last;
		ctl_sample(c, &c->last);
		ctl_policy_enforce(c);
	}
	return rc < 0 ? rc : 0;
}

int tallyd_ctl_stop(struct tallyd *d)
{
	struct ctl *c = d->ctl;

	if (!c)
		return 0;
	ctl_telemetry_unregister();
	tally_ctl_server_destroy(c->srv);
	d->ctl = NULL;
	free(c);
	return 0;
}

int tallyd_ctl_replay(struct tallyd *d, const char *path, char *err, size_t errlen)
{
	struct ctl *c = d->ctl;

	if (!c) {
		snprintf(err, errlen, "config %s: control plane not started", path);
		return -EINVAL;
	}
	return tally_ctl_replay_file(&c->b, path, err, errlen);
}
