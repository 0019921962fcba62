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

#include "tally_sum.h"
#include "tally_auth.h"
#include "tally_client.h"
#include "worker_data.h"
#include "worker_failover.h"
#include "worker_opts.h"
#include "worker_xport.h"

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
		     double secs, double r0secs, double median, double verify_secs,
		     const struct wd_check *chk, int rc, const char *err)
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
		       "\"first_round_seconds\":%.6f,\"median_round_seconds\":%.6f,"
		       "\"verify_seconds\":%.6f,"
		       "\"gbps\":%.3f,\"tx_pkts\":%" PRIu64 ",\"rx_pkts\":%" PRIu64
		       ",\"pushes\":%" PRIu64 ",\"retransmits\":%" PRIu64 ",\"results\":%" PRIu64
		       ",\"dup_results\":%" PRIu64 ",\"excluded\":%" PRIu64 ",\"errors\":%" PRIu64
		       ",\"drops\":%" PRIu64 ",\"checked\":%" PRIu64 ",\"mismatches\":%" PRIu64
		       ",\"max_err\":%.6g,\"max_err_ratio\":%.6g",
		       o->blast ? "blast" : "allreduce", o->rank, o->world,
		       o->x.transport, tally_dtype_name(o->dtype), o->values == WD_EXACT ? "exact" : "random",
		       o->deterministic ? "true" : "false", o->bytes, o->nkeys, o->rounds,
		       o->warmup, o->chunk_bytes, secs, r0secs, median, verify_secs, gbps, s->tx_pkts, s->rx_pkts, s->pushes,
		       s->retransmits, s->results, s->dup_results, s->excluded, s->errors, drops,
		       chk->checked, chk->mismatches, chk->max_err, chk->max_err_ratio);
		printf(",\"fast_retransmits\":%" PRIu64 ",\"helds\":%" PRIu64 ",\"probes\":%" PRIu64
		       ",\"missing\":%" PRIu64 ",\"result_asks\":%" PRIu64, s->fast_retransmits,
		       s->helds, s->probes, s->missing, s->result_asks);
		printf(",\"window_now\":%" PRIu64 ",\"window_decreases\":%" PRIu64
		       ",\"window_increases\":%" PRIu64 ",\"window_min\":%" PRIu64
		       ",\"qdelay_us\":%" PRIu64 ",\"qtarget_us\":%" PRIu64, s->window_now,
		       s->window_decreases, s->window_increases, s->window_min, s->qdelay_us,
		       s->qtarget_us);
		printf(",\"restarts\":%" PRIu64 ",\"rejoins\":%" PRIu64 ",\"repushes\":%" PRIu64
		       ",\"pings\":%" PRIu64 ",\"complete_pushes\":%" PRIu64, s->restarts,
		       s->rejoins, s->repushes, s->pings, s->complete_pushes);
		printf(",\"join_unsigned_errors\":%" PRIu64, s->join_unsigned_errors);
		printf(",\"auth_signed\":%" PRIu64 ",\"auth_verified\":%" PRIu64
		       ",\"results_placed\":%" PRIu64 ",\"drop_reasons\":{", s->auth_signed,
		       s->auth_verified, s->results_placed);
		for (int r = 1, n = 0; r < TALLY_R_COUNT; r++)
			if (s->drops[r])
				printf("%s\"%s\":%" PRIu64, n++ ? "," : "",
				       tally_reason_name((enum tally_reason)r), s->drops[r]);
		printf("}");
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
	       o->rank, o->world, o->x.transport,
	       tally_dtype_name(o->dtype), o->rounds, o->bytes, o->nkeys, o->chunk_bytes);
	printf("  allreduce %.3f s (%.2f Gbit/s of gradients), verify %.3f s\n", secs, gbps,
	       verify_secs);
	printf("  packets tx %" PRIu64 " rx %" PRIu64 ", pushes %" PRIu64 ", retransmits %" PRIu64
	       ", results %" PRIu64 " (duplicates %" PRIu64 "), excluded %" PRIu64
	       ", errors %" PRIu64 ", drops %" PRIu64 "\n",
	       s->tx_pkts, s->rx_pkts, s->pushes, s->retransmits, s->results, s->dup_results,
	       s->excluded, s->errors, drops);
	if (s->restarts || s->pings)
		printf("  appliance restarts survived %" PRIu64 " (rejoins %" PRIu64 ", pushes re-sent %"
		       PRIu64 ", round sums sent %" PRIu64 "), liveness pings %" PRIu64 "\n",
		       s->restarts, s->rejoins, s->repushes, s->complete_pushes, s->pings);
	for (int r = 1; r < TALLY_R_COUNT; r++)
		if (s->drops[r])
			printf("    dropped %s: %" PRIu64 "\n", tally_reason_name((enum tally_reason)r),
			       s->drops[r]);
	wx_text(wx);
	printf("  checked %" PRIu64 " elements, %" PRIu64 " mismatches, max error %.3g (%.3g of the bound)\n",
	       chk->checked, chk->mismatches, chk->max_err, chk->max_err_ratio);
	if (chk->mismatches)
		printf("  first mismatch: %s\n", chk->first);
	printf("  %s%s\n", rc ? "FAILED: " : "OK", err);
}

/* --events: a JSON line on stderr, CLOCK_MONOTONIC seconds (what the benchmark's
 * time.monotonic() reads), so a driver can time kill -> noticed -> resumed. */
static void wk_event(struct tally_client *c, const char *ev, uint32_t round)
{
	static const char *const states[] = { "up", "silent", "down", "draining" };
	struct timespec ts;
	int st = tally_client_state(c);

	clock_gettime(CLOCK_MONOTONIC, &ts);
	fprintf(stderr, "{\"ev\":\"%s\",\"t\":%.6f,\"round\":%u,\"state\":\"%s\","
		"\"restarts\":%" PRIu64 "}\n", ev, ts.tv_sec + ts.tv_nsec / 1e9, round,
		st >= 0 && st < 4 ? states[st] : "?", tally_client_stats(c)->restarts);
	fflush(stderr);
}

/* tally_client_wait, one poll of at most 1 ms at a time, reporting state changes and
 * restarts survived as they happen. (tally_client_test releases a finished handle: its
 * first non-zero answer is the result.) */
static int wk_wait_events(struct tally_client *c, struct worker_xport *wx, int h)
{
	static int last_state = TALLY_CLIENT_UP;
	static uint64_t last_restarts;
	uint64_t next;
	int rc;

	for (;;) {
		/* what already arrived first, as tally_client_wait does */
		for (int i = 0; i < 16 && wx->ops->poll(wx->ctx, 0) > 0; i++)
			;
		if ((rc = tally_client_test(c, h)))
			break;
		next = tally_client_tick(c);
		if (tally_client_state(c) != last_state) {
			last_state = tally_client_state(c);
			wk_event(c, "state", 0);
		}
		if (tally_client_stats(c)->restarts != last_restarts) {
			last_restarts = tally_client_stats(c)->restarts;
			wk_event(c, "rejoined", 0);
		}
		if ((rc = tally_client_test(c, h)))
			break;
		wx->ops->poll(wx->ctx, next < 1000000 ? (next ? next : 1) : 1000000);
	}
	return rc < 0 ? rc : 0;
}

static int wk_cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median timed round: on a shared host one descheduled round (tens of ms) moves the
 * mean, the median shows what a change to the round itself did. Sorts t in place. */
static double wk_median(double *t, uint32_t n)
{
	if (!n)
		return 0;
	qsort(t, n, sizeof(*t), wk_cmp_d);
	return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

/* REGISTER the keys (and the vote key when ranks vote or barrier) with the session. */
static int wk_register(const struct wk_opts *o, struct tally_client *c, const struct wk_key *keys,
		       int voting, char *err, size_t errlen)
{
	size_t es = tally_dtype_size(o->dtype);
	uint32_t vote_key = o->key_base + o->nkeys;
	int rc;

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
	return 0;
}

/* --failover: the appliance is down (-EHOSTDOWN): move the job and register again. 1 moved
 * (push the round again), 0 not a failover (rc stands), negative errno. */
static int wk_failover(const struct wk_opts *o, struct wk_sess *s, const struct wk_key *keys,
		       int voting, int rc, char *err, size_t errlen)
{
	if (rc != -EHOSTDOWN || !s->nfo)
		return 0;
	rc = wk_fo_move(s, o->join_ms, err, errlen);
	if (!rc)
		rc = wk_register(o, s->c, keys, voting, err, errlen);
	return rc ? rc : 1;
}

static int wk_run(const struct wk_opts *o, struct wk_sess *s,
		  struct wk_key *keys, void *in, void *out, double *secs, double *r0secs,
		  double *vsecs, struct wd_check *chk, uint32_t *done, double *rt, char *err,
		  size_t errlen)
{
	struct wd_gen g = { .seed = o->seed, .dtype = o->dtype, .values = o->values };
	size_t es = tally_dtype_size(o->dtype);
	int bit_exact = o->deterministic || o->values == WD_EXACT || o->dtype == TALLY_DT_I32;
	struct tally_client *c = s->c;
	int rc;

	rc = tally_client_join(c, o->join_ms);
	if (rc) {
		snprintf(err, errlen, "join job %u as rank %u/%u: %s (%s)", o->job_id, o->rank,
			 o->world, strerror(-rc), tally_client_strerror(c));
		return rc;
	}
	/* --seconds: ranks must agree on the last round (a round one rank skips would never
	 * complete for the others), so they vote through the appliance itself: one i32 key,
	 * each pushes 1 to go on; all go on only when the sum is the world size. The same key
	 * is a barrier before every round (MPI and Gloo programs barrier before timing too):
	 * otherwise the first rank's first round includes waiting for the last rank to start,
	 * generate its data and join, which dwarfs a small allreduce. */
	uint32_t vote_key = o->key_base + o->nkeys, vote_round = 0;
	int voting = o->seconds > 0 || (o->barrier && o->world > 1), skip_barrier = 0;

	if ((rc = wk_register(o, c, keys, voting, err, errlen)))
		return rc;
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
		if (voting && !skip_barrier) {
			int32_t go = o->seconds <= 0 || !timed || wk_now() - start < o->seconds;
			int32_t sum = 0;

			rc = tally_client_start(c, vote_key, vote_round++, &go, &sum);
			if (rc >= 0)
				rc = o->events ? wk_wait_events(c, &s->wx, rc) : tally_client_wait(c, rc);
			int moved = rc ? wk_failover(o, s, keys, voting, rc, err, errlen) : 0;
			if (moved == 1) { /* every rank votes this round again on the survivor */
				c = s->c;
				vote_round--;
				r--;
				continue;
			}
			rc = moved < 0 ? moved : rc;
			if (rc) {
				snprintf(err, errlen, "%s before round %u: %s (%s)",
					 o->seconds > 0 ? "vote" : "barrier", r, strerror(-rc),
					 tally_client_strerror(c));
				return rc;
			}
			if (sum != (int32_t)o->world)
				break;
		}
		skip_barrier = 0;
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
			rc = o->events ? wk_wait_events(c, &s->wx, keys[k].handle) :
					 tally_client_wait(c, keys[k].handle);
			int moved = rc ? wk_failover(o, s, keys, voting, rc, err, errlen) : 0;
			if (moved == 1)
				break; /* the keys of this round go again, on the survivor */
			rc = moved < 0 ? moved : rc;
			if (rc) {
				snprintf(err, errlen, "allreduce key %u round %u: %s (%s)", keys[k].id,
					 r, strerror(-rc), tally_client_strerror(c));
				return rc;
			}
		}
		if (c != s->c) { /* moved: every rank pushes this round's keys again */
			c = s->c;
			skip_barrier = 1;
			r--;
			continue;
		}
		t1 = wk_now();
		if (o->events)
			wk_event(c, "round", r);
		if (timed) {
			*secs += t1 - t0;
			rt[r - o->warmup] = t1 - t0;
		}
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
	/* window 128: a 1 MiB tensor (128 chunks of 8 KB) leaves in the first wake-up, one
	 * sendmmsg batch, instead of waiting a round trip for half of it (measured 2 workers,
	 * 1 MiB, median round: 3.8-4.6 ms against 4.0-8.0 ms with 64) */
	struct wk_opts o = {
		.x = { .gro = 1 },
		.job_id = 1, .token = 1, .world = 1, .nkeys = 16, .bytes = 64u << 20,
		.chunk_bytes = 8192, .rounds = 3, .window = 128, .join_ms = 10000,
		.give_up_ms = 30000, .rto_us = 500, .seed = 1, .dtype = TALLY_DT_F32, .verify = 1,
		.blast_cores = 1, .barrier = 1,
	};
	struct tally_client_cfg cc = { 0 };
	struct wk_sess s = { 0 };
	struct wk_key *keys = NULL;
	struct wd_check chk = { 0 };
	double secs = 0, vsecs = 0, r0secs = 0, median = 0, *rt = NULL;
	char err[512] = "";
	void *in = NULL, *out = NULL;
	size_t es, total;
	int rc;

	/* the environment at the program's edge: the libraries read none */
	tally_sum_set_default(getenv("TALLY_ISA"));
	tally_auth_select_backend(getenv(TALLY_AUTH_BACKEND_ENV));
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
	rt = calloc(o.rounds ? o.rounds : 1, sizeof(*rt));
	if (!keys || !in || !out || !rt) {
		fprintf(stderr, "tally-worker: cannot allocate 2 x %zu bytes\n", o.bytes);
		rc = 1;
		goto out;
	}
	for (uint32_t k = 0; k < o.nkeys; k++) {
		keys[k].id = o.key_base + k;
		keys[k].first = total / o.nkeys * k;
		keys[k].n = k + 1 < o.nkeys ? total / o.nkeys : total - keys[k].first;
	}
	if (o.failover && wk_fo_parse(o.failover, &s)) {
		fprintf(stderr, "tally-worker: bad --failover '%s': HOST:PORT[,HOST:PORT...], at most "
			"%d\n", o.failover, WK_FO_MAX);
		rc = 2;
		goto out;
	}
	if (s.nfo && strcmp(o.x.transport, "udp")) {
		fprintf(stderr, "tally-worker: --failover needs --transport udp (a DPDK port is "
			"opened once per process)\n");
		rc = 2;
		goto out;
	}
	static uint8_t wkey[TALLY_AUTH_KEY_LEN]; /* kept: a failover re-opens with it */
	if (o.key_file) {
		char kerr[320];

		if (tally_auth_key_load(o.key_file, wkey, kerr, sizeof(kerr)) < 0) {
			fprintf(stderr, "tally-worker: --key-file / TALLY_AUTH_KEY_FILE: %s\n", kerr);
			rc = 1;
			goto out;
		}
		/* verbs: the connection is authenticated at setup with it (worker_xport.h) */
		o.x.auth_key = wkey;
		o.x.auth_job = o.job_id;
		o.x.auth_rank = o.rank;
	}
	s.x = o.x;
	rc = wx_open(&s.x, &s.wx, err, sizeof(err));
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
	cc.probe_ms = o.probe_ms;
	cc.dead_ms = o.dead_ms;
	tally_client_cfg_defaults(&cc);
	cc.incarnation = o.incarnation;
	if (o.key_file && !s.wx.setup_authed) { /* per-packet MACs */
		memcpy(cc.auth_key, wkey, sizeof(cc.auth_key));
		cc.auth = 1;
	}
	snprintf(cc.appliance, sizeof(cc.appliance), "%s:%u", o.x.host ? o.x.host : "?",
		 o.x.base_port);
	if (cc.max_ops < o.nkeys)
		cc.max_ops = o.nkeys;
	cc.fail_fast = s.nfo > 0; /* a dead appliance: -EHOSTDOWN, then --failover */
	s.cc = cc;
	s.c = tally_client_create(&cc, s.wx.ops, s.wx.ctx, &rc);
	if (!s.c) {
		fprintf(stderr, "tally-worker: client session: %s\n", strerror(-rc));
		rc = 1;
		goto out;
	}
	wx_attach(&s.wx, s.c);
	if (o.blast) {
		rc = wk_blast(&o, &s.wx, s.c, in, &secs);
		o.rounds = 0;
	} else {
		uint32_t done = 0;

		rc = wk_run(&o, &s, keys, in, out, &secs, &r0secs, &vsecs, &chk, &done, rt,
			    err, sizeof(err));
		o.rounds = done;
		median = wk_median(rt, done);
	}
	if (!s.c) { /* a failover that could not open a transport */
		fprintf(stderr, "tally-worker rank %u: %s\n", o.rank, err);
		rc = 1;
		goto out;
	}
	tally_client_bye(s.c);
	wx_flush(&s.wx);
	o.x = s.x; /* the report names the appliance the run ended on */
	wk_print(&o, &s.wx, s.c, secs, r0secs, median, vsecs, &chk, rc, err);
	if (rc && !o.json)
		fprintf(stderr, "tally-worker rank %u: %s\n", o.rank, err);
	rc = rc ? 1 : 0;
	if (o.linger)
		wk_linger();
out:
	if (s.c)
		tally_client_destroy(s.c);
	wx_close(&s.wx);
	free(keys);
	free(rt);
	free(in);
	free(out);
	return rc;
}
