/* SPDX-License-Identifier: Apache-2.0
 * perf_linegen.c — `tally-perf linegen` (issue 38): the line-rate generator's NDR/PDR search
 * (perf_ndr.h) per chunk size, with push -> RESULT and whole-round latency percentiles at the
 * found rates, offered vs accepted rates, and busy polls / all polls of both sides. The device
 * under test is the synthetic throttled appliance (perf_gen_synth.h, --synthetic-cap) in
 * tally-perf: it measures the generator itself (how much one lcore playing --ranks ranks can
 * offer) and the search; and in tally-linegen (LG_PORT) a real appliance through a transport
 * of the registry, aggregating or, with --io-forward, tallyd --io-forward bouncing every push
 * (the twin on the same port, frames and cores), its lcores' busy polls read from its control
 * socket around the reported trials (--ctl-socket, perf_gen_ctl.h). With --gen-lcores N
 * (DPDK) N generator lcores run each trial at once, a port and a job each, and the figures
 * are their sums (perf_gen_mc.h). Options: perf_linegen_opts.c.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perf_cmds.h"
#include "perf_linegen.h"
#include "perf_gen.h"
#include "perf_gen_synth.h"
#include "perf_ndr.h"
#ifdef LG_PORT
#include "perf_gen_ctl.h"
#include "perf_gen_port.h"
static struct gp_port lg_port; /* its staging buffers: 600 KiB */
#endif
#ifdef LG_MC
#include "perf_gen_mc.h"
static struct gm *lg_mc; /* --gen-lcores: N lcores, a port each */
#else
#define GM_MAX_LCORES 1
#endif

#define LG_LOG 96

struct lg_ctx {
	struct pg_gen *g;
	struct ps_target *t;
	struct pg_io io;
	const struct lg_opts *o;
	struct pg_stats st;
	struct pn_trial log[LG_LOG]; /* the search's trials, in order (the first LG_LOG) */
	double log_cpu[LG_LOG];
	unsigned nlog;
	int nolog;
	double cpu; /* the generator thread's CPU seconds / wall seconds in the last trial: under
		     * 1 when the OS ran something else on its core (busy polls cannot see that);
		     * with --gen-lcores the lowest lcore's */
	/* --gen-lcores N: each lcore's generator, stats and CPU share in the last trial; st
	 * above is their sum (secs: the mean) */
	unsigned n;
	struct pg_gen *gens[GM_MAX_LCORES];
	struct pg_stats sts[GM_MAX_LCORES];
	double cpus[GM_MAX_LCORES];
};

#ifdef LG_MC
/* One trial on every lcore at once (rate / N each); c->st their sum. */
static int lg_run_mc(struct lg_ctx *c, double rate)
{
	int rc = gm_run(lg_mc, c->gens, rate, c->o->trial_s, c->o->drain_s, c->sts, c->cpus);

	if (rc)
		return rc;
	memset(&c->st, 0, sizeof(c->st));
	ph_reset(&c->st.chunk_ns);
	ph_reset(&c->st.push_ns);
	ph_reset(&c->st.round_ns);
	c->cpu = 1e9;
	for (unsigned g = 0; g < c->n; g++) {
		pg_stats_add(&c->st, &c->sts[g]);
		c->cpu = c->cpus[g] < c->cpu ? c->cpus[g] : c->cpu;
	}
	c->st.secs /= c->n;
	return 0;
}
#endif

/* Per lcore (--gen-lcores): "gen":[{"offered_pps":..,"accepted_pps":..,"missing":..,
 * "retx":..,"bad":..,"busy":..,"cpu":..},...], after the summed figures. */
static void lg_print_lcores(const struct lg_ctx *c, const char *prefix)
{
	if (!c->n)
		return;
	printf("\"%sgen\":[", prefix);
	for (unsigned g = 0; g < c->n; g++) {
		const struct pg_stats *t = &c->sts[g];
		double s = t->secs > 0 ? t->secs : 1;

		printf("%s{\"offered_pps\":%.0f,\"accepted_pps\":%.0f,\"missing\":%llu,"
		       "\"retx\":%llu,\"bad\":%llu,\"checked\":%llu,\"busy\":%.4f,\"cpu\":%.3f}",
		       g ? "," : "", t->offered / s, t->results / s,
		       (unsigned long long)(t->missing + t->held_back), (unsigned long long)t->retx,
		       (unsigned long long)(t->crc_bad + t->sum_bad),
		       (unsigned long long)t->sum_checked,
		       t->polls ? (double)t->busy_polls / t->polls : 0.0, c->cpus[g]);
	}
	printf("],");
}

static int lg_trial(void *ctx, double rate, struct pn_trial *tr)
{
	struct lg_ctx *c = ctx;
	int rc;

	struct timespec c0, c1, w0, w1;

	if (c->t)
		ps_reset_stats(c->t);
#ifdef LG_MC
	if (c->n) {
		rc = lg_run_mc(c, rate);
		if (rc)
			return rc;
		goto sums;
	}
#endif
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
	clock_gettime(CLOCK_MONOTONIC, &w0);
	rc = pg_run(c->g, &c->io, rate, c->o->trial_s, c->o->drain_s, &c->st);
	if (rc)
		return rc;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
	clock_gettime(CLOCK_MONOTONIC, &w1);
	c->cpu = ((double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) * 1e-9) /
		 ((double)(w1.tv_sec - w0.tv_sec) + (double)(w1.tv_nsec - w0.tv_nsec) * 1e-9);
#ifdef LG_MC
sums:
#endif
	tr->offered = c->st.secs > 0 ? c->st.offered / c->st.secs : 0;
	tr->accepted = c->st.secs > 0 ? c->st.results / c->st.secs : 0;
	/* pushes the device's window held back are offered load it did not take */
	tr->expected = c->st.expected + c->st.held_back;
	tr->missing = c->st.missing + c->st.held_back;
	tr->retx = c->st.retx;
	tr->bad = c->st.crc_bad + c->st.sum_bad;
	if (!c->nolog && c->nlog < LG_LOG) {
		c->log[c->nlog] = *tr;
		c->log[c->nlog].rate = rate;
		c->log_cpu[c->nlog++] = c->cpu;
	}
	return 0;
}

/* The search's trials: "trials_log":[[rate, offered, accepted, expected, missing, retx,
 * bad, gen_cpu],...] (why a step failed: loss, retransmission, or the generator). */
static void lg_print_log(const struct lg_ctx *c)
{
	printf("\"trials_log\":[");
	for (unsigned i = 0; i < c->nlog; i++) {
		const struct pn_trial *t = &c->log[i];

		printf("%s[%.0f,%.0f,%.0f,%llu,%llu,%llu,%llu,%.2f]", i ? "," : "", t->rate,
		       t->offered, t->accepted, (unsigned long long)t->expected,
		       (unsigned long long)t->missing, (unsigned long long)t->retx,
		       (unsigned long long)t->bad, c->log_cpu[i]);
	}
	printf("],");
}

/* Busy polls / all polls of the generator: with --gen-lcores the busiest lcore's. */
static double lg_gen_busy(const struct lg_ctx *c)
{
	double b = c->st.polls ? (double)c->st.busy_polls / c->st.polls : 0.0;

	if (c->n)
		b = 0;
	for (unsigned g = 0; g < c->n; g++)
		if (c->sts[g].polls && (double)c->sts[g].busy_polls / c->sts[g].polls > b)
			b = (double)c->sts[g].busy_polls / c->sts[g].polls;
	return b;
}


static void lg_lat(const char *name, const struct ph_hist *h, int last)
{
	printf("\"%s\":{\"n\":%llu,\"p50_us\":%.3f,\"p99_us\":%.3f,\"p999_us\":%.3f,"
	       "\"max_us\":%.3f}%s", name, (unsigned long long)h->n,
	       ph_percentile(h, 50) / 1e3, ph_percentile(h, 99) / 1e3,
	       ph_percentile(h, 99.9) / 1e3, h->n ? h->max / 1e3 : 0.0, last ? "" : ",");
}

#ifdef LG_PORT
/* A trial with the appliance's counters read before and after it (with --ctl-socket). */
static int lg_trial_dut(struct lg_ctx *c, double rate, struct pn_trial *t, struct gc_snap *a,
			struct gc_snap *b, int *have)
{
	char err[256] = "";
	int rc;

	*have = c->o->ctl && !gc_snap(c->o->ctl, c->o->dut_pid, a, err, sizeof(err));
	rc = lg_trial(c, rate, t);
	if (*have && !rc)
		*have = !gc_snap(c->o->ctl, c->o->dut_pid, b, err, sizeof(err));
	if (c->o->ctl && !*have)
		fprintf(stderr, "tally-linegen: --ctl-socket: %s\n", err);
	return rc;
}
#endif

/* One trial at `rate`: the appliance's counters around it where it has a control socket. */
static int lg_trial_at(struct lg_ctx *c, double rate, struct pn_trial *t, const char *prefix)
{
#ifdef LG_PORT
	static struct gc_snap a, b;
	int have = 0, rc = lg_trial_dut(c, rate, t, &a, &b, &have);

	if (!rc && have)
		gc_print(stdout, prefix, &a, &b);
	return rc;
#else
	(void)prefix;
	return lg_trial(c, rate, t);
#endif
}

/* One latency trial at `rate`, printed as "name":{...}. */
static int lg_at(struct lg_ctx *c, const char *name, double rate, int last)
{
	struct pn_trial t = { 0 };
	int rc;
	double s;

	printf("\"%s\":{", name);
	rc = rate > 0 ? lg_trial_at(c, rate, &t, "") : 0;
	s = c->st.secs > 0 ? c->st.secs : 1;
	if (rc)
		return rc;
	if (rate <= 0)
		memset(&c->st, 0, sizeof(c->st));
	printf("\"rate_pps\":%.0f,\"offered_pps\":%.0f,\"accepted_pps\":%.0f,"
	       "\"loss\":%.6f,\"payload_gbps\":%.3f,\"gen_busy\":%.4f,\"gen_cpu\":%.3f,", rate,
	       c->st.offered / s, c->st.results / s, rate > 0 ? pn_loss(&t) : 0.0,
	       c->st.payload_bytes * 8 / s / 1e9,
	       lg_gen_busy(c), rate > 0 ? c->cpu : 0.0);
	if (rate > 0)
		lg_print_lcores(c, "");
	lg_lat("chunk", &c->st.chunk_ns, 0);
	lg_lat("push", &c->st.push_ns, 0);
	lg_lat("round", &c->st.round_ns, 1);
	printf("}%s", last ? "" : ",");
	return 0;
}

/* Unpaced, after the search (its losses could leave a real appliance's keys out of step):
 * what one generator lcore offers, and what the device took of it; printed as fields. */
static int lg_unpaced(struct lg_ctx *c)
{
	struct pn_trial t = { 0 };
	int rc = lg_trial_at(c, 0, &t, "unpaced_");

	if (rc)
		return rc;
	printf("\"unpaced_offered_pps\":%.0f,\"unpaced_accepted_pps\":%.0f,"
	       "\"unpaced_gen_busy\":%.4f,\"unpaced_gen_cpu\":%.3f,\"unpaced_missing\":%llu,"
	       "\"unpaced_retx\":%llu,\"unpaced_dup\":%llu,\"unpaced_stray\":%llu,"
	       "\"unpaced_checked\":%llu,\"unpaced_bad\":%llu,", t.offered, t.accepted,
	       lg_gen_busy(c), c->cpu,
	       (unsigned long long)c->st.missing, (unsigned long long)c->st.retx,
	       (unsigned long long)c->st.dup, (unsigned long long)c->st.stray,
	       (unsigned long long)c->st.sum_checked, (unsigned long long)t.bad);
	lg_print_lcores(c, "unpaced_");
#ifdef LG_PORT
	if (c->o->transport) { /* since the port(s) opened (all chunk sizes so far) */
		uint64_t d = lg_port.delivered, ov = lg_port.overflow, se = lg_port.send_errors;

#ifdef LG_MC
		for (unsigned g = 0; g < c->n; g++) {
			d += gm_port(lg_mc, g)->delivered;
			ov += gm_port(lg_mc, g)->overflow;
			se += gm_port(lg_mc, g)->send_errors;
		}
#endif
		printf("\"port_delivered\":%llu,\"port_overflow\":%llu,\"port_send_errors\":%llu,",
		       (unsigned long long)d, (unsigned long long)ov, (unsigned long long)se);
	}
#endif
	return 0;
}

#ifdef LG_MC
/* --gen-lcores: lcore g's generator (its own job, keys on its port's cores), joined and
 * registered through its own port. */
static int lg_mc_setup(struct lg_ctx *c, const struct pg_opts *go)
{
	char err[256] = "";
	int rc = 0;

	c->n = gm_lcores(lg_mc);
	for (unsigned g = 0; g < c->n && !rc; g++) {
		struct pg_opts o = *go;

		rc = gm_keys(lg_mc, g, &o, go->chunk_bytes * c->o->dut_cores, err, sizeof(err));
		if (!rc)
			rc = pg_create(&o, &c->gens[g]);
		if (!rc && !c->o->io_forward)
			rc = gp_setup(gm_port(lg_mc, g), &o, 10, err, sizeof(err));
		if (rc && err[0])
			fprintf(stderr, "tally-linegen: generator lcore %u: %s\n", g, err);
	}
	return rc;
}
#endif

static int lg_size(const struct lg_opts *o, unsigned chunk)
{
	static struct lg_ctx c; /* its histograms: 24 KiB, not on the stack */
	struct pg_opts go = { .ranks = o->ranks, .keys = o->keys, .chunks = o->chunks,
			      .chunk_bytes = chunk, .window = o->window, .burst = o->burst,
			      .sample_every = o->sample, .job_id = 1, .token = 0x7a11,
			      .key_base = chunk }; /* new keys per chunk size */
	struct ps_opts so = { .cap_pps = o->cap, .ranks = o->ranks, .keys = o->keys,
			      .chunks = o->chunks, .chunk_bytes = chunk, .window = o->window,
			      .key_base = chunk, .sums = 256, .depth = 512 };
	struct pn_opts no = { .lo = o->lo, .hi = o->hi, .steps = o->steps, .trials = o->trials,
			      .pdr_loss = 0.005, .min_offer = 0.95 };
	struct pn_result r;
	int rc;

	memset(&c, 0, sizeof(c));
	c.o = o;
#ifdef LG_PORT
	/* the engine keeps two rounds per chunk (r and r + 1): no more in flight */
	if (o->transport) {
		go.window = 2;
		go.repair = 1;
		go.echo = o->io_forward;
		go.repair_us = o->repair_us;
	}
#endif
#ifdef LG_MC
	if (lg_mc)
		rc = lg_mc_setup(&c, &go);
	else
#endif
		rc = pg_create(&go, &c.g);
	if (rc)
		goto out;
#ifdef LG_PORT
	if (o->transport && !o->io_forward && !c.n) { /* a forwarder has no job to join */
		char err[256] = "";

		rc = gp_setup(&lg_port, &go, 10, err, sizeof(err));
		if (rc) {
			fprintf(stderr, "tally-linegen: job setup: %s\n", err);
			goto out;
		}
	}
	if (o->transport && !c.n)
		gp_io(&lg_port, &c.io);
#endif
	if (!c.io.tx && !c.n) {
		rc = ps_create(&so, &c.t);
		if (rc)
			goto out;
		ps_io(c.t, &c.io);
	}
	rc = pn_search(&no, lg_trial, &c, &r);
	if (rc)
		goto out;
	c.nolog = 1; /* the later trials are not the search's */
	printf("{\"dut\":\"%s\",\"mode\":\"%s\",\"cap_pps\":%.0f,\"chunk_bytes\":%u,"
	       "\"ranks\":%u,\"keys\":%u,\"chunks\":%u,\"trials\":%u,\"steps\":%u,"
	       "\"trial_s\":%.3f,\"runs\":%u,\"ndr_pps\":%.0f,\"pdr_pps\":%.0f,"
	       "\"gen_limited_trials\":%u,\"gen_lcores\":%u,\"dut_cores\":%u,",
	       o->transport ? o->transport : "synthetic",
	       o->io_forward ? "io-forward" : "aggregation", o->cap, chunk, o->ranks, o->keys,
	       o->chunks, o->trials, o->steps, o->trial_s, r.runs, r.ndr, r.pdr, r.gen_limited,
	       c.n ? c.n : 1, o->dut_cores ? o->dut_cores : 1);
	lg_print_log(&c);
	rc = lg_unpaced(&c);
	if (rc)
		goto out;
	rc = lg_at(&c, "at_ndr", r.ndr, 0);
	if (!rc)
		rc = lg_at(&c, "at_pdr", r.pdr, 1);
	printf("}\n");
	fflush(stdout);
out:
	pg_free(c.g);
	for (unsigned g = 0; g < c.n; g++)
		pg_free(c.gens[g]);
	ps_free(c.t);
	if (rc)
		fprintf(stderr, "tally-perf linegen: chunk %u B: %s\n", chunk, strerror(-rc));
	return rc;
}

#ifdef LG_PORT
/* --leave-last: wait (port open, not polling) until the appliance's process is gone */
static void lg_outlast(int pid, double max_s)
{
	struct timespec nap = { 0, 20 * 1000 * 1000 };
	double waited = 0;

	fflush(stdout);
	/* the runs' output is complete: a script waits for this line before stopping pid */
	fprintf(stderr, "tally-linegen: done; leaving last: waiting for pid %d to exit\n", pid);
	while (kill(pid, 0) == 0 || errno != ESRCH) {
		if (waited >= max_s) {
			fprintf(stderr, "tally-linegen: --leave-last: pid %d still runs after %.0f s: "
				"leaving first\n", pid, max_s);
			return;
		}
		nanosleep(&nap, NULL);
		waited += 0.02;
	}
}
#endif

int perf_linegen_main(int argc, char **argv)
{
	struct lg_opts o;
	int rc = lg_parse(argc, argv, &o);

	if (rc)
		return rc == 1 ? 0 : 2;
	if (!o.json)
		fprintf(stderr, "tally-perf linegen: JSON lines follow (--json is the only format)\n");
#ifdef LG_MC
	if (o.gen_lcores) {
		struct gm_opts mo = { .lcores = o.gen_lcores, .dut_cores = o.dut_cores,
				      .eal = o.eal, .hosts = o.host, .local_ips = o.local_ip,
				      .base_port = (uint16_t)o.port, .prog = "tally-linegen" };
		char err[256] = "";

		if (gm_open(&mo, &lg_mc, err, sizeof(err))) {
			fprintf(stderr, "tally-linegen: --gen-lcores %u --dut-cores %u: %s\n",
				o.gen_lcores, o.dut_cores, err);
			return 1;
		}
	}
#endif
#ifdef LG_PORT
	if (o.transport && !o.gen_lcores) {
		struct tally_xport_opts xo = { .host = o.host, .port = (uint16_t)o.port,
					       .eal_args = o.eal, .local_ip = o.local_ip,
					       .dpdk_port = o.dpdk_port, .prog = "tally-linegen",
					       .ncores = 1 };
		char err[256] = "";

		if (gp_open(&lg_port, o.transport, &xo, err, sizeof(err))) {
			fprintf(stderr, "tally-linegen: --transport %s: %s\n", o.transport, err);
			return 1;
		}
	}
#endif
	for (unsigned i = 0; i < o.nsizes && !rc; i++)
		rc = lg_size(&o, o.sizes[i]) ? 1 : 0;
#ifdef LG_PORT
	if (o.leave_last_s > 0)
		lg_outlast(o.dut_pid, o.leave_last_s);
	gp_close(&lg_port);
#endif
#ifdef LG_MC
	gm_close(lg_mc);
#endif
	return rc;
}
