/* SPDX-License-Identifier: Apache-2.0
 * opt_cuda.cu — fused multi-tensor optimizer kernels (tally_opt.h). One launch updates up
 * to MT_TENSORS tensors in MT_BLOCKS chunks (apex-style metadata passed as a kernel
 * argument). Arithmetic uses the _rn intrinsics so nvcc cannot contract into FMA: the
 * results match the CPU twins element for element (LAMB's norms are summed in another
 * order, in double).
 */
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include <cuda_runtime.h>

extern "C" {
#include "opt_internal.h"
#include "tally_opt.h"
}

#define MT_TENSORS 36
#define MT_BLOCKS 320
#define MT_CHUNK 32768
#define MT_THREADS 512

struct mt_meta {
	float *p[MT_TENSORS];
	const float *g[MT_TENSORS];
	float *m[MT_TENSORS];
	float *v[MT_TENSORS];
	long long n[MT_TENSORS];
	int gidx[MT_TENSORS];            /* index in the caller's list (LAMB norms) */
	unsigned char tidx[MT_BLOCKS];
	int chunk[MT_BLOCKS];
};

static char cuda_err[256];

extern "C" const char *tally_opt_cuda_error(void)
{
	return cuda_err;
}

extern "C" int tally_opt_have_cuda(void)
{
	return 1;
}

static int cuda_fail(const char *what, cudaError_t e)
{
	snprintf(cuda_err, sizeof(cuda_err), "%s: %s (%d)", what, cudaGetErrorString(e), (int)e);
	return e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ? -ENODEV : -EIO;
}

__device__ __forceinline__ float fadd(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float fmul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float fdiv(float a, float b) { return __fdiv_rn(a, b); }

__global__ void k_sgd(mt_meta meta, struct opt_consts k, int first, int nesterov)
{
	int t = meta.tidx[blockIdx.x];
	long long start = (long long)meta.chunk[blockIdx.x] * MT_CHUNK;
	long long end = min(start + MT_CHUNK, meta.n[t]);
	float *P = meta.p[t], *M = meta.m[t];
	const float *G = meta.g[t];

	for (long long i = start + threadIdx.x; i < end; i += blockDim.x) {
		float p = P[i], d = G[i];

		if (k.wd != 0.0f)
			d = fadd(d, fmul(k.wd, p));
		if (k.mom != 0.0f) {
			float b = first ? d : fadd(fmul(M[i], k.mom), fmul(d, k.one_m_damp));

			M[i] = b;
			d = nesterov ? fadd(d, fmul(b, k.mom)) : b;
		}
		P[i] = fadd(p, fmul(d, k.neg_lr));
	}
}

__global__ void k_adam(mt_meta meta, struct opt_consts k, int adamw)
{
	int t = meta.tidx[blockIdx.x];
	long long start = (long long)meta.chunk[blockIdx.x] * MT_CHUNK;
	long long end = min(start + MT_CHUNK, meta.n[t]);
	float *P = meta.p[t], *M = meta.m[t], *V = meta.v[t];
	const float *G = meta.g[t];

	for (long long i = start + threadIdx.x; i < end; i += blockDim.x) {
		float p = P[i], g = G[i];

		if (adamw)
			p = fmul(p, k.decay);
		else if (k.wd != 0.0f)
			g = fadd(g, fmul(k.wd, p));
		float m = fadd(fmul(M[i], k.b1), fmul(g, k.one_m_b1));
		float v = fadd(fmul(V[i], k.b2), fmul(fmul(g, g), k.one_m_b2));
		float denom = fadd(fdiv(__fsqrt_rn(v), k.bc2_sqrt), k.eps);

		M[i] = m;
		V[i] = v;
		P[i] = fadd(p, fmul(k.neg_step_size, fdiv(m, denom)));
	}
}

__device__ __forceinline__ float lamb_u(const struct opt_consts &k, float m, float v, float p)
{
	return fadd(fdiv(fdiv(m, k.bc1), fadd(__fsqrt_rn(fdiv(v, k.bc2)), k.eps)), fmul(k.wd, p));
}

/* Pass 1: moments, and per-tensor sums of p^2 and u^2 (block reduction, one atomic each). */
__global__ void k_lamb1(mt_meta meta, struct opt_consts k, double *norms)
{
	__shared__ double sp[MT_THREADS / 32], su[MT_THREADS / 32];
	int t = meta.tidx[blockIdx.x];
	long long start = (long long)meta.chunk[blockIdx.x] * MT_CHUNK;
	long long end = min(start + MT_CHUNK, meta.n[t]);
	float *P = meta.p[t], *M = meta.m[t], *V = meta.v[t];
	const float *G = meta.g[t];
	double ap = 0.0, au = 0.0;

	for (long long i = start + threadIdx.x; i < end; i += blockDim.x) {
		float p = P[i], g = G[i];
		float m = fadd(fmul(M[i], k.b1), fmul(g, k.one_m_b1));
		float v = fadd(fmul(V[i], k.b2), fmul(fmul(g, g), k.one_m_b2));
		float u = lamb_u(k, m, v, p);

		M[i] = m;
		V[i] = v;
		ap += (double)p * p;
		au += (double)u * u;
	}
	for (int o = 16; o > 0; o >>= 1) {
		ap += __shfl_down_sync(0xffffffffu, ap, o);
		au += __shfl_down_sync(0xffffffffu, au, o);
	}
	if ((threadIdx.x & 31) == 0) {
		sp[threadIdx.x >> 5] = ap;
		su[threadIdx.x >> 5] = au;
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		for (int w = 1; w < (int)(blockDim.x >> 5); w++) {
			ap += sp[w];
			au += su[w];
		}
		atomicAdd(&norms[2 * (meta.gidx[t])], ap);
		atomicAdd(&norms[2 * (meta.gidx[t]) + 1], au);
	}
}

__global__ void k_lamb2(mt_meta meta, struct opt_consts k, const double *norms)
{
	int t = meta.tidx[blockIdx.x];
	long long start = (long long)meta.chunk[blockIdx.x] * MT_CHUNK;
	long long end = min(start + MT_CHUNK, meta.n[t]);
	float *P = meta.p[t];
	const float *M = meta.m[t], *V = meta.v[t];
	double pn = sqrt(norms[2 * (meta.gidx[t])]), un = sqrt(norms[2 * (meta.gidx[t]) + 1]);
	float ratio = (pn > 0.0 && un > 0.0) ? (float)(pn / un) : 1.0f;
	float s = -fmul(k.lr, ratio);

	for (long long i = start + threadIdx.x; i < end; i += blockDim.x) {
		float p = P[i];

		P[i] = fadd(p, fmul(s, lamb_u(k, M[i], V[i], p)));
	}
}

static int launch(const tally_opt_cfg *cfg, const struct opt_consts &k, const mt_meta &meta, int nblk,
		  cudaStream_t s, double *norms, int pass)
{
	switch (cfg->kind) {
	case TALLY_OPT_SGD:
		k_sgd<<<nblk, MT_THREADS, 0, s>>>(meta, k, cfg->first, cfg->nesterov);
		break;
	case TALLY_OPT_ADAM:
	case TALLY_OPT_ADAMW:
		k_adam<<<nblk, MT_THREADS, 0, s>>>(meta, k, cfg->kind == TALLY_OPT_ADAMW);
		break;
	default:
		if (pass == 1)
			k_lamb1<<<nblk, MT_THREADS, 0, s>>>(meta, k, norms);
		else
			k_lamb2<<<nblk, MT_THREADS, 0, s>>>(meta, k, norms);
	}
	cudaError_t e = cudaGetLastError();
	return e == cudaSuccess ? 0 : cuda_fail("kernel launch", e);
}

/* Walks the tensor list in launches of at most MT_TENSORS tensors / MT_BLOCKS chunks. */
static int launch_all(const tally_opt_cfg *cfg, const struct opt_consts &k, const tally_opt_tensor *t,
		      size_t nt, cudaStream_t s, double *norms, int pass)
{
	mt_meta meta;
	int nten = 0, nblk = 0, rc;

	memset(&meta, 0, sizeof(meta));
	for (size_t j = 0; j < nt; j++) {
		if (t[j].n == 0)
			continue;
		if (nten == MT_TENSORS) {
			if ((rc = launch(cfg, k, meta, nblk, s, norms, pass)))
				return rc;
			nten = nblk = 0;
		}
		int slot = nten++;
		meta.p[slot] = t[j].param;
		meta.g[slot] = t[j].grad;
		meta.m[slot] = t[j].m;
		meta.v[slot] = t[j].v;
		meta.n[slot] = (long long)t[j].n;
		meta.gidx[slot] = (int)j;
		long long nchunks = ((long long)t[j].n + MT_CHUNK - 1) / MT_CHUNK;
		for (long long c = 0; c < nchunks; c++) {
			if (nblk == MT_BLOCKS) {
				if ((rc = launch(cfg, k, meta, nblk, s, norms, pass)))
					return rc;
				nblk = 0;
				/* the tensor continues in the next launch as its only slot so far */
				meta.p[0] = meta.p[slot];
				meta.g[0] = meta.g[slot];
				meta.m[0] = meta.m[slot];
				meta.v[0] = meta.v[slot];
				meta.n[0] = meta.n[slot];
				meta.gidx[0] = meta.gidx[slot];
				slot = 0;
				nten = 1;
			}
			meta.tidx[nblk] = (unsigned char)slot;
			meta.chunk[nblk] = (int)c;
			nblk++;
		}
	}
	return nblk ? launch(cfg, k, meta, nblk, s, norms, pass) : 0;
}

extern "C" int tally_opt_step_cuda(const struct tally_opt_cfg *cfg, const struct tally_opt_tensor *t,
				   size_t ntensors, void *stream)
{
	cudaStream_t s = (cudaStream_t)stream;
	struct opt_consts k;
	double *norms = NULL;
	int count = 0, rc;
	cudaError_t e;

	if (tally_opt_cfg_check(cfg, NULL) || (ntensors && !t))
		return -EINVAL;
	for (size_t j = 0; j < ntensors; j++)
		if (t[j].n && (!t[j].param || !t[j].grad ||
			       ((cfg->kind != TALLY_OPT_SGD || cfg->momentum != 0.0f) && !t[j].m) ||
			       (cfg->kind != TALLY_OPT_SGD && !t[j].v) ||
			       t[j].n > (size_t)MT_CHUNK * 0x7fffffff))
			return -EINVAL;
	e = cudaGetDeviceCount(&count);
	if (e != cudaSuccess || count == 0)
		return cuda_fail("cudaGetDeviceCount", e != cudaSuccess ? e : cudaErrorNoDevice);
	opt_consts_init(cfg, &k);
	if (cfg->kind != TALLY_OPT_LAMB)
		return launch_all(cfg, k, t, ntensors, s, NULL, 0);
	e = cudaMallocAsync((void **)&norms, 2 * ntensors * sizeof(double) + 16, s);
	if (e != cudaSuccess)
		return cuda_fail("cudaMallocAsync", e);
	e = cudaMemsetAsync(norms, 0, 2 * ntensors * sizeof(double) + 16, s);
	rc = e != cudaSuccess ? cuda_fail("cudaMemsetAsync", e) : 0;
	if (!rc)
		rc = launch_all(cfg, k, t, ntensors, s, norms, 1);
	if (!rc)
		rc = launch_all(cfg, k, t, ntensors, s, norms, 2);
	cudaFreeAsync(norms, s);
	return rc;
}
