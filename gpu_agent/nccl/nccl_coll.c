/* SPDX-License-Identifier: Apache-2.0
 * nccl_coll.c — the plugin's CollNet part: one Tally job per collComm, driven through the
 * agent library (tally_agent.h). connect() makes the participants one job: its id, token and
 * incarnation are a hash of the handles NCCL exchanged (every rank gets the same array), unless
 * TALLY_JOB_ID / TALLY_TOKEN name an operator-admitted job. iallreduce() pushes the host
 * buffer as an agent tensor named by (registration, offset, bytes, dtype): NCCL reuses its
 * staging slots, so the same names, hence the same appliance keys, come back every call.
 * Partitions start in submission order (TALLY_AGENT_ORDER_SUBMIT): NCCL submits the same
 * collectives in the same order on every rank.
 */
#include "nccl_int.h"
#include "tally_agent.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

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
	unsigned id; /* registration order: the same on every rank */
};

struct coll_req {
	struct coll_comm *cc;
	int used, handle;
	size_t bytes;
	char *scratch;     /* all-gather / reduce-scatter: the window, kept for the slot */
	size_t scratch_cap;
	char *out;         /* where test() copies the result from scratch + out_off */
	size_t out_off, out_bytes;
};

struct coll_comm {
	struct tally_agent *a;
	uint32_t job;
	int rank;
	unsigned nmr;
	struct coll_req reqs[NCCL_NET_MAX_REQUESTS];
	unsigned next;
};

static struct tally_agent_cfg coll_cfg; /* from the environment, at init */
static int coll_ready, coll_fixed_job;

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
	coll_ready = 1;
	if (!coll_cfg.nappliances) {
		NCCL_INFO("NET/Tally: CollNet v%d: no appliances (TALLY_APPLIANCES unset): 0 devices",
			  version);
		return ncclSuccess;
	}
	NCCL_INFO("NET/Tally: CollNet v%d: %u appliance(s), first %s:%u%s%s, deterministic %d",
		  version, coll_cfg.nappliances, coll_cfg.appliances[0].host,
		  coll_cfg.appliances[0].port, coll_cfg.auth_key_file[0] ? ", key " : "",
		  coll_cfg.auth_key_file, coll_cfg.deterministic);
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
	struct coll_comm *cc = coll_comm;
	struct coll_mr *m;

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
	m->id = cc->nmr++;
	*mh = m;
	return ncclSuccess;
}

ncclResult_t nccl_coll_deregmr(void *coll_comm, void *mh)
{
	(void)coll_comm;
	free(mh);
	return ncclSuccess;
}

static struct coll_req *coll_req_new(struct coll_comm *cc)
{
	for (unsigned i = 0; i < NCCL_NET_MAX_REQUESTS; i++) {
		struct coll_req *r = &cc->reqs[(cc->next + i) % NCCL_NET_MAX_REQUESTS];

		if (!r->used) {
			cc->next = (cc->next + i + 1) % NCCL_NET_MAX_REQUESTS;
			r->used = 1;
			r->cc = cc;
			return r;
		}
	}
	return NULL;
}

/* Pushes `bytes` at buf as the agent tensor `name` (declared on first use: the same name on
 * every rank is the same keys). A push of that tensor still in flight: *request NULL, NCCL
 * asks again. */
static ncclResult_t coll_push(struct coll_comm *cc, struct coll_req *r, const char *name,
			      char *buf, int tdt, void **request)
{
	int t = tally_agent_declare(cc->a, name, r->bytes, tdt, 0);

	if (t >= 0)
		t = tally_agent_set_ordered(cc->a, t, 0) == 0 ? t : -EINVAL;
	r->handle = t >= 0 ? tally_agent_push_pull(cc->a, t, buf, r->bytes, TALLY_AGENT_CPU, NULL,
						   NULL, NULL)
			   : t;
	if (r->handle == -EBUSY) {
		r->used = 0;
		return ncclSuccess;
	}
	if (r->handle < 0) {
		NCCL_WARN("NET/Tally: job %u: %s of %zu bytes: %s", cc->job, name, r->bytes,
			  tally_agent_strerror(cc->a));
		r->used = 0;
		return ncclRemoteError;
	}
	*request = r;
	return ncclSuccess;
}

ncclResult_t nccl_coll_iallreduce(void *coll_comm, void *send, void *recv, size_t count,
				  ncclDataType_t dt, ncclRedOp_t op, void *send_mh, void *recv_mh,
				  void **request)
{
	struct coll_comm *cc = coll_comm;
	const struct coll_mr *m = recv_mh;
	struct coll_req *r;
	char name[96];
	size_t es = 0;
	int tdt = coll_dtype(dt, &es);

	(void)send_mh;
	*request = NULL;
	if (tdt < 0 || op != ncclSum) {
		NCCL_WARN("NET/Tally: iallreduce of type %d op %d: reduceSupport said no", dt, op);
		return ncclInvalidArgument;
	}
	r = coll_req_new(cc);
	if (!r)
		return ncclSuccess; /* 32 in flight: NCCL calls again */
	r->bytes = count * es;
	r->out = NULL;
	if (send != recv)
		memmove(recv, send, r->bytes);
	snprintf(name, sizeof(name), "nccl:%u:%zu:%zu:%d", m ? m->id : 0u,
		 m ? (size_t)((char *)recv - m->base) : (size_t)0, r->bytes, tdt);
	return coll_push(cc, r, name, recv, tdt, request);
}

/* The window [woff, woff + wbytes) of the nranks x bpr collective buffer in the request's
 * scratch (rounded up to 4 bytes, the tail zero); *ov / *ovn: where this rank's block
 * [rank * bpr, (rank + 1) * bpr) lies in it (ovn 0: not at all). */
static int coll_window(struct coll_req *r, int rank, size_t bpr, size_t woff, size_t wbytes,
		       size_t *ov, size_t *ovn)
{
	size_t beg = (size_t)rank * bpr, end = beg + bpr, need = (wbytes + 3) & ~(size_t)3;

	if (need > r->scratch_cap) {
		char *p = realloc(r->scratch, need);

		if (!p)
			return -ENOMEM;
		r->scratch = p;
		r->scratch_cap = need;
	}
	beg = beg > woff ? beg : woff;
	end = end < woff + wbytes ? end : woff + wbytes;
	*ov = beg < end ? beg - woff : 0;
	*ovn = beg < end ? end - beg : 0;
	r->bytes = need;
	return 0;
}

/* All-gather as a sum: each rank contributes its block and zeros elsewhere, summed as i32
 * (integer adds of zeros: every byte comes back exactly). Every rank sends the whole window. */
ncclResult_t nccl_coll_iallgather(void *coll_comm, void *send, int nparts, void **part_addr,
				  size_t *part_size, size_t bpr, size_t woff, size_t wbytes,
				  void **request)
{
	struct coll_comm *cc = coll_comm;
	struct coll_req *r;
	size_t ov, ovn;
	char name[96];

	*request = NULL;
	if (nparts != 1 || part_size[0] < wbytes) {
		NCCL_WARN("NET/Tally: iallgather into %d parts (%zu bytes): one part of the window "
			  "(%zu bytes) is supported", nparts, nparts ? part_size[0] : 0, wbytes);
		return ncclInternalError;
	}
	if (!(r = coll_req_new(cc)))
		return ncclSuccess;
	if (coll_window(r, cc->rank, bpr, woff, wbytes, &ov, &ovn) != 0) {
		r->used = 0;
		return ncclSystemError;
	}
	memset(r->scratch, 0, r->bytes);
	memcpy(r->scratch + ov, send, ovn);
	r->out = part_addr[0];
	r->out_off = 0;
	r->out_bytes = wbytes;
	snprintf(name, sizeof(name), "nccl-ag:%zu:%zu:%zu", bpr, woff, wbytes);
	return coll_push(cc, r, name, r->scratch, 3, request);
}

/* Reduce-scatter: the window summed by the appliances, this rank keeps its block's part.
 * (Every rank receives the whole window's sums, not only its shard.) */
ncclResult_t nccl_coll_ireducescatter(void *coll_comm, int nparts, void **part_addr,
				      size_t *part_size, void *recv, size_t bpr, size_t woff,
				      size_t wbytes, ncclDataType_t dt, ncclRedOp_t op,
				      void **request)
{
	struct coll_comm *cc = coll_comm;
	struct coll_req *r;
	size_t ov, ovn, es = 0;
	int tdt = coll_dtype(dt, &es);
	char name[96];

	*request = NULL;
	if (tdt < 0 || op != ncclSum || nparts != 1 || part_size[0] < wbytes || wbytes % es) {
		NCCL_WARN("NET/Tally: ireducescatter of type %d op %d from %d parts: sum of "
			  "f32/f16/bf16/i32 from one part of the window is supported", dt, op,
			  nparts);
		return ncclInternalError;
	}
	if (!(r = coll_req_new(cc)))
		return ncclSuccess;
	if (coll_window(r, cc->rank, bpr, woff, wbytes, &ov, &ovn) != 0) {
		r->used = 0;
		return ncclSystemError;
	}
	r->bytes = wbytes; /* whole elements of dt */
	memcpy(r->scratch, part_addr[0], wbytes);
	r->out = recv;
	r->out_off = ov;
	r->out_bytes = ovn;
	snprintf(name, sizeof(name), "nccl-rs:%zu:%zu:%zu:%d", bpr, woff, wbytes, tdt);
	return coll_push(cc, r, name, r->scratch, tdt, request);
}

/* Done when the appliances' sums are back in the buffer; an error (no appliance left, the
 * op timeout) carries the agent's text, which names the appliance. */
ncclResult_t nccl_coll_test(void *request, int *done, int *size)
{
	struct coll_req *r = request;
	int rc = tally_agent_test(r->cc->a, r->handle);

	*done = 0;
	if (rc == 0)
		return ncclSuccess;
	r->used = 0;
	if (rc < 0) {
		NCCL_WARN("NET/Tally: job %u: allreduce of %zu bytes failed: %s", r->cc->job,
			  r->bytes, tally_agent_strerror(r->cc->a));
		return ncclRemoteError;
	}
	*done = 1;
	if (r->out)
		memcpy(r->out, r->scratch + r->out_off, r->out_bytes);
	if (size)
		*size = (int)(r->out ? r->out_bytes : r->bytes);
	return ncclSuccess;
}

ncclResult_t nccl_coll_close(void *coll_comm)
{
	struct coll_comm *cc = coll_comm;

	if (cc) {
		tally_agent_destroy(cc->a);
		for (unsigned i = 0; i < NCCL_NET_MAX_REQUESTS; i++)
			free(cc->reqs[i].scratch);
		free(cc);
	}
	return ncclSuccess;
}

ncclResult_t nccl_coll_close_listen(void *listen_comm)
{
	free(listen_comm);
	return ncclSuccess;
}
