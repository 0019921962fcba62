/* SPDX-License-Identifier: Apache-2.0
 * tally-worker — joins a job on an appliance, registers keys, pushes seeded gradients for N
 * rounds and verifies every result against the sum it computes from the seeds of all ranks.
 * Exits 0 when every element of every round matched, 1 on any mismatch or error, 2 on usage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tally_client.h"
#include "worker_data.h"
#include "worker_xport.h"

struct wk_opts {
	struct wx_opts x;
	uint32_t job_id;
	uint64_t token;
	uint32_t rank, world;
	uint32_t nkeys, key_base;
	size_t bytes;
	uint32_t chunk_bytes;
	uint32_t rounds;
	double seconds;      /* stop starting rounds after this long (0: run all rounds) */
	int blast;           /* forward baseline: blast PUSH frames, count what comes back */
	uint32_t blast_cores;
	uint32_t window;
	uint32_t join_ms, give_up_ms, rto_us, rto_min_us;
	uint64_t seed;
	enum tally_dtype dtype;
	enum wd_values values;
	int deterministic;
	int verify;
	int json;
	int linger;          /* after the report, stay attached until SIGTERM/SIGINT */
	int barrier;         /* all ranks meet before each round (default on) */
	uint32_t warmup;     /* untimed (verified) rounds before the timed ones */
};

static void wk_usage(FILE *f)
{
	fprintf(f,
		"usage: tally-worker --host ADDR [options]\n"
		"  --host ADDR          appliance address (udp) \n"
		"  --port N             appliance UDP base port (default 9170)\n"
		"  --transport T        udp (default) or dpdk\n"
		"  --dpdk ARGS          EAL arguments for --transport dpdk (one string)\n"
		"  --local-ip A/LEN     our address on the DPDK port; --dpdk-port NAME (default first)\n"
		"  --bind ADDR          local address (udp)\n"
		"  --gso / --no-gro     UDP segmentation offload on send / no GRO on receive\n"
		"  --job N --token N    job id and 64-bit token (default 1, 1)\n"
		"  --rank N --world N   this worker's rank and the job's world size (default 0, 1)\n"
		"  --bytes SIZE         gradient bytes per worker per round (default 64M)\n"
		"  --keys N             split into N keys (default 16); --key-base N: first key id\n"
		"  --dtype T            f32 (default), bf16, f16, i32\n"
		"  --chunk BYTES        largest chunk payload (default 8192)\n"
		"  --rounds N           rounds (default 3)\n"
		"  --window N           chunks in flight per appliance core (default 64)\n"
		"  --seed N             data seed (default 1)\n"
		"  --values V           random (default) or exact (order-independent sums)\n"
		"  --deterministic      register deterministic keys: results checked bit-exact\n"
		"  --no-verify          skip the check (benchmarking only)\n"
		"  --join-ms N          JOIN timeout (default 10000); --give-up-ms N (default 30000)\n"
		"  --rto-us N           initial retransmission timeout (default 500)\n"
		"  --rto-min-us N       floor of the adaptive timeout (default 20; shaped links:\n"
		"                       their queueing delay, or waiting is taken for loss)\n"
		"  --seconds T          stop starting rounds after T seconds (--rounds is the cap)\n"
		"  --no-barrier         do not wait for every rank before each round\n"
		"  --warmup N           N untimed (still verified) rounds first (default 0)\n"
		"  --blast              I/O baseline against tallyd --io-forward: send PUSH frames of\n"
		"                       one chunk for --seconds, count what comes back (no JOIN)\n"
		"  --blast-cores N      appliance cores to spread the blast over (default 1)\n"
		"  --json               one JSON object on stdout\n"
		"  --linger             after the report stay attached (no polling) until SIGTERM:\n"
		"                       a memif server must stop before its clients detach\n");
}

static int wk_u64(const char *s, uint64_t *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 0);
	return (errno || end == s || *end || *s == '-') ? -EINVAL : 0;
}

static int wk_u32(const char *s, uint32_t *v)
{
	uint64_t x;

	if (wk_u64(s, &x) || x > UINT32_MAX)
		return -EINVAL;
	*v = (uint32_t)x;
	return 0;
}

static int wk_size(const char *s, size_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	default: break;
	}
	if (*end)
		return -EINVAL;
	*out = (size_t)v;
	return 0;
}

static int wk_parse(int argc, char **argv, struct wk_opts *o)
{
	enum { O_HOST = 256, O_PORT, O_TRANSPORT, O_DPDK, O_BIND, O_GSO, O_NOGRO, O_JOB,
	       O_TOKEN, O_RANK, O_WORLD, O_BYTES, O_KEYS, O_KEYBASE, O_DTYPE, O_CHUNK, O_ROUNDS,
	       O_WINDOW, O_SEED, O_VALUES, O_DET, O_NOVERIFY, O_JOINMS, O_GIVEUP, O_RTO, O_JSON,
	       O_HELP, O_LOCALIP, O_DPDKPORT, O_SECONDS, O_BLAST, O_BLASTCORES, O_LINGER,
	       O_NOBARRIER, O_WARMUP, O_RTOMIN };
	static const struct option lo[] = {
		{ "host", 1, 0, O_HOST }, { "port", 1, 0, O_PORT },
		{ "transport", 1, 0, O_TRANSPORT }, { "dpdk", 1, 0, O_DPDK },
		{ "bind", 1, 0, O_BIND }, { "gso", 0, 0, O_GSO }, { "no-gro", 0, 0, O_NOGRO },
		{ "job", 1, 0, O_JOB }, { "token", 1, 0, O_TOKEN }, { "rank", 1, 0, O_RANK },
		{ "world", 1, 0, O_WORLD }, { "bytes", 1, 0, O_BYTES }, { "keys", 1, 0, O_KEYS },
		{ "key-base", 1, 0, O_KEYBASE }, { "dtype", 1, 0, O_DTYPE },
		{ "chunk", 1, 0, O_CHUNK }, { "rounds", 1, 0, O_ROUNDS },
		{ "window", 1, 0, O_WINDOW }, { "seed", 1, 0, O_SEED },
		{ "values", 1, 0, O_VALUES }, { "deterministic", 0, 0, O_DET },
		{ "no-verify", 0, 0, O_NOVERIFY }, { "join-ms", 1, 0, O_JOINMS },
		{ "give-up-ms", 1, 0, O_GIVEUP }, { "rto-us", 1, 0, O_RTO },
		{ "json", 0, 0, O_JSON }, { "help", 0, 0, O_HELP },
		{ "local-ip", 1, 0, O_LOCALIP }, { "dpdk-port", 1, 0, O_DPDKPORT },
		{ "seconds", 1, 0, O_SECONDS }, { "blast", 0, 0, O_BLAST },
		{ "blast-cores", 1, 0, O_BLASTCORES }, { "linger", 0, 0, O_LINGER },
		{ "no-barrier", 0, 0, O_NOBARRIER }, { "warmup", 1, 0, O_WARMUP },
		{ "rto-min-us", 1, 0, O_RTOMIN }, { 0, 0, 0, 0 } };
	uint32_t port = TALLY_DEFAULT_PORT;
	int c, bad = 0;

	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case O_HOST: o->x.host = optarg; break;
		case O_PORT: bad |= wk_u32(optarg, &port) || !port || port > 65535; break;
		case O_TRANSPORT:
			if (!strcmp(optarg, "udp"))
				o->x.kind = WX_UDP;
			else if (!strcmp(optarg, "dpdk"))
				o->x.kind = WX_DPDK;
			else
				bad = 1;
			break;
		case O_DPDK: o->x.eal_args = optarg; break;
		case O_LOCALIP: o->x.local_ip = optarg; break;
		case O_DPDKPORT: o->x.dpdk_port = optarg; break;
		case O_SECONDS: {
			char *e;

			o->seconds = strtod(optarg, &e);
			bad = e == optarg || *e || !(o->seconds >= 0);
			break;
		}
		case O_BLAST: o->blast = 1; break;
		case O_LINGER: o->linger = 1; break;
		case O_NOBARRIER: o->barrier = 0; break;
		case O_WARMUP: bad |= wk_u32(optarg, &o->warmup) || o->warmup > 1000; break;
		case O_BLASTCORES:
			bad |= wk_u32(optarg, &o->blast_cores) || !o->blast_cores ||
			       o->blast_cores > 256;
			break;
		case O_BIND: o->x.bind = optarg; break;
		case O_GSO: o->x.gso = 1; break;
		case O_NOGRO: o->x.gro = 0; break;
		case O_JOB: bad |= wk_u32(optarg, &o->job_id); break;
		case O_TOKEN: bad |= wk_u64(optarg, &o->token); break;
		case O_RANK: bad |= wk_u32(optarg, &o->rank); break;
		case O_WORLD: bad |= wk_u32(optarg, &o->world); break;
		case O_BYTES: bad |= wk_size(optarg, &o->bytes); break;
		case O_KEYS: bad |= wk_u32(optarg, &o->nkeys); break;
		case O_KEYBASE: bad |= wk_u32(optarg, &o->key_base); break;
		case O_DTYPE: {
			int d = tally_dtype_parse(optarg);

			if (d < 0)
				bad = 1;
			else
				o->dtype = (enum tally_dtype)d;
			break;
		}
		case O_CHUNK: bad |= wk_u32(optarg, &o->chunk_bytes); break;
		case O_ROUNDS: bad |= wk_u32(optarg, &o->rounds); break;
		case O_WINDOW: bad |= wk_u32(optarg, &o->window); break;
		case O_SEED: bad |= wk_u64(optarg, &o->seed); break;
		case O_VALUES:
			if (!strcmp(optarg, "random"))
				o->values = WD_RANDOM;
			else if (!strcmp(optarg, "exact"))
				o->values = WD_EXACT;
			else
				bad = 1;
			break;
		case O_DET: o->deterministic = 1; break;
		case O_NOVERIFY: o->verify = 0; break;
		case O_JOINMS: bad |= wk_u32(optarg, &o->join_ms); break;
		case O_GIVEUP: bad |= wk_u32(optarg, &o->give_up_ms); break;
		case O_RTO: bad |= wk_u32(optarg, &o->rto_us); break;
		case O_RTOMIN:
			bad |= wk_u32(optarg, &o->rto_min_us) || !o->rto_min_us ||
			       o->rto_min_us > 10000000;
			break;
		case O_JSON: o->json = 1; break;
		case O_HELP: case 'h': wk_usage(stdout); exit(0);
		default: return -EINVAL;
		}
		if (bad) {
			fprintf(stderr, "tally-worker: bad value '%s' for --%s\n", optarg,
				lo[c - O_HOST].name);
			return -EINVAL;
		}
	}
	o->x.base_port = (uint16_t)port;
	if (optind < argc) {
		fprintf(stderr, "tally-worker: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	if (!o->x.host) {
		fprintf(stderr, "tally-worker: --host is required\n");
		return -EINVAL;
	}
	if (!o->world || o->world > TALLY_MAX_WORKERS || o->rank >= o->world) {
		fprintf(stderr, "tally-worker: need rank < world <= %u (rank %u, world %u)\n",
			TALLY_MAX_WORKERS, o->rank, o->world);
		return -EINVAL;
	}
	if (!o->nkeys || !o->rounds || o->chunk_bytes < 64 || o->chunk_bytes > TALLY_MAX_PAYLOAD ||
	    o->bytes / tally_dtype_size(o->dtype) < o->nkeys ||
	    o->bytes / tally_dtype_size(o->dtype) / o->nkeys > UINT32_MAX) {
		fprintf(stderr, "tally-worker: need keys >= 1, rounds >= 1, 64 <= chunk <= %u, "
			"1 <= bytes/keys/dtype size < 2^32 elements\n", TALLY_MAX_PAYLOAD);
		return -EINVAL;
	}
	return 0;
}

static double wk_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct wk_key {
	uint32_t id;
	size_t first;  /* element offset of this key in the worker's buffer */
	size_t n;
	int handle;
};

static void wk_print(const struct wk_opts *o, struct worker_xport *wx, struct tally_client *c,
		     double secs, double r0secs, double verify_secs, const struct wd_check *chk, int rc,
		     const char *err)
{
	const struct tally_client_stats *s = tally_client_stats(c);
	double bytes = o->blast ? (double)s->rx_pkts * (o->chunk_bytes / tally_dtype_size(o->dtype) *
						     tally_dtype_size(o->dtype)) :
		(double)o->bytes * o->rounds;
	double gbps = secs > 0 ? bytes * 8 / secs / 1e9 : 0;
	uint64_t drops = 0;

	for (int r = 0; r < TALLY_R_COUNT; r++)
		drops += s->drops[r];
	if (o->json) {
		printf("{\"mode\":\"%s\",\"rank\":%u,\"world\":%u,\"transport\":\"%s\",\"dtype\":\"%s\","
		       "\"values\":\"%s\",\"deterministic\":%s,\"bytes\":%zu,\"keys\":%u,"
		       "\"rounds\":%u,\"warmup\":%u,\"chunk_bytes\":%u,\"seconds\":%.6f,"
		       "\"first_round_seconds\":%.6f,"
		       "\"verify_seconds\":%.6f,"
		       "\"gbps\":%.3f,\"tx_pkts\":%" PRIu64 ",\"rx_pkts\":%" PRIu64
		       ",\"pushes\":%" PRIu64 ",\"retransmits\":%" PRIu64 ",\"results\":%" PRIu64
		       ",\"dup_results\":%" PRIu64 ",\"excluded\":%" PRIu64 ",\"errors\":%" PRIu64
		       ",\"drops\":%" PRIu64 ",\"checked\":%" PRIu64 ",\"mismatches\":%" PRIu64
		       ",\"max_err\":%.6g,\"max_err_ratio\":%.6g",
		       o->blast ? "blast" : "allreduce", o->rank, o->world,
		       o->x.kind == WX_DPDK ? "dpdk" : "udp", tally_dtype_name(o->dtype), o->values == WD_EXACT ? "exact" : "random",
		       o->deterministic ? "true" : "false", o->bytes, o->nkeys, o->rounds,
		       o->warmup, o->chunk_bytes, secs, r0secs, verify_secs, gbps, s->tx_pkts, s->rx_pkts, s->pushes,
		       s->retransmits, s->results, s->dup_results, s->excluded, s->errors, drops,
		       chk->checked, chk->mismatches, chk->max_err, chk->max_err_ratio);
		wx_json(wx);
		printf(",\"ok\":%s,\"error\":\"", rc ? "false" : "true");
		for (const char *p = err; *p; p++)
			if (*p != '"' && *p != '\\' && (unsigned char)*p >= 0x20)
				putchar(*p);
		printf("\"}\n");
		fflush(stdout);
		return;
	}
	printf("tally-worker rank %u/%u %s %s: %u rounds x %zu bytes in %u keys, chunk %u\n",
	       o->rank, o->world, o->x.kind == WX_DPDK ? "dpdk" : "udp",
	       tally_dtype_name(o->dtype), o->rounds, o->bytes, o->nkeys, o->chunk_bytes);
	printf("  allreduce %.3f s (%.2f Gbit/s of gradients), verify %.3f s\n", secs, gbps,
	       verify_secs);
	printf("  packets tx %" PRIu64 " rx %" PRIu64 ", pushes %" PRIu64 ", retransmits %" PRIu64
	       ", results %" PRIu64 " (duplicates %" PRIu64 "), excluded %" PRIu64
	       ", errors %" PRIu64 ", drops %" PRIu64 "\n",
	       s->tx_pkts, s->rx_pkts, s->pushes, s->retransmits, s->results, s->dup_results,
	       s->excluded, s->errors, drops);
	for (int r = 1; r < TALLY_R_COUNT; r++)
		if (s->drops[r])
			printf("    dropped %s: %" PRIu64 "\n", tally_reason_name((enum tally_reason)r),
			       s->drops[r]);
	printf("  checked %" PRIu64 " elements, %" PRIu64 " mismatches, max error %.3g (%.3g of the bound)\n",
	       chk->checked, chk->mismatches, chk->max_err, chk->max_err_ratio);
	if (chk->mismatches)
		printf("  first mismatch: %s\n", chk->first);
	printf("  %s%s\n", rc ? "FAILED: " : "OK", err);
}

static int wk_run(const struct wk_opts *o, struct worker_xport *wx, struct tally_client *c,
		  struct wk_key *keys, void *in, void *out, double *secs, double *r0secs,
		  double *vsecs, struct wd_check *chk, uint32_t *done, char *err, size_t errlen)
{
	struct wd_gen g = { .seed = o->seed, .dtype = o->dtype, .values = o->values };
	size_t es = tally_dtype_size(o->dtype);
	int bit_exact = o->deterministic || o->values == WD_EXACT || o->dtype == TALLY_DT_I32;
	int rc;

	rc = tally_client_join(c, o->join_ms);
	if (rc) {
		snprintf(err, errlen, "join job %u as rank %u/%u: %s (%s)", o->job_id, o->rank,
			 o->world, strerror(-rc), tally_client_strerror(c));
		return rc;
	}
	for (uint32_t k = 0; k < o->nkeys; k++) {
		struct tally_register reg = {
			.nelems = (uint32_t)keys[k].n, .chunk_elems = (uint32_t)(o->chunk_bytes / es),
			.dtype = (uint8_t)o->dtype,
			.flags = o->deterministic ? TALLY_KEY_DETERMINISTIC : 0,
			.participants = (uint16_t)o->world, .quorum = (uint16_t)o->world,
		};

		rc = tally_client_register(c, keys[k].id, &reg);
		if (rc) {
			snprintf(err, errlen, "register key %u: %s (%s)", keys[k].id, strerror(-rc),
				 tally_client_strerror(c));
			return rc;
		}
	}
	/* --seconds: ranks must agree on the last round (a round one rank skips would never
	 * complete for the others), so they vote through the appliance itself: one i32 key,
	 * each pushes 1 to go on; all go on only when the sum is the world size. The same key
	 * is a barrier before every round (MPI and Gloo programs barrier before timing too):
	 * otherwise the first rank's first round includes waiting for the last rank to start,
	 * generate its data and join, which dwarfs a small allreduce. */
	uint32_t vote_key = o->key_base + o->nkeys, vote_round = 0;
	int voting = o->seconds > 0 || (o->barrier && o->world > 1);

	if (voting) {
		struct tally_register vr = { .nelems = 1, .chunk_elems = 1, .dtype = TALLY_DT_I32,
					     .participants = (uint16_t)o->world,
					     .quorum = (uint16_t)o->world };

		rc = tally_client_register(c, vote_key, &vr);
		if (rc) {
			snprintf(err, errlen, "register vote key %u: %s (%s)", vote_key,
				 strerror(-rc), tally_client_strerror(c));
			return rc;
		}
	}
	double start = wk_now();

	/* --warmup: the first rounds run and are verified but not timed (nccl-tests' warm-up
	 * iterations): the first round pays for cold state, first RTT samples included */
	for (uint32_t r = 0; r < o->warmup + o->rounds; r++) {
		int timed = r >= o->warmup;
		double t0, t1;

		if (r == o->warmup)
			start = wk_now();

		/* --no-verify (benchmarks): round 0's data serves every round, so the time goes
		 * to the allreduce, not to generating gradients */
		if (o->verify || !r) {
			for (uint32_t k = 0; k < o->nkeys; k++)
				wd_fill(&g, o->rank, keys[k].id, r, 0, keys[k].n,
					(uint8_t *)in + keys[k].first * es);
			memset(out, 0xff, o->bytes); /* a chunk never written cannot pass */
		}
		/* Every round starts together: the vote (--seconds) or a barrier, after this rank
		 * generated its data and checked the last result. On shared cores a rank that
		 * generates or verifies (untimed for it) while the others run a timed round
		 * slows them down; MPI and Gloo get the same barrier. */
		if (o->seconds > 0 || (o->barrier && o->world > 1)) {
			int32_t go = o->seconds <= 0 || !timed || wk_now() - start < o->seconds;
			int32_t sum = 0;

			rc = tally_client_allreduce(c, vote_key, vote_round++, &go, &sum);
			if (rc) {
				snprintf(err, errlen, "%s before round %u: %s (%s)",
					 o->seconds > 0 ? "vote" : "barrier", r, strerror(-rc),
					 tally_client_strerror(c));
				return rc;
			}
			if (sum != (int32_t)o->world)
				break;
		}
		if (timed)
			*done = r + 1 - o->warmup;
		t0 = wk_now();
		for (uint32_t k = 0; k < o->nkeys; k++) {
			keys[k].handle = tally_client_start(c, keys[k].id, r,
							    (uint8_t *)in + keys[k].first * es,
							    (uint8_t *)out + keys[k].first * es);
			if (keys[k].handle < 0) {
				rc = keys[k].handle;
				snprintf(err, errlen, "start key %u round %u: %s (%s)", keys[k].id, r,
					 strerror(-rc), tally_client_strerror(c));
				return rc;
			}
		}
		for (uint32_t k = 0; k < o->nkeys; k++) {
			rc = tally_client_wait(c, keys[k].handle);
			if (rc) {
				snprintf(err, errlen, "allreduce key %u round %u: %s (%s)", keys[k].id,
					 r, strerror(-rc), tally_client_strerror(c));
				return rc;
			}
		}
		t1 = wk_now();
		if (timed)
			*secs += t1 - t0;
		if (!r)
			*r0secs = t1 - t0;
		if (!o->verify)
			continue;
		for (uint32_t k = 0; k < o->nkeys; k++)
			wd_verify(&g, o->world, keys[k].id, r, 0, keys[k].n,
				  (uint8_t *)out + keys[k].first * es, bit_exact, chk);
		*vsecs += wk_now() - t1;
		if (chk->mismatches) {
			snprintf(err, errlen, "%" PRIu64 " mismatching elements after round %u; first: %s",
				 chk->mismatches, r, chk->first);
			return -EBADMSG;
		}
	}
	(void)wx;
	return 0;
}

/* Forward baseline: PUSH frames of one chunk to the appliance's cores, a window in flight,
 * for o->seconds; tallyd --io-forward bounces them and the session counts them (rx_pkts) as
 * it drops them. The frames are the same size as the aggregation run's, so the two rates
 * compare packet for packet. */
static int wk_blast(const struct wk_opts *o, struct worker_xport *wx, struct tally_client *c,
		    const void *payload, double *secs)
{
	size_t es = tally_dtype_size(o->dtype), len = o->chunk_bytes / es * es;
	struct tally_hdr h = { .op = TALLY_OP_PUSH, .job_id = o->job_id, .rank = o->rank,
			       .token = o->token, .key = o->key_base, .count = (uint32_t)(len / es),
			       .dtype = (uint8_t)o->dtype };
	const struct tally_client_stats *st = tally_client_stats(c);
	uint8_t hdr[TALLY_HDR_LEN];
	uint64_t sent = 0, base_rx = st->rx_pkts, last_rx = 0, lost = 0;
	uint32_t window = o->window * o->blast_cores;
	double t0 = wk_now(), tlast = t0, dur = o->seconds > 0 ? o->seconds : 1.0, now;

	tally_proto_finish(hdr, &h, payload, len);
	while ((now = wk_now()) - t0 < dur) {
		uint64_t rx = st->rx_pkts - base_rx;

		while (sent - rx - lost < window) {
			struct tally_addr to = { .core = (uint32_t)(sent % o->blast_cores) };

			if (wx->ops->send(wx->ctx, &to, hdr, payload, len))
				break;
			sent++;
		}
		wx->ops->poll(wx->ctx, 0);
		if (st->rx_pkts - base_rx != last_rx) {
			last_rx = st->rx_pkts - base_rx;
			tlast = now;
		} else if (now - tlast > 0.002) {
			lost = sent - last_rx; /* nothing came back for 2 ms: count the rest lost */
			tlast = now;
		}
	}
	*secs = now - t0;
	return 0;
}

/* DPDK 22.11's memif unmaps a port's rings from its interrupt thread when the peer goes away,
 * racing a receive in progress on the server: so the server stops first, while we wait here
 * without touching the port. */
static void wk_linger(void)
{
	sigset_t set;
	int sig;

	fflush(stdout);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, NULL);
	sigwait(&set, &sig);
}

int main(int argc, char **argv)
{
	struct wk_opts o = {
		.x = { .kind = WX_UDP, .gro = 1 },
		.job_id = 1, .token = 1, .world = 1, .nkeys = 16, .bytes = 64u << 20,
		.chunk_bytes = 8192, .rounds = 3, .window = 64, .join_ms = 10000,
		.give_up_ms = 30000, .rto_us = 500, .seed = 1, .dtype = TALLY_DT_F32, .verify = 1,
		.blast_cores = 1, .barrier = 1,
	};
	struct tally_client_cfg cc = { 0 };
	struct worker_xport wx = { 0 };
	struct tally_client *c = NULL;
	struct wk_key *keys = NULL;
	struct wd_check chk = { 0 };
	double secs = 0, vsecs = 0, r0secs = 0;
	char err[512] = "";
	void *in = NULL, *out = NULL;
	size_t es, total;
	int rc;

	if (wk_parse(argc, argv, &o)) {
		wk_usage(stderr);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	es = tally_dtype_size(o.dtype);
	total = o.bytes / es;
	o.bytes = total * es;
	keys = calloc(o.nkeys, sizeof(*keys));
	in = aligned_alloc(64, (o.bytes + 63) & ~(size_t)63);
	out = aligned_alloc(64, (o.bytes + 63) & ~(size_t)63);
	if (!keys || !in || !out) {
		fprintf(stderr, "tally-worker: cannot allocate 2 x %zu bytes\n", o.bytes);
		rc = 1;
		goto out;
	}
	for (uint32_t k = 0; k < o.nkeys; k++) {
		keys[k].id = o.key_base + k;
		keys[k].first = total / o.nkeys * k;
		keys[k].n = k + 1 < o.nkeys ? total / o.nkeys : total - keys[k].first;
	}
	rc = wx_open(&o.x, &wx, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "tally-worker: %s\n", err);
		rc = 1;
		goto out;
	}
	tally_client_cfg_defaults(&cc);
	cc.job_id = o.job_id;
	cc.token = o.token;
	cc.rank = o.rank;
	cc.world_size = o.world;
	cc.max_chunk_bytes = o.chunk_bytes;
	cc.window = o.window;
	cc.rto_init_us = o.rto_us;
	cc.rto_min_us = o.rto_min_us;
	if (o.rto_min_us > cc.rto_init_us)
		cc.rto_init_us = o.rto_min_us; /* the floor holds from the first push */
	if (cc.rto_init_us > 100000)
		cc.rto_max_us = cc.rto_init_us; /* the default ceiling (100 ms) below them */
	cc.give_up_ms = o.give_up_ms;
	if (cc.max_ops < o.nkeys)
		cc.max_ops = o.nkeys;
	c = tally_client_create(&cc, wx.ops, wx.ctx, &rc);
	if (!c) {
		fprintf(stderr, "tally-worker: client session: %s\n", strerror(-rc));
		rc = 1;
		goto out;
	}
	wx_attach(&wx, c);
	if (o.blast) {
		rc = wk_blast(&o, &wx, c, in, &secs);
		o.rounds = 0;
	} else {
		uint32_t done = 0;

		rc = wk_run(&o, &wx, c, keys, in, out, &secs, &r0secs, &vsecs, &chk, &done, err,
			    sizeof(err));
		o.rounds = done;
	}
	tally_client_bye(c);
	wx_flush(&wx);
	wk_print(&o, &wx, c, secs, r0secs, vsecs, &chk, rc, err);
	if (rc && !o.json)
		fprintf(stderr, "tally-worker rank %u: %s\n", o.rank, err);
	rc = rc ? 1 : 0;
	if (o.linger)
		wk_linger();
out:
	if (c)
		tally_client_destroy(c);
	wx_close(&wx);
	free(keys);
	free(in);
	free(out);
	return rc;
}
