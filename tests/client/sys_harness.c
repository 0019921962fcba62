/* SPDX-License-Identifier: Apache-2.0
 * sys_harness.c — the whole-system harness of sys_harness.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include <cmocka.h>

#include "sys_harness.h"

static uint64_t mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

struct sys *sys_new(const struct sys_cfg *cfg)
{
	struct sys *s = calloc(1, sizeof(*s));
	struct simnet_cfg nc = { .seed = cfg->seed, .nclients = cfg->W, .nengines = cfg->M,
				 .up = cfg->up, .down = cfg->down,
				 .engine_poll_ns = cfg->engine_poll_ns };
	int err;

	assert_non_null(s);
	s->cfg = *cfg;
	s->net = simnet_create(&nc);
	assert_non_null(s->net);
	s->eng = calloc(cfg->M, sizeof(*s->eng));
	s->cl = calloc(cfg->W, sizeof(*s->cl));
	assert_non_null(s->eng);
	assert_non_null(s->cl);
	for (unsigned m = 0; m < cfg->M; m++) {
		struct tally_engine_cfg ec;

		memset(&ec, 0, sizeof(ec));
		ec.core_index = (uint16_t)m;
		ec.ncores = (uint16_t)cfg->M;
		ec.base_port = 9170;
		ec.mem_budget = 64u << 20;
		ec.det_pool_bytes = 16u << 20;
		tally_engine_cfg_defaults(&ec);
		s->eng[m] = tally_engine_create(&ec, simnet_ops(),
						simnet_ctx(s->net, simnet_engine_node(s->net, m)),
						&err);
		assert_non_null(s->eng[m]);
		assert_int_equal(tally_engine_job_add(s->eng[m], SYS_JOB, SYS_TOKEN, cfg->W), 0);
		simnet_attach_engine(s->net, m, s->eng[m]);
	}
	for (unsigned w = 0; w < cfg->W; w++) {
		struct tally_client_cfg cc = { .job_id = SYS_JOB, .token = SYS_TOKEN, .rank = w,
					       .world_size = cfg->W, .window = cfg->window,
					       .give_up_ms = cfg->give_up_ms ? cfg->give_up_ms : 2000 };

		s->cl[w] = tally_client_create(&cc, simnet_ops(),
					       simnet_ctx(s->net, simnet_client_node(s->net, w)),
					       &err);
		assert_non_null(s->cl[w]);
		simnet_attach_client(s->net, w, s->cl[w]);
		if (tally_client_join(s->cl[w], 2000) != 0)
			fail_msg("join rank %u: %s", w, tally_client_strerror(s->cl[w]));
	}
	for (unsigned k = 0; k < cfg->nkeys; k++) {
		const struct sys_key *sk = &cfg->keys[k];
		struct tally_register r = { .nelems = sk->nelems, .chunk_elems = sk->chunk_elems,
					    .dtype = sk->dtype,
					    .flags = sk->det ? TALLY_KEY_DETERMINISTIC : 0,
					    .participants = (uint16_t)cfg->W,
					    .quorum = sk->quorum ? sk->quorum : (uint16_t)cfg->W,
					    .deadline_us = sk->deadline_us };

		for (unsigned w = 0; w < cfg->W; w++)
			if (tally_client_register(s->cl[w], sk->key, &r) != 0)
				fail_msg("register key %u rank %u: %s", sk->key, w,
					 tally_client_strerror(s->cl[w]));
		for (unsigned p = 0; p < 2; p++) {
			s->ref[k][p].acc = calloc(sk->nelems, sizeof(float));
			s->ref[k][p].exact = calloc(sk->nelems, sizeof(double));
			s->ref[k][p].absum = calloc(sk->nelems, sizeof(double));
			assert_non_null(s->ref[k][p].absum);
		}
	}
	return s;
}

void sys_free(struct sys *s)
{
	for (unsigned w = 0; w < s->cfg.W; w++)
		tally_client_destroy(s->cl[w]);
	for (unsigned m = 0; m < s->cfg.M; m++)
		tally_engine_destroy(s->eng[m]);
	for (unsigned k = 0; k < s->cfg.nkeys; k++)
		for (unsigned p = 0; p < 2; p++) {
			free(s->ref[k][p].acc);
			free(s->ref[k][p].exact);
			free(s->ref[k][p].absum);
		}
	simnet_destroy(s->net);
	free(s->eng);
	free(s->cl);
	free(s);
}

void sys_gradient(const struct sys *s, unsigned w, unsigned k, uint32_t round, void *out)
{
	const struct sys_key *sk = &s->cfg.keys[k];
	uint64_t base = mix(s->cfg.seed ^ ((uint64_t)w << 40) ^ ((uint64_t)k << 32) ^ round);

	for (uint32_t i = 0; i < sk->nelems; i++) {
		uint64_t r = mix(base + i);
		/* [-2, 2) with 24 random bits: sums are not exact in f32 */
		float f = (float)((double)(int32_t)(uint32_t)r / 1073741824.0);

		switch (sk->dtype) {
		case TALLY_DT_F32:
			((float *)out)[i] = f;
			break;
		case TALLY_DT_F16:
			((uint16_t *)out)[i] = tally_f32_to_f16(f);
			break;
		case TALLY_DT_BF16:
			((uint16_t *)out)[i] = tally_f32_to_bf16(f);
			break;
		default:
			((int32_t *)out)[i] = (int32_t)(uint32_t)(r >> 17);
			break;
		}
	}
}

double sys_widen(uint8_t dt, const void *p, uint32_t i)
{
	switch (dt) {
	case TALLY_DT_F32: return ((const float *)p)[i];
	case TALLY_DT_F16: return tally_f16_to_f32(((const uint16_t *)p)[i]);
	case TALLY_DT_BF16: return tally_bf16_to_f32(((const uint16_t *)p)[i]);
	default: return ((const int32_t *)p)[i];
	}
}

static struct sys_ref *sys_ref_get(struct sys *s, unsigned k, uint32_t round)
{
	const struct sys_key *sk = &s->cfg.keys[k];
	struct sys_ref *ref = &s->ref[k][round & 1];
	size_t es = tally_dtype_size((enum tally_dtype)sk->dtype);
	uint8_t *g;

	if (ref->valid && ref->round == round)
		return ref;
	g = malloc((size_t)sk->nelems * es);
	assert_non_null(g);
	for (unsigned w = 0; w < s->cfg.W; w++) {
		sys_gradient(s, w, k, round, g);
		for (uint32_t i = 0; i < sk->nelems; i++) {
			if (sk->dtype == TALLY_DT_I32) {
				int32_t v = ((int32_t *)g)[i], a;

				memcpy(&a, &ref->acc[i], 4);
				a = w ? (int32_t)((uint32_t)a + (uint32_t)v) : v;
				memcpy(&ref->acc[i], &a, 4);
				continue;
			}
			double x = sys_widen(sk->dtype, g, i);

			ref->acc[i] = w ? ref->acc[i] + (float)x : (float)x;
			ref->exact[i] = w ? ref->exact[i] + x : x;
			ref->absum[i] = w ? ref->absum[i] + fabs(x) : fabs(x);
		}
	}
	free(g);
	ref->valid = true;
	ref->round = round;
	return ref;
}

/* Half an ulp of the wire dtype at magnitude m (0 for f32: the sum is carried as is). */
static double half_ulp(uint8_t dt, double m)
{
	int e;

	if (dt == TALLY_DT_F32)
		return 0;
	frexp(m, &e); /* m = f * 2^e, 0.5 <= f < 1 */
	if (dt == TALLY_DT_F16)
		return ldexp(1.0, (e - 1 - 10 > -24 ? e - 1 - 10 : -24) - 1);
	return ldexp(1.0, e - 1 - 7 - 1);
}

long sys_check(const struct sys *cs, unsigned k, uint32_t round, const void *result,
	       double *worst)
{
	struct sys *s = (struct sys *)cs;
	const struct sys_key *sk = &s->cfg.keys[k];
	struct sys_ref *ref = sys_ref_get(s, k, round);
	const double u = ldexp(1.0, -24);

	for (uint32_t i = 0; i < sk->nelems; i++) {
		if (sk->dtype == TALLY_DT_I32) {
			if (memcmp((const int32_t *)result + i, &ref->acc[i], 4))
				return i;
			continue;
		}
		if (sk->det) {
			uint16_t h;

			switch (sk->dtype) {
			case TALLY_DT_F32:
				if (memcmp((const float *)result + i, &ref->acc[i], 4))
					return i;
				break;
			case TALLY_DT_F16:
				h = tally_f32_to_f16(ref->acc[i]);
				if (h != ((const uint16_t *)result)[i])
					return i;
				break;
			default:
				h = tally_f32_to_bf16(ref->acc[i]);
				if (h != ((const uint16_t *)result)[i])
					return i;
				break;
			}
			continue;
		}
		double r = sys_widen(sk->dtype, result, i);
		double m = fabs(r) > fabs(ref->exact[i]) ? fabs(r) : fabs(ref->exact[i]);
		double bound = (s->cfg.W - 1) * u * ref->absum[i] * (1 + 1e-6) +
			       half_ulp(sk->dtype, m * (1 + 1e-6) + 1e-30);
		double err = fabs(r - ref->exact[i]);

		if (!(err <= bound))
			return i;
		if (bound > 0 && worst && err / bound > *worst)
			*worst = err / bound;
	}
	return -1;
}

struct sys_slot {
	int h;
	uint32_t next;
	void *in, *out;
};

void sys_run(struct sys *s, uint32_t rounds, uint64_t max_ns, const struct sys_hooks *hk)
{
	unsigned W = s->cfg.W, K = s->cfg.nkeys, left = W * K;
	struct sys_slot *sl = calloc((size_t)W * K, sizeof(*sl));
	uint64_t end = simnet_now(s->net) + max_ns;

	assert_non_null(sl);
	for (unsigned i = 0; i < W * K; i++) {
		const struct sys_key *sk = &s->cfg.keys[i % K];
		size_t bytes = (size_t)sk->nelems * tally_dtype_size((enum tally_dtype)sk->dtype);

		sl[i].h = -1;
		sl[i].in = malloc(bytes);
		sl[i].out = malloc(bytes);
		assert_non_null(sl[i].out);
	}
	while (left) {
		for (unsigned i = 0; i < W * K; i++) {
			unsigned w = i / K, k = i % K;
			struct sys_slot *x = &sl[i];
			int rc;

			if (x->h >= 0) {
				rc = tally_client_test(s->cl[w], x->h);
				if (rc == 0)
					continue;
				if (rc < 0)
					fail_msg("rank %u key %u round %u failed: %d %s", w,
						 s->cfg.keys[k].key, x->next, rc,
						 tally_client_strerror(s->cl[w]));
				if (!(hk && hk->no_check)) {
					long bad = sys_check(s, k, x->next, x->out, &s->worst_rel);

					if (bad >= 0)
						fail_msg("rank %u key %u (%s, %u elements) round %u: "
							 "element %ld wrong", w, s->cfg.keys[k].key,
							 tally_dtype_name((enum tally_dtype)s->cfg.keys[k].dtype),
							 s->cfg.keys[k].nelems, x->next, bad);
				}
				if (hk && hk->result)
					hk->result(hk->arg, s, w, k, x->next, x->out);
				x->h = -1;
				if (++x->next == rounds)
					left--;
			}
			/* the next round starts at once (before time moves on) */
			if (x->next >= rounds)
				continue;
			if (hk && hk->may_start && !hk->may_start(hk->arg, s, w, k, x->next))
				continue;
			sys_gradient(s, w, k, x->next, x->in);
			x->h = tally_client_start(s->cl[w], s->cfg.keys[k].key, x->next, x->in,
						  x->out);
			if (x->h < 0)
				fail_msg("start rank %u key %u round %u: %d %s", w,
					 s->cfg.keys[k].key, x->next, x->h,
					 tally_client_strerror(s->cl[w]));
		}
		if (!left)
			break;
		if (simnet_now(s->net) >= end)
			fail_msg("no progress: %u worker/key pairs unfinished after %llu ms virtual",
				 left, (unsigned long long)(max_ns / 1000000));
		simnet_step(s->net, end - simnet_now(s->net));
	}
	for (unsigned i = 0; i < W * K; i++) {
		free(sl[i].in);
		free(sl[i].out);
	}
	free(sl);
}

uint64_t sys_retransmits(const struct sys *s)
{
	uint64_t n = 0;

	for (unsigned w = 0; w < s->cfg.W; w++)
		n += tally_client_stats(s->cl[w])->retransmits;
	return n;
}

uint64_t sys_client_drops(const struct sys *s)
{
	uint64_t n = 0;

	for (unsigned w = 0; w < s->cfg.W; w++)
		for (unsigned r = 0; r < TALLY_R_COUNT; r++)
			n += tally_client_stats(s->cl[w])->drops[r];
	return n;
}
