/* SPDX-License-Identifier: Apache-2.0
 * agent_dev_cuda.c — device staging with the CUDA runtime: pinned host buffers on the NUMA
 * node of the calling thread's device (registered, portable across devices; plain
 * cudaHostAlloc where the node is unknown or registration fails), copies on the caller's
 * stream, waited for so the host or device side may use the bytes right after. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "agent_internal.h"

static int fail(char *err, size_t errlen, const char *what, cudaError_t e)
{
	agent_errf(err, errlen, "%s: %s (CUDA error %d)", what, cudaGetErrorString(e), (int)e);
	return e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ? -ENODEV : -EIO;
}

/* The current device's node, or -1 (unknown: single-node machine, old firmware). */
static int dev_node(void)
{
	char busid[32];
	int dev;

	if (cudaGetDevice(&dev) != cudaSuccess ||
	    cudaDeviceGetPCIBusId(busid, (int)sizeof(busid), dev) != cudaSuccess)
		return -1;
	int node = agent_numa_node_of_pci("/sys", busid);

	return node < 0 ? -1 : node;
}

int agent_dev_alloc_host(void **host, size_t bytes, char *err, size_t errlen)
{
	int node = dev_node();
	cudaError_t e;
	void *p;

	if (node >= 0 && (p = agent_numa_alloc(bytes, node, NULL, 0))) {
		if (cudaHostRegister(p, bytes, cudaHostRegisterPortable) == cudaSuccess) {
			*host = p;
			return 0;
		}
		(void)cudaGetLastError(); /* not sticky; fall back below */
		agent_numa_free(p);
	}
	e = cudaHostAlloc(&p, AGENT_NUMA_HDR + bytes, cudaHostAllocPortable);
	if (e != cudaSuccess)
		return fail(err, errlen, "cudaHostAlloc (pinned staging)", e);
	*host = (uint8_t *)p + AGENT_NUMA_HDR;
	agent_numa_set_kind(*host, AGENT_HOST_CUDA, AGENT_NUMA_HDR + bytes);
	return 0;
}

void agent_dev_free_host(void *host)
{
	if (!host)
		return;
	switch (agent_numa_kind(host, NULL)) {
	case AGENT_HOST_NUMA:
		cudaHostUnregister(host);
		agent_numa_free(host);
		break;
	case AGENT_HOST_CUDA:
		cudaFreeHost((uint8_t *)host - AGENT_NUMA_HDR);
		break;
	default:
		break; /* not ours: leaking beats freeing what another allocator owns */
	}
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
