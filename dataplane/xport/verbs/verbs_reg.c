/* SPDX-License-Identifier: Apache-2.0
 * verbs_reg.c — the RDMA verbs transport registered as "verbs" (alias "rdma";
 * tally_xport_reg.h): options (the host may be ADDR, ADDR:PORT or rdma://ADDR:PORT), its
 * environment settings, receive wiring in the registry's one form, counters.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tally_verbs.h"
#include "tally_xport_reg.h"

static const char *const verbs_settings[] = { "TALLY_VERBS_BUSY_POLL_US", "TALLY_VERBS_MR_CACHE",
					      "TALLY_VERBS_AUTH", NULL };

/* The settings land in a scratch cfg, then in the options' fields. */
static int verbs_setting(struct tally_xport_opts *o, const char *name, const char *value,
			 char *err, size_t errlen)
{
	struct tally_verbs_cfg c = { .busy_poll_us = o->busy_poll_us, .mr_cache = o->mr_cache,
				     .auth_packet = o->auth_packet };
	int rc = tally_verbs_setting(&c, name, value, err, errlen);

	o->busy_poll_us = c.busy_poll_us;
	o->mr_cache = c.mr_cache;
	o->auth_packet = c.auth_packet;
	return rc;
}


static void *verbs_open(const struct tally_xport_opts *o, int *err, char *errbuf, size_t errlen)
{
	struct tally_verbs_cfg c = { .port = o->port, .listen = o->listen, .ncores = o->ncores,
		.slots = o->slots, .gid_index = o->gid_index, .timeout_ms = o->timeout_ms,
		.max_conns = o->max_conns, .busy_poll_us = o->busy_poll_us,
		.per_core = o->per_core, .auth_key = o->auth_key, .auth_job = o->auth_job,
		.auth_rank = o->auth_rank, .auth_lookup = o->auth_lookup,
		.auth_arg = o->auth_arg, .mr_cache = o->mr_cache,
		.auth_packet = o->auth_packet, .fault = o->fault };
	char host[64];

	if (tally_verbs_parse_addr(o->host, host, sizeof(host), &c.port)) {
		snprintf(errbuf, errlen, "%s '%s': want ADDR, ADDR:PORT or rdma://ADDR:PORT",
			 o->listen ? "rdma-listen" : "--host", o->host ? o->host : "");
		*err = -EINVAL;
		return NULL;
	}
	c.host = host; /* rdma_cm resolves it during create */
	return tally_verbs_create(&c, NULL, NULL, err, errbuf, errlen);
}

static void verbs_close(void *ctx)
{
	tally_verbs_destroy(ctx);
}

static const struct tally_xport_ops *verbs_ops(void *ctx)
{
	(void)ctx;
	return tally_verbs_ops();
}

static void verbs_set_rx(void *ctx, const struct tally_xport_rx *rx)
{
	tally_verbs_set_rx(ctx, rx->rx, rx->arg);
	tally_verbs_set_rx_placed(ctx, rx->placed);
}

static int verbs_setup_authed(const void *ctx)
{
	return tally_verbs_setup_authed(ctx);
}

static unsigned verbs_conns(const void *ctx)
{
	return tally_verbs_conns(ctx);
}

static int verbs_accept(void *ctx)
{
	return tally_verbs_cm_poll(ctx);
}

#define VERBS_COUNTERS(X) X(tx_pkts) X(rx_pkts) X(tx_no_credit) X(tx_not_conn) X(tx_errors) \
	X(tx_credit_msgs) X(rx_credit_msgs) X(rx_bad_len) X(wc_errors) X(conns_up)         \
	X(conns_down) X(reconnects) X(cq_waits) X(spins) X(spin_hits) X(stall_probes)       \
	X(stalls_dead) X(conns_authed) X(auth_bad_accept) X(adv_sent) X(rx_placed)           \
	X(rx_results_copied) X(rx_bad_place) X(mr_regs) X(mr_evictions) X(mr_fail)

static size_t verbs_counters(const void *ctx, struct tally_xport_counter *out, size_t max)
{
	const struct tally_verbs_stats *s = tally_verbs_stats(ctx);
	const struct tally_xport_counter all[] = {
#define C(f) { #f, s->f, 0 },
		VERBS_COUNTERS(C)
#undef C
	};
	return tally_xport_counters_copy(out, max, all, sizeof(all) / sizeof(all[0]));
}

static const char *verbs_strerror(const void *ctx)
{
	return tally_verbs_strerror(ctx);
}

static const struct tally_xport_impl tally_xport_verbs = {
	.name = "verbs",
	.alias = "rdma",
	.settings = verbs_settings,
	.setting = verbs_setting,
	.open = verbs_open,
	.close = verbs_close,
	.ops = verbs_ops,
	.set_rx = verbs_set_rx,
	.setup_authed = verbs_setup_authed,
	.conns = verbs_conns,
	.owns = tally_verbs_is_addr,
	.accept = verbs_accept,
	.counters = verbs_counters,
	.strerror = verbs_strerror,
};
TALLY_XPORT_REGISTER(tally_xport_verbs)
