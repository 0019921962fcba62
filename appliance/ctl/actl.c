/* SPDX-License-Identifier: Apache-2.0
 * actl.c — the appliance control plane: the JSON-RPC server (control/) over a backend
 * (tally_actl_ops), polled from the appliance's main thread; config replay; rate samples.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "actl_int.h"

#define SAMPLE_NS 1000000000ull

static void actl_log(void *ctx, int prio, const char *msg)
{
	struct tally_actl *a = ctx;

	a->ops->log(a->ctx, prio, msg);
}

static void logf_(struct tally_actl *a, int prio, const char *fmt, const char *path, int err)
{
	char msg[256];

	snprintf(msg, sizeof(msg), fmt, path, strerror(-err));
	a->ops->log(a->ctx, prio, msg);
}

struct tally_actl *tally_actl_start(const struct tally_actl_cfg *cfg, int *err)
{
	const char *path = cfg->socket_path && cfg->socket_path[0] ? cfg->socket_path
								    : TALLY_CTL_DEFAULT_SOCKET;
	struct tally_actl *a = calloc(1, sizeof(*a));

	*err = 0;
	if (!a) {
		*err = -ENOMEM;
		return NULL;
	}
	a->ops = cfg->ops;
	a->ctx = cfg->ctx;
	a->b.ctx = a;
	actl_stats_register(&a->b);
	actl_jobs_register(&a->b);
	actl_query_register(&a->b);
	struct tally_ctl_server_cfg sc = { .path = path, .log = actl_log, .log_ctx = a,
					   .idle_timeout_ms = cfg->idle_timeout_ms };
	a->srv = tally_ctl_server_create(&sc, &a->b, err);
	if (!a->srv) {
		/* An explicit socket that cannot be served is fatal. The default one may be
		 * held by another appliance on this host, or /run/tally not be writable (not
		 * root): run without a control socket then, and say so. */
		if (strcmp(path, TALLY_CTL_DEFAULT_SOCKET) != 0) {
			logf_(a, LOG_ERR, "control socket %s: %s", path, *err);
			free(a);
			return NULL;
		}
		logf_(a, LOG_ERR, "control socket %s: %s; running without one (give "
		      "--ctl-socket PATH)", path, *err);
		*err = 0;
	}
	actl_sample(a, &a->last);
	a->prev = a->last;
	return a;
}

int tally_actl_poll(struct tally_actl *a, int timeout_ms)
{
	int rc;

	if (!a)
		return 0;
	rc = a->srv ? tally_ctl_server_poll(a->srv, timeout_ms) : 0;
	if (actl_now_ns() - a->last.ns >= SAMPLE_NS) {
		a->prev = a->last;
		actl_sample(a, &a->last);
	}
	return rc < 0 ? rc : 0;
}

void tally_actl_stop(struct tally_actl *a)
{
	if (!a)
		return;
	tally_ctl_server_destroy(a->srv);
	free(a);
}

int tally_actl_replay(struct tally_actl *a, const char *path, char *err, size_t errlen)
{
	return tally_ctl_replay_file(&a->b, path, err, errlen);
}

int tally_actl_fd(const struct tally_actl *a)
{
	return a && a->srv ? tally_ctl_server_fd(a->srv) : -1;
}
