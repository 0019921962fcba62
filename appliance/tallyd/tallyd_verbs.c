/* SPDX-License-Identifier: Apache-2.0
 * tallyd_verbs.c — tallyd's RDMA verbs listener (rdma-listen = ADDR:PORT, beside DPDK ports
 * or instead of them). One listener on the main thread binds the address and hands each
 * connect request to the lcore of the core it names (rdma_migrate_id to that lcore's event
 * channel, then an SP/SC ring): no lock anywhere. Each lcore owns one verbs instance (its
 * CQ, its QPs, its registered rings): it polls the CQ every loop (no syscall) and accepts
 * requests and reads its rdma_cm events at the slow cadence. The engine's transport on an
 * lcore sends each packet the way its rank joined (a verbs peer's address carries the verbs
 * cookie, anything else goes out of the DPDK port), so one job may mix both. Every call goes
 * through the transport registry (tally_xport_reg.h: per-core listening, counters): a build
 * without verbs refuses rdma-listen in tallyd_config.c and never comes here.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_log.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "tallyd.h"

#define LOG(lvl, ...) rte_log(RTE_LOG_##lvl, RTE_LOGTYPE_USER1, "tallyd: " __VA_ARGS__)

/* Test builds only (tests/xport_fault, tallyd-fault): TALLY_VERBS_FAULT's faults. Not
 * linked into tallyd: production cannot inject faults. */
const struct tally_xport_fault *tally_test_xport_fault(char *err, size_t errlen)
	__attribute__((weak));

/* A packet landed on one of lc's connections (its CQ poll, its thread). */
static void on_rx(void *arg, const void *buf, size_t len, const struct tally_addr *from)
{
	struct tallyd_lcore *lc = arg;

	lc->st.io.tally_pkts++;
	lc->st.last_tally_tsc = rte_rdtsc();
	if (tally_engine_rx(lc->engine, buf, len, from) != TALLY_OK)
		lc->st.io.engine_rejects++;
}

/* The engine's transport on lc: the registry's multiplexer over the port (the default
 * member: its zero-copy RESULT buffers) and this core's verbs connections (a verbs peer's
 * address carries the verbs cookie; its RESULTs are copied into the staging ring, the
 * engine's arena is not registered memory). Without ports a non-verbs peer gets -ENOTCONN.
 * Set up on the main thread, before any lcore runs. */
const struct tally_xport_ops *tallyd_verbs_xport(struct tallyd_lcore *lc, void **ctx)
{
	const struct tally_xport_mux_member port = { .ops = &tally_dpdk_engine_ops,
						     .ctx = &lc->tx };

	tally_xport_mux_init(&lc->mux);
	if (lc->d->nports || !lc->verbs)
		tally_xport_mux_add(&lc->mux, &port);
	if (lc->verbs)
		tally_xport_mux_add_xport(&lc->mux, &lc->verbsx, 1);
	return tally_xport_mux_ops(&lc->mux, ctx);
}

/* Listener's thread: queue the request for its core (that lcore is the ring's consumer). */
static int handoff(void *arg, const struct tally_xport_req *req)
{
	struct tallyd *d = arg;

	if (req->core >= d->ncores || !d->lcore[req->core]->verbs_req)
		return -ENODEV;
	return rte_ring_sp_enqueue_elem(d->lcore[req->core]->verbs_req, (void *)req,
					sizeof(*req)) ? -ENOBUFS : 0;
}

/* A keyed job's GMAC context for a connect request authenticated at setup: called by the
 * core's instance when it accepts, on that lcore, which owns the engine. */
static struct tally_auth *core_auth_lookup(void *arg, uint32_t core, uint32_t job_id)
{
	struct tallyd_lcore *lc = arg;

	return core == lc->idx && lc->engine ? tally_engine_job_auth(lc->engine, job_id) : NULL;
}

static int core_create(struct tallyd *d, struct tallyd_lcore *lc, struct tally_xport_opts o,
		       char *err, size_t errlen)
{
	const struct tally_xport_rx rx = { .rx = on_rx, .arg = lc };
	char name[RTE_RING_NAMESIZE];
	int rc = 0;

	o.per_core = TALLY_XPORT_CORE;
	if (!d->conf.rdma.auth_packet) { /* rdma-auth packet: signed requests refused */
		o.auth_lookup = core_auth_lookup;
		o.auth_arg = lc;
	}
	/* rdma-max-conns is the appliance's: each core takes its share */
	o.max_conns = (o.max_conns + d->ncores - 1) / d->ncores;
	if ((rc = tally_xport_open("verbs", "rdma-listen", &o, &lc->verbsx, err, errlen)))
		return rc;
	lc->verbs = lc->verbsx.ctx;
	tally_xport_set_rx(&lc->verbsx, &rx);
	if ((rc = tally_xport_attach(&d->verbsx, lc->idx, &lc->verbsx))) {
		snprintf(err, errlen, "core %u: %s", lc->idx, tally_xport_strerror(&lc->verbsx));
		return rc;
	}
	snprintf(name, sizeof(name), "tallyd_vreq%u", lc->idx);
	lc->verbs_req = rte_ring_create_elem(name, sizeof(struct tally_xport_req),
					     TALLYD_VERBS_REQ_RING, lc->socket,
					     RING_F_SP_ENQ | RING_F_SC_DEQ);
	if (!lc->verbs_req) {
		snprintf(err, errlen, "core %u: cannot create its verbs request ring: %s", lc->idx,
			 rte_strerror(rte_errno));
		return -ENOMEM;
	}
	return 0;
}

int tallyd_verbs_create(struct tallyd *d, char *err, size_t errlen)
{
	struct tally_xport_opts o = { .listen = 1, .ncores = (uint16_t)d->ncores,
		.host = d->conf.rdma.listen, .slots = d->conf.rdma.slots,
		.gid_index = d->conf.rdma.gid_index, .max_conns = d->conf.rdma.max_conns,
		.per_core = TALLY_XPORT_LISTENER };
	int rc = 0;

	if (!d->conf.rdma.listen[0])
		return 0;
	tally_xport_opts_defaults("verbs", &o); /* the listener's defaults, for each core's share */
	err[0] = 0;
	if (tally_test_xport_fault && !(o.fault = tally_test_xport_fault(err, errlen)) && *err)
		return -EINVAL;
	if ((rc = tally_xport_opts_env("verbs", &o, getenv, err, errlen)) ||
	    (rc = tally_xport_open("verbs", "rdma-listen", &o, &d->verbsx, err, errlen)))
		return rc;
	d->verbs = d->verbsx.ctx;
	tally_xport_set_handoff(&d->verbsx, handoff, d);
	for (unsigned i = 0; i < d->ncores; i++)
		if ((rc = core_create(d, d->lcore[i], o, err, errlen)))
			return rc;
	LOG(NOTICE, "rdma_cm listening on %s: %u cores, each with its own CQ (%u connections "
	    "each, %u slots)\n", d->conf.rdma.listen, d->ncores,
	    (o.max_conns + d->ncores - 1) / d->ncores, o.slots);
	return 0;
}

void tallyd_verbs_destroy(struct tallyd *d)
{
	struct tally_xport_req r;

	/* the listener first: nothing more is handed off; then what is queued is refused */
	tally_xport_close(&d->verbsx);
	d->verbs = NULL;
	for (unsigned i = 0; i < d->ncores; i++) {
		struct tallyd_lcore *lc = d->lcore[i];

		while (lc->verbs_req && !rte_ring_sc_dequeue_elem(lc->verbs_req, &r, sizeof(r)))
			tally_xport_refuse(&lc->verbsx, &r);
		rte_ring_free(lc->verbs_req);
		lc->verbs_req = NULL;
		tally_xport_close(&lc->verbsx);
		lc->verbs = NULL;
	}
}

int tallyd_verbs_poll(struct tallyd_lcore *lc)
{
	return tally_xport_poll_burst(&lc->verbsx);
}

/* One connection counter of x (0 when it has none such). */
static uint64_t conn_ctr(const struct tally_xport *x, const char *name)
{
	uint64_t v = 0;

	tally_xport_counter_get(x, name, &v);
	return v;
}

/* Log what the transport refused or lost since the last look (control path). */
static void log_news(const struct tally_xport *x, unsigned core, uint64_t *rejected,
		     uint64_t *down)
{
	uint64_t rej = conn_ctr(x, "conns_rejected"), dn = conn_ctr(x, "conns_down");

	if (rej != *rejected || dn != *down)
		LOG(WARNING, "%s %u: %s connections refused %llu, lost %llu: %s\n",
		    core == ~0u ? "listener" : "core", core == ~0u ? 0 : core, x->impl->name,
		    (unsigned long long)rej, (unsigned long long)dn, tally_xport_strerror(x));
	*rejected = rej;
	*down = dn;
}

void tallyd_verbs_slow(struct tallyd_lcore *lc)
{
	uint64_t rejected = conn_ctr(&lc->verbsx, "conns_rejected");
	uint64_t down = conn_ctr(&lc->verbsx, "conns_down");
	struct tally_xport_req r;

	while (!rte_ring_sc_dequeue_elem(lc->verbs_req, &r, sizeof(r)))
		tally_xport_accept(&lc->verbsx, &r);
	tally_xport_events(&lc->verbsx);
	log_news(&lc->verbsx, lc->idx, &rejected, &down);
}

void tallyd_verbs_listen(struct tallyd *d)
{
	uint64_t rejected, down;

	if (!d->verbs)
		return;
	rejected = conn_ctr(&d->verbsx, "conns_rejected");
	down = 0;
	tally_xport_listen_poll(&d->verbsx);
	log_news(&d->verbsx, ~0u, &rejected, &down);
}

/* Each core's instance's counters; the listener's (its refusals: a bad core, no room)
 * count as core 0's. */
void tallyd_verbs_collect(const struct tallyd *d, unsigned core, struct tally_actl_counters *out)
{
	const struct tallyd_lcore *lc = d->lcore[core];

	if (!lc->verbs)
		return;
	tally_xport_ctl_add(&lc->verbsx, out->xport);
	if (core == 0 && d->verbs)
		tally_xport_ctl_add(&d->verbsx, out->xport);
}

void tallyd_verbs_status(const struct tallyd *d, json_t *out, json_t *cores)
{
	unsigned total = 0;
	json_t *o;

	if (!d->conf.rdma.listen[0] || !(o = tally_actl_verbs_json(&d->conf.rdma)))
		return;
	for (unsigned i = 0; i < d->ncores; i++) {
		unsigned n = tally_xport_conns(&d->lcore[i]->verbsx);

		total += n;
		json_object_set_new(json_array_get(cores, i), "verbs_connections",
				    json_integer((json_int_t)n));
	}
	json_object_set_new(o, "connections", json_integer((json_int_t)total));
	json_object_set_new(out, "rdma", o);
}
