/* SPDX-License-Identifier: Apache-2.0
 * worker_xport.c — tally-worker's transport: chosen by name in the transport registry
 * (tally_xport_open), its settings filled from the flags and, at this edge, from the
 * environment (TALLY_UDP_BUSY_POLL_US, TALLY_VERBS_*). See worker_xport.h.
 */
#include "worker_xport.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Test builds only (tests/xport_fault, tally-worker-fault): the faults TALLY_VERBS_FAULT
 * asks for. Not linked into tally-worker: production cannot inject faults. */
const struct tally_xport_fault *tally_test_xport_fault(char *err, size_t errlen)
	__attribute__((weak));

int wx_open(const struct wx_opts *o, struct worker_xport *wx, char *err, size_t errlen)
{
	struct tally_xport_opts xo = { .host = o->host, .port = o->base_port,
		.bind_host = o->bind, .gso = o->gso, .gro = o->gro,
		.busy_poll_us = o->busy_poll_us, .eal_args = o->eal_args,
		.local_ip = o->local_ip, .dpdk_port = o->dpdk_port, .prog = "tally-worker",
		.gid_index = o->gid_index, .auth_key = o->auth_key, .auth_job = o->auth_job,
		.auth_rank = o->auth_rank };
	const char *name = o->transport ? o->transport : "udp";
	int rc;

	memset(wx, 0, sizeof(*wx));
	if (!tally_xport_lookup(name, o->setting, err, errlen))
		return -ENOTSUP;
	if ((rc = tally_xport_opts_env(name, &xo, getenv, err, errlen)))
		return rc;
	err[0] = 0;
	if (tally_test_xport_fault && !(xo.fault = tally_test_xport_fault(err, errlen)) && *err)
		return -EINVAL;
	if ((rc = tally_xport_open(name, o->setting, &xo, &wx->x, err, errlen)))
		return rc;
	wx->ops = wx->x.ops;
	wx->ctx = wx->x.ctx;
	wx->setup_authed = tally_xport_setup_authed(&wx->x);
	return 0;
}

void wx_attach(struct worker_xport *wx, struct tally_client *c)
{
	tally_xport_attach_client(&wx->x, c);
}

void wx_flush(struct worker_xport *wx)
{
	if (wx->ctx)
		tally_xport_flush(&wx->x);
}

void wx_json(struct worker_xport *wx)
{
	struct tally_xport_counter ct[64];
	size_t n;

	if (!wx->ctx || !(n = tally_xport_counters(&wx->x, ct, 64)))
		return;
	printf(",\"%s\":{", wx->x.impl->name);
	for (size_t i = 0; i < n; i++)
		if (ct[i].ms)
			printf("%s\"%s\":%.3f", i ? "," : "", ct[i].name, (double)ct[i].value / 1e6);
		else
			printf("%s\"%s\":%" PRIu64, i ? "," : "", ct[i].name, ct[i].value);
	printf("}");
}

/* A counter by name (0 when the transport has none such). */
static uint64_t wx_ctr(const struct tally_xport_counter *ct, size_t n, const char *name, int *has)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(ct[i].name, name)) {
			*has = 1;
			return ct[i].value;
		}
	return 0;
}

void wx_text(struct worker_xport *wx)
{
	struct tally_xport_counter ct[64];
	size_t n = wx->ctx ? tally_xport_counters(&wx->x, ct, 64) : 0;
	const char *nm = wx->ctx ? wx->x.impl->name : "";
	int conn = 0, place = 0;
	uint64_t up = wx_ctr(ct, n, "conns_up", &conn);

	if (!conn) /* connectionless (udp, dpdk): nothing to add */
		return;
	printf("  %s: connections up %" PRIu64 " down %" PRIu64 ", reconnects %" PRIu64
	       ", dropped no-credit %" PRIu64 " not-connected %" PRIu64 ", completion errors %"
	       PRIu64 ", stall probes %" PRIu64 " (peer gone %" PRIu64 "), authenticated at "
	       "setup %" PRIu64 "\n", nm, up, wx_ctr(ct, n, "conns_down", &conn),
	       wx_ctr(ct, n, "reconnects", &conn), wx_ctr(ct, n, "tx_no_credit", &conn),
	       wx_ctr(ct, n, "tx_not_conn", &conn), wx_ctr(ct, n, "wc_errors", &conn),
	       wx_ctr(ct, n, "stall_probes", &conn), wx_ctr(ct, n, "stalls_dead", &conn),
	       wx_ctr(ct, n, "conns_authed", &conn));
	uint64_t placed = wx_ctr(ct, n, "rx_placed", &place);
	if (place)
		printf("  %s: RESULTs placed in our buffer %" PRIu64 ", landed with payload %" PRIu64
		       ", bad placements %" PRIu64 "; advertisements %" PRIu64 ", registrations %"
		       PRIu64 " (evicted %" PRIu64 ", failed %" PRIu64 ")\n", nm, placed,
		       wx_ctr(ct, n, "rx_results_copied", &place), wx_ctr(ct, n, "rx_bad_place", &place),
		       wx_ctr(ct, n, "adv_sent", &place), wx_ctr(ct, n, "mr_regs", &place),
		       wx_ctr(ct, n, "mr_evictions", &place), wx_ctr(ct, n, "mr_fail", &place));
	/* a later core's refused connect (e.g. authentication) is only in the transport */
	if (*tally_xport_strerror(&wx->x))
		printf("  %s: last error: %s\n", nm, tally_xport_strerror(&wx->x));
}

void wx_close(struct worker_xport *wx)
{
	tally_xport_close(&wx->x);
	wx->ctx = NULL;
	wx->ops = NULL;
}
