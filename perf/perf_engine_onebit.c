/* SPDX-License-Identifier: Apache-2.0
 * perf_engine_onebit.c — `tally-perf engine --onebit`: the engine's one-bit server stage
 * (1-bit Adam / LAMB) against f32 summation, one engine on one core, one run each.
 * W workers push every chunk of one key per round, chunk-major, in rank order (the whole
 * receive path: decode with CRC, checks, bitmaps, accumulation, completion, RESULT fan-out
 * through a transport that takes the payload by reference). Three keys:
 *   f32            chunks of --chunk bytes (chunk / 4 elements), tally_sum_acc
 *   onebit/bytes   the same packet bytes: 8 * (chunk - 4) elements per chunk
 *   onebit/elems   the f32 key's elements: 4 + elements / 8 bytes per chunk
 * Reported per CPU second of this thread: elements summed (pushes x elements; for
 * one-bit: decompress-accumulate, then per chunk the average and the compression with the
 * server error), wire payload bytes, packets; and elements/s relative to f32.
 *   tally-perf engine --onebit [--workers W] [--chunk BYTES] [--chunks N] [--min-time S]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perf_cmds.h"
#include "perf_util.h"
#include "tally_engine.h"

#define POB_JOB 1u
#define POB_TOKEN 0x5ca1ab1eull

struct pob_run {
	struct tally_engine *e;
	uint8_t *pkts;        /* [chunks][workers] of pkt_len */
	size_t pkt_len, npkts;
	struct tally_addr *addr;
	unsigned workers;
	uint32_t round;
};

static const struct tally_xport_ops pob_ops = { .send = perf_send_none, .now_ns = perf_now_ns };

static void pob_free(struct pob_run *r)
{
	tally_engine_destroy(r->e);
	free(r->pkts);
	free(r->addr);
	memset(r, 0, sizeof(*r));
}

/* Payload of one push: f32 data, or one worker stage (scale + bits) of such data. */
static void pob_payload(uint8_t *p, int onebit, uint32_t n, uint64_t *s)
{
	float *x = malloc((size_t)n * 4), *err = calloc(n, 4);
	for (uint32_t i = 0; i < n && x; i++) {
		*s ^= *s << 13;
		*s ^= *s >> 7;
		*s ^= *s << 17;
		x[i] = (float)((int64_t)(*s % 2001) - 1000) / 128.0f;
	}
	if (x && err && onebit) {
		float sc = tally_sum_onebit_compress(p + 4, err, x, n);
		memcpy(p, &sc, 4); /* little-endian hosts (x86) */
	} else if (x) {
		memcpy(p, x, (size_t)n * 4);
	}
	free(x);
	free(err);
}

static int pob_join(struct pob_run *r, uint32_t w, uint32_t max_chunk)
{
	uint8_t buf[TALLY_HDR_LEN + TALLY_JOIN_LEN];
	struct tally_hdr h;
	struct tally_join j = { .world_size = r->workers, .max_chunk_bytes = max_chunk };

	r->addr[w] = (struct tally_addr){ .ip = 0x0a000000u + w, .port = (uint16_t)(20000 + w),
					  .cookie = w };
	memset(&h, 0, sizeof(h));
	h.op = TALLY_OP_JOIN;
	h.job_id = POB_JOB;
	h.token = POB_TOKEN;
	h.rank = w;
	tally_proto_put_join(buf + TALLY_HDR_LEN, &j);
	tally_proto_finish(buf, &h, buf + TALLY_HDR_LEN, TALLY_JOIN_LEN);
	return tally_engine_rx(r->e, buf, sizeof(buf), &r->addr[w]) == TALLY_OK ? 0 : -EINVAL;
}

static int pob_setup(struct pob_run *r, unsigned workers, unsigned chunks, uint32_t celems,
		     int onebit)
{
	uint32_t plen = onebit ? TALLY_ONEBIT_BYTES(celems) : celems * 4;
	struct tally_engine_cfg cfg = { .max_chunk_bytes = plen < 64 ? 64 : plen,
					.mem_budget = (size_t)celems * chunks * 16 + (64u << 20),
					.max_jobs = 1, .max_keys = 4 };
	struct tally_register reg = { .nelems = celems * chunks, .chunk_elems = celems,
				      .dtype = TALLY_DT_F32, .participants = (uint16_t)workers,
				      .quorum = (uint16_t)workers,
				      .compression = onebit ? TALLY_COMP_ONEBIT : 0 };
	int err = 0;
	uint64_t s = 0x243F6A8885A308D3ull;

	memset(r, 0, sizeof(*r));
	r->e = tally_engine_create(&cfg, &pob_ops, NULL, &err);
	if (!r->e)
		return err;
	r->workers = workers;
	r->pkt_len = TALLY_HDR_LEN + plen;
	r->npkts = (size_t)chunks * workers;
	r->addr = calloc(workers, sizeof(*r->addr));
	r->pkts = calloc(r->npkts, r->pkt_len);
	err = -ENOMEM;
	if (!r->addr || !r->pkts || (err = tally_engine_job_add(r->e, POB_JOB, POB_TOKEN, workers)))
		goto fail;
	for (uint32_t w = 0; w < workers; w++)
		if ((err = pob_join(r, w, cfg.max_chunk_bytes)))
			goto fail;
	if ((err = tally_engine_key_register(r->e, POB_JOB, 1, &reg)))
		goto fail;
	for (uint32_t c = 0; c < chunks; c++)
		for (uint32_t w = 0; w < workers; w++) {
			uint8_t *p = r->pkts + ((size_t)c * workers + w) * r->pkt_len;
			struct tally_hdr h = { .op = TALLY_OP_PUSH, .job_id = POB_JOB,
					       .token = POB_TOKEN, .rank = w, .key = 1,
					       .offset = c * celems, .count = celems,
					       .dtype = TALLY_DT_F32,
					       .flags = onebit ? TALLY_F_ONEBIT : 0 };
			pob_payload(p + TALLY_HDR_LEN, onebit, celems, &s);
			tally_proto_finish(p, &h, p + TALLY_HDR_LEN, plen);
		}
	return 0;
fail:
	pob_free(r);
	return err;
}

/* Rounds for min_s CPU seconds: elements summed per CPU second, and the stats. */
static int pob_measure(struct pob_run *r, uint32_t celems, double min_s, double *eps,
		       double *gbps, double *pps)
{
	const struct tally_engine_stats *st = tally_engine_stats(r->e);
	double t = 0;
	uint64_t bad = 0;

	for (int warm = 1; warm >= 0; warm--) {
		tally_engine_stats_reset(r->e);
		t = 0;
		do {
			uint32_t rd = r->round++;
			for (size_t i = 0; i < r->npkts; i++)
				memcpy(r->pkts + i * r->pkt_len + 28, &rd, 4); /* round, LE */
			double t0 = perf_cpu_now();
			for (size_t i = 0; i < r->npkts; i++)
				bad += tally_engine_rx(r->e, r->pkts + i * r->pkt_len, r->pkt_len,
						       &r->addr[i % r->workers]) != TALLY_OK;
			t += perf_cpu_now() - t0;
		} while (!warm && t < min_s);
	}
	if (bad)
		return -EPROTO;
	*eps = (double)st->pushes * celems / t;
	*gbps = (double)st->push_bytes / t / 1e9;
	*pps = (double)st->rx_pkts / t;
	return 0;
}

int perf_engine_onebit_main(int argc, char **argv)
{
	unsigned workers = 4, chunks = 64;
	size_t chunk = 8192;
	double min_s = 0.5;

	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : "";
		if (!strcmp(argv[i], "--onebit"))
			continue;
		if (!strcmp(argv[i], "--workers"))
			workers = (unsigned)atoi(v), i++;
		else if (!strcmp(argv[i], "--chunk"))
			chunk = (size_t)atol(v), i++;
		else if (!strcmp(argv[i], "--chunks"))
			chunks = (unsigned)atoi(v), i++;
		else if (!strcmp(argv[i], "--min-time"))
			min_s = atof(v), i++;
		else {
			fprintf(stderr, "usage: tally-perf engine --onebit [--workers W] [--chunk BYTES]"
				" [--chunks N] [--min-time S]\n");
			return 2;
		}
	}
	if (workers < 1 || workers > 1024 || chunks < 1 || chunk < 64 || chunk > TALLY_MAX_PAYLOAD ||
	    chunk % 8 || min_s <= 0) {
		fprintf(stderr, "tally-perf engine --onebit: bad arguments\n");
		return 2;
	}
	if (tally_sum_init() < 0)
		return 1;
	const struct { const char *name; int onebit; uint32_t celems; } keys[] = {
		{ "f32", 0, (uint32_t)(chunk / 4) },
		{ "onebit/bytes", 1, (uint32_t)((chunk - 4) * 8) },
		{ "onebit/elems", 1, (uint32_t)(chunk / 4) },
	};
	double f32_eps = 0;
	printf("tally-perf engine --onebit: one engine, %u workers, %u chunks per key, isa %s, "
	       "one run of >= %.2f CPU s each\n", workers, chunks,
	       tally_sum_isa_name(tally_sum_isa()), min_s);
	printf("%-13s %9s %12s %10s %10s %8s\n", "key", "elems/ch", "Gelem/s/core", "wire GB/s",
	       "Mpps", "vs f32");
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		struct pob_run r;
		double eps, gbps, pps;
		int rc = pob_setup(&r, workers, chunks, keys[k].celems, keys[k].onebit);
		if (!rc) {
			rc = pob_measure(&r, keys[k].celems, min_s, &eps, &gbps, &pps);
			pob_free(&r);
		}
		if (rc) {
			fprintf(stderr, "tally-perf engine --onebit: %s: %s\n", keys[k].name,
				strerror(-rc));
			return 1;
		}
		if (k == 0)
			f32_eps = eps;
		printf("%-13s %9u %12.3f %10.3f %10.3f %7.2fx\n", keys[k].name, keys[k].celems,
		       eps / 1e9, gbps, pps / 1e6, eps / f32_eps);
		fflush(stdout);
	}
	return 0;
}
