/* SPDX-License-Identifier: Apache-2.0
 * udpd_ctl.c — tally-udpd's backend for the appliance control plane (appliance/ctl):
 * engine work through the engine thread's mailbox, counters from the engines and the UDP
 * transport, status from the configuration; the log (stderr, syslog levels).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>

#include "udpd.h"

void udpd_log(struct udpd *d, int prio, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (prio > d->conf.log_level)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "tally-udpd: %s\n", msg);
}

static unsigned b_ncores(void *ctx)
{
	return ((struct udpd *)ctx)->ncores;
}

static int b_exec(void *ctx, unsigned core, tally_actl_engine_fn fn, void *arg)
{
	return udpd_exec(ctx, 0, core, fn, arg);
}

static int b_exec_all(void *ctx, tally_actl_engine_fn fn, void *arg)
{
	return udpd_exec(ctx, 1, 0, fn, arg);
}

/* The transport's counters are for all sockets: they are core 0's. */
static void b_collect(void *ctx, unsigned core, struct tally_actl_counters *out)
{
	struct udpd *d = ctx;
	const struct tally_engine_stats *es = tally_engine_stats(d->eng[core]);

	out->eng = *es;
	out->io.tally_pkts = es->rx_pkts;
	for (int k = 1; k < TALLY_R_COUNT; k++)
		out->io.engine_rejects += es->drops[k];
	if (core == 0)
		udpd_xport_collect(d, out);
}

static int e_reset(struct tally_engine *e, unsigned core, void *arg)
{
	(void)core; (void)arg;
	tally_engine_stats_reset(e);
	return 0;
}

static int b_stats_reset(void *ctx)
{
	return udpd_exec(ctx, 1, 0, e_reset, NULL); /* the transport's counters stay */
}

static int e_drain(struct tally_engine *e, unsigned core, void *arg)
{
	(void)core; (void)arg;
	tally_engine_set_draining(e, 1);
	return 0;
}

static int b_drain(void *ctx)
{
	struct udpd *d = ctx;

	d->draining = 1;
	return udpd_exec(d, 1, 0, e_drain, NULL);
}

static void b_shutdown(void *ctx, int drain)
{
	struct udpd *d = ctx;

	d->drain_on_quit = drain;
	atomic_store(&d->quit, 1);
}

static int b_quitting(void *ctx)
{
	return atomic_load(&((struct udpd *)ctx)->quit);
}

static double b_uptime(void *ctx)
{
	return (double)(udpd_now_ns() - ((struct udpd *)ctx)->start_ns) / 1e9;
}

static void b_status(void *ctx, json_t *out)
{
	struct udpd *d = ctx;
	json_t *cores = json_array();
	size_t used = 0;

	for (unsigned i = 0; i < d->ncores; i++) {
		used += tally_engine_mem_used(d->eng[i]);
		/* idle: the engine thread blocks in ppoll on the sockets (bounded wait) */
		json_array_append_new(cores, json_pack("{s:i, s:i, s:b, s:b, s:s}", "core", (int)i,
			"udp_port", (int)(d->conf.base_port + i), "running",
			atomic_load(&d->running), "draining", d->draining, "idle", "block"));
	}
	json_object_set_new(out, "transport", json_string("kernel-udp"));
	json_object_set_new(out, "draining", json_boolean(d->draining));
	json_object_set_new(out, "open_admission", json_boolean(d->conf.open_admission));
	json_object_set_new(out, "cores", cores);
	udpd_verbs_status(d, out);
	json_object_set_new(out, "ports", json_pack("[{s:i, s:s, s:s}]", "port", 0, "driver",
		"kernel-udp", "ip", d->conf.host[0] ? d->conf.host : "0.0.0.0"));
	json_object_set_new(out, "memory", json_pack("{s:I, s:I, s:I}", "budget_bytes",
		(json_int_t)(d->conf.mem_budget * d->ncores), "used_bytes", (json_int_t)used,
		"det_pool_bytes", (json_int_t)d->conf.det_pool));
}

/* Kernel UDP: what the kernel dropped before the sockets (full receive buffers) and its
 * fragment reassembly (the kernel reassembles for tally-udpd), for `stats`. */
static json_t *b_ports(void *ctx)
{
	json_t *p = json_pack("{s:i}", "port", 0);

	(void)ctx;
	tally_actl_kernel_json(p, 1);
	return json_pack("[o]", p);
}

static int b_set_log_level(void *ctx, int prio)
{
	struct udpd *d = ctx;
	int prev = d->conf.log_level;

	d->conf.log_level = prio;
	return prev;
}

static void b_log(void *ctx, int prio, const char *msg)
{
	udpd_log(ctx, prio, "control: %s", msg);
}

static const struct tally_actl_ops udpd_actl_ops = {
	.ncores = b_ncores, .exec = b_exec, .exec_all = b_exec_all, .collect = b_collect,
	.stats_reset = b_stats_reset, .drain = b_drain, .shutdown = b_shutdown,
	.quitting = b_quitting, .uptime = b_uptime, .status = b_status, .ports = b_ports,
	.set_log_level = b_set_log_level, .log = b_log,
};

void udpd_ctl_collect(struct udpd *d, struct tally_actl_counters *total)
{
	tally_actl_collect(&udpd_actl_ops, d, total, NULL);
}

int udpd_ctl_start(struct udpd *d)
{
	struct tally_actl_cfg cfg = { .socket_path = d->conf.ctl_path, .ops = &udpd_actl_ops,
				      .ctx = d,
				      .idle_timeout_ms = d->conf.guard.ctl_idle_timeout_ms };
	int err = 0;

	d->ctl = tally_actl_start(&cfg, &err);
	return d->ctl ? 0 : err;
}
