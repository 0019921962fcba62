/* SPDX-License-Identifier: Apache-2.0
 * agent_net_client.c — the agent's network in production: per appliance one client session
 * (tally_client.h: chunking, windows, retransmission) over the transport the registry opens
 * by name (tally_xport_reg.h: udp by default, TALLY_TRANSPORT=verbs; agent_cfg.c reads the
 * environment), turned into the agent_net_ops the core drives, with error messages
 * that say which appliance and why. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent_internal.h"
#include "tally_auth.h"
#include "tally_client.h"
#include "tally_xport_reg.h"

struct ncl;

struct ncl_appl {
	struct tally_xport x; /* from the registry by name (TALLY_TRANSPORT, agent_cfg.c) */
	int gone;           /* GONE rides this transport (UDP sessions only, not verbs) */
	struct tally_client *c;
	struct ncl *n;
	uint32_t acked;     /* the gone set this appliance echoed (TALLY_OP_GONE) */
	int gso_mode;       /* TALLY_GSO: 1 / 0 forced, -1 unset (auto: JOIN_OK decides) */
	uint32_t gso_caps;  /* the JOIN_OK caps auto last decided on (~0: none yet) */
	char err[320];
};

struct ncl {
	struct tally_agent_cfg cfg;
	unsigned n;
	uint32_t gone_rx;   /* gone sets the survivors passed on */
	uint32_t declared;  /* ours, re-sent until each survivor echoes it */
	uint64_t declared_ns;
	struct ncl_appl ap[TALLY_AGENT_MAX_APPLIANCES];
};

/* GONE is the agent's (the failover agreement, agent_failover.c), not the session's. */
static void ncl_rx(void *arg, const void *buf, size_t len, const struct tally_addr *from)
{
	struct ncl_appl *ap = arg;
	struct tally_pkt p;

	(void)from;
	if (len >= TALLY_HDR_LEN && ((const uint8_t *)buf)[5] == TALLY_OP_GONE) {
		if (tally_proto_decode(buf, len, &p) == TALLY_OK &&
		    p.hdr.job_id == ap->n->cfg.job_id && p.hdr.token == ap->n->cfg.token) {
			ap->n->gone_rx |= p.hdr.aux;
			ap->acked |= p.hdr.aux;
		}
		return;
	}
	tally_client_rx(ap->c, buf, len);
}

/* RESULTs placed in our buffers by the transport (verbs: the staging buffers). */
static void ncl_rx_placed(void *arg, const void *hdr, size_t hlen, const void *payload,
			  size_t plen)
{
	tally_client_rx_placed(((struct ncl_appl *)arg)->c, hdr, hlen, payload, plen);
}

static uint64_t ncl_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Our gone set to every survivor that has not echoed it yet (core 0 keeps the job). */
static void ncl_gone_send(struct ncl *n)
{
	struct tally_hdr h = {.op = TALLY_OP_GONE, .job_id = n->cfg.job_id,
			      .rank = (uint32_t)n->cfg.rank, .token = n->cfg.token,
			      .aux = n->declared};
	struct tally_addr to;
	uint8_t hb[TALLY_HDR_LEN];

	memset(&to, 0, sizeof(to));
	tally_proto_finish(hb, &h, NULL, 0);
	for (unsigned i = 0; i < n->n; i++) {
		if ((n->declared & (1u << i)) || (n->ap[i].acked & n->declared) == n->declared ||
		    !n->ap[i].gone) /* GONE rides UDP sessions only (not verbs) */
			continue;
		n->ap[i].x.ops->send(n->ap[i].x.ctx, &to, hb, NULL, 0);
		tally_xport_flush(&n->ap[i].x);
	}
	n->declared_ns = ncl_now();
}

static uint32_t ncl_gone(void *ctx)
{
	return ((struct ncl *)ctx)->gone_rx;
}

static void ncl_declare_gone(void *ctx, uint32_t gone)
{
	struct ncl *n = ctx;

	n->declared = gone;
	ncl_gone_send(n);
}

static int ncl_liveness(void *ctx, unsigned i)
{
	struct ncl *n = ctx;

	switch (tally_client_state(n->ap[i].c)) {
	case TALLY_CLIENT_SILENT: return TALLY_AGENT_SILENT;
	case TALLY_CLIENT_DOWN: return TALLY_AGENT_DOWN;
	case TALLY_CLIENT_DRAINING: return TALLY_AGENT_DRAINING;
	default: return TALLY_AGENT_UP;
	}
}

static void ncl_destroy(void *ctx)
{
	struct ncl *n = ctx;

	for (unsigned i = 0; i < n->n; i++) {
		if (n->ap[i].c) {
			tally_client_bye(n->ap[i].c);
			tally_xport_flush(&n->ap[i].x);
			tally_client_destroy(n->ap[i].c);
		}
		tally_xport_close(&n->ap[i].x);
	}
	free(n);
}

static uint32_t ncl_max_chunk(void *ctx, unsigned i)
{
	struct ncl *n = ctx;

	return tally_client_max_chunk_bytes(n->ap[i].c);
}

static int ncl_averages(void *ctx, unsigned i)
{
	struct ncl *n = ctx;

	return (tally_client_caps(n->ap[i].c) & TALLY_CAP_AVERAGE) != 0;
}

/* TALLY_GSO unset: GSO on exactly while the appliance's JOIN_OK offers TALLY_CAP_GSO
 * (tally-udpd: kernel sockets take the segments; tallyd's AF_PACKET port may not). Decided
 * again when the caps change (a re-JOIN to a restarted or replaced appliance; 0 while not
 * joined: off). An integer compare per turn; the switch itself is a field (tally_udp.h). */
static void ncl_gso_decide(struct ncl_appl *ap)
{
	uint32_t caps = tally_client_caps(ap->c);

	if (ap->gso_mode >= 0 || caps == ap->gso_caps)
		return;
	ap->gso_caps = caps;
	tally_xport_set_gso(&ap->x, (caps & TALLY_CAP_GSO) != 0);
}

static int ncl_gso(void *ctx, unsigned i)
{
	struct ncl_appl *ap = &((struct ncl *)ctx)->ap[i];
	int on = tally_xport_gso(&ap->x);
	int want = ap->gso_mode >= 0 ? ap->gso_mode : (ap->gso_caps & TALLY_CAP_GSO) != 0 &&
							  ap->gso_caps != ~0u;

	if (!ap->gone) /* not a UDP session (verbs) */
		return TALLY_AGENT_GSO_NONE;
	if (want && !on)
		return TALLY_AGENT_GSO_REFUSED;
	if (ap->gso_mode >= 0)
		return on ? TALLY_AGENT_GSO_ON_FORCED : TALLY_AGENT_GSO_OFF_FORCED;
	return on ? TALLY_AGENT_GSO_ON_AUTO : TALLY_AGENT_GSO_OFF_AUTO;
}

static int ncl_connect(void *ctx, unsigned i, uint32_t timeout_ms, char *err, size_t errlen)
{
	struct ncl *n = ctx;
	const struct tally_agent_appliance *ap = &n->cfg.appliances[i];
	int rc = tally_client_join(n->ap[i].c, timeout_ms);

	if (rc == 0) {
		ncl_gso_decide(&n->ap[i]);
		return 0;
	}
	if (rc == -ETIMEDOUT)
		agent_errf(err, errlen, "appliance %u (%s:%u) unreachable: no answer to JOIN after %u ms",
			   i, ap->host, ap->port, timeout_ms);
	else if (rc == -ECONNREFUSED) /* the client's text names the address and the fix */
		agent_errf(err, errlen, "appliance %u (%s:%u): %s (TALLY_APPLIANCES)", i, ap->host,
			   ap->port, tally_client_strerror(n->ap[i].c));
	else if (rc == -EPERM)
		agent_errf(err, errlen, "appliance %u (%s:%u) has no job %u: not admitted (admit it: "
			   "tallyctl job-add, or tally-udpd --job; or use an appliance with open "
			   "admission) [%s]", i, ap->host, ap->port, n->cfg.job_id,
			   tally_client_strerror(n->ap[i].c));
	else if (rc == -EACCES)
		agent_errf(err, errlen, "appliance %u (%s:%u) refused job %u: wrong token (TALLY_TOKEN "
			   "differs from the job's admission, or another launch holds this job id) [%s]",
			   i, ap->host, ap->port, n->cfg.job_id, tally_client_strerror(n->ap[i].c));
	else if (rc == -ERANGE)
		agent_errf(err, errlen, "appliance %u (%s:%u) refused rank %d of job %u: the job has "
			   "another world size than %d (WORLD_SIZE changed: use another TALLY_JOB_ID, "
			   "or leave TALLY_JOB_ID unset) [%s]", i, ap->host, ap->port, n->cfg.rank,
			   n->cfg.job_id, n->cfg.world_size, tally_client_strerror(n->ap[i].c));
	else
		agent_errf(err, errlen, "appliance %u (%s:%u): JOIN failed (%s): %s", i, ap->host,
			   ap->port, strerror(-rc), tally_client_strerror(n->ap[i].c));
	return rc;
}

static int ncl_register(void *ctx, unsigned i, uint32_t key, const struct tally_register *reg,
			char *err, size_t errlen)
{
	struct ncl *n = ctx;
	const struct tally_agent_appliance *ap = &n->cfg.appliances[i];
	int rc = tally_client_register(n->ap[i].c, key, reg);

	if (rc)
		agent_errf(err, errlen, "REGISTER key %u (%u elements) at appliance %u (%s:%u) failed "
			   "(%s): %s%s", key, reg->nelems, i, ap->host, ap->port, strerror(-rc),
			   tally_client_strerror(n->ap[i].c),
			   rc == -EEXIST ? " (ranks declared different tensors, or another job "
					   "uses this key)" : "");
	return rc;
}

static int ncl_start(void *ctx, unsigned i, uint32_t key, uint32_t round, const void *in, void *out)
{
	struct ncl *n = ctx;

	return tally_client_start(n->ap[i].c, key, round, in, out);
}

static int ncl_start_noresult(void *ctx, unsigned i, uint32_t key, uint32_t round,
			      const void *in, void *out)
{
	struct ncl *n = ctx;

	return tally_client_start_flags(n->ap[i].c, key, round, in, out, TALLY_CLIENT_NORESULT);
}

static void ncl_more_stats(void *ctx, struct tally_agent_stats *st)
{
	struct ncl *n = ctx;

	st->noresult_ops = st->noresult_acks = st->noresult_skipped_bytes = 0;
	st->noresult_payloads = st->rx_bytes = 0;
	for (unsigned i = 0; i < n->n; i++) {
		const struct tally_client_stats *s = tally_client_stats(n->ap[i].c);

		st->noresult_ops += s->noresult_ops;
		st->noresult_acks += s->noresult_acks;
		st->noresult_skipped_bytes += s->noresult_skipped_bytes;
		st->noresult_payloads += s->noresult_payloads;
		st->rx_bytes += s->rx_bytes;
	}
}

static int ncl_test(void *ctx, unsigned i, int op)
{
	struct ncl *n = ctx;

	return tally_client_test(n->ap[i].c, op);
}

static int ncl_abandon(void *ctx, unsigned i, int op)
{
	struct ncl *n = ctx;

	return tally_client_abandon(n->ap[i].c, op);
}

static int ncl_carry(void *ctx, unsigned from, unsigned to, uint32_t key)
{
	struct ncl *n = ctx;

	return tally_client_carry_last(n->ap[to].c, n->ap[from].c, key);
}

static void ncl_progress(void *ctx, uint64_t timeout_ns)
{
	struct ncl *n = ctx;

	for (unsigned i = 0; i < n->n; i++) {
		uint64_t next = tally_client_tick(n->ap[i].c);
		/* with several appliances no single one may block the others */
		uint64_t wait = n->n == 1 ? (next < timeout_ns ? next : timeout_ns) : 0;

		n->ap[i].x.ops->poll(n->ap[i].x.ctx, wait);
		tally_client_tick(n->ap[i].c);
		ncl_gso_decide(&n->ap[i]);
	}
	/* a survivor that has not echoed our gone set yet hears it again (lost GONE) */
	if (n->declared && ncl_now() - n->declared_ns > 100000000u)
		ncl_gone_send(n);
}

static const char *ncl_strerror(void *ctx, unsigned i)
{
	struct ncl *n = ctx;

	return i < n->n ? tally_client_strerror(n->ap[i].c) : "no such appliance";
}

static void ncl_stats(void *ctx, uint64_t *rtx, uint64_t *excl)
{
	struct ncl *n = ctx;

	*rtx = *excl = 0;
	for (unsigned i = 0; i < n->n; i++) {
		const struct tally_client_stats *s = tally_client_stats(n->ap[i].c);
		*rtx += s->retransmits;
		*excl += s->excluded;
	}
}

static int ncl_excluded(void *ctx, unsigned appl, uint32_t key, uint32_t round, uint32_t chunk)
{
	struct ncl *n = ctx;

	return tally_client_excluded(n->ap[appl].c, key, round, chunk) == 1;
}

static const struct agent_net_ops ncl_ops = {
	.connect = ncl_connect,
	.register_key = ncl_register,
	.start = ncl_start,
	.start_noresult = ncl_start_noresult,
	.more_stats = ncl_more_stats,
	.test = ncl_test,
	.abandon = ncl_abandon,
	.carry = ncl_carry,
	.progress = ncl_progress,
	.strerror = ncl_strerror,
	.stats = ncl_stats,
	.destroy = ncl_destroy,
	.excluded = ncl_excluded,
	.max_chunk = ncl_max_chunk,
	.gone = ncl_gone,
	.declare_gone = ncl_declare_gone,
	.liveness = ncl_liveness,
	.averages = ncl_averages,
	.gso = ncl_gso,
};

/* A one-rank job with no incarnation given: this process is the launch. */
static uint64_t agent_net_random_incarnation(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^
		((uint64_t)getpid() << 40)) | 1;
}

int agent_net_client_create(const struct tally_agent_cfg *cfg, const struct agent_net_ops **ops,
			    void **ctx, char *err, size_t errlen)
{
	struct ncl *n = calloc(1, sizeof(*n));
	int rc = -ENOMEM;

	if (!n) {
		agent_errf(err, errlen, "out of memory");
		return rc;
	}
	n->cfg = *cfg;
	for (unsigned i = 0; i < cfg->nappliances; i++) {
		const struct tally_agent_appliance *ap = &cfg->appliances[i];
		struct tally_xport_opts xo = { .host = ap->host, .port = ap->port, .gid_index = -1 };
		struct tally_client_cfg ccfg = {0};
		const struct tally_xport_rx rx = { .rx = ncl_rx, .placed = ncl_rx_placed,
						   .arg = &n->ap[i] };
		const char *xname = agent_cfg_transport();
		char uerr[256] = "";

		if ((rc = agent_cfg_gso(&xo.gso, err, errlen)))
			goto fail;
		/* TALLY_GSO unset: the JOIN goes without GSO and the appliance's JOIN_OK
		 * decides (ncl_gso_decide): one 64 KB super-datagram through the stack instead
		 * of eight where it takes them (perf/README.md, hvd_allreduce: 6.4 MB
		 * allreduce 406-476 MB/s without, 550-1020 MB/s with) */
		n->ap[i].gso_mode = xo.gso;
		n->ap[i].gso_caps = ~0u;
		if (xo.gso < 0)
			xo.gso = 0;
		/* RESULTs that a kernel appliance sent as one GSO super-datagram (tally-udpd)
		 * or the NIC coalesced arrive in one receive (as tally-worker does) */
		xo.gro = 1;
		if (cfg->auth_key_file[0]) {
			char kerr[320];

			rc = tally_auth_key_load(cfg->auth_key_file, ccfg.auth_key, kerr, sizeof(kerr));
			if (rc < 0) {
				agent_errf(err, errlen, "TALLY_AUTH_KEY_FILE: %s", kerr);
				goto fail;
			}
			ccfg.auth = 1;
		}
		/* verbs: with the key each connection is authenticated at setup as (job, rank)
		 * unless TALLY_VERBS_AUTH=packet; the transport's rings are registered once and
		 * reused for every push (the agent's staging copies into them) */
		xo.auth_key = ccfg.auth ? ccfg.auth_key : NULL;
		xo.auth_job = cfg->job_id;
		xo.auth_rank = (uint32_t)cfg->rank;
		if ((rc = agent_cfg_xport_env(xname, &xo, uerr, sizeof(uerr))) ||
		    (rc = tally_xport_open(xname, "TALLY_TRANSPORT", &xo, &n->ap[i].x, uerr,
					   sizeof(uerr)))) {
			agent_errf(err, errlen, "appliance %u (%s:%u): %s", i, ap->host, ap->port, uerr);
			goto fail;
		}
		n->ap[i].gone = !strcmp(n->ap[i].x.impl->name, "udp");
		n->n = i + 1;
		tally_client_cfg_defaults(&ccfg);
		ccfg.job_id = cfg->job_id;
		ccfg.token = cfg->token;
		ccfg.rank = (uint32_t)cfg->rank;
		ccfg.world_size = (uint32_t)cfg->world_size;
		ccfg.give_up_ms = cfg->op_timeout_ms;
		ccfg.incarnation = cfg->incarnation;
		if (!ccfg.incarnation && cfg->world_size == 1) /* one rank: the launch is us */
			ccfg.incarnation = agent_net_random_incarnation();
		/* several appliances: an operation on a dead one fails at dead_ms (-EHOSTDOWN)
		 * and its key moves (agent_failover.c); one appliance: wait for its restart */
		ccfg.fail_fast = cfg->nappliances >= 2;
		if ((rc = agent_cfg_live_env(&ccfg, ccfg.fail_fast, err, errlen)))
			goto fail;
		snprintf(ccfg.appliance, sizeof(ccfg.appliance), "%s:%u", ap->host, ap->port);
		if (cfg->window)
			ccfg.window = cfg->window;
		if (cfg->max_chunk_bytes)
			ccfg.max_chunk_bytes = cfg->max_chunk_bytes;
		if (cfg->rto_init_us)
			ccfg.rto_init_us = cfg->rto_init_us;
		if (cfg->rto_max_us)
			ccfg.rto_max_us = cfg->rto_max_us;
		if (cfg->rto_min_us)
			ccfg.rto_min_us = cfg->rto_min_us;
		if (tally_xport_setup_authed(&n->ap[i].x)) /* verbs proved the key: no per-packet MAC */
			ccfg.auth = 0;
		n->ap[i].c = tally_client_create(&ccfg, n->ap[i].x.ops, n->ap[i].x.ctx, &rc);
		if (!n->ap[i].c) {
			agent_errf(err, errlen, "appliance %u (%s:%u): client session: %s", i, ap->host,
				   ap->port, strerror(-rc));
			goto fail;
		}
		n->ap[i].n = n;
		tally_xport_set_rx(&n->ap[i].x, &rx);
	}
	*ops = &ncl_ops;
	*ctx = n;
	return 0;
fail:
	ncl_destroy(n);
	return rc ? rc : -EIO;
}
