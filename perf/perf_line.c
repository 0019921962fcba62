/* SPDX-License-Identifier: Apache-2.0
 * perf_line.c — `tally-perf line`: the appliance's aggregation rate against its own I/O
 * baseline, in one run. Starts tallyd and W emulated DPDK workers (tally-worker --transport
 * dpdk) on net_memif, one memif port per worker, for a fixed time: once with tallyd
 * --io-forward and the workers blasting chunk-sized PUSH frames (forward rate), once with the
 * engine and the workers allreducing seeded gradients (aggregation rate). Prints aggregate
 * and per-core goodput (gradient bytes summed per second), packets/s, results/s, the forward
 * rate, the ratio, and cores per 100G port. Both runs use the same frames, ports and cores.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "perf_cmds.h"
#include "perf_util.h"

#define LN_MAX_WORKERS 8
#define LN_MAX_ARGS 64

struct ln_opts {
	unsigned workers;
	double seconds;
	unsigned chunk;
	const char *dtype;
	const char *bytes;
	const char *tallyd, *worker;
	int json;
	int keep;
	const char *rto_us, *window;
};

struct ln_run {
	double gbps;          /* sum over workers: gradient bytes (or echoed bytes) per second */
	double pps;           /* packets the workers sent per second, summed */
	double results_ps;    /* RESULTs (or echoed frames) received per second, summed */
	double retx_ps;
	double secs;          /* longest worker measurement */
	char totals[512];     /* tallyd's I/O totals line */
	char engine[512];     /* and its engine totals (aggregation) */
};

static char ln_tmp[64];

/* A number after "key": in a flat JSON line; NAN-like -1 when absent. */
static double ln_json_num(const char *js, const char *key)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = strstr(js, pat);
	return p ? strtod(p + strlen(pat), NULL) : -1;
}

static pid_t ln_spawn(char *const argv[], const char *log)
{
	pid_t pid = fork();

	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

		if (fd < 0)
			_exit(127);
		dup2(fd, 1);
		dup2(fd, 2);
		execv(argv[0], argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	return pid;
}

/* Wait for pid up to `secs`; its exit status, or -ETIMEDOUT (then it is killed). */
static int ln_wait(pid_t pid, double secs)
{
	double end = perf_now() + secs;
	int st;

	while (perf_now() < end) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		usleep(20000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -ETIMEDOUT;
}

/* Does the file contain `pat`? Copies the line into line (if given). */
static int ln_grep(const char *file, const char *pat, char *line, size_t len)
{
	FILE *f = fopen(file, "r");
	char buf[4096];
	int found = 0;

	if (!f)
		return 0;
	while (fgets(buf, sizeof(buf), f))
		if (strstr(buf, pat)) {
			found = 1;
			if (line && len) {
				size_t l = strcspn(buf, "\n");

				l = l < len - 1 ? l : len - 1;
				memcpy(line, buf, l);
				line[l] = '\0';
			}
		}
	fclose(f);
	return found;
}

/* A lingering worker (--linger) reports, then waits for SIGTERM: wait for its report line
 * (0), or its exit (its status; a worker that exits has failed), or `secs` (-ETIMEDOUT). */
static int ln_wait_report(pid_t pid, const char *log, double secs)
{
	double end = perf_now() + secs;
	int st;

	while (perf_now() < end) {
		if (ln_grep(log, "{\"mode\"", NULL, 0))
			return 0;
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) && WEXITSTATUS(st) ? WEXITSTATUS(st) :
			       WIFEXITED(st) ? -EPIPE : 128 + WTERMSIG(st);
		usleep(20000);
	}
	return -ETIMEDOUT;
}

static void ln_print_log(const char *file) /* file: a path under ln_tmp */
{
	FILE *f = fopen(file, "r");
	char buf[16][512];
	unsigned n = 0;

	if (!f)
		return;
	while (fgets(buf[n % 16], sizeof(buf[0]), f))
		n++;
	fclose(f);
	for (unsigned i = n > 16 ? n - 16 : 0; i < n; i++)
		fputs(buf[i % 16], stderr);
}

static int ln_once(const struct ln_opts *o, int forward, struct ln_run *res)
{
	char *argv[LN_MAX_ARGS], ports[LN_MAX_WORKERS][2][256], lcores[256], prefix[64];
	char eal[LN_MAX_WORKERS][768], lip[LN_MAX_WORKERS][32], host[LN_MAX_WORKERS][32];
	char dlog[128], wlog[LN_MAX_WORKERS][128], secs[32], chunk[32], ctl[128];
	pid_t d, w[LN_MAX_WORKERS];
	int a = 0, rc = 0;
	size_t n;

	memset(res, 0, sizeof(*res));
	snprintf(dlog, sizeof(dlog), "%s/tallyd-%s.log", ln_tmp, forward ? "fwd" : "agg");
	snprintf(prefix, sizeof(prefix), "tlyline%d%s", (int)getpid(), forward ? "f" : "a");
	n = (size_t)snprintf(lcores, sizeof(lcores), "0@0");
	argv[a++] = (char *)o->tallyd;
	for (unsigned i = 0; i < o->workers; i++) {
		snprintf(ports[i][0], sizeof(ports[i][0]),
			 "net_memif%u,role=server,socket=%s/m%c%u.sock,socket-abstract=no,bsize=9216,id=0",
			 i, ln_tmp, forward ? 'f' : 'a', i);
		snprintf(ports[i][1], sizeof(ports[i][1]), "10.99.%u.1/24", i + 1);
		argv[a++] = (char *)"--port";
		argv[a++] = ports[i][0];
		argv[a++] = (char *)"--ip";
		argv[a++] = ports[i][1];
		n += (size_t)snprintf(lcores + n, sizeof(lcores) - n, ",%u@%u", i + 1, (i + 1) % 2);
	}
	snprintf(ctl, sizeof(ctl), "%s/ctl-%s.sock", ln_tmp, forward ? "fwd" : "agg");
	argv[a++] = (char *)"--ctl-socket"; /* not the system's default socket */
	argv[a++] = ctl;
	argv[a++] = (char *)"--idle-backoff";
	argv[a++] = (char *)"off"; /* pure polling: this is the line-rate measurement */
	argv[a++] = (char *)"--mem";
	argv[a++] = (char *)"1G";
	argv[a++] = (char *)(forward ? "--io-forward" : "--open-admission");
	argv[a++] = (char *)"--";
	argv[a++] = (char *)"--no-huge";
	argv[a++] = (char *)"--no-pci";
	argv[a++] = (char *)"-m";
	argv[a++] = (char *)"2048";
	argv[a++] = (char *)"--file-prefix";
	argv[a++] = prefix;
	argv[a++] = (char *)"--lcores";
	argv[a++] = lcores;
	argv[a] = NULL;
	d = ln_spawn(argv, dlog);
	for (double end = perf_now() + 30; !ln_grep(dlog, "ready", NULL, 0);) {
		if (perf_now() > end || waitpid(d, NULL, WNOHANG) == d) {
			fprintf(stderr, "tally-perf line: tallyd did not start:\n");
			ln_print_log(dlog);
			kill(d, SIGKILL);
			waitpid(d, NULL, 0);
			return -EIO;
		}
		usleep(50000);
	}
	snprintf(secs, sizeof(secs), "%.3f", o->seconds);
	snprintf(chunk, sizeof(chunk), "%u", o->chunk);
	for (unsigned i = 0; i < o->workers; i++) {
		char rank[16], world[16], bcores[16];

		a = 0;
		snprintf(eal[i], sizeof(eal[i]),
			 "--no-huge --no-pci -m 512 --file-prefix %sw%u --lcores 0@%u "
			 "--vdev net_memif0,role=client,socket=%s/m%c%u.sock,socket-abstract=no,bsize=9216,id=0",
			 prefix, i, i % 2, ln_tmp, forward ? 'f' : 'a', i);
		snprintf(lip[i], sizeof(lip[i]), "10.99.%u.2/24", i + 1);
		snprintf(host[i], sizeof(host[i]), "10.99.%u.1", i + 1);
		snprintf(wlog[i], sizeof(wlog[i]), "%s/worker%u-%s.log", ln_tmp, i,
			 forward ? "fwd" : "agg");
		snprintf(rank, sizeof(rank), "%u", i);
		snprintf(world, sizeof(world), "%u", o->workers);
		snprintf(bcores, sizeof(bcores), "%u", o->workers); /* as keys spread over cores */
		const char *wa[] = { o->worker, "--transport", "dpdk", "--dpdk", eal[i],
				     "--local-ip", lip[i], "--host", host[i], "--rank", rank,
				     "--world", world, "--seconds", secs, "--rounds", "1000000",
				     "--chunk", chunk, "--dtype", o->dtype, "--bytes", o->bytes,
				     "--no-verify", "--json", "--rto-us", o->rto_us, "--window",
				     o->window, "--blast-cores", bcores, "--linger",
				     forward ? "--blast" : NULL,
				     NULL };
		for (a = 0; wa[a]; a++)
			argv[a] = (char *)wa[a];
		argv[a] = NULL;
		w[i] = ln_spawn(argv, wlog[i]);
	}
	for (unsigned i = 0; i < o->workers; i++) {
		char line[4096];
		int r = ln_wait_report(w[i], wlog[i], o->seconds + 60);

		if (r > 0 || r == -EPIPE)
			w[i] = 0; /* reaped */

		if (r || !ln_grep(wlog[i], "{\"mode\"", line, sizeof(line)) ||
		    !strstr(line, "\"ok\":true")) {
			fprintf(stderr, "tally-perf line: worker %u (%s) failed (status %d):\n", i,
				forward ? "forward" : "aggregation", r);
			ln_print_log(wlog[i]);
			rc = -EIO;
			continue;
		}
		double s = ln_json_num(line, "seconds");

		if (s <= 0)
			continue;
		res->gbps += ln_json_num(line, "gbps");
		/* blast frames bypass the session: count them by what came back */
		res->pps += ln_json_num(line, forward ? "rx_pkts" : "tx_pkts") / s;
		res->results_ps += (forward ? ln_json_num(line, "rx_pkts") :
					      ln_json_num(line, "results")) / s;
		res->retx_ps += ln_json_num(line, "retransmits") / s;
		if (s > res->secs)
			res->secs = s;
	}
	/* The server first, then the lingering clients: DPDK 22.11's memif server can crash in
	 * a receive when a client detaches under it (MEASURED.md's "stop clients first" holds
	 * for clients that are still transmitting; ours are idle by now). */
	kill(d, SIGTERM);
	int drc = ln_wait(d, 30);

	for (unsigned i = 0; i < o->workers; i++) {
		if (w[i] > 0) {
			kill(w[i], SIGTERM);
			ln_wait(w[i], 10);
		}
	}

	if (drc != 0) /* the figures come from the workers; say so, do not hide it */
		fprintf(stderr, "tally-perf line: warning: tallyd (%s) exited with status %d "
			"after SIGTERM\n", forward ? "io-forward" : "aggregation", drc);
	ln_grep(dlog, "tallyd: totals:", res->totals, sizeof(res->totals));
	ln_grep(dlog, "engine totals:", res->engine, sizeof(res->engine));
	return rc;
}

static void ln_usage(FILE *f)
{
	fprintf(f,
		"usage: tally-perf line [--workers N] [--seconds T] [--chunk BYTES] [--dtype T]\n"
		"                       [--bytes SIZE] [--rto-us N] [--window N] [--tallyd PATH]\n"
		"                       [--worker PATH] [--json] [--keep]\n"
		"  tallyd + N DPDK workers on net_memif for T seconds, once forwarding (--io-forward)\n"
		"  and once aggregating; prints both rates, their ratio, cores per 100G port.\n"
		"  defaults: 1 worker, 5 s, chunk 8192, f32, 16M per worker per round; tallyd and\n"
		"  tally-worker next to this binary (../appliance/tallyd, ./tally-worker).\n");
}

static void ln_default_paths(struct ln_opts *o, char *td, char *wk, size_t len)
{
	char self[PATH_MAX - 64];
	ssize_t r = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (r <= 0)
		return;
	self[r] = '\0';
	slash = strrchr(self, '/');
	if (!slash)
		return;
	*slash = '\0';
	if (!o->tallyd) {
		snprintf(td, len, "%s/../appliance/tallyd", self);
		o->tallyd = td;
	}
	if (!o->worker) {
		snprintf(wk, len, "%s/tally-worker", self);
		o->worker = wk;
	}
}

int perf_line_main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "workers", 1, 0, 'w' }, { "seconds", 1, 0, 's' }, { "chunk", 1, 0, 'c' },
		{ "dtype", 1, 0, 'd' }, { "bytes", 1, 0, 'b' }, { "tallyd", 1, 0, 'T' },
		{ "worker", 1, 0, 'W' }, { "json", 0, 0, 'j' }, { "keep", 0, 0, 'k' },
		{ "rto-us", 1, 0, 'r' }, { "window", 1, 0, 'n' },
		{ "help", 0, 0, 'h' }, { 0, 0, 0, 0 } };
	struct ln_opts o = { .workers = 1, .seconds = 5, .chunk = 8192, .dtype = "f32",
			     .bytes = "16M", .rto_us = "500", .window = "64" };
	char td[PATH_MAX], wk[PATH_MAX];
	struct ln_run fwd, agg;
	int c, rc;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		char *e = NULL;

		switch (c) {
		case 'w': o.workers = (unsigned)strtoul(optarg, &e, 10); break;
		case 's': o.seconds = strtod(optarg, &e); break;
		case 'c': o.chunk = (unsigned)strtoul(optarg, &e, 10); break;
		case 'd': o.dtype = optarg; break;
		case 'b': o.bytes = optarg; break;
		case 'T': o.tallyd = optarg; break;
		case 'W': o.worker = optarg; break;
		case 'j': o.json = 1; break;
		case 'k': o.keep = 1; break;
		case 'r': strtoul(optarg, &e, 10); o.rto_us = optarg; break;
		case 'n': strtoul(optarg, &e, 10); o.window = optarg; break;
		case 'h': ln_usage(stdout); return 0;
		default: ln_usage(stderr); return 2;
		}
		if (e && *e) {
			fprintf(stderr, "tally-perf line: bad value '%s'\n", optarg);
			return 2;
		}
	}
	if (!o.workers || o.workers > LN_MAX_WORKERS || !(o.seconds > 0) || o.seconds > 600 ||
	    o.chunk < 64 || o.chunk > 9000) {
		fprintf(stderr, "tally-perf line: need 1 <= workers <= %d, 0 < seconds <= 600, "
			"64 <= chunk <= 9000\n", LN_MAX_WORKERS);
		return 2;
	}
	ln_default_paths(&o, td, wk, sizeof(td));
	if (!o.tallyd || access(o.tallyd, X_OK) || !o.worker || access(o.worker, X_OK)) {
		fprintf(stderr, "tally-perf line: need tallyd (%s) and tally-worker (%s): build them "
			"or give --tallyd/--worker\n", o.tallyd ? o.tallyd : "?",
			o.worker ? o.worker : "?");
		return 1;
	}
	snprintf(ln_tmp, sizeof(ln_tmp), "/tmp/tly-line.XXXXXX");
	if (!mkdtemp(ln_tmp)) {
		perror("tally-perf line: mkdtemp");
		return 1;
	}
	rc = ln_once(&o, 1, &fwd);
	if (!rc)
		rc = ln_once(&o, 0, &agg);
	if (!o.keep) {
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", ln_tmp);
		if (system(cmd) != 0)
			fprintf(stderr, "tally-perf line: could not remove %s\n", ln_tmp);
	}
	if (rc)
		return 1;

	unsigned cores = o.workers; /* one datapath lcore per memif port */
	double per_core = agg.gbps / cores, ratio = fwd.gbps > 0 ? agg.gbps / fwd.gbps : 0;
	double cp100 = per_core > 0 ? 100.0 / per_core : 0;

	if (o.json) {
		printf("{\"transport\":\"memif\",\"workers\":%u,\"cores\":%u,\"chunk_bytes\":%u,"
		       "\"dtype\":\"%s\",\"seconds\":%.3f,\"gbps\":%.3f,\"per_core_gbps\":%.3f,"
		       "\"pps\":%.0f,\"results_per_s\":%.0f,\"retransmits_per_s\":%.0f,"
		       "\"forward_gbps\":%.3f,\"forward_pps\":%.0f,\"ratio\":%.3f,"
		       "\"cores_per_100g\":%.2f}\n",
		       o.workers, cores, o.chunk, o.dtype, agg.secs, agg.gbps, per_core, agg.pps,
		       agg.results_ps, agg.retx_ps, fwd.gbps, fwd.pps, ratio, cp100);
		return 0;
	}
	printf("tally-perf line: tallyd + %u DPDK worker(s) on net_memif, %u datapath core(s), "
	       "chunk %u B %s, %.1f s per run\n", o.workers, cores, o.chunk, o.dtype, o.seconds);
	printf("  forward (--io-forward): %8.2f Gbit/s of chunk payload, %9.0f pkt/s\n",
	       fwd.gbps, fwd.pps);
	printf("  aggregation:            %8.2f Gbit/s of gradients summed (%.2f per core), "
	       "%.0f pkt/s in, %.0f results/s, %.0f retransmits/s\n",
	       agg.gbps, per_core, agg.pps, agg.results_ps, agg.retx_ps);
	printf("  ratio aggregation / forward: %.3f   cores per 100G port: %.1f\n", ratio, cp100);
	printf("  tallyd (forward)   %s\n  tallyd (aggregate) %s\n  %s\n", fwd.totals,
	       agg.totals, agg.engine);
	return 0;
}
