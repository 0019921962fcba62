/* SPDX-License-Identifier: Apache-2.0
 * verbs_cm.c — connection management with rdma_cm: the listener (accepts one RC QP per
 * worker and appliance core), the client's connect, and every event (established, refused,
 * disconnected), each failure with a message naming the setting to change; with a job key,
 * the connect request and accept authenticate both ends (verbs_auth.h) before anything is
 * allocated for the connection.
 */
#include "verbs_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CM_BACKLOG 128

static void peer_addr(struct verbs_conn *c)
{
	struct sockaddr *sa = rdma_get_peer_addr(c->id);

	c->addr.core = c->core;
	if (sa && sa->sa_family == AF_INET) {
		c->addr.ip = ((struct sockaddr_in *)sa)->sin_addr.s_addr;
		c->addr.port = ((struct sockaddr_in *)sa)->sin_port;
	}
	c->addr.cookie = TALLY_VERBS_COOKIE_TAG | ((uint64_t)c->gen << 32) | c->idx;
}

/* Optional rdma-gid-index: the index must hold the IPv4-mapped GID of our source address
 * (RoCEv2), else say which index does. */
static int check_gid(struct tally_verbs *v, struct rdma_cm_id *id)
{
	struct sockaddr_in *src = (struct sockaddr_in *)rdma_get_local_addr(id);
	union ibv_gid want = { .raw = { [10] = 0xff, [11] = 0xff } }, g;
	struct ibv_port_attr pa;
	char ip[INET_ADDRSTRLEN] = "?";
	int found = -1;

	if (v->cfg.gid_index < 0 || !src || src->sin_family != AF_INET)
		return 0;
	memcpy(&want.raw[12], &src->sin_addr, 4);
	inet_ntop(AF_INET, &src->sin_addr, ip, sizeof(ip));
	if (ibv_query_port(id->verbs, id->port_num, &pa))
		return -errno;
	for (int i = 0; i < pa.gid_tbl_len && found < 0; i++)
		if (!ibv_query_gid(id->verbs, id->port_num, i, &g) && !memcmp(&g, &want, sizeof(g)))
			found = i;
	if (found == v->cfg.gid_index)
		return 0;
	if (found < 0)
		verbs_err(v, "verbs: rdma-gid-index %d: %s port %u has no GID for %s: set "
			  "rdma-gid-index to -1 (rdma_cm chooses) or use the address of the RDMA "
			  "interface", v->cfg.gid_index, ibv_get_device_name(id->verbs->device),
			  id->port_num, ip);
	else
		verbs_err(v, "verbs: rdma-gid-index %d is wrong for %s on %s port %u: its IPv4 GID "
			  "is at index %d: set rdma-gid-index %d (or -1: rdma_cm chooses)",
			  v->cfg.gid_index, ip, ibv_get_device_name(id->verbs->device), id->port_num,
			  found, found);
	return -EINVAL;
}

static void on_request(struct tally_verbs *v, struct rdma_cm_id *id, const void *pd, size_t len)
{
	struct rdma_conn_param cp = { .rnr_retry_count = 7, .retry_count = 7 };
	struct verbs_wire w = { .magic = htonl(VERBS_MAGIC) }, req;
	uint8_t rep[VERBS_REP_LEN];
	struct verbs_conn *c = NULL;
	struct tally_auth *a = NULL;
	struct verbs_req ar;
	uint32_t why = VR_BAD_REQUEST;

	if (verbs_auth_is_req(pd, len)) {
		if ((why = verbs_cm_auth_request(v, id, pd, len, &ar, &req, &a)) != VR_OK)
			goto reject;
	} else if (!pd || len < sizeof(req)) {
		goto reject;
	} else {
		memcpy(&req, pd, sizeof(req));
	}
	why = VR_BAD_CORE;
	if (ntohl(req.core) >= v->cfg.ncores)
		goto reject;
	why = VR_FULL;
	if (v->live >= v->cfg.max_conns || !(c = verbs_conn_alloc(v)))
		goto reject;
	c->id = id;
	c->core = ntohl(req.core);
	id->context = c;
	why = VR_NO_MEMORY;
	if (verbs_conn_device(v, id) || verbs_conn_setup(v, c, &w))
		goto reject;
	why = VR_BAD_REQUEST;
	if (verbs_conn_peer(v, c, &req, sizeof(req)) || verbs_cm_accept_data(id, pd, a, &w, rep))
		goto reject;
	cp.private_data = rep;
	cp.private_data_len = a ? VERBS_REP_LEN : sizeof(w);
	c->state = VC_CONNECTING;
	peer_addr(c);
	if (a) { /* the QP now carries (job, rank): tally_xport.h conn_authed */
		c->addr.conn_authed = 1;
		c->addr.conn_job = ar.job;
		c->addr.conn_rank = ar.rank;
	}
	if (rdma_accept(id, &cp)) {
		verbs_err(v, "verbs: rdma_accept: %s", strerror(errno));
		v->st.conns_rejected++;
		verbs_conn_release(v, c);
		return;
	}
	v->st.conns_authed += a != NULL;
	return;
reject:
	v->st.conns_rejected++;
	w.reason = htonl(why);
	w.rkey = htonl((uint32_t)time(NULL)); /* our clock: the worker names a skew */
	rdma_reject(id, &w, sizeof(w));
	if (c) {
		c->id = id; /* released with its QP and rings */
		verbs_conn_release(v, c);
	} else {
		rdma_destroy_id(id);
	}
}

/* Client: the steps of a connect as their events arrive. */
static void on_client(struct tally_verbs *v, struct verbs_conn *c, const struct rdma_cm_event *ev,
		      const void *pd, size_t len)
{
	struct rdma_conn_param cp = { .rnr_retry_count = 7, .retry_count = 7 };
	struct verbs_wire w;
	char ip[INET_ADDRSTRLEN];
	int rc;

	inet_ntop(AF_INET, &v->peer.sin_addr, ip, sizeof(ip));
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (check_gid(v, c->id) || rdma_resolve_route(c->id, (int)v->cfg.timeout_ms))
			goto dead;
		return;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		rc = verbs_conn_device(v, c->id);
		if (rc == -EXDEV)
			verbs_err(v, "verbs: %s:%u is reached through another RDMA device than the "
				  "first connection's", ip, ntohs(v->peer.sin_port));
		if (rc || verbs_conn_setup(v, c, &w))
			goto dead;
		cp.private_data = &w;
		cp.private_data_len = sizeof(w);
		if (v->auth) { /* authenticated at setup: the signed request instead */
			if (verbs_cm_auth_req(v, c, &w))
				goto dead;
			cp.private_data = c->auth_req;
			cp.private_data_len = VERBS_REQ_LEN;
		}
		if (rdma_connect(c->id, &cp)) {
			verbs_err(v, "verbs: rdma_connect %s:%u: %s", ip, ntohs(v->peer.sin_port),
				  strerror(errno));
			goto dead;
		}
		return;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (verbs_conn_peer(v, c, pd, len)) {
			verbs_err(v, "verbs: %s:%u accepted with a reply we do not understand "
				  "(not a Tally appliance?)", ip, ntohs(v->peer.sin_port));
			goto dead;
		}
		if (v->auth && verbs_cm_auth_accept(v, c, pd, len, ip))
			goto dead;
		peer_addr(c);
		c->state = VC_UP;
		v->live++;
		v->st.conns_up++;
		return;
	case RDMA_CM_EVENT_ADDR_ERROR:
		verbs_err(v, "verbs: cannot resolve %s to a local RDMA device (rdma_cm address "
			  "error %d): no RDMA device has a route to it: check the appliance address "
			  "(TALLY_APPLIANCE / --host) and `rdma link` (Soft-RoCE: rdma link add rxe0 "
			  "type rxe netdev IF)", ip, ev->status);
		goto dead;
	case RDMA_CM_EVENT_ROUTE_ERROR:
		verbs_err(v, "verbs: no route to %s (rdma_cm route error %d): check the interface "
			  "routes and the GID (rdma-gid-index)", ip, ev->status);
		goto dead;
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		verbs_err(v, "verbs: %s:%u unreachable (rdma_cm %s, status %d): is the appliance "
			  "up with rdma-listen on that address and port?", ip, ntohs(v->peer.sin_port),
			  rdma_event_str(ev->event), ev->status);
		goto dead;
	case RDMA_CM_EVENT_REJECTED: {
		struct verbs_wire r = { 0 };

		if (pd && len >= sizeof(r))
			memcpy(&r, pd, sizeof(r));
		verbs_cm_reject_msg(v, c, &r, ip);
		goto dead;
	}
	default:
		if (c->state == VC_UP)
			verbs_err(v, "verbs: connection to %s:%u core %u lost (%s)", ip,
				  ntohs(v->peer.sin_port), c->core, rdma_event_str(ev->event));
		goto dead;
	}
dead:
	if (c->state == VC_UP)
		v->st.conns_down++;
	verbs_cm_close(v, c);
	c->state = VC_DEAD; /* keeps by_core[]: the next send retries */
}

void verbs_cm_up(struct tally_verbs *v, struct verbs_conn *c)
{
	c->state = VC_UP;
	v->live++;
	v->st.conns_up++;
}

static void on_event(struct tally_verbs *v, const struct rdma_cm_event *ev, const void *pd,
		     size_t len)
{
	struct verbs_conn *c = ev->id ? ev->id->context : NULL;

	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
		(v->on_request ? v->on_request : on_request)(v, ev->id, pd, len);
		return;
	}
	if (!c)
		return;
	if (ev->event == RDMA_CM_EVENT_DISCONNECTED && v->lose_disconnects)
		return; /* fault injection: the QP looks up until the stall probe finds it dead */
	if (!v->cfg.listen) {
		on_client(v, c, ev, pd, len);
		return;
	}
	if (ev->event == RDMA_CM_EVENT_ESTABLISHED && c->state == VC_CONNECTING) {
		if (!v->lose_established)
			verbs_cm_up(v, c);
		return;
	}
	if (ev->event == RDMA_CM_EVENT_DISCONNECTED || ev->event == RDMA_CM_EVENT_CONNECT_ERROR ||
	    ev->event == RDMA_CM_EVENT_UNREACHABLE || ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL) {
		/* A worker killed or its link gone: drop its QP; the engine treats the rank as it
		 * treats a silent UDP worker (named to the others after the dead-rank timeout). */
		if (c->state == VC_UP)
			v->st.conns_down++;
		verbs_cm_close(v, c);
	}
}

int verbs_cm_events(struct tally_verbs *v)
{
	struct rdma_cm_event *e;
	int n = 0;

	while (!rdma_get_cm_event(v->ch, &e)) {
		struct rdma_cm_event ev = *e;
		uint8_t pd[256];
		size_t len = ev.param.conn.private_data_len;

		if (len > sizeof(pd))
			len = sizeof(pd);
		if (ev.param.conn.private_data && len)
			memcpy(pd, ev.param.conn.private_data, len);
		/* Ack first: an id cannot be destroyed while its event is held. */
		rdma_ack_cm_event(e);
		on_event(v, &ev, len ? pd : NULL, len);
		n++;
	}
	return errno == EAGAIN || errno == EWOULDBLOCK ? n : -errno;
}

void verbs_cm_accept(struct tally_verbs *v, struct rdma_cm_id *id, const void *pd, size_t len)
{
	on_request(v, id, pd, len);
}

void verbs_cm_close(struct tally_verbs *v, struct verbs_conn *c)
{
	if (c->id && c->state == VC_UP)
		rdma_disconnect(c->id);
	verbs_conn_release(v, c);
}

static int resolve(const char *host, uint16_t port, struct sockaddr_in *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons(port);
	if (!host || inet_pton(AF_INET, host, &sa->sin_addr) != 1)
		return -EINVAL;
	return 0;
}

int verbs_cm_open(struct tally_verbs *v)
{
	int rc = verbs_cm_auth_open(v);

	if (rc)
		return rc;
	v->ch = rdma_create_event_channel();
	if (!v->ch) {
		verbs_err(v, "verbs: rdma_create_event_channel: %s (is the rdma_ucm module loaded?)",
			  strerror(errno));
		return -errno;
	}
	fcntl(v->ch->fd, F_SETFL, fcntl(v->ch->fd, F_GETFL) | O_NONBLOCK);
	return 0;
}

int verbs_cm_listen(struct tally_verbs *v)
{
	struct sockaddr_in sa;
	int rc;

	if (resolve(v->cfg.host, v->cfg.port, &sa)) {
		verbs_err(v, "verbs: rdma-listen '%s': want the IPv4 address of an RDMA interface",
			  v->cfg.host ? v->cfg.host : "");
		return -EINVAL;
	}
	if (rdma_create_id(v->ch, &v->listen_id, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(v->listen_id, (struct sockaddr *)&sa)) {
		rc = -errno;
		verbs_err(v, "verbs: rdma-listen %s:%u: %s: no RDMA device owns that address (see "
			  "`rdma link`; Soft-RoCE: rdma link add rxe0 type rxe netdev IF) or the port "
			  "is taken: change rdma-listen", v->cfg.host, v->cfg.port, strerror(-rc));
		return rc;
	}
	/* a per-core listener accepts nothing itself: its cores have the PDs and CQs */
	if (v->listen_id->verbs && v->cfg.per_core != TALLY_VERBS_LISTENER &&
	    (rc = verbs_conn_device(v, v->listen_id)))
		return rc;
	if (rdma_listen(v->listen_id, CM_BACKLOG)) {
		rc = -errno;
		verbs_err(v, "verbs: rdma_listen %s:%u: %s", v->cfg.host, v->cfg.port, strerror(-rc));
		return rc;
	}
	return 0;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Client: connect core's QP, waiting for the steps (control path: blocks up to 3 timeouts). */
int verbs_cm_connect(struct tally_verbs *v, uint32_t core)
{
	struct verbs_conn *c = v->by_core[core];
	uint64_t end = mono_ms() + 3ull * v->cfg.timeout_ms;

	if (!c && !(c = verbs_conn_alloc(v)))
		return -ENOSPC;
	if (c->state != VC_FREE)
		verbs_conn_release(v, c);
	v->by_core[core] = c;
	c->core = core;
	if (resolve(v->cfg.host, v->cfg.port, &v->peer)) {
		verbs_err(v, "verbs: appliance address '%s': want an IPv4 address",
			  v->cfg.host ? v->cfg.host : "");
		return -EINVAL;
	}
	c->state = VC_CONNECTING;
	if (rdma_create_id(v->ch, &c->id, c, RDMA_PS_TCP) ||
	    rdma_resolve_addr(c->id, NULL, (struct sockaddr *)&v->peer, (int)v->cfg.timeout_ms)) {
		verbs_err(v, "verbs: rdma_resolve_addr %s: %s: check the appliance address and "
			  "that an RDMA device (`rdma link`) reaches it", v->cfg.host, strerror(errno));
		verbs_cm_close(v, c);
		c->state = VC_DEAD;
		return -EHOSTUNREACH;
	}
	while (c->state == VC_CONNECTING && mono_ms() < end) {
		struct pollfd p = { .fd = v->ch->fd, .events = POLLIN };

		poll(&p, 1, 50);
		verbs_cm_events(v);
	}
	if (c->state == VC_UP)
		return 0;
	if (c->state == VC_CONNECTING) {
		verbs_err(v, "verbs: connect to %s:%u timed out after %u ms", v->cfg.host,
			  v->cfg.port, 3 * v->cfg.timeout_ms);
		verbs_cm_close(v, c);
		c->state = VC_DEAD;
	}
	return -ECONNREFUSED;
}
