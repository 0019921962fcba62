/* SPDX-License-Identifier: Apache-2.0
 * udpd_verbs.c — tally-udpd's transports, opened by name from the transport registry
 * (tally_xport_reg.h): its UDP sockets and, with rdma-listen = ADDR:PORT (the rdma-*
 * settings are parsed in appliance/ctl/actl_verbs.c), the verbs listener beside them. The
 * engines' transport is the registry's multiplexer over both, which sends each packet the
 * way its rank joined (a verbs peer's address carries the verbs cookie, so one job may mix
 * UDP and verbs workers); the engine thread polls both through it.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "udpd.h"

/* Test builds only (tests/xport_fault, tally-udpd-fault): TALLY_VERBS_FAULT's faults. Not
 * linked into tally-udpd: production cannot inject faults. */
const struct tally_xport_fault *tally_test_xport_fault(char *err, size_t errlen)
	__attribute__((weak));

/* A packet from either transport to its core's engine. */
static void on_rx(void *arg, const void *buf, size_t len, const struct tally_addr *from)
{
	struct udpd *d = arg;

	if (from->core < d->ncores)
		tally_engine_rx(d->eng[from->core], buf, len, from);
}

/* The listener's key lookup (auth_lookup): the job's key on the engine of the core the
 * connection is for, on the engine thread (it polls the listener). */
static struct tally_auth *auth_lookup(void *arg, uint32_t core, uint32_t job_id)
{
	struct udpd *d = arg;

	return core < d->ncores ? tally_engine_job_auth(d->eng[core], job_id) : NULL;
}

/* Open transport `name` with o (its environment settings applied here, at the edge) and
 * make it a member of the multiplexer, delivering to the engines. */
static int open_member(struct udpd *d, const char *name, const char *setting,
		       struct tally_xport_opts *o, struct tally_xport *x, int cheap, char *err,
		       size_t el)
{
	const struct tally_xport_rx rx = { .rx = on_rx, .arg = d };
	int rc;

	if (!tally_xport_lookup(name, setting, err, el)) /* the error names the setting */
		return -ENOTSUP;
	if ((rc = tally_xport_opts_env(name, o, getenv, err, el)) ||
	    (rc = tally_xport_open(name, setting, o, x, err, el)))
		return rc;
	tally_xport_set_rx(x, &rx);
	return tally_xport_mux_add_xport(&d->mux, x, cheap);
}

static int open_verbs(struct udpd *d, char *err, size_t el)
{
	struct tally_xport_opts o = { .listen = 1, .host = d->conf.rdma.listen,
		.ncores = d->conf.ncores, .slots = d->conf.rdma.slots,
		.gid_index = d->conf.rdma.gid_index, .max_conns = d->conf.rdma.max_conns };
	int rc;

	if (!d->conf.rdma.auth_packet) {
		o.auth_lookup = auth_lookup;
		o.auth_arg = d;
	}
	err[0] = 0;
	if (tally_test_xport_fault && !(o.fault = tally_test_xport_fault(err, el)) && *err)
		return -EINVAL;
	/* verbs polls its CQ without a syscall: the cheap member */
	if ((rc = open_member(d, "verbs", "rdma-listen", &o, &d->verbsx, 1, err, el)))
		return rc;
	fprintf(stderr, "tally-udpd: rdma_cm listening on %s\n", d->conf.rdma.listen);
	return 0;
}

int udpd_xport_open(struct udpd *d, char *err, size_t el)
{
	struct tally_xport_opts o = { .listen = 1, .ncores = d->conf.ncores,
		.port = d->conf.base_port, .host = d->conf.host[0] ? d->conf.host : NULL,
		/* kernel-segmented RESULTs and coalesced pushes: a system call and a stack
		 * traversal per 7 chunks, not per chunk */
		.gso = d->conf.gso, .gro = d->conf.gro };
	int rc;

	tally_xport_mux_init(&d->mux);
	if ((rc = open_member(d, "udp", NULL, &o, &d->udpx, 0, err, el)))
		return rc;
	return d->conf.rdma.listen[0] ? open_verbs(d, err, el) : 0;
}

/* A transport's control-plane counters as "name value" pairs on stderr (exit). */
static void print_totals(const struct tally_xport *x)
{
	uint64_t v[TALLY_XPORT_CTL_MAX];
	const struct tally_xport_impl *t = x->impl;

	if (!x->ctx || !t->ctl_counters || t->nctl > TALLY_XPORT_CTL_MAX)
		return;
	t->ctl_counters(x->ctx, v);
	fprintf(stderr, "tally-udpd: %s totals:", t->name);
	for (size_t i = 0; i < t->nctl; i++)
		fprintf(stderr, " %s %llu", t->ctl_defs[i].name, (unsigned long long)v[i]);
	fputc('\n', stderr);
}

void udpd_xport_close(struct udpd *d)
{
	print_totals(&d->verbsx);
	tally_xport_close(&d->verbsx);
	tally_xport_close(&d->udpx);
}

/* The I/O block from the sockets' counters, by the registry's generic names. */
static const struct {
	const char *name;
	size_t off;
} io_names[] = {
	{ "rx_pkts", offsetof(struct tally_actl_io_stats, rx_pkts) },
	{ "rx_bytes", offsetof(struct tally_actl_io_stats, rx_bytes) },
	{ "tx_pkts", offsetof(struct tally_actl_io_stats, tx_pkts) },
	{ "tx_bytes", offsetof(struct tally_actl_io_stats, tx_bytes) },
	{ "rx_truncated", offsetof(struct tally_actl_io_stats, rx_truncated) },
	{ "tx_errors", offsetof(struct tally_actl_io_stats, tx_send_errors) },
};

void udpd_xport_collect(struct udpd *d, struct tally_actl_counters *out)
{
	for (size_t i = 0; i < sizeof(io_names) / sizeof(io_names[0]); i++)
		tally_xport_counter_get(&d->udpx, io_names[i].name,
					(uint64_t *)((char *)&out->io + io_names[i].off));
	tally_xport_ctl_add(&d->udpx, out->xport);
	tally_xport_ctl_add(&d->verbsx, out->xport);
}

void udpd_verbs_status(struct udpd *d, json_t *out)
{
	json_t *o;

	if (!d->conf.rdma.listen[0] || !(o = tally_actl_verbs_json(&d->conf.rdma)))
		return;
	json_object_set_new(o, "connections",
			    json_integer((json_int_t)tally_xport_conns(&d->verbsx)));
	json_object_set_new(out, "rdma", o);
}
