/* SPDX-License-Identifier: Apache-2.0
 * opt_avx512.c — AVX-512 twins of the optimizer updates: the scalar path's float
 * operations, 16 lanes at a time, tails through masks (no scalar remainder loop). */
#include <immintrin.h>
#include <stddef.h>

#include "opt_internal.h"

#define AVX512 __attribute__((target("avx512f")))

int opt_avx512_supported(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f");
}

static inline AVX512 __mmask16 tail_mask(size_t left)
{
	return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
}

AVX512 void opt_sgd_avx512(const struct opt_consts *k, int first, int nesterov,
			   const struct tally_opt_tensor *t)
{
	const __m512 wd = _mm512_set1_ps(k->wd), mom = _mm512_set1_ps(k->mom);
	const __m512 omd = _mm512_set1_ps(k->one_m_damp), nlr = _mm512_set1_ps(k->neg_lr);

	for (size_t i = 0; i < t->n; i += 16) {
		__mmask16 mk = tail_mask(t->n - i);
		__m512 p = _mm512_maskz_loadu_ps(mk, t->param + i);
		__m512 d = _mm512_maskz_loadu_ps(mk, t->grad + i);

		if (k->wd != 0.0f)
			d = _mm512_add_ps(d, _mm512_mul_ps(wd, p));
		if (k->mom != 0.0f) {
			__m512 b = d;

			if (!first)
				b = _mm512_add_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(mk, t->m + i), mom),
						  _mm512_mul_ps(d, omd));
			_mm512_mask_storeu_ps(t->m + i, mk, b);
			d = nesterov ? _mm512_add_ps(d, _mm512_mul_ps(b, mom)) : b;
		}
		_mm512_mask_storeu_ps(t->param + i, mk, _mm512_add_ps(p, _mm512_mul_ps(d, nlr)));
	}
}

AVX512 void opt_adam_avx512(const struct opt_consts *k, int adamw, const struct tally_opt_tensor *t)
{
	const __m512 wd = _mm512_set1_ps(k->wd), decay = _mm512_set1_ps(k->decay);
	const __m512 b1 = _mm512_set1_ps(k->b1), b2 = _mm512_set1_ps(k->b2);
	const __m512 omb1 = _mm512_set1_ps(k->one_m_b1), omb2 = _mm512_set1_ps(k->one_m_b2);
	const __m512 bc2s = _mm512_set1_ps(k->bc2_sqrt), eps = _mm512_set1_ps(k->eps);
	const __m512 nss = _mm512_set1_ps(k->neg_step_size);

	for (size_t i = 0; i < t->n; i += 16) {
		__mmask16 mk = tail_mask(t->n - i);
		__m512 p = _mm512_maskz_loadu_ps(mk, t->param + i);
		__m512 g = _mm512_maskz_loadu_ps(mk, t->grad + i);

		if (adamw)
			p = _mm512_mul_ps(p, decay);
		else if (k->wd != 0.0f)
			g = _mm512_add_ps(g, _mm512_mul_ps(wd, p));
		__m512 m = _mm512_add_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(mk, t->m + i), b1),
					 _mm512_mul_ps(g, omb1));
		__m512 v = _mm512_add_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(mk, t->v + i), b2),
					 _mm512_mul_ps(_mm512_mul_ps(g, g), omb2));
		__m512 denom = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(v), bc2s), eps);

		_mm512_mask_storeu_ps(t->m + i, mk, m);
		_mm512_mask_storeu_ps(t->v + i, mk, v);
		_mm512_mask_storeu_ps(t->param + i, mk,
				      _mm512_add_ps(p, _mm512_mul_ps(nss, _mm512_div_ps(m, denom))));
	}
}

static inline AVX512 __m512 lamb_u(const struct opt_consts *k, __m512 m, __m512 v, __m512 p)
{
	__m512 mh = _mm512_div_ps(m, _mm512_set1_ps(k->bc1));
	__m512 den = _mm512_add_ps(_mm512_sqrt_ps(_mm512_div_ps(v, _mm512_set1_ps(k->bc2))),
				   _mm512_set1_ps(k->eps));

	return _mm512_add_ps(_mm512_div_ps(mh, den), _mm512_mul_ps(_mm512_set1_ps(k->wd), p));
}

static inline AVX512 __m512d sq_acc(__m512d acc, __m512 x)
{
	__m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(x));
	__m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));

	return _mm512_add_pd(acc, _mm512_add_pd(_mm512_mul_pd(lo, lo), _mm512_mul_pd(hi, hi)));
}

AVX512 void opt_lamb1_avx512(const struct opt_consts *k, const struct tally_opt_tensor *t,
			     double *pn, double *un)
{
	const __m512 b1 = _mm512_set1_ps(k->b1), b2 = _mm512_set1_ps(k->b2);
	const __m512 omb1 = _mm512_set1_ps(k->one_m_b1), omb2 = _mm512_set1_ps(k->one_m_b2);
	__m512d sp = _mm512_setzero_pd(), su = _mm512_setzero_pd();

	for (size_t i = 0; i < t->n; i += 16) {
		__mmask16 mk = tail_mask(t->n - i);
		__m512 p = _mm512_maskz_loadu_ps(mk, t->param + i);
		__m512 g = _mm512_maskz_loadu_ps(mk, t->grad + i);
		__m512 m = _mm512_add_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(mk, t->m + i), b1),
					 _mm512_mul_ps(g, omb1));
		__m512 v = _mm512_add_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(mk, t->v + i), b2),
					 _mm512_mul_ps(_mm512_mul_ps(g, g), omb2));
		/* masked-off lanes: m = v = p = 0 gives u = 0, adding nothing to the norms */
		__m512 u = _mm512_maskz_mov_ps(mk, lamb_u(k, m, v, p));

		_mm512_mask_storeu_ps(t->m + i, mk, m);
		_mm512_mask_storeu_ps(t->v + i, mk, v);
		sp = sq_acc(sp, p);
		su = sq_acc(su, u);
	}
	*pn = _mm512_reduce_add_pd(sp);
	*un = _mm512_reduce_add_pd(su);
}

AVX512 void opt_lamb2_avx512(const struct opt_consts *k, float ratio, const struct tally_opt_tensor *t)
{
	const __m512 s = _mm512_set1_ps(-(k->lr * ratio));

	for (size_t i = 0; i < t->n; i += 16) {
		__mmask16 mk = tail_mask(t->n - i);
		__m512 p = _mm512_maskz_loadu_ps(mk, t->param + i);
		__m512 u = lamb_u(k, _mm512_maskz_loadu_ps(mk, t->m + i),
				  _mm512_maskz_loadu_ps(mk, t->v + i), p);

		_mm512_mask_storeu_ps(t->param + i, mk, _mm512_add_ps(p, _mm512_mul_ps(s, u)));
	}
}
