/* SPDX-License-Identifier: Apache-2.0
 * udpd_verbs.c — tally-udpd's RDMA verbs listener beside its UDP sockets (rdma-listen =
 * ADDR:PORT; the rdma-* settings are parsed in appliance/ctl/actl_verbs.c): the transport
 * under the engines (a multiplexer that
 * sends each packet the way its rank joined: a verbs peer's address carries the verbs
 * cookie, so one job may mix UDP and verbs workers), and the engine thread's poll of both.
 * Chosen for tally-udpd first: it needs no DPDK port, so a Soft-RoCE guest runs it as is.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "udpd.h"

#define VERBS_WAIT_NS 200000ull /* with verbs peers, UDP waits at most this for a wake-up */

#ifdef TALLY_HAVE_VERBS
#include "tally_verbs.h"

static void on_rx(void *arg, const void *buf, size_t len, const struct tally_addr *from)
{
	struct udpd *d = arg;

	if (from->core < d->ncores)
		tally_engine_rx(d->eng[from->core], buf, len, from);
}

/* The listener's key lookup (tally_verbs.h auth_lookup): the job's key on the engine of
 * the core the connection is for, on the engine thread (it polls the listener). */
static struct tally_auth *auth_lookup(void *arg, uint32_t core, uint32_t job_id)
{
	struct udpd *d = arg;

	return core < d->ncores ? tally_engine_job_auth(d->eng[core], job_id) : NULL;
}

static int mux_send(void *ctx, const struct tally_addr *to, const uint8_t *hdr,
		    const void *payload, size_t len)
{
	struct udpd *d = ctx;

	if (tally_verbs_is_addr(to))
		return tally_verbs_ops()->send(d->verbs, to, hdr, payload, len);
	return tally_udp_ops()->send(d->udp, to, hdr, payload, len);
}

static uint64_t mux_now(void *ctx)
{
	struct timespec ts;

	(void)ctx;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const struct tally_xport_ops mux_ops = { .send = mux_send, .now_ns = mux_now };

int udpd_verbs_create(struct udpd *d, char *err, size_t el)
{
	struct tally_verbs_cfg vc = { .listen = 1, .ncores = d->conf.ncores,
				      .slots = d->conf.rdma.slots,
				      .gid_index = d->conf.rdma.gid_index,
				      .max_conns = d->conf.rdma.max_conns };
	char host[64];
	uint16_t port = TALLY_DEFAULT_PORT;
	int rc = 0;

	if (!d->conf.rdma.listen[0])
		return 0;
	if (tally_verbs_parse_addr(d->conf.rdma.listen, host, sizeof(host), &port)) {
		snprintf(err, el, "rdma-listen '%s': want ADDR:PORT", d->conf.rdma.listen);
		return -EINVAL;
	}
	vc.host = host;
	vc.port = port;
	if (!d->conf.rdma.auth_packet) {
		vc.auth_lookup = auth_lookup;
		vc.auth_arg = d;
	}
	d->verbs = tally_verbs_create(&vc, on_rx, d, &rc, err, el);
	if (!d->verbs)
		return rc ? rc : -EINVAL;
	fprintf(stderr, "tally-udpd: rdma_cm listening on %s:%u\n", host, port);
	return 0;
}

void udpd_verbs_destroy(struct udpd *d)
{
	const struct tally_verbs_stats *s;

	if (!d->verbs)
		return;
	s = tally_verbs_stats(d->verbs);
	/* the verbs counter list the control plane shows, as "name value" pairs */
	fprintf(stderr, "tally-udpd: verbs totals:");
#define PR(f, help) fprintf(stderr, " %s %llu", #f, (unsigned long long)s->f);
	TALLY_ACTL_VERBS_STATS(PR)
#undef PR
	fputc('\n', stderr);
	tally_verbs_destroy(d->verbs);
	d->verbs = NULL;
}

void udpd_verbs_collect(struct udpd *d, struct tally_actl_counters *out)
{
	const struct tally_verbs_stats *s;

	if (!d->verbs)
		return;
	s = tally_verbs_stats(d->verbs);
#define CP(f, help) out->verbs.f = s->f;
	TALLY_ACTL_VERBS_STATS(CP)
#undef CP
}

void udpd_verbs_status(struct udpd *d, json_t *out)
{
	json_t *o;

	if (!d->conf.rdma.listen[0] || !(o = tally_actl_verbs_json(&d->conf.rdma)))
		return;
	json_object_set_new(o, "connections",
			    json_integer(d->verbs ? (json_int_t)tally_verbs_conns(d->verbs) : 0));
	json_object_set_new(out, "rdma", o);
}

const struct tally_xport_ops *udpd_xport(struct udpd *d, void **ctx)
{
	*ctx = d->verbs ? (void *)d : (void *)d->udp;
	return d->verbs ? &mux_ops : tally_udp_ops();
}

void udpd_net_poll(struct udpd *d, uint64_t timeout_ns)
{
	int n = 0, b;

	if (!d->verbs) {
		tally_udp_ops()->poll(d->udp, timeout_ns);
		return;
	}
	/* Both transports without a shared wait. While verbs completions keep coming, the UDP
	 * sockets are read every 4th turn (a recvmmsg syscall each time costs more than a CQ
	 * poll); when both are quiet, block on the one carrying traffic, briefly while verbs
	 * peers are connected, so UDP packets wait at most VERBS_WAIT_NS. */
	for (int i = 0; i < 4 && (b = tally_verbs_ops()->poll(d->verbs, 0)) > 0; i++)
		n += b;
	if (!n || !(++d->net_turn & 3))
		n += tally_udp_ops()->poll(d->udp, 0);
	if (n || !timeout_ns)
		return;
	if (tally_verbs_conns(d->verbs))
		tally_verbs_ops()->poll(d->verbs, timeout_ns < VERBS_WAIT_NS ? timeout_ns : VERBS_WAIT_NS);
	else
		tally_udp_ops()->poll(d->udp, timeout_ns);
}
#else
int udpd_verbs_create(struct udpd *d, char *err, size_t el)
{
	if (!d->conf.rdma.listen[0])
		return 0;
	snprintf(err, el, "rdma-listen: this tally-udpd was built without verbs (libibverbs-dev "
		 "and librdmacm-dev, meson option verbs)");
	return -ENOTSUP;
}

void udpd_verbs_destroy(struct udpd *d)
{
	(void)d;
}

void udpd_verbs_collect(struct udpd *d, struct tally_actl_counters *out)
{
	(void)d;
	(void)out;
}

void udpd_verbs_status(struct udpd *d, json_t *out)
{
	(void)d;
	(void)out;
}

const struct tally_xport_ops *udpd_xport(struct udpd *d, void **ctx)
{
	*ctx = d->udp;
	return tally_udp_ops();
}

void udpd_net_poll(struct udpd *d, uint64_t timeout_ns)
{
	tally_udp_ops()->poll(d->udp, timeout_ns);
}
#endif
