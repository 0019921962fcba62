/* SPDX-License-Identifier: Apache-2.0
 * opt_internal.h — constants and per-ISA entry points shared by the optimizer twins. */
#ifndef AGENT_OPT_INTERNAL_H
#define AGENT_OPT_INTERNAL_H

#include "tally_opt.h"

/* Per-step constants, computed in double and rounded to float once, as torch does. */
struct opt_consts {
	float lr, neg_lr, wd, mom, one_m_damp;
	float b1, b2, one_m_b1, one_m_b2, eps;
	float bc1, bc2, neg_step_size, bc2_sqrt, decay;
};

void opt_consts_init(const struct tally_opt_cfg *cfg, struct opt_consts *k);
float opt_lamb_ratio(double pnorm2, double unorm2);

int opt_avx512_supported(void);
void opt_sgd_avx512(const struct opt_consts *k, int first, int nesterov,
		    const struct tally_opt_tensor *t);
void opt_adam_avx512(const struct opt_consts *k, int adamw, const struct tally_opt_tensor *t);
void opt_lamb1_avx512(const struct opt_consts *k, const struct tally_opt_tensor *t,
		      double *pn, double *un);
void opt_lamb2_avx512(const struct opt_consts *k, float ratio, const struct tally_opt_tensor *t);

#endif
