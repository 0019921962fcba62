/* SPDX-License-Identifier: Apache-2.0
 * perf_engine_auth.c — `tally-perf engine --auth`: the cost of per-packet authentication
 * (AES-256-GMAC, tally_auth.h) on the engine's whole receive path, one engine on one core,
 * the same job without and with a key, in one run. W workers push every f32 chunk of one
 * key per round, chunk-major, rank order. Without a key: decode with CRC32C, checks,
 * bitmaps, accumulation, completion, CRC of the result, RESULT fan-out. With a key: decode
 * (no CRC), GMAC verify of every push, the same work, one GMAC of the RESULT payload per
 * chunk and a GMAC over header + that tag per RESULT copy (W per chunk, tally_auth.h). The transport takes RESULT payloads by reference, as
 * DPDK's does. Pushes are re-signed between rounds (their round changes; not timed).
 * Reported per CPU second of this thread: push payload goodput, its ratio auth/plain
 * (median of per-repetition ratios, repetitions interleaved) and cores per 100G port
 * (12.5 GB/s / goodput) for both; chunk sizes 1 KiB and 8 KiB unless --chunk is given;
 * beside them the MAC's own rate R_mac (verify alone, same packets) and the ratios it allows.
 * A third run, interleaved with them: the keyed job whose workers sit on connections
 * authenticated at setup (verbs, tally_xport.h conn_authed): unsigned packets, unsigned
 * RESULTs (conn GB/s, ratio conn/plain: the per-packet price of setup authentication).
 * First the MAC candidates' own rates at those sizes (perf_auth_mac.c), the choice's basis.
 *   tally-perf engine --auth [--workers W] [--chunk BYTES]... [--chunks N] [--reps N]
 *                            [--min-time S] [--json]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perf_cmds.h"
#include "perf_util.h"
#include "tally_auth.h"
#include "tally_engine.h"

#define PAU_JOB 1u
#define PAU_TOKEN 0x5ca1ab1eull
#define PAU_MAX_SIZES 4

struct pau_opts {
	unsigned workers, chunks, nsizes;
	size_t sizes[PAU_MAX_SIZES];
	int reps, json;
	double min_s;
};

struct pau_run {
	struct tally_engine *e;
	struct tally_auth *w;  /* the workers' key context (auth runs) */
	uint8_t *pkts;         /* [chunks][workers] of pkt_len */
	size_t pkt_len, hl, npkts, chunk;
	struct tally_addr *addr;
	unsigned workers;
	uint32_t round;
	int conn;              /* keyed job, workers on connections authenticated at setup */
	uint8_t sess[TALLY_AUTH_SESS_LEN]; /* the workers' session (tally_auth.h) */
};

static const uint8_t PAU_KEY[TALLY_AUTH_KEY_LEN] = { 0x42, 0x17, 0x99, 0x03 };
#define PAU_RUN 0x52554e0000000007ull /* the job's run nonce (tally_engine_job_run) */

static const struct tally_xport_ops pau_ops = { .send = perf_send_none, .now_ns = perf_now_ns };

/* Header of packet i for the current round, signed when the run has a key. */
static void pau_build(struct pau_run *r, size_t i, uint8_t op, const void *pl, size_t plen)
{
	uint8_t *p = r->pkts + i * r->pkt_len;
	struct tally_hdr h;
	uint32_t w = (uint32_t)(i % r->workers), c = (uint32_t)(i / r->workers);
	memset(&h, 0, sizeof(h));
	h.op = op;
	h.job_id = PAU_JOB;
	h.token = PAU_TOKEN;
	h.rank = w;
	h.key = 1;
	h.round = r->round;
	h.offset = c * (uint32_t)(r->chunk / 4);
	h.count = (uint32_t)(r->chunk / 4);
	h.dtype = TALLY_DT_F32;
	if (!r->w) {
		tally_proto_finish(p, &h, pl, plen);
		return;
	}
	h.flags = TALLY_F_AUTH;
	h.payload_len = (uint32_t)plen;
	tally_proto_encode_hdr(p, &h);
	tally_auth_sign_s(r->w, p, r->sess, pl, plen);
}

static void pau_free(struct pau_run *r)
{
	tally_engine_destroy(r->e);
	tally_auth_free(r->w);
	free(r->pkts);
	free(r->addr);
	memset(r, 0, sizeof(*r));
}

/* A signed (or plain) JOIN of every worker, then the key. */
static int pau_join(struct pau_run *r)
{
	uint8_t buf[TALLY_HDR_MAX + TALLY_JOIN_LEN], pl[TALLY_JOIN_LEN];
	for (uint32_t w = 0; w < r->workers; w++) {
		struct tally_hdr h;
		struct tally_join j = { .world_size = r->workers,
					.max_chunk_bytes = (uint32_t)r->chunk };
		r->addr[w].ip = 0x0a000000u + w;
		r->addr[w].port = (uint16_t)(20000 + w);
		r->addr[w].cookie = w;
		/* a verbs RC QP that proved (job, rank) at connect: unsigned packets */
		r->addr[w].conn_authed = (uint8_t)r->conn;
		r->addr[w].conn_job = PAU_JOB;
		r->addr[w].conn_rank = w;
		memset(&h, 0, sizeof(h));
		h.op = TALLY_OP_JOIN;
		h.job_id = PAU_JOB;
		h.token = PAU_TOKEN;
		h.rank = w;
		h.reserved = 1;
		tally_proto_put_join(pl, &j);
		if (r->w) {
			h.flags = TALLY_F_AUTH;
			h.payload_len = TALLY_JOIN_LEN;
			tally_proto_encode_hdr(buf, &h);
			memcpy(buf + TALLY_HDR_AUTH, pl, sizeof(pl));
			uint8_t js[TALLY_AUTH_SESS_LEN];
			tally_auth_sess(js, 0, h.reserved); /* a JOIN: (0, its nonce) */
			tally_auth_sign_s(r->w, buf, js, pl, sizeof(pl));
		} else {
			memcpy(buf + TALLY_HDR_LEN, pl, sizeof(pl));
			tally_proto_finish(buf, &h, pl, sizeof(pl));
		}
		if (tally_engine_rx(r->e, buf, r->hl + sizeof(pl), &r->addr[w]) != TALLY_OK)
			return -EPROTO;
	}
	return 0;
}

/* mode 0: plain job; 1: keyed, a MAC per packet; 2: keyed, connections authenticated at
 * setup (tally_xport.h conn_authed: what a verbs job with setup authentication runs). */
static int pau_setup(struct pau_run *r, const struct pau_opts *o, size_t chunk, int mode)
{
	int auth = mode == 1;
	struct tally_engine_cfg cfg;
	uint32_t celems = (uint32_t)(chunk / 4), nelems = celems * o->chunks;
	int err = 0;
	memset(r, 0, sizeof(*r));
	memset(&cfg, 0, sizeof(cfg));
	cfg.max_chunk_bytes = (uint32_t)chunk;
	cfg.mem_budget = (size_t)nelems * 12 + ((size_t)64 << 20);
	cfg.max_jobs = 1;
	cfg.max_keys = 16;
	r->e = tally_engine_create(&cfg, &pau_ops, NULL, &err);
	if (!r->e)
		return err;
	r->workers = o->workers;
	r->conn = mode == 2;
	r->chunk = chunk;
	r->hl = auth ? TALLY_HDR_AUTH : TALLY_HDR_LEN; /* PUSHes */
	r->pkt_len = r->hl + chunk;
	r->npkts = (size_t)o->chunks * o->workers;
	r->pkts = perf_alloc(r->npkts * r->pkt_len);
	r->addr = calloc(o->workers, sizeof(*r->addr));
	err = -ENOMEM;
	if (!r->pkts || !r->addr || (auth && !(r->w = tally_auth_new())))
		goto fail;
	err = tally_engine_job_add(r->e, PAU_JOB, PAU_TOKEN, o->workers);
	if (!err && mode)
		err = tally_engine_job_key(r->e, PAU_JOB, PAU_KEY);
	if (!err && mode)
		err = tally_engine_job_run(r->e, PAU_JOB, PAU_RUN);
	tally_auth_sess(r->sess, PAU_RUN, 1); /* every worker's JOIN nonce is 1 */
	if (!err && auth)
		err = tally_auth_set_key(r->w, PAU_KEY);
	if (!err)
		err = pau_join(r);
	struct tally_register reg = { .nelems = nelems, .chunk_elems = celems,
				      .dtype = TALLY_DT_F32, .participants = (uint16_t)o->workers,
				      .quorum = (uint16_t)o->workers };
	if (!err)
		err = tally_engine_key_register(r->e, PAU_JOB, 1, &reg);
	if (err)
		goto fail;
	for (size_t i = 0; i < r->npkts; i++) {
		float *v = (float *)(void *)(r->pkts + i * r->pkt_len + r->hl);
		for (uint32_t k = 0; k < celems; k++)
			v[k] = (float)((i * 31 + k) % 2001) / 128.0f - 7.8f;
	}
	return 0;
fail:
	pau_free(r);
	return err;
}

/* One round: headers for the next round (not timed), then every packet once (timed).
 * Returns CPU seconds, or < 0 when a packet was rejected. */
static double pau_round(struct pau_run *r)
{
	for (size_t i = 0; i < r->npkts; i++)
		pau_build(r, i, TALLY_OP_PUSH, r->pkts + i * r->pkt_len + r->hl, r->chunk);
	r->round++;
	uint64_t bad = 0;
	double t0 = perf_cpu_now();
	for (size_t i = 0; i < r->npkts; i++)
		bad += tally_engine_rx(r->e, r->pkts + i * r->pkt_len, r->pkt_len,
				       &r->addr[i % r->workers]) != TALLY_OK;
	double t = perf_cpu_now() - t0;
	return bad ? -1.0 : t;
}

/* GB/s of push payload per CPU second over at least min_s. */
static double pau_rep(struct pau_run *r, double min_s)
{
	const struct tally_engine_stats *st = tally_engine_stats(r->e);
	double t = 0;
	tally_engine_stats_reset(r->e);
	while (t < min_s) {
		double d = pau_round(r);
		if (d < 0)
			return -1.0;
		t += d;
	}
	return (double)st->push_bytes / t / 1e9;
}

/* R_mac: GB/s of push payload through tally_auth_verify alone (the MAC the engine runs on
 * every push, decode excluded), over the auth run's signed packets, at least min_s. */
static double pau_mac_rate(struct pau_run *r, double min_s)
{
	struct tally_pkt p;
	double t0 = perf_cpu_now(), t = 0;
	size_t n = 0;
	while ((t = perf_cpu_now() - t0) < min_s)
		for (size_t i = 0; i < r->npkts; i++, n++) {
			const uint8_t *b = r->pkts + i * r->pkt_len;
			if (tally_proto_decode(b, r->pkt_len, &p) != TALLY_OK ||
			    tally_auth_verify_s(r->w, b, r->sess, &p) != 0)
				return -1.0;
		}
	return (double)n * (double)r->chunk / t / 1e9;
}

/* The best auth/plain ratio when every pushed byte is MACed once more than plain work:
 * per byte 1/R_engine + 1/R_mac, so R_mac / (R_mac + R_engine); with the RESULT's payload
 * MACed once per chunk too (1/W of the pushed bytes): R_mac / (R_mac + R_engine (1 + 1/W)). */
static double pau_bound(double mac, double plain, double extra)
{
	return mac / (mac + plain * (1.0 + extra));
}

static int pau_size(const struct pau_opts *o, size_t chunk)
{
	/* runs: plain, auth (MAC per packet), conn (setup-authenticated connections); g[3]: mac */
	struct pau_run run[3];
	double *g[4], *ratio = calloc((size_t)o->reps, sizeof(double)), med[4];
	double *cratio = calloc((size_t)o->reps, sizeof(double));
	int err = -ENOMEM, ready = 0;
	for (int k = 0; k < 4; k++)
		g[k] = calloc((size_t)o->reps, sizeof(double));
	if (!g[0] || !g[1] || !g[2] || !g[3] || !ratio || !cratio)
		goto out;
	for (int k = 0; k < 3; k++, ready++) {
		err = pau_setup(&run[k], o, chunk, k);
		if (err)
			goto out;
		if (pau_round(&run[k]) < 0) { /* warm-up */
			err = -EPROTO;
			ready++;
			goto out;
		}
	}
	for (int rep = 0; rep < o->reps; rep++) {
		for (int k = 0; k < 3; k++)
			if ((g[k][rep] = pau_rep(&run[k], o->min_s)) < 0) {
				err = -EPROTO;
				goto out;
			}
		ratio[rep] = g[1][rep] / g[0][rep];
		cratio[rep] = g[2][rep] / g[0][rep];
		if ((g[3][rep] = pau_mac_rate(&run[1], o->min_s / 2)) < 0) {
			err = -EPROTO;
			goto out;
		}
	}
	for (int k = 0; k < 4; k++)
		med[k] = perf_median(g[k], (size_t)o->reps);
	double rm = perf_median(ratio, (size_t)o->reps), rc = perf_median(cratio, (size_t)o->reps);
	double b1 = pau_bound(med[3], med[0], 0), b2 = pau_bound(med[3], med[0], 1.0 / o->workers);
	if (o->json)
		printf("{\"bench\":\"engine_auth\",\"workers\":%u,\"chunk_bytes\":%zu,\"chunks\":%u,"
		       "\"reps\":%d,\"plain_gbps\":%.3f,\"auth_gbps\":%.3f,\"ratio\":%.4f,"
		       "\"plain_cores_per_100g\":%.4f,\"auth_cores_per_100g\":%.4f,"
		       "\"mac_gbps\":%.3f,\"bound_verify\":%.4f,\"bound_verify_sign\":%.4f,"
		       "\"conn_gbps\":%.3f,\"conn_ratio\":%.4f,\"conn_cores_per_100g\":%.4f,"
		       "\"gmac_backend\":\"%s\"}\n",
		       o->workers, chunk, o->chunks, o->reps, med[0], med[1], rm, 12.5 / med[0],
		       12.5 / med[1], med[3], b1, b2, med[2], rc, 12.5 / med[2], tally_auth_backend());
	else
		printf("%6zu %10.2f %10.2f %8.3f %12.3f %12.3f %9.2f %8.3f %8.3f %10.2f %8.3f\n",
		       chunk, med[0], med[1], rm, 12.5 / med[0], 12.5 / med[1], med[3], b1, b2,
		       med[2], rc);
	fflush(stdout);
	err = 0;
out:
	for (int k = 0; k < ready && k < 3; k++)
		pau_free(&run[k]);
	for (int k = 0; k < 4; k++)
		free(g[k]);
	free(ratio);
	free(cratio);
	return err;
}

static int pau_parse(int argc, char **argv, struct pau_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->workers = 4;
	o->chunks = 256;
	o->reps = 7;
	o->min_s = 0.2;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
		char *end = NULL;
		if (!strcmp(a, "--auth"))
			continue;
		if (!strcmp(a, "--json")) {
			o->json = 1;
			continue;
		}
		i++;
		if (!strcmp(a, "--workers"))
			o->workers = (unsigned)strtoul(v, &end, 10);
		else if (!strcmp(a, "--chunks"))
			o->chunks = (unsigned)strtoul(v, &end, 10);
		else if (!strcmp(a, "--reps"))
			o->reps = (int)strtol(v, &end, 10);
		else if (!strcmp(a, "--min-time"))
			o->min_s = strtod(v, &end);
		else if (!strcmp(a, "--chunk") && o->nsizes < PAU_MAX_SIZES &&
			 perf_parse_size(v, &o->sizes[o->nsizes]) == 0 &&
			 o->sizes[o->nsizes] >= 4 && o->sizes[o->nsizes] % 4 == 0 &&
			 o->sizes[o->nsizes] <= TALLY_MAX_PAYLOAD)
			end = (char *)v + strlen(v), o->nsizes++;
		if (!end || *end || !*v || o->workers < 1 || o->workers > TALLY_MAX_WORKERS ||
		    o->chunks < 1 || o->chunks > (1u << 20) || o->reps < 1 || o->reps > 1000 ||
		    !(o->min_s > 0 && o->min_s <= 60)) {
			fprintf(stderr, "tally-perf engine --auth: bad option %s '%s' (--workers "
				"1..1024, --chunk 4..9000 multiple of 4 (up to 4 times), --chunks, "
				"--reps 1..1000, --min-time (0,60])\n", a, v);
			return 2;
		}
	}
	if (!o->nsizes) {
		o->sizes[o->nsizes++] = 1024;
		o->sizes[o->nsizes++] = 8192;
	}
	return 0;
}

int perf_engine_auth_main(int argc, char **argv)
{
	struct pau_opts o;
	int rc = pau_parse(argc, argv, &o);
	if (rc)
		return rc;
	rc = tally_sum_init();
	if (rc < 0)
		return 1;
	if (!tally_auth_backend())
		return 2; /* TALLY_AUTH_BACKEND names none: tally_auth said which */
	if (!o.json) {
		printf("tally-perf engine --auth: one engine, %u workers, f32, %u chunks per key, "
		       "isa %s, GMAC %s; medians of %d reps (plain and auth interleaved)\n",
		       o.workers, o.chunks, tally_sum_isa_name(tally_sum_isa()),
		       tally_auth_backend(), o.reps);
		printf("goodput = push payload summed per CPU second; auth = AES-256-GMAC verify "
		       "per push + per chunk one payload tag, per RESULT copy a header tag\n"
		       "mac = R_mac, push payload GB/s through decode + tally_auth_verify alone; "
		       "bound = R_mac/(R_mac+R_plain) (every pushed byte MACed once), bound+res "
		       "= R_mac/(R_mac+R_plain(1+1/W)) (and the RESULT payload once per chunk)\n"
		       "conn = the keyed job over connections authenticated at setup (verbs RC "
		       "QPs that proved the key at connect: no per-packet MAC), ratio conn/plain\n");
	}
	perf_auth_mac_table(o.sizes, o.nsizes, o.min_s, o.json);
	if (!o.json)
		printf("%6s %10s %10s %8s %12s %12s %9s %8s %8s %10s %8s\n", "chunk", "plain GB/s",
		       "auth GB/s", "ratio", "plain c/100G", "auth c/100G", "mac GB/s", "bound",
		       "bound+res", "conn GB/s", "conn/pl");
	for (unsigned s = 0; s < o.nsizes; s++) {
		rc = pau_size(&o, o.sizes[s]);
		if (rc < 0) {
			fprintf(stderr, "tally-perf engine --auth: chunk %zu: %s\n", o.sizes[s],
				strerror(-rc));
			return 1;
		}
	}
	return 0;
}
