/* SPDX-License-Identifier: Apache-2.0
 * verbs_conn.c — one verbs connection's resources: the device's PD and completion queue
 * (shared by every connection, polled by the one thread that owns the instance), the RC QP,
 * the landing and staging rings registered once, and posting a message (see tally_verbs.h).
 */
#include "verbs_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <arpa/inet.h>

#define HUGE_2M (2u << 20)

void verbs_err(struct tally_verbs *v, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(v->err, sizeof(v->err), fmt, ap);
	va_end(ap);
}

/* Completions per connection: every slot and extra receive, both ways. */
static uint32_t conn_cqes(const struct tally_verbs *v)
{
	return 2 * (v->cfg.slots + VERBS_EXTRA_RECV);
}

int verbs_conn_device(struct tally_verbs *v, struct rdma_cm_id *id)
{
	struct ibv_device_attr da;
	uint32_t want;
	int cqe;

	if (v->dev)
		return id->verbs == v->dev ? 0 : -EXDEV;
	if (!id->verbs) {
		verbs_err(v, "verbs: rdma_cm gave no device for %s", v->cfg.host);
		return -ENODEV;
	}
	if (ibv_query_device(id->verbs, &da)) {
		verbs_err(v, "verbs: ibv_query_device(%s): %s",
			  ibv_get_device_name(id->verbs->device), strerror(errno));
		return -errno;
	}
	want = conn_cqes(v) * (v->cfg.listen ? v->cfg.max_conns : v->cfg.ncores);
	cqe = want < (uint32_t)da.max_cqe ? (int)want : da.max_cqe;
	v->pd = ibv_alloc_pd(id->verbs);
	v->cc = v->pd ? ibv_create_comp_channel(id->verbs) : NULL;
	v->cq = v->cc ? ibv_create_cq(id->verbs, cqe, v, v->cc, 0) : NULL;
	if (!v->cq) {
		int e = errno ? errno : ENOMEM;

		verbs_err(v, "verbs: %s: cannot allocate a protection domain / completion queue "
			  "of %d entries: %s%s", ibv_get_device_name(id->verbs->device), cqe,
			  strerror(e), e == ENOMEM ? " (raise the memlock limit: ulimit -l, "
			  "LimitMEMLOCK= in the systemd unit)" : "");
		return -e;
	}
	/* The CQ bounds the connections: one that would overflow it is refused. */
	if (v->cfg.listen && (uint32_t)cqe / conn_cqes(v) < v->cfg.max_conns)
		v->cfg.max_conns = (uint32_t)cqe / conn_cqes(v);
	v->dev = id->verbs;
	return 0;
}

/* The rings: hugepages when the system has them free (fewer TLB and MTT entries), else
 * ordinary pages; page-aligned either way. */
static int conn_mem(struct verbs_conn *c, size_t len)
{
	size_t hlen = (len + HUGE_2M - 1) & ~(size_t)(HUGE_2M - 1);
	void *p = mmap(NULL, hlen, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_POPULATE, -1, 0);

	if (p != MAP_FAILED) {
		c->mem = p;
		c->mem_len = hlen;
		c->huge = 1;
		return 0;
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -ENOMEM;
	c->mem = p;
	c->mem_len = len;
	c->huge = 0;
	return 0;
}

static void memlock_err(struct tally_verbs *v, size_t len)
{
	struct rlimit rl = { 0, 0 };

	getrlimit(RLIMIT_MEMLOCK, &rl);
	verbs_err(v, "verbs: ibv_reg_mr of %zu KiB failed: ENOMEM: the memlock limit (%llu KiB) "
		  "is too low for the registered rings: raise it (ulimit -l unlimited, or "
		  "LimitMEMLOCK=infinity in the systemd unit) or lower the slots setting", len >> 10,
		  rl.rlim_cur == RLIM_INFINITY ? 0ull : (unsigned long long)(rl.rlim_cur >> 10));
}

int verbs_conn_setup(struct tally_verbs *v, struct verbs_conn *c, struct verbs_wire *w)
{
	uint32_t n = v->cfg.slots;
	struct ibv_qp_init_attr qa = {
		.send_cq = v->cq, .recv_cq = v->cq, .qp_type = IBV_QPT_RC,
		/* a placed RESULT posts two work requests (the payload's WRITE, then the header) */
		.cap = { .max_send_wr = 2 * n + VERBS_EXTRA_RECV, .max_recv_wr = n + VERBS_EXTRA_RECV,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	size_t len = 3 * (size_t)n * VERBS_SLOT_BYTES; /* landing n, staging 2n */
	int rc;

	c->lens = calloc(2 * (size_t)n, sizeof(*c->lens));
	c->ptx = calloc(2 * (size_t)n, sizeof(*c->ptx));
	if (v->cfg.listen && !c->adv)
		c->adv = calloc(VERBS_ADV_TABLE, sizeof(*c->adv));
	if (!c->lens || !c->ptx || (v->cfg.listen && !c->adv) || conn_mem(c, len)) {
		verbs_err(v, "verbs: cannot map %zu KiB of rings: lower the slots setting", len >> 10);
		return -ENOMEM;
	}
	c->mr = ibv_reg_mr(v->pd, c->mem, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!c->mr) {
		rc = errno ? -errno : -ENOMEM;
		if (rc == -ENOMEM || rc == -EPERM)
			memlock_err(v, len);
		else
			verbs_err(v, "verbs: ibv_reg_mr: %s", strerror(-rc));
		return rc;
	}
	if (rdma_create_qp(c->id, v->pd, &qa)) {
		rc = -errno;
		verbs_err(v, "verbs: cannot create an RC queue pair (%u work requests): %s%s", n,
			  strerror(-rc), rc == -ENOMEM ? " (raise the memlock limit or lower slots)" : "");
		return rc;
	}
	c->qp = c->id->qp;
	for (uint32_t i = 0; i < n + VERBS_EXTRA_RECV; i++)
		if ((rc = verbs_conn_post_recv(c))) {
			verbs_err(v, "verbs: ibv_post_recv: %s", strerror(-rc));
			return rc;
		}
	*w = (struct verbs_wire){ .magic = htonl(VERBS_MAGIC), .core = htonl(c->core),
				  .addr = (uint64_t)(uintptr_t)c->mem, .rkey = htonl(c->mr->rkey),
				  .nslots = htonl(n), .slot_bytes = htonl(VERBS_SLOT_BYTES) };
	return 0;
}

int verbs_conn_peer(struct tally_verbs *v, struct verbs_conn *c, const void *pd, size_t len)
{
	struct verbs_wire w;
	uint32_t n;

	if (!pd || len < sizeof(w))
		return -EPROTO;
	memcpy(&w, pd, sizeof(w));
	n = ntohl(w.nslots);
	if (ntohl(w.magic) != VERBS_MAGIC || ntohl(w.slot_bytes) != VERBS_SLOT_BYTES || !n ||
	    n > TALLY_VERBS_MAX_SLOTS)
		return -EPROTO;
	c->raddr = w.addr;
	c->rkey = ntohl(w.rkey);
	if (n & (n - 1))
		return -EPROTO; /* slot = count % n agrees across the 2^32 wrap only for 2^k */
	/* Our send queue holds cfg.slots data posts: never more in flight than that. */
	verbs_ring_init(&c->ring, v->cfg.slots, n < v->cfg.slots ? n : v->cfg.slots,
			2 * v->cfg.slots);
	return 0;
}

int verbs_conn_post_recv(struct verbs_conn *c)
{
	struct ibv_recv_wr wr = { .wr_id = verbs_wr_id(c, 0), .num_sge = 0 }, *bad;

	return -ibv_post_recv(c->qp, &wr, &bad);
}

int verbs_conn_stage(struct tally_verbs *v, struct verbs_conn *c, const uint8_t *hdr,
		     const void *payload, size_t len, const struct verbs_ptx *pl)
{
	int slot = verbs_ring_stage_slot(&c->ring);
	uint8_t *st;

	if (slot < 0)
		return -ENOBUFS;
	size_t hl = hdr ? tally_proto_hdr_len(hdr) : 0; /* with its auth block, if signed */
	size_t rec = pl ? VERBS_PLACE_BYTES : 0;
	if (hl + rec + len > VERBS_SLOT_BYTES)
		return -EMSGSIZE;
	st = c->mem + ((size_t)v->cfg.slots + (size_t)slot) * VERBS_SLOT_BYTES;
	if (hl)
		memcpy(st, hdr, hl);
	/* a placed payload still goes through staging: the engine's buffers are not
	 * registered memory (ARCHITECTURE.md, "RESULTs placed") */
	if (pl)
		verbs_place_encode(st + hl, pl->raddr, (uint32_t)len);
	if (len)
		memcpy(st + hl + rec, payload, len);
	c->lens[slot] = (uint32_t)(hl + rec + len);
	c->ptx[slot] = pl ? (struct verbs_ptx){ .raddr = pl->raddr, .rkey = pl->rkey,
						.head = (uint32_t)(hl + rec) } :
			    (struct verbs_ptx){ 0 };
	verbs_ring_staged(&c->ring);
	return 0;
}

static int conn_post(struct verbs_conn *c, int data, uint64_t addr, uint32_t len,
		     uint32_t remote)
{
	struct ibv_sge sge = { .addr = addr, .length = len, .lkey = c->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = verbs_wr_id(c, data), .sg_list = &sge,
				  .num_sge = data, .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	int rc;

	wr.imm_data = htonl(verbs_ring_tx_imm(&c->ring, data));
	wr.wr.rdma.remote_addr = c->raddr + (uint64_t)remote * VERBS_SLOT_BYTES;
	wr.wr.rdma.rkey = c->rkey;
	if ((rc = ibv_post_send(c->qp, &wr, &bad)))
		return -rc;
	verbs_ring_tx_commit(&c->ring, data);
	return 0;
}

/* A placed RESULT: the payload by RDMA WRITE into the worker's buffer (unsignaled: an
 * error still completes), then, in order on the QP, header + record into the landing
 * slot; the worker sees the header only after the payload is in place (RC executes a
 * QP's writes in order), and the staging slot is free at the second's completion. */
static int conn_post_placed(struct verbs_conn *c, uint8_t *st, uint32_t len,
			    const struct verbs_ptx *p, uint32_t remote)
{
	struct ibv_sge s0 = { .addr = (uint64_t)(uintptr_t)(st + p->head),
			      .length = len - p->head, .lkey = c->mr->lkey },
		       s1 = { .addr = (uint64_t)(uintptr_t)st, .length = p->head,
			      .lkey = c->mr->lkey };
	struct ibv_send_wr w1 = { .wr_id = verbs_wr_id(c, 1), .sg_list = &s1, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
				  .send_flags = IBV_SEND_SIGNALED },
			   w0 = { .wr_id = verbs_wr_id(c, 0) | VERBS_WR_PLACE, .sg_list = &s0,
				  .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE, .next = &w1 }, *bad;
	int rc;

	w0.wr.rdma.remote_addr = p->raddr;
	w0.wr.rdma.rkey = p->rkey;
	w1.imm_data = htonl(verbs_ring_tx_imm(&c->ring, 1));
	w1.wr.rdma.remote_addr = c->raddr + (uint64_t)remote * VERBS_SLOT_BYTES;
	w1.wr.rdma.rkey = c->rkey;
	if ((rc = ibv_post_send(c->qp, &w0, &bad)))
		return -rc;
	verbs_ring_tx_commit(&c->ring, 1);
	return 0;
}

int verbs_conn_flush(struct tally_verbs *v, struct verbs_conn *c)
{
	uint32_t remote;
	int slot, n = 0, rc;

	while ((slot = verbs_ring_post_slot(&c->ring, &remote)) >= 0) {
		uint8_t *st = c->mem + ((size_t)v->cfg.slots + (size_t)slot) * VERBS_SLOT_BYTES;

		rc = c->ptx[slot].head ?
		     conn_post_placed(c, st, c->lens[slot], &c->ptx[slot], remote) :
		     conn_post(c, 1, (uint64_t)(uintptr_t)st, c->lens[slot], remote);
		if (rc)
			return rc;
		n++;
	}
	return n;
}

int verbs_conn_credit(struct verbs_conn *c)
{
	int rc;

	/* The peer's spare receives are for credits: never flood them. */
	if (c->credit_out >= VERBS_EXTRA_RECV / 2)
		return -ENOBUFS;
	if ((rc = conn_post(c, 0, 0, 0, 0)))
		return rc;
	c->credit_out++;
	return 0;
}

int verbs_conn_probe(struct verbs_conn *c)
{
	struct ibv_send_wr wr = { .wr_id = verbs_wr_id(c, 0) | VERBS_WR_PROBE, .num_sge = 0,
				  .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED },
			   *bad;

	wr.wr.rdma.remote_addr = c->raddr;
	wr.wr.rdma.rkey = c->rkey;
	return -ibv_post_send(c->qp, &wr, &bad);
}

struct verbs_conn *verbs_conn_alloc(struct tally_verbs *v)
{
	for (uint32_t i = 0; i < v->nconns; i++)
		if (v->conns[i].state == VC_FREE) {
			struct verbs_conn *c = &v->conns[i];
			uint16_t gen = (uint16_t)(c->gen + 1);

			*c = (struct verbs_conn){ .idx = i, .gen = gen };
			return c;
		}
	return NULL;
}

void verbs_conn_release(struct tally_verbs *v, struct verbs_conn *c)
{
	if (c->state == VC_UP && v->live)
		v->live--;
	if (c->qp)
		rdma_destroy_qp(c->id);
	if (c->id)
		rdma_destroy_id(c->id);
	if (c->mr)
		ibv_dereg_mr(c->mr);
	if (c->mem)
		munmap(c->mem, c->mem_len);
	free(c->lens);
	c->lens = NULL;
	free(c->ptx);
	c->ptx = NULL;
	free(c->adv); /* a new connection starts with no advertisements */
	c->adv = NULL;
	c->qp = NULL;
	c->id = NULL;
	c->mr = NULL;
	c->mem = NULL;
	/* A client reuses the entry for its next connect: nothing of the old QP may carry over.
	 * Credit messages posted on a QP that died never complete (their flushes belong to the
	 * old generation): a credit_out left at the limit kept the new connection from ever
	 * returning credits by itself (a CI run: the restarted appliance got no credit message
	 * from any worker and stalled its RESULTs until a rank was named silent). */
	c->stall_ns = c->probe_ns = 0;
	c->stall_mark = 0;
	c->credit_out = 0;
	c->state = VC_FREE;
	c->gen++;
}
