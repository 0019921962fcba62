/* SPDX-License-Identifier: Apache-2.0
 * tallyd_tel.c — read-only counters for DPDK telemetry (/tally/stats, /tally/status),
 * so dpdk-telemetry.py and telemetry collectors see them. The callbacks run on DPDK's
 * telemetry thread: they only read plain per-lcore counters (torn reads tolerated), through
 * the same collect as `tallyctl stats`, so both show the same names and values.
 * Telemetry commands cannot be unregistered, so stop makes them answer "stopped" and waits
 * for a callback in flight.
 */
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include <rte_telemetry.h>

#include "tallyd.h"
#include "tallyd_ctl.h"
#include "tallyd_tel.h"

static _Atomic(struct tallyd *) tel_d;
static atomic_int tel_busy;
static int tel_registered;

static struct tallyd *tel_enter(void)
{
	atomic_fetch_add(&tel_busy, 1);
	struct tallyd *d = atomic_load(&tel_d);
	if (!d)
		atomic_fetch_sub(&tel_busy, 1);
	return d;
}

static void tel_leave(void)
{
	atomic_fetch_sub(&tel_busy, 1);
}

struct tel_out {
	struct rte_tel_data *top, *drops, *frame_drops;
};

static void tel_one(void *arg, const char *group, const char *name, uint64_t v)
{
	struct tel_out *t = arg;
	struct rte_tel_data *o = !group ? t->top : strcmp(group, "drops") ? t->frame_drops
									   : t->drops;
	if (o)
		rte_tel_data_add_dict_u64(o, name, v);
}

/* Totals as `tallyctl stats --json` shows them: counters, then drops and frame_drops. */
static int tel_stats(const char *cmd, const char *params, struct rte_tel_data *out)
{
	struct tallyd *d = tel_enter();
	struct tally_actl_counters tot;
	struct tel_out t = { .top = out };
	(void)cmd; (void)params;

	rte_tel_data_start_dict(out);
	if (!d) {
		rte_tel_data_add_dict_string(out, "state", "stopped");
		return 0;
	}
	tallyd_ctl_collect(d, &tot);
	t.drops = rte_tel_data_alloc();
	t.frame_drops = rte_tel_data_alloc();
	if (t.drops)
		rte_tel_data_start_dict(t.drops);
	if (t.frame_drops)
		rte_tel_data_start_dict(t.frame_drops);
	tally_actl_counters_each(&tot, tel_one, &t);
	if (t.drops)
		rte_tel_data_add_dict_container(out, "drops", t.drops, 0);
	if (t.frame_drops)
		rte_tel_data_add_dict_container(out, "frame_drops", t.frame_drops, 0);
	tel_leave();
	return 0;
}

static int tel_status(const char *cmd, const char *params, struct rte_tel_data *out)
{
	struct tallyd *d = tel_enter();
	(void)cmd; (void)params;

	rte_tel_data_start_dict(out);
	if (!d) {
		rte_tel_data_add_dict_string(out, "state", "stopped");
		return 0;
	}
	rte_tel_data_add_dict_string(out, "state", d->draining ? "draining" : "running");
	rte_tel_data_add_dict_u64(out, "uptime_s", (uint64_t)tallyd_uptime(d));
	rte_tel_data_add_dict_int(out, "cores", (int)d->ncores);
	rte_tel_data_add_dict_int(out, "ports", (int)d->nports);
	rte_tel_data_add_dict_int(out, "base_port", (int)d->conf.base_port);
	tel_leave();
	return 0;
}

void tallyd_tel_register(struct tallyd *d)
{
	atomic_store(&tel_d, d);
	if (tel_registered)
		return;
	/* -EINVAL when telemetry is disabled (--no-telemetry): nothing to register with */
	if (rte_telemetry_register_cmd("/tally/stats", tel_stats,
				       "Tally appliance counters (totals). No parameters") == 0 &&
	    rte_telemetry_register_cmd("/tally/status", tel_status,
				       "Tally appliance state. No parameters") == 0)
		tel_registered = 1;
}

void tallyd_tel_unregister(void)
{
	atomic_store(&tel_d, NULL);
	while (atomic_load(&tel_busy))
		usleep(100);
}
