/* SPDX-License-Identifier: Apache-2.0
 * perf_line.c — `tally-perf line`: the appliance's aggregation rate against its own I/O
 * baseline, in one run. Starts tallyd and W emulated DPDK workers (tally-worker --transport
 * dpdk) on net_memif, one memif port per worker, for a fixed time: once with tallyd
 * --io-forward and the workers blasting chunk-sized PUSH frames (forward rate), once with the
 * engine and the workers allreducing seeded gradients (aggregation rate). Prints aggregate
 * and per-core goodput (gradient bytes summed per second), packets/s, results/s, the forward
 * rate, the ratio, and cores per 100G port. Both runs use the same frames, ports and cores.
 * Real ports, remote worker hosts and a running tallyd: see perf_line.h (perf_line_cmd.c builds
 * every command line; this file runs them).
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
#include "perf_line.h"
#include "perf_util.h"

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
		execvp(argv[0], argv);
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
		if (waitpid(pid, &st, WNOHANG) == pid) {
			/* a worker that does not linger exits after its report */
			if (WIFEXITED(st) && !WEXITSTATUS(st))
				return ln_grep(log, "{\"mode\"", NULL, 0) ? -ECHILD : -EPIPE;
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		}
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

static void ln_prefix(int forward, char *prefix, size_t len)
{
	snprintf(prefix, len, "tlyline%d%s", (int)getpid(), forward ? "f" : "a");
}

static int ln_once(const struct ln_opts *o, int forward, struct ln_run *res)
{
	static struct ln_cmd cmd; /* 8 KiB of strings: not on the stack */
	char prefix[64], dlog[128], wlog[LN_MAX_WORKERS][128];
	pid_t d = 0, w[LN_MAX_WORKERS];
	int rc = 0, drc = 0;

	memset(res, 0, sizeof(*res));
	ln_prefix(forward, prefix, sizeof(prefix));
	snprintf(dlog, sizeof(dlog), "%s/tallyd-%s.log", ln_tmp, forward ? "fwd" : "agg");
	if (o->app != LN_APP_EXTERNAL) {
		if (ln_build_tallyd(o, forward, ln_tmp, prefix, &cmd))
			return -E2BIG;
		d = ln_spawn(cmd.argv, dlog);
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
	}
	for (unsigned i = 0; i < o->workers; i++) {
		snprintf(wlog[i], sizeof(wlog[i]), "%s/worker%u-%s.log", ln_tmp, i,
			 forward ? "fwd" : "agg");
		w[i] = 0;
		if (ln_build_worker(o, i, forward, ln_tmp, prefix, &cmd)) {
			rc = -E2BIG;
			continue;
		}
		w[i] = ln_spawn(cmd.argv, wlog[i]);
	}
	for (unsigned i = 0; i < o->workers; i++) {
		char line[4096];
		int r = w[i] ? ln_wait_report(w[i], wlog[i], o->seconds + 60) : -E2BIG;

		if (r > 0 || r == -EPIPE || r == -ECHILD) {
			w[i] = 0; /* reaped */
			r = r == -ECHILD ? 0 : r;
		}
		if (r || !ln_grep(wlog[i], "{\"mode\"", line, sizeof(line)) ||
		    !strstr(line, "\"ok\":true")) {
			fprintf(stderr, "tally-perf line: worker %u%s%s (%s) failed (status %d):\n", i,
				o->n_host ? " on " : "", o->n_host ? o->host[i] : "",
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
	if (d > 0) {
		kill(d, SIGTERM);
		drc = ln_wait(d, 30);
	}
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

/* --dry-run: the commands of both runs, as a shell takes them; nothing starts. */
static int ln_dry_run(const struct ln_opts *o)
{
	static struct ln_cmd cmd;
	const char *tmp = "/tmp/tly-line.XXXXXX"; /* made by a real run */

	for (int forward = 1; forward >= 0; forward--) {
		char prefix[64];

		if (forward && !ln_has_forward(o)) {
			printf("# forward run: none (--appliance: a running tallyd, not "
			       "--io-forward)\n");
			continue;
		}
		ln_prefix(forward, prefix, sizeof(prefix));
		printf("# %s run\n", forward ? "forward (tallyd --io-forward)" : "aggregation");
		if (o->app != LN_APP_EXTERNAL) {
			if (ln_build_tallyd(o, forward, tmp, prefix, &cmd))
				return fprintf(stderr, "tally-perf line: tallyd command too long\n"), 2;
			ln_print_cmd(stdout, &cmd);
		}
		for (unsigned i = 0; i < o->workers; i++) {
			if (ln_build_worker(o, i, forward, tmp, prefix, &cmd))
				return fprintf(stderr, "tally-perf line: worker command too long\n"), 2;
			ln_print_cmd(stdout, &cmd);
		}
	}
	return 0;
}

static const char *ln_where(const struct ln_opts *o)
{
	static char buf[300];

	if (o->app == LN_APP_EXTERNAL)
		snprintf(buf, sizeof(buf), "%s:%u (already running)", o->ext_host, o->ext_port);
	return o->app == LN_APP_MEMIF ? "net_memif" : o->app == LN_APP_PCI ? "real port(s)" : buf;
}

int perf_line_main(int argc, char **argv)
{
	static struct ln_opts o;
	char td[PATH_MAX], wk[PATH_MAX];
	struct ln_run fwd = { 0 }, agg;
	int rc;
	for (int i = 1; i + 1 < argc; i++) /* verbs: its own runner (perf_line_verbs.c) */
		if (!strcmp(argv[i], "--transport") && !strcmp(argv[i + 1], "verbs"))
			return perf_line_verbs_main(argc, argv);

	memset(&o, 0, sizeof(o));
	rc = ln_parse(argc, argv, &o);
	if (rc)
		return rc == 1 ? 0 : 2;
	ln_default_paths(&o, td, wk, sizeof(td));
	if (o.dry_run)
		return ln_dry_run(&o);
	if ((o.app != LN_APP_EXTERNAL && (!o.tallyd || access(o.tallyd, X_OK))) ||
	    (!o.n_host && (!o.worker || access(o.worker, X_OK)))) {
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
	rc = ln_has_forward(&o) ? ln_once(&o, 1, &fwd) : 0;
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

	unsigned cores = ln_app_cores(&o);
	int hasf = ln_has_forward(&o);
	double per_core = agg.gbps / cores, ratio = fwd.gbps > 0 ? agg.gbps / fwd.gbps : 0;
	double cp100 = per_core > 0 ? 100.0 / per_core : 0;
	const char *tr = o.app == LN_APP_MEMIF ? "memif" : o.app == LN_APP_PCI ? "pci" : "external";
	const char *wt = o.wkind == LN_WK_UDP ? "udp" : "dpdk";

	if (o.json) {
		char f1[32] = "null", f2[32] = "null", f3[32] = "null";

		if (hasf) {
			snprintf(f1, sizeof(f1), "%.3f", fwd.gbps);
			snprintf(f2, sizeof(f2), "%.0f", fwd.pps);
			snprintf(f3, sizeof(f3), "%.3f", ratio);
		}
		printf("{\"transport\":\"%s\",\"worker_transport\":\"%s\",\"remote_hosts\":%u,"
		       "\"workers\":%u,\"cores\":%u,\"chunk_bytes\":%u,"
		       "\"dtype\":\"%s\",\"seconds\":%.3f,\"gbps\":%.3f,\"per_core_gbps\":%.3f,"
		       "\"pps\":%.0f,\"results_per_s\":%.0f,\"retransmits_per_s\":%.0f,"
		       "\"forward_gbps\":%s,\"forward_pps\":%s,\"ratio\":%s,"
		       "\"cores_per_100g\":%.2f}\n",
		       tr, wt, o.n_host, o.workers, cores, o.chunk, o.dtype, agg.secs, agg.gbps,
		       per_core, agg.pps, agg.results_ps, agg.retx_ps, f1, f2, f3, cp100);
		return 0;
	}
	printf("tally-perf line: tallyd on %s + %u %s worker(s)%s%s, %u datapath core(s), "
	       "chunk %u B %s, %.1f s per run\n", ln_where(&o), o.workers, wt,
	       o.n_host ? " on remote hosts via " : "", o.n_host ? o.remote[0] : "", cores,
	       o.chunk, o.dtype, o.seconds);
	if (hasf)
		printf("  forward (--io-forward): %8.2f Gbit/s of chunk payload, %9.0f pkt/s\n",
		       fwd.gbps, fwd.pps);
	else
		printf("  forward (--io-forward): not measured (a running tallyd)\n");
	printf("  aggregation:            %8.2f Gbit/s of gradients summed (%.2f per core), "
	       "%.0f pkt/s in, %.0f results/s, %.0f retransmits/s\n",
	       agg.gbps, per_core, agg.pps, agg.results_ps, agg.retx_ps);
	if (hasf)
		printf("  ratio aggregation / forward: %.3f   ", ratio);
	printf("cores per 100G port: %.1f\n", cp100);
	if (hasf)
		printf("  tallyd (forward)   %s\n  tallyd (aggregate) %s\n  %s\n", fwd.totals,
		       agg.totals, agg.engine);
	return 0;
}
