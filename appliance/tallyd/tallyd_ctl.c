/* SPDX-License-Identifier: Apache-2.0
 * tallyd_ctl.c — tallyd's backend for the appliance control plane (appliance/ctl): engine
 * work goes to the lcores as QUERY commands on their SP/SC rings (tallyd_cmd_exec), counters
 * are read from the per-lcore blocks, status and port counters come from ethdev.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_ethdev.h>
#include <rte_log.h>
#include <rte_version.h>

#include "tallyd.h"
#include "tallyd_ctl.h"

struct tramp {
	tally_actl_engine_fn fn;
	void *arg;
};

/* Runs on the lcore (lc_exec's QUERY). */
static int tramp_run(struct tallyd_lcore *lc, void *buf, size_t len, void *arg)
{
	const struct tramp *t = arg;
	(void)buf; (void)len;
	return t->fn(lc->engine, lc->idx, t->arg);
}

static unsigned b_ncores(void *ctx)
{
	return ((struct tallyd *)ctx)->ncores;
}

static int b_exec(void *ctx, unsigned core, tally_actl_engine_fn fn, void *arg)
{
	struct tramp t = { fn, arg };
	struct tallyd_cmd cmd = { .op = TALLYD_CMD_QUERY, .fn = tramp_run, .arg = &t };

	return tallyd_cmd_exec(ctx, core, &cmd);
}

/* The same command on every core, posted at once. */
static int exec_all_cmd(struct tallyd *d, const struct tallyd_cmd *tmpl)
{
	struct tallyd_cmd *cmds = calloc(d->ncores ? d->ncores : 1, sizeof(*cmds));
	int rc;

	if (!cmds)
		return -ENOMEM;
	for (unsigned i = 0; i < d->ncores; i++)
		cmds[i] = *tmpl;
	rc = tallyd_cmd_exec_all(d, cmds);
	free(cmds);
	return rc;
}

static int b_exec_all(void *ctx, tally_actl_engine_fn fn, void *arg)
{
	struct tramp t = { fn, arg };
	struct tallyd_cmd cmd = { .op = TALLYD_CMD_QUERY, .fn = tramp_run, .arg = &t };

	return exec_all_cmd(ctx, &cmd);
}

static void b_collect(void *ctx, unsigned core, struct tally_actl_counters *out)
{
	const struct tallyd *d = ctx;
	const struct tallyd_lcore *lc = d->lcore[core];

	out->io = lc->st.io;
	out->io.tx_pkts = lc->tx.st.tx_pkts;
	out->io.tx_bytes = lc->tx.st.tx_bytes;
	out->io.tx_relayed = lc->tx.st.relayed;
	for (int k = 0; k < TALLY_PKT_D_COUNT; k++)
		out->frame_drops[k] = lc->st.drops[k] + lc->tx.st.drops[k];
	if (lc->engine)
		out->eng = *tally_engine_stats(lc->engine);
	tallyd_verbs_collect(d, core, out);
}

static int b_stats_reset(void *ctx)
{
	struct tallyd_cmd cmd = { .op = TALLYD_CMD_STATS_RESET };

	return exec_all_cmd(ctx, &cmd);
}

static int b_drain(void *ctx)
{
	struct tallyd *d = ctx;
	struct tallyd_cmd cmd = { .op = TALLYD_CMD_DRAIN };

	d->draining = 1;
	return exec_all_cmd(d, &cmd);
}

static void b_shutdown(void *ctx, int drain)
{
	struct tallyd *d = ctx;

	if (!drain)
		d->conf.drain_timeout_ms = 0;
	d->quit = 1; /* the main loop drains (or not), stops the lcores and exits */
}

static int b_quitting(void *ctx)
{
	return ((struct tallyd *)ctx)->quit;
}

static double b_uptime(void *ctx)
{
	return tallyd_uptime(ctx);
}

static json_t *mac_json(const uint8_t *m)
{
	char b[24];
	snprintf(b, sizeof(b), "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
	return json_string(b);
}

static json_t *port_json(const struct tallyd_port *pt, uint16_t i)
{
	struct rte_eth_link link = { 0 };
	struct in_addr in = { .s_addr = pt->ifa.ip };
	char ip[INET_ADDRSTRLEN];

	rte_eth_link_get_nowait(pt->port_id, &link);
	inet_ntop(AF_INET, &in, ip, sizeof(ip));
	json_t *o = json_pack("{s:i, s:i, s:s, s:s, s:i, s:i, s:b, s:b, s:I}", "port", (int)i,
		"port_id", (int)pt->port_id, "driver", pt->driver, "ip", ip, "rx_queues",
		(int)pt->nrxq, "tx_queues", (int)pt->ntxq, "steered", pt->steered,
		"link_up", link.link_status == RTE_ETH_LINK_UP, "speed_mbps",
		(json_int_t)link.link_speed);
	json_object_set_new(o, "mac", mac_json(pt->ifa.mac));
	json_object_set_new(o, "rx_interrupts", json_boolean(pt->rx_intr));
	return o;
}

static void b_status(void *ctx, json_t *out)
{
	struct tallyd *d = ctx;
	json_t *cores = json_array(), *ports = json_array();
	size_t used = 0;

	for (unsigned i = 0; i < d->ncores; i++) {
		const struct tallyd_lcore *lc = d->lcore[i];
		if (lc->engine)
			used += tally_engine_mem_used(lc->engine);
		json_t *o = json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:b, s:b}",
			"core", (int)i, "lcore", (int)lc->lcore_id, "socket", lc->socket, "port",
			lc->port_idx == TALLYD_NO_PORT ? -1 : (int)lc->port_idx, "queue", (int)lc->rxq, "udp_port",
			(int)(d->conf.base_port + i), "running", lc->running, "draining",
			lc->draining);
		/* the idle wait in effect (and why interrupt mode fell back) */
		json_object_set_new(o, "idle", json_string(tallyd_idle_name(lc->idle.mode)));
		if (lc->idle.why[0])
			json_object_set_new(o, "idle_fallback", json_string(lc->idle.why));
		json_object_set_new(o, "idle_waits", json_integer((json_int_t)lc->idle.waits));
		json_object_set_new(o, "idle_wakeups", json_integer((json_int_t)lc->idle.wakeups));
		if (lc->npoll > 1) { /* ports dealt over fewer cores: every (port, queue) it polls */
			json_t *pq = json_array();

			for (uint16_t k = 0; k < lc->npoll; k++)
				json_array_append_new(pq, json_pack("{s:i, s:i}", "port",
					(int)lc->poll[k].port_idx, "queue", (int)lc->poll[k].rxq));
			json_object_set_new(o, "polls", pq);
		}
		json_array_append_new(cores, o);
	}
	for (uint16_t i = 0; i < d->nports; i++)
		json_array_append_new(ports, port_json(&d->port[i], i));
	json_object_set_new(out, "dpdk", json_string(rte_version()));
	json_object_set_new(out, "draining", json_boolean(d->draining));
	json_object_set_new(out, "open_admission", json_boolean(d->conf.open_admission));
	tallyd_verbs_status(d, out, cores);
	json_object_set_new(out, "cores", cores);
	json_object_set_new(out, "ports", ports);
	json_object_set_new(out, "memory", json_pack("{s:I, s:I, s:I}",
		"budget_bytes", (json_int_t)d->conf.mem_budget, "used_bytes", (json_int_t)used,
		"det_pool_bytes", (json_int_t)d->conf.det_pool));
}

static json_t *b_ports(void *ctx)
{
	struct tallyd *d = ctx;
	json_t *ports = json_array();

	for (uint16_t i = 0; i < d->nports; i++) {
		struct rte_eth_stats es = { 0 };
		struct tallyd_port *tp = &d->port[i];
		rte_eth_stats_get(d->port[i].port_id, &es);
		/* af_packet's ring drops are missed frames its PMD does not report */
		if (tp->afp_iface[0])
			tally_dpdk_afp_drops(tp->afp_iface, &tp->afp_drops);
		es.imissed += tp->afp_drops;
		json_t *o = json_pack("{s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
			"port", (int)i, "rx_pkts", (json_int_t)es.ipackets, "rx_bytes",
			(json_int_t)es.ibytes, "tx_pkts", (json_int_t)es.opackets, "tx_bytes",
			(json_int_t)es.obytes, "rx_missed", (json_int_t)es.imissed, "rx_errors",
			(json_int_t)es.ierrors, "tx_errors", (json_int_t)es.oerrors, "rx_nombuf",
			(json_int_t)es.rx_nombuf);
		/* its fragments are reassembled (or time out) in the kernel, not here */
		if (tp->afp_iface[0])
			tally_actl_kernel_json(o, 0);
		json_array_append_new(ports, o);
	}
	return ports;
}

/* syslog priorities LOG_ERR..LOG_DEBUG (3..7) are RTE_LOG_ERR..RTE_LOG_DEBUG (4..8) */
static int b_set_log_level(void *ctx, int prio)
{
	struct tallyd *d = ctx;
	int prev = rte_log_get_level(RTE_LOGTYPE_USER1);

	rte_log_set_level(RTE_LOGTYPE_USER1, (uint32_t)(prio + 1));
	d->conf.log_level = (uint32_t)(prio + 1);
	return prev > 0 ? prev - 1 : -EINVAL;
}

static void b_log(void *ctx, int prio, const char *msg)
{
	(void)ctx;
	rte_log((uint32_t)(prio + 1), RTE_LOGTYPE_USER1, "tallyd: control: %s\n", msg);
}

static const struct tally_actl_ops tallyd_actl_ops = {
	.ncores = b_ncores, .exec = b_exec, .exec_all = b_exec_all, .collect = b_collect,
	.stats_reset = b_stats_reset, .drain = b_drain, .shutdown = b_shutdown,
	.quitting = b_quitting, .uptime = b_uptime, .status = b_status, .ports = b_ports,
	.set_log_level = b_set_log_level, .log = b_log,
};

void tallyd_ctl_collect(struct tallyd *d, struct tally_actl_counters *total)
{
	tally_actl_collect(&tallyd_actl_ops, d, total, NULL);
}

int tallyd_ctl_start(struct tallyd *d)
{
	struct tally_actl_cfg cfg = { .socket_path = d->conf.ctl_path, .ops = &tallyd_actl_ops,
				      .ctx = d,
				      .idle_timeout_ms = d->conf.guard.ctl_idle_timeout_ms };
	int err = 0;

	d->ctl = tally_actl_start(&cfg, &err);
	return d->ctl ? 0 : err;
}

int tallyd_ctl_poll(struct tallyd *d)
{
	return tally_actl_poll(d->ctl, 0);
}

int tallyd_ctl_stop(struct tallyd *d)
{
	tally_actl_stop(d->ctl);
	d->ctl = NULL;
	return 0;
}

int tallyd_ctl_replay(struct tallyd *d, const char *path, char *err, size_t errlen)
{
	if (!d->ctl) {
		snprintf(err, errlen, "config %s: control plane not started", path);
		return -EINVAL;
	}
	return tally_actl_replay(d->ctl, path, err, errlen);
}
