/* SPDX-License-Identifier: Apache-2.0
 * test_noresult.c — owner mode (TALLY_CLIENT_NORESULT, tally_proto.h TALLY_F_NORESULT) on
 * the simulated network with the real engine: NW workers, one key owned by each (a
 * reduce-scatter's shards); each worker starts the keys it does not own with the flag. The
 * owner's sums are exact (bit-exact on the deterministic key), the others' operations
 * complete on header-only RESULTs and leave their output untouched, no sum payload reaches
 * a non-owner, with loss, duplication and reordering on both directions; and the downlink
 * bytes each worker receives, measured against the same run without the flag in one
 * process, drop to about its own shard's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sys_harness.h"

#define US 1000ull
#define MS 1000000ull
#define NW 4u
#define ROUNDS 4u
#define SENTINEL 0x5a

static struct sys_cfg rs_cfg(uint64_t seed, double loss)
{
	struct sys_cfg c;

	memset(&c, 0, sizeof(c));
	c.seed = seed;
	c.W = NW;
	c.M = 2;
	c.up = (struct simnet_link){ .loss = loss, .dup = loss / 2, .reorder = loss,
				     .delay_ns = 5 * US, .jitter_ns = 2 * US,
				     .reorder_ns = 20 * US };
	c.down = c.up;
	c.nkeys = NW; /* key k is rank k's shard */
	c.keys[0] = (struct sys_key){ .key = 60, .nelems = 16 * 256, .chunk_elems = 256,
				      .dtype = TALLY_DT_F32 };
	c.keys[1] = (struct sys_key){ .key = 61, .nelems = 5000, .chunk_elems = 300,
				      .dtype = TALLY_DT_BF16 };
	c.keys[2] = (struct sys_key){ .key = 62, .nelems = 3000, .chunk_elems = 128,
				      .dtype = TALLY_DT_F32, .det = true };
	c.keys[3] = (struct sys_key){ .key = 63, .nelems = 2000, .chunk_elems = 512,
				      .dtype = TALLY_DT_F16 };
	c.window = 32;
	c.give_up_ms = 5000;
	return c;
}

struct run {
	uint64_t rx_bytes[NW];    /* each worker's downlink */
	uint64_t acks[NW];        /* header-only RESULTs taken */
	uint64_t appl_result_bytes, appl_acks;
};

static size_t key_bytes(const struct sys_key *k)
{
	return (size_t)k->nelems * tally_dtype_size((enum tally_dtype)k->dtype);
}

static uint32_t key_chunks(const struct sys_key *k)
{
	return (k->nelems + k->chunk_elems - 1) / k->chunk_elems;
}

/* Every worker runs ROUNDS rounds of every key, at most one round of a key at a time, each
 * key's round started with the flag by the workers that do not own it (owner mode on). */
static void rs_run(struct sys *s, bool owner_mode, struct run *out)
{
	uint8_t *in[NW][NW], *res[NW][NW];
	int hd[NW][NW];
	uint32_t round[NW][NW];
	unsigned left = NW * NW;

	for (unsigned w = 0; w < NW; w++)
		for (unsigned k = 0; k < NW; k++) {
			size_t b = key_bytes(&s->cfg.keys[k]);

			in[w][k] = malloc(b);
			res[w][k] = malloc(b);
			assert_non_null(in[w][k]);
			assert_non_null(res[w][k]);
			round[w][k] = 0;
			hd[w][k] = -1;
		}
	while (left) {
		for (unsigned w = 0; w < NW; w++)
			for (unsigned k = 0; k < NW; k++) {
				const struct sys_key *sk = &s->cfg.keys[k];
				bool mine = k == w;

				if (hd[w][k] < 0 && round[w][k] < ROUNDS) {
					sys_gradient(s, w, k, round[w][k], in[w][k]);
					memset(res[w][k], SENTINEL, key_bytes(sk));
					hd[w][k] = tally_client_start_flags(
						s->cl[w], sk->key, round[w][k], in[w][k], res[w][k],
						owner_mode && !mine ? TALLY_CLIENT_NORESULT : 0);
					if (hd[w][k] < 0)
						fail_msg("start w%u key %u: %s", w, sk->key,
							 tally_client_strerror(s->cl[w]));
				}
				if (hd[w][k] < 0)
					continue;
				int rc = tally_client_test(s->cl[w], hd[w][k]);

				if (rc < 0)
					fail_msg("w%u key %u round %u: %s", w, sk->key, round[w][k],
						 tally_client_strerror(s->cl[w]));
				if (rc == 0)
					continue;
				if (!owner_mode || mine) {
					double worst = 0;

					assert_int_equal(sys_check(s, k, round[w][k], res[w][k], &worst), -1);
				} else {
					/* nothing written: the sum never came */
					for (size_t i = 0; i < key_bytes(sk); i++)
						assert_int_equal(res[w][k][i], SENTINEL);
				}
				hd[w][k] = -1;
				if (++round[w][k] == ROUNDS)
					left--;
			}
		simnet_step(s->net, 1 * MS);
		if (simnet_now(s->net) > 20000 * MS)
			fail_msg("hang: %u key runs left", left);
	}
	memset(out, 0, sizeof(*out));
	for (unsigned w = 0; w < NW; w++) {
		const struct tally_client_stats *st = tally_client_stats(s->cl[w]);

		out->rx_bytes[w] = st->rx_bytes;
		out->acks[w] = st->noresult_acks;
		for (unsigned k = 0; k < NW; k++) {
			free(in[w][k]);
			free(res[w][k]);
		}
	}
	for (unsigned m = 0; m < s->cfg.M; m++) {
		out->appl_result_bytes += tally_engine_stats(s->eng[m])->result_bytes;
		out->appl_acks += tally_engine_stats(s->eng[m])->noresult_acks;
	}
}

static void check_owner_mode(uint64_t seed, double loss)
{
	struct sys_cfg cfg = rs_cfg(seed, loss);
	struct run base, own;
	struct sys *s = sys_new(&cfg);

	rs_run(s, false, &base);
	sys_free(s);
	s = sys_new(&cfg);
	for (unsigned w = 0; w < NW; w++)
		assert_true(tally_client_caps(s->cl[w]) & TALLY_CAP_NORESULT);
	rs_run(s, true, &own);
	uint64_t shard_bytes = 0, all_chunks = 0;

	for (unsigned k = 0; k < NW; k++) {
		shard_bytes += key_bytes(&cfg.keys[k]) * ROUNDS;
		all_chunks += key_chunks(&cfg.keys[k]) * ROUNDS;
	}
	for (unsigned w = 0; w < NW; w++) {
		const struct tally_client_stats *st = tally_client_stats(s->cl[w]);
		uint64_t others = all_chunks - key_chunks(&cfg.keys[w]) * ROUNDS;

		print_message("  loss %.2f rank %u: downlink %llu B plain, %llu B owner mode "
			      "(%.3f); %llu header-only RESULTs, %llu payload bytes skipped, "
			      "%llu re-sends, %llu probes\n", loss, w,
			      (unsigned long long)base.rx_bytes[w],
			      (unsigned long long)own.rx_bytes[w],
			      (double)own.rx_bytes[w] / (double)base.rx_bytes[w],
			      (unsigned long long)st->noresult_acks,
			      (unsigned long long)st->noresult_skipped_bytes,
			      (unsigned long long)st->retransmits, (unsigned long long)st->probes);
		/* every chunk of the others' keys completed on a header-only RESULT */
		assert_int_equal(st->noresult_acks, others);
		assert_int_equal(st->noresult_ops, (NW - 1) * ROUNDS);
		assert_int_equal(st->noresult_fallbacks, 0);
		/* the downlink carries about the rank's own shard, not all NW */
		assert_true(own.rx_bytes[w] * 2 < base.rx_bytes[w]);
	}
	print_message("  loss %.2f appliance: RESULT payload bytes %llu plain, %llu owner mode; "
		      "%llu header-only RESULTs\n", loss,
		      (unsigned long long)base.appl_result_bytes,
		      (unsigned long long)own.appl_result_bytes, (unsigned long long)own.appl_acks);
	assert_int_equal(base.appl_acks, 0);
	assert_true(base.appl_result_bytes >= NW * shard_bytes);
	/* each chunk's payload went to its owner (again only to repair a loss) */
	assert_true(own.appl_result_bytes >= shard_bytes);
	if (loss == 0)
		assert_int_equal(own.appl_result_bytes, shard_bytes);
	assert_true(own.appl_result_bytes < base.appl_result_bytes / 2);
	sys_free(s);
}

static void test_no_loss(void **state)
{
	(void)state;
	check_owner_mode(11, 0);
}

static void test_loss(void **state)
{
	(void)state;
	check_owner_mode(12, 0.05);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_loss),
		cmocka_unit_test(test_loss),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
