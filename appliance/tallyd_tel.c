/* SPDX-License-Identifier: Apache-2.0
 * tallyd_ctl_tel.c — read-only counters for DPDK telemetry (/tally/stats, /tally/status),
 * so dpdk-telemetry.py and telemetry collectors see them. The callbacks run on DPDK's
 * telemetry thread: they only sum plain per-lcore counters (torn reads tolerated).
 * Telemetry commands cannot be unregistered, so stop makes them answer "stopped" and waits
 * for a callback in flight.
 */
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include <rte_telemetry.h>

#include "tallyd_ctl_int.h"

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

static int tel_stats(const char *cmd, const char *params, struct rte_tel_data *out)
{
	struct tallyd *d = tel_enter();
	struct tally_engine_stats et;
	struct tallyd_lcore_stats lt;
	(void)cmd; (void)params;

	rte_tel_data_start_dict(out);
	if (!d) {
		rte_tel_data_add_dict_string(out, "state", "stopped");
		return 0;
	}
	memset(&et, 0, sizeof(et));
	tallyd_stats_sum(d, &lt);
	for (unsigned i = 0; i < d->ncores; i++) {
		if (!d->lcore[i]->engine)
			continue;
		const struct tally_engine_stats *e = tally_engine_stats(d->lcore[i]->engine);
		et.pushes += e->pushes;
		et.push_bytes += e->push_bytes;
		et.duplicates += e->duplicates;
		et.late_pushes += e->late_pushes;
		et.completions += e->completions;
		et.results += e->results;
		et.resends += e->resends;
		for (int k = 0; k < TALLY_R_COUNT; k++)
			et.drops[k] += e->drops[k];
	}
	rte_tel_data_add_dict_u64(out, "rx_pkts", lt.rx_pkts);
	rte_tel_data_add_dict_u64(out, "rx_bytes", lt.rx_bytes);
	rte_tel_data_add_dict_u64(out, "tx_pkts", lt.tx_pkts);
	rte_tel_data_add_dict_u64(out, "tx_bytes", lt.tx_bytes);
	rte_tel_data_add_dict_u64(out, "tally_pkts", lt.tally_pkts);
	rte_tel_data_add_dict_u64(out, "pushes", et.pushes);
	rte_tel_data_add_dict_u64(out, "summed_bytes", et.push_bytes);
	rte_tel_data_add_dict_u64(out, "duplicates", et.duplicates);
	rte_tel_data_add_dict_u64(out, "late_pushes", et.late_pushes);
	rte_tel_data_add_dict_u64(out, "completions", et.completions);
	rte_tel_data_add_dict_u64(out, "results", et.results);
	rte_tel_data_add_dict_u64(out, "resends", et.resends);
	uint64_t drops = 0, fdrops = 0;
	for (int k = 0; k < TALLY_R_COUNT; k++)
		drops += et.drops[k];
	for (int k = 0; k < TALLY_PKT_D_COUNT; k++)
		fdrops += lt.drops[k];
	rte_tel_data_add_dict_u64(out, "drops", drops);
	rte_tel_data_add_dict_u64(out, "frame_drops", fdrops);
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

void ctl_telemetry_register(struct tallyd *d)
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

void ctl_telemetry_unregister(void)
{
	atomic_store(&tel_d, NULL);
	while (atomic_load(&tel_busy))
		usleep(100);
}
