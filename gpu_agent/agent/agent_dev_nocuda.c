/* SPDX-License-Identifier: Apache-2.0
 * agent_dev_nocuda.c — device staging in builds without CUDA: device tensors are refused
 * with a message saying why. */
#include <errno.h>
#include <stddef.h>

#include "agent_internal.h"

static const char msg[] = "CUDA tensor given, but this build of libtally_agent has no CUDA "
			  "(configure with nvcc on PATH, -Dcuda=enabled)";

int agent_dev_alloc_host(void **host, size_t bytes, char *err, size_t errlen)
{
	(void)host, (void)bytes;
	agent_errf(err, errlen, "%s", msg);
	return -ENOTSUP;
}

void agent_dev_free_host(void *host)
{
	(void)host;
}

int agent_dev_to_host(void *host, const void *dev, size_t bytes, void *stream, char *err,
		      size_t errlen)
{
	(void)host, (void)dev, (void)bytes, (void)stream;
	agent_errf(err, errlen, "%s", msg);
	return -ENOTSUP;
}

int agent_dev_to_device(void *dev, const void *host, size_t bytes, void *stream, char *err,
			size_t errlen)
{
	(void)host, (void)dev, (void)bytes, (void)stream;
	agent_errf(err, errlen, "%s", msg);
	return -ENOTSUP;
}
