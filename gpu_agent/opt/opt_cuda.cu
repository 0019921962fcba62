/* SPDX-License-Identifier: Apache-2.0
 * opt_cuda.cu — fused multi-tensor optimizer kernels (tally_opt.h). One launch updates up
 * to MT_TENSORS tensors (apex-style metadata passed as a __grid_constant__ kernel argument,
 * read in place); each block takes one chunk of one tensor, found by a binary search over
 * the tensors' first blocks. 16-byte-aligned tensors move as float4 (the loads that keep an
 * H100's HBM busy), the rest element by element. Arithmetic uses the _rn intrinsics so nvcc
 * cannot contract into FMA: the results match the CPU twins element for element (LAMB's
 * norms are summed in another order, in double).
 */
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include <cuda_runtime.h>

extern "C" {
#include "opt_internal.h"
#include "tally_opt.h"
}

#define MT_TENSORS 48
#define MT_THREADS 256
#define MT_CHUNK_MIN 1024   /* elements per block, a multiple of 4 */
#define MT_CHUNK_MAX 16384
#define MT_WAVES 16         /* aim for this many blocks per SM in a launch */

struct mt_meta {
	float *p[MT_TENSORS];
	const float *g[MT_TENSORS];
	float *m[MT_TENSORS];
	float *v[MT_TENSORS];
	long long n[MT_TENSORS];
	int gidx[MT_TENSORS];              /* index in the caller's list (LAMB norms) */
	unsigned blk0[MT_TENSORS + 1];     /* first block of each tensor; [nten] = blocks */
	unsigned long long vec;            /* bit t: all of tensor t's arrays 16-byte aligned */
	int nten;
	int chunk;                         /* elements per block */
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

/* The per-element updates. WP/WM/WV: which arrays the op writes back; RED: it sums p^2 and
 * u^2 for the LAMB norms; begin() runs once per block with the block's tensor. */
struct op_sgd {
	enum { WP = 1, WM = 1, WV = 0, RED = 0 };
	opt_consts k;
	int first, nesterov;
	__device__ void begin(const mt_meta &, int, const double *) {}
	__device__ void operator()(float &p, float d, float &m, float &) const
	{
		if (k.wd != 0.0f)
			d = fadd(d, fmul(k.wd, p));
		if (k.mom != 0.0f) {
			float b = first ? d : fadd(fmul(m, k.mom), fmul(d, k.one_m_damp));

			m = b;
			d = nesterov ? fadd(d, fmul(b, k.mom)) : b;
		}
		p = fadd(p, fmul(d, k.neg_lr));
	}
};

struct op_adam {
	enum { WP = 1, WM = 1, WV = 1, RED = 0 };
	opt_consts k;
	int adamw;
	__device__ void begin(const mt_meta &, int, const double *) {}
	__device__ void operator()(float &p, float g, float &m, float &v) const
	{
		if (adamw)
			p = fmul(p, k.decay);
		else if (k.wd != 0.0f)
			g = fadd(g, fmul(k.wd, p));
		m = fadd(fmul(m, k.b1), fmul(g, k.one_m_b1));
		v = fadd(fmul(v, k.b2), fmul(fmul(g, g), k.one_m_b2));
		float denom = fadd(fdiv(__fsqrt_rn(v), k.bc2_sqrt), k.eps);

		p = fadd(p, fmul(k.neg_step_size, fdiv(m, denom)));
	}
};

__device__ __forceinline__ float lamb_u(const opt_consts &k, float m, float v, float p)
{
	return fadd(fdiv(fdiv(m, k.bc1), fadd(__fsqrt_rn(fdiv(v, k.bc2)), k.eps)), fmul(k.wd, p));
}

/* Pass 1: moments, and per-tensor sums of p^2 and u^2. */
struct op_lamb1 {
	enum { WP = 0, WM = 1, WV = 1, RED = 1 };
	opt_consts k;
	double ap, au;
	__device__ void begin(const mt_meta &, int, const double *) { ap = au = 0.0; }
	__device__ void operator()(float &p, float g, float &m, float &v)
	{
		m = fadd(fmul(m, k.b1), fmul(g, k.one_m_b1));
		v = fadd(fmul(v, k.b2), fmul(fmul(g, g), k.one_m_b2));
		float u = lamb_u(k, m, v, p);

		ap += (double)p * p;
		au += (double)u * u;
	}
};

/* Pass 2: the trust-ratio step, moments read only. */
struct op_lamb2 {
	enum { WP = 1, WM = 0, WV = 0, RED = 0 };
	opt_consts k;
	float s;
	__device__ void begin(const mt_meta &meta, int t, const double *norms)
	{
		double pn = sqrt(norms[2 * meta.gidx[t]]), un = sqrt(norms[2 * meta.gidx[t] + 1]);
		float ratio = (pn > 0.0 && un > 0.0) ? (float)(pn / un) : 1.0f;

		s = -fmul(k.lr, ratio);
	}
	__device__ void operator()(float &p, float, float &m, float &v) const
	{
		p = fadd(p, fmul(s, lamb_u(k, m, v, p)));
	}
};

__device__ __forceinline__ int tensor_of(const mt_meta &meta, unsigned b)
{
	int lo = 0, hi = meta.nten - 1;

	while (lo < hi) {
		int mid = (lo + hi + 1) >> 1;

		if (meta.blk0[mid] <= b)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

/* One block's sums into the tensor's two norm slots (one atomic each). */
__device__ void block_norms(double ap, double au, double *out)
{
	__shared__ double sp[MT_THREADS / 32], su[MT_THREADS / 32];

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
		atomicAdd(&out[0], ap);
		atomicAdd(&out[1], au);
	}
}

template <class Op> __device__ __forceinline__ void apply4(Op &op, float4 &p, float4 g, float4 &m, float4 &v)
{
	op(p.x, g.x, m.x, v.x);
	op(p.y, g.y, m.y, v.y);
	op(p.z, g.z, m.z, v.z);
	op(p.w, g.w, m.w, v.w);
}

template <class Op> __global__ void __launch_bounds__(MT_THREADS)
k_step(const __grid_constant__ mt_meta meta, Op op, double *norms)
{
	int t = tensor_of(meta, blockIdx.x);
	long long start = (long long)(blockIdx.x - meta.blk0[t]) * meta.chunk;
	long long end = min(start + (long long)meta.chunk, meta.n[t]);
	float *P = meta.p[t], *M = meta.m[t], *V = meta.v[t];
	const float *G = meta.g[t];

	op.begin(meta, t, norms);
	if (meta.vec >> t & 1) {
		long long e4 = end & ~3LL; /* start is a multiple of 4: chunks are */
		float4 z = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

		for (long long i = start + 4 * threadIdx.x; i < e4; i += 4 * blockDim.x) {
			float4 p = *(const float4 *)(P + i), g = *(const float4 *)(G + i);
			float4 m = M ? *(const float4 *)(M + i) : z, v = V ? *(const float4 *)(V + i) : z;

			apply4(op, p, g, m, v);
			if (Op::WP)
				*(float4 *)(P + i) = p;
			if (Op::WM && M)
				*(float4 *)(M + i) = m;
			if (Op::WV && V)
				*(float4 *)(V + i) = v;
		}
		start = e4;
	}
	for (long long i = start + threadIdx.x; i < end; i += blockDim.x) {
		float p = P[i], m = M ? M[i] : 0.0f, v = V ? V[i] : 0.0f;

		op(p, G[i], m, v);
		if (Op::WP)
			P[i] = p;
		if (Op::WM && M)
			M[i] = m;
		if (Op::WV && V)
			V[i] = v;
	}
	if constexpr (Op::RED)
		block_norms(op.ap, op.au, norms + 2 * meta.gidx[t]);
}

static int mt_launch(const tally_opt_cfg *cfg, const opt_consts &k, const mt_meta &meta, cudaStream_t s,
		     double *norms, int pass)
{
	unsigned nblk = meta.blk0[meta.nten];

	switch (cfg->kind) {
	case TALLY_OPT_SGD:
		k_step<<<nblk, MT_THREADS, 0, s>>>(meta, op_sgd{k, cfg->first, cfg->nesterov}, norms);
		break;
	case TALLY_OPT_ADAM:
	case TALLY_OPT_ADAMW:
		k_step<<<nblk, MT_THREADS, 0, s>>>(meta, op_adam{k, cfg->kind == TALLY_OPT_ADAMW}, norms);
		break;
	default:
		if (pass == 1)
			k_step<<<nblk, MT_THREADS, 0, s>>>(meta, op_lamb1{k, 0.0, 0.0}, norms);
		else
			k_step<<<nblk, MT_THREADS, 0, s>>>(meta, op_lamb2{k, 0.0f}, norms);
	}
	cudaError_t e = cudaGetLastError();
	return e == cudaSuccess ? 0 : cuda_fail("kernel launch", e);
}

static int aligned16(const void *p)
{
	return ((uintptr_t)p & 15) == 0;
}

/* Elements per block for a launch of `elems` elements: enough blocks for MT_WAVES per SM
 * (small steps still fill the GPU), chunks no smaller than MT_CHUNK_MIN (block overhead). */
static int mt_chunk(long long elems, int sms)
{
	long long c = elems / ((long long)sms * MT_WAVES);

	c = (c + MT_CHUNK_MIN - 1) / MT_CHUNK_MIN * MT_CHUNK_MIN;
	return (int)(c < MT_CHUNK_MIN ? MT_CHUNK_MIN : c > MT_CHUNK_MAX ? MT_CHUNK_MAX : c);
}

/* Launches the tensors t[from..to) (non-empty ones, at most MT_TENSORS) as one grid. */
static int mt_group(const tally_opt_cfg *cfg, const opt_consts &k, const tally_opt_tensor *t, size_t from,
		    size_t to, int sms, cudaStream_t s, double *norms, int pass)
{
	mt_meta meta;
	long long elems = 0, blocks = 0;

	memset(&meta, 0, sizeof(meta));
	for (size_t j = from; j < to; j++)
		elems += (long long)t[j].n;
	meta.chunk = mt_chunk(elems, sms);
	for (size_t j = from; j < to; j++) {
		if (t[j].n == 0)
			continue;
		int slot = meta.nten++;

		meta.p[slot] = t[j].param;
		meta.g[slot] = t[j].grad;
		meta.m[slot] = t[j].m;
		meta.v[slot] = t[j].v;
		meta.n[slot] = (long long)t[j].n;
		meta.gidx[slot] = (int)j;
		meta.blk0[slot] = (unsigned)blocks;
		blocks += ((long long)t[j].n + meta.chunk - 1) / meta.chunk;
		if (aligned16(t[j].param) && aligned16(t[j].grad) && aligned16(t[j].m) && aligned16(t[j].v))
			meta.vec |= 1ull << slot;
	}
	meta.blk0[meta.nten] = (unsigned)blocks;
	return meta.nten ? mt_launch(cfg, k, meta, s, norms, pass) : 0;
}

/* Walks the tensor list in groups of at most MT_TENSORS non-empty tensors. */
static int launch_all(const tally_opt_cfg *cfg, const opt_consts &k, const tally_opt_tensor *t, size_t nt,
		      int sms, cudaStream_t s, double *norms, int pass)
{
	size_t from = 0;
	int nten = 0, rc;

	for (size_t j = 0; j < nt; j++) {
		if (t[j].n == 0)
			continue;
		if (nten == MT_TENSORS) {
			if ((rc = mt_group(cfg, k, t, from, j, sms, s, norms, pass)))
				return rc;
			from = j;
			nten = 0;
		}
		nten++;
	}
	return mt_group(cfg, k, t, from, nt, sms, s, norms, pass);
}

static int check_tensors(const tally_opt_cfg *cfg, const tally_opt_tensor *t, size_t ntensors)
{
	if (tally_opt_cfg_check(cfg, NULL) || (ntensors && !t))
		return -EINVAL;
	for (size_t j = 0; j < ntensors; j++)
		if (t[j].n && (!t[j].param || !t[j].grad ||
			       ((cfg->kind != TALLY_OPT_SGD || cfg->momentum != 0.0f) && !t[j].m) ||
			       (cfg->kind != TALLY_OPT_SGD && !t[j].v) ||
			       /* a block index must fit in 32 bits at the largest chunk */
			       t[j].n / MT_CHUNK_MAX >= (size_t)INT_MAX / MT_TENSORS))
			return -EINVAL;
	return 0;
}

extern "C" int tally_opt_step_cuda(const struct tally_opt_cfg *cfg, const struct tally_opt_tensor *t,
				   size_t ntensors, void *stream)
{
	cudaStream_t s = (cudaStream_t)stream;
	struct opt_consts k;
	double *norms = NULL;
	int count = 0, dev = 0, sms = 0, rc;
	cudaError_t e;

	if ((rc = check_tensors(cfg, t, ntensors)))
		return rc;
	e = cudaGetDeviceCount(&count);
	if (e != cudaSuccess || count == 0)
		return cuda_fail("cudaGetDeviceCount", e != cudaSuccess ? e : cudaErrorNoDevice);
	if ((e = cudaGetDevice(&dev)) != cudaSuccess ||
	    (e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess)
		return cuda_fail("cudaDeviceGetAttribute (multiprocessors)", e);
	opt_consts_init(cfg, &k);
	if (cfg->kind != TALLY_OPT_LAMB)
		return launch_all(cfg, k, t, ntensors, sms, s, NULL, 0);
	e = cudaMallocAsync((void **)&norms, 2 * ntensors * sizeof(double) + 16, s);
	if (e != cudaSuccess)
		return cuda_fail("cudaMallocAsync", e);
	e = cudaMemsetAsync(norms, 0, 2 * ntensors * sizeof(double) + 16, s);
	rc = e != cudaSuccess ? cuda_fail("cudaMemsetAsync", e) : 0;
	if (!rc)
		rc = launch_all(cfg, k, t, ntensors, sms, s, norms, 1);
	if (!rc)
		rc = launch_all(cfg, k, t, ntensors, sms, s, norms, 2);
	cudaFreeAsync(norms, s);
	return rc;
}
