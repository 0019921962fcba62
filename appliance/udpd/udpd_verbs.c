/* SPDX-License-Identifier: Apache-2.0
 * udpd_verbs.c — tally-udpd's transports, opened by name from the transport registry
 * (tally_xport_reg.h): its UDP sockets and, with rdma-listen = ADDR:PORT (the rdma-*
 * settings are parsed in appliance/ctl/actl_verbs.c), the verbs listener beside them. The
 * engines' transport is the registry's multiplexer over both, which sends each packet the
 * way its rank joined (a verbs peer's address carries the verbs cookie, so one job may mix
 * UDP and verbs workers); the engine thread polls both through it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "udpd.h"

#ifdef TALLY_HAVE_VERBS
#include "tally_verbs.h"
#endif

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
	d->verbs = d->verbsx.ctx;
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
	d->udp = d->udpx.ctx;
	return d->conf.rdma.listen[0] ? open_verbs(d, err, el) : 0;
}

void udpd_xport_close(struct udpd *d)
{
#ifdef TALLY_HAVE_VERBS
	if (d->verbs) {
		const struct tally_verbs_stats *s = tally_verbs_stats(d->verbs);

		/* the verbs counter list the control plane shows, as "name value" pairs */
		fprintf(stderr, "tally-udpd: verbs totals:");
#define PR(f, help) fprintf(stderr, " %s %llu", #f, (unsigned long long)s->f);
		TALLY_ACTL_VERBS_STATS(PR)
#undef PR
		fputc('\n', stderr);
	}
#endif
	tally_xport_close(&d->verbsx);
	d->verbs = NULL;
	tally_xport_close(&d->udpx);
	d->udp = NULL;
}

void udpd_verbs_collect(struct udpd *d, struct tally_actl_counters *out)
{
#ifdef TALLY_HAVE_VERBS
	const struct tally_verbs_stats *s;

	if (!d->verbs)
		return;
	s = tally_verbs_stats(d->verbs);
#define CP(f, help) out->verbs.f = s->f;
	TALLY_ACTL_VERBS_STATS(CP)
#undef CP
#else
	(void)d;
	(void)out;
#endif
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
