/* SPDX-License-Identifier: Apache-2.0
 * ctl_exp_query.c — one refresh of the exporter: a fresh connection to the appliance's
 * control socket, five read-only calls, each bounded in time. The control server runs its
 * handlers on the appliance's main thread, never on a datapath core; a refresh costs the
 * appliance what one `tallyctl stats` does, whatever the number of scrapers (the daemon
 * caches the result).
 */
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl_exp.h"
#include "tally_ctl.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* 0 with *out set, or a negative errno (-EPROTO for an error answer). */
static int call(int fd, const char *method, json_t *params, int timeout_ms, json_t **out)
{
	json_t *res = NULL, *err = NULL;
	int rc = tally_ctl_call(fd, method, params, timeout_ms, &res, &err);

	json_decref(params);
	if (rc == 0 && err) {
		json_decref(err);
		json_decref(res);
		return -EPROTO;
	}
	if (rc == 0)
		*out = res;
	return rc;
}

void ctl_exp_query(const char *path, int timeout_ms, unsigned stuck_ms,
		   struct ctl_exp_snap *snap)
{
	char msg[256];
	double t0 = now_s();
	int fd, bad = 0;

	ctl_exp_snap_clear(snap);
	fd = tally_ctl_connect(path, msg, sizeof(msg));
	if (fd < 0)
		goto cleanup;
	bad |= call(fd, "appliance_status", NULL, timeout_ms, &snap->status) != 0;
	bad |= call(fd, "stats_get", NULL, timeout_ms, &snap->stats) != 0;
	bad |= call(fd, "jobs_list", NULL, timeout_ms, &snap->jobs) != 0;
	bad |= call(fd, "workers_list", NULL, timeout_ms, &snap->workers) != 0;
	bad |= call(fd, "chunks_stuck", json_pack("{s:i, s:i}", "threshold_ms", (int)stuck_ms,
						  "limit", 10000), timeout_ms, &snap->stuck) != 0;
	snap->up = !bad;
	close(fd);
cleanup:
	snap->query_s = now_s() - t0;
}
