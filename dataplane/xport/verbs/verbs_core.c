/* SPDX-License-Identifier: Apache-2.0
 * verbs_core.c — per-core listening (tallyd, see tally_verbs.h): the listener moves each
 * connect request to the event channel of the core it names and hands it off; the core
 * accepts it on its own thread and handles that connection's events there. No instance is
 * ever touched by two threads: the listener only reads a core instance's event channel
 * pointer (set at create, never changed).
 */
#include "verbs_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* What a request carries to its core, as the data of a struct tally_xport_req. */
struct verbs_creq {
	struct rdma_cm_id *id;  /* already on the core's event channel */
	uint32_t len;           /* bytes of private data */
	uint8_t pd[56];         /* the request's private data (RC's limit) */
};
_Static_assert(sizeof(struct verbs_creq) <= TALLY_XPORT_REQ_BYTES,
	       "a verbs request fits the registry's request");

static void refuse(struct rdma_cm_id *id, uint32_t why)
{
	struct verbs_wire w = { .magic = htonl(VERBS_MAGIC), .reason = htonl(why) };

	rdma_reject(id, &w, sizeof(w));
	rdma_destroy_id(id);
}

/* TALLY_VERBS_FAULT migrate-fail / handoff-full (verbs_xport.c): the first such step fails. */
static int fault_once(int *armed, int err)
{
	if (!*armed)
		return 0;
	*armed = 0;
	errno = err;
	return 1;
}

/* The listener's CONNECT_REQUEST (its thread, from verbs_cm_events: already acked, so the
 * id may migrate). The core checks the rest of the request when it accepts. */
static void handoff(struct tally_verbs *l, struct rdma_cm_id *id, const void *pd, size_t len)
{
	struct tally_xport_req x = { 0 };
	struct verbs_creq r = { .id = id };
	struct tally_verbs *core = NULL;
	struct verbs_wire w;
	uint32_t why = VR_BAD_REQUEST;

	if (verbs_auth_is_req(pd, len)) { /* signed (verbs_auth.h): the core checks its tag */
		struct verbs_req ar;

		if (verbs_auth_req_decode(pd, len, &ar))
			goto refused;
		x.core = ar.core;
	} else {
		if (!pd || len < sizeof(w))
			goto refused;
		memcpy(&w, pd, sizeof(w));
		x.core = ntohl(w.core);
	}
	why = VR_BAD_CORE;
	if (x.core >= l->cfg.ncores || !l->cores || !(core = l->cores[x.core]))
		goto refused;
	r.len = (uint32_t)(len < sizeof(r.pd) ? len : sizeof(r.pd));
	memcpy(r.pd, pd, r.len);
	x.len = sizeof(r);
	memcpy(x.data, &r, sizeof(r));
	why = VR_FULL;
	/* Move first: the core may accept as soon as it sees the request, and its events
	 * (ESTABLISHED, DISCONNECTED) must then reach the core's channel, not ours. */
	if (fault_once(&l->fault_migrate_fail, EIO) || rdma_migrate_id(id, core->ch)) {
		verbs_err(l, "verbs: rdma_migrate_id to core %u: %s", x.core, strerror(errno));
		goto refused;
	}
	if (!l->handoff || fault_once(&l->fault_handoff_full, ENOBUFS) ||
	    l->handoff(l->handoff_arg, &x))
		goto refused;
	return;
refused:
	l->st.conns_rejected++;
	refuse(id, why);
}

void tally_verbs_set_handoff(struct tally_verbs *l, tally_xport_handoff_fn fn, void *arg)
{
	l->handoff = fn;
	l->handoff_arg = arg;
	l->on_request = handoff;
}

int tally_verbs_attach(struct tally_verbs *l, unsigned core, struct tally_verbs *v)
{
	if (core >= l->cfg.ncores || v->cfg.per_core != TALLY_VERBS_CORE) {
		verbs_err(v, "verbs: core %u: not a core instance of a listener with %u cores", core,
			  l->cfg.ncores);
		return -EINVAL;
	}
	if (!l->cores && !(l->cores = calloc(l->cfg.ncores, sizeof(*l->cores))))
		return -ENOMEM;
	/* PD and CQ now, on the listener's device: a memlock or CQ error shows at start */
	if (l->listen_id && l->listen_id->verbs) {
		int rc = verbs_conn_device(v, l->listen_id);

		if (rc)
			return rc;
	}
	l->cores[core] = v;
	return 0;
}

int tally_verbs_listen_poll(struct tally_verbs *l)
{
	return verbs_cm_events(l);
}

void tally_verbs_accept(struct tally_verbs *v, const struct tally_xport_req *req)
{
	struct verbs_creq r;

	memcpy(&r, req->data, sizeof(r));
	verbs_cm_accept(v, r.id, r.len ? r.pd : NULL, r.len);
}

void tally_verbs_refuse(const struct tally_xport_req *req)
{
	struct verbs_creq r;

	memcpy(&r, req->data, sizeof(r));
	refuse(r.id, VR_FULL);
}

int tally_verbs_cm_poll(struct tally_verbs *v)
{
	return verbs_cm_events(v);
}
