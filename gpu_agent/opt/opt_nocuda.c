/* SPDX-License-Identifier: Apache-2.0
 * opt_nocuda.c — the CUDA entry points of tally_opt.h in builds without CUDA. */
#include <errno.h>
#include <stddef.h>

#include "tally_opt.h"

int tally_opt_step_cuda(const struct tally_opt_cfg *cfg, const struct tally_opt_tensor *t,
			size_t ntensors, void *stream)
{
	(void)cfg, (void)t, (void)ntensors, (void)stream;
	return -ENOTSUP;
}

const char *tally_opt_cuda_error(void)
{
	return "this build of Tally has no CUDA (nvcc was not found at configure time)";
}

int tally_opt_have_cuda(void)
{
	return 0;
}
