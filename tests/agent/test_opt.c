/* SPDX-License-Identifier: Apache-2.0
 * test_opt.c — optimizer CPU twins: AVX-512 and scalar paths agree bit for bit (LAMB: to
 * 1e-6 relative, its norms are summed in another order), one step matches the formulas of
 * tally_opt.h evaluated in double (to 2 ulp-ish: 1e-6 relative), bad configurations are
 * rejected without touching the tensors. torch.optim itself is the reference in
 * test_opt_torch.py. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tally_opt.h"

#define NT 3
static const size_t sizes[NT] = {1, 1000, 37}; /* tails, a long one, an odd one */

struct set {
	float *p[NT], *g[NT], *m[NT], *v[NT];
	struct tally_opt_tensor t[NT];
};

static uint32_t rng = 12345;
static float frand(void)
{
	rng = rng * 1664525u + 1013904223u;
	return (float)((rng >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static void set_init(struct set *s, uint32_t seed)
{
	rng = seed;
	for (int j = 0; j < NT; j++) {
		size_t n = sizes[j];

		s->p[j] = malloc(n * sizeof(float));
		s->g[j] = malloc(n * sizeof(float));
		s->m[j] = malloc(n * sizeof(float));
		s->v[j] = malloc(n * sizeof(float));
		for (size_t i = 0; i < n; i++) {
			s->p[j][i] = frand();
			s->g[j][i] = frand() * 0.1f;
			s->m[j][i] = frand() * 0.01f;
			s->v[j][i] = fabsf(frand()) * 1e-4f;
		}
		s->t[j] = (struct tally_opt_tensor){s->p[j], s->g[j], s->m[j], s->v[j], n};
	}
}

static void set_free(struct set *s)
{
	for (int j = 0; j < NT; j++) {
		free(s->p[j]);
		free(s->g[j]);
		free(s->m[j]);
		free(s->v[j]);
	}
}

static struct tally_opt_cfg cfgs[] = {
	{.kind = TALLY_OPT_SGD, .lr = 0.1f},
	{.kind = TALLY_OPT_SGD, .lr = 0.1f, .momentum = 0.9f, .weight_decay = 1e-4f, .first = 1},
	{.kind = TALLY_OPT_SGD, .lr = 0.1f, .momentum = 0.9f, .dampening = 0.1f},
	{.kind = TALLY_OPT_SGD, .lr = 0.05f, .momentum = 0.9f, .nesterov = 1, .weight_decay = 1e-3f},
	{.kind = TALLY_OPT_ADAM, .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .step = 1},
	{.kind = TALLY_OPT_ADAM, .lr = 1e-3f, .beta1 = 0.8f, .beta2 = 0.99f, .eps = 1e-6f, .step = 7,
	 .weight_decay = 1e-2f},
	{.kind = TALLY_OPT_ADAMW, .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .step = 3,
	 .weight_decay = 1e-2f},
	{.kind = TALLY_OPT_LAMB, .lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-6f, .step = 2,
	 .weight_decay = 1e-2f},
};
#define NCFG (sizeof(cfgs) / sizeof(cfgs[0]))

static void test_paths_agree(void **state)
{
	(void)state;
	if (strcmp(tally_opt_cpu_path(), "avx512") != 0)
		skip(); /* nothing to compare on this CPU */
	for (size_t c = 0; c < NCFG; c++) {
		struct set a, b;

		set_init(&a, 99 + c);
		set_init(&b, 99 + c);
		for (int it = 0; it < 3; it++) {
			struct tally_opt_cfg cf = cfgs[c];

			cf.step += it;
			cf.first = cf.first && it == 0;
			tally_opt_force_scalar(1);
			assert_int_equal(tally_opt_step_cpu(&cf, a.t, NT), 0);
			tally_opt_force_scalar(0);
			assert_int_equal(tally_opt_step_cpu(&cf, b.t, NT), 0);
		}
		for (int j = 0; j < NT; j++)
			for (size_t i = 0; i < sizes[j]; i++) {
				if (cfgs[c].kind == TALLY_OPT_LAMB) {
					assert_float_equal(a.p[j][i], b.p[j][i], 1e-6f * fabsf(a.p[j][i]) + 1e-9f);
				} else {
					assert_memory_equal(&a.p[j][i], &b.p[j][i], sizeof(float));
					assert_memory_equal(&a.m[j][i], &b.m[j][i], sizeof(float));
				}
				assert_memory_equal(&a.v[j][i], &b.v[j][i], sizeof(float));
			}
		set_free(&a);
		set_free(&b);
	}
}

/* One step of each formula in double, element by element, vs the twin. */
static void test_formulas(void **state)
{
	(void)state;
	for (int scalar = 0; scalar < 2; scalar++) {
		tally_opt_force_scalar(scalar);
		for (size_t c = 0; c < NCFG; c++) {
			struct tally_opt_cfg cf = cfgs[c];
			struct set s, r;
			double t = (double)cf.step;

			set_init(&s, 7 + c);
			set_init(&r, 7 + c); /* untouched copy: the inputs */
			assert_int_equal(tally_opt_step_cpu(&cf, s.t, NT), 0);
			for (int j = 0; j < NT; j++) {
				double pn = 0, un = 0;
				double *u = calloc(sizes[j], sizeof(double));

				for (size_t i = 0; i < sizes[j]; i++) {
					double p = r.p[j][i], g = r.g[j][i], m = r.m[j][i], v = r.v[j][i];
					double b1 = cf.beta1, b2 = cf.beta2, wd = cf.weight_decay, lr = cf.lr;
					double exp;

					if (cf.kind == TALLY_OPT_SGD) {
						double d = g + wd * p;
						if (cf.momentum != 0.0f) {
							double b = cf.first ? d : cf.momentum * m + (1.0 - cf.dampening) * d;
							d = cf.nesterov ? d + cf.momentum * b : b;
						}
						exp = p - lr * d;
					} else if (cf.kind == TALLY_OPT_LAMB) {
						m = b1 * m + (1 - b1) * g;
						v = b2 * v + (1 - b2) * g * g;
						u[i] = (m / (1 - pow(b1, t))) / (sqrt(v / (1 - pow(b2, t))) + cf.eps) + wd * p;
						pn += p * p;
						un += u[i] * u[i];
						continue;
					} else {
						if (cf.kind == TALLY_OPT_ADAMW)
							p *= 1 - lr * wd;
						else
							g += wd * p;
						m = b1 * m + (1 - b1) * g;
						v = b2 * v + (1 - b2) * g * g;
						exp = p - lr / (1 - pow(b1, t)) * m /
							  (sqrt(v) / sqrt(1 - pow(b2, t)) + cf.eps);
					}
					assert_float_equal(s.p[j][i], exp, 1e-6 * fabs(exp) + 1e-7);
				}
				if (cf.kind == TALLY_OPT_LAMB) {
					double ratio = pn > 0 && un > 0 ? sqrt(pn) / sqrt(un) : 1.0;
					for (size_t i = 0; i < sizes[j]; i++) {
						double exp = r.p[j][i] - cf.lr * ratio * u[i];
						assert_float_equal(s.p[j][i], exp, 1e-6 * fabs(exp) + 1e-7);
					}
				}
				free(u);
			}
			set_free(&s);
			set_free(&r);
		}
	}
	tally_opt_force_scalar(0);
}

static void test_bad_cfg(void **state)
{
	(void)state;
	struct tally_opt_cfg bad[] = {
		{.kind = TALLY_OPT_SGD, .lr = -1.0f},
		{.kind = TALLY_OPT_SGD, .lr = 0.1f, .nesterov = 1},              /* no momentum */
		{.kind = TALLY_OPT_SGD, .lr = 0.1f, .momentum = 0.9f, .dampening = 0.5f, .nesterov = 1},
		{.kind = TALLY_OPT_ADAM, .lr = 0.1f, .beta1 = 1.0f, .beta2 = 0.9f, .step = 1},
		{.kind = TALLY_OPT_ADAM, .lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.9f, .step = 0},
		{.kind = TALLY_OPT_LAMB, .lr = NAN, .beta1 = 0.9f, .beta2 = 0.9f, .step = 1},
		{.kind = 17, .lr = 0.1f},
	};
	struct set s, r;

	set_init(&s, 5);
	set_init(&r, 5);
	for (size_t c = 0; c < sizeof(bad) / sizeof(bad[0]); c++) {
		const char *why = NULL;

		assert_int_equal(tally_opt_cfg_check(&bad[c], &why), -EINVAL);
		assert_non_null(why);
		assert_int_equal(tally_opt_step_cpu(&bad[c], s.t, NT), -EINVAL);
	}
	/* a missing moment buffer is rejected before any tensor is touched */
	struct tally_opt_cfg ok;
	tally_opt_cfg_defaults(&ok, TALLY_OPT_ADAM);
	s.t[2].v = NULL;
	assert_int_equal(tally_opt_step_cpu(&ok, s.t, NT), -EINVAL);
	s.t[2].v = s.v[2];
	for (int j = 0; j < NT; j++)
		assert_memory_equal(s.p[j], r.p[j], sizes[j] * sizeof(float));
	set_free(&s);
	set_free(&r);
}

static void test_cuda_absent(void **state)
{
	(void)state;
	struct tally_opt_cfg ok;
	tally_opt_cfg_defaults(&ok, TALLY_OPT_SGD);
	if (tally_opt_have_cuda())
		skip(); /* covered by test_opt_cuda */
	assert_int_equal(tally_opt_step_cuda(&ok, NULL, 0, NULL), -ENOTSUP);
	assert_true(strlen(tally_opt_cuda_error()) > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_paths_agree),
		cmocka_unit_test(test_formulas),
		cmocka_unit_test(test_bad_cfg),
		cmocka_unit_test(test_cuda_absent),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
