/* SPDX-License-Identifier: Apache-2.0
 * opt_cpu.c — CPU twins of the fused optimizer kernels (tally_opt.h): scalar reference and
 * an AVX-512 path that does the same float operations in the same order (no FMA), so both
 * paths give the same bits per element. LAMB's two norms are summed in double in a
 * different order per path (sequential vs 8 lanes), so its trust ratio may differ in the
 * last bits.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>

#include "opt_internal.h"
#include "tally_opt.h"

static int force_scalar;

void tally_opt_cfg_defaults(struct tally_opt_cfg *cfg, int kind)
{
	*cfg = (struct tally_opt_cfg){
		.kind = kind, .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
		.step = 1, .first = 1,
	};
	if (kind == TALLY_OPT_SGD)
		cfg->lr = 1e-2f;
	if (kind == TALLY_OPT_ADAMW)
		cfg->weight_decay = 1e-2f;
}

int tally_opt_cfg_check(const struct tally_opt_cfg *cfg, const char **why)
{
	const char *w = NULL;

	if (!cfg)
		w = "no configuration";
	else if (cfg->kind < 0 || cfg->kind >= TALLY_OPT_COUNT)
		w = "unknown optimizer kind";
	else if (!(cfg->lr >= 0.0f))
		w = "invalid learning rate (must be >= 0)";
	else if (!(cfg->weight_decay >= 0.0f))
		w = "invalid weight_decay (must be >= 0)";
	else if (cfg->kind == TALLY_OPT_SGD && !(cfg->momentum >= 0.0f))
		w = "invalid momentum (must be >= 0)";
	else if (cfg->kind == TALLY_OPT_SGD && cfg->nesterov &&
		 (cfg->momentum <= 0.0f || cfg->dampening != 0.0f))
		w = "Nesterov momentum requires a momentum and zero dampening";
	else if (cfg->kind != TALLY_OPT_SGD &&
		 (!(cfg->beta1 >= 0.0f && cfg->beta1 < 1.0f) ||
		  !(cfg->beta2 >= 0.0f && cfg->beta2 < 1.0f)))
		w = "invalid betas (each must be in [0, 1))";
	else if (cfg->kind != TALLY_OPT_SGD && !(cfg->eps >= 0.0f))
		w = "invalid eps (must be >= 0)";
	else if (cfg->kind != TALLY_OPT_SGD && cfg->step < 1)
		w = "step must be >= 1 (the step number after this update)";
	if (why)
		*why = w;
	return w ? -EINVAL : 0;
}

void opt_consts_init(const struct tally_opt_cfg *cfg, struct opt_consts *k)
{
	/* Python computes these in double and torch casts them to float at the kernel. */
	double lr = cfg->lr, wd = cfg->weight_decay, b1 = cfg->beta1, b2 = cfg->beta2;
	double t = (double)cfg->step;

	k->lr = cfg->lr;
	k->neg_lr = (float)-lr;
	k->wd = cfg->weight_decay;
	k->mom = cfg->momentum;
	k->one_m_damp = (float)(1.0 - (double)cfg->dampening);
	k->b1 = cfg->beta1;
	k->b2 = cfg->beta2;
	k->one_m_b1 = (float)(1.0 - b1);
	k->one_m_b2 = (float)(1.0 - b2);
	k->eps = cfg->eps;
	k->bc1 = (float)(1.0 - pow(b1, t));
	k->bc2 = (float)(1.0 - pow(b2, t));
	k->neg_step_size = (float)-(lr / (1.0 - pow(b1, t)));
	k->bc2_sqrt = (float)sqrt(1.0 - pow(b2, t));
	k->decay = (float)(1.0 - lr * wd);
}

/* ---- scalar reference ---- */

static void sgd_scalar(const struct opt_consts *k, int first, int nesterov,
		       const struct tally_opt_tensor *t)
{
	for (size_t i = 0; i < t->n; i++) {
		float p = t->param[i], d = t->grad[i];

		if (k->wd != 0.0f)
			d = d + k->wd * p;
		if (k->mom != 0.0f) {
			float b = first ? d : t->m[i] * k->mom + d * k->one_m_damp;

			t->m[i] = b;
			d = nesterov ? d + b * k->mom : b;
		}
		t->param[i] = p + d * k->neg_lr;
	}
}

static void adam_scalar(const struct opt_consts *k, int adamw, const struct tally_opt_tensor *t)
{
	for (size_t i = 0; i < t->n; i++) {
		float p = t->param[i], g = t->grad[i];

		if (adamw)
			p = p * k->decay;
		else if (k->wd != 0.0f)
			g = g + k->wd * p;
		float m = t->m[i] * k->b1 + g * k->one_m_b1;
		float v = t->v[i] * k->b2 + (g * g) * k->one_m_b2;
		float denom = sqrtf(v) / k->bc2_sqrt + k->eps;

		t->m[i] = m;
		t->v[i] = v;
		t->param[i] = p + k->neg_step_size * (m / denom);
	}
}

/* LAMB pass 1: moments, and the squared norms of p and of the update u. */
static void lamb1_scalar(const struct opt_consts *k, const struct tally_opt_tensor *t,
			 double *pn, double *un)
{
	double sp = 0.0, su = 0.0;

	for (size_t i = 0; i < t->n; i++) {
		float p = t->param[i], g = t->grad[i];
		float m = t->m[i] * k->b1 + g * k->one_m_b1;
		float v = t->v[i] * k->b2 + (g * g) * k->one_m_b2;
		float u = (m / k->bc1) / (sqrtf(v / k->bc2) + k->eps) + k->wd * p;

		t->m[i] = m;
		t->v[i] = v;
		sp += (double)p * p;
		su += (double)u * u;
	}
	*pn = sp;
	*un = su;
}

static void lamb2_scalar(const struct opt_consts *k, float ratio, const struct tally_opt_tensor *t)
{
	float s = -(k->lr * ratio);

	for (size_t i = 0; i < t->n; i++) {
		float p = t->param[i];
		float u = (t->m[i] / k->bc1) / (sqrtf(t->v[i] / k->bc2) + k->eps) + k->wd * p;

		t->param[i] = p + s * u;
	}
}

float opt_lamb_ratio(double pnorm2, double unorm2)
{
	double pn = sqrt(pnorm2), un = sqrt(unorm2);

	return (pn > 0.0 && un > 0.0) ? (float)(pn / un) : 1.0f;
}

int tally_opt_force_scalar(int on)
{
	int old = force_scalar;

	force_scalar = on;
	return old;
}

static int use_avx512(void)
{
	return !force_scalar && opt_avx512_supported();
}

const char *tally_opt_cpu_path(void)
{
	return use_avx512() ? "avx512" : "scalar";
}

int tally_opt_step_cpu(const struct tally_opt_cfg *cfg, const struct tally_opt_tensor *t,
		       size_t ntensors)
{
	struct opt_consts k;
	int avx = use_avx512();

	if (tally_opt_cfg_check(cfg, NULL) || (ntensors && !t))
		return -EINVAL;
	for (size_t j = 0; j < ntensors; j++) {
		int need_m = cfg->kind != TALLY_OPT_SGD || cfg->momentum != 0.0f;
		int need_v = cfg->kind != TALLY_OPT_SGD;

		if (t[j].n && (!t[j].param || !t[j].grad || (need_m && !t[j].m) ||
			       (need_v && !t[j].v)))
			return -EINVAL;
	}
	opt_consts_init(cfg, &k);
	for (size_t j = 0; j < ntensors; j++) {
		const struct tally_opt_tensor *x = &t[j];
		double pn, un;

		switch (cfg->kind) {
		case TALLY_OPT_SGD:
			if (avx)
				opt_sgd_avx512(&k, cfg->first, cfg->nesterov, x);
			else
				sgd_scalar(&k, cfg->first, cfg->nesterov, x);
			break;
		case TALLY_OPT_ADAM:
		case TALLY_OPT_ADAMW:
			if (avx)
				opt_adam_avx512(&k, cfg->kind == TALLY_OPT_ADAMW, x);
			else
				adam_scalar(&k, cfg->kind == TALLY_OPT_ADAMW, x);
			break;
		case TALLY_OPT_LAMB:
			if (avx)
				opt_lamb1_avx512(&k, x, &pn, &un);
			else
				lamb1_scalar(&k, x, &pn, &un);
			if (avx)
				opt_lamb2_avx512(&k, opt_lamb_ratio(pn, un), x);
			else
				lamb2_scalar(&k, opt_lamb_ratio(pn, un), x);
			break;
		}
	}
	return 0;
}
