/* SPDX-License-Identifier: Apache-2.0
 * agent_coll_nccl.c — the sharded mode's local collective over CUDA buffers (the CUDA
 * backend): NCCL over the local ranks' GPUs.
 *
 *  reduce_scatter (caller's thread and stream): ncclReduceScatter in place — in the caller's
 *    tensor when its elements divide by the local size, else in a padded device scratch the
 *    tensor is copied to — then this rank's shard to pinned host memory, waited for.
 *  all_gather (the lane's finisher thread, own stream): the summed shard back to the device,
 *    ncclAllGather in place, the scratch copied out when there is one, waited for.
 * The two run on different threads at times only their own order fixes, so each has its own
 * communicator and stream: NCCL needs the same order of calls on every rank of a
 * communicator, and each of the two sequences is the same on every local rank.
 *
 * Setup: local rank 0 makes the two unique ids and publishes them with the local size in
 * /dev/shm/tally-nccl-... (named like the shared segments: job, token, node, launch id;
 * written to a temporary name and renamed, so readers see all of it or nothing); the others
 * wait for it within connect_timeout_ms; ncclCommInitRank(local_size, id, local_rank) on the
 * calling thread's current device. Rank 0 removes the file once the communicators exist.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "agent_lane.h"
#include "tally_sum.h"

struct nccl_tensor {
	size_t bytes, padded; /* padded = local size * shard bytes */
	int dtype;
	void *scratch;        /* device, when bytes != padded (allocated at first use) */
};

struct cnccl {
	unsigned lr, ls, maxt;
	int dev;
	ncclComm_t rs, ag;
	cudaStream_t ag_stream;
	struct nccl_tensor *t;
};

struct nccl_idfile {
	uint32_t magic, local_size;
	ncclUniqueId id[2];
};

#define NCCL_ID_MAGIC 0x4e4c4154u

static int cuda_fail(char *err, size_t errlen, const char *what, cudaError_t e)
{
	agent_errf(err, errlen, "%s: %s (CUDA error %d)", what, cudaGetErrorString(e), (int)e);
	return e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ? -ENODEV : -EIO;
}

static int nccl_fail(char *err, size_t errlen, const char *what, ncclResult_t r)
{
	agent_errf(err, errlen, "%s: %s (NCCL %d)", what, ncclGetErrorString(r), (int)r);
	return -EIO;
}

static int nccl_dtype(int dtype, ncclDataType_t *out)
{
	switch (dtype) {
	case TALLY_DT_F32: *out = ncclFloat32; return 0;
	case TALLY_DT_F16: *out = ncclFloat16; return 0;
	case TALLY_DT_BF16: *out = ncclBfloat16; return 0;
	case TALLY_DT_I32: *out = ncclInt32; return 0;
	default: return -EINVAL;
	}
}

static int publish_ids(const char *path, const struct nccl_idfile *f, char *err, size_t errlen)
{
	char tmp[200];
	int fd, rc = 0;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, f, sizeof(*f)) != (ssize_t)sizeof(*f) || rename(tmp, path) != 0)
		rc = errno ? -errno : -EIO;
	if (fd >= 0)
		close(fd);
	if (rc) {
		unlink(tmp);
		agent_errf(err, errlen, "NCCL setup: cannot publish the unique ids in %s: %s", path,
			   strerror(-rc));
	}
	return rc;
}

static int await_ids(const char *path, const struct tally_agent_cfg *cfg, struct nccl_idfile *f,
		     char *err, size_t errlen)
{
	for (uint32_t waited = 0;; waited += 10) {
		int fd = open(path, O_RDONLY);

		if (fd >= 0) {
			ssize_t n = read(fd, f, sizeof(*f));
			close(fd);
			if (n == (ssize_t)sizeof(*f) && f->magic == NCCL_ID_MAGIC) {
				if (f->local_size == (uint32_t)cfg->local_size)
					return 0;
				agent_errf(err, errlen, "NCCL setup: local size %d here, %u at local rank 0 "
					   "(%s)", cfg->local_size, f->local_size, path);
				return -EINVAL;
			}
		}
		if (waited >= cfg->connect_timeout_ms) {
			agent_errf(err, errlen, "NCCL setup: local rank 0 (rank %d) did not publish its "
				   "NCCL unique ids in %s within %u ms", cfg->rank - cfg->local_rank, path,
				   cfg->connect_timeout_ms);
			return -ETIMEDOUT;
		}
		usleep(10000);
	}
}

static int cn_declare(void *ctx, unsigned tensor, size_t bytes, int dtype, char *err,
		      size_t errlen)
{
	struct cnccl *c = ctx;
	size_t esz = tally_dtype_size(dtype);
	struct agent_shard sh;

	if (tensor >= c->maxt) {
		agent_errf(err, errlen, "NCCL: tensor %u beyond %u", tensor, c->maxt);
		return -ENOSPC;
	}
	agent_shard_of(bytes / esz, c->ls, c->lr, &sh);
	c->t[tensor] = (struct nccl_tensor){bytes, sh.shard_elems * esz * c->ls, dtype, NULL};
	return 0;
}

/* What both collectives of a tensor start from: its NCCL type and where they work (the
 * caller's buffer, or the padded scratch). */
static int cn_begin(struct nccl_tensor *t, void *buf, ncclDataType_t *dt, uint8_t **w,
		    char *err, size_t errlen)
{
	cudaError_t e;

	if (nccl_dtype(t->dtype, dt))
		return -EINVAL;
	if (t->bytes == t->padded) {
		*w = buf;
		return 0;
	}
	if (!t->scratch && (e = cudaMalloc(&t->scratch, t->padded)) != cudaSuccess)
		return cuda_fail(err, errlen, "cudaMalloc (padded scratch)", e);
	*w = t->scratch;
	return 0;
}

static int cn_reduce_scatter(void *ctx, unsigned tensor, uint32_t round, const void *buf,
			     void *stream, void *shard, char *err, size_t errlen)
{
	struct cnccl *c = ctx;
	struct nccl_tensor *t = &c->t[tensor];
	cudaStream_t s = (cudaStream_t)stream;
	size_t sb = t->padded / c->ls;
	ncclDataType_t dt;
	ncclResult_t nr;
	cudaError_t e;
	uint8_t *w;
	int rc;

	(void)round;
	if ((rc = cn_begin(t, (void *)buf, &dt, &w, err, errlen)))
		return rc;
	if (w != buf) {
		if ((e = cudaMemcpyAsync(w, buf, t->bytes, cudaMemcpyDeviceToDevice, s)) != cudaSuccess ||
		    (e = cudaMemsetAsync(w + t->bytes, 0, t->padded - t->bytes, s)) != cudaSuccess)
			return cuda_fail(err, errlen, "copy to the padded scratch", e);
	}
	/* in place: recvbuff = sendbuff + rank * recvcount */
	if ((nr = ncclReduceScatter(w, w + c->lr * sb, sb / tally_dtype_size(t->dtype), dt, ncclSum,
				    c->rs, s)) != ncclSuccess)
		return nccl_fail(err, errlen, "ncclReduceScatter", nr);
	if ((e = cudaMemcpyAsync(shard, w + c->lr * sb, sb, cudaMemcpyDeviceToHost, s)) != cudaSuccess ||
	    (e = cudaStreamSynchronize(s)) != cudaSuccess)
		return cuda_fail(err, errlen, "reduce-scatter / copy of the shard to the host", e);
	return 0;
}

static int cn_all_gather(void *ctx, unsigned tensor, uint32_t round, const void *shard,
			 int failed, void *buf, void *stream, char *err, size_t errlen)
{
	struct cnccl *c = ctx;
	struct nccl_tensor *t = &c->t[tensor];
	size_t sb = t->padded / c->ls;
	ncclDataType_t dt;
	ncclResult_t nr;
	cudaError_t e;
	uint8_t *w;
	int rc;

	(void)round, (void)stream;
	if ((e = cudaSetDevice(c->dev)) != cudaSuccess)
		return cuda_fail(err, errlen, "cudaSetDevice (finisher)", e);
	if ((rc = cn_begin(t, buf, &dt, &w, err, errlen)))
		return rc;
	/* a failed shard still takes part (the peers' all-gather needs this rank's call); the
	 * caller reports the failure, the bytes are not used */
	if (!failed && (e = cudaMemcpyAsync(w + c->lr * sb, shard, sb, cudaMemcpyHostToDevice,
					    c->ag_stream)) != cudaSuccess)
		return cuda_fail(err, errlen, "copy of the summed shard to the device", e);
	if ((nr = ncclAllGather(w + c->lr * sb, w, sb / tally_dtype_size(t->dtype), dt, c->ag,
				c->ag_stream)) != ncclSuccess)
		return nccl_fail(err, errlen, "ncclAllGather", nr);
	if (!failed && w != buf &&
	    (e = cudaMemcpyAsync(buf, w, t->bytes, cudaMemcpyDeviceToDevice, c->ag_stream)) != cudaSuccess)
		return cuda_fail(err, errlen, "copy out of the padded scratch", e);
	if ((e = cudaStreamSynchronize(c->ag_stream)) != cudaSuccess)
		return cuda_fail(err, errlen, "all-gather", e);
	return 0;
}

static void cn_destroy(void *ctx)
{
	struct cnccl *c = ctx;

	for (unsigned i = 0; c->t && i < c->maxt; i++)
		if (c->t[i].scratch)
			cudaFree(c->t[i].scratch);
	if (c->rs)
		ncclCommDestroy(c->rs);
	if (c->ag)
		ncclCommDestroy(c->ag);
	if (c->ag_stream)
		cudaStreamDestroy(c->ag_stream);
	free(c->t);
	free(c);
}

static const struct agent_coll_ops cn_ops = {
	.declare = cn_declare,
	.reduce_scatter = cn_reduce_scatter,
	.all_gather = cn_all_gather,
	.destroy = cn_destroy,
};

int agent_coll_nccl_create(const struct tally_agent_cfg *cfg, const char *launch_id,
			   const struct agent_coll_ops **ops, void **ctx, char *err, size_t errlen)
{
	struct cnccl *c = calloc(1, sizeof(*c));
	struct nccl_idfile f = {NCCL_ID_MAGIC, (uint32_t)cfg->local_size, {{{0}}}};
	char path[200] = "";
	ncclResult_t nr;
	cudaError_t e;
	int rc = -ENOMEM;

	if (!c || !(c->t = calloc(cfg->max_tensors, sizeof(*c->t)))) {
		agent_errf(err, errlen, "out of memory");
		goto fail;
	}
	c->lr = (unsigned)cfg->local_rank;
	c->ls = (unsigned)cfg->local_size;
	c->maxt = cfg->max_tensors;
	if ((e = cudaGetDevice(&c->dev)) != cudaSuccess ||
	    (e = cudaStreamCreateWithFlags(&c->ag_stream, cudaStreamNonBlocking)) != cudaSuccess) {
		rc = cuda_fail(err, errlen, "NCCL setup: CUDA device", e);
		goto fail;
	}
	memcpy(path, "/dev/shm", 8);
	agent_shm_name(path + 8, sizeof(path) - 8, "nccl", cfg, launch_id);
	if (c->lr == 0) {
		if ((nr = ncclGetUniqueId(&f.id[0])) != ncclSuccess ||
		    (nr = ncclGetUniqueId(&f.id[1])) != ncclSuccess) {
			rc = nccl_fail(err, errlen, "ncclGetUniqueId", nr);
			goto fail;
		}
		if ((rc = publish_ids(path, &f, err, errlen)))
			goto fail;
	} else if ((rc = await_ids(path, cfg, &f, err, errlen))) {
		goto fail;
	}
	if ((nr = ncclCommInitRank(&c->rs, (int)c->ls, f.id[0], (int)c->lr)) != ncclSuccess ||
	    (nr = ncclCommInitRank(&c->ag, (int)c->ls, f.id[1], (int)c->lr)) != ncclSuccess) {
		rc = nccl_fail(err, errlen, "ncclCommInitRank (local ranks)", nr);
		goto fail;
	}
	if (c->lr == 0)
		unlink(path); /* every local rank has joined */
	*ops = &cn_ops;
	*ctx = c;
	return 0;
fail:
	if (c && c->lr == 0 && path[0])
		unlink(path);
	if (c)
		cn_destroy(c);
	return rc;
}
