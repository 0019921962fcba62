/* SPDX-License-Identifier: Apache-2.0
 * tally_opt.h — fused multi-tensor optimizer updates: one call updates a list of f32
 * tensors. CUDA kernels (tally_opt_step_cuda, built with CUDA only) and CPU twins
 * (tally_opt_step_cpu: AVX-512 where the CPU has it, scalar otherwise) do the same math.
 *
 * The math is torch.optim's (single-tensor path, maximize=False, amsgrad=False):
 *  SGD:   d = g + wd*p; if momentum: buf = first ? d : momentum*buf + (1-dampening)*d;
 *         d = nesterov ? d + momentum*buf : buf;  p -= lr*d
 *  Adam:  g += wd*p; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g;
 *         p -= (lr/(1-b1^t)) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
 *  AdamW: p *= 1 - lr*wd, then Adam without the wd term.
 *  LAMB (not in torch.optim; the apex/DeepSpeed per-tensor form, no global grad clipping):
 *         m, v as Adam; u = (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps) + wd*p;
 *         trust = (|p| > 0 && |u| > 0) ? |p|/|u| : 1;  p -= lr*trust*u
 * `step` is the 1-based step number after this update (torch's state['step']). SGD's
 * `first` says the momentum buffer is not yet initialised (torch: buf is None).
 */
#ifndef TALLY_OPT_H
#define TALLY_OPT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum tally_opt_kind {
	TALLY_OPT_SGD = 0,
	TALLY_OPT_ADAM = 1,
	TALLY_OPT_ADAMW = 2,
	TALLY_OPT_LAMB = 3,
	TALLY_OPT_COUNT
};

struct tally_opt_cfg {
	int kind;            /* enum tally_opt_kind */
	float lr;
	float weight_decay;
	/* SGD */
	float momentum;
	float dampening;
	int nesterov;        /* needs momentum > 0 and dampening == 0 (as torch) */
	int first;           /* SGD: momentum buffers are uninitialised (set from d) */
	/* Adam / AdamW / LAMB */
	float beta1, beta2, eps;
	uint64_t step;       /* >= 1 */
};

/* One tensor of the list. `m` is SGD's momentum buffer (unused without momentum) or
 * Adam's/LAMB's first moment; `v` the second moment (unused by SGD). All hold n floats. */
struct tally_opt_tensor {
	float *param;
	const float *grad;
	float *m;
	float *v;
	size_t n;
};

/* Defaults: torch's (lr 1e-3, betas 0.9/0.999, eps 1e-8; SGD: no momentum). */
void tally_opt_cfg_defaults(struct tally_opt_cfg *cfg, int kind);
/* 0, or -EINVAL with the reason in *why (a static string) when the configuration is one
 * torch would reject (negative lr, nesterov without momentum, betas outside [0,1), ...). */
int tally_opt_cfg_check(const struct tally_opt_cfg *cfg, const char **why);

/* CPU twin. 0, or -EINVAL (bad cfg, NULL pointers where needed): nothing is changed then. */
int tally_opt_step_cpu(const struct tally_opt_cfg *cfg, const struct tally_opt_tensor *t,
		       size_t ntensors);
/* Force the scalar path (1) or let the CPU decide (0); returns the previous setting. Tests. */
int tally_opt_force_scalar(int on);
/* "avx512" or "scalar": the path tally_opt_step_cpu takes. */
const char *tally_opt_cpu_path(void);

/* CUDA kernels (pointers are device pointers; `stream` a cudaStream_t or NULL). Returns 0,
 * -EINVAL, -ENODEV (no usable GPU) or -EIO (a CUDA error; text in tally_opt_cuda_error()).
 * In builds without CUDA it returns -ENOTSUP. */
int tally_opt_step_cuda(const struct tally_opt_cfg *cfg, const struct tally_opt_tensor *t,
			size_t ntensors, void *stream);
const char *tally_opt_cuda_error(void);
/* 1 when this build has the CUDA kernels. */
int tally_opt_have_cuda(void);

#ifdef __cplusplus
}
#endif
#endif
