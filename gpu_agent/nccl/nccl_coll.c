/* SPDX-License-Identifier: Apache-2.0
 * nccl_coll.c — the plugin's CollNet part: one Tally job per collComm, driven through the
 * agent library (tally_agent.h). connect() makes the participants one job: its id, token and
 * incarnation are a hash of the handles NCCL exchanged (every rank gets the same array), unless
 * TALLY_JOB_ID / TALLY_TOKEN name an operator-admitted job. The collectives cut NCCL's host
 * buffers into pieces pushed on reused keys (nccl_piece.c, nccl_coll.h): the same keys serve
 * every size. Partitions start in submission order (TALLY_AGENT_ORDER_SUBMIT): NCCL submits
 * the same collectives in the same order on every rank.
 */
#include "nccl_coll.h"
#include "tally_agent.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define COLL_MAGIC 0x544c4c43u /* "TLLC" */

struct coll_handle {
	uint32_t magic;
	uint32_t pad;
	uint64_t nonce;
};

struct coll_listen {
	uint64_t nonce;
};

struct coll_mr {
	char *base;
	size_t size;
};

static struct tally_agent_cfg coll_cfg; /* from the environment, at init */
static int coll_ready, coll_fixed_job;
static unsigned coll_lanes = 8; /* TALLY_NCCL_LANES */
static int coll_owner = 1;      /* TALLY_NCCL_OWNER_MODE */

ncclResult_t nccl_coll_init(ncclDebugLogger_t log, int version)
{
	char err[256] = "";

	nccl_log_fn = log;
	tally_agent_cfg_defaults(&coll_cfg);
	if (tally_agent_cfg_from_env(&coll_cfg, err, sizeof(err)) != 0) {
		NCCL_WARN("NET/Tally: CollNet disabled: %s", err);
		return ncclInvalidUsage;
	}
	coll_fixed_job = getenv("TALLY_JOB_ID") || getenv("TALLY_TOKEN");
	if (getenv("TALLY_NCCL_LANES")) {
		char *end;
		unsigned long v = strtoul(getenv("TALLY_NCCL_LANES"), &end, 10);

		if (*end || v < 1 || v > 64) {
			NCCL_WARN("NET/Tally: CollNet disabled: TALLY_NCCL_LANES=%s: want 1 .. 64 "
				  "(keys per piece size and dtype)", getenv("TALLY_NCCL_LANES"));
			return ncclInvalidUsage;
		}
		coll_lanes = (unsigned)v;
	}
	if (getenv("TALLY_NCCL_OWNER_MODE")) {
		const char *v = getenv("TALLY_NCCL_OWNER_MODE");

		if (strcmp(v, "0") && strcmp(v, "1")) {
			NCCL_WARN("NET/Tally: CollNet disabled: TALLY_NCCL_OWNER_MODE=%s: want 1 "
				  "(reduce-scatter sums to their block's owner only, the default) "
				  "or 0 (to every rank)", v);
			return ncclInvalidUsage;
		}
		coll_owner = *v == '1';
	}
	/* pieces of every outstanding collective may be out at once */
	if (coll_cfg.max_handles < 8192)
		coll_cfg.max_handles = 8192;
	coll_ready = 1;
	if (!coll_cfg.nappliances) {
		NCCL_INFO("NET/Tally: CollNet v%d: no appliances (TALLY_APPLIANCES unset): 0 devices",
			  version);
		return ncclSuccess;
	}
	NCCL_INFO("NET/Tally: CollNet v%d: %u appliance(s), first %s:%u%s%s, deterministic %d, "
		  "%u lanes per piece size, reduce-scatter owner mode %d", version,
		  coll_cfg.nappliances, coll_cfg.appliances[0].host, coll_cfg.appliances[0].port,
		  coll_cfg.auth_key_file[0] ? ", key " : "", coll_cfg.auth_key_file,
		  coll_cfg.deterministic, coll_lanes, coll_owner);
	return ncclSuccess;
}

ncclResult_t nccl_coll_devices(int *ndev)
{
	*ndev = coll_ready && coll_cfg.nappliances ? 1 : 0;
	return ncclSuccess;
}

ncclResult_t nccl_coll_listen(int dev, void *handle, void **listen_comm)
{
	struct coll_handle *h = handle;
	struct coll_listen *l = calloc(1, sizeof(*l));

	(void)dev;
	if (!l)
		return ncclSystemError;
	if (getrandom(&l->nonce, sizeof(l->nonce), 0) != sizeof(l->nonce)) {
		free(l);
		return ncclSystemError;
	}
	memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
	h->magic = COLL_MAGIC;
	h->nonce = l->nonce;
	*listen_comm = l;
	return ncclSuccess;
}

static uint64_t coll_mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	h ^= h >> 31;
	h *= 0xbf58476d1ce4e5b9ull;
	return h ^ (h >> 29);
}

ncclResult_t nccl_coll_connect(void *handles[], int nranks, int rank, void *listen_comm,
			       void **coll_comm)
{
	struct tally_agent_cfg cfg = coll_cfg;
	struct coll_comm *cc;
	uint64_t h = 0x74616c6c79ull;
	char err[512] = "";
	int e = 0;

	(void)listen_comm;
	*coll_comm = NULL;
	for (int i = 0; i < nranks; i++) {
		const struct coll_handle *ch = handles[i];

		if (ch->magic != COLL_MAGIC) {
			NCCL_WARN("NET/Tally: CollNet handle of rank %d is not a Tally handle", i);
			return ncclInvalidArgument;
		}
		h = coll_mix(h, ch->nonce);
	}
	if (!coll_fixed_job) {
		cfg.job_id = (uint32_t)((1u << 20) + (h % ((1u << 24) - (1u << 20))));
		cfg.token = coll_mix(h, 1);
	}
	cfg.incarnation = coll_mix(h, 2);
	cfg.rank = rank;
	cfg.world_size = nranks;
	cfg.local_rank = 0;
	cfg.local_size = 1;
	cfg.local_agg = TALLY_AGENT_LOCAL_OFF;
	cfg.gpu_hosts = 0;
	cfg.average = 0;
	cc = calloc(1, sizeof(*cc));
	if (!cc)
		return ncclSystemError;
	cc->job = cfg.job_id;
	cc->rank = rank;
	cc->lanes = coll_lanes;
	cc->owner = coll_owner;
	/* the piece size P: a power of two within one partition (one key), 64 KiB .. 32 MiB */
	cc->piece = (size_t)64 << 10;
	while (cc->piece * 2 <= cfg.partition_bytes &&
	       cc->piece * 2 <= (size_t)1 << (COLL_MIN_SHIFT + COLL_NCLASS - 1))
		cc->piece *= 2;
	cc->a = tally_agent_create(&cfg, &e, err, sizeof(err));
	if (!cc->a) {
		/* an appliance that holds another key for the job drops our JOINs unanswered */
		NCCL_WARN("NET/Tally: job %u rank %d/%d: %s%s%s%s", cfg.job_id, rank, nranks, err,
			  cfg.auth_key_file[0] && !strstr(err, "TALLY_AUTH_KEY_FILE")
				  ? " (or the appliance holds another key for the "
						 "job than TALLY_AUTH_KEY_FILE=" : "",
			  cfg.auth_key_file[0] && !strstr(err, "TALLY_AUTH_KEY_FILE")
				  ? cfg.auth_key_file : "",
			  cfg.auth_key_file[0] && !strstr(err, "TALLY_AUTH_KEY_FILE") ? ")" : "");
		free(cc);
		/* refused (key, quota): a setting to change; else the appliance is not there */
		return e == -EKEYREJECTED || e == -EACCES || e == -EPERM || e == -EDQUOT
			       ? ncclInvalidUsage : ncclRemoteError;
	}
	if (tally_agent_set_order(cc->a, TALLY_AGENT_ORDER_SUBMIT) != 0) {
		NCCL_WARN("NET/Tally: %s", tally_agent_strerror(cc->a));
		tally_agent_destroy(cc->a);
		free(cc);
		return ncclInternalError;
	}
	NCCL_INFO("NET/Tally: CollNet job %u rank %d of %d on %u appliance(s)", cfg.job_id, rank,
		  nranks, cfg.nappliances);
	*coll_comm = cc;
	return ncclSuccess;
}

/* enum tally_dtype (tally_sum.h): 0 f32, 1 f16, 2 bf16, 3 i32; -1 unsupported */
static int coll_dtype(ncclDataType_t dt, size_t *esize)
{
	switch (dt) {
	case ncclFloat32: *esize = 4; return 0;
	case ncclFloat16: *esize = 2; return 1;
	case ncclBfloat16: *esize = 2; return 2;
	case ncclInt32: *esize = 4; return 3;
	default: return -1;
	}
}

ncclResult_t nccl_coll_reduce_support(ncclDataType_t dt, ncclRedOp_t op, int *supported)
{
	size_t es;

	*supported = op == ncclSum && coll_dtype(dt, &es) >= 0;
	return ncclSuccess;
}

ncclResult_t nccl_coll_regmr(void *coll_comm, void *data, size_t size, int type, void **mh)
{
	struct coll_mr *m;

	(void)coll_comm;
	if (type != NCCL_PTR_HOST) {
		NCCL_WARN("NET/Tally: CollNet registers host memory only (NCCL_PTR_HOST), got %d",
			  type);
		return ncclInternalError;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return ncclSystemError;
	m->base = data;
	m->size = size;
	*mh = m;
	return ncclSuccess;
}

/* The agent writes sums into NCCL's memory until a piece is back: a collective that failed
 * (or was never tested) may still have pieces out. Wait for them (the agent fails every
 * push_pull within its give-up, TALLY_OP_TIMEOUT_MS) before NCCL frees the buffer. */
ncclResult_t nccl_coll_deregmr(void *coll_comm, void *mh)
{
	struct coll_comm *cc = coll_comm;
	double waited_ms = 0, limit_ms = 2.0 * coll_cfg.op_timeout_ms + 5000;

	for (unsigned i = 0; cc && i < NCCL_NET_MAX_REQUESTS; i++)
		while (atomic_load(&cc->reqs[i].left) && waited_ms < limit_ms) {
			usleep(1000);
			waited_ms += 1;
		}
	free(mh);
	if (waited_ms >= limit_ms) {
		NCCL_WARN("NET/Tally: job %u: deregMr with collectives still out after %.0f ms",
			  cc->job, waited_ms);
		return ncclInternalError;
	}
	return ncclSuccess;
}

/* A free request slot: test() said done (or failed) and none of its pieces is still out. */
static struct coll_req *coll_req_new(struct coll_comm *cc)
{
	for (unsigned i = 0; i < NCCL_NET_MAX_REQUESTS; i++) {
		struct coll_req *r = &cc->reqs[(cc->next + i) % NCCL_NET_MAX_REQUESTS];

		if (!r->used && atomic_load(&r->left) == 0) {
			cc->next = (cc->next + i + 1) % NCCL_NET_MAX_REQUESTS;
			r->used = 1;
			r->cc = cc;
			atomic_store(&r->err, 0);
			coll_plan_reset(cc);
			return r;
		}
	}
	return NULL;
}

/* Pushes the plan. A lane still busy: *request NULL, NCCL asks again. */
static ncclResult_t coll_submit(struct coll_comm *cc, struct coll_req *r, const char *what,
				int tdt, void **request)
{
	char err[640] = "";
	int rc = coll_plan_push(cc, r, tdt, err, sizeof(err));

	if (rc == -EBUSY) {
		r->used = 0;
		return ncclSuccess;
	}
	if (rc) {
		NCCL_WARN("NET/Tally: job %u: %s of %zu bytes: %s", cc->job, what, r->bytes, err);
		r->used = 0;
		return rc == -EDQUOT ? ncclInvalidUsage : ncclRemoteError;
	}
	*request = r;
	return ncclSuccess;
}

ncclResult_t nccl_coll_iallreduce(void *coll_comm, void *send, void *recv, size_t count,
				  ncclDataType_t dt, ncclRedOp_t op, void *send_mh, void *recv_mh,
				  void **request)
{
	struct coll_comm *cc = coll_comm;
	struct coll_req *r;
	size_t es = 0;
	int tdt = coll_dtype(dt, &es);

	(void)send_mh;
	(void)recv_mh;
	*request = NULL;
	if (tdt < 0 || op != ncclSum) {
		NCCL_WARN("NET/Tally: iallreduce of type %d op %d: reduceSupport said no", dt, op);
		return ncclInvalidArgument;
	}
	if (!(r = coll_req_new(cc)))
		return ncclSuccess; /* 32 in flight: NCCL calls again */
	r->bytes = count * es;
	if (coll_plan_add(cc, recv, recv, r->bytes) != 0) {
		r->used = 0;
		return ncclSystemError;
	}
	if (send != recv) /* again on a retry (-EBUSY): the same bytes */
		memmove(recv, send, r->bytes);
	return coll_submit(cc, r, "allreduce", tdt, request);
}

/* Where this rank's block [rank * bpr, (rank + 1) * bpr) lies in the window [woff, woff +
 * wbytes): at *ov, *ovn bytes (0: not at all). */
static void coll_own(int rank, size_t bpr, size_t woff, size_t wbytes, size_t *ov, size_t *ovn)
{
	size_t beg = (size_t)rank * bpr, end = beg + bpr;

	beg = beg > woff ? beg : woff;
	end = end < woff + wbytes ? end : woff + wbytes;
	*ov = beg < end ? beg - woff : 0;
	*ovn = beg < end ? end - beg : 0;
}

/* All-gather as a sum: each rank contributes its block and zeros elsewhere, summed as i32
 * (integer adds of zeros: every byte comes back exactly), in place in NCCL's window.
 * Every rank sends and receives the whole window. */
ncclResult_t nccl_coll_iallgather(void *coll_comm, void *send, int nparts, void **part_addr,
				  size_t *part_size, size_t bpr, size_t woff, size_t wbytes,
				  void **request)
{
	struct coll_comm *cc = coll_comm;
	struct coll_req *r;
	size_t ov, ovn;
	char *win;

	*request = NULL;
	if (nparts != 1 || part_size[0] < wbytes) {
		NCCL_WARN("NET/Tally: iallgather into %d parts (%zu bytes): one part of the window "
			  "(%zu bytes) is supported", nparts, nparts ? part_size[0] : 0, wbytes);
		return ncclInternalError;
	}
	if (!(r = coll_req_new(cc)))
		return ncclSuccess;
	win = part_addr[0];
	coll_own(cc->rank, bpr, woff, wbytes, &ov, &ovn);
	r->bytes = wbytes;
	if (coll_plan_add(cc, win, win, wbytes) != 0) {
		r->used = 0;
		return ncclSystemError;
	}
	memset(win, 0, ov);
	memmove(win + ov, send, ovn);
	memset(win + ov + ovn, 0, wbytes - ov - ovn);
	return coll_submit(cc, r, "allgather", 3, request);
}

/* Reduce-scatter: the window cut at every rank's block boundary (the same pieces on every
 * rank); this rank's block is summed in place in `recv` and waited for, the other blocks
 * are pushed from a copy and not waited for (test() is done when this rank's shard is).
 * Those are pushed in owner mode (nccl_piece.c): each chunk's sum goes to the rank that
 * owns it, the others get a header-only RESULT (tally_proto.h TALLY_F_NORESULT), so a
 * rank's downlink carries its own block's sums, not the whole window's. */
ncclResult_t nccl_coll_ireducescatter(void *coll_comm, int nparts, void **part_addr,
				      size_t *part_size, void *recv, size_t bpr, size_t woff,
				      size_t wbytes, ncclDataType_t dt, ncclRedOp_t op,
				      void **request)
{
	struct coll_comm *cc = coll_comm;
	struct coll_req *r;
	size_t ov, ovn, es = 0, at = 0;
	int tdt = coll_dtype(dt, &es), rc = 0;
	char *in;

	*request = NULL;
	if (tdt < 0 || op != ncclSum || nparts != 1 || part_size[0] < wbytes || wbytes % es ||
	    bpr % es || woff % es) {
		NCCL_WARN("NET/Tally: ireducescatter of type %d op %d from %d parts: sum of "
			  "f32/f16/bf16/i32 from one part of the window is supported", dt, op,
			  nparts);
		return ncclInternalError;
	}
	if (!(r = coll_req_new(cc)))
		return ncclSuccess;
	in = part_addr[0];
	coll_own(cc->rank, bpr, woff, wbytes, &ov, &ovn);
	r->bytes = ovn;
	while (!rc && at < wbytes) {
		size_t blk_end = ((woff + at) / bpr + 1) * bpr - woff, n;

		n = (blk_end < wbytes ? blk_end : wbytes) - at;
		if (ovn && at == ov)
			rc = coll_plan_add(cc, recv, recv, n);
		else
			rc = coll_plan_add(cc, in + at, NULL, n);
		at += n;
	}
	if (rc) {
		r->used = 0;
		return ncclSystemError;
	}
	memmove(recv, in + ov, ovn); /* recv may lie in the window */
	return coll_submit(cc, r, "reduce-scatter", tdt, request);
}

/* Done when this rank's sums are back; an error (no appliance left, the op timeout) carries
 * the agent's text, which names the appliance. A failed piece of another rank's shard fails
 * the next test() too: NCCL must hear of it. */
ncclResult_t nccl_coll_test(void *request, int *done, int *size)
{
	struct coll_req *r = request;
	struct coll_comm *cc = r->cc;
	int e = atomic_load(&r->err), bg = atomic_load(&cc->bg_err);

	*done = 0;
	if (e || bg) {
		r->used = 0; /* its slot is reused once its last piece is back */
		NCCL_WARN("NET/Tally: job %u: collective of %zu bytes failed%s: %s", cc->job,
			  r->bytes, e ? "" : " (a shard of another rank's)",
			  tally_agent_strerror(cc->a));
		return ncclRemoteError;
	}
	if (atomic_load(&r->left) != 0)
		return ncclSuccess;
	r->used = 0;
	*done = 1;
	if (size)
		*size = (int)r->bytes;
	return ncclSuccess;
}

ncclResult_t nccl_coll_close(void *coll_comm)
{
	struct coll_comm *cc = coll_comm;

	if (cc) {
		struct tally_agent_stats st;

		/* a reduce-scatter's test() is done with this rank's shard, the other blocks'
		 * pieces may still be on their way: the other ranks' sums need them, so they
		 * finish (or fail at the agent's give-up) before the job is left */
		if (coll_lanes_drain(cc, 2 * coll_cfg.op_timeout_ms) != 0)
			NCCL_WARN("NET/Tally: CollNet job %u rank %d: pieces of other ranks' shards "
				  "still out after %u ms (2 x TALLY_OP_TIMEOUT_MS): closing anyway",
				  cc->job, cc->rank, 2 * coll_cfg.op_timeout_ms);
		tally_agent_get_stats(cc->a, &st);
		/* what owner mode saved (reduce-scatter): README.md, "Reduce-scatter" */
		NCCL_INFO("NET/Tally: CollNet job %u rank %d closing: received %llu bytes; owner "
			  "mode: %llu operations, %llu chunks answered header-only, %llu sum bytes "
			  "not received, %llu sum payloads received anyway", cc->job, cc->rank,
			  (unsigned long long)st.rx_bytes, (unsigned long long)st.noresult_ops,
			  (unsigned long long)st.noresult_acks,
			  (unsigned long long)st.noresult_skipped_bytes,
			  (unsigned long long)st.noresult_payloads);
		tally_agent_destroy(cc->a); /* fails what is out; the callbacks run first */
		coll_lanes_free(cc);
		free(cc);
	}
	return ncclSuccess;
}

ncclResult_t nccl_coll_close_listen(void *listen_comm)
{
	free(listen_comm);
	return ncclSuccess;
}
