/* SPDX-License-Identifier: Apache-2.0
 * verbs_reg.c — the RDMA verbs transport registered as "verbs" (alias "rdma";
 * tally_xport_reg.h): options (the host may be ADDR, ADDR:PORT or rdma://ADDR:PORT), its
 * environment settings, receive wiring in the registry's one form, per-core listening
 * (tallyd), counters (a worker's, and the listener's that the control plane shows).
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

static int verbs_events(void *ctx)
{
	return tally_verbs_cm_poll(ctx);
}

/* Only what a program shows or divides (tallyd: each core's share of max_conns). */
static void verbs_defaults(struct tally_xport_opts *o)
{
	struct tally_verbs_cfg c = { .max_conns = o->max_conns, .slots = o->slots };

	tally_verbs_cfg_defaults(&c);
	o->max_conns = c.max_conns;
	o->slots = c.slots;
}

static void verbs_set_handoff(void *l, tally_xport_handoff_fn fn, void *arg)
{
	tally_verbs_set_handoff(l, fn, arg);
}

static int verbs_attach(void *l, unsigned core, void *c)
{
	return tally_verbs_attach(l, core, c);
}

static int verbs_listen_poll(void *l)
{
	return tally_verbs_listen_poll(l);
}

static void verbs_accept(void *c, const struct tally_xport_req *req)
{
	tally_verbs_accept(c, req);
}

static int verbs_poll_burst(void *c)
{
	return tally_verbs_poll_burst(c);
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

/* The listener's counters, per core (each core's instance; the listener's own refusals
 * are added to core 0's): X(field, help), fields of struct tally_verbs_stats. */
#define VERBS_CTL(X) \
	X(tx_pkts, "packets posted (RDMA WRITE_WITH_IMM)") \
	X(tx_bytes, "their bytes") \
	X(tx_credit_msgs, "zero-length credit messages sent") \
	X(tx_no_credit, "dropped: staging full, the peer returned no credit in time") \
	X(tx_not_conn, "dropped: no live connection to that peer") \
	X(tx_errors, "dropped: ibv_post_send failed") \
	X(rx_pkts, "packets landed") \
	X(rx_bytes, "their bytes") \
	X(rx_credit_msgs, "credit messages received") \
	X(rx_bad_len, "dropped: a write shorter than a header or longer than a slot") \
	X(rx_bad_credit, "connections dropped: the peer returned credits it never had") \
	X(conns_up, "connections up") \
	X(conns_down, "connections lost (peer killed, link down, QP error)") \
	X(conns_rejected, "connect requests refused (bad core, full, no memory)") \
	X(wc_errors, "completions with an error status") \
	X(stall_probes, "zero-length writes to a peer where nothing moved") \
	X(stalls_dead, "connections dropped: such a write never completed") \
	X(up_by_packet, "connections brought up by their first packet") \
	X(conns_authed, "connections authenticated at setup (keyed jobs)") \
	X(auth_no_key, "connect requests refused: no such job, or it has no key") \
	X(auth_bad_mac, "connect requests refused: the tag does not verify (wrong key)") \
	X(auth_replay, "connect requests refused: a nonce seen before (replayed)") \
	X(auth_stale, "connect requests refused: clock outside the window") \
	X(auth_off, "connect requests refused: rdma-auth packet (setup auth off)") \
	X(auth_bad_accept, "accepts whose proof of the key did not verify") \
	X(adv_ok, "result-buffer advertisements taken (RESULTs placed by RDMA WRITE)") \
	X(adv_refused, "advertisements refused: malformed, out of range, another rank's") \
	X(results_placed, "RESULTs written straight into the worker's buffer") \
	X(results_copied, "RESULTs sent with their payload in the landing slot") \
	X(place_out_of_range, "of those: advertised, but the chunk fell outside the buffer")

static const struct tally_xport_counter_def verbs_ctl_defs[] = {
#define D(f, help) { #f, help },
	VERBS_CTL(D)
#undef D
};

static void verbs_ctl_counters(const void *ctx, uint64_t *v)
{
	const struct tally_verbs_stats *s = tally_verbs_stats(ctx);
	size_t i = 0;

#define V(f, help) v[i++] = s->f;
	VERBS_CTL(V)
#undef V
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
	.defaults = verbs_defaults,
	.events = verbs_events,
	.counters = verbs_counters,
	.strerror = verbs_strerror,
	.set_handoff = verbs_set_handoff,
	.attach = verbs_attach,
	.listen_poll = verbs_listen_poll,
	.accept = verbs_accept,
	.refuse = tally_verbs_refuse,
	.poll_burst = verbs_poll_burst,
	.ctl_defs = verbs_ctl_defs,
	.nctl = sizeof(verbs_ctl_defs) / sizeof(verbs_ctl_defs[0]),
	.ctl_counters = verbs_ctl_counters,
};
TALLY_XPORT_REGISTER(tally_xport_verbs)
