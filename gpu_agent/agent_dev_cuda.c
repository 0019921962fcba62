/* SPDX-License-Identifier: Apache-2.0
 * agent_dev_cuda.c — device staging with the CUDA runtime: pinned host buffers (allocated
 * on the calling thread's device, portable across devices), copies on the caller's stream,
 * waited for so the host or device side may use the bytes right after. */
#include <errno.h>
#include <stddef.h>

#include <cuda_runtime_api.h>

#include "agent_internal.h"

static int fail(char *err, size_t errlen, const char *what, cudaError_t e)
{
	agent_errf(err, errlen, "%s: %s (CUDA error %d)", what, cudaGetErrorString(e), (int)e);
	return e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ? -ENODEV : -EIO;
}

int agent_dev_alloc_host(void **host, size_t bytes, char *err, size_t errlen)
{
	cudaError_t e = cudaHostAlloc(host, bytes, cudaHostAllocPortable);

	return e == cudaSuccess ? 0 : fail(err, errlen, "cudaHostAlloc (pinned staging)", e);
}

void agent_dev_free_host(void *host)
{
	cudaFreeHost(host);
}

int agent_dev_to_host(void *host, const void *dev, size_t bytes, void *stream, char *err,
		      size_t errlen)
{
	cudaError_t e = cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, (cudaStream_t)stream);

	if (e == cudaSuccess)
		e = cudaStreamSynchronize((cudaStream_t)stream);
	return e == cudaSuccess ? 0 : fail(err, errlen, "copy of the gradient to the host", e);
}

int agent_dev_to_device(void *dev, const void *host, size_t bytes, void *stream, char *err,
			size_t errlen)
{
	cudaError_t e = cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, (cudaStream_t)stream);

	if (e == cudaSuccess)
		e = cudaStreamSynchronize((cudaStream_t)stream);
	return e == cudaSuccess ? 0 : fail(err, errlen, "copy of the sum back to the device", e);
}
