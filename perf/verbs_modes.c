/* SPDX-License-Identifier: Apache-2.0
 * verbs_modes.c — tally-verbs-modes: the two ways issue 15 names for pushes to land on the
 * appliance, measured in one run on one RDMA device (a loopback RC pair, libibverbs only):
 *   write_imm: RDMA WRITE_WITH_IMM into the next landing slot (the k-th message to slot
 *              k mod n); the receive work requests carry no memory (what dataplane/xport/
 *              verbs does);
 *   send_srq:  SEND into a shared receive queue of n slot-sized buffers, re-posted after use.
 * Both: the same message size (a 64-byte header + payload), the same window of n messages
 * in flight (the credits), every message read by the receiver (a checksum of its words,
 * standing in for the sum) before its slot is reused. Modes alternate, --reps times each;
 * every run is printed, then the medians and their ratio. Figures only, no assertion.
 * usage: tally-verbs-modes [--dev rxe0] [--gid-index 1] [--bytes 8256] [--slots 128]
 *                          [--seconds 2] [--reps 3]
 */
#include <errno.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum mode { M_WRITE_IMM, M_SEND_SRQ };
static const char *const mode_name[] = { "write_imm", "send_srq" };

struct opts {
	const char *dev;
	int gid_index;
	uint32_t bytes, slots, reps;
	double seconds;
};

struct vm {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *scq, *rcq;
	struct ibv_srq *srq;
	struct ibv_qp *qs, *qr; /* sender, receiver */
	struct ibv_mr *smr, *rmr;
	uint8_t *sbuf, *rbuf;
	union ibv_gid gid;
	const struct opts *o;
};

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static int qp_up(struct vm *v, struct ibv_qp *q, uint32_t peer_qpn)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE };

	if (ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		return -errno;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer_qpn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = v->gid;
	a.ah_attr.grh.sgid_index = (uint8_t)v->o->gid_index;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -errno;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		return -errno;
	return 0;
}

static int post_recv(struct vm *v, enum mode m, uint32_t slot)
{
	struct ibv_sge sg = { .addr = (uintptr_t)(v->rbuf + (size_t)slot * v->o->bytes),
			      .length = v->o->bytes, .lkey = v->rmr->lkey };
	struct ibv_recv_wr wr = { .wr_id = slot }, *bad;

	if (m == M_SEND_SRQ) {
		wr.sg_list = &sg;
		wr.num_sge = 1;
		return ibv_post_srq_recv(v->srq, &wr, &bad) ? -EIO : 0;
	}
	return ibv_post_recv(v->qr, &wr, &bad) ? -EIO : 0; /* no memory: WRITE placed it */
}

static int post_send(struct vm *v, enum mode m, uint64_t k, uint32_t rkey)
{
	uint32_t n = v->o->slots, b = v->o->bytes;
	uint8_t *src = v->sbuf + (size_t)(k % (2 * n)) * b;
	struct ibv_sge sg = { .addr = (uintptr_t)src, .length = b, .lkey = v->smr->lkey };
	struct ibv_send_wr wr = { .wr_id = k, .sg_list = &sg, .num_sge = 1,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	memcpy(src, &k, sizeof(k)); /* the header's place: a fresh value per message */
	if (m == M_WRITE_IMM) {
		wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		wr.imm_data = htobe32((uint32_t)k);
		wr.wr.rdma.remote_addr = (uintptr_t)(v->rbuf + (size_t)(k % n) * b);
		wr.wr.rdma.rkey = rkey;
	} else {
		wr.opcode = IBV_WR_SEND;
	}
	return ibv_post_send(v->qs, &wr, &bad) ? -EIO : 0;
}

/* One timed run: keep `slots` messages in flight for o->seconds. Messages/s, or -errno. */
static double run_mode(struct vm *v, enum mode m, uint64_t *sum_out)
{
	const struct opts *o = v->o;
	uint64_t sent = 0, sdone = 0, rdone = 0, sum = 0;
	struct ibv_wc wc[32];
	double t0, t;
	int rc = 0;

	for (uint32_t s = 0; s < o->slots && !rc; s++)
		rc = post_recv(v, m, s);
	t0 = t = now_s();
	while (!rc && (t - t0 < o->seconds || sdone < sent || rdone < sent)) {
		/* credits: a slot is free once its message was consumed; staging 2n deep */
		while (!rc && t - t0 < o->seconds && sent - rdone < o->slots &&
		       sent - sdone < 2 * o->slots)
			rc = post_send(v, m, sent++, v->rmr->rkey);
		int ns = ibv_poll_cq(v->scq, 32, wc);
		for (int i = 0; i < ns && !rc; i++)
			rc = wc[i].status ? -EIO : (sdone++, 0);
		int nr = ibv_poll_cq(v->rcq, 32, wc);
		for (int i = 0; i < nr && !rc; i++) {
			if (wc[i].status) {
				rc = -EIO;
				break;
			}
			uint32_t slot = m == M_WRITE_IMM ? be32toh(wc[i].imm_data) % o->slots :
							   (uint32_t)wc[i].wr_id;
			const uint64_t *w = (const uint64_t *)(v->rbuf + (size_t)slot * o->bytes);
			for (uint32_t j = 0; j < o->bytes / 8; j++)
				sum += w[j];
			rdone++;
			rc = post_recv(v, m, slot);
		}
		if (ns < 0 || nr < 0)
			rc = -EIO;
		t = now_s();
	}
	*sum_out = sum;
	if (rc) {
		fprintf(stderr, "tally-verbs-modes: %s: a work request failed (status or post)\n",
			mode_name[m]);
		return rc;
	}
	return rdone / (t - t0);
}

/* A fresh connected pair per run: no receive left posted from the other mode. */
static int pair_create(struct vm *v, enum mode m)
{
	struct ibv_qp_init_attr a = { .send_cq = v->scq, .recv_cq = v->rcq, .qp_type = IBV_QPT_RC,
				      .cap = { .max_send_wr = 2 * v->o->slots,
					       .max_recv_wr = v->o->slots,
					       .max_send_sge = 1, .max_recv_sge = 1 } };
	int rc;

	if (m == M_SEND_SRQ) {
		struct ibv_srq_init_attr sa = { .attr = { .max_wr = v->o->slots, .max_sge = 1 } };

		if (!(v->srq = ibv_create_srq(v->pd, &sa)))
			return -errno;
	}
	v->qs = ibv_create_qp(v->pd, &a);
	a.srq = v->srq;
	v->qr = ibv_create_qp(v->pd, &a);
	if (!v->qs || !v->qr)
		return -errno;
	if ((rc = qp_up(v, v->qs, v->qr->qp_num)) || (rc = qp_up(v, v->qr, v->qs->qp_num)))
		return rc;
	return 0;
}

static void pair_destroy(struct vm *v)
{
	struct ibv_wc wc[32];

	if (v->qs)
		ibv_destroy_qp(v->qs);
	if (v->qr)
		ibv_destroy_qp(v->qr);
	if (v->srq)
		ibv_destroy_srq(v->srq);
	v->qs = v->qr = NULL;
	v->srq = NULL;
	while (ibv_poll_cq(v->rcq, 32, wc) > 0 || ibv_poll_cq(v->scq, 32, wc) > 0)
		; /* flushed receives of the destroyed pair */
}

static struct ibv_context *open_dev(const char *name)
{
	int n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);
	struct ibv_context *ctx = NULL;

	for (int i = 0; l && i < n && !ctx; i++)
		if (!name || !strcmp(ibv_get_device_name(l[i]), name))
			ctx = ibv_open_device(l[i]);
	if (!ctx)
		fprintf(stderr, "tally-verbs-modes: %s: load the NIC's driver, or for Soft-RoCE "
			"`modprobe rdma_rxe` and `rdma link add rxe0 type rxe netdev IF`\n",
			!l || !n ? "no RDMA device" : "no such --dev (or it cannot be opened)");
	if (l)
		ibv_free_device_list(l);
	return ctx;
}

static int setup(struct vm *v)
{
	size_t rl = (size_t)v->o->slots * v->o->bytes, sl = 2 * rl;
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

	if (!(v->ctx = open_dev(v->o->dev)))
		return -ENODEV;
	if (ibv_query_gid(v->ctx, 1, v->o->gid_index, &v->gid)) {
		fprintf(stderr, "tally-verbs-modes: --gid-index %d: no such GID on port 1\n",
			v->o->gid_index);
		return -EINVAL;
	}
	v->pd = ibv_alloc_pd(v->ctx);
	v->scq = ibv_create_cq(v->ctx, (int)(2 * v->o->slots), NULL, NULL, 0);
	v->rcq = ibv_create_cq(v->ctx, (int)v->o->slots, NULL, NULL, 0);
	v->sbuf = aligned_alloc(4096, (sl + 4095) / 4096 * 4096);
	v->rbuf = aligned_alloc(4096, (rl + 4095) / 4096 * 4096);
	if (!v->pd || !v->scq || !v->rcq || !v->sbuf || !v->rbuf)
		return -ENOMEM;
	memset(v->sbuf, 1, sl);
	memset(v->rbuf, 0, rl);
	v->smr = ibv_reg_mr(v->pd, v->sbuf, sl, acc);
	v->rmr = ibv_reg_mr(v->pd, v->rbuf, rl, acc);
	if (!v->smr || !v->rmr) {
		fprintf(stderr, "tally-verbs-modes: ibv_reg_mr: %s%s\n", strerror(errno),
			errno == ENOMEM ? ": raise the memlock limit (ulimit -l)" : "");
		return -ENOMEM;
	}
	return 0;
}

static void teardown(struct vm *v)
{
	pair_destroy(v);
	if (v->smr)
		ibv_dereg_mr(v->smr);
	if (v->rmr)
		ibv_dereg_mr(v->rmr);
	if (v->scq)
		ibv_destroy_cq(v->scq);
	if (v->rcq)
		ibv_destroy_cq(v->rcq);
	if (v->pd)
		ibv_dealloc_pd(v->pd);
	if (v->ctx)
		ibv_close_device(v->ctx);
	free(v->sbuf);
	free(v->rbuf);
}

static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "dev", 1, 0, 'd' }, { "gid-index", 1, 0, 'g' }, { "bytes", 1, 0, 'b' },
		{ "slots", 1, 0, 'n' }, { "seconds", 1, 0, 's' }, { "reps", 1, 0, 'r' }, { 0 } };
	int c;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		char *end = NULL;
		unsigned long u = strtoul(optarg ? optarg : "", &end, 10);

		switch (c) {
		case 'd': o->dev = optarg; continue;
		case 'g': o->gid_index = (int)u; break;
		case 'b': o->bytes = (uint32_t)u; break;
		case 'n': o->slots = (uint32_t)u; break;
		case 'r': o->reps = (uint32_t)u; break;
		case 's': o->seconds = strtod(optarg, &end); break;
		default: return -EINVAL;
		}
		if (!end || *end) {
			fprintf(stderr, "tally-verbs-modes: --%s '%s': want a number\n",
				lo[c == 'g' ? 1 : c == 'b' ? 2 : c == 'n' ? 3 : c == 's' ? 4 : 5].name,
				optarg);
			return -EINVAL;
		}
	}
	if (o->bytes < 64 || o->bytes > 65536 || o->bytes % 8 || !o->slots || o->slots > 4096 ||
	    o->gid_index > 255 || !o->reps || o->reps > 50 || !(o->seconds > 0)) {
		fprintf(stderr, "tally-verbs-modes: want --bytes 64..65536 (a multiple of 8), "
			"--slots 1..4096, --gid-index 0..255, --reps 1..50, --seconds > 0\n");
		return -EINVAL;
	}
	return 0;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	struct opts o = { .gid_index = 1, .bytes = 8256, .slots = 128, .reps = 3, .seconds = 2 };
	struct vm v = { .o = &o };
	double r[2][50], med[2];
	uint64_t sum;
	int rc;

	if (parse(argc, argv, &o))
		return 2;
	if ((rc = setup(&v)))
		goto out;
	printf("tally-verbs-modes: %s, %u-byte messages, %u slots in flight, %.1f s a run\n",
	       ibv_get_device_name(v.ctx->device), o.bytes, o.slots, o.seconds);
	for (uint32_t i = 0; i < o.reps && !rc; i++)
		for (int m = 0; m < 2 && !rc; m++) {
			if ((rc = pair_create(&v, (enum mode)m))) {
				fprintf(stderr, "tally-verbs-modes: %s: QP setup: %s\n",
					mode_name[m], strerror(-rc));
				break;
			}
			r[m][i] = run_mode(&v, (enum mode)m, &sum);
			pair_destroy(&v);
			if (r[m][i] < 0) {
				rc = (int)r[m][i];
				break;
			}
			printf("run %u %-9s: %9.0f msg/s %8.2f MB/s (checksum %016llx)\n", i + 1,
			       mode_name[m], r[m][i], r[m][i] * o.bytes / 1e6,
			       (unsigned long long)sum);
		}
	for (int m = 0; m < 2 && !rc; m++) {
		qsort(r[m], o.reps, sizeof(double), cmp_d);
		med[m] = r[m][o.reps / 2];
		printf("median %-9s: %9.0f msg/s %8.2f MB/s\n", mode_name[m], med[m],
		       med[m] * o.bytes / 1e6);
	}
	if (!rc)
		printf("ratio send_srq / write_imm: %.3f\n", med[1] / med[0]);
out:
	teardown(&v);
	return rc ? 1 : 0;
}
