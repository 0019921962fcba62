/* SPDX-License-Identifier: Apache-2.0
 * verbs_xport.c — the verbs transport's setup: configuration, device check, listen or first
 * connect, create/destroy, the ops table, stats, address parsing. See tally_verbs.h.
 */
#include "verbs_int.h"
#include "verbs_place.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void tally_verbs_cfg_defaults(struct tally_verbs_cfg *cfg)
{
	if (!cfg->port)
		cfg->port = TALLY_DEFAULT_PORT;
	if (!cfg->listen && !cfg->ncores)
		cfg->ncores = TALLY_VERBS_MAX_CORES;
	if (!cfg->slots)
		cfg->slots = 128;
	if (!cfg->timeout_ms)
		cfg->timeout_ms = 2000;
	if (!cfg->max_conns)
		cfg->max_conns = 256;
}

static const struct tally_xport_ops verbs_ops = {
	.send = verbs_send,
	.now_ns = verbs_now_ns,
	.poll = verbs_poll,
	.advertise = verbs_advertise,
};

const struct tally_xport_ops *tally_verbs_ops(void)
{
	return &verbs_ops;
}

int tally_verbs_is_addr(const struct tally_addr *a)
{
	return (a->cookie & 0xffff000000000000ull) == TALLY_VERBS_COOKIE_TAG;
}

int tally_verbs_parse_addr(const char *s, char *host, size_t hostlen, uint16_t *port)
{
	const char *colon;
	size_t n;

	if (!s)
		return -EINVAL;
	if (!strncmp(s, "rdma://", 7))
		s += 7;
	colon = strrchr(s, ':');
	n = colon ? (size_t)(colon - s) : strlen(s);
	if (!n || n >= hostlen)
		return -EINVAL;
	if (colon) {
		char *end;
		unsigned long p = strtoul(colon + 1, &end, 10);

		if (*end || !colon[1] || !p || p > 65535)
			return -EINVAL;
		*port = (uint16_t)p;
	}
	memcpy(host, s, n);
	host[n] = 0;
	return 0;
}

/* No device at all is the commonest mistake: say so before rdma_cm's vaguer errors. */
static int check_devices(struct tally_verbs *v)
{
	int n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);

	if (l)
		ibv_free_device_list(l);
	if (l && n > 0)
		return 0;
	verbs_err(v, "verbs: no RDMA device (ibv_get_device_list: %s): load the NIC's driver, or "
		  "for Soft-RoCE `modprobe rdma_rxe` and `rdma link add rxe0 type rxe netdev IF`; "
		  "or use the UDP transport (TALLY_TRANSPORT=udp, no rdma-listen)",
		  l ? "empty list" : strerror(errno));
	return -ENODEV;
}

/* The busy-poll budget: cfg (a program applies TALLY_VERBS_BUSY_POLL_US there at its edge,
 * tally_verbs_setting) over the default (as the UDP transport). */
static int busy_cfg(struct tally_verbs *v)
{
	long us = v->cfg.busy_poll_us;

	if (!us) {
		cpu_set_t set;
		int ncpu = sched_getaffinity(0, sizeof(set), &set) ? 1 : CPU_COUNT(&set);

		us = ncpu >= 4 ? 50 : 0;
	}
	if (us > 10000) {
		verbs_err(v, "verbs: busy poll %ld us out of range (max 10000)", us);
		return -EINVAL;
	}
	v->busy_ns = us > 0 ? (uint64_t)us * 1000u : 0;
	return 0;
}

/* Fault injection for the guest tests (tests/xport_fault: TALLY_VERBS_FAULT in test builds
 * only; production programs never set cfg.fault): lose-disconnect ignores rdma_cm
 * DISCONNECTED (a killed peer's one DREQ lost: the stall probe, verbs_io.c, must find the QP
 * dead); lose-established ignores ESTABLISHED on the listener (the connect's last message
 * lost: the first packet must bring it up); replay-connect makes a client resend its first
 * signed connect request for every later connect (a recorded request replayed: refused as a
 * replay), skew-connect dates its requests 1000 s back (a clock out of the appliance's
 * window: refused as stale); migrate-fail and handoff-full (a per-core listener, tallyd)
 * fail the first connect request's move to its core's channel, or find that core's hand-off
 * ring full: the request is refused and counted, the worker told, and its retry must get
 * through; bad-advert makes a client's result-buffer advertisements wrap the address space
 * (the appliance must refuse them), short-advert halves their length (the chunks past it
 * must be copied). */
static void fault_cfg(struct tally_verbs *v)
{
	const struct tally_xport_fault *f = v->cfg.fault;

	if (!f)
		return;
	v->lose_disconnects = f->lose_disconnect;
	v->lose_established = f->lose_established;
	v->replay_connect = f->replay_connect;
	v->skew_connect = f->skew_connect;
	v->fault_migrate_fail = f->migrate_fail;
	v->fault_handoff_full = f->handoff_full;
	v->bad_advert = f->bad_advert;
	v->short_advert = f->short_advert;
	v->cfg.fault = NULL;
}

static int setting_long(const char *value, long max, long *out)
{
	char *end;

	errno = 0;
	*out = strtol(value, &end, 10);
	return errno || *end || !*value || *out < 0 || *out > max ? -EINVAL : 0;
}

int tally_verbs_setting(struct tally_verbs_cfg *cfg, const char *name, const char *value,
			char *err, size_t errlen)
{
	long n;

	if (!strcmp(name, "TALLY_VERBS_BUSY_POLL_US")) {
		if (setting_long(value, 10000, &n)) {
			snprintf(err, errlen, "verbs: TALLY_VERBS_BUSY_POLL_US='%s': want 0..10000 "
				 "microseconds (0 = off)", value);
			return -EINVAL;
		}
		cfg->busy_poll_us = n ? (int)n : -1;
	} else if (!strcmp(name, "TALLY_VERBS_MR_CACHE")) {
		if (setting_long(value, VERBS_MRC_MAX, &n)) {
			snprintf(err, errlen, "verbs: TALLY_VERBS_MR_CACHE='%s': want 0..%u result "
				 "buffers kept registered (0 = no placement)", value, VERBS_MRC_MAX);
			return -EINVAL;
		}
		cfg->mr_cache = n ? (int32_t)n : -1;
	} else if (!strcmp(name, "TALLY_VERBS_AUTH")) {
		if (strcmp(value, "setup") && strcmp(value, "packet")) {
			snprintf(err, errlen, "verbs: TALLY_VERBS_AUTH='%s': want setup (authenticate "
				 "each connection once, the default) or packet (a MAC on every "
				 "packet)", value);
			return -EINVAL;
		}
		cfg->auth_packet = !strcmp(value, "packet");
	} else {
		snprintf(err, errlen, "verbs: no setting %s", name);
		return -EINVAL;
	}
	return 0;
}

/* Client: connect core 0 now, so that a wrong address, device, GID or key shows at start.
 * A refusal for want of a free connection (the core's hand-off ring, rdma-max-conns) may
 * pass: that one alone is retried at the reconnect interval for up to 3 connect timeouts. */
static int first_connect(struct tally_verbs *v)
{
	const struct timespec pause = { .tv_nsec = VERBS_RECONNECT_NS };
	uint64_t end = verbs_now_ns(v) + 3000000ull * v->cfg.timeout_ms;
	int rc;

	while ((rc = verbs_cm_connect(v, 0)) == -ECONNREFUSED && v->last_reject == VR_FULL &&
	       verbs_now_ns(v) < end) {
		v->last_reject = 0;
		v->st.reconnects++;
		nanosleep(&pause, NULL);
	}
	return rc;
}

static int validate(struct tally_verbs *v)
{
	const struct tally_verbs_cfg *c = &v->cfg;

	if (!c->ncores || c->ncores > TALLY_VERBS_MAX_CORES) {
		verbs_err(v, "verbs: ncores %u out of range 1..%d", c->ncores, TALLY_VERBS_MAX_CORES);
		return -EINVAL;
	}
	if (c->slots < 4 || c->slots > TALLY_VERBS_MAX_SLOTS || (c->slots & (c->slots - 1))) {
		verbs_err(v, "verbs: slots %u: want a power of two in 4..%d", c->slots,
			  TALLY_VERBS_MAX_SLOTS);
		return -EINVAL;
	}
	if (c->max_conns > TALLY_VERBS_MAX_CONNS) {
		verbs_err(v, "verbs: rdma-max-conns %u out of range 1..%d", c->max_conns,
			  TALLY_VERBS_MAX_CONNS);
		return -EINVAL;
	}
	if (c->per_core < 0 || c->per_core > TALLY_VERBS_CORE || (c->per_core && !c->listen)) {
		verbs_err(v, "verbs: per_core %d: want 0, TALLY_VERBS_LISTENER or TALLY_VERBS_CORE "
			  "(listen only)", c->per_core);
		return -EINVAL;
	}
	if (!c->host || !*c->host) {
		verbs_err(v, "verbs: no address: %s", c->listen ? "set rdma-listen = ADDR:PORT" :
			  "set the appliance address (rdma://ADDR:PORT)");
		return -EINVAL;
	}
	return 0;
}

struct tally_verbs *tally_verbs_create(const struct tally_verbs_cfg *cfg, tally_verbs_rx_fn rx,
				       void *rx_arg, int *err, char *errbuf, size_t errlen)
{
	struct tally_verbs *v = calloc(1, sizeof(*v));
	int rc = -ENOMEM;

	if (!v) {
		snprintf(errbuf, errlen, "verbs: out of memory");
		goto fail;
	}
	v->cfg = *cfg;
	tally_verbs_cfg_defaults(&v->cfg);
	if (cfg->host) {
		snprintf(v->host, sizeof(v->host), "%s", cfg->host);
		v->cfg.host = v->host;
	}
	v->rx = rx;
	v->rx_arg = rx_arg;
	fault_cfg(v);
	if ((rc = validate(v)) || (rc = busy_cfg(v)) ||
	    (rc = check_devices(v)) || (rc = verbs_cm_open(v)))
		goto fail_msg;
	v->nconns = v->cfg.listen ? v->cfg.max_conns : v->cfg.ncores;
	v->conns = calloc(v->nconns, sizeof(*v->conns));
	v->dirty = calloc(v->nconns, sizeof(*v->dirty));
	rc = -ENOMEM;
	if (!v->conns || !v->dirty)
		goto fail_msg;
	for (uint32_t i = 0; i < v->nconns; i++)
		v->conns[i].idx = i;
	if ((rc = verbs_pio_init(v)))
		goto fail_msg;
	/* a core's instance binds nothing: its listener hands it requests */
	rc = !v->cfg.listen ? first_connect(v) :
	     v->cfg.per_core == TALLY_VERBS_CORE ? 0 : verbs_cm_listen(v);
	if (rc)
		goto fail_msg;
	return v;
fail_msg:
	snprintf(errbuf, errlen, "%s", v->err[0] ? v->err : strerror(-rc));
fail:
	if (err)
		*err = rc;
	tally_verbs_destroy(v);
	return NULL;
}

void tally_verbs_set_rx(struct tally_verbs *v, tally_verbs_rx_fn rx, void *rx_arg)
{
	v->rx = rx;
	v->rx_arg = rx_arg;
}

void tally_verbs_set_rx_placed(struct tally_verbs *v, tally_verbs_rx_placed_fn fn)
{
	v->rx_placed = fn;
}

void tally_verbs_destroy(struct tally_verbs *v)
{
	if (!v)
		return;
	for (uint32_t i = 0; v->conns && i < v->nconns; i++)
		if (v->conns[i].id || v->conns[i].mem)
			verbs_cm_close(v, &v->conns[i]);
	if (v->listen_id)
		rdma_destroy_id(v->listen_id);
	verbs_pio_fini(v); /* registrations go before their PD */
	if (v->cq) {
		if (v->cq_unacked)
			ibv_ack_cq_events(v->cq, v->cq_unacked);
		ibv_destroy_cq(v->cq);
	}
	if (v->cc)
		ibv_destroy_comp_channel(v->cc);
	if (v->pd)
		ibv_dealloc_pd(v->pd);
	if (v->ch)
		rdma_destroy_event_channel(v->ch);
	verbs_cm_auth_free(v);
	free(v->conns);
	free(v->dirty);
	free(v->cores);
	free(v);
}

unsigned tally_verbs_conns(const struct tally_verbs *v)
{
	return v->live;
}

const struct tally_verbs_stats *tally_verbs_stats(const struct tally_verbs *v)
{
	return &v->st;
}

const char *tally_verbs_strerror(const struct tally_verbs *v)
{
	return v->err;
}
