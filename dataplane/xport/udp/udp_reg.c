/* SPDX-License-Identifier: Apache-2.0
 * udp_reg.c — the kernel UDP transport registered as "udp" (tally_xport_reg.h): options,
 * its environment setting, receive wiring and counters over tally_udp.h.
 */
#include <string.h>

#include "tally_udp.h"
#include "tally_xport_reg.h"

static const char *const udp_settings[] = { "TALLY_UDP_BUSY_POLL_US", NULL };

static int udp_setting(struct tally_xport_opts *o, const char *name, const char *value,
		       char *err, size_t errlen)
{
	(void)name; /* only TALLY_UDP_BUSY_POLL_US */
	return tally_udp_busy_setting(value, &o->busy_poll_us, err, errlen);
}

static void *udp_open(const struct tally_xport_opts *o, int *err, char *errbuf, size_t errlen)
{
	const struct tally_udp_cfg c = { .host = o->host, .base_port = o->port,
		.ncores = o->ncores, .listen = o->listen, .bind_host = o->bind_host,
		.sock_buf = o->sock_buf, .batch = o->batch, .gso = o->gso, .gro = o->gro,
		.busy_poll_us = o->busy_poll_us };

	return tally_udp_create(&c, NULL, NULL, err, errbuf, errlen);
}

static void udp_close(void *ctx)
{
	tally_udp_destroy(ctx);
}

static const struct tally_xport_ops *udp_ops(void *ctx)
{
	(void)ctx;
	return tally_udp_ops();
}

static void udp_set_rx(void *ctx, const struct tally_xport_rx *rx)
{
	tally_udp_set_rx(ctx, rx->rx, rx->arg);
}

static int udp_flush(void *ctx)
{
	return tally_udp_flush(ctx);
}

static int udp_set_gso(void *ctx, int on)
{
	int rc = tally_udp_set_gso(ctx, on);

	return rc ? rc : tally_udp_gso(ctx);
}

static int udp_gso(const void *ctx)
{
	return tally_udp_gso(ctx);
}

#define UDP_COUNTERS(X) X(tx_pkts) X(tx_bytes) X(tx_calls) X(tx_errors) X(tx_gso_sends) X(rx_pkts) \
	X(rx_bytes) X(rx_calls) X(rx_gro_batches) X(rx_truncated) X(refused) X(spins) X(spin_hits)

static size_t udp_counters(const void *ctx, struct tally_xport_counter *out, size_t max)
{
	const struct tally_udp_stats *s = tally_udp_stats(ctx);
	const struct tally_xport_counter all[] = {
#define C(f) { #f, s->f, 0 },
		UDP_COUNTERS(C)
#undef C
		{ "spin_ms", s->spin_ns, 1 }, { "blocks", s->blocks, 0 },
		{ "block_ms", s->block_ns, 1 },
	};
	return tally_xport_counters_copy(out, max, all, sizeof(all) / sizeof(all[0]));
}

/* What the control plane shows beside the I/O block (system calls and GSO/GRO batching,
 * for all sockets: core 0's), as udp_<name>. */
static const struct tally_xport_counter_def udp_ctl_defs[] = {
	{ "tx_calls", "sendmmsg calls" },
	{ "tx_gso_sends", "of their datagrams, sent as one UDP_SEGMENT batch" },
	{ "rx_calls", "recvmmsg calls" },
	{ "rx_gro_batches", "coalesced (UDP_GRO) receives" },
};

static void udp_ctl_counters(const void *ctx, uint64_t *v)
{
	const struct tally_udp_stats *s = tally_udp_stats(ctx);

	v[0] = s->tx_calls;
	v[1] = s->tx_gso_sends;
	v[2] = s->rx_calls;
	v[3] = s->rx_gro_batches;
}

static const char *udp_strerror(const void *ctx)
{
	return tally_udp_strerror(ctx);
}

static const struct tally_xport_impl tally_xport_udp = {
	.name = "udp",
	.settings = udp_settings,
	.setting = udp_setting,
	.open = udp_open,
	.close = udp_close,
	.ops = udp_ops,
	.set_rx = udp_set_rx,
	.flush = udp_flush,
	.set_gso = udp_set_gso,
	.gso = udp_gso,
	.counters = udp_counters,
	.strerror = udp_strerror,
	.ctl_defs = udp_ctl_defs,
	.nctl = sizeof(udp_ctl_defs) / sizeof(udp_ctl_defs[0]),
	.ctl_counters = udp_ctl_counters,
};
TALLY_XPORT_REGISTER(tally_xport_udp)
